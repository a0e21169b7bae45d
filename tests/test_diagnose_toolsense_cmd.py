"""`kate diagnose name=toolsense` end to end on scripted models (small limits): a catalogue file,
a word embedder, a scripted writer (its first query answer names a tool outside the pool, which the
checks reject), a scripted acting model, a tiny random Llama for constrained selection; the summary,
files and report section; a rerun asks neither the writer nor the acting model anything."""

from __future__ import annotations

import json

from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.diagnose.report import write_report
from kate.diagnose.toolsense import save_catalogue
from kate.diagnose_cmd import run_diagnose
from kate.llm.base import completion_from_text
from tests.test_diagnose_toolsense import catalogue, scripted_writer

ASKED = {"writer": 0, "user": 0}


class ScriptedWriter:
    """The generation prompts' scripted answers; on seed 0 a query answer names a tool outside the pool."""

    name = "scripted-writer"

    def chat(self, messages, tools=None, *, n=1, temperature=0.0, max_tokens=256, seed=None, stop=None,
             logprobs=False):  # fmt: skip
        ASKED["writer"] += 1
        text = messages[-1]["content"]
        if "Candidate tools:" in text and seed == 0:
            return [completion_from_text(json.dumps({"query": "Do it", "relevant_tools": ["not_a_tool"]}))] * n
        return [completion_from_text(t) for t in scripted_writer(messages, tools, n)]


class ScriptedUser:
    """Answers selection prompts with the first listed tool, MCQs with A, yes/no questions with Yes."""

    name = "scripted-user"

    def chat(self, messages, tools=None, *, n=1, temperature=0.0, max_tokens=256, seed=None, stop=None,
             logprobs=False):  # fmt: skip
        ASKED["user"] += 1
        text = messages[-1]["content"]
        if text.startswith("Tools:"):
            answer = next(line[2:].split(":")[0] for line in text.splitlines() if line.startswith("- "))
        else:
            answer = "A" if "letter" in text else "Yes"
        return [completion_from_text(answer)] * n


def test_toolsense_end_to_end_on_scripted_models(tmp_path):
    save_catalogue(tmp_path / "catalogue.jsonl", catalogue(20))
    overrides = ["name=toolsense", "llm=fake", "llm._target_=tests.test_diagnose_toolsense_cmd.ScriptedUser",
                 "llm.script=???", "llm.repeat_last=???", "hf._target_=tests.test_diagnose_cmd.TinyHF", "hf.model=tiny",
                 f"toolsense.catalogue={tmp_path / 'catalogue.jsonl'}",
                 "toolsense.embedder._target_=tests.test_diagnose_toolsense.WordEmbedder",
                 "+toolsense.writer._target_=tests.test_diagnose_toolsense_cmd.ScriptedWriter",
                 "toolsense.queries_per_tier=2", "toolsense.mcq=3", "toolsense.qa=4", "progress=false",
                 f"out_dir={tmp_path / 'out'}"]  # fmt: skip
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("diagnose", overrides=overrides)
    out = run_diagnose(cfg)["toolsense"]
    gen = out["generation"]
    assert gen["writer"] == gen["judge"] == "scripted-writer" and gen["queries"] == {"tier1": 2, "tier2": 2, "tier3": 2}
    assert gen["stats"]["query_t1"]["a tool outside the pool"] == 2 and gen["qa_yes"] == 2
    methods = out["selection"]["methods"]
    assert set(methods) == {"free", "constrained", "embedding_pool", "embedding_catalogue"}
    assert methods["free"]["tier1"]["recall@1"] == 1.0 and methods["free"]["all"]["n"] == 6
    for k in (1, 3, 5):  # free@k / constrained@k (undefined where constrained@k is 0)
        c, f = methods["constrained"]["all"][f"recall@{k}"], methods["free"]["all"][f"recall@{k}"]
        assert out["selection"]["internalization"]["all"][f"recall@{k}"] == (f / c if c else None)
    assert out["mcq"]["n"] == 3 and out["qa"] == {"n": 4, "accuracy": 0.5, "baseline": 0.5, "unparsed": 0}
    folder = tmp_path / "out" / "toolsense"
    for name in ("catalogue.jsonl", "queries.jsonl", "mcq.jsonl", "qa.jsonl", "llm_cache.jsonl", "constrained.jsonl",
                 "free/records.jsonl", "mcq/meta.json", "qa/records.jsonl", "summary.json"):  # fmt: skip
        assert (folder / name).exists(), name
    constrained = [json.loads(line) for line in (folder / "constrained.jsonl").read_text().splitlines()]
    pools = {json.loads(line)["id"]: json.loads(line)["pool"] for line in (folder / "queries.jsonl").read_text().splitlines()}
    assert all(sorted(r["ranked"]) == sorted(pools[r["id"]]) for r in constrained)  # only pool names come out
    asked = dict(ASKED)
    assert run_diagnose(cfg)["toolsense"]["selection"] == out["selection"] and ASKED == asked  # nothing asked again
    report = write_report(tmp_path / "out").read_text()
    assert "## Tool knowledge (ToolSense probes)" in report and "| constrained | tier1 | 2 |" in report

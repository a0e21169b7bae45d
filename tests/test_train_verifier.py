"""The verifier over width samples: rows, labels (BFCL's official checker), pairs and folds from a small
synthetic records file built on real training-half BFCL entries; a test-half id refused; the
verifier-ranked votes with a fake scorer; and (model tier) 2 RewardTrainer steps on the 135M model,
resumed once, whose adapter then scores candidates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kate.llm.base import Completion
from kate.llm.fake import FakeChatModel
from kate.llm.registry import SMALL_TEST_MODEL
from kate.sampling.policy import WidthSampler
from kate.sampling.verifier import VerifiedVote, VerifierSampler, candidate_text, verifier_vote
from kate.sampling.vote import AGGREGATORS, majority_vote
from kate.toolcall import ToolCall
from kate.train.config import VerifierJobConfig
from kate.train.verifier_data import candidate_rows, fold, in_fold, pairs_sha256, preference_pairs

RIGHT = {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}  # simple_python_0's answer
WRONG = {"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 6}}
HYPOT_WRONG = {"name": "math.hypot", "arguments": {"x": 4, "y": 6}}  # simple_python_2 wants x=4, y=5


def record(entry_id: str, category: str, prompt: str, candidates: list[tuple[str, list[dict], list[str]]]) -> dict:
    """A width record as bench writes it: ``candidates`` as (kind, calls, the raw texts of its samples)."""
    outputs, listed = [], []
    for kind, calls, texts in candidates:
        samples = list(range(len(outputs), len(outputs) + len(texts)))
        outputs += texts
        listed.append({"kind": kind, "calls": calls, "samples": samples, "votes": len(texts), "valid": True})
    vote = {"method": "valid_majority", "chosen": listed[0], "candidates": listed, "n": len(outputs)}
    return {"id": entry_id, "category": category, "prompt": [{"role": "user", "content": prompt}],
            "outputs": outputs, "vote": vote, "valid": None}


RECORDS = [
    record("simple_python_0", "simple_python",
           "Find the area of a triangle with a base of 10 units and height of 5 units.",
           [("call", [RIGHT], [json.dumps(RIGHT), json.dumps(RIGHT)]), ("call", [WRONG], [json.dumps(WRONG)]),
            ("no_call", [], ["I cannot compute that."]), ("malformed", [], ["{\"name\": calculate"])]),
    record("irrelevance_0", "irrelevance", "What is the capital of France?",
           [("no_call", [], ["Paris.", "Paris is the capital.", "Paris"]),
            ("call", [RIGHT], [json.dumps(RIGHT), json.dumps(RIGHT)])]),
    record("simple_python_2", "simple_python", "Calculate the hypotenuse of a right triangle given 4 and 5.",
           [("call", [HYPOT_WRONG], [json.dumps(HYPOT_WRONG)] * 4)]),
]  # fmt: skip


def write_records(path: Path, records: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


@pytest.fixture
def records_file(tmp_path) -> str:
    return write_records(tmp_path / "records.jsonl", RECORDS)


def test_rows_carry_the_official_label_text_and_share(records_file):
    rows, counts = candidate_rows([records_file], held_out=0.0)
    assert counts == {"records": 3, "malformed_left_out": 1, "rows": 6, "right": 2, "entries": 3}
    first = [r for r in rows if r["id"] == "simple_python_0"]
    assert [(r["kind"], r["label"], r["votes"]) for r in first] == [("call", True, 2), ("call", False, 1),
                                                                   ("no_call", False, 1)]
    assert first[0]["text"] == json.dumps(RIGHT) and first[2]["text"] == "I cannot compute that."
    assert first[0]["share"] == pytest.approx(2 / 5) and first[0]["tools"][0]["function"]["name"] == RIGHT["name"]
    assert first[0]["prompt"] == RECORDS[0]["prompt"] and {r["fold"] for r in rows} == {"train"}
    irrelevance = [(r["kind"], r["label"]) for r in rows if r["id"] == "irrelevance_0"]
    assert irrelevance == [("no_call", True), ("call", False)]
    assert [r["label"] for r in rows if r["id"] == "simple_python_2"] == [False]


def test_pairs_are_right_over_wrong_of_one_entry_and_one_sided_entries_are_counted(records_file):
    rows, _ = candidate_rows([records_file], held_out=0.0)
    pairs, counts = preference_pairs(rows)
    assert counts == {"all_wrong": 1, "pairs": 3, "entries_with_pairs": 2}
    assert [(p["id"], p["chosen"], p["rejected"]) for p in pairs] == [
        ("irrelevance_0", "Paris.", json.dumps(RIGHT)),
        ("simple_python_0", json.dumps(RIGHT), json.dumps(WRONG)),
        ("simple_python_0", json.dumps(RIGHT), "I cannot compute that."),
    ]
    capped, capped_counts = preference_pairs(rows, max_per_entry=1, seed=3)
    assert len(capped) == 2 and capped_counts["capped"] == 1
    assert capped == preference_pairs(rows, max_per_entry=1, seed=3)[0]  # deterministic
    assert pairs_sha256(pairs) == pairs_sha256(preference_pairs(rows)[0]) != pairs_sha256(capped)


def test_the_same_entry_in_two_runs_gives_its_rows_once(records_file, tmp_path):
    other = write_records(tmp_path / "other.jsonl", RECORDS[:1])
    rows, counts = candidate_rows([records_file, other], held_out=0.0)
    assert counts["rows"] == 6 and counts["duplicates"] == 3 and counts["records"] == 4


def test_a_test_half_record_is_refused_naming_the_file_and_id(tmp_path):
    bad = dict(RECORDS[0], id="simple_python_1")
    path = write_records(tmp_path / "mixed.jsonl", [RECORDS[1], bad])
    with pytest.raises(ValueError, match=r"mixed\.jsonl:2: 'simple_python_1' is from KATE's test half"):
        candidate_rows([path])
    with pytest.raises(ValueError, match="test half"):
        from kate.train.verifier import run_verifier

        run_verifier(VerifierJobConfig(records=[path], output_dir=str(tmp_path / "out")))  # before any model loads
    assert not (tmp_path / "out").exists()


def test_bad_input_names_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        candidate_rows([str(tmp_path / "nope.jsonl")])
    no_vote = write_records(tmp_path / "novote.jsonl", [{"id": "simple_python_0", "category": "simple_python"}])
    with pytest.raises(ValueError, match=r"novote\.jsonl:1: 'simple_python_0' has no width vote"):
        candidate_rows([no_vote])
    unknown = write_records(tmp_path / "unknown.jsonl", [dict(RECORDS[0], id="simple_python_99998")])
    with pytest.raises(ValueError, match=r"unknown\.jsonl:1: no BFCL simple_python training-half entry"):
        candidate_rows([unknown])
    from kate.train.verifier import check_settings

    with pytest.raises(ValueError, match="records"):
        check_settings(VerifierJobConfig())


def test_folds_are_a_seeded_deterministic_share_of_entry_ids(records_file):
    ids = [f"simple_python_{2 * i}" for i in range(2000)]
    held = [i for i in ids if fold(i, 0.2) == "held_out"]
    assert 0.17 < len(held) / len(ids) < 0.23 and held == [i for i in ids if fold(i, 0.2) == "held_out"]
    assert held != [i for i in ids if fold(i, 0.2, seed=1) == "held_out"]
    assert all(fold(i, 0.0) == "train" for i in ids[:50])
    rows, _ = candidate_rows([records_file], held_out=0.5, seed=0)
    for entry in {r["id"] for r in rows}:  # an entry's rows are all in one fold
        assert len({r["fold"] for r in rows if r["id"] == entry}) == 1
    assert len(in_fold(rows, "train")) + len(in_fold(rows, "held_out")) == len(rows)
    with pytest.raises(ValueError, match="held_out"):
        fold("x", 1.0)


class FakeScorer:
    """Scores by a substring table; remembers what it was asked."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table, self.asked = table, []

    def score(self, messages, tools, texts):
        self.asked.append(list(texts))
        return [next((v for k, v in self.table.items() if k in t), 0.0) for t in texts]


TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]  # fmt: skip
PARIS, ROME = ToolCall("weather", {"city": "Paris"}), ToolCall("weather", {"city": "Rome"})
BAD = ToolCall("weather", {"town": "Oslo"})  # not expressible with the tools


def pool() -> list[Completion]:
    return [Completion("p", (PARIS,)), Completion("p", (PARIS,)), Completion("p", (PARIS,)), Completion("r", (ROME,)),
            Completion("It is sunny."), Completion("x", (BAD,)), Completion("{bro", parse_error="cut")]


def test_best_of_n_picks_the_top_score_and_records_every_score():
    scorer = FakeScorer({"Rome": 2.0, "Paris": -1.0, "Oslo": 9.0})
    messages = [{"role": "user", "content": "weather?"}]
    vote = verifier_vote(scorer, messages, TOOLS, pool(), mode="best")
    assert isinstance(vote, VerifiedVote) and vote.chosen.calls == (ROME,) and vote.method == "verifier_best"
    plain = AGGREGATORS["valid_majority"](None, messages, TOOLS, pool())
    assert [c.key for c in vote.candidates] == [c.key for c in plain.candidates] and plain.chosen.calls == (PARIS,)
    record = vote.to_dict()
    scored = {json.dumps(c["calls"]): c["score"] for c in record["candidates"]}
    assert record["chosen"]["score"] == 2.0 and record["verifier"] == {"mode": "best", "chosen_score": 2.0}
    assert None in scored.values() and len(scorer.asked[0]) == 4  # the malformed one is not scored
    assert "It is sunny." in scorer.asked[0]  # a no-call candidate is read as its first sample's text
    unchecked = verifier_vote(scorer, messages, TOOLS, pool(), mode="best", valid_first=False)
    assert unchecked.chosen.calls == (BAD,)  # only valid_first keeps the schema-invalid call out


def test_weighted_vote_is_votes_times_sigmoid_of_the_score():
    messages = [{"role": "user", "content": "weather?"}]
    strong = verifier_vote(FakeScorer({"Rome": 2.0, "Paris": -1.0}), messages, TOOLS, pool(), mode="weighted")
    assert strong.chosen.calls == (ROME,)  # 1 x 0.88 > 3 x 0.27
    weak = verifier_vote(FakeScorer({"Rome": 0.0, "Paris": -1.0}), messages, TOOLS, pool(), mode="weighted")
    assert weak.chosen.calls == (PARIS,) and weak.method == "verifier_weighted"  # 3 x 0.27 > 1 x 0.5
    assert weak.margin == AGGREGATORS["valid_majority"](None, messages, TOOLS, pool()).margin  # the samples' agreement


def test_all_malformed_fails_without_asking_and_bad_scores_are_refused():
    scorer = FakeScorer({})
    failed = verifier_vote(scorer, [], TOOLS, [Completion("{", parse_error="cut")] * 2)
    assert failed.failed and failed.chosen.malformed and scorer.asked == []
    assert failed.to_dict()["chosen"]["score"] is None

    class Broken:
        def score(self, messages, tools, texts):
            return [float("nan")] * len(texts)

    with pytest.raises(ValueError, match="finite"):
        verifier_vote(Broken(), [], TOOLS, pool())
    with pytest.raises(ValueError, match="mode"):
        verifier_vote(scorer, [], TOOLS, pool(), mode="nope")


def test_verifier_sampler_draws_one_request_and_keeps_the_existing_aggregates():
    before = dict(AGGREGATORS)
    call = '{{"name": "weather", "arguments": {{"city": "{}"}}}}'
    texts = [call.format("Paris")] * 3 + [call.format("Rome")]
    model = FakeChatModel([texts])
    sampler = VerifierSampler(FakeScorer({"Rome": 3.0}), mode="best", width=WidthSampler(n=4, logprobs=False))
    step = sampler.act(model, [{"role": "user", "content": "weather?"}], TOOLS, seed=1)
    assert step.calls == (ROME,) and len(step.completions) == 4 and len(model.requests) == 1
    assert model.requests[0]["n"] == 4 and step.vote.to_dict()["verifier"]["chosen_score"] == 3.0
    assert AGGREGATORS == before and "verifier_best" not in AGGREGATORS
    with pytest.raises(TypeError, match="score"):
        VerifierSampler(object())


def test_candidate_text_matches_what_the_verifier_trained_on():
    from kate.train.verifier_data import candidate_text as trained_text

    completions = [Completion(json.dumps(RIGHT), (ToolCall.from_dict(RIGHT),)), Completion("I cannot.")]
    vote = majority_vote(completions)
    record = {"kind": "call", "calls": [RIGHT], "samples": [0]}
    by_kind = {c.kind: c for c in vote.candidates}
    assert candidate_text(by_kind["call"], completions) == trained_text(record, [c.text for c in completions])
    assert candidate_text(by_kind["no_call"], completions) == trained_text(
        {"kind": "no_call", "calls": [], "samples": [1]}, [c.text for c in completions]) == "I cannot."


def test_the_job_config_composes_from_conf_train_verifier():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from kate.cli import CONF_DIR
    from kate.train.config import JOBS, register
    from kate.train_cmd import typed

    register()
    assert "verifier" in JOBS
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("train/verifier", overrides=["records=[a.jsonl]", "held_out=0.3"])
        assert OmegaConf.get_type(cfg) is VerifierJobConfig
        job = typed(cfg, VerifierJobConfig)
        assert job.records == ["a.jsonl"] and job.held_out == 0.3 and job.model == "qwen2.5-coder-0.5b-instruct-q4_k_m"


@pytest.mark.model
def test_verifier_trains_two_steps_resumes_and_scores_candidates(tmp_path):
    import torch

    torch.set_num_threads(1)
    from kate.train.verifier_model import Verifier
    from kate.train.verifier import run_verifier

    records = write_records(tmp_path / "records.jsonl", RECORDS)
    ids = ("simple_python_0", "irrelevance_0")  # the entries with pairs: one trained on, one held out
    seed = next(s for s in range(200) if {fold(i, 0.5, s) for i in ids} == {"train", "held_out"})
    cfg = VerifierJobConfig(model=SMALL_TEST_MODEL, records=[records], held_out=0.5, fold_seed=seed,
                            output_dir=str(tmp_path / "verifier"), max_steps=2, save_steps=1, logging_steps=1,
                            gradient_accumulation_steps=1, threads=1, calibration_bins=2)  # fmt: skip
    summary = run_verifier(cfg)
    assert summary["global_step"] == 2 and summary["pairs"]["trained_on"] >= 1 and summary["resumed_from"] is None
    held = json.loads((tmp_path / "verifier" / "held_out.json").read_text())
    assert held["pairs"] >= 1 and 0.0 <= held["pairwise_accuracy"] <= 1.0 and held["calibration"]
    assert (tmp_path / "verifier" / "calibration.png").stat().st_size > 0
    final = Path(summary["saved"]["final"])
    adapter = json.loads((final / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == SMALL_TEST_MODEL and adapter["task_type"] == "SEQ_CLS"
    from safetensors import safe_open

    with safe_open(str(final / "adapter_model.safetensors"), "pt") as saved:
        assert any("score" in key for key in saved.keys())  # the trained head is saved with the adapter
    verifier = Verifier(final, threads=1)
    rows = {(r["id"], r["candidate"]): r for r in in_fold(candidate_rows([records], held_out=0.5, seed=seed)[0],
                                                         "held_out")}
    assert rows and len(held["scores"]) == len(rows)
    for s in held["scores"]:  # the folder scores as the trained network did at the end of training
        row = rows[(s["id"], s["candidate"])]
        assert verifier.score(row["prompt"], row["tools"], [row["text"]])[0] == pytest.approx(s["score"], abs=1e-4)
    from kate.bfcl.data import load_entries

    tools, texts = load_entries("simple_python", "train")[0].tools, [json.dumps(RIGHT), json.dumps(WRONG)]
    scores = verifier.score(RECORDS[0]["prompt"], tools, texts)
    assert len(scores) == 2 and all(isinstance(s, float) for s in scores)
    step = VerifierSampler(verifier, width=WidthSampler(n=2, logprobs=False)).act(
        FakeChatModel([texts]), RECORDS[0]["prompt"], tools)
    assert {c["score"] for c in step.vote.to_dict()["candidates"]} <= set(scores) | {None}
    more = run_verifier(VerifierJobConfig(**{**cfg.__dict__, "max_steps": 3, "evaluate": False}))
    assert more["resumed_from"].endswith("checkpoint-2") and more["global_step"] == 3


def test_every_verifier_setting_has_help_text():
    import dataclasses

    missing = [f.name for f in dataclasses.fields(VerifierJobConfig) if not f.metadata.get("help")]
    assert not missing

"""The first-token probe: Diagnostics I's P(call) (one implementation) over a probe set, batched,
on the 135M model; checkpoint folders found as TRL writes them; the trajectory over two saved
checkpoints (JSONL and a log-scale PNG), resumed without reloading."""

from __future__ import annotations

import copy
import json

import pytest

from kate.diagnose.first_token import (
    PLOT_FILE,
    TRAJECTORY_FILE,
    ProbePrompt,
    checkpoint_folders,
    checkpoint_trajectory,
    first_token_probe,
    load_probe_set,
    probe_agreement,
    probe_summary,
    save_probe_set,
)
from kate.diagnose.pcall import opening_ids, opening_probability, p_call

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function",
           "function": {"name": "get_weather", "description": "Weather of a city.", "parameters": CITY}}
PROBES = [
    ProbePrompt("paris", "call", ({"role": "user", "content": "What is the weather in Paris right now?"},), (WEATHER,)),
    ProbePrompt("rome", "call", ({"role": "user", "content": "Weather in Rome, please."},), (WEATHER,)),
    ProbePrompt("spell", "near_miss", ({"role": "user", "content": "How do I spell `get_weather`?"},), (WEATHER,),
                False),
]  # fmt: skip


def test_probe_sets_round_trip_and_refuse_bad_rows(tmp_path):
    save_probe_set(tmp_path / "probes.jsonl", PROBES)
    assert load_probe_set(tmp_path / "probes.jsonl") == PROBES
    (tmp_path / "bad.jsonl").write_text(json.dumps({"category": "x"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl: row 1"):
        load_probe_set(tmp_path / "bad.jsonl")


def test_summary_on_known_values():
    rows = [{"expects_call": True, "p_opening": 1e-2, "p_call": 0.9},
            {"expects_call": True, "p_opening": 1e-4, "p_call": 0.1},
            {"expects_call": False, "p_opening": 0.5, "p_call": 0.6}]  # fmt: skip
    summary = probe_summary(rows)
    assert summary["call_due"]["n"] == 2 and summary["call_due"]["geomean"] == pytest.approx(1e-3)
    assert summary["call_due"]["min"] == 1e-4 and summary["call_due"]["calls"] == 0.5
    assert summary["no_call_due"] == {"n": 1, "mean": 0.5, "geomean": pytest.approx(0.5), "median": 0.5, "min": 0.5,
                                      "calls": 1.0}  # fmt: skip
    assert probe_summary(rows[2:])["call_due"] is None
    rows = [{**r, "id": i} for i, r in enumerate(rows)]
    records = [{"id": 0, "calls": [{"name": "f"}]}, {"id": 1, "calls": []}, {"id": 2, "calls": []}, {"id": 9}]
    found = probe_agreement(rows, records)
    assert found["n"] == 3 and found["agree"] == pytest.approx(2 / 3)
    assert (found["p_high_called"], found["p_high_not_called"], found["p_low_not_called"]) == (1, 1, 1)


def test_checkpoint_folders_as_trl_writes_them(tmp_path):
    for step in (10, 2, 100):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "config.json").write_text("{}")
    (tmp_path / "runs").mkdir()
    assert [s for s, _ in checkpoint_folders(tmp_path)] == [2, 10, 100]
    other = tmp_path / "models"
    for name in ("b", "a"):
        (other / name).mkdir(parents=True)
        (other / name / "adapter_config.json").write_text("{}")
    (other / "a" / "trainer_state.json").write_text(json.dumps({"global_step": 7}))
    assert [(s, p.name) for s, p in checkpoint_folders(other)] == [(7, "a"), (None, "b")]
    assert checkpoint_folders(other / "a") == [(7, other / "a")]
    (tmp_path / "checkpoint-3").mkdir()
    with pytest.raises(ValueError, match="checkpoint-3"):
        checkpoint_folders(tmp_path)
    with pytest.raises(FileNotFoundError):
        checkpoint_folders(tmp_path / "missing")


@pytest.mark.model
def test_first_token_probe_is_pcalls_on_the_135m_model(small_hf):
    [greedy] = small_hf.chat(list(PROBES[0].messages), list(PROBES[0].tools), max_tokens=1, logprobs=True)
    opening = greedy.logprobs[0].token  # treat the greedy first token of prompt 0 as "the call opening"
    rows = first_token_probe(small_hf, PROBES, openings=(opening, "<tool_call>"), batch_size=2)
    ids = opening_ids(small_hf.tokenizer, (opening, "<tool_call>"))
    assert [r["id"] for r in rows] == ["paris", "rome", "spell"]
    for probe, row in zip(PROBES, rows):
        logits = small_hf.next_token_logits(list(probe.messages), list(probe.tools))  # unbatched
        assert row["p_opening"] == pytest.approx(opening_probability(logits, ids), rel=1e-3, abs=1e-7)
        assert row["p_call"] == pytest.approx(p_call(small_hf, probe.messages, probe.tools, ids), rel=1e-3, abs=1e-7)
        assert row["p_call"] > 0.5 or not row["top_is_opening"]  # an opening on top outranks every other token
    assert rows[0]["top_is_opening"] and rows[0]["p_call"] > 0.5


def save_checkpoint(hf, path):
    clone = copy.deepcopy(hf.model)
    clone.hf_quantizer = None  # loaded from GGUF: the dequantized weights are plain tensors
    if hasattr(clone.config, "quantization_config"):
        del clone.config.quantization_config
    clone.save_pretrained(path)
    hf.tokenizer.save_pretrained(path, save_jinja_files=False)
    config = json.loads((path / "tokenizer_config.json").read_text())
    if not config.get("chat_template"):
        config["chat_template"] = hf.tokenizer.chat_template
        (path / "tokenizer_config.json").write_text(json.dumps(config))
    (path / "trainer_state.json").write_text(json.dumps({"global_step": int(path.name.split("-")[1])}))


@pytest.mark.model
def test_trajectory_over_two_saved_checkpoints(small_hf, tmp_path):
    folder = tmp_path / "run"
    for step in (1, 2):
        save_checkpoint(small_hf, folder / f"checkpoint-{step}")
    save_probe_set(tmp_path / "probes.jsonl", PROBES)
    rows = checkpoint_trajectory(folder, tmp_path / "probes.jsonl", out_dir=tmp_path / "out", device="cpu",
                                 progress=False)  # fmt: skip
    assert [(r["checkpoint"], r["step"]) for r in rows] == [("checkpoint-1", 1), ("checkpoint-2", 2)]
    direct = first_token_probe(small_hf, PROBES)
    for row in rows:  # the same weights: the same probe values as the loaded model
        assert [p["p_opening"] for p in row["prompts"]] == pytest.approx([d["p_opening"] for d in direct], rel=1e-3)
        assert row["summary"]["call_due"]["n"] == 2 and row["summary"]["no_call_due"]["n"] == 1
    stored = [json.loads(line) for line in (tmp_path / "out" / TRAJECTORY_FILE).read_text().splitlines()]
    assert [r["checkpoint"] for r in stored] == ["checkpoint-1", "checkpoint-2"]
    png = (tmp_path / "out" / PLOT_FILE).read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 1000

    def no_reload(path):
        raise AssertionError(f"{path} was probed already")

    again = checkpoint_trajectory(folder, PROBES, out_dir=tmp_path / "out", load=no_reload, progress=False)
    assert [r["prompts"] for r in again] == [r["prompts"] for r in rows]
    with_base = checkpoint_trajectory(folder, PROBES, out_dir=tmp_path / "out", load=no_reload, base=direct,
                                      base_name="untrained", progress=False)  # fmt: skip
    assert [(r["checkpoint"], r["step"]) for r in with_base] == [("untrained", 0), ("checkpoint-1", 1),
                                                                 ("checkpoint-2", 2)]  # fmt: skip
    assert with_base[0]["summary"] == probe_summary(direct)
    with pytest.raises(ValueError, match="probe set"):
        checkpoint_trajectory(folder, PROBES, out_dir=tmp_path / "out", load=no_reload, base=direct[:1])

"""The step dataset on a few BFCL training dialogues and a trajectory file: prompts from kate's own
loop, the self hit (and its sibling dialogues) excluded, distractors present, no-call steps kept,
final answers written and labelled, saved and read back with its manifest."""

from __future__ import annotations

import json

import pytest

from kate.bfcl.data import load_entries
from kate.knowledge.trajectory import write_trajectories, trajectory_from_dict
from kate.llm.fake import FakeChatModel
from kate.llm.registry import DEFAULT_AGENT_MODEL
from kate.train.data import MANIFEST, load_dataset_dir
from kate.train.steps import sibling_ids

TRAJECTORY = {
    "id": "own_1", "source": "own", "split": "train",
    "tools": [{"type": "function", "function": {"name": "add", "description": "Add two numbers.",
               "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                              "required": ["a", "b"]}}}],
    "turns": [{"user": "What is 2 plus 3?", "calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}], "results": ["5"]},
              {"user": "Thanks!", "calls": [], "answer": "You're welcome."}],
}  # fmt: skip


@pytest.fixture(scope="module")
def tokenizer():
    from kate.train.render import load_tokenizer

    return load_tokenizer(DEFAULT_AGENT_MODEL)


@pytest.fixture(scope="module")
def built(tmp_path_factory, tokenizer):
    from omegaconf import OmegaConf

    from kate.train.build import build_data
    from kate.train.config import DataConfig
    from kate.train_cmd import data_knowledge

    tmp = tmp_path_factory.mktemp("steps")
    traj = tmp / "own.jsonl"
    write_trajectories(traj, [trajectory_from_dict(TRAJECTORY)])
    nodes = {kind: OmegaConf.load(f"conf/retrieval/{kind}.yaml") for kind in ("single_turn", "multi_turn")}
    knowledge = data_knowledge({kind: {k: v for k, v in node.items() if k != "defaults"} for kind, node in nodes.items()})
    cfg = DataConfig(model=DEFAULT_AGENT_MODEL, categories=["multi_turn_base", "multiple", "irrelevance"], limit=2,
                     trajectories=[str(traj)], own_tools_split="train", out_dir=str(tmp / "data"))
    cfg.writer.cache = str(tmp / "answers.jsonl")
    cfg.distractors.rate = 1.0
    writer = FakeChatModel(["The task is done."], repeat_last=True, name="fake-writer")
    manifest = build_data(cfg, writer=writer, knowledge=knowledge, tokenizer=tokenizer, progress=False)
    return cfg, manifest, writer


def test_one_row_per_assistant_step_with_answers_after_each_turn(built):
    cfg, manifest, _ = built
    rows, _ = load_dataset_dir(cfg.out_dir)
    entry = load_entries("multi_turn_base", "train", 1)[0]
    mine = [r for r in rows if r["source_id"] == entry.id]
    from kate.bfcl.data import ground_truth_calls

    gt = ground_truth_calls(entry)
    assert len(mine) == sum(len(t) for t in gt) + len(gt)  # every call, then one answer per turn
    for t, calls in enumerate(gt):
        turn = sorted((r for r in mine if r["turn"] == t), key=lambda r: r["index"])
        assert [r["kind"] for r in turn] == ["call"] * len(calls) + ["answer"]
        assert [json.loads(r["target_calls"]) for r in turn[:-1]] == [[c.to_dict()] for c in calls]
        assert turn[-1]["answer_writer"] == "llm:fake-writer" and turn[-1]["target_answer"] == "The task is done."
    # each step's prompt holds the real results of the earlier calls (executed on BFCL's backends)
    last = json.loads(sorted(mine, key=lambda r: (r["turn"], r["index"]))[-1]["prompt"])
    assert any(m["role"] == "tool" for m in last) and last[0]["role"] == "system"


def test_no_call_steps_stay_in(built):
    cfg, _, _ = built
    rows, _ = load_dataset_dir(cfg.out_dir)
    irrelevant = [r for r in rows if r["category"] == "irrelevance"]
    assert irrelevant and all(r["kind"] == "no_call" and r["target_calls"] == "[]" for r in irrelevant)
    assert all(r["target_answer"] == cfg.no_call_answer for r in irrelevant)


def test_no_step_sees_knowledge_made_from_its_own_dialogue_or_siblings(built):
    cfg, _, _ = built
    rows, _ = load_dataset_dir(cfg.out_dir)
    shown = 0
    for row in rows:
        own = set(sibling_ids(row["source_id"]))
        for hit in json.loads(row["hits"]):
            shown += 1
            assert hit["id"].split(":", 1)[1].split("#")[0] not in own
    assert shown > 0


def test_distractors_name_functions_the_tools_do_not_offer(built):
    cfg, manifest, _ = built
    rows, _ = load_dataset_dir(cfg.out_dir)
    with_distractor = [r for r in rows if r["has_distractor"]]
    assert with_distractor and manifest["stats"]["with_distractor"] == len(with_distractor)
    entries = {e["id"]: e for e in map(json.loads, open("knowledge_bases/bfcl_train/entries.jsonl"))}
    for row in with_distractor:
        offered = {t["function"]["name"] for t in json.loads(row["tools"])}
        foreign = [h for h in json.loads(row["hits"]) if h.get("distractor")]
        assert foreign
        for hit in foreign:
            assert not set(entries[hit["id"]]["tool_names"]) <= offered
            user = [m for m in json.loads(row["prompt"]) if m["role"] == "user"]
            assert any(hit["text"] in m["content"] for m in user)  # shown in the prompt


def test_trajectory_files_give_steps_with_their_recorded_results_and_answers(built):
    cfg, _, _ = built
    rows, _ = load_dataset_dir(cfg.out_dir)
    own = sorted((r for r in rows if r["source_id"] == "own_1"), key=lambda r: (r["turn"], r["index"]))
    assert [r["kind"] for r in own] == ["call", "answer", "no_call"]
    last = json.loads(own[1]["prompt"])[-1]
    assert (last["role"], last["name"], last["content"]) == ("tool", "add", "5")
    assert own[2]["target_answer"] == "You're welcome."  # given in the file: not re-written


def test_the_own_tools_training_half_is_solved_by_its_own_task(built):
    from kate.tasks.own_tools import load_items

    cfg, manifest, _ = built
    rows, _ = load_dataset_dir(cfg.out_dir)
    own = [r for r in rows if r["category"] == "own_tools"]
    train = {i.id for i in load_items("train")}
    assert {r["source_id"] for r in own} == train  # the train half only, every question
    two = next(i for i in load_items("train") if i.kind == "two_calls")
    steps = sorted((r for r in own if r["source_id"] == two.id), key=lambda r: r["index"])
    assert [r["kind"] for r in steps] == ["call", "call", "answer"]
    results = [m for m in json.loads(steps[-1]["prompt"]) if m["role"] == "tool"]
    assert len(results) == 2 and all(m["content"] and not m["content"].startswith("Error") for m in results)
    assert manifest["own_tools"]["split"] == "train"


def test_the_own_tools_test_half_is_refused(tmp_path):
    from kate.train.build import build_data
    from kate.train.config import DataConfig

    cfg = DataConfig(model=DEFAULT_AGENT_MODEL, categories=[], own_tools_split="test", out_dir=str(tmp_path))
    with pytest.raises(ValueError, match="train half"):
        build_data(cfg, writer=FakeChatModel([]), knowledge=None, tokenizer=object())


def test_completions_are_the_template_s_own_format_ending_with_end_of_turn(built, tokenizer):
    cfg, _, _ = built
    rows, _ = load_dataset_dir(cfg.out_dir)
    for row in rows:
        assert row["completion_text"].endswith(tokenizer.eos_token)
        assert row["prompt_text"].endswith("<|im_start|>assistant\n")
        if row["kind"] == "call":
            assert row["completion_text"].startswith("<tool_call>\n")


def test_manifest_records_sources_split_and_writer(built):
    cfg, manifest, writer = built
    on_disk = json.loads((__import__("pathlib").Path(cfg.out_dir) / MANIFEST).read_text())
    assert on_disk["sha256"] == manifest["sha256"] and on_disk["stats"]["steps"] == manifest["stats"]["steps"]
    assert set(manifest["source_data"]) == {"multi_turn_base", "multiple", "irrelevance"}
    assert manifest["writer"]["labels"] == manifest["stats"]["answer_writer"] == {"llm:fake-writer": len(
        [r for r in load_dataset_dir(cfg.out_dir)[0] if r["answer_writer"]])}
    assert set(manifest["stats"]["part"]) <= {"sft", "rl"} and manifest["knowledge"]["distractors"]["rate"] == 1.0
    assert len(writer.requests) == manifest["writer"]["asked"]


def test_a_rebuild_asks_the_writer_nothing(built, tokenizer):
    from kate.train.build import build_data

    cfg, manifest, _ = built
    again = FakeChatModel([], name="fake-writer")  # would raise if asked
    from dataclasses import replace

    elsewhere = replace(cfg, out_dir=cfg.out_dir + "_again")
    rebuilt = build_data(elsewhere, writer=again, knowledge=None, tokenizer=tokenizer, progress=False)
    assert rebuilt["writer"]["asked"] == 0 and rebuilt["writer"]["cached"] == sum(manifest["writer"]["labels"].values())


def test_a_missing_or_corrupt_manifest_fails_naming_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        load_dataset_dir(tmp_path)
    (tmp_path / MANIFEST).write_text("{not json")
    with pytest.raises(ValueError, match=MANIFEST):
        load_dataset_dir(tmp_path)


def _trainer_labels(tmp_path, examples, tokenizer):
    """The labels TRL's SFTTrainer builds for pre-tokenized examples (completion_only_loss)."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from kate.llm.registry import SMALL_TEST_MODEL
    from kate.train.model import load_for_training

    model, _ = load_for_training(SMALL_TEST_MODEL)
    dataset = Dataset.from_list([{"input_ids": e["input_ids"], "completion_mask": e["completion_mask"]} for e in examples])
    args = SFTConfig(output_dir=str(tmp_path), completion_only_loss=True, max_length=None, report_to="none", max_steps=1, bf16=False)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    return [row["labels"] for row in trainer.train_dataset]


def test_the_loss_covers_exactly_the_assistant_steps_calls_and_end_of_turn_included(built, tokenizer, tmp_path):
    from kate.train.examples import sft_examples

    cfg, _, _ = built
    rows, _ = load_dataset_dir(cfg.out_dir)
    rows = list(rows)
    for pack in ("step", "dialogue"):
        examples, counts = sft_examples(tokenizer, rows, pack=pack)
        assert counts["steps"] == len(rows) and counts["too_long"] == 0
        labels = _trainer_labels(tmp_path / pack, examples, tokenizer)
        by_source = {}
        for row in sorted(rows, key=lambda r: (r["turn"], r["index"])):
            by_source.setdefault(row["source_id"], []).append(row["completion_text"])
        seen = {}
        for example, label in zip(examples, labels):
            trained = [t for t, l in zip(example["input_ids"], label) if l != -100]
            assert [t for t, l in zip(example["input_ids"], label) if l != -100] == [
                t for t, m in zip(example["input_ids"], example["completion_mask"]) if m]
            seen.setdefault(example["source_id"], []).append(tokenizer.decode(trained))
        for source_id, completions in by_source.items():
            assert "".join(seen[source_id]) == "".join(completions)  # every step's tokens, nothing else
            assert all(c.endswith(tokenizer.eos_token) for c in completions)
        if pack == "dialogue":
            assert counts["packed_dialogues"] >= 2 and counts["examples"] < len(rows)


def test_call_format_json_writes_each_call_step_s_target_as_the_calls_json(built, tokenizer):
    from kate.toolcall import ToolCall
    from kate.toolcall.parse import from_json_text
    from kate.train.examples import sft_examples, with_call_format

    cfg, _, _ = built
    rows, _ = load_dataset_dir(cfg.out_dir)
    rows = list(rows)
    calls = [r for r in rows if r["kind"] == "call"]
    assert calls
    for row in rows:
        out = with_call_format(row, "json")
        if row["kind"] != "call":
            assert out == row  # answers and no-call steps as built
            continue
        text = out["completion_text"]
        assert "<tool_call>" not in text and text.endswith(tokenizer.eos_token)
        parsed = from_json_text(text.removesuffix(tokenizer.eos_token))
        want = tuple(ToolCall.from_dict(c) for c in json.loads(row["target_calls"]))
        assert parsed.ok and parsed.calls == want
    examples, counts = sft_examples(tokenizer, rows, pack="dialogue", call_format="json")
    assert counts["packed_dialogues"] == 0 and counts["examples"] == len(rows)  # the history keeps the template's form
    shown = [tokenizer.decode([t for t, m in zip(e["input_ids"], e["completion_mask"]) if m]) for e in examples]
    assert sum(s.startswith(("{", "[")) for s in shown) == len(calls)


def test_call_format_errors_name_the_format_or_the_row():
    from kate.train.examples import with_call_format

    row = {"id": "x_1", "kind": "call", "target_calls": json.dumps([{"name": "f", "arguments": {}}]),
           "completion_text": '```json\n{"name": "f", "arguments": {}}\n```'}
    with pytest.raises(ValueError, match="x_1"):
        with_call_format(row, "json")
    with pytest.raises(ValueError, match="call_format"):
        with_call_format(row, "xml")
    assert with_call_format(row, "template") is row


def test_sft_refuses_an_unknown_call_format_or_pack_before_loading_anything(tmp_path):
    from kate.train.config import SFTJobConfig
    from kate.train.sft import run_sft

    for over, word in (({"call_format": "xml"}, "call_format"), ({"pack": "turn"}, "pack")):
        cfg = SFTJobConfig(data_dir=str(tmp_path / "absent"), output_dir=str(tmp_path / "out"), **over)
        with pytest.raises(ValueError, match=word):
            run_sft(cfg)


def test_kind_repeats_shows_a_kind_s_steps_that_many_times(built, tokenizer):
    from collections import Counter

    from kate.train.examples import sft_examples, step_example

    cfg, _, _ = built
    rows = list(load_dataset_dir(cfg.out_dir)[0])
    answers = [json.dumps(step_example(tokenizer, r)["input_ids"]) for r in rows if r["kind"] == "answer"]
    assert answers
    once, _ = sft_examples(tokenizer, rows, pack="step")
    more, counts = sft_examples(tokenizer, rows, pack="step", kind_repeats={"answer": 3})
    assert counts["repeated"] == 2 * len(answers) and len(more) == len(once) + 2 * len(answers)
    shown = Counter(json.dumps(e["input_ids"]) for e in more)
    assert all(shown[a] == 3 * answers.count(a) for a in answers)
    assert sum(shown.values()) - sum(shown[a] for a in set(answers)) == len(once) - len(answers)  # the rest once


def test_kind_repeats_errors_name_the_kind_or_the_count(tmp_path):
    from kate.train.config import SFTJobConfig
    from kate.train.examples import check_kind_repeats
    from kate.train.sft import run_sft

    with pytest.raises(ValueError, match="answers"):
        check_kind_repeats({"answers": 2})
    with pytest.raises(ValueError, match="whole numbers"):
        check_kind_repeats({"answer": 0})
    cfg = SFTJobConfig(data_dir=str(tmp_path / "absent"), output_dir=str(tmp_path / "out"), kind_repeats={"answer": 1.5})
    with pytest.raises(ValueError, match="kind_repeats"):
        run_sft(cfg)  # before the model loads


def test_a_run_folder_from_before_a_setting_existed_resumes_when_the_setting_is_at_its_default(tmp_path):
    from kate.train.callbacks import JOB_FILE, check_job
    from kate.train.config import SFTJobConfig

    cfg = SFTJobConfig(output_dir=str(tmp_path))
    check_job(cfg, {"sha256": "d"})
    job = json.loads((tmp_path / JOB_FILE).read_text())
    del job["settings"]["kind_repeats"]  # as a job.json written before the field was added
    (tmp_path / JOB_FILE).write_text(json.dumps(job))
    check_job(cfg, {"sha256": "d"})  # the same job
    cfg.kind_repeats = {"answer": 4}
    with pytest.raises(ValueError, match="kind_repeats"):
        check_job(cfg, {"sha256": "d"})


def test_the_training_digest_ignores_retrieval_scores_and_old_run_folders_still_resume(tmp_path):
    from kate.train.callbacks import JOB_FILE, check_job
    from kate.train.config import SFTJobConfig
    from kate.train.data import rows_sha256, training_sha256

    row = {"id": "a", "prompt_text": "q", "hits": json.dumps([{"id": "ST:x", "type": "ST", "score": 0.5623}])}
    elsewhere = {**row, "hits": json.dumps([{"id": "ST:x", "type": "ST", "score": 0.5624}])}
    other_hit = {**row, "hits": json.dumps([{"id": "ST:y", "type": "ST", "score": 0.5623}])}
    assert rows_sha256([row]) != rows_sha256([elsewhere])
    assert training_sha256([row]) == training_sha256([elsewhere]) != training_sha256([other_hit])
    cfg = SFTJobConfig(output_dir=str(tmp_path))
    check_job(cfg, {"sha256": "old"})  # a folder written before manifests had a training digest
    check_job(cfg, {"sha256": "old", "training_sha256": "new"})  # its data rebuilt by today's kate: resumes
    (tmp_path / JOB_FILE).unlink()
    check_job(cfg, {"sha256": "here", "training_sha256": "t"})
    assert json.loads((tmp_path / JOB_FILE).read_text())["data_sha256"] == "t"
    check_job(cfg, {"sha256": "elsewhere", "training_sha256": "t"})  # rebuilt on another CPU: resumes
    with pytest.raises(ValueError, match="data_sha256"):
        check_job(cfg, {"sha256": "here", "training_sha256": "other"})

"""ES from the failures the model makes (issue 15): a run's dialogue records read as attempts, the
failed ones picked against the ground truth of the real BFCL training dialogues, written into the ES
prompt, kept in the entry's payload, and wired through the build with the records named in the
manifest. The writer is a scripted model; the data is BFCL's own."""

from __future__ import annotations

import json

import pytest

from kate.knowledge.attempts import Attempt, AttemptsError, failed_attempts, read_attempts
from kate.knowledge.bfcl_source import bfcl_trajectories
from kate.knowledge.build import BuildSpec, build_knowledge_base
from kate.knowledge.es import es_entries, es_messages
from kate.knowledge.llm_cache import LLMCache
from kate.llm.fake import FakeChatModel
from kate.toolcall import ToolCall
from tests.test_knowledge_fixtures import embedder
from tests.test_knowledge_llm import advice


@pytest.fixture(scope="module")
def dialogues():
    return bfcl_trajectories(["multi_turn_base"], "train", limit=2)


def record(dialogue, turns: list[dict]) -> dict:
    return {"id": dialogue.id, "category": "multi_turn_base", "valid": False, "turns": turns}


def turn(calls, *, end_reason="answer", errors=(), answer=None) -> dict:
    steps = [{"index": 0, "calls": [c.to_dict() for c in calls],
              "observations": [{"content": f"Error: {e}", "ok": False, "error": e} for e in errors]}]
    return {"user": "...", "calls": [c.to_dict() for c in calls], "steps": steps, "end_reason": end_reason,
            "answer": answer}


@pytest.fixture()
def run_folder(tmp_path, dialogues):
    first = dialogues[0]
    gt0, gt1 = first.turns[0].calls, first.turns[1].calls
    wrong = (ToolCall("mv", {"source": "final_report.pdf", "destination": "temp"}),)
    records = [record(first, [turn(tuple(reversed(gt0))),  # the right calls in another order: not a failure
                              turn(wrong, errors=["No such file"]),
                              turn(gt1, end_reason="repeat")]),  # right calls, then repeated: a failure to stop
               {"id": "simple_python_0", "category": "simple_python", "valid": True, "calls": []}]  # no turns: skipped
    folder = tmp_path / "direct" / "seed_0"
    folder.mkdir(parents=True)
    (folder / "records.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return folder


def test_failed_attempts_are_the_turns_that_differ_or_repeat(run_folder, dialogues):
    attempts = read_attempts(run_folder)
    first = dialogues[0].id
    assert set(attempts) == {f"{first}#t0", f"{first}#t1", f"{first}#t2"}
    failed = failed_attempts(dialogues, attempts)
    assert set(failed) == {f"{first}#t1", f"{first}#t2"}
    assert failed[f"{first}#t1"].errors == ("No such file",)
    assert "repeated a call it already had the result of" in failed[f"{first}#t2"].describe()


def test_the_es_prompt_shows_the_attempt_beside_the_correct_calls(dialogues):
    attempt = Attempt(calls=(ToolCall("mv", {"source": "a", "destination": "b"}),), errors=("No such file",))
    prompt = es_messages(dialogues[0], 1, attempt=attempt)[-1]["content"]
    assert "got it wrong" in prompt and "- mv(source='a', destination='b')" in prompt
    assert "error: No such file" in prompt
    assert "- grep(file_name='final_report.pdf', pattern='budget analysis')" in prompt
    assert es_messages(dialogues[0], 1)[-1]["content"].startswith("An assistant solved")  # no attempt: KATE's prompt


def test_es_entries_keep_the_attempt_they_were_written_from(run_folder, dialogues):
    failed = failed_attempts(dialogues, read_attempts(run_folder))
    model = FakeChatModel([advice], repeat_last=True, name="fake-writer")
    entries = {e.id: e for e in es_entries(dialogues, model, LLMCache(None), attempts=failed)}
    first = dialogues[0].id
    assert "attempt" in entries[f"ES:{first}#t1"].payload and "mv(" in entries[f"ES:{first}#t1"].payload["attempt"]
    assert "attempt" not in entries[f"ES:{first}#t0"].payload
    assert sum("got it wrong" in r["messages"][-1]["content"] for r in model.requests) == 2


def test_the_build_names_the_records_it_learned_from(tmp_path, run_folder):
    model = FakeChatModel([advice], repeat_last=True, name="fake-writer")
    spec = BuildSpec(name="kb", root=str(tmp_path), categories=["multi_turn_base"], types=["ES"],
                     llm_categories=["multi_turn_base"], limit=2, cache_dir=str(tmp_path / "cache"),
                     es_attempts=str(run_folder))
    kb = build_knowledge_base(spec, writer=model, embedder=embedder(), log=lambda line: None)
    assert kb.manifest["sources"]["es_attempts"]["failed_turns"] == 2
    assert len(kb.manifest["sources"]["es_attempts"]["sha256"]) == 64


def test_unreadable_records_fail_at_start_naming_the_file(tmp_path):
    with pytest.raises(AttemptsError, match="no run records"):
        BuildSpec(es_attempts=str(tmp_path / "missing"))
    bad = tmp_path / "records.jsonl"
    bad.write_text('{"id": "d", "turns": [1]}\n')
    with pytest.raises(AttemptsError, match=r"records.jsonl, line 1"):
        read_attempts(bad)
    bad.write_text("not json\n")
    with pytest.raises(AttemptsError, match=r"records.jsonl, line 1"):
        BuildSpec(es_attempts=str(bad))

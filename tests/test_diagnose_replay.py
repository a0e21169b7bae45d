"""Verbatim replay on scripted models: a model that writes the right call passes on format and
content, one that writes prose naming the tool fails strictly (the keyword harness credits it), one
that writes malformed JSON is a recorded failure; BFCL rows go through the official checker;
dataset rows are read in every documented shape, bad ones refused naming file and line."""

from __future__ import annotations

import json

import pytest

from kate.agent.policy import Policy
from kate.diagnose.replay import ReplayTask, bfcl_replay_rows, dataset_replay_rows, replay_summary
from kate.eval.runner import open_run, run_task
from kate.llm.fake import FakeChatModel

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function",
           "function": {"name": "get_weather", "description": "Weather of a city.", "parameters": CITY}}


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def dataset(tmp_path):
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    return write_rows(tmp_path / "rows.jsonl", [
        {"id": "a", "messages": ask, "tools": [WEATHER],
         "target": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"id": "b", "messages": ask, "tools": [WEATHER],
         "target": {"role": "assistant", "content": "", "tool_calls": [
             {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}},
        {"id": "c", "prompt": [{"role": "user", "content": "Thanks!"}], "tools": json.dumps([WEATHER]),
         "completion": [{"role": "assistant", "content": "You're welcome."}]},
    ])  # fmt: skip


def caller(messages, tools, n):
    if messages[-1]["content"] == "Thanks!":
        return ["You're welcome."] * n
    return ['```json\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n```'] * n


PROSE = "You can use the get_weather function with city Paris to find out."
MALFORMED = '{"name": "get_weather", "arguments": {"city": "Paris"'


def run(task, model, tmp_path, name):
    store = open_run(tmp_path / name, arm=name, task=task, policy=Policy(model), seed=0, config={})
    return run_task(task, Policy(model), store)


def test_dataset_rows_in_every_shape(tmp_path):
    rows = dataset_replay_rows(dataset(tmp_path))
    assert [r.id for r in rows] == ["a", "b", "c"]
    assert rows[0].target_calls == rows[1].target_calls and rows[0].expects_call
    assert not rows[2].expects_call and rows[2].target_text == "You're welcome." and rows[2].tools[0] == WEATHER
    assert [r.id for r in dataset_replay_rows(tmp_path / "rows.jsonl", limit=2, seed=1)] == \
        [r.id for r in dataset_replay_rows(tmp_path / "rows.jsonl", limit=2, seed=1)]  # fmt: skip
    bad = write_rows(tmp_path / "bad.jsonl", [{"id": "x", "messages": [{"role": "user", "content": "hi"}]}])
    with pytest.raises(ValueError, match=r"bad.jsonl:1: a row needs 'target'"):
        dataset_replay_rows(bad)
    bad.write_text('{"id": "x", "messages": [], "target": "hi"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: 'messages'"):
        dataset_replay_rows(bad)


def test_replay_on_three_scripted_models(tmp_path):
    task = ReplayTask(dataset_replay_rows(dataset(tmp_path)), origin={"source": "dataset"})
    good = run(task, FakeChatModel([caller], repeat_last=True), tmp_path, "good")
    assert [(r["format_valid"], r["valid"]) for r in good] == [(True, True)] * 3
    assert [r["format"] for r in good] == ["call", "call", "prose"]

    prose = run(task, FakeChatModel([PROSE], repeat_last=True), tmp_path, "prose")
    assert [r["format"] for r in prose] == ["prose"] * 3
    assert [r["valid"] for r in prose] == [False, False, True]  # the no-call row is right in prose
    assert [r["keyword"] for r in prose[:2]] == [True, True]  # the lenient harness credits the prose
    assert prose[0]["error_type"] == "kate:no_call"

    broken = run(task, FakeChatModel([MALFORMED], repeat_last=True), tmp_path, "broken")
    assert [r["format"] for r in broken] == ["malformed"] * 3
    assert not any(r["valid"] or r["format_valid"] for r in broken)
    assert broken[0]["error_type"] == "kate:malformed_call"

    summary = replay_summary(prose)
    assert summary["all"]["n"] == 3 and summary["all"]["valid"] == pytest.approx(1 / 3)
    assert summary["all"]["keyword"] == pytest.approx(2 / 3) and summary["all"]["formats"] == {"prose": 3}


def test_wrong_arguments_are_the_right_format_but_not_valid(tmp_path):
    task = ReplayTask(dataset_replay_rows(dataset(tmp_path))[:1])
    [record] = run(task, FakeChatModel(['{"name": "get_weather", "arguments": {"city": "Rome"}}']), tmp_path, "wrong")
    assert record["format_valid"] and not record["valid"] and record["error_type"] == "replay:wrong_calls"


def test_bfcl_rows_use_the_official_checker(tmp_path):
    rows = bfcl_replay_rows(("simple_python",), "test", limit=2)
    assert all(r.entry is not None and r.target_calls for r in rows)

    def ground_truth(messages, tools, n):
        row = next(r for r in rows if r.messages[-1]["content"] == messages[-1]["content"])
        return [json.dumps(row.target_calls[0].to_dict())] * n

    task = ReplayTask(rows)
    records = run(task, FakeChatModel([ground_truth], repeat_last=True), tmp_path, "bfcl")
    assert [r["valid"] for r in records] == [True, True]
    name = rows[0].tools[0]["function"]["name"]
    [prose] = run(ReplayTask(rows[:1]), FakeChatModel([f"Call {name} for this."]), tmp_path, "bfcl_prose")
    assert not prose["valid"] and prose["keyword"] and prose["format"] == "prose"
    assert task.data() == {"simple_python": task.data()["simple_python"]}
    with pytest.raises(ValueError, match="ground-truth calls"):
        bfcl_replay_rows(("irrelevance",))


def test_vectrayx_two_model_case_strict_vs_keyword(tmp_path):
    """A model that never calls scores by keywords about as high as a real caller, 0 strictly on
    every entry that needs a call."""
    from kate.bfcl.answers import first_possible_answer
    from kate.diagnose.vectrayx import side_by_side, side_by_side_markdown, talker_model
    from kate.tasks.bfcl import BFCLTask, select_entries

    entries = select_entries({"simple_python": 4, "irrelevance": 2}, "test")
    by_question = {e.turns[0][-1]["content"]: e for e in entries}

    def caller(messages, tools, n):
        entry = by_question[messages[-1]["content"]]
        if entry.category == "irrelevance":
            return ["None of the functions offered fits this request."] * n
        return [json.dumps(first_possible_answer(entry)[0].to_dict())] * n

    task = BFCLTask(entries)
    records = {name: run(task, model, tmp_path, name)
               for name, model in (("caller", FakeChatModel([caller], repeat_last=True)), ("talker", talker_model()))}
    table = side_by_side(records, {e.id: [t["function"]["name"] for t in e.tools] for e in entries})
    assert table["caller"]["strict"] == 1.0 and table["caller"]["keyword"] == 1.0 and table["caller"]["calls"] == 4 / 6
    assert table["talker"]["calls"] == 0.0 and table["talker"]["keyword"] == pytest.approx(4 / 6)
    assert table["talker"]["strict"] == pytest.approx(2 / 6)  # only the irrelevance entries, by not calling
    assert table["talker"]["per_category"]["simple_python"]["keyword_only"] == 4
    assert table["talker"]["per_category"]["irrelevance"]["strict_only"] == 2  # it names a tool, so keywords fail it
    assert len(table["talker"]["disagreements"]) == 6 and not table["caller"]["disagreements"]
    assert "| talker | 6 | 33.3% | 66.7% | 0.0% |" in side_by_side_markdown(table)

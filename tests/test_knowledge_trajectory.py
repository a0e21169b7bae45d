"""Trajectories: the user JSONL format, BFCL's halves as trajectories (ground truth executed on
BFCL's backends), and ST entries built from them."""

from __future__ import annotations

import json

import pytest

from kate.bfcl.data import load_entries
from kate.knowledge.bfcl_source import bfcl_trajectories, single_turn_calls
from kate.knowledge.st import st_entries
from kate.knowledge.trajectory import (
    Trajectory,
    TrajectoryFormatError,
    TrajectoryTurn,
    read_trajectories,
    write_trajectories,
)
from kate.toolcall import ToolCall

LS = {"type": "function", "function": {"name": "ls", "description": "List files.", "parameters": {"type": "object", "properties": {}}}}
CD = {"type": "function", "function": {"name": "cd", "description": "Change directory.",
                                       "parameters": {"type": "object", "properties": {"folder": {"type": "string"}}}}}


def _dialogue(id_="d1") -> Trajectory:
    return Trajectory(
        id=id_,
        tools=(LS,),
        turns=(
            TrajectoryTurn("List my files", (ToolCall("ls", {}),), results=("a.txt b.txt",), answer="a.txt, b.txt"),
            TrajectoryTurn("Delete everything", ()),  # the correct behaviour: no call (no such tool)
            TrajectoryTurn("", (ToolCall("cd", {"folder": "x"}),), tools_added=(CD,)),
        ),
        source="mine",
        split="train",
        api_classes=("FS",),
        tool_classes={"ls": "FS", "cd": "FS"},
    )


def test_jsonl_round_trip(tmp_path):
    path = tmp_path / "t.jsonl"
    assert write_trajectories(path, [_dialogue("a"), _dialogue("b")]) == 2
    back = read_trajectories(path)
    assert [t.id for t in back] == ["a", "b"]
    assert back[0].to_dict() == _dialogue("a").to_dict()
    assert back[0].turns[0].calls == (ToolCall("ls", {}),) and back[0].turns[0].results == ("a.txt b.txt",)
    assert back[0].tool_names() == ("ls", "cd")


@pytest.mark.parametrize(
    "line,message",
    [
        ("not json", "not JSON"),
        (json.dumps({"id": "x", "tools": []}), "missing 'turns'"),
        (json.dumps({"id": "x", "tools": [], "turns": [{"user": "q", "calls": [{"name": "f"}], "results": []}]}),
         "1 calls"),
        (json.dumps({"id": "x", "tools": [], "turns": [{"user": "q", "calls": [{"arguments": {}}]}]}), "'name'"),
        (json.dumps({"id": "x", "tools": [], "turns": [{"calls": []}]}), "string 'user'"),
        (json.dumps({"format": "other/2", "id": "x", "tools": [], "turns": []}), "format"),
    ],
)
def test_malformed_lines_are_errors_naming_file_and_line(tmp_path, line, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(_dialogue().to_dict()) + "\n" + line + "\n")
    with pytest.raises(TrajectoryFormatError, match=message) as info:
        read_trajectories(path)
    assert f"{path}:2" in str(info.value)


def test_duplicate_ids_are_rejected(tmp_path):
    path = tmp_path / "dup.jsonl"
    write_trajectories(path, [_dialogue("a"), _dialogue("a")])
    with pytest.raises(TrajectoryFormatError, match="duplicate id 'a'"):
        read_trajectories(path)


def test_st_entries_one_per_user_turn():
    entries = st_entries([_dialogue()])
    assert [e.id for e in entries] == ["ST:d1#t0", "ST:d1#t1"]  # the turn without user text gives none
    first, no_call = entries
    assert first.text == "List my files" and first.tool_names == ("ls",) and first.api_classes == ("FS",)
    assert first.payload["calls"] == [{"name": "ls", "arguments": {}}] and first.payload["results"] == ["a.txt b.txt"]
    assert first.source_ids == ("d1", "d1#t0")
    assert no_call.payload["calls"] == [] and no_call.tool_names == () and no_call.api_classes == ("FS",)


def test_single_turn_possible_answers_become_one_call_each():
    gt = [{"math.hypot": {"x": [4], "y": [5], "z": ["", 0]}},
          {"f": {"status": [["completed", "failed"]], "unit": ["copper", ""], "empty": []}}]
    assert single_turn_calls(gt) == (
        ToolCall("math.hypot", {"x": 4, "y": 5}),  # optional ("" first) left out
        ToolCall("f", {"status": ["completed", "failed"], "unit": "copper"}),
    )


def test_bfcl_halves_follow_kates_split():
    train = bfcl_trajectories(["simple_python", "multi_turn_base"], "train", limit=5, execute=False)
    test = bfcl_trajectories(["simple_python", "multi_turn_base"], "test", limit=5, execute=False)
    index = lambda t: int(t.id.rsplit("_", 1)[1])  # noqa: E731
    assert all(index(t) % 2 == 0 for t in train) and all(index(t) % 2 == 1 for t in test)
    assert all(t.split == "train" for t in train)
    assert not bfcl_trajectories(["live_relevance"], "train")  # no ground truth shipped: skipped
    irrelevant = bfcl_trajectories(["irrelevance"], "train", limit=3)
    assert all(t.turns[0].calls == () and t.turns[0].user for t in irrelevant)


def test_multi_turn_ground_truth_runs_on_bfcls_backends():
    [first] = bfcl_trajectories(["multi_turn_base"], "train", limit=1)
    entry = load_entries("multi_turn_base", "train", limit=1)[0]
    assert first.id == entry.id and len(first.turns) == len(entry.turns)
    turn0 = first.turns[0]
    assert [c.name for c in turn0.calls] == ["cd", "mkdir", "mv"]
    assert json.loads(turn0.results[0]) == {"current_working_directory": "document"}
    assert "moved to" in turn0.results[2]
    assert first.tool_classes["cd"] == "GorillaFileSystem" and first.tool_classes["post_tweet"] == "TwitterAPI"
    # state carries across turns: turn 1 greps the file moved in turn 0
    assert "budget analysis" in first.turns[1].results[1]
    dialogues = bfcl_trajectories(["multi_turn_base"], "train", limit=10)
    assert not [r for t in dialogues for turn in t.turns for r in turn.results if r.startswith("Error during execution")]


def test_miss_func_turn_brings_its_tools():
    [dialogue] = bfcl_trajectories(["multi_turn_miss_func"], "train", limit=1)
    arriving = [(i, t) for i, t in enumerate(dialogue.turns) if t.tools_added]
    assert arriving and arriving[0][1].user == ""  # no user text at that turn
    assert "sort" in [t["function"]["name"] for t in arriving[0][1].tools_added]
    assert "sort" not in [t["function"]["name"] for t in dialogue.tools]
    st = st_entries([dialogue])
    assert len(st) == sum(1 for t in dialogue.turns if t.user)


def test_st_api_classes_are_those_the_turn_uses():
    [dialogue] = bfcl_trajectories(["multi_turn_base"], "train", limit=1)  # TwitterAPI + GorillaFileSystem
    entries = st_entries([dialogue])
    assert entries[0].api_classes == ("GorillaFileSystem",)  # cd, mkdir, mv only
    assert set(dialogue.api_classes) == {"TwitterAPI", "GorillaFileSystem"}

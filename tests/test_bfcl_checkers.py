"""BFCL's official checkers, fed by kate, under numpy 2: ground truth passes, wrong calls fail, and
prose that names the right function earns nothing."""

from __future__ import annotations

import numpy
import pytest

from kate.bfcl.answers import first_possible_answer
from kate.bfcl.checkers import RELEVANCE, score_multi_turn, score_single_turn
from kate.bfcl.data import MULTI_TURN, SINGLE_TURN, ground_truth_calls, load_entries
from kate.llm.base import completion_from_text
from kate.toolcall import ToolCall

# Possible answers the replay builder cannot turn into a passing call, each for a stated reason.
# Java parameters of collection/map types need Java source text (e.g. `new HashMap<>(){{...}}`).
JAVA_SOURCE_TYPES = {
    "simple_java_1", "simple_java_22", "simple_java_24", "simple_java_25", "simple_java_27", "simple_java_32",
    "simple_java_34", "simple_java_35", "simple_java_36", "simple_java_49", "simple_java_64", "simple_java_65",
    "simple_java_67", "simple_java_68", "simple_java_78", "simple_java_81", "simple_java_83", "simple_java_85",
    "simple_java_86", "simple_java_89", "simple_java_90", "simple_java_91", "simple_java_98",
}  # fmt: skip
# BFCL data whose possible answers contradict the function doc (a required parameter whose only
# allowed value is "" or [], or an optional "type" the checker then calls unexpected).
CONTRADICTORY = {
    "parallel_multiple_26", "live_simple_106-63-0", "live_simple_112-68-0", "live_multiple_507-149-4",
    "live_multiple_862-181-3", "live_multiple_964-207-0",
}  # fmt: skip


def test_numpy_2_is_what_the_checkers_run_under():
    assert int(numpy.__version__.split(".")[0]) >= 2


@pytest.mark.parametrize("category", SINGLE_TURN)
def test_checker_accepts_every_answer_built_from_possible_answer(category):
    failures = []
    for entry in load_entries(category, "all"):
        if entry.category in RELEVANCE:
            calls = [ToolCall("any_function", {})] if RELEVANCE[entry.category] else []
        else:
            calls = first_possible_answer(entry)
        if not score_single_turn(entry, calls)["valid"]:
            failures.append(entry.id)
    assert set(failures) <= JAVA_SOURCE_TYPES | CONTRADICTORY, failures


@pytest.mark.parametrize("category", MULTI_TURN)
def test_checker_accepts_a_replay_of_every_multi_turn_ground_truth(category):
    for entry in load_entries(category, "all"):
        result = score_multi_turn(entry, [[turn] for turn in ground_truth_calls(entry)])
        assert result["valid"], (entry.id, result)
        assert result["turns_passed"] == result["turns_total"]


def test_scoring_twice_in_one_process_starts_from_the_initial_state():
    entry = load_entries("multi_turn_base", "all")[0]
    replay = [[turn] for turn in ground_truth_calls(entry)]
    assert score_multi_turn(entry, replay)["valid"] and score_multi_turn(entry, replay)["valid"]


def test_turns_passed_and_later_scorings_start_from_fresh_backends():
    """A state-changing wrong turn must not leak into the next check (the turns-passed prefixes,
    or another arm scoring the same entry in the same process)."""
    entry = next(e for e in load_entries("multi_turn_base", "test") if e.id == "multi_turn_base_1")
    ls = [[ToolCall("ls", {"a": True, "human_readable": False})], [ToolCall("ls", {"a": True})]]
    wrong_move = [[ToolCall("mv", {"source": "workspace/log.txt", "destination": "archive"})]]
    result = score_multi_turn(entry, [ls, wrong_move, [], []])
    assert not result["valid"] and result["turns_passed"] == 1, result
    replay = [[turn] for turn in ground_truth_calls(entry)]
    assert score_multi_turn(entry, replay)["valid"]


def test_a_wrong_call_is_scored_wrong():
    entry = load_entries("simple_python", "all")[0]  # calculate_triangle_area(base=10, height=5)
    wrong = ToolCall("calculate_triangle_area", {"base": 5, "height": 10})
    assert not score_single_turn(entry, [wrong])["valid"]
    mt = load_entries("multi_turn_base", "all")[0]
    replay = [[turn] for turn in ground_truth_calls(mt)]
    replay[2] = [[ToolCall("sort", {"file_name": "previous_report.pdf"})]]
    result = score_multi_turn(mt, replay)
    assert not result["valid"] and result["turns_passed"] == 2


def test_prose_naming_the_right_function_scores_zero():
    entry = load_entries("simple_python", "all")[0]
    prose = completion_from_text("You should call calculate_triangle_area with base 10 and height 5.")
    assert prose.tool_calls == ()
    assert not score_single_turn(entry, list(prose.tool_calls), prose.parse_error)["valid"]


def test_irrelevance_rewards_abstaining_only():
    entry = load_entries("irrelevance", "all")[0]
    assert score_single_turn(entry, [])["valid"]
    assert not score_single_turn(entry, [ToolCall("anything", {"x": 1})])["valid"]


def test_a_stored_run_is_rescored_in_place_without_regenerating(tmp_path):
    from kate.eval.run_store import RunStore, load_run
    from kate.eval.runner import rescore_run
    from kate.tasks.bfcl import task_for_records

    store = RunStore(tmp_path / "seed_0", {"arm": "x"})
    ls = [[{"name": "ls", "arguments": {"a": True}}]]
    stale = {"valid": False, "turns_passed": 0, "turns_total": 4, "turn_fraction": 0.0, "error_type": "stale"}
    store.append({"id": "multi_turn_base_1", "category": "multi_turn_base", **stale, "steps_per_turn": [ls, [], [], []]})
    store.append({"id": "simple_python_1", "category": "simple_python", "valid": True, "error_type": None,
                  "calls": [{"name": "nope", "arguments": {}}], "parse_error": None})  # fmt: skip
    assert rescore_run(tmp_path / "seed_0", task_for_records) == {"records": 2, "changed": 2}
    multi, single = load_run(tmp_path / "seed_0")[1]
    assert multi["turns_passed"] == 1 and multi["turn_fraction"] == 0.25 and multi["error_type"] != "stale"
    assert single["valid"] is False and multi["steps_per_turn"][0] == ls


def test_a_call_named_by_no_identifier_is_a_failed_call_not_a_crash():
    entry = next(e for e in load_entries("multi_turn_base", "test") if e.id == "multi_turn_base_1")
    junk = ToolCall("Student | Math | Computer Science Alice | 5 | 9", {})
    injection = ToolCall("__import__('os').system", {"command": "true"})
    ls = [[junk], [ToolCall("ls", {"a": True})], [injection]]
    result = score_multi_turn(entry, [ls, [], [], []])
    assert not result["valid"] and result["turns_passed"] == 1, result

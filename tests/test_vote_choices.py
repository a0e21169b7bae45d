"""kate.eval.vote_choices counts the votes that chose no call although the call samples together outnumbered
the no-call ones (no-call samples pool into one candidate, calls split by arguments), on votes made by
kate's own vote."""

from __future__ import annotations

from kate.eval import vote_choices
from kate.llm.base import Completion
from kate.sampling.vote import majority_vote
from kate.toolcall import ToolCall


def ls(**arguments) -> Completion:
    return Completion(text="", tool_calls=(ToolCall("ls", arguments),))


def vote(*completions: Completion) -> dict:
    return majority_vote(completions).to_dict()


def test_three_answers_beat_five_calls_split_over_four_argument_sets():
    pooled = vote(*[Completion(text=f"answer {i}") for i in range(3)], ls(a=True), ls(a=True), ls(a=False), ls(), ls(b=1))
    assert pooled["chosen"]["kind"] == "no_call"
    assert vote_choices.pooled_no_call(pooled) == (True, True)
    outright = vote(*[Completion(text=f"answer {i}") for i in range(5)], ls(), ls(), ls(a=True))
    assert vote_choices.pooled_no_call(outright) == (True, False)
    called = vote(Completion(text="answer"), ls(), ls())
    assert vote_choices.pooled_no_call(called) == (False, False)


def test_count_tallies_single_turn_entries_and_dialogue_steps():
    pooled = vote(Completion(text="a"), Completion(text="b"), ls(a=1), ls(a=2), ls(a=3))
    records = [
        {"category": "irrelevance", "valid": True, "vote": pooled},
        {"category": "live_relevance", "valid": False, "vote": pooled},
        {"category": "multi_turn_base", "valid": False,
         "turns": [{"calls": [], "steps": [{"vote": pooled}]},
                   {"calls": [{"name": "ls", "arguments": {}}], "steps": [{"vote": vote(ls())}, {"vote": pooled}]}]},
    ]
    table = vote_choices.count(records)
    assert table["irrelevance"] == {"records": 1, "steps": 1, "no_call": 1, "pooled": 1, "pooled_right": 1,
                                        "turns": 0, "turns_without_call": 0}
    assert table["live_relevance"]["pooled_right"] == 0
    assert table["multi_turn_base"] == {"records": 1, "steps": 3, "no_call": 2, "pooled": 2, "pooled_right": 0,
                                        "turns": 2, "turns_without_call": 1}

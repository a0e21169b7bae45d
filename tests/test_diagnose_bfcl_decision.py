"""BFCL's relevance / irrelevance entries as call decisions: the need for a call comes from the
category, "called" from the parsed calls, the verdict from BFCL's own relevance rule."""

from __future__ import annotations

import pytest

from kate.agent.policy import Policy
from kate.diagnose.bfcl_decision import BFCLDecisionTask, call_needed, decision_entries
from kate.diagnose.breakdown import four_way
from kate.llm.fake import FakeChatModel


def test_call_decisions_on_relevance_and_irrelevance():
    entries = decision_entries(("irrelevance", "live_relevance"), "test", limit=2)
    assert [call_needed(e.category) for e in entries] == [False, False, True, True]
    name = entries[0].tools[0]["function"]["name"]
    call = '```json\n{"name": "%s", "arguments": {}}\n```' % name
    other = call.replace(name, entries[3].tools[0]["function"]["name"])
    model = FakeChatModel([call, "I cannot help with that.", "Sure, no call.", other])
    task = BFCLDecisionTask(entries)
    records = []
    for entry in entries:
        trace = task.solve(entry, Policy(model), 0)
        records.append({"id": entry.id, **task.score(entry, trace)})
        assert task.prompt(entry)[1] == entry.tools
    assert [r["called"] for r in records] == [True, False, False, True]
    assert [r["valid"] for r in records] == [False, True, False, True]  # BFCL's relevance rule
    table = four_way({r["id"]: r["necessary"] for r in records}, {r["id"]: r["called"] for r in records})
    assert table.counts() == {"N-C": 1, "N-NC": 1, "UN-C": 1, "UN-NC": 1}
    assert task.describe()["categories"] == ["irrelevance", "live_relevance"]


def test_multi_turn_categories_are_refused():
    with pytest.raises(ValueError, match="multi-turn"):
        call_needed("multi_turn_base")
    assert call_needed("simple_python") is True

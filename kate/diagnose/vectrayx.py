"""VectraYX's two-model case: a keyword harness scores a model that never emits a call about as high
as one that does (0.650 vs 0.660 in arXiv 2610.02142). Reproduced on any task's stored records:
``talker_model`` is a scripted model that only *talks about* the offered tools (prose naming one,
never a call); run it and a real caller through the same task and runner, then
``side_by_side`` scores both strictly (each record's ``valid``, from the official or strict checker)
and by keywords (``kate.diagnose.keyword``), with the share of outputs that parsed as calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kate.diagnose.keyword import compare, tool_names
from kate.llm.base import Message, ToolSchema
from kate.llm.fake import FakeChatModel

TALK = "To do that you would use the `{name}` function with the values from your request; I can describe it further."
NO_TOOLS = "I can answer that in words: there is no function to mention here."


def talk_about_tools(messages: list[Message], tools: list[ToolSchema] | None, n: int) -> list[str]:
    """Prose naming the first offered tool (never a call); plain prose when no tool is offered."""
    names = tool_names(tools or [])
    return [TALK.format(name=names[0]) if names else NO_TOOLS] * n


def talker_model(name: str = "talker") -> FakeChatModel:
    """A scripted model that talks about the tool instead of calling it, for every request."""
    return FakeChatModel([talk_about_tools], name=name, repeat_last=True)


def call_share(records: Sequence[Mapping[str, Any]]) -> float | None:
    """The share of records whose chosen answer parsed as at least one call."""
    return sum(bool(r.get("calls")) for r in records) / len(records) if records else None


def side_by_side(records_of: Mapping[str, Sequence[Mapping[str, Any]]],
                 tools_of: Mapping[str, Sequence[str]]) -> dict[str, Any]:  # fmt: skip
    """Per model: strict and keyword accuracy (all and per category), the call share, and the
    outputs the two scorers disagree on (``keyword.compare``)."""
    out = {}
    for model, records in records_of.items():
        compared = compare(records, tools_of)
        n = compared["all"]["n"]
        out[model] = {"n": n, "strict": compared["all"]["strict"] / n if n else None,
                      "keyword": compared["all"]["keyword"] / n if n else None, "calls": call_share(records),
                      "per_category": compared["per_category"], "disagreements": compared["disagreements"]}  # fmt: skip
    return out


def side_by_side_markdown(table: Mapping[str, Mapping[str, Any]]) -> str:
    """The side-by-side table as Markdown: one row per model."""
    lines = ["| model | n | strict | keyword | outputs with a call |", "|---|---|---|---|---|"]
    pct = lambda x: "-" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    for model, row in table.items():
        lines.append(f"| {model} | {row['n']} | {pct(row['strict'])} | {pct(row['keyword'])} | {pct(row['calls'])} |")
    return "\n".join(lines)

"""How actions and observations enter the history: an environment's action format.

The agent loop is the same for every environment; what differs is how a step is written down.
``TOOL_CALLS`` (the default): the assistant message carries OpenAI ``tool_calls`` and each result is
a ``tool`` message. ``CodeActions``: the action is one Python block (the canonical call
``ToolCall("python", {"code": ...})``), written back as a fenced block, and its output comes back
as a user message. An environment names its format with an ``action_format`` attribute.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kate.toolcall import ToolCall, to_openai_tool_calls

Message = dict[str, Any]

MALFORMED_NOTE = (
    "Your last reply tried to call a tool, but the call could not be read ({error}). To call a tool, "
    'reply with a JSON object {{"name": <function name>, "arguments": {{...}}}} per call; otherwise '
    "answer the user directly."
)
OUTPUT_PROMPT = "Output:\n```\n{output}\n```"
NO_CODE_PROMPT = "Your reply had no code ({error}). Reply with one ```python code block."


class ActionFormat(Protocol):
    def assistant(self, text: str, calls: Sequence[ToolCall]) -> Message: ...

    def results(self, calls: Sequence[ToolCall], contents: Sequence[str]) -> list[Message]: ...

    def malformed(self, text: str, error: str) -> list[Message]: ...


@dataclass(frozen=True)
class ToolCallActions:
    """OpenAI chat messages: ``tool_calls`` on the assistant message, one ``tool`` message per call."""

    def assistant(self, text: str, calls: Sequence[ToolCall]) -> Message:
        """The call text itself lives in ``tool_calls``; prose before Hermes tags stays as content."""
        prose = text.split("<tool_call>", 1)[0].strip() if "<tool_call>" in text else ""
        return {"role": "assistant", "content": prose, "tool_calls": to_openai_tool_calls(tuple(calls))}

    def results(self, calls: Sequence[ToolCall], contents: Sequence[str]) -> list[Message]:
        return [{"role": "tool", "tool_call_id": c.call_id, "name": c.name, "content": text}
                for c, text in zip(calls, contents)]  # fmt: skip

    def malformed(self, text: str, error: str) -> list[Message]:
        return [{"role": "assistant", "content": text}, {"role": "user", "content": MALFORMED_NOTE.format(error=error)}]


@dataclass(frozen=True)
class CodeActions:
    """Code actions: the step is shown as a fenced block; its output (cut to ``max_output_chars``
    in the prompt, kept whole in the record) as a user message."""

    max_output_chars: int = 3000

    def assistant(self, text: str, calls: Sequence[ToolCall]) -> Message:
        code = "\n".join(str(c.arguments.get("code", "")) for c in calls)
        return {"role": "assistant", "content": f"```python\n{code}\n```"}

    def results(self, calls: Sequence[ToolCall], contents: Sequence[str]) -> list[Message]:
        output = "\n".join(contents)
        if len(output) > self.max_output_chars:
            output = output[: self.max_output_chars] + f"\n... [{len(output) - self.max_output_chars} more characters]"
        return [{"role": "user", "content": OUTPUT_PROMPT.format(output=output)}]

    def malformed(self, text: str, error: str) -> list[Message]:
        return [{"role": "assistant", "content": text}, {"role": "user", "content": NO_CODE_PROMPT.format(error=error)}]


TOOL_CALLS = ToolCallActions()


def action_format_of(env: object) -> ActionFormat:
    return getattr(env, "action_format", None) or TOOL_CALLS


def is_finished(env: object) -> bool:
    """An environment may end the task itself (AppWorld's ``complete_task``); most never do."""
    finished = getattr(env, "finished", None)
    return bool(finished()) if callable(finished) else False

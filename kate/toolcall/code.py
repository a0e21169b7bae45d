"""Code actions: the Python a model writes as its next step (AppWorld), extracted and normalized.

``extract_code`` takes the first fenced block (```python, ```py or a bare fence), or the whole
reply when it is itself code that calls ``apis``; anything else is a recorded failure
(``CodeAction.error``), never an exception. ``normalize_code`` is the vote key for width
sampling: the code parsed and unparsed by ``ast`` (comments, blank lines, quotes and spacing do
not split the vote); code that does not parse keys on its whitespace-collapsed text.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from kate.toolcall.call import ToolCall

CODE_TOOL = "python"  # the one action of a code-action environment: {"code": <python source>}
FENCE = re.compile(r"```[ \t]*(?P<lang>[A-Za-z0-9_+-]*)[ \t]*\n(?P<code>.*?)(?:```|\Z)", re.DOTALL)
CODE_LANGS = {"", "python", "py", "python3"}


@dataclass(frozen=True)
class CodeAction:
    code: str | None
    error: str | None = None

    @property
    def key(self) -> str:
        """The vote key: normalized code, or ``""`` for no code."""
        return normalize_code(self.code) if self.code else ""


def extract_code(text: str) -> CodeAction:
    text = text or ""
    for match in FENCE.finditer(text):
        if match.group("lang").lower() in CODE_LANGS and match.group("code").strip():
            return CodeAction(match.group("code").strip("\n"))
    stripped = text.strip()
    if "apis." in stripped:
        try:
            ast.parse(stripped)
            return CodeAction(stripped)
        except SyntaxError:
            pass
    if not stripped:
        return CodeAction(None, "empty reply: no code")
    return CodeAction(None, "no ```python code block in the reply")


def normalize_code(code: str) -> str:
    try:
        return ast.unparse(ast.parse(code))
    except (SyntaxError, ValueError, RecursionError):
        return " ".join(code.split())


def code_call(code: str) -> ToolCall:
    """A code action in the canonical call type."""
    return ToolCall(CODE_TOOL, {"code": code})

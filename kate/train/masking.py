"""Hammer-style function masking for training steps: in a share of dialogues, every offered
function's name and each of its parameter names is replaced by a random-looking string, the same
way in the tools, the prompt (calls in the history, tool results' names, the calls that knowledge
shows) and the target calls, while descriptions are kept, so the model must read descriptions
rather than match names (Hammer, Lin et al. 2024).

    masking = masking_for(step.tools, step.source_id, seed=0)
    masked = mask_step(step, masking)           # a SolvedStep: tools, prompt, target, hits
    masking.unmask_call(masking.call(call)) == call

Which dialogues are masked and the strings they get come from a seeded hash of the dialogue's id,
so a rebuild masks the same and every step of a dialogue shares one mapping (each step's prompt
stays a prefix of the next one's, as ``kate.train.examples`` packs them). Names of functions the
tools do not offer (a distractor's, a history call to a removed tool) are left as they are.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kate.toolcall import ToolCall
from kate.train.steps import SolvedStep

_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"


def is_masked(key: str, seed: int, share: float) -> bool:
    """Whether the dialogue ``key`` is masked (deterministic, ~``share`` of keys)."""
    digest = hashlib.sha256(f"mask|{seed}|{key}".encode("utf-8")).digest()
    return share > 0 and int.from_bytes(digest[:8], "big") / 2**64 < share


def _token(seed: int, key: str, what: str, length: int) -> str:
    """A random-looking identifier (a letter, then letters and digits) from a hash of its inputs."""
    digest = hashlib.sha256(f"{seed}|{key}|{what}".encode("utf-8")).digest()
    return "".join([_ALPHABET[digest[0] % 26], *(_ALPHABET[b % 36] for b in digest[1:length])])


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    return tool.get("function", tool) if isinstance(tool.get("function"), Mapping) else tool


@dataclass(frozen=True)
class Masking:
    """original -> masked: ``functions`` by name, ``params`` by function (its original name) then parameter."""

    functions: dict[str, str]
    params: dict[str, dict[str, str]]

    def call(self, call: ToolCall) -> ToolCall:
        params = self.params.get(call.name, {})
        arguments = {params.get(k, k): v for k, v in call.arguments.items()}
        return ToolCall(self.functions.get(call.name, call.name), arguments, call.call_id)

    def unmask_call(self, call: ToolCall) -> ToolCall:
        names = {v: k for k, v in self.functions.items()}
        original = names.get(call.name, call.name)
        params = {v: k for k, v in self.params.get(original, {}).items()}
        return ToolCall(original, {params.get(k, k): v for k, v in call.arguments.items()}, call.call_id)

    def text(self, text: str) -> str:
        """The calls written in a text (``name(p=...)`` and ``{"name": "name", "arguments": {"p": ...}}``,
        as knowledge shows calls): their function and parameter names masked. Words elsewhere stay, the
        user's own question included (a function named ``find`` leaves "find the file" as it is)."""
        if not self.functions or not text:
            return text
        names = "|".join(map(re.escape, sorted(self.functions, key=len, reverse=True)))
        text = re.sub(r"(?<![\w.])(" + names + r")(?=\s*\()", lambda m: self.functions[m.group(1)], text)
        text = re.sub(r'("name":\s*")(' + names + r')(")', lambda m: m.group(1) + self.functions[m.group(2)] + m.group(3),
                      text)  # fmt: skip
        for original, masked in self.functions.items():
            params = self.params.get(original, {})
            if params:
                text = _in_spans(text, re.escape(masked) + r"\(", "(", ")", params, r"(?=\s*=(?!=))")
                text = _in_spans(text, r'"name":\s*"' + re.escape(masked) + r'",\s*"arguments":\s*\{', "{", "}",
                                 params, "", quoted=True)  # fmt: skip
        return text


def _span_end(text: str, start: int, open_: str, close: str) -> int:
    """The index just past the bracket closing the one opened before ``start`` (quotes honoured)."""
    depth, quote, k = 1, None, start
    while k < len(text) and depth:
        ch = text[k]
        if quote:
            quote = None if ch == quote and text[k - 1] != "\\" else quote
        elif ch in "\"'":
            quote = ch
        elif ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
        k += 1
    return k


def _in_spans(text: str, opening: str, open_: str, close: str, params: Mapping[str, str], after: str,
              quoted: bool = False) -> str:  # fmt: skip
    """``params`` replaced inside each bracketed span that ``opening`` opens."""
    keys = sorted(params, key=len, reverse=True)
    if quoted:
        key_pattern = re.compile(r'"(' + "|".join(map(re.escape, keys)) + r')"(?=\s*:)')
        rename = lambda m: f'"{params[m.group(1)]}"'  # noqa: E731
    else:
        key_pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, keys)) + r")" + after)
        rename = lambda m: params[m.group(1)]  # noqa: E731
    out, position = [], 0
    for match in re.finditer(opening, text):
        if match.start() < position:
            continue
        end = _span_end(text, match.end(), open_, close)
        out += [text[position:match.end()], key_pattern.sub(rename, text[match.end():end])]
        position = end
    return "".join(out) + text[position:]


def masking_for(tools: Sequence[Mapping[str, Any]] | None, key: str, seed: int) -> Masking:
    """The mapping of one dialogue's offered functions and their parameters (distinct strings)."""
    functions: dict[str, str] = {}
    params: dict[str, dict[str, str]] = {}
    for tool in tools or ():
        function = _function(tool)
        name = str(function.get("name") or "")
        if not name or name in functions:
            continue
        taken = set(functions.values())
        n = 0
        while not functions.get(name) or functions[name] in taken:
            functions[name] = _token(seed, key, f"function|{name}|{n}", 10)
            n += 1
        properties = (function.get("parameters") or {}).get("properties") or {}
        params[name] = {}
        for p in properties:
            n, token = 0, ""
            while not token or token in params[name].values():
                token, n = _token(seed, key, f"param|{name}|{p}|{n}", 7), n + 1
            params[name][p] = token
    return Masking(functions, params)


def mask_tool(tool: Mapping[str, Any], masking: Masking) -> dict[str, Any]:
    """The tool with its name and parameter names masked; descriptions and types kept."""
    function = dict(_function(tool))
    name = str(function.get("name") or "")
    rename = masking.params.get(name, {})
    if isinstance(function.get("parameters"), Mapping):
        schema = dict(function["parameters"])
        if isinstance(schema.get("properties"), Mapping):
            schema["properties"] = {rename.get(k, k): v for k, v in schema["properties"].items()}
        if isinstance(schema.get("required"), list):
            schema["required"] = [rename.get(k, k) for k in schema["required"]]
        function["parameters"] = schema
    function["name"] = masking.functions.get(name, name)
    return {**tool, "function": function} if isinstance(tool.get("function"), Mapping) else function


def _mask_openai_call(call: Mapping[str, Any], masking: Masking) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    parsed = json.loads(arguments) if isinstance(arguments, str) and arguments.strip() else (arguments or {})
    masked = masking.call(ToolCall(str(function.get("name")), parsed))
    function["name"] = masked.name
    function["arguments"] = json.dumps(dict(masked.arguments), ensure_ascii=False) if isinstance(arguments, str) \
        else dict(masked.arguments)  # fmt: skip
    return {**call, "function": function}


def mask_message(message: Mapping[str, Any], masking: Masking) -> dict[str, Any]:
    """A history message: its text, its calls (``tool_calls``) and a tool result's ``name``."""
    out = dict(message)
    if isinstance(out.get("content"), str):
        out["content"] = masking.text(out["content"])
    if out.get("tool_calls"):
        out["tool_calls"] = [_mask_openai_call(c, masking) for c in out["tool_calls"]]
    if out.get("role") == "tool" and isinstance(out.get("name"), str):
        out["name"] = masking.functions.get(out["name"], out["name"])
    return out


def mask_step(step: SolvedStep, masking: Masking) -> SolvedStep:
    """The step with every offered name masked: tools, prompt, target calls (a written answer and the
    hits' recorded questions are plain text, kept)."""
    target = replace(step.target, calls=tuple(masking.call(c) for c in step.target.calls))
    return replace(step, tools=[mask_tool(t, masking) for t in step.tools or []] if step.tools is not None else None,
                   prompt=[mask_message(m, masking) for m in step.prompt], target=target)  # fmt: skip

"""The placeholder form shared by the knowledge writer and the filled vote."""

from __future__ import annotations

from kate.retrieval.inject import _masked
from kate.retrieval.pattern import pattern_objects
from kate.toolcall import ToolCall
from kate.toolcall.placeholder import carries_placeholder, is_placeholder, placeholder

TOOLS = [{"type": "function", "function": {"name": "setup", "parameters": {
    "type": "object", "properties": {"controller": {"type": "string"}, "port": {"type": "integer"}},
    "required": ["controller", "port"]}}}]  # fmt: skip


def test_what_the_writers_write_is_a_placeholder():
    shown = pattern_objects([{"name": "other", "arguments": {"x": 1}}], TOOLS)
    assert shown == [{"name": "setup", "arguments": {"controller": "<controller 1>", "port": "<port 1>"}}]
    assert all(is_placeholder(v) for v in shown[0]["arguments"].values())
    assert _masked([{"name": "f", "arguments": {"unit.name": "km"}}])[0]["arguments"] == {"unit.name": "<unit.name>"}
    assert is_placeholder(placeholder("unit.name")) and placeholder("a", 2) == "<a 2>"


def test_only_a_whole_placeholder_string_counts():
    assert is_placeholder(" <port 12> ")
    for value in ("<b>bold</b>", "x <port 1>", "<>", "<1 port>", 3, None, "a < b > c"):
        assert not is_placeholder(value), value


def test_a_call_carries_a_placeholder_anywhere_in_its_arguments():
    assert carries_placeholder([ToolCall("f", {"a": 1}), ToolCall("g", {"opts": {"names": ["x", "<name 2>"]}})])
    assert not carries_placeholder([ToolCall("f", {"a": "<b>bold</b>", "n": [1, 2]})])
    assert not carries_placeholder([])

"""BFCL's multi-turn backends behind kate's Environment: each dialogue has its own instances, and
closing it (or ``backends.forget``) drops exactly those from bfcl-eval's module globals."""

from __future__ import annotations

from kate.bfcl import backends
from kate.bfcl.data import load_entries
from kate.bfcl.env import BFCLEnvironment
from kate.toolcall import ToolCall


def _file_system_entry():
    return next(e for e in load_entries("multi_turn_base", "all") if {"mkdir", "ls"} <= {f["name"] for f in e.functions})


def _instances(model_name: str) -> list[str]:
    return [n for n in vars(backends.executor()) if n.startswith(model_name + "_")]


def test_two_dialogues_do_not_share_backend_state_and_close_drops_only_its_own():
    entry = _file_system_entry()
    first, second = BFCLEnvironment(entry), BFCLEnvironment(entry)
    try:
        assert first.execute(ToolCall("mkdir", {"dir_name": "kate_made_this"})).ok
        assert "kate_made_this" in first.execute(ToolCall("ls", {})).content
        assert "kate_made_this" not in second.execute(ToolCall("ls", {})).content
        first.close()
        assert _instances(first._model_name) == [] and _instances(second._model_name) != []
    finally:
        first.close()
        second.close()
    assert _instances(second._model_name) == []


def test_an_unoffered_function_never_reaches_the_backends():
    env = BFCLEnvironment(_file_system_entry())
    try:
        observation = env.execute(ToolCall("no_such_function", {}))
        assert not observation.ok and "unknown function" in observation.content
    finally:
        env.close()


def test_forget_of_one_entry_keeps_the_others():
    entries = [e for e in load_entries("multi_turn_base", "all")][:2]
    name = backends.private_model_name("kate_test")
    try:
        for entry in entries:
            backends.execute(name, entry, [])
        backends.forget(name, entries[0].id)
        left = _instances(name)
        assert left and all(entries[1].id.replace("_", "") in n.replace("_", "") for n in left)
    finally:
        backends.forget(name)
    assert _instances(name) == []

"""Test doubles for kate's OpenAI client and for agent loops built on it, public so that tests and
benchmarks outside this repository can use them: a loopback proxy that injects HTTP faults
(``FaultProxy`` with its schedules) and a stub OpenAI-compatible upstream (``StubUpstream``).
Nothing in the library imports this package."""

from kate.testing.fault_proxy import FaultProxy
from kate.testing.schedules import FAULT_KINDS, Schedule, every, no_faults, persistent, scripted, seeded
from kate.testing.stub_upstream import StubUpstream, chat_response

__all__ = ["FAULT_KINDS", "FaultProxy", "Schedule", "StubUpstream", "chat_response", "every", "no_faults",
           "persistent", "scripted", "seeded"]  # fmt: skip

"""Loop settings: how a policy runs turns and dialogues, the same for every arm of a comparison.

Every field has help text (``field(metadata={"help": ...})``), shown by ``kate <job> --help`` style
tools and checked by a test; bad values fail when the settings are made, naming the field.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from kate.toolcall.format import HERMES_CALL_START

REPEAT_POLICIES = ("end_turn", "warn", "answer", "off")
REPEAT_MATCHES = ("exact", "fed")
ECHO_POLICIES = ("keep", "answer", "act")
CALL_PREFILL = HERMES_CALL_START  # how the Qwen models' chat template starts a call
ANSWER_PREFILL = "Based on the result, "
# Turn ``t`` of a dialogue samples with ``seed + SEED_STRIDE * t``; step ``i`` of a turn with ``+ i``.
SEED_STRIDE = 1000

AGENT_SYSTEM_PROMPT = (
    "You can call the provided functions to act in the user's environment. Make one call at a time "
    "unless the calls are independent, and read each result before the next call. When the request is "
    "done, or cannot be done with these functions, reply to the user in plain text without any call."
)
SYSTEM_PROMPTS = {"kate": AGENT_SYSTEM_PROMPT}


def resolve_system_prompt(value: str | None) -> str | None:
    """A preset name (``kate``), ``None`` / ``""`` / ``none`` (no system prompt), or a prompt's own text.

    A single word that is not a preset is refused: it is a typo of a preset far more often than a
    prompt (``system_prompt: kat`` would otherwise be sent to the model word for word)."""
    if value is None or value == "" or value == "none":
        return None
    if value in SYSTEM_PROMPTS:
        return SYSTEM_PROMPTS[value]
    if len(value.split()) < 2:
        raise ValueError(f"system_prompt {value!r} is neither a preset ({', '.join(SYSTEM_PROMPTS)}, none) "
                         "nor a prompt (a prompt has more than one word)")  # fmt: skip
    return value


def help_meta(text: str) -> dict[str, str]:
    """A dataclass field's metadata holding its help (``field(..., metadata=help_meta("..."))``)."""
    return {"help": text}


@dataclass(frozen=True)
class LoopSettings:
    """How turns and dialogues run. Defaults are what kate's BFCL arms use; ``answering()`` is the
    Python API's default for a user's own tools."""

    max_steps: int = field(default=20, metadata=help_meta("model steps per user turn before the turn ends (BFCL: 20)"))
    repeat_policy: str = field(default="warn", metadata=help_meta(
        "a step repeating an earlier call set of the turn: end_turn | warn (not run again, the model is told; "
        "a second repeat ends the turn) | answer (not run again; the loop asks for the answer, its reply starting "
        "with answer_prefill, and ends the turn) | off (run like any call)"))
    repeat_match: str = field(default="exact", metadata=help_meta(
        "what counts as a repeat: exact (the same call set) | fed (also a call to a function already called this "
        "turn whose changed arguments hold values of that call's result: the result fed back into the same call)"))
    answer_prefill: str = field(default=ANSWER_PREFILL, metadata=help_meta(
        "the text an answer the loop asks for starts with (repeat_policy=answer, answer_at_max_steps); the model "
        "client must take prefill= (llamacpp, hf, fake)"))
    answer_at_max_steps: bool = field(default=False, metadata=help_meta(
        "at the step cap, ask once for the answer (starting with answer_prefill) instead of ending without one"))
    echo_policy: str = field(default="keep", metadata=help_meta(
        "a reply without calls that is empty or writes again a tool result or an earlier answer of the dialogue "
        "(verbatim, or wrapped in <tool_response> tags): keep (it is the answer) | answer (not kept; the loop asks "
        "for the answer, starting with answer_prefill, and the turn ends) | act (not kept; a turn that has made no "
        "call yet asks for a call, its reply starting with call_prefill; a turn with calls asks for the answer)"))
    call_prefill: str = field(default=CALL_PREFILL, metadata=help_meta(
        "the text a call the loop asks for starts with (echo_policy=act): the start of a call in the model's format"))
    system_prompt: str | None = field(default="kate", metadata=help_meta(
        "system message of a dialogue: a preset (kate), none, or the prompt's text"))
    one_call: bool = field(default=False, metadata=help_meta(
        "in turns and dialogues each step is the first call the model writes; a single step keeps every call"))
    max_malformed: int | None = field(default=None, metadata=help_meta(
        "consecutive unreadable actions that end a turn; null: only the same unreadable output twice ends it"))

    def __post_init__(self) -> None:
        if self.repeat_policy not in REPEAT_POLICIES:
            raise ValueError(f"repeat_policy must be one of {REPEAT_POLICIES}, got {self.repeat_policy!r}")
        if self.repeat_match not in REPEAT_MATCHES:
            raise ValueError(f"repeat_match must be one of {REPEAT_MATCHES}, got {self.repeat_match!r}")
        if self.echo_policy not in ECHO_POLICIES:
            raise ValueError(f"echo_policy must be one of {ECHO_POLICIES}, got {self.echo_policy!r}")
        if self.repeat_match == "fed" and self.repeat_policy == "off":
            raise ValueError("repeat_match=fed needs a repeat_policy other than off (off runs every repeat)")
        if not isinstance(self.max_steps, int) or not 1 <= self.max_steps < SEED_STRIDE:
            raise ValueError(f"max_steps must be an integer in [1, {SEED_STRIDE}), got {self.max_steps!r}")
        if self.max_malformed is not None and self.max_malformed < 1:
            raise ValueError(f"max_malformed must be >= 1 or null, got {self.max_malformed!r}")
        resolve_system_prompt(self.system_prompt)

    @classmethod
    def answering(cls, **changes: Any) -> "LoopSettings":
        """The settings for a user's own tools, a ``Policy``'s default where the model takes ``prefill=``:
        the first call of a reply, and a call that repeats or feeds back an earlier call of the turn
        answered by asking the model for the answer (also once at the step cap), so a turn ends with
        an answer rather than calls until ``max_steps``. Chosen by measurement on the own-tools task
        (bench/results/own_tools_baseline.json, training half; own_tools_test.json, test half)."""
        return cls(**{"one_call": True, "repeat_policy": "answer", "repeat_match": "fed",
                      "answer_at_max_steps": True, **changes})  # fmt: skip

    @property
    def asks_answers(self) -> bool:
        """Whether the loop may ask for a prefilled answer (the model must take ``prefill=``)."""
        return self.repeat_policy == "answer" or self.answer_at_max_steps or self.echo_policy != "keep"

    @property
    def system_message(self) -> str | None:
        """The system prompt's text (presets resolved), or None."""
        return resolve_system_prompt(self.system_prompt)

    def to_dict(self) -> dict[str, Any]:
        """The settings; the turn-end fields (``LATER_FIELDS``) only where they differ from their
        defaults, so runs recorded before those fields existed keep their fingerprints."""
        out = asdict(self)
        for name in LATER_FIELDS:
            if out[name] == _DEFAULTS[name]:
                del out[name]
        return out

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata["help"] for f in fields(cls)}


# Added after runs were recorded: to_dict names them only when set (see LoopSettings.to_dict).
LATER_FIELDS = ("repeat_match", "answer_prefill", "answer_at_max_steps", "echo_policy", "call_prefill")
_DEFAULTS = {f.name: f.default for f in fields(LoopSettings)}

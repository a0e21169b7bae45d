"""The schemas of ``kate demo``, ``kate models``, ``kate kb`` and ``kate serve``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, List, Optional

from kate.eval.config import help_field
from kate.toolcall.format import HERMES_OPENING


@dataclass
class DemoConfig:
    llm: Any = help_field("the model client (conf/llm/)")
    max_tokens: int = help_field("tokens per answer", 128)
    temperature: float = help_field("sampling temperature", 0.0)
    seed: int = help_field("sampling seed", 0)
    questions: List[str] = help_field("questions asked with the demo tools", factory=list)


@dataclass
class ModelsConfig:
    action: str = help_field("list | install | verify", "list")
    names: List[str] = help_field("model names; empty: the defaults (install) or every model (verify)", factory=list)


@dataclass
class KbConfig:
    kb: Any = help_field("what `build` builds (conf/kb/)")
    retrieval: Any = help_field("how `query` / `inspect` search a base (conf/retrieval/)")
    llm: Any = help_field("the writer of ES/SIC/TIC entries and the intent model (conf/llm/)")
    action: str = help_field("build | query | inspect", "inspect")
    kb_name: Optional[str] = help_field("query/inspect another base than retrieval.kb", None)
    query: Optional[str] = help_field("the request to retrieve for (action=query)", None)
    api_classes: Optional[List[str]] = help_field("the task's API classes; null: no class filter", None)
    tools: Optional[List[str]] = help_field("the current tool names (single-turn filter); null: no tool filter", None)
    exclude_ids: List[str] = help_field("entry or source ids to leave out (self hits)", factory=list)
    show_text: bool = help_field("print the text that would be injected", True)


class ServeVote(Enum):
    """How the server aggregates a step's samples (kate.sampling.vote, kate.sampling.adaptive)."""

    valid_majority = "valid_majority"
    filled_majority = "filled_majority"
    majority = "majority"
    critic = "critic"
    adaptive = "adaptive"


@dataclass
class ServeKnowledgeConfig:
    retrieval: Any = help_field("retrieval settings (conf/retrieval/); its kb is the default base; null: no knowledge", None)
    enabled: bool = help_field("inject knowledge unless a request sends kate.knowledge=false", True)
    bases: List[str] = help_field("other bases (names under retrieval.root) a request may pick with kate.kb", factory=list)


@dataclass
class LearnConfig:
    enabled: bool = help_field("learning from use: POST /v1/kate/trajectories adds verified successes as ST entries", False)
    kb: str = help_field("the base learned into (a name under knowledge.retrieval.root; created when missing)", "learned")


@dataclass
class ServeLimits:
    max_body_bytes: int = help_field("largest request body (413 beyond)", 4 * 1024 * 1024)
    max_messages: int = help_field("most messages in one request (413 beyond)", 512)
    max_message_chars: int = help_field("longest message content in characters (413 beyond)", 200_000)
    max_tokens: int = help_field("largest max_tokens a request may ask for (400 beyond)", 4096)
    max_n: int = help_field("largest n (choices) a request may ask for", 16)
    max_width: int = help_field("largest kate.n (samples voted over) a request may ask for", 32)


@dataclass
class ServeConfig:
    llm: Any = help_field("the model client served (conf/llm/: the local engine, or an upstream server via openai)")
    served_model_name: Optional[str] = help_field("the model id clients send; null: the model client's name", None)
    host: str = help_field("interface to bind (127.0.0.1: this machine only)", "127.0.0.1")
    port: int = help_field("TCP port (0: any free port, printed at start)", 8000)
    api_key_env: Optional[str] = help_field("environment variable holding the API key clients must send; null: none", None)
    width: int = help_field("samples voted over per step (kate.n per request; 1: no vote)", 8)
    vote: ServeVote = help_field("valid_majority | filled_majority | majority | critic | adaptive (the act-first "
                                 "adaptive vote, up to width samples; kate.vote per request)", ServeVote.valid_majority)
    temperature: float = help_field("temperature of width samples when a request gives none", 1.0)
    max_tokens: int = help_field("completion tokens when a request gives no max_tokens", 512)
    call_opening: str = help_field("the model's call opening, prefilled when tool_choice forces a call",
                                   HERMES_OPENING)
    report: bool = help_field("add the kate field (vote, knowledge hits) to responses", True)
    answer_repeats: bool = help_field("answer instead when the chosen call repeats or feeds a call already run "
                                      "this turn (reported in kate.turn_end); false: return the call as voted", True)
    gate: Any = help_field("a probe-triggered gate around each request's sampler (conf/gate/: probe); null: none", None)
    knowledge: ServeKnowledgeConfig = help_field("knowledge bases and retrieval", factory=ServeKnowledgeConfig)
    learn: LearnConfig = help_field("learning from use (off by default)", factory=LearnConfig)
    limits: ServeLimits = help_field("what one request may hold", factory=ServeLimits)
    max_concurrent: int = help_field("requests run at once (the local engine decodes them together)", 4)
    max_queue: int = help_field("requests waiting beyond those (429 when full)", 16)
    request_timeout: float = help_field("seconds a request may wait and run before a 504", 300.0)
    graceful_shutdown: float = help_field("seconds in-flight requests get to finish on SIGTERM/SIGINT", 30.0)

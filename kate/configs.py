"""Every job's typed schema, registered with Hydra's ConfigStore (``<job>_schema``; each
``conf/<job>.yaml`` names its schema first in its defaults list). Unknown keys, bad enum values
and wrong types fail when the job starts, naming the key. The evaluation jobs' schemas live with
them (``kate/eval/config.py``); the others are here. Code that composes with Hydra's ``compose`` API
imports this module first (``kate.cli`` does)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore

from kate.eval.config import ArmConfig, EvalConfig, MainConfig, ReportConfig, help_field


class AppWorldAction(Enum):
    run = "run"
    check = "check"
    build_kb = "build_kb"


class World(Enum):
    stand_in = "stand_in"
    appworld = "appworld"


@dataclass
class AppWorldSettings:
    python: Optional[str] = help_field("AppWorld's interpreter; null: .venv-appworld/bin/python", None)
    root: Optional[str] = help_field("APPWORLD_ROOT (data/ goes here); null: ~/.cache/kate/appworld", None)
    dataset: str = help_field("train | dev | test_normal | test_challenge", "test_normal")
    limit: Optional[int] = help_field("first n tasks of the dataset", None)
    task_ids: List[str] = help_field("explicit task ids (overrides dataset)", factory=list)
    max_interactions: int = help_field("AppWorld's own cap on executions per task", 50)


@dataclass
class CodeArmConfig:
    sampling: Any = help_field("the arm's code sampler (conf/code_sampling/)")
    knowledge: bool = help_field("ST knowledge (task -> solution code) retrieved for each task", False)


@dataclass
class CodeKnowledgeConfig:
    kb: str = help_field("knowledge base name under root; built by action=build_kb from build_dataset", "appworld_train")
    root: str = help_field("knowledge bases folder", "knowledge_bases")
    top_k: int = help_field("entries retrieved per task", 3)
    threshold: float = help_field("cosine similarity an entry needs", 0.5)
    build_dataset: str = help_field("AppWorld split the knowledge is built from", "train")
    build_limit: Optional[int] = help_field("first n tasks of build_dataset", None)


@dataclass
class CodeLoopConfig:
    max_steps: int = help_field("code steps per task", 20)
    repeat_policy: str = help_field("the same code again: end_turn | warn | off", "warn")
    max_malformed: Optional[int] = help_field("replies in a row without a code block that end the task", 2)
    max_output_chars: int = help_field("output shown to the model per step (records keep all of it)", 3000)


@dataclass
class AppWorldConfig:
    llm: Any = help_field("the model client (conf/llm/)")
    action: AppWorldAction = help_field("run | check | build_kb", AppWorldAction.run)
    world: World = help_field("stand_in (no data needed) | appworld (needs scripts/setup_appworld.sh and the data)", World.stand_in)
    appworld: AppWorldSettings = help_field("where AppWorld is and which tasks to run", factory=AppWorldSettings)
    arms: Dict[str, CodeArmConfig] = help_field("arm name -> code sampler and knowledge on/off", factory=dict)
    knowledge: CodeKnowledgeConfig = help_field("the ST knowledge of arms with knowledge: true", factory=CodeKnowledgeConfig)
    loop: CodeLoopConfig = help_field("kate's agent loop over the code environment", factory=CodeLoopConfig)
    experiment_name: str = help_field("AppWorld experiment folder prefix", "kate")
    seed: int = help_field("sampling seed", 0)
    out_dir: str = help_field("<out_dir>/<arm>/seed_<s>/, summary.json, report.md", "runs/appworld")


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


class Vote(Enum):
    valid_majority = "valid_majority"
    majority = "majority"
    critic = "critic"


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
    vote: Vote = help_field("valid_majority | majority | critic (kate.vote per request)", Vote.valid_majority)
    temperature: float = help_field("temperature of width samples when a request gives none", 1.0)
    max_tokens: int = help_field("completion tokens when a request gives no max_tokens", 512)
    call_opening: str = help_field("the model's call opening, prefilled when tool_choice forces a call", "<tool_call>\n")
    report: bool = help_field("add the kate field (vote, knowledge hits) to responses", True)
    knowledge: ServeKnowledgeConfig = help_field("knowledge bases and retrieval", factory=ServeKnowledgeConfig)
    learn: LearnConfig = help_field("learning from use (off by default)", factory=LearnConfig)
    limits: ServeLimits = help_field("what one request may hold", factory=ServeLimits)
    max_concurrent: int = help_field("requests run at once (the local engine decodes them together)", 4)
    max_queue: int = help_field("requests waiting beyond those (429 when full)", 16)
    request_timeout: float = help_field("seconds a request may wait and run before a 504", 300.0)
    graceful_shutdown: float = help_field("seconds in-flight requests get to finish on SIGTERM/SIGINT", 30.0)


SCHEMAS: dict[str, type] = {
    "eval": EvalConfig, "main": MainConfig, "report": ReportConfig, "appworld": AppWorldConfig,
    "demo": DemoConfig, "models": ModelsConfig, "kb": KbConfig, "serve": ServeConfig,
}  # fmt: skip
NESTED = (ArmConfig,)


def register() -> None:
    """Store every job schema as ``<job>_schema`` (idempotent)."""
    store = ConfigStore.instance()
    for job, schema in SCHEMAS.items():
        store.store(name=f"{job}_schema", node=schema)


register()

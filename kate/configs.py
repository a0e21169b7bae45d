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

from kate.eval.config import ArmConfig, EvalConfig, MainConfig, ReportConfig, _help


class AppWorldAction(Enum):
    run = "run"
    check = "check"
    build_kb = "build_kb"


class World(Enum):
    stand_in = "stand_in"
    appworld = "appworld"


@dataclass
class AppWorldSettings:
    python: Optional[str] = _help("AppWorld's interpreter; null: .venv-appworld/bin/python", None)
    root: Optional[str] = _help("APPWORLD_ROOT (data/ goes here); null: ~/.cache/kate/appworld", None)
    dataset: str = _help("train | dev | test_normal | test_challenge", "test_normal")
    limit: Optional[int] = _help("first n tasks of the dataset", None)
    task_ids: List[str] = _help("explicit task ids (overrides dataset)", factory=list)
    max_interactions: int = _help("AppWorld's own cap on executions per task", 50)


@dataclass
class CodeArmConfig:
    sampling: Any = _help("the arm's code sampler (conf/code_sampling/)")
    knowledge: bool = _help("ST knowledge (task -> solution code) retrieved for each task", False)


@dataclass
class CodeKnowledgeConfig:
    kb: str = _help("knowledge base name under root; built by action=build_kb from build_dataset", "appworld_train")
    root: str = _help("knowledge bases folder", "knowledge_bases")
    top_k: int = _help("entries retrieved per task", 3)
    threshold: float = _help("cosine similarity an entry needs", 0.5)
    build_dataset: str = _help("AppWorld split the knowledge is built from", "train")
    build_limit: Optional[int] = _help("first n tasks of build_dataset", None)


@dataclass
class CodeLoopConfig:
    max_steps: int = _help("code steps per task", 20)
    repeat_policy: str = _help("the same code again: end_turn | warn | off", "warn")
    max_malformed: Optional[int] = _help("replies in a row without a code block that end the task", 2)
    max_output_chars: int = _help("output shown to the model per step (records keep all of it)", 3000)


@dataclass
class AppWorldConfig:
    llm: Any = _help("the model client (conf/llm/)")
    action: AppWorldAction = _help("run | check | build_kb", AppWorldAction.run)
    world: World = _help("stand_in (no data needed) | appworld (needs scripts/setup_appworld.sh and the data)", World.stand_in)
    appworld: AppWorldSettings = _help("where AppWorld is and which tasks to run", factory=AppWorldSettings)
    arms: Dict[str, CodeArmConfig] = _help("arm name -> code sampler and knowledge on/off", factory=dict)
    knowledge: CodeKnowledgeConfig = _help("the ST knowledge of arms with knowledge: true", factory=CodeKnowledgeConfig)
    loop: CodeLoopConfig = _help("kate's agent loop over the code environment", factory=CodeLoopConfig)
    experiment_name: str = _help("AppWorld experiment folder prefix", "kate")
    seed: int = _help("sampling seed", 0)
    out_dir: str = _help("<out_dir>/<arm>/seed_<s>/, summary.json, report.md", "runs/appworld")


@dataclass
class DemoConfig:
    llm: Any = _help("the model client (conf/llm/)")
    max_tokens: int = _help("tokens per answer", 128)
    temperature: float = _help("sampling temperature", 0.0)
    seed: int = _help("sampling seed", 0)
    questions: List[str] = _help("questions asked with the demo tools", factory=list)


@dataclass
class ModelsConfig:
    action: str = _help("list | install | verify", "list")
    names: List[str] = _help("model names; empty: the defaults (install) or every model (verify)", factory=list)


@dataclass
class KbConfig:
    kb: Any = _help("what `build` builds (conf/kb/)")
    retrieval: Any = _help("how `query` / `inspect` search a base (conf/retrieval/)")
    llm: Any = _help("the writer of ES/SIC/TIC entries and the intent model (conf/llm/)")
    action: str = _help("build | query | inspect", "inspect")
    kb_name: Optional[str] = _help("query/inspect another base than retrieval.kb", None)
    query: Optional[str] = _help("the request to retrieve for (action=query)", None)
    api_classes: Optional[List[str]] = _help("the task's API classes; null: no class filter", None)
    tools: Optional[List[str]] = _help("the current tool names (single-turn filter); null: no tool filter", None)
    exclude_ids: List[str] = _help("entry or source ids to leave out (self hits)", factory=list)
    show_text: bool = _help("print the text that would be injected", True)


SCHEMAS: dict[str, type] = {
    "eval": EvalConfig, "main": MainConfig, "report": ReportConfig, "appworld": AppWorldConfig,
    "demo": DemoConfig, "models": ModelsConfig, "kb": KbConfig,
}  # fmt: skip
NESTED = (ArmConfig,)


def register() -> None:
    """Store every job schema as ``<job>_schema`` (idempotent)."""
    store = ConfigStore.instance()
    for job, schema in SCHEMAS.items():
        store.store(name=f"{job}_schema", node=schema)


register()

"""``kate appworld``'s schema: the code-action loop on AppWorld or its stand-in (``conf/appworld.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Dict, List, Optional

from kate.eval.config import help_field, loop_schema


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


# AppWorld's code loop: LoopSettings' fields that apply to code actions (the same definition as
# every other job's loop), plus how much output a step shows the model.
CodeLoopConfig = loop_schema(
    "CodeLoopConfig", keep=("max_steps", "repeat_policy", "max_malformed"), defaults={"max_malformed": 2},
    extra=[("max_output_chars", int, help_field("output shown to the model per step (records keep all of it)", 3000))])


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


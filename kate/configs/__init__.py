"""Every job's typed schema and every config group option's, registered with Hydra's ConfigStore.

A job's schema is stored as ``<job>_schema`` (each ``conf/<job>.yaml`` names it first in its
defaults list); a group option's as ``<group>/<option>_schema`` (each ``conf/<group>/<option>.yaml``
names it first). Unknown keys, bad enum values and wrong types fail when the config is composed,
naming the key. The evaluation jobs' schemas live with them (``kate/eval/config.py``); the others
are in this package: ``jobs`` (demo, models, kb, serve), ``appworld``, ``diagnose``, and the group
options' ``llm``, ``sampling``, ``knowledge`` (made by ``targets``). Code that composes with Hydra's
``compose`` API imports this package first (``kate.cli`` does)."""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from kate.configs import knowledge, llm, sampling
from kate.configs.appworld import (AppWorldAction, AppWorldConfig, AppWorldSettings, CodeArmConfig,
                                   CodeKnowledgeConfig, CodeLoopConfig, World)
from kate.configs.diagnose import (ActMode, ArithmeticSetConfig, BfclSetConfig, DiagnoseConfig, DiagnosticName,
                                   DiagnosticSet, FirstTokenFields, GateFields, GateMode, KeywordFields,
                                   NearMissFields, NecessityFields, PaddingSide, PcallFields, PlanFields, PlanOrder,
                                   ProbesFields, ReplayFields, ReplaySource, ToolSenseFields, TrajectoryFields,
                                   UserSetConfig)
from kate.configs.jobs import (DemoConfig, KbConfig, LearnConfig, ModelsConfig, ServeConfig, ServeKnowledgeConfig,
                               ServeLimits, ServeVote)
from kate.eval.config import ArmConfig, EvalConfig, MainConfig, ReportConfig, Split, help_field, loop_schema
from kate.eval.results_doc import ResultsConfig

__all__ = [
    "ActMode", "AppWorldAction", "AppWorldConfig", "AppWorldSettings", "ArithmeticSetConfig", "ArmConfig",
    "BfclSetConfig", "CodeArmConfig", "CodeKnowledgeConfig", "CodeLoopConfig", "DemoConfig", "DiagnoseConfig",
    "DiagnosticName", "DiagnosticSet", "EvalConfig", "FirstTokenFields", "GROUP_SCHEMAS", "GateFields", "GateMode",
    "KbConfig", "KeywordFields", "LearnConfig", "MainConfig", "ModelsConfig", "NESTED", "NearMissFields",
    "NecessityFields", "PaddingSide", "PcallFields", "PlanFields", "PlanOrder", "ProbesFields", "ReplayFields",
    "ReplaySource", "ReportConfig", "ResultsConfig", "SCHEMAS", "ServeConfig", "ServeKnowledgeConfig", "ServeLimits",
    "ServeVote", "Split", "ToolSenseFields", "TrajectoryFields", "UserSetConfig", "World", "help_field",
    "loop_schema", "register",
]  # fmt: skip

SCHEMAS: dict[str, type] = {
    "eval": EvalConfig, "main": MainConfig, "report": ReportConfig, "appworld": AppWorldConfig,
    "demo": DemoConfig, "models": ModelsConfig, "kb": KbConfig, "serve": ServeConfig,
    "diagnose": DiagnoseConfig, "results": ResultsConfig,
}  # fmt: skip
NESTED = (ArmConfig,)
# group -> option -> its schema (stored as <group>/<option>_schema)
GROUP_SCHEMAS: dict[str, dict[str, type]] = {"llm": llm.SCHEMAS, **sampling.GROUPS, **knowledge.GROUPS}


def register() -> None:
    """Store every job schema as ``<job>_schema`` and every group option's as
    ``<group>/<option>_schema`` (idempotent)."""
    store = ConfigStore.instance()
    for job, schema in SCHEMAS.items():
        store.store(name=f"{job}_schema", node=schema)
    for group, options in GROUP_SCHEMAS.items():
        for option, schema in options.items():
            store.store(group=group, name=f"{option}_schema", node=schema)


register()

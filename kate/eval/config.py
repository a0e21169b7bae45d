"""Typed schemas of the evaluation jobs (``kate eval``, ``kate main``, ``kate report``), registered
with Hydra's ConfigStore by ``kate.configs``: an unknown key, a bad enum value or a wrong type fails
when the job starts, naming the key. Every field has help text (TRL's configs are the anchor).

Model, sampler and retrieval nodes are Hydra ``_target_`` nodes (``conf/llm``, ``conf/sampling``,
``conf/retrieval``), typed ``Any`` here: each group option brings its own schema (``kate.configs``),
so a misspelt key fails at compose; ``check_target`` checks a node's keys against its target's
parameters at start (nodes written out in an override as well). ``plain`` and ``instantiate`` leave
out the fields an option's schema has and its YAML leaves unset, so the target's defaults apply.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from omegaconf import MISSING, DictConfig, OmegaConf

from kate.agent.settings import LoopSettings

HYDRA_KEYS = {"_target_", "_convert_", "_recursive_", "_partial_", "_args_"}


def help_field(text: str, default: Any = MISSING, factory: Any = None) -> Any:
    """A dataclass field with its help text (``factory`` for mutable defaults)."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": text})
    return field(default=default, metadata={"help": text})


class Split(Enum):
    test = "test"
    train = "train"
    all = "all"


class RepeatPolicy(Enum):
    end_turn = "end_turn"
    warn = "warn"
    answer = "answer"
    off = "off"


class RepeatMatch(Enum):
    exact = "exact"
    fed = "fed"


class EchoPolicy(Enum):
    keep = "keep"
    answer = "answer"
    act = "act"


@dataclass
class KnowledgeConfig:
    single_turn: Any = help_field("retrieval config for single-turn entries (conf/retrieval/); null: no knowledge", None)
    multi_turn: Any = help_field("retrieval config for multi-turn dialogues (conf/retrieval/); null: no knowledge", None)


# Entries the one runner keeps in flight. On the local engine their prefill and decode share
# llama.cpp batches (kate.llm.llamacpp_batch), and the scheduler queues a request rather than
# overflow n_ctx. 8 was the fastest of 1, 2, 4, 8 for the 0.5B model on 2 cores
# (bench/results/inflight.json, `bench/inflight.py`). Greedy outputs can differ from a run with 1 in
# flight on near-ties (batching changes llama.cpp's summation order), so that file also counts the
# outputs that differ and the entries fixed and broken against workers=1.
IN_FLIGHT = 8
IN_FLIGHT_HELP = ("entries in flight at once; a local engine decodes them together (1: one at a time, "
                  "bench/results/inflight.json)")


ENUM_FIELDS = {"repeat_policy": RepeatPolicy, "repeat_match": RepeatMatch, "echo_policy": EchoPolicy}


def _schema_type(hint: Any) -> Any:
    """``X | None`` as ``Optional[X]`` (what OmegaConf reads); other hints unchanged."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if isinstance(hint, types.UnionType) and len(args) == 1:
        return Optional[args[0]]
    return hint


def loop_schema(name: str, keep: Sequence[str] | None = None, defaults: Mapping[str, Any] | None = None,
                extra: Sequence[tuple[str, Any, Any]] = ()) -> type:  # fmt: skip
    """A job schema's loop fields, made from ``LoopSettings`` (the one definition of the loop's
    settings: names, types, defaults, help), enums where a field takes one of a few values;
    ``keep``: only these fields; ``defaults``: the job's own defaults; ``extra``: (name, type, field)."""
    hints = typing.get_type_hints(LoopSettings)
    made = []
    for f in dataclasses.fields(LoopSettings):
        if keep is not None and f.name not in keep:
            continue
        kind = ENUM_FIELDS.get(f.name)
        default = (defaults or {}).get(f.name, f.default)
        value = kind(default) if kind is not None else default
        made.append((f.name, kind or _schema_type(hints[f.name]), field(default=value, metadata=dict(f.metadata))))
    return dataclasses.make_dataclass(name, [*made, *extra])


LoopFields = loop_schema("LoopFields")
LoopFields.__doc__ = "The loop settings every arm of a job shares: ``kate.agent.settings.LoopSettings``'s fields."


@dataclass
class EvalConfig(LoopFields):
    llm: Any = help_field("the model client (conf/llm/: llamacpp | hf | openai | fake)")
    sampling: Any = help_field("the sampler and its vote (conf/sampling/: greedy | width | depth)")
    knowledge: Optional[KnowledgeConfig] = help_field("retrieval per entry kind; null: none (an arm: conf/arm/)", None)
    name: str = help_field("the arm's name (result folder, reports)", "direct")
    categories: List[str] = help_field("BFCL-V3 categories to run", factory=lambda: ["simple_python"])
    split: Split = help_field("test (KATE's odd half) | train (even half) | all", Split.test)
    limit: Optional[int] = help_field("entries per category (null: all of the split)", 50)
    seeds: List[int] = help_field("one result folder per seed", factory=lambda: [0])
    workers: int = help_field(IN_FLIGHT_HELP, IN_FLIGHT)
    out_dir: str = help_field("result folder of the arm (seed_<s>/ inside)", "runs/${name}")


@dataclass
class ArmConfig:
    sampling: Any = help_field("the arm's sampler (conf/sampling/)")
    knowledge: Optional[KnowledgeConfig] = help_field("the arm's knowledge; null: none", None)
    llm: Optional[Any] = help_field("the arm's own model client (conf/llm/); null: the job's `llm`", None)


@dataclass
class SliceConfig:
    split: Split = help_field("KATE's half to draw from", Split.test)
    categories: Dict[str, int] = help_field("category -> number of entries in index order (0 leaves it out)", factory=dict)


@dataclass
class MainConfig(LoopFields):
    llm: Any = help_field("the model client every arm shares (conf/llm/)")
    arms: Dict[str, ArmConfig] = help_field("arm name -> sampler and knowledge; the first is the baseline", factory=dict)
    slice: SliceConfig = help_field("the fixed BFCL slice", factory=SliceConfig)
    seed: int = help_field("sampling seed of every arm", 0)
    workers: int = help_field(IN_FLIGHT_HELP, IN_FLIGHT)
    out_dir: str = help_field("<out_dir>/<arm>/seed_<s>/, report.md, categories.png", "runs/main")


@dataclass
class ReportConfig:
    # Any, not Dict[str, str]: Hydra cannot merge a `runs={...}` override into a typed dict that is null
    runs: Any = help_field("name -> arm folder (seed_*/ inside) or one seed folder; first = baseline", None)
    title: str = help_field("report title", "kate runs")
    out_dir: str = help_field("where report.md, summary.json and the plots go", "runs/report")


def _unset_dropped(value: Any, in_target: bool = False) -> Any:
    """``value`` without the unset (``???``) fields of ``_target_`` nodes and of the nodes inside them:
    a parameter the config leaves unset is not passed, its target's default applies."""
    if isinstance(value, dict):
        in_target = in_target or "_target_" in value
        return {k: _unset_dropped(v, in_target) for k, v in value.items() if not (in_target and v == MISSING)}
    if isinstance(value, list):
        return [_unset_dropped(v, in_target) for v in value]
    return value


def plain(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config as plain containers (enums as their names; the unset fields of typed
    ``_target_`` nodes left out, so a node holds what the YAML and the overrides set)."""
    return _unset_dropped(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))  # type: ignore[return-value]


def instantiate(node: Any, *args: Any, **kwargs: Any) -> Any:
    """Hydra's ``instantiate`` of a config node, its unset (``???``) fields left out (``plain``)."""
    from hydra.utils import instantiate as hydra_instantiate

    if isinstance(node, DictConfig):
        node = plain(node)
    return hydra_instantiate(node, *args, **kwargs)


def _target_parameters(target: str) -> tuple[set[str] | None, str]:
    module, _, name = target.rpartition(".")
    obj = getattr(importlib.import_module(module), name)
    if dataclasses.is_dataclass(obj):
        return {f.name for f in dataclasses.fields(obj) if f.init}, name
    params = inspect.signature(obj).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None, name
    return {p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL}, name


def check_target(node: Any, path: str) -> None:
    """Every key of a ``_target_`` node (and of nested ones) must be a parameter of its target."""
    if isinstance(node, DictConfig):
        node = OmegaConf.to_container(node, resolve=True)
    if not isinstance(node, dict):
        return
    if "_target_" in node:
        known, name = _target_parameters(str(node["_target_"]))
        unknown = sorted(set(node) - HYDRA_KEYS - (known or set())) if known is not None else []
        if unknown:
            raise ValueError(f"{path}.{unknown[0]}: not a parameter of {name} (known: {', '.join(sorted(known or ()))})")
    for key, value in node.items():
        if isinstance(value, dict):
            check_target(value, f"{path}.{key}")

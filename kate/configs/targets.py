"""Typed schemas of ``_target_`` nodes (the options of ``conf/llm``, ``conf/sampling``,
``conf/retrieval``, ``conf/kb``, ``conf/gate``, ``conf/code_sampling``), made from their targets.

``target_schema`` reads the target's parameters (a dataclass's init fields, or a class's signature)
as ``loop_schema`` reads ``LoopSettings``: one definition of names and types, help from the field's
``help`` metadata or from ``helps``. Every field defaults to ``???`` (unset): a parameter the YAML
leaves out is not passed, so the target's own default applies, and the composed node holds only
what the YAML and the overrides set (run fingerprints stay those of the untyped nodes; ``plain``
drops the unset ones). Each schema is stored in its group (``<group>/<name>_schema``) and each
option's YAML names it first in its defaults list, so an unknown key in the YAML or in an override
(``llm.modle=x``) fails when Hydra composes the config, naming the key. A typed node's key cannot
be deleted (``~llm.script``: structured configs refuse it); ``llm.script=???`` unsets it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import importlib
import inspect
import types
import typing
from collections.abc import Mapping
from typing import Any, Dict, List, Optional, Union

from omegaconf import MISSING

from kate.eval.config import help_field

Number = Union[int, float]  # a float parameter: an int stays an int (fingerprints of nodes written `timeout: 120`)
PRIMITIVES = (int, str, bool)
SKIP = {"self"}  # never a config parameter


def _target(path: str) -> Any:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def omega_type(hint: Any) -> Any:
    """A parameter's type hint as a type OmegaConf checks: ``float`` as int-or-float, ``X | None`` as
    ``Optional[X]``, sequences as ``List``, mappings as ``Dict[str, Any]``, anything else ``Any``."""
    if hint is float:
        return Number
    if hint in PRIMITIVES:
        return hint
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        inner = omega_type(rest[0]) if len(rest) == 1 else Any
        return Optional[inner] if inner is not Any and len(rest) < len(args) else inner
    if origin in (list, tuple, collections.abc.Sequence):
        item = args[0] if args else Any
        return List[item if item in PRIMITIVES else Any]
    if origin in (dict, collections.abc.Mapping):
        return Dict[str, Any]
    return Any


def _parameters(target: Any) -> list[tuple[str, Any, str | None]]:
    """(name, type hint, help metadata) of what the target takes."""
    if dataclasses.is_dataclass(target):
        hints = typing.get_type_hints(target)
        return [(f.name, hints[f.name], f.metadata.get("help")) for f in dataclasses.fields(target) if f.init]
    hints = typing.get_type_hints(target.__init__ if inspect.isclass(target) else target)
    params = inspect.signature(target).parameters.values()
    return [(p.name, hints.get(p.name, Any), None) for p in params
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]  # fmt: skip


def target_schema(name: str, target: str, helps: Mapping[str, str] | None = None,
                  nested: Mapping[str, Any] | None = None, convert: str | None = None,
                  skip: tuple[str, ...] = ()) -> type:  # fmt: skip
    """The schema of a ``_target_`` node: ``_target_`` (and ``_convert_`` when given), then one
    field per parameter of ``target`` (``nested``: a parameter's own schema or type; ``skip``:
    parameters a config never sets)."""
    helps, nested = dict(helps or {}), dict(nested or {})
    made: list[tuple[str, Any, Any]] = [("_target_", str, help_field("the class Hydra instantiates", target))]
    if convert is not None:
        made.append(("_convert_", str, help_field("Hydra's conversion of nested nodes (all: plain dicts and lists)",
                                                  convert)))  # fmt: skip
    for param, hint, text in _parameters(_target(target)):
        if param in SKIP or param in skip:
            continue
        text = helps.pop(param, None) or text
        if not text:
            raise TypeError(f"{name}.{param}: no help text (give the target's field help metadata, or helps=)")
        kind = nested.pop(param, None) or omega_type(hint)
        made.append((param, kind, help_field(text, MISSING)))
    if helps or nested:
        raise TypeError(f"{name}: not parameters of {target}: {sorted({*helps, *nested})}")
    schema = dataclasses.make_dataclass(name, made)
    schema.__doc__ = f"The typed node of ``{target}`` (unset fields: the target's default)."
    return schema


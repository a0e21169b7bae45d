"""bfcl-eval's multi-turn backend instances, the one place kate creates and drops them.

bfcl-eval's executor (``multi_turn_utils.execute_multi_turn_func_call``) keeps each backend
instance in its own module globals, named ``f"{model}_{entry}_{class}_instance"`` with ``-./:``
written ``_``; a later call under the same model and entry reuses the instance and its state.
Each kate user of the backends (a dialogue's environment, a knowledge build's ground-truth run,
the official checker) runs under its own model name and drops its instances with ``forget``.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from kate.bfcl.data import BFCLEntry, prepare_environment

_ESCAPED = re.compile(r"[-./:]")  # bfcl-eval's own escaping of instance names


def executor() -> ModuleType:
    """bfcl-eval's ``multi_turn_utils``: the executor, and the module whose globals hold the instances."""
    prepare_environment()
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils

    return multi_turn_utils


def private_model_name(kind: str) -> str:
    """A model name no other user of the backends in this process shares: ``kind`` plus a uuid."""
    return f"{kind}_{uuid.uuid4().hex}"


def execute(model_name: str, entry: BFCLEntry, strings: Sequence[str]) -> tuple[list[str], dict[str, Any]]:
    """Run BFCL call strings, in order, on ``entry``'s backends under ``model_name`` (created from
    the entry's ``initial_config`` on first use, reused after); results and the instances by class."""
    return executor().execute_multi_turn_func_call(
        list(strings), entry.raw.get("initial_config", {}), list(entry.involved_classes), model_name, entry.id,
        long_context="long_context" in entry.category,
    )  # fmt: skip


def forget(model_name: str, entry_id: str | None = None) -> None:
    """Drop the instances bfcl-eval holds under ``model_name`` (its ``_eval`` and
    ``_ground_truth_eval`` variants included), of ``entry_id`` only when given: the next use
    starts from the initial state."""
    module_globals = vars(executor())
    prefix = _ESCAPED.sub("_", model_name) + "_"
    marker = "" if entry_id is None else "_" + _ESCAPED.sub("_", entry_id) + "_"
    for name in [n for n in module_globals if n.startswith(prefix) and marker in n and n.endswith("_instance")]:
        del module_globals[name]

"""What `kate diagnose` is set up with: the acting set its config names (``build_set``) and the
checks that need no model (``check_config``, run before any model loads)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kate.diagnose.arithmetic import arithmetic_items
from kate.diagnose.bfcl_decision import BFCLDecisionTask, decision_entries
from kate.diagnose.ladder_jobs import hf_configured
from kate.diagnose.necessity import NecessityConfig
from kate.diagnose.tasks import VerifiableTask
from kate.diagnose.user_set import load_user_set
from kate.eval.config import check_target


def build_set(c: Mapping[str, Any]) -> Any:
    """The acting task of the configured set (its items, prompts, necessity where the data knows it)."""
    if c["set"] == "arithmetic":
        a = c["arithmetic"]
        families = tuple(a["families"]) if a["families"] else None
        items = arithmetic_items(a["n"], a["seed"], **({"families": families} if families else {}))
        return VerifiableTask(items, name="arithmetic", act=c["act"],
                              origin={"set": "arithmetic", "n": a["n"], "seed": a["seed"], "families": families})  # fmt: skip
    if c["set"] == "bfcl":
        b = c["bfcl"]
        return BFCLDecisionTask(decision_entries(b["categories"], b["split"], b["limit"]), b["split"])
    path = c["user"]["path"]
    if not path:
        raise ValueError("set=user needs user.path (a JSONL file; kate/diagnose/user_set.py says its format)")
    return VerifiableTask(load_user_set(path), name="user", act=c["act"], origin={"set": "user", "path": str(path)})


def check_config(c: Mapping[str, Any]) -> None:
    """What can be checked before any model loads."""
    check_target(c["llm"], "llm")
    if c["hf"]:
        check_target(c["hf"], "hf")
    if c["set"] == "user" and not c["user"]["path"]:
        raise ValueError("set=user needs user.path (a JSONL file)")
    if c["set"] == "bfcl" and c["act"] != "step":
        print("kate diagnose: BFCL entries are one step each (act is ignored)")
    NecessityConfig(**{k: v for k, v in c["necessity"].items() if k != "cache_dir"})
    if any(not 0 <= t <= 1 for t in c["gate"]["taus"]):
        raise ValueError(f"gate.taus must lie in [0, 1], got {c['gate']['taus']}")
    t = c["toolsense"]
    for key in ("writer", "judge", "embedder"):
        if t[key]:
            check_target(t[key], f"toolsense.{key}")
    if not t["embedder"]:
        raise ValueError("toolsense.embedder must name an embedder (conf/diagnose.yaml's default: all-minilm-l6-v2)")
    if c["replay"]["source"] == "dataset" and not c["replay"]["path"]:
        raise ValueError("replay.source=dataset needs replay.path (a JSONL file; kate/diagnose/replay.py says its formats)")
    if c["name"] == "first_token" and not hf_configured(c):
        raise ValueError("name=first_token needs an hf client: llm=hf, or hf=<an HFChatModel node> with hf.model set")
    if c["name"] == "trajectory" and not c["trajectory"]["folder"]:
        raise ValueError("name=trajectory needs trajectory.folder=<a folder of checkpoints>")

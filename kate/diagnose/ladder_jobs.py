"""The Diagnostics II rungs of `kate diagnose`, as methods of the job (``LadderJobs``, a
base of ``kate.diagnose_cmd.Diagnosis``): verbatim replay, near-miss negatives, the first-token
probe, the checkpoint trajectory, strict vs keyword scoring and ToolSense's tool-knowledge probes.
Each writes its folder under the job's ``out_dir`` (see ``kate.diagnose_cmd``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.utils import instantiate

from kate.bfcl.data import load_entries
from kate.diagnose.first_token import (checkpoint_trajectory, load_probe_set, probe_agreement, probe_summary,
                                       probes_from_near_miss, probes_from_replay, save_probe_set, first_token_probe)  # fmt: skip
from kate.diagnose.keyword import compare
from kate.diagnose.near_miss import NearMissTask, bfcl_tool_sets, irrelevance_entries, near_miss_items, no_call_summary
from kate.diagnose.replay import ReplayTask, bfcl_replay_rows, dataset_replay_rows, replay_summary
from kate.diagnose.toolsense_run import run_toolsense
from kate.io import atomic_write_json, read_jsonl
from kate.llm.identity import model_identity

HF_TARGET = "kate.llm.hf.HFChatModel"


class LadderJobs:
    """Diagnostics II on the job's config ``c``, folder ``out``, ``done`` cache, ``run`` and models."""

    c: dict[str, Any]
    out: Path
    done: dict[str, Any]

    def has_hf(self) -> bool:
        """Whether an hf client is configured (known before any model loads)."""
        return hf_configured(self.c)

    def replay_task(self) -> ReplayTask:
        if "replay_task" not in self.done:
            r = self.c["replay"]
            if r["source"] == "dataset":
                rows = dataset_replay_rows(r["path"], limit=r["limit"], seed=self.c["seed"])
                origin = {"source": "dataset", "path": str(r["path"]), "limit": r["limit"]}
            else:
                rows = bfcl_replay_rows(r["categories"], r["split"], r["limit"])
                origin = {"source": "bfcl", "split": r["split"], "limit": r["limit"]}
            self.done["replay_task"] = ReplayTask(rows, origin=origin)
        return self.done["replay_task"]

    def replay(self) -> dict[str, Any]:
        records = self.run("replay", self.replay_task(), {"max_tokens": self.c["max_tokens"]})
        summary = {**replay_summary(records), "model": model_identity(self.model)}
        atomic_write_json(self.out / "replay" / "summary.json", summary)
        self.done["replay_records"] = records
        return summary

    def near_miss_task(self) -> NearMissTask:
        if "near_miss_task" not in self.done:
            m = self.c["near_miss"]
            items: list[Any] = near_miss_items(bfcl_tool_sets(m["categories"], m["split"], m["limit"]),
                                               seed=self.c["seed"], per_set=m["per_set"])  # fmt: skip
            if m["irrelevance"]:
                items += irrelevance_entries(m["irrelevance"], m["split"], m["irrelevance_limit"])
            origin = {"seed": self.c["seed"], "tool_sets": f"bfcl:{m['split']}", "irrelevance": list(m["irrelevance"])}
            self.done["near_miss_task"] = NearMissTask(items, origin=origin)
        return self.done["near_miss_task"]

    def near_miss(self) -> dict[str, Any]:
        records = self.run("near_miss", self.near_miss_task(), {"max_tokens": self.c["max_tokens"]})
        summary = {**no_call_summary(records), "model": model_identity(self.model)}
        atomic_write_json(self.out / "near_miss" / "summary.json", summary)
        self.done["near_miss_records"] = records
        return summary

    def probe_set_path(self) -> Path:
        """The probe set of the first-token rungs (saved, so a later trajectory probes the same prompts)."""
        path = self.out / "first_token" / "probe_set.jsonl"
        if not path.exists():
            limit = self.c["first_token"]["limit"]
            task = self.near_miss_task()
            near = NearMissTask(list(task.items())[:limit], origin=task.origin)
            save_probe_set(path, probes_from_replay(list(self.replay_task().items())[:limit]) + probes_from_near_miss(near))
        return path

    def first_token(self) -> dict[str, Any] | None:
        model = self.hf() if self.has_hf() else None
        if model is None:
            return _skip("first_token", "the first-token probe needs an hf client (llm=hf or hf=...)")
        f = self.c["first_token"]
        rows = first_token_probe(model, load_probe_set(self.probe_set_path()), f["openings"],
                                 batch_size=f["batch_size"], progress=self.c["progress"])  # fmt: skip
        records = [*self._records("replay"), *self._records("near_miss")]
        result = {"openings": list(f["openings"]), "summary": probe_summary(rows), "model": model_identity(model),
                  "agreement": probe_agreement(rows, records) if records else None, "rows": rows}  # fmt: skip
        atomic_write_json(self.out / "first_token" / "results.json", result)
        return {k: v for k, v in result.items() if k != "rows"}

    def _records(self, folder: str) -> list[dict[str, Any]]:
        path = self.out / folder / "records.jsonl"
        return list(read_jsonl(path)) if path.exists() else []

    def trajectory(self) -> list[dict[str, Any]] | None:
        t = self.c["trajectory"]
        if not t["folder"]:
            return _skip("trajectory", "the checkpoint trajectory needs trajectory.folder=<a folder of checkpoints>")
        probe_set = t["probe_set"] or self.probe_set_path()
        openings = self.c["first_token"]["openings"]
        rows = checkpoint_trajectory(t["folder"], probe_set, out_dir=self.out / "trajectory", openings=openings,
                                     device=t["device"], dtype=t["dtype"], batch_size=t["batch_size"],
                                     progress=self.c["progress"], **self._base_point(probe_set, openings))  # fmt: skip
        return [{k: r[k] for k in ("checkpoint", "step", "summary")} for r in rows]

    def _base_point(self, probe_set: str | Path, openings: Sequence[str]) -> dict[str, Any]:
        """The first_token rung's rows as the trajectory's step 0, when that rung probed the same prompts
        with the same openings (the untrained model the checkpoints start from)."""
        path = self.out / "first_token" / "results.json"
        if not path.exists():
            return {}
        result = json.loads(path.read_text())
        if result.get("openings") != list(openings) or [r["id"] for r in result["rows"]] != [
                p.id for p in load_probe_set(probe_set)]:  # fmt: skip
            return {}
        return {"base": result["rows"], "base_name": f"{result['model']['name']} (untrained)"}

    def keyword(self) -> dict[str, Any]:
        """Strict vs keyword credit: on the replay records (``keyword.compare``), the near-miss records
        (each record's own ``keyword`` verdict: no offered tool named) and, when given, a BFCL run's."""
        out: dict[str, Any] = {}
        replay = self._records("replay")
        if replay:
            tools = {r.id: [t.get("function", t).get("name") for t in r.tools] for r in self.replay_task().items()}
            out["replay"] = compare(replay, tools)
        near = self._records("near_miss")
        if near:
            out["near_miss"] = stored_compare(near)
        if self.c["keyword"]["run"]:
            records = list(read_jsonl(Path(self.c["keyword"]["run"]) / "records.jsonl"))
            tools = {e.id: [f["name"] for f in e.functions]
                     for c in sorted({r["category"] for r in records}) for e in load_entries(c, "all")}  # fmt: skip
            out["run"] = {"folder": self.c["keyword"]["run"], **compare(records, tools)}
        if not out:
            print("kate diagnose: keyword has no records to compare (run replay / near_miss first, or keyword.run=)")
        atomic_write_json(self.out / "keyword" / "summary.json", out)
        return out

    def toolsense(self) -> dict[str, Any]:
        t = self.c["toolsense"]
        writer = instantiate(t["writer"]) if t["writer"] else self.model
        judge = instantiate(t["judge"]) if t["judge"] else writer
        hf = self.hf() if self.has_hf() else None
        return run_toolsense(t, writer=writer, judge=judge, embedder=instantiate(t["embedder"]), hf=hf,
                             run=self.run, out=self.out, seed=self.c["seed"], progress=self.c["progress"])  # fmt: skip


def _skip(name: str, why: str) -> None:
    print(f"kate diagnose: {why}; {name} skipped")
    return None


def hf_configured(c: Mapping[str, Any]) -> bool:
    return c["llm"].get("_target_") == HF_TARGET or bool(c["hf"] and c["hf"].get("model", True) is not None)


def stored_compare(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """``keyword.compare``'s table from records that carry their own ``keyword`` verdict (replay,
    near-miss): strict (``valid``) against keyword credit, per category, with the disagreements."""
    keys = ("n", "strict", "keyword", "keyword_only", "strict_only")
    per: dict[str, dict[str, int]] = {}
    disagreements = []
    for r in records:
        row = per.setdefault(r["category"], dict.fromkeys(keys, 0))
        strict, keyword = bool(r.get("valid")), bool(r.get("keyword"))
        for key, add in zip(keys, (1, strict, keyword, keyword and not strict, strict and not keyword)):
            row[key] += add
        if strict != keyword:
            disagreements.append({"id": r["id"], "category": r["category"], "strict": strict, "keyword": keyword,
                                  "strict_error": r.get("error_type"), "output": (r.get("outputs") or [""])[0][:300]})  # fmt: skip
    return {"per_category": dict(sorted(per.items())), "all": {k: sum(row[k] for row in per.values()) for k in keys},
            "disagreements": disagreements}  # fmt: skip

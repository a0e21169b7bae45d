"""`kate appworld`: run arms (direct, KATE) over AppWorld tasks, or over the stand-in world.

    bash scripts/setup_appworld.sh                      # AppWorld's own environment (.venv-appworld)
    kate appworld action=check                          # installed? where must the data go? is it there?
    kate appworld action=build_kb                       # ST from the train split -> knowledge_bases/appworld_train
    kate appworld world=appworld appworld.dataset=test_normal appworld.limit=20
    kate appworld                                       # the stand-in world (no data needed)

Each arm's records go to ``<out_dir>/<arm>/seed_<seed>/records.jsonl`` (resumable, one record per
task with its steps and AppWorld's test results); ``summary.json`` and ``report.md`` hold TGC (tasks
whose tests all pass) and SGC (scenarios whose tasks all pass). With real AppWorld the aggregate
comes from AppWorld's own evaluator (``evaluate_tasks``) over the tasks run.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from kate.appworld.client import AppWorldClient
from kate.appworld.knowledge import CODE_TEMPLATE, appworld_solutions, build_code_kb, stand_in_solutions
from kate.appworld.loop import LoopConfig, run_code_task
from kate.appworld.stand_in import STAND_IN_TASKS, StandInWorld
from kate.appworld.world import CodeWorld
from kate.eval.run_eval import model_identity
from kate.eval.run_store import RunStore
from kate.io import atomic_write_json, atomic_write_text
from kate.knowledge.embedder import Embedder
from kate.knowledge.store import KnowledgeBase
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.hook import make_retrieve_hook
from kate.retrieval.retriever import Retriever

WORLDS = ("stand_in", "appworld")


def scenario_of(task_id: str) -> str:
    """AppWorld task ids are ``<scenario>_<n>`` (e.g. ``82e2fac_1``)."""
    return task_id.rsplit("_", 1)[0]


def goal_completion(records: list[dict[str, Any]]) -> dict[str, Any]:
    """TGC and SGC (as fractions) from per-task test results."""
    scenarios: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        scenarios[scenario_of(r["id"])].append(bool(r["evaluation"]["success"]))
    n = len(records)
    return {"tasks": n, "scenarios": len(scenarios),
            "task_goal_completion": sum(bool(r["evaluation"]["success"]) for r in records) / n if n else None,
            "scenario_goal_completion": sum(all(v) for v in scenarios.values()) / len(scenarios) if scenarios else None,
            "ends": dict(sorted(Counter(r["end"] for r in records).items())),
            "mean_steps": sum(r["n_steps"] for r in records) / n if n else None}  # fmt: skip


class Worlds:
    """Opens tasks of the configured world: stand-in tasks in process, AppWorld through its worker."""

    def __init__(self, cfg: DictConfig) -> None:
        if cfg.world not in WORLDS:
            raise ValueError(f"world must be one of {WORLDS}, got {cfg.world!r}")
        self.kind, self.cfg = cfg.world, cfg.appworld
        self.client = AppWorldClient(self.cfg.python, self.cfg.root) if self.kind == "appworld" else None

    def task_ids(self) -> list[str]:
        ids = list(self.cfg.task_ids or [])
        if not ids:
            ids = list(STAND_IN_TASKS) if self.client is None else self.client.task_ids(self.cfg.dataset)
        return ids[: self.cfg.limit] if self.cfg.limit else ids

    def open(self, task_id: str, experiment_name: str) -> CodeWorld:
        if self.client is None:
            return StandInWorld(task_id)
        return self.client.open(task_id, experiment_name, max_interactions=int(self.cfg.max_interactions))

    def official(self, task_ids: list[str], experiment_name: str) -> dict[str, Any] | None:
        return self.client.evaluate_tasks(task_ids, experiment_name) if self.client and task_ids else None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def __enter__(self) -> "Worlds":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def build_appworld_kb(cfg: DictConfig, client: AppWorldClient, embedder: Embedder) -> KnowledgeBase:
    """ST entries from the solutions of ``knowledge.build_dataset`` (train), saved under the KB root."""
    solutions = appworld_solutions(client, cfg.knowledge.build_dataset, cfg.knowledge.build_limit)
    return build_code_kb(solutions, name=cfg.knowledge.kb, source=f"appworld:{cfg.knowledge.build_dataset}",
                         embedder=embedder, save_to=Path(cfg.knowledge.root) / cfg.knowledge.kb)  # fmt: skip


def knowledge_base(cfg: DictConfig, worlds: Worlds, embedder: Embedder) -> KnowledgeBase:
    """The stand-in world's knowledge is built in memory from its own solutions (the task's own
    entry is excluded at retrieval); AppWorld's is loaded from ``knowledge.root/knowledge.kb``, and
    built there from the train split first when it is not there yet."""
    if worlds.kind == "stand_in":
        return build_code_kb(stand_in_solutions(), name="stand_in", source="stand_in", embedder=embedder)
    path = Path(cfg.knowledge.root) / cfg.knowledge.kb
    if not path.exists():
        print(f"[appworld] no knowledge base at {path}: building it from the {cfg.knowledge.build_dataset} split")
        return build_appworld_kb(cfg, worlds.client, embedder)
    return KnowledgeBase.load(path, embedding=embedder.identity())


def retrieve_factory(cfg: DictConfig, worlds: Worlds) -> Callable[[dict[str, Any]], Any]:
    embedder = Embedder()
    kb = knowledge_base(cfg, worlds, embedder)
    config = RetrievalConfig(kb=kb.manifest.get("name", ""), top_k=int(cfg.knowledge.top_k),
                             threshold=float(cfg.knowledge.threshold), filter_api_classes=True,
                             api_class_match="subset")  # fmt: skip
    retriever = Retriever(kb, embedder, config)

    def factory(task: dict[str, Any]):
        return make_retrieve_hook(retriever, template=CODE_TEMPLATE, api_classes=task.get("allowed_apps"),
                                  exclude_ids=(task["task_id"],))  # fmt: skip

    factory.manifest = {k: kb.manifest.get(k) for k in ("name", "entry_count", "embedding", "sources")}  # type: ignore[attr-defined]
    return factory


def run_arm(name: str, arm: DictConfig, cfg: DictConfig, model: Any, worlds: Worlds, task_ids: list[str],
            out_dir: Path) -> list[dict[str, Any]]:  # fmt: skip
    sampler = instantiate(arm.sampling)
    factory = retrieve_factory(cfg, worlds) if arm.knowledge else None
    loop = LoopConfig(**OmegaConf.to_container(cfg.loop))
    experiment = f"{cfg.experiment_name}_{name}_seed{cfg.seed}"
    meta = {"arm": name, "world": worlds.kind, "model": model_identity(model), "sampler": repr(sampler),
            "knowledge": getattr(factory, "manifest", None), "loop": OmegaConf.to_container(cfg.loop),
            "tasks": task_ids, "seed": int(cfg.seed), "experiment_name": experiment,
            "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}  # fmt: skip
    store = RunStore(out_dir / name / f"seed_{cfg.seed}", meta)
    records = store.records()
    done, passed = {r["id"] for r in records}, sum(bool(r["evaluation"]["success"]) for r in records)
    bar = tqdm([t for t in task_ids if t not in done], desc=f"appworld {name}", unit="task")
    for task_id in bar:
        world = worlds.open(task_id, experiment)
        try:
            hook = factory(world.task) if factory else None
            record = run_code_task(model, world, sampler, retrieve=hook, config=loop, seed=int(cfg.seed))
            record["evaluation"] = world.evaluate()
            record["retrieval"] = hook.log if hook else None
        finally:
            world.close()
        store.append({"id": task_id, **record})
        done.add(task_id)
        passed += bool(record["evaluation"]["success"])
        bar.set_postfix(tgc=f"{passed / len(done):.2f}")
    return store.records()


def report_markdown(summary: dict[str, Any]) -> str:
    lines = [f"# AppWorld: {summary['world']} world, model {summary['model']}", "",
             "| arm | tasks | TGC | SGC | mean steps | ends | official (AppWorld evaluator) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for arm, s in summary["arms"].items():
        official = s.get("official") or {}
        off = ", ".join(f"{k} {v}" for k, v in official.items()) if official else "-"
        tgc = "-" if s["task_goal_completion"] is None else f"{100 * s['task_goal_completion']:.1f}"
        sgc = "-" if s["scenario_goal_completion"] is None else f"{100 * s['scenario_goal_completion']:.1f}"
        steps = "-" if s["mean_steps"] is None else f"{s['mean_steps']:.1f}"
        lines.append(f"| {arm} | {s['tasks']} | {tgc} | {sgc} | {steps} | {json.dumps(s['ends'])} | {off} |")
    lines += ["", "TGC: % of tasks whose tests all pass; SGC: % of scenarios (task id before the last `_`) "
              "whose tasks all pass."]  # fmt: skip
    return "\n".join(lines) + "\n"


def check(cfg: DictConfig) -> dict[str, Any]:
    client = AppWorldClient(cfg.appworld.python, cfg.appworld.root)
    with client:
        info = client.ping()
    where = Path(info["root"]) / "data"
    print(f"AppWorld {info['appworld']} (python {info['python']}) at {client.python}")
    print(f"task data: {'found' if info['data'] else 'MISSING'} at {where}")
    return info


def build_kb(cfg: DictConfig) -> dict[str, Any]:
    with AppWorldClient(cfg.appworld.python, cfg.appworld.root) as client:
        kb = build_appworld_kb(cfg, client, Embedder())
    return {"path": str(kb.path), "entries": len(kb)}


def run_appworld(cfg: DictConfig) -> dict[str, Any]:
    if cfg.action == "check":
        return check(cfg)
    if cfg.action == "build_kb":
        return build_kb(cfg)
    if cfg.action != "run":
        raise ValueError(f"action must be run | check | build_kb, got {cfg.action!r}")
    out_dir = Path(cfg.out_dir)
    model = instantiate(cfg.llm)
    summary: dict[str, Any] = {"world": cfg.world, "model": model_identity(model)["name"], "arms": {}}
    with Worlds(cfg) as worlds:
        task_ids = worlds.task_ids()
        for name, arm in cfg.arms.items():
            records = run_arm(name, arm, cfg, model, worlds, task_ids, out_dir)
            result = goal_completion(records)
            result["official"] = worlds.official([r["id"] for r in records], f"{cfg.experiment_name}_{name}_seed{cfg.seed}")
            summary["arms"][name] = result
    atomic_write_json(out_dir / "summary.json", summary)
    text = report_markdown(summary)
    atomic_write_text(out_dir / "report.md", text)
    print(text)
    return summary

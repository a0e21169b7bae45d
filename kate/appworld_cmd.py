"""`kate appworld`: arms (direct, KATE) over AppWorld tasks, or over the stand-in world.

    bash scripts/setup_appworld.sh                      # AppWorld's own environment (.venv-appworld)
    kate appworld action=check                          # installed? where must the data go? is it there?
    kate appworld action=build_kb                       # ST from the train split -> knowledge_bases/appworld_train
    kate appworld world=appworld appworld.dataset=test_normal appworld.limit=20
    kate appworld                                       # the stand-in world (no data needed)

Each arm is a policy (code sampler, optional ST knowledge, the loop settings) run by kate's one
runner over the AppWorld task: ``<out_dir>/<arm>/seed_<seed>/records.jsonl`` (resumable, one record
per task with its steps and AppWorld's test results); ``summary.json`` and ``report.md`` hold TGC
(tasks whose tests all pass) and SGC (scenarios whose tasks all pass). With real AppWorld the
aggregate also comes from AppWorld's own evaluator (``evaluate_tasks``) over the tasks run.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from kate.agent.policy import Policy
from kate.agent.settings import LoopSettings
from kate.appworld.client import AppWorldClient
from kate.appworld.knowledge import CODE_TEMPLATE, appworld_solutions, build_code_kb, stand_in_solutions
from kate.eval.arm import fingerprinted_llm, run_arm
from kate.eval.config import check_target, plain
from kate.io import atomic_write_json, atomic_write_text
from kate.knowledge.embedder import Embedder
from kate.knowledge.store import KnowledgeBase
from kate.llm.identity import model_identity
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.knowledge import RetrievalKnowledge
from kate.retrieval.retriever import Retriever
from kate.tasks.appworld import AppWorldTask, Worlds, scenario_of


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


def build_appworld_kb(cfg: dict[str, Any], client: AppWorldClient, embedder: Embedder) -> KnowledgeBase:
    """ST entries from the solutions of ``knowledge.build_dataset`` (train), saved under the KB root."""
    k = cfg["knowledge"]
    solutions = appworld_solutions(client, k["build_dataset"], k["build_limit"])
    return build_code_kb(solutions, name=k["kb"], source=f"appworld:{k['build_dataset']}", embedder=embedder,
                         save_to=Path(k["root"]) / k["kb"])  # fmt: skip


def knowledge_base(cfg: dict[str, Any], worlds: Worlds, embedder: Embedder) -> KnowledgeBase:
    """The stand-in world's knowledge is built in memory from its own solutions (the task's own
    entry is excluded at retrieval); AppWorld's is loaded from ``knowledge.root/knowledge.kb``, and
    built there from the train split first when it is not there yet."""
    if worlds.kind == "stand_in":
        return build_code_kb(stand_in_solutions(), name="stand_in", source="stand_in", embedder=embedder)
    path = Path(cfg["knowledge"]["root"]) / cfg["knowledge"]["kb"]
    if not path.exists():
        print(f"[appworld] no knowledge base at {path}: building it from the {cfg['knowledge']['build_dataset']} split")
        return build_appworld_kb(cfg, worlds.client, embedder)
    return KnowledgeBase.load(path, embedding=embedder.identity())


def code_knowledge(cfg: dict[str, Any], worlds: Worlds) -> RetrievalKnowledge:
    embedder = Embedder()
    kb = knowledge_base(cfg, worlds, embedder)
    config = RetrievalConfig(kb=kb.manifest.get("name", ""), top_k=int(cfg["knowledge"]["top_k"]),
                             threshold=float(cfg["knowledge"]["threshold"]), filter_api_classes=True,
                             api_class_match="subset")  # fmt: skip
    return RetrievalKnowledge(Retriever(kb, embedder, config), CODE_TEMPLATE)


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


def check(cfg: dict[str, Any]) -> dict[str, Any]:
    client = AppWorldClient(cfg["appworld"]["python"], cfg["appworld"]["root"])
    with client:
        info = client.ping()
    where = Path(info["root"]) / "data"
    print(f"AppWorld {info['appworld']} (python {info['python']}) at {client.python}")
    print(f"task data: {'found' if info['data'] else 'MISSING'} at {where}")
    return info


def run_appworld(cfg: DictConfig) -> dict[str, Any]:
    c = plain(cfg)
    if c["action"] == "check":
        return check(c)
    if c["action"] == "build_kb":
        with AppWorldClient(c["appworld"]["python"], c["appworld"]["root"]) as client:
            kb = build_appworld_kb(c, client, Embedder())
        return {"path": str(kb.path), "entries": len(kb)}
    loop = dict(c["loop"])
    max_output_chars = loop.pop("max_output_chars")
    settings = LoopSettings(**loop, system_prompt=None)
    check_target(c["llm"], "llm")
    for name, arm in c["arms"].items():
        check_target(arm["sampling"], f"arms.{name}.sampling")
        instantiate(arm["sampling"])
    out_dir = Path(c["out_dir"])
    model = instantiate(c["llm"])
    summary: dict[str, Any] = {"world": c["world"], "model": model_identity(model)["name"], "arms": {}}
    aw = c["appworld"]
    with Worlds(c["world"], aw["python"], aw["root"], int(aw["max_interactions"])) as worlds:
        task_ids = worlds.task_ids(aw["dataset"], aw["limit"], aw["task_ids"])
        knowledge = code_knowledge(c, worlds) if any(a["knowledge"] for a in c["arms"].values()) else None
        for name, arm in c["arms"].items():
            experiment = f"{c['experiment_name']}_{name}_seed{c['seed']}"
            task = AppWorldTask(worlds, task_ids, experiment, max_output_chars)
            policy = Policy(model, instantiate(arm["sampling"]), knowledge if arm["knowledge"] else None, settings)
            config = {"llm": fingerprinted_llm(c["llm"]), "sampling": arm["sampling"],
                      "knowledge": bool(arm["knowledge"]),
                      "knowledge_settings": c["knowledge"] if arm["knowledge"] else None, "loop": c["loop"]}  # fmt: skip
            records = run_arm(name, task, policy, out_dir / name, seeds=[int(c["seed"])], config=config)[int(c["seed"])]
            result = goal_completion(records)
            result["official"] = worlds.official([r["id"] for r in records], experiment)
            summary["arms"][name] = result
    atomic_write_json(out_dir / "summary.json", summary)
    text = report_markdown(summary)
    atomic_write_text(out_dir / "report.md", text)
    print(text)
    return summary

"""BFCL-V3 benchmark of the default model on KATE's test halves. It only schedules arms: each arm is
a named config (``conf/arm/<arm>.yaml``), composed exactly as ``kate eval arm=<arm> llm.max_parallel=8``
composes it, and run by kate's one runner into ``bench/runs/<arm>/seed_<s>/`` (resumable: rerun the
same command after a crash or in a later session; finished entries are kept). The report is
``bench/bfcl_report.py``'s, regenerated from the committed records. What ran, in this order:

    .venv/bin/python bench/bfcl.py --arms direct,st,st_w8 --single 8 --multi 30 --interleave
    .venv/bin/python bench/bfcl.py --arms es,sic,tic,w8v --single 4 --multi 8 --interleave --multi-first
    .venv/bin/python bench/bfcl.py --arms st_w8v --single 8 --multi 30
    .venv/bin/python bench/bfcl.py --arms st_calls_w8v --single 20 --multi 0
    .venv/bin/python bench/bfcl.py --arms st_calls_w8f --single 20 --multi 0   # re-voted from st_calls_w8v's samples

Another model (a kate model name, `kate models install <name>` first): its runs and report go to
bench/runs/models/<name>/ and bench/results/models/<name>/, the default model's stay where they are:

    M=qwen2.5-coder-1.5b-instruct-q4_k_m   # what ran for it, in this order:
    .venv/bin/python bench/bfcl.py --model $M --arms direct,st_calls --interleave --single 20 --multi 0 \
        --categories parallel,parallel_multiple
    .venv/bin/python bench/bfcl.py --model $M --arms st_calls_w8v --single 20 --multi 0 \
        --categories parallel,parallel_multiple
    .venv/bin/python bench/bfcl.py --model $M --arms direct,st_calls --interleave --single 20 --multi 0
    .venv/bin/python bench/bfcl.py --model $M --arms direct,st --single 0 --multi 30 --interleave --multi-first
    .venv/bin/python bench/bfcl.py --model $M --arms st_calls_w8v --single 20 --multi 0
    .venv/bin/python bench/bfcl.py --model $M --arms st_calls_w8f --single 20 --multi 0   # re-voted, no model calls
    .venv/bin/python bench/bfcl.py --model $M --arms st_calls_w8v --single 20 --multi 30 --interleave --multi-first

Seeds for a width arm: --seeds 0,1,2 (each seed its own folder). Reports, re-scoring, old folders:

    .venv/bin/python bench/bfcl.py --report-only
    .venv/bin/python bench/bfcl.py --rescore       # after a checker fix: re-score stored records, then report
    .venv/bin/python bench/bfcl.py --migrate       # rewrite meta.json of folders made before the one runner
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from hydra.utils import instantiate  # noqa: E402

import kate.configs  # noqa: E402,F401  (the typed job schemas)
from kate.eval.model_folders import DEFAULT_MODEL, model_folder  # noqa: E402
from kate.bfcl.data import SINGLE_TURN, load_entries  # noqa: E402
from kate.cli import CONF_DIR  # noqa: E402
from kate.eval.arm import arm_config, build_policy, loop_settings  # noqa: E402
from kate.eval import bfcl_arms  # noqa: E402
from kate.eval.arms import open_arm  # noqa: E402
from kate.eval.bfcl_arms import MULTI_ONLY, REVOTED_FROM  # noqa: E402
from kate.eval.bfcl_report import DEFAULT_MODEL_NOTE, report  # noqa: E402
from kate.eval.revote import revote_record  # noqa: E402
from kate.eval.run_store import fingerprint, load_run  # noqa: E402
from kate.eval.runner import rescore_run, run_item, run_meta, run_task  # noqa: E402
from kate.io import atomic_write_json  # noqa: E402
from kate.retrieval.knowledge import VOLATILE_MANIFEST_KEYS  # noqa: E402
from kate.tasks.bfcl import BFCLTask, task_for_records  # noqa: E402

RUNS, RESULTS = ROOT / "bench" / "runs", ROOT / "bench" / "results"


def places(model: str | None) -> tuple[Path, Path]:
    """(run folders, results) of a model: the default model's bench/runs and bench/results; another
    model's bench/runs/models/<name> and bench/results/models/<name>."""
    return model_folder(RUNS, model), model_folder(RESULTS, model)


def compose_arm(arm: str, model: str | None = None) -> dict:
    """The arm's resolved config (``kate.eval.bfcl_arms.compose_arm``)."""
    return bfcl_arms.compose_arm(arm, model, conf_dir=CONF_DIR)


def report_of(model_name: str | None) -> dict:
    runs, results = places(model_name)
    return report(runs, results, model_note=DEFAULT_MODEL_NOTE if runs == RUNS else f"{model_name} (llama.cpp)")


def entries_for(arm: str, single: int, multi: int, categories: tuple[str, ...] = SINGLE_TURN):
    """Multi-turn first (KATE's home ground and the headline comparison), then single-turn (of
    ``categories``; a later run with more categories or entries adds to the same folder)."""
    chosen = [] if arm in MULTI_ONLY else [e for c in categories for e in load_entries(c, "test", single)]
    return load_entries("multi_turn_base", "test", multi) + chosen


def prepare(model, arm: str, single: int, multi: int, seed: int, model_name: str | None = None,
            categories: tuple[str, ...] = SINGLE_TURN):
    """(task, policy, store, config) of one arm and seed; the store is first filled with the re-voted
    single-turn records of REVOTED_FROM's source, when it has them."""
    c, runs = compose_arm(arm, model_name), places(model_name)[0]
    task = BFCLTask(entries_for(arm, single, multi, categories), "test")
    policy, store = open_arm(c, model, task, runs / arm / f"seed_{seed}", arm=arm, seed=seed)
    if arm in REVOTED_FROM:
        revote_into(store, runs / REVOTED_FROM[arm] / f"seed_{seed}", task.items(), c["sampling"]["aggregate"])
    return task, policy, store


def revote_into(store, folder: Path, entries, rule: str) -> None:
    if not folder.exists():
        return
    wanted, done = {e.id: e for e in entries if not e.is_multi_turn}, store.done_ids()
    added = 0
    for record in load_run(folder)[1]:
        if record["id"] in wanted and record["id"] not in done:
            store.append({**revote_record(wanted[record["id"]], record, rule),
                          "revoted_from": f"{folder.parent.name}/{folder.name}"})
            added += 1
    print(f"{store.folder.relative_to(ROOT)}: {added} single-turn records re-voted ({rule}) "
          f"from {folder.relative_to(ROOT)}")


def run_interleaved(model, arms: list[str], single: int, multi: int, seed: int, multi_first: bool = False,
                    model_name: str | None = None, categories: tuple[str, ...] = SINGLE_TURN) -> None:
    """Entry by entry across the arms (single-turn first, then multi-turn, or the other way round),
    so that wherever the run stops, every arm has the same entries done and the paired comparison
    covers all of them."""
    from tqdm import tqdm

    prepared, order = [], {}
    for arm in arms:
        task, policy, store = prepare(model, arm, single, multi, seed, model_name, categories)
        prepared.append((task, policy, store, {e.id for e in task.items()}, store.done_ids()))
        order.update({e.id: e for e in task.items()})
    entries = sorted(order.values(), key=lambda e: e.is_multi_turn != multi_first)  # stable within each kind
    total = sum(len(ids) for *_, ids, _ in prepared)
    bar = tqdm(total=total, initial=sum(len(done & ids) for *_, ids, done in prepared),
               desc=f"{'+'.join(arms)} interleaved", unit="record")  # fmt: skip
    for n, entry in enumerate(entries):
        for task, policy, store, ids, done in prepared:
            if entry.id in ids and entry.id not in done:
                store.append(run_item(task, entry, policy, seed))
                done.add(entry.id)
                bar.update(1)
        if n % 20 == 19:
            report_of(model_name)
    bar.close()


def _identity(knowledge: dict | None) -> dict | None:
    """Knowledge as a fingerprint sees it: per kind, the retrieval settings and the manifest less
    ``VOLATILE_MANIFEST_KEYS`` (old metas kept the whole manifest)."""
    if not knowledge:
        return None
    return {kind: {"retrieval": k["retrieval"], "manifest": {m: v for m, v in k["manifest"].items()
                                                             if m not in VOLATILE_MANIFEST_KEYS}}
            for kind, k in knowledge.items()}  # fmt: skip


def migrate(model) -> None:
    """Folders written before the one runner keep their records; their meta.json is rewritten in the
    new layout (the old one kept under ``migrated_from``) after checking that the arm's config
    still describes what ran: the same loop settings and the same knowledge base manifests."""
    for folder in sorted(RUNS.glob("*/seed_*")):
        old, records = load_run(folder)
        if "policy" in old:
            continue
        arm, seed = folder.parent.name, int(folder.name.split("_")[1])
        c = compose_arm(arm)
        settings = loop_settings(c)
        policy = build_policy(model, c["sampling"], c["knowledge"], settings)
        described = policy.describe()
        checks = {"max_steps": settings.max_steps, "repeat_policy": settings.repeat_policy,
                  "one_call": settings.one_call, "system_prompt": settings.system_message}  # fmt: skip
        wrong = [k for k, v in checks.items() if old.get(k, v) != v]
        if _identity(old.get("knowledge")) != _identity(described["knowledge"]):
            wrong.append("knowledge")
        if wrong:
            raise SystemExit(f"{folder}/meta.json: {', '.join(wrong)} differ from conf/arm/{arm}.yaml; not migrated")
        task = BFCLTask([], "test")  # its identity only; the items come from the old meta
        meta = run_meta(arm, task, policy, seed, arm_config(c["llm"], c["sampling"], c["knowledge"], settings), [])
        meta.update(items=old["entries"], data={"all": old.get("data_sha256")}, started=old.get("started"))
        atomic_write_json(folder / "meta.json", {**meta, "fingerprint": fingerprint(meta), "migrated_from": old})
        print(f"{folder.relative_to(ROOT)}: meta.json migrated ({len(records)} records kept)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="direct,st,st_w8")
    parser.add_argument("--single", type=int, default=50, help="test-half entries per single-turn category")
    parser.add_argument("--multi", type=int, default=30, help="multi_turn_base test dialogues")
    parser.add_argument("--categories", default=",".join(SINGLE_TURN),
                        help="single-turn categories, comma-separated (default: all offline ones)")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--model", default=None, help=f"a kate model name (default {DEFAULT_MODEL}); another "
                        "model's runs and report go under bench/runs/models/<name>, bench/results/models/<name>")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--interleave", action="store_true", help="entry by entry across the arms (seed: the first)")
    parser.add_argument("--multi-first", action="store_true", help="with --interleave: multi-turn dialogues first")
    parser.add_argument("--rescore", action="store_true", help="re-score stored records with the current checkers")
    parser.add_argument("--migrate", action="store_true", help="rewrite meta.json of folders made before the runner")
    args = parser.parse_args()
    runs_dir, results_dir = places(args.model)
    categories = tuple(args.categories.split(",")) if args.categories else ()
    unknown = [c for c in categories if c not in SINGLE_TURN]
    if unknown:
        raise SystemExit(f"unknown single-turn categories {unknown}; known: {', '.join(SINGLE_TURN)}")
    if args.rescore:
        for folder in sorted(runs_dir.glob("*/seed_*")):
            print(folder.relative_to(ROOT), rescore_run(folder, task_for_records))
        args.report_only = True
    if not args.report_only:
        model = instantiate(compose_arm("direct", args.model)["llm"])
        if args.migrate:
            migrate(model)
            return
        seeds = [int(s) for s in args.seeds.split(",")]
        if args.interleave:
            run_interleaved(model, args.arms.split(","), args.single, args.multi, seeds[0], args.multi_first, args.model,
                            categories)
        for arm in [] if args.interleave else args.arms.split(","):
            width = compose_arm(arm, args.model)["sampling"]["_target_"].endswith("WidthSampler")
            for seed in seeds if width else seeds[:1]:
                task, policy, store = prepare(model, arm, args.single, args.multi, seed, args.model, categories)
                run_task(task, policy, store, seed=seed, desc=f"{arm} seed {seed}")
                report_of(args.model)
    report_of(args.model)
    print(json.dumps({"results": str(results_dir.relative_to(ROOT))}))


if __name__ == "__main__":
    main()

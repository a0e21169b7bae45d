"""BFCL-V3 benchmark of the default model on KATE's test halves: direct, ST, ST + width N=8 (plain
majority, and the schema-valid vote), and (smaller n) ES, SIC, TIC and width alone. Resumable: rerun
the same command after a crash or in a later session; finished entries are kept. Writes
bench/results/bfcl_<arm>.json per arm and bench/results/bfcl_report.md (+ bfcl_categories.png) over
what has run so far. What ran, in this order:

    .venv/bin/python bench/bfcl.py --arms direct,st,st_w8 --single 8 --multi 30 --interleave
    .venv/bin/python bench/bfcl.py --arms es,sic,tic,w8v --single 4 --multi 8 --interleave --multi-first
    .venv/bin/python bench/bfcl.py --arms st_w8v --single 8 --multi 30

Seeds for a width arm: --seeds 0,1,2 (each seed its own folder). Reports and re-scoring:

    .venv/bin/python bench/bfcl.py --report-only
    .venv/bin/python bench/bfcl.py --rescore       # after a checker fix: re-score stored records, then report
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hydra.utils import instantiate  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from kate.bfcl.data import SINGLE_TURN, load_entries  # noqa: E402
from kate.eval.knowledge_arm import build_retrieve_factory  # noqa: E402
from kate.eval.main_job import comparison_report  # noqa: E402
from kate.eval.bfcl_runner import run_entries  # noqa: E402
from kate.eval.prompts import resolve_system_prompt  # noqa: E402
from kate.eval.report import plot_categories, seed_spread, seed_table, summarize  # noqa: E402
from kate.eval.run_store import load_run  # noqa: E402
from kate.io import atomic_write_json, atomic_write_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
RUNS = ROOT / "bench" / "runs"
CONF = ROOT / "conf"


def retrieval(name: str, **overrides) -> dict:
    node = OmegaConf.to_container(OmegaConf.load(CONF / "retrieval" / f"{name}.yaml"))
    node.update(overrides)
    return node


ST = {"single_turn": retrieval("single_turn"), "multi_turn": retrieval("multi_turn")}
# Width arms name their vote: st_w8 ran with plain majority (the default then); "v" arms use the
# schema-valid vote (kate's default now: candidates whose calls fit the tools' schemas first).
# ES / SIC / TIC were written for the multi-turn training halves only.
ARMS = {
    "direct": ("greedy", {}, None),
    "st": ("greedy", {}, ST),
    "st_w8": ("width", {"n": 8, "aggregate": "majority"}, ST),
    "st_w8v": ("width", {"n": 8, "aggregate": "valid_majority"}, ST),
    "w8v": ("width", {"n": 8, "aggregate": "valid_majority"}, None),
    "es": ("greedy", {}, {"multi_turn": retrieval("multi_turn_es")}),
    "sic": ("greedy", {}, {"multi_turn": retrieval("intent_sic")}),
    "tic": ("greedy", {}, {"multi_turn": retrieval("intent_tic")}),
}
MULTI_ONLY = {"es", "sic", "tic"}
# Single-turn records of these arms are the source arm's stored samples voted again with the arm's
# rule (kate.eval.revote: exactly what a live run would choose from the same request); their
# multi-turn dialogues run live, since another choice changes every later step.
REVOTED_FROM = {"st_w8v": "st_w8"}


def sampler_of(kind: str, overrides: dict):
    node = OmegaConf.to_container(OmegaConf.load(CONF / "sampling" / f"{kind}.yaml"))
    return instantiate({**node, **overrides})


def entries_for(arm: str, single: int, multi: int):
    """Multi-turn first (KATE's home ground and the headline comparison), then single-turn."""
    chosen = [] if arm in MULTI_ONLY else [e for c in SINGLE_TURN for e in load_entries(c, "test", single)]
    return load_entries("multi_turn_base", "test", multi) + chosen


def report() -> None:
    runs, spreads = {}, {}
    for arm in ARMS:
        folders = sorted((RUNS / arm).glob("seed_*")) if (RUNS / arm).exists() else []
        if not folders:
            continue
        loaded = {int(f.name.split("_")[1]): load_run(f) for f in folders}  # seed -> (meta, records), read once
        per_seed = {s: records for s, (_, records) in loaded.items()}
        meta, spreads[arm] = loaded[min(loaded)][0], seed_spread(per_seed)
        atomic_write_json(RESULTS / f"bfcl_{arm}.json", {
            "arm": arm, "model": meta["model"], "sampler": meta["sampler"], "bfcl_eval": meta["bfcl_eval"],
            "data_sha256": meta["data_sha256"], "scoring_model": meta["scoring_model"],
            "knowledge": meta["knowledge"], "seeds": sorted(per_seed),
            "entries_planned": {s: len(m["entries"]) for s, (m, _) in loaded.items()},
            "entries_done": {s: len(r) for s, r in per_seed.items()},
            "per_category": summarize(per_seed[min(per_seed)]), "across_seeds": spreads[arm],
        })  # fmt: skip
        runs[arm] = per_seed[min(per_seed)]
    if not runs:
        print("no runs yet")
        return
    notes = ["Default model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, llama.cpp) on BFCL's test halves (odd indices), "
             "first n entries of each category in index order; official checkers; seed 0 shown, spread across "
             "seeds below and in bfcl_<arm>.json. Partial runs are reported as far as they went (see entries_done).",
             "Width arms: st_w8 votes by plain majority; st_w8v and w8v by the schema-valid majority (calls that fit "
             "the tools' schemas first). st_w8v's single-turn records are st_w8's own samples voted again with that "
             "rule (the same requests: a single-turn vote never changes what is sampled); its multi-turn dialogues "
             "ran live."]  # fmt: skip
    text = comparison_report(runs, "BFCL-V3, kate arms", notes)
    if table := seed_table(spreads):
        text += "\n\nAcross seeds (entries every seed finished):\n\n" + table + "\n"
    atomic_write_text(RESULTS / "bfcl_report.md", text + "\n")
    plot_categories({a: summarize(r) for a, r in runs.items()}, RESULTS / "bfcl_categories.png")
    print(f"wrote {RESULTS / 'bfcl_report.md'}")


def prepare_arm(model, arm: str, single: int, multi: int, seed: int, max_steps: int):
    """(sampler, retrieval factory, result store, entries) of one arm and seed; the store is
    first filled with the re-voted single-turn records of REVOTED_FROM's source, when it has them."""
    from kate.eval.run_eval import open_arm_store

    kind, overrides, knowledge = ARMS[arm]
    sampler = sampler_of(kind, overrides)
    factory, described = build_retrieve_factory(knowledge, intent_model=model) if knowledge else (None, None)
    entries = entries_for(arm, single, multi)
    store = open_arm_store(arm, model, sampler, entries, RUNS / arm / f"seed_{seed}", seed=seed,
                           config={"arm": arm, "single": single, "multi": multi, "sampling": [kind, overrides],
                                   "knowledge": knowledge},
                           knowledge_manifest=described, max_steps=max_steps,
                           system_prompt=resolve_system_prompt("kate"))  # fmt: skip
    if arm in REVOTED_FROM:
        revote_into(store, REVOTED_FROM[arm], entries, seed, overrides["aggregate"])
    return sampler, factory, store, entries


def revote_into(store, source: str, entries, seed: int, rule: str) -> None:
    from kate.eval.revote import revote_record

    folder = RUNS / source / f"seed_{seed}"
    if not folder.exists():
        return
    wanted, done = {e.id: e for e in entries if not e.is_multi_turn}, store.done_ids()
    added = 0
    for record in load_run(folder)[1]:
        if record["id"] in wanted and record["id"] not in done:
            store.append({**revote_record(wanted[record["id"]], record, rule), "revoted_from": f"{source}/seed_{seed}"})
            added += 1
    print(f"{store.folder.relative_to(ROOT)}: {added} single-turn records re-voted ({rule}) "
          f"from {folder.relative_to(ROOT)}")


def run_interleaved(model, arms: list[str], single: int, multi: int, seed: int, max_steps: int,
                    multi_first: bool = False) -> None:
    """Entry by entry across the arms (single-turn first, then multi-turn, or the other way round),
    so that wherever the run stops, every arm has the same entries done and the paired comparison
    covers all of them."""
    from tqdm import tqdm

    from kate.eval.bfcl_runner import run_entry

    system_prompt, prepared, order = resolve_system_prompt("kate"), [], {}
    for arm in arms:
        sampler, factory, store, entries = prepare_arm(model, arm, single, multi, seed, max_steps)
        prepared.append((arm, sampler, factory, store, {e.id for e in entries}, store.done_ids()))
        order.update({e.id: e for e in entries})
    entries = sorted(order.values(), key=lambda e: e.is_multi_turn != multi_first)  # stable within each kind
    total = sum(len(ids) for *_, ids, _ in prepared)
    bar = tqdm(total=total, initial=sum(len(done & ids) for *_, ids, done in prepared),
               desc=f"{'+'.join(arms)} interleaved", unit="record")  # fmt: skip
    for n, entry in enumerate(entries):
        for arm, sampler, factory, store, ids, done in prepared:
            if entry.id in ids and entry.id not in done:
                store.append(run_entry(entry, model, sampler, factory, seed, max_steps=max_steps, repeat_policy="warn",
                                       system_prompt=system_prompt, one_call=True))  # fmt: skip
                done.add(entry.id)
                bar.update(1)
        if n % 20 == 19:
            report()
    bar.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arms", default="direct,st,st_w8")
    parser.add_argument("--single", type=int, default=50, help="test-half entries per single-turn category")
    parser.add_argument("--multi", type=int, default=30, help="multi_turn_base test dialogues")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--interleave", action="store_true", help="entry by entry across the arms (seed: the first)")
    parser.add_argument("--multi-first", action="store_true", help="with --interleave: multi-turn dialogues first")
    parser.add_argument("--rescore", action="store_true", help="re-score stored records with the current checkers")
    args = parser.parse_args()
    if args.rescore:
        from kate.eval.bfcl_runner import rescore_run

        for folder in sorted(RUNS.glob("*/seed_*")):
            print(folder.relative_to(ROOT), rescore_run(folder))
        args.report_only = True
    if not args.report_only:
        from kate.llm.llamacpp import LlamaCppChatModel
        from kate.llm.registry import DEFAULT_AGENT_MODEL

        model = LlamaCppChatModel(DEFAULT_AGENT_MODEL, n_ctx=32768, max_parallel=8)
        seeds = [int(s) for s in args.seeds.split(",")]
        if args.interleave:
            run_interleaved(model, args.arms.split(","), args.single, args.multi, seeds[0], args.max_steps,
                            args.multi_first)
        for arm in [] if args.interleave else args.arms.split(","):
            for seed in seeds if ARMS[arm][0] == "width" else seeds[:1]:
                sampler, factory, store, entries = prepare_arm(model, arm, args.single, args.multi, seed, args.max_steps)
                run_entries(entries, model, sampler, store, seed=seed, retrieve_factory=factory,
                            max_steps=args.max_steps, system_prompt=resolve_system_prompt("kate"),
                            desc=f"{arm} seed {seed}")  # fmt: skip
                report()
    report()


if __name__ == "__main__":
    main()

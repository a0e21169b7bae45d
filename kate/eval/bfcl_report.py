"""The BFCL benchmark's report, from stored records only (no model, no generation): for every arm of ARMS
with a run folder ``<runs>/<arm>/seed_<s>/`` it writes, under the results folder,

- bfcl_<arm>.json: per arm, what ran (model, sampler, knowledge, entries planned / done) and the
  per-category summary of the lowest seed, plus the spread across seeds;
- bfcl_report.md (+ bfcl_categories.png): the per-category table (each cell over that arm's own
  entries, with its n where arms differ), every arm paired with direct, then the two sections below;
- bfcl_common.json: the figures of those two sections.

The two sections, computed from the records:

- Common dialogues: the multi_turn_base dialogues that every arm of COMMON_ARMS finished; each arm's
  mean turns-passed fraction on them, and the arms paired dialogue by dialogue (better / worse /
  mean difference with its 95% interval, ``kate.eval.report.paired_difference``).
- Schema fit of SCHEMA_FIT_ARM's plain-majority vote: over its multi_turn_base records, the voted steps
  whose chosen call set holds a call the tools offered at that turn cannot make
  (``kate.toolcall.expressible``, the same test the schema-valid vote applies), and at how many of
  those another candidate of the step's stored vote fits. The same test recomputed on the schema-valid
  arm's stored candidates must agree with the ``valid`` flags its vote recorded (a check, reported).

``bench/bfcl_report.py`` writes it for the committed records (bench/runs -> bench/results).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from kate.eval.report import (
    comparison_report,
    mean_ci,
    paired_difference,
    plot_categories,
    seed_spread,
    seed_table,
    summarize,
)
from kate.eval.run_store import load_run, meta_summary
from kate.io import atomic_write_json, atomic_write_text
from kate.toolcall.expressible import calls_expressible, schemas_by_name

# Every benchmark arm, in report order (the first is the base of the paired comparisons).
ARMS = ("direct", "st", "st_w8", "st_w8v", "w8v", "es", "sic", "tic", "st_calls", "st_calls_w8v", "st_calls_w8f",
        "st_counts", "st_kate")
COMMON_CATEGORY = "multi_turn_base"
COMMON_ARMS = ("direct", "st_w8", "st_w8v")  # no knowledge / ST + width 8 majority / ST + width 8 schema-valid
COMMON_PAIRS = (("st_w8", "st_w8v"), ("direct", "st_w8"), ("direct", "st_w8v"))  # (A, B): B minus A
SCHEMA_FIT_ARM = "st_w8"  # plain majority: the arm whose choices the schema-valid vote would change
SCHEMA_VALID_ARM = "st_w8v"  # its candidates carry the vote's own ``valid`` flags

NOTES = [
    "{model} on BFCL's test halves (odd indices), first n "
    "entries of each category in index order; official checkers; seed 0 shown, spread across seeds below and in "
    "bfcl_<arm>.json. Partial runs are reported as far as they went (see entries_done). Each cell is over that "
    "arm's own entries: where arms ran different numbers of a category, the n column says `per cell` and each "
    "cell gives its own n; the paired comparisons below are over the entries both arms finished.",
    "Width arms: st_w8 votes by plain majority; st_w8v and w8v by the schema-valid majority (calls that fit the "
    "tools' schemas first). st_w8v's single-turn records are st_w8's own samples voted again with that rule (the "
    "same requests: a single-turn vote never changes what is sampled); its multi-turn dialogues ran live. "
    "st_calls_w8f's single-turn records are st_calls_w8v's samples voted again with the filled rule (schema-valid, "
    "and a call carrying a placeholder copied from the shown example, \"<controller 1>\", counts as not valid): "
    "a rule added after reading a test-half failure (simple_java_5, 0.5B st_calls_w8v); it has no setting to tune.",
    "Regenerate (from the committed records, no model): `.venv/bin/python bench/bfcl_report.py`.",
]  # fmt: skip

DEFAULT_MODEL_NOTE = "Default model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M, llama.cpp)"
ToolsAt = Callable[[str, int], list[dict[str, Any]]]
"""(entry id, turn index) -> the tool schemas offered at that turn."""


def load_arms(runs_dir: Path, arms: Iterable[str] = ARMS) -> dict[str, dict[int, tuple[dict, list[dict]]]]:
    """arm -> seed -> (meta, records), for the arms that have a run folder (each read once)."""
    loaded = {}
    for arm in arms:
        folders = sorted((runs_dir / arm).glob("seed_*"), key=lambda f: int(f.name.split("_")[1]))
        if folders:
            loaded[arm] = {int(f.name.split("_")[1]): load_run(f) for f in folders}
    return loaded


def common_dialogues(runs: Mapping[str, list[dict]], arms: Iterable[str] = COMMON_ARMS,
                     pairs: Iterable[tuple[str, str]] = COMMON_PAIRS, category: str = COMMON_CATEGORY) -> dict[str, Any]:
    """On the ``category`` dialogues every arm of ``arms`` finished: each arm's mean turns-passed
    fraction (95% normal interval) and whole-dialogue accuracy, and each pair (A, B) dialogue by
    dialogue (B minus A)."""
    arms = [a for a in arms if a in runs]
    by_arm = {a: {r["id"]: r for r in runs[a] if r["category"] == category} for a in arms}
    common = sorted(set.intersection(*(set(ids) for ids in by_arm.values())) if by_arm else set(),
                    key=lambda i: int(i.rsplit("_", 1)[1]))  # fmt: skip
    out: dict[str, Any] = {"category": category, "arms": arms, "n": len(common), "ids": common,
                           "dialogues_run": {a: len(by_arm[a]) for a in arms}, "per_arm": {}, "pairs": {}}  # fmt: skip
    for arm in arms:
        rows = [by_arm[arm][i] for i in common]
        mean, low, high = mean_ci([r.get("turn_fraction", 0.0) for r in rows])
        out["per_arm"][arm] = {"turn_fraction": mean, "turn_fraction_ci95": [low, high],
                               "passed": sum(bool(r["valid"]) for r in rows)}  # fmt: skip
    for a, b in pairs:
        if a in by_arm and b in by_arm and common:
            turns = paired_difference([by_arm[a][i] for i in common], [by_arm[b][i] for i in common])["turns"]
            out["pairs"][f"{b} vs {a}"] = turns.get(category)
    return out


def _fits(calls: list[dict], tools: list[dict]) -> bool:
    return calls_expressible(calls, schemas_by_name(tools))


def schema_fit(records: Iterable[dict], tools_at: ToolsAt, category: str = COMMON_CATEGORY) -> dict[str, Any]:
    """Over the ``category`` records of a width arm: voted steps, those whose chosen call set holds a
    call the turn's tools cannot make, and those of them where another candidate of the stored vote
    fits (any: what the schema-valid vote would rank first, the no-call candidate included; and
    with a call). Counted over every voted step and over the executed ones (the loop executes no
    no-call answer, and no repeat of an earlier call of the turn: ``repeat_policy=warn``)."""
    keys = ("voted", "chosen_unfit", "alternative_fits", "call_alternative_fits")
    counts = {scope: dict.fromkeys(keys, 0) for scope in ("all_steps", "executed_steps")}
    dialogues, unfit_steps = 0, []
    for record in records:
        if record["category"] != category:
            continue
        dialogues += 1
        for t, turn in enumerate(record.get("turns") or []):
            tools = tools_at(record["id"], t)
            for s, step in enumerate(turn.get("steps") or []):
                vote = step.get("vote")
                if vote is None:
                    continue
                scopes = ["all_steps"] + (["executed_steps"] if step.get("executed") else [])
                for scope in scopes:
                    counts[scope]["voted"] += 1
                chosen = vote["chosen"]
                if chosen["kind"] != "call" or _fits(chosen["calls"], tools):
                    continue
                others = [c for c in vote["candidates"] if c["key"] != chosen["key"] and c["kind"] != "malformed"]
                fitting = [c for c in others if _fits(c["calls"], tools)]
                with_call = [c for c in fitting if c["kind"] == "call"]
                for scope in scopes:
                    counts[scope]["chosen_unfit"] += 1
                    counts[scope]["alternative_fits"] += bool(fitting)
                    counts[scope]["call_alternative_fits"] += bool(with_call)
                unfit_steps.append({"id": record["id"], "turn": t, "step": s, "executed": bool(step.get("executed")),
                                    "chosen": chosen["calls"], "fitting_alternatives": len(fitting),
                                    "fitting_call_alternatives": len(with_call)})  # fmt: skip
    return {"category": category, "dialogues": dialogues, **counts, "unfit_steps": unfit_steps}


def valid_flags_agree(records: Iterable[dict], tools_at: ToolsAt, category: str = COMMON_CATEGORY) -> dict[str, int]:
    """Candidates whose vote recorded a ``valid`` flag: how many, and how many the same test,
    recomputed against ``tools_at``, disagrees with (0 when the tools are the ones the vote saw)."""
    checked = disagree = 0
    for record in records:
        if record["category"] != category:
            continue
        for t, turn in enumerate(record.get("turns") or []):
            tools = tools_at(record["id"], t)
            for step in turn.get("steps") or []:
                for candidate in (step.get("vote") or {}).get("candidates", []):
                    if "valid" in candidate:
                        checked += 1
                        disagree += candidate["valid"] != _fits(candidate["calls"], tools)
    return {"candidates_checked": checked, "disagree": disagree}


def bfcl_tools_at(category: str = COMMON_CATEGORY, split: str = "test") -> ToolsAt:
    """The tools a BFCL multi-turn dialogue offers at turn t: the entry's functions plus those
    miss_func adds at turns <= t (as ``kate.bfcl.env.BFCLEnvironment.add_functions`` does)."""
    from kate.bfcl.data import functions_to_tools, load_entries

    entries = {e.id: e for e in load_entries(category, split)}
    cache: dict[tuple[str, int], list[dict[str, Any]]] = {}

    def tools_at(entry_id: str, turn: int) -> list[dict[str, Any]]:
        if (entry_id, turn) not in cache:
            entry = entries[entry_id]
            functions = list(entry.functions)
            for t in sorted(k for k in entry.missed_functions if k <= turn):
                known = {f["name"] for f in functions}
                functions += [f for f in entry.missed_functions[t] if f["name"] not in known]
            cache[entry_id, turn] = functions_to_tools(functions)
        return cache[entry_id, turn]

    return tools_at


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def common_markdown(common: dict[str, Any]) -> list[str]:
    arms, n = common["arms"], common["n"]
    ran = ", ".join(f"{a} {common['dialogues_run'][a]}" for a in arms)
    lines = [f"## Common dialogues: the {n} {common['category']} dialogues {', '.join(arms)} all finished", "",
             f"Dialogues each arm ran: {ran}. Turns passed before the first failure, mean over the {n} common "
             "dialogues [95% normal interval]; passed = whole dialogues passed (official accuracy).", "",
             "| arm | n | turns passed % | passed |", "|---|---|---|---|"]  # fmt: skip
    for arm in arms:
        row = common["per_arm"][arm]
        low, high = row["turn_fraction_ci95"]
        lines.append(f"| {arm} | {n} | {_pct(row['turn_fraction'])} [{_pct(low)}, {_pct(high)}] | {row['passed']} |")
    lines.append("")
    for name, row in common["pairs"].items():
        if row is None:
            continue
        low, high = row["ci95"]
        lines.append(f"- **{name}**, paired on the {row['n']} common dialogues: better in {row['better']}, worse in "
                     f"{row['worse']}; mean difference {100 * row['mean_diff']:+.1f} points "
                     f"[{100 * low:+.1f}, {100 * high:+.1f}]")  # fmt: skip
    return lines + [""]


def schema_fit_markdown(fit: dict[str, Any], arm: str, check: dict[str, int] | None, check_arm: str) -> list[str]:
    a, e = fit["all_steps"], fit["executed_steps"]
    lines = [f"## Schema fit of {arm}'s plain-majority choices ({fit['category']}, {fit['dialogues']} dialogues)", "",
             "A chosen call set is unfit when it holds a call the tools offered at that turn cannot make (unknown "
             "function or parameter, a required one missing, a value of the wrong type: `kate.toolcall.expressible`, "
             "the schema-valid vote's test). An alternative fits when another candidate of the step's stored vote "
             "passes the same test: any candidate (what the schema-valid vote would rank first; the no-call "
             "candidate fits vacuously) or one that makes a call.", "",
             "| steps | voted | chosen unfit | of those, an alternative fits | a call alternative fits |",
             "|---|---|---|---|---|",
             f"| every voted step | {a['voted']} | {a['chosen_unfit']} | {a['alternative_fits']} | "
             f"{a['call_alternative_fits']} |",
             f"| executed steps (the loop ran the call; not a no-call answer or a repeat) | {e['voted']} | {e['chosen_unfit']} | "
             f"{e['alternative_fits']} | {e['call_alternative_fits']} |", ""]  # fmt: skip
    if check is not None:
        lines += [f"Check: the same test recomputed on {check_arm}'s {check['candidates_checked']} stored candidates "
                  f"disagrees with the `valid` flag its vote recorded on {check['disagree']}.", ""]  # fmt: skip
    return lines


def report(runs_dir: str | Path, results_dir: str | Path, tools_at: ToolsAt | None = None,
           model_note: str = DEFAULT_MODEL_NOTE) -> dict[str, Any]:
    """Write bfcl_<arm>.json, bfcl_report.md, bfcl_categories.png and bfcl_common.json under
    ``results_dir`` from the run folders under ``runs_dir``; returns what bfcl_common.json holds.
    ``tools_at``: the tools at (entry id, turn) (default: BFCL's own multi_turn_base test entries);
    ``model_note``: which model the runs are of, for the report's first note."""
    runs_dir, results_dir = Path(runs_dir), Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    loaded = load_arms(runs_dir)
    if not loaded:
        print("no runs yet")
        return {}
    runs, spreads = {}, {}
    for arm, by_seed in loaded.items():
        per_seed = {s: records for s, (_, records) in by_seed.items()}
        meta, spreads[arm] = meta_summary(by_seed[min(by_seed)][0]), seed_spread(per_seed)
        atomic_write_json(results_dir / f"bfcl_{arm}.json", {
            "arm": arm, "model": meta["model"], "sampler": meta["sampler"], "bfcl_eval": meta["bfcl_eval"],
            "data_sha256": meta["data_sha256"], "scoring_model": meta["scoring_model"],
            "knowledge": meta["knowledge"], "seeds": sorted(per_seed),
            "entries_planned": {s: len(meta_summary(m)["items"]) for s, (m, _) in by_seed.items()},
            "entries_done": {s: len(r) for s, r in per_seed.items()},
            "per_category": summarize(per_seed[min(per_seed)]), "across_seeds": spreads[arm],
        })  # fmt: skip
        runs[arm] = per_seed[min(per_seed)]
    text = comparison_report(runs, "BFCL-V3, kate arms", [NOTES[0].format(model=model_note), *NOTES[1:]])
    if table := seed_table(spreads):
        text += "\n\nAcross seeds (entries every seed finished):\n\n" + table + "\n"
    common: dict[str, Any] = {"source": "bench/runs/<arm>/seed_<lowest>/records.jsonl",
                              "command": ".venv/bin/python bench/bfcl_report.py"}  # fmt: skip
    extra: list[str] = []
    if all(a in runs for a in COMMON_ARMS):
        common["common_dialogues"] = common_dialogues(runs)
        extra += common_markdown(common["common_dialogues"])
    if SCHEMA_FIT_ARM in runs:
        tools_at = tools_at or bfcl_tools_at()
        fit = schema_fit(runs[SCHEMA_FIT_ARM], tools_at)
        check = valid_flags_agree(runs[SCHEMA_VALID_ARM], tools_at) if SCHEMA_VALID_ARM in runs else None
        common["schema_fit"] = {"arm": SCHEMA_FIT_ARM, **fit}
        common["valid_flag_check"] = {"arm": SCHEMA_VALID_ARM, **(check or {})}
        extra += schema_fit_markdown(fit, SCHEMA_FIT_ARM, check, SCHEMA_VALID_ARM)
    if extra:
        text = text.rstrip("\n") + "\n\n" + "\n".join(extra)
    atomic_write_text(results_dir / "bfcl_report.md", text.rstrip("\n") + "\n")
    atomic_write_json(results_dir / "bfcl_common.json", common)
    plot_categories({a: summarize(r) for a, r in runs.items()}, results_dir / "bfcl_categories.png")
    print(f"wrote {results_dir / 'bfcl_report.md'} and {results_dir / 'bfcl_common.json'}")
    return common


"""The base-gated adapter (conf/arm/grpo_gated.yaml, kate/llm/base_gated.py) replayed from two greedy runs,
and checked against its real runs where they exist.

A single-turn BFCL entry is one step, so what the gated arm would do is read off two runs on the same
entries: the base model's (``direct``) and the adapter's alone (``grpo_answers``). Where the base's reply
declines to call, the gated arm keeps it, else it keeps the adapter's if that calls (or tries to), and the
base's call if the adapter answered instead; the replay scores the kept reply as its own run scored it.
Both rules for a malformed call of the base (``llm.base_malformed``) are replayed: ``keep`` (kept, a
reply with no call, as BFCL scores it) and ``tuned`` (an attempt: the adapter's reply). So is
``keep_several``, kate's default model (conf/llm/default.yaml): ``keep`` with the base also asked in
BFCL's Python form where the call-count predictor expects several calls; where that reply makes several
calls that the offered tools can make, it is the base's reply, and it stands against an adapter reply
with fewer calls. Its Python-form
replies come from another run on the same entries: on the training half bench/tool_prompt.py's ``python``
run, with the predictor fitted on the knowledge base less those entries (bench/tool_prompt.py's
``cross_fitted_gate``); on the test half bench/full.py's ``both_gated`` (the same form, gate and base
model), over the entries it ran. ``keep_fit`` and ``keep_several_fit`` add the tool-relevance gate
(kate.retrieval.relevance, its tau and each entry's similarity from bench/tool_relevance.py): where no
offered tool fits the request, the base answers without tools, which BFCL scores right only on
irrelevance and live_irrelevance. Each of those rules is also paired with the rule it adds to
(``<rule>_vs_<control>``).
Where a real gated run exists, each entry's replayed verdict is compared with the real one: greedy
outputs shift with batch composition (#39's known numerics), so the two can differ, and the share that
agree says how far a replayed figure can be trusted. Per split, rule and category: n, right counts of
base / adapter / replayed gate (/ real gate), fixed and broken against the base with the exact sign test,
and the checker's error kinds of the wrong replies behind the fixed and the broken.

    .venv/bin/python bench/base_gate_replay.py        # writes bench/results/base_gate_replay.json and .png

Training half: base = bench/tool_prompt.py's direct run, adapter and the real ``tuned`` gate =
bench/train_half_arms.py (--arms grpo_answers, grpo_gated_tuned). Test half: bench/full.py's direct,
grpo_answers, grpo_gated (``keep``), grpo_gated_forms (``keep_several``) and default_model
(``keep_several_fit``) runs, over the entries that both the base and the adapter ran.
"""

from __future__ import annotations

import json
from pathlib import Path

from kate.bfcl.data import SINGLE_TURN, functions_to_tools, load_entries
from kate.eval.report import sign_test, wilson
from kate.eval.report_plots import plot_categories
from kate.eval.run_store import load_run
from kate.io import atomic_write_json
from kate.toolcall.expressible import calls_expressible, schemas_by_name
from tool_prompt import cross_fitted_gate, question, several_calls  # bench/, beside it

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "runs"
# split -> base run, adapter run, {rule: the real gated run}
SPLITS = {"train": (RUNS / "tool_prompt" / "direct", RUNS / "train_half" / "grpo_answers",
                    {"tuned": RUNS / "train_half" / "grpo_gated_tuned"}),
          "test": (RUNS / "full" / "direct", RUNS / "full" / "grpo_answers",
                   {"keep": RUNS / "full" / "grpo_gated", "keep_several": RUNS / "full" / "grpo_gated_forms",
                    "keep_fit": RUNS / "full" / "default_model", "keep_several_fit": RUNS / "full" / "default_model"})}
# (keep_fit's real run is the default model's too: it differs only where the several-calls gate opens)
# split -> the run holding the base's Python-form replies (keep_several), and whether the gate must be replayed
FORMS = {"train": (RUNS / "tool_prompt" / "python", True), "test": (RUNS / "full" / "both_gated", False)}
OUT = ROOT / "bench" / "results" / "base_gate_replay.json"
PLOT = OUT.with_suffix(".png")  # the test half, keep: direct, the adapter alone, the gate replayed


def records(folder: Path) -> dict[str, dict]:
    if not (folder / "seed_0" / "records.jsonl").exists():
        return {}
    return {r["id"]: r for r in load_run(folder / "seed_0")[1] if r["category"] in SINGLE_TURN}


# kate.llm.base_gated.BASE_MALFORMED; keep with base_several; either with the tool-relevance gate (``_fit``)
RULES = ("keep", "tuned", "keep_several", "keep_fit", "keep_several_fit")
RELEVANCE = ROOT / "bench" / "results" / "tool_relevance.json"  # bench/tool_relevance.py: tau, similarities
NO_CALL = ("irrelevance", "live_irrelevance")  # BFCL scores a reply with no call right there, wrong elsewhere
PAIRS = (("keep_several", "keep"), ("keep_fit", "keep"), ("keep_several_fit", "keep_several"))  # (rule, control)


def base_declined(record: dict, rule: str) -> bool:
    """The base's reply declined to call (``kate.llm.base_gated.declines``' rule, on the record)."""
    return not record.get("calls") and (rule != "tuned" or record.get("parse_error") is None)


def tools_can_make(split: str, replies: dict[str, dict]) -> dict[str, dict]:
    """The replies whose calls the entry's offered tools can make (``kate.llm.base_gated``'s check on the
    base's several calls: each names a tool, with its parameters and their types)."""
    tools = {e.id: schemas_by_name(functions_to_tools(e.functions))
             for c in {r["category"] for r in replies.values()} for e in load_entries(c, split)}  # fmt: skip
    return {i: r for i, r in replies.items() if calls_expressible(r["calls"], tools[i])}


def several_replies(split: str, base: dict[str, dict]) -> tuple[dict[str, dict], set[str]]:
    """(entry -> the base's Python-form reply with several calls that the several-calls gate keeps and the
    tools can make, the entries the Python-form run covers) for ``keep_several``."""
    folder, replay_gate = FORMS[split]
    forms = records(folder)
    if not replay_gate:  # both_gated's records: its reply with several calls is the Python form's, gate passed
        return tools_can_make(split, {i: r for i, r in forms.items() if len(r.get("calls") or []) >= 2}), set(forms)
    gate = cross_fitted_gate(set(forms) & set(base))
    kept = {i: r for i, r in forms.items() if i in base and several_calls(r) and gate.several(question(base[i]))}
    return tools_can_make(split, kept), set(forms)


def tools_fit(split: str) -> dict[str, bool]:
    """entry -> whether the tool-relevance gate (its tau chosen on the training half) offers the tools."""
    if not RELEVANCE.exists():
        return {}
    chosen = json.loads(RELEVANCE.read_text())
    tau = chosen["gate"]["tau"]
    return {i: sim >= tau for rows in chosen["similarity"][split].values() for i, sim in rows.items()}


def no_tools_reply(b: dict) -> dict:
    """The base's reply asked without tools, as BFCL scores it: no call, right only where none is due."""
    right = b["category"] in NO_CALL
    return {"id": b["id"], "category": b["category"], "calls": [], "parse_error": None, "valid": right,
            "error_type": None if right else "kate:no_tool_offered"}  # fmt: skip


def gated_reply(b: dict, a: dict, rule: str, several: dict | None = None, fits: bool = True) -> dict:
    """The reply the gate keeps from the base's ``b`` (its Python-form reply with several calls, ``several``,
    in its stead where there is one) and the adapter's ``a``; where no tool fits (``fits`` False), the
    base's reply without tools."""
    if not fits:
        return no_tools_reply(b)
    b = several or b
    if base_declined(b, rule) or not attempts_call(a):
        return b
    return b if several and len(a.get("calls") or []) < len(b["calls"]) else a


def attempts_call(record: dict) -> bool:
    """The reply calls, or tries to (``kate.llm.base_gated.attempts_call``, on the record)."""
    return bool(record.get("calls")) or record.get("parse_error") is not None


def error_kind(record: dict) -> str:
    """The BFCL checker's error kind of a wrong reply (``value_error``, ``irrelevance_error``, ...); kate's
    own (``kate:malformed_call``) whole."""
    kind = str(record.get("error_type") or "none")
    return kind if kind.startswith("kate:") else kind.split(":")[0]


def replay(base: dict[str, dict], adapter: dict[str, dict], real: dict[str, dict], rule: str,
           forms: tuple[dict[str, dict], set[str]] | None = None, fits: dict[str, bool] | None = None) -> dict:
    cells: dict[str, dict] = {}
    several, covered = forms or ({}, set(base))
    for i in sorted(set(base) & set(adapter) & covered):
        b, a = base[i], adapter[i]
        kept = gated_reply(b, a, rule, several.get(i), (fits or {}).get(i, True))
        g, d = bool(kept["valid"]), bool(b["valid"])
        cell = cells.setdefault(b["category"], {"n": 0, "base": 0, "adapter": 0, "gate": 0, "fixed": 0, "broken": 0,
                                                 "base_declined": 0, "adapter_answered": 0, "real_n": 0, "real": 0,
                                                 "real_base": 0, "real_agrees": 0, "base_several": 0,
                                                 "no_tool_fits": 0})
        cell["n"] += 1
        cell["base"] += d
        cell["adapter"] += bool(a["valid"])
        cell["gate"] += g
        cell["fixed"] += g and not d
        cell["broken"] += d and not g
        if g != d:  # the error kind of the reply that was wrong: direct's where fixed, the kept one's where broken
            side = cell.setdefault("fixed_kinds" if g else "broken_kinds", {})
            kind = error_kind(kept if d else b)
            side[kind] = side.get(kind, 0) + 1
        cell["base_declined"] += base_declined(kept, rule) and kept is not a
        cell["adapter_answered"] += not base_declined(b, rule) and not attempts_call(a)
        cell["base_several"] += i in several and kept is several[i]
        cell["no_tool_fits"] += not (fits or {}).get(i, True)
        if i in real:
            cell["real_n"] += 1
            cell["real"] += bool(real[i]["valid"])
            cell["real_base"] += d  # the base's right count on the entries the real run has
            cell["real_agrees"] += bool(real[i]["valid"]) == g
    for cell in cells.values():
        cell["sign_test_p"] = float(f"{sign_test(cell['fixed'], cell['broken']):.3g}")
    return dict(sorted(cells.items()))


def against(base: dict[str, dict], adapter: dict[str, dict], rule: str, control: str,
            forms: tuple[dict[str, dict], set[str]], fits: dict[str, bool]) -> dict:  # fmt: skip
    """``rule`` paired with ``control`` on the entries both cover: per category (and in all) the entries
    it fixes and breaks, with the exact sign test."""
    several, covered = forms
    both = set(base) & set(adapter) & (covered if "several" in f"{rule} {control}" else set(base))

    def right(r: str, i: str) -> bool:
        pick = several.get(i) if "several" in r else None
        fit = fits.get(i, True) if r.endswith("_fit") else True
        return bool(gated_reply(base[i], adapter[i], r, pick, fit)["valid"])

    cells: dict[str, dict] = {}
    for i in sorted(both):
        keep, mine = right(control, i), right(rule, i)
        cell = cells.setdefault(base[i]["category"], {"n": 0, control: 0, rule: 0, "fixed": 0, "broken": 0})
        cell["n"], cell[control], cell[rule] = cell["n"] + 1, cell[control] + keep, cell[rule] + mine
        cell["fixed"], cell["broken"] = cell["fixed"] + (mine and not keep), cell["broken"] + (keep and not mine)
    for cell in cells.values():
        cell["sign_test_p"] = float(f"{sign_test(cell['fixed'], cell['broken']):.3g}")
    total = {k: sum(c[k] for c in cells.values()) for k in ("n", control, rule, "fixed", "broken")}
    total["sign_test_p"] = float(f"{sign_test(total['fixed'], total['broken']):.3g}")
    return {"total": total, "per_category": dict(sorted(cells.items()))}


def totals(cells: dict[str, dict]) -> dict:
    keys = ("n", "base", "adapter", "gate", "fixed", "broken", "base_declined", "adapter_answered", "real_n", "real",
            "real_base", "real_agrees", "base_several", "no_tool_fits")
    out = {k: sum(c[k] for c in cells.values()) for k in keys}
    out["sign_test_p"] = float(f"{sign_test(out['fixed'], out['broken']):.3g}")
    for side in ("fixed_kinds", "broken_kinds"):
        kinds: dict[str, int] = {}
        for cell in cells.values():
            for kind, count in cell.get(side, {}).items():
                kinds[kind] = kinds.get(kind, 0) + count
        out[side] = dict(sorted(kinds.items(), key=lambda kv: -kv[1]))
    mean = lambda key: round(100 * sum(c[key] / c["n"] for c in cells.values()) / len(cells), 1) if cells else None
    out["mean_category_accuracy"] = {k: mean(k) for k in ("base", "adapter", "gate")}
    out["categories_below_base"] = [c for c, cell in cells.items() if cell["gate"] < cell["base"]]
    return out


def plot(cells: dict[str, dict]) -> None:
    """Accuracy per category with 95% intervals: direct, the adapter alone, the gate (replayed)."""
    shown = {"direct": "base", "adapter alone": "adapter", "gate, replayed (the default model)": "gate"}
    runs = {label: {c: {"accuracy": cell[key] / cell["n"], "ci95": wilson(cell[key], cell["n"])}
                    for c, cell in cells.items()} for label, key in shown.items()}  # fmt: skip
    plot_categories(runs, PLOT)


def main() -> None:
    out = {"what": __doc__.split("\n\n")[0], "command": ".venv/bin/python bench/base_gate_replay.py", "splits": {}}
    for split, (base_dir, adapter_dir, real_dirs) in SPLITS.items():
        base, adapter = records(base_dir), records(adapter_dir)
        if not (base and adapter):
            continue
        runs = {"base": base_dir, "adapter": adapter_dir, **{f"real_{r}": d for r, d in real_dirs.items()}}
        out["splits"][split] = {"runs": {k: str(d.relative_to(ROOT)) for k, d in runs.items()}}
        forms, fits = several_replies(split, base), tools_fit(split)
        out["splits"][split]["base_native_several"] = sum(len(r.get("calls") or []) >= 2 for r in base.values())
        out["splits"][split]["runs"]["base_python_form"] = str(FORMS[split][0].relative_to(ROOT))
        for rule in RULES:
            if rule.endswith("_fit") and not fits:
                continue
            real = records(real_dirs[rule]) if rule in real_dirs else {}
            cells = replay(base, adapter, real, rule, forms if "several" in rule else None,
                           fits if rule.endswith("_fit") else None)
            out["splits"][split][rule] = {"total": totals(cells), "per_category": cells}
        for rule, control in PAIRS:
            if not rule.endswith("_fit") or fits:
                out["splits"][split][f"{rule}_vs_{control}"] = against(base, adapter, rule, control, forms, fits)
    atomic_write_json(OUT, out)
    if "test" in out["splits"]:
        plot(out["splits"]["test"]["keep"]["per_category"])
    print(json.dumps({s: {r: t["total"] for r, t in v.items() if isinstance(t, dict) and "total" in t}
                      for s, v in out["splits"].items()}, indent=1))


if __name__ == "__main__":
    main()

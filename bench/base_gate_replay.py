"""The base-gated adapter (conf/arm/grpo_gated.yaml, kate/llm/base_gated.py) replayed from two greedy runs,
and checked against its real run where one exists.

A single-turn BFCL entry is one step, so what the gated arm would do is read off two runs on the same
entries: the base model's (``direct``) and the adapter's alone (``grpo_answers``). Where the base's reply
declines to call (no call and no malformed one, the rule of ``kate.llm.base_gated.declines``) the gated arm keeps it,
else it keeps the adapter's. The replay scores the kept reply as its own run scored it. Where the real
gated arm ran too, each entry's replayed verdict is compared with the real one: greedy outputs shift
with batch composition (#39's known numerics), so the two can differ, and the share that agree says how
far a replayed figure can be trusted. Per split and category: n, right counts of base / adapter /
replayed gate (/ real gate), fixed and broken against the base with the exact sign test.

    .venv/bin/python bench/base_gate_replay.py        # writes bench/results/base_gate_replay.json

Training half: base = bench/tool_prompt.py's direct run, adapter and real gate = bench/train_half_arms.py
(--arms grpo_answers, grpo_gated). Test half: bench/full.py's direct, grpo_answers and grpo_gated runs,
over the entries that both the base and the adapter ran.
"""

from __future__ import annotations

import json
from pathlib import Path

from kate.bfcl.data import SINGLE_TURN
from kate.eval.report import sign_test
from kate.eval.run_store import load_run
from kate.io import atomic_write_json

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "bench" / "runs"
SPLITS = {"train": (RUNS / "tool_prompt" / "direct", RUNS / "train_half" / "grpo_answers", RUNS / "train_half" / "grpo_gated"),
          "test": (RUNS / "full" / "direct", RUNS / "full" / "grpo_answers", RUNS / "full" / "grpo_gated")}  # fmt: skip
OUT = ROOT / "bench" / "results" / "base_gate_replay.json"


def records(folder: Path) -> dict[str, dict]:
    if not (folder / "seed_0" / "records.jsonl").exists():
        return {}
    return {r["id"]: r for r in load_run(folder / "seed_0")[1] if r["category"] in SINGLE_TURN}


def base_declined(record: dict) -> bool:
    """The base's reply declined to call: no call and no malformed one (``declines``' rule on the record)."""
    return not record.get("calls") and record.get("parse_error") is None


def replay(base: dict[str, dict], adapter: dict[str, dict], real: dict[str, dict]) -> dict:
    cells: dict[str, dict] = {}
    for i in sorted(set(base) & set(adapter)):
        b, a = base[i], adapter[i]
        kept = b if base_declined(b) else a
        g, d = bool(kept["valid"]), bool(b["valid"])
        cell = cells.setdefault(b["category"], {"n": 0, "base": 0, "adapter": 0, "gate": 0, "fixed": 0, "broken": 0,
                                                 "base_declined": 0, "real_n": 0, "real": 0, "real_agrees": 0})
        cell["n"] += 1
        cell["base"] += d
        cell["adapter"] += bool(a["valid"])
        cell["gate"] += g
        cell["fixed"] += g and not d
        cell["broken"] += d and not g
        cell["base_declined"] += kept is b
        if i in real:
            cell["real_n"] += 1
            cell["real"] += bool(real[i]["valid"])
            cell["real_agrees"] += bool(real[i]["valid"]) == g
    for cell in cells.values():
        cell["sign_test_p"] = float(f"{sign_test(cell['fixed'], cell['broken']):.3g}")
    return dict(sorted(cells.items()))


def totals(cells: dict[str, dict]) -> dict:
    keys = ("n", "base", "adapter", "gate", "fixed", "broken", "base_declined", "real_n", "real", "real_agrees")
    out = {k: sum(c[k] for c in cells.values()) for k in keys}
    out["sign_test_p"] = float(f"{sign_test(out['fixed'], out['broken']):.3g}")
    mean = lambda key: round(100 * sum(c[key] / c["n"] for c in cells.values()) / len(cells), 1) if cells else None
    out["mean_category_accuracy"] = {k: mean(k) for k in ("base", "adapter", "gate")}
    out["categories_below_base"] = [c for c, cell in cells.items() if cell["gate"] < cell["base"]]
    return out


def main() -> None:
    out = {"what": __doc__.split("\n\n")[0], "command": ".venv/bin/python bench/base_gate_replay.py", "splits": {}}
    for split, (base_dir, adapter_dir, real_dir) in SPLITS.items():
        base, adapter = records(base_dir), records(adapter_dir)
        if not (base and adapter):
            continue
        cells = replay(base, adapter, records(real_dir))
        out["splits"][split] = {"runs": {k: str(v.relative_to(ROOT)) for k, v in
                                         zip(("base", "adapter", "real_gate"), (base_dir, adapter_dir, real_dir))},
                                "total": totals(cells), "per_category": cells}  # fmt: skip
    atomic_write_json(OUT, out)
    print(json.dumps({s: v["total"] for s, v in out["splits"].items()}, indent=1))


if __name__ == "__main__":
    main()

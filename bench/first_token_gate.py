"""An abstention gate from the first token, replayed: would dropping the greedy call where the model's
first-token probability of starting a call, P(call), is below a threshold tau turn wrong calls on
irrelevance entries into right abstentions without losing right calls elsewhere? (The gate itself is
``sampling=abstain``, kate.sampling.abstain; P(call) here is its ``p_call``.)

``--split train|test``: for the first 40 (train) or 100 (test) entries of each single-turn category
(the default 0.5B model, the native tool prompt, as arm ``direct`` asks), one forward pass of the
prompt (``max_tokens=1`` with the 20 most likely first tokens): P(call) is the probability mass of
first tokens that open a call, ``would_call`` whether the most likely one does. Written one line per
entry to ``bench/runs/first_token_gate/<split>.jsonl`` (resumable: the same command continues).

``--choose`` picks tau on the training half by a rule fixed before the test half is read: the tau of
``TAUS``, or none (tau 0: no gate), with the highest mean over categories of the call / no-call
decision's accuracy (a call is due in every category but irrelevance and live_irrelevance), the
smallest on a tie. ``--replay`` (when a gate was chosen) applies the chosen tau to the test half's
``direct`` records (bench/runs/full/direct): where the gate is closed the entry counts as not called
(right on irrelevance entries, wrong elsewhere), else direct's own verdict stands; paired with direct
per category, with the sign test. Figures: ``bench/results/first_token_gate.json`` and
``first_token_gate.png``.

    .venv/bin/python bench/first_token_gate.py --split train
    .venv/bin/python bench/first_token_gate.py --split test
    .venv/bin/python bench/first_token_gate.py --choose --replay
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tqdm import tqdm

from kate.bfcl.data import SINGLE_TURN, load_entries
from kate.eval.report import sign_test
from kate.eval.run_store import load_run
from kate.io import atomic_write_json
from kate.llm.llamacpp import LlamaCppChatModel
from kate.sampling.abstain import OPENINGS, opens_call, p_call

ROOT = Path(__file__).resolve().parents[1]
RUNS, RESULTS = ROOT / "bench" / "runs" / "first_token_gate", ROOT / "bench" / "results"
MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
NO_CALL_DUE = ("irrelevance", "live_irrelevance")
TAUS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
TOP = 20
# entries per category: a prompt's prefill is most of an entry's cost (bench/results/full/entry_cost.json:
# about 1.26M prompt tokens per split at ~130 tokens/s on 2 cores), so the gate is read on a share of each
LIMITS = {"train": 40, "test": 100}


def first_token(model: LlamaCppChatModel, entry) -> dict:
    [reply] = model.chat(entry.turns[0], entry.tools, max_tokens=1, logprobs=True, top_logprobs=TOP)
    top = reply.logprobs[0].top if reply.logprobs else ()
    belief = p_call(reply)  # None: an empty reply (no first token), kept as null
    return {"id": entry.id, "category": entry.category, "p_call": None if belief is None else round(belief, 6),
            "would_call": bool(top) and opens_call(top[0][0]), "top": top[0][0] if top else None}  # fmt: skip


def planned(split: str) -> list:
    """The split's first ``LIMITS[split]`` entries of every single-turn category, in order."""
    return [e for c in SINGLE_TURN for e in load_entries(c, split, limit=LIMITS[split])]


def collect(split: str) -> None:
    path = RUNS / f"{split}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["id"] for line in path.read_text().splitlines()} if path.exists() else set()
    entries = [e for e in planned(split) if e.id not in done]
    model = LlamaCppChatModel(MODEL, max_parallel=8)
    with path.open("a") as out, ThreadPoolExecutor(8) as pool:
        for row in tqdm(pool.map(lambda e: first_token(model, e), entries), total=len(entries), desc=split):
            out.write(json.dumps(row) + "\n")
            out.flush()


def rows(split: str) -> list[dict]:
    wanted = {e.id for e in planned(split)}
    return [r for r in map(json.loads, (RUNS / f"{split}.jsonl").read_text().splitlines()) if r["id"] in wanted]


def decision_accuracy(data: list[dict], tau: float) -> dict[str, float]:
    per: dict[str, list[bool]] = {}
    for r in data:
        calls = r["would_call"] and (r["p_call"] or 0.0) >= tau
        per.setdefault(r["category"], []).append(calls != (r["category"] in NO_CALL_DUE))
    return {c: round(sum(v) / len(v), 4) for c, v in sorted(per.items())}


def choose() -> dict:
    data = rows("train")
    table = {}
    for tau in (0.0, *TAUS):
        acc = decision_accuracy(data, tau)
        table[str(tau)] = {"mean": round(sum(acc.values()) / len(acc), 4), "per_category": acc}
    best = max((0.0, *TAUS), key=lambda t: (table[str(t)]["mean"], -t))
    return {"rule": ("tau of TAUS, or 0 (no gate), with the highest mean decision accuracy over the training half's "
                     "categories; the smallest on a tie"),
            "n_train": len(data), "chosen_tau": best, "ungated (tau 0)": table["0.0"]["mean"], "table": table}


def plot(choice: dict, path: Path) -> None:
    """Decision accuracy against tau: the no-call categories' mean, the call categories' mean, all."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    taus = [float(t) for t in choice["table"]]
    groups = {"no call due (irrelevance, live_irrelevance)": lambda c: c in NO_CALL_DUE,
              "a call due (the other 11)": lambda c: c not in NO_CALL_DUE, "all 13 (the rule's mean)": lambda c: True}
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, keep in groups.items():
        means = []
        for t in choice["table"].values():
            vals = [v for c, v in t["per_category"].items() if keep(c)]
            means.append(100 * sum(vals) / len(vals))
        ax.plot(taus, means, marker="o", label=label)
    ax.set(xlabel="tau (0: no gate)", ylabel="call / no-call decision right (%)", ylim=(0, 100),
           title=f"First-token abstain gate, training half (n = {choice['n_train']}), 0.5B")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replay(tau: float) -> dict:
    gate = {r["id"]: r for r in rows("test")}
    direct = {r["id"]: r for r in load_run(ROOT / "bench" / "runs" / "full" / "direct" / "seed_0")[1]}
    cells: dict[str, dict] = {}
    for i, d in direct.items():
        if i not in gate or d["category"] not in SINGLE_TURN:
            continue
        attempted = bool(d["calls"] or d["parse_error"])  # the sampler re-asks a malformed call too
        closed = attempted and (gate[i]["p_call"] or 0.0) < tau  # taken as a plain answer when re-asked
        right = d["category"] in NO_CALL_DUE if closed else bool(d["valid"])
        cell = cells.setdefault(d["category"], {"n": 0, "direct": 0, "gated": 0, "fixed": 0, "broken": 0, "closed": 0})
        cell["n"] += 1
        cell["direct"] += bool(d["valid"])
        cell["gated"] += right
        cell["fixed"] += right and not d["valid"]
        cell["broken"] += bool(d["valid"]) and not right
        cell["closed"] += closed
    for cell in cells.values():
        cell["sign_test_p"] = float(f"{sign_test(cell['fixed'], cell['broken']):.3g}")
    return {"tau": tau, "per_category": dict(sorted(cells.items()))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--split", choices=("train", "test"))
    parser.add_argument("--choose", action="store_true")
    parser.add_argument("--replay", action="store_true")
    args = parser.parse_args()
    if args.split:
        collect(args.split)
    if args.choose or args.replay:
        out = {"command": ".venv/bin/python bench/first_token_gate.py --choose --replay", "model": MODEL,
               "openings": list(OPENINGS), "choice": choose()}
        tau = out["choice"]["chosen_tau"]
        if args.replay:
            out["test_replay"] = replay(tau) if tau else "not run: the training half chose no gate (tau 0)"
        atomic_write_json(RESULTS / "first_token_gate.json", out)
        plot(out["choice"], RESULTS / "first_token_gate.png")
        print(json.dumps({k: v for k, v in out["choice"].items() if k != "table"}, indent=1))


if __name__ == "__main__":
    main()

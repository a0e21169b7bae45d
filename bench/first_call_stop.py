"""What stopping a greedy one-call step at its first whole call changes, replayed on committed dialogues.

In a dialogue every step is the first call the model writes (``one_call``); small models often go on
writing calls until the token limit cuts them. ``stop_after_call`` (kate.llm.llamacpp) ends the reply
once ``kate.toolcall.first_call_complete`` holds. For every step of the committed greedy dialogues this
replays each prefix of the reply's text from the first one that holds a whole call to the whole text,
and checks that ``parse_first_call`` reads the same call, without error, from every one of them: then
wherever a token ends, the stopped step is the step the run took. It also counts the share of the
replies' characters after the first whole call (what stopping saves), and the steps cut by the token
limit. Results: ``bench/results/first_call_stop.json``.

    .venv/bin/python bench/first_call_stop.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

from kate.eval.run_store import load_run
from kate.io import atomic_write_json
from kate.toolcall import first_call_end, parse_first_call

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "first_call_stop.json"
RUNS = ("bench/runs/full/direct/seed_0",  # the full-n direct arm: 100 test-half dialogues
        "bench/runs/direct/seed_0",  # the earlier benchmark's 30
        "bench/runs/models/qwen2.5-coder-1.5b-instruct-q4_k_m/direct/seed_0",  # the 1.5B model
        "bench/runs/models/qwen2.5-coder-1.5b-instruct-q4_k_m/st/seed_0")  # the 1.5B with ST knowledge; all greedy


def replay_step(text: str) -> tuple[str, int]:
    """("no_whole_call" | "same" | "differs", characters after the first whole call)."""
    end = first_call_end(text)
    if end is None:
        return "no_whole_call", 0
    full = parse_first_call(text)
    for cut in range(end, len(text) + 1):
        part = parse_first_call(text[:cut])
        if part.error is not None or part.calls != full.calls:
            return "differs", len(text) - end
    return "same", len(text) - end


def replay_arm(folder: Path) -> dict:
    counts = {"steps": 0, "no_whole_call": 0, "same": 0, "differs": 0, "cut_by_token_limit": 0}
    chars = after = completion_tokens = 0
    dialogues = 0
    _, records = load_run(folder)
    for record in records:
        if "turns" not in record:
            continue
        dialogues += 1
        for turn in record["turns"]:
            for step in turn.get("steps", []):
                text = step.get("text") or ""
                verdict, tail = replay_step(text)
                counts["steps"] += 1
                counts[verdict] += 1
                usage = step.get("usage") or {}
                counts["cut_by_token_limit"] += usage.get("completion_tokens", 0) >= 256
                completion_tokens += usage.get("completion_tokens", 0)
                chars += len(text)
                after += tail
    return {"dialogues": dialogues, **counts, "completion_tokens": completion_tokens,
            "share_of_text_after_first_call": round(after / max(chars, 1), 3)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=",".join(RUNS), help="run folders (greedy), comma separated")
    args = parser.parse_args()
    arms = {}
    for run in args.runs.split(","):
        arms[run] = replay_arm(ROOT / run)
        print(run, arms[run], flush=True)
    atomic_write_json(OUT, {
        "what": "greedy dialogue steps of committed runs: does stopping at the first whole call keep "
                "the step (same first call, no error, from every prefix after it)? and what share of the text "
                "comes after that call",
        "command": ".venv/bin/python bench/first_call_stop.py", "runs": arms,
    })  # fmt: skip


if __name__ == "__main__":
    main()

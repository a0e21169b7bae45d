"""The own-tools task (``kate.tasks.own_tools``) on the default model: arms on the TRAIN half
(settings are chosen there), the chosen ones once on the test half. Arms are composed as
``kate eval categories=[own_tools] split=train sampling=<s>`` (plus the loop keys named) composes them, run by kate's one
runner into ``bench/runs/own_tools/<arm>/seed_0/`` (resumable: the same command again continues),
with kate eval's loop settings except ``max_steps=4`` (see ``kate.eval.own_tools_arms.OVERRIDES``):

* ``direct``: ``GreedySampler`` (conf/sampling/greedy.yaml)
* ``w8v``: width 8 with the schema-valid vote (conf/sampling/width.yaml: n=8, valid_majority)
* ``direct_answer``: greedy, and the turn-end options of ``kate/agent/turn_end.py``: a result fed
  back into the same call counts as a repeat (``repeat_match=fed``), a repeat is answered by asking
  for the answer prefilled with "Based on the result, " (``repeat_policy=answer``), and so is the
  step cap (``answer_at_max_steps``). Chosen on the train half: after the recorded first call of
  each train question, four presentations of the result (the tool message as is, the call named
  in it, a user message repeating the question, no tools offered) left the model writing calls on
  the 7 questions tried; three prefills gave a plain answer on 24 of 24 (bench/turn_end_presentations.py).
* ``direct_answer_exact``: as ``direct_answer`` with ``repeat_match=exact`` (what ``fed`` adds).
* ``sft_answer``: ``direct_answer`` on the SFT-trained model (bench/train_cpu.py's adapter, llama.cpp LoRA):
  what the turn-end options add to training (the trained model answers by itself more often).
* ``grpo_answer``: ``direct_answer`` on the GRPO adapter (GRPO after that SFT); ``sft_direct``: the SFT
  adapter without the turn-end options.
* ``grpo_gated_answer``: the GRPO-answers adapter with its base model deciding whether to call at a turn's
  start (conf/arm/grpo_gated.yaml), with the turn-end options; ``grpo_gated_tuned_answer``: the same with the
  base's malformed call left to the adapter (``llm.base_malformed=tuned``).
* ``forms_answer``: ``grpo_gated_answer`` with the base also asked in BFCL's Python form where the call-count
  predictor expects several calls (conf/arm/grpo_gated_forms.yaml); ``default_answer``: kate's default model,
  which adds the tool-relevance gate (conf/arm/default_model.yaml).
* ``st_answer``: ``direct_answer`` with ST knowledge from the train half (conf/arm/own_tools_st.yaml,
  built by ``bench/own_tools_kb.py``; on the train half each question's own example is excluded).

``--split test`` runs the chosen arms once on the test half (``bench/runs/own_tools/test/<arm>/``,
``bench/results/own_tools_test.json``); nothing is chosen from it.

Writes ``bench/results/own_tools_baseline.json``: per arm n, right-call share, right-answer share,
turn-end counts (``kate.tasks.own_tools.summarize``), the split named, and each arm's right answers
paired against ``direct_answer`` on the questions both ran (``answers_vs_direct_answer``: fixed, broken,
the exact sign test's p, the arm's share with its 95% Wilson interval).

    .venv/bin/python bench/own_tools.py --arms direct          # then --arms direct,w8v
    .venv/bin/python bench/own_tools.py --arms direct_answer   # then st_answer, direct_answer_exact
    .venv/bin/python bench/own_tools.py --split test --arms direct_answer   # then sft_answer
    .venv/bin/python bench/own_tools.py --report-only          # --split test for the test half's file
    .venv/bin/python bench/own_tools.py --model qwen2.5-coder-1.5b-instruct-q4_k_m --split test --arms direct_answer

``--model`` (a kate model name, installed) runs another model: its runs go to
``bench/runs/models/<name>/own_tools/``, its figures to ``bench/results/models/<name>/own_tools_<split>.json``.

What ran (2 shared CPU cores): ``--arms direct`` (all 32, 37 min); ``--arms w8v --limit 4`` under a
16-minute ``timeout`` (~7 minutes a question at width 8), so w8v's n is what finished: indicative only.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from hydra.utils import instantiate  # noqa: E402

import kate.configs  # noqa: E402,F401  (the typed job schemas)
from kate.cli import CONF_DIR  # noqa: E402
from kate.eval import own_tools_arms  # noqa: E402
from kate.eval.arms import open_arm  # noqa: E402
from kate.eval.own_tools_arms import ARMS, PAIRED_AGAINST, RUNS, paired_answers  # noqa: E402
from kate.eval.runner import run_task  # noqa: E402
from kate.eval.run_store import load_run  # noqa: E402
from kate.io import atomic_write_json  # noqa: E402
from kate.tasks.own_tools import OwnToolsTask, content_sha256, summarize  # noqa: E402
from kate.eval.model_folders import DEFAULT_MODEL  # noqa: E402


def places(split: str, model: str | None) -> tuple[Path, Path]:
    return own_tools_arms.places(split, model, ROOT / "bench")


def compose_arm(arm: str, split: str, model_name: str | None = None) -> dict:
    return own_tools_arms.compose_arm(arm, split, model_name, conf_dir=CONF_DIR)


def run(arm: str, model, split: str, limit: int | None = None, model_name: str | None = None) -> float:
    c = compose_arm(arm, split, model_name)
    task = OwnToolsTask(split=split, limit=limit)
    policy, store = open_arm(c, model, task, places(split, model_name)[0] / arm / "seed_0", arm=arm)
    start = time.perf_counter()  # the questions only: building the policy (knowledge, embedder) is not timed
    run_task(task, policy, store, seed=0, desc=f"{arm} seed 0")
    return round(time.perf_counter() - start, 1)


def report(seconds: dict[str, float], split: str, model_name: str | None = None) -> dict:
    runs, result = places(split, model_name)
    arms, stored = {}, {}
    before = json.loads(result.read_text())["arms"] if result.exists() else {}  # a --report-only keeps the seconds
    for arm in ARMS:
        folder = runs / arm / "seed_0"
        if not (folder / "records.jsonl").exists():
            continue
        meta, stored[arm] = load_run(folder)
        figures = summarize(stored[arm]).get(split, {"n": 0})
        arms[arm] = {"sampler": meta["policy"]["sampler"], "loop": meta["config"]["loop"],
                     "model": meta["policy"]["model"].get("name"), **figures}  # fmt: skip
        if arm in seconds:
            arms[arm]["seconds_this_run"] = seconds[arm]
        elif "seconds_this_run" in before.get(arm, {}):
            arms[arm]["seconds_this_run"] = before[arm]["seconds_this_run"]
    for arm in arms:
        if arm != PAIRED_AGAINST and PAIRED_AGAINST in stored:
            arms[arm][f"answers_vs_{PAIRED_AGAINST}"] = paired_answers(stored[PAIRED_AGAINST], stored[arm])
    where, who = runs.relative_to(ROOT), model_name or "default model"
    out = {"task": "own_tools", "split": split, "content_sha256": content_sha256(), "arms": arms,
           "note": f"untrained {who}; records in {where}/<arm>/seed_0/"}  # fmt: skip
    atomic_write_json(result, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="direct", help="comma-separated: " + ", ".join(ARMS))
    parser.add_argument("--limit", type=int, default=None, help="the first N questions (default: all 32)")
    parser.add_argument("--split", default="train", choices=sorted(RUNS), help="train (choose here) | test (once)")
    parser.add_argument("--model", default=None, help=f"a kate model name (default {DEFAULT_MODEL})")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    seconds: dict[str, float] = {}
    if not args.report_only:
        arms = [a for a in args.arms.split(",") if a]
        unknown = [a for a in arms if a not in ARMS]
        if unknown:
            raise SystemExit(f"unknown arm(s) {unknown}; arms: {', '.join(ARMS)}")
        llms = {json.dumps(compose_arm(a, args.split, args.model)["llm"], sort_keys=True) for a in arms}
        if len(llms) > 1:
            raise SystemExit(f"arms {arms} need different model clients: run them one command each")
        model = instantiate(compose_arm(arms[0], args.split, args.model)["llm"])
        for arm in arms:
            seconds[arm] = run(arm, model, args.split, args.limit, args.model)
    out = report(seconds, args.split, args.model)
    for arm, row in out["arms"].items():
        paired = row.get(f"answers_vs_{PAIRED_AGAINST}")
        against = f" vs {PAIRED_AGAINST} +{paired['fixed']}/-{paired['broken']} p={paired['p']}" if paired else ""
        print(f"{arm}: n={row['n']} call_ok={row.get('call_ok_share')} answer_ok={row.get('answer_ok_share')} "
              f"turn_ends={row.get('turn_ends')}{against}")  # fmt: skip


if __name__ == "__main__":
    main()

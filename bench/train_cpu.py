"""Training benchmark on CPU: the default 0.5B model with LoRA, SFT then GRPO on KATE's training
halves, evaluated on a fixed test-half slice in four arms. Every stage is resumable: rerun the same
command (in a later session too) and it continues where it stopped; finished stages are skipped.

    .venv/bin/python bench/train_cpu.py                 # every stage in order
    .venv/bin/python bench/train_cpu.py --stages eval   # only some: data,sft,grpo,eval,report,sft_answers,grpo_answers,sft_checkpoints,adopt_*
    .venv/bin/python bench/train_cpu.py --stages eval --arms trained_direct --adapter sft_answers
    .venv/bin/python bench/train_cpu.py --stages eval --arms trained_direct --adapter grpo_answers --parts own_tools
    .venv/bin/python bench/train_cpu.py --stages report # the report from the committed records

Stages:
- data: `kate train data` over BFCL's offline single-turn categories and multi_turn_base (training
  halves) plus the own-tools task's train half -> train/data/bench_steps (regenerable: the written
  answers are cached in knowledge_bases/train_answers.jsonl).
- sft / grpo: `kate train sft|grpo` with conf/train's settings and the overrides below (sized for 2
  cores: steps whose example exceeds MAX_LENGTH tokens are left out, which on CPU leaves out the
  multi-turn dialogues, ~5-6k tokens each) -> bench/runs/train/{sft,grpo}/ (final adapter, probe
  curve and metrics committed; checkpoints are not).
- sft_answers (only when named): the SFT with answer steps weighed up (SFT_ANSWERS) ->
  bench/runs/train/sft_answers/, compared on the own-tools test half (bench/own_tools.py's arms
  sft_answers_direct, sft_answers_answer).
- sft_checkpoints (only when named): the pipeline's SFT again with a save every SFT_CHECKPOINT_EVERY
  steps -> bench/runs/train/sft_checkpoints/checkpoint-*/ (not committed), the folder whose first-token
  trajectory bench/diagnose_ii.py plots (the sft run saves twice, too few points for a curve).
- grpo_answers (only when named): GRPO with the same settings from the sft_answers adapter ->
  bench/runs/train/grpo_answers/ (the pipeline's grpo starts from the JSON SFT, which never answers).
- adopt_data, adopt_sft, adopt_dpo, adopt_dpo_base, adopt_choose (only when named; `--stages
  adopt_data,adopt_sft,adopt_dpo,adopt_choose`): the checkpoint a user can adopt (ADOPT_* below) ->
  train/data/adopt_steps, bench/runs/train/adopt_sft/ and adopt_dpo/ (probe.jsonl and probe.png with
  the task probe's curve, best/ the chosen checkpoint); adopt_choose applies kate.train.adopt's rule
  (the better best/ by the task probe, adopted only if it beats the untrained model) into
  bench/runs/train/adopt.json, which bench/full.py's `adopt` arm runs on the full test half.
- eval: the slice of bench/bfcl.py (the first 8 test-half entries of every single-turn category and
  30 multi_turn_base dialogues) for the trained model (llama.cpp + the LoRA adapter, the untrained
  model's cost) in the direct and KATE (st_w8v) arms, into bench/runs/train/<arm>/ (the untrained
  arms are bench/runs/direct and bench/runs/st_w8v); the own-tools test half for the direct arms
  (bench/bench_train_eval.py says why), into bench/runs/train/<arm>/own_tools.
- report: bench/results/train_cpu.json and .md, with n and intervals.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from kate.train.adopt import choose_adapter  # noqa: E402
from kate.train.eval_arms import eval_plan, finished  # noqa: E402
from kate_job import run_kate, stop_on_sigterm  # noqa: E402  (bench/kate_job.py)

RUNS = ROOT / "bench" / "runs" / "train"
DATA = "train/data/bench_steps"
CATEGORIES = ["simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
              "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
              "live_irrelevance", "multi_turn_base"]
MAX_LENGTH = 2048
# call_format=json: the template's call token <tool_call> is one added token this model never writes untrained
# (it writes a ```json fence or bare JSON); 30 SFT steps with adapters on attention left p(<tool_call>) at 1e-6
# on a training example while every other target token was learned (bench/runs/train/sft_template/README.md),
# and TRL 1.16 refuses an adapter on lm_head (its fused LM head reads lm_head.weight directly)
CALL_FORMAT = "call_format=json"
SFT = ["pack=step", f"max_length={MAX_LENGTH}", "max_steps=30", "gradient_accumulation_steps=4", "save_steps=15",
       "lora.r=8", "lora.alpha=16", CALL_FORMAT, "threads=2", "probe.held_out=8", "probe.replay=4",
       "probe.near_miss=4", "probe.max_tokens=64"]
# sft_answers: the same SFT with every answer step shown 10 times. The SFT part is 15% answer steps (218 of
# 1,427), but the 2,048-token cut leaves 15 of 876 (all own-tools; the multi-turn answers have ~5k-token
# prompts), and the model trained on that never ended a turn by itself (0 of 32 on the own-tools test half);
# 10 copies restore the 15% (150 of 1,011). Chosen from the data's counts, not from any test result.
SFT_ANSWERS = [*SFT, "kind_repeats.answer=10"]
# GRPO: one prompt's group of 4 per optimizer step, one completion per forward: on CPU TRL 1.16 scores every
# position of a forward in one chunk of 32,768 tokens, so 4 completions of a 2,048-token prompt (~5 GB of
# logits, several copies) were killed for memory at 24 GiB; a batch of 4 x 1 forward is the same step.
# Learning rate 2e-5, 10x below SFT's 2e-4 (TRL's 1e-6 default is for full fine-tuning; a LoRA adapter at
# 5e-6 would barely move in 30 steps); set before any GRPO result existed.
GRPO = [f"max_prompt_tokens={MAX_LENGTH}", "max_steps=30", "save_steps=10", "num_generations=4",
        "per_device_train_batch_size=1", "gradient_accumulation_steps=4", "max_completion_length=96",
        "learning_rate=2e-5", "threads=2", "lora.r=8", "lora.alpha=16", "probe.held_out=8", "probe.replay=4",
        "probe.near_miss=4", "probe.max_tokens=64"]
# adopt_*: the checkpoint a user can adopt (a long run, probed at every save; train/README.md, "The adopted
# checkpoint"). The data: every category above plus own-tools answers, with Hammer-style function masking in
# 30% of dialogues (a share set before any run, not tuned); the SFT of sft_answers (the settings that answered
# on own tools) for 8x the steps, a save and a task probe every 20 steps; the checkpoint kept is the task
# probe's best mean (held-out training-half items: own tools, irrelevance, live_irrelevance, simple_python,
# multiple); then DPO from it on the same SFT part (the RL part stays held out for the probe), calls in the
# same JSON form, a wrong call / a call where none is due / another call instead of the answer rejected.
ADOPT_DATA = "train/data/adopt_steps"
ADOPT_MASKING = "masking.share=0.3"
# The first adopt SFT ran at sft_answers' 2e-4 for 240 planned steps (its record: bench/runs/train/
# adopt_sft_lr2e-4/): the task probe swung from always calling (step 20: irrelevance 0/8) to never calling
# (step 40: simple_python 0/8) while the loss fell, so the learning rate is 4x lower, the run 160 steps (as
# far as 2 cores reach in a session), and 12 items per category to tell the saves apart. Chosen on that
# curve (held-out training-half items), before any test-half figure of an adopt checkpoint existed.
ADOPT_PROBE = ["probe.held_out=8", "probe.replay=4", "probe.near_miss=4", "probe.max_tokens=64", "probe.per_task=12",
               "probe.task_max_steps=4", "probe.task_max_tokens=128"]
ADOPT_SFT = [*[a for a in SFT_ANSWERS if not a.startswith(("max_steps=", "save_steps=", "learning_rate=", "probe."))],
             "learning_rate=5e-5", "max_steps=160", "save_steps=20", "save_total_limit=2", *ADOPT_PROBE]
# DPO: 60 steps of 4 pairs at 2e-5 (LoRA; 5e-6 would barely move it in 60 steps), beta 0.1: set before any
# DPO run, sized so that it and its 4 probes fit about one session on a 2-core AVX2 machine, where a probe of
# 60 items takes ~11 min and an SFT step ~63 s (the adopt SFT's log)
ADOPT_DPO = ["part=sft", CALL_FORMAT, f"max_length={MAX_LENGTH}", "max_steps=60", "save_steps=20",
             "save_total_limit=2", "gradient_accumulation_steps=4", "learning_rate=2e-5", "beta=0.1", "threads=2",
             *ADOPT_PROBE]
# adopt_dpo_base: the same DPO from the untrained model (no SFT before it). The adopt SFT's task probe fell at
# every save (mean 0.60 at step 0, 0.38 at step 60; irrelevance and live_irrelevance to 0), so no SFT checkpoint
# could be adopted; DPO moves the model only by the pairs' margins against the base itself as reference, so what
# it keeps of the base is what the probe already rewards. All three pair kinds (the right call against a wrong
# one balances the no-call pairs). Decided on that training-half curve, before any DPO result existed. A save
# and a probe every 10 steps (a step took 205 s on 2 AVX-512 cores, so a session's stop loses at most 10 steps).
ADOPT_DPO_BASE = [*[a for a in ADOPT_DPO if not a.startswith("save_steps=")], "save_steps=10"]
SFT_CHECKPOINT_EVERY = 5  # 6 checkpoints over the 30 steps: the trajectory's points
OWN_TOOLS_MAX_STEPS = 4  # as bench/results/own_tools_baseline.json: an untrained turn never stops calling


def kate(*args: str) -> None:
    run_kate(list(args), RUNS / ".hydra" / args[0])


def stage_data() -> None:
    if (ROOT / DATA / "kate-train-data.json").exists():
        print(f"data: {DATA} exists")
        return
    kate("train", "data", f"categories=[{','.join(CATEGORIES)}]", "own_tools_split=train", f"out_dir={DATA}")


def stage_sft() -> None:
    if not finished(RUNS / "sft"):
        kate("train", "sft", f"data_dir={DATA}", f"output_dir={RUNS / 'sft'}", *SFT)


def stage_sft_checkpoints() -> None:
    folder = RUNS / "sft_checkpoints"
    if not finished(folder):
        kate("train", "sft", f"data_dir={DATA}", f"output_dir={folder}",
             *[a for a in SFT if not a.startswith("save_steps=")], f"save_steps={SFT_CHECKPOINT_EVERY}")


def stage_sft_answers() -> None:
    if not finished(RUNS / "sft_answers"):
        kate("train", "sft", f"data_dir={DATA}", f"output_dir={RUNS / 'sft_answers'}", *SFT_ANSWERS)


def stage_grpo(name: str = "grpo", start: str = "sft") -> None:
    if not finished(RUNS / name):
        kate("train", "grpo", f"data_dir={DATA}", f"output_dir={RUNS / name}",
             f"init_adapter={RUNS / start / 'final'}", *GRPO)


def stage_adopt_data() -> None:
    """The data (regenerable, not committed) and a copy of its manifest, committed: what it holds."""
    manifest = ROOT / ADOPT_DATA / "kate-train-data.json"
    if manifest.exists():
        print(f"adopt_data: {ADOPT_DATA} exists")
    else:
        kate("train", "data", f"categories=[{','.join(CATEGORIES)}]", "own_tools_split=train", ADOPT_MASKING,
             f"out_dir={ADOPT_DATA}")
    (RUNS / "adopt_data.json").write_text(manifest.read_text())


def stage_adopt_sft() -> None:
    if not finished(RUNS / "adopt_sft"):
        kate("train", "sft", f"data_dir={ADOPT_DATA}", f"output_dir={RUNS / 'adopt_sft'}", *ADOPT_SFT)


def stage_adopt_dpo() -> None:
    """DPO from the SFT's chosen checkpoint (best/: the task probe's best mean)."""
    start = RUNS / "adopt_sft" / "best"
    if not finished(RUNS / "adopt_sft") or not (start / "adapter_config.json").exists():  # best/ is final only then
        raise SystemExit(f"adopt_dpo: {RUNS / 'adopt_sft'} has not finished (run --stages adopt_sft first)")
    if not finished(RUNS / "adopt_dpo"):
        kate("train", "dpo", f"data_dir={ADOPT_DATA}", f"output_dir={RUNS / 'adopt_dpo'}", f"init_adapter={start}",
             *ADOPT_DPO)


def stage_adopt_dpo_base() -> None:
    """DPO from the untrained model (ADOPT_DPO_BASE says why)."""
    if not finished(RUNS / "adopt_dpo_base"):
        kate("train", "dpo", f"data_dir={ADOPT_DATA}", f"output_dir={RUNS / 'adopt_dpo_base'}", *ADOPT_DPO_BASE)


def stage_adopt_choose() -> None:
    """The adapter a user adopts (kate.train.adopt's rule over the finished runs' best/: adopt_sft,
    adopt_dpo, adopt_dpo_base; or none) into bench/runs/train/adopt.json, which bench/full.py's ``adopt``
    arm runs. A run that has not finished is left out (its best/ may still change), and said so."""
    runs = {n: RUNS / n for n in ("adopt_sft", "adopt_dpo", "adopt_dpo_base")}
    done = {n: f for n, f in runs.items() if finished(f)}
    for name in runs.keys() - done.keys():
        print(f"adopt_choose: {name} left out: it has not finished ({runs[name]})")
    if not done:
        raise SystemExit("adopt_choose: no adopt run has finished")
    choice = choose_adapter(done)
    choice = {**choice, "adapter": choice["adapter"] and str(Path(choice["adapter"]).relative_to(ROOT)),
              "candidates": {n: {**c, "adapter": str(Path(c["adapter"]).relative_to(ROOT))}
                             for n, c in choice["candidates"].items()}}
    path = RUNS / "adopt.json"
    if path.exists() and json.loads(path.read_text())["chosen"] != choice["chosen"]:
        raise SystemExit(f"{path}: it chose {json.loads(path.read_text())['chosen']}, now {choice['chosen']}: "
                         "the adopt arm's records are of the first; remove the file and bench/runs/full/adopt to redo")
    path.write_text(json.dumps(choice, indent=1) + "\n")
    print(json.dumps(choice, indent=1))


def stage_eval(which: list[str], adapter_stage: str | None, parts: tuple[str, ...]) -> None:
    """The arms on the pipeline's adapter into bench/runs/train/<arm>/, or on another stage's into
    bench/runs/train/<arm>_<stage>/ (``kate.train.eval_arms.eval_plan``)."""
    from bench_train_eval import run_arms  # noqa: PLC0415  (bench/bench_train_eval.py)

    arms, adapter, suffix = eval_plan(which, adapter_stage, RUNS)
    run_arms(arms, adapter, own_tools_max_steps=OWN_TOOLS_MAX_STEPS, suffix=suffix, parts=parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stages", default="data,sft,grpo,eval,report")
    parser.add_argument("--arms", default="untrained_direct,trained_direct,untrained_kate,trained_kate",
                        help="eval arms, in this order")
    parser.add_argument("--adapter", default=None, help="eval: the trained arms on this stage's adapter "
                        "(e.g. sft_answers) into bench/runs/train/<arm>_<stage>/; default: the pipeline's")
    parser.add_argument("--parts", default="own_tools,bfcl", help="eval: which tasks (own_tools, bfcl)")
    args = parser.parse_args()
    stop_on_sigterm()
    stages = args.stages.split(",")
    for stage in stages:
        if stage == "data":
            stage_data()
        elif stage == "sft":
            stage_sft()
        elif stage == "sft_checkpoints":
            stage_sft_checkpoints()
        elif stage == "sft_answers":
            stage_sft_answers()
        elif stage == "grpo":
            stage_grpo()
        elif stage == "grpo_answers":
            stage_grpo("grpo_answers", start="sft_answers")
        elif stage == "adopt_data":
            stage_adopt_data()
        elif stage == "adopt_sft":
            stage_adopt_sft()
        elif stage == "adopt_dpo":
            stage_adopt_dpo()
        elif stage == "adopt_dpo_base":
            stage_adopt_dpo_base()
        elif stage == "adopt_choose":
            stage_adopt_choose()
        elif stage == "eval":
            stage_eval(args.arms.split(","), args.adapter, tuple(args.parts.split(",")))
        elif stage == "report":
            from bench_train_report import write_report  # noqa: PLC0415

            print(json.dumps(write_report(), indent=1)[:2000])
        else:
            raise SystemExit(f"unknown stage {stage!r}")


if __name__ == "__main__":
    main()

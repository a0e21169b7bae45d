"""The arms of the own-tools benchmark (bench/own_tools.py, ``kate.tasks.own_tools``): per arm the
sampler and the loop keys that make it, composed as ``kate eval categories=[own_tools] split=<split>
sampling=<s>`` composes them, and where each split's runs and results go (another model's apart)."""

from __future__ import annotations

from pathlib import Path

from collections.abc import Mapping, Sequence
from typing import Any

from kate.eval.arms import compose_arm as kate_compose_arm
from kate.eval.model_folders import is_default, model_folder, model_overrides
from kate.eval.report import sign_test, wilson

TURN_END = ["repeat_policy=answer", "repeat_match=fed", "answer_at_max_steps=true"]
ARMS = {"direct": ("greedy", []), "w8v": ("width", []), "direct_answer": ("greedy", TURN_END),
        "direct_answer_exact": ("greedy", ["repeat_policy=answer", "answer_at_max_steps=true"]),
        "st_answer": ("greedy", [*TURN_END, "arm=own_tools_st"]),
        # the SFT adapters: targets as the template writes calls (<tool_call>; its records were made when the
        # adapter lay in bench/runs/train/sft/), then as JSON (call_format=json, bench/train_cpu.py)
        "sft_template_answer": ("greedy", [*TURN_END, "+llm.lora=bench/runs/train/sft_template/final/adapter.gguf"]),
        "sft_answer": ("greedy", [*TURN_END, "+llm.lora=bench/runs/train/sft/final/adapter.gguf"]),
        "sft_direct": ("greedy", ["+llm.lora=bench/runs/train/sft/final/adapter.gguf"]),
        # GRPO's adapter (30 steps from the json SFT adapter, bench/train_cpu.py) with the turn-end options
        "grpo_answer": ("greedy", [*TURN_END, "+llm.lora=bench/runs/train/grpo/final/adapter.gguf"]),
        # the SFT with answer steps shown 10 times (bench/train_cpu.py --stages sft_answers)
        "sft_answers_direct": ("greedy", ["+llm.lora=bench/runs/train/sft_answers/final/adapter.gguf"]),
        "sft_answers_answer": ("greedy", [*TURN_END, "+llm.lora=bench/runs/train/sft_answers/final/adapter.gguf"]),
        # GRPO from that adapter (bench/train_cpu.py --stages grpo_answers)
        "grpo_answers_direct": ("greedy", ["+llm.lora=bench/runs/train/grpo_answers/final/adapter.gguf"]),
        # that adapter with its base model deciding whether to call at a turn's start (conf/arm/grpo_gated.yaml),
        # with the turn-end options (a policy's defaults); _tuned: the base's malformed call left to the adapter
        "grpo_gated_answer": ("greedy", [*TURN_END, "arm=grpo_gated"]),
        "grpo_gated_tuned_answer": ("greedy", [*TURN_END, "arm=grpo_gated", "llm.base_malformed=tuned"]),
        # the gate, the base also asked in the Python form where the call-count predictor expects several calls
        # (conf/arm/grpo_gated_forms.yaml); then kate's default model, which adds the tool-relevance gate
        # (conf/arm/default_model.yaml, conf/llm/default.yaml)
        "forms_answer": ("greedy", [*TURN_END, "arm=grpo_gated_forms"]),
        "default_answer": ("greedy", [*TURN_END, "arm=default_model"])}  # fmt: skip
# under the benchmark folder (bench/): the default model's runs and results files
RUNS = {"train": Path("runs/own_tools"), "test": Path("runs/own_tools/test")}
RESULT = {"train": Path("results/own_tools_baseline.json"), "test": Path("results/own_tools_test.json")}
# max_steps=4 (kate eval's default is 20): room for two calls, an answer and one more; a model that never
# answers spends its steps on new calls (10 km -> m, then 10000 km -> m, ...), 20 of them ~4 minutes
# a question on 2 CPU cores.
# the arm every other is paired against: the untrained model with the loop's turn-end settings
PAIRED_AGAINST = "direct_answer"
OVERRIDES = ["llm.n_ctx=8192", "llm.max_parallel=8", "max_steps=4", "categories=[own_tools]", "limit=null"]


def places(split: str, model: str | None, bench: Path) -> tuple[Path, Path]:
    """(run folders, results file) of a split under ``bench``: the default model's RUNS and RESULT,
    another model's under runs/models/<name>/own_tools/ and results/models/<name>/own_tools_<split>.json."""
    if is_default(model):
        return bench / RUNS[split], bench / RESULT[split]
    runs = model_folder(bench / "runs", model) / "own_tools"
    result = model_folder(bench / "results", model) / f"own_tools_{split}.json"
    return (runs if split == "train" else runs / "test"), result


def compose_arm(arm: str, split: str, model_name: str | None = None, *, conf_dir: str | Path) -> dict:
    """The arm's resolved config, as ``kate eval categories=[own_tools] split=<split> sampling=<s>`` plus
    the arm's loop keys composes it (``llm.model=<model_name>`` when another model is named)."""
    sampling, loop = ARMS[arm]
    overrides = [f"sampling={sampling}", f"name={arm}", f"split={split}", *OVERRIDES, *loop, *model_overrides(model_name)]
    return kate_compose_arm(None, overrides, conf_dir=conf_dir)


def paired_answers(base: Sequence[Mapping[str, Any]], arm: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """An arm's right final answers against ``base``'s on the questions both answered: n, each side's right
    count, fixed (wrong -> right) and broken (right -> wrong), the exact sign test's p, and the arm's
    share with its 95% Wilson interval (percent)."""
    mine = {r["id"]: bool(r.get("answer_ok")) for r in arm}
    theirs = {r["id"]: bool(r.get("answer_ok")) for r in base}
    common = sorted(set(mine) & set(theirs))
    right = sum(mine[i] for i in common)
    fixed = sum(mine[i] and not theirs[i] for i in common)
    broken = sum(theirs[i] and not mine[i] for i in common)
    low, high = wilson(right, len(common))
    return {"n": len(common), "base_right": sum(theirs[i] for i in common), "arm_right": right, "fixed": fixed,
            "broken": broken, "p": round(sign_test(fixed, broken), 4),
            "arm_share_pct": round(100 * right / max(len(common), 1), 1),
            "wilson_pct": [round(100 * low, 1), round(100 * high, 1)]}  # fmt: skip

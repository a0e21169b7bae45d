"""Typed settings of the training jobs (``kate train data | sft | grpo | dpo``). Every field has help text,
as TRL's config dataclasses do; Hydra checks the YAML against these schemas, so a typo fails at start.

The trainer settings are kate's, not TRL's: ``sft_args`` / ``grpo_args`` turn them into TRL's
``SFTConfig`` / ``GRPOConfig`` with the CPU-relevant choices spelled out (bf16, gradient
checkpointing), and ``trl_overrides`` passes any other TRL field through unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from omegaconf import MISSING

JOBS = ("data", "sft", "grpo", "dpo", "verifier")  # kate train <job>


def help_field(text: str, default: Any = MISSING, factory: Any = None) -> Any:
    if factory is not None:
        return field(default_factory=factory, metadata={"help": text})
    return field(default=default, metadata={"help": text})


@dataclass
class AnswerWriterConfig:
    """Who writes the final answers BFCL's data does not hold (the step after a turn's last call)."""

    llm: Any = help_field("the writer's model client (conf/llm/: the local engine by default, llm=openai for a stronger one)")
    max_tokens: int = help_field("tokens of one written answer", 96)
    result_chars: int = help_field("characters of each tool result shown to the writer", 600)
    cache: str = help_field("JSONL cache of written answers, keyed by content hash (a rebuild re-asks nothing)",
                            "knowledge_bases/train_answers.jsonl")


@dataclass
class DistractorConfig:
    rate: float = help_field("share of steps whose knowledge gets foreign examples (functions the tools do not offer)", 0.2)
    count: int = help_field("foreign examples added to such a step", 1)
    threshold: float = help_field("cosine a foreign example must reach to the request (plausible, not random)", 0.3)


@dataclass
class MaskingConfig:
    """Hammer-style function masking (``kate.train.masking``): names replaced, descriptions kept."""

    share: float = help_field("share of dialogues (by a seeded hash of the id) whose function and parameter names "
                              "become random strings in tools, prompt and target (0: none, the dataset as before)", 0.0)
    seed: int = help_field("which dialogues are masked and the strings they get", 0)


@dataclass
class DataConfig:
    """``kate train data``: one example per assistant step of BFCL's training halves and of trajectory files."""

    model: str = help_field("the model trained: its chat template renders the steps, its tokenizer counts them",
                            "qwen2.5-coder-0.5b-instruct-q4_k_m")
    knowledge: Any = help_field("retrieval per entry kind, as the evaluated arm injects it (conf/retrieval/); null: none", None)
    categories: List[str] = help_field("BFCL-V3 categories whose training halves (even indices) are read "
                                       "(irrelevance and live_irrelevance give no_call steps)",
                                       factory=lambda: ["simple_python", "multiple", "parallel", "parallel_multiple",
                                                        "irrelevance", "multi_turn_base"])
    limit: Optional[int] = help_field("entries per category (null: the whole training half)", None)
    trajectories: List[str] = help_field("trajectory JSONL files kate's loop (or a user) wrote, read too", factory=list)
    own_tools_split: Optional[str] = help_field("the own-tools task's half to add (train; never test); null: none", None)
    system_prompt: Optional[str] = help_field("dialogue system prompt, as the evaluated arm uses: kate | none | text", "kate")
    writer: AnswerWriterConfig = help_field("final-answer writer", factory=AnswerWriterConfig)
    distractors: DistractorConfig = help_field("foreign examples in the knowledge", factory=DistractorConfig)
    masking: MaskingConfig = help_field("function and parameter names masked in a share of dialogues",
                                        factory=MaskingConfig)
    no_call_answer: str = help_field("target text of a step whose ground truth is no call (single-turn)",
                                     "None of the available functions can do this, so I cannot make a call for it.")
    rl_share: float = help_field("share of dialogues/entries for the RL (GRPO) part; the rest is SFT (KATE: 0.5)", 0.5)
    seed: int = help_field("split and distractor seed", 0)
    out_dir: str = help_field("where the dataset (datasets' save_to_disk) and its manifest go", "train/data/bfcl_steps")


@dataclass
class LoraConfig:
    enabled: bool = help_field("train a LoRA adapter (peft); false: full fine-tuning", True)
    r: int = help_field("LoRA rank", 16)
    alpha: int = help_field("LoRA alpha (scale alpha / r)", 32)
    dropout: float = help_field("LoRA dropout", 0.05)
    target_modules: List[str] = help_field("modules that get adapters",
                                           factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


CALL_FORMAT_HELP = ("how a call step's target is written: template (the chat template's own, <tool_call> blocks "
                    "for Qwen) | json (the call as a JSON object, several as a list: what Qwen2.5-Coder writes "
                    "untrained; kate's parsers read both)")


@dataclass
class ProbeConfig:
    enabled: bool = help_field("probe the model at every save (first-token probe, replay, near-miss)", True)
    held_out: int = help_field("decision points from the held-out (RL) half for the first-token probe", 24)
    replay: int = help_field("training rows replayed greedily at each save", 12)
    near_miss: int = help_field("near-miss prompts (tool words, no call due) at each save", 12)
    max_tokens: int = help_field("tokens of one greedy replay", 96)
    tasks: List[str] = help_field(
        "task probe: categories whose held-out training-half items the model solves at each save (BFCL "
        "categories, own_tools); its best mean picks output_dir/best; [] for none",
        factory=lambda: ["own_tools", "irrelevance", "live_irrelevance", "simple_python", "multiple"])
    per_task: int = help_field("task probe: items per category (a seeded sample of the held-out part's)", 8)
    task_max_steps: int = help_field("task probe: model steps per turn (an own-tools question needs 2-3)", 4)
    task_max_tokens: int = help_field("task probe: tokens per model step", 256)
    task_engine: str = help_field("task probe: llamacpp (the checkpoint's adapter on llama.cpp, as users run it; "
                                  "quantized, items decoded together) | hf (the model being trained, generating)", "llamacpp")
    task_workers: int = help_field("task probe: items in flight on llama.cpp (decoded together)", 4)


@dataclass
class TrainingLoopConfig:
    """The trainer loop's settings every kate training job takes (TRL's names)."""

    max_steps: int = help_field("optimizer steps (-1: num_train_epochs)", 200)
    num_train_epochs: float = help_field("epochs when max_steps is -1", 1.0)
    gradient_accumulation_steps: int = help_field("forwards per optimizer step", 4)
    save_total_limit: int = help_field("checkpoints kept", 3)
    logging_steps: int = help_field("log metrics every this many steps", 5)
    bf16: bool = help_field("bf16 mixed precision (a GPU choice; false on CPU)", False)
    gradient_checkpointing: bool = help_field("recompute activations (saves memory, costs time; off on CPU)", False)
    use_cpu: bool = help_field("train on the CPU even when a GPU is visible", False)
    dtype: str = help_field("weights' dtype when loading (float32 on CPU; bfloat16 on GPU)", "float32")
    threads: Optional[int] = help_field("torch threads (null: torch's default)", None)


@dataclass
class TrainerConfig(TrainingLoopConfig):
    """What the trainers on the step dataset share; TRL's names where TRL has the field."""

    model: str = help_field("the base model: a kate model name, a .gguf path, or an HF folder",
                            "qwen2.5-coder-0.5b-instruct-q4_k_m")
    data_dir: str = help_field("the dataset ``kate train data`` wrote", "train/data/bfcl_steps")
    part: str = help_field("which part of the dataset: sft | rl | all", "sft")
    output_dir: str = help_field("checkpoints (checkpoint-<step>/) and the final adapter", "train/runs/sft")
    init_adapter: Optional[str] = help_field("start from this trained adapter (GRPO after SFT); null: a new one", None)
    lora: LoraConfig = help_field("LoRA settings", factory=LoraConfig)
    learning_rate: float = help_field("peak learning rate", 2e-4)
    per_device_train_batch_size: int = help_field("examples per device per forward", 1)
    max_length: int = help_field("tokens of one example; longer ones are left out (and counted), never cut", 3072)
    save_steps: int = help_field("save (and probe) every this many steps", 50)
    seed: int = help_field("trainer seed", 0)
    merge: bool = help_field("after training, also write a merged HF folder (final-merged/)", False)
    gguf_adapter: bool = help_field("after training, also write the llama.cpp LoRA adapter (adapter.gguf)", True)
    probe: ProbeConfig = help_field("the checkpoint probe", factory=ProbeConfig)
    trl_overrides: Dict[str, Any] = help_field("any other TRL config field, passed through", factory=dict)


@dataclass
class SFTJobConfig(TrainerConfig):
    """``kate train sft``: SFTTrainer, loss on the completion (the assistant step) only."""

    pack: str = help_field("step: one example per step | dialogue: one per dialogue, loss on each of its steps "
                           "(the same loss terms, one forward pass per dialogue)", "dialogue")
    call_format: str = help_field(CALL_FORMAT_HELP + ". json packs no dialogue (the history keeps the template's "
                                  "form)", "template")
    kind_repeats: Dict[str, int] = help_field("copies of each example by its step kind, e.g. answer=4 to weigh up a "
                                              "rare kind; a packed dialogue takes its steps' largest",
                                              factory=lambda: {"call": 1, "no_call": 1, "answer": 1})


@dataclass
class GRPOJobConfig(TrainerConfig):
    """``kate train grpo``: GRPOTrainer, step-level, rule rewards against the step's ground truth."""

    num_generations: int = help_field("completions per prompt (the group)", 4)
    max_completion_length: int = help_field("tokens of one completion", 128)
    beta: float = help_field("KL coefficient against the reference (0: no reference model)", 0.0)
    loss_type: str = help_field("TRL's loss: grpo | dapo | dr_grpo | bnpo | ...", "dapo")
    temperature: float = help_field("sampling temperature of the group", 1.0)
    reward_weights: List[float] = help_field("weights of call_correct, format_valid, no_call_penalty",
                                             factory=lambda: [1.0, 0.2, 0.5])
    max_prompt_tokens: int = help_field("RL steps with longer prompts are left out (generation cost on CPU)", 2048)
    use_vllm: bool = help_field("generate with vLLM (GPU users; see train/README.md)", False)


@dataclass
class DPOJobConfig(TrainerConfig):
    """``kate train dpo``: DPOTrainer on preference pairs built from the step dataset (``kate.train.pairs``)."""

    part: str = help_field("which part of the dataset: sft | rl | all (the RL part by default, as GRPO)", "rl")
    output_dir: str = help_field("checkpoints (checkpoint-<step>/) and the final adapter", "train/runs/dpo")
    learning_rate: float = help_field("peak learning rate (DPO moves less than SFT)", 5e-6)
    pair_kinds: List[str] = help_field("step kinds that give pairs: call (a wrong call rejected), no_call (a call "
                                       "where none is due rejected), answer (another call instead of the answer)",
                                       factory=lambda: ["call", "no_call", "answer"])
    beta: float = help_field("DPO's beta: how far from the reference (the start: base or init_adapter) it moves",
                             0.1)
    loss_type: str = help_field("TRL's DPO loss: sigmoid | ipo | hinge | robust | ...", "sigmoid")
    call_format: str = help_field(CALL_FORMAT_HELP + ", for chosen and rejected alike (as the SFT it follows)",
                                  "template")
    precompute_ref_log_probs: bool = help_field("compute the reference's log-probabilities once before training", False)


@dataclass
class VerifierJobConfig(TrainingLoopConfig):
    """``kate train verifier``: TRL's RewardTrainer on (right, wrong) candidate pairs of width samples from
    run records, labelled by BFCL's official checker (``kate.train.verifier``, ``docs/verifier.md``)."""

    model: str = help_field("the base model: a kate model name, a .gguf path, or an HF folder (a scalar head is "
                            "added on it)", "qwen2.5-coder-0.5b-instruct-q4_k_m")
    records: List[str] = help_field("run records files (records.jsonl of width runs on BFCL training halves; a "
                                    "test-half id is refused)", factory=list)
    held_out: float = help_field("share of entries (a seeded hash of the id) kept out of training and measured at "
                                 "the end", 0.2)
    fold_seed: int = help_field("seed of the train / held-out split of entries", 0)
    max_pairs_per_entry: Optional[int] = help_field("(right, wrong) pairs kept per entry, a seeded choice (null: all)",
                                                    8)
    calibration_bins: int = help_field("equal-count bins of the held-out candidates' scores in the calibration", 10)
    output_dir: str = help_field("checkpoints (checkpoint-<step>/), final/ (the adapter and head), summary.json, "
                                 "held_out.json and calibration.png", "train/runs/verifier")
    lora: LoraConfig = help_field("LoRA settings (the scalar head is always trained whole)", factory=LoraConfig)
    learning_rate: float = help_field("peak learning rate", 1e-4)
    per_device_train_batch_size: int = help_field("pairs per device per forward", 1)
    max_length: int = help_field("tokens of one prompt + candidate; longer pairs are left out (and counted)", 3072)
    center_rewards_coefficient: Optional[float] = help_field("TRL's push of the scores' mean towards 0 (keeps "
                                                             "sigmoid(score) readable); null: none", 0.01)
    save_steps: int = help_field("save every this many steps", 50)
    seed: int = help_field("trainer seed (and the head's initialization)", 0)
    evaluate: bool = help_field("score the held-out fold at the end (pairwise accuracy, calibration)", True)
    trl_overrides: Dict[str, Any] = help_field("any other RewardConfig field, passed through", factory=dict)


def register() -> None:
    """The training jobs' schemas in Hydra's ConfigStore (``train_<job>_schema``)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    store.store(name="train_data_schema", node=DataConfig)
    store.store(name="train_sft_schema", node=SFTJobConfig)
    store.store(name="train_grpo_schema", node=GRPOJobConfig)
    store.store(name="train_dpo_schema", node=DPOJobConfig)
    store.store(name="train_verifier_schema", node=VerifierJobConfig)

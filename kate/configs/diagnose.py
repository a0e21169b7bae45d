"""``kate diagnose``'s schema: the knowing-doing diagnostics and their settings (``conf/diagnose.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, List, Optional

from kate.configs.knowledge import EmbedderSchema
from kate.configs.llm import HFSchema
from kate.eval.config import Split, help_field
from kate.toolcall.format import HERMES_CALL_START


class DiagnosticName(Enum):
    necessity = "necessity"
    breakdown = "breakdown"
    probes = "probes"
    pcall = "pcall"
    plan = "plan"
    gate = "gate"
    replay = "replay"
    near_miss = "near_miss"
    first_token = "first_token"
    trajectory = "trajectory"
    keyword = "keyword"
    toolsense = "toolsense"
    all = "all"


class ReplaySource(Enum):
    bfcl = "bfcl"
    dataset = "dataset"


class DiagnosticSet(Enum):
    arithmetic = "arithmetic"
    bfcl = "bfcl"
    user = "user"


class ActMode(Enum):
    turn = "turn"
    step = "step"


class PaddingSide(Enum):
    left = "left"
    right = "right"


class GateMode(Enum):
    soft = "soft"
    hard = "hard"


class PlanOrder(Enum):
    call_first = "call_first"
    no_call_first = "no_call_first"


@dataclass
class ArithmeticSetConfig:
    n: int = help_field("items generated (the families' shares of the authors' 4,000)", 1000)
    seed: int = help_field("generation seed", 0)
    families: Optional[List[str]] = help_field("families to draw from; null: all 13", None)


@dataclass
class BfclSetConfig:
    categories: List[str] = help_field("relevance / irrelevance categories (the need for a call is in the data)",
                                       factory=lambda: ["irrelevance", "live_irrelevance", "live_relevance"])
    split: Split = help_field("test (KATE's odd half) | train | all", Split.test)
    limit: Optional[int] = help_field("entries per category; null: all of the split", None)


@dataclass
class UserSetConfig:
    path: Optional[str] = help_field("the JSONL file (kate/diagnose/user_set.py says its format)", None)


@dataclass
class NecessityFields:
    samples: int = help_field("N: answers sampled per item without tools", 10)
    temperature: float = help_field("temperature of those answers", 0.7)
    max_tokens: int = help_field("token limit of each answer", 512)
    r: Optional[int] = help_field("unnecessary when right >= r of N; null: r = N (the paper)", None)
    report_r: List[int] = help_field("thresholds reported side by side (the authors' labels imply 9)",
                                     factory=lambda: [10, 9])
    stop_early: bool = help_field("stop an item once it is necessary at every reported r (2 wrong of 10 for r = 9, "
                                  "10): the same labels, fewer samples; its correct count a lower bound", False)
    cache_dir: Optional[str] = help_field("correct counts cached per model hash and set hash; null: no cache",
                                          "runs/diagnose/necessity_cache")


@dataclass
class ProbesFields:
    k: int = help_field("last K prompt tokens read at every layer", 20)
    layers: Optional[List[int]] = help_field("hidden-state indices (0 = embeddings); null: every layer", None)
    batch_size: int = help_field("prompts per forward pass", 8)
    padding_side: PaddingSide = help_field("left | right (both give the same states)", PaddingSide.left)
    epochs: int = help_field("the paper's probe: full-batch epochs", 100)
    lr: float = help_field("the paper's probe: Adam learning rate", 0.01)
    weight_decay: float = help_field("the paper's probe: Adam weight decay", 0.01)
    pos_weight: bool = help_field("the paper's probe: weight positives by n_neg / n_pos", False)
    train_fraction: float = help_field("share of items in the seeded training split (both probes)", 0.7)
    seed: int = help_field("seed of the split and of the probes", 42)
    threads: int = help_field("torch threads while a probe trains", 1)
    when2tool_C: float = help_field("When2Tool's probe: inverse regularisation", 1e-4)
    when2tool_max_iter: int = help_field("When2Tool's probe: lbfgs iterations", 2000)


@dataclass
class PcallFields:
    openings: Optional[List[str]] = help_field("call openings (e.g. ['<tool_call>']); null: detected from greedy calls", None)
    min_calls: int = help_field("detected openings: first tokens of at least this many greedy calls", 1)


@dataclass
class PlanFields:
    max_tokens: int = help_field("token limit of the plan reply", 256)
    order: PlanOrder = help_field("which reply form the plan instruction shows first: call_first (the default) | "
                                  "no_call_first, the control for a model that copies the last form shown "
                                  "(its run goes to plan_no_call_first/)", PlanOrder.call_first)


@dataclass
class GateFields:
    mode: GateMode = help_field("soft (prefill tool / no-tool text) | hard (prefill the call opening)", GateMode.soft)
    temperature: float = help_field("belief = sigmoid(probe logit / T) (When2Tool: T = 2)", 2.0)
    taus: List[float] = help_field("thresholds swept", factory=lambda: [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
    tau_high: Optional[float] = help_field("steer to a tool only at or above this; null: tau", None)
    held_out_only: bool = help_field("sweep only the items the probe did not train on", True)
    beliefs: Optional[str] = help_field("a JSON file {item id: belief} instead of the probes step's", None)
    no_tool_text: str = help_field("prefilled below tau", "I can answer this directly, without calling a tool. ")
    tool_text: str = help_field("prefilled above tau (soft mode)", "I need to call a tool for this.\n")
    call_opening: str = help_field("prefilled above tau (hard mode)", HERMES_CALL_START)


@dataclass
class ReplayFields:
    source: ReplaySource = help_field("bfcl (single-turn entries with ground truth) | dataset (a JSONL of rows)",
                                      ReplaySource.bfcl)
    categories: List[str] = help_field("BFCL categories with ground-truth calls",
                                       factory=lambda: ["simple_python", "multiple", "parallel", "parallel_multiple"])
    split: Split = help_field("test (KATE's odd half) | train | all", Split.test)
    limit: Optional[int] = help_field("entries per category (bfcl) or rows drawn (dataset); null: all", None)
    path: Optional[str] = help_field("source=dataset: the JSONL (kate/diagnose/replay.py says its formats)", None)


@dataclass
class NearMissFields:
    categories: List[str] = help_field("BFCL categories whose tool sets the templates use",
                                       factory=lambda: ["simple_python", "multiple"])
    split: Split = help_field("test | train | all", Split.test)
    limit: Optional[int] = help_field("tool sets per category; null: all", None)
    per_set: int = help_field("generated prompts per tool set", 1)
    irrelevance: List[str] = help_field("BFCL's own no-call categories added ([] for none)",
                                        factory=lambda: ["irrelevance", "live_irrelevance"])
    irrelevance_limit: Optional[int] = help_field("entries per irrelevance category; null: all", None)


@dataclass
class FirstTokenFields:
    openings: List[str] = help_field("call openings whose first-token mass is measured",
                                     factory=lambda: ["<tool_call>", "```", '{"'])
    batch_size: int = help_field("prompts per forward pass", 4)
    limit: Optional[int] = help_field("probe prompts of each of replay and near-miss; null: all", None)


@dataclass
class TrajectoryFields:
    folder: Optional[str] = help_field("a folder of checkpoints (checkpoint-<step>/ or HF model folders); "
                                       "null: the rung is skipped", None)
    probe_set: Optional[str] = help_field("a saved probe set JSONL; null: <out_dir>/first_token/probe_set.jsonl", None)
    device: str = help_field("where each checkpoint loads", "auto")
    dtype: str = help_field("its dtype", "float32")
    batch_size: int = help_field("prompts per forward pass", 4)


@dataclass
class KeywordFields:
    run: Optional[str] = help_field("a BFCL eval run folder (records.jsonl) to compare too; null: only the "
                                    "replay and near-miss records of out_dir", None)


@dataclass
class ToolSenseFields:
    catalogue: str = help_field("bfcl (BFCL's functions) or a JSONL of {name, description} / a JSON OpenAI tool list",
                                "bfcl")
    bfcl_categories: List[str] = help_field("catalogue=bfcl: the categories whose functions are taken",
                                            factory=lambda: ["simple_python", "simple_java", "simple_javascript",
                                                             "multiple", "parallel", "parallel_multiple", "irrelevance",
                                                             "live_simple", "live_multiple", "live_parallel",
                                                             "live_parallel_multiple", "live_irrelevance",
                                                             "live_relevance"])
    catalogue_limit: Optional[int] = help_field("the first n tools of the catalogue; null: all", None)
    embedder: Optional[EmbedderSchema] = help_field("the embedder of the index (a kate.knowledge.embedder.Embedder "
                                                    "node)", None)
    writer: Any = help_field("the client that writes the probes; null: llm", None)
    judge: Any = help_field("the client that judges the queries; null: the writer", None)
    cache: Optional[str] = help_field("the writer's answers by content hash; null: <out_dir>/toolsense/llm_cache.jsonl",
                                      None)
    queries_per_tier: int = help_field("queries kept per ambiguity tier (1, 2-3, 4+ tools)", 100)
    mcq: int = help_field("MCQ probes kept", 300)
    qa: int = help_field("yes/no QA probes kept (balanced)", 300)
    max_seeds: Optional[int] = help_field("seed tools tried at most; null: every name of the catalogue", None)
    attempts: int = help_field("writer attempts per probe (the next seed after a rejected answer)", 3)
    workers: int = help_field("seed tools written at once (concurrent requests: llama.cpp batches them); 1: one "
                              "by one. Which seed gets which tier or Yes/No depends on it, so the kept sets do too", 1)
    probes_from: str = help_field("who makes the MCQ and QA probes: llm (the writer, checked) or catalogue (the tool's "
                                  "own description against its farthest pool neighbours'; answers known by "
                                  "construction, no writer)", "llm")
    judge_mcq: bool = help_field("the judge must name exactly the correct option of an MCQ for it to be kept", True)
    temperature: float = help_field("the writer's temperature", 0.7)
    max_tokens: int = help_field("the writer's token limit", 256)
    show_pool: bool = help_field("selection prompts list the pool's names and descriptions (false: names "
                                 "from the model's own knowledge)", True)
    ks: List[int] = help_field("k of recall@k and NDCG@k", factory=lambda: [1, 3, 5])


@dataclass
class DiagnoseConfig:
    llm: Any = help_field("the model client that acts (conf/llm/); the gate needs one that takes prefill (llamacpp)")
    hf: Optional[HFSchema] = help_field("the hf client hidden states and logits come from (conf/llm/hf.yaml's keys); "
                                        "null: none", None)
    name: DiagnosticName = help_field("necessity | breakdown | probes | pcall | plan | gate | replay | near_miss | "
                                      "first_token | trajectory | keyword | toolsense | all (+ report)",
                                      DiagnosticName.all)
    skip: List[DiagnosticName] = help_field("diagnostics name=all leaves out", factory=list)
    set: DiagnosticSet = help_field("arithmetic | bfcl | user", DiagnosticSet.arithmetic)
    arithmetic: ArithmeticSetConfig = help_field("the generated arithmetic set", factory=ArithmeticSetConfig)
    bfcl: BfclSetConfig = help_field("BFCL's relevance / irrelevance entries", factory=BfclSetConfig)
    user: UserSetConfig = help_field("a user's own JSONL set", factory=UserSetConfig)
    act: ActMode = help_field("turn (calls run, the final answer checked) | step (the first decision only)", ActMode.turn)
    max_tokens: int = help_field("token limit of each greedy step", 256)
    max_steps: int = help_field("model steps per turn (act=turn)", 5)
    necessity: NecessityFields = help_field("model-adaptive necessity", factory=NecessityFields)
    probes: ProbesFields = help_field("hidden-state probes (the paper's and When2Tool's)", factory=ProbesFields)
    pcall: PcallFields = help_field("P(call) at the decision point", factory=PcallFields)
    plan: PlanFields = help_field("plan vs execute", factory=PlanFields)
    gate: GateFields = help_field("the probe-triggered gate and its tau sweep", factory=GateFields)
    replay: ReplayFields = help_field("verbatim replay of rows with a known answer", factory=ReplayFields)
    near_miss: NearMissFields = help_field("near-miss negatives (tool words, no call needed)", factory=NearMissFields)
    first_token: FirstTokenFields = help_field("the first-token probe over replay + near-miss", factory=FirstTokenFields)
    trajectory: TrajectoryFields = help_field("the first-token probe over a folder of checkpoints",
                                              factory=TrajectoryFields)
    keyword: KeywordFields = help_field("strict vs keyword scoring on stored records", factory=KeywordFields)
    toolsense: ToolSenseFields = help_field("ToolSense's tool-knowledge probes", factory=ToolSenseFields)
    seed: int = help_field("sampling seed", 0)
    workers: int = help_field("items in parallel (a local engine decodes them together)", 1)
    progress: bool = help_field("progress bars", True)
    out_dir: Optional[str] = help_field("<out_dir>/<diagnostic>/ result folders, report.md and its PNGs; "
                                        "null: runs/diagnose/<set>", None)

"""Schemas of the model clients (``conf/llm/``), one per client class. Written out rather than read
from the classes (``target_schema``) so that composing a config imports no engine (transformers
alone takes seconds); a test checks each against its class's parameters. Fields are unset (``???``)
by default: what a YAML leaves out is not passed, the client's own default applies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

from omegaconf import MISSING

from kate.configs.targets import Number
from kate.retrieval.relevance import TAU as RELEVANCE_TAU
from kate.eval.config import help_field

NAME_HELP = "the model's name in records and reports; null: derived from the model (file, hash, adapter)"
FORMATS_HELP = "call formats parsed from the text, in order (hermes, json, python, python_list, ...)"
TOOL_PROMPT_HELP = ("how the tools are shown and calls written: native (the chat template's tool block) | "
                    "python (BFCL's prompt-mode system prompt, calls as a Python list, parsed as python_list) | "
                    "both (llama.cpp: both asked, the Python reply where it makes 2+ calls); default native")


def unset(text: str) -> Any:
    return help_field(text, MISSING)


@dataclass
class SeveralCallsSchema:
    _target_: str = help_field("the gate class", "kate.retrieval.call_count.SeveralCallsGate")
    kb: str = help_field("the knowledge base whose single-turn ST entries fit the call-count predictor", MISSING)
    p: float = help_field("the predicted chance of several calls at which the gate opens", 0.5)


@dataclass
class ToolRelevanceSchema:
    _target_: str = help_field("the gate class", "kate.retrieval.relevance.ToolRelevanceGate")
    tau: float = help_field("the best request-to-tool cosine similarity at which a tool may fit", RELEVANCE_TAU)
    model: str = help_field("the sentence embedder (a kate model name or a local folder)", "all-minilm-l6-v2")


@dataclass
class LlamaCppSchema:
    _target_: str = help_field("the client class", "kate.llm.llamacpp.LlamaCppChatModel")
    model: str = unset("a kate model name (`kate models list`) or a .gguf path")
    name: Optional[str] = unset(NAME_HELP)
    n_ctx: int = unset("context window in tokens (default 8192; Qwen2.5-Coder's full window: 32768)")
    kv_cells: Optional[int] = unset("KV cells shared by the requests in flight and the idle prefix caches "
                                    "(>= n_ctx; null: n_ctx)")
    n_threads: Optional[int] = unset("threads of one-token decoding; null: half the cores")
    n_threads_batch: Optional[int] = unset("threads of prefill and width-N batches; null: all cores")
    n_threads_step: Optional[int] = unset("threads of a batched decode step; null: the engine's choice")
    n_batch: int = unset("prompt tokens per llama.cpp batch (default 512)")
    max_parallel: int = unset("most sequences decoded together (width N); larger N runs in rounds (default 16)")
    min_prefill_tokens: int = unset("shortest prompt suffix prefilled on its own (default 1)")
    chat_template: Optional[str] = unset("a Jinja chat template instead of the GGUF's own; null: the GGUF's")
    formats: List[str] = unset(FORMATS_HELP + "; default: the tool prompt's")
    tool_prompt: str = unset(TOOL_PROMPT_HELP)
    verbose: bool = unset("llama.cpp's own load and decode logs (default false)")
    lora: Optional[str] = unset("a llama.cpp LoRA adapter .gguf or a PEFT adapter folder (converted once to "
                                "<folder>/adapter.gguf); null: none")
    lora_scale: Number = unset("the adapter's strength (1.0: as trained, PEFT's lora_alpha / r)")
    several_calls: Optional[SeveralCallsSchema] = unset(
        "tool_prompt=both: a gate on the request that must also expect several calls for the Python reply to be "
        "kept (kate.retrieval.call_count.SeveralCallsGate); null: none")


@dataclass
class HFSchema:
    _target_: str = help_field("the client class", "kate.llm.hf.HFChatModel")
    model: Optional[str] = unset("kate model name, .gguf path, HF folder, or hub id (needs allow_hub)")
    name: Optional[str] = unset(NAME_HELP)
    device: str = unset("auto | cpu | cuda | cuda:1 ...")
    dtype: str = unset("float32 on CPU; bfloat16 / float16 on GPU")
    allow_hub: bool = unset("may download from the hub (kate never downloads by default)")
    formats: List[str] = unset(FORMATS_HELP)
    merge: bool = unset("a PEFT adapter folder as `model`: merge it into the weights at load (kate.llm.lora)")
    tool_prompt: str = unset(TOOL_PROMPT_HELP)


@dataclass
class OpenAISchema:
    _target_: str = help_field("the client class", "kate.llm.openai.OpenAIChatModel")
    model: str = unset("the model id the server serves")
    base_url: Optional[str] = unset("the server's /v1 URL; null: OpenAI's")
    api_key_env: str = unset("environment variable holding the API key (any value for local servers)")
    name: Optional[str] = unset(NAME_HELP)
    max_concurrency: int = unset("parallel single requests when the server ignores or refuses n > 1")
    timeout: Number = unset("seconds per request")
    max_retries: int = unset("retries on 429, 5xx, timeouts and dropped connections, with exponential backoff; then "
                             "the item is an explicit failure record that the same command redoes")
    backoff: Number = unset("seconds before the first retry, doubled each time (with up to 50% jitter)")
    tool_choice: Any = unset('null | auto | required | {"type": "function", ...}')
    extra_body: Any = unset("extra fields sent in every request body (a mapping); null: none")
    formats: List[str] = unset(FORMATS_HELP)


@dataclass
class FakeSchema:
    _target_: str = help_field("the client class", "kate.llm.fake.FakeChatModel")
    script: List[Any] = unset("the answers, one per chat call: a string, or a list of n strings")
    name: str = unset("the model's name in records")
    repeat_last: bool = unset("repeat the last answer when the script runs out (false: the call fails)")
    formats: List[str] = unset(FORMATS_HELP)
    options: List[str] = unset("extra chat() keywords it claims to take (prefill: answers start with the prefill)")


@dataclass
class BriefReasoningSchema(LlamaCppSchema):
    """The llama.cpp client's settings plus the thought's (kate.llm.brief_llamacpp)."""

    _target_: str = help_field("the client maker: a llama.cpp client wrapped in BriefReasoning",
                               "kate.llm.brief_llamacpp.brief_llamacpp")
    budget: int = unset("most tokens of the thought before each answer (default 32)")
    opener: str = unset("the text the thought starts with (default '<think>\\n')")
    closer: str = unset("the text that ends the thought; its stripped text stops it (default '\\n</think>\\n')")


@dataclass
class BaseGatedSchema(LlamaCppSchema):
    """The llama.cpp client's settings; ``lora`` is the adapter whose calls the base model gates
    (kate.llm.base_gated_llamacpp)."""

    _target_: str = help_field("the client maker: a llama.cpp client on an adapter, gated by the base model",
                               "kate.llm.base_gated_llamacpp.base_gated_llamacpp")
    base_malformed: str = unset("a malformed call of the base at a turn's start: keep (a reply with no call, kept) | "
                                "tuned (an attempt: the adapter's reply); default keep")
    base_tool_prompt: Optional[str] = unset(
        "the base model's own tool prompt (null: tool_prompt): both asks it in BFCL's Python form too where "
        "base_several_calls expects several calls, and its reply with several calls stands against an adapter "
        "reply with fewer")
    base_several_calls: Optional[SeveralCallsSchema] = unset(
        "the base's own several-calls gate (kate.retrieval.call_count.SeveralCallsGate); null: several_calls")
    tools_fit: Optional[ToolRelevanceSchema] = unset(
        "a gate on the request and the offered tools (kate.retrieval.relevance.ToolRelevanceGate): where it says "
        "no tool fits, at a turn's start, the base model answers without tools; null: none")


# option of conf/llm/ -> its schema (stored as llm/<option>_schema); the class each one types
SCHEMAS = {"llamacpp": LlamaCppSchema, "hf": HFSchema, "openai": OpenAISchema, "fake": FakeSchema,
           "brief_reasoning": BriefReasoningSchema, "base_gated": BaseGatedSchema}  # fmt: skip
SKIPPED = {"openai": ("client",), "fake": ("requests",)}  # parameters that take objects made in code

"""Final answers for training targets: the step after a turn's last call, which BFCL's data does not
hold. A configured model client writes a short reply from the turn's request and its tool results,
cached by content hash (``kate.knowledge.llm_cache``, as the knowledge base's LLM entries are), and
each answer is labelled with its writer. A reply that is empty or is itself a call (a small writer
may do that) is replaced by a plain template answer, labelled ``template``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from kate.agent.knowledge import last_user_index
from kate.knowledge.llm_cache import LLMCache
from kate.llm.base import ChatModel, Message
from kate.toolcall import from_openai_tool_calls, parse_model_output

WRITER_SYSTEM = (
    "You write an assistant's final reply to a user, after the assistant's function calls have run. "
    "Reply in one to three short sentences of plain text, stating what was done and the result the user "
    "asked for, using only the function results shown. No code, no JSON, no function calls."
)
WRITER_USER = "The user asked:\n{question}\n\nFunction calls made, with their results:\n{results}\n\nThe reply to the user:"
PURPOSE = "train_final_answer/1"


def calls_and_results(prompt: Sequence[Message], result_chars: int = 600) -> list[tuple[str, str]]:
    """``(call text, result text)`` for every call after the prompt's last user message."""
    start = last_user_index(prompt)
    out, pending = [], []
    for message in prompt[start + 1:]:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            parsed = from_openai_tool_calls(message["tool_calls"])
            pending = [f"{c.name}({json.dumps(dict(c.arguments), ensure_ascii=False)})" for c in parsed.calls]
        elif message.get("role") == "tool":
            text = str(message.get("content") or "")
            text = text if len(text) <= result_chars else text[:result_chars] + " ..."
            out.append((pending.pop(0) if pending else str(message.get("name") or "call"), text))
    return out


def template_answer(pairs: Sequence[tuple[str, str]]) -> str:
    if not pairs:
        return "Done."
    call, result = pairs[-1]
    return f"Done. {call.split('(')[0]} returned: {result[:300]}"


@dataclass
class AnswerWriter:
    """Writes (or reads from the cache) the final answer of a turn; ``labels`` counts who wrote what."""

    model: ChatModel
    cache: LLMCache
    max_tokens: int = 96
    result_chars: int = 600
    labels: dict[str, int] = field(default_factory=dict)

    def __call__(self, prompt: list[Message], question: str) -> tuple[str, str]:
        """``(answer text, writer label)`` for the turn that ``prompt`` ends."""
        pairs = calls_and_results(prompt, self.result_chars)
        listing = "\n".join(f"- {call} -> {result}" for call, result in pairs) or "(none)"
        messages = [{"role": "system", "content": WRITER_SYSTEM},
                    {"role": "user", "content": WRITER_USER.format(question=question.strip(), results=listing)}]
        text = self.cache.chat(self.model, messages, purpose=PURPOSE, max_tokens=self.max_tokens).strip()
        parsed = parse_model_output(text)
        label = f"llm:{self.model.name}"
        if not text or parsed.calls or parsed.error or "```" in text:
            text, label = template_answer(pairs), "template"
        self.labels[label] = self.labels.get(label, 0) + 1
        return text, label

"""Final answers for training targets: the step after a turn's last call, which BFCL's data does not
hold. A configured model client writes a short reply from the turn's request and its tool results,
cached by content hash (``kate.knowledge.llm_cache``, as the knowledge base's LLM entries are), and
each answer is labelled with its writer. The reply is cut after its last whole sentence; one that is
then empty, is itself a call, echoes call syntax, refuses ("I can't assist with that", the very
failure training should fix) or copies the prompt's example (a small writer does all of these) is
replaced by a plain template answer from the last result, labelled ``template``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kate.agent.knowledge import last_user_index
from kate.knowledge.llm_cache import LLMCache
from kate.llm.base import ChatModel, Message
from kate.toolcall import from_openai_tool_calls, parse_model_output

WRITER_SYSTEM = (
    "You write the reply of an assistant that has just run some functions for a user. In one or two short "
    "sentences, say what was done and give the results the user asked for, using only the results shown. "
    "Do not mention function names or arguments; no code, no JSON."
)
WRITER_USER = "The user asked:\n{question}\n\nResults of the functions run:\n{results}\n\nThe assistant's reply:"
EXAMPLE = (
    WRITER_USER.format(question="What's the weather in Paris, and what is 20 C in Fahrenheit?",
                       results='- get_weather -> {"temp_c": 18, "sky": "cloudy"}\n- convert_temperature -> 68.0'),
    "It is 18 °C and cloudy in Paris, and 20 °C is 68 °F.",
)
DIRECT_SYSTEM = (
    "You are a helpful assistant. Reply to the user's message directly in one or two short sentences of plain "
    "text. If it asks for something you cannot do or know, say so briefly. No code, no JSON."
)
PURPOSE = "train_final_answer/2"
_SENTENCE_END = (".", "!", "?", '"', "'", ")")
# replies that teach the failure training is meant to fix (a refusal after the results), or the example
REFUSALS = ("can't assist", "cannot assist", "can not assist", "i'm sorry", "i am sorry", "i apologize", "unable to assist")


def calls_and_results(prompt: Sequence[Message], result_chars: int = 600) -> list[tuple[str, str]]:
    """``(function name, result text)`` for every call after the prompt's last user message."""
    start = last_user_index(prompt)
    out, pending = [], []
    for message in prompt[start + 1:]:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            parsed = from_openai_tool_calls(message["tool_calls"])
            pending = [c.name for c in parsed.calls]
        elif message.get("role") == "tool":
            text = str(message.get("content") or "")
            text = text if len(text) <= result_chars else text[:result_chars] + " ..."
            out.append((pending.pop(0) if pending else str(message.get("name") or "call"), text))
    return out


def template_answer(pairs: Sequence[tuple[str, str]]) -> str:
    if not pairs:
        return "Done."
    name, result = pairs[-1]
    return f"Done. {name} returned: {result[:300]}"


def whole_sentences(text: str) -> str:
    """``text`` cut after its last complete sentence ("" when it has none)."""
    text = text.strip()
    if text.endswith(_SENTENCE_END):
        return text
    cut = max(text.rfind(". "), text.rfind("! "), text.rfind("? "))
    return text[: cut + 1] if cut > 0 else ""


@dataclass
class AnswerWriter:
    """Writes (or reads from the cache) the final answer of a turn; ``labels`` counts who wrote what."""

    model: ChatModel
    cache: LLMCache
    max_tokens: int = 96
    result_chars: int = 600
    no_call_answer: str = "I cannot do that with the functions I have."
    labels: dict[str, int] = field(default_factory=dict)

    def __call__(self, prompt: list[Message], question: str) -> tuple[str, str]:
        """``(answer text, writer label)`` for the turn that ``prompt`` ends (a turn without calls
        is answered directly; its fallback is ``no_call_answer``)."""
        pairs = calls_and_results(prompt, self.result_chars)
        listing = "\n".join(f"- {call} -> {result}" for call, result in pairs)
        if pairs:
            messages = [{"role": "system", "content": WRITER_SYSTEM},
                        {"role": "user", "content": EXAMPLE[0]}, {"role": "assistant", "content": EXAMPLE[1]},
                        {"role": "user", "content": WRITER_USER.format(question=question.strip(), results=listing)}]
        else:
            messages = [{"role": "system", "content": DIRECT_SYSTEM}, {"role": "user", "content": question.strip()}]
        text = whole_sentences(self.cache.chat(self.model, messages, purpose=PURPOSE, max_tokens=self.max_tokens))
        parsed = parse_model_output(text)
        label = f"llm:{self.model.name}"
        refused = any(r in text.lower() for r in REFUSALS) or text == EXAMPLE[1]
        if not text or refused or parsed.calls or parsed.error or "```" in text or "({" in text:
            text, label = (template_answer(pairs) if pairs else self.no_call_answer), "template"
        self.labels[label] = self.labels.get(label, 0) + 1
        return text, label

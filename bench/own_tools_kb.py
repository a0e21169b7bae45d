"""A knowledge base from the own-tools task's TRAIN half: one solved trajectory per question, with
the ground-truth calls, their results (run on the task's own tools) and the final reply, built
into an ST base (``knowledge_bases/own_tools_train/``) that the test half can retrieve from.

The replies are the training data's (``kate train data`` wrote them with the 0.5B writer into
``knowledge_bases/train_answers.jsonl``, keyed by content): read from that cache, never asked
again; a question the cache lacks gets the writer's template reply. A reply is kept only when it
holds the question's expected values (the task's own answer check, on the train half); otherwise
a call's reply is the template (the last result, named), and a no-call question keeps no reply.

    .venv/bin/python bench/own_tools_kb.py     # writes knowledge_bases/own_tools_train{.jsonl,/}

This is what a user does with their own tools: solved requests (by hand, or kept from use through
``POST /v1/kate/trajectories``) become the examples later requests retrieve.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from kate.envs.python_functions import PythonFunctionsEnv  # noqa: E402
from kate.knowledge.build import BuildSpec, build_knowledge_base  # noqa: E402
from kate.knowledge.llm_cache import LLMCache  # noqa: E402
from kate.knowledge.trajectory import Trajectory, TrajectoryTurn, write_trajectories  # noqa: E402
from kate.tasks.own_tools import OwnToolsTask, answer_holds, content_sha256  # noqa: E402
from kate.tasks.own_tools_data import TOOLS  # noqa: E402
from kate.toolcall import ToolCall, to_openai_tool_calls  # noqa: E402
from kate.train.answers import AnswerWriter, template_answer  # noqa: E402

NAME = "own_tools_train"
JSONL = ROOT / "knowledge_bases" / f"{NAME}.jsonl"
ANSWERS = ROOT / "knowledge_bases" / "train_answers.jsonl"
WRITER = "qwen2.5-coder-0.5b-instruct-q4_k_m"  # the name the training data's replies are keyed by


class CacheOnly:
    """A writer that is never asked: a cache miss gets "" (the AnswerWriter then uses its template)."""

    name = WRITER

    def chat(self, *args, **kwargs):
        from kate.llm.base import completion_from_text

        return [completion_from_text("")]


def trajectories() -> tuple[list[Trajectory], dict[str, int]]:
    with tempfile.TemporaryDirectory() as tmp:  # a miss is written to a copy, never to the shipped cache
        cache_file = Path(tmp) / ANSWERS.name
        shutil.copy(ANSWERS, cache_file)
        writer = AnswerWriter(CacheOnly(), LLMCache(cache_file))  # type: ignore[arg-type]
        out = []
        for item in OwnToolsTask(split="train").items():
            env = PythonFunctionsEnv([TOOLS[name] for name in item.tools])
            calls = tuple(ToolCall(n, a, call_id=f"call_{j}") for j, (n, a) in enumerate(item.calls))
            results = tuple(env.execute(c).content for c in calls)
            prompt = [{"role": "user", "content": item.question}]
            for call, result in zip(calls, results):  # one call a step, as the training data has them
                prompt += [{"role": "assistant", "content": "", "tool_calls": to_openai_tool_calls((call,))},
                           {"role": "tool", "tool_call_id": call.call_id, "name": call.name, "content": result}]
            answer, _ = writer(prompt, item.question)
            if not answer_holds(item.answer, answer):
                answer = template_answer([(c.name, r) for c, r in zip(calls, results)]) if calls else None
                writer.labels["replaced"] = writer.labels.get("replaced", 0) + 1
            turn = TrajectoryTurn(user=item.question, calls=tuple(ToolCall(c.name, c.arguments) for c in calls),
                                  results=results, answer=answer)  # fmt: skip
            out.append(Trajectory(id=item.id, tools=tuple(env.tools()), turns=(turn,), source="own_tools",
                                  split="train", metadata={"own_tools_sha256": content_sha256()}))  # fmt: skip
        return out, dict(writer.labels)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args()
    items, labels = trajectories()
    write_trajectories(JSONL, items)
    spec = BuildSpec(name=NAME, root=str(ROOT / "knowledge_bases"), source="jsonl", jsonl=str(JSONL), types=["ST"],
                     categories=[], split="train")  # fmt: skip
    base = build_knowledge_base(spec)
    print(f"{len(items)} trajectories -> {JSONL.relative_to(ROOT)}; replies {labels}; base {spec.path} "
          f"({len(base.entries) if hasattr(base, 'entries') else '?'} entries)")


if __name__ == "__main__":
    main()

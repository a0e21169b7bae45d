"""ToolSense's MCQ and yes/no QA probes built from the catalogue itself, with no writer: the answer is
known by construction (``toolsense.probes_from=catalogue``), for when the writer cannot be trusted
to write them (the default 0.5B model writes "wrong" MCQ options that are true of the tool, cannot
judge them, and does not write yes/no questions).

* MCQ: "What does the tool `X` do?", X's own description against those of three other tools of
  its pool (``ToolIndex.pool``: its nearest neighbours by embedding), the three least similar of
  the 13, so that the distractors are related but are not near-copies of X; shuffled with a seeded rng.
* QA: "Is this what the tool `X` does: "<description>"?", with X's description (Yes) or the least
  similar pool neighbour's (No).

Descriptions lose BFCL's boilerplate ("Note that the provided function is in Python 3 syntax.",
present on some tools and not others, a cue unrelated to what the tool does) and are cut to
``MAX_CHARS`` at a word boundary; tools whose description is then empty, and distractors whose
description equals another option's, are passed over.
"""

from __future__ import annotations

import random
import re

from kate.diagnose.toolsense import Tool, ToolIndex
from kate.diagnose.toolsense_gen import MCQProbe, QAProbe, _id

WRITER = "catalogue"
MAX_CHARS = 300
BOILERPLATE = re.compile(r"\s*Note that the provided function is in [\w .+-]+? syntax\.?", re.IGNORECASE)


def _cut(text: str, limit: int = MAX_CHARS) -> str:
    text = " ".join(BOILERPLATE.sub(" ", text).split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."


def _distractors(index: ToolIndex, row: int, count: int) -> list[str] | None:
    """Descriptions of ``count`` tools of ``row``'s pool, least similar first, each distinct from the
    seed's and from each other's; None when the pool has too few."""
    own = _cut(index.tools[row].description)
    seen, out = {own.lower()}, []
    for other in reversed(index.pool(row)[1:]):
        text = _cut(index.tools[other].description)
        if text and text.lower() not in seen:
            out.append(text)
            seen.add(text.lower())
        if len(out) == count:
            return out
    return None


def catalogue_mcq(index: ToolIndex, row: int, seed: int = 0) -> MCQProbe | None:
    tool: Tool = index.tools[row]
    correct = _cut(tool.description)
    wrong = _distractors(index, row, 3) if correct else None
    if wrong is None:
        return None
    options = [correct, *wrong]
    random.Random(f"{seed}:{tool.text}").shuffle(options)
    return MCQProbe(_id("mcq", WRITER, tool.text, options), tool.name, f"What does the tool `{tool.name}` do?",
                    tuple(options), options.index(correct), WRITER)  # fmt: skip


def catalogue_qa(index: ToolIndex, row: int, wanted: str) -> QAProbe | None:
    tool: Tool = index.tools[row]
    own = _cut(tool.description)
    shown = own if wanted == "Yes" else (_distractors(index, row, 1) or [None])[0]
    if not own or not shown:
        return None
    question = f'Is this what the tool `{tool.name}` does: "{shown.rstrip(".")}"?'
    return QAProbe(_id("qa", WRITER, tool.text, question), tool.name, question, wanted, WRITER)

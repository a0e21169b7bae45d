"""ToolSense's probe sets, written by a configured LLM client and checked (arXiv 2606.12451).

* Queries at three ambiguity tiers (``TIERS``): a realistic request over a seed tool's candidate
  pool (``ToolIndex.pool``), answered as JSON ``{"query", "relevant_tools"}``. Programmatic checks
  (``kate.diagnose.toolsense_checks.check_query``: valid JSON, the tier's word limit, every relevant tool in the pool, the tier's
  tool count) reject bad answers; then a judge (the same or another client) is asked yes/no whether
  the query needs exactly those tools. Kept only when both pass.
* MCQ probes: one correct and three wrong statements of what a tool does (``check_mcq``), options
  shuffled with a seeded rng; a random answer scores 25%. With ``judge_mcq`` the judge is shown the
  tool's description and the four options and asked which are correct; kept only when it names
  exactly the correct one (a weak writer's "wrong" options are often right too).
* Yes/no QA probes: one question per tool whose answer is Yes or No, alternating, so the set is
  balanced; a constant answer scores 50%.

Every request goes through ``kate.knowledge.llm_cache.LLMCache`` (keyed by the writer's name, the
messages, the sampling parameters and the purpose), so a rebuild re-asks nothing. A rejected answer
is asked again with the next seed, ``attempts`` times at most. Items carry the writer's name.
Model output is only ever parsed as JSON, never evaluated.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

from tqdm import tqdm

from kate.diagnose.toolsense import ToolIndex, Tool
from kate.diagnose.toolsense_checks import TIERS, Tier, check_mcq, check_qa, check_query, is_yes
from kate.knowledge.llm_cache import LLMCache
from kate.llm.base import ChatModel, Message

SYSTEM = "You write test data for tool-use evaluations. Answer with one JSON object and nothing else."


@dataclass(frozen=True)
class QueryProbe:
    id: str
    tier: int
    seed_tool: str
    pool: tuple[str, ...]  # the candidate pool's names, the seed first
    pool_rows: tuple[int, ...]  # their catalogue rows
    query: str
    relevant: tuple[str, ...]
    writer: str
    judge: str
    category: str = "query"


@dataclass(frozen=True)
class MCQProbe:
    id: str
    tool: str
    question: str
    options: tuple[str, ...]  # four, shuffled
    answer: int  # index of the correct option
    writer: str
    category: str = "mcq"


@dataclass(frozen=True)
class QAProbe:
    id: str
    tool: str
    question: str
    answer: str  # "Yes" | "No"
    writer: str
    category: str = "qa"


def to_row(probe: Any) -> dict[str, Any]:
    return asdict(probe)


def from_row(row: Mapping[str, Any]) -> QueryProbe | MCQProbe | QAProbe:
    kind = {"query": QueryProbe, "mcq": MCQProbe, "qa": QAProbe}[row["category"]]
    return kind(**{k: tuple(v) if isinstance(v, list) else v for k, v in row.items()})


def _id(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def _pool_text(tools: Sequence[Tool]) -> str:
    return "\n".join(f"- {t.brief}" for t in tools)


def query_messages(pool: Sequence[Tool], tier: Tier) -> list[Message]:
    ask = (f"Candidate tools:\n{_pool_text(pool)}\n\nWrite one realistic user request that needs {tier.ask}. "
           f"It should involve `{pool[0].name}`. Do not name any tool in the request. Answer with JSON: "
           '{"query": "<the request>", "relevant_tools": ["<tool name>", ...]}')  # fmt: skip
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]


def judge_messages(pool: Sequence[Tool], query: str, relevant: Sequence[str]) -> list[Message]:
    ask = (f"Tools:\n{_pool_text(pool)}\n\nRequest: {query}\n\nDoes fulfilling this request need exactly these "
           f"tools, and no other tool of the list: {', '.join(relevant)}? Answer yes or no.")  # fmt: skip
    return [{"role": "user", "content": ask}]


def mcq_messages(tool: Tool) -> list[Message]:
    ask = (f"Tool `{tool.name}`: {tool.description}\n\nWrite a multiple-choice question about what this tool does. "
           "Give one correct statement of what it does or is used for, and three wrong but plausible statements "
           'of other uses. Answer with JSON: {"correct": "...", "wrong": ["...", "...", "..."]}')  # fmt: skip
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]


def mcq_judge_messages(tool: Tool, options: Sequence[str]) -> list[Message]:
    listing = "\n".join(f"{'ABCD'[i]}) {o}" for i, o in enumerate(options))
    ask = (f"Tool `{tool.name}`: {tool.description}\n\nWhich of these statements about `{tool.name}` are "
           f"correct?\n{listing}\nAnswer with the letters of all correct statements, nothing else.")  # fmt: skip
    return [{"role": "user", "content": ask}]


def qa_messages(tool: Tool, wanted: str) -> list[Message]:
    ask = (f"Tool `{tool.name}`: {tool.description}\n\nWrite one yes/no question about what this tool does or "
           f"takes, whose correct answer is {wanted}. The question must contain the name `{tool.name}`. "
           f'Answer with JSON: {{"question": "...", "answer": "{wanted}"}}')  # fmt: skip
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]


@dataclass
class ProbeWriter:
    """Asks ``writer`` (and ``judge``) through ``cache``; ``stats`` counts accepted and rejected answers."""

    writer: ChatModel
    cache: LLMCache
    judge: ChatModel | None = None
    attempts: int = 3
    temperature: float = 0.7
    max_tokens: int = 256
    seed: int = 0
    judge_mcq: bool = True

    def __post_init__(self) -> None:
        self.judge = self.judge or self.writer
        self.stats: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()  # generate(workers=...) writes from several threads

    def _count(self, kind: str, reason: str) -> None:
        with self._lock:
            row = self.stats.setdefault(kind, {})
            row[reason] = row.get(reason, 0) + 1

    def _ask(self, kind: str, messages: list[Message], check: Any) -> dict[str, Any] | None:
        for attempt in range(self.attempts):
            text = self.cache.chat(self.writer, messages, purpose=f"toolsense:{kind}", temperature=self.temperature,
                                   max_tokens=self.max_tokens, seed=self.seed + attempt)  # fmt: skip
            answer, reason = check(text)
            self._count(kind, reason)
            if answer is not None:
                return answer
        return None

    def query(self, index: ToolIndex, seed_row: int, tier: Tier) -> QueryProbe | None:
        rows = index.pool(seed_row)
        pool = [index.tools[r] for r in rows]
        names = [t.name for t in pool]
        answer = self._ask(f"query_t{tier.level}", query_messages(pool, tier), lambda t: check_query(t, names, tier))
        if answer is None:
            return None
        verdict = self.cache.chat(self.judge, judge_messages(pool, answer["query"], answer["relevant_tools"]),
                                  purpose="toolsense:judge", temperature=0.0, max_tokens=8, seed=self.seed)  # fmt: skip
        self._count(f"query_t{tier.level}", "judge yes" if is_yes(verdict) else "judge no")
        if not is_yes(verdict):
            return None
        return QueryProbe(_id("query", pool[0].text, tier.level, answer), tier.level, names[0], tuple(names),
                          tuple(rows), answer["query"], tuple(answer["relevant_tools"]), self.writer.name,
                          self.judge.name)  # fmt: skip

    def mcq(self, tool: Tool) -> MCQProbe | None:
        answer = self._ask("mcq", mcq_messages(tool), check_mcq)
        if answer is None:
            return None
        options = [answer["correct"], *answer["wrong"]]
        random.Random(f"{self.seed}:{tool.text}").shuffle(options)
        if self.judge_mcq:
            verdict = self.cache.chat(self.judge, mcq_judge_messages(tool, options), purpose="toolsense:judge_mcq",
                                      temperature=0.0, max_tokens=16, seed=self.seed)  # fmt: skip
            right = set(re.findall(r"\b([ABCD])\b", verdict)) == {"ABCD"[options.index(answer["correct"])]}
            self._count("mcq", "judge yes" if right else "judge no")
            if not right:
                return None
        return MCQProbe(_id("mcq", tool.text, answer), tool.name, f"What does the tool `{tool.name}` do?",
                        tuple(options), options.index(answer["correct"]), self.writer.name)  # fmt: skip

    def qa(self, tool: Tool, wanted: str) -> QAProbe | None:
        answer = self._ask("qa", qa_messages(tool, wanted), lambda t: check_qa(t, tool.name, wanted))
        if answer is None:
            return None
        return QAProbe(_id("qa", tool.text, answer), tool.name, answer["question"], wanted, self.writer.name)


def _waves(seeds: Sequence[int], workers: int) -> Iterator[tuple[int, Sequence[int]]]:
    for start in range(0, len(seeds), workers):
        yield start, seeds[start : start + workers]


def generate(index: ToolIndex, writer: ProbeWriter, *, queries_per_tier: int, mcq: int, qa: int,
             seed: int = 0, max_seeds: int | None = None, workers: int = 1, progress: bool = False,
             mcq_of: Callable[[int], MCQProbe | None] | None = None,
             qa_of: Callable[[int, str], QAProbe | None] | None = None) -> dict[str, list[Any]]:  # fmt: skip
    """Queries (``queries_per_tier`` of each tier), ``mcq`` MCQ and ``qa`` QA probes, from seed tools
    drawn in a seeded order (one per name); a seed that yields nothing is passed over. ``mcq_of(row)``
    and ``qa_of(row, "Yes" | "No")`` make the MCQ and QA probes (default: the writer's, ``writer.mcq``
    and ``writer.qa``; ``kate.diagnose.toolsense_catalogue`` builds them from the catalogue instead).

    ``workers`` seeds are written at once (threads; a llama.cpp client decodes them in one batch),
    in waves: each seed of a wave gets its tier (or Yes / No) from the counts at the wave's start, and
    the wave's probes are kept in seed order while their tier (answer) still wants one, so the counts
    come out exact and QA balanced (Yes ceil(qa / 2), No floor(qa / 2), alternating where it can);
    workers=1 is one by one."""
    order = list(range(len(index.tools)))
    random.Random(seed).shuffle(order)
    seen: set[str] = set()
    seeds = [r for r in order if not (index.tools[r].name in seen or seen.add(index.tools[r].name))]
    seeds = seeds[:max_seeds] if max_seeds else seeds
    mcq_of = mcq_of or (lambda row: writer.mcq(index.tools[row]))
    qa_of = qa_of or (lambda row, wanted: writer.qa(index.tools[row], wanted))
    out: dict[str, list[Any]] = {"queries": [], "mcq": [], "qa": []}
    bar = tqdm(total=queries_per_tier * len(TIERS) + mcq + qa, desc="toolsense probes", unit="probe",
               disable=not progress)  # fmt: skip
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        want = {level: queries_per_tier for level in TIERS}
        for start, wave in _waves(seeds, max(1, workers)):
            open_tiers = [level for level in TIERS if want[level] > 0]
            if not open_tiers:
                break
            tiers = [TIERS[open_tiers[(start + j) % len(open_tiers)]] for j in range(len(wave))]
            for probe in pool.map(lambda a: writer.query(index, *a), zip(wave, tiers)):
                if probe is not None and want[probe.tier] > 0:
                    out["queries"].append(probe)
                    want[probe.tier] -= 1
                    bar.update()
        for _, wave in _waves(seeds, max(1, workers)):
            if len(out["mcq"]) >= mcq:
                break
            for found in pool.map(mcq_of, wave):
                if found is not None and len(out["mcq"]) < mcq:
                    out["mcq"].append(found)
                    bar.update()
        need = {"Yes": (qa + 1) // 2, "No": qa // 2}
        for _, wave in _waves(seeds, max(1, workers)):
            if len(out["qa"]) >= qa:
                break
            wanted, left = [], dict(need)
            last = out["qa"][-1].answer if out["qa"] else "No"
            for _ in wave:  # the answer that still wants the most; on a tie, the other one than the last
                last = "Yes" if left["Yes"] > left["No"] or (left["Yes"] == left["No"] and last == "No") else "No"
                wanted.append(last)
                left[last] -= 1
            for found in pool.map(qa_of, wave, wanted):
                if found is not None and need[found.answer] > 0:
                    out["qa"].append(found)
                    need[found.answer] -= 1
                    bar.update()
    bar.close()
    return out

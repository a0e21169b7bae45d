"""ToolSense's tool catalogue (arXiv 2606.12451): tools as name + description (+ parameters), and
each seed tool's candidate pool, the seed and its 13 nearest neighbours by embedding.

A catalogue is a JSONL file, one ``{"name", "description", "parameters"?}`` a line
(``save_catalogue`` / ``load_catalogue``), built from BFCL's functions (``bfcl_catalogue``: every
function doc of the installed bfcl-eval data, deduplicated by name + description) or converted
from an OpenAI tool list (``catalogue_from_tools``). BFCL reuses names with other descriptions, so
names are not unique in a catalogue; a pool never holds two tools of one name, so within a pool a
name identifies a tool.

``ToolIndex`` embeds ``"<name>: <description>"`` with kate's embedder (``kate.knowledge.embedder``;
any object with ``embed(texts)`` and ``embed_queries(texts)`` returning unit rows) into kate's
faiss index (``kate.knowledge.index``): ``pool(i)`` is a seed's pool, ``rank(query, among)`` the
embedding-retrieval baseline (tools by cosine to the query).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kate.bfcl.data import SINGLE_TURN, load_entries
from kate.io import atomic_write_text, read_jsonl
from kate.knowledge.index import build_index, search

POOL_SIZE = 14  # the seed tool and its 13 nearest neighbours
BRIEF_CHARS = 240  # a description's length in prompts (BFCL's live functions run to paragraphs)


@dataclass(frozen=True)
class Tool:
    """One catalogue entry."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def text(self) -> str:
        """What is embedded and shown to a model: ``name: description``."""
        return f"{self.name}: {self.description}"

    @property
    def brief(self) -> str:
        """``name: description`` with the description cut to ``BRIEF_CHARS`` (prompts list 14 of them)."""
        text = " ".join(self.description.split())
        return f"{self.name}: {text if len(text) <= BRIEF_CHARS else text[: BRIEF_CHARS - 3].rstrip() + '...'}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.parameters:
            out["parameters"] = dict(self.parameters)
        return out


def dedupe(tools: Iterable[Tool]) -> list[Tool]:
    """First occurrence of each (name, description), in order."""
    seen: set[tuple[str, str]] = set()
    out = []
    for tool in tools:
        if (tool.name, tool.description) not in seen:
            seen.add((tool.name, tool.description))
            out.append(tool)
    return out


def catalogue_from_tools(tools: Iterable[Mapping[str, Any]]) -> list[Tool]:
    """OpenAI tool schemas (``{"type": "function", "function": {...}}``) or bare function docs."""
    out = []
    for number, tool in enumerate(tools, start=1):
        function = tool.get("function", tool)
        if not isinstance(function, Mapping) or not function.get("name"):
            raise ValueError(f"tool {number}: needs a name")
        out.append(Tool(str(function["name"]), str(function.get("description") or "").strip(),
                        dict(function.get("parameters") or {})))  # fmt: skip
    return dedupe(out)


def bfcl_catalogue(categories: Sequence[str] = SINGLE_TURN, split: str = "all") -> list[Tool]:
    """Every function doc of BFCL's single-turn entries (``split``), deduplicated by name + description."""
    return catalogue_from_tools(f for c in categories for e in load_entries(c, split) for f in e.functions)


def save_catalogue(path: str | Path, tools: Sequence[Tool]) -> None:
    atomic_write_text(path, "".join(json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in tools))


def load_catalogue(path: str | Path) -> list[Tool]:
    """A catalogue JSONL (``{"name", "description"}`` a line) or a JSON file holding an OpenAI tool list."""
    path = Path(path)
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        return catalogue_from_tools(data["tools"] if isinstance(data, Mapping) else data)
    rows = list(read_jsonl(path))
    for number, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping) or not row.get("name") or "description" not in row:
            raise ValueError(f"{path}: row {number}: needs 'name' and 'description'")
    return catalogue_from_tools(rows)


def catalogue_sha256(tools: Sequence[Tool]) -> str:
    text = json.dumps([t.to_dict() for t in tools], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cached_vectors(path: str | Path | None, key: str) -> np.ndarray | None:
    if path is None or not Path(path).exists():
        return None
    try:
        with np.load(path) as data:
            return np.ascontiguousarray(data["vectors"], dtype=np.float32) if str(data["key"]) == key else None
    except (OSError, ValueError, KeyError):
        return None


class ToolIndex:
    """The catalogue's embeddings in a flat (exact cosine) faiss index."""

    def __init__(self, tools: Sequence[Tool], embedder: Any, cache: str | Path | None = None) -> None:
        """``cache``: an ``.npz`` file the vectors are kept in, reused while the catalogue and the
        embedder's identity are the same (embedding thousands of tools takes minutes on a CPU)."""
        if not tools:
            raise ValueError("the tool catalogue is empty")
        self.tools = list(tools)
        self.embedder = embedder
        identity = getattr(embedder, "identity", None)
        key = json.dumps({"catalogue": catalogue_sha256(self.tools),
                          "embedder": identity() if callable(identity) else type(embedder).__name__}, sort_keys=True)
        vectors = _cached_vectors(cache, key)
        if vectors is None:
            vectors = np.ascontiguousarray(embedder.embed([t.text for t in self.tools]), dtype=np.float32)
            if cache is not None:
                Path(cache).parent.mkdir(parents=True, exist_ok=True)
                with open(cache, "wb") as fh:
                    np.savez(fh, vectors=vectors, key=np.array(key))
        self.vectors = vectors
        self.index = build_index(self.vectors)

    def pool(self, seed: int, size: int = POOL_SIZE) -> list[int]:
        """The seed's row and its nearest neighbours' (best first), one tool per name, ``size`` in all
        (fewer when the catalogue has fewer names)."""
        _, ids = search(self.index, self.vectors[seed : seed + 1], min(len(self.tools), 4 * size + 8))
        chosen, names = [seed], {self.tools[seed].name}
        for i in [int(x) for x in ids[0] if x >= 0]:
            if len(chosen) == size:
                break
            if self.tools[i].name not in names:
                chosen.append(i)
                names.add(self.tools[i].name)
        return chosen

    def rank(self, query: str, among: Sequence[int] | None = None) -> list[str]:
        """Tool names by cosine to ``query``, best first: of ``among`` (rows), or of the whole
        catalogue (each name once, at its best row)."""
        q = np.asarray(self.embedder.embed_queries([query]), dtype=np.float32)[0]
        rows = list(range(len(self.tools))) if among is None else list(among)
        scores = self.vectors[rows] @ q
        out: list[str] = []
        for j in np.argsort(-scores, kind="stable"):
            name = self.tools[rows[int(j)]].name
            if name not in out:
                out.append(name)
        return out

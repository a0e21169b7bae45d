"""The on-disk format of a knowledge base folder: its file names, the manifest's records (each
file's sha256 and size, counts per type, the writers of LLM-written types, the generation stamp),
and the readers that check the manifest and the entries, raising ``KnowledgeBaseError`` naming the
file. ``kate.knowledge.store`` puts them together into ``KnowledgeBase``."""

from __future__ import annotations

import collections
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from kate.knowledge.entries import KnowledgeEntry

FORMAT_VERSION = 1
ENTRIES, EMBEDDINGS, INDEX, MANIFEST = "entries.jsonl", "embeddings.npy", "index.faiss", "manifest.json"
DATA_FILES = (ENTRIES, EMBEDDINGS, INDEX)


class KnowledgeBaseError(RuntimeError):
    """A knowledge base that cannot be used as it is; the message names the file and the fix."""


def _file_record(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return {"sha256": digest.hexdigest(), "bytes": path.stat().st_size}


def _counts(values) -> dict[str, int]:
    return dict(sorted(collections.Counter(values).items()))


def _writers(entries: list[KnowledgeEntry], known: dict[str, list[str]] | None = None) -> dict[str, list[str]]:
    writers: dict[str, set[str]] = collections.defaultdict(set)
    for kind, names in (known or {}).items():
        writers[kind].update(names)
    for entry in entries:
        if entry.written_by:
            writers[entry.type].add(entry.written_by)
    return {t: sorted(ws) for t, ws in sorted(writers.items())}


Stamp = tuple[int, int, int, int]


def _stamp(path: Path) -> Stamp | None:
    """What tells one saved generation from the next: the manifest file's identity (every save
    writes a new one), or None when there is none."""
    try:
        st = os.stat(path / MANIFEST)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def check_embedding(manifest: dict[str, Any], embedding: dict[str, Any], where: Path | str) -> None:
    built = manifest["embedding"]
    for key in ("sha256", "dim"):
        if built.get(key) != embedding.get(key):
            raise KnowledgeBaseError(
                f"{where}: the base was built with embedding model {built.get('model')!r} ({key} {built.get(key)}), "
                f"but the configured embedder is {embedding.get('model')!r} ({key} {embedding.get(key)}); "
                "configure the same model or rebuild the base")


def _read_manifest(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise KnowledgeBaseError(f"{path}: missing; not a knowledge base (or an interrupted copy)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KnowledgeBaseError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(manifest, dict):
        raise KnowledgeBaseError(f"{path}: the manifest is not a JSON object")
    if manifest.get("format_version") != FORMAT_VERSION:
        raise KnowledgeBaseError(f"{path}: format_version {manifest.get('format_version')!r}, this kate reads "
                                 f"{FORMAT_VERSION}; rebuild the knowledge base")
    for key in ("embedding", "index", "entry_count", "files"):
        if key not in manifest:
            raise KnowledgeBaseError(f"{path}: the manifest lacks {key!r}")
    return manifest


def _read_entries(path: Path) -> list[KnowledgeEntry]:
    entries = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            try:
                entries.append(KnowledgeEntry.from_dict(json.loads(line)))
            except (ValueError, KeyError, TypeError) as exc:
                raise KnowledgeBaseError(f"{path}:{number}: corrupt entry ({type(exc).__name__}: {exc})") from None
    return entries

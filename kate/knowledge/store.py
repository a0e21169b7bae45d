"""A knowledge base on disk: ``knowledge_bases/<name>/`` with

* ``entries.jsonl``  one KnowledgeEntry per line, row i = vector i
* ``embeddings.npy`` float32 (n, dim), unit rows
* ``index.faiss``    the faiss index over those rows
* ``manifest.json``  format version, embedding model + weights sha256 + dim, index kind and
  parameters, entry count, counts per type, the writers of LLM-written types, the source data's
  hash, the build config, and each file's sha256 and size.

Saving writes a sibling temporary folder and swaps it in, so a reader never sees a half-written
base. Loading checks the manifest against every file and against the configured embedding model;
any mismatch or corruption raises ``KnowledgeBaseError`` naming the file.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from kate.io import atomic_write_json
from kate.knowledge.entries import KnowledgeEntry
from kate.knowledge.index import IndexSpec, build_index, configure, kind_of, load_index, save_index

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


@dataclass
class KnowledgeBase:
    entries: list[KnowledgeEntry]
    embeddings: np.ndarray
    index: Any  # faiss.Index
    manifest: dict[str, Any]
    path: Path | None = None
    _rows: dict[str, int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._rows = {entry.id: i for i, entry in enumerate(self.entries)}
        if len(self._rows) != len(self.entries):
            dupes = [k for k, v in collections.Counter(e.id for e in self.entries).items() if v > 1]
            raise KnowledgeBaseError(f"duplicate entry ids: {dupes[:5]}")

    def __len__(self) -> int:
        return len(self.entries)

    def row(self, entry_id: str) -> int:
        return self._rows[entry_id]

    @property
    def embedding(self) -> dict[str, Any]:
        return dict(self.manifest["embedding"])

    # --------------------------------------------------------------------------- create
    @classmethod
    def create(cls, entries: list[KnowledgeEntry], embeddings: np.ndarray, *, embedding: dict[str, Any],
               index_spec: IndexSpec = IndexSpec(), name: str = "", sources: dict[str, Any] | None = None,
               build_config: dict[str, Any] | None = None) -> "KnowledgeBase":
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        if embeddings.shape != (len(entries), int(embedding["dim"])):
            raise ValueError(f"{len(entries)} entries need embeddings of shape ({len(entries)}, {embedding['dim']}), "
                             f"got {embeddings.shape}")
        writers: dict[str, set[str]] = collections.defaultdict(set)
        for entry in entries:
            if entry.written_by:
                writers[entry.type].add(entry.written_by)
        manifest = {
            "format_version": FORMAT_VERSION,
            "name": name,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "embedding": dict(embedding),
            "index": {"kind": index_spec.kind, "params": index_spec.to_dict()},
            "entry_count": len(entries),
            "types": _counts(e.type for e in entries),
            "writers": {t: sorted(ws) for t, ws in sorted(writers.items())},
            "sources": sources or {},
            "build_config": build_config or {},
        }
        return cls(list(entries), embeddings, build_index(embeddings, index_spec), manifest)

    # --------------------------------------------------------------------------- save
    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write to ``path`` (a folder) atomically: a temporary sibling, then a swap."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
        try:
            with open(tmp / ENTRIES, "w", encoding="utf-8") as fh:
                for entry in self.entries:
                    fh.write(json.dumps(entry.to_dict(), ensure_ascii=False) + "\n")
            np.save(tmp / EMBEDDINGS, self.embeddings, allow_pickle=False)
            save_index(self.index, tmp / INDEX)
            manifest = dict(self.manifest, files={name: _file_record(tmp / name) for name in DATA_FILES})
            atomic_write_json(tmp / MANIFEST, manifest)
            for name in (*DATA_FILES, MANIFEST):
                with open(tmp / name, "rb") as fh:
                    os.fsync(fh.fileno())
            os.chmod(tmp, 0o755)
            old = None
            if path.exists():
                old = path.with_name(f".{path.name}.old-{os.getpid()}")
                os.replace(path, old)
            os.replace(tmp, path)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.manifest, self.path = manifest, path
        return path

    # --------------------------------------------------------------------------- load
    @classmethod
    def load(cls, path: str | os.PathLike[str], *, embedding: dict[str, Any] | None = None,
             index_spec: IndexSpec | None = None, verify_hashes: bool = True) -> "KnowledgeBase":
        """Load and check a base. ``embedding``: the configured embedder's ``identity()``, which
        must match the one the base was built with. ``index_spec``: search-time parameters."""
        path = Path(path)
        if not path.is_dir():
            raise KnowledgeBaseError(f"{path}: no knowledge base here (build one with `kate kb action=build`)")
        manifest = _read_manifest(path / MANIFEST)
        files = manifest["files"]
        for name in DATA_FILES:
            file = path / name
            if name not in files:
                raise KnowledgeBaseError(f"{path / MANIFEST}: lists no record of {name}")
            if not file.is_file():
                raise KnowledgeBaseError(f"{file}: missing (the manifest lists it); rebuild the knowledge base")
            size = file.stat().st_size
            if size != files[name]["bytes"]:
                raise KnowledgeBaseError(f"{file}: {size} bytes, the manifest says {files[name]['bytes']} "
                                         "(corrupt or modified); rebuild the knowledge base")
            if verify_hashes and _file_record(file)["sha256"] != files[name]["sha256"]:
                raise KnowledgeBaseError(f"{file}: sha256 differs from the manifest (corrupt or modified); "
                                         "rebuild the knowledge base")
        if embedding is not None:
            check_embedding(manifest, embedding, path / MANIFEST)
        count, dim = manifest["entry_count"], manifest["embedding"]["dim"]
        entries = _read_entries(path / ENTRIES)
        if len(entries) != count:
            raise KnowledgeBaseError(f"{path / ENTRIES}: {len(entries)} entries, the manifest says {count}")
        try:
            embeddings = np.load(path / EMBEDDINGS, allow_pickle=False)
        except Exception as exc:  # noqa: BLE001 - numpy raises many kinds on a corrupt file
            raise KnowledgeBaseError(f"{path / EMBEDDINGS}: unreadable ({type(exc).__name__}: {exc})") from None
        if embeddings.shape != (count, dim) or embeddings.dtype != np.float32:
            raise KnowledgeBaseError(f"{path / EMBEDDINGS}: shape {embeddings.shape} {embeddings.dtype}, "
                                     f"expected ({count}, {dim}) float32")
        try:
            index = load_index(path / INDEX)
        except Exception as exc:  # noqa: BLE001 - faiss raises RuntimeError with C++ text
            raise KnowledgeBaseError(f"{path / INDEX}: unreadable faiss index ({exc})") from None
        if index.ntotal != count or index.d != dim or kind_of(index) != manifest["index"]["kind"]:
            raise KnowledgeBaseError(f"{path / INDEX}: a {kind_of(index)} index of {index.ntotal} x {index.d}, the "
                                     f"manifest says {manifest['index']['kind']} of {count} x {dim}")
        spec = index_spec or IndexSpec(**manifest["index"]["params"])
        kb = cls(entries, embeddings, configure(index, spec), manifest, path)
        return kb

    # --------------------------------------------------------------------------- stats
    def stats(self) -> dict[str, Any]:
        per_class: dict[str, dict[str, int]] = collections.defaultdict(lambda: collections.Counter())
        sources: dict[str, dict[str, int]] = collections.defaultdict(lambda: collections.Counter())
        clusters = []
        for entry in self.entries:
            for cls_name in entry.api_classes or ("(none)",):
                per_class[cls_name][entry.type] += 1
            sources[entry.source or "(none)"][entry.type] += 1
            if entry.type == "SIC":
                clusters.append({"api_class": ",".join(entry.api_classes), "intent": entry.text,
                                 "size": entry.payload.get("size")})
        return {
            "name": self.manifest.get("name"),
            "path": str(self.path) if self.path else None,
            "entries": len(self.entries),
            "types": _counts(e.type for e in self.entries),
            "writers": self.manifest.get("writers", {}),
            "embedding": self.manifest["embedding"],
            "index": self.manifest["index"]["kind"],
            "per_api_class": {k: dict(sorted(v.items())) for k, v in sorted(per_class.items())},
            "per_source": {k: dict(sorted(v.items())) for k, v in sorted(sources.items())},
            "clusters": clusters,
        }


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

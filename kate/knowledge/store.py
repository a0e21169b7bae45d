"""A knowledge base on disk: ``knowledge_bases/<name>/`` with

* ``entries.jsonl``  one KnowledgeEntry per line, row i = vector i
* ``embeddings.npy`` float32 (n, dim), unit rows
* ``index.faiss``    the faiss index over those rows
* ``manifest.json``  format version, embedding model + weights sha256 + dim, index kind and
  parameters, entry count, counts per type, the writers of LLM-written types, the source data's
  hash, the build config, and each file's sha256 and size.

Saving writes a sibling temporary folder and swaps it in (one atomic exchange of the two folders
where the system has ``renameat2``), so a reader never sees a half-written or a missing base, and a
save killed part-way leaves the base as it was. Loading checks the manifest against every file and
against the configured embedding model; any mismatch or corruption raises ``KnowledgeBaseError``
naming the file. A load that overlaps a save (its files change under it) is retried, so readers
take no lock.

A base can grow while it is used (``kate.knowledge.learn``): writers append under ``write_lock``
(an ``fcntl.flock`` on ``.<name>.lock`` beside the folder, since the folder itself is swapped), and
``refresh`` reloads a loaded base in place when its manifest changed on disk: one ``stat`` per call,
no reload when nothing changed. ``view`` gives the entries and index of one generation together.

The file names, the manifest's records and their readers are in ``kate.knowledge.base_format``, the
writer lock and the folder swap in ``kate.knowledge.folder_swap`` (all importable from here too).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

import faiss
import numpy as np

from kate.io import atomic_write_json
from kate.knowledge.base_format import (DATA_FILES, EMBEDDINGS, ENTRIES, FORMAT_VERSION, INDEX, MANIFEST,
                                        KnowledgeBaseError, Stamp, _counts, _file_record, _read_entries,
                                        _read_manifest, _stamp, _writers, check_embedding)  # fmt: skip
from kate.knowledge.entries import KnowledgeEntry
from kate.knowledge.folder_swap import _swap_in, lock_path, write_lock
from kate.knowledge.index import IndexSpec, build_index, configure, kind_of, load_index, save_index

# save() looks up save_index and _swap_in here, so tests that replace store.save_index or
# store._swap_in take effect; the format and the folder swap live in base_format and folder_swap
__all__ = ["DATA_FILES", "EMBEDDINGS", "ENTRIES", "FORMAT_VERSION", "INDEX", "LOAD_ATTEMPTS", "MANIFEST",
           "KnowledgeBase", "KnowledgeBaseError", "KnowledgeView", "Stamp", "check_embedding", "lock_path",
           "write_lock"]

LOAD_ATTEMPTS = 8  # a load that overlapped this many saves in a row gives up


class KnowledgeView(NamedTuple):
    """The entries and the index of one generation of a base (row i of the index = entries[i])."""

    entries: list[KnowledgeEntry]
    index: Any  # faiss.Index


@dataclass
class KnowledgeBase:
    entries: list[KnowledgeEntry]
    embeddings: np.ndarray
    index: Any  # faiss.Index
    manifest: dict[str, Any]
    path: Path | None = None
    _rows: dict[str, int] = field(default_factory=dict, repr=False)
    index_spec: IndexSpec | None = field(default=None, compare=False)  # search-time parameters, kept on reload
    reloads: int = field(default=0, compare=False)  # how many times refresh() reloaded this object
    _stamp: Stamp | None = field(default=None, repr=False, compare=False)
    _lock: Any = field(default_factory=threading.Lock, repr=False, compare=False)  # guards the swap in refresh
    _reload_lock: Any = field(default_factory=threading.Lock, repr=False, compare=False)  # one reloader at a time

    def __post_init__(self) -> None:
        self._rows = {entry.id: i for i, entry in enumerate(self.entries)}
        if len(self._rows) != len(self.entries):
            dupes = [k for k, v in collections.Counter(e.id for e in self.entries).items() if v > 1]
            raise KnowledgeBaseError(f"duplicate entry ids: {dupes[:5]}")

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, entry_id: object) -> bool:
        return entry_id in self._rows

    def row(self, entry_id: str) -> int:
        return self._rows[entry_id]

    @property
    def embedding(self) -> dict[str, Any]:
        return dict(self.manifest["embedding"])

    def view(self) -> KnowledgeView:
        """The entries and index of one generation (a concurrent refresh swaps both together)."""
        with self._lock:
            return KnowledgeView(self.entries, self.index)

    def configure_index(self, spec: IndexSpec) -> None:
        """Apply search-time parameters now and after every reload."""
        self.index_spec = spec
        configure(self.index, spec)

    # --------------------------------------------------------------------------- follow the disk
    def changed_on_disk(self) -> bool:
        """Whether the files at ``path`` are another generation than the one loaded (one stat)."""
        return self.path is not None and _stamp(self.path) != self._stamp

    def refresh(self) -> bool:
        """Reload in place when the base on disk changed since this object was loaded or saved;
        True when it reloaded. Thread-safe: readers keep the old generation until the new one is
        loaded and checked, then see both its entries and its index (``view``). A corrupt or
        mismatched new generation raises ``KnowledgeBaseError`` (naming the file) and leaves this
        object as it was, so the next call tries again."""
        if not self.changed_on_disk():
            return False
        with self._reload_lock:
            if not self.changed_on_disk():
                return False  # another thread reloaded while this one waited
            fresh = KnowledgeBase.load(self.path, embedding=self.embedding, index_spec=self.index_spec)
            with self._lock:
                self.entries, self.embeddings, self.index = fresh.entries, fresh.embeddings, fresh.index
                self.manifest, self._rows, self._stamp = fresh.manifest, fresh._rows, fresh._stamp
                self.reloads += 1
        return True

    # --------------------------------------------------------------------------- create
    @classmethod
    def create(cls, entries: list[KnowledgeEntry], embeddings: np.ndarray, *, embedding: dict[str, Any],
               index_spec: IndexSpec = IndexSpec(), name: str = "", sources: dict[str, Any] | None = None,
               build_config: dict[str, Any] | None = None) -> "KnowledgeBase":
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        if embeddings.shape != (len(entries), int(embedding["dim"])):
            raise ValueError(f"{len(entries)} entries need embeddings of shape ({len(entries)}, {embedding['dim']}), "
                             f"got {embeddings.shape}")
        manifest = {
            "format_version": FORMAT_VERSION,
            "name": name,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "embedding": dict(embedding),
            "index": {"kind": index_spec.kind, "params": index_spec.to_dict()},
            "entry_count": len(entries),
            "types": _counts(e.type for e in entries),
            "writers": _writers(list(entries)),
            "sources": sources or {},
            "build_config": build_config or {},
        }
        return cls(list(entries), embeddings, build_index(embeddings, index_spec), manifest)

    def appended(self, entries: list[KnowledgeEntry], embeddings: np.ndarray) -> "KnowledgeBase":
        """A new, unsaved base: this one's entries then ``entries`` (rows in that order), the index
        extended (flat, hnsw: the new rows added; ivf: retrained over all rows), the manifest's
        counts, types and writers updated. ``self`` is left as it is."""
        dim = int(self.manifest["embedding"]["dim"])
        embeddings = np.ascontiguousarray(embeddings, dtype=np.float32)
        if embeddings.shape != (len(entries), dim):
            raise ValueError(f"{len(entries)} entries need embeddings of shape ({len(entries)}, {dim}), "
                             f"got {embeddings.shape}")
        all_entries = [*self.entries, *entries]
        all_embeddings = np.concatenate([self.embeddings, embeddings]) if len(self.embeddings) else embeddings
        spec = IndexSpec(**self.manifest["index"]["params"])
        if spec.kind == "ivf" or not self.index.is_trained:
            index = build_index(all_embeddings, spec)
        else:
            index = faiss.clone_index(self.index)
            if len(embeddings):
                index.add(embeddings)
        manifest = dict(self.manifest, entry_count=len(all_entries), types=_counts(e.type for e in all_entries),
                        writers=_writers(list(entries), self.manifest.get("writers")))
        return KnowledgeBase(all_entries, all_embeddings, index, manifest, self.path, index_spec=self.index_spec)

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
            stamp = _stamp(tmp)  # a rename keeps the file's identity: this generation's stamp, whoever saves next
            _swap_in(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.manifest, self.path, self._stamp = manifest, path, stamp
        return path

    # --------------------------------------------------------------------------- load
    @classmethod
    def load(cls, path: str | os.PathLike[str], *, embedding: dict[str, Any] | None = None,
             index_spec: IndexSpec | None = None, verify_hashes: bool = True) -> "KnowledgeBase":
        """Load and check a base. ``embedding``: the configured embedder's ``identity()``, which
        must match the one the base was built with. ``index_spec``: search-time parameters.
        A load whose files were swapped under it (a concurrent save) is retried."""
        path = Path(path)
        for _attempt in range(LOAD_ATTEMPTS):
            before = _stamp(path)
            try:
                kb = cls._load_once(path, embedding, index_spec, verify_hashes)
            except (KnowledgeBaseError, OSError):
                if _stamp(path) == before:
                    raise  # nothing moved: the base itself is missing, corrupt or mismatched
                continue
            if _stamp(path) == before:
                kb._stamp = before
                return kb
        raise KnowledgeBaseError(f"{path / MANIFEST}: the base changed under {LOAD_ATTEMPTS} loads in a row "
                                 "(saves keep landing); try again")

    @classmethod
    def _load_once(cls, path: Path, embedding: dict[str, Any] | None, index_spec: IndexSpec | None,
                   verify_hashes: bool) -> "KnowledgeBase":
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
        return cls(entries, embeddings, configure(index, spec), manifest, path, index_spec=index_spec)

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

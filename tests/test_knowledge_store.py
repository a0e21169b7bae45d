"""Knowledge bases on disk: manifest, atomic save, and loading that rejects corrupt or mismatched
files with the file named. Real MiniLM embeddings and real faiss indexes."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from kate.bfcl.data import data_sha256
from kate.knowledge import store as store_module
from kate.knowledge.index import IndexSpec, build_index, recall_at_k, save_index
from kate.knowledge.store import KnowledgeBase, KnowledgeBaseError
from tests.test_knowledge_fixtures import SMALL_CATEGORIES, bfcl_st_kb, embedder, kb_path


def _copy(tmp_path):
    target = tmp_path / "kb"
    shutil.copytree(kb_path(), target)
    return target


def test_manifest_describes_the_base():
    kb = bfcl_st_kb()
    manifest = json.loads((kb.path / "manifest.json").read_text())
    assert manifest["format_version"] == 1
    assert manifest["embedding"] == embedder().identity()
    assert manifest["embedding"]["dim"] == 384 and manifest["embedding"]["model"] == "all-minilm-l6-v2"
    assert manifest["entry_count"] == len(kb) == kb.embeddings.shape[0] == kb.index.ntotal
    assert manifest["types"] == {"ST": len(kb)}
    assert manifest["index"]["kind"] == "flat"
    assert manifest["sources"]["split"] == "train"
    assert manifest["sources"]["data_sha256"] == data_sha256(SMALL_CATEGORIES)
    assert manifest["build_config"]["types"] == ["ST"]
    assert set(manifest["files"]) == {"entries.jsonl", "embeddings.npy", "index.faiss"}
    norms = np.linalg.norm(kb.embeddings, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)


def test_load_round_trips(tmp_path):
    kb = bfcl_st_kb()
    again = KnowledgeBase.load(_copy(tmp_path), embedding=embedder().identity())
    assert [e.to_dict() for e in again.entries] == [e.to_dict() for e in kb.entries]
    assert np.array_equal(again.embeddings, kb.embeddings)


def _flip_byte(path, offset=-10):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name", ["entries.jsonl", "embeddings.npy", "index.faiss"])
def test_a_corrupt_file_is_rejected_by_name(tmp_path, name):
    path = _copy(tmp_path)
    _flip_byte(path / name)
    with pytest.raises(KnowledgeBaseError, match=name) as info:
        KnowledgeBase.load(path)
    assert "sha256" in str(info.value)


@pytest.mark.parametrize("name", ["entries.jsonl", "embeddings.npy", "index.faiss", "manifest.json"])
def test_a_missing_file_is_rejected_by_name(tmp_path, name):
    path = _copy(tmp_path)
    (path / name).unlink()
    with pytest.raises(KnowledgeBaseError, match=name):
        KnowledgeBase.load(path)


def test_a_truncated_file_is_rejected_by_size_even_without_hashing(tmp_path):
    path = _copy(tmp_path)
    data = (path / "embeddings.npy").read_bytes()
    (path / "embeddings.npy").write_bytes(data[: len(data) // 2])
    with pytest.raises(KnowledgeBaseError, match="embeddings.npy.*bytes"):
        KnowledgeBase.load(path, verify_hashes=False)


def test_an_unreadable_manifest_is_rejected(tmp_path):
    path = _copy(tmp_path)
    (path / "manifest.json").write_text("{not json")
    with pytest.raises(KnowledgeBaseError, match="manifest.json: unreadable"):
        KnowledgeBase.load(path)
    manifest = json.loads((kb_path() / "manifest.json").read_text())
    (path / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(KnowledgeBaseError, match="manifest.json: format_version 99"):
        KnowledgeBase.load(path)


def _rewrite_manifest(path):
    """Make the manifest's file records agree with the files again (a consistent but wrong base)."""
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"] = {n: store_module._file_record(path / n) for n in store_module.DATA_FILES}
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_files_that_disagree_with_each_other_are_rejected_by_name(tmp_path):
    path = _copy(tmp_path)
    vectors = np.load(path / "embeddings.npy")
    save_index(build_index(vectors[:-1]), path / "index.faiss")  # one vector short
    _rewrite_manifest(path)
    with pytest.raises(KnowledgeBaseError, match=r"index.faiss: a flat index of \d+ x 384"):
        KnowledgeBase.load(path)

    path = _copy(tmp_path / "b")
    lines = (path / "entries.jsonl").read_text().splitlines(keepends=True)
    (path / "entries.jsonl").write_text("".join(lines[:-1]))
    _rewrite_manifest(path)
    with pytest.raises(KnowledgeBaseError, match="entries.jsonl: .* entries, the manifest says"):
        KnowledgeBase.load(path)

    path = _copy(tmp_path / "c")
    lines = (path / "entries.jsonl").read_text().splitlines(keepends=True)
    lines[3] = '{"id": "broken"}\n'
    (path / "entries.jsonl").write_text("".join(lines))
    _rewrite_manifest(path)
    with pytest.raises(KnowledgeBaseError, match="entries.jsonl:4: corrupt entry"):
        KnowledgeBase.load(path)


def test_a_different_embedding_model_is_rejected(tmp_path):
    other = {**embedder().identity(), "model": "some-other-model", "sha256": "0" * 64}
    with pytest.raises(KnowledgeBaseError, match="manifest.json: the base was built with embedding model "
                                                 "'all-minilm-l6-v2'.*configured embedder is 'some-other-model'"):
        KnowledgeBase.load(kb_path(), embedding=other)
    wrong_dim = {**embedder().identity(), "dim": 768}
    with pytest.raises(KnowledgeBaseError, match="dim"):
        KnowledgeBase.load(kb_path(), embedding=wrong_dim)


def test_save_is_atomic(tmp_path, monkeypatch):
    path = _copy(tmp_path)
    kb = KnowledgeBase.load(path)
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    smaller = KnowledgeBase.create(kb.entries[:10], kb.embeddings[:10], embedding=kb.embedding, name="x")

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(store_module, "save_index", crash)
    with pytest.raises(OSError, match="disk full"):
        smaller.save(path)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before  # the old base, untouched
    assert [p.name for p in tmp_path.iterdir()] == ["kb"]  # no temporary folder left behind
    monkeypatch.undo()
    smaller.save(path)
    assert len(KnowledgeBase.load(path)) == 10
    assert [p.name for p in tmp_path.iterdir()] == ["kb"]


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_approximate_indexes_recall_the_exact_neighbours(tmp_path, kind):
    kb = bfcl_st_kb()
    queries = embedder().embed([e.text + " please" for e in kb.entries[::7]])
    approx = build_index(kb.embeddings, IndexSpec(kind=kind, ivf_nprobe=8))
    recall = recall_at_k(approx, kb.index, queries, 3)
    assert recall >= 0.9, recall
    saved = KnowledgeBase.create(kb.entries, kb.embeddings, embedding=kb.embedding, index_spec=IndexSpec(kind=kind))
    saved.save(tmp_path / kind)
    loaded = KnowledgeBase.load(tmp_path / kind)
    assert loaded.manifest["index"]["kind"] == kind
    assert recall_at_k(loaded.index, kb.index, queries, 3) >= 0.9

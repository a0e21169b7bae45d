"""`kate kb` (run_kb): build | query | inspect through composed Hydra configs; every kb/ and
retrieval/ option instantiates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.eval.config import instantiate
from kate.knowledge.build import BuildSpec
from kate.knowledge.distilled import DistilledSpec
from kate.kb_cmd import run_kb
from kate.knowledge.trajectory import Trajectory, TrajectoryTurn, write_trajectories
from kate.retrieval import RetrievalConfig
from kate.toolcall import ToolCall
from tests.test_knowledge_fixtures import kb_path


def _compose(*overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("kb", overrides=list(overrides))


@pytest.mark.parametrize("option", sorted(p.stem for p in (Path(CONF_DIR) / "kb").glob("*.yaml")))
def test_every_kb_option_instantiates(option):
    spec = instantiate(_compose(f"kb={option}").kb)
    if isinstance(spec, DistilledSpec):  # lessons from judged runs (kate/knowledge/distilled.py)
        assert spec.runs
        return
    assert isinstance(spec, BuildSpec) and spec.types


@pytest.mark.parametrize("option", sorted(p.stem for p in (Path(CONF_DIR) / "retrieval").glob("*.yaml")))
def test_every_retrieval_option_instantiates(option):
    config = instantiate(_compose(f"retrieval={option}").retrieval)
    assert isinstance(config, RetrievalConfig)
    assert config.types or config.intent.get("enabled")


def test_the_default_build_config_is_the_shipped_recipe():
    spec = instantiate(_compose().kb)
    assert spec.name == "bfcl_train" and spec.split == "train" and spec.types == ["ST", "ES", "SIC", "TIC"]
    assert spec.llm_categories == ["multi_turn_base"] and spec.index == {"kind": "flat"}
    assert len(spec.categories) == 17


def test_build_query_inspect_on_user_data(tmp_path, capsys):
    ls = {"type": "function", "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}}}
    rm = {"type": "function", "function": {"name": "rm", "parameters": {"type": "object", "properties": {"f": {"type": "string"}}}}}
    dialogues = [
        Trajectory(id="a", tools=(ls, rm), api_classes=("FS",), source="mine", turns=(
            TrajectoryTurn("List the files in my folder", (ToolCall("ls", {}),)),
            TrajectoryTurn("Delete the file notes.txt", (ToolCall("rm", {"f": "notes.txt"}),)))),
        Trajectory(id="b", tools=(ls,), api_classes=("FS",), source="mine", turns=(
            TrajectoryTurn("Show me what files are here", (ToolCall("ls", {}),)),)),
    ]
    data = tmp_path / "mine.jsonl"
    write_trajectories(data, dialogues)
    cfg = _compose("action=build", "kb=jsonl", f"kb.jsonl={data}", f"kb.root={tmp_path}", "kb.name=mine")
    kb = run_kb(cfg)
    assert len(kb) == 3 and kb.manifest["sources"]["kind"] == "jsonl"
    capsys.readouterr()

    base = [f"kb_name={tmp_path / 'mine'}", "retrieval.threshold=0.3"]
    hits = run_kb(_compose("action=query", "query=list all my files", "api_classes=[FS]", *base))
    assert hits[0]["id"] == "ST:a#t0" and all(h["score"] >= 0.3 for h in hits)
    out = capsys.readouterr().out
    assert "hit(s) for 'list all my files'" in out and "ST:a#t0" in out and "[Reference only:" in out
    assert run_kb(_compose("action=query", "query=list all my files", "api_classes=[Other]", *base)) == []
    excluded = run_kb(_compose("action=query", "query=list all my files", "exclude_ids=[a]", *base))
    assert [h["id"] for h in excluded] == ["ST:b#t0"]
    capsys.readouterr()

    stats = run_kb(_compose("action=inspect", *base))
    assert stats["entries"] == 3 and stats["per_api_class"] == {"FS": {"ST": 3}}
    assert json.loads(capsys.readouterr().out)["types"] == {"ST": 3}


def test_inspect_the_shared_bfcl_base(capsys):
    stats = run_kb(_compose("action=inspect", f"kb_name={kb_path()}"))
    assert stats["types"]["ST"] > 700 and "GorillaFileSystem" in stats["per_api_class"]


def test_query_without_text_and_unknown_actions_are_errors():
    with pytest.raises(ValueError, match="query="):
        run_kb(_compose("action=query", f"kb_name={kb_path()}"))
    with pytest.raises(ValueError, match="action must be one of"):
        run_kb(_compose("action=delete"))

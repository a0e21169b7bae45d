"""AppWorld on the real package (its own environment, `scripts/setup_appworld.sh`, which
`scripts/test.sh` runs): installation, the worker protocol, AppWorld's API docs as tool schemas,
the clear error without task data; the `kate appworld` runner on the stand-in world (resumable);
one real model writing code actions in the stand-in world."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kate.agent import KnowledgeContext, LoopSettings, Policy
from kate.appworld.client import DEFAULT_PYTHON, AppWorldClient, AppWorldDataMissing, AppWorldError, AppWorldNotInstalled
from kate.appworld.knowledge import CODE_TEMPLATE, build_code_kb, stand_in_solutions
from kate.appworld.stand_in import StandInWorld
from kate.appworld_cmd import run_appworld
from kate.knowledge.embedder import Embedder
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.knowledge import RetrievalKnowledge
from kate.retrieval.retriever import Retriever
from kate.sampling.code import GreedyCode
from kate.tasks.appworld import AppWorldTask, Worlds
from kate.toolcall import ToolCall

CONF = Path(__file__).resolve().parents[1] / "conf"


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    if not DEFAULT_PYTHON.exists():
        pytest.fail(f"{DEFAULT_PYTHON} missing: run `bash scripts/setup_appworld.sh` (scripts/test.sh does)")
    with AppWorldClient(root=tmp_path_factory.mktemp("appworld_root")) as c:
        yield c


def test_worker_reports_the_installed_appworld(client):
    info = client.ping()
    assert info["appworld"] == "0.1.3.post1" and info["data"] is False and info["python"].startswith("3.")


def test_appworld_api_docs_are_tool_schemas_kate_can_use(client):
    docs = client.api_docs(["supervisor", "spotify"])
    names = {d["function"]["name"] for d in docs["supervisor"]}
    assert "supervisor__complete_task" in names and len(docs["spotify"]) > 50
    for schema in docs["spotify"]:
        assert schema["type"] == "function" and schema["function"]["parameters"]["type"] == "object"
    login = next(d for d in docs["spotify"] if d["function"]["name"] == "spotify__login")["function"]
    assert {"username", "password"} <= set(login["parameters"]["properties"])
    call = ToolCall(login["name"], {"username": "a@b.c", "password": "x"})  # the canonical call type holds it
    assert call.name == "spotify__login"


def test_without_task_data_the_error_says_where_the_data_goes(client):
    with pytest.raises(AppWorldDataMissing) as info:
        client.open("82e2fac_1", "kate_test")
    message = str(info.value)
    assert str(client.root / "data") in message and "appworld download data" in message
    with pytest.raises(AppWorldDataMissing):
        client.task_ids("test_normal")
    with pytest.raises(AppWorldError, match="no task is open"):
        client.request("execute", code="print(1)")
    with pytest.raises(AppWorldError, match="unknown op"):
        client.request("format_disk")
    assert client.ping()["appworld"]  # the worker survives every error


def test_missing_interpreter_says_how_to_install(tmp_path):
    with pytest.raises(AppWorldNotInstalled, match="setup_appworld.sh"):
        AppWorldClient(python=tmp_path / "no-python").ping()


@pytest.mark.model
def test_appworld_run_without_data_fails_clearly(tmp_path):
    cfg = _config(tmp_path, ["world=appworld", f"appworld.root={tmp_path / 'aw'}"])
    with pytest.raises(AppWorldDataMissing, match="appworld download data"):
        run_appworld(cfg)


# -------------------------------------------------------------------------- knowledge on real embeddings


def test_code_knowledge_retrieves_a_similar_solved_task_and_never_the_task_itself():
    embedder = Embedder()
    kb = build_code_kb(stand_in_solutions(), name="stand_in", source="stand_in", embedder=embedder)
    retriever = Retriever(kb, embedder, RetrievalConfig(kb="stand_in", top_k=3, threshold=0.2))
    world = StandInWorld("notes_body")
    knowledge = RetrievalKnowledge(retriever, CODE_TEMPLATE)
    got = knowledge(world.task["instruction"], [], KnowledgeContext(
        "code", api_classes=tuple(world.task["allowed_apps"]), exclude_ids=("notes_body",)))  # fmt: skip
    ids = [h["id"] for h in got.hits]
    assert "```python" in got.text and "apis.notes.login" in got.text and ids
    assert not any("notes_body" in str(i) for i in ids)
    assert knowledge(world.task["instruction"], [], KnowledgeContext("code", api_classes=("spotify",))) is None


# -------------------------------------------------------------------------- the runner


def _config(tmp_path, overrides):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose("appworld", overrides=[f"out_dir={tmp_path / 'out'}", *overrides])


def test_runner_on_the_stand_in_world_resumes_without_duplicates(tmp_path):
    overrides = ["llm=fake", "llm.script=['print(apis.supervisor.show_profile())']",
                 "loop.max_steps=2", "arms.kate.sampling.n=2", "knowledge.threshold=0.2", "appworld.task_ids=[notes_count,notes_body]"]  # fmt: skip
    cfg = _config(tmp_path, overrides)
    first = run_appworld(cfg)
    assert set(first["arms"]) == {"direct", "kate"} and first["arms"]["direct"]["tasks"] == 2
    assert first["arms"]["direct"]["task_goal_completion"] == 0.0 and first["arms"]["kate"]["ends"] == {"max_steps": 2}
    records = (tmp_path / "out" / "kate" / "seed_0" / "records.jsonl").read_text().splitlines()
    kate_record = json.loads(records[0])
    assert kate_record["knowledge"] and kate_record["evaluation"]["num_tests"] >= 3
    again = run_appworld(_config(tmp_path, overrides))  # resumed: nothing runs twice
    assert again["arms"]["direct"]["tasks"] == 2
    assert len((tmp_path / "out" / "direct" / "seed_0" / "records.jsonl").read_text().splitlines()) == 2
    # more tasks of the same arm extend its folder; another loop setting is another run, refused by name
    more = run_appworld(_config(tmp_path, [o if not o.startswith("appworld.task_ids") else
                                           "appworld.task_ids=[notes_count,notes_body,notes_create]" for o in overrides]))
    assert more["arms"]["direct"]["tasks"] == 3 and "| direct | 3 |" in (tmp_path / "out" / "report.md").read_text()
    with pytest.raises(RuntimeError, match="direct/seed_0/meta.json belongs to a run with another configuration"):
        run_appworld(_config(tmp_path, [*overrides, "loop.max_steps=3"]))


# -------------------------------------------------------------------------- a real model


def test_default_model_writes_code_actions_in_the_stand_in_world(default_llamacpp):
    settings = LoopSettings(max_steps=2, system_prompt=None, max_malformed=2)
    task = AppWorldTask(Worlds("stand_in"), ["notes_count"])
    trace = task.solve(task.items()[0], Policy(default_llamacpp, GreedyCode(max_tokens=160), None, settings), 0)
    assert 1 <= trace["n_steps"] <= 2 and trace["usage"]["completion_tokens"] > 0
    first = trace["steps"][0]
    assert first["code"] and first["error"] is None  # the model wrote a fenced code action
    assert "output" in first  # and the world ran it in its sandbox (a refused import is an output, too)
    assert trace["evaluation"]["num_tests"] == 3

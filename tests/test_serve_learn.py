"""Learning from use through `kate serve`: POST /v1/kate/trajectories with a successful trajectory
adds its verified turns to the learned base (real MiniLM, a base in a temporary folder), the running
server retrieves them on the next turn without a restart, concurrent writers lose nothing, and a
trajectory that does not verify or is not marked successful adds nothing."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import openai
import pytest

from kate.knowledge.store import KnowledgeBase
from kate.llm.fake import FakeChatModel
from kate.serve.process import ThreadedServer
from kate.serve_cmd import build_server

pytestmark = pytest.mark.model

CONVERT = {"type": "function", "function": {
    "name": "convert_length", "description": "Convert a length between units.",
    "parameters": {"type": "object", "properties": {"value": {"type": "number"}, "from_unit": {"type": "string"},
                   "to_unit": {"type": "string"}}, "required": ["value", "from_unit", "to_unit"]}}}  # fmt: skip


def trajectory(value: int, *, name: str = "convert_length") -> dict:
    arguments = json.dumps({"value": value, "from_unit": "mile", "to_unit": "km"})
    return {"success": True, "tools": [CONVERT], "messages": [
        {"role": "user", "content": f"How many kilometres are {value} miles?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": str(round(value * 1.609, 2))},
        {"role": "assistant", "content": f"{value} miles are {round(value * 1.609, 2)} km."}]}  # fmt: skip


def post(server: ThreadedServer, path: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(f"{server.base_url}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def config(root, learn: bool = True) -> dict:
    retrieval = {"_target_": "kate.retrieval.config.RetrievalConfig", "kb": "learned", "root": str(root),
                 "filter_api_classes": False, "filter_tools": True, "min_task_tools": 0, "threshold": 0.3}  # fmt: skip
    return {"llm": {}, "width": 1, "max_concurrent": 8, "knowledge": {"retrieval": retrieval, "enabled": True},
            "learn": {"enabled": learn, "kb": "learned"}}  # fmt: skip


def test_learned_trajectories_are_served_on_the_next_turn_and_concurrent_writers_lose_none(tmp_path):
    fake = FakeChatModel(["ok"], repeat_last=True, name="fake")
    app, info = build_server(config(tmp_path), model=fake)
    with ThreadedServer(app) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="-", max_retries=0)
        ask = [{"role": "user", "content": "How many kilometres are 26 miles?"}]
        before = client.chat.completions.create(model="fake", messages=ask, tools=[CONVERT])
        empty = before.model_extra["kate"]["knowledge"]  # the new base is empty, and the response says so
        assert empty["hits"] == [] and "no entry of 'learned'" in empty["skipped"]

        code, outcome = post(server, "/kate/trajectories", trajectory(10))
        assert code == 200 and len(outcome["added"]) == 1 and outcome["rejected"] is None and "path" not in outcome
        after = client.chat.completions.create(model="fake", messages=[{"role": "user", "content":
                                               "How many kilometres are 42 miles?"}], tools=[CONVERT])  # fmt: skip
        hits = after.model_extra["kate"]["knowledge"]["hits"]
        assert [h["id"] for h in hits] == outcome["added"]  # seen without a restart
        assert "10 miles" in fake.requests[-1]["messages"][-1]["content"]  # the learned example, in the prompt

        results: list = []
        writers = [threading.Thread(target=lambda v=v: results.append(post(server, "/kate/trajectories", trajectory(v))))
                   for v in range(100, 108)]  # fmt: skip
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join(120)
        assert sorted(code for code, _ in results) == [200] * 8 and all(len(o["added"]) == 1 for _, o in results)

        code, again = post(server, "/kate/trajectories", trajectory(10))
        assert code == 200 and again["added"] == [] and again["skipped"][0]["reason"].startswith("duplicate")
        code, bad = post(server, "/kate/trajectories", trajectory(11, name="convert_weight"))
        assert code == 200 and bad["added"] == [] and "convert_weight" in bad["rejected"]
        code, unmarked = post(server, "/kate/trajectories", {**trajectory(12), "success": False})
        assert code == 400 and unmarked["error"]["param"] == "success"
    kb = KnowledgeBase.load(tmp_path / "learned")
    assert len(kb) == 9 and len({e.id for e in kb.entries}) == 9
    assert kb.manifest["learned"]["version"] == 9 and kb.manifest["learned"]["by_source"] == {"use:serve": 9}


def test_learning_is_off_unless_enabled(tmp_path):
    app, _ = build_server(config(tmp_path, learn=False), model=FakeChatModel(["ok"], repeat_last=True, name="fake"))
    with ThreadedServer(app) as server:
        code, answer = post(server, "/kate/trajectories", trajectory(10))
    assert code == 403 and answer["error"]["code"] == "learning_off"

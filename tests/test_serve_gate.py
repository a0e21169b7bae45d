"""The probe-triggered gate in `kate serve` (conf/gate/, `kate serve gate=probe ...`): configured once,
made around every request's sampler, reported per choice; a forced call is not gated. On a real HTTP
server on 127.0.0.1 with a scripted model that takes prefill=."""

from __future__ import annotations

import json
import urllib.request

import pytest
from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.eval.config import plain
from kate.llm.fake import FakeChatModel
from kate.serve.process import ThreadedServer
from kate.serve_cmd import build_server

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}  # fmt: skip
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
BELIEF = {"_target_": "kate.diagnose.gate.constant_belief", "value": 0.2}


def config(gate: dict | None, **over: object) -> dict:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        c = plain(compose("serve", overrides=["knowledge.enabled=false", "width=1", "llm=fake"]))
    if gate is not None:
        with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
            node = plain(compose("serve", overrides=["gate=probe", "gate.belief.probe=x.npz"]))["gate"]
        c["gate"] = {**node, "belief": BELIEF, **gate}
    return {**c, **over}


def post(server: ThreadedServer, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(f"{server.base_url}/chat/completions", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, json.loads(response.read())


def test_the_config_group_holds_the_gate_and_serve_has_none_by_default():
    assert config(None)["gate"] is None
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        node = plain(compose("serve", overrides=["gate=probe", "gate.belief.probe=p.npz", "gate.tau=0.3"]))["gate"]
    assert node["_target_"] == "kate.sampling.gate.GateSampler" and node["tau"] == 0.3 and "inner" not in node


@pytest.mark.parametrize("tau, action, text", [(0.5, "no_tool", "I can answer this directly"), (0.1, "tool", "I need")])
def test_every_request_is_gated_and_the_response_says_how(tau, action, text):
    fake = FakeChatModel(["Sunny."], repeat_last=True, name="fake", options=("prefill",))
    app, info = build_server(config({"tau": tau}), model=fake)
    with ThreadedServer(app) as server:
        status, body = post(server, {"model": "fake", "messages": ASK, "tools": [WEATHER], "n": 2})
    assert status == 200 and len(body["choices"]) == 2
    assert [g["action"] for g in body["kate"]["gate"]] == [action, action]
    assert all(g["belief"] == 0.2 for g in body["kate"]["gate"])
    assert all(r["prefill"].startswith(text) for r in fake.requests)
    assert body["choices"][0]["message"]["content"].startswith(text)


def test_a_forced_call_and_a_request_without_tools_are_not_steered():
    call = 'get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'  # after the forced call's prefill
    fake = FakeChatModel([call, "Hello."], name="fake", options=("prefill",))
    app, _ = build_server(config({"tau": 0.5}), model=fake)
    with ThreadedServer(app) as server:
        _, forced = post(server, {"model": "fake", "messages": ASK, "tools": [WEATHER], "tool_choice": "required"})
        _, plain_chat = post(server, {"model": "fake", "messages": ASK})
    assert "gate" not in forced["kate"] and forced["choices"][0]["message"]["tool_calls"]
    assert fake.requests[0]["prefill"].startswith("<tool_call>")  # the forced call's own prefill
    assert plain_chat["kate"]["gate"][0]["action"] == "none" and fake.requests[1]["prefill"] is None


def test_a_probe_gate_without_its_probe_refuses_to_start():
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        c = plain(compose("serve", overrides=["knowledge.enabled=false", "llm=fake", "gate=probe"]))
    with pytest.raises(ValueError, match="gate.belief.probe"):
        build_server(c, model=FakeChatModel(["ok"], name="fake", options=("prefill",)))


def test_a_gate_over_a_client_without_prefill_fails_the_request_loudly():
    fake = FakeChatModel(["Sunny."], repeat_last=True, name="fake")
    app, _ = build_server(config({"tau": 0.5}), model=fake)
    with ThreadedServer(app) as server:
        request = urllib.request.Request(f"{server.base_url}/chat/completions", method="POST",
                                         data=json.dumps({"model": "fake", "messages": ASK, "tools": [WEATHER]}).encode(),
                                         headers={"Content-Type": "application/json"})  # fmt: skip
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(request, timeout=30)
    assert error.value.code == 500 and "prefill" in error.value.read().decode()

"""Faults survived: the fault proxy (kate/testing/fault_proxy.py) between kate's OpenAI client and a stub
or real upstream. Each fault kind happens and is retried through; faults beyond the retries raise
an error naming the server, and in `kate eval` become explicit failure records that the same
command redoes; through every fault kind a run's records equal an undisturbed run's."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from hydra import compose, initialize_config_dir

from kate.cli import CONF_DIR
from kate.eval.run_eval import run_eval
from kate.eval.run_store import load_run
from kate.eval.runner import UPSTREAM_ERROR, rescore
from kate.llm.local_server import free_port, start_llamacpp_server
from kate.llm.openai import OpenAIChatModel, UpstreamUnavailable
from kate.llm.registry import SMALL_TEST_MODEL
from kate.tasks.bfcl import BFCLTask, select_entries

from kate.testing import FAULT_KINDS, FaultProxy, StubUpstream, every, persistent, scripted, seeded

MESSAGES = [{"role": "user", "content": "What is 2 + 2?"}]
FORWARDED = {"drop_mid_body", "truncate"}  # the faults that reach the upstream before they strike


def _model(url: str, timeout: float = 2.0, max_retries: int = 2) -> OpenAIChatModel:
    return OpenAIChatModel("stub", base_url=url, timeout=timeout, max_retries=max_retries, backoff=0.0)


@pytest.mark.parametrize("kind", FAULT_KINDS)
def test_each_fault_happens_and_is_retried_through(kind):
    with StubUpstream(lambda body: "four") as stub, FaultProxy(stub.base_url, scripted([kind]), stall_seconds=5) as proxy:
        [c] = _model(proxy.base_url).chat(MESSAGES)
        stats = proxy.stats()
    assert c.text == "four"
    assert stats["faults"] == {k: int(k == kind) for k in FAULT_KINDS} and stats["requests"] == 2
    assert len(stub.bodies) == stats["forwarded"] == (2 if kind in FORWARDED else 1)


def test_everything_else_passes_through_unchanged_streaming_too():
    with StubUpstream(lambda body: "one two three") as stub, FaultProxy(stub.base_url) as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key="x", max_retries=0, timeout=5)
        whole = client.chat.completions.create(model="m", messages=MESSAGES, n=2).model_dump()
        stream = client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        parts = [chunk.choices[0].delta.content for chunk in stream if chunk.choices[0].delta.content]
        assert [m.id for m in client.models.list()] == ["stub"]  # a GET, never faulted
        proxy.schedule = scripted(["drop_mid_body"])
        with pytest.raises(openai.APIConnectionError):  # a stream cut after its first chunk
            list(client.chat.completions.create(model="m", messages=MESSAGES, stream=True))
        stats = proxy.stats()
    assert [c["message"]["content"] for c in whole["choices"]] == ["one two three"] * 2
    assert parts == ["one ", "two ", "three"]
    assert stats["requests"] == 4 and stats["forwarded"] == 4 and stats["faults"]["drop_mid_body"] == 1


def test_schedules_repeat_and_unknown_kinds_are_refused():
    draw = [seeded(0.5, seed=3)(i, b"") for i in range(200)]
    assert draw == [seeded(0.5, seed=3)(i, b"") for i in range(200)] != [seeded(0.5, seed=4)(i, b"") for i in range(200)]
    assert set(draw) == {None, *FAULT_KINDS}
    assert all(seeded(1.0, kinds=["drop"])(i, b"") == "drop" for i in range(20))
    assert all(seeded(0.0)(i, b"") is None for i in range(20))
    with pytest.raises(ValueError, match="unknown fault kind"):
        scripted(["http_404"])
    rotation = [every(3)(i, b"") for i in range(36)]
    assert rotation[2::3] == [*FAULT_KINDS, *FAULT_KINDS] and rotation.count(None) == 24


@pytest.mark.parametrize(("kind", "what"), [("http_503", "HTTP 503"), ("drop", "connection failed")])
def test_a_fault_beyond_the_retries_raises_naming_the_server(kind, what):
    with StubUpstream() as stub, FaultProxy(stub.base_url, persistent(kind, "2 + 2")) as proxy:
        with pytest.raises(UpstreamUnavailable) as error:
            _model(proxy.base_url).chat(MESSAGES)
    assert proxy.base_url in str(error.value) and what in str(error.value) and error.value.attempts == 3
    assert proxy.stats()["faults"][kind] == 3


def test_a_dead_upstream_raises_and_does_not_hang():
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(UpstreamUnavailable) as direct:
        _model(dead, max_retries=1).chat(MESSAGES)
    assert direct.value.kind == "connection"
    with FaultProxy(dead) as proxy, pytest.raises(UpstreamUnavailable) as proxied:
        _model(proxy.base_url, max_retries=1).chat(MESSAGES)
    assert proxied.value.status == 502 and proxy.stats()["upstream_errors"] == 2


# ---------------------------------------------------------------------- kate eval through the proxy
def _eval_config(base_url: str, out_dir: Path, extra: list[str], categories: str = "simple_python,irrelevance,multi_turn_base"):
    overrides = ["llm=openai", f"llm.base_url={base_url}", "limit=1", f"categories=[{categories}]", f"out_dir={out_dir}", *extra]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("eval", overrides=overrides)


def _lines(folder: Path) -> list[str]:
    return (folder / "seed_0" / "records.jsonl").read_text().splitlines()


def test_faults_beyond_the_retries_are_failure_records_that_a_resume_redoes(tmp_path):
    entries = {e.category: e for e in select_entries(["simple_python", "irrelevance", "multi_turn_base"], "test", 1)}
    single = entries["simple_python"].turns[0][-1]["content"]
    second_turn = entries["multi_turn_base"].turns[1][-1]["content"]  # the dialogue fails after its first turn
    fail_single, fail_dialogue = persistent("http_503", single[:40]), persistent("drop", second_turn[:40])
    extra = ["llm.model=stub", "llm.max_retries=1", "llm.backoff=0", "llm.timeout=5", "max_steps=2"]
    with StubUpstream() as stub:
        with FaultProxy(stub.base_url, lambda i, b: fail_single(i, b) or fail_dialogue(i, b)) as proxy:
            run_eval(_eval_config(proxy.base_url, tmp_path, extra))  # completes: no crash
        before = _lines(tmp_path)
        _, records = load_run(tmp_path / "seed_0")
        failed = {r["id"]: r for r in records if r.get("error_type") == UPSTREAM_ERROR}
        assert len(before) == 3 and set(failed) == {entries["simple_python"].id, entries["multi_turn_base"].id}
        assert all(proxy.base_url in r["error"] and r["valid"] is False for r in failed.values())
        assert rescore(BFCLTask(list(entries.values())), records) == (records, 0)  # kept as they are, not scored

        stub.bodies.clear()  # the outage ends: the proxy is back on the same address, so the command is the same
        with FaultProxy(stub.base_url, port=proxy.port) as back:
            run_eval(_eval_config(back.base_url, tmp_path, extra))
        after = _lines(tmp_path)
    ids = [json.loads(line)["id"] for line in after]
    assert sorted(ids) == sorted(set(ids)) and len(ids) == 3  # one record each
    kept = [line for line in before if json.loads(line)["id"] == entries["irrelevance"].id]
    assert kept[0] in after  # the finished item untouched
    asked = " ".join(json.dumps(b["messages"]) for b in stub.bodies)
    assert single[:40] in asked and second_turn[:40] in asked  # the failures redone, the dialogue from its start
    assert entries["irrelevance"].turns[0][-1]["content"][:40] not in asked  # and nothing else
    assert all(json.loads(line).get("error_type") != UPSTREAM_ERROR for line in after)


def _comparable(records: list[dict]) -> dict[str, dict]:
    return {r["id"]: {k: v for k, v in r.items() if k != "seconds"} for r in records}


@pytest.mark.model
def test_kate_eval_through_every_fault_equals_an_undisturbed_run(tmp_path, monkeypatch):
    # A drop_mid_body or truncate fault is answered by the server and asked again; the retry finds the
    # prompt in llama-cpp-python's KV cache. One token per batch (the server reads N_BATCH/N_UBATCH from
    # its environment) makes its numerics independent of what the cache holds, so equal means equal.
    monkeypatch.setenv("N_BATCH", "1")
    monkeypatch.setenv("N_UBATCH", "1")
    timeout = 60  # the client's, well above a request's time on a busy machine; the stall outlasts it
    script = ["http_500", "http_503", "stall", None, "drop", "drop_mid_body", "truncate"]  # two requests' worth
    # Entries are in flight together, so any one of them may meet every fault: retries outnumber the faults.
    common = [f"llm.timeout={timeout}", f"llm.max_retries={len(script)}", "llm.backoff=0.01", "sampling.max_tokens=64"]
    single_turn = "simple_python,irrelevance,multiple"
    with start_llamacpp_server(SMALL_TEST_MODEL, n_ctx=4096) as server:
        extra = [f"llm.model={server.model}", *common]
        plain = run_eval(_eval_config(server.base_url, tmp_path / "plain", extra, single_turn))
        with FaultProxy(server.base_url, scripted(script), stall_seconds=timeout + 5) as proxy:
            faulted = run_eval(_eval_config(proxy.base_url, tmp_path / "faulted", extra, single_turn))
            stats = proxy.stats()
    assert stats["faults"] == {kind: 1 for kind in FAULT_KINDS} and stats["clients_gone"] == 0
    _, plain_records = load_run(tmp_path / "plain" / "seed_0")
    _, faulted_records = load_run(tmp_path / "faulted" / "seed_0")
    ids = [json.loads(line)["id"] for line in _lines(tmp_path / "faulted")]
    assert len(ids) == len(set(ids)) == 3 and not any(r.get("error_type") == UPSTREAM_ERROR for r in faulted_records)
    assert _comparable(faulted_records) == _comparable(plain_records)
    assert faulted["per_category"] == plain["per_category"]

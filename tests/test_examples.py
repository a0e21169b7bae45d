"""The agent-loop examples (examples/): a plain ``openai`` loop, the OpenAI Agents SDK and LangGraph,
each pointed at a server by its base URL alone.

Against a scripted OpenAI-compatible server on 127.0.0.1 (no model): the loop runs a tool call to an
answer, records what it called, survives a call to a tool that does not exist, stops at its step
limit; the plain loop sends kate's knobs and reads kate's extra response field; every request a
framework sends is one ``kate serve`` accepts. Against ``kate serve`` with the default 0.5B model
(``model``, one server for the module): the model calls the right tool with sensible arguments.
Skipped with the reason when the ``examples`` extra is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kate.llm.registry import DEFAULT_AGENT_MODEL

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXTRA = "the examples extra is not installed (pip install -e '.[examples]')"


def load_example(name: str) -> ModuleType:
    """examples/<name>.py as a module (the examples are scripts, not a package; they import tools.py
    from their own folder)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def examples() -> dict[str, ModuleType]:
    pytest.importorskip("agents", reason=EXTRA)
    pytest.importorskip("langchain_openai", reason=EXTRA)
    pytest.importorskip("langgraph", reason=EXTRA)
    return {name: load_example(name) for name in ("plain_loop", "agents_sdk", "langgraph_agent")}


# ---- a scripted OpenAI-compatible server -------------------------------------------------------


class ScriptedServer:
    """Answers /v1/chat/completions from a script, with no model: while the conversation holds fewer
    tool results than ``calls``, the next call of ``calls``; then a text answer quoting the last tool
    result. Every request body is kept in ``requests``; every answer carries a ``kate`` field."""

    def __init__(self, calls: list[tuple[str, dict]]):
        self.calls, self.requests = calls, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                model = {"id": "scripted-model", "object": "model", "owned_by": "test"}
                self._send({"object": "list", "data": [model]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                self._send(server.answer(body))

            def _send(self, payload: dict):
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def answer(self, body: dict) -> dict:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if len(results) < len(self.calls):
            name, arguments = self.calls[len(results)]
            message["tool_calls"] = [{"id": f"call_{len(results)}", "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(arguments)}}]  # fmt: skip
        else:
            content = results[-1]["content"] if results else "nothing"
            message["content"] = f"From the tool: {content if isinstance(content, str) else json.dumps(content)}"
        finish = "tool_calls" if "tool_calls" in message else "stop"
        return {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                "kate": {"vote": {"n": 8, "winner_votes": 6}, "knowledge": [{"id": "k1", "score": 0.8}]}}  # fmt: skip

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def scripted():
    servers: list[ScriptedServer] = []

    def start(calls: list[tuple[str, dict]]) -> ScriptedServer:
        servers.append(ScriptedServer(calls))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


FRAMEWORKS = ("plain_loop", "agents_sdk", "langgraph_agent")
WEATHER_CALL = ("get_weather", {"city": "Paris", "unit": "celsius"})
WEATHER_RESULT = {"city": "Paris", "temperature": 18.0, "unit": "celsius", "conditions": "partly cloudy"}


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_a_tool_call_runs_to_an_answer(examples, scripted, name):
    server = scripted([WEATHER_CALL])
    summary = examples[name].main(["--base-url", server.base_url, "--question", "Weather in Paris?"])
    assert summary["model"] == "scripted-model"  # the first id of /v1/models
    assert summary["calls"] == [{"name": "get_weather", "arguments": WEATHER_CALL[1], "result": WEATHER_RESULT}]
    assert summary["stopped"] == "answer" and "partly cloudy" in summary["answer"]
    first, second = server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather", "convert_currency", "lookup_country"]
    assert first["messages"][-1] == {"role": "user", "content": "Weather in Paris?"}
    assert second["messages"][-1]["role"] == "tool" and "partly cloudy" in str(second["messages"][-1]["content"])
    assert "kate" not in first  # nothing kate-specific is sent unless asked


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_a_call_to_a_tool_that_does_not_exist_is_no_crash(examples, scripted, name):
    server = scripted([("delete_everything", {}), WEATHER_CALL])
    summary = examples[name].main(["--base-url", server.base_url])
    if name == "agents_sdk":  # the SDK ends the run with a ModelBehaviorError, kept in the summary
        assert summary["answer"] is None and summary["stopped"].startswith("ModelBehaviorError")
    else:  # the loop tells the model, which goes on
        first = summary["calls"][0]
        assert first["name"] == "delete_everything" and "error" in str(first["result"]).lower()
        assert summary["calls"][1]["result"] == WEATHER_RESULT and summary["stopped"] == "answer"


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_step_limit_stops_a_model_that_never_answers(examples, scripted, name):
    server = scripted([WEATHER_CALL] * 10)
    summary = examples[name].main(["--base-url", server.base_url, "--max-steps", "2"])
    assert summary["answer"] is None and summary["stopped"] != "answer"
    assert len(server.requests) == 2 and [c["name"] for c in summary["calls"]] == ["get_weather"] * 2


def test_plain_loop_runs_only_allowlisted_functions_on_json_arguments(examples):
    run_tool = examples["plain_loop"].run_tool
    assert run_tool("get_weather", '{"city": "Tokyo"}')["temperature"] == 24.0
    assert "unknown tool" in run_tool("__import__", '{"name": "os"}')["error"]
    assert "not JSON" in run_tool("get_weather", "city='Tokyo'")["error"]
    assert "JSON object" in run_tool("get_weather", '["Tokyo"]')["error"]
    assert "bad arguments" in run_tool("get_weather", '{"town": "Tokyo"}')["error"]
    lots = '{"amount": "lots", "from_currency": "USD", "to_currency": "EUR"}'
    assert "number" in run_tool("convert_currency", lots)["error"]


def test_plain_loop_sends_kate_options_and_reads_kate_field(examples, scripted):
    plain = examples["plain_loop"]
    server = scripted([WEATHER_CALL])
    summary = plain.main(["--base-url", server.base_url, "--kate"])
    assert all(body["kate"] == plain.KATE_OPTIONS for body in server.requests)
    assert summary["kate"] == [server.answer({"messages": [], "model": "m"})["kate"]] * 2


def test_tool_schemas_of_the_plain_loop_match_the_functions(examples):
    """The hand-written schemas name each function's parameters, and only those."""
    import inspect

    plain = examples["plain_loop"]
    for schema in plain.TOOL_SCHEMAS:
        function = plain.ALLOWED[schema["function"]["name"]]
        params = inspect.signature(function).parameters
        assert set(schema["function"]["parameters"]["properties"]) == set(params)
        required = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
        assert set(schema["function"]["parameters"]["required"]) == required


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_every_request_a_framework_sends_is_one_kate_serve_accepts(examples, scripted, name):
    from kate.serve.request import read_request

    server = scripted([WEATHER_CALL])
    examples[name].main(["--base-url", server.base_url, "--max-tokens", "64"])
    for body in server.requests:
        request = read_request(body)  # raises APIError (a 400 naming the field) on anything kate refuses
        assert request.max_tokens == 64 and request.tool_names == ["get_weather", "convert_currency", "lookup_country"]
    assert server.requests[1]["messages"][2]["tool_calls"][0]["function"]["name"] == "get_weather"


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_each_example_runs_as_a_script(examples, scripted, name):
    server = scripted([("convert_currency", {"amount": 100, "from_currency": "USD", "to_currency": "EUR"})])
    out = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--base-url", server.base_url, "--json"],
                         capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["calls"][0]["result"]["converted"] == 92.59 and summary["stopped"] == "answer"


# ---- against `kate serve` with the default 0.5B model -----------------------------------------

# Greedy (width 1) and no knowledge unless a request asks, short answers: sized for 2 CPU cores (with the
# server's defaults, width 8 and knowledge, one framework's two model calls took minutes there).
KATE_SERVE = [f"llm.model={DEFAULT_AGENT_MODEL}", "llm.n_ctx=8192", "width=1", "knowledge.enabled=false",
              "max_tokens=64"]


@pytest.fixture(scope="module")
def kate_server(examples):
    from kate.serve.process import start_kate_server

    server = start_kate_server(KATE_SERVE)
    yield server
    server.stop()


# (example, question, the tool it needs, arguments it must give)
ASKED = [
    ("plain_loop", "What is the weather in Paris right now?", "get_weather", {"city": "paris"}),
    ("agents_sdk", "Convert 100 USD to EUR.", "convert_currency",
     {"amount": 100, "from_currency": "usd", "to_currency": "eur"}),
    ("langgraph_agent", "What is the capital of Japan?", "lookup_country", {"country": "japan"}),
]


def _lower(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


@pytest.mark.model
@pytest.mark.parametrize(("name", "question", "tool", "arguments"), ASKED, ids=[a[0] for a in ASKED])
def test_the_model_behind_kate_serve_calls_the_right_tool(examples, kate_server, name, question, tool, arguments):
    summary = examples[name].main(["--base-url", kate_server.base_url, "--question", question, "--max-steps", "2",
                                   "--max-tokens", "64"])  # fmt: skip
    first = summary["calls"][0]
    assert first["name"] == tool, summary
    assert {k: _lower(first["arguments"].get(k)) for k in arguments} == arguments, summary
    assert "error" not in first["result"], summary  # the loop ran the tool on the model's arguments
    # The 0.5B model tends to call the tool again instead of answering; the loop must end either way.
    assert summary["answer"] is not None or summary["stopped"] != "answer", summary


@pytest.mark.model
def test_plain_loop_reads_kates_vote_from_kate_serve(examples, kate_server):
    plain = examples["plain_loop"]
    client = plain.OpenAI(base_url=kate_server.base_url, api_key="not-needed")
    model = client.models.list().data[0].id
    options = {**plain.KATE_OPTIONS, "n": 2}  # the documented knobs, a vote small enough for 2 cores
    question = "What is the weather in Tokyo?"
    # seeded, at a low temperature: the vote's samples at the server's default (1.0, a random seed) sometimes
    # all miss on the 0.5B, and this test is about the kate field a plain loop reads, not about sampling
    summary = plain.run(client, model, question, max_steps=1, max_tokens=64, kate_options=options,
                        seed=0, temperature=0.2)  # fmt: skip
    [kate] = summary["kate"]
    assert kate["width"] == 2 and kate["vote"] == "valid_majority" and len(kate["votes"]) == 1, kate
    # the knowledge report is there (None here: the shipped base shows only entries whose calls fit the tools
    # offered, filter_tools, and none is about these tools)
    assert "knowledge" in kate, kate
    assert summary["calls"] and summary["calls"][0]["name"] == "get_weather", summary

"""Tests for kate.envs, kate.sampling.policy/depth, kate.agent: the policy and its loop on a fake model."""

from __future__ import annotations

import json
import warnings
from typing import Literal

import pytest

from kate.agent import DialogueResult, KnowledgeContext, LoopSettings, Policy, Retrieved, StaticKnowledge
from kate.envs import Environment, Observation, PythonFunctionsEnv
from kate.io import append_jsonl, read_jsonl
from kate.llm.fake import FakeChatModel
from kate.sampling import DepthSampler, GreedySampler, WidthSampler, depth_prompt, with_depth_prompt
from kate.sampling.depth import DEPTH_PROMPTS
from kate.toolcall import ToolCall

# --------------------------------------------------------------------------- policies


def turn(model, env, messages, sampler, *, knowledge=None, seed=0, **settings):
    """One user turn of a policy with these loop settings (no system prompt)."""
    return Policy(model, sampler, knowledge, LoopSettings(system_prompt=None, **settings)).run_turn(env, messages, seed=seed)


def dialogue(model, env, user_turns, sampler, *, system_prompt=None, knowledge=None, **settings):
    policy = Policy(model, sampler, knowledge, LoopSettings(system_prompt=system_prompt, **settings))
    return policy.run_dialogue(env, user_turns)


# --------------------------------------------------------------------------- tools


def add(a: int, b: int) -> int:
    """Add two integers.

    Returns their sum.

    Args:
        a: The first number.
        b: The second
            number.
    """
    return a + b


def div(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


def pick(mode: Literal["x", "y"], items: list[int] | None = None, flag: bool = False) -> dict:
    """Echo the choice."""
    return {"mode": mode, "items": items, "flag": flag}


def remember(key: str, value: str, state: dict) -> str:
    """Store a value."""
    state[key] = value
    state["writes"] = state.get("writes", 0) + 1
    return "stored"


def make_env() -> PythonFunctionsEnv:
    return PythonFunctionsEnv([add, div, pick, remember], state={})


def call_text(name: str, **arguments) -> str:
    return json.dumps({"name": name, "arguments": arguments})


USER = [{"role": "user", "content": "What is 1 + 2?"}]

# --------------------------------------------------------------------------- environment


def test_schema_from_hints_and_docstring():
    env = make_env()
    assert isinstance(env, Environment)
    schemas = {t["function"]["name"]: t for t in env.tools()}
    assert schemas["add"] == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "The first number."},
                    "b": {"type": "integer", "description": "The second number."},
                },
                "required": ["a", "b"],
            },
        },
    }
    pick_params = schemas["pick"]["function"]["parameters"]
    assert pick_params["properties"]["mode"] == {"type": "string", "enum": ["x", "y"]}
    assert pick_params["properties"]["items"] == {"type": "array", "items": {"type": "integer"}, "default": None}
    assert pick_params["properties"]["flag"] == {"type": "boolean", "default": False}
    assert pick_params["required"] == ["mode"]
    assert schemas["div"]["function"]["parameters"]["properties"]["a"] == {"type": "number"}
    assert "state" not in schemas["remember"]["function"]["parameters"]["properties"]


def test_execute_ok_and_result_strings():
    env = make_env()
    assert env.execute(ToolCall("add", {"a": 1, "b": 2})) == Observation("3", True, None)
    assert env.execute(ToolCall("div", {"a": 1, "b": 4})).content == "0.25"  # ints accepted for floats
    assert env.execute(ToolCall("add", {"a": 1.0, "b": 2})).content == "3"  # integral number for int
    out = env.execute(ToolCall("pick", {"mode": "y", "items": [1, 2]}))
    assert json.loads(out.content) == {"mode": "y", "items": [1, 2], "flag": False}


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (ToolCall("sub", {"a": 1}), "unknown function 'sub'"),
        (ToolCall("add", {"a": 1}), "missing required argument(s) 'b'"),
        (ToolCall("add", {"a": 1, "b": 2, "c": 3}), "unexpected argument(s) 'c'"),
        (ToolCall("add", {"a": "1", "b": 2}), "add: argument a must be an integer, got string"),
        (ToolCall("add", {"a": True, "b": 2}), "must be an integer, got boolean"),
        (ToolCall("add", {"a": 1.5, "b": 2}), "must be an integer"),
        (ToolCall("div", {"a": False, "b": 2}), "must be a number"),
        (ToolCall("pick", {"mode": "z"}), 'must be one of ["x", "y"]'),
        (ToolCall("pick", {"mode": "x", "items": [1, "2"]}), "argument items[1] must be an integer"),
        (ToolCall("pick", {"mode": "x", "flag": 1}), "must be a boolean"),
        (ToolCall("remember", {"key": "k", "value": "v", "state": {}}), "unexpected argument(s) 'state'"),
        (ToolCall("div", {"a": 1, "b": 0}), "div raised ZeroDivisionError"),
    ],
)
def test_bad_calls_become_failed_observations(call, needle):
    obs = make_env().execute(call)
    assert not obs.ok and needle in obs.error and obs.content.startswith("Error: ")


def test_unknown_function_lists_the_offered_ones():
    obs = make_env().execute(ToolCall("eval", {"source": "1"}))
    assert "available functions: add, div, pick, remember" in obs.content


def test_state_is_injected_and_snapshotted():
    env = make_env()
    env.execute(ToolCall("remember", {"key": "k", "value": "v"}))
    snapshot = env.state()
    assert snapshot == {"k": "v", "writes": 1}
    snapshot["k"] = "changed"
    assert env.state()["k"] == "v"


class Thing:
    pass


def odd(x: Thing) -> None:
    pass


def test_signatures_that_cannot_be_offered_are_rejected():
    def star(*args: int) -> int:
        return 0

    def unresolved(x: "Missing") -> None:  # noqa: F821
        pass

    with pytest.raises(ValueError, match="star"):
        PythonFunctionsEnv([star])
    with pytest.raises(ValueError, match="odd: parameter 'x': type hint .* cannot be expressed"):
        PythonFunctionsEnv([odd])
    with pytest.raises(ValueError, match="cannot resolve type hints"):
        PythonFunctionsEnv([unresolved])
    with pytest.raises(ValueError):
        PythonFunctionsEnv([lambda x: x])
    with pytest.raises(ValueError, match="two tool functions"):
        PythonFunctionsEnv([add, add])


# --------------------------------------------------------------------------- the loop


def test_loop_calls_add_then_answers():
    model = FakeChatModel(script=[call_text("add", a=1, b=2), "The sum is 3."])
    result = turn(model, make_env(), USER, GreedySampler())
    assert result.end_reason == "answer" and result.answer == "The sum is 3."
    assert result.calls == [ToolCall("add", {"a": 1, "b": 2})]
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assistant, tool = result.messages[1], result.messages[2]
    assert assistant["tool_calls"][0]["function"]["name"] == "add"
    assert tool == {"role": "tool", "tool_call_id": assistant["tool_calls"][0]["id"], "name": "add", "content": "3"}
    assert model.requests[1]["messages"][2]["content"] == "3"  # the model saw the result
    assert all(r["n"] == 1 and r["temperature"] == 0.0 for r in model.requests)
    assert [r["seed"] for r in model.requests] == [0, 1]
    assert USER == [{"role": "user", "content": "What is 1 + 2?"}]  # input not mutated
    assert result.steps[0].observations[0].content == "3" and result.steps[0].executed
    json.dumps(result.to_dict())


def test_hermes_calls_and_parallel_calls_execute_in_order():
    text = ('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>\n'
            '<tool_call>\n{"name": "div", "arguments": {"a": 1, "b": 0}}\n</tool_call>')
    model = FakeChatModel(script=[text, "done"])
    result = turn(model, make_env(), USER, GreedySampler())
    tools = [m for m in result.messages if m["role"] == "tool"]
    assert [t["content"] for t in tools] == ["3", "Error: div raised ZeroDivisionError: float division by zero"]
    ids = [c["id"] for c in result.messages[1]["tool_calls"]]
    assert [t["tool_call_id"] for t in tools] == ids and len(set(ids)) == 2


def test_multi_turn_history_continues():
    model = FakeChatModel(script=[call_text("add", a=1, b=2), "3", call_text("remember", key="x", value="3"), "ok"])
    result = dialogue(model, make_env(), ["1+2?", "remember it as x"], GreedySampler(), system_prompt="You are a helper.")
    assert isinstance(result, DialogueResult)
    assert [t.end_reason for t in result.turns] == ["answer", "answer"]
    second_turn_request = model.requests[2]["messages"]
    assert [m["role"] for m in second_turn_request] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert second_turn_request[-1]["content"] == "remember it as x"
    assert result.calls_per_turn == [
        [ToolCall("add", {"a": 1, "b": 2})],
        [ToolCall("remember", {"key": "x", "value": "3"})],
    ]
    assert result.state == {"x": "3", "writes": 1}
    assert result.messages == result.turns[-1].messages
    data = json.loads(json.dumps(result.to_dict()))
    assert data["calls_per_turn"][1] == [{"name": "remember", "arguments": {"key": "x", "value": "3"}}]
    assert data["turns"][1]["messages"][0] == {"role": "user", "content": "remember it as x"}
    assert [r["seed"] for r in model.requests] == [0, 1, 1000, 1001]  # turn t starts at seed + 1000 * t


def _counting_env() -> tuple[PythonFunctionsEnv, list]:
    executed = []

    def look(path: str) -> str:
        """Look at a path."""
        executed.append(path)
        return f"contents of {path}"

    return PythonFunctionsEnv([look, add]), executed


def test_repeat_end_turn():
    env, executed = _counting_env()
    model = FakeChatModel(script=[call_text("look", path="/a")], repeat_last=True)
    result = turn(model, env, USER, GreedySampler(), repeat_policy="end_turn")
    assert result.end_reason == "repeat" and executed == ["/a"] and len(model.requests) == 2
    assert result.steps[1].repeat_of == 0 and not result.steps[1].executed
    assert result.messages[-1]["role"] == "tool"  # no dangling unanswered tool_calls
    assert result.calls == [ToolCall("look", {"path": "/a"})]


def test_repeat_warn_then_end():
    env, executed = _counting_env()
    model = FakeChatModel(script=[call_text("look", path="/a")], repeat_last=True)
    result = turn(model, env, USER, GreedySampler(), repeat_policy="warn")
    assert result.end_reason == "repeat" and executed == ["/a"] and len(model.requests) == 3
    warning = model.requests[2]["messages"][-1]
    assert warning["role"] == "tool" and "already made this exact call" in warning["content"]
    assert "contents of /a" in warning["content"] and "answer the user" in warning["content"]
    assert [s.executed for s in result.steps] == [True, False, False]


def test_repeat_warn_then_answer():
    env, executed = _counting_env()
    model = FakeChatModel(script=[call_text("look", path="/a"), call_text("look", path="/a"), "It holds a."])
    result = turn(model, env, USER, GreedySampler(), repeat_policy="warn")
    assert result.end_reason == "answer" and result.answer == "It holds a." and executed == ["/a"]


def test_repeat_detection_is_canonical_for_parallel_sets():
    env, executed = _counting_env()
    first = [{"name": "look", "arguments": {"path": "/a"}}, {"name": "add", "arguments": {"a": 1, "b": 2}}]
    again = [{"name": "add", "arguments": {"b": 2, "a": 1}}, {"name": "look", "arguments": {"path": "/a"}}]
    model = FakeChatModel(script=[json.dumps(first), json.dumps(again), "done"])
    result = turn(model, env, USER, GreedySampler(), repeat_policy="warn")
    tool_msgs = model.requests[2]["messages"][-2:]
    assert "Its result was:\n3\n" in tool_msgs[0]["content"]  # add's earlier result, matched by call
    assert "contents of /a" in tool_msgs[1]["content"]
    assert executed == ["/a"] and result.end_reason == "answer"


def test_repeat_off_executes_until_max_steps():
    env, executed = _counting_env()
    model = FakeChatModel(script=[call_text("look", path="/a")], repeat_last=True)
    result = turn(model, env, USER, GreedySampler(), repeat_policy="off", max_steps=4)
    assert result.end_reason == "max_steps" and executed == ["/a"] * 4 and len(result.steps) == 4
    assert len(result.calls) == 4


def test_max_steps_with_distinct_calls():
    env, executed = _counting_env()
    counter = iter(range(100))
    model = FakeChatModel(script=[lambda m, t, n: [call_text("look", path=f"/{next(counter)}")] * n], repeat_last=True)
    result = turn(model, env, USER, GreedySampler(), max_steps=3)
    assert result.end_reason == "max_steps" and result.answer is None and executed == ["/0", "/1", "/2"]


def test_malformed_call_is_recorded_and_shown():
    model = FakeChatModel(script=['{"name": "add", "arguments": {"a": 1', "3"])
    result = turn(model, make_env(), USER, GreedySampler())
    assert result.steps[0].parse_error and not result.steps[0].executed
    note = model.requests[1]["messages"][-1]
    assert note["role"] == "user" and "could not be read" in note["content"]
    assert result.end_reason == "answer" and result.calls == []


def test_environment_that_raises_cannot_crash_the_loop():
    class Broken:
        def tools(self):
            return []

        def execute(self, call):
            raise RuntimeError("backend down")

        def state(self):
            return {}

    model = FakeChatModel(script=[call_text("add", a=1, b=2), "sorry"])
    result = turn(model, Broken(), USER, GreedySampler())
    assert "backend down" in result.steps[0].observations[0].content and result.answer == "sorry"


def test_retrieve_hook_text_lands_inside_the_user_message():
    seen = []

    def knowledge(user_text, history, context):
        seen.append((user_text, [m["role"] for m in history], context.kind))
        return Retrieved("Related experience: use add.", query=user_text)

    model = FakeChatModel(script=["3", "7"])
    result = dialogue(model, make_env(), ["1+2?", "3+4?"], GreedySampler(), system_prompt="Be brief.", knowledge=knowledge)
    assert seen == [("1+2?", ["system"], "default"), ("3+4?", ["system", "user", "assistant"], "default")]
    user = model.requests[0]["messages"][-1]
    assert user == {"role": "user", "content": "1+2?\n\nRelated experience: use add."}
    assert [m["role"] for m in model.requests[0]["messages"]] == ["system", "user"]
    assert result.turns[0].knowledge == "Related experience: use add." and result.turns[0].user == "1+2?"


def test_width_sampler_makes_one_request_with_n_per_step():
    outputs = [call_text("add", a=1, b=2), json.dumps({"name": "add", "arguments": {"b": 2, "a": 1}}), "3",
               '{"name": "add", "arguments": {']
    model = FakeChatModel(script=[lambda m, t, n: outputs[:n], ["3", "3", "three", call_text("add", a=1, b=2)]])
    result = turn(model, make_env(), USER, WidthSampler(n=4))
    assert len(model.requests) == 2 and all(r["n"] == 4 and r["temperature"] == 1.0 for r in model.requests)
    assert result.calls == [ToolCall("add", {"a": 1, "b": 2})] and result.answer == "3"
    vote = result.steps[0].vote
    assert vote["method"] == "valid_majority" and vote["chosen"]["votes"] == 2 and vote["margin"] == pytest.approx(0.25)
    assert vote["n_failed"] == 1
    assert result.steps[0].usage.completion_tokens == sum(len(o) for o in outputs)


def test_width_sampler_with_critic_and_all_failed():
    bad = '{"name": "add", "arguments": {'
    model = FakeChatModel(script=[[call_text("add", a=1, b=2), call_text("add", a=2, b=2)], "2", [bad, bad], "4"])
    result = turn(model, make_env(), USER, WidthSampler(n=2, aggregate="critic"), repeat_policy="off")
    assert [r["n"] for r in model.requests] == [2, 1, 2, 2]  # no critic request when nothing to choose
    assert result.calls == [ToolCall("add", {"a": 2, "b": 2})]
    assert result.steps[1].vote["failed"] and result.steps[1].parse_error
    assert result.answer == "4"
    with pytest.raises(ValueError):
        WidthSampler(aggregate="best")


def test_depth_prompt_in_request_not_in_history():
    model = FakeChatModel(script=[call_text("add", a=1, b=2), "3"])
    result = turn(model, make_env(), USER, DepthSampler(kinds=("state", "intent")))
    for request in model.requests:
        assert request["messages"][-1] == {"role": "user", "content": depth_prompt(("state", "intent"))}
        assert sum(m["content"] == depth_prompt(("state", "intent")) for m in request["messages"]) == 1
    assert all(m.get("content") != depth_prompt(("state", "intent")) for m in result.messages)
    assert result.answer == "3"


def test_depth_prompts():
    full = depth_prompt(("state", "reflection", "intent"))
    assert all(text in full for text in DEPTH_PROMPTS.values())
    assert DEPTH_PROMPTS["reflection"] in depth_prompt("reflection") and DEPTH_PROMPTS["state"] not in depth_prompt(
        "reflection")
    messages = [{"role": "user", "content": "hi"}]
    out = with_depth_prompt(messages, "intent")
    assert messages == [{"role": "user", "content": "hi"}] and len(out) == 2 and out[-1]["role"] == "user"
    with pytest.raises(ValueError):
        depth_prompt(("mood",))
    with pytest.raises(ValueError):
        DepthSampler(kinds=())


def test_bad_loop_arguments():
    model = FakeChatModel(script=["x"])
    with pytest.raises(ValueError):
        turn(model, make_env(), USER, GreedySampler(), repeat_policy="sometimes")
    with pytest.raises(ValueError):
        turn(model, make_env(), [{"role": "assistant", "content": "hi"}], GreedySampler())


# --------------------------------------------------------------------------- trajectories


def _dialogue(answer: str) -> DialogueResult:
    model = FakeChatModel(script=[call_text("add", a=1, b=2), answer])
    return dialogue(model, make_env(), ["1+2?"], GreedySampler())


def test_trajectory_jsonl_round_trip(tmp_path):
    path = tmp_path / "runs" / "traj.jsonl"
    first, second = _dialogue("3"), _dialogue("three")
    append_jsonl(path, first)
    append_jsonl(path, second.to_dict())
    records = read_jsonl(path)
    assert records == [first.to_dict(), second.to_dict()]
    assert path.read_text().count("\n") == 2


def test_truncated_last_line_is_skipped_and_repaired(tmp_path):
    path = tmp_path / "traj.jsonl"
    append_jsonl(path, {"id": 1})
    with path.open("a") as f:
        f.write('{"id": 2, "messages": [')
    with pytest.warns(UserWarning, match="truncated"):
        assert read_jsonl(path) == [{"id": 1}]
    with pytest.warns(UserWarning, match="truncated"):
        append_jsonl(path, {"id": 3})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_jsonl(path) == [{"id": 1}, {"id": 3}]


def test_truncated_multibyte_character(tmp_path):
    path = tmp_path / "traj.jsonl"
    append_jsonl(path, {"id": 1})
    with path.open("ab") as f:
        f.write('{"text": "é'.encode()[:-1])
    with pytest.warns(UserWarning):
        assert read_jsonl(path) == [{"id": 1}]


def test_corrupt_middle_line_raises_with_file_and_line(tmp_path):
    path = tmp_path / "traj.jsonl"
    path.write_text('{"id": 1}\n{"id": \n{"id": 3}\n')
    with pytest.raises(ValueError, match=r"traj\.jsonl:2"):
        read_jsonl(path)


def test_a_call_repeated_within_one_step_runs_once():
    env, log = _counting_env()
    twice = call_text("look", path="/a") + "\n" + call_text("look", path="/a")
    model = FakeChatModel([twice, "done"])
    result = turn(model, env, USER, GreedySampler())
    assert log == ["/a"] and result.steps[0].calls == (ToolCall("look", {"path": "/a"}),)
    env_off, log_off = _counting_env()
    turn(FakeChatModel([twice, "done"]), env_off, USER, GreedySampler(), repeat_policy="off")
    assert log_off == ["/a", "/a"]


def test_the_same_malformed_output_twice_ends_the_turn():
    broken = '{"name": "add", "arguments": {"a": 1, "b": 2}]'
    model = FakeChatModel([broken], repeat_last=True)
    result = turn(model, make_env(), USER, GreedySampler(), max_steps=10)
    assert result.end_reason == "repeat" and len(result.steps) == 2
    assert result.steps[1].repeat_of == 0 and result.steps[1].parse_error


# --------------------------------------------------------------------------- the policy


def test_policy_step_injects_knowledge_once_and_records_the_prompt():
    model = FakeChatModel([call_text("add", a=1, b=2)])
    policy = Policy(model, GreedySampler(), StaticKnowledge("Hint: add."))
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "1+2?"}]
    done = policy.step(messages, make_env().tools(), seed=7, context=KnowledgeContext("single_turn"))
    assert done.step.calls == (ToolCall("add", {"a": 1, "b": 2}),) and done.knowledge == "Hint: add."
    assert done.prompt[-1] == {"role": "user", "content": "1+2?\n\nHint: add."}
    assert model.requests[0]["messages"] == done.prompt and model.requests[0]["seed"] == 7
    assert messages[-1]["content"] == "1+2?"  # the caller's history is not touched


def test_knowledge_goes_to_the_last_user_message_before_tool_results():
    model = FakeChatModel(["3"])
    history = [{"role": "user", "content": "1+2?"},
               {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function",
                                                                     "function": {"name": "add", "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "c", "name": "add", "content": "3"}]  # fmt: skip
    done = Policy(model, GreedySampler(), StaticKnowledge("K")).step(history, None)
    assert done.prompt[0]["content"] == "1+2?\n\nK" and done.prompt[1:] == history[1:]


def test_one_call_is_a_loop_setting_that_reaches_a_wrapped_sampler():
    two = call_text("add", a=1, b=2) + "\n" + call_text("add", a=3, b=4)
    depth = DepthSampler(kinds=("intent",), inner=WidthSampler(n=2))
    result = turn(FakeChatModel([[two, two], ["done", "done"]]), make_env(), USER, depth, one_call=True)
    assert result.steps[0].calls == (ToolCall("add", {"a": 1, "b": 2}),)
    whole = turn(FakeChatModel([[two, two], ["done", "done"]]), make_env(), USER, depth)
    assert len(whole.steps[0].calls) == 2


def test_dialogue_turns_are_seeded_by_a_fixed_stride_and_new_tools_can_arrive():
    model = FakeChatModel(["a", "b"])
    arrived = []
    result = Policy(model, GreedySampler(), settings=LoopSettings(system_prompt="none")).run_dialogue(
        make_env(), ["x", [{"role": "user", "content": "y"}]], seed=5, before_turn=arrived.append)
    assert [r["seed"] for r in model.requests] == [5, 1005] and arrived == [0, 1]
    assert [m["role"] for m in result.messages] == ["user", "assistant", "user", "assistant"]


def test_a_model_error_ends_the_dialogue_as_a_recorded_failure():
    def overflow(messages, tools, n):
        raise ValueError("the prompt does not fit the context")

    result = dialogue(FakeChatModel(["ok", overflow]), make_env(), ["first", "second"], GreedySampler())
    assert len(result.turns) == 1 and result.error == "turn 1: the prompt does not fit the context"
    assert result.to_dict()["error"] == result.error


def test_loop_settings_refuse_bad_values_naming_them():
    with pytest.raises(ValueError, match="repeat_policy"):
        LoopSettings(repeat_policy="sometimes")
    with pytest.raises(ValueError, match="system_prompt 'kat'"):
        LoopSettings(system_prompt="kat")
    with pytest.raises(ValueError, match="max_steps"):
        LoopSettings(max_steps=1000)
    assert LoopSettings(system_prompt="none").system_message is None
    assert set(LoopSettings.help()) == {"max_steps", "repeat_policy", "system_prompt", "one_call", "max_malformed",
                                        "repeat_match", "answer_prefill", "answer_at_max_steps", "echo_policy", "call_prefill"}  # fmt: skip

"""AppWorld's code-action side without AppWorld: extraction, normalization, the stand-in world's
interpreter (no eval/exec), the code vote and merge, and kate's one loop over the code environment
(the AppWorld task, run by the one runner), on a scripted model."""

from __future__ import annotations

import pytest

from kate.agent import LoopSettings, Policy, StaticKnowledge
from kate.appworld.code_env import CodeEnvironment
from kate.appworld.interpreter import Interpreter
from kate.appworld.stand_in import STAND_IN_TASKS, StandInWorld
from kate.eval.runner import open_run, run_task
from kate.llm.fake import FakeChatModel
from kate.sampling.code import GreedyCode, WidthCode, vote_code
from kate.tasks.appworld import AppWorldTask, Worlds
from kate.toolcall import ToolCall
from kate.toolcall.code import extract_code, normalize_code

CODE_LOOP = LoopSettings(max_steps=20, repeat_policy="warn", system_prompt=None, max_malformed=2)


def code_of(step):
    return step.calls[0].arguments["code"] if step.calls else None


def solve(model, task_id, sampler=None, knowledge=None, **settings):
    """One stand-in task through the AppWorld task (the policy's loop over the code environment)."""
    policy = Policy(model, sampler or GreedyCode(), knowledge, LoopSettings(**{**CODE_LOOP.to_dict(), **settings}))
    task = AppWorldTask(Worlds("stand_in"), [task_id])
    trace = task.solve(task.items()[0], policy, 0)
    return trace, task.score(task.items()[0], trace)


def fenced(code: str, prose: str = "Let me look.") -> str:
    return f"{prose}\n```python\n{code}\n```\nDone."


# -------------------------------------------------------------------------- extraction


def test_extract_takes_the_first_python_block():
    action = extract_code("text\n```python\nx = 1\n```\nmore\n```python\ny = 2\n```")
    assert action.code == "x = 1" and action.error is None


def test_extract_accepts_bare_fences_and_bare_api_code_but_not_prose():
    assert extract_code("```\nprint(apis.notes.show_notes(access_token=t))\n```").code
    assert extract_code("apis.supervisor.complete_task(answer=3)").code == "apis.supervisor.complete_task(answer=3)"
    prose = extract_code("I would call apis.notes.show_notes to list the notes.")
    assert prose.code is None and "no ```python" in prose.error
    assert extract_code("").error == "empty reply: no code"
    assert extract_code("```json\n{\"a\": 1}\n```").code is None


def test_normalization_ignores_comments_quotes_and_spacing():
    a = "x = apis.notes.show_notes(access_token='t')  # list\nprint(x)"
    b = '# first list them\nx = apis.notes.show_notes( access_token = "t" )\n\nprint( x )'
    assert normalize_code(a) == normalize_code(b)
    assert normalize_code("x = 1") != normalize_code("x = 2")
    assert normalize_code("x = (") == "x = ("  # unparsable code keys on its collapsed text


# -------------------------------------------------------------------------- interpreter


def test_interpreter_runs_loops_conditions_and_api_calls():
    calls = []
    interp = Interpreter({"app": {"add": lambda a, b: calls.append((a, b)) or a + b}})
    out = interp.run("total = 0\nfor i in [1, 2, 3]:\n    if i != 2:\n        total = apis.app.add(a=total, b=i)\n"
                     "print(f'total={total}', 'ok')")
    assert out == "total=4 ok" and calls == [(0, 1), (1, 3)]
    assert interp.run("print(total * 2)") == "8"  # variables persist between steps


@pytest.mark.parametrize("code", [
    "import os", "__import__('os').system('true')", "open('/etc/passwd')", "(lambda: 1)()",
    "apis.app.add.__globals__", "x = [i for i in range(3)]", "eval('1+1')", "exec('x=1')",
    "apis.app.add(1, 2)", "apis.nope.add(a=1, b=2)", "while True:\n    pass", "print(undefined_name)",
])  # fmt: skip
def test_interpreter_refuses_what_it_does_not_allow_as_output_not_exception(code):
    interp = Interpreter({"app": {"add": lambda a, b: a + b}})
    out = interp.run(code)
    assert out.startswith("Execution failed") or "Execution failed" in out


def test_interpreter_reports_syntax_errors():
    assert "SyntaxError" in Interpreter({}).run("x = (")


# -------------------------------------------------------------------------- stand-in world


@pytest.mark.parametrize("task_id", sorted(STAND_IN_TASKS))
def test_every_stand_in_solution_passes_its_tests(task_id):
    world = StandInWorld(task_id)
    out = world.execute(STAND_IN_TASKS[task_id].solution_code)
    assert "Execution failed" not in out, out
    assert world.task_completed()
    result = world.evaluate()
    assert result["success"] and result["pass_count"] == result["num_tests"], result


def test_stand_in_world_checks_answers_and_logins():
    world = StandInWorld("notes_count")
    assert "invalid access token" in world.execute("apis.notes.show_notes(access_token='guess')")
    world.execute("apis.supervisor.complete_task(answer=4)")
    assert world.task_completed() and not world.evaluate()["success"]
    assert "already completed" in world.execute("print(1)")


def test_stand_in_api_docs_and_tool_schemas():
    world = StandInWorld("notes_create")
    out = world.execute("print(apis.api_docs.show_api_doc(app_name='notes', api_name='create_note'))")
    assert "access_token" in out and "title" in out
    names = {s["function"]["name"] for s in world.tool_schemas()}
    assert {"notes__login", "notes__create_note", "supervisor__complete_task"} <= names
    assert "missing required argument" in world.execute("apis.notes.login(username='ada@example.com')")


# -------------------------------------------------------------------------- vote and merge


def test_code_vote_counts_normalized_code_and_breaks_ties_by_first_sample():
    actions = [extract_code(t) for t in [fenced("x = 1  # a"), fenced("x=1"), fenced("y = 2"), "no code", fenced("y = 2")]]
    winner, candidates = vote_code(actions)
    assert winner.code == "x = 1  # a" and winner.votes == 2 and len(candidates) == 2
    tie, _ = vote_code([extract_code(fenced("b = 1")), extract_code(fenced("a = 1"))])
    assert tie.code == "b = 1"
    assert vote_code([extract_code("prose")]) == (None, ())


def test_width_code_majority_and_merge():
    texts = [fenced("x = 1"), fenced("x = 1"), fenced("y = 2"), "nothing"]
    step = WidthCode(n=4).act(FakeChatModel([texts]), [{"role": "user", "content": "t"}])
    vote = step.vote.to_dict()
    assert code_of(step) == "x = 1" and vote["n_without_code"] == 1 and vote["margin"] == 0.25
    assert step.calls == (ToolCall("python", {"code": "x = 1"}),)
    model = FakeChatModel([texts, fenced("z = x + 1")])
    merged = WidthCode(n=4, merge=True).act(model, [{"role": "user", "content": "t"}])
    assert code_of(merged) == "z = x + 1" and merged.vote.to_dict()["method"] == "merge"
    assert "Candidate 2" in model.requests[1]["messages"][-1]["content"]
    fallback = WidthCode(n=4, merge=True).act(FakeChatModel([texts, "I cannot decide"]), [{"role": "user", "content": "t"}])
    assert code_of(fallback) == "x = 1" and fallback.vote.to_dict()["merge_fallback"]


# -------------------------------------------------------------------------- loop


def test_loop_solves_a_stand_in_task_with_a_scripted_model():
    model = FakeChatModel([
        fenced("accounts = apis.supervisor.show_account_passwords()\nprint(accounts)"),
        fenced("token = apis.notes.login(username='ada@example.com', password=accounts[0]['password'])"
               "['access_token']\nnotes = apis.notes.show_notes(access_token=token)\nprint(len(notes))"),
        fenced("apis.supervisor.complete_task(answer=len(notes))"),
    ])  # fmt: skip
    trace, score = solve(model, "notes_count", max_steps=6)
    assert trace["end"] == "finished" and trace["n_steps"] == 3 and score["valid"]
    assert trace["steps"][1]["output"] == "3"
    system, user = model.requests[0]["messages"][:2]
    assert "Ada Byron" in system["content"] and "How many notes" in user["content"]
    assert model.requests[2]["messages"][-1] == {"role": "user", "content": "Output:\n```\n3\n```"}
    assert model.requests[1]["messages"][2]["content"].startswith("```python\naccounts =")
    assert all(r["tools"] is None or r["tools"] == [] for r in model.requests)


def test_loop_ends_on_repeats_and_on_replies_without_code():
    repeat, _ = solve(FakeChatModel([fenced("print(1)")], repeat_last=True), "notes_count", max_steps=10)
    assert repeat["end"] == "repeat" and repeat["n_steps"] == 3 and repeat["steps"][1]["repeat_of"] == 0
    silent, score = solve(FakeChatModel(["I will think.", "Still thinking."]), "notes_count", max_steps=10)
    assert silent["end"] == "malformed" and silent["steps"][0]["error"] and not score["valid"]
    capped, _ = solve(FakeChatModel([fenced(f"print({i})") for i in range(6)]), "notes_count", max_steps=4)
    assert capped["end"] == "max_steps" and capped["n_steps"] == 4


def test_code_environment_refuses_other_actions_and_cuts_long_output_only_in_the_prompt():
    env = CodeEnvironment(StandInWorld("notes_count"), max_output_chars=5)
    assert not env.execute(ToolCall("rm", {"path": "/"})).ok
    assert env.execute(ToolCall("python", {"code": "print('abcdefghij')"})).content == "abcdefghij"
    [shown] = env.action_format.results([ToolCall("python", {"code": ""})], ["abcdefghij"])
    assert shown["content"].startswith("Output:\n```\nabcde\n... [5 more characters]")


def test_loop_puts_knowledge_inside_the_first_user_turn():
    model = FakeChatModel([fenced("apis.supervisor.complete_task(answer=3)")])
    trace, _ = solve(model, "notes_count", knowledge=StaticKnowledge("KNOW"))
    user = model.requests[0]["messages"][1]
    assert user["role"] == "user" and user["content"].endswith("\n\nKNOW") and trace["knowledge"] == "KNOW"


def test_the_appworld_task_runs_through_the_one_runner_and_resumes(tmp_path):
    scripted = [fenced(STAND_IN_TASKS[t].solution_code) for t in sorted(STAND_IN_TASKS)]
    task = AppWorldTask(Worlds("stand_in"), sorted(STAND_IN_TASKS))
    policy = Policy(FakeChatModel(scripted), GreedyCode(), None, CODE_LOOP)
    store = open_run(tmp_path / "run", arm="direct", task=task, policy=policy, seed=0, config={"arm": "direct"})
    records = run_task(task, policy, store, seed=0)
    assert [r["id"] for r in records] == sorted(STAND_IN_TASKS) and all(r["valid"] for r in records)
    assert all(r["category"] == "appworld" and r["evaluation"]["success"] for r in records)
    again = run_task(task, Policy(FakeChatModel([]), GreedyCode(), None, CODE_LOOP), store, seed=0)
    assert again == records  # nothing re-run: the model has no script left

"""What the default model gets wrong on BFCL's TRAINING halves, and which of it an example could fix
(issue: knowledge that helps). Arms run by kate's one runner into ``bench/runs/train_folds/<arm>/``
(resumable), composed as ``kate eval arm=direct split=train`` composes them:

* ``direct``: greedy, no knowledge (conf/arm/direct.yaml), kate eval's loop settings;
* ``direct_answer``: the same with the turn-end options (``kate/agent/turn_end.py``:
  ``repeat_policy=answer``, ``repeat_match=fed``, ``answer_at_max_steps``), multi-turn only: what
  the loop-side options do to BFCL's repeat loops, measured on the training half;
* ``pattern``: single-turn knowledge as a call pattern on the request's own tools
  (conf/arm/pattern.yaml, ``kate/retrieval/pattern.py``), on the same single-turn entries as
  ``direct``: fixed / broken against it per category.
* the several-call experiments (issue 15, in this order, each on the same entries; ``ARMS`` says what
  each adds): ``pattern_multi`` (only several-call examples, one call per line: no output with several
  calls), ``pattern_multi_list`` (the same as a ```json list: several calls in every output that got
  one), ``pattern_list`` (the list form, any example: parallel and parallel_multiple 0 -> 4 of 12
  each, 6 of 12 ``multiple`` broken by the example's call count), ``pattern_list_typed`` (unquoted
  numeric placeholders: copied verbatim), ``pattern_gated`` (the call-count predictor's gate: reach
  fell to 4 of 12), ``multi_call`` (the gate, examples with as many functions as offered, at any
  similarity: the chosen preset, conf/retrieval/single_turn_multi_call.yaml), ``multi_call_loose``
  (without the function-count match: worse on parallel_multiple) and ``multi_call_counts`` (two examples
  of different call counts, ``distinct_call_counts``: the model had copied the one example's count).

    .venv/bin/python bench/failure_table.py --single 20 --multi 10        # run direct (then report)
    .venv/bin/python bench/failure_table.py --arms direct_answer --single 0 --multi 10
    .venv/bin/python bench/failure_table.py --arms pattern --single 12 --multi 0 --categories simple_python,multiple,parallel,parallel_multiple
    .venv/bin/python bench/failure_table.py --arms pattern_multi,pattern_multi_list --single 12 --multi 0 --categories parallel,parallel_multiple
    .venv/bin/python bench/failure_table.py --arms pattern_list,pattern_list_typed,pattern_gated,multi_call --single 12 --multi 0 --categories simple_python,multiple,parallel,parallel_multiple
    .venv/bin/python bench/failure_table.py --arms multi_call_loose --single 12 --multi 0 --categories multiple,parallel,parallel_multiple
    .venv/bin/python bench/failure_table.py --arms multi_call --single 12 --multi 0 --categories <all 13 single-turn>
    .venv/bin/python bench/failure_table.py --arms multi_call_counts --single 12 --multi 0 --categories <all 13 single-turn>
    .venv/bin/python bench/failure_table.py --report-only

The second model (its folders under models/<name>/): multi-turn ST as shipped against the KATE authors'
top-3 at >= 0.5 (``st_kate``), after the variant leak was closed (kate.bfcl.data.BFCLEntry.variant_ids):

    .venv/bin/python bench/failure_table.py --model qwen2.5-coder-1.5b-instruct-q4_k_m --arms direct,st,st_kate --single 0 --multi 16

Its echo answers (``None`` after ``mkdir``, a ``<tool_response>`` written as the reply, then copied by every
later turn): the loop's ``echo_policy=answer`` (``direct_echo``: stopped after 5 dialogues, no turn changed, the
asked answer was copied instead; kept as made, ``FROZEN``), then ``echo_policy=act`` without and with ST
(``direct_act``, ``st_act``):

    .venv/bin/python bench/failure_table.py --model qwen2.5-coder-1.5b-instruct-q4_k_m --arms direct_act,st_act --single 0 --multi 16
    .venv/bin/python bench/failure_table.py --model qwen2.5-coder-1.5b-instruct-q4_k_m --arms st_kate_act --single 0 --multi 16

ES written from the model's own failures (issue 15): ``es_kate_act`` (the shipped ES, top-3 at >= 0.5) against
``es_fail_kate_act`` (the ES of direct_act's failed turns written from its attempts: build the base first, about
ten minutes with the 0.5B writer, the other entries from the cache):

    .venv/bin/kate kb action=build kb=bfcl_es_attempts
    .venv/bin/python bench/failure_table.py --model qwen2.5-coder-1.5b-instruct-q4_k_m --arms es_kate_act,es_fail_kate_act --single 0 --multi 16

Writes ``bench/results/failure_table.{json,md}``: per single-turn category the failures by kind; per
multi-turn dialogue the turn ends and the argument-form failures; the "could an example fix it"
column is a judgement per kind, stated in ``FIXABLE`` (not measured here; the selection runs of
``knowledge_bases/selection_llm.json`` measure what examples did).
"""

from __future__ import annotations

import argparse
import ast
import json
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from hydra.utils import instantiate  # noqa: E402

import kate.configs  # noqa: E402,F401  (the typed job schemas)
from kate.agent.turn_end import echoes_result  # noqa: E402
from kate.bfcl.data import SINGLE_TURN, load_entries  # noqa: E402
from kate.cli import CONF_DIR  # noqa: E402
from kate.eval import failure_arms  # noqa: E402
from kate.eval.arms import run_composed  # noqa: E402
from kate.eval.failure_arms import ARMS, CONTROLS, FROZEN  # noqa: E402
from kate.eval.paired_counts import multi_turn_paired, paired  # noqa: E402
from kate.eval.run_store import load_run  # noqa: E402
from kate.io import atomic_write_json, atomic_write_text  # noqa: E402
from kate.tasks.bfcl import BFCLTask  # noqa: E402
from kate.eval.model_folders import DEFAULT_MODEL, model_folder  # noqa: E402

RUNS = ROOT / "bench" / "runs" / "train_folds"
RESULT = ROOT / "bench" / "results" / "failure_table"
FS_FUNCTIONS = {"cd", "ls", "mv", "cp", "cat", "rm", "rmdir", "mkdir", "touch", "grep", "tail", "wc", "sort", "diff",
                "du", "find", "echo"}  # fmt: skip
FIXABLE = {  # kind -> (could an example fix it?, how)
    "parallel cut to fewer calls": ("yes", "an example answered with several calls (the pattern, names mapped or masked)"),
    "missing call": ("maybe", "an example of a call for a like request"),
    "call where none was due": ("maybe", "a no-call example; the guarded template's 'answer without a call'"),
    "wrong function": ("maybe", "an example using the right function of these tools"),
    "argument value or form": ("sometimes", "the argument forms the tools declare; example values get copied"),
    "missing or unexpected argument": ("sometimes", "an example with the function's full argument set"),
    "malformed output": ("no", "the output format: the parser and the prompt, not knowledge"),
    "wrong number of calls": ("maybe", "an example with the right number of calls"),
    "turn ended by a repeat": ("partly", "examples that end the turn with an answer; the loop's turn-end options"),
    "turn hit the step cap": ("partly", "as for repeats"),
    "path where cd was due": ("yes", "a state-aware example: cd first, then relative names"),
    "turn without a call where calls were due": ("maybe", "an example of the turn's calls"),
}


def places(model: str | None) -> tuple[Path, Path]:
    """(run folders, results stem) of a model: the default model's bench/runs/train_folds and
    bench/results/failure_table; another model's under models/<name>/ in both."""
    return model_folder(RUNS, model), model_folder(RESULT.parent, model) / RESULT.name


def compose_arm(arm: str, model: str | None = None) -> dict:
    return failure_arms.compose_arm(arm, model, conf_dir=CONF_DIR)


def run(arm: str, model, single: int, multi: int, categories: tuple[str, ...] = SINGLE_TURN,
        model_name: str | None = None) -> None:
    c = compose_arm(arm, model_name)
    entries = [e for cat in categories for e in load_entries(cat, "train", single)] if single else []
    entries += load_entries("multi_turn_base", "train", multi) if multi else []  # the long part last
    run_composed(c, model, BFCLTask(entries, "train"), places(model_name)[0] / arm / "seed_0", arm=arm,
                 desc=f"{arm} (train folds)")  # fmt: skip


def _value(record: dict, key: str):
    value = record.get(key)
    if isinstance(value, str):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return value
    return value


def single_kind(record: dict, expected_calls: int) -> str:
    error = str(record.get("error_type") or "")
    made = len(_value(record, "calls") or [])
    if error.startswith("irrelevance_error"):
        return "call where none was due"
    if error in ("relevance_error:no_call", "kate:no_call") or (made == 0 and expected_calls > 0):
        return "missing call"
    if error == "kate:malformed_call":
        return "malformed output"
    if error.endswith("wrong_count"):
        return "parallel cut to fewer calls" if made < expected_calls else "wrong number of calls"
    if error.endswith("wrong_func_name"):
        return "wrong function"
    if error.endswith(("missing_required", "missing_optional", "unexpected_param")):
        return "missing or unexpected argument"
    if error.startswith(("value_error", "type_error")) or "nested" in error:
        return "argument value or form"
    return error or "other"


def turn_kinds(turn: dict) -> list[str]:
    kinds = []
    end = turn.get("end_reason")
    if end == "repeat":
        kinds.append("turn ended by a repeat")
    elif end == "max_steps":
        kinds.append("turn hit the step cap")
    calls = [c for s in turn.get("steps", []) if s.get("executed") for c in s.get("calls", [])]
    if any(c["name"] in FS_FUNCTIONS and c["name"] != "cd" and any(isinstance(v, str) and "/" in v.strip("/")
           for v in c.get("arguments", {}).values()) for c in calls):  # fmt: skip
        kinds.append("path where cd was due")
    return kinds


def report(model_name: str | None = None) -> dict:
    runs, result = places(model_name)
    out: dict = {"split": "train", "model": model_name or DEFAULT_MODEL, "arms": {},
                 "fixable": {k: {"example": a, "how": b} for k, (a, b) in FIXABLE.items()}}
    for arm in ARMS:
        folder = runs / arm / "seed_0"
        if not (folder / "records.jsonl").exists():
            continue
        _, records = load_run(folder)
        expected = {e.id: e for cat in {r["category"] for r in records} for e in load_entries(cat, "train")}
        single: dict = defaultdict(lambda: {"n": 0, "failed": 0, "kinds": Counter()})
        multi = {"dialogues": 0, "solved": 0, "turns": 0, "turns_passed": 0, "turn_ends": Counter(), "kinds": Counter(),
                 "dialogue_errors": Counter(), "turns_with_knowledge": 0, "turns_without_call": 0, "echoes": 0,
                 "echo_answers": 0}  # fmt: skip
        for r in records:
            if r["category"].startswith("multi_turn"):
                multi["dialogues"] += 1
                multi["solved"] += bool(_value(r, "valid"))
                multi["turns"] += int(_value(r, "turns_total") or 0)
                multi["turns_passed"] += int(_value(r, "turns_passed") or 0)
                if not _value(r, "valid"):
                    multi["dialogue_errors"][str(r.get("error_type"))] += 1
                for turn in _value(r, "turns") or []:
                    multi["turn_ends"][str(turn.get("end_reason"))] += 1
                    multi["turns_with_knowledge"] += bool(turn.get("knowledge"))
                    multi["turns_without_call"] += not any(s.get("executed") for s in turn.get("steps", []))
                    multi["echoes"] += sum(bool(s.get("echo")) for s in turn.get("steps", []))
                    answer, before = turn.get("answer"), list(turn.get("messages") or [])
                    if before and before[-1].get("role") == "assistant" and before[-1].get("content") == answer:
                        before.pop()  # the answer itself is the history's last message
                    multi["echo_answers"] += answer is not None and echoes_result(answer, before)
                    multi["kinds"].update(turn_kinds(turn))
                continue
            row = single[r["category"]]
            row["n"] += 1
            if not _value(r, "valid"):
                row["failed"] += 1
                truth = expected[r["id"]].ground_truth if r["id"] in expected else []
                row["kinds"][single_kind(r, len(truth) if isinstance(truth, list) else 1)] += 1
        valid = {r["id"]: bool(_value(r, "valid")) for r in records}
        out.setdefault("_valid", {})[arm] = valid
        out.setdefault("_reached", {})[arm] = {r["id"]: bool(r.get("knowledge")) for r in records}
        out.setdefault("_turns", {})[arm] = {r["id"]: int(_value(r, "turns_passed") or 0) for r in records
                                             if r["category"].startswith("multi_turn")}
        out["arms"][arm] = {"single_turn": {c: {**v, "kinds": dict(v["kinds"])} for c, v in sorted(single.items())},
                            "multi_turn_base": {k: dict(v) if isinstance(v, Counter) else v for k, v in multi.items()}}
    out["paired"] = paired(out.pop("_valid", {}), out.pop("_reached", {}))
    turns = out.pop("_turns", {})
    out["multi_turn_paired"] = multi_turn_paired(turns)
    out["multi_turn_controls"] = {arm: m for arm, m in multi_turn_paired(turns, CONTROLS).items() if arm in CONTROLS}
    out["multi_call_p"] = multi_call_p_sweep(GATE_ARM, runs, model_name)
    out["multi_call_counts_p"] = multi_call_p_sweep("multi_call_counts", runs, model_name)
    result.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(result.with_suffix(".json"), out)
    atomic_write_text(result.with_suffix(".md"), markdown(out))
    return out


GATE_ARM = "multi_call"  # its records at multi_call_p = 0.5 give every higher threshold's outcome (so do multi_call_counts')
GATE_PS = (0.5, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)


def multi_call_p_sweep(arm: str = GATE_ARM, runs: Path = RUNS, model_name: str | None = None) -> list[dict] | None:
    """The call-count gate's threshold read off ``arm``'s records (run at p = 0.5): an entry its
    knowledge reached is still reached at threshold t when the predictor's p >= t; below it the entry gets
    no knowledge, i.e. direct's greedy answer. Fixed / broken against direct per threshold."""
    folder = runs / arm / "seed_0"
    if not (folder / "records.jsonl").exists() or not (runs / "direct" / "seed_0" / "records.jsonl").exists():
        return None
    from kate.retrieval.config import RetrievalConfig  # noqa: PLC0415
    from kate.retrieval.retriever import Retriever  # noqa: PLC0415

    c = compose_arm(arm, model_name)["knowledge"]["single_turn"]
    model = Retriever.from_config(RetrievalConfig(**{k: v for k, v in c.items() if not k.startswith("_")})).call_count_model()
    direct = {r["id"]: bool(_value(r, "valid")) for r in load_run(runs / "direct" / "seed_0")[1]}
    _, records = load_run(folder)
    questions = {e.id: " ".join(m["content"] for m in e.turns[0] if m.get("role") == "user")
                 for cat in {r["category"] for r in records} for e in load_entries(cat, "train")}  # fmt: skip
    reached = [(float(model.p_several(questions[r["id"]])), bool(_value(r, "valid")), direct[r["id"]])
               for r in records if r.get("knowledge") and r["id"] in direct]  # fmt: skip
    return [{"p": t, "reached": int(sum(p >= t for p, _, _ in reached)),
             "fixed": int(sum(p >= t and ok and not base for p, ok, base in reached)),
             "broken": int(sum(p >= t and base and not ok for p, ok, base in reached))} for t in GATE_PS]


def markdown(out: dict) -> str:
    model = out.get("model", DEFAULT_MODEL)
    flag = "" if model == DEFAULT_MODEL else f" --model {model}"
    lines = [f"# What {model} gets wrong on BFCL's training halves", "",
             f"Regenerate: `.venv/bin/python bench/failure_table.py --report-only{flag}` (records in "
             f"bench/runs/train_folds/{'' if not flag else 'models/' + model + '/'}). Greedy; the first N train-half "
             "entries per category.", ""]  # fmt: skip
    for arm, data in out["arms"].items():
        lines += [f"## {arm}", "", "| category | n | failed | failures by kind |", "|---|---:|---:|---|"]
        for cat, row in data["single_turn"].items():
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(row["kinds"].items(), key=lambda kv: -kv[1]))
            lines.append(f"| {cat} | {row['n']} | {row['failed']} | {kinds} |")
        m = data["multi_turn_base"]
        if m["dialogues"]:
            lines += ["", f"multi_turn_base: {m['dialogues']} dialogues, {m['solved']} solved, "
                          f"{m['turns_passed']} of {m['turns']} turns passed; knowledge in "
                          f"{m.get('turns_with_knowledge', 0)} turns; {m.get('turns_without_call', 0)} turns "
                          f"without a call; {m.get('echo_answers', 0)} answers that repeat a tool result or an earlier answer, "
                          f"{m.get('echoes', 0)} such replies not kept (echo_policy); turn ends {json.dumps(m['turn_ends'])}; "
                          f"turn failures {json.dumps(m['kinds'])}; dialogue errors {json.dumps(m['dialogue_errors'])}"]  # fmt: skip
        lines.append("")
    for arm, per in out.get("paired", {}).items():
        lines += [f"## {arm} against direct (the same single-turn entries)", "",
                  "| category | n | direct | " + arm + " | fixed | broken | knowledge reached |",
                  "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        lines += [f"| {c} | {r['n']} | {r['direct']} | {r['arm']} | {r['fixed']} | {r['broken']} | {r.get('reached', '-')} |"
                  for c, r in per.items()]  # fmt: skip
        lines.append("")
    paired = [(arm, "direct", m) for arm, m in out.get("multi_turn_paired", {}).items()]
    paired += [(arm, CONTROLS[arm], m) for arm, m in out.get("multi_turn_controls", {}).items()]
    for arm, against, m in paired:
        lines += [f"## {arm} against {against} (the same multi_turn_base dialogues)", "",
                  f"{m['dialogues']} dialogues: better in {m['better']}, worse in {m['worse']}; turns passed "
                  f"{m['turns_passed']} ({arm}) vs {m[f'{against}_turns_passed']} ({against}).", ""]  # fmt: skip
    for key, arm in (("multi_call_p", GATE_ARM), ("multi_call_counts_p", "multi_call_counts")):
        if not out.get(key):
            continue
        lines += [f"## The call-count gate's threshold ({arm}'s records, run at 0.5; training halves)", "",
                  "| multi_call_p | reached | fixed | broken |", "|---:|---:|---:|---:|"]
        lines += [f"| {r['p']} | {r['reached']} | {r['fixed']} | {r['broken']} |" for r in out[key]]
        lines.append("")
    lines += ["## Could an example fix it? (a judgement per kind, not a measurement)", "", "| kind | example | how |",
              "|---|---|---|"] + [f"| {k} | {v['example']} | {v['how']} |" for k, v in out["fixable"].items()]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default="direct", help="comma-separated: " + ", ".join(ARMS))
    parser.add_argument("--single", type=int, default=20, help="train-half entries per single-turn category")
    parser.add_argument("--multi", type=int, default=10, help="train-half multi_turn_base dialogues")
    parser.add_argument("--categories", default=",".join(SINGLE_TURN), help="single-turn categories (comma-separated)")
    parser.add_argument("--model", default=None, help="a kate model name (default: the default model); another "
                        "model's folders go under models/<name>/")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    if not args.report_only:
        arms = [a for a in args.arms.split(",") if a]
        unknown = [a for a in arms if a not in ARMS]
        if unknown:
            raise SystemExit(f"unknown arm(s) {unknown}; arms: {', '.join(ARMS)}")
        frozen = [f"{a}: {FROZEN[a]}" for a in arms if a in FROZEN]
        if frozen:
            raise SystemExit(f"not run again (kept as made): {'; '.join(frozen)}")
        model = instantiate(compose_arm(arms[0], args.model)["llm"])
        for arm in arms:
            run(arm, model, args.single, args.multi, tuple(c for c in args.categories.split(",") if c), args.model)
    out = report(args.model)
    for arm, data in out["arms"].items():
        print(arm, json.dumps(data["multi_turn_base"]), {c: r["failed"] for c, r in data["single_turn"].items()})


if __name__ == "__main__":
    main()

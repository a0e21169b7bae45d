"""Distilled knowledge (issue 41): judged run records grouped by category and verdict, lessons written by a
scripted model, parsed, malformed answers and copied values recorded as skips, a manifest, a rebuild that
asks nothing; the shipped base retrieved for a training-half request; one lesson written by the real model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kate.knowledge.bfcl_source import bfcl_trajectories
from kate.knowledge.distilled import DistilledSpec, build_distilled
from kate.knowledge.distilled_cases import PASSED, group_cases, read_cases, verdict_of
from kate.knowledge.distilled_prompt import PLACEHOLDER, check_copied, copied_values, parse_fields
from kate.knowledge.store import KnowledgeBase
from kate.llm.fake import FakeChatModel
from kate.retrieval.config import RetrievalConfig
from kate.retrieval.inject import render_knowledge, template_from
from kate.retrieval.retriever import Retriever
from kate.toolcall import ToolCall
from tests.test_knowledge_fixtures import embedder

SHIPPED = Path(__file__).resolve().parents[1] / "knowledge_bases" / "bfcl_distilled"
GOOD = "Title: One call per item asked\nWhen: The user asks for the same thing for several items.\n" \
       "Do: Make one call for each item, all in one reply.\nAvoid: Answering only the first item."  # fmt: skip


@pytest.fixture(scope="module")
def trajectories():
    return bfcl_trajectories(["parallel", "simple_python"], "train", limit=3, execute=False)


def _record(trajectory, *, valid, error_type=None, calls=None):
    calls = [c.to_dict() for c in trajectory.turns[0].calls] if calls is None else calls
    return {"id": trajectory.id, "category": trajectory.source, "valid": valid, "error_type": error_type,
            "error": "[]" if valid else "wrong count", "calls": calls}


@pytest.fixture()
def run_folder(tmp_path, trajectories):
    by_id = {t.id: t for t in trajectories}
    first_call = [by_id["parallel_0"].turns[0].calls[0].to_dict()]  # one of the two calls: wrong count
    records = [_record(by_id["parallel_0"], valid=False, error_type="parallel_function_checker_no_order:wrong_count",
                       calls=first_call),
               _record(by_id["parallel_2"], valid=False, error_type="parallel_function_checker_no_order:wrong_count",
                       calls=[by_id["parallel_2"].turns[0].calls[0].to_dict()]),
               _record(by_id["parallel_4"], valid=True),
               _record(by_id["simple_python_0"], valid=True, error_type="simple_function_checker:unclear"),
               {"id": "simple_python_1", "category": "simple_python", "valid": True, "calls": []}]  # a test item
    folder = tmp_path / "run" / "seed_0"
    folder.mkdir(parents=True)
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def test_verdicts_and_groups(run_folder, trajectories):
    assert verdict_of({"valid": False, "error_type": "parallel_function_checker_no_order:wrong_count"}) == "wrong_count"
    assert verdict_of({"valid": False, "error_type": "value_error:string"}) == "value_error:string"
    assert verdict_of({"valid": True, "error_type": "simple_function_checker:unclear"}) == PASSED
    cases = read_cases([run_folder, run_folder], trajectories)  # the same run twice: each answer once
    assert [c.id for c in cases] == ["parallel_0", "parallel_2", "parallel_4", "simple_python_0"]
    chunks = group_cases(cases, cases_per_entry=1)
    # round-robin, largest group first: every group's first chunk before any group's second
    assert [g for g, _ in chunks] == ["parallel/wrong_count/0", "parallel/passed/0", "simple_python/passed/0",
                                      "parallel/wrong_count/1"]
    assert [len(m) for _, m in group_cases(cases, cases_per_entry=4)] == [2, 1, 1]


def test_fields_are_read_from_lines_or_json_and_malformed_is_a_reason():
    assert parse_fields(GOOD).fields["do"] == "Make one call for each item, all in one reply."
    as_json = parse_fields('```json\n{"title": "T t", "when": "w w", "do": "d d", "avoid": "a a"}\n```')
    assert as_json.fields == {"title": "T t", "when": "w w", "do": "d d", "avoid": "a a"}
    broken = parse_fields("Title: Something\nI am not sure what to do.")
    assert broken.fields is None and broken.reason == "malformed: no when, do, avoid field"
    assert parse_fields("  ").reason == "empty answer"
    echo = parse_fields(GOOD.replace("Answering only the first item.", "Copying names, numbers, file names or "
                                     "other values from the cases.") + "\nDo not copy names, numbers, file names.")
    assert echo.reason == "malformed: the avoid field only repeats the prompt's instruction"


def test_copied_argument_values_are_stripped_or_refused(run_folder, trajectories):
    cases = read_cases([run_folder], trajectories)
    values = copied_values(cases[:1])  # parallel_0: artists Taylor Swift, Maroon 5, durations 20 and 15
    assert {"Taylor Swift", "Maroon 5", "20", "15"} <= set(values) and "5" not in values
    assert {"Boston, MA", "Boston"} <= set(copied_values([replace(cases[0], calls=(
        ToolCall("get_weather", {"location": "Boston, MA"}),))]))  # fmt: skip
    fields = {"title": "Play each artist", "when": "Several artists are named.",
              "do": "Call it for taylor swift and for Maroon 5 with 20 minutes.", "avoid": "Playing only one."}
    stripped = check_copied(fields, values, "strip")
    assert stripped.fields["do"] == f"Call it for {PLACEHOLDER} and for {PLACEHOLDER} with {PLACEHOLDER} minutes."
    assert stripped.stripped == 3 and stripped.fields["title"] == "Play each artist"
    assert check_copied(fields, values, "reject").reason.startswith("copied values: 3 literal")
    assert check_copied(fields, values, "strip", max_stripped=2).reason.startswith("copied values: 3 literal")
    only = check_copied({**fields, "title": "Taylor Swift"}, values, "strip")
    assert only.fields is None and "title field is left with no words" in only.reason


def _writer(messages, tools, n):
    text = messages[-1]["content"]
    if "simple_python" in text:
        return ["I cannot write a lesson."] * n  # malformed
    if "CORRECT" in text:
        return ["Title: 80 and 60\nWhen: x y\nDo: x y\nAvoid: x y"] * n  # nothing but parallel_4's values
    return [GOOD] * n


def test_build_writes_a_base_with_manifest_and_a_rebuild_asks_nothing(run_folder, trajectories, tmp_path):
    spec = DistilledSpec(name="dk", root=str(tmp_path / "kb"), runs=[str(run_folder)], cases_per_entry=4,
                         cache_dir=str(tmp_path / "cache"), categories=["parallel", "simple_python"])
    writer = FakeChatModel([_writer], repeat_last=True, name="fake-writer")
    kb = build_distilled(spec, writer=writer, embedder=embedder(), trajectories=trajectories, log=lambda line: None)
    assert len(writer.requests) == 3
    [entry] = kb.entries
    assert entry.id == "distilled:parallel/wrong_count/0" and entry.type == "distilled"
    assert entry.payload["title"] == "One call per item asked"
    assert entry.payload["cases"] == ["parallel_0", "parallel_2"]
    assert entry.tool_names == () and entry.written_by == "fake-writer" and "parallel_0" in entry.source_ids
    stats = kb.manifest["build_stats"]["distilled"]
    assert stats["skipped"] == [
        {"group": "parallel/passed/0", "reason": "copied values: the title field is left with no words of its own"},
        {"group": "simple_python/passed/0", "reason": "malformed: no title, when, do, avoid field"}]
    loaded = KnowledgeBase.load(spec.path, embedding=embedder().identity())
    assert loaded.manifest["types"] == {"distilled": 1} and loaded.manifest["writers"] == {"distilled": ["fake-writer"]}
    assert loaded.manifest["build_config"]["runs"] == [str(run_folder)]
    silent = FakeChatModel([], name="fake-writer")  # raises if asked anything
    again = build_distilled(spec, writer=silent, embedder=embedder(), trajectories=trajectories, save=False,
                            log=lambda line: None)
    assert silent.requests == [] and [e.to_dict() for e in again.entries] == [e.to_dict() for e in kb.entries]
    assert again.manifest["build_stats"]["llm"] == {"writer": "fake-writer", "asked": 0, "cached": 3}


def test_a_spec_without_runs_or_with_a_missing_one_fails_before_the_model():
    with pytest.raises(ValueError, match="runs"):
        DistilledSpec(runs=[])
    with pytest.raises(ValueError, match="no run records here"):
        DistilledSpec(runs=["/nonexistent/run"])


def _config(name: str) -> RetrievalConfig:
    from hydra import compose, initialize_config_dir

    import kate.configs  # noqa: F401  (registers the schemas)
    from kate.eval.config import plain

    with initialize_config_dir(config_dir=str(SHIPPED.parents[1] / "conf"), version_base=None):
        node = plain(compose("kb", overrides=[f"retrieval={name}"]).retrieval)
    return RetrievalConfig(**{**{k: v for k, v in node.items() if not k.startswith("_")}, "root": str(SHIPPED.parent)})


def test_the_shipped_base_answers_a_training_half_request_above_the_threshold():
    config = _config("distilled_single_turn")
    retriever = Retriever.from_config(config, embedder=embedder())
    assert retriever.kb.manifest["types"] == {"distilled": len(retriever.kb)}
    [request] = [t.turns[0].user for t in bfcl_trajectories(["parallel"], "train", limit=1, execute=False)]
    hits = retriever.retrieve(request, tools=["spotify.play"])
    assert hits and all(h.score >= config.threshold and h.entry.type == "distilled" for h in hits)
    text = render_knowledge(hits, template_from(config.template), request=request)
    payload = hits[0].entry.payload
    assert f"When: {payload['when']}" in text and f"Avoid: {payload['avoid']}" in text
    assert text.endswith(request)


def test_beside_adds_the_lesson_after_st_examples():
    from kate.agent.knowledge import KnowledgeContext
    from kate.retrieval.knowledge import retrieval_knowledge

    config = _config("st_distilled_single_turn")
    assert config.beside_config().kb == "bfcl_distilled" and "beside" not in _config("single_turn").to_dict()
    config.beside["root"] = str(SHIPPED.parent)
    knowledge = retrieval_knowledge(Retriever.from_config(config, embedder=embedder()))
    request = "Play songs from the artists Taylor Swift and Maroon 5, 20 minutes each."
    hits, _ = knowledge.hits(request, [], KnowledgeContext("single_turn", tools=None))
    assert hits[-1].entry.type == "distilled" and knowledge.describe()["beside"]["manifest"]["name"] == "bfcl_distilled"


@pytest.mark.model
def test_the_default_model_writes_one_lesson(run_folder, trajectories, tmp_path, default_llamacpp):
    spec = DistilledSpec(name="dk", root=str(tmp_path / "kb"), runs=[str(run_folder)], cases_per_entry=2,
                         max_entries=1, cache_dir=str(tmp_path / "cache"), categories=["parallel"], max_tokens=120)
    kb = build_distilled(spec, writer=default_llamacpp, embedder=embedder(), trajectories=trajectories, save=False,
                         log=lambda line: None)
    skipped = kb.manifest["build_stats"]["distilled"]["skipped"]
    assert len(kb.entries) == 1, skipped
    entry = kb.entries[0]
    assert all(entry.payload[f].strip() for f in ("title", "when", "do", "avoid"))
    values = copied_values(read_cases([run_folder], trajectories)[:2])
    assert not any(v.lower() in " ".join(entry.payload[f] for f in ("when", "do", "avoid")).lower() for v in values)

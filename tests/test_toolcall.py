"""Tests for kate.toolcall: canonical equality, strict total readers, and their writers."""

from __future__ import annotations

import dataclasses
import inspect
import json
import keyword
import os
import re
from types import SimpleNamespace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import kate.toolcall.call_object as call_object_module
import kate.toolcall.parse as parse_module
import kate.toolcall.parse_python as parse_python_module
import kate.toolcall.parse_text as parse_text_module
import kate.toolcall.total as total_module
from kate.toolcall import (
    NotJSONCompatible,
    Parsed,
    ToolCall,
    canonical_call_set,
    canonical_json,
    from_bfcl,
    from_bfcl_strings,
    from_hermes,
    from_json_text,
    from_openai_tool_calls,
    from_python_call,
    parse_model_output,
    to_bfcl,
    to_bfcl_strings,
    to_hermes,
    to_json_text,
    to_openai_tool_calls,
    to_python_call,
)

F = ToolCall("f", {"a": 1})
G = ToolCall("g", {"b": "x"})


def assert_calls(parsed: Parsed, *expected: ToolCall) -> None:
    assert parsed.ok, parsed.error
    assert parsed.calls == expected


def assert_failure(parsed: Parsed, *fragments: str) -> None:
    assert isinstance(parsed, Parsed)
    assert not parsed.ok and parsed.calls == ()
    for fragment in fragments:
        assert fragment in parsed.error


# --------------------------------------------------------------------------- ToolCall


class TestCanonicalEquality:
    def test_key_order_is_irrelevant(self):
        assert ToolCall("f", {"a": 1, "b": 2}) == ToolCall("f", {"b": 2, "a": 1})

    def test_int_equals_integral_float(self):
        assert ToolCall("f", {"a": 1}) == ToolCall("f", {"a": 1.0})
        assert ToolCall("f", {"a": 1}) != ToolCall("f", {"a": 1.5})

    def test_bool_is_not_a_number(self):
        assert ToolCall("f", {"a": True}) != ToolCall("f", {"a": 1})
        assert ToolCall("f", {"a": False}) != ToolCall("f", {"a": 0})

    def test_nested_values(self):
        left = ToolCall("f", {"a": {"x": [1, {"y": 2.0, "z": None}], "w": "s"}})
        right = ToolCall("f", {"a": {"w": "s", "x": [1.0, {"z": None, "y": 2}]}})
        assert left == right and hash(left) == hash(right)
        assert ToolCall("f", {"a": [1, 2]}) != ToolCall("f", {"a": [2, 1]})

    def test_strings_compare_exactly(self):
        assert ToolCall("f", {"a": "Paris"}) != ToolCall("f", {"a": "paris"})
        assert ToolCall("f", {"a": "Paris"}) != ToolCall("f", {"a": "Paris "})
        assert ToolCall("f", {"a": "1"}) != ToolCall("f", {"a": 1})
        assert ToolCall("f", {}) != ToolCall("F", {})

    def test_tuple_equals_list_and_call_id_is_ignored(self):
        assert ToolCall("f", {"a": (1, 2)}, call_id="x") == ToolCall("f", {"a": [1, 2]})

    def test_canonical_json_and_call_set(self):
        assert canonical_json({"b": 1.0, "a": True}) == '{"a":true,"b":1}'
        assert canonical_call_set([F, G]) == canonical_call_set([G, F])
        assert canonical_call_set([F, F]) != canonical_call_set([F])

    def test_rejects_non_json_arguments(self):
        with pytest.raises(NotJSONCompatible):
            ToolCall("f", {"a": {1, 2}})
        with pytest.raises(NotJSONCompatible):
            ToolCall("f", {"a": float("nan")})
        with pytest.raises(ValueError):
            ToolCall("  ", {})


class TestImmutability:
    def test_fields_are_frozen(self):
        with pytest.raises(dataclasses.FrozenInstanceError):
            F.name = "g"  # type: ignore[misc]

    def test_arguments_are_frozen(self):
        with pytest.raises(TypeError):
            F.arguments["a"] = 2  # type: ignore[index]
        with pytest.raises(TypeError):
            F.arguments.update(a=2)  # type: ignore[attr-defined]

    def test_source_mutation_does_not_leak_in(self):
        source = {"a": [1, 2]}
        call = ToolCall("f", source)
        source["a"].append(3)
        assert call == ToolCall("f", {"a": [1, 2]})


class TestFromDict:
    def test_reads_what_to_dict_writes(self):
        assert ToolCall.from_dict(F.to_dict()) == F
        assert ToolCall.from_dict({"name": "f"}) == ToolCall("f", {})

    def test_reads_an_openai_tool_call(self):
        call = ToolCall.from_dict({"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}})
        assert call == F and call.call_id == "c1"
        assert ToolCall.from_dict({"function": {"name": "f", "arguments": {"a": 1}}}) == F
        assert ToolCall.from_dict({"function": {"name": "f", "arguments": ""}}) == ToolCall("f", {})
        assert ToolCall.from_dict(to_openai_tool_calls([G])[0]) == G

    @pytest.mark.parametrize(
        "data, fragment",
        [
            ([1], "must be an object"),
            ({"arguments": {}}, "needs a 'name'"),
            ({"name": ""}, "non-empty string name"),
            ({"name": "f", "arguments": [1]}, "must be an object"),
            ({"name": "f", "arguments": '{"a": 1}'}, "must be an object"),  # JSON text only in the OpenAI shape
            ({"function": "f"}, "'function' of a tool call must be an object"),
            ({"function": {"name": "f", "arguments": "{a"}}, "not JSON"),
            ({"function": {"name": "f", "arguments": []}}, "must be an object"),
            ({"function": {"arguments": "{}"}}, "needs a 'name'"),
            ({"id": 3, "function": {"name": "f"}}, "id must be a string"),
        ],
    )
    def test_rejects_what_is_not_a_call(self, data, fragment):
        with pytest.raises(ValueError, match=re.escape(fragment)):
            ToolCall.from_dict(data)


# --------------------------------------------------------------------------- readers

QWEN_FENCE = (
    "I'll look that up for you.\n"
    '```json\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n```\n'
    "Let me know if you need anything else."
)
WEATHER = ToolCall("get_weather", {"city": "Paris", "unit": "celsius"})


class TestJsonText:
    def test_qwen_fence_with_prose(self):
        assert_calls(from_json_text(QWEN_FENCE), WEATHER)

    def test_plain_fence_and_bare_object(self):
        assert_calls(from_json_text('```\n{"name": "f", "arguments": {"a": 1}}\n```'), F)
        assert_calls(from_json_text('{"name": "f", "arguments": {"a": 1}}'), F)

    def test_list_of_calls(self):
        text = '[{"name": "f", "arguments": {"a": 1}}, {"name": "g", "parameters": {"b": "x"}}]'
        assert_calls(from_json_text(text), F, G)

    def test_two_fences_give_both_calls_in_order(self):
        text = (
            'First:\n```json\n{"name": "g", "arguments": {"b": "x"}}\n```\n'
            'Then:\n```json\n{"name": "f", "arguments": {"a": 1}}\n```'
        )
        assert_calls(from_json_text(text), G, F)

    def test_no_call_shaped_json_is_a_plain_answer(self):
        assert from_json_text("The answer is 42.") == Parsed()
        assert from_json_text('Result: {"temperature": 21} and [1, 2]') == Parsed()
        assert from_json_text('{"result": {"name": "f", "arguments": {}}}') == Parsed()
        assert from_json_text("set {a, b} and [see above]") == Parsed()
        assert from_json_text("") == Parsed()

    def test_name_without_arguments_is_a_failure(self):
        assert_failure(from_json_text('{"name": "f"}'), "arguments")

    def test_list_mixing_calls_and_other_values_is_a_failure(self):
        assert_failure(from_json_text('[{"name": "f", "arguments": {}}, 3]'), "mixes")

    def test_arguments_as_json_string(self):
        assert_calls(from_json_text('{"name": "f", "arguments": "{\\"a\\": 1}"}'), F)
        assert_failure(from_json_text('{"name": "f", "arguments": "{a: 1}"}'), "invalid JSON")

    def test_pathological_text_is_total(self):
        assert_failure(from_json_text("[" * 100_000), "nested too deeply")
        assert from_json_text("{" * 100_000) == Parsed()
        assert from_json_text("x [1] " * 20_000) == Parsed()

    def test_duplicate_keys_are_refused(self):
        text = '{"name": "f", "arguments": {"a": 1}, "arguments": {"a": 2}}'
        assert_failure(from_json_text(text), "duplicate key")


class TestCallObjectRules:
    @pytest.mark.parametrize(
        "obj, fragment",
        [
            ({"name": "f"}, "no 'arguments'"),
            ({"arguments": {}}, "name"),
            ({"name": "", "arguments": {}}, "name"),
            ({"name": 3, "arguments": {}}, "name"),
            ({"name": "f", "arguments": [1]}, "must be an object"),
            ({"name": "f", "arguments": {"a": 1}, "parameters": {"a": 2}}, "disagree"),
            ({"name": "f", "arguments": {}, "extra": 1}, "unexpected keys"),
            ({"name": "f", "arguments": {}, "id": 7}, "id"),
            ({"name": "f", "arguments": {"a": float("inf")}}, "finite"),
        ],
    )
    def test_malformed_call_objects_fail(self, obj, fragment):
        assert_failure(from_hermes(f"<tool_call>{json.dumps(obj)}</tool_call>"), fragment)

    def test_parameters_key_and_agreeing_duplicates(self):
        assert_calls(from_hermes('<tool_call>{"name": "f", "parameters": {"a": 1}}</tool_call>'), F)
        both = {"name": "f", "arguments": {"a": 1}, "parameters": {"a": 1.0}, "type": "function"}
        assert_calls(from_hermes(f"<tool_call>{json.dumps(both)}</tool_call>"), F)


class TestHermes:
    def test_two_calls(self):
        text = (
            "<tool_call>\n"
            '{"name": "f", "arguments": {"a": 1}}\n'
            "</tool_call>\n"
            "<tool_call>\n"
            '  {"name": "g",\n   "arguments": {"b": "x"}}  \n'
            "</tool_call>"
        )
        assert_calls(from_hermes(text), F, G)

    def test_unclosed_final_tag(self):
        text = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n<tool_call>\n'
        text += '{"name": "g", "arguments": {"b": "x"}}\n'
        assert_calls(from_hermes(text), F, G)

    def test_unclosed_tag_with_trailing_text_fails(self):
        assert_failure(from_hermes('<tool_call>{"name": "f", "arguments": {}} and more'))

    def test_no_tags_is_no_call(self):
        assert from_hermes("Paris is the capital of France.") == Parsed()
        assert from_hermes(None) == Parsed()

    @pytest.mark.parametrize(
        "content",
        ["", "not json", '[{"name": "f", "arguments": {}}]', '{"a": 1}', '{"name": "f", "arg'],
    )
    def test_tag_without_a_call_object_fails(self, content):
        assert_failure(from_hermes(f"<tool_call>{content}</tool_call>"), "block 0")

    def test_closing_tag_inside_a_string_is_data(self):
        call = ToolCall("echo", {"text": "</tool_call><tool_call>"})
        assert_calls(from_hermes(to_hermes([call, F])), call, F)


class TestOpenAI:
    def test_dicts_with_string_and_dict_arguments(self):
        items = [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {"b": "x"}}},
        ]
        parsed = from_openai_tool_calls(items)
        assert_calls(parsed, F, G)
        assert [c.call_id for c in parsed.calls] == ["c1", "c2"]

    def test_sdk_objects(self):
        from openai.types.chat import ChatCompletionMessageFunctionToolCall as SdkCall

        items = [SdkCall.model_validate(item) for item in to_openai_tool_calls([F, G])]
        parsed = from_openai_tool_calls(items)
        assert_calls(parsed, F, G)
        assert parsed.calls[0].call_id == "call_0"

    def test_attribute_objects(self):
        item = SimpleNamespace(
            id="x", type="function", function=SimpleNamespace(name="f", arguments='{"a": 1}')
        )
        assert_calls(from_openai_tool_calls([item]), F)

    def test_none_and_empty(self):
        assert from_openai_tool_calls(None) == Parsed()
        assert from_openai_tool_calls([]) == Parsed()

    @pytest.mark.parametrize(
        "items, fragment",
        [
            ([{"id": "c", "function": {"name": "f", "arguments": "{oops"}}], "invalid JSON"),
            ([{"id": "c", "function": {"name": "f", "arguments": "[1]"}}], "must be an object"),
            ([{"id": "c", "function": {"name": "f"}}], "arguments"),
            ([{"id": "c", "type": "custom", "custom": {}}], "type"),
            ([{"id": "c"}], "function"),
            (["f(a=1)"], "expected an object"),
            ("not a list", "must be a list"),
        ],
    )
    def test_malformed_items_fail(self, items, fragment):
        assert_failure(from_openai_tool_calls(items), fragment)

    def test_writer_ids_and_string_arguments(self):
        written = to_openai_tool_calls([F, ToolCall("g", {"b": "x"}, call_id="keep")])
        assert [w["id"] for w in written] == ["call_0", "keep"]
        assert written[0]["type"] == "function"
        assert json.loads(written[0]["function"]["arguments"]) == {"a": 1}


class TestPython:
    def test_simple_and_dotted(self):
        assert_calls(from_python_call("f(a=1)"), F)
        assert_calls(from_python_call("math.factorial(n=5)"), ToolCall("math.factorial", {"n": 5}))

    def test_list_and_tuple_of_calls(self):
        assert_calls(from_python_call('[f(a=1), g(b="x")]'), F, G)
        assert_calls(from_python_call("(f(a=1), g(b='x'))"), F, G)
        assert from_python_call("[]") == Parsed()

    def test_literal_values(self):
        text = "f(a=-1.5, b=(1, 2), c={'k': [None, True]}, d='é', e=None)"
        arguments = {"a": -1.5, "b": [1, 2], "c": {"k": [None, True]}, "d": "é", "e": None}
        expected = ToolCall("f", arguments)
        assert_calls(from_python_call(text), expected)

    @pytest.mark.parametrize(
        "text, fragment",
        [
            ("f(1)", "positional"),
            ("f(**{'a': 1})", "kwargs"),
            ("f(a=b)", "not a literal"),
            ("f(a=1+2)", "not a literal"),
            ("f(a={1, 2})", "set"),
            ("f(a=1, a=2)", "repeats"),
            ("f()(a=1)", "dotted name"),
            ("x[0](a=1)", "dotted name"),
            ("f", "not a call"),
            ("[f(a=1), 3]", "item 1"),
            ("hello world", "not a python call"),
            ("f(a=1", "not a python call"),
            ("f(a=1)\x00", "not a python call"),
        ],
    )
    def test_malformed_python_fails(self, text, fragment):
        assert_failure(from_python_call(text), fragment)

    def test_import_trick_fails_and_executes_nothing(self, monkeypatch):
        ran = []
        monkeypatch.setattr(os, "system", lambda command: ran.append(command))
        assert_failure(from_python_call("__import__('os').system('x')"))
        assert_failure(from_python_call("f(a=__import__('os').system('x'))"), "not a literal")
        assert ran == []

    def test_huge_and_deep_input_fail_cleanly(self):
        assert_failure(from_python_call("f(a=" + "[" * 100_000 + "]" * 100_000 + ")"))
        assert_failure(from_python_call("f(a=1)" + " " * 2_000_000))
        assert_failure(from_python_call("a." * 50_000 + "f(x=1)"))

    def test_writer(self):
        call = ToolCall("m.f", {"a": 1, "b": "x", "c": [True, None], "d": {"k": 1.5}})
        assert to_python_call(call) == "m.f(a=1, b='x', c=[True, None], d={'k': 1.5})"
        assert to_python_call([F, G]) == "[f(a=1), g(b='x')]"
        for bad in (ToolCall("f-g", {}), ToolCall("class", {}), ToolCall("f", {"a b": 1})):
            with pytest.raises(ValueError):
                to_python_call(bad)


class TestBfcl:
    def test_decoded_form(self):
        assert_calls(from_bfcl([{"f": {"a": 1}}, {"g": {"b": "x"}}]), F, G)
        assert from_bfcl([]) == Parsed()
        assert to_bfcl([F, G]) == [{"f": {"a": 1}}, {"g": {"b": "x"}}]

    @pytest.mark.parametrize(
        "decoded, fragment",
        [
            ([{"f": {}, "g": {}}], "exactly one key"),
            ([{}], "exactly one key"),
            ([{"f": [1]}], "must be an object"),
            ([{"f": {"a": {1}}}], "set"),
            ("f(a=1)", "must be a list"),
            (None, "must be a list"),
        ],
    )
    def test_malformed_decoded_fails(self, decoded, fragment):
        assert_failure(from_bfcl(decoded), fragment)

    def test_strings(self):
        parsed = from_bfcl_strings(["cd(folder='document')", "ls(a=True)"])
        assert_calls(parsed, ToolCall("cd", {"folder": "document"}), ToolCall("ls", {"a": True}))
        assert to_bfcl_strings([F, G]) == ["f(a=1)", "g(b='x')"]

    def test_strings_failure_names_the_index(self):
        assert_failure(from_bfcl_strings(["f(a=1)", "g(1)"]), "string 1", "positional")
        assert_failure(from_bfcl_strings(["[f(a=1), g(b=2)]"]), "string 0", "exactly one")
        assert_failure(from_bfcl_strings("f(a=1)"), "list")


class TestParseModelOutput:
    def test_hermes_then_json(self):
        assert_calls(parse_model_output(to_hermes([F, G])), F, G)
        assert_calls(parse_model_output(QWEN_FENCE), WEATHER)

    def test_plain_answer(self):
        assert parse_model_output("The capital of France is Paris.") == Parsed()
        assert parse_model_output(None) == Parsed()

    def test_failure_wins(self):
        assert_failure(parse_model_output('<tool_call>{"name": "f"}</tool_call>'), "arguments")

    def test_first_format_with_calls_wins(self):
        text = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
        assert_calls(parse_model_output(text, formats=("json", "hermes")), F)
        assert parse_model_output(text, formats=("python",)) == Parsed()

    def test_python_only_when_the_whole_text_is_a_call(self):
        assert_calls(parse_model_output("f(a=1)", formats=("hermes", "json", "python")), F)
        assert parse_model_output("Use f(1) maybe", formats=("python",)) == Parsed()
        assert parse_model_output("f(a=1)") == Parsed()

    def test_hermes_tag_inside_json_text_is_read_as_hermes(self):
        # Known ambiguity of the default order: a literal tag anywhere makes the text Hermes.
        text = '{"name": "say", "arguments": {"text": "<tool_call>"}}'
        assert_calls(from_json_text(text), ToolCall("say", {"text": "<tool_call>"}))
        assert_failure(parse_model_output(text), "block 0")

    def test_unknown_format_is_a_failure_not_an_exception(self):
        assert_failure(parse_model_output("x", formats=("xml",)), "unknown format")


def test_no_eval_or_exec_in_the_readers():
    modules = (parse_module, parse_text_module, parse_python_module, call_object_module, total_module)
    source = "\n".join(inspect.getsource(m) for m in modules)
    assert not re.search(r"(?<![\w.])(eval|exec|compile)\s*\(", source)
    assert "literal_eval" in source


# --------------------------------------------------------------------------- properties

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
any_names = st.text(min_size=1, max_size=20).filter(str.strip)
any_arguments = st.dictionaries(st.text(max_size=10), json_values, max_size=4)
any_calls = st.builds(ToolCall, name=any_names, arguments=any_arguments)

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True).filter(
    lambda s: not keyword.iskeyword(s)
)
dotted_names = st.lists(identifiers, min_size=1, max_size=3).map(".".join)
python_calls = st.builds(
    ToolCall, name=dotted_names, arguments=st.dictionaries(identifiers, json_values, max_size=4)
)

ROUND_TRIPS = {
    "openai": (to_openai_tool_calls, from_openai_tool_calls),
    "hermes": (to_hermes, from_hermes),
    "json": (to_json_text, from_json_text),
    "bfcl": (to_bfcl, from_bfcl),
    "auto-hermes": (to_hermes, parse_model_output),
    "auto-json": (to_json_text, parse_model_output),
}


@pytest.mark.parametrize("fmt", sorted(ROUND_TRIPS))
@settings(max_examples=150, deadline=None)
@given(calls=st.lists(any_calls, max_size=4))
def test_round_trip(fmt, calls):
    write, read = ROUND_TRIPS[fmt]
    written = write(calls)
    if fmt == "auto-json":
        assume("<tool_call>" not in written)  # hermes is tried first: see the ambiguity test
    assert_calls(read(written), *calls)


@settings(max_examples=150, deadline=None)
@given(calls=st.lists(python_calls, max_size=4))
def test_round_trip_python(calls):
    assert_calls(from_python_call(to_python_call(calls)), *calls)
    assert_calls(from_bfcl_strings(to_bfcl_strings(calls)), *calls)
    assert_calls(parse_model_output(to_python_call(calls), formats=("python",)), *calls)


@settings(max_examples=150, deadline=None)
@given(call=any_calls)
def test_from_dict_inverts_to_dict_and_the_openai_writer(call):
    assert ToolCall.from_dict(call.to_dict()) == call
    assert ToolCall.from_dict(to_openai_tool_calls(call)[0]) == call

@settings(max_examples=100, deadline=None)
@given(calls=st.lists(any_calls, min_size=1, max_size=3))
def test_round_trip_openai_sdk_objects(calls):
    from openai.types.chat import ChatCompletionMessageFunctionToolCall as SdkCall

    items = [SdkCall.model_validate(item) for item in to_openai_tool_calls(calls)]
    assert_calls(from_openai_tool_calls(items), *calls)


TEXT_READERS = {
    "hermes": from_hermes,
    "json": from_json_text,
    "python": from_python_call,
    "bfcl_strings": lambda text: from_bfcl_strings([text]),
    "auto": parse_model_output,
    "auto-all": lambda text: parse_model_output(text, formats=("hermes", "json", "python")),
}
FRAGMENTS = [
    "<tool_call>", "</tool_call>", "```json", "```", "{", "}", "[", "]", '"name"', '"arguments"',
    '"parameters"', '"f"', ":", ",", "1", "1.0", "true", "null", '"x"', "f(", ")", "a=", "'s'",
    "(", " ", "\n", "NaN", "__import__", ".",
]
tricky_text = st.text() | st.lists(st.sampled_from(FRAGMENTS), max_size=30).map("".join)


@pytest.mark.parametrize("reader", sorted(TEXT_READERS))
@settings(max_examples=200, deadline=None)
@given(text=tricky_text)
def test_text_readers_are_total(reader, text):
    assert isinstance(TEXT_READERS[reader](text), Parsed)


ALL_READERS = [
    from_openai_tool_calls, from_hermes, from_json_text, from_python_call, from_bfcl,
    from_bfcl_strings, parse_model_output,
]
json_ish = st.recursive(
    json_scalars | st.tuples(st.integers()) | st.just(float("nan")) | st.binary(max_size=4),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.sampled_from(["id", "type", "function", "name", "arguments", "f"])
                      | st.text(max_size=5), inner, max_size=4),
    max_leaves=15,
)


@settings(max_examples=200, deadline=None)
@given(value=json_ish)
def test_all_readers_are_total_on_arbitrary_objects(value):
    for reader in ALL_READERS:
        parsed = reader(value)
        assert isinstance(parsed, Parsed)
        assert parsed.ok or parsed.calls == ()


def test_malformed_json_call_is_a_recorded_failure_not_a_plain_answer():
    # the 0.5B model's real slip: a bracket where a brace belongs
    text = '{"name": "calculator", "arguments": {"expression": "1234 * 5678"}]}'
    parsed = parse_model_output(text)
    assert not parsed.ok and "malformed JSON call" in parsed.error
    assert parse_model_output("The set is {1, 2}.") == Parsed()

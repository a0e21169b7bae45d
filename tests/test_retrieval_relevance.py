"""The tool-relevance gate (kate.retrieval.relevance): the real embedder of kate's knowledge bases reads
whether a request is like any offered tool's description; bad settings fail at once."""

from __future__ import annotations

import pytest

from kate.retrieval.relevance import ToolRelevanceGate, tool_text

from .test_knowledge_fixtures import embedder

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                            "parameters": {"type": "object", "properties": {}}}}
TRIANGLE = {"name": "triangle_area", "description": "Area of a triangle from its base and height"}


def test_a_request_like_a_tools_description_passes_and_an_unrelated_one_does_not():
    gate = ToolRelevanceGate(tau=0.3, embedder=embedder())
    weather = [{"role": "user", "content": "What's the weather in Paris right now?"}]
    poem = [{"role": "user", "content": "Who wrote the Iliad?"}]
    assert gate(weather, [WEATHER]) and not gate(poem, [WEATHER])
    assert gate.similarity(weather, [TRIANGLE, WEATHER]) == pytest.approx(gate.similarity(weather, [WEATHER]))
    assert not gate(weather, []) and not gate(weather, None)  # no tool offered: none fits
    knowledge = [{"role": "user", "content": "Who wrote the Iliad?\n\nExample: get_weather(city='Paris')"}]
    assert gate.similarity(knowledge, [WEATHER]) == pytest.approx(gate.similarity(poem, [WEATHER]))  # request only
    assert tool_text(WEATHER) == "get_weather: Current weather in a city" == tool_text(WEATHER["function"])
    assert gate.describe()["tau"] == 0.3 and len(gate.describe()["sha256"]) == 64


def test_a_threshold_outside_the_cosine_range_is_refused():
    with pytest.raises(ValueError, match="tau is a cosine similarity"):
        ToolRelevanceGate(tau=1.5, embedder=embedder())

"""Learning from use, the server's side: ``POST /v1/kate/trajectories`` with a trajectory the caller
marks successful (``{"messages": [...], "tools": [...], "success": true}``) adds its verified turns to
the learned knowledge base as new ST entries (``kate.knowledge.learn``: verified against the tools
offered, de-duplicated, under a lock, written atomically). Running servers see them on their next
turn without a restart; a turn already answered keeps the knowledge it was given."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from kate.serve.errors import bad_request
from kate.serve.knowledge import ServedKnowledge
from kate.serve.request import Limits, read_request


def trajectory_learner(kb_path: Path, knowledge: ServedKnowledge | None) -> Callable[[dict[str, Any]], dict[str, Any]]:
    embedder = None

    def learn(body: dict[str, Any]) -> dict[str, Any]:
        nonlocal embedder
        from kate.knowledge.learn import learn_trajectory  # the writer and its lock load with the first trajectory

        if body.get("success") is not True:
            raise bad_request("only trajectories marked successful are learned: send \"success\": true", "success")
        # the same checks as a chat request: roles, contents, tool schemas, call arguments
        request = read_request({"model": "-", "messages": body.get("messages"), "tools": body.get("tools")}, Limits())
        if embedder is None and knowledge is not None:
            retriever = next((r for r in (knowledge.retriever(n) for n in knowledge.bases) if r is not None), None)
            embedder = retriever.embedder if retriever is not None else None
        outcome = learn_trajectory(kb_path, request.messages, request.tools, source="serve",
                                   meta=body.get("meta") if isinstance(body.get("meta"), dict) else None,
                                   embedder=embedder)  # fmt: skip
        return {k: v for k, v in outcome.to_dict().items() if k != "path"}  # the server's paths stay its own

    return learn

"""``kate serve``: build the served policy's parts from the config and run the HTTP server.

``build_server(cfg) -> (app, ServerInfo)`` is the plain function tests call; ``run_serve`` binds
and serves until SIGTERM / SIGINT, letting in-flight requests finish (``graceful_shutdown``).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig

from kate.eval.config import check_target, plain
from kate.llm.base import ChatModel
from kate.llm.identity import model_identity
from kate.retrieval.config import RetrievalConfig
from kate.serve.app import ServerSettings, create_app
from kate.serve.errors import APIError
from kate.serve.knowledge import ServedKnowledge
from kate.serve.learn import trajectory_learner
from kate.serve.request import Limits
from kate.serve.service import ChatService, ServeSettings
from kate.toolcall.format import HERMES_OPENING


@dataclass
class ServerInfo:
    model: ChatModel
    names: tuple[str, ...]
    service: ChatService
    knowledge: ServedKnowledge | None


def served_knowledge(cfg: dict[str, Any], model: ChatModel, learn: dict[str, Any]) -> ServedKnowledge | None:
    node = cfg.get("retrieval")
    if not node:
        return None
    check_target(node, "knowledge.retrieval")
    retrieval = RetrievalConfig(**{k: v for k, v in node.items() if not k.startswith("_")})
    bases = list(cfg.get("bases") or [])
    if learn.get("enabled"):
        bases.append(learn["kb"])
    knowledge = ServedKnowledge(retrieval, bases=bases, enabled=bool(cfg.get("enabled", True)), intent_model=model)
    knowledge.open_all()  # a corrupt or mismatched base fails now, naming its file
    return knowledge


def learned_base(knowledge: ServedKnowledge | None, name: str) -> Path:
    """The base learning from use writes (created empty now when missing, so it is served from the start)."""
    from kate.knowledge.learn import open_learning_base

    if knowledge is None:
        raise ValueError("learn.enabled needs knowledge.retrieval: the learned base is served through it")
    path = knowledge.path_of(name)
    base = next((r for r in (knowledge.retriever(n) for n in knowledge.bases) if r is not None), None)
    open_learning_base(path, embedder=base.embedder if base is not None else None)
    knowledge.retriever(name)
    return path


def build_server(cfg: DictConfig | dict[str, Any], model: ChatModel | None = None):
    """The app and what it serves, from a ``serve`` config (``model`` replaces ``cfg.llm``)."""
    cfg = plain(cfg) if isinstance(cfg, DictConfig) else dict(cfg)
    if model is None:
        check_target(cfg["llm"], "llm")
        model = instantiate(cfg["llm"])
    names = tuple(dict.fromkeys([cfg.get("served_model_name") or model.name, model.name]))
    learn = dict(cfg.get("learn") or {})
    knowledge = served_knowledge(dict(cfg.get("knowledge") or {}), model, learn)

    def model_for(name: str) -> ChatModel:
        if name not in names:
            raise APIError(404, f"The model `{name}` does not exist", "model", "model_not_found")
        return model

    settings = ServeSettings(width=int(cfg.get("width", 8)), vote=str(cfg.get("vote", "valid_majority")),
                             temperature=float(cfg.get("temperature", 1.0)), max_tokens=int(cfg.get("max_tokens", 512)),
                             call_opening=str(cfg.get("call_opening", HERMES_OPENING)),
                             report=bool(cfg.get("report", True)),
                             answer_repeats=bool(cfg.get("answer_repeats", True)))  # fmt: skip
    gate = None
    if cfg.get("gate"):
        check_target(cfg["gate"], "gate")
        gate = instantiate(cfg["gate"], _partial_=True)  # the belief is made once; the inner sampler per request
        if getattr(gate.keywords.get("belief"), "probe", "") is None:
            raise ValueError("gate.belief.probe is not set: the probe.npz that `kate diagnose name=probes` writes")
    service = ChatService(model_for, knowledge, settings, gate)
    limits_cfg = dict(cfg.get("limits") or {})
    body_limit = int(limits_cfg.pop("max_body_bytes", 4 * 1024 * 1024))
    key_env = cfg.get("api_key_env")
    api_key = os.environ.get(key_env) if key_env else None
    if key_env and not api_key:
        raise ValueError(f"api_key_env={key_env!r} but that environment variable is empty")
    server = ServerSettings(model_names=names, api_key=api_key, max_body_bytes=body_limit,
                            max_concurrent=int(cfg.get("max_concurrent", 4)), max_queue=int(cfg.get("max_queue", 16)),
                            request_timeout=float(cfg.get("request_timeout", 300.0)), limits=Limits(**limits_cfg))  # fmt: skip
    learner = None
    if learn.get("enabled"):
        learner = trajectory_learner(learned_base(knowledge, learn["kb"]), knowledge)

    def describe() -> dict[str, Any]:
        return {"model": model_identity(model), "served_names": list(names), "settings": settings.__dict__,
                "gate": repr(gate) if gate is not None else None,
                "knowledge": knowledge.describe() if knowledge is not None else None,
                "learn": learn}  # fmt: skip

    app = create_app(service, server, learner=learner, describe=describe)
    return app, ServerInfo(model, names, service, knowledge)


def run_serve(cfg: DictConfig) -> None:
    import uvicorn

    app, info = build_server(cfg)
    host, port = str(cfg.host), int(cfg.port)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    print(f"kate serve: {', '.join(info.names)} on http://{host}:{port}/v1 "
          f"(width {cfg.width}, vote {cfg.vote}, knowledge {'on' if info.knowledge else 'off'})", flush=True)  # fmt: skip
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=int(cfg.graceful_shutdown))
    uvicorn.Server(config).run(sockets=[sock])

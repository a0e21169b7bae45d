"""`kate models`: list, install and verify the offline model files kate knows."""

from __future__ import annotations

from omegaconf import DictConfig

from kate.llm import registry
from kate.llm.adapters import ADAPTERS, shipped_adapter

DEFAULT_INSTALL = (registry.DEFAULT_AGENT_MODEL, registry.SMALL_TEST_MODEL, registry.DEFAULT_EMBEDDING_MODEL)


def run_models(cfg: DictConfig) -> dict[str, str]:
    """Returns name -> status ("installed <path>", "missing: ...", "ok <path>")."""
    action = cfg.action
    names = list(cfg.names) or (list(DEFAULT_INSTALL) if action == "install" else sorted(registry.MODELS))
    status: dict[str, str] = {}
    for name in names:
        spec = registry.spec_of(name)
        if action == "list":
            state = "installed" if registry.is_installed(name) else "not installed"
            status[name] = f"{state:13s}  {spec.description}"
        elif action == "install":
            status[name] = f"ok  {registry.install(name)}"
        elif action == "verify":
            try:
                status[name] = f"ok  {registry.model_path(name)}"
            except registry.ModelFileError as error:
                status[name] = f"FAILED  {error}"
        else:
            raise ValueError(f"unknown action {action!r}: use list, install or verify")
    if action in ("list", "verify") and not list(cfg.names):  # the adapters kate ships (llm.lora=<name>)
        for name, spec in ADAPTERS.items():
            try:
                status[name] = f"{'ok' if action == 'verify' else 'ships':13s}  adapter on {spec.base}: " + (
                    spec.description if action == "list" else str(shipped_adapter(name)))
            except registry.ModelFileError as error:
                status[name] = f"FAILED  {error}"
    for name, line in status.items():
        print(f"{name:38s} {line}")
    if action == "verify" and any(v.startswith("FAILED") for v in status.values()):
        raise SystemExit(1)
    return status

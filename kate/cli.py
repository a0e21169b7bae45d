"""The `kate` command. Each subcommand is a Hydra app whose `@hydra.main` only calls a plain
function (the one tests call): `kate demo llm=hf llm.device=cuda`, `kate models install NAME`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import hydra
from omegaconf import DictConfig

import kate.configs  # noqa: F401  (registers every job's typed schema with Hydra's ConfigStore)
from kate.train.config import JOBS, register as register_train_schemas

_PACKAGED = Path(__file__).parent / "_conf"
CONF_DIR = _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[1] / "conf"

# subcommand -> (config name, "module:function"); modules import lazily, so `kate models` stays fast.
SUBCOMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": ("demo", "kate.demo:run_demo", "ask the model a few tool-calling questions, print parsed calls"),
    "main": ("main", "kate.eval.main_job:run_main", "the main job: KATE vs direct on a fixed BFCL slice, with report"),
    "eval": ("eval", "kate.eval.run_eval:run_eval", "one arm on BFCL-V3 categories, resumable, one folder per seed"),
    "report": ("report", "kate.eval.report_cmd:run_report", "compare result folders: table, fixed/broken, plots"),
    "kb": ("kb", "kate.kb_cmd:run_kb", "build | query | inspect a knowledge base"),
    "appworld": ("appworld", "kate.appworld_cmd:run_appworld", "code-action loop on AppWorld or its stand-in"),
    "serve": ("serve", "kate.serve_cmd:run_serve", "OpenAI-compatible server: kate's knowledge and vote for any agent loop"),
    "models": ("models", "kate.models_cmd:run_models", "list | install | verify [NAME ...] offline model files"),
    "train": ("train/<job>", "kate.train_cmd:run_<job>", "training: data | sft | grpo | dpo | verifier (SFT / GRPO / DPO / reward model with TRL)"),
    "diagnose": ("diagnose", "kate.diagnose_cmd:run_diagnose", "knowing-doing diagnostics: name=necessity|...|gate|all set=..."),
    "results": ("results", "kate.eval.results_doc:run_results", "regenerate docs/results.md and the README's results table"),
}


def _load(target: str) -> Callable[[DictConfig], object]:
    module, func = target.split(":")
    return getattr(__import__(module, fromlist=[func]), func)


def hydra_app(config_name: str, target: str) -> Callable[[], None]:
    @hydra.main(config_path=str(CONF_DIR), config_name=config_name, version_base="1.3")
    def app(cfg: DictConfig) -> None:
        _load(target)(cfg)

    return app


def _models_overrides(args: list[str]) -> list[str]:
    """`models install a b` -> `action=install names=[a,b]`; Hydra overrides pass through."""
    if args and "=" not in args[0] and not args[0].startswith("-"):
        action, rest = args[0], args[1:]
        names = [a for a in rest if "=" not in a and not a.startswith("-")]
        others = [a for a in rest if a not in names]
        return [f"action={action}", f"names=[{','.join(names)}]", *others]
    return args


def usage() -> str:
    lines = ["usage: kate SUBCOMMAND [hydra overrides ...]", ""]
    lines += [f"  {name:8s} {help_}" for name, (_, _, help_) in SUBCOMMANDS.items()]
    lines += ["", "Overrides are Hydra's: `kate demo llm=hf`, `kate demo --cfg job` prints the config."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"} or args[0] not in SUBCOMMANDS:
        print(usage())
        raise SystemExit(0 if not args or args[0] in {"-h", "--help", "help"} else 2)
    sub, rest = args[0], args[1:]
    if sub == "models":
        rest = _models_overrides(rest)
    config_name, target, _ = SUBCOMMANDS[sub]
    if sub == "train":
        if not rest or rest[0] not in JOBS:
            print(f"usage: kate train {{{'|'.join(JOBS)}}} [hydra overrides ...]")
            raise SystemExit(2)
        register_train_schemas()
        job, rest = rest[0], rest[1:]
        config_name, target, sub = f"train/{job}", f"kate.train_cmd:run_{job}", f"train {job}"
    sys.argv = [f"kate {sub}", *rest]
    hydra_app(config_name, target)()


if __name__ == "__main__":
    main()

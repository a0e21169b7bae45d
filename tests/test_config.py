"""Hydra: every option of every config group composes and instantiates; every job config is typed
by its schema (every field with help text); named arms and evaluation suites compose; the plain
functions behind each `@hydra.main` run on composed configs."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from kate.cli import CONF_DIR, SUBCOMMANDS
from kate.eval.config import instantiate
from kate.llm.base import ChatModel
from kate.llm.registry import SMALL_TEST_MODEL

# Options that load a model are pointed at the small one, to keep this fast.
LIGHT = {"llamacpp": [f"llm.model={SMALL_TEST_MODEL}", "llm.n_ctx=1024"], "hf": [f"llm.model={SMALL_TEST_MODEL}"],
         "brief_reasoning": [f"llm.model={SMALL_TEST_MODEL}", "llm.n_ctx=1024"],
         # the default model and the adapter kate ships for it (the small model has none)
         "base_gated": ["llm.n_ctx=1024", "llm.kv_cells=1024"], "default": ["llm.n_ctx=1024", "llm.kv_cells=1024"]}


def _groups():
    # arms and suites (global overrides, nothing to instantiate): below; conf/train/ holds the training
    # jobs' own configs (`kate train <job>`), not a group
    for group_dir in sorted(p for p in CONF_DIR.iterdir() if p.is_dir() and p.name not in ("arm", "suite", "train")):
        for option in sorted(group_dir.glob("*.yaml")):
            real = group_dir.name == "llm" and option.stem in LIGHT  # loads the small real model
            yield pytest.param(group_dir.name, option.stem, marks=[pytest.mark.model] if real else [])


# the subcommand config whose defaults list holds each group
HOST = {"llm": "demo", "sampling": "eval", "kb": "kb", "retrieval": "kb", "code_sampling": "appworld", "gate": "serve"}
# groups placed at another package in their host config: group -> that package
PACKAGE = {"code_sampling": "arms.direct.sampling"}


@pytest.mark.parametrize("group,option", list(_groups()))
def test_every_option_of_every_group_instantiates(group, option):
    assert group in HOST, f"conf/{group}/ is a new group: add the config that composes it to HOST"
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        key = f"{group}@{PACKAGE[group]}" if group in PACKAGE else group
        cfg = compose(HOST[group], overrides=[f"{key}={option}", *LIGHT.get(option, [])])
    obj = instantiate(OmegaConf.select(cfg, PACKAGE.get(group, group)))
    if group == "llm":
        assert isinstance(obj, ChatModel)


@pytest.mark.parametrize("name", sorted(n for n in SUBCOMMANDS if n != "train"))
def test_every_subcommand_config_is_typed_by_its_schema(name):
    from kate.configs import SCHEMAS

    config_name = SUBCOMMANDS[name][0]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name)
        assert OmegaConf.get_type(cfg) is SCHEMAS[config_name]
        with pytest.raises(Exception, match="no_such_key"):
            compose(config_name, overrides=["no_such_key=1"])


def test_every_schema_field_has_help_text():
    import dataclasses

    from kate.configs import NESTED, SCHEMAS, AppWorldSettings, CodeArmConfig, CodeKnowledgeConfig, CodeLoopConfig
    from kate.eval.config import KnowledgeConfig, SliceConfig

    schemas = [*SCHEMAS.values(), *NESTED, AppWorldSettings, CodeArmConfig, CodeKnowledgeConfig, CodeLoopConfig,
               KnowledgeConfig, SliceConfig]  # fmt: skip
    missing = [f"{s.__name__}.{f.name}" for s in schemas for f in dataclasses.fields(s) if not f.metadata.get("help")]
    assert not missing


@pytest.mark.parametrize("arm", sorted(p.stem for p in (CONF_DIR / "arm").glob("*.yaml")))
def test_every_named_arm_composes_into_a_policy_config(arm):
    from kate.eval.arm import check_arm, loop_settings
    from kate.eval.config import plain

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        c = plain(compose("eval", overrides=[f"arm={arm}"]))
    assert c["name"] == arm and c["out_dir"] == f"runs/{arm}"
    check_arm(c["sampling"], c["knowledge"], "arm")
    sampler = instantiate(c["sampling"])
    assert ("n=8" in repr(sampler)) == ("w8" in arm)
    assert loop_settings(c).max_steps == 20
    if arm == "st_w8":
        assert sampler.aggregate == "majority"  # the vote its committed records were measured with
    no_knowledge = {"direct", "w8v", "python", "both", "both_gated", "grpo_gated", "grpo_gated_forms", "default_model"}
    assert bool(c["knowledge"]) == (arm not in no_knowledge and not arm.startswith("brief"))
    assert c["llm"].get("tool_prompt", "native") == {"python": "python", "both": "both", "both_gated": "both"}.get(
        arm, "native")
    if "brief" in arm:
        assert c["llm"]["_target_"] == "kate.llm.brief_llamacpp.brief_llamacpp"
        assert c["llm"]["budget"] == (16 if arm.endswith("16") else 32) and c["llm"]["opener"].startswith("<think>\n")
    if arm.startswith("grpo_gated") or arm == "default_model":
        assert c["llm"]["_target_"] == "kate.llm.base_gated_llamacpp.base_gated_llamacpp"
        assert (CONF_DIR.parent / c["llm"]["lora"]).is_file()
        assert c["llm"].get("base_tool_prompt") == (None if arm == "grpo_gated" else "both")
        assert (c["llm"].get("tools_fit") is not None) == (arm == "default_model")


def test_evaluation_suites_compose():
    from kate.bfcl.data import CATEGORIES, SINGLE_TURN

    want = {"bfcl_v3_full": (list(CATEGORIES), "all"), "test_halves": (list(CATEGORIES), "test"),
            "full_test_half": ([*SINGLE_TURN, "multi_turn_base"], "test")}  # fmt: skip
    assert sorted(p.stem for p in (CONF_DIR / "suite").glob("*.yaml")) == sorted(want)
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        for name, (categories, split) in want.items():
            cfg = compose("eval", overrides=[f"suite={name}", "arm=st_w8v"])
            assert (list(cfg.categories), str(cfg.split.value), cfg.limit, cfg.name) == (categories, split, None, "st_w8v"), name
            mine = compose("eval", overrides=[f"suite={name}", "limit=3"])  # a user's override still wins
            assert mine.limit == 3


def test_the_suites_script_lists_every_suite():
    import subprocess

    out = subprocess.run([sys.executable, str(CONF_DIR.parent / "eval" / "suites.py"), "list"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    for name in ("bfcl_v3_full", "test_halves", "full_test_half", "main_slice", "appworld_test_normal"):
        assert f"  {name} " in out


def test_demo_runs_on_the_fake_model(capsys):
    from kate.demo import run_demo

    script = ['{"name": "calculator", "arguments": {"expression": "1234 * 5678"}}', "Shakespeare.", '{"name": "x"', "ok"]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose("demo", overrides=["llm=fake", f"llm.script={script}", "llm.repeat_last=false"])
    rows = run_demo(cfg)
    assert rows[0]["calls"] == [{"name": "calculator", "arguments": {"expression": "1234 * 5678"}}]
    assert rows[1]["calls"] == [] and rows[2]["parse_error"]
    assert "calculator" in capsys.readouterr().out


def test_models_list_runs():
    from kate.models_cmd import run_models

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        status = run_models(compose("models"))
    assert status[SMALL_TEST_MODEL].startswith("installed")
    assert status["qwen2.5-coder-0.5b-grpo-answers"].startswith("ships")  # the adapters kate ships, by name


def test_cli_entry_point():
    out = subprocess.run([sys.executable, "-m", "kate.cli", "models", "verify", SMALL_TEST_MODEL], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert SMALL_TEST_MODEL in out.stdout and "ok" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "kate.cli", "nonsense"], capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stdout


@pytest.mark.parametrize("job", ["data", "sft", "grpo", "dpo"])
def test_every_training_job_config_is_typed_by_its_schema(job):
    from kate.train.config import DataConfig, DPOJobConfig, GRPOJobConfig, SFTJobConfig, register

    register()
    schema = {"data": DataConfig, "sft": SFTJobConfig, "grpo": GRPOJobConfig, "dpo": DPOJobConfig}[job]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = compose(f"train/{job}")
        assert OmegaConf.get_type(cfg) is schema
        with pytest.raises(Exception, match="no_such_key"):
            compose(f"train/{job}", overrides=["no_such_key=1"])


def test_every_training_schema_field_has_help_text():
    import dataclasses

    from kate.train import config

    schemas = [v for v in vars(config).values() if dataclasses.is_dataclass(v) and v.__module__ == config.__name__]
    missing = [f"{s.__name__}.{f.name}" for s in schemas for f in dataclasses.fields(s) if not f.metadata.get("help")]
    assert len(schemas) >= 9 and not missing

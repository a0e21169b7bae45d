"""kate.eval.arms: an arm composed as ``kate eval arm=<name>`` composes it (every arm in conf/arm/), run
by the one runner on the fake model into a folder that resumes, and refused by a folder of another
configuration."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from kate.bfcl.data import load_entries
from kate.cli import CONF_DIR
from kate.eval.arm import arm_config, build_policy, loop_settings
from kate.eval.arms import compose_arm, open_arm, run_composed
from kate.eval.config import plain
from kate.eval.run_store import RunMismatch
from kate.eval.runner import run_meta
from kate.tasks.bfcl import BFCLTask

ARMS = sorted(p.stem for p in (Path(CONF_DIR) / "arm").glob("*.yaml"))


@pytest.mark.parametrize("arm", ARMS)
def test_compose_arm_is_kate_evals_composition(arm):
    overrides = ["llm.max_parallel=8", "split=train"]
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        expected = plain(compose("eval", overrides=[f"arm={arm}", *overrides]))
    assert compose_arm(arm, overrides, conf_dir=CONF_DIR) == expected


def test_no_arm_is_the_default_arm():
    assert compose_arm(None, ["sampling=width"], conf_dir=CONF_DIR) == compose_arm("direct", ["sampling=width"], conf_dir=CONF_DIR)


def test_run_composed_records_resumes_and_keeps_the_meta_of_the_pieces(tmp_path):
    c = compose_arm("direct", ["llm=fake", "max_steps=2"], conf_dir=CONF_DIR)
    model = instantiate(c["llm"])
    task = BFCLTask(load_entries("irrelevance", "test", 2), "test")
    records = run_composed(c, model, task, tmp_path / "seed_0", arm="direct")
    assert [r["id"] for r in records] == [e.id for e in task.items()]
    asked = len(model.requests)
    assert asked and run_composed(c, model, task, tmp_path / "seed_0", arm="direct") == records
    assert len(model.requests) == asked  # resumed: nothing asked again
    settings = loop_settings(c)
    policy = build_policy(model, c["sampling"], c["knowledge"], settings)
    meta = run_meta("direct", task, policy, 0, arm_config(c["llm"], c["sampling"], c["knowledge"], settings), task.items(), 1)
    _, store = open_arm(c, model, task, tmp_path / "seed_0", arm="direct")
    assert {k: v for k, v in store.meta.items() if k != "fingerprint"} == meta


def test_a_folder_of_another_configuration_is_refused(tmp_path):
    c = compose_arm("direct", ["llm=fake"], conf_dir=CONF_DIR)
    task = BFCLTask(load_entries("irrelevance", "test", 1), "test")
    run_composed(c, instantiate(c["llm"]), task, tmp_path, arm="direct")
    other = compose_arm("direct", ["llm=fake", "max_steps=3"], conf_dir=CONF_DIR)
    with pytest.raises(RunMismatch):
        open_arm(other, instantiate(other["llm"]), task, tmp_path, arm="direct")


def test_the_cache_size_is_not_fingerprinted_and_the_rest_of_the_llm_is():
    c = compose_arm("direct", [], conf_dir=CONF_DIR)  # the default llama.cpp client, not loaded
    settings = loop_settings(c)

    def fingerprinted(**llm) -> dict:
        return arm_config({**c["llm"], **llm}, c["sampling"], c["knowledge"], settings)["llm"]

    assert "kv_cells" in c["llm"] and "kv_cells" not in fingerprinted()
    assert fingerprinted(kv_cells=131072) == fingerprinted()  # a larger cache resumes the same run
    assert fingerprinted(n_ctx=4096) != fingerprinted()

"""One definition of the loop settings: the job schemas' loop fields (``kate eval``, ``kate main``,
``kate appworld``) are ``LoopSettings``' fields, with its names, types' values, help and defaults
(where a job's default differs on purpose, ``loop_schema(defaults=...)`` names it), and a composed
job's loop reads back as a ``LoopSettings``."""

from __future__ import annotations

import dataclasses

import pytest
from hydra import compose, initialize_config_dir

from kate.agent.settings import LoopSettings
from kate.cli import CONF_DIR
from kate.configs import CodeLoopConfig
from kate.eval.arm import loop_settings
from kate.eval.config import EvalConfig, LoopFields, MainConfig, plain

LOOP = {f.name: f for f in dataclasses.fields(LoopSettings)}


def _value(default):
    return getattr(default, "value", default)  # an enum field's default as LoopSettings spells it


@pytest.mark.parametrize("schema", [LoopFields, EvalConfig, MainConfig])
def test_the_evaluation_jobs_loop_fields_are_loop_settings(schema):
    fields = {f.name: f for f in dataclasses.fields(schema) if f.name in LOOP}
    assert set(fields) == set(LOOP)
    for name, f in fields.items():
        assert _value(f.default) == LOOP[name].default, name
        assert f.metadata["help"] == LOOP[name].metadata["help"], name


def test_the_code_loop_keeps_the_fields_that_apply_to_code_with_its_own_malformed_default():
    fields = {f.name: f for f in dataclasses.fields(CodeLoopConfig)}
    assert set(fields) == {"max_steps", "repeat_policy", "max_malformed", "max_output_chars"}
    assert fields["max_malformed"].default == 2  # a code loop ends after two replies without code
    assert _value(fields["repeat_policy"].default) == LOOP["repeat_policy"].default
    assert fields["max_steps"].metadata["help"] == LOOP["max_steps"].metadata["help"]


@pytest.mark.parametrize("job", ["eval", "main"])
def test_a_composed_job_reads_back_as_loop_settings(job):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        c = plain(compose(job))
    settings = loop_settings(c)
    assert isinstance(settings, LoopSettings) and settings.one_call is True  # both YAMLs set one_call: true
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        with pytest.raises(Exception, match="repeat_policy"):
            compose(job, overrides=["repeat_policy=sometimes"])


def test_the_appworld_loop_reads_back_as_loop_settings():
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        loop = dict(plain(compose("appworld"))["loop"])
    loop.pop("max_output_chars")
    settings = LoopSettings(**loop, system_prompt=None)
    assert (settings.max_steps, settings.repeat_policy, settings.max_malformed) == (20, "warn", 2)

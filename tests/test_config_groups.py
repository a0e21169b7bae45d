"""The typed options of the config groups (kate/configs/): a misspelt key under llm., sampling.,
retrieval., kb., gate. or code_sampling. fails when Hydra composes, naming the key; the schemas
written out by hand match their classes' parameters; a composed option holds what its YAML sets."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from kate.cli import CONF_DIR
from kate.configs import GROUP_SCHEMAS
from kate.configs.llm import SCHEMAS as LLM_SCHEMAS
from kate.configs.llm import SKIPPED
from kate.configs.sampling import HFArgs, ProbeBeliefSchema
from kate.eval.config import plain

# group -> (the job that composes it, the override that selects an option, the node's key)
HOSTS = {
    "llm": ("eval", [], "llm"),
    "sampling": ("eval", ["sampling=width"], "sampling"),
    "retrieval": ("kb", [], "retrieval"),
    "kb": ("kb", [], "kb"),
    "gate": ("serve", ["gate=probe"], "gate"),
    "code_sampling": ("appworld", [], "arms.kate.sampling"),
}


def _compose(job, overrides):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose(job, overrides=overrides)


@pytest.mark.parametrize("group", sorted(HOSTS))
def test_a_misspelt_key_in_a_group_option_fails_at_compose_naming_the_key(group):
    job, select, key = HOSTS[group]
    assert _compose(job, select) is not None  # the option itself composes
    with pytest.raises(Exception, match="no_such_key") as err:
        _compose(job, [*select, f"{key}.no_such_key=1"])
    assert "Schema" in str(err.value.__cause__)  # refused by the option's typed schema


def test_a_misspelt_nested_key_fails_too():
    with pytest.raises(Exception, match="probe_path"):
        _compose("serve", ["gate=probe", "gate.belief.probe_path=x"])


def test_a_wrong_type_fails_at_compose():
    with pytest.raises(Exception, match="max_tokens"):
        _compose("eval", ["sampling.max_tokens=many"])


def _parameters(target: str) -> set[str]:
    module, _, name = target.rpartition(".")
    return set(inspect.signature(getattr(importlib.import_module(module), name)).parameters)


# read at collection: the fast tier's guard replaces the model clients' __init__ while a test runs
PARAMETERS = {t: _parameters(t) for t in [*(s.__dataclass_fields__["_target_"].default for s in LLM_SCHEMAS.values()),
                                          "kate.diagnose.gate.ProbeBelief"]}  # fmt: skip


def _fields(schema: type) -> set[str]:
    return {f.name for f in dataclasses.fields(schema)} - {"_target_"}


@pytest.mark.parametrize("option", sorted(LLM_SCHEMAS))
def test_each_written_out_llm_schema_matches_its_class_parameters(option):
    schema = LLM_SCHEMAS[option]
    params = PARAMETERS[schema.__dataclass_fields__["_target_"].default]
    assert _fields(schema) == params - set(SKIPPED.get(option, ())), option


def test_the_probe_belief_schema_matches_its_class():
    params = PARAMETERS["kate.diagnose.gate.ProbeBelief"] - {"model"}  # model: a client made in code
    assert _fields(ProbeBeliefSchema) == params
    assert _fields(HFArgs) <= _fields(LLM_SCHEMAS["hf"])


def test_every_group_schema_field_has_help_text():
    schemas = [s for options in GROUP_SCHEMAS.values() for s in options.values()] + [ProbeBeliefSchema, HFArgs]
    missing = [f"{s.__name__}.{f.name}" for s in schemas for f in dataclasses.fields(s) if not f.metadata.get("help")]
    assert not missing


def _own_node(path):
    node = OmegaConf.to_container(OmegaConf.load(path))
    return node.pop("defaults", None), node


def _same(written, composed, path):
    """Every value the YAML writes, composed unchanged (value and type; interpolations aside)."""
    if isinstance(written, dict):
        assert isinstance(composed, dict) and set(composed) == set(written), path
        for key, value in written.items():
            _same(value, composed[key], f"{path}.{key}")
    elif not (isinstance(written, str) and "${" in written):
        assert (composed, type(composed)) == (written, type(written)), path


@pytest.mark.parametrize("group", sorted(HOSTS))
def test_every_option_names_its_schema_and_composes_to_what_it_writes(group):
    """Unset schema fields are left out of the plain config and the schema converts no value: a node
    holds what its YAML sets, so run fingerprints are those of the untyped nodes."""
    job, _, key = HOSTS[group]
    stored = {f"{option}_schema" for option in GROUP_SCHEMAS[group]}
    for path in sorted((CONF_DIR / group).glob("*.yaml")):
        defaults, written = _own_node(path)
        first = defaults[0] if defaults else None
        assert first in stored or (CONF_DIR / group / f"{first}.yaml").is_file(), path  # its schema, or a sibling's
        if first not in stored:
            continue
        group_key = f"{group}@{key}" if key != group else group
        composed = OmegaConf.select(OmegaConf.create(plain(_compose(job, [f"{group_key}={path.stem}"]))), key)
        _same(written, OmegaConf.to_container(composed), str(path))

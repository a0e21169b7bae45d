"""Schemas of the samplers (``conf/sampling/``, ``conf/code_sampling/``) and of the probe gate
(``conf/gate/``), read from the sampler dataclasses (their fields' help is the help here). Fields
are unset (``???``) by default: what a YAML leaves out is not passed, the sampler's default applies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from omegaconf import MISSING

from kate.configs.llm import HFSchema
from kate.configs.targets import Number, target_schema
from kate.eval.config import help_field

INNER = {"inner": Any}  # a conf/sampling/ node of any sampler: typed where it comes from a group option


@dataclass
class HFArgs:
    """The HFChatModel keywords a probe belief loads its hidden states with (``HFSchema`` less ``_target_``)."""

    model: Optional[str] = help_field(HFSchema.__dataclass_fields__["model"].metadata["help"], MISSING)
    device: str = help_field("auto | cpu | cuda | cuda:1 ...", MISSING)
    dtype: str = help_field("float32 on CPU; bfloat16 / float16 on GPU", MISSING)
    allow_hub: bool = help_field("may download from the hub (kate never downloads by default)", MISSING)
    merge: bool = help_field("a PEFT adapter folder as `model`: merge it into the weights at load", MISSING)


@dataclass
class ProbeBeliefSchema:
    """``kate.diagnose.gate.ProbeBelief``, written out (its module loads torch)."""

    _target_: str = help_field("the belief class", "kate.diagnose.gate.ProbeBelief")
    probe: Optional[str] = help_field("the .npz of `kate diagnose name=probes` (probes/probe.npz); null: unset, an "
                                      "error at the first gated step", MISSING)
    hf: HFArgs = help_field("the hf client the hidden states come from (loaded at the first gated step)", MISSING)
    # float, not Number: OmegaConf cannot expand a union node inside a nested structured node
    temperature: float = help_field("belief = sigmoid(probe logit / T) (When2Tool: T = 2)", MISSING)


GreedySchema = target_schema("GreedySchema", "kate.sampling.policy.GreedySampler")
WidthSchema = target_schema("WidthSchema", "kate.sampling.policy.WidthSampler")
DepthSchema = target_schema("DepthSchema", "kate.sampling.policy.DepthSampler", nested=INNER)
AdaptiveSchema = target_schema("AdaptiveSchema", "kate.sampling.adaptive.AdaptiveWidthSampler")
AbstainSchema = target_schema("AbstainSchema", "kate.sampling.abstain.AbstainSampler")
GateSchema = target_schema("GateSchema", "kate.sampling.gate.GateSampler",
                           nested={"belief": ProbeBeliefSchema, **INNER})  # fmt: skip
GreedyCodeSchema = target_schema("GreedyCodeSchema", "kate.sampling.code.GreedyCode")
WidthCodeSchema = target_schema("WidthCodeSchema", "kate.sampling.code.WidthCode")

# group -> option -> its schema (stored as <group>/<option>_schema)
GROUPS = {
    "sampling": {"greedy": GreedySchema, "width": WidthSchema, "depth": DepthSchema, "adaptive": AdaptiveSchema,
                 "gate": GateSchema, "abstain": AbstainSchema},
    "gate": {"probe": GateSchema},
    "code_sampling": {"greedy": GreedyCodeSchema, "width": WidthCodeSchema},
}  # fmt: skip

"""Per-step action selection: greedy, width (N samples + vote) and depth (reason-first prompts)."""

from kate.sampling.adaptive import AdaptiveWidthSampler
from kate.sampling.depth import DEPTH_PROMPTS, depth_prompt, with_depth_prompt
from kate.sampling.policy import DepthSampler, GreedySampler, Sampler, Step, WidthSampler
from kate.sampling.vote import AGGREGATORS, Candidate, Vote, critic_vote, majority_vote

__all__ = [
    "AGGREGATORS",
    "AdaptiveWidthSampler",
    "DEPTH_PROMPTS",
    "Candidate",
    "DepthSampler",
    "GreedySampler",
    "Sampler",
    "Step",
    "Vote",
    "WidthSampler",
    "critic_vote",
    "depth_prompt",
    "majority_vote",
    "with_depth_prompt",
]

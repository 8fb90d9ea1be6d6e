"""vlarl-policies: Vision-Language-Action policies with the act / evaluate_actions interface RL needs.

    policy = vlarl_policies.make("pi0", preset="tiny", action_dim=4, state_dim=4)
    out = policy.act(obs_batch)                       # ActOutput: actions, logprobs, values, forward_inputs
    again = policy.evaluate_actions(out.forward_inputs)   # EvalOutput: logprobs, entropy, values (with grad)
    policy.save_pretrained("ckpt"); vlarl_policies.from_pretrained("ckpt")
    vlarl_policies.resample_saved("ckpt", "ckpt-noise0.2", noise_level=0.2)   # same weights, other sampling
"""

from importlib.metadata import version as _installed_version

from vlarl_policies.base import ActOutput, EvalOutput, PolicyConfig, VLAPolicy
from vlarl_policies.registry import available_policies, from_pretrained, make, policy_class, resample_saved
from vlarl_policies.tokenizer import PromptTokenizer

__version__ = _installed_version("vlarl-policies")

__all__ = [
    "ActOutput",
    "EvalOutput",
    "PolicyConfig",
    "PromptTokenizer",
    "VLAPolicy",
    "available_policies",
    "from_pretrained",
    "make",
    "policy_class",
    "resample_saved",
]

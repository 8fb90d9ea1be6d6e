"""pi0 and pi0.5: flow-matching VLAs (PaliGemma + Gemma action expert) with RL log-probabilities."""

from vlarl_policies.pi0.checkpoint import load_published
from vlarl_policies.pi0.configuration_pi0 import Pi0Config, Pi05Config
from vlarl_policies.pi0.modeling_pi0 import Pi0Policy, Pi05Policy

__all__ = ["Pi0Config", "Pi05Config", "Pi0Policy", "Pi05Policy", "load_published"]

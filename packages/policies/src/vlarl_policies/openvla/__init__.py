"""OpenVLA and OpenVLA-OFT: VLAs whose actions are tokens over 256 bins, with exact log-probabilities for RL."""

from vlarl_policies.openvla.checkpoint import load_published
from vlarl_policies.openvla.configuration_openvla import OpenVLAConfig, OpenVLAOFTConfig
from vlarl_policies.openvla.modeling_openvla import OpenVLAPolicy
from vlarl_policies.openvla.modeling_openvla_oft import OpenVLAOFTPolicy

__all__ = ["OpenVLAConfig", "OpenVLAOFTConfig", "OpenVLAOFTPolicy", "OpenVLAPolicy", "load_published"]

"""Every worker builds its policy the same way: from one saved directory."""

from __future__ import annotations

import torch


def load_policy(path: str, threads: int):
    """``vlarl_policies.from_pretrained(path)`` on this process's device, with ``threads`` torch threads."""
    import vlarl_policies

    torch.set_num_threads(threads)
    policy = vlarl_policies.from_pretrained(path)
    if torch.cuda.is_available():
        policy = policy.to("cuda")
    return policy

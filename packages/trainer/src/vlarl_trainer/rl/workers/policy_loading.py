"""Every worker builds its policy the same way: from one saved directory."""

from __future__ import annotations

import torch


def worker_device() -> torch.device:
    """The device this process computes on: its GPU when CUDA sees one (Ray shows a worker its own), else
    the CPU (a worker given a logical GPU on a machine without CUDA)."""
    return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")


def load_policy(path: str, threads: int, on_device: bool = True):
    """``vlarl_policies.from_pretrained(path)`` with ``threads`` torch threads, moved to ``worker_device()``
    unless ``on_device`` is False (the FSDP actor moves it shard unit by shard unit instead)."""
    import vlarl_policies

    torch.set_num_threads(threads)
    policy = vlarl_policies.from_pretrained(path)
    return policy.to(worker_device()) if on_device else policy

"""``lf.cuda``: torch.cuda's questions, answered for lazyfuse's ``cuda`` devices.

Scripts written for torch ask ``torch.cuda.is_available()`` to pick a device and call
``torch.cuda.synchronize()`` around timings; these are the same calls on lazyfuse, where
``synchronize`` also drains the device's pending lazy work (``lf.sync``), since a timing that
stopped before the drain would measure recording only.
"""
from __future__ import annotations

import torch

from .creation import manual_seed as creation_manual_seed


def is_available() -> bool:
    """Whether a CUDA/HIP GPU is visible, so ``device='cuda'`` works."""
    return torch.cuda.is_available()


def device_count() -> int:
    """The number of visible GPUs (``cuda:0`` ... ``cuda:N-1``)."""
    return torch.cuda.device_count()


def current_device() -> int:
    """torch's current GPU index (what ``device='cuda'`` means)."""
    return torch.cuda.current_device()


def is_bf16_supported() -> bool:
    """Whether the current GPU computes bfloat16 (False with no GPU)."""
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


def synchronize(device=None) -> None:
    """Drain the GPU's pending lazy work and wait for its stream (``lf.sync('cuda')``)."""
    from .functions import sync
    if not torch.cuda.is_available():
        raise AssertionError("Torch not compiled with CUDA enabled (lazyfuse: no GPU is visible here, so there is "
                             "no cuda device to synchronize; lf.sync() drains the cpu device)")
    sync("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}")


# one lazyfuse generator serves every device: torch.cuda's seeding is lf.manual_seed
manual_seed = manual_seed_all = creation_manual_seed

__all__ = ["is_available", "device_count", "current_device", "is_bf16_supported", "synchronize", "manual_seed",
           "manual_seed_all"]

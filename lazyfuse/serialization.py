"""``lf.save`` / ``lf.load``: torch's checkpoint format, with lazyfuse tensors in it.

A lazyfuse Tensor pickles as its value (a torch tensor), its device's name and its
``requires_grad`` (``Tensor.__reduce_ex__``), so ``lf.save`` is ``torch.save`` and a checkpoint
of lazyfuse tensors (a state dict, an optimizer's moments, nested in dicts and lists) holds plain
torch storages. ``lf.load`` is ``torch.load`` that lets lazyfuse's one rebuild function through
``weights_only=True`` (torch's default: nothing else is trusted) and puts every tensor on
``map_location`` when given.
"""
from __future__ import annotations

import torch

from .runtime.device import device as get_device
from .tensor import _rebuild, load_device


def save(obj, f, **kwargs) -> None:
    """Write ``obj`` (lazyfuse tensors, torch tensors, containers of them) to the file or
    file-like ``f`` in torch's format; drains what its tensors need."""
    torch.save(obj, f, **kwargs)


def load(f, map_location=None, *, weights_only: bool = True, **kwargs):
    """Read what ``save`` (or ``torch.save``) wrote: lazyfuse tensors come back as lazyfuse tensors
    on their device (or on ``map_location``: a device name or ``lf.device``), torch tensors as torch's."""
    previous = load_device.device
    if map_location is not None and not callable(map_location) and not isinstance(map_location, dict):
        load_device.device = get_device(map_location)
    try:
        with torch.serialization.safe_globals([_rebuild]):
            return torch.load(f, map_location=None if load_device.device is not None else map_location,
                              weights_only=weights_only, **kwargs)
    finally:
        load_device.device = previous


__all__ = ["save", "load"]

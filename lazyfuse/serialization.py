"""``lf.save`` / ``lf.load``: torch's checkpoint format, with lazyfuse tensors in it.

A lazyfuse Tensor pickles as its value (a torch tensor), its device's name and its
``requires_grad`` (``Tensor.__reduce_ex__``), so ``lf.save`` is ``torch.save`` and a checkpoint
of lazyfuse tensors (a state dict, an optimizer's moments, nested in dicts and lists) holds plain
torch storages. ``lf.load`` is ``torch.load`` that lets lazyfuse's one rebuild function through
``weights_only=True`` (torch's default: nothing else is trusted) and puts every tensor on
``map_location`` when given.
"""
from __future__ import annotations

import threading

import torch

from .runtime.device import device as get_device


class _LoadDevice(threading.local):
    device = None   # lf.load(map_location=...): where unpickled tensors go instead of their own device


_load_device = _LoadDevice()


def rebuild(value: torch.Tensor, device_name: str, requires_grad: bool):
    """A pickled Tensor again (``Tensor.__reduce_ex__``), on the device of that name (or
    ``lf.load``'s ``map_location``)."""
    from .creation import tensor
    return tensor(value, device=_load_device.device or device_name, requires_grad=requires_grad)


def save(obj, f, **kwargs) -> None:
    """Write ``obj`` (lazyfuse tensors, torch tensors, containers of them) to the file or
    file-like ``f`` in torch's format; drains what its tensors need."""
    torch.save(obj, f, **kwargs)


def load(f, map_location=None, *, weights_only: bool = True, **kwargs):
    """Read what ``save`` (or ``torch.save``) wrote: lazyfuse tensors come back as lazyfuse tensors
    on their device (or on ``map_location``: a device name or ``lf.device``), torch tensors as torch's."""
    # a device (a name, lf.device) moves lazyfuse's tensors; torch's own forms (a function, a dict
    # of locations) go to torch for its tensors
    ours = get_device(map_location) if map_location is not None and not callable(map_location) and \
        not isinstance(map_location, dict) else None
    previous = _load_device.device
    _load_device.device = ours
    try:
        with torch.serialization.safe_globals([rebuild]):
            return torch.load(f, map_location=None if ours is not None else map_location,
                              weights_only=weights_only, **kwargs)
    finally:
        _load_device.device = previous


__all__ = ["save", "load"]

"""Zero-copy interop with torch, numpy and any other DLPack producer or consumer.

Export (``Tensor.__dlpack__``, ``np.asarray(t, copy=False)``) drains the tensor's device, then
hands out a strided view of its buffer. The buffer's pool block is marked exported
(``Buffer.export``): it never returns to the pool, so it can never back another tensor while
the peer still holds it; the peer's capsule keeps the memory alive.

Import (``lf.from_dlpack``) makes the producer's memory the new tensor's storage (an
``ExternalBuffer``: never returned to the pool, and alive as long as the storage is).
Non-contiguous producers with non-negative strides are imported without a copy, as a strided
view of the span they cover; negative strides (numpy's ``a[::-1]``) are refused, because
torch's DLPack importer cannot represent them.

Shared memory is tracked per storage, so importing memory that a live storage already covers
(a round trip ``lf.from_dlpack(torch.from_dlpack(t))``, or one array imported twice) returns a
view of that storage: lazy reads and in-place writes through either tensor then keep program
order. A write from the peer side is seen by lazyfuse work that drains after it; a lazyfuse
write is seen by the peer after a drain (``lf.sync()``).
"""
from __future__ import annotations

import weakref

import numpy as np
import torch

from .errors import DeviceError, DTypeError, ShapeError
from .ir import dtypes as dt
from .ir.node import Node, Op
from .ir.view import View
from .runtime.device import device as get_device
from .runtime.engine import Storage
from .runtime.pool import Buffer, ExternalBuffer
from .tensor import Tensor

_shared: "weakref.WeakSet[Storage]" = weakref.WeakSet()   # storages whose memory a peer may also see


def dlpack_device(device) -> tuple:
    """``(DLPack device type, index)`` of a lazyfuse device's memory (host memory for cpu/interpreter)."""
    return torch.empty(0, device=device.torch_device).__dlpack_device__()


def export_view(t: Tensor, reason: str) -> torch.Tensor:
    """``t``'s value as a torch view of its buffer, handed to a peer: drained first, and the
    buffer taken out of the pool for good."""
    view = t._device_view(reason)
    t.device.synchronize()   # the peer may write it too: nothing queued may still touch it
    buf = t._storage.buffer
    if isinstance(buf, Buffer):
        buf.export()
    _shared.add(t._storage)
    return view


def to_dlpack(t: Tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """``Tensor.__dlpack__``: a DLPack capsule of ``t``'s buffer (see ``export_view``)."""
    if copy:
        view = t._device_view(".__dlpack__(copy=True)")
    else:
        view = export_view(t, ".__dlpack__()")
    kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device),
                                ("copy", copy)) if v is not None}
    return view.__dlpack__(**kwargs)


def to_numpy(t: Tensor, dtype=None, copy=None) -> np.ndarray:
    """``Tensor.__array__`` as numpy 2 calls it.

    ``copy=False`` shares the buffer (or raises ValueError when that is impossible: a dtype
    change, bfloat16, memory that is not on the host). Otherwise the result is a new array, as
    ``.numpy()`` returns: sharing by default would take every ``np.asarray``'d buffer out of
    the pool for good.
    """
    if copy is False:
        why = _numpy_share_refusal(t, dtype)
        if why:
            raise ValueError(f"np.asarray(t, copy=False): {why}; call it without copy=False to get a copy")
        return export_view(t, "np.asarray(copy=False)").numpy()
    a = t.numpy()
    return a if dtype is None else a.astype(dtype, copy=False)


def _numpy_share_refusal(t: Tensor, dtype) -> str:
    if t.device.torch_device.type != "cpu":
        return f"the tensor lives on {t.device.name}, not in host memory"
    if t.dtype is dt.bfloat16:
        return "numpy has no bfloat16"
    if dtype is not None and np.dtype(dtype) != torch.empty(0, dtype=t.dtype.torch).numpy().dtype:
        return f"a {t.dtype.name} tensor cannot be read as {np.dtype(dtype)} without a copy"
    return ""


def from_dlpack(obj, device=None) -> Tensor:
    """A tensor whose storage is ``obj``'s memory, without a copy.

    ``obj``: a torch tensor, a numpy array, a lazyfuse Tensor or any object with
    ``__dlpack__``. ``device``: by default the lazyfuse device of that memory ("cpu" for host
    memory, "cuda:N" for GPU N); host memory may also go to "interpreter". Memory elsewhere
    than ``device`` raises DeviceError (``lf.tensor(obj, device=...)`` copies instead).
    """
    if isinstance(obj, Tensor):
        if device is not None and get_device(device) is not obj.device:
            raise DeviceError(f"from_dlpack(device={device!r}): the tensor is on {obj.device.name} and "
                              "from_dlpack never copies; use lf.tensor(t.numpy(), device=...) to copy")
        return Tensor(obj._storage, obj._view, obj.device)
    src = _torch_view(obj)
    dev = _target_device(src, device)
    dtype = dt.from_torch(src.dtype)
    shared = _shared_view(src, dev, dtype)
    if shared is not None:
        return shared
    if src.is_contiguous():
        shape, view = tuple(src.shape), View.contiguous(tuple(src.shape))
        flat = src.reshape(-1)
    else:
        span = _span(src)
        shape, view = (span,), View(tuple(src.shape), tuple(src.stride()), 0)
        flat = src.as_strided((span,), (1,), src.storage_offset())
    buf = ExternalBuffer(dev.pool, dtype, flat)
    storage = Storage(dev.engine, Node(Op.BUFFER, (), dtype, shape, buf))
    storage.buffer = buf
    _shared.add(storage)
    return Tensor(storage, view, dev)


def _torch_view(obj) -> torch.Tensor:
    """``obj`` as a torch tensor sharing its memory (never a copy)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach()
    if not hasattr(obj, "__dlpack__"):
        raise DTypeError(f"from_dlpack needs an object with __dlpack__ (a torch tensor, numpy array, ...), got "
                         f"{type(obj).__name__}; lf.tensor(data) copies other data")
    if isinstance(obj, np.ndarray):
        if any(s < 0 for s in obj.strides):   # torch's importer aborts the process on these
            raise ShapeError(f"from_dlpack: negative strides {obj.strides} are not supported; pass "
                             "np.ascontiguousarray(a) (a copy) or use lf.tensor(a), which copies")
        if not obj.flags.writeable:
            raise DTypeError("from_dlpack: the numpy array is read-only and DLPack cannot mark memory "
                             "read-only; pass a writeable array, or lf.tensor(a) to copy it")
    try:
        return torch.from_dlpack(obj)
    except (BufferError, RuntimeError, TypeError) as e:
        raise DTypeError(f"from_dlpack could not import {type(obj).__name__}: {e}; lf.tensor(data) copies "
                         "instead") from e


def _target_device(src: torch.Tensor, device):
    if device is None:
        return get_device(str(src.device))
    dev = get_device(device)
    if dev.torch_device != src.device:
        raise DeviceError(f"from_dlpack(device={device!r}): the memory is on {src.device}, and from_dlpack never "
                          f"copies; omit device=, or use lf.tensor(data, device={device!r}) to copy")
    return dev


def _span(src: torch.Tensor) -> int:
    """Elements from ``src``'s first to its last (inclusive), strides being non-negative."""
    return 1 + sum((n - 1) * s for n, s in zip(src.shape, src.stride())) if src.numel() else 0


def _shared_view(src: torch.Tensor, dev, dtype) -> Tensor | None:
    """A view of a live storage that already covers ``src``'s memory (with the same dtype), if any."""
    if not src.numel():
        return None
    size = dtype.itemsize
    start = src.data_ptr()   # torch strides are never negative: the span starts here
    end = start + size * _span(src)
    for storage in list(_shared):
        buf = storage.buffer
        if storage.engine is not dev.engine or buf is None or storage.dtype is not dtype:
            continue
        base = buf.ptr
        if base <= start and end <= base + storage.numel * size and (start - base) % size == 0:
            view = View(tuple(src.shape), tuple(src.stride()), (start - base) // size)
            return Tensor(storage, view, dev)
    return None

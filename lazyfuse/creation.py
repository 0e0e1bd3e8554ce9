"""Tensor creation. Host data is uploaded at once into a pooled buffer; the factories
(zeros, ones, full, arange, rand, randn) record lazy ops like any other, so an unused factory
result costs nothing."""
from __future__ import annotations

import math
import threading

import numpy as np
import torch

from . import ops
from .errors import DTypeError, ShapeError
from .ir import dtypes as dt
from .ir.node import Node, Op
from .ir.shapes import check_shape, prod
from .ir.view import View
from .runtime.device import device as get_device
from .runtime.engine import Storage
from .runtime.pool import DATA
from .tensor import Tensor, result_tensor


def _shape_args(shape) -> tuple:
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
        shape = tuple(shape[0])
    return check_shape(shape)


def _realized(dev, t: torch.Tensor) -> Tensor:
    dtype = dt.from_torch(t.dtype)
    shape = tuple(t.shape)
    buf = dev.pool.buffer(dtype, prod(shape), DATA, "tensor data uploaded from the host")
    dev.host_write(buf)   # (a freed block a queued launch may still use: runtime/stream.py)
    if t.numel():
        buf.tensor.copy_(t.reshape(-1))
    node = Node(Op.BUFFER, (), dtype, shape, buf)
    st = Storage(dev.engine, node)
    st.buffer = buf
    return Tensor(st, View.contiguous(shape), dev)


def _leaf(t: Tensor, requires_grad: bool) -> Tensor:
    return t.requires_grad_() if requires_grad else t


def tensor(data, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor from lists, scalars, numpy arrays, torch tensors (or a lazyfuse Tensor, copied
    and detached, as torch.tensor does)."""
    dev = get_device(device)
    if isinstance(data, Tensor):
        data = data.detach()
        out = data.to(dt.as_dtype(dtype)) if dtype is not None else data
        return _leaf(out.clone() if out is data else out, requires_grad)
    return _leaf(_realized(dev, ops.as_torch_data(data, dtype)), requires_grad)


def from_numpy(array: np.ndarray, device=None) -> Tensor:
    """A tensor holding a copy of ``array`` (``lf.from_dlpack`` shares its memory instead)."""
    if not isinstance(array, np.ndarray):
        raise DTypeError(f"from_numpy needs a numpy array, got {type(array).__name__}")
    return tensor(array, device=device)


def from_torch(t: torch.Tensor, device=None) -> Tensor:
    """A tensor holding a copy of ``t`` (``lf.from_dlpack`` shares its memory instead)."""
    if not isinstance(t, torch.Tensor):
        raise DTypeError(f"from_torch needs a torch tensor, got {type(t).__name__}")
    return tensor(t, device=device)


def full(shape, fill_value, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value`` (lazy: recorded, computed only if used)."""
    shape = check_shape(shape)
    if not ops.is_scalar(fill_value):
        raise DTypeError(f"fill_value={fill_value!r} must be a Python number")
    dtype = dt.as_dtype(dtype) if dtype is not None else dt.scalar_dtype(fill_value)
    dev = get_device(device)
    value = ops.expand_node(ops.scalar_node(fill_value, dtype), shape)
    return _leaf(result_tensor(dev, Node(Op.CAST, (value,), dtype, shape)), requires_grad)


def zeros(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A float32 (or ``dtype``) tensor of zeros (lazy)."""
    return full(_shape_args(shape), 0, dtype=dtype or dt.float32, device=device, requires_grad=requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A float32 (or ``dtype``) tensor of ones (lazy)."""
    return full(_shape_args(shape), 1, dtype=dtype or dt.float32, device=device, requires_grad=requires_grad)


def zeros_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None, layout=None) -> Tensor:
    """Zeros with ``t``'s shape, dtype and device (unless given)."""
    return zeros(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def ones_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None, layout=None) -> Tensor:
    """Ones with ``t``'s shape, dtype and device (unless given)."""
    return ones(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def full_like(t: Tensor, fill_value, dtype=None, *, device=None, requires_grad=False, memory_format=None,
              layout=None) -> Tensor:
    """``fill_value`` with ``t``'s shape, dtype and device (unless given)."""
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def empty_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None,
               layout=None) -> Tensor:
    """Uninitialised memory with ``t``'s shape, dtype and device (unless given)."""
    return empty(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def rand_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None, layout=None) -> Tensor:
    """Uniform [0, 1) values with ``t``'s shape, dtype and device (unless given), from lazyfuse's generator."""
    return rand(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def randn_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None, layout=None) -> Tensor:
    """Standard normal values with ``t``'s shape, dtype and device (unless given), from lazyfuse's generator."""
    return randn(t.shape, dtype=dtype or t.dtype, device=device or t.device, requires_grad=requires_grad)


def empty(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uninitialised memory from the pool (no kernel runs)."""
    shape = _shape_args(shape)
    dtype = dt.as_dtype(dtype) if dtype is not None else dt.float32
    dev = get_device(device)
    buf = dev.pool.buffer(dtype, prod(shape), DATA, "lf.empty")
    st = Storage(dev.engine, Node(Op.BUFFER, (), dtype, shape, buf))
    st.buffer = buf
    return _leaf(Tensor(st, View.contiguous(shape), dev), requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, *, out=None) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``: int64 for integer arguments, else
    float32 (``out=``: its dtype and device, and it takes the result)."""
    if out is not None:
        from .extern import write_out
        return write_out("arange", arange(start, end, step, dtype or getattr(out, "dtype", None),
                                          device or getattr(out, "device", None)), out)
    if end is None:
        start, end = 0, start
    start, end, step = (int(v) if isinstance(v, bool) else v for v in (start, end, step))   # (torch: 0 and 1)
    for name, v in (("start", start), ("end", end), ("step", step)):
        if not ops.is_scalar(v):
            raise DTypeError(f"arange: {name}={v!r} must be a number")
        if not math.isfinite(v):
            raise ShapeError(f"arange: {name}={v!r} must be finite (an unsupported range, as in torch)")
    if dtype is None:
        dtype = dt.int64 if all(isinstance(v, (int, np.integer)) for v in (start, end, step)) else dt.float32
    dtype = dt.as_dtype(dtype)
    if dtype is dt.int64:
        # torch truncates the bounds and the step to integers first and takes the length from those
        start, end, step = int(start), int(end), int(step)
    if step == 0 or (not dtype.is_float and int(step) == 0):
        raise ShapeError("arange: step must be nonzero (an integer dtype truncates the step first)")
    if (end - start) * step < 0:
        raise ShapeError(f"arange: the bounds {start} and {end} are inconsistent with the sign of step={step} (as in torch)")
    n = math.ceil((end - start) / step)
    if not dtype.is_float:
        # other integer dtypes, as torch: the length from the float bounds, values from the
        # truncated start and step
        start, step = int(start), int(step)
    dev = get_device(device)
    compute = dt.float64 if dtype.is_float else dt.int64
    srcs = (ops.scalar_node(start, compute), ops.scalar_node(step, compute))
    node = Node(Op.ARANGE, srcs, compute, (n,))
    if compute is not dtype:
        dev.engine.count_extra_ops(1)
        node = Node(Op.CAST, (node,), dtype, (n,))
    return result_tensor(dev, node)


class _Generator:
    """Counter-based RNG state: a seed and an offset that advances by each draw's size."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seed = 0x5EED
        self.offset = 0

    def take(self, n: int) -> tuple:
        with self.lock:
            off = self.offset
            self.offset += n
            return self.seed, off


generator = _Generator()


def manual_seed(seed: int) -> None:
    """Reseed the generator of ``lf.rand``/``lf.randn`` (and restart its stream)."""
    with generator.lock:
        generator.seed = int(seed) & ((1 << 63) - 1)
        generator.offset = 0


def _random(op, shape, dtype, device, requires_grad=False) -> Tensor:
    shape = _shape_args(shape)
    dtype = dt.as_dtype(dtype) if dtype is not None else dt.float32
    if not dtype.is_float:
        raise DTypeError(f"{op.label} needs a floating dtype, got {dtype.name}")
    dev = get_device(device)
    seed, offset = generator.take(prod(shape))
    srcs = (ops.scalar_node(seed, dt.int64), ops.scalar_node(offset, dt.int64))
    return _leaf(result_tensor(dev, Node(op, srcs, dtype, shape)), requires_grad)


def rand(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uniform [0, 1) from a counter-based generator seeded by ``lf.manual_seed``."""
    return _random(Op.RAND, shape, dtype, device, requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Standard normal samples from the generator seeded by ``lf.manual_seed``."""
    return _random(Op.RANDN, shape, dtype, device, requires_grad)

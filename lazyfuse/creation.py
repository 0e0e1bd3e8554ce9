"""Tensor creation. Host data is uploaded at once into a pooled buffer; the factories
(zeros, ones, full, arange, rand, randn) record lazy ops like any other, so an unused factory
result costs nothing."""
from __future__ import annotations

import math
import os
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
    if dtype.is_int:
        dt.check_fits(fill_value, fill_value, dtype, f"full: fill_value={fill_value!r}")
    dev = get_device(device)
    value = ops.expand_node(ops.scalar_node(fill_value, dtype), shape)
    return _leaf(result_tensor(dev, Node(Op.CAST, (value,), dtype, shape)), requires_grad)


def zeros(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A float32 (or ``dtype``) tensor of zeros (lazy)."""
    return full(_shape_args(shape), 0, dtype=dtype or dt.float32, device=device, requires_grad=requires_grad)


def ones(*shape, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A float32 (or ``dtype``) tensor of ones (lazy)."""
    return full(_shape_args(shape), 1, dtype=dtype or dt.float32, device=device, requires_grad=requires_grad)


def _like(t: Tensor, memory_format, requires_grad: bool, make) -> Tensor:
    """``make(shape)`` (a new tensor) shaped like ``t`` and laid out as torch's ``*_like`` lay it
    out (``ops.copy_layout``: made in that memory order, viewed back). The layout is visible in
    ``stride()``, and in which element a random fill draws first."""
    v = t._view
    layout = ops.copy_layout(v, memory_format)
    if layout is None:
        return _leaf(make(v.shape), requires_grad)
    out = make(layout.stored_shape)
    return _leaf(Tensor(out._storage, layout.view, out.device), requires_grad)


def zeros_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None, layout=None) -> Tensor:
    """Zeros with ``t``'s shape, dtype, device (unless given) and layout (``_like``)."""
    return _like(t, memory_format, requires_grad,
                 lambda shape: zeros(shape, dtype=dtype or t.dtype, device=device or t.device))


def ones_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None, layout=None) -> Tensor:
    """Ones with ``t``'s shape, dtype, device (unless given) and layout (``_like``)."""
    return _like(t, memory_format, requires_grad,
                 lambda shape: ones(shape, dtype=dtype or t.dtype, device=device or t.device))


def full_like(t: Tensor, fill_value, dtype=None, *, device=None, requires_grad=False, memory_format=None,
              layout=None) -> Tensor:
    """``fill_value`` with ``t``'s shape, dtype, device (unless given) and layout (``_like``)."""
    return _like(t, memory_format, requires_grad,
                 lambda shape: full(shape, fill_value, dtype=dtype or t.dtype, device=device or t.device))


def empty_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None,
               layout=None) -> Tensor:
    """Uninitialised memory with ``t``'s shape, dtype, device (unless given) and layout (``_like``)."""
    return _like(t, memory_format, requires_grad,
                 lambda shape: empty(shape, dtype=dtype or t.dtype, device=device or t.device))


def rand_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None, layout=None,
              generator=None) -> Tensor:
    """Uniform [0, 1) values with ``t``'s shape, dtype, device (unless given) and layout (``_like``),
    from lazyfuse's generator."""
    return _like(t, memory_format, requires_grad,
                 lambda shape: rand(shape, generator=generator, dtype=dtype or t.dtype, device=device or t.device))


def randn_like(t: Tensor, dtype=None, *, device=None, requires_grad=False, memory_format=None, layout=None,
               generator=None) -> Tensor:
    """Standard normal values with ``t``'s shape, dtype, device (unless given) and layout (``_like``),
    from lazyfuse's generator."""
    return _like(t, memory_format, requires_grad,
                 lambda shape: randn(shape, generator=generator, dtype=dtype or t.dtype, device=device or t.device))


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


class Generator:
    """torch.Generator's part for lazyfuse's counter-based random streams: a seed and an offset
    that advances by each draw's size, so a draw never repeats an earlier one's numbers.

    ``lf.manual_seed`` reseeds the default one (``lf.default_generator``), which every random op
    draws from unless given ``generator=`` (``lf.rand``, ``lf.randn``, ``*_like``, ``multinomial``,
    ``normal_``, ``bernoulli``...). Only the default one advances per replay of a captured graph,
    so a capture refuses another (``CaptureError``)."""

    def __init__(self, device=None):
        self._device = device   # resolved when asked: the default generator exists before any device
        self.lock = threading.Lock()
        self._initial = self.seed_value = 0x5EED
        self.offset = 0

    @property
    def device(self):
        """The device this generator was made for (torch's ``Generator.device``)."""
        return get_device(self._device)

    def take(self, n: int) -> tuple:
        """(seed, offset) of a draw of ``n`` numbers; the stream moves past them."""
        with self.lock:
            off = self.offset
            self.offset += n
            return self.seed_value, off

    def manual_seed(self, seed) -> "Generator":
        """Reseed (any int, as torch's) and restart the stream; returns this generator."""
        seed = int(seed)
        with self.lock:
            self._initial = seed
            self.seed_value = seed & ((1 << 63) - 1)
            self.offset = 0
        return self

    def seed(self) -> int:
        """Reseed from the operating system's entropy; returns the new seed (as torch's)."""
        seed = int.from_bytes(os.urandom(8), "little") & ((1 << 63) - 1)
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        """The seed last given to ``manual_seed`` (or drawn by ``seed()``)."""
        return self._initial

    def get_state(self) -> torch.Tensor:
        """The stream's position as torch's ``ByteTensor`` state: ``set_state`` restores it, so the
        draws after it repeat."""
        with self.lock:
            words = np.array([self.seed_value, self.offset, self._initial], dtype=np.int64)
        return torch.from_numpy(words.view(np.uint8).copy())

    def set_state(self, state) -> "Generator":
        """Restore a state from ``get_state``; returns this generator."""
        if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8 or state.numel() != 24:
            raise DTypeError("set_state: state must be the uint8 tensor of 24 bytes that get_state() returned "
                             f"(got {type(state).__name__}{'' if not isinstance(state, torch.Tensor) else ' ' + str(state.dtype) + ' of ' + str(state.numel()) + ' bytes'})")
        seed, offset, initial = (int(w) for w in state.numpy().copy().view(np.int64))
        with self.lock:
            self.seed_value, self.offset, self._initial = seed, offset, initial
        return self

    def __repr__(self):
        return f"lf.Generator(device='{self.device}', seed={self._initial}, offset={self.offset})"


default_generator = generator = Generator()


def manual_seed(seed) -> Generator:
    """Reseed the default generator (``lf.rand``, ``lf.randn`` and every random op) and restart its
    stream; returns it, as torch's."""
    return generator.manual_seed(seed)


def seed() -> int:
    """Reseed the default generator from the operating system's entropy; returns the seed."""
    return generator.seed()


def initial_seed() -> int:
    """The default generator's seed."""
    return generator.initial_seed()


def get_rng_state() -> torch.Tensor:
    """The default generator's state (``set_rng_state`` restores it)."""
    return generator.get_state()


def set_rng_state(state) -> None:
    """Restore the default generator's state from ``get_rng_state``."""
    generator.set_state(state)


def generator_for(dev, chosen, op_name: str) -> Generator:
    """The generator a draw on ``dev`` takes from: ``chosen`` (a ``generator=`` argument) or the
    default. A captured graph advances only the default one per replay (its seed and offset go in
    the launch metadata), so another inside a capture would replay the same numbers: refused."""
    if chosen is None or chosen is generator:
        return generator
    if not isinstance(chosen, (Generator, torch.Generator)):
        raise DTypeError(f"{op_name}: generator= must be an lf.Generator or a torch.Generator, got "
                         f"{type(chosen).__name__}")
    if dev.capturing:
        from .errors import CaptureError
        raise CaptureError(f"{op_name}: generator= inside a capture: a replay advances only lazyfuse's default "
                           "generator, so this one's numbers would repeat on every replay; draw from the default "
                           "one (omit generator=, seed it with lf.manual_seed)")
    if isinstance(chosen, torch.Generator):
        # a torch generator (code written for torch) seeds a fresh lazyfuse stream per draw: the
        # numbers are lazyfuse's, not torch's, but repeat exactly when the torch generator does
        seed_value = int(torch.randint(0, 1 << 62, (), generator=chosen, device=chosen.device))
        return Generator(dev).manual_seed(seed_value)
    return chosen


def _random(op, shape, dtype, device, requires_grad=False, chosen=None) -> Tensor:
    shape = _shape_args(shape)
    dtype = dt.as_dtype(dtype) if dtype is not None else dt.float32
    if not dtype.is_float:
        raise DTypeError(f"{op.label} needs a floating dtype, got {dtype.name}")
    dev = get_device(device)
    seed, offset = generator_for(dev, chosen, op.label).take(prod(shape))
    srcs = (ops.scalar_node(seed, dt.int64), ops.scalar_node(offset, dt.int64))
    return _leaf(result_tensor(dev, Node(op, srcs, dtype, shape)), requires_grad)


def rand(*shape, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Uniform [0, 1) from a counter-based generator (``generator=``, else the default one, seeded
    by ``lf.manual_seed``)."""
    return _random(Op.RAND, shape, dtype, device, requires_grad, generator)


def randn(*shape, generator=None, dtype=None, device=None, requires_grad=False) -> Tensor:
    """Standard normal samples from ``generator=`` (else the default generator)."""
    return _random(Op.RANDN, shape, dtype, device, requires_grad, generator)

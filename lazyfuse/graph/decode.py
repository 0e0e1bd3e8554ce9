"""A structured, safe API for the workload capture exists for: one decode step with a pinned
KV cache and token buffer, captured once and replayed per token.

Everything a step reads changes *in place* between replays: the token id, the position (as a
one-hot row selector and an additive causal mask, so the step's structure never depends on
the position) and the caches. ``DecodeState.write`` updates a cache row through the one-hot
selector — writing the same row twice with the same value changes nothing, so the capture's
warmup runs of the step leave the caches exactly as one run would.

The growing form (``decode_step(step, max_len=None, caches=...)``) runs the same step function
without a capture over caches that are the first ``position + 1`` rows of buffers whose capacity
doubles: the cache length is a size of the step's kernels, and shape-generic kernels make a
new length a re-plan, never a recompile.
"""
from __future__ import annotations

import numpy as np

from ..creation import from_numpy, zeros
from ..errors import CaptureError, ShapeError
from ..ir import dtypes as dt
from ..runtime.device import device as get_device
from .capture import capture


class DecodeState:
    """Pinned decode inputs: ``token`` (int64, shape (1,)), ``onehot`` and ``mask`` (shape
    (max_len,)), and named caches whose second-to-last dim is the position."""

    def __init__(self, max_len: int, caches: dict, device=None, dtype=dt.float32):
        self.device = get_device(device)
        self.max_len = int(max_len)
        self.token = zeros(1, dtype=dt.int64, device=self.device)
        self.onehot = zeros(self.max_len, dtype=dtype, device=self.device)
        self.mask = zeros(self.max_len, dtype=dtype, device=self.device)
        self.caches = {}
        for name, shape in caches.items():
            shape = tuple(shape)
            if len(shape) < 2 or shape[-2] != self.max_len:
                raise ShapeError(f"cache {name!r} of shape {shape}: its second-to-last dim must be max_len="
                                 f"{self.max_len} (the position)")
            self.caches[name] = zeros(shape, dtype=dtype, device=self.device)
        self.device.drain("DecodeState: materialize pinned buffers")
        self.position = None

    def set(self, token: int, position: int) -> None:
        """Refresh the pinned inputs in place for the next step."""
        if not 0 <= position < self.max_len:
            raise ShapeError(f"position {position} is outside the cache (max_len={self.max_len})")
        self.token.copy_(np.array([int(token)], dtype=np.int64))
        onehot = np.zeros(self.max_len, np.float32)
        onehot[position] = 1.0
        self.onehot.copy_(onehot)
        self.mask.copy_(np.where(np.arange(self.max_len) <= position, 0.0, -np.inf).astype(np.float32))
        self.position = position

    def write(self, name: str, value) -> None:
        """Write ``value`` (the cache's shape without the position dim, or with it of size 1)
        into row ``position`` of cache ``name``, in place."""
        cache = self.caches[name]
        shape = cache.shape[:-2] + (1, cache.shape[-1])
        if value.shape != shape:
            value = value.reshape(shape)
        sel = self.onehot.reshape(self.max_len, 1)
        cache.copy_(cache + sel * (value - cache))

    def reset(self) -> None:
        for c in self.caches.values():
            c.zero_()


class DecodeGraph:
    """``step(state) -> logits`` captured on the first call, replayed on every later one.

    Calling it with ``(token, position)`` refreshes the pinned inputs and returns the step's
    output tensor — the same tensor each time (its buffer overwritten by the next call)."""

    def __init__(self, step, state: DecodeState, warmup_iters: int = 3):
        if not callable(step):
            raise CaptureError("decode step must be callable: step(state) -> logits")
        self.step = step
        self.state = state
        self.warmup_iters = warmup_iters
        self.graph = None

    def __call__(self, token: int, position: int):
        self.state.set(token, position)
        if self.graph is None:
            self.graph = capture(self.state.device, lambda: self.step(self.state), warmup_iters=self.warmup_iters)
            return self.graph.output
        return self.graph.replay()


class GrowingDecodeState:
    """The growing form's inputs, read by the same step function as ``DecodeState``'s: ``token``;
    ``caches``, each the first ``position + 1`` rows of a buffer whose capacity doubles when
    full (the position is the second-to-last dim); ``mask`` (zeros: every row is real) and
    ``onehot`` (the current row), both of length ``position + 1``."""

    def __init__(self, caches: dict, device=None, dtype=dt.float32, capacity: int = 16):
        self.device = get_device(device)
        self.dtype = dtype
        self.token = zeros(1, dtype=dt.int64, device=self.device)
        self.capacity = max(int(capacity), 1)
        self.buffers = {}
        for name, shape in caches.items():
            shape = tuple(shape)
            if len(shape) < 2:
                raise ShapeError(f"cache {name!r} of shape {shape}: give (..., length, features); the length "
                                 "(second-to-last, the position) grows")
            self.buffers[name] = zeros(shape[:-2] + (self.capacity, shape[-1]), dtype=dtype, device=self.device)
        self.length = 0   # rows written so far
        self.position = None
        self.caches = {}
        self.mask = self.onehot = None
        self.device.drain("GrowingDecodeState: materialize buffers")

    def set(self, token: int, position: int) -> None:
        """The inputs of the step at ``position`` (at most one past the rows written so far:
        an earlier position overwrites its row and forgets the rows after it)."""
        if not 0 <= position <= self.length:
            raise ShapeError(f"position {position} would leave a gap: the cache holds {self.length} rows "
                             f"(positions 0..{self.length})")
        while position >= self.capacity:
            self._grow()
        self.token.copy_(np.array([int(token)], dtype=np.int64))
        n = position + 1
        self.caches = {name: buf[..., :n, :] for name, buf in self.buffers.items()}
        self.mask = zeros(n, dtype=self.dtype, device=self.device)
        onehot = np.zeros(n, np.float32)
        onehot[position] = 1.0
        self.onehot = from_numpy(onehot, device=self.device).to(self.dtype)
        self.position = position
        self.length = n

    def _grow(self) -> None:
        """Double every buffer's capacity, keeping the rows written (strides along a row stay, so
        the kernels reading a cache do not change)."""
        self.capacity *= 2
        for name, buf in self.buffers.items():
            bigger = zeros(buf.shape[:-2] + (self.capacity, buf.shape[-1]), dtype=self.dtype, device=self.device)
            bigger[..., :self.length, :].copy_(buf[..., :self.length, :])
            self.buffers[name] = bigger

    def write(self, name: str, value) -> None:
        """Write ``value`` (the cache's shape without the position dim, or with it of size 1) into
        row ``position`` of cache ``name``, in place (``caches[name]`` sees it). Through the
        one-hot selector, as ``DecodeState.write``: a slice at the position would put the
        position into the kernel as an offset, a new kernel per position."""
        cache = self.caches[name]
        shape = cache.shape[:-2] + (1, cache.shape[-1])
        if value.shape != shape:
            value = value.reshape(shape)
        sel = self.onehot.reshape(self.length, 1)
        cache.copy_(cache + sel * (value - cache))

    def reset(self) -> None:
        self.length = 0


class GrowingDecode:
    """``step(state) -> logits`` at a growing cache length, not captured: each call records and
    drains the step lazily. Its kernels are shape-generic (the length is a runtime value), so a
    longer cache plans anew but compiles nothing; the steps of one length share one plan."""

    def __init__(self, step, state: GrowingDecodeState):
        if not callable(step):
            raise CaptureError("decode step must be callable: step(state) -> logits")
        self.step = step
        self.state = state

    def __call__(self, token: int, position: int):
        self.state.set(token, position)
        out = self.step(self.state)
        self.state.device.drain("growing decode step")
        return out


def decode_step(step, *, max_len: int | None = None, caches: dict, device=None, dtype=dt.float32,
                warmup_iters: int = 3):
    """A ``DecodeGraph`` over a fresh ``DecodeState`` (``.state`` holds the pinned buffers); with
    ``max_len=None``, the growing form: a ``GrowingDecode`` whose caches (``caches`` give their
    shapes, the length dim's size ignored) grow with the position, with no recompilation."""
    if max_len is None:
        return GrowingDecode(step, GrowingDecodeState(caches, device, dtype))
    return DecodeGraph(step, DecodeState(max_len, caches, device, dtype), warmup_iters)

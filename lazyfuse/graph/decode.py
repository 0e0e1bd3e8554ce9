"""A structured, safe API for the workload capture exists for: one decode step with a pinned
KV cache and token buffer, captured once and replayed per token.

Everything a step reads changes *in place* between replays: the token id, the position (as a
one-hot row selector and an additive causal mask, so the step's structure never depends on
the position) and the caches. ``DecodeState.write`` updates a cache row through the one-hot
selector — writing the same row twice with the same value changes nothing, so the capture's
warmup runs of the step leave the caches exactly as one run would.
"""
from __future__ import annotations

import numpy as np

from ..creation import zeros
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


def decode_step(step, *, max_len: int, caches: dict, device=None, dtype=dt.float32, warmup_iters: int = 3):
    """A ``DecodeGraph`` over a fresh ``DecodeState`` (``.state`` holds the pinned buffers)."""
    return DecodeGraph(step, DecodeState(max_len, caches, device, dtype), warmup_iters)

"""The ``cpu`` backend: C/OpenMP kernels through ctypes, matmul through torch, host graphs."""
from __future__ import annotations

import ctypes
import functools
import numpy as np
import torch

from ..codegen import c_compile
from ..codegen.c_printer import PRELUDE, CConfig, print_c
from ..errors import ShapeError
from ..ir.shapes import prod
from ..ir.dtypes import int64


class HostMeta:
    """Launch metadata in host memory: loop extents, then runtime scalars as 64-bit words."""

    __slots__ = ("buffer", "words", "f64", "ptr", "ready")

    def __init__(self, buffer):
        self.buffer = buffer
        self.words = buffer.tensor.numpy()
        self.f64 = self.words.view(np.float64)
        self.ptr = buffer.ptr
        self.ready = False

    def push(self) -> None:
        """Host memory: the kernels read the words directly."""

    def write(self, header, scalars):
        if not self.ready:
            self.words[: len(header)] = header
            self.ready = True
        base = len(header)
        for k, v in enumerate(scalars):
            if isinstance(v, float):
                self.f64[base + k] = v
            else:
                self.words[base + k] = int(v)


def library_thunk(step, bufs):
    """A library call (matmul, gather) on torch views of the bound buffers: no copies."""
    views, out_shape, base_shapes, arg = step.kernel
    args = []
    for buf, view, shape in zip(bufs, views, base_shapes):
        t = buf.tensor
        args.append(t.as_strided(view.shape, view.strides, view.offset) if view is not None else t[:prod(shape)].view(shape))
    out = bufs[-1].tensor[:prod(out_shape)].view(out_shape)
    if step.kind == "matmul":
        return functools.partial(torch.matmul, *args, out=out)
    return functools.partial(_gather, *args, out, *arg)


def _gather(x, index, out, dim, size):
    if index.numel() and (int(index.min()) < -size or int(index.max()) >= size):
        bad = index[(index < -size) | (index >= size)][0].item()
        raise ShapeError(f"index {bad} is out of range for dim {dim} of size {size}")
    torch.index_select(x, dim, torch.where(index < 0, index + size, index), out=out)


class CpuBackend:
    name = "c"

    def __init__(self):
        self.fallback_warned = False
        self.config = CConfig()

    def new_meta(self, pool, words, usage, requester, cause):
        return HostMeta(pool.buffer(int64, max(words, 1), usage, requester, cause))

    def compile_plan(self, plan, stats, leaves, root_bufs, temps, scalars) -> None:
        kernels = [st for st in plan.steps if st.kind == "kernel"]
        if not kernels:
            return
        sources = [print_c(st.kernel, self.config) for st in kernels]
        source = PRELUDE + "\n\n".join(sources) + "\n"
        lib = c_compile.build(source, what=f"plan {plan.label}")
        for st, src in zip(kernels, sources):
            st.compiled = c_compile.function(lib, st.name)
            st.source = src
            st.config = self.config

    def thunk(self, step, bufs, meta):
        if step.kind != "kernel":
            return library_thunk(step, bufs)
        argv = (ctypes.c_void_p * len(bufs))(*[b.ptr for b in bufs])
        return functools.partial(step.compiled, argv, meta.ptr)

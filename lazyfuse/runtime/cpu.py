"""The ``cpu`` backend: C/OpenMP kernels through ctypes, matmul through torch, host graphs."""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import warnings

import numpy as np
import torch

from ..codegen import autotune, c_compile, c_parallel
from ..codegen.c_printer import PRELUDE, REDUCTION_VARIANTS, SERIAL, CConfig, print_c
from ..errors import CompileError, LazyfuseError, ShapeError
from ..ir.shapes import prod
from ..ir.dtypes import int64
from ..ir.view import View
from .backend import Backend, StepKind, bound_buffers
from .pool import SCRATCH


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


def library_thunk(step, bufs, gather=None, meta=None):
    """A library call (matmul, gather, collective, extern) on torch views of the bound buffers: no copies.
    ``gather`` replaces the host-checked gather (a GPU checks its indices on the device)."""
    if step.kind is StepKind.MATMUL:
        return matmul_call(step, step.config, bufs)
    args = [typed_view(b, v) for b, v in zip(bufs, _library_views(step.kernel, None))]
    if step.kind is StepKind.COLLECTIVE:
        from .collectives import collective_thunk
        return collective_thunk(step, args)
    if step.kind is StepKind.EXTERN:
        call = step.kernel.arg
        # a random call reads its seed and stream offset from the metadata words at each run
        # (a graph replay advances the offset there)
        return functools.partial(_run_extern, call, tuple(args[:-1]), args[-1], meta if call.random else None)
    return functools.partial(gather or _gather, *args, *step.kernel.arg)


def _run_extern(call, inputs, out, meta):
    call.run(inputs, out, None if meta is None else meta.words)


def typed_view(buf, view: View):
    """The torch tensor ``view`` reads of ``buf``, kept on its pool block for the next drain that
    binds the block: making the views of a library call costs ~40 us, as much as a small matmul."""
    block = getattr(buf, "block", None)
    if block is None:   # memory lazyfuse did not allocate
        return buf.tensor.as_strided(view.shape, view.strides, view.offset)
    key = (buf.dtype, view)
    t = block.views.get(key)
    if t is None:
        if len(block.views) >= 16:   # a block reused by many plans: keep the memo small
            block.views.clear()
        t = block.views[key] = buf.tensor.as_strided(view.shape, view.strides, view.offset)
    return t


@functools.lru_cache(maxsize=1024)
def _library_views(call, library) -> tuple:
    """The View of each bound buffer (operands, then the output) of the library call described by
    ``call`` (a step's ``LibraryCall``) as ``library`` reads them."""
    views, out_shape, base_shapes, _ = call
    out = tuple(v if v is not None else View.contiguous(s) for v, s in zip(views, base_shapes))
    if library != "onednn":
        return out + (View.contiguous(out_shape),)
    a, b = out
    n, k = b.shape[-1], b.shape[-2]
    w = View((n, k), (b.strides[-1], b.strides[-2]), b.offset)   # the one matrix, as linear's (n, k) weight
    return a, w, View.contiguous(a.shape[:-1] + (n,))


# -- matmul libraries --------------------------------------------------------------------------
# A float32 matmul whose right operand is one matrix (a linear layer's weight, batch dims
# broadcast) can run through either of torch's two CPU GEMM libraries: ``torch.matmul`` (MKL
# in torch's x86 builds, writing straight into the pooled output) or oneDNN's linear (a fresh
# result copied into it). Neither wins everywhere: which is faster depends on the shape and
# the CPU (MKL is known to take slower code paths on CPUs that are not Intel's; the figures
# are in bench/results/cost-model-2026-11-30.md). So the library is an autotuned choice per
# shape, like a kernel's config; ``torch`` is the default.
MATMUL_LIBRARIES = ("torch", "onednn")


@functools.lru_cache(maxsize=None)
def _onednn_linear():
    """torch's oneDNN linear op, or None in a build without it (it is a private op)."""
    try:
        if torch.backends.mkldnn.is_available():
            return torch.ops.mkldnn._linear_pointwise.default
    except (AttributeError, RuntimeError):
        pass
    return None


def matmul_call(step, library, bufs):
    """The call computing matmul ``step`` on ``bufs`` through ``library`` (None: ``torch``)."""
    a, b, out = [typed_view(buf, v) for buf, v in zip(bufs, _library_views(step.kernel, library))]
    if library == "onednn":
        return functools.partial(_onednn_matmul, _onednn_linear(), a, b, out)
    return functools.partial(torch.matmul, a, b, out=out)


def _onednn_matmul(linear, a, w, out):
    out.copy_(linear(a, w, None, "none", [], ""))


def matmul_libraries(step, dtypes) -> tuple:
    """The libraries that can compute matmul ``step`` (its operand and output dtypes)."""
    a, b, out = _library_views(step.kernel, None)
    one_matrix = len(b.shape) >= 2 and all(size == 1 or stride == 0
                                           for size, stride in zip(b.shape[:-2], b.strides[:-2]))
    if (_onednn_linear() is None or any(dt.name != "float32" for dt in dtypes) or len(a.shape) < 2
            or not one_matrix or 0 in a.shape or 0 in b.shape or out.numel != prod(a.shape[:-1]) * b.shape[-1]):
        return MATMUL_LIBRARIES[:1]
    return MATMUL_LIBRARIES


def matmul_signature(step, dtypes) -> str:
    """The autotuning key of a matmul: its operand layouts and its extents rounded to powers of two."""
    parts = ["matmul", ",".join(dt.name for dt in dtypes)]
    for v in _library_views(step.kernel, None)[:-1]:
        parts.append(",".join(str(autotune.size_class(e)) for e in v.shape) + ":" +
                     ",".join(str(min(abs(st), 2)) for st in v.strides))
    return "|".join(parts)


def _gather(x, index, out, dim, size):
    if index.numel() and (int(index.min()) < -size or int(index.max()) >= size):
        bad = index[(index < -size) | (index >= size)][0].item()
        raise ShapeError(f"index {bad} is out of range for dim {dim} of size {size}")
    torch.index_select(x, dim, torch.where(index < 0, index + size, index), out=out)


MAX_CANDIDATES = 2 + len(REDUCTION_VARIANTS)   # the default, SERIAL, and every reduction variant


class CpuBackend(Backend):
    """C kernels: every candidate config of every kernel of a plan is compiled in one library,
    tuned on scratch copies of the bound buffers, and the winner bound to the plan's step."""

    name = "c"

    def __init__(self, pool):
        self.pool = pool
        self.tuner = None

    def new_meta(self, pool, words, usage, requester, cause):
        return HostMeta(pool.buffer(int64, max(words, 1), usage, requester, cause))

    def preview(self, kernel) -> str:
        """The C source of ``kernel`` with the heuristic config (for ``lf.explain``)."""
        return print_c(kernel, CConfig())

    def configs(self, kernel) -> list:
        """The heuristic default first, then what autotuning may try instead (a few may print the
        same source)."""
        configs = [CConfig()]
        if autotune.explores():
            if c_parallel.parallel(kernel):
                configs.append(CConfig(**SERIAL))
            if kernel.stages:
                configs += [CConfig(**variant) for variant in REDUCTION_VARIANTS]
        return configs

    def candidates(self, kernel) -> list:
        """``configs`` deduplicated by source: what tuning benchmarks."""
        out, seen = [], set()
        for cfg in self.configs(kernel):
            src = print_c(kernel, cfg)
            if src not in seen:
                seen.add(src)
                out.append(cfg)
        return out

    def compile_plan(self, plan, stats, leaves, root_bufs, temps, scalars) -> None:
        """Each kernel of a new plan compiled in one config, without benchmarking: the forced
        candidate, the tuned winner the cache holds, or the heuristic default. The kernels and
        matmuls that have no tuned choice yet are tuned at the plan's ``autotune.after()``-th
        run (``tune_plan``), or now, every candidate compiled in the same go, where that is this
        one (a capture's rebuild of a plan counts the runs before it)."""
        bufs_of = lambda st: bound_buffers(st, leaves, root_bufs, temps)  # noqa: E731
        scalars_of = lambda st: [scalars[i] for i in st.scalars]  # noqa: E731
        runs = plan.untuned.runs + 1 if plan.untuned else 1
        tune_now = runs >= autotune.after()
        untuned, cands = [], {}
        for st in plan.steps:
            if st.kind is StepKind.MATMUL:
                dtypes = [b.dtype for b in bufs_of(st)]
                libraries = matmul_libraries(st, dtypes)
                pick = autotune.cached_choice(self._tuner(), matmul_signature(st, dtypes), list(libraries))
                st.config = libraries[pick or 0]
                if pick is None and tune_now:
                    self._choose_library(st, bufs_of(st), stats)
            elif st.kind is StepKind.KERNEL:
                # forced: the deduplicated list, as tuning numbers them; else the configs unprinted
                configs = self.candidates(st.kernel) if autotune.forced() is not None else self.configs(st.kernel)
                pick = autotune.cached_choice(self._tuner(), autotune.signature(st.kernel),
                                              [c.label() for c in configs])
                cands[st.name] = self.candidates(st.kernel) if pick is None and tune_now else [configs[pick or 0]]
            else:
                continue
            if pick is None:
                untuned.append(st)
        self._bind_best(plan, [st for st in plan.steps if st.name in cands], cands, stats, bufs_of, scalars_of)
        plan.untuned = autotune.Deferred(untuned, runs) if untuned and not tune_now else None

    def tune_plan(self, plan, stats, bound, tape) -> None:
        """At a steady-state run of ``plan`` (buffers ``bound``, scalars on ``tape``): tune what its
        build left untuned once that run is the ``autotune.after()``-th."""
        if not plan.untuned.due():
            return
        try:
            self._tune(plan, stats, lambda st: st.bind(bound), lambda st: st.bind_scalars(tape))
        except LazyfuseError as e:   # e.g. no memory for the scratch copies: the defaults stay, tuned or not
            plan.untuned = None
            warnings.warn(f"autotuning of plan {plan.label} skipped: {e}", RuntimeWarning, stacklevel=2)

    def _tune(self, plan, stats, bufs_of, scalars_of) -> None:
        steps, plan.untuned = plan.untuned.steps, None
        for st in steps:
            if st.kind is StepKind.MATMUL:
                self._choose_library(st, bufs_of(st), stats)
        kernels = [st for st in steps if st.kind is StepKind.KERNEL]
        self._bind_best(plan, kernels, {st.name: self.candidates(st.kernel) for st in kernels}, stats,
                        bufs_of, scalars_of)

    def _bind_best(self, plan, steps, cands: dict, stats, bufs_of, scalars_of) -> None:
        """Compile every candidate in ``cands`` (step name -> configs) of ``steps`` at once and bind
        each step to its best: the one candidate, or the winner of benchmarking them on scratch
        copies of the step's buffers."""
        if not steps:
            return
        sources, what, symbols = {}, {}, {}
        for st in steps:
            symbols[st.name] = []
            for cfg in cands[st.name]:
                symbol, src = c_compile.named(print_c(rename(st.kernel, c_compile.SYMBOL_SLOT), cfg), PRELUDE)
                sources[symbol] = src
                what[symbol] = f"kernel {st.name} ({cfg.label()}) of plan {plan.label}"
                symbols[st.name].append(symbol)
        fns = c_compile.build_functions(sources, PRELUDE, what, stats)
        for st in steps:
            named = symbols[st.name]
            found = [fns[s] if not isinstance(fns[s], CompileError) else None for s in named]
            if not any(found):
                if st.compiled is not None:
                    continue   # tuning (or a capture's rebuild): the code the step runs stays
                err = fns[named[0]]
                raise CompileError(f"kernel {st.name} of plan {plan.label}: every candidate failed to compile; "
                                   f"the first error:\n{err}") from err
            best = 0
            if len(found) > 1:
                signature, labels = autotune.signature(st.kernel), [c.label() for c in cands[st.name]]
                # a kernel of the same signature tuned since this plan was built (in this plan,
                # or another): its winner, without the scratch copies
                best = autotune.cached_choice(self._tuner(), signature, labels)
                if best is None or found[best] is None:
                    with self._scratch(bufs_of(st), st, scalars_of(st)) as (argv, meta):
                        runners = [functools.partial(fn, argv, meta.ptr) if fn is not None else None for fn in found]
                        best = autotune.choose(self._tuner(), signature, labels, runners, stats)
                if best < 0:
                    if st.compiled is not None:
                        continue
                    raise CompileError(f"kernel {st.name} of plan {plan.label}: every candidate failed to run")
                if found[best] is None:
                    best = next(j for j, f in enumerate(found) if f is not None)
            st.compiled = found[best]
            st.source = sources[named[best]]
            st.config = cands[st.name][best]

    def _tuner(self) -> autotune.Tuner:
        if self.tuner is None:
            self.tuner = autotune.Tuner(f"cpu|{c_compile.compiler()}|{c_compile.identity_hash()}")
        return self.tuner

    def _choose_library(self, step, bufs, stats) -> None:
        """Which library computes matmul ``step``: timed on scratch copies of its buffers."""
        dtypes = [b.dtype for b in bufs]
        libraries = matmul_libraries(step, dtypes)
        if len(libraries) == 1 or not autotune.explores():
            return
        copies = self.pool.scratch_copies(bufs, f"autotune scratch for {step.name}")
        runners = [matmul_call(step, lib, copies) for lib in libraries]
        best = autotune.choose(self._tuner(), matmul_signature(step, dtypes), list(libraries), runners, stats)
        step.config = libraries[max(best, 0)]

    @contextlib.contextmanager
    def _scratch(self, bufs, step, scalar_values):
        """Copies of a kernel's bound buffers and metadata: tuning never touches live data."""
        copies = self.pool.scratch_copies(bufs, f"autotune scratch for {step.name}")
        meta = HostMeta(self.pool.buffer(int64, max(step.meta_words, 1), SCRATCH, f"autotune metadata of {step.name}"))
        meta.write(step.header, scalar_values)
        argv = (ctypes.c_void_p * len(copies))(*[c.ptr for c in copies])
        try:
            yield argv, meta
        finally:
            del copies, meta

    def thunk(self, step, bufs, meta):
        """The launch as a call with two integer arguments: ctypes converts a Python int for a
        ``c_void_p`` several times faster than it converts an array object."""
        if step.kind is not StepKind.KERNEL:
            return library_thunk(step, bufs, meta=meta)
        argv = (ctypes.c_void_p * len(bufs))(*[b.ptr for b in bufs])
        call = functools.partial(step.compiled, ctypes.addressof(argv), meta.ptr)
        call.argv = argv   # the array the address points into
        return call

    def batch(self, thunks) -> list:
        """A recorded launch list made cheaper to replay: each run of consecutive C kernels
        becomes one call into a C loop over (function, arguments, metadata) triples, so a
        replay pays Python's call overhead once per run instead of once per kernel."""
        out, run = [], []
        for t in thunks:
            if isinstance(t, functools.partial) and isinstance(t.func, ctypes._CFuncPtr):
                run.append(t)
                continue
            out += _run_of(run)
            run = []
            out.append(t)
        return out + _run_of(run)


def rename(kernel, name):
    return dataclasses.replace(kernel, name=name)


_THREADS = """
#include <omp.h>
void lf_set_threads(int n) { omp_set_num_threads(n); }
"""


def omp_set_num_threads():
    """``omp_set_num_threads`` of the OpenMP runtime the kernels link (built by the same
    compiler with the same flags, so it is that runtime whichever compiler it is)."""
    fn = c_compile.build(_THREADS, what="thread-count setter").lf_set_threads
    fn.argtypes = [ctypes.c_int]
    fn.restype = None
    return fn


_RUNNER = """
#include <stdint.h>
typedef void (*lf_kernel)(char **, const int64_t *);
/* list: n, then n (function, arguments, metadata) triples */
void lf_run_launches(const int64_t *list) {
    for (int64_t i = 0; i < list[0]; i++) {
        const int64_t *l = list + 1 + 3 * i;
        ((lf_kernel)(intptr_t)l[0])((char **)(intptr_t)l[1], (const int64_t *)(intptr_t)l[2]);
    }
}
"""


def _run_of(thunks) -> list:
    """One call for a run of C launches, its arguments packed in one int64 array: a ctypes call
    with one integer argument costs ~0.5 us, one with four array arguments ~1.7 us."""
    if len(thunks) < 2:
        return list(thunks)
    runner = c_compile.build(_RUNNER, what="launch-list runner").lf_run_launches
    runner.argtypes = [ctypes.c_void_p]
    runner.restype = None
    words = [len(thunks)]
    for t in thunks:
        words += [ctypes.cast(t.func, ctypes.c_void_p).value, t.args[0], t.args[1]]
    packed = (ctypes.c_int64 * len(words))(*words)
    call = functools.partial(runner, ctypes.addressof(packed))
    call.keepalive = (packed, thunks)   # the list and the argument arrays its words point into
    return [call]

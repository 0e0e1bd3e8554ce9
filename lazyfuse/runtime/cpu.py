"""The ``cpu`` backend: C/OpenMP kernels through ctypes, matmul through torch, host graphs."""
from __future__ import annotations

import ctypes
import dataclasses
import functools

import numpy as np
import torch

from ..codegen import autotune, c_compile, c_parallel
from ..codegen.c_printer import (PRELUDE, REDUCTION_VARIANTS, SERIAL, TRANSPOSE_VARIANTS, CConfig, CPrinter, print_c,
                                 transpose_tiles)
from ..codegen.kernel import DIVISION_CODE, INDEX_CODE, INTEGER_DIVISIONS
from ..errors import CompileError, DivisionByZeroError, InvalidIndexError
from ..ir.shapes import prod
from ..ir.dtypes import int64
from ..ir.node import Op
from ..ir.view import View
from .backend import Backend, StepKind
from .pool import strided

# (hot-path aliases: an Enum member read costs ~150 ns on Python 3.11)
KERNEL, MATMUL, EXTERN = StepKind.KERNEL, StepKind.MATMUL, StepKind.EXTERN


class HostMeta:
    """Launch metadata in host memory: loop extents, then runtime scalars as 64-bit words."""

    __slots__ = ("buffer", "words", "f64", "ptr", "ready", "launches")

    def __init__(self, buffer):
        self.buffer = buffer
        self.words = buffer.tensor.numpy()
        self.f64 = self.words.view(np.float64)
        self.ptr = buffer.ptr
        self.ready = False
        # the last kernel launches made with this metadata, by the addresses they bind: a steady
        # state binds the same few buffers drain after drain (two outputs alternate while the
        # caller holds the previous result), so its launch is a lookup (CpuBackend.thunk)
        self.launches = {}

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
    if step.kind is MATMUL:
        return memo_on_blocks(step, step.config, bufs, matmul_call, step, step.config, bufs)
    if step.kind is EXTERN:   # an ExternLaunch: its own views, every output it binds
        return extern_thunk(step.kernel.arg, bufs, meta)
    args = [typed_view(b, v) for b, v in zip(bufs, _library_views(step.kernel, None))]
    if step.kind is StepKind.COLLECTIVE:
        from .collectives import collective_thunk
        return collective_thunk(step, args)
    if step.kind is StepKind.INDEX_ADD:
        return functools.partial(_index_add, *args, *step.kernel.arg)
    return functools.partial(gather or _gather, *args, *step.kernel.arg)


def extern_thunk(launch, bufs, meta):
    """The launch of an extern step on ``bufs``; a random call reads its seed and stream offset
    from the metadata, so it is made anew each drain."""
    if launch.random:
        return _extern_call(launch, bufs, meta)
    return memo_on_blocks(launch, None, bufs, _extern_call, launch, bufs, meta)


def _extern_call(launch, bufs, meta):
    return launch.thunk([typed_view(b, v) for b, v in zip(bufs, launch.views)], meta)


def memo_on_blocks(owner, variant, bufs, make, *args):
    """``make(*args)``, the library call of ``owner`` (a matmul step, an extern launch) in
    ``variant`` (a matmul's library) on ``bufs``, kept on its last buffer's pool block: a steady
    state binds the same blocks drain after drain, and then the call made for them last time
    (torch views, arguments, ``out=``) is the call to make now — building it costs more than the
    launch itself at small sizes. (``make`` and its arguments, not a closure: this runs per
    launch, and a closure made per launch costs as much as the lookup.)"""
    blocks = tuple([getattr(b, "block", None) for b in bufs])
    memo_block = blocks[-1]
    if memo_block is None:
        return make(*args)
    # (an int, never a typed view's (dtype, View) key; the entry holds the owner, so its id is
    # not reused meanwhile)
    key = id(owner)
    memo = memo_block.views.get(key)
    # (blocks compare by identity: a Block defines no equality)
    if memo is not None and memo[0] is owner and memo[1] == variant and memo[2] == blocks:
        return memo[3]
    thunk = make(*args)
    if None not in blocks:   # (imported memory is never memoized: the memo would keep it alive)
        if len(memo_block.views) >= 16:
            memo_block.views.clear()
        memo_block.views[key] = (owner, variant, blocks, thunk)
    return thunk


def typed_view(buf, view: View):
    """The torch tensor ``view`` reads of ``buf``, kept on its pool block for the next drain that
    binds the block: making the views of a library call costs ~40 us, as much as a small matmul."""
    block = getattr(buf, "block", None)
    if block is None:   # memory lazyfuse did not allocate
        return strided(buf.tensor, view)
    key = (buf.dtype, view)
    t = block.views.get(key)
    if t is None:
        if len(block.views) >= 16:   # a block reused by many plans: keep the memo small
            block.views.clear()
        t = block.views[key] = strided(buf.tensor, view)
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
    if a.dim() >= 4 and a.shape[:-2] == b.shape[:-2] == out.shape[:-2]:
        return batched_matmul(a, b, out)
    return functools.partial(torch.matmul, a, b, out=out)


def batched_matmul(a, b, out):
    """The call computing a matmul over batch dims that both operands have (attention's heads) as
    one ``bmm``: each operand a (batch, r, c) view where its batch dims merge, else a copy into
    scratch made once for the call, in the operand's own orientation. ``torch.matmul`` copies a
    column-major matrix (``k.transpose(-2, -1)``, a head of the qkv buffer) into a row-major
    one, 5x a plain copy, and allocates its copies anew per call: the nanoGPT step's q @ k^T took
    156 us at one thread, this 119 us (the scratch is the size of the copies it saves)."""
    (A, copy_a), (B, copy_b) = _as_batch(a), _as_batch(b)
    copies = tuple((dst, src) for dst, src in (copy_a, copy_b) if dst is not None)
    return functools.partial(_bmm, copies, A, B, out.view(-1, *out.shape[-2:]))


class FlaggedLaunch:
    """The launch of a kernel with an error flag (codegen.kernel ``Kernel.error_flag_word``): the
    kernel, then a read of the flag, which raises the error its code names (``flag_error``)
    through the failing-launch path (the values that depend on the failing op lost, the engine
    and every other tensor right: execute ``salvage``; on the async stream at the next wait; in a
    capture's replay, which runs this call). Not a ``functools.partial`` of a C function, so a
    replay's batching (``CpuBackend.batch``) leaves it a call of its own, checked."""

    __slots__ = ("call", "words", "word", "name", "checks", "compiled", "argv", "source")

    def __init__(self, call, words, word, name, checks):
        self.call, self.words, self.word, self.name, self.checks = call, words, word, name, checks
        words[word] = 0   # (a pool buffer holds whatever its last user left)

    def __call__(self):
        self.call()
        code = self.words[self.word]
        if code:
            self.words[self.word] = 0
            raise flag_error(int(code), self.words, self.word, self.name, self.checks)


# torch's own sentence for an index out of range, by the op that checks it (a torch program's
# ``except`` and a torch test's ``assertRaisesRegex`` match these); the rest say OUT_OF_BOUNDS
OUT_OF_BOUNDS = "index {value} is out of bounds for dimension {dim} with size {size}"
TORCH_INDEX_SENTENCES = {
    # (torch's index_add says either, by its kernel's path: the 1-d one the first)
    "index_add": "index out of range in self: " + OUT_OF_BOUNDS,
    "index_select": "index out of range in self",
    "embedding": "index out of range in self",
    "take": "out of range: tried to access index {value} on a tensor of {size} elements.",
    "index_copy": "index_copy_(): " + OUT_OF_BOUNDS,
    "nll_loss target": "Target {value} is out of bounds.",
    "one_hot": "Class values must be smaller than num_classes.",
}


def flag_error(code, words, word, name, checks):
    """The error a kernel's flag code names (``codegen.kernel.DIVISION_CODE``, ``INDEX_CODE``):
    a ``DivisionByZeroError``, or an ``InvalidIndexError`` naming the op, the offending index
    (the word after the flag for check ``code - INDEX_CODE``), the dim and its size (a runtime
    scalar word: ``Kernel.index_check_info``). Its ``flag_ops`` say which ops of the kernel can
    have failed (execute ``salvage`` keeps the values that read none of them)."""
    if code == DIVISION_CODE:
        error = DivisionByZeroError(f"ZeroDivisionError: an integer division or remainder by zero in kernel {name} "
                                    "(torch's CPU raises RuntimeError for it; its CUDA returns a value): make the "
                                    "divisor non-zero, e.g. torch.where(b == 0, 1, b)")
        error.flag_ops = INTEGER_DIVISIONS
        return error
    k = code - INDEX_CODE
    op_name, dim, wrap, size_word = checks[k]
    size, value = int(words[size_word]), int(words[word + 1 + k])
    error = InvalidIndexError(index_error_text(op_name, value, dim, size, -size if wrap else 0))
    error.flag_ops = frozenset({Op.CHECK_INDEX})
    return error


def index_error_text(op_name, value, dim, size, low) -> str:
    """The message of index ``value`` out of [``low``, ``size``) along dim ``dim``: torch's sentence
    for op ``op_name`` (None: an engine gather, torch's generic one), then what it leaves unsaid
    (the index, dim and size where it names none of them; the range) and the fix, each once."""
    sentence = TORCH_INDEX_SENTENCES.get(op_name, OUT_OF_BOUNDS)
    if op_name == "one_hot" and value < 0:
        sentence = "Class values must be non-negative."
    said = sentence.format(value=value, dim=dim, size=size)
    where = "out of range" if "{dim}" in sentence else \
        f"index {value} is out of range for dim {dim} of size {size}"
    who = f"{op_name}: " if op_name else ""
    return f"{said} ({who}{where}; indices must lie in [{low}, {size})): fix the indices and recompute"


def _bmm(copies, a, b, out):
    for dst, src in copies:
        dst.copy_(src)
    torch.bmm(a, b, out=out)


def _as_batch(x):
    """``(operand, (copy destination, source) or (None, None))`` for ``batched_matmul``."""
    r, c = x.shape[-2:]
    try:
        return x.view(-1, r, c), (None, None)
    except RuntimeError:   # batch dims that do not merge (a head's stride is not the next dim's)
        pass
    if x.stride(-2) == 1 and x.stride(-1) != 1:   # column-major: kept so
        scratch = torch.empty(*x.shape[:-2], c, r, dtype=x.dtype, device=x.device)
        return scratch.view(-1, c, r).transpose(1, 2), (scratch, x.transpose(-1, -2))
    scratch = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    return scratch.view(-1, r, c), (scratch, x)


def _onednn_matmul(linear, a, w, out):
    out.copy_(linear(a, w, None, "none", [], ""))


def matmul_libraries(step, dtypes) -> tuple:
    """The libraries that can compute matmul ``step`` (its operand and output dtypes)."""
    if _onednn_linear() is None or any(dt.name != "float32" for dt in dtypes) or not _linear_shaped(step):
        return MATMUL_LIBRARIES[:1]
    return MATMUL_LIBRARIES


def _linear_shaped(step) -> bool:
    """Whether matmul ``step``'s operands have the shapes of oneDNN's linear: a right operand
    that is one matrix, neither empty."""
    a, b, out = _library_views(step.kernel, None)
    one_matrix = len(b.shape) >= 2 and all(size == 1 or stride == 0
                                           for size, stride in zip(b.shape[:-2], b.strides[:-2]))
    return (len(a.shape) >= 2 and one_matrix and 0 not in a.shape and 0 not in b.shape
            and out.numel == prod(a.shape[:-1]) * b.shape[-1])


def matmul_signature(step, dtypes) -> str:
    """The autotuning key of a matmul: its operand layouts and its extents rounded to powers of two."""
    parts = ["matmul", ",".join(dt.name for dt in dtypes)]
    for v in _library_views(step.kernel, None)[:-1]:
        parts.append(",".join(str(autotune.size_class(e)) for e in v.shape) + ":" +
                     ",".join(str(min(abs(st), 2)) for st in v.strides))
    return "|".join(parts)


def _check_range(index, dim, size, low, name=None) -> int:
    """The least index, once every index is checked to lie in [low, size): one ``aminmax``, since
    each small torch op after a large matmul costs tens of us (caches refilled; the nanoGPT
    step's position gather took 200 us of CPU in a replay with the five ops it had)."""
    if not index.numel():
        return 0
    lo, hi = (int(v) for v in torch.aminmax(index))
    if lo < low or hi >= size:
        bad = index[(index < low) | (index >= size)][0].item()
        raise InvalidIndexError(index_error_text(name, bad, dim, size, low))
    return lo


def _gather(x, index, out, dim, size, wrap, name):
    if _check_range(index, dim, size, -size if wrap else 0, name) < 0:
        index = torch.where(index < 0, index + size, index)
    torch.index_select(x, dim, index, out=out)


def _index_add(x, index, out, dim, size):
    """Op.INDEX_ADD: ``out`` zeroed, then ``x``'s slices added at ``index`` along ``dim`` (torch's
    ``index_add_``: repeated indices accumulate). Its indices are a checked gather's, made
    non-negative (autograd.rules.index_add); a GPU's are not read back to check them again."""
    if index.device.type == "cpu":
        _check_range(index, dim, size, 0)
    out.zero_()
    out.index_add_(dim, index, x)


# the default, SERIAL, and every reduction variant (more than a tiled pointwise kernel's TRANSPOSE_VARIANTS)
MAX_CANDIDATES = 2 + max(len(REDUCTION_VARIANTS), len(TRANSPOSE_VARIANTS))

# The least work (c_parallel units, one core) at which tuning builds a reduction's loop variants
# (REDUCTION_VARIANTS): 8 times the parallel threshold, ~70 us of one core. Below it the kernel
# runs in tens of microseconds whatever its loop order, so a variant could save a few
# microseconds a launch, while each one costs the build 50-400 ms of compiler time (a cold
# 0.41M GPT step: ~60 of them, half the step's compiling); such a kernel is tuned over its
# thread counts only (the default and SERIAL, one compiled function).
VARIANT_WORK_FACTOR = 8


class CpuBackend(Backend):
    """C kernels: a plan's new kernels compiled in one go (one function per code, found compiled
    in any plan or process), tuned on scratch copies of the bound buffers at the plan's
    ``autotune.after()``-th run, and the winner bound to the plan's step."""

    name = "c"
    reuses_launches = True

    def __init__(self, pool):
        self.pool = pool
        self.tuner = None
        self._sources = {}   # id(kernel) -> (kernel, threshold, renamed kernel, {config: source}): ``source``

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
            elif transpose_tiles(kernel) is not None:
                configs += [CConfig(**variant) for variant in TRANSPOSE_VARIANTS]
        return configs

    def candidates(self, kernel) -> list:
        """``configs`` deduplicated by what runs (the source and the launch's thread count):
        what tuning benchmarks."""
        out, seen = [], set()
        for cfg in self.configs(kernel):
            runs = (self.source(kernel, cfg), cfg.threads)
            if runs not in seen:
                seen.add(runs)
                out.append(cfg)
        return out

    def tuned_candidates(self, kernel) -> list:
        """``candidates`` less the loop variants of a reduction too small for them to matter
        (``VARIANT_WORK_FACTOR``), and less the tiles that cannot differ at ``kernel``'s size
        class: a tile of ``lanes`` outputs at least the tiled extent's class is one block for
        every size of the class, so all such tiles run the same loops (the wider only clear a
        larger stack array); the first of them in the list stays (the default, where it is one)."""
        if kernel.stages and c_parallel.work(kernel) < VARIANT_WORK_FACTOR * c_parallel.threshold():
            # (from the unprinted configs: the variants are never printed, and the default and its
            # serial launch never share a thread count, so ``candidates`` would keep both)
            return [c for c in self.configs(kernel) if dataclasses.replace(c, threads=0) == CConfig()]
        cands = self.candidates(kernel)
        if not kernel.outer or not kernel.stages:
            return cands
        extent = autotune.size_class(kernel.outer[-1].extent)
        one_block = [c for c in cands if c.lanes >= extent and CPrinter(kernel, c).strategy() == "tile"]
        return [c for c in cands if c not in one_block[1:]]

    def source(self, kernel, cfg) -> str:
        """The C source of ``kernel`` with config ``cfg``, its function named ``SYMBOL_SLOT``
        (``c_compile.named`` names it by its hash), printed once per build: deduplicating the
        candidates and building them read the same sources."""
        threshold = c_parallel.threshold()   # (read while printing: a test may change it)
        hit = self._sources.get(id(kernel))
        if hit is None or hit[0] is not kernel or hit[1] != threshold:
            if len(self._sources) >= 1024:
                self._sources.clear()
            # one renamed copy for every config: its cost estimate (c_parallel.work) is made once
            hit = self._sources[id(kernel)] = (kernel, threshold, rename(kernel, c_compile.SYMBOL_SLOT), {})
        printed = hit[3]
        code = dataclasses.replace(cfg, threads=0)   # (a thread count is set at launch, not printed)
        if code not in printed:
            printed[code] = print_c(hit[2], code)
        return printed[code]

    def build(self, plan, steps, candidates, stats) -> dict:
        """Every candidate of every kernel, each a function named by its code's hash: the ones no
        library holds yet compiled in one go (``c_compile.build_functions``), once for all the
        candidates that differ only in their launch's thread count."""
        sources, what, symbols = {}, {}, {}
        for st in steps:
            symbols[st.name] = []
            for cfg in candidates[st.name]:
                symbol, src = c_compile.named(self.source(st.kernel, cfg), PRELUDE)
                sources[symbol] = src
                what[symbol] = f"kernel {st.name} ({cfg.label()}) of plan {plan.label}"
                symbols[st.name].append(symbol)
        fns = c_compile.build_functions(sources, PRELUDE, what, stats)
        return {st.name: [fns[s] if isinstance(fns[s], CompileError) else (fns[s], sources[s]) for s in symbols[st.name]]
                for st in steps}

    def tuner_for(self, bufs) -> autotune.Tuner:
        if self.tuner is None:
            self.tuner = autotune.Tuner(f"cpu|{c_compile.compiler()}|{c_compile.identity_hash()}")
        return self.tuner

    def scratch_pool(self, bufs):
        return self.pool

    def scratch_args(self, copies, meta):
        return (ctypes.c_void_p * len(copies))(*[c.ptr for c in copies]), meta

    def launcher(self, step, cfg, compiled, args):
        argv, meta = args
        return functools.partial(self.bind(step, cfg, compiled), argv, meta.ptr)

    def bind(self, step, cfg, compiled):
        """``compiled`` launched on ``cfg``'s thread count: the function itself for the budget's
        count, else a call of ``lf_launch_on`` with the count and the function bound (``thunk``
        adds the arguments and the metadata)."""
        if not cfg.threads:
            return compiled
        return functools.partial(c_compile.launch_on(), cfg.threads, compiled)

    def cached_library(self, step, bufs) -> bool:
        """The library matmul ``step`` takes at its build: the cached winner (True), else the
        default, left to tune (False)."""
        if step.kind is not StepKind.MATMUL:
            return True
        dtypes = [b.dtype for b in bufs]
        libraries = matmul_libraries(step, dtypes)
        pick = autotune.cached_choice(self.tuner_for(bufs), matmul_signature(step, dtypes), list(libraries))
        step.config = libraries[pick or 0]
        return pick is not None

    def choose_library(self, step, bufs, stats) -> None:
        """Which library computes matmul ``step``: timed on scratch copies of its buffers."""
        if step.kind is not StepKind.MATMUL:
            return
        dtypes = [b.dtype for b in bufs]
        libraries = matmul_libraries(step, dtypes)
        if len(libraries) == 1 or not autotune.explores():
            return
        # the operands are only read: the output (bound last) is the one copy
        copies = self.pool.scratch_copies(bufs, f"autotune scratch for {step.name}", [False] * (len(bufs) - 1) + [True])
        runners = [matmul_call(step, lib, copies) for lib in libraries]
        best = autotune.choose(self.tuner_for(bufs), matmul_signature(step, dtypes), list(libraries), runners, stats)
        step.config = libraries[max(best, 0)]

    def rebind(self, old, new) -> bool:
        if new.kind is StepKind.MATMUL:
            # a tuned library serves the new shapes if they are in its tuning class and it takes them
            if old.config is None:
                return True   # torch's matmul, the default, takes every shape
            if autotune.explores() and matmul_signature(new, ()) != matmul_signature(old, ()):
                return False
            new.config = old.config
            return old.config == MATMUL_LIBRARIES[0] or _linear_shaped(new)
        if new.kind is not StepKind.KERNEL:
            return True   # a library call: nothing compiled or tuned
        if autotune.explores() and autotune.signature(new.kernel) != autotune.signature(old.kernel):
            return False
        _, source = c_compile.named(self.source(new.kernel, old.config), PRELUDE)
        if source != old.source:   # the symbol is the code's hash: the same source is the same function
            return False
        new.compiled, new.source, new.config = old.compiled, source, old.config
        return True

    def store_identity(self) -> str:
        return f"cpu|{c_compile.compiler()}|{c_compile.identity_hash()}|{' '.join(c_compile.flags())}"

    def stored_step(self, step):
        if step.kind is not StepKind.KERNEL:
            return ("library", step.config)
        fn = kernel_function(step.compiled)
        library = c_compile.library_of(fn)
        return None if library is None else ("kernel", library, fn.__name__)

    def restore_step(self, step, record) -> bool:
        if record[0] == "library":
            step.config = record[1]
            return step.kind is not StepKind.KERNEL
        _, library, name = record
        lib = c_compile.cached(library) if step.kind is StepKind.KERNEL else None
        if lib is None:
            return False
        try:
            step.compiled = self.bind(step, step.config, c_compile.function(lib, name))
        except AttributeError:
            return False
        return True

    def thunk(self, step, bufs, meta):
        """The launch as a call with two integer arguments: ctypes converts a Python int for a
        ``c_void_p`` several times faster than it converts an array object."""
        kind = step.kind
        if kind is EXTERN:   # (first: a chain of externs pays one test per launch)
            return extern_thunk(step.kernel.arg, bufs, meta)
        if kind is not KERNEL:
            return library_thunk(step, bufs, meta=meta)
        ptrs = tuple([b.ptr for b in bufs])
        launches = meta.launches
        call = launches.get(ptrs)
        if call is not None and call.compiled is step.compiled:   # (tuning may have bound another function)
            return call
        argv = (ctypes.c_void_p * len(bufs))(*ptrs)
        call = functools.partial(step.compiled, ctypes.addressof(argv), meta.ptr)
        flag = step.error_flag
        if flag is not None:
            call = FlaggedLaunch(call, meta.words, flag, step.name, step.index_checks)
        call.compiled = step.compiled   # (``bind``'s: the function, or lf_launch_on with it)
        call.argv = argv   # the array the address points into (addresses only: it keeps no memory alive)
        call.source = step.source   # for uses_threads (a reference: no cost per drain)
        if len(launches) >= 4:
            launches.clear()
        launches[ptrs] = call
        return call

    def uses_threads(self, thunks) -> bool:
        """Whether a launch of ``thunks`` may open an OpenMP region: a C kernel whose source has
        one, or any library call (torch's CPU ops, run on at most the budget's count:
        ``ThreadBudget.torch_calls``). A graph of serial kernels only (a small decode step)
        replays without the budget."""
        return any("omp parallel" in getattr(t, "source", "omp parallel") for t in thunks)

    def batch(self, thunks) -> list:
        """A recorded launch list made cheaper to replay: each run of consecutive C kernels
        becomes one call into a C loop over (function, arguments, metadata, threads) words, so a
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


def kernel_function(compiled):
    """The C function of what ``CpuBackend.bind`` made (the function, or ``lf_launch_on`` with a
    thread count and the function bound)."""
    return compiled.args[1] if isinstance(compiled, functools.partial) else compiled


def launch_words(call) -> list:
    """A C kernel launch (``CpuBackend.thunk``'s call) as the runner's four words: the function,
    the arguments' and the metadata's addresses, and the thread count (0: the budget's)."""
    if call.func is c_compile.launch_on():
        threads, fn, argv, meta = call.args
    else:
        fn, threads, (argv, meta) = call.func, 0, call.args
    return [ctypes.cast(fn, ctypes.c_void_p).value, argv, meta, threads]


_OMP_THREADS = """
#include <omp.h>
void lf_omp_set_num_threads(int n) { omp_set_num_threads(n); }
"""


def omp_set_num_threads():
    """``omp_set_num_threads`` of the OpenMP runtime the kernels and torch share (built by the same
    compiler with the same flags, so it is that runtime whichever compiler it is): the calling
    thread's count, which torch's CPU ops read (``ThreadBudget.torch_calls``)."""
    fn = c_compile.build(_OMP_THREADS, what="OpenMP thread-count setter").lf_omp_set_num_threads
    fn.argtypes = [ctypes.c_int]
    fn.restype = None
    return fn


def thread_count_setter():
    """Sets the thread count every kernel's parallel region asks for (``num_threads(lf_num_threads)``,
    ``codegen/c_compile.py``): OpenMP's own count, torch's setting, stays untouched."""
    count = c_compile.thread_count()

    def set_threads(n: int) -> None:
        count.value = n
    return set_threads


_RUNNER = """
#include <stdint.h>
typedef void (*lf_kernel)(char **, const int64_t *);
extern __thread int lf_launch_threads;   /* (codegen/c_compile.py) */
/* list: n, then n (function, arguments, metadata, thread count or 0) quadruples */
void lf_run_launches(const int64_t *list) {
    int saved = lf_launch_threads;
    for (int64_t i = 0; i < list[0]; i++) {
        const int64_t *l = list + 1 + 4 * i;
        lf_launch_threads = (int)l[3];
        ((lf_kernel)(intptr_t)l[0])((char **)(intptr_t)l[1], (const int64_t *)(intptr_t)l[2]);
    }
    lf_launch_threads = saved;
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
        words += launch_words(t)
    packed = (ctypes.c_int64 * len(words))(*words)
    call = functools.partial(runner, ctypes.addressof(packed))
    call.keepalive = (packed, thunks)   # the list and the argument arrays its words point into
    return [call]

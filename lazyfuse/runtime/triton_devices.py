"""The Triton devices: ``cuda`` (compiled kernels, CUDA/HIP graphs) and ``interpreter``.

Both share ``TritonBackend``: it prints each kernel step with ``codegen.triton_printer``, writes
the module into the cache folder (file named by the source hash, written atomically) and imports
it from there, so tracebacks point at real lines of real files.

The interpreter device runs *our* kernels through Triton's interpreter without touching the
process-wide ``TRITON_INTERPRET`` switch: its copy of a module is imported normally, then every
``@triton.jit`` function in it is replaced by ``InterpretedFunction(fn.fn)`` — calls between
the kernel and its helpers go through the module's globals, so the whole module is interpreted
(this constructor exists unchanged throughout Triton 3.x). A cuda device in the same process
keeps its own, compiled copy of the module.

Loaded modules are bounded like C libraries (``LAZYFUSE_MAX_LOADED_LIBRARIES``): past the
bound the least recently built leaves ``sys.modules`` and this cache, and is freed (with its
compiled kernels) once no cached plan or live graph holds its function.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import struct
import sys
import threading
import warnings
from collections import OrderedDict

import numpy as np
import torch

from ..codegen import autotune, c_compile
from ..codegen.cache import atomic_write, cache_dir
from ..codegen.kernel import INDEX_CODE
from ..codegen.triton_printer import PRELUDE, candidate_configs, default_config, print_triton
from ..errors import CaptureError, CompileError, ShapeError
from ..ir.dtypes import int64
from .backend import Backend, StepKind
from .cpu import FlaggedLaunch, HostMeta, flag_error, library_thunk
from .device import Device, HostGraph

_loaded: OrderedDict = OrderedDict()   # (digest, interpreted) -> (function, module name), most recent last
_lock = threading.Lock()


def load_kernel(name: str, function_source: str, interpreted: bool, stats=None):
    """The jit function ``name`` of the module PRELUDE + ``function_source`` (cached; a module
    built anew counts in ``stats.compiler_runs``)."""
    source = PRELUDE + "\n\n" + function_source
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    key = (digest, interpreted)
    with _lock:
        hit = _loaded.get(key)
        if hit is not None:
            _loaded.move_to_end(key)
            return hit[0]
        path = cache_dir("triton") / f"{digest}.py"
        if not path.exists():
            atomic_write(path, source.encode())
        modname = f"lazyfuse_triton_{digest}" + ("_interp" if interpreted else "")
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            del sys.modules[modname]
            raise CompileError(f"generated Triton module {path} does not import: {e}") from e
        if interpreted:
            _interpret_module(module)
        else:
            _bind_device_math(module)
        fn = getattr(module, name)
        _loaded[key] = (fn, modname)
        if stats is not None:
            stats.compiler_runs += 1
        while len(_loaded) > max(c_compile.MAX_LOADED, 1):
            sys.modules.pop(_loaded.popitem(last=False)[1][1], None)
        return fn


# The interpreter reduces with numpy when the combine function *is* one of Triton's own (an
# identity test); any other combine function runs element by element in Python, ~1000x slower.
# The printer's reduction combiners compute exactly these, so interpreted modules bind them.
_FAST_COMBINE = {"lf_add": "_sum_combine", "lf_mul": "_prod_combine", "lf_maxnum": "_elementwise_max",
                 "lf_minnum": "_elementwise_min"}


def _bind_device_math(module) -> None:
    """Compiled modules call the device library's exact ``fmod`` (see ``lf_fmod`` in PRELUDE)."""
    from triton.language.extra import libdevice
    module.lf_fmod = libdevice.fmod


def _combined_along(op, input) -> list:
    """Per tensor of ``input``, the running combine of ``op`` (a Triton interpreter ScanOps or
    ReduceOps) along its axis, that axis first: one ``combine_fn`` call per position along the axis on
    whole slices of the block, where Triton's generic scan and reduce call it once per element in
    Python (a logcumsumexp of 45x65 took minutes). The same combines in the same order: the value at
    position i is combine(value at i - 1, input at i)."""
    import triton.language as tl
    datas = [np.moveaxis(a.handle.data, op.axis, 0) for a in input]
    types = [a.dtype for a in input]
    rest = datas[0].shape[1:]

    def as_tensors(values):
        return [v if isinstance(v, tl.core.tensor) else op.to_tensor(np.full(rest, v), t) for v, t in zip(values, types)]

    def as_arrays(tensors):
        return [np.asarray(x.handle.data).reshape(rest).astype(d.dtype) for x, d in zip(tensors, datas)]

    acc = as_tensors([op.to_tensor(np.ascontiguousarray(d[0]), t) for d, t in zip(datas, types)])
    steps = [as_arrays(acc)]
    for i in range(1, datas[0].shape[0]):
        got = op.combine_fn.fn(*acc, *[op.to_tensor(np.ascontiguousarray(d[i]), t) for d, t in zip(datas, types)])
        acc = as_tensors(got if isinstance(got, tuple) else (got,))
        steps.append(as_arrays(acc))
    return [np.stack([step[j] for step in steps]) for j in range(len(input))]


def _install_slicewise_combines() -> None:
    """Triton's interpreter's generic (custom ``combine_fn``) scan and reduce, slice by slice: see
    ``_combined_along``. Process-wide, as the interpreter's own patching of ``tl`` is."""
    from triton.runtime import interpreter
    scan, reduce = getattr(interpreter, "ScanOps", None), getattr(interpreter, "ReduceOps", None)
    if scan is None or reduce is None or getattr(scan, "lf_slicewise", False):
        return   # (a Triton whose interpreter is laid out otherwise keeps its own)
    whole_block_reduce = reduce.generic_reduce

    def generic_scan(self, input):
        return [self.to_tensor(np.moveaxis(r, 0, self.axis), a.dtype) for r, a in zip(_combined_along(self, input), input)]

    def generic_reduce(self, input):
        if self.axis is None:   # (a reduction of the whole block: Triton's own)
            return whole_block_reduce(self, input)
        out = [r[-1] for r in _combined_along(self, input)]
        return [self.to_tensor(np.expand_dims(r, self.axis) if self.keep_dims else r, a.dtype) for r, a in zip(out, input)]

    scan.generic_scan, reduce.generic_reduce, scan.lf_slicewise = generic_scan, generic_reduce, True


def _interpret_module(module) -> None:
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    _install_slicewise_combines()
    for attr, value in list(vars(module).items()):
        if isinstance(value, JITFunction):
            setattr(module, attr, InterpretedFunction(value.fn))
    for ours, theirs in _FAST_COMBINE.items():
        fast = getattr(tl.standard, theirs, None)
        if fast is not None:
            setattr(module, ours, fast)


class DeviceMeta:
    """Launch metadata in device memory, written through a pinned host staging tensor.

    ``push`` copies the staging words non-blocking on the current stream, so the copy is
    ordered before the kernels that read it (and recorded into a graph while a capture is
    open). ``write`` pushes only when the words change; ``words`` (which graph replay edits
    to advance random streams) first waits for the previous copy, so staging is never
    rewritten while a copy reads it.

    A push copies the words written (header and scalars) only: the words after them are the
    kernel's error flag (``Kernel.error_flag_word``), which the kernel raises and the next user
    drain reads and clears (``DeviceIndexCheck``). A push that copied them too would clear a
    flag raised and not yet read: a graph replays its recorded push before its kernel, so the
    second of two replays before a host read lost the first's failed check.
    """

    __slots__ = ("buffer", "staging", "_words", "_copied", "_pushed", "_count")

    def __init__(self, buffer):
        self.buffer = buffer
        self.staging = torch.zeros(max(buffer.numel, 1), dtype=torch.int64, pin_memory=True)
        self._words = self.staging.numpy()
        self._copied = None
        self._pushed = False
        self._count = 0   # the words written: the ones a push copies

    @property
    def words(self) -> np.ndarray:
        if self._copied is not None:
            self._copied.synchronize()
            self._copied = None
        return self._words

    def write(self, header, scalars):
        new = list(header) + [struct.unpack("<q", struct.pack("<d", v))[0] if isinstance(v, float) else int(v)
                              for v in scalars]
        if self._pushed and self._words[: len(new)].tolist() == new:
            return
        self.words[: len(new)] = new
        self._count = len(new)
        self.push()

    def push(self) -> None:
        n = self._count
        self.buffer.tensor[:n].copy_(self.staging[:n], non_blocking=True)
        self._pushed = True
        if torch.cuda.is_current_stream_capturing():
            self._copied = None   # an event cannot be waited on from inside a capture
        else:
            self._copied = torch.cuda.Event()
            self._copied.record()


def _noop():
    pass


_interpreter_lock = threading.Lock()   # the interpreter keeps the current program id in a global


def _interpret(run, args, kwargs):
    # NaN/inf results (and all-NaN rows of a max) are intended: numpy need not warn
    with _interpreter_lock, np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run(*args, **kwargs)


def launch_params(kernel, cfg, interpreted: bool):
    """``(grid, kwargs)`` of a kernel launched with ``cfg`` (launch options on GPUs only)."""
    mm = kernel.matmul
    if mm is not None:
        kwargs = {"BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n, "BLOCK_K": cfg.block_k, "num_warps": cfg.num_warps}
        tiles = -(-mm.m.extent // cfg.block_m) * -(-mm.n.extent // cfg.block_n)
        grid = (tiles * (kernel.outer_numel // max(mm.m.extent * mm.n.extent, 1)),)
    else:
        kwargs = {"BLOCK": cfg.block, "num_warps": cfg.num_warps}
        if kernel.stages:
            kwargs["BLOCK_R"] = cfg.block_r
        # a foreach kernel's segments each start at a program of their own
        grid = (sum(-(-seg.outer_numel // cfg.block) for seg in kernel.segments or (kernel,)),)
    if cfg.num_stages and not interpreted:
        kwargs["num_stages"] = cfg.num_stages
    if not interpreted:
        # each op's result rounds as torch's (as the C kernels' -ffp-contract=off): LLVM fuses a
        # product into the next op's addition by default; the FMAs meant are tl.fma in the source
        # (Op.FMA, lf_lerp). The interpreter (numpy) never fuses. Untested on a GPU here.
        kwargs["enable_fp_fusion"] = False
    return grid, kwargs


def _synchronized(launch, device):
    """A tuning run on a GPU: the launch is asynchronous, so time it between two syncs."""
    def run():
        torch.cuda.synchronize(device)
        launch()
        torch.cuda.synchronize(device)
    return run


class TritonBackend(Backend):
    """Print, load and launch Triton kernels; matmul and gather go through torch.

    With autotuning on, every kernel of a plan is printed and loaded with each candidate
    config (``triton_printer.candidate_configs``), the candidates are benchmarked on scratch
    copies of the bound buffers (``autotune.choose``: the choice is cached on disk, keyed by
    the device and the Triton version) and the winner is bound to the plan's step. Candidates
    that fail to load or to run are skipped."""

    # matmuls of these operand dtypes run as a tiled tl.dot kernel with the elementwise epilogue
    # inside (the planner's capability flag); others (float64, integers) are a torch call
    matmul_template = frozenset({"float16", "bfloat16", "float32"})

    def __init__(self, interpreted: bool, gather=None, watch=None):
        self.interpreted = interpreted
        self.gather = gather     # the device-checked gather of a GPU; None: checked on the host
        self.watch = watch       # a GPU's deferred read of a kernel's index checks (DeviceIndexCheck.watch)
        self.name = "triton-interpreter" if interpreted else "triton"
        self._tuners: dict = {}

    def new_meta(self, pool, words, usage, requester, cause):
        buf = pool.buffer(int64, max(words, 1), usage, requester, cause)
        return HostMeta(buf) if self.interpreted else DeviceMeta(buf)

    def config(self, kernel):
        return default_config(kernel, self.interpreted)

    def preview(self, kernel) -> str:
        """The Triton source of ``kernel`` with the heuristic config (for ``lf.explain``)."""
        return print_triton(kernel, self.config(kernel))[1]

    def candidates(self, kernel) -> list:
        """The heuristic default first, then (autotuning on) what else to try."""
        if not autotune.explores():
            return [self.config(kernel)]
        return candidate_configs(kernel, self.interpreted)

    def tuner(self, torch_device) -> autotune.Tuner:
        """One tuner per device model: a choice made on one GPU is no choice for another."""
        import triton
        if self.interpreted:
            name = "interpreter"
        else:
            name = f"{'hip' if torch.version.hip else 'cuda'}:{torch.cuda.get_device_name(torch_device)}"
        tuner = self._tuners.get(name)
        if tuner is None:
            tuner = self._tuners[name] = autotune.Tuner(f"triton|{name}|{triton.__version__}")
        return tuner

    def tuner_for(self, bufs) -> autotune.Tuner:
        return self.tuner(bufs[0].tensor.device)

    def build(self, plan, steps, candidates, stats) -> dict:
        """Every candidate of every kernel, printed and loaded as its own module."""
        out = {}
        for st in steps:
            results = out[st.name] = []
            for cfg in candidates[st.name]:
                try:
                    name, src = print_triton(st.kernel, cfg)
                except NotImplementedError as e:
                    raise CompileError(f"plan {plan.label}: {e}") from e
                try:
                    results.append((load_kernel(name, src, self.interpreted, stats), src))
                except CompileError as e:
                    results.append(e)
        return out

    def bind(self, step, cfg, compiled):
        return (compiled, *launch_params(step.kernel, cfg, self.interpreted))

    def rebind(self, old, new) -> bool:
        if new.kind is not StepKind.KERNEL:
            return True   # a library call: nothing compiled or tuned
        if autotune.explores():
            if autotune.signature(new.kernel) != autotune.signature(old.kernel):
                return False
            cfg = old.config   # the tuned choice serves its size class
        else:
            # the heuristic's config at these sizes: a block that grows with the size is a launch
            # parameter of the same module, as the build path would find it
            cfg = self.config(new.kernel)
        _, source = print_triton(new.kernel, cfg)
        if source != old.source:
            return False
        new.compiled = self.bind(new, cfg, old.compiled[0])
        new.source, new.config = source, cfg
        return True

    def tune(self, step, cands, found, bufs, values, stats) -> int:
        if not self.interpreted and torch.cuda.is_current_stream_capturing():
            # no benchmarking inside a capture (a sync would invalidate it): a cached choice or the default
            tuner = self.tuner_for(bufs)
            labels = [c.label() for c in cands]
            hit = tuner.lookup(tuner.key(autotune.signature(step.kernel)), labels) if autotune.enabled() else None
            return hit if hit is not None and found[hit] is not None else 0
        device_ctx = contextlib.nullcontext() if self.interpreted else torch.cuda.device(bufs[0].tensor.device)
        with device_ctx:
            return super().tune(step, cands, found, bufs, values, stats)

    def scratch_args(self, copies, meta):
        return [c.tensor for c in copies] + [meta.buffer.tensor]

    def scratch_done(self, bufs) -> None:
        if not self.interpreted:
            torch.cuda.synchronize(bufs[0].tensor.device)   # nothing may still use them when freed

    def launcher(self, step, cfg, compiled, args):
        grid, kwargs = launch_params(step.kernel, cfg, self.interpreted)
        run = self._launcher(compiled, grid, kwargs, args)
        return run if self.interpreted else _synchronized(run, args[0].device)

    def _launcher(self, fn, grid, kwargs, args):
        if grid[0] == 0:
            return _noop
        run = fn[grid]
        if self.interpreted:
            return functools.partial(_interpret, run, args, kwargs)
        return functools.partial(run, *args, **kwargs)

    def thunk(self, step, bufs, meta):
        if step.kind is not StepKind.KERNEL:
            return library_thunk(step, bufs, self.gather, meta)
        fn, grid, kwargs = step.compiled
        run = self._launcher(fn, grid, kwargs, [b.tensor for b in bufs] + [meta.buffer.tensor])
        flag = step.error_flag
        if flag is None:
            return run
        if self.interpreted:
            return FlaggedLaunch(run, meta.words, flag, step.name, step.index_checks)
        if step.index_checks and self.watch is not None:
            return self.watch(run, meta, step)
        # (a GPU's division flag is never read: torch's CUDA kernels return a value for an
        # integer division by zero rather than raise, and so do lazyfuse's)
        return run


def interpreter_fallback(why: str) -> TritonBackend:
    """The ``cpu`` device's backend when no C compiler is usable: warn (once: devices are
    cached per process) and run the same kernels through the Triton interpreter."""
    warnings.warn(f"lazyfuse: {why}, so the 'cpu' device runs its kernels through the Triton interpreter, "
                  "which is much slower. Install gcc or clang, or point LAZYFUSE_CC at a C compiler.",
                  RuntimeWarning, stacklevel=2)
    return TritonBackend(interpreted=True)


class InterpreterDevice(Device):
    kind = "interpreter"
    supports_graphs = False

    def _make_backend(self):
        return TritonBackend(interpreted=True)


class DeviceIndexCheck:
    """Gather/embedding indices checked on the GPU, without a host sync.

    Checking on the host (as the ``cpu`` device does) would sync before every gather and
    cannot run inside a CUDA graph capture; torch's own out-of-range check is a device-side
    assert, which leaves the CUDA context unusable. So the GPU path clamps every index into
    range (the read stays inside the tensor) and counts the out-of-range ones in a device flag,
    with one offending value; the next user drain (a host read or ``lf.sync``) reads the flag
    and raises ``ShapeError`` if it was set, then clears it. Values computed from a clamped
    gather are not meaningful: the error says so, and the device stays usable.

    A fused kernel's index checks (``Op.CHECK_INDEX``) set its error flag in its launch
    metadata, in device memory: each launch of such a kernel is ``watch``ed (those a graph
    capture records, again at each replay of the graph), and the next user drain reads every
    watched flag in one copy and raises the ``InvalidIndexError`` its code names, clearing it.
    (The drain has ended by then: as with the gather, the values computed from a bad index are
    not meaningful, the others are right.) A flag is only ever raised, sticky until that read:
    the kernel raises its code with ``atomic_max`` (a division by zero in the same launch, which
    a GPU does not report, never hides a failed check), and no metadata push clears it
    (``DeviceMeta``), so of two replays before a read the first one's failure is kept."""

    def __init__(self, torch_device):
        self.flag = torch.zeros(2, dtype=torch.int64, device=torch_device)   # [count, a bad value]
        self.unchecked = False
        self.watched: dict = {}    # id(metadata tensor) -> (tensor, flag word, kernel name, index checks)
        self.recording = None      # while a graph capture is open: the watched launches it records
        self.uncleared: list = []  # entries watched while a capture was open: flags to clear at its end

    def watch(self, run, meta, step):
        """The launch ``run`` of kernel ``step``, its flag (in ``meta``) read at the next user drain.
        The flag words start cleared (a pool buffer holds whatever its last user left): now, or,
        while a capture is open, once it closes (cleared inside it, each replay would clear
        them again before its kernel, losing what the replay before it raised)."""
        entry = (meta.buffer.tensor, step.error_flag, step.name, step.index_checks)
        if self.recording is None:
            entry[0][entry[1]:].zero_()
        else:
            self.uncleared.append(entry)

        def launch():
            run()
            self.watched[id(entry[0])] = entry
            if self.recording is not None:
                self.recording.append(entry)
        return launch

    def capture_closed(self) -> None:
        """Clear the flags of the launches watched inside the capture just closed (``watch``)."""
        for t, word, *_ in self.uncleared:
            t[word:].zero_()
        self.uncleared = []

    def replayed(self, entries) -> None:
        """A graph replay ran the watched launches ``entries`` (and perhaps a recorded gather)."""
        for entry in entries:
            self.watched[id(entry[0])] = entry
        self.unchecked = True

    def gather(self, x, index, out, dim, size, wrap, name):
        if index.numel():
            bad = (index < (-size if wrap else 0)) | (index >= size)
            first = torch.index_select(index, 0, bad.to(torch.int32).argmax().reshape(1))
            self.flag[1:].copy_(torch.where(bad.any(), first, self.flag[1:]))
            self.flag[:1].add_(bad.sum())
        index = torch.where(index < 0, index + size, index).clamp_(0, max(size - 1, 0))
        torch.index_select(x, dim, index, out=out)
        self.unchecked = True

    def raise_if_set(self, device_name: str) -> None:
        if self.watched:
            self._raise_flagged()
        if not self.unchecked:
            return
        self.unchecked = False
        count, value = self.flag.tolist()
        if count:
            self.flag.zero_()
            raise ShapeError(f"{count} gather/embedding index value(s) on {device_name} were out of range (e.g. "
                             f"{value}); indices must lie in [-size, size) of the indexed dim ([0, size) for "
                             "index_select, gather and embedding). They were "
                             "checked on the device (no host sync), so this is reported at the next host read or lf.sync; "
                             "the results computed from them are not valid: fix the indices and recompute.")


    def _raise_flagged(self) -> None:
        """Read the watched kernels' metadata (one copy) and raise the first error a flag names."""
        entries = list(self.watched.values())
        self.watched.clear()
        words = torch.cat([t for t, *_ in entries]).tolist()
        error, at = None, 0
        for t, word, name, checks in entries:
            code = words[at + word]
            if code >= INDEX_CODE and error is None:
                error = flag_error(code, words[at:at + t.numel()], word, name, checks)
            if code:
                t[word:word + 1].zero_()
            at += t.numel()
        if error is not None:
            raise error


class CudaGraph:
    """A captured ``torch.cuda.CUDAGraph``, plus the host record of its launches: the buffers
    they bind (kept alive), the random-stream words each replay advances, and the launches
    whose index-check flags a replay leaves to read (``DeviceIndexCheck.watch``)."""

    __slots__ = ("graph", "host", "watched")

    def __init__(self, graph, host: HostGraph, watched: list):
        self.graph = graph
        self.host = host
        self.watched = watched

    def __len__(self):
        return len(self.host)

    def bind_rng(self, base: int) -> None:
        self.host.bind_rng(base)

    def draw_rng(self, seed: int, base: int) -> None:
        self.host.draw_rng(seed, base)   # edits the staging words the graph's recorded push copies


class CudaDevice(Device):
    """Triton kernels on the current torch stream of one GPU (HIP through a ROCm torch build).

    Graph capture runs on a side stream; the launches of the capture run are recorded by
    ``torch.cuda.CUDAGraph`` and replayed with one call. Each graph gets torch's default, a
    private memory pool of its own: a pool handle shared across captures is freed with the last
    graph that used it, and torch asserts when a later capture names it (seen on an H200)."""

    kind = "cuda"
    supports_graphs = True

    def __init__(self, name, torch_device):
        self.index = torch_device.index
        self._graph = None
        self._stream_ctx = None
        super().__init__(name, torch_device)

    def _make_backend(self):
        self.index_check = DeviceIndexCheck(self.torch_device)
        return TritonBackend(interpreted=False, gather=self.index_check.gather, watch=self.index_check.watch)

    def raise_deferred_errors(self) -> None:
        self.index_check.raise_if_set(self.name)

    def launching(self):
        if torch.cuda.current_device() != self.index:
            return torch.cuda.device(self.index)
        return contextlib.nullcontext()

    def graph_start_capture(self) -> None:
        super().graph_start_capture()
        try:
            side = torch.cuda.Stream(self.torch_device)
            side.wait_stream(torch.cuda.current_stream(self.torch_device))
            self._stream_ctx = torch.cuda.stream(side)
            self._stream_ctx.__enter__()
            graph = torch.cuda.CUDAGraph()
            graph.capture_begin(capture_error_mode="thread_local")
            self.index_check.recording = []
            self._graph = graph   # only now is there a capture to end: ending one that never began
            #                       raises a CUDA error that would hide why the begin failed
        except BaseException:
            self._end_capture()
            super().graph_abort()
            raise

    def _end_capture(self):
        """End the torch capture if one is open and restore the stream; returns the graph."""
        graph, self._graph = self._graph, None
        ctx, self._stream_ctx = self._stream_ctx, None
        try:
            if graph is not None:
                graph.capture_end()
        finally:
            if ctx is not None:
                side = torch.cuda.current_stream(self.torch_device)
                ctx.__exit__(None, None, None)
                torch.cuda.current_stream(self.torch_device).wait_stream(side)
        return graph

    def graph_stop_capture(self):
        watched, self.index_check.recording = self.index_check.recording or [], None
        try:
            graph = self._end_capture()
        except BaseException as e:
            self.index_check.uncleared = []   # (no graph will replay them)
            super().graph_abort()
            raise CaptureError(f"CUDA graph capture failed to close on {self.name}: {e}") from e
        self.index_check.capture_closed()   # (before the replay below: it may raise them)
        host = super().graph_stop_capture()
        # A CUDA capture records the capture run's kernels without running them, where the cpu's
        # host graph runs each launch as it records it. One replay now makes the capture run
        # happen on every device alike (docs/semantics.md, Capture: the closure runs once more): its in-place writes
        # land and the graph's output holds its value, with the random words of that run.
        graph.replay()
        self.index_check.replayed(watched)
        return CudaGraph(graph, host, watched)

    def graph_abort(self) -> None:
        self.index_check.recording = None
        try:
            self._end_capture()
        except Exception:  # noqa: BLE001 (an invalidated capture: nothing to keep)
            pass
        self.index_check.capture_closed()
        super().graph_abort()

    def graph_replay(self, graph) -> None:
        graph.graph.replay()
        self.index_check.replayed(graph.watched)   # (a recorded gather may have run too)

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
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import struct
import sys
import threading
import warnings

import numpy as np
import torch

from ..codegen.cache import atomic_write, cache_dir
from ..codegen.triton_printer import PRELUDE, default_config, print_triton
from ..errors import CaptureError, CompileError
from ..ir.dtypes import int64
from .cpu import HostMeta, library_thunk
from .device import Device, HostGraph

_loaded: dict = {}
_lock = threading.Lock()


def load_kernel(name: str, function_source: str, interpreted: bool):
    """The jit function ``name`` of the module PRELUDE + ``function_source`` (cached)."""
    source = PRELUDE + "\n\n" + function_source
    digest = hashlib.sha256(source.encode()).hexdigest()[:32]
    key = (digest, interpreted)
    with _lock:
        fn = _loaded.get(key)
        if fn is not None:
            return fn
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
        fn = _loaded[key] = getattr(module, name)
        return fn


# The interpreter reduces with numpy when the combine function *is* one of Triton's own (an
# identity test); any other combine function runs element by element in Python, ~1000x slower.
# The printer's reduction combiners compute exactly these, so interpreted modules bind them.
_FAST_COMBINE = {"lf_add": "_sum_combine", "lf_maxnum": "_elementwise_max", "lf_minnum": "_elementwise_min"}


def _interpret_module(module) -> None:
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
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
    """

    __slots__ = ("buffer", "staging", "_words", "_copied", "_pushed")

    def __init__(self, buffer):
        self.buffer = buffer
        self.staging = torch.zeros(max(buffer.numel, 1), dtype=torch.int64, pin_memory=True)
        self._words = self.staging.numpy()
        self._copied = None
        self._pushed = False

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
        self.push()

    def push(self) -> None:
        self.buffer.tensor.copy_(self.staging[: self.buffer.numel], non_blocking=True)
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


class TritonBackend:
    """Print, load and launch Triton kernels; matmul and gather go through torch."""

    def __init__(self, interpreted: bool):
        self.interpreted = interpreted
        self.name = "triton-interpreter" if interpreted else "triton"

    def new_meta(self, pool, words, usage, requester, cause):
        buf = pool.buffer(int64, max(words, 1), usage, requester, cause)
        return HostMeta(buf) if self.interpreted else DeviceMeta(buf)

    def config(self, kernel):
        return default_config(kernel, self.interpreted)

    def compile_plan(self, plan, stats, leaves, root_bufs, temps, scalars) -> None:
        for st in plan.steps:
            if st.kind != "kernel":
                continue
            cfg = self.config(st.kernel)
            try:
                name, src = print_triton(st.kernel, cfg)
            except NotImplementedError as e:
                raise CompileError(f"plan {plan.label}: {e}") from e
            fn = load_kernel(name, src, self.interpreted)
            kwargs = {"BLOCK": cfg.block, "num_warps": cfg.num_warps}
            if st.kernel.stages:
                kwargs["BLOCK_R"] = cfg.block_r
            grid = (-(-st.kernel.outer_numel // cfg.block),)
            st.compiled = (fn, grid, kwargs)
            st.source = src
            st.config = cfg

    def thunk(self, step, bufs, meta):
        if step.kind != "kernel":
            return library_thunk(step, bufs)
        fn, grid, kwargs = step.compiled
        if grid[0] == 0:
            return _noop
        args = [b.tensor for b in bufs] + [meta.buffer.tensor]
        run = fn[grid]
        if self.interpreted:
            return functools.partial(_interpret, run, args, kwargs)
        return functools.partial(run, *args, **kwargs)


def interpreter_fallback() -> TritonBackend:
    """The ``cpu`` device's backend when no C compiler is usable: warn (once: devices are
    cached per process) and run the same kernels through the Triton interpreter."""
    cc = os.environ.get("LAZYFUSE_CC")
    why = f"LAZYFUSE_CC={cc!r} is not an executable C compiler" if cc else "no C compiler (cc, gcc, clang) on PATH"
    warnings.warn(f"lazyfuse: {why}, so the 'cpu' device runs its kernels through the Triton interpreter, "
                  "which is much slower. Install gcc or clang, or point LAZYFUSE_CC at a C compiler.",
                  RuntimeWarning, stacklevel=2)
    return TritonBackend(interpreted=True)


class InterpreterDevice(Device):
    kind = "interpreter"
    supports_graphs = False

    def _make_backend(self):
        return TritonBackend(interpreted=True)


class CudaGraph:
    """A captured ``torch.cuda.CUDAGraph``, plus the host record of its launches: the buffers
    they bind (kept alive) and the random-stream words each replay advances."""

    __slots__ = ("graph", "host")

    def __init__(self, graph, host: HostGraph):
        self.graph = graph
        self.host = host

    def __len__(self):
        return len(self.host)

    def advance_rng(self, n: int) -> None:
        self.host.advance_rng(n)   # edits the staging words and pushes them before the replay


class CudaDevice(Device):
    """Triton kernels on the current torch stream of one GPU (HIP through a ROCm torch build).

    Graph capture runs on a side stream with a private torch graph pool; the launches of the
    capture run are recorded by ``torch.cuda.CUDAGraph`` and replayed with one call."""

    kind = "cuda"
    supports_graphs = True

    def __init__(self, name, torch_device):
        self.index = torch_device.index
        self._graph_pool = None
        self._graph = None
        self._stream_ctx = None
        super().__init__(name, torch_device)

    def _make_backend(self):
        return TritonBackend(interpreted=False)

    def launch(self, step, bufs, meta) -> None:
        if torch.cuda.current_device() != self.index:
            with torch.cuda.device(self.index):
                return super().launch(step, bufs, meta)
        super().launch(step, bufs, meta)

    def graph_start_capture(self) -> None:
        super().graph_start_capture()
        try:
            if self._graph_pool is None:
                self._graph_pool = torch.cuda.graph_pool_handle()
            side = torch.cuda.Stream(self.torch_device)
            side.wait_stream(torch.cuda.current_stream(self.torch_device))
            self._stream_ctx = torch.cuda.stream(side)
            self._stream_ctx.__enter__()
            self._graph = torch.cuda.CUDAGraph()
            self._graph.capture_begin(pool=self._graph_pool, capture_error_mode="thread_local")
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
        try:
            graph = self._end_capture()
        except BaseException as e:
            super().graph_abort()
            raise CaptureError(f"CUDA graph capture failed to close on {self.name}: {e}") from e
        return CudaGraph(graph, super().graph_stop_capture())

    def graph_abort(self) -> None:
        try:
            self._end_capture()
        except Exception:  # noqa: BLE001 (an invalidated capture: nothing to keep)
            pass
        super().graph_abort()

    def graph_replay(self, graph) -> None:
        graph.graph.replay()

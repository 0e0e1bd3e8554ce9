"""Devices: where buffers live, which backend compiles and launches, and the graph protocol.

Every device implements the graph protocol the capture layer uses (SPEC semantics 5-6):
``graph_prepare`` (persistent pool), ``sync`` (drain, allowed while capturing),
``graph_start_capture``, ``graph_stop_capture`` (returns the recorded graph) and
``graph_replay``. The runtime knows capture only through this protocol.
"""
from __future__ import annotations

import contextlib
import functools
import os
import threading

import torch

from ..errors import CaptureError, DeviceError
from .engine import Engine
from .pool import MemoryPool
from .stats import Stats


class HostGraph:
    """A recorded launch list: replay calls each prepared launch in order, nothing else.

    ``keepalive`` pins every buffer and metadata block the launches bind for the graph's
    lifetime; ``rng`` lists the metadata words holding random-stream offsets, which each
    replay advances so random numbers differ from one replay to the next.
    """

    __slots__ = ("launches", "count", "keepalive", "rng")

    def __init__(self, launches, count, keepalive, rng):
        self.launches = launches    # callables; a backend may have merged several kernels into one
        self.count = count          # kernel launches recorded
        self.keepalive = keepalive
        self.rng = rng

    def __len__(self):
        return self.count

    def advance_rng(self, n: int) -> None:
        for meta, words in self.rng:
            for w in words:
                meta.words[w] += n
            meta.push()


class Device:
    """Where buffers live and kernels run (``lf.device("cpu" | "cuda:N" | "interpreter")``): its
    memory pool, backend, engine (the pending queue) and the graph protocol."""
    kind = "?"
    supports_graphs = False

    def __init__(self, name: str, torch_device: torch.device):
        self.name = name
        self.torch_device = torch_device
        self.stats = Stats()
        self.pool = MemoryPool(name, self._raw_alloc, self.stats)
        self.backend = self._make_backend()
        self.engine = Engine(self)
        self.capturing = False
        self._recording = None
        self._lock = threading.RLock()

    def __repr__(self):
        return f"lf.device({self.name!r})"

    def _raw_alloc(self, nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8, device=self.torch_device)

    def _make_backend(self):
        raise NotImplementedError

    # -- launching ------------------------------------------------------------------------------
    def call(self, step, bufs, meta):
        """The launch of ``step`` on ``bufs`` as a call to make later (recorded by an open capture).

        The engine makes every call of a plan before it runs the first: a large matmul evicts
        the interpreter's own working set from the caches, so Python run between two launches
        costs several times more after one (~100 us against ~10 on the transformer block)."""
        thunk = self.backend.thunk(step, bufs, meta)
        if self._recording is not None:
            self._recording.append((thunk, bufs, meta, step.rng_words))
        return thunk

    def launching(self):
        """The context the calls are made and run in (a GPU: its own device current)."""
        return contextlib.nullcontext()

    def raise_deferred_errors(self) -> None:
        """Errors a device found without a host sync (see ``CudaDevice``), raised at a user
        drain; host devices check at launch and have none."""

    # -- graph protocol -------------------------------------------------------------------------
    def graph_prepare(self) -> None:
        self.engine.start_tracking()   # first: dropped plans free their metadata to the shared cache
        self.pool.prepare()

    def sync(self) -> None:
        self.engine.drain_for_capture()

    def graph_start_capture(self) -> None:
        if not self.supports_graphs:
            raise CaptureError(f"device {self.name} has no graph support")
        with self._lock:
            if self.capturing:
                raise CaptureError(f"a capture is already open on {self.name}: captures cannot nest")
            self.capturing = True
            self._recording = []
            self.pool.begin_capture()
            self.engine.reserve_for_capture()

    def graph_stop_capture(self):
        """Close the capture. Always leaves the device out of capture mode, even on error."""
        with self._lock:
            launches = self._recording or []
            self._recording = None
            self.capturing = False
            self.pool.end_capture()
            self.engine.release_from_capture()
            metas = self.engine.take_captured_metadata()
            self.engine.stop_tracking()
        rng = tuple((m, w) for _, _, m, w in launches if w)
        thunks = [t for t, _, _, _ in launches]
        batch = getattr(self.backend, "batch", None)
        return HostGraph(tuple(batch(thunks) if batch else thunks), len(thunks),
                         (tuple((b, m) for _, b, m, _ in launches), metas), rng)

    def graph_abort(self) -> None:
        """Leave prepare/capture mode after a failure."""
        with self._lock:
            self._recording = None
            self.capturing = False
            self.pool.end_capture()
            self.engine.release_from_capture()
            self.engine.captured_plans = []
            self.engine.stop_tracking()

    def graph_replay(self, graph) -> None:
        for launch in graph.launches:
            launch()


class CpuDevice(Device):
    kind = "cpu"
    supports_graphs = True
    threads = None   # the ThreadBudget of the C kernels (none when the interpreter stands in)

    def _make_backend(self):
        from ..codegen.c_compile import usable
        why = usable()
        if why is not None:   # no working C compiler: the same kernels, run by the Triton interpreter
            from .triton_devices import interpreter_fallback
            return interpreter_fallback(why)
        from .cpu import CpuBackend, omp_set_num_threads
        from .threads import ThreadBudget
        self.threads = ThreadBudget(omp_set_num_threads())
        return CpuBackend(self.pool)

    def launching(self):
        """Kernels run on the cores other processes leave free (``runtime/threads.py``)."""
        if self.threads is not None:
            self.threads.apply()
        return contextlib.nullcontext()

    def graph_replay(self, graph) -> None:
        if self.threads is not None:
            self.threads.apply()
        super().graph_replay(graph)


_devices: dict = {}
_lock = threading.Lock()


def device(spec=None) -> Device:
    """``lf.device``: "cpu", "cuda", "cuda:N", "interpreter", or None: ``LAZYFUSE_DEVICE`` if set,
    else cuda when torch sees a GPU, else cpu."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        spec = os.environ.get("LAZYFUSE_DEVICE") or ("cuda" if _gpu_visible() else "cpu")
    if isinstance(spec, torch.device):
        spec = str(spec)
    if not isinstance(spec, str):
        raise DeviceError(f"device={spec!r} is not a device; pass 'cpu', 'cuda', 'cuda:N' or 'interpreter'")
    name = spec.strip().lower()
    if name == "cuda":
        name = f"cuda:{torch.cuda.current_device()}" if torch.cuda.is_available() else "cuda:0"
    with _lock:
        dev = _devices.get(name)
        if dev is None:
            dev = _devices[name] = _create(name, spec)
        return dev


@functools.lru_cache(maxsize=None)
def _gpu_visible() -> bool:
    """torch.cuda.is_available(), asked once: every factory call without ``device=`` resolves the
    default device, and the question costs ~15 us each time."""
    return torch.cuda.is_available()


def _create(name: str, spec: str) -> Device:
    if name == "cpu":
        return CpuDevice("cpu", torch.device("cpu"))
    if name == "interpreter":
        from .triton_devices import InterpreterDevice
        return InterpreterDevice("interpreter", torch.device("cpu"))
    if name.startswith("cuda:") and name[5:].isdigit():
        if not torch.cuda.is_available():
            raise DeviceError(f"device={spec!r}: torch sees no CUDA/HIP GPU here; use 'cpu' or 'interpreter'")
        index = int(name[5:])
        if index >= torch.cuda.device_count():
            raise DeviceError(f"device={spec!r}: only {torch.cuda.device_count()} GPU(s) are visible")
        from .triton_devices import CudaDevice
        return CudaDevice(name, torch.device(name))
    raise DeviceError(f"device={spec!r} is not a device lazyfuse knows; pass 'cpu', 'cuda', 'cuda:N' or "
                      "'interpreter'")


def all_devices() -> list:
    with _lock:
        return list(_devices.values())

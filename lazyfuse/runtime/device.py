"""Devices: where buffers live, which backend compiles and launches, and the graph protocol.

Every device implements the graph protocol the capture layer uses (docs/semantics.md, Capture):
``graph_prepare`` (persistent pool), ``sync`` (drain, allowed while capturing),
``graph_start_capture``, ``graph_stop_capture`` (returns the recorded graph) and
``graph_replay`` (``replay_alone``: pending writes drained first, in the same call). The
runtime knows capture only through this protocol.
"""
from __future__ import annotations

import contextlib
import functools
import threading

import torch

from .. import config
from ..errors import CaptureError, DeviceError
from .capture_tracking import CaptureTracking
from .collectives import settle
from .engine import Engine
from .pool import MemoryPool
from .stats import Stats


class HostGraph:
    """A recorded launch list: replay calls each prepared launch in order, nothing else.

    ``records`` pins every buffer and metadata block the launches bind for the graph's
    lifetime and says what each launch was: ``(kernel name, buffers, slot kinds, metadata)``,
    or the ``HostGraph`` of a graph replayed inside this capture; ``metas`` is the launch
    metadata the graph took from the plans it ran. ``rng`` lists, per metadata block, the
    (seed, offset) words of its random streams: the recorded kernels read their generator
    state there, and each replay writes the generator's state into them (``draw_rng``), as
    torch's graph-safe generator hands a captured graph a device-side seed and offset per replay.
    """

    __slots__ = ("launches", "run", "thunks", "count", "records", "metas", "rng", "threaded")

    def __init__(self, launches, thunks, records, metas, rng, threaded=True):
        self.launches = launches    # callables; a backend may have merged several kernels into one
        # all of them as one call: most host graphs batch into a single launch
        self.run = launches[0] if len(launches) == 1 else functools.partial(_run_all, launches)
        self.threaded = threaded    # whether a launch may open an OpenMP region (the thread budget matters)
        self.thunks = thunks        # one callable per kernel launch, as recorded (replayed inside a capture)
        self.count = len(thunks)
        self.records = records
        self.metas = metas
        self.rng = rng

    def intermediates(self) -> list:
        """The buffers of the plans' intermediates (no tensor sees them: only the launches do)."""
        seen = {}
        for rec in self.records:
            if not isinstance(rec, HostGraph):
                for buf, kind in zip(rec[1], rec[2]):
                    if kind == "temp":
                        seen[id(buf)] = buf
        return list(seen.values())

    def __len__(self):
        return self.count

    @property
    def host(self) -> "HostGraph":
        """The launch record itself (a GPU graph keeps one as its ``host``)."""
        return self

    def bind_rng(self, base: int) -> None:
        """At capture: each stream's offset relative to the generator's offset ``base`` when the
        capture run began (several draws of one closure keep their distance)."""
        self.rng = tuple((meta, tuple((sw, ow, int(meta.words[ow]) - base) for sw, ow in words))
                         for meta, words in self.rng)

    def draw_rng(self, seed: int, base: int) -> None:
        """Before a replay: the streams continue the generator at ``base`` under ``seed``, so a
        replay draws the numbers an eager run of the closure would draw now."""
        for meta, streams in self.rng:
            words = meta.words
            for sw, ow, rel in streams:
                words[sw] = seed
                words[ow] = base + rel
            meta.push()


def _run_all(launches) -> None:
    for launch in launches:
        launch()


class Device:
    """Where buffers live and kernels run (``lf.device("cpu" | "cuda:N" | "interpreter")``): its
    memory pool, backend, engine (the pending queue), capture tracking and the graph protocol."""
    kind = "?"
    supports_graphs = False
    stream = None   # the asynchronous launch stream (runtime/stream.py; the cpu device's only)

    def __init__(self, name: str, torch_device: torch.device):
        self.name = name
        self.torch_device = torch_device
        self.stats = Stats()
        self.pool = MemoryPool(name, self._raw_alloc, self.stats)
        self.backend = self._make_backend()
        self.engine = Engine(self)
        self.capture_tracking = CaptureTracking(self.engine)
        self.capturing = False
        self.capture_thread = None   # the thread whose lf.capture is under way (any phase), else None
        self._recording = None
        self._lock = threading.RLock()

    def __repr__(self):
        return f"lf.device({self.name!r})"

    @property
    def type(self) -> str:
        """torch.device's ``type``: ``'cpu'``, ``'cuda'`` or ``'interpreter'`` (this device's kind)."""
        return self.kind

    @property
    def index(self):
        """torch.device's ``index``: the GPU number of a ``cuda:N`` device, None otherwise."""
        return self.torch_device.index if self.kind == "cuda" else None

    # ``with lf.device("interpreter"):`` makes it the default of every factory and ``lf.device()``
    # in this thread (torch's ``with torch.device(...)``); nested blocks restore the outer one
    def __enter__(self) -> "Device":
        _default.stack = getattr(_default, "stack", ()) + (self,)
        return self

    def __exit__(self, *exc) -> None:
        _default.stack = _default.stack[:-1]

    def _raw_alloc(self, nbytes: int) -> torch.Tensor:
        return torch.empty(nbytes, dtype=torch.uint8, device=self.torch_device)

    def _make_backend(self):
        raise NotImplementedError

    # -- launching ------------------------------------------------------------------------------
    def call(self, step, bufs, meta, wrap=None):
        """The launch of ``step`` on ``bufs`` as a call to make later (recorded by an open capture),
        inside ``wrap`` if given (the waits for collectives in flight: ``collectives.Schedule``).

        The engine makes every call of a plan before it runs the first: a large matmul evicts
        the interpreter's own working set from the caches, so Python run between two launches
        costs several times more after one (~100 us against ~10 on the transformer block)."""
        thunk = self.backend.thunk(step, bufs, meta)
        if wrap is not None:
            thunk = wrap(thunk)
        if self._recording is not None:
            self._recording.append((thunk, (step.name, bufs, tuple(k for k, _ in step.slots), meta),
                                    step.rng_words))
        return thunk

    def launching(self):
        """The context the calls are made and run in (a GPU: its own device current)."""
        return contextlib.nullcontext()

    def synchronize(self) -> None:
        """Until every launch enqueued on the device's stream ran (``lf.sync``); a failure the
        stream found is raised here (``LaunchStream.synchronize``)."""
        if self.stream is not None:
            self.stream.synchronize()

    def host_read(self, buffer) -> None:
        """Before the host reads ``buffer``'s memory: the queued launch that writes it ran."""
        if self.stream is not None:
            self.stream.wait_read(buffer)

    def host_write(self, buffer) -> None:
        """Before the host writes ``buffer``'s memory: no queued launch binds it any more."""
        if self.stream is not None:
            self.stream.wait_write(buffer)

    def raise_deferred_errors(self) -> None:
        """Errors a device found without a host sync (see ``CudaDevice``), raised at a user
        drain; host devices check at launch and have none."""

    def drain(self, reason: str) -> None:
        """A user-visible drain (``lf.sync``, a host read, named by ``reason``): refused while a
        capture is open. ``sync`` below is the capture layer's, allowed inside one."""
        self.engine.sync(reason)

    def poison(self, storage, error) -> None:
        """Every later read of ``storage`` raises ``error`` (a graph output a replay overwrote)."""
        self.engine.poison(storage, error)

    def alias_storage(self, storage):
        """A storage of its own on ``storage``'s realized buffer, so it alone can be poisoned;
        None when ``storage`` holds no realized value."""
        from ..ir.node import Node, Op
        from .engine import Storage
        if storage.current.op is not Op.BUFFER:
            return None
        alias = Storage(self.engine, Node(Op.BUFFER, (), storage.dtype, storage.shape, storage.buffer))
        alias.buffer = storage.buffer
        return alias

    # -- graph protocol -------------------------------------------------------------------------
    @contextlib.contextmanager
    def capture_under_way(self):
        """Marks ``lf.capture``'s whole run (prepare, warmup, capture, close) on this device. A
        second capture meanwhile is refused before it touches anything — a nested one (say a
        capture-on-first-call helper inside a closure) would otherwise close the outer's
        persistent pool mid-warmup — so the outer goes on intact."""
        me = threading.get_ident()
        with self._lock:
            owner = self.capture_thread
            if owner is not None:
                where = "in this thread: captures cannot nest" if owner == me else \
                    "in another thread: one capture at a time per device"
                raise CaptureError(f"a capture is already under way on {self.name} ({where}); capture the inner "
                                   "closure before (or after) the outer one and replay it inside instead")
            self.capture_thread = me
        try:
            yield
        finally:
            self.capture_thread = None

    def graph_prepare(self) -> None:
        self.capture_tracking.start()   # first: dropped plans free their metadata to the shared cache
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
            metas = self.capture_tracking.take_metadata()
            self.capture_tracking.stop()
        rng = tuple((rec[3], w) for _, rec, w in launches if w)
        thunks = tuple(t for t, _, _ in launches)
        records = tuple({id(rec): rec for _, rec, _ in launches}.values())   # a nested graph's record once
        return HostGraph(tuple(self.backend.batch(thunks)), thunks, records, metas, rng,
                         self.backend.uses_threads(thunks))

    def graph_abort(self) -> None:
        """Leave prepare/capture mode after a failure."""
        with self._lock:
            self._recording = None
            self.capturing = False
            self.pool.end_capture()
            self.engine.release_from_capture()
            self.capture_tracking.abort()

    def graph_replay(self, graph) -> None:
        try:
            graph.run()
        except BaseException:
            settle(graph.thunks)   # no collective of the replay may still be writing when it raises
            raise

    def replay_alone(self, graph) -> None:
        """A replay outside any capture, in one call (a decode replay is ~2 us: each Python call
        weighs): pending writes to its inputs (``x.copy_(new)``) land first, then ``graph_replay``."""
        engine = self.engine
        if engine.pending or engine.pending_ops:
            engine.drain_for_capture()
        self.graph_replay(graph)

    def graph_replay_into_capture(self, host: HostGraph) -> None:
        """A graph replayed while a capture is open on this device: its launches run now and
        join the open recording (a host graph's launch list; on a GPU the kernel launches are
        captured into the outer graph), so the outer graph replays them too. The outer keeps
        the inner's record — its buffers and metadata — alive."""
        with self.launching():
            try:
                for thunk in host.thunks:
                    thunk()
                    self._recording.append((thunk, host, ()))
            except BaseException:
                settle(host.thunks)
                raise


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
        from .cpu import CpuBackend, omp_set_num_threads, thread_count_setter
        from .threads import ThreadBudget
        self.threads = ThreadBudget(thread_count_setter(), set_omp=omp_set_num_threads())
        from .stream import LaunchStream
        self.stream = LaunchStream(self)   # (C kernels only: the interpreter's launches hold the GIL)
        return CpuBackend(self.pool)

    def launching(self):
        """Kernels, and torch's calls among them, run on the cores other processes leave free
        (``runtime/threads.py``)."""
        if self.threads is None:
            return contextlib.nullcontext()
        return self.threads.launches()

    def graph_prepare(self) -> None:
        self.synchronize()   # a capture's launches run synchronously, after the queued ones
        super().graph_prepare()

    def graph_replay(self, graph) -> None:
        self.synchronize()   # (a replay rewrites its buffers from the host's thread)
        if graph.threaded and self.threads is not None:   # serial kernels only: no region to size
            self.threads.apply()
            with self.threads.torch_calls():
                graph.run()
        else:
            graph.run()


_devices: dict = {}
_lock = threading.Lock()
_default = threading.local()   # .stack: the devices of the open ``with lf.device(...)`` blocks
_chosen = None                 # lf.set_default_device's, else None


def set_default_device(spec) -> None:
    """``lf.set_default_device(d)``: the device of factories without ``device=`` (torch's
    ``torch.set_default_device``); None restores the automatic choice (``lf.device()``)."""
    global _chosen
    _chosen = None if spec is None else device(spec)


def get_default_device() -> "Device":
    """The device a factory without ``device=`` uses (torch's ``torch.get_default_device``)."""
    return device(None)


def device(spec=None) -> Device:
    """``lf.device``: "cpu", "cuda", "cuda:N", "interpreter", or None: the innermost open
    ``with lf.device(...)`` block's, else ``lf.set_default_device``'s, else ``LAZYFUSE_DEVICE``
    if set, else cuda when torch sees a GPU, else cpu."""
    if isinstance(spec, Device):
        return spec
    if spec is None:
        stack = getattr(_default, "stack", None)
        if stack:
            return stack[-1]
        if _chosen is not None:
            return _chosen
        spec = config.DEVICE.get() or ("cuda" if _gpu_visible() else "cpu")
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

"""The cpu device's asynchronous launch stream (``LAZYFUSE_ASYNC=1``; off by default).

With the stream on, a drain on the cpu device hands its launch list to one worker thread and
returns: the host goes on recording the next work while the kernels run, as a CUDA stream lets
it. The C kernels (ctypes) and torch's calls (matmuls, externs) release the GIL while they run,
so the two threads overlap; the worker needs the GIL only between launches. Launches run in the
order their drains enqueued them, so a drain's launches may read what an earlier drain's write.

Only host access to buffer memory waits, and only for what it touches:

* a host read of a buffer (``numpy()``, ``item()``, printing, a frontend read, an eager extern)
  waits for the launch that last writes it (``wait_read``), not for the rest of its drain;
* a host write into a buffer (an upload into a pool block, ``copy_`` from host data) waits for
  every queued drain that binds its block (``wait_write``): a block the host freed while a queued
  launch still uses it is handed out again at once (stream-ordered reuse, as torch's CUDA caching
  allocator), so a host write into it must wait, a later drain's launch need not;
* launch metadata is rewritten only after the queued drains that read it (``wait_metas``);
* ``lf.sync(dev)``, exports of buffer memory to a peer (DLPack), the build path (compiling and
  tuning read the bound buffers), collectives, captures and replays wait for everything
  (``synchronize``): those stay synchronous.

A launch that fails on the worker (a gather's index out of range, an extern's exception) keeps
the meaning it has without the stream: what needed it is not computed, everything else is. The
rest of that drain is skipped; so is every later queued drain that binds a buffer the failure
left unwritten (each adds its own results to that set). The host learns of it at its next wait
(CUDA's asynchronous errors): the values left unwritten become ERROR leaves, so reading one
raises the original exception's type (chained from it), and pending work that reads one fails
at its drain; ``lf.sync`` raises the original exception itself, once.

Two cores' worth of threads: while the host records, the worker's launches (C kernels and
torch's calls alike) run on one thread fewer than the thread budget's count (at least one), so the
host thread keeps a core of its own (an OpenMP region whose team waits for a descheduled thread
waits milliseconds: runtime/threads.py); while the host waits for the stream, on the whole count.

The worker holds the GIL between two launches only; CPython hands the GIL to a waiting thread
after its switch interval (5 ms by default), far longer than most launches, so while the
stream is on the interval is ``SWITCH_INTERVAL_S`` (set back when it goes off).
"""
from __future__ import annotations

import atexit
import ctypes
import sys
import threading
import weakref
from collections import deque

from .. import config
from ..codegen import c_compile
from ..ir.node import Op

# the GIL's switch interval while the stream is on: the worker waits at most this long for the
# GIL after a launch returns (a nanoGPT step makes ~140 launches; at 5 ms the worker ran only
# while the host waited, at 0.2 ms it ran beside the recording)
SWITCH_INTERVAL_S = 2e-4

# a drain of fewer launches runs on the host when nothing is queued: handing it to the worker and
# waiting for it (a small drain's host read follows at once) costs more CPU time than it overlaps
MIN_LAUNCHES = 16

_streams: "weakref.WeakSet[LaunchStream]" = weakref.WeakSet()

_LAUNCH_THREADS = """
extern __thread int lf_launch_threads;   /* (codegen/c_compile.py) */
void lf_set_launch_threads(int n) { lf_launch_threads = n; }
"""


def launch_thread_setter():
    """Sets the calling thread's ``lf_launch_threads``: the count its kernels' regions ask for
    (0: the budget's), as ``lf_launch_on`` does for one launch."""
    fn = c_compile.build(_LAUNCH_THREADS, what="stream launch-thread setter").lf_set_launch_threads
    fn.argtypes = [ctypes.c_int]
    fn.restype = None
    return fn


class Drain:
    """One drain's launches on the stream: ``calls`` run in order, the first at position
    ``base`` of the stream, the stream at ``end`` after the last."""

    __slots__ = ("calls", "base", "end", "blocks", "ready", "metas", "results")

    def __init__(self, calls, base, blocks, ready, metas, results):
        self.calls, self.base, self.end = calls, base, base + len(calls)
        self.blocks = blocks     # the memory it binds (pool blocks; an imported buffer itself)
        self.ready = ready       # memory it writes -> the stream position after its last write there
        self.metas = metas       # its launch metadata (one block per step)
        # per root: (step index, memory, a weak reference to the BUFFER leaf its value is): weak,
        # so a queued drain never keeps a result's buffer out of the pool (a capture's warmup
        # drops its outputs, and the capture run must find their blocks kept)
        self.results = results


def memory_of(buf):
    """What identifies ``buf``'s memory: its pool block, or the buffer itself (imported memory)."""
    return getattr(buf, "block", buf)


class LaunchStream:
    """The worker thread of one cpu device and its queue of drains (see the module docstring)."""

    def __init__(self, device):
        self.device = device
        self.queued = 0          # launches enqueued so far
        self.completed = 0       # launches run (or skipped after a failure) so far, in order
        self.inflight = deque()  # the drains not known to be done, oldest first (host side)
        self._todo = deque()     # the drains the worker has not started
        self._cv = threading.Condition(threading.Lock())
        self._waiters = 0        # host threads waiting for ``completed``
        self._worker = None
        self._raw = object()     # the knob's text last read (parsed again only when it changes)
        self._on = False
        self._saved_interval = None
        # failures found by the worker, not yet told to the host: (exception, the BUFFER leaves
        # and the memory it left unwritten)
        self.failures = []
        self._failed_memory = set()   # memory a failure left unwritten (worker side, until delivered)
        self.unreported = []          # delivered failures ``lf.sync`` has not raised yet
        _streams.add(self)

    # -- the knob --------------------------------------------------------------------------------
    def enabled(self) -> bool:
        """``LAZYFUSE_ASYNC``, looked at each drain (one dict lookup, ``config.Knob.raw``), parsed
        when it changed."""
        raw = config.ASYNC.raw()
        if raw != self._raw:
            on = config.ASYNC.get()
            self._raw = raw
            if on != self._on:
                self._on = on
                self._switch_interval(on)
                if not on:
                    self.stop()   # (the synchronous drains from now on run after the queued ones)
        return self._on

    def _switch_interval(self, on: bool) -> None:
        if on:
            self._saved_interval = sys.getswitchinterval()
            sys.setswitchinterval(min(self._saved_interval, SWITCH_INTERVAL_S))
        elif self._saved_interval is not None:
            sys.setswitchinterval(self._saved_interval)
            self._saved_interval = None

    def takes(self, plan) -> bool:
        """Whether ``plan``'s launches go on the stream: it is on, no capture is open (a capture
        records its launches as they run), and the plan has no collectives (their waits order
        them against other ranks' work), and it is not a small drain with nothing queued
        (``MIN_LAUNCHES``)."""
        return (self.enabled() and not self.device.capturing and plan.waits is None
                and (len(plan.steps) >= MIN_LAUNCHES or self.completed < self.queued))

    def runs_inline(self, plan) -> bool:
        """Whether a steady-state drain of ``plan`` launches on the host thread with nothing to
        wait for: no launch queued, no failure to deliver, and the stream does not take it."""
        return self.completed >= self.queued and not self.failures and not self.takes(plan)

    # -- the host side -----------------------------------------------------------------------------
    def submit(self, calls, blocks, ready_steps, metas, results) -> None:
        """Enqueue one drain's ``calls``; ``ready_steps`` maps memory it writes to the index of its
        last call writing there."""
        self._prune()
        base = self.queued
        drain = Drain(calls, base, blocks, {m: base + k + 1 for m, k in ready_steps.items()}, metas, results)
        self.inflight.append(drain)
        with self._cv:
            self.queued = drain.end
            self._todo.append(drain)
            if self._worker is None:   # (it ended when its queue ran empty: ``_run``)
                self._worker = threading.Thread(target=self._run, name=f"lazyfuse stream ({self.device.name})",
                                                daemon=True)
                self._worker.start()

    def busy(self) -> bool:
        return self.completed < self.queued

    def wait_read(self, buf) -> None:
        """Until the last queued write of ``buf``'s memory ran."""
        mem = memory_of(buf)
        for drain in reversed(self.inflight):
            at = drain.ready.get(mem)
            if at is not None:
                self._wait_until(at)
                break
        self._deliver_if_failed()

    def wait_write(self, buf) -> None:
        """Until no queued launch binds ``buf``'s memory (the host is about to write it)."""
        mem = memory_of(buf)
        for drain in reversed(self.inflight):
            if mem in drain.blocks:
                self._wait_until(drain.end)
                break
        self._deliver_if_failed()

    def wait_metas(self, metas) -> None:
        """Until no queued launch reads the launch metadata ``metas`` (about to be rewritten)."""
        for drain in reversed(self.inflight):
            if drain.metas is metas:
                self._wait_until(drain.end)
                break

    def synchronize(self) -> None:
        """Until every queued launch ran; then a failure no ``synchronize`` raised yet is raised
        (its original exception), once: by ``lf.sync``, or a drain that must wait for the queue."""
        if self.completed >= self.queued and self._worker is None and not self.failures and not self.unreported:
            return   # (idle: a replay pays this check only)
        self._wait_until(self.queued)
        self._join_worker()
        self._prune()
        self._deliver_if_failed()
        if self.unreported:
            error = self.unreported[0]
            self.unreported.clear()
            raise error

    def _wait_until(self, position: int) -> None:
        if self.completed >= position:
            return
        with self._cv:
            self._waiters += 1
            try:
                while self.completed < position:
                    self._cv.wait()
            finally:
                self._waiters -= 1

    def _prune(self) -> None:
        inflight, done = self.inflight, self.completed
        while inflight and inflight[0].end <= done:
            inflight.popleft()

    def _deliver_if_failed(self) -> None:
        if self.failures:
            self.deliver()

    def deliver(self) -> None:
        """Tell the host of the worker's failures: once every queued drain has run or been skipped
        (so the set of memory left unwritten is final), each value left unwritten becomes an ERROR
        leaf holding the failure's exception, as a failed synchronous drain poisons its roots."""
        self._wait_until(self.queued)
        engine = self.device.engine
        with self._cv:
            failures, self.failures = self.failures, []
            self._failed_memory.clear()
        with engine.lock:
            for error, leaves, _ in failures:
                for ref in leaves:
                    leaf = ref()
                    if leaf is not None and leaf.op is Op.BUFFER:
                        # (the leaf itself: pending work recorded on it since sees the failure too)
                        leaf.op, leaf.arg = Op.ERROR, error
                        engine.poisoned.add(leaf)
                self.unreported.append(error)

    # -- the worker ------------------------------------------------------------------------------
    def _run(self) -> None:
        """Run the queued drains in order; end when the queue runs empty (``submit`` starts a new
        worker for the next drain). An idle worker would keep its OpenMP team: while that exists,
        libgomp manages more threads than there are cores and cuts every team's spin-wait, so each
        parallel region of the host's own launches (and torch's) wakes its threads from sleep: a
        replayed nanoGPT step took 28 ms instead of 14.5 after the stream had run."""
        cv = self._cv
        budget = self.device.threads
        set_kernel_threads, set_torch_threads = launch_thread_setter(), budget._set_omp
        while True:
            with cv:
                if not self._todo:
                    self._worker = None
                    return
                drain = self._todo.popleft()
            with self.device.launching():
                self._run_drain(drain, budget, set_kernel_threads, set_torch_threads)

    def _run_drain(self, drain: Drain, budget, set_kernel_threads, set_torch_threads) -> None:
        failed = self._failed_memory
        if failed and not failed.isdisjoint(drain.blocks):
            # it binds memory an earlier failure left unwritten: none of it runs
            self._failed(drain, 0, self._failure_of(drain.blocks))
            return
        threads = None
        for at, call in enumerate(drain.calls):
            want = budget.threads if self._waiters else max(1, budget.threads - 1)
            if want != threads:
                threads = want
                set_kernel_threads(want)
                set_torch_threads(want)   # (this thread's OpenMP count: launching() sets torch's back)
            try:
                call()
            except BaseException as error:   # noqa: BLE001 (the host raises it at its next wait)
                self._failed(drain, at, error)
                return
            self.completed += 1
            if self._waiters:
                with self._cv:
                    self._cv.notify_all()

    def _failure_of(self, blocks) -> BaseException:
        """The exception of the earliest failure that left one of ``blocks`` unwritten."""
        return next(error for error, _, memory in self.failures if not memory.isdisjoint(blocks))

    def _failed(self, drain: Drain, at: int, error: BaseException) -> None:
        """Launch ``at`` of ``drain`` failed (or the drain cannot run from ``at`` on): its results
        written from ``at`` on are left unwritten, and the rest of it is skipped."""
        lost = [(mem, leaf) for step, mem, leaf in drain.results if step >= at]
        memory = {mem for mem, _ in lost}
        with self._cv:
            self.failures.append((error, [leaf for _, leaf in lost], memory))
            self._failed_memory |= memory
            self.completed = drain.end
            self._cv.notify_all()


    def stop(self) -> None:
        """Until what is queued ran and the worker thread ended (at exit: a thread that ran OpenMP
        regions still alive while the process tears its libraries down can crash it)."""
        self._wait_until(self.queued)
        self._join_worker()

    def _join_worker(self) -> None:
        """Until the worker, its queue run empty, has ended (it is ending: nothing else is queued)."""
        with self._cv:
            worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join()


def stop_all() -> None:
    """At exit: every stream's queued launches run (the process ends after its work, as a CUDA
    context's does; failures are not raised here), and its worker ends."""
    for stream in list(_streams):
        stream.stop()


atexit.register(stop_all)

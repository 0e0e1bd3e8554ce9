"""Issue 7, item 4: threads.

The rule (README, "Reliability"): a device has one pending queue and one engine lock. Threads
may share a device when every section that records, drains or reads on it runs under a lock
the threads share (``with lock: y = f(x); v = y.numpy()``); the values are then each thread's
own, whatever the interleaving of sections. Enforced where breaking it would compute a wrong
value: an op that read a pending tensor while another thread's drain realized it raises a
DeviceError (re-running the op on buffers written since would be silently wrong). An in-place
method (``add_``... ``copy_``, ``t[k] = v``) is atomic: it reads its target and records the
write under the engine lock, so in-place writes to one tensor from unlocked threads all land.
Refused with a CaptureError: recording from another thread while a capture is open on the
device, and replaying one Graph from two threads at once.

Every test joins its threads and fails if one is still alive: a straggler recording on the
shared ``cpu`` device would corrupt the next test's values or counters.
"""
from __future__ import annotations

import contextlib
import importlib
import re
import threading

import numpy as np
import pytest
import torch

import lazyfuse as lf

DEVICES = ["cpu", "interpreter"]


JOIN_S = 600   # generous: a loaded CI machine is slow, and a hang still fails


def join_all(threads) -> None:
    """Join ``threads``; fail the test if one has not finished (it would outlive the test)."""
    for t in threads:
        t.join(timeout=JOIN_S)
    assert not any(t.is_alive() for t in threads), "a thread hangs"


def start_thread(target, *args) -> threading.Thread:
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def run_threads(target, n, *args):
    errors = []

    def wrapped(k):
        try:
            target(k, *args)
        except BaseException as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)
    join_all([start_thread(wrapped, k) for k in range(n)])
    if errors:
        raise errors[0]


def worker_program(k, device, iters, shared, lock):
    """Each thread: its own random inputs, in-place writes, views, reductions and reads; each
    iteration's recording, drains and reads under the shared lock (the rule)."""
    rng = np.random.default_rng(k)
    for i in range(iters):
        a = rng.standard_normal((17, 33)).astype(np.float32)
        with lock:
            x = lf.tensor(a, device=device)
            w = shared * (k + 1)
            y = ((x * 2).tanh() + w[: x.shape[1]]).softmax(1)
            x[:, ::2].mul_(-1)
            z = x.sum(0) + y.amax(1).sum()
            if i % 3 == 0:
                lf.sync(device)
            got_y, got_z, got_x = y.numpy(), z.numpy(), x.numpy()   # reads drain: also under the lock
        t = torch.from_numpy(a)
        tw = torch.from_numpy(shared_values)[:33] * (k + 1)
        ty = ((t * 2).tanh() + tw).softmax(1)
        t[:, ::2] *= -1
        np.testing.assert_allclose(got_y, ty.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_z, (t.sum(0) + ty.amax(1).sum()).numpy(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got_x, t.numpy())


shared_values = np.linspace(-1, 1, 64, dtype=np.float32)


@pytest.mark.parametrize("device", DEVICES)
def test_threads_recording_and_draining_on_one_device_get_their_own_values(device):
    shared = lf.tensor(shared_values, device=device)      # read by every thread
    iters = 40 if device == "cpu" else 6
    run_threads(worker_program, 4, device, iters, shared, threading.Lock())
    np.testing.assert_array_equal(shared.numpy(), shared_values)


@pytest.mark.parametrize("user_lock", [True, False], ids=["user lock", "no lock"])
def test_threads_sharing_one_accumulator(user_lock):
    """In-place writes to one shared tensor from several threads add up exactly (the engine
    never loses or repeats a write), with or without the user's lock: in-place methods are
    atomic. (Whether this run hits the race is luck; the test below forces it.)"""
    iters = 40   # (interleavings make new plans: each compiles a kernel)
    acc = lf.zeros(8, dtype=lf.int64)
    lock = threading.Lock() if user_lock else contextlib.nullcontext()

    def add(k):
        for i in range(iters):
            with lock:
                acc.add_(lf.full((8,), k + 1, dtype=lf.int64))
                acc[k::4] += 1   # a write through a partial view (it reads the rest of the base)
                if i % 10 == 0:
                    lf.sync()
    run_threads(add, 4)
    assert acc.tolist() == [iters * (1 + 2 + 3 + 4) + iters] * 8


class WatchedLock:
    """The engine's lock, telling when the thread ``watched`` blocks on it: it sets ``contended``
    and then ``signal``."""

    def __init__(self, lock, signal: threading.Event):
        self.lock = lock
        self.signal = signal
        self.watched = None
        self.contended = False

    def acquire(self, blocking=True, timeout=-1):
        if self.lock.acquire(blocking=False):
            return True
        if threading.get_ident() == self.watched:
            self.contended = True
            self.signal.set()
        return self.lock.acquire(blocking, timeout)

    def release(self):
        self.lock.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


# (name, write(t, k) for writer k in 1, 2, the same on a torch tensor): each reads its target
IN_PLACE_WRITES = {
    "add_": lambda t, k: t.add_(k),
    "mul_ through a view": lambda t, k: t[1::2].mul_(k + 1),
    "sub_ with alpha": lambda t, k: t.sub_(k, alpha=2),
    "div_": lambda t, k: t.div_(k + 1),
    "fill_ of disjoint slices": lambda t, k: t[k::3].fill_(10 * k),
    "setitem of disjoint slices": lambda t, k: t.__setitem__(slice(k, None, 3), t[:1] + k),
    "copy_ of a view into the base": lambda t, k: t[: 3 * k].copy_(t[3:3 + 3 * k] * k),
    "iadd": lambda t, k: t.__iadd__(k),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("write", list(IN_PLACE_WRITES))
def test_an_in_place_write_racing_another_on_the_same_tensor_is_not_lost(monkeypatch, device, write):
    """The lost update, forced with events: writer A has read its target and is about to record
    the value that replaces it (paused in ``Storage.update``); writer B then writes the same
    storage. Without atomicity B's write lands and A's, computed from the old value, overwrites
    it. Here B blocks on the engine lock until A's write is recorded (the test waits until B
    either finished or blocked), then writes on top of it: the result is A's then B's, as
    torch computes it in that order. Nothing waits on a timer."""
    do = IN_PLACE_WRITES[write]
    dev = lf.device(device)
    a = np.arange(1.0, 10.0, dtype=np.float32)
    x = lf.tensor(a, device=dev)
    x.mul_(1)   # pending, so A's read is of a pending value (the harder case)
    engine_module = importlib.import_module("lazyfuse.runtime.engine")
    real_update = engine_module.Storage.update
    a_reads, go, b_blocked_or_done = threading.Event(), threading.Event(), threading.Event()
    watched = WatchedLock(dev.engine.lock, b_blocked_or_done)
    monkeypatch.setattr(dev.engine, "lock", watched)
    writer_a = []

    def update_paused_in_a(storage, node):
        if storage is x._storage and threading.get_ident() in writer_a and not a_reads.is_set():
            a_reads.set()
            assert go.wait(JOIN_S)
        real_update(storage, node)
    monkeypatch.setattr(engine_module.Storage, "update", update_paused_in_a)

    def first():
        writer_a.append(threading.get_ident())
        do(x, 1)

    def second():
        watched.watched = threading.get_ident()
        try:
            do(x, 2)
        finally:
            b_blocked_or_done.set()
    threads = [start_thread(first)]
    try:
        assert a_reads.wait(JOIN_S)
        threads.append(start_thread(second))
        assert b_blocked_or_done.wait(JOIN_S)
    finally:
        go.set()
        join_all(threads)
    assert watched.contended, "B wrote while A was between its read and its write"
    monkeypatch.undo()
    want = torch.from_numpy(a.copy())
    do(want, 1)
    do(want, 2)
    np.testing.assert_allclose(x.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("read", ["whole", "view"])
def test_an_op_reading_a_value_another_thread_drained_meanwhile_raises(monkeypatch, device, read):
    """The race the rule is about, forced with events: thread A's op reads ``y``, pending as an
    in-place ``mul_``; before A records, the main thread drains, which runs the ``mul_`` on
    ``y``'s buffer. Recording would re-run the ``mul_`` on that buffer (A would get 4·a + 1,
    not 2·a + 1): A gets a DeviceError instead, and the engine and every value stay intact."""
    dev = lf.device(device)
    a = np.arange(1.0, 9.0, dtype=np.float32)
    y = lf.tensor(a, device=dev)
    y.mul_(2)
    tensor_module = importlib.import_module("lazyfuse.tensor")
    real_result_tensor = tensor_module.result_tensor
    read_done, drained = threading.Event(), threading.Event()
    reader_ident = []

    def result_tensor_after_a_drain(device, node):   # A: sources read, not yet recorded
        if threading.get_ident() in reader_ident:
            read_done.set()
            assert drained.wait(JOIN_S)
        return real_result_tensor(device, node)
    monkeypatch.setattr(tensor_module, "result_tensor", result_tensor_after_a_drain)
    outcome = {}

    def reader():
        reader_ident.append(threading.get_ident())
        try:
            outcome["value"] = ((y if read == "whole" else y[::2]) + 1).numpy()
        except lf.DeviceError as e:
            outcome["error"] = e
    t = start_thread(reader)
    try:
        assert read_done.wait(JOIN_S)
        np.testing.assert_array_equal(y.numpy(), a * 2)   # the drain in between
    finally:
        drained.set()
        join_all([t])
    assert "value" not in outcome, f"computed {outcome.get('value')} from a value drained meanwhile"
    assert re.search(f"another thread drained {dev.name} .*serialise recording and draining under one lock",
                     str(outcome["error"]))
    monkeypatch.undo()
    np.testing.assert_array_equal(y.numpy(), a * 2)
    np.testing.assert_array_equal((y[::2] + 1).numpy(), a[::2] * 2 + 1)
    y.add_(1)
    lf.sync(dev)   # (threads reading a realized value need no lock: a pending one would be the race)
    run_threads(lambda k: np.testing.assert_array_equal((y * k).numpy(), (a * 2 + 1) * k), 2)


FOREIGN_OPS = {"x + 1": lambda x: x + 1, "x.add_(1)": lambda x: x.add_(1), "x.fill_(5)": lambda x: x.fill_(5),
               "x[1:] = 7": lambda x: x.__setitem__(slice(1, None), 7)}


@pytest.mark.parametrize("op", list(FOREIGN_OPS))
def test_recording_from_another_thread_during_a_capture_is_refused(op):
    """Refused before anything is recorded: a refused in-place write leaves ``x`` as it was, for
    its reads and for the ops that read it (a write through a view as much as a whole one)."""
    x = lf.tensor([1.0, 2.0, 3.0])
    lf.sync()
    inside, release = threading.Event(), threading.Event()
    outcome = {}

    def closure():
        y = x * 2
        if lf.device("cpu").capturing:
            inside.set()
            assert release.wait(JOIN_S)
        return y

    def other():
        if not inside.wait(JOIN_S):
            release.set()
            return
        try:
            FOREIGN_OPS[op](x)
        except lf.CaptureError as e:
            outcome["error"] = e
        finally:
            release.set()
    t = start_thread(other)
    try:
        g = lf.capture("cpu", closure)
    finally:
        inside.set()   # (if the capture failed before its capture run, ``other`` must not wait on)
        join_all([t])
    assert "error" in outcome and "another thread" in str(outcome["error"])
    assert g.replay().tolist() == [2.0, 4.0, 6.0]
    assert x.tolist() == [1.0, 2.0, 3.0]
    assert (x + 1).tolist() == [2.0, 3.0, 4.0]         # after the capture, every thread records again
    run_threads(lambda k: np.testing.assert_allclose((x * k).numpy(), [k, 2 * k, 3 * k]), 2)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("hardware", [True, False], ids=["host graph", "fallback"])
def test_replaying_one_graph_from_two_threads_at_once_is_refused(monkeypatch, hardware):
    device = lf.device("cpu" if hardware else "interpreter")
    x = lf.tensor([1.0, 2.0], device=device)
    inside, release = threading.Event(), threading.Event()
    blocking = {"on": False}

    def block():
        if blocking["on"]:
            inside.set()
            release.wait(JOIN_S)

    def closure():
        block()
        return x * 2
    g = lf.capture(device, closure)
    assert g.is_hardware is hardware
    if hardware:
        real = device.graph_replay

        def slow_replay(graph):
            block()
            real(graph)
        monkeypatch.setattr(device, "graph_replay", slow_replay)
    blocking["on"] = True
    first = start_thread(g.replay)
    try:
        assert inside.wait(JOIN_S)
        with pytest.raises(lf.CaptureError, match="another thread"):
            g.replay()
    finally:
        release.set()
        join_all([first])
    blocking["on"] = False
    assert g.replay().tolist() == [2.0, 4.0]

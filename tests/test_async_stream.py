"""The cpu device's asynchronous stream (``LAZYFUSE_ASYNC=1``, runtime/stream.py): drains queue
their launches on a worker thread and return; host reads and writes wait only for the launches
that touch their memory; failures on the worker poison what they left unwritten and ``lf.sync``
raises them; captures stay synchronous. Each test turns the stream on for itself."""
from __future__ import annotations

import contextlib
import os
import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from lazyfuse.runtime import stream as stream_module
from programs import ALL_DTYPES, COMMON, run_program, scaled

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

DEV = lf.device("cpu")
if DEV.stream is None:   # (no C compiler: the interpreter stands in, synchronously)
    pytest.skip("the cpu device runs the interpreter here: it has no stream", allow_module_level=True)


@contextlib.contextmanager
def stream_on(min_launches: int = 0):
    """The stream on for the block (hypothesis examples cannot take monkeypatch), taking drains of
    ``min_launches`` launches and more even when nothing is queued (the default: every drain, so
    these small programs exercise it); everything it queued has run after it."""
    saved, saved_min = os.environ.get("LAZYFUSE_ASYNC"), stream_module.MIN_LAUNCHES
    os.environ["LAZYFUSE_ASYNC"] = "1"
    stream_module.MIN_LAUNCHES = min_launches
    try:
        yield DEV.stream
    finally:
        stream_module.MIN_LAUNCHES = saved_min
        try:
            lf.sync(DEV)
        finally:
            if saved is None:
                del os.environ["LAZYFUSE_ASYNC"]
            else:
                os.environ["LAZYFUSE_ASYNC"] = saved


class Gate:
    """A torch function for ``lf.extern`` that blocks the stream's worker until ``open()``: it
    makes "a launch still queued" a state a test can hold, not a race it hopes to win."""

    def __init__(self):
        self.event = threading.Event()
        self.entered = threading.Event()

    def __call__(self, t):
        if t.device.type != "meta":   # (lf.extern runs it on meta tensors for the result's shape)
            self.entered.set()
            assert self.event.wait(10), "the gate was never opened"
        return t + 1

    def open_after(self, seconds: float) -> None:
        threading.Timer(seconds, self.event.set).start()

    def hold(self, x):
        """``lf.extern(self, x)``, its drain queued and the stream's worker held inside the gate
        (the stream on): the extern's result, still to be computed."""
        y = lf.extern(self, x)
        DEV.engine.sync("test: queue the drain")
        assert self.entered.wait(10)
        return y


@settings(COMMON, max_examples=scaled(60))
@given(st.data())
def test_random_programs_match_torch_with_the_stream_on(data):
    """tests/programs.py's random programs (uploads, in-place writes, views, drops, reads mid-program,
    lf.sync) against torch eager, every drain on the stream."""
    with stream_on() as stream:
        queued, launched = stream.queued, lf.stats(DEV).kernels_launched
        run_program(data, ALL_DTYPES)
    assert stream.queued - queued == lf.stats(DEV).kernels_launched - launched   # every launch on the stream


def test_a_host_read_waits_for_its_launch_only():
    """Reading a value its drain computed before a blocked launch returns while that launch is
    still queued; the blocked one's value is right once it ran."""
    gate = Gate()
    x = lf.tensor(np.arange(8, dtype=np.float32), device=DEV)
    with stream_on() as stream:
        doubled = x * 2
        blocked = gate.hold(doubled)
        np.testing.assert_array_equal(doubled.numpy(), np.arange(8) * 2)
        assert stream.busy()
        gate.event.set()
        np.testing.assert_array_equal(blocked.numpy(), np.arange(8) * 2 + 1)


def test_a_block_freed_while_a_queued_launch_reads_it_is_not_overwritten_by_an_upload():
    """Stream-ordered reuse: the pool hands the freed block of a still-queued launch's input to
    an upload at once, and the upload waits for that launch before it writes."""
    gate = Gate()
    with stream_on():
        x = lf.tensor(np.arange(4096, dtype=np.float32), device=DEV)
        y = gate.hold(x)
        block = x._storage.buffer.block
        del x
        gate.open_after(0.3)
        t0 = time.monotonic()
        z = lf.tensor(np.full(4096, 7.0, dtype=np.float32), device=DEV)
        waited = time.monotonic() - t0
        assert z._storage.buffer.block is block, "the premise: the pool reused the queued launch's block"
        assert waited >= 0.2
        np.testing.assert_array_equal(y.numpy(), np.arange(4096) + 1)
        np.testing.assert_array_equal(z.numpy(), 7.0)


def test_copy_from_the_host_waits_for_the_queued_readers_of_the_buffer():
    """``x.copy_(host data)`` writes x's buffer straight from the host: not before a queued
    launch reading the old value ran."""
    gate = Gate()
    x = lf.tensor(np.ones(64, dtype=np.float32), device=DEV)
    with stream_on():
        y = gate.hold(x)
        gate.open_after(0.2)
        x.copy_(np.full(64, 5.0, dtype=np.float32))
        np.testing.assert_array_equal(y.numpy(), 2.0)
        np.testing.assert_array_equal(x.numpy(), 5.0)


def test_a_launch_failing_on_the_worker_is_raised_by_lf_sync_once_and_poisons_what_needed_it():
    """A gather whose index is out of range fails on the worker: lf.sync raises the original
    error, once; reading the result (and what was recorded on it before the host knew) raises
    that error's type, chained from it; values computed before it and the engine are unaffected."""
    src = lf.tensor(np.arange(10, dtype=np.float32), device=DEV)
    with stream_on():
        before = src * 3
        DEV.engine.sync("test: a drain of its own")
        bad = src[lf.tensor([1, 99], device=DEV)]
        DEV.engine.sync("test: queue the failing drain")
        reader = bad + 1
        with pytest.raises(lf.ShapeError, match="index 99 is out of bounds for dimension 0 with size 10") as raised:
            lf.sync(DEV)
        assert raised.value.__cause__ is None   # the original exception itself
        lf.sync(DEV)   # raised once
        for poisoned in (bad, reader):
            with pytest.raises(lf.ShapeError, match="could not be computed") as read:
                poisoned.numpy()
            assert read.value.__cause__ is raised.value
        np.testing.assert_array_equal(before.numpy(), np.arange(10) * 3)
        np.testing.assert_array_equal((src * 2).numpy(), np.arange(10) * 2)


def test_a_failure_found_by_a_later_drain_is_raised_there():
    """A drain that must wait for the queue (here: the build path of a new plan) after a
    failure on the worker raises the original error; the next drain then runs."""
    src = lf.tensor(np.arange(10, dtype=np.float32), device=DEV)
    with stream_on():
        bad = src[lf.tensor([99], device=DEV)]
        DEV.engine.sync("test: queue the failing drain")
        fresh = src.exp().sum()
        with pytest.raises(lf.ShapeError, match="out of range"):
            fresh.item()
        assert fresh.item() == pytest.approx(float(np.exp(np.arange(10)).sum()), rel=1e-6)
        with pytest.raises(lf.ShapeError):
            bad.numpy()


def test_capture_and_its_two_bugs_are_unchanged_with_the_stream_on():
    """lf.capture drains the stream first and captures synchronously: the default succeeds and
    replays like the closure, hold_outputs=False and warmup_iters=1 still raise."""
    from lazyfuse.errors import CaptureAllocationError
    w = lf.tensor(np.linspace(-1, 1, 48, dtype=np.float32).reshape(6, 8), device=DEV)
    x = lf.tensor(np.ones((4, 6), dtype=np.float32), device=DEV)

    def step():
        return (x @ w).relu().sum(dim=1) * 0.5

    expect = ((torch.ones(4, 6) @ torch.linspace(-1, 1, 48).reshape(6, 8)).relu().sum(dim=1) * 0.5).numpy()
    with stream_on():
        graph = lf.capture(DEV, step)
        assert graph.is_hardware
        x.copy_(np.full((4, 6), 2.0, dtype=np.float32))
        np.testing.assert_allclose(graph.replay().numpy(), expect * 2, rtol=1e-6)
        with pytest.raises(CaptureAllocationError, match="fresh allocation"):
            lf.capture(DEV, lambda: (x @ w).tanh().sum(dim=0), hold_outputs=False)
        with pytest.raises(CaptureAllocationError, match="launch metadata"):
            lf.capture(DEV, lambda: (x @ w).sigmoid().amax(dim=0), warmup_iters=1)
        np.testing.assert_allclose(step().numpy(), expect * 2, rtol=1e-6)


def test_a_small_drain_with_nothing_queued_runs_on_the_host_and_one_after_queued_work_does_not():
    gate = Gate()
    x = lf.tensor(np.zeros(16, dtype=np.float32), device=DEV)
    with stream_on(min_launches=stream_module.MIN_LAUNCHES) as stream:
        queued = stream.queued
        np.testing.assert_array_equal((x + 1).numpy(), 1.0)
        np.testing.assert_array_equal((x * 3).numpy(), 0.0)   # (z's plan below, built: no build path wait)
        assert stream.queued == queued   # one launch, nothing queued: run on the host
        stream_module.MIN_LAUNCHES = 0
        y = gate.hold(x)
        stream_module.MIN_LAUNCHES = 16
        z = y * 3   # one launch, but it must run after the queued one: queued too
        DEV.engine.sync("test: a small drain behind queued work")
        assert stream.queued == queued + 2
        gate.event.set()
        np.testing.assert_array_equal(z.numpy(), 3.0)


def test_the_knob_turned_off_drains_the_queue_in_order():
    """A synchronous drain after queued ones runs after them (the stream turned off between)."""
    gate = Gate()
    x = lf.tensor(np.zeros(16, dtype=np.float32), device=DEV)
    with stream_on():
        y = gate.hold(x)
        gate.open_after(0.1)
        os.environ["LAZYFUSE_ASYNC"] = "0"
        z = y * 2
        np.testing.assert_array_equal(z.numpy(), 2.0)
        assert DEV.stream._worker is None   # (its queue ran empty)


def test_lf_sync_of_the_device_waits_for_its_queued_launches():
    """``lf.sync(dev)``, as ``lf.sync()``: nothing is left queued after it, nothing to read needed."""
    gate = Gate()
    x = lf.tensor(np.zeros(16, dtype=np.float32), device=DEV)
    with stream_on() as stream:
        y = gate.hold(x)
        gate.open_after(0.2)
        lf.sync(DEV)
        assert not stream.busy()
        np.testing.assert_array_equal(y.numpy(), 1.0)


def _stream_threads() -> list:
    return [t for t in threading.enumerate() if t.name.startswith("lazyfuse stream")]


def test_the_worker_ends_whenever_its_queue_runs_empty_and_the_next_drain_starts_another():
    """An idle worker's OpenMP team slows every other parallel region (libgomp then manages more
    threads than cores: runtime/stream.py), so no worker waits idle: it ends once it ran its queue,
    with the stream still on, and lf.sync returns after it ended; a later drain queues on a new one."""
    gate = Gate()
    x = lf.tensor(np.zeros(16, dtype=np.float32), device=DEV)
    with stream_on() as stream:
        y = gate.hold(x)
        (worker,) = _stream_threads()
        gate.event.set()
        np.testing.assert_array_equal(y.numpy(), 1.0)   # (waits for the launch only)
        worker.join(10)
        assert not worker.is_alive() and stream._worker is None and not _stream_threads()
        queued = stream.queued
        z = (y * 3).exp()
        DEV.engine.sync("test: a drain on a new worker")
        lf.sync(DEV)
        assert stream.queued > queued and stream._worker is None and not _stream_threads()
        np.testing.assert_allclose(z.numpy(), np.exp(3.0), rtol=1e-6)


def test_the_knob_is_parsed_once_per_change_and_each_change_is_seen_at_the_next_drain(monkeypatch):
    """A cpu drain looks the knob up in the environment's store (one dict lookup): it neither asks
    ``os.environ.get`` (~0.4 us a drain) nor parses it while it is unchanged; turned on through
    os.environ, the very next drain queues; turned off, the next one does not."""
    from lazyfuse import config
    asked, parsed = [], []
    environ_get, knob_get = type(os.environ).get, config.Knob.get
    monkeypatch.setattr(type(os.environ), "get",
                        lambda env, key, default=None: (asked.append(key), environ_get(env, key, default))[1])
    monkeypatch.setattr(config.Knob, "get", lambda knob: (parsed.append(knob.name), knob_get(knob))[1])
    x = lf.tensor(np.zeros(16, dtype=np.float32), device=DEV)
    (x + 1).numpy()   # (the knob as earlier tests left it: seen here)
    asked.clear()
    parsed.clear()
    for k in range(5):
        np.testing.assert_array_equal((x + k).numpy(), float(k))
    assert "LAZYFUSE_ASYNC" not in asked + parsed
    with stream_on() as stream:
        queued = stream.queued
        np.testing.assert_array_equal((x + 7).numpy(), 7.0)
        assert stream.queued == queued + 1
    queued = stream.queued
    np.testing.assert_array_equal((x + 8).numpy(), 8.0)
    assert stream.queued == queued
    assert parsed.count("LAZYFUSE_ASYNC") == 2   # (on, then off)


def test_the_frontend_gpt_trains_to_torch_eager_losses_with_the_stream_on():
    """tests/test_torch_frontend_gpt.py's training run with the stream on: the same losses as torch
    eager; and a loss read waits for its own launch only, before its step's backward and optimizer
    launches (the overlap the stream is for: at this small size the worker is often done first)."""
    from lazyfuse.runtime.stream import memory_of
    from test_torch_frontend_gpt import _batches, _model, train_step
    ref, lazy = _model(), lf.lazy(_model())
    opt_r = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt_l = torch.optim.AdamW(lazy.parameters(), lr=1e-2)
    want, got, waits_for = [], [], []
    with stream_on() as stream:
        for x, y in _batches(5):
            want.append(train_step(ref, opt_r, x, y).item())
            loss = train_step(lazy, opt_l, lf.lazy(x), lf.lazy(y))
            DEV.engine.sync("test: queue the step")
            drain = stream.inflight[-1]
            waits_for.append((drain.ready[memory_of(loss._lf._storage.buffer)] - drain.base, drain.end - drain.base))
            got.append(loss.item())
    assert got == pytest.approx(want, rel=2e-4)
    assert all(0 < upto <= 0.6 * n for upto, n in waits_for), waits_for
    for a, b in zip(ref.state_dict().values(), lazy.state_dict().values()):
        assert torch.isfinite(lf.eager(b)).all() and lf.eager(b).shape == a.shape

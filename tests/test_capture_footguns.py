"""The footguns of the peers' graph capture (tinygrad's TinyJit tests, torch's CUDA graph and
graph-tree tests), ported to ``lf.capture`` / ``lf.graphed``: each one a bug lazyfuse had
(a silently wrong value, a leak, a misleading error) or a guard the peers have.

Runs on the device named by ``LAZYFUSE_TEST_DEVICE`` (default ``cpu``; ``bench/gpu_check.py``
runs it with ``cuda``) and on ``interpreter`` (no graphs: replays re-run the closure), where
the footgun has a meaning there.
"""
import gc
import os
import threading
import warnings
import weakref

import numpy as np
import pytest

import lazyfuse as lf
from lazyfuse.testing import pool_info

F = lf.nn.functional
MAIN = os.environ.get("LAZYFUSE_TEST_DEVICE", "cpu")
ALL = list(dict.fromkeys([MAIN, "interpreter"]))
GRAPHS = [d for d in ALL if lf.device(d).supports_graphs]
# host graphs: another thread's upload during a CUDA capture would be a copy on the legacy default
# stream, which CUDA itself refuses while a stream captures; the pool rule is device-independent
HOST_GRAPHS = [d for d in GRAPHS if lf.device(d).kind == "cpu"]


@pytest.fixture(autouse=True)
def _quiet_fallback_warnings():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="lazyfuse: graph replay falls back")
        yield


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def realized(array, dev, **kw):
    t = lf.tensor(array, device=dev, **kw)
    lf.sync(dev)
    return t


# -- 1. replays draw from the random generator ---------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_replays_draw_from_the_generator_like_eager_calls(name):
    dev = lf.device(name)

    def draw():
        return lf.rand(5, device=dev) * 1.0, lf.randn(3, device=dev) + 0.0

    g = lf.capture(dev, draw)
    eager = lf.rand(5, device=dev).numpy()
    replayed = g.replay()[0].numpy()
    assert not np.array_equal(eager, replayed)   # an eager draw took its own numbers
    lf.manual_seed(7)
    a = [t.numpy().copy() for t in g.replay()]
    lf.manual_seed(7)
    b = [t.numpy().copy() for t in g.replay()]
    lf.manual_seed(7)
    ref = [t.numpy() for t in draw()]
    for x, y, r in zip(a, b, ref):
        np.testing.assert_array_equal(x, y)      # seeding makes replays repeatable
        np.testing.assert_array_equal(x, r)      # ...and they draw what eager calls draw
    after = g.replay()[0].numpy()
    assert not np.array_equal(after, a[0])


# -- 2. a graph replayed inside another capture ---------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_a_graph_replayed_inside_another_capture_becomes_part_of_it(name):
    dev = lf.device(name)
    x = realized(np.ones(4, np.float32), dev)
    inner = lf.capture(dev, lambda: (x + 1) * (x.sum() * 0 + 1))   # two kernels (a host graph batches them)
    outer = lf.capture(dev, lambda: inner.replay() * 3)
    if dev.supports_graphs:
        assert outer.num_launches == inner.num_launches + 1
    x.copy_(np.full(4, 10, np.float32))
    np.testing.assert_array_equal(outer.replay().numpy(), np.full(4, 33.0))
    np.testing.assert_array_equal(inner.output.numpy(), np.full(4, 11.0))


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("clone", [False, True])
def test_a_graphed_call_inside_a_capture_becomes_part_of_it(name, clone):
    dev = lf.device(name)
    x = realized(np.ones(4, np.float32), dev)
    f = lf.graphed(lambda a: a + 1, lf.zeros(4, device=dev), clone_outputs=clone)
    outer = lf.capture(dev, lambda: f(x) * 3)
    x.copy_(np.full(4, 10, np.float32))
    np.testing.assert_array_equal(outer.replay().numpy(), np.full(4, 33.0))


@pytest.mark.parametrize("name", GRAPHS)
def test_a_random_graph_replayed_inside_a_capture_is_refused(name):
    dev = lf.device(name)
    inner = lf.capture(dev, lambda: lf.rand(4, device=dev) * 1.0)
    with pytest.raises(lf.CaptureError, match="random"):
        lf.capture(dev, lambda: inner.replay() * 3)
    assert not dev.capturing and not pool_info(dev)["persistent"]
    inner.replay().numpy()


# -- 3. a host copy into a tensor autograd saved -------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_a_host_copy_into_a_saved_tensor_makes_backward_raise(name):
    dev = lf.device(name)
    x = realized(np.ones((2, 3), np.float32), dev)
    w = lf.tensor(np.ones((3, 1), np.float32), device=dev, requires_grad=True)
    y = (x @ w).sum()
    y.item()
    x.copy_(np.full((2, 3), 5, np.float32))   # the host fast path: no recorded write
    with pytest.raises(lf.AutogradError, match="in-place"):
        y.backward()


@pytest.mark.parametrize("name", ALL)
def test_backward_of_an_earlier_graphed_call_raises_instead_of_using_a_later_input(name):
    dev = lf.device(name)
    w = lf.tensor(np.ones((3, 1), np.float32), device=dev, requires_grad=True)
    f = lf.graphed(lambda a: (a @ w).sum(), lf.zeros((2, 3), device=dev))
    l1 = f(np.ones((2, 3), np.float32))
    f(np.full((2, 3), 5, np.float32))
    with pytest.raises(lf.AutogradError):
        l1.backward()


# -- 4. no reference cycles between a tensor and its gradient node -------------------------------
RULES_SAVING_OUTPUT = {
    "relu": F.relu, "exp": lambda t: t.exp(), "sigmoid": lambda t: t.sigmoid(), "tanh": lambda t: t.tanh(),
    "sqrt": lambda t: (t * t + 1).sqrt(), "rsqrt": lambda t: (t * t + 1).rsqrt(),
    "reciprocal": lambda t: (t * t + 1).reciprocal(), "div": lambda t: t / (t * t + 1),
    "pow": lambda t: (t * t + 1) ** t, "amax": lambda t: t.amax(1, keepdim=True),
}


@pytest.mark.parametrize("op", sorted(RULES_SAVING_OUTPUT))
def test_a_result_with_a_gradient_is_freed_without_the_cyclic_collector(op):
    x = lf.tensor(rnd(4, 8, seed=1), requires_grad=True)
    gc.collect()
    gc.disable()
    try:
        y = RULES_SAVING_OUTPUT[op](x)
        dead = weakref.ref(y)
        del y
        assert dead() is None, f"{op}: the result is kept alive by a reference cycle"
    finally:
        gc.enable()


def test_a_gradient_still_reads_the_saved_output_after_the_result_is_dropped():
    xv = rnd(6, seed=2)
    x = lf.tensor(xv, requires_grad=True)
    loss = (x.exp() * 1.0).sum()   # exp's gradient reads exp's own output, which is dropped here
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.exp(xv), rtol=1e-6)


@pytest.mark.parametrize("name", GRAPHS)
def test_a_capture_with_gradients_succeeds_with_the_collector_off(name):
    dev = lf.device(name)
    x = realized(rnd(4, 8, seed=1), dev)
    w = lf.tensor(rnd(8, 8, seed=2), device=dev, requires_grad=True)
    gc.collect()
    gc.disable()
    try:
        g = lf.capture(dev, lambda: F.relu(x @ w).sum())
    finally:
        gc.enable()
    ref = np.maximum(rnd(4, 8, seed=1) @ rnd(8, 8, seed=2), 0).sum()
    np.testing.assert_allclose(g.replay().item(), ref, rtol=1e-5)


# -- 5. another thread's allocation during an open capture ---------------------------------------
@pytest.mark.parametrize("name", HOST_GRAPHS)
def test_another_threads_allocation_does_not_take_the_capture_pool(name):
    dev = lf.device(name)
    x = realized(rnd(64, seed=3), dev)
    n, uploads, errors = {"i": 0}, [], []

    def upload():
        try:   # one of the size the capture needs, one of another size
            uploads.extend([lf.tensor(np.full(64, 2, np.float32), device=dev),
                            lf.tensor(np.full(1000, 3, np.float32), device=dev)])
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def step():
        n["i"] += 1
        y = x * 2
        if n["i"] in (2, 4):   # a warmup and the capture run
            t = threading.Thread(target=upload)
            t.start()
            t.join()
        return y

    g = lf.capture(dev, step)
    assert not errors, errors
    np.testing.assert_allclose(g.replay().numpy(), rnd(64, seed=3) * 2)
    for u in uploads:
        assert set(np.unique(u.numpy())) <= {2.0, 3.0}


# -- 6. cached plans keep no dropped input alive --------------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_a_cached_plan_keeps_no_dropped_input_alive(name):
    dev = lf.device(name)
    gc.collect()
    start = pool_info(dev)["live_bytes"]
    n = 1 << 16
    for _ in range(3):   # the build path, then the steady state
        big = lf.tensor(np.ones(n, np.float32), device=dev)
        assert (big * 2).sum().item() == 2 * n
        del big
    gc.collect()
    # what stays is the cached plan's own launch metadata, never the input
    assert pool_info(dev)["live_bytes"] - start < n * 4 // 4


# -- 7. captures cannot nest, in any phase ---------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("at", ["warmup", "capture run"])
def test_a_nested_capture_is_refused_and_leaves_the_outer_intact(name, at):
    dev = lf.device(name)
    if at == "capture run" and not dev.supports_graphs:
        pytest.skip("without graphs the closure runs once: there is no warmup phase apart from it")
    x = realized(np.ones(4, np.float32), dev)
    n, refused = {"i": 0}, []
    nest_at = 1 if at == "warmup" else 4

    def outer():
        n["i"] += 1
        if n["i"] == nest_at:
            try:
                lf.capture(dev, lambda: x + 1)
            except lf.CaptureError as e:
                refused.append(str(e))
        return x * 2

    g = lf.capture(dev, outer)
    assert len(refused) == 1 and "captures cannot nest" in refused[0]
    x.copy_(np.full(4, 5, np.float32))
    np.testing.assert_array_equal(g.replay().numpy(), np.full(4, 10.0))
    assert not dev.capturing and not pool_info(dev)["persistent"]


@pytest.mark.parametrize("name", ALL)
def test_a_capture_on_first_call_helper_inside_a_capture_is_refused(name):
    dev = lf.device(name)
    decode = lf.graph.decode_step(lambda s: s.caches["k"].sum(0) + s.onehot.sum(), max_len=4,
                                  caches={"k": (4, 2)}, device=dev)
    with pytest.raises(lf.CaptureError, match="captures cannot nest"):
        lf.capture(dev, lambda: decode(1, 0))
    assert not dev.capturing and not pool_info(dev)["persistent"]
    np.testing.assert_array_equal(decode(1, 0).numpy(), np.full(2, 1.0))   # works outside


# -- 8. a fallback replay overwrites the graph's output ------------------------------------------
def test_a_fallback_replay_writes_into_the_same_output_tensors():
    dev = lf.device("interpreter")
    x = realized(np.ones(3, np.float32), dev)
    g = lf.capture(dev, lambda: {"a": x * 2, "b": (x + 1, x.sum())})
    first = g.output
    a, b0 = first["a"], first["b"][0]
    x.copy_(np.full(3, 4, np.float32))
    out = g.replay()
    assert out is first and out["a"] is a and out["b"][0] is b0
    np.testing.assert_array_equal(a.numpy(), np.full(3, 8.0))
    np.testing.assert_array_equal(b0.numpy(), np.full(3, 5.0))
    assert out["b"][1].item() == 12.0


# -- 9. lf.graphed keeps in-place writes to its inputs ---------------------------------------------
@pytest.mark.parametrize("name", ALL)
def test_graphed_copies_in_place_writes_back_to_the_callers_inputs(name):
    dev = lf.device(name)

    def step(a, b):
        a.add_(b)      # mutates its first input
        return a * 2

    call = lf.graphed(step, lf.zeros(4, device=dev), lf.zeros(4, device=dev))
    x = realized(np.zeros(4, np.float32), dev)
    y = realized(np.ones(4, np.float32), dev)
    out = call(x, y)
    np.testing.assert_array_equal(x.numpy(), np.ones(4))
    np.testing.assert_array_equal(out.numpy(), np.full(4, 2.0))
    out = call(x, y)
    np.testing.assert_array_equal(x.numpy(), np.full(4, 2.0))
    np.testing.assert_array_equal(out.numpy(), np.full(4, 4.0))
    np.testing.assert_array_equal(y.numpy(), np.ones(4))   # an input it only reads is not written


# -- what the peers have: overwritten outputs, empty captures, reset, shared pools, a dump ---------
@pytest.mark.parametrize("name", ALL)
def test_graphed_uncloned_outputs_overwritten_by_a_later_call_raise_on_read(name):
    dev = lf.device(name)
    f = lf.graphed(lambda a: a * 2, lf.zeros(3, device=dev), clone_outputs=False)
    o1 = f(np.ones(3, np.float32))
    np.testing.assert_array_equal(o1.numpy(), np.full(3, 2.0))
    pending = o1 + 1          # recorded before the next call: computed from the value it read
    o2 = f(np.full(3, 5, np.float32))
    with pytest.raises(lf.CaptureError, match="overwritten"):
        o1.numpy()
    with pytest.raises(lf.CaptureError, match="overwritten"):
        (o1 * 3).numpy()
    np.testing.assert_array_equal(pending.numpy(), np.full(3, 3.0))
    np.testing.assert_array_equal(o2.numpy(), np.full(3, 10.0))
    np.testing.assert_array_equal((o2 + 1).numpy(), np.full(3, 11.0))   # the engine goes on


@pytest.mark.parametrize("name", ALL)
def test_check_overwrites_is_an_opt_in_mode_of_raw_graphs(name):
    dev = lf.device(name)
    x = realized(np.ones(3, np.float32), dev)
    plain = lf.capture(dev, lambda: x * 2)
    assert plain.replay() is plain.replay() is plain.output   # off: the same tensor, no bookkeeping
    g = lf.capture(dev, lambda: (x * 2, x + 1), check_overwrites=True)
    a = g.replay()
    np.testing.assert_array_equal(a[1].numpy(), np.full(3, 2.0))
    x.copy_(np.full(3, 4, np.float32))
    b = g.replay()
    for stale in a:
        with pytest.raises(lf.CaptureError, match="overwritten"):
            stale.numpy()
    np.testing.assert_array_equal(b[0].numpy(), np.full(3, 8.0))
    np.testing.assert_array_equal(b[1].numpy(), np.full(3, 5.0))


@pytest.mark.parametrize("name", GRAPHS)
def test_an_empty_capture_warns_naming_the_likely_cause(name):
    dev = lf.device(name)
    x = realized(np.ones(3, np.float32), dev)

    def drops_its_result():
        x * 2   # noqa: B018 (dropped: elided)

    with pytest.warns(RuntimeWarning, match="0 kernel launches.*dropped"):
        g = lf.capture(dev, drops_its_result)
    assert g.num_launches == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lf.capture(dev, lambda: x * 2)   # a capture with launches says nothing


@pytest.mark.parametrize("name", ALL)
def test_reset_and_capture_again_into_the_same_graph(name):
    dev = lf.device(name)
    x = realized(np.ones(1 << 14, np.float32), dev)
    g = lf.capture(dev, lambda: x * 2)
    with pytest.raises(lf.CaptureError, match="reset"):
        lf.capture(dev, lambda: x * 3, graph=g)
    np.testing.assert_array_equal(g.replay().numpy(), np.full(1 << 14, 2.0))
    gc.collect()
    held = pool_info(dev)["live_bytes"]
    g.reset()
    gc.collect()
    assert pool_info(dev)["live_bytes"] < held   # the graph let go of its output and metadata
    with pytest.raises(lf.CaptureError, match="reset"):
        g.replay()
    assert lf.capture(dev, lambda: x * 3, graph=g) is g
    x.copy_(np.full(1 << 14, 2, np.float32))
    np.testing.assert_array_equal(g.replay().numpy(), np.full(1 << 14, 6.0))


@pytest.mark.parametrize("name", GRAPHS)
def test_graphs_sharing_a_pool_reuse_memory_and_replay_in_capture_order(name):
    dev = lf.device(name)
    xv, yv = rnd(256, seed=5), rnd(256, seed=6)
    x, y = realized(xv, dev), realized(yv, dev)
    # a mean is an intermediate: its own kernel, read by the next one
    g1 = lf.capture(dev, lambda: (x - x.mean()) * 2)
    g2 = lf.capture(dev, lambda: (y - y.mean()) * 3, pool=g1)
    lent = {b.ptr for b in g1._hardware.host.intermediates()}
    assert lent & {b.ptr for b in g2._hardware.host.intermediates()}   # g2 runs on g1's memory
    with pytest.raises(lf.CaptureError, match="capture order"):
        g2.replay()   # g2 ran last (its capture): the next is g1
    for _ in range(2):
        a, b = g1.replay(), g2.replay()
        np.testing.assert_allclose(a.numpy(), (xv - xv.mean()) * 2, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b.numpy(), (yv - yv.mean()) * 3, rtol=1e-5, atol=1e-6)
    g1.replay()
    g2.replay()
    with pytest.raises(lf.CaptureError, match="capture order"):
        g2.replay()   # twice in a row: it would run on memory g1 lent, out of turn
    separate = lf.capture(dev, lambda: (y - y.mean()) * 3)
    assert not lent & {b.ptr for b in separate._hardware.host.intermediates()}


def test_debug_dump_lists_kernels_buffers_and_bytes():
    dev = lf.device(GRAPHS[0]) if GRAPHS else pytest.skip("no graph device")
    x = realized(rnd(4, 64, seed=7), dev)
    g = lf.capture(dev, lambda: F.softmax(x - x.mean(), -1) * 2)
    text = g.debug_dump()
    lines = text.splitlines()
    assert lines[0].startswith(f"Graph on {dev.name}: {g.num_launches} kernel launch")
    assert len([ln for ln in lines if ln.startswith("  ")]) == g.num_launches
    assert "(input)" in text and "(output)" in text and "(intermediate)" in text
    held = int(lines[-1].split(" bytes")[0].split()[-1])
    assert held >= 2 * 4 * 64 * 4   # at least the input and the output
    fallback = lf.capture(lf.device("interpreter"), lambda: lf.ones(2, device="interpreter") * 2)
    assert "fallback" in fallback.debug_dump() and "re-runs the closure" in fallback.debug_dump()

"""Graph capture (docs/semantics.md, Capture; The two reproduced bugs; Replay) on the cpu host
graph; the interpreter for the fallback."""
import gc
import threading
import time
import warnings

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.testing import count_launches, no_fresh_allocations, pool_info, stats_delta

CPU = lf.device("cpu")


def rnd(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def make_block(hidden=16, widen=2, seed=1):
    """A decode-like step: rms_norm, linear+silu (``widen`` x ``hidden`` wide), linear, residual;
    the input, the step and its float64 reference."""
    x = lf.tensor(rnd(1, hidden, seed=seed))
    w1 = lf.tensor(rnd(hidden * widen, hidden, seed=seed + 1) / hidden ** 0.5)
    w2 = lf.tensor(rnd(hidden, hidden * widen, seed=seed + 2) / hidden ** 0.5)
    F = lf.nn.functional

    def step():
        h = F.rms_norm(x, (hidden,))
        return x + F.linear(F.silu(F.linear(h, w1)), w2)

    def ref(xv):
        xt = torch.tensor(xv, dtype=torch.float64)
        h = torch.nn.functional.rms_norm(xt, (hidden,), eps=torch.finfo(torch.float32).eps)
        w1t, w2t = (torch.tensor(w.numpy(), dtype=torch.float64) for w in (w1, w2))
        return (xt + torch.nn.functional.silu(h @ w1t.T) @ w2t.T).numpy()

    return x, step, ref


def test_replay_equals_eager_for_fresh_inputs_and_outputs_alias():
    x, step, ref = make_block()
    g = lf.capture(CPU, step)
    assert g.is_hardware and g.fallback_reason is None and g.num_launches >= 3
    first = g.output
    for i in range(20):
        xv = rnd(1, 16, seed=100 + i)
        x.copy_(xv)
        out = g.replay()
        assert out is first  # the same tensor each time, its buffer overwritten
        np.testing.assert_allclose(out.numpy(), ref(xv), rtol=1e-5, atol=1e-5)


def test_replay_counts_and_launches_nothing_else():
    x, step, _ = make_block()
    g = lf.capture(CPU, step)
    with count_launches(CPU) as d:
        g.replay()
        g.replay()
    assert d.graph_replays == 2 and d.kernels_launched == 0 and d.fusion_cache_misses == 0


def test_hold_outputs_false_raises_capture_allocation_error():
    x, step, _ = make_block()
    with pytest.raises(lf.CaptureAllocationError) as e:
        lf.capture(CPU, step, hold_outputs=False)
    msg = str(e.value)
    assert "bytes" in msg and "dropped before" in msg and "elided" in msg
    assert isinstance(e.value, lf.CaptureError) and isinstance(e.value, lf.LazyfuseError)


def test_one_warmup_raises_for_launch_metadata():
    x, step, _ = make_block()
    with pytest.raises(lf.CaptureAllocationError) as e:
        lf.capture(CPU, step, warmup_iters=1)
    msg = str(e.value)
    assert "metadata" in msg and "warmup" in msg and "steady-state" in msg


def test_reproductions_are_deterministic_after_successful_captures():
    """The plan is cached from earlier runs: the reproductions must still fire (capture starts cold)."""
    x, step, _ = make_block()
    lf.capture(CPU, step)
    step().numpy()
    for _ in range(2):
        with pytest.raises(lf.CaptureAllocationError):
            lf.capture(CPU, step, warmup_iters=1)
        with pytest.raises(lf.CaptureAllocationError):
            lf.capture(CPU, step, hold_outputs=False)


@pytest.mark.parametrize("warmup", [2, 3, 5])
def test_enough_warmup_succeeds(warmup):
    x, step, ref = make_block()
    g = lf.capture(CPU, step, warmup_iters=warmup)
    xv = rnd(1, 16, seed=7)
    x.copy_(xv)
    np.testing.assert_allclose(g.replay().numpy(), ref(xv), rtol=1e-5, atol=1e-5)


def test_counters_tell_the_story_of_both_bugs():
    x, step, _ = make_block()
    with stats_delta(CPU) as d:
        with pytest.raises(lf.CaptureAllocationError):
            lf.capture(CPU, step, hold_outputs=False)
    # every warmup was elided: nothing built, launched or allocated before the capture run
    assert d.ops_elided > 0 and d.kernels_launched == 0 and d.fusion_cache_misses == 0
    assert d.fresh_allocations == 0
    with stats_delta(CPU) as d:
        lf.capture(CPU, step)
    assert d.fusion_cache_misses == 1 and d.fusion_cache_hits >= 3


def test_after_a_failed_capture_the_next_succeeds_and_engine_is_sane():
    x, step, ref = make_block()
    keep = lf.tensor([1.0, 2.0]) * 3
    keep.numpy()
    with pytest.raises(lf.CaptureAllocationError):
        lf.capture(CPU, step, warmup_iters=1)
    assert not CPU.capturing and not pool_info(CPU)["persistent"]
    np.testing.assert_allclose(keep.numpy(), [3.0, 6.0])
    np.testing.assert_allclose((keep + 1).numpy(), [4.0, 7.0])
    g = lf.capture(CPU, step)
    xv = rnd(1, 16, seed=9)
    x.copy_(xv)
    np.testing.assert_allclose(g.replay().numpy(), ref(xv), rtol=1e-5, atol=1e-5)


def test_interpreter_falls_back_and_reruns_the_closure():
    dev = lf.device("interpreter")
    x = lf.tensor([1.0, 2.0, 3.0], device=dev)
    calls = []

    def f():
        calls.append(1)
        return x * 2

    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        g = lf.capture(dev, f)
    assert not g.is_hardware and "no graph support" in g.fallback_reason and g.num_launches == 0
    assert len(calls) == 1  # no pointless warmup
    x.copy_(np.array([5.0, 6.0, 7.0], dtype=np.float32))
    np.testing.assert_allclose(g.replay().numpy(), [10.0, 12.0, 14.0])
    assert len(calls) == 2


def test_host_read_and_sync_inside_capture_raise():
    x = lf.tensor([1.0, 2.0])
    state = {"n": 0}

    def reads():
        state["n"] += 1
        y = x * 2
        if state["n"] > 3:  # the capture run
            y.numpy()
        return y

    with pytest.raises(lf.CaptureError, match="baked in"):
        lf.capture(CPU, reads)
    state["n"] = 0

    def syncs():
        state["n"] += 1
        y = x * 2
        if state["n"] > 3:
            lf.sync()
        return y

    with pytest.raises(lf.CaptureError):
        lf.capture(CPU, syncs)
    assert not CPU.capturing
    np.testing.assert_allclose((x + 1).numpy(), [2.0, 3.0])


def test_item_inside_capture_raises_with_the_bake_in_message():
    x = lf.tensor([1.0])
    n = {"i": 0}

    def f():
        n["i"] += 1
        y = x + 1
        if n["i"] == 4:
            y.item()
        return y

    with pytest.raises(lf.CaptureError, match="cannot read device data during capture"):
        lf.capture(CPU, f)


def test_nested_capture_is_refused():
    x = lf.tensor([1.0])
    n = {"i": 0}

    def outer():
        n["i"] += 1
        if n["i"] == 4:
            lf.capture(CPU, lambda: x + 1)
        return x * 2

    with pytest.raises(lf.CaptureError, match="nest"):
        lf.capture(CPU, outer)
    assert not CPU.capturing


def test_closure_returning_a_non_tensor_is_refused():
    with pytest.raises(lf.CaptureError, match="must return a Tensor"):
        lf.capture(CPU, lambda: 42)
    with pytest.raises(lf.CaptureError):
        lf.capture(CPU, lambda: (lf.tensor([1.0]) * 2, "x"))


def test_exception_inside_closure_during_capture_closes_it():
    x = lf.tensor([1.0, 2.0])
    n = {"i": 0}

    def f():
        n["i"] += 1
        if n["i"] == 4:
            raise KeyError("boom")
        return x * 2

    with pytest.raises(KeyError):
        lf.capture(CPU, f)
    assert not CPU.capturing and not pool_info(CPU)["persistent"]
    g = lf.capture(CPU, lambda: x * 3)
    np.testing.assert_allclose(g.replay().numpy(), [3.0, 6.0])


def test_concurrent_replay_from_a_second_thread_is_refused():
    x = lf.tensor(rnd(8))
    g = lf.capture(CPU, lambda: x * 2)
    g._turn.pop()  # a replay in flight on another thread holds the turn
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(lf.CaptureError, g.replay)))
    t.start()
    t.join()
    g._turn.append(True)
    assert errors and errors[0].value is not None
    g.replay()


def test_replay_after_the_user_dropped_the_input_stays_correct():
    inputs = {"x": lf.tensor(rnd(32, seed=4)), "w": lf.tensor(rnd(32, seed=5))}
    g = lf.capture(CPU, lambda: (inputs["x"] * inputs["w"]).sum())
    expected = float((rnd(32, seed=4) * rnd(32, seed=5)).sum())
    inputs.clear()  # the user's (and the closure's) last references: only the graph keeps them
    gc.collect()
    # allocate and free plenty of same-sized memory: nothing may reuse the graph's buffers
    junk = [lf.tensor(np.full(32, 99.0, dtype=np.float32)) * 2 for _ in range(20)]
    lf.sync()
    del junk
    assert abs(g.replay().item() - expected) < 1e-4


def test_work_interleaved_between_replays_never_corrupts_a_replay():
    x, step, ref = make_block()
    g = lf.capture(CPU, step)
    for i in range(10):
        xv = rnd(1, 16, seed=200 + i)
        x.copy_(xv)
        out = g.replay()
        # other programs allocate, drain and free between replays, same sizes included
        others = [(lf.tensor(rnd(1, 16, seed=i)) * k).exp() for k in range(5)]
        lf.sync()
        [o.numpy() for o in others]
        del others
        np.testing.assert_allclose(out.numpy(), ref(xv), rtol=1e-5, atol=1e-5)


def test_eager_runs_of_the_same_plan_do_not_change_a_captured_graph():
    """The graph owns the launch metadata it recorded (scalars included)."""
    x = lf.tensor(rnd(16, seed=1))
    g = lf.capture(CPU, lambda: x * 2.0 + 1.0)
    (x * 5.0 + 7.0).numpy()  # same structure, other scalars, eager
    np.testing.assert_allclose(g.replay().numpy(), rnd(16, seed=1) * 2 + 1, rtol=1e-6)


def test_output_fed_back_as_next_input():
    state = lf.tensor(np.ones(4, dtype=np.float32))
    g = lf.capture(CPU, lambda: state * 2)
    vals = []
    for _ in range(3):
        out = g.replay()
        vals.append(out.numpy().copy())
        state.copy_(out)
    np.testing.assert_allclose(vals[-1], np.full(4, 8.0))


def test_many_replays_do_not_grow_memory_or_tensors():
    x, step, _ = make_block()
    g = lf.capture(CPU, step)
    g.replay()
    gc.collect()
    before = pool_info(CPU)
    n_tensors = sum(1 for o in gc.get_objects() if type(o) is lf.Tensor)
    with no_fresh_allocations(CPU):
        for _ in range(10_000):
            g.replay()
    gc.collect()
    after = pool_info(CPU)
    assert after["live_bytes"] == before["live_bytes"] and after["cached_bytes"] == before["cached_bytes"]
    assert sum(1 for o in gc.get_objects() if type(o) is lf.Tensor) == n_tensors


def test_random_numbers_advance_on_each_replay():
    g = lf.capture(CPU, lambda: lf.rand(64) * 1.0)
    a = g.replay().numpy().copy()
    b = g.replay().numpy().copy()
    assert not np.array_equal(a, b)
    assert 0.0 <= a.min() and a.max() < 1.0 and abs(b.mean() - 0.5) < 0.2


def test_replay_is_cheap_per_launch():
    x, step, _ = make_block()
    g = lf.capture(CPU, step)
    for _ in range(50):
        g.replay()
    t0 = time.perf_counter()
    n = 2000
    for _ in range(n):
        g.replay()
    per_replay = (time.perf_counter() - t0) / n
    # a loose bound (CI machines are noisy); bench/ measures the real number
    assert per_replay < 2e-3


def test_graphed_copies_inputs_and_clones_outputs():
    F = lf.nn.functional
    w = lf.tensor(rnd(8, 8, seed=3))
    call = lf.graphed(lambda a: F.relu(F.linear(a, w)), lf.tensor(rnd(2, 8, seed=1)))
    assert call.graph.is_hardware
    outs = []
    for s in range(3):
        xv = rnd(2, 8, seed=10 + s)
        outs.append((call(xv), xv))
    for out, xv in outs:  # earlier results were not overwritten by later replays
        np.testing.assert_allclose(out.numpy(), np.maximum(xv @ rnd(8, 8, seed=3).T, 0), rtol=1e-5, atol=1e-5)


def test_decode_step_helper_captures_once_and_writes_the_cache_in_place():
    d, max_len = 8, 6
    w = lf.tensor(rnd(d, d, seed=11))
    emb = lf.tensor(rnd(10, d, seed=12))
    F = lf.nn.functional

    def step(state):
        x = F.embedding(state.token, emb)[0]
        state.write("k", F.linear(x, w))
        scores = state.caches["k"] @ x + state.mask
        return F.softmax(scores, 0)

    decode = lf.graph.decode_step(step, max_len=max_len, caches={"k": (max_len, d)}, device=CPU)
    kc = np.zeros((max_len, d), np.float32)
    with count_launches(CPU) as d_all:
        for pos, tok in enumerate([3, 1, 4, 1, 5]):
            out = decode(tok, pos).numpy()
            x = rnd(10, d, seed=12)[tok]
            kc[pos] = rnd(d, d, seed=11) @ x
            s = kc @ x
            s[pos + 1:] = -np.inf
            ref = np.exp(s - s.max()) / np.exp(s - s.max()).sum()
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(decode.state.caches["k"].numpy(), kc, rtol=1e-5, atol=1e-6)
    assert decode.graph.is_hardware and d_all.graph_replays == 4  # captured on the first call only


def test_decode_state_refuses_bad_shapes_and_positions():
    with pytest.raises(lf.ShapeError, match="max_len"):
        lf.graph.DecodeState(4, {"k": (5, 8)}, device=CPU)
    state = lf.graph.DecodeState(4, {"k": (4, 8)}, device=CPU)
    with pytest.raises(lf.ShapeError, match="position"):
        state.set(1, 4)

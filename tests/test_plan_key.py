"""The structural plan key, made at record time (docs/semantics.md, The plan cache and its two paths).

Each pending node gets a descriptor when it is recorded; a drain's key is those descriptors
plus its live roots. These tests pin what the key must tell apart — a shared node from two
equal ones, a leaf read twice from two leaves, a live result from a dropped one, one stride
or offset from another, which buffer an in-place write lands in — and that a cache hit binds
this drain's buffers and scalars, never the ones its plan was built with.
"""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import given, settings, strategies as st

import lazyfuse as lf

CPU = lf.device("cpu")


def data(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)


def drained(fn):
    """Run ``fn`` (which records ops and drains them) and return (its result, the stats delta)."""
    lf.sync(CPU)
    before = lf.stats(CPU)
    out = fn()
    return out, lf.stats(CPU) - before


def hit_miss(d):
    return d.fusion_cache_hits, d.fusion_cache_misses


def test_a_shared_node_and_two_equal_nodes_get_different_plans():
    a = data(5, 7, seed=1)
    x = lf.tensor(a)

    def shared():
        e = x.exp()
        return (e * e).numpy()

    def duplicated():
        return (x.exp() * x.exp()).numpy()

    out1, d1 = drained(shared)
    out2, d2 = drained(duplicated)
    assert hit_miss(d1) == (0, 1) and hit_miss(d2) == (0, 1)   # the second is not the first's plan
    np.testing.assert_allclose(out1, np.exp(a) ** 2, rtol=1e-5)
    np.testing.assert_allclose(out2, np.exp(a) ** 2, rtol=1e-5)
    # each one again: its own plan, now cached
    _, d3 = drained(shared)
    _, d4 = drained(duplicated)
    assert hit_miss(d3) == (1, 0) and hit_miss(d4) == (1, 0)


def test_one_leaf_read_twice_is_not_two_leaves():
    a, b = data(6, seed=2), data(6, seed=3)
    x, y = lf.tensor(a), lf.tensor(b)
    same, d1 = drained(lambda: (x * 0.5 + x).numpy())
    other, d2 = drained(lambda: (x * 0.5 + y).numpy())
    assert d2.fusion_cache_misses == 1
    np.testing.assert_allclose(same, a * 0.5 + a, rtol=1e-6)
    np.testing.assert_allclose(other, a * 0.5 + b, rtol=1e-6)
    # the same structure over other buffers is a hit that reads those buffers
    z, w = lf.tensor(b), lf.tensor(a)
    swapped, d3 = drained(lambda: (z * 0.5 + w).numpy())
    assert hit_miss(d3) == (1, 0)
    np.testing.assert_allclose(swapped, b * 0.5 + a, rtol=1e-6)


def test_which_results_are_live_is_part_of_the_key():
    a = data(4, 9, seed=4)
    x = lf.tensor(a)

    def both_live():
        y = x * 2.0
        z = (y + 1.0).tanh()
        lf.sync(CPU)
        return y, z

    def only_z():
        z = (x * 2.0 + 1.0).tanh()
        lf.sync(CPU)
        return z

    (y, z), d1 = drained(both_live)
    z2, d2 = drained(only_z)
    assert d2.fusion_cache_misses == 1
    assert d1.ops_elided == 0 and d2.ops_elided == 0
    np.testing.assert_allclose(y.numpy(), a * 2, rtol=1e-6)
    np.testing.assert_allclose(z.numpy(), np.tanh(a * 2 + 1), rtol=1e-5)
    np.testing.assert_allclose(z2.numpy(), np.tanh(a * 2 + 1), rtol=1e-5)
    # the same program with y dropped before the drain: y is elided, z still right
    (y3, z3), d3 = drained(both_live)
    assert hit_miss(d3) == (1, 0)
    np.testing.assert_allclose(y3.numpy(), a * 2, rtol=1e-6)

    def y_dropped():
        y = x * 2.0
        z = (y + 1.0).tanh()
        del y
        lf.sync(CPU)
        return z
    z4, d4 = drained(y_dropped)
    assert hit_miss(d4) == (1, 0)   # only_z's plan (same nodes, same live set), not the one storing y
    assert d4.ops_elided == 0       # y's op ran, inside z's kernel
    np.testing.assert_allclose(z4.numpy(), np.tanh(a * 2 + 1), rtol=1e-5)


def test_strides_and_offsets_are_part_of_the_key():
    a = data(6, 6, seed=5)
    x = lf.tensor(a)
    plain, d1 = drained(lambda: (x + 1.0).numpy())
    corner, d0 = drained(lambda: (x[:3, :3] + 1.0).numpy())
    strided, d2 = drained(lambda: (x[::2, ::2] + 1.0).numpy())   # same shape and dtype, other strides
    head, d3 = drained(lambda: (x[:-1] + 1.0).numpy())
    tail, d4 = drained(lambda: (x[1:] + 1.0).numpy())          # same shape and strides, other offset
    assert [d.fusion_cache_misses for d in (d0, d2, d3, d4)] == [1, 1, 1, 1]
    # laid out as x (torch's layout), x.T + 1 is x + 1 in memory order: the same plan
    transposed, d5 = drained(lambda: (x.T + 1.0).numpy())
    assert hit_miss(d5) == (1, 0)
    np.testing.assert_allclose(plain, a + 1, rtol=1e-6)
    np.testing.assert_allclose(corner, a[:3, :3] + 1, rtol=1e-6)
    np.testing.assert_allclose(strided, a[::2, ::2] + 1, rtol=1e-6)
    np.testing.assert_allclose(transposed, a.T + 1, rtol=1e-6)
    np.testing.assert_allclose(head, a[:-1] + 1, rtol=1e-6)
    np.testing.assert_allclose(tail, a[1:] + 1, rtol=1e-6)


def test_in_place_writes_hit_and_land_in_their_own_buffers():
    a, b = data(8, seed=6), data(8, seed=7)
    x, y = lf.tensor(a), lf.tensor(b)
    _, d1 = drained(lambda: (x.add_(1.5), lf.sync(CPU)))
    _, d2 = drained(lambda: (y.add_(2.5), lf.sync(CPU)))     # same structure, other buffer and scalar
    assert d1.fusion_cache_hits + d1.fusion_cache_misses == 1 and hit_miss(d2) == (1, 0)
    np.testing.assert_allclose(x.numpy(), a + 1.5, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), b + 2.5, rtol=1e-6)


def test_a_dropped_result_in_the_queue_changes_nothing_live():
    a = data(3, 5, seed=8)
    x = lf.tensor(a)

    def program(with_dead):
        if with_dead:
            (x * 3.0).exp()          # recorded, dropped at once: elided
        z = (x - 0.5).abs()
        lf.sync(CPU)
        return z

    z1, d1 = drained(lambda: program(False))
    z2, d2 = drained(lambda: program(True))
    z3, d3 = drained(lambda: program(True))
    assert d1.ops_elided == 0 and d2.ops_elided == 2 and d3.ops_elided == 2
    assert hit_miss(d3) == (1, 0)
    for z in (z1, z2, z3):
        np.testing.assert_allclose(z.numpy(), np.abs(a - 0.5), rtol=1e-6)


# -- randomised: a cache hit binds this drain's inputs and scalars ------------------------------------
# every op keeps values in [-1, 1], so float32 and the float64 reference never part on overflow
UNARY = ["tanh", "sigmoid", "relu", "abs", "neg", "sin"]
BINARY = ["mean", "half_diff", "mul", "maximum"]


def run_program(program, inputs, scalars, lib):
    """Run ``program`` over ``inputs`` with lazyfuse or torch (``lib``); returns the new values."""
    vals = list(inputs)
    for kind, op, i, j, k in program:
        a = vals[i % len(vals)]
        b = vals[j % len(vals)]
        if kind == "unary":
            v = getattr(a, op)()
        elif op == "mean":
            v = (a + b) * 0.5
        elif op == "half_diff":
            v = (a - b) * 0.5
        elif op == "mul":
            v = a * b
        elif op == "maximum":
            v = lib.maximum(a, b)
        elif kind == "scalar":
            v = a * scalars[k] + scalars[k + 1]
        else:
            v = a.T
        vals.append(v)
    return vals[len(inputs):]


step = st.one_of(
    st.tuples(st.just("unary"), st.sampled_from(UNARY), st.integers(0, 20), st.just(0), st.just(0)),
    st.tuples(st.just("binary"), st.sampled_from(BINARY), st.integers(0, 20), st.integers(0, 20), st.just(0)),
    st.tuples(st.just("scalar"), st.just(""), st.integers(0, 20), st.just(0), st.integers(0, 4)),
    st.tuples(st.just("view"), st.just("T"), st.integers(0, 20), st.just(0), st.just(0)),
)


@settings(max_examples=25, deadline=None)
@given(program=st.lists(step, min_size=1, max_size=12), keep=st.lists(st.booleans(), min_size=12, max_size=12),
       seed=st.integers(0, 2 ** 16))
def test_a_repeated_program_hits_and_binds_its_own_inputs_and_scalars(program, keep, seed):
    rng = np.random.default_rng(seed)
    planned = None
    for run in range(2):
        arrays = [rng.uniform(-1, 1, size=(4, 4)).astype(np.float32) for _ in range(3)]
        scalars = [float(s) for s in rng.uniform(-0.5, 0.5, size=6).round(3)]
        lf.sync(CPU)
        before = lf.stats(CPU)
        outs = run_program(program, [lf.tensor(a) for a in arrays], scalars, lf)
        kept = [o for o, k in zip(outs, keep) if k] or outs[-1:]
        del outs   # the rest is dropped before the drain: elided
        lf.sync(CPU)
        d = lf.stats(CPU) - before
        if run == 0:
            planned = d.fusion_cache_hits + d.fusion_cache_misses
        else:   # the same structure: the cached plan, bound to this run's buffers and scalars
            assert hit_miss(d) == (planned, 0)
        ref = run_program(program, [torch.from_numpy(a).double() for a in arrays], scalars, torch)
        ref_kept = [r for r, k in zip(ref, keep) if k] or ref[-1:]
        for got, want in zip(kept, ref_kept):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)

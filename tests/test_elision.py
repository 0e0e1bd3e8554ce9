"""Drop-before-sync elision (docs/semantics.md, Elision).

A drain executes only what a live tensor needs, plus every in-place write to a live buffer. A
result whose last reference is dropped before the drain is never computed, nor is anything
only it needed; its ops are counted in ``ops_elided``. Elision never changes a live value.
"""
from __future__ import annotations

import gc

import numpy as np

import lazyfuse as lf

CPU = lf.device("cpu")


def measure(fn):
    lf.sync()
    before = lf.stats(CPU)
    out = fn()
    return out, lf.stats(CPU) - before


def test_a_dropped_chain_is_never_executed():
    x = lf.tensor([1.0, 2.0, 3.0])

    def run():
        y = ((x + 1) * 2).exp()
        del y
        lf.sync()
    _, d = measure(run)
    assert d.kernels_launched == 0
    assert d.fusion_cache_misses == d.fusion_cache_hits == 0   # nothing planned or compiled either
    assert d.ops_recorded == 3
    assert d.ops_elided == 3


def test_only_what_a_live_result_needs_runs():
    a = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    x = lf.tensor(a)

    def run():
        t = x * 2            # needed by the live result
        live = t + 1
        dead = (t * 3).exp()  # only the dropped result needs these two ops
        del dead, t
        return live.numpy()
    out, d = measure(run)
    np.testing.assert_allclose(out, a * 2 + 1)
    assert d.kernels_launched == 1
    assert d.ops_recorded == 4
    assert d.ops_elided == 2


def test_dropping_everything_leaves_the_counters_consistent():
    x = lf.tensor(np.arange(6, dtype=np.float32))

    def run():
        for _ in range(5):
            y = x.sin() + x.cos()
            z = y.sum()
        del y, z
        lf.sync()
    _, d = measure(run)
    assert d.kernels_launched == 0
    assert d.ops_elided == d.ops_recorded == 20


def test_an_in_place_write_lands_when_its_return_value_is_dropped():
    x = lf.tensor([1.0, 2.0, 3.0])

    def run():
        x.add_(1)                 # returns x: the returned reference is dropped at once
        x[0:2].mul_(10)           # a temporary view, dropped at once; the write lands in x
        x[2].fill_(-1)
        return x.numpy()
    out, d = measure(run)
    np.testing.assert_array_equal(out, [20.0, 30.0, -1.0])
    assert d.ops_elided == 0


def test_an_in_place_write_to_a_live_buffer_runs_even_if_nothing_reads_it():
    x = lf.tensor([1.0, 2.0])

    def run():
        x.mul_(3)
        lf.sync()                 # nobody reads x: the write still executes (x is live)
    _, d = measure(run)
    assert d.kernels_launched == 1
    np.testing.assert_array_equal(x.numpy(), [3.0, 6.0])


def test_a_write_into_a_tensor_that_is_then_dropped_is_elided():
    def run():
        t = lf.zeros(4)
        t.add_(1)
        t[1:3].fill_(7)
        del t
        lf.sync()
    _, d = measure(run)
    assert d.kernels_launched == 0
    assert d.ops_recorded > 0 and d.ops_elided == d.ops_recorded


def test_a_write_into_a_dropped_tensor_still_counts_for_a_live_reader():
    """The storage is dropped, but a live result read its written value: it must see the write."""
    a = lf.tensor([1.0, 2.0, 3.0])
    a[0] = 5.0
    y = a * 2
    del a
    np.testing.assert_array_equal(y.numpy(), [10.0, 4.0, 6.0])

    b = lf.tensor([1.0, 2.0, 3.0])
    z = b * 3                 # reads the old value
    b[1:].add_(1)
    w = b * 2                 # reads the new value
    del b
    np.testing.assert_array_equal(z.numpy(), [3.0, 6.0, 9.0])
    np.testing.assert_array_equal(w.numpy(), [2.0, 6.0, 8.0])

    c = lf.cat([lf.tensor([1.0, 2.0]), lf.tensor([3.0])])   # a pending storage built by writes
    c.add_(1.0)
    np.testing.assert_array_equal(c.numpy(), [2.0, 3.0, 4.0])


def test_views_keep_their_base_alive():
    x = lf.tensor(np.arange(6, dtype=np.float32))

    def run():
        base = x * 2
        v = base[1:4]
        del base
        gc.collect()
        return v.numpy()
    out, d = measure(run)
    np.testing.assert_array_equal(out, [2.0, 4.0, 6.0])
    assert d.ops_elided == 0


def test_a_write_through_a_view_of_a_dropped_base_is_seen_by_another_view():
    x = lf.tensor(np.arange(4, dtype=np.float32))
    base = x.clone()
    left, right = base[:3], base[1:]
    del base
    gc.collect()
    left.fill_(0)
    np.testing.assert_array_equal(right.numpy(), [0.0, 0.0, 3.0])
    np.testing.assert_array_equal(left.numpy(), [0.0, 0.0, 0.0])


def test_elision_does_not_change_live_values():
    a = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    x = lf.tensor(a)
    shared = (x * 1.5).tanh()
    keep = shared.sum(1)
    drop1 = shared.exp().amax()
    drop2 = shared[:, ::2] * 7
    del drop1, drop2
    keep2 = shared - 1
    del shared
    np.testing.assert_allclose(keep.numpy(), np.tanh(a * 1.5).sum(1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(keep2.numpy(), np.tanh(a * 1.5) - 1, rtol=1e-5)


def test_a_result_dropped_after_a_drain_keeps_others_intact():
    x = lf.tensor([1.0, 2.0])
    y = x + 1
    y.numpy()
    z = y * 10
    del y
    np.testing.assert_array_equal(z.numpy(), [20.0, 30.0])

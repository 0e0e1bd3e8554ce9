"""Fusion, asserted through ``lf.stats()`` deltas and the generated sources (docs/semantics.md, Fusion;
The plan cache and its two paths).

Every test drains whatever an earlier test left pending before it measures, then records a
program and drains it once: the counters moved by that drain are the program's.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import lazyfuse as lf

CPU = lf.device("cpu")
STORE = re.compile(r"\ba\d+\[[^\]]*\]\s*=[^=]")


def data(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)


def drained(fn):
    """Run ``fn`` (which records ops and drains them) and return (its result, the stats delta)."""
    lf.sync()
    before = lf.stats(CPU)
    out = fn()
    return out, lf.stats(CPU) - before


def last_plan():
    return next(reversed(CPU.engine.plans.values()))


def kernel_sources(plan):
    return [st.source for st in plan.steps if st.kind == "kernel"]


def stores(source: str) -> int:
    return sum(1 for line in source.splitlines() if STORE.search(line))


# -- elementwise chains -------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 8, 30])
def test_chain_of_n_elementwise_ops_is_one_kernel(n):
    a = data(4, 33)
    x = lf.tensor(a)
    ref = a.astype(np.float64)

    def run():
        y = x
        for i in range(n):
            y = (y * 0.5 + 0.25) if i % 3 == 0 else (y.tanh() if i % 3 == 1 else y - 0.125)
        return y.numpy()
    out, d = drained(run)
    for i in range(n):
        ref = (ref * 0.5 + 0.25) if i % 3 == 0 else (np.tanh(ref) if i % 3 == 1 else ref - 0.125)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    assert d.kernels_launched == 1
    assert d.ops_elided == 0
    (src,) = kernel_sources(last_plan())
    assert stores(src) == 1, src   # none of the n - 1 intermediates is written to memory


def test_a_chain_deeper_than_the_inline_bound_splits_into_few_kernels():
    """300 in-place ``add_`` (600 nested values) fused into one expression would pass Python's
    recursion limit in lowering and printing (it did: a RecursionError on every read, the device
    stuck); each kernel inlines at most MAX_INLINE_DEPTH values instead."""
    from lazyfuse.ir.planner import MAX_INLINE_DEPTH
    a = np.arange(-6, 6, dtype=np.int64)
    acc = lf.tensor(a)
    ref = a.copy()

    def run():
        for k in range(300):
            acc.add_(lf.full((12,), k % 7 - 3, dtype=lf.int64))
        return acc.numpy()
    out, d = drained(run)
    for k in range(300):
        ref += k % 7 - 3
    np.testing.assert_array_equal(out, ref)
    assert 2 <= d.kernels_launched <= d.ops_recorded // MAX_INLINE_DEPTH + 1   # each but the last that deep


def test_broadcast_operands_fuse_into_the_chain():
    a, b, c = data(3, 5), data(5, seed=1), data(3, 1, seed=2)
    x, y, z = lf.tensor(a), lf.tensor(b), lf.tensor(c)
    out, d = drained(lambda: ((x + y) * z - y).relu().numpy())
    np.testing.assert_allclose(out, np.maximum((a + b) * c - b, 0), rtol=1e-6)
    assert d.kernels_launched == 1


# -- reductions ---------------------------------------------------------------------------------------
def test_elementwise_prologue_fuses_into_the_reduction():
    a = data(6, 40)
    x = lf.tensor(a)
    out, d = drained(lambda: ((x * 2 + 1).exp() - 1).sum(1).numpy())
    np.testing.assert_allclose(out, (np.exp(a * 2 + 1) - 1).sum(1), rtol=1e-5)
    assert d.kernels_launched == 1
    (src,) = kernel_sources(last_plan())
    assert stores(src) == 1


def test_reduction_with_same_shape_epilogue_is_one_kernel():
    a = data(7, 9)
    x = lf.tensor(a)
    out, d = drained(lambda: x.mean(1).numpy())           # mean = sum / n: the division is an epilogue
    np.testing.assert_allclose(out, a.mean(1), rtol=1e-5)
    assert d.kernels_launched == 1
    out, d = drained(lambda: (x.sum(0, keepdim=True) * 3 + 1).sigmoid().numpy())
    np.testing.assert_allclose(out, 1 / (1 + np.exp(-(a.sum(0, keepdims=True) * 3 + 1))), rtol=1e-5)
    assert d.kernels_launched == 1


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_var_over_a_dim_is_one_kernel_in_two_stages(dim):
    a = data(5, 12, 3)
    x = lf.tensor(a)
    out, d = drained(lambda: x.var(dim).numpy())
    np.testing.assert_allclose(out, a.astype(np.float64).var(dim, ddof=1), rtol=1e-4, atol=1e-6)
    assert d.kernels_launched == 1
    plan = last_plan()
    (step,) = plan.steps
    assert len(step.kernel.stages) == 2       # the mean, then the sum of squared deviations
    assert stores(step.source) == 1
    _, d = drained(lambda: x.std(dim, keepdim=True).numpy())
    assert d.kernels_launched == 1


def test_reductions_over_different_axes_are_separate_kernels():
    a = data(4, 6)
    x = lf.tensor(a)
    (s0, s1), d = drained(lambda: (lambda e: (e.sum(0).numpy(), e.sum(1).numpy()))(x.exp()))
    np.testing.assert_allclose(s0, np.exp(a).sum(0), rtol=1e-5)
    np.testing.assert_allclose(s1, np.exp(a).sum(1), rtol=1e-5)
    # exp(x) is read by two kernels: materialized once (its own kernel), then the two sums
    assert d.kernels_launched == 3


# -- views ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("view", ["permute", "slice", "expand", "reshape", "transpose+slice", "unsqueeze"])
def test_views_inside_a_chain_add_no_kernel(view):
    a = data(4, 6, 5)
    x = lf.tensor(a)
    views = {
        "permute": (lambda t: t.permute(2, 0, 1), lambda t: t.transpose(2, 0, 1)),
        "slice": (lambda t: t[1:, ::2, 1:4], lambda t: t[1:, ::2, 1:4]),
        "expand": (lambda t: t[:, :1, :].expand(4, 3, 5), lambda t: np.broadcast_to(t[:, :1, :], (4, 3, 5))),
        "reshape": (lambda t: t.reshape(24, 5), lambda t: t.reshape(24, 5)),
        "transpose+slice": (lambda t: t.transpose(0, 2)[::2], lambda t: t.transpose(2, 1, 0)[::2]),
        "unsqueeze": (lambda t: t.unsqueeze(1)[:, :, 2], lambda t: t[:, None][:, :, 2]),
    }
    lf_view, np_view = views[view]
    out, d = drained(lambda: (lf_view((x * 2).exp()) + 1).sqrt().numpy())
    np.testing.assert_allclose(out, np.sqrt(np_view(np.exp(a * 2)) + 1), rtol=1e-5)
    assert d.kernels_launched == 1
    (src,) = kernel_sources(last_plan())
    assert stores(src) == 1


def test_reshape_of_a_contiguous_intermediate_is_index_arithmetic():
    a = data(6, 4)
    x = lf.tensor(a)
    out, d = drained(lambda: ((x + 1).reshape(3, 8).sum(1) * 2).numpy())
    np.testing.assert_allclose(out, (a + 1).reshape(3, 8).sum(1) * 2, rtol=1e-5)
    assert d.kernels_launched == 1


def test_a_head_merge_divides_only_the_head_offset():
    """Attention's head merge, ``(B, H, T, D).transpose(1, 2).reshape(B, T, H*D)``: the flat offset
    ``H*D*T*b + H*D*t + c`` over D is ``H*T*b + H*t + c // D`` exactly, so the kernel divides the
    channel alone (``c / D``, ``c % D``) and not the whole offset (a division chain per element,
    which kept the nanoGPT backward's q/k/v gradient copies from vectorising)."""
    a = data(2, 4, 8, 16)
    x = lf.tensor(a)
    out, d = drained(lambda: ((x * 2).transpose(1, 2).reshape(2, 8, 64) + 1).numpy())
    np.testing.assert_allclose(out, (a * 2).transpose(0, 2, 1, 3).reshape(2, 8, 64) + 1, rtol=1e-6)
    assert d.kernels_launched == 1
    (src,) = kernel_sources(last_plan())
    divided = re.findall(r"\(\(([^()]+)\) [/%] \d+\)", src)
    assert divided and all(re.fullmatch(r"\w+", base) for base in divided), src


# -- elision and sharing ----------------------------------------------------------------------------
def test_a_dropped_result_launches_nothing_and_counts_as_elided():
    x = lf.tensor(data(8))

    def run():
        y = (x * 3).exp() + 1
        del y
        lf.sync()
    _, d = drained(run)
    assert d.kernels_launched == 0
    assert d.fusion_cache_misses == 0
    assert d.ops_elided == d.ops_recorded == 3


def test_a_result_read_by_two_kernels_is_materialized_once():
    a = data(5, 7)
    x = lf.tensor(a)

    def run():
        e = (x * 0.5).exp()
        r = e.sum(1)            # a kernel of its own (a reduction)...
        q = (e * e).amax(0)     # ...and another over different axes: e is materialized for both
        del e
        return r.numpy(), q.numpy()
    (r, q), d = drained(run)
    np.testing.assert_allclose(r, np.exp(a * 0.5).sum(1), rtol=1e-5)
    np.testing.assert_allclose(q, (np.exp(a * 0.5) ** 2).max(0), rtol=1e-5)
    assert d.kernels_launched == 3
    plan = last_plan()
    assert len(plan.temps) == 1          # e: one intermediate buffer, written once
    assert sum(stores(s) for s in kernel_sources(plan)) == 3


def test_two_live_results_of_one_chain():
    a = data(9)
    x = lf.tensor(a)

    def run():
        y = x.exp()
        z = y * 2 + 1
        return y.numpy(), z.numpy()
    (y, z), d = drained(run)
    np.testing.assert_allclose(z, np.exp(a) * 2 + 1, rtol=1e-5)
    # both are live: each is stored; y is never recomputed from memory it wrote twice
    assert d.kernels_launched <= 2
    assert sum(stores(s) for s in kernel_sources(last_plan())) == 2


# -- the plan cache ---------------------------------------------------------------------------------
def test_second_identical_drain_hits_the_plan_cache():
    x = lf.tensor(data(4, 4, seed=7))

    def program():
        return ((x * 2).exp().sum(0) + 1).numpy()
    first, d1 = drained(program)
    assert d1.fusion_cache_hits + d1.fusion_cache_misses == 1
    second, d2 = drained(program)
    assert (d2.fusion_cache_hits, d2.fusion_cache_misses) == (1, 0)
    assert d2.kernels_launched == d1.kernels_launched
    np.testing.assert_array_equal(first, second)


def test_a_scalar_change_still_hits_but_a_shape_change_misses():
    a = data(3, 10, seed=3)
    x = lf.tensor(a)
    out2, _ = drained(lambda: (x * 2.0 - 1.5).tanh().numpy())
    out3, d = drained(lambda: (x * 3.0 - 0.5).tanh().numpy())   # same structure, other scalars
    assert (d.fusion_cache_hits, d.fusion_cache_misses) == (1, 0)
    np.testing.assert_allclose(out2, np.tanh(a * 2 - 1.5), rtol=1e-5)
    np.testing.assert_allclose(out3, np.tanh(a * 3 - 0.5), rtol=1e-5)   # the new scalars were used
    y = lf.tensor(data(3, 11, seed=4))
    _, d = drained(lambda: (y * 2.0 - 1.5).tanh().numpy())
    assert (d.fusion_cache_hits, d.fusion_cache_misses) == (0, 1)


def test_a_dtype_change_misses():
    a = data(6, seed=5)
    x32, x64 = lf.tensor(a), lf.tensor(a.astype(np.float64))
    drained(lambda: (x32 + 1).exp().numpy())
    _, d = drained(lambda: (x64 + 1).exp().numpy())
    assert d.fusion_cache_misses == 1


def test_fused_in_place_update_is_one_kernel():
    a = data(16, seed=6)
    x = lf.tensor(a)

    def run():
        x.mul_(2).add_(1)
        return x.numpy()
    out, d = drained(run)
    np.testing.assert_allclose(out, a * 2 + 1, rtol=1e-6)
    assert d.kernels_launched == 1


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_a_fused_float_to_int_to_float_cast_gives_plus_zero(device):
    """-0.5 -> int 0 -> float is +0.0 as in torch (gcc under -fno-trapping-math folds the two
    casts into truncf, which gave -0.0 and so 1 / x = -inf: found by the random program test)."""
    x = torch.tensor([[-0.5, 0.5, -3.7, -0.2]], dtype=torch.bfloat16)
    got = lf.tensor(x, device=device).int().reciprocal().torch()
    want = x.int().reciprocal()
    assert torch.equal(got, want), (got, want)
    back = lf.tensor(x, device=device).long().float().torch()
    assert not back.signbit()[back == 0].any()

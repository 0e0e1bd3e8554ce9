"""float16/bfloat16 round like torch eager: every fused op's result is rounded to its dtype
(torch rounds every op), and the composites torch computes in float32 (softmax, norms,
mean/var/std, a matmul's dot products) are computed in float32 and rounded once."""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from programs import COMMON

F = lf.nn.functional
DEVICES = ["cpu", "interpreter", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="the cuda device needs a GPU"))]
HALVES = [torch.float16, torch.bfloat16]
BF16_MAX = torch.finfo(torch.bfloat16).max


def ulps_apart(a: torch.Tensor, b: torch.Tensor) -> int:
    """The largest distance in units in the last place between two tensors of one 16-bit float
    dtype (0 where both are NaN, a huge number where only one is)."""
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    nan_a, nan_b = a.isnan(), b.isnan()
    if not torch.equal(nan_a, nan_b):
        return 1 << 30

    def ordered(t):   # sign-magnitude bits -> integers in value order (+0 and -0 both 0)
        i = t.view(torch.int16).to(torch.int64)
        return torch.where(i < 0, -(i & 0x7FFF), i)

    d = (ordered(a) - ordered(b)).abs().masked_fill(nan_a, 0)
    return int(d.max()) if d.numel() else 0


@pytest.mark.parametrize("device", DEVICES)
def test_float16_pow_that_overflows_is_inf_inside_the_fused_kernel(device):
    """The bug hypothesis found: 8 ** 8 overflows float16 to inf in torch, so v - v is nan;
    a kernel keeping v in float32 would give 0."""
    x = lf.tensor([8.0, 2.0, -3.0], dtype=lf.float16, device=device)
    y = lf.tensor([8.0, 3.0, 2.0], dtype=lf.float16, device=device)
    v = x ** y
    v.sub_(v)
    tv = x.torch() ** y.torch()
    tv.sub_(tv)
    got = v.torch()
    assert got.dtype == torch.float16
    assert ulps_apart(got, tv) == 0, (got, tv)
    assert got[0].isnan()


@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_sum_that_rounds_up_to_inf_inside_the_fused_kernel(device):
    """bf16 max + half an ulp is finite in float32 but rounds (to even) to inf in bfloat16."""
    x = lf.tensor([BF16_MAX, 1.0], dtype=lf.bfloat16, device=device)
    y = lf.tensor([2.0 ** 119, 1.0], dtype=lf.bfloat16, device=device)
    v = x + y
    w = v - v
    tv = x.torch() + y.torch()
    assert tv[0].isinf()
    assert ulps_apart(w.torch(), tv - tv) == 0, (w.torch(), tv - tv)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_an_intermediate_product_is_rounded_before_the_next_op(device, dtype):
    """(1 + 3/128)^2 - 1: the square rounds in both dtypes before the subtraction exposes it."""
    x = lf.tensor(torch.tensor([1.0234375, 1.5, -1.0234375], dtype=dtype), device=device)
    got = (x * x - 1.0).torch()
    tx = x.torch()
    ref = tx * tx - 1.0
    assert ulps_apart(got, ref) == 0, (got, ref)
    unrounded = (tx.double() * tx.double() - 1.0).to(dtype)
    assert not torch.equal(ref, unrounded)   # the case tells rounding from not rounding


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_a_product_of_two_tensors_is_rounded_before_the_subtraction(device, dtype):
    """x - t * l, every operand a tensor: on a CPU with AVX512-FP16 gcc made the two ops one
    half FMA (an unrounded product) in a third of 1000 random elements, the vector loop and its
    scalar tail alike (conformance, all samples: float16 poisson_nll_loss)."""
    g = torch.Generator().manual_seed(0)
    x, t, l = ((torch.rand(1000, generator=g) * 8).to(dtype) for _ in range(3))
    got = (lf.tensor(x, device=device) - lf.tensor(t, device=device) * lf.tensor(l, device=device)).torch()
    ref = x - t * l
    assert ulps_apart(got, ref) == 0, (got, ref)
    assert not torch.equal(ref, (x.float() - t.float() * l.float()).to(dtype))   # rounding shows
    # the random chains' case: (6 * b) + b, b = 0.3333, is 2.334 when the product rounds first (2.332 fused)
    b = torch.tensor([0.3333, 0.1, 3.0], dtype=dtype)
    a = torch.tensor([6.0, 7.25, -1.5], dtype=dtype)
    got = (lf.tensor(a, device=device) * lf.tensor(b, device=device) + lf.tensor(b, device=device)).torch()
    assert ulps_apart(got, a * b + b) == 0, (got, a * b + b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_a_reduction_result_is_rounded_where_the_kernel_reads_it(device, dtype):
    """A sum read back inside its kernel (x - sum) is the dtype's rounded sum, as in torch."""
    t = torch.tensor([[1024.0, 1.0, 1.0, 0.5], [3.0, 2.0 ** -3, 7.0, 1.0]], dtype=dtype)
    x = lf.tensor(t, device=device)
    got = (x - x.sum(-1, keepdim=True)).torch()
    assert ulps_apart(got, t - t.sum(-1, keepdim=True)) == 0


@pytest.mark.parametrize("device", DEVICES)
def test_bfloat16_conversions_round_to_nearest_even(device):
    """float32 -> bfloat16 rounds to nearest (Triton's interpreter truncates in ``.to``), and a
    ``full`` value is rounded before the op that reads it, as torch's tensor is."""
    t = torch.tensor([1.0 + 2 ** -8 + 2 ** -10, -(1.0 + 2 ** -8 + 2 ** -10), 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8])
    assert ulps_apart(lf.tensor(t, device=device).bfloat16().torch(), t.bfloat16()) == 0
    got = (lf.full((3,), 0.1, dtype=lf.bfloat16, device=device) * 3).torch()
    assert ulps_apart(got, torch.full((3,), 0.1, dtype=torch.bfloat16) * 3) == 0


# -- random elementwise chains vs torch in the same dtype ------------------------------------------
# add/sub/mul/div/sqrt in float32 rounded to a 16-bit float are correctly rounded (float32 has more
# than 2p + 2 bits), so chains of them match torch bit for bit; the transcendentals are not
# correctly rounded in either library: one of them, applied last, is held to 1 ulp.
EXACT = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "max": lambda a, b: a.maximum(b) if isinstance(a, torch.Tensor) else lf.maximum(a, b),
    "sqrt": lambda a, b: a.abs().sqrt(), "neg": lambda a, b: -a, "scale": lambda a, b: a * 0.1,
    "shift": lambda a, b: a + 3.0, "square": lambda a, b: a * a,
    "lost_bits": lambda a, b: (a + b) - a,   # shows whether a + b was rounded (or overflowed)
}
LAST = {"exp": lambda a: a.exp(), "tanh": lambda a: a.tanh(), "sigmoid": lambda a: a.sigmoid(),
        "log": lambda a: a.abs().log(), "identity": lambda a: a,
        "sin": lambda a: a.clamp(-100.0, 100.0).sin()}   # huge arguments test argument reduction, not rounding
VALUES = st.sampled_from([0.0, -0.0, 1.0, -1.5, 0.1, 3.0, 7.25, 100.0, -300.0, 1e-3, 6e4, 3e38, -2.5e4, 0.3333])


def _run_chain(data, device, dtype):
    a = torch.tensor(data.draw(st.lists(VALUES, min_size=6, max_size=6)), dtype=torch.float32).to(dtype)
    b = torch.tensor(data.draw(st.lists(VALUES, min_size=6, max_size=6)), dtype=torch.float32).to(dtype)
    steps = data.draw(st.lists(st.tuples(st.sampled_from(sorted(EXACT)), st.booleans()), min_size=1, max_size=6))
    last = data.draw(st.sampled_from(sorted(LAST)))
    la, lb = lf.tensor(a, device=device), lf.tensor(b, device=device)
    ta, tb = a, b
    for name, swap in steps:
        op = EXACT[name]
        la, ta = (op(lb, la), op(tb, ta)) if swap else (op(la, lb), op(ta, tb))
    got, ref = LAST[last](la).torch(), LAST[last](ta)
    allowed = 0 if last == "identity" else 1
    assert ulps_apart(got, ref) <= allowed, (steps, last, a, b, got, ref)


@settings(COMMON, max_examples=40)
@given(st.data(), st.sampled_from(HALVES))
def test_random_half_chains_match_torch_on_cpu(data, dtype):
    _run_chain(data, "cpu", dtype)


@settings(COMMON, max_examples=12)
@given(st.data(), st.sampled_from(HALVES))
def test_random_half_chains_match_torch_on_the_interpreter(data, dtype):
    _run_chain(data, "interpreter", dtype)


# -- composites compute in float32 and round once ---------------------------------------------------
COMPOSITES = {
    "softmax": (lambda x, w, b: F.softmax(x, -1), lambda x, w, b: torch.softmax(x, -1)),
    "log_softmax": (lambda x, w, b: F.log_softmax(x, -1), lambda x, w, b: torch.log_softmax(x, -1)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b),
                   lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)),
    "rms_norm": (lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w),
                 lambda x, w, b: torch.nn.functional.rms_norm(x, (x.shape[-1],), w)),
    "mean": (lambda x, w, b: x.mean(-1), lambda x, w, b: x.mean(-1)),
    "var": (lambda x, w, b: x.var(-1), lambda x, w, b: x.var(-1)),
    "std": (lambda x, w, b: x.std(0), lambda x, w, b: x.std(0)),
    "matmul": (lambda x, w, b: x @ x.T, lambda x, w, b: x @ x.T),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_half_composites_round_once_like_torch(device, dtype, name):
    g = torch.Generator().manual_seed(7)
    x, w, b = (torch.randn(shape, generator=g).to(dtype) for shape in ((6, 24), (24,), (24,)))
    ours, theirs = COMPOSITES[name]
    got = ours(*(lf.tensor(t, device=device) for t in (x, w, b))).torch()
    ref = theirs(x, w, b)
    assert got.dtype == dtype
    # torch's own half kernels order a few float32 steps differently: at most 1 ulp apart
    assert ulps_apart(got, ref) <= 1, (name, got, ref)


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("dtype", [lf.float16, lf.bfloat16], ids=str)
def test_half_composites_take_as_many_kernels_as_float32(device, dtype):
    """The float32 upcasts and the casts back fuse: no composite gains a kernel."""
    def counts(dt):
        g = torch.Generator().manual_seed(3)
        x, w, q = (lf.tensor(torch.randn(s, generator=g), device=device).to(dt) for s in ((8, 32), (32,), (1, 2, 8, 16)))
        m = lf.tensor(torch.randn(32, 16, generator=g), device=device).to(dt)
        lf.sync(device)   # inputs in memory, as a model's weights and activations are
        cases = [F.softmax(x, -1), F.log_softmax(x, -1), F.layer_norm(x, (32,), w, w), F.rms_norm(x, (32,), w),
                 x.mean(-1), x.var(-1), x.std(-1), F.gelu(x @ m + 1.0),
                 F.scaled_dot_product_attention(q, q, q, is_causal=True)]
        return [len(lf.explain(y).kernels) for y in cases]

    assert counts(dtype) == counts(lf.float32)

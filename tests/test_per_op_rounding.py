"""Every op's result is rounded as torch eager rounds it, bit for bit: the C compiler fuses no
op's product into the next op's addition (``-ffp-contract=off``, lazyfuse/codegen/c_compile.py),
and the multiply-adds torch's own kernels fuse (lerp, addcmul) are printed as one
(``LF__MADDF``/``LF__MADD``). Each test runs on the C backend for its default ``-march`` and for
``x86-64-v2`` (no FMA: the macros' unfused branch), float32 and float64."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from lazyfuse.codegen import c_compile

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

DTYPES = [torch.float32, torch.float64]
BITS = {torch.float32: torch.int32, torch.float64: torch.int64}
SIZES = [1, 5, 16, 37, 1000]   # one element, vector tails, whole vectors, a parallel loop
OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": lambda x, y: x / y}


@pytest.fixture(scope="module", params=["native", "x86-64-v2"])
def march(request):
    """The ``-march`` target the kernels of a test compile for. The plans built for the other one
    are forgotten (a plan holds its compiled kernels; the library key holds the target)."""
    if c_compile.compiler() is None:
        pytest.skip("no C compiler")
    before = os.environ.get("LAZYFUSE_MARCH")
    os.environ["LAZYFUSE_MARCH"] = request.param
    _forget_plans()
    assert f"-march={request.param}" in c_compile.flags()
    yield request.param
    _forget_plans()
    if before is None:
        del os.environ["LAZYFUSE_MARCH"]
    else:
        os.environ["LAZYFUSE_MARCH"] = before


def _forget_plans():
    engine = lf.device("cpu").engine
    lf.sync(lf.device("cpu"))
    for cache in (engine.plans, engine.structures, engine.planned):
        cache.clear()


def lz(t: torch.Tensor):
    return lf.tensor(t.numpy())


def assert_same_bits(got: torch.Tensor, want: torch.Tensor, what: str = ""):
    """``got`` is ``want`` bit for bit (any NaN matches any NaN; -0 is not +0)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), f"{what}: NaN at other places"
    g, w = got[~nan], want[~nan]
    differ = g.view(BITS[g.dtype]) != w.view(BITS[w.dtype])
    if differ.any():
        i = int(differ.nonzero()[0])
        raise AssertionError(f"{what}: {int(differ.sum())} of {g.numel()} elements differ from torch's, "
                             f"e.g. {g[i].item()!r} where torch gives {w[i].item()!r}")


@st.composite
def programs(draw):
    """A chain of + - * / over three inputs (and a Python number now and then), each step's
    operands any earlier values, and the steps whose results the program returns: the last one
    and maybe others. The rest are dropped before the drain, so a product read only by a later
    sum lives in the kernel alone (where the compiler could have fused the two)."""
    steps = []
    for _ in range(draw(st.integers(1, 8))):
        n_values = 3 + len(steps)
        left = draw(st.integers(0, n_values - 1))
        right = draw(st.one_of(st.integers(0, n_values - 1), st.sampled_from([0.1, -2.5, 3.0, 1e-3])))
        steps.append((draw(st.sampled_from(sorted(OPS))), left, right))
    returned = draw(st.sets(st.integers(0, len(steps) - 1))) | {len(steps) - 1}
    return steps, sorted(returned)


def _run(program, inputs):
    steps, returned = program
    values = list(inputs)
    for op, left, right in steps:
        values.append(OPS[op](values[left], values[right] if isinstance(right, int) else right))
    return [values[len(inputs) + i] for i in returned]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@settings(max_examples=60, deadline=None, derandomize=True)
@given(program=programs(), n=st.sampled_from(SIZES), seed=st.integers(0, 2**16))
def test_elementwise_chains_round_each_op(march, dtype, program, n, seed):
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(n, generator=g, dtype=dtype) * 4 for _ in range(3)]
    want = _run(program, inputs)
    got = _run(program, [lz(t) for t in inputs])
    for i, (gv, wv) in enumerate(zip(got, want)):
        assert_same_bits(gv.torch(), wv, f"{march}, returned value {i} of {program}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", SIZES)
def test_a_product_added(march, dtype, n):
    """``a * b + c`` and ``c - a * b`` as two ops each: the product read by the sum alone, and the
    product also returned."""
    a, b, c = (torch.randn(n, dtype=dtype, generator=torch.Generator().manual_seed(k)) for k in range(3))
    assert_same_bits((lz(a) * lz(b) + lz(c)).torch(), a * b + c, f"{march}: a * b + c")
    assert_same_bits((lz(c) - lz(a) * lz(b)).torch(), c - a * b, f"{march}: c - a * b")
    p = lz(a) * lz(b)
    s, d = p + lz(c), lz(c) - p
    for got, want, what in ((p, a * b, "a * b"), (s, a * b + c, "a * b + c"), (d, c - a * b, "c - a * b")):
        assert_same_bits(got.torch(), want, f"{march}: {what}, a * b returned too")


# rows of one repeated value x = a * b (a product op, fused into the kernel that reads it). The
# sum of one or two is exact, so the mean is x and x - mean is 0, as torch's; three or four sum
# in torch's order, rounded (their deviations are torch's bit for bit). Longer rows sum in another
# order than torch's vectorised lanes: not this file's subject.
ROW_LENGTHS = [1, 2, 3, 4]
EXACT_SUMS = (1, 2)


def _equal_rows(dtype, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    a, b = torch.randn(6, 1, dtype=dtype, generator=g), torch.randn(6, 1, dtype=dtype, generator=g)
    return a.expand(6, n).contiguous(), b.expand(6, n).contiguous()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", ROW_LENGTHS)
def test_deviation_from_the_mean_of_equal_values_is_zero(march, dtype, n):
    a, b = _equal_rows(dtype, n)

    def deviation(x):   # (x dropped when it returns: the product lives in the kernel alone)
        return x - x.mean(1, keepdim=True)
    got = deviation(lz(a) * lz(b)).torch()
    want = deviation(a * b)
    assert_same_bits(got, want, f"{march}, n={n}")
    assert n not in EXACT_SUMS or not got.any()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", EXACT_SUMS)
def test_layer_norm_of_constant_rows_is_zero(march, dtype, n):
    a, b = _equal_rows(dtype, n)
    got = lf.nn.functional.layer_norm(lz(a) * lz(b), (n,)).torch()
    want = torch.nn.functional.layer_norm(a * b, (n,))
    assert_same_bits(got, want, f"{march}, n={n}")
    assert not got.any()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("correction", [0, 1])
def test_var_and_std_of_one_element(march, dtype, correction):
    """One element: its deviation is 0 (NaN for inf and NaN), so var is 0 with correction 0 and
    NaN (0 / 0) with correction 1, as torch's; the element a product fused into the kernel."""
    a = torch.tensor([[1.1], [-3.7], [float("inf")], [float("nan")], [0.3]], dtype=dtype)
    b = torch.tensor([[0.7], [1.3], [2.0], [1.0], [1e-30]], dtype=dtype)
    for name in ("var", "std"):
        got = getattr(lz(a) * lz(b), name)(1, correction=correction).torch()
        assert_same_bits(got, getattr(a * b, name)(1, correction=correction), f"{march}: {name}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", SIZES)
def test_torchs_fused_multiply_adds(march, dtype, n):
    """lerp and addcmul: torch's kernels fuse their last product into the sum (where the CPU has
    FMA); addcdiv divides last, so it has none."""
    g = torch.Generator().manual_seed(n)
    x, t1, t2 = (torch.randn(n, dtype=dtype, generator=g) for _ in range(3))
    w = torch.rand(n, dtype=dtype, generator=g) * 2 - 0.5   # both of lerp's formulas
    cases = {
        "lerp, tensor weight": (lf.lerp(lz(x), lz(t1), lz(w)), torch.lerp(x, t1, w)),
        "lerp, 0.3": (lf.lerp(lz(x), lz(t1), 0.3), torch.lerp(x, t1, 0.3)),
        "lerp, 0.7": (lf.lerp(lz(x), lz(t1), 0.7), torch.lerp(x, t1, 0.7)),
        "addcmul": (lf.addcmul(lz(x), lz(t1), lz(t2)), torch.addcmul(x, t1, t2)),
        "addcmul, value 0.3": (lf.addcmul(lz(x), lz(t1), lz(t2), value=0.3), torch.addcmul(x, t1, t2, value=0.3)),
        "addcdiv": (lf.addcdiv(lz(x), lz(t1), lz(t2)), torch.addcdiv(x, t1, t2)),
        "addcdiv, value 0.3": (lf.addcdiv(lz(x), lz(t1), lz(t2), value=0.3), torch.addcdiv(x, t1, t2, value=0.3)),
    }
    if march != "native":   # torch's kernels run for this CPU (FMA where it has it): only the unfused ops compare
        cases = {k: v for k, v in cases.items() if k.startswith("addcdiv")}
    for what, (got, want) in cases.items():
        assert_same_bits(got.torch(), want, f"{march}: {what}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_interpreter_rounds_as_torch_too(dtype):
    """The Triton printer's side (run by the interpreter: numpy rounds each op, tl.fma once):
    a product added, lerp's two formulas and addcmul, bit for bit."""
    dev = lf.device("interpreter")
    g = torch.Generator().manual_seed(1)
    x, t1, t2 = (torch.randn(1000, dtype=dtype, generator=g) for _ in range(3))
    w = torch.rand(1000, dtype=dtype, generator=g) * 2 - 0.5
    on = lambda t: lf.tensor(t.numpy(), device=dev)  # noqa: E731
    cases = {"a * b + c": (on(t1) * on(t2) + on(x), t1 * t2 + x),
             "lerp": (lf.lerp(on(x), on(t1), on(w)), torch.lerp(x, t1, w)),
             "addcmul, value 0.3": (lf.addcmul(on(x), on(t1), on(t2), value=0.3), torch.addcmul(x, t1, t2, value=0.3))}
    for what, (got, want) in cases.items():
        assert_same_bits(got.torch(), want, f"interpreter: {what}")


def test_addcmul_gradients_match_torch():
    x, t1, t2 = (torch.randn(7, dtype=torch.float64, requires_grad=True) for _ in range(3))
    torch.addcmul(x, t1, t2, value=0.5).sum().backward()
    lx, l1, l2 = (lf.tensor(t.detach().numpy(), requires_grad=True) for t in (x, t1, t2))
    lf.addcmul(lx, l1, l2, value=0.5).sum().backward()
    for lt, tt in ((lx, x), (l1, t1), (l2, t2)):
        np.testing.assert_allclose(lt.grad.numpy(), tt.grad.numpy(), rtol=1e-15)

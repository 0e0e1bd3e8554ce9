"""Differential tests of the Triton kernels against torch eager (float64 reference for float ops).

They run on ``lf.device("interpreter")`` (Triton's interpreter on the CPU) unless
``LAZYFUSE_TEST_DEVICE`` names another device: ``bench/gpu_check.py`` runs this very file with
``LAZYFUSE_TEST_DEVICE=cuda``, so the tolerances are those of compiled Triton on a GPU
(approximate float32 transcendentals), not of numpy. The interpreter runs each program as a
Python call, so hypothesis keeps ``max_examples`` small and shapes modest.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf

DEVICE = os.environ.get("LAZYFUSE_TEST_DEVICE", "interpreter")
FEW = settings(max_examples=25, deadline=None, derandomize=True)

# (rtol, atol) of a result of each dtype against the float64 reference rounded to that dtype
TOL = {torch.float64: (1e-9, 1e-12), torch.float32: (2e-5, 1e-6), torch.float16: (4e-3, 1e-3),
       torch.bfloat16: (3e-2, 1e-2)}
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
SPECIAL = [float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-30, -1e-30, 0.5, -0.5, 1.0, -1.0, 2.5, -3.0,
           7.25, -11.0, 30.0, -30.0, 88.0, -100.0, 1e4, -1e4]


@pytest.fixture(scope="module")
def dev():
    return lf.device(DEVICE)


def lft(t: torch.Tensor, dev):
    return lf.tensor(t, device=dev)


def check(actual, expected: torch.Tensor, dtype=None):
    """``actual`` (a lazyfuse tensor) against ``expected`` (a torch tensor, float64 for float ops)."""
    got = actual.torch()
    dtype = dtype or got.dtype
    assert got.dtype == dtype, (got.dtype, dtype)
    assert tuple(got.shape) == tuple(expected.shape)
    if dtype.is_floating_point:
        rtol, atol = TOL[dtype]
        ref = expected.to(dtype).to(torch.float64)
        torch.testing.assert_close(got.to(torch.float64), ref, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, expected.to(dtype)), (got, expected)


def ref64(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float64) if t.dtype.is_floating_point else t


# -- fusion ----------------------------------------------------------------------------------------
def test_elementwise_chain_is_one_kernel(dev):
    x, y = torch.randn(37, 53), torch.randn(37, 53)
    a, b = lft(x, dev), lft(y, dev)
    lf.sync(dev)
    lf.reset_stats(dev)
    out = (a * b + 1).tanh() * (-a * a).exp() + b.sigmoid()
    x, y = ref64(x), ref64(y)
    check(out, torch.tanh(x * y + 1) * torch.exp(-x * x) + torch.sigmoid(y))
    assert lf.stats(dev).kernels_launched == 1


def test_broadcast_and_views_fuse(dev):
    x, y = torch.randn(4, 6, 5), torch.randn(5)
    a, b = lft(x, dev), lft(y, dev)
    lf.sync(dev)
    lf.reset_stats(dev)
    out = (a.permute(2, 1, 0) * b[:, None, None] + a.transpose(0, 2)[:, 1, :].unsqueeze(1)).relu()
    x, y = ref64(x), ref64(y)
    check(out, (x.permute(2, 1, 0) * y[:, None, None] + x.transpose(0, 2)[:, 1, :].unsqueeze(1)).relu())
    assert lf.stats(dev).kernels_launched == 1


def test_reduction_with_prologue_and_epilogue_is_one_kernel(dev):
    x = torch.randn(8, 300)
    a = lft(x, dev)
    lf.sync(dev)
    lf.reset_stats(dev)
    out = (a * 2).exp().sum(1) * 0.5
    check(out, torch.exp(ref64(x) * 2).sum(1) * 0.5)
    assert lf.stats(dev).kernels_launched == 1


# -- every op, special values ----------------------------------------------------------------------
UNARY = {
    "neg": (lambda t: -t, lambda t: -t), "abs": (lambda t: t.abs(), torch.abs),
    "exp": (lambda t: t.exp(), torch.exp), "log": (lambda t: t.log(), torch.log),
    "sqrt": (lambda t: t.sqrt(), torch.sqrt), "rsqrt": (lambda t: t.rsqrt(), torch.rsqrt),
    "sin": (lambda t: t.sin(), torch.sin), "cos": (lambda t: t.cos(), torch.cos),
    "tanh": (lambda t: t.tanh(), torch.tanh), "sigmoid": (lambda t: t.sigmoid(), torch.sigmoid),
    "relu": (lambda t: t.relu(), torch.relu), "gelu": (lambda t: t.gelu(), F.gelu),
    "silu": (lambda t: t.silu(), F.silu), "reciprocal": (lambda t: t.reciprocal(), torch.reciprocal),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_special_values(dev, name, dtype):
    ours, theirs = UNARY[name]
    vals = SPECIAL + [0.001 * k for k in range(-40, 40, 3)]
    if name in ("sin", "cos") and dtype is torch.float32 and DEVICE != "interpreter":
        vals = [v for v in vals if abs(v) < 100]    # compiled tl.sin/cos: fast range reduction only
    x = torch.tensor(vals, dtype=torch.float64).to(dtype)
    check(ours(lft(x, dev)), theirs(ref64(x)))


def _binary_inputs(dtype):
    if dtype.is_floating_point:
        v = torch.tensor(SPECIAL, dtype=torch.float64)
        return v.repeat_interleave(len(SPECIAL)).to(dtype), v.repeat(len(SPECIAL)).to(dtype)
    if dtype is torch.bool:
        return torch.tensor([False, False, True, True]), torch.tensor([False, True, False, True])
    g = torch.Generator().manual_seed(1)
    a = torch.randint(-50, 50, (400,), generator=g).to(dtype)
    b = torch.randint(-7, 8, (400,), generator=g).to(dtype)
    return a, b


BINARY = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
          "div": lambda a, b: a / b, "floordiv": lambda a, b: a // b, "mod": lambda a, b: a % b,
          "pow": lambda a, b: a ** b, "maximum": lambda a, b: lf.maximum(a, b) if isinstance(a, lf.Tensor)
          else torch.maximum(a, b), "minimum": lambda a, b: lf.minimum(a, b) if isinstance(a, lf.Tensor)
          else torch.minimum(a, b), "lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
          "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int32, torch.int64])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_special_values(dev, name, dtype):
    a, b = _binary_inputs(dtype)
    fn = BINARY[name]
    if name in ("floordiv", "mod") and not dtype.is_floating_point:
        b = torch.where(b == 0, torch.ones_like(b), b)   # torch raises on integer division by zero
    if name == "pow":
        if dtype.is_floating_point:
            a = torch.where(a == 0, torch.zeros_like(a), a)   # no -0.0 bases: pow(-0, -1) sign differs
            ok = (a.abs() < 200) & (b.abs() < 40) | ~torch.isfinite(a) | ~torch.isfinite(b)
            a, b = a[ok], b[ok]
        else:
            a, b = a.clamp(-6, 6), b.clamp(-2, 12)
    expected = fn(ref64(a), ref64(b))
    check(fn(lft(a, dev), lft(b, dev)), expected, expected.dtype if not dtype.is_floating_point or
          expected.dtype is torch.bool else dtype)


def test_int_division_by_zero_raises_as_torchs_cpu(dev):
    a = lft(torch.tensor([7, -7, 3]), dev)
    b = lft(torch.tensor([0, 1, 0]), dev)
    for fn in (lambda x, y: x // y, lambda x, y: x % y):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(torch.tensor([7, -7, 3]), torch.tensor([0, 1, 0]))
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            fn(a, b).tolist()


def test_bool_and_int_logic(dev):
    a, b = _binary_inputs(torch.bool)
    la, lb = lft(a, dev), lft(b, dev)
    check(la & lb, a & b)
    check(la | lb, a | b)
    check(la ^ lb, a ^ b)
    check(~la, ~a)
    check(lf.where(la, lft(torch.tensor([1., 2, 3, 4]), dev), 0.5), torch.where(a, torch.tensor([1., 2, 3, 4]), 0.5),
          torch.float32)
    i, j = _binary_inputs(torch.int32)
    check(lft(i, dev) & lft(j, dev), i & j)
    check(~lft(i, dev), ~i)
    check(lft(i, dev).abs(), i.abs())


@pytest.mark.parametrize("src", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                                 torch.int64, torch.bool])
@pytest.mark.parametrize("dst", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32,
                                 torch.int64, torch.bool])
def test_casts(dev, src, dst):
    vals = torch.tensor([0.0, -0.0, 0.4, -0.6, 1.5, -2.5, 3.7, 100.25, -77.9, 1234.5, 0.1], dtype=torch.float64)
    x = vals.to(src)
    check(lft(x, dev).to(lf.from_torch(torch.zeros(0, dtype=dst)).dtype), x.to(dst), dst)


def test_float_to_int_nan_inf(dev):
    x = torch.tensor([float("nan"), float("inf"), float("-inf"), 3e9, -3e9, 2.9])
    assert lft(x, dev).int().tolist() == [-2 ** 31] * 5 + [2]
    assert lft(x, dev).long().tolist() == [-2 ** 63] * 3 + [3000000000, -3000000000, 2]


# -- random elementwise programs (hypothesis) ------------------------------------------------------
OPS = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b * 0.5, lambda a, b: (a * 0.3).tanh() + b,
       lambda a, b: a.sigmoid() * b.exp().clamp(max=10.0),
       lambda a, b: (a.abs() + 1).log() - b, lambda a, b: a.relu() / (b.abs() + 1)]


@st.composite
def programs(draw):
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=1, max_size=3)))
    bshape = tuple(s if draw(st.booleans()) else 1 for s in shape)[draw(st.integers(0, len(shape) - 1)):]
    ops = draw(st.lists(st.sampled_from(range(len(OPS))), min_size=1, max_size=6))
    dtype = draw(st.sampled_from(FLOATS))
    transpose = draw(st.booleans()) and len(shape) >= 2
    return shape, bshape, ops, dtype, transpose


def _run_program(a, b, ops, transpose):
    v = a
    for k in ops:
        v = OPS[k](v, b)
    return v.transpose(0, -1) if transpose else v


@FEW
@given(programs())
def test_random_elementwise_programs(dev, prog):
    shape, bshape, ops, dtype, transpose = prog
    g = torch.Generator().manual_seed(len(ops))
    x = torch.randn(shape, generator=g).to(dtype)
    y = torch.randn(bshape, generator=g).to(dtype)
    lf.sync(dev)
    before = lf.stats(dev).kernels_launched
    out = _run_program(lft(x, dev), lft(y, dev), ops, transpose)
    expected = _run_program(ref64(x), ref64(y), ops, transpose)
    rtol, atol = TOL[dtype]
    got = out.torch().to(torch.float64)
    torch.testing.assert_close(got, expected.to(dtype).to(torch.float64), rtol=rtol * 4, atol=atol * 4,
                               equal_nan=True)
    assert lf.stats(dev).kernels_launched - before <= 3   # the two uploads and one fused kernel


# -- reductions ------------------------------------------------------------------------------------
REDUCTIONS = {"sum": (lambda t, d, k: t.sum(d, keepdim=k), lambda t, d, k: t.sum(d, keepdim=k)),
              "mean": (lambda t, d, k: t.mean(d, keepdim=k), lambda t, d, k: t.mean(d, keepdim=k)),
              "amax": (lambda t, d, k: t.amax(d, keepdim=k), lambda t, d, k: t.amax(d, keepdim=k)),
              "amin": (lambda t, d, k: t.amin(d, keepdim=k), lambda t, d, k: t.amin(d, keepdim=k)),
              "var": (lambda t, d, k: t.var(d, keepdim=k), lambda t, d, k: t.var(d, keepdim=k))}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, False), ((0, 2), False), (None, False), (0, True),
                                         (1, True), ((0, 2), True)])
def test_reductions(dev, name, dtype, dim, keepdim):
    x = torch.randn(6, 7, 5, generator=torch.Generator().manual_seed(3)).to(dtype)
    ours, theirs = REDUCTIONS[name]
    check(ours(lft(x, dev), dim, keepdim), theirs(ref64(x), dim, keepdim), dtype)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
def test_integer_reductions(dev, dtype):
    x = torch.randint(-9, 9, (5, 11), generator=torch.Generator().manual_seed(4)).to(dtype)
    lx = lft(x, dev)
    check(lx.sum(1), x.sum(1))
    check(lx.sum(), x.sum())
    if dtype is not torch.bool:
        check(lx.amax(0), x.amax(0))
        check(lx.amin(1, keepdim=True), x.amin(1, keepdim=True))
        check(lx.argmax(1), x.argmax(1))
        check(lx.argmin(0), x.argmin(0))


@pytest.mark.parametrize("n", [7, 3000, 40000])
def test_long_rows_and_columns(dev, n):
    """Short rows take the one-pass (persistent) form, long ones the looped form."""
    x = torch.randn(3, n, generator=torch.Generator().manual_seed(n))
    lx = lft(x, dev)
    x64 = ref64(x)
    check(lx.sum(1), x64.sum(1))
    check(lx.var(1), x64.var(1))
    check(lx.amax(1), x64.amax(1))
    check(lx.argmax(1), x64.argmax(1))
    check(lx.T.argmin(0), x64.T.argmin(0))
    check(lx.T.contiguous().sum(0), x64.sum(1))


def test_argmax_first_occurrence_and_nan(dev):
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [nan, 2.0, nan, 5.0], [2.0, nan, 7.0, nan],
                      [-inf, -inf, -inf, -inf], [inf, 1.0, inf, 0.0]])
    lx = lft(x, dev)
    assert lx.argmax(1).tolist() == x.argmax(1).tolist()
    assert lx.argmin(1).tolist() == x.argmin(1).tolist()
    check(lx.amax(1), x.amax(1))
    check(lx.amin(1), x.amin(1))
    long = torch.zeros(2, 50000)
    long[0, 30000] = 1.0
    long[1, 45000] = nan
    long[1, 49000] = nan
    assert lft(long, dev).argmax(1).tolist() == [30000, 45000]
    assert lft(torch.full((1, 40000), -inf), dev).argmax(1).tolist() == [0]


@pytest.mark.parametrize("shape,dim", [((45, 65), 0), ((45, 65), 1), ((6, 6, 6, 6), 2)])
def test_logcumsumexp_and_its_gradient(dev, shape, dim):
    """A scan whose combine is lazyfuse's own (log-add-exp): Triton's interpreter called it once
    per element in Python (minutes for tinygrad's 45x65 case), it now runs slice by slice."""
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(5)) * 3
    x.view(-1)[::7] = float("-inf")
    x.view(-1)[3] = float("inf")
    lx = lft(x, dev).requires_grad_(True)
    y = lx.logcumsumexp(dim)
    check(y, ref64(x).logcumsumexp(dim))
    x64 = ref64(x).requires_grad_(True)
    x64.logcumsumexp(dim).sum().backward()
    y.sum().backward()
    check(lx.grad, x64.grad)


def test_empty_extents(dev):
    x = torch.zeros(3, 0)
    lx = lft(x, dev)
    check(lx.sum(1), x.sum(1))
    check(lx.mean(0), x.mean(0))
    check((lx * 2).exp(), x)
    check(lft(torch.zeros(0, 4), dev).sum(0), torch.zeros(4))
    check(lx.sum(), x.sum())


@FEW
@given(st.lists(st.integers(1, 9), min_size=1, max_size=3), st.data())
def test_random_reductions(dev, shape, data):
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    name = data.draw(st.sampled_from(["sum", "mean", "amax", "amin", "argmax", "argmin"]))
    keepdim = data.draw(st.booleans())
    x = torch.randn(shape, generator=torch.Generator().manual_seed(sum(shape)))
    lx = lft(x, dev)
    if name.startswith("arg"):
        d = dims[0] if dims else None
        check(getattr(lx, name)(d, keepdim=keepdim) if d is not None else getattr(lx, name)(),
              getattr(x, name)(d, keepdim=keepdim) if d is not None else getattr(x, name)())
        return
    d = tuple(dims) if dims else None
    ours = getattr(lx, name)(d, keepdim=keepdim) if d is not None else getattr(lx, name)()
    theirs = getattr(ref64(x), name)(d, keepdim=keepdim) if d is not None else getattr(ref64(x), name)()
    check(ours, theirs, torch.float32)


def test_softmax_and_layer_norm(dev):
    x = torch.randn(5, 33)
    lx = lft(x, dev)
    check(lx.softmax(1), torch.softmax(ref64(x), 1))
    check(lx.log_softmax(0), torch.log_softmax(ref64(x), 0))
    w, b = torch.randn(33), torch.randn(33)
    check(lf.nn.functional.layer_norm(lx, (33,), lft(w, dev), lft(b, dev)),
          F.layer_norm(ref64(x), (33,), ref64(w), ref64(b)))
    long = torch.randn(2, 20000) * 4    # rows longer than one tile: the looped row-wise form
    check(lft(long, dev).softmax(1), torch.softmax(ref64(long), 1))


# -- in-place writes through views, factories ------------------------------------------------------
def test_inplace_writes_through_views(dev):
    x = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    lx = lft(x, dev)
    lx[:, 1:4].add_(1.5)
    x[:, 1:4].add_(1.5)
    lx.T[::2].mul_(-2)
    x.T[::2].mul_(-2)
    lx[2].fill_(7)
    x[2].fill_(7)
    v = lx.reshape(2, 12)
    v[1, 3:9].copy_(torch.arange(6.0))
    x.reshape(2, 12)[1, 3:9].copy_(torch.arange(6.0))
    check(lx, x)
    check(v.sum(1), x.reshape(2, 12).to(torch.float64).sum(1))


def test_scalars_are_runtime_values(dev):
    x = lft(torch.linspace(-1, 1, 50), dev)
    lf.sync(dev)
    for s in (0.5, -2.0, 3.25):
        lf.reset_stats(dev)
        check(x * s + s, torch.linspace(-1, 1, 50).to(torch.float64) * s + s)
    assert lf.stats(dev).fusion_cache_hits == 1   # the same plan, other scalar values


def test_arange_and_zero_dim(dev):
    check(lf.arange(3, 40, 3, device=dev), torch.arange(3, 40, 3))
    check(lf.arange(0.5, 4.0, 0.25, device=dev), torch.arange(0.5, 4.0, 0.25, dtype=torch.float64))
    s = lft(torch.tensor(2.5), dev)
    check(s * 2 + 1, torch.tensor(6.0, dtype=torch.float64))
    check(lft(torch.randn(3, 4), dev).sum() * 0, torch.tensor(0.0, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [lf.float32, lf.float64])
def test_rand_randn_distribution(dev, dtype):
    lf.manual_seed(1234)
    n = 200_000
    u = lf.rand(n, dtype=dtype, device=dev).torch().double()
    assert u.dtype is torch.float64 and 0.0 <= u.min() and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    hist = torch.histc(u, bins=10, min=0, max=1) / n
    assert (hist - 0.1).abs().max() < 0.005
    z = lf.randn(n, dtype=dtype, device=dev).torch().double()
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01
    assert abs((z.abs() < 1).double().mean() - 0.6827) < 0.005
    assert torch.isfinite(z).all()
    a, b = lf.rand(1000, device=dev), lf.rand(1000, device=dev)
    assert not torch.equal(a.torch(), b.torch())   # the stream advances
    lf.manual_seed(7)
    c = lf.randn(1000, device=dev).torch()
    lf.manual_seed(7)
    assert torch.equal(c, lf.randn(1000, device=dev).torch())   # and is reproducible


def test_same_random_bits_as_the_c_kernels(dev):
    lf.manual_seed(99)
    ours = lf.rand(4096, device=dev).torch()
    lf.manual_seed(99)
    assert torch.equal(ours, lf.rand(4096, device="cpu").torch())


# -- the cpu device without a compiler ------------------------------------------------------------
def test_cpu_without_compiler_falls_back_to_interpreter(tmp_path):
    script = textwrap.dedent("""
        import warnings
        import lazyfuse as lf
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            dev = lf.device("cpu")
            x = lf.tensor([[1.0, -2.0], [3.0, 0.5]])
            y = ((x * 2).exp() + 1).sum(1)
            values = y.tolist()
            lf.device("cpu")
            z = (x - 1).relu().tolist()
        mine = [w for w in caught if "Triton interpreter" in str(w.message)]
        assert len(mine) == 1, [str(w.message) for w in caught]
        assert "LAZYFUSE_CC" in str(mine[0].message) and dev.backend.name == "triton-interpreter"
        print(values, z)
    """)
    env = dict(os.environ, LAZYFUSE_CC=str(tmp_path / "no-such-cc"), LAZYFUSE_CACHE_DIR=str(tmp_path / "cache"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    values, z = proc.stdout.strip().split("] [")
    expected = np.exp(np.array([[1.0, -2.0], [3.0, 0.5]]) * 2).__add__(1).sum(1)
    np.testing.assert_allclose([float(v) for v in values.strip("[]").split(",")], expected, rtol=1e-5)
    assert z.strip("[]") == "0.0, 0.0], [2.0, 0.0"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("exponent", [2.0, 1.0, 0.5, 3.0, -1.0, -2.0, -0.5, 2.5])
def test_python_scalar_exponents_take_torchs_shortcuts_and_tensor_ones_pow(dev, dtype, exponent):
    """torch computes ``x ** 0.5`` (a Python number) as sqrt, ``x ** 2`` as x * x...; with a
    tensor exponent it calls pow: -inf ** 0.5 is nan one way and inf the other."""
    x = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, -1.0, 3e-39, -2.5, 1e20, 7.0],
                     dtype=dtype)
    for got, want in ((lft(x, dev) ** exponent, x ** exponent),
                      (lft(x, dev) ** lft(torch.full_like(x, exponent), dev), x ** torch.full_like(x, exponent))):
        g = got.torch()
        nan = g.isnan() & want.isnan()
        close = torch.isclose(g, want, rtol=TOL[dtype][0], atol=0.0)   # pow is exp(b log a) here
        assert bool((nan | close & (g.signbit() == want.signbit())).all()), (exponent, g, want)


@pytest.mark.parametrize("name", ["neg", "mod", "floordiv"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
def test_zero_results_keep_torchs_sign(dev, name, dtype):
    """-0.0 where torch gives -0.0: compiled Triton once printed -x as 0 - x and float % as a
    frem that NVPTX lowers to a - b * trunc(a / b), both of which return +0.0 (found on an H200)."""
    a, b = _binary_inputs(dtype)
    fn = (lambda p, q: -p) if name == "neg" else BINARY[name]
    want = fn(a, b).to(torch.float64).numpy()
    got = fn(lft(a, dev), lft(b, dev)).torch().to(torch.float64).numpy()
    zero = want == 0
    assert zero.any()
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pow_special_values_match_torch_including_the_sign_of_zero(dev, dtype):
    """IEEE pow's special cases, as torch has them: -0.0 ** -1 is -inf (the sign bit counts, not
    ``base < 0``), a negative base to a non-integer power is NaN, anything ** 0 is 1."""
    bases = [-0.0, 0.0, float("-inf"), float("inf"), -2.0, 2.0, float("nan"), -1.0, 1.0, -0.5]
    exps = [-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, float("inf"), float("-inf"), float("nan")]
    b = torch.tensor(bases, dtype=dtype)[:, None].expand(len(bases), len(exps)).contiguous()
    e = torch.tensor(exps, dtype=dtype)[None, :].expand(len(bases), len(exps)).contiguous()
    want = (b ** e).numpy()
    got = (lf.from_torch(b, device=dev) ** lf.from_torch(e, device=dev)).numpy()
    number = ~np.isnan(want)   # a NaN's sign bit is not specified
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))
    np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)

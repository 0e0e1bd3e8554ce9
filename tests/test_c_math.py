"""Tests for lazyfuse/codegen/c_math.h, the vectorizable float32 math header.

A tiny C harness includes the header and defines, per function,
``void apply_NAME(const float* x, float* y, long n)`` with a ``#pragma omp
simd`` loop.  It is compiled with the project's kernel flags, loaded with
ctypes and compared against torch float64 results (rounded to float32 for the
special-value classes).

Error metric: |y - ref64| / max(|ref64|, FLT_MIN), i.e. relative error for
normal results and error in units of FLT_MIN for denormal results.
"""
import ctypes
import math
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

HEADER = Path(__file__).resolve().parents[1] / "lazyfuse" / "codegen" / "c_math.h"
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno",
          "-fno-trapping-math", "-ffp-contract=off", "-fPIC", "-shared"]
FUNCS = ["exp", "exp2", "expm1", "log", "tanh", "sigmoid", "sin", "cos", "erf", "gelu", "silu", "rsqrt"]
HARNESS = FUNCS + ["gelu_grad",   # gelu's derivative: its own accuracy test (an absolute bound)
                   "sin_near", "cos_near"]   # the fast pass's sin/cos (|x| < 2^23): bit for bit sin/cos there

FLT_MIN = float(np.finfo(np.float32).tiny)
FLT_MAX = float(np.finfo(np.float32).max)
DENORM_MIN = float(np.float32(1.401298464324817e-45))

# lf_geluf's relative error (x Phi(x) with Phi(-|x|) = 2^(l - 1), c_math.h), by region, against
# float64: GELU_REL for x >= -1, the tail bounds below, and -0 from x = -5.6 on (where torch's float32 gelu is -0 too: its 1 + erf(x/sqrt2) rounds to 0 from -5.5).
# torch's own float32 gelu on the same scan: 2.5e-7 on [-1, 0], 3.7e-7 on [0, inf), 3.1e-6 on
# [-2, -1], up to 1 on [-5.5, -2].
GELU_REL = 1.65e-7                            # measured 1.55e-7 (on [-1, 0]; 1.51e-7 above 0)
GELU_TAIL_BOUNDS = [(-2.0, -1.0, 6.8e-7),     # measured 6.47e-7
                    (-5.6, -2.0, 3.5e-4)]     # measured 3.39e-4 (torch's: up to 1)
GELU_ZERO_BELOW = -5.6

# Max relative error achieved, plus a few % headroom: log, sin, cos from an
# exhaustive scan of all float32 inputs (sin/cos: all |x| < 2^50, and a scan of every 61st
# bit pattern beyond); the others
# from a scan of every 67th float32 bit pattern of each sign (see c_math.h).
# For scale, 2^-24 = 5.96e-8; every bound is under 4 * 2^-24.  gelu's holds for x >= -1; below,
# GELU_TAIL_BOUNDS.
BOUNDS = {
    "exp": 9.2e-8,      # measured 8.92e-8
    "exp2": 9.5e-8,     # measured 9.17e-8
    "expm1": 1.25e-7,   # measured 1.20e-7 (random inputs; the scan: 1.10e-7)
    "log": 8.4e-8,      # measured 8.16e-8
    "tanh": 1.65e-7,    # measured 1.58e-7, 1.60e-7 without FMA (one exp, one division)
    "sigmoid": 1.8e-7,  # measured 1.72e-7
    "silu": 2.35e-7,    # measured 2.26e-7
    "sin": 6.0e-8,      # measured 5.961e-8 (one rounding of a double result: 2^-24 = 5.960e-8)
    "cos": 6.0e-8,      # measured 5.961e-8
    "erf": 8.2e-8,      # measured 7.91e-8 (every float of [1e-4, 4.5])
    "rsqrt": 6.0e-8,    # measured 5.961e-8 with FMA, every positive float (1.0f / sqrtf: 8.94e-8)
    "gelu": GELU_REL,   # x >= -1
}
ERF_ABS_BOUND = 6.6e-8  # measured 6.41e-8 (every float of [1e-4, 4.5]; torch: 5.96e-8)


def _target_has_fma(extra=()):
    """Whether the harness flags (plus ``extra``) give the compiler __FMA__."""
    proc = subprocess.run(["gcc", *CFLAGS, *extra, "-dM", "-E", "-x", "c", "/dev/null"],
                          capture_output=True, text=True, check=True)
    return "#define __FMA__ 1" in proc.stdout


# lf_sinf/lf_cosf reduce the argument in double: below 2^23 by a split of pi/2 (with FMA 53 + 53
# bits, without 24 + 24 + 53), from 2^23 on by the bits of 1/pi (Payne-Hanek): the same bound
# out to FLT_MAX.  lf_sin_nearf/lf_cos_nearf, the first alone, are exact below 2^23.
SINCOS_NEAR_LIMIT = 2.0 ** 23


def _gelu_erfc(t):
    # gelu written through erfc: same function as F.gelu, but without the
    # 1 + erf cancellation that makes float64 F.gelu itself inaccurate for
    # x < -6 (relative error 3e-8 at -6, 4% at -8).
    return 0.5 * t * torch.special.erfc(-t * (1.0 / math.sqrt(2.0)))


REFS = {
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "log": torch.log,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "sin": torch.sin,
    "cos": torch.cos,
    "erf": torch.erf,
    "gelu": F.gelu,
    "silu": F.silu,
    "rsqrt": torch.rsqrt,
}


def _harness_source():
    """C source and, per function, the line of its simd loop."""
    lines = [f'#include "{HEADER.name}"']
    loop_lines = {}
    for name in HARNESS:
        lines.append(f"void apply_{name}(const float* x, float* y, long n) {{")
        lines.append("#pragma omp simd")
        lines.append(f"    for (long i = 0; i < n; i++) y[i] = lf_{name}f(x[i]);")
        loop_lines[name] = len(lines)
        lines.append("}")
    return "\n".join(lines) + "\n", loop_lines


def _compile(tmp, extra=()):
    src, loop_lines = _harness_source()
    c_file = tmp / "c_math_harness.c"
    c_file.write_text(src)
    so_file = tmp / "c_math_harness.so"
    cmd = ["gcc", *CFLAGS, *extra, f"-I{HEADER.parent}", str(c_file),
           "-o", str(so_file), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return so_file, proc.stderr, loop_lines


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so_file, _, _ = _compile(tmp_path_factory.mktemp("c_math"))
    dll = ctypes.CDLL(str(so_file))
    for name in HARNESS:
        fn = getattr(dll, f"apply_{name}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
        fn.restype = None
    return dll


def _run(lib, name, x):
    x = np.ascontiguousarray(x, dtype=np.float32)
    y = np.empty_like(x)
    getattr(lib, f"apply_{name}")(x.ctypes.data, y.ctypes.data, x.size)
    return y


def _ref(name, x, ref=None):
    t = torch.from_numpy(np.asarray(x, dtype=np.float32).astype(np.float64))
    return (ref or REFS[name])(t).numpy()


def _check(name, x, y, ref64, bound, value_mask=None):
    """Exact classes (nan, inf, sign of zero) and max error <= bound."""
    with np.errstate(over="ignore"):
        ref32 = ref64.astype(np.float32)
    nan_bad = np.isnan(y) != np.isnan(ref32)
    assert not nan_bad.any(), (name, x[nan_bad][:8], y[nan_bad][:8], ref32[nan_bad][:8])
    inf_bad = (np.isinf(ref32) | np.isinf(y)) & (y != ref32) & ~np.isnan(ref32)
    assert not inf_bad.any(), (name, x[inf_bad][:8], y[inf_bad][:8], ref32[inf_bad][:8])
    zero = ref32 == 0
    sign_bad = zero & (np.signbit(y) != np.signbit(ref32))
    assert not sign_bad.any(), (name, x[sign_bad][:8], y[sign_bad][:8], ref32[sign_bad][:8])
    fin = np.isfinite(ref32)
    if value_mask is not None:
        fin &= value_mask
    with np.errstate(invalid="ignore"):
        err = np.abs(y.astype(np.float64) - ref64) / np.maximum(np.abs(ref64), FLT_MIN)
    err = np.where(fin, err, 0.0)
    i = int(np.argmax(err))
    assert err[i] <= bound, (
        f"{name}: max error {err[i]:.3e} > {bound:.3e} at x={x[i]!r} "
        f"(got {y[i]!r}, want {ref64[i]!r})")
    return err[i]


def _check_gelu(x, y):
    """lf_geluf's classes everywhere and its relative error region by region (GELU_REL for
    x >= -1, GELU_TAIL_BOUNDS below, -0 beyond GELU_ZERO_BELOW), against float64 through erfc."""
    ref = _ref("gelu", x, _gelu_erfc)
    worst = _check("gelu", x, y, ref, GELU_REL, ~(x < -1))
    for lo, hi, bound in GELU_TAIL_BOUNDS:
        _check("gelu", x, y, ref, bound, (x >= lo) & (x < hi))
    far = np.isfinite(x) & (x < GELU_ZERO_BELOW)
    assert np.all((y[far] == 0) & np.signbit(y[far])), x[far][(y[far] != 0) | ~np.signbit(y[far])][:8]
    return worst


def _specials():
    f32 = np.float32
    big = [f32(v) for v in (1e30, FLT_MAX, 1e5, 1e4, 1e8, 8e8, 2e9, 1e20)]
    vals = [np.nan, np.inf, -np.inf, 0.0, -0.0, DENORM_MIN, 1e-40, 5.9e-39,
            FLT_MIN, 1e-30, 1e-7, 0.5, 0.625, 0.75, 0.875, 1.0, 1.5,
            1.5707964, 3.1415927, 2.0, 3.9, 4.0, 6.0, 9.0, 10.0, 10.5, 11.0,
            13.0, 14.0, 14.3, 17.3, 20.0, 30.0, 87.0, 87.33654, 88.0,
            88.72283, 88.722839, 88.72284, 89.0, 100.0, 103.27893, 103.972,
            104.0, 110.0, 150.0, 200.0, *big]
    x = np.array(vals, dtype=np.float32)
    x = np.concatenate([x, -x])
    # neighbours of exp's overflow / underflow thresholds
    for t in (88.72283, -87.33654, -103.27893, -103.97208):
        t = np.float32(t)
        x = np.concatenate([x, [np.nextafter(t, np.float32(-np.inf)), t,
                                np.nextafter(t, np.float32(np.inf))]])
    # a spread of denormals, both signs
    den = np.arange(1, 1 << 23, 9973, dtype=np.uint32).view(np.float32)
    return np.concatenate([x, den, -den]).astype(np.float32)


@pytest.mark.parametrize("name", FUNCS)
def test_special_values(lib, name):
    x = _specials()
    y = _run(lib, name, x)
    ref64 = _ref(name, x)
    if name == "gelu":
        _check_gelu(x, y)
        return
    _check(name, x, y, ref64, BOUNDS[name])


def test_special_values_exact(lib):
    """Spot checks of the documented special values (bit-exact)."""
    def one(name, v):
        return _run(lib, name, np.array([v], dtype=np.float32))[0]

    inf, nan = np.inf, np.nan
    for name in FUNCS:
        assert np.isnan(one(name, nan)), name
    assert one("exp", -inf) == 0 and one("exp", inf) == inf
    assert one("exp", 100.0) == inf and one("exp", -200.0) == 0
    assert one("exp", -103.0) > 0  # denormal result
    assert one("exp2", -inf) == 0 and one("exp2", inf) == inf and one("exp2", 128.0) == inf
    assert one("exp2", 10.0) == 1024 and one("exp2", -149.0) == DENORM_MIN and one("exp2", -151.0) == 0
    assert one("expm1", -inf) == -1 and one("expm1", inf) == inf and one("expm1", 89.0) == inf
    assert one("expm1", -0.0) == 0 and np.signbit(one("expm1", -0.0)) and one("expm1", 1e-30) == np.float32(1e-30)
    assert one("log", 0.0) == -inf and one("log", -0.0) == -inf
    assert np.isnan(one("log", -1.0)) and np.isnan(one("log", -inf))
    assert one("log", inf) == inf
    assert one("tanh", inf) == 1 and one("tanh", -inf) == -1
    assert one("tanh", -0.0) == 0 and np.signbit(one("tanh", -0.0))
    assert one("sigmoid", inf) == 1 and one("sigmoid", -inf) == 0
    assert np.isnan(one("sin", inf)) and np.isnan(one("sin", -inf))
    assert np.isnan(one("cos", inf)) and np.isnan(one("cos", -inf))
    assert one("sin", -0.0) == 0 and np.signbit(one("sin", -0.0))
    assert one("cos", -0.0) == 1
    assert one("erf", inf) == 1 and one("erf", -inf) == -1
    assert one("erf", -0.0) == 0 and np.signbit(one("erf", -0.0))
    assert one("gelu", inf) == inf and one("silu", inf) == inf
    # torch gives nan for gelu(-inf) and silu(-inf) (-inf * 0); match it
    assert np.isnan(F.gelu(torch.tensor([-inf])).item())
    assert np.isnan(one("gelu", -inf)) and np.isnan(one("silu", -inf))
    # ...while large finite negative inputs give -0.0, as torch
    assert one("gelu", -1e30) == 0 and np.signbit(one("gelu", -1e30))
    # -0 from x = -5.6 on, where torch's float32 gelu is -0 already
    assert one("gelu", -5.7) == 0 and np.signbit(one("gelu", -5.7))
    assert F.gelu(torch.tensor([-5.7])).item() == 0
    assert one("gelu", -5.5) < 0
    assert one("silu", -1e30) == 0 and np.signbit(one("silu", -1e30))
    assert one("rsqrt", 0.0) == inf and one("rsqrt", -0.0) == -inf
    assert one("rsqrt", inf) == 0 and not np.signbit(one("rsqrt", inf))
    assert np.isnan(one("rsqrt", -inf)) and np.isnan(one("rsqrt", -1.0)) and np.isnan(one("rsqrt", -DENORM_MIN))
    assert one("rsqrt", DENORM_MIN) == np.float32(2.0 ** 74.5) and one("rsqrt", FLT_MAX) > 0


RNG_N = 1_000_000


def _uniform(rng, lo, hi):
    return rng.uniform(lo, hi, RNG_N).astype(np.float32)


def _loguniform(rng, lo_exp, hi_exp, signed=True):
    x = 10.0 ** rng.uniform(lo_exp, hi_exp, RNG_N)
    if signed:
        x *= rng.choice([-1.0, 1.0], RNG_N)
    return x.astype(np.float32)


def _random_cases(name, rng):
    """list of (x, reference function or None)"""
    u, lu = _uniform, _loguniform
    if name == "exp":
        return [(u(rng, -10, 10), None), (u(rng, -105, 90), None)]
    if name == "exp2":
        return [(u(rng, -10, 10), None), (u(rng, -152, 129), None)]
    if name == "expm1":
        return [(u(rng, -10, 10), None), (u(rng, -35, 90), None), (lu(rng, -30, 0), None)]
    if name == "log":
        den = rng.integers(1, 1 << 23, RNG_N, dtype=np.uint32).view(np.float32)
        return [(lu(rng, -30, 30, signed=False), None),
                (u(rng, 0.5, 2.0), None), (den, None)]
    if name == "tanh":
        return [(u(rng, -10, 10), None), (lu(rng, -30, 2), None)]
    if name in ("sigmoid", "silu"):
        return [(u(rng, -10, 10), None), (u(rng, -110, 110), None)]
    if name in ("sin", "cos"):
        return [(u(rng, -10, 10), None), (u(rng, -1e4, 1e4), None),
                (lu(rng, -30, 38.5), None)]
    if name == "rsqrt":
        den = rng.integers(1, 1 << 23, RNG_N, dtype=np.uint32).view(np.float32)
        return [(lu(rng, -38, 38, signed=False), None), (u(rng, 0.25, 4.0), None), (den, None)]
    if name == "erf":
        return [(u(rng, -10, 10), None), (u(rng, -1, 1), None),
                (lu(rng, -30, 1), None)]
    if name == "gelu":
        # checked by _check_gelu against the erfc form (float64 F.gelu's 1 + erf cancels below -6)
        return [(u(rng, -5, 10), _gelu_erfc), (u(rng, -1, 1), _gelu_erfc),
                (u(rng, -10, 10), _gelu_erfc), (u(rng, -20, -5), _gelu_erfc)]
    raise AssertionError(name)


@pytest.mark.parametrize("name", FUNCS)
def test_random_accuracy(lib, name):
    rng = np.random.default_rng(sorted(FUNCS).index(name) + 1234)
    worst = 0.0
    for x, ref in _random_cases(name, rng):
        y = _run(lib, name, x)
        err = _check_gelu(x, y) if name == "gelu" else _check(name, x, y, _ref(name, x, ref), BOUNDS[name])
        worst = max(worst, err)
    assert worst > 0  # the comparison actually ran


def test_erf_absolute_error(lib):
    rng = np.random.default_rng(7)
    x = np.concatenate([_uniform(rng, -6, 6), _uniform(rng, -1, 1)])
    y = _run(lib, "erf", x).astype(np.float64)
    err = np.abs(y - _ref("erf", x)).max()
    assert err <= ERF_ABS_BOUND, err


def test_large_n_and_tail_loop(lib):
    """Lengths that exercise the vector body and scalar/epilogue paths."""
    rng = np.random.default_rng(3)
    for n in (1, 3, 7, 17, 1000, 4099):
        x = rng.uniform(-5, 5, n).astype(np.float32)
        for name in ("tanh", "sin"):
            _check(name, x, _run(lib, name, x), _ref(name, x), BOUNDS[name])
        _check_gelu(x, _run(lib, "gelu", x))


def test_all_loops_vectorized(tmp_path):
    _, report, loop_lines = _compile(tmp_path, extra=["-fopt-info-vec-optimized"])
    vectorized = set()
    for m in re.finditer(r"c_math_harness\.c:(\d+):\d+: optimized: loop vectorized", report):
        vectorized.add(int(m.group(1)))
    missing = [name for name, line in loop_lines.items() if line not in vectorized]
    assert not missing, f"not vectorized: {missing}\n{report}"


def _gelu_grad64(t):
    """d/dx gelu in float64 through erfc: Phi(x) + x phi(x) with no 1 + erf cancellation."""
    return 0.5 * torch.special.erfc(-t * (1.0 / math.sqrt(2.0))) + t * torch.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)


# lf_geluf's absolute error: the roundings of 1 - h and of x (1 - h) for results near 4.9 (0.8 ulp:
# 3.84e-7 measured; torch's float32 gelu: 1.2e-6 near 3.45)
GELU_ABS_BOUND = 4.0e-7
# where torch's float32 gelu is compared with ours region by region (the task's bar)
GELU_REGIONS = [(-1.0, 0.0), (-2.0, -1.0), (-5.5, -2.0), (0.0, 20.0)]


def test_gelu_no_less_accurate_than_torch_float32(lib):
    """lf_geluf against torch's own float32 gelu, both against float64 (through erfc) on a dense
    scan of [-20, 20] and the specials: its max absolute error is no larger than torch's (and
    within GELU_ABS_BOUND), its max relative error is no larger than torch's on each of
    GELU_REGIONS, and below -5.5 (where torch's relative error is 1) each result is no further from
    the truth than torch's and of the right sign or -0."""
    pos = np.arange(0, 0x41A00001, 6007, dtype=np.uint32).view(np.float32)
    x = np.concatenate([pos, -pos, _specials(), np.float32([5.6, -5.6, np.nextafter(np.float32(5.6), 0), -np.nextafter(np.float32(5.6), 0)])])
    x = x[np.isfinite(x) & (np.abs(x) <= 20)]
    ref = _ref("gelu", x, _gelu_erfc)
    y = _run(lib, "gelu", x).astype(np.float64)
    t = F.gelu(torch.from_numpy(x)).numpy().astype(np.float64)
    ours, theirs = np.abs(y - ref), np.abs(t - ref)
    assert ours.max() <= min(theirs.max(), GELU_ABS_BOUND), (ours.max(), theirs.max())
    for lo, hi in GELU_REGIONS:
        m = (x >= lo) & (x <= hi) & (np.abs(ref) >= 1e-30)
        rel = lambda err: (err[m] / np.abs(ref[m])).max()  # noqa: E731
        assert rel(ours) <= rel(theirs), (lo, hi, rel(ours), rel(theirs))
    far = x < -5.5
    assert np.all(ours[far] <= theirs[far]) and not np.any(y[far] * ref[far] < 0)


# |error| <= ABS + REL * |value|: relative in the tails (2.4e-7 measured), absolute about its root
# at x = -0.7518, where Phi(x) and x phi(x) cancel (4.8e-8 measured there; 1.4e-7 at most overall)
GELU_GRAD_ABS, GELU_GRAD_REL = 6e-8, 3e-7


def test_gelu_grad_accuracy(lib):
    """lf_gelu_gradf: torch's classes (nan at nan and +-inf, 1 and -0 far out) and a relative
    error bound down the far negative tail, absolute about the root."""
    rng = np.random.default_rng(11)
    x = np.concatenate([_specials(), _uniform(rng, -10, 10), _uniform(rng, -1, 1), _uniform(rng, -20, -5)])
    y = _run(lib, "gelu_grad", x).astype(np.float64)
    ref = _gelu_grad64(torch.from_numpy(x.astype(np.float64))).numpy()
    with np.errstate(invalid="ignore"):
        torch32 = torch.ops.aten.gelu_backward(torch.ones(x.size), torch.from_numpy(x)).numpy()
    assert np.array_equal(np.isnan(y), np.isnan(torch32))      # nan at nan and at +-inf, as torch
    fin = np.isfinite(x)
    assert (np.abs(y - ref) - GELU_GRAD_REL * np.abs(ref))[fin].max() <= GELU_GRAD_ABS
    tail = fin & (x < -3) & (np.abs(ref) > FLT_MIN)    # values down to 1e-38: relative there
    assert (np.abs(y - ref)[tail] / np.abs(ref[tail])).max() <= GELU_GRAD_REL
    one = lambda v: _run(lib, "gelu_grad", np.array([v], dtype=np.float32))[0]  # noqa: E731
    assert one(0.0) == 0.5 and one(30.0) == 1.0
    assert one(-30.0) == 0 and np.signbit(one(-30.0))


def _sincos_inputs(rng):
    """A dense scan of |x| <= 1e4 (every 61st bit pattern, both signs), every 997th float from
    2^23 to FLT_MAX (both signs: the far reduction's every exponent), log-uniform |x| and the
    specials."""
    pos = np.arange(0, np.float32(1e4).view(np.uint32) + 1, 61, dtype=np.uint32).view(np.float32)
    far = np.arange(np.float32(SINCOS_NEAR_LIMIT).view(np.uint32), np.float32(np.inf).view(np.uint32), 997,
                    dtype=np.uint32).view(np.float32)
    x = np.concatenate([pos, -pos, far, -far, _loguniform(rng, -3, 38.5), _specials()])
    return x[np.isfinite(x)]


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sincos_no_less_accurate_than_torch_float32(lib, name):
    """lf_sinf/lf_cosf against torch's own float32 sin/cos (Sleef's u10 on AVX-512), both
    against float64, on the same inputs (out to FLT_MAX, where torch's is accurate and each
    result was 0 beyond 2^50 before the far reduction): our max relative error is no larger
    than torch's."""
    x = _sincos_inputs(np.random.default_rng(17))
    ref = _ref(name, x)
    den = np.maximum(np.abs(ref), FLT_MIN)
    ours = (np.abs(_run(lib, name, x).astype(np.float64) - ref) / den).max()
    theirs = (np.abs(REFS[name](torch.from_numpy(x)).numpy().astype(np.float64) - ref) / den).max()
    assert ours <= min(theirs, BOUNDS[name]), (ours, theirs)


@pytest.mark.parametrize("march", [None, "x86-64-v3"])
def test_rsqrt_no_less_accurate_than_torch_float32(lib, tmp_path, march):
    """lf_rsqrtf (an estimate refined without the divider) against torch's float32 rsqrt
    (1 / sqrt: two roundings), both against float64, on every 61st positive float: on this
    CPU and on AVX2 with FMA (x86-64-v3, 8 lanes), where the classes are checked too."""
    if march is not None:
        assert _target_has_fma([f"-march={march}"])
        so_file, _, _ = _compile(tmp_path, [f"-march={march}"])
        lib = ctypes.CDLL(str(so_file))
        lib.apply_rsqrt.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
        sp = _specials()
        _check("rsqrt", sp, _run(lib, "rsqrt", sp), _ref("rsqrt", sp), BOUNDS["rsqrt"])
    x = np.arange(1, np.float32(np.inf).view(np.uint32), 61, dtype=np.uint32).view(np.float32)
    ref = _ref("rsqrt", x)
    ours = (np.abs(_run(lib, "rsqrt", x).astype(np.float64) - ref) / ref).max()
    theirs = (np.abs(torch.rsqrt(torch.from_numpy(x)).numpy().astype(np.float64) - ref) / ref).max()
    assert ours <= min(theirs, BOUNDS["rsqrt"]), (ours, theirs)


def test_rsqrt_without_fma(tmp_path):
    """Without FMA (x86-64-v2) lf_rsqrtf is 1.0f / sqrtf: bit for bit the quotient of the
    correctly rounded root, on a scan of every float and the specials."""
    so_file, _, _ = _compile(tmp_path, ["-march=x86-64-v2"])
    nofma = ctypes.CDLL(str(so_file))
    nofma.apply_rsqrt.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    x = np.concatenate([np.arange(0, 1 << 32, 4093, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        _specials()])
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.float32(1) / np.sqrt(x)
    got = _run(nofma, "rsqrt", x)
    assert np.array_equal(got.view(np.uint32)[~np.isnan(want)], want.view(np.uint32)[~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()


def test_sincos_without_fma(tmp_path):
    """The no-FMA near reduction (x86-64-v2: a 3-constant split of pi/2) and the far one: the
    same bound out to FLT_MAX, torch's classes (nan at +-inf and nan, sin(-0) = -0)."""
    extra = ["-march=x86-64-v2"]
    assert not _target_has_fma(extra)
    so_file, _, _ = _compile(tmp_path, extra)
    nofma = ctypes.CDLL(str(so_file))
    for name in ("sin", "cos"):
        getattr(nofma, f"apply_{name}").argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
        x = _sincos_inputs(np.random.default_rng(19))
        _check(name, x, _run(nofma, name, x), _ref(name, x), BOUNDS[name])
        edge = np.float32([np.inf, -np.inf, np.nan, -0.0])
        y = _run(nofma, name, edge)
        assert np.isnan(y[:3]).all()
    assert np.signbit(_run(nofma, "sin", np.float32([-0.0]))[0])


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_sincos_near_forms_are_sincos_below_two_to_23(lib, name):
    """The fast pass's lf_sin_nearf/lf_cos_nearf (a pointwise kernel runs them and flags a far
    element, CPrinter._pointwise) are bit for bit lf_sinf/lf_cosf wherever they are used, |x| <
    2^23, so a kernel's values never depend on whether another element sent it to its exact
    pass: every 257th float below 2^23 of each sign, and the specials."""
    pos = np.arange(0, np.float32(SINCOS_NEAR_LIMIT).view(np.uint32), 257, dtype=np.uint32).view(np.float32)
    x = np.concatenate([pos, -pos, np.float32([np.nextafter(np.float32(SINCOS_NEAR_LIMIT), np.float32(0))]),
                        _specials()])
    x = x[~(np.abs(x) >= SINCOS_NEAR_LIMIT)]                    # (nan and the near range)
    near, exact = _run(lib, f"{name}_near", x), _run(lib, name, x)
    same = (near.view(np.uint32) == exact.view(np.uint32)) | (np.isnan(near) & np.isnan(exact))
    assert same.all(), x[~same][:8]


def _header_table(name):
    body = re.search(rf"static const double {name}\[105\] = {{[^\n]*\n(.*?)\n}};", HEADER.read_text(), re.S)
    return [float.fromhex(v) for v in re.findall(r"0x[0-9a-f.]+p[-+]\d+", body.group(1))]


def test_far_reduction_tables_are_the_bits_of_one_over_pi():
    """c_math.h's lf__inv_pi_a/_b/_c: (2^E / pi) mod 2 for E = 0..104 as A + B + C, A and B 28-bit
    multiples of 2^-27 and 2^-55 (so M A and M B are exact for a 24-bit M), C the rest rounded;
    recomputed here from 1/pi to 560 bits (mpmath)."""
    from fractions import Fraction

    import mpmath
    with mpmath.workprec(600):
        inv_pi = Fraction(int(mpmath.floor(mpmath.mpf(2) ** 560 / mpmath.pi)), 2 ** 560)
    a, b, c = (_header_table(f"lf__inv_pi_{k}") for k in "abc")
    assert len(a) == len(b) == len(c) == 105
    for e in range(105):
        f = (inv_pi * 2 ** e) % 2
        want_a = Fraction(int(f * 2 ** 27), 2 ** 27)
        want_b = Fraction(int((f - want_a) * 2 ** 55), 2 ** 55)
        assert (Fraction(a[e]), Fraction(b[e]), c[e]) == (want_a, want_b, float(f - want_a - want_b)), e

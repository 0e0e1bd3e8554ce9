"""Loops of the printed C that gcc must vectorise: compiled with the kernels' own flags and
``-fopt-info-vec-optimized``, every innermost loop of the kernel is reported vectorised."""
from __future__ import annotations

import platform
import re
import subprocess

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen import c_compile
from lazyfuse.codegen.c_printer import PRELUDE
from programs_cases import drained_plans

CPU = lf.device("cpu")


def kernel_sources(program):
    """The C source of each kernel of the plan ``program`` drains (its result, then the sources)."""
    out, plans = drained_plans(program)
    return out, [st.source for plan in plans for st in plan.steps if st.kind == "kernel"]


def compiler_report(source, tmp_path, option: str) -> str:
    """What gcc reports (``option``: an ``-fopt-info-...``) compiling ``source`` with the kernels' flags."""
    c_file = tmp_path / "kernel.c"
    c_file.write_text(PRELUDE + "\n" + source)
    cmd = [c_compile.compiler(), *c_compile.flags(), option, str(c_file), "-o", str(tmp_path / "kernel.so")]
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stderr


def unvectorised_loops(source, tmp_path) -> list:
    """The line numbers of ``source``'s innermost loops that gcc did not vectorise (gcc names a
    vectorised loop by a line of its body)."""
    report = compiler_report(source, tmp_path, "-fopt-info-vec-optimized")
    done = {int(m.group(1)) for m in re.finditer(r"kernel\.c:(\d+):\d+: optimized: loop vectorized", report)}
    lines = (tmp_path / "kernel.c").read_text().splitlines()
    missed = []
    for i in range(len(PRELUDE.splitlines()), len(lines)):
        if "for (" not in lines[i]:
            continue
        end = next(j for j in range(i + 1, len(lines)) if "}" in lines[j] or "for (" in lines[j])
        if "}" in lines[end] and not done & set(range(i + 1, end + 2)):   # an innermost loop, not vectorised
            missed.append(i + 1)
    return missed


def test_a_one_hot_of_int64_targets_vectorises(tmp_path):
    """Cross-entropy's backward compares int64 targets with the class index and multiplies the
    bool as a float: the cast is a select (``c ? 1.0f : 0.0f``), since gcc 12 vectorises no loop
    that converts such a compare's byte to float (the nanoGPT step's loss gradient: 128 -> 29 us)."""
    rng = np.random.default_rng(0)
    xs, ts = rng.standard_normal((6, 65)).astype(np.float32), rng.integers(0, 65, 6)
    x, t = lf.tensor(xs), lf.tensor(ts)
    out, sources = kernel_sources(lambda: ((t.unsqueeze(1) == lf.arange(65)).float() * x.exp() - x).numpy())
    onehot = (torch.from_numpy(ts)[:, None] == torch.arange(65)).double()
    np.testing.assert_allclose(out, (onehot * torch.from_numpy(xs).double().exp() - torch.from_numpy(xs)).numpy(),
                               rtol=1e-6, atol=1e-6)
    (src,) = sources
    assert "? 1.0f : 0.0f" in src
    assert unvectorised_loops(src, tmp_path) == [], src


def test_maximum_minimum_and_clamp_vectorise_and_propagate_nan(tmp_path):
    """A float maximum/minimum prints its select and its NaN test as two statements: written as one
    condition (``a != a || a > b ? a : b``), gcc 12 under -fno-trapping-math made two branches per
    element and vectorised nothing (a clamp of 2^20 floats: 4 ms against 0.11 ms). NaN still
    propagates from either operand, as torch's does."""
    xs = np.array([-2.0, -0.25, 0.0, 0.75, 3.0, np.nan, -np.inf, np.inf] * 4, dtype=np.float32)
    ys = np.roll(xs, 3)
    x, y = lf.tensor(xs), lf.tensor(ys)
    out, sources = kernel_sources(lambda: lf.minimum(lf.maximum(x, y).clamp(-0.5, 0.5), y * 2).numpy())
    xt, yt = torch.from_numpy(xs).double(), torch.from_numpy(ys).double()
    want = torch.minimum(torch.maximum(xt, yt).clamp(-0.5, 0.5), yt * 2).numpy()
    np.testing.assert_array_equal(out, want.astype(np.float32))
    (src,) = sources
    assert unvectorised_loops(src, tmp_path) == [], src


def test_a_clamp_by_numbers_tests_its_bounds_for_nan_outside_the_loop(tmp_path):
    """A clamp's bounds are runtime scalars: the bound is NaN-tested and compared first
    (``s > x ? s : x``, one vmaxps that passes a NaN x through), so gcc unswitches the loop on the
    bounds' NaN tests and the vector body is a max and a min (relu6 of 2^20 floats: 0.21 -> 0.09 ms,
    Zen 4). Its values, bit for bit torch's: tests/test_native_kernels.py."""
    x = lf.tensor(np.linspace(-8, 8, 64, dtype=np.float32))
    out, sources = kernel_sources(lambda: lf.nn.functional.relu6(x).numpy())
    np.testing.assert_array_equal(out, torch.nn.functional.relu6(x.torch()).numpy())
    (src,) = sources
    assert unvectorised_loops(src, tmp_path) == [], src
    report = compiler_report(src, tmp_path, "-fopt-info-loop-optimized")
    assert report.count("Unswitching loop on condition") >= 2, report


def test_the_fast_pass_of_a_float_remainder_vectorises(tmp_path):
    """fmod/remainder of floats: the first pass (a double division, a truncation, an FMA: exact
    below 2^29, flagging larger quotients) vectorises; only the libm pass after it, run where
    something was flagged, stays scalar (fmod of 2^20 floats: ~17 ms -> ~0.55 ms, one thread)."""
    rng = np.random.default_rng(1)
    xs, ys = rng.standard_normal(64).astype(np.float32), (rng.random(64) + 0.5).astype(np.float32)
    x, y = lf.tensor(xs), lf.tensor(ys)
    for fn in ("fmod", "remainder"):
        out, sources = kernel_sources(lambda: getattr(lf, fn)(x, y).numpy())
        np.testing.assert_array_equal(out, getattr(torch, fn)(torch.from_numpy(xs), torch.from_numpy(ys)).numpy())
        (src,) = sources
        first, second = [i for i, ln in enumerate(src.splitlines()) if "for (" in ln]
        assert src.index("lf_large |=") < src.index("lf_fmodf_exact"), src
        prelude = len(PRELUDE.splitlines()) + 1
        assert unvectorised_loops(src, tmp_path) == [prelude + second + 1], src


def test_sin_and_cos_run_their_near_reduction_first_and_the_far_one_where_flagged(tmp_path):
    """float sin/cos: the first pass (the near reduction alone, exact below 2^23) flags a larger
    element; only then the second, whose reduction blends in the far one for every lane (its
    table gathers cost 2.5-4.5x the first: c_math.h). Both passes vectorise."""
    xs = np.random.default_rng(2).uniform(-50, 50, 64).astype(np.float32)
    x = lf.tensor(xs)
    for fn in ("sin", "cos"):
        out, sources = kernel_sources(lambda: getattr(lf, fn)(x * 2).numpy())
        np.testing.assert_allclose(out, getattr(np, fn)(xs * 2), rtol=0, atol=1.2e-7)
        (src,) = sources
        assert src.index("lf__sin_far(") < src.index(f"lf_{fn}_nearf(") < src.index(f"lf_{fn}f("), src
        assert unvectorised_loops(src, tmp_path) == [], src


ONE_NODE_OPS = {   # tests/test_one_node_ops.py: compositions that became one node each
    "atan": lambda x, y: lf.atan(x), "atan2": lambda x, y: lf.atan2(x, y), "copysign": lambda x, y: lf.copysign(x, y),
    "sign": lambda x, y: lf.sign(x), "nan_to_num": lambda x, y: lf.nan_to_num(x, 1.0),
    "leaky_relu": lambda x, y: lf.nn.functional.leaky_relu(x, 0.2),
    "hardsigmoid": lambda x, y: lf.nn.functional.hardsigmoid(x), "hardswish": lambda x, y: lf.nn.functional.hardswish(x),
    "selu": lambda x, y: lf.nn.functional.selu(x), "softplus": lambda x, y: lf.nn.functional.softplus(x, 2.0),
    "logsigmoid": lambda x, y: lf.nn.functional.logsigmoid(x), "mish": lambda x, y: lf.nn.functional.mish(x),
    "expm1": lambda x, y: lf.expm1(x), "log1p": lambda x, y: lf.log1p(x),
    "clamp": lambda x, y: x.clamp(-0.5, 0.5), "clamp(tensors)": lambda x, y: x.clamp(y, y + 1.0),
    "relu6": lambda x, y: lf.nn.functional.relu6(x), "log2": lambda x, y: lf.log2(x), "log10": lambda x, y: lf.log10(x),
    "exp2": lambda x, y: lf.exp2(x), "hypot": lambda x, y: lf.hypot(x, y),
    "logaddexp": lambda x, y: lf.logaddexp(x, y), "logaddexp2": lambda x, y: lf.logaddexp2(x, y),
    "xlogy": lambda x, y: lf.xlogy(x, y.abs()), "lerp": lambda x, y: lf.lerp(x, y, 0.3),
    "lerp(tensor)": lambda x, y: lf.lerp(x, y, x.sigmoid()),
}


@pytest.mark.parametrize("name", sorted(ONE_NODE_OPS))
def test_the_one_node_ops_vectorise(name, tmp_path):
    """Their float32 C forms are branch-free (c_math.h's atanf/atan2f/expm1f, one select a statement), so
    the node that replaced a vectorised composition is a vectorised loop too."""
    rng = np.random.default_rng(0)
    x, y = (lf.tensor(rng.standard_normal(64).astype(np.float32)) for _ in range(2))
    _, sources = kernel_sources(lambda: ONE_NODE_OPS[name](x, y).numpy())
    (src,) = sources
    assert unvectorised_loops(src, tmp_path) == [], src


def _cpu_has_avx512() -> bool:
    try:
        return " avx512f" in open("/proc/cpuinfo").read()
    except OSError:
        return False


def test_kernels_use_the_cpus_whole_vector_width(tmp_path):
    """On an AVX-512 CPU the kernels' loops run on 512-bit registers: gcc's tuning for Intel's
    server cores prefers 256 bits unless told (``LAZYFUSE_VECTOR_WIDTH``, default ``auto``), which
    halved the lanes of every compute-bound kernel on a Xeon."""
    if c_compile.compiler() is None or c_compile.march() != "native" or not _cpu_has_avx512():
        pytest.skip("needs a C compiler targeting this CPU, and a CPU with AVX-512")
    c_file = tmp_path / "scale.c"
    c_file.write_text("void scale(float *restrict y, const float *restrict x, long n)\n"
                      "{ for (long i = 0; i < n; i++) y[i] = x[i] * 3.0f + 1.0f; }\n")
    flags = [f for f in c_compile.flags() if f not in ("-shared", "-fPIC")]
    asm = subprocess.run([c_compile.compiler(), *flags, "-S", "-o", "-", str(c_file)],
                         capture_output=True, text=True, check=True).stdout
    assert "zmm" in asm, "the loop was vectorised below the CPU's 512-bit width"


def _x86_compiler() -> bool:
    return c_compile.compiler() is not None and platform.machine().lower() in ("x86_64", "amd64")


def test_the_vector_width_is_part_of_the_library_key(monkeypatch):
    if not _x86_compiler():
        pytest.skip("needs an x86 C compiler")
    keys = set()
    for width in ("128", "256", "512"):
        monkeypatch.setenv("LAZYFUSE_VECTOR_WIDTH", width)
        assert f"-mprefer-vector-width={width}" in c_compile.flags()
        keys.add(c_compile.library_key("int x;", c_compile.compiler()))
    assert len(keys) == 3


def test_a_bad_vector_width_names_the_knob(monkeypatch):
    monkeypatch.setenv("LAZYFUSE_VECTOR_WIDTH", "1024")
    with pytest.raises(lf.ConfigError, match="LAZYFUSE_VECTOR_WIDTH"):
        c_compile.flags()


@pytest.mark.parametrize("width", ["128", "256", "512"])
def test_every_vector_width_computes_torchs_values(monkeypatch, width):
    """Each ``LAZYFUSE_VECTOR_WIDTH`` builds kernels of its own that agree with torch: a chain of
    transcendental math and a row reduction."""
    if not _x86_compiler():
        pytest.skip("needs an x86 C compiler")
    monkeypatch.setenv("LAZYFUSE_VECTOR_WIDTH", width)
    xs = np.random.default_rng(int(width)).standard_normal((37, 129)).astype(np.float32)
    x = lf.tensor(xs)
    got = ((x.sin() * x.exp()).tanh() + x.erf()).sum(-1).numpy()
    t = torch.from_numpy(xs).double()
    want = ((t.sin() * t.exp()).tanh() + torch.erf(t)).sum(-1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)

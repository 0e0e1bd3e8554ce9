"""Shape-generic kernels: a new size of a known program runs no compiler (issue 20).

The C printer (and the Triton printer, for pointwise and reduction kernels) prints loop extents as runtime values and row-major strides as products of them,
so a program met at a new batch size or sequence length plans anew (a plan-cache miss) but
finds its library already built: ``lf.stats().compiler_runs`` does not move. What still
changes the code compiles once per *structure*: a dim of size 1, another thread or strategy
choice, a stride that is no product of extents.
"""
import random
from collections import OrderedDict

import numpy as np
import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen import c_compile
from lazyfuse.codegen.c_printer import CConfig, print_c
from lazyfuse.codegen.index import Affine, Var
from lazyfuse.codegen.kernel import Kernel, KernelArg, Load, Store
from lazyfuse.ir.dtypes import float32
from lazyfuse.runtime import triton_devices
from programs_cases import CASES, run_case

CPU = lf.device("cpu")


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty cache folder, no C library or Triton module loaded, no plan cached."""
    monkeypatch.setenv("LAZYFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(c_compile, "_loaded", c_compile.LibraryCache())
    monkeypatch.setattr(triton_devices, "_loaded", OrderedDict())
    devices = [lf.device("cpu"), lf.device("interpreter")]
    for dev in devices:
        lf.sync(dev)
        dev.engine.plans.clear()
    yield tmp_path
    for dev in devices:
        dev.engine.plans.clear()


def program(lib, x, w):
    """A fused chain into a row reduction, a softmax and a column reduction: three kernels."""
    y = ((x * 2 + 1).tanh() * x.exp()).sum(-1, keepdim=True)
    return (x * w - y).softmax(-1) + x.sum(0)


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_one_program_over_50_sizes_compiles_once_per_structure(fresh_cache, device):
    dev = lf.device(device)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(24).astype(np.float32)
    before = lf.stats(dev)
    structures = set()   # the kernels' sources, as lf.explain prints them
    for n in range(1, 51):
        a = rng.standard_normal((n, 24)).astype(np.float32)
        x, wl = lf.tensor(a, device=dev), lf.tensor(w, device=dev)
        structures.add(tuple(k.source for k in lf.explain(program(lf, x, wl)).kernels))
        got = program(lf, x, wl).numpy()
        want = program(torch, torch.from_numpy(a).double(), torch.from_numpy(w).double()).numpy()
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    d = lf.stats(dev) - before
    assert d.fusion_cache_misses == 50   # every size plans: its key has its shapes
    # n = 1 (a size-1 dim drops its loop), then one per threading or tiling choice
    assert len(structures) <= 4
    kernels = len(next(iter(structures)))
    # C: one library per plan; Triton: one module per kernel source
    expected = len(structures) if device == "cpu" else len({src for st in structures for src in st})
    assert d.compiler_runs == expected <= len(structures) * kernels, (d.compiler_runs, len(structures))


SIZES = [4, 6, 7, 8, 10]   # m; n = 5 and k = 13 stay fixed (distinct from every m, and from m + n - 1)


def cases(device):
    # the interpreter runs a matmul as a Triton matmul template, whose sizes stay literals
    return [(device, name) for name in sorted(CASES) if device == "cpu" or not name.startswith(("matmul", "linear"))]


@pytest.mark.parametrize("device,name", cases("cpu") + cases("interpreter"))
def test_every_case_at_a_second_and_third_size_runs_no_compiler(device, name):
    """The differential cases (tests/programs_cases.py, checked against float64 torch) at three
    random sizes of their m dim, the structure unchanged: the second and third compile nothing."""
    dev = lf.device(device)
    sizes = random.Random(name).sample(SIZES, 3)
    run_case(device, name, torch.float32, sizes[0], 5, 13, 1)
    runs = lf.stats(dev).compiler_runs
    for m in sizes[1:]:
        run_case(device, name, torch.float32, m, 5, 13, 2)
    assert lf.stats(dev).compiler_runs == runs, f"{name} at m={sizes[1:]} compiled again (first m={sizes[0]})"


def kernel(rows: int, cols: int, row_stride: int) -> Kernel:
    """``out[i, j] = x[i * row_stride + j]`` over (rows, cols)."""
    i, j = Var("p0", rows), Var("p1", cols)
    load = Load(0, Affine(0, ((i, row_stride), (j, 1))), float32)
    return Kernel("k", (i, j), (), (), (Store(1, Affine(0, ((i, cols), (j, 1))), load),),
                  (KernelArg(float32, False), KernelArg(float32, True)), ())


def test_sizes_are_runtime_values_and_strides_products_of_them():
    src = print_c(kernel(6, 10, 10), CConfig())
    assert "n_p0 = meta[1]" in src and "n_p1 = meta[2]" in src and "p0 < n_p0" in src and "p1 < n_p1" in src
    assert "a0[(n_p1*p0 + p1)]" in src          # a row-major stride: the row length
    assert print_c(kernel(9, 17, 17), CConfig()) == src   # another size, the same code
    # a stride that is no product of extents (every other row of a wider matrix) stays a literal
    sliced = print_c(kernel(6, 10, 40), CConfig())
    assert "a0[(40*p0 + p1)]" in sliced and sliced != src

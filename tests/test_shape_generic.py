"""Shape-generic kernels: a new size of a known program runs no compiler (issue 20).

The C printer (and the Triton printer, for pointwise and reduction kernels) prints loop extents as runtime values and row-major strides as products of them,
so a program met at a new batch size or sequence length plans anew (a plan-cache miss) but
finds its library already built: ``lf.stats().compiler_runs`` does not move. A source's size that
is no loop extent (a row length, a slice's offset, a cat piece's start) is one of the kernel's
runtime sizes (``Kernel.sizes``). What still changes the code compiles once per *structure*: a
dim of size 1, another thread or strategy choice, a stride of 2 to 4. Random programs (drawn by hypothesis) and the
differential cases run at a second and third size of their structure compile nothing.
"""
import contextlib
import random
import tempfile
from collections import OrderedDict
from unittest import mock

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
import lazyfuse.functions as lf_functions
from lazyfuse.codegen import c_compile
from lazyfuse.codegen.c_printer import CConfig, print_c
from lazyfuse.codegen.index import Affine, Var
from lazyfuse.codegen.kernel import Kernel, KernelArg, Load, Store
from lazyfuse.ir.dtypes import float32
from lazyfuse.runtime import triton_devices
from programs import COMMON, scaled
from programs_cases import CASES, inline_matmul_threshold, run_case

CPU = lf.device("cpu")


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
    # a stride that is no product of extents (the rows of a wider matrix) is one of the kernel's
    # runtime sizes, after the extents in the metadata: another width is the same code too
    sliced = print_c(kernel(6, 10, 40), CConfig())
    assert "z0 = meta[4]" in sliced and "a0[(z0*p0 + p1)]" in sliced and sliced != src
    assert kernel(6, 10, 40).sizes == (40,) and print_c(kernel(9, 17, 50), CConfig()) == sliced


# -- random programs at three sizes -----------------------------------------------------------------
# A hypothesis-drawn program over inputs x, y of shape (m, C), a vector v of shape (C,) and a
# (C, C) weight, drawn once at the first m and run again at two more: its structure is unchanged,
# as every m is above 1 and apart from every other size the program makes (C, C // 2, the 1s of
# keepdim reductions). The sizes share one size class (8-15): across a class the printed code may
# differ (a reduction over m unrolls or splits by its extent's class) and then the drain plans
# again, with no compiler run where the code is known (the 50-sizes tests above cross classes).
C = 12
M_SIZES = [9, 10, 11, 13, 14, 15]
UNARY_OPS = {"tanh": lambda a: a.tanh(), "sigmoid": lambda a: a.sigmoid(), "sin": lambda a: a.sin(),
             "relu": lambda a: a.relu(), "neg": lambda a: -a, "abs": lambda a: a.abs(),
             "exp": lambda a: a.clamp(-3, 3).exp(), "square": lambda a: a * a}
BINARY_OPS = {"add": lambda lib, a, b: a + b, "sub": lambda lib, a, b: a - b, "mul": lambda lib, a, b: a * b,
              "maximum": lambda lib, a, b: lib.maximum(a, b)}
IN_PLACE = {"add": "add_", "sub": "sub_", "mul": "mul_"}
KINDS = ["unary", "binary", "scalar", "reduce", "softmax", "transpose", "slice", "matmul", "inplace", "sync"]


def broadcast(a: tuple, b: tuple):
    try:
        return tuple(torch.broadcast_shapes(a, b))
    except RuntimeError:
        return None


def draw_program(data, m: int) -> list:
    """Steps ``(what, operand positions, detail)``, each valid at any m in ``M_SIZES`` (checked on
    the shapes at ``m``: broadcasting and which dims have size C hold at every m)."""
    shapes = [(m, C), (m, C), (C,)]   # x, y, v (the weight is only a matmul's)
    steps = []
    for _ in range(data.draw(st.integers(1, 8), label="program length")):
        i = data.draw(st.integers(0, len(shapes) - 1), label="operand")
        a = shapes[i]
        kind = data.draw(st.sampled_from(KINDS), label="op")
        if kind == "unary":
            steps.append(("unary", (i,), data.draw(st.sampled_from(sorted(UNARY_OPS)))))
        elif kind in ("binary", "inplace"):
            fits = [j for j, b in enumerate(shapes) if broadcast(a, b) == a or (kind == "binary" and broadcast(a, b))]
            if not fits:
                continue
            j = data.draw(st.sampled_from(fits))
            steps.append((kind, (i, j), data.draw(st.sampled_from(sorted(BINARY_OPS if kind == "binary" else IN_PLACE)))))
            a = broadcast(a, shapes[j])
        elif kind == "scalar":
            steps.append(("scalar", (i,), data.draw(st.sampled_from([0.5, -1.5, 2.0]))))
        elif kind in ("reduce", "softmax"):
            dim = data.draw(st.integers(0, len(a) - 1))
            if kind == "softmax":
                steps.append(("softmax", (i,), dim))
            else:
                steps.append(("reduce", (i,), (data.draw(st.sampled_from(["sum", "amax", "mean"])), dim)))
                a = tuple(1 if d == dim else s for d, s in enumerate(a))
        elif kind == "transpose" and len(a) == 2:
            steps.append(("transpose", (i,), None))
            a = a[::-1]
        elif kind == "slice" and C in a:   # every other element along a dim of size C (m's would change with m)
            dim = a.index(C)
            steps.append(("slice", (i,), dim))
            a = tuple(C // 2 if d == dim else s for d, s in enumerate(a))
        elif kind == "matmul" and a[-1] == C:
            steps.append(("matmul", (i,), None))
        elif kind == "sync":
            steps.append(("sync", (), None))
            continue
        else:
            continue
        shapes.append(a)
    return steps


def run_random_program(lib, sync, steps, *inputs):
    """The values of every step of ``steps`` in ``lib`` (lf or torch; ``sync()`` drains) from
    ``inputs`` x, y, v and the weight."""
    *vals, w = inputs
    for what, at, detail in steps:
        a = vals[at[0]] if at else None
        if what == "sync":
            sync()
            continue
        if what == "unary":
            out = UNARY_OPS[detail](a)
        elif what == "binary":
            out = BINARY_OPS[detail](lib, a, vals[at[1]])
        elif what == "inplace":   # a fresh copy written in place (a drain must run the write)
            out = a * 1
            getattr(out, IN_PLACE[detail])(vals[at[1]])
        elif what == "scalar":
            out = a * detail + 1
        elif what == "reduce":
            name, dim = detail
            out = getattr(a, name)(dim, keepdim=True)
        elif what == "softmax":
            out = a.softmax(detail)
        elif what == "transpose":
            out = a.transpose(0, 1)
        elif what == "slice":
            out = a[::2] if detail == 0 else a[:, ::2]
        else:
            out = a @ w
        vals.append(out)
    return vals


@contextlib.contextmanager
def nothing_compiled(dev):
    """An empty cache folder, no library or module loaded, no plan cached on ``dev``: for each
    example, so that a compiler run is the only way to code it has not compiled itself."""
    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAZYFUSE_CACHE_DIR", folder)
        mp.setattr(c_compile, "_loaded", c_compile.LibraryCache())
        mp.setattr(triton_devices, "_loaded", OrderedDict())
        for cache in (dev.engine.plans, dev.engine.structures, dev.engine.planned):
            cache.clear()
        yield


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@settings(COMMON, max_examples=scaled(12), deadline=None)
@given(data=st.data())
def test_random_programs_at_a_second_and_third_size_run_no_compiler(device, data):
    """Each size equals float64 torch; the second and third plan from the first one's structure
    (no planner run), compile nothing and launch as many kernels."""
    dev = lf.device(device)
    sizes = data.draw(st.permutations(M_SIZES), label="sizes")[:3]
    steps = draw_program(data, sizes[0])
    live = data.draw(st.sets(st.integers(0, len(steps) + 2), min_size=1), label="values read")
    rng = np.random.default_rng(len(steps))
    v, w = rng.standard_normal(C).astype(np.float32), (rng.standard_normal((C, C)) / np.sqrt(C)).astype(np.float32)
    with nothing_compiled(dev):
        moved = [run_at_size(dev, steps, live, m, rng, v, w) for m in sizes]
    first = moved[0]
    for m, d in zip(sizes[1:], moved[1:]):
        assert (d.compiler_runs, d.plans_built, d.kernels_launched) == (0, 0, first.kernels_launched), \
            f"at m={m} after m={sizes[0]}: {d} for {steps}"


def run_at_size(dev, steps, live, m: int, rng, v, w):
    """Run ``steps`` at ``m`` on ``dev`` and in float64 torch, compare the ``live`` values; the
    stats it moved."""
    x, y = (rng.standard_normal((m, C)).astype(np.float32) for _ in range(2))
    before = lf.stats(dev)
    # on the cpu every matmul takes the library path (the interpreter's matmul template keeps its sizes literal)
    with inline_matmul_threshold(0) if dev.kind == "cpu" else contextlib.nullcontext():
        got = run_random_program(lf, lambda: lf.sync(dev), steps, *(lf.tensor(a, device=dev) for a in (x, y, v, w)))
        values = {k: got[k].numpy() for k in sorted(live) if k < len(got)}
    moved = lf.stats(dev) - before
    # the values not read are still pending: a plan key holds every node on the tape, so leftovers at
    # this size would make the next size's drain another program. Each size starts from an empty tape.
    del got
    lf.sync(dev)
    want = run_random_program(torch, lambda: None, steps, *(torch.from_numpy(a).double() for a in (x, y, v, w)))
    for k, value in values.items():
        ref = want[k].numpy()
        np.testing.assert_allclose(value, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()),
                                   err_msg=f"value {k} at m={m}: {steps}")
    return moved


# -- index arithmetic at three sizes of the dim it reindexes ---------------------------------------
# Each program reads ``x`` of shape (5, n) through one index-arithmetic op along its last dim (n
# the size that changes) between elementwise ops. Their sizes are runtime values in the printed
# index: flip's ``n - 1 - i`` and roll's ``(i - shift) mod n`` (``index.render``), the triangle's
# ``j - i`` comparison, a movedim's strides, an unflatten into (2, n / 2) rows. (A roll with no
# dims, of the flattened tensor, is not among them: its reshape back divides by the literal n.)
REINDEXING = {
    "flip": lambda x: (x * 2).flip(-1) + 1,
    "flip both dims": lambda x: (x * 2).flip((0, 1)) + 1,
    "roll": lambda x: (x * 2).roll(3, -1) + 1,
    "roll back": lambda x: (x * 2).roll(-2, 1) + 1,
    "roll both dims": lambda x: (x * 2).roll((1, 2), (0, 1)) + 1,
    "roll of a flip": lambda x: (x * 2).flip(1).roll(1, 1) + 1,
    "roll into a row sum": lambda x: (x.roll(3, 1) * 2).sum(-1),
    "flip into a column sum": lambda x: (x.flip(1) * 2).sum(0),
    "tril": lambda x: (x * 2).tril(1) + 1,
    "triu": lambda x: (x * 2).triu(-2) + 1,
    "movedim": lambda x: (x * 2).movedim(0, 1) + 1,
    "unflatten": lambda x: (x * 2).unflatten(1, (2, x.shape[1] // 2)) + 1,
}


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(REINDEXING))
def test_index_arithmetic_at_a_second_and_third_size_runs_no_compiler(fresh_cache, device, name):
    """Values against torch at n = 8, 12, 10; the second and third size compile nothing and launch
    one kernel, as the first (a reindexing fuses with its neighbours)."""
    dev, fn = lf.device(device), REINDEXING[name]
    moved = []
    for n in (8, 12, 10):
        t = torch.randn(5, n)
        x = lf.tensor(t, device=dev)
        lf.sync(dev)
        before = lf.stats(dev)
        got = fn(x).torch()
        moved.append(lf.stats(dev) - before)
        torch.testing.assert_close(got, fn(t), msg=f"{name} at n={n}")
    assert moved[0].kernels_launched == 1, name
    for n, d in zip((12, 10), moved[1:]):
        assert (d.compiler_runs, d.kernels_launched) == (0, 1), f"{name} at n={n} after n=8: {d}"


def test_flip_and_roll_print_their_sizes_as_the_runtime_extents():
    """The printed index of a flip reads its source at ``n_p1 - 1 - p1``, a roll's at ``p1 - shift``
    plus ``n_p1`` where that is negative, the shift a runtime size (``z0``): no literal size, a
    division neither."""
    x = lf.tensor(torch.randn(5, 9), device=CPU)
    flip, = lf.explain((x * 2).flip(1) + 1).kernels
    roll, = lf.explain((x * 2).roll(3, 1) + 1).kernels
    assert "(n_p1 - 1 - p1)" in flip.source and "a0[(n_p1*p0 + (n_p1 - 1 - p1))]" in flip.source
    assert "a0[(n_p1*p0 + ((-z0 + p1) + n_p1*((-z0 + p1) < 0)))]" in roll.source
    assert not any(f"{n}*" in k.source or f"% {n}" in k.source for k in (flip, roll) for n in (8, 9))


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_roll_and_flip_gradients_are_the_inverse_reindexing(device):
    """roll's gradient is the roll by -shift, flip's the flip: against torch's autograd."""
    dev = lf.device(device)
    t, w = torch.randn(4, 7, dtype=torch.float64), torch.randn(4, 7, dtype=torch.float64)
    x = lf.tensor(t, device=dev, requires_grad=True)
    (x.exp().roll((3, -1), (1, 0)).flip(1) * lf.tensor(w, device=dev)).sum().backward()
    ref = t.clone().requires_grad_()
    (ref.exp().roll((3, -1), (1, 0)).flip(1) * w).sum().backward()
    torch.testing.assert_close(x.grad.torch(), ref.grad)


def test_roll_by_zero_or_a_whole_turn_is_a_copy_and_a_dim_named_twice_adds_its_shifts():
    t = torch.randn(3, 4)
    x = lf.tensor(t, device=CPU)
    for shifts, dims in ((0, 1), (4, 1), (-8, 1), ((1, 2), (1, 1)), ((5, -3), (0, -1))):
        got = x.roll(shifts, dims)
        assert got is not x and torch.equal(got.torch(), t.roll(shifts, dims)), (shifts, dims)
    with pytest.raises(lf.InvalidIndexError, match="shifts .* must be ints"):
        x.roll(1.5, 0)
    assert torch.equal((x * 2).torch(), t * 2)   # the engine goes on


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@settings(COMMON, max_examples=scaled(15), deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=3), data=st.data())
def test_random_flips_and_rolls_equal_torch(device, shape, data):
    """A flip of random dims, then a roll by random shifts (negative, beyond the size), of a
    random shape: equal to torch's."""
    dims = st.integers(-len(shape), len(shape) - 1)
    flipped = data.draw(st.lists(dims, unique_by=lambda d: d % len(shape), max_size=len(shape)), label="flipped")
    rolled = data.draw(st.lists(dims, min_size=1, max_size=3), label="rolled")
    shifts = data.draw(st.lists(st.integers(-20, 20), min_size=len(rolled), max_size=len(rolled)), label="shifts")
    t = torch.randn(*shape)
    got = (lf.tensor(t, device=lf.device(device)).flip(flipped) * 2).roll(shifts, rolled)
    assert torch.equal(got.torch(), (t.flip(flipped) * 2).roll(shifts, rolled))


# -- ops whose index arithmetic reads a source's size, at three sizes --------------------------------
# Each reads ``x`` of shape (3, n) (``d`` of shape (n, n + 1)) where a piece's start, a source's row
# length or a diagonal's stride is a size of the program: the kernel's runtime sizes
# (``Kernel.sizes``, after the loop extents in the launch metadata), so n = 11, 17, 14 is one code.
# Pending producers and buffers both; every program was one kernel before and still is.
RESIZING = {
    "cat of pending pieces": lambda x: lf_cat((x * 2, (x + 1)[:, :4]), 1) + 1,
    "cat of buffers": lambda x: lf_cat((x, x[:, :4]), 1) * 2,
    "cat growing by one": lambda x: lf_cat((x, x[:, -1:]), -1) * 2,
    "cat along rows": lambda x: lf_cat((x * 2, x + 1, x[:2]), 0) - 1,
    "pad": lambda x: F_pad(x * 2, (1, 2, 0, 1), value=0.5) + 1,
    "pad that crops": lambda x: F_pad(x * 2, (-2, 3)) + 1,
    "narrow of a pending": lambda x: (x * 2).narrow(1, 2, x.shape[1] - 3) + 1,
    "narrow of a buffer": lambda x: x.narrow(-1, 3, x.shape[1] - 5) * 2,
    "split of a pending": lambda x: (lambda a, b: a - b)(*(x * 2).split(x.shape[1] // 2, 1)[:2]),
    "chunk of a pending": lambda x: (lambda *cs: cs[0] * cs[1] + cs[-1][:, :1])(*(x * 2).chunk(3, 1)),
    "repeat": lambda x: (x * 2).repeat(2, 3) + 1,
    "tile": lambda x: (x * 2).tile((2,)) + 1,
    "roll without dims": lambda x: (x * 2).roll(5) + 1,
    "roll without dims, back": lambda x: (x * 2).roll(-4) + 1,
}
SQUARE = {
    "diagonal of a pending": lambda d: (d * 2).diagonal() + 1,
    "diagonal of a pending, offset": lambda d: (d * 2).diagonal(-1) + 1,
    "diagonal of a buffer": lambda d: d.diagonal(2) * 2,
}
# (program, its input's shape at n, the kernels it launches): other ranks and dims, a cat read by
# a row-wise kernel (the softmax's), a split into sections each summed by a kernel of its own
SHAPED = {
    "diagonal of dims 0 and 2": (lambda x: (x * 2).diagonal(0, 0, 2) + 1, lambda n: (n, 3, n + 2), 1),
    "pad of three dims": (lambda x: F_pad(x * 2, (1, 1, 2, 0, 0, 3)) + 1, lambda n: (2, n, 3), 1),
    "chunk along rows": (lambda x: (lambda a, b: a + b)(*(x * 2).chunk(2, 0)), lambda n: (2 * n, 3), 1),
    "cat along a middle dim into a sum": (lambda x: lf_cat((x, x * 2, x[:, :1]), 1).sum(-1), lambda n: (2, n, 3), 1),
    "cat into a softmax": (lambda x: lf_cat((x, x.exp()), -1).softmax(-1), lambda n: (3, n), 1),
    "split into sections": (lambda x: (lambda a, b, c: a.sum(-1) + c.sum(-1))(*(x * 2).split([2, x.shape[1] - 5, 3], 1)),
                            lambda n: (3, n), 3),
    "roll without dims of three dims": (lambda x: (x * 2).roll(-7) + 1, lambda n: (2, n, 3), 1),
    # past CAT_SELECTS: a write per piece (2), a pad's interior and border slabs (5), then the + 1
    # (rows of 6000: at every n the kernels are on the same side of c_parallel's threshold)
    "a large cat": (lambda x: lf_cat((x * 2, x[:, :5]), 1) + 1, lambda n: (n, 6000), 3),
    "a large pad": (lambda x: F_pad(x * 2, (1, 1, 1, 1), value=0.5) + 1, lambda n: (n, 2200), 6),
}


def lf_cat(pieces, dim):
    return (torch if isinstance(pieces[0], torch.Tensor) else lf).cat(pieces, dim)


def F_pad(x, pads, value=0.0):
    return (torch.nn.functional if isinstance(x, torch.Tensor) else lf.nn.functional).pad(x, pads, value=value)


def at_three_sizes(dev, fn, shape_of, sizes=(11, 17, 14), exact=True):
    """``fn`` at each size: its value against torch's (``exact``: equal), and the stats it moved."""
    moved = []
    for n in sizes:
        t = torch.randn(*shape_of(n), generator=torch.Generator().manual_seed(n))
        x = lf.tensor(t, device=dev)
        lf.sync(dev)
        before = lf.stats(dev)
        got = fn(x).torch()
        moved.append(lf.stats(dev) - before)
        if exact:
            assert torch.equal(got, fn(t)), f"at n={n}"
        else:   # (a sum, a softmax: their rounding)
            torch.testing.assert_close(got, fn(t), msg=f"at n={n}")
    return moved


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(RESIZING) + sorted(SQUARE) + sorted(SHAPED))
def test_ops_that_read_a_sources_size_compile_once_over_three_sizes(fresh_cache, device, name):
    dev = lf.device(device)
    fn, shape_of, kernels = (RESIZING[name], lambda n: (3, n), 1) if name in RESIZING else \
        (SQUARE[name], lambda n: (n, n + 1), 1) if name in SQUARE else SHAPED[name]
    moved = at_three_sizes(dev, fn, shape_of, exact=name not in SHAPED)
    assert moved[0].compiler_runs >= 1 and moved[0].kernels_launched == kernels, (name, moved[0])
    for n, d in zip((17, 14), moved[1:]):
        assert (d.compiler_runs, d.kernels_launched) == (0, kernels), f"{name} at n={n} after n=11: {d}"


def test_a_cats_starts_and_sizes_are_runtime_values():
    """A cat's piece is read at its index clamped into the piece (no division), and its start is
    a runtime size: the printed kernel holds no literal size, its metadata does."""
    x = lf.tensor(torch.randn(3, 9), device=CPU)
    k, = lf.explain(lf.cat((x, x[:, -1:]), 1) * 2).kernels
    assert "z0 = meta[4]" in k.source and "(p1 - (p1 - z0 + 1)*(p1 >= z0))" in k.source.replace("(p1)", "p1")
    assert not any(f"{n}*" in k.source or f"% {n}" in k.source or f"({n})" in k.source for n in (9, 10))


# the gradients of the ops above, float64 against torch's autograd, at three sizes: the backward's
# kernels (a cat's gradient is narrows of the output's, a narrow's a pad...) compile once too
GRADIENTS = {
    "cat": lambda lib, x: lf_cat((x.exp(), x[:, -1:] * 3), 1),
    "pad": lambda lib, x: F_pad(x.exp(), (2, 1, 1, 0), value=0.5),
    "narrow": lambda lib, x: x.exp().narrow(1, 2, x.shape[1] - 3),
    "chunk": lambda lib, x: (lambda a, b: a * b)(*x.exp().chunk(2, 1)),
    "repeat": lambda lib, x: x.exp().repeat(2, 3),
    "diagonal": lambda lib, x: x.exp()[:, :-1].diagonal(1),
    "roll without dims": lambda lib, x: x.exp().roll(4),
}


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_the_gradients_of_ops_that_read_a_sources_size_at_three_sizes(fresh_cache, device, name):
    dev, fn = lf.device(device), GRADIENTS[name]
    runs = []
    for n in (10, 16, 14):
        t = torch.randn(3, n, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
        w = torch.randn(fn(torch, t).shape, dtype=torch.float64)
        x = lf.tensor(t, device=dev, requires_grad=True)
        lf.sync(dev)
        before = lf.stats(dev).compiler_runs
        (fn(lf, x) * lf.tensor(w, device=dev)).sum().backward()
        got = x.grad.torch()
        runs.append(lf.stats(dev).compiler_runs - before)
        ref = t.clone().requires_grad_()
        (fn(torch, ref) * w).sum().backward()
        torch.testing.assert_close(got, ref.grad, msg=f"{name} at n={n}")
    assert runs[0] >= 1 and runs[1:] == [0, 0], (name, runs)


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@settings(COMMON, max_examples=scaled(25), deadline=None)
@given(data=st.data())
def test_random_cats_equal_torch(device, data):
    """A cat of 1-4 pieces along a random (negative too) dim, each of a random size along it (0
    included: an empty piece) and a buffer or a pending value, of float32 or int64 (positions):
    equal to torch's, then read by an elementwise op in the same kernel."""
    shape = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=3), label="shape")
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    sizes = data.draw(st.lists(st.integers(0, 7), min_size=1, max_size=4), label="sizes")
    pending = data.draw(st.lists(st.booleans(), min_size=len(sizes), max_size=len(sizes)), label="pending")
    dtype = data.draw(st.sampled_from([torch.float32, torch.int64]), label="dtype")
    gen = torch.Generator().manual_seed(len(sizes))
    pieces = []
    for s in sizes:
        piece_shape = list(shape)
        piece_shape[dim] = s
        pieces.append((torch.randn(piece_shape, generator=gen) * 100).to(dtype))
    dev = lf.device(device)

    def program(lib, ts):   # (t * 2 is exact: an FMA of t * 2 + 1 rounds as torch's two ops do)
        return lib.cat([t * 2 + 1 if p else t for t, p in zip(ts, pending)], dim) - 2
    got = program(lf, [lf.tensor(t, device=dev) for t in pieces]).torch()
    assert torch.equal(got, program(torch, pieces))


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@settings(COMMON, max_examples=scaled(25), deadline=None)
@given(data=st.data())
def test_random_constant_pads_equal_torch(device, data):
    """A constant pad of a random shape (empty dims too) by random amounts on each side of its
    last dims (negative: a crop), of a buffer or a pending value, small (a CAT node) or large
    (CAT_SELECTS at 0: every pad with an element writes its interior and border slabs into an
    uninitialised output, which those writes must cover exactly): equal to torch's."""
    shape = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=3), label="shape")
    dims = data.draw(st.integers(1, len(shape)), label="padded dims")
    pads = []
    for s in reversed(shape[len(shape) - dims:]):
        left = data.draw(st.integers(-min(s, 2), 3), label="left")
        # (crops first, as torch's: what the right one crops is left of what the left one cropped)
        pads += [left, data.draw(st.integers(-min(s - max(0, -left), 2), 3), label="right")]
    value = data.draw(st.sampled_from([0.0, -1.5, float("inf")]), label="value")
    pending = data.draw(st.booleans(), label="pending")
    large = data.draw(st.booleans(), label="large")
    t = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)))
    dev = lf.device(device)

    def program(x):
        return F_pad(x * 2 if pending else x, pads, value=value) + 1
    with mock.patch.object(lf_functions, "CAT_SELECTS", 0 if large else lf_functions.CAT_SELECTS):
        got = program(lf.tensor(t, device=dev)).torch()
    assert torch.equal(got, program(t))


# -- a generate loop: a sequence grows by one token a step ------------------------------------------
HEADS, HEAD_DIM, VOCAB = 2, 4, 50


def generate_step(lib, idx, k, v, emb):
    """One step of a nanoGPT-style ``generate``: the last token's query attends over a KV cache
    that grows by ``cat`` (a softmax over its length), and the next token (int64) is cat onto the
    sequence, as ``idx = torch.cat((idx, idx_next), dim=1)``."""
    last = idx[:, -1:]
    q = (last.to(lib.float32) * 0.1).reshape(1, 1, 1, 1) * emb.reshape(1, HEADS, 1, HEAD_DIM)
    k, v = lib.cat((k, q.tanh()), 2), lib.cat((v, q.sin()), 2)
    y = ((q * k).sum(-1).softmax(-1).unsqueeze(-1) * v).sum(2)
    idx_next = (last * 7 + idx.sum(-1, keepdim=True) + (y.sum() * 100).to(lib.int64)) % VOCAB
    return lib.cat((idx, idx_next), 1), k, v


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_a_generate_loop_growing_by_cat_stops_compiling(fresh_cache, device):
    """14 steps of ``generate_step``, each drained by a host read of the sequence: its tokens equal
    torch's at every step, and past the first few lengths (an empty cache, a length of 1, lengths
    equal to another size of the program: each a structure of its own) no step compiles."""
    dev = lf.device(device)
    start, emb = torch.tensor([[1, 2, 3]]), torch.linspace(-1, 1, HEADS * HEAD_DIM)
    empty = torch.zeros(1, HEADS, 0, HEAD_DIM)
    idx, k, v, lemb = (lf.tensor(t, device=dev) for t in (start, empty, empty, emb))
    ref = (start, empty, empty)
    runs = []
    for step in range(14):
        before = lf.stats(dev).compiler_runs
        idx, k, v = generate_step(lf, idx, k, v, lemb)
        got = idx.torch()
        runs.append(lf.stats(dev).compiler_runs - before)
        ref = generate_step(torch, *ref, emb)
        assert torch.equal(got, ref[0]), f"step {step}"
    assert sum(runs[6:]) == 0 and 0 < sum(runs[:6]), runs


# -- the index arithmetic itself, at every index ---------------------------------------------------
@settings(COMMON, max_examples=scaled(200), deadline=None)
@given(extents=st.lists(st.integers(1, 6), min_size=1, max_size=3), data=st.data())
def test_printed_index_arithmetic_equals_its_value_at_every_index(extents, data):
    """A random form over loop variables (negative coefficients too), taken modulo, divided by or
    clamped into a random size, or unravelled into rows and read back (``linear``): its text,
    printed with the loop extents and the form's runtime sizes as names (Python's ``//``, as the
    Triton printer), equals the value at every index (a clamp: in range, and equal where the
    form is)."""
    from lazyfuse.codegen import index as ix
    vs = [Var(f"p{j}", e) for j, e in enumerate(extents)]
    coeffs = data.draw(st.lists(st.integers(-12, 12), min_size=len(vs), max_size=len(vs)), label="coefficients")
    form = Affine(0, ()) + Affine(0, tuple((v, c) for v, c in zip(vs, coeffs) if c and v.extent > 1))
    form = form + Affine(max(0, -form.min) + data.draw(st.integers(0, 9), label="offset"), ())   # non-negative
    n = data.draw(st.integers(1, 20), label="size")
    how = data.draw(st.sampled_from(["mod", "floordiv", "clamp", "unravel"]), label="how")
    if how == "clamp":
        shifted = form + Affine(-data.draw(st.integers(0, 9), label="start"), ())
        result, exact = ix.clamped(shifted, n), shifted
    elif how == "unravel":
        # unravelled into rows of n and read back in rows of ``stride``: n is the flat index again
        shape = (data.draw(st.integers(1, 5), label="rows"), n)
        stride = data.draw(st.sampled_from([n, 2 * n, n + 1]), label="row stride")
        result, exact = ix.linear(ix.unravel(ix.mod(form, shape[0] * n), shape), (stride, 1)), None
    else:
        result, exact = (ix.mod(form, n), None) if how == "mod" else (ix.floordiv(form, n), None)
    sizes = ix.kernel_sizes([result], vs)
    text = ix.render(result, "//", {v: f"n_{v.name}" for v in vs}, size=ix.size_names({s: f"z{i}" for i, s in enumerate(sizes)}))
    env = {f"n_{v.name}": v.extent for v in vs} | {f"z{i}": s for i, s in enumerate(sizes)}
    for point in np.ndindex(*extents):
        env.update({v.name: int(i) for v, i in zip(vs, point)})
        value = form.const + sum(c * int(i) for c, i in zip(coeffs, point))   # (an extent-1 loop is at 0)
        got = eval(text, {}, env)
        if how == "clamp":
            inside = eval(ix.render(exact, "//", {}), {}, env)
            assert 0 <= got < max(n, 1) and (got == inside or not 0 <= inside < n), (text, point)
        else:
            flat = value % (shape[0] * n) if how == "unravel" else None
            want = value % n if how == "mod" else value // n if how == "floordiv" else stride * (flat // n) + flat % n
            assert got == want, (text, point, want)

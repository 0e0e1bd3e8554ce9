"""Pointwise C kernels over transposed / permuted inputs walk their two dims in square tiles
(``c_printer.transpose_tiles``; an op whose result follows its input's layout, ``x.t() + 1``,
reads and writes in memory order instead, so these cases make a row-major result): differential tests against torch eager at sizes that are no
multiple of any tile, views with offsets and negative strides, mixed dtypes, the float remainder's
and the power's two-pass loops, every tile candidate (``LAZYFUSE_AUTOTUNE_FORCE``), serial and
parallel; and the planner's kernels stay what they were (softmax of a transposed input: 1)."""
from __future__ import annotations

import pytest
import torch

import lazyfuse as lf
from lazyfuse.codegen.c_printer import TRANSPOSE_VARIANTS, CConfig, transpose_tiles
from lazyfuse.runtime import engine

CPU = lf.device("cpu")
TILES = {CConfig().transpose_tile} | {v["transpose_tile"] for v in TRANSPOSE_VARIANTS}
INDEXES = range(2 + len(TRANSPOSE_VARIANTS))   # the default, SERIAL (where parallel), each variant


def _rand(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype)


# name -> (f(x, y) on torch or lazyfuse tensors, x's shape and dtype, y's shape and dtype, tiled);
# ``d`` grows each shape so that every forced candidate plans anew (a cached plan keeps its config)
CASES = {
    "x.t() + 1, contiguous": (lambda x, y: (x.t() + 1).contiguous(), lambda d: (67 + d, 259), torch.float32, None,
                              None, True),
    "x + x.t()": (lambda x, y: x + x.t(), lambda d: (129 + d, 129 + d), torch.float32, None, None, True),
    "offset view, contiguous": (lambda x, y: x[3:, 5:-2].t().contiguous(), lambda d: (140 + d, 150), torch.float32,
                                None, None, True),
    "permute(0, 2, 1) * 2, contiguous": (lambda x, y: (x.permute(0, 2, 1) * 2).contiguous(),
                                         lambda d: (2, 130 + d, 131), torch.float32, None, None, True),
    "permute(2, 0, 1)": (lambda x, y: (x.permute(2, 0, 1) - 0.5).contiguous(), lambda d: (6, 130 + d, 130),
                         torch.float64, None, None, True),
    "float16 transpose + float32": (lambda x, y: x.transpose(-1, -2) + y, lambda d: (2, 129 + d, 133),
                                    torch.float16, lambda d: (2, 133, 129 + d), torch.float32, True),
    "bfloat16 t() * int64": (lambda x, y: x.t() * y, lambda d: (150 + d, 131), torch.bfloat16,
                             lambda d: (131, 150 + d), torch.int64, True),
    "int64 t() // 3": (lambda x, y: (x.t() // 3).contiguous(), lambda d: (130 + d, 140), torch.int64, None, None,
                       True),
    "two transposed inputs": (lambda x, y: (x.t() * y.t()).contiguous(), lambda d: (131 + d, 130), torch.float32,
                              lambda d: (131 + d, 130), torch.float32, True),
    "flipped, transposed": (lambda x, y: (x.flip(1).t() + 1).contiguous(), lambda d: (133 + d, 130), torch.float32,
                            None, None, True),
    "fmod (two passes)": (lambda x, y: torch_or_lf(x).fmod(x.t(), 0.7).contiguous(), lambda d: (129 + d, 131),
                          torch.float32, None, None, True),
    "pow by a number (two loops)": (lambda x, y: (x.t().abs() ** 2.5).contiguous(), lambda d: (129 + d, 131),
                                    torch.float32, None, None, True),
    "size-1 dim": (lambda x, y: (x.permute(2, 1, 0) + 1).contiguous(), lambda d: (130 + d, 1, 140), torch.float32,
                   None, None, True),
    "in place through a transposed view": (lambda x, y: x.t().mul_(2), lambda d: (129 + d, 140), torch.float32,
                                           None, None, True),
    # an op that follows its transposed input's layout (as torch's) reads and writes in memory order
    "x.t() + 1, streamed": (lambda x, y: x.t() + 1, lambda d: (67 + d, 259), torch.float32, None, None, False),
    "two transposed inputs, streamed": (lambda x, y: x.t() * y.t(), lambda d: (131 + d, 130), torch.float32,
                                        lambda d: (131 + d, 130), torch.float32, False),
    "zero-size dim": (lambda x, y: x.t() + 1, lambda d: (0, 300 + d), torch.float32, None, None, False),
    "one row": (lambda x, y: x.t() + 1, lambda d: (20000 + d, 1), torch.float32, None, None, False),
    "strided, no unit stride": (lambda x, y: x[:, ::2].t() + 1, lambda d: (300 + d, 260), torch.float32,
                                None, None, False),
}


def torch_or_lf(x):
    return lf if isinstance(x, lf.Tensor) else torch


@pytest.fixture
def plans(monkeypatch):
    """The plans drained while the test runs."""
    seen = []
    monkeypatch.setattr(engine, "drain_hook", lambda device, plan, build: seen.append(plan))
    return seen


def _run(name, d):
    fn, xshape, xdtype, yshape, ydtype, _ = CASES[name]
    xt = _rand(xshape(d), xdtype, d)
    yt = _rand(yshape(d), ydtype, d + 1) if yshape else None
    got = fn(lf.tensor(xt.clone()), lf.tensor(yt) if yt is not None else None).torch()
    want = fn(xt, yt)
    return got, want


@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
@pytest.mark.parametrize("name", list(CASES))
def test_every_tile_candidate_matches_torch(name, parallel, plans, monkeypatch):
    # threshold 0: every kernel gets a parallel region (its tiles shared); huge: none
    monkeypatch.setenv("LAZYFUSE_PARALLEL_THRESHOLD", "0" if parallel else str(1 << 60))
    ran = set()
    for index in INDEXES:
        monkeypatch.setenv("LAZYFUSE_AUTOTUNE_FORCE", str(index))
        # a new size plans anew only without a template of its structure (which would keep the
        # template's compiled code and config: runtime.structure)
        CPU.engine.structures.clear()
        plans.clear()
        got, want = _run(name, 2 * index + parallel)
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, msg=f"{name}, candidate {index}")
        (step,) = [st for plan in plans for st in plan.steps]
        tiles = transpose_tiles(step.kernel)
        assert (tiles is not None) == CASES[name][-1], step.source
        if tiles is not None:
            assert f"_t += {step.config.transpose_tile})" in step.source
            assert ("#pragma omp parallel" in step.source) == parallel
            ran.add(step.config.transpose_tile)
    assert ran == (TILES if CASES[name][-1] else set())   # every tile side a forced index reaches


@pytest.mark.parametrize("name,fn", [("softmax(x.t(), -1)", lambda m, x: m.softmax(x.t(), -1)),
                                     ("x.t() + 1", lambda m, x: x.t() + 1), ("x + x.t()", lambda m, x: x + x.t())])
def test_a_transposed_input_changes_no_kernel_count(name, fn):
    xt = torch.randn(300, 300)
    x = lf.tensor(xt)
    lf.sync()
    before = lf.stats(CPU)
    got = fn(lf, x).torch()
    assert (lf.stats(CPU) - before).kernels_launched == 1, name
    torch.testing.assert_close(got, fn(torch, xt))


def test_the_tile_shows_in_the_candidate_label():
    assert "transpose_tile" not in CConfig().label()
    assert all(f"transpose_tile={v['transpose_tile']}" in CConfig(**v).label() for v in TRANSPOSE_VARIANTS)

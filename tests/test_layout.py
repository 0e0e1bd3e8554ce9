"""An elementwise result, a copy and a ``*_like`` tensor take torch's layout (``ir/layout.py``):
``stride()`` and ``is_contiguous()`` as torch's, over random shapes, permutations, slices,
broadcasts and size-0/1 dims; the values as torch's; ``x.t() + 1`` still one kernel, now streamed
(read and written in memory order); in-place ops keep their tensor's layout; gradients through a
laid-out result as torch's."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from lazyfuse.codegen.c_printer import transpose_tiles
from lazyfuse.ir.layout import NUMBER, elementwise_layout, preserved_layout
from lazyfuse.ir.shapes import contiguous_strides
from lazyfuse.ir.view import View
from lazyfuse.runtime import engine

CPU = lf.device("cpu")
DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64]


@st.composite
def views(draw, shape, dtype):
    """A torch tensor of ``shape`` read through a view of a larger base: its dims permuted, some
    sliced with a step, some size-1 dims expanded; and the ops that made it from the base, to
    make the same view of a lazyfuse copy of the base."""
    nd = len(shape)
    expanded = [draw(st.booleans()) and s != 1 and draw(st.integers(0, 3)) == 0 for s in shape]
    inner = tuple(1 if e else s for s, e in zip(shape, expanded))
    steps = [draw(st.sampled_from([1, 1, 2])) for _ in inner]
    perm = draw(st.permutations(range(nd)))
    base_shape = tuple(max(s * k, s) for s, k in zip(inner, steps))
    stored = tuple(base_shape[p] for p in perm)
    seed = draw(st.integers(0, 2 ** 16))
    g = torch.Generator().manual_seed(seed)
    # (row-major, as lf.tensor's copy of it: torch's mul of an empty tensor may give it other strides)
    base = torch.randn(stored, generator=g).mul(8).to(dtype).clone(memory_format=torch.contiguous_format)
    inverse = tuple(sorted(range(nd), key=perm.__getitem__))
    index = tuple(slice(0, s * k, k) for s, k in zip(inner, steps))

    def make(b):
        return b.permute(inverse)[index].expand(shape)
    return base, make


def _shapes():
    return st.integers(1, 4).flatmap(lambda nd: st.tuples(*[st.sampled_from([0, 1, 1, 2, 3, 5])
                                                               for _ in range(nd)]))


def _broadcastable(shape):
    """``shape``, or its trailing dims with some set to 1 (an operand that broadcasts)."""
    return st.integers(0, len(shape)).flatmap(
        lambda lead: st.tuples(*[st.sampled_from([s, 1]) for s in shape[lead:]]))


def _pair(draw, shape, dtype):
    base, make = draw(views(shape, dtype))
    return make(base), make(lf.tensor(base))


def _strides(shape, layout):
    return contiguous_strides(shape) if layout is None else layout.strides


def _same(got: lf.Tensor, want: torch.Tensor, what, of=None):
    what = what if of is None else f"{what} of a {tuple(of.shape)} view with strides {of.stride()}"
    assert got.shape == tuple(want.shape), what
    # (an empty result's strides are compared by the rule's own test above: lazyfuse's views of
    # empty tensors do not always carry torch's strides into an op, which reads no element)
    assert got.stride() == want.stride() or 0 in want.shape, what
    assert got.is_contiguous() == want.is_contiguous(), what
    torch.testing.assert_close(got.torch(), want, msg=what, equal_nan=True)


# -- the rule itself, against torch's strides ------------------------------------------------------------
@settings(max_examples=120, deadline=None)
@given(data=st.data(), shape=_shapes(), nops=st.integers(1, 3), dtype=st.sampled_from(DTYPES))
def test_the_rule_gives_torchs_strides(data, shape, nops, dtype):
    operands = []
    for k in range(nops):
        if k and data.draw(st.integers(0, 5)) == 0:
            operands.append(2)   # a Python number: a 0-d operand to torch
        else:
            base, make = data.draw(views(data.draw(_broadcastable(shape)) if k else shape, dtype))
            operands.append(make(base))
    if nops == 1:
        out = operands[0].neg()
    elif nops == 2:
        out = operands[0] * operands[1]
    else:
        operands[0] = operands[0] > 0   # where's condition (its own layout, as torch made it)
        out = torch.where(*operands)
    sig = tuple(View(tuple(o.shape), o.stride()) if isinstance(o, torch.Tensor) else NUMBER for o in operands)
    assert _strides(tuple(out.shape), elementwise_layout(tuple(out.shape), sig)) == out.stride(), sig
    x = operands[0]
    for copy in (x.clone(), x.to(torch.float16), torch.empty_like(x)):
        assert _strides(tuple(x.shape), preserved_layout(View(tuple(x.shape), x.stride()))) == copy.stride(), \
            (x.shape, x.stride())


def test_the_rule_at_its_corners():
    # the first operand decides where two disagree; a broadcast dim abstains; a size-1 dim's own
    # stride counts with a number operand (no fast setup), not for a unary op
    t = torch.randn(4, 3).t()
    c = torch.randn(3, 4)
    for a, b in ((t, c), (c, t), (t, torch.randn(4)), (torch.randn(1, 3).t(), 1), (torch.randn(1, 3).t(), None)):
        out = a.exp() if b is None else a + b
        sig = tuple(View(tuple(o.shape), o.stride()) if isinstance(o, torch.Tensor) else NUMBER
                    for o in ((a,) if b is None else (a, b)))
        assert _strides(tuple(out.shape), elementwise_layout(tuple(out.shape), sig)) == out.stride()


# -- lazyfuse's results ----------------------------------------------------------------------------------
UNARY = [("neg", lambda x: -x), ("exp", lambda x: x.exp() if x.is_floating_point() else x.abs()),
         ("** 2", lambda x: x ** 2), ("abs", lambda x: x.abs()), ("clamp", lambda x: x.clamp(-1, 1)),
         ("clamp(min=)", lambda x: x.clamp(min=0))]
BINARY = [("+", lambda a, b: a + b), ("*", lambda a, b: a * b), ("<", lambda a, b: a < b),
          ("maximum", lambda a, b: a.maximum(b) if isinstance(b, (torch.Tensor, lf.Tensor)) else a * b)]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=_shapes(), dtype=st.sampled_from(DTYPES))
def test_unary_ops_casts_and_copies_take_torchs_layout(data, shape, dtype):
    want_x, got_x = _pair(data.draw, shape, dtype)
    for name, fn in UNARY:
        _same(fn(got_x), fn(want_x), name)
    assert got_x.stride() == want_x.stride()   # (the same view of the same base)
    _same(got_x.clone(), want_x.clone(), "clone", want_x)
    _same(got_x.double(), want_x.double(), ".double()")
    _same(got_x.to(lf.int32), want_x.to(torch.int32), ".to(int32)")
    _same(got_x.float(memory_format=torch.preserve_format), want_x.float(), ".float(preserve_format)")
    _same(got_x.clone(memory_format=torch.contiguous_format), want_x.clone(memory_format=torch.contiguous_format),
          "clone(contiguous_format)")
    for name in ("zeros_like", "ones_like"):
        _same(getattr(lf, name)(got_x), getattr(torch, name)(want_x), name)
    _same(lf.full_like(got_x, 3), torch.full_like(want_x, 3), "full_like")
    assert lf.empty_like(got_x).stride() == torch.empty_like(want_x).stride()
    assert lf.randn_like(got_x.double()).stride() == torch.randn_like(want_x.double()).stride()


@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=_shapes(), dtype=st.sampled_from(DTYPES), number=st.booleans())
def test_binary_ternary_ops_take_torchs_layout(data, shape, dtype, number):
    want_a, got_a = _pair(data.draw, shape, dtype)
    if number:
        want_b = got_b = 3
    else:
        want_b, got_b = _pair(data.draw, data.draw(_broadcastable(shape)), data.draw(st.sampled_from(DTYPES)))
    for name, fn in BINARY:
        _same(fn(got_a, got_b), fn(want_a, want_b), name)
        _same(fn(got_b, got_a) if not number else fn(got_a, got_b), fn(want_b, want_a) if not number
              else fn(want_a, want_b), f"reflected {name}")
    want_c, got_c = _pair(data.draw, data.draw(_broadcastable(shape)), torch.float64)
    _same(got_a * got_b + got_c, want_a * want_b + want_c, "a * b + c")
    _same(lf.where(got_a > 0, got_b, got_c), torch.where(want_a > 0, want_b, want_c), "where")
    _same(lf.where(got_a > 0, got_a, 0.5), torch.where(want_a > 0, want_a, 0.5), "where, a number")


def test_the_footguns():
    xt = torch.randn(3, 4)
    x = lf.tensor(xt)
    _same(x.t() + 1, xt.t() + 1, "x.t() + 1")
    assert (x.t() + 1).stride() == (1, 4)
    assert not (x.t() + 1).is_contiguous()
    with pytest.raises(lf.ShapeError):   # as torch's: the result is transposed, so no flat view
        (x.t() + 1).view(-1)
    with pytest.raises(RuntimeError):
        (xt.t() + 1).view(-1)
    _same((x.t() + 1).t().view(-1), (xt.t() + 1).t().view(-1), "a view of the result")
    _same((x.t() + 1).contiguous().view(-1), (xt.t() + 1).contiguous().view(-1), "contiguous().view()")
    _same((x.t() + 1).reshape(-1), (xt.t() + 1).reshape(-1), "reshape copies")
    _same(x.t().float().t(), xt.t().float().t(), ".float() keeps the layout")
    _same(x.t().contiguous(), xt.t().contiguous(), "contiguous()")
    c4 = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    _same(lf.tensor(c4).contiguous(memory_format=torch.channels_last) * 2, c4 * 2, "channels_last * 2")
    src = torch.randn(2, 3, 4, 5)
    _same(lf.tensor(src).clone(memory_format=torch.channels_last), src.clone(memory_format=torch.channels_last),
          "clone(channels_last)")


def test_in_place_ops_keep_their_tensors_layout():
    xt = torch.randn(5, 6)
    x = lf.tensor(xt)
    v, vt = x.t(), xt.t()
    for got, want in ((v.add_(1), vt.add_(1)), (v.mul_(v), vt.mul_(vt)), (v.exp_(), vt.exp_())):
        assert got.stride() == want.stride() == (1, 6)
        torch.testing.assert_close(got.torch(), want)
    torch.testing.assert_close(x.torch(), xt)


# -- fusion and speed's precondition: one kernel, in memory order -----------------------------------------
def _drained_steps(monkeypatch, fn):
    plans = []
    monkeypatch.setattr(engine, "drain_hook", lambda device, plan, build: plans.append(plan))
    lf.sync()
    before = lf.stats(CPU)
    out = fn().torch()
    return out, (lf.stats(CPU) - before).kernels_launched, [s for p in plans for s in p.steps if s.kind == "kernel"]


@pytest.mark.parametrize("name,fn", [("x.t() + 1", lambda m, x: x.t() + 1),
                                     ("x.permute(1, 0) * x.t()", lambda m, x: x.permute(1, 0) * x.t()),
                                     ("(x.t() + 1).exp() * 2", lambda m, x: (x.t() + 1).exp() * 2),
                                     ("x.t().double() - 1", lambda m, x: x.t().double() - 1)])
def test_a_transposed_input_is_one_streamed_kernel(name, fn, monkeypatch):
    xt = torch.randn(300, 200)
    x = lf.tensor(xt)
    out, kernels, steps = _drained_steps(monkeypatch, lambda: fn(lf, x))
    assert kernels == 1, name
    (step,) = steps
    assert transpose_tiles(step.kernel) is None, step.source   # no strided walk: both sides in memory order
    torch.testing.assert_close(out, fn(torch, xt))


@pytest.mark.parametrize("name,fn", [("softmax", lambda m, x: m.softmax(x.t(), -1)),
                                     ("layer_norm", lambda m, x: m.nn.functional.layer_norm(x.t(), (300,))),
                                     ("var", lambda m, x: x.t().var(-1)),
                                     ("logsumexp", lambda m, x: x.t().logsumexp(-1)),
                                     ("x.t().mul_(2)", lambda m, x: x.clone().t().mul_(2))])
def test_row_wise_composites_and_in_place_ops_keep_their_kernel_count(name, fn, monkeypatch):
    xt = torch.randn(300, 300)
    x = lf.tensor(xt)
    out, kernels, _ = _drained_steps(monkeypatch, lambda: fn(lf, x))
    assert kernels == (2 if name == "x.t().mul_(2)" else 1), name   # (the clone, then the write)
    want = fn(torch, xt)
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-5)
    assert out.stride() == want.stride(), name   # (layer_norm's result lost its row-major rule once)


# a reduction over a transposed/permuted operand with its elementwise epilogue: torch lays the result
# out as the operand, and lazyfuse's row-wise kernel writes each row of it strided (planner.row_order)
_ROW_PROGRAMS = {
    "x - amax": lambda m, x, d: x - x.amax(d, keepdim=True),
    "x * sum": lambda m, x, d: x * x.sum(d, keepdim=True),
    "exp(x - mean)": lambda m, x, d: (x - x.mean(d, keepdim=True)).exp(),
    "normalize": lambda m, x, d: x / (x * x).sum(d, keepdim=True).sqrt().clamp(min=1e-6),
    "softmax by hand": lambda m, x, d: (x - x.amin(d, keepdim=True)).exp() / (x - x.amin(d, keepdim=True)).exp().sum(
        d, keepdim=True),
    "tanh(x + max) * 3": lambda m, x, d: (x + x.amax(d, keepdim=True)).tanh() * 3,
}


def _kernels(fn):
    lf.sync()
    before = lf.stats(CPU)
    out = fn()
    out.torch()
    return out, (lf.stats(CPU) - before).kernels_launched


@pytest.mark.parametrize("name,fn", [
    ("x.t() - x.t().amax(-1, keepdim=True)", lambda m, x: x.t() - x.t().amax(-1, keepdim=True)),
    ("F.normalize(x.t())", lambda m, x: m.nn.functional.normalize(x.t()))])
@pytest.mark.parametrize("shape", [(300, 200), (64, 64)])
def test_a_reduction_over_a_transposed_input_fuses_with_its_laid_out_epilogue(name, fn, shape):
    xt = torch.randn(shape)
    x = lf.tensor(xt)
    out, kernels = _kernels(lambda: fn(lf, x))
    assert kernels == 1, name   # (it was 2: the reduction, then the epilogue in the result's order)
    _same(out, fn(torch, xt), name)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), shape=st.lists(st.integers(1, 6), min_size=2, max_size=3).map(tuple),
       name=st.sampled_from(sorted(_ROW_PROGRAMS)))
def test_reductions_over_permuted_operands_fuse_as_over_contiguous_ones(data, shape, name):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    dims = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    program = _ROW_PROGRAMS[name]
    base_t = torch.randn(shape)
    want = program(torch, base_t.permute(perm), dims)
    got, kernels = _kernels(lambda: program(lf, lf.tensor(base_t).permute(perm), dims))
    _same(got, want, f"{name} over dims {dims} of a {shape} tensor permuted by {perm}")
    contiguous = lf.tensor(base_t.permute(perm).contiguous())
    _, contiguous_kernels = _kernels(lambda: program(lf, contiguous, dims))
    assert kernels <= contiguous_kernels, (name, shape, perm, dims)


# -- autograd ---------------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=_shapes())
def test_gradients_through_laid_out_results(data, shape):
    want_a, _ = _pair(data.draw, shape, torch.float64)
    want_b, _ = _pair(data.draw, data.draw(_broadcastable(shape)), torch.float64)
    leaves_t = [w.detach().clone(memory_format=torch.contiguous_format).requires_grad_() for w in (want_a, want_b)]
    leaves = [lf.tensor(w.detach()).requires_grad_() for w in leaves_t]
    perm_a = tuple(np.random.default_rng(len(shape)).permutation(len(shape)))

    def f(m, a, b):
        a = a.permute(perm_a).permute(tuple(sorted(range(len(shape)), key=perm_a.__getitem__)))
        y = (a.t() if a.ndim == 2 else a) * 2
        y = y.exp().clone() + 1
        return (y * (b.t() if b.ndim == 2 and a.ndim == 2 else b)).to(m.float32).sum()
    try:
        want = f(torch, *leaves_t)
    except RuntimeError:
        return   # the shapes do not broadcast once transposed
    got = f(lf, *leaves)
    want.backward()
    got.backward()
    torch.testing.assert_close(got.torch(), want.detach(), rtol=1e-5, atol=1e-5)
    for g, w in zip(leaves, leaves_t):
        torch.testing.assert_close(g.grad.torch(), w.grad)

"""Reverse-mode autodiff against torch autograd, in float64, on hypothesis-drawn shapes.

Every case runs one op (or a composite: softmax, layer_norm, rms_norm, sdpa...) forward on
lazyfuse and on torch, back-propagates the same random output gradient through both, and
compares every input's ``.grad``. The rest pins the API: accumulation, no_grad, detach,
in-place refusals, retain_graph, and that a backward pass fuses like any program.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import given, settings
from hypothesis import strategies as st

import lazyfuse as lf
from lazyfuse.nn import functional as F
from lazyfuse.testing import count_launches

EXAMPLES = 4


def shapes(min_dims=1, max_dims=3, min_side=1, max_side=4):
    return st.lists(st.integers(min_side, max_side), min_size=min_dims, max_size=max_dims).map(tuple)


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast: the second drops leading dims and sets some to 1."""
    a = draw(shapes())
    keep = draw(st.integers(0, len(a)))
    b = tuple(1 if draw(st.booleans()) else s for s in a[len(a) - keep:])
    return (a, b) if draw(st.booleans()) else (b, a)


def _array(rng, shape, domain):
    x = rng.standard_normal(shape)
    if domain == "positive":
        return np.abs(x) + 0.5
    if domain == "nonzero":
        return np.where(x >= 0, x + 0.5, x - 0.5)
    return x


def check(lf_fn, torch_fn, shapes_, seed, domains=None, int_inputs=()):
    """Forward and backward on both sides; float inputs require grad, ``int_inputs`` are extra
    non-differentiable arguments given to both."""
    rng = np.random.default_rng(seed)
    domains = domains or ["any"] * len(shapes_)
    arrays = [_array(rng, s, d) for s, d in zip(shapes_, domains)]
    xs = [lf.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    lf_extra = [lf.tensor(i) for i in int_inputs]
    t_extra = [torch.tensor(i) for i in int_inputs]
    out = lf_fn(*xs, *lf_extra)
    ref = torch_fn(*ts, *t_extra)
    assert out.requires_grad and out.shape == tuple(ref.shape)
    g = rng.standard_normal(tuple(ref.shape))
    out.backward(lf.tensor(g))
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-9, atol=1e-12)
    for i, (x, t) in enumerate(zip(xs, ts)):
        expected = t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
        assert x.grad is not None and x.grad.shape == tuple(t.shape), f"input {i}"
        np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-8, atol=1e-10, err_msg=f"grad of input {i}")


# -- elementwise ---------------------------------------------------------------------------------------
UNARY = {
    "neg": (lambda x: -x, lambda x: -x, "any"),
    "abs": (lambda x: x.abs(), lambda x: x.abs(), "nonzero"),
    "exp": (lambda x: x.exp(), lambda x: x.exp(), "any"),
    "log": (lambda x: x.log(), lambda x: x.log(), "positive"),
    "sqrt": (lambda x: x.sqrt(), lambda x: x.sqrt(), "positive"),
    "rsqrt": (lambda x: x.rsqrt(), lambda x: x.rsqrt(), "positive"),
    "sin": (lambda x: x.sin(), lambda x: x.sin(), "any"),
    "cos": (lambda x: x.cos(), lambda x: x.cos(), "any"),
    "tanh": (lambda x: x.tanh(), lambda x: x.tanh(), "any"),
    "sigmoid": (lambda x: x.sigmoid(), lambda x: x.sigmoid(), "any"),
    "relu": (lambda x: F.relu(x), lambda x: TF.relu(x), "nonzero"),
    "gelu": (lambda x: F.gelu(x), lambda x: TF.gelu(x), "any"),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: TF.gelu(x, approximate="tanh"), "any"),
    "silu": (lambda x: F.silu(x), lambda x: TF.silu(x), "any"),
    "reciprocal": (lambda x: x.reciprocal(), lambda x: x.reciprocal(), "nonzero"),
    "pow_scalar": (lambda x: x ** 3, lambda x: x ** 3, "any"),
    "pow_fraction": (lambda x: x.pow(0.5), lambda x: x.pow(0.5), "positive"),
    "rpow": (lambda x: 2.0 ** x, lambda x: 2.0 ** x, "any"),
    "clamp": (lambda x: x.clamp(-0.5, 0.7), lambda x: x.clamp(-0.5, 0.7), "any"),
    "scalar_arith": (lambda x: (1.0 - x) / 3.0 + 2.0 * x - x / 0.5, lambda x: (1.0 - x) / 3.0 + 2.0 * x - x / 0.5,
                     "any"),
    "rdiv": (lambda x: 1.5 / x, lambda x: 1.5 / x, "nonzero"),
    "casts": (lambda x: (x.float() * 2).double() + x, lambda x: (x.float() * 2).double() + x, "any"),
    "clone_contiguous": (lambda x: x.clone().T.contiguous() * 1.0, lambda x: x.clone().T.contiguous() * 1.0, "any"),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=EXAMPLES, deadline=None)
@given(shape=shapes(), seed=st.integers(0, 2**32 - 1))
def test_unary_gradients_match_torch(name, shape, seed):
    lf_fn, t_fn, domain = UNARY[name]
    check(lf_fn, t_fn, [shape], seed, [domain])


BINARY = {
    "add": (lambda a, b: a + b, lambda a, b: a + b, "any"),
    "sub": (lambda a, b: a - b, lambda a, b: a - b, "any"),
    "mul": (lambda a, b: a * b, lambda a, b: a * b, "any"),
    "div": (lambda a, b: a / b, lambda a, b: a / b, "nonzero"),
    "pow": (lambda a, b: a.abs() ** b, lambda a, b: a.abs() ** b, "any"),
    "maximum": (lambda a, b: lf.maximum(a, b), lambda a, b: torch.maximum(a, b), "any"),
    "minimum": (lambda a, b: lf.minimum(a, b), lambda a, b: torch.minimum(a, b), "any"),
    "where": (lambda a, b: lf.where(a > b, a * 2, b), lambda a, b: torch.where(a > b, a * 2, b), "any"),
    "max_tensor": (lambda a, b: a.max(b) - b.min(a), lambda a, b: a.max(b) - b.min(a), "any"),
    "mod": (lambda a, b: a % b, lambda a, b: a % b, "nonzero"),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=EXAMPLES, deadline=None)
@given(pair=broadcast_pair(), seed=st.integers(0, 2**32 - 1))
def test_broadcasting_binary_gradients_match_torch(name, pair, seed):
    lf_fn, t_fn, domain = BINARY[name]
    check(lf_fn, t_fn, list(pair), seed, ["nonzero", domain])


def test_a_tie_in_maximum_splits_the_gradient_as_torch_does():
    check(lambda a, b: lf.maximum(a, b * 0 + a), lambda a, b: torch.maximum(a, b * 0 + a), [(3,), (3,)], 0)


# -- reductions ---------------------------------------------------------------------------------------
REDUCTIONS = {
    "sum": (lambda x, d: x.sum(d), lambda x, d: x.sum(d)),
    "sum_keepdim": (lambda x, d: x.sum(d, keepdim=True), lambda x, d: x.sum(d, keepdim=True)),
    "mean": (lambda x, d: x.mean(d), lambda x, d: x.mean(d)),
    "amax": (lambda x, d: x.amax(d), lambda x, d: x.amax(d)),
    "amin": (lambda x, d: x.amin(d, keepdim=True), lambda x, d: x.amin(d, keepdim=True)),
    "max_dim": (lambda x, d: x.max(d).values, lambda x, d: x.max(d).values),
    "min_dim": (lambda x, d: x.min(d)[0], lambda x, d: x.min(d)[0]),
    "var": (lambda x, d: x.var(d), lambda x, d: x.var(d)),
    "std": (lambda x, d: x.std(d, keepdim=True), lambda x, d: x.std(d, keepdim=True)),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@settings(max_examples=EXAMPLES, deadline=None)
@given(shape=shapes(min_side=2), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_reduction_gradients_match_torch(name, shape, data, seed):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    lf_fn, t_fn = REDUCTIONS[name]
    check(lambda x: lf_fn(x, dim), lambda x: t_fn(x, dim), [shape], seed)


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "amax", "var", "std"])
def test_full_reductions(name):
    check(lambda x: getattr(x, name)(), lambda x: getattr(x, name)(), [(3, 4)], 1)
    check(lambda x: x.sum((0, 2)), lambda x: x.sum((0, 2)), [(2, 3, 4)], 2)


# -- views and indexing -------------------------------------------------------------------------------
VIEWS = {
    "reshape": (lambda x: x.reshape(-1) * 1.0, lambda x: x.reshape(-1) * 1.0),
    "view": (lambda x: x.view(x.numel(), 1), lambda x: x.view(x.numel(), 1)),
    "permute": (lambda x: x.permute(*reversed(range(x.ndim))), lambda x: x.permute(*reversed(range(x.ndim)))),
    "transpose": (lambda x: x.transpose(0, -1), lambda x: x.transpose(0, -1)),
    "T": (lambda x: x.T * 1.0, lambda x: x.permute(*reversed(range(x.ndim))) * 1.0),
    "unsqueeze": (lambda x: x.unsqueeze(1), lambda x: x.unsqueeze(1)),
    "squeeze": (lambda x: x.unsqueeze(0).squeeze(), lambda x: x.unsqueeze(0).squeeze()),
    "expand": (lambda x: x.unsqueeze(0).expand(3, *x.shape), lambda x: x.unsqueeze(0).expand(3, *x.shape)),
    "flatten": (lambda x: x.flatten(), lambda x: x.flatten()),
    "slice_step": (lambda x: x[::2], lambda x: x[::2]),
    "slice_last": (lambda x: x[..., 1:], lambda x: x[..., 1:]),
    "int_index": (lambda x: x[-1], lambda x: x[-1]),
    "none_index": (lambda x: x[None, 0:1], lambda x: x[None, 0:1]),
    "view_of_permuted": (lambda x: x.T[1:].reshape(-1), lambda x: x.permute(*reversed(range(x.ndim)))[1:].reshape(-1)),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
@settings(max_examples=EXAMPLES, deadline=None)
@given(shape=shapes(min_side=2), seed=st.integers(0, 2**32 - 1))
def test_view_gradients_match_torch(name, shape, seed):
    lf_fn, t_fn = VIEWS[name]
    check(lf_fn, t_fn, [shape], seed)


@settings(max_examples=EXAMPLES, deadline=None)
@given(shape=shapes(min_dims=2, min_side=2), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_integer_tensor_indexing_scatter_adds_repeated_rows(shape, data, seed):
    dim = data.draw(st.integers(0, len(shape) - 1))
    idx = data.draw(st.lists(st.integers(-shape[dim], shape[dim] - 1), min_size=1, max_size=6))
    key = (slice(None),) * dim
    check(lambda x, i: x[key + (i,)], lambda x, i: x[key + (i,)], [shape], seed, int_inputs=[idx])


def test_embedding_gradient_accumulates_over_repeated_tokens():
    tokens = [[1, 3, 1], [0, 1, 4]]
    check(lambda w, i: F.embedding(i, w), lambda w, i: TF.embedding(i, w), [(5, 3)], 0, int_inputs=[tokens])


# -- matmul, cat, stack --------------------------------------------------------------------------------
@settings(max_examples=EXAMPLES, deadline=None)
@given(m=st.integers(1, 5), k=st.integers(1, 5), n=st.integers(1, 5), batch=shapes(0, 2, 1, 3),
       form=st.sampled_from(["2d", "batched_lhs", "batched_both", "vec_lhs", "vec_rhs"]), seed=st.integers(0, 2**32 - 1))
def test_matmul_gradients_match_torch(m, k, n, batch, form, seed):
    a, b = {"2d": ((m, k), (k, n)), "batched_lhs": (batch + (m, k), (k, n)),
            "batched_both": (batch + (m, k), (1,) * len(batch) + (k, n)), "vec_lhs": ((k,), (k, n)),
            "vec_rhs": (batch + (m, k), (k,))}[form]
    check(lambda x, y: x @ y, lambda x, y: x @ y, [a, b], seed)


def test_large_matmul_takes_the_library_path_and_differentiates():
    check(lambda x, y: F.linear(x, y).relu(), lambda x, y: TF.linear(x, y).relu(), [(64, 130), (140, 130)], 3)


@settings(max_examples=EXAMPLES, deadline=None)
@given(shape=shapes(min_side=1), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_cat_and_stack_gradients_match_torch(shape, data, seed):
    dim = data.draw(st.integers(0, len(shape) - 1))
    other = shape[:dim] + (data.draw(st.integers(1, 3)),) + shape[dim + 1:]
    check(lambda a, b: lf.cat([a, b * 2, a], dim), lambda a, b: torch.cat([a, b * 2, a], dim), [shape, other], seed)
    check(lambda a, b: lf.stack([a, b], dim).sin(), lambda a, b: torch.stack([a, b], dim).sin(), [shape, shape], seed)


# -- composites ---------------------------------------------------------------------------------------
@settings(max_examples=EXAMPLES, deadline=None)
@given(shape=shapes(min_side=2), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_softmax_and_log_softmax_gradients_match_torch(shape, data, seed):
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    check(lambda x: F.softmax(x, dim), lambda x: TF.softmax(x, dim), [shape], seed)
    check(lambda x: x.log_softmax(dim), lambda x: x.log_softmax(dim), [shape], seed)


@settings(max_examples=EXAMPLES, deadline=None)
@given(shape=shapes(min_side=2), seed=st.integers(0, 2**32 - 1))
def test_layer_norm_and_rms_norm_gradients_match_torch(shape, seed):
    n = shape[-1:]
    check(lambda x, w, b: F.layer_norm(x, n, w, b), lambda x, w, b: TF.layer_norm(x, n, w, b), [shape, n, n], seed)
    check(lambda x, w: F.rms_norm(x, n, w), lambda x, w: TF.rms_norm(x, n, w), [shape, n], seed)


@settings(max_examples=4, deadline=None)
@given(b=st.integers(1, 2), length=st.integers(1, 5), d=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_causal_attention_gradients_match_torch(b, length, d, seed):
    s = (b, length, d)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=True), [s, s, s], seed)


def test_float32_gradients_keep_their_dtype():
    x = lf.tensor(np.linspace(-1, 1, 6, dtype=np.float32), requires_grad=True)
    (x.double() * 3).sum().backward()
    assert x.grad.dtype is lf.float32
    np.testing.assert_array_equal(x.grad.numpy(), np.full(6, 3, np.float32))


# -- the API ------------------------------------------------------------------------------------------
def test_grad_accumulates_across_backwards_like_torch():
    x = lf.tensor([1.0, 2.0], requires_grad=True)
    (x * x).sum().backward()
    first = x.grad
    (x * 3).sum().backward()
    assert x.grad is first                                    # accumulated in place: one stable buffer
    np.testing.assert_allclose(x.grad.numpy(), [5.0, 7.0])


def test_a_leaf_used_twice_and_two_leaves_sharing_a_gradient_get_separate_buffers():
    x = lf.tensor([1.0, 2.0], requires_grad=True)
    y = lf.tensor([3.0, 4.0], requires_grad=True)
    (x + y + x).sum().backward()
    x.grad.add_(100.0)
    np.testing.assert_allclose(y.grad.numpy(), [1.0, 1.0])
    np.testing.assert_allclose(x.grad.numpy(), [102.0, 102.0])


def test_no_grad_detach_and_enable_grad():
    x = lf.ones(3, requires_grad=True)
    with lf.no_grad():
        assert not (x * 2).requires_grad
        with lf.enable_grad():
            assert (x * 2).requires_grad
    assert not x.detach().requires_grad and (x * 2).requires_grad
    assert x.is_leaf and not (x * 2).is_leaf and (x * 2).grad_fn is not None

    @lf.no_grad()
    def f(t):
        return t * 2
    assert not f(x).requires_grad and lf.is_grad_enabled()
    with pytest.raises(lf.AutogradError, match="does not require grad"):
        x.detach().sum().backward()


def test_requires_grad_flags_and_factories():
    for t in (lf.zeros(2, requires_grad=True), lf.ones(2, requires_grad=True), lf.randn(2, requires_grad=True),
              lf.full((2,), 3.0, requires_grad=True), lf.tensor([1.0], requires_grad=True)):
        assert t.requires_grad and t.is_leaf
    with pytest.raises(lf.DTypeError, match="floating point"):
        lf.tensor([1, 2], requires_grad=True)
    x = lf.tensor([1.0, 2.0], requires_grad=True)
    assert not x.argmax().requires_grad and not (x > 1).requires_grad
    with pytest.raises(lf.ShapeError, match="one-element"):
        (x * 2).backward()


def test_in_place_on_a_leaf_that_requires_grad_is_refused_unless_under_no_grad():
    w = lf.tensor([1.0, 2.0], requires_grad=True)
    for write in (lambda: w.add_(1), lambda: w.copy_(lf.zeros(2)), lambda: w[0].fill_(3), lambda: w.zero_()):
        with pytest.raises(lf.AutogradError, match="in-place"):
            write()
    np.testing.assert_allclose(w.numpy(), [1.0, 2.0])         # refused writes changed nothing
    buf = lf.zeros(2)
    buf.copy_(w * 2)   # a copy of a value that requires grad into a plain tensor: differentiable, as torch
    assert buf.requires_grad and not buf.is_leaf
    with lf.no_grad():
        w.mul_(3)
    np.testing.assert_allclose(w.numpy(), [3.0, 6.0])


def test_a_second_backward_needs_retain_graph():
    x = lf.tensor([1.0, 2.0], requires_grad=True)
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0]))))
    with pytest.raises(lf.AutogradError, match="second time"):
        y.backward()


def test_backward_is_lazy_and_gelu_backward_fuses_into_one_kernel():
    dev = lf.device("cpu")
    x = lf.randn(64, 32, requires_grad=True)
    lf.sync(dev)
    y = x.gelu()
    g = lf.randn(64, 32)
    lf.sync(dev)
    before = lf.stats(dev).kernels_launched
    y.backward(g)
    assert lf.stats(dev).kernels_launched == before             # recorded, not run
    with count_launches(dev) as launches:
        grad = x.grad.numpy()
    assert launches.kernels_launched == 1                       # the elementwise backward chain: one kernel
    t = torch.tensor(x.numpy(), requires_grad=True)
    TF.gelu(t).backward(torch.tensor(g.numpy()))
    np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_the_gelu_derivative_op_and_its_own_gradient_match_torch(device):
    """gelu's backward is one op, ``Op.GELU_GRAD`` (Phi(x) + x*phi(x) in one C function), equal to
    torch's ``gelu_backward`` in float64 (nan at +-inf as torch); differentiated again where
    autograd records it, it gives torch's double backward, phi(x) * (2 - x^2)."""
    from lazyfuse.autograd.rules import _gelu_grad
    xs = np.concatenate([np.random.default_rng(4).standard_normal(60) * 4,
                         [0.0, -0.7518, 14.4, -14.4, 20.0, -20.0, np.inf, -np.inf]]).astype(np.float32)
    x = lf.tensor(xs, device=lf.device(device), requires_grad=True)
    t = torch.tensor(xs.astype(np.float64), requires_grad=True)
    d, ref = _gelu_grad(x), torch.ops.aten.gelu_backward(torch.ones_like(t), t)
    np.testing.assert_allclose(d.numpy(), ref.detach().numpy(), rtol=1e-6, atol=2e-7)
    if device == "cpu":   # one exp and one polynomial per element, as gelu itself costs
        (src,) = [st.source for st in next(reversed(x.device.engine.plans.values())).steps]
        assert "lf_gelu_gradf(" in src and "lf_geluf(" not in src and "lf_expf(" not in src
    finite = slice(0, -2)   # (the second derivative at +-inf is nan in both; its gradient below is not compared)
    d[finite].sum().backward()
    ref[finite].sum().backward()
    np.testing.assert_allclose(x.grad.numpy()[finite], t.grad.numpy()[finite], rtol=1e-5, atol=1e-6)


def test_gradients_through_the_triton_kernels_on_the_interpreter():
    dev = lf.device("interpreter")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (5, 4), (5,))]
    xs = [lf.tensor(a, device=dev, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    F.layer_norm(F.linear(xs[0], xs[1], xs[2]).gelu(), (5,)).softmax(-1)[:, 0].sum().backward()
    TF.layer_norm(TF.gelu(TF.linear(ts[0], ts[1], ts[2])), (5,)).softmax(-1)[:, 0].sum().backward()
    for x, t in zip(xs, ts):
        np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", ["max", "min"])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_along_a_dim_sends_the_gradient_to_the_returned_index_only(device, name, keepdim):
    """torch's max(dim)/min(dim): ties do not split the gradient (amax/amin and the full max do)."""
    xv = [[1.0, 3.0, 3.0, -2.0], [2.0, 2.0, 0.0, 2.0], [5.0, -1.0, 5.0, -1.0]]
    weights = [[1.0], [2.0], [3.0]] if keepdim else [1.0, 2.0, 3.0]
    x = lf.tensor(xv, device=device).requires_grad_()
    (getattr(x, name)(1, keepdim=keepdim).values * lf.tensor(weights, device=device)).sum().backward()
    t = torch.tensor(xv, dtype=torch.float64, requires_grad=True)
    (getattr(t, name)(1, keepdim=keepdim).values * torch.tensor(weights, dtype=torch.float64)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), t.grad.numpy())


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_an_in_place_write_to_a_value_the_gradient_needs_raises_as_in_torch(device):
    """torch's version-counter rule: a tensor saved for backward and then written in place would
    give a gradient of the new value; backward() raises instead, naming the op."""
    x = lf.tensor([1.0, 2.0, 3.0], device=device).requires_grad_()
    w = lf.tensor([1.0, 1.0, 1.0], device=device)
    loss = (x * w).sum()
    w.mul_(5)
    with pytest.raises(lf.AutogradError, match="mul's gradient needs was modified by an in-place"):
        loss.backward()
    tx = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    tw = torch.ones(3)
    tloss = (tx * tw).sum()
    tw.mul_(5)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        tloss.backward()


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
def test_writes_after_backward_or_to_unsaved_tensors_are_fine(device):
    x = lf.tensor([1.0, 2.0, 3.0], device=device).requires_grad_()
    w = lf.tensor([2.0, 2.0, 2.0], device=device)
    unrelated = lf.tensor([0.0], device=device)
    loss = (x * w).sum()
    unrelated.add_(1)
    loss.backward()
    w.mul_(5)                      # after backward: the graph is gone
    with lf.no_grad():
        x.sub_(x.grad)             # an optimizer step
    np.testing.assert_array_equal(x.numpy(), [-1.0, 0.0, 1.0])


def _grad_case(m, x, w):
    """Two outputs sharing a subgraph; gradients wrt a leaf and an intermediate result."""
    h = (x * w).tanh()
    return h, [h.sum(), (h * h * w).mean()]


def test_autograd_grad_returns_gradients_of_leaves_and_intermediates_as_torch():
    xt, wt = torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    x, w = (lf.tensor(t.detach().numpy(), requires_grad=True) for t in (xt, wt))
    ht, outs_t = _grad_case(torch, xt, wt)
    h, outs = _grad_case(lf, x, w)
    want = torch.autograd.grad(outs_t, [xt, ht], grad_outputs=[torch.tensor(2.0), None], retain_graph=True)
    got = lf.autograd.grad(outs, [x, h], grad_outputs=[lf.tensor(2.0), None], retain_graph=True)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-6)
    assert x.grad is None and w.grad is None   # nothing accumulated
    # the retained graph takes a second call; a single output and input as bare tensors
    (gw,) = lf.autograd.grad(outs[0], w)
    np.testing.assert_allclose(gw.numpy(), torch.autograd.grad(outs_t[0], wt)[0].numpy(), rtol=1e-5, atol=1e-6)
    # pow at its edges, as tinygrad's test_pow_const_direct reads it
    for base in (-np.inf, 0.0, 1.0, np.inf):
        for c in (-1, 0, 0.3, 1, 2):
            t = torch.tensor([base], requires_grad=True)
            l = lf.tensor([base], requires_grad=True)
            np.testing.assert_allclose(lf.autograd.grad(l ** c, l)[0].numpy(), torch.autograd.grad(t ** c, t)[0].numpy())


def test_autograd_grad_of_an_unused_input_as_torch():
    xt, yt = torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)
    x, y = lf.ones(2, requires_grad=True), lf.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="not have been used in the graph"):
        torch.autograd.grad(xt.sum(), [xt, yt])
    with pytest.raises(RuntimeError, match="not have been used in the graph"):
        lf.autograd.grad(x.sum(), [x, y], retain_graph=True)
    gx, gy = lf.autograd.grad((x * 3).sum(), [x, y], allow_unused=True, retain_graph=True)
    assert gy is None and gx.tolist() == [3.0, 3.0]
    gy = lf.autograd.grad((x * 3).sum(), [y], materialize_grads=True)[0]
    assert gy.tolist() == torch.autograd.grad((xt * 3).sum(), [yt], materialize_grads=True)[0].tolist()
    with pytest.raises(RuntimeError, match="does not require grad"):
        lf.autograd.grad(x.sum(), [lf.ones(2)])
    with pytest.raises(lf.AutogradError, match="higher-order"):
        lf.autograd.grad(x.sum(), [x], create_graph=True)

"""Places where lazyfuse answered where torch gives another answer (conformance gaps): the eighth
session's reductions over a dim of a tensor of more than 64 dims (torch refuses them), the 0-d
results of the margin losses of a 1-d input, and ``out=`` of another shape or dtype; the
eleventh's (every sample of op_db) softmax, log_softmax and logsumexp over an empty dim (torch
computes them, lazyfuse refused the stabilising max) and cat of a 1-d empty tensor with tensors of
another rank (torch's legacy rule leaves it out; lazyfuse refused the ranks), masked_fill with a
mask of more dims than its input (torch broadcasts both), group_norm of an empty batch, view_copy
of a transpose (a copy needs no view: torch's takes any layout) and contiguous(memory_format=)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as TF

import lazyfuse as lf

F = lf.nn.functional


def _outcome(fn, x):
    """("ok", the result as a flat float64 torch tensor) or ("refused", the exception)."""
    try:
        out = fn(x)
        return "ok", (out.torch() if isinstance(out, lf.Tensor) else out).double().flatten()
    except Exception as e:   # noqa: BLE001 (the outcome compared is the exception itself)
        return "refused", e


# name -> a call both libraries take; over a tensor of 65 dims torch refuses some (a RuntimeError)
DEEP_CALLS = {
    "sum()": lambda t: t.sum(), "sum(())": lambda t: t.sum(()), "mean()": lambda t: t.mean(),
    "amax()": lambda t: t.amax(), "max()": lambda t: t.max(), "min()": lambda t: t.min(),
    "argmax()": lambda t: t.argmax(), "prod()": lambda t: t.prod(), "var()": lambda t: t.var(),
    "cumsum(0)": lambda t: t.cumsum(0), "sum(0)": lambda t: t.sum(0), "sum(-1, keepdim)": lambda t: t.sum(-1, True),
    "amax(0)": lambda t: t.amax(0), "amin(1)": lambda t: t.amin(1), "mean(0)": lambda t: t.mean(0),
    "max(0)": lambda t: t.max(0).values, "min(2)": lambda t: t.min(2).indices, "argmax(0)": lambda t: t.argmax(0),
    "argmin(3)": lambda t: t.argmin(3), "prod(0)": lambda t: t.prod(0), "var(0)": lambda t: t.var(0),
    "logsumexp(-1)": lambda t: t.logsumexp(-1), "any()": lambda t: (t > 0).any(), "all(0)": lambda t: (t > 0).all(0),
    "softmax(-1)": lambda t: t.softmax(-1), "log_softmax(0)": lambda t: t.log_softmax(0),
}
NN_CALLS = {"softmax": (lambda t: TF.softmax(t, 63), lambda t: F.softmax(t, 63)),
            "log_softmax": (lambda t: TF.log_softmax(t, -1), lambda t: F.log_softmax(t, -1)),
            "layer_norm": (lambda t: TF.layer_norm(t, (2, 3)), lambda t: F.layer_norm(t, (2, 3)))}


@pytest.mark.parametrize("name", sorted(DEEP_CALLS) + sorted(NN_CALLS))
def test_a_tensor_of_65_dims_is_reduced_or_refused_as_torch(name):
    xt = torch.randn([1] * 63 + [2, 3], generator=torch.Generator().manual_seed(0))
    torch_fn, lf_fn = NN_CALLS[name] if name in NN_CALLS else (DEEP_CALLS[name], DEEP_CALLS[name])
    want, got = _outcome(torch_fn, xt), _outcome(lf_fn, lf.tensor(xt))
    assert want[0] == got[0], (name, want, got)
    if want[0] == "ok":
        torch.testing.assert_close(got[1], want[1])
        return
    assert isinstance(want[1], RuntimeError) and "only tensors with up to 64 dims" in str(want[1])
    assert isinstance(got[1], lf.ShapeError) and isinstance(got[1], RuntimeError)
    assert "only tensors with up to 64 dims are supported" in str(got[1]) and "reshape" in str(got[1])
    # the refusal leaves the engine working: the same tensor still reduces over every dim
    torch.testing.assert_close(lf.tensor(xt).sum().torch(), xt.sum())


def test_64_dims_still_reduce_over_a_dim():
    xt = torch.randn([1] * 62 + [2, 3])
    torch.testing.assert_close(lf.tensor(xt).amax(-1).torch(), xt.amax(-1))
    torch.testing.assert_close(lf.tensor(xt).sum(63).torch(), xt.sum(63))


# (input shape, target, kwargs): one sample (a 0-d result on torch's CPU) and batches beside them
MARGIN_CASES = {
    "multi_margin_loss": [((5,), torch.tensor(1), {}), ((5,), torch.tensor(3), {"p": 2, "margin": 7.0}),
                          ((5,), torch.tensor([1]), {}), ((3, 5), torch.tensor([1, 0, 4]), {}),
                          ((1, 5), torch.tensor([2]), {})],
    "multilabel_margin_loss": [((5,), torch.tensor([1, 0, -1, 2, 3]), {}), ((), torch.tensor(0), {}),
                               ((2, 4), torch.tensor([[3, 0, -1, 1], [0, 1, 2, 3]]), {}),
                               ((1, 4), torch.tensor([[3, -1, 0, 1]]), {})],
}


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("name", sorted(MARGIN_CASES))
def test_margin_losses_of_one_sample_have_torchs_cpu_shape(name, reduction, device):
    for shape, target, kwargs in MARGIN_CASES[name]:
        xt = torch.randn(shape, generator=torch.Generator().manual_seed(len(shape)))
        want = getattr(TF, name)(xt, target, reduction=reduction, **kwargs)
        got = getattr(F, name)(lf.tensor(xt, device=device), lf.tensor(target, device=device), reduction=reduction,
                               **kwargs)
        assert got.shape == tuple(want.shape), (name, shape, target, reduction)
        torch.testing.assert_close(got.torch(), want)


_X = torch.randn(3, 4, generator=torch.Generator().manual_seed(2))
_I = torch.tensor([0, 2])
# name -> (torch's call, lazyfuse's) with an out= tensor: natively lowered (cat, arange, the index
# ops: each its own casting rule, as torch's) and externs (torch's rule asked on the meta device)
OUT_CALLS = {
    "exp": (lambda o: torch.exp(_X, out=o), lambda x, i, o: lf.exp(x, out=o)),
    "cat": (lambda o: torch.cat([_X, _X], out=o), lambda x, i, o: lf.cat([x, x], out=o)),
    "index_select": (lambda o: torch.index_select(_X, 0, _I, out=o), lambda x, i, o: lf.index_select(x, 0, i, out=o)),
    "arange": (lambda o: torch.arange(4, out=o), lambda x, i, o: lf.arange(4, out=o)),
    "max(dim)": (lambda o: torch.max(_X, 1, out=(o, torch.empty(0, dtype=torch.long))),
                 lambda x, i, o: lf.max(x, 1, out=(o, lf.empty(0, dtype=lf.int64)))),
    # functions.py's own: where and matmul of the result's dtype only, maximum/minimum cast as an
    # elementwise op, stack as cat
    "where": (lambda o: torch.where(_X > 0, _X, -_X, out=o), lambda x, i, o: lf.where(x > 0, x, -x, out=o)),
    "maximum": (lambda o: torch.maximum(_X, _X * 0.5 + 0.1, out=o), lambda x, i, o: lf.maximum(x, x * 0.5 + 0.1, out=o)),
    "minimum": (lambda o: torch.minimum(_X, _X[0], out=o), lambda x, i, o: lf.minimum(x, x[0], out=o)),
    "stack": (lambda o: torch.stack([_X, _X * 2], 1, out=o), lambda x, i, o: lf.stack([x, x * 2], 1, out=o)),
    "matmul": (lambda o: torch.matmul(_X, _X.t(), out=o), lambda x, i, o: lf.matmul(x, x.t(), out=o)),
    "matmul(1-d)": (lambda o: torch.matmul(_X, _X[1], out=o), lambda x, i, o: lf.matmul(x, x[1], out=o)),
    "extern add": (lambda o: torch.add(_X, 1, out=o), lambda x, i, o: lf.extern(torch.add, x, 1, out=o)),
    "extern cumsum": (lambda o: torch.cumsum(_X, 0, out=o), lambda x, i, o: lf.extern(torch.cumsum, x, 0, out=o)),
    "extern cat": (lambda o: torch.cat([_X, _X], out=o), lambda x, i, o: lf.extern(torch.cat, [x, x], out=o)),
}


def _out_outcome(call, out):
    """("ok", out's value, how many UserWarnings) or ("refused", the exception)."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            call(out)
        except Exception as e:   # noqa: BLE001 (the outcome compared is the exception itself)
            return "refused", e
    value = out.torch() if isinstance(out, lf.Tensor) else out
    return "ok", value, len([w for w in caught if issubclass(w.category, UserWarning)]) > 0


@pytest.mark.parametrize("out_shape", [(0,), (2, 3), (3, 4)])
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float64, torch.float16, torch.int64])
@pytest.mark.parametrize("name", sorted(OUT_CALLS))
def test_out_is_resized_and_cast_as_torchs(name, out_dtype, out_shape):
    torch_call, lf_call = OUT_CALLS[name]
    want = _out_outcome(torch_call, torch.zeros(out_shape, dtype=out_dtype))
    out = lf.zeros(out_shape, dtype=out_dtype)
    got = _out_outcome(lambda o: lf_call(lf.tensor(_X), lf.tensor(_I), o), out)
    assert got[0] == want[0], (want, got)
    if want[0] == "refused":
        assert isinstance(got[1], lf.DTypeError) and isinstance(got[1], type(want[1])), (want[1], got[1])
        assert "out" in str(got[1]), got[1]   # (out=, or torch's "output type")
        assert out.shape == out_shape and torch.equal(out.torch(), torch.zeros(out_shape, dtype=out_dtype))
        return
    assert got[1].dtype == want[1].dtype and got[1].shape == want[1].shape
    torch.testing.assert_close(got[1], want[1])
    assert got[2] == want[2]   # (a resize warns where the out had elements, as torch's)


# name -> (base, the out= view of it): torch writes through a view of the result's shape whatever its
# strides, and resizes one of another shape within its base's storage, contiguous from its offset
_VIEW_OUTS = {
    "strided, the result's shape": ((3, 8), lambda b: b[:, ::2]),
    "transposed": ((4, 3), lambda b: b.t()),
    "offset rows and columns": ((5, 6), lambda b: b[1:4, 1:5]),
    "a slice of another shape, room after it": ((20,), lambda b: b[2:5]),
    "strided, another shape": ((4, 6), lambda b: b[:, ::2]),
}


@pytest.mark.parametrize("device", ["cpu", "interpreter"])
@pytest.mark.parametrize("name", sorted(_VIEW_OUTS))
def test_a_view_out_is_written_and_resized_within_its_base_as_torchs(name, device):
    shape, view = _VIEW_OUTS[name]
    want_base = torch.zeros(shape)
    want = _out_outcome(lambda o: torch.exp(_X, out=o), view(want_base))
    base = lf.zeros(*shape, device=device)
    out = view(base)
    got = _out_outcome(lambda o: lf.exp(lf.tensor(_X, device=device), out=o), out)
    assert got[0] == "ok" and got[2] == want[2]   # (the resize's UserWarning where torch gives it)
    assert out.shape == tuple(want[1].shape)
    torch.testing.assert_close(got[1], want[1])
    torch.testing.assert_close(base.torch(), want_base)   # (the base sees the result where torch's does)


def test_a_view_out_without_room_for_the_result_is_refused_and_left_untouched():
    """torch grows the base's storage; lazyfuse cannot (other tensors view it): a ShapeError naming
    out= and the fix, the base unchanged."""
    base = lf.zeros(10)
    with pytest.raises(lf.ShapeError, match="out=.*pass a whole tensor"):
        lf.exp(lf.tensor(_X), out=base[:3])
    assert torch.equal(base.torch(), torch.zeros(10))
    assert torch.equal(lf.exp(lf.tensor(_X), out=lf.zeros(3, 4)[:, :]).torch(), _X.exp())   # (a whole view is fine)
    with pytest.raises(RuntimeError):   # an expanded out: torch refuses it too
        torch.exp(_X, out=torch.zeros(4).expand(3, 4))
    with pytest.raises(lf.LazyfuseError):
        lf.exp(lf.tensor(_X), out=lf.zeros(4).expand(3, 4))


# name -> (call(m, a, b, out), out: a function of (a, b)) where out aliases an input
_ALIASED_OUTS = {
    "maximum(out=a)": (lambda m, a, b, out: m.maximum(a, b, out=out), lambda a, b: a),
    "minimum(out=b)": (lambda m, a, b, out: m.minimum(a, b, out=out), lambda a, b: b),
    "where(out=b)": (lambda m, a, b, out: m.where(a > 0, a, b, out=out), lambda a, b: b),
    "maximum(out=part of a)": (lambda m, a, b, out: m.maximum(a[1:], b[1:], out=out), lambda a, b: a[:3]),
    "stack(out=the pieces' rows)": (lambda m, a, b, out: m.stack([a[0], a[1]], out=out), lambda a, b: a[:2]),
    "cat(out=a)": (lambda m, a, b, out: m.cat([a[:1], b[:3]], out=out), lambda a, b: a),
    "stack(disjoint rows of one base)": (lambda m, a, b, out: m.stack([b[0], b[1]], out=out), lambda a, b: b[2:]),
    # every pointwise op's out= (torch's TensorIterator check), native (add, fmod) or an extern (exp)
    "fmod(out=the next rows of a)": (lambda m, a, b, out: m.fmod(a[:3], 2.0, out=out), lambda a, b: a[1:]),
    "fmod(out=disjoint rows of a)": (lambda m, a, b, out: m.fmod(a[:2], 2.0, out=out), lambda a, b: a[2:]),
    "fmod(out=a)": (lambda m, a, b, out: m.fmod(a, 3.0, out=out), lambda a, b: a),
    "add(out=the next rows of b)": (lambda m, a, b, out: m.add(a[:3], b[:3], out=out), lambda a, b: b[1:]),
    "add(out=disjoint halves of one row)": (lambda m, a, b, out: m.add(a[0, :1], 1, out=out), lambda a, b: a[0, 1:2]),
    "exp(out=the next rows of a)": (lambda m, a, b, out: m.exp(a[:3], out=out), lambda a, b: a[1:]),
    "exp(out=a transposed)": (lambda m, a, b, out: m.exp(a[:3].t(), out=out), lambda a, b: a[:3]),
    "mul(out=the other columns of a)": (lambda m, a, b, out: m.mul(a[:, ::2], 3.0, out=out), lambda a, b: a[:, 1::2]),
    "clamp(out=a, shifted one)": (lambda m, a, b, out: m.clamp(a.reshape(-1)[:-1], -1, 1, out=out),
                                  lambda a, b: a.reshape(-1)[1:]),
}


@pytest.mark.parametrize("name", sorted(_ALIASED_OUTS))
def test_an_out_aliasing_an_input_is_taken_or_refused_as_torchs(name):
    """torch's elementwise ops take an ``out`` that is an input (each element written where it was
    read) but refuse one that overlaps an input in part; cat and stack refuse any overlap."""
    call, aliased = _ALIASED_OUTS[name]
    at = torch.tensor([[1.0, -5.0, 3.0], [0.5, 2.0, -1.0], [4.0, -2.0, 0.0], [-1.0, 8.0, 2.5]])
    bt = torch.tensor([[2.0, 2.0, -2.0], [1.0, -3.0, 6.0], [0.0, 1.0, 7.0], [5.0, 5.0, 5.0]])
    a, b = lf.tensor(at), lf.tensor(bt)
    try:
        want = call(torch, at, bt, aliased(at, bt)).clone()
    except RuntimeError as e:
        assert "memory location" in str(e)
        with pytest.raises(lf.ShapeError, match="out= overlaps"):
            call(lf, a, b, aliased(a, b))
        return
    got = call(lf, a, b, aliased(a, b))
    torch.testing.assert_close(got.torch(), want)
    torch.testing.assert_close(a.torch(), at)   # (the inputs torch's call wrote, as lazyfuse's)
    torch.testing.assert_close(b.torch(), bt)


def test_functions_out_on_the_interpreter():
    x = lf.tensor(_X, device="interpreter")
    outs = {n: lf.zeros(0, device="interpreter", dtype=lf.float64 if n in ("maximum", "stack") else lf.float32)
            for n in ("where", "maximum", "minimum", "stack", "matmul")}
    lf.where(x > 0, x, lf.zeros((), device="interpreter"), out=outs["where"])   # (with out=, torch's takes tensors only)
    lf.maximum(x, x * 0.5, out=outs["maximum"])
    lf.minimum(x, x[0], out=outs["minimum"])
    lf.stack([x, x], 2, out=outs["stack"])
    lf.matmul(x, x.t(), out=outs["matmul"])
    wants = {"where": torch.where(_X > 0, _X, 0.0), "maximum": torch.maximum(_X, _X * 0.5).double(),
             "minimum": torch.minimum(_X, _X[0]), "stack": torch.stack([_X, _X], 2).double(), "matmul": _X @ _X.t()}
    for n, want in wants.items():
        assert outs[n].device.kind == "interpreter"
        torch.testing.assert_close(outs[n].torch(), want)


@pytest.mark.parametrize("out_dtypes", [(torch.float32, torch.float32), (torch.int32, torch.float32)])
def test_aminmax_out_as_torchs(out_dtypes):
    """``aminmax(out=(min, max))``: written and returned, resized as torch's; another dtype refused
    (torch's aminmax does not cast into out), with an error torch's ``except RuntimeError`` catches."""
    x = torch.tensor([[1.0, 5.0, 3.0], [0.0, 2.0, -1.0]])
    want_outs = tuple(torch.zeros(7, dtype=d) for d in out_dtypes)
    got_outs = tuple(lf.zeros(7, dtype=getattr(lf, str(d).split(".")[1])) for d in out_dtypes)
    try:
        want = torch.aminmax(x, dim=1, out=want_outs)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            lf.aminmax(lf.tensor(x.numpy()), dim=1, out=got_outs)
        return
    with pytest.warns(UserWarning):
        got = lf.aminmax(lf.tensor(x.numpy()), dim=1, out=got_outs)
    for g, w, o in zip(got, want, got_outs):
        assert g is o
        torch.testing.assert_close(g.torch(), w)


def test_multinomial_out_of_another_dtype_is_refused_and_left_untouched():
    """torch's CPU multinomial takes only an int64 out= (its meta kernel takes any): refused when
    recorded, as torch refuses at once, so ``out`` keeps its value instead of becoming a failed one."""
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.tensor([0.2, 0.3, 0.5]), 2, out=torch.zeros(2, dtype=torch.float64))
    out = lf.tensor([7.0, 8.0], dtype=lf.float64)
    with pytest.raises(RuntimeError):
        lf.multinomial(lf.tensor([0.2, 0.3, 0.5]), 2, out=out)
    assert out.tolist() == [7.0, 8.0]
    good = lf.zeros(2, dtype=lf.int64)
    assert lf.multinomial(lf.tensor([0.0, 1.0, 0.0]), 1, out=good) is good and good.tolist()[0] == 1


@pytest.mark.parametrize("name", ["cat", "stack"])
def test_one_tensor_as_the_sequence_is_refused_as_torchs(name):
    """torch.cat(t) / torch.stack(t) of one Tensor is a TypeError (its rows are not a sequence for
    torch's binding); lazyfuse refused nothing and wrote ``out``."""
    with pytest.raises(TypeError):
        getattr(torch, name)(torch.zeros(2, 3))
    out = lf.tensor([1.0, 2.0])
    with pytest.raises(TypeError):
        getattr(lf, name)(lf.zeros(2, 3), **({"out": out} if name == "cat" else {}))
    assert out.tolist() == [1.0, 2.0]


_OUT_CALLS = {
    "add": lambda m, a, b, out: m.add(a, b, alpha=2, out=out),
    "sub": lambda m, a, b, out: m.sub(a, b, out=out),
    "mul": lambda m, a, b, out: m.mul(a, b, out=out),
    "div": lambda m, a, b, out: m.div(a, b, out=out),
    "cumsum": lambda m, a, b, out: m.cumsum(a, 0, out=out),
    "mm": lambda m, a, b, out: m.mm(a.reshape(3, 1), b.reshape(1, 3), out=out),
}


@pytest.mark.parametrize("name", sorted(_OUT_CALLS))
@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float64, torch.int64])
def test_native_functions_take_out_as_torchs(name, out_dtype):
    """``torch.add(a, b, out=c)`` and the like on lazyfuse's native functions: written into ``out``
    and returned where torch takes it, its dtype's rule torch's (an elementwise op casts to a wider
    out, refuses an int out of a float result; cumsum computes in out's dtype; mm takes only its own)."""
    import numpy as np
    a_np, b_np = np.array([1.5, -2.0, 3.25], np.float32), np.array([0.5, 4.0, -1.0], np.float32)
    call = _OUT_CALLS[name]
    want_out = torch.zeros(3 if name != "mm" else (3, 3), dtype=out_dtype)
    lf_dtype = {torch.float32: lf.float32, torch.float64: lf.float64, torch.int64: lf.int64}[out_dtype]
    got_out = lf.zeros(*want_out.shape, dtype=lf_dtype)
    try:
        call(torch, torch.from_numpy(a_np), torch.from_numpy(b_np), want_out)
    except RuntimeError:
        with pytest.raises(RuntimeError):
            call(lf, lf.tensor(a_np), lf.tensor(b_np), got_out)
        assert got_out.tolist() == torch.zeros_like(want_out).tolist()
        return
    assert call(lf, lf.tensor(a_np), lf.tensor(b_np), got_out) is got_out
    torch.testing.assert_close(got_out.torch(), want_out)


@pytest.mark.parametrize("name", ["add", "maximum", "where", "matmul", "stack", "exp", "cumsum(extern)"])
def test_out_of_an_input_that_requires_grad_is_refused_as_torchs(name):
    """torch: "functions with out=... arguments don't support automatic differentiation" (a
    RuntimeError); under no_grad the out is written, as torch's."""
    calls = {"add": lambda m, x, o: m.add(x, x, out=o), "maximum": lambda m, x, o: m.maximum(x, x * 2, out=o),
             "where": lambda m, x, o: m.where(x > 0, x, -x, out=o), "matmul": lambda m, x, o: m.matmul(x, x.t(), out=o),
             "stack": lambda m, x, o: m.stack([x, x], out=o), "exp": lambda m, x, o: m.exp(x, out=o),
             "cumsum(extern)": lambda m, x, o: m.cumsum(x, 0, out=o)}
    call = calls[name]
    with pytest.raises(RuntimeError, match="out="):
        call(torch, _X.clone().requires_grad_(), torch.zeros(0))
    x, out = lf.tensor(_X).requires_grad_(), lf.tensor([7.0])
    with pytest.raises(lf.AutogradError, match="out="):
        call(lf, x, out)
    assert out.tolist() == [7.0]
    with torch.no_grad():
        want = call(torch, _X.clone().requires_grad_(), torch.zeros(0))
    with lf.no_grad():
        got = call(lf, x, out)
    assert got is out
    torch.testing.assert_close(out.torch(), want)


EMPTY_DIM_CALLS = {
    "softmax(-1)": lambda m, t: t.softmax(-1), "softmax(0) of (0, 3)": lambda m, t: t.reshape(0, 3).softmax(0),
    "log_softmax(-1)": lambda m, t: m.nn.functional.log_softmax(t, -1),
    "logsumexp(-1)": lambda m, t: m.logsumexp(t, -1), "logsumexp((1, 2))": lambda m, t: m.logsumexp(t, (1, 2)),
    "logsumexp(1) of (2, 0)": lambda m, t: m.logsumexp(t.reshape(2, 0), 1),
    "logsumexp(1) of float16 (2, 0)": lambda m, t: m.logsumexp(t.reshape(2, 0).half(), 1),
}


@pytest.mark.parametrize("name", list(EMPTY_DIM_CALLS))
def test_softmax_and_logsumexp_over_an_empty_dim_as_torchs(name):
    # (an empty dim has no max to shift by, and amax refuses it: a sum of nothing is 0, its log -inf)
    want = EMPTY_DIM_CALLS[name](torch, torch.empty(5, 0, 0))
    got = EMPTY_DIM_CALLS[name](lf, lf.tensor(torch.empty(5, 0, 0))).torch()
    torch.testing.assert_close(got, want)


LEGACY_CATS = {
    "([], x) dim 1": (lambda t: [t([]), t([[1.0, 2.0], [3.0, 4.0]])], 1),
    "(x, [], x) int64": (lambda t: [t([[1, 2]]), t([], dtype=torch.int64), t([[3, 4]])], 0),
    "([] float, x int64): promoted": (lambda t: [t([]), t([[1, 2]])], -1),
    "([] int64, x float16)": (lambda t: [t([], dtype=torch.int64), t([[1.0, 2.0]], dtype=torch.float16)], 0),
}


@pytest.mark.parametrize("name", list(LEGACY_CATS))
def test_cat_leaves_out_a_1d_empty_tensor_as_torchs(name):
    make, dim = LEGACY_CATS[name]
    want = torch.cat(make(torch.tensor), dim)
    got = lf.cat(make(lf.tensor), dim).torch()
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_masked_fill_broadcasts_input_and_mask_and_its_in_place_form_refuses_as_torchs():
    x, mask = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([[True, False, True], [False, False, True]])
    for value in (7.5, torch.tensor(-1.0)):
        got = lf.tensor(x).masked_fill(lf.tensor(mask), lf.tensor(value) if isinstance(value, torch.Tensor) else value)
        assert torch.equal(got.torch(), x.masked_fill(mask, value))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.clone().masked_fill_(mask, 1.0)
    lazy = lf.tensor(x)
    with pytest.raises(lf.ShapeError, match=r"^output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
        lazy.masked_fill_(lf.tensor(mask), 1.0)
    assert torch.equal(lazy.torch(), x)


@pytest.mark.parametrize("shape", [(0, 4), (0, 4, 3), (0, 4, 2, 2)])
def test_group_norm_of_an_empty_batch_as_torchs(shape):
    weight, bias = torch.tensor([1.0, 2.0, 0.5, -1.0]), torch.tensor([0.0, 1.0, -1.0, 2.0])
    want = TF.group_norm(torch.empty(shape), 2, weight, bias)
    got = F.group_norm(lf.tensor(torch.empty(shape)), 2, lf.tensor(weight), lf.tensor(bias)).torch()
    assert got.shape == want.shape
    want = torch.native_group_norm(torch.empty(0, 4), weight, bias, 0, 4, 1, 2, 1e-5)
    got = lf.native_group_norm(lf.tensor(torch.empty(0, 4)), lf.tensor(weight), lf.tensor(bias), 0, 4, 1, 2, 1e-5)
    assert [g.torch().shape for g in got] == [w.shape for w in want]


def test_view_copy_takes_any_layout_as_torchs():
    x = torch.arange(250.0).reshape(5, 50)
    for shape in ((5, -1), (25, 10)):
        got = lf.view_copy(lf.tensor(x).t(), shape).torch()
        assert torch.equal(got, torch.view_copy(x.t(), shape))
    with pytest.raises(lf.ShapeError, match="^view size is not compatible"):
        lf.tensor(x).t().view(5, -1)   # (the view itself still refuses, as torch's)
    assert torch.equal(lf.view_copy(lf.tensor(x), torch.int32).torch(), torch.view_copy(x, torch.int32))


def test_contiguous_takes_a_memory_format_as_torchs():
    x = torch.arange(24.0).reshape(1, 2, 3, 4)
    lazy = lf.tensor(x)
    assert lazy.contiguous(memory_format=torch.contiguous_format) is lazy   # (itself, as torch's)
    for fmt in (torch.contiguous_format, torch.channels_last):
        got = lf.tensor(x).transpose(1, 3).contiguous(memory_format=fmt).torch()
        assert torch.equal(got, x.transpose(1, 3).contiguous(memory_format=fmt))
    copy = lazy.contiguous(memory_format=torch.channels_last)   # (a relayout: a copy in torch too)
    assert copy is not lazy and torch.equal(copy.torch(), x)
    assert lazy.contiguous(memory_format=torch.preserve_format) is lazy
    with pytest.raises(RuntimeError, match="preserve memory format is unsupported"):
        x.transpose(1, 3).contiguous(memory_format=torch.preserve_format)
    with pytest.raises(lf.ShapeError, match="^preserve memory format is unsupported by the contiguous operator"):
        lazy.transpose(1, 3).contiguous(memory_format=torch.preserve_format)


# -- found by running tinygrad's test_ops.py torch lambdas on lazyfuse tensors (the fourteenth session) --
PLAIN_INDEX_CALLS = {
    "gather": lambda x, i: x.gather(0, i), "gather_kw": lambda x, i: x.gather(dim=1, index=i),
    "lf.gather": lambda x, i: (lf.gather if isinstance(x, lf.Tensor) else torch.gather)(x, 0, i),
    "take_along_dim": lambda x, i: (lf.take_along_dim if isinstance(x, lf.Tensor) else torch.take_along_dim)(x, i, 0),
    "index_select": lambda x, i: x.index_select(1, i[0]),
    "index_add": lambda x, i: x.index_add(0, i[:, 0], x[: i.shape[0]] * 2),
    "mm": lambda x, i: x.mm(i.T.float()),
}


@pytest.mark.parametrize("name", PLAIN_INDEX_CALLS)
def test_a_plain_torch_tensor_argument_of_a_gather_or_matmul_is_uploaded(name):
    # (the compositions read their tensor arguments' lazyfuse internals: an AttributeError)
    gen = torch.Generator().manual_seed(1)
    xt, it = torch.randn(4, 5, generator=gen), torch.randint(0, 4, (3, 5), generator=gen)
    got = PLAIN_INDEX_CALLS[name](lf.tensor(xt), it)
    torch.testing.assert_close(got.torch(), PLAIN_INDEX_CALLS[name](xt, it))


@pytest.mark.parametrize("shapes", [((1,), (4,)), ((4,), (1,)), ((3,), (2,))])
def test_dot_of_vectors_of_different_lengths_is_refused_as_torchs(shapes):
    a, b = (torch.randn(s) for s in shapes)
    with pytest.raises(RuntimeError, match="inconsistent tensor size"):
        torch.dot(a, b)
    for call in (lambda x, y: lf.dot(x, y), lambda x, y: x.vdot(y)):
        with pytest.raises(lf.ShapeError, match="inconsistent tensor size"):
            call(lf.tensor(a), lf.tensor(b))
    with pytest.raises(lf.ShapeError):
        lf.tensor(a) @ lf.tensor(b)
    torch.testing.assert_close(lf.dot(lf.tensor(a[:1]), lf.tensor(b[:1])).torch(), torch.dot(a[:1], b[:1]))

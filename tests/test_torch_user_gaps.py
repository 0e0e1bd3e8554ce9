"""What a torch user or torch's own tests meet (the twelfth session's gaps), against torch 2.13:
var/std gradients with no more elements than the correction, logit's eps at float16 and
bfloat16, ``x[..., ...]``, batch_norm of an empty batch, dtypes equal to their torch twins,
``nn.Dropout`` and the functional API's parameter names."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import lazyfuse as lf


def _same(got, want):
    """``got`` (a lazyfuse tensor) is torch's ``want`` bit for bit, NaNs in the same places."""
    torch.testing.assert_close(got.torch(), want, rtol=0, atol=0, equal_nan=True)


# -- var/std gradients: torch's var_backward and std_backward --------------------------------------
X = [[0.0, 1.0, 2.0], [3.0, 3.0, 3.0]]


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("dim,correction", [(None, 0), (None, 1), (None, 5), (None, 6), (None, 7), (1, 0), (1, 2),
                                            (1, 3), (1, 4), (0, 2), ((0, 1), 6), (-1, 1)])
def test_var_and_std_gradients_as_torchs_when_few_elements_remain(name, dim, correction):
    xt = torch.tensor(X, requires_grad=True)
    xl = lf.tensor(X).requires_grad_()
    with warnings.catch_warnings():   # (torch warns of a divisor <= 0)
        warnings.simplefilter("ignore")
        want = getattr(xt, name)(dim=dim, correction=correction)
    got = getattr(xl, name)(dim=dim, correction=correction)
    _same(got, want.detach())
    want.sum().backward()
    got.sum().backward()
    _same(xl.grad, xt.grad)


@pytest.mark.parametrize("name", ["var", "std"])
@pytest.mark.parametrize("correction", [0, 1])
def test_var_and_std_gradients_of_one_element_and_of_a_0d_tensor(name, correction):
    for value in ([5.0], 5.0):
        xt = torch.tensor(value, requires_grad=True)
        xl = lf.tensor(value).requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = getattr(xt, name)(correction=correction)
        got = getattr(xl, name)(correction=correction)
        want.backward()
        got.backward()
        _same(xl.grad, xt.grad)


def test_var_gradient_in_float16_keeps_the_input_dtype():
    xt = torch.tensor(X, dtype=torch.float16, requires_grad=True)
    xl = lf.tensor(xt.detach()).requires_grad_()
    xt.var(1, keepdim=True).sum().backward()
    xl.var(1, keepdim=True).sum().backward()
    assert xl.grad.dtype == lf.float16
    _same(xl.grad, xt.grad)


# -- logit's eps in float16 and bfloat16 -----------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("eps", [None, 0.0, 1e-6, 1e-3, 0.1, 0.5])
def test_logit_at_low_precision_edges_as_torchs(dtype, eps):
    xs = torch.cat([torch.linspace(-0.05, 1.05, 2001), torch.tensor([0.0, 1.0, 1e-7, 1 - 1e-7, 1e-4, 0.9995])])
    xt = xs.to(dtype).requires_grad_()
    xl = lf.tensor(xt.detach()).requires_grad_()
    want, got = torch.logit(xt, eps), lf.logit(xl, eps)
    _same(got, want.detach())
    want.sum().backward()
    got.sum().backward()
    _same(xl.grad, xt.grad)


# -- several ellipses: torch's rule (each stands for every dim the key leaves unindexed) -----------
@pytest.mark.parametrize("key", [(..., ...), (..., 0, ...), (0, ..., ...), (..., None, ...), (..., ..., ..., ...),
                                 (0, ..., 0, ...), (..., ..., 0), (..., 0, ..., 0), (..., ..., None)],
                         ids=lambda k: repr(k).replace("Ellipsis", "..."))
def test_several_ellipses_index_as_torchs(key):
    xt = torch.arange(24.0).reshape(2, 3, 4)
    try:
        want = xt[key]
    except IndexError:
        with pytest.raises(IndexError, match="ellipsis") as raised:
            lf.tensor(xt)[key]
        assert isinstance(raised.value, lf.LazyfuseError)
        return
    _same(lf.tensor(xt)[key], want)
    xt[key] = -1.0
    xl = lf.tensor(torch.arange(24.0).reshape(2, 3, 4))
    xl[key] = -1.0
    _same(xl, xt)


# -- batch_norm of an empty input ------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(0,), (0, 3), (0, 3, 2), (2, 3, 0)])
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("stats", [True, False])
def test_batch_norm_of_an_empty_input_as_torchs(shape, training, stats):
    def run(m):
        running = (m.zeros(3), m.ones(3)) if stats else (None, None)
        x = m.zeros(*shape).requires_grad_()
        w, b = m.full((3,), 2.0).requires_grad_(), m.ones(3).requires_grad_()
        out = m.nn.functional.batch_norm(x, *running, w, b, training=training)
        out.sum().backward()
        return out, x.grad, w.grad, b.grad, running
    want, got = run(torch), run(lf)
    for g, t in zip(got[:4], want[:4]):
        _same(g, t)
    if stats:   # never read nor updated
        _same(got[4][0], want[4][0])
        _same(got[4][1], want[4][1])


def test_batch_norm_of_one_value_per_channel_is_refused_with_torchs_words():
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training") as raised:
        lf.nn.functional.batch_norm(lf.ones(1, 3), None, None, training=True)
    assert isinstance(raised.value, lf.ShapeError)


# -- dtypes equal to their torch twins -------------------------------------------------------------
@pytest.mark.parametrize("name", ["bool", "int32", "int64", "float16", "bfloat16", "float32", "float64"])
def test_a_dtype_equals_its_torch_twin_and_hashes_as_it(name):
    ours, theirs = getattr(lf, name), getattr(torch, name)
    x = lf.zeros(2, dtype=ours)
    assert x.dtype == theirs and theirs == x.dtype and not x.dtype != theirs
    assert hash(ours) == hash(theirs)
    assert {ours: 1}[theirs] == 1 and {theirs: 2}[ours] == 2 and len({ours, theirs}) == 1
    others = [getattr(torch, n) for n in ("bool", "int32", "int64", "float16", "bfloat16", "float32", "float64")
              if n != name]
    assert all(x.dtype != t and not t == x.dtype for t in others)
    assert ours != name and ours != theirs.__repr__() and ours is not None


# -- nn.Dropout and F.dropout's default ------------------------------------------------------------
def test_dropout_module_follows_train_and_eval_as_torchs():
    ours, theirs = lf.nn.Dropout(p=0.25), torch.nn.Dropout(p=0.25)
    assert repr(ours) == repr(theirs) and ours.training == theirs.training is True
    kept = ours(lf.ones(4000)).numpy()
    assert set(kept.tolist()) == {0.0, float(np.float32(1 / 0.75))} and 0.2 < (kept == 0).mean() < 0.3
    assert ours.eval() is ours and not ours.training
    _same(ours(lf.arange(5.0)), theirs.eval()(torch.arange(5.0)))
    ours.train()
    x = lf.ones(100)
    assert lf.nn.Dropout(0.5, inplace=True)(x) is x and (x.numpy() == 0).any()
    with pytest.raises(ValueError):
        lf.nn.Dropout(p=1.5)


def test_functional_dropout_trains_by_default_as_torchs():
    import inspect
    assert inspect.signature(lf.nn.functional.dropout).parameters["training"].default is \
        inspect.signature(torch.nn.functional.dropout).parameters["training"].default is True
    assert (lf.nn.functional.dropout(lf.ones(1000), 0.5).numpy() == 0).any()


# -- the functional API's parameter names ----------------------------------------------------------
# torch's C functions whose doc names parameters the function does not take (one_hot's says
# ``tensor``; torch 2.13 takes ``input=`` only)
DOC_ERRATA = {"one_hot": ["input", "num_classes"]}


def _parameter_names(fn):
    """The names of ``fn``'s parameters: from its signature, or (torch's C functions) its doc's first line."""
    import inspect
    import re
    if fn is getattr(torch.nn.functional, fn.__name__, None) and fn.__name__ in DOC_ERRATA:
        return DOC_ERRATA[fn.__name__]
    try:
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    except (TypeError, ValueError):
        inner = re.match(r"\s*\w+\((.*?)\)\s*->", fn.__doc__, re.DOTALL).group(1)
        return [re.split(r"[\s=:]", part.strip())[0] for part in inner.split(",") if part.strip() not in ("", "*")]


def _shared_functions():
    F = lf.nn.functional
    return sorted(n for n in dir(F) if not n.startswith("_") and callable(getattr(F, n))
                  and not isinstance(getattr(F, n), type) and callable(getattr(torch.nn.functional, n, None))
                  and getattr(torch.nn.functional, n).__doc__)


def test_the_functional_api_has_torchs_parameter_names():
    """Every ``lf.nn.functional`` function torch's has takes torch's parameters by torch's names, in
    torch's order (``F.relu(input=x)``, ``F.one_hot(input=t)``): ours may add parameters after them."""
    names = _shared_functions()
    assert len(names) >= 60   # (the count when this test was written: a new function joins it)
    wrong = {}
    for n in names:
        theirs, ours = _parameter_names(getattr(torch.nn.functional, n)), _parameter_names(getattr(lf.nn.functional, n))
        if ours[:len(theirs)] != theirs:
            wrong[n] = (theirs, ours)
    assert not wrong


def test_the_first_argument_is_taken_by_torchs_keyword():
    x = torch.linspace(-2, 2, 12).reshape(3, 4)
    for call in (lambda m: m.nn.functional.relu(input=m.tensor(x.numpy())),
                 lambda m: m.nn.functional.softmax(input=m.tensor(x.numpy()), dim=1),
                 lambda m: m.nn.functional.layer_norm(input=m.tensor(x.numpy()), normalized_shape=(4,)),
                 lambda m: m.nn.functional.pad(input=m.tensor(x.numpy()), pad=(1, 1)),
                 lambda m: m.nn.functional.one_hot(input=m.tensor([0, 2, 1]), num_classes=3)):
        torch.testing.assert_close(call(lf).torch(), call(torch))

"""torch's refusals, refused by lazyfuse too: each input torch raises on (mostly the OpInfo
``error_inputs`` that ``python -m lazyfuse.conformance --errors`` found answered with a value or
with an internal Python error) raises a LazyfuseError that is also the builtin torch raises, and
the engine works after it."""
from __future__ import annotations

import pytest
import torch

import lazyfuse as lf
from lazyfuse import conformance

F = lf.nn.functional
TF = torch.nn.functional


class _Side:
    """torch or lazyfuse as ``m`` of a case, ``m.F`` its functional namespace."""

    def __init__(self, module, functional):
        self.module, self.F = module, functional

    def __getattr__(self, name):
        return getattr(self.module, name)


def _both(make):
    """``make(m, t)`` with m = torch and t = torch.tensor, then m = lazyfuse and t = lf.tensor."""
    return (lambda: make(_Side(torch, TF), torch.tensor)), (lambda: make(_Side(lf, F), lf.tensor))


X = [[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]]
CASES = {
    # silent values before: lazyfuse computed where torch raises
    "narrow: negative length": lambda m, t: t(X).narrow(1, 0, -1),
    "narrow: bool start": lambda m, t: t(X).narrow(0, t(True), 1),
    "narrow: start past the end": lambda m, t: t(X).narrow(1, 4, 0),
    "movedim: repeated source": lambda m, t: t(X).reshape(1, 2, 3).movedim((1, 0, -2), (0, 1, 2)),
    "movedim: repeated destination": lambda m, t: t(X).reshape(1, 2, 3).movedim((1, 0, 2), (0, 2, -1)),
    "diff: negative order": lambda m, t: m.diff(t(X), -1),
    "isclose: negative rtol": lambda m, t: m.isclose(t(X), t(X), rtol=-0.5),
    "isclose: negative atol": lambda m, t: m.isclose(t(X), t(X), atol=-0.5),
    "bucketize: 2-d boundaries": lambda m, t: m.bucketize(t(X), t(X)),
    "scatter_add: src of another dtype": lambda m, t: m.scatter_add(t(X).double(), 0, t([[0, 1, 0]]),
                                                                    t([[1.0, 2.0, 3.0]])),
    "rms_norm: empty normalized_shape": lambda m, t: m.F.rms_norm(t(X), ()),
    "rms_norm: normalized_shape not the last dims": lambda m, t: m.F.rms_norm(t(X), (2,)),
    "prelu: 2-d weight": lambda m, t: m.F.prelu(t(X), t([[0.25, 0.25, 0.25]])),
    "hardtanh: min above max": lambda m, t: m.F.hardtanh(t(X), 0.5, -0.5),
    "softshrink: negative lambd": lambda m, t: m.F.softshrink(t(X), -0.5),
    "huber_loss: zero delta": lambda m, t: m.F.huber_loss(t(X), t(X), delta=0.0),
    "triplet_margin_loss: negative margin": lambda m, t: m.F.triplet_margin_loss(t(X), t(X), t(X), margin=-1.0),
    "hypot of integers": lambda m, t: m.hypot(t([1, 2]), t([3, 4])),
    "logaddexp of integers": lambda m, t: m.logaddexp(t([1, 2]), t([3, 4])),
    "embedding: 3-d weight": lambda m, t: m.F.embedding(t([[0, 0], [0, 0]]), t([[[1.0]]])),
    "embedding: 0-d weight": lambda m, t: m.F.embedding(t([[0, 0], [0, 0]]), t(1.0)),
    "cat: out= its own empty first piece": lambda m, t: (lambda e: m.cat([e, t([[1.0, 2.0]])], 0, out=e))(t([])),
    # Python internals leaking before (IndexError, ValueError, AttributeError, OverflowError)
    "unbind of a 0-d tensor": lambda m, t: m.unbind(t(1.0)),
    "roll of a 0-d tensor": lambda m, t: m.roll(t(1.0), 0, 0),
    "narrow of a 0-d tensor": lambda m, t: t(1.0).narrow(0, 0, 1),
    "rot90 with one dim": lambda m, t: m.rot90(t(X), 1, (0,)),
    "arange to infinity": lambda m, t: m.arange(0, float("inf")),
    "fmax with a Python number": lambda m, t: m.fmax(t([1, 2]), 2),
    "heaviside with a Python number": lambda m, t: m.heaviside(t(X), 2),
    "isclose with a Python number": lambda m, t: m.isclose(t(X), 2),
    "clamp_max of a Python number": lambda m, t: m.clamp_max(2, t(X)),
    "atan2 of two Python numbers": lambda m, t: m.atan2(2, 3.0),
    "xlogy of two Python numbers": lambda m, t: m.xlogy(2.0, 3.0),
    # the wrong builtin before (a ValueError where torch raises IndexError, a TypeError for ValueError)
    "amax over an empty dim": lambda m, t: t([[], []]).amax(1),
    "cat of an empty list": lambda m, t: m.cat([]),
    # torch's factories, called through lf.<name>: torch's refusal, as a LazyfuseError naming the op
    "eye of a negative size": lambda m, t: m.eye(-1),
    "linspace of negative steps": lambda m, t: m.linspace(0, 1, -1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_lazyfuse_refuses_what_torch_refuses_with_its_exception_type(name):
    torch_call, lazy_call = _both(CASES[name])
    with pytest.raises(Exception) as torch_raised:
        torch_call()
    before = lf.tensor([1.0, 2.0]) * 3
    with pytest.raises(lf.LazyfuseError) as lazy_raised:
        out = lazy_call()
        getattr(out, "numpy", lambda: None)()   # (a refusal at the drain counts too)
    expected = type(torch_raised.value)
    if expected is NotImplementedError:   # torch's "not implemented for 'Long'": a dtype refusal
        expected = TypeError
    assert isinstance(lazy_raised.value, expected), (lazy_raised.value, torch_raised.value)
    assert before.tolist() == [3.0, 6.0] and (lf.tensor([1.0]) + 1).item() == 2.0   # the engine is intact


def test_shape_and_dtype_errors_are_runtime_errors_as_torchs():
    for cls in (lf.ShapeError, lf.DTypeError):
        assert issubclass(cls, RuntimeError) and issubclass(cls, lf.LazyfuseError)
    assert issubclass(lf.ShapeError, ValueError) and issubclass(lf.DTypeError, TypeError)
    with pytest.raises(RuntimeError, match="broadcast"):   # what torch code catches for torch's own
        lf.tensor([1.0, 2.0]) + lf.tensor([1.0, 2.0, 3.0])


def test_an_extern_of_an_in_place_function_is_refused_not_a_no_op():
    x = lf.tensor([1.0, 2.0])
    with pytest.raises(lf.UnsupportedOpError, match="in place"):
        lf.extern(torch.Tensor.add_, x, 1.0).numpy()   # (before: returned x, never written)
    assert x.tolist() == [1.0, 2.0]
    assert lf.extern(torch.Tensor.contiguous, x).tolist() == [1.0, 2.0]   # (returns its input, writes nothing)
    assert lf.extern(torch.add, x, 1.0).tolist() == [2.0, 3.0]


def _error_input(error_type=RuntimeError, *args):
    from torch.testing._internal.opinfo.core import ErrorInput, SampleInput
    return ErrorInput(SampleInput(torch.tensor([1.0, -1.0]), args=args), error_type=error_type, error_regex="")


def _classify(lazy_fn, error_type=RuntimeError):
    def torch_refuses(x, *args):
        raise error_type("torch refuses")
    return conformance.run_error_input(torch_refuses, lazy_fn, _error_input(error_type), lf.device("cpu"),
                                       "realized").split(":")[0]


def test_the_error_mode_classifies_each_outcome():
    def leaks(x):
        return {}["missing"]   # (a KeyError from inside lazyfuse's code would read the same)
    leaks.__code__ = leaks.__code__.replace(co_filename=lf.__file__)
    assert _classify(lambda x: x.exp()) == "silent"
    assert _classify(lambda x: lf.tensor([1.0, 2.0]) + lf.tensor([1.0, 2.0, 3.0])) == "refused"
    assert _classify(lambda x: lf.tensor([1.0, 2.0]) + lf.tensor([1.0, 2.0, 3.0]), IndexError) == "wrong-type"
    assert _classify(leaks) == "leaked"
    with pytest.raises(conformance.TorchAccepts):   # torch itself returns a value: nothing to check
        conformance.run_error_input(lambda x: x, lambda x: x, _error_input(), lf.device("cpu"), "realized")


X2 = [[1.0, 2.0], [3.0, 4.0]]
OUT_CASES = {
    # name: (the call on m, t with out=o, the out tensor's shape, its dtype)
    "sum (an extern with out=)": (lambda m, t, o: m.sum(t(X2), 0, out=o), (2,), "float32"),
    "gather": (lambda m, t, o: m.gather(t(X2), 1, t([[1], [0]]), out=o), (2, 1), "float32"),
    "index_select": (lambda m, t, o: m.index_select(t(X2), 0, t([1]), out=o), (1, 2), "float32"),
    "take": (lambda m, t, o: m.take(t(X2), t([3, 0]), out=o), (2,), "float32"),
    "cat": (lambda m, t, o: m.cat([t(X2), t(X2)], 1, out=o), (2, 4), "float32"),
    "arange": (lambda m, t, o: m.arange(1, 4, out=o), (3,), "int64"),
}


@pytest.mark.parametrize("name", list(OUT_CASES))
def test_out_takes_the_result_as_torchs(name):
    call, shape, dtype = OUT_CASES[name]
    want_out = torch.full(shape, -7, dtype=getattr(torch, dtype))
    want = call(_Side(torch, TF), torch.tensor, want_out)
    got_out = lf.full(shape, -7, dtype=getattr(lf, dtype))
    got = call(_Side(lf, F), lf.tensor, got_out)
    assert got.tolist() == want.tolist()
    if got is got_out:   # (before: the extern's out= was never written: it kept its -7s)
        assert got_out.tolist() == want_out.tolist()


def test_out_of_another_dtype_or_shape_is_refused_or_resized_as_torch():
    """gather casts into no other dtype (torch refuses too); sum's out of another shape is resized
    with torch's UserWarning (tests/test_torch_gaps.py compares the rules op by op)."""
    x = lf.tensor(X2)
    with pytest.raises(lf.DTypeError, match="out= has dtype"):
        lf.gather(x, 1, lf.tensor([[1], [0]]), out=lf.zeros(2, 1, dtype=lf.float64))
    out = lf.zeros(3)
    with pytest.warns(UserWarning, match="resized"):
        assert lf.sum(x, 0, out=out) is out
    assert out.tolist() == torch.tensor(X2).sum(0).tolist()
    assert x.tolist() == X2


@pytest.mark.parametrize("name", ["xlogy", "ldexp", "atan2", "copysign"])
def test_a_float_function_of_two_python_numbers_names_itself(name):
    """torch takes a tensor for ``input`` (a TypeError for two numbers); lazyfuse's refusal names the
    op the user called, not the helper it went through (``_float_operands``)."""
    with pytest.raises(TypeError):
        getattr(torch, name)(5, 3)
    with pytest.raises(lf.DTypeError, match=rf"^{name}: pass a Tensor"):
        getattr(lf, name)(5, 3)

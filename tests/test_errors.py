"""Bad input raises lazyfuse's error classes (docs/semantics.md, Errors), with a message naming
the argument or the fix, and an error never leaves the engine broken: the next op and drain
work, and no live tensor (not even one with pending work queued before the error) loses its
value."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import lazyfuse as lf


def _int_add_float():
    lf.tensor([1, 2]).add_(1.5)


def _expanded_write():
    lf.tensor([[1.0, 2.0]]).expand(3, 2).add_(1)


def _expanded_setitem():
    v = lf.tensor([1.0]).expand(4)
    v[1:3] = 2.0


CASES = {
    # name: (thunk, error classes it must be an instance of, words the message must contain)
    "broadcast mismatch": (lambda: lf.tensor([1.0, 2.0]) + lf.tensor([1.0, 2.0, 3.0]),
                           (lf.ShapeError, ValueError), ["(2,)", "(3,)", "broadcast"]),
    "reshape numel": (lambda: lf.zeros(2, 3).reshape(4, 2), (lf.ShapeError, ValueError), ["(4, 2)", "6"]),
    "view of a non-contiguous tensor": (lambda: lf.zeros(2, 3).T.view(6), (lf.ShapeError, ValueError),
                                        ["reshape"]),
    "sum dim out of range": (lambda: lf.zeros(2, 3).sum(dim=5), (lf.ShapeError, ValueError), ["dim", "5"]),
    "negative dim out of range": (lambda: lf.zeros(2, 3).softmax(-3), (lf.ShapeError, ValueError), ["dim", "-3"]),
    "permute not a permutation": (lambda: lf.zeros(2, 3).permute(0, 0), (lf.ShapeError, ValueError), ["permut"]),
    "duplicate reduction dims": (lambda: lf.zeros(2, 3).sum(dim=(1, -1)), (lf.ShapeError, ValueError), ["dim"]),
    "expand a non-1 dim": (lambda: lf.zeros(2, 3).expand(4, 3), (lf.ShapeError, ValueError), ["expand"]),
    "index out of range": (lambda: lf.zeros(2, 3)[5], (lf.ShapeError, ValueError), ["5", "out of bounds", "size 2"]),
    "cat of 0-d tensors": (lambda: lf.cat([lf.tensor(1.0), lf.tensor(2.0)]), (lf.ShapeError, ValueError),
                           ["zero-dim"]),
    "cat shape mismatch": (lambda: lf.cat([lf.zeros(2, 3), lf.zeros(2, 4)]), (lf.ShapeError, ValueError),
                           ["cat"]),
    "ragged data": (lambda: lf.tensor([[1.0, 2.0], [3.0]]), (lf.ShapeError, ValueError), ["ragged"]),
    ".item() on many elements": (lambda: lf.zeros(3).item(), (lf.ShapeError, ValueError), ["item", "(3,)"]),
    "bool() of many elements": (lambda: bool(lf.zeros(3)), (lf.ShapeError, ValueError), ["ambiguous"]),
    "copy_ source does not broadcast": (lambda: lf.zeros(2, 3).copy_(lf.zeros(4)), (lf.ShapeError, ValueError),
                                        ["(4,)", "(2, 3)"]),
    "in-place result shape differs": (lambda: lf.zeros(3).add_(lf.zeros(2, 3)), (lf.ShapeError, ValueError),
                                      ["[2, 3]", "broadcast"]),
    "write into an expanded view": (_expanded_write, (lf.ShapeError, ValueError), ["expand", "clone"]),
    "setitem into an expanded view": (_expanded_setitem, (lf.ShapeError, ValueError), ["expand"]),
    "negative slice step": (lambda: lf.zeros(4)[::-1], (lf.ShapeError, ValueError), ["step"]),
    "bool subtraction": (lambda: lf.tensor([True]) - lf.tensor([False]), (lf.DTypeError, TypeError),
                         ["bool", "~"]),
    "bool negation": (lambda: -lf.tensor([True]), (lf.DTypeError, TypeError), ["bool"]),
    "float &": (lambda: lf.tensor([1.0]) & lf.tensor([2.0]), (lf.DTypeError, TypeError), ["float32"]),
    "float ~": (lambda: ~lf.tensor([1.0]), (lf.DTypeError, TypeError), ["~"]),
    "mean of ints": (lambda: lf.tensor([1, 2]).mean(), (lf.DTypeError, TypeError), ["float", "int64"]),
    "numpy uint16": (lambda: lf.tensor(np.zeros(3, dtype=np.uint16)), (lf.DTypeError, TypeError), ["uint16"]),
    "numpy complex": (lambda: lf.tensor(np.zeros(3, dtype=np.complex64)), (lf.DTypeError, TypeError),
                      ["complex"]),
    "numpy object": (lambda: lf.tensor(np.array([1, "a"], dtype=object)), (lf.DTypeError, TypeError),
                     ["object"]),
    "torch complex": (lambda: lf.from_torch(torch.zeros(2, dtype=torch.complex64)), (lf.DTypeError, TypeError),
                      ["complex"]),
    "python complex": (lambda: lf.tensor([1 + 2j]), (lf.DTypeError, TypeError), ["complex"]),
    "a string": (lambda: lf.tensor("abc"), (lf.DTypeError, TypeError), ["data"]),
    "None": (lambda: lf.tensor(None), (lf.DTypeError, TypeError), ["data"]),
    "a dict": (lambda: lf.tensor({"a": 1}), (lf.DTypeError, TypeError), ["dict"]),
    "string operand": (lambda: lf.tensor([1.0]) + "x", (lf.DTypeError, TypeError), ["str"]),
    "unknown dtype name": (lambda: lf.zeros(2, dtype="float8"), (lf.DTypeError, TypeError), ["dtype", "float8"]),
    "rand of ints": (lambda: lf.rand(3, dtype=lf.int32), (lf.DTypeError, TypeError), ["float", "int32"]),
    "int tensor add_ a float": (_int_add_float, (lf.DTypeError, TypeError), ["float32", "int64"]),
    "int tensor div_": (lambda: lf.tensor([4, 2]).div_(2), (lf.DTypeError, TypeError), ["int64"]),
    "float tensor as an index": (lambda: lf.zeros(3)[lf.tensor([1.0])], (lf.DTypeError, TypeError), ["integer"]),
    "nan into an int": (lambda: lf.full((2,), float("nan"), dtype=lf.int32), (lf.DTypeError, TypeError), ["nan"]),
    "unknown device": (lambda: lf.device("nonsense"), (lf.DeviceError,), ["nonsense", "cpu"]),
    "device of a wrong type": (lambda: lf.device(3.5), (lf.DeviceError,), ["device"]),
    "tensor on an unknown device": (lambda: lf.zeros(2, device="tpu:0"), (lf.DeviceError,), ["tpu"]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_raises_the_spec_error_and_the_engine_keeps_working(name):
    refuses_and_keeps_working(name, *CASES[name])


def refuses_and_keeps_working(name, thunk, classes, words):
    """``thunk()`` raises a LazyfuseError of ``classes`` whose message has ``words``; work queued
    before it, earlier writes, a new op and a drain are all right afterwards."""
    lf.sync()
    live = lf.tensor([1.0, 2.0, 3.0])
    live_realized = live * 1
    live_realized.numpy()
    pending = (live * 2).exp()          # work queued before the error
    live.add_(1)                        # and an in-place write queued before it
    with pytest.raises(lf.LazyfuseError) as info:
        thunk()
    for cls in classes:
        assert isinstance(info.value, cls), f"{name}: {type(info.value).__name__} is not a {cls.__name__}"
    message = str(info.value)
    for word in words:
        assert word.lower() in message.lower(), f"{name}: {word!r} not in the message {message!r}"
    # the engine still works: pending work, earlier writes, a new op and a drain
    after = (live + 10).sum()
    np.testing.assert_allclose(pending.numpy(), np.exp(np.array([2.0, 4.0, 6.0])), rtol=1e-6)
    assert live.tolist() == [2.0, 3.0, 4.0]
    assert live_realized.tolist() == [1.0, 2.0, 3.0]
    assert after.item() == 39.0


def test_error_classes_follow_the_spec_hierarchy():
    assert issubclass(lf.ShapeError, lf.LazyfuseError) and issubclass(lf.ShapeError, ValueError)
    assert issubclass(lf.DTypeError, lf.LazyfuseError) and issubclass(lf.DTypeError, TypeError)
    assert issubclass(lf.DeviceError, lf.LazyfuseError)
    assert issubclass(lf.CaptureAllocationError, lf.CaptureError)
    assert issubclass(lf.CaptureError, lf.LazyfuseError)
    assert issubclass(lf.CompileError, lf.LazyfuseError)


def test_an_error_in_the_middle_of_a_program_leaves_the_recorded_part_intact():
    x = lf.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = x * 2
    with pytest.raises(lf.ShapeError):
        y + lf.zeros(4)
    with pytest.raises(lf.DTypeError):
        y.int().add_(0.5)
    z = y.sum(1)
    x[0, 0] = 100.0
    assert z.tolist() == [6.0, 24.0]
    assert y.tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]
    assert x.tolist() == [[100.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_a_failed_in_place_op_does_not_modify_its_target():
    x = lf.tensor([1, 2, 3])
    for bad in (lambda: x.add_(0.5), lambda: x.div_(2), lambda: x.mul_(lf.zeros(2, 3, dtype=lf.int64)),
                lambda: x.copy_(lf.zeros(2))):
        with pytest.raises(lf.LazyfuseError):
            bad()
    assert x.tolist() == [1, 2, 3]
    x.add_(1)
    assert x.tolist() == [2, 3, 4]


def test_every_error_class_is_public():
    """A user catches what lazyfuse raises by its public name: every LazyfuseError subclass in
    lazyfuse.errors is ``lf.<name>`` (CollectiveError: ``lf.distributed.CollectiveError``)."""
    import inspect

    import lazyfuse.errors as errors
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass) if issubclass(c, lf.LazyfuseError)]
    assert len(classes) >= 12
    for cls in classes:
        home = lf.distributed if cls.__name__ == "CollectiveError" else lf
        assert getattr(home, cls.__name__) is cls, cls.__name__

"""Python's arithmetic operators on ``LazyTensor`` that skip torch's dispatcher when the trip through it
would do nothing but arrive back here.

``x * 2`` on a torch tensor runs torch's C++ argument parser, then the dispatcher (autograd, then the
Python key), then calls back into Python (``LazyTensor.__torch_dispatch__``): about 3.5 us on this
project's machine before the frontend's handler starts, more than lazyfuse's whole native recording of
the op (~2 us). When autograd has nothing to record (grad mode off, or no operand requires grad), no
torch dispatch or function mode is active (they must see every op), inference mode is off (it marks
its results) and the operands are frontend tensors or Python numbers, that trip is pure cost: these
operators call the lazyfuse operator the op's native handler in the aten table calls -- the same
IR, dtype and errors -- and count it under the same aten op. Anything else calls torch's own operator,
which dispatches as usual. A torch optimizer's update (under ``no_grad``) and inference code take this
path; a forward pass over parameters that require grad does not (autograd must see it).

torch's reflected operators, ``**`` and ``//`` turn any TypeError into NotImplemented, which hid a
lazyfuse ``DTypeError`` (also a TypeError) behind Python's "unsupported operand type(s)": on
LazyTensor they call their op directly for a tensor or number operand (``_keeping_type_errors``).
"""
from __future__ import annotations

import torch

from . import drains
from ..tensor import Tensor as LfTensor
from .tensor import LazyTensor, from_lf

_grad_enabled = torch.is_grad_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._is_torch_function_mode_enabled
_inference = torch.is_inference_mode_enabled


# torch's operators that turn any TypeError their op raises into NotImplemented (so that Python tries a
# foreign operand's reflected operator): a lazyfuse DTypeError, a TypeError too, became Python's
# "unsupported operand type(s) for **", its message lost (``int_tensor ** -2``: torch's RuntimeError
# says "Integers to negative integer powers are not allowed")
_TYPE_ERRORS_HIDDEN = ("__rsub__", "__rdiv__", "__rtruediv__", "__pow__", "__ipow__", "__rpow__", "__rmod__",
                       "__floordiv__", "__rfloordiv__", "__rlshift__", "__rrshift__", "__rmatmul__")


def _keeping_type_errors(dunder: str):
    """torch's ``Tensor.<dunder>`` whose op is called directly for a tensor or number operand (no torch
    function to handle: LazyTensor has none), so its errors reach the caller; anything else: torch's own."""
    wrapped = getattr(torch.Tensor, dunder)
    op = wrapped.__wrapped__

    def operator(self, other):
        if isinstance(other, (int, float, bool, complex)) or \
                (isinstance(other, torch.Tensor) and not _has_torch_function((other,))):
            return op(self, other)
        return wrapped(self, other)

    operator.__name__, operator.__doc__ = dunder, wrapped.__doc__
    return operator


_has_torch_function = torch.overrides.has_torch_function
_TORCH_OPERATORS = {dunder: _keeping_type_errors(dunder) for dunder in _TYPE_ERRORS_HIDDEN}


def _binary(dunder: str, aten_op, record):
    """``LazyTensor.<dunder>(self, other)``: ``record(self, other)`` on the lazyfuse tensors when the
    dispatcher would add nothing, else torch's own ``torch.Tensor.<dunder>``."""
    torch_operator = _TORCH_OPERATORS.get(dunder) or getattr(torch.Tensor, dunder)
    label = str(aten_op)
    counts = drains.counters.native

    def operator(self, other):
        kind = type(other)
        if kind is LazyTensor:
            b, b_grad = other._lf, other.requires_grad
        elif kind is float or kind is int:    # not bool: torch promotes it apart
            b, b_grad = other, False
        else:
            return torch_operator(self, other)
        if ((b_grad or self.requires_grad) and _grad_enabled()) or _dispatch_modes() or _function_modes() \
                or _inference():
            return torch_operator(self, other)
        out = record(self._lf, b)
        counts[label] += 1
        return from_lf(out)

    operator.__name__ = dunder
    operator.__doc__ = f"{torch_operator.__doc__ or ''}\n(lazyfuse frontend: recorded as {label}.)"
    return operator


aten = torch.ops.aten
# (the lazyfuse operator each aten op's native handler in aten_table records, bound directly: torch
# computes ``other + x`` as add(x, other), so the reflected operators record the same node as it)
OPERATORS = {dunder: _binary(dunder, op, record) for dunder, op, record in (
    ("__add__", aten.add.Tensor, LfTensor.__add__), ("__radd__", aten.add.Tensor, LfTensor.__add__),
    ("__sub__", aten.sub.Tensor, LfTensor.__sub__), ("__rsub__", aten.rsub.Scalar, LfTensor.__rsub__),
    ("__mul__", aten.mul.Tensor, LfTensor.__mul__), ("__rmul__", aten.mul.Tensor, LfTensor.__mul__),
    ("__truediv__", aten.div.Tensor, LfTensor.__truediv__))}


def install(on: bool = True) -> None:
    """Put the operators on LazyTensor (``on``), or take them off: torch's own operators then dispatch
    every op (``origins`` does, to see each one)."""
    for dunder, operator in OPERATORS.items():
        if on:
            setattr(LazyTensor, dunder, operator)
        elif dunder in LazyTensor.__dict__:
            delattr(LazyTensor, dunder)
    for dunder, operator in _TORCH_OPERATORS.items():   # (these dispatch every op: on either way)
        if not (on and dunder in OPERATORS):
            setattr(LazyTensor, dunder, operator)


install()

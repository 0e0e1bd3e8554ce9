"""Dtypes and torch's type promotion.

A ``DType`` carries what every layer needs to know about an element type: its size,
its torch and numpy twins, and its *category* (bool < integer < floating) which drives
promotion. ``result_type`` follows torch's rule exactly: tensors with dimensions win over
zero-dim tensors, which win over Python scalars, unless a lower-priority operand is of a
higher category (``int_tensor * 2.5`` is float32, ``half_tensor * 2.5`` stays float16).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..errors import DTypeError

BOOL, INT, FLOAT = 0, 1, 2


@dataclass(frozen=True, eq=False)
class DType:
    """One instance per dtype, equal to itself and to its torch twin (``x.dtype == torch.float32``
    in a ported torch program), hashed as that twin so a dict or set keyed by either finds the
    other (``{lf.float32: 1}[torch.float32]``). The hash is the twin's, computed once: a Python
    ``__hash__`` costs ~70 ns a call, paid only where a plan key is hashed (its steady-state
    lookup compares the key, which meets the same instances: ``is`` before ``__eq__``)."""

    name: str
    itemsize: int
    category: int
    torch: torch.dtype
    numpy: object  # numpy dtype, or None where numpy has no twin (bfloat16)
    # the category tests, plain attributes rather than properties: recording reads them per op
    is_float: bool = field(init=False)
    is_int: bool = field(init=False)
    is_bool: bool = field(init=False)

    _hash: int = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "_hash", hash(self.torch))
        object.__setattr__(self, "is_float", self.category == FLOAT)
        object.__setattr__(self, "is_int", self.category == INT)
        object.__setattr__(self, "is_bool", self.category == BOOL)

    def __repr__(self) -> str:
        return f"lf.{self.name}"

    def __eq__(self, other):
        return other is self or other is self.torch   # (torch's dtypes are singletons too)

    def __hash__(self) -> int:
        return self._hash

    @property
    def torch_scalar_name(self) -> str:
        """torch's C++ name of this dtype ("Float", "Long", "BFloat16"), as its error texts spell it."""
        return torch.empty(0, dtype=self.torch).type().removeprefix("torch.").removesuffix("Tensor")

    def __reduce__(self):
        # one instance per dtype, compared by identity: unpickled, it is that instance again
        return _by_name, (self.name,)


bool_ = DType("bool", 1, BOOL, torch.bool, np.dtype(np.bool_))
uint8 = DType("uint8", 1, INT, torch.uint8, np.dtype(np.uint8))
int8 = DType("int8", 1, INT, torch.int8, np.dtype(np.int8))
int16 = DType("int16", 2, INT, torch.int16, np.dtype(np.int16))
int32 = DType("int32", 4, INT, torch.int32, np.dtype(np.int32))
int64 = DType("int64", 8, INT, torch.int64, np.dtype(np.int64))
float16 = DType("float16", 2, FLOAT, torch.float16, np.dtype(np.float16))
bfloat16 = DType("bfloat16", 2, FLOAT, torch.bfloat16, None)
float32 = DType("float32", 4, FLOAT, torch.float32, np.dtype(np.float32))
float64 = DType("float64", 8, FLOAT, torch.float64, np.dtype(np.float64))

ALL = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
DEFAULT_FLOAT = float32
NAMES = ", ".join(d.name for d in ALL)   # for the messages that list what lazyfuse holds
_BY_TORCH = {d.torch: d for d in ALL}
_BY_NUMPY = {d.numpy: d for d in ALL if d.numpy is not None}
_BY_NAME = {d.name: d for d in ALL}


def _by_name(name: str) -> DType:
    return _BY_NAME[name]


def from_torch(dt: torch.dtype) -> DType:
    try:
        return _BY_TORCH[dt]
    except KeyError:
        raise DTypeError(f"torch dtype {dt} is not supported by lazyfuse; convert it to one of "
                         f"{NAMES} first") from None


def from_numpy(dt) -> DType:
    dt = np.dtype(dt)
    try:
        return _BY_NUMPY[dt]
    except KeyError:
        raise DTypeError(f"numpy dtype {dt} is not supported by lazyfuse; use .astype() with one of "
                         f"{', '.join(d.name for d in ALL if d.numpy is not None)} first") from None


def as_dtype(value, argname: str = "dtype") -> DType:
    """Accept a lazyfuse dtype, a torch dtype, a numpy dtype or a name."""
    if isinstance(value, DType):
        return value
    if isinstance(value, torch.dtype):
        return from_torch(value)
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    if value is bool:
        return bool_
    if value is int:
        return int64
    if value is float:
        return float32
    try:
        return from_numpy(value)
    except (TypeError, DTypeError):
        raise DTypeError(f"{argname}={value!r} is not a dtype lazyfuse knows; pass one of "
                         f"lf.{', lf.'.join(d.name for d in ALL)}") from None


def finfo(dtype=None) -> torch.finfo:
    """torch.finfo of a float dtype (lazyfuse's, torch's or a name; float32 for None): ``eps``,
    ``max``, ``min``, ``tiny``, ``resolution``, ``bits``."""
    d = float32 if dtype is None else as_dtype(dtype)
    if not d.is_float:
        raise DTypeError(f"finfo: {d.name} is not a floating point dtype (torch.finfo refuses it too); use "
                         "lf.iinfo for integers")
    return torch.finfo(d.torch)


def iinfo(dtype) -> torch.iinfo:
    """torch.iinfo of an integer dtype (lazyfuse's, torch's or a name): ``max``, ``min``, ``bits``."""
    d = as_dtype(dtype)
    if d.is_float or d.is_bool:
        raise DTypeError(f"torch.{d.name.rstrip('_')} is not supported by torch.iinfo (lazyfuse: iinfo takes an "
                         "integer dtype; lf.finfo a float one)")
    return torch.iinfo(d.torch)


def check_fits(low, high, d: DType, argname: str) -> None:
    """Refuse Python numbers from ``low`` to ``high`` for integer dtype ``d`` where torch raises
    "value cannot be converted to type ... without overflow": beyond its range, which for an
    unsigned dtype reaches down to -max for integers (torch wraps those, as two's complement: -1
    is 255), not for floats (-0.5 is refused)."""
    info = torch.iinfo(d.torch)
    integral = isinstance(low, int) and isinstance(high, int)
    lo = -info.max if info.min == 0 and integral else info.min
    if not (lo <= low and high <= info.max):
        raise DTypeError(f"{argname}: value cannot be converted to type {d.name} without overflow (torch refuses it "
                         f"too); give values from {lo} to {info.max}, or wrap them yourself with % {info.max + 1 - info.min}")


def promote_types(a: DType, b: DType) -> DType:
    """torch.promote_types restricted to lazyfuse's dtypes."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if a.category == FLOAT and {a.name, b.name} == {"float16", "bfloat16"}:
        return float32
    if {a.name, b.name} == {"uint8", "int8"}:
        return int16   # the narrowest type holding both ranges, as torch
    return a if a.itemsize >= b.itemsize else b


# the integer dtypes narrower than C's int: the printers compute on them in int (C) or int32
# (Triton) and truncate each op's result back to the dtype, as torch's results wrap
NARROW_INTS = frozenset((uint8, int8, int16))


def opmath(d: DType) -> DType:
    """torch's opmath type: float16/bfloat16 composites (softmax, norms, mean, a matmul's dot
    products) compute in float32 and round once at the end; other dtypes compute as they are."""
    return float32 if d.name in ("float16", "bfloat16") else d


def scalar_dtype(value) -> DType:
    """The dtype torch gives a wrapped Python scalar."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return DEFAULT_FLOAT
    raise DTypeError(f"cannot use {type(value).__name__} value {value!r} as a tensor scalar; "
                     "pass a bool, int, float or a Tensor")


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    # torch's combine_categories (c10/core/ScalarType + TensorIterator's ResultTypeState).
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_float:
        return higher
    if higher.is_bool or lower.is_float:
        return promote_types(higher, lower)
    return higher


def result_type(dim_dtypes, zero_dim_dtypes, scalar_dtypes) -> DType:
    """torch.result_type given the dtypes of dimensioned tensors, 0-d tensors and scalars."""
    state = []
    for group in (dim_dtypes, zero_dim_dtypes, scalar_dtypes):
        r = None
        for d in group:
            r = d if r is None else promote_types(r, d)
        state.append(r)
    return _combine(state[0], _combine(state[1], state[2]))

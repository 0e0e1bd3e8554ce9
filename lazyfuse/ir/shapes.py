"""Shape arithmetic shared by the Tensor API and the planner: broadcasting, dims, strides."""
from __future__ import annotations

import functools
import math
import operator

from ..errors import InvalidIndexError, ShapeError


def prod(shape) -> int:
    return math.prod(shape)


def contiguous_strides(shape) -> tuple:
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(strides))


def broadcast_shapes(*shapes) -> tuple:
    """The shape ``shapes`` (tuples of ints) broadcast to, as torch's (memoized)."""
    return _broadcast(shapes)


@functools.lru_cache(maxsize=4096)
def _broadcast(shapes: tuple) -> tuple:
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(ndim - 1, -1, -1):   # (from the last dim, as torch: its error names the first clash so)
        size = 1
        for s in shapes:
            d = s[i - ndim + len(s)] if i - ndim + len(s) >= 0 else 1
            if d != 1:
                if size not in (1, d):
                    # (torch's sentence first, as its tests match it; then which shapes and the fix)
                    raise ShapeError(f"The size of tensor a ({size}) must match the size of tensor b ({d}) at "
                                     f"non-singleton dimension {i}: shapes "
                                     f"{' and '.join(str(tuple(x)) for x in shapes)} do not broadcast "
                                     f"(dim {i - ndim}: {size} vs {d}); make the sizes equal or 1")
                size = d
        out.append(size)
    return tuple(reversed(out))


def as_int(value, argname: str) -> int:
    """An int from anything with ``__index__`` (numpy ints too); floats and bools are refused, as in
    torch, rather than truncated."""
    if isinstance(value, bool):
        raise ShapeError(f"{argname}={value!r} must be an int, not a bool")
    try:
        return operator.index(value)
    except TypeError:
        raise ShapeError(f"{argname}={value!r} must be an int, not {type(value).__name__}") from None


def normalize_dim(dim, ndim: int, argname: str = "dim") -> int:
    dim = as_int(dim, argname)
    lo, hi = (-ndim, ndim - 1) if ndim > 0 else (-1, 0)
    if not lo <= dim <= hi:
        raise InvalidIndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim}): "
                                f"{argname}={dim} is out of range for a {ndim}-d tensor")
    return dim % max(ndim, 1)


def normalize_dims(dim, ndim: int, argname: str = "dim") -> tuple:
    """None means all dims; an int or a tuple of ints; duplicates are an error."""
    if dim is None:
        return tuple(range(ndim))
    if type(dim) is int:   # (the common case: no tuple to make, no test per element)
        return _normalized_dims((dim,), ndim, argname)
    dims = tuple(dim) if isinstance(dim, (tuple, list)) else (dim,)
    if all(type(d) is int for d in dims):
        return _normalized_dims(dims, ndim, argname)   # the common case, memoized
    return _normalized_dims.__wrapped__(dims, ndim, argname)


@functools.lru_cache(maxsize=4096)
def _normalized_dims(dims: tuple, ndim: int, argname: str) -> tuple:
    """Sorted, non-negative and checked ``dims``. Memoized for plain ints only (errors are never
    cached; a bool or float equal to an int hashes like it and must still be refused)."""
    out = tuple(sorted(normalize_dim(d, ndim, argname) for d in dims))
    if len(set(out)) != len(out):
        dup = next(d for d in out if out.count(d) > 1)
        raise ShapeError(f"dim {dup} appears multiple times in the list of dims: {argname}={dims!r}")
    return out


def check_shape(shape, argname: str = "shape") -> tuple:
    if not isinstance(shape, (tuple, list)) and hasattr(shape, "__index__"):
        shape = (shape,)
    try:
        shape = tuple(as_int(s, argname) for s in shape)
    except (TypeError, ShapeError):
        raise ShapeError(f"{argname}={shape!r} must be a tuple of ints") from None
    if any(s < 0 for s in shape):
        raise ShapeError(f"{argname}={shape} has a negative size")
    return shape

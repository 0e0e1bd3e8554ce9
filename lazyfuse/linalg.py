"""``lf.linalg``: torch.linalg's names on lazyfuse tensors.

The norms ML code takes (``vector_norm``, and ``norm``/``matrix_norm`` where they are vector or
Frobenius norms: gradient clipping, weight normalisation) are lazyfuse ops, so they fuse; every
other ``torch.linalg`` function (``solve``, ``inv``, ``qr``, ``svd``, ``eigh``...) runs as an
extern, torch's own kernel on the realized buffers (``lazyfuse.surface``). A complex result
(``eig``) is refused with a ``DTypeError`` naming the op.
"""
from __future__ import annotations

import math

import torch

from .errors import DTypeError, ShapeError
from .functions import where
from .ir import dtypes as dt
from .ir.shapes import normalize_dims
from .surface import torch_submodule
from .tensor import Tensor

__getattr__ = torch_submodule(torch.linalg, "lf.linalg.")


def _float_input(x: Tensor, dtype, name: str) -> Tensor:
    """``x`` in the dtype the norm computes in (``dtype=`` if given); torch refuses integer and
    bool inputs, with or without ``dtype=``."""
    if not x.dtype.is_float:
        raise DTypeError(f"linalg.{name}: Expected a floating point or complex tensor as input. Got "
                         f"{x.dtype.torch_scalar_name} (lazyfuse: pass a float tensor, e.g. x.float())")
    return x if dtype is None else x.to(dt.as_dtype(dtype))


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):  # noqa: A002 (torch's name)
    """The ``ord``-norm of ``x`` over ``dim`` (every element for None) as a vector's: ``sum(|x|^ord)^(1/ord)``;
    ``inf``/``-inf`` the largest/smallest ``|x|``, 0 the count of nonzeros."""
    if out is not None:
        from .extern import write_out
        return write_out("linalg.vector_norm", vector_norm(x, ord, dim, keepdim, dtype=dtype), out)
    x = _float_input(x, dtype, "vector_norm")
    if x.dtype in (dt.float16, dt.bfloat16):
        # computed in float32 and rounded once, as torch's: |x|^2 overflows float16 from 256 on
        return vector_norm(x.float(), ord, dim, keepdim).to(x.dtype)
    ord = float(ord)
    dims = None if x.ndim == 0 else tuple(range(x.ndim)) if dim is None else normalize_dims(dim, x.ndim)
    reduce = dict(dim=dims, keepdim=keepdim) if dims is not None else {}
    a = x.abs()
    if ord == math.inf:
        return _max_of_abs(a, x, dims, keepdim, "amax")
    if ord == -math.inf:
        return _max_of_abs(a, x, dims, keepdim, "amin")
    if ord == 0:
        return (a != 0).to(x.dtype).sum(**reduce)
    if ord == 1:
        return a.sum(**reduce)
    if ord == 2:
        return _root((x * x).sum(**reduce), ord)
    if ord < 1:
        # |x|^ord's derivative is infinite at 0 for ord < 1; torch's gradient is 0 there
        zero = a == 0
        return _root(where(zero, 0.0, where(zero, 1.0, a).pow(ord)).sum(**reduce), ord)
    return _root(a.pow(ord).sum(**reduce), ord)


def _root(total, ord):
    """``total^(1/ord)`` whose gradient is 0 where ``total`` is 0, as torch's norm backward gives
    (the root's own derivative is infinite there, and infinity times the zero below is NaN)."""
    zero = total == 0
    safe = where(zero, 1.0, total)
    return where(zero, 0.0, safe.sqrt() if ord == 2 else safe.pow(1.0 / ord))


def _max_of_abs(a, x, dims, keepdim, which):
    if x.numel() == 0 and (dims is None or any(x.shape[d] == 0 for d in dims)):
        raise ShapeError(f"linalg.vector_norm cannot compute the {'inf' if which == 'amax' else '-inf'} norm on "
                         "an empty tensor because the operation does not have an identity")
    if dims is None:
        return getattr(a, which)()
    return getattr(a, which)(dim=dims, keepdim=keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None, out=None):  # noqa: A002
    """The matrix norm of ``A`` over the two ``dim``: ``'fro'`` is lazyfuse's (the 2-norm of the
    entries); the others (``'nuc'``, ``inf``, ``1``, ``2``...) are torch's, as an extern."""
    if ord != "fro" or out is not None:
        return __getattr__("matrix_norm")(A, ord, dim, keepdim, dtype=dtype, out=out)
    dims = normalize_dims(dim, A.ndim)
    if len(dims) != 2:
        raise ShapeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got {tuple(dim)}")
    return vector_norm(A, 2, dims, keepdim, dtype=dtype)


def norm(A, ord=None, dim=None, keepdim=False, *, out=None, dtype=None):  # noqa: A002
    """torch.linalg.norm: a vector norm for a 1-d ``dim`` (or ``A`` flattened when ``ord`` and
    ``dim`` are both None), a matrix norm for a 2-d one (or a 2-d ``A``) — lazyfuse's own for the
    vector norms and the Frobenius norm, torch's (an extern) for the other matrix norms."""
    dims = None if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    if out is not None:
        from .extern import write_out
        return write_out("linalg.norm", norm(A, ord, dim, keepdim, dtype=dtype), out)
    if ord is None:
        if dims is not None and len(dims) == 2:
            return matrix_norm(A, "fro", dims, keepdim, dtype=dtype)
        return vector_norm(A, 2, dims, keepdim, dtype=dtype)
    if (dims is not None and len(dims) == 1) or (dims is None and A.ndim == 1):
        if isinstance(ord, str):
            raise ShapeError(f"linalg.norm: ord={ord!r} is a matrix norm, but dim names one dimension: pass a "
                             "number, or two dims")
        return vector_norm(A, ord, dims, keepdim, dtype=dtype)
    if dims is None and A.ndim != 2:
        raise ShapeError(f"linalg.norm: If dim is not specified but ord is, the input must be 1D or 2D. Got "
                         f"{A.ndim}D (lazyfuse: pass dim=)")
    return matrix_norm(A, ord, (-2, -1) if dims is None else dims, keepdim, dtype=dtype)


__all__ = ["vector_norm", "matrix_norm", "norm"]

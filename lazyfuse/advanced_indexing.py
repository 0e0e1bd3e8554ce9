"""Indexing beyond one integer tensor (``lazyfuse.indexing`` has the native cases), as torch:
boolean masks (``x[mask]``, ``x[x > 0] = 0``), integer lists (``x[[1, 2]]``), several index
tensors (``x[rows, cols]``).

``x[mask]`` has a size only the data knows, so it drains (and is refused inside a capture,
with a hint: keep shapes static with ``where``/``masked_fill``). ``x[mask] = v`` with a
scalar ``v`` needs no size: it is ``x.copy_(where(mask, v, x))``, recorded, no drain. The
rest run as externs through torch's own indexing (lazily where the shape is static).
"""
from __future__ import annotations

import operator
import warnings

import numpy as np
import torch

from . import ops
from .errors import DTypeError
from .ir import dtypes as dt
from .tensor import Tensor   # (tensor.py imports this module at its bottom; every t[key] asks is_advanced)


def _parts(key):
    return key if isinstance(key, tuple) else (key,)


# index parts that are not lazyfuse's own: made lazyfuse tensors on the indexed tensor's device
_FOREIGN = (bool, np.bool_, np.ndarray, torch.Tensor)


def lazy_key(t, key):
    """``key`` with each torch tensor, numpy array and Python/numpy bool in it made a lazyfuse
    tensor on ``t``'s device, which is what torch's indexing makes of them: ``x[torch.tensor([1,
    2])]`` gathers, ``x[True]`` is ``x[None]`` (a bool is a 0-d mask, not the int 1), ``x[False]``
    empty. (An int check would read a bool or a 1-element tensor as an int index.)"""
    # (on every t[key] that is not a plain int: a loop, not a generator, and no tuple for one part)
    if isinstance(key, tuple):
        for k in key:
            if isinstance(k, _FOREIGN):
                break
        else:
            return key
    elif not isinstance(key, _FOREIGN):
        return key
    from .creation import tensor
    made = tuple(tensor(k, device=t.device) if isinstance(k, _FOREIGN) else k for k in _parts(key))
    return made if isinstance(key, tuple) else made[0]


def byte_masks_as_bool(key, value=None):
    """``key`` (a lazy one) with each uint8 tensor the bool mask torch reads it as, with torch's
    deprecation warning (torch's meta kernel refuses a uint8 index, so one is recorded as the mask
    it is). For ``t[mask] = value`` (``value`` given) torch refuses a uint8 mask with a scalar."""
    for k in _parts(key):   # (on every t[key]: a loop, not a generator)
        if isinstance(k, Tensor) and k.dtype is dt.uint8:
            break
    else:
        return key
    if not isinstance(key, tuple) and value is not None and (ops.is_scalar(value) or
                                                             isinstance(value, Tensor) and value.ndim == 0):
        raise DTypeError("masked_fill_ only supports boolean masks, but got mask with dtype unsigned char (as torch): "
                         "index with a bool mask (mask.bool()) to write a scalar")
    warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.",
                  UserWarning, stacklevel=4)   # (the caller of t[key] or t[key] = v)
    made = tuple(k != 0 if isinstance(k, Tensor) and k.dtype is dt.uint8 else k for k in _parts(key))
    return made if isinstance(key, tuple) else made[0]


# (a tuple inside the key is a sequence index as a list is: torch reads ``x[(0, 2), :]`` as
# ``x[[0, 2], :]``)
_SEQUENCES = (list, tuple)


def is_advanced(key) -> bool:
    """Whether ``key`` needs torch's advanced indexing: a list (or a tuple in the key), a bool
    mask or several tensors."""
    parts = _parts(key)
    tensors = [k for k in parts if isinstance(k, Tensor)]
    return any(isinstance(k, _SEQUENCES) for k in parts) or any(t.dtype.is_bool for t in tensors) or len(tensors) > 1


def writes_through_index(key) -> bool:
    """Whether ``t[key] = v`` must scatter: any tensor or sequence in the key (``t[key]`` is then a copy)."""
    return any(isinstance(k, (Tensor, *_SEQUENCES)) for k in _parts(key))


def getitem(t, key):
    """``t[key]`` through torch's indexing, as an extern (it drains for a boolean mask)."""
    from .extern import extern
    return extern(operator.getitem, t, key)


class SetItemOnCopy:
    """``y = x.clone(); y[key] = value; return y``: the extern of an indexed write, which never
    writes its input (the result is copied back into ``x`` in program order)."""

    __name__ = "setitem"

    def __call__(self, x, key, value):
        y = x.clone()
        y[key] = value
        return y

    def __eq__(self, other):
        return isinstance(other, SetItemOnCopy)

    def __hash__(self):
        return hash("setitem-on-copy")


def setitem(t, key, value):
    """``t[key] = value`` for keys with tensors or lists: a ``where`` for a mask and a scalar,
    else torch's indexed write as an extern, copied back into ``t``."""
    from .extern import extern
    from .torch_ops import _scalar_as
    parts = _parts(key)
    if len(parts) == 1 and isinstance(parts[0], Tensor) and parts[0].dtype.is_bool and \
            (ops.is_scalar(value) or isinstance(value, Tensor) and value.ndim == 0):
        mask = parts[0]
        if mask.shape != t.shape[:mask.ndim]:
            from .errors import ShapeError
            raise ShapeError(f"the mask of shape {mask.shape} does not match the indexed dims {t.shape[:mask.ndim]}")
        mask = mask.reshape(mask.shape + (1,) * (t.ndim - mask.ndim))
        value = value.to(t.dtype) if isinstance(value, Tensor) else _scalar_as(value, t.dtype)
        t.copy_(ops.where(mask, value, t))
        return
    t.copy_(extern(SetItemOnCopy(), t, key, value))

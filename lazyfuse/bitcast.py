"""``x.view(dtype)``: the same memory read as another dtype, a view as torch's.

The result aliases ``x``: writes through either show in the other (docs/semantics.md, Views and
in-place writes). A storage holds one dtype, so the result's storage is a stand-in on the one
that holds the memory (the *root*), never a value of its own:

- the same itemsize (float32/int32, float16/bfloat16/int16, float64/int64, uint8/int8/bool) is a
  ``runtime.engine.BitcastStorage``: a read is a BITCAST node of the root's value, fused into
  the kernels that read it; a write is recorded on the root, bitcast back;
- another itemsize is a ``ResizedStorage``: the root's bytes read as a flat storage of the other
  dtype (an extern, torch's own ``view(dtype)`` of the realized buffer), and a write made on
  that flat value and written back whole (the root's bytes past the last whole element kept).

The result never requires grad, as torch's (its ``view.dtype`` is not differentiable).
Shapes, strides and refusals are torch's (``bitcast_view``).
"""
from __future__ import annotations

import torch

from .errors import ShapeError
from .ir import dtypes as dt
from .ir.node import Node
from .ir.view import View, contiguous_view
from .runtime.engine import BitcastStorage


def view_as_dtype(t, dtype: dt.DType):
    """``t.view(dtype)``: a Tensor on ``t``'s memory read as ``dtype`` (see the module docstring)."""
    from .tensor import Tensor
    view = bitcast_view(t._view, t.dtype, dtype)
    root = t._storage.root
    if dtype is root.dtype:
        storage = root
    elif dtype.itemsize == root.dtype.itemsize:
        storage = BitcastStorage(root, dtype)
    else:
        storage = ResizedStorage(root, dtype, t.device)
    return Tensor(storage, view, t.device)


def bitcast_view(v: View, src: dt.DType, dst: dt.DType) -> View:
    """The view of ``v``'s bytes (a view in ``src`` elements) in ``dst`` elements, by torch's
    rules: the same itemsize keeps shape, strides and offset; another needs a last dim of stride
    1, and to a larger one a last size, an offset and the other strides divisible by the ratio."""
    if src.itemsize == dst.itemsize:
        return v
    what = f"to view {src.torch_scalar_name} as {dst.torch_scalar_name} (different element sizes)"
    if not v.shape:
        raise ShapeError(f"self.dim() cannot be 0 {what}: a 0-d tensor views only a dtype of its own itemsize "
                         f"({src.itemsize} bytes)")
    if src.itemsize > dst.itemsize:
        _check_last_stride(v, what)
        r = src.itemsize // dst.itemsize
        return View(v.shape[:-1] + (v.shape[-1] * r,), tuple(s * r for s in v.strides[:-1]) + (1,), v.offset * r)
    r = dst.itemsize // src.itemsize   # (torch's order of the checks: its message names the first that fails)
    if v.shape[-1] % r:
        raise ShapeError(f"self.size(-1) must be divisible by {r} {what}, but got {v.shape[-1]}")
    if v.offset % r:
        raise ShapeError(f"self.storage_offset() must be divisible by {r} {what}, but got {v.offset}")
    _check_last_stride(v, what)
    for d, s in enumerate(v.strides[:-1]):
        if s % r:
            raise ShapeError(f"self.stride({d}) must be divisible by {r} {what}, but got {s}")
    return View(v.shape[:-1] + (v.shape[-1] // r,), tuple(s // r for s in v.strides[:-1]) + (1,), v.offset // r)


def flat_as(flat: torch.Tensor, dtype: dt.DType) -> torch.Tensor:
    """A flat torch tensor of a root's buffer (``flat``) as the ``dtype`` elements its bytes hold."""
    if flat.element_size() == dtype.itemsize:
        return flat.view(dtype.torch)
    raw = flat.view(torch.uint8)
    return raw[:raw.numel() // dtype.itemsize * dtype.itemsize].view(dtype.torch)


def _check_last_stride(v: View, what: str) -> None:
    if v.strides[-1] != 1:
        raise ShapeError(f"self.stride(-1) must be 1 {what}, but got {v.strides[-1]}: call .contiguous() first")


class ResizedStorage(BitcastStorage):
    """A root storage's bytes as a flat storage of a dtype of another itemsize (the module
    docstring): ``current`` an extern reading them, ``update`` one writing a new flat value back
    over them. The rest (engine, buffer, version...) is the root's, as BitcastStorage's."""

    __slots__ = ("device",)

    def __init__(self, base, dtype: dt.DType, device):
        super().__init__(base, dtype)
        self.device = device

    @property
    def shape(self) -> tuple:
        return (self.base.numel * self.base.dtype.itemsize // self.dtype.itemsize,)

    @property
    def view(self) -> View:
        return contiguous_view(self.shape)

    @property
    def numel(self) -> int:
        return self.shape[0]

    def _root_tensor(self):
        from .tensor import Tensor
        return Tensor(self.base, self.base.view, self.device)

    @property
    def current(self) -> Node:
        # an extern per read (as BitcastStorage's node: one kept would outlive its drain)
        from .extern import extern
        return extern(_bytes_as, self._root_tensor(), self.dtype.torch, self.shape[0])._read()

    def update(self, node: Node) -> None:
        from .extern import extern
        from .tensor import result_tensor
        root = self._root_tensor()
        root._write(extern(_bytes_written, root, result_tensor(self.device, node))._read())

    def over(self, base) -> "ResizedStorage":
        return ResizedStorage(base, self.dtype, self.device)


def _bytes_as(t: torch.Tensor, dtype: torch.dtype, n: int) -> torch.Tensor:
    """The first ``n`` elements of ``dtype`` that ``t``'s bytes hold, a new tensor."""
    raw = t.reshape(-1).view(torch.uint8)
    return raw[:n * dtype.itemsize].view(dtype).clone()


def _bytes_written(t: torch.Tensor, flat: torch.Tensor) -> torch.Tensor:
    """``t`` with its leading bytes replaced by ``flat``'s (a new tensor)."""
    out = t.clone()
    raw = flat.reshape(-1).view(torch.uint8)
    out.reshape(-1).view(torch.uint8)[:raw.numel()] = raw
    return out

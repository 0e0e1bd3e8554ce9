"""``LazyTensor``: a torch tensor whose data is a lazyfuse Tensor.

A wrapper subclass (``torch.Tensor._make_wrapper_subclass``: metadata only, no storage of its
own), as torch's FakeTensor and DTensor are. Torch runs autograd, ``nn.Module`` and
``torch.optim`` above the dispatcher as for any tensor; every aten op that reaches the Python
dispatch key lands in ``__torch_dispatch__``, which records it on lazyfuse through the table in
``aten_table`` (an op with no lowering: an extern node, ``fallback``). Arithmetic operators with no
autograd to record skip the dispatcher (``operators``). So torch's own backward formulas and
optimizer updates record lazily with no extra work, and host reads (``.item()``, printing,
``bool()``, ``.numpy()``, ``.cpu()``) are where torch code drains.
"""
from __future__ import annotations

import weakref

import torch

from ..ir.view import View
from . import drains


_make_wrapper = torch.Tensor._make_wrapper_subclass
_strided = torch.strided
_tensor_data = torch._C.TensorBase.data   # the C getter and setter of ``.data``, wrapped by LazyTensor.data
_wrapper_storage = torch._C.TensorBase.untyped_storage

# Virtual addresses of lazyfuse storages, for ``data_ptr()``: a wrapper tensor has no memory of its own
# (torch answers 0 plus the offset for every one), but torch code compares data pointers to tell a
# view from a copy. So each lazyfuse storage gets an address range of its own, on first ask: two
# frontend tensors' ``data_ptr()`` are equal exactly when they start at the same element of the same
# storage. They address nothing: the data lives in lazyfuse's pool (read it with ``.numpy()``).
_addresses = weakref.WeakKeyDictionary()
_next_address = [1 << 40]


def _address_of(storage) -> int:
    storage = storage.root   # (a view of another dtype is its root's memory)
    base = _addresses.get(storage)
    if base is None:
        base = _addresses[storage] = _next_address[0]
        _next_address[0] += (storage.numel * storage.dtype.itemsize + 64) // 64 * 64
    return base


class _StorageView:
    """What ``untyped_storage()`` returns for a frontend tensor: torch's storage object of the wrapper
    (no data), whose ``data_ptr()`` and ``nbytes()`` answer for the lazyfuse storage (torch's view tests
    compare ``a.untyped_storage().data_ptr()`` of a base and its view); everything else is torch's."""
    __slots__ = ("_wrapper", "_storage")

    def __init__(self, wrapper, storage):
        self._wrapper, self._storage = wrapper, storage

    def data_ptr(self) -> int:
        return _address_of(self._storage)

    def nbytes(self) -> int:
        root = self._storage.root
        return root.numel * root.dtype.itemsize

    def __getattr__(self, name):
        return getattr(self._wrapper, name)


def from_lf(lf_tensor, requires_grad: bool = False) -> "LazyTensor":
    """The LazyTensor of a lazyfuse Tensor: the one place one is made, once per op result, so kept
    cheap (torch's wrapper parses keyword arguments at a few hundred ns each: all positional here)."""
    view = lf_tensor._view
    r = _make_wrapper(LazyTensor, view.shape, view.strides, view.offset, None, lf_tensor._storage.dtype.torch,
                      _strided, lf_tensor.device.torch_device, False, requires_grad)
    r._lf = lf_tensor
    return r


class LazyTensor(torch.Tensor):
    """A torch tensor backed by a lazyfuse ``Tensor`` (``._lf``). Make one with ``lf.lazy(t)``;
    ``lf.eager(t)`` (or ``.cpu()``, ``.numpy()``) drains and gives plain torch back."""
    _lf: object
    _lazyfuse_frontend = True   # lets lf.capture accept one as a closure's output
    __slots__ = ("_lf",)
    _runners = {}   # aten op overload -> its runner(func, args, kwargs); filled by aten_table on first use

    @staticmethod
    def __new__(cls, lf_tensor, requires_grad: bool = False):
        return from_lf(lf_tensor, requires_grad)

    # no __torch_function__ layer: everything is decided at dispatch (cheaper, as DTensor)
    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        try:
            run = cls._runners[func]
        except KeyError:
            run = cls._runners[func] = cls._resolve(func)   # aten_table.resolve, installed by that module
        return run(func, args, kwargs)

    # -- host reads: each one drains, and is counted with the line of torch code that forced it --
    def _plain(self, reason: str) -> torch.Tensor:
        drains.note(reason)
        return self._lf.torch()

    def __repr__(self, *, tensor_contents=None):
        if self._lf.device.capturing:
            return f"LazyTensor(shape={tuple(self.shape)}, dtype={self.dtype}, pending)"
        return repr(self._plain("print"))

    def data_ptr(self) -> int:
        """A virtual address (``_address_of``): equal for two frontend tensors exactly when they start at the
        same element of the same lazyfuse storage, as torch's are for views."""
        return _address_of(self._lf._storage) + self._lf._view.offset * self.element_size()

    def untyped_storage(self):
        return _StorageView(_wrapper_storage(self), self._lf._storage)

    def __format__(self, format_spec):
        # torch formats a 0-d tensor as its number only for the plain Tensor type (f"{loss:.4f}")
        if self.dim() == 0:
            return self.item().__format__(format_spec)
        return object.__format__(self, format_spec)

    def numpy(self, *, force=False):
        """Drains, then a numpy array holding a copy of the value (as ``t.cpu().numpy()``)."""
        return self._plain(".numpy()").numpy()

    def tolist(self):
        return self._plain(".tolist()").tolist()

    def cpu(self, memory_format=torch.preserve_format):
        """Drains, then a plain CPU torch tensor holding a copy of the value (no autograd history;
        ``lf.eager`` is the same)."""
        return self._plain(".cpu()")

    def __reduce_ex__(self, protocol):
        # pickling (torch.save) stores the plain value: a lazy tensor's data only exists after a drain
        return self._plain("pickle").__reduce_ex__(protocol)

    @property
    def data(self):
        return _tensor_data.__get__(self)

    @data.setter
    def data(self, value):
        # torch's ``x.data = y`` swaps x's metadata for y's in place (``set_data``); the lazyfuse tensor
        # behind x is the frontend's to swap, or x would keep showing its old value. A plain tensor
        # (``m.weight.data = torch.randn(...)``) is uploaded first, as ``copy_`` would.
        if type(value) is not LazyTensor:
            from .convert import wrap
            value = wrap(value, device=self._lf.device) if isinstance(value, torch.Tensor) else value
        _tensor_data.__set__(self, value)
        self._lf = value._lf

    def __deepcopy__(self, memo):
        # copy.deepcopy(model): a new lazy tensor with a copy of the value, recorded (no drain)
        from .convert import wrap
        out = wrap(self._lf.clone(), self.requires_grad)
        if isinstance(self, torch.nn.Parameter):
            out = torch.nn.Parameter(out, requires_grad=self.requires_grad)
        memo[id(self)] = out
        return out


def element_run(tensors):
    """The 1-D lazyfuse view whose elements, in order, are ``tensors`` (0-d LazyTensors that need no
    grad, views of one storage at consecutive offsets), or None. An op on each of them is then one
    op on it: the optimizer's step counts are made so (``optimizers``), and a ``_foreach_*`` op or
    Adam's bias corrections over them record a few nodes, not a few per parameter."""
    if len(tensors) < 2 or type(tensors[0]) is not LazyTensor:
        return None
    first = tensors[0]._lf
    storage, start = first._storage, first._view.offset
    for i, t in enumerate(tensors):
        if type(t) is not LazyTensor or t.requires_grad:
            return None
        lf_t = t._lf
        if lf_t._storage is not storage or lf_t._view.shape != () or lf_t._view.offset != start + i:
            return None
    return type(first)(storage, View((len(tensors),), (1,), start), first.device)


def elements(vector) -> list:
    """The 0-d lazyfuse views of the elements of the 1-D lazyfuse tensor ``vector``, made directly
    (indexing's general path costs as much as the rest of a remade optimizer update)."""
    storage, view, device = vector._storage, vector._view, vector.device
    return [type(vector)(storage, View((), (), view.offset + i * view.strides[0]), device)
            for i in range(view.shape[0])]


def lf_device_of(args):
    """The lazyfuse device of the first LazyTensor among ``args`` (nested lists included)."""
    for a in args:
        if type(a) is LazyTensor:
            return a._lf.device
        if isinstance(a, (list, tuple)):
            d = lf_device_of(a)
            if d is not None:
                return d
    return None


"""The Tensor API: a Tensor is a strided view of a Storage whose value may still be pending.

Views (reshape where strides allow, permute, transpose, expand, unsqueeze, squeeze, slicing)
share the storage and see every later in-place write; every other op records a new node and
returns a new storage (docs/semantics.md, Lazy recording; Views and in-place writes). Host reads drain the device.
"""
from __future__ import annotations

import collections
import functools
import itertools
import numbers

import numpy as np
import torch

from . import autograd, ops
from .bitcast import flat_as, view_as_dtype
from .errors import DTypeError, LazyfuseError, ShapeError
from .ir import dtypes as dt
from .ir.node import Node, Op
from .ir.shapes import as_int, check_shape, normalize_dim, normalize_dims, prod
from .ir.view import View
from .runtime.engine import Storage
from .runtime.pool import strided

MaxMin = collections.namedtuple("MaxMin", ["values", "indices"])
_VIEW = Op.VIEW   # (a hot-path alias: ``Op.X`` costs ~150 ns a read on Python 3.11)


def result_tensor(device, node: Node) -> "Tensor":
    """The one place where an op's result Tensor is made: a new storage whose pending value is
    ``node`` (recorded on the device's engine), read whole. Every op's result goes through here,
    so a hook that must see each result (say, autograd) has a single place to attach."""
    st = Storage(device.engine, node)
    return Tensor(st, st.view, device)


@functools.lru_cache(maxsize=4096)
def _inferred_shape(have: tuple, shape: tuple) -> tuple:
    """The shape a reshape of a ``have``-shaped tensor to ``shape`` (ints, one may be -1) gives,
    validated. Memoized (programs reshape the same shapes over and over; errors are never cached),
    so only for plain ints: a float equal to one (3.0) hashes like it, and must still be refused."""
    numel = prod(have)
    if shape.count(-1) > 1:
        raise ShapeError(f"shape {shape} has more than one -1")
    if -1 in shape:
        known = prod(s for s in shape if s != -1)
        if known == 0 or numel % known:
            raise ShapeError(f"shape '{list(shape)}' is invalid for input of size {numel}: cannot reshape a "
                             f"tensor of shape {have} into {shape}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    check_shape(shape)
    if prod(shape) != numel:
        raise ShapeError(f"shape '{list(shape)}' is invalid for input of size {numel}: cannot reshape a tensor "
                         f"of shape {have} ({numel} elements) into {shape} ({prod(shape)} elements)")
    return shape


def _in_place_operator(op: Op, name: str):
    """``x <op>= other`` as an in-place write (``Tensor._apply_in_place``), returning ``x``."""
    def method(self, other):
        return self._apply_in_place(other, op)
    method.__name__ = method.__qualname__ = name
    return method


class _TensorType(type):
    """``lf.Tensor``'s type: a torch method lazyfuse resolves per tensor (``Tensor.__getattr__``)
    is an attribute of the class too, as every method of ``torch.Tensor`` is, so torch's unbound
    style works (``lf.Tensor.cauchy_(x, 0, 1)``, ``map(lf.Tensor.clone, xs)``, OpInfo's
    ``wrapper_set_seed(torch.Tensor.uniform_, x)``)."""

    def __getattr__(cls, name):
        if name.startswith("_") or not callable(getattr(torch.Tensor, name, None)):
            raise AttributeError(f"type object 'Tensor' has no attribute {name!r}")

        def method(self, *args, **kwargs):
            return getattr(self, name)(*args, **kwargs)
        method.__name__, method.__qualname__ = name, f"Tensor.{name}"
        method.__doc__ = f"torch's Tensor.{name} on lazyfuse tensors (``Tensor.__getattr__``)."
        return method


class Tensor(metaclass=_TensorType):
    """A lazy, strided view of a device storage: ops record IR and return at once; a host read
    (``.numpy()``, ``.item()``...) or ``lf.sync`` drains. Shares memory with torch and numpy
    through DLPack (``torch.from_dlpack(t)``, ``lf.from_dlpack(x)``)."""
    __slots__ = {"_storage": None, "_view": None,
                 "device": "The Device this tensor lives on (``.kind``, ``.name``, ``.supports_graphs``).",
                 "_ag": None, "__weakref__": None}
    __array_priority__ = 1000

    def __init__(self, storage: Storage, view: View, device):
        self._storage = storage
        self._view = view
        self.device = device
        self._ag = None   # autograd state: None outside autograd (see lazyfuse.autograd.graph)

    # -- reading the lazy value ------------------------------------------------------------------
    def _read(self) -> Node:
        return self._read_as(self._view)

    def _read_as(self, v: View) -> Node:
        """The node reading this tensor's storage through view ``v`` (the storage's own value
        where ``v`` is its whole row-major view)."""
        st = self._storage
        if v is st.view:
            return st.current
        if v.shape == st.shape and v.offset == 0 and v.strides == st.view.strides:
            return st.current
        return Node(_VIEW, (st.current,), st.dtype, v.shape, v)

    def _with_view(self, view: View) -> "Tensor":
        out = Tensor(self._storage, view, self.device)
        if self._ag is not None and autograd.is_grad_enabled():
            autograd.rules.record_view(self, out)
        return out

    # -- metadata ----------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        """The shape of this view, a tuple of ints (metadata: no drain)."""
        return self._view.shape

    @property
    def dtype(self) -> dt.DType:
        """The element type (``lf.float32``...), the storage's: views share it."""
        return self._storage.dtype

    @property
    def ndim(self) -> int:
        """The number of dims, ``len(self.shape)``."""
        return len(self._view.shape)

    def dim(self) -> int:
        """The number of dims (torch's method spelling of ``ndim``)."""
        return self.ndim

    def numel(self) -> int:
        """The number of elements, the product of the shape (1 for a 0-d tensor)."""
        return prod(self._view.shape)

    def size(self, dim=None):
        """The shape (``dim=None``), or the size of dim ``dim`` (negative counts from the end)."""
        return self.shape if dim is None else self.shape[normalize_dim(dim, self.ndim)]

    def stride(self, dim=None):
        """The view's strides into its storage, in elements (0 on expanded dims); of dim ``dim`` if given."""
        return self._view.strides if dim is None else self._view.strides[normalize_dim(dim, self.ndim)]

    @property
    def nbytes(self) -> int:
        """The bytes the view's elements take, ``numel() * itemsize``."""
        return self.numel() * self._storage.dtype.itemsize

    @property
    def itemsize(self) -> int:
        """The bytes of one element."""
        return self._storage.dtype.itemsize

    @property
    def data(self) -> "Tensor":
        """This tensor's value cut from autograd (``detach()``: same storage). Assigning a tensor
        of the same dtype and device makes this tensor that one's storage and view, as torch's
        ``x.data = y`` does (its autograd state stays)."""
        return self.detach()

    @data.setter
    def data(self, other):
        if not isinstance(other, Tensor) or other.dtype is not self.dtype or other.device is not self.device:
            raise DTypeError(f"data set to a tensor that requires gradients must match the tensor's type: "
                             f"x.data = y takes a lazyfuse Tensor of dtype {self.dtype.name} on {self.device.name} "
                             f"(got {type(other).__name__}{'' if not isinstance(other, Tensor) else ' ' + other.dtype.name + ' on ' + other.device.name}); "
                             "convert it first with .to()")
        self._storage, self._view = other._storage, other._view

    def is_contiguous(self, memory_format=torch.contiguous_format) -> bool:
        """Whether the view reads a dense row-major block (``contiguous()`` then returns it as is);
        ``memory_format=torch.channels_last`` (``_3d``): dense with the channels innermost, as torch's."""
        if memory_format is torch.contiguous_format:
            return self._view.is_contiguous()
        return ops.in_memory_format(self._view, memory_format)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # -- host reads (each one drains) -------------------------------------------------------------
    def _host_torch(self, reason: str) -> torch.Tensor:
        return self._device_view(reason).detach().to("cpu", copy=True)

    def _device_view(self, reason: str) -> torch.Tensor:
        """After a drain, a torch view (no copy) of this tensor's elements in its buffer."""
        self.device.engine.sync(reason)
        st = self._storage.root   # (the one holding the memory, for a view of another dtype)
        if st.current.op is Op.ERROR:
            err = st.current.arg
            try:
                again = type(err)(f"this tensor's value could not be computed: {err}")
            except Exception:  # noqa: BLE001 (an exception type with another constructor)
                again = LazyfuseError(f"this tensor's value could not be computed: {err!r}")
            raise again from err
        self.device.host_read(st.buffer)   # (its write may still be queued: runtime/stream.py)
        if st.current.op is Op.ERROR:   # it failed on the stream
            return self._device_view(reason)
        v = self._view
        base = st.buffer.tensor
        if st.dtype is not self.dtype:
            base = flat_as(base, self.dtype)
        # (an empty view keeps its strides, as torch's empty tensors do: a copy of it, or an op run
        # eagerly on it, then lays its result out as torch's)
        return strided(base, v) if v.numel else base[:0].as_strided(v.shape, v.strides)

    def torch(self) -> torch.Tensor:
        """Drains, then a new torch tensor on the CPU holding a copy of this tensor's value."""
        return self._host_torch(".torch()")

    def numpy(self) -> np.ndarray:
        """Drains, then a new numpy array (bfloat16 comes back as float32: numpy has no bfloat16)."""
        t = self._host_torch(".numpy()")
        if t.dtype is torch.bfloat16:
            t = t.float()
        return t.numpy()

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(t)``: a new array; ``copy=False`` shares the memory or raises ValueError."""
        from .interop import to_numpy
        return to_numpy(self, dtype, copy)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """DLPack export (``torch.from_dlpack(t)``, ``np.from_dlpack(t)``): drains, then shares the buffer."""
        from .interop import to_dlpack
        return to_dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        from .interop import dlpack_device
        return dlpack_device(self.device)

    def item(self):
        """Drains, then the value of this one-element tensor as a Python number (ShapeError otherwise)."""
        if self.numel() != 1:
            raise ShapeError(f"a Tensor with {self.numel()} elements cannot be converted to Scalar: .item() needs "
                             f"exactly one element, this tensor has shape {self.shape}")
        return self._host_torch(".item()").item()

    def tolist(self):
        """Drains, then the value as nested Python lists (a number for a 0-d tensor)."""
        return self._host_torch(".tolist()").tolist()

    def __bool__(self):
        if self.numel() != 1:
            raise ShapeError(f"the truth value of a tensor of shape {self.shape} is ambiguous; use .any() "
                             "or .all() style reductions (t.sum() > 0)")
        return bool(self._host_torch("bool()").item())

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_float:
            raise DTypeError("only integer tensors can be used as an index")
        return int(self.item())

    def __format__(self, spec):
        # torch's: a 0-d tensor formats as its number (f"{loss:.4f}"), any other only with no spec
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        if spec:
            raise TypeError("unsupported format string passed to Tensor.__format__")
        return repr(self)

    def __contains__(self, element):
        """torch's ``element in t``: whether any element equals it (drains)."""
        if not isinstance(element, (Tensor, numbers.Number)):
            raise DTypeError(f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a "
                             f"{type(element).__name__}")
        return bool((self == element).any())

    def __reduce_ex__(self, protocol):
        # pickled (torch.save, copy.deepcopy, multiprocessing) as its value: a torch tensor, the
        # device's name and the requires_grad flag; the engine state (locks, pending nodes) stays here
        from .serialization import rebuild
        return rebuild, (self._host_torch("pickling").clone(), self.device.name, self.requires_grad)

    def __deepcopy__(self, memo):
        if not self.is_leaf:
            raise autograd.AutogradError("Only Tensors created explicitly by the user (graph leaves) support the "
                                         "deepcopy protocol at the moment. If you were attempting to deepcopy a "
                                         "module, this may be because of a torch.nn.utils.weight_norm usage, see "
                                         "https://github.com/pytorch/pytorch/pull/103001 (lazyfuse: deepcopy "
                                         "x.detach() instead)")
        if id(self) in memo:
            return memo[id(self)]
        out = self.detach().clone()
        if self.requires_grad:
            out.requires_grad_(True)
            if self.grad is not None:
                out.grad = self.grad.clone()
        memo[id(self)] = out
        return out

    def __repr__(self):
        if self.device.capturing:
            return f"Tensor(shape={self.shape}, dtype={self.dtype!r}, device={self.device.name}, pending)"
        body = np.array2string(self.numpy(), separator=", ", prefix="Tensor(")
        return f"Tensor({body}, dtype={self.dtype!r}, device={self.device.name!r})"

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = object.__hash__

    # -- elementwise --------------------------------------------------------------------------------
    __add__ = ops.binary_method(Op.ADD)
    __radd__ = ops.binary_method(Op.ADD, reflected=True)
    __sub__ = ops.binary_method(Op.SUB)
    __rsub__ = ops.binary_method(Op.SUB, reflected=True)
    __mul__ = ops.binary_method(Op.MUL)
    __rmul__ = ops.binary_method(Op.MUL, reflected=True)
    __truediv__ = ops.binary_method(Op.DIV)
    __rtruediv__ = ops.binary_method(Op.DIV, reflected=True)

    def __floordiv__(self, o):
        return ops.elementwise(Op.FLOORDIV, self, o)

    def __rfloordiv__(self, o):
        return ops.elementwise(Op.FLOORDIV, o, self)

    def __mod__(self, o):
        return ops.elementwise(Op.MOD, self, o)

    def __rmod__(self, o):
        return ops.elementwise(Op.MOD, o, self)

    def __pow__(self, o):
        return ops.power(self, o)

    def __rpow__(self, o):
        return ops.elementwise(Op.POW, o, self)

    def __imatmul__(self, o):
        """``x @= y``: the product written back into ``x`` (its shape must not change, as in torch)."""
        product = self @ o
        if product.shape != self.shape:
            raise ShapeError(f"x @= y: the product's shape {product.shape} differs from x's {self.shape}; an "
                             "in-place matmul keeps x's shape")
        return self.copy_(product)

    def __matmul__(self, o):
        return ops.matmul(self, o)

    def __rmatmul__(self, o):
        return ops.matmul(o, self)

    __neg__ = ops.unary_method(Op.NEG)

    def __pos__(self):
        return self

    __abs__ = ops.unary_method(Op.ABS)
    __invert__ = ops.unary_method(Op.NOT)

    def __and__(self, o):
        return ops.elementwise(Op.AND, self, o)

    __rand__ = __and__

    def __or__(self, o):
        return ops.elementwise(Op.OR, self, o)

    __ror__ = __or__

    def __xor__(self, o):
        return ops.elementwise(Op.XOR, self, o)

    __rxor__ = __xor__

    # Shifts have no native lowering: torch's ``bitwise_*_shift`` runs as an extern.
    def __lshift__(self, o):
        return self.bitwise_left_shift(o)

    def __rshift__(self, o):
        return self.bitwise_right_shift(o)

    def __rlshift__(self, o):
        from .surface import shift
        import torch
        return shift(torch.bitwise_left_shift, "bitwise_left_shift", o, self)

    def __rrshift__(self, o):
        from .surface import shift
        import torch
        return shift(torch.bitwise_right_shift, "bitwise_right_shift", o, self)

    __lt__ = ops.binary_method(Op.LT)
    __le__ = ops.binary_method(Op.LE)
    __gt__ = ops.binary_method(Op.GT)
    __ge__ = ops.binary_method(Op.GE)
    __eq__ = ops.binary_method(Op.EQ)
    __ne__ = ops.binary_method(Op.NE)
    abs = ops.unary_method(Op.ABS)
    neg = ops.unary_method(Op.NEG)
    exp = ops.unary_method(Op.EXP)
    log = ops.unary_method(Op.LOG)
    sqrt = ops.unary_method(Op.SQRT)
    rsqrt = ops.unary_method(Op.RSQRT)
    sin = ops.unary_method(Op.SIN)
    cos = ops.unary_method(Op.COS)
    tanh = ops.unary_method(Op.TANH)
    sigmoid = ops.unary_method(Op.SIGMOID)
    relu = ops.unary_method(Op.RELU)
    gelu = ops.unary_method(Op.GELU)
    silu = ops.unary_method(Op.SILU)
    reciprocal = ops.unary_method(Op.RECIPROCAL)

    def isnan(self):
        """Elementwise NaN test: a bool tensor, True where the value is NaN."""
        return ops.elementwise(Op.ISNAN, self)

    def logical_not(self):
        """Elementwise logical not: a bool tensor, True where the value is zero (or False)."""
        return ops.elementwise(Op.NOT, self.bool())

    def pow(self, exponent):
        """Elementwise ``self ** exponent`` (a Tensor or Python number), with torch's promotion."""
        return ops.power(self, exponent)

    def maximum(self, other):
        """Elementwise maximum with ``other`` (a Tensor or number), with torch's promotion and broadcasting."""
        return ops.elementwise(Op.MAXIMUM, self, other)

    def minimum(self, other):
        """Elementwise minimum with ``other`` (a Tensor or number), with torch's promotion and broadcasting."""
        return ops.elementwise(Op.MINIMUM, self, other)

    def clamp(self, min=None, max=None):
        """Elementwise ``minimum(maximum(x, min), max)``; either bound (a Tensor or number) may be
        omitted, not both (ShapeError). ``clip`` is the same method."""
        if min is None and max is None:
            raise ShapeError("clamp: min and max are both None; give min or max, at least one bound (torch refuses it too)")
        if min is not None and max is not None:
            return ops.elementwise(Op.CLAMP, self, min, max)   # (one node: Op.CLAMP)
        out = self
        if min is not None:
            out = ops.elementwise(Op.MAXIMUM, out, min)
        if max is not None:
            out = ops.elementwise(Op.MINIMUM, out, max)
        return out

    clip = clamp

    def where(self, condition, other):
        """``self`` where the bool tensor ``condition`` holds, else ``other``: ``lf.where(condition, self, other)``."""
        return ops.where(condition, self, other)

    # -- reductions --------------------------------------------------------------------------------
    def sum(self, dim=None, keepdim=False, dtype=None, *, axis=None):
        """Sum over ``dim`` (None: all dims; an int or a tuple; ``axis`` is the same), reduced dims kept
        as size 1 if ``keepdim``. Integer and bool tensors sum to int64, as in torch, unless ``dtype`` is given."""
        dim = axis if dim is None else dim
        odt = dt.as_dtype(dtype) if dtype is not None else (dt.int64 if not self.dtype.is_float else self.dtype)
        return ops.reduce(Op.SUM, self, dim, keepdim, out_dtype=odt)

    def mean(self, dim=None, keepdim=False, *, dtype=None, axis=None):
        """Mean over ``dim`` (None, int or tuple; ``axis`` is the same) of ``self`` (cast to ``dtype``
        first if given); floating tensors only (DTypeError, as in torch). An empty reduction gives NaN."""
        dim = axis if dim is None else dim
        if dtype is not None:
            return self.to(dtype).mean(dim, keepdim)
        if not self.dtype.is_float:
            raise DTypeError(f"mean() needs a floating tensor, got {self.dtype.name}; call .float() first")
        # float16/bfloat16: summed and divided in float32, rounded once (as torch)
        x = self.to(dt.opmath(self.dtype))
        n = ops.reduced_count(self, dim)
        total = ops.reduce(Op.SUM, x, dim, keepdim)
        return (total / float(n) if n else total * float("nan")).to(self.dtype)

    def amax(self, dim=None, keepdim=False, *, axis=None):
        """Largest value over ``dim`` (None, int or tuple); an empty reduced dim raises ShapeError."""
        return ops.reduce(Op.MAX, self, axis if dim is None else dim, keepdim)

    def amin(self, dim=None, keepdim=False, *, axis=None):
        """Smallest value over ``dim`` (None, int or tuple); an empty reduced dim raises ShapeError."""
        return ops.reduce(Op.MIN, self, axis if dim is None else dim, keepdim)

    def _maxmin(self, op, arg_op, dim, keepdim):
        if isinstance(dim, Tensor):
            return ops.elementwise(Op.MAXIMUM if op is Op.MAX else Op.MINIMUM, self, dim)
        if dim is None or isinstance(dim, (tuple, list)):
            return ops.reduce(op, self, dim, keepdim)
        values = ops.reduce(op, self, dim, keepdim)
        indices = ops.reduce(arg_op, self, dim, keepdim, out_dtype=dt.int64)
        if self._ag is not None and autograd.is_grad_enabled():
            values = autograd.rules.record_max_along(self, normalize_dim(dim, self.ndim), keepdim, values, indices)
        return MaxMin(values, indices)

    def max(self, dim=None, keepdim=False):
        """``max()``: the largest value; ``max(dim)``: (values, indices); ``max(tensor)``: elementwise."""
        return self._maxmin(Op.MAX, Op.ARGMAX, dim, keepdim)

    def min(self, dim=None, keepdim=False):
        """``min()``: the smallest value; ``min(dim)``: (values, indices); ``min(tensor)``: elementwise."""
        return self._maxmin(Op.MIN, Op.ARGMIN, dim, keepdim)

    def _check_arg_reduction(self, name):
        if self.dtype.is_bool:
            raise DTypeError(f"{name}() does not support bool tensors (as in torch); call .int() first")

    def argmax(self, dim=None, keepdim=False):
        """The int64 index of the largest value along ``dim``; ``dim=None`` indexes the flattened
        tensor. Bool tensors raise DTypeError, as in torch."""
        self._check_arg_reduction("argmax")
        if dim is None:
            flat = self.reshape(-1)
            out = ops.reduce(Op.ARGMAX, flat, 0, False, out_dtype=dt.int64)
            return out.reshape((1,) * self.ndim) if keepdim else out
        return ops.reduce(Op.ARGMAX, self, normalize_dim(dim, self.ndim), keepdim, out_dtype=dt.int64)

    def argmin(self, dim=None, keepdim=False):
        """The int64 index of the smallest value along ``dim``; ``dim=None`` indexes the flattened
        tensor. Bool tensors raise DTypeError, as in torch."""
        self._check_arg_reduction("argmin")
        if dim is None:
            flat = self.reshape(-1)
            out = ops.reduce(Op.ARGMIN, flat, 0, False, out_dtype=dt.int64)
            return out.reshape((1,) * self.ndim) if keepdim else out
        return ops.reduce(Op.ARGMIN, self, normalize_dim(dim, self.ndim), keepdim, out_dtype=dt.int64)

    def var(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None):
        """Variance over ``dim`` with ``correction`` (default 1, Bessel's; ``unbiased=False`` means 0),
        as in torch (``var(True)``, ``var(1, False)``: the positional ``unbiased`` of torch's
        overloads); floating tensors only. No more elements than ``correction``: inf, or NaN where all are equal (as torch)."""
        return self._opmath_var(dim, keepdim, correction, unbiased, "var", axis).to(self.dtype)

    def std(self, dim=None, unbiased=None, keepdim=False, *, correction=None, axis=None):
        """The square root of ``var`` (same ``dim``, ``unbiased``, ``keepdim`` and ``correction``)."""
        return self._opmath_var(dim, keepdim, correction, unbiased, "std", axis).to(self.dtype)

    @ops.row_major
    def _opmath_var(self, dim, keepdim, correction, unbiased, name, axis=None):
        """The variance (``name`` "var") or standard deviation ("std") in the opmath dtype (float32
        for float16/bfloat16: torch's var and std compute there and round once), its gradient
        torch's (``autograd.rules.record_var``)."""
        if isinstance(dim, bool):   # var(unbiased): torch's other overload
            dim, unbiased = None, dim
        if dim is None:
            dim = axis
        if not self.dtype.is_float:
            raise DTypeError(f"{name}() needs a floating tensor, got {self.dtype.name}; call .float() first")
        if correction is None:
            correction = 1 if unbiased is None or unbiased else 0
        x = self.to(dt.opmath(self.dtype))
        if autograd.recording(x):
            with autograd.no_grad():
                out = x._opmath_var(dim, True, correction, None, name)
            full = dim is None or x.ndim == 0
            dims = tuple(range(x.ndim)) if full else normalize_dims(dim, x.ndim)
            out = autograd.rules.record_var(x, dims, full, correction, out, name == "std")
            return out if keepdim else out.reshape(tuple(s for k, s in enumerate(x.shape) if k not in dims))
        n = ops.reduced_count(x, dim)
        d = x - x.mean(dim, keepdim=True)   # (one element: exactly 0, NaN for inf and NaN, as torch's)
        total = (d * d).sum(dim, keepdim)
        # (as torch: a divisor of max(0, n - correction), so no more elements than the correction
        # give inf where the deviations are not all zero and NaN where they are)
        var = total / float(max(0, n - correction))
        return var.sqrt() if name == "std" else var

    def softmax(self, dim, dtype=None):
        """Softmax along ``dim`` (floating tensors; cast to ``dtype`` first if given), max-shifted
        for stability; one row-wise kernel."""
        return F.softmax(self, dim, dtype=dtype)

    def log_softmax(self, dim, dtype=None):
        """``x - logsumexp(x)`` along ``dim`` (floating tensors; ``dtype`` as softmax's); one
        row-wise kernel, like softmax."""
        return F.log_softmax(self, dim, dtype=dtype)

    # -- casts ---------------------------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)`` (its device and dtype),
        as torch (``non_blocking``, ``copy``, ``memory_format`` accepted). A cast is recorded
        lazily; a move to another device drains this tensor and uploads its value there. The
        same dtype and device return ``self`` itself (unless ``copy=True``), as in torch."""
        if len(args) == 1 and not kwargs and isinstance(args[0], dt.DType):
            return self._cast(args[0])   # the common case, on the hot path of composites
        from .surface import to_arguments
        device, dtype, copy = to_arguments(self, args, kwargs)
        if device is not None and device is not self.device:
            from .creation import tensor
            return tensor(self.torch(), dtype=dtype, device=device)
        dtype = self.dtype if dtype is None else dtype
        memory_format = kwargs.get("memory_format")
        if dtype is self.dtype and (copy or memory_format not in (None, torch.preserve_format) and
                                    memory_format is not ops.suggested_memory_format(self._view)):
            return self.clone(memory_format=memory_format)   # (else self, as torch's to_will_alias)
        return self._cast(dtype, memory_format)

    def _cast(self, dtype, memory_format=None):
        dtype = dt.as_dtype(dtype)
        if dtype is self.dtype:
            return self
        return self._copied(dtype, memory_format)

    def _copied(self, dtype, memory_format) -> "Tensor":
        """A new storage holding this view's values as ``dtype``, laid out as torch's copies are
        (``clone``, ``.to``) in ``memory_format`` (``ops.copy_layout``: ``torch.preserve_format``,
        their default, also ``None``; ``contiguous_format``; ``channels_last``/``_3d``)."""
        layout = ops.copy_layout(self._view, memory_format)

        def record(args, shape):
            (x,) = args
            out = result_tensor(x.device, Node(Op.CAST, (x._read(),), dtype, shape))
            return autograd.rules.record_cast(x, out) if x._ag is not None and autograd.is_grad_enabled() else out
        return record((self,), self.shape) if layout is None else ops.laid_out(layout, record, (self,), self.shape)

    def float(self, memory_format=None):
        """``to(lf.float32)``."""
        return self._cast(dt.float32, memory_format)

    def double(self, memory_format=None):
        """``to(lf.float64)``."""
        return self._cast(dt.float64, memory_format)

    def half(self, memory_format=None):
        """``to(lf.float16)``."""
        return self._cast(dt.float16, memory_format)

    def bfloat16(self, memory_format=None):
        """``to(lf.bfloat16)``."""
        return self._cast(dt.bfloat16, memory_format)

    def byte(self, memory_format=None):
        """``to(lf.uint8)``."""
        return self._cast(dt.uint8, memory_format)

    def char(self, memory_format=None):
        """``to(lf.int8)``."""
        return self._cast(dt.int8, memory_format)

    def short(self, memory_format=None):
        """``to(lf.int16)``."""
        return self._cast(dt.int16, memory_format)

    def int(self, memory_format=None):
        """``to(lf.int32)`` (as torch's ``int()``)."""
        return self._cast(dt.int32, memory_format)

    def long(self, memory_format=None):
        """``to(lf.int64)``."""
        return self._cast(dt.int64, memory_format)

    def bool(self, memory_format=None):
        """``to(lf.bool)``: True where the value is nonzero."""
        return self._cast(dt.bool_, memory_format)

    def clone(self, *, memory_format=None):
        """A copy in a new storage: later in-place writes to ``self`` don't reach it, nor the reverse.
        Laid out as torch's: by default (``torch.preserve_format``) a dense view's strides, or a
        strided one's order of dims; ``torch.contiguous_format`` row-major; ``torch.channels_last``
        (``_3d``) with the channels innermost."""
        return self._copied(self.dtype, memory_format)

    def contiguous(self, memory_format=None):
        """``self`` when already contiguous (it keeps aliasing its base, as in torch), else a
        contiguous copy (``clone``); ``memory_format=torch.channels_last`` (4-d) or
        ``channels_last_3d`` (5-d): dense with the channels innermost (a copy in that order, viewed
        back as NCHW), as torch's."""
        if memory_format is None or memory_format in (torch.contiguous_format, torch.preserve_format):
            if self._view.is_contiguous():   # as torch: itself, so it keeps aliasing its base
                return self
            if memory_format is torch.preserve_format:
                raise ShapeError("preserve memory format is unsupported by the contiguous operator (lazyfuse: "
                                 "call contiguous() for a row-major copy)")
            return self.clone(memory_format=torch.contiguous_format)
        return self if self.is_contiguous(memory_format) else self.clone(memory_format=memory_format)

    def detach(self):
        """The same storage and view (so it aliases ``self``), cut from the autograd graph."""
        return Tensor(self._storage, self._view, self.device)

    def detach_(self):
        """``self`` cut from the autograd graph in place (now a leaf that does not require grad)."""
        self._ag = None
        return self

    # -- autograd (lazyfuse.autograd) ------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether autograd records ops on this tensor; set it on a floating leaf to make a parameter."""
        return self._ag is not None and self._ag.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag):
        autograd.set_requires_grad(self, bool(flag))

    def requires_grad_(self, requires_grad=True):
        """Set ``requires_grad`` (floating tensors only, else DTypeError) and return ``self``."""
        return autograd.set_requires_grad(self, bool(requires_grad))

    @property
    def is_leaf(self) -> bool:
        """False only for a result of an op recorded by autograd (as in torch)."""
        return self._ag is None or self._ag.is_leaf

    @property
    def grad_fn(self):
        """The autograd node that made this result, or None for a leaf."""
        return None if self.is_leaf else self._ag

    @property
    def grad(self):
        """The accumulated gradient of a leaf (None for results, as in torch, unless ``retain_grad()``)."""
        return self._ag.grad if self._ag is not None else None

    @property
    def retains_grad(self) -> bool:
        """Whether this result keeps its gradient as ``.grad`` (``retain_grad()``)."""
        return self._ag is not None and not self._ag.is_leaf and self._ag.retains_grad

    def retain_grad(self) -> None:
        """Make this result keep its gradient as ``.grad`` at ``backward()`` (a leaf keeps it anyway)."""
        if not self.requires_grad:
            raise autograd.AutogradError("can't retain_grad on Tensor that has requires_grad=False")
        if not self._ag.is_leaf:
            self._ag.retains_grad = True

    def register_hook(self, hook):
        """Call ``hook(grad)`` with this tensor's gradient at each backward; a tensor it returns
        replaces the gradient. Returns a handle whose ``remove()`` takes the hook off."""
        if not self.requires_grad:
            raise autograd.AutogradError("cannot register a hook on a tensor that doesn't require gradient")
        return _HookHandle(self._ag, hook)

    @grad.setter
    def grad(self, value):
        if not self.is_leaf:
            raise autograd.AutogradError("only leaf tensors hold a .grad")
        if value is not None and (not isinstance(value, Tensor) or value.shape != self.shape):
            raise ShapeError(f".grad must be None or a Tensor of shape {self.shape}")
        if self._ag is None:
            self._ag = autograd.Leaf(False)
        self._ag.grad = value

    def backward(self, gradient=None, retain_graph=False):
        """Accumulate this tensor's gradient into every leaf that requires grad (lazily: the
        backward pass is recorded IR, run at the next drain)."""
        autograd.backward(self, gradient, retain_graph)

    # -- views ---------------------------------------------------------------------------------------
    def _infer_shape(self, shape) -> tuple:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)):
            shape = tuple(shape[0])
        if all(type(s) is int for s in shape):
            return _inferred_shape(self.shape, shape)   # the common case, memoized
        return _inferred_shape.__wrapped__(self.shape, tuple(as_int(s, "shape") for s in shape))

    def reshape(self, *shape):
        """The elements in ``shape`` (one dim may be -1): a view of the same storage where strides
        allow (exactly when torch's would be a view), else a copy that no longer aliases."""
        shape = self._infer_shape(shape)
        v = self._view.reshape(shape)
        if v is not None:
            return self._with_view(v)
        return self.clone(memory_format=torch.contiguous_format)._with_view(View.contiguous(shape))

    def view(self, *shape):
        """As ``reshape`` but always a view of the same storage: ShapeError when strides don't allow one."""
        if len(shape) == 1 and isinstance(shape[0], (dt.DType, torch.dtype)):
            # the same memory read as another dtype, a view that aliases this one (lazyfuse.bitcast)
            return view_as_dtype(self, dt.as_dtype(shape[0]))
        shape = self._infer_shape(shape)
        v = self._view.reshape(shape)
        if v is None:
            raise ShapeError("view size is not compatible with input tensor's size and stride (at least one "
                             f"dimension spans across two contiguous subspaces). Use .reshape(...) instead: view "
                             f"size {shape} is not compatible with this tensor's strides {self._view.strides} "
                             "(.reshape copies)")
        return self._with_view(v)

    def flatten(self, start_dim=0, end_dim=-1):
        """Dims ``start_dim..end_dim`` merged into one through ``reshape`` (a view where strides allow)."""
        if self.ndim == 0:
            return self.reshape(1)
        s = normalize_dim(start_dim, self.ndim, "start_dim")
        e = normalize_dim(end_dim, self.ndim, "end_dim")
        if s > e:
            raise ShapeError(f"flatten() has invalid args: start_dim cannot come after end_dim: start_dim "
                             f"{start_dim} comes after end_dim {end_dim}")
        return self.reshape(self.shape[:s] + (prod(self.shape[s:e + 1]),) + self.shape[e + 1:])

    def permute(self, *dims):
        """A view with the dims reordered as ``dims`` (a permutation): no copy, it aliases the storage."""
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        if len(dims) != self.ndim:
            raise ShapeError(f"permute needs {self.ndim} dims, got {dims}")
        order = tuple(normalize_dim(d, self.ndim, "dims") for d in dims)
        if sorted(order) != list(range(self.ndim)):
            raise ShapeError(f"permute dims {dims} are not a permutation of range({self.ndim})")
        return self._with_view(self._view.permute(order))

    def transpose(self, dim0, dim1):
        """A view with ``dim0`` and ``dim1`` swapped: no copy, it aliases the storage."""
        if self.ndim == 0:
            return self
        a, b = normalize_dim(dim0, self.ndim, "dim0"), normalize_dim(dim1, self.ndim, "dim1")
        order = list(range(self.ndim))
        order[a], order[b] = order[b], order[a]
        return self._with_view(self._view.permute(order))

    @property
    def T(self):
        """A view with all dims reversed (the transpose of a matrix)."""
        return self._with_view(self._view.permute(tuple(reversed(range(self.ndim)))))

    @property
    def mT(self):
        """A view with the last two dims swapped (a batch of matrices transposed)."""
        return self.transpose(-2, -1)

    @property
    def mH(self):
        """The conjugate transpose of the last two dims: ``mT``, lazyfuse's dtypes being real."""
        return self.mT

    @property
    def H(self):
        """The conjugate transpose of a matrix: its transpose, lazyfuse's dtypes being real (2-D
        tensors, and 0-d ones as they are, as torch)."""
        if self.ndim not in (0, 2):
            raise ShapeError(f"tensor.H is only supported on matrices (2-D tensors), got shape {self.shape}; "
                             "use mH or transpose")
        return self.transpose(0, 1) if self.ndim == 2 else self

    def unsqueeze(self, dim):
        """A view with a new size-1 dim at ``dim`` (``-1`` appends one)."""
        d = normalize_dim(dim, self.ndim + 1)
        return self._with_view(self._view.unsqueeze(d))

    def squeeze(self, dim=None):
        """A view without size-1 dims: all of them (``dim=None``), or those among ``dim`` (int or tuple)."""
        if dim is None:
            dims = tuple(d for d, s in enumerate(self.shape) if s == 1)
        else:
            dims = normalize_dims(dim, self.ndim)   # (checked on a 0-d tensor too: only 0 and -1, as torch)
            dims = tuple(d for d in dims if self.shape[d] == 1) if self.ndim else ()
        v = self._view
        for d in reversed(dims):
            v = v.select(d, 0)
        return self._with_view(v)

    def expand(self, *sizes):
        """A view broadcasting size-1 dims to ``sizes`` (-1 keeps a dim; new dims may lead) with stride 0,
        no copy. Elements then share memory: an in-place write into it raises ShapeError."""
        if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, torch.Size)):
            sizes = tuple(sizes[0])
        if len(sizes) < self.ndim:
            raise ShapeError(f"expand: {sizes} has fewer dims than the tensor's shape {self.shape}")
        lead = len(sizes) - self.ndim
        shape = []
        for i, s in enumerate(sizes):
            old = self.shape[i - lead] if i >= lead else 1
            if s == -1:
                if i < lead:
                    raise ShapeError("expand: -1 is not allowed for a new leading dim")
                s = old
            if old != s and old != 1:
                raise ShapeError(f"The expanded size of the tensor ({s}) must match the existing size ({old}) at "
                                 f"non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                                 f"{list(self.shape)}: only size-1 dims expand")
            shape.append(int(s))
        return self._with_view(self._view.expand(tuple(shape)))

    def expand_as(self, other):
        """``expand(other.shape)``."""
        return self.expand(other.shape)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """torch's functions on lazyfuse tensors (``torch.sin(x)``, ``F.softmax(x, -1)``,
        ``torch.cat([x, y])``): lazyfuse's of that name, recorded lazily (``surface.torch_function``)."""
        from .surface import torch_function
        return torch_function(func, args, kwargs or {})

    def __getattr__(self, name):
        """A torch Tensor method lazyfuse does not define natively: an extern (``lazyfuse.surface``)."""
        from .surface import tensor_attribute
        return tensor_attribute(self, name)

    def __getitem__(self, key):
        return getitem(self, key)

    def __setitem__(self, key, value):
        if (self._ag is not None or isinstance(value, Tensor) and value._ag is not None) and \
                autograd.inplace.records(self, value):   # torch's CopySlices: y = x.clone(); y[k] = v
            return autograd.inplace.write(self, key, value, lambda v: self._setitem(key, v))
        self._setitem(key, value)

    def _setitem(self, key, value):
        key = byte_masks_as_bool(lazy_key(self, key), value)
        if writes_through_index(key):
            return setitem(self, key, value)   # self[key] would be a copy: write through torch's indexing
        dest = self[key]
        if isinstance(value, Tensor) and value.ndim > dest.ndim and \
                all(s == 1 for s in value.shape[:value.ndim - dest.ndim]):
            # as in torch, ``t[key] = v`` ignores leading size-1 dims of ``v`` (copy_ would refuse them)
            value = value.reshape(value.shape[value.ndim - dest.ndim:])
        dest.copy_(value)

    # -- in-place writes -----------------------------------------------------------------------------
    def _write(self, value: Node) -> "Tensor":
        """Replace this view's elements with ``value`` (same shape), in program order
        (docs/semantics.md, Views and in-place writes)."""
        st = self._storage
        v = self._view
        if v.has_overlap():
            raise ShapeError("in-place write into an expanded view: several elements share one memory "
                             "location; call .clone() first")
        if v.covers(st.numel):
            if value.shape != st.shape:
                value = Node(Op.VIEW, (value,), value.dtype, st.shape, View.contiguous(value.shape).reshape(st.shape))
            node = Node(Op.CAST, (value,), st.dtype, st.shape)
        else:
            node = Node(Op.WRITE, (st.current, value), st.dtype, st.shape, v)
        st.update(node)
        return self

    def _inplace_value(self, other, op: Op, alpha=1):
        if alpha.__class__ is int and alpha == 1 and self.dtype.is_float and (
                other.__class__ in (float, int) or other.__class__ is Tensor and other._storage.dtype is self.dtype):
            # the common case: the result keeps this float dtype (a scalar does not promote
            # it), so the binary op's own fast path computes it
            res = _BINARY[op](self, other)
        else:
            res = self._promoted_value(other, op, alpha)
        if res.shape != self.shape:
            raise ShapeError(f"output with shape {list(self.shape)} doesn't match the broadcast shape "
                             f"{list(res.shape)}: in-place {op.label}_ keeps the tensor's shape; the other operand "
                             "must broadcast to it")
        return res

    def _promoted_value(self, other, op: Op, alpha):
        dims, zeros, scalars = ops.operand_dtypes((self, other))
        ct = dt.result_type(dims, zeros, scalars)
        if op is Op.DIV and not ct.is_float:
            ct = dt.DEFAULT_FLOAT
        if op is Op.POW:   # (``x **= -1`` is refused as ``x ** -1`` is)
            ops.check_integer_exponent(self, other)
        if ct.category > self.dtype.category:
            raise DTypeError(f"result type {ct.torch_scalar_name} can't be cast to the desired output type "
                             f"{self.dtype.torch_scalar_name}: the result type {ct.name} of {op.label}_ can't be "
                             f"cast to the tensor's dtype {self.dtype.name}; use an out-of-place op")
        if alpha.__class__ is not int:   # (the default 1 needs no check)
            if isinstance(alpha, (bool, np.bool_)) and not ct.is_bool:
                raise DTypeError(f"{op.label}_: a bool alpha needs a bool result, this one is {ct.name} (as in torch)")
            if not isinstance(alpha, (numbers.Integral, np.bool_)) and not ct.is_float:
                raise DTypeError(f"{op.label}_: alpha={alpha!r} on {ct.name} tensors must be an integer, not a float "
                                 "(as in torch); use an out-of-place op on a float tensor")
        if alpha != 1:
            # as in torch, ``alpha`` scales ``other`` in the dtype of (self, other): it never promotes
            other = ops.elementwise(Op.MUL, other, alpha, compute_dtype=ct) if isinstance(other, Tensor) \
                else other * alpha
        return ops.elementwise(op, self, other, compute_dtype=ct)

    @ops.row_major   # (the value is written through this view: its own layout would only split the kernel)
    def _apply_in_place(self, other, op: Op, alpha=1) -> "Tensor":
        """``self = self <op> alpha * other``, atomic: see ``copy_``."""
        with self.device.engine.lock:
            if autograd.recording(self, other):   # (see autograd.inplace.snapshot)
                return self._copy(autograd.inplace.snapshot(self)._inplace_value(other, op, alpha))
            return self._copy(self._inplace_value(other, op, alpha))

    def add_(self, other, *, alpha=1):
        """In place ``self += alpha * other`` (``other`` broadcast to this shape), written through this
        view into its base storage; returns ``self``. DTypeError if the result type can't be cast to
        this tensor's dtype (torch's rule: an int tensor can't take a float result)."""
        return self._apply_in_place(other, Op.ADD, alpha)

    def sub_(self, other, *, alpha=1):
        """In place ``self -= alpha * other``, written through this view into its base; returns ``self``
        (the dtype rule of ``add_``)."""
        return self._apply_in_place(other, Op.SUB, alpha)

    def mul_(self, other):
        """In place ``self *= other``, written through this view into its base; returns ``self``
        (the dtype rule of ``add_``)."""
        return self._apply_in_place(other, Op.MUL)

    def div_(self, other, *, rounding_mode=None):
        """In place division, written through this view into its base; returns ``self``. True
        division on an integer tensor raises DTypeError: the float quotient can't be cast back (as in
        torch); ``rounding_mode='floor'``/``'trunc'`` is ``div``'s, written back."""
        if rounding_mode is None:
            return self._apply_in_place(other, Op.DIV)
        from .surface import tensor_attribute
        return tensor_attribute(self, "div_")(other, rounding_mode=rounding_mode)

    def zero_(self):
        """In place fill with 0, written through this view into its base; returns ``self``."""
        return self.fill_(0)

    def fill_(self, value):
        """In place fill with ``value`` (a scalar or one-element tensor), through this view into its
        base; returns ``self``."""
        if isinstance(value, Tensor):
            if value.numel() != 1:
                raise ShapeError("fill_ takes a scalar or a one-element tensor")
            return self.copy_(value.reshape(()))
        if self.dtype.is_int and not isinstance(value, bool):
            dt.check_fits(value, value, self.dtype, f"fill_: value={value!r}")   # as lf.full: torch refuses it
        return self.copy_(value)

    def copy_(self, src):
        """Write ``src`` (a Tensor, numpy array, torch tensor or scalar, broadcastable) into this view,
        and so into its base storage; returns ``self``. Ops recorded earlier still read the old value.

        Atomic, like every in-place method: a write reads the storage's current value (a write
        through a partial view keeps the rest of it; ``add_`` reads its target) and records the
        node that replaces it. Between the two, another thread's write to the storage would be
        overwritten — a lost update — so both run under the device's engine lock (re-entrant;
        recording takes it anyway): concurrent in-place writes to one tensor all land, in some
        order (README, Reliability: Threads). Ops that don't write in place don't take it."""
        with self.device.engine.lock:
            return self._copy(src)

    def _copy(self, src) -> "Tensor":
        if (self._ag is not None or isinstance(src, Tensor) and src._ag is not None) and \
                autograd.inplace.records(self, src):   # a write into a non-leaf, or of a value that requires grad
            return autograd.inplace.write(self, None, src, self._copy)
        if isinstance(src, Tensor):
            ops.common_device((self, src))
            node = ops.cast_node(self.device.engine, src._read(), self.dtype)
            if src.shape != self.shape:
                from .ir.shapes import broadcast_shapes
                if broadcast_shapes(self.shape, src.shape) != self.shape:   # (torch's order: its error names self "a")
                    raise ShapeError(f"copy_: source shape {src.shape} does not broadcast to {self.shape}")
                node = ops.expand_node(node, self.shape)
        elif ops.is_scalar(src):
            node = ops.expand_node(ops.scalar_node(src, self.dtype), self.shape)
        elif isinstance(src, (np.ndarray, torch.Tensor, list, tuple)):
            if not isinstance(src, (list, tuple)) and self._view == self._storage.view \
                    and self.device.engine.write_host_data(self._storage, src):
                return self
            from .creation import tensor as make_tensor
            return self._copy(make_tensor(src, dtype=self.dtype, device=self.device))
        else:
            raise DTypeError(f"copy_: src of type {type(src).__name__} is not a Tensor, array or scalar")
        return self._write(node)

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_

    # the other augmented assignments write in place too (Python would rebind the name to a new
    # tensor, and views of this one would miss the write)
    __ifloordiv__ = _in_place_operator(Op.FLOORDIV, "__ifloordiv__")
    __imod__ = _in_place_operator(Op.MOD, "__imod__")
    __ipow__ = _in_place_operator(Op.POW, "__ipow__")
    __iand__ = _in_place_operator(Op.AND, "__iand__")
    __ior__ = _in_place_operator(Op.OR, "__ior__")
    __ixor__ = _in_place_operator(Op.XOR, "__ixor__")

    # (shifts: torch's in-place shift, an extern as the out-of-place one)
    def __ilshift__(self, other):
        return self.bitwise_left_shift_(other)

    def __irshift__(self, other):
        return self.bitwise_right_shift_(other)

    # -- torch's in-place view ops: this tensor object reads another view of its storage --------------
    def _view_in_place(self, out):
        if self._ag is not None and self._ag.is_leaf and self._ag.requires_grad and autograd.is_grad_enabled():
            raise autograd.AutogradError("a leaf Variable that requires grad is being used in an in-place "
                                         "operation (a view op ending in _); use the out-of-place one")
        self._view, self._ag = out._view, out._ag
        return self

    def t_(self):
        """In place ``t()``: this tensor becomes its transpose (the same storage)."""
        return self._view_in_place(self.t())

    def transpose_(self, dim0, dim1):
        """In place ``transpose``: this tensor becomes the view (the same storage)."""
        return self._view_in_place(self.transpose(dim0, dim1))

    swapdims_ = swapaxes_ = transpose_

    def unsqueeze_(self, dim):
        """In place ``unsqueeze``: this tensor becomes the view (the same storage)."""
        return self._view_in_place(self.unsqueeze(dim))

    def squeeze_(self, dim=None):
        """In place ``squeeze``: this tensor becomes the view (the same storage)."""
        return self._view_in_place(self.squeeze() if dim is None else self.squeeze(dim))

    def as_strided_(self, size, stride, storage_offset=None):
        """In place ``as_strided``: this tensor becomes the view (the same storage)."""
        return self._view_in_place(self.as_strided(size, stride, storage_offset))


# the in-place arithmetic's common case (see Tensor._inplace_value)
_BINARY = {Op.ADD: Tensor.__add__, Op.SUB: Tensor.__sub__, Op.MUL: Tensor.__mul__, Op.DIV: Tensor.__truediv__,
           Op.FLOORDIV: Tensor.__floordiv__, Op.MOD: Tensor.__mod__, Op.POW: Tensor.__pow__}


class _HookHandle:
    """``register_hook``'s handle: ``remove()`` takes the hook off (torch's RemovableHandle)."""

    _ids = itertools.count()

    def __init__(self, ag, hook):
        self.id = next(_HookHandle._ids)
        self._ag = ag
        if ag.hooks is None:
            ag.hooks = {}
        ag.hooks[self.id] = hook

    def remove(self) -> None:
        if self._ag.hooks:
            self._ag.hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


def is_tensor(x) -> bool:
    return isinstance(x, Tensor)


__all__ = ["Tensor", "result_tensor", "is_tensor", "MaxMin"]


# (at the bottom, for the methods that call them: each imports this module's Tensor, and an import
# in a method runs the import machinery on every call, ~5 us with the caches cold)
from .advanced_indexing import byte_masks_as_bool, lazy_key, setitem, writes_through_index  # noqa: E402
from .indexing import getitem  # noqa: E402
from .nn import functional as F  # noqa: E402

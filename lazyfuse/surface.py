"""Torch's names on lazyfuse: every torch op lazyfuse has no native lowering for runs as an extern.

Three places resolve a name lazyfuse does not define itself — ``Tensor.<name>`` (through
``Tensor.__getattr__``), ``lf.<name>`` and ``lf.nn.functional.<name>`` (module
``__getattr__``) — and each goes through ``resolve`` here, in this order:

1. ``REFUSED``: categories lazyfuse cannot represent (complex numbers, sparse layouts, storage
   surgery): the name resolves to a function that raises ``UnsupportedOpError`` naming the op
   and why (so ``hasattr`` stays true, as on torch, and the message comes at the call);
2. torch's own function or method of that name: an extern (``lazyfuse.extern``): recorded
   lazily, run by torch at the drain. An in-place method (``x.cumsum_(0)``) runs its
   out-of-place form (lazyfuse's own where it has one, so it fuses) and writes the result back
   with ``copy_`` (in program order: docs/semantics.md, Views and in-place writes);
   one with no out-of-place form (``x.normal_()``) runs on a copy. A factory (no lazyfuse
   Tensor among the arguments) runs at once and uploads its result;
3. otherwise ``AttributeError``, as for any unknown attribute.

``lf.<view>_copy`` (``t_copy``, ``unbind_copy``...) is the view, then a copy of each result: the
view is lazyfuse's own or an extern view, so the copy is a native kernel.

``classify(name, namespace)`` says which of native / extern / refused a name is (the
conformance script and the README's table use it).
"""
from __future__ import annotations

import torch

from .errors import DTypeError, ShapeError, UnsupportedOpError, torch_refusal
from .extern import extern, flatten
from .ir import dtypes as dt

# exact names, then prefixes, that lazyfuse refuses: the reason is the message
REFUSED = {
    "view_as_complex": "complex tensors are not supported (lazyfuse's dtypes are real)",
    "view_as_real": "complex tensors are not supported (lazyfuse's dtypes are real)",
    "complex": "complex tensors are not supported (lazyfuse's dtypes are real)",
    "polar": "complex tensors are not supported (lazyfuse's dtypes are real)",
    "stft": "the STFT produces complex tensors, which lazyfuse does not support",
    "istft": "the STFT produces complex tensors, which lazyfuse does not support",
    "coalesce": "sparse tensors are not supported (lazyfuse tensors are dense and strided)",
    "indices": "sparse tensors are not supported (lazyfuse tensors are dense and strided)",
    "values": "sparse tensors are not supported (lazyfuse tensors are dense and strided)",
    "crow_indices": "sparse tensors are not supported (lazyfuse tensors are dense and strided)",
    "col_indices": "sparse tensors are not supported (lazyfuse tensors are dense and strided)",
    "set_": "replacing a tensor's storage breaks the storage/view model of the engine",
    "resize_": "resizing a storage in place breaks the storage/view model of the engine",
    "resize_as_": "resizing a storage in place breaks the storage/view model of the engine",
    "untyped_storage": "lazyfuse storages are pooled buffers, not torch storages: use .torch()",
    "storage": "lazyfuse storages are pooled buffers, not torch storages: use .torch()",
    "data_ptr": "a pending tensor has no memory yet: use .torch() (it drains) and read that",
    "share_memory_": "lazyfuse buffers live in its pool and cannot move to shared memory",
    "pin_memory": "lazyfuse buffers live in its pool; pinning is the pool's business",
    "backward": "use lazyfuse's own autograd (Tensor.backward)",
}
REFUSED_PREFIXES = {
    "fft_": "FFTs produce complex tensors, which lazyfuse does not support",
    "to_sparse": "sparse tensors are not supported (lazyfuse tensors are dense and strided)",
    "sparse_": "sparse tensors are not supported (lazyfuse tensors are dense and strided)",
    "to_mkldnn": "mkldnn tensors are not supported (lazyfuse tensors are dense and strided)",
    "q_": "quantized tensors are not supported",
    "quantize": "quantized tensors are not supported",
    "dequantize": "quantized tensors are not supported",
    "int_repr": "quantized tensors are not supported",
}

# attribute reads that answer from metadata alone (never drain, never an extern)
_META_QUERIES = {
    "is_complex": lambda t: False,
    "is_floating_point": lambda t: t.dtype.is_float,
    "is_sparse": False,
    "is_quantized": False,
    "is_cuda": None,   # filled by the device kind below
    "layout": torch.strided,
    "element_size": lambda t: t.dtype.itemsize,
    "nelement": lambda t: t.numel(),
    "get_device": lambda t: -1 if t.device.kind != "cuda" else t.device.torch_device.index or 0,
}


def refusal(name: str):
    """Why lazyfuse refuses torch's ``name`` (None: it does not)."""
    if name in REFUSED:
        return REFUSED[name]
    for prefix, why in REFUSED_PREFIXES.items():
        if name.startswith(prefix):
            return why
    return None


def _refused(qualified: str, why: str):
    def refuse(*args, **kwargs):
        raise UnsupportedOpError(f"{qualified} is not supported by lazyfuse: {why}")
    refuse.__name__ = qualified
    return refuse


class InPlaceOnCopy:
    """``x.<name>(...)`` for an in-place torch method with no out-of-place form (``normal_``),
    run on a copy of ``x`` so the extern never writes its input. Compared by name: plans with
    it are cached like any other."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, x, *args, **kwargs):
        y = x.clone()
        getattr(y, self.__name__)(*args, **kwargs)
        return y

    def __eq__(self, other):
        return isinstance(other, InPlaceOnCopy) and other.__name__ == self.__name__

    def __hash__(self):
        return hash(("in-place-on-copy", self.__name__))


# torch's shifts run as externs, and their meta kernels accept the float and bool operands its CPU
# kernels refuse: refused when recorded, as torch refuses the call, not at the drain that runs them
_SHIFT_KERNELS = {"bitwise_left_shift": "lshift", "bitwise_right_shift": "rshift"}


def shift(fn, name: str, a, b, **kwargs):
    """torch's shift ``fn`` (``bitwise_left_shift``/``bitwise_right_shift``) of ``a`` by ``b`` as an
    extern, refused first where the operands promote to a float or bool dtype, with torch's sentence."""
    from .tensor import Tensor

    def probe(v):   # (what torch promotes: a tensor's dtype, 0-d or not; a Python number's kind)
        return torch.empty(() if v.ndim == 0 else (1,), dtype=v.dtype.torch) if isinstance(v, Tensor) else v
    promoted = torch.result_type(probe(a), probe(b))
    if promoted.is_floating_point or promoted == torch.bool:
        d = dt.from_torch(promoted)
        raise DTypeError(f'"{_SHIFT_KERNELS[name]}_cpu" not implemented for \'{d.torch_scalar_name}\': {name} '
                         f"shifts integers, and these operands promote to {d.name}; shift an integer tensor "
                         "(.long()), or multiply by 2 ** n")
    return extern(fn, a, b, **kwargs)


# torch's convolutions run as externs, and their meta kernels accept a stride, padding, dilation or
# output_padding of the wrong length that its CPU kernels refuse: refused when recorded, with
# torch's sentence. name -> (spatial dims, its arguments after ``input, weight, bias`` in order)
_CONV = ("stride", "padding", "dilation", "groups")
_CONV_TRANSPOSE = ("stride", "padding", "output_padding", "groups", "dilation")
_CONV_ARGUMENTS = {f"conv{n}d": (n, _CONV) for n in (1, 2, 3)} | \
    {f"conv_transpose{n}d": (n, _CONV_TRANSPOSE) for n in (1, 2, 3)}


def _check_conv_arguments(conv, args, kwargs) -> None:
    dims, names = conv
    given = {**dict(zip(names, args[3:])), **kwargs}
    for arg in names:
        value = given.get(arg)
        if arg != "groups" and isinstance(value, (tuple, list)) and len(value) not in (1, dims):
            raise ShapeError(f"expected {arg} to be a single integer value or a list of {dims} values to match the "
                             f"convolution dimensions, but got {arg}={list(value)}: give {arg} as one int or "
                             f"{dims} ints, one per spatial dim")


# torch's namespaces (as ``torch.overrides.resolve_name`` spells a function's) -> lazyfuse's
_TORCH_HOMES = {"torch.nn.functional.": "lazyfuse.nn.functional", "torch.linalg.": "lazyfuse.linalg",
                "torch.special.": "lazyfuse.special", "torch.fft.": "lazyfuse.fft",
                "torch.signal.windows.": "lazyfuse.signal.windows", "torch.functional.": "lazyfuse",
                "torch.": "lazyfuse"}


def torch_function(func, args: tuple, kwargs: dict):
    """``Tensor.__torch_function__``: torch's ``func`` called on lazyfuse tensors (``torch.sin(x)``,
    ``F.relu(x)``, ``torch.Tensor.add(x, y)``) is lazyfuse's function or method of that name, which
    records lazily (native, or an extern), so torch code runs on lazyfuse tensors unchanged; a name
    lazyfuse lacks is torch's ``func`` as an extern."""
    import importlib

    from torch.overrides import resolve_name

    from .tensor import Tensor
    dev = next(a.device for a in flatten(args, kwargs)[1] if isinstance(a, Tensor))

    def ours(v):   # a plain torch tensor beside lazyfuse ones: uploaded to their device, as torch mixes CPU tensors
        if isinstance(v, torch.Tensor):
            from .creation import tensor
            return tensor(v, device=dev)
        return type(v)(ours(e) for e in v) if isinstance(v, (list, tuple)) and not hasattr(v, "_fields") else v
    args, kwargs = tuple(ours(a) for a in args), {k: ours(v) for k, v in kwargs.items()}
    name = resolve_name(func) or ""
    if name.startswith("torch.Tensor."):
        method = name[len("torch.Tensor."):]
        if isinstance(args[0], Tensor) and "." not in method:
            return getattr(args[0], method)(*args[1:], **kwargs)
    for prefix, home in _TORCH_HOMES.items():
        if name.startswith(prefix) and "." not in name[len(prefix):]:
            same = getattr(importlib.import_module(home), name[len(prefix):], None)
            if same is not None and same is not func:
                return same(*args, **kwargs)
            break
    return extern(func, *args, **kwargs)


def tensor_attribute(t, name: str):
    """``t.<name>`` for a name lazyfuse's Tensor does not define (see the module docstring)."""
    if name.startswith("_"):
        raise AttributeError(f"'Tensor' object has no attribute {name!r}")
    if name in _META_QUERIES:
        q = _META_QUERIES[name]
        if name == "is_cuda":
            return t.device.kind == "cuda"
        return (lambda: q(t)) if callable(q) else q
    why = refusal(name)
    if why is not None:
        return _refused(f"Tensor.{name}", why)
    method = getattr(torch.Tensor, name, None)
    if method is None or not callable(method):
        raise AttributeError(f"'Tensor' object has no attribute {name!r} (nor has torch.Tensor a method of "
                             "that name)")
    if name.endswith("_") and not name.endswith("__"):
        return _in_place(t, name)
    if name in _SHIFT_KERNELS:
        return lambda other: shift(method, name, t, other)
    return lambda *args, **kwargs: extern(method, t, *args, **kwargs)


def in_place_source(t, *others):
    """What an in-place op written back as ``t.copy_(f(t, *others))`` computes ``f`` of: under
    autograd a snapshot of ``t`` (``autograd.inplace.snapshot``), since ``f``'s gradient may save
    its input (clamp's and relu's do, mul's for the other operand) and the write would change it."""
    from . import autograd
    return autograd.inplace.snapshot(t) if autograd.recording(t, *others) else t


def _in_place(t, name):
    from . import ops
    from .tensor import Tensor
    if classify(name[:-1], "Tensor") == "native":
        # x.exp_(): lazyfuse's own exp written back, so it fuses like x.copy_(x.exp())
        native = getattr(Tensor, name[:-1])

        @ops.row_major   # (the value is written through t's view: its own layout would only split the kernel)
        def method(*args, **kwargs):
            value = native(in_place_source(t, *args, *kwargs.values()), *args, **kwargs)
            if not torch.can_cast(value.dtype.torch, t.dtype.torch):
                raise DTypeError(f"{name}: the result's dtype {value.dtype} cannot be written into this "
                                 f"{t.dtype} tensor in place (torch refuses it too); use the out-of-place "
                                 f"{name[:-1]}() instead")
            return t.copy_(value)
        method.__name__ = name
        return method
    base = getattr(torch.Tensor, name[:-1], None)
    fn = base if callable(base) else InPlaceOnCopy(name)

    def method(*args, **kwargs):
        return t.copy_(extern(fn, in_place_source(t, *args, *kwargs.values()), *args, **kwargs))
    method.__name__ = name
    return method


def namespace_function(namespace, qualified_prefix: str, name: str):
    """``lf.<name>`` / ``lf.nn.functional.<name>`` for a name lazyfuse does not define: torch's
    function of that name in ``namespace`` (``torch``, ``torch.nn.functional``) as an extern."""
    if name.startswith("_"):
        raise AttributeError(name)
    why = refusal(name)
    if why is not None:
        return _refused(qualified_prefix + name, why)
    fn = getattr(namespace, name, None)
    if fn is None:
        raise AttributeError(f"lazyfuse has no {qualified_prefix}{name} (nor has {namespace.__name__})")
    if isinstance(fn, torch.dtype):   # (still an AttributeError: hasattr(lf, "int8") is False)
        raise AttributeError(f"lazyfuse has no {qualified_prefix}{name}: torch's {fn} is a dtype lazyfuse cannot hold; "
                             f"use one of {', '.join('lf.' + d.name for d in dt.ALL)} (convert torch.{name} data to "
                             "one of them first)")
    if not callable(fn) or isinstance(fn, type):
        raise AttributeError(f"lazyfuse has no {qualified_prefix}{name}: {namespace.__name__}.{name} is a "
                             f"{'class' if isinstance(fn, type) else type(fn).__name__}, not a function lazyfuse "
                             "can run on its tensors")
    if name.endswith("_copy") and callable(getattr(torch.Tensor, name[:-len("_copy")], None)):
        return _copy_of(name[:-len("_copy")], qualified_prefix + name)
    if name.endswith("_"):
        return _in_place_function(fn, qualified_prefix, name)
    if name in _SHIFT_KERNELS:
        return lambda input, other, **kwargs: shift(fn, name, input, other, **kwargs)

    conv = _CONV_ARGUMENTS.get(name)

    def call(*args, **kwargs):
        _, tensors = flatten(args, kwargs)
        if not tensors:
            return _factory(fn, qualified_prefix + name, args, kwargs)
        if conv is not None:
            _check_conv_arguments(conv, args, kwargs)
        return extern(fn, *args, **kwargs)
    call.__name__ = name
    call.__qualname__ = qualified_prefix + name
    call.__doc__ = f"torch's {fn.__name__} on lazyfuse tensors, run as an extern (no native lowering)."
    call.torch_function = fn
    return call


def torch_submodule(namespace, qualified_prefix: str):
    """The module ``__getattr__`` of a lazyfuse namespace that mirrors torch's ``namespace``
    (``lf.linalg`` for ``torch.linalg``...): a name the module does not define is torch's
    function of that name, as an extern (``namespace_function``)."""
    def __getattr__(name):
        return namespace_function(namespace, qualified_prefix, name)
    return __getattr__


# where ``lf.<name>_`` / ``lf.nn.functional.<name>_`` finds the out-of-place form it writes back
_LAZYFUSE_NAMESPACES = {"lf.": "lazyfuse", "lf.nn.functional.": "lazyfuse.nn.functional"}


def _in_place_function(fn, qualified_prefix: str, name: str):
    """``lf.relu_(x)``, ``lf.fill_(x, v)``, ``lf.nn.functional.elu_(x)``: torch's in-place function
    writes its first argument and returns it. Run as an extern, its result would be a new tensor
    and ``x`` would keep its old value, so it runs as the Tensor method ``x.<name>(...)`` (native,
    or this module's in-place extern), else, for a functional with no method form
    (``F.elu_``), as lazyfuse's out-of-place ``<name[:-1]>`` written back with ``copy_``."""
    import importlib
    from .tensor import Tensor

    def call(input, *args, **kwargs):
        if not isinstance(input, Tensor):
            return extern(fn, input, *args, **kwargs)   # not lazyfuse's to write: torch's own call
        if callable(getattr(Tensor, name, None)) or callable(getattr(torch.Tensor, name, None)):
            return getattr(input, name)(*args, **kwargs)
        out_of_place = getattr(importlib.import_module(_LAZYFUSE_NAMESPACES[qualified_prefix]), name[:-1])
        return input.copy_(out_of_place(in_place_source(input, *args, *kwargs.values()), *args, **kwargs))
    call.__name__ = name
    call.__qualname__ = qualified_prefix + name
    call.__doc__ = f"torch's in-place {name}: writes ``input`` and returns it."
    return call


def _copy_of(method: str, qualified: str):
    """``torch.<view>_copy`` (``t_copy``, ``unbind_copy``...): the view, then a copy of each result;
    the view is lazyfuse's own or an extern view, so the whole is a native copy kernel."""
    def call(x, *args, **kwargs):
        view = getattr(x, method)
        if method == "view" and not (len(args) == 1 and isinstance(args[0], (dt.DType, torch.dtype))):
            # (a copy needs no view of the memory: torch's view_copy of a transpose is its reshape;
            # a dtype stays view's bitcast)
            view = x.reshape
        result = view(*args, **kwargs)
        if isinstance(result, (tuple, list)):
            return [r.clone() for r in result] if isinstance(result, list) else tuple(r.clone() for r in result)
        return result.clone()
    call.__name__ = qualified.rpartition(".")[2]
    call.__qualname__ = qualified
    call.__doc__ = f"A copy of ``x.{method}(...)`` (torch's {call.__name__})."
    return call


def _factory(fn, qualified: str, args, kwargs):
    """A torch factory with no lazyfuse Tensor argument (``eye``, ``linspace``, ``randint``), whose
    lazyfuse name is ``qualified``: run now on the host (its randomness from lazyfuse's generator)
    and uploaded to ``device=``."""
    from .creation import generator_for, tensor
    from .extern import _mix
    from .runtime.device import device as get_device
    kwargs = dict(kwargs)
    dev = get_device(kwargs.pop("device", None))
    requires_grad = kwargs.pop("requires_grad", False)
    generator = generator_for(dev, kwargs.pop("generator", None), qualified)
    if isinstance(kwargs.get("dtype"), dt.DType):
        kwargs["dtype"] = kwargs["dtype"].torch
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_mix(*generator.take(1)))
        try:
            result = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 (torch's refusal, e.g. eye(-1), bitwise_and(2, 3): as one naming the op)
            raise torch_refusal(qualified, e) from None
    if not isinstance(result, torch.Tensor):
        return result
    return tensor(result, device=dev, requires_grad=requires_grad)


def _is_device(a) -> bool:
    from .runtime.device import Device
    if isinstance(a, (Device, torch.device)):
        return True
    return isinstance(a, str) and a.split(":")[0].strip().lower() in ("cpu", "cuda", "interpreter", "hip")


def to_arguments(t, args, kwargs) -> tuple:
    """(device or None, dtype or None, copy) of a ``Tensor.to(...)`` call, torch's overloads:
    ``to(dtype)``, ``to(device, dtype=None)``, ``to(other)``, and the keywords ``dtype``,
    ``device``, ``non_blocking``, ``copy``, ``memory_format``."""
    from .errors import DTypeError
    from .ir import dtypes as dt
    from .runtime.device import device as get_device
    from .tensor import Tensor
    kwargs = dict(kwargs)
    unknown = set(kwargs) - {"dtype", "device", "non_blocking", "copy", "memory_format"}
    if unknown:
        raise DTypeError(f"to(): unexpected keyword argument(s) {sorted(unknown)}")
    device, dtype = kwargs.get("device"), kwargs.get("dtype")
    args = list(args)
    if args and isinstance(args[0], Tensor):
        other = args.pop(0)
        device, dtype = other.device, other.dtype
    elif args and _is_device(args[0]):
        device = args.pop(0)
    if args and not isinstance(args[0], bool):
        dtype = args.pop(0)
    if args and isinstance(args[0], bool):   # non_blocking, then copy, positionally
        args.pop(0)
        if args:
            kwargs["copy"] = bool(args.pop(0))
    if args:
        raise DTypeError(f"to(): cannot read the arguments {args!r}: pass a dtype, a device or a Tensor")
    return (None if device is None else get_device(device), None if dtype is None else dt.as_dtype(dtype),
            bool(kwargs.get("copy", False)))


def classify(name: str, namespace: str = "Tensor") -> str:
    """``native`` (lazyfuse lowers it itself), ``extern`` (torch runs it) or ``refused``, for
    torch's ``name`` on ``namespace`` (``Tensor``, ``torch`` or ``functional``)."""
    import lazyfuse
    from .nn import functional as F
    from .tensor import Tensor
    home = {"Tensor": Tensor, "torch": lazyfuse, "functional": F}[namespace]
    own = home.__dict__ if namespace == "Tensor" else vars(home)
    if namespace != "Tensor" and name.endswith("_") and name not in own and refusal(name) is None:
        # an in-place function runs as the method (``_in_place_function``), else its out-of-place form
        has_method = callable(getattr(Tensor, name, None)) or callable(getattr(torch.Tensor, name, None))
        return classify(name, "Tensor") if has_method else classify(name[:-1], namespace)
    if name in own:
        return "native"
    if namespace == "Tensor" and any(name in vars(c) for c in Tensor.__mro__[1:-1]):
        return "native"
    if namespace == "Tensor" and name.endswith("_") and refusal(name) is None and \
            classify(name[:-1], "Tensor") == "native":
        return "native"   # x.exp_(): the native exp written back (_in_place)
    return "refused" if refusal(name) is not None else "extern"


__all__ = ["tensor_attribute", "namespace_function", "torch_submodule", "classify", "refusal", "REFUSED", "REFUSED_PREFIXES"]

"""Extern nodes: a torch function on lazyfuse tensors, recorded lazily like any other op.

``extern(fn, *args, **kwargs)`` records one ``Op.EXTERN`` node per tensor result. Its shape
and dtype come from running ``fn`` once on torch's ``meta`` device (cached by the call's
signature: the function, its non-tensor arguments, and each tensor's shape, strides and
dtype). At the drain the step calls ``fn`` on torch views of the realized input buffers and
writes the result into a pooled output buffer — through ``out=`` where ``fn`` takes it, else
copied — as the CPU matmul's library call does. It is a fusion boundary (its inputs are
materialized, its result is a buffer the next kernel reads), never a drain; a captured graph
replays it like a kernel launch.

A function whose result size needs the data (``nonzero``, ``unique``, boolean-mask indexing:
torch's meta device cannot say) runs *eagerly* instead: it drains its inputs, runs, and its
results become new realized tensors. That is refused inside a capture (the value would be
baked into the graph). A function of a random op takes its randomness from lazyfuse's
generator (``lf.manual_seed``): its seed and stream offset are runtime scalars of the node,
so a plan is reused across draws and a captured graph's replays draw fresh numbers.

Results are values, never views: an extern of a torch view op (``t()``, ``diagonal``) is a
copy. Gradients are generic: the VJP of each differentiable input is itself an extern that
runs ``torch.autograd.grad`` through ``fn`` on the realized inputs.
"""
from __future__ import annotations

import functools
import inspect
import threading

import torch

from . import autograd
from .autograd.graph import attach
from .errors import CaptureError, DTypeError, LazyfuseError, ShapeError
from .ir import dtypes as dt
from .ir.node import Node, Op

# torch functions that draw random numbers (their extern binds lazyfuse's generator)
RANDOM_NAMES = frozenset({
    "bernoulli", "bernoulli_", "multinomial", "normal", "normal_", "uniform_", "exponential_", "geometric_",
    "cauchy_", "log_normal_", "random_", "poisson", "rand_like", "randn_like", "randint_like", "randperm",
    "rrelu", "rrelu_", "dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d",
    "dropout3d", "native_dropout",
})


class _Slot:
    """Where the ``i``-th tensor argument goes when a call is rebuilt."""

    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i

    def __eq__(self, other):
        return isinstance(other, _Slot) and other.i == self.i

    def __hash__(self):
        return hash(("slot", self.i))

    def __repr__(self):
        return f"<tensor {self.i}>"

    def stable_text(self, text) -> str:
        return repr(self)


class _Opaque:
    """A constant argument compared by identity (a torch tensor, an unhashable object)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, _Opaque) and other.value is self.value

    def __hash__(self):
        return id(self.value)


class ExternCall:
    """The ``arg`` of an ``Op.EXTERN`` node: what to call and how to rebuild its arguments.

    Hashable and comparable (it is part of the plan key): ``spec`` holds the non-tensor
    arguments as hashable values and a ``_Slot`` where each tensor goes."""

    __slots__ = ("fn", "spec", "index", "random", "use_out", "name", "_hash")

    def __init__(self, fn, spec, index, random: bool, use_out: bool, name: str):
        self.fn, self.spec, self.index, self.random, self.use_out, self.name = fn, spec, index, random, use_out, name
        self._hash = hash((fn, spec, index, random, use_out))

    def __eq__(self, other):
        return self is other or (isinstance(other, ExternCall) and self._hash == other._hash and
                                 (self.fn, self.spec, self.index, self.random, self.use_out) ==
                                 (other.fn, other.spec, other.index, other.random, other.use_out))

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"extern {self.name}" + (f"[{self.index}]" if self.index is not None else "")

    def stable_text(self, text) -> str | None:
        """The call as text that is the same in every process (runtime.plan_store), or None
        for a function with no importable name (a lambda, a local function, a partial)."""
        fn = self.fn
        qualname = getattr(fn, "__qualname__", None)
        owner = getattr(fn, "__module__", None) or getattr(getattr(fn, "__objclass__", None), "__qualname__", None)
        if qualname is None or owner is None or "<" in qualname:
            return None
        return f"extern {owner}.{qualname}{text(self.spec)}{text((self.index, self.random, self.use_out))}"

    def run(self, inputs, out, seed_words=None):
        """Compute into ``out`` (a torch tensor) from ``inputs`` (torch views of the buffers)."""
        args, kwargs = rebuild(self.spec, inputs)
        if seed_words is not None:
            with torch.random.fork_rng(devices=[out.device] if out.device.type == "cuda" else []):
                torch.manual_seed(_mix(int(seed_words[0]), int(seed_words[1])))
                result = self.fn(*args, **kwargs)
        elif self.use_out:
            self.fn(*args, **kwargs, out=out)
            return
        else:
            result = self.fn(*args, **kwargs)
        if self.index is not None:
            result = result[self.index]
        out.copy_(result)


def _mix(seed: int, offset: int) -> int:
    """One torch seed per (lazyfuse seed, stream offset): distinct draws get distinct streams."""
    return (seed * 0x9E3779B97F4A7C15 + offset * 0xBF58476D1CE4E5B9) & ((1 << 63) - 1)


# -- argument trees -----------------------------------------------------------------------------
def flatten(args, kwargs):
    """(spec, tensors): the call's arguments with each lazyfuse Tensor replaced by a _Slot, lists
    and tuples tagged, and any other object that is not a plain value held as an ``_Opaque``
    (compared by identity), so a spec always hashes."""
    tensors = []
    spec = (_spec_of(tuple(args), tensors), tuple((k, _spec_of(v, tensors)) for k, v in sorted(kwargs.items())))
    return spec, tensors


# (module-level, not closures: a recursive closure is a reference cycle, which would keep the
# arguments, and so their buffers, alive until the garbage collector runs)
def _spec_of(a, tensors: list):
    from .tensor import Tensor
    if isinstance(a, Tensor):
        tensors.append(a)
        return _Slot(len(tensors) - 1)
    if isinstance(a, (list, tuple)):
        items = tuple([_spec_of(x, tensors) for x in a])
        return ("__list__", items) if isinstance(a, list) else ("__tuple__", items)
    if isinstance(a, dt.DType):
        return a.torch
    if a is None or isinstance(a, (bool, int, float, str, torch.dtype, torch.device, torch.memory_format,
                                   torch.layout, type(Ellipsis))):
        return a
    if isinstance(a, slice):   # (slices hash only from Python 3.12)
        return ("__slice__", (a.start, a.stop, a.step))
    if hasattr(a, "kind") and hasattr(a, "torch_device"):   # a lazyfuse Device
        return a.torch_device
    if isinstance(a, torch.Tensor) and a.is_complex():
        raise DTypeError("complex tensors are not supported by lazyfuse")
    return _Opaque(a)


def rebuild(spec, tensors):
    """(args, kwargs) of a call: ``spec`` with ``tensors`` in its slots."""
    args, kwargs = spec
    return _value_of(args, tensors), {k: _value_of(v, tensors) for k, v in kwargs}


def _value_of(a, tensors):
    if isinstance(a, _Slot):
        return tensors[a.i]
    if isinstance(a, _Opaque):
        return a.value
    if isinstance(a, tuple) and len(a) == 2 and a[0] in ("__list__", "__tuple__", "__slice__"):
        items = [_value_of(x, tensors) for x in a[1]]
        return items if a[0] == "__list__" else slice(*items) if a[0] == "__slice__" else tuple(items)
    return a


# -- shape inference on torch's meta device -------------------------------------------------------
class NeedsData(Exception):
    """The result's size (or its being a tensor at all) depends on the data: run eagerly."""


_meta_lock = threading.Lock()


@functools.lru_cache(maxsize=8192)
def _meta_signature(fn, spec, inputs: tuple) -> tuple:
    """(structure, ((shape, lazyfuse dtype), ...), use_out) of ``fn``'s result, from torch's meta device."""
    metas = [torch.empty_strided(shape, strides, dtype=dtype.torch, device="meta") for shape, strides, dtype in inputs]
    args, kwargs = rebuild(spec, metas)
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError as e:
        raise NeedsData(str(e)) from None
    except Exception as e:  # noqa: BLE001 (torch's own validation of the arguments)
        text = str(e)
        if "meta" in text.lower() or "data-dependent" in text or "data dependent" in text:
            raise NeedsData(text) from None
        raise _refusal(_name(fn), e) from None
    if isinstance(result, torch.Tensor):
        outs, structure = (result,), None
    elif isinstance(result, (tuple, list)) and result and all(isinstance(r, torch.Tensor) for r in result):
        outs, structure = tuple(result), type(result)
    else:
        raise NeedsData(f"returns {type(result).__name__}")
    described = []
    for r in outs:
        if r.layout != torch.strided:
            from .errors import UnsupportedOpError
            raise UnsupportedOpError(f"{_name(fn)}: its result has layout {r.layout}; lazyfuse tensors are dense and "
                                     "strided (sparse and other layouts are not supported)")
        if r.is_complex():
            raise DTypeError(f"{_name(fn)}: complex results are not supported by lazyfuse (its dtypes are "
                             "float16/bfloat16/float32/float64/int32/int64/bool)")
        try:
            dtype = dt.from_torch(r.dtype)
        except LazyfuseError:
            raise DTypeError(f"{_name(fn)}: its result dtype {r.dtype} has no lazyfuse dtype (float16/bfloat16/"
                             "float32/float64/int32/int64/bool)") from None
        if any(not isinstance(s, int) for s in r.shape):
            raise NeedsData("symbolic size")
        described.append((tuple(r.shape), dtype))
    use_out = structure is None and _takes_out(fn, args, kwargs, outs[0])
    return structure, tuple(described), use_out


def _takes_out(fn, args, kwargs, like) -> bool:
    """Whether ``fn(..., out=buffer)`` computes the result in place of a copy (tried on meta)."""
    if "out" in kwargs or isinstance(fn, (functools.partial,)) or inspect.isfunction(fn) and \
            "out" not in inspect.signature(fn).parameters:
        return False
    if getattr(fn, "__objclass__", None) is torch._C.TensorBase:   # Tensor methods take no out=
        return False
    try:
        out = torch.empty(like.shape, dtype=like.dtype, device="meta")
        got = fn(*args, **kwargs, out=out)
    except Exception:  # noqa: BLE001 (no out= form)
        return False
    return got is out and tuple(out.shape) == tuple(like.shape) and out.dtype == like.dtype


def _refusal(name, e) -> LazyfuseError:
    text = f"{name}: torch refuses these arguments: {e}"
    if isinstance(e, TypeError) or "dtype" in str(e) or "not implemented for" in str(e):
        return DTypeError(text)
    return ShapeError(text)


def _name(fn) -> str:
    """A reader's name of ``fn``: ``torch.cumsum``, ``Tensor.flip``, ``torch.nn.functional.pad``."""
    name = getattr(fn, "__name__", None)
    if name is None:
        return type(fn).__name__
    for prefix, home in (("torch.", torch), ("torch.nn.functional.", torch.nn.functional),
                         ("torch.special.", torch.special), ("torch.linalg.", torch.linalg)):
        if getattr(home, name, None) is fn:
            return prefix + name
    if getattr(fn, "__objclass__", None) in (torch._C.TensorBase, torch.Tensor):
        return "Tensor." + name
    return getattr(fn, "__qualname__", name)


# -- recording ----------------------------------------------------------------------------------
def extern(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` for any torch function, on lazyfuse tensors, recorded lazily.

    Each lazyfuse Tensor among the arguments (nested in lists and tuples too) is passed to
    ``fn`` as a torch tensor holding its value; results come back as lazyfuse Tensors (a tuple
    of them for a tuple result). The call runs at the next drain that needs a result, as one
    launch between kernels (``lf.stats().extern_launches``); ``fn`` must not write its inputs.
    Functions whose result size depends on the data run at once instead (a drain)."""
    from .ops import common_device
    spec, tensors = flatten(args, kwargs)
    if not tensors:
        raise DTypeError(f"lf.extern({_name(fn)}): pass at least one lazyfuse Tensor argument "
                         "(factories: use the lazyfuse ones, or lf.tensor(torch_result))")
    dev = common_device(tensors)
    name = _name(fn)
    random = getattr(fn, "__name__", "") in RANDOM_NAMES
    inputs = tuple((t.shape, t.stride(), t.dtype) for t in tensors)
    try:
        with _meta_lock:
            structure, outs, use_out = _meta_signature(fn, spec, inputs)
    except NeedsData:
        return run_eagerly(fn, spec, tensors, dev, name)
    srcs = [_operand(t) for t in tensors]
    if random:
        from .creation import generator
        from .ops import scalar_node
        seed, offset = generator.take(max(1, sum(_numel(s) for s, _ in outs)))
        srcs += [scalar_node(seed, dt.int64), scalar_node(offset, dt.int64)]
        use_out = False
    results = []
    from .tensor import result_tensor
    for k, (shape, dtype) in enumerate(outs):
        call = ExternCall(fn, spec, None if structure is None else k, random, use_out, name)
        out = result_tensor(dev, Node(Op.EXTERN, tuple(srcs), dtype, shape, call))
        if autograd.recording(*tensors):
            _record_vjp(fn, spec, tensors, call.index, out)
        results.append(out)
    if structure is None:
        return results[0]
    return _restructure(structure, results)


def _restructure(structure, results):
    if structure in (tuple, list):
        return structure(results)
    try:
        return structure(results)      # torch.return_types.* take a sequence
    except TypeError:
        return tuple(results)


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _operand(t) -> Node:
    """A tensor argument as the strided view of its storage (no copy: the call reads the view)."""
    return Node(Op.VIEW, (t._storage.current,), t.dtype, t._view.shape, t._view)


eager_runs = 0   # calls run eagerly so far (the conformance script tells native from extern by it)


def run_eagerly(fn, spec, tensors, dev, name):
    """A call whose result size needs the data: drain the inputs, run, wrap the results."""
    global eager_runs
    if dev.capturing:
        raise CaptureError(f"{name} has a data-dependent result size, so it must read the data: not possible "
                           "inside a capture (the value would be baked into the graph). Keep shapes static: "
                           "use lf.where(mask, x, 0) or x.masked_fill(~mask, 0) instead of x[mask], "
                           "nonzero or masked_select")
    eager_runs += 1
    views = [t._device_view(name) for t in tensors]
    args, kwargs = rebuild(spec, views)
    result = fn(*args, **kwargs)
    return _wrap(result, dev)


def _wrap(result, dev):
    from .creation import tensor
    if isinstance(result, torch.Tensor):
        if result.is_complex():
            raise DTypeError("complex results are not supported by lazyfuse")
        return tensor(result.detach().clone(), device=dev)
    if isinstance(result, (tuple, list)) and any(isinstance(r, torch.Tensor) for r in result):
        return _restructure(type(result), [_wrap(r, dev) for r in result])
    return result


# -- autograd -----------------------------------------------------------------------------------
def _vjp(fn, spec, index, k, *tensors_and_grad):
    """The gradient of ``fn``'s result (element ``index``) with respect to tensor ``k``, for
    the output gradient (the last argument): torch's autograd through ``fn``."""
    *tensors, grad = tensors_and_grad
    leaves = [t.detach().clone().requires_grad_(i == k) for i, t in enumerate(tensors)]
    with torch.enable_grad():
        args, kwargs = rebuild(spec, leaves)
        result = fn(*args, **kwargs)
        if index is not None:
            result = result[index]
        (g,) = torch.autograd.grad(result, leaves[k], grad, allow_unused=True)
    return torch.zeros_like(leaves[k]) if g is None else g


def _record_vjp(fn, spec, tensors, index, out):
    edges = []
    for k, t in enumerate(tensors):
        if t.dtype.is_float:
            edges.append((t, lambda g, k=k: extern(_vjp, fn, spec, index, k, *tensors, g.to(out.dtype))))
    attach(out, _name(fn), edges)


__all__ = ["extern", "ExternCall", "RANDOM_NAMES"]

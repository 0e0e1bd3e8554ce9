"""Extern nodes: a torch function on lazyfuse tensors, recorded lazily like any other op.

``extern(fn, *args, **kwargs)`` records one ``Op.EXTERN`` node per tensor result. Its shape
and dtype come from running ``fn`` once on torch's ``meta`` device (cached by the call's
signature: the function, its non-tensor arguments, and each tensor's view, dtype and storage
size). At the drain the step calls ``fn`` on torch views of the realized input buffers and
writes the result into a pooled output buffer — through ``out=`` where ``fn`` takes it, else
copied — as the CPU matmul's library call does. It is a fusion boundary (its inputs are
materialized, its result is a buffer the next kernel reads), never a drain; a captured graph
replays it like a kernel launch. The results of one call (``sort``'s values and indices) are
nodes of their own that share their sources; the planner puts them in one step, so torch runs
once for all of them (``ir.planner``, extern siblings).

A result that torch returns as a *view* of an input (``diagonal``, ``unfold``, ``t``,
``split``...; on the meta device its ``_base`` is the input's) is a view here too: a Tensor on
the input's storage with torch's strides and offset, no node and no launch, so in-place writes
through it land in the base and the base's show in it, as in torch.

A function whose result size needs the data (``nonzero``, ``unique``, boolean-mask indexing:
torch's meta device cannot say) runs *eagerly* instead: it drains its inputs, runs, and its
results become new realized tensors. That is refused inside a capture (the value would be
baked into the graph). A function of a random op takes its randomness from lazyfuse's
generator (``lf.manual_seed``): its seed and stream offset are runtime scalars of the node,
so a plan is reused across draws and a captured graph's replays draw fresh numbers.

Gradients are generic: the VJP of each differentiable input is itself an extern that runs
``torch.autograd.grad`` through ``fn`` on the realized inputs.
"""
from __future__ import annotations

import functools
import inspect
import threading
import warnings

import torch

from . import autograd
from .autograd.graph import attach
from .errors import (AutogradError, CaptureError, DTypeError, LazyfuseError, ShapeError, UnsupportedOpError,
                     torch_refusal)
from .ir import dtypes as dt
from .ir.node import Node, Op
from .ir.shapes import contiguous_strides, prod
from .ir.view import View
from .ops import common_device
from .tensor import Tensor, result_tensor

# torch functions that draw random numbers (their extern binds lazyfuse's generator)
RANDOM_NAMES = frozenset({
    "bernoulli", "bernoulli_", "multinomial", "normal", "normal_", "uniform_", "exponential_", "geometric_",
    "cauchy_", "log_normal_", "random_", "poisson", "rand_like", "randn_like", "randint_like", "randperm",
    "rrelu", "rrelu_", "dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d",
    "dropout3d", "native_dropout",
})
# torch functions whose saved statistics (every result after the first) torch's meta kernels type
# float32 for a float16/bfloat16 input — what its CUDA kernels return — where its CPU kernels keep
# the input's dtype: on a device whose buffers torch computes on the CPU, they take the input's
# (the float ones: _batch_norm_with_update's reserve is uint8 on both)
CPU_STATS_IN_INPUT_DTYPE = frozenset({"native_layer_norm", "native_batch_norm", "_native_batch_norm_legit",
                                      "_native_batch_norm_legit_no_training", "_batch_norm_with_update",
                                      "_batch_norm_with_update_functional", "_batch_norm_no_update"})
# torch losses whose CPU kernels give one sample's unreduced loss (``reduction="none"``) 0-d where
# their meta kernels give it shape (1,): name -> (the argument that says it is one sample, its
# position, the most dims it then has). multi_margin_loss: a 0-d target (a 1-d one of size 1 gives
# (1,)); multilabel_margin_loss: a 0-d or 1-d input
CPU_ONE_SAMPLE_LOSS = {"multi_margin_loss": ("target", 1, 0), "multilabel_margin_loss": ("input", 0, 1),
                       "multilabel_margin_loss_forward": ("input", 0, 1)}   # (its aten op: the torch frontend's)
_SLOT = "__slot__"   # a spec's ("__slot__", i): where the i-th tensor argument goes
_SLOTS = tuple((_SLOT, i) for i in range(16))
_PLAIN = frozenset({int, str, type(None), torch.dtype, torch.device, torch.memory_format, torch.layout,
                    type(Ellipsis)})
# floats and bools are tagged in a spec: 2 == 2.0 == True in Python, and a spec is a cache key, but
# torch.pow(int_tensor, 2) is int64 where torch.pow(int_tensor, 2.0) is float32
_TYPED = {float: "__float__", bool: "__bool__"}
_TYPED_TAGS = frozenset(_TYPED.values())


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
    """The ``arg`` of an ``Op.EXTERN`` node: what to call, how to rebuild its arguments, and
    which element of a tuple result the node is (``index``; None: the result itself).

    Hashable and comparable (it is part of the plan key): ``spec`` holds the non-tensor
    arguments as hashable values and a ``("__slot__", i)`` where each tensor goes. ``family``
    is the call without the index: nodes of one family on the same sources are siblings, one
    torch call."""

    __slots__ = ("fn", "spec", "index", "random", "use_out", "name", "family", "bind", "_hash")

    def __init__(self, fn, spec, index, random: bool, use_out: bool, name: str):
        self.fn, self.spec, self.index, self.random, self.use_out, self.name = fn, spec, index, random, use_out, name
        self.family = (fn, spec, random, use_out)
        self.bind = binder(spec)
        self._hash = hash((self.family, index))

    def __eq__(self, other):
        return self is other or (isinstance(other, ExternCall) and self._hash == other._hash and
                                 self.index == other.index and self.family == other.family)

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

    def launch(self, indices, in_views: tuple, out_shapes: tuple) -> "ExternLaunch":
        """The step that runs this call once for the sibling outputs taking ``indices`` (the
        engine's lowering asks the node's arg: the runtime imports nothing above it)."""
        return ExternLaunch(self, indices, in_views, out_shapes)


class ExternLaunch:
    """What an extern step runs: one torch call of ``call``'s family for the outputs it binds
    (``indices``: the tuple element each one takes, None for a plain result), on ``views`` of
    its bound buffers (the inputs', then the outputs')."""

    __slots__ = ("call", "indices", "views", "n_inputs", "name", "random")

    def __init__(self, call: ExternCall, indices: tuple, in_views: tuple, out_shapes: tuple):
        self.call = call
        self.random = call.random
        self.indices = indices
        self.views = in_views + tuple(View.contiguous(s) for s in out_shapes)
        self.n_inputs = len(in_views)
        self.name = call.name

    def thunk(self, tensors, meta):
        """The launch on ``tensors`` (torch views of the bound buffers, by ``views``) as a call to
        make later; a random call reads its seed and stream offset from the step's metadata
        words ``meta.words`` at each run (a graph replay advances the offset there)."""
        call = self.call
        args, kwargs = call.bind(tensors[:self.n_inputs])
        outs = tensors[self.n_inputs:]
        if call.random:
            return functools.partial(_run_random, call.fn, args, kwargs, self.indices, outs, meta)
        if call.use_out:   # the result computed in place: one C call, torch's own
            return functools.partial(call.fn, *args, out=outs[0], **kwargs)
        return functools.partial(_run_copied, call.fn, args, kwargs, self.indices, outs)


def _run_copied(fn, args, kwargs, indices, outs):
    _store(fn(*args, **kwargs), indices, outs)


def _run_random(fn, args, kwargs, indices, outs, meta):
    seed_words = meta.words
    device = outs[0].device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(_mix(int(seed_words[0]), int(seed_words[1])))
        result = fn(*args, **kwargs)
    _store(result, indices, outs)


def _store(result, indices, outs):
    if indices is None:
        outs[0].copy_(result)
    else:
        for k, out in zip(indices, outs):
            out.copy_(result[k])


def _mix(seed: int, offset: int) -> int:
    """One torch seed per (lazyfuse seed, stream offset): distinct draws get distinct streams."""
    return (seed * 0x9E3779B97F4A7C15 + offset * 0xBF58476D1CE4E5B9) & ((1 << 63) - 1)


# -- argument trees -----------------------------------------------------------------------------
def flatten(args, kwargs):
    """(spec, tensors): the call's arguments with each lazyfuse Tensor replaced by a slot, lists
    and tuples tagged, and any other object that is not a plain value held as an ``_Opaque``
    (compared by identity), so a spec always hashes."""
    tensors = []
    spec_args = []
    for a in args:   # (the top level inline: most arguments are tensors and plain values)
        kind = type(a)
        if kind is Tensor:
            spec_args.append(_SLOTS[len(tensors)] if len(tensors) < len(_SLOTS) else (_SLOT, len(tensors)))
            tensors.append(a)
        elif kind in _PLAIN:
            spec_args.append(a)
        elif kind is float or kind is bool:
            spec_args.append((_TYPED[kind], a))
        else:
            spec_args.append(_spec_of(a, tensors))
    spec_args = tuple(spec_args)
    return (spec_args, tuple([(k, _spec_of(kwargs[k], tensors)) for k in sorted(kwargs)]) if kwargs else ()), tensors


# (module-level, not closures: a recursive closure is a reference cycle, which would keep the
# arguments, and so their buffers, alive until the garbage collector runs)
def _spec_of(a, tensors: list):
    kind = type(a)
    if kind is Tensor or isinstance(a, Tensor):
        tensors.append(a)
        return (_SLOT, len(tensors) - 1)
    if kind in _PLAIN:
        return a
    if kind is float or kind is bool:
        return (_TYPED[kind], a)
    if kind is list or kind is tuple or isinstance(a, (list, tuple)):
        items = tuple([_spec_of(x, tensors) for x in a])
        return ("__list__", items) if isinstance(a, list) else ("__tuple__", items)
    if isinstance(a, dt.DType):
        return a.torch
    if isinstance(a, bool):   # (subclasses: numpy's bool is not one, an IntEnum is an int)
        return (_TYPED[bool], bool(a))
    if isinstance(a, float):
        return (_TYPED[float], float(a))
    if isinstance(a, (int, str)):
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
    return [_value_of(a, tensors) for a in args], {k: _value_of(v, tensors) for k, v in kwargs}


def _value_of(a, tensors):
    if isinstance(a, tuple):   # (below the top level, every tuple of a spec is a tag)
        if a[0] == _SLOT:
            return tensors[a[1]]
        if a[0] in _TYPED_TAGS:
            return a[1]
        items = [_value_of(x, tensors) for x in a[1]]
        return items if a[0] == "__list__" else slice(*items) if a[0] == "__slice__" else tuple(items)
    if isinstance(a, _Opaque):
        return a.value
    return a


def binder(spec):
    """``rebuild`` for one spec, as a function of the tensors, compiled once: where every tensor
    sits at the top level of the positional arguments (``cumsum(x, 1)``), the arguments are a
    template with the tensors put in place, no tree walk per launch."""
    args, kwargs = spec
    slot = lambda a: isinstance(a, tuple) and a[0] == _SLOT  # noqa: E731
    constant = lambda a: not isinstance(a, tuple) or a[0] in _TYPED_TAGS  # noqa: E731
    if not all(slot(a) or constant(a) for a in args) or not all(constant(v) for _, v in kwargs):
        return functools.partial(rebuild, spec)   # tensors nested in lists: walk the tree
    template = [None if slot(a) else _value_of(a, ()) for a in args]
    slots = [(p, a[1]) for p, a in enumerate(args) if slot(a)]
    fixed = {k: _value_of(v, ()) for k, v in kwargs}

    def bind(tensors):
        values = template.copy()
        for p, i in slots:
            values[p] = tensors[i]
        return values, fixed
    return bind


# -- shape inference on torch's meta device -------------------------------------------------------
class NeedsData(Exception):
    """The result's size (or its being a tensor at all) depends on the data: run eagerly."""


class Recipe:
    """What one call signature records, from torch's meta device: the result's ``structure``
    (None: one tensor, else its tuple type), and per result either an ExternCall node
    (``calls[k]``, with ``outs[k]`` its (shape, lazyfuse dtype)) or, where torch returns a view
    of input ``i``, ``views[k] = (i, View)`` in that input's storage."""

    __slots__ = ("structure", "outs", "calls", "views", "name", "single")

    def __init__(self, structure, outs, calls, views, name):
        self.structure, self.outs, self.calls, self.views, self.name = structure, outs, calls, views, name
        # the call of a one-tensor result that is a value and draws no random numbers (the
        # recording's fast path: its sources are just the tensors as they read their storages)
        self.single = calls[0] if structure is None and calls[0] is not None and not calls[0].random else None


_recipes: dict = {}   # (fn, spec, inputs, device kind) -> Recipe, or NEEDS_DATA
_RECIPES_MAX = 8192
NEEDS_DATA = object()
_meta_lock = threading.Lock()


def recipe(fn, spec, inputs: tuple, device_kind: str):
    """The Recipe of a call (``inputs``: (view, dtype, storage shape) of each tensor), or
    NEEDS_DATA; cached by signature, so torch's meta kernel runs once per signature."""
    key = (fn, spec, inputs, device_kind)
    found = _recipes.get(key)
    if found is not None:
        return found
    with _meta_lock:
        try:
            found = _describe(fn, spec, inputs, device_kind)
        except NeedsData:
            found = NEEDS_DATA
        if len(_recipes) >= _RECIPES_MAX:
            _recipes.clear()
        _recipes[key] = found
    return found


def _describe(fn, spec, inputs, device_kind) -> Recipe:
    name = _name(fn)
    # each input a view of a meta storage of its own storage's size, so a result that is a view
    # has torch's strides and offset in the index space of the lazyfuse storage
    bases = [torch.empty(_numel(storage_shape), dtype=dtype.torch, device="meta") for _, dtype, storage_shape in inputs]
    metas = [b.as_strided(v.shape, v.strides, v.offset) for b, (v, _, _) in zip(bases, inputs)]
    args, kwargs = rebuild(spec, metas)
    versions = [m._version for m in metas]
    try:
        result = fn(*args, **kwargs)
    except NotImplementedError as e:
        raise NeedsData(str(e)) from None
    except Exception as e:  # noqa: BLE001 (torch's own validation of the arguments)
        text = str(e)
        if "meta" in text.lower() or "data-dependent" in text or "data dependent" in text:
            raise NeedsData(text) from None
        raise torch_refusal(name, e) from None
    if isinstance(result, torch.Tensor):
        results, structure = (result,), None
    elif isinstance(result, (tuple, list)) and result and all(isinstance(r, torch.Tensor) for r in result):
        results, structure = tuple(result), type(result)
    else:
        raise NeedsData(f"returns {type(result).__name__}")
    outs, views = [], []
    for r in results:
        outs.append(_described(name, r))
        views.append(_aliased(r, metas, bases, inputs))
        if views[-1] is not None and metas[views[-1][0]]._version != versions[views[-1][0]]:
            # an in-place function returning its input: as a view it would never launch, and the
            # write would silently not happen
            raise UnsupportedOpError(f"lf.extern({name}): the function writes its input in place and returns it; "
                                     "an extern must not write its inputs: pass its out-of-place form, or write "
                                     "back with x.copy_(lf.extern(out_of_place_fn, x, ...))")
    # (an aten overload, as the torch frontend passes one, by its op's name: multi_margin_loss, not
    # multi_margin_loss.default)
    fname = getattr(fn, "_opname", None) or getattr(fn, "__name__", "")
    if device_kind != "cuda" and fname in CPU_STATS_IN_INPUT_DTYPE:
        if inputs[0][1].name in ("float16", "bfloat16"):
            outs[1:] = [(shape, inputs[0][1] if dtype.is_float else dtype) for shape, dtype in outs[1:]]
        if _cpu_stats_empty(fname, args, kwargs):
            outs[1:] = [((0,), dtype) for _, dtype in outs[1:]]
    if device_kind != "cuda" and fname in CPU_ONE_SAMPLE_LOSS and _one_sample(fname, args, kwargs):
        outs[0] = ((), outs[0][1])   # (with a reduction the meta result is 0-d already)
    random = fname in RANDOM_NAMES
    use_out = structure is None and not random and views[0] is None and _takes_out(fn, args, kwargs, results[0])
    calls = [None if v is not None else ExternCall(fn, spec, None if structure is None else k, random, use_out, name)
             for k, v in enumerate(views)]
    return Recipe(structure, tuple(outs), tuple(calls), tuple(views), name)


def _one_sample(fname, args, kwargs) -> bool:
    """Whether CPU_ONE_SAMPLE_LOSS's ``fname`` is called on one sample (its CPU result is 0-d)."""
    name, at, most_dims = CPU_ONE_SAMPLE_LOSS[fname]
    arg = args[at] if len(args) > at else kwargs[name]
    return arg.ndim <= most_dims


def _cpu_stats_empty(fname, args, kwargs) -> bool:
    """Whether torch's CPU batch norm returns empty (0,) saved statistics for this call, where
    its meta kernel says (C,): in eval mode (``training=False``), which saves nothing."""
    if fname in ("_native_batch_norm_legit_no_training", "_batch_norm_no_update"):
        return True
    if fname not in ("native_batch_norm", "_native_batch_norm_legit"):
        return False
    if "training" in kwargs:
        return not kwargs["training"]
    # (input, weight, bias, training, ...) without running statistics, else (..., running_var, training, ...)
    at = 3 if len(args) > 3 and isinstance(args[3], bool) else 5
    return len(args) > at and not args[at]


def _described(name, r) -> tuple:
    """(shape, lazyfuse dtype) of meta result ``r``, or the error for one lazyfuse cannot hold."""
    if r.layout != torch.strided:
        raise UnsupportedOpError(f"{name}: its result has layout {r.layout}; lazyfuse tensors are dense and "
                                 "strided (sparse and other layouts are not supported)")
    if r.is_complex():
        raise DTypeError(f"{name}: complex results are not supported by lazyfuse (its dtypes are "
                         f"{dt.NAMES})")
    try:
        dtype = dt.from_torch(r.dtype)
    except LazyfuseError:
        raise DTypeError(f"{name}: its result dtype {r.dtype} has no lazyfuse dtype ({dt.NAMES})") from None
    if any(not isinstance(s, int) for s in r.shape):
        raise NeedsData("symbolic size")
    return tuple(r.shape), dtype


def _aliased(r, metas, bases, inputs):
    """(input index, View) when meta result ``r`` is a view of an input's storage in its dtype
    (torch's ``_base`` is that input's), else None: a value."""
    for i, (m, b) in enumerate(zip(metas, bases)):
        if (r is m or r._base is b) and r.dtype == m.dtype:
            return i, View(tuple(r.shape), tuple(r.stride()), r.storage_offset())
    return None


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
# (fn, device, argument signature) -> (Recipe or NEEDS_DATA, spec): the recording's fast path for
# calls whose arguments are tensors and plain values at the top level (``cumsum(x, 1)``), which
# skips building the spec and the recipe's key anew at each call
_by_signature: dict = {}


def _top_level_signature(fn, args):
    """``(key, tensors, device)`` of a call whose positional arguments are lazyfuse Tensors and
    plain values only, or None (nested or other arguments: the spec's walk). The key holds each
    tensor as (view, dtype, storage shape) — a 3-tuple — and each value as the spec does (floats
    and bools tagged, 2-tuples): no value of one kind equals one of the other."""
    key = [fn]
    tensors = []
    dev = None
    for a in args:
        kind = type(a)
        if kind is Tensor:
            st = a._storage
            key.append((a._view, st.dtype, st.shape))
            tensors.append(a)
            if dev is None:
                dev = a.device
            elif a.device is not dev:
                return None   # (the spec's path raises the mixed-devices error)
        elif kind in _PLAIN:
            key.append(a)
        elif kind is float or kind is bool:
            key.append((_TYPED[kind], a))
        else:
            return None
    if dev is None:
        return None
    key.append(dev)
    return tuple(key), tensors, dev


def extern(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` for any torch function, on lazyfuse tensors, recorded lazily.

    Each lazyfuse Tensor among the arguments (nested in lists and tuples too) is passed to
    ``fn`` as a torch tensor holding its value; results come back as lazyfuse Tensors (a tuple
    of them for a tuple result), views of an input where torch's are. The call runs at the
    next drain that needs a result, as one launch between kernels (``lf.stats().extern_launches``);
    ``fn`` must not write its inputs. Functions whose result size depends on the data run at
    once instead (a drain). ``out=`` (lazyfuse Tensors) takes the result as torch's does."""
    if kwargs.get("out") is not None:
        return _into_out(fn, args, kwargs)
    chosen = None
    if "generator" in kwargs:   # lazyfuse's stream replaces torch's generator (see _sources)
        kwargs = dict(kwargs)
        chosen = kwargs.pop("generator")
    signature = None if kwargs else _top_level_signature(fn, args)
    known = _by_signature.get(signature[0]) if signature is not None else None
    if known is not None:
        (found, spec), tensors, dev = known, signature[1], signature[2]
    else:
        spec, tensors = flatten(args, kwargs)
        if not tensors:
            raise DTypeError(f"lf.extern({_name(fn)}): pass at least one lazyfuse Tensor argument "
                             "(factories: use the lazyfuse ones, or lf.tensor(torch_result))")
        dev = common_device(tensors)
        found = recipe(fn, spec, tuple([(t._view, t._storage.dtype, t._storage.shape) for t in tensors]), dev.kind)
        if signature is not None:
            if len(_by_signature) >= _RECIPES_MAX:
                _by_signature.clear()
            _by_signature[signature[0]] = (found, spec)
    if found is NEEDS_DATA:
        result = run_eagerly(fn, spec, tensors, dev, _name(fn))
        if _any_requires_grad(tensors) and autograd.is_grad_enabled():   # x[mask], masked_select
            for index, out in ([(None, result)] if isinstance(result, Tensor) else enumerate(result)):
                if isinstance(out, Tensor):
                    _record_vjp(fn, spec, tensors, index, out)
        return result
    grad = _any_requires_grad(tensors) and autograd.is_grad_enabled()
    single = found.single
    if single is not None and not grad:   # the common case, inline: one result, a value
        shape, dtype = found.outs[0]
        return result_tensor(dev, Node(Op.EXTERN, tuple([t._read() for t in tensors]), dtype, shape, single))
    srcs = None
    results = []
    for call, (shape, dtype), view in zip(found.calls, found.outs, found.views):
        if view is not None:
            out = Tensor(tensors[view[0]]._storage, view[1], dev)
        else:
            if srcs is None:   # one tuple for all the call's nodes: the planner's sign of siblings
                srcs = _sources(tensors, call.random, found.outs, dev, chosen, _name(fn))
            out = result_tensor(dev, Node(Op.EXTERN, srcs, dtype, shape, call))
        if grad:
            _record_vjp(fn, spec, tensors, None if found.structure is None else len(results), out)
        results.append(out)
    if found.structure is None:
        return results[0]
    return _restructure(found.structure, results)


def _into_out(fn, args, kwargs):
    """``fn(..., out=t)``: the result as a new value, then written into ``t`` and ``t`` returned.
    Handed to torch, ``out`` would be an input the call writes: its meta run returns ``out`` itself,
    a view of an input, so nothing would launch and ``t`` would keep its old value."""
    kwargs = dict(kwargs)
    out = kwargs.pop("out")
    spec, tensors = flatten(args, kwargs)
    if pointwise(_name(fn)):
        refuse_overlap(_name(fn), out, tensors, same_place_ok=True)
    _torch_takes_out(fn, spec, tensors, out)
    if isinstance(out, Tensor) and isinstance(result_dtype := _meta_dtype(fn, spec, tensors), torch.dtype) \
            and result_dtype is not out.dtype.torch:
        # torch computes in out's dtype where it differs (cumsum into an int64 out sums integers)
        result = extern(_computing_in(fn, out.dtype.torch), *args, **kwargs)
        if not out.device.capturing:
            # computed before it is written: a CPU kernel may refuse an out dtype its meta kernel
            # took (multinomial's must be int64), and a refusal at a later drain would leave ``out``
            # a failed value, where torch's leaves it untouched
            result.device.engine.sync("out= of another dtype")
        return write_out(_name(fn), result, out, casts="any")
    return write_out(_name(fn), extern(fn, *args, **kwargs), out, casts="any")


def _meta_like(tensors) -> list:
    """Empty meta tensors of ``tensors``' shapes and dtypes: what torch's meta kernels are asked with."""
    return [torch.empty(t.shape, dtype=t.dtype.torch, device="meta") for t in tensors]


def _meta_dtype(fn, spec, tensors):
    """The dtype of ``fn``'s (single) result on the meta device (its arguments ``flatten``ed to
    ``spec`` and ``tensors``), or None."""
    margs, mkwargs = rebuild(spec, _meta_like(tensors))
    try:
        r = fn(*margs, **mkwargs)
    except Exception:  # noqa: BLE001 (no meta kernel, or a refusal the call itself reports)
        return None
    return r.dtype if isinstance(r, torch.Tensor) else None


def _first_tensor(values):
    """The first torch tensor among ``values`` (nested in lists and tuples too), or None."""
    for v in values:
        found = v if isinstance(v, torch.Tensor) else _first_tensor(v) if isinstance(v, (list, tuple)) else None
        if found is not None:
            return found
    return None


@functools.lru_cache(maxsize=256)
def _computing_in(fn, dtype):
    """``fn`` returning its result computed into an ``out=`` of ``dtype`` (one function per pair, so
    an extern's recipe is cached as any other's)."""
    def call(*args, **kwargs):
        out = torch.empty(0, dtype=dtype, device=_first_tensor((*args, *kwargs.values())).device)
        fn(*args, **kwargs, out=out)
        return out
    call.__name__ = getattr(fn, "__name__", "fn")
    return call


def _torch_takes_out(fn, spec, tensors, out) -> None:
    """Refuse, as torch, an ``out=`` whose dtype ``fn`` does not cast its result to (each function
    has its rule: cumsum casts to any dtype, max(dim) to none): ``fn`` run on the meta device with
    ``out`` there (torch's own resize warning silenced: write_out gives it)."""
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if not all(isinstance(o, Tensor) for o in outs):
        return   # (write_out names the bad argument)
    meta = _meta_like((*tensors, *outs))
    margs, mkwargs = rebuild(spec, meta[:len(tensors)])
    mout = meta[len(tensors):] if isinstance(out, (tuple, list)) else meta[-1]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            fn(*margs, **mkwargs, out=mout)
    except NotImplementedError:
        return   # (no meta kernel: write_out's casting rule stands)
    except Exception as e:  # noqa: BLE001 (torch's refusal of this out=)
        raise torch_refusal(_name(fn), e) from None


def write_out(name, result, out, casts="can_cast"):
    """``out`` (a Tensor, or a tuple of them for a tuple ``result``) written with ``result`` in
    program order and returned, as torch's ``out=``: an ``out`` of another shape is resized (a
    UserWarning, as torch's, when it had elements), and the result is cast to its dtype where
    ``casts`` allows: "can_cast" (torch.can_cast, the rule of torch's elementwise ops and cat),
    "exact" (index_select, take, gather: the same dtype) or "any" (an extern: torch was asked). As
    torch, refused where the result requires grad (autograd does not differentiate through out=)."""
    results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    if len(outs) != len(results) or not all(isinstance(o, Tensor) for o in outs):
        wanted = "a lazyfuse Tensor" if len(results) == 1 else f"{len(results)} lazyfuse Tensors"
        raise DTypeError(f"{name}: out= must be {wanted} (the result's), got {type(out).__name__}")
    if autograd.is_grad_enabled() and _any_requires_grad(results):
        raise AutogradError(f"{name}(): functions with out=... arguments don't support automatic differentiation, "
                            "but one of the arguments requires grad (as torch); drop out= and use the result, or "
                            "call it under lf.no_grad()")
    for o, r in zip(outs, results):
        _check_cast(name, r.dtype, o.dtype, casts)
        if tuple(o.shape) != tuple(r.shape) and not _fits_in_place(o, r.shape) and not _is_whole(o):
            raise ShapeError(f"{name}: out= is a view of shape {tuple(o.shape)} at offset {o._view.offset} of a storage "
                             f"of {prod(o._storage.shape)} elements, too small for the result {tuple(r.shape)} from "
                             "there; torch would grow its base's storage, lazyfuse cannot (other tensors view it): "
                             "pass a whole tensor, or a view of the result's shape or with room for it")
    for o, r in zip(outs, results):
        if tuple(o.shape) != tuple(r.shape):
            _resize(name, o, r.shape)
        o.copy_(r)
    return out


def refuse_overlap(name, out, inputs, *, same_place_ok: bool) -> None:
    """Refuse, as torch's ``out=``, an ``out`` whose memory overlaps an input's: in part, or wholly where
    ``same_place_ok`` is false (cat and stack; an elementwise op may write an input, each element where
    it was read: the same elements in the same layout). Values would be right here (the result is
    computed before it is written); the refusal is torch's. As torch's ``assert_no_partial_overlap``,
    only dense views are compared (its overlap test gives up on the others), by their storage's
    element ranges: disjoint views of one storage are fine."""
    span = _dense_span(out) if isinstance(out, Tensor) else None
    for t in inputs:
        # (the input itself as out: refused as torch's, even empty, as cat's legacy empty piece)
        if not (t is out and not same_place_ok):
            if span is None or not isinstance(t, Tensor) or t._storage is not out._storage:
                continue
            other = _dense_span(t)
            if other is None or other[0] >= span[1] or span[0] >= other[1]:
                continue
            if same_place_ok and other == span and t._view.strides == out._view.strides:
                continue
        raise ShapeError("unsupported operation: some elements of the input tensor and the written-to tensor refer to "
                         "a single memory location. Please clone() the tensor before performing the operation. "
                         f"({name}: out= overlaps part of an input's memory; pass a new tensor as out)")


@functools.lru_cache(maxsize=None)
def pointwise(name: str) -> bool:
    """Whether torch's op ``name`` (``fmod``, ``torch.fmod``) is pointwise (an aten overload of it
    tagged so): torch's TensorIterator runs it, which refuses an ``out=`` that partly overlaps an
    input (``refuse_overlap``); a reduction's, a matmul's out= it does not check."""
    packet = getattr(torch.ops.aten, name.rsplit(".", 1)[-1], None)
    if not isinstance(packet, torch._ops.OpOverloadPacket):
        return False
    return any(torch.Tag.pointwise in getattr(packet, o).tags for o in packet.overloads())


def _dense_span(t):
    """(first, end) of the storage elements ``t`` views where it views each of them once and no
    other (dense in some dim order), else None (an empty, strided or expanded view)."""
    v = t._view
    if not v.numel:
        return None
    expected = 1
    for stride, size in sorted((st, n) for st, n in zip(v.strides, v.shape) if n > 1):
        if stride != expected:
            return None
        expected *= size
    return v.offset, v.offset + v.numel


def _torch_type_name(dtype) -> str:
    """torch's name of a dtype in its messages: ``Float``, ``Long``, ``BFloat16``."""
    return torch.empty((), dtype=dtype.torch).type().rsplit(".", 1)[-1].replace("Tensor", "")


def _check_cast(name, result_dtype, out_dtype, casts) -> None:
    if out_dtype is result_dtype or casts == "any":
        return
    if casts == "exact":
        raise DTypeError(f"{name}: out= has dtype {out_dtype}, the result {result_dtype}; pass an out of the "
                         "result's dtype (as torch, this op does not cast into out)")
    if not torch.can_cast(result_dtype.torch, out_dtype.torch):
        raise DTypeError(f"{name}: result type {_torch_type_name(result_dtype)} can't be cast to the desired output "
                         f"type {_torch_type_name(out_dtype)} (as torch); pass an out of dtype {result_dtype} or wider")


def _is_whole(t) -> bool:
    """Whether ``t`` views its whole storage densely (not a slice, an expand or a permute of it)."""
    v, st = t._view, t._storage
    return v.shape == st.shape and v.offset == 0 and v.strides == st.view.strides


def _fits_in_place(t, shape) -> bool:
    """Whether ``shape``, laid out contiguously from ``t``'s offset, fits in ``t``'s storage (torch's
    resize of an out= keeps the storage and the offset, and takes contiguous strides)."""
    return t._view.offset + prod(shape) <= prod(t._storage.shape)


def _resize(name, out, shape) -> None:
    """``out`` resized to ``shape`` as torch's resize of an out=: within its storage, contiguous from
    its offset, where that fits (a view's base sees the result there, as torch's), else (a whole
    tensor) rebound to a new storage, which views taken of it earlier do not share."""
    from .creation import empty
    if out.numel():
        warnings.warn(f"{name}: an output with one or more elements was resized since it had shape "
                      f"{list(out.shape)}, which does not match the required output shape {list(shape)} (as torch, "
                      "which deprecates it); resize it to zero elements first to reuse it silently", UserWarning,
                      stacklevel=4)
    if _fits_in_place(out, shape):
        out._view = View(tuple(shape), contiguous_strides(shape), out._view.offset)
        return
    fresh = empty(shape, dtype=out.dtype, device=out.device)
    out._storage, out._view = fresh._storage, fresh._view


def _any_requires_grad(tensors) -> bool:
    """``autograd.recording``'s test without its generator (this runs once per extern)."""
    for t in tensors:
        if t._ag is not None and t._ag.requires_grad:
            return True
    return False


def _sources(tensors, random: bool, outs, dev, chosen, name: str) -> tuple:
    """The node's sources: each tensor argument as it reads its storage (the strided view, no
    copy: the call reads the view; a whole storage is read as its node, no view node to record),
    then, for a random call, its seed and stream offset (from ``chosen``, a ``generator=``
    argument, else the default generator)."""
    srcs = [t._read() for t in tensors]
    if random:
        from .creation import generator_for
        from .ops import scalar_node
        seed, offset = generator_for(dev, chosen, name).take(max(1, sum(_numel(s) for s, _ in outs)))
        srcs += [scalar_node(seed, dt.int64), scalar_node(offset, dt.int64)]
    return tuple(srcs)


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
    try:
        result = fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (torch's validation of arguments its meta kernel could not check)
        raise torch_refusal(name, e) from None
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
        if not result.requires_grad:   # this result does not depend on tensor k (meshgrid's first on y)
            return torch.zeros_like(leaves[k])
        (g,) = torch.autograd.grad(result, leaves[k], grad, allow_unused=True)
    return torch.zeros_like(leaves[k]) if g is None else g


def _record_vjp(fn, spec, tensors, index, out):
    # the vjps hold ``out``'s dtype, not ``out``: ``out`` holds them (its GradFn), and that cycle
    # kept a dropped result alive until Python's cyclic GC, so the next drain still ran it (and
    # raised its refusal, a float ``x << 1``, at an unrelated read)
    dtype = out.dtype
    edges = []
    for k, t in enumerate(tensors):
        if t.dtype.is_float:
            edges.append((t, lambda g, k=k: extern(_vjp, fn, spec, index, k, *tensors, g.to(dtype))))
    attach(out, _name(fn), edges)


__all__ = ["extern", "ExternCall", "ExternLaunch", "RANDOM_NAMES"]

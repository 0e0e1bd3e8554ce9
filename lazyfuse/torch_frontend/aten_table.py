"""The per-aten-op table: how each aten op reaching ``LazyTensor.__torch_dispatch__`` records on
lazyfuse.

Resolution of an op (once per overload, then cached):
1. a *native* handler here (keyed by the op's name): it gets the lazyfuse Tensors and records
   lazyfuse ops. An in-place op (``add_``) or an ``out=`` variant with no handler of its own is
   its functional op followed by ``copy_`` into the target, which lazyfuse records in program
   order (docs/semantics.md, Views and in-place writes): torch's eager order, views included.
2. ``_foreach_*`` ops: the op per list element (``torch.optim``'s foreach updates).
3. torch's own decomposition of the op (``torch._decomp``), when it has one: the smaller aten
   ops it calls come back through here.
4. else ``fallback.run``: an extern node (``lf.extern``: lazy, a fusion boundary, capturable), or, where
   the result size needs the data or a random op draws from torch's generator, a drain.

Arguments: frontend tensors become their lazyfuse Tensors. A plain CPU torch tensor mixed in is
*uploaded* (torch code makes them: ``torch.arange(t, device=x.device)``, indices of ``x[:, [1]]``,
``torch.tensor`` constants) — a 0-d one becomes a Python number, as torch treats a CPU scalar
beside a GPU tensor — and counted per line in the report; one that requires grad (its gradient
would be lost) or lives on another device raises.
"""
from __future__ import annotations

import math
import warnings

import torch
from torch.utils._pytree import tree_map

from .. import ops as lf_ops
from .. import random_draws
from ..creation import arange, empty, full
from ..errors import DeviceError, DTypeError, LazyfuseError, ShapeError, torch_refusal
from ..functions import cat, stack, where
from ..indexing import index_select
from ..ir import dtypes as dt
from ..ir.node import Op
from ..ir.view import View
from ..nn import functional as F
from ..nn import losses
from ..tensor import Tensor as LfTensor
from ..torch_index import addmm, baddbmm, dot, index_add
from ..torch_ops import addcdiv, addcmul, lerp, masked_fill, t
from . import drains
from . import fallback
from . import templates
from .tensor import LazyTensor, element_run, from_lf, lf_device_of

aten = torch.ops.aten
NATIVE = {}     # aten op name (no overload) -> handler(*lazyfuse args, **kwargs)
RAW = {}        # aten op name -> handler(func, args, kwargs) on the LazyTensor arguments themselves
NAMESPACES = {}  # another op namespace (c10d: lazyfuse.distributed registers it) -> resolve(func) -> handler


def native(*names):
    def register(fn):
        for n in names:
            NATIVE[n] = fn
        return fn
    return register


def raw(*names):
    def register(fn):
        for n in names:
            RAW[n] = fn
        return fn
    return register


class MixedTensorError(LazyfuseError):
    """A plain torch tensor in an op with frontend tensors that cannot be moved in implicitly. (Not a
    TypeError: torch turns a TypeError raised in an operator into NotImplemented, hiding the message.)"""


# -- argument conversion ---------------------------------------------------------------------------
def _upload(t: torch.Tensor, device, func):
    if t.requires_grad:
        raise MixedTensorError(
            f"{func}: a plain torch tensor that requires grad is mixed with lazyfuse frontend tensors; its "
            "gradient would be lost. Convert it with lf.lazy(t) first (or detach it)")
    if t.device.type != "cpu" and t.device != device.torch_device:
        raise DeviceError(f"{func}: a plain torch tensor on {t.device} is mixed with lazyfuse frontend tensors on "
                          f"{device.name}; move it with lf.lazy(t, device={device.name!r})")
    if t.dim() == 0:
        return t.item()   # a CPU scalar, as torch treats one beside a GPU tensor
    drains.counters.drains[("implicit upload of a plain tensor", drains.user_line())] += 1
    small = t.numel() * t.element_size() <= SMALL_UPLOAD
    if small:
        key = (device, t.dtype, tuple(t.shape))
        kept = _uploads.get(key)
        if kept is not None and torch.equal(kept[0], t):
            return kept[1]
    from ..creation import tensor
    uploaded = tensor(t, device=device)
    if small:
        if len(_uploads) >= UPLOADS_KEPT:
            del _uploads[next(iter(_uploads))]
        _uploads[key] = (t.detach().clone(), uploaded)
    return uploaded


# The last upload of each small plain tensor's dtype and shape, per device, with a copy of its value: a
# plain tensor equal to it is the same upload (torch code makes the same ones every step: nanoGPT's
# ``torch.arange`` positions, forward and backward; uploading costs ~35 us, comparing ~2 us). Safe to
# share: the upload is a private realized leaf, an argument of native handlers, which never write their
# arguments nor return a view of a plain one (a view op with no frontend tensor never reaches the frontend).
SMALL_UPLOAD = 1 << 16   # bytes
UPLOADS_KEPT = 64
_uploads: dict = {}


_PLAIN = (float, int, bool, type(None))   # arguments passed through as they are (the common ones)


def _unwrap(a, device, func):
    if type(a) is LazyTensor:
        return a._lf
    if isinstance(a, torch.Tensor):
        return _upload(a, device, func)
    if type(a) in (list, tuple):
        return [_unwrap(x, device, func) for x in a]
    return a


def _wrap(out):
    if out.__class__ is LfTensor:
        return from_lf(out)
    if isinstance(out, (tuple, list)):
        return type(out)(_wrap(o) for o in out) if not hasattr(out, "_fields") else tuple(_wrap(o) for o in out)
    return out


# -- dispatch: LazyTensor.__torch_dispatch__ runs LazyTensor._runners[func], made once by _resolve ----------
def _name(func) -> str:
    return func._schema.name.split("::", 1)[1]


def _resolve(func):
    if func.namespace in NAMESPACES:
        return NAMESPACES[func.namespace](func)
    name = _name(func)
    if name in RAW:
        return RAW[name]
    if name in NATIVE and any(a.is_out for a in func._schema.arguments):   # add.out, max.dim_max
        return _out_runner(NATIVE[name], str(func))
    if name in NATIVE:
        return _functional_runner(NATIVE[name], str(func))
    base = name[:-1] if name.endswith("_") else None
    if base is not None and base in NATIVE and func._schema.arguments and \
            func._schema.arguments[0].alias_info is not None:
        return _inplace_runner(NATIVE[base], str(func))
    if name.startswith("_foreach_"):
        return _foreach_runner(name[len("_foreach_"):])
    decomp = torch._decomp.decomposition_table.get(func)
    if decomp is not None and name not in NOT_DECOMPOSED:
        label = str(func)
        out_names = [a.name for a in func._schema.arguments if a.is_out]
        checked = name in CHECKED_ON_META or bool(out_names)

        def run_decomposed(func, args, kwargs):
            if checked:
                _check_on_meta(func, args, kwargs)
            if out_names:
                # (torch's out_wrapper would cast into them and resize them with resize_, which a
                # frontend tensor with elements refuses: the results first, then written as torch's
                # out= kernels write, _write_into/_into_outs)
                results = decomp(*args, **{k: v for k, v in kwargs.items() if k not in out_names})
                drains.counters.decomposed[label] += 1
                if len(out_names) == 1:
                    return _write_into(kwargs[out_names[0]], results._lf, func, out=True)
                return _into_outs([kwargs[n] for n in out_names], [r._lf for r in results], func)
            out = decomp(*args, **kwargs)
            if out is NotImplemented:
                # (the decomposition covers only some arguments: adaptive_max_pool2d's evenly
                # divisible sizes; torch's kernel takes the rest)
                return _fallback(func, args, kwargs)
            drains.counters.decomposed[label] += 1
            return out
        return run_decomposed
    return _fallback


# Decomposed ops whose decomposition skips the argument checks of torch's kernel (a reflection pad
# of at least the input's size read out of range; max_pool2d took a padding of three numbers;
# adaptive_max_pool2d unpacked an empty output_size, a ValueError where torch raises RuntimeError):
# torch's meta kernel makes those checks, so each call runs it first.
CHECKED_ON_META = {"reflection_pad1d", "reflection_pad2d", "reflection_pad3d",
                   "replication_pad1d", "replication_pad2d", "replication_pad3d",
                   "max_pool2d_with_indices", "max_pool3d_with_indices",
                   "adaptive_max_pool2d", "adaptive_max_pool3d"}   # (an empty output_size: ValueError)
# Ops whose decomposition gives other values than torch's kernel: they run torch's kernel, as an
# extern. torch's float16 linspace steps in float16 (2.6e-3 from float64 at 4.3 -> -3 in 50 steps,
# the decomposition 1.9e-3: more than the float16 tolerance apart); torch interpolates a uint8 image
# with its own fixed-point weights, the decomposition in float rounded once (17% of a uint8 bilinear
# resize off by one), and a float32 one (2, 3, 345, 456) -> (270, 270) with float32 weights computed
# otherwise (1.7e-5 relative apart, as far from float64 as torch's kernel but not the same values).
# grid_sampler_2d's, on a (2, 3, 345, 456) float32 image, is 1.3e-3 from float64 where torch's kernel is
# 0.9e-3 (2.2e-3 apart). multilabel_margin_loss's decomposition of a 1-d input is wrong on plain torch
# tensors too (2.12 where the kernel gives 0.68), and multi_margin_loss's gives one 0-d sample's
# unreduced loss shape (1,), where torch's CPU kernel gives () (extern.CPU_ONE_SAMPLE_LOSS).
NOT_DECOMPOSED = {"linspace", "logspace", "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d",
                  "upsample_bicubic2d", "grid_sampler_2d", "multilabel_margin_loss_forward", "multi_margin_loss"}


def _check_on_meta(func, args, kwargs):
    """Run ``func`` on meta tensors of the arguments' shapes, strides and dtypes: torch's argument checks."""
    def meta(a):
        if isinstance(a, torch.Tensor):
            return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
        return a
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # (torch's own, such as an out= resize's: the real call warns)
            func(*tree_map(meta, args), **tree_map(meta, kwargs))
    except NotImplementedError:
        pass   # (no meta kernel: nothing to check against)
    except Exception as e:  # noqa: BLE001 (torch's own validation of the arguments)
        raise torch_refusal(str(func), e) from None


LazyTensor._resolve = staticmethod(_resolve)   # (installed here: this module imports LazyTensor)


def _fallback(func, args, kwargs):
    return fallback.run(func, args, kwargs, lf_device_of(list(args) + list(kwargs.values())))


def _functional_runner(fn, label):
    """Run a native handler on the lazyfuse Tensors of ``args``. The common call -- positional
    frontend tensors, Python numbers and lists of sizes, no keywords -- converts each argument with one
    type test; anything else (lists of tensors, plain torch tensors, keywords) takes the general
    conversion. Either way the handler may be made again from a template (``templates``)."""
    counts = drains.counters.native
    call = templates.call   # the handler, or its template (``templates``: the same nodes, made again)

    def run(func, args, kwargs):
        if kwargs:
            dev = lf_device_of(args) or lf_device_of(list(kwargs.values()))
            a = [_unwrap(x, dev, func) for x in args]
            out = call(fn, a, {k: _unwrap(v, dev, func) for k, v in kwargs.items()})
        else:
            a = []
            for x in args:
                if type(x) is LazyTensor:
                    a.append(x._lf)
                elif x.__class__ in _PLAIN:
                    a.append(x)
                elif x.__class__ is list and not any(isinstance(y, torch.Tensor) for y in x):
                    a.append(x)   # sizes, dims (view, expand, sum): nothing to convert
                else:
                    dev = lf_device_of(args)
                    a = [_unwrap(x, dev, func) for x in args]
                    break
            out = call(fn, a)
        if out is NotImplemented:
            return _fallback(func, args, kwargs)
        counts[label] += 1
        if out.__class__ is LfTensor:
            return from_lf(out)
        return _wrap(out)
    return run


def _write_into(target, value, func, out=False):
    """``target`` (a LazyTensor) <- ``value`` (a lazyfuse Tensor), with torch's in-place dtype rule.
    ``out``: the target is an ``out=`` tensor, which torch resizes to the result's shape (warning
    where it had elements: torch's ``resize_output``)."""
    if type(target) is not LazyTensor:
        raise MixedTensorError(f"{func} writes into a plain torch tensor from lazyfuse frontend tensors; "
                               "convert it with lf.lazy(t) first, or read the value with lf.eager(...)")
    lf = target._lf
    if value.dtype.category > lf.dtype.category:
        raise DTypeError(f"{func}: result type {value.dtype.name} can't be cast to the desired output type "
                         f"{lf.dtype.name} (as in torch)")
    if value.shape != lf.shape:
        if not out:
            raise ShapeError(f"{func}: the result shape {value.shape} differs from the target's {lf.shape}")
        if lf.numel():
            warnings.warn(f"An output with one or more elements was resized since it had shape {list(lf.shape)}, "
                          f"which does not match the required output shape {list(value.shape)}. This behavior "
                          "is deprecated, and in a future PyTorch release outputs will not be resized unless "
                          "they have zero elements. You can explicitly reuse an out tensor t by resizing it, "
                          "inplace, to zero elements with t.resize_(0).", UserWarning, stacklevel=2)
        # (a new storage: the old values are all overwritten; a view of the old tensor keeps them,
        # where torch's would see the new ones only when its storage was large enough)
        lf = empty(value.shape, dtype=lf.dtype, device=lf.device)
        rebind(target, lf)
    lf.copy_(value)
    return target


def rebind(target, lf_tensor):
    """``target`` (a LazyTensor) holds ``lf_tensor`` from now on, its wrapper's sizes, strides and
    offset set to match (torch's own ``set_`` onto a wrapper's storage of that extent: metadata only)."""
    target._lf = lf_tensor
    v = lf_tensor._view
    with torch._C._DisableTorchDispatch():
        aten.set_.source_Storage_storage_offset(target, torch.Tensor.untyped_storage(from_lf(lf_tensor)),
                                                v.offset, v.shape, v.strides)


def _inplace_runner(fn, label):
    run_functional = _functional_runner(fn, label)

    def run(func, args, kwargs):
        out = run_functional(func, args, kwargs)
        return _write_into(args[0], out._lf if type(out) is LazyTensor else out, func)
    return run


def _out_runner(fn, label):
    run_functional = _functional_runner(fn, label)

    def run(func, args, kwargs):
        # (torch's checks of the out tensors, which the functional handler never sees: aminmax's
        # must have the result's dtype exactly, and were written with a cast; out= is rare enough
        # for a meta call each time)
        _check_on_meta(func, args, kwargs)
        kwargs = dict(kwargs)
        outs = [kwargs.pop(a.name) for a in func._schema.arguments if a.is_out]   # out=, or values=/indices=
        res = run_functional(func, args, kwargs)
        if len(outs) == 1 and not isinstance(outs[0], (list, tuple)):
            return _write_into(outs[0], res._lf, func, out=True)
        return _into_outs(outs[0] if len(outs) == 1 else outs, [r._lf for r in res], func)
    return run


def _into_outs(outs, results, func):
    """``results`` (lazyfuse Tensors) written into the out tensors of an op with several: as torch's
    kernels (``max.dim``, ``sort``, ``topk``, ``aminmax``, ``cummax``...), each must have its
    result's dtype exactly, not one it casts to."""
    for o, r in zip(outs, results):
        if type(o) is LazyTensor and o._lf.dtype is not r.dtype:
            raise DTypeError(f"{func}: Expected out tensor to have dtype {r.dtype.torch}, but got {o.dtype} "
                             "instead (as torch: an op with several out tensors casts into none of them)")
    return tuple(_write_into(o, r, func, out=True) for o, r in zip(outs, results))


def _foreach_runner(base, into_first=False):
    """``_foreach_<op>(lists..., scalars)``: ``<op>`` on each element. A foreach op passes
    positionally what its single-tensor op takes by keyword (``_foreach_addcmul_(s, t1, t2, value)``
    vs ``addcmul_(s, t1, t2, *, value)``): those are passed under the single op's keyword names.
    ``into_first``: ``base`` is functional and each result is copied into the first list's element."""
    inplace = base.endswith("_")
    if inplace and not hasattr(aten, base):
        # (``_foreach_maximum_`` of Adamax: aten has ``maximum`` but no ``maximum_``) the functional op,
        # copied into each element
        return _foreach_runner(base[:-1], into_first=True)
    op = getattr(aten, base)
    schemas = [getattr(op, o)._schema for o in op.overloads()]
    n_positional = max(sum(1 for a in sc.arguments if not a.kwarg_only) for sc in schemas)
    keywords = next(([a.name for a in sc.arguments if a.kwarg_only] for sc in schemas
                     if any(a.kwarg_only for a in sc.arguments)), [])

    def call(a, kw):
        kw.update(zip(keywords, a[n_positional:]))
        out = op(*a[:n_positional], **kw)
        return a[0].copy_(out) if into_first else out

    def run(func, args, kwargs):
        drains.counters.decomposed[str(func)] += 1
        if inplace and not any(isinstance(x, (list, tuple)) for x in (*args[1:], *kwargs.values())):
            whole = element_run(args[0])
            if whole is not None:   # the elements of one run (an optimizer's step counts): one op on it
                call([from_lf(whole), *args[1:]], dict(kwargs))
                return None
        outs = []
        for i in range(len(args[0])):
            a = [x[i] if isinstance(x, (list, tuple)) else x for x in args]
            outs.append(call(a, {k: (v[i] if isinstance(v, (list, tuple)) else v) for k, v in kwargs.items()}))
        return None if inplace or into_first else outs
    return run


# -- raw handlers: ops that need the frontend tensors themselves --------------------------------------
@raw("_local_scalar_dense", "item")   # (aten.item itself: torch's decompositions call it, bucketize's of a 0-d input)
def _item(func, args, kwargs):
    drains.note(".item() / bool() / float()")
    return args[0]._lf.item()


@raw("copy_")
def _copy(func, args, kwargs):
    dest, src = args[0], args[1]
    if type(dest) is LazyTensor:
        if type(src) is LazyTensor:
            if src._lf.device is not dest._lf.device:
                raise DeviceError(f"copy_ between lazy tensors on {src._lf.device.name} and {dest._lf.device.name}")
            dest._lf.copy_(src._lf)
        elif isinstance(src, torch.Tensor):
            if src.device.type != "cpu" and src.device != dest._lf.device.torch_device:
                raise DeviceError(f"copy_ from a torch tensor on {src.device} into a lazy tensor on "
                                  f"{dest._lf.device.name}")
            dest._lf.copy_(src.detach())   # data moving in (load_state_dict): an upload, no drain
        else:
            dest._lf.copy_(src)
        return dest
    # a plain tensor written from a lazy one (load_state_dict into a plain module): data moving out
    drains.note("copy_ into a plain tensor")
    return func(dest, src._lf.torch(), *args[2:], **kwargs)


@raw("_amp_foreach_non_finite_check_and_unscale_")
def _amp_unscale(func, args, kwargs):
    """amp's ``GradScaler.unscale_``: each gradient times ``inv_scale``, and ``found_inf`` set to 1 where any
    of them holds an infinity or a NaN. The scaler makes ``found_inf`` and ``inv_scale`` itself, as plain
    tensors on the gradients' reported device (the host), so ``found_inf`` is written from the gradients by
    a drain, which its next step forces anyway: it reads ``found_inf`` on the host, as torch's does."""
    grads, found_inf, inv_scale = args
    if kwargs or not grads or not all(type(g) is LazyTensor for g in grads):
        return _fallback(func, args, kwargs)
    scale = inv_scale._lf if type(inv_scale) is LazyTensor else inv_scale.item()
    found = None
    for g in grads:
        x = g._lf
        total = (x * 0).sum()      # NaN exactly where some element is infinite or NaN
        bad = total != total       # (read before the write below: program order)
        found = bad if found is None else found | bad
        x.copy_(x * scale)
    if type(found_inf) is LazyTensor:
        found_inf._lf.copy_(where(found, 1.0, found_inf._lf))
    else:
        drains.note("amp's found_inf, a plain tensor")
        found_inf.copy_(torch.where(found.torch(), 1.0, found_inf))
    drains.counters.native[str(func)] += 1


@raw("resize_")
def _resize_(func, args, kwargs):
    """torch's ``resize_`` where no other view can tell the difference: an empty tensor (the ``out=``
    tensors torch's decompositions resize: ``torch.empty(0)``) takes a new storage; a contiguous one
    shrinks to a view of its first elements (torch's keeps its storage). Growing a tensor with
    elements is refused: lazyfuse storages have a fixed size, and views of the old one would not
    see the new."""
    target, size = args[0], tuple(args[1])
    if tuple(target.shape) == size:   # (torch's out= kernels resize their output to the size it has)
        return target
    x = target._lf
    layout = kwargs.get("memory_format", args[2] if len(args) > 2 else None)
    n = math.prod(size)
    if layout in (None, torch.contiguous_format, torch.preserve_format) and min(size, default=0) >= 0:
        if x.numel() == 0:
            rebind(target, empty(size, dtype=x.dtype, device=x.device))
            return target
        if n <= x.numel() and x.is_contiguous():
            rebind(target, x.reshape(-1)[:n].view(size))
            return target
    raise ShapeError(f"{func}: resizing a lazyfuse frontend tensor in place ({tuple(target.shape)} -> {size}) is "
                     "not supported beyond an empty tensor or shrinking a contiguous one: its storage has a fixed "
                     "size; make a new tensor (torch.empty(...), x.new_empty)")


@raw("detach", "alias", "lift_fresh")
def _alias(func, args, kwargs):
    return LazyTensor(args[0]._lf.detach())


@raw("_embedding_bag", "_embedding_bag_forward_only")
def _embedding_bag(func, args, kwargs):
    # torch's meta function for this op gives its bookkeeping outputs (offset2bag, bag_size) other sizes than
    # its CPU kernel returns, so an extern node's buffers would not fit them: it runs eagerly (a drain)
    return fallback.run_eagerly(func, args, kwargs, lf_device_of(args))


@raw("_sparse_coo_tensor_with_dims_and_tensors", "_sparse_coo_tensor_unsafe", "_sparse_csr_tensor_unsafe")
def _sparse_tensor(func, args, kwargs):
    raise DTypeError(f"{func}: a sparse tensor (such as the gradient of nn.Embedding(sparse=True)) is not supported: "
                     "lazyfuse holds strided tensors only; use sparse=False (a dense gradient)")


def _draws_on_host(device) -> bool:
    """Random ops draw from torch's own generator on the host (bit-equal to torch eager;
    ``torch.manual_seed`` works as is), except inside ``lf.capture`` (warmup included): there a
    host draw would be baked into the graph, so they draw from lazyfuse's generator, which a
    replay advances."""
    return not device.pool.info()["persistent"]


@raw(*random_draws.METHODS)
def _in_place_draw(func, args, kwargs):
    """``x.uniform_()``, ``normal_``, ``bernoulli_``, ``exponential_``, ``cauchy_``, ``log_normal_``,
    ``geometric_``: torch's own draw into a host tensor of ``x``'s strides (torch's numbers, its
    ``generator=`` as given), or inside a capture lazyfuse's native draw (``random_draws``: a
    torch generator cannot drive a replay). (torch's decompositions of the last four draw floats
    with ``rand_like``, which an integer ``x`` refuses: torch's ``geometric_`` takes int64.)"""
    name = func._schema.name.partition("::")[2]
    target, params = args[0], args[1:]
    if name == "bernoulli_" and isinstance(params[0] if params else kwargs.get("p"), torch.Tensor):
        return _fallback(func, args, kwargs)   # (a probability per element: torch's kernel, eagerly)
    x = target._lf
    if _draws_on_host(x.device):
        host = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype.torch)
        x.copy_(getattr(host, name)(*params, **kwargs))
    else:
        random_draws.METHODS[name](x, *params, **{k: v for k, v in kwargs.items() if k != "generator"})
    drains.counters.native[str(func)] += 1
    return target


# -- elementwise -------------------------------------------------------------------------------------
def _scaled(other, alpha):
    return other if alpha == 1 else other * alpha


# (add and sub call lazyfuse's operator with no helper in between: each Python call level is ~0.1 us of
# the frontend's per-op cost)
native("add")(lambda x, other, alpha=1: x + other if alpha == 1 else x + other * alpha)
native("sub")(lambda x, other, alpha=1: x - other if alpha == 1 else x - other * alpha)
native("rsub")(lambda x, other, alpha=1: other - _scaled(x, alpha))
native("mul")(lambda x, other: x * other)   # (x may be a number: a plain 0-d tensor torch passed as self)
native("neg")(lambda x: -x)
native("exp")(lambda x: x.exp())
native("log")(lambda x: x.log())
native("sqrt")(lambda x: x.sqrt())
native("rsqrt")(lambda x: x.rsqrt())
native("sin")(lambda x: x.sin())
native("cos")(lambda x: x.cos())
native("tanh")(lambda x: x.tanh())
native("sigmoid")(lambda x: x.sigmoid())
native("relu")(lambda x: x.relu())
native("silu")(lambda x: x.silu())
native("reciprocal")(lambda x: x.reciprocal())
native("abs")(lambda x: abs(x))
native("isnan")(lambda x: x.isnan())
native("maximum")(lambda x, other: lf_ops.elementwise(Op.MAXIMUM, x, other))
native("minimum")(lambda x, other: lf_ops.elementwise(Op.MINIMUM, x, other))
native("eq")(lambda x, other: x == other)
native("ne")(lambda x, other: x != other)
native("lt")(lambda x, other: x < other)
native("le")(lambda x, other: x <= other)
native("gt")(lambda x, other: x > other)
native("ge")(lambda x, other: x >= other)
native("logical_not")(lambda x: x.logical_not())
native("bitwise_not")(lambda x: ~x)
native("bitwise_and")(lambda x, other: x & other)
native("bitwise_or")(lambda x, other: x | other)
native("bitwise_xor")(lambda x, other: x ^ other)
native("logical_and")(lambda x, other: x.bool() & (other.bool() if hasattr(other, "bool") else bool(other)))
native("logical_or")(lambda x, other: x.bool() | (other.bool() if hasattr(other, "bool") else bool(other)))
native("where")(lambda cond, x, other: where(cond, x, other))
native("gelu")(lambda x, approximate="none": F.gelu(x, approximate))
native("clamp_min")(lambda x, min: x.clamp(min=min))
native("clamp_max")(lambda x, max: x.clamp(max=max))


@native("div")
def _div(x, other, rounding_mode=None):
    if rounding_mode is None:
        return x / other
    if rounding_mode == "floor":
        return x // other
    return NotImplemented   # "trunc": the fallback


@native("pow")
def _pow(x, exponent):
    return x ** exponent


native("clamp")(lambda x, min=None, max=None: x.clamp(min, max))   # (both None: refused, as torch's)


native("masked_fill")(masked_fill)   # (lazyfuse's: torch's checks of the value, a number or a 0-d tensor)
native("index_add")(index_add)


# (lazyfuse's own: float16/bfloat16 computed in float32 and rounded once, as torch's fused kernels)
native("lerp")(lerp)
native("addcmul")(lambda x, t1, t2, value=1: addcmul(x, t1, t2, value=value))
native("addcdiv")(lambda x, t1, t2, value=1: addcdiv(x, t1, t2, value=value))


@native("_to_copy")
def _to_copy(x, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, memory_format=None):
    if device is not None and torch.device(device) != x.device.torch_device:
        return NotImplemented   # leaving lazyfuse: the fallback hands back a plain copy
    return x.to(x.dtype if dtype is None else dtype, copy=True, memory_format=memory_format)


@native("to")
def _to(x, dtype=None, non_blocking=False, copy=False, memory_format=None, **options):
    """``to.dtype`` and ``to.dtype_layout`` (torch's decompositions call them); a device move
    (``to.device``, ``to.other``'s) is left to the fallback."""
    if not isinstance(dtype, torch.dtype) or options.get("device") not in (None, x.device.torch_device):
        return NotImplemented
    return x.to(dtype, copy=copy, memory_format=memory_format)


@native("sign")
def _sign(x):
    if x.dtype is dt.bool_:
        return x.clone()
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


native("clone")(lambda x, memory_format=None: x.clone(memory_format=memory_format))


@native("fill")
def _fill(x, value):
    return full(x.shape, value, dtype=x.dtype, device=x.device)


@native("zero")
def _zero(x):
    return full(x.shape, 0, dtype=x.dtype, device=x.device)


def _like(fill):
    from ..creation import empty_like, full_like   # (lazyfuse's: torch's memory_format and its refusals)

    def like(x, *rest, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        value = rest[0] if fill is None else fill
        d = dt.as_dtype(dtype) if dtype is not None else x.dtype
        if value is empty:
            return empty_like(x, dtype=d, memory_format=memory_format)
        return full_like(x, value, dtype=d, memory_format=memory_format)
    return like


native("zeros_like")(_like(0))
native("ones_like")(_like(1))
native("empty_like")(_like(empty))
native("full_like")(_like(None))


def _new(fill):
    def new(x, size, *rest, dtype=None, layout=None, device=None, pin_memory=None, requires_grad=False):
        value = rest[0] if fill is None else fill
        d = dt.as_dtype(dtype) if dtype is not None else x.dtype
        if value is empty:
            return empty(tuple(size), dtype=d, device=x.device)
        return full(tuple(size), value, dtype=d, device=x.device)
    return new


native("new_zeros")(_new(0))
native("new_ones")(_new(1))
native("new_empty")(_new(empty))
native("new_full")(_new(None))


@native("new_empty_strided")
def _new_empty_strided(x, size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    return empty(tuple(size), dtype=dt.as_dtype(dtype) if dtype is not None else x.dtype, device=x.device)


# -- reductions ---------------------------------------------------------------------------------------
def _dims(dim):
    return None if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0) else tuple(dim) \
        if isinstance(dim, (list, tuple)) else dim


@native("sum")
def _sum(x, dim=None, keepdim=False, dtype=None):
    return x.sum(_dims(dim), keepdim, dtype=dt.as_dtype(dtype) if dtype is not None else None)


@native("mean")
def _mean(x, dim=None, keepdim=False, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    return x.mean(_dims(dim), keepdim)


native("amax")(lambda x, dim=(), keepdim=False: x.amax(_dims(dim), keepdim))
native("amin")(lambda x, dim=(), keepdim=False: x.amin(_dims(dim), keepdim))


@native("max")
def _max(x, dim=None, keepdim=False):
    if isinstance(dim, LfTensor):
        return lf_ops.elementwise(Op.MAXIMUM, x, dim)
    return x.amax() if dim is None else tuple(x.max(dim, keepdim))


@native("min")
def _min(x, dim=None, keepdim=False):
    if isinstance(dim, LfTensor):
        return lf_ops.elementwise(Op.MINIMUM, x, dim)
    return x.amin() if dim is None else tuple(x.min(dim, keepdim))


native("argmax")(lambda x, dim=None, keepdim=False: x.argmax(dim, keepdim))
native("argmin")(lambda x, dim=None, keepdim=False: x.argmin(dim, keepdim))


# (each of var, std, var_mean has three overloads: (self, unbiased), (self, dim, unbiased, keepdim) and
# (self, dim, *, correction, keepdim); lazyfuse's var takes all three spellings, a bool dim as unbiased)
@native("var")
def _var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return x.var(_dims(dim), unbiased, keepdim, correction=correction)


@native("std")
def _std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return x.std(_dims(dim), unbiased, keepdim, correction=correction)


@native("var_mean")
def _var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    mean_dim = None if isinstance(dim, bool) else _dims(dim)
    return x.var(_dims(dim), unbiased, keepdim, correction=correction), x.mean(mean_dim, keepdim)


# -- matmul -------------------------------------------------------------------------------------------
native("mm", "bmm", "matmul")(lambda a, b: a @ b)
native("dot")(dot)
native("mv")(lambda a, b: (a @ b.unsqueeze(1)).squeeze(1))


# (lazyfuse's own: integer tensors take int(beta), int(alpha); float16/bfloat16 add the bias in float32
# (autocast's linear), rounding once)
native("addmm")(lambda bias, a, b, *, beta=1, alpha=1: addmm(bias, a, b, beta=beta, alpha=alpha))
native("baddbmm")(lambda bias, a, b, *, beta=1, alpha=1: baddbmm(bias, a, b, beta=beta, alpha=alpha))


# -- views (they alias their base, as in torch) ---------------------------------------------------------
@native("view", "_unsafe_view")
def _view(x, size):
    if isinstance(size, torch.dtype):   # view.dtype: the same memory read as another dtype (lazyfuse.bitcast)
        return x.view(size)
    return x.view(tuple(size))


# (aten's reshape reaches here from torch's decompositions: a view where strides allow, else a copy)
native("reshape", "_reshape_alias")(lambda x, size, *stride: x.reshape(tuple(size)))
native("expand")(lambda x, size, *, implicit=False: x.expand(tuple(size)))
native("permute")(lambda x, dims: x.permute(tuple(dims)))
native("t")(t)
native("transpose")(lambda x, dim0, dim1: x.transpose(dim0, dim1))
native("unsqueeze")(lambda x, dim: x.unsqueeze(dim))
native("squeeze")(lambda x, dim=None: x.squeeze(tuple(dim) if isinstance(dim, (list, tuple)) else dim))
# (select and slice make their views directly: through indexing's general path they cost ~25 us each,
# and a GPT's q/k/v split is three slices)
@native("select")
def _select(x, dim, index):
    dim = dim % x.ndim
    size = x.shape[dim]
    if not -size <= index < size:
        raise ShapeError(f"index {index} is out of range for dim {dim} of size {size}")
    return x._with_view(x._view.select(dim, index % size))


@native("slice")
def _slice(x, dim=0, start=None, end=None, step=1):
    dim = dim % x.ndim
    if step is None or step <= 0:
        return x[(slice(None),) * dim + (slice(start, end, step),)]   # (indexing's error for a step <= 0)
    start, end, _ = slice(start, end).indices(x.shape[dim])          # torch's clamping of the bounds
    return x._with_view(x._view.slice(dim, start, max(end, start), step))


@native("split")
def _split(x, split_size, dim=0):
    dim = dim % x.ndim
    n = x.shape[dim]
    return [_slice(x, dim, s, min(s + split_size, n)) for s in range(0, max(n, 1), split_size)]


@native("split_with_sizes")
def _split_with_sizes(x, split_sizes, dim=0):
    dim = dim % x.ndim
    out, s = [], 0
    for size in split_sizes:
        out.append(_slice(x, dim, s, s + size))
        s += size
    return out


native("unbind")(lambda x, dim=0: [_select(x, dim, i) for i in range(x.shape[dim])])


@native("as_strided")
def _as_strided(x, size, stride, storage_offset=None):
    offset = x._view.offset if storage_offset is None else storage_offset
    return x._with_view(View(tuple(size), tuple(stride), offset))


@raw("squeeze_", "unsqueeze_", "transpose_", "t_", "as_strided_")
def _inplace_view(func, args, kwargs):
    """An in-place view op changes the target's own shape and strides (torch's ``matmul`` of a vector
    ends with ``squeeze_``), so it cannot be its functional op copied into the target: the target takes
    the functional op's view of its storage, and the wrapper's metadata is set to match."""
    target = args[0]
    view = getattr(aten, _name(func)[:-1])(*args, **kwargs)
    target._lf = view._lf
    with torch._C._DisableTorchDispatch():   # torch's own as_strided_ on the wrapper: metadata only
        aten.as_strided_(target, view.shape, view.stride(), view.storage_offset())
    return target


@native("cat")
def _cat(tensors, dim=0):
    tensors = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]   # torch skips legacy empty 1-d
    return cat(tensors, dim)


native("stack")(lambda tensors, dim=0: stack(tensors, dim))


@native("index")
def _index(x, indices):
    tensors = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(tensors) != 1 or tensors[0][1].dtype in (dt.bool_,):
        return NotImplemented
    d, idx = tensors[0]
    idx = where(idx < 0, idx + x.shape[d], idx)
    return index_select(x, d, idx)


# -- nn ops and their backward formulas ----------------------------------------------------------------
# (torch's decomposition of constant_pad_nd fills a plain tensor it makes and writes the input into it)
native("constant_pad_nd")(lambda x, pad, value=0: F.pad(x, pad, "constant", value))
native("_softmax")(lambda x, dim, half_to_float: F.softmax(x, dim))
native("_log_softmax")(lambda x, dim, half_to_float: F.log_softmax(x, dim))


@native("_softmax_backward_data")
def _softmax_backward_data(g, y, dim, input_dtype):
    g, y = g.to(dt.opmath(g.dtype)), y.to(dt.opmath(y.dtype))   # (torch's CPU kernel: float32, rounded once)
    return (y * (g - (g * y).sum(dim, keepdim=True))).to(input_dtype)


@native("_log_softmax_backward_data")
def _log_softmax_backward_data(g, y, dim, input_dtype):
    g, y = g.to(dt.opmath(g.dtype)), y.to(dt.opmath(y.dtype))
    return (g - y.exp() * g.sum(dim, keepdim=True)).to(input_dtype)
native("threshold_backward")(lambda g, x, threshold: where(x <= threshold, 0.0, g).to(g.dtype))
native("sigmoid_backward")(lambda g, y: g * y * (1 - y))
native("tanh_backward")(lambda g, y: g * (1 - y * y))


@native("silu_backward")
def _silu_backward(g, x):
    s = x.sigmoid()
    return g * s * (1 + x * (1 - s))


@native("gelu_backward")
def _gelu_backward(g, x, approximate="none"):
    if approximate != "none":
        return NotImplemented
    from ..autograd.rules import _gelu_grad
    return g * _gelu_grad(x)


@native("native_layer_norm")
def _native_layer_norm(x, normalized_shape, weight, bias, eps):
    F.check_layer_norm_shapes(x, normalized_shape, weight, bias)
    dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    xf = x.to(dt.opmath(x.dtype))
    mean = xf.mean(dims, keepdim=True)
    d = xf - mean
    rstd = ((d * d).mean(dims, keepdim=True) + eps).rsqrt()
    out = d * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    # (the statistics of a float16/bfloat16 input: torch's CPU kernel keeps its dtype, the CUDA one
    # float32, as extern.CPU_STATS_IN_INPUT_DTYPE says)
    stats = dt.opmath(x.dtype) if x.device.kind == "cuda" else x.dtype
    return out.to(x.dtype), mean.to(stats), rstd.to(stats)


@native("native_layer_norm_backward")
def _native_layer_norm_backward(g, x, normalized_shape, mean, rstd, weight, bias, output_mask):
    dims = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    batch = tuple(range(x.ndim - len(normalized_shape)))
    n = float(math.prod(normalized_shape))
    xhat = (x - mean) * rstd
    gw = g * weight if weight is not None else g
    dx = dw = db = None
    if output_mask[0]:
        dx = (rstd / n) * (gw * n - gw.sum(dims, keepdim=True) - xhat * (gw * xhat).sum(dims, keepdim=True))
    if output_mask[1] and weight is not None:
        dw = (g * xhat).sum(batch) if batch else g * xhat
    if output_mask[2] and bias is not None:
        db = g.sum(batch) if batch else g
    return dx, dw, db


@native("embedding")
def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    F.check_embedding_weight(weight)
    return index_select(weight, 0, indices, False, "embedding")


def _one_hot(index, n, dtype):
    return (index.unsqueeze(-1) == arange(n, device=index.device)).to(dtype)


@native("embedding_dense_backward")
def _embedding_dense_backward(g, indices, num_weights, padding_idx, scale_grad_by_freq):
    if scale_grad_by_freq:
        return NotImplemented
    flat = indices.reshape(-1)
    onehot = _one_hot(flat, num_weights, g.dtype)
    if padding_idx >= 0:
        onehot = onehot * (flat != padding_idx).unsqueeze(-1).to(g.dtype)
    return onehot.T @ g.reshape(-1, g.shape[-1])


def _nll_parts(x, target, weight, counted):
    """The one-hot of each target (zero rows where not ``counted``) times its class weight, and those weights.
    (A (C,) input's target is 0-d or, as torch takes it, of one element: read as 0-d.)"""
    if x.ndim == 1:
        target, counted = target.reshape(()), counted.reshape(())
    hot = _one_hot(target, x.shape[-1], x.dtype) * counted.unsqueeze(-1).to(x.dtype)
    if weight is not None:
        hot = hot * weight
    return hot, hot.sum(-1)


@native("nll_loss_forward")
def _nll_loss_forward(x, target, weight, reduction, ignore_index):
    # torch's checks, as lazyfuse's own nll_loss makes them: a (C,) or (N, C) input, an integer target of
    # () or (N,), and each counted class in [0, C), checked at the drain (an out-of-range one matched no
    # class of the one-hot: a silently smaller loss where torch raises)
    if x.ndim not in (1, 2):
        raise ShapeError(f"nll_loss_forward: input tensor should be 1D or 2D, got shape {x.shape}")
    batch, batch_target, _ = losses._as_batch(x, target)
    losses._check_classes(batch, batch_target, "nll_loss")
    hot, w = _nll_parts(x, target, weight, losses._counted(target, x.shape[-1], ignore_index))
    per_item = -(x * hot).sum(-1)
    total = w.sum()
    if reduction == 0:
        return per_item, total
    loss = per_item.sum()
    return (loss / total if reduction == 1 else loss), total


@native("nll_loss_backward")
def _nll_loss_backward(g, x, target, weight, reduction, ignore_index, total_weight):
    hot, _ = _nll_parts(x, target, weight, target != ignore_index)
    if reduction == 0:
        return -hot * g.unsqueeze(-1)
    scale = g / total_weight if reduction == 1 else g
    return -hot * scale


@native("native_dropout_backward")
def _native_dropout_backward(g, mask, scale):
    return g * mask.to(g.dtype) * scale


def _attention_probs(q, k, is_causal, attn_mask, scale):
    scale = scale if scale is not None else 1.0 / math.sqrt(q.shape[-1])
    s = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        keep = arange(L, device=q.device).unsqueeze(1) >= arange(S, device=q.device).unsqueeze(0)
        s = where(keep, s, float("-inf"))
    if attn_mask is not None:
        s = where(attn_mask, s, float("-inf")) if attn_mask.dtype is dt.bool_ else s + attn_mask
    return s, scale


def _kv_groups(q, k) -> int:
    """How many query heads share each key/value head: torch's CPU attention kernels take fewer key and
    value heads than query heads (``enable_gqa=True``), key/value head ``j`` serving query heads
    ``j * groups`` to ``(j + 1) * groups - 1``."""
    if q.ndim < 3 or k.shape[-3] in (0, q.shape[-3]) or q.shape[-3] % k.shape[-3]:
        return 1   # (equal heads; a mismatch fails to broadcast with the shapes named)
    return q.shape[-3] // k.shape[-3]


def _repeat_heads(x, groups):
    """``x.repeat_interleave(groups, dim=-3)``, as a broadcast view copied once."""
    shape = x.shape[:-2] + (groups,) + x.shape[-2:]
    return x.unsqueeze(-3).expand(shape).reshape(x.shape[:-3] + (x.shape[-3] * groups,) + x.shape[-2:])


@native("_scaled_dot_product_flash_attention_for_cpu")
def _sdpa_cpu(q, k, v, dropout_p=0.0, is_causal=False, *, attn_mask=None, scale=None):
    if dropout_p:
        return NotImplemented
    groups = _kv_groups(q, k)
    if groups > 1:
        k, v = _repeat_heads(k, groups), _repeat_heads(v, groups)
    # (float16/bfloat16 in float32, the output rounded once and the logsumexp kept in float32, as
    # torch's kernel: rounding the scores, the softmax and the product each cost ~10x its error)
    dtype, (q, k, v) = q.dtype, _widened(q, k, v)
    s, _ = _attention_probs(q, k, is_causal, attn_mask, scale)
    m = s.detach().amax(-1, keepdim=True)
    lse = (s - m).exp().sum(-1, keepdim=True).log() + m
    return ((s - lse).exp() @ v).to(dtype), lse.squeeze(-1)


def _widened(*xs):
    """``xs`` in their compute dtype (float32 for float16/bfloat16)."""
    return [x.to(dt.opmath(x.dtype)) for x in xs]


@native("_scaled_dot_product_flash_attention_for_cpu_backward")
def _sdpa_cpu_backward(g, q, k, v, out, lse, dropout_p, is_causal, *, attn_mask=None, scale=None):
    if dropout_p:
        return NotImplemented
    groups = _kv_groups(q, k)
    if groups > 1:
        k, v = _repeat_heads(k, groups), _repeat_heads(v, groups)
    dtype, (g, q, k, v, out) = q.dtype, _widened(g, q, k, v, out)   # (as the forward)
    s, scale = _attention_probs(q, k, is_causal, attn_mask, scale)
    p = (s - lse.unsqueeze(-1)).exp()
    dv = p.transpose(-2, -1) @ g
    dp = g @ v.transpose(-2, -1)
    ds = p * (dp - (g * out).sum(-1, keepdim=True))
    dk = (ds.transpose(-2, -1) @ q) * scale
    if groups > 1:   # each key/value head's gradient: the sum over the query heads it served
        dk, dv = (x.reshape(x.shape[:-3] + (x.shape[-3] // groups, groups) + x.shape[-2:]).sum(-3) for x in (dk, dv))
    return ((ds @ k) * scale).to(dtype), dk.to(dtype), dv.to(dtype)

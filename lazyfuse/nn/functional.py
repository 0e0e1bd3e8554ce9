"""``lf.nn.functional``, written with the Tensor API so that each call fuses like any program."""
from __future__ import annotations

import math

from .. import ops
from ..errors import DTypeError, ShapeError
from ..ir.dtypes import bfloat16, bool_, float16, float32, opmath
from ..ir.shapes import normalize_dim, prod


@ops.row_major   # (the value is written through x's view: its own layout would only split the kernel)
def _written_back(x, op):
    """``op(x)`` written into ``x``, which is returned (an ``inplace=True`` form), computed from
    ``surface.in_place_source(x)`` so that ``op``'s gradient keeps the value it read."""
    from ..surface import in_place_source
    return x.copy_(op(in_place_source(x)))


def relu(input, inplace=False):
    """max(x, 0), elementwise (fuses with its neighbours); ``inplace`` writes it into ``input``."""
    return _written_back(input, lambda v: v.relu()) if inplace else input.relu()


def gelu(input, approximate="none"):
    """GELU as in torch: the exact erf form, or ``approximate="tanh"``; floating tensors only."""
    if approximate not in ("none", "tanh"):
        raise ShapeError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    if approximate == "tanh":
        _float(input, "gelu")
        return 0.5 * input * (1.0 + (math.sqrt(2.0 / math.pi) * (input + 0.044715 * input * input * input)).tanh())
    return input.gelu()


def silu(input, inplace=False):
    """x * sigmoid(x), elementwise; ``inplace`` writes it into ``input``."""
    return _written_back(input, lambda v: v.silu()) if inplace else input.silu()


def sigmoid(input):
    """1 / (1 + exp(-x)), elementwise."""
    return input.sigmoid()


def tanh(input):
    """Hyperbolic tangent, elementwise."""
    return input.tanh()


def _float(x, name):
    if not x.dtype.is_float:
        raise DTypeError(f"{name} needs a floating tensor, got {x.dtype.name} (as in torch); call .float() first")


def _as_rows(fn, x, dim):
    """``fn(x, dim)`` of a tensor of more than 64 dims as a 3-d (before, dim, after) view: torch's
    softmax kernels take any rank, where its reductions over a dim (lazyfuse's amax and sum here)
    refuse more than 64 dims."""
    before, after = prod(x.shape[:dim]), prod(x.shape[dim + 1:])
    return fn(x.reshape(before, x.shape[dim], after), 1).reshape(x.shape)


def _row_max(x, dim):
    """The max along ``dim`` that (log_)softmax subtracts to stabilise (detached: it adds nothing
    to the gradient, which is exact without it); 0 over an empty dim, where amax refuses but the
    result is as empty as the input (torch's too)."""
    return 0 if x.ndim and not x.shape[dim] else x.detach().amax(dim, keepdim=True)


def implicit_dim(name: str, ndim: int, stacklevel: int = 3) -> int:
    """torch's deprecated choice of the dim of a softmax called without one (with its warning,
    ``stacklevel``: at the caller's caller)."""
    import warnings
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as "
                  "an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def _row_op_input(name, input, dim, dtype):
    """softmax's and log_softmax's input cast to ``dtype`` (torch casts first) and checked, with
    ``dim`` normalised (None: torch's legacy implicit dim, with its warning)."""
    if dtype is not None:
        input = input.to(dtype)
    _float(input, name)
    return input, normalize_dim(implicit_dim(name, input.ndim, 4) if dim is None else dim, input.ndim)


@ops.row_major
def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """Numerically stable: exp(x - max) / sum (float16/bfloat16 in float32, rounded once, as torch).
    ``_stacklevel`` is torch's (for its warning) and unused."""
    input, dim = _row_op_input("softmax", input, dim, dtype)
    if input.ndim > 64:
        return _as_rows(softmax, input, dim)
    out_dtype, input = input.dtype, input.to(opmath(input.dtype))
    e = (input - _row_max(input, dim)).exp()
    return (e / e.sum(dim, keepdim=True)).to(out_dtype)


@ops.row_major
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - logsumexp(x) along ``dim``: one row-wise kernel, like softmax."""
    input, dim = _row_op_input("log_softmax", input, dim, dtype)
    if input.ndim > 64:
        return _as_rows(log_softmax, input, dim)
    out_dtype, input = input.dtype, input.to(opmath(input.dtype))
    shifted = input - _row_max(input, dim)
    return (shifted - shifted.exp().sum(dim, keepdim=True).log()).to(out_dtype)


def check_layer_norm_shapes(input, normalized_shape, weight, bias) -> tuple:  # noqa: A002
    """torch's checks of layer_norm's shapes (its words), for ``F.layer_norm`` and the frontend's
    ``native_layer_norm``; the normalized shape as a tuple."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if not normalized_shape:
        raise ShapeError("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
                         "element, but got normalized_shape = []")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != normalized_shape:
            raise ShapeError(f"Expected {name} to be of same shape as normalized_shape, but got {name} of shape "
                             f"{list(p.shape)} and normalized_shape = {list(normalized_shape)}")
    if tuple(input.shape[-len(normalized_shape):]) != normalized_shape:
        raise ShapeError(f"Given normalized_shape={list(normalized_shape)}, expected input with shape "
                         f"[*, {', '.join(map(str, normalized_shape))}], but got input of size{list(input.shape)}: "
                         f"layer_norm: normalized_shape {normalized_shape} does not match the input's last dims")
    return normalized_shape


@ops.row_major
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """torch's layer_norm over the trailing ``normalized_shape`` dims: mean and variance in one kernel
    (float16/bfloat16 in float32, weight and bias included, rounded once, as torch)."""
    normalized_shape = check_layer_norm_shapes(input, normalized_shape, weight, bias)
    _float(input, "layer_norm")
    params = [p.dtype for p in (weight, bias) if p is not None]
    mixed_ok = input.dtype in (float16, bfloat16) and all(d is float32 for d in params)   # torch's one mixed case
    if any(d is not input.dtype for d in params) and not mixed_ok:
        raise DTypeError(f"layer_norm: weight and bias must have the input's dtype {input.dtype.name} (or all be "
                         f"float32 for a float16/bfloat16 input, as in torch), got {[d.name for d in params]}")
    if input.ndim > 64:   # (as softmax's _as_rows: torch's layer_norm takes any rank)
        return _layer_norm_as_rows(input, normalized_shape, weight, bias, eps)
    dims = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    out_dtype, input = input.dtype, input.to(opmath(input.dtype))
    mean = input.mean(dims, keepdim=True)
    d = input - mean
    var = (d * d).mean(dims, keepdim=True)
    out = d * (var + eps).rsqrt()
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out.to(out_dtype)


def _layer_norm_as_rows(x, normalized_shape, weight, bias, eps):
    """layer_norm of a tensor of more than 64 dims as a 2-d (rows, normalized elements) view."""
    n = prod(normalized_shape)
    flat = [None if p is None else p.reshape(n) for p in (weight, bias)]
    return layer_norm(x.reshape(x.numel() // n if n else 0, n), (n,), *flat, eps).reshape(x.shape)


@ops.row_major
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """torch's rms_norm: one row-wise kernel. float16/bfloat16 compute in float32, weight
    included, rounded once, and ``eps`` defaults to the machine epsilon of that compute dtype,
    as in torch."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(normalized_shape)
    if not normalized_shape or tuple(input.shape[input.ndim - len(normalized_shape):]) != normalized_shape:
        raise ShapeError(f"rms_norm: normalized_shape={normalized_shape} must be the input's last dims "
                         f"(input shape {input.shape}), at least one of them")
    _float(input, "rms_norm")
    out_dtype, input = input.dtype, input.to(opmath(input.dtype))
    if eps is None:
        eps = 2.220446049250313e-16 if input.dtype.name == "float64" else 1.1920928955078125e-07
    dims = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    out = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        out = out * weight
    return out.to(out_dtype)


def linear(input, weight, bias=None):
    """x @ weight.T + bias; the bias and any elementwise consumer fuse as the epilogue."""
    out = input @ weight.T
    if bias is not None:
        if bias.dtype is not out.dtype:
            raise DTypeError(f"linear: bias dtype {bias.dtype.name} differs from the input's {out.dtype.name} "
                             "(torch refuses it too); cast the bias with .to(...)")
        out = out + bias
    return out


def check_embedding_weight(weight) -> None:
    """torch's check of an embedding table (``F.embedding`` and the frontend's ``aten.embedding``)."""
    if weight.ndim != 2:
        raise ShapeError(f"'weight' must be 2-D: embedding got a weight of shape {tuple(weight.shape)}; pass a "
                         "(num_embeddings, embedding_dim) table (the rows are the embeddings)")


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of ``weight`` picked by the integer tensor ``input`` (a gather). ``padding_idx``: those
    rows get no gradient (as torch). ``max_norm`` (which renormalises ``weight`` in place),
    ``scale_grad_by_freq`` and ``sparse`` raise UnsupportedOpError."""
    from ..errors import UnsupportedOpError
    from ..indexing import index_select
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise UnsupportedOpError("embedding: max_norm, scale_grad_by_freq and sparse are not supported by lazyfuse; "
                                 "renormalise the weight explicitly, and use dense gradients")
    check_embedding_weight(weight)
    out = index_select(weight, 0, input, False, "embedding")
    if padding_idx is not None and weight.requires_grad:
        if padding_idx < 0:
            padding_idx += weight.shape[0]
        # the same values, read through a detached row where the index is the padding one
        out = ops.where((input == padding_idx).unsqueeze(-1), weight.detach()[padding_idx], out)
    return out


def dropout(input, p=0.5, training=True, inplace=False):
    """Identity unless ``training`` (by default on, as torch's); then zeroes elements with probability
    ``p`` and scales the rest by 1/(1-p) (``inplace``: written into ``input``, which is returned)."""
    if not 0.0 <= p <= 1.0:
        raise ShapeError(f"dropout probability p={p} must be in [0, 1]")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = (input * 0).to(input.dtype)   # every dtype, as in torch (NaN stays NaN)
    else:
        _float(input, "dropout with 0 < p < 1")   # (torch: "result type Float can't be cast" to an integer dtype)
        from ..creation import rand
        keep = rand(input.shape, dtype=input.dtype, device=input.device) >= p
        out = ops.where(keep, input * (1.0 / (1.0 - p)), 0.0)
    return input.copy_(out) if inplace else out


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, causal=None):
    """softmax(q @ k^T * scale + mask) @ v, as torch's; ``is_causal`` (or ``causal``) masks future keys;
    ``enable_gqa`` shares each key/value head among ``query heads / key heads`` query heads (dim -3)."""
    if causal is not None:
        is_causal = causal
    if is_causal and attn_mask is not None:
        # (torch documents the error; its fused CPU kernel without autograd lets it pass, its math path raises)
        raise ShapeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True: "
                         "pass attn_mask or is_causal, not both (fold the causal mask into attn_mask)")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if kv_heads == 0 or heads % kv_heads or value.shape[-3] != kv_heads:
            raise ShapeError(f"scaled_dot_product_attention(enable_gqa=True): the query's {heads} heads must be a "
                             f"multiple of the key's and value's ({kv_heads}, {value.shape[-3]}), as in torch")
        key = key.repeat_interleave(heads // kv_heads, dim=-3)
        value = value.repeat_interleave(heads // kv_heads, dim=-3)
    if not (query.dtype.is_float and query.dtype is key.dtype is value.dtype):
        raise DTypeError("scaled_dot_product_attention needs query, key and value of one floating dtype, got "
                         f"{query.dtype.name}, {key.dtype.name}, {value.dtype.name} (as in torch)")
    if attn_mask is not None and attn_mask.dtype not in (bool_, float32, query.dtype):
        raise DTypeError(f"scaled_dot_product_attention: attn_mask must be bool, float32 or the query's dtype "
                         f"{query.dtype.name} (as in torch), got {attn_mask.dtype.name}")
    d = query.shape[-1]
    scale = scale if scale is not None else 1.0 / math.sqrt(d)
    # float16/bfloat16 compute in float32 and round once at the end, as torch does: rounding the
    # scores, the softmax and the product each to the low dtype costs ~8x torch's error
    out_dtype = query.dtype
    wide = opmath(out_dtype)
    query, key, value = query.to(wide), key.to(wide), value.to(wide)
    scores = (query @ key.transpose(-2, -1)) * scale
    L, S = query.shape[-2], key.shape[-2]
    if is_causal:
        # torch's alignment: query i sees keys j <= i (top-left, also when L != S)
        from ..creation import arange
        i = arange(L, device=query.device).reshape(L, 1)
        j = arange(S, device=query.device).reshape(1, S)
        scores = ops.where(j <= i, scores, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype.is_bool:
            scores = ops.where(attn_mask, scores, float("-inf"))
        else:
            scores = scores + attn_mask.to(wide)
    attn = softmax(scores, -1)
    if dropout_p:
        attn = dropout(attn, dropout_p, training=True)
    return (attn @ value).to(out_dtype)


__all__ = ["relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax", "layer_norm", "rms_norm", "linear",
           "embedding", "dropout", "scaled_dot_product_attention"]


from .activations import *  # noqa: E402,F401,F403 (torch.nn.functional's activations)
from .activations import __all__ as _activations
from .losses import *  # noqa: E402,F401,F403 (and its losses)
from .losses import __all__ as _losses
from ..torch_ops import one_hot, pad  # noqa: E402,F401
from .norms import *  # noqa: E402,F401,F403 (batch, instance and group norms)
from .norms import __all__ as _norms
from .extra import *  # noqa: E402,F401,F403 (shrinks, shuffles, distances, more losses)
from .extra import __all__ as _extra

__all__ = __all__ + _activations + _losses + _norms + _extra + ["one_hot", "pad"]

def __getattr__(name):
    """``F.<torch name>`` lazyfuse does not define natively: torch.nn.functional's, as an extern."""
    import torch.nn.functional
    from ..surface import namespace_function
    return namespace_function(torch.nn.functional, "lf.nn.functional.", name)

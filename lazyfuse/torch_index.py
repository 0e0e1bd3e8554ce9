"""Torch's gather family, its index fills and writes, short scans and the matmul aliases, as
compositions of lazyfuse's native ops:

* ``index_select``, ``take``, ``gather``, ``take_along_dim``: one GATHER node (the engine's
  indexed read, as ``x[idx]``) over a flat index computed by index arithmetic (``arange``s
  times strides: fused, never a table in memory). An index out of range fails the drain with
  an ``InvalidIndexError`` where torch raises (a negative one too, but for ``take``'s), in torch's words;
* ``index_fill``, ``index_copy``, ``index_add``, ``scatter_add``, ``scatter``: a ``where`` over a
  membership mask (``arange == index``, reduced over the index list), the values gathered for
  it; ``index_add``/``scatter_add`` a masked sum (one reduction kernel);
* the scans ``cumsum``, ``cumprod``, ``logcumsumexp``: one scan node (a scan kernel: a running
  value per row, any length; ``ops.scan``); ``cummax``, ``cummin`` (value and index): for a
  scanned dim of at most ``SHORT_SCAN`` elements, a reduction over a triangular mask (one fused
  kernel, quadratic in the scan length, so longer ones run as torch's own scan, an extern);
* ``flip`` and its relatives (a gather at a descending ``arange``: views have no negative
  strides), diagonals, differences, ``trace kron cross``, the stacks, and the ``*_scatter`` ops
  (a copy written through the view);
* ``matmul mm bmm mv dot vdot outer inner addmm addmv addbmm baddbmm addr``: lazyfuse's matmul
  (with its fused epilogue) and elementwise ops.
"""
from __future__ import annotations

import math

from . import autograd, ops
from .errors import DivisionByZeroError, DTypeError, InvalidIndexError, ShapeError
from .ir import dtypes as dt
from .ir.node import Node, Op
from .ir.shapes import broadcast_shapes, normalize_dim, normalize_dims
from .tensor import result_tensor   # (at the top: see torch_ops' import of Tensor)

# the longest cummax/cummin dim lowered natively: the triangular reduction costs n^2 per row
SHORT_SCAN = 64


def _arange(n, device):
    from .creation import arange
    return arange(n, device=device)


def _check_index(index, name):
    if index.dtype not in (dt.int32, dt.int64):   # (torch refuses the narrow integers too)
        raise DTypeError(f"{name}: index must be an integer tensor (int64), got {index.dtype.name}; call .long() "
                         "first")


def checked_positions(index, dim, size, wrap, name):
    """``index``'s positions along dim ``dim`` (of size ``size``), made non-negative, and refused
    at the drain where torch refuses them (``InvalidIndexError``, naming ``name``, the index, the
    dim and its size): out of [-size, size) with ``wrap``, out of [0, size) without. One
    elementwise node (``Op.CHECK_INDEX``, its size a runtime scalar), fused into the kernel that
    reads it: the check sets that kernel's error flag, so an index write that composes a mask
    from these positions never silently drops a bad index, and costs no launch of its own."""
    src = ops.operand_node(index.device.engine, index, dt.int64, index.shape)
    node = Node(Op.CHECK_INDEX, (src, ops.scalar_node(size, dt.int64)), dt.int64, index.shape, (name, dim, wrap))
    return result_tensor(index.device, node)


def _into(out, name, result):
    from .extern import write_out
    return write_out(name, result, out, casts="exact")


# -- gathers ----------------------------------------------------------------------------------------
def index_select(x, dim, index, *, out=None):
    """``x`` along ``dim`` at the positions ``index`` (a 1-d or 0-d integer tensor)."""
    from .indexing import index_select as gather_dim
    if out is not None:
        return _into(out, "index_select", index_select(x, dim, index))
    _check_index(index, "index_select")
    if index.ndim > 1:
        raise ShapeError(f"index_select: index must be 1-d or 0-d, got shape {index.shape}")
    if x.ndim == 0:
        if index.numel() != 1:
            raise ShapeError(f"index_select(): Index to scalar can have only 1 value, got {index.numel()} value(s): "
                             f"a 0-d input has one position; pass one index")
        return gather_dim(x.reshape(1), 0, index.reshape(-1), False, "index_select").reshape(())
    return gather_dim(x, normalize_dim(dim, x.ndim), index.reshape(-1), False, "index_select")


def take(x, index, *, out=None):
    """``x`` flattened, read at ``index`` (any shape; negative counts from the end)."""
    from .indexing import index_select as gather_dim
    if out is not None:
        return _into(out, "take", take(x, index))
    _check_index(index, "take")
    return gather_dim(x.reshape(-1), 0, index.reshape(-1), True, "take").reshape(index.shape)


def gather(x, dim, index, *, sparse_grad=False, out=None):
    """``out[i][j][k] = x[index[i][j][k]][j][k]`` along ``dim`` (torch.gather): a flat read of ``x``
    at ``index * stride(dim)`` plus the other coordinates (``index`` no larger than ``x`` off ``dim``)."""
    from .indexing import index_select as gather_dim
    if out is not None:
        return _into(out, "gather", gather(x, dim, index))
    _check_index(index, "gather")
    if x.ndim <= 1 and index.ndim <= 1 and (x.ndim == 0 or index.ndim == 0):   # (torch reads 0-d as 1-d here)
        if not index.numel():
            return index.to(x.dtype)
        size = x.shape[normalize_dim(dim, x.ndim)] if x.ndim else 1
        positions = checked_positions(index.reshape(()) if index.ndim == 0 else index, 0, size, False, "gather")
        return take(x, positions)
    if index.ndim != x.ndim:
        raise ShapeError(f"Index tensor must have the same number of dimensions as input tensor: gather's index has "
                         f"{index.ndim} dims, the input {x.ndim}; give index the input's dims")
    d = normalize_dim(dim, x.ndim)
    for k, (n, m) in enumerate(zip(index.shape, x.shape)):
        if k != d and n > m:
            raise ShapeError(f"gather: index size {n} exceeds the input's {m} along dim {k} (only dim {d} may)")
    strides, acc = [0] * x.ndim, 1
    for k in range(x.ndim - 1, -1, -1):
        strides[k], acc = acc, acc * x.shape[k]
    size = x.shape[d]
    # checked along dim d itself (the flat gather's own check would name the flat position and size)
    flat = checked_positions(index, d, size, False, "gather") * strides[d]
    for k in range(x.ndim):
        if k != d and index.shape[k] > 1:
            shape = [1] * x.ndim
            shape[k] = index.shape[k]
            flat = flat + _arange(index.shape[k], x.device).reshape(tuple(shape)) * strides[k]
    return gather_dim(x.reshape(-1), 0, flat.reshape(-1)).reshape(index.shape)


def take_along_dim(x, indices, dim=None):
    """``gather`` along ``dim`` with ``x`` and ``indices`` broadcast off ``dim``, the indices taken
    modulo that dim's size (torch's: any index is read, negative or past the end; a dim of size 0
    is a ``DivisionByZeroError``, as torch's ``ZeroDivisionError``); ``dim=None``: ``gather`` of
    ``x`` flattened by ``indices`` flattened (a 1-d result, indices in [0, numel), as torch)."""
    if dim is None:
        return gather(x.reshape(-1), 0, indices.reshape(-1))
    d = normalize_dim(dim, x.ndim)
    if indices.ndim != x.ndim:
        raise ShapeError(f"take_along_dim: indices has {indices.ndim} dims, the input {x.ndim}; they must match")
    shape = [max(a, b) for a, b in zip(x.shape, indices.shape)]
    xs, ix = list(shape), list(shape)
    xs[d], ix[d] = x.shape[d], indices.shape[d]
    if not x.shape[d] and indices.numel():   # (torch's index % size: known here, without the data)
        raise DivisionByZeroError(f"ZeroDivisionError: take_along_dim takes the indices modulo the size of dim {d}, "
                                  f"which is 0 (input shape {x.shape}): no index can be read there")
    return gather(x.expand(*xs), d, indices.expand(*ix) % x.shape[d] if x.shape[d] else indices.expand(*ix))


# -- fills and writes along one dim -----------------------------------------------------------------
def _along(x, d, flat_index, n, wrap, name):
    """The bool mask over ``x``'s dim ``d`` (size ``n``) of the positions in ``flat_index`` (checked:
    ``checked_positions``, for op ``name``), and for each position the last ``k`` with
    ``flat_index[k]`` there (0 where none), both shaped to broadcast against ``x``."""
    size = x.shape[d] if x.ndim else 1
    idx = checked_positions(flat_index, d, size, wrap, name)
    hit = _arange(size, x.device).reshape(size, 1) == idx.reshape(1, n)        # (position, k)
    member = hit.any(1)
    shape = [1] * max(x.ndim, 1)
    shape[d] = size
    if n == 0:   # no positions (torch returns the input): amax over an empty list has no identity
        return member.reshape(tuple(shape)), _arange(size, x.device) * 0, tuple(shape)
    last = ops.where(hit, _arange(n, x.device).reshape(1, n), -1).amax(1)
    return member.reshape(tuple(shape)), ops.where(last < 0, 0, last), tuple(shape)


def index_fill(x, dim, index, value):
    """``x`` with the positions ``index`` of dim ``dim`` set to ``value`` (a number or 0-d tensor)."""
    _check_index(index, "index_fill")
    d = normalize_dim(dim, x.ndim) if x.ndim else 0
    flat = index.reshape(-1)
    member, _, shape = _along(x, d, flat, flat.shape[0], True, "index_fill")
    from .torch_ops import masked_fill
    return masked_fill(x, member.reshape(shape if x.ndim else ()), value)


def index_copy(x, dim, index, source):
    """``x`` with the positions ``index`` of dim ``dim`` replaced by ``source``'s slices (the last
    one wins where ``index`` repeats)."""
    _check_index(index, "index_copy")
    d = normalize_dim(dim, x.ndim) if x.ndim else 0
    _check_index_copy(x, d, index, source)
    if index.numel() == 0:   # nothing written (and no slice of an empty source to pick)
        return x.clone()
    flat = index.reshape(-1)
    member, last, shape = _along(x, d, flat, flat.shape[0], False, "index_copy")
    if x.ndim == 0 or source.ndim == 0:   # one position written (torch allows a 0-d source into 1-d)
        return ops.where(member.reshape(shape if x.ndim else ()), source.reshape(()), x)
    picked = index_select(source, d, last)
    return ops.where(member, picked, x)


def _sizes(shape, without=None):
    """``shape`` as torch prints an IntArrayRef (``[3, 4]``), less dim ``without``."""
    return str([n for k, n in enumerate(shape) if k != without])


def _check_index_copy(x, d, index, source):
    """torch's checks of ``index_copy`` arguments (its meta function's, in its order and words)."""
    n = index.numel()
    if index.ndim > 1:
        raise InvalidIndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim}): "
                                f"index has shape {index.shape}; pass a 1-d index")
    if source.ndim == 0 and n != 1:
        raise InvalidIndexError(f"index_copy_(): When source is scalar, index should have one element (got {n}): "
                                f"a 0-d source writes one position; pass one index")
    if source.ndim != x.ndim and source.ndim and x.ndim:
        raise InvalidIndexError(f"index_copy_(): When source and destination are not scalars, their dimensionality "
                                f"must match. Source dimensionality ({source.ndim}), destination dimensionality "
                                f"({x.ndim}): give source the input's dims")
    if index.dtype is not dt.int64:
        raise DTypeError(f"index_copy_(): Expected a long tensor for index, but got {index.dtype.torch_scalar_name}: "
                         f"cast index with .long()")
    if source.dtype is not x.dtype:
        raise DTypeError(f"index_copy_(): self and source expected to have the same dtype, but got (self) "
                         f"{x.dtype.torch_scalar_name} and (source) {source.dtype.torch_scalar_name}: cast source "
                         f"with .to({x.dtype})")
    # (torch prints the slice shapes as sizes joined by spaces)
    mine = [m for k, m in enumerate(x.shape) if k != d]
    theirs = [m for k, m in enumerate(source.shape) if k != d]
    if mine != theirs:
        raise ShapeError(f"index_copy_(): Source/destination tensor must have same slice shapes. Destination slice "
                         f"shape: {' '.join(map(str, mine))} at dimension {d} and source slice shape: "
                         f"{' '.join(map(str, theirs))} at dimension 0. Source {source.shape} must match the input "
                         f"{x.shape} off dim {d}")
    if source.ndim and n != source.shape[d]:
        raise InvalidIndexError(f"index_copy_(): Number of indices ({n}) should be equal to source.size(dim) "
                                f"({source.shape[d]}): pass one index per slice of source along dim {d}")


def index_add(x, dim, index, source, *, alpha=1):
    """``x`` plus ``alpha`` times ``source``'s slices summed into the positions ``index`` of ``dim``:
    a masked sum over the index list (one reduction kernel)."""
    _check_index(index, "index_add")
    d = normalize_dim(dim, x.ndim) if x.ndim else 0
    _check_index_add(x, d, index, source)
    return _index_add(x, d, index, source, alpha)


def _check_index_add(x, d, index, source):
    """torch's checks of ``index_add`` arguments (its meta function's, in its order and words)."""
    n = index.numel()
    if index.ndim > 1:
        raise InvalidIndexError(f"index_add_(): Index is supposed to be a vector, but got dim: {index.ndim} with type: "
                                f"{index.dtype.torch_scalar_name} and size: {_sizes(index.shape)}; pass a 1-d index")
    if source.dtype is not x.dtype:
        raise DTypeError(f"index_add_(): self ({x.dtype.torch_scalar_name}) and source "
                         f"({source.dtype.torch_scalar_name}) must have the same scalar type: cast source with "
                         f".to({x.dtype})")
    if d and d >= source.ndim:
        raise ShapeError(f"index_add_(): Indexing dim {d} is out of bounds of the source tensor with dim "
                         f"{source.ndim}: give source the input's dims")
    if source.ndim == 0 and n != 1:
        # (torch's message evaluates source.size(dim) of the 0-d source, which raises this first)
        raise InvalidIndexError(f"Dimension specified as 0 but tensor has no dimensions: index_add_() of a 0-d "
                                f"source takes one index, got {n}; pass one index")
    if source.ndim and n != source.shape[d]:
        raise ShapeError(f"index_add_(): Number of indices ({n}) should be equal to source.size(dim): "
                         f"({source.shape[d]}), for dim: {d}; pass one index per slice of source along dim {d}")
    both = source.ndim and x.ndim
    if _sizes(x.shape, d if both else None) != _sizes(source.shape, d if both else None):
        raise ShapeError(f"source tensor shape must match self tensor shape, excluding the specified dimension. "
                         f"Got self.shape = {_sizes(x.shape)} source.shape = {_sizes(source.shape)}; give source "
                         f"the input's sizes off dim {d}")


def _index_add(x, d, index, source, alpha=1):
    """``index_add``'s sum of checked arguments (``scatter_add`` of a 0-d input is one too)."""
    if x.ndim == 0:   # one position: torch takes index 0 only
        hit = (checked_positions(index.reshape(-1), 0, 1, False, "index_add") == 0).any()
        return x + (source.reshape(()) * alpha if alpha != 1 else source.reshape(())).to(x.dtype) * hit
    flat = index.reshape(-1)
    n, size = flat.shape[0], x.shape[d]
    idx = checked_positions(flat, d, size, False, "index_add")
    src = source.movedim(d, 0).unsqueeze(1)                                        # (n, 1, rest)
    hit = (idx.reshape(n, 1) == _arange(size, x.device).reshape(1, size))          # (n, size)
    hit = hit.reshape((n, size) + (1,) * (x.ndim - 1))
    wide = dt.opmath(x.dtype) if x.dtype.is_float else (dt.int64 if x.dtype.is_bool else x.dtype)
    added = ops.where(hit, src.to(wide), 0).sum(0).movedim(0, d)
    if alpha != 1:
        added = added * alpha
    out = x.to(wide) + added
    return (out != 0) if x.dtype.is_bool else out.to(x.dtype)


def scatter_add(x, dim, index, src):
    """``x`` plus ``src[i][j]`` at ``[index[i][j]][j]`` (along ``dim``), summed where indices repeat:
    a masked sum over ``dim`` of ``index`` (one reduction kernel)."""
    _check_index(index, "scatter_add")
    if getattr(src, "dtype", x.dtype) is not x.dtype:   # (torch casts nothing here: neither do we)
        raise DTypeError(f"scatter(): Expected self.dtype to be equal to src.dtype: scatter_add's src is "
                         f"{src.dtype}, the input {x.dtype}; cast src with .to({x.dtype})")
    d = normalize_dim(dim, x.ndim) if x.ndim else 0
    _check_scatter_shapes(x, d, index, src)
    if index.numel() == 0:   # nothing added (torch's result is a copy of the input)
        return x.clone()
    if x.ndim == 0:   # torch reads a 0-d tensor as one of shape (1,) here
        return scatter_add(x.reshape(1), 0, index.reshape(-1), src.reshape(-1)).reshape(())
    size, n = x.shape[d], index.shape[d]
    src = _narrowed(src, index.shape)
    idx = checked_positions(index, d, size, False, "scatter_add").movedim(d, 0).unsqueeze(1)  # (n, 1, rest)
    hit = idx == _arange(size, x.device).reshape((1, size) + (1,) * (x.ndim - 1))  # (n, size, rest)
    wide = dt.opmath(x.dtype) if x.dtype.is_float else (dt.int64 if x.dtype.is_bool else x.dtype)
    added = ops.where(hit, src.movedim(d, 0).unsqueeze(1).to(wide), 0).sum(0).movedim(0, d)
    pad = [(0, m - k) for k, m in zip(added.shape, x.shape)]
    if any(hi for _, hi in pad):
        from .torch_ops import pad as pad_fn
        added = pad_fn(added, [v for lo_hi in reversed(pad) for v in lo_hi])
    out = x.to(wide) + added
    return (out != 0) if x.dtype.is_bool else out.to(x.dtype)


def _check_scatter_shapes(x, d, index, src):
    """torch's shape checks of a scatter (``scatter_shape_check``), which reads a 0-d tensor as 1-d."""
    if index.numel() == 0:
        return
    dims = max(x.ndim, 1)
    if max(index.ndim, 1) != dims:
        raise ShapeError(f"Index tensor must have the same number of dimensions as self tensor: index has shape "
                         f"{index.shape}, the input {x.shape}; give index the input's dims")
    if max(src.ndim, 1) != dims:
        raise ShapeError(f"Index tensor must have the same number of dimensions as src tensor: index has shape "
                         f"{index.shape}, src {src.shape}; give src the input's dims")
    def size(t, k):
        return t.shape[k] if t.ndim else 1
    if any(size(index, k) > size(src, k) or (k != d and size(index, k) > size(x, k)) for k in range(dims)):
        raise ShapeError(f"Expected index {_sizes(index.shape)} to be no larger than self {_sizes(x.shape)} apart "
                         f"from dimension {d} and to be no larger size than src {_sizes(src.shape)}; cut index "
                         f"(or grow src) to fit")


def _narrowed(src, shape):
    """``src`` cut to ``shape`` from the front of each dim (torch reads only that much of ``src``)."""
    if tuple(src.shape) == tuple(shape):
        return src
    return src[tuple(slice(0, n) for n in shape)]


# -- reversals, diagonals, differences, scatters into views ------------------------------------------
def flip(x, *dim_args, dims=None):
    """``x`` reversed along ``dims`` (a list, or ints as ``x.flip(0, 2)``): a copy (as torch's), one
    ``FLIP`` node that reads the source at n - 1 - i along each dim (index arithmetic; lazyfuse
    views have no negative strides)."""
    if dims is None:
        dims = dim_args[0] if len(dim_args) == 1 else dim_args
    dims = normalize_dims(dims if isinstance(dims, int) else tuple(dims), x.ndim, "dims")   # (a repeated dim is refused)
    flipped = tuple(d for d in dims if x.shape[d] > 1) if x.ndim else ()
    if not flipped:
        return x.clone()
    return reindexed(x, Op.FLIP, flipped, lambda g: flip(g, flipped))


def reindexed(x, op, arg, gradient):
    """``x`` copied through one index-arithmetic node ``op`` (``FLIP``, ``ROLL``) with ``arg``;
    under autograd the gradient of ``x`` is ``gradient`` of the result's (the inverse reindexing)."""
    if autograd.recording(x):
        with autograd.no_grad():
            out = reindexed(x, op, arg, gradient)
        return autograd.graph.attach(out, op.label, [(x, gradient)])
    src = ops.operand_node(x.device.engine, x, x.dtype, x.shape)
    return result_tensor(x.device, Node(op, (src,), x.dtype, x.shape, arg))


def fliplr(x):
    """``flip(x, [1])`` (at least 2 dims)."""
    if x.ndim < 2:
        raise ShapeError(f"fliplr: input must be at least 2-d, got shape {x.shape}")
    return flip(x, [1])


def flipud(x):
    """``flip(x, [0])`` (at least 1 dim)."""
    if x.ndim < 1:
        raise ShapeError("flipud: input must be at least 1-d")
    return flip(x, [0])


def rot90(x, k=1, dims=(0, 1)):
    """``x`` rotated by ``k`` quarter turns from ``dims[0]`` towards ``dims[1]``."""
    if len(dims) != 2:
        raise ShapeError(f"rot90: dims={tuple(dims)} must name exactly two dims (the rotation plane)")
    a, b = (normalize_dim(d, x.ndim) for d in dims)
    if a == b:
        raise ShapeError(f"rot90: the two dims must differ, got {dims}")
    k %= 4
    if k == 1:
        return flip(x, [b]).transpose(a, b)
    if k == 2:
        return flip(x, [a, b])
    if k == 3:
        return flip(x, [a]).transpose(a, b)
    return x.clone()


def diag_embed(x, offset=0, dim1=-2, dim2=-1):
    """Matrices (in dims ``dim1``, ``dim2`` of the result) with ``x``'s last dim on the ``offset``
    diagonal, zero elsewhere."""
    n = x.shape[-1] + abs(offset)
    ndim = x.ndim + 1
    d1, d2 = normalize_dim(dim1, ndim), normalize_dim(dim2, ndim)
    if d1 == d2:
        raise ShapeError(f"diag_embed: dim1 and dim2 must differ, got {dim1}, {dim2}")
    i = _arange(n, x.device).reshape(n, 1)
    j = _arange(n, x.device).reshape(1, n)
    on = (j - i) == offset
    # the value at (i, j): x[..., min(i, j)] on the diagonal
    pos = ops.where(i < j, i, j).expand(n, n).reshape(-1)
    spread = x.index_select(x.ndim - 1, ops.where(pos < x.shape[-1], pos, 0)) if x.shape[-1] else x
    spread = spread.reshape(x.shape[:-1] + (n, n)) if x.shape[-1] else \
        x.reshape(x.shape[:-1] + (0, 0)).expand(*(x.shape[:-1] + (n, n)))
    out = ops.where(on, spread, 0 if not x.dtype.is_bool else False).to(x.dtype)
    # the two matrix dims from the end to (d1, d2)
    rest = [k for k in range(ndim) if k not in (d1, d2)]
    order = [0] * ndim
    for k, src in zip(rest, range(ndim - 2)):
        order[k] = src
    order[d1], order[d2] = ndim - 2, ndim - 1
    return out.permute(*order)


def diag(x, diagonal=0):
    """A 1-d ``x`` as the ``diagonal`` of a square matrix; a 2-d ``x``'s ``diagonal`` as a 1-d copy."""
    if x.ndim == 1:
        return diag_embed(x, diagonal)
    if x.ndim == 2:
        from .torch_ops import diagonal as diagonal_of
        return diagonal_of(x, diagonal).clone()
    raise ShapeError(f"diag: input must be 1-d or 2-d, got shape {x.shape}")


def diff(x, n=1, dim=-1, prepend=None, append=None):
    """``n``-th forward differences along ``dim`` (``prepend``/``append`` joined first); bool: ``!=``.
    ``n = 0`` is a copy of ``x`` alone, as torch's (which ignores ``prepend``/``append`` then)."""
    from .functions import cat
    if int(n) < 0:
        raise ShapeError(f"diff: n={n} (the order) must be non-negative")
    d = normalize_dim(dim, x.ndim)
    if int(n) < 0:
        raise ShapeError(f"diff: the order n must be non-negative, got {n}")
    if int(n) == 0:
        return x.clone()
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = cat([p if p.ndim == x.ndim else p.expand(*(x.shape[:d] + (1,) + x.shape[d + 1:])) for p in parts], d)
    for _ in range(int(n)):
        size = x.shape[d]
        if size == 0:
            break
        hi, lo = x.narrow(d, 1, size - 1), x.narrow(d, 0, size - 1)
        x = (hi != lo) if x.dtype.is_bool else hi - lo
    return x


def trace(x):
    """The sum of a matrix's main diagonal."""
    from .torch_ops import diagonal as diagonal_of
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, got shape {x.shape}")
    d = diagonal_of(x)
    return d.sum() if not x.dtype.is_bool else d.to(dt.int64).sum()


def _at_least(x, n):
    """torch's ``atleast_{n}d``: 0-d -> (1,) * n; 1-d (k,) -> (1, k) or (1, k, 1); 2-d -> (m, k, 1)."""
    if x.ndim >= n:
        return x
    if x.ndim == 0:
        return x.reshape((1,) * n)
    if n == 2:
        return x.unsqueeze(0)
    return x.reshape(1, x.shape[0], 1) if x.ndim == 1 else x.unsqueeze(-1)


def _stack_along(tensors, dim, least, name):
    from .functions import cat
    if not tensors:
        raise ShapeError(f"{name}: expected a non-empty sequence of tensors")
    return cat([_at_least(t, least) for t in tensors], dim)


def hstack(tensors):
    """``cat`` along dim 1 (dim 0 for 1-d tensors)."""
    first = _at_least(tensors[0], 1) if tensors else None
    return _stack_along(tensors, 0 if first is not None and first.ndim == 1 else 1, 1, "hstack")


def vstack(tensors):
    """``cat`` along dim 0 of the tensors made at least 2-d."""
    return _stack_along(tensors, 0, 2, "vstack")


def dstack(tensors):
    """``cat`` along dim 2 of the tensors made at least 3-d."""
    return _stack_along(tensors, 2, 3, "dstack")


def column_stack(tensors):
    """The tensors as columns: 0-d and 1-d ones as (n, 1), then ``cat`` along dim 1."""
    from .functions import cat
    return cat([t.reshape(-1, 1) if t.ndim <= 1 else t for t in tensors], 1)


def kron(x, other):
    """The Kronecker product: every element of ``x`` times ``other``, in blocks."""
    n = max(x.ndim, other.ndim)
    a = x.reshape((1,) * (n - x.ndim) + x.shape)
    b = other.reshape((1,) * (n - other.ndim) + other.shape)
    ea = a.reshape(tuple(s for d in a.shape for s in (d, 1)))
    eb = b.reshape(tuple(s for d in b.shape for s in (1, d)))
    return (ea * eb).reshape(tuple(p * q for p, q in zip(a.shape, b.shape)))


def cross(x, other, dim=None):
    """The 3-vector cross product along ``dim`` (default: the first dim of size 3)."""
    shape = broadcast_shapes(x.shape, other.shape)
    x, other = x.expand(*shape), other.expand(*shape)
    if dim is None:
        dim = next((d for d, s in enumerate(shape) if s == 3), None)
        if dim is None:
            raise ShapeError(f"cross: no dim of size 3 in shape {shape}")
    d = normalize_dim(dim, len(shape))
    if shape[d] != 3:
        raise ShapeError(f"cross: dim {dim} has size {shape[d]}, not 3")
    from .functions import cat
    from .torch_ops import select
    # (float16/bfloat16 in float32, rounded once (torch's opmath): each product rounded to half
    # first loses the digits the difference of two near-equal products keeps)
    out, wide = x.dtype, dt.opmath(x.dtype)
    a = [select(x, d, k).unsqueeze(d).to(wide) for k in range(3)]
    b = [select(other, d, k).unsqueeze(d).to(wide) for k in range(3)]
    return cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d).to(out)


def _scatter_into(x, src, view_of):
    out = x.clone()
    view_of(out).copy_(src)
    return out


def select_scatter(x, src, dim, index):
    """A copy of ``x`` with ``x.select(dim, index)`` replaced by ``src``."""
    return _scatter_into(x, src, lambda t: t.select(dim, index))


def slice_scatter(x, src, dim=0, start=None, end=None, step=1):
    """A copy of ``x`` with the slice ``start:end:step`` of ``dim`` replaced by ``src``."""
    d = normalize_dim(dim, x.ndim)
    key = (slice(None),) * d + (slice(start, end, step),)
    return _scatter_into(x, src, lambda t: t[key])


def diagonal_scatter(x, src, offset=0, dim1=0, dim2=1):
    """A copy of ``x`` with its ``diagonal(offset, dim1, dim2)`` replaced by ``src``."""
    from .torch_ops import diagonal as diagonal_of
    return _scatter_into(x, src, lambda t: diagonal_of(t, offset, dim1, dim2))


# -- short scans ------------------------------------------------------------------------------------
def _scan_input(x, dim):
    """(x with the scanned dim last, that dim's size, where it was), or None for a long scan."""
    if x.ndim == 0:
        normalize_dim(dim, 0)   # a 0-d tensor still has dims -1 and 0 only, as torch's
        return x.reshape(1), 1, None
    d = normalize_dim(dim, x.ndim)
    n = x.shape[d]
    if n > SHORT_SCAN:
        return None
    return x.movedim(d, -1), n, d


def _triangle(n, device):
    """(i, k) -> k <= i."""
    return _arange(n, device).reshape(1, n) <= _arange(n, device).reshape(n, 1)


def _unscan(out, d, shape):
    return out.reshape(shape) if d is None else out.movedim(-1, d)


def _torch_call(name, *args, **kwargs):
    """torch's own ``name`` as an extern (where the composition would not match it)."""
    import torch
    from .extern import extern
    return extern(getattr(torch, name), *args, **kwargs)


def _scan_dtype(x, dtype):
    """A running sum's or product's dtype: ``dtype``, else integers and bool in int64, as torch."""
    return dt.as_dtype(dtype) if dtype is not None else x.dtype if x.dtype.is_float else dt.int64


def cumsum(x, dim, *, dtype=None):
    """Running sums along ``dim`` (integers and bool sum in int64, as torch)."""
    return ops.scan(Op.CUMSUM, x, dim, _scan_dtype(x, dtype))


def cumprod(x, dim, *, dtype=None):
    """Running products along ``dim`` (integers and bool in int64, as torch)."""
    return ops.scan(Op.CUMPROD, x, dim, _scan_dtype(x, dtype))


def _cumext(x, dim, largest: bool, name: str):
    from .tensor import MaxMin
    got = _scan_input(x, dim)
    if got is None:
        return _torch_call(name, x, dim)
    y, n, d = got
    if x.numel() == 0:   # empty results, as torch's (the composition's amax of an empty dim refuses)
        from .creation import zeros
        return MaxMin(x.clone(), zeros(x.shape, dtype=dt.int64, device=x.device))
    tri = _triangle(n, x.device)
    big = y.unsqueeze(-2)                                                         # (..., 1, k)
    if x.dtype.is_bool:
        fill = not largest
    elif x.dtype.is_float:
        fill = -math.inf if largest else math.inf
    else:
        info = dt.iinfo(x.dtype)   # (the dtype's own extremes: a wider one would wrap in int8)
        fill = info.min if largest else info.max
    masked = ops.where(tri, big, fill)
    if x.dtype.is_bool:
        values = masked.any(-1) if largest else masked.all(-1)
    else:
        values = masked.amax(-1) if largest else masked.amin(-1)
    # the index: the last k <= i holding the running value (a NaN, once met, is the value after it)
    ks = _arange(n, x.device).reshape(1, n)
    same = (big == values.unsqueeze(-1))
    if x.dtype.is_float:
        nan_seen = ops.where(tri, big.isnan(), False).any(-1, keepdim=True)
        values = ops.where(nan_seen.squeeze(-1), math.nan, values)
        same = ops.where(nan_seen, big.isnan(), same)
    indices = ops.where(tri & same, ks, -1).amax(-1)
    return MaxMin(_unscan(values, d, x.shape).to(x.dtype), _unscan(indices, d, x.shape))


def cummax(x, dim):
    """(running maximum, its last index) along ``dim``."""
    return _cumext(x, dim, True, "cummax")


def cummin(x, dim):
    """(running minimum, its last index) along ``dim``."""
    return _cumext(x, dim, False, "cummin")


def logcumsumexp(x, dim):
    """``log(cumsum(exp(x)))`` along ``dim``, each step a log-add-exp of the running value (no
    overflow; integers in float32)."""
    return ops.scan(Op.LOGCUMSUMEXP, x, dim, x.dtype if x.dtype.is_float else dt.float32)


# -- matmul and its aliases -------------------------------------------------------------------------
def _dims(name, **tensors):
    for what, (t, n) in tensors.items():
        if t.ndim != n:
            raise ShapeError(f"{name}: {what} must be {n}-d, got shape {t.shape}")


def _matmul(x, other):
    """The matrix product with torch's broadcasting (``x @ other``)."""
    from .functions import matmul
    return matmul(x, other)


def mm(x, mat2):
    """The matrix product of two 2-d tensors."""
    _dims("mm", input=(x, 2), mat2=(mat2, 2))
    return _matmul(x, mat2)


def bmm(x, mat2):
    """The batched matrix product of two 3-d tensors."""
    _dims("bmm", input=(x, 3), mat2=(mat2, 3))
    return _matmul(x, mat2)


def mv(x, vec):
    """A 2-d tensor times a 1-d one."""
    _dims("mv", input=(x, 2), vec=(vec, 1))
    return _matmul(x, vec)


def dot(x, other):
    """The inner product of two 1-d tensors (as ``sum(x * other)``)."""
    _dims("dot", input=(x, 1), tensor=(other, 1))
    if x.shape != other.shape:   # (x * other would broadcast a 1-element vector)
        raise ShapeError(f"dot: inconsistent tensor size, expected tensor {list(x.shape)} and src {list(other.shape)} "
                         f"to have the same number of elements, but got {x.shape[0]} and {other.shape[0]} elements "
                         "respectively (as torch)")
    if x.dtype is not other.dtype:
        raise DTypeError(f"dot: expected both vectors to have the same dtype, got {x.dtype.name} and "
                         f"{other.dtype.name}")
    wide = dt.opmath(x.dtype)
    return (x.to(wide) * other.to(wide)).sum().to(x.dtype)


def outer(x, vec2):
    """The outer product of two 1-d tensors."""
    _dims("outer", input=(x, 1), vec2=(vec2, 1))
    return x.reshape(-1, 1) * vec2.reshape(1, -1)


def inner(x, other):
    """The sum of products over the last dims (a scalar times a tensor for 0-d operands)."""
    if x.ndim == 0 or other.ndim == 0:
        return x * other
    if x.ndim == 1 and other.ndim == 1:
        return dot(x, other) if x.dtype is other.dtype else (x * other).sum()
    return _matmul(x, other.movedim(-1, 0) if other.ndim > 1 else other) if other.ndim <= 2 else \
        _matmul(x.reshape(-1, x.shape[-1]), other.reshape(-1, other.shape[-1]).transpose(0, 1)).reshape(
            x.shape[:-1] + other.shape[:-1])


def _scaled_sum(x, a, b, beta, alpha, product=None):
    """``beta * x + alpha * (a @ b)`` (or ``product(a, b)``) as torch's fused BLAS calls compute it:
    ``beta == 0`` ignores ``x`` (NaNs in it too); integer tensors take ``int(beta)``, ``int(alpha)``;
    float16/bfloat16 multiply in float32 and round once."""
    out = dt.promote_types(x.dtype, dt.promote_types(a.dtype, b.dtype))
    if not out.is_float:
        beta, alpha = int(beta), int(alpha)
    wide = dt.opmath(out)
    value = (product or _matmul)(a.to(wide), b.to(wide))
    if alpha != 1:
        value = value * alpha
    if beta == 0:
        return value.expand(*broadcast_shapes(x.shape, value.shape)).contiguous().to(out)
    return ((x.to(wide) * beta if beta != 1 else x.to(wide)) + value).to(out)


def addmm(x, mat1, mat2, *, beta=1, alpha=1):
    """``beta * x + alpha * (mat1 @ mat2)``."""
    _dims("addmm", mat1=(mat1, 2), mat2=(mat2, 2))
    return _scaled_sum(x, mat1, mat2, beta, alpha)


def addmv(x, mat, vec, *, beta=1, alpha=1):
    """``beta * x + alpha * (mat @ vec)``."""
    _dims("addmv", mat=(mat, 2), vec=(vec, 1))
    return _scaled_sum(x, mat, vec, beta, alpha)


def baddbmm(x, batch1, batch2, *, beta=1, alpha=1):
    """``beta * x + alpha * (batch1 @ batch2)`` per batch."""
    _dims("baddbmm", batch1=(batch1, 3), batch2=(batch2, 3))
    return _scaled_sum(x, batch1, batch2, beta, alpha)


def addbmm(x, batch1, batch2, *, beta=1, alpha=1):
    """``beta * x + alpha * sum_b(batch1[b] @ batch2[b])`` (float16/bfloat16: torch's own, which
    rounds after each batch's product)."""
    _dims("addbmm", batch1=(batch1, 3), batch2=(batch2, 3))
    if dt.opmath(batch1.dtype) is not batch1.dtype:
        return _torch_call("addbmm", x, batch1, batch2, beta=beta, alpha=alpha)
    b, n, k = batch1.shape
    m = batch2.shape[2]
    return _scaled_sum(x, batch1.permute(1, 0, 2).reshape(n, b * k), batch2.reshape(b * k, m), beta, alpha)


def addr(x, vec1, vec2, *, beta=1, alpha=1):
    """``beta * x + alpha * outer(vec1, vec2)`` (float16/bfloat16: torch's own, whose rounding steps
    the composition does not reproduce)."""
    if dt.opmath(vec1.dtype) is not vec1.dtype:
        return _torch_call("addr", x, vec1, vec2, beta=beta, alpha=alpha)
    return _scaled_sum(x, vec1, vec2, beta, alpha, outer)


# (a plain torch tensor argument, an index or an operand, is uploaded as elementwise ops upload one)
METHODS = {f.__name__: ops.uploading(f) for f in (
    index_select, take, gather, take_along_dim, index_fill, index_copy, index_add, scatter_add,
    flip, fliplr, flipud, rot90, diag_embed, diag, diff, select_scatter, slice_scatter, diagonal_scatter,
    trace, kron, cross,
    cumsum, cumprod, cummax, cummin, logcumsumexp, mm, bmm, mv, dot, outer, inner, addmm, addmv, baddbmm, addbmm, addr)}
METHODS.update({"vdot": METHODS["dot"], "ger": METHODS["outer"], "matmul": ops.uploading(_matmul)})
FUNCTIONS = {f.__name__: f for f in (hstack, vstack, dstack, column_stack)}
FUNCTIONS["row_stack"] = vstack

__all__ = ["METHODS", "FUNCTIONS", "SHORT_SCAN"]

"""The memory layout torch gives a new elementwise result: the strides it allocates it with.

torch does not make an elementwise result contiguous: it follows its operands' layout, so that
``x.t() + 1`` is ``x + 1`` read and written in memory order (TensorIterator's fast setup and
``reorder_dimensions``), and ``clone``/``*_like``/``.to(dtype)`` with ``preserve_format`` (their
default) keep a dense input's strides or the order of a strided one (``infer_dense_strides``).
Users see it through ``.stride()``, ``is_contiguous()`` and ``.view()`` after an op. These rules
are torch's, step for step (their comments say which part of torch each step is); they only
compute strides from shapes and strides (no device, no values).

A layout is a ``Layout``: ``order`` lists the dims outermost first (the result's storage is
contiguous in the permuted shape, ``stored_shape``), ``strides`` are torch's exact strides for the
result (they can differ from the permuted storage's only in dims of size 0 or 1, which address no
other element), ``view`` the result's view of that storage. ``None`` means row-major: the common
case, which callers leave as it was. The rules take the operands' views and are memoized per
(shape, views): a program records the same few layouts over and over, and a view hashes once.
"""
from __future__ import annotations

import functools
from .shapes import contiguous_strides
from .view import View

NUMBER = View((), ())   # a Python number operand, to the rule: torch wraps it as a 0-d tensor


class Layout:
    """A result's layout (see the module's docstring)."""
    __slots__ = ("order", "strides", "stored_shape", "view", "_reads")

    def __init__(self, order: tuple, strides: tuple, shape: tuple):
        self.order = order                                     # the result's dims, outermost first in memory
        self.strides = strides                                 # torch's strides for the result
        self.stored_shape = tuple(shape[d] for d in order)     # its row-major storage's shape: the dims in order
        self.view = View(shape, strides, 0)                    # the result's view of that storage
        self._reads = {}

    def stored_view(self, view: View) -> View:
        """An operand's ``view`` broadcast to the result's shape and permuted into its memory
        order: the operand read in that order (memoized per layout, itself memoized: a program
        lays out the same few views)."""
        read = self._reads.get(view)
        if read is None:
            read = self._reads[view] = view.expand(self.view.shape).permute(self.order)
        return read


def non_overlapping_and_dense(shape: tuple, strides: tuple) -> bool:
    """torch's ``is_non_overlapping_and_dense``: the elements fill a block with no gaps and no
    element twice, in some order of the dims (dims of size 0 or 1 do not count; an empty tensor
    is, whatever its strides)."""
    if 0 in shape:
        return True
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    dims = sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: strides[d])
    required = 1
    for d in dims:
        if strides[d] != required:
            return False
        required *= shape[d]
    return True


# torch's channels-last formats by rank: the dims outermost first in memory (N, H, W, C; N, D, H, W, C)
CHANNELS_LAST_ORDERS = {4: (0, 2, 3, 1), 5: (0, 2, 3, 4, 1)}


def is_channels_last(shape: tuple, strides: tuple, rank: int) -> bool:
    """torch's ``is_contiguous(memory_format=channels_last)`` (``rank`` 4) or ``channels_last_3d``
    (5): dense with the channels innermost, size-1 dims' strides not counting; False at another
    rank."""
    if len(shape) != rank:
        return False
    expected = 1
    for d in reversed(CHANNELS_LAST_ORDERS[rank]):
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def suggests_channels_last(shape: tuple, strides: tuple) -> bool:
    """Whether torch's ``suggest_memory_format()`` is a channels-last format (the one of the
    tensor's rank): its ``is_channels_last_strides_2d_s4``/``_3d_s5``, which ``.to(memory_format=)``
    asks to decide whether the tensor is already in that format. Ambiguous strides (a size-1
    channel dim, an N111 tensor) suggest contiguous_format, as torch's."""
    order = CHANNELS_LAST_ORDERS.get(len(shape))
    if order is None or strides[1] == 0:
        return False
    minimum = 0
    for d in reversed(order):
        if shape[d] == 0 or strides[d] < minimum or d == 0 and minimum == strides[1]:
            return False
        minimum = strides[d] * shape[d]   # (shape[d] >= 1 here)
    return True


@functools.lru_cache(maxsize=1024)
def channels_last_layout(shape: tuple):
    """The layout of a new tensor of ``shape`` (4-d or 5-d) in torch's channels-last format of its
    rank (``get_channels_last_strides_2d``/``_3d``: no clamping of size-0 dims, as torch's)."""
    order = CHANNELS_LAST_ORDERS[len(shape)]
    strides = [0] * len(shape)
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return _layout(order, tuple(strides), shape)


def _sorted_dims(shape: tuple, operand_strides: tuple, ties_by_size_then_next: bool) -> list:
    """The dims fastest first, as torch's insertion sort with ambiguous comparisons orders them.

    Each dim pair asks the operands in order: the first one with a nonzero stride in both dims
    and unequal strides decides (the smaller stride is faster); a zero stride (a broadcast dim)
    abstains. Equal strides: the larger dim goes after the smaller (else the next operand is
    asked, in TensorIterator; ``infer_dense_strides`` stops there). Nobody decides: the dims keep
    their row-major order, which is what keeps size-1 dims and ties in place."""
    def should_swap(dim0: int, dim1: int) -> int:
        for strides in operand_strides:
            s0, s1 = strides[dim0], strides[dim1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 < s1:
                return -1
            if s0 > s1:
                return 1
            if shape[dim0] > shape[dim1]:
                return 1
            if not ties_by_size_then_next:
                return 0
        return 0

    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))
    for i in range(1, ndim):
        dim1 = i
        for dim0 in range(i - 1, -1, -1):
            comparison = should_swap(perm[dim0], perm[dim1])
            if comparison > 0:
                perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
                dim1 = dim0
            elif comparison < 0:
                break
    return perm


def _layout(order: tuple, strides: tuple, shape: tuple):
    """``None`` for torch's row-major strides, else the layout (see the module's docstring).
    A size-1 dim keeps its place in ``order`` (it addresses one element wherever it is): so an
    order that moves only size-1 dims is the identity, a storage that is row-major's, and
    ``ops.laid_out`` records it as it is (``x.permute(1, 0, 2)`` of a (2, 1, 1) tensor)."""
    if strides == contiguous_strides(shape):
        return None
    wide = iter([d for d in order if shape[d] != 1])
    return Layout(tuple(d if shape[d] == 1 else next(wide) for d in range(len(shape))), strides, shape)


def _order_of(shape: tuple, strides: tuple) -> tuple:
    """The dims outermost first for a dense ``strides`` (ties, size-1 dims: row-major order)."""
    return tuple(sorted(range(len(shape)), key=lambda d: (-strides[d] if shape[d] > 1 else 0, d)))


@functools.lru_cache(maxsize=4096)
def elementwise_layout(shape: tuple, views: tuple):
    """The layout of an elementwise op's result of ``shape`` (the broadcast shape) from its
    operands' views in torch's order (a Python number is ``NUMBER``, a 0-d tensor, as torch wraps
    it). TensorIterator's rule (``compute_fast_setup_type``, ``compute_strides``,
    ``reorder_dimensions``, ``allocate_or_resize_outputs``)."""
    ndim = len(shape)
    if ndim <= 1:
        return None
    operands = [(v.shape, v.strides) for v in views]
    if all(s == shape for s, _ in operands):   # the fast setup: operands of one shape
        if all(_contiguous_up_to_ones(s, st) for s, st in operands):
            return None
        if all(is_channels_last(s, st, 4) for s, st in operands):
            return channels_last_layout(shape)
        first = operands[-1][1]   # (torch compares from the last operand back)
        if all(st == first for _, st in operands) and non_overlapping_and_dense(shape, first):
            return _layout(_order_of(shape, first), first, shape)
    # each operand's strides over the broadcast shape; a broadcast dim (and a missing one) is 0
    broadcast = []
    for s, st in operands:
        lead = ndim - len(s)
        broadcast.append((0,) * lead + tuple(0 if size == 1 and shape[lead + i] != 1 else st[i]
                                             for i, size in enumerate(s)))
    perm = _sorted_dims(shape, tuple(broadcast), True)
    if perm == list(range(ndim - 1, -1, -1)):
        return None   # torch allocates a plain contiguous result
    strides = [0] * ndim
    step = 1
    for d in perm:   # torch's compatible_stride: a size-0 dim makes the slower strides 0
        strides[d] = step
        step *= shape[d]
    return _layout(tuple(reversed(perm)), tuple(strides), shape)


def _contiguous_up_to_ones(shape: tuple, strides: tuple) -> bool:
    """torch's ``is_contiguous()``: row-major, ignoring the strides of size-1 dims (all of them for
    an empty tensor)."""
    if 0 in shape:
        return True
    return all(st == cs for st, cs, s in zip(strides, contiguous_strides(shape), shape) if s != 1)


@functools.lru_cache(maxsize=4096)
def preserved_layout(view: View):
    """The layout ``clone``/``*_like``/``.to`` give a copy of ``view`` with
    ``memory_format=torch.preserve_format``: a non-overlapping dense tensor's own strides, else
    strides that keep its dims' order (torch's ``infer_dense_strides``)."""
    shape, strides = view.shape, view.strides
    if non_overlapping_and_dense(shape, strides):
        return _layout(_order_of(shape, strides), strides, shape)
    ndim = len(shape)
    if ndim <= 1:
        return None
    perm = _sorted_dims(shape, (strides,), False)
    out = [0] * ndim
    step = 1
    for d in perm:   # (a size-0 dim counts as 1 here, unlike TensorIterator's)
        out[d] = step
        if shape[d] > 1:
            step *= shape[d]
    return _layout(tuple(reversed(perm)), tuple(out), shape)

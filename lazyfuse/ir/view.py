"""Strided views: how a tensor reads its storage, composed without copies where strides allow.

A ``View`` maps a multi-index of ``shape`` to an element offset into a storage's flat,
contiguous layout: ``offset + sum(i_k * strides_k)``. Permute, expand, slicing, squeeze and
unsqueeze always compose into a new View; ``reshape`` does exactly when torch's ``view``
would succeed (same stride algorithm), and returns ``None`` otherwise so that the caller
makes a copy — the same aliasing a torch user expects (docs/semantics.md, Views and in-place writes).
"""
from __future__ import annotations

import functools

from .shapes import contiguous_strides, prod


class View:
    """Immutable; hashed once (views are part of every plan key, so hashing must be cheap)."""

    __slots__ = ("shape", "strides", "offset", "_hash", "_contiguous", "_row_major")

    def __init__(self, shape: tuple, strides: tuple, offset: int = 0):
        self.shape = shape
        self.strides = strides
        self.offset = offset
        self._hash = hash((shape, strides, offset))
        self._contiguous = None   # is_contiguous(), computed on first use
        self._row_major = None    # is_row_major(), likewise

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other) -> bool:
        return self is other or (isinstance(other, View) and self._hash == other._hash and self.shape == other.shape
                                 and self.strides == other.strides and self.offset == other.offset)

    def __repr__(self) -> str:
        return f"View(shape={self.shape}, strides={self.strides}, offset={self.offset})"

    @staticmethod
    def contiguous(shape) -> "View":
        return contiguous_view(tuple(shape))

    @property
    def numel(self) -> int:
        return prod(self.shape)

    def is_contiguous(self) -> bool:
        """True when the view reads a dense, row-major block starting at its offset (an empty view
        always, as torch's: it reads nothing)."""
        c = self._contiguous
        if c is None:
            c = self._contiguous = 0 in self.shape or all(
                st == cs for st, cs, s in zip(self.strides, contiguous_strides(self.shape), self.shape) if s != 1)
        return c

    def is_row_major(self) -> bool:
        """True when the strides are exactly the row-major ones (size-1 dims too, unlike
        ``is_contiguous``): a new result's layout follows an operand's only when one is not
        (``ir/layout.py``)."""
        r = self._row_major
        if r is None:
            r = self._row_major = self.strides == contiguous_strides(self.shape)
        return r

    def covers(self, numel: int) -> bool:
        """True when the view is exactly the whole storage of ``numel`` elements, in order."""
        return self.offset == 0 and self.numel == numel and self.is_contiguous()

    def has_overlap(self) -> bool:
        """True when two indices map to one element (an expanded dim): not writable. A view with
        no elements has no two indices (torch lets an empty expanded view be written)."""
        return 0 not in self.shape and any(st == 0 and s > 1 for st, s in zip(self.strides, self.shape))

    def permute(self, order) -> "View":
        return _permuted(self, tuple(order))

    def _permute(self, order: tuple) -> "View":
        return View(tuple(self.shape[o] for o in order), tuple(self.strides[o] for o in order), self.offset)

    def expand(self, shape) -> "View":
        return _expanded(self, tuple(shape))

    def _expand(self, shape: tuple) -> "View":
        lead = len(shape) - len(self.shape)
        strides = [0] * lead
        for i, (old, new) in enumerate(zip(self.shape, shape[lead:])):
            strides.append(self.strides[i] if old == new else 0)
        return View(tuple(shape), tuple(strides), self.offset)

    def slice(self, dim: int, start: int, stop: int, step: int) -> "View":
        size = max(0, (stop - start + step - 1) // step)
        shape = self.shape[:dim] + (size,) + self.shape[dim + 1:]
        strides = self.strides[:dim] + (self.strides[dim] * step,) + self.strides[dim + 1:]
        offset = self.offset + start * self.strides[dim] if size else self.offset
        return View(shape, strides, offset)

    def select(self, dim: int, index: int) -> "View":
        return View(self.shape[:dim] + self.shape[dim + 1:], self.strides[:dim] + self.strides[dim + 1:],
                    self.offset + index * self.strides[dim])

    def unsqueeze(self, dim: int) -> "View":
        inner = self.strides[dim] * self.shape[dim] if dim < len(self.shape) else 1
        return View(self.shape[:dim] + (1,) + self.shape[dim:], self.strides[:dim] + (inner,) + self.strides[dim:],
                    self.offset)

    def reshape(self, shape) -> "View | None":
        """torch's ``computeStride``: the view's strides for ``shape``, or None if a copy is needed."""
        return _reshaped(self, tuple(shape))

    def _reshape(self, shape: tuple) -> "View | None":
        if self.offset == 0 and self.numel and self.is_contiguous():
            return contiguous_view(shape)   # the shared instance: a tensor reading it whole takes a fast path
        if self.numel == 0 or self.is_contiguous():
            return View(shape, contiguous_strides(shape), self.offset)
        new_strides = [0] * len(shape)
        view_d = len(shape) - 1
        chunk_base_stride = self.strides[-1] if self.strides else 1
        tensor_numel, view_numel = 1, 1
        for tensor_d in range(len(self.shape) - 1, -1, -1):
            tensor_numel *= self.shape[tensor_d]
            if tensor_d == 0 or (self.shape[tensor_d - 1] != 1 and
                                 self.strides[tensor_d - 1] != tensor_numel * chunk_base_stride):
                while view_d >= 0 and (view_numel < tensor_numel or shape[view_d] == 1):
                    new_strides[view_d] = view_numel * chunk_base_stride
                    view_numel *= shape[view_d]
                    view_d -= 1
                if view_numel != tensor_numel:
                    return None
                if tensor_d > 0:
                    chunk_base_stride = self.strides[tensor_d - 1]
                    tensor_numel, view_numel = 1, 1
        if view_d != -1:
            return None
        return View(shape, tuple(new_strides), self.offset)


# Views are immutable and a program makes the same few over and over (each op's recording
# reshapes, transposes or broadcasts its operands): the derived views are memoized.
@functools.lru_cache(maxsize=4096)
def _reshaped(view: View, shape: tuple) -> View | None:
    return view._reshape(shape)


@functools.lru_cache(maxsize=4096)
def _permuted(view: View, order: tuple) -> View:
    return view._permute(order)


@functools.lru_cache(maxsize=4096)
def _expanded(view: View, shape: tuple) -> View:
    return view._expand(shape)


@functools.lru_cache(maxsize=4096)
def contiguous_view(shape: tuple) -> View:
    """The row-major view of a whole storage of ``shape`` (a tuple), one shared instance per shape."""
    return View(shape, contiguous_strides(shape), 0)

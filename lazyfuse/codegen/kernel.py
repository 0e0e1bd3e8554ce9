"""The one kernel description both printers (C and Triton) read.

A ``Kernel`` is a loop nest over ``outer`` variables (parallel) and, for kernels with
reductions, ``inner`` variables (the reduced extent). Its values form a DAG of ``Expr``
nodes: loads through affine indices, runtime scalars, elementwise ops (the IR's ``Op``),
random numbers, and ``Acc`` — the result of one reduction ``Stage``. A matmul-template kernel
(``matmul`` set, Triton devices only) computes one tiled ``a @ b`` per output tile and runs
its ``stores`` as the fused epilogue, reading the product as ``MatmulValue``. Stages run in order
for each outer index (a later stage may read an earlier one's result: variance reads the
mean); ``stores`` then write outer-context values. A *foreach* kernel (``segments`` set) is
several pointwise kernels over their own iteration spaces launched as one (an optimizer step
over every parameter): its segments share its arguments and runtime scalars, and it has no
loops or stores of its own. Nothing here knows about devices.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from ..ir.dtypes import DType
from ..ir.node import Op, post_order
from . import index as ix
from .index import Affine, Var


class Expr:
    __slots__ = ()


@dataclass(frozen=True, eq=False)
class Load(Expr):
    arg: int
    index: Affine
    dtype: DType


@dataclass(frozen=True, eq=False)
class Scalar(Expr):
    slot: int
    dtype: DType


def is_python_scalar(e: Expr) -> bool:
    """A kernel scalar argument (a Python number recorded into the op), through casts: torch
    computes ``x ** 2`` with a Python 2 by shortcuts (x * x), with a tensor 2 by pow."""
    while isinstance(e, Apply) and e.op is Op.CAST:
        e = e.srcs[0]
    return isinstance(e, Scalar)


@dataclass(frozen=True, eq=False)
class IndexValue(Expr):
    """An index expression used as a value (arange)."""
    index: Affine
    dtype: DType


@dataclass(frozen=True, eq=False)
class Random(Expr):
    """Counter-based random numbers: a hash of (seed, offset + index)."""
    seed: Expr
    offset: Expr
    index: Affine
    normal: bool
    dtype: DType


@dataclass(frozen=True, eq=False)
class Apply(Expr):
    op: Op
    srcs: tuple
    dtype: DType
    arg: object = None   # the IR node's attribute (CHECK_INDEX's (op name, dim, wrap))


@dataclass(frozen=True, eq=False)
class MatmulValue(Expr):
    """The matmul result of a matmul-template kernel at the kernel's output index (its
    epilogue reads it like any value)."""
    dtype: DType


@dataclass(frozen=True, eq=False)
class Acc(Expr):
    stage: int
    dtype: DType


# scan stages: the running value along the inner extent, read by the kernel's ``inner_stores``
# at each position (a scan kernel has this one stage)
SCANS = frozenset({Op.CUMSUM, Op.CUMPROD, Op.LOGCUMSUMEXP})


@dataclass(frozen=True)
class Stage:
    op: Op            # SUM, PROD, MAX, MIN, ARGMAX, ARGMIN, or a scan (SCANS)
    value: Expr       # evaluated over the inner loop
    dtype: DType      # the result's dtype
    arg_index: Affine | None  # for ARGMAX/ARGMIN: the flat position along the reduced extent


@dataclass(frozen=True)
class Store:
    arg: int
    index: Affine
    value: Expr


@dataclass(frozen=True)
class Matmul:
    """The tiled ``a @ b`` of a matmul-template kernel. The kernel's outer loops are the
    output's (batch..., m, n); ``k`` is the contraction. ``a_index`` addresses ``a`` over
    (batch, m, k), ``b_index`` addresses ``b`` over (batch, k, n): any strides, broadcast batch
    dims included (stride 0). ``dtype`` is the operands' dtype; products accumulate in float32
    (float64 for float64 operands)."""
    a_arg: int
    a_index: Affine
    b_arg: int
    b_index: Affine
    m: Var
    n: Var
    k: Var
    dtype: DType


@dataclass(frozen=True)
class KernelArg:
    dtype: DType
    written: bool


@dataclass(frozen=True)
class Kernel:
    name: str
    outer: tuple      # Vars, outermost first
    inner: tuple      # Vars of the reduced extent (empty for pointwise kernels)
    stages: tuple     # Stage
    stores: tuple     # Store
    args: tuple       # KernelArg, bound to buffers at launch
    scalars: tuple    # DType of each runtime scalar, read from the launch metadata
    # row-wise kernels (softmax, layer_norm): stores run over the inner extent again, after
    # every stage, reading the stages' results (the reduced values broadcast along the row)
    inner_stores: tuple = ()
    matmul: Matmul | None = None   # a matmul template kernel: ``stores`` are its epilogue
    segments: tuple = ()           # a foreach kernel: pointwise Kernels with this one's args and scalars
    # a row-wise kernel whose rows run across memory, its result laid out in another order than
    # its reduction's input (planner.Group.row_order: x.t() - x.t().amax(-1, keepdim=True))
    rows_across_memory: bool = False

    @functools.cached_property
    def index_checks(self) -> tuple:
        """The kernel's index range checks (``Apply`` of ``Op.CHECK_INDEX``), in a fixed order:
        check ``k`` that meets an index out of range writes the index to the metadata word
        ``error_flag_word + 1 + k``, then the code ``INDEX_CODE + k`` to the flag word."""
        return tuple(e for e in walk(self._flag_roots()) if isinstance(e, Apply) and e.op is Op.CHECK_INDEX)

    @functools.cached_property
    def error_flag_word(self) -> int | None:
        """The launch-metadata word of this kernel's error flag, after its header and scalars, or
        None for a kernel that cannot fail (no flag, no cost). A kernel that divides integers
        (``divides_integers``) writes ``DIVISION_CODE`` there when a divisor is 0, one with
        ``index_checks`` its check's code when an index is out of range; the launcher reads it
        after the kernel (runtime/cpu.py ``FlaggedLaunch``) and raises the error it names, so the
        division and the check stay fused and the host never reads their operands. Races
        between threads leave one failing lane's code: each is a true error. (Cached: a launch
        asks; a frozen dataclass's cached_property is kept in its ``__dict__``, outside its
        fields and their equality.)"""
        if not self.index_checks and not any(divides_integers(e) for e in walk(self._flag_roots())):
            return None
        return self.scalar_word(len(self.scalars))

    @functools.cached_property
    def sizes(self) -> tuple:
        """The kernel's runtime sizes: the numbers its index arithmetic reads that a size can be
        (``index.kernel_sizes``: a source's row length, a piece's start, a slice's offset), in the
        launch metadata after the loop extents, so that a new size of the program is the same
        code. A foreach or matmul-template kernel prints its sizes as literals (none)."""
        if self.segments or self.matmul is not None or not ix.SHAPE_GENERIC:
            return ()
        return ix.kernel_sizes(affines(self), var_list(self))

    def index_check_info(self) -> tuple:
        """What a launcher needs to name each failed check without this Kernel: per check, (op
        name, dim, wrap, the metadata word of the dim's size, a runtime scalar)."""
        return tuple((*e.arg, self.scalar_word(e.srcs[1].slot)) for e in self.index_checks)

    def scalar_word(self, slot: int) -> int:
        """The launch-metadata word of scalar ``slot``: after the header (the word count, the
        loop extents, the kernel's runtime ``sizes``), as both printers read it."""
        return 2 + len(self.outer) + len(self.inner) + len(self.sizes) + slot

    def _flag_roots(self) -> list:
        parts = self.segments or (self,)
        return [s.value for k in parts for s in k.stores + k.inner_stores] + \
            [st.value for k in parts for st in k.stages]

    @property
    def outer_numel(self) -> int:
        """Output elements (a foreach kernel: of all its segments together)."""
        if self.segments:
            return sum(seg.outer_numel for seg in self.segments)
        n = 1
        for v in self.outer:
            n *= v.extent
        return n

    @property
    def inner_numel(self) -> int:
        n = 1
        for v in self.inner:
            n *= v.extent
        return n

    @property
    def kind(self) -> str:
        if self.matmul is not None:
            return "matmul"
        if self.segments:
            return "foreach"
        if self.stages and self.stages[0].op in SCANS:
            return "scan"
        return "reduce" if self.stages else "pointwise"


HALF = frozenset({"float16", "bfloat16"})


def rounds_to_storage(e: Expr) -> bool:
    """Whether a printer rounds ``e`` through its 16-bit storage type where it is computed.

    float16/bfloat16 values are computed in float32, but torch eager rounds every op's result
    to the op's dtype, and fusion must not change what a program computes (a float16
    ``8 ** 8`` is inf, so ``v - v`` is nan, not 0). Loads and BITCASTs (bits of the dtype) are exact, a CAST from another dtype
    rounds by itself (one to the same dtype does not, and may hold a scalar: ``full``), and
    runtime scalars stay float32 as torch's scalar operands do."""
    if e.dtype.name not in HALF:
        return False
    if isinstance(e, Apply):
        return e.op is not Op.BITCAST and (e.op is not Op.CAST or e.srcs[0].dtype is e.dtype)
    return isinstance(e, (Acc, MatmulValue, Random))


# the codes a kernel's error flag holds (``Kernel.error_flag_word``; 0: no error): an integer
# division by zero, and index check k's ``INDEX_CODE + k`` (``Kernel.index_checks``)
DIVISION_CODE = 1
INDEX_CODE = 2

# the integer ops torch's CPU refuses for a zero divisor (``RuntimeError: ZeroDivisionError``)
INTEGER_DIVISIONS = frozenset({Op.FLOORDIV, Op.MOD, Op.FMOD})


def divides_integers(e: Expr) -> bool:
    """Whether ``e`` is an integer floor_divide, remainder or fmod (its operands' dtype decides,
    as the printers' rules do): its divisor is checked for zero (``Kernel.error_flag_word``)."""
    return isinstance(e, Apply) and e.op in INTEGER_DIVISIONS and not e.srcs[0].dtype.is_float


def walk(roots, known=()) -> list:
    """Every Expr reachable from ``roots``, sources first, each once (identity); nodes whose id
    is in ``known`` (already emitted) are left out, and so are their sources."""
    return post_order(roots, children, set(known))


def children(e: Expr) -> tuple:
    if isinstance(e, Apply):
        return e.srcs
    if isinstance(e, Random):
        return (e.seed, e.offset)
    return ()


def affines(kernel: Kernel) -> list:
    """Every index expression of the kernel (for loop merging and hazard checks)."""
    if kernel.segments:
        return [a for seg in kernel.segments for a in affines(seg)]
    out = [s.index for s in kernel.stores + kernel.inner_stores]
    out += [st.arg_index for st in kernel.stages if st.arg_index is not None]
    if kernel.matmul is not None:
        out += [kernel.matmul.a_index, kernel.matmul.b_index]
    for e in walk([s.value for s in kernel.stores + kernel.inner_stores] + [st.value for st in kernel.stages]):
        if isinstance(e, (Load, IndexValue, Random)):
            out.append(e.index)
    return out


def var_list(kernel: Kernel) -> tuple:
    return tuple(kernel.outer) + tuple(kernel.inner)


__all__ = ["SCANS", "Expr", "Load", "Scalar", "IndexValue", "Random", "Apply", "MatmulValue", "Acc", "Stage", "Store",
           "Matmul", "KernelArg", "Kernel", "DIVISION_CODE", "INDEX_CODE", "Var", "Affine", "rounds_to_storage", "walk", "children", "affines", "var_list"]

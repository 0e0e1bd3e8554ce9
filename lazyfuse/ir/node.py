"""IR nodes: immutable records of one op each (op, inputs, dtype, shape, attribute).

Nodes are compared by identity; a node's ``srcs`` are the values it reads, in program
order. Shapes of an elementwise node's sources equal its own — broadcasting is recorded as
an explicit ``VIEW`` (an expand), so the planner and the code generators never re-derive it —
except runtime ``SCALAR`` sources (0-d), which broadcast by definition: a scalar has the same
value at every index, and ``CAT``'s, which differ along its dim.
"""
from __future__ import annotations

import enum
import math

from .dtypes import DType


class Kind(enum.Enum):
    LEAF = "leaf"            # a realized buffer or a value computed from the index alone
    ELEMENTWISE = "elementwise"
    REDUCE = "reduce"
    VIEW = "view"            # index arithmetic over its source
    WRITE = "write"          # an in-place write of a region of a storage
    EXTERN = "extern"        # computed by a library call (matmul, for now)
    SCAN = "scan"            # a running reduction along one dim (cumsum): the source's shape


class Op(enum.Enum):
    # leaves
    BUFFER = ("buffer", Kind.LEAF)
    SCALAR = ("scalar", Kind.LEAF)      # a runtime scalar: its value is a launch parameter, not code
    ERROR = ("error", Kind.LEAF)        # a value whose computation failed: ``arg`` is the exception
    ARANGE = ("arange", Kind.LEAF)      # srcs: (start, step) scalars
    RAND = ("rand", Kind.LEAF)          # srcs: (seed, offset) scalars; uniform [0, 1)
    RANDN = ("randn", Kind.LEAF)        # srcs: (seed, offset) scalars; standard normal
    # elementwise, unary
    NEG = ("neg", Kind.ELEMENTWISE)
    ABS = ("abs", Kind.ELEMENTWISE)
    EXP = ("exp", Kind.ELEMENTWISE)
    LOG = ("log", Kind.ELEMENTWISE)
    SQRT = ("sqrt", Kind.ELEMENTWISE)
    RSQRT = ("rsqrt", Kind.ELEMENTWISE)
    SIN = ("sin", Kind.ELEMENTWISE)
    COS = ("cos", Kind.ELEMENTWISE)
    TANH = ("tanh", Kind.ELEMENTWISE)
    SIGMOID = ("sigmoid", Kind.ELEMENTWISE)
    RELU = ("relu", Kind.ELEMENTWISE)
    GELU = ("gelu", Kind.ELEMENTWISE)
    SILU = ("silu", Kind.ELEMENTWISE)
    RECIPROCAL = ("reciprocal", Kind.ELEMENTWISE)
    NOT = ("not", Kind.ELEMENTWISE)
    ISNAN = ("isnan", Kind.ELEMENTWISE)
    # (float operands only: torch's surface, lazyfuse.torch_ops; printed by each printer's op table)
    FLOOR = ("floor", Kind.ELEMENTWISE)
    CEIL = ("ceil", Kind.ELEMENTWISE)
    TRUNC = ("trunc", Kind.ELEMENTWISE)
    ROUND = ("round", Kind.ELEMENTWISE)
    FRAC = ("frac", Kind.ELEMENTWISE)   # x - trunc(x)
    ERF = ("erf", Kind.ELEMENTWISE)
    ERFC = ("erfc", Kind.ELEMENTWISE)
    SIGN = ("sign", Kind.ELEMENTWISE)   # -1, 0 or 1 (NaN gives 0, as torch's (x > 0) - (x < 0))
    ATAN = ("atan", Kind.ELEMENTWISE)
    EXPM1 = ("expm1", Kind.ELEMENTWISE)   # e^x - 1, exact near 0 (no cancellation)
    LOG1P = ("log1p", Kind.ELEMENTWISE)   # log(1 + x), exact near 0
    # srcs (x, 0, 6), the clamp's bounds runtime scalars (c_printer._hard says why)
    HARDSIGMOID = ("hardsigmoid", Kind.ELEMENTWISE)   # clamp(x + 3, 0, 6) / 6 (NaN propagates)
    HARDSWISH = ("hardswish", Kind.ELEMENTWISE)       # x * clamp(x + 3, 0, 6) / 6
    LOGSIGMOID = ("logsigmoid", Kind.ELEMENTWISE)     # min(x, 0) - log1p(e^-|x|)
    MISH = ("mish", Kind.ELEMENTWISE)                 # x * tanh(log1p(e^x))
    # d/dx gelu(x), Phi(x) + x*phi(x): one op for the backward (autograd.rules._gelu_grad)
    GELU_GRAD = ("gelu_grad", Kind.ELEMENTWISE)
    CAST = ("cast", Kind.ELEMENTWISE)
    # the source's bits read as ``dtype``, of the same itemsize (``x.view(torch.int32)`` of a
    # float32 tensor): float <-> int exactly, int <-> int modulo 2^bits, to bool by ``!= 0``
    BITCAST = ("bitcast", Kind.ELEMENTWISE)
    # elementwise, binary
    ADD = ("add", Kind.ELEMENTWISE)
    SUB = ("sub", Kind.ELEMENTWISE)
    MUL = ("mul", Kind.ELEMENTWISE)
    DIV = ("div", Kind.ELEMENTWISE)
    FLOORDIV = ("floordiv", Kind.ELEMENTWISE)
    MOD = ("mod", Kind.ELEMENTWISE)     # the remainder with the divisor's sign (Python's %, torch.remainder)
    FMOD = ("fmod", Kind.ELEMENTWISE)   # the remainder with the dividend's sign (C's fmod, torch.fmod)
    ATAN2 = ("atan2", Kind.ELEMENTWISE)   # the angle of the point (srcs[1], srcs[0]), as C's atan2(y, x)
    COPYSIGN = ("copysign", Kind.ELEMENTWISE)   # |srcs[0]| with the sign bit of srcs[1] (float operands only)
    LEAKY_RELU = ("leaky_relu", Kind.ELEMENTWISE)   # srcs (x, slope): x where x > 0, else x * slope
    POW = ("pow", Kind.ELEMENTWISE)
    MAXIMUM = ("maximum", Kind.ELEMENTWISE)
    MINIMUM = ("minimum", Kind.ELEMENTWISE)
    LT = ("lt", Kind.ELEMENTWISE)
    LE = ("le", Kind.ELEMENTWISE)
    GT = ("gt", Kind.ELEMENTWISE)
    GE = ("ge", Kind.ELEMENTWISE)
    EQ = ("eq", Kind.ELEMENTWISE)
    NE = ("ne", Kind.ELEMENTWISE)
    AND = ("and", Kind.ELEMENTWISE)
    OR = ("or", Kind.ELEMENTWISE)
    XOR = ("xor", Kind.ELEMENTWISE)
    # elementwise, ternary
    WHERE = ("where", Kind.ELEMENTWISE)
    # srcs (x, nan, posinf, neginf): x with NaN, +inf and -inf replaced by the three (runtime
    # scalars: one kernel whatever their values); float operands only
    NAN_TO_NUM = ("nan_to_num", Kind.ELEMENTWISE)
    # srcs (x, negcoef, poscoef, input_scale), runtime scalars: torch's elu kernel, x * poscoef where
    # x > 0, else expm1(x * input_scale) * negcoef (elu, selu and celu are its three settings)
    ELU = ("elu", Kind.ELEMENTWISE)
    # srcs (x, beta, threshold), runtime scalars: x where x * beta > threshold, else log1p(e^(x beta)) / beta
    SOFTPLUS = ("softplus", Kind.ELEMENTWISE)
    # srcs (x, lo, hi): min(max(x, lo), hi), torch's clamp with both bounds (hi where lo > hi; a NaN
    # operand propagates); the bounds runtime scalars or tensors (hardtanh and relu6 are clamps)
    CLAMP = ("clamp", Kind.ELEMENTWISE)
    # log(x) / ln 2, log(x) / ln 10 (the compositions they were) and 2^x (c_math.h's lf_exp2f); libm's
    # log2, log10 and exp2 in float64 C, tl.log2 and tl.exp2 in Triton
    LOG2 = ("log2", Kind.ELEMENTWISE)
    LOG10 = ("log10", Kind.ELEMENTWISE)
    EXP2 = ("exp2", Kind.ELEMENTWISE)
    # sqrt(a^2 + b^2) without overflow, inf where either is infinite (C's hypot): float32 C sums
    # the exact float64 squares (one rounding), float64 C calls libm's
    HYPOT = ("hypot", Kind.ELEMENTWISE)
    # log(e^a + e^b): a + ln 2 where a == b (infinities exact), else max(a, b) + log1p(e^-|a - b|)
    LOGADDEXP = ("logaddexp", Kind.ELEMENTWISE)
    # log2(2^a + 2^b): a + 1 where a == b (infinities exact), else max(a, b) + log1p(2^-|a - b|) / ln 2
    LOGADDEXP2 = ("logaddexp2", Kind.ELEMENTWISE)
    # srcs (x, y): x log(y), NaN where y is NaN, else 0 where x is 0 (torch's xlogy)
    XLOGY = ("xlogy", Kind.ELEMENTWISE)
    # srcs (x, end, weight), weight a runtime scalar or a tensor: torch's lerp, x + w (end - x)
    # where |w| < 0.5, else end - (end - x)(1 - w) (each formula exact at its own end)
    LERP = ("lerp", Kind.ELEMENTWISE)
    # srcs (a, b, c): a * b + c, rounded once where the target has FMA (C's LF__MADDF/LF__MADD,
    # Triton's tl.fma), else the product rounded first: torch's addcmul, whose kernel computes
    # self + value * t1 * t2 with the last product fused into the addition
    FMA = ("fma", Kind.ELEMENTWISE)
    # srcs (index, size), int64, size a runtime scalar; ``arg`` (op name, dim, wrap): ``index``
    # made non-negative (``wrap``: a negative one counts from the end), where an index out of
    # [-size, size) (``wrap``) or [0, size) sets the kernel's error flag: the drain raises
    # InvalidIndexError naming the op, the dim and the size (codegen.kernel ``Kernel.index_checks``)
    CHECK_INDEX = ("check_index", Kind.ELEMENTWISE)
    # the concatenation of the sources (same dtype, any number) along dim ``arg``: each output
    # element is read from the source whose slice holds it (index arithmetic, one select per
    # source). The one elementwise op whose sources' shapes differ from its own, along ``arg``
    CAT = ("cat", Kind.ELEMENTWISE)
    # the source reversed along the dims ``arg`` (a sorted tuple): index arithmetic, the source
    # read at n - 1 - i along each (a copy, as torch.flip's; views have no negative strides)
    FLIP = ("flip", Kind.ELEMENTWISE)
    # the source rotated along dims: ``arg`` a sorted tuple of (dim, shift), 0 < shift < size,
    # the source read at (i - shift) mod n along each (index arithmetic, as FLIP)
    ROLL = ("roll", Kind.ELEMENTWISE)
    # reductions over ``arg`` (a sorted tuple of axes); the result keeps the axes with size 1
    SUM = ("sum", Kind.REDUCE)
    MAX = ("max", Kind.REDUCE)
    MIN = ("min", Kind.REDUCE)
    ARGMAX = ("argmax", Kind.REDUCE)
    ARGMIN = ("argmin", Kind.REDUCE)
    PROD = ("prod", Kind.REDUCE)
    # running reductions along the axis ``arg`` (a 1-tuple), inclusive: element i combines the
    # source's elements 0..i along it (a sum, a product, a log-sum-exp)
    CUMSUM = ("cumsum", Kind.SCAN)
    CUMPROD = ("cumprod", Kind.SCAN)
    LOGCUMSUMEXP = ("logcumsumexp", Kind.SCAN)
    # movement: ``arg`` is a View over the source's contiguous layout
    VIEW = ("view", Kind.VIEW)
    # srcs (old, value): ``old`` with the region ``arg`` (a View) replaced by ``value``
    WRITE = ("write", Kind.WRITE)
    # srcs (a, b): a @ b with broadcast batch dims
    MATMUL = ("matmul", Kind.EXTERN)
    # srcs (x, index): x indexed along dim arg[0] (of size arg[1]) by the flat integer ``index``
    GATHER = ("gather", Kind.EXTERN)
    # srcs (x, index): zeros of the node's shape with x's slices along dim arg[0] added at the
    # flat integer ``index`` there (of size arg[1]; repeated indices accumulate): a scatter-add,
    # the gradient of a gather (an embedding's backward), at the cost of x's size
    INDEX_ADD = ("index_add", Kind.EXTERN)
    # srcs (x,) or (x, previous collective): a torch.distributed collective on x; ``arg`` is a
    # lazyfuse.distributed Collective (what it does, on which process group)
    COLLECTIVE = ("collective", Kind.EXTERN)
    # srcs: the tensor arguments (views of their storages), then (seed, offset) scalars for a
    # random op; ``arg``: the ExternCall (lazyfuse.extern) — a torch function with no native lowering
    EXTERN = ("extern", Kind.EXTERN)

    def __init__(self, label: str, kind: Kind):
        self.label = label
        self.kind = kind
        # leaves are values already at hand; everything else is work a drain must do
        self.pending = kind is not Kind.LEAF or label in ("arange", "rand", "randn")

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"Op.{self.name}"


# LOG2's and LOG10's factor of log(x): their float32 C (and LOG10's Triton) formulas
BASE_FACTOR = {Op.LOG2: 1.0 / math.log(2.0), Op.LOG10: 1.0 / math.log(10.0)}

UNARY = frozenset(op for op in Op if op.kind is Kind.ELEMENTWISE) - {
    Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FLOORDIV, Op.MOD, Op.FMOD, Op.ATAN2, Op.COPYSIGN, Op.LEAKY_RELU, Op.HARDSIGMOID, Op.HARDSWISH, Op.POW, Op.MAXIMUM,
    Op.MINIMUM, Op.LT, Op.LE, Op.GT, Op.GE, Op.EQ, Op.NE, Op.AND, Op.OR, Op.XOR, Op.WHERE, Op.NAN_TO_NUM, Op.ELU, Op.SOFTPLUS, Op.CAT,
    Op.FLIP, Op.ROLL, Op.CLAMP, Op.HYPOT, Op.LOGADDEXP, Op.LOGADDEXP2, Op.XLOGY, Op.LERP, Op.FMA, Op.CHECK_INDEX}


class Node:
    """One recorded op. Immutable by convention; ``__slots__`` keeps recording cheap.

    ``tape`` and ``tpos`` are the engine's bookkeeping, not part of the value: the pending
    tape the node was entered on (see ``runtime.engine``) and its position there. A node is on
    the current tape exactly when ``node.tape is engine.tape``; ``tpos`` is only read then.
    ``origin``, set only when the torch frontend traces origins (and unset otherwise: read it
    with ``getattr(node, "origin", None)``), names the aten op that recorded the node, for
    ``lf.explain``; not part of the value or the plan key either.
    """

    __slots__ = ("op", "srcs", "dtype", "shape", "arg", "tape", "tpos", "origin", "__weakref__")

    def __init__(self, op: Op, srcs: tuple, dtype: DType, shape: tuple, arg=None):
        self.op = op
        self.srcs = srcs
        self.dtype = dtype
        self.shape = shape
        self.arg = arg
        self.tape = None

    @property
    def kind(self) -> Kind:
        return self.op.kind

    @property
    def is_pending(self) -> bool:
        """Leaves are values already at hand; everything else is work a drain must do."""
        return self.op.pending

    def __repr__(self) -> str:
        return f"Node({self.op.label}, {self.dtype.name}{list(self.shape)})"


def post_order(roots, children, seen=None) -> list:
    """Everything reachable from ``roots`` through ``children(x)``, each once (by identity) and
    after all it reaches: the one graph walk of IR nodes, kernel expressions and autograd
    functions. Iterative, so deep graphs never hit Python's recursion limit. Objects whose id
    is in ``seen`` (updated as the walk goes) are left out, with what only they reach. The
    order is a depth-first one that explores the last child first; code printing and plan
    keys depend on it, so it must not change."""
    order = []
    seen = set() if seen is None else seen
    for root in roots:
        stack = [(root, False)]
        while stack:
            x, expanded = stack.pop()
            if expanded:
                order.append(x)
                continue
            if id(x) in seen:
                continue
            seen.add(id(x))
            stack.append((x, True))
            for c in children(x):
                if id(c) not in seen:
                    stack.append((c, False))
    return order


def sources(node: Node) -> tuple:
    """A node's sources (``post_order``'s children for IR nodes)."""
    return node.srcs

"""What the C and the Triton printer share: the printer's state, the rounding of half-precision
values, the cast's cases, a stage accumulator's identity, and per-op code as a table.

Each backend's ``OPS`` maps an ``Op`` to a rule ``(a, e) -> str``: the code of the elementwise
``Apply`` ``e`` on the operand strings ``a`` (tinygrad's ``code_for_op`` is the model). A table
starts from ``infix_rules()`` (the ops both languages spell as a binary operator) and each
backend adds and overrides the rest, so the code of one op in one language is one entry.
"""
from __future__ import annotations

from ..ir.dtypes import NARROW_INTS, float32, float64, int32, int64, uint8
from ..ir.node import Op
from .kernel import Apply, Scalar

# the ops C and Triton both print as ``(a op b)``
INFIX = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.DIV: "/", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">=",
         Op.EQ: "==", Op.NE: "!=", Op.AND: "&", Op.OR: "|", Op.XOR: "^"}


def infix(sym: str):
    return lambda a, e: f"({a[0]} {sym} {a[1]})"


def infix_rules() -> dict:
    """A fresh table holding the ``INFIX`` ops' rules, for a backend to complete."""
    return {op: infix(sym) for op, sym in INFIX.items()}


def src_dtype(e):
    """The dtype of an Apply's first operand (what most rules dispatch on), else its own."""
    return e.srcs[0].dtype if e.srcs else e.dtype


def narrow_int_route(src, dst):
    """The int a ``src`` float converts to before it is truncated to the narrow int ``dst``, as
    torch's CPU converts: int32 (x86's 32-bit conversion: out of its range, NaN and inf give
    INT32_MIN, so 0), but int64 for float64 to uint8, where c10's cast goes through int64_t on
    purpose (a negative float to an unsigned type is undefined in C): 2**32 + 5 is 5 in uint8 and
    -2**31 - 1 is 255. (float32 and the half types beyond int32's range are multiples of 256, so
    either route gives their byte, 0: they keep the int32 one, which vectorises wider.)"""
    return int64 if dst is uint8 and src is float64 else int32


def loop_invariant(e) -> bool:
    """Whether the kernel expression ``e`` is the same at every index: a runtime scalar, or an
    op on such values only."""
    return isinstance(e, Scalar) or isinstance(e, Apply) and bool(e.srcs) and all(loop_invariant(s) for s in e.srcs)


def invariant_first(a: list, e) -> tuple:
    """A float maximum/minimum's two operand strings with a loop-invariant one (a clamp's bound)
    first: both printers select ``t cmp o ? t : o`` with a NaN ``t`` propagated, so the NaN test
    is the bound's, outside the loop (C), and a value equal to the bound is kept, signed zero
    included, as torch's clamp keeps it."""
    if loop_invariant(e.srcs[1]) and not loop_invariant(e.srcs[0]):
        return a[1], a[0]
    return a[0], a[1]


def starts_high(st) -> bool:
    """Whether a reduction stage's accumulator starts at its dtype's highest value (min, argmin)
    rather than its lowest (max, argmax); sums start at 0."""
    return st.op in (Op.MIN, Op.ARGMIN)


class Printer:
    """A kernel printer: ``OPS`` (the per-op table) and the hooks below are the backend's part."""

    LANGUAGE = "?"
    OPS: dict = {}

    def __init__(self, kernel, cfg):
        self.k = kernel
        self.cfg = cfg
        self._n = 0
        self.extents = {}   # Var -> the name of its runtime extent in the source
        self.size_names = {}   # a runtime size's value (Kernel.sizes) -> its name in the source
        # each index check's number (its error code's offset: ``Kernel.index_checks``); a foreach
        # segment's printer is given its kernel's
        self.check_number = {id(e): k for k, e in enumerate(kernel.index_checks)}

    def fresh(self) -> int:
        self._n += 1
        return self._n

    def rounded(self, value: str, dtype) -> str:
        """A float32 ``value`` rounded to float16/bfloat16 ``dtype`` (and widened back)."""
        return self.cast(value, float32, dtype)

    def apply(self, e, a: list) -> str:
        """The code of the elementwise ``e`` on operands ``a``: a cast, else the op's table entry."""
        if e.op is Op.CAST:
            return self.cast(a[0], src_dtype(e), e.dtype)
        if e.op is Op.BITCAST:
            return self.bitcast(a[0], src_dtype(e), e.dtype)
        rule = self.OPS.get(e.op)
        if rule is None:
            raise NotImplementedError(f"{self.LANGUAGE} printer: no rule for {e.op}")
        if e.dtype in NARROW_INTS:
            # C computes on int8/uint8/int16 in int (its integer promotion), Triton's integer
            # literals are int32: each op's result is truncated back to its dtype (modulo 2^bits),
            # so uint8 200 + 100 is 44 before the next op reads it, as torch computes
            return self.convert(rule(a, e), e.dtype)
        return rule(a, e)

    # -- casts --------------------------------------------------------------------------------
    def cast(self, x: str, src, dst) -> str:
        """``x`` of dtype ``src`` as ``dst`` in the compute type, as torch converts: to bool by
        ``!= 0``; float to int with NaN and out of range giving the int's minimum; to a half
        type rounded through its storage type (the value a store and reload would give)."""
        if dst.is_bool:
            return self.to_bool(x)
        if src.is_float and dst.is_int:
            return self.float_to_int(x, src, dst)
        if dst.name in ("float16", "bfloat16") and src is not dst:
            return self.to_half(x, src, dst)
        return self.convert(x, dst)

    def bitcast(self, x: str, src, dst) -> str:
        """``x`` of dtype ``src`` with its bits read as ``dst`` (the same itemsize), in the
        compute type. Between integers that is the value modulo 2^bits (a truncating convert:
        int8 -1 is uint8 255), to bool ``!= 0`` (a bool holds 0 or 1); with a float on either
        side the backend's ``reinterpret`` goes through the storage types."""
        if dst.is_bool:
            return self.to_bool(x)
        if not src.is_float and not dst.is_float:
            return self.convert(x, dst)
        return self.reinterpret(x, src, dst)

    def reinterpret(self, x: str, src, dst) -> str:
        raise NotImplementedError

    def to_bool(self, x: str) -> str:
        raise NotImplementedError

    def float_to_int(self, x: str, src, dst) -> str:
        raise NotImplementedError

    def to_half(self, x: str, src, dst) -> str:
        raise NotImplementedError

    def convert(self, x: str, dst) -> str:
        raise NotImplementedError

    # -- accumulators -------------------------------------------------------------------------
    def acc_init(self, st) -> str:
        """The identity a reduction stage's accumulator starts from."""
        if st.op in (Op.SUM, Op.CUMSUM):
            return "0"
        if st.op in (Op.PROD, Op.CUMPROD):
            return "1"
        if st.op is Op.LOGCUMSUMEXP:
            return self.infinity(False)
        high = starts_high(st)
        dt = st.value.dtype
        if dt.is_float:
            return self.infinity(high)
        if dt.is_bool:
            return "1" if high else "0"
        return self.int_limit(dt, high)

    def infinity(self, positive: bool) -> str:
        raise NotImplementedError

    def int_limit(self, dt, high: bool) -> str:
        raise NotImplementedError

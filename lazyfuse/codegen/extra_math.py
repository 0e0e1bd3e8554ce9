"""The printers' rules for the elementwise ops added with torch's surface (rounding and erf),
kept in one place: each printer asks here before it gives up on an op.

Rounding follows torch: ``round`` is round-half-to-even (``nearbyint`` under the default
rounding mode in C; in Triton from ``floor`` and the exact fraction ``x - floor(x)``, never
``floor(x + 0.5)``, which rounds 0.49999997 up).
"""
from __future__ import annotations

from ..ir.node import Op

_C = {Op.FLOOR: "floor", Op.CEIL: "ceil", Op.TRUNC: "trunc", Op.ROUND: "nearbyint", Op.ERF: "erf"}


def c_expr(op, x: str, f32: bool) -> str | None:
    """C for ``op`` applied to ``x`` (float32 arithmetic when ``f32``), None if not an op of this module."""
    if op is Op.ERF and f32:
        return f"lf_erff({x})"
    name = _C.get(op)
    if name is None:
        return None
    return f"{name}{'f' if f32 else ''}({x})"


def triton_expr(op, x: str) -> str | None:
    """Triton for ``op`` applied to ``x``, None if not an op of this module."""
    if op is Op.FLOOR:
        return f"tl.floor({x})"
    if op is Op.CEIL:
        return f"tl.ceil({x})"
    if op is Op.TRUNC:
        return f"tl.where({x} < 0, tl.ceil({x}), tl.floor({x}))"
    if op is Op.ROUND:
        fl = f"tl.floor({x})"
        frac = f"({x} - {fl})"
        up = f"(({frac} > 0.5) | (({frac} == 0.5) & ({fl} % 2.0 != 0.0)))"
        return f"tl.where({x} != {x}, {x}, {fl} + tl.where({up}, 1.0, 0.0))"
    if op is Op.ERF:
        return f"tl.erf({x})"
    return None

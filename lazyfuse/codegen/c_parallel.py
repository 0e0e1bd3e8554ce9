"""When a C kernel gets an OpenMP parallel region: a cost estimate of its loops against a threshold.

A parallel region costs about a microsecond to fork and join on an idle core (a kernel's
worker waits at the closing barrier), and milliseconds when another process holds the other
core, so a small kernel gets none at all, not a disabled one. Counting elements alone
misjudges both ends: a few thousand gelus gain from a region, as many additions lose. So the
estimate is in *units*, what a simple elementwise kernel costs per loaded element or op: each
load, simple op and reduction step is 1, the c_math.h functions what their loops measure per
element against that (``_F32_COST``; a libm call ``_LIBM``), times how often the loops
evaluate them: the reduced extent once per reduction stage, a row-wise kernel's stores once
more along the row. The default threshold keeps a hidden-64 decode step's 16k-MAC
matrix-vector products serial and gives the captured 32x64 training step's 2048-output
matmuls, gelus and 4096-element AdamW updates a region. The timings behind the weights and
the threshold are in bench/results/cost-model-2026-11-30.md.

``LAZYFUSE_PARALLEL_THRESHOLD`` (units) moves the line: a huge value turns every kernel serial
(a machine shared with other busy processes, where a worker thread may wait milliseconds for a
core), 0 gives every kernel with a loop a region.
"""
from __future__ import annotations

from .. import config
from ..ir.node import Op
from .kernel import Apply, Kernel, Load, Random, walk


_F32_COST = {Op.GELU: 80, Op.GELU_GRAD: 80, Op.EXP: 20, Op.LOG: 20, Op.TANH: 20, Op.SIGMOID: 20, Op.SIN: 24, Op.COS: 24, Op.ERFC: 40,
             Op.SILU: 30, Op.DIV: 8, Op.SQRT: 8, Op.RSQRT: 8, Op.RECIPROCAL: 8,
             Op.POW: 8, Op.ATAN: 24, Op.ATAN2: 32, Op.EXPM1: 20, Op.LOG1P: 28,
             Op.HARDSIGMOID: 10, Op.HARDSWISH: 10,   # (their division by 6)
             Op.ELU: 16, Op.SOFTPLUS: 50, Op.LOGSIGMOID: 50, Op.MISH: 70,
             Op.CLAMP: 2, Op.LOG2: 21, Op.LOG10: 21, Op.EXP2: 21,
             Op.HYPOT: 12, Op.LOGADDEXP: 45, Op.LOGADDEXP2: 46, Op.XLOGY: 22, Op.LERP: 4, Op.FMA: 2}   # pow: its exponent is a runtime scalar, most often 2 (x * x, see lf_powf)
_LIBM = 200   # a scalar call per element: fmod (floor division, float64 fmod and %), float64 transcendentals
_LIBM_ALWAYS = frozenset({Op.FLOORDIV})
_FMOD_F32 = 16   # float fmod and %: a double division, a truncation and an FMA (lf__fmodf_q)
_LIBM_F64 = frozenset({Op.ERFC, Op.GELU, Op.GELU_GRAD, Op.EXP, Op.LOG, Op.TANH, Op.SIGMOID, Op.SIN, Op.COS, Op.SILU, Op.POW,
                       Op.ATAN, Op.ATAN2, Op.EXPM1, Op.LOG1P, Op.ELU, Op.SOFTPLUS, Op.LOGSIGMOID, Op.MISH,
                       Op.LOG2, Op.LOG10, Op.EXP2, Op.HYPOT, Op.LOGADDEXP, Op.LOGADDEXP2, Op.XLOGY})


def _op_cost(e) -> int:
    if isinstance(e, Load):
        return 1
    if isinstance(e, Random):
        return 40 if e.normal else 4
    if not isinstance(e, Apply):
        return 0   # scalars, index values, accumulators: registers
    if e.op in _LIBM_ALWAYS or (e.op in _LIBM_F64 and any(s.dtype.name == "float64" for s in e.srcs)):
        return _LIBM
    if e.op in (Op.MOD, Op.FMOD) and e.srcs[0].dtype.is_float:
        return _LIBM if e.srcs[0].dtype.name == "float64" else _FMOD_F32
    return _F32_COST.get(e.op, 1)


def cost(exprs) -> int:
    """Units one evaluation of ``exprs`` costs (shared subexpressions once, as the C computes them)."""
    return sum(_op_cost(e) for e in walk(list(exprs)))


def _stage_cost(stage) -> int:
    return cost([stage.value]) + 1   # + the step that combines the value into the accumulator


_work: dict = {}   # id(kernel) -> (kernel, units): printing asks once per config and per loop


def work(k: Kernel) -> int:
    """Units the whole kernel's loops cost on one core (a foreach kernel: all its segments)."""
    hit = _work.get(id(k))
    if hit is not None and hit[0] is k:
        return hit[1]
    if k.segments:
        units = sum(work(seg) for seg in k.segments)
    else:
        along_row = sum(_stage_cost(st) for st in k.stages) + cost(s.value for s in k.inner_stores)
        units = k.outer_numel * (max(k.inner_numel, 1) * along_row + cost(s.value for s in k.stores))
    if len(_work) >= 4096:
        _work.clear()
    _work[id(k)] = (k, units)   # (the kernel kept: its id is not reused meanwhile)
    return units


def threshold() -> int:
    """``LAZYFUSE_PARALLEL_THRESHOLD``, read when a kernel is printed (the build path); a bad
    value is a ``CompileError`` of that build."""
    return config.PARALLEL_THRESHOLD.get()


def parallel(k: Kernel) -> bool:
    """Whether ``k``'s outer loops get a parallel region."""
    return work(k) >= threshold()


def parallel_stage(k: Kernel, stage) -> bool:
    """Whether one reduction stage of a ``split`` kernel (each stage of each output its own
    region, the reduced extent split across threads) is worth a region of its own."""
    return max(k.inner_numel, 1) * _stage_cost(stage) >= threshold()

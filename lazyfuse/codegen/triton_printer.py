"""Print a ``Kernel`` as a ``@triton.jit`` Python module (the second printer of the one description).

Semantics follow ``c_printer`` op for op (NaN propagation in max/min/relu, floor division and
modulo with a zero guard, float->int casts of NaN/out-of-range to INT_MIN, float16/bfloat16
stored as such and computed in float32 with every computed value rounded to its dtype, argmax/argmin first occurrence with NaN as the max).

Layout of a generated kernel ``lf_<hash>(a0, a1, ..., meta, BLOCK[, BLOCK_R])``:

* **pointwise**: each program takes ``BLOCK`` consecutive flat output indices
  (``pid*BLOCK + arange``, masked at the ragged edge) and unravels them into the outer loop
  variables.
* **reduction**: each program takes ``BLOCK`` outer indices (a ``[BLOCK, 1]`` column) times a
  ``[1, BLOCK_R]`` tile of the reduced extent. When the extent fits one tile the kernel is
  *persistent* (one pass; all stages share the loaded tile, so variance reads ``x`` once),
  otherwise every stage loops over tiles, keeping per-lane partials that are combined across
  the tile at the end. Stages run in order; a later stage reads ``acc<j>`` of earlier ones.
  Row-wise kernels (softmax, layer_norm) then store along the row (``inner_stores``).
  Cross-lane combines are plain sum/max/min reductions with NaN and argmax positions handled
  around them (see ``_finish``), which Triton's interpreter runs with numpy.

* **matmul template** (``kernel.matmul``): each program computes one ``[BLOCK_M, BLOCK_N]``
  output tile of one batch entry with ``tl.dot`` over ``BLOCK_K`` slices of the contraction
  (operands addressed by their affine indices: any strides, broadcast batch dims), accumulating
  in float32 (tf32 off: ``input_precision="ieee"``, so float32 results match torch's), then runs
  the kernel's stores on the tile -- the fused epilogue, printed like a pointwise block.

Runtime scalars are read from the launch-metadata buffer (``tl.load(meta + k)``, float scalars
bit-cast from int64 to float64), so a cached kernel serves every scalar value. So are the loop
extents of pointwise and reduction kernels (``n_<var>``, from the header words), with row-major
strides printed as products of them, as the C printer does: a new size of a known program then
finds its module (and its compiled binary) already built. Matmul templates and foreach kernels
keep literal sizes.

The helpers of ``triton_prelude.py`` are ``@triton.jit`` functions printed into every module,
and nothing from Triton's own jit-decorated standard library (``tl.sum``, ``tl.sigmoid``...) is
called: the interpreter device decorates *our* module in interpreter mode, which would leave
Triton's library functions compiled-mode only. Transcendentals use ``tl.exp/log/sin/cos/sqrt``
and ``tl.math.erf`` (builtins in the interpreter and in Triton >= 3.0); tanh, sigmoid and silu
are written out like ``c_math.h`` (no cancellation near 0, correct tails, torch's NaN results).

The RNG is the C printer's ``lf_mix`` (splitmix-style, uint64 arithmetic) and yields the same
bits as the C kernels: uniform = top 24 bits * 2^-24, normal = Box-Muller of two draws.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..ir.dtypes import NARROW_INTS, float32, iinfo
from ..ir.node import BASE_FACTOR, Op
from . import index as ix
from .index import SHAPE_GENERIC, Affine, Var, render, size_names
from .kernel import (DIVISION_CODE, INDEX_CODE, Acc, Apply, IndexValue, Kernel, Load, MatmulValue, Random, Scalar,
                     affines, divides_integers, is_python_scalar)
from .printer_base import Printer, infix_rules, invariant_first, loop_invariant, narrow_int_route, src_dtype
from .scope import Scope

# int8/uint8/int16 compute in int32 (Triton refuses a negative literal with an unsigned block, which
# the integer helpers use), each value truncated to its dtype where it is made (``convert``), as C's
COMPUTE = {"bool": "tl.int1", "uint8": "tl.int32", "int8": "tl.int32", "int16": "tl.int32", "int32": "tl.int32",
           "int64": "tl.int64", "float16": "tl.float32",
           "bfloat16": "tl.float32", "float32": "tl.float32", "float64": "tl.float64"}
STORAGE = {"bool": "tl.int1", "uint8": "tl.uint8", "int8": "tl.int8", "int16": "tl.int16", "int32": "tl.int32",
           "int64": "tl.int64", "float16": "tl.float16",
           "bfloat16": "tl.bfloat16", "float32": "tl.float32", "float64": "tl.float64"}
I32_LIMIT = 2 ** 31 - 2 ** 21   # index values beyond this are computed in int64
EMPTY = 2 ** 31 - 1             # the argmax position of an empty lane: beyond every real one

# the @triton.jit helpers every generated module starts with (see the module docstring)
PRELUDE = Path(__file__).with_name("triton_prelude.py").read_text()


@dataclass(frozen=True)
class TritonConfig:
    """What autotuning may change. ``block``: flat elements per program (pointwise) or outer
    indices per program (reductions); ``block_r``: the reduced-extent tile (reductions only);
    ``num_warps`` and ``num_stages`` (software pipelining of the looped reductions' loads; 0:
    Triton's default) are launch options, passed on GPUs only."""
    block: int = 1024
    block_r: int = 0
    num_warps: int = 4
    num_stages: int = 0

    def label(self) -> str:
        r = f",block_r={self.block_r}" if self.block_r else ""
        s = f",num_stages={self.num_stages}" if self.num_stages else ""
        return f"block={self.block}{r},num_warps={self.num_warps}{s}"

    def persistent(self, kernel: Kernel) -> bool:
        return kernel.inner_numel <= self.block_r


@dataclass(frozen=True)
class MatmulConfig:
    """What autotuning may change in a matmul-template kernel: the output tile, the
    contraction slice, and the launch options (GPUs only). ``upcast``: multiply float32 copies
    of float16/bfloat16 tiles (the interpreter's ``tl.dot`` mishandles bfloat16, numpy having
    none; products of 16-bit floats are exact in float32, so only the summation order differs)."""
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 0
    upcast: bool = False

    def label(self) -> str:
        s = f",num_stages={self.num_stages}" if self.num_stages else ""
        return f"mm={self.block_m}x{self.block_n}x{self.block_k},num_warps={self.num_warps}{s}"


MATMUL_MIN_BLOCK = 16   # tl.dot's smallest tile side
# (block_m, block_n, block_k, num_warps, num_stages): a short list of the usual good GPU tiles
MATMUL_GPU_TILES = ((64, 64, 32, 4, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 128, 32, 8, 3),
                    (128, 128, 64, 8, 3), (32, 64, 32, 4, 4))


def _matmul_config(kernel: Kernel, bm, bn, bk, warps, stages, upcast=False) -> MatmulConfig:
    """A tile clamped to the problem (no side wider than its padded extent, none below 16)."""
    mm = kernel.matmul
    fit = lambda b, v: max(MATMUL_MIN_BLOCK, min(b, _pow2(v.extent)))  # noqa: E731
    return MatmulConfig(fit(bm, mm.m), fit(bn, mm.n), fit(bk, mm.k), warps, stages, upcast)


def _matmul_candidates(kernel: Kernel, interpreter: bool) -> list:
    """The interpreter runs each program as numpy calls, so it wants few, large tiles: the whole
    problem in one tile up to 128 a side by default, and one smaller variant to try."""
    if interpreter:
        return [_matmul_config(kernel, 128, 128, 128, 1, 0, True), _matmul_config(kernel, 64, 64, 32, 1, 0, True)]
    return [_matmul_config(kernel, *t) for t in MATMUL_GPU_TILES]


def _pow2(n: int) -> int:
    return 1 << max(0, (max(n, 1) - 1).bit_length())


def default_config(kernel: Kernel, interpreter: bool = False) -> TritonConfig:
    """A simple heuristic. The interpreter runs each program as a Python call over numpy
    arrays, so it wants few, large programs; a GPU wants ~1-4K elements per program."""
    if kernel.matmul is not None:
        return _matmul_candidates(kernel, interpreter)[0]
    tile = 1 << 14 if interpreter else 4096
    if not kernel.stages:
        block = min(_pow2(kernel.outer_numel), tile if interpreter else 1024)
        return TritonConfig(block, 0, 4 if block >= 512 else max(1, block // 128))
    block_r = min(_pow2(kernel.inner_numel), tile if interpreter else 2048)
    block = min(_pow2(kernel.outer_numel), max(1, tile // block_r))
    warps = 1 if interpreter else min(8, max(1, block * block_r // 256))
    return TritonConfig(block, block_r, warps)


# The GPU tuning space (candidate_configs), after the heuristic default:
PERSISTENT_MAX = 4096   # the widest one-pass reduced tile tried on a GPU (registers)
LAUNCH_BOUND = 1024     # a GPU kernel touching no more elements than this: no variants to try
GPU_POINTWISE_BLOCKS = (512, 1024, 2048, 4096)     # each with each of GPU_POINTWISE_WARPS
GPU_POINTWISE_WARPS = (4, 8)
GPU_PERSISTENT_BUDGETS = (2048, 8192)              # elements of a one-pass reduction tile
GPU_LOOPED_TILES = ((256, 0), (1024, 0), (1024, 1), (1024, 4))   # (block_r, num_stages), 2048-element tiles


def _warps(tile: int) -> int:
    return min(8, max(1, tile // 256))


INTERPRETER_MAX_CANDIDATES = 2   # the default and one variant (see candidate_configs)


def candidate_configs(kernel: Kernel, interpreter: bool = False) -> list:
    """What autotuning tries: the heuristic default first, then variants (deduplicated).

    GPU: pointwise kernels try BLOCK x num_warps; reductions try a one-pass (persistent) tile
    where the reduced extent fits one, looped tiles of the reduced extent with a few
    num_stages, and the warps that suit each tile. The interpreter runs each program as a
    Python call over numpy arrays, where only the tiling changes anything, so it tries one
    variant: a smaller BLOCK (pointwise), or looped instead of persistent / a narrower loop
    tile (reductions) -- few candidates keep its tests fast; the code path is the same."""
    default = default_config(kernel, interpreter)
    out = [default]
    if kernel.matmul is not None:
        out += _matmul_candidates(kernel, interpreter)
    n_outer, n_inner = _pow2(kernel.outer_numel), _pow2(kernel.inner_numel)
    if kernel.matmul is not None or not interpreter and kernel.outer_numel * max(kernel.inner_numel, 1) <= LAUNCH_BOUND:
        return _unique(out)
    if not kernel.stages:
        if interpreter:
            if default.block >= 64:
                out.append(TritonConfig(default.block // 4, 0, default.num_warps))
        else:
            for block in GPU_POINTWISE_BLOCKS:
                block = min(block, max(n_outer, 128))
                for warps in GPU_POINTWISE_WARPS:
                    if block >= 32 * warps:
                        out.append(TritonConfig(block, 0, warps))
    elif kernel.inner_numel > 1:
        if interpreter:
            r = default.block_r // 2 if default.persistent(kernel) else default.block_r // 4
            r = max(r, 1)
            out.append(TritonConfig(min(n_outer, max(1, (1 << 14) // r)), r, 1))
        else:
            if n_inner <= PERSISTENT_MAX:
                for budget in GPU_PERSISTENT_BUDGETS:
                    block = min(n_outer, max(1, budget // n_inner))
                    tile = block * n_inner
                    for warps in sorted({_warps(tile), min(16, max(1, tile // 128))}):
                        out.append(TritonConfig(block, n_inner, warps))
            for block_r, stages in GPU_LOOPED_TILES:
                if block_r < n_inner:
                    block = min(n_outer, max(1, 2048 // block_r))
                    out.append(TritonConfig(block, block_r, _warps(block * block_r), stages))
    return _unique(out)


def _unique(configs) -> list:
    seen, unique = set(), []
    for cfg in configs:
        if cfg not in seen:
            seen.add(cfg)
            unique.append(cfg)
    return unique


def tl_index(a: Affine) -> str:
    return render(a, "//")


def _unravel(flat: str, vars_, indent: str, extents=None) -> list:
    """``v = (flat // stride) % extent`` for each Var, the extents printed as their names in
    ``extents`` (Var -> runtime name) or as literals."""
    extents = extents or {}
    lines, inside = [], []
    for d, v in reversed(list(enumerate(vars_))):
        stride = "*".join(extents.get(u, str(u.extent)) for u in inside) if extents else str(prod_extents(inside))
        stride = f"({stride})" if "*" in stride else stride
        q = f"({flat} // {stride})" if inside and stride != "1" else flat
        lines.append(f"{indent}{v.name} = {q} % {extents.get(v, v.extent)}" if d else f"{indent}{v.name} = {q}")
        inside.insert(0, v)
    return lines[::-1]


def prod_extents(vars_) -> int:
    n = 1
    for v in vars_:
        n *= v.extent
    return n


class _Scope(Scope):
    """Triton locals. ``ctx`` says where the block runs, which decides the masks of loads:
    ``point`` (a pointwise program), ``outer`` (``[BLOCK, 1]`` values of a reduction: stores) or
    ``inner`` (``[BLOCK, BLOCK_R]`` tiles). A load is masked by the masks of the loop dims it reads."""

    def __init__(self, printer, indent: str, ctx: str):
        super().__init__(printer, indent)
        self.ctx = ctx

    @property
    def shape(self) -> str:
        """The shape every leaf value of this block is given (see ``TritonPrinter.rhs``)."""
        return {"point": "[BLOCK]", "tile": "[BLOCK_M, BLOCK_N]"}.get(self.ctx, "[BLOCK, 1]")

    def held(self, e) -> str | None:
        if isinstance(e, Acc):
            return f"acc{e.stage}"
        return "acc" if isinstance(e, MatmulValue) else None

    def local(self, value: str, dtype) -> str:
        name = f"v{self.p.fresh()}"
        self.lines.append(f"{self.indent}{name} = {value}")
        return name

    def mask(self, a: Affine) -> str | None:
        used = a.vars()
        if not used:
            return None
        if self.ctx in ("point", "tile"):
            return "mask"
        outer = any(v in self.p.outer for v in used)
        inner = any(v in self.p.inner for v in used)
        return "mask" if outer and inner else ("pmask" if outer else "rmask")


# the mask of a block's live lanes, by its scope's ``ctx``
LIVE = {"point": "mask", "tile": "mask", "outer": "pmask", "inner": "mask"}


class TritonPrinter(Printer):
    LANGUAGE = "Triton"

    def __init__(self, kernel: Kernel, cfg: TritonConfig):
        super().__init__(kernel, cfg)   # extents: pointwise and reduction kernels only
        self.outer = set(kernel.outer)
        self.inner = set(kernel.inner)
        self.flag_word = kernel.error_flag_word   # (a foreach segment's: its kernel's, set by that printer)

    def index(self, a: Affine) -> str:
        return render(a, "//", self.extents, size=size_names(self.size_names))

    def size(self, vars_) -> str:
        """The product of ``vars_``' extents, in the source."""
        return "*".join(self.extents.get(v, str(v.extent)) for v in vars_) or "1" if self.extents else \
            str(prod_extents(vars_))

    # -- values -------------------------------------------------------------------------------
    def rhs(self, e, scope: _Scope) -> str:
        """The right-hand side of the local holding ``e``.

        No value is 0-d: a leaf that depends on no loop variable (a runtime scalar, a load of
        one fixed address, a constant index) is broadcast to the block's shape
        (``scope.shape``) where it is read. Triton's interpreter types the numpy result of a
        comparison with its *operands'* dtype, and splatting a 0-d value to a block converts
        its data to that type: a comparison of 0-d floats, splatted to meet a block, would turn
        into float 0./1., on which ``&``, ``|`` and ``^`` raise (``lf_max2(x0d, y)``'s
        ``a != a``, ``(x0d < y0d) & b``...). Values that are blocks from the start never splat."""
        if isinstance(e, Scalar):
            word = f"tl.broadcast_to(s{e.slot}, {scope.shape})"
            return f"({word} != 0)" if e.dtype.is_bool else word
        if isinstance(e, Load):
            mask = scope.mask(e.index)
            ptr = f"a{e.arg} + {self.index(e.index)}"
            raw = f"tl.load({ptr}, mask={mask}, other=0)" if mask else f"tl.broadcast_to(tl.load({ptr}), {scope.shape})"
            if e.dtype.name == "bfloat16":
                return f"lf_bf16_to_f32({raw})"   # by bits: see ``to_storage``
            return f"{raw}.to({COMPUTE[e.dtype.name]})" if e.dtype.name == "float16" or e.dtype in NARROW_INTS else raw
        if isinstance(e, IndexValue):
            if not e.index.terms:
                const = self.index(e.index)   # a literal, or one of the kernel's runtime sizes
                return f"tl.full({scope.shape}, {e.index.const}, {COMPUTE[e.dtype.name]})" if const == f"({e.index.const})" \
                    else f"tl.broadcast_to({const}.to({COMPUTE[e.dtype.name]}), {scope.shape})"
            return self.convert(self.index(e.index), e.dtype)
        if isinstance(e, Random):
            seed, off = scope.value(e.seed), scope.value(e.offset)
            fn = "lf_normal" if e.normal else "lf_uniform"
            i = f"({off} + {self.index(e.index)}).to(tl.uint64)"
            return self.convert(f"{fn}({seed}.to(tl.uint64), {i})", e.dtype)
        assert isinstance(e, Apply)
        operands = [scope.value(s) for s in e.srcs]
        if e.op is Op.CHECK_INDEX:
            return self._index_check(e, operands, scope)
        if self.flag_word is not None and divides_integers(e):
            self._flag(f"({operands[1]} == 0)", [(self.flag_word, DIVISION_CODE)], scope)
        return self.apply(e, operands)

    def _flag(self, bad: str, writes: list, scope: _Scope) -> None:
        """Where a live lane is ``bad`` (an integer divisor of 0, an index out of range), store
        each ``(metadata word, value)`` of ``writes``: the error flag's code last
        (``Kernel.error_flag_word``). Masked stores (lanes past the extent load 0, and must not
        count) through a pointer block of the mask's shape (a value of the outer loops only is
        a [BLOCK, 1] block in a [BLOCK, BLOCK_R] tile). The code is raised with ``atomic_max``,
        never stored: a division's code (1) is below every index check's (2 + k), so a division
        by zero in another lane or program never overwrites a failed check, which a GPU must
        report (it reports no division: torch's CUDA returns a value)."""
        where = f"lf_bad{self.fresh()}"
        scope.lines.append(f"{scope.indent}{where} = {bad} & {LIVE[scope.ctx]}")
        *values, (flag, code) = writes
        for word, value in values:
            scope.lines.append(f"{scope.indent}tl.store(meta + {word} + {where}.to(tl.int64) * 0, {value}, mask={where})")
        scope.lines.append(f"{scope.indent}tl.atomic_max(meta + {flag} + {where}.to(tl.int64) * 0, {code}, mask={where})")

    def _index_check(self, e: Apply, a: list, scope: _Scope) -> str:
        """``Op.CHECK_INDEX`` (srcs index, size): the index made non-negative; where a live lane's
        index is out of range, the index is stored in its check's word, then the check's code in
        the flag (``Kernel.index_checks``; the C printer's ``index_check``)."""
        k = self.check_number[id(e)]
        i, n = a
        wrap = e.arg[2]
        bad = f"(({i} < {f'-{n}' if wrap else '0'}) | ({i} >= {n}))"
        self._flag(bad, [(self.flag_word + 1 + k, i), (self.flag_word, INDEX_CODE + k)], scope)
        return f"tl.where({i} < 0, {i} + {n}, {i})" if wrap else i

    # -- casts (the cases: printer_base.Printer.cast) ------------------------------------------
    def reinterpret(self, x: str, src, dst) -> str:
        """``x`` in ``src``'s storage type, bitcast to ``dst``'s, then in ``dst``'s compute type
        (bfloat16 both ways by its bits, as loads and stores: see ``to_storage``)."""
        raw = f"lf_f32_to_bf16({x})" if src.name == "bfloat16" else f"{x}.to({STORAGE[src.name]})"
        bits = f"{raw}.to({STORAGE[dst.name]}, bitcast=True)"
        if dst.name == "bfloat16":
            return f"lf_bf16_to_f32({bits})"
        return f"{bits}.to({COMPUTE[dst.name]})" if STORAGE[dst.name] != COMPUTE[dst.name] else bits

    def to_bool(self, x: str) -> str:
        return f"({x} != 0)"

    def float_to_int(self, x: str, src, dst) -> str:
        if dst in NARROW_INTS:   # through a wider int, then truncated, as the C printer
            return self.convert(self.float_to_int(x, src, narrow_int_route(src, dst)), dst)
        bits = 63 if dst.name == "int64" else 31
        return f"lf_f2i({x}, {float(2 ** bits)!r}, {-(2 ** bits)}, {COMPUTE[dst.name]})"

    def to_half(self, x: str, src, dst) -> str:
        # bfloat16 rounds by its bits (to nearest even, overflowing to inf): Triton's interpreter
        # truncates in ``.to(tl.bfloat16)``
        x = f"{x}.to(tl.float32)" if src.name not in ("float16", "bfloat16", "float32") else x
        return f"lf_round_bf16({x})" if dst.name == "bfloat16" else f"{x}.to(tl.float16).to(tl.float32)"

    def convert(self, x: str, dst) -> str:
        if dst in NARROW_INTS:   # truncated to the dtype, in the int32 it computes in
            return f"{x}.to({STORAGE[dst.name]}).to({COMPUTE[dst.name]})"
        return f"{x}.to({COMPUTE[dst.name]})"

    def infinity(self, positive: bool) -> str:
        return 'float("inf")' if positive else 'float("-inf")'

    def int_limit(self, dt, high: bool) -> str:
        return str(iinfo(dt).max if high else iinfo(dt).min)

    def to_storage(self, v: str, e, dt) -> str:
        """Value ``v`` (of expression ``e``) converted for a store into a ``dt`` buffer. bfloat16
        converts by bits, rounding first where ``e`` is not already a bfloat16 value (a scalar, an
        index, another dtype): Triton's interpreter truncates in ``.to(tl.bfloat16)`` and garbles
        subnormals both ways."""
        if dt.name != "bfloat16":
            return f"{v}.to({STORAGE[dt.name]})"
        if e.dtype is not dt or isinstance(e, (Scalar, IndexValue)):
            v = self.cast(v, float32 if e.dtype is dt else e.dtype, dt)
        return f"lf_f32_to_bf16({v})"

    # -- structure ----------------------------------------------------------------------------
    def function(self, name: str) -> str:
        k = self.k
        params = [f"a{i}" for i in range(len(k.args))] + ["meta"]
        if k.matmul is not None:
            params += ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr"]
        else:
            params.append("BLOCK: tl.constexpr")
        if k.stages:
            params.append("BLOCK_R: tl.constexpr")
        lines = ["@triton.jit", f"def {name}({', '.join(params)}):"]
        base = k.scalar_word(0)
        for i, dt in enumerate(k.scalars):
            word = f"tl.load(meta + {base + i})"
            if dt.is_float:
                val = f"{word}.to(tl.float64, bitcast=True).to({COMPUTE[dt.name]})"
            elif dt.is_bool:
                val = word   # the int64 word: compared with 0 once broadcast (see ``rhs``)
            else:
                val = self.convert(word, dt)
            lines.append(f"    s{i} = {val}")
        wide = self._wide()
        pid = "tl.program_id(0).to(tl.int64)" if wide else "tl.program_id(0)"
        if not k.segments and k.matmul is None and SHAPE_GENERIC:
            # the header's words: meta[0] = len(outer), the outer extents, len(inner), the inner extents
            for i, v in enumerate(k.outer + k.inner):
                self.extents[v] = f"n_{v.name}"
                word = f"tl.load(meta + {1 + i + (i >= len(k.outer))})"
                lines.append(f"    n_{v.name} = {word}" if wide else f"    n_{v.name} = {word}.to(tl.int32)")
            # then the kernel's runtime sizes (Kernel.sizes), read by the index arithmetic
            for i, value in enumerate(k.sizes):
                self.size_names[value] = f"z{i}"
                word = f"tl.load(meta + {2 + len(k.outer) + len(k.inner) + i})"
                lines.append(f"    z{i} = {word}" if wide else f"    z{i} = {word}.to(tl.int32)")
        if k.segments:
            return self._segment_functions(params) + "\n".join(lines + self._segments(pid)) + "\n"
        if k.matmul is not None:
            lines += self._matmul(pid)
        else:
            lines += (self._scan(pid) if k.kind == "scan" else self._reduce(pid)) if k.stages else self._pointwise(pid)
        return "\n".join(lines) + "\n"

    def _segment_params(self) -> list:
        flag = ["meta"] if self.flag_word is not None else []   # (its error flag's word is in meta)
        return [f"a{i}" for i in range(len(self.k.args))] + [f"s{i}" for i in range(len(self.k.scalars))] + flag

    def _segment_functions(self, params) -> str:
        """A foreach kernel's segments, each a jit function of its own (its locals stay its own):
        the pointwise program of that segment, given its program index."""
        out = []
        for j, seg in enumerate(self.k.segments):
            sub = TritonPrinter(seg, self.cfg)
            sub.flag_word, sub.check_number = self.flag_word, self.check_number
            head = f"def lf_segment{j}({', '.join(self._segment_params() + ['pid', 'BLOCK: tl.constexpr'])}):"
            out.append("\n".join(["@triton.jit", head] + sub._pointwise("pid")) + "\n\n\n")
        return "".join(out)

    def _segments(self, pid) -> list:
        """The foreach program: segment ``j`` takes the ``ceil(numel_j / BLOCK)`` programs after
        those of the segments before it (constexpr arithmetic on BLOCK; the grid is their sum)."""
        lines = [f"    pid = {pid}"]
        args = ", ".join(self._segment_params())
        first = "0"
        for j, seg in enumerate(self.k.segments):
            end = f"{first} + ({seg.outer_numel} + BLOCK - 1) // BLOCK" if j else f"({seg.outer_numel} + BLOCK - 1) // BLOCK"
            cond = f"pid < {end}" if not j else f"(pid >= {first}) & (pid < {end})"
            lines += [f"    if {cond}:", f"        lf_segment{j}({args}, pid - ({first}), BLOCK)"]
            first = end
        return lines

    def _wide(self) -> bool:
        k = self.k
        if k.matmul is not None:
            spans = [k.outer_numel + self.cfg.block_m * self.cfg.block_n]
        else:
            spans = [k.outer_numel + self.cfg.block, k.inner_numel + self.cfg.block_r]
        spans += [max(abs(a.max), abs(a.min)) for a in affines(k)]
        return max(spans) > I32_LIMIT

    def _constant_store(self) -> bool:
        """A store to one fixed address (a 0-d result) needs its pointer broadcast to the mask."""
        return any(not st.index.terms for st in self.k.stores)

    def _store(self, scope: _Scope, stores, zero: str = "") -> list:
        """Stores of one block. A pointer must have the mask's shape: a 0-d result's fixed
        address gets ``zero`` added, a row-wise store that misses a loop dim the full tile's."""
        lines = []
        for st in stores:
            v = scope.value(st.value)
            dt = self.k.args[st.arg].dtype
            idx = self.index(st.index)
            if scope.ctx == "inner":
                used = st.index.vars()
                if not (used & self.outer and used & self.inner):
                    idx = f"({idx} + pflat * 0 + rflat * 0)"
            elif scope.ctx == "tile":
                idx = f"({idx} + zero)"   # a tile's store: the pointer spans the tile even where m or n is 1
            elif not st.index.terms:
                idx = f"({st.index.const} + {zero})"
            lines.append(f"{scope.indent}tl.store(a{st.arg} + {idx}, {self.to_storage(v, st.value, dt)}, "
                         f"mask={LIVE[scope.ctx]})")
        return lines

    def _pointwise(self, pid) -> list:
        k = self.k
        lines = [f"    flat = {pid} * BLOCK + tl.arange(0, BLOCK)",
                 f"    mask = flat < {self.size(k.outer)}"]
        lines += _unravel("flat", k.outer, "    ", self.extents)
        if self._constant_store():
            lines.append("    zero = flat * 0")
        scope = _Scope(self, "    ", "point")
        stores = self._store(scope, k.stores, "zero")
        return lines + scope.lines + stores

    def _matmul(self, pid) -> list:
        """One output tile: ``acc = a[b, m-tile, :] @ b[b, :, n-tile]`` by ``BLOCK_K`` slices,
        then the epilogue (the kernel's stores) on the tile."""
        k = self.k
        mm = k.matmul
        batch = k.outer[:-2]
        tiles_m, tiles_n = f"(({mm.m.extent} + BLOCK_M - 1) // BLOCK_M)", f"(({mm.n.extent} + BLOCK_N - 1) // BLOCK_N)"
        lines = [f"    tiles = {tiles_m} * {tiles_n}",
                 f"    bflat = {pid} // tiles",
                 f"    tile = {pid} % tiles",
                 f"    rm = (tile // {tiles_n}) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]",
                 f"    rn = (tile % {tiles_n}) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]",
                 f"    {mm.m.name} = rm",
                 f"    {mm.n.name} = rn",
                 f"    mask = (rm < {mm.m.extent}) & (rn < {mm.n.extent})",
                 "    zero = rm * 0 + rn * 0"]
        lines += _unravel("bflat", batch, "    ")
        ka, kb = Var("ka", mm.k.extent), Var("kb", mm.k.extent)
        a_index = _tile_pointer(ix.substitute(mm.a_index, {mm.k: Affine.var(ka)}), (mm.m, ka), "rm", "ka")
        b_index = _tile_pointer(ix.substitute(mm.b_index, {mm.k: Affine.var(kb)}), (kb, mm.n), "kb", "rn")
        acc_t = "tl.float64" if mm.dtype.name == "float64" else "tl.float32"
        half = mm.dtype.name in ("float16", "bfloat16")
        precision = "" if half and not self.cfg.upcast else ', input_precision="ieee"'
        up = ".to(tl.float32)" if half and self.cfg.upcast else ""
        lines += [f"    acc = tl.full([BLOCK_M, BLOCK_N], 0, {acc_t})",
                  f"    for kbase in range(0, {mm.k.extent}, BLOCK_K):",
                  "        ka = kbase + tl.arange(0, BLOCK_K)[None, :]",
                  "        kb = kbase + tl.arange(0, BLOCK_K)[:, None]",
                  f"        a = tl.load(a{mm.a_arg} + {a_index}, mask=(rm < {mm.m.extent}) & (ka < {mm.k.extent}), other=0){up}",
                  f"        b = tl.load(a{mm.b_arg} + {b_index}, mask=(kb < {mm.k.extent}) & (rn < {mm.n.extent}), other=0){up}",
                  f"        acc = tl.dot(a, b, acc{precision})"]
        scope = _Scope(self, "    ", "tile")
        stores = self._store(scope, k.stores)
        return lines + scope.lines + stores

    def _reduce(self, pid) -> list:
        k = self.k
        lines = [f"    pflat = {pid} * BLOCK + tl.arange(0, BLOCK)[:, None]",
                 f"    pmask = pflat < {self.size(k.outer)}"]
        lines += _unravel("pflat", k.outer, "    ", self.extents)
        if self._constant_store():
            lines.append("    pzero = pflat * 0")
        if not k.inner_numel:
            # an empty reduced extent: each stage is its identity, loads nothing, stores no row
            lines += [f"    acc{j} = tl.full([BLOCK, 1], {self.acc_init(st)}, {COMPUTE[st.dtype.name]})"
                      for j, st in enumerate(k.stages)]
        elif self.cfg.persistent(k):
            lines += self._tile_header("tl.arange(0, BLOCK_R)[None, :]", "    ")
            scope = _Scope(self, "    ", "inner")
            for j, st in enumerate(k.stages):
                scope.lines += self._one_pass(j, st, scope) + [f"    acc{j} = {self.convert(f'acc{j}', st.dtype)}"]
            stores = self._store(scope, k.inner_stores)   # row-wise: the same tile, already loaded
            lines += scope.lines + stores
        else:
            for j, st in enumerate(k.stages):
                lines += self._looped(j, st) + [f"    acc{j} = {self.convert(f'acc{j}', st.dtype)}"]
            if k.inner_stores:
                lines.append(f"    for rbase in range(0, {self.size(k.inner)}, BLOCK_R):")
                lines += self._tile_header("rbase + tl.arange(0, BLOCK_R)[None, :]", "        ")
                scope = _Scope(self, "        ", "inner")
                stores = self._store(scope, k.inner_stores)
                lines += scope.lines + stores
        scope = _Scope(self, "    ", "outer")
        stores = self._store(scope, k.stores, "pzero")
        return lines + scope.lines + stores

    def _scan(self, pid) -> list:
        """A scan kernel: ``BLOCK`` rows per program walk the scanned extent in tiles of
        ``BLOCK_R``; each tile is scanned with ``tl.associative_scan`` and combined with the
        running value carried from the tiles before it (masked lanes hold the identity)."""
        k = self.k
        st = k.stages[0]
        acc_t = ("tl.float64" if st.dtype.name == "float64" else "tl.float32") if st.dtype.is_float else "tl.int64"
        init = self.acc_init(st)
        # the scan's combine function, and the same combine written out (the interpreter binds
        # lf_add and lf_mul to Triton's own, which only its reduce and scan may call)
        combine, both = {Op.CUMSUM: ("lf_add", "{} + {}"), Op.CUMPROD: ("lf_mul", "{} * {}"),
                         Op.LOGCUMSUMEXP: ("lf_logaddexp", "lf_logaddexp({}, {})")}[st.op]
        lines = [f"    pflat = {pid} * BLOCK + tl.arange(0, BLOCK)[:, None]",
                 f"    pmask = pflat < {self.size(k.outer)}"]
        lines += _unravel("pflat", k.outer, "    ", self.extents)
        lines += [f"    carry = tl.full([BLOCK, 1], {init}, {acc_t})",
                  f"    for rbase in range(0, {self.size(k.inner)}, BLOCK_R):"]
        ind = "        "
        lines += self._tile_header("rbase + tl.arange(0, BLOCK_R)[None, :]", ind)
        scope = _Scope(self, ind, "inner")
        v = scope.value(st.value)
        scope.lines += [f"{ind}t0 = tl.where(mask, {v}.to({acc_t}), {init})",
                        f"{ind}acc0 = " + both.format("carry", f"tl.associative_scan(t0, 1, {combine})"),
                        f"{ind}carry = " + both.format("carry", f"tl.reduce(t0, 1, {combine})[:, None]")]
        stores = self._store(scope, k.inner_stores)
        return lines + scope.lines + stores

    def _tile_header(self, rflat: str, indent: str) -> list:
        lines = [f"{indent}rflat = {rflat}", f"{indent}rmask = rflat < {self.size(self.k.inner)}"]
        lines += _unravel("rflat", self.k.inner, indent, self.extents)
        lines.append(f"{indent}mask = pmask & rmask")
        return lines

    def _one_pass(self, j, st, scope: _Scope) -> list:
        v = _as_acc(scope.value(st.value), st)
        ind = scope.indent
        lines = [f"{ind}t{j} = tl.where(mask, {v}, {self.acc_init(st)})"]
        if st.op in (Op.ARGMAX, Op.ARGMIN):
            lines.append(f"{ind}i{j} = tl.where(mask, {self.index(st.arg_index)}, {EMPTY})")
        return lines + self._finish(j, st, f"t{j}", f"i{j}", ind)

    def _looped(self, j, st) -> list:
        """Per-lane partials over tiles of the reduced extent, combined across lanes at the end."""
        k = self.k
        acc_t, init = _acc_type(st), self.acc_init(st)
        arg = st.op in (Op.ARGMAX, Op.ARGMIN)
        lines = [f"    t{j} = tl.full([BLOCK, BLOCK_R], {init}, {acc_t})"]
        if arg:
            lines.append(f"    i{j} = tl.full([BLOCK, BLOCK_R], {EMPTY}, tl.int32)")
        lines.append(f"    for rbase in range(0, {self.size(k.inner)}, BLOCK_R):")
        ind = "        "
        lines += self._tile_header("rbase + tl.arange(0, BLOCK_R)[None, :]", ind)
        scope = _Scope(self, ind, "inner")
        v = _as_acc(scope.value(st.value), st)
        lines += scope.lines
        if st.op is Op.SUM:
            lines.append(f"{ind}t{j} = t{j} + tl.where(mask, {v}, 0)")
        elif st.op is Op.PROD:
            lines.append(f"{ind}t{j} = t{j} * tl.where(mask, {v}, 1)")
        elif st.op in (Op.MAX, Op.MIN):
            fn = "lf_max2" if st.op is Op.MAX else "lf_min2"
            lines.append(f"{ind}t{j} = {fn}(tl.where(mask, {v}, {init}), t{j})")
        else:
            # strict comparison keeps each lane's first occurrence; NaN beats everything but NaN
            cmp = ">" if st.op is Op.ARGMAX else "<"
            lines += [f"{ind}vm = tl.where(mask, {v}, {init})",
                      f"{ind}upd = mask & ((vm {cmp} t{j}) | ((vm != vm) & (t{j} == t{j})) | (i{j} == {EMPTY}))",
                      f"{ind}t{j} = tl.where(upd, vm, t{j})",
                      f"{ind}i{j} = tl.where(upd, {self.index(st.arg_index)}, i{j})"]
        return lines + self._finish(j, st, f"t{j}", f"i{j}", "    ")

    def _finish(self, j, st, vals: str, idxs: str, ind: str) -> list:
        """Reduce a ``[BLOCK, BLOCK_R]`` tile of (masked) values along the tile into ``acc<j>``.

        Only plain sum/max/min reductions are used (NaN handled around them: a row holding a
        NaN has max NaN; argmax is the smallest position holding the max), because Triton's
        interpreter runs those with numpy, while a custom combine function runs element by
        element in Python."""
        if st.op is Op.SUM:
            return [f"{ind}acc{j} = tl.reduce({vals}, 1, lf_add)[:, None]"]
        if st.op is Op.PROD:
            return [f"{ind}acc{j} = tl.reduce({vals}, 1, lf_mul)[:, None]"]
        big = st.op in (Op.MIN, Op.ARGMIN)
        lines = [f"{ind}m{j} = tl.reduce({vals}, 1, {'lf_minnum' if big else 'lf_maxnum'})[:, None]"]
        fl = st.value.dtype.is_float
        if fl:
            lines.append(f"{ind}m{j} = tl.where(tl.reduce(({vals} != {vals}).to(tl.int32), 1, lf_add)[:, None] > 0, "
                         f'float("nan"), m{j})')
        if st.op in (Op.MAX, Op.MIN):
            return lines + [f"{ind}acc{j} = m{j}"]
        hit = f"({vals} == m{j}) | (({vals} != {vals}) & (m{j} != m{j}))" if fl else f"{vals} == m{j}"
        return lines + [f"{ind}acc{j} = tl.reduce(tl.where({hit}, {idxs}, {EMPTY}), 1, lf_minnum)[:, None]"]


def _tile_pointer(index: Affine, dims, row: str, col: str) -> str:
    """An operand tile's offsets: a pointer block must have the mask's 2-D shape even when the
    index misses a dim (an extent-1 m, n or k)."""
    text = tl_index(index)
    if all(d in index.vars() for d in dims):
        return text
    return f"({text} + {row} * 0 + {col} * 0)"


def _acc_type(st) -> str:
    dt = st.value.dtype
    if st.op in (Op.SUM, Op.PROD):
        return ("tl.float64" if dt.name == "float64" else "tl.float32") if dt.is_float else "tl.int64"
    return "tl.int32" if dt.is_bool else COMPUTE[dt.name]


def _as_acc(v: str, st) -> str:
    """A stage's value in its accumulator type (bools compare as int32: int1 has no max)."""
    return f"{v}.to({_acc_type(st)})" if st.op in (Op.SUM, Op.PROD) or st.value.dtype.is_bool else v


def _bool_or(sym: str, rule):
    """torch's bool arithmetic is logical (True + True is True), unlike int1 arithmetic."""
    return lambda a, e: f"({a[0]} {sym} {a[1]})" if src_dtype(e).is_bool else rule(a, e)


def _clamp(a, e) -> str:
    """clamp(x, lo, hi): MAXIMUM's lf_max2 with ``lo``, then MINIMUM's lf_min2 with ``hi``, each bound
    first where it is loop-invariant (bool: ``(x | lo) & hi``, torch's logical max and min)."""
    if src_dtype(e).is_bool:
        return f"(({a[0]} | {a[1]}) & {a[2]})"
    at_least_lo = "lf_max2({}, {})".format(*invariant_first(a[:2], e))
    return f"lf_min2({a[2]}, {at_least_lo})" if loop_invariant(e.srcs[2]) else f"lf_min2({at_least_lo}, {a[2]})"


def _pow(a, e) -> str:
    src = src_dtype(e)
    if not src.is_float:
        return f"lf_pow_i({a[0]}, {a[1]})"
    shortcut = src.name in ("float32", "float64") and is_python_scalar(e.srcs[1])   # as the C printer
    return f"{'lf_pow_scalar_f' if shortcut else 'lf_pow_f'}({a[0]}, {a[1]}).to({COMPUTE[e.dtype.name]})"


def _call(fn: str):
    return lambda a, e: f"{fn}({a[0]})"


def _float_or_int(f_fn: str, i_fn: str):
    return lambda a, e: f"{f_fn if src_dtype(e).is_float else i_fn}({a[0]}, {a[1]})"


def _round(a, e) -> str:
    # half to even from ``floor`` and the exact fraction ``x - floor(x)``, never
    # ``floor(x + 0.5)``, which rounds 0.49999997 up
    x = a[0]
    fl = f"tl.floor({x})"
    frac = f"({x} - {fl})"
    up = f"(({frac} > 0.5) | (({frac} == 0.5) & ({fl} % 2.0 != 0.0)))"
    r = f"({fl} + tl.where({up}, 1.0, 0.0))"
    # a zero result keeps x's sign, as nearbyint's (round(-0.3) is -0.0): x * 0 has it
    return f"tl.where({x} != {x}, {x}, tl.where({r} == 0, {x} * 0.0, {r}))"


# The Triton of each elementwise op (printer_base: the rule's signature): tanh, sigmoid, gelu,
# silu and the NaN-propagating max/min are the prelude's (triton_prelude.py).
TRITON_OPS = infix_rules()
TRITON_OPS.update({
    Op.ADD: _bool_or("|", TRITON_OPS[Op.ADD]),
    Op.MUL: _bool_or("&", TRITON_OPS[Op.MUL]),
    Op.MAXIMUM: _bool_or("|", lambda a, e: "lf_max2({}, {})".format(*invariant_first(a, e))),
    Op.MINIMUM: _bool_or("&", lambda a, e: "lf_min2({}, {})".format(*invariant_first(a, e))),
    Op.NOT: lambda a, e: f"({a[0]} == 0)" if src_dtype(e).is_bool else f"(~{a[0]})",
    # floats: a flip of the sign bit (triton_prelude.lf_neg32: neither 0 - x nor x * -1.0 is that)
    Op.NEG: lambda a, e: (f"lf_neg64({a[0]})" if src_dtype(e).name == "float64" else f"lf_neg32({a[0]})")
        if src_dtype(e).is_float else f"(-{a[0]})",
    Op.ABS: _call("tl.abs"),
    Op.ISNAN: lambda a, e: f"({a[0]} != {a[0]})",
    Op.WHERE: lambda a, e: f"tl.where({a[0]}, {a[1]}, {a[2]})",
    Op.FLOORDIV: _float_or_int("lf_floordiv_f", "lf_floordiv_i"),
    Op.MOD: _float_or_int("lf_mod_f", "lf_mod_i"),
    Op.FMOD: _float_or_int("lf_fmod", "lf_fmod_i"),
    Op.POW: _pow,
    Op.RELU: lambda a, e: f"tl.where(({a[0]} != {a[0]}) | ({a[0]} > 0), {a[0]}, 0)",
    Op.RECIPROCAL: lambda a, e: f"(1.0 / {a[0]})",
    Op.RSQRT: lambda a, e: f"(1.0 / tl.sqrt({a[0]}))",
    Op.EXP: _call("tl.exp"),
    Op.LOG: _call("tl.log"),
    Op.SIN: _call("tl.sin"),
    Op.COS: _call("tl.cos"),
    Op.SQRT: _call("tl.sqrt"),
    Op.TANH: lambda a, e: f"{'lf_tanh64' if src_dtype(e).name == 'float64' else 'lf_tanh32'}({a[0]})",
    Op.SIGMOID: _call("lf_sigmoid"),
    Op.GELU: _call("lf_gelu"),
    Op.GELU_GRAD: _call("lf_gelu_grad"),
    Op.SILU: _call("lf_silu"),
    Op.ERF: _call("tl.erf"),
    Op.ERFC: lambda a, e: f"lf_erfc64({a[0]})" if src_dtype(e).name == "float64" else f"lf_erfc32({a[0]})",
    Op.ATAN: _call("lf_atan"),
    Op.EXPM1: _call("lf_expm1"),
    Op.LOG1P: _call("lf_log1p"),
    Op.ATAN2: lambda a, e: f"lf_atan2({a[0]}, {a[1]})",
    Op.COPYSIGN: lambda a, e: f"lf_copysign{64 if src_dtype(e).name == 'float64' else 32}({a[0]}, {a[1]})",
    Op.SIGN: lambda a, e: f"tl.where({a[0]} > 0, 1, tl.where({a[0]} < 0, -1, 0)).to({COMPUTE[e.dtype.name]})",
    Op.LEAKY_RELU: lambda a, e: f"tl.where({a[0]} > 0, {a[0]}, {a[0]} * {a[1]})",
    Op.HARDSIGMOID: lambda a, e: f"(lf_hard_clamp({a[0]}, {a[1]}, {a[2]}) / 6.0)",
    Op.HARDSWISH: lambda a, e: f"({a[0]} * lf_hard_clamp({a[0]}, {a[1]}, {a[2]}) / 6.0)",
    Op.CLAMP: _clamp,
    Op.LOGADDEXP: lambda a, e: f"lf_logaddexp({a[0]}, {a[1]})",
    Op.LOGADDEXP2: lambda a, e: f"lf_logaddexp2({a[0]}, {a[1]})",
    Op.XLOGY: lambda a, e: f"lf_xlogy({a[0]}, {a[1]})",
    Op.LERP: lambda a, e: f"lf_lerp({a[0]}, {a[1]}, {a[2]})",
    Op.FMA: lambda a, e: (f"tl.fma({a[0]}, {a[1]}, {a[2]})" if e.dtype.is_float else f"({a[0]} * {a[1]} + {a[2]})"),
    Op.HYPOT: lambda a, e: f"lf_hypot{64 if src_dtype(e).name == 'float64' else 32}({a[0]}, {a[1]})",
    Op.LOG2: _call("tl.log2"),
    Op.LOG10: lambda a, e: f"(tl.log({a[0]}) * {BASE_FACTOR[Op.LOG10]!r})",
    Op.EXP2: _call("tl.exp2"),
    Op.SOFTPLUS: lambda a, e: (f"tl.where({a[0]} * {a[1]} > {a[2]}, {a[0]}, "
                               f"lf_softplus1({a[0]} * {a[1]}) / {a[1]})"),
    Op.LOGSIGMOID: lambda a, e: f"(tl.where({a[0]} < 0, {a[0]}, 0.0) - lf_log1p_exp_neg(tl.abs({a[0]})))",
    Op.MISH: lambda a, e: (f"({a[0]} * {'lf_tanh64' if src_dtype(e).name == 'float64' else 'lf_tanh32'}"
                           f"(lf_softplus1({a[0]})))"),
    Op.ELU: lambda a, e: f"lf_elu({a[0]}, {a[1]}, {a[2]}, {a[3]})",
    Op.NAN_TO_NUM: lambda a, e: (f'tl.where({a[0]} != {a[0]}, {a[1]}, tl.where({a[0]} == float("inf"), {a[2]}, '
                                 f'tl.where({a[0]} == float("-inf"), {a[3]}, {a[0]})))'),
    Op.FLOOR: _call("tl.floor"),
    Op.CEIL: _call("tl.ceil"),
    Op.TRUNC: lambda a, e: f"tl.where({a[0]} < 0, tl.ceil({a[0]}), tl.floor({a[0]}))",
    Op.ROUND: _round,
    Op.FRAC: lambda a, e: f"({a[0]} - tl.where({a[0]} < 0, tl.ceil({a[0]}), tl.floor({a[0]})))",
})
TritonPrinter.OPS = TRITON_OPS


def print_triton(kernel: Kernel, cfg: TritonConfig) -> tuple[str, str]:
    """``(function name, function source)``; the module is ``PRELUDE`` + the function. The name
    is a hash of the body (not of the kernel's position in a plan), so identical kernels of
    different plans share one module and one compiled binary."""
    body = TritonPrinter(kernel, cfg).function("lf_kernel")
    name = "lf_" + hashlib.sha256(body.encode()).hexdigest()[:16]
    return name, body.replace("def lf_kernel(", f"def {name}(", 1)


__all__ = ["TritonConfig", "MatmulConfig", "candidate_configs", "default_config", "print_triton", "PRELUDE"]

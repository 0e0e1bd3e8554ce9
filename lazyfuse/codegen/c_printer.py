"""Print a ``Kernel`` as C with OpenMP.

Every kernel becomes ``void NAME(char **args, const int64_t *meta)``: ``args`` are the bound
buffers, ``meta`` the launch metadata (loop extents, then the runtime scalars as 64-bit
words). float16 and bfloat16 are stored as such and computed in float32, every computed value
rounded to its dtype as torch's ops round (``kernel.rounds_to_storage``); float32
transcendentals call the vectorisable, NaN-correct functions of ``c_math.h`` instead of libm,
so loops stay SIMD without ``-ffast-math``.

``CConfig`` holds what autotuning may change: the thread count, for reductions the
strategy (``rows``: one output per iteration, reduce in a SIMD loop; ``split``: few outputs,
the reduced extent split across threads; ``tile``: neighbouring outputs reduced together
in SIMD lanes, for reductions along a strided dim), and for pointwise kernels that read or
write across their inner loop (a transposed input: ``transpose_tiles``) the side of the square
tiles they walk.

Sizes are runtime values: loop extents are ``n_<var>`` (read from the launch metadata's
header), and an index stride or row-buffer length that is a product of loop extents is printed
as that product (``n_r0*p0`` for a row of ``n_r0`` elements). A kernel's source then depends
on its sizes only where they change the code (which dims have size 1, strides that are no
such product, the thread and strategy choices), so one compiled library serves every size of
a program whose source is otherwise the same — a new batch size or sequence length plans
anew, but finds its library already built. The source is printed for each size, so whatever
it shares with another size's is right for both. ``LAZYFUSE_SHAPE_GENERIC=0`` prints every
size as a literal instead (one library per size, as before: for measuring what genericity costs).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..ir.dtypes import NARROW_INTS
from ..ir.node import BASE_FACTOR, Op
from . import c_parallel
from .index import SHAPE_GENERIC, Affine, render, size_names
from .kernel import (DIVISION_CODE, INDEX_CODE, Acc, Apply, IndexValue, Kernel, Load, Random, Scalar, is_python_scalar,
                     walk)
from .printer_base import Printer, infix_rules, invariant_first, loop_invariant, narrow_int_route, src_dtype
from .row_cache import kept_values
from .scope import Scope

STORAGE = {"bool": "uint8_t", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
           "int64": "int64_t", "float16": "_Float16",
           "bfloat16": "uint16_t", "float32": "float", "float64": "double"}
COMPUTE = {"bool": "uint8_t", "uint8": "uint8_t", "int8": "int8_t", "int16": "int16_t", "int32": "int32_t",
           "int64": "int64_t", "float16": "float",
           "bfloat16": "float", "float32": "float", "float64": "double"}
C_BYTES = {"uint8_t": 1, "int8_t": 1, "int16_t": 2, "int32_t": 4, "int64_t": 8, "float": 4, "double": 8}
C_BYTES = {name: C_BYTES[c] for name, c in COMPUTE.items()}   # bytes of a value in its compute type

def local_array(ctype: str, name: str, n) -> str:
    """The declaration of a kernel's stack array ``name[n]``, aligned to 64 bytes (the widest
    vector and a cache line). Without the attribute gcc 12 miscompiles our SIMD epilogues for
    AVX-512 targets (``-march=icelake-server``, ``skylake-avx512``, and ``native`` on such
    CPUs): after an ``omp simd reduction`` loop it sets up a frame pointer for a stack
    realignment that it then drops, yet stores to the array with an aligned ``vmovaps`` that
    assumes the realignment happened — the array sits at 8 mod 16 and the kernel faults. An
    explicit alignment makes the compiler realign the frame itself (``and $-64, %rsp``), on
    every ISA gcc or clang targets; ``tests/test_c_candidates.py`` runs every candidate."""
    return f"{ctype} {name}[{n}] LF_ALIGNED"


# torch's CPU pow shortcuts, exponent -> its value in C over x (the prelude's lf_pow_shortcut and
# LF_POW_F both read this one table: the test and the selects can never disagree)
POW_SHORTCUTS = (("2", "x * x"), ("1", "x"), ("0.5", "SQRT(x)"), ("3", "x * x * x"), ("-1", "(T)1 / x"),
                 ("-2", "(T)1 / (x * x)"), ("-0.5", "(T)1 / SQRT(x)"))

PRELUDE = r"""
#include <stdint.h>
#include <string.h>
#include <math.h>
#include <omp.h>
extern int lf_num_threads;   /* the thread budget's count (codegen/c_compile.py, runtime/threads.py) */
extern __thread int lf_launch_threads;   /* a launch's own count, 0: the budget's (c_compile.launch_on) */
static inline int lf_threads(void) { return lf_launch_threads ? lf_launch_threads : lf_num_threads; }
/* Every array a kernel declares on its stack is aligned explicitly (see local_array). */
#define LF_ALIGNED __attribute__((aligned(64)))
""" + (Path(__file__).with_name("c_math.h").read_text() if Path(__file__).with_name("c_math.h").exists() else "") + r"""
static inline float lf_bf2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline uint16_t lf_f2bf(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (f != f) ? (uint16_t)0x7fc0 : (uint16_t)r;
}
static inline double lf_word2f64(int64_t w) { double d; memcpy(&d, &w, 8); return d; }
static inline uint64_t lf_mix(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + i * 0xD1B54A32D192ED03ull + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static inline float lf_uniform(uint64_t seed, uint64_t i) { return (float)(lf_mix(seed, i) >> 40) * 0x1p-24f; }
static inline float lf_normal(uint64_t seed, uint64_t i) {
    float u1 = ((float)(lf_mix(seed, 2 * i) >> 40) + 1.0f) * 0x1p-24f;
    float u2 = (float)(lf_mix(seed, 2 * i + 1) >> 40) * 0x1p-24f;
    return sqrtf(-2.0f * lf_logf(u1)) * lf_cos_nearf(6.283185307179586f * u2);   /* 2 pi u2 < 2^23 */
}
static inline int64_t lf_floordiv_i(int64_t a, int64_t b) {
    if (b == 0 || (b == -1 && a == INT64_MIN)) return b == 0 ? 0 : a;
    int64_t q = a / b; return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t lf_mod_i(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
static inline int64_t lf_pow_i(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
    int64_t r = 1; while (b) { if (b & 1) r *= a; a *= a; b >>= 1; } return r;
}
/* float pow as torch's CPU kernel computes it: x*x for an exponent of 2 (exactly, not powf's
   rounding), x for 1, sqrt for 0.5, x*x*x, 1/x, 1/(x*x), 1/sqrt(x) for 3, -1, -2, -0.5. With a
   loop-invariant exponent (a scalar) gcc unswitches the loop on the first tests, so x ** 2 (a
   squared error, say) vectorises instead of calling powf per element. (With c_math.h's lf_vpowf
   inlined as the last case, gcc finds the loop too big to unswitch and vectorises none of it: a
   pointwise kernel tests lf_pow_shortcut once and runs loops with lf_vpowf where no exponent is
   a shortcut, CPrinter._pointwise.) */
static inline int lf_pow_shortcut(float y) {
    return """ + " || ".join(f"y == {e}f" if "." in e else f"y == {e}" for e, _ in POW_SHORTCUTS) + r""";
}
#define LF_POW_F(NAME, T, SQRT, POW) static inline T NAME(T x, T y) { \
    return """ + " ".join(f"y == (T){e} ? {v} :" for e, v in POW_SHORTCUTS) + r""" POW(x, y); }
LF_POW_F(lf_powf, float, sqrtf, powf)
LF_POW_F(lf_pow, double, sqrt, pow)
/* torch's div_floor_floating: floor(a / b) would be off by one where a / b rounds to an integer */
#define LF_FLOORDIV_F(NAME, T, FMOD, FLOOR, COPYSIGN) static inline T NAME(T a, T b) { \
    if (b == 0) return a / b; \
    T m = FMOD(a, b), d = (a - m) / b; \
    if (m != 0 && ((b < 0) != (m < 0))) d -= 1; \
    if (d == 0) return COPYSIGN((T)0, a / b); \
    T f = FLOOR(d); return (d - f > (T)0.5) ? f + 1 : f; }
LF_FLOORDIV_F(lf_floordiv_ff, float, fmodf, floorf, copysignf)
LF_FLOORDIV_F(lf_floordiv_fd, double, fmod, floor, copysign)
/* float fmod, exact. With q = trunc((double)a / b), a - q*b is C's fmod(a, b) exactly while
   |q| < 2^29: the double quotient's error (< |q| 2^-53 < 2^-24) is less than the distance of
   a/b from the next integer (b - fmod(a, b) is a multiple of b's ulp, >= b 2^-24), so q is the
   truncated quotient, q*b fits double's 53 bits (29 + 24) and the difference, a float, is
   exact. That form vectorises (a double division, a truncation, an FMA); the quotient of an
   infinite or NaN operand, or of b == 0, makes it NaN as fmod's is. A finite quotient of 2^29
   or more (huge a, tiny b) needs libm's fmod: lf_fmodf_exact, which a pointwise kernel runs
   instead, all of its loop again, when the fast pass flagged any element
   (lf__fmod_large; CPrinter._pointwise). */
static inline double lf__fmod_quotient(float a, float b) { return __builtin_trunc((double)a / (double)b); }
static inline int lf__fmod_large(double q) { double m = fabs(q); return m >= 0x1p29 && m < INFINITY; }
static inline float lf__fmodf_q(float a, float b, double q) {
    float r = (float)(q == 0 ? (double)a : LF__MADD(-q, (double)b, (double)a));   /* (q == 0: b may be inf) */
    return r == 0 ? lf__withsign(0.0f, a) : r;                          /* a zero keeps a's sign */
}
static inline float lf_fmodf_exact(float a, float b) { return (float)fmod((double)a, (double)b); }
static inline int64_t lf_fmod_i(int64_t a, int64_t b) { return (b == 0 || b == -1) ? 0 : a % b; }
/* torch's remainder from the fmod m: m + b (in the compute type, as torch adds) where m is not 0
   and its sign is not b's */
#define LF_REM_F(NAME, T) static inline T NAME(T m, T b) { return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m; }
LF_REM_F(lf_remf, float)
LF_REM_F(lf_rem, double)
/* out[w] = the sum of p[w][0..15], for 16 rows at once: four rounds of folding pairs of rows
   into one vector (each round halves the lanes per row), instead of 16 horizontal sums. Where
   the compiler lacks __builtin_shufflevector (gcc before 12), or LF_NO_VECTOR_FOLD is defined
   (its test), the scalar sums. */
#if !defined(LF_NO_VECTOR_FOLD) && (defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12))
typedef float lf_v16 __attribute__((vector_size(64)));
#define LF_FOLD(a, b, ...) (__builtin_shufflevector(a, b, __VA_ARGS__))
static inline void lf_sum16x16(const float p[16][16], float *out) {
    lf_v16 r[16], f[8], g[4], h[2], o;
    for (int w = 0; w < 16; w++) memcpy(&r[w], p[w], 64);
    for (int i = 0; i < 8; i++)
        f[i] = LF_FOLD(r[i], r[i + 8], 0,1,2,3,4,5,6,7, 16,17,18,19,20,21,22,23) +
               LF_FOLD(r[i], r[i + 8], 8,9,10,11,12,13,14,15, 24,25,26,27,28,29,30,31);
    for (int i = 0; i < 4; i++)
        g[i] = LF_FOLD(f[i], f[i + 4], 0,1,2,3, 16,17,18,19, 8,9,10,11, 24,25,26,27) +
               LF_FOLD(f[i], f[i + 4], 4,5,6,7, 20,21,22,23, 12,13,14,15, 28,29,30,31);
    for (int i = 0; i < 2; i++)
        h[i] = LF_FOLD(g[i], g[i + 2], 0,1,16,17, 4,5,20,21, 8,9,24,25, 12,13,28,29) +
               LF_FOLD(g[i], g[i + 2], 2,3,18,19, 6,7,22,23, 10,11,26,27, 14,15,30,31);
    o = LF_FOLD(h[0], h[1], 0,16,2,18,4,20,6,22,8,24,10,26,12,28,14,30) +
        LF_FOLD(h[0], h[1], 1,17,3,19,5,21,7,23,9,25,11,27,13,29,15,31);
    memcpy(out, &o, 64);   /* lane w: row w */
}
#else
static inline void lf_sum16x16(const float p[16][16], float *out) {
    for (int w = 0; w < 16; w++) { float s = 0; for (int l = 0; l < 16; l++) s += p[w][l]; out[w] = s; }
}
#endif
"""


@dataclass(frozen=True)
class CConfig:
    threads: int = 0          # 0: the thread budget's count (runtime/threads.py); set at launch, not printed
    strategy: str = "auto"    # reductions: rows | split | tile (auto picks by shape)
    tile: int = 16            # ``rows``: outputs per block (whose epilogue runs as one SIMD loop)
    unroll: int = 8           # ``rows``, single-sum kernels: outputs reduced together per pass
    lanes: int = 1024         # ``tile``: neighbouring outputs accumulated together, one row at a time
    tree: bool = True         # ``rows``, float single sums: a full block as lane partials (``_tree_sum``)
    transpose_tile: int = 64  # pointwise kernels with a transposed access: the tiles' side (``transpose_tiles``)

    def label(self) -> str:
        return (f"threads={self.threads or 'all'},strategy={self.strategy},tile={self.tile},unroll={self.unroll},"
                f"lanes={self.lanes}" + ("" if self.tree else ",tree=off") +
                ("" if self.transpose_tile == 64 else f",transpose_tile={self.transpose_tile}"))


# The C tuning space (CpuBackend.candidates): after the default ``CConfig()``, a kernel whose
# loops get a parallel region also tries ``SERIAL`` (the default's own function, launched on one
# thread: no second compile), and a reduction tries each of these.
SERIAL = dict(threads=1)
# single-stage reductions whose ``rows`` kernels reduce ``unroll`` outputs per pass (``_unrolled_sum``)
UNROLLED_REDUCTIONS = (Op.SUM, Op.PROD, Op.MAX, Op.MIN)
REDUCTION_VARIANTS = (dict(strategy="rows"), dict(strategy="split"), dict(strategy="tile"),
                      dict(strategy="rows", unroll=4, tree=False),
                      dict(strategy="tile", lanes=16),
                      dict(strategy="tile", lanes=128), dict(strategy="tile", lanes=512))
# pointwise kernels walked in tiles (``transpose_tiles``): the other tile sides tuning tries
TRANSPOSE_VARIANTS = (dict(transpose_tile=32), dict(transpose_tile=16))
# the least extent of each tiled dim, and elements of the two together, worth tiles: below, the
# strided side's cache lines (one per element of the inner loop) stay in L1 from one outer
# iteration to the next anyway
TRANSPOSE_MIN_EXTENT = 16
TRANSPOSE_MIN_ELEMENTS = 1 << 14


def transpose_tiles(k: Kernel):
    """``(a, b, across)`` for a pointwise kernel to walk in square tiles over its outer vars ``a``
    and ``b`` (its innermost), or None. Its loops run along the output's rows (``b``), so a load
    with a large stride along ``b`` but stride 1 along ``a`` (``x.t() + 1``, ``x.permute(0, 2, 1)``)
    meets a new cache line per element and, where the stride is a multiple of 4 KiB, evicts the
    lines it will need next from L1's few ways: 9 ms for ``x.t() + 1`` of 1024x1024 float32 (Zen 4,
    one thread) against torch's 0.5 ms. ``across``: the ``(arg, index)`` of each such load, which a
    tile first copies into a buffer of its own along ``a`` (contiguous runs), then reads there."""
    if k.stages or k.segments or len(k.outer) < 2:
        return None
    b = k.outer[-1]
    if b.extent < TRANSPOSE_MIN_EXTENT:
        return None
    loads = {(e.arg, e.index): e for e in walk([s.value for s in k.stores]) if isinstance(e, Load)}
    a, across = None, []
    for (arg, index), e in loads.items():
        if abs(index.coeff(b)) <= 1:
            continue
        unit = [v for v in k.outer[:-1] if abs(index.coeff(v)) == 1 and v.extent >= TRANSPOSE_MIN_EXTENT]
        if unit and unit[-1].extent * b.extent >= TRANSPOSE_MIN_ELEMENTS and a in (None, unit[-1]):
            a = unit[-1]
            across.append((arg, index))
    return None if a is None else (a, b, tuple(across))


class _Scope(Scope):
    """C locals: ``T vN = ...;`` lines."""

    def held(self, e) -> str | None:
        if not isinstance(e, Acc):
            return None
        if self.p.k.stages[e.stage].arg_index is not None:
            return f"accidx{e.stage}"
        # sums accumulate in double; read back in the compute type so the loop stays float
        return f"(({COMPUTE[e.dtype.name]})acc{e.stage})"

    def local(self, value: str, dtype) -> str:
        name = f"v{self.p.fresh()}"
        self.lines.append(f"{self.indent}{COMPUTE[dtype.name]} {name} = {value};")
        return name


class CPrinter(Printer):
    LANGUAGE = "C"

    # -- values -------------------------------------------------------------------------------
    def rhs(self, e, scope: _Scope) -> str:
        if isinstance(e, Load):
            raw = self.tile_buffers.get((e.arg, e.index)) or f"a{e.arg}[{self.index(e.index)}]"
            if e.dtype.name == "bfloat16":
                return f"lf_bf2f({raw})"
            return f"({COMPUTE[e.dtype.name]}){raw}"
        if isinstance(e, Scalar):
            return f"s{e.slot}"
        if isinstance(e, IndexValue):
            return f"({COMPUTE[e.dtype.name]}){self.index(e.index)}"
        if isinstance(e, Random):
            seed, off = scope.value(e.seed), scope.value(e.offset)
            fn = "lf_normal" if e.normal else "lf_uniform"
            return f"({COMPUTE[e.dtype.name]}){fn}((uint64_t){seed}, (uint64_t){off} + (uint64_t){self.index(e.index)})"
        assert isinstance(e, Apply)
        args = [scope.value(s) for s in e.srcs]
        return self.apply(e, args)

    tile_buffers = {}   # (arg, index) -> its read from a tile's buffer (_tiled_pointwise_loops)
    fast_pass = False   # the fast pass of a pointwise kernel's flagged forms (_fast_form, _pointwise)
    generic_pow = False  # a pointwise kernel's loops where no scalar exponent is a shortcut (_pointwise)

    def apply(self, e: Apply, a: list) -> str:
        if e.op is Op.CHECK_INDEX:
            return self.index_check(e, a)
        if e.op in (Op.FMOD, Op.MOD) and _f32(e):
            return self.float_remainder(e, a)
        if self.fast_pass and e.op in NEAR_SINCOS and _f32(e):
            return f"({{ float lf_s = {a[0]}; lf_large |= lf__sin_far(lf_s); {NEAR_SINCOS[e.op]}(lf_s); }})"
        if self.generic_pow and _scalar_pow_f32(e):
            return f"lf_vpowf({a[0]}, {a[1]})"
        if e.op is Op.DIV and self.k.inner_stores and isinstance(e.srcs[1], Acc) and _f32(e):
            # along a row-wise kernel's row (softmax's exp / sum): a multiply by the row's
            # reciprocal, which gcc hoists out of the loop, as torch's softmax computes it;
            # a vector division per element cost softmax 5-12% single-threaded (Zen 4)
            return f"({a[0]} * (1.0f / {a[1]}))"
        return super().apply(e, a)

    def index_check(self, e: Apply, a: list) -> str:
        """``Op.CHECK_INDEX`` (srcs index, size): the index made non-negative; one out of range
        is written to its check's word and the check's code to the error flag (``lf_err``:
        ``Kernel.index_checks``), a conditional store as ``_divisor``'s."""
        k = self.check_number[id(e)]
        wrap = e.arg[2]
        low, value = ("-lf_n", "lf_i < 0 ? lf_i + lf_n : lf_i") if wrap else ("0", "lf_i")
        return (f"({{ int64_t lf_i = {a[0]}, lf_n = {a[1]}; if (lf_i < {low} || lf_i >= lf_n) "
                f"{{ lf_err[{1 + k}] = lf_i; lf_err[0] = {INDEX_CODE + k}; }} {value}; }})")

    def float_remainder(self, e: Apply, a: list) -> str:
        """fmod (``FMOD``) or torch's remainder (``MOD``) of float32 values: in the fast pass the
        vectorisable form, which flags a quotient it cannot take in ``lf_large``; else libm's."""
        if self.fast_pass:
            m = (f"({{ double lf_q = lf__fmod_quotient({a[0]}, {a[1]}); lf_large |= lf__fmod_large(lf_q); "
                 f"lf__fmodf_q({a[0]}, {a[1]}, lf_q); }})")
        else:
            m = f"lf_fmodf_exact({a[0]}, {a[1]})"
        return m if e.op is Op.FMOD else f"lf_remf({m}, {a[1]})"

    # -- casts (the cases: printer_base.Printer.cast) ------------------------------------------
    def cast(self, x: str, src, dst) -> str:
        if src.is_bool and dst.is_float:
            # a select, not a conversion of the byte: gcc 12 vectorises no loop that converts a
            # compare of 64-bit integers' byte to float (cross-entropy's one-hot of its targets)
            return f"({x} ? 1.0 : 0.0)" if COMPUTE[dst.name] == "double" else f"({x} ? 1.0f : 0.0f)"
        if src.is_int and dst.is_float:
            # an integer zero is +0.0, but under -fno-trapping-math gcc folds (float)(int)f into
            # truncf(f), which keeps the sign (-0.5 -> int 0 -> -0.0); `+ 0` it drops, this it keeps
            r = super().cast(x, src, dst)
            return f"({r} == 0 ? 0 : {r})"
        return super().cast(x, src, dst)

    def reinterpret(self, x: str, src, dst) -> str:
        """The bits of ``x`` in ``src``'s storage type copied into ``dst``'s (memcpy: no aliasing
        rule broken; gcc turns it into a register move)."""
        n = self.fresh()
        back = f"lf_bf2f(lf_r{n})" if dst.name == "bfloat16" else f"({COMPUTE[dst.name]})lf_r{n}"
        return (f"({{ {STORAGE[src.name]} lf_b{n} = {_to_storage(x, src)}; {STORAGE[dst.name]} lf_r{n}; "
                f"memcpy(&lf_r{n}, &lf_b{n}, sizeof lf_r{n}); {back}; }})")

    def to_bool(self, x: str) -> str:
        return f"(uint8_t)({x} != 0)"

    def float_to_int(self, x: str, src, dst) -> str:
        if dst in NARROW_INTS:   # through a wider int, then truncated, as torch's CPU converts
            return f"({COMPUTE[dst.name]}){self.float_to_int(x, src, narrow_int_route(src, dst))}"
        lim = "9223372036854775808.0" if dst.name == "int64" else "2147483648.0"
        lo = "INT64_MIN" if dst.name == "int64" else "INT32_MIN"
        return f"(({x} != {x} || {x} >= {lim} || {x} < -{lim}) ? {lo} : ({COMPUTE[dst.name]}){x})"

    def to_half(self, x: str, src, dst) -> str:
        if dst.name == "float16":
            return f"(float)(_Float16)({x})"
        return f"lf_bf2f(lf_f2bf((float)({x})))"

    def convert(self, x: str, dst) -> str:
        return f"({COMPUTE[dst.name]})({x})"

    def infinity(self, positive: bool) -> str:
        return "INFINITY" if positive else "-INFINITY"

    def int_limit(self, dt, high: bool) -> str:
        if dt.name == "uint8":
            return "UINT8_MAX" if high else "0"
        return f"{dt.name.upper()}_MAX" if high else f"{dt.name.upper()}_MIN"   # stdint's INT16_MAX...

    # -- structure ----------------------------------------------------------------------------
    def source(self) -> str:
        k = self.k
        lines = [f"void {k.name}(char **args, const int64_t *meta) {{"]
        for i, arg in enumerate(k.args):
            lines.append(f"    {STORAGE[arg.dtype.name]} *a{i} = ({STORAGE[arg.dtype.name]} *)args[{i}];")
        base = k.scalar_word(0)
        for i, dt in enumerate(k.scalars):
            word = f"meta[{base + i}]"
            val = f"lf_word2f64({word})" if dt.is_float else word
            lines.append(f"    const {COMPUTE[dt.name]} s{i} = ({COMPUTE[dt.name]}){val};")
        flag = k.error_flag_word
        if flag is not None:   # (the metadata is the launcher's to read back: writable memory)
            lines.append(f"    int64_t *lf_err = (int64_t *)&meta[{flag}];")
        # the header's words: meta[0] = len(outer), the outer extents, len(inner), the inner extents
        for i, v in enumerate(k.outer + k.inner if SHAPE_GENERIC else ()):
            self.extents[v] = f"n_{v.name}"
            lines.append(f"    const int64_t n_{v.name} = meta[{1 + i + (i >= len(k.outer))}];")
        # then the kernel's runtime sizes (Kernel.sizes), read by the index arithmetic
        for i, value in enumerate(k.sizes):
            self.size_names[value] = f"z{i}"
            lines.append(f"    const int64_t z{i} = meta[{2 + len(k.outer) + len(k.inner) + i}];")
        par = self._parallel(k)
        if k.segments:
            lines += self._segments()
        elif not k.stages:
            lines += self._pointwise(par)
        else:
            strategy = self.strategy()
            emit = {"rows": self._rows, "split": self._split, "tile": self._tile, "scan": self._scan}[strategy]
            lines += self._with_fast_pass(lambda: emit(par))
        lines.append("}")
        return "\n".join(lines)

    def _parallel(self, k: Kernel):
        """The ``num_threads`` clause of ``k``'s parallel loop, None for no parallel region."""
        # the launch's count, else the budget's (never OpenMP's own count: that is torch's); a
        # config's ``threads`` is a launch setting (CpuBackend.bind), not code
        nt = " num_threads(lf_threads())"
        # too little work for threads: no parallel region at all (even a disabled one costs ~1 us)
        return nt if c_parallel.parallel(k) else None

    def _segments(self) -> list:
        """A foreach kernel: each segment's pointwise loops in turn, each in a block of its own
        (so the locals of one never meet another's), threaded by its own size."""
        lines = []
        for seg in self.k.segments:
            sub = CPrinter(seg, self.cfg)
            sub.check_number = self.check_number
            lines += ["    {"] + sub._pointwise(self._parallel(seg)) + ["    }"]
        return lines

    def strategy(self) -> str:
        k, s = self.k, self.cfg.strategy
        if k.kind == "scan":
            return "scan"
        if k.inner_stores:
            # row-wise kernels: each row's stages, then its stores along the row; where the rows
            # run across memory (a statistic of x.t()'s rows, stored in x's order), neighbouring
            # rows advance together, one lane each (``_tile``), so every pass reads along memory
            # (a walk down each row took 10x the time of a column reduction and a second kernel).
            # (Rows of a row-major result, softmax(x, 0), keep their row walk and its row cache.)
            tile = s in ("auto", "tile") and k.rows_across_memory and self._tileable() and not self._inner_contiguous()
            return "tile" if tile else "rows"
        if s == "tile" and not self._tileable():
            s = "auto"
        if s != "auto":
            return s
        if k.outer_numel < 64 and k.inner_numel >= 4096:
            return "split"
        if self._tileable() and not self._inner_contiguous():
            return "tile"
        return "rows"

    def _inner_contiguous(self) -> bool:
        if not self.k.inner:
            return True
        last = self.k.inner[-1]
        loads = [e for st in self.k.stages for e in walk([st.value]) if isinstance(e, Load)]
        return all(e.index.coeff(last) in (0, 1) for e in loads)

    def _tileable(self) -> bool:
        k = self.k
        return bool(k.outer) and k.outer[-1].extent >= 2 and all(
            st.op in (Op.SUM, Op.MAX, Op.MIN) for st in k.stages)

    def extent(self, v) -> str:
        """``v``'s extent in the source: its runtime value for the kernel's own loops, else a literal."""
        return self.extents.get(v, str(v.extent))

    def index(self, a: Affine) -> str:
        return render(a, "/", self.extents, size=size_names(self.size_names))

    def size(self, vars_) -> str:
        """The product of ``vars_``' extents, in the source."""
        return "*".join(self.extent(v) for v in vars_) or "1"

    def _loops(self, vars_, indent, pragma_outer=None, simd_inner=True):
        out = []
        for d, v in enumerate(vars_):
            if d == 0 and pragma_outer:
                out.append(f"{indent}{pragma_outer}")
            if d == len(vars_) - 1 and simd_inner:
                out.append(f"{indent}#pragma omp simd")
            out.append(f"{indent}for (int64_t {v.name} = 0; {v.name} < {self.extent(v)}; {v.name}++) {{")
            indent += "    "
        return out, indent

    def _store(self, scope: _Scope, stores=None) -> list:
        lines = []
        for st in (self.k.stores if stores is None else stores):
            v = scope.value(st.value)
            dt = self.k.args[st.arg].dtype
            lines.append(f"{scope.indent}a{st.arg}[{self.index(st.index)}] = {_to_storage(v, dt)};")
        return lines

    def _pointwise(self, par):
        k = self.k
        if not k.outer:
            scope = _Scope(self, "    ")
            st = self._store(scope)
            return scope.lines + st
        return self._with_fast_pass(lambda: self._pointwise_pow_split(par) or self._pointwise_loops(par))

    def _with_fast_pass(self, emit):
        """The kernel's loops, ``emit()``; where they compute a fast form (a float remainder,
        sin/cos's near reduction: ``_fast_pass_alias_test``), first with the fast forms, which
        flag an element beyond their reach in ``lf_large`` (each loop pragma reduces it), then,
        only where one was flagged, all of them again with the exact forms (libm's fmod,
        lf_sinf). The second pass recomputes what the first did only if no output is an input: a
        kernel that writes a buffer it reads (an in-place fmod_, a result planned into its
        input's buffer) runs the exact forms alone. (Every pass initialises its accumulators and
        only stores its outputs, so a second one overwrites the first's.)"""
        alias = self._fast_pass_alias_test()
        if alias is None:
            return emit()
        self.fast_pass = True
        fast = [f"{ln} reduction(|:lf_large)" if ln.lstrip().startswith("#pragma omp") else ln for ln in emit()]
        self.fast_pass = False
        return (["    int lf_large = 1;   /* run the exact pass unless the fast one runs and flags nothing */",
                 f"    if (!({alias})) {{", "    lf_large = 0;"] + fast +
                ["    }", "    if (lf_large) {"] + emit() + ["    }"])

    def _pointwise_pow_split(self, par):
        """For a pointwise kernel with float32 ``x ** s``, s a Python number: the loops with
        torch's shortcuts (``lf_powf``) where any such s is one of them, else the loops with
        ``lf_vpowf``, which gcc vectorises (``lf_powf``'s call of it would not be). None where
        there is no such power."""
        exponents = {self._invariant(e.srcs[1]) for e in walk([st.value for st in self.k.stores])
                     if _scalar_pow_f32(e)}
        if not exponents:
            return None
        self.generic_pow = True
        generic = self._pointwise_loops(par)
        self.generic_pow = False
        test = " || ".join(f"lf_pow_shortcut({x})" for x in sorted(exponents))
        return ([f"    if ({test}) {{"] + self._pointwise_loops(par) +
                ["    } else {   /* no exponent is a shortcut: lf_vpowf */"] + generic + ["    }"])

    def _invariant(self, e) -> str:
        """The C of a Python-number scalar through its casts (``is_python_scalar``), outside the loops."""
        if isinstance(e, Scalar):
            return f"s{e.slot}"
        return self.cast(self._invariant(e.srcs[0]), e.srcs[0].dtype, e.dtype)

    def _fast_pass_alias_test(self):
        """For a kernel with a fast form (a float remainder, a float sin or cos) in a stored or a
        reduced value: the C test that an output buffer is an input's (``0``: none can be), or
        None where there is no fast form or an argument is both read and written."""
        values = [st.value for st in self.k.stores] + [st.value for st in self.k.stages]
        if not any(isinstance(e, Apply) and e.op in (Op.FMOD, Op.MOD, *NEAR_SINCOS) and _f32(e) for e in walk(values)):
            return None
        read = sorted({e.arg for e in walk(values) if isinstance(e, Load)})
        written = sorted({st.arg for st in self.k.stores})
        if set(read) & set(written):
            return None
        return " || ".join(f"(char *)a{w} == (char *)a{r}" for w in written for r in read) or "0"

    def _pointwise_loops(self, par):
        k = self.k
        tiles = transpose_tiles(k)
        if tiles is not None:
            return self._tiled_pointwise_loops(par, *tiles)
        n = len(k.outer)
        if par is None:
            pragma = "#pragma omp simd" if n == 1 else None
        else:
            pragma = f"#pragma omp parallel for simd schedule(static){par}" if n == 1 else \
                f"#pragma omp parallel for collapse({n - 1}) schedule(static){par}"
        loops, indent = self._loops(k.outer, "    ", pragma, simd_inner=n > 1)
        scope = _Scope(self, indent)
        st = self._store(scope)
        return loops + scope.lines + st + ["    }" for _ in k.outer]

    def _tiled_pointwise_loops(self, par, a, b, across):
        """A pointwise kernel's loops with ``a`` and ``b`` (``transpose_tiles``) walked in square
        tiles of ``transpose_tile`` elements a side (fewer at the ragged edges); the other outer
        vars outermost, and the threads share the tiles. A tile first copies each load of
        ``across`` into a buffer of its own, along ``a`` (contiguous runs of the source), then
        computes along ``b`` in a SIMD loop that reads the buffers (in L1) and writes the
        output's rows contiguously."""
        k, T = self.k, self.cfg.transpose_tile
        others = [v for v in k.outer if v not in (a, b)]
        lines = [f"    #pragma omp parallel for collapse({len(others) + 2}) schedule(static){par}"] \
            if par is not None else []
        indent = "    "
        for v in others:
            lines.append(f"{indent}for (int64_t {v.name} = 0; {v.name} < {self.extent(v)}; {v.name}++) {{")
            indent += "    "
        for v in (a, b):
            lines.append(f"{indent}for (int64_t {v.name}_t = 0; {v.name}_t < {self.extent(v)}; {v.name}_t += {T}) {{")
            indent += "    "
        for v in (a, b):
            n = self.extent(v)
            lines.append(f"{indent}const int64_t {v.name}_e = {v.name}_t + {T} < {n} ? {v.name}_t + {T} : {n};")
        # a buffer holds its tile in rows along b, so the SIMD loop below reads it contiguously
        # (the copy's stores stride through L1; a gather there instead of here measured 1.1-1.6x slower)
        at = f"({a.name} - {a.name}_t) * {T} + ({b.name} - {b.name}_t)"
        buffers = {}
        for i, (arg, index) in enumerate(across):
            lines.append(f"{indent}{local_array(STORAGE[k.args[arg].dtype.name], f'tb{i}', T * T)};")
            buffers[(arg, index)] = f"tb{i}[{at}]"
        if across:
            inner = indent + "    " * 2
            lines += [f"{indent}for (int64_t {b.name} = {b.name}_t; {b.name} < {b.name}_e; {b.name}++) {{",
                      f"{indent}    #pragma omp simd",
                      f"{indent}    for (int64_t {a.name} = {a.name}_t; {a.name} < {a.name}_e; {a.name}++) {{"]
            lines += [f"{inner}{buffers[key]} = a{key[0]}[{self.index(key[1])}];" for key in across]
            lines += [f"{indent}    }}", f"{indent}}}"]
        lines.append(f"{indent}for (int64_t {a.name} = {a.name}_t; {a.name} < {a.name}_e; {a.name}++) {{")
        indent += "    "
        lines += [f"{indent}#pragma omp simd",
                  f"{indent}for (int64_t {b.name} = {b.name}_t; {b.name} < {b.name}_e; {b.name}++) {{"]
        self.tile_buffers = buffers
        scope = _Scope(self, indent + "    ")
        st = self._store(scope)
        self.tile_buffers = {}
        return lines + scope.lines + st + ["    }" for _ in range(len(k.outer) + 2)]

    def _acc_decl(self, j, st, indent):
        acc_t = _acc_type(st, self.k.inner_numel)
        init = self.acc_init(st)
        lines = [f"{indent}{acc_t} acc{j} = {init};"]
        if st.arg_index is not None:
            lines.append(f"{indent}int64_t accidx{j} = 0;")
        return lines

    def _combine(self, j, st, v, idx) -> str:
        fl = st.value.dtype.is_float
        if st.op is Op.SUM:
            return f"acc{j} += ({_acc_type(st, self.k.inner_numel)}){v};"
        if st.op is Op.PROD:
            return f"acc{j} *= ({_acc_type(st, self.k.inner_numel)}){v};"
        if st.op in (Op.MAX, Op.MIN):
            cmp = ">" if st.op is Op.MAX else "<"
            nan = f" || {v} != {v}" if fl else ""
            return f"acc{j} = ({v} {cmp} acc{j}{nan}) ? {v} : acc{j};"
        cmp = ">" if st.op is Op.ARGMAX else "<"
        nan = f" || ({v} != {v} && acc{j} == acc{j})" if fl else ""
        return f"if ({v} {cmp} acc{j}{nan}) {{ acc{j} = {v}; accidx{j} = {idx}; }}"

    def _stage_loop(self, j, st, indent, pragma=None, kept=()):
        """The inner loop of one reduction stage. Sums are SIMD reductions; so are max/min, as a
        plain max/min plus a NaN flag (torch propagates NaN, a SIMD max would drop it).
        ``kept`` (row-wise kernels, see ``row_cache``): values earlier stages left in row
        buffers are read from them, and this stage's are stored to theirs."""
        k = self.k
        lines = []
        nan_flag = st.op in (Op.MAX, Op.MIN) and st.value.dtype.is_float
        if st.op in (Op.SUM, Op.PROD):
            red = f" reduction({'+' if st.op is Op.SUM else '*'}:acc{j})"
        elif st.op in (Op.MAX, Op.MIN):
            red = f" reduction({st.op.label}:acc{j})" + (f" reduction(|:nan{j})" if nan_flag else "")
        else:
            red = None
        loops, ind = self._loops(k.inner, indent, None, simd_inner=red is not None)
        if red is not None and loops:
            loops = [ln.replace("#pragma omp simd", f"#pragma omp simd{red}") for ln in loops]
        if nan_flag:
            lines.append(f"{indent}int nan{j} = 0;")
        if pragma:
            loops = [f"{indent}{pragma}"] + loops
        scope = _Scope(self, ind)
        self._read_kept(scope, kept, j)
        v = scope.value(st.value)
        flat = self._row_position()
        scope.lines += [f"{ind}row{i}[{flat}] = {scope.value(e)};" for i, (s, e) in enumerate(kept) if s == j]
        idx = self.index(st.arg_index) if st.arg_index is not None else "0"
        if nan_flag:
            cmp = ">" if st.op is Op.MAX else "<"
            body = [f"{ind}acc{j} = {v} {cmp} acc{j} ? {v} : acc{j};", f"{ind}nan{j} |= {v} != {v};"]
        else:
            body = [f"{ind}{self._combine(j, st, v, idx)}"]
        lines += loops + scope.lines + body
        lines += [indent + "}" for _ in k.inner]
        if nan_flag:
            lines.append(f"{indent}if (nan{j}) acc{j} = NAN;")
        return lines

    def _rows(self, par):
        k = self.k
        if k.outer and not k.inner_stores and k.outer[-1].extent > 1:
            return self._row_blocks(par)
        n = len(k.outer)
        pragma = f"#pragma omp parallel for collapse({n}) schedule(static){par}" if n and par is not None else None
        loops, indent = self._loops(k.outer, "    ", pragma, simd_inner=False)
        kept = kept_values(k, lambda e: C_BYTES[e.dtype.name])
        body = [f"{indent}{local_array(COMPUTE[e.dtype.name], f'row{i}', self.size(k.inner))};" for i, (_, e) in enumerate(kept)]
        for j, st in enumerate(k.stages):
            body += self._acc_decl(j, st, indent)
            body += self._stage_loop(j, st, indent, kept=kept)
        if k.inner_stores:
            row, ind = self._loops(k.inner, indent, None, simd_inner=True)
            scope = _Scope(self, ind)
            self._read_kept(scope, kept, len(k.stages))
            stores = self._store(scope, k.inner_stores)
            body += row + scope.lines + stores + [indent + "}" for _ in k.inner]
        scope = _Scope(self, indent)
        stores = self._store(scope)
        return loops + body + scope.lines + stores + ["    }" for _ in k.outer]

    def _scan(self, par):
        """A scan kernel: each row's running value along the inner extent, one sequential loop
        per row, the rows in parallel. Where the scanned dim is not the innermost in memory
        (``cumsum(x, 0)``), a block of ``tile`` neighbouring rows advances together, one SIMD
        step over the block per position, so the loads stay contiguous."""
        k = self.k
        acc_t, init = _scan_acc_type(k.stages[0]), self.acc_init(k.stages[0])
        if k.outer and k.outer[-1].extent > 1 and not self._inner_contiguous():
            W = self.cfg.tile
            lines, indent = self._block_loops(par, W)
            lines += [f"{indent}{local_array(acc_t, 'acc0v', W)};",
                      f"{indent}for (int64_t w = 0; w < {W}; w++) acc0v[w] = {init};"]
            row, ind = self._loops(k.inner, indent, None, simd_inner=False)
            step = ind + "    "
            lines += row + [f"{ind}#pragma omp simd", f"{ind}for (int64_t w = 0; w < lanes; w++) {{",
                            f"{step}const int64_t {k.outer[-1].name} = blk * {W} + w;",
                            f"{step}{acc_t} acc0 = acc0v[w];"]
            lines += self._scan_step(step) + [f"{step}acc0v[w] = acc0;", f"{ind}}}"]
            lines += [indent + "}" for _ in k.inner]
            return lines + ["    }" for _ in k.outer]
        n = len(k.outer)
        pragma = f"#pragma omp parallel for collapse({n}) schedule(static){par}" if n and par is not None else None
        loops, indent = self._loops(k.outer, "    ", pragma, simd_inner=False)
        row, ind = self._loops(k.inner, indent, None, simd_inner=False)
        body = [f"{indent}{acc_t} acc0 = {init};"] + row + self._scan_step(ind) + [indent + "}" for _ in k.inner]
        return loops + body + ["    }" for _ in k.outer]

    def _scan_step(self, ind) -> list:
        """One position of a scan: combine its value into ``acc0``, then store the running value."""
        st = self.k.stages[0]
        acc_t = _scan_acc_type(st)
        scope = _Scope(self, ind)
        v = f"({acc_t}){scope.value(st.value)}"
        if st.op is Op.CUMSUM:
            scope.lines.append(f"{ind}acc0 += {v};")
        elif st.op is Op.CUMPROD:
            scope.lines.append(f"{ind}acc0 *= {v};")
        else:   # log(exp(acc0) + exp(v)) without overflow; NaN propagates, inf and -inf as torch
            scope.lines += [f"{ind}{{",
                            f"{ind}    const {acc_t} x = {v}, lo = acc0 < x ? acc0 : x, hi = acc0 < x ? x : acc0;",
                            f"{ind}    acc0 = (lo != lo || hi != hi) ? lo + hi : (hi == INFINITY || hi == -INFINITY) "
                            "? hi : hi + log1p(exp(lo - hi));",
                            f"{ind}}}"]
        stores = self._store(scope, self.k.inner_stores)
        return scope.lines + stores

    def _row_position(self) -> str:
        """The flat position along the reduced extent (a row buffer's index)."""
        flat, inside = [], []
        for v in reversed(self.k.inner):
            flat.append(f"{self.size(inside)}*{v.name}" if inside else v.name)
            inside.insert(0, v)
        return " + ".join(reversed(flat)) or "0"

    def _read_kept(self, scope: _Scope, kept, before: int) -> None:
        """Bind the values stages before ``before`` kept in row buffers to their buffer reads."""
        flat = self._row_position()
        for i, (s, e) in enumerate(kept):
            if s < before:
                scope.names[id(e)] = f"row{i}[{flat}]"

    def _block_loops(self, par, W=None):
        """The parallel loops over the outer dims, the last one in blocks of ``tile`` outputs
        (``lanes`` of them in the block, fewer at the ragged edge). Returns the lines opened
        and the indent inside; the caller closes ``len(outer)`` braces."""
        k, W = self.k, W or self.cfg.tile
        last, head = k.outer[-1], k.outer[:-1]
        lines = [f"    #pragma omp parallel for collapse({len(head) + 1}) schedule(static){par}"] if par is not None else []
        indent = "    "
        for v in head:
            lines.append(f"{indent}for (int64_t {v.name} = 0; {v.name} < {self.extent(v)}; {v.name}++) {{")
            indent += "    "
        n = self.extent(last)
        lines.append(f"{indent}for (int64_t blk = 0; blk < ({n} + {W - 1}) / {W}; blk++) {{")
        indent += "    "
        lines.append(f"{indent}const int64_t lanes = ({n} - blk * {W}) < {W} ? ({n} - blk * {W}) : {W};")
        return lines, indent

    def _row_blocks(self, par):
        """One output per iteration, reduced in a SIMD loop — in blocks of ``tile`` outputs whose
        epilogue (an activation after a matmul, say) then runs as one SIMD loop, not per output."""
        k = self.k
        W = self.cfg.tile
        last = k.outer[-1]
        lines, indent = self._block_loops(par)
        for j, st in enumerate(k.stages):
            lines.append(f"{indent}{local_array(_acc_type(st, k.inner_numel), f'acc{j}v', W)};")
            if st.arg_index is not None:
                lines.append(f"{indent}{local_array('int64_t', f'accidx{j}v', W)};")
        ind = indent + "    "
        U = self.cfg.unroll if len(k.stages) == 1 and k.stages[0].op in UNROLLED_REDUCTIONS and k.inner else 1
        tree = U > 1 and k.stages[0].op is Op.SUM and self.cfg.tree and W == TREE and len(k.inner) == 1 and \
            k.inner_numel <= TREE_ROW and _acc_type(k.stages[0], k.inner_numel) == "float"
        if tree:
            lines += self._tree_sum(indent)
        if U > 1:
            lines += self._unrolled_sum(U, W, indent)
        lines.append(f"{indent}for (int64_t w = {'lanes / %d * %d' % (U, U) if U > 1 else 0}; w < lanes; w++) {{")
        lines.append(f"{ind}const int64_t {last.name} = blk * {W} + w;")
        for j, st in enumerate(k.stages):
            lines += self._acc_decl(j, st, ind)
            lines += self._stage_loop(j, st, ind)
            lines.append(f"{ind}acc{j}v[w] = acc{j};" + (f" accidx{j}v[w] = accidx{j};" if st.arg_index is not None else ""))
        lines.append(f"{indent}}}")
        if tree:
            lines.append(f"{indent}}}")
        lines.append(f"{indent}#pragma omp simd")
        lines.append(f"{indent}for (int64_t w = 0; w < lanes; w++) {{")
        lines.append(f"{ind}const int64_t {last.name} = blk * {W} + w;")
        for j, st in enumerate(k.stages):
            lines.append(f"{ind}const {_acc_type(st, k.inner_numel)} acc{j} = acc{j}v[w];")
            if st.arg_index is not None:
                lines.append(f"{ind}const int64_t accidx{j} = accidx{j}v[w];")
        scope = _Scope(self, ind)
        stores = self._store(scope)
        lines += scope.lines + stores
        lines.append(f"{indent}}}")
        lines += ["    }" for _ in k.outer]
        return lines

    def _tree_sum(self, indent):
        """A full block of a float single sum (a matrix-vector product's 16 rows): 16 partial sums
        per output, one per SIMD lane, while the reduced extent is walked in steps of 16, then
        ``lf_sum16x16`` adds up all 16 outputs' lanes at once. The unrolled sum below ends with a
        horizontal add per output, which dominates when the rows are short (``TREE_ROW``): the
        hidden-64 decode step's 256x64 product runs 2x faster this way, its 64x256 one 1.2x
        (Zen 4). Opens the
        ``if`` whose ``else`` is the unrolled sum, for a ragged block; the caller closes it."""
        k = self.k
        st, last, red = k.stages[0], k.outer[-1], k.inner[0]
        n, T = self.extent(red), TREE
        i1, i2, i3, i4 = (indent + "    " * d for d in (1, 2, 3, 4))

        def body(ind, target):
            scope = _Scope(self, ind)
            v = scope.value(st.value)
            return scope.lines + [f"{ind}{target} += (float){v};"]
        lines = [f"{indent}if (lanes == {T}) {{",
                 f"{i1}float acc0p[{T}][{T}] LF_ALIGNED;",
                 f"{i1}memset(acc0p, 0, sizeof acc0p);",
                 f"{i1}int64_t rb = 0;",
                 f"{i1}for (; rb + {T} <= {n}; rb += {T}) {{",
                 f"{i2}#pragma GCC unroll {T}",   # every partial stays in a register: 256x64 1.25x faster
                 f"{i2}for (int64_t w = 0; w < {T}; w++) {{",
                 f"{i3}const int64_t {last.name} = blk * {T} + w;",
                 f"{i3}#pragma omp simd",
                 f"{i3}for (int64_t ln = 0; ln < {T}; ln++) {{",
                 f"{i4}const int64_t {red.name} = rb + ln;"]
        lines += body(i4, "acc0p[w][ln]")
        lines += [f"{i3}}}", f"{i2}}}", f"{i1}}}",
                  f"{i1}lf_sum16x16(acc0p, acc0v);",
                  f"{i1}for (int64_t w = 0; w < {T}; w++) {{   /* the last {n} % {T} of the reduced extent */",
                  f"{i2}const int64_t {last.name} = blk * {T} + w;",
                  f"{i2}for (int64_t {red.name} = rb; {red.name} < {n}; {red.name}++) {{"]
        lines += body(i3, "acc0v[w]")
        lines += [f"{i2}}}", f"{i1}}}", f"{indent}}} else {{"]
        return lines

    def _unrolled_sum(self, U, W, indent):
        """``U`` neighbouring outputs of a single-sum kernel per pass over the reduced extent
        (a matrix-vector product reads the vector once for U rows and hides the horizontal
        adds); each copy of the body is a C block that rebinds the output variable. U = 8
        keeps 8 independent FMA chains in flight, enough for the FMA latency of a 2-pipe core,
        and still fits 16 vector registers (Zen 1: the two 16k-MAC GEMVs of a hidden-64 decode
        step 1.3x and 1.7x faster than with U = 4); autotuning also tries U = 4. A single product
        (``prod(-1)``) takes the same form, each output's multiplies a chain of its own; so does a
        single max/min (``amax(-1)``), as ``_stage_loop``'s plain max/min plus a NaN flag per
        output: one output per pass left one vector max chain, 2-cycle latency per 16 floats."""
        k = self.k
        st = k.stages[0]
        last = k.outer[-1]
        acc_t = _acc_type(st, k.inner_numel)
        nan_flag = st.op in (Op.MAX, Op.MIN) and st.value.dtype.is_float
        sym = {Op.PROD: "*", Op.SUM: "+"}.get(st.op, st.op.label)
        ind = indent + "    "
        lines = [f"{indent}for (int64_t w = 0; w + {U} <= lanes; w += {U}) {{"]
        accs = [f"acc0u{u}" for u in range(U)]
        nans = [f"nan0u{u}" for u in range(U)]
        lines += [f"{ind}{acc_t} {a} = {self.acc_init(st)};" for a in accs]
        lines += [f"{ind}int {n} = 0;" for n in nans] if nan_flag else []
        loops, lind = self._loops(k.inner, ind, None, simd_inner=False)
        red = f" reduction(|:{','.join(nans)})" if nan_flag else ""
        loops[-1:-1] = [f"{lind[:-4]}#pragma omp simd reduction({sym}:{','.join(accs)}){red}"]
        lines += loops
        for u in range(U):
            lines.append(f"{lind}{{")
            bind = lind + "    "
            lines.append(f"{bind}const int64_t {last.name} = blk * {W} + w + {u};")
            scope = _Scope(self, bind)
            v = scope.value(st.value)
            if st.op in (Op.MAX, Op.MIN):
                cmp = ">" if st.op is Op.MAX else "<"
                body = [f"{bind}{accs[u]} = {v} {cmp} {accs[u]} ? {v} : {accs[u]};"]
                body += [f"{bind}{nans[u]} |= {v} != {v};"] if nan_flag else []
            else:
                body = [f"{bind}{accs[u]} {sym}= ({acc_t}){v};"]
            lines += scope.lines + body + [f"{lind}}}"]
        lines += [ind + "}" for _ in k.inner]
        lines += [f"{ind}acc0v[w + {u}] = {f'{nans[u]} ? NAN : ' if nan_flag else ''}{accs[u]};" for u in range(U)]
        lines.append(f"{indent}}}")
        return lines

    def _split(self, par):
        """Few outputs: each stage's reduced extent is cut into ``split_chunks`` fixed chunks that
        the threads share, and the chunks' partials combined in order. The chunks do not depend on
        the thread count, so neither does the result: the count follows the free cores
        (``runtime/threads.py``), and a sum must not change with another process's load."""
        k = self.k
        loops, indent = self._loops(k.outer, "    ", None, simd_inner=False)
        total = self.size(k.inner)
        chunks = split_chunks(k.inner_numel)
        body = []
        for j, st in enumerate(k.stages):
            acc_t = _acc_type(st, self.k.inner_numel)
            has_idx = st.arg_index is not None
            body += self._acc_decl(j, st, indent)
            body.append(f"{indent}{{ {local_array(acc_t, f'part{j}', chunks)}; "
                        f"{local_array('int64_t', f'partidx{j}', chunks)};")
            if par is not None and c_parallel.parallel_stage(k, st):   # a region per stage and output
                body.append(f"{indent}#pragma omp parallel for schedule(static){par}")
            body.append(f"{indent}for (int64_t c = 0; c < {chunks}; c++) {{")
            ind = indent + "    "
            body += self._acc_decl(j, st, ind)
            body.append(f"{ind}const int64_t lo = (int64_t){total} * c / {chunks}, "
                        f"hi = (int64_t){total} * (c + 1) / {chunks};")
            if st.op is Op.SUM:
                body.append(f"{ind}#pragma omp simd reduction(+:acc{j})")
            body.append(f"{ind}for (int64_t rflat = lo; rflat < hi; rflat++) {{")
            lind = ind + "    "
            stride = 1
            decls = []
            for v in reversed(k.inner):
                decls.append(f"{lind}const int64_t {v.name} = (rflat / {stride}) % {v.extent};")
                stride *= v.extent
            if len(k.inner) == 1:   # the only reduced loop: its index is the flat one (no literal extent)
                decls = [f"{lind}const int64_t {k.inner[0].name} = rflat;"]
            body += list(reversed(decls))
            scope = _Scope(self, lind)
            v = scope.value(st.value)
            idx = self.index(st.arg_index) if has_idx else "0"
            body += scope.lines + [f"{lind}{self._combine(j, st, v, idx)}", f"{ind}}}"]
            body.append(f"{ind}part{j}[c] = acc{j};" + (f" partidx{j}[c] = accidx{j};" if has_idx else ""))
            body.append(f"{indent}}}")
            body.append(f"{indent}for (int64_t c = 0; c < {chunks}; c++) {{")
            body.append(f"{indent}    {self._combine(j, st, f'part{j}[c]', f'partidx{j}[c]')}")
            body.append(f"{indent}}} }}")
        scope = _Scope(self, indent)
        stores = self._store(scope)
        return loops + body + scope.lines + stores + ["    }" for _ in k.outer]

    def _tile(self, par):
        """Reductions along a strided dim: ``lanes`` neighbouring outputs accumulate together while the
    reduced dim is walked one row at a time, so every row is read as one contiguous run."""
        k = self.k
        W = self.cfg.lanes
        last, head = k.outer[-1], k.outer[:-1]
        lines, indent = self._block_loops(par, W)

        def lane_header(ind, upto):
            out = [f"{ind}const int64_t {last.name} = blk * {W} + w;"]
            out += [f"{ind}{_acc_type(k.stages[q], k.inner_numel)} acc{q} = acc{q}v[w];" for q in range(upto)]
            return out

        for j, st in enumerate(k.stages):
            lines.append(f"{indent}{local_array(_acc_type(st, self.k.inner_numel), f'acc{j}v', W)};")
            lines.append(f"{indent}for (int w = 0; w < {W}; w++) acc{j}v[w] = {self.acc_init(st)};")
            loops, ind = self._loops(k.inner, indent, None, simd_inner=False)
            lines += loops
            lines.append(f"{ind}#pragma omp simd")
            lines.append(f"{ind}for (int64_t w = 0; w < lanes; w++) {{")
            lind = ind + "    "
            lines += lane_header(lind, j + 1)
            scope = _Scope(self, lind)
            v = scope.value(st.value)
            lines += scope.lines
            lines.append(f"{lind}{self._combine(j, st, v, '0')}")
            lines.append(f"{lind}acc{j}v[w] = acc{j};")
            lines.append(f"{ind}}}")
            lines += [indent + "}" for _ in k.inner]
        if k.inner_stores:   # (a row-wise kernel: its stores along the rows, after all its stages)
            loops, ind = self._loops(k.inner, indent, None, simd_inner=False)
            lines += loops + [f"{ind}#pragma omp simd", f"{ind}for (int64_t w = 0; w < lanes; w++) {{"]
            lind = ind + "    "
            stores_of, close = k.inner_stores, [f"{ind}}}"] + [indent + "}" for _ in k.inner]
        else:
            lines.append(f"{indent}for (int64_t w = 0; w < lanes; w++) {{")
            lind = indent + "    "
            stores_of, close = k.stores, [f"{indent}}}"]
        lines += lane_header(lind, len(k.stages))
        scope = _Scope(self, lind)
        stores = self._store(scope, stores_of)
        lines += scope.lines + stores + close
        lines += ["    }" for _ in range(len(head) + 1)]
        return lines


SHORT_SUM = 1024   # sums over at most this many elements accumulate in the compute type
TREE = 16          # outputs (and lanes per output) of a ``rows`` block summed as lane partials
# the longest reduced extent summed that way: on longer rows the horizontal adds weigh little,
# and walking 16 rows at once (16 streams) read 256x1024 float32 1.5x slower than 8 (Zen 4)
TREE_ROW = 256
SPLIT_CHUNK = 2048  # a ``split`` reduction's chunks hold at least this many elements ...
SPLIT_CHUNKS = 64   # ... and there are at most this many (enough for 64 threads)


def split_chunks(total: int) -> int:
    return max(1, min(SPLIT_CHUNKS, total // SPLIT_CHUNK))


def _acc_type(st, inner_numel: int = 1 << 30) -> str:
    """Float sums accumulate in double, except short ones (a matmul's dot products): those stay
    in float, spread over SIMD lanes, as BLAS and torch do — double would halve the lanes."""
    dt = st.value.dtype
    if st.op is Op.SUM:
        if not dt.is_float:
            return "int64_t"
        return COMPUTE[dt.name] if inner_numel <= SHORT_SUM else "double"
    if st.op is Op.PROD:   # float products in the compute type, as torch's CPU prod (and the Triton printer)
        return COMPUTE[dt.name] if dt.is_float else "int64_t"
    return COMPUTE[dt.name]


def _scan_acc_type(st) -> str:
    """A scan runs in double for floats (a sequential running value: no SIMD lanes to keep, and
    torch's CPU scans accumulate float32 in double too), in int64 for integers."""
    return "double" if st.dtype.is_float else "int64_t"


def _to_storage(v: str, dt) -> str:
    if dt.name == "bfloat16":
        return f"lf_f2bf({v})"
    return f"({STORAGE[dt.name]})({v})"


# float sin and cos by their near reduction alone (c_math.h: |x| < 2^23), the fast pass's forms;
# lf_sinf/lf_cosf (any x) elsewhere
NEAR_SINCOS = {Op.SIN: "lf_sin_nearf", Op.COS: "lf_cos_nearf"}


def _f32(e) -> bool:
    """Float arithmetic in C's float (float32 and the half types, computed in float32)."""
    d = src_dtype(e)
    return d.is_float and d.name != "float64"


def _fl(e) -> bool:
    return src_dtype(e).is_float


def _divisor(b: str) -> str:
    """An integer divisor ``b`` that, when 0, sets the kernel's error flag (``lf_err``:
    ``Kernel.error_flag_word``). A conditional store: threads that race on it all write the
    same code."""
    return f"(({b}) == 0 ? (*lf_err = {DIVISION_CODE}, (int64_t)0) : ({b}))"


def _float32_or_64(f32_code: str, f64_code: str):
    """A float op: ``f32_code`` for float arithmetic, ``f64_code`` for double (``{x}``: the operand)."""
    return lambda a, e: (f32_code if _f32(e) else f64_code).format(x=a[0])


def _select(cmp: str):
    """maximum/minimum: a NaN operand propagates (the first one's, tested first). For floats the
    comparison's select and the NaN test are two statements (a GNU statement expression): written
    as one condition (``a != a || a > b ? a : b``, or nested selects), gcc 12 under
    -fno-trapping-math turns it into two branches per element and vectorises nothing (a clamp of
    2^20 floats took 4 ms, 35x the two statements' 0.11 ms; tests/test_c_vectorize.py).
    Where one operand is loop-invariant (a clamp's bound), that one is NaN-tested and compared
    first (``invariant_first``): ``s > x ? s : x`` is one ``vmaxps`` that passes a NaN ``x``
    through, and gcc takes the invariant test ``s != s`` out of the loop (the other order costs
    four mask operations per vector besides: a relu6 of 2^20 floats 0.21 ms against 0.09 ms, Zen 4)."""
    def rule(a, e):
        if not _fl(e):
            return f"({a[0]} {cmp} {a[1]} ? {a[0]} : {a[1]})"
        return _float_extreme(cmp, *invariant_first(a, e), e)
    return rule


def _float_extreme(cmp: str, t: str, o: str, e) -> str:
    """_select's two statements for float operands, ``t`` NaN-tested and compared first."""
    ctype = "float" if _f32(e) else "double"
    return f"({{ {ctype} lf_m = {t} {cmp} {o} ? {t} : {o}; {t} != {t} ? {t} : lf_m; }})"


def _clamp(a, e) -> str:
    """clamp(x, lo, hi) (srcs x, lo, hi): _select's maximum with ``lo``, then its minimum with ``hi``,
    each bound first where it is loop-invariant (one ``vmaxps`` and one ``vminps`` a vector, as the
    two nodes it was)."""
    ctype = COMPUTE[e.dtype.name]
    if not _fl(e):
        return f"({{ {ctype} lf_c = {a[0]} > {a[1]} ? {a[0]} : {a[1]}; lf_c < {a[2]} ? lf_c : {a[2]}; }})"
    hi_first = loop_invariant(e.srcs[2])
    at_most_hi = _float_extreme("<", *((a[2], "lf_c") if hi_first else ("lf_c", a[2])), e)
    return f"({{ {ctype} lf_c = {_float_extreme('>', *invariant_first(a[:2], e), e)}; {at_most_hi}; }})"


def _logaddexp(base_two: bool):
    """log(e^a + e^b) (base_two: log2(2^a + 2^b)): ``a`` plus the log of 2 where the two are equal
    (infinities exact, no inf - inf), else the larger plus log1p(e^-|a - b|) (log1p(2^-|a - b|) / ln 2,
    float32's through c_math.h's lf__log1p_exp_neg of |a - b| ln 2)."""
    ln2, log2e = 0.6931471805599453, 1.4426950408889634
    def code(a, e) -> str:
        x, y = a[0], a[1]
        if _f32(e):
            ctype, at_equal = "float", "1.0f" if base_two else "0.693147180559945309f"
            gap = (f"lf__log1p_exp_neg(fabsf({x} - {y}) * {ln2!r}f) * {log2e!r}f" if base_two
                   else f"lf__log1p_exp_neg(fabsf({x} - {y}))")
        else:
            ctype, at_equal = "double", "1.0" if base_two else repr(ln2)
            gap = f"log1p(exp2(-fabs({x} - {y}))) * {log2e!r}" if base_two else f"log1p(exp(-fabs({x} - {y})))"
        return f"({{ {ctype} lf_m = {x} > {y} ? {x} : {y}; {x} == {y} ? {x} + {at_equal} : lf_m + {gap}; }})"
    return code


def _lerp(a, e) -> str:
    """torch's lerp (srcs x, end, weight): x + w (end - x) where |w| < 0.5, else end - (end - x)(1 - w),
    each one fused multiply-add where the target has FMA (LF__MADDF/LF__MADD), as torch's kernel
    computes them (bit for bit: tests/test_per_op_rounding.py)."""
    x, end, w = a
    ctype, one, half, fabs, madd = (("float", "1.0f", "0.5f", "fabsf", "LF__MADDF") if _f32(e)
                                    else ("double", "1.0", "0.5", "fabs", "LF__MADD"))
    return (f"({{ {ctype} lf_w = {w}, lf_d = {end} - {x}; {fabs}(lf_w) < {half} ? {madd}(lf_w, lf_d, {x}) "
            f": {madd}(-lf_d, {one} - lf_w, {end}); }})")


def _scalar_pow_f32(e) -> bool:
    """A float32 power by a Python number (torch's shortcut exponents apply)."""
    return isinstance(e, Apply) and e.op is Op.POW and src_dtype(e).name == "float32" and is_python_scalar(e.srcs[1])


def _pow(a, e) -> str:
    # torch special-cases a Python-scalar exponent of float32/float64 only (so
    # -inf ** 0.5 is sqrt's nan there, pow's inf for a tensor exponent); half types call pow
    if not _fl(e):
        return f"({COMPUTE[e.dtype.name]})lf_pow_i({a[0]}, {a[1]})"
    special = is_python_scalar(e.srcs[1])
    fn = {"float32": "lf_powf" if special else "lf_vpowf",
          "float64": "lf_pow" if special else "pow"}.get(src_dtype(e).name, "lf_vpowf")
    return f"{fn}({a[0]}, {a[1]})"


def _nan_to_num(a, e) -> str:
    # one select a statement (see _select: a nested select would not vectorise)
    ctype = "float" if _f32(e) else "double"
    return (f"({{ {ctype} lf_v = {a[0]}; lf_v = lf_v != lf_v ? {a[1]} : lf_v; lf_v = lf_v == INFINITY ? {a[2]} : lf_v; "
            f"lf_v == -INFINITY ? {a[3]} : lf_v; }})")


def _elu(a, e) -> str:
    # (no min(x, 0) before the exponential: lf_expm1f clamps its argument, and the lanes where x > 0
    # are not selected; a select on the constant 0 would cost a compare and a blend, see _hard)
    x, negcoef, poscoef, input_scale = a
    expm1 = "lf_expm1f" if _f32(e) else "expm1"
    return f"({x} > 0 ? {x} * {poscoef} : {expm1}({x} * {input_scale}) * {negcoef})"


def _hard(a, e, result: str) -> str:
    """hardsigmoid/hardswish from ``t = clamp(x + 3, lo, hi)`` (srcs: x, lo = 0, hi = 6), torch's order
    of operations. The bounds are runtime scalars because gcc 12 folds constant bounds into compares
    and blends (~1.3x slower), where a loop-invariant bound compared first is one ``vmaxps``/``vminps``
    (``lo > t ? lo : t`` passes a NaN ``t``, as torch's clamp)."""
    x, lo, hi = a
    ctype, f = ("float", "f") if _f32(e) else ("double", "")
    return (f"({{ {ctype} lf_t = {x} + 3.0{f}; lf_t = {lo} > lf_t ? {lo} : lf_t; lf_t = {hi} < lf_t ? {hi} : lf_t; "
            + result.format(x=x, t="lf_t", six=f"6.0{f}") + "; })")


# The C of each elementwise op (printer_base: the rule's signature). Float32 transcendentals call
# c_math.h's vectorisable functions; rounding is torch's (``round`` half to even: nearbyint
# under the default rounding mode).
C_OPS = infix_rules()
C_OPS.update({
    # bool arithmetic is logical in torch (True + True is True): the byte stays 0 or 1
    Op.ADD: lambda a, e: f"(uint8_t)({a[0]} | {a[1]})" if e.dtype.is_bool else f"({a[0]} + {a[1]})",
    Op.MUL: lambda a, e: f"(uint8_t)({a[0]} & {a[1]})" if e.dtype.is_bool else f"({a[0]} * {a[1]})",
    Op.NOT: lambda a, e: f"(uint8_t)!{a[0]}" if src_dtype(e).is_bool else f"~{a[0]}",
    Op.NEG: lambda a, e: f"(-{a[0]})",
    Op.ABS: lambda a, e: (f"fabsf({a[0]})" if _f32(e) else f"fabs({a[0]})") if _fl(e) else
        f"({a[0]} < 0 ? -{a[0]} : {a[0]})",
    Op.ISNAN: lambda a, e: f"(uint8_t)({a[0]} != {a[0]})",
    Op.MAXIMUM: _select(">"),
    Op.MINIMUM: _select("<"),
    Op.WHERE: lambda a, e: f"({a[0]} ? {a[1]} : {a[2]})",
    Op.FLOORDIV: lambda a, e: (f"lf_floordiv_ff({a[0]}, {a[1]})" if _f32(e) else f"lf_floordiv_fd({a[0]}, {a[1]})")
        if _fl(e) else f"({COMPUTE[e.dtype.name]})lf_floordiv_i({a[0]}, {_divisor(a[1])})",
    # (float32 and the half types: CPrinter.float_remainder)
    Op.MOD: lambda a, e: f"lf_rem(fmod({a[0]}, {a[1]}), {a[1]})" if _fl(e) else
        f"({COMPUTE[e.dtype.name]})lf_mod_i({a[0]}, {_divisor(a[1])})",
    Op.FMOD: lambda a, e: f"fmod({a[0]}, {a[1]})" if _fl(e) else f"({COMPUTE[e.dtype.name]})lf_fmod_i({a[0]}, {_divisor(a[1])})",
    Op.POW: _pow,
    Op.RELU: lambda a, e: f"(({a[0]} != {a[0]} || {a[0]} > 0) ? {a[0]} : 0)" if _fl(e) else
        f"({a[0]} > 0 ? {a[0]} : 0)",
    Op.RECIPROCAL: _float32_or_64("(1.0f / {x})", "(1.0 / {x})"),
    Op.SQRT: _float32_or_64("sqrtf({x})", "sqrt({x})"),
    Op.RSQRT: _float32_or_64("lf_rsqrtf({x})", "(1.0 / sqrt({x}))"),
    Op.EXP: _float32_or_64("lf_expf({x})", "exp({x})"),
    Op.LOG: _float32_or_64("lf_logf({x})", "log({x})"),
    Op.SIN: _float32_or_64("lf_sinf({x})", "sin({x})"),
    Op.COS: _float32_or_64("lf_cosf({x})", "cos({x})"),
    Op.TANH: _float32_or_64("lf_tanhf({x})", "tanh({x})"),
    Op.SIGMOID: _float32_or_64("lf_sigmoidf({x})", "(1.0 / (1.0 + exp(-{x})))"),
    Op.GELU: _float32_or_64("lf_geluf({x})", "(0.5 * {x} * (1.0 + erf({x} * 0.70710678118654752440)))"),
    Op.SILU: _float32_or_64("lf_siluf({x})", "({x} / (1.0 + exp(-{x})))"),
    Op.ERF: _float32_or_64("lf_erff({x})", "erf({x})"),
    Op.ERFC: _float32_or_64("lf_erfcf({x})", "erfc({x})"),
    Op.GELU_GRAD: _float32_or_64("lf_gelu_gradf({x})", "(0.5 * (1.0 + erf({x} * 0.70710678118654752440)) + "
                                 "{x} * exp(-0.5 * {x} * {x}) * 0.39894228040143267794)"),
    Op.ATAN: _float32_or_64("lf_atanf({x})", "atan({x})"),
    Op.EXPM1: _float32_or_64("lf_expm1f({x})", "expm1({x})"),
    Op.LOG1P: _float32_or_64("lf_log1pf({x})", "log1p({x})"),
    Op.ATAN2: lambda a, e: f"lf_atan2f({a[0]}, {a[1]})" if _f32(e) else f"atan2({a[0]}, {a[1]})",
    Op.COPYSIGN: lambda a, e: f"copysignf({a[0]}, {a[1]})" if _f32(e) else f"copysign({a[0]}, {a[1]})",
    # two compares and a subtraction, no select: vectorised, and NaN (both false) gives 0 as torch
    Op.SIGN: lambda a, e: f"(({COMPUTE[e.dtype.name]})({a[0]} > 0) - ({COMPUTE[e.dtype.name]})({a[0]} < 0))",
    Op.NAN_TO_NUM: _nan_to_num,
    Op.ELU: _elu,
    Op.CLAMP: _clamp,
    Op.LOGADDEXP: _logaddexp(base_two=False),
    Op.LOGADDEXP2: _logaddexp(base_two=True),
    Op.XLOGY: lambda a, e: (f"({{ float lf_y = {a[1]}; lf_y != lf_y ? NAN : {a[0]} == 0.0f ? 0.0f : {a[0]} * lf_logf(lf_y); }})"
                            if _f32(e) else
                            f"({{ double lf_y = {a[1]}; lf_y != lf_y ? NAN : {a[0]} == 0.0 ? 0.0 : {a[0]} * log(lf_y); }})"),
    Op.LERP: _lerp,
    Op.FMA: lambda a, e: (f"{'LF__MADDF' if _f32(e) else 'LF__MADD'}({a[0]}, {a[1]}, {a[2]})" if _fl(e)
                          else f"({a[0]} * {a[1]} + {a[2]})"),
    Op.HYPOT: lambda a, e: (f"({{ double lf_a = {a[0]}, lf_b = {a[1]}; float lf_h = (float)sqrt(lf_a * lf_a + lf_b * lf_b); "
                            f"((fabsf({a[0]}) == INFINITY) | (fabsf({a[1]}) == INFINITY)) ? INFINITY : lf_h; }})"
                            if _f32(e) else f"hypot({a[0]}, {a[1]})"),
    Op.LOG2: _float32_or_64(f"(lf_logf({{x}}) * {BASE_FACTOR[Op.LOG2]!r}f)", "log2({x})"),
    Op.LOG10: _float32_or_64(f"(lf_logf({{x}}) * {BASE_FACTOR[Op.LOG10]!r}f)", "log10({x})"),
    Op.EXP2: _float32_or_64("lf_exp2f({x})", "exp2({x})"),
    Op.SOFTPLUS: lambda a, e: (f"({a[0]} * {a[1]} > {a[2]} ? {a[0]} : lf__softplus({a[0]} * {a[1]}) / {a[1]})" if _f32(e)
                               else f"({a[0]} * {a[1]} > {a[2]} ? {a[0]} : log1p(exp({a[0]} * {a[1]})) / {a[1]})"),
    Op.LOGSIGMOID: _float32_or_64("(({x} < 0.0f ? {x} : 0.0f) - lf__log1p_exp_neg(fabsf({x})))",
                                  "(({x} < 0.0 ? {x} : 0.0) - log1p(exp(-fabs({x}))))"),
    Op.MISH: _float32_or_64("({x} * lf_tanhf(lf__softplus({x})))", "({x} * tanh(log1p(exp({x}))))"),
    Op.LEAKY_RELU: lambda a, e: f"({a[0]} > 0 ? {a[0]} : {a[0]} * {a[1]})",
    Op.HARDSIGMOID: lambda a, e: _hard(a, e, "{t} / {six}"),
    Op.HARDSWISH: lambda a, e: _hard(a, e, "{x} * {t} / {six}"),
    Op.FLOOR: _float32_or_64("floorf({x})", "floor({x})"),
    Op.CEIL: _float32_or_64("ceilf({x})", "ceil({x})"),
    Op.TRUNC: _float32_or_64("truncf({x})", "trunc({x})"),
    Op.ROUND: _float32_or_64("nearbyintf({x})", "nearbyint({x})"),
    Op.FRAC: _float32_or_64("({x} - truncf({x}))", "({x} - trunc({x}))"),
})
CPrinter.OPS = C_OPS


def print_c(kernel: Kernel, cfg: CConfig = CConfig()) -> str:
    return CPrinter(kernel, cfg).source()

/*
 * c_math.h -- branch-free float32 math for lazyfuse generated kernels.
 *
 * Every function is `static inline`, branch-free in its hot path (candidates
 * are computed and chosen with ternaries, which gcc turns into blends) and
 * free of libm calls that gcc cannot inline, so that a loop such as
 *
 *     #pragma omp simd
 *     for (long i = 0; i < n; i++) y[i] = lf_tanhf(x[i]);
 *
 * is vectorized by gcc -O3 -march=native -fopenmp -fno-math-errno
 * -fno-trapping-math -ffp-contract=off WITHOUT -ffast-math.  (Without fast-math
 * gcc would call the scalar libm expf/tanhf/... and the loop would stay scalar.)
 * -ffp-contract=off keeps gcc from fusing a product into an addition on its
 * own (across the ops of a fused kernel that loses torch's rounding of each
 * op's result), so every multiply-add meant as one instruction is written as
 * LF__MADDF/LF__MADD: a fused multiply-add where the target has FMA (__FMA__),
 * else a product and a sum.  Written so, the functions give the bits gcc's
 * default contraction gave them (all of 11.8M inputs: random bit patterns,
 * ranges, the special values and the clamp edges; -march=native AVX-512,
 * x86-64-v3 and x86-64-v2), so the bounds below hold.
 *
 * The algorithms are cephes/SLEEF style: range reduction followed by minimax
 * polynomials.  Special values (nan, +-inf, +-0, denormals, overflow and
 * underflow) follow torch's float64 results rounded to float32, including
 * torch's silu(-inf) = gelu(-inf) = nan.
 *
 * Accuracy: max of |y - ref| / max(|ref|, FLT_MIN) against float64
 * (2^-24 = 5.96e-8).  exp, exp2, expm1, tanh, sigmoid, silu, erf and gelu: a
 * scan of every 67th float32 bit pattern (64M inputs of each sign); log, sin,
 * cos: an exhaustive scan of all float32 inputs:
 *   lf_expf 8.92e-8   lf_exp2f 9.17e-8   lf_expm1f 1.20e-7   lf_logf 8.16e-8
 *   lf_tanhf 1.58e-7 (2.65 * 2^-24: the price of one exp and one division
 *       instead of an exp, a division and a polynomial blend)
 *   lf_sigmoidf 1.72e-7   lf_siluf 2.26e-7
 *   lf_rsqrtf 5.961e-8 (0.512 ulp) with FMA, every positive float
 *       (1.0f / sqrtf, two roundings: 8.94e-8, 1.49 ulp on every 7th);
 *       without FMA it is 1.0f / sqrtf
 *   lf_sinf 5.961e-8, lf_cosf 5.961e-8 (2^-24 = 5.960e-8: one rounding of
 *       a double result) for |x| < 2^23 with FMA (exhaustive scan), 5.960e-8
 *       from 2^23 to FLT_MAX (the far reduction: 40M random bit patterns, and
 *       against mpmath); torch's float32 sin/cos (Sleef u10) on the same scan:
 *       6.50e-8 on |x| < 1e4, 6.30e-8 beyond.  Without FMA the same bounds
 *       (dense scan and random inputs).
 *   lf_erff 7.91e-8 relative (1.08 ulp), 6.41e-8 absolute (every float of [1e-4, 4.5], both
 *       signs; the scan: 7.65e-8, 6.18e-8).  torch's float32 erf (Sleef-style, this machine):
 *       6.26e-8 relative, 5.96e-8 absolute: 0.55 ulp but for 1 ulp where erf rounds to 1.
 *   lf_erfcf 3.0e-7 relative wherever erfc is a normal float (dense scan of
 *       [-6, 10.1]), 2.5e-7 absolute; no 1 - erf cancellation in the tail
 *   lf_atanf, lf_atan2f: cephes' atanf polynomial, within ~2 ulp
 *   lf_vpowf 0.502 ulp of float64's result rounded (2^22 random bit-pattern pairs and
 *       3 * 2^22 pairs with finite results; computed in double)
 *   lf_geluf 1.55e-7 relative for x >= -1, 6.5e-7 on [-2, -1], 3.4e-4 on [-5.6, -2] (its
 *       tail fit, weighted by need), -0 below -5.6; 3.84e-7 absolute (0.8 ulp near 4.9).
 *       Without FMA: 2.09e-7, 8.6e-7, 3.4e-4.  torch's float32 gelu on the same scan: 2.49e-7
 *       on [-1, 0], 3.75e-7 on [0, inf), 3.09e-6 on [-2, -1], up to 1 on [-5.5, -2] and -0
 *       below (its 1 + erf(x/sqrt2) cancels), 1.3e-6 absolute.  (gcc 12 -march=native on an
 *       Intel Xeon, AVX-512, and -march=x86-64-v2: every 29th bit pattern on |x| <= 1, every
 *       7th on 1 <= |x| <= 20.)
 * (Measured with gcc 12 -march=znver1, i.e. with FMA; without FMA a sparser
 * scan gives the same numbers within ~6%.)
 *
 * Pure C99; the only <math.h> functions used are fabsf (a bit mask) and,
 * where the target has FMA (__FMA__), fmaf and fma (LF__MADDF/LF__MADD: one
 * instruction); rounding uses
 * the 1.5*2^23 trick, so the loops vectorize on any SIMD target (no SSE4.1
 * needed).  All internal helpers are prefixed lf__.
 */
#ifndef LAZYFUSE_C_MATH_H
#define LAZYFUSE_C_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* a * b + c rounded once (one fused multiply-add instruction) where the target has FMA, else
 * a * b rounded and then the sum (the kernels compile with -ffp-contract=off: see above) */
#ifdef __FMA__
#define LF__MADDF(a, b, c) __builtin_fmaf((a), (b), (c))
#define LF__MADD(a, b, c) __builtin_fma((a), (b), (c))
#else
#define LF__MADDF(a, b, c) ((a) * (b) + (c))
#define LF__MADD(a, b, c) ((a) * (b) + (c))
#endif

/* ------------------------------------------------------------------ */
/* bit casts (memcpy is the portable way; gcc turns it into a no-op)   */
/* ------------------------------------------------------------------ */
static inline int32_t lf__f2i(float x) { int32_t i; memcpy(&i, &x, sizeof i); return i; }
static inline float lf__i2f(int32_t i) { float x; memcpy(&x, &i, sizeof x); return x; }
static inline double lf__f64(int64_t i) { double d; memcpy(&d, &i, sizeof d); return d; }
static inline int64_t lf__i64(double d) { int64_t i; memcpy(&i, &d, sizeof i); return i; }

/* |r| with the sign bit of s */
static inline float lf__withsign(float r, float s)
{
    return lf__i2f((lf__f2i(r) & 0x7fffffff) | (lf__f2i(s) & (int32_t)0x80000000u));
}

/* t + LF__RND52 rounds t to the nearest integer k (ties to even) for
 * |t| < 2^51 and leaves k in the low bits of the double; subtracting it again
 * gives k as a double.  Unlike rint this vectorizes on every target (no
 * SSE4.1 needed); without -ffast-math gcc does not fold (t + M) - M. */
#define LF__RND52 6755399441055744.0   /* 1.5*2^52 */

/* ------------------------------------------------------------------ */
/* exp                                                                 */
/* ------------------------------------------------------------------ */
/* kf + LF__SHIFT2 rounds kf to an integer k whose low bits then hold
 * k + 254, and the split of those bits in two halves gives two normal
 * factors 2^floor(k/2) and 2^ceil(k/2) with one shift each (the high bits
 * of the float shift out).  LF__SHIFT1 likewise gives 2^k for k >= -126. */
#define LF__SHIFT2 12583166.0f      /* 1.5*2^23 + 254 */
#define LF__SHIFT1 12583039.0f      /* 1.5*2^23 + 127 */
#define LF__LOG2E 1.44269504088896341f

static inline float lf__u2f(uint32_t u) { float x; memcpy(&x, &u, sizeof x); return x; }

/* e^r - 1 for |r| <= ln2/2: r + r^2*P(r), P a degree-4 minimax fit
 * (3.1e-9 relative to e^r, coefficients rounded to float), evaluated in
 * Estrin's scheme: the loops are latency-bound (a few iterations in
 * flight): after r*r this chain is 3 FMAs deep, Horner's would be 6. */
static inline float lf__expm1_poly(float r)
{
    float z = r * r;
    float lo = LF__MADDF(1.6666521e-1f, r, 4.9999994e-1f);
    float hi = LF__MADDF(8.368687e-3f, r, 4.1668277e-2f);
    hi = LF__MADDF(1.3819818e-3f, z, hi);
    float p = LF__MADDF(hi, z, lo);
    return LF__MADDF(p, z, r);
}

/* r = x - k*ln2 (cephes two-constant Cody-Waite split, k*C1 is exact) */
static inline float lf__ln2_reduce(float x, float kf)
{
    float r = LF__MADDF(-kf, 0.693359375f, x);
    return LF__MADDF(kf, 2.12194440e-4f, r);
}

/* exp(x - xsub) * 2^kadd for x in [-150, 89] or nan (the CALLER clamps,
 * so a caller whose argument is known <= 0 pays for one clamp only; nan
 * propagates through the arithmetic).  xsub is a tiny correction
 * (|xsub| <= ulp(x)) subtracted after the range reduction, used to feed an
 * exactly split argument (callers pass 0.0f, which folds away).  kadd in
 * [0, 64] lets callers keep results that would be denormal at full
 * precision.  p * 2^k is formed as (p * 2^floor(k/2)) * 2^ceil(k/2): one
 * final rounding, so denormal results are correctly rounded from p. */
/* (1 + q) * 2^k, ki = k + 254 (LF__SHIFT2's bias): two factors 2^floor(k/2) and 2^ceil(k/2) */
static inline float lf__times_2k(float q, uint32_t ki)
{
    uint32_t k1 = ki >> 1;
    float s1 = lf__u2f(k1 << 23);
    return LF__MADDF(q, s1, s1) * lf__u2f((ki - k1) << 23);      /* (1 + q) * s1 * s2 */
}

static inline float lf__exp_core(float x, float xsub, int32_t kadd)
{
    float ks = LF__MADDF(x, LF__LOG2E, LF__SHIFT2);
    float kf = ks - LF__SHIFT2;
    float r = lf__ln2_reduce(x, kf) - xsub;
    return lf__times_2k(lf__expm1_poly(r), (uint32_t)lf__f2i(ks) + (uint32_t)kadd);
}

/* exp(x - xsub) * 2^64 for x in [-150, 0] or nan: the result is always normal,
 * so one factor 2^(k+64) does (lf__exp_core's two factors keep denormals). */
#define LF__SHIFT64 12583103.0f     /* 1.5*2^23 + 127 + 64 */
static inline float lf__exp_core64(float x, float xsub)
{
    float ks = LF__MADDF(x, LF__LOG2E, LF__SHIFT64);
    float kf = ks - LF__SHIFT64;
    float r = lf__ln2_reduce(x, kf) - xsub;
    float s = lf__u2f((uint32_t)lf__f2i(ks) << 23);             /* 2^(k+64) */
    float q = lf__expm1_poly(r);
    return LF__MADDF(q, s, s);
}

/* x clamped to [lo, hi]; nan stays nan (each clamp is a compare + blend) */
static inline float lf__clamp_lo(float x, float lo) { return x < lo ? lo : x; }
static inline float lf__clamp_hi(float x, float hi) { return x > hi ? hi : x; }

/* x clamped to [lo, hi], lo < 0 < hi given as their bits, on the bits: an unsigned min sends
 * every x below lo (and -nan) to lo, a signed min every x above hi (and +nan) to hi; the caller
 * gives nan back at the end (a masked final select).  With the float clamps (lf__clamp_lo/hi)
 * gcc if-converts instead: it evaluates the core on the raw x and blends in the two clamp
 * values' constant results, 4 compares and 3 blends a vector where this is 2 integer mins and 1
 * compare.  One thread, interleaved with torch, the 2^20 exp kernel ran 6% faster; exp2's
 * loop (in cache, Zen 4) 22% faster, its results bit for bit the same (every float32), expm1's
 * 13% (27% before its k = 128 fix). */
static inline float lf__clamp_bits(float x, uint32_t lo, int32_t hi)
{
    uint32_t u = (uint32_t)lf__f2i(x);
    u = u < lo ? u : lo;
    return lf__i2f((int32_t)u < hi ? (int32_t)u : hi);
}

static inline float lf_expf(float x)
{
    float r = lf__exp_core(lf__clamp_bits(x, 0xC3160000u, 0x42B20000), 0.0f, 0);   /* [-150, 89] */
    return x == x ? r : x;
}

/* 2^x as lf__exp_core, its k = round(x) taken from x itself: x - k is exact, so only
 * r = (x - k) ln 2 (|r| <= 0.35) rounds; lf_expf(x * ln 2) rounds x * ln 2 first, an error
 * that grows with |x| (18 ulps at x = 100) */
static inline float lf_exp2f(float x)
{
    float t = lf__clamp_bits(x, 0xC3170000u, 0x43000000);                         /* [-151, 128] */
    float ks = t + LF__SHIFT2;
    float kf = ks - LF__SHIFT2;
    float r = lf__times_2k(lf__expm1_poly((t - kf) * 0.693147180559945309f), (uint32_t)lf__f2i(ks));
    return x == x ? r : x;
}

/* ------------------------------------------------------------------ */
/* log                                                                 */
/* ------------------------------------------------------------------ */
static inline float lf_logf(float x)
{
    int den = x < 1.17549435e-38f;                  /* denormal (or <= 0) */
    float xs = den ? x * 8388608.0f : x;            /* * 2^23 */
    int32_t ix = lf__f2i(xs);
    int32_t e = ((ix >> 23) & 0xff) - 126;
    e = den ? e - 23 : e;
    float m = lf__i2f((ix & 0x007fffff) | 0x3f000000);   /* [0.5, 1) */
    int lo = m < 0.707106781186547524f;
    e = lo ? e - 1 : e;
    /* exact; not an FMA: gcc had made 2m - 1 one (it folds m + m to 2m), but as LF__MADDF in a
     * select or of a selected factor the kernels ran 3-7% slower (log, log1p) than this */
    float f = lo ? (m + m) - 1.0f : m - 1.0f;
    float z = f * f;
    float y = 7.0376836292e-2f;
    y = LF__MADDF(y, f, -1.1514610310e-1f);
    y = LF__MADDF(y, f, 1.1676998740e-1f);
    y = LF__MADDF(y, f, -1.2420140846e-1f);
    y = LF__MADDF(y, f, 1.4249322787e-1f);
    y = LF__MADDF(y, f, -1.6668057665e-1f);
    y = LF__MADDF(y, f, 2.0000714765e-1f);
    y = LF__MADDF(y, f, -2.4999993993e-1f);
    y = LF__MADDF(y, f, 3.3333331174e-1f);
    y = y * f * z;
    float fe = (float)e;
    y = LF__MADDF(-2.12194440e-4f, fe, y);
    y = LF__MADDF(-0.5f, z, y);
    float r = f + y;
    r = LF__MADDF(0.693359375f, fe, r);

    r = x == INFINITY ? x : r;
    r = x == 0.0f ? -INFINITY : r;                  /* +-0 -> -inf */
    r = x < 0.0f ? NAN : r;
    return x != x ? x : r;
}

/* ------------------------------------------------------------------ */
/* tanh, sigmoid, silu                                                 */
/* ------------------------------------------------------------------ */
/* tanh(t) = m / d with m = 1 - e^-2t and d = 1 + e^-2t, both formed from
 * e^-2t - 1 = s*q + (s - 1), s = 2^k, q = expm1(r): m and d are each
 * accurate to about an ulp for every t >= 0 (no 1 - 2/(e+1) cancellation
 * near 0, so no second polynomial and no blend), one division.
 * Above t = 9 tanh rounds to 1: the core runs on t itself (its lanes beyond
 * 9 compute garbage) and 1 is selected at the end, what gcc made of a clamp of
 * t while it contracted products on its own; with the explicit FMAs it kept the
 * clamp's compare and blends (10% slower).  sigmoid and silu likewise. */
static inline float lf_tanhf(float x)
{
    float t = fabsf(x);
    float u = -2.0f * t;
    float ks = LF__MADDF(t, -2.0f * LF__LOG2E, LF__SHIFT1); /* = u * log2(e) + ..., one step shorter */
    float kf = ks - LF__SHIFT1;
    float q = lf__expm1_poly(lf__ln2_reduce(u, kf));
    float s = lf__u2f((uint32_t)lf__f2i(ks) << 23); /* 2^k, k in [-26, 0] */
    float m = LF__MADDF(-s, q, 1.0f - s);
    float d = LF__MADDF(s, q, 1.0f + s);
    float r = t > 9.0f ? 1.0f : m / d;              /* >= +0, or nan */
    /* the sign of x (keeps tanh(-0) = -0) */
    return lf__i2f(lf__f2i(r) | (lf__f2i(x) ^ lf__f2i(t)));
}

static inline float lf_sigmoidf(float x)
{
    /* e = exp(-|x|) never overflows; sigmoid = (x >= 0 ? 1 : e) / (1 + e);
     * nan propagates through e.  Below -|x| = -150 e is 0: 1 or 0, selected */
    float a = -fabsf(x);
    float e = lf__exp_core(a, 0.0f, 0);
    float n = x >= 0.0f ? 1.0f : e;
    float far = x >= 0.0f ? 1.0f : 0.0f;
    return a < -150.0f ? far : n / (1.0f + e);
}

static inline float lf_siluf(float x)
{
    /* es = exp(-|x|) * 2^64 stays normal down to x ~ -130, so the negative
     * tail x*e^x/(1+e^x) = ((x*es)/d) * 2^-64 is exact until the final scale
     * (silu(-inf) is nan, as in torch: -inf * 0).  nan propagates
     * through es.  Below -|x| = -150 es rounds to 0: selected, as tanh's 1. */
    float a = -fabsf(x);
    float es = lf__exp_core(a, 0.0f, 64);
    es = a < -150.0f ? 0.0f : es;
    float d = LF__MADDF(es, 0x1p-64f, 1.0f);
    int neg = x < 0.0f;
    float n = neg ? x * es : x;
    return (n / d) * (neg ? 0x1p-64f : 1.0f);
}

/* ------------------------------------------------------------------ */
/* rsqrt                                                               */
/* ------------------------------------------------------------------ */
/* 1/sqrt(x) without the divider: 1.0f / sqrtf(x) is two divider
 * instructions (vsqrtps, vdivps: ~20 cycles a 16-lane vector on a Xeon),
 * which made rsqrt the slowest of the memory-speed ops; this is ~20
 * multiply-adds and compares, and one rounding where the quotient of a
 * rounded root had two (0.51 ulp, against 1.49).  y0 from the bits
 * (0x5F1FFFF9 - i/2) and one Newton step with tuned constants (Moroz et
 * al. 2018, "InvSqrt11": relative error 6.5e-4); then e = 1 - x*y^2 is
 * formed exactly enough (x*y split in h + hl by an fma) and
 * y (1 - e)^-1/2 ~ y (1 + e/2 + 3e^2/8) (the next term, 5e^3/16, is
 * < 1e-9) is rounded once.  Denormal x are scaled by 2^24 (the estimate
 * reads the exponent bits).  The classes are 1/sqrt's: +-0 -> +-inf (the
 * bits of x with the exponent flipped, as +inf -> +0), x < 0 and nan ->
 * nan.  Without FMA the split would cost a Dekker product; the quotient
 * stays. */
static inline float lf_rsqrtf(float x)
{
#ifdef __FMA__
    int tiny = x < 0x1p-126f;
    float xs = tiny ? x * 0x1p24f : x;
    float y = lf__i2f(0x5F1FFFF9 - (lf__f2i(xs) >> 1));
    y = (0.703952253f * y) * LF__MADDF(-(xs * y), y, 2.38924456f);
    float h = xs * y, hl = LF__MADDF(xs, y, -h);
    float e = LF__MADDF(-hl, y, LF__MADDF(-h, y, 1.0f));
    y = LF__MADDF(y, LF__MADDF(e, 0.375f, 0.5f) * e, y) * (tiny ? 0x1p12f : 1.0f);
    /* the class value first, then one select (as a nested select gcc spent 3 more compares) */
    uint32_t b = (uint32_t)lf__f2i(x);
    float special = x >= 0.0f ? lf__i2f((int32_t)(b ^ 0x7f800000u)) : NAN;
    return b - 1u < 0x7f7fffffu ? y : special;                  /* x in (0, inf) */
#else
    return 1.0f / sqrtf(x);
#endif
}

/* ------------------------------------------------------------------ */
/* erf, gelu                                                           */
/* ------------------------------------------------------------------ */
/* x*x = hi + lo exactly: one fused multiply-add where the target has FMA,
 * else Dekker's product (12-bit split).  x must be finite and |x| < 1e18. */
static inline void lf__sqr2(float x, float *hi, float *lo)
{
    float h = x * x;
    *hi = h;
#ifdef __FMA__
    *lo = LF__MADDF(x, x, -h);                      /* exact: one fused multiply-add */
#else
    float xh = lf__i2f(lf__f2i(x) & (int32_t)0xfffff000u);
    float xl = x - xh;
    *lo = ((xh * xh - h) + 2.0f * xh * xl) + xl * xl;
#endif
}

/* min(ax, hi) for ax = |x| >= 0 (nan gives hi) as an integer min of the bits (non-negative
 * floats order as their bits do): as a float select, gcc folds the clamped lanes' constants
 * through lf__erfc64 and blends them back in, 6 instructions more per vector. */
static inline float lf__min_abs(float ax, float hi)
{
    int32_t a = lf__f2i(ax), h = lf__f2i(hi);
    return lf__i2f(a < h ? a : h);
}

/* erf with no division, the two pieces of a branch-free select (a vector loop evaluates both):
 * erf(a) = a + a*P(a^2) for |a| <= 0.9277 (P(0) = 2/sqrt(pi) - 1, so the rounding of the leading
 * coefficient costs nothing), and 1 - exp(t*Q(t) - t) above it, t = |a| clamped to 3.95 (from
 * there on erf rounds to 1): Q(t) = log(erfc(t))/t + 1 is smooth, so a degree-5 polynomial holds
 * erfc(t) = exp(t*Q - t) to 2.9e-9 absolute (P: 4.4e-10 relative, degree 6 in a^2).  exp(..) is
 * at least 2.6e-8 here, so lf__exp_core64's one 2^(k+64) factor serves (the 2^-64 folds into the
 * 1 - e).  The old tail, exp(-t^2) R(u) / (t + 1) with u = 1/(t+1), cost two divisions, an
 * exactly split t^2 and a degree-9 R: 1.5x the time per element (and 1.4 ulp where this is 1.08). */
static inline float lf_erff(float x)
{
    float a = fabsf(x);
    float t = lf__min_abs(a, 3.95f);                /* nan -> 3.95, masked by the select */
    float q = 2.132692607e-04f;
    q = LF__MADDF(q, t, -3.209128743e-03f);
    q = LF__MADDF(q, t, 2.287153713e-02f);
    q = LF__MADDF(q, t, -1.052335352e-01f);
    q = LF__MADDF(q, t, -6.357394457e-01f);
    q = LF__MADDF(q, t, -1.285082102e-01f);
    float big = LF__MADDF(lf__exp_core64(LF__MADDF(q, t, -t), 0.0f), -0x1p-64f, 1.0f);
    float s = x * x;
    float p = 8.331880235e-05f;
    p = LF__MADDF(p, s, -8.133630618e-04f);
    p = LF__MADDF(p, s, 5.200229585e-03f);
    p = LF__MADDF(p, s, -2.685907297e-02f);
    p = LF__MADDF(p, s, 1.128368974e-01f);
    p = LF__MADDF(p, s, -3.761263192e-01f);
    p = LF__MADDF(p, s, 1.283791661e-01f);
    return a > 0.9277f ? lf__withsign(big, x) : LF__MADDF(p, x, x);   /* nan: the compare fails, p * x + x */
}

/* erfc(t) / exp(-t^2) = P(u) * v at t = a * c, v = 1/(1 + t), u = v - 1/2, for 0 <= t <= 10.25:
 * P = erfcx(t)*(1+t) falls smoothly from 1 to 0.56, and a degree-11 fit in 1/(1+t) holds it to
 * 2.7e-8 (float coefficients).  t enters only there, where its rounding costs nothing: callers
 * take exp(-t^2) from an exactly split square.  P in the return value, v in *v, so each caller
 * keeps its own product order (1 + a * c is one fused multiply-add where the target has FMA: t
 * itself is never rounded).  Beyond the fit, a caller selects its far value at the end rather than
 * clamp the exp argument deep enough to zero exp(-x^2/2)*2^64: gcc would evaluate the exp on both
 * sides of such a clamp, and the clamped side underflows through denormals on every element (a
 * microcode assist per lane: 2.5x slower loops on Zen 1). */
static inline float lf__erfcx_parts(float a, float c, float *v)
{
    *v = 1.0f / LF__MADDF(a, c, 1.0f);              /* the one division */
    float u = *v - 0.5f;
    /* P(u) = erfcx(t) * (1 + t) at u = 1/(1 + t) - 1/2 */
    float p = -6.776236296e-01f;
    p = LF__MADDF(p, u, 7.767965794e-01f);
    p = LF__MADDF(p, u, 9.350130707e-02f);
    p = LF__MADDF(p, u, -6.364834905e-01f);
    p = LF__MADDF(p, u, 4.964570403e-01f);
    p = LF__MADDF(p, u, -7.524619251e-02f);
    p = LF__MADDF(p, u, -3.073405921e-01f);
    p = LF__MADDF(p, u, 4.062010050e-01f);
    p = LF__MADDF(p, u, -1.112166122e-01f);
    p = LF__MADDF(p, u, -3.822234869e-01f);
    p = LF__MADDF(p, u, 4.753613770e-01f);
    p = LF__MADDF(p, u, 8.551671505e-01f);
    return p;
}

/* erfc(t) * 2^64 at t = axc/sqrt2 (axc = |x| clamped to 14.5, where exp(-14.5^2/2)*2^64 is
 * normal), and exp(-x^2/2) * 2^64 in *e2 (scaled so the far tail keeps full precision), for
 * lf_gelu_gradf. */
static inline float lf__erfc64(float axc, float *e2)
{
    float hi, lo;
    lf__sqr2(axc, &hi, &lo);                        /* x^2 = hi + lo */
    *e2 = lf__exp_core64(-0.5f * hi, 0.5f * lo);
    float v;
    float p = lf__erfcx_parts(axc, 0.707106781186547524f, &v);   /* t = |x|/sqrt2 <= 10.25 */
    return (*e2 * p) * v;
}

/* erfc(x) = exp(-x^2) P(u) v for x >= 0 (lf__erfcx_parts, exp(-x^2) from the exactly split x^2,
 * scaled by 2^64 so it stays normal down to erfc's last float near x = 10.05), and 2 - erfc(-x)
 * below: no 1 - erf(x) cancellation, so the positive tail keeps its relative accuracy (erfc(4) is
 * 1.5e-8, where 1 - erf(4) is 0). */
static inline float lf_erfcf(float x)
{
    float t = lf__min_abs(fabsf(x), 10.25f);        /* nan -> 10.25; erfc(10.25) is 0 in float */
    float hi, lo;
    lf__sqr2(t, &hi, &lo);
    float v;
    float p = lf__erfcx_parts(t, 1.0f, &v);
    float r = ((lf__exp_core64(-hi, lo) * p) * v) * 0x1p-64f;
    r = x < 0.0f ? 2.0f - r : r;
    return x != x ? x : r;
}

/* gelu(x) = x Phi(x) = x - x h (x > 0) or x h (x <= 0), h = Phi(-|x|) = 2^(l - 1) with
 * l = log2(2 Phi(-a)) = a P(a), a = |x|: P a degree-8 fit on [0, 5.6], so one polynomial and one
 * exp2, no division and no select between pieces (a vector loop evaluates every piece for every
 * element).  l is smooth (-a^2/(2 ln 2) - log2(a) asymptotically) and l(0) = 0, so its float
 * rounding is relative to l itself (|l| <= 2.7 on [-1, 0]: h keeps ~1 ulp there, where torch's
 * 1 + erf(x/sqrt2) already cancels); the fit is weighted by what each region needs: 1e-8 in h
 * for |x| <= 1, looser where h enters the result as x - x h (x > 1) or where h is tiny.  2^l:
 * k = round(l), 2^(l - k) a degree-6 polynomial, 2^(k-1) from k's bits (the bias 126 is the
 * factor 1/2).  Beyond |x| = 5.6 h is 0: x for x > 0 (x Phi(-5.6) < half an ulp of x) and -0
 * below (nan at -inf, as torch's -inf * 0), where torch's 1 + erf rounds to 0 from x = -5.5 on.
 * The earlier form, 0.5 x erfc(-x/sqrt2) from an exactly split x^2, exp(-x^2/2) and a
 * degree-11 erfcx with a division, kept full relative accuracy to x = -14.5 at 1.5x this
 * cost (and 0.76x torch's speed on an Intel Xeon). */
static inline float lf_geluf(float x)
{
    float ax = fabsf(x);
    float a = lf__min_abs(ax, 5.6f);                /* nan -> 5.6: x * h stays nan */
    float l = 3.592354858e-07f;
    l = LF__MADDF(l, a, -7.589044344e-06f);
    l = LF__MADDF(l, a, 6.502707402e-05f);
    l = LF__MADDF(l, a, -2.587908530e-04f);
    l = LF__MADDF(l, a, -2.125179162e-05f);
    l = LF__MADDF(l, a, 6.959931459e-03f);
    l = LF__MADDF(l, a, -5.244715139e-02f);
    l = LF__MADDF(l, a, -4.592188895e-01f);
    l = LF__MADDF(l, a, -1.151104450e+00f);
    /* l * a = log2(2 Phi(-a)), in [-25.5, 0], is never rounded where the target has FMA: it
     * fuses into both of its uses (round(l a) and l a - round(l a), |r| <= 1/2; without FMA l a
     * rounds and the difference is exact) */
    float ks = LF__MADDF(l, a, 12583038.0f);        /* 1.5*2^23 + 126: round(l a) + 126 in the low bits */
    float kf = ks - 12583038.0f;
    float r = LF__MADDF(l, a, -kf);
    float sc = lf__u2f((uint32_t)lf__f2i(ks) << 23);   /* 2^(k-1) */
    sc = ax > 5.6f ? 0.0f : sc;
    float e = 1.532932947e-04f;                     /* 2^r, 3.0e-9 relative */
    e = LF__MADDF(e, r, 1.339097158e-03f);
    e = LF__MADDF(e, r, 9.618499316e-03f);
    e = LF__MADDF(e, r, 5.550359562e-02f);
    e = LF__MADDF(e, r, 2.402264774e-01f);
    e = LF__MADDF(e, r, 6.931471825e-01f);
    e = LF__MADDF(e, r, 1.0f);
    float h = e * sc;                               /* Phi(-|x|) */
    /* x > 0 (not >=): +-0 give +-0 * 1/2, the sign of zero; +inf: 1 - 0 */
    return x * (x > 0.0f ? 1.0f - h : h);
}

/* d/dx gelu(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2/2)/sqrt(2 pi): lf_geluf's
 * erfc(t) gives Phi (1 - erfc(t)/2 for x >= 0, erfc(t)/2 below) and its
 * exp(-x^2/2) * 2^64 gives phi, so the derivative costs one exp and one
 * polynomial, as gelu does (the composition Phi = gelu(x)/x plus its own exp
 * and a division cost gelu's backward 1.6x gelu).  Both terms are scaled
 * back from 2^64 last, so they are normal wherever the result is.  Beyond
 * |x| = 14.5 it is 1 (x > 0) or -0 (x < 0), as in float; nan at +-inf, as
 * torch's 0.5 (1 + erf(x/sqrt2)) + x phi(x) gives. */
static inline float lf_gelu_gradf(float x)
{
    float ax = fabsf(x);
    float axc = lf__min_abs(ax, 14.5f);
    float e2;                                            /* exp(-x^2/2) * 2^64 */
    float h = lf__erfc64(axc, &e2) * 0x1p-65f;           /* erfc(|x|/sqrt2) / 2 = Phi(-|x|) */
    float r = LF__MADDF(x * e2 * 0.398942280401432678f, 0x1p-64f, x >= 0.0f ? 1.0f - h : h);   /* + x phi(x) */
    float far = x > 0.0f ? 1.0f : -0.0f;
    r = ax < 14.5f ? r : far;
    return x != x || ax == INFINITY ? NAN : r;   /* inf * phi(inf) is nan, as in torch */
}

/* ------------------------------------------------------------------ */
/* sin, cos                                                            */
/* ------------------------------------------------------------------ */
/* sin(x) = (-1)^n sin(r) for r = x - n pi, n the integer nearest x/pi, and
 * cos(x) = sin(x + pi/2) = (-1)^n sin(r) for r = x - (n - 1/2) pi, n the
 * integer nearest x/pi + 1/2: one polynomial (sin on |r| <= pi/2) serves both,
 * so no lane computes a second one to blend away.  All of it is in double, so
 * the float result is rounded once from a value within 2^-35 of sin(r): 0.5
 * ulp plus a hair, where a float evaluation (even with a hi + lo r) costs ~0.9
 * ulp.  r comes from one of two reductions, both computed and blended (gcc
 * never branches on a mask inside a vectorised per-element function): below
 * 2^23 a Cody-Waite split of pi/2 (lf__near_r), from 2^23 on a Payne-Hanek
 * reduction by the bits of 1/pi (lf__far_r), which holds out to FLT_MAX as
 * torch's float32 sin does (sin(1e20) = 0.6566).
 * Both take the turn t = x/pi (sin) or x/pi + 1/2 (cos) as t = x/pi + half,
 * return r and leave n + LF__RND52 in *tn (n in its low bits, the lowest the
 * sign flip). */

/* t + half, half a constant 0 (sin) or 1/2 (cos) once inlined: t + 0.0 is not
 * t for t = -0, so gcc keeps that addition unless it is tested away. */
static inline double lf__plus_half(double t, double half) { return half != 0.0 ? t + half : t; }

/* x/pi + half + LF__RND52, x/pi never rounded: the product fuses into the first addition */
static inline double lf__turn(double xd, double half)
{
    return half != 0.0 ? LF__MADD(xd, 0.3183098861837907, half) + LF__RND52 : LF__MADD(xd, 0.3183098861837907, LF__RND52);
}

/* where the far reduction takes over from the near one (|x| from 2^23 on: every
 * such float is an integer M 2^E with E >= 0, lf__far_r's first table entry) */
#define LF__SIN_FAR 0x1p23f

/* Cody-Waite, |x| < 2^23: n from tm = t + LF__RND52 (exact while |t| < 2^51),
 * r = x - m pi/2 for m = 2n - 2 half, exactly an integer. */
static inline double lf__near_r(float x, double half, double *tn)
{
    double xd = (double)x;
    double tm = lf__turn(xd, half);
    double m = LF__MADD(tm, 2.0, -2.0 * LF__RND52) - 2.0 * half;   /* 2n - 2 half, exactly */
    *tn = tm;
#ifdef __FMA__
    /* pi/2 = P1 + P2 + 1.5e-33 (53 + 53 bits).  x - m*P1 in one fused
     * multiply-add is exact where |r| < 1 (m*P1's bits start at 2^-52), and
     * rounded by 2^-53 relative above; the second term costs one rounding;
     * 1.5e-33 * |m| < 2e-18 (this split holds out to 2^50).  m times -P, not
     * -m times P: gcc rewrites -fma(a, b, c) as fma(-a, b, -c), which turns
     * m = +0 into -m = +0 and sin(-0) into +0. */
    double r = LF__MADD(m, -1.5707963267948966, xd);
    return LF__MADD(m, -6.123233995736766e-17, r);
#else
    /* without FMA: 24 + 24 + 53 bits, m*P1 and m*P2 exact for |m| < 2^29
     * (|x| < 8e8).  Every part is positive (pi/2 cut down): -0 - m*P stays
     * -0 only while m*P is +0. */
    double r = xd - m * 1.570796251296997;
    r = r - m * 7.549789415861596e-08;
    return r - m * 5.390302858158119e-15;
#endif
}

/* (2^E / pi) mod 2 for E = 0..104 as A + B + C: A a multiple of 2^-27 below 2
 * and B one of 2^-55 below 2^-27 (28 bits each), C the rest rounded to double
 * (below 2^-55), in three tables (gcc gathers from a one-dimensional
 * table, not from rows of a two-dimensional one).  Computed from 1/pi to 560 bits (tests/test_c_math.py
 * recomputes it). */
static const double lf__inv_pi_a[105] = {   /* A */
    0x1.45f3068p-2, 0x1.45f306cp-1, 0x1.45f306cp+0, 0x1.17cc1b4p-1,
    0x1.17cc1b6p+0, 0x1.7cc1b7p-3, 0x1.7cc1b7p-2, 0x1.7cc1b7p-1,
    0x1.7cc1b72p+0, 0x1.f306dc8p-1, 0x1.f306dc8p+0, 0x1.e60db92p+0,
    0x1.cc1b726p+0, 0x1.9836e4ep+0, 0x1.306dc9cp+0, 0x1.836e4ep-2,
    0x1.836e4e4p-1, 0x1.836e4e4p+0, 0x1.06dc9c8p+0, 0x1.b7272p-5,
    0x1.b72722p-4, 0x1.b72722p-3, 0x1.b72722p-2, 0x1.b72722p-1,
    0x1.b72722p+0, 0x1.6e4e44p+0, 0x1.b939104p-1, 0x1.b939104p+0,
    0x1.727220ap+0, 0x1.c9c8828p-1, 0x1.c9c882ap+0, 0x1.9391054p+0,
    0x1.27220a8p+0, 0x1.3910548p-2, 0x1.3910548p-1, 0x1.391054ap+0,
    0x1.c882a5p-2, 0x1.c882a5p-1, 0x1.c882a52p+0, 0x1.91054a6p+0,
    0x1.220a94ep+0, 0x1.1054a78p-2, 0x1.1054a7cp-1, 0x1.1054a7ep+0,
    0x1.054a7fp-3, 0x1.054a7fp-2, 0x1.054a7fp-1, 0x1.054a7fp+0,
    0x1.529fcp-5, 0x1.529fc2p-4, 0x1.529fc2p-3, 0x1.529fc2p-2,
    0x1.529fc24p-1, 0x1.529fc26p+0, 0x1.4a7f09cp-1, 0x1.4a7f09cp+0,
    0x1.29fc274p-1, 0x1.29fc274p+0, 0x1.4fe13a8p-2, 0x1.4fe13a8p-1,
    0x1.4fe13aap+0, 0x1.3f84eacp-1, 0x1.3f84eaep+0, 0x1.fc27578p-2,
    0x1.fc2757cp-1, 0x1.fc2757cp+0, 0x1.f84eafap+0, 0x1.f09d5f4p+0,
    0x1.e13abe8p+0, 0x1.c2757dp+0, 0x1.84eafa2p+0, 0x1.09d5f46p+0,
    0x1.3abe8ep-4, 0x1.3abe8fp-3, 0x1.3abe8f8p-2, 0x1.3abe8f8p-1,
    0x1.3abe8fap+0, 0x1.d5f47dp-2, 0x1.d5f47d4p-1, 0x1.d5f47d4p+0,
    0x1.abe8fa8p+0, 0x1.57d1f52p+0, 0x1.5f47d4cp-1, 0x1.5f47d4cp+0,
    0x1.7d1f534p-1, 0x1.7d1f534p+0, 0x1.f47d4dp-1, 0x1.f47d4d2p+0,
    0x1.e8fa9a6p+0, 0x1.d1f534cp+0, 0x1.a3ea69ap+0, 0x1.47d4d36p+0,
    0x1.1f534dcp-1, 0x1.1f534dcp+0, 0x1.f534ddp-3, 0x1.f534dd8p-2,
    0x1.f534ddcp-1, 0x1.f534ddcp+0, 0x1.ea69bb8p+0, 0x1.d4d377p+0,
    0x1.a9a6eep+0, 0x1.534ddcp+0, 0x1.4d377p-1, 0x1.4d37702p+0,
    0x1.34ddc0cp-1,
};
static const double lf__inv_pi_b[105] = {   /* B */
    0x1.727220ap-28, 0x1.c9c8828p-29, 0x1.c9c882ap-28, 0x1.9391054p-28,
    0x1.27220a8p-28, 0x1.3910548p-30, 0x1.3910548p-29, 0x1.391054ap-28,
    0x1.c882a5p-30, 0x1.c882a5p-29, 0x1.c882a52p-28, 0x1.91054a6p-28,
    0x1.220a94ep-28, 0x1.1054a78p-30, 0x1.1054a7cp-29, 0x1.1054a7ep-28,
    0x1.054a7fp-31, 0x1.054a7fp-30, 0x1.054a7fp-29, 0x1.054a7fp-28,
    0x1.529fcp-33, 0x1.529fc2p-32, 0x1.529fc2p-31, 0x1.529fc2p-30,
    0x1.529fc24p-29, 0x1.529fc26p-28, 0x1.4a7f09cp-29, 0x1.4a7f09cp-28,
    0x1.29fc274p-29, 0x1.29fc274p-28, 0x1.4fe13a8p-30, 0x1.4fe13a8p-29,
    0x1.4fe13aap-28, 0x1.3f84eacp-29, 0x1.3f84eaep-28, 0x1.fc27578p-30,
    0x1.fc2757cp-29, 0x1.fc2757cp-28, 0x1.f84eafap-28, 0x1.f09d5f4p-28,
    0x1.e13abe8p-28, 0x1.c2757dp-28, 0x1.84eafa2p-28, 0x1.09d5f46p-28,
    0x1.3abe8ep-32, 0x1.3abe8fp-31, 0x1.3abe8f8p-30, 0x1.3abe8f8p-29,
    0x1.3abe8fap-28, 0x1.d5f47dp-30, 0x1.d5f47d4p-29, 0x1.d5f47d4p-28,
    0x1.abe8fa8p-28, 0x1.57d1f52p-28, 0x1.5f47d4cp-29, 0x1.5f47d4cp-28,
    0x1.7d1f534p-29, 0x1.7d1f534p-28, 0x1.f47d4dp-29, 0x1.f47d4d2p-28,
    0x1.e8fa9a6p-28, 0x1.d1f534cp-28, 0x1.a3ea69ap-28, 0x1.47d4d36p-28,
    0x1.1f534dcp-29, 0x1.1f534dcp-28, 0x1.f534ddp-31, 0x1.f534dd8p-30,
    0x1.f534ddcp-29, 0x1.f534ddcp-28, 0x1.ea69bb8p-28, 0x1.d4d377p-28,
    0x1.a9a6eep-28, 0x1.534ddcp-28, 0x1.4d377p-29, 0x1.4d37702p-28,
    0x1.34ddc0cp-29, 0x1.34ddc0cp-28, 0x1.a6ee068p-30, 0x1.a6ee06cp-29,
    0x1.a6ee06cp-28, 0x1.4ddc0dap-28, 0x1.377036cp-29, 0x1.377036cp-28,
    0x1.bb81b68p-30, 0x1.bb81b6cp-29, 0x1.bb81b6cp-28, 0x1.77036d8p-28,
    0x1.dc0db6p-29, 0x1.dc0db62p-28, 0x1.b81b6c4p-28, 0x1.7036d8ap-28,
    0x1.c0db628p-29, 0x1.c0db628p-28, 0x1.81b6c52p-28, 0x1.036d8a4p-28,
    0x1.b6c528p-34, 0x1.b6c528p-33, 0x1.b6c52ap-32, 0x1.b6c52bp-31,
    0x1.b6c52bp-30, 0x1.b6c52bp-29, 0x1.b6c52b2p-28, 0x1.6d8a566p-28,
    0x1.b629598p-29,
};
static const double lf__inv_pi_c[105] = {   /* C */
    0x1.29fc2757d1f53p-57, 0x1.29fc2757d1f53p-56, 0x1.4fe13abe8fa9ap-58, 0x1.4fe13abe8fa9ap-57,
    0x1.4fe13abe8fa9ap-56, 0x1.3f84eafa3ea6ap-57, 0x1.3f84eafa3ea6ap-56, 0x1.fc2757d1f534ep-58,
    0x1.fc2757d1f534ep-57, 0x1.fc2757d1f534ep-56, 0x1.f84eafa3ea69cp-56, 0x1.f09d5f47d4d37p-56,
    0x1.e13abe8fa9a6fp-56, 0x1.c2757d1f534dep-56, 0x1.84eafa3ea69bcp-56, 0x1.09d5f47d4d377p-56,
    0x1.3abe8fa9a6eep-60, 0x1.3abe8fa9a6eep-59, 0x1.3abe8fa9a6eep-58, 0x1.3abe8fa9a6eep-57,
    0x1.3abe8fa9a6eep-56, 0x1.d5f47d4d37703p-58, 0x1.d5f47d4d37703p-57, 0x1.d5f47d4d37703p-56,
    0x1.abe8fa9a6ee07p-56, 0x1.57d1f534ddc0ep-56, 0x1.5f47d4d377037p-57, 0x1.5f47d4d377037p-56,
    0x1.7d1f534ddc0dbp-57, 0x1.7d1f534ddc0dbp-56, 0x1.f47d4d377036ep-57, 0x1.f47d4d377036ep-56,
    0x1.e8fa9a6ee06dbp-56, 0x1.d1f534ddc0db6p-56, 0x1.a3ea69bb81b6cp-56, 0x1.47d4d377036d9p-56,
    0x1.1f534ddc0db63p-57, 0x1.1f534ddc0db63p-56, 0x1.f534ddc0db629p-59, 0x1.f534ddc0db629p-58,
    0x1.f534ddc0db629p-57, 0x1.f534ddc0db629p-56, 0x1.ea69bb81b6c53p-56, 0x1.d4d377036d8a5p-56,
    0x1.a9a6ee06db14bp-56, 0x1.534ddc0db6296p-56, 0x1.4d377036d8a56p-57, 0x1.4d377036d8a56p-56,
    0x1.34ddc0db6295ap-57, 0x1.34ddc0db6295ap-56, 0x1.a6ee06db14acdp-58, 0x1.a6ee06db14acdp-57,
    0x1.a6ee06db14acdp-56, 0x1.4ddc0db629599p-56, 0x1.377036d8a5665p-57, 0x1.377036d8a5665p-56,
    0x1.bb81b6c52b328p-58, 0x1.bb81b6c52b328p-57, 0x1.bb81b6c52b328p-56, 0x1.77036d8a5664fp-56,
    0x1.dc0db6295993cp-57, 0x1.dc0db6295993cp-56, 0x1.b81b6c52b3279p-56, 0x1.7036d8a5664f1p-56,
    0x1.c0db6295993c4p-57, 0x1.c0db6295993c4p-56, 0x1.81b6c52b32788p-56, 0x1.036d8a5664f11p-56,
    0x1.b6c52b3278872p-62, 0x1.b6c52b3278872p-61, 0x1.b6c52b3278872p-60, 0x1.b6c52b3278872p-59,
    0x1.b6c52b3278872p-58, 0x1.b6c52b3278872p-57, 0x1.b6c52b3278872p-56, 0x1.6d8a5664f10e4p-56,
    0x1.b6295993c439p-57, 0x1.b6295993c439p-56, 0x1.6c52b32788721p-56, 0x1.b14acc9e21c82p-57,
    0x1.b14acc9e21c82p-56, 0x1.6295993c43904p-56, 0x1.8a5664f10e41p-57, 0x1.8a5664f10e41p-56,
    0x1.14acc9e21c821p-56, 0x1.4acc9e21c821p-59, 0x1.4acc9e21c821p-58, 0x1.4acc9e21c821p-57,
    0x1.4acc9e21c821p-56, 0x1.2b3278872084p-57, 0x1.2b3278872084p-56, 0x1.5993c439041fep-58,
    0x1.5993c439041fep-57, 0x1.5993c439041fep-56, 0x1.664f10e4107f9p-57, 0x1.664f10e4107f9p-56,
    0x1.993c439041fe5p-57, 0x1.993c439041fe5p-56, 0x1.3278872083fcap-56, 0x1.93c439041fe51p-58,
    0x1.93c439041fe51p-57, 0x1.93c439041fe51p-56, 0x1.278872083fca3p-56, 0x1.3c439041fe516p-58,
    0x1.3c439041fe516p-57,
};

/* Payne-Hanek, |x| >= 2^23: x = M 2^E for an integer M (24 bits, with x's
 * sign) and E = 0..104, so x/pi = M 2^E/pi = M (A + B + C) mod 2 (M times an
 * even integer drops out).  M A and M B are exact (52 bits each); M A is
 * reduced mod 2 exactly (a, a multiple of 2^-27 in [-1, 1]).  f = (a + half -
 * n) + M B is exact wherever |f| < 1/4 (a multiple of 2^-55 below 2^-2 has 53
 * bits) and within 2^-54 above; M C adds an error below 2^-83.  Float32
 * inputs come no closer than about 2^-31 to a multiple of pi/2 in turns, so
 * r = f pi is within ~2^-51 relative.  Lanes below 2^23 (E clamped to 0) and
 * inf/nan compute garbage here that the blend and the final select discard. */
static inline double lf__far_r(float x, double half, double *tn)
{
    int32_t e = ((lf__f2i(x) >> 23) & 0xff) - 150;
    e = e < 0 ? 0 : (e > 104 ? 104 : e);
    double m = (double)x * lf__f64((int64_t)(1023 - e) << 52);      /* M: x 2^-E, exactly */
    double ma = m * lf__inv_pi_a[e];
    double a = lf__plus_half(LF__MADD(-2.0, LF__MADD(ma, 0.5, LF__RND52) - LF__RND52, ma), half);
    double tm = LF__MADD(m, lf__inv_pi_b[e], a) + LF__RND52;                        /* (M B: exact) */
    double f = LF__MADD(m, lf__inv_pi_c[e], LF__MADD(m, lf__inv_pi_b[e], a - (tm - LF__RND52)));
    *tn = tm;
    return f * 3.141592653589793;
}

/* (-1)^n sin(r), n from tm's lowest bit; nan at +-inf and nan */
static inline float lf__sin_signed(float x, double r, double tm)
{
    /* sin(r) = r (1 + z P(z)), z = r^2: P a degree-4 fit on |r| <= 1.5712
     * (2.4e-11 relative); r * (...) keeps sin(-0) = -0 */
    double z = r * r;
    double p = LF__MADD(z, -2.388830999226409e-08, 2.7525351171678393e-06);
    p = LF__MADD(z, p, -1.984086757786254e-04);
    p = LF__MADD(z, p, 8.333331103901522e-03);
    p = LF__MADD(z, p, -1.6666666626041696e-01);
    double s = r * LF__MADD(p, z, 1.0);
    s = lf__f64(lf__i64(s) ^ (lf__i64(tm) << 63));   /* (-1)^n */
    float v = (float)s;
    return fabsf(x) < INFINITY ? v : x - x;           /* inf, nan -> nan */
}

static inline float lf__sin_turn(float x, double half)
{
    double tn_near, tn_far;
    double r_near = lf__near_r(x, half, &tn_near);
    double r_far = lf__far_r(x, half, &tn_far);
    int far = fabsf(x) >= LF__SIN_FAR;
    return lf__sin_signed(x, far ? r_far : r_near, far ? tn_far : tn_near);
}

/* sin and cos of any float */
static inline float lf_sinf(float x) { return lf__sin_turn(x, 0.0); }
static inline float lf_cosf(float x) { return lf__sin_turn(x, 0.5); }

/* The near reduction alone, for |x| < 2^23: the blend above costs 2.5-4.5x
 * these (the far reduction's integer work and its three gathers run in every
 * lane).  A pointwise kernel runs these and flags a far element
 * (lf__sin_far) to run all of its loops again with lf_sinf/lf_cosf
 * (CPrinter._pointwise); inf and nan give nan here too. */
static inline int lf__sin_far(float x) { float a = fabsf(x); return a >= LF__SIN_FAR && a < INFINITY; }
static inline float lf_sin_nearf(float x) { double tn, r = lf__near_r(x, 0.0, &tn); return lf__sin_signed(x, r, tn); }
static inline float lf_cos_nearf(float x) { double tn, r = lf__near_r(x, 0.5, &tn); return lf__sin_signed(x, r, tn); }

/* ------------------------------------------------------------------ */
/* expm1                                                               */
/* ------------------------------------------------------------------ */
/* e^x - 1 = 2^k expm1(r) + (2^k - 1) (tanh's m and d): no cancellation
 * near 0, within about an ulp; -0 stays -0, nan is given back by the final select. */
static inline float lf_expm1f(float x)
{
    float t = lf__clamp_bits(x, 0xC1F00000u, 0x42B20000);   /* [-30, 89]: e^-30 - 1 rounds to -1; 2^128 is inf */
    float ks = LF__MADDF(t, LF__LOG2E, LF__SHIFT1);
    float kf = ks - LF__SHIFT1;
    float q = lf__expm1_poly(lf__ln2_reduce(t, kf));
    /* 2^k, k in [-44, 128]: k = 128 (x from 88.38 on, where e^x - 1 is finite up to 88.72) is
     * taken as 2^127 and a final doubling (2^128 itself is inf, and inf * q + inf was nan for
     * q < 0); there s - 1 rounds to s, so the result is (1 + q) 2^128 rounded once */
    uint32_t kb = (uint32_t)lf__f2i(ks) << 23;
    float s = lf__u2f(kb < 0x7F000000u ? kb : 0x7F000000u);
    float r = LF__MADDF(s, q, s - 1.0f);
    r = kb > 0x7F000000u ? r * 2.0f : r;
    return x < 0.0f || x > 0.0f ? r : x;                     /* -0 stays -0; nan */
}

/* log(1 + x), Goldberg's: with u = 1 + x rounded, log(u) * x / (u - 1)
 * cancels u's rounding error (within about two ulps); where u rounds to 1
 * it is x (-0 stays -0), at +inf inf, below -1 nan (log's), at -1 -inf. */
static inline float lf_log1pf(float x)
{
    float u = 1.0f + x;
    float d = u - 1.0f;
    float r = lf_logf(u) * (x / (d == 0.0f ? 1.0f : d));
    r = x == INFINITY ? x : r;
    return d == 0.0f ? x : r;
}

/* log(1 + e^-a) for a = |x| (or nan): softplus's, logsigmoid's and mish's
 * tail, max(x, 0) + log(1 + e^-|x|) = log(1 + e^x) without overflow (the
 * compositions' formula: a log1p would cost a division more per element,
 * for the digits of results below ~1e-7 relative to max(x, 0)). */
static inline float lf__log1p_exp_neg(float a)
{
    return lf_logf(1.0f + lf_expf(-a));
}

/* log1p(e^x), softplus with beta 1 and no threshold (mish's) */
static inline float lf__softplus(float x)
{
    return (x > 0.0f ? x : 0.0f) + lf__log1p_exp_neg(fabsf(x));
}

/* ------------------------------------------------------------------ */
/* atan, atan2                                                         */
/* ------------------------------------------------------------------ */
/* atan(a) for a = |x| >= 0 (or nan): cephes' atanf, a reduced to
 * |t| <= tan(pi/8) (t = -1/a above tan(3pi/8), (a-1)/(a+1) above
 * tan(pi/8): one division for the three branches), then an odd polynomial;
 * within ~2 ulp. */
static inline float lf__atan_abs(float a)
{
    int big = a > 2.414213562373095f, mid = a > 0.4142135623730950f;
    float num = mid ? a - 1.0f : a, den = mid ? a + 1.0f : 1.0f;
    num = big ? -1.0f : num;
    den = big ? a : den;
    float t = num / den;
    float base = mid ? 0.78539816339744831f : 0.0f;
    base = big ? 1.5707963267948966f : base;
    float z = t * t;
    float p = LF__MADDF(8.05374449538e-2f, z, -1.38776856032e-1f);
    p = LF__MADDF(p, z, 1.99777106478e-1f);
    p = LF__MADDF(p, z, -3.33329491539e-1f);
    return base + LF__MADDF(p * z, t, t);
}

static inline float lf_atanf(float x)
{
    return lf__withsign(lf__atan_abs(fabsf(x)), x);  /* nan -> nan; atan(-0) = -0 */
}

/* atan2(y, x): atan(y / x) moved to its quadrant by the sign bits (signed
 * zeros and infinities as C's atan2, as torch) */
static inline float lf_atan2f(float y, float x)
{
    int yneg = lf__f2i(y) < 0, xneg = lf__f2i(x) < 0;
    float half_turn = yneg ? -3.14159265358979f : 3.14159265358979f;
    int both_inf = (fabsf(y) == INFINITY) & (fabsf(x) == INFINITY);
    float ratio = y / x;
    ratio = both_inf ? (yneg == xneg ? 1.0f : -1.0f) : ratio;   /* +-pi/4 (+ the half turn) */
    float angle = lf_atanf(ratio);
    angle = xneg ? angle + half_turn : angle;                   /* (not + 0: atan2(-0, 1) is -0) */
    float zero_angle = xneg ? half_turn : lf__withsign(0.0f, y); /* atan2(+-0, +-0) */
    angle = (y == 0.0f) & (x == 0.0f) ? zero_angle : angle;
    return (y != y) | (x != x) ? y + x : angle;
}

/* ------------------------------------------------------------------ */
/* pow                                                                 */
/* ------------------------------------------------------------------ */

/* log2(a) for a float a > 0 (finite, normal or denormal), in double: a = 2^k z with z in
 * [sqrt(1/2), sqrt(2)) from a's float bits (a denormal is first scaled by 2^23, exactly), and
 * log2(z) = s P(s^2) with s = (z - 1)/(z + 1) (both exact: z has 24 bits), P a degree-5 fit of
 * log2((1+s)/(1-s))/s (2^-45 relative), in Estrin's scheme: the loop is latency-bound. For
 * a = 0, inf or NaN the result is finite (z = 1 or 1.5): the caller adds those cases. */
static inline double lf__log2_pos(float a)
{
    int den = a < 1.17549435e-38f;
    float as = den ? a * 8388608.0f : a;
    int32_t tmp = lf__f2i(as) - 0x3f3504f3;          /* sqrt(1/2)'s bits */
    int32_t k = (tmp >> 23) - (den ? 23 : 0);
    double z = (double)lf__i2f(lf__f2i(as) - (tmp & (int32_t)0xff800000u));
    double s = (z - 1.0) / (z + 1.0);
    double w = s * s, w2 = w * w;
    double p01 = LF__MADD(w, 0.96179669411318813, 2.8853900817778513);
    double p23 = LF__MADD(w, 0.41220924865067943, 0.57707794240516308);
    double p45 = LF__MADD(w, 0.28289822796253328, 0.31990583967761493);
    double p = LF__MADD(w2 * w2, p45, LF__MADD(w2, p23, p01));
    return LF__MADD(s, p, (double)k);
}

/* 2^t for t in [-1000, 1000] or NaN, in double: k = rint(t), r = t - k in [-1/2, 1/2] exactly,
 * 2^r = 1 + r Q(r), Q a degree-6 fit (2^-33 relative: 2^-9 of a float's ulp). */
static inline double lf__exp2_64(double t)
{
    double ks = t + LF__RND52;                       /* k in the low bits */
    double kd = ks - LF__RND52;
    double r = t - kd;
    double r2 = r * r;
    double q01 = LF__MADD(r, 0.24022650922342753, 0.69314718055683155);
    double q23 = LF__MADD(r, 0.0096180566698846458, 0.05550410906331802);
    double q45 = LF__MADD(r, 0.00015461447463557303, 0.0013333478467259774);
    double q = LF__MADD(r2, 1.5303702448579483e-05, q45);
    q = LF__MADD(r2, q, q23);
    q = LF__MADD(r2, q, q01);
    double scale = lf__f64((lf__i64(ks) + 1023) << 52);
    return LF__MADD(r, q, 1.0) * scale;
}

/* float pow(x, y) = 2^(y log2|x|), both in double (so the result is within 0.502 ulp of
 * float64's: torch's own vectorised powf is 0.78 ulp off), with C99's (and torch's) special
 * cases: x ** 0 = 1 ** y = 1 (NaN too), a negative base to an integer power keeps the parity's
 * sign (-0 and -inf included), to a non-integer one is NaN (not -inf's: +0 or +inf), +-0 ** y
 * and +-inf ** y are 0 or inf by y's sign, (-1) ** +-inf = 1. gcc vectorises it: the libm powf
 * it replaces ran per element, 4x slower than this on AVX-512. */
static inline float lf_vpowf(float x, float y)
{
    float ax = fabsf(x);
    /* log2|x| at 0, inf and NaN, ADDED to lf__log2_pos's finite value there: as a select after
     * it, gcc moves the log into a branch and vectorises nothing */
    float lg_special = ax == 0.0f ? -INFINITY : 0.0f;
    lg_special = ax == INFINITY ? INFINITY : lg_special;
    lg_special = ax != ax ? ax : lg_special;
    double lg = lf__log2_pos(ax) + (double)lg_special;
    double t = (double)y * lg;
    t = t < -1000.0 ? -1000.0 : t;
    t = t > 1000.0 ? 1000.0 : t;
    float r = (float)lf__exp2_64(t);
    /* y's parity, in float: below 2^23, yr = |y| + 2^23 holds rint(|y|) in its low mantissa bits;
     * from 2^23 to 2^24 |y| is an integer, its last bit the parity; from 2^24 on (inf too) it is
     * even. (A float to int conversion would be moved into a branch by gcc, which then
     * vectorises nothing.) A NaN y is no integer. */
    float ay = fabsf(y);
    float yr = ay < 0x1p23f ? ay + 0x1p23f : ay;
    float y_back = ay < 0x1p23f ? yr - 0x1p23f : ay;  /* rint(|y|), or |y| */
    yr = ay < 0x1p24f ? yr : 0x1p24f;
    uint32_t y_odd = y_back == ay ? (uint32_t)lf__f2i(yr) << 31 : 0u;
    /* a negative base (-0 too) to an odd power flips the sign */
    r = lf__u2f((uint32_t)lf__f2i(r) ^ (y_odd & (uint32_t)lf__f2i(x)));
    /* a finite negative base to a non-integer power is NaN (one comparison per select: gcc
     * turns a combined condition into branches and vectorises nothing) */
    float xneg = y_back == ay ? 0.0f : x;
    xneg = ax == INFINITY ? 0.0f : xneg;
    r = xneg < 0.0f ? NAN : r;
    float one_base = ay == INFINITY ? ax : x;
    r = one_base == 1.0f ? 1.0f : r;                 /* 1 ** y (NaN too), (-1) ** +-inf */
    return y == 0.0f ? 1.0f : r;                     /* x ** 0, NaN ** 0 too */
}

#endif /* LAZYFUSE_C_MATH_H */

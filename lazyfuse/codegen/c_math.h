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
 * -fno-trapping-math WITHOUT -ffast-math.  (Without fast-math gcc would call
 * the scalar libm expf/tanhf/... and the loop would stay scalar.)
 *
 * The algorithms are cephes/SLEEF style: range reduction followed by minimax
 * polynomials.  Special values (nan, +-inf, +-0, denormals, overflow and
 * underflow) follow torch's float64 results rounded to float32, including
 * torch's silu(-inf) = gelu(-inf) = nan.
 *
 * Accuracy: max of |y - ref| / max(|ref|, FLT_MIN) against float64, from an
 * exhaustive scan of all float32 inputs (2^-24 = 5.96e-8):
 *   lf_expf 8.95e-8   lf_logf 8.16e-8   lf_tanhf 8.88e-8
 *   lf_sigmoidf 1.78e-7   lf_siluf 2.42e-7
 *   lf_sinf 8.57e-8, lf_cosf 8.53e-8 for |x| < 8e8: k = rint(x*2/pi) and
 *       r = x - k*pi/2 are computed in double with a 24+24+53-bit split of
 *       pi/2, exact for |k| < 2^29.  Beyond that accuracy degrades (about
 *       |x|*2^-54 absolute in r; |x| >= 2^40 is clamped to 2^40), results
 *       stay finite and within [-1, 1].
 *   lf_erff 1.36e-7 relative, 9.7e-8 absolute
 *   lf_geluf 3.35e-7, including the far negative tail (computed as
 *       0.5*x*erfc(-x/sqrt2) with exp(-x^2/2) from an exactly split x^2 and
 *       a 2^64 pre-scale, so there is no 1+erf cancellation and no early
 *       underflow).
 * (Measured with gcc 12 -march=znver1, i.e. with FMA contraction; without
 * FMA the numbers are the same within ~2%.)
 *
 * Pure C99; the only <math.h> function used is fabsf (a bit mask), rounding
 * uses the 1.5*2^23 trick, so the loops vectorize on any SIMD target (no
 * SSE4.1 needed).  All internal helpers are prefixed lf__.
 */
#ifndef LAZYFUSE_C_MATH_H
#define LAZYFUSE_C_MATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* bit casts (memcpy is the portable way; gcc turns it into a no-op)   */
/* ------------------------------------------------------------------ */
static inline int32_t lf__f2i(float x) { int32_t i; memcpy(&i, &x, sizeof i); return i; }
static inline float lf__i2f(int32_t i) { float x; memcpy(&x, &i, sizeof x); return x; }

/* |r| with the sign bit of s */
static inline float lf__withsign(float r, float s)
{
    return lf__i2f((lf__f2i(r) & 0x7fffffff) | (lf__f2i(s) & (int32_t)0x80000000u));
}

/* Round to nearest integer (ties to even) with the 1.5*2^23 / 1.5*2^52
 * trick: valid for |x| < 2^22 (float) / 2^51 (double).  Unlike rintf/rint
 * this vectorizes on every target (no SSE4.1 needed); without -ffast-math
 * gcc may not fold (x + M) - M. */
static inline float lf__rintf(float x) { return (x + 12582912.0f) - 12582912.0f; }
static inline double lf__rint(double x) { return (x + 6755399441055744.0) - 6755399441055744.0; }

/* p * 2^k for k in [-252, 254], with a single final rounding (so denormal
 * results are correctly produced from an accurate p). */
static inline float lf__ldexp2(float p, int32_t k)
{
    int32_t k1 = k >> 1;      /* arithmetic shift on gcc */
    int32_t k2 = k - k1;
    return (p * lf__i2f((k1 + 127) << 23)) * lf__i2f((k2 + 127) << 23);
}

/* ------------------------------------------------------------------ */
/* exp                                                                 */
/* ------------------------------------------------------------------ */
/* exp(x + xlo) * 2^kadd for non-nan x (nan is treated as a very negative
 * x; the callers fix nan up).  xlo is a tiny correction (|xlo| <= ulp(x))
 * added after the range reduction, used to feed an exactly split argument.
 * kadd in [0, 64] lets callers keep results that would be denormal at full
 * precision. */
static inline float lf__exp_core(float x, float xlo, int32_t kadd)
{
    float xc = x > -150.0f ? x : -150.0f;     /* also maps nan -> -150 */
    xc = xc < 89.0f ? xc : 89.0f;
    float kf = lf__rintf(xc * 1.44269504088896341f);
    /* cephes two-constant Cody-Waite reduction: r = x - k*ln2 */
    float r = xc - kf * 0.693359375f;
    r = r - kf * -2.12194440e-4f;
    r = r + xlo;
    float z = r * r;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * z + r + 1.0f;
    return lf__ldexp2(p, (int32_t)kf + kadd);
}

static inline float lf_expf(float x)
{
    float r = lf__exp_core(x, 0.0f, 0);
    return x != x ? x : r;
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
    float f = lo ? (m + m) - 1.0f : m - 1.0f;       /* exact */
    float z = f * f;
    float y = 7.0376836292e-2f;
    y = y * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y = y * f * z;
    float fe = (float)e;
    y = y + -2.12194440e-4f * fe;
    y = y - 0.5f * z;
    float r = f + y;
    r = r + 0.693359375f * fe;

    r = x == INFINITY ? x : r;
    r = x == 0.0f ? -INFINITY : r;                  /* +-0 -> -inf */
    r = x < 0.0f ? NAN : r;
    return x != x ? x : r;
}

/* ------------------------------------------------------------------ */
/* tanh, sigmoid, silu                                                 */
/* ------------------------------------------------------------------ */
static inline float lf_tanhf(float x)
{
    float z = fabsf(x);
    /* |x| >= 0.875: 1 - 2/(exp(2|x|)+1); tanh(10) rounds to 1 */
    float zc = z < 10.0f ? z : 10.0f;
    float e = lf__exp_core(zc + zc, 0.0f, 0);
    float big = 1.0f - 2.0f / (e + 1.0f);
    /* |x| < 0.875: odd minimax polynomial (no 1 - 2/(e+1) cancellation) */
    float s = z * z;
    float p = -6.17361394688487e-04f;
    p = p * s + 2.9859505593776703e-03f;
    p = p * s - 8.651587180793285e-03f;
    p = p * s + 2.1842455491423607e-02f;
    p = p * s - 5.396980419754982e-02f;
    p = p * s + 1.3333378732204437e-01f;
    p = p * s - 3.333333432674408e-01f;
    float small = p * s * z + z;
    float r = z >= 0.875f ? big : small;            /* nan -> small -> nan */
    return lf__withsign(r, x);                      /* keeps tanh(-0) = -0 */
}

static inline float lf_sigmoidf(float x)
{
    /* e = exp(-|x|) never overflows; sigmoid = (x >= 0 ? 1 : e) / (1 + e) */
    float e = lf__exp_core(-fabsf(x), 0.0f, 0);
    float n = x >= 0.0f ? 1.0f : e;
    float r = n / (1.0f + e);
    return x != x ? x : r;
}

static inline float lf_siluf(float x)
{
    /* es = exp(-|x|) * 2^64 stays normal down to x ~ -130, so the negative
     * tail x*e^x/(1+e^x) is exact until the final scale (silu(-inf) is nan,
     * as in torch: -inf * 0). */
    float es = lf__exp_core(-fabsf(x), 0.0f, 64);
    float e = es * 0x1p-64f;
    float d = 1.0f + e;
    float pos = x / d;
    float neg = ((x * es) / d) * 0x1p-64f;
    float r = x >= 0.0f ? pos : neg;
    return x != x ? x : r;
}

/* ------------------------------------------------------------------ */
/* erf, gelu                                                           */
/* ------------------------------------------------------------------ */
/* erf(t) = t + t*P(t^2) on [0, 0.75] (P(0) = 2/sqrt(pi) - 1, so the
 * rounding of the leading coefficient costs nothing) */
static inline float lf__erf_small(float t)
{
    float s = t * t;
    float p = -6.664595566689968e-04f;
    p = p * s + 5.101142451167107e-03f;
    p = p * s - 2.682742103934288e-02f;
    p = p * s + 1.1283218860626221e-01f;
    p = p * s - 3.7612608075141907e-01f;
    p = p * s + 1.2837916612625122e-01f;
    return p * t + t;
}

/* erfc(t) * 2^kadd for t in [0.75, 10.5], given e2 = exp(-t^2) * 2^kadd:
 * erfc(t) = exp(-t^2) * P(1/(t+1) - u0) / (t + 1).  P = erfcx(t)*(t+1) is
 * nearly flat (0.62 .. 0.89), which keeps its evaluation error small, and
 * u0 is chosen so that P(0) is (almost exactly) a float. */
static inline float lf__erfc_tail(float t, float e2)
{
    float d = t + 1.0f;
    float v = 1.0f / d - 0.32136398553848267f;
    float p = -2.6511809825897217e+00f;
    p = p * v + 1.3736504316329956e+00f;
    p = p * v + 7.581170797348022e-01f;
    p = p * v - 1.1141396760940552e+00f;
    p = p * v + 2.758829593658447e-01f;
    p = p * v + 5.055248737335205e-01f;
    p = p * v - 4.672035276889801e-01f;
    p = p * v - 2.3093844950199127e-01f;
    p = p * v + 5.906690955162048e-01f;
    p = p * v + 7.591509819030762e-01f;
    return (e2 * p) / d;
}

/* x*x = hi + lo exactly (Dekker's product, 12-bit split; no FMA needed).
 * x must be finite and |x| < 1e18. */
static inline void lf__sqr2(float x, float *hi, float *lo)
{
    float xh = lf__i2f(lf__f2i(x) & (int32_t)0xfffff000u);
    float xl = x - xh;
    float h = x * x;
    *hi = h;
    *lo = ((xh * xh - h) + 2.0f * xh * xl) + xl * xl;
}

static inline float lf_erff(float x)
{
    float t = fabsf(x);
    float tc = t < 6.0f ? t : 6.0f;                 /* erf(6) == 1 in float */
    float hi, lo;
    lf__sqr2(tc, &hi, &lo);
    float e2 = lf__exp_core(-hi, -lo, 0);           /* exp(-t^2) */
    float big = 1.0f - lf__erfc_tail(tc, e2);
    float r = t >= 0.75f ? big : lf__erf_small(t);  /* nan -> small -> nan */
    return lf__withsign(r, x);
}

/* gelu(x) = 0.5 x (1 + erf(x/sqrt2)) = 0.5 x erfc(-x/sqrt2) */
static inline float lf_geluf(float x)
{
    float ax = fabsf(x);
    float t = ax * 0.707106781186547524f;           /* |x|/sqrt2 */
    float axc = ax < 20.0f ? ax : 20.0f;
    float hi, lo;
    lf__sqr2(axc, &hi, &lo);                        /* x^2 = hi + lo */
    /* exp(-x^2/2) * 2^64 (scaled so the far tail keeps full precision) */
    float e2 = lf__exp_core(-0.5f * hi, -0.5f * lo, 64);
    float tc = t < 10.5f ? t : 10.5f;
    float cs = lf__erfc_tail(tc, e2);               /* erfc(t) * 2^64 */
    float a = lf__erf_small(t);                     /* erf(t), t < 0.75 */
    float hx = 0.5f * x;
    float pos = t < 0.75f ? 1.0f + a : 2.0f - cs * 0x1p-64f;
    float neg = t < 0.75f ? hx * (1.0f - a) : (hx * cs) * 0x1p-64f;
    float r = x >= 0.0f ? hx * pos : neg;           /* gelu(-inf) = nan */
    return x != x ? x : r;
}

/* ------------------------------------------------------------------ */
/* sin, cos                                                            */
/* ------------------------------------------------------------------ */
/* sin(x) (qoff = 0) or cos(x) (qoff = 1).  k = rint(x*2/pi) and
 * r = x - k*pi/2 are computed in double with pi/2 split in 24 + 24 + 53
 * bits, so k*P1 and k*P2 are exact for |k| < 2^29. */
static inline float lf__sincos(float x, int32_t qoff)
{
    float ax = fabsf(x);
    /* clamp |x| (and inf, nan) to 2^40 so that every intermediate stays in
     * range (results are inaccurate there anyway; inf/nan fixed at the end) */
    float xs = ax <= 0x1p40f ? x : lf__withsign(0x1p40f, x);
    double xd = (double)xs;
    double kd = lf__rint(xd * 0.63661977236758134308);
    double r = xd - kd * 1.5707963705062866;        /* 24 bits */
    r = r - kd * -4.3711388286737929e-08;           /* next 24 bits */
    r = r - kd * -1.7151244994428829e-15;           /* rest */
    double qd = kd - 4.0 * lf__rint(kd * 0.25);     /* k mod 4 in [-2, 2] */
    int32_t q = ((int32_t)qd + qoff) & 3;
    float rf = (float)r;
    float rl = (float)(r - (double)rf);
    /* a no-op for |x| < 8e8; keeps results in [-1, 1] when the reduction
     * degrades for huge |x| */
    rf = rf < 1.0f ? rf : 1.0f;
    rf = rf > -1.0f ? rf : -1.0f;
    float z = rf * rf;
    float ps = -1.9515295891e-4f;
    ps = ps * z + 8.3321608736e-3f;
    ps = ps * z - 1.6666654611e-1f;
    float s = ps * z * rf + rl + rf;
    float pc = 2.443315711809948e-5f;
    pc = pc * z - 1.388731625493765e-3f;
    pc = pc * z + 4.166664568298827e-2f;
    float c = (pc * z * z - rf * rl) - 0.5f * z + 1.0f;
    float v = (q & 1) ? c : s;
    v = (q & 2) ? -v : v;
    return ax <= 0x1.fffffep127f ? v : x - x;       /* inf, nan -> nan */
}

static inline float lf_sinf(float x)
{
    float r = lf__sincos(x, 0);
    return x == 0.0f ? x : r;                       /* sin(-0) = -0 */
}

static inline float lf_cosf(float x) { return lf__sincos(x, 1); }

#endif /* LAZYFUSE_C_MATH_H */

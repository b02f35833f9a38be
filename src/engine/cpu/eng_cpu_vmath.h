/* eng_cpu_vmath: e^x, erf and the sigmoid in branch-free float arithmetic,
 * for the CPU kernels' elementwise loops.
 *
 * Why: a libm call per element keeps GCC from vectorising the loop around
 * it, and the elementwise activations then cost more than they should --
 * erff was 12% of a MiniLM forward, expf 8% of its attention at 64 tokens,
 * and tanhf (through its expm1f) 14% of an EmbeddingGemma-300m forward on
 * 2 threads (perf, 2026-12-07).  Written with selects GCC if-converts and
 * no calls, these inline into `omp simd` loops and run 8 or 16 lanes wide
 * in the kernels' AVX2 / AVX-512 clones (ENG_CPU_CLONES).
 *
 * Accuracy (tests/unit/test_cpu_kernels.c holds each to a double
 * reference): e^x max relative error 7.4e-8 (1.24 ulp); erf max absolute
 * error 3.9e-7 (libm erff: ~1e-7); the sigmoid and the activations built
 * on it inherit e^x's relative error, far below the 1e-5 the engine's
 * 0.99999-cosine bar leaves.
 */
#ifndef ENG_CPU_VMATH_H
#define ENG_CPU_VMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* e^x for x in [-87, 88] (clamped there: e^-87 ~ 1.6e-38, not a
 * subnormal; e^88 ~ 1.7e38, finite).  x = n ln2 + r with |r| <= ln2/2 (n
 * rounded by the 1.5*2^23 trick, ln2 split in two so n*ln2_hi is exact),
 * e^r by its degree-7 Taylor polynomial (truncation < 1.3e-8 relative),
 * 2^n built in the exponent bits (n <= 127 at x <= 88). */
static inline float eng_vexp(float x) {
    x = x > -87.0f ? x : -87.0f;
    x = x < 88.0f ? x : 88.0f;
    const float magic = 12582912.0f;
    float n = (x * 1.44269504088896341f + magic) - magic;
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.42860682030941723212e-6f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* 1 / (1 + e^-x), with e^-x clamped as eng_vexp does: exactly 1 above 87,
 * ~6e-39 (not 0) below -88 */
static inline float eng_vsigmoid(float x) { return 1.0f / (1.0f + eng_vexp(-x)); }

/* erf(z) as z P(z^2) / Q(z^2) for |z| <= 4, +-1 beyond.  Coefficients and
 * the error bound come from tests/gen/fit_erf.py. */
static inline float eng_verf(float z) {
    /* min(|z|, 4) on the bit pattern: for non-negative floats it orders like
     * the value, and GCC if-converts the integer select where it will not
     * convert the float one (trapping-math); NaN maps to 4, x keeps it. */
    float a = fabsf(z);
    uint32_t bits;
    memcpy(&bits, &a, sizeof bits);
    bits = bits < 0x40800000u ? bits : 0x40800000u;
    memcpy(&a, &bits, sizeof a);
    float t = a * a;
    float p = -1.151759998e-08f;
    p = p * t + 4.380848569e-06f;
    p = p * t + 3.673508095e-04f;
    p = p * t + 3.768489336e-03f;
    p = p * t + 5.390364769e-02f;
    p = p * t + 1.840332003e-01f;
    p = p * t + 1.128379177e+00f;
    float q = 6.024465402e-05f;
    q = q * t + 1.274649158e-03f;
    q = q * t + 1.525683006e-02f;
    q = q * t + 1.132462904e-01f;
    q = q * t + 4.964286787e-01f;
    q = q * t + 1.0f;
    float r = a * p / q;
    r = r < 1.0f ? r : 1.0f;
    return copysignf(r, z); /* not a ?: on z's sign, which keeps GCC from vectorising */
}

/* The activations: exact GELU 0.5 x (1 + erf(x / sqrt 2)); GELU's tanh form
 * 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as the
 * identical x sigmoid(2u) (no cancellation in 1 + tanh(u) for u << 0);
 * SiLU x sigmoid(x). */
static inline float eng_vgelu(float x) { return 0.5f * x * (1.0f + eng_verf(x * 0.70710678118654752440f)); }
static inline float eng_vgelu_tanh(float x) {
    return x * eng_vsigmoid(1.5957691216057308f * (x + 0.044715f * x * x * x)); /* 2 sqrt(2/pi) */
}
static inline float eng_vsilu(float x) { return x * eng_vsigmoid(x); }

#endif

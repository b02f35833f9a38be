/* gw_float: see gw_float.h.
 *
 * Why 9 digits through a double is exact enough: a float32 f with decimal
 * exponent k is written as N * 10^(k-8) with N = round(f * 10^(8-k)), a
 * 9-digit integer.  Correct rounding would put the decimal within half a
 * unit of the 9th digit of f, i.e. within 5e-9 * |f|.  Our product carries
 * at most ~3 double roundings (power-of-ten table entry, multiply, +0.5),
 * a relative error near 1e-16, so the decimal we print is within
 * (5e-9 + 1e-15) * |f| of f.  The interval of reals that parse back to f
 * extends at least 2^-25 ~ 2.98e-8 * |f| on each side (a quarter ulp below
 * powers of two: still 1.49e-8 * |f|), so the output always parses back to
 * f.  The unit test checks this on millions of random bit patterns.
 */
#include "gw_float.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "base64 embeddings assume a little-endian host");

/* 10^i for i = -46 .. 54, as the compiler rounds the literals (correctly). */
static const double p10_tab[] = {
1e-46, 1e-45, 1e-44, 1e-43, 1e-42, 1e-41, 1e-40, 1e-39, 1e-38, 1e-37, 1e-36, 1e-35, 1e-34, 1e-33, 1e-32, 1e-31, 1e-30, 1e-29, 1e-28, 1e-27, 1e-26, 1e-25, 1e-24, 1e-23, 1e-22, 1e-21, 1e-20, 1e-19, 1e-18, 1e-17, 1e-16, 1e-15, 1e-14, 1e-13, 1e-12, 1e-11, 1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31, 1e32, 1e33, 1e34, 1e35, 1e36, 1e37, 1e38, 1e39, 1e40, 1e41, 1e42, 1e43, 1e44, 1e45, 1e46, 1e47, 1e48, 1e49, 1e50, 1e51, 1e52, 1e53, 1e54
};
#define P10(i) p10_tab[(i) + 46]

static const char digit_pairs[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";

/* floor(e * log10(2)) for |e| < 1650 (exact over that range). */
static inline int floor_log10_pow2(int e) { return (e * 78913) >> 18; }

/* The 8 low decimal digits of lo (< 10^8) as ASCII in one little-endian
 * word, first digit in the lowest byte: constant divisions only (the
 * compiler turns them into multiplies), no loop, and the result stays in a
 * register (building digits with byte stores and reading them back as a
 * word stalls on store forwarding). */
static inline uint64_t digits8(uint32_t lo) {
    uint32_t a = lo / 10000u, b = lo - a * 10000u;
    uint32_t a1 = a / 100u, a2 = a - a1 * 100u, b1 = b / 100u, b2 = b - b1 * 100u;
    uint16_t p1, p2, p3, p4;
    memcpy(&p1, digit_pairs + 2 * a1, 2);
    memcpy(&p2, digit_pairs + 2 * a2, 2);
    memcpy(&p3, digit_pairs + 2 * b1, 2);
    memcpy(&p4, digit_pairs + 2 * b2, 2);
    return (uint64_t)p1 | (uint64_t)p2 << 16 | (uint64_t)p3 << 32 | (uint64_t)p4 << 48;
}

/* The formatter proper.  It may store up to 16 bytes past `out` (fixed-size
 * copies are cheaper than exact ones) but returns the true length. */
__attribute__((noinline)) static int fmt_core(float f, char *out) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    char *p = out;
    uint32_t a = bits & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        memcpy(out, "null", 4);
        return 4;
    }
    *p = '-';                 /* branch-free sign: embeddings are half negative */
    p += bits >> 31;
    if (a == 0) {
        memcpy(p, "0.0", 3);
        return (int)(p - out) + 3;
    }
    float af;
    memcpy(&af, &a, 4);
    double v = af;
    uint64_t db;
    memcpy(&db, &v, 8);
    int k = floor_log10_pow2((int)((db >> 52) & 0x7ff) - 1023);
    k += v >= P10(k + 1);     /* a compare, not a branch: k is now floor(log10 v) */
    uint32_t n = (uint32_t)(v * P10(8 - k) + 0.5);
    /* Rounding can still carry into a 10th digit (9.999999999e-3 -> 10^-2),
     * or the table compare can be off where v is within a double ulp of a
     * power of ten; both are rare, so these branches predict well. */
    if (n >= 1000000000u) {
        k++;
        n = (uint32_t)(v * P10(8 - k) + 0.5);
    } else if (n < 100000000u) {
        k--;
        n = (uint32_t)(v * P10(8 - k) + 0.5);
    }
    uint32_t hi = n / 100000000u;
    char d0 = (char)('0' + hi);
    uint64_t lo8 = digits8(n - hi * 100000000u);
    /* Significant digits: 9 minus the trailing '0' bytes (the high bytes). */
    uint64_t z = lo8 ^ 0x3030303030303030ull;
    int m = z ? 9 - (__builtin_clzll(z) >> 3) : 1;
    if (k < 0 && k >= -4) {          /* 0.000ddd: the common case for embeddings */
        memcpy(p, "0.000", 5);
        p += 1 - k;
        *p = d0;
        memcpy(p + 1, &lo8, 8);
        p += m;
        return (int)(p - out);
    }
    char d[24];   /* 9 digits; the slack lets the fixed-size copies below stay in bounds */
    d[0] = d0;
    memcpy(d + 1, &lo8, 8);
    if (0) {
    } else if (k >= 0 && k <= 8) {   /* ddd.ddd or ddd000.0 */
        if (m <= k + 1) {
            memcpy(p, d, 9);
            p += m;
            for (int i = m; i <= k; i++) *p++ = '0';
            *p++ = '.';
            *p++ = '0';
        } else {
            memcpy(p, d, 9);
            memcpy(p + k + 2, d + k + 1, 8);
            p[k + 1] = '.';
            p += m + 1;
        }
    } else {                          /* d.ddde-XX, as Python's repr */
        *p++ = d[0];
        *p = '.';
        memcpy(p + 1, d + 1, 8);
        p += m > 1 ? m : 0;
        *p++ = 'e';
        *p++ = k < 0 ? '-' : '+';
        int ek = k < 0 ? -k : k;
        memcpy(p, digit_pairs + 2 * ek, 2);
        p += 2;
    }
    return (int)(p - out);
}

/* The common case for embedding values, 1e-4 <= |f| < 1, written for
 * inlining into the array loop (no call, no stack frame, branch-free k);
 * returns -1 without writing for anything else, which fmt_core handles.
 * Thresholds are the smallest floats >= 10^-1, 10^-2, 10^-3, 10^-4 as bit
 * patterns (positive floats order like their bits). */
#define GW_F_1E_1 0x3dcccccdu
#define GW_F_1E_2 0x3c23d70bu
#define GW_F_1E_3 0x3a83126fu
#define GW_F_1E_4 0x38d1b718u
#define GW_F_ONE 0x3f800000u

static inline __attribute__((always_inline)) int fmt_fast(float f, char *out) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint32_t a = bits & 0x7fffffffu;
    if (a - GW_F_1E_4 >= GW_F_ONE - GW_F_1E_4) return -1;
    int k = -4 + (a >= GW_F_1E_3) + (a >= GW_F_1E_2) + (a >= GW_F_1E_1);
    float af;
    memcpy(&af, &a, 4);
    uint32_t n = (uint32_t)((double)af * P10(8 - k) + 0.5);
    if (n - 100000000u >= 900000000u) return -1;   /* rounding carried: rare */
    uint32_t hi = n / 100000000u;
    uint64_t lo8 = digits8(n - hi * 100000000u);
    uint64_t z = lo8 ^ 0x3030303030303030ull;
    int m = z ? 9 - (__builtin_clzll(z) >> 3) : 1;
    char *p = out;
    *p = '-';
    p += bits >> 31;
    memcpy(p, "0.000", 5);
    p += 1 - k;
    *p = (char)('0' + hi);
    memcpy(p + 1, &lo8, 8);
    return (int)(p + m - out);
}

int gw_float_fmt(float f, char *out) {
    char tmp[32];
    int n = fmt_core(f, tmp);
    memcpy(out, tmp, (size_t)n);
    return n;
}

/* One float and its comma, whichever path formats it. */
static inline char *put_scalar(char *p, float f) {
    int len = fmt_fast(f, p);
    p += len >= 0 ? len : fmt_core(f, p);
    *p++ = ',';
    return p;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GW_FLOAT_AVX2 1

/* The AVX2 path's constants, in one table read through a pointer the
 * compiler cannot see into (the empty asm in floats_avx2): they become
 * memory operands.  Written as _mm256_set1_* GCC rebuilds each one with a
 * move and a broadcast on every iteration, loading the shuffle port that
 * the record packing needs. */
#define GW_V64(x) {(long long)(x), (long long)(x), (long long)(x), (long long)(x)}
#define GW_V32(x) GW_V64((uint64_t)(uint32_t)(x) * 0x100000001ull)
#define GW_V16(x) GW_V64((uint64_t)(uint16_t)(x) * 0x0001000100010001ull)
#define GW_V8(x) GW_V64((uint64_t)(uint8_t)(x) * 0x0101010101010101ull)
enum {
    K_ABS, K_ONE, K_T4, K_T3, K_T2, K_T1, K_NMIN, K_NMAX, K_HALF, K_SCALES, K_HIHALF, K_3, K_4, K_8,
    K_D1E8, K_1E8, K_D1E4, K_1E4, K_5243, K_100, K_6554, K_10, K_3030, K_ZERO32, K_HEAD, K_COMMA, K_ZERO8, K_ONE8,
    K_COUNT
};
static const __m256i gw_kv[K_COUNT] = {
    [K_ABS] = GW_V32(0x7fffffff), [K_ONE] = GW_V32(GW_F_ONE),
    [K_T4] = GW_V32(GW_F_1E_4 - 1), [K_T3] = GW_V32(GW_F_1E_3 - 1), [K_T2] = GW_V32(GW_F_1E_2 - 1),
    [K_T1] = GW_V32(GW_F_1E_1 - 1), [K_NMIN] = GW_V32(100000000 - 1), [K_NMAX] = GW_V32(1000000000),
    [K_HALF] = GW_V64(0x3fe0000000000000ull),   /* 0.5 */
    /* 10^9 .. 10^12 (exact doubles) as eight 32-bit halves, picked per lane with one permute */
    [K_SCALES] = {0x41cdcd6500000000ll, 0x4202a05f20000000ll, 0x42374876e8000000ll, 0x426d1a94a2000000ll},
    [K_HIHALF] = GW_V64(1ull << 32), [K_3] = GW_V32(3), [K_4] = GW_V32(4), [K_8] = GW_V32(8),
    [K_D1E8] = GW_V64(1441151881u), [K_1E8] = GW_V32(100000000), [K_D1E4] = GW_V64(3518437209u),
    [K_1E4] = GW_V32(10000), [K_5243] = GW_V16(5243), [K_100] = GW_V16(100), [K_6554] = GW_V16(6554),
    [K_10] = GW_V16(10), [K_3030] = GW_V16(0x3030), [K_ZERO32] = GW_V32('0'),
    [K_HEAD] = GW_V64(0x3030302e302dull),   /* "-0.000" */
    [K_COMMA] = GW_V64((uint64_t)',' << 56), [K_ZERO8] = GW_V8('0'), [K_ONE8] = GW_V8(1),
};

/* x / d for eight 32-bit lanes, as (x * m) >> sh on the even and odd
 * lanes' 64-bit products (the scalar code's constant divisions). */
__attribute__((target("avx2"))) static inline __m256i div8(__m256i x, __m256i mm, int sh) {
    __m256i e = _mm256_srli_epi64(_mm256_mul_epu32(x, mm), sh);
    __m256i o = _mm256_srli_epi64(_mm256_mul_epu32(_mm256_srli_epi64(x, 32), mm), sh);
    return _mm256_or_si256(e, _mm256_slli_epi64(o, 32));
}

/* Two ASCII digits (tens in the low byte) of each 16-bit lane y < 100:
 * (y * 6554) >> 16 == y / 10 for y < 100. */
__attribute__((target("avx2"))) static inline __m256i pairs16(const __m256i *K, __m256i y) {
    __m256i t = _mm256_mulhi_epu16(y, K[K_6554]);
    __m256i o = _mm256_sub_epi16(y, _mm256_mullo_epi16(t, K[K_10]));
    return _mm256_add_epi16(_mm256_or_si256(t, _mm256_slli_epi16(o, 8)), K[K_3030]);
}

/* Digits of eight 9-digit integers n (32-bit lanes): the first digit as
 * ASCII in d0 (32-bit lanes), the other eight as ASCII words (first digit
 * lowest) in 64-bit lanes, floats {0,1,4,5} in *wl and {2,3,6,7} in *wh
 * (the order of the 32 -> 64-bit unpacks).  n = d0 * 10^8 + a * 10^4 + b;
 * a and b split by 100 in 16-bit lanes, then by 10. */
__attribute__((target("avx2"))) static inline __m256i digits8x(const __m256i *K, __m256i n, __m256i *wl, __m256i *wh) {
    __m256i hi = div8(n, K[K_D1E8], 57);
    __m256i lo = _mm256_sub_epi32(n, _mm256_mullo_epi32(hi, K[K_1E8]));
    __m256i a = div8(lo, K[K_D1E4], 45);
    __m256i b = _mm256_sub_epi32(lo, _mm256_mullo_epi32(a, K[K_1E4]));
    __m256i v = _mm256_or_si256(a, _mm256_slli_epi32(b, 16));                   /* a, b: 16-bit lanes < 10^4 */
    __m256i q = _mm256_srli_epi16(_mm256_mulhi_epu16(v, K[K_5243]), 3);   /* x / 100 */
    __m256i r = _mm256_sub_epi16(v, _mm256_mullo_epi16(q, K[K_100]));
    *wl = pairs16(K, _mm256_unpacklo_epi16(q, r));   /* per float: a/100, a%100, b/100, b%100 */
    *wh = pairs16(K, _mm256_unpackhi_epi16(q, r));
    return _mm256_add_epi32(hi, K[K_ZERO32]);
}

/* Every fast-path float fits one 16-byte record "-0.000Dddddddd," (sign,
 * "0.", three zeros, the nine digits, the comma); its text is that record
 * with some bytes left out: the sign when positive, 3 - z of the zeros
 * (z = -k - 1 leading zeros after the point) and the t trailing '0' digits.
 * One pshufb with a tabulated mask per (sign, z, t) packs the kept bytes to
 * the front, and one unaligned 16-byte store writes them; the next float's
 * store overwrites the slack. */
#define GW_NREC (2 * 4 * 9)
static uint8_t rec_shuf[GW_NREC][16] __attribute__((aligned(16)));

static void build_rec_tables(void) {
    for (int neg = 0; neg < 2; neg++)
        for (int z = 0; z < 4; z++)
            for (int t = 0; t < 9; t++) {
                int i = (neg * 4 + z) * 9 + t, n = 0;
                uint8_t *m = rec_shuf[i];
                if (neg) m[n++] = 0;
                m[n++] = 1;
                m[n++] = 2;
                for (int j = 0; j < z; j++) m[n++] = (uint8_t)(3 + j);
                for (int j = 0; j < 9 - t; j++) m[n++] = (uint8_t)(6 + j);
                m[n++] = 15;
                while (n < 16) m[n++] = 0x80;
            }
}

/* The four records of 64-bit-lane digit words w and first digits d0
 * (64-bit lanes), in memory at r[0..1] (two floats each: lanes 0, 2 | 1, 3),
 * and the count c of digits after the first that are kept (8 minus the
 * trailing '0's, found by smearing the nonzero-digit bytes downwards and
 * summing them) in each 64-bit lane. */
__attribute__((target("avx2"))) static inline __m256i records4(const __m256i *K, __m256i w, __m256i d0, __m256i *r) {
    __m256i q0 = _mm256_or_si256(_mm256_or_si256(K[K_HEAD], _mm256_slli_epi64(d0, 48)), _mm256_slli_epi64(w, 56));
    __m256i q1 = _mm256_or_si256(_mm256_srli_epi64(w, 8), K[K_COMMA]);
    _mm256_storeu_si256(r, _mm256_unpacklo_epi64(q0, q1));
    _mm256_storeu_si256(r + 1, _mm256_unpackhi_epi64(q0, q1));
    __m256i nz = _mm256_andnot_si256(_mm256_cmpeq_epi8(w, K[K_ZERO8]), K[K_ONE8]);
    nz = _mm256_or_si256(nz, _mm256_srli_epi64(nz, 8));
    nz = _mm256_or_si256(nz, _mm256_srli_epi64(nz, 16));
    nz = _mm256_or_si256(nz, _mm256_srli_epi64(nz, 32));
    return _mm256_sad_epu8(nz, _mm256_setzero_si256());
}

/* Groups of eight floats that are all in fmt_fast's range (1e-4 <= |f| < 1,
 * no rounding carry) get all their arithmetic done 8 (k, scale) or 4
 * (digits, records) lanes at a time and one shuffle and store per float;
 * any other group goes through the scalar path.  The text is byte-identical
 * to the scalar formatter's (same operations, same double roundings, no
 * FMA); the unit test checks that on millions of floats.  Returns floats
 * consumed. */
__attribute__((target("avx2"))) static size_t floats_avx2(const float *v, size_t n, char **pp) {
    char *p = *pp;
    const __m256i *K = gw_kv;
    __asm__("" : "+r"(K));
    const __m256d half = _mm256_castsi256_pd(K[K_HALF]);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i bits = _mm256_loadu_si256((const __m256i *)(v + i));
        __m256i a = _mm256_and_si256(bits, K[K_ABS]);
        __m256i ok = _mm256_and_si256(_mm256_cmpgt_epi32(a, K[K_T4]), _mm256_cmpgt_epi32(K[K_ONE], a));
        /* z = -k - 1 = 3 - #(thresholds reached) leading zeros; 8 - k = z + 9; compare masks are -1 */
        __m256i z = _mm256_add_epi32(K[K_3],
                                     _mm256_add_epi32(_mm256_cmpgt_epi32(a, K[K_T1]),
                                                      _mm256_add_epi32(_mm256_cmpgt_epi32(a, K[K_T2]), _mm256_cmpgt_epi32(a, K[K_T3]))));
        __m256i z2lo = _mm256_slli_epi64(_mm256_cvtepu32_epi64(_mm256_castsi256_si128(z)), 1);
        __m256i z2hi = _mm256_slli_epi64(_mm256_cvtepu32_epi64(_mm256_extracti128_si256(z, 1)), 1);
        __m256d slo = _mm256_castsi256_pd(_mm256_permutevar8x32_epi32(
            K[K_SCALES], _mm256_add_epi64(_mm256_or_si256(z2lo, _mm256_slli_epi64(z2lo, 32)), K[K_HIHALF])));
        __m256d shi = _mm256_castsi256_pd(_mm256_permutevar8x32_epi32(
            K[K_SCALES], _mm256_add_epi64(_mm256_or_si256(z2hi, _mm256_slli_epi64(z2hi, 32)), K[K_HIHALF])));
        __m256 af = _mm256_castsi256_ps(a);
        __m256d xlo = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(af)), slo), half);
        __m256d xhi = _mm256_add_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(af, 1)), shi), half);
        __m128i nlo = _mm256_cvttpd_epi32(xlo), nhi = _mm256_cvttpd_epi32(xhi);
        __m256i nn = _mm256_set_m128i(nhi, nlo);
        ok = _mm256_and_si256(ok, _mm256_and_si256(_mm256_cmpgt_epi32(nn, K[K_NMIN]), _mm256_cmpgt_epi32(K[K_NMAX], nn)));
        if (_mm256_movemask_ps(_mm256_castsi256_ps(ok)) != 0xff) {   /* a slow lane: all scalar */
            for (int j = 0; j < 8; j++) p = put_scalar(p, v[i + j]);
            continue;
        }
        __m256i wl, wh, r[4];
        __m256i d0 = digits8x(K, nn, &wl, &wh);
        __m256i cl = records4(K, wl, _mm256_unpacklo_epi32(d0, _mm256_setzero_si256()), r);
        __m256i ch = records4(K, wh, _mm256_unpackhi_epi32(d0, _mm256_setzero_si256()), r + 2);
        __m256i c = _mm256_packus_epi32(cl, ch);   /* back to the floats' order, 32-bit lanes */
        /* table row (neg * 4 + z) * 9 + 8 - c; length neg + z + 4 + c */
        __m256i neg = _mm256_srli_epi32(bits, 31), nzz = _mm256_add_epi32(_mm256_slli_epi32(neg, 2), z);
        __m256i row = _mm256_sub_epi32(_mm256_add_epi32(_mm256_slli_epi32(nzz, 3), nzz), c);
        int32_t off[8], len[8];
        _mm256_storeu_si256((__m256i *)off, _mm256_slli_epi32(_mm256_add_epi32(row, K[K_8]), 4));
        _mm256_storeu_si256((__m256i *)len, _mm256_add_epi32(_mm256_add_epi32(neg, z), _mm256_add_epi32(c, K[K_4])));
        __asm__("" : "+m"(off), "+m"(len));   /* read back as loads, not 2-uop lane extracts */
        const char *rb = (const char *)r;
        static const int at[8] = {0, 32, 64, 96, 16, 48, 80, 112};   /* float j's record in r */
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m128i x = _mm_loadu_si128((const __m128i *)(rb + at[j]));
            _mm_storeu_si128((__m128i *)p, _mm_shuffle_epi8(x, _mm_load_si128((const __m128i *)(rec_shuf[0] + off[j]))));
            p += len[j];
        }
    }
    *pp = p;
    return i;
}
#endif

static atomic_int simd_mode = -1;   /* -1 unknown, 0 scalar, 1 AVX2 */

#ifdef GW_FLOAT_AVX2
static pthread_once_t simd_once = PTHREAD_ONCE_INIT;
static void simd_init(void) {
    build_rec_tables();
    atomic_store_explicit(&simd_mode, __builtin_cpu_supports("avx2") ? 1 : 0, memory_order_release);
}
#endif

void gw_float_force_scalar(int on) {
#ifdef GW_FLOAT_AVX2
    pthread_once(&simd_once, simd_init);
    atomic_store(&simd_mode, on ? 0 : __builtin_cpu_supports("avx2") ? 1 : 0);
#else
    (void)on;
#endif
}

void gw_json_floats(gw_buf *b, const float *v, size_t n) {
    /* The formatters may store 16 bytes past their output: keep that slack at the end. */
    char *w = gw_buf_reserve(b, n * (GW_FLOAT_MAX + 1) + 2 + 16);
    if (!w) return;
    char *p = w;
    *p++ = '[';
    size_t i = 0;
#ifdef GW_FLOAT_AVX2
    int mode = atomic_load_explicit(&simd_mode, memory_order_acquire);   /* tables built before it is set */
    if (mode < 0) {
        pthread_once(&simd_once, simd_init);
        mode = atomic_load(&simd_mode);
    }
    if (mode == 1) i = floats_avx2(v, n, &p);
#endif
    for (; i < n; i++) p = put_scalar(p, v[i]);
    if (n) p--;
    *p++ = ']';
    b->len += (size_t)(p - w);
}

static const char b64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t gw_base64(const void *src, size_t n, char *dst) {
    const unsigned char *s = src;
    char *p = dst;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t t = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        p[0] = b64_alphabet[t >> 18];
        p[1] = b64_alphabet[(t >> 12) & 63];
        p[2] = b64_alphabet[(t >> 6) & 63];
        p[3] = b64_alphabet[t & 63];
        p += 4;
    }
    if (i < n) {
        uint32_t t = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        p[0] = b64_alphabet[t >> 18];
        p[1] = b64_alphabet[(t >> 12) & 63];
        p[2] = i + 1 < n ? b64_alphabet[(t >> 6) & 63] : '=';
        p[3] = '=';
        p += 4;
    }
    return (size_t)(p - dst);
}

void gw_json_base64_floats(gw_buf *b, const float *v, size_t n) {
    size_t bytes = n * sizeof(float);
    char *w = gw_buf_reserve(b, (bytes + 2) / 3 * 4 + 2);
    if (!w) return;
    w[0] = '"';
    /* posy targets little-endian hosts (x86-64, aarch64): the in-memory bytes
     * are the wire format. */
    size_t len = gw_base64(v, bytes, w + 1);
    w[len + 1] = '"';
    b->len += len + 2;
}

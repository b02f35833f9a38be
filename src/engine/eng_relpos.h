/* eng_relpos: MPNet's relative position bias, as one table per head.
 *
 * MPNet adds to every attention score a learned bias that depends only on
 * the key's position minus the query's, through T5-style buckets: 32 of
 * them, 16 per direction, distances 0-7 exact, then logarithmic up to 128,
 * beyond which one bucket.  transformers computes the log in float32;
 * here the same bucket comes from integer arithmetic (8 + the largest k
 * with 64 * 2^k <= n^2), which is exact at the powers of two where the
 * float formula lands on an integer and agrees everywhere else
 * (test_relpos checks every distance to 600 against torch's output).
 *
 * Backends expand the [buckets, heads] weight once into a row per head
 * indexed by the distance itself, so the attention inner loop does one
 * load per score: row[key - query] with row pointing at distance 0.  T5's
 * encoder takes the same buckets; JinaBERT's ALiBi (a slope per head times
 * the distance, no weights) fills the same table (eng_alibi_expand).
 */
#ifndef ENG_RELPOS_H
#define ENG_RELPOS_H

#include <math.h>
#include <stddef.h>

#define ENG_RELPOS_BUCKETS 32

/* The bucket of distance rel = key position - query position. */
static inline int eng_relpos_bucket(int rel) {
    long long n = -(long long)rel;
    int ret = 0;
    if (n < 0) {
        ret = ENG_RELPOS_BUCKETS / 2;
        n = -n;
    }
    if (n < 8) return ret + (int)n;
    /* 8 + floor(8 * log(n / 8) / log(16)) = 8 + floor(log2(n^2 / 64)),
     * capped at the direction's last bucket (15) */
    const long long sq = n * n;
    int k = 0;
    while (k < 7 && (64LL << (k + 1)) <= sq) k++;
    return ret + 8 + k;
}

/* An expanded table: for head h and distance r in [-(max_len-1), max_len-1],
 * tab[h * eng_relpos_span(max_len) + (max_len - 1) + r]. */
typedef struct eng_relpos {
    const float *tab;
    int max_len;
} eng_relpos;

static inline size_t eng_relpos_span(int max_len) { return 2 * (size_t)max_len - 1; }

/* Head h's row, pointing at distance 0. */
static inline const float *eng_relpos_row(const eng_relpos *r, int h) {
    return r->tab + (size_t)h * eng_relpos_span(r->max_len) + (size_t)(r->max_len - 1);
}

/* Fill out (heads * eng_relpos_span(max_len) floats) from the model's
 * weight [ENG_RELPOS_BUCKETS, heads], each value times mul (the CUDA
 * kernels fold the softmax scale in; the CPU passes 1).  Inline, like the
 * bucket, so the CUDA library and the labs use the same code without
 * linking the C engine. */
static inline void eng_relpos_expand(float *out, const float *weight, int heads, int max_len, float mul) {
    const size_t span = eng_relpos_span(max_len);
    for (int h = 0; h < heads; h++)
        for (int r = -(max_len - 1); r <= max_len - 1; r++)
            out[(size_t)h * span + (size_t)(r + max_len - 1)] = weight[(size_t)eng_relpos_bucket(r) * heads + h] * mul;
}

/* ALiBi (JinaBERT v2): head h's slope of n, as ALiBi's reference code and
 * jina-bert's _get_alibi_head_slopes give it: n a power of two, 2^(-8 (h +
 * 1) / n); otherwise the slopes of the power of two p below n, then every
 * other slope of 2p (2^(-4 (2j + 1) / p), j = h - p). */
static inline double eng_alibi_slope(int n, int h) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    if (h < p) return pow(2.0, -8.0 * (h + 1) / p);
    return pow(2.0, -8.0 * (2 * (h - p) + 1) / (2.0 * p));
}

/* ALiBi as an expanded table (the layout above): -slope_h |r| in float32,
 * the product the reference forms (a float32 slope times the distance). */
static inline void eng_alibi_expand(float *out, int heads, int max_len) {
    const size_t span = eng_relpos_span(max_len);
    for (int h = 0; h < heads; h++) {
        const float s = -(float)eng_alibi_slope(heads, h);
        for (int r = -(max_len - 1); r <= max_len - 1; r++)
            out[(size_t)h * span + (size_t)(r + max_len - 1)] = s * (float)(r < 0 ? -r : r);
    }
}

#endif

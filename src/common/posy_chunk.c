/* posy_chunk: windows over an over-long input and the weighted mean of
 * their embeddings (posy_chunk.h states the exact definition).  Sums are
 * taken in double so the result does not depend on the number of windows
 * beyond float rounding of the inputs. */
#include "posy_chunk.h"

#include <math.h>
#include <string.h>

void posy_chunk_specials(const uint8_t *m, int n, int *n_prefix, int *n_suffix) {
    int p = 0, s = 0;
    if (m) {
        while (p < n && m[p]) p++;
        while (s < n - p && m[n - 1 - s]) s++;
    }
    *n_prefix = p;
    *n_suffix = s;
}

int posy_chunk_count(int n, int n_prefix, int n_suffix, int max_len) {
    int sp = n_prefix + n_suffix, W = max_len - sp;
    if (n_prefix < 0 || n_suffix < 0 || W < 1 || n < sp) return -1;
    int content = n - sp;
    return content <= W ? 1 : (content + W - 1) / W;
}

size_t posy_chunk_total_tokens(int n, int n_prefix, int n_suffix, int max_len) {
    int k = posy_chunk_count(n, n_prefix, n_suffix, max_len);
    return k < 1 ? 0 : (size_t)n + (size_t)(k - 1) * (size_t)(n_prefix + n_suffix);
}

int posy_chunk_split(const int32_t *ids, int n, int n_prefix, int n_suffix, int max_len, int32_t *out_ids,
                     size_t out_cap, int32_t *cu, int cu_cap) {
    int k = posy_chunk_count(n, n_prefix, n_suffix, max_len);
    if (k < 1 || cu_cap < k + 1 || out_cap < posy_chunk_total_tokens(n, n_prefix, n_suffix, max_len)) return -1;
    int W = max_len - n_prefix - n_suffix, content = n - n_prefix - n_suffix;
    const int32_t *body = ids + n_prefix, *suffix = ids + n - n_suffix;
    size_t at = 0;
    cu[0] = 0;
    for (int w = 0; w < k; w++) {
        int start = w * W, len = content - start < W ? content - start : W;
        memcpy(out_ids + at, ids, sizeof(int32_t) * (size_t)n_prefix);
        at += (size_t)n_prefix;
        memcpy(out_ids + at, body + start, sizeof(int32_t) * (size_t)len);
        at += (size_t)len;
        memcpy(out_ids + at, suffix, sizeof(int32_t) * (size_t)n_suffix);
        at += (size_t)n_suffix;
        cu[w + 1] = (int32_t)at;
    }
    return k;
}

void posy_chunk_combine(const float *emb, const int32_t *cu, int k, int dim, int normalize, float *out) {
    double total = 0, ss = 0;
    for (int w = 0; w < k; w++) total += cu[w + 1] - cu[w];
    for (int i = 0; i < dim; i++) {
        double acc = 0;
        for (int w = 0; w < k; w++) acc += (double)(cu[w + 1] - cu[w]) * emb[(size_t)w * dim + i];
        double v = total > 0 ? acc / total : 0.0;
        out[i] = (float)v;
        ss += v * v;
    }
    if (normalize && ss > 0) {
        double inv = 1.0 / sqrt(ss);
        for (int i = 0; i < dim; i++) out[i] = (float)(out[i] * inv);
    }
}

/* eng_cpu_ref: the reference versions of the CPU kernels (eng_cpu_kernels.h).
 *
 * These are the oracle the fast kernels, and through them the CUDA kernels,
 * are tested against, so they are written to be obviously right rather than
 * fast: one thread, plain loops in the order of the formula, double
 * accumulators for every sum, libm erf/tanh in double.  Nothing here is on
 * the engine's hot path.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "eng_cpu_kernels.h"

/* LayerNorm of one row held in double, written to float. */
static void ref_ln_row(float *y, const double *v, const float *g, const float *b, float eps, int H) {
    double mean = 0, var = 0;
    for (int i = 0; i < H; i++) mean += v[i];
    mean /= H;
    for (int i = 0; i < H; i++) var += (v[i] - mean) * (v[i] - mean);
    var /= H;
    double inv = 1.0 / sqrt(var + (double)eps);
    for (int i = 0; i < H; i++) y[i] = (float)((v[i] - mean) * inv * g[i] + b[i]);
}

void eng_cpu_embed_ref(const eng_cpu_emb *m, const int32_t *ids, const int32_t *type_ids,
                       const int32_t *cu_seqlens, int n_seqs, float *out) {
    int H = m->hidden;
    double *v = malloc(sizeof(double) * (size_t)H);
    if (!v) return;
    for (int s = 0; s < n_seqs; s++) {
        int non_pad = 0;
        for (int t = cu_seqlens[s]; t < cu_seqlens[s + 1]; t++) {
            int p = t - cu_seqlens[s] + m->position_offset;
            if (m->pad_id >= 0) p = ids[t] == m->pad_id ? m->pad_id : m->pad_id + ++non_pad;
            int ty = type_ids ? type_ids[t] : 0;
            for (int i = 0; i < H; i++) {
                double x = (double)m->word[(size_t)ids[t] * H + i] + (m->pos ? (double)m->pos[(size_t)p * H + i] : 0.0);
                if (m->type) x += (double)m->type[(size_t)ty * H + i];
                v[i] = x;
            }
            ref_ln_row(out + (size_t)t * H, v, m->ln_g, m->ln_b, m->eps, H);
        }
    }
    free(v);
}

void eng_cpu_linear_ref(float *y, const float *x, const float *W, const float *b, int M, int N,
                        int K) {
    for (int r = 0; r < M; r++)
        for (int n = 0; n < N; n++) {
            double acc = b ? (double)b[n] : 0.0;
            for (int k = 0; k < K; k++) acc += (double)x[(size_t)r * K + k] * W[(size_t)n * K + k];
            y[(size_t)r * N + n] = (float)acc;
        }
}

void eng_cpu_gelu_ref(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        x[i] = (float)(0.5 * v * (1.0 + erf(v / sqrt(2.0))));
    }
}

void eng_cpu_gelu_tanh_ref(float *x, size_t n) {
    const double c = sqrt(2.0 / M_PI);
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        x[i] = (float)(0.5 * v * (1.0 + tanh(c * (v + 0.044715 * v * v * v))));
    }
}

void eng_cpu_add_layernorm_ref(float *x, const float *res, const float *g, const float *b,
                               float eps, int n_rows, int H) {
    double *v = malloc(sizeof(double) * (size_t)H);
    if (!v) return;
    for (int r = 0; r < n_rows; r++) {
        float *row = x + (size_t)r * H;
        for (int i = 0; i < H; i++) v[i] = (double)row[i] + (res ? (double)res[(size_t)r * H + i] : 0.0);
        ref_ln_row(row, v, g, b, eps, H);
    }
    free(v);
}

void eng_cpu_softmax_ref(float *x, int n) {
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    for (int i = 0; i < n; i++) x[i] = (float)(exp((double)x[i] - mx) / sum);
}

/* One query row of one head: scores in double, max-subtracted softmax,
 * weighted sum of values. */
static void ref_attend_row(float *o, const float *qkv, int first, int n_keys, int q, int h, int H,
                           int d, const float *rel_weight, int n_heads, double *p) {
    size_t ld = 3 * (size_t)H;
    const float *qv = qkv + (size_t)q * ld + (size_t)h * d;
    double scale = 1.0 / sqrt((double)d), mx = -INFINITY, sum = 0;
    for (int j = 0; j < n_keys; j++) {
        const float *kv = qkv + (size_t)(first + j) * ld + H + (size_t)h * d;
        double acc = 0;
        for (int i = 0; i < d; i++) acc += (double)qv[i] * kv[i];
        p[j] = acc * scale;
        if (rel_weight) p[j] += rel_weight[(size_t)eng_relpos_bucket(first + j - q) * n_heads + h];
        if (p[j] > mx) mx = p[j];
    }
    for (int j = 0; j < n_keys; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
    for (int i = 0; i < d; i++) {
        double acc = 0;
        for (int j = 0; j < n_keys; j++)
            acc += p[j] * qkv[(size_t)(first + j) * ld + 2 * (size_t)H + (size_t)h * d + i];
        o[i] = (float)(acc / sum);
    }
}

void eng_cpu_attention_ref(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                           int n_heads, int head_dim, int causal, const float *rel_weight) {
    int H = n_heads * head_dim, longest = 0;
    for (int s = 0; s < n_seqs; s++)
        if (cu_seqlens[s + 1] - cu_seqlens[s] > longest) longest = cu_seqlens[s + 1] - cu_seqlens[s];
    double *p = malloc(sizeof(double) * (size_t)(longest > 0 ? longest : 1));
    if (!p) return;
    for (int s = 0; s < n_seqs; s++) {
        int first = cu_seqlens[s], len = cu_seqlens[s + 1] - first;
        for (int h = 0; h < n_heads; h++)
            for (int i = 0; i < len; i++)
                ref_attend_row(out + (size_t)(first + i) * H + (size_t)h * head_dim, qkv, first,
                               causal ? i + 1 : len, first + i, h, H, head_dim, rel_weight, n_heads, p);
    }
    free(p);
}

void eng_cpu_pool_ref(float *out, const float *x, const int32_t *cu_seqlens, const int32_t *skip, int n_seqs,
                      int H, posy_pooling mode) {
    for (int s = 0; s < n_seqs; s++) {
        int k = skip ? skip[s] : 0;
        int first = cu_seqlens[s] + k, len = cu_seqlens[s + 1] - first;
        for (int i = 0; i < H; i++) {
            double v;
            if (mode == POSY_POOL_CLS) {
                v = x[(size_t)first * H + i];
            } else if (mode == POSY_POOL_LAST) {
                v = x[(size_t)(first + len - 1) * H + i];
            } else {
                v = 0;
                for (int t = first; t < first + len; t++) v += x[(size_t)t * H + i];
                v /= len;
            }
            out[(size_t)s * H + i] = (float)v;
        }
    }
}

void eng_cpu_l2_normalize_ref(float *x, int n_rows, int H) {
    for (int r = 0; r < n_rows; r++) {
        float *row = x + (size_t)r * H;
        double ss = 0;
        for (int i = 0; i < H; i++) ss += (double)row[i] * row[i];
        double n = sqrt(ss);
        if (n < 1e-12) n = 1e-12;
        for (int i = 0; i < H; i++) row[i] = (float)(row[i] / n);
    }
}

/* DeBERTa's attention, one (query, head) at a time in double: the three
 * terms written out as eng_deberta.h states them. */
void eng_cpu_attention_deberta_ref(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs, int n_heads,
                                   int head_dim, const eng_cpu_deb_att *a) {
    const int H = n_heads * head_dim, d = head_dim;
    const size_t ld = 3 * (size_t)H;
    const double scale = 1.0 / sqrt((double)d * a->scale_factor);
    double *p = malloc(sizeof(double) * (size_t)(a->max_len > 0 ? a->max_len : 1));
    if (!p) return;
    for (int s = 0; s < n_seqs; s++) {
        const int first = cu_seqlens[s], len = cu_seqlens[s + 1] - first;
        for (int h = 0; h < n_heads; h++)
            for (int i = 0; i < len; i++) {
                const float *q = qkv + (size_t)(first + i) * ld + (size_t)h * d;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < len; j++) {
                    const float *k = qkv + (size_t)(first + j) * ld + H + (size_t)h * d;
                    const int c = a->idx[a->max_len - 1 + i - j];
                    double acc = 0;
                    for (int x = 0; x < d; x++) {
                        acc += (double)q[x] * k[x];
                        if (a->kr) acc += (double)q[x] * a->kr[(size_t)c * H + (size_t)h * d + x];
                        if (a->qr) acc += (double)k[x] * a->qr[(size_t)c * H + (size_t)h * d + x];
                    }
                    p[j] = acc * scale;
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = 0; j < len; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
                for (int x = 0; x < d; x++) {
                    double acc = 0;
                    for (int j = 0; j < len; j++) acc += p[j] * qkv[(size_t)(first + j) * ld + 2 * (size_t)H + (size_t)h * d + x];
                    out[(size_t)(first + i) * H + (size_t)h * d + x] = (float)(acc / sum);
                }
            }
    }
    free(p);
}

/* eng_cpu_decoder_ref: reference versions of the decoder kernels
 * (eng_cpu_decoder.h).  Obviously right rather than fast: one thread, the
 * formula's own loop order, double accumulators and double libm.  The
 * rotary angle alone is formed in fp32, because the reference model
 * (transformers) defines it so; see eng_cpu_decoder.h.
 */
#include <math.h>
#include <stdlib.h>
#include "eng_cpu_decoder.h"

static void ref_rms_row(float *y, const float *x, const float *g, float eps, int H) {
    double ss = 0;
    for (int i = 0; i < H; i++) ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / H + (double)eps);
    for (int i = 0; i < H; i++) y[i] = (float)((double)x[i] * inv * g[i]);
}

void eng_cpu_rmsnorm_ref(float *y, const float *x, const float *g, float eps, int n_rows, int H) {
    for (int r = 0; r < n_rows; r++) ref_rms_row(y + (size_t)r * H, x + (size_t)r * H, g, eps, H);
}

void eng_cpu_rmsnorm_heads_ref(float *x, size_t ld, size_t col, int n_rows, int n_heads, int head_dim,
                               const float *g, float eps) {
    for (int r = 0; r < n_rows; r++)
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)r * ld + col + (size_t)h * head_dim;
            ref_rms_row(v, v, g, eps, head_dim);
        }
}

static void ref_rotate(float *x, const float *inv, int p, int d) {
    int half = d / 2;
    for (int i = 0; i < half; i++) {
        float a = inv[i] * (float)p;
        double c = cos((double)a), s = sin((double)a);
        double x1 = x[i], x2 = x[i + half];
        x[i] = (float)(x1 * c - x2 * s);
        x[i + half] = (float)(x2 * c + x1 * s);
    }
}

void eng_cpu_rope_ref(float *qkv, const int32_t *cu_seqlens, int n_seqs, int n_heads, int n_kv_heads,
                      int head_dim, const eng_rope *rope) {
    size_t ld = (size_t)(n_heads + 2 * n_kv_heads) * head_dim;
    float *inv = malloc(sizeof(float) * (size_t)(head_dim / 2 + 1));
    if (!inv) return;
    eng_rope_inv_freq(inv, head_dim, rope);
    for (int s = 0; s < n_seqs; s++)
        for (int t = cu_seqlens[s]; t < cu_seqlens[s + 1]; t++)
            for (int h = 0; h < n_heads + n_kv_heads; h++)
                ref_rotate(qkv + (size_t)t * ld + (size_t)h * head_dim, inv, t - cu_seqlens[s], head_dim);
    free(inv);
}

void eng_cpu_attention_gqa_ref(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                               int n_heads, int n_kv_heads, int head_dim, int causal) {
    eng_cpu_attention_gqa_window_ref(out, qkv, cu_seqlens, n_seqs, n_heads, n_kv_heads, head_dim, causal, 0);
}

void eng_cpu_attention_gqa_window_ref(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                                      int n_heads, int n_kv_heads, int head_dim, int causal, int window) {
    int d = head_dim, group = n_heads / n_kv_heads;
    size_t ld = (size_t)(n_heads + 2 * n_kv_heads) * d, ldo = (size_t)n_heads * d;
    size_t koff = (size_t)n_heads * d, voff = koff + (size_t)n_kv_heads * d;
    double scale = 1.0 / sqrt((double)d);
    int longest = 1;
    for (int s = 0; s < n_seqs; s++)
        if (cu_seqlens[s + 1] - cu_seqlens[s] > longest) longest = cu_seqlens[s + 1] - cu_seqlens[s];
    double *p = malloc(sizeof(double) * (size_t)longest);
    if (!p) return;
    for (int s = 0; s < n_seqs; s++) {
        int first = cu_seqlens[s], len = cu_seqlens[s + 1] - first;
        for (int h = 0; h < n_heads; h++) {
            int g = h / group;
            for (int i = 0; i < len; i++) {
                const float *q = qkv + (size_t)(first + i) * ld + (size_t)h * d;
                int nk = causal ? i + 1 : len, j0 = 0;
                if (window > 0) { /* keys at |i - j| < window only */
                    j0 = i - window + 1 > 0 ? i - window + 1 : 0;
                    if (i + window < nk) nk = i + window;
                }
                double mx = -INFINITY, sum = 0;
                for (int j = j0; j < nk; j++) {
                    const float *k = qkv + (size_t)(first + j) * ld + koff + (size_t)g * d;
                    double acc = 0;
                    for (int c = 0; c < d; c++) acc += (double)q[c] * k[c];
                    p[j] = acc * scale;
                    if (p[j] > mx) mx = p[j];
                }
                for (int j = j0; j < nk; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
                float *o = out + (size_t)(first + i) * ldo + (size_t)h * d;
                for (int c = 0; c < d; c++) {
                    double acc = 0;
                    for (int j = j0; j < nk; j++)
                        acc += p[j] * qkv[(size_t)(first + j) * ld + voff + (size_t)g * d + c];
                    o[c] = (float)(acc / sum);
                }
            }
        }
    }
    free(p);
}

void eng_cpu_swiglu_ref(float *out, const float *gu, int n_rows, int NI) {
    for (int r = 0; r < n_rows; r++)
        for (int j = 0; j < NI; j++) {
            double g = gu[(size_t)r * 2 * NI + j], u = gu[(size_t)r * 2 * NI + NI + j];
            out[(size_t)r * NI + j] = (float)(g / (1.0 + exp(-g)) * u);
        }
}

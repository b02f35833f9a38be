/* eng_cpu_kernels: the fast CPU kernels the engine runs (all but attention,
 * which lives in eng_cpu_attention.c).
 *
 * Linear layers are one OpenBLAS sgemm each (bias pre-filled into the output,
 * beta = 1), so the weights are read in their PyTorch [out, in] layout with
 * no transposed copy.  Row-wise ops (embedding, LayerNorm, GELU, pooling,
 * normalisation) are split over OpenMP threads by rows and vectorised inside
 * a row with `omp simd`; a parallel region is only opened when there is
 * enough work to pay for it, so a one-token query stays on one thread.
 * Nothing allocates.  The thread count is the caller's OpenMP setting
 * (the CPU backend sets it once per step).
 */
#include <math.h>
#include <string.h>
#include <cblas.h>
#include "eng_cpu_kernels.h"
#include "eng_cpu_vmath.h" /* erf, e^x without libm calls, so the GELU loops vectorise */

/* Rows*cols below which a row-wise op stays on the calling thread. */
#define ENG_CPU_PAR_MIN 8192

static inline void ln_row(float *y, const float *x, const float *g, const float *b, float eps,
                          int H) {
    float sum = 0.0f, var = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int i = 0; i < H; i++) sum += x[i];
    float mean = sum / (float)H;
#pragma omp simd reduction(+ : var)
    for (int i = 0; i < H; i++) {
        float dv = x[i] - mean;
        var += dv * dv;
    }
    float inv = 1.0f / sqrtf(var / (float)H + eps);
#pragma omp simd
    for (int i = 0; i < H; i++) y[i] = (x[i] - mean) * inv * g[i] + b[i];
}

/* Index of the sequence holding token t: the last s with cu[s] <= t. */
static inline int seq_of_token(const int32_t *cu, int n_seqs, int t) {
    int lo = 0, hi = n_seqs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (cu[mid] <= t) lo = mid; else hi = mid - 1;
    }
    return lo;
}

/* Sum of the three embeddings of token t at position p, then LayerNorm. */
static inline void embed_token(const eng_cpu_emb *m, const int32_t *ids, const int32_t *type_ids,
                               int t, int p, float *out) {
    int H = m->hidden;
    const float *w = m->word + (size_t)ids[t] * H, *pe = m->pos ? m->pos + (size_t)p * H : NULL;
    float *y = out + (size_t)t * H;
    if (!pe) {   /* DeBERTa v3: no absolute positions */
        const float *te = m->type ? m->type + (size_t)(type_ids ? type_ids[t] : 0) * H : NULL;
#pragma omp simd
        for (int i = 0; i < H; i++) y[i] = w[i] + (te ? te[i] : 0.0f);
    } else if (m->type) {
        const float *te = m->type + (size_t)(type_ids ? type_ids[t] : 0) * H;
#pragma omp simd
        for (int i = 0; i < H; i++) y[i] = w[i] + pe[i] + te[i];
    } else {
#pragma omp simd
        for (int i = 0; i < H; i++) y[i] = w[i] + pe[i];
    }
    ln_row(y, y, m->ln_g, m->ln_b, m->eps, H);
}

/* RoBERTa's rule (see the header) when a pad id occurs inside a sequence:
 * positions need a running count, so sequences go whole to one thread. */
static void embed_with_pads(const eng_cpu_emb *m, const int32_t *ids, const int32_t *type_ids,
                            const int32_t *cu_seqlens, int n_seqs, float *out) {
#pragma omp parallel for schedule(dynamic, 1) if (n_seqs > 1)
    for (int s = 0; s < n_seqs; s++) {
        int non_pad = 0;
        for (int t = cu_seqlens[s]; t < cu_seqlens[s + 1]; t++)
            embed_token(m, ids, type_ids, t, ids[t] == m->pad_id ? m->pad_id : m->pad_id + ++non_pad, out);
    }
}

void eng_cpu_embed(const eng_cpu_emb *m, const int32_t *ids, const int32_t *type_ids,
                   const int32_t *cu_seqlens, int n_seqs, float *out) {
    int H = m->hidden, T = cu_seqlens[n_seqs], has_pad = 0;
    if (m->pad_id >= 0)
        for (int t = 0; t < T && !has_pad; t++) has_pad = ids[t] == m->pad_id;
    if (has_pad) {
        embed_with_pads(m, ids, type_ids, cu_seqlens, n_seqs, out);
        return;
    }
    /* Without pads inside sequences the position is the index in the
     * sequence plus the offset, so the work splits evenly by token. */
#pragma omp parallel for schedule(static) if ((long)T * H >= ENG_CPU_PAR_MIN)
    for (int t = 0; t < T; t++) {
        int s = seq_of_token(cu_seqlens, n_seqs, t);
        embed_token(m, ids, type_ids, t, t - cu_seqlens[s] + m->position_offset, out);
    }
}

void eng_cpu_linear(float *y, const float *x, const float *W, const float *b, int M, int N, int K) {
    if (M <= 0) return;
    if (b) {
#pragma omp parallel for schedule(static) if ((long)M * N >= ENG_CPU_PAR_MIN)
        for (int r = 0; r < M; r++) {
            float *yr = y + (size_t)r * N;
#pragma omp simd
            for (int n = 0; n < N; n++) yr[n] = b[n];
        }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, W, K, b ? 1.0f : 0.0f,
                y, N);
}

ENG_CPU_CLONES static void gelu_span(float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = eng_vgelu(x[i]);
}
ENG_CPU_CLONES static void gelu_tanh_span(float *x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = eng_vgelu_tanh(x[i]);
}

/* Split into chunks per thread; the vector loop lives in the span because
 * GCC 12 does not vectorise it inside a combined `parallel for simd`. */
static void spans_parallel(float *x, size_t n, void (*span)(float *, size_t)) {
    const size_t chunk = 4096;
    size_t n_chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (n >= ENG_CPU_PAR_MIN)
    for (size_t c = 0; c < n_chunks; c++) span(x + c * chunk, c + 1 < n_chunks ? chunk : n - c * chunk);
}

void eng_cpu_gelu(float *x, size_t n) { spans_parallel(x, n, gelu_span); }

void eng_cpu_gelu_tanh(float *x, size_t n) { spans_parallel(x, n, gelu_tanh_span); }

void eng_cpu_add_layernorm(float *x, const float *res, const float *g, const float *b, float eps,
                           int n_rows, int H) {
#pragma omp parallel for schedule(static) if ((long)n_rows * H >= ENG_CPU_PAR_MIN)
    for (int r = 0; r < n_rows; r++) {
        float *row = x + (size_t)r * H;
        if (res) {
            const float *rr = res + (size_t)r * H;
#pragma omp simd
            for (int i = 0; i < H; i++) row[i] += rr[i];
        }
        ln_row(row, row, g, b, eps, H);
    }
}

void eng_cpu_pool(float *out, const float *x, const int32_t *cu_seqlens, const int32_t *skip, int n_seqs, int H,
                  posy_pooling mode) {
    long work = (long)cu_seqlens[n_seqs] * H;
#pragma omp parallel for schedule(dynamic, 1) if (n_seqs > 1 && work >= ENG_CPU_PAR_MIN)
    for (int s = 0; s < n_seqs; s++) {
        int first = cu_seqlens[s] + (skip ? skip[s] : 0), len = cu_seqlens[s + 1] - first;
        float *o = out + (size_t)s * H;
        if (mode == POSY_POOL_CLS || mode == POSY_POOL_LAST) {
            const float *src = x + (size_t)(mode == POSY_POOL_CLS ? first : first + len - 1) * H;
            for (int i = 0; i < H; i++) o[i] = src[i];
            continue;
        }
        for (int i = 0; i < H; i++) o[i] = 0.0f;
        for (int t = first; t < first + len; t++) {
            const float *xr = x + (size_t)t * H;
#pragma omp simd
            for (int i = 0; i < H; i++) o[i] += xr[i];
        }
        for (int i = 0; i < H; i++) o[i] /= (float)len;
    }
}

void eng_cpu_copy_tokens(float *const *dst, const float *x, const int32_t *cu_seqlens, int n_seqs, int H) {
    for (int s = 0; s < n_seqs; s++)
        if (dst[s])
            memcpy(dst[s], x + (size_t)cu_seqlens[s] * H, (size_t)(cu_seqlens[s + 1] - cu_seqlens[s]) * H * sizeof(float));
}

void eng_cpu_static_mean(float *out, const float *table, int H, const int32_t *ids, const int32_t *cu_seqlens,
                         const int32_t *skip, int n_seqs) {
    long work = (long)cu_seqlens[n_seqs] * H;
#pragma omp parallel for schedule(dynamic, 1) if (n_seqs > 1 && work >= ENG_CPU_PAR_MIN)
    for (int s = 0; s < n_seqs; s++) {
        int first = cu_seqlens[s] + (skip ? skip[s] : 0), len = cu_seqlens[s + 1] - first;
        float *o = out + (size_t)s * H;
        for (int i = 0; i < H; i++) o[i] = 0.0f;
        for (int t = first; t < first + len; t++) {
            const float *row = table + (size_t)ids[t] * H;
#pragma omp simd
            for (int i = 0; i < H; i++) o[i] += row[i];
        }
        for (int i = 0; len > 0 && i < H; i++) o[i] /= (float)len;   /* no tokens: zeros, as EmbeddingBag */
    }
}

void eng_cpu_l2_normalize(float *x, int n_rows, int H) {
#pragma omp parallel for schedule(static) if ((long)n_rows * H >= ENG_CPU_PAR_MIN)
    for (int r = 0; r < n_rows; r++) {
        float *row = x + (size_t)r * H;
        float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
        for (int i = 0; i < H; i++) ss += row[i] * row[i];
        float nrm = sqrtf(ss);
        float inv = 1.0f / (nrm > 1e-12f ? nrm : 1e-12f);
#pragma omp simd
        for (int i = 0; i < H; i++) row[i] *= inv;
    }
}

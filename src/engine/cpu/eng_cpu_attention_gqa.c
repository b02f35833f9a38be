/* eng_cpu_attention_gqa: fast grouped-query varlen attention on the CPU
 * (decoders: Qwen3), beside the encoder's eng_cpu_attention.c.
 *
 * Same plan as the encoder kernel: OpenMP over (sequence, query head)
 * pairs, so no score crosses a sequence boundary and both many short
 * sequences and one long one fill the cores; each pair in tiles of
 * up to GQA_TQ query rows whose scores live in the thread's scratch slice
(eng_cpu_attention_scratch_floats, the encoder kernel's contract).  Q, K
 * and V are read in place from the fused QKV rows (stride (heads + 2*kv) *
 * head_dim); query head h reads KV head h / (heads / kv_heads), so nothing
 * is repeated or copied.  Causal tiles only score keys up to their last
 * row and the softmax masks the rest of each row; a window (Gemma 3's
 * and ModernBERT's sliding layers) masks keys at |query - key| >= window
 * too, and a tile then scores only the band of keys its rows can see.  Softmax is the engine's
 * eng_cpu_softmax (vectorised exp, tested against double).  Sequences of
 * GQA_BLAS_MIN tokens or more use sgemm for Q K^T and P V with OpenBLAS held
 * to one thread while the parallel region runs.
 */
#include <math.h>
#include <omp.h>
#include <string.h>
#include <cblas.h>
#include "eng_cpu_decoder.h"
#include "eng_cpu_kernels.h"

#define GQA_TQ 64
#define GQA_BLAS_MIN 16

typedef struct {
    const float *qkv;
    float *out;
    size_t ld, ldo, koff, voff;
    int d, group, causal, tq;        /* tq: query rows per tile, fits the thread's scratch */
    int window;                      /* > 0: a query sees only keys with |query - key| < window */
} gqa_args;

static void gqa_scores(float *S, const float *Q, const float *K, size_t ld, int tq, int nk, int d,
                       float scale, int blas) {
    if (blas) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tq, nk, d, scale, Q, (int)ld, K, (int)ld,
                    0.0f, S, nk);
        return;
    }
    for (int i = 0; i < tq; i++)
        for (int j = 0; j < nk; j++) {
            const float *q = Q + (size_t)i * ld, *k = K + (size_t)j * ld;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int c = 0; c < d; c++) acc += q[c] * k[c];
            S[(size_t)i * nk + j] = acc * scale;
        }
}

static void gqa_pv(float *O, size_t ldo, const float *P, const float *V, size_t ld, int tq, int nk,
                   int d, int blas) {
    if (blas) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tq, d, nk, 1.0f, P, nk, V, (int)ld,
                    0.0f, O, (int)ldo);
        return;
    }
    for (int i = 0; i < tq; i++) {
        float *o = O + (size_t)i * ldo;
        memset(o, 0, sizeof(float) * (size_t)d);
        for (int j = 0; j < nk; j++) {
            float pj = P[(size_t)i * nk + j];
            const float *v = V + (size_t)j * ld;
#pragma omp simd
            for (int c = 0; c < d; c++) o[c] += pj * v[c];
        }
    }
}

static void gqa_head(const gqa_args *a, int first, int len, int h, float *S) {
    int d = a->d, g = h / a->group, w = a->window;
    float scale = 1.0f / sqrtf((float)d);
    const float *K = a->qkv + (size_t)first * a->ld + a->koff + (size_t)g * d;
    const float *V = a->qkv + (size_t)first * a->ld + a->voff + (size_t)g * d;
    for (int q0 = 0; q0 < len; q0 += a->tq) {
        int tq = len - q0 < a->tq ? len - q0 : a->tq;
        /* the tile's keys [k0, k1): all (bidirectional), up to its last row
         * (causal), and within the window of some row of the tile (a sliding
         * layer: the band alone is scored, so long inputs cost O(len w)) */
        int k0 = 0, k1 = a->causal ? q0 + tq : len;
        if (w > 0) {
            if (q0 - w + 1 > k0) k0 = q0 - w + 1;
            if (q0 + tq - 1 + w < k1) k1 = q0 + tq - 1 + w;
        }
        int nk = k1 - k0, blas = (w > 0 ? nk : len) >= GQA_BLAS_MIN; /* no window: as before the band */
        const float *Q = a->qkv + (size_t)(first + q0) * a->ld + (size_t)h * d;
        gqa_scores(S, Q, K + (size_t)k0 * a->ld, a->ld, tq, nk, d, scale, blas);
        for (int i = 0; i < tq; i++) {
            float *row = S + (size_t)i * nk;
            int qi = q0 + i, lo = k0, lim = a->causal ? qi + 1 : k1; /* key indices in the sequence */
            if (w > 0) { /* Gemma 3's and ModernBERT's sliding layers */
                if (qi - w + 1 > lo) lo = qi - w + 1;
                if (qi + w < lim) lim = qi + w;
            }
            for (int j = 0; j < lo - k0; j++) row[j] = 0.0f;
            eng_cpu_softmax(row + (lo - k0), lim - lo);
            for (int j = lim - k0; j < nk; j++) row[j] = 0.0f;
        }
        gqa_pv(a->out + (size_t)(first + q0) * a->ldo + (size_t)h * d, a->ldo, S, V + (size_t)k0 * a->ld, a->ld, tq,
               nk, d, blas);
    }
}

int eng_cpu_attention_gqa(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                          int n_heads, int n_kv_heads, int head_dim, int causal, int window, float *scratch,
                          size_t scratch_floats) {
    int longest = 0;
    for (int s = 0; s < n_seqs; s++)
        if (cu_seqlens[s + 1] - cu_seqlens[s] > longest) longest = cu_seqlens[s + 1] - cu_seqlens[s];
    /* The encoder's scratch contract sizes a thread's slice; tiles take as
     * many query rows (up to GQA_TQ) as that slice holds at full key length. */
    if (longest < 1) longest = 1;
    size_t per_thread = eng_cpu_attention_scratch_floats(longest, 1);
    if (per_thread > scratch_floats) per_thread = scratch_floats;
    size_t rows = per_thread / (size_t)longest;
    if (rows < 1 || n_kv_heads < 1 || n_heads % n_kv_heads) return -1;
    int nt = omp_get_max_threads();
    if ((size_t)nt * per_thread > scratch_floats) nt = (int)(scratch_floats / per_thread);
    gqa_args a = {qkv, out, (size_t)(n_heads + 2 * n_kv_heads) * head_dim, (size_t)n_heads * head_dim,
                  (size_t)n_heads * head_dim, (size_t)(n_heads + n_kv_heads) * head_dim, head_dim,
                  n_heads / n_kv_heads, causal, rows < GQA_TQ ? (int)rows : GQA_TQ, window};
    int blas_threads = openblas_get_num_threads();
    int any_blas = longest >= GQA_BLAS_MIN;
    if (any_blas && blas_threads > 1) openblas_set_num_threads(1);
    int items = n_seqs * n_heads;
    long work = (long)cu_seqlens[n_seqs] * n_heads * head_dim;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (items > 1 && work >= 8192)
    for (int w = 0; w < items; w++) {
        int s = w / n_heads;
        float *S = scratch + (size_t)omp_get_thread_num() * per_thread;
        gqa_head(&a, cu_seqlens[s], cu_seqlens[s + 1] - cu_seqlens[s], w % n_heads, S);
    }
    if (any_blas && blas_threads > 1) openblas_set_num_threads(blas_threads);
    return 0;
}

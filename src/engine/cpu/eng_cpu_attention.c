/* eng_cpu_attention: fast variable-length multi-head attention on the CPU.
 *
 * Work is split over OpenMP threads by (sequence, head) pairs, so a batch of
 * many short sequences and a single long one both keep every core busy and
 * no score ever crosses a sequence boundary (no padding, no mask tensor).
 * Each pair is processed in tiles of ATT_TQ query rows: scores for the tile
 * (ATT_TQ x keys) go to the thread's slice of caller-provided scratch, get a
 * max-subtracted softmax in place, and are multiplied by V straight into the
 * output rows.  Q, K and V are read where the fused QKV GEMM left them (row
 * stride 3H), so nothing is copied.  MPNet's relative position bias, when
 * given, is added to each tile's scores before the softmax from a row per
 * head indexed by distance (eng_relpos.h).
 *
 * Sequences of ATT_BLAS_MIN tokens or more use one sgemm for Q K^T and one
 * for P V per tile (already at 64 tokens the loops took 20% of a MiniLM
 * forward against 5% with sgemm); the shortest use plain loops, where the
 * call overhead would dominate.  While the parallel region runs, OpenBLAS is
 * held to one thread so the per-thread sgemms do not each fan out over all
 * cores (the OpenMP build of OpenBLAS does this by itself; the pthread build
 * needs it).
 */
#include <math.h>
#include <omp.h>
#include <string.h>
#include <cblas.h>
#include "eng_cpu_att_tiles.h"
#include "eng_cpu_kernels.h"
#include "eng_cpu_vmath.h" /* eng_vexp: the softmax's e^x (its accuracy: test_cpu_kernels) */

size_t eng_cpu_attention_scratch_floats(int max_len, int n_threads) {
    return (size_t)ATT_TQ * (size_t)(max_len > 0 ? max_len : 1) * (size_t)(n_threads > 0 ? n_threads : 1);
}

/* Scores S[i, j] = scale * q_i . k_j for the tile, keys 0..n_keys. */
void eng_cpu_att_scores(float *S, const float *Q, const float *K, size_t ld, int tq, int n_keys,
                        int d, float scale, int use_blas) {
    if (use_blas) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tq, n_keys, d, scale, Q, (int)ld, K,
                    (int)ld, 0.0f, S, n_keys);
        return;
    }
    for (int i = 0; i < tq; i++) {
        const float *q = Q + (size_t)i * ld;
        for (int j = 0; j < n_keys; j++) {
            const float *k = K + (size_t)j * ld;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int c = 0; c < d; c++) acc += q[c] * k[c];
            S[(size_t)i * n_keys + j] = acc * scale;
        }
    }
}

/* Numerically stable softmax of row[0..lim) in place, zeros in
 * row[lim..n_keys) (causal).  Cloned per ISA: the build targets baseline
 * x86-64, the clones let the vector loops use AVX2 / AVX-512 where present. */
ENG_CPU_CLONES static void softmax_row(float *row, int lim, int n_keys) {
    float mx = row[0], sum = 0.0f;
#if !defined(__clang__) /* clang cannot vectorise a float max without fast-math, and warns */
#pragma omp simd reduction(max : mx)
#endif
    for (int j = 1; j < lim; j++) mx = row[j] > mx ? row[j] : mx;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < lim; j++) {
        row[j] = eng_vexp(row[j] - mx);
        sum += row[j];
    }
    float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < lim; j++) row[j] *= inv;
    for (int j = lim; j < n_keys; j++) row[j] = 0.0f;
}

void eng_cpu_softmax(float *x, int n) {
    if (n > 0) softmax_row(x, n, n);
}

void eng_cpu_att_softmax(float *S, int tq, int n_keys, int q0, int causal) {
    for (int i = 0; i < tq; i++) softmax_row(S + (size_t)i * n_keys, causal ? q0 + i + 1 : n_keys, n_keys);
}

/* O[i] = sum_j P[i, j] v_j, output row stride ldo. */
void eng_cpu_att_pv(float *O, size_t ldo, const float *P, const float *V, size_t ld, int tq,
                    int n_keys, int d, int use_blas) {
    if (use_blas) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tq, d, n_keys, 1.0f, P, n_keys, V,
                    (int)ld, 0.0f, O, (int)ldo);
        return;
    }
    for (int i = 0; i < tq; i++) {
        float *o = O + (size_t)i * ldo;
        const float *p = P + (size_t)i * n_keys;
        for (int c = 0; c < d; c++) o[c] = 0.0f;
        for (int j = 0; j < n_keys; j++) {
            if (p[j] == 0.0f) continue; /* causal tail */
            const float *v = V + (size_t)j * ld;
            float pj = p[j];
#pragma omp simd
            for (int c = 0; c < d; c++) o[c] += pj * v[c];
        }
    }
}

/* MPNet: the relative position bias added to the tile's scores */
static void tile_bias(float *S, const float *row, int tq, int n_keys, int q0) {
    for (int i = 0; i < tq; i++) {
        float *s = S + (size_t)i * n_keys;
        const float *b = row - (q0 + i); /* b[j] = bias of (key j - query q0 + i) */
#pragma omp simd
        for (int j = 0; j < n_keys; j++) s[j] += b[j];
    }
}

static void attend_head(float *out, const float *qkv, int first, int len, int h, int n_heads,
                        int d, int causal, const eng_relpos *rel, float *S) {
    int H = n_heads * d, use_blas = len >= ATT_BLAS_MIN;
    size_t ld = 3 * (size_t)H;
    float scale = 1.0f / sqrtf((float)d);
    const float *K = qkv + (size_t)first * ld + H + (size_t)h * d;
    const float *V = K + H;
    for (int q0 = 0; q0 < len; q0 += ATT_TQ) {
        int tq = len - q0 < ATT_TQ ? len - q0 : ATT_TQ;
        int n_keys = causal ? q0 + tq : len;
        const float *Q = qkv + (size_t)(first + q0) * ld + (size_t)h * d;
        eng_cpu_att_scores(S, Q, K, ld, tq, n_keys, d, scale, use_blas);
        if (rel) tile_bias(S, eng_relpos_row(rel, h), tq, n_keys, q0);
        eng_cpu_att_softmax(S, tq, n_keys, q0, causal);
        eng_cpu_att_pv(out + (size_t)(first + q0) * H + (size_t)h * d, (size_t)H, S, V, ld, tq, n_keys, d,
                use_blas);
    }
}

int eng_cpu_attention(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                      int n_heads, int head_dim, int causal, const eng_relpos *rel, float *scratch,
                      size_t scratch_floats) {
    int longest = 0;
    for (int s = 0; s < n_seqs; s++) {
        int len = cu_seqlens[s + 1] - cu_seqlens[s];
        if (len > longest) longest = len;
    }
    size_t per_thread = eng_cpu_attention_scratch_floats(longest, 1);
    if (per_thread > scratch_floats || (rel && longest > rel->max_len)) return -1;
    int nt = omp_get_max_threads();
    if ((size_t)nt * per_thread > scratch_floats) nt = (int)(scratch_floats / per_thread);
    int blas_threads = openblas_get_num_threads();
    int any_blas = longest >= ATT_BLAS_MIN;
    if (any_blas && blas_threads > 1) openblas_set_num_threads(1);

    int items = n_seqs * n_heads;
    long work = (long)cu_seqlens[n_seqs] * n_heads * head_dim;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (items > 1 && work >= 8192)
    for (int w = 0; w < items; w++) {
        int s = w / n_heads, h = w % n_heads;
        float *S = scratch + (size_t)omp_get_thread_num() * per_thread;
        attend_head(out, qkv, cu_seqlens[s], cu_seqlens[s + 1] - cu_seqlens[s], h, n_heads, head_dim,
                    causal, rel, S);
    }
    if (any_blas && blas_threads > 1) openblas_set_num_threads(blas_threads);
    return 0;
}

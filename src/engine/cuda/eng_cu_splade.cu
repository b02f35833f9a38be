/* eng_cu_splade: a SPLADE model's sparse vectors on the GPU
 * (eng_config_splade.c says what they are; eng_splade.c is the CPU's).
 *
 * The head runs on the normalised final token states: the transform GEMM
 * with its bias and GELU in the epilogue, a LayerNorm, then the vocabulary
 * projection a chunk of ENG_CU_SPLADE_CHUNK tokens at a time (a whole
 * step's logits, T x vocab, would not fit the arena), each chunk folded
 * into the pooled vectors by eng_cu_splade_fold.  The fold gives each
 * thread one vocabulary column and walks the chunk's rows in order,
 * keeping the running max (or sum) of log1p(relu(logit)) for the current
 * sequence in a register and merging it into pooled[seq][v] when the
 * sequence changes: no atomics, so a graph replay gives the eager run's
 * bits, and the sum's order is fixed.  Rows past the real token count
 * (the bucket's padding) are skipped; pooled starts at zero, which is
 * neutral for both (every value is >= 0).
 */
#include "eng_cu.h"
#include "eng_cu_model.h"

#define SPLADE_THREADS 256

__global__ void __launch_bounds__(SPLADE_THREADS)
splade_fold_kernel(const bf16 *logits, int ld, int rows, int c0, const int *n_tok, const int32_t *cu,
                   const int *n_seq_dev, int V, float *out, int sum, int log2) {
    const int v = blockIdx.x * SPLADE_THREADS + threadIdx.x;
    const int nt = *n_tok, ns = *n_seq_dev;
    if (v >= V || c0 >= nt || ns <= 0) return;
    const int end = c0 + rows < nt ? c0 + rows : nt;
    /* the sequence holding token c0: the last s with cu[s] <= c0 */
    int lo = 0, hi = ns - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (cu[mid] <= c0) lo = mid;
        else hi = mid - 1;
    }
    int s = lo, next = cu[s + 1];
    float acc = 0.f;
    for (int t = c0; t < end; t++) {
        if (t >= next) {   /* a new sequence: merge the finished one's value */
            float *o = out + (size_t)s * V + v;
            *o = sum ? *o + acc : fmaxf(*o, acc);
            acc = 0.f;
            while (t >= next) next = cu[++s + 1];
        }
        const float x = __bfloat162float(logits[(size_t)(t - c0) * ld + v]);
        float y = x > 0.f ? log1pf(x) : 0.f;
        if (log2) y = log1pf(y);
        acc = sum ? acc + y : fmaxf(acc, y);
    }
    float *o = out + (size_t)s * V + v;
    *o = sum ? *o + acc : fmaxf(*o, acc);
}

cudaError_t eng_cu_splade_fold(cudaStream_t s, const bf16 *logits, int ld, int rows, int c0, const int *n_tok,
                               const int32_t *cu, const int *n_seq, int V, float *out, int sum, int log2) {
    splade_fold_kernel<<<(V + SPLADE_THREADS - 1) / SPLADE_THREADS, SPLADE_THREADS, 0, s>>>(
        logits, ld, rows, c0, n_tok, cu, n_seq, V, out, sum, log2);
    return cudaGetLastError();
}

int eng_cu_splade_head(eng_cu_model *m, cudaStream_t s, const bf16 *xn, int T, int S, const int32_t *in,
                       const eng_cu_in_layout &lay, posy_err *err) {
    const int H = m->H;
    const int *n_tok = in + lay.meta + ENG_CU_META_TOKENS, *n_seq = in + lay.meta + ENG_CU_META_SEQS;
    cudaError_t ce;
    /* transform: qkv = GELU(xn W1^T + b1), ctx = LayerNorm(qkv) (both free at the forward's end) */
    if (eng_cu_model_gemm(m, s, 0, xn, m->sp_w1, m->sp_b1, NULL, m->qkv, T, H, H, ENG_CU_EPI_BIAS_GELU, NULL, err))
        return -1;
    if ((ce = eng_cu_add_ln(s, m->qkv, NULL, m->sp_g, m->sp_beta, m->ctx, T, n_tok, H, m->eps)) != cudaSuccess ||
        (ce = cudaMemsetAsync(m->pooled, 0, (size_t)S * m->vocab * sizeof(float), s)) != cudaSuccess)
        return eng_cu_model_fail(err, "splade head", ce);
    for (int c0 = 0; c0 < T; c0 += ENG_CU_SPLADE_CHUNK) {
        const int rows = T - c0 < ENG_CU_SPLADE_CHUNK ? T - c0 : ENG_CU_SPLADE_CHUNK;
        if (eng_cu_model_gemm(m, s, 0, m->ctx + (size_t)c0 * H, m->sp_w2, m->sp_b2, NULL, m->sp_logits, rows, m->vpad,
                              H, ENG_CU_EPI_BIAS, NULL, err))
            return -1;
        if ((ce = eng_cu_splade_fold(s, m->sp_logits, m->vpad, rows, c0, n_tok, in + lay.cu, n_seq, m->vocab,
                                     m->pooled, m->splade_sum, m->splade_log2)) != cudaSuccess)
            return eng_cu_model_fail(err, "splade fold", ce);
    }
    return 0;
}

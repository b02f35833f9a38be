/* eng_cu_glu: the elementwise kernels Gemma 3 (EmbeddingGemma) and
 * ModernBERT add to the decoders' GPU path (eng_cu_model_glu.cu) -- the
 * embedding gather with Gemma's sqrt(hidden) factor and one "residual +
 * norm" kernel that covers all four places those models normalise (their
 * GELU gates are eng_cu_decoder.cu's SwiGLU kernel with another
 * activation, eng_cu_glu_act).  Memory-bound passes between GEMMs; fp32
 * arithmetic, one bf16 rounding at each store, as the Qwen3 kernels
 * (eng_cu_decoder.cu, eng_cu_norm.cu).
 *
 * Why one norm kernel with options instead of four: the places differ only
 * in which terms are present --
 *   Gemma 3 after attention / the MLP:  x += RMSNorm(y) * post;  h = RMSNorm(x) * g
 *   ModernBERT after attention / MLP:   x += y;                  h = LayerNorm(x) * g + b
 *   the embedding (ModernBERT):         x = LayerNorm(x) * g + b (h the same rows)
 *   layer 0 of ModernBERT (no norm):    h = x
 * and a row's work is one read of x (and y), one or two reductions and one
 * or two writes either way.  One block a row (rows past the real count
 * write zeros, so no later kernel meets stale rows), the row staged in
 * shared memory as fp32 so x may be updated in place.
 *
 * Checked against an fp64 reference by dev/cuda/lab_qwen3.cu.
 */
#include "eng_cu.h"

#define GLU_NORM_THREADS 256

static __device__ __forceinline__ float glu_block_sum(float v, float *red) {
    v = eng_cu_warp_sum(v);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    __syncthreads(); /* red is reused by the next reduction */
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float s = 0.f;
#pragma unroll
    for (int w = 0; w < GLU_NORM_THREADS / 32; w++) s += red[w];
    return s;
}

__global__ void __launch_bounds__(GLU_NORM_THREADS) glu_norm_kernel(eng_cu_glu_norm_args a) {
    extern __shared__ float glu_row[]; /* [H] */
    __shared__ float red[GLU_NORM_THREADS / 32];
    const int row = blockIdx.x, H = a.H;
    const bool live = row < *a.n_rows_dev;
    ENG_CU_PDL_WAIT();
    bf16 *x = a.x + (size_t)row * H;
    if (!live) {
        for (int j = threadIdx.x; j < H; j += GLU_NORM_THREADS) {
            if (a.write_x) x[j] = __float2bfloat16(0.f);
            if (a.h) a.h[(size_t)row * H + j] = __float2bfloat16(0.f);
        }
        return;
    }
    /* r = x (+ y, or + RMSNorm(y) * post) */
    float ssy = 0.f;
    for (int j = threadIdx.x; j < H; j += GLU_NORM_THREADS) {
        const float yv = a.y ? __bfloat162float(a.y[(size_t)row * H + j]) : 0.f;
        glu_row[j] = yv;
        ssy += yv * yv;
    }
    float ry = 1.f;
    if (a.y && a.post) ry = rsqrtf(glu_block_sum(ssy, red) / (float)H + a.eps);
    float s1 = 0.f;
    for (int j = threadIdx.x; j < H; j += GLU_NORM_THREADS) {
        float yv = glu_row[j];
        if (a.post) yv *= ry * a.post[j];
        const float r = __bfloat162float(x[j]) + yv;
        glu_row[j] = r;
        s1 += r;
    }
    /* the statistics of r: the mean (LayerNorm), then the sum of squares
     * about it (LayerNorm) or about zero (RMSNorm) */
    const float mu = a.ln ? glu_block_sum(s1, red) / (float)H : 0.f;
    float s2 = 0.f;
    for (int j = threadIdx.x; j < H; j += GLU_NORM_THREADS) {
        const float c = glu_row[j] - mu;
        s2 += c * c;
    }
    const float rs = a.g ? rsqrtf(glu_block_sum(s2, red) / (float)H + a.eps) : 1.f;
    for (int j = threadIdx.x; j < H; j += GLU_NORM_THREADS) {
        const float r = glu_row[j];
        const float n = a.g ? (r - mu) * rs * a.g[j] + (a.b ? a.b[j] : 0.f) : r;
        if (a.write_x) x[j] = __float2bfloat16(a.norm_x ? n : r);
        if (a.h) a.h[(size_t)row * H + j] = __float2bfloat16(n);
    }
}

cudaError_t eng_cu_glu_norm(cudaStream_t s, const eng_cu_glu_norm_args *a) {
    if (a->rows <= 0 || a->H <= 0 || a->H > 12288 || !a->x || !a->n_rows_dev || (a->post && !a->y) ||
        (a->norm_x && !a->g) || (!a->write_x && !a->h) || (a->b && !a->ln))
        return cudaErrorInvalidValue;
    cudaError_t e = eng_cu_launch(glu_norm_kernel, dim3((unsigned)a->rows), dim3(GLU_NORM_THREADS),
                                  (size_t)a->H * sizeof(float), s, *a);
    return e != cudaSuccess ? e : cudaGetLastError();
}

__global__ void __launch_bounds__(GLU_NORM_THREADS)
glu_embed_kernel(const int32_t *ids, const bf16 *word, float scale, bf16 *x, const int *n_rows_dev, int H) {
    const int row = blockIdx.x;
    const bool live = row < *n_rows_dev;
    const int id = live ? ids[row] : 0; /* the ids: the input block, before the wait */
    ENG_CU_PDL_WAIT();
    bf16 *dst = x + (size_t)row * H;
    const bf16 *src = word + (size_t)id * H;
    for (int j = threadIdx.x; j < H; j += GLU_NORM_THREADS)
        dst[j] = __float2bfloat16(live ? __bfloat162float(src[j]) * scale : 0.f);
}

cudaError_t eng_cu_glu_embed(cudaStream_t s, const int32_t *ids, const bf16 *word, float scale, bf16 *x, int rows,
                             const int *n_rows_dev, int H) {
    if (rows <= 0 || H <= 0 || !n_rows_dev) return cudaErrorInvalidValue;
    cudaError_t e = eng_cu_launch(glu_embed_kernel, dim3((unsigned)rows), dim3(GLU_NORM_THREADS), 0, s, ids, word,
                                  scale, x, n_rows_dev, H);
    return e != cudaSuccess ? e : cudaGetLastError();
}

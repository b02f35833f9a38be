/* eng_cu_pool: sentence pooling (mean / CLS / last token) and L2
 * normalisation, with Matryoshka truncation, in one kernel.
 *
 * One block per sequence (grid = the bucket's sequence bound; blocks past
 * the real count exit).  Threads own column pairs (bf16x2 loads, coalesced
 * along the row) -- all of a row's columns at once, so a short sequence
 * costs one pass, not one per 64 columns -- and G row groups (as many as
 * fit 1024 threads, at most 8) walk a long sequence in parallel; a shared-
 * memory reduction adds the groups, a block reduction gives the norm.
 * Sums are fp32, the normaliser is torch's F.normalize (x / max(|x|, 1e-12))
 * over the first `dims` values only, which is exactly "truncate, then
 * normalise" as sentence-transformers does for truncate_dim.  A per-
 * sequence skip (include_prompt false: the prompt's tokens) moves the first
 * pooled row, as eng_cpu_pool does: mean and CLS start at start + skip,
 * last-token stays end - 1.
 */
#include "eng_cu.h"

#define POOL_THREADS 1024

static __device__ __forceinline__ float pool_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Threads are (column pair, row group): cpt threads cover the columns in
 * pairs, G groups split the rows; partial sums meet in shared memory. */
__global__ void __launch_bounds__(POOL_THREADS)
pool_kernel(const bf16 *x, const int32_t *cu, const int32_t *skip, const int *n_seqs_dev, int H, int dims, int mode,
            int normalize, float *out, int cpt, int G) {
    extern __shared__ float acc[]; /* [G][dims + 1] */
    __shared__ float red[32];
    const int s = blockIdx.x;
    /* the sequence's bounds come from the input block: read before the wait */
    const bool live = s < *n_seqs_dev;
    int start = 0, end = 0, sk = 0;
    if (live) {
        start = cu[s];
        end = cu[s + 1];
        sk = skip ? skip[s] : 0;
    }
    ENG_CU_PDL_WAIT();
    if (!live) return;
    const int tx = threadIdx.x % cpt, grp = threadIdx.x / cpt, DP = dims + 1;
    int r0 = start + sk, r1 = end;
    if (mode == ENG_CU_POOL_CLS) r1 = r0 + 1;
    if (mode == ENG_CU_POOL_LAST) r0 = end - 1;
    const float inv = 1.f / (float)(r1 - r0);
    if (grp < G)
        for (int c = 2 * tx; c < dims; c += 2 * cpt) {
            float a = 0.f, b = 0.f;
#pragma unroll 4
            for (int r = r0 + grp; r < r1; r += G) {
                float2 f = __bfloat1622float2(*(const __nv_bfloat162 *)(x + (size_t)r * H + c));
                a += f.x;
                b += f.y;
            }
            acc[grp * DP + c] = a;
            acc[grp * DP + c + 1] = b;
        }
    __syncthreads();
    float *out_s = out + (size_t)s * dims;
    float ss = 0.f;
    if (grp == 0)
        for (int c = tx; c < dims; c += cpt) {
            float v = 0.f;
            for (int k = 0; k < G; k++) v += acc[k * DP + c];
            v *= inv;
            acc[c] = v; /* group 0's row of acc now holds the pooled vector */
            ss += v * v;
        }
    if (!normalize) {
        __syncthreads();
        for (int c = threadIdx.x; c < dims; c += blockDim.x) out_s[c] = acc[c];
        return;
    }
    ss = pool_warp_sum(ss);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float t = threadIdx.x < (blockDim.x + 31) / 32 ? red[threadIdx.x] : 0.f;
        t = pool_warp_sum(t);
        if (threadIdx.x == 0) red[0] = 1.f / fmaxf(sqrtf(t), 1e-12f);
    }
    __syncthreads();
    const float scale = red[0];
    for (int c = threadIdx.x; c < dims; c += blockDim.x) out_s[c] = acc[c] * scale;
}

cudaError_t eng_cu_pool(cudaStream_t s, const bf16 *x, const int32_t *cu_seqlens, const int32_t *skip,
                        const int *n_seqs_dev, int max_seqs, int H, int dims, int mode,
                        int normalize, float *out) {
    if (max_seqs <= 0 || H % 2 || H > 4096 || dims <= 0 || dims > H)
        return cudaErrorInvalidValue;
    int cpt = ((dims + 1) / 2 + 31) / 32 * 32;
    if (cpt > POOL_THREADS) cpt = POOL_THREADS;
    int G = POOL_THREADS / cpt;
    if (G > 8) G = 8;
    const size_t smem = (size_t)G * (dims + 1) * sizeof(float);
    if (smem > 48 * 1024) G = 1;
    cudaError_t e = eng_cu_launch(pool_kernel, dim3(max_seqs), dim3(cpt * G),
                                  (size_t)G * (dims + 1) * sizeof(float), s, x, cu_seqlens, skip,
                                  n_seqs_dev, H, dims, mode, normalize, out, cpt, G);
    return e != cudaSuccess ? e : cudaGetLastError();
}

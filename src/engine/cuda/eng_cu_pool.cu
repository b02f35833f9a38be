/* eng_cu_pool: sentence pooling (mean / CLS / last token) and L2
 * normalisation, with Matryoshka truncation, in one kernel.
 *
 * One block per sequence (grid = the bucket's sequence bound; blocks past
 * the real count exit).  Threads own column pairs (bf16x2 loads, coalesced
 * along the row) and a slice of the rows: 8 row groups of 32 threads walk
 * the sequence in parallel, then a shared-memory reduction adds the groups.
 * Sums are fp32, the normaliser is torch's F.normalize (x / max(|x|, 1e-12))
 * over the first `dims` values only, which is exactly "truncate, then
 * normalise" as sentence-transformers does for truncate_dim.
 */
#include "eng_cu.h"

#define POOL_GROUPS 8
#define POOL_MAXH 4096

__global__ void __launch_bounds__(32 * POOL_GROUPS)
pool_kernel(const bf16 *x, const int32_t *cu, const int *n_seqs_dev, int H, int dims, int mode,
            int normalize, float *out) {
    __shared__ float acc[POOL_GROUPS][64];
    __shared__ float red[32 * POOL_GROUPS];
    const int s = blockIdx.x;
    if (s >= *n_seqs_dev) return;
    const int start = cu[s], end = cu[s + 1];
    const int grp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int r0 = start, r1 = end;
    if (mode == ENG_CU_POOL_CLS) r1 = start + 1;
    if (mode == ENG_CU_POOL_LAST) r0 = end - 1;
    const float inv = 1.f / (float)(r1 - r0);
    float *out_s = out + (size_t)s * dims;
    float ss = 0.f;
    /* columns in passes of 64 (32 lanes x 2), a pass per loop iteration */
    for (int c0 = 0; c0 < dims; c0 += 64) {
        const int c = c0 + 2 * lane;
        float2 sum = make_float2(0.f, 0.f);
        if (c < dims)
            for (int r = r0 + grp; r < r1; r += POOL_GROUPS) {
                float2 f = __bfloat1622float2(*(const __nv_bfloat162 *)(x + (size_t)r * H + c));
                sum.x += f.x;
                sum.y += f.y;
            }
        acc[grp][2 * lane] = sum.x;
        acc[grp][2 * lane + 1] = sum.y;
        __syncthreads();
        if (grp == 0 && c < dims) {
            float a = 0.f, b = 0.f;
            for (int k = 0; k < POOL_GROUPS; k++) { a += acc[k][2 * lane]; b += acc[k][2 * lane + 1]; }
            a *= inv;
            b *= inv;
            out_s[c] = a;
            if (c + 1 < dims) out_s[c + 1] = b; else b = 0.f;
            ss += a * a + b * b;
        }
        __syncthreads();
    }
    if (!normalize) return;
    red[threadIdx.x] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float tot = 0.f;
        for (int i = 0; i < 32; i++) tot += red[i];
        red[0] = 1.f / fmaxf(sqrtf(tot), 1e-12f);
    }
    __syncthreads();
    const float scale = red[0];
    /* group 0 wrote out_s; the same threads rescale what they wrote */
    if (grp == 0)
        for (int c0 = 0; c0 < dims; c0 += 64) {
            const int c = c0 + 2 * lane;
            if (c < dims) out_s[c] *= scale;
            if (c + 1 < dims) out_s[c + 1] *= scale;
        }
}

cudaError_t eng_cu_pool(cudaStream_t s, const bf16 *x, const int32_t *cu_seqlens,
                        const int *n_seqs_dev, int max_seqs, int H, int dims, int mode,
                        int normalize, float *out) {
    if (max_seqs <= 0 || H % 2 || H > POOL_MAXH || dims <= 0 || dims > H)
        return cudaErrorInvalidValue;
    pool_kernel<<<max_seqs, 32 * POOL_GROUPS, 0, s>>>(x, cu_seqlens, n_seqs_dev, H, dims, mode,
                                                       normalize, out);
    return cudaGetLastError();
}

/* eng_cu_ln_pool: the model's last norm (LayerNorm for the encoders,
 * RMSNorm for decoders) and the sentence pooling in one kernel.
 *
 * Why: the last norm wrote every row of the bucket (50 MB for a saturated
 * all-MiniLM-L6 step of 65536 x 384) only for the pooling kernel to read
 * them back -- 35 us of norm and 25.6 us of pooling (~2 TB/s) on the H200.
 * Here the norm's input is read once and nothing but the pooled vectors is
 * written; with CLS or last-token pooling only the one pooled row of a
 * sequence is normalised at all.
 *
 * One block per sequence (grid = the bucket's sequence bound; blocks past
 * the real count exit after the wait), LNP_WARPS warps walking its pooled
 * rows, a row in LPR lanes of CPL chunks of 8 values (H = 8 CPL LPR, the
 * shapes of eng_cu_norm.cu's row walkers: 256, 384, 512, 768, 1024), the
 * next row's chunks loaded under this row's statistics.  Each lane sums
 * its columns of the normalised rows in fp32 registers; the rows of a warp
 * meet by shuffles, the warps' partial rows in shared memory, added in warp
 * order -- so the result does not depend on timing (graph == eager bit for
 * bit).  The affine part (gamma, beta) is applied once to the mean, which
 * is the mean of the affine rows.  Then mean / CLS / last, the L2 norm over
 * the first `dims` values (Matryoshka), as eng_cu_pool does; unlike the
 * two-kernel path the normalised rows are not rounded to bf16 before they
 * are summed.  Sequences are taken last to first when the kernel before
 * walked forwards (eng_cu_order.c), so the first blocks find their rows in
 * L2.
 *
 * Measured on the H200 (2026-12-03, runs 36-37; docs/BENCHMARKS.md, "the
 * last norm inside the pooling"): one 16-token query 2-4 us faster on
 * every model (MiniLM 63.4 against 65.4 us); lab 512 x 128 x 384 35 us
 * against 61 for add_ln + pool, but the saturated steps within the noise.
 * It reads at only 1.4-1.9 TB/s; forms that sent rows into L2 ahead or
 * kept the sums in shared memory (64 registers, two blocks an SM) were no
 * faster in the steps (run 37; commit c69db28 holds them).
 */
#include "eng_cu.h"
#include <stdlib.h>
#include <string.h>

#define LNP_WARPS 16

template <int CPL, int LPR, bool RMS>
__global__ void __launch_bounds__(32 * LNP_WARPS)
ln_pool_kernel(const bf16 *x, const float *gamma, const float *beta, const int32_t *cu, const int32_t *skip,
               const int *n_seqs_dev, int H, int dims, int mode, int normalize, float eps, float *out, int rev) {
    static_assert(LPR == 16 || LPR == 32, "a row is a half or a whole warp");
    constexpr int RPW = 32 / LPR, SLOTS = LNP_WARPS * RPW, PER = (8 * CPL * LPR + 32 * LNP_WARPS - 1) / (32 * LNP_WARPS);
    extern __shared__ __align__(16) float lnp_sm[];
    float *sg = lnp_sm, *sb = lnp_sm + H, *part = lnp_sm + 2 * H; /* part: [LNP_WARPS][H] */
    __shared__ float red[LNP_WARPS];
    for (int i = threadIdx.x; i < H; i += 32 * LNP_WARPS) {
        sg[i] = gamma[i];
        sb[i] = RMS ? 0.f : beta[i];
    }
    /* the sequence's bounds come from the input block: read before the wait */
    const int ns = *n_seqs_dev;
    const bool live = (int)blockIdx.x < ns;
    const int s = rev ? ns - 1 - (int)blockIdx.x : (int)blockIdx.x;
    int r0 = 0, r1 = 0;
    if (live) {
        const int start = cu[s], end = cu[s + 1];
        r0 = start + (skip ? skip[s] : 0);
        r1 = end;
        if (mode == ENG_CU_POOL_CLS) r1 = r0 + 1;
        if (mode == ENG_CU_POOL_LAST) r0 = end - 1;
    }
    __syncthreads();
    ENG_CU_PDL_WAIT();
    if (!live) return;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, sl = lane & (LPR - 1), sub = lane / LPR;
    const int n = r1 - r0;
    uint4 nx[CPL];
#pragma unroll
    for (int k = 0; k < CPL; k++) nx[k] = make_uint4(0, 0, 0, 0);
    auto fetch = [&](int i) { /* row r0 + i's chunks, if it is pooled */
        if (i >= n) return;
        const bf16 *row = x + (size_t)(r0 + i) * H;
#pragma unroll
        for (int k = 0; k < CPL; k++) nx[k] = *(const uint4 *)(row + (sl + LPR * k) * 8);
    };
    float acc[CPL][8] = {};
    int g = w;
    fetch(g * RPW + sub);
    /* the trip count is the warp's (its lanes shuffle together); a row past
     * n computes on stale chunks and is not added */
    for (; g * RPW < n; g += LNP_WARPS) {
        const int i = g * RPW + sub;
        float v[CPL][8];
#pragma unroll
        for (int k = 0; k < CPL; k++) {
            const __nv_bfloat162 *h = (const __nv_bfloat162 *)&nx[k];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 a = __bfloat1622float2(h[j]);
                v[k][2 * j] = a.x;
                v[k][2 * j + 1] = a.y;
            }
        }
        fetch(i + SLOTS); /* in flight under this row's statistics */
        float mean = 0.f, rstd;
        if (RMS) {
            float q = 0.f;
#pragma unroll
            for (int k = 0; k < CPL; k++)
#pragma unroll
                for (int j = 0; j < 8; j++) q += v[k][j] * v[k][j];
            rstd = rsqrtf(eng_cu_lanes_sum<LPR>(q) / (float)H + eps);
        } else
            eng_cu_ln_stats<CPL, LPR>(v, H, eps, mean, rstd);
        if (i < n)
#pragma unroll
            for (int k = 0; k < CPL; k++)
#pragma unroll
                for (int j = 0; j < 8; j++) acc[k][j] += (v[k][j] - mean) * rstd;
    }
    if (RPW == 2)
#pragma unroll
        for (int k = 0; k < CPL; k++)
#pragma unroll
            for (int j = 0; j < 8; j++) acc[k][j] += __shfl_xor_sync(0xffffffffu, acc[k][j], 16);
    if (sub == 0)
#pragma unroll
        for (int k = 0; k < CPL; k++) {
            float *p = part + w * H + (sl + LPR * k) * 8;
            *(float4 *)p = make_float4(acc[k][0], acc[k][1], acc[k][2], acc[k][3]);
            *(float4 *)(p + 4) = make_float4(acc[k][4], acc[k][5], acc[k][6], acc[k][7]);
        }
    __syncthreads();
    /* the warps' partial sums in warp order, then the mean of the affine rows */
    const float inv = 1.f / (float)n;
    float pv[PER], ss = 0.f;
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int c = threadIdx.x + u * 32 * LNP_WARPS;
        pv[u] = 0.f;
        if (c < H) {
            float a = 0.f;
#pragma unroll
            for (int q = 0; q < LNP_WARPS; q++) a += part[q * H + c];
            pv[u] = a * inv * sg[c] + sb[c];
            if (c < dims) ss += pv[u] * pv[u];
        }
    }
    float scale = 1.f;
    if (normalize) {
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0) red[w] = ss;
        __syncthreads();
        float t = 0.f;
#pragma unroll
        for (int q = 0; q < LNP_WARPS; q++) t += red[q];
        scale = 1.f / fmaxf(sqrtf(t), 1e-12f);
    }
    float *o = out + (size_t)s * dims;
#pragma unroll
    for (int u = 0; u < PER; u++) {
        const int c = threadIdx.x + u * 32 * LNP_WARPS;
        if (c < dims) o[c] = pv[u] * scale;
    }
}

template <int CPL, int LPR, bool RMS>
static cudaError_t ln_pool_launch(cudaStream_t s, const bf16 *x, const float *gamma, const float *beta,
                                  const int32_t *cu, const int32_t *skip, const int *n_seqs_dev, int max_seqs,
                                  int H, int dims, int mode, int normalize, float eps, float *out, int rev) {
    const size_t smem = (size_t)(2 + LNP_WARPS) * H * sizeof(float);
    static bool attr = false; /* this instantiation's own (a shared flag would skip the others) */
    if (!attr) {
        cudaError_t e = cudaFuncSetAttribute(ln_pool_kernel<CPL, LPR, RMS>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        attr = true;
    }
    cudaError_t e = eng_cu_launch(ln_pool_kernel<CPL, LPR, RMS>, dim3(max_seqs), dim3(32 * LNP_WARPS), smem, s, x,
                                  gamma, beta, cu, skip, n_seqs_dev, H, dims, mode, normalize, eps, out, rev);
    return e != cudaSuccess ? e : cudaGetLastError();
}

int eng_cu_ln_pool_on = -1;

bool eng_cu_ln_pool_usable(int H) {
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("POSY_CUDA_LN_POOL");
        env = !(e && !strcmp(e, "0"));
    }
    const bool on = eng_cu_ln_pool_on >= 0 ? eng_cu_ln_pool_on > 0 : env > 0;
    return on && (H == 256 || H == 384 || H == 512 || H == 768 || H == 1024);
}

cudaError_t eng_cu_ln_pool(cudaStream_t s, const bf16 *x, const float *gamma, const float *beta,
                           const int32_t *cu_seqlens, const int32_t *skip, const int *n_seqs_dev, int max_seqs,
                           int H, int dims, int mode, int normalize, float eps, float *out) {
    if (max_seqs <= 0 || dims <= 0 || dims > H || !gamma) return cudaErrorInvalidValue;
    if (H != 256 && H != 384 && H != 512 && H != 768 && H != 1024) return cudaErrorNotSupported; /* before the order turns */
    const int rev = eng_cu_order_take(1); /* sequences last to first (eng_cu_order.c) */
#define LNP(C, L)                                                                                                 \
    (beta ? ln_pool_launch<C, L, false>(s, x, gamma, beta, cu_seqlens, skip, n_seqs_dev, max_seqs, H, dims, mode, \
                                        normalize, eps, out, rev)                                                 \
          : ln_pool_launch<C, L, true>(s, x, gamma, beta, cu_seqlens, skip, n_seqs_dev, max_seqs, H, dims, mode,  \
                                       normalize, eps, out, rev))
    switch (H) {
    case 256: return LNP(2, 16);
    case 384: return LNP(3, 16);
    case 512: return LNP(2, 32);
    case 768: return LNP(3, 32);
    case 1024: return LNP(4, 32);
    default: return cudaErrorNotSupported;
    }
#undef LNP
}

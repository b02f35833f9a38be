/* eng_cu_skinny: GEMM for few rows (M <= 64: one short query, a few
 * tokens), where the work is reading the weights once and the rest is
 * latency.  cuBLASLt's small-M kernels measured 3-6 us a GEMM on the H200
 * (ncu, bench_gpu --once), plus a split-K reduce kernel for K = 3072.
 *
 * Shape: one block owns 16 output columns (two mma n8 tiles) for all M
 * rows; its warps split K and each runs mma.sync m16n8k16 over its K range
 * with fragments loaded straight from global memory (X is tiny and stays in
 * L2; each weight row slice is a 32-byte sector per k-step), then the
 * partial sums meet in shared memory and one pass applies bias, GELU (the
 * tanh form, as cuBLASLt's epilogue, so both paths agree), the residual,
 * and the bf16 store.  Grid = N/16 blocks, so K split over warps is what
 * keeps enough loads in flight.  Rows past M read as zero; no split-K
 * reduce kernel, no workspace.
 *
 * v1 below and v2 (deep weight prefetch) are opt-in (POSY_CUDA_SKINNY=1
 * or 2 races them against cuBLASLt per GEMM): neither made a whole
 * one-query forward faster on the H200 as nodes between cuBLASLt's.  With
 * weights read from HBM, as in a real forward, cuBLASLt's small-M kernels
 * take 7.5-11 us a GEMM back to back and v2 matches them at best
 * (lab_gemm, bench/results/h200-skinny-*-2026-11-29-evening.*).  Their
 * successor, v3 (eng_cu_chain_gemm.cu), is what the engine runs for buckets
 * of <= 64 tokens (Qwen3: 32): the one-query chain, where every kernel is ours and
 * launched with PDL.
 */
#include "eng_cu_skinny.h"

static __device__ __forceinline__ uint32_t ldg32(const bf16 *p) {
    return __ldg((const unsigned int *)p);
}

/* One k-step (16 columns of X from k) of the block's 16 output columns
 * for all M rows: A fragments of X straight from global (tiny, L1/L2),
 * the weight fragments given; rows past M read as zero. */
template <int MT>
static __device__ __forceinline__ void skinny_step(float (*acc)[2][4], const bf16 *X, int M, int K, int k,
                                                   uint32_t b00, uint32_t b01, uint32_t b10, uint32_t b11) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
        const int r0 = mt * 16 + g, r1 = r0 + 8;
        const bf16 *x0 = X + (size_t)r0 * K + k + 2 * t;
        const bf16 *x1 = X + (size_t)r1 * K + k + 2 * t;
        uint32_t a[4];
        a[0] = r0 < M ? ldg32(x0) : 0u;
        a[1] = r1 < M ? ldg32(x1) : 0u;
        a[2] = r0 < M ? ldg32(x0 + 8) : 0u;
        a[3] = r1 < M ? ldg32(x1 + 8) : 0u;
        eng_mma16816(acc[mt][0], a, b00, b01);
        eng_mma16816(acc[mt][1], a, b10, b11);
    }
}

template <int MT, int WARPS>
__global__ void __launch_bounds__(WARPS * 32)
skinny_kernel(const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y, int M,
              int N, int K, int epi) {
    __shared__ float part[WARPS][MT * 16][17];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 16;
    const int ksteps = K / 16 / WARPS, kb = warp * ksteps * 16;
    float acc[MT][2][4];
    skinny_zero<MT>(acc);
    const bf16 *w0 = W + (size_t)(n0 + g) * K + kb + 2 * t;
    const bf16 *w1 = W + (size_t)(n0 + 8 + g) * K + kb + 2 * t;
#pragma unroll 2
    for (int ks = 0; ks < ksteps; ks++) {
        const int k = ks * 16;
        const uint32_t b00 = ldg32(w0 + k), b01 = ldg32(w0 + k + 8);
        const uint32_t b10 = ldg32(w1 + k), b11 = ldg32(w1 + k + 8);
        skinny_step<MT>(acc, X, M, K, kb + k, b00, b01, b10, b11);
    }
    skinny_finish<MT, WARPS>(acc, part, epi != ENG_CU_EPI_NONE ? bias + n0 : NULL, R ? R + n0 : NULL, N, Y + n0, N,
                             M, epi);
}

/* Version 2: the same block shape, but each warp issues the weight loads
 * of KU k-steps before any of their products, so a warp keeps KU x 512
 * bytes of weights in flight instead of ~1 KB: v1 streamed weights at
 * 0.5-0.7 TB/s (lab_gemm, L2-resident weights) and Qwen3's one-query GEMMs
 * (4-12 MB each, from HBM) ran at ~1 TB/s under cuBLASLt.  Blocks of 16
 * warps for long K on narrow N (Qwen3's o and down projections: 64 blocks)
 * split K further so enough warps stream. */
template <int MT, int WARPS, int KU>
__global__ void __launch_bounds__(WARPS * 32)
skinny2_kernel(const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y, int M,
               int N, int K, int epi) {
    __shared__ float part[WARPS][MT * 16][17];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 16;
    const int ksteps = K / 16 / WARPS, kb = warp * ksteps * 16;
    float acc[MT][2][4];
    skinny_zero<MT>(acc);
    const bf16 *w0 = W + (size_t)(n0 + g) * K + kb + 2 * t;
    const bf16 *w1 = W + (size_t)(n0 + 8 + g) * K + kb + 2 * t;
    for (int ks = 0; ks < ksteps; ks += KU) {
        uint32_t wb[KU][4];
#pragma unroll
        for (int u = 0; u < KU; u++)
            if (ks + u < ksteps) {
                const int k = (ks + u) * 16;
                wb[u][0] = ldg32(w0 + k); wb[u][1] = ldg32(w0 + k + 8);
                wb[u][2] = ldg32(w1 + k); wb[u][3] = ldg32(w1 + k + 8);
            }
#pragma unroll
        for (int u = 0; u < KU; u++)
            if (ks + u < ksteps) {
                const int k = (ks + u) * 16;
                skinny_step<MT>(acc, X, M, K, kb + k, wb[u][0], wb[u][1], wb[u][2], wb[u][3]);
            }
    }
    skinny_finish<MT, WARPS>(acc, part, epi != ENG_CU_EPI_NONE ? bias + n0 : NULL, R ? R + n0 : NULL, N, Y + n0, N,
                             M, epi);
}

/* v2's warps a block: 16 for K >= 2048 on N <= 2048 (up to 32 rows: the
 * partial sums must fit 48 KB of shared memory), 8 for K >= 768, else 4. */
static int skinny2_warps(int M, int N, int K) {
    if (K >= 2048 && N <= 2048 && M <= 32) return 16;
    return K >= 768 ? 8 : 4;
}

int eng_cu_skinny_version = 1;

int eng_cu_gemm_small_ok(int M, int N, int K) {
    if (M < 1 || M > 64 || N % 16 || K % 16) return 0;
    const int warps = K >= 768 ? 8 : 4;
    return (K / 16) % warps == 0 && (K / 16) % skinny2_warps(M, N, K) == 0;
}

template <int MT>
static void launch2_mt(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias,
                       const bf16 *R, bf16 *Y, int M, int N, int K, int epi) {
    const int w = skinny2_warps(M, N, K);
    if constexpr (MT <= 2) {
        if (w == 16) {
            skinny2_kernel<MT, 16, 8><<<N / 16, 512, 0, s>>>(X, W, bias, R, Y, M, N, K, epi);
            return;
        }
    }
    if (w == 8)
        skinny2_kernel<MT, 8, 8><<<N / 16, 256, 0, s>>>(X, W, bias, R, Y, M, N, K, epi);
    else
        skinny2_kernel<MT, 4, 8><<<N / 16, 128, 0, s>>>(X, W, bias, R, Y, M, N, K, epi);
}

template <int MT>
static void launch_mt(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias,
                      const bf16 *R, bf16 *Y, int M, int N, int K, int epi) {
    if (K >= 768)
        skinny_kernel<MT, 8><<<N / 16, 256, 0, s>>>(X, W, bias, R, Y, M, N, K, epi);
    else
        skinny_kernel<MT, 4><<<N / 16, 128, 0, s>>>(X, W, bias, R, Y, M, N, K, epi);
}

cudaError_t eng_cu_gemm_small(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias,
                              const bf16 *R, bf16 *Y, int M, int N, int K, int epi) {
    if (!eng_cu_gemm_small_ok(M, N, K) || ENG_CU_EPI_GATED(epi)) return cudaErrorInvalidValue;
    if (eng_cu_skinny_version == 2) {
        switch ((M + 15) / 16) {
        case 1: launch2_mt<1>(s, X, W, bias, R, Y, M, N, K, epi); break;
        case 2: launch2_mt<2>(s, X, W, bias, R, Y, M, N, K, epi); break;
        case 3: launch2_mt<3>(s, X, W, bias, R, Y, M, N, K, epi); break;
        default: launch2_mt<4>(s, X, W, bias, R, Y, M, N, K, epi); break;
        }
        return cudaGetLastError();
    }
    switch ((M + 15) / 16) {
    case 1: launch_mt<1>(s, X, W, bias, R, Y, M, N, K, epi); break;
    case 2: launch_mt<2>(s, X, W, bias, R, Y, M, N, K, epi); break;
    case 3: launch_mt<3>(s, X, W, bias, R, Y, M, N, K, epi); break;
    default: launch_mt<4>(s, X, W, bias, R, Y, M, N, K, epi); break;
    }
    return cudaGetLastError();
}

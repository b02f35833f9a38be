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
 */
#include "eng_cu.h"

static __device__ __forceinline__ void mma16816s(float *c, const uint32_t *a, uint32_t b0,
                                                 uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ uint32_t ldg32(const bf16 *p) {
    return __ldg((const unsigned int *)p);
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
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    const bf16 *w0 = W + (size_t)(n0 + g) * K + kb + 2 * t;
    const bf16 *w1 = W + (size_t)(n0 + 8 + g) * K + kb + 2 * t;
#pragma unroll 2
    for (int ks = 0; ks < ksteps; ks++) {
        const int k = ks * 16;
        const uint32_t b00 = ldg32(w0 + k), b01 = ldg32(w0 + k + 8);
        const uint32_t b10 = ldg32(w1 + k), b11 = ldg32(w1 + k + 8);
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            const int r0 = mt * 16 + g, r1 = r0 + 8;
            const bf16 *x0 = X + (size_t)r0 * K + kb + k + 2 * t;
            const bf16 *x1 = X + (size_t)r1 * K + kb + k + 2 * t;
            uint32_t a[4];
            a[0] = r0 < M ? ldg32(x0) : 0u;
            a[1] = r1 < M ? ldg32(x1) : 0u;
            a[2] = r0 < M ? ldg32(x0 + 8) : 0u;
            a[3] = r1 < M ? ldg32(x1 + 8) : 0u;
            mma16816s(acc[mt][0], a, b00, b01);
            mma16816s(acc[mt][1], a, b10, b11);
        }
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                part[warp][mt * 16 + g + (e >> 1) * 8][nt * 8 + 2 * t + (e & 1)] = acc[mt][nt][e];
    __syncthreads();
    for (int i = threadIdx.x; i < M * 16; i += WARPS * 32) {
        const int r = i >> 4, c = i & 15;
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) v += part[w][r][c];
        if (epi != ENG_CU_EPI_NONE) v += __bfloat162float(bias[n0 + c]);
        if (epi == ENG_CU_EPI_BIAS_GELU)
            v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        if (R) v += __bfloat162float(R[(size_t)r * N + n0 + c]);
        Y[(size_t)r * N + n0 + c] = __float2bfloat16(v);
    }
}

int eng_cu_gemm_small_ok(int M, int N, int K) {
    if (M < 1 || M > 64 || N % 16 || K % 16) return 0;
    const int warps = K >= 768 ? 8 : 4;
    return (K / 16) % warps == 0;
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
    if (!eng_cu_gemm_small_ok(M, N, K)) return cudaErrorInvalidValue;
    switch ((M + 15) / 16) {
    case 1: launch_mt<1>(s, X, W, bias, R, Y, M, N, K, epi); break;
    case 2: launch_mt<2>(s, X, W, bias, R, Y, M, N, K, epi); break;
    case 3: launch_mt<3>(s, X, W, bias, R, Y, M, N, K, epi); break;
    default: launch_mt<4>(s, X, W, bias, R, Y, M, N, K, epi); break;
    }
    return cudaGetLastError();
}

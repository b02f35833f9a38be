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
 * (lab_gemm, bench/results/h200-skinny-*-2026-11-29-evening.*).  v3,
 * further down, is what the engine runs for buckets of <= 32 tokens: the
 * one-query chain, where every kernel is ours and launched with PDL.
 */
#include "eng_cu_frag.h"

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

/* The warps' partial sums of the block's 16 columns meet in shared memory;
 * one pass adds bias, GELU (the tanh form, as cuBLASLt's epilogue, so both
 * paths agree), the residual, and stores bf16. */
template <int MT, int WARPS>
static __device__ __forceinline__ void skinny_finish(const float (*acc)[2][4], float (*part)[MT * 16][17],
                                                     const bf16 *bias, const bf16 *R, bf16 *Y, int M, int N,
                                                     int n0, int epi) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
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
        skinny_step<MT>(acc, X, M, K, kb + k, b00, b01, b10, b11);
    }
    skinny_finish<MT, WARPS>(acc, part, bias, R, Y, M, N, n0, epi);
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
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
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
    skinny_finish<MT, WARPS>(acc, part, bias, R, Y, M, N, n0, epi);
}

/* v2's warps a block: 16 for K >= 2048 on N <= 2048 (up to 32 rows: the
 * partial sums must fit 48 KB of shared memory), 8 for K >= 768, else 4. */
static int skinny2_warps(int M, int N, int K) {
    if (K >= 2048 && N <= 2048 && M <= 32) return 16;
    return K >= 768 ? 8 : 4;
}

/* Version 3, for a chain of programmatic dependent launches (the
 * one-query path, eng_cu_model.cu's chain mode): every kernel of the
 * forward is ours and launched with PDL, so this one can start while its
 * predecessor still runs.  Before griddepcontrol.wait -- i.e. overlapping
 * the predecessor -- it lets its own dependents launch and requests its
 * whole weight slice (16 columns x K) into shared memory with cp.async;
 * after the wait only X (tiny, in L2) remains to be read, a warp's share
 * in one burst of 16-byte loads into registers (a few bursts for 17-64
 * rows and long K, at most 64 registers of X at a time).  lab_chain measured
 * the floor of such a step at ~1.5 us (2.1 us as a plain graph node).
 *
 * A warp owns G groups of 64 k (K = 64 * G * WARPS).  Inside a group a
 * lane loads 16 consecutive values of its X row and of its weight row and
 * feeds them to 4 mma steps: the k order inside the group is permuted
 * identically for A and B, which the sum does not see.  The warps'
 * partial tiles meet in shared memory in a fixed order (skinny_finish),
 * so results are reproducible bit for bit. */
/* groups of X a lane holds at once: the largest divisor of G with at most
 * 8 uint4 pairs (64 registers) for the MT m tiles */
static __host__ __device__ constexpr int skinny3_chunk(int MT, int G) {
    int c = G;
    while (c > 1 && (G % c || MT * c > 8)) c--;
    return c;
}

static __device__ __forceinline__ void sk3_cp16(void *dst, const void *src) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

/* The norm prologue (NORM): X's rows are normalised in registers before
 * the products -- LayerNorm (mean and variance in two exact passes, as
 * eng_cu_ln_finish) or, with no beta, RMSNorm -- with the row statistics
 * summed over the lanes and warps that hold the row; rows at or past the
 * real count read as zero, as the norm kernels write them.  Block 0 also
 * stores the normalised rows (out) when the forward needs them again as a
 * residual.  Needs a warp's whole share of X in registers (one chunk). */
template <int MT, int G, int WARPS>
static __device__ __forceinline__ void sk3_norm(uint4 (*xa)[2][G][2], const eng_cu_chain_norm &nm, const float *gs,
                                                const float *bs, float (*red)[MT * 16], int M, int K, int kw) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
    const int n_real = min(M, *nm.n_rows_dev);
    const bool rms = nm.beta == NULL;
    float mean[MT][2], rstd[MT][2];
    for (int pass = rms ? 1 : 0; pass < 2; pass++) {
        float sum[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float a = 0.f;
                const float mu = pass ? (rms ? 0.f : mean[mt][h]) : 0.f;
#pragma unroll
                for (int q = 0; q < G; q++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const __nv_bfloat162 *b2 = (const __nv_bfloat162 *)&xa[mt][h][q][e];
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            const float2 f = __bfloat1622float2(b2[i]);
                            if (pass) a += (f.x - mu) * (f.x - mu) + (f.y - mu) * (f.y - mu);
                            else a += f.x + f.y;
                        }
                    }
                a += __shfl_xor_sync(0xffffffffu, a, 1);
                a += __shfl_xor_sync(0xffffffffu, a, 2);
                sum[mt][h] = a;
            }
        if ((lane & 3) == 0)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++) red[warp][mt * 16 + 8 * h + g] = sum[mt][h];
        __syncthreads();
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float a = 0.f;
                for (int w = 0; w < WARPS; w++) a += red[w][mt * 16 + 8 * h + g];
                if (pass) rstd[mt][h] = rsqrtf(a / (float)K + nm.eps);
                else mean[mt][h] = a / (float)K;
            }
        __syncthreads(); /* red is reused by the next pass */
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = mt * 16 + 8 * h + g;
            const float mu = rms ? 0.f : mean[mt][h], rs = rstd[mt][h];
#pragma unroll
            for (int q = 0; q < G; q++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int k = kw + 64 * q + 8 * e;
                    __nv_bfloat162 *b2 = (__nv_bfloat162 *)&xa[mt][h][q][e];
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const float2 f = __bfloat1622float2(b2[i]);
                        float y0 = (f.x - mu) * rs * gs[k + 2 * i], y1 = (f.y - mu) * rs * gs[k + 2 * i + 1];
                        if (!rms) { y0 += bs[k + 2 * i]; y1 += bs[k + 2 * i + 1]; }
                        b2[i] = r < n_real ? __floats2bfloat162_rn(y0, y1) : __floats2bfloat162_rn(0.f, 0.f);
                    }
                    if (nm.out && blockIdx.x == 0 && r < M) *(uint4 *)(nm.out + (size_t)r * K + k) = xa[mt][h][q][e];
                }
        }
}

template <int MT, int WARPS, int G, bool NORM>
__global__ void __launch_bounds__(WARPS * 32)
skinny3_kernel(const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y, int M,
               int N, int K, int epi, eng_cu_chain_norm nm) {
    extern __shared__ __align__(16) unsigned char sk3_smem[];
    bf16 *Ws = (bf16 *)sk3_smem; /* [16][K + 8] */
    float *gs = (float *)(sk3_smem + (size_t)16 * (K + 8) * 2), *bs = gs + K; /* NORM: gamma, beta [K] */
    float(*part)[MT * 16][17] = (float(*)[MT * 16][17])(NORM ? bs + K : gs);
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    const int n0 = blockIdx.x * 16, ldw = K + 8, cpr = K / 8;
    for (int c = threadIdx.x; c < 16 * cpr; c += WARPS * 32) {
        const int r = c / cpr, cc = (c - r * cpr) * 8;
        sk3_cp16(Ws + r * ldw + cc, W + (size_t)(n0 + r) * K + cc);
    }
    if constexpr (NORM)
        for (int c = threadIdx.x; c < K / 4; c += WARPS * 32) {
            sk3_cp16(gs + 4 * c, nm.gamma + 4 * c);
            if (nm.beta) sk3_cp16(bs + 4 * c, nm.beta + 4 * c);
        }
    eng_async_commit();
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int kw = warp * G * 64 + 16 * t; /* this lane's first k */
    float acc[MT][2][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    constexpr int GC = skinny3_chunk(MT, G);
#pragma unroll
    for (int c = 0; c < G / GC; c++) {
        /* X: rows g + 8h of every m tile, GC groups of 16 values, all in
         * flight at once (the first chunk also while the weights land) */
        uint4 xa[MT][2][GC][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = mt * 16 + 8 * h + g;
#pragma unroll
                for (int q = 0; q < GC; q++) {
                    const uint4 *src = (const uint4 *)(X + (size_t)r * K + kw + 64 * (c * GC + q));
                    xa[mt][h][q][0] = r < M ? __ldcg(src) : make_uint4(0, 0, 0, 0);
                    xa[mt][h][q][1] = r < M ? __ldcg(src + 1) : make_uint4(0, 0, 0, 0);
                }
            }
        if (c == 0) {
            eng_async_wait<0>();
            __syncthreads();
        }
        if constexpr (NORM) {
            static_assert(!NORM || GC == G, "the norm needs the whole row share in registers");
            sk3_norm<MT, G, WARPS>(xa, nm, gs, bs, (float(*)[MT * 16])part, M, K, kw);
        }
#pragma unroll
        for (int q = 0; q < GC; q++) {
            uint32_t wb[2][8];
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                const uint4 *ws = (const uint4 *)(Ws + (nt * 8 + g) * ldw + kw + 64 * (c * GC + q));
                *(uint4 *)&wb[nt][0] = ws[0];
                *(uint4 *)&wb[nt][4] = ws[1];
            }
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint32_t *lo = (const uint32_t *)&xa[mt][0][q][0], *hi = (const uint32_t *)&xa[mt][1][q][0];
                    const uint32_t a[4] = {lo[2 * j], hi[2 * j], lo[2 * j + 1], hi[2 * j + 1]};
                    eng_mma16816(acc[mt][0], a, wb[0][2 * j], wb[0][2 * j + 1]);
                    eng_mma16816(acc[mt][1], a, wb[1][2 * j], wb[1][2 * j + 1]);
                }
        }
    }
    skinny_finish<MT, WARPS>(acc, part, bias, R, Y, M, N, n0, epi);
}

/* v3's split of K: G groups of 64 a warp, at most 8 warps, G from the
 * list its kernels are built for; 0 when K does not split so. */
static void skinny3_split(int K, int *warps, int *groups) {
    static const int gs[] = {1, 2, 3, 4, 6};
    *warps = *groups = 0;
    if (K % 64) return;
    for (int i = 0; i < 5; i++) {
        const int n = K / 64;
        if (n % gs[i] == 0 && (n / gs[i] == 8 || n / gs[i] == 6 || n / gs[i] == 4)) {
            *warps = n / gs[i];
            *groups = gs[i];
            return;
        }
    }
}

/* m tiles a launch is built for: 1, 2 or 4 (33..64 rows take 4) */
static int skinny3_mt(int M) { return M <= 16 ? 1 : M <= 32 ? 2 : 4; }

static size_t skinny3_smem(int M, int K, int warps, int norm) {
    return (size_t)16 * (K + 8) * 2 + (norm ? (size_t)8 * K : 0) + (size_t)warps * skinny3_mt(M) * 16 * 17 * 4;
}

int eng_cu_gemm_chain_ok(int M, int N, int K, int norm) {
    int w, gq;
    skinny3_split(K, &w, &gq);
    const int mt = skinny3_mt(M);
    /* the norm prologue needs X in one chunk (see skinny3_chunk), and its
     * statistics spill registers beyond 4 uint4 pairs of X a lane */
    return M >= 1 && M <= 64 && N % 16 == 0 && w > 0 && (!norm || mt * gq <= 4) &&
           skinny3_smem(M, K, w, norm) <= 200 * 1024;
}

template <int MT, int WARPS, int G, bool NORM>
static cudaError_t launch3(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                           bf16 *Y, int M, int N, int K, int epi, const eng_cu_chain_norm &nm) {
    if constexpr (NORM && MT * G > 4) {
        return cudaErrorInvalidValue;
    } else {
        const size_t smem = skinny3_smem(M, K, WARPS, NORM);
        static int attr_done = 0; /* per instantiation: raise the shared-memory cap once */
        if (!attr_done) {
            cudaError_t e = cudaFuncSetAttribute(skinny3_kernel<MT, WARPS, G, NORM>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
            if (e != cudaSuccess) return e;
            attr_done = 1;
        }
        return eng_cu_launch(skinny3_kernel<MT, WARPS, G, NORM>, dim3(N / 16), dim3(WARPS * 32), smem, s, X, W,
                             bias, R, Y, M, N, K, epi, nm);
    }
}

template <int MT>
static cudaError_t launch3_mt(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                              bf16 *Y, int M, int N, int K, int epi, const eng_cu_chain_norm *nm) {
    int w, gq;
    skinny3_split(K, &w, &gq);
    const eng_cu_chain_norm none = {NULL, NULL, 0.f, NULL, NULL};
#define SK3(WW, GG)                                                                          \
    if (w == WW && gq == GG)                                                                 \
        return nm ? launch3<MT, WW, GG, true>(s, X, W, bias, R, Y, M, N, K, epi, *nm)        \
                  : launch3<MT, WW, GG, false>(s, X, W, bias, R, Y, M, N, K, epi, none)
    SK3(8, 1); SK3(8, 2); SK3(8, 3); SK3(8, 4); SK3(8, 6);
    SK3(6, 1); SK3(6, 2); SK3(6, 3); SK3(6, 4); SK3(6, 6);
    SK3(4, 1); SK3(4, 2); SK3(4, 3);
#undef SK3
    return cudaErrorInvalidValue;
}

cudaError_t eng_cu_gemm_chain(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                              bf16 *Y, int M, int N, int K, int epi, const eng_cu_chain_norm *nm) {
    if (!eng_cu_gemm_chain_ok(M, N, K, nm != NULL) || (nm && (!nm->gamma || !nm->n_rows_dev)))
        return cudaErrorInvalidValue;
    switch (skinny3_mt(M)) {
    case 1: return launch3_mt<1>(s, X, W, bias, R, Y, M, N, K, epi, nm);
    case 2: return launch3_mt<2>(s, X, W, bias, R, Y, M, N, K, epi, nm);
    default: return launch3_mt<4>(s, X, W, bias, R, Y, M, N, K, epi, nm);
    }
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
    if (!eng_cu_gemm_small_ok(M, N, K)) return cudaErrorInvalidValue;
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

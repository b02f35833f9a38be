/* eng_cu_gemm_rowln_res: Y = LayerNorm(X W^T + b + R) for the encoders'
 * O projection at hidden size 256 / 384 on the saturated step, with W
 * held in shared memory for the whole kernel -- half of it in each CTA of
 * a cluster of two.
 *
 * Why: eng_cu_gemm_rowln.cu's whole-row tiles read W (384 x 384, 295 KB)
 * from L2 once per 64 rows: at 65536 rows that is 302 MB of L2 -> SM
 * traffic against X's 50 MB, and its epilogue runs with no product under
 * it; all-MiniLM-L6's O + LayerNorm took 83 us a layer (ncu, run 24) where
 * its products alone need ~24 us of tensor time.  Here each CTA of a pair
 * keeps its half of W's rows (N/2 x K: 147 KB at N = K = 384) resident,
 * so only X's rows stream, and computes the same 64 rows' other half of
 * the columns.  The row's LayerNorm meets across the pair through
 * distributed shared memory: each CTA sends its half's (mean, M2) of its
 * rows to its partner by st.async, whose 16 bytes a row-holding lane
 * complete the partner's mbarrier transaction (no cluster-scope release),
 * and both combine them in rank order (Chan's formula: M2 = M2a + M2b +
 * (ma - mb)^2 n/2 for halves of n), so the two halves of a row use one mu
 * and one rs.
 * The two consumer warpgroups take alternate tiles (ping-pong), so one's
 * epilogue runs under the other's products; the producer thread fills a
 * ring of X's 64 x 64 k-slices in tile order, asks L2 for each tile's
 * residual rows as it starts the tile (a TMA prefetch), and each
 * warpgroup reads its tile's residual into registers before its products.
 * Bias, gamma and beta of the CTA's columns sit in shared memory as fp32
 * (through L1 they kept missing: the streaming residual evicts them from
 * the ~29 KB L1 left beside 227 KB of shared memory).  W arrives by
 * k-slice, a barrier each, so the first products start on the first
 * slice.  Output through two 8 KB images a warpgroup (64 x 64 boxes,
 * 128-byte swizzle, TMA stores).
 *
 * Exchange buffers: [warpgroup][parity of its tile count][holder] -- a CTA
 * sends tile j + 2's statistics only after finishing tile j + 1, which
 * needed the partner's j + 1, which the partner sent after reading j's:
 * two buffers suffice.
 *
 * Measured on the H200 (2026-12-04 runs 42-45, docs/BENCHMARKS.md "The O
 * projection + LayerNorm with W resident in CTA pairs"): at 65536 x 384 x
 * 384 63.1 us against 84.9 for eng_cu_gemm_rowln.cu's streaming tiles and
 * 90.9 for cuBLASLt + add_ln (the first form, cluster-scope arrivals and
 * parameters through L1, took 78.7); saturated all-MiniLM-L6 steps
 * 1.016-1.028x the streaming kernel's at equal 128-token sequences.  ncu
 * (run 45): DRAM 37% busy, issue slots 36%; the stalls are spread over the
 * warpgroups' turns, the exchange and the epilogue.
 *
 * Where it applies (eng_cu_gemm_wg_rowln_res_ok): sm_90a, N 256 or 384,
 * K % 64 == 0, at most 10 k-slices, and W's half plus at least three ring
 * slots within the 227 KB of shared memory (K <= 384 at N = 384, <= 640
 * at 256), so the down projection (K = 4H) keeps eng_cu_gemm_rowln.cu.
 * On unless POSY_CUDA_RL_RES=0 (eng_cu_rl_res_on for the labs).  Same
 * contract as eng_cu_gemm_wg_rowln (its caller, which also needs R 16-byte
 * aligned for the prefetch's tensor map): results agree with it to
 * rounding (the variance is summed in another order), every row < M is
 * written, deterministic.  Tested by dev/cuda/lab_wgmma.cu (LAB_WG_ROWLN:
 * both kernels against fp64, M = 1 .. 40000, both walk directions, 1-10
 * k-slices) and e2e_vs_transformers.
 */
#include "eng_cu_wres.h"
#include <stdlib.h>
#include <string.h>

/* alignment fix-up, barriers (full, empty, W, exchange), exchange buffers */
#define RR_EXTRA (1024 + 256 + 2 * 2 * 32 * 16)

/* W's half, the images, the bias / gamma / beta of the CTA's columns (fp32) */
static __host__ __device__ constexpr int rr_fixed(int NW, int K) {
    return wr_w_bytes(NW, K) + 2 * 2 * WR_IMG_BYTES + RR_EXTRA + 12 * NW;
}
static int rr_stages(int NW, int K) {
    const int st = (WR_SMEM_MAX - rr_fixed(NW, K)) / WR_A_BYTES;
    return st > WR_ST_MAX ? WR_ST_MAX : st;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
static __device__ __forceinline__ uint32_t rr_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
static __device__ __forceinline__ uint32_t rr_map(uint32_t a, uint32_t rank) {
    uint32_t r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    return r;
}
static __device__ __forceinline__ void rr_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
/* 16 bytes into the partner's shared memory, counted by the partner's
 * mbarrier as transaction bytes; and the local arming of such a phase */
static __device__ __forceinline__ void rr_st_async(uint32_t a, float x, float y, float z, float w, uint32_t bar) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, [%5];\n"
                 ::"r"(a), "f"(x), "f"(y), "f"(z), "f"(w), "r"(bar)
                 : "memory");
}
static __device__ __forceinline__ void rr_arm_bytes(uint32_t bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
/* one 64 x 64 box of R asked into L2 ahead of its reads */
static __device__ __forceinline__ void rr_prefetch_l2(const CUtensorMap *map, int c0, int c1) {
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n" ::"l"((uint64_t)map), "r"(c0),
                 "r"(c1)
                 : "memory");
}
#endif

template <int NW, bool HASR>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(WR_THREADS, 1)
    rr_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
              const __grid_constant__ CUtensorMap ty, const __grid_constant__ CUtensorMap tr,
              const bf16 *__restrict__ bias, const bf16 *__restrict__ R, const float *__restrict__ gamma,
              const float *__restrict__ beta, float eps, int M, int K, int ST, int rev) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(NW == 128 || NW == 192, "the wgmma widths the tile uses");
    constexpr int N = 2 * NW, NBOX = NW / 64;
    extern __shared__ unsigned char rr_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)rr_raw + 1023) & ~(uintptr_t)1023);
    const int KT = K / WR_BK;
    unsigned char *sW = base, *sA = sW + wr_w_bytes(NW, K), *img = sA + ST * WR_A_BYTES;
    uint64_t *full = (uint64_t *)(img + 2 * 2 * WR_IMG_BYTES), *empty = full + WR_ST_MAX;
    uint64_t *wbar = empty + WR_ST_MAX, *xbar = wbar + WR_KT_MAX; /* wbar: a k-slice of W each; xbar: [warpgroup][parity] */
    float4 *xch = (float4 *)((unsigned char *)full + 256); /* [warpgroup][parity][row-holding lane] */
    float2 *pb = (float2 *)(xch + 2 * 2 * 32), *pg = pb + NW / 2, *pe = pg + NW / 2; /* bias, gamma, beta pairs */
    const uint32_t rank = rr_rank(), peer = rank ^ 1u;
    const int cid = blockIdx.x >> 1, ncl = gridDim.x >> 1, tiles = (M + WR_BM - 1) / WR_BM;
    const int warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) {
        wr_bars_init(full, empty, wbar, ST, KT);
        for (int i = 0; i < 4; i++) wg_bar_init(&xbar[i], 1); /* the local arming; the partner's bytes complete it */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    for (int c = threadIdx.x; c < NW / 2; c += WR_THREADS) { /* the CTA's columns' parameters, once */
        const int g = (int)rank * NW + 2 * c;
        pb[c] = __bfloat1622float2(*(const __nv_bfloat162 *)(bias + g));
        pg[c] = *(const float2 *)(gamma + g);
        pe[c] = *(const float2 *)(beta + g);
    }
    __syncthreads();
    rr_cluster_sync(); /* the partner's barriers exist before anything is sent to them */
    if (warp >= 8) { /* the producer warpgroup: one thread issues, all give registers back */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 256) {
            wr_produce<NW>(&ta, &tb, sW, sA, full, empty, wbar, (int)rank * NW, KT, ST, cid, ncl, tiles, rev,
                           [&](int u) {
                               if constexpr (HASR) /* the tile's residual rows into L2 ahead of their reads */
                                   for (int q = 0; q < NBOX; q++)
                                       rr_prefetch_l2(&tr, (int)rank * NW + 64 * q, u * WR_BM);
                           });
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        const int wgp = warp >> 2, lane = threadIdx.x & 31, t2 = 2 * (lane & 3), tq = lane & 3;
        const int r0 = (warp & 3) * 16 + (lane >> 2); /* the thread's rows r0, r0 + 8 of a tile */
        const int c0 = (int)rank * NW + t2;            /* its columns c0 + 8j, + 1 (pairs tq + 4j) */
        const bool lead = (threadIdx.x & 127) == 0;    /* its warpgroup's thread that stores and arms */
        const bool holder = (lane & 3) == 0;           /* sends its two rows' statistics */
        const int slot = (warp & 3) * 8 + (lane >> 2); /* the holder's float4 in an exchange buffer */
        const uint32_t img0 = wg_smem(img + wgp * 2 * WR_IMG_BYTES) + r0 * 128 + 2 * t2;
        const int key = r0 & 7;
        const uint32_t pb_s = wg_smem(pb), pg_s = wg_smem(pg), pe_s = wg_smem(pe);
        float d[NW / 2];
#pragma unroll
        for (int q = 0; q < NW / 2; q++) d[q] = 0.f;
        uint32_t rp[HASR ? 2 : 1][HASR ? NW / 8 : 1]; /* the tile's residual pairs, as bf16x2 */
        /* the ring position of this warpgroup's first slice: tile wgp's first */
        int s = (wgp * KT) % ST, ph = ((wgp * KT) / ST) & 1;
        int nbox = 0; /* boxes this warpgroup has stored: their image alternates */
        for (int i = wgp, n = 0;; i += 2, n++) {
            const int t = cid + i * ncl;
            if (t >= tiles) break;
            const int m0 = (rev ? tiles - 1 - t : t) * WR_BM, row0 = m0 + r0;
            const bf16 *rr0 = HASR && row0 < M ? R + (size_t)row0 * N + c0 : nullptr;
            const bf16 *rr1 = HASR && row0 + 8 < M ? R + (size_t)(row0 + 8) * N + c0 : nullptr;
            if constexpr (HASR) { /* read now, used after the products (asked into L2 by the producer) */
#pragma unroll
                for (int j = 0; j < NW / 8; j++) {
                    rp[0][j] = rr0 ? *(const uint32_t *)(rr0 + 8 * j) : 0u;
                    rp[1][j] = rr1 ? *(const uint32_t *)(rr1 + 8 * j) : 0u;
                }
            }
            wr_products<NW>(d, sA, sW, full, empty, wbar, s, ph, KT, ST, wgp, n == 0, i > 0, t + ncl < tiles);

            /* v = acc + b + R in place; d[4j + 2i + e]: row r0 + 8i, column c0 + 8j + e */
            float s0 = 0.f, s1 = 0.f;
#pragma unroll
            for (int j = 0; j < NW / 8; j++) {
                const float2 bb = wr_lds2(pb_s + 8 * (tq + 4 * j));
                float2 x0 = make_float2(0.f, 0.f), x1 = x0;
                if constexpr (HASR) {
                    x0 = __bfloat1622float2(*(const __nv_bfloat162 *)&rp[0][j]);
                    x1 = __bfloat1622float2(*(const __nv_bfloat162 *)&rp[1][j]);
                }
                wg_ln_add2(d + 4 * j, bb, x0, x1, s0, s1);
            }
            /* this half's mean and sum of squared deviations, per row */
            const float m_0 = wg_quad_sum(s0) * (1.f / NW), m_1 = wg_quad_sum(s1) * (1.f / NW);
            float q0 = 0.f, q1 = 0.f;
#pragma unroll
            for (int j = 0; j < NW / 8; j++) wg_ln_dev2(d + 4 * j, m_0, m_1, q0, q1);
            q0 = wg_quad_sum(q0);
            q1 = wg_quad_sum(q1);
            /* to the partner, then its halves of the same rows from it: each
             * holder's 16 bytes land in the partner's buffer and count
             * toward its barrier's phase, which its lead armed for 512 */
            const int xb = wgp * 2 + (n & 1);
            float4 *xq = xch + (size_t)xb * 32;
            if (lead) rr_arm_bytes(wg_smem(&xbar[xb]), 32 * 16);
            if (holder)
                rr_st_async(rr_map(wg_smem(xq + slot), peer), m_0, q0, m_1, q1, rr_map(wg_smem(&xbar[xb]), peer));
            wg_bar_wait(&xbar[xb], (n >> 1) & 1);
            const float4 p = xq[slot];
            /* both CTAs combine in rank order, so a row gets one mu and one rs */
            const float ma0 = rank ? p.x : m_0, mb0 = rank ? m_0 : p.x, Ma0 = rank ? p.y : q0, Mb0 = rank ? q0 : p.y;
            const float ma1 = rank ? p.z : m_1, mb1 = rank ? m_1 : p.z, Ma1 = rank ? p.w : q1, Mb1 = rank ? q1 : p.w;
            const float mu0 = 0.5f * (ma0 + mb0), mu1 = 0.5f * (ma1 + mb1);
            const float dm0 = ma0 - mb0, dm1 = ma1 - mb1;
            const float rs0 = rsqrtf(((Ma0 + Mb0) + dm0 * dm0 * (0.5f * NW)) * (1.f / N) + eps);
            const float rs1 = rsqrtf(((Ma1 + Mb1) + dm1 * dm1 * (0.5f * NW)) * (1.f / N) + eps);

            /* out, a 64 x 64 box at a time through this warpgroup's two images */
#pragma unroll
            for (int q = 0; q < NBOX; q++, nbox++)
                wr_store_box(&ty, img + wgp * 2 * WR_IMG_BYTES, img0, wgp, lead, nbox, (int)rank * NW + 64 * q, m0,
                             [&](uint32_t line) {
#pragma unroll
                                 for (int jj = 0; jj < 8; jj++) {
                                     const int j = 8 * q + jj;
                                     const float2 g = wr_lds2(pg_s + 8 * (tq + 4 * j)),
                                                  be = wr_lds2(pe_s + 8 * (tq + 4 * j));
                                     wg_ln_put2(line + ((jj ^ key) << 4), d + 4 * j, mu0, rs0, mu1, rs1, g, be);
                                 }
                             });
        }
        if (lead) wg_store_wait();
    }
    /* every byte the partner sends here was waited for above; this keeps
     * either CTA's shared memory alive until both are done with it */
    rr_cluster_sync();
#else
    __trap(); /* eng_cu_gemm_wg_rowln_res_ok never lets another architecture launch this */
#endif
}

/* ---- host side ---------------------------------------------------------------- */

int eng_cu_rl_res_on = -1;

static bool rr_on(void) {
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("POSY_CUDA_RL_RES");
        env = !(e && !strcmp(e, "0"));
    }
    return eng_cu_rl_res_on >= 0 ? eng_cu_rl_res_on > 0 : env > 0;
}

int eng_cu_gemm_wg_rowln_res_ok(int M, int N, int K) {
    return rr_on() && M >= 1 && (N == 256 || N == 384) && K >= WR_BK && K % WR_BK == 0 && K / WR_BK <= WR_KT_MAX &&
           rr_fixed(N / 2, K) < WR_SMEM_MAX && rr_stages(N / 2, K) >= 3 && eng_cu_gemm_wg_available();
}

template <int NW, bool HASR>
static cudaError_t rr_launch(cudaStream_t s, const CUtensorMap &ta, const CUtensorMap &tb, const CUtensorMap &ty,
                             const CUtensorMap &tr, const bf16 *bias, const bf16 *R, const float *gamma,
                             const float *beta, float eps, int M, int K) {
    const int ST = rr_stages(NW, K), smem = rr_fixed(NW, K) + ST * WR_A_BYTES;
    static int clusters; /* how many pairs fit at once (0: not yet asked) */
    if (!clusters) {
        if (cudaFuncSetAttribute(rr_kernel<NW, HASR>, cudaFuncAttributeMaxDynamicSharedMemorySize, WR_SMEM_MAX) !=
            cudaSuccess)
            return cudaErrorInvalidValue;
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(2 * 66);
        cfg.blockDim = dim3(WR_THREADS);
        cfg.dynamicSmemBytes = WR_SMEM_MAX;
        int n = 0;
        if (cudaOccupancyMaxActiveClusters(&n, rr_kernel<NW, HASR>, &cfg) != cudaSuccess || n < 1) {
            (void)cudaGetLastError();
            n = eng_cu_wg_sm_count() / 2;
        }
        clusters = n > 0 ? n : 1;
    }
    const int tiles = (M + WR_BM - 1) / WR_BM, pairs = tiles < clusters ? tiles : clusters;
    rr_kernel<NW, HASR><<<2 * pairs, WR_THREADS, smem, s>>>(ta, tb, ty, tr, bias, R, gamma, beta, eps, M, K, ST,
                                                                eng_cu_order_take(1)); /* rev: tiles last to first */
    return cudaGetLastError();
}

cudaError_t eng_cu_gemm_wg_rowln_res(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                                     const float *gamma, const float *beta, float eps, bf16 *Y, int M, int N, int K) {
    if (!eng_cu_gemm_wg_rowln_res_ok(M, N, K) || !bias || !gamma || !beta ||
        ((uintptr_t)X | (uintptr_t)W | (uintptr_t)Y | (uintptr_t)R) & 15 || (uintptr_t)bias & 3 ||
        ((uintptr_t)gamma | (uintptr_t)beta) & 7)
        return cudaErrorInvalidValue;
    CUtensorMap ta, tb, ty, tr;
    if (eng_cu_wg_map(&ta, X, M, K, WR_BM) || eng_cu_wg_map(&tb, W, N, K, N / 2) ||
        eng_cu_wg_map(&ty, Y, M, N, 64) || eng_cu_wg_map(&tr, R ? R : Y, M, N, 64))
        return cudaErrorInvalidValue;
    if (N == 384)
        return R ? rr_launch<192, true>(s, ta, tb, ty, tr, bias, R, gamma, beta, eps, M, K)
                 : rr_launch<192, false>(s, ta, tb, ty, tr, bias, R, gamma, beta, eps, M, K);
    return R ? rr_launch<128, true>(s, ta, tb, ty, tr, bias, R, gamma, beta, eps, M, K)
             : rr_launch<128, false>(s, ta, tb, ty, tr, bias, R, gamma, beta, eps, M, K);
}

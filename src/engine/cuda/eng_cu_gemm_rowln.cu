/* eng_cu_gemm_rowln: Y = LayerNorm(X W^T + b + R) in one kernel, for the
 * encoders' O and down projections on the saturated step when the hidden
 * size is 256 or 384 (all-MiniLM-L6 and other small embedders).
 *
 * Why: the graph path writes those products (residual added in the
 * epilogue) and then runs add_ln over them -- a read and a write of every
 * row more, two passes a layer, ~10% of a saturated all-MiniLM-L6 step on
 * the H200 (ncu, run 40: 12 add_ln kernels of ~32 us at 65536 tokens).  A
 * tile that holds whole rows can normalise them before they are stored.
 * The LayerNorm-by-statistics experiment (eng_cu_gemm_wg_ln) kept 128 x BN
 * tiles and moved the norm into the next products, which cost more there
 * than it saved; this one changes the tile instead.
 *
 * Shape: tiles of 64 rows x the whole N (= 2 NW, NW = 128 or 192), one
 * CTA an SM walking them (persistent), a producer warpgroup whose one
 * thread issues TMA copies of X's 64 x 64 slice and W's two NW x 64 halves
 * into a ring of k-slices (full / empty mbarriers, as eng_cu_wgmma.cu's
 * version 3), two consumer warpgroups each computing the tile's 64 rows x
 * its NW columns with wgmma m64nNWk16.  The epilogue adds the bias and the
 * residual in fp32, gets each row's mean and then its variance about the
 * mean (two passes over the registers; the two warpgroups' halves of a row
 * meet through shared memory at a 256-thread named barrier), writes
 * (v - mu) rs gamma + beta as bf16 into a swizzled image and stores it by
 * TMA.  The norm runs on the fp32 sums -- the unfused path normalises
 * their bf16 rounding -- so results agree to bf16 rounding, not bit for
 * bit.  The price of whole-row tiles: W (N x K) is read from L2 for every
 * 64 rows, 1.4x the operand bytes of version 3's 128 x 192 tiles; at K =
 * 1536 that may cost more than the pass it saves, so the engine races it
 * per bucket against its GEMM + add_ln (eng_cu_model.cu).
 *
 * Status (H200, 2026-12-03 runs 21-22, docs/BENCHMARKS.md "GEMM + whole-row
 * LayerNorm"): correct (lab_wgmma against fp64 at M = 1 .. 40000,
 * compute-sanitizer clean, e2e_vs_transformers passes); at MiniLM's O
 * projection 0.88-0.89x the time of the best product + add_ln (84.6
 * against 96.3 us at 65536 rows), at its down projection (K = 1536)
 * 1.075-1.085x, so the engine's race takes it for O and mostly not for
 * down; saturated MiniLM steps 1.007 / 1.011x (equal 128).  A 128-row
 * form (each warpgroup 64 whole rows, 192 accumulators a thread) was
 * built and checked too (commit 3af0c56) and lost everywhere (138 and 221
 * us); ptxas caps a thread at 168 registers at 384 threads and reported
 * ~1 KB of spills a thread even with setmaxnreg (why it lost is not
 * established beyond that).  Clusters of two CTAs on adjacent 64-row
 * tiles sharing W's k-slices by TMA multicast (W's L2 reads halved
 * without the registers) were correct and no faster (2026-12-03 run 28:
 * O 87.1 against 84.3 us, down 179.8 against 179.9; commit 148a695 holds
 * them): W's L2 traffic is not what bounds the down projection here.
 *
 * Where W's half fits in shared memory (the O projection at K = H),
 * eng_cu_gemm_wg_rowln runs eng_cu_gemm_rowln_res.cu instead: W resident
 * in CTA pairs, 63 against these tiles' 85 us at 65536 x 384 x 384 (H200,
 * 2026-12-04 run 45).
 *
 * sm_90a only (eng_cu_gemm_wg_rowln_ok); the lab: dev/cuda/lab_wgmma.cu
 * (LAB_WG_ROWLN), against fp64 and timed against the product + add_ln.
 */
#include "eng_cu_wgmma.h"
#include <string.h>

#define RL_BM 64
#define RL_BK 64
#define RL_THREADS 384 /* two consumer warpgroups + the producer warpgroup */
#define RL_A_BYTES (RL_BM * RL_BK * 2)
#define RL_SMEM_MAX 232448
#define RL_EXTRA (1024 + 128 + 1024) /* alignment fix-up, barriers, the rows' partial sums */

static __host__ __device__ constexpr int rl_b_bytes(int NW) { return 2 * NW * RL_BK * 2; }
static __host__ __device__ constexpr int rl_img(int NW) { return RL_BM * 2 * NW * 2; }
static __host__ __device__ constexpr int rl_stages(int NW) {
    return (RL_SMEM_MAX - rl_img(NW) - RL_EXTRA) / (RL_A_BYTES + rl_b_bytes(NW)) > 4
               ? 4
               : (RL_SMEM_MAX - rl_img(NW) - RL_EXTRA) / (RL_A_BYTES + rl_b_bytes(NW));
}
static __host__ __device__ constexpr int rl_smem(int NW) {
    return rl_stages(NW) * (RL_A_BYTES + rl_b_bytes(NW)) + rl_img(NW) + RL_EXTRA;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* the two consumer warpgroups (warps 0-7) meet: named barrier 4 (0 is
 * __syncthreads, 2 and 3 each warpgroup's own) */
static __device__ __forceinline__ void rl_pair_sync() { asm volatile("bar.sync 4, 256;\n" ::: "memory"); }
#endif

template <int NW, bool HASR>
__global__ void __launch_bounds__(RL_THREADS, 1)
    rl_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
              const __grid_constant__ CUtensorMap ty, const bf16 *__restrict__ bias, const bf16 *__restrict__ R,
              const float *__restrict__ gamma, const float *__restrict__ beta, float eps, int M, int K, int rev) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(NW == 128 || NW == 192, "the wgmma widths the tile uses");
    constexpr int N = 2 * NW, ST = rl_stages(NW), BB = rl_b_bytes(NW);
    static_assert(ST >= 2, "a ring of at least two slices");
    extern __shared__ unsigned char rl_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)rl_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *C = base, *sA = C + rl_img(NW), *sB = sA + ST * RL_A_BYTES;
    uint64_t *full = (uint64_t *)(sB + ST * BB), *empty = full + ST;
    float *red = (float *)((unsigned char *)full + 128); /* [pass 2][warpgroup 2][row 64] */
    const int warp = threadIdx.x >> 5, KT = K / RL_BK, tiles = (M + RL_BM - 1) / RL_BM;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            wg_bar_init(&full[s], 1);
            wg_bar_init(&empty[s], 8); /* one arrival a consumer warp */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp >= 8) { /* the producer warpgroup: one thread issues, all give registers back */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 256) {
            wg_map_prefetch(&ta);
            wg_map_prefetch(&tb);
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x)
                for (int kt = 0; kt < KT; kt++, it++) {
                    const int s = it % ST, u = rev ? tiles - 1 - t : t;
                    if (it >= ST) wg_bar_wait(&empty[s], ((it / ST) + 1) & 1);
                    wg_bar_arm(&full[s], RL_A_BYTES + BB);
                    wg_tma(&ta, sA + s * RL_A_BYTES, &full[s], kt * RL_BK, u * RL_BM);
                    wg_tma(&tb, sB + s * BB, &full[s], kt * RL_BK, 0);
                    wg_tma(&tb, sB + s * BB + NW * 128, &full[s], kt * RL_BK, NW);
                }
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int wgp = warp >> 2, lane = threadIdx.x & 31, t2 = 2 * (lane & 3);
    const int r0 = (warp & 3) * 16 + (lane >> 2); /* the thread's rows r0, r0 + 8 of a tile */
    const int c0 = wgp * NW + t2;                  /* its columns c0 + 8j, + 1 */
    const bool lead = (threadIdx.x & 127) == 0;   /* its warpgroup's thread that stores */
    /* the image: 64 x 64 sub-tiles of 8 KB, 128-byte swizzle (16-byte chunk c
     * of row r at c ^ (r % 8)); this warpgroup's are NW / 64 from its first */
    const uint32_t line = wg_smem(C) + wgp * (NW / 64) * 8192 + r0 * 128 + 2 * t2;
    const int key = r0 & 7;
    float *red_a = red, *red_b = red + 128;
    float d[NW / 2];
#pragma unroll
    for (int i = 0; i < NW / 2; i++) d[i] = 0.f;
    int it = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        for (int kt = 0; kt < KT; kt++, it++) {
            const int s = it % ST;
            wg_bar_wait(&full[s], (it / ST) & 1);
            const unsigned char *a = sA + s * RL_A_BYTES, *b = sB + s * BB + wgp * NW * 128;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < RL_BK / 16; kk++) wg_mma<NW>(d, wg_desc(a + 32 * kk), wg_desc(b + 32 * kk), kt | kk);
            wg_commit();
            wg_wait<1>(); /* the group before this one is done: its slot may be refilled */
            if (kt > 0 && lane == 0) wg_bar_arrive(&empty[(it - 1) % ST]);
        }
        wg_wait<0>();
        wg_fence_regs<NW / 2>(d);
        if (lane == 0) wg_bar_arrive(&empty[(it - 1) % ST]);

        /* v = acc + b + R in place; d[4j + 2i + e]: row r0 + 8i, column c0 + 8j + e */
        const int m0 = (rev ? tiles - 1 - t : t) * RL_BM, row0 = m0 + r0;
        const bf16 *rr0 = HASR && row0 < M ? R + (size_t)row0 * N + c0 : nullptr;
        const bf16 *rr1 = HASR && row0 + 8 < M ? R + (size_t)(row0 + 8) * N + c0 : nullptr;
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int j = 0; j < NW / 8; j++) {
            const float2 bb = __bfloat1622float2(*(const __nv_bfloat162 *)(bias + c0 + 8 * j));
            float2 x0 = make_float2(0.f, 0.f), x1 = x0;
            if constexpr (HASR) {
                if (rr0) x0 = __bfloat1622float2(*(const __nv_bfloat162 *)(rr0 + 8 * j));
                if (rr1) x1 = __bfloat1622float2(*(const __nv_bfloat162 *)(rr1 + 8 * j));
            }
            wg_ln_add2(d + 4 * j, bb, x0, x1, s0, s1);
        }
        /* the mean: this warpgroup's half of each row, then both halves */
        s0 = wg_quad_sum(s0);
        s1 = wg_quad_sum(s1);
        if ((lane & 3) == 0) {
            red_a[wgp * 64 + r0] = s0;
            red_a[wgp * 64 + r0 + 8] = s1;
        }
        rl_pair_sync();
        const float mu0 = (red_a[r0] + red_a[64 + r0]) * (1.f / N);
        const float mu1 = (red_a[r0 + 8] + red_a[64 + r0 + 8]) * (1.f / N);
        float q0 = 0.f, q1 = 0.f;
#pragma unroll
        for (int j = 0; j < NW / 8; j++) wg_ln_dev2(d + 4 * j, mu0, mu1, q0, q1);
        q0 = wg_quad_sum(q0);
        q1 = wg_quad_sum(q1);
        if ((lane & 3) == 0) {
            red_b[wgp * 64 + r0] = q0;
            red_b[wgp * 64 + r0 + 8] = q1;
        }
        /* (a warpgroup rewrites red_a only after the other has passed this
         * barrier, so after its reads above; red_b likewise at the next
         * tile's first barrier) */
        rl_pair_sync();
        const float rs0 = rsqrtf((red_b[r0] + red_b[64 + r0]) * (1.f / N) + eps);
        const float rs1 = rsqrtf((red_b[r0 + 8] + red_b[64 + r0 + 8]) * (1.f / N) + eps);

        if (lead) wg_store_wait_read<0>(); /* the last tile's image has been read out */
        wg_group_sync(wgp);
#pragma unroll
        for (int j = 0; j < NW / 8; j++) {
            const float2 g = *(const float2 *)(gamma + c0 + 8 * j), be = *(const float2 *)(beta + c0 + 8 * j);
            wg_ln_put2(line + (j >> 3) * 8192 + (((j & 7) ^ key) << 4), d + 4 * j, mu0, rs0, mu1, rs1, g, be);
        }
        wg_fence_async_smem();
        wg_group_sync(wgp);
        if (lead) {
#pragma unroll
            for (int q = 0; q < NW / 64; q++)
                wg_tma_store(&ty, C + (wgp * (NW / 64) + q) * 8192, wgp * NW + 64 * q, m0);
            wg_store_commit();
        }
    }
    if (lead) wg_store_wait();
#else
    __trap(); /* eng_cu_gemm_wg_rowln_ok never lets another architecture launch this */
#endif
}

/* ---- host side ---------------------------------------------------------------- */

template <int NW, bool HASR>
static cudaError_t rl_launch(cudaStream_t s, const CUtensorMap &ta, const CUtensorMap &tb, const CUtensorMap &ty,
                             const bf16 *bias, const bf16 *R, const float *gamma, const float *beta, float eps, int M,
                             int K) {
    constexpr int smem = rl_smem(NW);
    static int ready;
    if (!ready) {
        if (cudaFuncSetAttribute(rl_kernel<NW, HASR>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) !=
            cudaSuccess)
            return cudaErrorInvalidValue;
        ready = 1;
    }
    const int tiles = (M + RL_BM - 1) / RL_BM, sms = eng_cu_wg_sm_count(), grid = tiles < sms ? tiles : sms;
    rl_kernel<NW, HASR><<<grid, RL_THREADS, smem, s>>>(ta, tb, ty, bias, R, gamma, beta, eps, M, K,
                                                       eng_cu_order_take(1)); /* rev: tiles last to first */
    return cudaGetLastError();
}

int eng_cu_gemm_wg_rowln_ok(int M, int N, int K) {
    return M >= 1 && (N == 256 || N == 384) && K >= RL_BK && K % RL_BK == 0 && eng_cu_gemm_wg_available();
}

cudaError_t eng_cu_gemm_wg_rowln(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                                 const float *gamma, const float *beta, float eps, bf16 *Y, int M, int N, int K) {
    if (!eng_cu_gemm_wg_rowln_ok(M, N, K) || !bias || !gamma || !beta ||
        ((uintptr_t)X | (uintptr_t)W | (uintptr_t)Y) & 15 || ((uintptr_t)bias | (uintptr_t)R) & 3 ||
        ((uintptr_t)gamma | (uintptr_t)beta) & 7)
        return cudaErrorInvalidValue;
    if (eng_cu_gemm_wg_rowln_res_ok(M, N, K) && !((uintptr_t)R & 15)) /* W fits in a pair's shared memory
                                                                         (eng_cu_gemm_rowln_res.cu) */
        return eng_cu_gemm_wg_rowln_res(s, X, W, bias, R, gamma, beta, eps, Y, M, N, K);
    CUtensorMap ta, tb, ty;
    if (eng_cu_wg_map(&ta, X, M, K, RL_BM) || eng_cu_wg_map(&tb, W, N, K, N / 2) || eng_cu_wg_map(&ty, Y, M, N, 64))
        return cudaErrorInvalidValue;
    if (N == 384)
        return R ? rl_launch<192, true>(s, ta, tb, ty, bias, R, gamma, beta, eps, M, K)
                 : rl_launch<192, false>(s, ta, tb, ty, bias, R, gamma, beta, eps, M, K);
    return R ? rl_launch<128, true>(s, ta, tb, ty, bias, R, gamma, beta, eps, M, K)
             : rl_launch<128, false>(s, ta, tb, ty, bias, R, gamma, beta, eps, M, K);
}

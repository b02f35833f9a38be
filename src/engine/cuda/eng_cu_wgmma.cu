/* eng_cu_wgmma: our own Hopper GEMM for large M (the saturated step), so
 * that epilogues cuBLASLt does not offer can ride in it.
 *
 * Y[M,N] = epi(X[M,K] W[N,K]^T + b) (+ R), bf16 in and out, fp32
 * accumulation -- the contract of eng_cu_gemm (eng_cu.h) -- plus
 * ENG_CU_EPI_SWIGLU: W's N rows are gate | up halves and Y[M, N/2] =
 * silu(gate) * up straight from the fp32 sums, which cuBLASLt cannot do
 * (the graph path otherwise writes the whole gate|up product and runs a
 * SwiGLU kernel over it: 7.7% of a saturated Qwen3-0.6B step on the H200).
 *
 * Status: correct (dev/cuda/lab_wgmma.cu against fp64, every version and
 * epilogue, compute-sanitizer clean; the engine's end-to-end checks pass
 * with it) and ON by default on sm_90 (POSY_CUDA_WGMMA=0 off): the engine
 * races versions 3 and 4 beside cuBLASLt's candidates at every product of
 * >= 1024 rows, and for Qwen3 per bucket the fused gate|up + SwiGLU
 * against cuBLASLt + the SwiGLU kernel and the fused QKV + q/k norm +
 * rotary (eng_cu_gemm_wg_qk) against cuBLASLt + the q/k kernel, both
 * fused products optionally scaling their rows (the RMSNorm before them
 * reduced to its row statistics).  H200 (docs/BENCHMARKS.md, "Our own
 * Hopper GEMM in the engine"): 0.93-1.09x cuBLASLt's time at the MiniLM
 * and BERT-base shapes, 1.04-1.22x on Qwen3's plain products, the fused
 * SwiGLU 0.89-0.94x cuBLASLt + the kernel, the fused QKV 0.93-0.95x
 * cuBLASLt + the q/k kernel; saturated Qwen3-0.6B steps 1.05x with the
 * fused SwiGLU, a further 1.04x with the fused QKV and row scales;
 * 1.00-1.01x on MiniLM and BERT-base.  What is left against cuBLASLt on
 * the plain products is the epilogue's time, when no wgmma runs (without
 * it version 4's main loop is within 1% of the tensor cores' floor at
 * Qwen3's QKV shape); version 5 (ping-pong) hides it but pays in operand
 * traffic, and wins only some shapes.
 *
 * Shared shape (sm_90a only; other chips and the PTX fallback never launch
 * these, eng_cu_gemm_wg_ok says so): consumer warpgroups of 64 rows issue
 * wgmma m64nNk16 with A and B from shared memory (both K-major, 128-byte
 * swizzle, fp32 accumulators in registers); a producer issues TMA tensor
 * copies into a ring of k-slices of 64 with full / empty mbarriers per
 * slot; rows past M arrive as zeros (TMA's out-of-bounds fill) and are not
 * stored, so any M works; K % 64 == 0 and N a multiple of the tile width.
 * The versions (eng_cu_wg_version; the lab times them all):
 *   1  one 128 x 128 tile a CTA, 3 stages, two CTAs an SM (so one's
 *      epilogue runs under the other's products), outputs stored straight
 *      from the accumulators; blockIdx.x walks N fastest so the CTAs
 *      resident together share their X rows and W stays in L2;
 *   2  persistent (one CTA an SM walks tiles N-fastest), tiles 128 x 256 /
 *      192 / 128 by N, as many stages as fit 192 KB, the producer running
 *      ahead into the next tile during the epilogue;
 *   3  (default when on) 2 with the output tile written to shared memory
 *      (128-byte swizzle, conflict-free) and stored by TMA -- each
 *      consumer warpgroup its 64 rows on its own -- so the
 *      consumers go on to the next tile while the copy engine writes; a
 *      producer warpgroup, so setmaxnreg moves its registers to the
 *      consumers (9 warps cap every thread at 168); one kernel per tile
 *      width and epilogue (with or without a residual);
 *   4  3 with the output written through two 64-column image buffers in
 *      turn (32 KB instead of the tile's 48-64 KB), so 256-wide tiles get
 *      a fourth ring stage;
 *   5  (experiment, opt-in POSY_CUDA_WG_VERSION=5 or e.g. 345) ping-pong:
 *      each consumer warpgroup its own 128 x 128 tiles, the two in turn,
 *      so one's epilogue runs under the other's products; correct, and
 *      0.96-1.26x cuBLASLt (H200 run 16: it wins MiniLM's QKV and Qwen3's
 *      QKV against 3/4, loses the long-K products: 128-wide tiles read
 *      1.33x the operand bytes a FLOP); raced beside 3 and 4 it moved no
 *      saturated step by more than 0.5%.  Its fused QKV (one head a
 *      tile, eng_cu_gemm_wg_qk(5, ...)) is checked in the lab but not
 *      raced: 1005-1029 us against version 3's 850 at 65536 rows;
 *   6  (raced beside 3 and 4 by default) W resident: each CTA a block of
 *      W's rows in shared memory for the whole kernel, only X streaming,
 *      for K <= 384 / 640 and no residual (eng_cu_gemm_wres.cu):
 *      MiniLM's QKV 91 against cuBLASLt's 110 us, saturated MiniLM
 *      1.035x (H200 2026-12-04 run 46).
 * Two epilogue experiments stay opt-in, correct and slower on the H200
 * (2026-12-02, docs/BENCHMARKS.md "Two norm fusions that lost"): RSH,
 * the fused QKV / SwiGLU computing their own RMS row scales in the
 * producer warpgroup's spare warps (eng_cu_row_norm: shared-memory loads
 * beside the wgmma made the kernels 1.5-1.7x slower), and the encoders'
 * LayerNorm by row statistics (eng_cu_gemm_wg_ln: saturated steps
 * 0.97-1.00x).
 * More were built, checked and measured on the H200, then removed as no
 * faster than 3: 64 x 64 sub-tile stores (f844b0d); 2-CTA clusters sharing
 * the W slice by TMA multicast (f844b0d: 1.6-2.1x slower because its
 * remote slot releases were cluster-scope release arrivals; with CTA scope,
 * fb5685c, equal to 3 -- multicast did not shorten the data waits); a half
 * image with a fourth stage, and stmatrix image writes (fb5685c); each
 * tile's epilogue from a bf16 copy of its sums under the next tile's
 * first k-steps ("version 6", 4ce51cf / 548eafb: 0.91-1.31x cuBLASLt against
 * version 3's 0.89-1.23 -- the products issued ahead hold the ring's
 * slots, so the producer cannot fill them during the epilogue, and
 * version 3's consumers already wait for data 24-33% of the time).
 * GELU is cuBLASLt's tanh form (tanh by the SFU), so both paths agree.
 */
#include "eng_cu_wgmma.h"
#include <cudaTypedefs.h>
#include <stdio.h>
#include <string.h>

#define WG_BM 128
#define WG_BK 64
#define WG_THREADS 288 /* two consumer warpgroups + one producer warp */
#define WG_A_BYTES (WG_BM * WG_BK * 2) /* a 128 x 64 slice of X: 16 KB */
/* version 3: a whole producer warpgroup, so setmaxnreg can move its
 * registers to the consumers (9 warps cap every thread at 168: 3 warps of
 * one SM quarter share its 16K registers; the 128 x 256 tile's epilogue
 * spilled there) */
#define WG3_THREADS 384
#define WG_PROF_SLOTS ENG_CU_WG_PROF_SLOTS
/* the epilogue beside eng_cu.h's ENG_CU_EPI_*: Qwen3's q/k RMSNorm +
 * rotary on the QKV product (eng_cu_gemm_wg_qk) */
#define WG_EPI_QK 16
/* flags: version 3 / 4 walks its tiles last to first (serpentine order,
 * eng_cu_order.c; wg3_launch sets it) */
#define WG_REV 0x400

/* version 1: one 128 x 128 tile a CTA, 3 stages, two CTAs an SM */
#define WG1_STAGES 3
#define WG1_SMEM (WG1_STAGES * 2 * WG_A_BYTES + 1024 + 64)
/* version 2: persistent, 128 x BN tiles, as many stages as fit 192 KB */
static __host__ __device__ constexpr int wg2_stages(int BN) { return 196608 / (WG_A_BYTES + BN * WG_BK * 2) > 6 ? 6 : 196608 / (WG_A_BYTES + BN * WG_BK * 2); }
static __host__ __device__ constexpr int wg2_smem(int BN) { return wg2_stages(BN) * (WG_A_BYTES + BN * WG_BK * 2) + 1024 + 128; }

/* version 3: version 2 with the output tile written to shared memory and
 * stored by TMA, so the consumers go on to the next tile's products while
 * the copy engine writes this one; the ring gets what the image leaves of
 * the opt-in maximum (227 KB), less the 1024-byte alignment fix-up and the
 * barriers.  The image holds the tile's output columns (BN, SwiGLU BN/2)
 * -- or, version 4 (IMG = 2), two 64-column sub-tiles in turn, so a
 * 256-wide tile's ring gets a fourth stage (the third one's consumers
 * waited for data 25-30% of the time at Qwen3's shapes) */
#define WG_SMEM_MAX 232448
static __host__ __device__ constexpr int wg3_outc(int BN, int EPI) { return ENG_CU_EPI_GATED(EPI) ? BN / 2 : BN; }
static __host__ __device__ constexpr int wg3_cbytes(int BN, int EPI, int IMG) {
    return IMG ? 2 * IMG * 8192 : WG_BM * wg3_outc(BN, EPI) * 2;
}
/* RS (the kernel's own RMS row scales, eng_cu_row_norm): two 128-row
 * buffers of them after the barriers */
static __host__ __device__ constexpr int wg3_rsbytes(bool RS) { return RS ? 2 * WG_BM * 4 : 0; }
static __host__ __device__ constexpr int wg3_stages(int BN, int EPI, int IMG, bool RS = false) {
    return (WG_SMEM_MAX - wg3_cbytes(BN, EPI, IMG) - 1024 - 128 - wg3_rsbytes(RS)) / (WG_A_BYTES + BN * WG_BK * 2) > 6
               ? 6
               : (WG_SMEM_MAX - wg3_cbytes(BN, EPI, IMG) - 1024 - 128 - wg3_rsbytes(RS)) / (WG_A_BYTES + BN * WG_BK * 2);
}
static __host__ __device__ constexpr int wg3_smem(int BN, int EPI, int IMG, bool RS = false) {
    return wg3_stages(BN, EPI, IMG, RS) * (WG_A_BYTES + BN * WG_BK * 2) + wg3_cbytes(BN, EPI, IMG) + 1024 + 128 +
           wg3_rsbytes(RS);
}

int eng_cu_wg_version = 3;
int eng_cu_wg_lab_flags = 0;

/* ---- device side -------------------------------------------------------------- */

/* The producer warp's lane 0: the X and W slices of every k-step of the
 * tiles this CTA computes into the ring (it = the CTA's running k-step
 * count, shared with the consumers' numbering). */
template <int BN, int ST, bool PROF = false>
static __device__ __forceinline__ void wg_produce(const CUtensorMap *ta, const CUtensorMap *tb, unsigned char *sA,
                                                  unsigned char *sB, uint64_t *full, uint64_t *empty, int &it,
                                                  int m0, int n0, int N, int KT, bool swiglu,
                                                  unsigned long long *pc = nullptr) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int B_BYTES = BN * WG_BK * 2;
    for (int kt = 0; kt < KT; kt++, it++) {
        const int s = it % ST;
        unsigned long long t0 = 0;
        if constexpr (PROF) t0 = clock64();
        if (it >= ST) wg_bar_wait(&empty[s], ((it / ST) + 1) & 1);
        if constexpr (PROF) pc[0] += clock64() - t0; /* waiting for a free slot */
        wg_bar_arm(&full[s], WG_A_BYTES + B_BYTES);
        wg_tma(ta, sA + s * WG_A_BYTES, &full[s], kt * WG_BK, m0);
        if (swiglu) { /* BN/2 gate rows, then the BN/2 matching up rows */
            wg_tma(tb, sB + s * B_BYTES, &full[s], kt * WG_BK, n0 >> 1);
            wg_tma(tb, sB + s * B_BYTES + B_BYTES / 2, &full[s], kt * WG_BK, (N >> 1) + (n0 >> 1));
        } else
            wg_tma(tb, sB + s * B_BYTES, &full[s], kt * WG_BK, n0);
    }
#endif
}

/* A consumer warpgroup's products for one tile: d = X[rows] W[cols]^T over
 * K, each slot released (one arrival a warp) once the wgmma reading it is
 * done -- the last one too, so a persistent producer can run ahead. */
template <int BN, int ST, bool PROF = false>
static __device__ __forceinline__ void wg_consume(float *d, const unsigned char *sA, const unsigned char *sB,
                                                  uint64_t *full, uint64_t *empty, int &it, int wgp, int KT,
                                                  unsigned long long *pc = nullptr) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int B_BYTES = BN * WG_BK * 2;
    const int lane = threadIdx.x & 31;
    for (int kt = 0; kt < KT; kt++, it++) {
        const int s = it % ST;
        unsigned long long t0 = 0;
        if constexpr (PROF) t0 = clock64();
        wg_bar_wait(&full[s], (it / ST) & 1);
        if constexpr (PROF) pc[0] += clock64() - t0; /* waiting for data */
        const unsigned char *a = sA + s * WG_A_BYTES + wgp * 64 * 128, *b = sB + s * B_BYTES;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < WG_BK / 16; kk++) wg_mma<BN>(d, wg_desc(a + 32 * kk), wg_desc(b + 32 * kk), kt | kk);
        wg_commit();
        if constexpr (PROF) t0 = clock64();
        wg_wait<1>(); /* the group before this one is done: its slot may be refilled */
        if constexpr (PROF) pc[1] += clock64() - t0; /* waiting for the tensor cores */
        if (kt > 0 && lane == 0) wg_bar_arrive(&empty[(it - 1) % ST]);
    }
    wg_wait<0>();
    wg_fence_regs<BN / 2>(d);
    if (lane == 0) wg_bar_arrive(&empty[(it - 1) % ST]);
#endif
}

/* barriers: full[s] (one arrival: the producer's expect_tx), empty[s] (one
 * arrival per consumer warp, and XE more: version 3's row-statistics
 * warps); sb (may be NULL): the row scales' two buffers, full (sb[0..1],
 * an arrival per statistics thread) and empty (sb[2..3], per consumer
 * thread) */
template <int ST, int XE = 0>
static __device__ __forceinline__ void wg_init_bars(uint64_t *full, uint64_t *empty, uint64_t *sb = nullptr) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            wg_bar_init(&full[s], 1);
            wg_bar_init(&empty[s], 8 + XE);
        }
        if (sb) {
            wg_bar_init(&sb[0], 32 * XE);
            wg_bar_init(&sb[1], 32 * XE);
            wg_bar_init(&sb[2], 256);
            wg_bar_init(&sb[3], 256);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
#endif
}

/* version 1: blockIdx.x walks N fastest, so the CTAs resident together
 * share their X rows */
__global__ void __launch_bounds__(WG_THREADS, 2)
    wg1_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
               const bf16 *__restrict__ bias, const bf16 *__restrict__ R, bf16 *__restrict__ Y, int M, int N, int K,
               int epi) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ unsigned char wg_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *sA = base, *sB = base + WG1_STAGES * WG_A_BYTES;
    uint64_t *full = (uint64_t *)(base + 2 * WG1_STAGES * WG_A_BYTES), *empty = full + WG1_STAGES;
    const int warp = threadIdx.x >> 5, n0 = blockIdx.x * 128, m0 = blockIdx.y * WG_BM, KT = K / WG_BK;
    int it = 0;
    wg_init_bars<WG1_STAGES>(full, empty);
    if (warp == 8) {
        if ((threadIdx.x & 31) == 0)
            wg_produce<128, WG1_STAGES>(&ta, &tb, sA, sB, full, empty, it, m0, n0, N, KT, epi == ENG_CU_EPI_SWIGLU);
        return;
    }
    float d[64];
#pragma unroll
    for (int i = 0; i < 64; i++) d[i] = 0.f;
    wg_consume<128, WG1_STAGES>(d, sA, sB, full, empty, it, warp >> 2, KT);
    wg_epilogue<128>(d, m0 + (warp >> 2) * 64, n0, M, N, epi, bias, R, Y);
#else
    __trap(); /* eng_cu_gemm_wg_ok never lets another architecture launch this */
#endif
}

/* version 2: one CTA an SM walks tiles t = blockIdx.x, + gridDim.x, ...
 * (N fastest); the producer runs ahead into the next tile while the
 * consumers store this one. */
template <int BN>
__global__ void __launch_bounds__(WG_THREADS, 1)
    wg2_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
               const bf16 *__restrict__ bias, const bf16 *__restrict__ R, bf16 *__restrict__ Y, int M, int N, int K,
               int epi) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int ST = wg2_stages(BN), B_BYTES = BN * WG_BK * 2;
    extern __shared__ unsigned char wg_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *sA = base, *sB = base + ST * WG_A_BYTES;
    uint64_t *full = (uint64_t *)(sB + ST * B_BYTES), *empty = full + ST;
    const int warp = threadIdx.x >> 5, KT = K / WG_BK, nN = N / BN, tiles = nN * ((M + WG_BM - 1) / WG_BM);
    int it = 0;
    wg_init_bars<ST>(full, empty);
    if (warp == 8) {
        if ((threadIdx.x & 31) == 0)
            for (int t = blockIdx.x; t < tiles; t += gridDim.x)
                wg_produce<BN, ST>(&ta, &tb, sA, sB, full, empty, it, (t / nN) * WG_BM, (t % nN) * BN, N, KT,
                                   epi == ENG_CU_EPI_SWIGLU);
        return;
    }
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.f;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        wg_consume<BN, ST>(d, sA, sB, full, empty, it, warp >> 2, KT);
        wg_epilogue<BN>(d, (t / nN) * WG_BM + (warp >> 2) * 64, (t % nN) * BN, M, N, epi, bias, R, Y);
    }
#else
    __trap();
#endif
}

/* Version 4's epilogue, per consumer warpgroup (its 64 rows): the
 * output's 64-column sub-tiles Q, Q + 1, ... through IMG 8 KB buffers of
 * its own in turn (running count img), each stored by TMA while the next
 * is written.  One barrier a sub-tile: before it the warpgroup's first
 * thread, which issues its stores, waits until every earlier store has
 * read its buffer, so after it the other buffer is free. */
template <int BN, int EPI, bool HASR, int IMG, int Q, int LN = 0>
static __device__ __forceinline__ void wg3_epi_ring(const float *d, int wgp, int m0, int n0, int M, int N,
                                                    const bf16 *__restrict__ bias, const bf16 *__restrict__ R,
                                                    unsigned char *C, const CUtensorMap *ty, int &img,
                                                    const float *__restrict__ rs, int rs0,
                                                    const eng_cu_ln_epi *ln = nullptr) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (Q < wg3_outc(BN, EPI) / 64) {
        unsigned char *buf = C + (wgp * IMG + img % IMG) * 8192;
        const bool lead = (threadIdx.x & 127) == 0;
        /* the image rows are the warpgroup's own 0..63: shift the base by its first row */
        wg_epilogue_img<BN, EPI, HASR, 8 * Q, 8, LN>(d, wgp * 64, m0, n0, M, N, bias, R, wg_smem(buf) - wgp * 64 * 128,
                                                     rs, rs0, ln);
        wg_fence_async_smem();
        if (lead) wg_store_wait_read<0>();
        wg_group_sync(wgp);
        if (lead) {
            wg_tma_store(ty, buf, (ENG_CU_EPI_GATED(EPI) ? n0 >> 1 : n0) + 64 * Q, m0 + wgp * 64);
            wg_store_commit();
        }
        img++;
        wg3_epi_ring<BN, EPI, HASR, IMG, Q + 1, LN>(d, wgp, m0, n0, M, N, bias, R, C, ty, img, rs, rs0, ln);
    }
#endif
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* 16 bytes from shared memory by a 32-bit address */
static __device__ __forceinline__ uint4 wg_lds128(uint32_t a) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
    return v;
}
/* the sum of squares of 8 bf16 values */
static __device__ __forceinline__ float wg_sq8(const uint4 &v) {
    const __nv_bfloat162 *p = (const __nv_bfloat162 *)&v;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float2 f = __bfloat1622float2(p[i]);
        q += f.x * f.x + f.y * f.y;
    }
    return q;
}
#endif

/* The RMS row scales of version 3 / 4's RSH (eng_cu_row_norm), by warps
 * 9-11 of the producer warpgroup, which otherwise only give their
 * registers away: as each X slice lands they add its squares, each
 * thread h for the half rows u = h, h + 96, h + 192 (< 256; half u % 2 of
 * row u / 2: four 16-byte chunks), then release the slot like a consumer
 * warp.  At a tile's end the two halves of a row, in neighbouring lanes,
 * meet by a shuffle and the even lane writes rsqrt(sum / K + eps) -- 0 at
 * or past the real row count -- into buffer i % 2 of rs_s (i: the CTA's
 * tile count) for the consumers' epilogue, once the consumers are done
 * with tile i - 2's.  A lane reads its chunks starting at chunk row % 4
 * of its half, so the 8 lanes of a load phase fall on distinct banks (a
 * sum does not see the swizzle).  flags & 0x200 (the lab's ablation): no
 * loads, every scale 1. */
template <int ST>
static __device__ __forceinline__ void wg_row_stats(const unsigned char *sA, uint64_t *full, uint64_t *empty,
                                                    uint64_t *sb, float *rs_s, int M, int K, int KT, int nN,
                                                    int tiles, const int *n_rows_dev, float eps, int flags) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    const int h = threadIdx.x - 288, lane = threadIdx.x & 31;
    const bool third = h + 192 < 256, noload = flags & 0x200; /* third: warps 9 and 10 */
    const int n_real = min(M, *n_rows_dev);
    /* 32-bit shared addresses throughout: these warps hold 40 registers */
    const uint32_t a0 = wg_smem(sA), fb = wg_smem(full), eb = wg_smem(empty), sbb = wg_smem(sb), rb = wg_smem(rs_s);
    int it = 0, i = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x, i++) {
        float q[3] = {0.f, 0.f, 0.f};
        for (int kt = 0; kt < KT; kt++, it++) {
            const int s = it % ST;
            wg_bar_wait32(fb + 8 * s, (it / ST) & 1);
            if (!noload) {
                const uint32_t a = a0 + s * WG_A_BYTES;
#pragma unroll
                for (int k = 0; k < 3; k++) {
                    if (k == 2 && !third) break;
                    const int u = h + 96 * k, r = u >> 1;
                    const uint32_t row = a + r * 128 + (u & 1) * 64;
#pragma unroll
                    for (int j = 0; j < 4; j += 2) { /* two loads in flight: the registers allow no more */
                        const uint4 v0 = wg_lds128(row + ((j + r) & 3) * 16), v1 = wg_lds128(row + ((j + 1 + r) & 3) * 16);
                        q[k] += wg_sq8(v0) + wg_sq8(v1);
                    }
                }
            }
            __syncwarp();
            if (lane == 0) wg_bar_arrive32(eb + 8 * s);
        }
        const int b = i & 1, m0 = ((flags & WG_REV ? tiles - 1 - t : t) / nN) * WG_BM;
        if (i >= 2) wg_bar_wait32(sbb + 8 * (2 + b), ((i >> 1) + 1) & 1); /* tile i - 2's scales have been read */
#pragma unroll
        for (int k = 0; k < 3; k++) {
            const float tot = q[k] + __shfl_xor_sync(0xffffffffu, q[k], 1);
            const int u = h + 96 * k, r = u >> 1;
            if ((k < 2 || third) && !(u & 1)) {
                const float v = noload ? 1.f : m0 + r < n_real ? rsqrtf(tot / (float)K + eps) : 0.f;
                asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(rb + 4 * (b * WG_BM + r)), "f"(v) : "memory");
            }
        }
        wg_bar_arrive32(sbb + 8 * b);
    }
#endif
}

/* PROF (lab only, eng_cu_gemm_wg_profile): clock64 sums per CTA into
 * prof[WG_PROF_SLOTS blockIdx.x ..]: for consumer warpgroup w (its first
 * thread) at 6w.. the cycles waiting for data, waiting for its wgmma
 * group, in the epilogue, in all, and the parts of the epilogue spent
 * waiting (for the image's last store to read it out, and for the
 * warpgroup's other warps) and writing the image (version 4: the whole
 * epilogue counts as writes); at 12 and 13 the producer's cycles waiting for a free slot,
 * and in all.  0x100 in flags: no epilogue at all (the lab's ablation;
 * outputs unwritten).
 * EPI and HASR (a residual) are compile-time, so a kernel holds the one
 * epilogue it runs (ncu, 2026-12-02: the epilogue chosen at run time was
 * 890 SASS instructions a tile for EPI_NONE, stalled on instruction
 * fetch, 22-60% of the consumers' time).  IMG: 0 the whole output tile's
 * image (version 3), 2 two 64-column buffers (version 4).  RSH: the
 * epilogue's row scales computed in the kernel (wg_row_stats, from
 * n_rows_dev and eps) instead of read from rs.  LN: eng_cu_ln_epi's
 * parts (WG_LNA | WG_LNR | WG_OST) in the epilogue, from ln. */
template <int BN, int EPI, bool HASR, bool PROF, int IMG, bool RSH = false, int LN = 0>
__global__ void __launch_bounds__(WG3_THREADS, 1)
    wg3_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
               const __grid_constant__ CUtensorMap ty, const bf16 *__restrict__ bias, const bf16 *__restrict__ R,
               int M, int N, int K, int flags, unsigned long long *prof, const __grid_constant__ eng_cu_qk_args qk,
               const float *__restrict__ rs, const int *__restrict__ n_rows_dev, float eps,
               const __grid_constant__ eng_cu_ln_epi ln) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(!(RSH && PROF), "the profile build has no row statistics");
    constexpr int ST = wg3_stages(BN, EPI, IMG, RSH), B_BYTES = BN * WG_BK * 2;
    constexpr bool swiglu = ENG_CU_EPI_GATED(EPI); /* the gate|up layout */
    extern __shared__ unsigned char wg_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *C = base, *sA = C + wg3_cbytes(BN, EPI, IMG), *sB = sA + ST * WG_A_BYTES;
    uint64_t *full = (uint64_t *)(sB + ST * B_BYTES), *empty = full + ST, *sb = empty + ST; /* RSH: 4 more */
    float *rs_s = (float *)((unsigned char *)full + 128); /* RSH: [2][WG_BM] */
    const int warp = threadIdx.x >> 5, KT = K / WG_BK, nN = N / BN, tiles = nN * ((M + WG_BM - 1) / WG_BM);
    const bool skip = PROF && (flags & 0x100);
    int it = 0, img = 0;
    unsigned long long pc[2] = {0, 0}, t_start = 0, t_epi = 0, t_wait = 0, t_img = 0;
    if constexpr (PROF) t_start = clock64();
    wg_init_bars<ST, RSH ? 3 : 0>(full, empty, RSH ? sb : nullptr);
    if (warp >= 8) { /* the producer warpgroup: one thread issues, all give registers back */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 256) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&ta) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&tb) : "memory");
            for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
                const int u = flags & WG_REV ? tiles - 1 - t : t;
                wg_produce<BN, ST, PROF>(&ta, &tb, sA, sB, full, empty, it, (u / nN) * WG_BM, (u % nN) * BN, N, KT,
                                         swiglu, pc);
            }
            if constexpr (PROF) {
                prof[WG_PROF_SLOTS * blockIdx.x + 12] = pc[0];
                prof[WG_PROF_SLOTS * blockIdx.x + 13] = clock64() - t_start;
            }
        }
        if constexpr (RSH)
            if (warp >= 9) wg_row_stats<ST>(sA, full, empty, sb, rs_s, M, K, KT, nN, tiles, n_rows_dev, eps, flags);
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const uint32_t Cs = wg_smem(C);
    const int wgp = warp >> 2;                 /* this consumer warpgroup: rows 64 wgp .. of each tile */
    const bool lead = (threadIdx.x & 127) == 0; /* its thread that issues and waits for its stores */
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; i++) d[i] = 0.f;
    for (int t = blockIdx.x, i = 0; t < tiles; t += gridDim.x, i++) {
        const int u = flags & WG_REV ? tiles - 1 - t : t;
        const int m0 = (u / nN) * WG_BM, n0 = (u % nN) * BN;
        wg_consume<BN, ST, PROF>(d, sA, sB, full, empty, it, wgp, KT, pc);
        if (skip) continue;
        unsigned long long t0 = 0, t1 = 0;
        if constexpr (PROF) t0 = clock64();
        const float *rt = rs; /* the row scales: rows rs0.. */
        int rs0 = 0;
        if constexpr (RSH) {
            wg_bar_wait(&sb[i & 1], (i >> 1) & 1);
            rt = rs_s + (i & 1) * WG_BM;
            rs0 = m0;
        }
        if constexpr (IMG && EPI != WG_EPI_QK) {
            wg3_epi_ring<BN, EPI, HASR, IMG, 0, LN>(d, wgp, m0, n0, M, N, bias, R, C, &ty, img, rt, rs0, &ln);
            if constexpr (PROF) t_img += clock64() - t0;
        } else { /* each warpgroup its 64 rows of the image, on its own */
            if (lead) wg_store_wait_read(); /* its last tile's image has been read out */
            wg_group_sync(wgp);
            if constexpr (PROF) t1 = clock64();
            if constexpr (EPI == WG_EPI_QK) wg_epilogue_img_qk<BN>(d, wgp * 64, m0, n0, M, qk, Cs, rt, rs0);
            else wg_epilogue_img<BN, EPI, HASR, 0, wg3_outc(BN, EPI) / 8, LN>(d, wgp * 64, m0, n0, M, N, bias, R, Cs, rt,
                                                                               rs0, &ln);
            if constexpr (PROF) t_img += clock64() - t1, t_wait += t1 - t0;
            wg_fence_async_smem();
            wg_group_sync(wgp);
            if (lead) {
                const int c0 = swiglu ? n0 >> 1 : n0;
                for (int q = 0; q < wg3_outc(BN, EPI) / 64; q++)
                    wg_tma_store(&ty, C + q * 16384 + wgp * 8192, c0 + 64 * q, m0 + wgp * 64);
                wg_store_commit();
            }
        }
        if constexpr (RSH) wg_bar_arrive(&sb[2 + (i & 1)]); /* this thread has read its rows' scales */
        if constexpr (PROF) t_epi += clock64() - t0;
    }
    if (lead) wg_store_wait();
    if constexpr (PROF) {
        if ((threadIdx.x & 127) == 0) {
            unsigned long long *o = prof + WG_PROF_SLOTS * blockIdx.x + 6 * (threadIdx.x >> 7);
            o[0] = pc[0];
            o[1] = pc[1];
            o[2] = t_epi;
            o[3] = clock64() - t_start;
            o[4] = t_wait;
            o[5] = t_img;
        }
    }
#else
    __trap();
#endif
}

/* ---- version 5: ping-pong ------------------------------------------------------ */

/* Each consumer warpgroup computes whole 128 x 128 tiles of its own (two
 * m64n128k16 a k-step, rows 0-63 and 64-127: 2 x 64 accumulators, as many
 * as version 3's 64 x 256), the two taking the CTA's tiles in turn, so one
 * warpgroup's epilogue runs while the other's products keep the tensor
 * cores busy -- in versions 3 and 4 both warpgroups store at once and no
 * wgmma runs meanwhile, which is what was left against cuBLASLt (the
 * main loop alone is within 1% of the tensor cores' floor).  The price:
 * 32 KB of operands a 1M-FMA k-slice instead of 48 KB a 2M one.  The ring
 * holds the tiles' k-slices in the CTA's tile order, each slot released
 * by the four warps of the one warpgroup reading it.  An order barrier
 * pair makes the main loops take turns (a warpgroup starts a tile's
 * products once the other has waited for its last slice of the tile
 * before), which keeps every slot at most one fill behind whoever waits
 * on it, as the mbarrier parity waits need. */
#define WG5_BN 128
static __host__ __device__ constexpr int wg5_cbytes(int EPI) { return WG_BM * wg3_outc(WG5_BN, EPI) * 2; }
static __host__ __device__ constexpr int wg5_stages(int EPI) {
    return (WG_SMEM_MAX - 2 * wg5_cbytes(EPI) - 1024 - 256) / (WG_A_BYTES + WG5_BN * WG_BK * 2) > 6
               ? 6
               : (WG_SMEM_MAX - 2 * wg5_cbytes(EPI) - 1024 - 256) / (WG_A_BYTES + WG5_BN * WG_BK * 2);
}
static __host__ __device__ constexpr int wg5_smem(int EPI) {
    return wg5_stages(EPI) * (WG_A_BYTES + WG5_BN * WG_BK * 2) + 2 * wg5_cbytes(EPI) + 1024 + 256;
}

template <int EPI, bool HASR>
__global__ void __launch_bounds__(WG3_THREADS, 1)
    wg5_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
               const __grid_constant__ CUtensorMap ty, const bf16 *__restrict__ bias, const bf16 *__restrict__ R,
               int M, int N, int K, const float *__restrict__ rs, const __grid_constant__ eng_cu_qk_args qk) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int ST = wg5_stages(EPI), B_BYTES = WG5_BN * WG_BK * 2, CB = wg5_cbytes(EPI);
    constexpr bool swiglu = ENG_CU_EPI_GATED(EPI); /* the gate|up layout */
    extern __shared__ unsigned char wg_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *C = base, *sA = C + 2 * CB, *sB = sA + ST * WG_A_BYTES;
    uint64_t *full = (uint64_t *)(sB + ST * B_BYTES), *empty = full + ST, *order = empty + ST;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, KT = K / WG_BK, nN = N / WG5_BN;
    const int tiles = nN * ((M + WG_BM - 1) / WG_BM);
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            wg_bar_init(&full[s], 1);
            wg_bar_init(&empty[s], 4); /* the four warps of the warpgroup reading it */
        }
        wg_bar_init(&order[0], 4); /* warpgroup 1's warps: its main loop of a tile is done */
        wg_bar_init(&order[1], 4); /* warpgroup 0's */
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp >= 8) { /* the producer warpgroup, as in version 3 */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 256) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&ta) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&tb) : "memory");
            int it = 0;
            for (int t = blockIdx.x; t < tiles; t += gridDim.x)
                wg_produce<WG5_BN, ST>(&ta, &tb, sA, sB, full, empty, it, (t / nN) * WG_BM, (t % nN) * WG5_BN, N, KT,
                                       swiglu);
        }
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int wgp = warp >> 2;
    const bool lead = (threadIdx.x & 127) == 0;
    unsigned char *Cw = C + wgp * CB; /* this warpgroup's image */
    const uint32_t Cs = wg_smem(Cw);
    float d0[64], d1[64];
#pragma unroll
    for (int i = 0; i < 64; i++) d0[i] = d1[i] = 0.f;
    /* j: the CTA's tile count (tile blockIdx.x + j gridDim.x); this
     * warpgroup takes j = wgp, wgp + 2, ...; its n-th tile is j = 2n + wgp */
    for (int j = wgp, n = 0; blockIdx.x + j * gridDim.x < tiles; j += 2, n++) {
        const int t = blockIdx.x + j * gridDim.x, m0 = (t / nN) * WG_BM, n0 = (t % nN) * WG5_BN;
        /* my turn: warpgroup 0's n-th tile follows warpgroup 1's (n-1)-th main loop, 1's n-th follows 0's n-th */
        if (wgp == 0 && n > 0) wg_bar_wait(&order[0], (n - 1) & 1);
        if (wgp == 1) wg_bar_wait(&order[1], n & 1);
        int it = j * KT;
        for (int kt = 0; kt < KT; kt++, it++) {
            const int s = it % ST;
            wg_bar_wait(&full[s], (it / ST) & 1);
            const unsigned char *a = sA + s * WG_A_BYTES, *b = sB + s * B_BYTES;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < WG_BK / 16; kk++) {
                wg_mma<128>(d0, wg_desc(a + 32 * kk), wg_desc(b + 32 * kk), kt | kk);
                wg_mma<128>(d1, wg_desc(a + 64 * 128 + 32 * kk), wg_desc(b + 32 * kk), kt | kk);
            }
            wg_commit();
            wg_wait<1>();
            if (kt > 0 && lane == 0) wg_bar_arrive(&empty[(it - 1) % ST]);
        }
        /* every slice of this tile waited for: the other warpgroup may start its next one */
        if (lane == 0) wg_bar_arrive(&order[1 - wgp]);
        wg_wait<0>();
        wg_fence_regs<64>(d0);
        wg_fence_regs<64>(d1);
        if (lane == 0) wg_bar_arrive(&empty[(it - 1) % ST]);
        /* the epilogue, under the other warpgroup's products */
        if (lead) wg_store_wait_read(); /* this warpgroup's last image has been read out */
        wg_group_sync(wgp);
        if constexpr (EPI == WG_EPI_QK) { /* one head a tile */
            wg_epilogue_img_qk<WG5_BN>(d0, 0, m0, n0, M, qk, Cs, rs);
            wg_epilogue_img_qk<WG5_BN>(d1, 64, m0, n0, M, qk, Cs, rs);
        } else {
            wg_epilogue_img<WG5_BN, EPI, HASR>(d0, 0, m0, n0, M, N, bias, R, Cs, rs);
            wg_epilogue_img<WG5_BN, EPI, HASR>(d1, 64, m0, n0, M, N, bias, R, Cs, rs);
        }
        wg_fence_async_smem();
        wg_group_sync(wgp);
        if (lead) {
            const int c0 = swiglu ? n0 >> 1 : n0;
            for (int q = 0; q < wg3_outc(WG5_BN, EPI) / 64; q++)
                for (int h = 0; h < 2; h++) wg_tma_store(&ty, Cw + q * 16384 + h * 8192, c0 + 64 * q, m0 + 64 * h);
            wg_store_commit();
        }
    }
    if (lead) wg_store_wait();
#else
    __trap();
#endif
}

/* ---- host side ---------------------------------------------------------------- */

static PFN_cuTensorMapEncodeTiled_v12000 wg_encode;
static int wg_state; /* 0 unknown, 1 usable, -1 not on this device */
static int wg_sms;

template <typename Kern>
static int wg_smem_optin(Kern k, int bytes) {
    return cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) == cudaSuccess ? 0 : -1;
}

/* sm_90 and the driver's tensor-map encoder, looked up once (no link
 * against libcuda: the runtime hands out the driver's entry point). */
int eng_cu_gemm_wg_available(void) {
    if (wg_state) return wg_state > 0;
    int dev = 0, major = 0;
    cudaDriverEntryPointQueryResult q;
    void *fn = NULL;
    wg_state = -1;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess || major != 9 ||
        cudaDeviceGetAttribute(&wg_sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return 0;
#if CUDART_VERSION >= 12050 /* the versioned lookup; the plain one is deprecated from CUDA 13 */
    const cudaError_t le =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
#else
    const cudaError_t le = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &q);
#endif
    if (le != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn) return 0;
    if (wg_smem_optin(wg1_kernel, WG1_SMEM) || wg_smem_optin(wg2_kernel<128>, wg2_smem(128)) ||
        wg_smem_optin(wg2_kernel<192>, wg2_smem(192)) || wg_smem_optin(wg2_kernel<256>, wg2_smem(256)))
        return 0;
    wg_encode = (PFN_cuTensorMapEncodeTiled_v12000)fn;
    wg_state = 1;
    return 1;
}

/* the tile width of version v: 1 and 5 128; 2-4 the widest of 256, 192,
 * 128 that divides N (SwiGLU: whose half divides N/2) */
static int wg_bn(int N, int epi, int v) {
    if (v == 1 || v == 5) return 128;
    for (int bn : {256, 192, 128}) {
        /* versions 3 and 4 store 64-column boxes: a SwiGLU tile's output
         * (bn / 2 wide) must be whole boxes */
        if (ENG_CU_EPI_GATED(epi) && v >= 3 && (bn / 2) % 64) continue;
        if (ENG_CU_EPI_GATED(epi) ? N % 2 == 0 && (N / 2) % (bn / 2) == 0 : N % bn == 0) return bn;
    }
    return 0;
}

static int wg_ok(int M, int N, int K, int epi, int v) {
    if (v == 6) return eng_cu_gemm_wres_ok(M, N, K, epi); /* W resident (eng_cu_gemm_wres.cu) */
    if (v < 1 || v > 5 || M < 1 || N < 128 || K < WG_BK || K % WG_BK || !wg_bn(N, epi, v)) return 0;
    /* the GELU-gated epilogues: versions 3 and 4 only */
    if ((epi == ENG_CU_EPI_GEGLU_TANH || epi == ENG_CU_EPI_GEGLU_ERF) && v != 3 && v != 4) return 0;
    if ((v == 1 || v == 5) && (N % 128 || (epi == ENG_CU_EPI_SWIGLU && (N / 2) % 64))) return 0;
    return eng_cu_gemm_wg_available();
}
int eng_cu_gemm_wg_ok(int M, int N, int K, int epi) { return wg_ok(M, N, K, epi, eng_cu_wg_version); }

/* rows x K bf16, row-major, boxes of box_rows x 64 with the 128-byte swizzle
 * (the operands' slices; version 3's output sub-tiles: K = the output width) */
static int wg_map(CUtensorMap *m, const bf16 *p, int rows, int K, int box_rows) {
    const cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)K * 2};
    const cuuint32_t box[2] = {WG_BK, (cuuint32_t)box_rows}, estr[2] = {1, 1};
    return wg_encode(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p, dims, strides, box, estr,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
               ? 0
               : -1;
}

int eng_cu_wg_map(CUtensorMap *m, const bf16 *p, int rows, int K, int box_rows) {
    return wg_map(m, p, rows, K, box_rows);
}
int eng_cu_wg_sm_count(void) { return wg_sms; }

/* Versions 3 and 4: the shared-memory opt-in once per kernel (the first
 * launch of each instantiation), then one CTA an SM.  RSH: rn's row
 * scales computed in the kernel (rs unused). */
template <int BN, int EPI, bool HASR, bool PROF, int IMG, bool RSH = false, int LN = 0>
static cudaError_t wg3_launch(cudaStream_t s, const CUtensorMap &ta, const CUtensorMap &tb, const CUtensorMap &ty,
                              const bf16 *bias, const bf16 *R, int M, int N, int K, int flags,
                              unsigned long long *prof, int *ctas, const eng_cu_qk_args *qk = nullptr,
                              const float *rs = nullptr, const eng_cu_row_norm *rn = nullptr,
                              const eng_cu_ln_epi *ln = nullptr) {
    constexpr int smem = wg3_smem(BN, EPI, IMG, RSH);
    if ((RSH && (!rn || !rn->n_rows_dev)) || (LN && !ln)) return cudaErrorInvalidValue;
    static int ready;
    if (!ready) {
        if (wg_smem_optin(wg3_kernel<BN, EPI, HASR, PROF, IMG, RSH, LN>, smem)) return cudaErrorInvalidValue;
        ready = 1;
    }
    const int tiles = (N / BN) * ((M + WG_BM - 1) / WG_BM), grid = tiles < wg_sms ? tiles : wg_sms;
    if (ctas) *ctas = grid;
    eng_cu_qk_args none;
    if (!qk) {
        memset(&none, 0, sizeof none);
        qk = &none;
    }
    eng_cu_ln_epi no_ln;
    memset(&no_ln, 0, sizeof no_ln);
    wg3_kernel<BN, EPI, HASR, PROF, IMG, RSH, LN><<<grid, WG3_THREADS, smem, s>>>(
        ta, tb, ty, bias, R, M, N, K, (RSH ? flags | eng_cu_wg_lab_flags : flags) | (eng_cu_order_take(1) ? WG_REV : 0),
        prof, *qk, rs,
        RSH ? rn->n_rows_dev : nullptr, RSH ? rn->eps : 0.f, ln ? *ln : no_ln);
    return cudaGetLastError();
}
template <int EPI, bool HASR, bool PROF, bool RSH = false, int LN = 0>
static cudaError_t wg3_pick(cudaStream_t s, const CUtensorMap &ta, const CUtensorMap &tb, const CUtensorMap &ty,
                            const bf16 *bias, const bf16 *R, int M, int N, int K, int bn, int img, int flags,
                            unsigned long long *prof, int *ctas, const float *rs,
                            const eng_cu_row_norm *rn = nullptr, const eng_cu_ln_epi *ln = nullptr) {
#define WG3_L(B, I) \
    wg3_launch<B, EPI, HASR, PROF, I, RSH, LN>(s, ta, tb, ty, bias, R, M, N, K, flags, prof, ctas, nullptr, rs, rn, ln)
    if (img) return bn == 256 ? WG3_L(256, 2) : bn == 192 ? WG3_L(192, 2) : WG3_L(128, 2);
    return bn == 256 ? WG3_L(256, 0) : bn == 192 ? WG3_L(192, 0) : WG3_L(128, 0);
#undef WG3_L
}
/* the operands' tensor maps (W's boxes: the tile's rows, or SwiGLU's gate
 * and up halves), then the kernel of this epilogue; PROF has the lab's
 * profile epilogues only (none, bias, SwiGLU; no residual); img: version
 * 4's two-buffer image */
template <bool PROF>
static cudaError_t wg3_run(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y,
                           int M, int N, int K, int epi, int img, int flags, unsigned long long *prof, int *ctas,
                           const float *rs = nullptr, const eng_cu_row_norm *rn = nullptr) {
    const int bn = wg_bn(N, epi, 3), swiglu = ENG_CU_EPI_GATED(epi);
    CUtensorMap ta, tb, ty;
    if (wg_map(&ta, X, M, K, WG_BM) || wg_map(&tb, W, N, K, swiglu ? bn / 2 : bn) ||
        wg_map(&ty, Y, M, swiglu ? N / 2 : N, 64) || ((uintptr_t)Y & 15))
        return cudaErrorInvalidValue;
#define WG3_PICK(E, H) wg3_pick<E, H, PROF>(s, ta, tb, ty, bias, R, M, N, K, bn, img, flags, prof, ctas, rs)
    if constexpr (PROF) {
        if (R) return cudaErrorInvalidValue;
        return epi == ENG_CU_EPI_SWIGLU ? WG3_PICK(ENG_CU_EPI_SWIGLU, false)
               : epi == ENG_CU_EPI_NONE ? WG3_PICK(ENG_CU_EPI_NONE, false)
                                        : WG3_PICK(ENG_CU_EPI_BIAS, false);
    } else {
        switch (epi) {
        case ENG_CU_EPI_NONE: return R ? WG3_PICK(ENG_CU_EPI_NONE, true) : WG3_PICK(ENG_CU_EPI_NONE, false);
        case ENG_CU_EPI_BIAS: return R ? WG3_PICK(ENG_CU_EPI_BIAS, true) : WG3_PICK(ENG_CU_EPI_BIAS, false);
        case ENG_CU_EPI_BIAS_GELU:
            return R ? WG3_PICK(ENG_CU_EPI_BIAS_GELU, true) : WG3_PICK(ENG_CU_EPI_BIAS_GELU, false);
        case ENG_CU_EPI_SWIGLU:
            /* the SwiGLU with its own row scales (RSH) */
            if (rn) return wg3_pick<ENG_CU_EPI_SWIGLU, false, false, true>(s, ta, tb, ty, bias, R, M, N, K, bn, img,
                                                                           flags, prof, ctas, NULL, rn);
            return WG3_PICK(ENG_CU_EPI_SWIGLU, false);
        case ENG_CU_EPI_GEGLU_TANH: return rn ? cudaErrorInvalidValue : WG3_PICK(ENG_CU_EPI_GEGLU_TANH, false);
        case ENG_CU_EPI_GEGLU_ERF: return rn ? cudaErrorInvalidValue : WG3_PICK(ENG_CU_EPI_GEGLU_ERF, false);
        default: return cudaErrorInvalidValue;
        }
    }
#undef WG3_PICK
}

/* Version 3 (or 4, where eng_cu_wg_version says 4) with PROF, for
 * lab_wgmma: prof holds ENG_CU_WG_PROF_SLOTS values per CTA, *ctas gets
 * the grid size. */
cudaError_t eng_cu_gemm_wg_profile(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                                   bf16 *Y, int M, int N, int K, int epi, int no_epilogue, unsigned long long *prof,
                                   int *ctas) {
    if (!wg_ok(M, N, K, epi, 3) || R || (epi != ENG_CU_EPI_NONE && epi != ENG_CU_EPI_SWIGLU && !bias) ||
        (((uintptr_t)X | (uintptr_t)W) & 15))
        return cudaErrorInvalidValue;
    return wg3_run<true>(s, X, W, bias, R, Y, M, N, K, epi, eng_cu_wg_version == 4 ? 2 : 0,
                         no_epilogue ? 0x100 : 0, prof, ctas);
}

/* Version 5: the opt-in once per kernel, one CTA an SM; the maps as
 * version 3's (the output in 64-row boxes: each warpgroup stores its
 * tile's halves) */
template <int EPI, bool HASR>
static cudaError_t wg5_launch(cudaStream_t s, const CUtensorMap &ta, const CUtensorMap &tb, const CUtensorMap &ty,
                              const bf16 *bias, const bf16 *R, int M, int N, int K, const float *rs,
                              const eng_cu_qk_args *qk = nullptr) {
    constexpr int smem = wg5_smem(EPI);
    static int ready;
    if (!ready) {
        if (wg_smem_optin(wg5_kernel<EPI, HASR>, smem)) return cudaErrorInvalidValue;
        ready = 1;
    }
    const int tiles = (N / WG5_BN) * ((M + WG_BM - 1) / WG_BM), grid = tiles < wg_sms ? tiles : wg_sms;
    eng_cu_order_take(0); /* first to last only */
    eng_cu_qk_args none;
    if (!qk) {
        memset(&none, 0, sizeof none);
        qk = &none;
    }
    wg5_kernel<EPI, HASR><<<grid, WG3_THREADS, smem, s>>>(ta, tb, ty, bias, R, M, N, K, rs, *qk);
    return cudaGetLastError();
}
static cudaError_t wg5_run(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y,
                           int M, int N, int K, int epi, const float *rs = nullptr) {
    const int swiglu = epi == ENG_CU_EPI_SWIGLU;
    CUtensorMap ta, tb, ty;
    if (wg_map(&ta, X, M, K, WG_BM) || wg_map(&tb, W, N, K, swiglu ? WG5_BN / 2 : WG5_BN) ||
        wg_map(&ty, Y, M, swiglu ? N / 2 : N, 64) || ((uintptr_t)Y & 15))
        return cudaErrorInvalidValue;
#define WG5_L(E, H) wg5_launch<E, H>(s, ta, tb, ty, bias, R, M, N, K, rs)
    switch (epi) {
    case ENG_CU_EPI_NONE: return R ? WG5_L(ENG_CU_EPI_NONE, true) : WG5_L(ENG_CU_EPI_NONE, false);
    case ENG_CU_EPI_BIAS: return R ? WG5_L(ENG_CU_EPI_BIAS, true) : WG5_L(ENG_CU_EPI_BIAS, false);
    case ENG_CU_EPI_BIAS_GELU: return R ? WG5_L(ENG_CU_EPI_BIAS_GELU, true) : WG5_L(ENG_CU_EPI_BIAS_GELU, false);
    default: return WG5_L(ENG_CU_EPI_SWIGLU, false);
    }
#undef WG5_L
}

cudaError_t eng_cu_gemm_wg(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y,
                           int M, int N, int K, int epi) {
    return eng_cu_gemm_wg_v(eng_cu_wg_version, s, X, W, bias, R, Y, M, N, K, epi);
}

cudaError_t eng_cu_gemm_wg_v(int v, cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                             bf16 *Y, int M, int N, int K, int epi) {
    if (!wg_ok(M, N, K, epi, v) || (ENG_CU_EPI_GATED(epi) && R) ||
        (epi != ENG_CU_EPI_NONE && !ENG_CU_EPI_GATED(epi) && !bias) || ((uintptr_t)X | (uintptr_t)W) & 15)
        return cudaErrorInvalidValue;
    if (v == 5) return wg5_run(s, X, W, bias, R, Y, M, N, K, epi);
    if (v == 6) return R ? cudaErrorInvalidValue : eng_cu_gemm_wres(s, X, W, bias, Y, M, N, K, epi);
    if (v >= 3) return wg3_run<false>(s, X, W, bias, R, Y, M, N, K, epi, v == 4 ? 2 : 0, 0, NULL, NULL);
    const int bn = wg_bn(N, epi, v), swiglu = epi == ENG_CU_EPI_SWIGLU;
    CUtensorMap ta, tb;
    if (wg_map(&ta, X, M, K, WG_BM) || wg_map(&tb, W, N, K, swiglu ? bn / 2 : bn)) return cudaErrorInvalidValue;
    const int mt = (M + WG_BM - 1) / WG_BM, tiles = mt * (N / bn), grid = tiles < wg_sms ? tiles : wg_sms;
    eng_cu_order_take(0); /* versions 1, 2: first to last only */
    if (v == 1)
        wg1_kernel<<<dim3(N / 128, mt), WG_THREADS, WG1_SMEM, s>>>(ta, tb, bias, R, Y, M, N, K, epi);
    else if (bn == 256)
        wg2_kernel<256><<<grid, WG_THREADS, wg2_smem(256), s>>>(ta, tb, bias, R, Y, M, N, K, epi);
    else if (bn == 192)
        wg2_kernel<192><<<grid, WG_THREADS, wg2_smem(192), s>>>(ta, tb, bias, R, Y, M, N, K, epi);
    else
        wg2_kernel<128><<<grid, WG_THREADS, wg2_smem(128), s>>>(ta, tb, bias, R, Y, M, N, K, epi);
    return cudaGetLastError();
}

/* Qwen3's QKV product with the q/k norm + rotary in the epilogue, no
 * bias: version 3 two heads of 128 a 256-wide tile, so both the Q | K and
 * K | V boundaries must fall on tile edges (even head counts); version 5
 * (ping-pong) one head a 128-wide tile. */
int eng_cu_gemm_wg_qk_ok(int v, int M, int N, int K, const eng_cu_qk_args *qk) {
    if (!qk || (v != 3 && v != 5) || qk->head_dim != 128 || qk->n_heads <= 0 || qk->n_kv_heads <= 0 ||
        N != (qk->n_heads + 2 * qk->n_kv_heads) * 128 || qk->ld != N || !qk->rope || qk->rope_rows <= 0 ||
        !qk->q_norm || !qk->k_norm || !qk->cu_seqlens || !qk->n_seqs_dev || !wg_ok(M, N, K, ENG_CU_EPI_NONE, v))
        return 0;
    return v == 5 || (qk->n_heads % 2 == 0 && qk->n_kv_heads % 2 == 0 && wg_bn(N, ENG_CU_EPI_NONE, 3) == 256);
}

cudaError_t eng_cu_gemm_wg_qk(int v, cudaStream_t s, const bf16 *X, const bf16 *W, bf16 *Y, int M, int N, int K,
                              const eng_cu_qk_args *qk, const float *rs, const eng_cu_row_norm *rn) {
    if (!eng_cu_gemm_wg_qk_ok(v, M, N, K, qk) || ((uintptr_t)X | (uintptr_t)W | (uintptr_t)Y) & 15 ||
        (uintptr_t)qk->rope & 15 || ((uintptr_t)qk->q_norm | (uintptr_t)qk->k_norm) & 7 ||
        (rn && (rs || v != 3 || !rn->n_rows_dev)))
        return cudaErrorInvalidValue;
    const int bn = v == 5 ? WG5_BN : 256;
    CUtensorMap ta, tb, ty;
    if (wg_map(&ta, X, M, K, WG_BM) || wg_map(&tb, W, N, K, bn) || wg_map(&ty, Y, M, N, 64))
        return cudaErrorInvalidValue;
    if (v == 5) return wg5_launch<WG_EPI_QK, false>(s, ta, tb, ty, NULL, NULL, M, N, K, rs, qk);
    if (rn) return wg3_launch<256, WG_EPI_QK, false, false, 0, true>(s, ta, tb, ty, NULL, NULL, M, N, K, 0, NULL, NULL,
                                                                     qk, NULL, rn);
    return wg3_launch<256, WG_EPI_QK, false, false, 0>(s, ta, tb, ty, NULL, NULL, M, N, K, 0, NULL, NULL, qk, rs);
}

/* The SwiGLU product with a scale per row (rs[row], before the bias):
 * X's RMSNorm with its weights folded into W, X taken raw.  Versions 3-5;
 * with rn instead of rs (versions 3, 4) the kernel's own scales. */
cudaError_t eng_cu_gemm_wg_rows(int v, cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, bf16 *Y,
                                int M, int N, int K, int epi, const float *rs, const eng_cu_row_norm *rn) {
    if (v < 3 || epi != ENG_CU_EPI_SWIGLU || !rs == !rn || (rn && (v > 4 || !rn->n_rows_dev)) ||
        !wg_ok(M, N, K, epi, v) || ((uintptr_t)X | (uintptr_t)W) & 15)
        return cudaErrorInvalidValue;
    if (v == 5) return wg5_run(s, X, W, bias, NULL, Y, M, N, K, epi, rs);
    return wg3_run<false>(s, X, W, bias, NULL, Y, M, N, K, epi, v == 4 ? 2 : 0, 0, NULL, NULL, rs, rn);
}

/* The LayerNorm-by-statistics epilogues (eng_cu_ln_epi): the kernels
 * compiled are the encoders' -- LNA with bias or bias + GELU and no
 * residual (QKV, up), OST with a residual, LNR or not, and a bias (O,
 * down) -- each for the tile widths and versions 3 / 4 (wg3_pick). */
cudaError_t eng_cu_gemm_wg_ln(int v, cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                              bf16 *Y, int M, int N, int K, int epi, const eng_cu_ln_epi *ln) {
    if (!ln || (v != 3 && v != 4) || (epi != ENG_CU_EPI_BIAS && epi != ENG_CU_EPI_BIAS_GELU) || !bias ||
        !wg_ok(M, N, K, epi, v) || N % 64 || ((uintptr_t)X | (uintptr_t)W | (uintptr_t)Y) & 15 ||
        ((uintptr_t)bias | (uintptr_t)R) & 3)
        return cudaErrorInvalidValue;
    const int lna = ln->a_stats != NULL, lnr = ln->r_stats != NULL, ost = ln->o_stats != NULL;
    if ((lna && (!ln->a_colsum || R || ost || lnr)) || (lnr && (!R || !ln->r_gamma || !ln->r_beta || !ost)) ||
        (ost && (!R || epi != ENG_CU_EPI_BIAS)) || (!lna && !ost))
        return cudaErrorInvalidValue; /* the combinations compiled */
    const int bn = wg_bn(N, epi, 3), img = v == 4 ? 2 : 0;
    CUtensorMap ta, tb, ty;
    if (wg_map(&ta, X, M, K, WG_BM) || wg_map(&tb, W, N, K, bn) || wg_map(&ty, Y, M, N, 64))
        return cudaErrorInvalidValue;
#define WG_LN_PICK(E, H, L) \
    wg3_pick<E, H, false, false, L>(s, ta, tb, ty, bias, R, M, N, K, bn, img, 0, NULL, NULL, NULL, NULL, ln)
    if (lna)
        return epi == ENG_CU_EPI_BIAS ? WG_LN_PICK(ENG_CU_EPI_BIAS, false, WG_LNA)
                                      : WG_LN_PICK(ENG_CU_EPI_BIAS_GELU, false, WG_LNA);
    return lnr ? WG_LN_PICK(ENG_CU_EPI_BIAS, true, WG_LNR | WG_OST) : WG_LN_PICK(ENG_CU_EPI_BIAS, true, WG_OST);
#undef WG_LN_PICK
}

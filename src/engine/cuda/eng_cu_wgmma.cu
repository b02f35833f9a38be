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
 * with it) but OPT-IN (POSY_CUDA_WGMMA=1): at the saturated step's shapes
 * it runs at 0.69-0.91x cuBLASLt's speed (best version per shape, last
 * H200 run), and the fused SwiGLU at 0.91-1.23x cuBLASLt + the SwiGLU
 * kernel depending on the run, so the engine's races kept cuBLASLt at
 * every 65536-row shape (docs/BENCHMARKS.md, "Our own Hopper GEMM").  ncu
 * (65536 x 4096 x 1024):
 * our tensor pipe is busy 67-70% of the time, cuBLASLt's kernel (tile
 * 320 x 128, clusters of two) 85%; the gap is in the main loop, not the
 * epilogue (storing by TMA, version 3, did not close it).
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
 *      (128-byte swizzle, conflict-free) and stored by TMA, so the
 *      consumers go on to the next tile while the copy engine writes; a
 *      producer warpgroup, so setmaxnreg moves its registers to the
 *      consumers (9 warps cap every thread at 168).
 * Two more were built, checked (lab and end to end) and measured on the
 * H200, then removed as slower (their code is in commit f844b0d): 4, 3
 * storing 64 x 64 sub-tiles a warpgroup through two 8 KB images (a fourth
 * ring stage at 128 x 256; like 3, a little slower), and 5, 4 in clusters
 * of two CTAs sharing the W slice by TMA multicast (1.6-2.1x cuBLASLt's
 * time, not understood).
 * GELU is cuBLASLt's tanh form, so both paths agree.
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

/* version 1: one 128 x 128 tile a CTA, 3 stages, two CTAs an SM */
#define WG1_STAGES 3
#define WG1_SMEM (WG1_STAGES * 2 * WG_A_BYTES + 1024 + 64)
/* version 2: persistent, 128 x BN tiles, as many stages as fit 192 KB */
static __host__ __device__ constexpr int wg2_stages(int BN) { return 196608 / (WG_A_BYTES + BN * WG_BK * 2) > 6 ? 6 : 196608 / (WG_A_BYTES + BN * WG_BK * 2); }
static __host__ __device__ constexpr int wg2_smem(int BN) { return wg2_stages(BN) * (WG_A_BYTES + BN * WG_BK * 2) + 1024 + 128; }

/* version 3: version 2 with the output tile written to shared memory and
 * stored by TMA, so the consumers go on to the next tile's products while
 * the copy engine writes this one; the ring gets what the image leaves */
/* IMG = 2 (versions 5, 6; 256-wide tiles only): an image of half the
 * tile, stored in two passes, so the ring gets a fourth stage.  The
 * budget: the opt-in maximum (227 KB), less the image, the 1024-byte
 * alignment fix-up and the barriers. */
#define WG_SMEM_MAX 232448
static __host__ __device__ constexpr int wg3_cbytes(int BN, int IMG = 1) { return WG_BM * BN * 2 / IMG; }
static __host__ __device__ constexpr int wg3_stages(int BN, int IMG = 1) {
    return (WG_SMEM_MAX - wg3_cbytes(BN, IMG) - 1024 - 128) / (WG_A_BYTES + BN * WG_BK * 2) > 6
               ? 6
               : (WG_SMEM_MAX - wg3_cbytes(BN, IMG) - 1024 - 128) / (WG_A_BYTES + BN * WG_BK * 2);
}
static __host__ __device__ constexpr int wg3_smem(int BN, int IMG = 1) {
    return wg3_stages(BN, IMG) * (WG_A_BYTES + BN * WG_BK * 2) + wg3_cbytes(BN, IMG) + 1024 + 128;
}

int eng_cu_wg_version = 3;

/* ---- device side -------------------------------------------------------------- */

/* The producer warp's lane 0: the X and W slices of every k-step of the
 * tiles this CTA computes into the ring (it = the CTA's running k-step
 * count, shared with the consumers' numbering).  CL = 2 (version 4): the
 * two CTAs of a cluster compute vertically adjacent tiles (the same W
 * columns); each loads its own X rows and half of the W slice (rank 0 the
 * first BN/2 rows -- SwiGLU: the gate half --, rank 1 the rest), which the
 * TMA multicasts into both CTAs' rings; a slot's empty barrier then counts
 * both CTAs' consumers, since the peer's copy is refilled from here. */
template <int BN, int ST, bool PROF = false, int CL = 1>
static __device__ __forceinline__ void wg_produce(const CUtensorMap *ta, const CUtensorMap *tb, unsigned char *sA,
                                                  unsigned char *sB, uint64_t *full, uint64_t *empty, int &it,
                                                  int m0, int n0, int N, int KT, bool swiglu,
                                                  unsigned long long *pc = nullptr, uint32_t rank = 0) {
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
        if constexpr (CL == 2) {
            const int row = swiglu ? (rank ? N >> 1 : 0) + (n0 >> 1) : n0 + (int)rank * (BN / 2);
            wg_tma_multicast(tb, sB + s * B_BYTES + rank * (B_BYTES / 2), &full[s], kt * WG_BK, row, 3);
        } else if (swiglu) { /* BN/2 gate rows, then the BN/2 matching up rows */
            wg_tma(tb, sB + s * B_BYTES, &full[s], kt * WG_BK, n0 >> 1);
            wg_tma(tb, sB + s * B_BYTES + B_BYTES / 2, &full[s], kt * WG_BK, (N >> 1) + (n0 >> 1));
        } else
            wg_tma(tb, sB + s * B_BYTES, &full[s], kt * WG_BK, n0);
    }
#endif
}

/* a slot given back: to this CTA's producer, and with clusters to the
 * peer's, whose multicast refills it here too */
template <int CL>
static __device__ __forceinline__ void wg_release(uint64_t *bar, uint32_t peer) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    wg_bar_arrive(bar);
    if constexpr (CL == 2) wg_bar_arrive_remote(bar, peer);
#endif
}

/* A consumer warpgroup's products for one tile: d = X[rows] W[cols]^T over
 * K, each slot released (one arrival a warp) once the wgmma reading it is
 * done -- the last one too, so a persistent producer can run ahead. */
template <int BN, int ST, bool PROF = false, int CL = 1>
static __device__ __forceinline__ void wg_consume(float *d, const unsigned char *sA, const unsigned char *sB,
                                                  uint64_t *full, uint64_t *empty, int &it, int wgp, int KT,
                                                  unsigned long long *pc = nullptr, uint32_t peer = 0) {
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
        if (kt > 0 && lane == 0) wg_release<CL>(&empty[(it - 1) % ST], peer);
    }
    wg_wait<0>();
    wg_fence_regs<BN / 2>(d);
    if (lane == 0) wg_release<CL>(&empty[(it - 1) % ST], peer);
#endif
}

/* barriers: full[s] (one arrival: the producer's expect_tx), empty[s] (one
 * arrival per consumer warp of the CL CTAs of the cluster); with clusters
 * the peer's barriers exist before anything is multicast to it */
template <int ST, int CL = 1>
static __device__ __forceinline__ void wg_init_bars(uint64_t *full, uint64_t *empty) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            wg_bar_init(&full[s], 1);
            wg_bar_init(&empty[s], 8 * CL);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    if constexpr (CL == 2)
        wg_cluster_sync();
    else
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

/* One store pass of versions 3-7: once the image's last store has read it
 * out, the accumulators' column groups J0..J1 into it, then nbox TMA
 * stores of 64 columns from output column c0 (PROF: the waits into pe[0],
 * the image writes into pe[1]). */
template <int BN, int J0, int J1, bool PROF, bool STM>
static __device__ __forceinline__ void wg3_store_pass(const float *d, int m0, int n0, int c0, int nbox, int M, int N,
                                                      int epi, const bf16 *__restrict__ bias,
                                                      const bf16 *__restrict__ R, unsigned char *C,
                                                      const CUtensorMap *ty, unsigned long long *pe) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    unsigned long long t0 = 0;
    if constexpr (PROF) t0 = clock64();
    if (threadIdx.x == 0) wg_store_wait_read();
    wg_consumers_sync();
    if constexpr (PROF) pe[0] += clock64() - t0, t0 = clock64();
    wg_epilogue_smem<BN, J0, J1, STM>(d, (threadIdx.x >> 7) * 64, m0, n0, M, N, epi, bias, R, C);
    if constexpr (PROF) pe[1] += clock64() - t0;
    wg_fence_async_smem();
    wg_consumers_sync();
    if (threadIdx.x == 0) {
        for (int q = 0; q < nbox; q++) wg_tma_store(ty, C + q * 16384, c0 + 64 * q, m0);
        wg_store_commit();
    }
#endif
}

/* PROF (lab only, eng_cu_gemm_wg_profile): clock64 sums per CTA into
 * prof[WG_PROF_SLOTS blockIdx.x ..]: for consumer warpgroup w (its first
 * thread) at 6w.. the cycles waiting for data, waiting for its wgmma
 * group, in the epilogue, in all, and the parts of the epilogue spent
 * waiting (for the image's last store to read it out, and for the other
 * warpgroup) and writing the image; at 12 and 13 the producer's cycles
 * waiting for a free slot, and in all.  0x100 in epi: no epilogue at all
 * (the lab's ablation; outputs unwritten).
 * CL = 2 is version 4: clusters of two CTAs on vertically adjacent tiles
 * sharing the W slice (wg_produce); a CTA walks units u = cluster index,
 * + clusters, ... (a unit: tile rows 2(u / nN) + rank, columns u % nN). */
template <int BN, bool PROF = false, int CL = 1, int IMG = 1, bool STM = false>
__global__ void __launch_bounds__(WG3_THREADS, 1)
    wg3_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
               const __grid_constant__ CUtensorMap ty, const bf16 *__restrict__ bias, const bf16 *__restrict__ R,
               int M, int N, int K, int epi, unsigned long long *prof = nullptr) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int ST = wg3_stages(BN, IMG), B_BYTES = BN * WG_BK * 2;
    extern __shared__ unsigned char wg_raw[];
    /* with clusters both CTAs need the same layout (the multicast writes at
     * this CTA's offsets): the same dynamic size and the same fix-up of the
     * same static offset give it */
    unsigned char *base = (unsigned char *)(((uintptr_t)wg_raw + 1023) & ~(uintptr_t)1023);
    unsigned char *C = base, *sA = C + wg3_cbytes(BN, IMG), *sB = sA + ST * WG_A_BYTES;
    uint64_t *full = (uint64_t *)(sB + ST * B_BYTES), *empty = full + ST;
    const int warp = threadIdx.x >> 5, KT = K / WG_BK, nN = N / BN;
    const int units = nN * (((M + WG_BM - 1) / WG_BM + CL - 1) / CL), u0 = blockIdx.x / CL, du = gridDim.x / CL;
    uint32_t rank = 0;
    if constexpr (CL == 2) rank = wg_cluster_rank();
    /* PROF with 0x100 in epi (the lab's ablation): no epilogue */
    const bool skip = PROF && (epi & 0x100);
    epi &= 0xff;
    const bool swiglu = epi == ENG_CU_EPI_SWIGLU;
    int it = 0;
    unsigned long long pc[2] = {0, 0}, t_start = 0, t_epi = 0, pe[2] = {0, 0};
    if constexpr (PROF) t_start = clock64();
    wg_init_bars<ST, CL>(full, empty);
    if (warp >= 8) { /* the producer warpgroup: one thread issues, all give registers back */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 256) {
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&ta) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)&tb) : "memory");
            for (int u = u0; u < units; u += du)
                wg_produce<BN, ST, PROF, CL>(&ta, &tb, sA, sB, full, empty, it, ((u / nN) * CL + rank) * WG_BM,
                                             (u % nN) * BN, N, KT, swiglu, pc, rank);
            if constexpr (PROF) {
                prof[WG_PROF_SLOTS * blockIdx.x + 12] = pc[0];
                prof[WG_PROF_SLOTS * blockIdx.x + 13] = clock64() - t_start;
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
        float d[BN / 2];
#pragma unroll
        for (int i = 0; i < BN / 2; i++) d[i] = 0.f;
        for (int u = u0; u < units; u += du) {
            const int m0 = ((u / nN) * CL + rank) * WG_BM, n0 = (u % nN) * BN;
            wg_consume<BN, ST, PROF, CL>(d, sA, sB, full, empty, it, warp >> 2, KT, pc, rank ^ 1);
            unsigned long long t0 = 0;
            if constexpr (PROF) t0 = clock64();
            /* the output's 64-column boxes, in one pass or (half image, not
             * SwiGLU, whose output is half as wide) two */
            const int c0 = swiglu ? n0 >> 1 : n0;
            if (skip) {
            } else if (IMG == 2 && !swiglu) {
                wg3_store_pass<BN, 0, BN / 16, PROF, STM>(d, m0, n0, c0, BN / 128, M, N, epi, bias, R, C, &ty, pe);
                wg3_store_pass<BN, BN / 16, BN / 8, PROF, STM>(d, m0, n0, c0 + BN / 2, BN / 128, M, N, epi, bias, R,
                                                               C, &ty, pe);
            } else
                wg3_store_pass<BN, 0, BN / 8, PROF, STM>(d, m0, n0, c0, (swiglu ? BN / 2 : BN) / 64, M, N, epi, bias,
                                                         R, C, &ty, pe);
            if constexpr (PROF) t_epi += clock64() - t0;
        }
        if (threadIdx.x == 0) wg_store_wait();
        if constexpr (PROF) {
            if ((threadIdx.x & 127) == 0) {
                unsigned long long *o = prof + WG_PROF_SLOTS * blockIdx.x + 6 * (threadIdx.x >> 7);
                o[0] = pc[0];
                o[1] = pc[1];
                o[2] = t_epi;
                o[3] = clock64() - t_start;
                o[4] = pe[0];
                o[5] = pe[1];
            }
        }
    }
    /* no CTA leaves while its peer may still arrive on its barriers */
    if constexpr (CL == 2) wg_cluster_sync();
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

/* the tile width: version 1 128; versions 2 and 3 the widest of 256, 192, 128
 * that divides N (SwiGLU: whose half divides N/2) */
static int wg_bn(int N, int epi) {
    if (eng_cu_wg_version == 1) return 128;
    for (int bn : {256, 192, 128}) {
        /* version 3 stores 64-column boxes: a SwiGLU tile's output (bn / 2
         * wide) must be whole boxes */
        if (epi == ENG_CU_EPI_SWIGLU && eng_cu_wg_version >= 3 && (bn / 2) % 64) continue;
        if (epi == ENG_CU_EPI_SWIGLU ? N % 2 == 0 && (N / 2) % (bn / 2) == 0 : N % bn == 0) return bn;
    }
    return 0;
}

int eng_cu_gemm_wg_ok(int M, int N, int K, int epi) {
    if (M < 1 || N < 128 || K < WG_BK || K % WG_BK || !wg_bn(N, epi)) return 0;
    if (eng_cu_wg_version == 1 && (N % 128 || (epi == ENG_CU_EPI_SWIGLU && (N / 2) % 64))) return 0;
    return eng_cu_gemm_wg_available();
}

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

/* Versions 3-6 (CL = 1, 2; IMG = 1, 2): the shared-memory opt-in once per
 * kernel (PROF's instantiations are not opted in at start-up), then one
 * CTA an SM -- for clusters as many as can be resident at once, which the
 * occupancy query says (a persistent grid larger than what fits would run
 * its last clusters after the others). */
template <int BN, bool PROF, int CL, int IMG, bool STM>
static cudaError_t wg3_launch(cudaStream_t s, const CUtensorMap &ta, const CUtensorMap &tb, const CUtensorMap &ty,
                              const bf16 *bias, const bf16 *R, int M, int N, int K, int epi,
                              unsigned long long *prof, int *ctas) {
    static int ready, fit; /* this instantiation's: opted in; clusters resident at once */
    auto kern = wg3_kernel<BN, PROF, CL, IMG, STM>;
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = CL;
    at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
    cfg.blockDim = dim3(WG3_THREADS);
    cfg.dynamicSmemBytes = wg3_smem(BN, IMG);
    cfg.stream = s;
    cfg.attrs = at;
    cfg.numAttrs = CL > 1;
    if (!ready) {
        if (wg_smem_optin(kern, wg3_smem(BN, IMG))) return cudaErrorInvalidValue;
        fit = wg_sms / CL;
        cfg.gridDim = dim3(CL * fit);
        if (CL > 1 && (cudaOccupancyMaxActiveClusters(&fit, kern, &cfg) != cudaSuccess || fit < 1))
            return cudaErrorInvalidValue;
        ready = 1;
    }
    const int units = (N / BN) * (((M + WG_BM - 1) / WG_BM + CL - 1) / CL), grid = CL * (units < fit ? units : fit);
    if (ctas) *ctas = grid;
    cfg.gridDim = dim3(grid);
    return cudaLaunchKernelEx(&cfg, kern, ta, tb, ty, bias, R, M, N, K, epi, prof);
}

/* by tile width: W's boxes are the whole slice, or half of it (SwiGLU's
 * gate and up halves; in clusters each CTA loads one half); the half
 * image only changes 256-wide tiles */
template <bool PROF, int CL, int IMG, bool STM = false>
static cudaError_t wg3_pick(cudaStream_t s, const CUtensorMap &ta, const CUtensorMap &tb, const CUtensorMap &ty,
                            const bf16 *bias, const bf16 *R, int M, int N, int K, int epi, int bn,
                            unsigned long long *prof, int *ctas) {
    return bn == 256   ? wg3_launch<256, PROF, CL, IMG, STM>(s, ta, tb, ty, bias, R, M, N, K, epi, prof, ctas)
           : bn == 192 ? wg3_launch<192, PROF, CL, 1, STM>(s, ta, tb, ty, bias, R, M, N, K, epi, prof, ctas)
                       : wg3_launch<128, PROF, CL, 1, STM>(s, ta, tb, ty, bias, R, M, N, K, epi, prof, ctas);
}
template <bool PROF>
static cudaError_t wg3_run(int version, cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias,
                           const bf16 *R, bf16 *Y, int M, int N, int K, int epi, unsigned long long *prof,
                           int *ctas) {
    /* (epi may carry PROF's 0x100) */
    const int bn = wg_bn(N, epi & 0xff), swiglu = (epi & 0xff) == ENG_CU_EPI_SWIGLU;
    const int cl = version == 4 || version == 6 ? 2 : 1;
    CUtensorMap ta, tb, ty;
    if (wg_map(&ta, X, M, K, WG_BM) || wg_map(&tb, W, N, K, swiglu || cl == 2 ? bn / 2 : bn) ||
        wg_map(&ty, Y, M, swiglu ? N / 2 : N, WG_BM) || ((uintptr_t)Y & 15))
        return cudaErrorInvalidValue;
    switch (version) {
    case 4: return wg3_pick<PROF, 2, 1>(s, ta, tb, ty, bias, R, M, N, K, epi, bn, prof, ctas);
    case 5: return wg3_pick<PROF, 1, 2>(s, ta, tb, ty, bias, R, M, N, K, epi, bn, prof, ctas);
    case 6: return wg3_pick<PROF, 2, 2>(s, ta, tb, ty, bias, R, M, N, K, epi, bn, prof, ctas);
    case 7: return wg3_pick<PROF, 1, 1, true>(s, ta, tb, ty, bias, R, M, N, K, epi, bn, prof, ctas);
    default: return wg3_pick<PROF, 1, 1>(s, ta, tb, ty, bias, R, M, N, K, epi, bn, prof, ctas);
    }
}

/* Versions 3-7 (the current version if one of them, else 3) with PROF,
 * for lab_wgmma: prof holds ENG_CU_WG_PROF_SLOTS values per CTA, *ctas
 * gets the grid size. */
cudaError_t eng_cu_gemm_wg_profile(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                                   bf16 *Y, int M, int N, int K, int epi, int no_epilogue, unsigned long long *prof,
                                   int *ctas) {
    const int v = eng_cu_wg_version, pv = v >= 3 && v <= 7 ? v : 3;
    eng_cu_wg_version = pv;
    const int ok = eng_cu_gemm_wg_ok(M, N, K, epi);
    eng_cu_wg_version = v;
    if (!ok || (epi == ENG_CU_EPI_SWIGLU && R) || (epi != ENG_CU_EPI_NONE && epi != ENG_CU_EPI_SWIGLU && !bias) ||
        (((uintptr_t)X | (uintptr_t)W) & 15))
        return cudaErrorInvalidValue;
    const cudaError_t e =
        wg3_run<true>(pv, s, X, W, bias, R, Y, M, N, K, epi | (no_epilogue ? 0x100 : 0), prof, ctas);
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t eng_cu_gemm_wg(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y,
                           int M, int N, int K, int epi) {
    if (!eng_cu_gemm_wg_ok(M, N, K, epi) || (epi == ENG_CU_EPI_SWIGLU && R) ||
        (epi != ENG_CU_EPI_NONE && epi != ENG_CU_EPI_SWIGLU && !bias) || ((uintptr_t)X | (uintptr_t)W) & 15)
        return cudaErrorInvalidValue;
    const int bn = wg_bn(N, epi), swiglu = epi == ENG_CU_EPI_SWIGLU;
    CUtensorMap ta, tb;
    if (wg_map(&ta, X, M, K, WG_BM) || wg_map(&tb, W, N, K, swiglu ? bn / 2 : bn)) return cudaErrorInvalidValue;
    const int mt = (M + WG_BM - 1) / WG_BM, tiles = mt * (N / bn), grid = tiles < wg_sms ? tiles : wg_sms;
    if (eng_cu_wg_version >= 3) {
        const cudaError_t e = wg3_run<false>(eng_cu_wg_version, s, X, W, bias, R, Y, M, N, K, epi, NULL, NULL);
        if (e != cudaSuccess) return e;
    } else if (eng_cu_wg_version == 1)
        wg1_kernel<<<dim3(N / 128, mt), WG_THREADS, WG1_SMEM, s>>>(ta, tb, bias, R, Y, M, N, K, epi);
    else if (bn == 256)
        wg2_kernel<256><<<grid, WG_THREADS, wg2_smem(256), s>>>(ta, tb, bias, R, Y, M, N, K, epi);
    else if (bn == 192)
        wg2_kernel<192><<<grid, WG_THREADS, wg2_smem(192), s>>>(ta, tb, bias, R, Y, M, N, K, epi);
    else
        wg2_kernel<128><<<grid, WG_THREADS, wg2_smem(128), s>>>(ta, tb, bias, R, Y, M, N, K, epi);
    return cudaGetLastError();
}

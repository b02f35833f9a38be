/* eng_cu_gemm_wres: Y = X W^T + b (GELU optional) for short K, with each
 * CTA's block of W's rows held in shared memory for the whole kernel --
 * our GEMM's "version 6" (eng_cu_gemm_wg_v), raced per shape beside
 * cuBLASLt and versions 3 / 4 by eng_cu_gemm's tuning.
 *
 * Why: at K = 384 (all-MiniLM-L6's QKV and up projections) a 128 x 256
 * tile reads 288 KB of operands for 25 MFLOP, more L2 -> SM bytes per
 * product than the SMs can take together, and cuBLASLt ran MiniLM's QKV
 * at ~565 TFLOP/s, our version 4 its up + GELU at ~490 (ncu, run 24).
 * With W resident (a 192 x 384 block is 147 KB) a tile of 64 rows reads
 * only its 48 KB of X.  The CTAs split into N / NB column groups; the
 * CTAs of a group walk the row tiles g, g + G, ..., so the groups read
 * the same tile at about the same time (X from HBM once, then L2).  The
 * ring, the ping-pong warpgroups and W's loading are eng_cu_wres.h's; the
 * epilogue adds the bias (fp32 in shared memory), applies GELU (the tanh
 * form, as versions 3 / 4 and cuBLASLt) and stores 64 x 64 boxes by TMA
 * through two 8 KB images a warpgroup.
 *
 * Where it applies (eng_cu_gemm_wres_ok): sm_90a, no residual, epilogue
 * none / bias / bias + GELU, K % 64 == 0 with at most 10 k-slices and NB
 * (192 or 128, whichever divides N and keeps more SMs busy) x K beside a
 * ring of at least three slots in 227 KB: K <= 384 at NB = 192, <= 640 at
 * 128.  Tested by dev/cuda/lab_wgmma.cu against fp64 (version 6).
 */
#include "eng_cu_wres.h"

#define WS_EXTRA (1024 + 256) /* alignment fix-up, barriers */

/* W's block, the images, the bias (fp32 pairs) */
static __host__ __device__ constexpr int ws_fixed(int NB, int K) {
    return wr_w_bytes(NB, K) + 2 * 2 * WR_IMG_BYTES + WS_EXTRA + 4 * NB;
}
static int ws_stages(int NB, int K) {
    const int st = (WR_SMEM_MAX - ws_fixed(NB, K)) / WR_A_BYTES;
    return st > WR_ST_MAX ? WR_ST_MAX : st;
}

template <int NB, int EPI>
__global__ void __launch_bounds__(WR_THREADS, 1)
    ws_kernel(const __grid_constant__ CUtensorMap ta, const __grid_constant__ CUtensorMap tb,
              const __grid_constant__ CUtensorMap ty, const bf16 *__restrict__ bias, int M, int N, int K, int ST,
              int rev) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    static_assert(NB == 128 || NB == 192, "the wgmma widths the tile uses");
    constexpr int NBOX = NB / 64;
    extern __shared__ unsigned char ws_raw[];
    unsigned char *base = (unsigned char *)(((uintptr_t)ws_raw + 1023) & ~(uintptr_t)1023);
    const int KT = K / WR_BK, groups = N / NB, G = gridDim.x / groups;
    const int cg = blockIdx.x % groups, g0 = blockIdx.x / groups, n0 = cg * NB;
    const int tiles = (M + WR_BM - 1) / WR_BM;
    unsigned char *sW = base, *sA = sW + wr_w_bytes(NB, K), *img = sA + ST * WR_A_BYTES;
    uint64_t *full = (uint64_t *)(img + 2 * 2 * WR_IMG_BYTES), *empty = full + WR_ST_MAX, *wbar = empty + WR_ST_MAX;
    float2 *pb = (float2 *)((unsigned char *)full + 256); /* the block's bias pairs */
    const int warp = threadIdx.x >> 5;
    if (threadIdx.x == 0) {
        wr_bars_init(full, empty, wbar, ST, KT);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    for (int c = threadIdx.x; c < NB / 2; c += WR_THREADS)
        pb[c] = EPI == ENG_CU_EPI_NONE ? make_float2(0.f, 0.f)
                                       : __bfloat1622float2(*(const __nv_bfloat162 *)(bias + n0 + 2 * c));
    __syncthreads();
    if (warp >= 8) { /* the producer warpgroup: one thread issues, all give registers back */
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
        if (threadIdx.x == 256)
            wr_produce<NB>(&ta, &tb, sW, sA, full, empty, wbar, n0, KT, ST, g0, G, tiles, rev, [](int) {});
        return;
    }
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
    const int wgp = warp >> 2, lane = threadIdx.x & 31, t2 = 2 * (lane & 3), tq = lane & 3;
    const int r0 = (warp & 3) * 16 + (lane >> 2); /* the thread's rows r0, r0 + 8 of a tile */
    const bool lead = (threadIdx.x & 127) == 0;    /* its warpgroup's thread that stores */
    const uint32_t img0 = wg_smem(img + wgp * 2 * WR_IMG_BYTES) + r0 * 128 + 2 * t2, pb_s = wg_smem(pb);
    const int key = r0 & 7;
    float d[NB / 2];
#pragma unroll
    for (int q = 0; q < NB / 2; q++) d[q] = 0.f;
    int s = (wgp * KT) % ST, ph = ((wgp * KT) / ST) & 1; /* the ring at tile wgp's first slice */
    int nbox = 0;                                          /* boxes stored: their image alternates */
    for (int i = wgp, n = 0;; i += 2, n++) {
        const int t = g0 + i * G;
        if (t >= tiles) break;
        const int m0 = (rev ? tiles - 1 - t : t) * WR_BM;
        wr_products<NB>(d, sA, sW, full, empty, wbar, s, ph, KT, ST, wgp, n == 0, i > 0, t + G < tiles);
#pragma unroll
        for (int q = 0; q < NBOX; q++, nbox++)
            wr_store_box(&ty, img + wgp * 2 * WR_IMG_BYTES, img0, wgp, lead, nbox, n0 + 64 * q, m0, [&](uint32_t line) {
#pragma unroll
                for (int jj = 0; jj < 8; jj++) {
                    const int j = 8 * q + jj;
                    const float2 bb = wr_lds2(pb_s + 8 * (tq + 4 * j));
                    float v[4] = {d[4 * j] + bb.x, d[4 * j + 1] + bb.y, d[4 * j + 2] + bb.x, d[4 * j + 3] + bb.y};
                    if constexpr (EPI == ENG_CU_EPI_BIAS_GELU)
#pragma unroll
                        for (int e = 0; e < 4; e++) v[e] = wg_gelu(v[e]);
                    const uint32_t at = line + ((jj ^ key) << 4);
                    wg_sts32(at, wg_pack(v[0], v[1]));
                    wg_sts32(at + 1024, wg_pack(v[2], v[3]));
                }
            });
    }
    if (lead) wg_store_wait();
#else
    __trap(); /* eng_cu_gemm_wres_ok never lets another architecture launch this */
#endif
}

/* ---- host side ---------------------------------------------------------------- */

/* the block width for N: 192 or 128, dividing N, whose column groups keep
 * the most SMs busy (groups x floor(SMs / groups)); 0 if neither fits */
static int ws_nb(int N, int K, int sms) {
    int best = 0, busy = 0;
    for (int nb : {192, 128}) {
        if (N % nb || ws_fixed(nb, K) >= WR_SMEM_MAX || ws_stages(nb, K) < 3) continue;
        const int groups = N / nb, b = groups <= sms ? groups * (sms / groups) : 0;
        if (b > busy) best = nb, busy = b;
    }
    return best;
}

int eng_cu_gemm_wres_ok(int M, int N, int K, int epi) {
    return M >= 1 && K >= WR_BK && K % WR_BK == 0 && K / WR_BK <= WR_KT_MAX &&
           (epi == ENG_CU_EPI_NONE || epi == ENG_CU_EPI_BIAS || epi == ENG_CU_EPI_BIAS_GELU) &&
           eng_cu_gemm_wg_available() && ws_nb(N, K, eng_cu_wg_sm_count()) > 0;
}

template <int NB, int EPI>
static cudaError_t ws_launch(cudaStream_t s, const CUtensorMap &ta, const CUtensorMap &tb, const CUtensorMap &ty,
                             const bf16 *bias, int M, int N, int K) {
    static int ready;
    if (!ready) {
        if (cudaFuncSetAttribute(ws_kernel<NB, EPI>, cudaFuncAttributeMaxDynamicSharedMemorySize, WR_SMEM_MAX) !=
            cudaSuccess)
            return cudaErrorInvalidValue;
        ready = 1;
    }
    const int ST = ws_stages(NB, K), smem = ws_fixed(NB, K) + ST * WR_A_BYTES;
    const int groups = N / NB, tiles = (M + WR_BM - 1) / WR_BM, sms = eng_cu_wg_sm_count();
    const int G = groups <= sms ? (sms / groups < tiles ? sms / groups : tiles) : 1; /* CTAs a column group */
    ws_kernel<NB, EPI><<<groups * G, WR_THREADS, smem, s>>>(ta, tb, ty, bias, M, N, K, ST,
                                                           eng_cu_order_take(1)); /* rev: tiles last to first */
    return cudaGetLastError();
}

cudaError_t eng_cu_gemm_wres(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, bf16 *Y, int M, int N,
                             int K, int epi) {
    if (!eng_cu_gemm_wres_ok(M, N, K, epi) || (epi != ENG_CU_EPI_NONE && !bias) ||
        ((uintptr_t)X | (uintptr_t)W | (uintptr_t)Y) & 15 || (uintptr_t)bias & 3)
        return cudaErrorInvalidValue;
    const int nb = ws_nb(N, K, eng_cu_wg_sm_count());
    CUtensorMap ta, tb, ty;
    if (eng_cu_wg_map(&ta, X, M, K, WR_BM) || eng_cu_wg_map(&tb, W, N, K, nb) || eng_cu_wg_map(&ty, Y, M, N, 64))
        return cudaErrorInvalidValue;
#define WS_EPI(NB)                                                                                     \
    (epi == ENG_CU_EPI_BIAS_GELU ? ws_launch<NB, ENG_CU_EPI_BIAS_GELU>(s, ta, tb, ty, bias, M, N, K) \
     : epi == ENG_CU_EPI_BIAS    ? ws_launch<NB, ENG_CU_EPI_BIAS>(s, ta, tb, ty, bias, M, N, K)      \
                                 : ws_launch<NB, ENG_CU_EPI_NONE>(s, ta, tb, ty, bias, M, N, K))
    return nb == 192 ? WS_EPI(192) : WS_EPI(128);
#undef WS_EPI
}

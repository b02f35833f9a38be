/* eng_cu_attn_v3: variable-length attention for throughput -- a persistent
 * version of eng_cu_attn.cu's v2 that keeps every block streaming, and
 * optionally applies Qwen3's per-head q/k RMSNorm + rotary embedding on
 * the tiles as they land in shared memory.
 *
 * Why: the H200 profile of a saturated step (bench/profile_gpu.sh, 65536
 * tokens in sequences of 128) had v2 at 91 TFLOP/s for d=32 and ~2 TB/s
 * of Q/K/V traffic for d=64: with 128-token sequences a v2 block lives for
 * one query tile and two key tiles, so its first loads (Q, K0, V0) are
 * never overlapped with its own work, and thousands of grid slots sized for
 * the bucket exit at once.  Here a grid of (resident blocks) walks the
 * work items w = (query tile, head) with a stride of gridDim.x, and the
 * block's key-tile loop runs straight across items: while tile j of item w
 * is computed, the next tile -- of w, or the first of the next item, with
 * that item's Q -- is already in flight (cp.async, two stages of Q, K, V).
 *
 * Per tile the arithmetic is v2's own code (eng_attn_tile in
 * eng_cu_frag.h): 4 warps x 16 query rows, S = Q K^T, the mask only where
 * needed, online softmax, O += P V.  Items in head-minor order keep a
 * sequence's K/V (and a GQA group's) hot in L2.
 *
 * The q/k fusion (a.q_norm != NULL): Q and K arrive raw from the QKV GEMM;
 * after a tile lands, each warp normalises rows of it in shared memory
 * (sum of squares by shuffles, weight, rotate_half with the cos/sin table
 * row of the token's position) with eng_cu_qk_norm_rope's fp32 formula and
 * single bf16 rounding -- the sum of squares runs in another order, so a
 * few outputs differ in the last bit (lab_attn counts them) -- then a
 * block barrier.  It saves
 * that kernel's full read and write of Q and K; K rows are normalised once
 * per (query tile, q head) that reads them.
 *
 * Outcome on the H200 (lab_attn, 2026-11-29): opt-in only (POSY_CUDA_ATTN=3,
 * POSY_CUDA_QK_FUSE=1).  At 512 x 128 tokens: d=32 121 vs v2's 123 us,
 * d=64 221 vs 182, d=128 causal 469 vs 544; at 16 x 1024 d=128 causal 527
 * vs 466 (static striding of unequal causal items leaves a tail).  The
 * fused q/k pass costs more than the kernel it saves: 823 us against 727
 * for qk_norm_rope + v3 (the first, warp-per-row version: 1228), because
 * the whole block waits at a barrier while a tile is transformed.
 */
#include "eng_cu_frag.h"
#include <math.h>

#define V3_THREADS 128

template <int D> struct v3_shape {
    static constexpr int BM = ENG_CU_ATTN_BM, BN = D >= 128 ? 32 : 64, LD = D + 8;
    static constexpr size_t smem = (size_t)2 * (BM + 2 * BN) * LD * sizeof(bf16);
};

/* One work item: query tile t of the tile list, for q head h. */
typedef struct v3_item {
    int start, len, q0, qrows, h, ntiles;
} v3_item;

template <int D, bool CAUSAL>
static __device__ __forceinline__ v3_item v3_describe(const eng_cu_attn_args &a, int w) {
    constexpr int BM = v3_shape<D>::BM, BN = v3_shape<D>::BN;
    v3_item it;
    const int t = w / a.n_heads;
    it.h = w - t * a.n_heads;
    const int seq = a.tiles[2 * t];
    it.q0 = a.tiles[2 * t + 1];
    it.start = a.cu_seqlens[seq];
    it.len = a.cu_seqlens[seq + 1] - it.start;
    it.qrows = min(BM, it.len - it.q0);
    const int kend = CAUSAL ? min(it.len, it.q0 + BM) : it.len;
    it.ntiles = (kend + BN - 1) / BN;
    return it;
}

/* Issue the copies of step (it, j): Q of the item when j == 0, K and V
 * tile j; one commit group. */
template <int D>
static __device__ __forceinline__ void v3_issue(const eng_cu_attn_args &a, const v3_item &it, int j,
                                                bf16 *sQ, bf16 *sK, bf16 *sV) {
    constexpr int BM = v3_shape<D>::BM, BN = v3_shape<D>::BN;
    const int kvh = it.h / (a.n_heads / a.n_kv_heads), k0 = j * BN;
    if (j == 0)
        eng_async_rows<BM, D, V3_THREADS>(sQ, a.q + (size_t)(it.start + it.q0) * a.ldq + it.h * D, a.ldq,
                                          it.qrows);
    eng_async_rows<BN, D, V3_THREADS>(sK, a.k + (size_t)(it.start + k0) * a.ldk + kvh * D, a.ldk,
                                      it.len - k0);
    eng_async_rows<BN, D, V3_THREADS>(sV, a.v + (size_t)(it.start + k0) * a.ldv + kvh * D, a.ldv,
                                      it.len - k0);
    eng_async_commit();
}

template <int D, bool CAUSAL, bool QKN>
__global__ void __launch_bounds__(V3_THREADS, D >= 128 ? 2 : 4) attn_kernel_v3(eng_cu_attn_args a) {
    ENG_CU_PDL_WAIT();
    constexpr int BM = v3_shape<D>::BM, BN = v3_shape<D>::BN, LD = v3_shape<D>::LD;
    extern __shared__ __align__(16) unsigned char v3_smem[];
    bf16 *const sQ = (bf16 *)v3_smem;      /* [2][BM * LD] */
    bf16 *const sK = sQ + 2 * BM * LD;     /* [2][BN * LD] */
    bf16 *const sV = sK + 2 * BN * LD;     /* [2][BN * LD] */

    const int n_items = *a.n_tiles_dev * a.n_heads;
    int w = blockIdx.x;
    if (w >= n_items) return;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int mi = lane >> 3, mr = lane & 7;
    const float sl2 = a.scale * 1.4426950408889634f;

    v3_item cur = v3_describe<D, CAUSAL>(a, w);
    int j = 0, qb = 0, kb = 0;
    v3_issue<D>(a, cur, 0, sQ, sK, sV);

    uint32_t qf[D / 16][4];
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

    for (;;) {
        /* the step after this one: the next key tile, or the next item's first */
        int nw = w, nj = j + 1;
        if (nj >= cur.ntiles) {
            nw = w + gridDim.x;
            nj = 0;
        }
        const bool more = nw < n_items;
        if (more) {
            /* the next item is described again after this step's work rather
             * than held across it: fewer live registers in the tile loop */
            v3_issue<D>(a, nj == 0 ? v3_describe<D, CAUSAL>(a, nw) : cur, nj, sQ + (qb ^ (nj == 0)) * BM * LD,
                        sK + (kb ^ 1) * BN * LD, sV + (kb ^ 1) * BN * LD);
            eng_async_wait<1>();
        } else {
            eng_async_wait<0>();
        }
        __syncthreads();
        bf16 *const Qs = sQ + qb * BM * LD, *const K = sK + kb * BN * LD, *const V = sV + kb * BN * LD;
        const int k0 = j * BN;
        if (QKN) {
            if (j == 0) eng_attn_qk_rows<D, V3_THREADS>(Qs, cur.qrows, cur.q0, a.q_norm, a);
            eng_attn_qk_rows<D, V3_THREADS>(K, min(BN, cur.len - k0), k0, a.k_norm, a);
            __syncthreads();
        }
        if (j == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++)
                eng_ldmatrix_x4(qf[kk], Qs + (warp * 16 + (mi & 1) * 8 + mr) * LD + kk * 16 + (mi >> 1) * 8);
        }
        const int len = cur.len, wrow0 = cur.q0 + warp * 16;
        eng_attn_tile<D, BN, CAUSAL>(qf, K, V, k0, len, wrow0, sl2, o, m, l);
        if (j == cur.ntiles - 1) { /* the item is done: normalise, store, reset */
            eng_attn_store<D>(o, l, cur.qrows, a.o + (size_t)(cur.start + cur.q0) * a.ldo + cur.h * D, a.ldo);
#pragma unroll
            for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
            m[0] = m[1] = -INFINITY;
            l[0] = l[1] = 0.f;
        }
        if (!more) break;
        __syncthreads(); /* this step's buffers are refilled by the next step's prefetch */
        kb ^= 1;
        if (nj == 0) {
            qb ^= 1;
            cur = v3_describe<D, CAUSAL>(a, nw);
        }
        w = nw;
        j = nj;
    }
}

/* Resident blocks per SM and SM count, asked once per instantiation (the
 * process drives one device; the first call is an eager run, never inside
 * a graph capture). */
template <int D, bool CAUSAL, bool QKN>
static cudaError_t v3_launch(cudaStream_t s, const eng_cu_attn_args *a) {
    static int grid_cap = 0;
    auto k = attn_kernel_v3<D, CAUSAL, QKN>;
    const size_t smem = v3_shape<D>::smem;
    if (!grid_cap) {
        int dev = 0, sms = 0, per_sm = 0;
        cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e == cudaSuccess) e = cudaGetDevice(&dev);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, V3_THREADS, smem);
        if (e != cudaSuccess) return e;
        if (per_sm < 1) return cudaErrorInvalidConfiguration;
        grid_cap = per_sm * sms;
    }
    const long items = (long)a->max_tiles * a->n_heads;
    const int grid = items < grid_cap ? (int)items : grid_cap;
    cudaError_t e = eng_cu_launch(k, dim3(grid), dim3(V3_THREADS), smem, s, *a);
    return e != cudaSuccess ? e : cudaGetLastError();
}

template <int D>
static cudaError_t v3_dispatch(cudaStream_t s, const eng_cu_attn_args *a) {
    const bool qkn = eng_cu_attn_qkn(a) != 0;
    if (a->causal) return qkn ? v3_launch<D, true, true>(s, a) : v3_launch<D, true, false>(s, a);
    return qkn ? v3_launch<D, false, true>(s, a) : v3_launch<D, false, false>(s, a);
}

cudaError_t eng_cu_attention_v3(cudaStream_t s, const eng_cu_attn_args *a) {
    if (a->q_norm && (!a->k_norm || !a->rope || a->rope_rows <= 0)) return cudaErrorInvalidValue;
    if (a->rope_only && (a->q_norm || a->k_norm || !a->rope || a->rope_rows <= 0)) return cudaErrorInvalidValue;
    switch (a->head_dim) {
    case 32: return v3_dispatch<32>(s, a);
    case 64: return v3_dispatch<64>(s, a);
    case 128: return v3_dispatch<128>(s, a);
    default: return cudaErrorInvalidValue;
    }
}

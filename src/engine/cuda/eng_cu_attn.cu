/* eng_cu_attn: variable-length attention over packed sequences, on tensor
 * cores (mma.sync m16n8k16 bf16 -> fp32), FlashAttention-style.
 *
 * Work unit: one query tile of BM=64 rows of one sequence, for one head
 * (grid = max_tiles x heads).  The host writes the tile list (sequence,
 * first row) next to cu_seqlens; blocks past the real tile count exit, so a
 * graph captured for a bucket serves any mix of sequences.  Nothing is
 * padded: key rows past a sequence's end are zero-filled in shared memory
 * and masked to -inf, query rows past it are never stored.
 *
 * Each of the 4 warps owns 16 query rows.  Per key tile (BN rows):
 * S = Q K^T in registers, scaled into the log2 domain, masked (length,
 * and key > query when causal), online softmax (running max and sum per
 * row, rescale of the output accumulator), then P is repacked from the S
 * accumulator layout straight into mma A-fragments (the two layouts agree)
 * and O += P V, with V's B-fragments read by ldmatrix.trans.  Q and K
 * fragments are 32-bit shared-memory loads; rows are padded by 16 bytes so
 * those loads and ldmatrix are bank-conflict free.  Softmax and the
 * accumulators are fp32; O is written as bf16.
 *
 * Causal attention only visits key tiles up to the last query row of the
 * tile: it is the prefill kernel the decoder models reuse.  Grouped-query
 * attention maps q head h to kv head h / (n_heads / n_kv_heads).
 *
 * Versions (args.version; 0 = eng_cu_attn_version(head_dim, 0): v10 on
 * Hopper, elsewhere v9 at head size 128, v5 at 32, v2 at 64, unless
 * POSY_CUDA_ATTN names another; the one-query chain asks for v2): 1 the
 * first kernel; 2 shipped at 64;
 * 3 persistent (eng_cu_attn_v3.cu); 4 and 5 are v2 with more blocks
 * resident (key tiles of 32 / 64, fewer registers) below D = 128, and at
 * D = 128 7 with three blocks an SM (4 capped at 168 registers, 5 with
 * QSM, below).  On the H200 (dev/cuda/NOTES.md, 2026-11-29 evening) none
 * of 3-5 beat v2 across lengths below D = 128: v3 wins on 128-token
 * sequences at d=128 (-14%) and loses at 512-1024 (+12-25%); v4 wins on
 * 16-token sequences (-30%) and loses elsewhere.  2026-12-02 (runs 17,
 * 18): at d = 32, v5 takes 113-118 us against v2's 132 at 512 x 128
 * tokens, 152 against 163 at 64 x 512, and MiniLM's saturated step up 2%:
 * the default there.
 * 6 is v2 with the head varying fastest over a one-dimensional grid, 7 is
 * 6 with two K/V stages at D = 128 too (dynamic shared memory): both aim
 * at the saturated step, where v2 reads one head's slice of many rows at
 * a time (1.4-2 TB/s at 128-token sequences, ncu, 2026-11-29 evening).
 * 8: key tiles of 128, one pass for a sequence of <= 128 tokens, the copy
 * of the next tile between the halves of this one.  9 reads Q's fragments
 * from shared memory at each k-step (eng_attn_scores' QSM: D/2 registers
 * fewer a thread) so more blocks fit an SM: at D = 128 v7's tiles, four
 * blocks instead of two (v7 holds 190 registers: 8 warps an SM), below
 * v2's tiles, d = 64 four blocks without v2's spills, d = 32 five.  (A q/k
 * norm with version 8 or 9 runs v2's fused path.)  Measured 2026-12-01
 * (docs/BENCHMARKS.md, "Saturated-step attention variants"): 6 and 8 are
 * no faster (v2 is neither locality- nor ILP-bound at 128 tokens; v8's
 * registers cost more blocks than its one pass saves); 7 took d = 128
 * from 549 to 453 us at 512 x 128 tokens and Qwen3's saturated step up
 * 1-2%.  2026-12-02 (run 17): 9 takes that case to 375 us and Qwen3's
 * step up a further 1.6-1.7%: the default at D = 128 off the chain.
 * (Tried 2026-12-02, run 18, not kept: 9 with the two query heads of a
 * K/V head in one block of 8 warps, each K/V tile loaded once for both --
 * 395 against 369 us at 512 x 128 tokens, d = 128.)
 * (Version 9 was v8 capped for one more block an SM at d < 128: no
 * faster than v2, replaced.)
 * 10 (eng_cu_attn_wg.cu, sm_90): both products as wgmma; the default on
 * Hopper since 2026-12-02, its measurements in that file's header.
 * MPNet's relative position bias (eng_cu_attn_args.rel, 2026-12-06): v2
 * (REL, the one-query chain's) and v10 (its static grid) add it to the
 * scores before the softmax (eng_attn_add_rel); every other version asked
 * for runs v2 then.  H200 run 86, 64 x 512 tokens, d = 64: v2 256 ->
 * 323 us, v10 two stages 209 -> 282 us (one global load a score, from L1).
 */
#include "eng_cu_frag.h"
#include "eng_cu_trace.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Copy `rows_valid` rows of D bf16 (stride ld in global) into a [R][D+8]
 * shared tile, zero-filling rows past rows_valid. */
template <int R, int D>
static __device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src, int ld,
                                                 int rows_valid) {
    constexpr int LD = D + 8, CPR = D / 8;
    for (int c = threadIdx.x; c < R * CPR; c += blockDim.x) {
        const int r = c / CPR, cc = (c % CPR) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < rows_valid) v = *(const uint4 *)(src + (size_t)r * ld + cc);
        *(uint4 *)(dst + r * LD + cc) = v;
    }
}

/* Version 1: synchronous K/V tile loads, mask and scale on every tile,
 * accurate exp2f.  Kept for the lab's comparison (args.version = 1). */
template <int D, bool CAUSAL>
__global__ void __launch_bounds__(128) attn_kernel_v1(eng_cu_attn_args a) {
    ENG_CU_PDL_WAIT();
    constexpr int BM = ENG_CU_ATTN_BM, BN = D >= 128 ? 32 : 64, LD = D + 8;
    __shared__ __align__(16) bf16 sQ[BM * LD];
    __shared__ __align__(16) bf16 sK[BN * LD];
    __shared__ __align__(16) bf16 sV[BN * LD];

    if ((int)blockIdx.x >= *a.n_tiles_dev) return;
    const int seq = a.tiles[2 * blockIdx.x], q0 = a.tiles[2 * blockIdx.x + 1];
    const int h = blockIdx.y, kvh = h / (a.n_heads / a.n_kv_heads);
    const int start = a.cu_seqlens[seq], len = a.cu_seqlens[seq + 1] - start;
    const int qrows = min(BM, len - q0);

    load_tile<BM, D>(sQ, a.q + (size_t)(start + q0) * a.ldq + h * D, a.ldq, qrows);
    __syncthreads();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const bf16 *b = sQ + (warp * 16) * LD + kk * 16 + 2 * t;
        qf[kk][0] = eng_ld32(b + g * LD);
        qf[kk][1] = eng_ld32(b + (g + 8) * LD);
        qf[kk][2] = eng_ld32(b + g * LD + 8);
        qf[kk][3] = eng_ld32(b + (g + 8) * LD + 8);
    }

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float sl2 = a.scale * 1.4426950408889634f;
    const int qi[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const int kend = CAUSAL ? min(len, q0 + BM) : len;

    const bf16 *kbase = a.k + (size_t)start * a.ldk + kvh * D;
    const bf16 *vbase = a.v + (size_t)start * a.ldv + kvh * D;
    for (int k0 = 0; k0 < kend; k0 += BN) {
        __syncthreads(); /* the previous tile's K/V are no longer read */
        load_tile<BN, D>(sK, kbase + (size_t)k0 * a.ldk, a.ldk, len - k0);
        load_tile<BN, D>(sV, vbase + (size_t)k0 * a.ldv, a.ldv, len - k0);
        __syncthreads();

        float sc[BN / 8][4];
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++) {
            sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                const bf16 *b = sK + (nt * 8 + g) * LD + kk * 16 + 2 * t;
                eng_mma16816(sc[nt], qf[kk], eng_ld32(b), eng_ld32(b + 8));
            }
        }
        /* mask, scale into log2 domain, running max */
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + nt * 8 + 2 * t + (e & 1), r = e >> 1;
                const bool ok = key < len && (!CAUSAL || key <= qi[r]);
                sc[nt][e] = ok ? sc[nt][e] * sl2 : -INFINITY;
                mx[r] = fmaxf(mx[r], sc[nt][e]);
            }
        float alpha[2], mu[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            mu[r] = mx[r] == -INFINITY ? 0.f : mx[r]; /* a row with no valid key yet */
            alpha[r] = exp2f(m[r] - mu[r]);
            m[r] = mx[r];
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            o[i][0] *= alpha[0]; o[i][1] *= alpha[0];
            o[i][2] *= alpha[1]; o[i][3] *= alpha[1];
        }
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                sc[nt][e] = exp2f(sc[nt][e] - mu[e >> 1]);
                l[e >> 1] += sc[nt][e];
            }
        /* O += P V: P's accumulator layout is the A-fragment layout */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t pa[4];
            pa[0] = eng_pack_bf16(sc[2 * kk][0], sc[2 * kk][1]);
            pa[1] = eng_pack_bf16(sc[2 * kk][2], sc[2 * kk][3]);
            pa[2] = eng_pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
            pa[3] = eng_pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
            for (int dn = 0; dn < D / 8; dn += 2) {
                const int mi = lane >> 3, r = lane & 7;
                uint32_t vb[4];
                eng_ldmatrix_x4_trans(vb, sV + (kk * 16 + (mi & 1) * 8 + r) * LD + (dn + (mi >> 1)) * 8);
                eng_mma16816(o[dn], pa, vb[0], vb[1]);
                eng_mma16816(o[dn + 1], pa, vb[2], vb[3]);
            }
        }
    }
    eng_attn_store<D>(o, l, qrows, a.o + (size_t)(start + q0) * a.ldo + h * D, a.ldo);
}

/* Version 2 (shipped; BN/MINB other than the defaults: versions 4, 5): K/V tiles double-buffered with cp.async so the next
 * tile streams in while this one is computed; K fragments by ldmatrix;
 * the mask is applied only on tiles that cross the sequence end or the
 * causal diagonal; softmax on raw scores with one FFMA + ex2.approx per
 * element (scale folded into the exponent), as FlashAttention-2 does.
 * D=128 keeps one stage by default (ST = 0: two stages below D=128, one
 * at 128); ST = 2 at D=128 (version 7) takes 52 KB of dynamic shared
 * memory a block.  Shared memory is dynamic in every instantiation (the
 * launcher passes attn_smem_bytes), so one body serves all.
 * HM (versions 6, 7): a one-dimensional grid with the head varying
 * fastest, so the blocks resident together read whole QKV rows (every
 * head of the same tokens) instead of one head's 64-256 bytes of rows
 * 2.3-6 KB apart; v2 keeps (tile, head) = (blockIdx.x, blockIdx.y).
 * QKN (a.q_norm set, or a.rope_only; the one-query chain of the
 * decoders): Q and K arrive raw from the QKV GEMM and each tile is
 * normalised (Qwen3 only) and rotated in shared memory as it lands
 * (eng_attn_qk_rows) -- for a short query one block barrier instead of
 * the q/k kernel's node of the chain. */
template <int D, int BN, int ST>
static constexpr size_t attn_smem_bytes() {
    return ((size_t)ENG_CU_ATTN_BM + 2 * (size_t)ST * BN) * (D + 8) * sizeof(bf16);
}

/* -DENG_CU_TRACE: v2's blocks stamp their start, the reads of their work
 * item (which end in the PDL wait), the wait's return, the first key tile
 * ready (after Qwen3's q/k norm: chain_trace.py's "weights" column) and
 * their end -- Qwen3's attention node of the one-query chain in
 * chain_trace.py's layout */
ENG_CU_TRACE_UNIT("attn")

template <int D, bool CAUSAL, int BN = (D >= 128 ? 32 : 64), int MINB = (D >= 128 ? 2 : 4), bool QKN = false,
          int ST_ = 0, bool HM = false, bool QSM = false, bool REL = false>
__global__ void __launch_bounds__(128, MINB) attn_kernel_v2(eng_cu_attn_args a) {
    constexpr int BM = ENG_CU_ATTN_BM, LD = D + 8, NT = 128;
    constexpr int ST = ST_ ? ST_ : (D >= 128 ? 1 : 2);
    extern __shared__ __align__(16) unsigned char attn_smem[];
    bf16 *sQ = (bf16 *)attn_smem;
    bf16 *const sK0 = sQ + BM * LD, *const sV0 = sK0 + ST * BN * LD; /* stage b at + b * BN * LD */

    const int tile = HM ? (int)blockIdx.x / a.n_heads : (int)blockIdx.x;
    const int h = HM ? (int)blockIdx.x - tile * a.n_heads : (int)blockIdx.y;
    ENG_CU_TRACE_BEGIN();
    ENG_CU_TRACE_AT(1);
    const attn_item it = attn_item_at<D, BN, CAUSAL>(a, tile, h);
    if (!it.live) return;
    ENG_CU_TRACE_AT(2);
    const int q0 = it.q0, start = it.start, len = it.len, qrows = it.qrows, ntiles = it.ntiles;
    const bf16 *kbase = it.kbase, *vbase = it.vbase;

    eng_async_rows<BM, D, NT>(sQ, a.q + (size_t)(start + q0) * a.ldq + h * D, a.ldq, qrows);
    eng_async_commit();
    eng_async_rows<BN, D, NT>(sK0, kbase, a.ldk, len);
    eng_async_commit();
    eng_async_rows<BN, D, NT>(sV0, vbase, a.ldv, len);
    eng_async_commit();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int mi = lane >> 3, mr = lane & 7;
    uint32_t qf[D / 16][4];
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float sl2 = a.scale * 1.4426950408889634f;
    const int wrow0 = q0 + warp * 16; /* this warp's first query row */
    /* REL: the head's bias row at distance 0 (eng_cu_attn_args.rel) */
    const float *rb = REL ? eng_attn_rel_row(a, h) : nullptr;
    const bf16 *Qs = sQ + (warp * 16 + (mi & 1) * 8 + mr) * LD + (mi >> 1) * 8; /* QSM: its ldmatrix address */

    for (int j = 0; j < ntiles; j++) {
        const int k0 = j * BN, buf = ST == 2 ? (j & 1) : 0;
        if (ST == 2 && j + 1 < ntiles) {
            eng_async_rows<BN, D, NT>(sK0 + ((j + 1) & 1) * BN * LD, kbase + (size_t)(k0 + BN) * a.ldk, a.ldk, len - k0 - BN);
            eng_async_commit();
            eng_async_rows<BN, D, NT>(sV0 + ((j + 1) & 1) * BN * LD, vbase + (size_t)(k0 + BN) * a.ldv, a.ldv, len - k0 - BN);
            eng_async_commit();
            eng_async_wait<2>();
        } else {
            eng_async_wait<0>();
        }
        __syncthreads();
        if constexpr (QKN) {
            if (j == 0) eng_attn_qk_rows<D, 128>(sQ, qrows, q0, a.q_norm, a);
            eng_attn_qk_rows<D, 128>(sK0 + buf * BN * LD, min(BN, len - k0), k0, a.k_norm, a);
            __syncthreads();
        }
        if (j == 0) ENG_CU_TRACE_AT(3);
        if (j == 0 && !QSM) {
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) eng_ldmatrix_x4(qf[kk], Qs + kk * 16);
        }
        const bf16 *K = sK0 + buf * BN * LD, *V = sV0 + buf * BN * LD;
        eng_attn_tile<D, BN, CAUSAL, QSM, REL>(qf, K, V, k0, len, wrow0, sl2, o, m, l, Qs, rb);
        __syncthreads(); /* buffer `buf` is refilled by the next iteration's prefetch */
        if (ST == 1 && j + 1 < ntiles) {
            eng_async_rows<BN, D, NT>(sK0, kbase + (size_t)(k0 + BN) * a.ldk, a.ldk, len - k0 - BN);
            eng_async_commit();
            eng_async_rows<BN, D, NT>(sV0, vbase + (size_t)(k0 + BN) * a.ldv, a.ldv, len - k0 - BN);
            eng_async_commit();
        }
    }
    eng_attn_store<D>(o, l, qrows, a.o + (size_t)(start + q0) * a.ldo + h * D, a.ldo);
    ENG_CU_TRACE_END();
}

/* Version 8: key tiles of 128 with one buffer each for K and V, and the
 * tile split at the softmax -- Q and K_j are waited for, S and the
 * probabilities computed while V_j is still landing, then K_{j+1} is
 * requested (every warp is past its Q K^T), V_j waited for and P V done,
 * then V_{j+1} requested.  Aimed at the saturated step of short
 * sequences: a sequence of <= 128 tokens is one pass with no rescale and
 * 16 independent products per warp instead of v2's two dependent halves.
 * Every commit group is committed even when empty, so the wait counts are
 * the same on every iteration. */
template <int D, bool CAUSAL, int MINB>
__global__ void __launch_bounds__(128, MINB) attn_kernel_v8(eng_cu_attn_args a) {
    constexpr int BM = ENG_CU_ATTN_BM, BN = 128, LD = D + 8;
    extern __shared__ __align__(16) unsigned char attn_smem[];
    bf16 *const sQ = (bf16 *)attn_smem, *const sK = sQ + BM * LD, *const sV = sK + BN * LD;
    const int h = blockIdx.y;
    const attn_item it = attn_item_at<D, BN, CAUSAL>(a, blockIdx.x, h);
    if (!it.live) return;
    const int q0 = it.q0, start = it.start, len = it.len, qrows = it.qrows, ntiles = it.ntiles;
    const bf16 *kbase = it.kbase, *vbase = it.vbase;

    eng_async_rows<BM, D, 128>(sQ, a.q + (size_t)(start + q0) * a.ldq + h * D, a.ldq, qrows);
    eng_async_rows<BN, D, 128>(sK, kbase, a.ldk, len);
    eng_async_commit();
    eng_async_rows<BN, D, 128>(sV, vbase, a.ldv, len);
    eng_async_commit();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int mi = lane >> 3, mr = lane & 7;
    uint32_t qf[D / 16][4];
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float sl2 = a.scale * 1.4426950408889634f;
    const int wrow0 = q0 + warp * 16;

    for (int j = 0; j < ntiles; j++) {
        const int k0 = j * BN;
        eng_async_wait<1>(); /* Q and K_j (V_j may still be in flight) */
        __syncthreads();
        if (j == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++)
                eng_ldmatrix_x4(qf[kk], sQ + (warp * 16 + (mi & 1) * 8 + mr) * LD + kk * 16 + (mi >> 1) * 8);
        }
        float sc[BN / 8][4];
        eng_attn_scores<D, BN, CAUSAL>(qf, sK, k0, len, wrow0, sl2, o, m, l, sc);
        __syncthreads(); /* every warp is done with K_j */
        if (j + 1 < ntiles) eng_async_rows<BN, D, 128>(sK, kbase + (size_t)(k0 + BN) * a.ldk, a.ldk, len - k0 - BN);
        eng_async_commit();
        eng_async_wait<1>(); /* V_j (K_{j+1} may still be in flight) */
        __syncthreads();
        eng_attn_pv<D, BN>(sc, sV, o);
        __syncthreads(); /* every warp is done with V_j */
        if (j + 1 < ntiles) eng_async_rows<BN, D, 128>(sV, vbase + (size_t)(k0 + BN) * a.ldv, a.ldv, len - k0 - BN);
        eng_async_commit();
    }
    eng_attn_store<D>(o, l, qrows, a.o + (size_t)(start + q0) * a.ldo + h * D, a.ldo);
}

/* v8 as the compiler sizes it (d = 32: 153 registers, 3 blocks an SM;
 * 64: 194, 2; 128: 242, 1) */
template <int D, bool C>
static cudaError_t launch_v8(cudaStream_t s, const eng_cu_attn_args *a) {
    constexpr int MB = D >= 128 ? 1 : D == 64 ? 2 : 3;
    constexpr size_t smem = ((size_t)ENG_CU_ATTN_BM + 2 * 128) * (D + 8) * sizeof(bf16);
    void (*k)(eng_cu_attn_args) = attn_kernel_v8<D, C, MB>;
    static bool optin = false; /* this instantiation's own */
    const cudaError_t e = attn_smem_optin<smem>(k, optin);
    if (e != cudaSuccess) return e;
    return eng_cu_launch(k, dim3(a->max_tiles, a->n_heads), dim3(128), smem, s, *a);
}

/* One v2-family kernel: its dynamic shared memory (above 48 KB only for
 * ST = 2 at D = 128, which needs attn_smem_optin) and its grid,
 * two-dimensional (tile, head) or, HM, one-dimensional with the head
 * fastest. */
template <int D, bool C, int BN, int MB, bool QKN, int ST, bool HM, bool QSM = false, bool REL = false>
static cudaError_t launch_v2(cudaStream_t s, const eng_cu_attn_args *a) {
    constexpr size_t smem = attn_smem_bytes<D, BN, ST ? ST : (D >= 128 ? 1 : 2)>();
    void (*k)(eng_cu_attn_args) = attn_kernel_v2<D, C, BN, MB, QKN, ST, HM, QSM, REL>;
    static bool optin = false; /* this instantiation's own */
    const cudaError_t e = attn_smem_optin<smem>(k, optin);
    if (e != cudaSuccess) return e;
    const dim3 grid = HM ? dim3((unsigned)(a->max_tiles * a->n_heads)) : dim3(a->max_tiles, a->n_heads);
    return eng_cu_launch(k, grid, dim3(128), smem, s, *a);
}

/* v: the resolved version (1, 2, 4 .. 9), not a->version (0 = shipped) */
template <int D>
static cudaError_t launch_d(cudaStream_t s, const eng_cu_attn_args *a, int v) {
    if (v == 1) {
        const dim3 grid(a->max_tiles, a->n_heads);
        if (a->causal)
            attn_kernel_v1<D, true><<<grid, 128, 0, s>>>(*a);
        else
            attn_kernel_v1<D, false><<<grid, 128, 0, s>>>(*a);
        return cudaGetLastError();
    }
    constexpr int BN = D >= 128 ? 32 : 64, MB = D >= 128 ? 2 : 4;
    if (D < 128 && v == 7) v = 6; /* below D = 128 v2 already has two stages */
    cudaError_t e;
    if (a->rel) /* MPNet's relative position bias: v2 only (eng_cu_attn_args.rel) */
        e = a->causal ? launch_v2<D, true, BN, MB, false, 0, false, false, true>(s, a)
                      : launch_v2<D, false, BN, MB, false, 0, false, false, true>(s, a);
    else if (v == 8 && !eng_cu_attn_qkn(a))
        e = a->causal ? launch_v8<D, true>(s, a) : launch_v8<D, false>(s, a);
    else if (v == 9 && !eng_cu_attn_qkn(a)) {
        /* Q's fragments read from shared memory at each k-step (QSM), so
         * more blocks fit an SM: d = 128 v7's tiles, four blocks (128
         * registers, 8 bytes spilled); 64 v2's, four (126 registers,
         * where v2 spills 28 bytes at 128); 32 v2's, five (96) */
        constexpr int MB9 = D >= 128 ? 4 : D == 64 ? 4 : 5, ST9 = D >= 128 ? 2 : 0;
        constexpr bool HM9 = D >= 128;
        e = a->causal ? launch_v2<D, true, BN, MB9, false, ST9, HM9, true>(s, a)
                      : launch_v2<D, false, BN, MB9, false, ST9, HM9, true>(s, a);
    } else if (eng_cu_attn_qkn(a)) /* the q/k norm or rotary: v2's tiles (or 6 / 7's), whatever BN/MINB version was asked */
        e = v == 6   ? (a->causal ? launch_v2<D, true, BN, MB, true, 0, true>(s, a)
                                  : launch_v2<D, false, BN, MB, true, 0, true>(s, a))
            : v == 7 ? (a->causal ? launch_v2<D, true, BN, MB, true, 2, true>(s, a)
                                  : launch_v2<D, false, BN, MB, true, 2, true>(s, a))
                     : (a->causal ? launch_v2<D, true, BN, MB, true, 0, false>(s, a)
                                  : launch_v2<D, false, BN, MB, true, 0, false>(s, a));
    else if (D >= 128 && (v == 4 || v == 5)) {
        /* v7 with three blocks an SM: 4 the compiler's 190 registers
         * capped at 168, 5 with Q read from shared memory (QSM, 157) */
        if constexpr (D >= 128) {
            e = v == 4 ? (a->causal ? launch_v2<D, true, BN, 3, false, 2, true>(s, a)
                                    : launch_v2<D, false, BN, 3, false, 2, true>(s, a))
                       : (a->causal ? launch_v2<D, true, BN, 3, false, 2, true, true>(s, a)
                                    : launch_v2<D, false, BN, 3, false, 2, true, true>(s, a));
        } else {
            e = cudaErrorInvalidValue;
        }
    } else if (v == 4 || v == 5) { /* lab variants: more blocks resident (spills measured in NOTES.md) */
        if constexpr (D < 128) {
            constexpr int MB4 = D == 32 ? 8 : 6, MB5 = D == 32 ? 6 : 5;
            e = v == 4 ? (a->causal ? launch_v2<D, true, 32, MB4, false, 0, false>(s, a) /* key tiles of 32 */
                                    : launch_v2<D, false, 32, MB4, false, 0, false>(s, a))
                       : (a->causal ? launch_v2<D, true, 64, MB5, false, 0, false>(s, a) /* key tiles of 64 */
                                    : launch_v2<D, false, 64, MB5, false, 0, false>(s, a));
        } else {
            e = cudaErrorInvalidValue;
        }
    } else if (v == 6)
        e = a->causal ? launch_v2<D, true, BN, MB, false, 0, true>(s, a) : launch_v2<D, false, BN, MB, false, 0, true>(s, a);
    else if (v == 7)
        e = a->causal ? launch_v2<D, true, BN, MB, false, 2, true>(s, a) : launch_v2<D, false, BN, MB, false, 2, true>(s, a);
    else
        e = a->causal ? launch_v2<D, true, BN, MB, false, 0, false>(s, a)
                      : launch_v2<D, false, BN, MB, false, 0, false>(s, a);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
}

int eng_cu_attn_version(int head_dim, int chain) {
    const char *e = getenv("POSY_CUDA_ATTN");
    if (e && e[0] >= '2' && e[0] <= '9' && !e[1]) return e[0] - '0';
    if (e && !strcmp(e, "10")) return 10; /* both products as wgmma, eng_cu_attn_wg.cu */
    /* off the chain on Hopper, v10 at every head size: saturated steps
     * 1.015-1.020x the previous defaults' on 128-token sequences and
     * 1.034-1.054x on mixed lengths, for Qwen3-0.6B, BERT-base and MiniLM
     * (run 28, 2026-12-02; eng_cu_attn_wg.cu).  Elsewhere, v9 at d = 128:
     * Qwen3-0.6B saturated steps 1.016 /
     * 1.017x v7's (run 17), which had been 1.011-1.022x v2's in four runs
     * (docs/BENCHMARKS.md); v5 at d = 32: MiniLM's 1.020 / 1.019x v2's
     * (run 18; v9 1.016 / 1.005x), lab 113 against 132 us at 512 x 128
     * tokens.  d = 64 keeps v2 (BERT-base: v9 1.000 / 1.005x, v5 0.99x).
     * The chain's short buckets keep v2, whose 35 KB of shared memory was
     * what they were tuned with */
    if (chain) return 2;
    if (eng_cu_gemm_wg_available()) return 10;
    return head_dim >= 128 ? 9 : head_dim == 32 ? 5 : 2;
}

int eng_cu_attn_fuses_qk(int head_dim) {
    const char *e = getenv("POSY_CUDA_QK_FUSE");
    (void)head_dim; /* every version but v1 (never the shipped one) fuses it */
    return e && !strcmp(e, "1");
}

cudaError_t eng_cu_attention(cudaStream_t s, const eng_cu_attn_args *a) {
    if (a->max_tiles <= 0 || a->n_heads <= 0 || a->n_kv_heads <= 0 ||
        a->n_heads % a->n_kv_heads || a->version < 0 || a->version > 10)
        return cudaErrorInvalidValue;
    if (a->window > 0 || a->head_dim == 256) return eng_cu_attention_win(s, a);
    if (a->rel && (eng_cu_attn_qkn(a) || a->rel_max <= 0)) return cudaErrorInvalidValue;
    int v = a->version ? a->version : eng_cu_attn_version(a->head_dim, 0);
    if (a->rel && v != 10) v = 2; /* the relative bias: v2 and v10 (off Hopper, v2) */
    if (v == 10 && !eng_cu_attn_qkn(a) && eng_cu_gemm_wg_available())
        return eng_cu_attention_wg(s, a); /* its launcher asks eng_cu_order_take */
    eng_cu_order_take(0); /* the others walk the tile list forwards */
    if (a->rev) return cudaErrorInvalidValue; /* rev is the launcher's to set */
    if (v == 3) return eng_cu_attention_v3(s, a);
    if (v == 10) v = 2; /* off Hopper, or with the q/k norm fused (the chain's), v2 stands in */
    if (a->q_norm && (v == 1 || !a->k_norm || !a->rope)) return cudaErrorInvalidValue; /* v2 and v3 fuse it */
    if (a->rope_only && (v == 1 || a->q_norm || a->k_norm || !a->rope)) return cudaErrorInvalidValue;
    switch (a->head_dim) {
    case 32: return launch_d<32>(s, a, v);
    case 64: return launch_d<64>(s, a, v);
    case 128: return launch_d<128>(s, a, v);
    default: return cudaErrorInvalidValue;
    }
}

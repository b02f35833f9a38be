/* eng_cu_frag: the warp-level building blocks the attention kernels share
 * (eng_cu_attn.cu's v1/v2, eng_cu_attn_v3.cu; the mma also the skinny GEMMs):
 * mma.sync m16n8k16 bf16 -> fp32, ldmatrix (plain and transposed), packing
 * two floats into a bf16x2 register, ex2.approx, cp.async of row tiles into
 * padded shared rows, and the attention kernels' per-key-tile step and
 * final store.
 * Kept in one header so every version is built from the same parts and a
 * lab comparing versions compares algorithms, not copies.
 */
#ifndef ENG_CU_FRAG_H
#define ENG_CU_FRAG_H

#include "eng_cu.h"

static __device__ __forceinline__ uint32_t eng_ld32(const bf16 *p) { return *(const uint32_t *)p; }

static __device__ __forceinline__ void eng_mma16816(float *c, const uint32_t *a, uint32_t b0,
                                                    uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ void eng_ldmatrix_x4(uint32_t *r, const bf16 *p) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

static __device__ __forceinline__ void eng_ldmatrix_x4_trans(uint32_t *r, const bf16 *p) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

static __device__ __forceinline__ uint32_t eng_pack_bf16(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&h;
}

static __device__ __forceinline__ float eng_fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* cp.async of a [R][D] bf16 tile (global stride ld) into [R][D+8] shared
 * rows by a block of NT threads; rows >= rows_valid are zero-filled by the
 * copy engine (src-size 0).  Does not commit: the caller groups copies. */
template <int R, int D, int NT>
static __device__ __forceinline__ void eng_async_rows(bf16 *dst, const bf16 *src, int ld,
                                                      int rows_valid) {
    constexpr int LD = D + 8, CPR = D / 8;
#pragma unroll
    for (int c = threadIdx.x; c < R * CPR; c += NT) {
        const int r = c / CPR, cc = (c % CPR) * 8;
        const bool ok = r < rows_valid;
        const bf16 *g = ok ? src + (size_t)r * ld + cc : src;
        const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst + r * LD + cc);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(g),
                     "r"(ok ? 16 : 0));
    }
}

static __device__ __forceinline__ void eng_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
static __device__ __forceinline__ void eng_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* One key tile of the FlashAttention-2 loop, for the calling warp's 16
 * query rows (wrow0 = the first, relative to the sequence; qf = their Q
 * fragments), in two halves so a kernel may put a barrier or a copy
 * between them (attention v8).  eng_attn_scores: S = Q K^T from
 * ldmatrix'd K, the mask only when the tile crosses the sequence end (len)
 * or, causal, the diagonal; online softmax in the log2 domain (sl2 = scale
 * * log2 e) with FFMA + ex2.approx, the accumulator o rescaled, and the
 * tile's probabilities left in sc.  eng_attn_pv: P repacked from the S
 * accumulators as A fragments; O += P V with ldmatrix.trans.  K, V:
 * [BN][D+8] shared tiles of keys k0.., zero rows past the end.
 * eng_attn_tile does both (attention v2 and v3); eng_attn_softmax is the
 * scores' softmax alone (also attention v10's, on wgmma accumulators).  QSM: Q's fragments are
 * read from shared memory at each k-step (Qs: the lane's ldmatrix address
 * of the warp's rows) instead of held in qf -- D/2 registers fewer a
 * thread, so more blocks fit an SM at D = 128 (attention v4, v5, v9 there). */
template <int D, int BN, bool CAUSAL>
static __device__ __forceinline__ void eng_attn_softmax(float (*sc)[4], int k0, int len, int wrow0, float sl2,
                                                        float (*o)[4], float *m, float *l);

/* MPNet: head h's row of the relative position bias table, at distance 0
 * (eng_cu_attn_args.rel; eng_relpos.h's layout) */
static __device__ __forceinline__ const float *eng_attn_rel_row(const eng_cu_attn_args &a, int h) {
    return a.rel + (size_t)h * (2 * (size_t)a.rel_max - 1) + (a.rel_max - 1);
}

/* MPNet's relative position bias on the warp's scores sc (the mma.sync C
 * layout, as eng_attn_softmax's): rb is the head's row in units of raw
 * scores (the bias / scale), pointing at distance 0; the bias of (key -
 * query) is added to the score of every real key and query row. */
template <int BN>
static __device__ __forceinline__ void eng_attn_add_rel(float (*sc)[4], const float *rb, int k0, int len, int wrow0) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int key = k0 + nt * 8 + 2 * t + (e & 1), q = wrow0 + g + 8 * (e >> 1);
            if (key < len && q < len) sc[nt][e] += __ldg(rb + (key - q));
        }
}

/* S = Q K^T of the warp's 16 query rows against a key tile of BN rows, into
 * sc (the mma.sync C layout): Q's fragments from registers (qf), or with
 * QSM from shared memory one k-step at a time (Qs: the warp's ldmatrix
 * address). */
template <int D, int BN, bool QSM>
static __device__ __forceinline__ void eng_attn_qk(const uint32_t (*qf)[4], const bf16 *K, float (*sc)[4],
                                                   const bf16 *Qs) {
    constexpr int LD = D + 8;
    const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
    if constexpr (QSM) { /* Q's fragments from shared memory, one k-step at a time */
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++) sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t q[4];
            eng_ldmatrix_x4(q, Qs + kk * 16);
#pragma unroll
            for (int nt = 0; nt < BN / 8; nt += 2) {
                uint32_t kb[4];
                eng_ldmatrix_x4(kb, K + (nt * 8 + (mi >> 1) * 8 + mr) * LD + kk * 16 + (mi & 1) * 8);
                eng_mma16816(sc[nt], q, kb[0], kb[1]);
                eng_mma16816(sc[nt + 1], q, kb[2], kb[3]);
            }
        }
    } else {
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt += 2) {
            sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
            sc[nt + 1][0] = sc[nt + 1][1] = sc[nt + 1][2] = sc[nt + 1][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t kb[4];
                eng_ldmatrix_x4(kb, K + (nt * 8 + (mi >> 1) * 8 + mr) * LD + kk * 16 + (mi & 1) * 8);
                eng_mma16816(sc[nt], qf[kk], kb[0], kb[1]);
                eng_mma16816(sc[nt + 1], qf[kk], kb[2], kb[3]);
            }
        }
    }
}

/* REL (MPNet): rb is the head's relative position bias row in units of
 * raw scores (the bias / scale, so the softmax's one FFMA scales both),
 * pointing at distance 0; the bias of (key - query) is added to every
 * score of a real key and query (eng_relpos.h, eng_cu_attn_args.rel). */
template <int D, int BN, bool CAUSAL, bool QSM = false, bool REL = false>
static __device__ __forceinline__ void eng_attn_scores(const uint32_t (*qf)[4], const bf16 *K, int k0, int len,
                                                       int wrow0, float sl2, float (*o)[4], float *m, float *l,
                                                       float (*sc)[4], const bf16 *Qs = nullptr,
                                                       const float *rb = nullptr) {
    eng_attn_qk<D, BN, QSM>(qf, K, sc, Qs);
    if constexpr (REL) eng_attn_add_rel<BN>(sc, rb, k0, len, wrow0);
    eng_attn_softmax<D, BN, CAUSAL>(sc, k0, len, wrow0, sl2, o, m, l);
}

/* The online-softmax half of a key tile on the warp's scores sc (the
 * mma.sync C layout: rows g and g + 8 of the warp's 16, columns 8 nt + 2t
 * + e -- wgmma's accumulators have the same, eng_cu_attn_wg.cu): the mask
 * only when the tile crosses the sequence end or the causal diagonal, the
 * running max and sum, o rescaled, the tile's probabilities left in sc. */
template <int D, int BN, bool CAUSAL>
static __device__ __forceinline__ void eng_attn_softmax(float (*sc)[4], int k0, int len, int wrow0, float sl2,
                                                        float (*o)[4], float *m, float *l) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int qi[2] = {wrow0 + g, wrow0 + g + 8};
    const bool need_mask = k0 + BN > len || (CAUSAL && k0 + BN - 1 > wrow0);
    if (need_mask) {
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + nt * 8 + 2 * t + (e & 1);
                if (key >= len || (CAUSAL && key > qi[e >> 1])) sc[nt][e] = -INFINITY;
            }
    }
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nt = 0; nt < BN / 8; nt++) {
        mx[0] = fmaxf(mx[0], fmaxf(sc[nt][0], sc[nt][1]));
        mx[1] = fmaxf(mx[1], fmaxf(sc[nt][2], sc[nt][3]));
    }
    float alpha[2], nms[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        const float mu = mx[r] == -INFINITY ? 0.f : mx[r];
        nms[r] = -mu * sl2;
        alpha[r] = eng_fast_exp2(fmaf(m[r], sl2, nms[r]));
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
            sc[nt][e] = eng_fast_exp2(fmaf(sc[nt][e], sl2, nms[e >> 1]));
            l[e >> 1] += sc[nt][e];
        }
}

template <int D, int BN>
static __device__ __forceinline__ void eng_attn_pv(const float (*sc)[4], const bf16 *V, float (*o)[4]) {
    constexpr int LD = D + 8;
    const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        uint32_t pa[4];
        pa[0] = eng_pack_bf16(sc[2 * kk][0], sc[2 * kk][1]);
        pa[1] = eng_pack_bf16(sc[2 * kk][2], sc[2 * kk][3]);
        pa[2] = eng_pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
        pa[3] = eng_pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
        for (int dn = 0; dn < D / 8; dn += 2) {
            uint32_t vb[4];
            eng_ldmatrix_x4_trans(vb, V + (kk * 16 + (mi & 1) * 8 + mr) * LD + (dn + (mi >> 1)) * 8);
            eng_mma16816(o[dn], pa, vb[0], vb[1]);
            eng_mma16816(o[dn + 1], pa, vb[2], vb[3]);
        }
    }
}

template <int D, int BN, bool CAUSAL, bool QSM = false, bool REL = false>
static __device__ __forceinline__ void eng_attn_tile(const uint32_t (*qf)[4], const bf16 *K, const bf16 *V,
                                                     int k0, int len, int wrow0, float sl2, float (*o)[4],
                                                     float *m, float *l, const bf16 *Qs = nullptr,
                                                     const float *rb = nullptr) {
    float sc[BN / 8][4];
    eng_attn_scores<D, BN, CAUSAL, QSM, REL>(qf, K, k0, len, wrow0, sl2, o, m, l, sc, Qs, rb);
    eng_attn_pv<D, BN>(sc, V, o);
}

/* A block's work item of the v2 family, v8 and v10 (eng_cu_attn.cu,
 * eng_cu_attn_wg.cu): query tile `tile` (its
 * sequence, first row, length) read from the input block before the PDL
 * wait (three dependent loads off a one-query chain's path), then, after
 * it, the rows and key tiles it covers and its head's K/V bases.  live is
 * false for blocks past the real tile count (they exit).  With a.rev, work
 * item `tile` is the list's tile n - 1 - tile. */
struct attn_item {
    bool live;
    int q0, start, len, qrows, ntiles;
    const bf16 *kbase, *vbase;
};

template <int D, int BN, bool CAUSAL>
static __device__ __forceinline__ attn_item attn_item_at(const eng_cu_attn_args &a, int tile, int h) {
    attn_item it = {};
    const int n = *a.n_tiles_dev;
    it.live = tile < n;
    if (it.live) {
        if (a.rev) tile = n - 1 - tile; /* serpentine order (eng_cu_order.c) */
        const int seq = a.tiles[2 * tile];
        it.q0 = a.tiles[2 * tile + 1];
        it.start = a.cu_seqlens[seq];
        it.len = a.cu_seqlens[seq + 1] - it.start;
    }
    ENG_CU_PDL_WAIT();
    if (!it.live) return it;
    const int kvh = h / (a.n_heads / a.n_kv_heads);
    const int kend = CAUSAL ? min(it.len, it.q0 + ENG_CU_ATTN_BM) : it.len;
    it.qrows = min(ENG_CU_ATTN_BM, it.len - it.q0);
    it.ntiles = (kend + BN - 1) / BN;
    it.kbase = a.k + (size_t)it.start * a.ldk + kvh * D;
    it.vbase = a.v + (size_t)it.start * a.ldv + kvh * D;
    return it;
}

/* The opt-in an attention kernel (eng_cu_attn.cu, eng_cu_attn_wg.cu) needs
 * for more than 48 KB of dynamic shared memory,
 * set once per kernel: `set` is the launcher's own static flag, one per
 * kernel instantiation (a flag shared by kernels of the same size would
 * leave all but the first without the attribute: their launches fail).
 * Set on a kernel's first, eager, launch, never inside a graph capture;
 * a repeated set from a second engine is harmless. */
template <size_t SMEM, typename Kern>
static cudaError_t attn_smem_optin(Kern k, bool &set) {
    if constexpr (SMEM > 48 * 1024) {
        if (!set) {
            const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM);
            if (e != cudaSuccess) return e;
            set = true;
        }
    }
    (void)k;
    (void)set;
    return cudaSuccess;
}

/* The end of a query tile: the row sums reduced over the quad, O / l
 * written as bf16 for the warp's rows below qrows (dst: the tile's first
 * row at its head's column; rows ldo apart). */
template <int D>
static __device__ __forceinline__ void eng_attn_store(float (*o)[4], float *l, int qrows, bf16 *dst, int ldo) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        l[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = warp * 16 + g + 8 * r;
        if (row >= qrows) continue;
        bf16 *p = dst + (size_t)row * ldo + 2 * t;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++)
            *(uint32_t *)(p + dn * 8) = eng_pack_bf16(o[dn][2 * r] * l[r], o[dn][2 * r + 1] * l[r]);
    }
}

/* Qwen3's q/k norm + rotary (g: the norm's weights; NULL: the rotary
 * alone, for Qwen2 / Mistral / Llama) on `rows` rows of a shared tile (row stride
 * D + 8) whose first row is position pos0 of its sequence, as
 * eng_cu_qk_norm_rope computes it, by a block of THREADS threads (v2 in the
 * one-query chain, v3 opt-in: eng_cu_attn.cu, eng_cu_attn_v3.cu).
 * LPR = D/16 lanes share a row, each owning 8 consecutive pairs (j, j+D/2),
 * so a warp transforms 32/LPR rows at once with 16-byte shared accesses and
 * a log2(LPR)-step shuffle sum.  (A warp walking rows one at a time, the
 * first version, cost a latency chain per row: 2.6x slower attention.)
 * A single warp transforming its own tiles (the chain's attention + O
 * projection, eng_cu_chain_attn.cu) passes THREADS = 32 and its lane as
 * tid, and row_pos: row r's position is row_pos[r] (rows of several
 * sequences in one tile) instead of pos0 + r. */
template <int D, int THREADS>
static __device__ __forceinline__ void eng_attn_qk_rows(bf16 *tile, int rows, int pos0, const float *g,
                                                        const eng_cu_attn_args &a, int tid = -1,
                                                        const int *row_pos = nullptr) {
    constexpr int LD = D + 8, HALF = D / 2, LPR = HALF / 8, RPI = THREADS / LPR;
    const int me = tid < 0 ? (int)threadIdx.x : tid;
    const int k = me % LPR, j0 = 8 * k;
    const bool norm = g != nullptr; /* uniform: the same for every thread */
    float4 ga[2] = {make_float4(1.f, 1.f, 1.f, 1.f), make_float4(1.f, 1.f, 1.f, 1.f)}, gb[2] = {ga[0], ga[1]};
    if (norm) {
        ga[0] = *(const float4 *)(g + j0); ga[1] = *(const float4 *)(g + j0 + 4);
        gb[0] = *(const float4 *)(g + HALF + j0); gb[1] = *(const float4 *)(g + HALF + j0 + 4);
    }
    const float w1[8] = {ga[0].x, ga[0].y, ga[0].z, ga[0].w, ga[1].x, ga[1].y, ga[1].z, ga[1].w};
    const float w2[8] = {gb[0].x, gb[0].y, gb[0].z, gb[0].w, gb[1].x, gb[1].y, gb[1].z, gb[1].w};
    for (int r0 = 0; r0 < rows; r0 += RPI) { /* rows is uniform: every lane takes every shuffle */
        const int r = r0 + me / LPR;
        const bool ok = r < rows;
        float x1[8], x2[8], ss = 0.f;
        if (ok) {
            eng_cu_load8(tile + r * LD + j0, x1);
            eng_cu_load8(tile + r * LD + HALF + j0, x2);
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) x1[e] = x2[e] = 0.f;
        }
        if (norm) { /* uniform branch: every lane takes every shuffle or none */
#pragma unroll
            for (int e = 0; e < 8; e++) ss += x1[e] * x1[e] + x2[e] * x2[e];
#pragma unroll
            for (int o = LPR / 2; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        }
        if (!ok) continue;
        const float rs = norm ? rsqrtf(ss / (float)D + a.qk_eps) : 1.f;
        const int pos = row_pos ? row_pos[r] : pos0 + r;
        const float4 *cs = (const float4 *)(a.rope + (size_t)min(pos, a.rope_rows - 1) * D + 2 * j0);
        float y1[8], y2[8];
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const float4 t = cs[q]; /* (c, s) of pairs j0 + 2q, j0 + 2q + 1 */
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int e = 2 * q + h;
                const float c = h ? t.z : t.x, sn = h ? t.w : t.y;
                const float v1 = x1[e] * rs * w1[e], v2 = x2[e] * rs * w2[e];
                y1[e] = v1 * c - v2 * sn;
                y2[e] = v2 * c + v1 * sn;
            }
        }
        eng_cu_store8(tile + r * LD + j0, y1);
        eng_cu_store8(tile + r * LD + HALF + j0, y2);
    }
}

#endif

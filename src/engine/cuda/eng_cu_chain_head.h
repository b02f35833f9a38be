/* eng_cu_chain_head.h: one head's attention over a tile of <= 16 query
 * rows and <= 16 keys, computed by one warp from shared tiles -- what the
 * one-query chain's two attention sites share: the attention + O
 * projection kernel (eng_cu_chain_attn.cu), which feeds O straight into the
 * projection's mma fragments, and the QKV GEMM's attention tail
 * (eng_cu_chain_gemm.cu, ATT), which stores it.
 *
 * S = Q K^T on tensor cores; row r's keys outside [lo, hi) masked; the
 * softmax over the single key tile in the log2 domain (no online
 * rescaling); P rounded to bf16 for P.V, its sum from the unrounded
 * values; O = P V left unnormalised in o, with l[h] = 1 / row sum (0 for
 * a row with no keys) -- O's DC columns from c0 on (all D by default;
 * the QKV tail splits a head's columns over several warps, each computing
 * S again).  Lane layout, mma's accumulator: o[dn][e] is row g + 8
 * (e >> 1), column c0 + 8 dn + 2t + (e & 1); lo / hi / l index h = 0 for
 * row g and 1 for row g + 8 (g = lane / 4, t = lane % 4).  Tiles are
 * [16][LD] bf16, LD = D + 8 (conflict-free 32-bit loads and ldmatrix).
 * REL (MPNet): rb is the head's relative position bias row (bias / scale,
 * at distance 0: eng_cu_attn_args.rel), added to every unmasked score at
 * key - row -- rows and keys are the tile's token indices, so within one
 * sequence their difference is the distance.
 */
#ifndef ENG_CU_CHAIN_HEAD_H
#define ENG_CU_CHAIN_HEAD_H

#include "eng_cu_frag.h"
#include <math.h>

template <int D, int LD, int DC = D, bool REL = false>
static __device__ __forceinline__ void eng_chain_head(const bf16 *Qs, const bf16 *Ks, const bf16 *Vs, const int lo[2],
                                                      const int hi[2], float sl2, float (*o)[4], float l[2],
                                                      int c0 = 0, const float *rb = nullptr) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, mi = lane >> 3, mr = lane & 7;
    float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const bf16 *q = Qs + kk * 16 + 2 * t;
        const uint32_t qf[4] = {eng_ld32(q + g * LD), eng_ld32(q + (g + 8) * LD), eng_ld32(q + g * LD + 8),
                                eng_ld32(q + (g + 8) * LD + 8)};
#pragma unroll
        for (int nt = 0; nt < 2; nt++) {
            const bf16 *k = Ks + (nt * 8 + g) * LD + kk * 16 + 2 * t;
            eng_mma16816(sc[nt], qf, eng_ld32(k), eng_ld32(k + 8));
        }
    }
    /* mask, then softmax over the (single) key tile in the log2 domain */
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int key = nt * 8 + 2 * t + (e & 1), h = e >> 1;
            if (key < lo[h] || key >= hi[h]) sc[nt][e] = -INFINITY;
            else if constexpr (REL) sc[nt][e] += __ldg(rb + (key - (g + 8 * h))); /* same sequence: key - row */
            mx[h] = fmaxf(mx[h], sc[nt][e]);
        }
    l[0] = l[1] = 0.f;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        mx[h] = mx[h] == -INFINITY ? 0.f : -mx[h] * sl2;
    }
#pragma unroll
    for (int nt = 0; nt < 2; nt++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            sc[nt][e] = eng_fast_exp2(fmaf(sc[nt][e], sl2, mx[e >> 1]));
            l[e >> 1] += sc[nt][e];
        }
#pragma unroll
    for (int h = 0; h < 2; h++) {
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
        l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
        l[h] = l[h] > 0.f ? 1.f / l[h] : 0.f;
    }
    const uint32_t pa[4] = {eng_pack_bf16(sc[0][0], sc[0][1]), eng_pack_bf16(sc[0][2], sc[0][3]),
                            eng_pack_bf16(sc[1][0], sc[1][1]), eng_pack_bf16(sc[1][2], sc[1][3])};
#pragma unroll
    for (int dn = 0; dn < DC / 8; dn++) o[dn][0] = o[dn][1] = o[dn][2] = o[dn][3] = 0.f;
#pragma unroll
    for (int dn = 0; dn < DC / 8; dn += 2) {
        uint32_t vb[4];
        eng_ldmatrix_x4_trans(vb, Vs + ((mi & 1) * 8 + mr) * LD + c0 + (dn + (mi >> 1)) * 8);
        eng_mma16816(o[dn], pa, vb[0], vb[1]);
        eng_mma16816(o[dn + 1], pa, vb[2], vb[3]);
    }
}

/* The first 16 query rows' key ranges and positions from cu_seqlens (ns
 * sequences): arow[r] = lo, arow[16 + r] = hi (causal: r + 1), arow[32 +
 * r] = r's position in its sequence; zeros at or past n_real.  Threads
 * 0-15 call it, one row each (the split launches: eng_cu_chain_ao.cu,
 * eng_cu_chain_ab.cu). */
static __device__ __forceinline__ void eng_chain_rows(int *arow, int n_real, const int *cu, int ns, int causal) {
    const int r = threadIdx.x;
    int lo = 0, hi = 0, pos = 0;
    if (r < n_real)
        for (int q = 0; q < ns; q++) {
            const int s0 = cu[q], e0 = cu[q + 1];
            if (r >= s0 && r < e0) {
                lo = s0;
                hi = causal ? r + 1 : e0;
                pos = r - s0;
                break;
            }
        }
    arow[r] = lo;
    arow[16 + r] = hi;
    arow[32 + r] = pos;
}

#endif

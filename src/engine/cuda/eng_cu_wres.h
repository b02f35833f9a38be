/* eng_cu_wres.h: the pieces shared by the kernels that keep their slice
 * of W in shared memory for the whole kernel and stream only X's rows
 * (eng_cu_gemm_rowln_res.cu: the O projection + LayerNorm in CTA pairs;
 * eng_cu_gemm_wres.cu: plain products with K <= 384 / 640).  One CTA an
 * SM, 384 threads: two consumer warpgroups taking alternate 64-row tiles
 * (ping-pong: one's epilogue under the other's products) and a producer
 * warpgroup whose one thread loads W's slice by k-slices (a barrier each,
 * so the first products start on the first slice) and then X's 64 x 64
 * k-slices of the CTA's tiles, in tile order, into a ring of ST slots.
 * The CTA's products of a tile are a 64 x NB block, NB = 128 or 192
 * (wgmma m64nNBk16, accumulators in wgmma's register order).
 *
 * Shared memory from a 1024-aligned base: W's slice (KT slices of NB rows
 * x 128 bytes, 128-byte swizzle, TMA boxes of NB x 64), then the ring
 * (ST x 8 KB), then each kernel's own (images, barriers, parameters).
 */
#ifndef POSY_ENG_CU_WRES_H
#define POSY_ENG_CU_WRES_H

#include "eng_cu_wgmma.h"

#define WR_BM 64
#define WR_BK 64
#define WR_THREADS 384
#define WR_A_BYTES (WR_BM * WR_BK * 2)
#define WR_IMG_BYTES (64 * 64 * 2) /* one 64 x 64 output box */
#define WR_SMEM_MAX 232448
#define WR_ST_MAX 8
#define WR_KT_MAX 10 /* k-slices of W (K <= 640): a barrier each */

static __host__ __device__ constexpr int wr_w_bytes(int NB, int K) { return NB * K * 2; }

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* The warpgroups' turns at the ring (named barriers 5 and 6; 0 is
 * __syncthreads, 2 and 3 each warpgroup's own): warpgroup w passes the
 * turn on 5 + w when it has waited for its tile's last slot, and waits on
 * 6 - w before its next tile.  Besides ordering the products, this keeps a
 * warpgroup from waiting on a slot's fill k while fill k - 1 (the other
 * warpgroup's) has not landed: an mbarrier's parity cannot tell them apart. */
static __device__ __forceinline__ void wr_turn_pass(int wgp) {
    asm volatile("bar.arrive %0, 256;\n" ::"r"(5 + wgp) : "memory");
}
static __device__ __forceinline__ void wr_turn_wait(int wgp) {
    asm volatile("bar.sync %0, 256;\n" ::"r"(6 - wgp) : "memory");
}
static __device__ __forceinline__ float2 wr_lds2(uint32_t a) {
    float2 v;
    asm("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(a));
    return v;
}

/* the barriers' initialisation, by thread 0: full (one arming), empty (the
 * 4 warps of the warpgroup that used the slot), one a k-slice of W */
static __device__ __forceinline__ void wr_bars_init(uint64_t *full, uint64_t *empty, uint64_t *wbar, int ST, int KT) {
    for (int s = 0; s < ST; s++) {
        wg_bar_init(&full[s], 1);
        wg_bar_init(&empty[s], 4);
    }
    for (int kt = 0; kt < KT; kt++) wg_bar_init(&wbar[kt], 1);
}

/* The producer thread: W's rows w0 .. w0 + NB by k-slices, then the X
 * slices of tiles t0, t0 + step, ... (walked last to first when rev);
 * before each tile's slices, pre(u) for the tile's index u. */
template <int NB, typename Pre>
static __device__ __forceinline__ void wr_produce(const CUtensorMap *ta, const CUtensorMap *tb, unsigned char *sW,
                                                  unsigned char *sA, uint64_t *full, uint64_t *empty, uint64_t *wbar,
                                                  int w0, int KT, int ST, int t0, int step, int tiles, int rev,
                                                  Pre pre) {
    wg_map_prefetch(ta);
    wg_map_prefetch(tb);
    for (int kt = 0; kt < KT; kt++) {
        wg_bar_arm(&wbar[kt], NB * 128);
        wg_tma(tb, sW + kt * NB * 128, &wbar[kt], kt * WR_BK, w0);
    }
    int it = 0, s = 0, ph = 0;
    for (int t = t0; t < tiles; t += step) {
        const int u = rev ? tiles - 1 - t : t;
        pre(u);
        for (int kt = 0; kt < KT; kt++, it++) {
            if (it >= ST) wg_bar_wait(&empty[s], ph ^ 1);
            wg_bar_arm(&full[s], WR_A_BYTES);
            wg_tma(ta, sA + s * WR_A_BYTES, &full[s], kt * WR_BK, u * WR_BM);
            if (++s == ST) s = 0, ph ^= 1;
        }
    }
}

/* A consumer warpgroup's products of one tile into d (NB / 2 accumulators
 * a thread), from ring position (s, ph), which it leaves at the
 * warpgroup's next tile (past the other warpgroup's KT slices).  first:
 * the warpgroup's first tile (W's slices waited for); turn: the other
 * warpgroup has a tile before this one; pass: it has one after.  Every
 * slot is released when its products are done. */
template <int NB>
static __device__ __forceinline__ void wr_products(float *d, const unsigned char *sA, const unsigned char *sW,
                                                   uint64_t *full, uint64_t *empty, uint64_t *wbar, int &s, int &ph,
                                                   int KT, int ST, int wgp, bool first, bool turn, bool pass) {
    const int lane = threadIdx.x & 31;
    if (turn) wr_turn_wait(wgp); /* the other warpgroup has issued its products of the tile before */
    int sp = s;                  /* the slot of the slice before */
    for (int kt = 0; kt < KT; kt++) {
        if (first) wg_bar_wait(&wbar[kt], 0);
        wg_bar_wait(&full[s], ph);
        const unsigned char *a = sA + s * WR_A_BYTES, *b = sW + kt * NB * 128;
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < WR_BK / 16; kk++) wg_mma<NB>(d, wg_desc(a + 32 * kk), wg_desc(b + 32 * kk), kt | kk);
        wg_commit();
        wg_wait<1>(); /* the group before this one is done: its slot may be refilled */
        if (kt > 0 && lane == 0) wg_bar_arrive(&empty[sp]);
        sp = s;
        if (++s == ST) s = 0, ph ^= 1;
    }
    if (pass) wr_turn_pass(wgp); /* the other warpgroup's tile after this one may start */
    for (int k = 0; k < KT; k++)
        if (++s == ST) s = 0, ph ^= 1;
    wg_wait<0>();
    wg_fence_regs<NB / 2>(d);
    if (lane == 0) wg_bar_arrive(&empty[sp]);
}

/* One 64 x 64 output box of a consumer warpgroup through its two 8 KB
 * images in turn (img: the warpgroup's first; line: the thread's line in
 * it; nbox: the boxes it stored before): once the box before last (same
 * image) has been read out, fill(line of this image) writes the values,
 * and the lead thread stores the box at column c, row m0 by TMA. */
template <typename Fill>
static __device__ __forceinline__ void wr_store_box(const CUtensorMap *ty, unsigned char *img, uint32_t line, int wgp,
                                                    bool lead, int nbox, int c, int m0, Fill fill) {
    if (lead) wg_store_wait_read<1>();
    wg_group_sync(wgp);
    fill(line + (nbox & 1) * WR_IMG_BYTES);
    wg_fence_async_smem();
    wg_group_sync(wgp);
    if (lead) {
        wg_tma_store(ty, img + (nbox & 1) * WR_IMG_BYTES, c, m0);
        wg_store_commit();
    }
}
#endif

#endif

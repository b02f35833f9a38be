/* eng_cu_attn_wg2: attention version 10 with two query tiles a CTA that
 * share their K / V copies -- for the saturated step of short sequences
 * at head sizes 32 and 64 (all-MiniLM-L6, BERT-base).
 *
 * Why: in the one-warpgroup kernel (eng_cu_attn_wg.cu) every 64-row query
 * tile copies its sequence's whole K and V, so a 128-token sequence's
 * keys cross from L2 to the SMs twice per head.  ncu on the H200
 * (2026-12-03 run 24, MiniLM's step: bench/results/h200-ncu-attn-minilm-2026-12-03-run24.txt)
 * found that kernel with L2 76% busy, DRAM 42%, issuing on 62% of cycles:
 * the L2 -> SM traffic is the likeliest bound.  Here one CTA of two
 * warpgroups takes a 128-row slab of a sequence (query tiles q0 and q0 +
 * 64, q0 a multiple of 128): both tiles' Q are copied at once (a 128-row
 * load lays them out TB bytes apart), and each K / V tile is copied once
 * for both -- per query tile 12 KB instead of 20 KB copied at d = 32 and
 * 128-token sequences.  Warpgroup w computes tile w as the one-warpgroup
 * kernel's two-stage loop does (the same products, softmax and store); a
 * slab whose second tile is past the sequence leaves warpgroup 1 out of
 * the products.
 *
 * Work: the step's tile list as it is (bucket bound x heads grid, capped
 * at a few GPU-fulls like the one-warpgroup grid); a block at a tile with
 * q0 % 128 == 64 skips it, since the block at q0 - 64 does the slab.  A
 * capped grid is made odd, so that with leaders and followers alternating
 * in the list each block strides over both.  Causal: the slab walks the
 * second tile's keys; the first tile's rows see the extra key tile fully
 * masked (their running maximum is already finite from key 0).
 *
 * Status: an experiment, opt-in (POSY_CUDA_ATTN_PAIR=1; labs:
 * eng_cu_attn_wg_pair), written 2026-12-03 after the device time ran out:
 * compiled here, never run.
 */
#include "eng_cu_attn_wg.h"
#include <stdlib.h>
#include <string.h>

/* blocks an SM the launch bounds ask for: three at d = 32 (80 registers,
 * ptxas spills 16 bytes), two at d = 64 (three spilled ~420 bytes) */
template <int D>
static constexpr int awg2_minb() {
    return D == 32 ? 3 : 2;
}

template <int D, bool CAUSAL>
__global__ void __launch_bounds__(256, awg2_minb<D>()) attn_wg2_kernel(eng_cu_attn_args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BM = ENG_CU_ATTN_BM, BN = 64, TB = 64 * D * 2; /* a tile's bytes */
    static_assert(BM == 64 && D <= 64, "two 64-row query tiles of head size 32 or 64");
    extern __shared__ unsigned char awg_raw[];
    const uint32_t base = (wg_smem(awg_raw) + 1023) & ~1023u;
    const uint32_t sQ = base, sK = sQ + 2 * TB, sV = sK + 2 * TB; /* Q: tiles 0, 1; K, V: stage b at + b * TB */
    const int h = blockIdx.y, wg = threadIdx.x >> 7;
    const uint32_t myQ = sQ + wg * TB;
    const float sl2 = a.scale * 1.4426950408889634f;
    for (int t = blockIdx.x, n = 0;; t += gridDim.x) {
        const attn_item it = attn_item_at<D, BN, CAUSAL>(a, t, h);
        if (!it.live) break;
        if (it.q0 % (2 * BM)) continue; /* the slab's second tile: the block at its first does it */
        if (n++) __syncthreads();       /* every warp is done with the last slab's tiles */
        const int q0 = it.q0, len = it.len, rows = min(2 * BM, len - q0);
        const int kend = CAUSAL ? min(len, q0 + 2 * BM) : len, ntiles = (kend + BN - 1) / BN;
        const bool busy = wg * BM < rows; /* warpgroup 1 idles on a one-tile slab */
        awg_load<D, 2 * BM, 256>(sQ, a.q + (size_t)(it.start + q0) * a.ldq + h * D, a.ldq, rows);
        awg_load<D, BN, 256>(sK, it.kbase, a.ldk, len);
        awg_load<D, BN, 256>(sV, it.vbase, a.ldv, len);
        eng_async_commit();

        float o[D / 8][4], sc[BN / 8][4];
#pragma unroll
        for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        const int wrow0 = q0 + (threadIdx.x >> 5) * 16; /* this warp's first query row (warps 4-7: tile 1) */
        for (int j = 0; j < ntiles; j++) {
            const int k0 = j * BN, buf = j & 1;
            const bool more = j + 1 < ntiles;
            if (more) { /* the next tile streams in while this one is computed */
                awg_load<D, BN, 256>(sK + (buf ^ 1) * TB, it.kbase + (size_t)(k0 + BN) * a.ldk, a.ldk, len - k0 - BN);
                awg_load<D, BN, 256>(sV + (buf ^ 1) * TB, it.vbase + (size_t)(k0 + BN) * a.ldv, a.ldv, len - k0 - BN);
                eng_async_commit();
                eng_async_wait<1>();
            } else {
                eng_async_wait<0>();
            }
            awg_copies_visible();
            if (busy) {
                awg_scores<D>(sc, myQ, sK + buf * TB);
                eng_attn_softmax<D, BN, CAUSAL>(sc, k0, len, wrow0, sl2, o, m, l);
                uint32_t pa[4][4];
                awg_pack_p(pa, sc);
                awg_pv<D>(o, pa, sV + buf * TB);
            }
            __syncthreads(); /* the buffer read here is refilled next */
        }
        if (busy) eng_attn_store<D>(o, l, rows, a.o + (size_t)(it.start + q0) * a.ldo + h * D, a.ldo);
    }
#else
    (void)a;
    __trap(); /* eng_cu_attention_wg2 never launches it off sm_90a */
#endif
}

template <int D, bool C>
static cudaError_t awg2_launch(cudaStream_t s, const eng_cu_attn_args *a) {
    void (*k)(eng_cu_attn_args) = attn_wg2_kernel<D, C>;
    constexpr size_t smem = (size_t)6 * 64 * D * 2 + 1024; /* Q 2 tiles, K and V 2 stages each */
    static bool optin = false; /* this instantiation's own */
    static int resident = 0;   /* blocks an SM x SMs */
    cudaError_t e = attn_smem_optin<smem>(k, optin);
    if (e == cudaSuccess) e = awg_resident(k, smem, resident, 256);
    if (e != cudaSuccess) return e;
    /* the one-warpgroup grid's cap (ENG_CU_ATTN_WAVES GPU-fulls), odd
     * (the header says why) */
    int x = a->max_tiles;
    const long cap = ((long)ENG_CU_ATTN_WAVES * resident + a->n_heads - 1) / a->n_heads;
    if (cap < x) x = (int)cap | 1;
    if (eng_cu_attn_wg_max_x > 0 && x > eng_cu_attn_wg_max_x) x = eng_cu_attn_wg_max_x;
    return eng_cu_launch(k, dim3(x, a->n_heads), dim3(256), smem, s, *a);
}

int eng_cu_attn_wg_pair = -1;

/* eng_cu_attn_wg_pair (labs), else POSY_CUDA_ATTN_PAIR=1 */
int eng_cu_attn_wg2_on(void) {
    if (eng_cu_attn_wg_pair >= 0) return eng_cu_attn_wg_pair > 0;
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("POSY_CUDA_ATTN_PAIR");
        env = e && !strcmp(e, "1");
    }
    return env;
}

cudaError_t eng_cu_attention_wg2(cudaStream_t s, const eng_cu_attn_args *a_in) {
    if (!eng_cu_gemm_wg_available() || a_in->q_norm || (a_in->head_dim != 32 && a_in->head_dim != 64))
        return cudaErrorInvalidValue;
    eng_cu_attn_args b = *a_in;
    b.rev = eng_cu_order_take(1); /* the tile list either way (attn_item_at) */
    if (b.head_dim == 32) return b.causal ? awg2_launch<32, true>(s, &b) : awg2_launch<32, false>(s, &b);
    return b.causal ? awg2_launch<64, true>(s, &b) : awg2_launch<64, false>(s, &b);
}

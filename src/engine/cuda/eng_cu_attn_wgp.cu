/* eng_cu_attn_wgp: attention version 10 in persistent blocks that copy
 * their next work item in under the end of this one -- for the saturated
 * step of short sequences, where a block of the one-stage kernel
 * (eng_cu_attn_wg.cu) sees one or two key tiles and spends most of its
 * life with no copy in flight: 330 us for 512 x 128 causal tokens at
 * d = 128 (run 28) against a ~170 us floor for the bytes it must move.
 *
 * Work items are (query tile, head) pairs, head fastest, so the heads of
 * one tile (which share K / V under grouped-query attention) run side by
 * side; block b takes items b, b + G, b + 2G, ... (G blocks: as many as fit
 * the GPU at once, so none waits for a slot).  The shared tiles are the
 * one-stage kernel's -- Q, one K, one V, 49 KB at d = 128 -- and so is the
 * copy order within an item.  The step across items: S of an item's last
 * key tile is the last read of its Q and K, so the next item's Q and first
 * K are copied right after it (under the softmax, P V and the store of
 * this one), and its first V right after P V.  The commit groups keep
 * alternating {K (+ Q)}, {V}, so "all but the newest" stays the group
 * wanted at each wait.
 *
 * Status: correct and not faster, so opt-in: eng_cu_attn_wg_stages = 3
 * (lab_attn checks it with eng_cu_attn_wgp_max_blocks = 3, so every block
 * walks many items, then as launched, and times it beside the one- and
 * two-stage forms) or POSY_CUDA_ATTN_WG=3 in the engine.  H200, run 30
 * (2026-12-02, bench/results/h200-attn-v10p-lab-2026-12-02-run30.log):
 * every check against fp64 passes in both grids, memcheck clean; 512 x
 * 128 tokens 325.8 us against the one-stage default's 328.3 at d = 128
 * causal, 99.6 against two stages' 101.3 at d = 32, 165.5 against 155.7
 * at d = 64; 16 x 1024 d = 128 causal 304.2 against 281.3.  So the idle
 * copy slots were not what held the short-sequence case back.
 */
#include "eng_cu_attn_wg.h"

template <int D, bool CAUSAL>
__global__ void __launch_bounds__(128, (awg_minb<D, 1>())) attn_wgp_kernel(eng_cu_attn_args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BM = ENG_CU_ATTN_BM, BN = 64, TB = 64 * D * 2;
    static_assert(BM == 64, "one warpgroup, 64 query rows");
    extern __shared__ unsigned char awg_raw[];
    const uint32_t sQ = (wg_smem(awg_raw) + 1023) & ~1023u, sK = sQ + TB, sV = sK + TB;
    const int H = a.n_heads;
    int f = blockIdx.x, h = f % H;
    attn_item it = attn_item_at<D, BN, CAUSAL>(a, f / H, h);
    if (!it.live) return;
    awg_load<D, BM>(sQ, a.q + (size_t)(it.start + it.q0) * a.ldq + h * D, a.ldq, it.qrows);
    awg_load<D, BN>(sK, it.kbase, a.ldk, it.len);
    eng_async_commit(); /* {Q, K0}, then {V0} */
    awg_load<D, BN>(sV, it.vbase, a.ldv, it.len);
    eng_async_commit();
    const float sl2 = a.scale * 1.4426950408889634f;
    for (;;) {
        const int fn = f + gridDim.x, hn = fn % H;
        const attn_item nx = attn_item_at<D, BN, CAUSAL>(a, fn / H, hn);
        float o[D / 8][4], sc[BN / 8][4];
#pragma unroll
        for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        const int wrow0 = it.q0 + (threadIdx.x >> 5) * 16; /* this warp's first query row */
        for (int j = 0; j < it.ntiles; j++) {
            const int k0 = j * BN;
            const bool last = j + 1 == it.ntiles, copy = !last || nx.live; /* a copy follows each read */
            eng_async_wait<1>(); /* K_j (with Q at j = 0); V_j may still be in flight */
            awg_copies_visible();
            awg_scores<D>(sc, sQ, sK);
            if (copy) {
                __syncthreads(); /* every warp's S is done with K (and, at the last tile, Q) */
                if (!last) {
                    awg_load<D, BN>(sK, it.kbase + (size_t)(k0 + BN) * a.ldk, a.ldk, it.len - k0 - BN);
                } else {
                    awg_load<D, BM>(sQ, a.q + (size_t)(nx.start + nx.q0) * a.ldq + hn * D, a.ldq, nx.qrows);
                    awg_load<D, BN>(sK, nx.kbase, a.ldk, nx.len);
                }
                eng_async_commit();
            }
            eng_attn_softmax<D, BN, CAUSAL>(sc, k0, it.len, wrow0, sl2, o, m, l);
            uint32_t pa[4][4];
            awg_pack_p(pa, sc);
            if (copy) eng_async_wait<1>(); /* V_j: all but the copy just issued */
            else eng_async_wait<0>();
            awg_copies_visible();
            awg_pv<D>(o, pa, sV);
            if (copy) {
                __syncthreads(); /* every warp's P V is done with V */
                if (!last) awg_load<D, BN>(sV, it.vbase + (size_t)(k0 + BN) * a.ldv, a.ldv, it.len - k0 - BN);
                else awg_load<D, BN>(sV, nx.vbase, a.ldv, nx.len);
                eng_async_commit();
            }
        }
        eng_attn_store<D>(o, l, it.qrows, a.o + (size_t)(it.start + it.q0) * a.ldo + h * D, a.ldo);
        if (!nx.live) break;
        it = nx;
        f = fn;
        h = hn;
    }
#else
    (void)a;
    __trap(); /* eng_cu_attention_wgp never launches it off sm_90a */
#endif
}

int eng_cu_attn_wgp_max_blocks = 0;

/* G: the blocks of this kernel that fit the GPU at once (found once per
 * instantiation, after the shared-memory opt-in), capped by the items */
template <int D, bool C>
static cudaError_t awgp_launch(cudaStream_t s, const eng_cu_attn_args *a) {
    void (*k)(eng_cu_attn_args) = attn_wgp_kernel<D, C>;
    constexpr size_t smem = awg_smem<D, 1>();
    static bool optin = false;
    static int resident = 0; /* blocks an SM x SMs */
    cudaError_t e = attn_smem_optin<smem>(k, optin);
    if (e != cudaSuccess) return e;
    if ((e = awg_resident(k, smem, resident)) != cudaSuccess) return e;
    const long items = (long)a->max_tiles * a->n_heads;
    int grid = items < resident ? (int)items : resident;
    if (eng_cu_attn_wgp_max_blocks > 0 && grid > eng_cu_attn_wgp_max_blocks) grid = eng_cu_attn_wgp_max_blocks;
    return eng_cu_launch(k, dim3(grid), dim3(128), smem, s, *a);
}

cudaError_t eng_cu_attention_wgp(cudaStream_t s, const eng_cu_attn_args *a) {
    switch (a->head_dim) {
    case 32: return a->causal ? awgp_launch<32, true>(s, a) : awgp_launch<32, false>(s, a);
    case 64: return a->causal ? awgp_launch<64, true>(s, a) : awgp_launch<64, false>(s, a);
    case 128: return a->causal ? awgp_launch<128, true>(s, a) : awgp_launch<128, false>(s, a);
    default: return cudaErrorInvalidValue;
    }
}

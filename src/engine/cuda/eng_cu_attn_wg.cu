/* eng_cu_attn_wg: attention version 10 -- FlashAttention-2's loop with
 * both products as Hopper warpgroup MMAs (wgmma), for the saturated step
 * of short sequences, where the mma.sync versions spend their issue slots
 * on ldmatrix and mma instructions (v9 at d = 128 runs ~370 us a layer
 * for 512 x 128 tokens of Qwen3-0.6B, ~140 TFLOP/s, against a ~200 us
 * memory floor: dev/cuda/NOTES.md).
 *
 * Work unit as v2 (eng_cu_attn.cu): one query tile of 64 rows of one
 * sequence and one head a CTA of one warpgroup (128 threads), key tiles of
 * 64 copied by cp.async, in one or two stages (ST, below).  Shared tiles
 * are in wgmma's canonical swizzled layouts, written by the copies
 * themselves (16-byte chunk c of row r at chunk c ^ (r % 8) within 128-byte
 * rows: 64-value slices of the head, D = 64 / 128; D = 32: 64-byte rows,
 * chunk c ^ (r / 2 % 4)); rows past the sequence are zero-filled, as in
 * v2.  Per key tile:
 *   S = Q K^T   wgmma m64n64k16, A = Q and B = K from shared memory
 *               (both K-major), D/16 steps;
 *   softmax     eng_attn_softmax (eng_cu_frag.h) on the accumulators,
 *               whose layout is mma.sync's C layout repeated over columns;
 *   O += P V    wgmma m64nDk16 with A = P from registers (the accumulator
 *               layout of S is the register A layout of the next product,
 *               packed to bf16 as v2 does) and B = V from shared memory,
 *               MN-major (V's rows are keys, the product's K dimension).
 * Only the ordinary copies need a proxy fence: cp.async writes through the
 * generic proxy, wgmma reads through the async one.  REL (MPNet, a->rel):
 * the relative position bias added to S before the softmax, in the static
 * grid only (the item walks and the persistent form fall back to it).
 *
 * Stages: two (K and V of the next tile copied while this one is
 * computed) take 82 KB at D = 128, two blocks an SM; one (the next K
 * copied once S has read this one, the next V once P V has) takes 49 KB,
 * four blocks at 128 registers -- for 128-token sequences, where a block
 * sees one or two key tiles and residency hides the copies' latency.
 * eng_cu_attn_wg_stages (labs) or POSY_CUDA_ATTN_WG forces one or the
 * other, or the persistent form (eng_cu_attn_wgp.cu); the default is one
 * at D = 128, two below.
 *
 * Measured on the H200 2026-12-02: run 26 (two stages only) correct
 * against fp64 at every head size, memcheck clean, 1.10-1.17x v9 / v2 /
 * v5 on sequences of 512-1024 tokens but 0.83x v9 at d = 128 on 128-token
 * causal ones (two blocks an SM) -- hence the one-stage form and the
 * register caps below; run 28, at 512 x 128 tokens: d = 128 one stage 330
 * us against v9's 374 (two stages 447), d = 64 two stages 160 against
 * 188, d = 32 104 against 122; the saturated steps 1.015-1.020x
 * (128-token sequences) and 1.034-1.054x (mixed 16-512) the previous
 * defaults' for Qwen3-0.6B, BERT-base and MiniLM, in the same run: the
 * default off the chain on Hopper (eng_cu_attn_version).
 *
 * Schedules: a block a query tile of the bucket's bound (grid tiles x
 * heads; most blocks of a saturated bucket find no tile), the same grid
 * capped at a few GPU-fulls with each block striding over its head's
 * tiles (the default below d = 128: awg_waves), or the dynamic one (the
 * default at d = 128: DYN, awg_dyn), where one GPU-full of blocks takes
 * (tile, head) items from a counter.  The step's tile list comes heaviest
 * first (eng_cu_attn_tiles_heavy_first), which the dynamic schedule needs:
 * with sequence order it put 16 x 1024 causal tokens' heavy tiles last
 * (287 us against 259 heaviest first, 2026-12-03 run 5).
 *
 * Two 64-row query tiles a 256-thread CTA sharing K / V (half of the L2
 * -> SM bytes at 128-token sequences) were correct and slower (2026-12-03
 * run 27: saturated MiniLM 0.935-0.967x, BERT-base 0.979-0.988x: three
 * CTAs an SM at 80 registers instead of six; commit 148a695 holds them).
 *
 * No q/k norm: with it, eng_cu_attention runs v2's fused path instead.
 */
#include "eng_cu_attn_wg.h"
#include <stdlib.h>
#include <string.h>

/* The key tile loop.  ST = 2: K and V of the next tile stream in while
 * this one is computed (one commit group a tile).  ST = 1, one buffer each:
 * the next K is copied once S has read this one (under the softmax and
 * P V), the next V once P V has read this one (under the next S); the
 * commit groups alternate K, V, so "all but the newest" is the one wanted. */
/* DYN: the grid is one-dimensional and its blocks take work items --
 * (query tile, head) pairs, head fastest, so with the tile list heaviest
 * first (eng_cu_attn_tiles_heavy_first) every head's heavy tiles go first
 * -- from a counter (a.work[0]) instead of striding: item blockIdx.x
 * first, then gridDim.x + the counter's next value, fetched by thread 0
 * when an item starts and used when it ends, so the atomic's round trip
 * hides under the item.  Unequal tiles then balance across SMs as in a
 * longest-first greedy schedule, which static striding does not do
 * (random lengths lost 1-3% with the capped static grid: NOTES).  Each
 * block counts itself out in a.work[1] when it runs dry, and the last one
 * zeroes both, so the next launch (a graph replay needs no memset node)
 * finds them at 0; the counter is touched only after the PDL wait (in
 * attn_item_at), when the previous attention launch is long complete. */
/* HF (with DYN false): the same one-dimensional walk over (tile, head)
 * items, head fastest, but striding by the grid instead of a counter --
 * so the blocks resident together cover all heads of neighbouring rows,
 * and in the serpentine order (eng_cu_order.c) the first wave reads the
 * QKV rows still in L2; the (x, head) grid reads each head's rows in its
 * own pass.  Opt-in: within the noise on the H200 (2026-12-03 run 27:
 * saturated MiniLM 0.995-1.007x, BERT-base 0.999-1.000x). */
template <int D, bool CAUSAL, int ST, bool DYN, bool HF = false, bool REL = false>
__global__ void __launch_bounds__(128, (awg_minb<D, ST>())) attn_wg_kernel(eng_cu_attn_args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BM = ENG_CU_ATTN_BM, BN = 64, TB = 64 * D * 2; /* a tile's bytes (BM = BN = 64) */
    static_assert(BM == 64, "one warpgroup, 64 query rows");
    static_assert(ST == 1 || ST == 2, "one or two K / V stages");
    extern __shared__ unsigned char awg_raw[];
    const uint32_t base = (wg_smem(awg_raw) + 1023) & ~1023u;
    const uint32_t sQ = base, sK = sQ + TB, sV = sK + ST * TB; /* stage b at + b * TB */
    const int H = a.n_heads;
    __shared__ int s_next; /* DYN: the block's next item */
    constexpr bool ITEMS = DYN || HF; /* t counts (tile, head) items, head fastest */
    int t = blockIdx.x, h = ITEMS ? t % H : (int)blockIdx.y;
    for (;;) { /* static: grid-stride over this head's query tiles (HF: over the items); DYN: items from the counter */
        const attn_item it = attn_item_at<D, BN, CAUSAL>(a, ITEMS ? t / H : t, h);
        if (!it.live) break;
        int pending = 0;
        if (DYN && threadIdx.x == 0) pending = (int)gridDim.x + atomicAdd(a.work, 1);
        if (!DYN && t != (int)blockIdx.x) __syncthreads(); /* every warp is done with the last item's tiles */
        const int q0 = it.q0, len = it.len, ntiles = it.ntiles;
        awg_load<D, BM>(sQ, a.q + (size_t)(it.start + q0) * a.ldq + h * D, a.ldq, it.qrows);
        awg_load<D, BN>(sK, it.kbase, a.ldk, len);
        if (ST == 1) eng_async_commit(); /* {Q, K0}, then {V0} */
        awg_load<D, BN>(sV, it.vbase, a.ldv, len);
        eng_async_commit();

        float o[D / 8][4], sc[BN / 8][4];
#pragma unroll
        for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
        const float sl2 = a.scale * 1.4426950408889634f;
        const int wrow0 = q0 + (threadIdx.x >> 5) * 16; /* this warp's first query row */
        for (int j = 0; j < ntiles; j++) {
            const int k0 = j * BN, buf = ST == 2 ? j & 1 : 0;
            const bool more = j + 1 < ntiles;
            const bf16 *kn = it.kbase + (size_t)(k0 + BN) * a.ldk, *vn = it.vbase + (size_t)(k0 + BN) * a.ldv;
            if (ST == 2 && more) { /* the next tile streams in while this one is computed */
                awg_load<D, BN>(sK + (buf ^ 1) * TB, kn, a.ldk, len - k0 - BN);
                awg_load<D, BN>(sV + (buf ^ 1) * TB, vn, a.ldv, len - k0 - BN);
                eng_async_commit();
            }
            if (more || ST == 1) eng_async_wait<1>(); /* ST = 1: K_j; V_j may still be in flight */
            else eng_async_wait<0>();
            awg_copies_visible();
            const uint32_t K = sK + buf * TB, V = sV + buf * TB;
            awg_scores<D>(sc, sQ, K);
            if (ST == 1 && more) {
                __syncthreads(); /* every warp's S is done with K */
                awg_load<D, BN>(sK, kn, a.ldk, len - k0 - BN);
                eng_async_commit();
            }
            if constexpr (REL) /* MPNet (eng_cu_attn_args.rel) */
                eng_attn_add_rel<BN>(sc, eng_attn_rel_row(a, h), k0, len, wrow0);
            eng_attn_softmax<D, BN, CAUSAL>(sc, k0, len, wrow0, sl2, o, m, l);
            uint32_t pa[4][4];
            awg_pack_p(pa, sc);
            if (ST == 1) { /* V_j: all but K_{j+1} */
                if (more) eng_async_wait<1>();
                else eng_async_wait<0>();
                awg_copies_visible();
            }
            awg_pv<D>(o, pa, V);
            if (ST == 2 || more) __syncthreads(); /* the buffer read here is refilled next */
            if (ST == 1 && more) {
                awg_load<D, BN>(sV, vn, a.ldv, len - k0 - BN);
                eng_async_commit();
            }
        }
        eng_attn_store<D>(o, l, it.qrows, a.o + (size_t)(it.start + q0) * a.ldo + h * D, a.ldo);
        if (DYN) {
            if (threadIdx.x == 0) s_next = pending;
            __syncthreads(); /* s_next written; every warp is done with this item's tiles */
            t = s_next;
            h = t % H;
        } else {
            t += gridDim.x;
            if (HF) h = t % H;
        }
    }
    if (DYN && threadIdx.x == 0) {
        __threadfence(); /* this block's counter fetches come before its count-out */
        if (atomicAdd(a.work + 1, 1) == (int)gridDim.x - 1) {
            a.work[0] = 0;
            a.work[1] = 0;
        }
    }
#else
    (void)a;
    __trap(); /* eng_cu_attention_wg never launches it off sm_90a */
#endif
}

int eng_cu_attn_wg_stages = 0;
int eng_cu_attn_wg_waves = -1;
int eng_cu_attn_wg_max_x = 0;
int eng_cu_attn_wg_dyn = -1;

/* The dynamic schedule (DYN above) where a.work is given:
 * eng_cu_attn_wg_dyn (labs), else POSY_CUDA_ATTN_DYN (1 on, 0 off), else
 * on at head size 128 only.  H200, 2026-12-03 run 5 (lab_attn, the
 * bench's wide bound, against each head size's default): d = 128 causal
 * 512 x 128 tokens 378 -> 310 us, random 16..512 565 -> 530, 16 x 1024
 * 283 -> 259; d = 64 / 32 1-3.5% faster too.  But in the saturated steps
 * (same run, ratio to the defaults) Qwen3-0.6B 1.016 / 1.002 (equal 128 /
 * random), BERT-base 1.003 / 1.001, MiniLM 0.994 / 0.990, against a
 * control of 0.994-1.004: only Qwen3 gained past the noise. */
static bool awg_dyn(const eng_cu_attn_args *a, int D) {
    if (!a->work) return false;
    if (eng_cu_attn_wg_dyn >= 0) return eng_cu_attn_wg_dyn > 0;
    static int env = -2;
    if (env == -2) {
        const char *e = getenv("POSY_CUDA_ATTN_DYN");
        env = e && !strcmp(e, "1") ? 1 : e && !strcmp(e, "0") ? 0 : -1;
    }
    return env >= 0 ? env > 0 : D == 128;
}

int eng_cu_attn_wg_hf = -1;

/* The static head-fastest walk (HF above) instead of the (x, head) grid,
 * where the dynamic schedule is not taken: eng_cu_attn_wg_hf (labs), else
 * POSY_CUDA_ATTN_HF=1.  With the serpentine order the (x, head) grid's
 * attention read all 151 MB of a MiniLM step's QKV from HBM (2026-12-03
 * run 25); this walk, timed in run 27, changed the saturated steps by
 * -0.5% to +0.7% (the noise), so it stays opt-in. */
static bool awg_hf(void) {
    if (eng_cu_attn_wg_hf >= 0) return eng_cu_attn_wg_hf > 0;
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("POSY_CUDA_ATTN_HF");
        env = e && !strcmp(e, "1");
    }
    return env;
}

/* The waves of blocks a launch may have: eng_cu_attn_wg_waves (labs), else
 * POSY_CUDA_ATTN_WAVES (0 = one block a tile of the bucket's bound, the
 * form before the cap), else the default: ENG_CU_ATTN_WAVES for head
 * sizes up to 64, no cap at 128 (eng_cu.h says why). */
static int awg_waves(int D) {
    if (eng_cu_attn_wg_waves >= 0) return eng_cu_attn_wg_waves;
    static int env = -2;
    if (env == -2) {
        const char *e = getenv("POSY_CUDA_ATTN_WAVES");
        char *end = NULL;
        const long v = e && *e ? strtol(e, &end, 10) : -1;
        env = e && *e && end && !*end && v >= 0 && v <= 64 ? (int)v : -1;
    }
    return env >= 0 ? env : D <= 64 ? ENG_CU_ATTN_WAVES : 0;
}

/* The one-dimensional grids over (tile, head) items: the dynamic schedule
 * (DYN: one GPU-full of blocks, more if POSY_CUDA_ATTN_WAVES asks) or the
 * static head-fastest walk (HF: capped at the waves, if any) */
template <int D, bool C, int ST, bool DYN>
static cudaError_t awg_launch_items(cudaStream_t s, const eng_cu_attn_args *a) {
    void (*k)(eng_cu_attn_args) = attn_wg_kernel<D, C, ST, DYN, !DYN>;
    constexpr size_t smem = awg_smem<D, ST>();
    static bool optin = false; /* this instantiation's own */
    static int resident = 0;
    cudaError_t e = attn_smem_optin<smem>(k, optin);
    if (e == cudaSuccess) e = awg_resident(k, smem, resident);
    if (e != cudaSuccess) return e;
    const int waves = awg_waves(D);
    const long items = (long)a->max_tiles * a->n_heads;
    long x = DYN ? (long)(waves > 1 ? waves : 1) * resident : waves > 0 ? (long)waves * resident : items;
    if (x > items) x = items;
    if (eng_cu_attn_wg_max_x > 0 && x > eng_cu_attn_wg_max_x) x = eng_cu_attn_wg_max_x;
    return eng_cu_launch(k, dim3((unsigned)x), dim3(128), smem, s, *a);
}

/* Grid: x = the bucket's bound of query tiles (max_tiles), y = heads --
 * capped in x so the whole grid is about `waves` GPU-fulls of blocks, each
 * block walking tiles x, x + gridDim.x, ... of its head.  The bound is
 * tokens / 64 + seqs, so a bucket of 128-token sequences has 2/3-4/5 of its
 * blocks past the real tiles; each such block still costs the SM a block
 * launch (the reason for the cap: dev/cuda/NOTES.md, 2026-12-02 night). */
template <int D, bool C, int ST>
static cudaError_t awg_launch(cudaStream_t s, const eng_cu_attn_args *a_in) {
    eng_cu_attn_args b = *a_in;
    b.rev = eng_cu_order_take(1); /* the tile list either way (attn_item_at) */
    const eng_cu_attn_args *a = &b;
    /* MPNet's relative bias: the static grid only (not the item walks) */
    if (!a->rel && awg_dyn(a, D)) return awg_launch_items<D, C, ST, true>(s, a);
    if (!a->rel && awg_hf()) return awg_launch_items<D, C, ST, false>(s, a);
    void (*k)(eng_cu_attn_args) = a->rel ? attn_wg_kernel<D, C, ST, false, false, true> : attn_wg_kernel<D, C, ST, false>;
    constexpr size_t smem = awg_smem<D, ST>();
    static bool optin_k[2] = {false, false}; /* each kernel's own: [rel] */
    static int resident_k[2] = {0, 0};       /* blocks an SM x SMs */
    bool &optin = optin_k[a->rel != NULL];
    int &resident = resident_k[a->rel != NULL];
    cudaError_t e = attn_smem_optin<smem>(k, optin);
    if (e != cudaSuccess) return e;
    int x = a->max_tiles;
    const int waves = awg_waves(D);
    if (waves > 0) {
        if ((e = awg_resident(k, smem, resident)) != cudaSuccess) return e;
        const long cap = ((long)waves * resident + a->n_heads - 1) / a->n_heads;
        if (cap < x) x = (int)cap;
    }
    if (eng_cu_attn_wg_max_x > 0 && x > eng_cu_attn_wg_max_x) x = eng_cu_attn_wg_max_x;
    return eng_cu_launch(k, dim3(x, a->n_heads), dim3(128), smem, s, *a);
}

/* the form: eng_cu_attn_wg_stages (labs), else POSY_CUDA_ATTN_WG (1 or 2
 * stages, 3 persistent: eng_cu_attn_wgp.cu), else one stage at D = 128
 * and two below */
template <int D>
static cudaError_t awg_pick(cudaStream_t s, const eng_cu_attn_args *a) {
    static int env = -1;
    if (env < 0) {
        const char *e = getenv("POSY_CUDA_ATTN_WG");
        env = e && e[0] >= '1' && e[0] <= '3' && !e[1] ? e[0] - '0' : 0;
    }
    int st = eng_cu_attn_wg_stages ? eng_cu_attn_wg_stages : env ? env : D == 128 ? 1 : 2;
    if (st == 3 && a->rel) st = D == 128 ? 1 : 2; /* the persistent form has no relative bias */
    if (st == 3) return eng_cu_order_take(0), eng_cu_attention_wgp(s, a);
    if (st == 1) return a->causal ? awg_launch<D, true, 1>(s, a) : awg_launch<D, false, 1>(s, a);
    return a->causal ? awg_launch<D, true, 2>(s, a) : awg_launch<D, false, 2>(s, a);
}

cudaError_t eng_cu_attention_wg(cudaStream_t s, const eng_cu_attn_args *a) {
    if (!eng_cu_gemm_wg_available() || eng_cu_attn_qkn(a)) return cudaErrorInvalidValue;
    switch (a->head_dim) {
    case 32: return awg_pick<32>(s, a);
    case 64: return awg_pick<64>(s, a);
    case 128: return awg_pick<128>(s, a);
    default: return cudaErrorInvalidValue;
    }
}

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
 * generic proxy, wgmma reads through the async one.
 *
 * Stages: two (K and V of the next tile copied while this one is
 * computed) take 82 KB at D = 128, two blocks an SM; one (the next K
 * copied once S has read this one, the next V once P V has) takes 49 KB,
 * four blocks at 128 registers -- for 128-token sequences, where a block
 * sees one or two key tiles and residency hides the copies' latency.
 * eng_cu_attn_wg_stages (labs) forces one or the other; the default is one
 * at D = 128, two below.
 *
 * Measured on the H200 2026-12-02: run 26 (two stages only) correct
 * against fp64 at every head size, memcheck clean, 1.10-1.17x v9 / v2 /
 * v5 on sequences of 512-1024 tokens but 0.83x v9 at d = 128 on 128-token
 * causal ones (two blocks an SM) -- hence the one-stage form; run 27, at
 * 512 x 128 tokens: d = 128 one stage 330 us against v9's 373 (two stages
 * 445), d = 64 two stages 170 against 186, d = 32 111 against 120; the
 * saturated steps 1.011-1.013x (128-token sequences) and 1.029-1.037x
 * (mixed 16-512) the previous defaults' for Qwen3-0.6B, BERT-base and
 * MiniLM: the default off the chain on Hopper (eng_cu_attn_version).
 * No q/k norm: with it, eng_cu_attention runs v2's fused path instead.
 */
#include "eng_cu_frag.h"
#include "eng_cu_wgmma.h"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* S (+)= Q K^T, one k-step (m64n64k16, both operands by descriptor).
 * The first step writes S without reading it ("=f"): otherwise the
 * accumulators stay live, as inputs, across the P V product of the tile
 * before (32 registers a thread). */
template <bool ACC>
static __device__ __forceinline__ void awg_mma_ss64(float *d, uint64_t da, uint64_t db) {
    if constexpr (ACC)
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
                     " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(da), "l"(db));
    else
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, 0, 0;\n"
                     " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
                     : "l"(da), "l"(db));
}

/* O += P V, one k-step of 16 keys: P from registers (4 packed bf16 pairs
 * a thread, the mma.sync A layout), V by an MN-major descriptor
 * (imm-trans-b = 1) */
static __device__ __forceinline__ void awg_mma_rs32(float *d, const uint32_t *a, uint64_t db) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %21, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

static __device__ __forceinline__ void awg_mma_rs64(float *d, const uint32_t *a, uint64_t db) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

static __device__ __forceinline__ void awg_mma_rs128(float *d, const uint32_t *a, uint64_t db) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

template <int D>
static __device__ __forceinline__ void awg_mma_pv(float *d, const uint32_t *a, uint64_t db) {
    if constexpr (D == 32) awg_mma_rs32(d, a, db);
    else if constexpr (D == 64) awg_mma_rs64(d, a, db);
    else awg_mma_rs128(d, a, db);
}

/* A tile's layout: rows of RB bytes (128, or 64 at D = 32), at D = 128 in
 * two slices of 64 values, each slice R rows; SW the descriptor's swizzle
 * mode (1: 128 bytes, 2: 64). */
template <int D>
struct awg_layout {
    static constexpr int RB = D >= 64 ? 128 : 64, SW = D >= 64 ? 1 : 2;
};

/* cp.async of R rows of D values (global row stride ld) into the swizzled
 * tile at dst (1024-byte aligned), rows >= valid zero-filled; by the CTA's
 * 128 threads, not committed */
template <int D, int R>
static __device__ __forceinline__ void awg_load(uint32_t dst, const bf16 *src, int ld, int valid) {
    constexpr int CPR = D / 8; /* 16-byte chunks a row */
#pragma unroll
    for (int c = threadIdx.x; c < R * CPR; c += 128) {
        const int r = c / CPR, cc = c % CPR;
        const uint32_t off = D >= 64 ? (cc >> 3) * (R * 128) + r * 128 + (((cc & 7) ^ (r & 7)) << 4)
                                     : r * 64 + ((cc ^ ((r >> 1) & 3)) << 4);
        const bool ok = r < valid;
        const bf16 *g = ok ? src + (size_t)r * ld + cc * 8 : src;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst + off), "l"(g), "r"(ok ? 16 : 0));
    }
}

/* K-major descriptor (Q, K): k-step kk of 16 values at slice kk / 4 (D >=
 * 64, +32 bytes a step inside the slice) or +32 bytes (D = 32); 8-row
 * groups RB * 8 bytes apart */
template <int D, int R>
static __device__ __forceinline__ uint64_t awg_desc_k(uint32_t tile, int kk) {
    using L = awg_layout<D>;
    const uint32_t a = D >= 64 ? tile + (kk >> 2) * (R * 128) + (kk & 3) * 32 : tile + kk * 32;
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)((L::RB * 8) >> 4) << 32) |
           ((uint64_t)L::SW << 62);
}

/* MN-major descriptor (V as the B operand of P V): keys 16 s .. 16 s + 15,
 * the head's 64-value column blocks (D = 128) R * 128 bytes apart (the
 * leading offset) and 8-key core-matrix groups RB * 8 bytes apart (the
 * stride offset); checked on the H200 2026-12-02 (run 26) */
template <int D, int R>
static __device__ __forceinline__ uint64_t awg_desc_v(uint32_t tile, int s) {
    using L = awg_layout<D>;
    const uint32_t a = tile + s * 16 * L::RB, lbo = R * 128, sbo = L::RB * 8;
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | ((uint64_t)L::SW << 62);
}
#endif

/* shared memory: Q, ST stages of K and V, and the 1024-byte alignment fix-up */
template <int D, int ST>
static constexpr size_t awg_smem() {
    return (size_t)(64 + ST * 2 * 64) * D * 2 + 1024;
}

/* blocks an SM the launch bounds ask for: the register cap that lets
 * shared memory, not registers, bound residency (ST = 1 at D = 128: 49 KB,
 * four blocks at 128 registers, as v9 has).  Below 128, five (d = 64, 96
 * registers) and six (d = 32, 80) blocks, no spills; run 27 measured four
 * and five (105 / 90 registers uncapped) */
template <int D, int ST>
static constexpr int awg_minb() {
    return D == 128 ? (ST == 1 ? 4 : 2) : D == 64 ? 5 : 6;
}

/* The key tile loop.  ST = 2: K and V of the next tile stream in while
 * this one is computed (one commit group a tile).  ST = 1, one buffer each:
 * the next K is copied once S has read this one (under the softmax and
 * P V), the next V once P V has read this one (under the next S); the
 * commit groups alternate K, V, so "all but the newest" is the one wanted. */
template <int D, bool CAUSAL, int ST>
__global__ void __launch_bounds__(128, (awg_minb<D, ST>())) attn_wg_kernel(eng_cu_attn_args a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int BM = ENG_CU_ATTN_BM, BN = 64, TB = 64 * D * 2; /* a tile's bytes (BM = BN = 64) */
    static_assert(BM == 64, "one warpgroup, 64 query rows");
    static_assert(ST == 1 || ST == 2, "one or two K / V stages");
    extern __shared__ unsigned char awg_raw[];
    const uint32_t base = (wg_smem(awg_raw) + 1023) & ~1023u;
    const uint32_t sQ = base, sK = sQ + TB, sV = sK + ST * TB; /* stage b at + b * TB */
    const attn_item it = attn_item_at<D, BN, CAUSAL>(a, blockIdx.x, blockIdx.y);
    if (!it.live) return;
    const int q0 = it.q0, len = it.len, ntiles = it.ntiles, h = blockIdx.y;
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
        wg_fence_async_smem(); /* this thread's copies, to the async proxy */
        __syncthreads();
        const uint32_t K = sK + buf * TB, V = sV + buf * TB;
        wg_fence();
        awg_mma_ss64<false>(&sc[0][0], awg_desc_k<D, BM>(sQ, 0), awg_desc_k<D, BN>(K, 0));
#pragma unroll
        for (int kk = 1; kk < D / 16; kk++) awg_mma_ss64<true>(&sc[0][0], awg_desc_k<D, BM>(sQ, kk), awg_desc_k<D, BN>(K, kk));
        wg_commit();
        wg_wait<0>();
        wg_fence_regs<BN / 2>(&sc[0][0]);
        if (ST == 1 && more) {
            __syncthreads(); /* every warp's S is done with K */
            awg_load<D, BN>(sK, kn, a.ldk, len - k0 - BN);
            eng_async_commit();
        }
        eng_attn_softmax<D, BN, CAUSAL>(sc, k0, len, wrow0, sl2, o, m, l);
        uint32_t pa[BN / 16][4];
#pragma unroll
        for (int s = 0; s < BN / 16; s++) {
            pa[s][0] = eng_pack_bf16(sc[2 * s][0], sc[2 * s][1]);
            pa[s][1] = eng_pack_bf16(sc[2 * s][2], sc[2 * s][3]);
            pa[s][2] = eng_pack_bf16(sc[2 * s + 1][0], sc[2 * s + 1][1]);
            pa[s][3] = eng_pack_bf16(sc[2 * s + 1][2], sc[2 * s + 1][3]);
        }
        if (ST == 1) { /* V_j: all but K_{j+1} */
            if (more) eng_async_wait<1>();
            else eng_async_wait<0>();
            wg_fence_async_smem();
            __syncthreads();
        }
        wg_fence();
#pragma unroll
        for (int s = 0; s < BN / 16; s++) awg_mma_pv<D>(&o[0][0], pa[s], awg_desc_v<D, BN>(V, s));
        wg_commit();
        wg_wait<0>();
        wg_fence_regs<D / 2>(&o[0][0]);
        if (ST == 2 || more) __syncthreads(); /* the buffer read here is refilled next */
        if (ST == 1 && more) {
            awg_load<D, BN>(sV, vn, a.ldv, len - k0 - BN);
            eng_async_commit();
        }
    }
    eng_attn_store<D>(o, l, it.qrows, a.o + (size_t)(it.start + q0) * a.ldo + h * D, a.ldo);
#else
    (void)a;
    __trap(); /* eng_cu_attention_wg never launches it off sm_90a */
#endif
}

int eng_cu_attn_wg_stages = 0;

template <int D, bool C, int ST>
static cudaError_t awg_launch(cudaStream_t s, const eng_cu_attn_args *a) {
    void (*k)(eng_cu_attn_args) = attn_wg_kernel<D, C, ST>;
    constexpr size_t smem = awg_smem<D, ST>();
    static bool optin = false; /* this instantiation's own */
    const cudaError_t e = attn_smem_optin<smem>(k, optin);
    if (e != cudaSuccess) return e;
    return eng_cu_launch(k, dim3(a->max_tiles, a->n_heads), dim3(128), smem, s, *a);
}

template <int D>
static cudaError_t awg_pick(cudaStream_t s, const eng_cu_attn_args *a) {
    const int st = eng_cu_attn_wg_stages ? eng_cu_attn_wg_stages : D == 128 ? 1 : 2;
    if (st == 1) return a->causal ? awg_launch<D, true, 1>(s, a) : awg_launch<D, false, 1>(s, a);
    return a->causal ? awg_launch<D, true, 2>(s, a) : awg_launch<D, false, 2>(s, a);
}

cudaError_t eng_cu_attention_wg(cudaStream_t s, const eng_cu_attn_args *a) {
    if (!eng_cu_gemm_wg_available() || a->q_norm) return cudaErrorInvalidValue;
    switch (a->head_dim) {
    case 32: return awg_pick<32>(s, a);
    case 64: return awg_pick<64>(s, a);
    case 128: return awg_pick<128>(s, a);
    default: return cudaErrorInvalidValue;
    }
}

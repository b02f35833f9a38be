/* eng_cu_skinny.h: what the few-row GEMM kernels share -- the skinny
 * kernels v1 and v2 (eng_cu_skinny.cu) and the one-query chain's v3
 * (eng_cu_chain_gemm.cu), and the chain's attention + O projection
 * (eng_cu_chain_attn.cu): a block owns 16 output columns (the chain
 * GEMM: 16 or 32) for all M rows, its warps split K, and their partial
 * tiles meet here; the chain kernels also share the bulk-copy (TMA)
 * helpers and the split of K over warps.
 */
#ifndef ENG_CU_SKINNY_H
#define ENG_CU_SKINNY_H

#include "eng_cu_frag.h"

/* A warp's accumulators: MT m tiles x the block's NT n tiles of 8 (two:
 * 16 columns; the chain kernel also builds blocks of 32, NT = 4). */
template <int MT, int NT = 2>
static __device__ __forceinline__ void skinny_zero(float (*acc)[NT][4]) {
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
}

/* The chain kernel's RMS fold (eng_cu_chain_gemm.cu, SK3_FOLD): with K > 0
 * row r's sums are scaled by rsqrt(ssq_r / K + eps), ssq_r being the sum
 * over the warps of part[w][r][NC] (each warp's share of the row's sum of
 * squares); rows at or past n_real get zero sums, as the norm kernels zero
 * those rows.  K = 0: no fold. */
typedef struct skinny_fold {
    int K;
    float eps;
    int n_real;
    /* the LayerNorm fold (rsum != NULL): rsum[w * MT * 16 + r] is warp w's
     * share of row r's sum (shared memory), colsum the block's NC column
     * sums of the folded W (shared), rowst a shared [MT * 16] scratch for
     * the rows' (mu, rs), stats_out where they also go (block 0; else
     * NULL); each output becomes rs (sum - mu colsum) before the bias */
    const float *rsum, *colsum;
    float2 *rowst, *stats_out;
} skinny_fold;

/* The residual as a LayerNorm of its raw rows (eng_cu_chain_res): st
 * (shared, NULL: the residual as it is) holds each row's (mu, rs), g / b
 * the block's NC gamma / beta values (shared); rows at or past n_real
 * contribute 0. */
typedef struct skinny_res {
    const float2 *st;
    const float *g, *b;
    int n_real;
} skinny_res;

/* The warps' partial sums of the block's NC (16, or 32 in the chain
 * kernel) columns meet in shared memory; one pass adds bias, GELU (the
 * tanh form, as cuBLASLt's epilogue, so both paths agree), the residual,
 * and stores bf16.  b16: the block's NC bias values (NULL: none); r16 + r *
 * ldr: row r's NC residual values (NULL: none); y16 + r * ldy: where row
 * r's outputs go.  ENG_CU_EPI_SWIGLU (the chain kernel only): the block's
 * columns are NC / 2 gate then NC / 2 up columns, and row r gets the NC / 2
 * values silu(gate) * up, from the fp32 sums.  The fold's and the
 * residual's per-column arrays (colsum, g, b) hold NC values too; part's
 * spare column NC carries the fold's sums of squares. */
template <int MT, int WARPS, int NC = 16>
static __device__ __forceinline__ void skinny_finish(const float (*acc)[NC / 8][4], float (*part)[MT * 16][NC + 1],
                                                     const bf16 *b16, const bf16 *r16, int ldr, bf16 *y16,
                                                     int ldy, int M, int epi,
                                                     skinny_fold fold = skinny_fold{0, 0.f, 0, NULL, NULL, NULL, NULL},
                                                     skinny_res res = skinny_res{NULL, NULL, NULL, 0}) {
    static_assert(NC == 16 || NC == 32, "blocks of 16 or 32 columns");
    constexpr int LNC = NC == 32 ? 5 : 4; /* log2 NC */
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < NC / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                part[warp][mt * 16 + g + (e >> 1) * 8][nt * 8 + 2 * t + (e & 1)] = acc[mt][nt][e];
    __syncthreads();
    auto row_scale = [&](int r) -> float {
        if (!fold.K) return 1.f;
        float ss = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) ss += part[w][r][NC];
        return r < fold.n_real ? rsqrtf(ss / (float)fold.K + fold.eps) : 0.f;
    };
    const bool ln = fold.K && fold.rsum;
    if (ln) { /* each row's (mu, rs) once, from its sum and sum of squares */
        for (int r = threadIdx.x; r < M; r += WARPS * 32) {
            float s1 = 0.f, s2 = 0.f;
#pragma unroll
            for (int w = 0; w < WARPS; w++) {
                s1 += fold.rsum[w * MT * 16 + r];
                s2 += part[w][r][NC];
            }
            const float mu = s1 / (float)fold.K, var = fmaxf(s2 / (float)fold.K - mu * mu, 0.f);
            const float2 st = r < fold.n_real ? make_float2(mu, rsqrtf(var + fold.eps)) : make_float2(0.f, 0.f);
            fold.rowst[r] = st;
            if (fold.stats_out) fold.stats_out[r] = st;
        }
        __syncthreads();
    }
    if (epi == ENG_CU_EPI_SWIGLU) {
        for (int i = threadIdx.x; i < M * (NC / 2); i += WARPS * 32) {
            const int r = i >> (LNC - 1), c = i & (NC / 2 - 1);
            float gv = 0.f, uv = 0.f;
#pragma unroll
            for (int w = 0; w < WARPS; w++) {
                gv += part[w][r][c];
                uv += part[w][r][c + NC / 2];
            }
            const float sc = row_scale(r);
            gv *= sc;
            uv *= sc;
            if (b16) {
                gv += __bfloat162float(b16[c]);
                uv += __bfloat162float(b16[c + NC / 2]);
            }
            y16[(size_t)r * ldy + c] = __float2bfloat16(gv / (1.f + expf(-gv)) * uv);
        }
        return;
    }
    for (int i = threadIdx.x; i < M * NC; i += WARPS * 32) {
        const int r = i >> LNC, c = i & (NC - 1);
        float v = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; w++) v += part[w][r][c];
        if (ln) {
            const float2 st = fold.rowst[r];
            v = (v - st.x * fold.colsum[c]) * st.y;
        } else
            v *= row_scale(r);
        if (b16) v += __bfloat162float(b16[c]);
        if (epi == ENG_CU_EPI_BIAS_GELU)
            v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
        if (r16) {
            float rv = __bfloat162float(r16[(size_t)r * ldr + c]);
            if (res.st) {
                const float2 st = res.st[r];
                rv = r < res.n_real ? (rv - st.x) * st.y * res.g[c] + res.b[c] : 0.f;
            }
            v += rv;
        }
        y16[(size_t)r * ldy + c] = __float2bfloat16(v);
    }
}

/* one 16-byte cp.async, not committed */
static __device__ __forceinline__ void sk3_cp16(void *dst, const void *src) {
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

/* Bulk copies (the copy engine, TMA): an mbarrier, armed by one thread
 * with the bytes to expect, completes its phase 0 when they have landed;
 * one cp.async.bulk a row. */
static __device__ __forceinline__ void sk3_bulk_init(uint64_t *bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"((uint32_t)__cvta_generic_to_shared(bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

static __device__ __forceinline__ void sk3_bulk_arm(uint64_t *bar, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(bar)),
                 "r"(bytes)
                 : "memory");
}

static __device__ __forceinline__ void sk3_bulk_row(uint64_t *bar, bf16 *dst, const bf16 *src, int bytes) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src), "r"(bytes), "r"((uint32_t)__cvta_generic_to_shared(bar))
                 : "memory");
}

static __device__ __forceinline__ void sk3_bulk_wait(uint64_t *bar) {
    const uint32_t b = (uint32_t)__cvta_generic_to_shared(bar);
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(b)
                     : "memory");
}

/* The chain kernels' split of K (eng_cu_chain_gemm.cu,
 * eng_cu_chain_attn.cu): G groups of 64 a warp, at most 8 warps, G from
 * the list their kernels are built for; 0 when K does not split so. */
static inline void eng_cu_chain_split(int K, int *warps, int *groups) {
    static const int gs[] = {1, 2, 3, 4, 6};
    *warps = *groups = 0;
    if (K % 64) return;
    for (int i = 0; i < 5; i++) {
        const int n = K / 64;
        if (n % gs[i] == 0 && (n / gs[i] == 8 || n / gs[i] == 6 || n / gs[i] == 4)) {
            *warps = n / gs[i];
            *groups = gs[i];
            return;
        }
    }
}

#endif

/* eng_cu_chain_attn: attention folded into the O projection, for the
 * one-query chain's buckets of up to 16 tokens (eng_cu_model.cu,
 * eng_cu_model_qwen3.cu).
 *
 * In the chain every node costs ~1.5-2 us of launch and drain however
 * little it computes, and attention on 16 tokens computes almost nothing
 * (MiniLM: 0.4 MFLOP) -- yet it was a node of its own, 2.4-3.1 us a layer
 * on the H200 (dev/cuda/NOTES.md, ablation).  Here the O projection's
 * blocks compute it themselves.  The chain GEMM's split of K over warps
 * gives each warp G x 64 consecutive columns of the attention output,
 * which are whole heads (2 for all-MiniLM, BERT-base and Qwen3-0.6B; one
 * with eng_cu_chain_attn_wh, 12 warps a block), so a
 * warp needs nothing from the other warps: it brings its heads' Q, K and V
 * rows (<= 16 of each, from L2) into its own shared tiles, applies
 * Qwen3's q/k RMSNorm + rotary there when asked (QKN), computes
 * S = Q K^T, the masked softmax (one key tile: no online rescaling) and
 * O = P V on tensor cores (eng_chain_head, eng_cu_chain_head.h), and
 * feeds O -- rounded to bf16 exactly as the attention kernels store it --
 * straight from its accumulators into the mma A fragments of the
 * projection (the two layouts agree), against the block's 16 weight rows
 * that were requested, by bulk copies, before griddepcontrol.wait.  Each
 * block recomputes the attention (N / 16 blocks: 24 to 64 times), which
 * is cheap next to a node; the warps' partial tiles meet in skinny_finish
 * with the bias and the residual, as in the chain GEMM.
 *
 * Rows may belong to several sequences (a bucket of 16 serves any mix):
 * each query row gets its sequence's key range from cu_seqlens (and,
 * causal, keys up to itself); rows at or past the real token count are
 * zero-filled, so they attend to nothing and their outputs are the bias
 * and residual alone.  Tested against an fp64 reference of attention then
 * projection by dev/cuda/lab_attn.cu (one and several sequences, single
 * token, causal, GQA, q/k norm + rotary).  MPNet's relative position bias
 * (a.rel; bidirectional, no q/k norm) is added in eng_chain_head (REL).
 *
 * Measured on the H200 (docs/BENCHMARKS.md): all-MiniLM's 16-token query
 * 75 against 77 us, but BERT-base 251 against 220 and Qwen3-0.6B 899
 * against 698 -- every block ingests 3x the bytes the plain O GEMM reads
 * and each warp walked its two heads serially.  With one head a warp
 * (eng_cu_chain_attn_wh, 12 warps; 2026-12-03 run 19) all-MiniLM went
 * 70.4 -> 65.0 us and BERT-base, now with attention inside O, 201.3 ->
 * 188.8; so the engine uses it for head size 32 and for the shapes with
 * the one-head split, Qwen3 only with POSY_CUDA_CHAIN_ATTN=1
 * (eng_cu_model.h, chain_attn).
 */
#include "eng_cu_chain_head.h"
#include "eng_cu_skinny.h"
#include "eng_cu_trace.h"
#include <math.h>

ENG_CU_TRACE_UNIT("chain_attn_o")

/* Shared memory: the weight slice [16][K + 8] (8 bf16 of padding: the
 * 32-bit B-fragment loads of 8 rows x 4 lanes fall on distinct banks), a
 * warp's tiles (HPW Q tiles, KVW K and KVW V tiles of [16][D + 8]), the
 * warps' partial tiles, the bias and the residual rows; then, for a
 * LayerNorm residual (eng_cu_chain_res), the block's 16 gamma and beta
 * values and the rows' (mu, rs). */
static size_t ca_smem(int K, int D, int warps, int hpw, int kvw, int lnr) {
    return (size_t)16 * (K + 8) * 2 + (size_t)warps * (hpw + 2 * kvw) * 16 * (D + 8) * 2 +
           (size_t)warps * 16 * 17 * 4 + 32 + 16 * 16 * 2 + (lnr ? 2 * 16 * 4 + 16 * 8 : 0);
}

template <int WARPS, int KPW, int D, int KVW, bool CAUSAL, bool QKN, bool LNR, bool LATE, bool REL = false>
__global__ void __launch_bounds__(WARPS * 32)
chain_attn_o_kernel(eng_cu_attn_args a, const int *n_rows_dev, const int *n_seqs_dev, const bf16 *W,
                    const bf16 *bias, const bf16 *R, bf16 *Y, int M, int N, eng_cu_chain_res res) {
    constexpr int K = WARPS * KPW, HPW = KPW / D, LD = D + 8, LDW = K + 8, TILE = 16 * LD;
    constexpr int TPW = HPW + 2 * KVW; /* tiles a warp */
    extern __shared__ __align__(16) unsigned char ca_smem_buf[];
    __shared__ uint64_t wbar;
    __shared__ int rlo[16], rhi[16], rpos[16]; /* query row r sees keys [rlo, rhi); its position */
    bf16 *Ws = (bf16 *)ca_smem_buf, *tiles = Ws + 16 * LDW;
    float(*part)[16][17] = (float(*)[16][17])(tiles + WARPS * TPW * TILE);
    bf16 *bsm = (bf16 *)(part + WARPS), *Rs = bsm + 16;
    float *rgs = (float *)(Rs + 16 * 16), *rbs = rgs + 16; /* LayerNorm residual: gamma, beta, rows' (mu, rs) */
    float2 *rst = (float2 *)(rbs + 16);
    ENG_CU_TRACE_BEGIN(); /* -DENG_CU_TRACE only: eng_cu_trace.h */
    if (!LATE) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); /* LATE: after the wait */
    const int n_lo = 16 * blockIdx.x;
    if (threadIdx.x == 0) {
        sk3_bulk_init(&wbar);
        sk3_bulk_arm(&wbar, 16 * K * 2);
        for (int r = 0; r < 16; r++) sk3_bulk_row(&wbar, Ws + r * LDW, W + (size_t)(n_lo + r) * K, K * 2);
    }
    if (bias && threadIdx.x < 2) sk3_cp16(bsm + 8 * threadIdx.x, bias + n_lo + 8 * threadIdx.x);
    if (LNR && threadIdx.x >= 32 && threadIdx.x < 40) {
        const int i = threadIdx.x - 32;
        sk3_cp16(i < 4 ? rgs + 4 * i : rbs + 4 * (i - 4), (i < 4 ? res.gamma : res.beta) + n_lo + 4 * (i & 3));
    }
    eng_async_commit();
    /* the batch's shape comes from the input block, which no kernel of the
     * forward writes (eng_cu.h): read before the wait */
    const int n_real = min(M, *n_rows_dev), r_real = LNR ? min(M, *res.n_rows_dev) : M;
    if (threadIdx.x < 16) {
        const int r = threadIdx.x, ns = *n_seqs_dev;
        int lo = 0, hi = 0, pos = 0;
        if (r < n_real)
            for (int q = 0; q < ns; q++) {
                const int b = a.cu_seqlens[q], e = a.cu_seqlens[q + 1];
                if (r >= b && r < e) {
                    lo = b;
                    hi = CAUSAL ? r + 1 : e;
                    pos = r - b;
                    break;
                }
            }
        rlo[r] = lo;
        rhi[r] = hi;
        rpos[r] = pos;
    }
    ENG_CU_TRACE_AT(1);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (LATE) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    ENG_CU_TRACE_AT(2);
    if (R) {
        for (int i = threadIdx.x; i < 2 * M; i += WARPS * 32)
            sk3_cp16(Rs + 8 * i, R + (size_t)(i >> 1) * N + n_lo + 8 * (i & 1));
    }
    /* the residual rows' (mu, rs), which an earlier fold stored: from L2
     * (not L1, which may hold an older forward's) */
    float2 rst_v = make_float2(0.f, 0.f);
    if (LNR && threadIdx.x < M) rst_v = __ldcg(res.stats + threadIdx.x);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int h0 = warp * HPW, grp = a.n_heads / a.n_kv_heads;
    bf16 *wt = tiles + warp * TPW * TILE; /* Q tiles, then K, then V */
    {
        /* this warp's heads: rows at or past the real count as zeros (their
         * Q/K/V are whatever the QKV GEMM made of padding) */
        constexpr int CPR = D / 8;
        for (int c = lane; c < TPW * 16 * CPR; c += 32) {
            const int ti = c / (16 * CPR), rem = c - ti * 16 * CPR, r = rem / CPR, cc = (rem - r * CPR) * 8;
            const bf16 *src;
            if (ti < HPW) src = a.q + (size_t)r * a.ldq + (h0 + ti) * D;
            else if (ti < HPW + KVW) src = a.k + (size_t)r * a.ldk + (h0 + (KVW == 1 ? 0 : ti - HPW)) / grp * D;
            else src = a.v + (size_t)r * a.ldv + (h0 + (KVW == 1 ? 0 : ti - HPW - KVW)) / grp * D;
            const bool ok = r < n_real;
            const uint32_t d = (uint32_t)__cvta_generic_to_shared(wt + ti * TILE + r * LD + cc);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(ok ? src + cc : a.q),
                         "r"(ok ? 16 : 0));
        }
        eng_async_commit();
    }
    eng_async_wait<0>();
    if (LNR && threadIdx.x < M) rst[threadIdx.x] = rst_v;
    __syncthreads(); /* the row ranges, bias and residual; orders the barrier's init before the polls */
    if constexpr (QKN) {
#pragma unroll
        for (int j = 0; j < HPW; j++) eng_attn_qk_rows<D, 32>(wt + j * TILE, n_real, 0, a.q_norm, a, lane, rpos);
#pragma unroll
        for (int j = 0; j < KVW; j++)
            eng_attn_qk_rows<D, 32>(wt + (HPW + j) * TILE, n_real, 0, a.k_norm, a, lane, rpos);
        __syncwarp();
    }
    const float sl2 = a.scale * 1.4426950408889634f;
    const int lo[2] = {rlo[g], rlo[g + 8]}, hi[2] = {rhi[g], rhi[g + 8]};
    float acc[1][2][4];
    skinny_zero<1>(acc);
#pragma unroll
    for (int j = 0; j < HPW; j++) {
        const bf16 *Qs = wt + j * TILE, *Ks = wt + (HPW + (KVW == 1 ? 0 : j)) * TILE,
                   *Vs = wt + (HPW + KVW + (KVW == 1 ? 0 : j)) * TILE;
        float o[D / 8][4], l[2];
        const float *rb = REL ? eng_attn_rel_row(a, h0 + j) : nullptr;
        eng_chain_head<D, LD, D, REL>(Qs, Ks, Vs, lo, hi, sl2, o, l, 0, rb);
        if (j == 0) {
            sk3_bulk_wait(&wbar); /* the weight slice, requested before the wait */
            ENG_CU_TRACE_AT(3);
        }
        /* O / l as bf16 (what the attention kernels store) is the A operand
         * of the projection over this head's D columns of W */
#pragma unroll
        for (int s = 0; s < D / 16; s++) {
            const uint32_t xa[4] = {eng_pack_bf16(o[2 * s][0] * l[0], o[2 * s][1] * l[0]),
                                    eng_pack_bf16(o[2 * s][2] * l[1], o[2 * s][3] * l[1]),
                                    eng_pack_bf16(o[2 * s + 1][0] * l[0], o[2 * s + 1][1] * l[0]),
                                    eng_pack_bf16(o[2 * s + 1][2] * l[1], o[2 * s + 1][3] * l[1])};
            const int k = (h0 + j) * D + 16 * s + 2 * t;
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
                const bf16 *w = Ws + (nt * 8 + g) * LDW + k;
                eng_mma16816(acc[0][nt], xa, eng_ld32(w), eng_ld32(w + 8));
            }
        }
    }
    const skinny_res sres = {LNR ? rst : NULL, rgs, rbs, r_real};
    skinny_finish<1, WARPS>(acc, part, bias ? bsm : NULL, R ? Rs : NULL, 16, Y + n_lo, N, M,
                            bias ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE,
                            skinny_fold{0, 0.f, 0, NULL, NULL, NULL, NULL}, sres);
    ENG_CU_TRACE_END();
}

/* The instantiations: (warps, k a warp, head size, kv tiles a warp) for
 * all-MiniLM (K = 384, d = 32), BERT-base (768, 64), BERT-large-like
 * (1024, 64) and Qwen3-0.6B (2048, 128, two q heads a kv head); each
 * causal or not, and q/k norm for d = 128.  The last two: one head a warp
 * (eng_cu_chain_attn_wh) for all-MiniLM and BERT-base. */
#define CA_SHAPES(X) X(6, 64, 32, 2) X(6, 128, 64, 2) X(8, 128, 64, 2) X(8, 256, 128, 1) X(12, 32, 32, 1) X(12, 64, 64, 1)

int eng_cu_chain_attn_wh = 1;

/* Whether (warps, k a warp, head size, kv tiles a warp) is instantiated */
static int ca_built(int warps, int kpw, int D, int kvw) {
#define CA_HAS(W_, G_, D_, KV_) || (warps == W_ && kpw == G_ && D == D_ && kvw == KV_)
    return 0 CA_SHAPES(CA_HAS);
#undef CA_HAS
}

/* The split of K over warps: the chain GEMM's (eng_cu_chain_split: 64 k
 * groups, at most 8 warps, so a warp walks 2 heads of 32 or 64 in turn),
 * or with eng_cu_chain_attn_wh, where such a kernel is built, one head a
 * warp (12 warps for 12 heads: the serial attention part of a warp
 * halves, the partial tiles to add double) */
static int ca_shape(const eng_cu_attn_args *a, int K, int *warps, int *kpw, int *kvw) {
    const int D = a->head_dim, grp = a->n_heads / a->n_kv_heads;
    if (eng_cu_chain_attn_wh && D > 0 && K % D == 0 && grp == 1 && ca_built(K / D, D, D, 1)) {
        *warps = K / D;
        *kpw = D;
        *kvw = 1;
        return 1;
    }
    int groups;
    eng_cu_chain_split(K, warps, &groups);
    *kpw = 64 * groups;
    if (D <= 0 || !*warps || *kpw % D) return 0;
    const int hpw = *kpw / D;
    *kvw = grp == 1 ? hpw : grp % hpw == 0 ? 1 : 0;
    return *kvw && ca_built(*warps, *kpw, D, *kvw);
}

int eng_cu_chain_attn_o_one_head(const eng_cu_attn_args *a) {
    int w, kpw, kvw;
    return a->head_dim > 0 && a->n_kv_heads >= 1 && a->n_heads % a->n_kv_heads == 0 &&
           ca_shape(a, a->n_heads * a->head_dim, &w, &kpw, &kvw) && kpw == a->head_dim;
}

int eng_cu_chain_attn_o_ok(const eng_cu_attn_args *a, int M, int N) {
    int w, kpw, kvw;
    const int K = a->n_heads * a->head_dim;
    if (M < 1 || M > 16 || N % 16 || a->n_kv_heads < 1 || a->n_heads % a->n_kv_heads ||
        !ca_shape(a, K, &w, &kpw, &kvw))
        return 0;
    if (a->q_norm && (a->head_dim != 128 || !a->k_norm || !a->rope || a->rope_rows < 1)) return 0;
    if (a->rope_only && (a->head_dim != 128 || a->q_norm || a->k_norm || !a->rope || a->rope_rows < 1)) return 0;
    if (a->rel && (a->causal || eng_cu_attn_qkn(a) || a->rel_max < 1)) return 0; /* MPNet: bidirectional, no q/k norm */
    if ((a->ldq | a->ldk | a->ldv) % 8 || (((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v) & 15)) return 0;
    return ca_smem(K, a->head_dim, w, kpw / a->head_dim, kvw, 1) <= 227 * 1024;
}

template <int WARPS, int KPW, int D, int KVW, bool CAUSAL, bool QKN, bool LNR = false, bool REL = false>
static cudaError_t ca_launch(cudaStream_t s, const eng_cu_attn_args &a, const int *n_rows_dev,
                             const int *n_seqs_dev, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y, int M,
                             int N, const eng_cu_chain_res &res) {
    const size_t smem = ca_smem(WARPS * KPW, D, WARPS, KPW / D, KVW, LNR);
    /* LATE (eng_cu_chain_late) as a template parameter, as in the chain GEMM */
    const int li = eng_cu_chain_late ? 1 : 0;
    auto *k = li ? chain_attn_o_kernel<WARPS, KPW, D, KVW, CAUSAL, QKN, LNR, true, REL>
                 : chain_attn_o_kernel<WARPS, KPW, D, KVW, CAUSAL, QKN, LNR, false, REL>;
    static size_t attr[2] = {0, 0}; /* per instantiation: the shared-memory cap raised once */
    if (attr[li] < smem) {
        cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        attr[li] = smem;
    }
    return eng_cu_launch(k, dim3(N / 16), dim3(WARPS * 32), smem, s, a, n_rows_dev, n_seqs_dev, W, bias, R, Y, M, N,
                         res);
}

cudaError_t eng_cu_chain_attn_o(cudaStream_t s, const eng_cu_attn_args *a, const int *n_rows_dev,
                                const int *n_seqs_dev, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y,
                                int M, int N, const eng_cu_chain_res *resp) {
    int w, kpw, kvw;
    const int K = a->n_heads * a->head_dim;
    const eng_cu_chain_res res = resp ? *resp : eng_cu_chain_res{NULL, NULL, NULL, NULL};
    if (!eng_cu_chain_attn_o_ok(a, M, N) || !n_rows_dev || !n_seqs_dev ||
        (((uintptr_t)W | (uintptr_t)bias | (uintptr_t)R) & 15) ||
        (res.stats && (eng_cu_attn_qkn(a) || !R || !res.gamma || !res.beta || !res.n_rows_dev ||
                       (((uintptr_t)res.gamma | (uintptr_t)res.beta) & 15) || ((uintptr_t)res.stats & 7))))
        return cudaErrorInvalidValue;
    ca_shape(a, K, &w, &kpw, &kvw);
    const bool causal = a->causal != 0, qkn = eng_cu_attn_qkn(a) != 0;
#define CA_GO(W_, G_, D_, KV_)                                                                                   \
    if (w == W_ && kpw == G_ && a->head_dim == D_ && kvw == KV_) {                                               \
        if (a->rel) /* MPNet: bidirectional without q/k norm (eng_cu_chain_attn_o_ok) */                       \
            return res.stats ? ca_launch<W_, G_, D_, KV_, false, false, true, true>(s, *a, n_rows_dev, n_seqs_dev, W, \
                                                                                   bias, R, Y, M, N, res)        \
                             : ca_launch<W_, G_, D_, KV_, false, false, false, true>(s, *a, n_rows_dev, n_seqs_dev, \
                                                                                    W, bias, R, Y, M, N, res);   \
        if (qkn && D_ == 128)                                                                                    \
            return causal ? ca_launch<W_, G_, D_, KV_, true, D_ == 128>(s, *a, n_rows_dev, n_seqs_dev, W, bias, \
                                                                       R, Y, M, N, res)                          \
                          : ca_launch<W_, G_, D_, KV_, false, D_ == 128>(s, *a, n_rows_dev, n_seqs_dev, W,      \
                                                                        bias, R, Y, M, N, res);                 \
        if (res.stats)                                                                                           \
            return causal ? ca_launch<W_, G_, D_, KV_, true, false, true>(s, *a, n_rows_dev, n_seqs_dev, W, bias, R, \
                                                                          Y, M, N, res)                          \
                          : ca_launch<W_, G_, D_, KV_, false, false, true>(s, *a, n_rows_dev, n_seqs_dev, W, bias, \
                                                                           R, Y, M, N, res);                     \
        return causal ? ca_launch<W_, G_, D_, KV_, true, false>(s, *a, n_rows_dev, n_seqs_dev, W, bias, R, Y, M, N, \
                                                                res)                                             \
                      : ca_launch<W_, G_, D_, KV_, false, false>(s, *a, n_rows_dev, n_seqs_dev, W, bias, R, Y, M, \
                                                                 N, res);                                       \
    }
    CA_SHAPES(CA_GO)
#undef CA_GO
    return cudaErrorInvalidValue;
}

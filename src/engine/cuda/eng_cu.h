/* eng_cu: the CUDA engine's kernels and their launchers, as one C++ header
 * shared by the shipped backend (eng_cu_backend.cu) and the labs in
 * dev/cuda/ (each lab links the same objects, never a copy).
 *
 * Conventions, for every kernel here:
 *  - activations and weights are bf16, row-major; arithmetic accumulates in
 *    fp32; LayerNorm/RMSNorm parameters, softmax and pooling are fp32;
 *  - a launch covers a whole token *bucket* (`rows`), because a CUDA graph
 *    fixes its grid; the real token / sequence counts are read from device
 *    memory (`n_rows_dev`, `n_seqs_dev`, `n_tiles_dev`) so one captured
 *    graph serves any batch that fits the bucket.  Rows past the real count
 *    are skipped (row kernels) or never read (attention, pooling);
 *  - every launcher returns the cudaError_t of its launch (cudaGetLastError)
 *    so callers check each one, also while a graph is being captured.
 */
#ifndef ENG_CU_H
#define ENG_CU_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>
#include <stdint.h>
#include "eng_cu_attn_tiles.h"
#include "eng_cu_bf16.h"
#include "eng_cu_order.h" /* the serpentine launch order (eng_cu_order.c) */

typedef __nv_bfloat16 bf16;

/* ---- launching ------------------------------------------------------------ */

/* Programmatic dependent launch (Hopper): when on, our kernels are launched
 * with programmatic stream serialization, so inside a graph a kernel's
 * launch can overlap its predecessor's tail; each of our kernels starts
 * with ENG_CU_PDL_WAIT (griddepcontrol.wait: blocks until the predecessor
 * has finished and its writes are visible -- a no-op when launched
 * normally) and then lets its own dependents launch early.  (The chain's
 * GEMM triggers before its wait, eng_cu_chain_gemm.cu.)  Triggering
 * before the wait in every kernel is safe -- no kernel writes before its
 * wait and every block reaches the wait -- and is built with
 * -DENG_CU_PDL_EARLY; on the H200 it made the one-query chain slower
 * (MiniLM 16 tokens 100 against 85 us, bench/results/h200-ab-2026-11-30-run1.*),
 * so it is not the default.  On for the one-query chain path
 * (eng_cu_model.cu), where every kernel is ours; for the rest only with
 * POSY_CUDA_PDL=1 (no gain where cuBLASLt's kernels sit between ours).
 * Per thread: the flag is set around one forward.
 * What a kernel may read before its wait: weights and norm parameters,
 * and the forward's input block (real counts, cu_seqlens, attention
 * tiles, pool skips), which the forward's first copy wrote before any of
 * its kernels started and no kernel writes.  The norm, attention, q/k
 * norm and pooling kernels read those first, so after the wait only the
 * activations remain on the chain's path. */
extern thread_local int eng_cu_pdl_on;

#ifndef ENG_CU_PDL_EARLY
#define ENG_CU_PDL_WAIT()                                                       \
    do {                                                                        \
        asm volatile("griddepcontrol.wait;\n" ::: "memory");                    \
        asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");       \
    } while (0)
#else
#define ENG_CU_PDL_WAIT()                                                       \
    do {                                                                        \
        asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");       \
        asm volatile("griddepcontrol.wait;\n" ::: "memory");                    \
    } while (0)
#endif

template <typename... KArgs, typename... Args>
static inline cudaError_t eng_cu_launch(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                        cudaStream_t s, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = eng_cu_pdl_on ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, ((KArgs)args)...);
}

/* ---- device helpers shared by the row-wise kernels ------------------------ */

#ifdef __CUDACC__
/* The index of `row` within its sequence: cu[s] <= row < cu[s + 1] (a
 * binary search of cu_seqlens in device memory, tiny and cached), so one
 * captured graph serves any batch (the q/k kernel, our GEMM's q/k
 * epilogue). */
static __device__ __forceinline__ int eng_cu_pos_in_seq(const int32_t *cu, int n_seqs, int row) {
    int lo = 0, hi = n_seqs - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) >> 1;
        if (cu[mid] <= row) lo = mid;
        else hi = mid - 1;
    }
    return row - cu[lo];
}

static __device__ __forceinline__ float eng_cu_warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

static __device__ __forceinline__ void eng_cu_load8(const bf16 *p, float *v) {
    uint4 u = *(const uint4 *)p;
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __bfloat1622float2(h[i]);
        v[2 * i] = f.x;
        v[2 * i + 1] = f.y;
    }
}

static __device__ __forceinline__ void eng_cu_store8(bf16 *p, const float *v) {
    uint4 u;
    __nv_bfloat162 *h = (__nv_bfloat162 *)&u;
#pragma unroll
    for (int i = 0; i < 4; i++) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    *(uint4 *)p = u;
}
/* LayerNorm of a row held by a warp in v (chunk i of a lane covers columns
 * (lane + 32 i) * 8 .. +7, MAXC chunks a lane), written as bf16 to out and,
 * when not NULL, to out2.  Two-pass statistics in fp32.  Shared by the norm
 * kernels (eng_cu_norm.cu) and the small-batch kernel (eng_cu_mega.cu). */
/* The row's mean and 1 / std (two passes over the registers), the same
 * operations in the same order wherever a norm kernel needs them, so their
 * results agree bit for bit. */
/* LPR < 32: a row held by LPR lanes (chunk i of lane l at (l % LPR + LPR i)
 * * 8), 32 / LPR rows a warp, the sums taken within each lane group. */
template <int LPR = 32>
static __device__ __forceinline__ float eng_cu_lanes_sum(float v) {
#pragma unroll
    for (int o = LPR / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
template <int MAXC, int LPR = 32>
static __device__ __forceinline__ void eng_cu_ln_stats(const float (*v)[8], int H, float eps, float &mean,
                                                       float &rstd) {
    const int sl = threadIdx.x & (LPR - 1), nc = H >> 3;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < MAXC; i++)
        if (sl + LPR * i < nc)
#pragma unroll
            for (int j = 0; j < 8; j++) s += v[i][j];
    mean = eng_cu_lanes_sum<LPR>(s) / (float)H;
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < MAXC; i++)
        if (sl + LPR * i < nc)
#pragma unroll
            for (int j = 0; j < 8; j++) { float d = v[i][j] - mean; q += d * d; }
    rstd = rsqrtf(eng_cu_lanes_sum<LPR>(q) / (float)H + eps);
}

template <int MAXC>
static __device__ __forceinline__ void eng_cu_ln_finish(float (*v)[8], int H, const float *gamma,
                                                        const float *beta, bf16 *out, float eps,
                                                        bf16 *out2 = NULL) {
    const int lane = threadIdx.x & 31, nc = H >> 3;
    float mean, rstd;
    eng_cu_ln_stats<MAXC>(v, H, eps, mean, rstd);
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = lane + 32 * i;
        if (c < nc) {
            float y[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                y[j] = (v[i][j] - mean) * rstd * gamma[c * 8 + j] + beta[c * 8 + j];
            eng_cu_store8(out + c * 8, y);
            if (out2) eng_cu_store8(out2 + c * 8, y);
        }
    }
}
#endif

/* ---- norms (eng_cu_norm.cu) --------------------------------------------- */

/* out[r] = LayerNorm(word[ids[r]] + pos[pos_ids[r]] + type[type_ids[r]]) for
 * r < *n_rows_dev.  `type` may be NULL (no token type embeddings).
 * eng_cu_embed_ln_rows (labs; -1: on unless POSY_CUDA_EMBLN_ROWS=0): 1 / 0
 * forces the row-walking kernel (H 256, 384, 512, 768, 1024; any bucket)
 * on / off; by default it takes buckets of 8192 rows and more
 * (POSY_CUDA_ROWS_WALK_MIN moves that floor). */
extern int eng_cu_embed_ln_rows;
cudaError_t eng_cu_embed_ln(cudaStream_t s, const int32_t *ids, const int32_t *pos_ids,
                            const int32_t *type_ids, const bf16 *word, const bf16 *pos,
                            const bf16 *type, const float *gamma, const float *beta, bf16 *out,
                            int rows, const int *n_rows_dev, int H, float eps);

/* out[r] = LayerNorm(x[r] + res[r]) (res may be NULL; out may alias res
 * or x).  eng_cu_add_ln_loop (labs; -1: on unless POSY_CUDA_ADDLN_LOOP=0):
 * 1 / 0 forces the row-walking kernel (H 256-1024, any bucket) on / off;
 * by default it takes buckets of 8192 rows and more. */
extern int eng_cu_add_ln_loop;
cudaError_t eng_cu_add_ln(cudaStream_t s, const bf16 *x, const bf16 *res, const float *gamma,
                          const float *beta, bf16 *out, int rows, const int *n_rows_dev, int H,
                          float eps);

/* Decoder form: if res != NULL, res[r] += x[r] (the residual stream is
 * updated in place) and out[r] = RMSNorm(res[r]) * gamma; else out[r] =
 * RMSNorm(x[r]) * gamma. */
cudaError_t eng_cu_add_rmsnorm(cudaStream_t s, const bf16 *x, bf16 *res, const float *gamma,
                               bf16 *out, int rows, const int *n_rows_dev, int H, float eps);

/* The LayerNorm statistics of rows from the OST partial sums of
 * eng_cu_ln_epi: stats[r] = (mu, rsqrt(var + eps)) of row r's H values
 * from parts[r * nparts ..] (sum, sum of squares) for r < *n_rows_dev,
 * (0, 0) past it up to `rows`. */
cudaError_t eng_cu_ln_stats(cudaStream_t s, const float2 *parts, int nparts, float2 *stats, int rows,
                            const int *n_rows_dev, int H, float eps);

/* rs[r] = rsqrt(mean(x[r]^2) + eps) for r < *n_rows_dev (add_rmsnorm's
 * value, summed in its order), 0 for the rows past it up to `rows`: the
 * row scale of a GEMM that takes x raw, its RMSNorm weights folded into
 * the matrix (eng_cu_gemm_wg_rows, eng_cu_gemm_wg_qk). */
cudaError_t eng_cu_rms_rows(cudaStream_t s, const bf16 *x, float *rs, int rows, const int *n_rows_dev, int H,
                            float eps);

/* Decoder embedding (Qwen3): x[r] = word[ids[r]] (the residual stream) and
 * out[r] = RMSNorm(x[r]) * gamma (the first layer's input norm) for r <
 * *n_rows_dev; the bucket's rows past it, up to `rows`, are zeroed in both,
 * so padded rows start every forward from the same finite values. */
cudaError_t eng_cu_embed_rmsnorm(cudaStream_t s, const int32_t *ids, const bf16 *word,
                                 const float *gamma, bf16 *x, bf16 *out, int rows,
                                 const int *n_rows_dev, int H, float eps);

/* ---- decoder kernels (eng_cu_decoder.cu) --------------------------------- */

/* Qwen3's per-head q/k RMSNorm and rotary embedding, in place on the
 * fused QKV rows (Q heads at column 0, K heads at n_heads*head_dim, V heads
 * after them, untouched):
 *   v = RMSNorm(head) * norm_w;  v'[i] = v[i] c - v[i+d/2] s,
 *   v'[i+d/2] = v[i+d/2] c + v[i] s  with (c, s) = rope[p][i]
 * where p is the token's index within its own sequence, found on the
 * device from cu_seqlens (so a captured graph serves any batch).  fp32
 * throughout, one bf16 rounding at the store. */
typedef struct eng_cu_qk_args {
    bf16 *qkv;
    int ld;                       /* row stride, elements: (n_heads + 2 n_kv_heads) head_dim */
    int n_heads, n_kv_heads;
    int head_dim;                 /* 32, 64, 128 or 256 */
    const float *q_norm, *k_norm; /* [head_dim] */
    float eps;
    const float *rope;            /* [rope_rows][head_dim/2][2]: cos, sin (eng_cu_q3_rope_table) */
    int rope_rows;
    const int32_t *cu_seqlens;    /* device, n_seqs + 1 */
    const int *n_seqs_dev;
    int rows;                     /* grid bound (bucket) */
    const int *n_rows_dev;        /* real token count */
} eng_cu_qk_args;

cudaError_t eng_cu_qk_norm_rope(cudaStream_t s, const eng_cu_qk_args *a);

/* SwiGLU over the gate|up GEMM result: out[r, j] = silu(gu[r, j]) *
 * gu[r, inter + j] for r < *n_rows_dev (gu rows of 2*inter, out rows of
 * inter; inter % 8 == 0; out must not alias gu). */
cudaError_t eng_cu_swiglu(cudaStream_t s, const bf16 *gu, bf16 *out, int rows,
                          const int *n_rows_dev, int inter);

/* ---- Gemma 3 / ModernBERT (eng_cu_glu.cu, eng_cu_decoder.cu) ----------- */

/* One row a block: r = x + (y, or RMSNorm(y) * post when post; nothing when
 * y is NULL); when write_x, x = r (or, norm_x, the normed row); when h,
 * h = norm(r): RMSNorm(r) * g (ln 0) or LayerNorm(r) * g + b (ln 1, b
 * optional), or r itself when g is NULL.  Rows >= *n_rows_dev are written
 * as zeros.  x may be updated in place; y and h must not alias x. */
typedef struct eng_cu_glu_norm_args {
    bf16 *x;                      /* [rows, H] the residual stream */
    const bf16 *y;                /* [rows, H] or NULL */
    const float *post;            /* [H] or NULL (Gemma 3's post-attention / post-MLP norm) */
    bf16 *h;                      /* [rows, H] or NULL */
    const float *g, *b;           /* [H]; g NULL: h = r */
    int ln;                       /* 0 RMSNorm, 1 LayerNorm */
    int write_x, norm_x;
    float eps;
    int rows, H;
    const int *n_rows_dev;
} eng_cu_glu_norm_args;
cudaError_t eng_cu_glu_norm(cudaStream_t s, const eng_cu_glu_norm_args *a);

/* x[r] = word[ids[r]] * scale for r < *n_rows_dev, zeros past it. */
cudaError_t eng_cu_glu_embed(cudaStream_t s, const int32_t *ids, const bf16 *word, float scale, bf16 *x, int rows,
                             const int *n_rows_dev, int H);

/* The gated MLP's activation over the gate|up product (gu rows of 2 inter,
 * out rows of inter): act(gate) * up, act SiLU (= eng_cu_swiglu), GELU
 * tanh form or GELU erf form (eng_cu_decoder.cu, the SwiGLU kernel). */
enum { ENG_CU_GLU_SILU = 0, ENG_CU_GLU_GELU_TANH = 1, ENG_CU_GLU_GELU_ERF = 2 };
cudaError_t eng_cu_glu_act(cudaStream_t s, const bf16 *gu, bf16 *out, int rows, const int *n_rows_dev, int inter,
                           int act);

/* ---- attention (eng_cu_attn.cu) ----------------------------------------- */


typedef struct eng_cu_attn_args {
    const bf16 *q, *k, *v;        /* row t of head h at q + t*ldq + h*head_dim */
    int ldq, ldk, ldv;            /* row strides, elements */
    bf16 *o;                      /* [tokens, n_heads*head_dim] with stride ldo */
    int ldo;
    int n_heads, n_kv_heads;      /* grouped-query: q head h reads kv head h/(n_heads/n_kv_heads) */
    int head_dim;                 /* 32, 64, 128; 256 and windows: eng_cu_attention_win */
    const int32_t *cu_seqlens;    /* device, n_seqs+1 */
    const int32_t *tiles;         /* device, pairs (seq, q0) */
    const int *n_tiles_dev;       /* device, real tile count */
    int max_tiles;                /* grid size (bucket bound) */
    float scale;                  /* softmax scale, usually 1/sqrt(head_dim) */
    int causal;
    int version;                  /* 0 = the shipped kernel (eng_cu_attn_version); 1..10 (labs) */
    /* Qwen3 only; v2, v3, v6, v7 (v1 refuses it, v8 and v9 run v2 for
     * it): when q_norm != NULL, Q and K arrive raw and the kernel applies
     * eng_cu_qk_norm_rope's per-head RMSNorm (q_norm / k_norm weights,
     * qk_eps) and rotary embedding (rope table of rope_rows positions) to
     * each tile as it lands.  The one-query chain does this with v2; for
     * throughput it is opt-in (eng_cu_attn_fuses_qk).
     * rope_only (Qwen2, Mistral, Llama: no q/k norm): with q_norm and
     * k_norm NULL, the same kernels apply the rotary alone to each tile
     * (eng_cu_attn_qkn says whether either form is asked). */
    const float *q_norm, *k_norm, *rope;
    int rope_rows;
    float qk_eps;
    int rope_only;
    /* device, two ints at 0 between launches, or NULL: version 10's
     * dynamic schedule (the default at head size 128, POSY_CUDA_ATTN_DYN
     * = 1 / 0 on / off everywhere; eng_cu_attn_wg.cu) takes its
     * work items from them, and its last block zeroes them again.  One
     * pair serves the launches of one stream in turn, never two at once */
    int *work;
    /* walk the tile list last to first (eng_cu_order_take; the launcher
     * sets it, so callers leave it 0) */
    int rev;
    /* MPNet's relative position bias, or NULL: device table of n_heads
     * rows of eng_relpos_span(rel_max) floats (eng_relpos.h's layout),
     * holding bias / scale; every sequence at most rel_max tokens.  Only
     * versions 2 and 10 add it (v10 in its static grid, one or two
     * stages): with rel set, 10 runs as 10 (v2 off Hopper) and every other
     * version asked for runs v2; no q/k norm with it */
    const float *rel;
    int rel_max;
    /* > 0: a query sees only keys with |query - key| < window (Gemma 3's
     * and ModernBERT's sliding layers); 0: every key.  A window, or head
     * size 256, runs eng_cu_attention_win whatever the version */
    int window;
} eng_cu_attn_args;

/* The version `version = 0` runs for a head size: POSY_CUDA_ATTN when it
 * names 2-10 (3 persistent, eng_cu_attn_v3.cu; 10 both products as wgmma,
 * eng_cu_attn_wg.cu, sm_90 only); else 10 on Hopper, elsewhere 9 at head
 * size 128, 5 at 32 and 2 at 64 -- and 2 for the one-query chain (chain
 * != 0; eng_cu_model_attn_o asks for it).  Version 10 runs v2 for a
 * launch with the q/k norm fused, or off Hopper.  What each version measured:
 * eng_cu_attn.cu's header, docs/BENCHMARKS.md, dev/cuda/NOTES.md. */
int eng_cu_attn_version(int head_dim, int chain);
/* Whether the attention kernel for this head size also does Qwen3's q/k
 * norm + rotary off the chain: POSY_CUDA_QK_FUSE=1 (v2, v3, v6, v7; measured
 * no faster than the separate kernel); the forward then skips
 * eng_cu_qk_norm_rope. */
int eng_cu_attn_fuses_qk(int head_dim);
/* Whether a launch transforms Q and K tiles as they land: Qwen3's q/k
 * norm + rotary (q_norm set) or the rotary alone (rope_only). */
static inline int eng_cu_attn_qkn(const eng_cu_attn_args *a) { return a->q_norm != NULL || a->rope_only; }
cudaError_t eng_cu_attention_v3(cudaStream_t s, const eng_cu_attn_args *a);
/* Version 10 (eng_cu_attn_wg.cu): both products as wgmma, sm_90 only, no
 * q/k norm; the default off the one-query chain on Hopper.
 * eng_cu_attn_wg_stages (labs; POSY_CUDA_ATTN_WG in the engine): 1 or 2
 * K / V stages, or 3 persistent blocks, instead of the default for the
 * head size (0). */
cudaError_t eng_cu_attention_wg(cudaStream_t s, const eng_cu_attn_args *a);
extern int eng_cu_attn_wg_stages;
/* Version 10's one- and two-stage grids are capped at about this many
 * GPU-fulls of blocks, each block walking several query tiles:
 * ENG_CU_ATTN_WAVES for head sizes up to 64, none at 128 (0 = no cap: a
 * block a tile of the bucket's bound), or POSY_CUDA_ATTN_WAVES for every
 * head size; eng_cu_attn_wg_waves >= 0 (labs) overrides both, and
 * eng_cu_attn_wg_max_x > 0 caps the grid's x (query tiles) further, so a
 * small lab case still walks several tiles a block.  H200, 2026-12-03 run
 * 2, saturated steps at 65536 tokens, 4 against no cap: MiniLM 1.031 /
 * 0.999x, BERT-base 1.008 / 0.998x (equal 128 / random 16-512); Qwen3
 * (d = 128) 1.004 / 0.998x, and long causal sequences lost 4% of their
 * attention in the lab (static striding over unequal tiles), so not there. */
#ifndef ENG_CU_ATTN_WAVES
#define ENG_CU_ATTN_WAVES 4
#endif
extern int eng_cu_attn_wg_waves;
extern int eng_cu_attn_wg_max_x;
/* labs: 1 / 0 forces version 10's dynamic schedule on / off where a.work
 * is given (-1: POSY_CUDA_ATTN_DYN) */
extern int eng_cu_attn_wg_dyn;
/* labs: 1 / 0 forces version 10's static head-fastest walk on / off
 * where the dynamic schedule is not taken (-1: POSY_CUDA_ATTN_HF=1 on) */
extern int eng_cu_attn_wg_hf;
/* labs: > 0 caps the persistent form's grid (eng_cu_attn_wg_stages = 3),
 * so a small case still walks several items a block */
extern int eng_cu_attn_wgp_max_blocks;

/* the tile list: eng_cu_attn_tiles.h (included above) */

cudaError_t eng_cu_attention(cudaStream_t s, const eng_cu_attn_args *a);
/* The windowed / head-size-256 kernel (eng_cu_attn_win.cu): head sizes 32,
 * 64, 128, 256; no fused q/k norm, rotary or relative bias. */
cudaError_t eng_cu_attention_win(cudaStream_t s, const eng_cu_attn_args *a);

/* ---- DeBERTa's disentangled attention (eng_cu_deberta.cu) ---------------- */

/* Non-causal attention with DeBERTa's position terms (eng_deberta.h):
 * softmax(scale (q.k + q.kr[c] + k.qr[c])) v per head, c = idx[(max_len -
 * 1) + query - key] (positions in the sequence), scale_log2 = log2(e) /
 * sqrt(head_dim * (1 + number of position terms)); kr / qr the layer's
 * projections of the relative table [2 span][H] fp32 (NULL: that term
 * off).  Tiles of 64 query rows from the attention tile list (seq, q0
 * pairs, *n_tiles real ones, grid max_tiles).  Head sizes 32, 64, 128. */
typedef struct eng_cu_deb_args {
    const bf16 *q, *k, *v;
    int ldq, ldk, ldv;
    bf16 *o;
    int ldo;
    int n_heads, head_dim, H;
    const int32_t *cu_seqlens, *tiles;
    const int *n_tiles;
    int max_tiles;
    const float *kr, *qr;
    /* the same tables as bf16 pairs, hi = bf16(x), lo = bf16(x - hi), for
     * the tensor-core form (head size 64): two products a term keep the
     * tables' fp32 precision (the default; POSY_CUDA_DEBERTA_TC=0 leaves them NULL); NULL: the
     * CUDA-core form on the fp32 tables */
    const bf16 *krh, *krl, *qrh, *qrl;
    const int *idx;
    int max_len;
    float scale_log2;
} eng_cu_deb_args;
cudaError_t eng_cu_deberta_attention(cudaStream_t s, const eng_cu_deb_args *a);
/* At open: C[M][N] = A[M][K] (fp32, row stride lda) B[N][K]^T (bf16, row
 * stride ldb) + bias (bf16, or NULL), fp32 out with row stride ldc; and
 * fp32 rows LayerNormed in place */
cudaError_t eng_cu_deberta_gemm_f32_bf16(cudaStream_t s, const float *A, int lda, const bf16 *B, int ldb,
                                         const bf16 *bias, float *C, int ldc, int M, int N, int K);
cudaError_t eng_cu_deberta_ln_rows(cudaStream_t s, float *x, const float *g, const float *b, int rows, int H,
                                   float eps);
/* hi[i] = bf16(x[i]), lo[i] = bf16(x[i] - hi[i]) for n floats */
cudaError_t eng_cu_deberta_split(cudaStream_t s, const float *x, bf16 *hi, bf16 *lo, size_t n);

/* ---- pooling (eng_cu_pool.cu) ------------------------------------------- */

/* SPLADE's fold (eng_cu_splade.cu): rows [c0, c0 + rows) of the step's
 * tokens (those below *n_tok), their logits [rows][ld] bf16, folded into
 * out[seq][0 .. V) by max (or sum) of log1p(relu(x)) -- log1p twice with
 * log2 -- the sequences from cu / *n_seq.  out must start at zero. */
cudaError_t eng_cu_splade_fold(cudaStream_t s, const bf16 *logits, int ld, int rows, int c0, const int *n_tok,
                               const int32_t *cu, const int *n_seq, int V, float *out, int sum, int log2);

enum { ENG_CU_POOL_MEAN = 0, ENG_CU_POOL_CLS = 1, ENG_CU_POOL_LAST = 2 };

/* out[s, 0..dims) = pool(x rows of sequence s)[0..dims), L2-normalised over
 * those dims when `normalize` (Matryoshka truncation: dims < H).  fp32 out,
 * for s < *n_seqs_dev; grid covers max_seqs.  skip (device, per sequence;
 * NULL: none) leaves that many leading rows out first, as the CPU's
 * eng_cpu_pool: mean and CLS start after them, last-token is unaffected;
 * 0 <= skip < length (the engine validated it). */
cudaError_t eng_cu_pool(cudaStream_t s, const bf16 *x, const int32_t *cu_seqlens, const int32_t *skip,
                        const int *n_seqs_dev, int max_seqs, int H, int dims, int mode,
                        int normalize, float *out);

/* The last norm and the pooling in one kernel (eng_cu_ln_pool.cu): out as
 * eng_cu_pool's, over the rows LayerNorm(x[r]) * gamma + beta, or with
 * beta NULL RMSNorm(x[r]) * gamma; only the rows the mode pools are
 * normalised, and they are not rounded to bf16 on the way.  H 256, 384,
 * 512, 768, 1024 (else cudaErrorNotSupported: take eng_cu_add_ln or
 * eng_cu_add_rmsnorm, then eng_cu_pool).  eng_cu_ln_pool_usable(H): the
 * kernel takes H and is on -- eng_cu_ln_pool_on (labs: 1 on, 0 off), else
 * unless POSY_CUDA_LN_POOL=0. */
extern int eng_cu_ln_pool_on;
bool eng_cu_ln_pool_usable(int H);
cudaError_t eng_cu_ln_pool(cudaStream_t s, const bf16 *x, const float *gamma, const float *beta,
                           const int32_t *cu_seqlens, const int32_t *skip, const int *n_seqs_dev, int max_seqs,
                           int H, int dims, int mode, int normalize, float eps, float *out);

/* ---- GEMM through cuBLASLt (eng_cu_gemm.cu) ------------------------------ */

/* ENG_CU_EPI_SWIGLU: the chain kernel and our GEMM only (eng_cu_gemm_chain,
 * eng_cu_gemm_wg_v): W's N rows are gate | up halves, Y[M, N/2] =
 * silu(gate) * up.  ENG_CU_EPI_GEGLU_TANH / _ERF: the same with GELU (tanh
 * form: Gemma 3's gelu_pytorch_tanh; erf form: ModernBERT's "gelu") for
 * the gate, in our GEMM's versions 3 and 4 only.  ENG_CU_EPI_GATED: one
 * of the three (the gate|up layout). */
enum {
    ENG_CU_EPI_NONE = 0,
    ENG_CU_EPI_BIAS = 1,
    ENG_CU_EPI_BIAS_GELU = 2,
    ENG_CU_EPI_SWIGLU = 3,
    ENG_CU_EPI_GEGLU_TANH = 4,
    ENG_CU_EPI_GEGLU_ERF = 5
};
#define ENG_CU_EPI_GATED(e) \
    ((e) == ENG_CU_EPI_SWIGLU || (e) == ENG_CU_EPI_GEGLU_TANH || (e) == ENG_CU_EPI_GEGLU_ERF)

typedef struct eng_cu_gemm_ctx eng_cu_gemm_ctx;

/* One cuBLASLt handle, one workspace, and a cache of (M,N,K,epilogue) ->
 * descriptors + algorithm, filled the first time a shape is seen (so the
 * choice is made once, outside any graph capture if the caller warms up). */
eng_cu_gemm_ctx *eng_cu_gemm_create(size_t workspace_bytes, char *err, size_t errlen);
void eng_cu_gemm_destroy(eng_cu_gemm_ctx *g);

/* Y[M,N] = epi(X[M,K] W[N,K]^T + bias[N]) (+ R[M,N] if R != NULL) --
 * nn.Linear layout, bf16 in/out, fp32 accumulate.  The GELU epilogue is
 * cuBLASLt's (tanh form); R is added after it.  Returns 0, or -1 with a
 * message in err. */
int eng_cu_gemm(eng_cu_gemm_ctx *g, cudaStream_t s, const bf16 *X, const bf16 *W,
                const bf16 *bias, const bf16 *R, bf16 *Y, int M, int N, int K, int epi, char *err,
                size_t errlen);

/* Time the heuristic candidates at a shape's first call (default off). */
void eng_cu_gemm_set_tuning(eng_cu_gemm_ctx *g, int on);
/* With tuning on, also race our own kernel (eng_cu_gemm_wg_v) where it
 * takes the shape, in each version whose bit (1 << version) is set in
 * versions (default 0: none; the engine races 3 and 4 on sm_90 unless
 * POSY_CUDA_WGMMA=0). */
void eng_cu_gemm_set_own(eng_cu_gemm_ctx *g, int versions);

/* Our own Hopper GEMM for large M (eng_cu_wgmma.cu): the same product as
 * eng_cu_gemm, plus ENG_CU_EPI_SWIGLU (W's N rows are gate | up halves,
 * Y is [M, N/2] = silu(gate) * up; R must be NULL), which cuBLASLt lacks.
 * _available: an sm_90 device and the driver's tensor-map encoder (looked
 * up once); _ok: that, and N % 128 == 0 (SwiGLU: N/2 % 64), K % 64 == 0.
 * X and W 16-byte aligned; bias, R and Y 4-byte aligned. */
int eng_cu_gemm_wg_available(void);
/* 1: one 128 x 128 tile a CTA, two CTAs an SM; 2: persistent, one CTA an
 * SM, tiles of 128 x (256 | 192 | 128) by N; 3 (default): 2 with the
 * output tile stored by TMA from shared memory; 4: 3 through two 64-column
 * image buffers (a deeper ring); 5: ping-pong, each consumer warpgroup its
 * own 128 x 128 tiles (experiment); 6: W resident (eng_cu_gemm_wres, short
 * K, no residual).  Labs set it;
 * POSY_CUDA_WG_VERSION=N at engine open, for experiments. */
extern int eng_cu_wg_version;
/* lab only: 0x200 makes the kernels with their own RMS row scales
 * (eng_cu_row_norm) skip the statistics' loads (every scale 1; timing) */
extern int eng_cu_wg_lab_flags;
int eng_cu_gemm_wg_ok(int M, int N, int K, int epi);
cudaError_t eng_cu_gemm_wg(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y,
                           int M, int N, int K, int epi);
/* the same in a given version (1..6), whatever eng_cu_wg_version says;
 * 6 is eng_cu_gemm_wres (below): no residual, short K */
cudaError_t eng_cu_gemm_wg_v(int version, cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias,
                             const bf16 *R, bf16 *Y, int M, int N, int K, int epi);
/* The RMSNorm row scale computed by the GEMM that uses it
 * (eng_cu_gemm_wg_qk / eng_cu_gemm_wg_rows with rs == NULL and this set,
 * version 3 or 4): rs[r] = rsqrt(mean over K of X[r]^2 + eps) for r <
 * *n_rows_dev, 0 past it, summed from the X slices already in shared
 * memory by the producer warpgroup's spare warps -- eng_cu_rms_rows'
 * value (in another summation order) without its pass over X. */
typedef struct eng_cu_row_norm {
    const int *n_rows_dev;
    float eps;
} eng_cu_row_norm;

/* Qwen3's QKV product with the per-head q/k RMSNorm + rotary in the
 * epilogue (Y = eng_cu_qk_norm_rope applied to X W^T, from the fp32 sums)
 * in version 3 (even head counts) or 5: head_dim 128, N = (n_heads +
 * 2 n_kv_heads) 128 = qk->ld, no bias; qk's qkv / rows / n_rows_dev are
 * not used.
 * rs (may be NULL): every row of X W^T scaled by rs[row] first (X's
 * RMSNorm, eng_cu_rms_rows, with its weights folded into W); or, rs NULL
 * and rn set (version 3 only), by the scale the kernel computes itself.
 * _ok says whether it takes the shape (and the device has it). */
int eng_cu_gemm_wg_qk_ok(int version, int M, int N, int K, const eng_cu_qk_args *qk);
cudaError_t eng_cu_gemm_wg_qk(int version, cudaStream_t s, const bf16 *X, const bf16 *W, bf16 *Y, int M, int N,
                              int K, const eng_cu_qk_args *qk, const float *rs, const eng_cu_row_norm *rn);
/* eng_cu_gemm_wg_v's SwiGLU (epi must be ENG_CU_EPI_SWIGLU, versions 3-5)
 * with the gate and up sums of row r scaled by rs[r] before the bias --
 * or, rs NULL and rn set (versions 3 and 4), by the kernel's own RMS
 * row scale of X (eng_cu_row_norm). */
cudaError_t eng_cu_gemm_wg_rows(int v, cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, bf16 *Y,
                                int M, int N, int K, int epi, const float *rs, const eng_cu_row_norm *rn);
/* LayerNorm by row statistics in our GEMM's epilogue (the encoders'
 * graph path, POSY_CUDA_LN_ROWS): a LayerNorm y -> (y - mu) rs g + beta is
 * never written out; the GEMMs take y raw and apply it.
 *   a_stats (LNA; with a_colsum): X is a raw y whose rows' (mu, rs) these
 *     are, W' = W diag(g) and the bias b + W beta are folded at load, and
 *     out = rs (X W'^T - mu colsum(W')) + bias' -- the product of the
 *     normed rows, without them;
 *   r_stats (LNR; with r_gamma, r_beta): the residual R is a raw y and
 *     adds (R - mu) rs g + beta, its normed value;
 *   o_stats (OST): per output row and 64-column chunk c, (sum, sum of
 *     squares) of the stored bf16 outputs into o_stats[row * N/64 + c],
 *     for eng_cu_ln_stats.
 * Rows at or past a statistic's real count have rs = 0 there. */
typedef struct eng_cu_ln_epi {
    const float2 *a_stats;
    const float *a_colsum;
    const float2 *r_stats;
    const float *r_gamma, *r_beta;
    float2 *o_stats;
} eng_cu_ln_epi;
/* eng_cu_gemm_wg_v (versions 3 and 4, epi bias or bias + GELU) with the
 * ln epilogue: LNA alone (no residual), or OST with or without LNR (a
 * residual R required), N % 64 == 0. */
cudaError_t eng_cu_gemm_wg_ln(int version, cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias,
                              const bf16 *R, bf16 *Y, int M, int N, int K, int epi, const eng_cu_ln_epi *ln);
/* Y = X W^T + b (GELU optional; epi none, bias or bias + GELU, no
 * residual) with each CTA's block of W's rows (192 or 128) resident in
 * shared memory and only X streaming (eng_cu_gemm_wres.cu): sm_90, K %
 * 64 == 0 and K <= 384 (block of 192) or 640 (128).  Our GEMM's version 6. */
int eng_cu_gemm_wres_ok(int M, int N, int K, int epi);
cudaError_t eng_cu_gemm_wres(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, bf16 *Y, int M, int N,
                             int K, int epi);
/* Y = LayerNorm(X W^T + bias (+ R)) by rows of N, gamma / beta fp32,
 * the norm on the fp32 sums (eng_cu_gemm_rowln.cu): sm_90, N 256 or 384
 * (tiles hold whole rows), K % 64 == 0, bias required, R may be NULL;
 * every row < M is written.  _ok says whether it runs for the shape. */
int eng_cu_gemm_wg_rowln_ok(int M, int N, int K);
cudaError_t eng_cu_gemm_wg_rowln(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                                 const float *gamma, const float *beta, float eps, bf16 *Y, int M, int N, int K);
/* The same with W resident in shared memory, half in each CTA of a
 * cluster of two (eng_cu_gemm_rowln_res.cu): where _ok says so (W's half
 * fits beside the ring: K <= 384 at N = 384), eng_cu_gemm_wg_rowln runs
 * this.  eng_cu_rl_res_on: labs 1 on, 0 off; -1 (default) on unless
 * POSY_CUDA_RL_RES=0. */
extern int eng_cu_rl_res_on;
int eng_cu_gemm_wg_rowln_res_ok(int M, int N, int K);
cudaError_t eng_cu_gemm_wg_rowln_res(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                                     const float *gamma, const float *beta, float eps, bf16 *Y, int M, int N, int K);
/* Lab only: version 3 (4 where eng_cu_wg_version is 4) with clock64 counters, ENG_CU_WG_PROF_SLOTS per CTA
 * in prof (for consumer warpgroup w at 6w: cycles waiting for data, for
 * its wgmma group, in the epilogue, in all, in the epilogue's waits,
 * writing the output image; at 12 / 13: the producer's cycles waiting for
 * a free slot, in all);
 * no_epilogue: the products alone, nothing stored (an ablation); epi
 * none, bias or SwiGLU and R NULL; *ctas: how many CTAs ran. */
#define ENG_CU_WG_PROF_SLOTS 14
cudaError_t eng_cu_gemm_wg_profile(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                                   bf16 *Y, int M, int N, int K, int epi, int no_epilogue, unsigned long long *prof,
                                   int *ctas);

/* The same product for few rows (eng_cu_skinny.cu): M <= 64, N % 16 == 0,
 * K/16 divisible by the kernel's warp count (eng_cu_gemm_small_ok).  Not
 * used by the engine by default (it wins alone but made the whole one-query
 * graph slower on the H200); POSY_CUDA_SKINNY=1 races it at tuning. */
int eng_cu_gemm_small_ok(int M, int N, int K);
/* Which skinny kernel eng_cu_gemm_small runs: 1, or 2 (deep weight
 * prefetch; POSY_CUDA_SKINNY=2 at engine open, labs set it directly). */
extern int eng_cu_skinny_version;
cudaError_t eng_cu_gemm_small(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias,
                              const bf16 *R, bf16 *Y, int M, int N, int K, int epi);

/* Version 3 of the skinny kernel (eng_cu_chain_gemm.cu), for the
 * one-query chain (all kernels ours, launched with PDL): the weight slice
 * is requested before griddepcontrol.wait, so it streams while the
 * predecessor runs.  Launched through eng_cu_launch (PDL when
 * eng_cu_pdl_on).  ok: M <= 64, N % 16 == 0,
 * K = 64 x {4,6,8 warps} x G with G in {1,2,3,4,6}; with a norm (norm = 1),
 * also (M tiles: 1, 2 or 4) x G <= 4 (so K <= 1024 up to 32 rows); with
 * the RMS fold (norm = 2), M <= 32; with the LayerNorm fold (norm = 3), K <= 1024
 * at 6 / 8 warps (at most 2 groups a warp).
 * nm (optional): X is first normalised row-wise -- LayerNorm (gamma, beta)
 * or RMSNorm (beta NULL), rows at or past *n_rows_dev as zero -- and, if
 * out != NULL, the normalised [M, K] rows are also stored there (the
 * residual a post-norm encoder needs later).  X, W, bias, R and out must
 * be 16-byte aligned.  epi may be ENG_CU_EPI_SWIGLU (R NULL; Y is
 * [M, N/2]). */
typedef struct eng_cu_chain_norm {
    const float *gamma, *beta;
    float eps;
    const int *n_rows_dev;
    bf16 *out;
    /* 1: the RMS fold instead of the prologue -- X is used raw, gamma,
     * beta and out must be NULL (RMSNorm's weights are already folded into
     * W's columns), and output row r is scaled by rsqrt(mean_k x[r][k]^2 +
     * eps) before the bias, rows at or past *n_rows_dev by 0; the row sums
     * of squares come from the tensor cores (the diagonal of X X^T).  At
     * most 32 rows.
     * 2: the LayerNorm fold (encoders) -- X raw as for 1, LayerNorm's gamma
     * folded into W's columns at load and W beta into the bias, so output
     * (r, n) is rs_r (acc - mu_r colsum[n]) + bias[n], with mu_r and rs_r =
     * rsqrt(var_r + eps) from the row's sum (X against ones) and sum of
     * squares (the diagonal of X X^T) on the tensor cores, colsum the
     * column sums of the folded W; rows at or past *n_rows_dev read as
     * zero and get rs = mu = 0.  Block 0 stores each row's (mu, rs) in
     * stats_out (M entries), the post-norm residual of a later GEMM
     * (eng_cu_chain_res).  K <= 1024 at 6 / 8 warps, at most 64 rows, not
     * with SwiGLU. */
    int fold;
    const float *colsum;
    float2 *stats_out;
} eng_cu_chain_norm;
/* norm: 0 plain, 1 the prologue, 2 the RMS fold, 3 the LayerNorm fold */
int eng_cu_gemm_chain_ok(int M, int N, int K, int norm);
/* The residual as a LayerNorm of a raw row (the LayerNorm fold's post-norm
 * residual): R[r][n] enters the epilogue as (R[r][n] - mu_r) rs_r
 * gamma[n] + beta[n], (mu_r, rs_r) = stats[r] as the fold stored them, and
 * as 0 at or past *n_rows_dev (the norm kernels zero those rows). */
typedef struct eng_cu_chain_res {
    const float2 *stats;
    const float *gamma, *beta;
    const int *n_rows_dev;
} eng_cu_chain_res;
/* How the chain kernel fetches its weight slice: 1 (default) one bulk copy
 * (TMA) a row, completing on an mbarrier; 0 16-byte cp.async by every
 * thread (POSY_CUDA_CHAIN_BULK=0 at engine open; labs set it directly). */
extern int eng_cu_chain_bulk;
/* The chain kernel's columns a block: 0 (default) 32 where N >= 2048, the
 * launch is built for it (K <= 1024, at most 32 rows, no norm prologue or
 * LayerNorm residual) and its N / 32 blocks fit the GPU in one wave, else
 * 16; 16 always 16; 32 wherever it is built (POSY_CUDA_CHAIN_NC at engine
 * open; labs set it directly).  last_nc: what this thread's last
 * eng_cu_gemm_chain launch used (the labs' check). */
extern int eng_cu_chain_nc;
/* 1: the chain's down projections (K = 3072 at 8 warps) ask for 116 KB
 * of shared memory, one block an SM whatever their registers
 * (POSY_CUDA_CHAIN_DOWN_FLOOR=1 at engine open; an experiment). */
extern int eng_cu_chain_down_floor;
extern thread_local int eng_cu_chain_last_nc;
/* When a chain kernel (GEMM, attention + O) lets its dependents launch: 0
 * (default) at its start, so the next kernel's blocks sit resident and
 * stream their weights through this one; 1 after its own wait, so at most
 * one kernel waits ahead (POSY_CUDA_CHAIN_TRIGGER, per GEMM role; the
 * model sets it around each launch, per thread like eng_cu_pdl_on). */
extern thread_local int eng_cu_chain_late;
/* pf (optional): pf_bytes of weights a later GEMM of the forward needs,
 * which the blocks request into L2 (cp.async.bulk.prefetch, each block an
 * equal share) before their wait, so that GEMM's slices come from L2. */
/* res (optional, with R): R as the LayerNorm of its raw rows.
 * wp (optional): the same W with its rows eng_cu_chain_wpad(K) elements
 * longer (the kernel's shared-memory layout; the padding is never read),
 * used for M <= 16 with bulk copies: a block's slice is then one
 * contiguous run, fetched by one bulk copy (two with SwiGLU) instead of
 * one a row -- on the H200 (dev/cuda/lab_stream.cu) such slices land
 * 8-15% sooner and thread 0 issues them in 0.26 us instead of 0.8-1.6;
 * ignored for more rows (see eng_cu_model.h, chain_padw). */
cudaError_t eng_cu_gemm_chain(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                              bf16 *Y, int M, int N, int K, int epi, const eng_cu_chain_norm *nm,
                              const void *pf = NULL, size_t pf_bytes = 0, const eng_cu_chain_res *res = NULL,
                              const bf16 *wp = NULL);
/* the padding (elements a row) wp must carry for K: the chain kernel's
 * shared-memory row padding at one m tile; 0 where K is not a chain K */
int eng_cu_chain_wpad(int K);

/* The QKV GEMM's attention tail (eng_cu_chain_gemm.cu, ATT): when set
 * around an eng_cu_gemm_chain call that makes Qwen3's Q|K|V (Y), the
 * launch also computes attention(Y) into a.o -- a.q / a.k / a.v must be
 * Y's Q, K and V columns.  The blocks of one K/V head's group (its query
 * heads' Q columns, its K and its V) count themselves on counters[group]
 * as they finish; the group's lead block waits for them and computes the
 * group's attention (q/k norm + rotary as the chain's attention kernel
 * applies them, causal or not, rows of several sequences within their own)
 * and stores it, rows at or past the real count as zeros -- so the forward
 * needs no attention node.  counters: device, n_kv_heads unsigned, zero at
 * first; the lead sets its group's back to 0.  n_seqs_dev: the real sequence
 * count (device).  ok (eng_cu_chain_att_ok): M <= 16, head size 128 with
 * the q/k norm, K = 1024 (8 warps of 2 groups), blocks of 32 columns --
 * Qwen3-0.6B's shape; eng_cu_gemm_chain returns cudaErrorNotSupported,
 * launching nothing, when the launch it would make cannot carry the tail,
 * and the caller then runs attention as its own kernel. */
typedef struct eng_cu_chain_att {
    eng_cu_attn_args a;
    const int *n_seqs_dev;
    unsigned *counters;
} eng_cu_chain_att;
extern thread_local const eng_cu_chain_att *eng_cu_chain_att_next;
int eng_cu_chain_att_ok(const eng_cu_attn_args *a, int M, int N, int K);

/* The chain's attention + O projection in one kernel
 * (eng_cu_chain_attn.cu): Y[M, N] = attention(a) Wo^T (+ bias) (+ R), for
 * buckets of M <= 16 rows, the attention as eng_cu_attention computes it
 * (a.o, a.tiles and a.version unused; a.q_norm: Qwen3's q/k norm + rotary
 * as the chain's v2 applies it).  n_rows_dev / n_seqs_dev: the real token
 * and sequence counts (device); rows of several sequences attend within
 * their own (cu_seqlens).  ok: a head size and K = heads x head_dim that
 * the kernel is built for (all-MiniLM, BERT-base and -large, Qwen3-0.6B),
 * N % 16 == 0, 16-byte aligned rows.  Launched through eng_cu_launch. */
int eng_cu_chain_attn_o_ok(const eng_cu_attn_args *a, int M, int N);
cudaError_t eng_cu_chain_attn_o(cudaStream_t s, const eng_cu_attn_args *a, const int *n_rows_dev,
                                const int *n_seqs_dev, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y,
                                int M, int N, const eng_cu_chain_res *res = NULL);
/* Non-zero (the default): eng_cu_chain_attn_o gives each warp one head
 * where it is built for the shape (head sizes 32 and 64, 12 heads: 12
 * warps for all-MiniLM and BERT-base) instead of the chain GEMM's split
 * (two heads a warp, walked in turn), halving the serial attention part
 * of the node.  On the H200 (2026-12-03 run 19) all-MiniLM's 16-token
 * query 70.4 -> 65.0 us, and BERT-base's, which it puts on attention
 * inside O (eng_cu_model.h, chain_attn), 201.3 -> 188.8.
 * POSY_CUDA_CHAIN_ATTN_WH=0 at engine open turns it off.
 * eng_cu_chain_attn_o_one_head: whether a's shape takes that split. */
extern int eng_cu_chain_attn_wh;
int eng_cu_chain_attn_o_one_head(const eng_cu_attn_args *a);

/* A layer's whole MLP as one chain launch (eng_cu_chain_ffn.cu).
 * Qwen3 (ln NULL, glu): Y = X + W_down (silu(rs Wg X) * (rs Wu X)), rs =
 * rsqrt(mean(x^2) + eps) per row (the RMS fold: the norm's weights are
 * already in Wg | Wu).  Encoders (ln set): Y = W_down gelu(rs (Wf X - mu
 * colsum) + b') + b_down + LN(X), where Wf, b', colsum are the up
 * projection with the LayerNorm folded in (the chain's LayerNorm fold:
 * eng_cu_model.cu, put_folded), (mu, rs) X's row statistics and LN(X) =
 * (X - mu) rs gamma + beta -- X is the attention block's raw sum and Y
 * the layer's raw output, as the chain's folded up / down GEMMs read and
 * write them.  Rows at or past *n_rows_dev (and below M) stored as zeros.
 * Each block owns 16 intermediate columns and adds a T x H partial; the
 * partials meet by a reduce-scatter in a fixed order behind one grid
 * barrier (bar: a 64-bit counter, zero at first, shared only by launches
 * of the same I), so results are the same bits on every run.  img: the
 * per-block weight image eng_cu_chain_ffn_pack makes from Wu (glu: [2I][H],
 * gate rows then up; else [I][H]) and Wd [H][I], eng_cu_chain_ffn_img_bytes;
 * part: fp32 scratch, eng_cu_chain_ffn_part_bytes.  ok: M <= 16,
 * I % 16 == 0, and H = 1024 with glu (Qwen3-0.6B), H = 384 or 768
 * without (all-MiniLM-L6, BERT-base).  cudaErrorNotSupported, launching
 * nothing, when the shape is not built or the grid cannot be resident at
 * once (the caller then runs the two GEMMs).  late: the dependents launch
 * after the wait. */
typedef struct eng_cu_ffn_ln {
    const float *colsum;        /* [I] the folded up matrix's column sums */
    const bf16 *b_up;           /* [I] the folded up bias b' */
    const bf16 *b_down;         /* [H], 8-byte aligned */
    const float *gamma, *beta;  /* [H] the LayerNorm folded into up, 16-byte aligned */
} eng_cu_ffn_ln;
int eng_cu_chain_ffn_ok(int M, int H, int I, int glu);
/* Attention + O projection as one chain launch split by head
 * (eng_cu_chain_ao.cu): Y = R + attention(a) Wo^T, the attention as the
 * chain's v2 computes it with Qwen3's q/k norm + rotary (a.q_norm,
 * a.k_norm, a.rope required), rows past *n_rows_dev (below M) zero.
 * Block (head h, column group c) adds the head's T x 128 partial; the
 * partials meet as in eng_cu_chain_ffn (fixed order, same bits every
 * run; bar shared only by launches of the same shape).  img:
 * eng_cu_chain_ao_pack of Wo [H][n_heads x 128], _img_bytes; part:
 * _part_bytes.  ok: M <= 16, head size 128, <= 16 heads, H % 128 == 0
 * (Qwen3-0.6B).  cudaErrorNotSupported, launching nothing, when the shape
 * is not built or the grid cannot be resident at once. */
int eng_cu_chain_ao_ok(const eng_cu_attn_args *a, int M, int H);
size_t eng_cu_chain_ao_img_bytes(int H, int n_heads);
size_t eng_cu_chain_ao_part_bytes(int H, int n_heads);
cudaError_t eng_cu_chain_ao_pack(cudaStream_t s, const bf16 *Wo, bf16 *img, int H, int n_heads);
cudaError_t eng_cu_chain_ao(cudaStream_t s, const eng_cu_attn_args *a, const int *n_rows_dev, const int *n_seqs_dev,
                            const bf16 *img, const bf16 *R, bf16 *Y, float *part, unsigned long long *bar, int M,
                            int H, int late);
/* A Qwen3-style decoder's layers for <= 16 rows as ONE persistent kernel
 * (eng_cu_qstream.cu): per layer x += O(attn(QKV(rms(x)))), x +=
 * down(SwiGLU(gate|up(rms(x)))), in place on x, with the norms' weights
 * folded into Wqkv / Wgu (no biases), the q/k RMSNorm (norms: [L][2][128]
 * q then k, or NULL for none) and the rotary (rope, rope_rows: the
 * model's cos/sin table) on attention's tiles; qkv, ctx, act are the
 * model's scratch activations.  Rows at or past *n_rows_dev (below M)
 * come out zero.  The weights come from an image laid out for the grid
 * (eng_cu_qs_setup fills ci, block_bytes, slot_bytes and slots and returns
 * the image's bytes, 0 when the shape cannot run; eng_cu_qs_pack fills
 * layer l of it).  bar: 32 64-bit words (256 bytes), zero at first, used
 * only by these launches.  ok: M <= 16, head size 128, H, I and heads x 128
 * multiples of 256, I a multiple of 16; setup after rope, rope_rows,
 * eps and the shape are set.  eng_cu_qs_run returns
 * cudaErrorNotSupported, launching nothing, when the shape or the grid
 * cannot run. */
typedef struct eng_cu_qs_args {
    const unsigned char *img;
    size_t block_bytes;
    int slot_bytes, slots, ci;
    bf16 *x, *qkv, *ctx, *act;
    const float *norms, *rope;
    int rope_rows;
    const int *n_rows_dev, *cu_seqlens, *n_seqs_dev;
    unsigned long long *bar;
    int M, H, I, L, heads, kv_heads, causal;
    float eps, scale;
    eng_cu_attn_args qk; /* set by eng_cu_qs_setup from rope, rope_rows, eps */
    /* diagnostics (NULL: none): %globaltimer stamps [block][layer][stage:
     * QKV, attention, O, gate|up, down][8]: stage start, first weights
     * landed, stores done, grid barrier arrived, barrier passed, the
     * producer's first and last copy of the stage's first unit issued */
    unsigned long long *prof;
    int opt; /* experiments, 0 = the defaults: bit 0 the flag barrier; bits 1 and 2 give wrong results,
              * to time what is left: 1 no activation loads from L2, 2 no grid barriers */
} eng_cu_qs_args;
int eng_cu_qs_ok(int M, int H, int I, int heads, int kv_heads, int head_dim);
size_t eng_cu_qs_setup(eng_cu_qs_args *p);
cudaError_t eng_cu_qs_pack(cudaStream_t s, const eng_cu_qs_args *p, unsigned char *img, int l, const bf16 *Wqkv,
                           const bf16 *Wo, const bf16 *Wgu, const bf16 *Wd);
cudaError_t eng_cu_qs_run(cudaStream_t s, const eng_cu_qs_args *p);
/* An encoder layer's attention block as one chain launch
 * (eng_cu_chain_ab.cu), split by head: Y = ctx Wo^T + bo + res, ctx =
 * attention(Q | K | V) over the packed sequences (cu_seqlens, not causal),
 * Q | K | V = rs (X Wf^T - mu colsum) + b' (the previous layer's
 * LayerNorm folded into Wf, b' and colsum as put_folded makes them) with
 * res = (X - mu) rs gamma + beta -- or, at layer 0 (colsum, gamma, beta
 * all NULL), Q | K | V = X W^T + b and res = X.  X raw [M][H], Y raw: what
 * the chain's QKV GEMM and attention + O kernel compute together.  Rows
 * at or past *n_rows_dev (below M) stored as zeros; the heads' partials
 * meet in a fixed order behind one grid barrier (bar: a 64-bit counter,
 * zero at first, shared only by these launches), so results are the same
 * bits every run.  img: eng_cu_chain_ab_pack of W [3H][H] (Q, K, V rows)
 * and Wo [H][H], eng_cu_chain_ab_img_bytes; part:
 * eng_cu_chain_ab_part_bytes.  ok: M <= 16 and all-MiniLM-L6's shape (H
 * 384, 12 heads of 32).  cudaErrorNotSupported, launching nothing, when
 * the shape is not built or the 96 blocks cannot be resident at once. */
typedef struct eng_cu_ab_args {
    const bf16 *X, *img, *qkv_b, *bo;   /* qkv_b: b' (folded) or b; bo 8-byte aligned */
    const float *colsum, *gamma, *beta; /* NULL at layer 0; gamma / beta 16-byte aligned */
    bf16 *Y;
    float *part;
    unsigned long long *bar;
    const int *n_rows_dev, *n_seqs_dev, *cu_seqlens;
    float scale, eps;
    int M, H, n_heads, head_dim, late;
} eng_cu_ab_args;
int eng_cu_chain_ab_ok(int M, int H, int n_heads, int head_dim);
size_t eng_cu_chain_ab_img_bytes(void);
size_t eng_cu_chain_ab_part_bytes(void);
cudaError_t eng_cu_chain_ab_pack(cudaStream_t s, const bf16 *Wqkv, const bf16 *Wo, bf16 *img);
cudaError_t eng_cu_chain_ab(cudaStream_t s, const eng_cu_ab_args *a);
size_t eng_cu_chain_ffn_img_bytes(int H, int I, int glu);
size_t eng_cu_chain_ffn_part_bytes(int H, int I);
cudaError_t eng_cu_chain_ffn_pack(cudaStream_t s, const bf16 *Wu, const bf16 *Wd, bf16 *img, int H, int I, int glu);
cudaError_t eng_cu_chain_ffn(cudaStream_t s, const bf16 *X, const bf16 *img, bf16 *Y, float *part,
                             unsigned long long *bar, int M, int H, int I, const int *n_rows_dev, float eps, int late,
                             const eng_cu_ffn_ln *ln);

/* Lab use: run the same GEMM with the i-th heuristic candidate instead of
 * the cached choice.  Returns -1 when there is no such candidate. */
int eng_cu_gemm_candidate(eng_cu_gemm_ctx *g, cudaStream_t s, const bf16 *X, const bf16 *W,
                          const bf16 *bias, bf16 *Y, int M, int N, int K, int epi, int i);

/* ---- small helpers -------------------------------------------------------- */

/* fp32 <-> bf16 bits on the host (weights at open): eng_cu_bf16.h. */

#endif

/* eng_cu_model_qwen3: a Qwen3 decoder used as an embedder (Qwen3-Embedding
 * causal, pplx-embed style bidirectional) on the GPU -- its shape check,
 * weights upload and forward pass.  The decoders without Qwen3's q/k norm
 * (Qwen2, Mistral, Llama: gte-Qwen2, e5-mistral, ...) run the same forward
 * with the rotary alone where the norm + rotary would be, as its own
 * kernel (no fused form of it).  The arena, the input block and the
 * step machinery are the encoder's (eng_cu_model.cu, eng_cu_backend.cu).
 *
 * Verified on the H200 (tests/cuda/run_qwen3_gpu.sh: lab_qwen3, memcheck,
 * e2e_qwen3 against transformers at 28 layers, min cosine 0.99975 causal,
 * 0.99985 bidirectional).  POSY_CUDA_QWEN3=0 turns it off.
 *
 * Weights: one image planned by eng_cu_qwen3_pack.c (bf16 matrices with
 * Q|K|V and gate|up stacked by the loader, fp32 norms, the rotary cos/sin
 * table), one cudaMalloc, filled and copied 256 MiB at a time.
 *
 * Forward, as transformers' Qwen3Model (and the CPU engine,
 * eng_cpu_qwen3.c) computes it; x is the residual stream, h a normed copy:
 *   x = embed[ids]; h = RMSNorm(x) * ln1[0]                 1 launch
 *   per layer:
 *     qkv = h Wqkv^T (+ b)                                  cuBLASLt
 *     q, k = rotary(RMSNorm_head(q|k) * q_norm|k_norm)      1 launch, in place
 *       (sm_90: both in our GEMM, eng_cu_gemm_wg_qk, where that wins the
 *       bucket's race; POSY_CUDA_QKV_FUSE=0 off)
 *     ctx = attention(q, k, v) (causal or not, GQA)         1 launch
 *       (POSY_CUDA_QK_FUSE=1: the attention kernel does the q/k
 *       norm + rotary on its tiles instead; measured no faster)
 *     y = x + ctx Wo^T (+ b)   -- residual in the epilogue; y becomes x
 *     h = RMSNorm(x) * ln2                                  1 launch
 *     gu = h Wgu^T                                          cuBLASLt
 *     act = silu(gate) * up                                 1 launch
 *       (on sm_90 both in our GEMM where that wins its race)
 *     y = x + act Wd^T         -- residual in the epilogue; y becomes x
 *     h = RMSNorm(x) * (next layer's ln1, or the final norm)
 *   pooled = L2(pool(h))  (last token or mean, per the model's files)
 * Nine launches a layer (eight with the q/k fusion).  On sm_90 with the
 * norm weights folded and both products fused (the default where they win
 * their races), each RMSNorm before them is only its row statistics
 * (eng_cu_rms_rows: rs = rsqrt(mean(x^2) + eps)) and the GEMM reads x raw
 * and scales its rows: seven launches a layer, the norms writing a float
 * a row instead of a normed copy of x.  x and y swap roles
 * after every residual GEMM (pointer ping-pong, fixed at capture), so no
 * GEMM writes its own input.
 *
 * The one-query chain (buckets of <= 32 tokens, eng_cu_model.cu) runs five
 * launches a layer: qkv (RMS fold), attention (q/k norm + rotary inside),
 * o (+ residual), gate|up (RMS fold, SwiGLU epilogue), down (+ residual);
 * four with POSY_CUDA_CHAIN_QKV_ATT=1 at <= 16 tokens, attention then
 * being the QKV launch's tail (eng_cu_chain_att).
 * The fold: at load each layer's ln1 / ln2 weights are multiplied into the
 * columns of Wqkv / Wgu and stored as ones (eng_cu_qwen3_pack.c), so the
 * graph path's norm kernels compute the same function with unit weights,
 * and the chain's GEMMs take x raw and scale each output row by
 * rsqrt(mean(x^2) + eps) (eng_cu_gemm_chain, nm.fold).  POSY_CUDA_FOLD_NORM=0
 * keeps the weights as they are and the norms as kernels.
 */
#include "eng_cu_model.h"
#include "eng_cu_qwen3_pack.h"
#include "eng_cu_window.h"
#include "eng_cu_race.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

int eng_cu_qwen3_shape(eng_cu_model *m, const eng_config *cfg, posy_err *err) {
    if (eng_cu_q3_check(cfg, err)) return -1;
    const posy_model_info *in = &cfg->info;
    m->arch = ENG_CU_ARCH_QWEN3;
    m->H = in->hidden; m->I = in->intermediate; m->L = in->layers;
    m->heads = in->heads; m->kv_heads = in->kv_heads; m->head_dim = cfg->head_dim;
    m->attn_n = m->heads * m->head_dim;
    m->qkv_n = (m->heads + 2 * m->kv_heads) * m->head_dim;
    m->vocab = in->vocab; m->type_vocab = 0;
    m->max_pos = in->max_positions; m->pos_off = 0; m->pos_rows = 0;
    m->eps = (float)cfg->ln_eps;
    m->causal = in->causal;
    m->normalize = eng_config_pool_normalize(cfg); /* with Dense modules the engine front normalises after them */
    m->pool_mode = in->pooling == POSY_POOL_CLS ? ENG_CU_POOL_CLS
                   : in->pooling == POSY_POOL_LAST ? ENG_CU_POOL_LAST : ENG_CU_POOL_MEAN;
    m->epi_up = ENG_CU_EPI_NONE;
    /* Gemma 3 / ModernBERT: their own forward (eng_cu_model_glu.cu) */
    m->glu = cfg->gemma ? ENG_CU_GLU_GEMMA : cfg->modernbert ? ENG_CU_GLU_MODERNBERT : cfg->post_ln ? ENG_CU_GLU_POSTLN : 0;
    m->glu_act = cfg->act == ENG_ACT_GELU_TANH ? ENG_CU_GLU_GELU_TANH
                 : cfg->act == ENG_ACT_GELU    ? ENG_CU_GLU_GELU_ERF
                                               : ENG_CU_GLU_SILU;
    m->window = m->glu ? cfg->sliding_window : 0;
    const char *gf = getenv("POSY_CUDA_GLU_FUSE");
    m->glu_fuse = m->glu && !(gf && !strcmp(gf, "0")); /* raced per bucket; run 106: 1.02-1.06x a step */
    m->embed_scale = cfg->gemma ? (float)sqrt((double)m->H) : 1.f; /* the CPU engine's float32 factor */
    return 0;
}

int eng_cu_qwen3_upload(eng_cu_model *m, const eng_config *cfg, const eng_qwen3_weights *w, posy_err *err) {
    /* a position within a sequence is < the model's limit and < the bucket */
    m->rope_rows = m->max_pos < m->max_tokens ? m->max_pos : m->max_tokens;
    eng_cu_q3_image im;
    if (eng_cu_q3_plan(&im, cfg, w, m->rope_rows, err)) return -1;
    im.fold_norms = m->fold_norm;
    m->wbytes = im.bytes;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaError_t ce = cudaMalloc(&m->wmem, m->wbytes);
    if (ce != cudaSuccess) {
        m->wmem = NULL;
        eng_cu_q3_image_free(&im);
        return posy_err_set(err, POSY_E_NOMEM,
                            "cuda backend: weights need %.1f MiB of GPU memory, %.1f MiB free: %s",
                            m->wbytes / 1048576.0, free_b / 1048576.0, cudaGetErrorString(ce));
    }
    /* through a buffer of one window, not a host copy of the whole image:
     * the host then holds the fp32 weights and 256 MiB at most, instead of
     * 1.5x the fp32 size (a 7B decoder: ~28 GB instead of ~42) */
    const size_t win = m->wbytes < eng_cu_upload_window() ? m->wbytes : eng_cu_upload_window();
    char *buf = (char *)malloc(win);
    if (!buf) {
        eng_cu_q3_image_free(&im);
        return posy_err_set(err, POSY_E_NOMEM, "cuda backend: upload buffer of %zu bytes", win);
    }
    for (size_t lo = 0; lo < m->wbytes && ce == cudaSuccess; lo += win) {
        const size_t hi = lo + win < m->wbytes ? lo + win : m->wbytes;
        eng_cu_q3_fill_window(&im, w, &cfg->rope, &cfg->rope_local, buf, lo, hi);
        ce = cudaMemcpy((char *)m->wmem + lo, buf, hi - lo, cudaMemcpyHostToDevice);
    }
    free(buf);
    char *base = (char *)m->wmem;
    m->word = (bf16 *)(base + im.embed);
    m->emb_g = (float *)(base + im.norm);
    m->rope = (float *)(base + im.rope);
#define Q3_OPT(off, type) ((off) == ENG_CU_Q3_NONE ? NULL : (type *)(base + (off)))
    m->rope_local = Q3_OPT(im.rope_local, float);
    m->emb_norm = Q3_OPT(im.emb_norm, float);
    m->emb_norm_b = Q3_OPT(im.emb_norm_b, float);
    m->norm_b = Q3_OPT(im.norm_b, float);
    for (int l = 0; l < m->L; l++) {
        const eng_cu_q3_layer_off *o = &im.layers[l];
        eng_cu_layer *d = &m->layers[l];
        d->qkv_w = (bf16 *)(base + o->qkv_w);
        d->qkv_b = o->qkv_b == ENG_CU_Q3_NONE ? NULL : (bf16 *)(base + o->qkv_b);
        d->ao_w = (bf16 *)(base + o->o_w);
        d->ao_b = o->o_b == ENG_CU_Q3_NONE ? NULL : (bf16 *)(base + o->o_b);
        d->q_norm = o->q_norm == ENG_CU_Q3_NONE ? NULL : (float *)(base + o->q_norm);
        d->k_norm = o->k_norm == ENG_CU_Q3_NONE ? NULL : (float *)(base + o->k_norm);
        d->ln1_g = Q3_OPT(o->ln1, float); /* ModernBERT's layer 0 has none */
        d->ln2_g = (float *)(base + o->ln2);
        d->ln1_b = Q3_OPT(o->ln1_b, float);
        d->ln2_b = Q3_OPT(o->ln2_b, float);
        d->post_attn = Q3_OPT(o->post_attn, float);
        d->post_mlp = Q3_OPT(o->post_mlp, float);
        d->local = m->glu && ((cfg->layer_local[l / 8] >> (l % 8)) & 1);
        d->up_w = (bf16 *)(base + o->gu_w);
        d->down_w = (bf16 *)(base + o->down_w);
        d->down_b = Q3_OPT(o->down_b, bf16); /* GTE */
    }
#undef Q3_OPT
    eng_cu_q3_image_free(&im);
    return ce == cudaSuccess ? 0 : eng_cu_model_fail(err, "weights upload", ce);
}

#define CK(what, call)                                                        \
    do {                                                                      \
        cudaError_t ce_ = (call);                                             \
        if (ce_ != cudaSuccess) return eng_cu_model_fail(err, what, ce_);     \
    } while (0)

#define GEMM(X, W, B, R, Y, N, K)                                                              \
    do {                                                                                       \
        if (eng_cu_model_gemm(m, s, chain, X, W, B, R, Y, T, N, K,                             \
                              (B) ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE, NULL, err))             \
            return -1;                                                                         \
    } while (0)

/* The model's gated epilogue for our GEMM: SwiGLU (Qwen3 and its
 * relatives), or GELU-gated (Gemma 3's tanh form, ModernBERT's erf form;
 * versions 3 and 4 of our GEMM only). */
static int gated_epi(const eng_cu_model *m) {
    return m->glu_act == ENG_CU_GLU_GELU_TANH  ? ENG_CU_EPI_GEGLU_TANH
           : m->glu_act == ENG_CU_GLU_GELU_ERF ? ENG_CU_EPI_GEGLU_ERF
                                               : ENG_CU_EPI_SWIGLU;
}

/* gate|up + the gated activation as two kernels (the GEMM into inter,
 * then the SwiGLU kernel or, GELU-gated, its GELU forms), or on the graph
 * path (fused: the version, 3 or 4) our one kernel. */
static int mlp_up_run(eng_cu_model *m, cudaStream_t s, int chain, int fused, const bf16 *X, const eng_cu_layer *w,
                      int T, const int *n_tok, const eng_cu_chain_norm *nm, posy_err *err) {
    const int I = m->I, epi = gated_epi(m);
    if (fused) {
        if (eng_cu_ablate("gemm")) return 0;
        CK("gate|up + gated activation (wgmma)",
           eng_cu_gemm_wg_v(fused, s, X, w->up_w, NULL, NULL, m->act, T, 2 * I, m->H, epi));
        return 0;
    }
    if (eng_cu_model_gemm(m, s, chain, X, w->up_w, NULL, NULL, m->inter, T, 2 * I, m->H, ENG_CU_EPI_NONE, nm, err))
        return -1;
    if (eng_cu_ablate("swiglu")) return 0;
    if (epi == ENG_CU_EPI_SWIGLU) CK("swiglu", eng_cu_swiglu(s, m->inter, m->act, T, n_tok, I));
    else CK("gated activation", eng_cu_glu_act(s, m->inter, m->act, T, n_tok, I, m->glu_act));
    return 0;
}

/* Which wins for T rows -- the two kernels or ours in each version raced
 * (m->wg_versions): decided once per bucket, on its first (eager) run, by
 * timing each on the real operands (all write the same act, so the
 * forward is unaffected) -- the lab's ratio moved from 0.81 to 1.11
 * between H200 runs, so a fixed choice would be wrong somewhere.  Returns
 * 0 (the two kernels) or the version.  Never times under capture (ours,
 * in its highest version raced, is taken there; capture follows an eager
 * run, which decided). */
static int swiglu_fused_pick(eng_cu_model *m, cudaStream_t s, const bf16 *X, const eng_cu_layer *w, int T,
                             const int *n_tok, posy_err *err) {
    const int known = picks_find(&m->swiglu_picks, T);
    if (known >= 0) return known;
    /* the versions with the model's epilogue: all for SwiGLU, 3 and 4 GELU-gated */
    const int versions =
        m->wg_versions & (gated_epi(m) == ENG_CU_EPI_SWIGLU ? ~0 : m->glu_fuse ? (1 << 3) | (1 << 4) : 0);
    if (under_capture(s)) {
        int top = 5;
        while (top > 1 && !(versions >> top & 1)) top--;
        return versions ? top : 0;
    }
    const int log = getenv("POSY_CUDA_TUNE_LOG") != NULL;
    const char *gate = m->glu_act == ENG_CU_GLU_SILU ? "swiglu" : "gelu gate";
    float best = -1.f, t_unfused = -1.f;
    int pick = 0;
    for (int f = 0; f <= 5; f++) { /* 0: the two kernels; 1..5: ours in that version */
        if (f && !(versions >> f & 1)) continue;
        const float us = race_us(s, [&] { return mlp_up_run(m, s, 0, f, X, w, T, n_tok, NULL, err); });
        if (us < 0.f) continue;
        if (log && f) fprintf(stderr, "gate|up + %s T=%d: fused wgmma version %d %.2f us\n", gate, T, f, us);
        if (log && !f) fprintf(stderr, "gate|up + %s T=%d: cuBLASLt + kernel %.2f us\n", gate, T, us);
        if (!f) t_unfused = us;
        if (best < 0.f || us < best) best = us, pick = f;
    }
    if (log)
        fprintf(stderr, "gate|up + %s T=%d: %s %d (%.2f us; cuBLASLt + kernel %.2f us)\n", gate, T,
                pick ? "fused wgmma version" : "cuBLASLt + kernel", pick, best, t_unfused);
    picks_put(&m->swiglu_picks, T, pick);
    return pick;
}

/* act = SwiGLU(X Wup^T): in the chain, one GEMM with the SwiGLU epilogue
 * (unless POSY_CUDA_CHAIN_SWIGLU=0); on the graph path our fused kernel
 * where it runs and won its race for this bucket (m->wg_versions; rows past the
 * real count see zero X rows and come out 0, as the SwiGLU kernel leaves
 * them), otherwise the gate|up GEMM into inter, then the SwiGLU kernel. */
static int mlp_up(eng_cu_model *m, cudaStream_t s, int chain, const bf16 *X, const eng_cu_layer *w, int T,
                  const int *n_tok, const eng_cu_chain_norm *nm, posy_err *err) {
    const int I = m->I, epi = gated_epi(m);
    if (chain && m->chain_swiglu && epi == ENG_CU_EPI_SWIGLU) /* the chain kernel's gate is SiLU only */
        return eng_cu_model_gemm(m, s, 1, X, w->up_w, NULL, NULL, m->act, T, 2 * I, m->H, ENG_CU_EPI_SWIGLU, nm,
                                 err);
    const int fused = !chain && m->wg_versions && (epi == ENG_CU_EPI_SWIGLU || m->glu_fuse) &&
                              eng_cu_gemm_wg_ok(T, 2 * I, m->H, epi)
                          ? swiglu_fused_pick(m, s, X, w, T, n_tok, err)
                          : 0;
    return mlp_up_run(m, s, chain, fused, X, w, T, n_tok, nm, err);
}

int eng_cu_dec_mlp_up(eng_cu_model *m, cudaStream_t s, int chain, const bf16 *X, const eng_cu_layer *w, int T,
                      const int *n_tok, posy_err *err) {
    return mlp_up(m, s, chain, X, w, T, n_tok, NULL, err);
}

/* qkv = X Wqkv^T (+ b), with the q/k norm + rotary applied by our GEMM's
 * epilogue where `fused` (its version, 3 or 5; its rows scaled by rs
 * first unless NULL -- or by the kernel's own RMS scales, rn -- X being
 * then the raw residual stream), else left to attn_block. */
static int qkv_run(eng_cu_model *m, cudaStream_t s, int chain, int fused, const bf16 *X, const eng_cu_layer *w,
                   eng_cu_qk_args *q, int T, posy_err *err, const float *rs = NULL,
                   const eng_cu_row_norm *rn = NULL) {
    if (fused) {
        if (eng_cu_ablate("gemm")) return 0;
        q->q_norm = w->q_norm; q->k_norm = w->k_norm;
        CK("qkv + q/k norm + rotary (wgmma)",
           eng_cu_gemm_wg_qk(fused, s, X, w->qkv_w, m->qkv, T, m->qkv_n, m->H, q, rs, rn));
        return 0;
    }
    return eng_cu_model_gemm(m, s, chain, X, w->qkv_w, w->qkv_b, NULL, m->qkv, T, m->qkv_n, m->H,
                             w->qkv_b ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE, NULL, err);
}

/* Whether the fused QKV wins for T rows: timed once per bucket on its
 * first (eager) run, as swiglu_fused_pick does -- the fused kernel against
 * the product and the q/k kernel, both leaving the same qkv -- and taken
 * under capture only if that run chose it.  Returns 0 (not fused) or the
 * version that won: 3 (version 5's fused QKV, eng_cu_gemm_wg_qk, is not
 * raced: 1005-1029 us against version 3's 850 at 65536 rows, H200 run 18). */
static int qkv_fused_pick(eng_cu_model *m, cudaStream_t s, const bf16 *X, const eng_cu_layer *w,
                          eng_cu_qk_args *q, int T, posy_err *err) {
    const int known = picks_find(&m->qkv_picks, T);
    if (known >= 0) return known;
    if (under_capture(s)) return 0;
    q->q_norm = w->q_norm; q->k_norm = w->k_norm;
    float us[2]; /* 0: the product and the q/k kernel; 1: ours, version 3 (the caller checked it takes T) */
    for (int f = 0; f < 2; f++)
        us[f] = race_us(s, [&] {
            if (qkv_run(m, s, 0, f ? 3 : 0, X, w, q, T, err)) return -1;
            return f ? 0 : eng_cu_qk_norm_rope(s, q) == cudaSuccess ? 0 : -1;
        });
    const int fused = us[1] >= 0.f && (us[0] < 0.f || us[1] < us[0]) ? 3 : 0;
    if (getenv("POSY_CUDA_TUNE_LOG"))
        fprintf(stderr,
                "qkv + q/k norm + rotary T=%d: %s %d (fused v3 %.2f us, cuBLASLt + kernel %.2f us)\n", T,
                fused ? "fused wgmma version" : "cuBLASLt + kernel", fused, us[1], us[0]);
    picks_put(&m->qkv_picks, T, fused);
    return fused;
}

/* The middle of a layer: q/k norm + rotary (inside attention when fuse,
 * already done by the QKV GEMM when qk_done, else its own kernel on q),
 * attention, and y = x + ctx Wo^T (+ b). */
static int attn_block(eng_cu_model *m, cudaStream_t s, int chain, int fuse, int qk_done, const eng_cu_layer *w,
                      eng_cu_qk_args *q, eng_cu_attn_args *a, const bf16 *x, bf16 *y, int T, posy_err *err) {
    if (fuse) { /* the attention kernel normalises and rotates Q/K tiles as they land (no norm: rotates) */
        a->q_norm = w->q_norm; a->k_norm = w->k_norm;
        a->rope_only = w->q_norm == NULL;
    } else if (!qk_done) {
        q->q_norm = w->q_norm; q->k_norm = w->k_norm;
        if (!eng_cu_ablate("qk")) CK("q/k norm + rotary", eng_cu_qk_norm_rope(s, q));
    }
    return eng_cu_model_attn_o(m, s, chain, a, q->n_rows_dev, q->n_seqs_dev, w->ao_w, w->ao_b, x, y, T, m->attn_n,
                               err);
}

void eng_cu_dec_args(const eng_cu_model *m, int T, const eng_cu_in_layout &lay, eng_cu_qk_args *q,
                     eng_cu_attn_args *a) {
    const int32_t *in = m->d_in;
    const int d = m->head_dim;
    memset(q, 0, sizeof *q);
    q->qkv = m->qkv; q->ld = m->qkv_n;
    q->n_heads = m->heads; q->n_kv_heads = m->kv_heads; q->head_dim = d;
    q->eps = m->eps;
    q->rope = m->rope; q->rope_rows = m->rope_rows;
    q->cu_seqlens = in + lay.cu; q->n_seqs_dev = in + lay.meta + ENG_CU_META_SEQS;
    q->rows = T; q->n_rows_dev = in + lay.meta + ENG_CU_META_TOKENS;
    memset(a, 0, sizeof *a);
    a->q = m->qkv; a->k = m->qkv + m->attn_n; a->v = m->qkv + m->attn_n + m->kv_heads * d;
    a->ldq = a->ldk = a->ldv = m->qkv_n;
    a->o = m->ctx; a->ldo = m->attn_n;
    a->n_heads = m->heads; a->n_kv_heads = m->kv_heads;
    a->head_dim = d;
    a->cu_seqlens = in + lay.cu;
    a->tiles = in + lay.tiles;
    a->n_tiles_dev = in + lay.meta + ENG_CU_META_TILES;
    a->max_tiles = lay.max_tiles;
    a->scale = 1.f / sqrtf((float)d); /* Gemma 3's query_pre_attn_scalar is folded into q_norm */
    a->causal = m->causal;
    a->work = m->attn_work;
}

int eng_cu_qwen3_forward(eng_cu_model *m, cudaStream_t s, int T, int S, posy_err *err) {
    if (m->glu) return eng_cu_glu_forward(m, s, T, S, err);
    const eng_cu_in_layout lay = eng_cu_in_layout_for(T, S);
    const int32_t *in = m->d_in;
    const int *n_tok = in + lay.meta + ENG_CU_META_TOKENS, *n_seq = in + lay.meta + ENG_CU_META_SEQS;
    const int H = m->H, I = m->I, d = m->head_dim;
    const int chain = eng_cu_model_chain_begin(m, T);
    bf16 *x = m->x, *y = m->y, *t;
    CK("embedding", eng_cu_embed_rmsnorm(s, in + lay.ids, m->word, m->layers[0].ln1_g, x, m->h, T, n_tok,
                                         H, m->eps));
    eng_cu_qk_args q;
    eng_cu_attn_args a;
    eng_cu_dec_args(m, T, lay, &q, &a);
    /* q/k norm + rotary inside attention: in the one-query chain (v2, one
     * node fewer a layer; POSY_CUDA_CHAIN_QK=0: its own kernel), or opt-in
     * everywhere (POSY_CUDA_QK_FUSE=1) */
    /* Qwen2, Mistral and Llama have no q/k norm (layer q_norm NULL): in the
     * one-query chain's buckets of <= 16 tokens (m->chain_rope) attention
     * applies their rotary alone as its tiles land (rope_only), elsewhere
     * eng_cu_qk_norm_rope's rotary-alone node does; no other fused form of
     * the norm is taken -- not in the QKV GEMM, not at the end of QKV, not
     * in the split attention + O */
    const int qkn = m->layers[0].q_norm != NULL;
    const int fuse = qkn ? eng_cu_attn_fuses_qk(d) || (chain && m->chain_qk)
                         : (chain && m->chain_qk && T <= m->chain_rope) || eng_cu_attn_fuses_qk(d);
    a.rope = m->rope; a.rope_rows = m->rope_rows; a.qk_eps = m->eps;
    if (chain && (m->chain_norm || m->fold_norm)) {
        /* the two RMSNorms of a layer inside the GEMM that follows them:
         * as the RMS fold (the default: the norm's weights are in W, the
         * GEMM scales each output row by its rsqrt(mean(x^2) + eps)), or
         * as the norm prologue (POSY_CUDA_CHAIN_NORM=1) */
        const int fold = !m->chain_norm;
        eng_cu_chain_norm nm = {NULL, NULL, m->eps, n_tok, NULL, fold, NULL, NULL};
        /* attention at the end of the QKV GEMM (chain_qkv_att, eng_cu_chain_att),
         * where the launch is built for the shape; a launch that cannot carry
         * it (eng_cu_model_qkv_att returns 0) falls back to the node */
        eng_cu_chain_att att;
        memset(&att, 0, sizeof att);
        att.a = a;
        att.a.q_norm = m->layers[0].q_norm; att.a.k_norm = m->layers[0].k_norm;
        att.n_seqs_dev = n_seq;
        att.counters = m->att_cnt;
        const int qkv_att = m->chain_qkv_att && fold && qkn && eng_cu_chain_att_ok(&att.a, T, m->qkv_n, H);
        /* every layer as one persistent kernel (qs_on, <= 16 tokens) */
        const int qs = fold ? eng_cu_model_qstream(m, s, x, T, n_tok, n_seq, in + lay.cu, err) : 0;
        if (qs < 0) return -1;
        if (qs) return eng_cu_model_norm_pool(m, s, x, m->emb_g, NULL, m->h, T, S, in, lay, err);
        for (int l = 0; l < m->L; l++) {
            const eng_cu_layer *w = eng_cu_layer_at(m, l);
            nm.gamma = fold ? NULL : w->ln1_g; /* prologue, layer 0: h is the embedding's norm already */
            int done = 0;
            if (qkv_att) {
                att.a.q_norm = w->q_norm; att.a.k_norm = w->k_norm;
                done = eng_cu_model_qkv_att(m, s, &att, x, w->qkv_w, w->qkv_b, m->qkv, T, m->qkv_n, H, &nm, err);
                if (done < 0) return -1;
            }
            if (done) {
                if (eng_cu_model_gemm(m, s, 1, m->ctx, w->ao_w, w->ao_b, x, y, T, H, m->attn_n,
                                      w->ao_b ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE, NULL, err))
                    return -1;
            } else {
                if (eng_cu_model_gemm(m, s, 1, l || fold ? x : m->h, w->qkv_w, w->qkv_b, NULL, m->qkv, T, m->qkv_n,
                                      H, w->qkv_b ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE, l || fold ? &nm : NULL, err))
                    return -1;
                eng_cu_attn_args as = a; /* the split launch always applies the q/k norm itself */
                as.q_norm = w->q_norm; as.k_norm = w->k_norm;
                const int ao = eng_cu_model_ao(m, s, l, w, &as, n_tok, n_seq, x, y, T, err);
                if (ao < 0) return -1;
                if (!ao && attn_block(m, s, 1, fuse, 0, w, &q, &a, x, y, T, err)) return -1;
            }
            t = x; x = y; y = t;
            nm.gamma = fold ? NULL : w->ln2_g;
            const int ffn = fold ? eng_cu_model_ffn(m, s, l, w, x, y, T, n_tok, err) : 0;
            if (ffn < 0) return -1;
            if (!ffn) {
                if (mlp_up(m, s, 1, x, w, T, n_tok, &nm, err)) return -1;
                GEMM(m->act, w->down_w, (const bf16 *)NULL, x, y, H, I);
            }
            t = x; x = y; y = t;
        }
        return eng_cu_model_norm_pool(m, s, x, m->emb_g, NULL, m->h, T, S, in, lay, err);
    } else {
        /* the fused QKV (picked on layer 0's operands, then for every layer;
         * _ok looks at the norm weights, which each layer sets) */
        q.q_norm = m->layers[0].q_norm; q.k_norm = m->layers[0].k_norm;
        const int qkv_fused = !chain && !fuse && qkn && m->wg_versions && m->qkv_fuse && !m->layers[0].qkv_b &&
                                      eng_cu_gemm_wg_qk_ok(3, T, m->qkv_n, H, &q)
                                  ? qkv_fused_pick(m, s, m->h, eng_cu_layer_at(m, 0), &q, T, err)
                                  : 0;
        /* rms_rows (with the norm weights folded; POSY_CUDA_RMS_ROWS=0 off): a norm
         * before a fused QKV or SwiGLU becomes its row statistics, and the
         * GEMM takes x raw and scales its rows -- the SwiGLU race decided
         * here for that, on the first layer's operands */
        const int rows_ok = m->rms_rows && m->fold_norm && !chain && m->wg_versions;
        const int up_v = rows_ok && eng_cu_gemm_wg_ok(T, 2 * I, H, ENG_CU_EPI_SWIGLU)
                             ? swiglu_fused_pick(m, s, m->h, eng_cu_layer_at(m, 0), T, n_tok, err)
                             : 0;
        const int rows_qkv = rows_ok && qkv_fused, rows_up = rows_ok && up_v >= 3;
        /* the row scales by the fused GEMM itself (versions 3 and 4,
         * eng_cu_row_norm; the experiment POSY_CUDA_RMS_SELF=1, slower) or,
         * the default, by eng_cu_rms_rows first */
        const eng_cu_row_norm rn = {n_tok, m->eps};
        const int self_qkv = m->rms_self && qkv_fused == 3, self_up = m->rms_self && (up_v == 3 || up_v == 4);
        for (int l = 0; l < m->L; l++) {
            const eng_cu_layer *w = eng_cu_layer_at(m, l);
            if (rows_qkv && self_qkv) {
                if (qkv_run(m, s, chain, qkv_fused, x, w, &q, T, err, NULL, &rn)) return -1;
            } else if (rows_qkv) {
                if (!eng_cu_ablate("norm")) CK("rms rows", eng_cu_rms_rows(s, x, m->rs, T, n_tok, H, m->eps));
                if (qkv_run(m, s, chain, qkv_fused, x, w, &q, T, err, m->rs)) return -1;
            } else if (qkv_run(m, s, chain, qkv_fused, m->h, w, &q, T, err))
                return -1;
            if (attn_block(m, s, chain, fuse, qkv_fused, w, &q, &a, x, y, T, err)) return -1;
            t = x; x = y; y = t;
            if (rows_up) {
                if (!self_up && !eng_cu_ablate("norm"))
                    CK("rms rows", eng_cu_rms_rows(s, x, m->rs, T, n_tok, H, m->eps));
                if (!eng_cu_ablate("gemm"))
                    CK("gate|up + SwiGLU, row scale (wgmma)",
                       eng_cu_gemm_wg_rows(up_v, s, x, w->up_w, NULL, m->act, T, 2 * I, H, ENG_CU_EPI_SWIGLU,
                                           self_up ? NULL : m->rs, self_up ? &rn : NULL));
            } else {
                if (!eng_cu_ablate("norm"))
                    CK("rmsnorm", eng_cu_add_rmsnorm(s, x, NULL, w->ln2_g, m->h, T, n_tok, H, m->eps));
                if (mlp_up(m, s, chain, m->h, w, T, n_tok, NULL, err)) return -1;
            }
            GEMM(m->act, w->down_w, (const bf16 *)NULL, x, y, H, I);
            t = x; x = y; y = t;
            if (l + 1 == m->L) break; /* the last norm goes with the pooling */
            if (!rows_qkv && !eng_cu_ablate("norm")) /* the next QKV's h */
                CK("rmsnorm", eng_cu_add_rmsnorm(s, x, NULL, m->layers[l + 1].ln1_g, m->h, T, n_tok, H, m->eps));
        }
        return eng_cu_model_norm_pool(m, s, x, m->emb_g, NULL, m->h, T, S, in, lay, err);
    }
}

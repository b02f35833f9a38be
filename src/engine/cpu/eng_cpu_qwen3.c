/* eng_cpu_qwen3: the Qwen3 decoder used as an embedder, fp32 on the CPU.
 *
 * Pre-norm decoder layers, as transformers' Qwen3Model computes them:
 *   h = RMSNorm(x) ; qkv = h Wqkv^T (+ b) ; q,k = RMSNorm per head (q_norm,
 *   k_norm; Qwen3 only -- Qwen2, Mistral and Llama have none) ; rotary on
 *   q,k ; ctx = GQA attention (causal, or bidirectional
 *   for pplx-embed style models) ; x += ctx Wo^T ;
 *   h = RMSNorm(x) ; x += (silu(h Wg^T) * (h Wu^T)) Wd^T
 * Gemma 3 (EmbeddingGemma; cfg.gemma): embeddings times sqrt(hidden), every
 * norm weight (1 + w) (made so at load), a norm on each block's output
 * before its residual add (post_attn, post_mlp), gelu_tanh(gate) * up, and
 * the sliding-window layers' own rotary (rope_local; the window itself
 * masked in attention).  ModernBERT (cfg.modernbert, an encoder) takes the
 * same layer with LayerNorms (one after the embedding gather, none before
 * layer 0's attention), GELU's GLU, and the same two rotaries and window.
 * T5's encoder (cfg.t5: sentence-t5, gtr-t5) takes the same layer without
 * rotary, with the relative position bias of eng_relpos.h in the BERT
 * attention kernel (eng_cpu_attention; no GQA in T5) and relu(h Wi^T)
 * without a gate (cfg.mlp_plain) or T5 v1.1's gelu_new GeGLU.
 * NomicBERT (cfg.nomic: nomic-embed-text) takes it as BERT's post-norm
 * layer: no norm before attention or the MLP, x = LN(x + attn) and x =
 * LN(x + mlp) after them (ln1, ln2), token type rows added to the
 * embeddings before their LayerNorm, SwiGLU, no final norm.  GTE v1.5 /
 * mGTE (cfg.gte) is that layer too (cfg.post_ln), with biases on Q|K|V, O
 * and down and GELU's GLU (its up_gate halves swapped at load); so is
 * JinaBERT v2 (cfg.jina), with ALiBi (cfg.alibi) through T5's relative
 * position bias instead of a rotary.
 * Then the final RMSNorm, pooling (last token or mean per the
 * sentence-transformers files) and L2 normalisation.  Attention direction
 * comes from info.causal (config.json, overridable by the engine option).
 *
 * One arena reserved at open for the largest batch, so a step never
 * allocates:
 *   x    [T, H]          residual stream
 *   h    [T, H]          normed input of each block, then each block's
 *                        output GEMM result before it is added into x
 *   qkv  [T, (nh+2kv)d]  fused Q|K|V (normed and rotated in place)
 *   ctx  [T, nh*d]       attention output
 *   gu   [T, 2I]         gate|up GEMM result
 *   act  [T, I]          silu(gate) * up
 *   scratch              attention score tiles, one slice per thread
 *
 * The four linears of a layer run on eng_cpu_gemm_packed's kernel over
 * copies packed at open, as the encoders' do (eng_cpu_backend.c): no
 * per-call repacking by OpenBLAS, and a text's vector independent of the
 * batch it rode in.  Each layer's loaded linears are given back once it
 * is packed (q3_release_layer), so the copy does not double the weights
 * held (measured up to gte-Qwen2-1.5B's shape: 0.51x OpenBLAS's time, the
 * same peak memory); POSY_CPU_SMALL_GEMM=0 packs nothing.
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "eng_cpu_decoder.h"
#include "eng_cpu_gemm_packed.h"
#include "eng_cpu_kernels.h"
#include "eng_cpu_qwen3.h"
#include "eng_relpos.h"
#include "posy_log.h"

typedef struct q3_pack {
    eng_cpu_pack qkv, o, gu, down;
} q3_pack;

struct eng_cpu_qwen3 {
    float *arena, *x, *h, *qkv, *ctx, *gu, *act, *scratch;
    float *rel_tab; /* T5, JinaBERT: the expanded relative position bias / ALiBi (eng_relpos.h) */
    eng_relpos rel;
    size_t scratch_floats;
    int n_threads;
    eng_cpu_isa isa; /* the packed kernel; NONE: OpenBLAS for every linear */
    q3_pack *packs;  /* [n_layers] when isa is not NONE */
    int n_packs;
};

static void q3_free_packs(eng_cpu_qwen3 *q) {
    for (int l = 0; q->packs && l < q->n_packs; l++) {
        eng_cpu_pack_free(&q->packs[l].qkv);
        eng_cpu_pack_free(&q->packs[l].o);
        eng_cpu_pack_free(&q->packs[l].gu);
        eng_cpu_pack_free(&q->packs[l].down);
    }
    free(q->packs);
    q->packs = NULL;
    q->isa = ENG_CPU_ISA_NONE;
}

/* Gives back the pages of layer l's four loaded linears once they are
 * packed (eng_st_release: the converted / stacked ones in the loader's
 * owned block, their pointers then NULL; F32 tensors used in place, the
 * file mapping's pages, which a later read would fault back in).  Returns
 * the bytes. */
static size_t q3_release_layer(posy_engine *e, int l) {
    const posy_model_info *mi = &e->cfg.info;
    eng_qwen3_weights *w = &e->qwen3;
    eng_qwen3_layer *L = &w->layers[l];
    const size_t H = (size_t)mi->hidden, F = (size_t)mi->intermediate, d = (size_t)e->cfg.head_dim;
    const size_t QKV = ((size_t)mi->heads + 2 * (size_t)mi->kv_heads) * d, A = (size_t)mi->heads * d;
    const float **ws[4] = {&L->qkv_w, &L->o_w, &L->gu_w, &L->down_w};
    const size_t n[4] = {QKV * H, H * A, (e->cfg.mlp_plain ? 1 : 2) * F * H, H * F};
    size_t bytes = 0;
    for (int i = 0; i < 4; i++) bytes += eng_st_release(&e->st, w->owned, w->owned_floats, ws[i], n[i]);
    return bytes;
}

/* Packs every layer's four linears, giving their loaded copies back layer
 * by layer, so the packed weights replace the loaded ones instead of
 * doubling them (at most one layer more at any time), or packs none (then
 * OpenBLAS runs them): never an error -- no AVX2+FMA,
 * POSY_CPU_SMALL_GEMM=0, or no memory.  Out of
 * memory after layer 0 keeps the layers packed so far (their loaded copies
 * are gone) and runs the rest on OpenBLAS. */
static void q3_pack_layers(eng_cpu_qwen3 *q, posy_engine *e) {
    const posy_model_info *mi = &e->cfg.info;
    const eng_qwen3_weights *w = &e->qwen3;
    const int H = mi->hidden, F = mi->intermediate, d = e->cfg.head_dim;
    const int QKV = (mi->heads + 2 * mi->kv_heads) * d, A = mi->heads * d, GU = (e->cfg.mlp_plain ? 1 : 2) * F;
    q->isa = eng_cpu_gemm_choice();
    if (q->isa == ENG_CPU_ISA_NONE) return;
    const size_t bytes = (size_t)w->n_layers * (eng_cpu_pack_bytes(QKV, H) + eng_cpu_pack_bytes(H, A) +
                                                eng_cpu_pack_bytes(GU, H) + eng_cpu_pack_bytes(H, F));
    q->packs = calloc((size_t)w->n_layers, sizeof *q->packs);
    if (!q->packs) {
        q->isa = ENG_CPU_ISA_NONE;
        POSY_WARN("engine cpu: no memory for the packed linear weights (%zu MiB); OpenBLAS for all", bytes >> 20);
        return;
    }
    q->n_packs = w->n_layers;
    /* POSY_CPU_PACK_LAYERS=N packs the first N layers only, as running out
     * of memory at layer N would: the mixed case's test (test_qwen3) */
    const char *pl = getenv("POSY_CPU_PACK_LAYERS");
    const int pack_n = pl && *pl ? atoi(pl) : w->n_layers;
    size_t given_back = 0;
    int l = 0;
    for (; l < w->n_layers; l++) {
        const eng_qwen3_layer *L = &w->layers[l];
        q3_pack *p = &q->packs[l];
        if (l >= pack_n || eng_cpu_pack_init(&p->qkv, L->qkv_w, QKV, H) || eng_cpu_pack_init(&p->o, L->o_w, H, A) ||
            eng_cpu_pack_init(&p->gu, L->gu_w, GU, H) || eng_cpu_pack_init(&p->down, L->down_w, H, F)) {
            eng_cpu_pack_free(&p->qkv); /* this layer whole on OpenBLAS: its loaded copy is intact */
            eng_cpu_pack_free(&p->o);
            eng_cpu_pack_free(&p->gu);
            eng_cpu_pack_free(&p->down);
            break;
        }
        given_back += q3_release_layer(e, l);
    }
    if (l == 0) {
        q3_free_packs(q);
        POSY_WARN("engine cpu: no memory for the packed linear weights (%zu MiB); OpenBLAS for all", bytes >> 20);
        return;
    }
    if (l < w->n_layers)
        POSY_WARN("engine cpu: %s layers %d..%d; they run on OpenBLAS (layers 0..%d packed)",
                  l >= pack_n ? "POSY_CPU_PACK_LAYERS leaves out" : "no memory to pack", l, w->n_layers - 1, l - 1);
    POSY_DEBUG("engine cpu: packed linear kernel %s, packed weights %zu MiB, %zu MiB of loaded weights given back",
               q->isa == ENG_CPU_ISA_AVX512 ? "avx512" : "avx2", bytes >> 20, given_back >> 20);
}

eng_cpu_qwen3 *eng_cpu_qwen3_open(posy_engine *e, int n_threads, posy_err *err) {
    const posy_model_info *mi = &e->cfg.info;
    eng_cpu_qwen3 *q = calloc(1, sizeof *q);
    if (!q) { posy_err_set(err, POSY_E_NOMEM, "CPU qwen3: out of memory"); return NULL; }
    q->n_threads = n_threads;
    size_t T = (size_t)e->opts.max_batch_tokens, H = (size_t)mi->hidden, F = (size_t)mi->intermediate;
    size_t d = (size_t)e->cfg.head_dim, QKV = ((size_t)mi->heads + 2 * (size_t)mi->kv_heads) * d;
    int longest = mi->max_positions < e->opts.max_batch_tokens ? mi->max_positions : e->opts.max_batch_tokens;
    q->scratch_floats = eng_cpu_attention_scratch_floats(longest, n_threads);
    size_t floats = T * (2 * H + QKV + (size_t)mi->heads * d + 3 * F) + q->scratch_floats;
    q->arena = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (!q->arena) {
        posy_err_set(err, POSY_E_NOMEM, "CPU activation arena of %zu MiB for --max-batch-tokens %d: out of memory "
                     "(lower --max-batch-tokens)", floats * sizeof(float) >> 20, e->opts.max_batch_tokens);
        free(q);
        return NULL;
    }
    q->x = q->arena;
    q->h = q->x + T * H;
    q->qkv = q->h + T * H;
    q->ctx = q->qkv + T * QKV;
    q->gu = q->ctx + T * (size_t)mi->heads * d;
    q->act = q->gu + T * 2 * F;
    q->scratch = q->act + T * F;
    if (e->cfg.t5 || e->cfg.alibi) { /* one table for every layer, rows indexed by the distance */
        q->rel_tab = malloc(sizeof(float) * (size_t)mi->heads * eng_relpos_span(mi->max_positions));
        if (!q->rel_tab) {
            posy_err_set(err, POSY_E_NOMEM, "CPU relative position table: out of memory");
            free(q->arena);
            free(q);
            return NULL;
        }
        if (e->cfg.alibi) eng_alibi_expand(q->rel_tab, mi->heads, mi->max_positions); /* JinaBERT */
        else eng_relpos_expand(q->rel_tab, e->qwen3.rel_bias, mi->heads, mi->max_positions, 1.0f);
        q->rel.tab = q->rel_tab;
        q->rel.max_len = mi->max_positions;
    }
    q3_pack_layers(q, e);
    return q;
}

void eng_cpu_qwen3_close(eng_cpu_qwen3 *q) {
    if (!q) return;
    q3_free_packs(q);
    free(q->rel_tab);
    free(q->arena);
    free(q);
}

/* y = norm(x): RMSNorm, or the LayerNorm (g, bias b) of ModernBERT and the post-norm encoders */
static void q3_norm(const posy_engine *e, float *y, const float *x, const float *g, const float *b, int T, int H) {
    const float eps = (float)e->cfg.ln_eps;
    if (!e->cfg.modernbert && !e->cfg.post_ln) {
        eng_cpu_rmsnorm(y, x, g, eps, T, H);
        return;
    }
    if (y != x) memcpy(y, x, sizeof(float) * (size_t)T * H);
    eng_cpu_add_layernorm(y, NULL, g, b, eps, T, H);
}

static int q3_layer(eng_cpu_qwen3 *q, const posy_engine *e, int l, const eng_qwen3_layer *L, const posy_batch *b) {
    const posy_model_info *mi = &e->cfg.info;
    int T = b->n_tokens, H = mi->hidden, F = mi->intermediate, d = e->cfg.head_dim;
    int nh = mi->heads, nkv = mi->kv_heads, QKV = (nh + 2 * nkv) * d;
    float eps = (float)e->cfg.ln_eps;
    const int post = e->cfg.post_ln; /* post-norm (NomicBERT, GTE, JinaBERT): the blocks read x itself, ln1 / ln2
                                        come after them */
    if (!post) {
        if (L->ln1) q3_norm(e, q->h, q->x, L->ln1, L->ln1_b, T, H);
        else memcpy(q->h, q->x, sizeof(float) * (size_t)T * H); /* ModernBERT's layer 0 */
    }
    const q3_pack *P = q->packs ? &q->packs[l] : NULL; /* NULL: OpenBLAS (eng_cpu_linear_pk) */
    eng_cpu_linear_pk(q->isa, q->qkv, post ? q->x : q->h, L->qkv_w, P ? &P->qkv : NULL, L->qkv_b, T, QKV, H);
    if (L->q_norm) { /* Qwen3 only */
        eng_cpu_rmsnorm_heads(q->qkv, (size_t)QKV, 0, T, nh, d, L->q_norm, eps);
        eng_cpu_rmsnorm_heads(q->qkv, (size_t)QKV, (size_t)nh * d, T, nkv, d, L->k_norm, eps);
    }
    if (e->cfg.t5 || e->cfg.alibi) { /* no rotary; the relative position bias (T5: Wq carries sqrt(d), unscaled
                                          scores; JinaBERT: ALiBi's -slope |i - j| on the scaled ones) */
        if (eng_cpu_attention(q->ctx, q->qkv, b->cu_seqlens, b->n_seqs, nh, d, 0, &q->rel, q->scratch,
                              q->scratch_floats) != 0)
            return -1;
    } else {
        const int local = (e->cfg.gemma || e->cfg.modernbert) && ((e->cfg.layer_local[l / 8] >> (l % 8)) & 1);
        eng_cpu_rope(q->qkv, b->cu_seqlens, b->n_seqs, nh, nkv, d, local ? &e->cfg.rope_local : &e->cfg.rope);
        /* Gemma 3's and ModernBERT's sliding layers: keys at |query - key| < cfg.sliding_window */
        const int win = local ? e->cfg.sliding_window : 0;
        if (eng_cpu_attention_gqa(q->ctx, q->qkv, b->cu_seqlens, b->n_seqs, nh, nkv, d, mi->causal, win, q->scratch,
                                  q->scratch_floats) != 0)
            return -1;
    }
    eng_cpu_linear_pk(q->isa, q->h, q->ctx, L->o_w, P ? &P->o : NULL, L->o_b, T, H, nh * d);
    if (L->post_attn) eng_cpu_rmsnorm(q->h, q->h, L->post_attn, eps, T, H); /* Gemma 3 */
    if (post) {
        eng_cpu_add_layernorm(q->x, q->h, L->ln1, L->ln1_b, eps, T, H); /* x = LN(x + attn) */
    } else {
        eng_cpu_add(q->x, q->h, (size_t)T * H);
        q3_norm(e, q->h, q->x, L->ln2, L->ln2_b, T, H);
    }
    eng_cpu_linear_pk(q->isa, q->gu, post ? q->x : q->h, L->gu_w, P ? &P->gu : NULL, NULL, T,
                      (e->cfg.mlp_plain ? 1 : 2) * F, H);
    if (e->cfg.mlp_plain) { /* T5 v1.0: relu(h Wi^T), no gate (act is relu: eng_config cfg_t5) */
        const size_t n = (size_t)T * F;
        for (size_t i = 0; i < n; i++) q->act[i] = q->gu[i] > 0.0f ? q->gu[i] : 0.0f;
    } else if (e->cfg.act == ENG_ACT_GELU_TANH) eng_cpu_geglu_tanh(q->act, q->gu, T, F); /* Gemma 3, T5 v1.1 */
    else if (e->cfg.act == ENG_ACT_GELU) eng_cpu_geglu_erf(q->act, q->gu, T, F);  /* ModernBERT */
    else eng_cpu_swiglu(q->act, q->gu, T, F);
    eng_cpu_linear_pk(q->isa, q->h, q->act, L->down_w, P ? &P->down : NULL, L->down_b, T, H, F); /* bias: GTE */
    if (L->post_mlp) eng_cpu_rmsnorm(q->h, q->h, L->post_mlp, eps, T, H);
    if (post) eng_cpu_add_layernorm(q->x, q->h, L->ln2, L->ln2_b, eps, T, H); /* x = LN(x + mlp) */
    else eng_cpu_add(q->x, q->h, (size_t)T * H);
    return 0;
}

int eng_cpu_qwen3_forward(eng_cpu_qwen3 *q, const posy_engine *e, const posy_batch *b, posy_err *err) {
    const posy_model_info *mi = &e->cfg.info;
    const eng_qwen3_weights *w = &e->qwen3;
    size_t H = (size_t)mi->hidden;
    omp_set_num_threads(q->n_threads);
    for (int t = 0; t < b->n_tokens; t++)
        memcpy(q->x + (size_t)t * H, w->embed + (size_t)b->ids[t] * H, H * sizeof(float));
    if (e->cfg.gemma) { /* Gemma scales its embeddings by sqrt(hidden), a float32 factor */
        const float s = (float)sqrt((double)H);
        for (size_t i = 0; i < (size_t)b->n_tokens * H; i++) q->x[i] *= s;
    }
    if (w->type_emb) /* NomicBERT, GTE, JinaBERT: the token type's row (0 without type ids) */
        for (int t = 0; t < b->n_tokens; t++)
            eng_cpu_add(q->x + (size_t)t * H, w->type_emb + (size_t)(b->type_ids ? b->type_ids[t] : 0) * H, H);
    if (e->cfg.modernbert || e->cfg.post_ln) q3_norm(e, q->x, q->x, w->emb_norm, w->emb_norm_b, b->n_tokens, (int)H);
    for (int l = 0; l < w->n_layers; l++)
        if (q3_layer(q, e, l, &w->layers[l], b) != 0)
            return posy_err_set(err, POSY_E_INTERNAL, "CPU attention scratch too small for this batch (a sequence "
                                "longer than max_positions %d passed validation?)", mi->max_positions);
    if (!e->cfg.post_ln) q3_norm(e, q->x, q->x, w->norm, w->norm_b, b->n_tokens, (int)H); /* the final norm */
    if (b->tok_out) eng_cpu_copy_tokens(b->tok_out, q->x, b->cu_seqlens, b->n_seqs, (int)H);
    eng_cpu_pool(b->out, q->x, b->cu_seqlens, b->pool_skip, b->n_seqs, (int)H, mi->pooling);
    if (eng_config_pool_normalize(&e->cfg)) eng_cpu_l2_normalize(b->out, b->n_seqs, (int)H); /* Dense: the front does */
    return 0;
}

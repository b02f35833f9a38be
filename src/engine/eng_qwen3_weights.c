/* eng_qwen3_weights: the fp32 view of a Qwen3 decoder's weights, for the
 * embedding models built on it (Qwen3-Embedding, pplx-embed).
 *
 * Same plan as eng_bert_weights.c: F32 tensors aligned in the mapping are
 * used in place; everything else (BF16/F16 tensors, and the Q|K|V and
 * gate|up stacks that let one GEMM compute each group) goes into ONE
 * allocation `owned`, sized by a first pass that finds and checks every
 * tensor and filled by a second pass over the same walk (qw_walk, run by
 * eng_st_view_build), so sizing and filling cannot disagree.
 *
 * Names: "embed_tokens.weight", "layers.N.self_attn.{q,k,v,o}_proj.weight"
 * (+ ".bias": q, k, v together when layer 0's q_proj has one -- Qwen2
 * always, Qwen3 / Llama with attention_bias; o when layer 0's o_proj has
 * one), "...self_attn.{q,k}_norm.weight" (Qwen3 only: cfg->qk_norm),
 * "...{input,post_attention}_layernorm.weight",
 * "...mlp.{gate,up,down}_proj.weight", "norm.weight", under "" (a saved
 * Qwen3Model, as Qwen3-Embedding ships) or "model." (a Qwen3ForCausalLM).
 * lm_head is never read: pooling works on the last hidden states.  Every
 * shape is checked against config.json; errors name file and tensor.
 *
 * ModernBERT (cfg->modernbert): its own names, qw_walk_modernbert.
 * NomicBERT (cfg->nomic): its own names, qw_walk_nomic.
 * GTE v1.5 / mGTE (cfg->gte): its own names, qw_walk_gte; biases on Q|K|V,
 * O and down; up_gate's halves swapped into gate|up.
 * JinaBERT v2 (cfg->jina): its own names, qw_walk_jina.
 * T5's encoder (cfg->t5): its own names, qw_walk_t5; Wq is scaled by
 * sqrt(head_dim) at load (T5's attention does not scale its scores).
 *
 * Gemma 3 (cfg->gemma): the norms are "input_layernorm" (before
 * attention), "post_attention_layernorm" (after it, before the residual
 * add), "pre_feedforward_layernorm", "post_feedforward_layernorm", q/k
 * norms and "norm"; each scales by (1 + w), so they are copied into owned
 * and 1 is added once at load (q_norm also takes cfg->q_scale, the
 * attention scale's difference from 1/sqrt(head_dim)), and the forward
 * multiplies by them as by any RMSNorm weight.
 */
#include "eng_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef eng_st_view qw_ctx;      /* prefix: "" or "model." */

static int qw_lookup(qw_ctx *c, const char *name, int ndim, const int64_t *dims, const eng_st_tensor **t) {
    char full[512];
    snprintf(full, sizeof full, "%s%s", c->prefix, name);
    *t = eng_st_find(c->st, full);
    if (!*t) return posy_err_set(c->err, POSY_E_INVALID, "%s: tensor %s not found", c->st->path, full);
    return eng_st_check(c->st, *t, ndim, dims, c->err);
}

/* One tensor, in place when it is aligned F32, else converted into owned. */
static int qw_take(qw_ctx *c, const char *name, int ndim, const int64_t *dims, const float **dst) {
    const eng_st_tensor *t;
    int rc = qw_lookup(c, name, ndim, dims, &t);
    if (!rc) eng_st_view_take(c, t, dst);
    return rc;
}

/* n tensors `lp + names[i] + suffix`, rows[i] x cols each (cols 0: 1-D),
 * stacked one after another into owned. */
static int qw_stack(qw_ctx *c, const char *lp, const char *const *names, const int64_t *rows, int n,
                    int64_t cols, const char *suffix, const float **dst) {
    size_t start = c->used;
    for (int i = 0; i < n; i++) {
        char name[512];
        int64_t dims[2] = {rows[i], cols};
        const eng_st_tensor *t;
        snprintf(name, sizeof name, "%s%s%s", lp, names[i], suffix);
        int rc = qw_lookup(c, name, cols ? 2 : 1, dims, &t);
        if (rc) return rc;
        eng_st_view_append(c, t);
    }
    if (c->fill) *dst = c->owned + start;
    return 0;
}

/* A norm weight [n]: in place where it can be, or (copy) always into owned,
 * where eng_qwen3_weights_load adds Gemma's 1 afterwards. */
static int qw_norm(qw_ctx *c, const char *name, int64_t n, int copy, const float **dst) {
    int64_t dims[1] = {n};
    if (!copy) return qw_take(c, name, 1, dims, dst);
    static const char *const one[1] = {""};
    const int64_t rows[1] = {n};
    return qw_stack(c, name, one, rows, 1, 0, "", dst);
}

static int qw_layer(qw_ctx *c, const eng_config *cfg, int bias, int o_bias, int i, eng_qwen3_layer *L) {
    static const char *const qkv[3] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};
    static const char *const gu[2] = {"mlp.gate_proj", "mlp.up_proj"};
    const posy_model_info *in = &cfg->info;
    int64_t H = in->hidden, d = cfg->head_dim, I = in->intermediate, A = (int64_t)in->heads * d;
    int64_t qkv_rows[3] = {A, (int64_t)in->kv_heads * d, (int64_t)in->kv_heads * d}, gu_rows[2] = {I, I};
    int64_t dHA[2] = {H, A}, dHI[2] = {H, I}, dH[1] = {H};
    char lp[64], n[128];
    int rc;
    snprintf(lp, sizeof lp, "layers.%d.", i);
    const int g = cfg->gemma;
#define QW_T(suffix, nd, dims, dst) (snprintf(n, sizeof n, "%s%s", lp, suffix), qw_take(c, n, nd, dims, dst))
#define QW_N(suffix, len, dst) (snprintf(n, sizeof n, "%s%s", lp, suffix), qw_norm(c, n, len, g, dst))
    if ((rc = qw_stack(c, lp, qkv, qkv_rows, 3, H, ".weight", &L->qkv_w)) ||
        (bias && (rc = qw_stack(c, lp, qkv, qkv_rows, 3, 0, ".bias", &L->qkv_b))) ||
        (rc = QW_T("self_attn.o_proj.weight", 2, dHA, &L->o_w)) ||
        (o_bias && (rc = QW_T("self_attn.o_proj.bias", 1, dH, &L->o_b))) ||
        (cfg->qk_norm && (rc = QW_N("self_attn.q_norm.weight", d, &L->q_norm))) ||
        (cfg->qk_norm && (rc = QW_N("self_attn.k_norm.weight", d, &L->k_norm))) ||
        (rc = QW_N("input_layernorm.weight", H, &L->ln1)) ||
        (rc = QW_N(g ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight", H, &L->ln2)) ||
        (g && (rc = QW_N("post_attention_layernorm.weight", H, &L->post_attn))) ||
        (g && (rc = QW_N("post_feedforward_layernorm.weight", H, &L->post_mlp))) ||
        (rc = qw_stack(c, lp, gu, gu_rows, 2, H, ".weight", &L->gu_w)) ||
        (rc = QW_T("mlp.down_proj.weight", 2, dHI, &L->down_w)))
        return rc;
#undef QW_T
#undef QW_N
    return 0;
}

typedef struct {
    const eng_config *cfg;
    int bias, o_bias;
    eng_qwen3_weights *w;
} qw_walk_arg;

/* ModernBERT's names (ModernBertModel under "" or "model."):
 * "embeddings.tok_embeddings.weight", "embeddings.norm.{weight,bias}",
 * "layers.N.attn_norm.*" (N >= 1), "layers.N.attn.{Wqkv,Wo}.weight",
 * "layers.N.mlp_norm.*", "layers.N.mlp.{Wi,Wo}.weight", "final_norm.*";
 * a LayerNorm bias only with norm_bias (else the zeros). */
static int qw_walk_modernbert(qw_ctx *c, const eng_config *cfg, eng_qwen3_weights *w) {
    const int64_t H = cfg->info.hidden, I = cfg->info.intermediate;
    int64_t dv[2] = {cfg->info.vocab, H}, dH[1] = {H}, d3[2] = {3 * H, H}, dHH[2] = {H, H}, dgu[2] = {2 * I, H},
            dHI[2] = {H, I};
    const int nb = cfg->norm_bias;
    char n[128];
    int rc;
#define MB_LN(name, wdst, bdst)                                                                           \
    ((snprintf(n, sizeof n, "%s.weight", name), rc = qw_take(c, n, 1, dH, wdst)) ||                      \
     (nb && (snprintf(n, sizeof n, "%s.bias", name), rc = qw_take(c, n, 1, dH, bdst))))
    if ((rc = qw_take(c, "embeddings.tok_embeddings.weight", 2, dv, &w->embed)) ||
        MB_LN("embeddings.norm", &w->emb_norm, &w->emb_norm_b) || MB_LN("final_norm", &w->norm, &w->norm_b))
        return rc;
    for (int i = 0; i < cfg->info.layers; i++) {
        eng_qwen3_layer *L = &w->layers[i];
        char lp[64], an[96], mn[96];
        snprintf(lp, sizeof lp, "layers.%d.", i);
        snprintf(an, sizeof an, "%sattn_norm", lp);
        snprintf(mn, sizeof mn, "%smlp_norm", lp);
        if ((i && MB_LN(an, &L->ln1, &L->ln1_b)) || MB_LN(mn, &L->ln2, &L->ln2_b) ||
            (snprintf(n, sizeof n, "%sattn.Wqkv.weight", lp), rc = qw_take(c, n, 2, d3, &L->qkv_w)) ||
            (snprintf(n, sizeof n, "%sattn.Wo.weight", lp), rc = qw_take(c, n, 2, dHH, &L->o_w)) ||
            (snprintf(n, sizeof n, "%smlp.Wi.weight", lp), rc = qw_take(c, n, 2, dgu, &L->gu_w)) ||
            (snprintf(n, sizeof n, "%smlp.Wo.weight", lp), rc = qw_take(c, n, 2, dHI, &L->down_w)))
            return rc;
    }
#undef MB_LN
    return 0;
}

/* The post-norm encoders' embedding block (NomicBERT, GTE, JinaBERT):
 * "embeddings.word_embeddings.weight", the token type rows when the config
 * has them, and the LayerNorm after them (`ln`: its weight / bias prefix). */
static int qw_post_ln_embed(qw_ctx *c, const eng_config *cfg, eng_qwen3_weights *w, const char *ln) {
    const int64_t H = cfg->info.hidden;
    int64_t dv[2] = {cfg->info.vocab, H}, dt[2] = {cfg->info.type_vocab, H}, dH[1] = {H};
    char wn[96], bn[96];
    snprintf(wn, sizeof wn, "%s.weight", ln);
    snprintf(bn, sizeof bn, "%s.bias", ln);
    int rc;
    if ((rc = qw_take(c, "embeddings.word_embeddings.weight", 2, dv, &w->embed)) ||
        (cfg->info.type_vocab > 0 &&
         (rc = qw_take(c, "embeddings.token_type_embeddings.weight", 2, dt, &w->type_emb))) ||
        (rc = qw_take(c, wn, 1, dH, &w->emb_norm)) || (rc = qw_take(c, bn, 1, dH, &w->emb_norm_b)))
        return rc;
    return 0;
}

/* Layer lp's tensor lp + suffix, in the post-norm walks below (n, lp, rc theirs) */
#define QW_LT(suffix, nd, dims, dst) (snprintf(n, sizeof n, "%s%s", lp, suffix), rc = qw_take(c, n, nd, dims, dst))

/* NomicBERT's names, as Nomic's modeling code saves them (and transformers'
 * NomicBertModel too, through its conversion mapping), under "" or
 * "model.": "embeddings.word_embeddings.weight",
 * "embeddings.token_type_embeddings.weight" (type_vocab_size > 0),
 * "emb_ln.{weight,bias}", "encoder.layers.N.attn.Wqkv.weight" (Q|K|V),
 * "...attn.out_proj.weight", "...mlp.fc11.weight" (up), "...mlp.fc12.weight"
 * (the gate, silu'd: stacked first), "...mlp.fc2.weight",
 * "...norm1.{weight,bias}" (after attention), "...norm2.*" (after the MLP). */
static int qw_walk_nomic(qw_ctx *c, const eng_config *cfg, eng_qwen3_weights *w) {
    static const char *const gu[2] = {"mlp.fc12", "mlp.fc11"};
    const int64_t H = cfg->info.hidden, I = cfg->info.intermediate;
    int64_t dH[1] = {H}, d3[2] = {3 * H, H}, dHH[2] = {H, H}, dHI[2] = {H, I}, gu_rows[2] = {I, I};
    char n[128], lp[64];
    int rc;
    if ((rc = qw_post_ln_embed(c, cfg, w, "emb_ln"))) return rc;
    for (int i = 0; i < cfg->info.layers; i++) {
        eng_qwen3_layer *L = &w->layers[i];
        snprintf(lp, sizeof lp, "encoder.layers.%d.", i);
        if (QW_LT("attn.Wqkv.weight", 2, d3, &L->qkv_w) || QW_LT("attn.out_proj.weight", 2, dHH, &L->o_w) ||
            (rc = qw_stack(c, lp, gu, gu_rows, 2, H, ".weight", &L->gu_w)) ||
            QW_LT("mlp.fc2.weight", 2, dHI, &L->down_w) || QW_LT("norm1.weight", 1, dH, &L->ln1) ||
            QW_LT("norm1.bias", 1, dH, &L->ln1_b) || QW_LT("norm2.weight", 1, dH, &L->ln2) ||
            QW_LT("norm2.bias", 1, dH, &L->ln2_b))
            return rc;
    }
    return 0;
}

/* Rows [r0, r0 + n) of `name` (a 2-D [rows, cols] tensor, checked whole)
 * appended to owned: a slice of a fused tensor; *t the tensor (for
 * eng_st_view_release once every slice is taken). */
static int qw_rows(qw_ctx *c, const char *name, int64_t rows, int64_t cols, int64_t r0, int64_t n,
                   const eng_st_tensor **t) {
    const int64_t dims[2] = {rows, cols};
    int rc = qw_lookup(c, name, 2, dims, t);
    if (rc) return rc;
    eng_st_view_append_range(c, *t, (size_t)(r0 * cols), (size_t)(n * cols));
    return 0;
}

/* GTE v1.5 / mGTE's names (Alibaba-NLP/new-impl's NewModel, under "",
 * "new." or "model."): "embeddings.word_embeddings.weight",
 * "embeddings.token_type_embeddings.weight" (type_vocab_size > 0),
 * "embeddings.LayerNorm.{weight,bias}", "encoder.layer.N.attention.
 * qkv_proj.{weight,bias}" (Q|K|V; with pack_qkv false q_proj / k_proj /
 * v_proj, stacked), "...attention.o_proj.{weight,bias}",
 * "...mlp.up_gate_proj.weight" [2I, H] (up rows, then the gate's: stacked
 * here gate first, as this engine's gate|up), "...mlp.down_proj.{weight,
 * bias}", "...attn_ln.*" (after attention), "...mlp_ln.*" (after the MLP). */
static int qw_walk_gte(qw_ctx *c, const eng_config *cfg, eng_qwen3_weights *w) {
    static const char *const qkv[3] = {"attention.q_proj", "attention.k_proj", "attention.v_proj"};
    const int64_t H = cfg->info.hidden, I = cfg->info.intermediate;
    int64_t dH[1] = {H}, d3[2] = {3 * H, H}, d3b[1] = {3 * H}, dHH[2] = {H, H}, dHI[2] = {H, I},
            qkv_rows[3] = {H, H, H};
    char n[160], lp[64];
    int rc;
    if ((rc = qw_post_ln_embed(c, cfg, w, "embeddings.LayerNorm"))) return rc;
    /* pack_qkv true: qkv_proj; false: q_proj / k_proj / v_proj (a folder
     * with neither is told qkv_proj is missing) */
    char full[192];
    snprintf(full, sizeof full, "%sencoder.layer.0.attention.q_proj.weight", c->prefix);
    const int packed = eng_st_find(c->st, full) == NULL;
    for (int i = 0; i < cfg->info.layers; i++) {
        eng_qwen3_layer *L = &w->layers[i];
        snprintf(lp, sizeof lp, "encoder.layer.%d.", i);
        if (packed ? (QW_LT("attention.qkv_proj.weight", 2, d3, &L->qkv_w) ||
                      QW_LT("attention.qkv_proj.bias", 1, d3b, &L->qkv_b))
                   : ((rc = qw_stack(c, lp, qkv, qkv_rows, 3, H, ".weight", &L->qkv_w)) ||
                      (rc = qw_stack(c, lp, qkv, qkv_rows, 3, 0, ".bias", &L->qkv_b))))
            return rc;
        if (QW_LT("attention.o_proj.weight", 2, dHH, &L->o_w) || QW_LT("attention.o_proj.bias", 1, dH, &L->o_b))
            return rc;
        /* gate (rows I..2I) first, then up (rows 0..I) */
        const size_t start = c->used;
        const eng_st_tensor *ug;
        snprintf(n, sizeof n, "%smlp.up_gate_proj.weight", lp);
        if ((rc = qw_rows(c, n, 2 * I, H, I, I, &ug)) || (rc = qw_rows(c, n, 2 * I, H, 0, I, &ug))) return rc;
        eng_st_view_release(c, ug);
        if (c->fill) L->gu_w = c->owned + start;
        if (QW_LT("mlp.down_proj.weight", 2, dHI, &L->down_w) || QW_LT("mlp.down_proj.bias", 1, dH, &L->down_b) ||
            QW_LT("attn_ln.weight", 1, dH, &L->ln1) || QW_LT("attn_ln.bias", 1, dH, &L->ln1_b) ||
            QW_LT("mlp_ln.weight", 1, dH, &L->ln2) || QW_LT("mlp_ln.bias", 1, dH, &L->ln2_b))
            return rc;
    }
    return 0;
}

/* JinaBERT v2's names (jina-bert-implementation's JinaBertModel, under ""
 * or "bert."): "embeddings.word_embeddings.weight",
 * "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.*",
 * "encoder.layer.N.attention.self.{query,key,value}.{weight,bias}"
 * (stacked Q|K|V), "...attention.output.dense.*" (O),
 * "...attention.output.LayerNorm.*" (after attention), "...mlp.
 * gated_layers.weight" [2I, H] (its first half the activated one: this
 * engine's gate|up as it is), "...mlp.wo.*" (down), "...mlp.layernorm.*"
 * (after the MLP).  The q/k post-norm variant's code (layer_norm_q /
 * layer_norm_k: jina-embeddings-v2-base-code) is refused by name. */
static int qw_walk_jina(qw_ctx *c, const eng_config *cfg, eng_qwen3_weights *w) {
    static const char *const qkv[3] = {"attention.self.query", "attention.self.key", "attention.self.value"};
    const int64_t H = cfg->info.hidden, I = cfg->info.intermediate;
    int64_t dH[1] = {H}, dHH[2] = {H, H}, dgu[2] = {2 * I, H}, dHI[2] = {H, I}, qkv_rows[3] = {H, H, H};
    char n[160], lp[64];
    int rc;
    snprintf(n, sizeof n, "%sencoder.layer.0.attention.self.layer_norm_q.weight", c->prefix);
    if (eng_st_find(c->st, n))
        return posy_err_set(c->err, POSY_E_UNSUPPORTED, "%s: tensor %s: JinaBERT's q/k post-norm variant "
                            "(jina-bert-v2-qk-post-norm, e.g. jina-embeddings-v2-base-code) is not supported",
                            c->st->path, n);
    if ((rc = qw_post_ln_embed(c, cfg, w, "embeddings.LayerNorm"))) return rc; /* type_vocab_size >= 1 here */
    for (int i = 0; i < cfg->info.layers; i++) {
        eng_qwen3_layer *L = &w->layers[i];
        snprintf(lp, sizeof lp, "encoder.layer.%d.", i);
        if ((rc = qw_stack(c, lp, qkv, qkv_rows, 3, H, ".weight", &L->qkv_w)) ||
            (rc = qw_stack(c, lp, qkv, qkv_rows, 3, 0, ".bias", &L->qkv_b)) ||
            QW_LT("attention.output.dense.weight", 2, dHH, &L->o_w) ||
            QW_LT("attention.output.dense.bias", 1, dH, &L->o_b) ||
            QW_LT("attention.output.LayerNorm.weight", 1, dH, &L->ln1) ||
            QW_LT("attention.output.LayerNorm.bias", 1, dH, &L->ln1_b) ||
            QW_LT("mlp.gated_layers.weight", 2, dgu, &L->gu_w) || QW_LT("mlp.wo.weight", 2, dHI, &L->down_w) ||
            QW_LT("mlp.wo.bias", 1, dH, &L->down_b) || QW_LT("mlp.layernorm.weight", 1, dH, &L->ln2) ||
            QW_LT("mlp.layernorm.bias", 1, dH, &L->ln2_b))
            return rc;
    }
#undef QW_LT
    return 0;
}

/* T5's encoder (T5EncoderModel, as sentence-transformers saves it):
 * "encoder.embed_tokens.weight" or the tied "shared.weight",
 * "encoder.block.N.layer.0.SelfAttention.{q,k,v,o}.weight",
 * "...layer.0.layer_norm.weight" (before attention), block 0's
 * "...SelfAttention.relative_attention_bias.weight" [32, heads] (shared by
 * every layer), "...layer.1.DenseReluDense.wi.weight" (relu) or
 * ".wi_0" / ".wi_1" (gated-gelu, stacked gate|up), ".wo.weight",
 * "...layer.1.layer_norm.weight", "encoder.final_layer_norm.weight".
 * No biases anywhere. */
static int qw_walk_t5(qw_ctx *c, const eng_config *cfg, eng_qwen3_weights *w) {
    static const char *const qkv[3] = {"layer.0.SelfAttention.q", "layer.0.SelfAttention.k", "layer.0.SelfAttention.v"};
    static const char *const gu[2] = {"layer.1.DenseReluDense.wi_0", "layer.1.DenseReluDense.wi_1"};
    const posy_model_info *in = &cfg->info;
    const int64_t H = in->hidden, I = in->intermediate, A = (int64_t)in->heads * cfg->head_dim;
    int64_t dv[2] = {in->vocab, H}, dH[1] = {H}, dHA[2] = {H, A}, dIH[2] = {I, H}, dHI[2] = {H, I},
            drel[2] = {cfg->rel_buckets, in->heads}, qkv_rows[3] = {A, A, A}, gu_rows[2] = {I, I};
    const char *emb = eng_st_find(c->st, "encoder.embed_tokens.weight") ? "encoder.embed_tokens.weight" : "shared.weight";
    char n[160], lp[64];
    int rc;
    if ((rc = qw_take(c, emb, 2, dv, &w->embed)) ||
        (rc = qw_take(c, "encoder.final_layer_norm.weight", 1, dH, &w->norm)) ||
        (rc = qw_take(c, "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", 2, drel,
                      &w->rel_bias)))
        return rc;
#define T5_T(suffix, nd, dims, dst) (snprintf(n, sizeof n, "%s%s", lp, suffix), rc = qw_take(c, n, nd, dims, dst))
    for (int i = 0; i < in->layers; i++) {
        eng_qwen3_layer *L = &w->layers[i];
        snprintf(lp, sizeof lp, "encoder.block.%d.", i);
        if ((rc = qw_stack(c, lp, qkv, qkv_rows, 3, H, ".weight", &L->qkv_w)) ||
            T5_T("layer.0.SelfAttention.o.weight", 2, dHA, &L->o_w) ||
            T5_T("layer.0.layer_norm.weight", 1, dH, &L->ln1) || T5_T("layer.1.layer_norm.weight", 1, dH, &L->ln2) ||
            (cfg->mlp_plain ? T5_T("layer.1.DenseReluDense.wi.weight", 2, dIH, &L->gu_w)
                            : (rc = qw_stack(c, lp, gu, gu_rows, 2, H, ".weight", &L->gu_w))) ||
            T5_T("layer.1.DenseReluDense.wo.weight", 2, dHI, &L->down_w))
            return rc;
    }
#undef T5_T
    return 0;
}

static int qw_walk(qw_ctx *c, void *arg) {
    const qw_walk_arg *a = arg;
    const eng_config *cfg = a->cfg;
    int bias = a->bias, o_bias = a->o_bias;
    eng_qwen3_weights *w = a->w;
    if (cfg->modernbert) return qw_walk_modernbert(c, cfg, w);
    if (cfg->t5) return qw_walk_t5(c, cfg, w);
    if (cfg->nomic) return qw_walk_nomic(c, cfg, w);
    if (cfg->gte) return qw_walk_gte(c, cfg, w);
    if (cfg->jina) return qw_walk_jina(c, cfg, w);
    int64_t dv[2] = {cfg->info.vocab, cfg->info.hidden};
    int rc;
    if ((rc = qw_take(c, "embed_tokens.weight", 2, dv, &w->embed)) ||
        (rc = qw_norm(c, "norm.weight", cfg->info.hidden, cfg->gemma, &w->norm)))
        return rc;
    for (int i = 0; i < cfg->info.layers; i++)
        if ((rc = qw_layer(c, cfg, bias, o_bias, i, &w->layers[i]))) return rc;
    return 0;
}

/* Gemma's norm weight w -> (1 + w) * scale, in fp32 as transformers
 * computes (1.0 + weight.float()) */
static void gemma_plus_one(float *v, int n, double scale) {
    for (int i = 0; i < n; i++) v[i] = (float)((1.0f + v[i]) * scale);
}

int eng_qwen3_weights_load(eng_qwen3_weights *w, const eng_config *cfg, const eng_st_file *st, posy_err *err) {
    memset(w, 0, sizeof *w);
    if (cfg->head_dim < 2 || cfg->head_dim > 1024 || cfg->head_dim % 2)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s/config.json: head_dim %d is not supported (even, 2..1024)",
                            cfg->info.model_dir, cfg->head_dim);
    if (!cfg->modernbert && !cfg->t5 && !cfg->post_ln && cfg->act != (cfg->gemma ? ENG_ACT_GELU_TANH : ENG_ACT_SILU))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s/config.json: %s with hidden_act other than %s is not "
                            "supported", cfg->info.model_dir, cfg->model_type,
                            cfg->gemma ? "gelu_pytorch_tanh" : "silu");
    qw_ctx c = {st, NULL, 0, NULL, 0, err};
    const char *emb = cfg->modernbert ? "embeddings.tok_embeddings.weight" : cfg->t5 ? "shared.weight"
                      : cfg->post_ln ? "embeddings.word_embeddings.weight" : "embed_tokens.weight";
    char en[96], nn[96];
    snprintf(en, sizeof en, "model.%s", emb);
    /* GTE saved from a NewFor... head class; JinaBERT from a JinaBertFor... one */
    snprintf(nn, sizeof nn, "%s%s", cfg->jina ? "bert." : "new.", emb);
    c.prefix = eng_st_find(st, emb)                              ? ""
               : eng_st_find(st, en)                             ? "model."
               : (cfg->gte || cfg->jina) && eng_st_find(st, nn) ? (cfg->jina ? "bert." : "new.")
                                                                 : NULL;
    if (cfg->t5) c.prefix = eng_st_find(st, emb) || eng_st_find(st, "encoder.embed_tokens.weight") ? "" : NULL;
    if (!c.prefix)
        return posy_err_set(err, POSY_E_INVALID, "%s: tensor %s not found (with or without a model. "
                            "prefix): not a %s checkpoint?", st->path, emb, cfg->model_type);
    char bn[96];
    snprintf(bn, sizeof bn, "%slayers.0.self_attn.q_proj.bias", c.prefix);
    int bias = eng_st_find(st, bn) != NULL;
    snprintf(bn, sizeof bn, "%slayers.0.self_attn.o_proj.bias", c.prefix);
    int o_bias = eng_st_find(st, bn) != NULL;
    w->n_layers = cfg->info.layers;
    w->layers = calloc((size_t)w->n_layers, sizeof *w->layers);
    if (!w->layers) return posy_err_set(err, POSY_E_NOMEM, "out of memory for %d layers", w->n_layers);
    qw_walk_arg a = {cfg, bias, o_bias, w};
    int rc = eng_st_view_build(&c, qw_walk, &a, &w->owned, &w->owned_floats);
    if (rc) {
        eng_qwen3_weights_free(w);
        return rc;
    }
    if (cfg->modernbert && !cfg->norm_bias) { /* the LayerNorms' missing biases */
        w->zeros = calloc((size_t)cfg->info.hidden, sizeof *w->zeros);
        if (!w->zeros) {
            eng_qwen3_weights_free(w);
            return posy_err_set(err, POSY_E_NOMEM, "out of memory");
        }
        w->emb_norm_b = w->norm_b = w->zeros;
        for (int l = 0; l < w->n_layers; l++) w->layers[l].ln1_b = w->layers[l].ln2_b = w->zeros;
    }
    if (cfg->t5) { /* T5 does not scale its scores: sqrt(d) in Wq undoes the engine's 1/sqrt(d) */
        const size_t rows = (size_t)cfg->info.heads * (size_t)cfg->head_dim, H = (size_t)cfg->info.hidden;
        const float sc = (float)sqrt((double)cfg->head_dim); /* exact for d = 4^k (64 in every T5) */
        for (int l = 0; l < w->n_layers; l++) {
            float *q = (float *)w->layers[l].qkv_w; /* a stack: always ours */
            for (size_t i = 0; i < rows * H; i++) q[i] *= sc;
        }
    }
    if (cfg->gemma) { /* (1 + w): the copies are ours (qw_norm) */
        const int H = cfg->info.hidden, d = cfg->head_dim;
        gemma_plus_one((float *)w->norm, H, 1.0);
        for (int l = 0; l < w->n_layers; l++) {
            eng_qwen3_layer *L = &w->layers[l];
            gemma_plus_one((float *)L->ln1, H, 1.0);
            gemma_plus_one((float *)L->ln2, H, 1.0);
            gemma_plus_one((float *)L->post_attn, H, 1.0);
            gemma_plus_one((float *)L->post_mlp, H, 1.0);
            gemma_plus_one((float *)L->q_norm, d, cfg->q_scale);
            gemma_plus_one((float *)L->k_norm, d, 1.0);
        }
    }
    return 0;
}

void eng_qwen3_weights_free(eng_qwen3_weights *w) {
    free(w->owned);
    free(w->zeros);
    free(w->layers);
    memset(w, 0, sizeof *w);
}

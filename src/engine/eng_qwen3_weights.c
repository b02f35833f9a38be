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
 */
#include "eng_internal.h"

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

static int qw_layer(qw_ctx *c, const eng_config *cfg, int bias, int o_bias, int i, eng_qwen3_layer *L) {
    static const char *const qkv[3] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};
    static const char *const gu[2] = {"mlp.gate_proj", "mlp.up_proj"};
    const posy_model_info *in = &cfg->info;
    int64_t H = in->hidden, d = cfg->head_dim, I = in->intermediate, A = (int64_t)in->heads * d;
    int64_t qkv_rows[3] = {A, (int64_t)in->kv_heads * d, (int64_t)in->kv_heads * d}, gu_rows[2] = {I, I};
    int64_t dHA[2] = {H, A}, dHI[2] = {H, I}, dd[1] = {d}, dH[1] = {H};
    char lp[64], n[128];
    int rc;
    snprintf(lp, sizeof lp, "layers.%d.", i);
#define QW_T(suffix, nd, dims, dst) (snprintf(n, sizeof n, "%s%s", lp, suffix), qw_take(c, n, nd, dims, dst))
    if ((rc = qw_stack(c, lp, qkv, qkv_rows, 3, H, ".weight", &L->qkv_w)) ||
        (bias && (rc = qw_stack(c, lp, qkv, qkv_rows, 3, 0, ".bias", &L->qkv_b))) ||
        (rc = QW_T("self_attn.o_proj.weight", 2, dHA, &L->o_w)) ||
        (o_bias && (rc = QW_T("self_attn.o_proj.bias", 1, dH, &L->o_b))) ||
        (cfg->qk_norm && (rc = QW_T("self_attn.q_norm.weight", 1, dd, &L->q_norm))) ||
        (cfg->qk_norm && (rc = QW_T("self_attn.k_norm.weight", 1, dd, &L->k_norm))) ||
        (rc = QW_T("input_layernorm.weight", 1, dH, &L->ln1)) ||
        (rc = QW_T("post_attention_layernorm.weight", 1, dH, &L->ln2)) ||
        (rc = qw_stack(c, lp, gu, gu_rows, 2, H, ".weight", &L->gu_w)) ||
        (rc = QW_T("mlp.down_proj.weight", 2, dHI, &L->down_w)))
        return rc;
#undef QW_T
    return 0;
}

typedef struct {
    const eng_config *cfg;
    int bias, o_bias;
    eng_qwen3_weights *w;
} qw_walk_arg;

static int qw_walk(qw_ctx *c, void *arg) {
    const qw_walk_arg *a = arg;
    const eng_config *cfg = a->cfg;
    int bias = a->bias, o_bias = a->o_bias;
    eng_qwen3_weights *w = a->w;
    int64_t dv[2] = {cfg->info.vocab, cfg->info.hidden}, dH[1] = {cfg->info.hidden};
    int rc;
    if ((rc = qw_take(c, "embed_tokens.weight", 2, dv, &w->embed)) || (rc = qw_take(c, "norm.weight", 1, dH, &w->norm)))
        return rc;
    for (int i = 0; i < cfg->info.layers; i++)
        if ((rc = qw_layer(c, cfg, bias, o_bias, i, &w->layers[i]))) return rc;
    return 0;
}

int eng_qwen3_weights_load(eng_qwen3_weights *w, const eng_config *cfg, const eng_st_file *st, posy_err *err) {
    memset(w, 0, sizeof *w);
    if (cfg->head_dim < 2 || cfg->head_dim > 1024 || cfg->head_dim % 2)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s/config.json: head_dim %d is not supported (even, 2..1024)",
                            cfg->info.model_dir, cfg->head_dim);
    if (cfg->act != ENG_ACT_SILU)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s/config.json: %s with hidden_act other than silu is not "
                            "supported", cfg->info.model_dir, cfg->model_type);
    qw_ctx c = {st, NULL, 0, NULL, 0, err};
    c.prefix = eng_st_find(st, "embed_tokens.weight") ? "" : eng_st_find(st, "model.embed_tokens.weight") ? "model." : NULL;
    if (!c.prefix)
        return posy_err_set(err, POSY_E_INVALID, "%s: tensor embed_tokens.weight not found (with or without a model. "
                            "prefix): not a %s checkpoint?", st->path, cfg->model_type);
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
    if (rc) eng_qwen3_weights_free(w);
    return rc;
}

void eng_qwen3_weights_free(eng_qwen3_weights *w) {
    free(w->owned);
    free(w->layers);
    memset(w, 0, sizeof *w);
}

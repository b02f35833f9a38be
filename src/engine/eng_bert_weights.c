/* eng_bert_weights: the fp32 view of a BERT-family encoder's weights.
 *
 * Zero copy where possible: an F32 tensor whose data is 4-byte aligned in
 * the mapping is used in place.  Everything else (F16/BF16 tensors, F32 at
 * an odd offset, and the Q|K|V stacks that let one GEMM compute all three
 * projections) goes into ONE allocation, `owned`, sized exactly by a first
 * pass that finds and checks every tensor without writing anything; the
 * second pass fills it.  Both passes walk the same list (bw_walk, run by
 * eng_st_view_build), so the sizing can never disagree with the filling.
 *
 * Tensor names differ by family (BERT/RoBERTa/XLM-R share one scheme,
 * DistilBERT, MPNet and DeBERTa have their own; DeBERTa v1's fused in_proj
 * is split into v2's Q|K|V stack here) and by the head the checkpoint was saved with
 * ("bert.", "roberta.", "model.", ...); the prefix is found once from the
 * word embeddings.  Every shape is checked against config.json, and an
 * error names the file and the full tensor name.
 */
#include "eng_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *emb_ln, *type_emb, *layer;
    const char *q, *k, *v, *ao, *ln1, *up, *down, *ln2;
} bw_names;

static const bw_names bw_bert = {
    "embeddings.LayerNorm", "embeddings.token_type_embeddings.weight", "encoder.layer.%d.",
    "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
    "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm",
};

static const bw_names bw_distilbert = {
    "embeddings.LayerNorm", NULL, "transformer.layer.%d.",
    "attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
    "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm",
};

/* MPNet: BERT's layer layout under its own names, plus one relative
 * position bias table for all layers (eng_relpos.h) */
static const bw_names bw_mpnet = {
    "embeddings.LayerNorm", NULL, "encoder.layer.%d.",
    "attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o",
    "attention.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm",
};

/* DeBERTa v2 / v3: BERT's layout with _proj names; the relative table and
 * the pos_key / pos_query projections come from bw_deberta_rel / _pos_proj */
static const bw_names bw_deberta = {
    "embeddings.LayerNorm", "embeddings.token_type_embeddings.weight", "encoder.layer.%d.",
    "attention.self.query_proj", "attention.self.key_proj", "attention.self.value_proj", "attention.output.dense",
    "attention.output.LayerNorm", "intermediate.dense", "output.dense", "output.LayerNorm",
};

static const char *const bw_prefixes[] = {"", "bert.", "roberta.", "xlm-roberta.", "xlm_roberta.",
                                          "camembert.", "distilbert.", "mpnet.", "deberta.", "model.", "encoder."};

typedef eng_st_view bw_ctx;      /* prefix: "bert.", "roberta.", ... or "" */

/* prefix + name (+ alternative suffix for old LayerNorm gamma/beta names). */
static const eng_st_tensor *bw_find(bw_ctx *c, const char *name, const char *alt, char *full, size_t cap) {
    snprintf(full, cap, "%s%s", c->prefix, name);
    const eng_st_tensor *t = eng_st_find(c->st, full);
    if (!t && alt) {
        char a[512];
        snprintf(a, sizeof a, "%s%s", c->prefix, alt);
        t = eng_st_find(c->st, a);
    }
    return t;
}

static int bw_lookup(bw_ctx *c, const char *name, const char *alt, int ndim, const int64_t *dims,
                     const eng_st_tensor **out) {
    char full[512];
    *out = bw_find(c, name, alt, full, sizeof full);
    if (!*out) return posy_err_set(c->err, POSY_E_INVALID, "%s: tensor %s not found", c->st->path, full);
    return eng_st_check(c->st, *out, ndim, dims, c->err);
}

/* One tensor: in place when possible, else converted into owned. */
static int bw_take(bw_ctx *c, const char *name, const char *alt, int ndim, const int64_t *dims,
                   const float **dst) {
    const eng_st_tensor *t;
    int rc = bw_lookup(c, name, alt, ndim, dims, &t);
    if (!rc) eng_st_view_take(c, t, dst);
    return rc;
}

/* Q, K and V of one projection (".weight" [H,H] or ".bias" [H]) stacked
 * one after another into owned. */
static int bw_take_qkv(bw_ctx *c, const bw_names *n, const char *lp, const char *suffix, int ndim,
                       const int64_t *dims, const float **dst) {
    const char *parts[3] = {n->q, n->k, n->v};
    size_t start = c->used;
    for (int i = 0; i < 3; i++) {
        char name[512];
        const eng_st_tensor *t;
        snprintf(name, sizeof name, "%s%s%s", lp, parts[i], suffix);
        int rc = bw_lookup(c, name, NULL, ndim, dims, &t);
        if (rc) return rc;
        eng_st_view_append(c, t);
    }
    if (c->fill) *dst = c->owned + start;
    return 0;
}

static int bw_take_ln(bw_ctx *c, const char *lp, const char *base, int64_t H, const float **g, const float **b) {
    char w[512], wa[512], bi[512], ba[512];
    int64_t d[1] = {H};
    snprintf(w, sizeof w, "%s%s.weight", lp, base);
    snprintf(wa, sizeof wa, "%s%s.gamma", lp, base);
    snprintf(bi, sizeof bi, "%s%s.bias", lp, base);
    snprintf(ba, sizeof ba, "%s%s.beta", lp, base);
    int rc = bw_take(c, w, wa, 1, d, g);
    return rc ? rc : bw_take(c, bi, ba, 1, d, b);
}

static int bw_take_linear(bw_ctx *c, const char *lp, const char *base, int64_t out, int64_t in,
                          const float **w, const float **b) {
    char wn[512], bn[512];
    int64_t dw[2] = {out, in}, db[1] = {out};
    snprintf(wn, sizeof wn, "%s%s.weight", lp, base);
    snprintf(bn, sizeof bn, "%s%s.bias", lp, base);
    int rc = bw_take(c, wn, NULL, 2, dw, w);
    return rc ? rc : bw_take(c, bn, NULL, 1, db, b);
}

/* DeBERTa v1's attention input: one in_proj [3H, H] without a bias, its
 * rows head by head (each head's d query rows, d key rows, d value rows:
 * transformers views the product as [heads, 3d] and splits the last
 * axis), plus q_bias and v_bias [H].  Read into v2's Q|K|V stack, the key
 * bias zero. */
static int bw_deberta_v1_qkv(bw_ctx *c, const eng_config *cfg, const char *lp, eng_bert_layer *L) {
    const int64_t H = cfg->info.hidden, heads = cfg->info.heads, d = H / heads;
    const int64_t dw[2] = {3 * H, H}, db[1] = {H};
    char name[512];
    const eng_st_tensor *w, *qb, *vb;
    int rc;
    snprintf(name, sizeof name, "%sattention.self.in_proj.weight", lp);
    if ((rc = bw_lookup(c, name, NULL, 2, dw, &w))) return rc;
    snprintf(name, sizeof name, "%sattention.self.q_bias", lp);
    if ((rc = bw_lookup(c, name, NULL, 1, db, &qb))) return rc;
    snprintf(name, sizeof name, "%sattention.self.v_bias", lp);
    if ((rc = bw_lookup(c, name, NULL, 1, db, &vb))) return rc;
    size_t start = c->used;
    for (int part = 0; part < 3; part++)   /* Q, then K, then V: head h's rows h*3d + part*d .. + d */
        for (int64_t h = 0; h < heads; h++)
            eng_st_view_append_range(c, w, (size_t)((h * 3 + part) * d * H), (size_t)(d * H));
    eng_st_view_release(c, w);
    if (c->fill) L->qkv_w = c->owned + start;
    start = c->used;
    eng_st_view_append(c, qb);
    eng_st_view_append_zeros(c, (size_t)H);
    eng_st_view_append(c, vb);
    if (c->fill) L->qkv_b = c->owned + start;
    return 0;
}

static int bw_layer(bw_ctx *c, const bw_names *n, const eng_config *cfg, int i, eng_bert_layer *L) {
    char lp[64];
    int64_t H = cfg->info.hidden, I = cfg->info.intermediate;
    int64_t dw[2] = {H, H}, db[1] = {H};
    snprintf(lp, sizeof lp, n->layer, i);
    int rc;
    if (cfg->deberta && cfg->deb.v1) {
        if ((rc = bw_deberta_v1_qkv(c, cfg, lp, L))) return rc;
    } else if ((rc = bw_take_qkv(c, n, lp, ".weight", 2, dw, &L->qkv_w)) ||
               (rc = bw_take_qkv(c, n, lp, ".bias", 1, db, &L->qkv_b))) {
        return rc;
    }
    if ((rc = bw_take_linear(c, lp, n->ao, H, H, &L->ao_w, &L->ao_b)) ||
        (rc = bw_take_ln(c, lp, n->ln1, H, &L->ln1_g, &L->ln1_b)) ||
        (rc = bw_take_linear(c, lp, n->up, I, H, &L->up_w, &L->up_b)) ||
        (rc = bw_take_linear(c, lp, n->down, H, I, &L->down_w, &L->down_b)) ||
        (rc = bw_take_ln(c, lp, n->ln2, H, &L->ln2_g, &L->ln2_b)))
        return rc;
    return 0;
}

/* DeBERTa's relative embeddings [2 * span, H] and their LayerNorm */
static int bw_deberta_rel(bw_ctx *c, const eng_config *cfg, eng_bert_weights *w) {
    int64_t H = cfg->info.hidden, dr[2] = {2 * (int64_t)cfg->deb.span, H};
    int rc = bw_take(c, "encoder.rel_embeddings.weight", NULL, 2, dr, &w->rel_emb);
    if (!rc && cfg->deb.rel_ln) rc = bw_take_ln(c, "", "encoder.LayerNorm", H, &w->rel_ln_g, &w->rel_ln_b);
    return rc;
}

/* Without share_att_key: the layer's own projections of the relative
 * table, pos_key_proj for c2p and pos_query_proj for p2c (v1: pos_proj,
 * without a bias, and pos_q_proj) */
static int bw_deberta_pos_proj(bw_ctx *c, const eng_config *cfg, int i, eng_bert_layer *L) {
    char lp[64];
    int64_t H = cfg->info.hidden;
    int rc = 0;
    if (cfg->deb.share_key) return 0;
    snprintf(lp, sizeof lp, "encoder.layer.%d.", i);
    if (cfg->deb.v1) {
        int64_t dw[2] = {H, H};
        char name[512];
        snprintf(name, sizeof name, "%sattention.self.pos_proj.weight", lp);
        if (cfg->deb.c2p && !(rc = bw_take(c, name, NULL, 2, dw, &L->pk_w))) {
            if (c->fill) L->pk_b = c->owned + c->used;
            eng_st_view_append_zeros(c, (size_t)H);
        }
        if (!rc && cfg->deb.p2c) rc = bw_take_linear(c, lp, "attention.self.pos_q_proj", H, H, &L->pq_w, &L->pq_b);
        return rc;
    }
    if (cfg->deb.c2p) rc = bw_take_linear(c, lp, "attention.self.pos_key_proj", H, H, &L->pk_w, &L->pk_b);
    if (!rc && cfg->deb.p2c) rc = bw_take_linear(c, lp, "attention.self.pos_query_proj", H, H, &L->pq_w, &L->pq_b);
    return rc;
}

typedef struct {
    const bw_names *n;
    const eng_config *cfg;
    eng_bert_weights *w;
} bw_walk_arg;

/* Every tensor of the model, in one fixed order (both passes). */
static int bw_walk(bw_ctx *c, void *arg) {
    const bw_walk_arg *a = arg;
    const bw_names *n = a->n;
    const eng_config *cfg = a->cfg;
    eng_bert_weights *w = a->w;
    int64_t H = cfg->info.hidden;
    /* a hand-built config (tests, harnesses) may leave the stored size unset */
    int64_t rows = cfg->max_position_embeddings ? cfg->max_position_embeddings
                                                : (int64_t)cfg->info.max_positions + cfg->position_offset;
    int64_t dv[2] = {cfg->info.vocab, H}, dp[2] = {rows, H};
    int64_t dt[2] = {cfg->info.type_vocab, H};
    int rc;
    const int pos_table = !cfg->deberta || cfg->deb.pos_input;   /* DeBERTa v3: relative positions only */
    if ((rc = bw_take(c, "embeddings.word_embeddings.weight", NULL, 2, dv, &w->word_emb)) ||
        (pos_table && (rc = bw_take(c, "embeddings.position_embeddings.weight", NULL, 2, dp, &w->pos_emb))) ||
        (rc = bw_take_ln(c, "", n->emb_ln, H, &w->emb_ln_g, &w->emb_ln_b)))
        return rc;
    if (n->type_emb && cfg->info.type_vocab > 0 && (rc = bw_take(c, n->type_emb, NULL, 2, dt, &w->type_emb)))
        return rc;
    if (cfg->rel_buckets) {
        int64_t dr[2] = {cfg->rel_buckets, cfg->info.heads};
        if ((rc = bw_take(c, "encoder.relative_attention_bias.weight", NULL, 2, dr, &w->rel_bias))) return rc;
    }
    if (cfg->deberta && cfg->deb.rel && (rc = bw_deberta_rel(c, cfg, w))) return rc;
    for (int i = 0; i < cfg->info.layers; i++)
        if ((rc = bw_layer(c, n, cfg, i, &w->layers[i])) ||
            (cfg->deberta && cfg->deb.rel && (rc = bw_deberta_pos_proj(c, cfg, i, &w->layers[i]))))
            return rc;
    return 0;
}

static const char *bw_prefix(const eng_st_file *st) {
    for (size_t i = 0; i < sizeof bw_prefixes / sizeof bw_prefixes[0]; i++) {
        char full[256];
        snprintf(full, sizeof full, "%sembeddings.word_embeddings.weight", bw_prefixes[i]);
        if (eng_st_find(st, full)) return bw_prefixes[i];
    }
    return NULL;
}

int eng_bert_weights_load(eng_bert_weights *w, const eng_config *cfg, const eng_st_file *st, posy_err *err) {
    memset(w, 0, sizeof *w);
    if (!strcmp(cfg->info.arch, "qwen3"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: model_type %s is not a BERT-family encoder", st->path,
                            cfg->model_type);
    const bw_names *n = !strcmp(cfg->info.arch, "distilbert") ? &bw_distilbert
                        : !strcmp(cfg->info.arch, "mpnet")    ? &bw_mpnet
                        : cfg->deberta                        ? &bw_deberta
                                                              : &bw_bert;
    bw_ctx c = {st, bw_prefix(st), 0, NULL, 0, err};
    if (!c.prefix)
        return posy_err_set(err, POSY_E_INVALID,
                            "%s: tensor embeddings.word_embeddings.weight not found (with or without a bert., "
                            "roberta., model., ... prefix): not a %s checkpoint?", st->path, cfg->model_type);
    w->n_layers = cfg->info.layers;
    w->layers = calloc((size_t)w->n_layers, sizeof *w->layers);
    if (!w->layers) return posy_err_set(err, POSY_E_NOMEM, "out of memory for %d layers", w->n_layers);
    bw_walk_arg a = {n, cfg, w};
    int rc = eng_st_view_build(&c, bw_walk, &a, &w->owned, &w->owned_floats);
    if (rc) {
        eng_bert_weights_free(w);
        return rc;
    }
    /* pos_emb stays the whole stored table: backends add position_offset. */
    return 0;
}

void eng_bert_weights_free(eng_bert_weights *w) {
    free(w->owned);
    free(w->layers);
    memset(w, 0, sizeof *w);
}

/* eng_deberta: DeBERTa v2 / v3's disentangled attention, the parts every
 * backend shares (the settings and the relative position index).  DeBERTa
 * v1 (model_type deberta: deberta-base / -large, their MNLI classifiers)
 * is the same attention without buckets, shared keys or a LayerNormed
 * table; its weights are read into this form at load.
 *
 * DeBERTa (deberta-v2: cross-encoder/nli-deberta-v3-*, mxbai-rerank-*-v1,
 * the prompt-injection and zero-shot classifiers) has BERT's post-LN layer
 * but no absolute positions (v3): each attention score adds to q_i . k_j a
 * content-to-position term q_i . Kr[c] and a position-to-content term
 * k_j . Qr[c], where Kr and Qr are the layer's key and query projections
 * of a table of 2 * span relative embeddings (LayerNormed once), and c is
 * the index of the distance i - j: with position buckets, distances of
 * span / 2 or more go to logarithmic buckets; then shifted by span and
 * clamped to the table.  All three terms are divided by sqrt(d * (1 +
 * number of position terms)).  transformers' gathers index the p2c term by
 * -bucket(j - i), which is bucket(i - j) since the buckets are odd, so one
 * index serves both terms.
 *
 * The log bucket follows transformers' make_log_bucket_position in
 * float32 (logf of the distance over half the buckets, over logf of
 * (max_relative_positions - 1) / half, times half - 1, rounded up);
 * test_eng_deberta checks every distance of several settings against
 * torch's own values.
 */
#ifndef ENG_DEBERTA_H
#define ENG_DEBERTA_H

#include <math.h>
#include <stdlib.h>

typedef struct eng_deberta_cfg {
    int rel;          /* relative_attention: the position terms are on */
    int c2p, p2c;     /* pos_att_type names them */
    int buckets;      /* position_buckets; <= 0: none (the distance itself, clamped) */
    int max_rel;      /* max_relative_positions (max_position_embeddings when the config says < 1) */
    int span;         /* buckets if > 0, else max_rel: the table has 2 * span rows */
    int share_key;    /* share_att_key: Kr / Qr through the layer's own key / query projections,
                         else through pos_key_proj / pos_query_proj */
    int rel_ln;       /* norm_rel_ebd has "layer_norm": the table LayerNormed (encoder.LayerNorm) */
    int pos_input;    /* position_biased_input: absolute position embeddings added to the input too */
    int v1;           /* DeBERTa v1 (model_type deberta): one fused in_proj, q_bias / v_bias, pos_proj /
                         pos_q_proj; read into v2's form at load (eng_bert_weights.c) */
    int n_types;      /* v1: how many names pos_att_type lists (transformers' v1 scales by 1 + that) */
} eng_deberta_cfg;

/* transformers' make_log_bucket_position for one distance (0 < buckets,
 * 0 < max_rel) */
static inline int eng_deberta_log_bucket(int rel, int buckets, int max_rel) {
    const int mid = buckets / 2, a = abs(rel);
    if (a <= mid) return rel;
    const float lp = ceilf(logf((float)a / (float)mid) / logf((float)((double)(max_rel - 1) / mid)) * (float)(mid - 1)) +
                     (float)mid;
    return rel < 0 ? -(int)lp : (int)lp;
}

/* The row of the relative table that distance rel = query - key position
 * reads, in [0, 2 * span). */
static inline int eng_deberta_index(const eng_deberta_cfg *c, int rel) {
    int r = c->buckets > 0 && c->max_rel > 0 ? eng_deberta_log_bucket(rel, c->buckets, c->max_rel) : rel;
    r += c->span;
    return r < 0 ? 0 : r > 2 * c->span - 1 ? 2 * c->span - 1 : r;
}

/* The index of every distance -(max_len - 1) .. max_len - 1: out[(max_len
 * - 1) + rel], 2 * max_len - 1 ints. */
static inline void eng_deberta_index_table(const eng_deberta_cfg *c, int max_len, int *out) {
    for (int r = -(max_len - 1); r <= max_len - 1; r++) out[r + max_len - 1] = eng_deberta_index(c, r);
}

/* The score scale's factor: 1 + the position terms named (also when
 * relative_attention is off: transformers counts pos_att_type alone); v1
 * counts every name pos_att_type lists, as transformers' DeBERTa does. */
static inline int eng_deberta_scale_factor(const eng_deberta_cfg *c) {
    return 1 + (c->v1 ? c->n_types : c->c2p + c->p2c);
}

#endif

/* tok_post: post-processing (special tokens, type ids) and truncation.
 *
 * Every processor is stored as a template (BertProcessing and
 * RobertaProcessing are converted at load), so emitting is one loop.
 * Truncation follows HF: the budget is max_len minus the specials the
 * processor will add, applied before the specials with LongestFirst for
 * pairs; specials get offsets (0, 0) and special mask 1.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static int count_added(const tok_tpl_item *it, int n) {
    int c = 0;
    for (int i = 0; i < n; i++) if (it[i].seq == 0) c += it[i].n_ids;
    return c;
}

int tok_post_added(const tok_post *p, int pair) {
    if (p->type == TOK_POST_NONE || p->type == TOK_POST_BYTELEVEL) return 0;
    if (p->type == TOK_POST_SEQUENCE) {
        int c = 0;
        for (int i = 0; i < p->n_items; i++) c += tok_post_added(&p->items[i], pair);
        return c;
    }
    return pair ? count_added(p->pair, p->n_pair) : count_added(p->single, p->n_single);
}

void tok_post_free(tok_post *p) {
    for (int i = 0; i < p->n_single; i++) free(p->single[i].ids);
    for (int i = 0; i < p->n_pair; i++) free(p->pair[i].ids);
    free(p->single);
    free(p->pair);
    for (int i = 0; i < p->n_items; i++) tok_post_free(&p->items[i]);
    free(p->items);
    memset(p, 0, sizeof *p);
}

static void truncate_toks(tok_toks *t, size_t n, tok_trunc_dir dir) {
    if (t->n <= n) return;
    if (dir == TOK_TRUNC_LEFT) memmove(t->t, t->t + (t->n - n), n * sizeof *t->t);
    t->n = n;
}

/* HF's truncate_encodings with strategy LongestFirst. */
static void truncate_pair(tok_toks *a, tok_toks *b, size_t ml, tok_trunc_dir dir) {
    size_t total = a->n + (b ? b->n : 0);
    if (total <= ml) return;
    if (!b) { truncate_toks(a, ml, dir); return; }
    size_t n1 = a->n, n2 = b->n;
    int swap = n1 > n2;
    if (swap) { size_t x = n1; n1 = n2; n2 = x; }
    if (n1 > ml) n2 = n1;
    else n2 = n1 > ml - n1 ? n1 : ml - n1;
    if (n1 + n2 > ml) { n1 = ml / 2; n2 = n1 + ml % 2; }
    if (swap) { size_t x = n1; n1 = n2; n2 = x; }
    truncate_toks(a, n1, dir);
    truncate_toks(b, n2, dir);
}

static int enc_reserve(tok_encoding *e, int n) {
    if (n <= e->cap) return 0;
    int nc = e->cap ? e->cap : 64;
    while (nc < n) nc *= 2;
    int32_t *ids = realloc(e->ids, (size_t)nc * sizeof *ids);
    if (ids) e->ids = ids;
    int32_t *ty = realloc(e->type_ids, (size_t)nc * sizeof *ty);
    if (ty) e->type_ids = ty;
    uint8_t *sm = realloc(e->special_mask, (size_t)nc);
    if (sm) e->special_mask = sm;
    int32_t *of = realloc(e->offsets, (size_t)nc * 2 * sizeof *of);
    if (of) e->offsets = of;
    if (!ids || !ty || !sm || !of) return -1;
    e->cap = nc;
    return 0;
}

static void emit(tok_encoding *e, int32_t id, int type, int special, uint32_t s, uint32_t en) {
    int i = e->n++;
    e->ids[i] = id;
    e->type_ids[i] = type;
    e->special_mask[i] = (uint8_t)special;
    e->offsets[2 * i] = (int32_t)s;
    e->offsets[2 * i + 1] = (int32_t)en;
}

static const tok_post *template_of(const tok_post *p) {
    if (p->type == TOK_POST_TEMPLATE || p->type == TOK_POST_BERT || p->type == TOK_POST_ROBERTA) return p;
    if (p->type == TOK_POST_SEQUENCE)
        for (int i = 0; i < p->n_items; i++) {
            const tok_post *q = template_of(&p->items[i]);
            if (q) return q;
        }
    return NULL;
}

int tok_post_process(const tok_tokenizer *t, tok_toks *a, tok_toks *b, const tok_opts *o,
                     tok_encoding *enc, const char *ta, size_t la, const char *tb, size_t lb, posy_err *err) {
    const tok_post *tpl = o->add_special ? template_of(&t->post) : NULL;
    int n_added = tpl ? tok_post_added(tpl, b != NULL) : 0;
    if (o->max_len > 0) {
        if (o->max_len < n_added)
            return posy_err_set(err, POSY_E_INVALID, "max_len %d is less than the %d special tokens added",
                                o->max_len, n_added);
        truncate_pair(a, b, (size_t)(o->max_len - n_added), o->trunc_dir);
    }
    if (tok_post_trim_offsets(t, a, b, ta, la, tb, lb)) return posy_err_set(err, POSY_E_INTERNAL, "trim offsets");
    size_t total = a->n + (b ? b->n : 0) + (size_t)n_added;
    if (total > INT32_MAX / 4) return posy_err_set(err, POSY_E_TOO_LONG, "input too long");
    if (enc_reserve(enc, (int)total)) return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    enc->n = 0;
    enc->b_start = -1;
    if (!tpl) {
        for (size_t i = 0; i < a->n; i++) emit(enc, a->t[i].id, 0, 0, a->t[i].s, a->t[i].e);
        enc->b_start = enc->n;
        if (b) for (size_t i = 0; i < b->n; i++) emit(enc, b->t[i].id, 1, 0, b->t[i].s, b->t[i].e);
        return 0;
    }
    const tok_tpl_item *it = b ? tpl->pair : tpl->single;
    int n = b ? tpl->n_pair : tpl->n_single;
    for (int k = 0; k < n; k++) {
        if (it[k].seq == 0) {
            for (int j = 0; j < it[k].n_ids; j++) emit(enc, it[k].ids[j], it[k].type_id, 1, 0, 0);
        } else {
            const tok_toks *s = it[k].seq == 1 ? a : b;
            if (!s) continue;
            if (it[k].seq == 2) enc->b_start = enc->n;
            for (size_t i = 0; i < s->n; i++) emit(enc, s->t[i].id, it[k].type_id, 0, s->t[i].s, s->t[i].e);
        }
    }
    if (enc->b_start < 0) enc->b_start = enc->n;
    return 0;
}

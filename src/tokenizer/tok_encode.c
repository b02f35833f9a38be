/* tok_encode: the encoding pipeline, one sequence at a time.
 *
 *   raw text --(added tokens, not normalized)--> segments
 *   segment  --normalizer--> aligned buffer --(normalized added tokens)-->
 *   pieces   --pre-tokenizer--> pieces --model--> tokens
 *
 * then post-processing and truncation (tok_post.c).  All state is in the
 * caller's tok_encoding scratch; the tokenizer is only read.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "tok_regex.h"

/* Model one piece (through the cache), then map the tokens' piece-relative
 * byte offsets to spans of the original text. */
static int model_encode(const tok_model *m, const tok_buf *b, tok_piece pc, tok_toks *out,
                        tok_model_scratch *ms) {
    if (pc.len == 0) return 0;
    size_t first = out->n;
    uint32_t h = 0;
    const char *p = b->b + pc.off;
    int rc = tok_cache_get(ms, p, pc.len, out, &h);
    if (rc < 0) return POSY_E_NOMEM;
    if (rc == 0) {
        switch (m->kind) {
        case TOK_M_WORDPIECE: rc = tok_wordpiece_encode(m, b, pc.off, pc.len, out, ms); break;
        case TOK_M_BPE: rc = tok_bpe_encode(m, b, pc.off, pc.len, out, ms); break;
        case TOK_M_UNIGRAM: rc = tok_unigram_encode(m, b, pc.off, pc.len, out, ms); break;
        case TOK_M_WORDLEVEL: rc = tok_wordlevel_encode(m, b, pc.off, pc.len, out, ms); break;
        }
        if (rc) return rc;
        tok_cache_put(ms, p, pc.len, h, out, first);
    }
    const tok_span *al = b->al + pc.off;
    for (size_t i = first; i < out->n; i++) {
        tok_tok *k = &out->t[i];
        k->s = al[k->s].s;
        k->e = al[k->e - 1].e;
    }
    return 0;
}

/* Pre-tokenize and model the range [s, e) of the normalized buffer. */
static int run_range(const tok_tokenizer *t, tok_scratch *sc, uint32_t s, uint32_t e, int first,
                     uint32_t seg_start, tok_toks *out) {
    tok_pre_scratch *ps = &sc->ps;
    ps->pcs[0].n = 0;
    if (tok_pieces_push(&ps->pcs[0], s, e - s)) return POSY_E_NOMEM;
    tok_pre_state st = {&sc->nbuf, &ps->pcs[0], seg_start};
    if (t->pretok) {
        int rc = tok_pre_stage(t->pretok, &st, first, ps);
        if (rc) return rc;
    }
    for (size_t i = 0; i < st.pcs->n; i++) {
        int rc = model_encode(&t->model, st.buf, st.pcs->p[i], out, &sc->ms);
        if (rc) return rc;
    }
    return 0;
}

static int load_segment(tok_buf *b, const char *text, uint32_t s, uint32_t e) {
    b->len = 0;
    if (tok_buf_reserve(b, e - s)) return POSY_E_NOMEM;
    memcpy(b->b, text + s, e - s);
    for (uint32_t i = s; i < e;) {
        uint32_t l = (uint32_t)tok_utf8_len((uint8_t)text[i]);
        for (uint32_t k = 0; k < l; k++) b->al[i - s + k] = (tok_span){i, i + l};
        i += l;
    }
    b->len = e - s;
    return 0;
}

static int encode_segment(const tok_tokenizer *t, const char *text, tok_seg sg, tok_scratch *sc,
                          tok_toks *out) {
    int rc = load_segment(&sc->nbuf, text, sg.s, sg.e);
    if (!rc && t->normalizer) rc = tok_norm_apply(t->normalizer, &sc->nbuf, &sc->ns);
    if (rc) return rc;
    int first = sg.s == 0;
    if (!t->added_norm.any || sc->nbuf.len == 0)
        return run_range(t, sc, 0, (uint32_t)sc->nbuf.len, first, sg.s, out);
    rc = tok_added_split(&t->added_norm, sc->nbuf.b, sc->nbuf.len, &sc->segs2);
    for (size_t i = 0; !rc && i < sc->segs2.n; i++) {
        tok_seg x = sc->segs2.s[i];
        if (x.id >= 0)
            rc = tok_toks_push_added(out, x.id, sc->nbuf.al[x.s].s, sc->nbuf.al[x.e - 1].e, sc->nbuf.b + x.s,
                                     x.e - x.s) ? POSY_E_NOMEM : 0;
        else
            rc = run_range(t, sc, x.s, x.e, first && x.s == 0, sg.s, out);
    }
    return rc;
}

int tok_encode_seq(const tok_tokenizer *t, const char *text, size_t len, tok_scratch *sc,
                   tok_toks *out, posy_err *err) {
    out->n = 0;
    if (len >= UINT32_MAX / 2)
        return posy_err_set(err, POSY_E_TOO_LONG, "text of %zu bytes is too long to tokenize", len);
    size_t ok = tok_utf8_valid_prefix(text, len);
    if (ok != len)
        return posy_err_set(err, POSY_E_INVALID, "text is not valid UTF-8 (byte %zu)", ok);
    int rc = tok_added_split(&t->added, text, len, &sc->segs);
    for (size_t i = 0; !rc && i < sc->segs.n; i++) {
        tok_seg sg = sc->segs.s[i];
        if (sg.id >= 0) rc = tok_toks_push_added(out, sg.id, sg.s, sg.e, text + sg.s, sg.e - sg.s) ? POSY_E_NOMEM : 0;
        else rc = encode_segment(t, text, sg, sc, out);
    }
    if (rc == POSY_E_NOMEM) return posy_err_set(err, rc, "out of memory while tokenizing");
    if (rc == POSY_E_TOO_LONG) return posy_err_set(err, rc, "regex limit reached while tokenizing");
    if (rc == POSY_E_INVALID) return posy_err_set(err, rc, "the model has no unknown token for this text");
    if (rc) return posy_err_set(err, rc, "tokenizing failed (code %d)", rc);
    return 0;
}

static tok_scratch *scratch_of(tok_encoding *e) {
    if (!e->scratch) e->scratch = calloc(1, sizeof(tok_scratch));
    return e->scratch;
}

int tok_encode_with(const tok_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                    const tok_opts *opts, tok_encoding *out, tok_scratch *sc, posy_err *err) {
    out->n = 0;
    tok_opts def = {1, 0, TOK_TRUNC_RIGHT};
    if (!opts) opts = &def;
    int rc = tok_encode_seq(t, a, alen, sc, &sc->seq[0], err);
    if (!rc && b) rc = tok_encode_seq(t, b, blen, sc, &sc->seq[1], err);
    if (rc) return rc;
    return tok_post_process(t, &sc->seq[0], b ? &sc->seq[1] : NULL, opts, out, a, alen, b, blen, err);
}

int tok_encode_pair(const tok_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                    const tok_opts *opts, tok_encoding *out, posy_err *err) {
    tok_scratch *sc = scratch_of(out);
    if (!sc) return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    return tok_encode_with(t, a, alen, b, blen, opts, out, sc, err);
}

int tok_encode(const tok_tokenizer *t, const char *text, size_t len, const tok_opts *opts,
               tok_encoding *out, posy_err *err) {
    return tok_encode_pair(t, text, len, NULL, 0, opts, out, err);
}

void tok_scratch_free(tok_scratch *sc) {
    if (!sc) return;
    free(sc->segs.s); free(sc->segs2.s);
    tok_buf_free(&sc->nbuf);
    tok_buf_free(&sc->ns.tmp);
    free(sc->ns.cps.p);
    tok_regex_md_free(sc->ns.match.p);
    for (int i = 0; i < 3; i++) tok_buf_free(&sc->ps.buf[i]);
    for (int i = 0; i < 2; i++) { free(sc->ps.pcs[i].p); free(sc->seq[i].t); }
    tok_regex_md_free(sc->ps.match.p);
    free(sc->ps.marks.p);
    free(sc->ms.a.p); free(sc->ms.b.p); free(sc->ms.c.p); free(sc->ms.d.p);
    tok_cache_free(sc->ms.cache);
    free(sc);
}

void tok_encoding_free(tok_encoding *e) {
    if (!e) return;
    free(e->ids); free(e->type_ids); free(e->special_mask); free(e->offsets);
    tok_scratch_free(e->scratch);
    memset(e, 0, sizeof *e);
}

/* tok_normalizer: the normalizers of tokenizer.json, applied to an aligned
 * buffer in place (through the scratch buffer, then swapped).
 *
 * Each normalizer maps every input char to zero or more output chars that
 * inherit the input char's original span, which is what HF's
 * NormalizedString::transform does for these normalizers; so offsets stay
 * exact through any chain.  The Unicode normal forms live in tok_unorm.c,
 * Replace in tok_replace.c, Precompiled in tok_precompiled.c.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "tok_norm_impl.h"

static void swap_bufs(tok_buf *a, tok_buf *b) {
    tok_buf t = *a;
    *a = *b;
    *b = t;
}

/* One char of the Bert pipeline after clean_text / chinese: strip accents
 * (NFD, drop Mn) and lowercase.  Returns -1 when the decomposition would
 * need canonical reordering (*last_ccc tracks the previous char's class):
 * then the per-char shortcut is not exact and norm_bert takes the slow
 * path. */
static int bert_tail(const tok_normalizer *n, tok_buf *o, uint32_t cp, tok_span sp, uint8_t *last_ccc) {
    uint32_t d[TOK_MAX_DECOMP];
    int nd = 1;
    d[0] = cp;
    if (n->strip_accents && cp >= 0xA0) nd = tok_decompose(cp, 0, d, TOK_MAX_DECOMP);
    for (int i = 0; i < nd; i++) {
        if (n->strip_accents) {
            uint8_t c = d[i] < 0x300 ? 0 : tok_ccc(d[i]);
            if (c && *last_ccc > c) return -1;
            *last_ccc = c;
            if (tok_is_nonspacing_mark(d[i])) continue;
        }
        if (n->lowercase) {
            uint32_t l[3];
            int nl = tok_lower(d[i], l);
            for (int j = 0; j < nl; j++) tok_buf_put(o, l[j], sp);
        } else {
            tok_buf_put(o, d[i], sp);
        }
    }
    return 0;
}

/* The exact path when marks must be reordered: clean/chinese, then a real
 * NFD (HF's positional alignment through reordering), then drop Mn and
 * lowercase char by char. */
static int norm_bert_slow(const tok_normalizer *n, tok_buf *b, tok_norm_scratch *s) {
    tok_normalizer first = *n;
    first.strip_accents = first.lowercase = 0;
    int rc = tok_norm_apply(&first, b, s);
    if (!rc) rc = tok_unorm_apply(TOK_N_NFD, b, s);
    if (rc) return rc;
    tok_buf *o = &s->tmp;
    o->len = 0;
    for (size_t i = 0; i < b->len;) {
        uint32_t cp;
        tok_span sp = b->al[i];
        i += (size_t)tok_utf8_next(b->b + i, &cp);
        if (tok_buf_reserve(o, 12)) return POSY_E_NOMEM;
        if (tok_is_nonspacing_mark(cp)) continue;
        uint32_t l[3];
        int nl = n->lowercase ? tok_lower(cp, l) : (l[0] = cp, 1);
        for (int j = 0; j < nl; j++) tok_buf_put(o, l[j], sp);
    }
    tok_buf t = *b;
    *b = *o;
    *o = t;
    return 0;
}

static int norm_bert(const tok_normalizer *n, tok_buf *b, tok_norm_scratch *s) {
    tok_buf *o = &s->tmp;
    o->len = 0;
    uint8_t last_ccc = 0;
    int slow = 0;
    /* Worst case per input byte: 3 chars (chinese padding) x 18 decomposed x 3 lower x 4 bytes is
     * absurd; reserve per char instead. */
    size_t i = 0;
    while (i < b->len) {
        uint32_t cp;
        int l = tok_utf8_next(b->b + i, &cp);
        tok_span sp = b->al[i];
        i += (size_t)l;
        if (tok_buf_reserve(o, 3 * TOK_MAX_DECOMP * 3 * 4)) return POSY_E_NOMEM;
        if (n->clean_text) {
            if (cp == 0 || cp == 0xFFFD || tok_is_bert_control(cp)) continue;
            if (tok_is_whitespace(cp)) cp = ' ';
        }
        if (n->chinese && tok_is_chinese(cp)) {
            slow |= bert_tail(n, o, ' ', sp, &last_ccc) | bert_tail(n, o, cp, sp, &last_ccc) |
                    bert_tail(n, o, ' ', sp, &last_ccc);
        } else if (cp < 0x80 && !n->lowercase) {
            o->b[o->len] = (char)cp; o->al[o->len++] = sp;
            last_ccc = 0;
        } else {
            slow |= bert_tail(n, o, cp, sp, &last_ccc);
        }
        if (slow) return norm_bert_slow(n, b, s);
    }
    swap_bufs(b, o);
    return 0;
}

static int norm_map(const tok_normalizer *n, tok_buf *b, tok_norm_scratch *s) {
    tok_buf *o = &s->tmp;
    o->len = 0;
    size_t i = 0;
    while (i < b->len) {
        uint32_t cp;
        int l = tok_utf8_next(b->b + i, &cp);
        tok_span sp = b->al[i];
        i += (size_t)l;
        if (tok_buf_reserve(o, 16)) return POSY_E_NOMEM;
        if (n->type == TOK_N_LOWERCASE) {
            uint32_t lo[3];
            int nl = tok_lower(cp, lo);
            for (int j = 0; j < nl; j++) tok_buf_put(o, lo[j], sp);
        } else if (!tok_is_combining_mark(cp)) { /* StripAccents */
            tok_buf_put(o, cp, sp);
        }
    }
    swap_bufs(b, o);
    return 0;
}

static int norm_strip(const tok_normalizer *n, tok_buf *b) {
    size_t s = 0, e = b->len;
    if (n->left) {
        while (s < e) {
            uint32_t cp;
            int l = tok_utf8_next(b->b + s, &cp);
            if (!tok_is_whitespace(cp)) break;
            s += (size_t)l;
        }
    }
    if (n->right) {
        while (e > s) {
            size_t p = e - 1;
            while (p > s && ((uint8_t)b->b[p] & 0xC0) == 0x80) p--;
            uint32_t cp;
            tok_utf8_next(b->b + p, &cp);
            if (!tok_is_whitespace(cp)) break;
            e = p;
        }
    }
    if (s > 0) {
        memmove(b->b, b->b + s, e - s);
        memmove(b->al, b->al + s, (e - s) * sizeof *b->al);
    }
    b->len = e - s;
    return 0;
}

/* Prepend: the new chars all take the first char's span (HF's prepend). */
static int norm_prepend(const tok_normalizer *n, tok_buf *b, tok_norm_scratch *s) {
    if (b->len == 0) return 0;
    tok_buf *o = &s->tmp;
    o->len = 0;
    if (tok_buf_reserve(o, b->len + n->content_len)) return POSY_E_NOMEM;
    tok_span sp = b->al[0];
    for (size_t i = 0; i < n->content_len; i++) { o->b[o->len] = n->content[i]; o->al[o->len++] = sp; }
    memcpy(o->b + o->len, b->b, b->len);
    memcpy(o->al + o->len, b->al, b->len * sizeof *b->al);
    o->len += b->len;
    swap_bufs(b, o);
    return 0;
}

int tok_norm_apply(const tok_normalizer *n, tok_buf *b, tok_norm_scratch *s) {
    switch (n->type) {
    case TOK_N_BERT: return norm_bert(n, b, s);
    case TOK_N_LOWERCASE:
    case TOK_N_STRIP_ACCENTS: return norm_map(n, b, s);
    case TOK_N_STRIP: return norm_strip(n, b);
    case TOK_N_PREPEND: return norm_prepend(n, b, s);
    case TOK_N_NFD: case TOK_N_NFKD: case TOK_N_NFC: case TOK_N_NFKC:
        return tok_unorm_apply(n->type, b, s);
    case TOK_N_REPLACE: return tok_replace_apply(n, b, s);
    case TOK_N_PRECOMPILED: return tok_precompiled_apply(n->charsmap, b, s);
    case TOK_N_SEQUENCE:
        for (int i = 0; i < n->n_items; i++) {
            int rc = tok_norm_apply(&n->items[i], b, s);
            if (rc) return rc;
        }
        return 0;
    }
    return POSY_E_INTERNAL;
}

void tok_norm_free(tok_normalizer *n) {
    if (!n) return;
    for (int i = 0; i < n->n_items; i++) tok_norm_free(&n->items[i]);
    free(n->items);
    free(n->pattern);
    free(n->content);
    tok_regex_free(n->regex);
    tok_precompiled_free(n->charsmap);
    memset(n, 0, sizeof *n);
}

/* tok_unorm: NFD, NFKD, NFC, NFKC on an aligned buffer.
 *
 * Done by hand on top of utf8proc's per-char data (decomposition, combining
 * class, pairwise composition) rather than with utf8proc_map, because every
 * output char must know which input char it came from: decomposed chars
 * inherit their source char's span, a composed char keeps its starter's
 * span and the absorbed marks disappear (HF's alignment semantics).
 * Pure-ASCII input is returned untouched: it is invariant under all four.
 */
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"
#include "tok_norm_impl.h"

/* One output char: code point, combining class and HF's "change" (0: takes
 * the next input char's place, +1: inserted, -n: also absorbs n input
 * chars).  Spans are assigned from the changes at the end, exactly as HF's
 * NormalizedString::transform does with the changes its normalization
 * crate reports; that is what makes offsets match through reordering and
 * composition. */
typedef struct { uint32_t cp; int32_t ch; uint8_t ccc; } uch;

uint8_t tok_ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    uint8_t c = (uint8_t)utf8proc_get_property((utf8proc_int32_t)cp)->combining_class;
    return c && tok_is_ccc_zero(cp) ? 0 : c;
}

/* Primary composite of a+b, or 0. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (b < 0x300) return 0;
    utf8proc_int32_t buf[2] = {(utf8proc_int32_t)a, (utf8proc_int32_t)b};
    utf8proc_ssize_t n = utf8proc_normalize_utf32(buf, 2, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
    return n == 1 ? (uint32_t)buf[0] : 0;
}

static size_t compose(uch *u, size_t n) {
    size_t out = 0;
    long starter = -1;      /* index in output of the last starter */
    int last_ccc = -1;      /* ccc of the last char written after the starter */
    for (size_t i = 0; i < n; i++) {
        uch c = u[i];
        if (starter >= 0 && (last_ccc < 0 || (last_ccc != 0 && last_ccc < c.ccc))) {
            uint32_t comp = compose_pair(u[starter].cp, c.cp);
            if (comp) {
                u[starter].cp = comp;
                u[starter].ch += c.ch - 1;
                continue;
            }
        }
        if (c.ccc == 0) { starter = (long)out; last_ccc = -1; }
        else last_ccc = c.ccc;
        u[out++] = c;
    }
    return out;
}

/* Stable sort of each run of non-starters by combining class; the changes
 * move with their chars, so spans end up following positions (as in HF). */
static void reorder(uch *u, size_t n) {
    for (size_t i = 1; i < n; i++) {
        if (u[i].ccc == 0) continue;
        size_t j = i;
        uch c = u[i];
        while (j > 0 && u[j - 1].ccc > c.ccc) { u[j] = u[j - 1]; j--; }
        u[j] = c;
    }
}

/* Text that NFC leaves as it is, decided cheaply: chars below U+0300 (no
 * combining marks, nothing that decomposes canonically and recomposes
 * differently), CJK ideographs and precomposed Hangul syllables. */
static int nfc_stable(const tok_buf *b) {
    for (size_t i = 0; i < b->len;) {
        uint32_t cp;
        i += (size_t)tok_utf8_next(b->b + i, &cp);
        if (cp < 0x300 || (cp >= 0x3400 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3)) continue;
        return 0;
    }
    return 1;
}

int tok_unorm_apply(tok_norm_type form, tok_buf *b, tok_norm_scratch *s) {
    size_t i = 0;
    while (i < b->len && (uint8_t)b->b[i] < 0x80) i++;
    if (i == b->len) return 0;
    if (form == TOK_N_NFC && nfc_stable(b)) return 0;
    int compat = form == TOK_N_NFKD || form == TOK_N_NFKC;
    int comp = form == TOK_N_NFC || form == TOK_N_NFKC;
    /* one allocation: output chars, then the input chars' spans */
    size_t cap_u = b->len * TOK_MAX_DECOMP + 1;
    uch *u = tok_mem_get(&s->cps, cap_u * sizeof *u + (b->len + 1) * sizeof(tok_span));
    if (!u) return POSY_E_NOMEM;
    tok_span *in_sp = (tok_span *)(u + cap_u);
    size_t n = 0, n_in = 0;
    for (i = 0; i < b->len;) {
        uint32_t cp, d[TOK_MAX_DECOMP];
        in_sp[n_in++] = b->al[i];
        i += (size_t)tok_utf8_next(b->b + i, &cp);
        int nd = tok_decompose(cp, compat, d, TOK_MAX_DECOMP);
        for (int k = 0; k < nd; k++) { u[n].cp = d[k]; u[n].ch = k > 0; u[n].ccc = tok_ccc(d[k]); n++; }
    }
    reorder(u, n);
    if (comp) n = compose(u, n);
    tok_buf *o = &s->tmp;
    o->len = 0;
    if (tok_buf_reserve(o, n * 4)) return POSY_E_NOMEM;
    size_t idx = 0;
    for (size_t k = 0; k < n; k++) {
        tok_span sp;
        if (u[k].ch > 0) {
            sp = idx > 0 ? in_sp[idx - 1] : (tok_span){in_sp[0].s, in_sp[0].s};
        } else {
            sp = in_sp[idx < n_in ? idx : n_in - 1];
            idx += 1 + (size_t)(-u[k].ch);
        }
        tok_buf_put(o, u[k].cp, sp);
    }
    tok_buf t = *b;
    *b = *o;
    *o = t;
    return 0;
}

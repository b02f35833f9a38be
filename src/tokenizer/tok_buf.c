/* tok_buf: the growable arrays of tok_internal.h.  Growth doubles, so a
 * reused tok_encoding stops allocating after its first few calls. */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static size_t grow_to(size_t cap, size_t need) {
    size_t c = cap ? cap : 64;
    while (c < need) c *= 2;
    return c;
}

int tok_buf_reserve(tok_buf *b, size_t n) {
    if (b->len + n <= b->cap) return 0;
    size_t nc = grow_to(b->cap, b->len + n);
    char *nb = realloc(b->b, nc);
    if (!nb) return -1;
    b->b = nb;
    tok_span *na = realloc(b->al, nc * sizeof *na);
    if (!na) return -1;
    b->al = na;
    b->cap = nc;
    return 0;
}

void tok_buf_free(tok_buf *b) {
    free(b->b);
    free(b->al);
    b->b = NULL; b->al = NULL; b->len = b->cap = 0;
}

int tok_pieces_push(tok_pieces *p, uint32_t off, uint32_t len) {
    if (p->n == p->cap) {
        size_t nc = grow_to(p->cap, p->n + 1);
        tok_piece *np = realloc(p->p, nc * sizeof *np);
        if (!np) return -1;
        p->p = np; p->cap = nc;
    }
    p->p[p->n].off = off;
    p->p[p->n++].len = len;
    return 0;
}

int tok_toks_push(tok_toks *t, int32_t id, uint32_t s, uint32_t e) {
    if (t->n == t->cap) {
        size_t nc = grow_to(t->cap, t->n + 1);
        tok_tok *nt = realloc(t->t, nc * sizeof *nt);
        if (!nt) return -1;
        t->t = nt; t->cap = nc;
    }
    t->t[t->n].id = id; t->t[t->n].s = s; t->t[t->n].e = e;
    t->t[t->n].lead = t->t[t->n].trail = 0xFFFF;
    t->n++;
    return 0;
}

static int ws_or_g(uint32_t cp) { return cp == 0x120 || tok_is_whitespace(cp); }

int tok_toks_push_added(tok_toks *t, int32_t id, uint32_t s, uint32_t e, const char *m, size_t n) {
    if (tok_toks_push(t, id, s, e)) return -1;
    uint32_t lead = 0, trail = 0, cp;
    size_t i = 0, j = n;
    while (i < n) {
        int l = tok_utf8_next(m + i, &cp);
        if (!ws_or_g(cp)) break;
        lead++;
        i += (size_t)l;
    }
    while (j > i) {
        size_t p = j - 1;
        while (p > i && ((uint8_t)m[p] & 0xC0) == 0x80) p--;
        tok_utf8_next(m + p, &cp);
        if (!ws_or_g(cp)) break;
        trail++;
        j = p;
    }
    if (i == n) trail = lead; /* all spaces: HF counts the same chars from both ends */
    t->t[t->n - 1].lead = (uint16_t)(lead > 0xFFFE ? 0xFFFE : lead);
    t->t[t->n - 1].trail = (uint16_t)(trail > 0xFFFE ? 0xFFFE : trail);
    return 0;
}

void *tok_mem_get(tok_mem *m, size_t bytes) {
    if (bytes <= m->cap) return m->p;
    size_t nc = grow_to(m->cap, bytes);
    void *np = realloc(m->p, nc);
    if (!np) return NULL;
    m->p = np; m->cap = nc;
    return np;
}

void tok_sbuf_put(tok_sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = (b->n + n + 1) * 2;
        char *np = realloc(b->p, nc);
        if (!np) { b->oom = 1; return; }
        b->p = np; b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void tok_sbuf_puts(tok_sbuf *b, const char *s) { tok_sbuf_put(b, s, strlen(s)); }

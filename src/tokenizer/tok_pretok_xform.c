/* tok_pretok_xform: the pre-tokenizers that rewrite text, ByteLevel and
 * Metaspace.  Their new chars inherit spans as HF's transform does: a
 * prefix space takes the first char's span, each byte-char of a char takes
 * that char's span, a replacement takes the replaced space's span.
 */
#include <pthread.h>
#include <string.h>

#include "tok_internal.h"
#include "tok_pretok_impl.h"
#include "tok_regex.h"

const char tok_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the
 * others to 256, 257, ... in byte order.  Tabulated with the UTF-8 of each
 * char (1 or 2 bytes), since ByteLevel maps every byte of every piece; the
 * table is filled once (pthread_once) and only read afterwards. */
static int printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

static struct { uint32_t cp[256]; char utf8[256][2]; uint8_t n[256]; } g_bytes;
static pthread_once_t g_bytes_once = PTHREAD_ONCE_INIT;

static void build_bytes(void) {
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        uint32_t cp = printable(b) ? (uint32_t)b : next++;
        char tmp[4];
        g_bytes.cp[b] = cp;
        g_bytes.n[b] = (uint8_t)tok_utf8_encode(cp, tmp);
        memcpy(g_bytes.utf8[b], tmp, g_bytes.n[b]);
    }
}

uint32_t tok_byte_char(uint8_t b) {
    pthread_once(&g_bytes_once, build_bytes);
    return g_bytes.cp[b];
}

int tok_char_byte(uint32_t cp) {
    pthread_once(&g_bytes_once, build_bytes);
    if (cp < 256) return printable((int)cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    for (int b = 0; b < 256; b++)
        if (g_bytes.cp[b] == cp) return b;
    return -1;
}

static tok_buf *other_buf(tok_pre_state *st, tok_pre_scratch *ps, const tok_buf *avoid) {
    for (int i = 0; i < 3; i++)
        if (&ps->buf[i] != st->buf && &ps->buf[i] != avoid) return &ps->buf[i];
    return NULL;
}

static tok_pieces *other_pcs(tok_pre_state *st, tok_pre_scratch *ps) {
    return st->pcs == &ps->pcs[0] ? &ps->pcs[1] : &ps->pcs[0];
}

static void put_bytes(tok_buf *o, const char *s, size_t n, const tok_span *al) {
    memcpy(o->b + o->len, s, n);
    memcpy(o->al + o->len, al, n * sizeof *al);
    o->len += n;
}

static int bytelevel(const tok_pretok *p, tok_pre_state *st, tok_pre_scratch *ps) {
    const tok_buf *ib = st->buf;
    tok_buf *raw = other_buf(st, ps, NULL);
    tok_pieces *mid = other_pcs(st, ps);
    raw->len = 0;
    mid->n = 0;
    /* 1: optional prefix space, then the regex split (on the raw text) */
    for (size_t i = 0; i < st->pcs->n; i++) {
        tok_piece pc = st->pcs->p[i];
        if (tok_buf_reserve(raw, pc.len + 1)) return POSY_E_NOMEM;
        uint32_t start = (uint32_t)raw->len;
        if (p->add_prefix_space && pc.len > 0 && ib->b[pc.off] != ' ') {
            raw->b[raw->len] = ' ';
            raw->al[raw->len++] = ib->al[pc.off];
        }
        put_bytes(raw, ib->b + pc.off, pc.len, ib->al + pc.off);
        if (tok_pieces_push(mid, start, (uint32_t)raw->len - start)) return POSY_E_NOMEM;
    }
    if (p->use_regex) {
        tok_pieces *split = st->pcs; /* reuse the input list as output */
        tok_pre_state s2 = {raw, mid, st->seg_start};
        tok_pretok sp = {0};
        sp.type = TOK_P_SPLIT;
        sp.behavior = TOK_SPLIT_ISOLATED;
        sp.regex = p->regex;
        int rc = tok_pre_stage(&sp, &s2, 0, ps);
        if (rc) return rc;
        mid = s2.pcs;
        (void)split;
    }
    /* 2: map every byte to its printable char */
    pthread_once(&g_bytes_once, build_bytes);
    tok_buf *out = other_buf(st, ps, raw);
    tok_pieces *op = mid == &ps->pcs[0] ? &ps->pcs[1] : &ps->pcs[0];
    out->len = 0;
    op->n = 0;
    for (size_t i = 0; i < mid->n; i++) {
        tok_piece pc = mid->p[i];
        if (tok_buf_reserve(out, (size_t)pc.len * 2)) return POSY_E_NOMEM;
        uint32_t start = (uint32_t)out->len;
        for (uint32_t k = 0; k < pc.len; k++) {
            uint8_t c = (uint8_t)raw->b[pc.off + k];
            tok_span sp = raw->al[pc.off + k];
            out->b[out->len] = g_bytes.utf8[c][0];
            out->al[out->len++] = sp;
            if (g_bytes.n[c] == 2) { out->b[out->len] = g_bytes.utf8[c][1]; out->al[out->len++] = sp; }
        }
        if (tok_pieces_push(op, start, (uint32_t)out->len - start)) return POSY_E_NOMEM;
    }
    st->buf = out;
    st->pcs = op;
    return 0;
}

static int metaspace(const tok_pretok *p, tok_pre_state *st, int first, tok_pre_scratch *ps) {
    const tok_buf *ib = st->buf;
    tok_buf *out = other_buf(st, ps, NULL);
    tok_pieces *mid = other_pcs(st, ps);
    char rep[4];
    int rl = tok_utf8_encode(p->replacement, rep);
    out->len = 0;
    mid->n = 0;
    for (size_t i = 0; i < st->pcs->n; i++) {
        tok_piece pc = st->pcs->p[i];
        if (tok_buf_reserve(out, (size_t)pc.len * 4 + 4)) return POSY_E_NOMEM;
        uint32_t start = (uint32_t)out->len;
        int starts_rep = pc.len >= (uint32_t)rl && !memcmp(ib->b + pc.off, rep, (size_t)rl);
        int starts_space = pc.len > 0 && ib->b[pc.off] == ' ';
        int pre = p->prepend_scheme == 0 ||
                  (p->prepend_scheme == 1 && first && i == 0 && ib->al[pc.off].s == st->seg_start);
        if (pre && pc.len > 0 && !starts_rep && !starts_space)
            for (int k = 0; k < rl; k++) { out->b[out->len] = rep[k]; out->al[out->len++] = ib->al[pc.off]; }
        for (uint32_t k = 0; k < pc.len; k++) {
            if (ib->b[pc.off + k] == ' ') {
                for (int r = 0; r < rl; r++) { out->b[out->len] = rep[r]; out->al[out->len++] = ib->al[pc.off + k]; }
            } else {
                out->b[out->len] = ib->b[pc.off + k];
                out->al[out->len++] = ib->al[pc.off + k];
            }
        }
        if (tok_pieces_push(mid, start, (uint32_t)out->len - start)) return POSY_E_NOMEM;
    }
    st->buf = out;
    st->pcs = mid;
    if (!p->split) return 0;
    tok_pretok sp = {0};
    sp.type = TOK_P_SPLIT;
    sp.behavior = TOK_SPLIT_MERGED_NEXT;
    sp.pattern = rep;
    sp.pattern_len = (size_t)rl;
    return tok_pre_stage(&sp, st, first, ps);
}

int tok_pre_transform(const tok_pretok *p, tok_pre_state *st, int first, tok_pre_scratch *ps) {
    return p->type == TOK_P_BYTELEVEL ? bytelevel(p, st, ps) : metaspace(p, st, first, ps);
}

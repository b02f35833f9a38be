/* tok_precompiled: sentencepiece's "Precompiled" normalizer (XLM-R, e5,
 * bge-m3, T5...): a darts-clone double-array trie from byte strings to
 * replacement strings, shipped base64 in tokenizer.json.
 *
 * Applied exactly as HF does it, quirks included: the text is cut into
 * extended grapheme clusters; a cluster shorter than 6 bytes whose bytes
 * start with a trie key is replaced whole by the SHORTEST key's
 * replacement; otherwise each char is looked up (and replaced) on its own.
 * Offsets follow HF's (char, change) bookkeeping for replacements (see
 * add_replacement), then the same span rule as tok_unorm.c.
 */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"
#include "tok_norm_impl.h"

typedef struct {
    uint32_t *units;
    size_t n_units;
    char *norm;          /* NUL-separated replacement strings */
    size_t norm_len;
    uint8_t *raw;        /* decoded blob (owns units/norm storage) */
} tok_charsmap;

static int b64val(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

static uint8_t *b64decode(const char *s, size_t len, size_t *out_len) {
    uint8_t *o = malloc(len / 4 * 3 + 4);
    if (!o) return NULL;
    size_t n = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '=') break;
        int v = b64val((uint8_t)s[i]);
        if (v < 0) { free(o); return NULL; }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) { bits -= 8; o[n++] = (uint8_t)(acc >> bits); }
    }
    *out_len = n;
    return o;
}

void *tok_precompiled_load(const char *b64, size_t len, const char *path, posy_err *err);
void *tok_precompiled_load(const char *b64, size_t len, const char *path, posy_err *err) {
    size_t n;
    uint8_t *raw = b64decode(b64, len, &n);
    if (!raw) {
        posy_err_set(err, POSY_E_INVALID, "%s.precompiled_charsmap: not valid base64", path);
        return NULL;
    }
    uint32_t tsize = n >= 4 ? (uint32_t)raw[0] | (uint32_t)raw[1] << 8 | (uint32_t)raw[2] << 16 | (uint32_t)raw[3] << 24 : 0;
    if (n < 4 || tsize % 4 || tsize > n - 4 || tsize == 0) {
        free(raw);
        posy_err_set(err, POSY_E_INVALID, "%s.precompiled_charsmap: corrupt (trie size %u of %zu bytes)", path, tsize, n);
        return NULL;
    }
    tok_charsmap *cm = calloc(1, sizeof *cm);
    if (!cm) { free(raw); posy_err_set(err, POSY_E_NOMEM, "oom"); return NULL; }
    cm->raw = raw;
    cm->n_units = tsize / 4;
    cm->units = malloc(tsize);
    if (!cm->units) { free(raw); free(cm); posy_err_set(err, POSY_E_NOMEM, "oom"); return NULL; }
    for (size_t i = 0; i < cm->n_units; i++) {
        const uint8_t *p = raw + 4 + 4 * i;
        cm->units[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    cm->norm = (char *)raw + 4 + tsize;
    cm->norm_len = n - 4 - tsize;
    return cm;
}

void tok_precompiled_free(void *p) {
    tok_charsmap *cm = p;
    if (!cm) return;
    free(cm->units);
    free(cm->raw);
    free(cm);
}

/* darts-clone common prefix search, first (shortest) match only: the
 * replacement of the shortest key that prefixes s[0..len), or NULL.
 * Every index is bounds-checked: the blob comes from the file. */
static const char *lookup(const tok_charsmap *cm, const char *s, size_t len, size_t *rlen) {
    size_t pos = 0;
    if (cm->n_units == 0) return NULL;
    uint32_t u = cm->units[0];
    pos ^= (size_t)((u >> 10) << ((u & (1u << 9)) >> 6));
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)s[i];
        pos ^= c;
        if (pos >= cm->n_units) return NULL;
        u = cm->units[pos];
        if ((u & ((1u << 31) | 0xFF)) != c) return NULL;
        pos ^= (size_t)((u >> 10) << ((u & (1u << 9)) >> 6));
        if ((u >> 8) & 1) {
            if (pos >= cm->n_units) return NULL;
            uint32_t off = cm->units[pos] & ((1u << 31) - 1);
            if (off >= cm->norm_len) return NULL;
            const char *r = cm->norm + off;
            const char *z = memchr(r, 0, cm->norm_len - off);
            *rlen = z ? (size_t)(z - r) : cm->norm_len - off;
            return r;
        }
    }
    return NULL;
}

typedef struct { uint32_t cp; int32_t ch; } chg;

/* Marks newer than utf8proc extend a cluster, except after a control
 * (grapheme rule GB4). */
static int after_control(uint32_t prev) {
    int bc = utf8proc_get_property((utf8proc_int32_t)prev)->boundclass;
    return bc == UTF8PROC_BOUNDCLASS_CR || bc == UTF8PROC_BOUNDCLASS_LF || bc == UTF8PROC_BOUNDCLASS_CONTROL;
}

/* HF's replace(): the new chars have change 0; if longer than the old part
 * the last extra ones become insertions (+1); if shorter, the last char
 * written so far (possibly of an earlier cluster) absorbs the difference. */
static size_t add_replacement(chg *o, size_t n, const char *old, size_t olen, const char *rep, size_t rlen) {
    long oc = 0, nc = 0;
    for (size_t i = 0; i < olen; i++) oc += ((uint8_t)old[i] & 0xC0) != 0x80;
    size_t start = n;
    for (size_t i = 0; i < rlen;) {
        uint32_t cp;
        int l = tok_utf8_decode((const uint8_t *)rep + i, rlen - i, &cp);
        if (!l) { cp = 0xFFFD; l = 1; }
        o[n].cp = cp; o[n].ch = 0; n++; nc++;
        i += (size_t)l;
    }
    long diff = nc - oc;
    if (diff > 0) for (long k = 0; k < diff; k++) o[n - 1 - k].ch = 1;
    else if (diff < 0 && n > 0) o[n - 1].ch += (int32_t)diff;
    (void)start;
    return n;
}

int tok_precompiled_apply(const void *p, tok_buf *b, tok_norm_scratch *s) {
    const tok_charsmap *cm = p;
    if (!cm || b->len == 0) return 0;
    /* output chars: a replacement string is at most the whole blob, so bound by
     * input chars * (longest replacement); grow per cluster instead */
    size_t cap = b->len * 4 + 64, n = 0, n_in = 0;
    tok_mem *mem = &s->cps;
    chg *o = tok_mem_get(mem, cap * sizeof *o + (b->len + 1) * sizeof(tok_span));
    if (!o) return POSY_E_NOMEM;
    tok_span *in_sp = (tok_span *)(o + cap);
    int modified = 0;
    utf8proc_int32_t state = 0;
    size_t gs = 0; /* grapheme start */
    uint32_t prev = 0;
    for (size_t i = 0; i <= b->len;) {
        uint32_t cp = 0;
        int l = 0;
        if (i < b->len) {
            l = tok_utf8_next(b->b + i, &cp);
            in_sp[n_in++] = b->al[i];
        }
        int brk = i == b->len || (i > gs && (tok_is_new_mark(cp) ? after_control(prev)
                                                                 : utf8proc_grapheme_break_stateful(
                                                                       (utf8proc_int32_t)prev, (utf8proc_int32_t)cp, &state)));
        if (brk && i > gs) {
            const char *g = b->b + gs;
            size_t glen = i - gs, rl;
            /* worst case growth of this cluster: its own replacement(s) */
            size_t need = n + glen * 64 + 64;
            if (need > cap) {
                size_t ncap = need * 2;
                chg *no = malloc(ncap * sizeof *no + (b->len + 1) * sizeof(tok_span));
                if (!no) return POSY_E_NOMEM;
                memcpy(no, o, n * sizeof *o);
                memcpy(no + ncap, in_sp, n_in * sizeof *in_sp);
                free(mem->p);
                mem->p = no; mem->cap = ncap * sizeof *no + (b->len + 1) * sizeof(tok_span);
                o = no; in_sp = (tok_span *)(o + ncap); cap = ncap;
            }
            const char *r = glen < 6 ? lookup(cm, g, glen, &rl) : NULL;
            if (r) {
                if (rl > 63 * glen) rl = 63 * glen;
                n = add_replacement(o, n, g, glen, r, rl);
                modified = 1;
            } else {
                for (size_t k = 0; k < glen;) {
                    uint32_t c;
                    int cl = tok_utf8_next(g + k, &c);
                    const char *r2 = lookup(cm, g + k, (size_t)cl, &rl);
                    if (r2) {
                        if (rl > 63 * (size_t)cl) rl = 63 * (size_t)cl;
                        n = add_replacement(o, n, g + k, (size_t)cl, r2, rl);
                        modified = 1;
                    } else {
                        o[n].cp = c; o[n].ch = 0; n++;
                    }
                    k += (size_t)cl;
                }
            }
            gs = i;
        }
        if (i == b->len) break;
        prev = cp;
        i += (size_t)l;
    }
    if (!modified) return 0;
    tok_buf *out = &s->tmp;
    out->len = 0;
    if (tok_buf_reserve(out, n * 4)) return POSY_E_NOMEM;
    size_t idx = 0;
    for (size_t k = 0; k < n; k++) {
        tok_span sp;
        if (o[k].ch > 0) {
            sp = idx > 0 ? in_sp[idx - 1] : (tok_span){in_sp[0].s, in_sp[0].s};
        } else {
            sp = in_sp[idx < n_in ? idx : n_in - 1];
            idx += 1 + (size_t)(-o[k].ch);
        }
        tok_buf_put(out, o[k].cp, sp);
    }
    tok_buf t = *b;
    *b = *out;
    *out = t;
    return 0;
}

/* tok_decode: ids -> text through the decoders of tokenizer.json (ByteLevel,
 * WordPiece, Metaspace, BPEDecoder, ByteFallback, Fuse, Strip, Replace,
 * Sequence), reproducing HF's decode_chain of each, quirks included (e.g.
 * Metaspace drops every replacement char of the first token).
 *
 * Decoding is not on the hot path: tokens are plain malloc'd strings in a
 * small vector, each decoder maps one vector to the next.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_load_util.h"
#include "tok_pretok_impl.h"
#include "tok_regex.h"

typedef enum { DEC_BYTELEVEL, DEC_WORDPIECE, DEC_METASPACE, DEC_BPE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP,
               DEC_REPLACE, DEC_SEQUENCE } dec_type;

typedef struct tok_decoder {
    dec_type type;
    char *str; size_t str_len;       /* WordPiece prefix, BPE suffix, Replace pattern */
    char *content; size_t content_len; /* Replace content */
    void *regex;
    uint32_t ch;                     /* Metaspace replacement, Strip content */
    int cleanup, prepend_never, start, stop;
    struct tok_decoder *items; int n_items;
} tok_decoder;

/* ---- string vector --------------------------------------------------- */
typedef struct { char *s; size_t n; } str;
typedef struct { str *v; size_t n, cap; int oom; } strv;

static void sv_push(strv *sv, const char *s, size_t n) {
    if (sv->oom) return;
    if (sv->n == sv->cap) {
        size_t nc = sv->cap ? sv->cap * 2 : 16;
        str *nv = realloc(sv->v, nc * sizeof *nv);
        if (!nv) { sv->oom = 1; return; }
        sv->v = nv; sv->cap = nc;
    }
    char *c = malloc(n + 1);
    if (!c) { sv->oom = 1; return; }
    memcpy(c, s, n);
    c[n] = '\0';
    sv->v[sv->n].s = c;
    sv->v[sv->n++].n = n;
}

static void sv_free(strv *sv) {
    for (size_t i = 0; i < sv->n; i++) free(sv->v[i].s);
    free(sv->v);
    memset(sv, 0, sizeof *sv);
}

static void bb_cp(tok_sbuf *b, uint32_t cp) { char t[4]; tok_sbuf_put(b, t, (size_t)tok_utf8_encode(cp, t)); }

/* Rust's String::from_utf8_lossy: each maximal invalid subpart -> U+FFFD. */
static void lossy(tok_sbuf *o, const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = tok_utf8_decode((const uint8_t *)s + i, n - i, &cp);
        if (l) { tok_sbuf_put(o, s + i, (size_t)l); i += (size_t)l; continue; }
        /* length of the maximal subpart: a valid prefix of a multi-byte sequence */
        uint8_t c = (uint8_t)s[i];
        size_t need = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 1;
        size_t k = 1;
        if (need > 1) {
            uint8_t lo = 0x80, hi = 0xBF;
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;
            else if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;
            if (i + 1 < n && (uint8_t)s[i + 1] >= lo && (uint8_t)s[i + 1] <= hi) {
                k = 2;
                while (k < need && i + k < n && ((uint8_t)s[i + k] & 0xC0) == 0x80) k++;
            }
        }
        bb_cp(o, 0xFFFD);
        i += k;
    }
}

static int starts_with(const str *t, const char *p, size_t n) { return t->n >= n && !memcmp(t->s, p, n); }

/* ---- the decoders ------------------------------------------------------ */
static void dec_bytelevel(const strv *in, strv *out) {
    tok_sbuf raw = {0}, o = {0};
    for (size_t i = 0; i < in->n; i++) {
        const str *t = &in->v[i];
        size_t mark = raw.n;
        int ok = 1;
        for (size_t k = 0; k < t->n && ok;) {
            uint32_t cp;
            k += (size_t)tok_utf8_next(t->s + k, &cp);
            int b = tok_char_byte(cp);
            if (b < 0) ok = 0;
            else { char c = (char)b; tok_sbuf_put(&raw, &c, 1); }
        }
        if (!ok) { raw.n = mark; tok_sbuf_put(&raw, t->s, t->n); }
    }
    lossy(&o, raw.p ? raw.p : "", raw.n);
    sv_push(out, o.p ? o.p : "", o.n);
    out->oom |= raw.oom | o.oom;
    free(raw.p); free(o.p);
}

static void replace_all(tok_sbuf *o, const char *s, size_t n, const char *pat, size_t pl, const char *rep, size_t rl) {
    size_t i = 0;
    while (i < n) {
        const char *f = pl ? memmem(s + i, n - i, pat, pl) : NULL;
        if (!f) break;
        tok_sbuf_put(o, s + i, (size_t)(f - (s + i)));
        tok_sbuf_put(o, rep, rl);
        i = (size_t)(f - s) + pl;
    }
    tok_sbuf_put(o, s + i, n - i);
}

/* HF's WordPiece cleanup(): a fixed list of str::replace calls, in order. */
static void wp_cleanup(tok_sbuf *b) {
    static const char *pairs[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
                                     {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"},
                                     {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        tok_sbuf o = {0};
        replace_all(&o, b->p ? b->p : "", b->n, pairs[k][0], strlen(pairs[k][0]), pairs[k][1], strlen(pairs[k][1]));
        free(b->p);
        *b = o;
    }
}

static void dec_wordpiece(const tok_decoder *d, const strv *in, strv *out) {
    for (size_t i = 0; i < in->n; i++) {
        const str *t = &in->v[i];
        tok_sbuf b = {0};
        if (i != 0 && starts_with(t, d->str, d->str_len)) tok_sbuf_put(&b, t->s + d->str_len, t->n - d->str_len);
        else {
            if (i != 0) tok_sbuf_put(&b, " ", 1);
            tok_sbuf_put(&b, t->s, t->n);
        }
        if (d->cleanup) wp_cleanup(&b);
        sv_push(out, b.p ? b.p : "", b.n);
        out->oom |= b.oom;
        free(b.p);
    }
}

static void dec_metaspace(const tok_decoder *d, const strv *in, strv *out) {
    for (size_t i = 0; i < in->n; i++) {
        const str *t = &in->v[i];
        tok_sbuf b = {0};
        for (size_t k = 0; k < t->n;) {
            uint32_t cp;
            int l = tok_utf8_next(t->s + k, &cp);
            if (cp != d->ch) tok_sbuf_put(&b, t->s + k, (size_t)l);
            else if (!(i == 0 && !d->prepend_never)) tok_sbuf_put(&b, " ", 1);
            k += (size_t)l;
        }
        sv_push(out, b.p ? b.p : "", b.n);
        out->oom |= b.oom;
        free(b.p);
    }
}

static void dec_bpe(const tok_decoder *d, const strv *in, strv *out) {
    for (size_t i = 0; i < in->n; i++) {
        tok_sbuf b = {0};
        replace_all(&b, in->v[i].s, in->v[i].n, d->str, d->str_len, i + 1 == in->n ? "" : " ", i + 1 == in->n ? 0 : 1);
        sv_push(out, b.p ? b.p : "", b.n);
        out->oom |= b.oom;
        free(b.p);
    }
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void flush_bytes(strv *out, tok_sbuf *bytes) {
    if (!bytes->n) return;
    if (tok_utf8_valid_prefix(bytes->p, bytes->n) == bytes->n) sv_push(out, bytes->p, bytes->n);
    else for (size_t k = 0; k < bytes->n; k++) sv_push(out, "\xEF\xBF\xBD", 3);
    bytes->n = 0;
}

static void dec_bytefallback(const strv *in, strv *out) {
    tok_sbuf bytes = {0};
    for (size_t i = 0; i < in->n; i++) {
        const str *t = &in->v[i];
        int hi = t->n == 6 ? hexval(t->s[3]) : -1, lo = t->n == 6 ? hexval(t->s[4]) : -1;
        if (t->n == 6 && !memcmp(t->s, "<0x", 3) && t->s[5] == '>' && hi >= 0 && lo >= 0) {
            char c = (char)(hi * 16 + lo);
            tok_sbuf_put(&bytes, &c, 1);
            continue;
        }
        flush_bytes(out, &bytes);
        sv_push(out, t->s, t->n);
    }
    flush_bytes(out, &bytes);
    out->oom |= bytes.oom;
    free(bytes.p);
}

static void dec_fuse(const strv *in, strv *out) {
    tok_sbuf b = {0};
    for (size_t i = 0; i < in->n; i++) tok_sbuf_put(&b, in->v[i].s, in->v[i].n);
    sv_push(out, b.p ? b.p : "", b.n);
    out->oom |= b.oom;
    free(b.p);
}

static void dec_strip(const tok_decoder *d, const strv *in, strv *out) {
    char c[4];
    size_t cl = (size_t)tok_utf8_encode(d->ch, c);
    for (size_t i = 0; i < in->n; i++) {
        const char *s = in->v[i].s;
        size_t a = 0, e = in->v[i].n;
        for (int k = 0; k < d->start && e - a >= cl && !memcmp(s + a, c, cl); k++) a += cl;
        for (int k = 0; k < d->stop && e - a >= cl && !memcmp(s + e - cl, c, cl); k++) e -= cl;
        sv_push(out, s + a, e - a);
    }
}

static void dec_replace(const tok_decoder *d, const strv *in, strv *out) {
    for (size_t i = 0; i < in->n; i++) {
        tok_sbuf b = {0};
        const str *t = &in->v[i];
        if (!d->regex) {
            replace_all(&b, t->s, t->n, d->str, d->str_len, d->content, d->content_len);
        } else {
            void *md = NULL;
            size_t pos = 0, from = 0, ms, me;
            while (tok_regex_next(d->regex, t->s, t->n, from, &ms, &me, &md) == 1) {
                tok_sbuf_put(&b, t->s + pos, ms - pos);
                tok_sbuf_put(&b, d->content, d->content_len);
                pos = from = me;
                if (me == ms) { if (me >= t->n) break; from = me + (size_t)tok_utf8_len((uint8_t)t->s[me]); }
            }
            tok_sbuf_put(&b, t->s + pos, t->n - pos);
            tok_regex_md_free(md);
        }
        sv_push(out, b.p ? b.p : "", b.n);
        out->oom |= b.oom;
        free(b.p);
    }
}

static int run_decoder(const tok_decoder *d, strv *tokens) {
    if (d->type == DEC_SEQUENCE) {
        for (int i = 0; i < d->n_items; i++)
            if (run_decoder(&d->items[i], tokens)) return -1;
        return 0;
    }
    strv out = {0};
    switch (d->type) {
    case DEC_BYTELEVEL: dec_bytelevel(tokens, &out); break;
    case DEC_WORDPIECE: dec_wordpiece(d, tokens, &out); break;
    case DEC_METASPACE: dec_metaspace(d, tokens, &out); break;
    case DEC_BPE: dec_bpe(d, tokens, &out); break;
    case DEC_BYTEFALLBACK: dec_bytefallback(tokens, &out); break;
    case DEC_FUSE: dec_fuse(tokens, &out); break;
    case DEC_STRIP: dec_strip(d, tokens, &out); break;
    case DEC_REPLACE: dec_replace(d, tokens, &out); break;
    case DEC_SEQUENCE: break;
    }
    int oom = out.oom;
    sv_free(tokens);
    *tokens = out;
    return oom ? -1 : 0;
}

static int is_special(const tok_tokenizer *t, const char *s, size_t n) {
    const tok_added_set *sets[2] = {&t->added, &t->added_norm};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < sets[k]->n; i++) {
            const tok_added_token *a = &sets[k]->tok[i];
            if (a->special && a->len == n && !memcmp(a->content, s, n)) return 1;
        }
    return 0;
}

int tok_decode(const tok_tokenizer *t, const int32_t *ids, int n, int skip_special, char **text, size_t *len,
               posy_err *err) {
    strv tokens = {0};
    *text = NULL;
    if (t->decoder_unsupported)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "this tokenizer.json's decoder is not supported by posy");
    for (int i = 0; i < n; i++) {
        uint32_t l;
        const char *s = tok_vocab_str(&t->all, ids[i], &l);
        if (!s || (skip_special && is_special(t, s, l))) continue; /* HF drops unknown ids */
        sv_push(&tokens, s, l);
    }
    tok_sbuf o = {0};
    int rc = tokens.oom;
    if (!rc && t->decoder) rc = run_decoder(t->decoder, &tokens);
    for (size_t i = 0; !rc && i < tokens.n; i++) {
        if (!t->decoder && i) tok_sbuf_put(&o, " ", 1);
        tok_sbuf_put(&o, tokens.v[i].s, tokens.v[i].n);
    }
    tok_sbuf_put(&o, "", 0);
    sv_free(&tokens);
    if (rc || o.oom || !o.p) {
        free(o.p);
        return posy_err_set(err, POSY_E_NOMEM, "out of memory while decoding");
    }
    o.p[o.n] = '\0';
    *text = o.p;
    if (len) *len = o.n;
    return 0;
}

/* ---- loading ----------------------------------------------------------- */
static int one_char(json_t *j, const char *key, uint32_t *cp, const char *path, posy_err *err) {
    const char *s;
    size_t l;
    if (tok_j_str(j, key, 1, &s, &l, path, err)) return err->code;
    if (!l || tok_utf8_decode((const uint8_t *)s, l, cp) != (int)l)
        return posy_err_set(err, POSY_E_INVALID, "%s.%s: expected one character", path, key);
    return 0;
}

static int dup_str(json_t *j, const char *key, const char *def, char **out, size_t *len, const char *path, posy_err *err) {
    const char *s;
    if (tok_j_str(j, key, 0, &s, len, path, err)) return err->code;
    if (!s) { s = def; *len = strlen(def); }
    *out = tok_strndup(s, *len);
    return *out ? 0 : posy_err_set(err, POSY_E_NOMEM, "oom");
}

static int load_dec(json_t *j, tok_decoder *d, const char *path, int depth, posy_err *err) {
    memset(d, 0, sizeof *d);
    if (depth > TOK_MAX_DEPTH) return posy_err_set(err, POSY_E_INVALID, "%s: nested too deeply", path);
    if (!json_is_object(j)) return posy_err_set(err, POSY_E_INVALID, "%s: expected an object", path);
    const char *type;
    if (tok_j_str(j, "type", 1, &type, NULL, path, err)) return err->code;
    long long v;
    if (!strcmp(type, "ByteLevel")) d->type = DEC_BYTELEVEL;
    else if (!strcmp(type, "ByteFallback")) d->type = DEC_BYTEFALLBACK;
    else if (!strcmp(type, "Fuse")) d->type = DEC_FUSE;
    else if (!strcmp(type, "WordPiece")) {
        d->type = DEC_WORDPIECE;
        if (dup_str(j, "prefix", "##", &d->str, &d->str_len, path, err)) return err->code;
        return tok_j_bool(j, "cleanup", 1, &d->cleanup, path, err);
    } else if (!strcmp(type, "BPEDecoder")) {
        d->type = DEC_BPE;
        return dup_str(j, "suffix", "</w>", &d->str, &d->str_len, path, err);
    } else if (!strcmp(type, "Metaspace")) {
        const char *scheme;
        int aps;
        d->type = DEC_METASPACE;
        if (one_char(j, "replacement", &d->ch, path, err)) return err->code;
        if (tok_j_str(j, "prepend_scheme", 0, &scheme, NULL, path, err)) return err->code;
        if (tok_j_bool(j, "add_prefix_space", 1, &aps, path, err)) return err->code;
        d->prepend_never = scheme ? !strcmp(scheme, "never") : !aps;
    } else if (!strcmp(type, "Strip")) {
        d->type = DEC_STRIP;
        if (one_char(j, "content", &d->ch, path, err)) return err->code;
        if (tok_j_int(j, "start", 0, 0, &v, path, err)) return err->code;
        d->start = v < 0 ? 0 : v > 1 << 20 ? 1 << 20 : (int)v;
        if (tok_j_int(j, "stop", 0, 0, &v, path, err)) return err->code;
        d->stop = v < 0 ? 0 : v > 1 << 20 ? 1 << 20 : (int)v;
    } else if (!strcmp(type, "Replace")) {
        d->type = DEC_REPLACE;
        if (tok_j_pattern(j, path, &d->str, &d->str_len, &d->regex, err)) return err->code;
        return dup_str(j, "content", "", &d->content, &d->content_len, path, err);
    } else if (!strcmp(type, "Sequence")) {
        d->type = DEC_SEQUENCE;
        json_t *arr = json_object_get(j, "decoders");
        if (!json_is_array(arr)) return posy_err_set(err, POSY_E_INVALID, "%s.decoders: expected an array", path);
        d->n_items = (int)json_array_size(arr);
        d->items = calloc((size_t)d->n_items + 1, sizeof *d->items);
        if (!d->items) return posy_err_set(err, POSY_E_NOMEM, "oom");
        for (int i = 0; i < d->n_items; i++) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s.decoders[%d]", path, i);
            if (load_dec(json_array_get(arr, (size_t)i), &d->items[i], sub, depth + 1, err)) return err->code;
        }
    } else {
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s.type: decoder '%s' is not supported", path, type);
    }
    return 0;
}

static void free_dec(tok_decoder *d) {
    for (int i = 0; i < d->n_items; i++) free_dec(&d->items[i]);
    free(d->items);
    free(d->str);
    free(d->content);
    tok_regex_free(d->regex);
}

void tok_decoder_free(void *p) {
    if (!p) return;
    free_dec(p);
    free(p);
}

/* An unsupported decoder does not stop the tokenizer from loading (encoding
 * does not need it); tok_decode then refuses with a clear error.  A
 * malformed decoder is a load error. */
int tok_load_decoder(json_t *j, tok_tokenizer *t, posy_err *err) {
    if (!j || json_is_null(j)) return 0;
    tok_decoder *d = calloc(1, sizeof *d);
    if (!d) return posy_err_set(err, POSY_E_NOMEM, "oom");
    int rc = load_dec(j, d, "decoder", 0, err);
    tok_decoder_free(rc ? d : NULL);
    if (rc == POSY_E_UNSUPPORTED) {
        t->decoder_unsupported = 1;
        posy_err_clear(err);
        return 0;
    }
    if (rc) return rc;
    t->decoder = d;
    return 0;
}

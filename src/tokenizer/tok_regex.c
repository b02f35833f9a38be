/* tok_regex: PCRE2 with JIT for the Oniguruma patterns of tokenizer.json.
 *
 * Patterns compile with PCRE2_UTF | PCRE2_UCP, after \p{L}, \p{N}, \s, \w,
 * \d and friends are rewritten into explicit class bodies generated from
 * the reference (tok_regex_tables.h), because Oniguruma's Unicode tables
 * are newer than PCRE2's and its \w/\s differ.  Subjects are validated UTF-8 before
 * they get here, so matching skips PCRE2's UTF check.  Match data is
 * cached by the caller (one per encoding), keeping tok_regex_next free of
 * allocation and the compiled pattern shareable between threads.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "tok_regex.h"
#include "tok_regex_tables.h"

static const char *class_body(char name) {
    for (size_t i = 0; i < sizeof tok_re_classes / sizeof tok_re_classes[0]; i++)
        if (tok_re_classes[i].name == name) return tok_re_classes[i].body;
    return NULL;
}

/* Parse the class escape at pat[i] (just after the backslash).  Returns the
 * generated-table name ('L', 's', ...) or 0, its negation and its length. */
static char escape_class(const char *pat, size_t len, size_t i, int *neg, size_t *elen) {
    char c = pat[i];
    *neg = 0;
    *elen = 1;
    if (c == 's' || c == 'w' || c == 'd') return c;
    if (c == 'S' || c == 'W' || c == 'D') { *neg = 1; return (char)(c + 32); }
    if (c != 'p' && c != 'P') return 0;
    *neg = c == 'P';
    if (i + 1 < len && pat[i + 1] != '{') {
        *elen = 2;
        return strchr("LNPSM", pat[i + 1]) ? pat[i + 1] : 0;
    }
    if (i + 3 < len && pat[i + 3] == '}' && strchr("LNPSM", pat[i + 2])) { *elen = 4; return pat[i + 2]; }
    return 0;
}

/* Replace \p{L}, \s, \w, ... by the reference's class bodies (see
 * tok_regex_tables.h).  Negated forms are rewritten outside classes only. */
static char *rewrite(const char *pat, size_t len, size_t *out_len) {
    tok_sbuf b = {0};
    int in_class = 0;
    for (size_t i = 0; i < len; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < len) {
            int neg;
            size_t el;
            char name = escape_class(pat, len, i + 1, &neg, &el);
            const char *body = name ? class_body(name) : NULL;
            if (body && (!neg || !in_class)) {
                if (!in_class) tok_sbuf_puts(&b, neg ? "[^" : "[");
                tok_sbuf_puts(&b, body);
                if (!in_class) tok_sbuf_puts(&b, "]");
                i += el;
                continue;
            }
            tok_sbuf_put(&b, pat + i, 2);
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            tok_sbuf_put(&b, pat + i, 1);
            if (i + 1 < len && pat[i + 1] == '^') tok_sbuf_put(&b, pat + ++i, 1);
            if (i + 1 < len && pat[i + 1] == ']') tok_sbuf_put(&b, pat + ++i, 1);
            continue;
        }
        if (in_class && c == '[' && i + 1 < len && pat[i + 1] == ':') {
            const char *end = memmem(pat + i, len - i, ":]", 2);
            size_t n = end ? (size_t)(end - (pat + i)) + 2 : 1;
            tok_sbuf_put(&b, pat + i, n);
            i += n - 1;
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        tok_sbuf_put(&b, pat + i, 1);
    }
    if (b.oom || !b.p) { free(b.p); return NULL; }
    *out_len = b.n;
    return b.p;
}

void *tok_regex_compile(const char *pat, size_t len, const char *field, posy_err *err) {
    int ec;
    PCRE2_SIZE eo;
    size_t rlen = 0;
    char *rpat = rewrite(pat, len, &rlen);
    if (!rpat && len) {
        posy_err_set(err, POSY_E_NOMEM, "%s: out of memory", field);
        return NULL;
    }
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(rpat ? rpat : ""), rlen, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    free(rpat);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        posy_err_set(err, POSY_E_UNSUPPORTED, "%s: regex not supported at offset %zu: %s", field,
                     (size_t)eo, (const char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter if unavailable */
    return re;
}

/* The Whitespace pre-tokenizer's \\w+|[^\\w\\s]+ runs on Rust's regex crate
 * in HF, whose \\w and \\s are the W and Z bodies of the generated table;
 * the pattern is built from them and compiled as is (no rewrite). */
void *tok_regex_compile_whitespace(const char *field, posy_err *err) {
    const char *w = class_body('W'), *z = class_body('Z');
    tok_sbuf b = {0};
    tok_sbuf_puts(&b, "[");
    tok_sbuf_puts(&b, w);
    tok_sbuf_puts(&b, "]+|[^");
    tok_sbuf_puts(&b, w);
    tok_sbuf_puts(&b, z);
    tok_sbuf_puts(&b, "]+");
    if (b.oom || !b.p) {
        free(b.p);
        posy_err_set(err, POSY_E_NOMEM, "%s: out of memory", field);
        return NULL;
    }
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)b.p, b.n, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    free(b.p);
    if (!re) {
        posy_err_set(err, POSY_E_INTERNAL, "%s: built-in Whitespace pattern failed to compile", field);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

/* Rust regex's \\w (the W body), which HF's added-token matching uses to
 * decide single_word boundaries.  Compiled once; queried only when a
 * single_word token matches, so a per-call match data is fine. */
static pcre2_code *g_word_re;
static pthread_once_t g_word_once = PTHREAD_ONCE_INIT;

static void word_re_init(void) {
    tok_sbuf b = {0};
    tok_sbuf_puts(&b, "[");
    tok_sbuf_puts(&b, class_body('W'));
    tok_sbuf_puts(&b, "]");
    if (b.oom || !b.p) { free(b.p); return; }
    int ec;
    PCRE2_SIZE eo;
    g_word_re = pcre2_compile((PCRE2_SPTR)b.p, b.n, PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &ec, &eo, NULL);
    free(b.p);
}

int tok_is_word_char(uint32_t cp) {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || ((cp | 32) >= 'a' && (cp | 32) <= 'z') || cp == '_';
    pthread_once(&g_word_once, word_re_init);
    if (!g_word_re) return 0;
    char u[4];
    size_t n = (size_t)tok_utf8_encode(cp, u);
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) return 0;
    int rc = pcre2_match(g_word_re, (PCRE2_SPTR)u, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc >= 0;
}

void tok_regex_free(void *re) {
    if (re) pcre2_code_free((pcre2_code *)re);
}

void tok_regex_md_free(void *md) {
    if (md) pcre2_match_data_free((pcre2_match_data *)md);
}

int tok_regex_next(const void *re, const char *s, size_t len, size_t from, size_t *ms, size_t *me,
                   void **md) {
    if (!*md) {
        *md = pcre2_match_data_create(1, NULL);
        if (!*md) return -POSY_E_NOMEM;
    }
    int rc = pcre2_match((const pcre2_code *)re, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK,
                         (pcre2_match_data *)*md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) return -POSY_E_TOO_LONG; /* match or depth limit on hostile input */
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer((pcre2_match_data *)*md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

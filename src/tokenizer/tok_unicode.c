/* tok_unicode: UTF-8 coding and the character classes the pipeline needs.
 *
 * Classes come from tok_unicode_tables.h (generated from the reference
 * library, because HF tokenizers mixes Unicode versions) with ASCII fast
 * paths; lowercase and decompositions come from utf8proc except at the few
 * code points where the reference disagrees (the *_x exception tables).
 */
#include <utf8proc.h>
#include <string.h>

#include "tok_internal.h"
#include "tok_unicode_tables.h"

int tok_utf8_decode(const uint8_t *s, size_t len, uint32_t *cp) {
    if (len == 0) return 0;
    uint8_t c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int n; uint32_t v, min;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; v = c & 0x1F; min = 0x80; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; v = c & 0x0F; min = 0x800; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; v = c & 0x07; min = 0x10000; }
    else return 0;
    if ((size_t)n > len) return 0;
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return n;
}

int tok_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t tok_utf8_valid_prefix(const char *s, size_t len) {
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0;
    while (i < len) {
        if (u[i] < 0x80) { i++; continue; }
        uint32_t cp;
        int n = tok_utf8_decode(u + i, len - i, &cp);
        if (!n) return i;
        i += (size_t)n;
    }
    return len;
}

static int in_ranges(const tok_range *r, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}
#define IN(tab, cp) in_ranges(tab, sizeof tab / sizeof tab[0], cp)

static const tok_cpmap *find_map(const tok_cpmap *m, size_t n, uint32_t cp) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < m[mid].cp) hi = mid;
        else if (cp > m[mid].cp) lo = mid + 1;
        else return &m[mid];
    }
    return NULL;
}

int tok_is_bert_punct(uint32_t cp) {
    if (cp < 0x80)
        return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
               (cp >= 123 && cp <= 126);
    return IN(tok_tab_bert_punct, cp);
}

int tok_is_whitespace(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 9 && cp <= 13);
    return IN(tok_tab_whitespace, cp);
}

int tok_is_bert_control(uint32_t cp) {
    if (cp < 0x80) return cp < 32 ? !(cp == 9 || cp == 10 || cp == 13) : cp == 127;
    return IN(tok_tab_bert_control, cp);
}

int tok_is_nonspacing_mark(uint32_t cp) {
    if (cp < 0x300) return 0;
    return IN(tok_tab_nonspacing_mark, cp);
}

int tok_is_combining_mark(uint32_t cp) {
    if (cp < 0x300) return 0;
    return IN(tok_tab_combining_mark, cp);
}

int tok_is_numeric(uint32_t cp) {
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    return IN(tok_tab_numeric, cp);
}

int tok_is_new_mark(uint32_t cp) {
    if (cp < 0x300) return 0;
    return IN(tok_tab_new_marks, cp);
}

int tok_is_chinese(uint32_t cp) {
    if (cp < 0x3400) return 0;
    return IN(tok_tab_chinese, cp);
}

int tok_is_ccc_zero(uint32_t cp) { return IN(tok_tab_ccc_zero, cp); }

int tok_is_alnum(uint32_t cp) {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || ((cp | 32) >= 'a' && (cp | 32) <= 'z');
    utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
    return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) ||
           (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO);
}

static int decode_str(const char *s, uint32_t *out, int cap) {
    int n = 0;
    while (*s && n < cap) {
        uint32_t cp;
        s += tok_utf8_next(s, &cp);
        out[n++] = cp;
    }
    return n;
}

int tok_lower(uint32_t cp, uint32_t out[3]) {
    if (cp < 0x80) { out[0] = (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp; return 1; }
    const tok_cpmap *x = find_map(tok_tab_lower_x, TOK_TAB_LOWER_X_N, cp);
    if (x) return decode_str(x->s, out, 3);
    out[0] = (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
    return 1;
}

int tok_decompose(uint32_t cp, int compat, uint32_t *out, int cap) {
    if (cp < 0xA0) { out[0] = cp; return 1; }
    const tok_cpmap *x = compat ? find_map(tok_tab_nfkd_x, TOK_TAB_NFKD_X_N, cp)
                                : find_map(tok_tab_nfd_x, TOK_TAB_NFD_X_N, cp);
    if (x) return decode_str(x->s, out, cap);
    int last = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)cp, (utf8proc_int32_t *)out, cap,
                                                 compat ? UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT
                                                        : UTF8PROC_DECOMPOSE, &last);
    if (n < 1 || n > cap) { out[0] = cp; return 1; }
    return (int)n;
}

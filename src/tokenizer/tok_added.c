/* tok_added: added and special tokens, matched in the text before the
 * model runs (non-normalized ones on the raw input, normalized ones on the
 * normalized text), as HF's AddedVocabulary does.
 *
 * Matching is leftmost-longest like HF's aho-corasick (MatchKind::
 * LeftmostLongest): at each position the candidates sharing its first byte
 * are tried longest first.  Files carry a handful to a few thousand added
 * tokens, so a first-byte index is enough and keeps this file small.
 * single_word, lstrip and rstrip are applied per match as HF does.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "tok_regex.h"

static const tok_added_token *g_sort_base;
static int by_len_desc(const void *a, const void *b) {
    const tok_added_token *x = &g_sort_base[*(const int32_t *)a], *y = &g_sort_base[*(const int32_t *)b];
    if (x->content[0] != y->content[0]) return (uint8_t)x->content[0] - (uint8_t)y->content[0];
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return *(const int32_t *)a - *(const int32_t *)b;
}

/* Build the index of one set (tokens with len > 0).  Called at load only,
 * under the loader's single thread (the qsort comparator uses a static). */
int tok_added_build(tok_added_set *set, posy_err *err) {
    set->by_byte = malloc(((size_t)set->n + 1) * sizeof *set->by_byte);
    if (!set->by_byte) return posy_err_set(err, POSY_E_NOMEM, "added_tokens: out of memory");
    int k = 0;
    for (int i = 0; i < set->n; i++)
        if (set->tok[i].len > 0) set->by_byte[k++] = i;
    g_sort_base = set->tok;
    qsort(set->by_byte, (size_t)k, sizeof *set->by_byte, by_len_desc);
    int j = 0;
    for (int b = 0; b < 256; b++) {
        set->byte_start[b] = j;
        while (j < k && (uint8_t)set->tok[set->by_byte[j]].content[0] == b) j++;
    }
    set->byte_start[256] = j;
    set->any = k > 0;
    return 0;
}

void tok_added_free(tok_added_set *set) {
    for (int i = 0; i < set->n; i++) { free(set->tok[i].content); free(set->tok[i].orig); }
    free(set->tok);
    free(set->by_byte);
    memset(set, 0, sizeof *set);
}

static int segs_push(tok_segs *s, int32_t id, uint32_t a, uint32_t b) {
    if (s->n == s->cap) {
        size_t nc = s->cap ? s->cap * 2 : 16;
        tok_seg *ns = realloc(s->s, nc * sizeof *ns);
        if (!ns) return -1;
        s->s = ns; s->cap = nc;
    }
    s->s[s->n].id = id; s->s[s->n].s = a; s->s[s->n++].e = b;
    return 0;
}

static int word_char_before(const char *t, size_t pos) {
    if (pos == 0) return 0;
    size_t p = pos - 1;
    while (p > 0 && ((uint8_t)t[p] & 0xC0) == 0x80) p--;
    uint32_t cp;
    tok_utf8_next(t + p, &cp);
    return tok_is_word_char(cp);
}

static int word_char_at(const char *t, size_t len, size_t pos) {
    if (pos >= len) return 0;
    uint32_t cp;
    tok_utf8_next(t + pos, &cp);
    return tok_is_word_char(cp);
}

/* The leftmost-longest match at or after `from`, skipping matches that fail
 * single_word.  Returns the token index or -1. */
static int find_next(const tok_added_set *set, const char *t, size_t len, size_t from, size_t *at) {
    for (size_t i = from; i < len; i++) {
        uint8_t c = (uint8_t)t[i];
        for (int j = set->byte_start[c]; j < set->byte_start[c + 1]; j++) {
            const tok_added_token *a = &set->tok[set->by_byte[j]];
            if (a->len > len - i || memcmp(t + i, a->content, a->len)) continue;
            if (a->single_word && (word_char_before(t, i) || word_char_at(t, len, i + a->len))) break;
            *at = i;
            return set->by_byte[j];
        }
    }
    return -1;
}

int tok_added_split(const tok_added_set *set, const char *t, size_t len, tok_segs *out) {
    out->n = 0;
    size_t pos = 0, from = 0, at;
    while (set->any && from < len) {
        int k = find_next(set, t, len, from, &at);
        if (k < 0) break;
        const tok_added_token *a = &set->tok[k];
        size_t s = at, e = at + a->len;
        if (a->lstrip) {
            while (s > pos) {
                size_t p = s - 1;
                while (p > pos && ((uint8_t)t[p] & 0xC0) == 0x80) p--;
                uint32_t cp;
                tok_utf8_next(t + p, &cp);
                if (!tok_is_whitespace(cp)) break;
                s = p;
            }
        }
        if (a->rstrip) {
            while (e < len) {
                uint32_t cp;
                int l = tok_utf8_next(t + e, &cp);
                if (!tok_is_whitespace(cp)) break;
                e += (size_t)l;
            }
        }
        if (pos < s && segs_push(out, -1, (uint32_t)pos, (uint32_t)s)) return POSY_E_NOMEM;
        if (segs_push(out, a->id, (uint32_t)s, (uint32_t)e)) return POSY_E_NOMEM;
        pos = from = e;
    }
    if (pos < len && segs_push(out, -1, (uint32_t)pos, (uint32_t)len)) return POSY_E_NOMEM;
    return 0;
}

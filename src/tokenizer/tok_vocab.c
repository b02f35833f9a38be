/* tok_vocab: token string <-> id, the hot lookup of every model.
 *
 * Strings live back to back in one pool; the map is open addressing with
 * linear probing over a power-of-two table at most half full, storing the
 * id and the full hash so that a probe compares strings only on a hash hit.
 * tok_vocab_find2 hashes the concatenation a+b without building it, which
 * is how WordPiece looks up "##" + piece with no copy.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static inline uint32_t hash_more(uint32_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}
#define HASH_SEED 2166136261u

int tok_vocab_init(tok_vocab *v, int32_t n_ids, size_t n_tokens) {
    memset(v, 0, sizeof *v);
    size_t cap = 16;
    while (cap < n_tokens * 2 + 2) cap <<= 1;
    v->mask = (uint32_t)(cap - 1);
    v->slots = malloc(cap * sizeof *v->slots);
    v->slot_hash = malloc(cap * sizeof *v->slot_hash);
    v->n_ids = n_ids;
    v->str_off = malloc(((size_t)n_ids + 1) * sizeof *v->str_off);
    v->str_len = calloc((size_t)n_ids + 1, sizeof *v->str_len);
    v->pool_cap = n_tokens * 8 + 64;
    v->pool = malloc(v->pool_cap);
    if (!v->slots || !v->slot_hash || !v->str_off || !v->str_len || !v->pool) {
        tok_vocab_free(v);
        return -1;
    }
    memset(v->slots, 0xFF, cap * sizeof *v->slots);
    memset(v->str_off, 0xFF, ((size_t)n_ids + 1) * sizeof *v->str_off);
    return 0;
}

void tok_vocab_free(tok_vocab *v) {
    free(v->pool); free(v->str_off); free(v->str_len); free(v->slots); free(v->slot_hash);
    memset(v, 0, sizeof *v);
}

int32_t tok_vocab_find2(const tok_vocab *v, const char *a, size_t alen, const char *b, size_t blen) {
    if (!v->slots || alen + blen > v->max_len) return -1;
    uint32_t h = hash_more(hash_more(HASH_SEED, a, alen), b, blen);
    for (uint32_t i = h & v->mask;; i = (i + 1) & v->mask) {
        int32_t id = v->slots[i];
        if (id < 0) return -1;
        if (v->slot_hash[i] != h || v->str_len[id] != alen + blen) continue;
        const char *s = v->pool + v->str_off[id];
        if ((alen == 0 || !memcmp(s, a, alen)) && !memcmp(s + alen, b, blen)) return id;
    }
}

int tok_vocab_add(tok_vocab *v, int32_t id, const char *s, size_t len) {
    if (id < 0 || id >= v->n_ids || len > UINT32_MAX / 2) return -1;
    uint32_t h = hash_more(HASH_SEED, s, len);
    uint32_t i = h & v->mask;
    for (;; i = (i + 1) & v->mask) {
        int32_t o = v->slots[i];
        if (o < 0) break;
        if (v->slot_hash[i] == h && v->str_len[o] == len && !memcmp(v->pool + v->str_off[o], s, len)) {
            if (v->str_off[id] == UINT32_MAX) { v->str_off[id] = v->str_off[o]; v->str_len[id] = (uint32_t)len; }
            if (v->last_wins) v->slots[i] = id;
            return 1;
        }
    }
    if ((size_t)(v->count + 1) * 2 > (size_t)v->mask + 1) return -1;
    if (v->pool_len + len + 1 > v->pool_cap) {
        size_t nc = v->pool_cap * 2 + len + 1;
        char *np = realloc(v->pool, nc);
        if (!np) return -1;
        v->pool = np; v->pool_cap = nc;
    }
    if (v->pool_len + len + 1 > UINT32_MAX) return -1;
    memcpy(v->pool + v->pool_len, s, len);
    v->pool[v->pool_len + len] = '\0';
    v->str_off[id] = (uint32_t)v->pool_len;
    v->str_len[id] = (uint32_t)len;
    v->pool_len += len + 1;
    v->slots[i] = id;
    v->slot_hash[i] = h;
    v->count++;
    if (len > v->max_len) v->max_len = (uint32_t)len;
    return 0;
}

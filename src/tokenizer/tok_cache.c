/* tok_cache: a per-scratch cache of model results for short pieces.
 *
 * Natural text repeats words, and a model's tokens for a piece depend on
 * its bytes alone, so a direct-mapped table (piece bytes -> token ids and
 * offsets relative to the piece) skips WordPiece's, BPE's and Unigram's
 * work for most pieces.  HF keeps a similar word cache.  The cache lives
 * in the encoding's (or batch thread's) scratch, so it needs no locking
 * and the tokenizer stays read-only.  A collision simply replaces the slot.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

#define CACHE_SLOTS 2048
#define CACHE_MAX_BYTES 32
#define CACHE_MAX_TOKS 12

typedef struct {
    uint32_t hash;
    uint8_t len, n;
    char bytes[CACHE_MAX_BYTES];
    int32_t id[CACHE_MAX_TOKS];
    uint8_t s[CACHE_MAX_TOKS], e[CACHE_MAX_TOKS];
} cache_slot;

struct tok_cache { cache_slot slot[CACHE_SLOTS]; };

static uint32_t hash_bytes(const char *p, uint32_t n) {
    uint32_t h = 2166136261u ^ n;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 16777619u;
    return h;
}

/* On a hit, push the cached tokens (relative offsets) and return 1. */
int tok_cache_get(tok_model_scratch *ms, const char *p, uint32_t n, tok_toks *out, uint32_t *hash) {
    if (n > CACHE_MAX_BYTES || n == 0) return 0;
    *hash = hash_bytes(p, n);
    if (!ms->cache) return 0;
    cache_slot *c = &ms->cache->slot[*hash & (CACHE_SLOTS - 1)];
    if (c->len != n || c->hash != *hash || memcmp(c->bytes, p, n)) return 0;
    for (int i = 0; i < c->n; i++)
        if (tok_toks_push(out, c->id[i], c->s[i], c->e[i])) return -1;
    return 1;
}

/* Remember tokens out->t[first..] (relative offsets) for piece p. */
void tok_cache_put(tok_model_scratch *ms, const char *p, uint32_t n, uint32_t hash, const tok_toks *out,
                   size_t first) {
    size_t k = out->n - first;
    if (n > CACHE_MAX_BYTES || n == 0 || k > CACHE_MAX_TOKS) return;
    if (!ms->cache && !(ms->cache = calloc(1, sizeof *ms->cache))) return;
    cache_slot *c = &ms->cache->slot[hash & (CACHE_SLOTS - 1)];
    c->hash = hash;
    c->len = (uint8_t)n;
    c->n = (uint8_t)k;
    memcpy(c->bytes, p, n);
    for (size_t i = 0; i < k; i++) {
        c->id[i] = out->t[first + i].id;
        c->s[i] = (uint8_t)out->t[first + i].s;
        c->e[i] = (uint8_t)out->t[first + i].e;
    }
}

void tok_cache_free(tok_cache *c) { free(c); }

/* tok_bpe: the BPE model (GPT-2, RoBERTa, Qwen2/3, Llama-3 style).
 *
 * A piece starts as one symbol per char (continuing_subword_prefix /
 * end_of_word_suffix applied as HF does; chars missing from the vocab go to
 * byte fallback "<0xXX>" tokens, else to unk, fused if fuse_unk), then the
 * adjacent pair with the lowest merge rank is merged, leftmost first, until
 * no pair has a rank: exactly HF's Word::merge_all without dropout.
 *
 * Merges live in an open-addressing map (left id, right id) -> (rank, new
 * id).  Short pieces (the vast majority) use a plain scan for the best
 * pair; long ones a binary heap with lazy invalidation, so a hostile
 * megabyte-long word stays O(n log n).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_bpe_impl.h"

#define SCAN_MAX 48

static inline uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }
static inline uint32_t key_hash(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33;
    return (uint32_t)k;
}

int tok_bpe_merge_find(const tok_bpe_model *bm, int32_t a, int32_t b, int32_t *rank, int32_t *id) {
    uint64_t k = pair_key(a, b);
    for (uint32_t i = key_hash(k) & bm->mask;; i = (i + 1) & bm->mask) {
        const tok_bpe_slot *sl = &bm->slots[i];
        if (sl->key == k) { *rank = sl->rank; *id = sl->newid; return 1; }
        if (sl->key == UINT64_MAX) return 0;
    }
}

int tok_bpe_merge_add(tok_bpe_model *bm, int32_t a, int32_t b, int32_t rank, int32_t id) {
    uint64_t k = pair_key(a, b);
    uint32_t i = key_hash(k) & bm->mask;
    for (;; i = (i + 1) & bm->mask) {
        if (bm->slots[i].key == UINT64_MAX) break;
        if (bm->slots[i].key == k) return 1; /* duplicate merge: the first (lowest rank) wins */
    }
    bm->slots[i].key = k; bm->slots[i].rank = rank; bm->slots[i].newid = id;
    return 0;
}

typedef struct { int32_t id; uint32_t s, e; int32_t prev, next; } sym;

/* Initial symbols of the piece; returns the count or -1 on no memory. */
static long init_symbols(const tok_model *m, const tok_bpe_model *bm, const char *w, uint32_t len,
                         sym *sy) {
    long n = 0;
    for (uint32_t i = 0; i < len;) {
        uint32_t l = (uint32_t)tok_utf8_len((uint8_t)w[i]);
        int first = i == 0, last = i + l >= len;
        int32_t id;
        if ((!first && bm->prefix_len) || (last && bm->suffix_len)) {
            char tmp[64 + 4 + 64];
            size_t k = 0;
            if (!first) { memcpy(tmp, bm->prefix, bm->prefix_len); k = bm->prefix_len; }
            memcpy(tmp + k, w + i, l);
            k += l;
            if (last) { memcpy(tmp + k, bm->suffix, bm->suffix_len); k += bm->suffix_len; }
            id = tok_vocab_find(&m->vocab, tmp, k);
        } else if ((uint8_t)w[i] < 0xC8) { /* U+0000..U+01FF: table */
            uint32_t cp;
            tok_utf8_next(w + i, &cp);
            id = bm->small_ids[cp];
        } else {
            id = tok_vocab_find(&m->vocab, w + i, l);
        }
        if (id < 0 && bm->byte_fallback) {
            int ok = 1;
            for (uint32_t k = 0; k < l && ok; k++) ok = bm->byte_ids[(uint8_t)w[i + k]] >= 0;
            if (ok) {
                for (uint32_t k = 0; k < l; k++) sy[n++] = (sym){bm->byte_ids[(uint8_t)w[i + k]], i + k, i + k + 1, 0, 0};
                i += l;
                continue;
            }
        }
        if (id < 0) {
            if (m->unk_id < 0) { i += l; continue; }
            if (bm->fuse_unk && n > 0 && sy[n - 1].id == m->unk_id && sy[n - 1].e == i) {
                sy[n - 1].e = i + l;
                i += l;
                continue;
            }
            id = m->unk_id;
        }
        sy[n++] = (sym){id, i, i + l, 0, 0};
        i += l;
    }
    return n;
}

/* Short words: one rank per adjacent pair, recomputed only next to a merge;
 * the best pair is found by scanning the ranks (no hashing in the scan). */
static void merge_scan(const tok_bpe_model *bm, sym *sy, long *np) {
    long n = *np;
    int32_t rk[SCAN_MAX], nid[SCAN_MAX];
    for (long i = 0; i + 1 < n; i++)
        if (!tok_bpe_merge_find(bm, sy[i].id, sy[i + 1].id, &rk[i], &nid[i])) rk[i] = INT32_MAX;
    while (n > 1) {
        long at = 0;
        for (long i = 1; i + 1 < n; i++)
            if (rk[i] < rk[at]) at = i;
        if (rk[at] == INT32_MAX) break;
        sy[at].id = nid[at];
        sy[at].e = sy[at + 1].e;
        memmove(sy + at + 1, sy + at + 2, (size_t)(n - at - 2) * sizeof *sy);
        memmove(rk + at + 1, rk + at + 2, (size_t)(n - at - 3 > 0 ? n - at - 3 : 0) * sizeof *rk);
        memmove(nid + at + 1, nid + at + 2, (size_t)(n - at - 3 > 0 ? n - at - 3 : 0) * sizeof *nid);
        n--;
        if (at + 1 < n && !tok_bpe_merge_find(bm, sy[at].id, sy[at + 1].id, &rk[at], &nid[at])) rk[at] = INT32_MAX;
        if (at + 1 >= n) rk[at] = INT32_MAX;
        if (at > 0 && !tok_bpe_merge_find(bm, sy[at - 1].id, sy[at].id, &rk[at - 1], &nid[at - 1])) rk[at - 1] = INT32_MAX;
    }
    *np = n;
}

/* Min-heap of candidate merges ordered by (rank, position). */
typedef struct { int32_t rank; int32_t pos; int32_t left_id, right_id; } cand;
static int cand_less(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}
static void heap_push(cand *h, long *n, cand c) {
    long i = (*n)++;
    while (i > 0) {
        long p = (i - 1) / 2;
        if (!cand_less(&c, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}
static cand heap_pop(cand *h, long *n) {
    cand top = h[0], last = h[--(*n)];
    long i = 0;
    for (;;) {
        long l = 2 * i + 1, r = l + 1, m = i;
        const cand *best = &last;
        if (l < *n && cand_less(&h[l], best)) { m = l; best = &h[l]; }
        if (r < *n && cand_less(&h[r], best)) { m = r; }
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n > 0) h[i] = last;
    return top;
}

static void push_pair(const tok_bpe_model *bm, const sym *sy, long i, cand *h, long *hn) {
    int32_t r, id;
    long j = sy[i].next;
    if (j < 0) return;
    if (tok_bpe_merge_find(bm, sy[i].id, sy[j].id, &r, &id))
        heap_push(h, hn, (cand){r, (int32_t)i, sy[i].id, sy[j].id});
}

static void merge_heap(const tok_bpe_model *bm, sym *sy, long n, cand *h) {
    long hn = 0;
    for (long i = 0; i < n; i++) { sy[i].prev = (int32_t)i - 1; sy[i].next = i + 1 < n ? (int32_t)i + 1 : -1; }
    for (long i = 0; i + 1 < n; i++) push_pair(bm, sy, i, h, &hn);
    while (hn > 0) {
        cand c = heap_pop(h, &hn);
        sym *a = &sy[c.pos];
        if (a->id != c.left_id || a->next < 0 || sy[a->next].id != c.right_id) continue; /* stale */
        int32_t r, id;
        tok_bpe_merge_find(bm, a->id, sy[a->next].id, &r, &id);
        sym *b = &sy[a->next];
        a->id = id;
        a->e = b->e;
        a->next = b->next;
        if (b->next >= 0) sy[b->next].prev = c.pos;
        b->id = -1; /* removed */
        if (a->prev >= 0) push_pair(bm, sy, a->prev, h, &hn);
        push_pair(bm, sy, c.pos, h, &hn);
    }
}

int tok_bpe_encode(const tok_model *m, const tok_buf *b, uint32_t off, uint32_t len, tok_toks *out,
                   tok_model_scratch *ms) {
    const tok_bpe_model *bm = m->bpe;
    const char *w = b->b + off;
    if (bm->ignore_merges) {
        int32_t id = tok_vocab_find(&m->vocab, w, len);
        if (id >= 0) return tok_toks_push(out, id, 0, len) ? POSY_E_NOMEM : 0;
    }
    sym *sy = tok_mem_get(&ms->a, (size_t)len * 4 * sizeof *sy + sizeof *sy);
    if (!sy) return POSY_E_NOMEM;
    long n = init_symbols(m, bm, w, len, sy);
    if (n <= SCAN_MAX) {
        merge_scan(bm, sy, &n);
        for (long i = 0; i < n; i++)
            if (tok_toks_push(out, sy[i].id, sy[i].s, sy[i].e)) return POSY_E_NOMEM;
        return 0;
    }
    cand *h = tok_mem_get(&ms->b, (size_t)n * 3 * sizeof *h + sizeof *h);
    if (!h) return POSY_E_NOMEM;
    merge_heap(bm, sy, n, h);
    for (long i = 0; i >= 0 && i < n; i = sy[i].next)
        if (tok_toks_push(out, sy[i].id, sy[i].s, sy[i].e)) return POSY_E_NOMEM;
    return 0;
}

void tok_bpe_free(void *p) {
    tok_bpe_model *bm = p;
    if (!bm) return;
    free(bm->slots);
    free(bm->prefix); free(bm->suffix);
    free(bm);
}

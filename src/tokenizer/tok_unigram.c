/* tok_unigram: the Unigram model (sentencepiece; XLM-R, e5, bge-m3).
 *
 * Viterbi over the bytes of a piece exactly as HF's encode_optimized: at
 * each char boundary every vocab entry that starts there (found by walking
 * a byte trie) extends the best path by its log-probability; when no
 * single-char entry exists the char may be taken as unknown at min_score -
 * 10; ties keep the first (shorter) candidate; adjacent unknowns are fused
 * into one token.  Strings not in the vocab become byte-fallback tokens
 * when the model has them, else the unknown id.
 *
 * The trie is a hash map (node, byte) -> child, one probe per byte, built
 * once at load; the lattice lives in the encoding's scratch.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_load_util.h"

typedef struct tok_uni_model {
    double *score;            /* per id */
    double min_score;
    int byte_fallback;
    int32_t byte_ids[256];
    /* trie */
    uint64_t *keys;           /* (node << 8 | byte) + 1, 0 empty */
    int32_t *child;
    uint32_t mask;
    int32_t *node_tok;        /* per node: vocab id or -1 */
    int32_t n_nodes;
} tok_uni_model;

static inline uint32_t h64(uint64_t k) {
    k ^= k >> 33; k *= 0xff51afd7ed558ccdULL; k ^= k >> 33;
    return (uint32_t)k;
}

static int32_t trie_step(const tok_uni_model *u, int32_t node, uint8_t b) {
    uint64_t k = (((uint64_t)node << 8) | b) + 1;
    for (uint32_t i = h64(k) & u->mask;; i = (i + 1) & u->mask) {
        if (u->keys[i] == 0) return -1;
        if (u->keys[i] == k) return u->child[i];
    }
}

static int32_t trie_add_edge(tok_uni_model *u, int32_t node, uint8_t b) {
    uint64_t k = (((uint64_t)node << 8) | b) + 1;
    uint32_t i = h64(k) & u->mask;
    for (;; i = (i + 1) & u->mask) {
        if (u->keys[i] == 0) break;
        if (u->keys[i] == k) return u->child[i];
    }
    u->keys[i] = k;
    u->child[i] = u->n_nodes;
    u->node_tok[u->n_nodes] = -1;
    return u->n_nodes++;
}

typedef struct { double score; int32_t id; int32_t from; } lnode; /* from -1: unreached */

int tok_unigram_encode(const tok_model *m, const tok_buf *b, uint32_t off, uint32_t len, tok_toks *out,
                       tok_model_scratch *ms) {
    const tok_uni_model *u = m->uni;
    const char *w = b->b + off;
    lnode *L = tok_mem_get(&ms->a, ((size_t)len + 1) * sizeof *L);
    if (!L) return POSY_E_NOMEM;
    for (uint32_t i = 0; i <= len; i++) { L[i].score = 0; L[i].id = -1; L[i].from = -1; }
    double unk_score = u->min_score - 10.0;
    for (uint32_t s = 0; s < len;) {
        uint32_t mblen = (uint32_t)tok_utf8_len((uint8_t)w[s]);
        double here = L[s].score;
        int single = 0;
        int32_t node = 0;
        for (uint32_t e = s; e < len; e++) {
            node = trie_step(u, node, (uint8_t)w[e]);
            if (node < 0) break;
            int32_t id = u->node_tok[node];
            if (id < 0) continue;
            double c = here + u->score[id];
            lnode *t = &L[e + 1];
            if (t->from < 0 || c > t->score) { t->score = c; t->from = (int32_t)s; t->id = id; }
            if (e + 1 - s == mblen) single = 1;
        }
        if (!single) {
            if (m->unk_id < 0) return POSY_E_INVALID;
            lnode *t = &L[s + mblen];
            double c = here + unk_score;
            if (t->from < 0 || c > t->score) { t->score = c; t->from = (int32_t)s; t->id = m->unk_id; }
        }
        s += mblen;
    }
    /* backtrack, writing tokens in reverse at the end of `out`, fusing unknowns */
    size_t first = out->n;
    for (uint32_t e = len; e > 0;) {
        lnode *n = &L[e];
        uint32_t s = (uint32_t)n->from;
        if (n->id == m->unk_id && out->n > first && out->t[out->n - 1].id == -2 &&
            out->t[out->n - 1].s == e) {
            out->t[out->n - 1].s = s; /* extend the fused unknown run leftwards */
        } else if (tok_toks_push(out, n->id == m->unk_id ? -2 : n->id, s, e)) {
            return POSY_E_NOMEM;
        }
        e = s;
    }
    /* reverse into order; resolve fused unknowns (byte fallback or unk id) */
    size_t n = out->n - first;
    for (size_t i = 0; i < n / 2; i++) {
        tok_tok x = out->t[first + i];
        out->t[first + i] = out->t[out->n - 1 - i];
        out->t[out->n - 1 - i] = x;
    }
    for (size_t i = first; i < out->n; i++) {
        tok_tok *k = &out->t[i];
        uint32_t s = k->s, e = k->e;
        if (k->id != -2) continue;
        /* a single unknown char's string is never in the vocab; a fused run could be */
        int32_t id = tok_vocab_find(&m->vocab, w + s, e - s);
        if (id >= 0) { k->id = id; continue; }
        k->id = m->unk_id;
        if (!u->byte_fallback) continue;
        int ok = 1;
        for (uint32_t j = s; j < e && ok; j++) ok = u->byte_ids[(uint8_t)w[j]] >= 0;
        if (!ok) continue;
        /* replace by e - s byte tokens, all with the run's offsets (as HF) */
        tok_tok run = *k;
        size_t extra = e - s - 1, tail = out->n - i - 1;
        for (size_t x = 0; x < extra; x++)
            if (tok_toks_push(out, 0, 0, 0)) return POSY_E_NOMEM;
        k = &out->t[i];
        memmove(k + 1 + extra, k + 1, tail * sizeof *k);
        for (uint32_t j = s; j < e; j++) {
            out->t[i + (j - s)] = run;
            out->t[i + (j - s)].id = u->byte_ids[(uint8_t)w[j]];
        }
        i += extra;
    }
    return 0;
}

/* The score as HF holds it.  HF reads tokenizer.json with serde_json's
 * default float parser, which is not correctly rounded: it builds the
 * decimal significand as a u64, converts it to f64 and then multiplies or
 * divides by a power of ten, rounding twice.  Viterbi ties are decided by
 * the last bit, so posy reproduces that: recover the shortest decimal text
 * of the (correctly rounded) double jansson parsed, which is the text the
 * file holds when it was written by Python or Rust, and redo serde's steps. */
static double serde_f64(double d) {
    if (d == 0 || !isfinite(d)) return d;
    char buf[48];
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, d);
        if (strtod(buf, NULL) == d) break;
    }
    const char *c = buf;
    int neg = *c == '-';
    if (neg) c++;
    uint64_t sig = 0;
    int exp = 0, after = 0;
    for (; *c && *c != 'e'; c++) {
        if (*c == '.') { after = 1; continue; }
        sig = sig * 10 + (uint64_t)(*c - '0');
        if (after) exp--;
    }
    if (*c == 'e') exp += atoi(c + 1);
    double f = (double)sig;
    for (;;) {
        int a = exp < 0 ? -exp : exp;
        if (a <= 308) {
            char pw[16];
            snprintf(pw, sizeof pw, "1e%d", a);
            double p10 = strtod(pw, NULL);
            f = exp >= 0 ? f * p10 : f / p10;
            break;
        }
        if (exp >= 0) return neg ? -HUGE_VAL : HUGE_VAL;
        f /= 1e308;
        exp += 308;
    }
    return neg ? -f : f;
}

static int build_trie(tok_model *m, tok_uni_model *u, posy_err *err) {
    size_t total = 1;
    for (int32_t id = 0; id < m->vocab.n_ids; id++) total += m->vocab.str_len[id];
    size_t cap = 16;
    while (cap < total * 2 + 2) cap <<= 1;
    u->mask = (uint32_t)(cap - 1);
    u->keys = calloc(cap, sizeof *u->keys);
    u->child = malloc(cap * sizeof *u->child);
    u->node_tok = malloc((total + 1) * sizeof *u->node_tok);
    if (!u->keys || !u->child || !u->node_tok) return posy_err_set(err, POSY_E_NOMEM, "model.vocab: out of memory");
    u->n_nodes = 1;
    u->node_tok[0] = -1;
    for (int32_t id = 0; id < m->vocab.n_ids; id++) {
        uint32_t l;
        const char *s = tok_vocab_str(&m->vocab, id, &l);
        if (!s || l == 0 || tok_vocab_find(&m->vocab, s, l) != id) continue; /* duplicates: first id wins */
        int32_t node = 0;
        for (uint32_t k = 0; k < l; k++) node = trie_add_edge(u, node, (uint8_t)s[k]);
        u->node_tok[node] = id;
    }
    return 0;
}

int tok_load_unigram(json_t *j, tok_model *m, posy_err *err) {
    m->kind = TOK_M_UNIGRAM;
    tok_uni_model *u = calloc(1, sizeof *u);
    if (!u) return posy_err_set(err, POSY_E_NOMEM, "oom");
    m->uni = u;
    json_t *v = json_object_get(j, "vocab");
    if (!json_is_array(v)) return posy_err_set(err, POSY_E_INVALID, "model.vocab: expected an array of [piece, score]");
    size_t n = json_array_size(v);
    if (n == 0) return posy_err_set(err, POSY_E_INVALID, "model.vocab: empty");
    if (n >= INT32_MAX / 4) return posy_err_set(err, POSY_E_INVALID, "model.vocab: too large");
    if (tok_vocab_init(&m->vocab, (int32_t)n, n)) return posy_err_set(err, POSY_E_NOMEM, "model.vocab: out of memory");
    m->vocab.last_wins = 1; /* HF builds token -> id by inserting in order */
    u->score = malloc(n * sizeof *u->score);
    if (!u->score) return posy_err_set(err, POSY_E_NOMEM, "oom");
    u->min_score = 1e300;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(json_array_get(e, 0)) ||
            !json_is_number(json_array_get(e, 1)))
            return posy_err_set(err, POSY_E_INVALID, "model.vocab[%zu]: expected [piece, score]", i);
        json_t *p = json_array_get(e, 0);
        if (tok_vocab_add(&m->vocab, (int32_t)i, json_string_value(p), json_string_length(p)) < 0)
            return posy_err_set(err, POSY_E_NOMEM, "model.vocab: out of memory");
        u->score[i] = serde_f64(json_number_value(json_array_get(e, 1)));
        if (u->score[i] < u->min_score) u->min_score = u->score[i];
    }
    long long unk;
    if (tok_j_int(j, "unk_id", 0, -1, &unk, "model", err)) return err->code;
    if (unk >= (long long)n || unk < -1) return posy_err_set(err, POSY_E_INVALID, "model.unk_id: %lld out of range", unk);
    m->unk_id = (int32_t)unk;
    if (tok_j_bool(j, "byte_fallback", 0, &u->byte_fallback, "model", err)) return err->code;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        u->byte_ids[b] = tok_vocab_find(&m->vocab, name, 6);
    }
    return build_trie(m, u, err);
}

void tok_uni_free(void *p) {
    tok_uni_model *u = p;
    if (!u) return;
    free(u->score); free(u->keys); free(u->child); free(u->node_tok);
    free(u);
}

/* gw_score: POST /score and /v1/score (vLLM's Score API): one score for
 * each (text_1, text_2) pair, however the model scores pairs.
 *
 *   a reranker (one label): the pair through the tokenizer's pair
 *       template as one sequence, scored sigmoid(logit) as vLLM does for a
 *       one-label cross-encoder (and /rerank without raw_scores);
 *   an embedding model: each text on its own, embedded as /embed embeds
 *       it (gw_embed.c: text_1's one or n, then text_2's n, numbered so in
 *       errors), scored by the cosine of the two vectors, as vLLM scores
 *       pairs with an embedding model.
 * A classifier of several labels, or a SPLADE model, has no one pair
 * score: refused before this (gw_embed.c).
 *   answer: {"id": "score-<n>", "object": "list", "created", "model",
 *            "data": [{"index": i, "object": "score", "score": s}, ...],
 *            "usage": {"prompt_tokens", "total_tokens", "completion_tokens": 0,
 *                      "prompt_tokens_details": null}}, pairs in order.
 */
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "gw_internal.h"
#include "gw_parse.h"

int gw_score_tokenize(gw_call *c, const gw_score_req *r) {
    if (gw_seqs_init(c, r->n)) return -1;
    size_t alen, blen;
    for (int i = 0; i < r->n; i++) {
        const char *a = gw_score_text(r, 0, r->n1 == 1 ? 0 : i, &alen), *b = gw_score_text(r, 1, i, &blen);
        if (gw_push_text(c, "pair", i, a, alen, b, blen, r->truncate, r->dir)) return -1;
    }
    c->sc_n1 = 0;
    c->sc_pairs = r->n;
    c->prompt_tokens = c->cu[c->n_seqs];
    return 0;
}

static double sc_cosine(const float *a, const float *b, int dim) {
    double dot = 0, na = 0, nb = 0;
    for (int k = 0; k < dim; k++) {
        dot += (double)a[k] * b[k];
        na += (double)a[k] * a[k];
        nb += (double)b[k] * b[k];
    }
    return na > 0 && nb > 0 ? dot / sqrt(na * nb) : 0.0;
}

static atomic_ulong sc_ids;   /* the "id" of answers: score-<n> */

int gw_score_write(gw_call *c) {
    const gw_model *m = &c->srv->model;
    gw_buf *b = &c->resp;
    gw_buf_printf(b, "{\"id\":\"score-%lu\",\"object\":\"list\",\"created\":%lld,\"model\":",
                  atomic_fetch_add(&sc_ids, 1) + 1, (long long)time(NULL));
    gw_buf_json_str(b, m->name, strlen(m->name));
    gw_buf_puts(b, ",\"data\":[");
    for (int i = 0; i < c->sc_pairs; i++) {
        double s;
        if (!c->sc_n1) {   /* a cross-encoder: one logit a pair */
            s = 1.0 / (1.0 + exp(-(double)c->out[i]));
        } else {
            const float *v1 = c->out + (size_t)(c->sc_n1 == 1 ? 0 : i) * m->dim;
            s = sc_cosine(v1, c->out + (size_t)(c->sc_n1 + i) * m->dim, m->dim);
        }
        gw_buf_printf(b, "%s{\"index\":%d,\"object\":\"score\",\"score\":%.9g}", i ? "," : "", i, s);
    }
    gw_buf_printf(b, "],\"usage\":{\"prompt_tokens\":%ld,\"total_tokens\":%ld,\"completion_tokens\":0,"
                  "\"prompt_tokens_details\":null}}", c->prompt_tokens, c->prompt_tokens);
    return b->oom ? -1 : 0;
}

/* gw_rerank: POST /rerank (TEI's) for a cross-encoder reranker.
 *
 * Each text goes to the engine as one sequence: the pair (query, text)
 * through the tokenizer's pair template (BERT: [CLS] q [SEP] t [SEP] with
 * token types 0 / 1; XLM-R: <s> q </s></s> t </s>), truncated longest
 * first when the request allows it.  The engine's vector for a reranker is
 * its one logit (eng_config_rerank.c); the answer is TEI's: the texts
 * sorted by score, highest first, [{"index": i, "score": s[, "text": t]}],
 * the score sigmoid(logit) unless "raw_scores" (ties keep input order).
 * POST /v1/rerank answers the Cohere / Jina form that vLLM and Infinity
 * serve: {"id", "model", "results": [{"index", "relevance_score",
 * "document": {"text"}}], "usage": {"total_tokens"}}, the best top_n.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gw_internal.h"
#include "gw_parse.h"

static __thread tok_encoding tl_pair;

void gw_rerank_worker_exit(void) { tok_encoding_free(&tl_pair); }

int gw_seqs_init(gw_call *c, int n) {
    c->cu = malloc(((size_t)n + 1) * sizeof *c->cu);
    if (!c->cu) {
        gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory");
        return -1;
    }
    c->cap_seqs = n + 1;
    c->cu[0] = 0;
    c->n_inputs = n;
    return 0;
}

int gw_push_text(gw_call *c, const char *what, int i, const char *a, size_t alen, const char *b, size_t blen,
                 int truncate, tok_trunc_dir dir) {
    const gw_model *m = &c->srv->model;
    tok_opts o = {.add_special = !m->cfg || m->cfg->add_special, .max_len = truncate ? m->max_input_tokens : 0,
                  .trunc_dir = dir};
    posy_err err;
    posy_err_clear(&err);
    if (b ? tok_encode_pair(m->tok, a, alen, b, blen, &o, &tl_pair, &err) : tok_encode(m->tok, a, alen, &o, &tl_pair, &err)) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "tokenization_failed", "%s %d: %s", what, i, err.msg);
        return -1;
    }
    int n = tl_pair.n;
    const eng_config *cfg = m->cfg;
    if (cfg && cfg->rerank_decoder && cfg->cls_pad_id >= 0 && cfg->info.causal)   /* see eng_config.h */
        while (n > 1 && tl_pair.ids[n - 1] == cfg->cls_pad_id) n--;
    if (n > m->max_input_tokens) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "input_too_long", "%s %d: %s %d tokens, more than the model's limit of %d "
                     "(set \"truncate\": true)", what, i, b ? "the pair is" : "it is", n, m->max_input_tokens);
        return -1;
    }
    if (gw_push_seq(c, tl_pair.ids, tl_pair.type_ids, n, 0)) {
        gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory");
        return -1;
    }
    return 0;
}

int gw_rerank_tokenize(gw_call *c, const gw_rerank_req *r) {
    if (gw_seqs_init(c, r->n)) return -1;
    for (int i = 0; i < r->n; i++) {
        size_t len;
        const char *t = gw_rerank_text(r->texts, i, &len);
        if (gw_push_text(c, "text", i, r->query, r->query_len, t, len, r->truncate, r->dir)) return -1;
    }
    c->prompt_tokens = c->cu[c->n_seqs];
    return 0;
}

/* the scores qsort's comparator reads: per pool thread, as each sorts its own call */
static __thread const float *rr_scores;

static int rr_by_score(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    if (rr_scores[i] != rr_scores[j]) return rr_scores[i] > rr_scores[j] ? -1 : 1;
    return i - j;
}

static atomic_ulong rr_ids;   /* the "id" of /v1/rerank answers: rerank-<n> */

/* Text i of the request as a JSON string, between `before` and `after`. */
static void rr_put_text(gw_call *c, int i, const char *before, const char *after) {
    size_t len;
    const char *t = gw_rerank_text(c->rr_texts, i, &len);
    gw_buf_puts(&c->resp, before);
    gw_buf_json_str(&c->resp, t, len);
    gw_buf_puts(&c->resp, after);
}

static void rr_write_cohere(gw_call *c, const int *order) {
    gw_buf *b = &c->resp;
    const gw_model *m = &c->srv->model;
    gw_buf_printf(b, "{\"id\":\"rerank-%lu\",\"model\":", atomic_fetch_add(&rr_ids, 1) + 1);
    gw_buf_json_str(b, m->name, strlen(m->name));
    gw_buf_puts(b, ",\"results\":[");
    for (int k = 0; k < c->rr_top_n && k < c->n_seqs; k++) {
        const int i = order[k];
        gw_buf_printf(b, "%s{\"index\":%d,\"relevance_score\":%.9g", k ? "," : "", i, (double)c->out[i]);
        if (c->rr_texts) rr_put_text(c, i, ",\"document\":{\"text\":", "}");
        gw_buf_putc(b, '}');
    }
    gw_buf_printf(b, "],\"usage\":{\"total_tokens\":%ld}}", c->prompt_tokens);
}

int gw_rerank_write(gw_call *c) {
    const int n = c->n_seqs;
    int *order = malloc((size_t)n * sizeof *order);
    if (!order) return -1;
    for (int i = 0; i < n; i++) {
        if (!c->raw_scores) c->out[i] = 1.0f / (1.0f + expf(-c->out[i]));
        order[i] = i;
    }
    rr_scores = c->out;
    qsort(order, (size_t)n, sizeof *order, rr_by_score);
    gw_buf *b = &c->resp;
    if (c->rr_cohere) {
        rr_write_cohere(c, order);
        free(order);
        return 0;
    }
    gw_buf_putc(b, '[');
    for (int k = 0; k < n; k++) {
        const int i = order[k];
        gw_buf_printf(b, "%s{\"index\":%d,", k ? "," : "", i);
        if (c->rr_texts) rr_put_text(c, i, "\"text\":", ",");
        gw_buf_printf(b, "\"score\":%.9g}", (double)c->out[i]);
    }
    gw_buf_putc(b, ']');
    free(order);
    return 0;
}

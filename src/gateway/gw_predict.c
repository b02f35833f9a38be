/* gw_predict: POST /predict (TEI's) and POST /classify (vLLM's) for a
 * sequence classifier (eng_config_rerank.c: a ...ForSequenceClassification
 * model of any number of labels, a reranker's one label included).
 *
 * Each input goes to the engine as one sequence, a text or a pair through
 * the tokenizer's template, as for /rerank; the engine's vector is the
 * head's logits, one a label.  The scores are what transformers'
 * text-classification pipeline gives (eng_score_fn): softmax over the
 * labels, or a sigmoid each for a multi-label or one-label model, or the
 * logits for a regression one -- and the logits themselves on /predict
 * with "raw_scores".
 *   /predict:  [{"score": s, "label": name}, ...] sorted by score, highest
 *              first (ties in label order), or a list of those when the
 *              request's "inputs" was a list of inputs.
 *   /classify: {"id", "object": "list", "created", "model", "data":
 *              [{"index", "label" (the best), "probs" (label order),
 *              "num_classes"}], "usage"}.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gw_internal.h"
#include "gw_parse.h"

int gw_predict_tokenize(gw_call *c, const gw_predict_req *r) {
    if (gw_seqs_init(c, r->n)) return -1;
    for (int i = 0; i < r->n; i++) {
        const char *a, *b;
        size_t alen, blen;
        gw_predict_input(r, i, &a, &alen, &b, &blen);
        if (gw_push_text(c, "input", i, a, alen, b, blen, r->truncate, r->dir)) return -1;
    }
    c->prompt_tokens = c->cu[c->n_seqs];
    return 0;
}

/* The scores of one input's logits, in place. */
static void pr_scores(float *v, int n, eng_score_fn fn) {
    if (fn == ENG_SCORE_NONE) return;
    if (fn == ENG_SCORE_SIGMOID) {
        for (int k = 0; k < n; k++) v[k] = (float)(1.0 / (1.0 + exp(-(double)v[k])));
        return;
    }
    double mx = v[0], sum = 0;
    for (int k = 1; k < n; k++) mx = v[k] > mx ? v[k] : mx;
    for (int k = 0; k < n; k++) sum += exp((double)v[k] - mx);
    for (int k = 0; k < n; k++) v[k] = (float)(exp((double)v[k] - mx) / sum);
}

static __thread const float *pr_sorting;   /* qsort's scores: per pool thread, each sorts its own call */

static int pr_by_score(const void *a, const void *b) {
    const int i = *(const int *)a, j = *(const int *)b;
    if (pr_sorting[i] != pr_sorting[j]) return pr_sorting[i] > pr_sorting[j] ? -1 : 1;
    return i - j;
}

static void pr_write_tei(gw_call *c, const float *v, int n, int *order) {
    const eng_config *cfg = c->srv->model.cfg;
    gw_buf *b = &c->resp;
    for (int k = 0; k < n; k++) order[k] = k;
    pr_sorting = v;
    qsort(order, (size_t)n, sizeof *order, pr_by_score);
    gw_buf_putc(b, '[');
    for (int k = 0; k < n; k++) {
        const char *label = cfg->labels[order[k]];
        gw_buf_printf(b, "%s{\"score\":%.9g,\"label\":", k ? "," : "", (double)v[order[k]]);
        gw_buf_json_str(b, label, strlen(label));
        gw_buf_putc(b, '}');
    }
    gw_buf_putc(b, ']');
}

static atomic_ulong pr_ids;   /* the "id" of /classify answers: classify-<n> */

static void pr_write_vllm(gw_call *c) {
    const gw_model *m = &c->srv->model;
    const int n = m->cfg->n_labels;
    gw_buf *b = &c->resp;
    gw_buf_printf(b, "{\"id\":\"classify-%lu\",\"object\":\"list\",\"created\":%lld,\"model\":",
                  atomic_fetch_add(&pr_ids, 1) + 1, (long long)time(NULL));
    gw_buf_json_str(b, m->name, strlen(m->name));
    gw_buf_puts(b, ",\"data\":[");
    for (int i = 0; i < c->n_seqs; i++) {
        const float *v = c->out + (size_t)i * n;
        int best = 0;
        for (int k = 1; k < n; k++) best = v[k] > v[best] ? k : best;
        gw_buf_printf(b, "%s{\"index\":%d,\"label\":", i ? "," : "", i);
        gw_buf_json_str(b, m->cfg->labels[best], strlen(m->cfg->labels[best]));
        gw_buf_puts(b, ",\"probs\":[");
        for (int k = 0; k < n; k++) gw_buf_printf(b, "%s%.9g", k ? "," : "", (double)v[k]);
        gw_buf_printf(b, "],\"num_classes\":%d}", n);
    }
    gw_buf_printf(b, "],\"usage\":{\"prompt_tokens\":%ld,\"total_tokens\":%ld,\"completion_tokens\":0,"
                  "\"prompt_tokens_details\":null}}", c->prompt_tokens, c->prompt_tokens);
}

int gw_predict_write(gw_call *c) {
    const eng_config *cfg = c->srv->model.cfg;
    const int n = cfg->n_labels;
    for (int i = 0; i < c->n_seqs && !c->raw_scores; i++) pr_scores(c->out + (size_t)i * n, n, cfg->score_fn);
    if (c->route == GW_R_CLASSIFY) {
        pr_write_vllm(c);
        return 0;
    }
    int *order = malloc((size_t)n * sizeof *order);
    if (!order) return -1;
    gw_buf_reserve(&c->resp, (size_t)c->n_seqs * (size_t)n * 48 + 16);
    if (c->pr_batch) gw_buf_putc(&c->resp, '[');
    for (int i = 0; i < c->n_seqs; i++) {
        if (i) gw_buf_putc(&c->resp, ',');
        pr_write_tei(c, c->out + (size_t)i * n, n, order);
    }
    if (c->pr_batch) gw_buf_putc(&c->resp, ']');
    free(order);
    return 0;
}

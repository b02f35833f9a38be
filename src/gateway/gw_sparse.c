/* gw_sparse: POST /embed_sparse (TEI's) for a SPLADE model.
 *
 * The engine hands back each input's vector at the vocabulary's full size
 * (eng_config_splade.c: values >= 0, most of them 0); the answer is TEI's
 * sparse form, one list an input of its non-zero entries in index order:
 * [[{"index": token id, "value": v}, ...], ...].
 *
 * An inference-free SPLADE model (a Router, eng_config_router.c) has a
 * second route for queries: no transformer, a weight per token id looked
 * up for the tokens the query has (sentence-transformers'
 * SparseStaticEmbedding: tokenized without special tokens, truncated at
 * the tokenizer's model_max_length, each distinct token once).  The
 * request's "task" ("query" / "document", as encode_query /
 * encode_document) picks the route, else the model's default_route; the
 * query route is answered here from the weights, without the engine.
 */
#include <stdlib.h>

#include "gw_internal.h"
#include "gw_parse.h"

static __thread tok_encoding sp_enc;
static __thread int32_t *sp_ids;   /* a token-id query, cut to the query route's length */
static __thread size_t sp_cap;

void gw_sparse_worker_exit(void) {
    tok_encoding_free(&sp_enc);
    free(sp_ids);
    sp_ids = NULL;
    sp_cap = 0;
}

static void sparse_entries(gw_buf *b, int i, const float *v, int V) {
    int first = 1;
    gw_buf_puts(b, i ? ",[" : "[");
    for (int k = 0; k < V; k++) {
        if (v[k] == 0.0f) continue;
        gw_buf_printf(b, "%s{\"index\":%d,\"value\":%.9g}", first ? "" : ",", k, (double)v[k]);
        first = 0;
    }
    gw_buf_putc(b, ']');
}

int gw_sparse_write(gw_call *c) {
    const int V = c->srv->model.dim;
    gw_buf *b = &c->resp;
    gw_buf_putc(b, '[');
    for (int i = 0; i < c->n_seqs; i++) sparse_entries(b, i, c->out + (size_t)i * V, V);
    gw_buf_putc(b, ']');
    return b->oom ? -1 : 0;
}

/* One query's ids: a text through the tokenizer (the prompt in front, no
 * special tokens, cut at the query route's length), or token ids as given
 * (cut the same way).  0, or -1 with the call failed. */
static int query_ids(gw_call *c, const gw_embed_req *r, int i, const char *prompt, const int32_t **ids, int *n) {
    const gw_model *m = &c->srv->model;
    const gw_input *in = &r->inputs[i];
    posy_err err;
    posy_err_clear(&err);
    if (!in->text) {   /* token ids as given: no special tokens to leave out */
        size_t k = json_array_size(in->ids);
        if (m->sq->max_len && k > (size_t)m->sq->max_len) k = (size_t)m->sq->max_len;
        if (k > sp_cap) {
            int32_t *p = realloc(sp_ids, k * sizeof *p);
            if (!p) return gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory"), -1;
            sp_ids = p;
            sp_cap = k;
        }
        const size_t skip = r->dir == TOK_TRUNC_LEFT ? json_array_size(in->ids) - k : 0;
        for (size_t j = 0; j < k; j++) {
            json_int_t v = json_integer_value(json_array_get(in->ids, skip + j));
            if (v < 0 || v >= m->sq->n) {
                gw_call_fail(c, 422, GW_F_VALIDATION, "token_out_of_vocabulary",
                             "input %d: token id %lld is outside the vocabulary [0, %d)", i, (long long)v, m->sq->n);
                return -1;
            }
            sp_ids[j] = (int32_t)v;
        }
        *ids = sp_ids;
        *n = (int)k;
        return 0;
    }
    const char *text = in->text;
    size_t len = in->len;
    char *joined = NULL;
    if (prompt && *prompt) {   /* sentence-transformers prepends the prompt text */
        const size_t pl = strlen(prompt);
        if (!(joined = malloc(pl + len + 1))) return gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory"), -1;
        memcpy(joined, prompt, pl);
        memcpy(joined + pl, text, len);
        text = joined;
        len += pl;
    }
    tok_opts o = {.add_special = 0, .max_len = m->sq->max_len, .trunc_dir = r->dir};
    const int rc = tok_encode(m->tok, text, len, &o, &sp_enc, &err);
    free(joined);
    if (rc) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "tokenization_failed", "input %d: %s", i, err.msg);
        return -1;
    }
    *ids = sp_enc.ids;
    *n = sp_enc.n;
    return 0;
}

/* The query route: [[{"index", "value"}, ...], ...] from the weights. */
static int query_answer(gw_call *c, const gw_embed_req *r, const char *prompt) {
    const gw_model *m = &c->srv->model;
    const int V = m->sq->n;
    float *v = malloc((size_t)V * sizeof *v);
    if (!v) return gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory"), -1;
    gw_buf *b = &c->resp;
    gw_buf_putc(b, '[');
    long tokens = 0;
    for (int i = 0; i < r->n; i++) {
        const int32_t *ids;
        int n;
        if (query_ids(c, r, i, prompt, &ids, &n)) {
            free(v);
            return -1;
        }
        eng_router_query_vec(m->sq, ids, n, v);
        sparse_entries(b, i, v, V);
        tokens += n;
    }
    gw_buf_putc(b, ']');
    free(v);
    if (b->oom) return gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory"), -1;
    atomic_fetch_add_explicit(&c->srv->metrics.tokens, (unsigned long long)tokens, memory_order_relaxed);
    atomic_fetch_add_explicit(&c->srv->metrics.inputs, (unsigned long long)r->n, memory_order_relaxed);
    c->status = 200;
    return 1;
}

int gw_sparse_route(gw_call *c, gw_embed_req *r) {
    const gw_model *m = &c->srv->model;
    const eng_config *cfg = m->cfg;
    if (!cfg) return 0;
    if (r->task && strcmp(r->task, "query") && strcmp(r->task, "document")) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "invalid_task", "'task' is \"query\" or \"document\", not '%.40s'",
                     r->task);
        return -1;
    }
    const char *route = r->task ? r->task : cfg->router ? cfg->rt.def : "document";
    if (!*route) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "invalid_task", "this model encodes queries and documents by different "
                     "routes and has no default_route: set \"task\": \"query\" or \"document\"");
        return -1;
    }
    if (r->task && !r->prompt_name) r->prompt_name = eng_config_task_prompt(cfg, r->task);
    if (!cfg->router || strcmp(route, "query")) return 0;   /* the engine's SPLADE: the document route */
    if (!m->sq) {
        gw_call_fail(c, 500, GW_F_BACKEND, "backend_error", "the query route's weights are not loaded");
        return -1;
    }
    const char *name = r->prompt_name ? r->prompt_name : cfg->default_prompt_name[0] ? cfg->default_prompt_name : NULL;
    const char *prompt = name ? eng_config_prompt(cfg, name) : NULL;
    if (name && !prompt) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "unknown_prompt", "the model has no prompt named '%.60s'", name);
        return -1;
    }
    return query_answer(c, r, prompt);
}

/* gw_embed: the worker-pool stages of the POST routes.
 *
 *   parse (pool):     JSON -> gw_embed_req -> validate -> tokenize -> submit
 *   job done (step):  push the call back to the pool, nothing else
 *   serialize (pool): dimensions / re-normalisation, JSON or base64, headers
 * and gw_call_finish hands the call to its loop thread.  /tokenize finishes
 * inside the parse stage, /decode too (gw_decode.c).  Each pool thread keeps one tok_encoding so tokenizing a request
 * does not allocate after warm-up.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "gw_float.h"
#include "gw_internal.h"
#include "gw_parse.h"
#include "gw_vecout.h"
#include "posy_chunk.h"
#include "posy_clock.h"

static __thread tok_encoding tl_enc;

/* /embed_sparse: the vectors come back vocabulary-wide before the zeros go
 * (gw_sparse.c), so a request's inputs are capped to keep that within
 * 64 MiB (30522-wide BERT vocabularies: 549 inputs; 250002-wide XLM-R: 67),
 * which also bounds the answer's JSON should every entry be non-zero.
 * /predict and /classify: one score a label an input, capped the same way
 * (a classifier of thousands of labels times thousands of inputs). */
#define GW_SPARSE_MAX_FLOATS ((size_t)16 << 20)
/* /embed_all: a vector a token, every entry non-zero in its JSON (~12
 * bytes a float), so half that: 32 MiB of states (768-wide BERT-base:
 * 10,922 tokens; all-MiniLM-L6: 21,845), ~100 MB of answer at most. */
#define GW_TOKENS_MAX_FLOATS ((size_t)8 << 20)

void gw_worker_exit(void) {
    tok_encoding_free(&tl_enc);
    gw_rerank_worker_exit();
    gw_sparse_worker_exit();
}

static int grow(gw_call *c, int add_tokens) {
    int need = (c->n_seqs ? c->cu[c->n_seqs] : 0) + add_tokens;
    if (need > c->cap_ids) {
        int cap = c->cap_ids ? c->cap_ids : 256;
        while (cap < need) cap *= 2;
        int32_t *p = realloc(c->ids, (size_t)cap * sizeof *p);
        if (!p) return -1;
        c->ids = p;
        if (c->types) {
            if (!(p = realloc(c->types, (size_t)cap * sizeof *p))) return -1;
            c->types = p;
        }
        c->cap_ids = cap;
    }
    return 0;
}

/* Room in cu (and skip) for one more sequence (more sequences than inputs
 * happen only with "chunked"). */
static int grow_seqs(gw_call *c) {
    if (c->n_seqs + 2 <= c->cap_seqs) return 0;
    int cap = c->cap_seqs * 2 > c->n_seqs + 2 ? c->cap_seqs * 2 : c->n_seqs + 2;
    int32_t *p = realloc(c->cu, (size_t)cap * sizeof *p);
    if (!p) return -1;
    c->cu = p;
    if (c->skip) {
        if (!(p = realloc(c->skip, (size_t)cap * sizeof *p))) return -1;
        c->skip = p;
    }
    c->cap_seqs = cap;
    return 0;
}

/* The type ids of tokens [at, at + n): the call keeps none while all are
 * 0 (the usual single-text template), and makes its array, zeros before
 * `at`, at the first non-zero one.  A model without token type embeddings
 * (type vocabulary 0 or 1: decoders) takes none, as transformers passes it
 * none, whatever the tokenizer's template says. */
static int put_types(gw_call *c, int at, const int32_t *types, int n) {
    const eng_config *cfg = c->srv->model.cfg;
    if (!cfg || cfg->info.type_vocab <= 1) return 0;
    int nonzero = 0;
    for (int i = 0; types && i < n && !nonzero; i++) nonzero = types[i] != 0;
    if (!c->types && !nonzero) return 0;
    if (!c->types) {
        if (!(c->types = calloc((size_t)c->cap_ids, sizeof *c->types))) return -1;
    }
    if (nonzero)
        memcpy(c->types + at, types, (size_t)n * sizeof *types);
    else
        memset(c->types + at, 0, (size_t)n * sizeof *c->types);
    return 0;
}

int gw_push_seq(gw_call *c, const int32_t *ids, const int32_t *types, int n, int skip) {
    if (grow(c, n) || grow_seqs(c)) return -1;
    int at = c->cu[c->n_seqs];
    if (put_types(c, at, types, n)) return -1;
    if (n) memcpy(c->ids + at, ids, (size_t)n * sizeof *ids);
    if (c->skip) c->skip[c->n_seqs] = skip;
    c->cu[++c->n_seqs] = at + n;
    return 0;
}

/* An over-long token-id input with "chunked": windows without special tokens. */
static int add_ids_chunked(gw_call *c, int idx, json_t *arr, int n, int vocab) {
    int32_t *tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp) { c->status = 500; return -1; }
    for (int i = 0; i < n; i++) {
        json_int_t v = json_integer_value(json_array_get(arr, (size_t)i));
        if (v < 0 || v >= vocab) {
            free(tmp);
            gw_call_fail(c, 422, GW_F_VALIDATION, "token_out_of_vocabulary",
                         "input %d: token id %lld is outside the vocabulary [0, %d)", idx, (long long)v, vocab);
            return -1;
        }
        tmp[i] = (int32_t)v;
    }
    int rc = gw_chunk_push(c, idx, tmp, NULL, n, NULL, c->srv->model.max_input_tokens, 0);
    free(tmp);
    return rc;
}

/* Token-id input: range check against the vocabulary, then truncate or refuse. */
static int add_ids(gw_call *c, const gw_embed_req *r, int idx, json_t *arr) {
    const gw_model *m = &c->srv->model;
    int vocab = tok_vocab_size(m->tok);
    int n = (int)json_array_size(arr), max = m->max_input_tokens;
    if (n > max && r->chunked) return add_ids_chunked(c, idx, arr, n, vocab);
    if (n > max && !r->truncate) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "input_too_long",
                     "input %d has %d tokens, more than the model's limit of %d (set \"truncate\": true)", idx, n, max);
        return -1;
    }
    int start = n > max && r->dir == TOK_TRUNC_LEFT ? n - max : 0, len = n > max ? max : n;
    if (grow(c, len) || grow_seqs(c)) return -1;
    int at = c->cu[c->n_seqs];
    for (int i = 0; i < len; i++) {
        json_int_t v = json_integer_value(json_array_get(arr, (size_t)(start + i)));
        if (v < 0 || v >= vocab) {
            gw_call_fail(c, 422, GW_F_VALIDATION, "token_out_of_vocabulary",
                         "input %d: token id %lld is outside the vocabulary [0, %d)", idx, (long long)v, vocab);
            return -1;
        }
        c->ids[at + i] = (int32_t)v;
    }
    if (put_types(c, at, NULL, len)) return -1;   /* token-id inputs: type 0 */
    if (c->skip) c->skip[c->n_seqs] = 0;   /* no prompt in front of token ids */
    c->cu[++c->n_seqs] = at + len;
    return 0;
}

/* The prompt tokens left in an encoding that left truncation cut `dropped`
 * tokens from: they went from the front of the text, which the prompt
 * starts, so the prompt loses them first; leading specials ([CLS]) stay. */
static int skip_after_left_cut(const tok_encoding *e, int skip, int dropped) {
    int pre, suf;
    posy_chunk_specials(e->special_mask, e->n, &pre, &suf);
    if (pre > skip) pre = skip;
    return skip - dropped > pre ? skip - dropped : pre;
}

/* Encode one text into tl_enc: prompt in front, lowercased if the model
 * says so, truncated as the request says.  When prompt tokens are skipped
 * and the cut is on the left, *n_full gets the length before the cut (0
 * otherwise) so the caller knows how much of the prompt went. */
static int encode_text(gw_call *c, const gw_embed_req *r, int idx, const char *text, size_t len, const char *prompt,
                       int skip, int *n_full) {
    const gw_model *m = &c->srv->model;
    char *joined = NULL;
    if (prompt) {   /* sentence-transformers prepends the prompt text */
        size_t pl = strlen(prompt);
        joined = malloc(pl + len + 1);
        if (!joined) return -1;
        memcpy(joined, prompt, pl);
        memcpy(joined + pl, text, len);
        text = joined;
        len += pl;
    }
    if (m->cfg && m->cfg->do_lower_case) {   /* as sentence-transformers: prompt and text */
        char *lowered = NULL;
        posy_err lerr;
        posy_err_clear(&lerr);
        int lrc = tok_lowercase_text(text, len, &lowered, &len, &lerr);
        free(joined);
        if (lrc) {
            if (lrc == POSY_E_NOMEM) c->status = 500;
            else gw_call_fail(c, 422, GW_F_VALIDATION, "tokenization_failed", "input %d: %s", idx, lerr.msg);
            return -1;
        }
        text = joined = lowered;
    }
    tok_opts o = {.add_special = !m->cfg || m->cfg->add_special, .max_len = r->truncate && !r->chunked ? m->max_input_tokens : 0,
                  .trunc_dir = r->dir};
    posy_err err;
    posy_err_clear(&err);
    int rc = 0;
    *n_full = 0;
    if (skip && o.max_len && r->dir == TOK_TRUNC_LEFT) {   /* how much would the cut take off the front? */
        tok_opts full = o;
        full.max_len = 0;
        rc = tok_encode(m->tok, text, len, &full, &tl_enc, &err);
        *n_full = tl_enc.n;
    }
    if (!rc && (!*n_full || *n_full > o.max_len)) rc = tok_encode(m->tok, text, len, &o, &tl_enc, &err);
    free(joined);
    if (rc) gw_call_fail(c, 422, GW_F_VALIDATION, "tokenization_failed", "input %d: %s", idx, err.msg);
    return rc ? -1 : 0;
}

/* One text input, encoded, then refused or split into windows when too
 * long; `skip` prompt tokens (include_prompt false) are left out of its
 * pooling. */
static int add_text(gw_call *c, const gw_embed_req *r, int idx, const char *text, size_t len, const char *prompt,
                    int skip) {
    const gw_model *m = &c->srv->model;
    int n_full;
    if (encode_text(c, r, idx, text, len, prompt, skip, &n_full)) return -1;
    if (tl_enc.n > m->max_input_tokens && r->chunked)
        return gw_chunk_push(c, idx, tl_enc.ids, tl_enc.type_ids, tl_enc.n, tl_enc.special_mask, m->max_input_tokens,
                             skip);
    if (tl_enc.n > m->max_input_tokens) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "input_too_long",
                     "input %d has %d tokens, more than the model's limit of %d (set \"truncate\": true)", idx,
                     tl_enc.n, m->max_input_tokens);
        return -1;
    }
    if (tl_enc.n == 0 && (!m->cfg || !m->cfg->static_emb)) {   /* a static model embeds it as zeros */
        gw_call_fail(c, 422, GW_F_VALIDATION, "empty_input", "input %d has no tokens", idx);
        return -1;
    }
    if (n_full > tl_enc.n) skip = skip_after_left_cut(&tl_enc, skip, n_full - tl_enc.n);
    if (skip && skip >= tl_enc.n) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "input_too_long", "input %d: %d tokens after truncation, not more "
                     "than the %d prompt tokens left out of pooling", idx, tl_enc.n, skip);
        return -1;
    }
    return gw_push_seq(c, tl_enc.ids, tl_enc.type_ids, tl_enc.n, skip);
}

static const char *pick_prompt(gw_call *c, const gw_embed_req *r) {
    const eng_config *cfg = c->srv->model.cfg;
    const char *name = r->prompt_name ? r->prompt_name : (cfg && cfg->default_prompt_name[0] ? cfg->default_prompt_name : NULL);
    if (!name) return NULL;
    const char *p = cfg ? eng_config_prompt(cfg, name) : NULL;
    if (!p && r->prompt_name)
        gw_call_fail(c, 422, GW_F_VALIDATION, "unknown_prompt", "the model has no prompt named '%.60s'", r->prompt_name);
    return p;
}

/* Pooling include_prompt false: the prompt's tokens (as `posy embed`
 * counts them, tok_prompt_length) are left out of each text's pooling.
 * *skip = 0 when the prompt is pooled like the rest. */
static int prompt_skip(gw_call *c, const char *prompt, int *skip) {
    const gw_model *m = &c->srv->model;
    *skip = 0;
    if (!prompt || !*prompt || !m->cfg || m->cfg->pool_include_prompt) return 0;
    posy_err err;
    posy_err_clear(&err);
    int rc = tok_prompt_length(m->tok, prompt, strlen(prompt), m->cfg->do_lower_case, &tl_enc, skip, &err);
    if (rc == POSY_E_NOMEM) c->status = 500;
    else if (rc) gw_call_fail(c, 422, GW_F_VALIDATION, "tokenization_failed", "prompt: %s", err.msg);
    return rc ? -1 : 0;
}

static int tokenize_all(gw_call *c, const gw_embed_req *r) {
    const char *prompt = pick_prompt(c, r);
    if (!prompt && r->prompt_name) return -1;
    int skip = 0;
    if (prompt_skip(c, prompt, &skip)) {
        if (c->status == 500) gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory");
        return -1;
    }
    c->cu = malloc(((size_t)r->n + 1) * sizeof *c->cu);
    if (!c->cu) return -1;
    if (skip && !(c->skip = malloc(((size_t)r->n + 1) * sizeof *c->skip))) return -1;
    c->cap_seqs = r->n + 1;
    c->cu[0] = 0;
    c->n_inputs = r->n;
    if (r->chunked && !(c->n_windows = calloc((size_t)r->n, sizeof *c->n_windows))) return -1;
    for (int i = 0; i < r->n; i++) {
        const gw_input *in = &r->inputs[i];
        int rc = in->text ? add_text(c, r, i, in->text, in->len, prompt, skip) : add_ids(c, r, i, in->ids);
        if (rc) {
            if (c->status == 500) gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory");
            return -1;
        }
    }
    c->prompt_tokens = c->cu[c->n_seqs];
    return 0;
}

static void on_job_done(sched_req *job, void *user) {
    gw_call *c = user;
    c->task.fn = gw_stage_serialize;
    /* Refused only after gw_server_stop (a drain that timed out): the call
     * is then left to the exiting process (gw_loop.c). */
    (void)gw_pool_push(c->srv->pool, &c->task);
}

static void submit(gw_call *c) {
    const gw_model *m = &c->srv->model;
    c->out = malloc((size_t)c->n_seqs * (size_t)m->dim * sizeof(float));
    if (c->route == GW_R_EMBED_ALL) c->tok = malloc((size_t)c->cu[c->n_seqs] * (size_t)m->tok_dim * sizeof(float));
    if (!c->out || (c->route == GW_R_EMBED_ALL && !c->tok)) {
        gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory");
        gw_call_finish(c);
        return;
    }
    c->job.ids = c->ids;
    c->job.type_ids = c->types;
    c->job.cu_seqlens = c->cu;
    c->job.pool_skip = c->skip;
    c->job.n_seqs = c->n_seqs;
    c->job.out = c->out;
    c->job.tok_out = c->tok;
    c->job.done = on_job_done;
    c->job.user = c;
    posy_err err;
    posy_err_clear(&err);
    /* The job may complete, be answered and be freed before submit()
     * returns; call_free waits for mu, so nothing here touches `c` after
     * the unlock of an accepted job. */
    pthread_mutex_lock(&c->mu);
    int rc = c->gone ? -1 : c->srv->backend.submit(c->srv->backend.ctx, &c->job, &err);
    if (rc == 0) c->submitted = 1;
    pthread_mutex_unlock(&c->mu);
    if (rc == 0) return;   /* on_job_done continues */
    if (rc == POSY_E_BUSY) gw_call_fail(c, 429, GW_F_OVERLOADED, "overloaded", "%s", err.msg);
    else if (rc == POSY_E_UNSUPPORTED) gw_call_fail(c, 503, GW_F_SHUTTING_DOWN, "shutting_down", "%s", err.msg);
    else if (rc == POSY_E_IO) gw_call_fail(c, 503, GW_F_BACKEND, "backend_unavailable", "%s", err.msg);
    else if (rc > 0) gw_call_fail(c, 422, GW_F_VALIDATION, "invalid_input", "%s", err.msg);
    gw_call_finish(c);
}

static void tokenize_response(gw_call *c, const gw_embed_req *r);

/* After tokenization: the request's texts are no longer needed (unless
 * /rerank returns them), then the call goes to the engine. */
static void submit_tokenized(gw_call *c, uint64_t t0) {
    c->tok_ns = posy_now_ns() - t0;
    if (!c->rr_texts) {
        json_decref(c->json);   /* texts are tokenized: the document can go */
        c->json = NULL;
    }
    free(c->body);
    c->body = NULL;
    gw_hist_add(&c->srv->metrics.hist[GW_H_TOKENIZE], c->tok_ns);
    submit(c);
}

/* POST /rerank: only a reranker's scores mean anything here. */
static void rerank_parse(gw_call *c, uint64_t t0) {
    gw_server *s = c->srv;
    gw_rerank_req r;
    gw_perr pe;
    const int cohere = c->route == GW_R_V1_RERANK;
    if (!s->model.cfg || !s->model.cfg->rerank) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "not_a_reranker", "this model embeds: %s needs a reranker "
                     "(a cross-encoder: config.json's ...ForSequenceClassification with one label)",
                     cohere ? "/v1/rerank" : "/rerank");
    } else if (s->model.cfg->n_labels != 1) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "not_a_reranker", "this model is a classifier of %d labels, not a "
                     "reranker (one score a text): use /predict or /classify", s->model.cfg->n_labels);
    } else if (gw_parse_rerank(c->body, c->body_len, cohere, s->opts.max_client_batch, s->opts.auto_truncate, &c->json,
                               &r, &pe)) {
        gw_call_fail(c, pe.status, pe.status == 400 ? GW_F_MALFORMED : GW_F_VALIDATION, pe.code, "%s", pe.msg);
    } else if (gw_rerank_tokenize(c, &r) == 0) {
        c->raw_scores = r.raw_scores;
        c->rr_cohere = cohere;
        c->rr_top_n = r.top_n;
        c->rr_texts = r.return_text ? r.texts : NULL;
        submit_tokenized(c, t0);
        return;
    }
    gw_call_finish(c);
}

/* /score on an embedding model: text_1's and text_2's texts embedded as
 * /embed embeds them (the model's prompt, lowercasing, limits). */
static int score_embed_all(gw_call *c, const gw_score_req *r) {
    gw_embed_req e = {.n = r->n1 + r->n, .truncate = r->truncate, .dir = r->dir, .normalize = 1};
    if (!(e.inputs = calloc((size_t)e.n, sizeof *e.inputs))) {
        gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory");
        return -1;
    }
    for (int k = 0; k < e.n; k++)
        e.inputs[k].text = gw_score_text(r, k >= r->n1, k >= r->n1 ? k - r->n1 : k, &e.inputs[k].len);
    int rc = tokenize_all(c, &e);
    gw_embed_req_free(&e);
    c->sc_n1 = r->n1;
    c->sc_pairs = r->n;
    return rc;
}

/* POST /score, /v1/score: a reranker's or an embedding model's pair scores. */
static void score_parse(gw_call *c, uint64_t t0) {
    gw_server *s = c->srv;
    const eng_config *cfg = s->model.cfg;
    gw_score_req r;
    gw_perr pe;
    if (cfg && cfg->rerank && cfg->n_labels != 1) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "not_a_reranker", "this model is a classifier of %d labels: it has no "
                     "one score a pair; use /predict or /classify", cfg->n_labels);
    } else if (cfg && cfg->splade) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "not_a_dense_model", "this model is a sparse (SPLADE) encoder: its "
                     "vectors come from /embed_sparse");
    } else if (gw_parse_score(c->body, c->body_len, s->opts.max_client_batch, s->opts.auto_truncate, &c->json, &r,
                              &pe)) {
        gw_call_fail(c, pe.status, pe.status == 400 ? GW_F_MALFORMED : GW_F_VALIDATION, pe.code, "%s", pe.msg);
    } else if ((cfg && cfg->rerank ? gw_score_tokenize(c, &r) : score_embed_all(c, &r)) == 0) {
        submit_tokenized(c, t0);
        return;
    }
    gw_call_finish(c);
}

/* POST /predict, /classify: a classifier's (or reranker's) labelled scores. */
static void predict_parse(gw_call *c, uint64_t t0) {
    gw_server *s = c->srv;
    gw_predict_req r;
    gw_perr pe;
    const int vllm = c->route == GW_R_CLASSIFY;
    if (!s->model.cfg || !s->model.cfg->rerank) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "not_a_classifier", "this model embeds: %s needs a sequence "
                     "classifier (config.json's ...ForSequenceClassification)", vllm ? "/classify" : "/predict");
    } else if (gw_parse_predict(c->body, c->body_len, vllm, s->opts.max_client_batch, s->opts.auto_truncate, &c->json,
                                &r, &pe)) {
        gw_call_fail(c, pe.status, pe.status == 400 ? GW_F_MALFORMED : GW_F_VALIDATION, pe.code, "%s", pe.msg);
    } else if ((size_t)r.n * (size_t)s->model.cfg->n_labels > GW_SPARSE_MAX_FLOATS) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "too_many_inputs", "%d inputs of %d labels each are more scores than "
                     "one answer holds; send at most %zu a request", r.n, s->model.cfg->n_labels,
                     GW_SPARSE_MAX_FLOATS / (size_t)s->model.cfg->n_labels);
    } else if (gw_predict_tokenize(c, &r) == 0) {
        c->raw_scores = r.raw_scores;
        c->pr_batch = r.batch;
        submit_tokenized(c, t0);
        return;
    }
    gw_call_finish(c);
}

void gw_stage_parse(gw_task *t) {
    gw_call *c = H2O_STRUCT_FROM_MEMBER(gw_call, task, t);
    gw_server *s = c->srv;
    uint64_t t0 = posy_now_ns();
    if (c->route == GW_R_DECODE) {
        gw_decode_response(c);
        gw_call_finish(c);
        return;
    }
    if (c->route == GW_R_RERANK || c->route == GW_R_V1_RERANK) {
        rerank_parse(c, t0);
        return;
    }
    if (c->route == GW_R_PREDICT || c->route == GW_R_CLASSIFY) {
        predict_parse(c, t0);
        return;
    }
    if (c->route == GW_R_SCORE) {
        score_parse(c, t0);
        return;
    }
    gw_embed_req r;
    gw_perr pe;
    int rc = gw_parse_body(c->body, c->body_len, c->openai, c->route == GW_R_TOKENIZE, s->opts.max_client_batch,
                           s->opts.auto_truncate, &c->json, &r, &pe);
    if (rc) {
        gw_call_fail(c, pe.status, pe.status == 400 ? GW_F_MALFORMED : GW_F_VALIDATION, pe.code, "%s", pe.msg);
    } else if (c->route == GW_R_SIMILARITY && !r.similarity) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "invalid_input",
                     "/similarity takes {\"inputs\": {\"source_sentence\": \"...\", \"sentences\": [\"...\", ...]}}");
    } else if (c->route == GW_R_TOKENIZE) {
        tokenize_response(c, &r);
    } else if (c->route == GW_R_EMBED_ALL && s->model.cfg && s->model.cfg->splade) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "not_supported", "/embed_all is not available for SPLADE models (as "
                     "TEI): their vectors come from /embed_sparse");
    } else if ((c->route == GW_R_EMBED_SPARSE) != (s->model.cfg && s->model.cfg->splade)) {
        if (c->route == GW_R_EMBED_SPARSE)
            gw_call_fail(c, 422, GW_F_VALIDATION, "not_a_sparse_model", "this model makes dense embeddings: "
                         "/embed_sparse needs a SPLADE model (sentence-transformers' SparseEncoder)");
        else
            gw_call_fail(c, 422, GW_F_VALIDATION, "not_a_dense_model", "this model is a sparse (SPLADE) encoder: its "
                         "vectors come from /embed_sparse");
    } else if (c->route == GW_R_EMBED_SPARSE && (r.dims || r.chunked || r.base64 || r.similarity ||
                                                r.enc.dtype != POSY_VEC_FLOAT32)) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "invalid_input", "/embed_sparse takes texts (a string or a list), and "
                     "no 'dimensions', 'chunked', 'encoding_format' or 'output_dtype': its answer is the non-zero "
                     "entries of each vector");
    } else if (c->route == GW_R_EMBED_SPARSE && (size_t)r.n * (size_t)s->model.dim > GW_SPARSE_MAX_FLOATS) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "too_many_inputs", "%d inputs of this model's %d-wide sparse vectors "
                     "need more than %d MiB; send at most %zu a request", r.n, s->model.dim,
                     (int)(GW_SPARSE_MAX_FLOATS * sizeof(float) >> 20), GW_SPARSE_MAX_FLOATS / (size_t)s->model.dim);
    } else if (c->route == GW_R_EMBED_SPARSE && gw_sparse_route(c, &r) != 0) {
        /* answered (an inference-free model's query route) or failed */
    } else if (s->model.cfg && s->model.cfg->rerank) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "not_an_embedding_model", s->model.cfg->n_labels == 1
                     ? "this model is a reranker (a cross-encoder): it scores (query, text) pairs on /rerank and "
                       "makes no embeddings"
                     : "this model is a classifier: it scores texts on /predict and /classify and makes no "
                       "embeddings");
    } else if (c->route == GW_R_EMBED_ALL && (r.dims || r.chunked || r.base64 || r.similarity ||
                                              r.enc.dtype != POSY_VEC_FLOAT32)) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "invalid_input", "/embed_all takes texts or token ids, and no "
                     "'dimensions', 'chunked', 'encoding_format' or 'output_dtype': its answer is every token's "
                     "hidden state as floats");
    } else if (c->route == GW_R_EMBED_ALL && !s->model.tok_dim) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "not_supported", s->model.cfg && s->model.cfg->static_emb
                     ? "/embed_all: a static embedding model has no per-token hidden states"
                     : "/embed_all is not served here: the backend gives no token states (the no-op engine, or "
                       "workers older than this gateway)");
    } else if (r.dims > s->model.dim) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "invalid_dimensions",
                     "'dimensions' is %d but the model has %d", r.dims, s->model.dim);
    } else if (tokenize_all(c, &r) == 0) {
        c->base64 = r.base64;
        c->enc = r.enc;
        c->dims = r.dims ? r.dims : s->model.dim;
        c->normalize = c->openai ? 1 : r.normalize;
        c->similarity = r.similarity;
        gw_embed_req_free(&r);
        if (c->route == GW_R_EMBED_ALL && (size_t)c->cu[c->n_seqs] * (size_t)s->model.tok_dim > GW_TOKENS_MAX_FLOATS) {
            gw_call_fail(c, 422, GW_F_VALIDATION, "too_many_tokens", "/embed_all: %d tokens of %d floats each are "
                         "more than one answer holds (%d MiB of states, %zu tokens); send fewer inputs a request",
                         c->cu[c->n_seqs], s->model.tok_dim, (int)(GW_TOKENS_MAX_FLOATS * sizeof(float) >> 20),
                         GW_TOKENS_MAX_FLOATS / (size_t)s->model.tok_dim);
            gw_call_finish(c);
            return;
        }
        submit_tokenized(c, t0);
        return;
    }
    gw_embed_req_free(&r);
    gw_call_finish(c);
}

/* [[{"id":101,"text":"[CLS]","special":true,"start":null,"stop":null},...],...] as TEI. */
static void tokenize_response(gw_call *c, const gw_embed_req *r) {
    const gw_model *m = &c->srv->model;
    gw_buf *b = &c->resp;
    gw_buf_putc(b, '[');
    for (int i = 0; i < r->n; i++) {
        const gw_input *in = &r->inputs[i];
        if (!in->text) {
            gw_call_fail(c, 422, GW_F_VALIDATION, "invalid_input", "/tokenize takes strings, input %d is not one", i);
            return;
        }
        /* unsaid: as the model embeds (a static embedding model: without special tokens) */
        tok_opts o = {.add_special = r->add_special >= 0 ? r->add_special : !m->cfg || m->cfg->add_special, .max_len = 0};
        posy_err err;
        posy_err_clear(&err);
        if (tok_encode(m->tok, in->text, in->len, &o, &tl_enc, &err)) {
            gw_call_fail(c, 422, GW_F_VALIDATION, "tokenization_failed", "input %d: %s", i, err.msg);
            return;
        }
        gw_buf_puts(b, i ? ",[" : "[");
        for (int k = 0; k < tl_enc.n; k++) {
            int special = tl_enc.special_mask && tl_enc.special_mask[k];
            gw_buf_printf(b, "%s{\"id\":%d,\"text\":", k ? "," : "", tl_enc.ids[k]);
            if (special) {
                /* special tokens have no span in the input: their vocabulary string */
                const char *tokstr = tok_id_to_token(m->tok, tl_enc.ids[k]);
                gw_buf_json_str(b, tokstr ? tokstr : "", tokstr ? strlen(tokstr) : 0);
                gw_buf_puts(b, ",\"special\":true,\"start\":null,\"stop\":null}");
            } else {
                /* as TEI: the input's own bytes [start, stop), not the
                 * normalised vocabulary string ("Hello", not "hello") */
                int s0 = tl_enc.offsets[2 * k], s1 = tl_enc.offsets[2 * k + 1];
                if (s0 < 0 || s1 < s0 || (size_t)s1 > in->len) s0 = s1 = 0;
                gw_buf_json_str(b, in->text + s0, (size_t)(s1 - s0));
                gw_buf_printf(b, ",\"special\":false,\"start\":%d,\"stop\":%d}", s0, s1);
            }
        }
        gw_buf_putc(b, ']');
    }
    gw_buf_putc(b, ']');
    c->status = 200;
}

/* Keep the first `dims` floats of each vector (in place) and re-normalise. */
static void apply_dims(gw_call *c) {
    int dim = c->srv->model.dim, d = c->dims;
    for (int i = 0; i < c->n_seqs; i++) {
        const float *src = c->out + (size_t)i * dim;
        float *dst = c->out + (size_t)i * d;
        memmove(dst, src, (size_t)d * sizeof(float));
        posy_vecenc_dims(dst, dim, d, c->normalize);
    }
}

/* TEI /similarity's answer: [cos(v0, v1), ..., cos(v0, vn)] over the
 * first c->dims floats (so "dimensions" compares truncated vectors), in
 * double; 0 where either vector is zero. */
static int write_similarities(gw_call *c) {
    const float *a = c->out;
    float *cosv = malloc((size_t)c->n_seqs * sizeof *cosv);
    if (!cosv) return -1;
    double na = 0;
    for (int k = 0; k < c->dims; k++) na += (double)a[k] * a[k];
    for (int i = 1; i < c->n_seqs; i++) {
        const float *b = c->out + (size_t)i * c->dims;
        double dot = 0, nb = 0;
        for (int k = 0; k < c->dims; k++) {
            dot += (double)a[k] * b[k];
            nb += (double)b[k] * b[k];
        }
        cosv[i - 1] = na > 0 && nb > 0 ? (float)(dot / sqrt(na * nb)) : 0.0f;
    }
    gw_json_floats(&c->resp, cosv, (size_t)c->n_seqs - 1);
    free(cosv);
    return 0;
}

/* Returns the int8/uint8 scale (docs/ENCODINGS.md), 0 for other types. */
static float write_vector(gw_call *c, const float *v) {
    if (c->enc.dtype != POSY_VEC_FLOAT32) return gw_json_vec_quant(&c->resp, v, c->dims, c->enc);
    if (c->base64) gw_json_base64_floats(&c->resp, v, (size_t)c->dims);
    else gw_json_floats(&c->resp, v, (size_t)c->dims);
    return 0.0f;
}

void gw_stage_serialize(gw_task *t) {
    gw_call *c = H2O_STRUCT_FROM_MEMBER(gw_call, task, t);
    gw_server *s = c->srv;
    sched_req *j = &c->job;
    if (j->status == SCHED_CANCELLED || c->gone) {   /* unlocked read is a hint; the loop decides */
        gw_call_finish(c);
        return;
    }
    if (j->status != 0) {
        /* Remote backends (posy gateway): workers unreachable -> 503, all refusing -> 429. */
        if (j->status == POSY_E_IO) gw_call_fail(c, 503, GW_F_BACKEND, "backend_unavailable", "%s", j->msg);
        else if (j->status == POSY_E_BUSY) gw_call_fail(c, 429, GW_F_OVERLOADED, "overloaded", "%s", j->msg);
        else gw_call_fail(c, 500, GW_F_BACKEND, "backend_error", "the engine failed: %s", j->msg);
        gw_call_finish(c);
        return;
    }
    gw_hist_add(&s->metrics.hist[GW_H_QUEUE], j->queue_ns);
    gw_hist_add(&s->metrics.hist[GW_H_INFER], j->infer_ns);
    atomic_fetch_add_explicit(&s->metrics.tokens, (unsigned long long)c->prompt_tokens, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->metrics.inputs, (unsigned long long)c->n_seqs, memory_order_relaxed);
    snprintf(c->hdr_timing[0], sizeof c->hdr_timing[0], "%.3f", (double)c->tok_ns * 1e-6);
    snprintf(c->hdr_timing[1], sizeof c->hdr_timing[1], "%.3f", (double)j->queue_ns * 1e-6);
    snprintf(c->hdr_timing[2], sizeof c->hdr_timing[2], "%.3f", (double)j->infer_ns * 1e-6);
    int (*answer)(gw_call *) = NULL;   /* the routes whose answer is not the vectors themselves */
    switch (c->route) {
    case GW_R_RERANK: case GW_R_V1_RERANK: answer = gw_rerank_write; break;
    case GW_R_PREDICT: case GW_R_CLASSIFY: answer = gw_predict_write; break;
    case GW_R_EMBED_SPARSE: answer = gw_sparse_write; break;
    case GW_R_SCORE: answer = gw_score_write; break;
    case GW_R_EMBED_ALL: answer = gw_tokens_write; break;
    default: break;
    }
    if (answer) {
        c->status = answer(c) ? 500 : 200;
        if (c->status == 500) gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory");
        gw_call_finish(c);
        return;
    }
    if (c->n_windows) {
        const eng_config *cfg = s->model.cfg;
        gw_chunk_combine(c, cfg ? cfg->info.normalize : 1);
    }
    apply_dims(c);
    gw_buf *b = &c->resp;
    gw_buf_reserve(b, (size_t)c->n_seqs * ((size_t)c->dims * (GW_FLOAT_MAX + 1) + 64) + 256);
    if (c->similarity) {
        if (write_similarities(c)) {
            gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory");
            gw_call_finish(c);
            return;
        }
    } else if (c->openai) {
        gw_buf_puts(b, "{\"object\":\"list\",\"data\":[");
        for (int i = 0; i < c->n_seqs; i++) {
            gw_buf_printf(b, "%s{\"object\":\"embedding\",\"index\":%d,\"embedding\":", i ? "," : "", i);
            float scale = write_vector(c, c->out + (size_t)i * c->dims);
            if (c->enc.dtype == POSY_VEC_INT8 || c->enc.dtype == POSY_VEC_UINT8) gw_buf_printf(b, ",\"scale\":%.9g", (double)scale);
            gw_buf_putc(b, '}');
        }
        gw_buf_puts(b, "],\"model\":");
        gw_buf_json_str(b, s->model.name, strlen(s->model.name));
        gw_buf_printf(b, ",\"usage\":{\"prompt_tokens\":%ld,\"total_tokens\":%ld}}", c->prompt_tokens, c->prompt_tokens);
    } else {
        gw_buf_putc(b, '[');
        for (int i = 0; i < c->n_seqs; i++) {
            if (i) gw_buf_putc(b, ',');
            write_vector(c, c->out + (size_t)i * c->dims);
        }
        gw_buf_putc(b, ']');
    }
    c->status = 200;
    gw_call_finish(c);
}

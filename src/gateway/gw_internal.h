/* gw_internal: the gateway's shared structures (server, loop, call).
 *
 * A gw_call is one POST request's life outside the loop thread.  It is
 * malloc'd by the loop thread, and freed by the loop thread only: either
 * when h2o disposes the request after the response was written, or, if the
 * client went away first, when the call's final message comes back.  The
 * `mu`/`gone`/`submitted` trio closes the race between a worker submitting
 * the job and the loop thread cancelling it on disconnect.  A call's loop
 * (and its h2o state) outlives the call: gw_loop.c tears a loop down only
 * once its n_calls is 0, so a late completion never posts into freed h2o
 * memory.
 */
#ifndef GW_INTERNAL_H
#define GW_INTERNAL_H

#include <h2o.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "gw_buf.h"
#include "gw_pool.h"
#include "gw_server.h"
#include "posy_vecenc.h"

typedef struct gw_conn gw_conn;      /* an accepted socket (gw_loop.c) */

/* One event-loop thread.  Everything h2o in it is created, used and
 * destroyed on that thread only (gw_loop.c says why). */
typedef struct gw_loop {
    h2o_context_t ctx;                /* first: req->conn->ctx points here */
    struct gw_server *srv;
    int idx;
    pthread_t thread;
    int started;                      /* 1 once ctx/queue/listener exist (under srv->start_mu) */
    int clean;                        /* 1 once the thread tore its h2o state down */
    h2o_accept_ctx_t accept;
    h2o_socket_t *listener;
    int listen_fd;
    h2o_multithread_queue_t *queue;
    h2o_multithread_receiver_t receiver;
    gw_conn *conns;                   /* open connections (loop thread only) */
    int n_calls;                      /* calls of this loop not freed yet (loop thread only) */
    struct gw_call *pending;          /* calls waiting for their response (disconnect watch) */
    uint64_t last_watch_ns;
    uint64_t spin_until;              /* busy-poll the loop until then (srv->busy_poll_ns; loop thread only) */
} gw_loop;

struct gw_server {
    gw_opts opts;
    struct gw_cors *cors;             /* parsed opts.cors; NULL: none */
    h2o_globalconf_t config;
    gw_loop *loops;
    int n_loops;
    gw_pool *pool;
    gw_metrics metrics;
    gw_model model;
    gw_backend backend;
    atomic_int ready;
    atomic_int draining;
    atomic_int stop;
    atomic_int active;                /* calls allocated and not freed */
    atomic_uint_fast64_t busy_poll_ns;    /* gw_server_set_busy_poll for the loops; 0: they sleep */
    pthread_mutex_t start_mu;         /* loop start-up handshake */
    pthread_cond_t start_cv;
};

typedef struct gw_call {
    h2o_multithread_message_t msg;    /* posted to the loop thread when finished */
    gw_task task;                     /* the pool stage to run next */
    struct gw_server *srv;
    gw_loop *loop;
    h2o_req_t *req;                   /* loop thread only; NULL once h2o disposed it */
    struct gw_call *pnext, *pprev;    /* loop's pending list (loop thread only) */
    int watched;                      /* on the pending list */
    pthread_mutex_t mu;
    atomic_int gone;                  /* the client left (set by the loop, read by workers) */
    int submitted, sent;
    gw_route route;
    char *body;
    size_t body_len;
    uint64_t t_start, tok_ns;
    /* parsed request */
    json_t *json;
    int openai;                       /* error style and response shape */
    int base64, dims, normalize;
    int similarity;                   /* answer cosines with input 0, not vectors (TEI /similarity) */
    int raw_scores;                   /* /rerank, /predict: the logits, not sigmoid / softmax */
    int rr_cohere, rr_top_n;          /* /v1/rerank: the Cohere / Jina answer, its best top_n */
    json_t *rr_texts;                 /* /rerank with return_text: the texts (in json, kept), else NULL */
    int pr_batch;                     /* /predict: a list of answers (gw_predict.c) */
    int sc_n1, sc_pairs;              /* /score (gw_score.c): text_1's sequences (0: cross-encoder pairs), the pairs */
    posy_vecenc enc;                  /* output type (gw_vecout.c when not float) */
    /* the job */
    sched_req job;
    int32_t *ids, *cu;
    int32_t *types;                   /* token type ids beside ids, or NULL while all are 0 (the
                                         tokenizer's single-text template sets them, as `posy embed`
                                         sends them); grows with ids */
    int32_t *skip;                    /* per sequence: prompt tokens left out of pooling (include_prompt
                                         false and a prompt), or NULL; grows with cu */
    int n_seqs, cap_ids, cap_seqs;
    int *n_windows, n_inputs;         /* "chunked": sequences per input (gw_chunk.c), else NULL */
    long prompt_tokens;
    float *out;
    float *tok;                       /* /embed_all: cu[n_seqs] * model.tok_dim token states, else NULL */
    /* the response */
    int status;
    const char *ctype;
    gw_buf resp;
    char hdr_timing[4][24];
} gw_call;

/* gw_embed.c: the worker-pool stages of the POST routes. */
void gw_stage_parse(gw_task *t);
void gw_stage_serialize(gw_task *t);
/* Append one sequence to the call's packed batch (grows ids, types, cu and
 * skip); `types` its token type ids (NULL: all 0), `skip` its pool skip,
 * kept when the call has a skip array. */
int gw_push_seq(gw_call *c, const int32_t *ids, const int32_t *types, int n, int skip);

/* gw_chunk.c: over-long inputs as windows ("chunked": true); `skip` prompt
 * tokens are left out of the first window's pooling. */
int gw_chunk_push(gw_call *c, int idx, const int32_t *ids, const int32_t *types, int n, const uint8_t *special,
                  int max_len, int skip);
void gw_chunk_combine(gw_call *c, int normalize);
void gw_worker_exit(void);   /* frees the pool thread's tokenizer scratch */
/* gw_rerank.c: POST /rerank's (query, text) pairs into the call's batch,
 * and its answer once the scores are back.  0, or -1 (the call failed). */
struct gw_rerank_req;
int gw_rerank_tokenize(gw_call *c, const struct gw_rerank_req *r);
/* Room for n sequences in the call's batch (c->cu), or -1 (the call failed). */
int gw_seqs_init(gw_call *c, int n);
/* A text (b NULL) or a pair (a, b) through the tokenizer's template into
 * the call's batch, its token types kept; `what` and i name it in errors.
 * 0, or -1 (the call failed: 422 when it will not tokenize or is too long
 * without truncate). */
int gw_push_text(gw_call *c, const char *what, int i, const char *a, size_t alen, const char *b, size_t blen,
                 int truncate, tok_trunc_dir dir);
/* gw_predict.c: POST /predict (TEI) and /classify (vLLM) for a classifier:
 * the inputs into the call's batch, and the labelled scores once back. */
struct gw_predict_req;
int gw_predict_tokenize(gw_call *c, const struct gw_predict_req *r);
int gw_predict_write(gw_call *c);
int gw_rerank_write(gw_call *c);
void gw_rerank_worker_exit(void);
/* gw_score.c: POST /score (vLLM's): a cross-encoder's pairs into the
 * call's batch (an embedding model's texts go through gw_embed.c's own
 * path), and the answer once back.  0, or -1 (the call failed). */
struct gw_score_req;
int gw_score_tokenize(gw_call *c, const struct gw_score_req *r);
int gw_score_write(gw_call *c);
/* gw_sparse.c: POST /embed_sparse's answer once a SPLADE model's vectors are back. */
int gw_sparse_write(gw_call *c);
/* /embed_sparse's route: 0 the engine's (the document route; r->prompt_name
 * may now name the task's prompt), 1 answered here (an inference-free
 * model's query route), -1 the call failed. */
struct gw_embed_req;
int gw_sparse_route(gw_call *c, struct gw_embed_req *r);
void gw_sparse_worker_exit(void);
/* gw_tokens.c: POST /embed_all's answer once the token states are back. */
int gw_tokens_write(gw_call *c);
/* gw_decode.c: POST /decode, answered inside the parse stage. */
void gw_decode_response(gw_call *c);
/* gw_errors.c */
void gw_error_body(gw_buf *b, int openai, int status, const char *code, const char *msg);
void gw_call_fail(gw_call *c, int status, gw_fail reason, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* gw_server.c: hand a finished call back to its loop thread; the loop
 * thread's side of calls (message receiver, disconnect watch). */
void gw_call_finish(gw_call *c);
/* gw_h2oerr.c: h2o's own 400/413 answers (before any handler) as JSON errors. */
void gw_json_h2o_errors(struct gw_server *s, h2o_hostconf_t *host);
void gw_on_messages(h2o_multithread_receiver_t *rcv, h2o_linklist_t *messages);
void gw_watch_disconnects(gw_loop *l);
/* gw_loop.c: start the loop threads (each builds its own h2o state and
 * listener from l->listen_fd), and stop them (each closes its connections
 * and tears its h2o state down when nothing of it is in flight). */
int gw_loops_start(struct gw_server *s, posy_err *err);
void gw_loops_stop(struct gw_server *s);
/* gw_info.c: GET routes answered on the loop thread. */
int gw_get_route(struct gw_server *s, gw_route r, gw_buf *b, int *status);

#endif

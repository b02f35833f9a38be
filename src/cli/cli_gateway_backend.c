/* cli_gateway_backend: the HTTP front's gw_backend on top of rpc_pool, so
 * `posy gateway` runs the very front `posy serve` runs and only the
 * backend differs (in-process scheduler there, remote workers here).
 *
 * A front job (sched_req: ids + cu_seqlens + output buffer) becomes one
 * rpc_pool request; the pool chunks it, spreads the chunks, and writes the
 * vectors straight into the job's output buffer.  Cancel (the HTTP client
 * went away) cancels the job's gRPC calls through rpc_pool_cancel, keyed by
 * the front's job: workers drop the chunks' queued sequences and the job
 * completes with an error nobody reads.  A job that fails before anything was sent (no healthy worker)
 * is refused from submit() itself, never completed inside it, because the
 * front does not expect its callback before submit returns.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_gateway.h"

typedef struct gwr_job {
    sched_req *job;
    cli_gateway_backend *g;
    int32_t lengths[];
} gwr_job;

/* A completion that happens inside rpc_pool_embed on the submitting thread
 * is parked here (on submit's stack) and reported as submit's result.  Any
 * other completion may run, and free the job, before rpc_pool_embed even
 * returns, so submit never touches the job after handing it over. */
typedef struct gwr_inline {
    gwr_job *j;
    int done, status;
    char msg[160];
} gwr_inline;

static _Thread_local gwr_inline *gwr_submitting;

static void gwr_done(void *arg, int status, const char *msg, uint64_t queue_us, uint64_t infer_us) {
    gwr_job *j = arg;
    gwr_inline *in = gwr_submitting;
    if (in && in->j == j) {
        in->done = 1;
        in->status = status ? status : POSY_E_INTERNAL;
        snprintf(in->msg, sizeof in->msg, "%s", msg && *msg ? msg : "no healthy worker");
        return;
    }
    sched_req *r = j->job;
    atomic_fetch_sub(&j->g->outstanding_reqs, 1);
    atomic_fetch_sub(&j->g->outstanding_seqs, r->n_seqs);
    atomic_fetch_sub(&j->g->outstanding_tokens, r->cu_seqlens[r->n_seqs]);
    free(j);
    r->status = status;
    snprintf(r->msg, sizeof r->msg, "%s", status && msg ? msg : "");
    r->queue_ns = queue_us * 1000;
    r->infer_ns = infer_us * 1000;
    r->done(r, r->user);
}

static int gwr_submit(void *ctx, sched_req *r, posy_err *err) {
    cli_gateway_backend *g = ctx;
    if (r->n_seqs <= 0) return posy_err_set(err, POSY_E_INVALID, "no inputs");
    gwr_job *j = malloc(sizeof *j + (size_t)r->n_seqs * sizeof(int32_t));
    if (!j) return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    j->job = r;
    j->g = g;
    for (int i = 0; i < r->n_seqs; i++) j->lengths[i] = r->cu_seqlens[i + 1] - r->cu_seqlens[i];
    int n_tokens = r->cu_seqlens[r->n_seqs];
    rpc_chunk c = {.n_seqs = r->n_seqs, .n_tokens = n_tokens, .ids = r->ids, .lengths = j->lengths,
                   .type_ids = r->type_ids, .pool_skip = r->pool_skip};
    atomic_fetch_add(&g->outstanding_reqs, 1);
    atomic_fetch_add(&g->outstanding_seqs, r->n_seqs);
    atomic_fetch_add(&g->outstanding_tokens, n_tokens);
    gwr_inline in = {.j = j};
    gwr_submitting = &in;
    int rc = rpc_pool_embed_tok(g->pool, &c, r->out, r->tok_out, gwr_done, j, r, err);
    gwr_submitting = NULL;
    if (!rc && in.done) rc = posy_err_set(err, in.status, "%s", in.msg);   /* nothing else holds j */
    if (rc) {
        atomic_fetch_sub(&g->outstanding_reqs, 1);
        atomic_fetch_sub(&g->outstanding_seqs, r->n_seqs);
        atomic_fetch_sub(&g->outstanding_tokens, n_tokens);
        free(j);
    }
    return rc;
}

static void gwr_cancel(void *ctx, sched_req *r) { rpc_pool_cancel(((cli_gateway_backend *)ctx)->pool, r); }

static void gwr_depth(void *ctx, sched_depth *d) {
    cli_gateway_backend *g = ctx;
    d->requests = atomic_load(&g->outstanding_reqs);
    d->queued_seqs = atomic_load(&g->outstanding_seqs);
    d->queued_tokens = atomic_load(&g->outstanding_tokens);
}

/* Per-worker gauges and counters after the front's own /metrics lines. */
static void gwr_metrics(void *ctx, gw_buf *b) {
    cli_gateway_backend *g = ctx;
    size_t cap = 64 * 1024;
    char *w = gw_buf_reserve(b, cap);
    if (w) b->len += rpc_pool_metrics(g->pool, w, cap);
}

static int gwr_healthy(void *ctx) { return rpc_pool_healthy(((cli_gateway_backend *)ctx)->pool) > 0; }

void cli_gateway_backend_init(cli_gateway_backend *g, rpc_pool *pool) {
    memset(g, 0, sizeof *g);
    g->pool = pool;
    g->be.ctx = g;
    g->be.submit = gwr_submit;
    g->be.cancel = gwr_cancel;
    g->be.depth = gwr_depth;
    g->be.metrics = gwr_metrics;
    g->be.healthy = gwr_healthy;
}

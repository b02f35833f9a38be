/* cli_worker_sched: the worker's rpc_backend on top of the in-process
 * scheduler, so a gRPC worker batches exactly as `posy serve` does.
 *
 * Each validated chunk becomes one sched_req (ids as they came off the
 * wire, cu_seqlens built from the lengths, an output buffer), allocated in
 * one block.  The scheduler's callback runs on its step thread and must be
 * short: it hands the vectors to the rpc layer, which packs them into a
 * gRPC slice and starts the send (non-blocking), then frees the block.
 * The block is shared by the scheduler and the rpc server (refs): the
 * server hands its handle back when the call ends, cancelling when the
 * client went away, so queued sequences of an abandoned chunk are dropped
 * (sched_cancel) instead of computed; the block lives until both let go.
 * Type ids (sentence pairs) are forwarded as they came; the worker
 * advertises the model's type_vocab and the codec rejects ids beyond it.
 * Pool skips (prompt tokens under include_prompt false, counted by the
 * gateway) are forwarded too, each already checked against its length.
 * Token states (EmbedRequest.token_states, for /embed_all) land in the
 * same block, after the vectors.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cli_worker.h"

typedef struct wk_job {
    sched_req r;
    rpc_reply_fn done;
    void *done_arg;
    int dim, tok_dim;
    atomic_int refs;             /* the scheduler's callback + the server's handle */
} wk_job;

static void wk_job_unref(wk_job *j) {
    if (atomic_fetch_sub(&j->refs, 1) == 1) free(j);
}

static void wk_job_done(sched_req *r, void *user) {
    wk_job *j = user;
    (void)r;
    if (j->r.status == 0)
        j->done(j->done_arg, 0, NULL, j->r.out, j->r.n_seqs, j->dim, j->r.tok_out, j->tok_dim, j->r.queue_ns / 1000,
                j->r.infer_ns / 1000);
    else
        j->done(j->done_arg, j->r.status == SCHED_CANCELLED ? POSY_E_IO : j->r.status,
                j->r.msg[0] ? j->r.msg : "cancelled", NULL, 0, 0, NULL, 0, 0, 0);
    wk_job_unref(j);
}

static int wk_submit(void *ctx, const rpc_chunk *c, rpc_reply_fn done, void *done_arg, void **job, posy_err *err) {
    cli_worker_backend *b = ctx;
    int dim = sched_dim(b->sched);
    size_t cu_bytes = (size_t)(c->n_seqs + 1) * sizeof(int32_t);
    size_t out_bytes = (size_t)c->n_seqs * (size_t)dim * sizeof(float);
    const int tok_dim = c->token_states ? sched_tok_dim(b->sched) : 0;   /* the codec refused token_states when 0 */
    size_t tok_bytes = (size_t)c->n_tokens * (size_t)tok_dim * sizeof(float);
    wk_job *j = malloc(sizeof *j + cu_bytes + out_bytes + tok_bytes);
    if (!j) return posy_err_set(err, POSY_E_NOMEM, "out of memory for a chunk of %d sequences", c->n_seqs);
    memset(&j->r, 0, sizeof j->r);
    int32_t *cu = (int32_t *)(j + 1);
    float *out = (float *)((char *)cu + cu_bytes);
    cu[0] = 0;
    for (int i = 0; i < c->n_seqs; i++) cu[i + 1] = cu[i] + c->lengths[i];
    j->r.ids = c->ids;
    j->r.cu_seqlens = cu;
    j->r.type_ids = c->type_ids;
    j->r.pool_skip = c->pool_skip;
    j->r.n_seqs = c->n_seqs;
    j->r.out = out;
    j->r.tok_out = tok_dim ? out + (size_t)c->n_seqs * (size_t)dim : NULL;
    j->r.done = wk_job_done;
    j->r.user = j;
    j->done = done;
    j->done_arg = done_arg;
    j->dim = dim;
    j->tok_dim = tok_dim;
    atomic_init(&j->refs, job ? 2 : 1);
    int rc = sched_submit(b->sched, &j->r, err);
    if (rc) free(j);
    else if (job) *job = j;
    return rc;
}

static void wk_release(void *ctx, void *job, int cancel) {
    cli_worker_backend *b = ctx;
    wk_job *j = job;
    if (cancel) sched_cancel(b->sched, &j->r);   /* a no-op once its completion began */
    wk_job_unref(j);
}

static void wk_counters(void *ctx, uint64_t *seqs_run, uint64_t *seqs_dropped) {
    cli_worker_backend *b = ctx;
    sched_depth d;
    sched_get_depth(b->sched, &d);
    *seqs_run = d.seqs_run;
    *seqs_dropped = d.seqs_dropped;
}

void cli_worker_backend_init(cli_worker_backend *b, sched *s) {
    b->sched = s;
    b->be.ctx = b;
    b->be.submit = wk_submit;
    b->be.release = wk_release;
    b->be.counters = wk_counters;
}

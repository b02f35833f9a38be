/* cli_worker_sched: the worker's rpc_backend on top of the in-process
 * scheduler, so a gRPC worker batches exactly as `posy serve` does.
 *
 * Each validated chunk becomes one sched_req (ids as they came off the
 * wire, cu_seqlens built from the lengths, an output buffer), allocated in
 * one block.  The scheduler's callback runs on its step thread and must be
 * short: it hands the vectors to the rpc layer, which packs them into a
 * gRPC slice and starts the send (non-blocking), then frees the block.
 * Type ids (sentence pairs) are forwarded as they came; the worker
 * advertises the model's type_vocab and the codec rejects ids beyond it.
 */
#include <stdlib.h>
#include <string.h>

#include "cli_worker.h"

typedef struct wk_job {
    sched_req r;
    rpc_reply_fn done;
    void *done_arg;
    int dim;
} wk_job;

static void wk_job_done(sched_req *r, void *user) {
    wk_job *j = user;
    (void)r;
    if (j->r.status == 0)
        j->done(j->done_arg, 0, NULL, j->r.out, j->r.n_seqs, j->dim, j->r.queue_ns / 1000, j->r.infer_ns / 1000);
    else
        j->done(j->done_arg, j->r.status == SCHED_CANCELLED ? POSY_E_IO : j->r.status,
                j->r.msg[0] ? j->r.msg : "cancelled", NULL, 0, 0, 0, 0);
    free(j);
}

static int wk_submit(void *ctx, const rpc_chunk *c, rpc_reply_fn done, void *done_arg, posy_err *err) {
    cli_worker_backend *b = ctx;
    int dim = sched_dim(b->sched);
    size_t cu_bytes = (size_t)(c->n_seqs + 1) * sizeof(int32_t);
    size_t out_bytes = (size_t)c->n_seqs * (size_t)dim * sizeof(float);
    wk_job *j = malloc(sizeof *j + cu_bytes + out_bytes);
    if (!j) return posy_err_set(err, POSY_E_NOMEM, "out of memory for a chunk of %d sequences", c->n_seqs);
    memset(&j->r, 0, sizeof j->r);
    int32_t *cu = (int32_t *)(j + 1);
    float *out = (float *)((char *)cu + cu_bytes);
    cu[0] = 0;
    for (int i = 0; i < c->n_seqs; i++) cu[i + 1] = cu[i] + c->lengths[i];
    j->r.ids = c->ids;
    j->r.cu_seqlens = cu;
    j->r.type_ids = c->type_ids;
    j->r.n_seqs = c->n_seqs;
    j->r.out = out;
    j->r.done = wk_job_done;
    j->r.user = j;
    j->done = done;
    j->done_arg = done_arg;
    j->dim = dim;
    int rc = sched_submit(b->sched, &j->r, err);
    if (rc) free(j);
    return rc;
}

void cli_worker_backend_init(cli_worker_backend *b, sched *s) {
    b->sched = s;
    b->be.ctx = b;
    b->be.submit = wk_submit;
}

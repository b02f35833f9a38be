/* gw_backend_local: the in-process scheduler behind the gw_backend calls. */
#include "gw_backend.h"

static int local_submit(void *ctx, sched_req *job, posy_err *err) { return sched_submit(ctx, job, err); }
static void local_cancel(void *ctx, sched_req *job) { sched_cancel(ctx, job); }
static void local_depth(void *ctx, sched_depth *d) { sched_get_depth(ctx, d); }
static int local_engine_stats(void *ctx, posy_engine_stats *out) { return sched_get_engine_stats(ctx, out); }

void gw_backend_local(gw_backend *b, sched *s) {
    b->ctx = s;
    b->submit = local_submit;
    b->cancel = local_cancel;
    b->depth = local_depth;
    b->metrics = NULL;
    b->healthy = NULL;
    b->engine_stats = local_engine_stats;
}

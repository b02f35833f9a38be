/* gw_backend: what the HTTP front needs from whoever computes embeddings.
 *
 * `posy serve` plugs in the in-process scheduler (gw_backend_local); `posy
 * gateway` (issue 5) plugs in a client that sends the same requests to
 * remote workers.  A job is a sched_req: token ids packed with cu_seqlens,
 * an output buffer and a completion callback, with the contract written in
 * sched_core.h (exactly one callback per accepted job; cancel is a no-op
 * once completion began).  A remote backend uses the public fields only.
 */
#ifndef GW_BACKEND_H
#define GW_BACKEND_H

#include "gw_buf.h"
#include "sched_core.h"

typedef struct gw_backend {
    void *ctx;
    int (*submit)(void *ctx, sched_req *job, posy_err *err);   /* 0 or a posy_status */
    void (*cancel)(void *ctx, sched_req *job);
    void (*depth)(void *ctx, sched_depth *d);                  /* for /metrics */
    /* Optional (NULL for the local scheduler): a remote backend's own
     * Prometheus lines for /metrics, and whether it can serve now (0 makes
     * /health answer 503, as TEI does when its backend is unhealthy). */
    void (*metrics)(void *ctx, gw_buf *b);
    int (*healthy)(void *ctx);
    /* Optional (NULL when no engine is in this process, as in `posy
     * gateway`): the engine's counters for /metrics, safe from any thread;
     * 0, or -1 when the engine keeps none (the no-op engine). */
    int (*engine_stats)(void *ctx, posy_engine_stats *out);
} gw_backend;

void gw_backend_local(gw_backend *b, sched *s);

#endif

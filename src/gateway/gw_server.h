/* gw_server: the HTTP/1.1 front of `posy serve` (and later `posy gateway`).
 *
 * Several h2o event-loop threads, each with its own SO_REUSEPORT listener
 * (the kernel spreads connections), keep-alive connections, request bodies
 * read whole by h2o.  Loop threads never parse or tokenize: a request is
 * copied into a gw_call and handed to a worker pool (gw_pool) that parses
 * JSON (jansson), validates, tokenizes and submits to a gw_backend; the
 * backend's completion sends the call back to the pool for serialization,
 * and the finished response is posted to the call's loop thread
 * (h2o_multithread) which writes it.  A client that disconnects cancels its
 * job (queued sequences are dropped).
 *
 * Lifecycle: gw_server_start binds and serves immediately (503 on model
 * routes until gw_server_set_ready), so orchestrators see the port early;
 * gw_server_drain stops accepting, answers new requests on open connections
 * with 503, and waits for every accepted request to be answered.
 */
#ifndef GW_SERVER_H
#define GW_SERVER_H

#include <stddef.h>
#include "eng_config.h"
#include "gw_backend.h"
#include "gw_metrics.h"
#include "tok.h"

typedef struct gw_opts {
    const char *host;
    int port;
    int n_loops;              /* event-loop threads */
    int n_workers;            /* parse/tokenize/serialize threads */
    size_t max_body_bytes;
    int max_client_batch;     /* inputs per request */
    int max_concurrent;       /* requests being processed at once (429 beyond) */
    int auto_truncate;        /* truncate over-long inputs unless the request says otherwise */
    int max_batch_tokens;     /* reported by /info */
    int max_batch_seqs;
    int request_timeout_ms;   /* a client must send a whole request within this (0 = h2o's 10 s) */
    const char *api_key;      /* NULL: open; else `Authorization: Bearer <key>` on all routes but
                                 /health and /metrics (gw_auth.h; copied by gw_server_start) */
    const char *cors;         /* NULL: no CORS headers; "*" or origins, comma-separated (gw_cors.h) */
} gw_opts;

/* What the front knows about the model; owned by the caller, valid until stop. */
typedef struct gw_model {
    const tok_tokenizer *tok;
    const eng_config *cfg;    /* prompts, sizes */
    const char *name;         /* the OpenAI "model" */
    int dim;                  /* output floats per input */
    const eng_router_query *sq;   /* an inference-free SPLADE model's query route (cfg->router), else NULL */
    int tok_dim;              /* floats per token on /embed_all (the engine's, or the workers'); 0: the
                                 route is not served (the model, or the backend, gives no token states) */
    int max_input_tokens;     /* longest sequence the model takes */
    int max_batch_tokens;     /* the engine's budget in effect, for /info (0: gw_opts') */
    const char *device;       /* "cpu", "cuda:0", "noop" */
    const char *dtype;
} gw_model;

typedef struct gw_server gw_server;

gw_server *gw_server_start(const gw_opts *opts, posy_err *err);
void gw_server_set_ready(gw_server *s, const gw_model *model, const gw_backend *backend);
gw_metrics *gw_server_metrics(gw_server *s);
/* The worker pool's busy-polling (gw_pool_set_spin; 0: off, the default). */
void gw_server_set_busy_poll(gw_server *s, int us);
/* The port actually bound (useful with --port 0). */
int gw_server_port(const gw_server *s);
/* Stop accepting and wait (up to timeout_s) until no request is in flight.
 * Returns the number still in flight (0 = clean). */
int gw_server_drain(gw_server *s, double timeout_s);
/* Stop the workers, then the loops (after drain): each loop closes its
 * connections and frees its h2o state (gw_loop.c).  Backend completions
 * after this are dropped. */
void gw_server_stop(gw_server *s);
/* After gw_server_stop and after the backend is closed (so that no
 * completion can arrive any more): free the server.  If a drain timed out
 * and calls are still in flight, everything is left to process exit. */
void gw_server_free(gw_server *s);

#endif

/* rpc_pool: the gateway's view of its workers (ARCHITECTURE.md, gateway).
 *
 * rpc_pool_embed() takes a whole tokenized request, splits it into chunks
 * of at most chunk_tokens tokens (sequences kept whole, one long sequence
 * may form a chunk alone), sends each chunk to the healthy worker with the
 * fewest outstanding tokens, retries a chunk whose worker fails or times
 * out on another worker, and calls back once every chunk has landed, with
 * the vectors written in input order into the caller's buffer.
 *
 * Workers come from fixed addresses (--backend) and/or a DNS name
 * re-resolved periodically (--backend-dns; a Kubernetes headless Service
 * resolves to every ready worker).  A background thread checks health
 * (grpc.health.v1 Check) and verifies each new or returning worker with
 * Info: it must report the gateway's model fingerprint and dimension (and,
 * when need_pool_skip, that it applies pool skips), or it is never used.  With no healthy worker a request fails at once with
 * POSY_E_IO ("no healthy worker"), which the HTTP front answers 503; a
 * chunk every worker refuses (RESOURCE_EXHAUSTED) fails it with POSY_E_BUSY
 * (429).
 */
#ifndef RPC_POOL_H
#define RPC_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "rpc.h"

typedef struct rpc_pool rpc_pool;

typedef struct rpc_pool_opts {
    const char *const *backends;  /* "host:port" each */
    int n_backends;
    const char *dns;              /* "name:port" re-resolved every dns_ms, or NULL */
    const char *fingerprint;      /* the gateway's model fingerprint (rpc_fingerprint) */
    int dim;                      /* expected vector dimension */
    int chunk_tokens;             /* default 2048 */
    int chunk_seqs;               /* default 512 */
    int timeout_ms;               /* per chunk attempt; default 30000 */
    int health_ms;                /* health-check period; default 500 */
    int dns_ms;                   /* DNS period; default 5000 */
    int max_attempts;             /* per chunk; default 4 */
    int start_wait_ms;            /* wait at open for the first verification round; default 3000 */
    int need_pool_skip;           /* the model leaves prompts out of pooling: use only workers that
                                     apply EmbedRequest.pool_skip (an older one would pool them) */
    int tok_dim;                  /* floats per token state (/embed_all) the model gives; 0: none.  Token
                                     chunks go only to workers that report the same */
} rpc_pool_opts;

/* Completion of a request: status 0 and the caller's `out` filled, or a
 * posy_status with msg.  Timings: the longest queue and inference time any
 * chunk saw, in microseconds. */
typedef void (*rpc_pool_cb)(void *arg, int status, const char *msg, uint64_t queue_us, uint64_t infer_us);

/* Open: starts the client loop and the health thread, and verifies the
 * workers reachable now.  Fails (NULL) when a reachable worker serves
 * another model, naming it. */
rpc_pool *rpc_pool_open(const rpc_pool_opts *o, posy_err *err);
/* Waits for requests in flight, then frees. */
void rpc_pool_close(rpc_pool *p);

/* Embed `req` (all sequences of one request).  `req`'s arrays and `out`
 * (req->n_seqs * dim floats) must stay valid until cb runs.  Returns 0 and
 * calls cb exactly once (possibly before returning), or a posy_status
 * without calling cb. */
int rpc_pool_embed(rpc_pool *p, const rpc_chunk *req, float *out, rpc_pool_cb cb, void *arg, posy_err *err);

/* Same, with `key` naming the request for rpc_pool_cancel (rpc_pool_embed
 * uses arg). */
int rpc_pool_embed_key(rpc_pool *p, const rpc_chunk *req, float *out, rpc_pool_cb cb, void *arg, const void *key,
                       posy_err *err);
/* Same, and every token's state too (req->token_states set): n_tokens *
 * o.tok_dim floats into tok_out, in token order.  Only workers that give
 * them take these chunks (none: POSY_E_IO, "no healthy worker"). */
int rpc_pool_embed_tok(rpc_pool *p, const rpc_chunk *req, float *out, float *tok_out, rpc_pool_cb cb, void *arg,
                       const void *key, posy_err *err);
/* The caller gave up on the request named `key` (its HTTP client went
 * away): chunks in flight are cancelled (grpc_call_cancel, so each worker
 * drops what it still has queued) and none is sent or retried again.  cb
 * still runs exactly once (status POSY_E_IO "cancelled" unless every chunk
 * had already landed).  A no-op for a request that is no longer in flight. */
void rpc_pool_cancel(rpc_pool *p, const void *key);

/* Number of workers verified and healthy now. */
int rpc_pool_healthy(rpc_pool *p);

/* Per-worker state and counters in Prometheus text format, appended to
 * buf (NUL-terminated, truncated at cap).  Returns bytes written. */
size_t rpc_pool_metrics(rpc_pool *p, char *buf, size_t cap);

#endif

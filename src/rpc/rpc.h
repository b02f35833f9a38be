/* rpc: posy's gRPC transport (proto/posy.proto), on the gRPC core C API with
 * protobuf-c messages generated at build time.
 *
 * Two sides:
 *  - server (`posy worker`): answers posy.v1.Embedder (Embed, EmbedStream,
 *    Info) and grpc.health.v1.Health/Check; every chunk is unpacked and
 *    validated here (bad input -> INVALID_ARGUMENT, never a crash), then
 *    handed to an rpc_backend -- the worker binds that to the same scheduler
 *    that `posy serve` runs in-process.
 *  - client + pool (`posy gateway`): rpc_pool splits a tokenized request
 *    into chunks, balances them over healthy workers (fewest outstanding
 *    tokens), retries failed chunks elsewhere and reassembles in order.
 *
 * Tokens travel, not text: a chunk is the engine's packed layout (ids back
 * to back + per-sequence lengths).  The module knows nothing of HTTP, JSON,
 * the scheduler or the engine; the CLI glues it to them.
 */
#ifndef RPC_H
#define RPC_H

#include <stdint.h>
#include "posy_err.h"

/* A chunk of tokenized sequences, packed. */
typedef struct rpc_chunk {
    int n_seqs;
    int n_tokens;                 /* == sum(lengths) */
    const int32_t *ids;           /* n_tokens */
    const int32_t *lengths;       /* n_seqs, each >= 1 */
    const int32_t *type_ids;      /* n_tokens, or NULL for all zeros */
    const int32_t *pool_skip;     /* n_seqs leading tokens left out of pooling, or NULL for none */
    int token_states;             /* answer every token's state too (EmbedRequest.token_states) */
} rpc_chunk;

/* What a worker serves (InfoResponse). */
typedef struct rpc_info {
    char model[256];
    char arch[32];
    char device[32];
    char dtype[8];
    char pooling[8];
    char fingerprint[64];
    int dim;
    int max_seq_len;
    int vocab;
    int type_vocab;               /* type ids accepted: [0, type_vocab); 0 or 1: only 0 */
    int max_batch_tokens;
    int max_chunk_tokens;         /* largest chunk accepted by one Embed */
    int max_chunk_seqs;
    int normalize;
    int pool_skip;                /* the backend applies rpc_chunk.pool_skip */
    int tok_dim;                  /* floats per token state (rpc_chunk.token_states); 0: gives none */
    uint64_t requests, sequences, tokens;   /* counters, filled by the server */
    uint64_t cancelled;           /* Embed calls the client cancelled or let expire */
    uint64_t seqs_run, seqs_dropped;        /* from the backend's counters(), if any */
} rpc_info;

/* Completion of one chunk.  status 0: `vectors` holds n * dim floats in
 * sequence order, and, when the chunk asked for token states, `tok` the
 * chunk's n_tokens * tok_dim (else NULL), valid only during the call.
 * Otherwise status is a posy_status and msg says why (vectors NULL). */
typedef void (*rpc_reply_fn)(void *arg, int status, const char *msg, const float *vectors, int n,
                             int dim, const float *tok, int tok_dim, uint64_t queue_us, uint64_t infer_us);

/* The worker's engine side.  submit() gets a validated chunk whose arrays
 * stay valid until `done` is called.  It returns 0 and later calls `done`
 * exactly once, from any thread; or returns a posy_status (POSY_E_BUSY for
 * admission control) with err filled and never calls `done`.
 * Cancellation: when `job` is non-NULL (the server passes it only to a
 * backend with release()), an accepted submit stores a handle in *job and
 * the server hands it back through release() exactly once, when the call
 * ends (for a message of EmbedStream: when it is answered, or when the
 * stream is cancelled first); cancel != 0 means the client cancelled or its
 * deadline passed, so
 * queued work of the chunk is dropped (`done` still fires once, possibly
 * inside release(), with a non-zero status).  counters() (optional) reports
 * sequences the engine ran and sequences dropped unrun, for Info. */
typedef struct rpc_backend {
    void *ctx;
    int (*submit)(void *ctx, const rpc_chunk *c, rpc_reply_fn done, void *done_arg, void **job, posy_err *err);
    void (*release)(void *ctx, void *job, int cancel);
    void (*counters)(void *ctx, uint64_t *seqs_run, uint64_t *seqs_dropped);
} rpc_backend;

/* ---- server --------------------------------------------------------------- */

typedef struct rpc_server rpc_server;

/* Bind `listen` ("host:port", port 0 picks one) and start serving.
 * `info` is copied; its counters are maintained by the server. */
rpc_server *rpc_server_start(const char *listen, const rpc_info *info, const rpc_backend *be,
                             posy_err *err);
/* The bound port. */
int rpc_server_port(const rpc_server *s);
/* Health: SERVING (1) or NOT_SERVING (0), e.g. while draining. */
void rpc_server_set_serving(rpc_server *s, int serving);
/* Stop accepting calls, let in-flight calls finish for up to grace_ms, then
 * cancel the rest; frees the server.  The backend must keep answering until
 * this returns. */
void rpc_server_stop(rpc_server *s, int grace_ms);

/* ---- model fingerprint ----------------------------------------------------- */

/* A stable hash (hex) of the files that decide a model's outputs as seen by
 * the gateway: config.json, tokenizer.json and the sentence-transformers
 * files present in dir.  Weights are not read (the gateway has none); two
 * directories with the same config and tokenizer are assumed the same model. */
int rpc_fingerprint(const char *model_dir, char *out, size_t out_size, posy_err *err);
/* The same with `extra` (e.g. --hf-overrides' text; NULL or "" adds
 * nothing, giving rpc_fingerprint's value) in the hash. */
int rpc_fingerprint_with(const char *model_dir, const char *extra, char *out, size_t out_size, posy_err *err);

/* posy_status -> grpc_status_code, and back. */
int rpc_status_to_grpc(int posy_status);
int rpc_status_from_grpc(int grpc_code);

/* The most vectors of `dim` floats one Embed answer may carry under the
 * message-size ceiling both sides use (a SPLADE model's vocabulary-wide
 * vectors: 30522 floats each), with room for the message's framing. */
int rpc_max_vectors(int dim);
/* Whether one answer of n vectors of dim floats and n_tokens token states
 * of tok_dim floats fits under that ceiling. */
int rpc_answer_fits(int n, int dim, long long n_tokens, int tok_dim);

#endif

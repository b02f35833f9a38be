/* sched_core: the in-process scheduler (ARCHITECTURE.md, "scheduler"). The file is not called sched.h because that would shadow the system <sched.h>.
 *
 * A FCFS queue of sequences (token ids, already tokenized) in front of one
 * engine.  One step thread owns the engine: it forms a batch by taking
 * sequences in arrival order while the token sum stays within
 * max_batch_tokens and the count within max_batch_seqs, submits it with
 * step(), and collects finished batches with step()/wait().  With an
 * asynchronous engine (CUDA) up to SCHED_SLOTS batches are in flight, so the
 * next batch is packed while the device runs the previous one; with the CPU
 * engine new requests keep queueing while a batch runs and the next batch is
 * formed the moment it returns.
 *
 * The scheduler knows nothing about HTTP or gRPC: requests are caller-owned
 * sched_req structs with a completion callback.  Contract:
 *   - sched_submit() either refuses (returns non-zero, no callback ever) or
 *     accepts; an accepted request gets its callback exactly ONCE, from the
 *     step thread or from sched_cancel()'s caller, and after the callback
 *     the scheduler never touches the request or its buffers again.
 *   - The callback must be short and must not call back into the scheduler
 *     (post a message to your own thread and return).
 *   - sched_cancel() drops the request's queued sequences; sequences already
 *     in a running batch finish first, then the callback fires with
 *     status SCHED_CANCELLED.
 * The engine is reached through sched_engine (a small table of functions) so
 * the real engine, the benchmarking no-op engine and test fakes plug in the
 * same way.
 */
#ifndef SCHED_CORE_H
#define SCHED_CORE_H

#include <pthread.h>
#include <stdint.h>
#include "posy_engine.h"
#include "posy_err.h"

#define SCHED_SLOTS 2
#define SCHED_CANCELLED 100   /* sched_req.status of a cancelled request */

typedef struct sched_engine {
    void *ctx;
    int dim;                  /* floats written per sequence */
    int (*step)(void *ctx, const posy_batch *next, posy_result *done, int max_done, posy_err *err);
    int (*wait)(void *ctx, posy_result *done, int max_done);
    /* Optional (NULL: the engine keeps no counters): the engine's counters,
     * called on the step thread after steps that did work; the scheduler
     * keeps a copy that other threads read with sched_get_engine_stats. */
    void (*stats)(void *ctx, posy_engine_stats *out);
    int allow_empty;          /* sequences of no tokens are accepted (a static embedding model: a zero
                                 bag, as sentence-transformers embeds an empty text) */
    int tok_dim;              /* floats per token of posy_batch.tok_out; 0: the engine gives none */
} sched_engine;

/* Adapters: the real engine, and the no-op engine of `posy serve --engine
 * noop` (copies a fixed unit vector per sequence, skipping the model math;
 * each batch sleeps delay_us first, 0 for none). */
void sched_engine_posy(sched_engine *se, posy_engine *e);
int sched_engine_noop(sched_engine *se, int dim, int delay_us, posy_err *err);
void sched_engine_noop_free(sched_engine *se);

typedef struct sched_stats_hook {
    /* Called on the step thread after each batch finishes (keep it cheap). */
    void (*on_batch)(void *user, int n_seqs, int n_tokens, uint64_t infer_ns);
    void *user;
} sched_stats_hook;

typedef struct sched_opts {
    int max_batch_tokens;     /* > 0 */
    int max_batch_seqs;       /* > 0 */
    int max_concurrent;       /* accepted requests not yet completed; > 0 */
    int spin_us;              /* after a submission or a completion the step thread busy-polls this
                                 long instead of sleeping (0: never) */
    sched_stats_hook hook;
} sched_opts;

typedef struct sched_req sched_req;
typedef void (*sched_done_fn)(sched_req *r, void *user);

struct sched_req {
    /* Set by the caller before sched_submit; must stay valid until the callback. */
    const int32_t *ids;        /* all sequences back to back */
    const int32_t *cu_seqlens; /* n_seqs + 1 offsets into ids */
    const int32_t *type_ids;   /* one per id (segment ids for sentence pairs), or NULL for all zeros */
    const int32_t *pool_skip;  /* one per sequence: leading tokens left out of pooling (a prompt under
                                  include_prompt false), 0 <= skip < length; NULL for none.  Each
                                  skip travels with its sequence into whatever batch runs it. */
    int n_seqs;
    float *out;                /* n_seqs * dim floats, written by the scheduler */
    float *tok_out;            /* NULL, or cu_seqlens[n_seqs] * tok_dim floats: every token's state, written
                                  by the engine in place (TEI's /embed_all); refused when tok_dim is 0.
                                  Such requests share batches only with their own kind */
    sched_done_fn done;
    void *user;
    /* Set by the scheduler before the callback. */
    int status;                /* 0, SCHED_CANCELLED, or a posy_status */
    char msg[160];             /* why, when status != 0 */
    uint64_t queue_ns;         /* submit -> first sequence starts running */
    uint64_t infer_ns;         /* first sequence starts -> last one finishes */
    /* Private to the scheduler. */
    sched_req *prev, *next;    /* queue links while queued */
    int queued;                /* on the queue */
    int next_seq;              /* sequences handed to batches so far */
    int running;               /* sequences in batches in flight */
    int finished;              /* sequences done */
    int cancelled;
    int fired;                 /* completion decided; the callback is (being) called */
    uint64_t t_submit, t_start;
};

typedef struct sched sched;

sched *sched_open(const sched_engine *eng, const sched_opts *opts, posy_err *err);
/* Finish everything queued and in flight (callbacks fire), stop the step
 * thread, free the scheduler. */
void sched_close(sched *s);

/* Queue a request.  Returns 0 if accepted, POSY_E_BUSY when max_concurrent
 * requests are outstanding, POSY_E_INVALID / POSY_E_TOO_LONG for a request
 * that can never run (no sequences, an empty sequence, a sequence longer than
 * max_batch_tokens, a pool_skip outside [0, length)), POSY_E_UNSUPPORTED
 * after sched_close began. */
int sched_submit(sched *s, sched_req *r, posy_err *err);

/* The client went away: drop the request's queued sequences.  The callback
 * fires (status SCHED_CANCELLED) once nothing of it is running - possibly
 * inside this call.  Cancelling a request whose completion already began is
 * a no-op, so the caller may cancel at any time until it releases the
 * request's memory (which it may do only after its callback ran). */
void sched_cancel(sched *s, sched_req *r);

typedef struct sched_depth {
    int requests;              /* outstanding (accepted, callback not fired) */
    int queued_seqs;           /* sequences waiting for a batch */
    int queued_tokens;
    uint64_t seqs_run;         /* since open: sequences handed back by the engine */
    uint64_t seqs_dropped;     /* since open: queued sequences dropped by sched_cancel */
} sched_depth;
void sched_get_depth(sched *s, sched_depth *d);
/* The engine's counters as of its last step (a copy taken under the
 * scheduler's lock, so safe from any thread).  0, or -1 when the engine
 * keeps none (*out zeroed). */
int sched_get_engine_stats(sched *s, posy_engine_stats *out);
int sched_dim(const sched *s);
int sched_tok_dim(const sched *s);   /* the engine's tok_dim: 0 when it gives no token states */

#endif

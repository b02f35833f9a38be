/* rpc_pool: the request side -- split, pick, send, retry, reassemble.
 *
 * A request becomes a job with one pool_chunk per slice of whole
 * sequences.  Each chunk is sent to the least-loaded healthy worker
 * (outstanding tokens, the best cheap predictor of when its queue drains);
 * its vectors land directly at their offset in the caller's buffer, so
 * reassembly is free and order is by construction.  A chunk that fails for
 * a transport reason (UNAVAILABLE, CANCELLED, INTERNAL) marks its worker
 * down and is resent elsewhere; one that times out (DEADLINE_EXCEEDED) or
 * is refused by admission control (RESOURCE_EXHAUSTED) is resent elsewhere
 * without blame (health checks judge the worker); one the
 * worker calls invalid fails the request (retrying cannot help).  The job
 * completes when every chunk has an outcome, so no worker still writes into
 * the caller's buffer when the callback runs.  rpc_pool_cancel finds a job
 * by its key on the pool's list of jobs in flight and cancels its calls
 * (the workers see the cancellation and drop the chunks' queued
 * sequences); its chunks then end without a retry.  Calls are started with
 * p->mu held, so a chunk's call reference is recorded before its reply
 * (which takes p->mu) can free the chunk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posy_log.h"
#include "rpc_codec.h"
#include "rpc_pool_int.h"

typedef struct pool_chunk pool_chunk;
typedef struct pool_job {
    rpc_pool *p;
    const void *key;             /* names the job for rpc_pool_cancel */
    struct pool_job *prev, *next;   /* p->jobs, under p->mu */
    pool_chunk **chunks;         /* n_chunks; NULL once a chunk has its outcome (p->mu) */
    int n_chunks;
    int cancelled;               /* under p->mu */
    rpc_chunk req;
    float *out;
    float *tok;                  /* token states, or NULL */
    rpc_pool_cb cb;
    void *arg;
    int remaining;               /* chunks without an outcome; under p->mu */
    int status;
    char msg[256];
    uint64_t queue_us, infer_us;
} pool_job;

struct pool_chunk {
    pool_job *job;
    int idx;                     /* in job->chunks */
    grpc_call *call;             /* the attempt in flight (a reference), under p->mu */
    pool_worker *w;              /* worker of the attempt in flight */
    pool_worker *avoid;          /* worker of the previous failed attempt */
    int seq0, n_seqs, tok0, n_tokens;
    int attempts;
};

static void pool_send(pool_chunk *c);

/* Least outstanding tokens among healthy workers, preferring not `avoid`
 * (compared, never dereferenced: it may have been reaped meanwhile). */
static pool_worker *pool_pick_locked(rpc_pool *p, pool_worker *avoid, int tok) {
    pool_worker *best = NULL, *fallback = NULL;
    for (pool_worker *w = p->workers; w; w = w->next) {
        if (w->state != PW_OK || w->removed || (tok && !w->tok_dim)) continue;
        if (w == avoid) fallback = w;
        else if (!best || w->outstanding < best->outstanding) best = w;
    }
    return best ? best : fallback;
}

static void pool_job_finish(pool_job *j) {
    j->cb(j->arg, j->status, j->msg, j->queue_us, j->infer_us);
    free(j->chunks);
    free(j);
}

static void pool_job_unlink_locked(rpc_pool *p, pool_job *j) {
    if (j->prev) j->prev->next = j->next; else p->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    j->prev = j->next = NULL;
}

/* Record a chunk's outcome; the last one completes the job. */
static void pool_chunk_done(pool_chunk *c, int status, const char *msg, uint64_t queue_us, uint64_t infer_us) {
    pool_job *j = c->job;
    rpc_pool *p = j->p;
    pthread_mutex_lock(&p->mu);
    if (status && !j->status) {
        j->status = status;
        snprintf(j->msg, sizeof j->msg, "%s", msg);
    }
    if (queue_us > j->queue_us) j->queue_us = queue_us;
    if (infer_us > j->infer_us) j->infer_us = infer_us;
    int last = --j->remaining == 0;
    j->chunks[c->idx] = NULL;
    if (last) pool_job_unlink_locked(p, j);
    pthread_mutex_unlock(&p->mu);
    free(c);
    if (last) pool_job_finish(j);
}

static int pool_retryable(int code) {
    return code == GRPC_STATUS_UNAVAILABLE || code == GRPC_STATUS_DEADLINE_EXCEEDED ||
           code == GRPC_STATUS_CANCELLED || code == GRPC_STATUS_INTERNAL || code == GRPC_STATUS_UNKNOWN ||
           code == GRPC_STATUS_RESOURCE_EXHAUSTED || code == GRPC_STATUS_UNIMPLEMENTED;
}

static void pool_on_reply(void *arg, int code, const char *details, const uint8_t *buf, size_t len) {
    pool_chunk *c = arg;
    pool_job *j = c->job;
    rpc_pool *p = j->p;
    posy_err err;
    posy_err_clear(&err);
    uint64_t q = 0, inf = 0;
    if (code == GRPC_STATUS_OK &&
        rpc_resp_decode_tok(buf, len, c->n_seqs, p->o.dim, j->out + (size_t)c->seq0 * (size_t)p->o.dim, c->n_tokens,
                            p->o.tok_dim, j->tok ? j->tok + (size_t)c->tok0 * (size_t)p->o.tok_dim : NULL, &q, &inf,
                            &err) != 0) {
        code = GRPC_STATUS_INTERNAL;
        details = err.msg;
    }
    pthread_mutex_lock(&p->mu);
    pool_worker *w = c->w;
    char addr[256];                  /* w may be reaped once calls drops: copy what we log */
    snprintf(addr, sizeof addr, "%s", w->addr);
    w->outstanding -= c->n_tokens;
    w->calls--;
    p->calls--;
    if (c->call) grpc_call_unref(c->call);
    c->call = NULL;
    if (j->cancelled && code != GRPC_STATUS_OK) {   /* we cancelled it: no blame, no retry */
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
        pool_chunk_done(c, POSY_E_IO, "cancelled", 0, 0);
        return;
    }
    if (code == GRPC_STATUS_OK) w->chunks_ok++;
    else w->chunks_failed++;
    /* A timed-out chunk is retried elsewhere but does not condemn its worker:
     * it may just have a long queue.  Health checks decide if it is hung. */
    if (code != GRPC_STATUS_OK && code != GRPC_STATUS_RESOURCE_EXHAUSTED && code != GRPC_STATUS_INVALID_ARGUMENT &&
        code != GRPC_STATUS_DEADLINE_EXCEEDED)
        pool_worker_failed_locked(p, w, details);
    int retry = code != GRPC_STATUS_OK && pool_retryable(code) && c->attempts < p->o.max_attempts;
    if (retry) p->retries++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (code == GRPC_STATUS_OK) {
        pool_chunk_done(c, 0, "", q, inf);
    } else if (retry) {
        POSY_DEBUG("gateway: chunk failed on %s (%s); retrying", addr, details);
        c->avoid = w;
        pool_send(c);
    } else {
        int st = rpc_status_from_grpc(code);
        char msg[300];
        snprintf(msg, sizeof msg, "worker %.100s: %.180s", addr, details);
        pool_chunk_done(c, st, msg, 0, 0);
    }
}

/* Send (or resend) a chunk to the best worker; fails it when none is left. */
static void pool_send(pool_chunk *c) {
    rpc_pool *p = c->job->p;
    const rpc_chunk *r = &c->job->req;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        if (c->job->cancelled) {
            pthread_mutex_unlock(&p->mu);
            pool_chunk_done(c, POSY_E_IO, "cancelled", 0, 0);
            return;
        }
        pool_worker *w = p->stop ? NULL : pool_pick_locked(p, c->avoid, c->job->tok != NULL);
        if (!w) {
            p->no_worker++;
            pthread_mutex_unlock(&p->mu);
            pool_chunk_done(c, POSY_E_IO, c->job->tok ? "no healthy worker gives token states (workers older than "
                            "this gateway?)" : "no healthy worker", 0, 0);
            return;
        }
        w->outstanding += c->n_tokens;
        w->calls++;
        p->calls++;
        c->w = w;
        c->attempts++;
        rpc_chunk sub = {
            .n_seqs = c->n_seqs,
            .n_tokens = c->n_tokens,
            .ids = r->ids + c->tok0,
            .lengths = r->lengths + c->seq0,
            .type_ids = r->type_ids ? r->type_ids + c->tok0 : NULL,
            .pool_skip = r->pool_skip ? r->pool_skip + c->seq0 : NULL,
            .token_states = c->job->tok != NULL,
        };
        grpc_byte_buffer *bb = rpc_req_encode(&sub, (uint64_t)(uintptr_t)c);
        if (rpc_client_call(w->cl, RPC_METHOD_EMBED, bb, p->o.timeout_ms, pool_on_reply, c, &c->call) == 0) {
            pthread_mutex_unlock(&p->mu);
            return;
        }
        c->call = NULL;                  /* could not even start the call */
        w->outstanding -= c->n_tokens;
        w->calls--;
        p->calls--;
        pool_worker_failed_locked(p, w, "cannot start a call");
        c->avoid = w;
        pthread_mutex_unlock(&p->mu);
        if (c->attempts >= p->o.max_attempts) {
            pool_chunk_done(c, POSY_E_IO, "cannot reach any worker", 0, 0);
            return;
        }
    }
}

int rpc_pool_embed(rpc_pool *p, const rpc_chunk *req, float *out, rpc_pool_cb cb, void *arg, posy_err *err) {
    return rpc_pool_embed_key(p, req, out, cb, arg, arg, err);
}

void rpc_pool_cancel(rpc_pool *p, const void *key) {
    pthread_mutex_lock(&p->mu);
    for (pool_job *j = p->jobs; j; j = j->next) {
        if (j->key != key || j->cancelled) continue;
        j->cancelled = 1;
        for (int i = 0; i < j->n_chunks; i++)
            if (j->chunks[i] && j->chunks[i]->call) grpc_call_cancel(j->chunks[i]->call, NULL);
        break;
    }
    pthread_mutex_unlock(&p->mu);
}

int rpc_pool_embed_key(rpc_pool *p, const rpc_chunk *req, float *out, rpc_pool_cb cb, void *arg, const void *key,
                       posy_err *err) {
    return rpc_pool_embed_tok(p, req, out, NULL, cb, arg, key, err);
}

int rpc_pool_embed_tok(rpc_pool *p, const rpc_chunk *req, float *out, float *tok_out, rpc_pool_cb cb, void *arg,
                       const void *key, posy_err *err) {
    if (tok_out && !p->o.tok_dim) return posy_err_set(err, POSY_E_INVALID, "this model gives no token states");
    if (req->n_seqs <= 0) return posy_err_set(err, POSY_E_INVALID, "no sequences to embed");
    if (rpc_pool_healthy(p) == 0) {
        pthread_mutex_lock(&p->mu);
        p->no_worker++;
        pthread_mutex_unlock(&p->mu);
        return posy_err_set(err, POSY_E_IO, "no healthy worker");
    }
    pool_job *j = calloc(1, sizeof *j);
    if (!j) return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    j->p = p;
    j->req = *req;
    j->out = out;
    j->tok = tok_out;
    j->cb = cb;
    j->arg = arg;
    j->key = key;
    pthread_mutex_lock(&p->mu);
    int max_tok = p->o.chunk_tokens;
    const int max_seq = p->o.chunk_seqs;
    pthread_mutex_unlock(&p->mu);
    /* token states: a chunk's answer must fit one message as well */
    while (tok_out && max_tok > 1 && !rpc_answer_fits(max_seq, p->o.dim, max_tok, p->o.tok_dim)) max_tok /= 2;
    /* Count the chunks first so that no early completion sees remaining 0. */
    int n_chunks = 0;
    for (int s = 0; s < req->n_seqs;) {
        int toks = 0, n = 0;
        while (s + n < req->n_seqs && n < max_seq && (n == 0 || toks + req->lengths[s + n] <= max_tok))
            toks += req->lengths[s + n++];
        s += n;
        n_chunks++;
    }
    j->remaining = n_chunks;
    pool_chunk **cs = calloc((size_t)n_chunks, sizeof *cs);
    for (int i = 0; cs && i < n_chunks; i++)
        if (!(cs[i] = calloc(1, sizeof **cs))) {
            for (int k = 0; k < i; k++) free(cs[k]);
            free(cs);
            cs = NULL;
        }
    if (!cs) {
        free(j);
        return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    }
    j->chunks = cs;
    j->n_chunks = n_chunks;
    int s = 0, t = 0;
    for (int i = 0; i < n_chunks; i++) {
        pool_chunk *c = cs[i];
        c->job = j;
        c->idx = i;
        c->seq0 = s;
        c->tok0 = t;
        while (s < req->n_seqs && c->n_seqs < max_seq && (c->n_seqs == 0 || c->n_tokens + req->lengths[s] <= max_tok)) {
            c->n_tokens += req->lengths[s++];
            c->n_seqs++;
        }
        t += c->n_tokens;
    }
    pthread_mutex_lock(&p->mu);
    j->next = p->jobs;
    if (p->jobs) p->jobs->prev = j;
    p->jobs = j;
    pthread_mutex_unlock(&p->mu);
    /* The job (and cs) may complete and be freed during the last send. */
    for (int i = 0; i < n_chunks; i++) pool_send(cs[i]);
    return 0;
}

int rpc_pool_healthy(rpc_pool *p) {
    int n = 0;
    pthread_mutex_lock(&p->mu);
    for (pool_worker *w = p->workers; w; w = w->next) n += w->state == PW_OK && !w->removed;
    pthread_mutex_unlock(&p->mu);
    return n;
}

size_t rpc_pool_metrics(rpc_pool *p, char *buf, size_t cap) {
    static const char *names[] = {"new", "ok", "down", "bad"};
    size_t n = 0;
    if (!cap) return 0;
    buf[0] = '\0';
#define PM_PUT(...) do { if (n < cap) { int k = snprintf(buf + n, cap - n, __VA_ARGS__); \
        n += k > 0 ? (size_t)k : 0; if (n >= cap) n = cap - 1; } } while (0)
    pthread_mutex_lock(&p->mu);
    PM_PUT("# TYPE posy_gateway_worker_up gauge\n");
    for (pool_worker *w = p->workers; w; w = w->next)
        if (!w->removed) PM_PUT("posy_gateway_worker_up{worker=\"%s\",state=\"%s\"} %d\n", w->addr, names[w->state], w->state == PW_OK);
    PM_PUT("# TYPE posy_gateway_worker_chunks_total counter\n");
    for (pool_worker *w = p->workers; w; w = w->next)
        if (!w->removed) {
            PM_PUT("posy_gateway_worker_chunks_total{worker=\"%s\",result=\"ok\"} %llu\n", w->addr, (unsigned long long)w->chunks_ok);
            PM_PUT("posy_gateway_worker_chunks_total{worker=\"%s\",result=\"failed\"} %llu\n", w->addr, (unsigned long long)w->chunks_failed);
        }
    PM_PUT("# TYPE posy_gateway_worker_outstanding_tokens gauge\n");
    for (pool_worker *w = p->workers; w; w = w->next)
        if (!w->removed) PM_PUT("posy_gateway_worker_outstanding_tokens{worker=\"%s\"} %lld\n", w->addr, (long long)w->outstanding);
    PM_PUT("# TYPE posy_gateway_chunk_retries_total counter\nposy_gateway_chunk_retries_total %llu\n", (unsigned long long)p->retries);
    PM_PUT("# TYPE posy_gateway_no_worker_total counter\nposy_gateway_no_worker_total %llu\n", (unsigned long long)p->no_worker);
    pthread_mutex_unlock(&p->mu);
#undef PM_PUT
    return n;
}

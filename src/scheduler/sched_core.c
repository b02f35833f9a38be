/* sched_core: queue, batch forming and the step thread (see sched_core.h).
 *
 * State is guarded by one mutex; the engine is called with the mutex
 * released so submit/cancel never wait for a forward pass.  The queue is a
 * doubly linked list of requests (a request's sequences are contiguous in
 * arrival order, so FCFS over sequences is FCFS over requests with a cursor
 * `next_seq`); cancelling unlinks in O(1).  Batches are packed into SCHED_SLOTS
 * slots allocated once at open for the worst case (max_batch_tokens ids,
 * max_batch_seqs vectors): nothing allocates on the hot path.
 */
#include "sched_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "posy_clock.h"
#include "posy_log.h"

typedef struct sched_entry {
    sched_req *req;
    int seq;
} sched_entry;

typedef struct sched_slot {
    int busy;
    posy_batch batch;
    int32_t *ids, *cu;
    int32_t *types;            /* type ids of the batch; used only when a request brought some */
    int has_types;
    int32_t *skip;             /* pool skips of the batch; used only when a request brought some */
    int has_skip;
    float **tok;               /* per sequence: where its token states go (NULL: nowhere); used only
                                  when a request asked for them */
    int has_tok;
    float *out;
    sched_entry *entries;
    uint64_t t_start;
} sched_slot;

struct sched {
    sched_engine eng;
    sched_opts opts;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    int thread_started;
    int closing;
    sched_req *head, *tail;
    int outstanding, queued_seqs, queued_tokens, inflight;
    uint64_t seqs_run, seqs_dropped;   /* sequences run by the engine / dropped by sched_cancel */
    posy_engine_stats eng_stats;       /* the engine's counters after its last working step */
    uint64_t spin_ns;                  /* opts.spin_us resolved */
    sched_slot slots[SCHED_SLOTS];
};

static int seq_len(const sched_req *r, int i) { return r->cu_seqlens[i + 1] - r->cu_seqlens[i]; }

static void queue_unlink(sched *s, sched_req *r) {
    if (r->prev) r->prev->next = r->next; else s->head = r->next;
    if (r->next) r->next->prev = r->prev; else s->tail = r->prev;
    r->prev = r->next = NULL;
    r->queued = 0;
    for (int i = r->next_seq; i < r->n_seqs; i++) {
        s->queued_seqs--;
        s->queued_tokens -= seq_len(r, i);
    }
}

/* Append n per-request values (a sequence's type ids, or its pool skip)
 * at position `at` of an optional batch array: zeros for a request that
 * brought none (src NULL).  The batch carries the array only once some
 * request brought values; then the positions before `at` read 0. */
static void copy_optional(int32_t *dst, int *has, const int32_t *src, int at, int n) {
    if (!src && !*has) return;
    if (!*has) {
        memset(dst, 0, (size_t)at * sizeof(int32_t));
        *has = 1;
    }
    if (src) memcpy(dst + at, src, (size_t)n * sizeof(int32_t));
    else memset(dst + at, 0, (size_t)n * sizeof(int32_t));
}

/* Fill `sl` from the head of the queue in arrival order while the budgets
 * hold.  Called with the mutex held and the queue non-empty. */
static void form_batch(sched *s, sched_slot *sl, uint64_t now) {
    int nseq = 0, ntok = 0;
    sl->cu[0] = 0;
    sl->has_types = sl->has_skip = sl->has_tok = 0;
    while (s->head && nseq < s->opts.max_batch_seqs) {
        sched_req *r = s->head;
        int len = seq_len(r, r->next_seq);
        if (ntok + len > s->opts.max_batch_tokens) break;
        /* token-state requests (/embed_all) batch only with their own kind: the CUDA backend runs such a
         * batch eagerly, and a failure to make its buffers then fails none of the pooled requests */
        if (nseq && (r->tok_out != NULL) != sl->has_tok) break;
        if (len) memcpy(sl->ids + ntok, r->ids + r->cu_seqlens[r->next_seq], (size_t)len * sizeof(int32_t));
        copy_optional(sl->types, &sl->has_types, r->type_ids ? r->type_ids + r->cu_seqlens[r->next_seq] : NULL,
                      ntok, len);
        copy_optional(sl->skip, &sl->has_skip, r->pool_skip ? r->pool_skip + r->next_seq : NULL, nseq, 1);
        if (r->tok_out && !sl->has_tok) {
            memset(sl->tok, 0, (size_t)nseq * sizeof *sl->tok);
            sl->has_tok = 1;
        }
        if (sl->has_tok)
            sl->tok[nseq] = r->tok_out ? r->tok_out + (size_t)r->cu_seqlens[r->next_seq] * s->eng.tok_dim : NULL;
        ntok += len;
        sl->cu[nseq + 1] = ntok;
        sl->entries[nseq].req = r;
        sl->entries[nseq].seq = r->next_seq;
        nseq++;
        if (r->next_seq == 0) r->t_start = now;
        r->next_seq++;
        r->running++;
        s->queued_seqs--;
        s->queued_tokens -= len;
        if (r->next_seq == r->n_seqs) {  /* fully handed out: leave the queue */
            s->head = r->next;
            if (s->head) s->head->prev = NULL; else s->tail = NULL;
            r->next = r->prev = NULL;
            r->queued = 0;
        }
    }
    sl->busy = 1;
    sl->t_start = now;
    sl->batch.n_seqs = nseq;
    sl->batch.n_tokens = ntok;
    sl->batch.ids = sl->ids;
    sl->batch.type_ids = sl->has_types ? sl->types : NULL;
    sl->batch.cu_seqlens = sl->cu;
    sl->batch.pool_skip = sl->has_skip ? sl->skip : NULL;
    sl->batch.out = sl->out;
    sl->batch.tok_out = sl->has_tok ? sl->tok : NULL;
    s->inflight++;
}

static void finish_req(sched_req *r, uint64_t now) {
    r->fired = 1;
    if (r->status == 0 && r->cancelled) r->status = SCHED_CANCELLED;
    r->queue_ns = r->t_start ? r->t_start - r->t_submit : now - r->t_submit;
    r->infer_ns = r->t_start ? now - r->t_start : 0;
}

/* A batch came back (status 0 = ok).  Copies vectors out, then fires the
 * callbacks of requests that are now complete, outside the lock. */
static void complete_slot(sched *s, sched_slot *sl, int status, const char *why) {
    uint64_t now = posy_now_ns();
    int dim = s->eng.dim, n = sl->batch.n_seqs;
    if (status == 0)
        for (int i = 0; i < n; i++) {
            sched_entry *e = &sl->entries[i];
            memcpy(e->req->out + (size_t)e->seq * dim, sl->out + (size_t)i * dim, (size_t)dim * sizeof(float));
        }
    if (s->opts.hook.on_batch)
        s->opts.hook.on_batch(s->opts.hook.user, n, sl->batch.n_tokens, now - sl->t_start);
    sched_req *fire = NULL;  /* singly linked through ->next (free: not queued) */
    pthread_mutex_lock(&s->mu);
    s->seqs_run += (uint64_t)n;
    for (int i = 0; i < n; i++) {
        sched_req *r = sl->entries[i].req;
        r->running--;
        r->finished++;
        if (status != 0 && r->status == 0) {
            r->status = status;
            snprintf(r->msg, sizeof r->msg, "%s", why);
            if (r->queued) queue_unlink(s, r);   /* a failed request stops here */
        }
        int done = r->running == 0 && !r->queued &&
                   (r->finished == r->n_seqs || r->cancelled || r->status != 0);
        /* running reaches 0 at the request's last entry in this batch, so a
         * request is listed at most once; it is off the queue, so ->next is free. */
        if (done) {
            finish_req(r, now);
            r->next = fire;
            fire = r;
            s->outstanding--;
        }
    }
    sl->busy = 0;
    s->inflight--;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    while (fire) {
        sched_req *nx = fire->next;
        fire->next = NULL;
        fire->done(fire, fire->user);
        fire = nx;
    }
}

static sched_slot *free_slot(sched *s) {
    for (int i = 0; i < SCHED_SLOTS; i++)
        if (!s->slots[i].busy) return &s->slots[i];
    return NULL;
}

/* Hand results from the engine to their slots (tag = slot index). */
static void collect(sched *s, const posy_result *done, int n) {
    for (int i = 0; i < n; i++) {
        uint64_t tag = done[i].tag;
        if (tag >= SCHED_SLOTS || !s->slots[tag].busy) {
            POSY_ERROR("scheduler: engine returned unknown batch tag %llu", (unsigned long long)tag);
            continue;
        }
        complete_slot(s, &s->slots[tag], done[i].status,
                      done[i].status ? "the engine failed on this batch" : "");
    }
}

/* The step loop: submit a batch whenever one can be formed and a slot is
 * free.  With batches in flight and nothing to submit, an asynchronous
 * engine is polled (step(NULL)) every SCHED_POLL_US while new requests are
 * awaited, so a request that arrives while the device is busy is packed and
 * submitted at once rather than after the running batch; with every slot
 * busy the loop blocks in wait().  (The CPU engine finishes each batch inside
 * step(), so for it nothing is ever in flight here.)  Exits once closing and
 * nothing is queued or in flight.
 *
 * The poll period bounds how late a finished batch is noticed, so it is
 * part of every query's latency: with 200 us, one-connection requests on
 * an H200 took 484 us at p50 for a 130 us forward.  20 us costs a
 * cudaEventQuery per wake on this thread while the GPU is busy, nothing
 * when idle; the thread's timer slack is lowered to match (Linux). */
#define SCHED_POLL_US 20

static void wait_for_work(sched *s) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += SCHED_POLL_US * 1000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

/* Copy the engine's counters (read on this, the engine's thread) where
 * other threads can read them under the lock. */
static void refresh_engine_stats(sched *s) {
    if (!s->eng.stats) return;
    posy_engine_stats st;
    s->eng.stats(s->eng.ctx, &st);
    pthread_mutex_lock(&s->mu);
    s->eng_stats = st;
    pthread_mutex_unlock(&s->mu);
}

/* Spinning instead of sleeping: a thread that sleeps between polls is
 * woken late twice over -- the timed wait's own granularity, and on an idle
 * many-core host the CPU's exit from a deep idle state, tens of
 * microseconds each, which a one-query GPU request (a ~60 us forward)
 * pays in full.  Within spin_ns of its last submission or completion the
 * step thread polls without sleeping, pausing ~1 us between polls so that
 * submitters get the lock (`--busy-poll-us`, docs/SERVE.md; on an H100
 * host it took a served query's queue time from 15 to 1 us). */
static void *sched_loop(void *arg) {
    sched *s = arg;
    posy_result done[SCHED_SLOTS];
#ifdef __linux__
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL); /* 1 us: the default 50 us would dwarf SCHED_POLL_US */
#endif
    uint64_t spin_until = 0;   /* busy-poll instead of sleeping until then (spin_ns) */
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int spinning = s->spin_ns && posy_now_ns() < spin_until;
        if (spinning && !s->head && s->inflight == 0 && !s->closing) {   /* idle: look again soon */
            pthread_mutex_unlock(&s->mu);
            posy_spin_pause();
            continue;
        }
        while (!s->head && s->inflight == 0 && !s->closing) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->head && s->inflight == 0) {   /* closing and drained */
            pthread_mutex_unlock(&s->mu);
            break;
        }
        int poll_soon = 0;   /* in flight, nothing queued: a short wait, or a spin outside the lock */
        if (!s->head && !spinning) wait_for_work(s);
        else if (!s->head) poll_soon = 1;
        sched_slot *sl = s->head ? free_slot(s) : NULL;
        if (sl) form_batch(s, sl, posy_now_ns());
        int all_busy = s->inflight == SCHED_SLOTS && !sl;
        pthread_mutex_unlock(&s->mu);
        if (poll_soon && !sl) posy_spin_pause();
        int n;
        posy_err err;
        posy_err_clear(&err);
        if (sl) {
            sl->batch.tag = (uint64_t)(sl - s->slots);
            n = s->eng.step(s->eng.ctx, &sl->batch, done, SCHED_SLOTS, &err);
            if (n < 0) {
                POSY_WARN("scheduler: engine rejected a batch of %d sequences: %s", sl->batch.n_seqs, err.msg);
                complete_slot(s, sl, err.code ? (int)err.code : POSY_E_INTERNAL,
                              err.msg[0] ? err.msg : "the engine rejected the batch");
                continue;
            }
        } else if (all_busy) {
            n = s->eng.wait(s->eng.ctx, done, SCHED_SLOTS);
        } else {
            n = s->eng.step(s->eng.ctx, NULL, done, SCHED_SLOTS, &err);
            if (n < 0) n = 0;
        }
        /* before the callbacks, so a response's batch is in the next scrape */
        if (sl || n > 0) refresh_engine_stats(s);
        collect(s, done, n);
        if (s->spin_ns && (sl || n > 0)) spin_until = posy_now_ns() + s->spin_ns;
    }
    return NULL;
}

sched *sched_open(const sched_engine *eng, const sched_opts *opts, posy_err *err) {
    if (opts->max_batch_tokens <= 0 || opts->max_batch_seqs <= 0 || opts->max_concurrent <= 0 || eng->dim <= 0) {
        posy_err_set(err, POSY_E_INVALID, "scheduler: max_batch_tokens, max_batch_seqs, max_concurrent and dim must be positive");
        return NULL;
    }
    sched *s = calloc(1, sizeof *s);
    if (!s) goto nomem;
    s->eng = *eng;
    s->opts = *opts;
    s->spin_ns = opts->spin_us > 0 && opts->spin_us <= 1000000 ? (uint64_t)opts->spin_us * 1000u : 0;
    for (int i = 0; i < SCHED_SLOTS; i++) {
        sched_slot *sl = &s->slots[i];
        sl->ids = malloc((size_t)opts->max_batch_tokens * sizeof(int32_t));
        sl->types = malloc((size_t)opts->max_batch_tokens * sizeof(int32_t));
        sl->cu = malloc((size_t)(opts->max_batch_seqs + 1) * sizeof(int32_t));
        sl->skip = malloc((size_t)opts->max_batch_seqs * sizeof(int32_t));
        sl->out = malloc((size_t)opts->max_batch_seqs * (size_t)eng->dim * sizeof(float));
        sl->entries = malloc((size_t)opts->max_batch_seqs * sizeof(sched_entry));
        sl->tok = malloc((size_t)opts->max_batch_seqs * sizeof *sl->tok);
        if (!sl->ids || !sl->types || !sl->cu || !sl->skip || !sl->out || !sl->entries || !sl->tok) goto nomem;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    /* What the engine did before serving (--warmup's batches) shows before
     * the first request; no other thread drives the engine yet. */
    refresh_engine_stats(s);
    if (pthread_create(&s->thread, NULL, sched_loop, s) != 0) {
        posy_err_set(err, POSY_E_INTERNAL, "scheduler: cannot start the step thread");
        sched_close(s);
        return NULL;
    }
    s->thread_started = 1;
    return s;
nomem:
    posy_err_set(err, POSY_E_NOMEM, "scheduler: out of memory for %d-token batches", opts->max_batch_tokens);
    sched_close(s);
    return NULL;
}

void sched_close(sched *s) {
    if (!s) return;
    if (s->thread_started) {
        pthread_mutex_lock(&s->mu);
        s->closing = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
    }
    for (int i = 0; i < SCHED_SLOTS; i++) {
        free(s->slots[i].ids);
        free(s->slots[i].types);
        free(s->slots[i].cu);
        free(s->slots[i].skip);
        free(s->slots[i].out);
        free(s->slots[i].entries);
        free(s->slots[i].tok);
    }
    free(s);
}

static int check_req(const sched *s, const sched_req *r, posy_err *err) {
    if (r->n_seqs <= 0 || !r->cu_seqlens || !r->out || !r->done)
        return posy_err_set(err, POSY_E_INVALID, "a request needs at least one sequence, an output buffer and a callback");
    if (r->cu_seqlens[0] != 0) return posy_err_set(err, POSY_E_INVALID, "cu_seqlens[0] must be 0");
    if (!r->ids && r->cu_seqlens[r->n_seqs] != 0) return posy_err_set(err, POSY_E_INVALID, "a request needs its ids");
    if (r->tok_out && !s->eng.tok_dim)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "this model gives no token embeddings");
    for (int i = 0; i < r->n_seqs; i++) {
        int len = seq_len(r, i);
        if (len < 0 || (len == 0 && !s->eng.allow_empty))
            return posy_err_set(err, POSY_E_INVALID, "sequence %d is empty", i);
        if (len > s->opts.max_batch_tokens)
            return posy_err_set(err, POSY_E_TOO_LONG, "sequence %d has %d tokens, more than max_batch_tokens (%d)",
                                i, len, s->opts.max_batch_tokens);
        if (r->pool_skip && (r->pool_skip[i] < 0 || (len > 0 && r->pool_skip[i] >= len) || (len == 0 && r->pool_skip[i])))
            return posy_err_set(err, POSY_E_INVALID, "sequence %d: pool skip %d is outside [0, %d)", i,
                                r->pool_skip[i], len);
    }
    return 0;
}

int sched_submit(sched *s, sched_req *r, posy_err *err) {
    int rc = check_req(s, r, err);
    if (rc) return rc;
    r->status = 0;
    r->msg[0] = '\0';
    r->prev = r->next = NULL;
    r->next_seq = r->running = r->finished = r->cancelled = r->fired = 0;
    r->queue_ns = r->infer_ns = r->t_start = 0;
    r->t_submit = posy_now_ns();
    pthread_mutex_lock(&s->mu);
    if (s->closing) rc = posy_err_set(err, POSY_E_UNSUPPORTED, "the server is shutting down");
    else if (s->outstanding >= s->opts.max_concurrent)
        rc = posy_err_set(err, POSY_E_BUSY, "too many concurrent requests (max_concurrent %d)", s->opts.max_concurrent);
    if (rc) {
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    r->queued = 1;
    r->prev = s->tail;
    if (s->tail) s->tail->next = r; else s->head = r;
    s->tail = r;
    s->outstanding++;
    s->queued_seqs += r->n_seqs;
    s->queued_tokens += r->cu_seqlens[r->n_seqs];
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

void sched_cancel(sched *s, sched_req *r) {
    int fire = 0;
    pthread_mutex_lock(&s->mu);
    if (!r->cancelled && !r->fired) {
        r->cancelled = 1;
        if (r->queued) {
            s->seqs_dropped += (uint64_t)(r->n_seqs - r->next_seq);
            queue_unlink(s, r);
        }
        if (r->running == 0) {
            finish_req(r, posy_now_ns());
            s->outstanding--;
            fire = 1;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (fire) r->done(r, r->user);
}

void sched_get_depth(sched *s, sched_depth *d) {
    pthread_mutex_lock(&s->mu);
    d->requests = s->outstanding;
    d->queued_seqs = s->queued_seqs;
    d->queued_tokens = s->queued_tokens;
    d->seqs_run = s->seqs_run;
    d->seqs_dropped = s->seqs_dropped;
    pthread_mutex_unlock(&s->mu);
}

int sched_dim(const sched *s) { return s->eng.dim; }
int sched_tok_dim(const sched *s) { return s->eng.tok_dim; }

int sched_get_engine_stats(sched *s, posy_engine_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->eng_stats;
    pthread_mutex_unlock(&s->mu);
    return s->eng.stats ? 0 : -1;
}

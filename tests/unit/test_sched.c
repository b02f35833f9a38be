/* test_sched: the scheduler against a fake engine.
 *
 * The fake records every batch it is given (sequence lengths and first ids),
 * writes for each sequence a vector derived from its own ids (so cross-talk
 * between requests would show), can hold a batch until the test releases it
 * (to make batch composition deterministic), and can run asynchronously like
 * the CUDA engine (step hands nothing back; wait does).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "posy_test.h"
#include "sched_core.h"

#define DIM 4
#define MAXB 64   /* batches recorded; each array has one spare row for the rest */

typedef struct fake {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int hold;                 /* hold the next step until released */
    int held;                 /* a step is being held */
    int async;                /* finish batches in wait(), not step() */
    int fail_first_id;        /* reject a batch whose first id is this (0 = never) */
    int nb;                   /* batches seen */
    int lens[MAXB + 1][16];
    int nseq[MAXB + 1];
    int first_ids[MAXB + 1][16];
    uint64_t pending[8];
    int npending, max_pending;
    int polls;               /* step(NULL) calls */
    int hold_done;           /* async: finish nothing until released */
    int has_types[MAXB + 1];     /* the batch carried type ids */
    int types[MAXB + 1][32];     /* its first type ids */
    int tokens;              /* tokens seen, reported as the engine's counter */
    int has_skip[MAXB + 1];      /* the batch carried pool skips */
    int skips[MAXB + 1][16];     /* its pool skips */
    int has_tok[MAXB + 1];       /* the batch asked for token states */
} fake;

#define TDIM 2   /* the fake's token state: (id, position in its sequence) */

static void vec_for(const int32_t *ids, int len, float *out) {
    for (int k = 0; k < DIM; k++) out[k] = 0;
    for (int j = 0; j < len; j++) out[j % DIM] += (float)ids[j] * (float)(j + 1);
}

static int fake_wait(void *ctx, posy_result *done, int max_done);
static int fake_take(fake *f, posy_result *done, int max_done);

static int fake_step(void *ctx, const posy_batch *b, posy_result *done, int max_done, posy_err *err) {
    fake *f = ctx;
    if (!b) {   /* a poll: hand back what finished, like the CUDA engine */
        pthread_mutex_lock(&f->mu);
        f->polls++;
        int n = f->hold_done ? 0 : fake_take(f, done, max_done);
        pthread_mutex_unlock(&f->mu);
        return n;
    }
    pthread_mutex_lock(&f->mu);
    if (f->fail_first_id && b->ids[0] == f->fail_first_id) {
        pthread_mutex_unlock(&f->mu);
        return -1 + 0 * posy_err_set(err, POSY_E_INVALID, "fake: rejected");
    }
    int i = f->nb++;
    f->tokens += b->n_tokens;
    /* batches past MAXB are counted, and recorded over one spare row that no test reads:
     * test_close_drains sees up to 120 when the step thread packs while requests are still being submitted */
    if (i > MAXB) i = MAXB;
    f->nseq[i] = b->n_seqs;
    f->has_types[i] = b->type_ids != NULL;
    for (int t = 0; b->type_ids && t < b->n_tokens && t < 32; t++) f->types[i][t] = b->type_ids[t];
    f->has_skip[i] = b->pool_skip != NULL;
    for (int s = 0; s < b->n_seqs && s < 16; s++) {
        f->skips[i][s] = b->pool_skip ? b->pool_skip[s] : -1;
        f->lens[i][s] = b->cu_seqlens[s + 1] - b->cu_seqlens[s];
        f->first_ids[i][s] = b->ids[b->cu_seqlens[s]];
    }
    if (f->hold) {
        f->held = 1;
        pthread_cond_broadcast(&f->cv);
        while (f->hold) pthread_cond_wait(&f->cv, &f->mu);
        f->held = 0;
    }
    pthread_mutex_unlock(&f->mu);
    for (int s = 0; s < b->n_seqs; s++)
        vec_for(b->ids + b->cu_seqlens[s], b->cu_seqlens[s + 1] - b->cu_seqlens[s], b->out + s * DIM);
    f->has_tok[i] = b->tok_out != NULL;
    for (int s = 0; b->tok_out && s < b->n_seqs; s++)
        for (int t = b->cu_seqlens[s]; b->tok_out[s] && t < b->cu_seqlens[s + 1]; t++) {
            b->tok_out[s][(t - b->cu_seqlens[s]) * TDIM] = (float)b->ids[t];
            b->tok_out[s][(t - b->cu_seqlens[s]) * TDIM + 1] = (float)(t - b->cu_seqlens[s]);
        }
    if (f->async) {
        pthread_mutex_lock(&f->mu);
        f->pending[f->npending++] = b->tag;
        if (f->npending > f->max_pending) f->max_pending = f->npending;
        pthread_mutex_unlock(&f->mu);
        return 0;
    }
    done[0].tag = b->tag;
    done[0].status = 0;
    return 1;
}

/* Blocking, like posy_engine_wait: returns once batches are handed back. */
static int fake_wait(void *ctx, posy_result *done, int max_done) {
    fake *f = ctx;
    pthread_mutex_lock(&f->mu);
    while (f->hold_done) pthread_cond_wait(&f->cv, &f->mu);
    int n = fake_take(f, done, max_done);
    pthread_mutex_unlock(&f->mu);
    return n;
}

/* Hand back pending batches (mutex held). */
static int fake_take(fake *f, posy_result *done, int max_done) {
    int n = 0;
    while (n < f->npending && n < max_done) {
        done[n].tag = f->pending[n];
        done[n].status = 0;
        n++;
    }
    memmove(f->pending, f->pending + n, (size_t)(f->npending - n) * sizeof f->pending[0]);
    f->npending -= n;
    return n;
}

/* The engine's counters: batches and tokens submitted so far. */
static void fake_stats(void *ctx, posy_engine_stats *out) {
    fake *f = ctx;
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&f->mu);
    out->batches = (uint64_t)f->nb;
    out->tokens = (uint64_t)f->tokens;
    pthread_mutex_unlock(&f->mu);
}

static void fake_init(fake *f, sched_engine *se) {
    memset(f, 0, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    se->ctx = f;
    se->dim = DIM;
    se->step = fake_step;
    se->wait = fake_wait;
    se->stats = fake_stats;
    se->allow_empty = 0;
    se->tok_dim = TDIM;
}

static void fake_hold(fake *f) { pthread_mutex_lock(&f->mu); f->hold = 1; pthread_mutex_unlock(&f->mu); }
static void fake_wait_held(fake *f) {
    pthread_mutex_lock(&f->mu);
    while (!f->held) pthread_cond_wait(&f->cv, &f->mu);
    pthread_mutex_unlock(&f->mu);
}
/* Up to a second for n batches to be pending in the async fake (read under its lock: a batch is
 * counted in nb before it is pending). */
static void fake_wait_pending(fake *f, int n) {
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&f->mu);
        int p = f->npending;
        pthread_mutex_unlock(&f->mu);
        if (p >= n) return;
        usleep(200);
    }
}
static void fake_release(fake *f) {
    pthread_mutex_lock(&f->mu);
    f->hold = 0;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

/* A test request: n sequences of given lengths, ids base*100 + position. */
typedef struct treq {
    sched_req r;
    int32_t ids[256], cu[17];
    float out[16 * DIM];
    atomic_int fired;
} treq;

static void on_done(sched_req *r, void *user) { atomic_fetch_add(&((treq *)user)->fired, 1); }

static void treq_make(treq *t, int base, int n, const int *lens) {
    memset(t, 0, sizeof *t);
    t->cu[0] = 0;
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < lens[i]; j++) t->ids[t->cu[i] + j] = base * 100 + i * 10 + j + 1;
        t->cu[i + 1] = t->cu[i] + lens[i];
    }
    t->r.ids = t->ids;
    t->r.cu_seqlens = t->cu;
    t->r.n_seqs = n;
    t->r.out = t->out;
    t->r.done = on_done;
    t->r.user = t;
}

static void wait_fired(treq *t) { while (!atomic_load(&t->fired)) usleep(200); }

/* Every sequence's vector equals the one computed from its own ids. */
static int treq_outputs_ok(const treq *t) {
    float want[DIM];
    for (int i = 0; i < t->r.n_seqs; i++) {
        vec_for(t->ids + t->cu[i], t->cu[i + 1] - t->cu[i], want);
        if (memcmp(want, t->out + i * DIM, sizeof want)) return 0;
    }
    return 1;
}

static int test_spin_us;   /* --busy-poll-us of the schedulers opened (test_busy_poll) */

static sched *open_s(sched_engine *se, int tok, int seqs, int conc) {
    sched_opts o = {.max_batch_tokens = tok, .max_batch_seqs = seqs, .max_concurrent = conc, .spin_us = test_spin_us};
    posy_err err;
    sched *s = sched_open(se, &o, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    return s;
}

static void test_order_and_budgets(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    sched *s = open_s(&se, 12, 3, 100);
    static treq x, a, b, c;
    posy_err err;
    fake_hold(&f);
    treq_make(&x, 9, 1, (int[]){1});
    CHECK_EQ_INT(sched_submit(s, &x.r, &err), 0);
    fake_wait_held(&f);                       /* batch 0 = x, held */
    treq_make(&a, 1, 4, (int[]){4, 4, 4, 2});
    treq_make(&b, 2, 1, (int[]){10});
    treq_make(&c, 3, 2, (int[]){3, 3});
    CHECK_EQ_INT(sched_submit(s, &a.r, &err), 0);
    CHECK_EQ_INT(sched_submit(s, &b.r, &err), 0);
    CHECK_EQ_INT(sched_submit(s, &c.r, &err), 0);
    sched_depth d; sched_get_depth(s, &d);
    CHECK_EQ_INT(d.requests, 4);
    CHECK_EQ_INT(d.queued_seqs, 7);
    CHECK_EQ_INT(d.queued_tokens, 30);
    fake_release(&f);
    wait_fired(&x); wait_fired(&a); wait_fired(&b); wait_fired(&c);
    /* 12 tokens / 3 seqs budgets: [a0 a1 a2] (12 tokens, 3 seqs), [a3 b0] (2+10),
     * [c0 c1]: c0 would make 15 tokens. */
    CHECK_EQ_INT(f.nb, 4);
    CHECK_EQ_INT(f.nseq[1], 3);
    CHECK_EQ_INT(f.first_ids[1][0], 101); CHECK_EQ_INT(f.first_ids[1][2], 121);
    CHECK_EQ_INT(f.nseq[2], 2); CHECK_EQ_INT(f.first_ids[2][0], 131);
    CHECK_EQ_INT(f.lens[2][1], 10); CHECK_EQ_INT(f.first_ids[2][1], 201);
    CHECK_EQ_INT(f.nseq[3], 2); CHECK_EQ_INT(f.first_ids[3][1], 311);
    CHECK(treq_outputs_ok(&a) && treq_outputs_ok(&b) && treq_outputs_ok(&c) && treq_outputs_ok(&x));
    CHECK_EQ_INT(a.fired + b.fired + c.fired + x.fired, 4);
    CHECK_EQ_INT(a.r.status, 0);
    sched_get_depth(s, &d);
    CHECK_EQ_INT(d.requests + d.queued_seqs + d.queued_tokens, 0);
    sched_close(s);
}

static void test_seq_budget_packs_across_requests(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    sched *s = open_s(&se, 100, 3, 100);
    static treq x, r[5];
    posy_err err;
    fake_hold(&f);
    treq_make(&x, 9, 1, (int[]){1});
    sched_submit(s, &x.r, &err);
    fake_wait_held(&f);
    for (int i = 0; i < 5; i++) {
        treq_make(&r[i], i + 1, 1, (int[]){2 + i});
        CHECK_EQ_INT(sched_submit(s, &r[i].r, &err), 0);
    }
    fake_release(&f);
    for (int i = 0; i < 5; i++) wait_fired(&r[i]);
    CHECK_EQ_INT(f.nb, 3);                    /* [x] [r0 r1 r2] [r3 r4] */
    CHECK_EQ_INT(f.nseq[1], 3);
    CHECK_EQ_INT(f.first_ids[1][0], 101); CHECK_EQ_INT(f.first_ids[1][1], 201); CHECK_EQ_INT(f.first_ids[1][2], 301);
    CHECK_EQ_INT(f.nseq[2], 2);
    for (int i = 0; i < 5; i++) CHECK(treq_outputs_ok(&r[i]));
    sched_close(s);
}

/* Type ids travel with their sequences; requests without them read as
 * zeros in a batch that has some, and a batch with none passes NULL. */
static void test_type_ids(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    sched *s = open_s(&se, 100, 3, 100);
    static treq x, a, b, c;
    static const int32_t btypes[] = {1, 0, 1};
    posy_err err;
    fake_hold(&f);
    treq_make(&x, 9, 1, (int[]){1});
    CHECK_EQ_INT(sched_submit(s, &x.r, &err), 0);
    fake_wait_held(&f);                       /* batch 0 = x, held */
    treq_make(&a, 1, 2, (int[]){2, 2});
    treq_make(&b, 2, 1, (int[]){3});
    b.r.type_ids = btypes;
    treq_make(&c, 3, 1, (int[]){2});
    CHECK_EQ_INT(sched_submit(s, &a.r, &err), 0);
    CHECK_EQ_INT(sched_submit(s, &b.r, &err), 0);
    CHECK_EQ_INT(sched_submit(s, &c.r, &err), 0);
    fake_release(&f);
    wait_fired(&a); wait_fired(&b); wait_fired(&c);
    CHECK_EQ_INT(f.nb, 3);                    /* [x] [a0 a1 b0] [c0] */
    CHECK_EQ_INT(f.has_types[0], 0);
    CHECK_EQ_INT(f.has_types[1], 1);
    static const int want[] = {0, 0, 0, 0, 1, 0, 1};
    for (int t = 0; t < 7; t++) CHECK_EQ_INT(f.types[1][t], want[t]);
    CHECK_EQ_INT(f.has_types[2], 0);
    CHECK(treq_outputs_ok(&a) && treq_outputs_ok(&b) && treq_outputs_ok(&c));
    sched_close(s);
}

/* Pool skips travel with their sequences, also when a request's sequences
 * land in two batches; sequences of requests without skips read 0 in a
 * batch that has some; a batch with none passes NULL; a skip outside
 * [0, length) is refused at submit. */
/* Four requests a-d (seqs 2+2, 3+2, 2, 1+5) queued behind a held batch
 * [x], then run with 3 sequences a batch (of one kind: [x] [a0 a1 b0]
 * [b1 c0 d0] [d1] when all are plain); `batches` the count expected. */
static void abcd_make(treq *a, treq *b, treq *c, treq *d) {
    treq_make(a, 1, 2, (int[]){2, 2});
    treq_make(b, 2, 2, (int[]){3, 2});
    treq_make(c, 3, 1, (int[]){2});
    treq_make(d, 4, 2, (int[]){1, 5});
}

static void abcd_run(fake *f, sched *s, treq *x, treq *a, treq *b, treq *c, treq *d, int batches) {
    posy_err err;
    fake_hold(f);
    treq_make(x, 9, 1, (int[]){1});
    CHECK_EQ_INT(sched_submit(s, &x->r, &err), 0);
    fake_wait_held(f);                        /* batch 0 = x, held */
    treq *q[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(sched_submit(s, &q[i]->r, &err), 0);
    fake_release(f);
    for (int i = 0; i < 4; i++) wait_fired(q[i]);
    CHECK_EQ_INT(f->nb, batches);
}

static void test_pool_skip(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    sched *s = open_s(&se, 100, 3, 100);
    static treq x, a, b, c, d, e;
    static const int32_t bskip[] = {2, 1}, dskip[] = {0, 3};
    posy_err err;
    abcd_make(&a, &b, &c, &d);
    b.r.pool_skip = bskip;
    d.r.pool_skip = dskip;
    abcd_run(&f, s, &x, &a, &b, &c, &d, 4);
    CHECK_EQ_INT(f.has_skip[0], 0);
    CHECK_EQ_INT(f.has_skip[1], 1);
    CHECK_EQ_INT(f.first_ids[1][2], 201);
    CHECK_EQ_INT(f.skips[1][0], 0); CHECK_EQ_INT(f.skips[1][1], 0); CHECK_EQ_INT(f.skips[1][2], 2);
    CHECK_EQ_INT(f.has_skip[2], 1);
    CHECK_EQ_INT(f.first_ids[2][0], 211); CHECK_EQ_INT(f.first_ids[2][2], 401);
    CHECK_EQ_INT(f.skips[2][0], 1); CHECK_EQ_INT(f.skips[2][1], 0); CHECK_EQ_INT(f.skips[2][2], 0);
    CHECK_EQ_INT(f.has_skip[3], 1);
    CHECK_EQ_INT(f.first_ids[3][0], 411); CHECK_EQ_INT(f.skips[3][0], 3);
    CHECK(treq_outputs_ok(&a) && treq_outputs_ok(&b) && treq_outputs_ok(&c) && treq_outputs_ok(&d));
    static const int32_t bad_len[] = {0, 2}, bad_neg[] = {-1, 0};
    treq_make(&e, 5, 2, (int[]){3, 2});
    e.r.pool_skip = bad_len;                  /* skip == length leaves nothing to pool */
    CHECK_EQ_INT(sched_submit(s, &e.r, &err), POSY_E_INVALID);
    CHECK_STR_CONTAINS(err.msg, "pool skip");
    e.r.pool_skip = bad_neg;
    CHECK_EQ_INT(sched_submit(s, &e.r, &err), POSY_E_INVALID);
    CHECK_EQ_INT(e.fired, 0);
    sched_close(s);
}

/* Token states: each request's land in its own buffer, in token order;
 * requests with them batch only with their own kind (FCFS kept: a batch
 * ends where the kind changes). */
static int tok_ok(const treq *t, const float *tok) {
    for (int i = 0; i < t->r.n_seqs; i++)
        for (int j = t->cu[i]; j < t->cu[i + 1]; j++)
            if (tok[j * TDIM] != (float)t->ids[j] || tok[j * TDIM + 1] != (float)(j - t->cu[i])) return 0;
    return 1;
}

static void test_tok_out(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    sched *s = open_s(&se, 100, 3, 100);
    static treq x, a, b, c, d;
    static float btok[5 * TDIM], dtok[6 * TDIM];
    posy_err err;
    abcd_make(&a, &b, &c, &d);
    b.r.tok_out = btok;
    d.r.tok_out = dtok;
    abcd_run(&f, s, &x, &a, &b, &c, &d, 5);   /* [x] [a0 a1] [b0 b1] [c0] [d0 d1] */
    static const int want_tok[5] = {0, 0, 1, 0, 1}, want_first[5] = {901, 101, 201, 301, 401};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_INT(f.has_tok[i], want_tok[i]);
        CHECK_EQ_INT(f.first_ids[i][0], want_first[i]);
    }
    CHECK(tok_ok(&b, btok) && tok_ok(&d, dtok));
    CHECK(treq_outputs_ok(&a) && treq_outputs_ok(&b) && treq_outputs_ok(&c) && treq_outputs_ok(&d));
    sched_close(s);
    /* an engine without token states refuses the request, no callback */
    fake g; sched_engine se2; fake_init(&g, &se2);
    se2.tok_dim = 0;
    s = open_s(&se2, 100, 3, 100);
    static treq e;
    static float etok[4 * TDIM];
    treq_make(&e, 5, 1, (int[]){4});
    e.r.tok_out = etok;
    CHECK_EQ_INT(sched_submit(s, &e.r, &err), POSY_E_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "token embeddings");
    CHECK_EQ_INT(e.fired, 0);
    sched_close(s);
}

static void test_admission(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    sched *s = open_s(&se, 100, 8, 2);
    static treq a, b, c;
    posy_err err;
    fake_hold(&f);
    treq_make(&a, 1, 1, (int[]){3});
    treq_make(&b, 2, 1, (int[]){3});
    treq_make(&c, 3, 1, (int[]){3});
    CHECK_EQ_INT(sched_submit(s, &a.r, &err), 0);
    fake_wait_held(&f);
    CHECK_EQ_INT(sched_submit(s, &b.r, &err), 0);
    CHECK_EQ_INT(sched_submit(s, &c.r, &err), POSY_E_BUSY);
    CHECK_STR_CONTAINS(err.msg, "concurrent");
    fake_release(&f);
    wait_fired(&a); wait_fired(&b);
    CHECK_EQ_INT(c.fired, 0);                 /* refused: never called back */
    CHECK_EQ_INT(sched_submit(s, &c.r, &err), 0);
    wait_fired(&c);
    CHECK(treq_outputs_ok(&c));
    sched_close(s);
}

static void test_cancel(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    sched *s = open_s(&se, 100, 8, 100);
    static treq x, a, b;
    posy_err err;
    fake_hold(&f);
    treq_make(&x, 9, 2, (int[]){2, 2});
    CHECK_EQ_INT(sched_submit(s, &x.r, &err), 0);
    fake_wait_held(&f);
    treq_make(&a, 1, 3, (int[]){3, 3, 3});
    treq_make(&b, 2, 1, (int[]){3});
    sched_submit(s, &a.r, &err);
    sched_submit(s, &b.r, &err);
    sched_cancel(s, &a.r);                    /* queued: fires now */
    CHECK_EQ_INT(a.fired, 1);
    CHECK_EQ_INT(a.r.status, SCHED_CANCELLED);
    sched_cancel(s, &a.r);                    /* again: no second callback */
    sched_cancel(s, &x.r);                    /* running: fires when its batch returns */
    CHECK_EQ_INT(x.fired, 0);
    sched_depth d; sched_get_depth(s, &d);
    CHECK_EQ_INT(d.queued_seqs, 1);
    fake_release(&f);
    wait_fired(&x); wait_fired(&b);
    CHECK_EQ_INT(x.r.status, SCHED_CANCELLED);
    CHECK_EQ_INT(b.r.status, 0);
    CHECK_EQ_INT(f.nb, 2);                    /* [x0 x1] [b0]: nothing of a ran */
    CHECK_EQ_INT(f.nseq[1], 1); CHECK_EQ_INT(f.first_ids[1][0], 201);
    sched_cancel(s, &b.r);                    /* after completion: a no-op */
    CHECK_EQ_INT(a.fired + x.fired + b.fired, 3);
    sched_get_depth(s, &d);
    CHECK_EQ_INT((int)d.seqs_run, 3);         /* x0 x1 b0 */
    CHECK_EQ_INT((int)d.seqs_dropped, 3);     /* a0 a1 a2 */
    sched_close(s);
}

static void test_async_overlap(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    f.async = 1;
    sched *s = open_s(&se, 8, 8, 100);
    static treq r[6];
    posy_err err;
    fake_hold(&f);
    treq_make(&r[0], 1, 1, (int[]){8});
    sched_submit(s, &r[0].r, &err);
    fake_wait_held(&f);
    for (int i = 1; i < 6; i++) {
        treq_make(&r[i], i + 1, 2, (int[]){4, 4});
        sched_submit(s, &r[i].r, &err);
    }
    fake_release(&f);
    for (int i = 0; i < 6; i++) wait_fired(&r[i]);
    for (int i = 0; i < 6; i++) CHECK(treq_outputs_ok(&r[i]));
    CHECK_EQ_INT(f.nb, 6);
    CHECK_EQ_INT(f.max_pending, SCHED_SLOTS); /* a second batch was submitted while one ran */
    sched_close(s);
}

/* A request that arrives while an async engine runs a batch is packed and
 * submitted at once, not after that batch finishes. */
static void test_async_submits_while_running(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    f.async = 1;
    f.hold_done = 1;
    sched *s = open_s(&se, 64, 8, 100);
    static treq a, b;
    posy_err err;
    treq_make(&a, 1, 1, (int[]){5});
    treq_make(&b, 2, 1, (int[]){6});
    CHECK_EQ_INT(sched_submit(s, &a.r, &err), 0);
    fake_wait_pending(&f, 1);
    CHECK_EQ_INT(sched_submit(s, &b.r, &err), 0);
    fake_wait_pending(&f, 2);
    pthread_mutex_lock(&f.mu);
    int nb = f.nb, pending = f.npending, fired = a.fired + b.fired;
    f.hold_done = 0;
    pthread_cond_broadcast(&f.cv);
    pthread_mutex_unlock(&f.mu);
    CHECK_EQ_INT(nb, 2);                      /* b went in while a was still running */
    CHECK_EQ_INT(pending, 2);
    CHECK_EQ_INT(fired, 0);
    wait_fired(&a); wait_fired(&b);
    CHECK(treq_outputs_ok(&a) && treq_outputs_ok(&b));
    sched_close(s);
}

static void test_invalid_and_failure(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    sched *s = open_s(&se, 10, 4, 100);
    static treq a, b, c;
    posy_err err;
    treq_make(&a, 1, 1, (int[]){11});
    CHECK_EQ_INT(sched_submit(s, &a.r, &err), POSY_E_TOO_LONG);
    treq_make(&a, 1, 2, (int[]){3, 0});
    CHECK_EQ_INT(sched_submit(s, &a.r, &err), POSY_E_INVALID);
    a.r.n_seqs = 0;
    CHECK_EQ_INT(sched_submit(s, &a.r, &err), POSY_E_INVALID);
    /* An engine failure fails the requests of that batch, and only those. */
    f.fail_first_id = 401;
    treq_make(&b, 4, 2, (int[]){5, 5});
    CHECK_EQ_INT(sched_submit(s, &b.r, &err), 0);
    wait_fired(&b);
    CHECK_EQ_INT(b.r.status, POSY_E_INVALID);
    CHECK_STR_CONTAINS(b.r.msg, "rejected");
    treq_make(&c, 5, 1, (int[]){5});
    CHECK_EQ_INT(sched_submit(s, &c.r, &err), 0);
    wait_fired(&c);
    CHECK_EQ_INT(c.r.status, 0);
    CHECK(treq_outputs_ok(&c));
    CHECK_EQ_INT(a.fired, 0);
    sched_close(s);
    /* an engine that embeds empty sequences (a static model) gets them, in order, each with its own vector */
    fake f2; sched_engine se2; fake_init(&f2, &se2);
    se2.allow_empty = 1;
    s = open_s(&se2, 10, 4, 100);
    static treq d;
    treq_make(&d, 6, 3, (int[]){3, 0, 2});
    CHECK_EQ_INT(sched_submit(s, &d.r, &err), 0);
    wait_fired(&d);
    CHECK_EQ_INT(d.r.status, 0);
    CHECK(treq_outputs_ok(&d));
    sched_close(s);
}

/* The engine's counters reach other threads through the scheduler's copy:
 * as they were at open (batches an engine ran before serving, as --warmup
 * does), then up to date by the time a request's callback fires; an engine
 * without counters reads as -1 and zeros. */
static void test_engine_stats(void) {
    fake w; sched_engine sw; fake_init(&w, &sw);
    w.nb = 4;                                 /* run before the scheduler opened */
    w.tokens = 40;
    sched *s = open_s(&sw, 16, 4, 100);
    posy_engine_stats st;
    CHECK_EQ_INT(sched_get_engine_stats(s, &st), 0);
    CHECK(st.batches == 4 && st.tokens == 40);
    sched_close(s);
    fake f; sched_engine se; fake_init(&f, &se);
    s = open_s(&se, 16, 4, 100);
    static treq r[3];
    posy_err err;
    CHECK_EQ_INT(sched_get_engine_stats(s, &st), 0);
    CHECK(st.batches == 0 && st.tokens == 0);
    for (int i = 0; i < 3; i++) {
        treq_make(&r[i], i + 1, 2, (int[]){3, 2 + i});
        CHECK_EQ_INT(sched_submit(s, &r[i].r, &err), 0);
        wait_fired(&r[i]);
        CHECK_EQ_INT(sched_get_engine_stats(s, &st), 0);
        CHECK_EQ_INT((int)st.batches, i + 1);
    }
    CHECK_EQ_INT((int)st.tokens, 5 + 6 + 7);
    sched_close(s);
    se.stats = NULL;
    s = open_s(&se, 16, 4, 100);
    treq_make(&r[0], 1, 1, (int[]){3});
    CHECK_EQ_INT(sched_submit(s, &r[0].r, &err), 0);
    wait_fired(&r[0]);
    st.batches = 7;
    CHECK_EQ_INT(sched_get_engine_stats(s, &st), -1);
    CHECK(st.batches == 0 && st.tokens == 0);
    sched_close(s);
}

static void test_close_drains(void) {
    fake f; sched_engine se; fake_init(&f, &se);
    sched *s = open_s(&se, 16, 2, 1000);
    static treq r[40];
    posy_err err;
    for (int i = 0; i < 40; i++) {
        treq_make(&r[i], i + 1, 3, (int[]){1 + i % 5, 2, 3});
        CHECK_EQ_INT(sched_submit(s, &r[i].r, &err), 0);
    }
    sched_close(s);                           /* returns only when all finished */
    for (int i = 0; i < 40; i++) {
        CHECK_EQ_INT(r[i].fired, 1);
        CHECK(treq_outputs_ok(&r[i]));
        CHECK(r[i].r.infer_ns > 0);
    }
}

/* The step thread busy-polling between steps (sched_opts.spin_us) keeps
 * every contract the sleeping one does: order, overlap, cancel, drain. */
static void test_busy_poll(void) {
    test_spin_us = 300;
    test_order_and_budgets();
    test_async_overlap();
    test_async_submits_while_running();
    test_cancel();
    test_close_drains();
    test_spin_us = 0;
}

TEST_MAIN(TEST(test_busy_poll), TEST(test_order_and_budgets), TEST(test_seq_budget_packs_across_requests), TEST(test_admission), TEST(test_type_ids), TEST(test_pool_skip), TEST(test_tok_out),
          TEST(test_cancel), TEST(test_async_overlap), TEST(test_async_submits_while_running), TEST(test_invalid_and_failure), TEST(test_engine_stats),
          TEST(test_close_drains))

/* sched_engines: the engines the step loop can drive.
 *
 * `posy`: the real engine, a direct forward of posy_engine_step/wait (and
 * posy_engine_get_stats for the counters in /metrics).
 * `noop`: for `posy serve --engine noop`, a benchmarking engine that skips
 * the model math but keeps everything else (tokenization, queueing,
 * batching, serialization): each sequence gets the same fixed unit vector,
 * whose values are ordinary floats so serialization costs what it would
 * with a real model.  It finishes a batch inside step(), like the CPU engine;
 * `delay_us` makes each batch take that long, so tests can hold requests in
 * the queue (admission, cancellation, draining) without a model.
 */
#include "sched_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int posy_step(void *ctx, const posy_batch *next, posy_result *done, int max_done, posy_err *err) {
    return posy_engine_step(ctx, next, done, max_done, err);
}

static int posy_wait(void *ctx, posy_result *done, int max_done) {
    return posy_engine_wait(ctx, done, max_done);
}

static void posy_stats(void *ctx, posy_engine_stats *out) { posy_engine_get_stats(ctx, out); }

void sched_engine_posy(sched_engine *se, posy_engine *e) {
    se->ctx = e;
    se->dim = posy_engine_info(e)->dim;
    se->step = posy_step;
    se->wait = posy_wait;
    se->stats = posy_stats;
    se->allow_empty = !strcmp(posy_engine_info(e)->arch, "static");
    se->tok_dim = posy_engine_info(e)->tok_dim;
}

typedef struct noop_engine {
    int dim;
    int delay_us;   /* pretend each batch takes this long (tests, benchmarks) */
    float *vec;
} noop_engine;

static int noop_step(void *ctx, const posy_batch *next, posy_result *done, int max_done, posy_err *err) {
    noop_engine *n = ctx;
    if (!next) return 0;
    if (n->delay_us > 0) usleep((useconds_t)n->delay_us);
    for (int i = 0; i < next->n_seqs; i++)
        memcpy(next->out + (size_t)i * n->dim, n->vec, (size_t)n->dim * sizeof(float));
    if (max_done < 1) return 0;
    done[0].tag = next->tag;
    done[0].status = 0;
    return 1;
}

static int noop_wait(void *ctx, posy_result *done, int max_done) { return 0; }

int sched_engine_noop(sched_engine *se, int dim, int delay_us, posy_err *err) {
    noop_engine *n = calloc(1, sizeof *n);
    float *v = n ? malloc((size_t)dim * sizeof(float)) : NULL;
    if (!v) {
        free(n);
        return posy_err_set(err, POSY_E_NOMEM, "noop engine: out of memory");
    }
    /* A fixed pseudo-random unit vector (LCG), so every run serializes the same bytes. */
    uint32_t x = 12345;
    double ss = 0;
    for (int i = 0; i < dim; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (float)((double)(x >> 8) / (double)(1u << 24) - 0.5);
        ss += (double)v[i] * v[i];
    }
    for (int i = 0; i < dim; i++) v[i] = (float)(v[i] / sqrt(ss));
    n->dim = dim;
    n->delay_us = delay_us;
    n->vec = v;
    se->ctx = n;
    se->dim = dim;
    se->step = noop_step;
    se->wait = noop_wait;
    se->stats = NULL;
    se->allow_empty = 0;
    se->tok_dim = 0;
    return 0;
}

void sched_engine_noop_free(sched_engine *se) {
    noop_engine *n = se->ctx;
    if (!n) return;
    free(n->vec);
    free(n);
    se->ctx = NULL;
}

/* eng_warmup: posy_engine_opts.warmup -- every CUDA token bucket run twice
 * at open, so that no request pays for a bucket's first sight.
 *
 * Why: the CUDA backend captures graphs lazily (a bucket's first batch runs
 * eagerly, its second is captured), and a first run also loads the
 * bucket's kernels and races GEMM candidates.  The step thread stalls for
 * that, and so does every request queued behind the batch: under load the
 * p99 of a freshly started server is those stalls.  Lazy remains the
 * default (start-up does no captures); --warmup trades a longer start-up
 * for flat latency from the first request.
 *
 * How: a synthetic batch a bucket (every token id 0, which every
 * vocabulary has; sequences as long as the model and the sequence budget
 * allow) goes through posy_engine_step twice, so the counters behind
 * /metrics stay consistent (eager runs == buckets seen, eager + replays ==
 * batches).  Nothing to warm on the CPU: a log line says so.  (A CPU
 * batch at open would run on the opening thread, and libgomp keeps a
 * thread pool per master thread, so the scheduler's thread would start a
 * second one: tried on the 2-core VM, the first request went from 4-10 ms
 * to 4.5 ms but every later one from ~3 ms to ~5 ms.)
 */
#include <stdlib.h>

#include "eng_internal.h"
#include "posy_clock.h"
#include "posy_log.h"
#ifdef POSY_HAVE_CUDA
#include "cuda/eng_cu_backend.h"
#endif

#ifdef POSY_HAVE_CUDA
#define WARM_MAX_BUCKETS 64

/* Lengths for `tokens` tokens: as few sequences as the model's positions
 * allow, within the sequence budget; 0 sequences if it cannot be done. */
static int warm_shape(const posy_engine *e, int tokens, int32_t *cu) {
    const int maxlen = e->cfg.info.max_positions, maxs = e->opts.max_batch_seqs;
    int n = (tokens + maxlen - 1) / maxlen;
    if (n < 1 || n > maxs) return 0;
    for (int s = 0; s <= n; s++) cu[s] = (int32_t)((long long)tokens * s / n);
    return n;
}

/* One batch through step() and wait(); 0 or -1 with err set. */
static int warm_run(posy_engine *e, const posy_batch *b, posy_err *err) {
    posy_result r[8];
    int n = posy_engine_step(e, b, r, 8, err);
    if (n < 0) return -1;
    for (;;) {
        for (int i = 0; i < n; i++)
            if (r[i].status != 0)
                return posy_err_set(err, POSY_E_INTERNAL, "warm-up: a batch of %d tokens failed on the device (status %d)",
                                    b->n_tokens, r[i].status);
        if (posy_engine_inflight(e) == 0) return 0;
        n = posy_engine_wait(e, r, 8);
    }
}

#endif

int eng_warmup(posy_engine *e, posy_err *err) {
#ifdef POSY_HAVE_CUDA
    int buckets[WARM_MAX_BUCKETS];
    const int nb = eng_cuda_buckets(e, buckets, WARM_MAX_BUCKETS);
    if (nb > 0) {
        const int maxT = e->opts.max_batch_tokens, maxS = e->opts.max_batch_seqs;
        int32_t *ids = calloc((size_t)maxT, sizeof *ids);
        int32_t *cu = malloc(((size_t)maxS + 1) * sizeof *cu);
        float *out = malloc((size_t)maxS * (size_t)e->cfg.info.dim * sizeof *out);
        if (!ids || !cu || !out) {
            free(ids), free(cu), free(out);
            return posy_err_set(err, POSY_E_NOMEM, "warm-up: out of host memory for a %d-token batch", maxT);
        }
        const uint64_t t0 = posy_now_ns();
        int rc = 0, warmed = 0;
        for (int i = 0; i < nb && !rc; i++) {
            /* the largest bucket is maxT rounded up to 16 (eng_cu_model_open) */
            const int T = buckets[i] < maxT ? buckets[i] : maxT;
            const int n = warm_shape(e, T, cu);
            if (!n) {
                POSY_WARN("warm-up: bucket of %d tokens skipped (needs more than %d sequences of at most %d tokens)",
                          T, maxS, e->cfg.info.max_positions);
                continue;
            }
            posy_batch b = {.tag = (uint64_t)i, .n_seqs = n, .n_tokens = T, .ids = ids, .cu_seqlens = cu, .out = out};
            rc = warm_run(e, &b, err) || warm_run(e, &b, err);   /* first run, then the capture */
            warmed += !rc;
        }
        free(ids), free(cu), free(out);
        if (rc) return posy_err_wrap(err, "--warmup");
        posy_engine_stats st;
        posy_engine_get_stats(e, &st);
        POSY_INFO("warm-up: %d token buckets (%d..%d tokens) in %.0f ms: first runs %.0f ms, graph captures %.0f ms",
                  warmed, buckets[0], buckets[nb - 1], (posy_now_ns() - t0) * 1e-6, st.first_run_seconds * 1e3,
                  st.graph_capture_seconds * 1e3);
        return 0;
    }
#endif
    (void)err;
    POSY_INFO("warm-up: nothing to warm on the %s backend (no token buckets or graphs)", e->ops->name);
    return 0;
}

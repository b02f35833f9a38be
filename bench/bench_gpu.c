/* bench_gpu: the CUDA engine's speed on one model, printed as JSON lines
 * in the same shape as ../shared/bench/hf_peer.py so the two can be put
 * side by side (bench/bench_gpu.sh runs both in one call).
 *
 *   bench_gpu MODEL_DIR NAME      (a tests/cuda/make_models.py folder)
 *
 * - latency: one query of 16 and 64 tokens; per step the GPU time of the
 *   forward (CUDA events around the graph launch) and the wall time of
 *   step + wait including packing and both copies; then the same query
 *   submitted back to back ("back-to-back": the GPU time of the graph
 *   alone, as the peer times its replays, and each query's share of wall
 *   time);
 * - batch: equal lengths 128 and 512 at 256 .. 65536 tokens per step, and
 *   random lengths 16..512 filling the same budgets; steps are pipelined
 *   (submitted without waiting, up to the engine's staging slots), tokens/s
 *   from wall time over all steps;
 * - mixed: 64 sequences of random lengths 16..512 in one step (the peer's
 *   mixed case);
 * - saturation: the smallest tokens per step reaching 90% of the peak.
 * BENCH_POINT_TOKENS (default 3e6) sets the tokens timed per throughput
 * point (at least 12 steps, at most 2000); BENCH_LATENCY_ONLY=1 stops after
 * the latency rows; BENCH_POINTS="equal128:65536 random16-512:16384 ..."
 * times only those throughput points (pattern:tokens per step; no latency,
 * saturation or mixed rows), for A/B runs of kernel switches.
 * BENCH_MAX_TOKENS (default 65536, at most 262144) is the engine's
 * max-batch-tokens; above 65536 the sweep and BENCH_POINTS also take steps
 * of 131072 (and 262144) tokens, i.e. `posy serve --max-batch-tokens`
 * raised to match -- whether saturation lies past the default sweep.
 * With --once TOKENS it runs one eager forward of one query and exits, for
 * a kernel profiler (bench_gpu.sh runs it under ncu when present).
 * With --step TOKENS SEQLEN it runs a throughput step (TOKENS tokens in
 * sequences of SEQLEN) three times -- eager with GEMM tuning, capture,
 * replay -- and brackets only the replay with cudaProfilerStart/Stop, so
 * `ncu --profile-from-start off` times the kernels a saturated step really
 * runs (bench/profile_gpu.sh).
 * BENCH_TRACE=PREFIX (a build with -DENG_CU_TRACE): after each latency
 * row, the chain kernels' per-block timestamps of one more query
 * (eng_cu_trace.h; dev/cuda/chain_trace.py lays them out).
 * Token ids are random: speed does not depend on them.
 */
#include "gpu_harness.h"
#include "posy_clock.h"
#include <cuda_profiler_api.h>

static uint64_t rng = 42;
static int rnd(int lo, int hi) { /* [lo, hi] */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (int)((rng >> 33) % (uint64_t)(hi - lo + 1));
}

static void make(gh_batch *g, const int *lens, int k, int vocab, int H) {
    int T = 0;
    for (int i = 0; i < k; i++) T += lens[i];
    gh_seqs s;
    s.n = k;
    s.lens = (int32_t *)lens;
    s.off = (int32_t *)calloc((size_t)k + 1, 4);
    s.ids = (int32_t *)malloc((size_t)T * 4);
    for (int i = 0; i < k; i++) s.off[i + 1] = s.off[i] + lens[i];
    for (int t = 0; t < T; t++) s.ids[t] = rnd(1000, vocab - 1);
    int *idx = (int *)malloc((size_t)k * sizeof(int));
    for (int i = 0; i < k; i++) idx[i] = i;
    gh_batch_make(g, &s, idx, k, H, 0);
    free(idx); free(s.off); free(s.ids);
}

/* Run `steps` pipelined steps of batch g; returns wall seconds. */
static double pipelined(posy_engine *e, gh_batch *g, int steps) {
    posy_err err;
    posy_result r[8];
    int sub = 0, got = 0;
    const double t0 = posy_now_s();
    while (got < steps) {
        if (sub < steps) {
            if (e->ops->submit(e, &g->b, &err)) { fprintf(stderr, "submit: %s\n", err.msg); exit(1); }
            sub++;
        }
        got += e->ops->poll(e, r, 8, sub == steps);
    }
    return posy_now_s() - t0;
}

static void latency(posy_engine *e, const char *name, int L, int vocab, int H) {
    gh_batch g;
    make(&g, &L, 1, vocab, H);
    for (int i = 0; i < 5; i++) gh_run_sync(e, &g);
    eng_cu_stats a, b;
    eng_cuda_stats(e, &a);
    const int n = 300;
    const double t0 = posy_now_s();
    for (int i = 0; i < n; i++) gh_run_sync(e, &g);
    const double wall = posy_now_s() - t0;
    eng_cuda_stats(e, &b);
    printf("{\"kind\": \"latency\", \"model\": \"%s\", \"seq\": %d, \"batch\": 1, \"mode\": \"posy-cuda-graph\", "
           "\"gpu_us\": %.2f, \"wall_us\": %.2f}\n", name, L, (b.gpu_ms - a.gpu_ms) / n * 1e3,
           wall / n * 1e6);
    /* The same query submitted back to back (the staging slots keep the
     * stream full), as ../shared/bench/hf_peer.py times its graph replays:
     * here the GPU never waits between the start event and a graph the host
     * has not submitted yet, so gpu_us is the graph's own time; wall_us is
     * a query's share of the whole run (copies and packing included). */
    eng_cuda_stats(e, &a);
    const double wall_b2b = pipelined(e, &g, n);
    eng_cuda_stats(e, &b);
    printf("{\"kind\": \"latency\", \"model\": \"%s\", \"seq\": %d, \"batch\": 1, \"mode\": "
           "\"posy-cuda-graph-back-to-back\", \"gpu_us\": %.2f, \"wall_us\": %.2f}\n",
           name, L, (b.gpu_ms - a.gpu_ms) / n * 1e3, wall_b2b / n * 1e6);
    fflush(stdout);
    /* BENCH_TRACE=PREFIX in a -DENG_CU_TRACE build: the per-block stamps of
     * one more query (graph replay) to PREFIX-NAME-L.txt
     * (dev/cuda/chain_trace.py reads them) */
    const char *tp = getenv("BENCH_TRACE");
    if (tp && *tp) {
        char path[1024];
        snprintf(path, sizeof path, "%s-%s-%d.txt", tp, name, L);
        if (eng_cuda_trace_dump(NULL, 1) < 0) {
            fprintf(stderr, "bench_gpu: BENCH_TRACE needs a build with -DENG_CU_TRACE\n");
        } else {
            gh_run_sync(e, &g);
            fprintf(stderr, "bench_gpu: %d traced blocks in %s\n", eng_cuda_trace_dump(path, 1), path);
        }
    }
    gh_batch_free(&g);
}

static double throughput(posy_engine *e, const char *name, const char *pattern, int L, int tokens,
                         int vocab, int H) {
    int lens[4096], k = 0, T = 0;
    if (L > 0) {
        for (k = 0; k < tokens / L && k < 4096; k++) lens[k] = L;
        if (k == 0) lens[k++] = tokens;
    } else {
        while (k < 4096) {
            int l = rnd(16, 512);
            if (T + l > tokens) break;
            lens[k++] = l;
            T += l;
        }
        if (k == 0) lens[k++] = tokens;
    }
    gh_batch g;
    make(&g, lens, k, vocab, H);
    for (int i = 0; i < 3; i++) gh_run_sync(e, &g);
    /* tokens timed per point: 3M by default; BENCH_POINT_TOKENS for heavier models */
    const double point = getenv("BENCH_POINT_TOKENS") ? atof(getenv("BENCH_POINT_TOKENS")) : 3e6;
    int steps = (int)(point / g.b.n_tokens);
    if (steps < 12) steps = 12;
    if (steps > 2000) steps = 2000;
    eng_cu_stats a, b;
    eng_cuda_stats(e, &a);
    const double s = pipelined(e, &g, steps);
    eng_cuda_stats(e, &b);
    const double tps = (double)g.b.n_tokens * steps / s;
    printf("{\"kind\": \"batch\", \"model\": \"%s\", \"pattern\": \"%s\", \"seq\": %d, \"batch\": %d, "
           "\"tokens\": %d, \"steps\": %d, \"ms\": %.4f, \"gpu_ms\": %.4f, \"tok_per_s\": %.0f}\n",
           name, pattern, L, k, g.b.n_tokens, steps, s / steps * 1e3, (b.gpu_ms - a.gpu_ms) / steps, tps);
    fflush(stdout);
    gh_batch_free(&g);
    return tps;
}

int main(int argc, char **argv) {
    const int once = argc == 5 && !strcmp(argv[3], "--once");
    const int step = argc == 6 && !strcmp(argv[3], "--step");
    if (argc != 3 && !once && !step) {
        fprintf(stderr, "usage: %s MODEL_DIR NAME [--once TOKENS | --step TOKENS SEQLEN]\n", argv[0]);
        return 2;
    }
    posy_err err;
    const char *mt = getenv("BENCH_MAX_TOKENS");
    const int maxT = mt ? atoi(mt) : 65536;
    if (maxT < 65536 || maxT > 262144) {
        fprintf(stderr, "BENCH_MAX_TOKENS=%s: must be 65536..262144\n", mt);
        return 2;
    }
    posy_engine *e = gh_open(argv[1], once ? 4096 : maxT, maxT / 32, &err);
    if (!e) { fprintf(stderr, "open: %s\n", err.msg); return 1; }
    const int H = e->cfg.info.hidden, V = e->cfg.info.vocab;
    const char *name = argv[2];
    if (step) { /* one saturated step, only its replay inside the profiler range */
        const int T = atoi(argv[4]), L = atoi(argv[5]);
        if (T < 1 || T > maxT || L < 1 || L > T) { fprintf(stderr, "bad --step %d %d\n", T, L); return 2; }
        int *lens = (int *)malloc(sizeof(int) * (size_t)(T / L));
        for (int i = 0; i < T / L; i++) lens[i] = L;
        gh_batch g;
        make(&g, lens, T / L, V, H);
        int rc = gh_run_sync(e, &g) || gh_run_sync(e, &g);
        cudaProfilerStart();
        rc = rc || gh_run_sync(e, &g);
        cudaProfilerStop();
        gh_batch_free(&g);
        free(lens);
        e->ops->close(e);
        return rc ? 1 : 0;
    }
    if (once) { /* one eager forward of one query, for a profiler (ncu) */
        int L = atoi(argv[4]);
        gh_batch g;
        make(&g, &L, 1, V, H);
        int rc = gh_run_sync(e, &g);
        gh_batch_free(&g);
        e->ops->close(e);
        return rc ? 1 : 0;
    }
    const char *pts = getenv("BENCH_POINTS");
    if (pts) { /* only the named points */
        char buf[512];
        snprintf(buf, sizeof buf, "%s", pts);
        int rc = 0;
        for (char *sv = NULL, *tk = strtok_r(buf, " ,", &sv); tk; tk = strtok_r(NULL, " ,", &sv)) {
            char *colon = strchr(tk, ':');
            const int L = !strncmp(tk, "equal128:", 9) ? 128 : !strncmp(tk, "equal512:", 9) ? 512
                        : !strncmp(tk, "random16-512:", 13) ? 0 : -1;
            const int T = colon ? atoi(colon + 1) : 0;
            if (L < 0 || T < 1 || T > maxT || T < L) {
                fprintf(stderr, "BENCH_POINTS: bad point '%s' (pattern:tokens, pattern equal128, equal512 or "
                        "random16-512, tokens 1..%d)\n", tk, maxT);
                rc = 2;
                break;
            }
            *colon = 0;
            throughput(e, name, tk, L, T, V, H);
        }
        e->ops->close(e);
        return rc;
    }
    latency(e, name, 16, V, H);
    if (getenv("BENCH_LATENCY_ONLY")) latency(e, name, 32, V, H); /* where the one-query chain ends */
    latency(e, name, 64, V, H);
    if (getenv("BENCH_LATENCY_ONLY")) { e->ops->close(e); return 0; }
    const int budgets[] = {256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144};
    int nb = 0;
    while (nb < (int)(sizeof budgets / sizeof *budgets) && budgets[nb] <= maxT) nb++;
    const char *pats[] = {"equal128", "equal512", "random16-512"};
    const int Ls[] = {128, 512, 0};
    for (int p = 0; p < 3; p++) {
        double tps[16], peak = 0;
        for (int i = 0; i < nb; i++) {
            tps[i] = Ls[p] > budgets[i] ? 0 : throughput(e, name, pats[p], Ls[p], budgets[i], V, H);
            if (tps[i] > peak) peak = tps[i];
        }
        int sat = 0;
        for (int i = 0; i < nb && !sat; i++)
            if (tps[i] >= 0.9 * peak) sat = budgets[i];
        printf("{\"kind\": \"saturation\", \"model\": \"%s\", \"pattern\": \"%s\", \"peak_tok_per_s\": %.0f, "
               "\"tokens_at_90pct\": %d}\n", name, pats[p], peak, sat);
    }
    /* the peer's mixed case: 64 sequences of 16..512 tokens in one step */
    {
        int lens[64];
        for (int i = 0; i < 64; i++) lens[i] = rnd(16, 512);
        gh_batch g;
        make(&g, lens, 64, V, H);
        for (int i = 0; i < 3; i++) gh_run_sync(e, &g);
        eng_cu_stats a, b;
        eng_cuda_stats(e, &a);
        const int steps = 100;
        const double s = pipelined(e, &g, steps);
        eng_cuda_stats(e, &b);
        printf("{\"kind\": \"mixed\", \"model\": \"%s\", \"seqs\": 64, \"real_tokens\": %d, \"ms\": %.4f, "
               "\"gpu_ms\": %.4f, \"real_tok_per_s\": %.0f}\n", name, g.b.n_tokens, s / steps * 1e3,
               (b.gpu_ms - a.gpu_ms) / steps, g.b.n_tokens * steps / s);
        gh_batch_free(&g);
    }
    eng_cu_stats st;
    eng_cuda_stats(e, &st);
    printf("{\"kind\": \"engine\", \"model\": \"%s\", \"captures\": %llu, \"capture_ms\": %.1f, \"replays\": %llu}\n",
           name, (unsigned long long)st.captures, st.capture_ms, (unsigned long long)st.replays);
    e->ops->close(e);
    return 0;
}

/* gpu_backend_e2e: end-to-end checks of the CUDA backend on one model
 * (tests/cuda/run_gpu_tests.sh runs it; make_models.py compares its output
 * files with transformers).
 *
 *   gpu_backend_e2e MODEL_DIR SEQS_BIN OUT_PREFIX [MIN_COS]
 *
 * 1. graph == eager, bit for bit: a fresh engine runs one batch three
 *    times (bucket's first run eager, second captured, third replayed) --
 *    a large batch (graph of kernels) and one of <= 64 tokens (the
 *    persistent small-batch kernel, for the models it serves).
 * 2. every sequence alone (batch of one)         -> OUT_PREFIX.single.bin
 * 3. all sequences in mixed batches of <= 1024, 4096 and 16384 tokens
 *                                                 -> OUT_PREFIX.mixB.bin
 *    and each must match (2) to cosine >= MIN_COS (default 0.9999; deep
 *    bf16 decoders differ more between buckets, e2e_qwen3.py passes 0.999,
 *    the bar against transformers).  Also mixed batches of <= 64 tokens.
 * 3b. the small-batch kernel against the graph of kernels: every sequence
 *    of <= 64 tokens run alone by an engine opened with POSY_CUDA_MEGA=0,
 *    cosine >= MIN_COS against (2) -- when the main engine used it
 *    (POSY_CUDA_MEGA=1 in the environment).
 * 4. many batches in flight (random mixes, submitted without waiting,
 *    collected with non-blocking polls): every result is bit-identical to
 *    the same batch run alone, so each belongs to its own sequences.
 * 5. clear errors: a device index that does not exist, and
 *    --max-batch-tokens too large for the GPU's memory.
 * 6. pool skips (include_prompt false): a batch of sequences with mixed
 *    skips (0, 1, odd, len - 1) gives each sequence what it gives alone
 *    with its skip (cosine >= MIN_COS), so every skip stays with its
 *    sequence through packing, graphs and the small-batch kernel; last-
 *    token pooling and SPLADE ignore skips (bit for bit); for mean / CLS a skip of
 *    len - 1 must change the vector.  (The pooling kernel itself is checked
 *    against a CPU reference with skips in dev/cuda/lab_pool.cu.)
 * 7. token states (posy_batch.tok_out, TEI's /embed_all): a batch where
 *    every other sequence asks for them, through the eager token path --
 *    each token's state against the CPU engine's (fp32) at cosine >= 0.999,
 *    the pooled vectors still those of the sequences alone (MIN_COS), the
 *    states pooled on the host give the pooled vectors back, and the rows
 *    of sequences that did not ask stay untouched.
 * Exit status 0 only if all checks pass.
 */
#include "gpu_harness.h"
#include "posy_clock.h"

static int failures = 0;
static double min_cos = 0.9999;
#define EXPECT(c, ...) do { if (!(c)) { failures++; printf("FAIL: " __VA_ARGS__); printf("\n"); } } while (0)

static void write_f(const char *prefix, const char *suffix, const float *v, size_t n) {
    char p[1200];
    snprintf(p, sizeof p, "%s.%s.bin", prefix, suffix);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(v, 4, n, f) != n) { fprintf(stderr, "write %s failed\n", p); exit(2); }
    fclose(f);
}

static void test_graph_bits(const char *dir, const gh_seqs *s, int H, int budget) {
    posy_err err;
    posy_engine *e = gh_open(dir, 4096, 256, &err);
    if (!e) { EXPECT(0, "open: %s", err.msg); return; }
    int idx[8];
    int k = 0, T = 0;
    for (int i = 0; i < s->n && k < 8; i += 3)
        if (T + s->lens[i] <= budget) { T += s->lens[i]; idx[k++] = i; }
    for (int i = 0; i < s->n && k == 0; i++)   /* none of every third fits (a reranker's long pairs): any one */
        if (s->lens[i] <= budget) { T = s->lens[i]; idx[k++] = i; }
    if (k == 0) { EXPECT(0, "no sequences fit %d tokens", budget); e->ops->close(e); return; }
    gh_batch b;
    gh_batch_make(&b, s, idx, k, H, 1);
    float *runs[3];
    for (int r = 0; r < 3; r++) {
        EXPECT(gh_run_sync(e, &b) == 0, "graph test run %d failed", r);
        runs[r] = (float *)malloc((size_t)k * H * 4);
        memcpy(runs[r], b.out, (size_t)k * H * 4);
    }
    eng_cu_stats st;
    eng_cuda_stats(e, &st);
    EXPECT(st.captures == 1 && st.replays == 2, "expected 1 capture and 2 graph launches, got %llu/%llu",
           (unsigned long long)st.captures, (unsigned long long)st.replays);
    EXPECT(!memcmp(runs[0], runs[1], (size_t)k * H * 4), "captured run differs from eager run");
    EXPECT(!memcmp(runs[0], runs[2], (size_t)k * H * 4), "replayed run differs from eager run");
    printf("graph-vs-eager: %d seqs, %d tokens%s: eager/capture/replay %s (capture %.2f ms)\n", k,
           b.b.n_tokens, st.small_batches ? " (small-batch kernel)" : "", !memcmp(runs[0], runs[1], (size_t)k * H * 4) && !memcmp(runs[0], runs[2], (size_t)k * H * 4)
               ? "bit-identical" : "DIFFER", st.capture_ms);
    for (int r = 0; r < 3; r++) free(runs[r]);
    gh_batch_free(&b);
    e->ops->close(e);
}

static float *run_single(posy_engine *e, const gh_seqs *s, int H) {
    float *out = (float *)malloc((size_t)s->n * H * 4);
    for (int i = 0; i < s->n; i++) {
        gh_batch b;
        gh_batch_make(&b, s, &i, 1, H, (uint64_t)i);
        EXPECT(gh_run_sync(e, &b) == 0, "single seq %d failed", i);
        memcpy(out + (size_t)i * H, b.out, (size_t)H * 4);
        gh_batch_free(&b);
    }
    return out;
}

static void run_mixed(posy_engine *e, const gh_seqs *s, int H, int budget, const float *single,
                      const char *prefix) {
    float *out = (float *)malloc((size_t)s->n * H * 4);
    int *idx = (int *)malloc((size_t)s->n * sizeof(int));
    int i = 0, batches = 0;
    double minc = 1;
    while (i < s->n) {
        int k = 0, T = 0;
        if (s->lens[i] > budget) { /* longer than the budget: not part of this run */
            memcpy(out + (size_t)i * H, single + (size_t)i * H, (size_t)H * 4);
            i++;
            continue;
        }
        while (i < s->n && T + s->lens[i] <= budget) { T += s->lens[i]; idx[k++] = i++; }
        gh_batch b;
        gh_batch_make(&b, s, idx, k, H, (uint64_t)batches);
        EXPECT(gh_run_sync(e, &b) == 0, "mixed batch failed");
        for (int j = 0; j < k; j++) {
            memcpy(out + (size_t)idx[j] * H, b.out + (size_t)j * H, (size_t)H * 4);
            double c = gh_cos(b.out + (size_t)j * H, single + (size_t)idx[j] * H, H);
            if (c < minc) minc = c;
        }
        gh_batch_free(&b);
        batches++;
    }
    printf("mixed batches <= %d tokens: %d batches, min cosine vs single %.6f\n", budget, batches, minc);
    EXPECT(minc >= min_cos, "mixed budget %d: min cosine %.6f", budget, minc);
    char suf[32];
    snprintf(suf, sizeof suf, "mix%d", budget);
    write_f(prefix, suf, out, (size_t)s->n * H);
    free(out);
    free(idx);
}

static void test_inflight(posy_engine *e, const gh_seqs *s, int H, const float *single) {
    enum { NB = 24 };
    gh_batch bs[NB];
    float *want[NB];
    uint64_t seed = 12345;
    for (int j = 0; j < NB; j++) {
        int idx[32], k = 1 + (int)(seed % 17), T = 0, n = 0;
        for (int t = 0; t < k; t++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            int c = (int)((seed >> 33) % (uint64_t)s->n);
            if (T + s->lens[c] > 4096) continue;
            T += s->lens[c];
            idx[n++] = c;
        }
        if (n == 0) idx[n++] = j % s->n;
        gh_batch_make(&bs[j], s, idx, n, H, (uint64_t)j);
        /* the expected bits: the same batch run alone (same bucket, same algorithms) */
        EXPECT(gh_run_sync(e, &bs[j]) == 0, "sync run of batch %d failed", j);
        want[j] = (float *)malloc((size_t)n * H * 4);
        memcpy(want[j], bs[j].out, (size_t)n * H * 4);
        memset(bs[j].out, 0xff, (size_t)n * H * 4);
    }
    int submitted = 0, got = 0, wrong = 0, maxin = 0;
    double minc = 1;
    posy_result res[8];
    posy_err err;
    const double t0 = posy_now_s();
    while (got < NB) {
        if (submitted < NB) {
            if (e->ops->submit(e, &bs[submitted].b, &err)) { EXPECT(0, "submit: %s", err.msg); return; }
            submitted++;
        }
        if (e->ops->inflight(e) > maxin) maxin = e->ops->inflight(e);
        int n = e->ops->poll(e, res, 8, submitted == NB);
        for (int r = 0; r < n; r++) {
            gh_batch *b = &bs[res[r].tag];
            EXPECT(res[r].status == 0, "batch %llu status %d", (unsigned long long)res[r].tag, res[r].status);
            if (memcmp(b->out, want[res[r].tag], (size_t)b->b.n_seqs * H * 4)) wrong++;
            for (int j = 0; j < b->b.n_seqs; j++) {
                double c = gh_cos(b->out + (size_t)j * H, single + (size_t)b->idx[j] * H, H);
                if (c < minc) minc = c;
            }
            got++;
        }
    }
    printf("in flight: %d batches in %.1f ms, up to %d in flight at once, %d results differing from "
           "their batch run alone, min cosine vs single-sequence runs %.6f\n", NB,
           (posy_now_s() - t0) * 1e3, maxin, wrong, minc);
    EXPECT(wrong == 0, "in-flight results do not match their own batches");
    EXPECT(minc >= min_cos, "in-flight min cosine %.6f", minc);
    EXPECT(maxin >= 2, "never more than one batch in flight");
    for (int j = 0; j < NB; j++) { gh_batch_free(&bs[j]); free(want[j]); }
}

/* 3b: sequences of <= 64 tokens through the graph of kernels (an engine
 * with the small-batch kernel off) against `single`. */
static void test_small_vs_graph(const char *dir, const gh_seqs *s, int H, const float *single,
                                uint64_t small_before) {
    posy_err err;
    setenv("POSY_CUDA_MEGA", "0", 1);
    posy_engine *e = gh_open(dir, 4096, 256, &err);
    unsetenv("POSY_CUDA_MEGA");
    if (!e) { EXPECT(0, "open (small-batch kernel off): %s", err.msg); return; }
    double minc = 1, maxd = 0;
    int n = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->lens[i] > 64) continue;
        gh_batch b;
        gh_batch_make(&b, s, &i, 1, H, (uint64_t)i);
        EXPECT(gh_run_sync(e, &b) == 0, "graph-path seq %d failed", i);
        const double c = gh_cos(b.out, single + (size_t)i * H, H);
        if (c < minc) minc = c;
        for (int j = 0; j < H; j++) {
            const double d = fabs((double)b.out[j] - single[(size_t)i * H + j]);
            if (d > maxd) maxd = d;
        }
        gh_batch_free(&b);
        n++;
    }
    eng_cu_stats st;
    eng_cuda_stats(e, &st);
    printf("small-batch kernel vs graph of kernels: %d sequences of <= 64 tokens, min cosine %.6f, "
           "max abs diff %.2e (small-batch runs in the main engine before this: %llu)\n",
           n, minc, maxd, (unsigned long long)small_before);
    EXPECT(st.small_batches == 0, "POSY_CUDA_MEGA=0 engine still ran %llu small-batch kernels",
           (unsigned long long)st.small_batches);
    EXPECT(minc >= min_cos, "small-batch kernel vs graph path: min cosine %.6f", minc);
    e->ops->close(e);
}

static int skip_for(int j, int len) {
    const int k = j % 4 == 0 ? 0 : j % 4 == 1 ? 1 : j % 4 == 2 ? ((len / 2) | 1) : len - 1;
    return k < len ? k : len - 1;
}

static void test_pool_skip(posy_engine *e, const gh_seqs *s, int H, int budget, const float *single) {
    int idx[16], k = 0, T = 0;
    int32_t skip[16];
    for (int i = 0; i < s->n && k < 16; i++)
        if (s->lens[i] >= 2 && T + s->lens[i] <= budget) { T += s->lens[i]; idx[k++] = i; }
    if (k < 4) { printf("pool skips <= %d tokens: too few sequences, skipped\n", budget); return; }
    for (int j = 0; j < k; j++) skip[j] = skip_for(j, s->lens[idx[j]]);
    gh_batch b;
    gh_batch_make(&b, s, idx, k, H, 900);
    b.b.pool_skip = skip;
    EXPECT(gh_run_sync(e, &b) == 0, "pool skip batch failed");
    gh_batch z;                                   /* the same batch, skips all zero */
    gh_batch_make(&z, s, idx, k, H, 901);
    int32_t zeros[16] = {0};
    z.b.pool_skip = zeros;
    EXPECT(gh_run_sync(e, &z) == 0, "zero-skip batch failed");
    const int last = e->cfg.info.pooling == POSY_POOL_LAST || e->cfg.splade;   /* SPLADE folds every token too */
    double minc = 1;
    for (int j = 0; j < k; j++) {
        gh_batch one;
        gh_batch_make(&one, s, &idx[j], 1, H, 902 + (uint64_t)j);
        one.b.pool_skip = &skip[j];
        EXPECT(gh_run_sync(e, &one) == 0, "pool skip alone %d failed", j);
        const double c = gh_cos(b.out + (size_t)j * H, one.out, H);
        if (c < minc) minc = c;
        if (last)
            EXPECT(!memcmp(b.out + (size_t)j * H, z.out + (size_t)j * H, (size_t)H * 4),
                   "last-token pooling changed with skip %d (sequence %d)", skip[j], idx[j]);
        else if (skip[j] == s->lens[idx[j]] - 1 && skip[j] > 1) {
            const double cz = gh_cos(b.out + (size_t)j * H, single + (size_t)idx[j] * H, H);
            EXPECT(cz < min_cos, "skip %d of %d tokens did not change sequence %d (cosine %.6f vs no skip)",
                   skip[j], s->lens[idx[j]], idx[j], cz);
        }
        gh_batch_free(&one);
    }
    printf("pool skips <= %d tokens: %d sequences, min cosine batch vs alone %.6f%s\n", budget, k, minc,
           last ? " (last-token: unaffected)" : "");
    EXPECT(minc >= min_cos, "pool skips budget %d: min cosine %.6f", budget, minc);
    gh_batch_free(&b);
    gh_batch_free(&z);
}

static void test_token_states(posy_engine *e, const char *dir, const gh_seqs *s, int H, int budget,
                              const float *single) {
    const int D = eng_config_tok_dim(&e->cfg);
    if (!D) { printf("token states: the model gives none, skipped\n"); return; }
    int idx[16], k = 0, T = 0;
    for (int i = 0; i < s->n && k < 16; i++)
        if (T + s->lens[i] <= budget) { T += s->lens[i]; idx[k++] = i; }
    if (k < 2) { printf("token states <= %d tokens: too few sequences, skipped\n", budget); return; }
    gh_batch b;
    gh_batch_make(&b, s, idx, k, H, 950);
    float *tok = (float *)malloc((size_t)T * D * 4), *ptr[16];
    for (size_t i = 0; i < (size_t)T * D; i++) tok[i] = -999.0f;
    for (int j = 0; j < k; j++) ptr[j] = j % 2 == 0 ? tok + (size_t)b.cu[j] * D : NULL;
    b.b.tok_out = ptr;
    EXPECT(gh_run_sync(e, &b) == 0, "token-state batch failed");
    /* the CPU engine (fp32) on the same harness folder, as harness_cpu opens it */
    posy_engine *cpu = (posy_engine *)calloc(1, sizeof *cpu);
    gh_load_model(cpu, dir);
    cpu->opts.device = POSY_DEVICE_CPU;
    cpu->opts.max_batch_tokens = budget;
    cpu->opts.max_batch_seqs = 16;
    cpu->ops = &eng_cpu_backend;
    posy_err err;
    posy_err_clear(&err);
    if (cpu->ops->open(cpu, &err)) { EXPECT(0, "cpu engine: %s", err.msg); free(tok); gh_batch_free(&b); return; }
    gh_batch cb;
    gh_batch_make(&cb, s, idx, k, H, 951);
    float *ctok = (float *)malloc((size_t)T * D * 4), *cptr[16];
    for (int j = 0; j < k; j++) cptr[j] = ctok + (size_t)b.cu[j] * D;
    cb.b.tok_out = cptr;
    EXPECT(gh_run_sync(cpu, &cb) == 0, "cpu token-state batch failed");
    double min_tok = 1, min_pool = 1, min_rebuilt = 1;
    int untouched = 1;
    float *pooled = (float *)malloc((size_t)D * 4);
    for (int j = 0; j < k; j++) {
        const int len = b.cu[j + 1] - b.cu[j];
        const float *g = tok + (size_t)b.cu[j] * D;
        const double c = gh_cos(b.out + (size_t)j * H, single + (size_t)idx[j] * H, H);
        if (c < min_pool) min_pool = c;
        if (!ptr[j]) {
            for (size_t i = 0; i < (size_t)len * D; i++) untouched &= g[i] == -999.0f;
            continue;
        }
        for (int t = 0; t < len; t++) {
            const double ct = gh_cos(g + (size_t)t * D, ctok + ((size_t)b.cu[j] + t) * D, D);
            if (ct < min_tok) min_tok = ct;
        }
        const posy_pooling pm = e->cfg.info.pooling;
        for (int i = 0; i < D; i++) {
            double v = 0;
            if (pm == POSY_POOL_CLS) v = g[i];
            else if (pm == POSY_POOL_LAST) v = g[(size_t)(len - 1) * D + i];
            else {
                for (int t = 0; t < len; t++) v += g[(size_t)t * D + i];
                v /= len;
            }
            pooled[i] = (float)v;
        }
        if (H == D) {
            const double cr = gh_cos(pooled, b.out + (size_t)j * H, D);
            if (cr < min_rebuilt) min_rebuilt = cr;
        }
    }
    printf("token states <= %d tokens: %d sequences (%d tokens); per token vs CPU min cosine %.6f; pooled vs alone "
           "%.6f; states pooled on the host vs pooled %.7f; rows not asked for %s\n", budget, k, T, min_tok,
           min_pool, min_rebuilt, untouched ? "untouched" : "WRITTEN");
    EXPECT(min_tok >= 0.999, "token states budget %d: min cosine vs CPU %.6f", budget, min_tok);
    EXPECT(min_pool >= min_cos, "token states budget %d: pooled vs alone %.6f", budget, min_pool);
    EXPECT(min_rebuilt >= 0.99999, "token states budget %d: host-pooled states vs pooled %.7f", budget, min_rebuilt);
    EXPECT(untouched, "token states budget %d: rows of a sequence that asked for none were written", budget);
    free(pooled);
    free(ctok);
    gh_batch_free(&cb);
    cpu->ops->close(cpu);
    free(tok);
    gh_batch_free(&b);
}

static void test_errors(const char *dir) {
    posy_err err;
    posy_err_clear(&err);
    EXPECT(!eng_cuda_available(99, &err), "device 99 reported available");
    printf("error (device 99): %s\n", err.msg);
    posy_err_clear(&err);
    posy_engine *e = gh_open(dir, 1 << 30, 1024, &err);
    EXPECT(!e && err.code == POSY_E_NOMEM, "huge max-batch-tokens did not fail with NOMEM");
    printf("error (max-batch-tokens 2^30): %s\n", err.msg);
    if (e) e->ops->close(e);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: %s MODEL_DIR SEQS_BIN OUT_PREFIX [MIN_COS]\n", argv[0]);
        return 2;
    }
    if (argc == 5) min_cos = atof(argv[4]);
    gh_seqs s = gh_load_seqs(argv[2]);
    posy_err err;
    posy_engine *e = gh_open(argv[1], 16384, 1024, &err);
    if (!e) { printf("FAIL: open: %s\n", err.msg); return 1; }
    /* what the backend writes a sequence (the harness drives it without the engine front's Dense
     * modules): the pooled hidden state, or a SPLADE model's vocabulary-wide vector */
    const int H = e->cfg.splade ? e->cfg.info.dim : e->cfg.info.hidden;
    test_graph_bits(argv[1], &s, H, 4096);
    test_graph_bits(argv[1], &s, H, 64);
    float *single = run_single(e, &s, H);
    write_f(argv[3], "single", single, (size_t)s.n * H);
    eng_cu_stats st0;
    eng_cuda_stats(e, &st0);
    if (st0.small_batches) test_small_vs_graph(argv[1], &s, H, single, st0.small_batches);
    else printf("small-batch kernel: not used for this model\n");
    run_mixed(e, &s, H, 64, single, argv[3]);
    run_mixed(e, &s, H, 1024, single, argv[3]);
    run_mixed(e, &s, H, 4096, single, argv[3]);
    run_mixed(e, &s, H, 16384, single, argv[3]);
    test_inflight(e, &s, H, single);
    test_pool_skip(e, &s, H, 64, single);
    test_pool_skip(e, &s, H, 4096, single);
    test_token_states(e, argv[1], &s, H, 64, single);
    test_token_states(e, argv[1], &s, H, 4096, single);
    eng_cu_stats st;
    eng_cuda_stats(e, &st);
    printf("stats: %llu batches, %llu tokens (%llu padded), %llu captures (%.1f ms), %llu replays, "
           "%llu small-batch kernel runs\n",
           (unsigned long long)st.batches, (unsigned long long)st.tokens,
           (unsigned long long)st.padded_tokens, (unsigned long long)st.captures, st.capture_ms,
           (unsigned long long)st.replays, (unsigned long long)st.small_batches);
    e->ops->close(e);
    test_errors(argv[1]);
    printf("gpu_backend_e2e %s: %s\n", argv[1], failures ? "FAIL" : "PASS");
    return failures ? 1 : 0;
}

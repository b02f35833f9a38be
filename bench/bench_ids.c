/* bench_ids: times posy's engine in-process on synthetic token ids, for
 * models whose tokenizer posy cannot load yet or when only the engine
 * matters (bench/bench_qwen3_cpu.py runs it beside transformers).
 *
 *   posy_bench_ids --model DIR [--threads N] [--seconds S] [--shapes 1x16,8x128]
 *
 * Each shape BxL is one packed batch of B sequences of L ids
 * ((i * 7919 + 13) mod vocab), stepped for at least S seconds after one
 * warm-up step.  Prints one JSON object: per shape the mean milliseconds
 * per step and tokens per second.  Asserts nothing about speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posy_clock.h"
#include "posy_engine.h"

static int run_shape(posy_engine *e, int B, int L, double seconds, double *ms, double *tps) {
    const posy_model_info *mi = posy_engine_info(e);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)B * L), *cu = malloc(sizeof(int32_t) * (size_t)(B + 1));
    float *out = malloc(sizeof(float) * (size_t)B * mi->dim);
    if (!ids || !cu || !out) return -1;
    for (int i = 0; i < B * L; i++) ids[i] = (int32_t)(((long long)i * 7919 + 13) % mi->vocab);
    for (int s = 0; s <= B; s++) cu[s] = s * L;
    posy_batch b = {1, B, B * L, ids, NULL, cu, out, NULL, NULL};
    posy_result r[4];
    posy_err err;
    posy_err_clear(&err);
    int rc = 0, steps = 0;
    if (posy_engine_step(e, &b, r, 4, &err) < 0) { fprintf(stderr, "%s\n", err.msg); rc = -1; }
    posy_engine_wait(e, r, 4);
    uint64_t t0 = posy_now_ns(), t = t0;
    while (!rc && (t - t0) < seconds * 1e9) {
        if (posy_engine_step(e, &b, r, 4, &err) < 0) { fprintf(stderr, "%s\n", err.msg); rc = -1; }
        posy_engine_wait(e, r, 4);
        steps++;
        t = posy_now_ns();
    }
    if (steps) {
        *ms = (double)(t - t0) * 1e-6 / steps;
        *tps = (double)B * L * steps / ((double)(t - t0) * 1e-9);
    }
    free(ids); free(cu); free(out);
    return rc;
}

int main(int argc, char **argv) {
    const char *model = NULL, *shapes = "1x16,8x128";
    int threads = 0;
    double seconds = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--shapes")) shapes = argv[i + 1];
        else { fprintf(stderr, "posy_bench_ids: unknown flag %s\n", argv[i]); return 2; }
    }
    if (!model) { fprintf(stderr, "usage: posy_bench_ids --model DIR [--threads N] [--seconds S] [--shapes 1x16,8x128]\n"); return 2; }
    int maxT = 0;
    for (const char *p = shapes; *p;) {
        int B, L, n;
        if (sscanf(p, "%dx%d%n", &B, &L, &n) != 2 || B < 1 || L < 1) { fprintf(stderr, "bad --shapes\n"); return 2; }
        if (B * L > maxT) maxT = B * L;
        p += n;
        if (*p == ',') p++;
    }
    posy_engine_opts o = {.device = POSY_DEVICE_CPU, .n_threads = threads, .max_batch_tokens = maxT,
                          .max_batch_seqs = maxT};
    posy_err err;
    posy_err_clear(&err);
    posy_engine *e = posy_engine_open(model, &o, &err);
    if (!e) { fprintf(stderr, "posy_bench_ids: %s\n", err.msg); return 1; }
    printf("{\"model\": \"%s\", \"threads\": %d, \"shapes\": {", posy_engine_info(e)->name, threads);
    int first = 1;
    for (const char *p = shapes; *p;) {
        int B, L, n;
        sscanf(p, "%dx%d%n", &B, &L, &n);
        p += n;
        if (*p == ',') p++;
        double ms = 0, tps = 0;
        if (run_shape(e, B, L, seconds, &ms, &tps)) { posy_engine_close(e); return 1; }
        printf("%s\"%dx%d\": {\"ms_per_step\": %.3f, \"tokens_per_s\": %.1f}", first ? "" : ", ", B, L, ms, tps);
        first = 0;
    }
    printf("}}\n");
    posy_engine_close(e);
    return 0;
}

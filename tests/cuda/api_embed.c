/* api_embed: embed a seqs.bin file (tests/cuda/e2e_vs_transformers.py's
 * format) through the engine's public API, on any device -- the CPU engine
 * side of the GPU-vs-CPU comparison (tests/cuda/compare_cpu.py), and the
 * public-API path on a GPU machine where the engine's C sources build.
 *
 *   api_embed MODEL_DIR SEQS_BIN OUT_BIN cpu|cuda|auto [BUDGET_TOKENS]
 *
 * Sequences are packed in order into batches of at most BUDGET tokens
 * (default 4096; 0: the engine's default budget for its device, printed)
 * and submitted with posy_engine_step without waiting, so
 * several are in flight on a GPU; OUT_BIN gets n x dim float32 in
 * sequence order.  The last line says how much memory the process held
 * then (VmRSS: resident; VmHWM: its peak, the load included), what an
 * open engine costs the host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "posy_engine.h"

typedef struct job { posy_batch b; int first; } job;

/* /proc/self/status's `key` (VmRSS, VmHWM) in MiB, -1 where unreadable */
static long status_mib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':') { kb = atol(line + n + 1); break; }
    fclose(f);
    return kb < 0 ? -1 : kb >> 10;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s MODEL_DIR SEQS_BIN OUT_BIN cpu|cuda|auto [BUDGET]\n", argv[0]);
        return 2;
    }
    int budget = argc > 5 ? atoi(argv[5]) : 4096;
    FILE *f = fopen(argv[2], "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", argv[2]); return 2; }
    int n = 0;
    if (fread(&n, 4, 1, f) != 1 || n <= 0) { fprintf(stderr, "bad %s\n", argv[2]); return 2; }
    int32_t *lens = malloc((size_t)n * 4), *cu = malloc(((size_t)n + 1) * 4);
    if (fread(lens, 4, (size_t)n, f) != (size_t)n) { fprintf(stderr, "bad %s\n", argv[2]); return 2; }
    cu[0] = 0;
    for (int i = 0; i < n; i++) cu[i + 1] = cu[i] + lens[i];
    int32_t *ids = malloc((size_t)cu[n] * 4);
    if (fread(ids, 4, (size_t)cu[n], f) != (size_t)cu[n]) { fprintf(stderr, "bad %s\n", argv[2]); return 2; }
    fclose(f);

    posy_engine_opts o;
    memset(&o, 0, sizeof o);
    o.device = !strcmp(argv[4], "cpu") ? POSY_DEVICE_CPU : !strcmp(argv[4], "cuda") ? POSY_DEVICE_CUDA
                                                                                    : POSY_DEVICE_AUTO;
    o.max_batch_tokens = budget == 0 ? 0 : budget > 512 ? budget : 512;
    posy_err err;
    posy_engine *e = posy_engine_open(argv[1], &o, &err);
    if (!e) { fprintf(stderr, "open: %s\n", err.msg); return 1; }
    if (budget == 0) {
        budget = posy_engine_info(e)->max_batch_tokens;
        printf("api_embed: the engine's default budget on %s: %d tokens\n",
               posy_engine_info(e)->device == POSY_DEVICE_CUDA ? "cuda" : "cpu", budget);
    }
    const int H = posy_engine_info(e)->dim; /* the embedding dimension (Dense modules change it) */
    float *out = malloc((size_t)n * H * 4);
    job *jobs = calloc((size_t)n, sizeof *jobs);
    int32_t *cus = malloc(((size_t)n * 2 + 2) * 4);
    int n_jobs = 0, i = 0, cpos = 0, done = 0, failed = 0;
    while (i < n) { /* batches of consecutive sequences, cu_seqlens rebased */
        job *j = &jobs[n_jobs];
        j->first = i;
        int k = 0, T = 0;
        int32_t *c = cus + cpos;
        c[0] = 0;
        while (i + k < n && (k == 0 || T + lens[i + k] <= budget)) { T += lens[i + k]; c[k + 1] = T; k++; }
        j->b.tag = (uint64_t)n_jobs;
        j->b.n_seqs = k;
        j->b.n_tokens = T;
        j->b.ids = ids + cu[i];
        j->b.cu_seqlens = c;
        j->b.out = out + (size_t)i * H;
        cpos += k + 1;
        i += k;
        n_jobs++;
    }
    posy_result res[16];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int j = 0; j < n_jobs; j++) {
        int got = posy_engine_step(e, &jobs[j].b, res, 16, &err);
        if (got < 0) { fprintf(stderr, "step: %s\n", err.msg); return 1; }
        for (int r = 0; r < got; r++) { done++; failed += res[r].status != 0; }
    }
    while (posy_engine_inflight(e) > 0) {
        int got = posy_engine_wait(e, res, 16);
        for (int r = 0; r < got; r++) { done++; failed += res[r].status != 0; }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (done != n_jobs || failed) { fprintf(stderr, "%d of %d batches done, %d failed\n", done, n_jobs, failed); return 1; }
    f = fopen(argv[3], "wb");
    if (!f || fwrite(out, 4, (size_t)n * H, f) != (size_t)n * H) { fprintf(stderr, "write %s\n", argv[3]); return 1; }
    fclose(f);
    printf("api_embed: %d sequences in %d batches on %s (%s), embedded in %.6f s\n", n, n_jobs, argv[4],
           posy_engine_info(e)->dtype, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    printf("api_embed: host memory %ld MiB resident, %ld MiB at the peak\n", status_mib("VmRSS"), status_mib("VmHWM"));
    posy_engine_close(e);
    return 0;
}

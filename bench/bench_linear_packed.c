/* bench_linear_packed: the packed linear (eng_cpu_gemm_packed.c)
 * beside OpenBLAS cblas_sgemm (eng_cpu_linear, what the engine runs without
 * it) in the same process, at MiniLM's linear shapes.
 *
 *   posy_bench_linear_packed [--threads N] [--reps R] [--m 12,32,64] [--isa avx2]
 *
 * --isa avx2 forces the AVX2 kernel on an AVX-512 CPU.
 *
 * For each M and (N, K) = (1152, 384) QKV, (384, 384) attention output,
 * (1536, 384) FFN up, (384, 1536) FFN down, the two run interleaved, R rounds
 * of enough calls to last ~2 ms each; the minimum per-call time of each is
 * kept (the least disturbed by other jobs on a shared machine) and the ratio
 * printed.  Weights are 0.1-scaled noise; the largest difference between the
 * two results is printed beside the times, so a broken kernel cannot look
 * fast unnoticed.  Asserts nothing on speed.
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>

#include "cpu/eng_cpu_gemm_packed.h"
#include "cpu/eng_cpu_kernels.h"
#include "posy_clock.h"

static float *noise(size_t n, unsigned seed) {
    float *v = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = 0.1f * ((float)(seed >> 8) / 16777216.0f - 0.5f);
    }
    return v;
}

/* Seconds per call of one side over `calls` calls. */
static double time_side(int packed, eng_cpu_isa isa, float *y, const float *x, const float *W,
                        const eng_cpu_pack *p, const float *b, int M, int N, int K, int calls) {
    double t0 = posy_now_s();
    for (int i = 0; i < calls; i++)
        if (packed) eng_cpu_linear_packed(isa, y, x, p, b, M);
        else eng_cpu_linear(y, x, W, b, M, N, K);
    return (posy_now_s() - t0) / calls;
}

static void one_shape(eng_cpu_isa isa, int M, int N, int K, int reps) {
    float *x = noise((size_t)M * K, 1), *W = noise((size_t)N * K, 2), *b = noise(N, 3);
    float *y0 = noise((size_t)M * N, 4), *y1 = noise((size_t)M * N, 5);
    eng_cpu_pack p;
    if (eng_cpu_pack_init(&p, W, N, K) != 0) { fprintf(stderr, "out of memory\n"); exit(1); }
    eng_cpu_linear_packed(isa, y0, x, &p, b, M);
    eng_cpu_linear(y1, x, W, b, M, N, K);
    double maxd = 0;
    for (size_t i = 0; i < (size_t)M * N; i++) maxd = fmax(maxd, fabs((double)y0[i] - y1[i]));
    /* calls per round: ~2 ms of OpenBLAS. */
    double t1 = time_side(0, isa, y1, x, W, &p, b, M, N, K, 3);
    int calls = (int)(2e-3 / (t1 > 1e-7 ? t1 : 1e-7)) + 1;
    double best_pk = 1e9, best_bl = 1e9;
    for (int r = 0; r < reps; r++) {
        best_pk = fmin(best_pk, time_side(1, isa, y0, x, W, &p, b, M, N, K, calls));
        best_bl = fmin(best_bl, time_side(0, isa, y1, x, W, &p, b, M, N, K, calls));
    }
    double gf = 2.0 * M * N * K * 1e-9;
    printf("M %3d N %4d K %4d  packed %8.2f us (%5.1f GFLOP/s)  openblas %8.2f us (%5.1f GFLOP/s)  "
           "openblas/packed %.2fx  max|diff| %.1e\n",
           M, N, K, best_pk * 1e6, gf / best_pk, best_bl * 1e6, gf / best_bl, best_bl / best_pk, maxd);
    eng_cpu_pack_free(&p);
    free(x); free(W); free(b); free(y0); free(y1);
}

int main(int argc, char **argv) {
    int threads = 2, reps = 20, ms[16] = {12, 32}, n_m = 2, avx2 = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--isa")) avx2 = !strcmp(argv[i + 1], "avx2");
        else if (!strcmp(argv[i], "--m")) {
            n_m = 0;
            for (char *s = argv[i + 1]; *s && n_m < 16; s++) {
                ms[n_m++] = (int)strtol(s, &s, 10);
                if (!*s) break;
            }
        } else { fprintf(stderr, "unknown flag %s\n", argv[i]); return 2; }
    }
    eng_cpu_isa isa = eng_cpu_gemm_isa();
    if (isa == ENG_CPU_ISA_NONE) { fprintf(stderr, "no packed kernel on this CPU\n"); return 1; }
    if (avx2) isa = ENG_CPU_ISA_AVX2;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
    printf("kernel %s, %d threads, min of %d rounds\n", isa == ENG_CPU_ISA_AVX512 ? "avx512" : "avx2",
           threads, reps);
    static const int nk[][2] = {{1152, 384}, {384, 384}, {1536, 384}, {384, 1536}};
    for (int m = 0; m < n_m; m++)
        for (int s = 0; s < 4; s++) one_shape(isa, ms[m], nk[s][0], nk[s][1], reps);
    return 0;
}

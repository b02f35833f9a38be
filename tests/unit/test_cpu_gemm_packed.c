/* test_cpu_gemm_packed: the packed linear (eng_cpu_gemm_packed.h) against
 * eng_cpu_linear_ref (double sums), for every kernel this CPU can run
 * (AVX-512 and AVX2 both on an AVX-512 machine), at every M = 1..40 and
 * larger M across the 96-row chunks, N and K with and without a multiple of
 * the 16-wide panel (masked tail columns), with and without bias, and
 * through OpenMP (large products) and not.  Also the property the engine
 * relies on: a row's result is bit-identical whatever the batch around it
 * and whichever kernel ran it.
 *
 * Tolerance, |fast - ref| <= atol + rtol*|ref| with inputs in [-1, 1]:
 *   atol = 1e-5 * sqrt(K), rtol = 1e-5
 * (fp32 FMA sums of K terms in k order; the error of such a sum grows like
 * sqrt(K) * eps * magnitude, ~1e-6 at K = 1536.)  A negative check proves the
 * test can fail: one packed weight changed moves the result past it.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/eng_cpu_gemm_packed.h"
#include "cpu/eng_cpu_kernels.h"
#include "posy_test.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static float frand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return -1.0f + 2.0f * (float)((rng_state >> 40) & 0xffffff) / 16777216.0f;
}
static float *rand_vec(size_t n) {
    float *v = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) v[i] = frand();
    return v;
}

/* Runs one shape with one kernel; returns 1 if it matched the reference. */
static int one_shape(eng_cpu_isa isa, int M, int N, int K, int with_bias) {
    float *x = rand_vec((size_t)M * K), *W = rand_vec((size_t)N * K), *b = rand_vec(N);
    /* y gets a guard row: nothing may be written past M*N. */
    float *y = malloc(sizeof(float) * ((size_t)M * N + 16)), *r = malloc(sizeof(float) * (size_t)M * N);
    for (int i = 0; i < 16; i++) y[(size_t)M * N + i] = 12345.0f;
    eng_cpu_pack p;
    int ok = eng_cpu_pack_init(&p, W, N, K) == 0;
    CHECK(ok);
    if (ok) {
        eng_cpu_linear_packed(isa, y, x, &p, with_bias ? b : NULL, M);
        eng_cpu_linear_ref(r, x, W, with_bias ? b : NULL, M, N, K);
        ok = posy_test_close(y, r, (size_t)M * N, 1e-5f * sqrtf((float)K), 1e-5f);
        for (int i = 0; i < 16; i++) ok &= y[(size_t)M * N + i] == 12345.0f;
        if (!ok) fprintf(stderr, "  isa %d M %d N %d K %d bias %d\n", isa, M, N, K, with_bias);
    }
    eng_cpu_pack_free(&p);
    free(x); free(W); free(b); free(y); free(r);
    return ok;
}

static eng_cpu_isa isas[2];
static int n_isas;

static void find_isas(void) {
    eng_cpu_isa best = eng_cpu_gemm_isa();
    n_isas = 0;
    if (best >= ENG_CPU_ISA_AVX512) isas[n_isas++] = ENG_CPU_ISA_AVX512;
    if (best >= ENG_CPU_ISA_AVX2) isas[n_isas++] = ENG_CPU_ISA_AVX2;
    printf("packed kernels on this CPU: %d\n", n_isas);
}

static void test_every_m(void) {
    find_isas();
    static const int nk[][2] = {{16, 16}, {37, 5}, {33, 384}, {48, 7}, {1, 3}};
    for (int i = 0; i < n_isas; i++)
        for (int M = 1; M <= 40; M++)
            for (int s = 0; s < 5; s++)
                CHECK(one_shape(isas[i], M, nk[s][0], nk[s][1], (M + s) % 2));
}

/* MiniLM-sized products (through OpenMP) and odd large ones. */
static void test_large(void) {
    static const int shapes[][3] = {{12, 1152, 384}, {12, 384, 1536}, {5, 1536, 384},
                                    {32, 400, 129}, {1, 385, 1000}, {17, 1000, 77},
                                    {96, 33, 40}, {97, 50, 17}, {130, 64, 31}, {200, 47, 64},
                                    {600, 80, 24}};
    for (int i = 0; i < n_isas; i++)
        for (int s = 0; s < 11; s++)
            for (int bias = 0; bias < 2; bias++)
                CHECK(one_shape(isas[i], shapes[s][0], shapes[s][1], shapes[s][2], bias));
}

/* The engine's entry: packed with a pack and a kernel, OpenBLAS (same
 * result within tolerance) with ENG_CPU_ISA_NONE. */
static void test_dispatch(void) {
    int M = 600, N = 50, K = 70;
    float *x = rand_vec((size_t)M * K), *W = rand_vec((size_t)N * K), *b = rand_vec(N);
    float *y = malloc(sizeof(float) * M * N), *r = malloc(sizeof(float) * M * N);
    eng_cpu_pack p;
    CHECK(eng_cpu_pack_init(&p, W, N, K) == 0);
    eng_cpu_linear_ref(r, x, W, b, M, N, K);
    for (int m = 1; m <= M; m += m < 40 ? 13 : 280) {
        eng_cpu_linear_pk(eng_cpu_gemm_isa(), y, x, W, &p, b, m, N, K);
        CHECK(posy_test_close(y, r, (size_t)m * N, 1e-5f * sqrtf((float)K), 1e-5f));
        eng_cpu_linear_pk(ENG_CPU_ISA_NONE, y, x, W, &p, b, m, N, K);
        CHECK(posy_test_close(y, r, (size_t)m * N, 1e-5f * sqrtf((float)K), 1e-5f));
    }
    /* Negative: a corrupted packed weight (column 49, the masked tail's last
     * valid one) must show up in the packed result. */
    if (n_isas > 0) {
        p.panels[(size_t)3 * K * ENG_CPU_PANEL + 5 * ENG_CPU_PANEL + 1] += 0.5f;
        eng_cpu_linear_pk(isas[0], y, x, W, &p, b, 4, N, K);
        int differs = 0;
        for (int m = 0; m < 4; m++) differs |= fabsf(y[m * N + 49] - r[m * N + 49]) > 1e-3f;
        CHECK(differs);
    }
    eng_cpu_pack_free(&p);
    free(x); free(W); free(b); free(y); free(r);
}

/* Row r of a 300-row batch (4 chunks, OpenMP) equals row r computed alone,
 * bit for bit, in every kernel; and the kernels agree bit for bit. */
static void test_batch_invariant(void) {
    int M = 300, N = 70, K = 390;
    float *x = rand_vec((size_t)M * K), *W = rand_vec((size_t)N * K), *b = rand_vec(N);
    float *all = malloc(sizeof(float) * M * N), *one = malloc(sizeof(float) * N);
    float *first = malloc(sizeof(float) * M * N);
    eng_cpu_pack p;
    CHECK(eng_cpu_pack_init(&p, W, N, K) == 0);
    for (int i = 0; i < n_isas; i++) {
        eng_cpu_linear_packed(isas[i], all, x, &p, b, M);
        int diff = 0;
        for (int r = 0; r < M; r += 7) {
            eng_cpu_linear_packed(isas[i], one, x + (size_t)r * K, &p, b, 1);
            diff += memcmp(one, all + (size_t)r * N, sizeof(float) * N) != 0;
        }
        CHECK_EQ_INT(diff, 0);
        if (i == 0) memcpy(first, all, sizeof(float) * M * N);
        else CHECK(memcmp(first, all, sizeof(float) * M * N) == 0);
    }
    eng_cpu_pack_free(&p);
    free(x); free(W); free(b); free(all); free(one); free(first);
}

/* Packed layout: panel q, row k, lane j holds W[16q + j][k]; pad lanes 0. */
static void test_pack_layout(void) {
    int N = 20, K = 3;
    float *W = rand_vec((size_t)N * K);
    eng_cpu_pack p;
    CHECK(eng_cpu_pack_init(&p, W, N, K) == 0);
    CHECK(((uintptr_t)p.panels & 63) == 0);
    CHECK_EQ_INT(eng_cpu_pack_bytes(N, K), 2 * K * ENG_CPU_PANEL * sizeof(float));
    int bad = 0;
    for (int q = 0; q < 2; q++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < ENG_CPU_PANEL; j++) {
                int n = q * ENG_CPU_PANEL + j;
                float want = n < N ? W[n * K + k] : 0.0f;
                bad += p.panels[(q * K + k) * ENG_CPU_PANEL + j] != want;
            }
    CHECK_EQ_INT(bad, 0);
    eng_cpu_pack_free(&p);
    CHECK(p.panels == NULL);
    free(W);
}

TEST_MAIN(TEST(test_every_m), TEST(test_large), TEST(test_dispatch), TEST(test_batch_invariant),
          TEST(test_pack_layout))

/* lab.h: what every dev/cuda lab shares -- CUDA error checks, random bf16
 * data, the tolerance check |a - b| <= atol + rtol*|ref|, and event timing.
 *
 * A lab links the shipped kernels (posy_engine_cuda, via eng_cu.h), never a
 * copy; it checks them against a plain CPU reference at several sizes
 * (odd ones and a single row included) and prints GB/s or TFLOP/s.  It
 * exits non-zero when any check fails, so tests/cuda/run_gpu_tests.sh can
 * use the labs as the kernels' GPU tests.
 */
#ifndef POSY_LAB_H
#define POSY_LAB_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <algorithm>
#include <vector>
#include "eng_cu.h"

#define CUCHECK(call)                                                                         \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess) {                                                              \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(2);                                                                          \
        }                                                                                     \
    } while (0)

static int lab_failures = 0;

/* xorshift: reproducible, fresh per seed */
static uint64_t lab_rng = 88172645463325252ull;
static inline float lab_uniform(void) { /* [-1, 1) */
    lab_rng ^= lab_rng << 13; lab_rng ^= lab_rng >> 7; lab_rng ^= lab_rng << 17;
    return (float)((lab_rng >> 40) * (1.0 / 8388608.0)) - 1.f;
}

static inline float bfr(float x) { return eng_cu_bf_bits2f(eng_cu_f2bf_bits(x)); }

/* Random bf16 values on the host: `f` holds the rounded floats (the
 * reference's inputs), `b` their bf16 bits (the device's). */
static void lab_rand_bf16(std::vector<float> &f, std::vector<uint16_t> &b, size_t n, float scale) {
    f.resize(n);
    b.resize(n);
    for (size_t i = 0; i < n; i++) {
        b[i] = eng_cu_f2bf_bits(lab_uniform() * scale);
        f[i] = eng_cu_bf_bits2f(b[i]);
    }
}

template <typename T>
static T *lab_upload(const std::vector<T> &h) {
    T *d = NULL;
    CUCHECK(cudaMalloc((void **)&d, h.size() * sizeof(T) + 16));
    CUCHECK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return d;
}

/* Fill device memory with a NaN pattern so unwritten outputs show. */
static void lab_poison(void *d, size_t bytes) { CUCHECK(cudaMemset(d, 0xff, bytes)); }

static std::vector<float> lab_download_bf16(const bf16 *d, size_t n) {
    std::vector<uint16_t> b(n);
    CUCHECK(cudaMemcpy(b.data(), d, n * 2, cudaMemcpyDeviceToHost));
    std::vector<float> f(n);
    for (size_t i = 0; i < n; i++) f[i] = eng_cu_bf_bits2f(b[i]);
    return f;
}

/* Compare; prints the worst element and records a failure.  NaN fails. */
static int lab_check(const char *what, const float *got, const float *ref, size_t n, float atol,
                     float rtol) {
    size_t bad = 0, worst = 0;
    double worst_ex = -1;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - ref[i]), lim = atol + rtol * fabs((double)ref[i]);
        const double ex = d - lim;
        if (!(d <= lim)) bad++;
        if (!(ex <= worst_ex)) { worst_ex = ex; worst = i; }
    }
    printf("  %-44s %s  n=%zu worst[%zu] got %.6g ref %.6g (atol %.1g rtol %.1g)\n", what,
           bad ? "FAIL" : "ok  ", n, worst, n ? got[worst] : 0.f, n ? ref[worst] : 0.f, atol, rtol);
    if (bad) lab_failures++;
    return bad ? 1 : 0;
}

/* Median time of `fn` in ms over `iters` runs, after warm-up. */
template <typename F>
static float lab_time_ms(F fn, int iters) {
    cudaEvent_t a, b;
    CUCHECK(cudaEventCreate(&a));
    CUCHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; i++) fn();
    std::vector<float> t(iters);
    for (int i = 0; i < iters; i++) {
        CUCHECK(cudaEventRecord(a));
        fn();
        CUCHECK(cudaEventRecord(b));
        CUCHECK(cudaEventSynchronize(b));
        CUCHECK(cudaEventElapsedTime(&t[i], a, b));
    }
    CUCHECK(cudaEventDestroy(a));
    CUCHECK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[iters / 2];
}

/* `fn` (launches on the blocking stream st) captured as a CUDA graph with
 * eng_cu_pdl_on set, as the engine's chain is; the caller destroys the
 * executable graph. */
template <typename F>
static cudaGraphExec_t lab_capture(cudaStream_t st, F fn) {
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUCHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    eng_cu_pdl_on = 1;
    fn();
    eng_cu_pdl_on = 0;
    CUCHECK(cudaStreamEndCapture(st, &g));
    CUCHECK(cudaGraphInstantiate(&ge, g, 0));
    CUCHECK(cudaGraphDestroy(g));
    return ge;
}

/* `fn` captured once (lab_capture); the median time of one replay in ms.
 * Launch costs are the graph's, not the host's. */
template <typename F>
static float lab_graph_ms(cudaStream_t st, F fn, int iters) {
    cudaGraphExec_t ge = lab_capture(st, fn);
    const float ms = lab_time_ms([&] { CUCHECK(cudaGraphLaunch(ge, st)); }, iters);
    CUCHECK(cudaGraphExecDestroy(ge));
    return ms;
}

/* one launch (fn) captured with PDL as the chain runs it, replayed three
 * times over a poisoned output: each replay must give got's bits */
template <typename F>
static void lab_check_replays(cudaStream_t st, F fn, const bf16 *y, size_t bytes, const std::vector<float> &got,
                          const char *what) {
    cudaGraphExec_t ge = lab_capture(st, fn);
    int same = 1;
    for (int rep = 0; rep < 3; rep++) {
        lab_poison((void *)y, bytes);
        CUCHECK(cudaGraphLaunch(ge, st));
        CUCHECK(cudaStreamSynchronize(st));
        std::vector<float> again = lab_download_bf16(y, got.size());
        same &= !memcmp(again.data(), got.data(), again.size() * sizeof(float));
    }
    const float one = same ? 1.f : 0.f, want = 1.f;
    lab_check(what, &one, &want, 1, 0.f, 0.f);
    CUCHECK(cudaGraphExecDestroy(ge));
}

/* the model's fold (eng_cu_model.cu, put_folded): Wf = bf16(Wu diag(g)),
 * bf = bf16(bu + Wu beta), cs = the column sums of Wf's bf16 values;
 * Wu is I x H */
static void lab_fold_ln(const std::vector<float> &wu, const std::vector<float> &bu, const std::vector<float> &ga,
                     const std::vector<float> &be, int H, int I, std::vector<uint16_t> &wf, std::vector<uint16_t> &bf,
                     std::vector<float> &cs) {
    wf.resize((size_t)I * H);
    bf.resize(I);
    cs.resize(I);
    for (int j = 0; j < I; j++) {
        double b = bu[j], sum = 0;
        for (int k = 0; k < H; k++) {
            const uint16_t v = eng_cu_f2bf_bits(wu[(size_t)j * H + k] * ga[k]);
            wf[(size_t)j * H + k] = v;
            sum += eng_cu_bf_bits2f(v);
            b += (double)wu[(size_t)j * H + k] * be[k];
        }
        bf[j] = eng_cu_f2bf_bits((float)b);
        cs[j] = (float)sum;
    }
}

static int lab_finish(const char *name) {
    printf("%s: %s (%d failing checks)\n", name, lab_failures ? "FAIL" : "PASS", lab_failures);
    return lab_failures ? 1 : 0;
}

#endif

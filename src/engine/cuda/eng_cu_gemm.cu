/* eng_cu_gemm: the encoder's matrix products through cuBLASLt.
 *
 * Y[M,N] = epi(X[M,K] W[N,K]^T + b) with bf16 operands and output, fp32
 * accumulation (CUBLAS_COMPUTE_32F), bias or bias+GELU fused into the
 * epilogue.  In cuBLAS's column-major terms the row-major Y is Y^T[N,M] =
 * W[N,K] (W's row-major buffer read transposed) times X^T[K,M].
 *
 * Descriptors and the algorithm are made once per (M,N,K,epilogue) and
 * cached: the engine's M is a token bucket, so this is "one algorithm
 * choice per bucket", taken on the bucket's first (eager) run so that graph
 * capture only records launches.  With tuning on (the engine turns it on)
 * and M >= 1024 the choice is the fastest of cuBLASLt's first 8 heuristic
 * candidates (POSY_CUDA_GEMM_CANDIDATES: up to 32), timed on the real
 * operands at that first run
 * (dev/cuda/lab_gemm.cu measured up to 10% between candidates at large M);
 * otherwise the first heuristic answer (see tune() for why small M is not
 * timed).  An optional R adds a residual in the epilogue
 * (beta = 1), which saves the LayerNorm after it one full read.  One
 * workspace serves every call (calls are serialised on the engine's
 * stream), so graphs may bake its address in.
 */
#include "eng_cu.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Candidates asked of the heuristic: 8, or POSY_CUDA_GEMM_CANDIDATES
 * (1..GEMM_CANDIDATES_MAX) for experiments with a wider race. */
#define GEMM_CANDIDATES 8
#define GEMM_CANDIDATES_MAX 32

typedef struct gemm_entry {
    int M, N, K, epi;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c;
    cublasLtMatmulHeuristicResult_t cand[GEMM_CANDIDATES_MAX];
    int n_cand;
    int best;        /* index into cand used by eng_cu_gemm; -1: the skinny kernel, WHICH_OWN(v): ours, version v */
    int tuned;       /* candidates timed (or tuning impossible) */
    float best_us;
} gemm_entry;

struct eng_cu_gemm_ctx {
    cublasLtHandle_t lt;
    void *ws;
    size_t ws_bytes;
    gemm_entry *e;
    int n, cap;
    int tune;
    int own;   /* race eng_cu_gemm_wg_v too, in the versions whose bits (1 << v) are set */
    int n_ask; /* heuristic candidates asked for */
};

void eng_cu_gemm_set_tuning(eng_cu_gemm_ctx *g, int on) { g->tune = on; }
void eng_cu_gemm_set_own(eng_cu_gemm_ctx *g, int versions) { g->own = versions; }

eng_cu_gemm_ctx *eng_cu_gemm_create(size_t workspace_bytes, char *err, size_t errlen) {
    eng_cu_gemm_ctx *g = (eng_cu_gemm_ctx *)calloc(1, sizeof *g);
    if (!g) { snprintf(err, errlen, "out of host memory"); return NULL; }
    cublasStatus_t st = cublasLtCreate(&g->lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cublasLtCreate: %s", cublasLtGetStatusString(st));
        free(g);
        return NULL;
    }
    cudaError_t ce = cudaMalloc(&g->ws, workspace_bytes);
    if (ce != cudaSuccess) {
        snprintf(err, errlen, "cuBLASLt workspace (%zu bytes): %s", workspace_bytes,
                 cudaGetErrorString(ce));
        cublasLtDestroy(g->lt);
        free(g);
        return NULL;
    }
    g->ws_bytes = workspace_bytes;
    g->n_ask = GEMM_CANDIDATES;
    const char *nc = getenv("POSY_CUDA_GEMM_CANDIDATES");
    if (nc && atoi(nc) >= 1 && atoi(nc) <= GEMM_CANDIDATES_MAX) g->n_ask = atoi(nc);
    return g;
}

void eng_cu_gemm_destroy(eng_cu_gemm_ctx *g) {
    if (!g) return;
    for (int i = 0; i < g->n; i++) {
        cublasLtMatmulDescDestroy(g->e[i].op);
        cublasLtMatrixLayoutDestroy(g->e[i].a);
        cublasLtMatrixLayoutDestroy(g->e[i].b);
        cublasLtMatrixLayoutDestroy(g->e[i].c);
    }
    free(g->e);
    cudaFree(g->ws);
    cublasLtDestroy(g->lt);
    free(g);
}

#define LT(call)                                                                          \
    do {                                                                                  \
        cublasStatus_t st_ = (call);                                                      \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                               \
            snprintf(err, errlen, "%s: %s", #call, cublasLtGetStatusString(st_));           \
            return NULL;                                                                  \
        }                                                                                 \
    } while (0)

static gemm_entry *entry_make(eng_cu_gemm_ctx *g, int M, int N, int K, int epi, char *err,
                              size_t errlen) {
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 32;
        gemm_entry *ne = (gemm_entry *)realloc(g->e, (size_t)cap * sizeof *ne);
        if (!ne) { snprintf(err, errlen, "out of host memory"); return NULL; }
        g->e = ne;
        g->cap = cap;
    }
    gemm_entry *e = &g->e[g->n];
    memset(e, 0, sizeof *e);
    e->M = M; e->N = N; e->K = K; e->epi = epi;
    LT(cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    LT(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    LT(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    cublasLtEpilogue_t ep = epi == ENG_CU_EPI_BIAS_GELU ? CUBLASLT_EPILOGUE_GELU_BIAS
                            : epi == ENG_CU_EPI_BIAS    ? CUBLASLT_EPILOGUE_BIAS
                                                        : CUBLASLT_EPILOGUE_DEFAULT;
    LT(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep));
    LT(cublasLtMatrixLayoutCreate(&e->a, CUDA_R_16BF, K, N, K));
    LT(cublasLtMatrixLayoutCreate(&e->b, CUDA_R_16BF, K, M, K));
    LT(cublasLtMatrixLayoutCreate(&e->c, CUDA_R_16BF, N, M, N));
    cublasLtMatmulPreference_t pref;
    LT(cublasLtMatmulPreferenceCreate(&pref));
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes, sizeof g->ws_bytes);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmulAlgoGetHeuristic(g->lt, e->op, e->a, e->b, e->c, e->c, pref,
                                            g->n_ask, e->cand, &e->n_cand);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || e->n_cand == 0) {
        snprintf(err, errlen, "cuBLASLt has no algorithm for %dx%dx%d (epilogue %d): %s", M, N,
                 K, epi, cublasLtGetStatusString(st));
        return NULL;
    }
    g->n++;
    return e;
}

static gemm_entry *entry_get(eng_cu_gemm_ctx *g, int M, int N, int K, int epi, char *err,
                             size_t errlen) {
    for (int i = 0; i < g->n; i++)
        if (g->e[i].M == M && g->e[i].N == N && g->e[i].K == K && g->e[i].epi == epi)
            return &g->e[i];
    return entry_make(g, M, N, K, epi, err, errlen);
}

#define WHICH_OWN(v) (-10 - (v)) /* our kernel in version v (1..6): best = -11..-16 */
#define OWN_VERSION(which) (-10 - (which))

static cublasStatus_t run(eng_cu_gemm_ctx *g, gemm_entry *e, int which, cudaStream_t s,
                          const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y) {
    if (which <= WHICH_OWN(1)) /* its launcher asks eng_cu_order_take */
        return eng_cu_gemm_wg_v(OWN_VERSION(which), s, X, W, bias, R, Y, e->M, e->N, e->K, e->epi) == cudaSuccess
                   ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
    eng_cu_order_take(0); /* cuBLASLt's and the small kernel walk their own way */
    if (which < 0)
        return eng_cu_gemm_small(s, X, W, bias, R, Y, e->M, e->N, e->K, e->epi) == cudaSuccess
                   ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
    if (e->epi != ENG_CU_EPI_NONE) {
        cublasStatus_t st = cublasLtMatmulDescSetAttribute(
            e->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        if (st != CUBLAS_STATUS_SUCCESS) return st;
    }
    const float one = 1.f, zero = 0.f;
    return cublasLtMatmul(g->lt, e->op, &one, W, e->a, X, e->b, R ? &one : &zero, R ? R : Y, e->c,
                          Y, e->c, &e->cand[which].algo, g->ws, g->ws_bytes, s);
}

/* Time every heuristic candidate on the real operands (3 runs each after
 * one warm-up) and keep the fastest.  Blocks the host until the stream is
 * idle, so it runs only on a shape's first, eager, call -- never while a
 * graph is being captured.  Only for M >= TUNE_MIN_M: below that a GEMM
 * lasts a few microseconds, host-timed runs measure launch gaps, and the
 * H200 runs showed the timed choice (and the skinny kernel, which wins in
 * isolation) making the whole one-query graph slower than cuBLASLt's
 * heuristic (bench/results/h200-latency-modes-2026-11-29.txt: MiniLM
 * 16 tokens 139 us raced vs 130 us heuristic, BERT-base 456 vs 366).
 * POSY_CUDA_SKINNY=1 still races the skinny kernel against the heuristic
 * for M <= 64, for experiments.  With g->own, our Hopper kernel
 * (eng_cu_wgmma.cu) runs in the race too wherever it takes the shape: it
 * is kept only where it beats cuBLASLt on the real operands. */
#define TUNE_MIN_M 1024

static void tune(eng_cu_gemm_ctx *g, gemm_entry *e, cudaStream_t s, const bf16 *X,
                 const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y) {
    e->tuned = 1;
    cudaStreamCaptureStatus cs;
    const int skinny = eng_cu_gemm_small_ok(e->M, e->N, e->K) && getenv("POSY_CUDA_SKINNY");
    if (!g->tune || (e->M < TUNE_MIN_M && !skinny) ||
        cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone)
        return;
    cudaEvent_t a, b;
    if (cudaEventCreate(&a) != cudaSuccess) return;
    if (cudaEventCreate(&b) != cudaSuccess) { cudaEventDestroy(a); return; }
    float best = 1e30f;
    const int own = g->own && e->M >= TUNE_MIN_M && eng_cu_gemm_wg_ok(e->M, e->N, e->K, e->epi);
    const int first = own ? WHICH_OWN(6) : skinny ? -1 : 0, last = e->M < TUNE_MIN_M ? 1 : e->n_cand;
    for (int i = first; i < last; i++) {
        if (i == -1 && !skinny) continue;
        if (i < -1 && (i > WHICH_OWN(1) || !(g->own >> OWN_VERSION(i) & 1))) continue;
        if (run(g, e, i, s, X, W, bias, R, Y) != CUBLAS_STATUS_SUCCESS) continue;
        cudaEventRecord(a, s);
        for (int r = 0; r < 3; r++) run(g, e, i, s, X, W, bias, R, Y);
        cudaEventRecord(b, s);
        float ms = 0.f;
        if (cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&ms, a, b) != cudaSuccess)
            continue;
        if (ms < best) { best = ms; e->best = i; }
    }
    e->best_us = best * 1e3f / 3.f;
    if (getenv("POSY_CUDA_TUNE_LOG"))
        fprintf(stderr, "gemm M=%d N=%d K=%d epi=%d: %s %d, %.2f us\n", e->M, e->N, e->K, e->epi,
                e->best <= WHICH_OWN(1) ? "own wgmma version" : e->best < 0 ? "skinny" : "cuBLASLt candidate",
                e->best <= WHICH_OWN(1) ? OWN_VERSION(e->best) : e->best, e->best_us);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    cudaGetLastError(); /* a failed candidate must not leave a sticky launch error */
}

int eng_cu_gemm(eng_cu_gemm_ctx *g, cudaStream_t s, const bf16 *X, const bf16 *W,
                const bf16 *bias, const bf16 *R, bf16 *Y, int M, int N, int K, int epi, char *err,
                size_t errlen) {
    if (ENG_CU_EPI_GATED(epi)) {
        snprintf(err, errlen, "gemm %dx%dx%d: cuBLASLt has no gated epilogue (the chain kernel's and ours only)", M,
                 N, K);
        return -1;
    }
    gemm_entry *e = entry_get(g, M, N, K, epi, err, errlen);
    if (!e) return -1;
    if (!e->tuned) tune(g, e, s, X, W, bias, R, Y);
    cublasStatus_t st = run(g, e, e->best, s, X, W, bias, R, Y);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cublasLtMatmul %dx%dx%d: %s", M, N, K, cublasLtGetStatusString(st));
        return -1;
    }
    return 0;
}

int eng_cu_gemm_candidate(eng_cu_gemm_ctx *g, cudaStream_t s, const bf16 *X, const bf16 *W,
                          const bf16 *bias, bf16 *Y, int M, int N, int K, int epi, int i) {
    char err[256];
    gemm_entry *e = entry_get(g, M, N, K, epi, err, sizeof err);
    if (!e || i >= e->n_cand) return -1;
    return run(g, e, i, s, X, W, bias, NULL, Y) == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

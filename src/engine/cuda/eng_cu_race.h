/* eng_cu_race.h: the per-bucket races' helpers of the graph path (Qwen3's
 * fused products in eng_cu_model_qwen3.cu, the encoders' GEMM + LayerNorm
 * in eng_cu_model.cu).  A fused kernel's speed against the kernels it
 * replaces differs by shape and moved between H200 runs (Qwen3's fused
 * SwiGLU: 0.81x to 1.11x in the lab), so the engine
 * times both on the real operands the first time a bucket runs eagerly
 * and keeps the winner for its captures.
 */
#ifndef POSY_ENG_CU_RACE_H
#define POSY_ENG_CU_RACE_H

#include "eng_cu_model.h"

/* A per-bucket race's helpers: the choice recorded for T (-1: none yet),
 * recording one, and the time of a variant -- a warm-up run (cuBLASLt
 * tunes there), then three timed on the stream; the mean us of a run, or
 * -1 when a run or the timing failed. */
static inline int picks_find(const eng_cu_bucket_picks *p, int T) {
    for (int i = 0; i < p->n; i++)
        if (p->T[i] == T) return p->pick[i];
    return -1;
}
static inline void picks_put(eng_cu_bucket_picks *p, int T, int pick) {
    if (p->n < ENG_CU_BUCKET_PICKS) {
        p->T[p->n] = T;
        p->pick[p->n++] = pick;
    }
}
template <typename F>
static inline float race_us(cudaStream_t s, F once) {
    if (once()) return -1.f;
    cudaEvent_t a, b;
    if (cudaEventCreate(&a) != cudaSuccess) return -1.f;
    float ms = -1.f;
    if (cudaEventCreate(&b) == cudaSuccess) {
        cudaEventRecord(a, s);
        for (int r = 0; r < 3; r++) once();
        cudaEventRecord(b, s);
        if (cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&ms, a, b) != cudaSuccess) ms = -1.f;
        cudaEventDestroy(b);
    }
    cudaEventDestroy(a);
    cudaGetLastError(); /* a failed timing run must not leave a sticky launch error */
    return ms < 0.f ? -1.f : ms * 1e3f / 3.f;
}
static inline int under_capture(cudaStream_t s) {
    cudaStreamCaptureStatus cs;
    return cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone;
}

#endif

/* eng_cu_backend: what the CUDA backend exposes beyond eng_backend_ops --
 * counters for logs, /metrics and the GPU benchmark.  C-callable. */
#ifndef ENG_CU_BACKEND_H
#define ENG_CU_BACKEND_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct posy_engine;

typedef struct eng_cu_stats {
    uint64_t batches;        /* finished */
    uint64_t tokens;         /* real tokens submitted */
    uint64_t padded_tokens;  /* bucket tokens submitted (>= tokens) */
    uint64_t captures;       /* graphs captured (one per bucket at most) */
    uint64_t replays;        /* graph launches */
    uint64_t small_batches;  /* batches run by the persistent small-batch kernel (eng_cu_mega.cu) */
    uint64_t eager_runs;     /* forwards run without a graph (a bucket's first, POSY_CUDA_NO_GRAPH) */
    uint64_t buckets_seen;   /* buckets run at least once (counted when stats are read) */
    double capture_ms;       /* host time spent capturing + instantiating */
    double first_run_ms;     /* host time of buckets' first (eager) runs, idle stream to done */
    double gpu_ms;           /* sum of forward times (events around the forward) */
    double last_gpu_ms;      /* the last finished batch's forward time */
} eng_cu_stats;

/* 0 and *out filled if e runs on the CUDA backend, else -1. */
int eng_cuda_stats(const struct posy_engine *e, eng_cu_stats *out);

/* The token counts of the backend's buckets, smallest first, into
 * tokens[0..max); returns how many (-1 if e is not on the CUDA backend). */
int eng_cuda_buckets(const struct posy_engine *e, int *tokens, int max);

/* A -DENG_CU_TRACE build (eng_cu_trace.h): writes the traced blocks'
 * records to path (NULL: none), empties the buffers when reset, returns
 * the records' count; -1 in other builds or on an error. */
int eng_cuda_trace_dump(const char *path, int reset);

#ifdef __cplusplus
}
#endif
#endif

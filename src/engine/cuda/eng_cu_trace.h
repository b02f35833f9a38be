/* eng_cu_trace.h: per-block timestamps of the one-query chain's kernels,
 * built only with -DENG_CU_TRACE (a diagnostic build; the shipped kernels
 * are untouched without it).
 *
 * Why: removing 24 LayerNorm nodes from BERT-base's chain gained nothing
 * while removing 56 RMSNorm nodes from Qwen3's gained 45 us
 * (dev/cuda/NOTES.md, 2026-12-03), so what is on a query's critical path is
 * not known.  Each traced block records %globaltimer (ns, one clock for
 * every SM) when it starts, when it reaches griddepcontrol.wait, when the
 * wait returns, when its weights have landed (chain GEMMs) and when it
 * ends, with %gridid (one id per launch), its block index and SM.  Whether
 * a GEMM waits on its weights or on its predecessor then reads off the
 *  records: dev/cuda/chain_trace.py lays them out per node.
 *
 * Device globals are per translation unit here (no relocatable device
 * code), so each unit that traces says ENG_CU_TRACE_UNIT once: its own
 * buffer, and a host reader registered at start-up that
 * eng_cuda_trace_dump (eng_cu_trace.cu) calls for every unit.
 */
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

#define ENG_CU_TRACE_MAX 65536 /* records a unit keeps between resets (Qwen3-0.6B: ~20k a query) */

typedef struct eng_cu_trace_rec {
    unsigned long long grid;
    unsigned long long t[5]; /* start, wait reached, wait returned, weights landed, end; 0: not stamped */
    unsigned block, smid;
} eng_cu_trace_rec;

/* the registry (eng_cu_trace.cu): a unit's reader copies out up to max
 * records and, with reset, empties its buffer */
typedef int (*eng_cu_trace_reader)(eng_cu_trace_rec *out, int max, int reset, const char **unit);
int eng_cu_trace_register(eng_cu_trace_reader r);

#ifdef ENG_CU_TRACE
static __device__ __forceinline__ unsigned long long eng_cu_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

#define ENG_CU_TRACE_UNIT(NAME)                                                                         \
    static __device__ eng_cu_trace_rec eng_cu_trace_buf[ENG_CU_TRACE_MAX];                              \
    static __device__ unsigned eng_cu_trace_n;                                                          \
    static __device__ __forceinline__ void eng_cu_trace_put(const unsigned long long *t) {              \
        const unsigned i = atomicAdd(&eng_cu_trace_n, 1u);                                              \
        if (i >= ENG_CU_TRACE_MAX) return;                                                              \
        eng_cu_trace_rec r;                                                                             \
        asm volatile("mov.u64 %0, %%gridid;" : "=l"(r.grid));                                           \
        asm volatile("mov.u32 %0, %%smid;" : "=r"(r.smid));                                             \
        r.block = blockIdx.x + gridDim.x * blockIdx.y;                                                  \
        for (int k = 0; k < 5; k++) r.t[k] = t[k];                                                      \
        eng_cu_trace_buf[i] = r;                                                                        \
    }                                                                                                   \
    static int eng_cu_trace_read(eng_cu_trace_rec *out, int max, int reset, const char **unit) {        \
        unsigned n = 0;                                                                                 \
        *unit = NAME;                                                                                   \
        if (cudaMemcpyFromSymbol(&n, eng_cu_trace_n, sizeof n) != cudaSuccess) return -1;              \
        if (n > ENG_CU_TRACE_MAX) n = ENG_CU_TRACE_MAX;                                                 \
        if ((int)n > max) n = (unsigned)max;                                                            \
        if (n && cudaMemcpyFromSymbol(out, eng_cu_trace_buf, n * sizeof *out) != cudaSuccess) return -1; \
        const unsigned z = 0;                                                                           \
        if (reset && cudaMemcpyToSymbol(eng_cu_trace_n, &z, sizeof z) != cudaSuccess) return -1;        \
        return (int)n;                                                                                  \
    }                                                                                                   \
    static const int eng_cu_trace_registered = eng_cu_trace_register(eng_cu_trace_read);

/* a block's stamps: declared at its start (thread 0 keeps them), stamped
 * at the points above, put at its end */
#define ENG_CU_TRACE_BEGIN() unsigned long long eng_cu_tt[5] = {threadIdx.x == 0 ? eng_cu_now() : 0ull, 0, 0, 0, 0}
#define ENG_CU_TRACE_AT(k) do { if (threadIdx.x == 0) eng_cu_tt[k] = eng_cu_now(); } while (0)
#define ENG_CU_TRACE_END() do { if (threadIdx.x == 0) { eng_cu_tt[4] = eng_cu_now(); eng_cu_trace_put(eng_cu_tt); } } while (0)
#else
#define ENG_CU_TRACE_UNIT(NAME)
#define ENG_CU_TRACE_BEGIN() do { } while (0)
#define ENG_CU_TRACE_AT(k) do { } while (0)
#define ENG_CU_TRACE_END() do { } while (0)
#endif

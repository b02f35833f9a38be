/* eng_cpu_gemm_packed: the CPU engine's own linear layer, on weights packed
 * once at model load.
 *
 * For one short query OpenBLAS's sgemm repacks the whole weight matrix on
 * every call, work that a handful of rows cannot amortise.  Here the weight
 * W[N,K] (nn.Linear layout) is copied once into column panels of
 * ENG_CPU_PANEL = 16 outputs: panel p holds, for k = 0..K-1, the 16 floats
 * W[16p + j][k] side by side (64-byte aligned, columns past N zero), so the
 * kernel streams each panel front to back with one aligned vector load per k
 * and broadcasts x[r][k] against it.  The panel layout is the same for the
 * AVX-512 kernel (one zmm per panel, two panels and up to 12 rows of
 * accumulators) and the AVX2+FMA kernel (two ymm per panel, up to 6 rows);
 * the ISA is chosen at run time, so the build flags stay baseline x86-64.
 * Columns past N are masked on store; bias is fused into the accumulator
 * start.
 *
 * Every output is bias + sum over k in ascending order of fp32 FMAs, in
 * either kernel and whatever M, row blocking or thread count: a row's result
 * does not depend on the batch around it (OpenBLAS's may), so the engine
 * uses this kernel for every batch.  It was measured faster than OpenBLAS at
 * every MiniLM shape from 1 to 16384 rows (bench/bench_linear_packed.c,
 * docs/BENCHMARKS.md): ~3.3x at 12 rows, 1.3x at 65, 1.03-1.13x from 1024.
 *
 * Memory: a packed copy of every linear weight it serves (the original
 * stays, for the OpenBLAS fallback and other users of the weights).
 */
#ifndef ENG_CPU_GEMM_PACKED_H
#define ENG_CPU_GEMM_PACKED_H

#include <stddef.h>

#define ENG_CPU_PANEL 16

typedef enum eng_cpu_isa {
    ENG_CPU_ISA_NONE = 0,   /* no packed kernel: OpenBLAS for every M */
    ENG_CPU_ISA_AVX2 = 2,   /* AVX2 + FMA */
    ENG_CPU_ISA_AVX512 = 3, /* AVX-512F */
} eng_cpu_isa;

/* W[N,K] packed into ceil(N/16) panels of [K][16] floats. */
typedef struct eng_cpu_pack {
    float *panels;
    int N, K;
} eng_cpu_pack;

/* Best kernel this CPU runs (cpuid); ENG_CPU_ISA_NONE off x86-64. */
eng_cpu_isa eng_cpu_gemm_isa(void);

/* Kernel to use: eng_cpu_gemm_isa(), or NONE when the environment
 * sets POSY_CPU_SMALL_GEMM=0 (the OpenBLAS path for every M). */
eng_cpu_isa eng_cpu_gemm_choice(void);

/* Packs W (N, K >= 1).  Returns 0, or -1 when out of memory (p is then
 * empty).  eng_cpu_pack_free releases it (a zeroed pack is a no-op). */
int eng_cpu_pack_init(eng_cpu_pack *p, const float *W, int N, int K);
void eng_cpu_pack_free(eng_cpu_pack *p);
size_t eng_cpu_pack_bytes(int N, int K);

/* y[M,N] = x[M,K] W^T + b (b may be NULL) with the given kernel, any M >= 0,
 * isa no better than the CPU supports (NONE: nothing is computed).
 * OpenMP over column panels when the product is large enough.  y must not
 * alias x. */
void eng_cpu_linear_packed(eng_cpu_isa isa, float *y, const float *x, const eng_cpu_pack *p,
                          const float *b, int M);

/* The engine's entry: the packed kernel when pk is packed (non-NULL
 * panels) and isa is not NONE; otherwise eng_cpu_linear (OpenBLAS) on W. */
void eng_cpu_linear_pk(eng_cpu_isa isa, float *y, const float *x, const float *W,
                       const eng_cpu_pack *pk, const float *b, int M, int N, int K);

#endif

/* eng_cpu_gemm_packed: packing and the packed linear kernels (see the header).
 *
 * Work split: a "column group" is what one tile covers across (two panels =
 * 32 outputs for AVX-512, one panel = 16 for AVX2).  The M rows are cut into
 * near-equal chunks of at most 96 (one for a single query), and a chunk into
 * near-equal row blocks of at most MR rows (12 resp. 6, so that MR x vectors
 * accumulators + the weight vectors fit the 32 zmm / 16 ymm registers).
 * OpenMP splits the (chunk, column group) tiles; a tile runs every row block
 * of its chunk on its column group, so a panel is read from memory once per
 * chunk and re-read from L1/L2 for the next block.  Each row block is a
 * compile-time (rows, panels) instance of one always-inline body, picked by
 * a switch, so the accumulators live in registers (tile512_any and
 * tile256_any must show no stack stores in their k loops).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "eng_cpu_gemm_packed.h"
#include "eng_cpu_kernels.h"

/* Multiply-adds (M*N*K) below which one thread does the whole product: an
 * OpenMP fork/join costs a few microseconds, ~100k FMAs on one core. */
#define ENG_CPU_GEMM_PAR_MIN (1L << 17)

#define P ENG_CPU_PANEL

/* Rows per chunk: a chunk of x (96 x K floats, 144 KiB at K = 384) stays
 * in L2 while a thread streams column groups past it; a multiple of both
 * kernels' row-block sizes. */
#define ENG_CPU_ROW_CHUNK 96

size_t eng_cpu_pack_bytes(int N, int K) {
    return (size_t)((N + P - 1) / P) * (size_t)K * P * sizeof(float);
}

int eng_cpu_pack_init(eng_cpu_pack *p, const float *W, int N, int K) {
    memset(p, 0, sizeof *p);
    size_t bytes = eng_cpu_pack_bytes(N, K);
    float *d = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!d) return -1;
    int np = (N + P - 1) / P;
    for (int q = 0; q < np; q++) {
        float *pan = d + (size_t)q * K * P;
        for (int j = 0; j < P; j++) {
            int n = q * P + j;
            if (n < N)
                for (int k = 0; k < K; k++) pan[(size_t)k * P + j] = W[(size_t)n * K + k];
            else
                for (int k = 0; k < K; k++) pan[(size_t)k * P + j] = 0.0f;
        }
    }
    p->panels = d;
    p->N = N;
    p->K = K;
    return 0;
}

void eng_cpu_pack_free(eng_cpu_pack *p) {
    free(p->panels);
    memset(p, 0, sizeof *p);
}

eng_cpu_isa eng_cpu_gemm_choice(void) {
    const char *env = getenv("POSY_CPU_SMALL_GEMM");
    if (env && !strcmp(env, "0")) return ENG_CPU_ISA_NONE;
    return eng_cpu_gemm_isa();
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

eng_cpu_isa eng_cpu_gemm_isa(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return ENG_CPU_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ENG_CPU_ISA_AVX2;
    return ENG_CPU_ISA_NONE;
}

/* Near-equal split of M rows into nb blocks: block i is rows
 * [row0(i), row0(i+1)). */
static inline int row0(int i, int nb, int M) { return (int)((long)i * M / nb); }

/* ---- AVX-512: one zmm per panel ------------------------------------- */

#define T512 __attribute__((target("avx512f")))
#define MR512 12

static inline __mmask16 mask16(int cols) {
    return cols >= 16 ? (__mmask16)0xffff : cols <= 0 ? (__mmask16)0 : (__mmask16)((1u << cols) - 1);
}

/* y[0..MR, 0..cols) = x[0..MR] . panels pan, pan+1 (when NV = 2) + b, cols
 * <= 16 NV.  Accumulator arrays indexed only by unrolled r stay in zmm. */
static inline __attribute__((always_inline)) T512 void tile512(
    const int MR, const int NV, float *y, int ldy, const float *x, int K, const float *pan,
    const float *b, int cols) {
    __m512 lo[MR512], hi[MR512];
    __mmask16 m0 = mask16(cols), m1 = mask16(cols - 16);
    __m512 b0 = b ? _mm512_maskz_loadu_ps(m0, b) : _mm512_setzero_ps();
    __m512 b1 = b && NV > 1 ? _mm512_maskz_loadu_ps(m1, b + 16) : _mm512_setzero_ps();
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) { lo[r] = b0; hi[r] = b1; }
    const float *p1 = pan + (size_t)K * P;
    for (int k = 0; k < K; k++) {
        __m512 w0 = _mm512_load_ps(pan + (size_t)k * P);
        __m512 w1 = NV > 1 ? _mm512_load_ps(p1 + (size_t)k * P) : w0;
#pragma GCC unroll 12
        for (int r = 0; r < MR; r++) {
            __m512 a = _mm512_set1_ps(x[(size_t)r * K + k]);
            lo[r] = _mm512_fmadd_ps(a, w0, lo[r]);
            if (NV > 1) hi[r] = _mm512_fmadd_ps(a, w1, hi[r]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < MR; r++) {
        _mm512_mask_storeu_ps(y + (size_t)r * ldy, m0, lo[r]);
        if (NV > 1) _mm512_mask_storeu_ps(y + (size_t)r * ldy + 16, m1, hi[r]);
    }
}

#define CASE512(R)                                                       \
    case R:                                                              \
        if (nv == 2) tile512(R, 2, y, ldy, x, K, pan, b, cols);          \
        else tile512(R, 1, y, ldy, x, K, pan, b, cols);                  \
        break;

static T512 void tile512_any(int mr, int nv, float *y, int ldy, const float *x, int K,
                             const float *pan, const float *b, int cols) {
    switch (mr) {
        CASE512(1) CASE512(2) CASE512(3) CASE512(4) CASE512(5) CASE512(6)
        CASE512(7) CASE512(8) CASE512(9) CASE512(10) CASE512(11) CASE512(12)
        default: break;
    }
}

/* Column group g: panels 2g, 2g+1 (the second may not exist). */
static T512 void group512(int g, float *y, const float *x, const eng_cpu_pack *p, const float *b,
                          int M) {
    int N = p->N, K = p->K, n0 = g * 2 * P, cols = N - n0 < 2 * P ? N - n0 : 2 * P;
    if (M <= 0) return;
    int nv = cols > P ? 2 : 1, nb = (M + MR512 - 1) / MR512;
    const float *pan = p->panels + (size_t)n0 * K;
    for (int i = 0; i < nb; i++) {
        int r0 = row0(i, nb, M), r1 = row0(i + 1, nb, M);
        tile512_any(r1 - r0, nv, y + (size_t)r0 * N + n0, N, x + (size_t)r0 * K, K, pan,
                    b ? b + n0 : NULL, cols);
    }
}

/* ---- AVX2 + FMA: two ymm per panel ---------------------------------- */

#define T256 __attribute__((target("avx2,fma")))
#define MR256 6

static inline T256 __m256i mask8(int cols) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), idx);
}

/* Two accumulator arrays (columns 0-7, 8-15) indexed only by unrolled r,
 * so that GCC keeps all of them in registers. */
static inline __attribute__((always_inline)) T256 void tile256(
    const int MR, float *y, int ldy, const float *x, int K, const float *pan, const float *b,
    int cols) {
    __m256 lo[MR256], hi[MR256];
    __m256i m0 = mask8(cols), m1 = mask8(cols - 8);
    __m256 b0 = b ? _mm256_maskload_ps(b, m0) : _mm256_setzero_ps();
    __m256 b1 = b ? _mm256_maskload_ps(b + 8, m1) : _mm256_setzero_ps();
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) { lo[r] = b0; hi[r] = b1; }
    for (int k = 0; k < K; k++) {
        __m256 w0 = _mm256_load_ps(pan + (size_t)k * P), w1 = _mm256_load_ps(pan + (size_t)k * P + 8);
#pragma GCC unroll 6
        for (int r = 0; r < MR; r++) {
            __m256 a = _mm256_broadcast_ss(x + (size_t)r * K + k);
            lo[r] = _mm256_fmadd_ps(a, w0, lo[r]);
            hi[r] = _mm256_fmadd_ps(a, w1, hi[r]);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < MR; r++) {
        _mm256_maskstore_ps(y + (size_t)r * ldy, m0, lo[r]);
        _mm256_maskstore_ps(y + (size_t)r * ldy + 8, m1, hi[r]);
    }
}

#define CASE256(R) \
    case R: tile256(R, y, ldy, x, K, pan, b, cols); break;

static T256 void tile256_any(int mr, float *y, int ldy, const float *x, int K, const float *pan,
                             const float *b, int cols) {
    switch (mr) {
        CASE256(1) CASE256(2) CASE256(3) CASE256(4) CASE256(5) CASE256(6)
        default: break;
    }
}

static T256 void group256(int g, float *y, const float *x, const eng_cpu_pack *p, const float *b,
                          int M) {
    int N = p->N, K = p->K, n0 = g * P, cols = N - n0 < P ? N - n0 : P;
    if (M <= 0) return;
    int nb = (M + MR256 - 1) / MR256;
    const float *pan = p->panels + (size_t)n0 * K;
    for (int i = 0; i < nb; i++) {
        int r0 = row0(i, nb, M), r1 = row0(i + 1, nb, M);
        tile256_any(r1 - r0, y + (size_t)r0 * N + n0, N, x + (size_t)r0 * K, K, pan,
                    b ? b + n0 : NULL, cols);
    }
}

/* Tile (chunk c, column group g) of the flattened index t = c * ng + g:
 * the rows of chunk c (near-equal chunks of at most ROW_CHUNK rows, so
 * that threads splitting the tiles get equal work) against column group g. */
static void run_tile(eng_cpu_isa isa, long t, int ng, int nc, float *y, const float *x,
                     const eng_cpu_pack *p, const float *b, int M) {
    int c = (int)(t / ng), g = (int)(t % ng), r0 = row0(c, nc, M), m = row0(c + 1, nc, M) - r0;
    float *yc = y + (size_t)r0 * p->N;
    const float *xc = x + (size_t)r0 * p->K;
    if (isa == ENG_CPU_ISA_AVX512) group512(g, yc, xc, p, b, m);
    else group256(g, yc, xc, p, b, m);
}

void eng_cpu_linear_packed(eng_cpu_isa isa, float *y, const float *x, const eng_cpu_pack *p,
                          const float *b, int M) {
    if (isa != ENG_CPU_ISA_AVX512 && isa != ENG_CPU_ISA_AVX2) return;
    int np = (p->N + P - 1) / P, ng = isa == ENG_CPU_ISA_AVX512 ? (np + 1) / 2 : np;
    int nc = (M + ENG_CPU_ROW_CHUNK - 1) / ENG_CPU_ROW_CHUNK;
    long n_tiles = (long)nc * ng;
    int par = (long)M * p->N * p->K >= ENG_CPU_GEMM_PAR_MIN && n_tiles > 1;
    /* static: a thread's tiles are consecutive, the same row chunk (kept
     * in L2) against successive column groups (streamed). */
#pragma omp parallel for schedule(static) if (par)
    for (long t = 0; t < n_tiles; t++) run_tile(isa, t, ng, nc, y, x, p, b, M);
}

#else /* not x86-64 GCC/Clang: OpenBLAS only */

eng_cpu_isa eng_cpu_gemm_isa(void) { return ENG_CPU_ISA_NONE; }

void eng_cpu_linear_packed(eng_cpu_isa isa, float *y, const float *x, const eng_cpu_pack *p,
                          const float *b, int M) {
    (void)isa; (void)y; (void)x; (void)p; (void)b; (void)M;
}

#endif

void eng_cpu_linear_pk(eng_cpu_isa isa, float *y, const float *x, const float *W,
                       const eng_cpu_pack *pk, const float *b, int M, int N, int K) {
    if (isa != ENG_CPU_ISA_NONE && pk && pk->panels)
        eng_cpu_linear_packed(isa, y, x, pk, b, M);
    else
        eng_cpu_linear(y, x, W, b, M, N, K);
}

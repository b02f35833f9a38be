/* eng_cu: the CUDA engine's kernels and their launchers, as one C++ header
 * shared by the shipped backend (eng_cu_backend.cu) and the labs in
 * dev/cuda/ (each lab links the same objects, never a copy).
 *
 * Conventions, for every kernel here:
 *  - activations and weights are bf16, row-major; arithmetic accumulates in
 *    fp32; LayerNorm/RMSNorm parameters, softmax and pooling are fp32;
 *  - a launch covers a whole token *bucket* (`rows`), because a CUDA graph
 *    fixes its grid; the real token / sequence counts are read from device
 *    memory (`n_rows_dev`, `n_seqs_dev`, `n_tiles_dev`) so one captured
 *    graph serves any batch that fits the bucket.  Rows past the real count
 *    are skipped (row kernels) or never read (attention, pooling);
 *  - every launcher returns the cudaError_t of its launch (cudaGetLastError)
 *    so callers check each one, also while a graph is being captured.
 */
#ifndef ENG_CU_H
#define ENG_CU_H

#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <cublasLt.h>
#include <stdint.h>

typedef __nv_bfloat16 bf16;

/* ---- launching ------------------------------------------------------------ */

/* Programmatic dependent launch (Hopper): when on, our kernels are launched
 * with programmatic stream serialization, so inside a graph a kernel's
 * launch can overlap its predecessor's tail; each of our kernels starts
 * with ENG_CU_PDL_WAIT (griddepcontrol.wait: blocks until the predecessor
 * has finished and its writes are visible -- a no-op when launched
 * normally) and then lets its own dependents launch early.  Off by default
 * (no gain measured on the H200); POSY_CUDA_PDL=1 turns it on. */
extern int eng_cu_pdl_on;

#define ENG_CU_PDL_WAIT()                                                       \
    do {                                                                        \
        asm volatile("griddepcontrol.wait;\n" ::: "memory");                    \
        asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");       \
    } while (0)

template <typename... KArgs, typename... Args>
static inline cudaError_t eng_cu_launch(void (*k)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                        cudaStream_t s, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = eng_cu_pdl_on ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, ((KArgs)args)...);
}

/* ---- norms (eng_cu_norm.cu) --------------------------------------------- */

/* out[r] = LayerNorm(word[ids[r]] + pos[pos_ids[r]] + type[type_ids[r]]) for
 * r < *n_rows_dev.  `type` may be NULL (no token type embeddings). */
cudaError_t eng_cu_embed_ln(cudaStream_t s, const int32_t *ids, const int32_t *pos_ids,
                            const int32_t *type_ids, const bf16 *word, const bf16 *pos,
                            const bf16 *type, const float *gamma, const float *beta, bf16 *out,
                            int rows, const int *n_rows_dev, int H, float eps);

/* out[r] = LayerNorm(x[r] + res[r]) (res may be NULL; out may alias res). */
cudaError_t eng_cu_add_ln(cudaStream_t s, const bf16 *x, const bf16 *res, const float *gamma,
                          const float *beta, bf16 *out, int rows, const int *n_rows_dev, int H,
                          float eps);

/* Decoder form: if res != NULL, res[r] += x[r] (the residual stream is
 * updated in place) and out[r] = RMSNorm(res[r]) * gamma; else out[r] =
 * RMSNorm(x[r]) * gamma. */
cudaError_t eng_cu_add_rmsnorm(cudaStream_t s, const bf16 *x, bf16 *res, const float *gamma,
                               bf16 *out, int rows, const int *n_rows_dev, int H, float eps);

/* ---- attention (eng_cu_attn.cu) ----------------------------------------- */

/* Query tiles of ENG_CU_ATTN_BM rows: a tile is (sequence, first row). */
#define ENG_CU_ATTN_BM 64

typedef struct eng_cu_attn_args {
    const bf16 *q, *k, *v;        /* row t of head h at q + t*ldq + h*head_dim */
    int ldq, ldk, ldv;            /* row strides, elements */
    bf16 *o;                      /* [tokens, n_heads*head_dim] with stride ldo */
    int ldo;
    int n_heads, n_kv_heads;      /* grouped-query: q head h reads kv head h/(n_heads/n_kv_heads) */
    int head_dim;                 /* 32, 64 or 128 */
    const int32_t *cu_seqlens;    /* device, n_seqs+1 */
    const int32_t *tiles;         /* device, pairs (seq, q0) */
    const int *n_tiles_dev;       /* device, real tile count */
    int max_tiles;                /* grid size (bucket bound) */
    float scale;                  /* softmax scale, usually 1/sqrt(head_dim) */
    int causal;
    int version;                  /* 0 = the shipped kernel; 1 = the first version (labs) */
} eng_cu_attn_args;

/* Host: write the tile list for cu_seqlens[0..n_seqs] into tiles (pairs);
 * returns the tile count.  tiles must hold 2*eng_cu_attn_max_tiles(..). */
int eng_cu_attn_tiles(const int32_t *cu_seqlens, int n_seqs, int32_t *tiles);
/* Upper bound of the tile count for any batch of <= tokens, <= seqs. */
int eng_cu_attn_max_tiles(int tokens, int seqs);

cudaError_t eng_cu_attention(cudaStream_t s, const eng_cu_attn_args *a);

/* ---- pooling (eng_cu_pool.cu) ------------------------------------------- */

enum { ENG_CU_POOL_MEAN = 0, ENG_CU_POOL_CLS = 1, ENG_CU_POOL_LAST = 2 };

/* out[s, 0..dims) = pool(x rows of sequence s)[0..dims), L2-normalised over
 * those dims when `normalize` (Matryoshka truncation: dims < H).  fp32 out,
 * for s < *n_seqs_dev; grid covers max_seqs. */
cudaError_t eng_cu_pool(cudaStream_t s, const bf16 *x, const int32_t *cu_seqlens,
                        const int *n_seqs_dev, int max_seqs, int H, int dims, int mode,
                        int normalize, float *out);

/* ---- GEMM through cuBLASLt (eng_cu_gemm.cu) ------------------------------ */

enum { ENG_CU_EPI_NONE = 0, ENG_CU_EPI_BIAS = 1, ENG_CU_EPI_BIAS_GELU = 2 };

typedef struct eng_cu_gemm_ctx eng_cu_gemm_ctx;

/* One cuBLASLt handle, one workspace, and a cache of (M,N,K,epilogue) ->
 * descriptors + algorithm, filled the first time a shape is seen (so the
 * choice is made once, outside any graph capture if the caller warms up). */
eng_cu_gemm_ctx *eng_cu_gemm_create(size_t workspace_bytes, char *err, size_t errlen);
void eng_cu_gemm_destroy(eng_cu_gemm_ctx *g);

/* Y[M,N] = epi(X[M,K] W[N,K]^T + bias[N]) (+ R[M,N] if R != NULL) --
 * nn.Linear layout, bf16 in/out, fp32 accumulate.  The GELU epilogue is
 * cuBLASLt's (tanh form); R is added after it.  Returns 0, or -1 with a
 * message in err. */
int eng_cu_gemm(eng_cu_gemm_ctx *g, cudaStream_t s, const bf16 *X, const bf16 *W,
                const bf16 *bias, const bf16 *R, bf16 *Y, int M, int N, int K, int epi, char *err,
                size_t errlen);

/* Time the heuristic candidates at a shape's first call (default off). */
void eng_cu_gemm_set_tuning(eng_cu_gemm_ctx *g, int on);

/* The same product for few rows (eng_cu_skinny.cu): M <= 64, N % 16 == 0,
 * K/16 divisible by the kernel's warp count (eng_cu_gemm_small_ok).  Not
 * used by the engine by default (it wins alone but made the whole one-query
 * graph slower on the H200); POSY_CUDA_SKINNY=1 races it at tuning. */
int eng_cu_gemm_small_ok(int M, int N, int K);
cudaError_t eng_cu_gemm_small(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias,
                              const bf16 *R, bf16 *Y, int M, int N, int K, int epi);

/* Lab use: run the same GEMM with the i-th heuristic candidate instead of
 * the cached choice.  Returns -1 when there is no such candidate. */
int eng_cu_gemm_candidate(eng_cu_gemm_ctx *g, cudaStream_t s, const bf16 *X, const bf16 *W,
                          const bf16 *bias, bf16 *Y, int M, int N, int K, int epi, int i);

/* ---- small helpers -------------------------------------------------------- */

/* fp32 -> bf16 with round-to-nearest-even, on the host (weights at open). */
static inline uint16_t eng_cu_f2bf_bits(float f) {
    union { float f; uint32_t u; } v;
    v.f = f;
    if ((v.u & 0x7f800000u) == 0x7f800000u && (v.u & 0x007fffffu))
        return (uint16_t)((v.u >> 16) | 0x40u); /* quiet NaN */
    uint32_t r = 0x7fffu + ((v.u >> 16) & 1u);
    return (uint16_t)((v.u + r) >> 16);
}
static inline float eng_cu_bf_bits2f(uint16_t b) {
    union { float f; uint32_t u; } v;
    v.u = (uint32_t)b << 16;
    return v.f;
}

#endif

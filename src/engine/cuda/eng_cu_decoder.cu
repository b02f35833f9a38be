/* eng_cu_decoder: the elementwise kernels a Qwen3 decoder adds to the
 * encoder's -- per-head q/k RMSNorm fused with the rotary embedding, and
 * SwiGLU.  Both are memory-bound passes between two GEMMs; each reads its
 * input once and writes once, in fp32 arithmetic with one bf16 rounding.
 *
 * q/k norm + rotary: one block per token row (grid = the bucket's rows,
 * rows past the real count exit), QK_WARPS warps walk the row's Q and K
 * heads, one head per warp at a time.  rotate_half pairs element i with
 * i + d/2, so lane l owns the pairs (j, j + d/2) for j = l, l + 32, ... <
 * d/2: the sum of squares is a register sum plus warp shuffles, and the
 * rotation needs no exchange between lanes.  The token's position is its
 * index within its sequence, found by a binary search of cu_seqlens in
 * device memory (cu is tiny and cached), so one captured graph serves any
 * batch; cos/sin come from a table made on the host with the CPU
 * reference's formula (eng_cu_q3_rope_table), loaded once per row and
 * reused for every head.  V heads are not touched.
 *
 * SwiGLU: one thread per 8 outputs (16-byte loads of gate and up, one
 * 16-byte store); the flat index runs over the bucket's rows, rows past the
 * real count exit.  silu(g) = g / (1 + e^-g) with the accurate expf, as
 * the CPU reference computes it.  The same kernel with the GELU gates
 * (Gemma 3, ModernBERT: eng_cu_glu_act).
 *
 * No cuBLASLt epilogue computes silu(gate) * up of two column halves, so
 * SwiGLU stays a kernel of its own after the gate|up GEMM -- except in the
 * one-query chain, whose GEMM has a SwiGLU epilogue (eng_cu_chain_gemm.cu).
 *
 * Both kernels read what does not come from their predecessor (the real
 * counts, cu_seqlens, the rotary table, the norm weights) before their
 * PDL wait (eng_cu.h).
 */
#include "eng_cu.h"

#define QK_WARPS 8
#define SWIGLU_THREADS 256

template <int D>
__global__ void __launch_bounds__(32 * QK_WARPS) qk_norm_rope_kernel(eng_cu_qk_args a) {
    constexpr int HALF = D / 2, NP = (HALF + 31) / 32;
    const int row = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    /* before the wait: the row's position (input block), its cos/sin and
     * the q/k norm weights -- nothing the predecessor writes */
    const bool live = row < a.rows && row < *a.n_rows_dev;
    const bool norm = a.q_norm != nullptr; /* else rotary alone (no q/k norm: qwen2, mistral, llama) */
    float c[NP], sn[NP], gq[2][NP], gk[2][NP];
#pragma unroll
    for (int i = 0; i < NP; i++) c[i] = sn[i] = 0.f, gq[0][i] = gq[1][i] = gk[0][i] = gk[1][i] = 1.f;
    if (live) {
        int p = eng_cu_pos_in_seq(a.cu_seqlens, *a.n_seqs_dev, row);
        p = min(max(p, 0), a.rope_rows - 1); /* never past the table (the host keeps p inside) */
        const float2 *cs = (const float2 *)(a.rope + (size_t)p * D);
#pragma unroll
        for (int i = 0; i < NP; i++) {
            const int j = lane + 32 * i;
            if (j < HALF) {
                const float2 t = cs[j];
                c[i] = t.x;
                sn[i] = t.y;
                if (norm) {
                    gq[0][i] = a.q_norm[j];
                    gq[1][i] = a.q_norm[j + HALF];
                    gk[0][i] = a.k_norm[j];
                    gk[1][i] = a.k_norm[j + HALF];
                }
            }
        }
    }
    ENG_CU_PDL_WAIT();
    if (!live) return;
    bf16 *base = a.qkv + (size_t)row * a.ld;
    const int nrot = a.n_heads + a.n_kv_heads;
    for (int h = warp; h < nrot; h += QK_WARPS) {
        bf16 *x = base + (size_t)h * D;
        const bool isq = h < a.n_heads;
        float x1[NP], x2[NP], ss = 0.f;
#pragma unroll
        for (int i = 0; i < NP; i++) {
            const int j = lane + 32 * i;
            x1[i] = x2[i] = 0.f;
            if (j < HALF) {
                x1[i] = __bfloat162float(x[j]);
                x2[i] = __bfloat162float(x[j + HALF]);
                ss += x1[i] * x1[i] + x2[i] * x2[i];
            }
        }
        const float r = norm ? rsqrtf(eng_cu_warp_sum(ss) / (float)D + a.eps) : 1.f;
#pragma unroll
        for (int i = 0; i < NP; i++) {
            const int j = lane + 32 * i;
            if (j < HALF) {
                const float v1 = x1[i] * r * (isq ? gq[0][i] : gk[0][i]);
                const float v2 = x2[i] * r * (isq ? gq[1][i] : gk[1][i]);
                x[j] = __float2bfloat16(v1 * c[i] - v2 * sn[i]);
                x[j + HALF] = __float2bfloat16(v2 * c[i] + v1 * sn[i]);
            }
        }
    }
}

cudaError_t eng_cu_qk_norm_rope(cudaStream_t s, const eng_cu_qk_args *a) {
    if (a->rows <= 0 || a->rope_rows <= 0 || a->n_heads <= 0 || a->n_kv_heads < 0 || !a->n_rows_dev ||
        !a->n_seqs_dev || a->ld < (a->n_heads + 2 * a->n_kv_heads) * a->head_dim || !a->q_norm != !a->k_norm)
        return cudaErrorInvalidValue;
    const dim3 grid(a->rows), block(32 * QK_WARPS);
    cudaError_t e;
    switch (a->head_dim) {
    case 32: e = eng_cu_launch(qk_norm_rope_kernel<32>, grid, block, 0, s, *a); break;
    case 64: e = eng_cu_launch(qk_norm_rope_kernel<64>, grid, block, 0, s, *a); break;
    case 128: e = eng_cu_launch(qk_norm_rope_kernel<128>, grid, block, 0, s, *a); break;
    case 256: e = eng_cu_launch(qk_norm_rope_kernel<256>, grid, block, 0, s, *a); break; /* Gemma 3 */
    default: return cudaErrorInvalidValue;
    }
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* The gate: SiLU (SwiGLU, Qwen3 and its relatives), the tanh GELU
 * (Gemma 3's gelu_pytorch_tanh) or the exact erf GELU (ModernBERT), each
 * with the CPU engine's formula (eng_cpu_swiglu / eng_cpu_geglu_tanh /
 * eng_cpu_geglu_erf). */
template <int ACT>
static __device__ __forceinline__ float glu_gate(float v) {
    if constexpr (ACT == ENG_CU_GLU_GELU_TANH)
        return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    else if constexpr (ACT == ENG_CU_GLU_GELU_ERF)
        return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    else
        return v / (1.f + expf(-v));
}

template <int ACT>
__global__ void __launch_bounds__(SWIGLU_THREADS)
swiglu_kernel(const bf16 *gu, bf16 *out, int rows, const int *n_rows_dev, int inter) {
    const int cpr = inter >> 3; /* 8-value chunks per output row */
    const size_t idx = (size_t)blockIdx.x * SWIGLU_THREADS + threadIdx.x;
    const int row = (int)(idx / (size_t)cpr), c = (int)(idx % (size_t)cpr);
    const bool live = row < rows && row < *n_rows_dev; /* the count: input block, before the wait */
    ENG_CU_PDL_WAIT();
    if (!live) return;
    const bf16 *g = gu + (size_t)row * 2 * inter + (size_t)c * 8;
    float gv[8], uv[8], y[8];
    eng_cu_load8(g, gv);
    eng_cu_load8(g + inter, uv);
#pragma unroll
    for (int j = 0; j < 8; j++) y[j] = glu_gate<ACT>(gv[j]) * uv[j];
    eng_cu_store8(out + (size_t)row * inter + (size_t)c * 8, y);
}

cudaError_t eng_cu_glu_act(cudaStream_t s, const bf16 *gu, bf16 *out, int rows, const int *n_rows_dev, int inter,
                           int act) {
    if (rows <= 0 || inter <= 0 || inter % 8 || !n_rows_dev ||
        (act != ENG_CU_GLU_SILU && act != ENG_CU_GLU_GELU_TANH && act != ENG_CU_GLU_GELU_ERF))
        return cudaErrorInvalidValue;
    const size_t threads = (size_t)rows * (size_t)(inter / 8);
    const size_t blocks = (threads + SWIGLU_THREADS - 1) / SWIGLU_THREADS;
    if (blocks > 0x7fffffffu) return cudaErrorInvalidValue;
    const dim3 grid((unsigned)blocks), block(SWIGLU_THREADS);
    cudaError_t e = act == ENG_CU_GLU_GELU_TANH
                        ? eng_cu_launch(swiglu_kernel<ENG_CU_GLU_GELU_TANH>, grid, block, 0, s, gu, out, rows,
                                        n_rows_dev, inter)
                    : act == ENG_CU_GLU_GELU_ERF
                        ? eng_cu_launch(swiglu_kernel<ENG_CU_GLU_GELU_ERF>, grid, block, 0, s, gu, out, rows,
                                        n_rows_dev, inter)
                        : eng_cu_launch(swiglu_kernel<ENG_CU_GLU_SILU>, grid, block, 0, s, gu, out, rows, n_rows_dev,
                                        inter);
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t eng_cu_swiglu(cudaStream_t s, const bf16 *gu, bf16 *out, int rows,
                          const int *n_rows_dev, int inter) {
    return eng_cu_glu_act(s, gu, out, rows, n_rows_dev, inter, ENG_CU_GLU_SILU);
}

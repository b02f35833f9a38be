/* eng_cpu_decoder: the fp32 CPU kernels a Qwen3-style decoder adds to the
 * encoder's (eng_cpu_kernels.h): RMSNorm, per-head q/k RMSNorm, rotary
 * position embeddings, grouped-query varlen attention and the SiLU-gated
 * MLP activation.
 *
 * As in eng_cpu_kernels.h every op has an `_ref` oracle (eng_cpu_decoder_ref.c:
 * one thread, plain loops, double accumulators) and a fast version
 * (eng_cpu_decoder.c: OpenMP over rows, omp simd inside a row, OpenBLAS for
 * the attention products); tests/unit/test_cpu_decoder.c holds each fast
 * kernel to its reference.  Strict fp32, no fast-math.
 *
 * Layouts (row-major, packed sequences, no padding):
 *   fused QKV  qkv [T, ld], ld = (n_heads + 2*n_kv_heads) * head_dim:
 *              Q heads at column 0, K heads at n_heads*head_dim, V heads
 *              at (n_heads + n_kv_heads)*head_dim, head h of each at
 *              h*head_dim.  Query head h reads KV head h / (n_heads /
 *              n_kv_heads), the grouping Hugging Face's repeat_kv implies.
 *   attention output out [T, n_heads*head_dim].
 * Positions restart at 0 in every packed sequence (cu_seqlens), exactly as
 * one sequence run alone through transformers.
 */
#ifndef ENG_CPU_DECODER_H
#define ENG_CPU_DECODER_H

#include <stddef.h>
#include <stdint.h>
#include "eng_rope.h"

/* y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * g for n_rows rows of H (y may
 * equal x), the Qwen3/Llama RMSNorm (weight multiplies directly, not 1+w). */
void eng_cpu_rmsnorm_ref(float *y, const float *x, const float *g, float eps, int n_rows, int H);
void eng_cpu_rmsnorm(float *y, const float *x, const float *g, float eps, int n_rows, int H);

/* In place RMSNorm of every head_dim-wide head of n_heads heads starting at
 * column `col` of each of n_rows rows of stride ld (Qwen3's q_norm/k_norm,
 * applied to the fused QKV rows before rotary embedding). */
void eng_cpu_rmsnorm_heads_ref(float *x, size_t ld, size_t col, int n_rows, int n_heads, int head_dim,
                               const float *g, float eps);
void eng_cpu_rmsnorm_heads(float *x, size_t ld, size_t col, int n_rows, int n_heads, int head_dim,
                           const float *g, float eps);

/* Rotary embedding as transformers applies it (rotate_half convention):
 * for head x of width d, i < d/2, position p (index within its sequence):
 *   a = (float)(inv_freq[i] * (float)p),  inv_freq[i] = 1 / theta^(2i/d)
 *                                          (scaled as eng_rope.h says)
 *   x'[i]       = x[i] cos a - x[i+d/2] sin a
 *   x'[i+d/2]   = x[i+d/2] cos a + x[i] sin a
 * The angle is formed in fp32 because that is how the reference model
 * defines it (inv_freq and the position product are float32 tensors);
 * cos/sin of that angle are then taken in double and rounded.  Rotates
 * the Q and K heads of the fused QKV rows in place. */
void eng_cpu_rope_ref(float *qkv, const int32_t *cu_seqlens, int n_seqs, int n_heads, int n_kv_heads,
                      int head_dim, const eng_rope *rope);
void eng_cpu_rope(float *qkv, const int32_t *cu_seqlens, int n_seqs, int n_heads, int n_kv_heads,
                  int head_dim, const eng_rope *rope);

/* Grouped-query attention over packed sequences: out[t, h] = softmax(q_h
 * k_g^T / sqrt(d)) v_g within t's own sequence (causal: keys up to t),
 * g = h / (n_heads / n_kv_heads). */
void eng_cpu_attention_gqa_ref(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                               int n_heads, int n_kv_heads, int head_dim, int causal);
/* The same with a sliding window: query t sees keys k with |t - k| <
 * window (and k <= t when causal); window 0: none (Gemma 3's local layers). */
void eng_cpu_attention_gqa_window_ref(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                                      int n_heads, int n_kv_heads, int head_dim, int causal, int window);
/* Same scratch contract as eng_cpu_attention (eng_cpu_attention_scratch_floats).
 * window > 0: keys at |query - key| >= window masked (as the _window_ref).
 * Returns 0, or -1 if scratch cannot hold one thread's work. */
int eng_cpu_attention_gqa(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                          int n_heads, int n_kv_heads, int head_dim, int causal, int window, float *scratch,
                          size_t scratch_floats);

/* out[r, j] = silu(gu[r, j]) * gu[r, n_inter + j] for n_rows rows: gate and up
 * projections side by side in one [rows, 2*n_inter] GEMM result; silu(x) =
 * x / (1 + e^-x).  out must not alias gu. */
void eng_cpu_swiglu_ref(float *out, const float *gu, int n_rows, int n_inter);
void eng_cpu_swiglu(float *out, const float *gu, int n_rows, int n_inter);
/* out[r] = gelu_tanh(gate[r]) * up[r], same layout (Gemma 3's MLP). */
void eng_cpu_geglu_tanh(float *out, const float *gu, int n_rows, int NI);
/* out[r] = gelu(gate[r]) * up[r] with the exact (erf) GELU (ModernBERT). */
void eng_cpu_geglu_erf(float *out, const float *gu, int n_rows, int NI);

/* x[i] += y[i] over n floats (residual connections). */
void eng_cpu_add(float *x, const float *y, size_t n);

#endif

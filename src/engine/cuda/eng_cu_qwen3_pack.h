/* eng_cu_qwen3_pack: the host image of a Qwen3 model's GPU weights, in
 * plain C (no CUDA types) so that a CPU-only build can unit-test it
 * (tests/unit/test_cu_qwen3_pack.c).
 *
 * The CUDA backend uploads a model as one device image, filled through a
 * host buffer a window at a time (eng_cu_q3_fill_window).
 * For Qwen3 that image holds, at 256-byte aligned offsets:
 *   embed        bf16 [vocab, H]
 *   norm         fp32 [H]                  final RMSNorm
 *   rope         fp32 [rope_rows][d/2][2]  cos, sin of the rotary angle
 *   per layer    qkv_w bf16 [(nh + 2 nkv) d, H]  Q|K|V stacked (one GEMM)
 *                qkv_b bf16 (attention_bias only), o_w bf16 [H, nh d],
 *                o_b, q_norm / k_norm fp32 [d] (Qwen3 only), ln1 / ln2 fp32 [H],
 *                gu_w bf16 [2I, H]  gate rows then up rows (one GEMM),
 *                down_w bf16 [H, I]
 * Matrices keep nn.Linear's [out, in] layout: cuBLASLt reads them
 * transposed (eng_cu_gemm.cu), so nothing is transposed here.  The
 * stacking itself is done by the loader (eng_qwen3_weights.c); this file
 * converts to bf16 (round to nearest even) and places.
 *
 * The rotary table holds exactly what the CPU reference computes
 * (eng_cpu_rope_ref): angle = (float)(inv_freq_f32[i] * (float)p) with the
 * frequencies of eng_rope.h (rope scaling included), then
 * cos and sin in double, rounded to float -- so the GPU kernel's rotation
 * differs from the CPU's only by the bf16 storage of q and k.
 */
#ifndef ENG_CU_QWEN3_PACK_H
#define ENG_CU_QWEN3_PACK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "eng_internal.h"

#define ENG_CU_Q3_NONE ((size_t)-1)

typedef struct eng_cu_q3_layer_off {
    size_t qkv_w, qkv_b, o_w, o_b;      /* bf16; biases ENG_CU_Q3_NONE when absent */
    size_t q_norm, k_norm, ln1, ln2;    /* fp32; q/k norm ENG_CU_Q3_NONE when absent (qwen2, mistral, llama) */
    size_t gu_w, down_w;                /* bf16 */
    size_t down_b;                      /* bf16 [H]: GTE's; ENG_CU_Q3_NONE when absent */
    /* Gemma 3: post_attn / post_mlp fp32 [H]; ModernBERT: the LayerNorms'
     * biases ln1_b / ln2_b fp32 [H], and ln1 is ENG_CU_Q3_NONE in layer 0;
     * ENG_CU_Q3_NONE where the model has none */
    size_t post_attn, post_mlp, ln1_b, ln2_b;
} eng_cu_q3_layer_off;

typedef struct eng_cu_q3_image {
    int H, I, L, heads, kv_heads, head_dim, vocab, rope_rows;
    /* set by the caller between plan and fill: 1 folds each layer's
     * RMSNorm weights into the matrix that follows (qkv_w columns times
     * ln1, gu_w columns times ln2, one bf16 rounding of the fp32 product)
     * and stores ln1 / ln2 as ones, so RMSNorm(x) * g W^T is computed as
     * RMSNorm(x) (W diag(g))^T -- what lets the one-query chain apply the
     * norm as a per-row scale in the GEMM's epilogue */
    int fold_norms;
    int local_rope;                     /* set by plan: a second rotary table (Gemma 3, ModernBERT) */
    int qkv_n, attn_n;                  /* (heads + 2 kv_heads) * head_dim, heads * head_dim */
    size_t embed, norm, rope;           /* byte offsets */
    /* Gemma 3 / ModernBERT: the sliding layers' rotary table (as rope),
     * ModernBERT's embedding LayerNorm (weight, bias) and final norm bias,
     * all fp32; ENG_CU_Q3_NONE where absent */
    size_t rope_local, emb_norm, emb_norm_b, norm_b;
    eng_cu_q3_layer_off *layers;        /* [L] */
    size_t bytes;                       /* size of the whole image */
} eng_cu_q3_image;

/* Can the CUDA backend run this model?  Refuses everything but a model of
 * the decoders' family (qwen3 and its relatives, Gemma 3, ModernBERT)
 * whose shapes the kernels support, and refuses even that when env
 * POSY_CUDA_QWEN3=0 (an off switch; the path was verified on the H200,
 * tests/cuda/run_qwen3_gpu.sh).  0 or -1 + err. */
int eng_cu_q3_check(const eng_config *cfg, posy_err *err);

/* Lay out the image (offsets, total size) for weights w and a rotary table
 * of rope_rows positions.  0, or -1 with err set. */
int eng_cu_q3_plan(eng_cu_q3_image *im, const eng_config *cfg, const eng_qwen3_weights *w,
                   int rope_rows, posy_err *err);
/* Write the planned image into host memory of im->bytes bytes (the walk
 * recomputes the planned offsets on the way). */
void eng_cu_q3_fill(eng_cu_q3_image *im, const eng_qwen3_weights *w, const eng_rope *rope,
                    const eng_rope *rope_local, void *host);
/* The same, bytes [lo, hi) of the image only, into dst[0 .. hi - lo):
 * lo and hi multiples of 256 (hi may be im->bytes).  A sequence of windows
 * covering the image writes what one fill writes, byte for byte, so the
 * upload needs a buffer of one window instead of the whole image; the
 * alignment gaps between placements are left as they were. */
void eng_cu_q3_fill_window(eng_cu_q3_image *im, const eng_qwen3_weights *w, const eng_rope *rope,
                           const eng_rope *rope_local, void *dst, size_t lo, size_t hi);
void eng_cu_q3_image_free(eng_cu_q3_image *im);

/* out[(p * head_dim/2 + i) * 2 + {0, 1}] = cos, sin of the rotary angle of
 * frequency i at position p, for p < rows (see the header comment). */
void eng_cu_q3_rope_table(float *out, int rows, int head_dim, const eng_rope *rope);

#ifdef __cplusplus
}
#endif
#endif

/* eng_cpu_kernels: the fp32 CPU kernels of the BERT-family encoder.
 *
 * Every op comes twice: `eng_cpu_<op>_ref` is the oracle (plain loops, one
 * thread, double accumulation where it is cheap) and `eng_cpu_<op>` is the
 * version the engine runs (OpenBLAS sgemm for every product, OpenMP over
 * tokens, heads or sequences, no allocation).  tests/unit/test_cpu_kernels.c
 * holds each fast kernel to its reference; the CUDA backend holds its kernels
 * to the fast ones.  Strict fp32 (no fast-math); the fast versions only
 * reorder sums (omp simd reductions), which is why they carry a tolerance.
 *
 * Layouts (row-major, packed batches with no padding):
 *   hidden states  x    [n_tokens, H]
 *   fused QKV      qkv  [n_tokens, 3H]: Q at column 0, K at H, V at 2H, head
 *                       h at columns h*head_dim .. (h+1)*head_dim of each
 *   linear weight  W    [N, K] (PyTorch nn.Linear): y = x W^T + b
 *   cu_seqlens     [n_seqs + 1], cu[0] = 0, sequence s = tokens cu[s]..cu[s+1]
 * Callers pass batches that posy_engine_validate accepted; kernels do not
 * re-check ids or lengths.
 */
#ifndef ENG_CPU_KERNELS_H
#define ENG_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>
#include "posy_engine.h"
#include "eng_relpos.h"

/* The build targets baseline x86-64 (SSE2) so the binary runs anywhere;
 * the few elementwise loops that matter get AVX2 and AVX-512 clones chosen
 * at load time (GCC/Clang function multiversioning). */
#if defined(__x86_64__) && defined(__GNUC__)
#define ENG_CPU_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ENG_CPU_CLONES
#endif

/* Embedding tables and their LayerNorm. */
typedef struct eng_cpu_emb {
    const float *word;          /* [vocab, H] */
    const float *pos;           /* [max_position_embeddings, H], or NULL (DeBERTa v3: relative positions only) */
    const float *type;          /* [type_vocab, H], or NULL (no token types) */
    const float *ln_g, *ln_b;   /* [H] */
    int hidden;
    int position_offset;        /* RoBERTa/XLM-R: pad_token_id + 1; BERT: 0 */
    int pad_id;                 /* RoBERTa/XLM-R: pad_token_id; -1: none (BERT) */
    float eps;
} eng_cpu_emb;

/* out[t] = LN(word[ids[t]] + pos[p] + type[type_ids[t]]), type_ids NULL
 * meaning all 0.  p = i + position_offset where i is t's index inside its
 * sequence; except with pad_id >= 0 (RoBERTa), where p follows Hugging
 * Face's create_position_ids_from_input_ids: a pad token sits at position
 * pad_id and is not counted, so tokens after it move down by one. */
void eng_cpu_embed_ref(const eng_cpu_emb *m, const int32_t *ids, const int32_t *type_ids,
                       const int32_t *cu_seqlens, int n_seqs, float *out);
void eng_cpu_embed(const eng_cpu_emb *m, const int32_t *ids, const int32_t *type_ids,
                   const int32_t *cu_seqlens, int n_seqs, float *out);

/* y[M,N] = x[M,K] W[N,K]^T + b[N] (b may be NULL).  y must not alias x. */
void eng_cpu_linear_ref(float *y, const float *x, const float *W, const float *b, int M, int N,
                        int K);
void eng_cpu_linear(float *y, const float *x, const float *W, const float *b, int M, int N, int K);

/* In place over n floats: exact GELU 0.5 x (1 + erf(x / sqrt 2)), and the
 * tanh approximation ("gelu_new", "gelu_pytorch_tanh"). */
void eng_cpu_gelu_ref(float *x, size_t n);
void eng_cpu_gelu(float *x, size_t n);
void eng_cpu_gelu_tanh_ref(float *x, size_t n);
void eng_cpu_gelu_tanh(float *x, size_t n);

/* x[r] = LN(x[r] + res[r]) * g + b for each of n_rows rows of H (res may be
 * NULL: plain LayerNorm).  Biased variance, eps inside the square root, as
 * torch.nn.LayerNorm. */
void eng_cpu_add_layernorm_ref(float *x, const float *res, const float *g, const float *b,
                               float eps, int n_rows, int H);
void eng_cpu_add_layernorm(float *x, const float *res, const float *g, const float *b, float eps,
                           int n_rows, int H);

/* Numerically stable softmax of x[0..n) in place (max subtracted); the
 * fast one is the row softmax the attention kernel uses. */
void eng_cpu_softmax_ref(float *x, int n);
void eng_cpu_softmax(float *x, int n);

/* Multi-head attention over packed sequences.  out[t, h*d..] = softmax(q k^T
 * / sqrt(d) + bias) v within t's own sequence only (causal: keys up to t).
 * qkv as above, out [n_tokens, n_heads*head_dim].  bias: 0, or with
 * rel_weight (MPNet's [ENG_RELPOS_BUCKETS, n_heads], eng_relpos.h) the
 * weight of the bucket of (key - query) positions within the sequence; the
 * reference looks the bucket up itself, the fast version reads the
 * expanded table `rel` (NULL: none). */
void eng_cpu_attention_ref(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                           int n_heads, int head_dim, int causal, const float *rel_weight);

/* Scratch the fast attention needs for sequences up to max_len on n_threads
 * threads.  With less scratch it runs on fewer threads (at least one thread's
 * worth is required). */
size_t eng_cpu_attention_scratch_floats(int max_len, int n_threads);
/* Returns 0, or -1 if `scratch` cannot hold one thread's work for the
 * longest sequence of this batch, or a sequence is longer than rel's
 * table (nothing is computed then). */
int eng_cpu_attention(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs,
                      int n_heads, int head_dim, int causal, const eng_relpos *rel, float *scratch,
                      size_t scratch_floats);

/* DeBERTa's disentangled attention (eng_deberta.h) over packed sequences,
 * bidirectional: out[t, h*d..] = softmax(scale (q_i . k_j + q_i . kr[c] +
 * k_j . qr[c])) v within t's sequence, c = idx[(max_len - 1) + i - j] (i, j
 * positions in the sequence), scale = 1 / sqrt(d * scale_factor).  kr and
 * qr are the layer's projections of the relative table [rows, n_heads *
 * head_dim] (heads side by side as in q and k), NULL when that term is
 * off. */
typedef struct eng_cpu_deb_att {
    const float *kr, *qr;
    const int *idx;             /* [2 * max_len - 1]: eng_deberta_index_table */
    int max_len, rows;
    int scale_factor;
} eng_cpu_deb_att;
void eng_cpu_attention_deberta_ref(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs, int n_heads,
                                   int head_dim, const eng_cpu_deb_att *a);
/* Scratch for sequences up to max_len on n_threads (fewer threads with less) */
size_t eng_cpu_attention_deberta_scratch_floats(int max_len, int rows, int n_threads);
/* 0, or -1 when scratch cannot hold one thread's work or a sequence is
 * longer than max_len (nothing computed) */
int eng_cpu_attention_deberta(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs, int n_heads,
                              int head_dim, const eng_cpu_deb_att *a, float *scratch, size_t scratch_floats);

/* out[s] = pooled hidden states of sequence s: mean over its tokens, its
 * first token (CLS), or its last token.  skip (NULL: none) drops skip[s]
 * leading tokens first, as sentence-transformers' include_prompt false
 * masks the prompt: mean and CLS then start after them, last is unchanged. */
void eng_cpu_pool_ref(float *out, const float *x, const int32_t *cu_seqlens, const int32_t *skip, int n_seqs,
                      int H, posy_pooling mode);
void eng_cpu_pool(float *out, const float *x, const int32_t *cu_seqlens, const int32_t *skip, int n_seqs, int H,
                  posy_pooling mode);

/* A static embedding model's forward pass (torch's EmbeddingBag, mode
 * mean): out[s] = the mean of table rows ids[t] over sequence s's tokens
 * (after its skip[s] leading ones when skip is given), table [*, H]; a
 * sequence of no tokens gets zeros, as torch gives an empty bag. */
void eng_cpu_static_mean(float *out, const float *table, int H, const int32_t *ids, const int32_t *cu_seqlens,
                         const int32_t *skip, int n_seqs);

/* x[r] /= max(||x[r]||_2, 1e-12) for each row (torch F.normalize). */
/* Each sequence's rows of x [T, H] to dst[s] (length * H floats), where
 * dst[s] is not NULL: posy_batch.tok_out.  A copy: no reference needed. */
void eng_cpu_copy_tokens(float *const *dst, const float *x, const int32_t *cu_seqlens, int n_seqs, int H);
void eng_cpu_l2_normalize_ref(float *x, int n_rows, int H);
void eng_cpu_l2_normalize(float *x, int n_rows, int H);

#endif

/* eng_cu_model: a BERT-family encoder resident on one GPU -- its bf16
 * weights (one allocation, uploaded once), its activation arena (one
 * allocation sized for the largest bucket) and the forward pass as a
 * sequence of launches on a stream, which the backend either runs eagerly
 * or records into a CUDA graph.
 *
 * The forward reads its inputs from a device block whose layout depends on
 * the bucket alone (eng_cu_in_layout): real token and sequence counts,
 * cu_seqlens, attention tiles, ids, positions, token types.  The backend
 * fills the same layout in pinned memory and copies it in before each run.
 */
#ifndef ENG_CU_MODEL_H
#define ENG_CU_MODEL_H

#include "eng_cu.h"
extern "C" {
#include "eng_internal.h"
}

typedef struct eng_cu_layer {
    bf16 *qkv_w, *qkv_b, *ao_w, *ao_b, *up_w, *up_b, *down_w, *down_b;
    float *ln1_g, *ln1_b, *ln2_g, *ln2_b;
} eng_cu_layer;

/* Offsets (in int32 units) of the input block for a bucket. */
typedef struct eng_cu_in_layout {
    int tokens, seqs, max_tiles;        /* the bucket's bounds */
    size_t meta, cu, tiles, ids, pos, type, total;
} eng_cu_in_layout;

enum { ENG_CU_META_TOKENS = 0, ENG_CU_META_SEQS = 1, ENG_CU_META_TILES = 2, ENG_CU_META_N = 4 };

typedef struct eng_cu_model {
    /* shape */
    int H, I, L, heads, head_dim, vocab, type_vocab, max_pos, pos_off, pos_rows, pool_mode, normalize, epi_up;
    float eps;
    /* weights: one device allocation */
    void *wmem;
    size_t wbytes;
    bf16 *word, *pos, *type;
    float *emb_g, *emb_b;
    eng_cu_layer *layers;
    /* activations: one device allocation for max_tokens / max_seqs */
    int max_tokens, max_seqs;
    void *amem;
    size_t abytes;
    bf16 *x, *qkv, *ctx, *y, *inter;
    float *pooled;                      /* [max_seqs, H] */
    int32_t *d_in;                      /* input block, eng_cu_in_layout(max) ints */
    eng_cu_gemm_ctx *gemm;
} eng_cu_model;

eng_cu_in_layout eng_cu_in_layout_for(int tokens, int seqs);

/* Check the architecture, upload weights and reserve the arena.  Errors
 * say what is unsupported, or how much memory was asked for and is free. */
int eng_cu_model_open(eng_cu_model *m, const eng_config *cfg, const eng_bert_weights *w,
                      int max_tokens, int max_seqs, posy_err *err);
void eng_cu_model_close(eng_cu_model *m);

/* Enqueue the whole forward for a bucket (tokens, seqs bounds) on s:
 * embeddings .. pooling into m->pooled.  Capturable. */
int eng_cu_model_forward(eng_cu_model *m, cudaStream_t s, int tokens, int seqs, posy_err *err);

#endif

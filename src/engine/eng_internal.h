/* eng_internal: what the engine's front (posy_engine.c) shares with its
 * backends (cpu/, cuda/).  Not part of the public API.
 *
 * The front loads config and weights once (host, fp32 view of every tensor
 * the architecture needs, pointing into the safetensors mapping when the
 * file is already fp32), validates batches, and forwards step()/wait() to
 * the backend through eng_backend_ops.  A backend owns its device copies
 * of the weights, its arenas and its in-flight bookkeeping.
 */
#ifndef ENG_INTERNAL_H
#define ENG_INTERNAL_H

#include "eng_config.h"
#include "eng_dense.h"
#include "eng_safetensors.h"
#include "posy_engine.h"

/* One encoder layer of a BERT-family model, fp32, row-major, PyTorch
 * nn.Linear layout: weight [out, in], y = x W^T + b.  qkv_w is Q, K and V
 * stacked into one [3*hidden, hidden] matrix (and qkv_b [3*hidden]) so one
 * GEMM computes all three. */
typedef struct eng_bert_layer {
    const float *qkv_w, *qkv_b;     /* [3H, H], [3H] */
    const float *ao_w, *ao_b;       /* attention output [H, H], [H] */
    const float *ln1_g, *ln1_b;     /* attention LayerNorm [H] */
    const float *up_w, *up_b;       /* intermediate [I, H], [I] */
    const float *down_w, *down_b;   /* output [H, I], [H] */
    const float *ln2_g, *ln2_b;     /* output LayerNorm [H] */
    const float *pk_w, *pk_b;       /* DeBERTa without share_att_key: pos_key_proj (c2p) [H, H], [H], else NULL */
    const float *pq_w, *pq_b;       /* and pos_query_proj (p2c) */
} eng_bert_layer;

typedef struct eng_bert_weights {
    const float *word_emb;          /* [vocab, H] */
    const float *pos_emb;           /* the stored table [cfg.max_position_embeddings, H], row 0 first:
                                       position i of a sequence reads row i + cfg.position_offset */
    const float *type_emb;          /* [type_vocab, H] or NULL */
    const float *emb_ln_g, *emb_ln_b;
    const float *rel_bias;          /* MPNet: [ENG_RELPOS_BUCKETS, heads] (eng_relpos.h), else NULL */
    const float *rel_emb;           /* DeBERTa with relative_attention: [2 * span, H] (eng_deberta.h), else NULL */
    const float *rel_ln_g, *rel_ln_b; /* and its LayerNorm (norm_rel_ebd layer_norm), else NULL */
    eng_bert_layer *layers;         /* [n_layers] */
    int n_layers;
    float *owned;                   /* one allocation for converted/stacked tensors */
    size_t owned_floats;
} eng_bert_weights;

/* Load the BERT-family weights named by `cfg` from `st` (accepting the
 * usual prefixes: "", "bert.", "roberta.", "model.").  Errors name the file
 * and the tensor. */
int eng_bert_weights_load(eng_bert_weights *w, const eng_config *cfg, const eng_st_file *st,
                          posy_err *err);
void eng_bert_weights_free(eng_bert_weights *w);

/* One Qwen3 decoder layer, fp32, nn.Linear layout [out, in].  Q, K and V
 * are stacked into one [(heads + 2*kv_heads) * head_dim, H] matrix, gate and
 * up into one [2I, H], so one GEMM computes each group (eng_qwen3_weights.c). */
typedef struct eng_qwen3_layer {
    const float *qkv_w, *qkv_b;     /* [(nh+2nkv)d, H], bias or NULL (attention_bias) */
    const float *o_w, *o_b;         /* [H, nh*d], bias or NULL */
    const float *q_norm, *k_norm;   /* [head_dim]; NULL when the model has none (qwen2, mistral, llama);
                                       Gemma 3: (1 + w), q_norm times eng_config.q_scale */
    const float *ln1, *ln2;         /* the norms before attention and before the MLP [H] (Gemma 3: (1 + w)
                                       already; input_layernorm, pre_feedforward_layernorm) */
    const float *post_attn, *post_mlp; /* Gemma 3 only, (1 + w): post_attention_layernorm,
                                          post_feedforward_layernorm [H]; NULL otherwise */
    const float *gu_w;              /* [2I, H]: gate rows then up rows (ModernBERT's Wi: input, then gate) */
    const float *down_w;            /* [H, I] */
    const float *down_b;            /* [H] or NULL (GTE, JinaBERT) */
    const float *ln1_b, *ln2_b;     /* ModernBERT: the LayerNorms' biases (norm_bias; else the zeros);
                                       its layer 0 has no norm before attention (ln1 NULL).
                                       NomicBERT: ln1 / ln2 are the norms AFTER attention and after
                                       the MLP (norm1, norm2: post-LN), with their biases */
} eng_qwen3_layer;

typedef struct eng_qwen3_weights {
    const float *embed;             /* [vocab, H] */
    const float *norm;              /* final RMSNorm [H] (ModernBERT: final_norm, a LayerNorm) */
    const float *norm_b;            /* ModernBERT: final_norm's bias or the zeros */
    const float *emb_norm, *emb_norm_b; /* ModernBERT: the LayerNorm after the embedding gather */
    float *zeros;                   /* ModernBERT without norm_bias: [H] zeros for the LayerNorms */
    const float *rel_bias;          /* T5: block 0's relative position bias [32, heads], every layer's */
    const float *type_emb;          /* NomicBERT, GTE, JinaBERT: token type embeddings [type_vocab, H] (NULL: none) */
    eng_qwen3_layer *layers;
    int n_layers;
    float *owned;
    size_t owned_floats;
} eng_qwen3_weights;

/* Load a Qwen3 model's weights (prefix "" or "model."; an lm_head, tied or
 * not, is ignored: embeddings need the hidden states only). */
int eng_qwen3_weights_load(eng_qwen3_weights *w, const eng_config *cfg, const eng_st_file *st,
                           posy_err *err);
void eng_qwen3_weights_free(eng_qwen3_weights *w);

/* A StaticEmbedding model's table [vocab, dim], one fp32 row per token id
 * (model2vec's mapping and weights folded in): eng_static_weights.c. */
typedef struct eng_static_weights {
    const float *emb;
    float *owned;
    size_t owned_floats;
} eng_static_weights;

int eng_static_weights_load(eng_static_weights *s, const eng_config *cfg, const eng_st_file *st, posy_err *err);
void eng_static_weights_free(eng_static_weights *s);

typedef struct eng_backend_ops {
    const char *name;                                   /* "cpu", "cuda" */
    int (*open)(posy_engine *e, posy_err *err);         /* device weights, arenas */
    void (*close)(posy_engine *e);
    /* Enqueue a validated batch; may finish it before returning (CPU). */
    int (*submit)(posy_engine *e, const posy_batch *b, posy_err *err);
    /* Collect finished batches; block=1 waits for at least one if any is in flight. */
    int (*poll)(posy_engine *e, posy_result *done, int max_done, int block);
    int (*inflight)(const posy_engine *e);
} eng_backend_ops;

struct posy_engine {
    eng_config cfg;
    eng_st_file st;
    eng_bert_weights bert;
    eng_qwen3_weights qwen3;                            /* arch "qwen3" (bert then unused) */
    eng_static_weights stat;                            /* arch "static" (StaticEmbedding; the others unused) */
    posy_engine_opts opts;
    int auto_tokens;                                    /* opts.max_batch_tokens was 0: set per backend tried */
    int seqs_asked;                                     /* opts.max_batch_seqs before the clamp to the token budget */
    const eng_backend_ops *ops;
    void *backend;                                      /* backend-private state */
    eng_dense dense;                                    /* sentence-transformers Dense modules (n 0: none) */
    eng_dense splade;                                   /* a SPLADE model's masked-LM head, per token (n 0: none) */
    eng_dense_pending *dense_pending;                   /* batches in flight through them (eng_dense.c) */
};

/* opts.warmup: run every CUDA bucket twice through step() (eng_warmup.c).
 * 0, or -1 with err set if a warm-up batch failed. */
int eng_warmup(posy_engine *e, posy_err *err);

extern const eng_backend_ops eng_cpu_backend;
#ifdef POSY_HAVE_CUDA
extern const eng_backend_ops eng_cuda_backend;
/* 1 if a usable CUDA device is present (without initialising more than needed). */
int eng_cuda_available(int device_index, posy_err *err);
#endif

#endif

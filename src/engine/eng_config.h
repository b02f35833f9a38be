/* eng_config: what a Hugging Face / sentence-transformers model directory
 * says about the model, without touching the weights.
 *
 * Reads config.json (architecture and sizes), and the sentence-transformers
 * files: modules.json (is there a Pooling and a Normalize module, and where),
 * <pooling dir>/config.json (mean / cls / last-token), sentence_bert_config.json
 * (max_seq_length), config_sentence_transformers.json (prompts and
 * default_prompt_name).  The gateway uses this alone (it never maps weights);
 * the engine adds the weights.  Missing optional files fall back to what
 * sentence-transformers would do (mean pooling, no normalize, the model's
 * max_position_embeddings).
 */
#ifndef ENG_CONFIG_H
#define ENG_CONFIG_H

#include "posy_engine.h"
#include "posy_err.h"
#include "eng_deberta.h"
#include "eng_rope.h"

typedef enum { ENG_ACT_GELU = 0, ENG_ACT_GELU_TANH = 1, ENG_ACT_RELU = 2, ENG_ACT_SILU = 3 } eng_activation;

#define ENG_MAX_PROMPTS 16
#define ENG_MAX_DENSE 4
#define ENG_MAX_TOK_ROWS 16       /* classifier_from_token: tokens at most */
#define ENG_MAX_LABELS 16384     /* a classifier's labels at most (its vector is one logit a label) */

/* sentence-transformers' Dense module after pooling: y = act(W x + b),
 * W [out, in] and b in <path>/model.safetensors ("linear.weight",
 * "linear.bias"); eng_dense.c loads and applies them. */
/* A classifier's scores from its logits, as transformers' text-classification
 * pipeline picks: problem_type "regression": the logits; multi-label or
 * one label: a sigmoid each; else a softmax over the labels. */
typedef enum { ENG_SCORE_SOFTMAX = 0, ENG_SCORE_SIGMOID, ENG_SCORE_NONE } eng_score_fn;
typedef enum { ENG_DENSE_IDENTITY = 0, ENG_DENSE_TANH, ENG_DENSE_RELU, ENG_DENSE_SIGMOID, ENG_DENSE_GELU } eng_dense_act;
typedef struct eng_dense_cfg {
    char path[256];              /* the module folder, relative to the model directory */
    int in, out, bias;
    eng_dense_act act;
    /* a reranker's head (eng_config_rerank.c): the tensors' names in the
     * model's own checkpoint instead of <path>/model.safetensors; "" else
     * (bname "" with bias 0); a LayerNorm after the activation when lnw is
     * set (ModernBERT's head; lnb "" without bias) */
    char wname[64], bname[64], lnw[64], lnb[64];
    char walt[64], balt[64];     /* read instead when wname / bname are absent ("" none): a tied or renamed
                                    masked-LM decoder (SPLADE's head) */
    double ln_eps;
    /* a head made of the LM head's rows (classifier_from_token): n_rows
     * token ids; the weights are those rows, or with rows_diff one row,
     * row[1] - row[0] (transformers' 2-way softmax as one logit) */
    int n_rows, rows_diff;
    int rows[ENG_MAX_TOK_ROWS];
} eng_dense_cfg;

typedef struct eng_prompt {
    char name[64];
    char *text;                  /* owned */
} eng_prompt;

/* sentence-transformers' Router (eng_config_router.c): module folders,
 * relative to the model directory, of an inference-free SPLADE model. */
typedef struct eng_router {
    char tdir[256];              /* the document route's MLMTransformer: config.json, weights, tokenizer */
    char pool[256];              /* its SpladePooling */
    char qdir[256];              /* the query route's SparseStaticEmbedding */
    char def[16];                /* parameters.default_route: "query", "document", or "" (none) */
} eng_router;

typedef struct eng_config {
    posy_model_info info;        /* filled except device/dtype */
    char model_type[32];         /* config.json model_type as written */
    eng_activation act;
    double ln_eps;               /* layer_norm_eps / rms_norm_eps */
    int position_offset;         /* RoBERTa/XLM-R: pad_token_id + 1; BERT: 0 */
    int pad_token_id;
    int head_dim;
    eng_rope rope;               /* decoders: rope_theta and rope_scaling (eng_rope.h) */
    int tie_word_embeddings;
    eng_prompt prompts[ENG_MAX_PROMPTS];
    int n_prompts;
    char default_prompt_name[64];
    /* additions */
    int max_position_embeddings; /* rows of the position table as stored (= info.max_positions + position_offset) */
    int do_lower_case;           /* sentence_bert_config.json: lowercase text before tokenizing */
    int pool_include_prompt;     /* Pooling include_prompt (default 1); 0: the prompt's tokens are not pooled */
    int rel_buckets;             /* MPNet: relative position buckets (eng_relpos.h); 0 = none */
    int qk_norm;                 /* decoders: Q and K RMSNormed per head before rotary (qwen3, gemma3_text; not qwen2, mistral, llama) */
    /* Gemma 3 (gemma3_text: EmbeddingGemma): RMSNorms scale by (1 + w), a
     * norm after attention and after the MLP before each residual add,
     * the MLP is gelu_tanh(gate) * up, embeddings are multiplied by
     * sqrt(hidden), attention scales by query_pre_attn_scalar^-0.5 (q_scale
     * = sqrt(head_dim / query_pre_attn_scalar) on top of 1/sqrt(head_dim)),
     * and the sliding-window layers (layer_local, a bit a layer) take their
     * own rotary (rope_local). */
    int gemma;
    /* ModernBERT (modernbert: gte-modernbert, modernbert-embed, granite r2) on
     * the same engine: LayerNorms (norm_eps, bias when norm_bias) instead of
     * RMSNorms, one after the embedding gather, none before layer 0's
     * attention; Wqkv and Wi as the stacked Q|K|V and gate|up; act(input) *
     * gate with `act` (GELU by default); the global / sliding layers' rotaries
     * and window (local_attention / 2 + 1) as Gemma's fields say. */
    int modernbert;
    /* T5's encoder (t5: sentence-t5, gtr-t5, instructor) on the same engine:
     * RMSNorms (layer_norm_epsilon), no rotary, unscaled attention with
     * layer 0's relative position bias (rel_buckets, eng_relpos.h) in every
     * layer; the MLP relu(wi) without a gate (mlp_plain) or gelu_new(wi_0)
     * * wi_1.  The loader scales Wq by sqrt(head_dim) so that the engine's
     * 1/sqrt(head_dim) leaves T5's unscaled scores. */
    int t5;
    /* NomicBERT's encoder (nomic_bert: nomic-embed-text-v1 / v1.5) on the
     * same engine: BERT's post-LayerNorm layer -- x = LN(x + attn(x)), x =
     * LN(x + mlp(x)), no final norm -- with rotary positions (rope) instead
     * of a position table, SwiGLU, no linear biases, and token type
     * embeddings added before the embedding LayerNorm (info.type_vocab
     * rows).  eng_config.c cfg_nomic reads Nomic's own keys (n_embd,
     * rotary_emb_base, ...) as the hub's checkpoints write them, or
     * transformers' (hidden_size, rope_parameters, ...). */
    int nomic;
    /* GTE v1.5 / mGTE (model_type "new" / "gte": Alibaba-NLP/new-impl's
     * NewModel) on the same engine: NomicBERT's post-norm layer with biases
     * on Q|K|V, O and down (read from the tensors), a GeGLU whose up_gate
     * rows (up, then gate) are stacked gate first at load, type rows
     * (type_vocab_size; 0 none), the rotary's NTK scaling (eng_rope.h).
     * eng_config.c cfg_gte. */
    int gte;
    /* JinaBERT v2 (model_type "bert" with position_embedding_type "alibi":
     * jina-embeddings-v2-*) on the same post-norm path, its own tensor names
     * (jina), and ALiBi's bias -slope_h |i - j| on the scaled scores instead
     * of a rotary (alibi: eng_relpos.h's table, eng_alibi_slopes).
     * eng_config.c cfg_jina. */
    int jina, alibi;
    /* the post-norm layer (nomic, gte, jina): x = LN(x + attn(x)), x = LN(x +
     * mlp(x)), the products reading x itself; type rows and a LayerNorm on
     * the embeddings; no final norm */
    int post_ln;
    int mlp_plain;               /* the MLP is act(up), no gate: [I, H] instead of gate|up [2I, H] */
    int norm_bias;
    int sliding_window;          /* Gemma 3: local layers' keys at |query - key| < this (bidirectional
                                    config: config.json's W / 2 + 1, as transformers loads it); 0: none */
    double q_scale;
    eng_rope rope_local;
    unsigned char layer_local[128];
    /* sentence-transformers' StaticEmbedding (eng_config_static.c): no
     * transformer, the mean of one row per token id; its folder (relative
     * to the model directory, "" at the root) holds model.safetensors and
     * tokenizer.json, and the text is tokenized without special tokens. */
    int static_emb;
    char static_dir[256];
    int add_special;             /* the tokenizer adds its special tokens (every model but static ones) */
    /* a sequence classifier (config.json's architectures: BERT, RoBERTa /
     * XLM-R, DistilBERT or ModernBERT ForSequenceClassification): the
     * [CLS] state through the model's classification head (two Dense
     * layers, eng_config_rerank.c) is its n_labels logits, info.dim
     * n_labels; ModernBERT's head (dense, activation, LayerNorm) after CLS
     * or mean pooling as its classifier_pooling says.  One label: a
     * cross-encoder reranker, served on /rerank with query and text as a
     * pair; any number: /predict and /classify */
    int rerank;
    int n_labels;
    char **labels;               /* n_labels names (id2label, else "LABEL_<i>"), owned */
    eng_score_fn score_fn;       /* how /predict turns logits into scores (transformers' pipeline rule) */
    /* a decoder's classifier (Qwen3 / Qwen2 / Mistral / Llama / Gemma 3
     * ForSequenceClassification, e.g. Qwen3-Reranker converted to one):
     * the head is `score` on the last token's state; transformers pools
     * the rightmost token that is not pad_token_id (cls_pad_id; -1: the
     * config has none), so with causal attention the gateway drops
     * trailing pad tokens, which changes no earlier state */
    int rerank_decoder;
    int cls_pad_id;
    /* classifier_from_token (vLLM's hf_overrides for the original
     * Qwen3-Reranker, a ...ForCausalLM checkpoint): the head is the LM
     * head's rows of these token ids -- with method "from_2_way_softmax" /
     * is_original_qwen3_reranker one logit, row[1] - row[0] (the softmax of
     * the two tokens' logits is its sigmoid); else one logit a token */
    int n_from_tok, from_tok_diff;
    int from_tok[ENG_MAX_TOK_ROWS];
    int rerank_mean;             /* ModernBERT's classifier_pooling "mean" (else CLS) */
    int rerank_head_bias;        /* ModernBERT's classifier_bias */
    eng_dense_act rerank_act;    /* ModernBERT's classifier_activation */
    /* SPLADE (sentence-transformers' SparseEncoder: MLMTransformer then
     * SpladePooling; naver/splade-*, opensearch neural sparse models): the
     * masked-LM head on every token (splade_head: the transform's dense,
     * activation and LayerNorm, then the vocabulary projection), then
     * log1p(relu(logit)) -- once more log1p with activation_function
     * log1p_relu -- and the max (or sum) over the sequence's tokens: a
     * vector of the vocabulary's size (info.dim), served on /embed_sparse.
     * eng_config_splade.c. */
    int splade;
    int router;                  /* an inference-free SPLADE model behind a Router: rt says where */
    eng_router rt;
    int splade_sum;              /* pooling_strategy "sum" (else "max") */
    int splade_log2;             /* activation_function "log1p_relu" (else "relu") */
    eng_dense_cfg splade_head[2];
    /* DeBERTa v2 / v3 (deberta-v2, arch "deberta"): BERT's post-LN layer
     * with disentangled attention (eng_deberta.h); a classifier's head is
     * ContextPooler's dense and pooler_hidden_act on the first token, then
     * the classifier.  eng_config_deberta.c. */
    int deberta;
    eng_deberta_cfg deb;
    eng_dense_act pooler_act;
    eng_dense_cfg dense[ENG_MAX_DENSE]; /* Dense modules after pooling, in order */
    int n_dense;
} eng_config;

/* Whether the backends L2-normalise after pooling: a Normalize module and
 * no Dense (with Dense modules the engine front normalises after them). */
static inline int eng_config_pool_normalize(const eng_config *c) { return c->info.normalize && !c->n_dense; }
/* posy_model_info.tok_dim for this model: the hidden size, or 0 for a model
 * whose tokens have no states to give (static, SPLADE, a classifier or
 * reranker).  The gateway asks the same without loading weights. */
static inline int eng_config_tok_dim(const eng_config *c) {
    return c->static_emb || c->splade || c->rerank ? 0 : c->info.hidden;
}

int eng_config_load(eng_config *c, const char *model_dir, posy_err *err);
/* vLLM's --hf-overrides: a JSON object whose keys replace config.json's
 * top-level ones in every later eng_config_load of the process (e.g. the
 * original Qwen3-Reranker's {"classifier_from_token": ["no", "yes"],
 * "is_original_qwen3_reranker": true}).  NULL or "" clears it.  0, or an
 * error when it is not a JSON object. */
int eng_config_set_overrides(const char *json, posy_err *err);
/* The overrides as given ("" for none), for the worker fingerprint. */
const char *eng_config_overrides(void);
void eng_config_free(eng_config *c);
/* Prompt text by name, or NULL. */
const char *eng_config_prompt(const eng_config *c, const char *name);

/* The sentence-transformers half of eng_config_load (eng_config_st.c):
 * pooling, normalize, max_seq_len, prompts.  Needs info.max_positions. */
int eng_config_load_st(eng_config *c, const char *model_dir, posy_err *err);
/* The same for a Router model (c->rt set): SpladePooling's folder, the
 * document transformer's sentence_bert_config.json, the root's prompts. */
int eng_config_load_st_router(eng_config *c, const char *model_dir, posy_err *err);

/* eng_config_static.c.  1 when modules.json's first module is a
 * StaticEmbedding (its folder copied to rel[cap]); -1 when it is one whose
 * folder leaves the model directory or does not fit rel; 0 otherwise,
 * including when modules.json is missing or broken (eng_config_load
 * reports that). */
int eng_config_static_probe(const char *model_dir, char *rel, size_t cap);
/* Fill c for a StaticEmbedding model whose module folder is `rel` (rel_ok:
 * the probe found it usable; else a refusal that names it). */
int eng_config_load_static(eng_config *c, const char *model_dir, const char *rel, int rel_ok, posy_err *err);
/* eng_config_rerank.c: when config.json names a ...ForSequenceClassification
 * architecture, check it is a classifier posy can run and read its labels (0 also
 * when it is not a classifier at all), and after the sentence-transformers
 * files, set its pooling and head (eng_config_rerank_head). */
struct json_t;   /* jansson's; only eng_config*.c read JSON */
int eng_config_rerank_check(eng_config *c, struct json_t *root, const char *path, posy_err *err);
/* A head layer read from the model's own checkpoint: tensor names w and b,
 * and the alternatives read when those are absent ("" none), bias on. */
void eng_dense_cfg_named(eng_dense_cfg *d, int in, int out, eng_dense_act act, const char *w, const char *walt,
                         const char *b, const char *balt);
void eng_config_rerank_head(eng_config *c);
/* A head activation by its config name (gelu, relu, tanh, sigmoid, linear): 0, or -1 unknown. */
int eng_dense_act_named(const char *name, eng_dense_act *act);

/* eng_config.c's readers shared with the family files: an activation
 * field into c->act, and the size checks once a family's sizes are read
 * (heads divide hidden, info.max_positions after the position offset). */
int eng_config_activation(eng_config *c, struct json_t *root, const char *key, const char *def, const char *path,
                          posy_err *err);
int eng_config_finish_sizes(eng_config *c, const char *path, posy_err *err);
/* eng_config_deberta.c: config.json of model_type deberta-v2. */
int eng_config_deberta(eng_config *c, struct json_t *root, const char *path, posy_err *err);

/* eng_config_splade.c: a SpladePooling module's folder (its config.json:
 * pooling_strategy, activation_function, the dimension), and after every
 * module, the masked-LM head's tensor names for the model's family (BERT,
 * DistilBERT, RoBERTa / XLM-R) and the vector's size; refusals by name. */
int eng_config_splade_pool(eng_config *c, const char *dir, const char *rel, posy_err *err);
int eng_config_splade_head(eng_config *c, const char *path, posy_err *err);
/* eng_config_router.c: 1 when dir's modules.json is one Router (rt
 * filled), 0 when it is not, -1 when it is one posy cannot serve (err). */
int eng_config_router_probe(const char *dir, eng_router *rt, posy_err *err);
/* The query route's weights: one per token id (n == info.vocab), and the
 * tokenizer's model_max_length it truncates at (0: none).  The query
 * vector of a text is weight[id] at each id among its tokens (special
 * tokens left out), 0 elsewhere. */
typedef struct eng_router_query {
    float *weight;
    int n;
    int max_len;
} eng_router_query;
int eng_router_query_load(const char *dir, const eng_config *c, eng_router_query *out, posy_err *err);
void eng_router_query_free(eng_router_query *q);
/* One query's vector: out[0..q->n) = weight[id] at each id among ids[0..n)
 * (each counted once; ids outside the vocabulary ignored), 0 elsewhere. */
void eng_router_query_vec(const eng_router_query *q, const int32_t *ids, int n, float *out);
/* sentence-transformers' prompt for a task (encode_query / encode_document)
 * when the caller names none: "query" for the query task, else the first
 * of "document", "passage", "corpus" the model has; NULL when it has none
 * (then the model's default prompt applies). */
const char *eng_config_task_prompt(const eng_config *c, const char *task);
/* The folder (relative to the model directory, "" for the root) that holds
 * the transformer's config.json, weights and tokenizer. */
static inline const char *eng_config_tdir(const eng_config *c) {
    return c->static_emb ? c->static_dir : c->router ? c->rt.tdir : "";
}

/* The tokenizer.json a model directory's text goes through (the
 * StaticEmbedding module's own for static models) and whether its special
 * tokens are added; for callers without an eng_config (posy tokenize).  0,
 * or -1 when the path is too long or the module's folder leaves the
 * directory. */
int eng_model_tokenizer_file(const char *model_dir, char *out, size_t cap, int *add_special);

#endif

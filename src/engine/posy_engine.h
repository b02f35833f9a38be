/* posy_engine: the engine's public C API (ARCHITECTURE.md, "Engine contract").
 *
 * An engine owns one loaded model on one device.  Work arrives as packed
 * batches: token ids of all sequences back to back with cu_seqlens, no
 * padding.  posy_engine_step() submits one batch (or none) and hands back
 * batches that have finished; it never waits for the device unless the
 * caller asks with posy_engine_wait().  The CPU backend finishes a batch
 * inside the step that submits it; the CUDA backend overlaps packing of the
 * next batch with the device running the previous one.
 *
 * One thread drives an engine (the scheduler's step loop, or the CLI): the
 * engine is not safe for concurrent calls.  Internally it uses many threads
 * (OpenBLAS, OpenMP) on the CPU.
 */
#ifndef POSY_ENGINE_H
#define POSY_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include "posy_err.h"

typedef struct posy_engine posy_engine;

typedef enum { POSY_DEVICE_CPU = 0, POSY_DEVICE_CUDA = 1, POSY_DEVICE_AUTO = 2 } posy_device_kind;
typedef enum { POSY_POOL_MEAN = 0, POSY_POOL_CLS = 1, POSY_POOL_LAST = 2 } posy_pooling;

/* Attention direction: as config.json says (decoders: causal unless
 * "is_causal": false / "use_bidirectional_attention": true), or forced. */
typedef enum { POSY_ATTN_MODEL = 0, POSY_ATTN_CAUSAL = 1, POSY_ATTN_BIDIRECTIONAL = 2 } posy_attention;

typedef struct posy_engine_opts {
    posy_device_kind device;   /* AUTO: CUDA when a usable GPU is present, else CPU */
    int device_index;          /* CUDA ordinal */
    int n_threads;             /* CPU threads; 0 = all cores */
    int max_batch_tokens;      /* largest batch the engine must accept (sizes arenas); 0 = the device's
                                  default for the model (posy_engine_default_batch_tokens) */
    int max_batch_seqs;        /* largest number of sequences in one batch; 0 = default 1024 */
    posy_attention attention;  /* --attention override; 0 = as the model says */
    int warmup;                /* 1: open() runs every CUDA token bucket twice (eager, then captured)
                                  so that no request pays a bucket's first run; 0 (default): buckets
                                  warm lazily as batches arrive.  Nothing to warm on the CPU. */
} posy_engine_opts;

/* What the model is, as read from its directory. */
typedef struct posy_model_info {
    char model_dir[1024];
    char name[256];            /* directory base name, used as the OpenAI "model" */
    char arch[32];             /* the engine family: "bert", "roberta", "distilbert", "mpnet", "qwen3" (which also
                                  runs qwen2, mistral and llama; config.json's model_type says which) */
    int hidden;                /* hidden size = embedding dimension before truncation */
    int layers;
    int heads;
    int kv_heads;
    int intermediate;
    int vocab;
    int type_vocab;            /* 0 when the model has no token type embeddings */
    int max_positions;         /* max_position_embeddings (after any offset) */
    int max_seq_len;           /* from sentence_bert_config.json, else max_positions */
    posy_pooling pooling;
    int normalize;             /* a Normalize module follows pooling (and any Dense modules) */
    int dim;                   /* the embedding dimension returned: hidden, or the last Dense
                                  module's out_features (sentence-transformers' Dense) */
    int causal;                /* decoder-style attention */
    posy_device_kind device;   /* the device actually used */
    char dtype[8];             /* "fp32" or "bf16" */
    int max_batch_tokens;      /* the engine's token budget in effect (opts, or the device's default) */
    int max_batch_seqs;        /* and its sequence budget */
    int tok_dim;               /* floats per token that posy_batch.tok_out receives: the hidden size (each
                                  token's last hidden state, after the model's final norm, before pooling,
                                  Dense modules and normalization), or 0 when the model gives none (a static
                                  embedding model, SPLADE, a classifier or reranker) */
} posy_model_info;

/* A packed batch.  All pointers must stay valid until the batch is handed
 * back by step()/wait().  `out` receives n_seqs * dim floats, pooled, through
 * the model's Dense modules and (if the model says so) L2-normalised, in
 * sequence order. */
typedef struct posy_batch {
    uint64_t tag;              /* caller's id, returned in posy_result */
    int n_seqs;
    int n_tokens;              /* == cu_seqlens[n_seqs] */
    const int32_t *ids;        /* n_tokens */
    const int32_t *type_ids;   /* n_tokens, or NULL for all zeros */
    const int32_t *cu_seqlens; /* n_seqs + 1, cu_seqlens[0] == 0, non-decreasing, no empty sequence (but for a
                                  static embedding model, which embeds one as zeros; ids may then be NULL
                                  when n_tokens is 0) */
    float *out;
    const int32_t *pool_skip;  /* n_seqs leading tokens left out of pooling (a prompt under
                                  include_prompt false), 0 <= skip < length; NULL: none.
                                  Mean pools the rest, CLS takes the first kept token,
                                  last-token pooling is unaffected. */
    float *const *tok_out;     /* NULL, or n_seqs pointers: sequence s's token states land at tok_out[s]
                                  (length * info.tok_dim floats, in token order), none where the pointer
                                  is NULL; `out` is written as always (TEI's /embed_all) */
} posy_batch;

typedef struct posy_result {
    uint64_t tag;
    int status;                /* 0 = ok, else a posy_status (e.g. device failure) */
} posy_result;

posy_engine *posy_engine_open(const char *model_dir, const posy_engine_opts *opts, posy_err *err);
void posy_engine_close(posy_engine *e);
const posy_model_info *posy_engine_info(const posy_engine *e);

/* The token budget of one batch when opts.max_batch_tokens is 0: 16384 on
 * the CPU; on a GPU 65536 or 32768 for a model small enough that such a
 * step stays a few milliseconds (all-MiniLM-L6: 65536), else 16384
 * (eng_batch_budget.c says why). */
int posy_engine_default_batch_tokens(const posy_model_info *mi, posy_device_kind device);

/* Check a batch against the model (ids in vocabulary, lengths within
 * max_positions, sizes within the engine's limits).  0 if acceptable. */
int posy_engine_validate(const posy_engine *e, const posy_batch *b, posy_err *err);

/* Submit `next` (NULL: nothing new) and collect finished batches into
 * done[0..max_done).  Returns how many results were written, or -1 if
 * `next` was rejected (err says why; nothing was submitted). */
int posy_engine_step(posy_engine *e, const posy_batch *next, posy_result *done, int max_done,
                     posy_err *err);

/* Block until at least one in-flight batch finishes and collect it (and any
 * others already done).  Returns how many were written; 0 if nothing is in
 * flight. */
int posy_engine_wait(posy_engine *e, posy_result *done, int max_done);

/* Number of batches submitted and not yet handed back. */
int posy_engine_inflight(const posy_engine *e);

/* What the engine has done since open, for logs and /metrics.  The CPU
 * backend runs no graphs and keeps no counters: everything is 0 there.
 * Like every call here it must not run concurrently with step()/wait():
 * call it from the thread that drives the engine (the scheduler copies it
 * after each step, so other threads read the copy under its lock). */
typedef struct posy_engine_stats {
    uint64_t batches;               /* batches finished */
    uint64_t tokens;                /* real tokens submitted */
    uint64_t padded_tokens;         /* tokens after rounding each batch up to its bucket */
    uint64_t graph_captures;        /* CUDA graphs captured (one per token bucket at most) */
    uint64_t graph_replays;         /* forward passes launched as a captured graph */
    uint64_t eager_runs;            /* forward passes run without a graph (a bucket's first) */
    uint64_t buckets_seen;          /* token buckets that have run at least once */
    double graph_capture_seconds;   /* host time spent capturing and instantiating graphs */
    double first_run_seconds;       /* host time of buckets' first (eager) runs: kernel loading and
                                       GEMM choice, which stall the batches queued behind them */
    double device_seconds;          /* device time of the forward passes (CUDA events) */
} posy_engine_stats;
void posy_engine_get_stats(const posy_engine *e, posy_engine_stats *out);

#endif

/* posy_engine: the engine's front (posy_engine.h).
 *
 * Owns what every backend shares: the model directory's config, the mapped
 * safetensors file, the host fp32 weights (until a GPU backend holds its
 * own copy: drop_host_weights), the choice of backend and the validation
 * of batches.  Backends (cpu/, cuda/) see only validated
 * batches, so the checks here are the whole defence of the request path:
 * every field of a batch that came from outside is checked and refused with
 * a message, never trusted into an out-of-bounds read.
 *
 * Backend choice: --device cpu always uses the CPU; cuda requires a build
 * with CUDA and a usable GPU (else a clear error); auto takes the GPU when
 * eng_cuda_available() says so and falls back to the CPU otherwise.  The
 * CUDA symbols are only referenced under POSY_HAVE_CUDA so a CPU-only build
 * links without them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eng_internal.h"
#include "posy_log.h"
#ifdef POSY_HAVE_CUDA
#include "cuda/eng_cu_backend.h"
#endif

#define ENG_DEFAULT_MAX_SEQS 1024
#define ENG_LIMIT_MAX_TOKENS (1 << 22)   /* keeps T*intermediate far from size_t/int trouble */

/* The token budget for the backend about to open: the one asked for, or
 * (asked 0) the device's default for this model; every sequence has a
 * token, so more sequences than tokens never fit. */
static void budget_for(posy_engine *e, posy_device_kind dev) {
    if (e->auto_tokens) e->opts.max_batch_tokens = posy_engine_default_batch_tokens(&e->cfg.info, dev);
    e->opts.max_batch_seqs = e->seqs_asked < e->opts.max_batch_tokens ? e->seqs_asked : e->opts.max_batch_tokens;
}

static int opts_resolve(posy_engine *e, const posy_engine_opts *in, posy_err *err) {
    posy_engine_opts *o = &e->opts;
    if (in) *o = *in;
    else { memset(o, 0, sizeof *o); o->device = POSY_DEVICE_AUTO; }
    e->auto_tokens = o->max_batch_tokens == 0;
    if (o->max_batch_seqs == 0) o->max_batch_seqs = ENG_DEFAULT_MAX_SEQS;
    if (!e->auto_tokens && (o->max_batch_tokens < 1 || o->max_batch_tokens > ENG_LIMIT_MAX_TOKENS))
        return posy_err_set(err, POSY_E_INVALID, "--max-batch-tokens %d: must be 1..%d",
                            o->max_batch_tokens, ENG_LIMIT_MAX_TOKENS);
    if (o->max_batch_seqs < 1)
        return posy_err_set(err, POSY_E_INVALID, "--max-batch-seqs %d: must be at least 1", o->max_batch_seqs);
    e->seqs_asked = o->max_batch_seqs;
    if (o->n_threads < 0 || o->n_threads > 4096)
        return posy_err_set(err, POSY_E_INVALID, "--threads %d: must be 0 (all cores) .. 4096",
                            o->n_threads);
    if (o->attention < POSY_ATTN_MODEL || o->attention > POSY_ATTN_BIDIRECTIONAL)
        return posy_err_set(err, POSY_E_INVALID, "--attention: unknown mode %d", (int)o->attention);
    if (o->device != POSY_DEVICE_CPU && o->device != POSY_DEVICE_CUDA && o->device != POSY_DEVICE_AUTO)
        return posy_err_set(err, POSY_E_INVALID, "--device: unknown device kind %d", (int)o->device);
    return 0;
}

#ifdef POSY_HAVE_CUDA
/* The CUDA backend uploads every weight at open (its own bf16 copies) and
 * never reads the host fp32 view again, so once it is open that view and
 * the checkpoint's mapping go: for a bf16 checkpoint the view is twice the
 * file (Qwen3-0.6B: ~2.4 GB of host memory a GPU server held for
 * nothing). */
static void drop_host_weights(posy_engine *e) {
    const size_t mib = (e->bert.owned_floats + e->qwen3.owned_floats) * sizeof(float) >> 20;
    eng_bert_weights_free(&e->bert);
    eng_qwen3_weights_free(&e->qwen3);
    eng_dense_free(&e->splade);   /* a SPLADE head is on the GPU too */
    eng_st_close(&e->st);
    POSY_DEBUG("engine: weights on the GPU; the host copy (%zu MiB converted) and the checkpoint's mapping "
               "released", mib);
}
#endif

/* Pick and open a backend.  AUTO falls back to the CPU if the GPU path
 * fails.  A StaticEmbedding model runs on the CPU whatever the device: its
 * forward pass is a table lookup and a mean, which the copies to and from
 * a GPU would only slow down. */
static int backend_open(posy_engine *e, posy_err *err) {
    if (e->cfg.static_emb && e->opts.device == POSY_DEVICE_CUDA)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "--device cuda: a static embedding model runs on the CPU only "
                            "(a lookup and a mean per text); use --device cpu or auto");
    if (e->cfg.static_emb) {
        budget_for(e, POSY_DEVICE_CPU);
        e->ops = &eng_cpu_backend;
        return e->ops->open(e, err);
    }
#ifdef POSY_HAVE_CUDA
    if (e->opts.device == POSY_DEVICE_CUDA || e->opts.device == POSY_DEVICE_AUTO) {
        posy_err cerr;
        posy_err_clear(&cerr);
        int have_gpu = 0;
        if (eng_cuda_available(e->opts.device_index, &cerr)) {
            have_gpu = 1;
            budget_for(e, POSY_DEVICE_CUDA);
            e->ops = &eng_cuda_backend;
            if (e->ops->open(e, &cerr) == 0) {
                drop_host_weights(e);
                return 0;
            }
        }
        if (e->opts.device == POSY_DEVICE_CUDA) {
            if (err) *err = cerr;
            return posy_err_wrap(err, "--device cuda:%d", e->opts.device_index);
        }
        if (have_gpu) /* a GPU, but not for this model (or not enough of it): say which */
            POSY_WARN("engine: the GPU backend cannot run this model (%s); using the CPU", cerr.msg);
        else
            POSY_INFO("engine: no usable GPU (%s); using the CPU", cerr.msg[0] ? cerr.msg : "none found");
    }
#else
    if (e->opts.device == POSY_DEVICE_CUDA)
        return posy_err_set(err, POSY_E_UNSUPPORTED,
                            "--device cuda: this posy was built without CUDA (no nvcc at build time); "
                            "use --device cpu");
#endif
    budget_for(e, POSY_DEVICE_CPU);
    e->ops = &eng_cpu_backend;
    return e->ops->open(e, err);
}

enum { STAGE_CONFIG = 1, STAGE_ST = 2, STAGE_WEIGHTS = 3 };

static void engine_free(posy_engine *e, int stage) {
    if (stage >= STAGE_WEIGHTS) {
        eng_bert_weights_free(&e->bert);
        eng_qwen3_weights_free(&e->qwen3);
        eng_static_weights_free(&e->stat);
        eng_dense_drop_pending(e);
        eng_dense_free(&e->dense);
        eng_dense_free(&e->splade);
    }
    if (stage >= STAGE_ST) eng_st_close(&e->st);
    if (stage >= STAGE_CONFIG) eng_config_free(&e->cfg);
    free(e);
}

posy_engine *posy_engine_open(const char *model_dir, const posy_engine_opts *opts, posy_err *err) {
    posy_engine *e = calloc(1, sizeof *e);
    if (!e) { posy_err_set(err, POSY_E_NOMEM, "engine: out of memory"); return NULL; }
    if (opts_resolve(e, opts, err) != 0) { free(e); return NULL; }
    if (eng_config_load(&e->cfg, model_dir, err) != 0) { free(e); return NULL; }
    /* model.safetensors, or the shards of model.safetensors.index.json */
    if (e->opts.attention != POSY_ATTN_MODEL &&
        (strcmp(e->cfg.info.arch, "qwen3") || e->cfg.modernbert || e->cfg.t5 || e->cfg.post_ln)) {
        posy_err_set(err, POSY_E_UNSUPPORTED, "--attention applies to decoder models (qwen3, qwen2, mistral, llama, gemma3_text); "
                     "%s is a %s encoder", model_dir, e->cfg.model_type);
        engine_free(e, STAGE_CONFIG);
        return NULL;
    }
    if (e->opts.attention != POSY_ATTN_MODEL) e->cfg.info.causal = e->opts.attention == POSY_ATTN_CAUSAL;
    char wdir[1024];   /* a static model's weights are in its module's folder, a Router's in its transformer's */
    if (posy_path_join(wdir, sizeof wdir, model_dir, eng_config_tdir(&e->cfg))) {
        posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", model_dir, eng_config_tdir(&e->cfg));
        engine_free(e, STAGE_CONFIG);
        return NULL;
    }
    if (eng_st_open_dir(&e->st, wdir, err) != 0) {
        engine_free(e, STAGE_CONFIG);
        return NULL;
    }
    int is_qwen3 = !strcmp(e->cfg.info.arch, "qwen3");
    if ((e->cfg.static_emb ? eng_static_weights_load(&e->stat, &e->cfg, &e->st, err)
         : is_qwen3        ? eng_qwen3_weights_load(&e->qwen3, &e->cfg, &e->st, err)
                           : eng_bert_weights_load(&e->bert, &e->cfg, &e->st, err)) != 0) {
        engine_free(e, STAGE_ST);
        return NULL;
    }
    if (eng_dense_load(&e->dense, &e->cfg, model_dir, err) != 0 ||
        eng_dense_load_splade(&e->splade, &e->cfg, wdir, err) != 0) {
        engine_free(e, STAGE_WEIGHTS);
        return NULL;
    }
    if (backend_open(e, err) != 0) { engine_free(e, STAGE_WEIGHTS); return NULL; }
    posy_model_info *mi = &e->cfg.info;
    mi->device = e->ops == &eng_cpu_backend ? POSY_DEVICE_CPU : POSY_DEVICE_CUDA;
    if (e->opts.warmup && eng_warmup(e, err) != 0) {
        e->ops->close(e);
        engine_free(e, STAGE_WEIGHTS);
        return NULL;
    }
    snprintf(mi->dtype, sizeof mi->dtype, "%s", mi->device == POSY_DEVICE_CPU ? "fp32" : "bf16");
    mi->max_batch_tokens = e->opts.max_batch_tokens;
    mi->max_batch_seqs = e->opts.max_batch_seqs;
    mi->tok_dim = eng_config_tok_dim(&e->cfg);
    char dense[96] = "";
    if (e->cfg.splade)
        snprintf(dense, sizeof dense, ", SPLADE %s over the masked-LM head: sparse vectors of %d",
                 e->cfg.splade_sum ? "sum" : "max", mi->dim);
    else if (e->cfg.rerank)   /* its head is two Dense layers too, but a user knows it by its labels */
        snprintf(dense, sizeof dense, ", a %s head of %d label%s", e->cfg.n_labels == 1 ? "reranker" : "classifier",
                 e->cfg.n_labels, e->cfg.n_labels > 1 ? "s" : "");
    else if (e->dense.n)
        snprintf(dense, sizeof dense, ", %d Dense module%s to %d dimensions", e->dense.n, e->dense.n > 1 ? "s" : "",
                 mi->dim);
    if (e->cfg.static_emb)
        POSY_INFO("engine: %s (a static embedding model: the mean of %d-dimension rows over %d token ids%s%s) on %s, "
                  "max %d tokens%s / %d sequences per batch", mi->name, mi->hidden, mi->vocab, dense,
                  mi->normalize ? ", normalized" : "", e->ops->name, e->opts.max_batch_tokens,
                  e->auto_tokens ? " (the default)" : "", e->opts.max_batch_seqs);
    else
        POSY_INFO("engine: %s (%s, %d layers, hidden %d, %d heads, %s pooling%s%s%s) on %s %s, "
                  "max %d tokens%s / %d sequences per batch", mi->name, e->cfg.model_type, mi->layers, mi->hidden,
                  mi->heads, mi->pooling == POSY_POOL_MEAN ? "mean" : mi->pooling == POSY_POOL_CLS ? "cls" : "last-token",
                  dense, mi->normalize ? ", normalized" : "",
                  strcmp(mi->arch, "qwen3") ? "" : mi->causal ? ", causal attention" : ", bidirectional attention",
                  e->ops->name, mi->dtype, e->opts.max_batch_tokens, e->auto_tokens ? " (the device's default)" : "",
                  e->opts.max_batch_seqs);
    return e;
}

void posy_engine_close(posy_engine *e) {
    if (!e) return;
    if (e->ops) e->ops->close(e);
    engine_free(e, STAGE_WEIGHTS);
}

const posy_model_info *posy_engine_info(const posy_engine *e) { return &e->cfg.info; }

/* Shape of the batch: counts, cu_seqlens and lengths.  Reads only
 * cu_seqlens[0..n_seqs]. */
static int validate_shape(const posy_engine *e, const posy_batch *b, posy_err *err) {
    const posy_model_info *mi = &e->cfg.info;
    if (b->n_seqs < 1) return posy_err_set(err, POSY_E_INVALID, "batch: n_seqs is %d, need at least 1", b->n_seqs);
    if (b->n_seqs > e->opts.max_batch_seqs)
        return posy_err_set(err, POSY_E_TOO_LONG, "batch: %d sequences, over --max-batch-seqs %d",
                            b->n_seqs, e->opts.max_batch_seqs);
    if (b->n_tokens > e->opts.max_batch_tokens)
        return posy_err_set(err, POSY_E_TOO_LONG, "batch: %d tokens, over --max-batch-tokens %d",
                            b->n_tokens, e->opts.max_batch_tokens);
    if ((!b->ids && b->n_tokens) || !b->cu_seqlens || !b->out)
        return posy_err_set(err, POSY_E_INVALID, "batch: %s is NULL",
                            !b->cu_seqlens ? "cu_seqlens" : !b->out ? "out" : "ids");
    if (b->cu_seqlens[0] != 0)
        return posy_err_set(err, POSY_E_INVALID, "batch: cu_seqlens[0] is %d, must be 0", b->cu_seqlens[0]);
    for (int s = 0; s < b->n_seqs; s++) {
        long long len = (long long)b->cu_seqlens[s + 1] - b->cu_seqlens[s];
        if (len < 0)
            return posy_err_set(err, POSY_E_INVALID, "batch: cu_seqlens decreases at sequence %d (%d -> %d)",
                                s, b->cu_seqlens[s], b->cu_seqlens[s + 1]);
        /* a static embedding model embeds an empty text (no tokens) as sentence-transformers does: zeros */
        if (len == 0 && !e->cfg.static_emb) return posy_err_set(err, POSY_E_INVALID, "batch: sequence %d is empty", s);
        if (len > mi->max_positions)
            return posy_err_set(err, POSY_E_TOO_LONG,
                                "batch: sequence %d has %lld tokens, over the model's %d positions",
                                s, len, mi->max_positions);
    }
    for (int s = 0; b->pool_skip && s < b->n_seqs; s++)
        if (b->pool_skip[s] < 0 || b->pool_skip[s] >= (b->cu_seqlens[s + 1] > b->cu_seqlens[s]
                                                        ? b->cu_seqlens[s + 1] - b->cu_seqlens[s] : 1))
            return posy_err_set(err, POSY_E_INVALID,
                                "batch: sequence %d skips %d tokens in pooling but has %d (need 0 <= skip < length)",
                                s, b->pool_skip[s], b->cu_seqlens[s + 1] - b->cu_seqlens[s]);
    if (b->cu_seqlens[b->n_seqs] != b->n_tokens)
        return posy_err_set(err, POSY_E_INVALID, "batch: cu_seqlens ends at %d but n_tokens is %d",
                            b->cu_seqlens[b->n_seqs], b->n_tokens);
    if (b->tok_out && !mi->tok_dim)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "batch: token embeddings asked of %s, which gives none "
                            "(a static embedding, SPLADE, classifier or reranker model)", mi->name);
    return 0;
}

int posy_engine_validate(const posy_engine *e, const posy_batch *b, posy_err *err) {
    if (!b) return posy_err_set(err, POSY_E_INVALID, "batch: NULL");
    if (validate_shape(e, b, err) != 0) return -1;
    const posy_model_info *mi = &e->cfg.info;
    for (int t = 0; t < b->n_tokens; t++) {
        if (b->ids[t] < 0 || b->ids[t] >= mi->vocab)
            return posy_err_set(err, POSY_E_INVALID, "batch: token %d has id %d, outside the vocabulary (0..%d)",
                                t, b->ids[t], mi->vocab - 1), -1;
        if (b->type_ids && (b->type_ids[t] < 0 || b->type_ids[t] >= (mi->type_vocab > 0 ? mi->type_vocab : 1)))
            return posy_err_set(err, POSY_E_INVALID, "batch: token %d has type id %d, model has %d token types",
                                t, b->type_ids[t], mi->type_vocab > 0 ? mi->type_vocab : 1), -1;
    }
    return 0;
}

int posy_engine_step(posy_engine *e, const posy_batch *next, posy_result *done, int max_done,
                     posy_err *err) {
    if (next) {
        if (posy_engine_validate(e, next, err) != 0) return -1;
        if ((e->dense.n ? eng_dense_submit(e, next, err) : e->ops->submit(e, next, err)) != 0) return -1;
    }
    int n = e->ops->poll(e, done, max_done, 0);
    if (n > 0 && e->dense.n) eng_dense_finish(e, done, n);
    return n;
}

int posy_engine_wait(posy_engine *e, posy_result *done, int max_done) {
    if (e->ops->inflight(e) == 0) return 0;
    int n = e->ops->poll(e, done, max_done, 1);
    if (n > 0 && e->dense.n) eng_dense_finish(e, done, n);
    return n;
}

int posy_engine_inflight(const posy_engine *e) { return e->ops->inflight(e); }

void posy_engine_get_stats(const posy_engine *e, posy_engine_stats *out) {
    memset(out, 0, sizeof *out);
#ifdef POSY_HAVE_CUDA
    eng_cu_stats cs;
    if (eng_cuda_stats(e, &cs) != 0) return;   /* the CPU backend: all 0 */
    out->batches = cs.batches;
    out->tokens = cs.tokens;
    out->padded_tokens = cs.padded_tokens;
    out->graph_captures = cs.captures;
    out->graph_replays = cs.replays;
    out->eager_runs = cs.eager_runs;
    out->buckets_seen = cs.buckets_seen;
    out->graph_capture_seconds = cs.capture_ms * 1e-3;
    out->first_run_seconds = cs.first_run_ms * 1e-3;
    out->device_seconds = cs.gpu_ms * 1e-3;
#else
    (void)e;
#endif
}

/* gpu_harness: drive the CUDA backend directly, without the engine's front
 * (config/safetensors loader), so the GPU tests and bench depend only on
 * what src/engine/cuda owns.
 *
 * A model comes as a folder written by tests/cuda/e2e_vs_transformers.py
 * (BERT) or tests/cuda/e2e_qwen3.py (Qwen3), or as a user's model folder
 * (config.json + safetensors; no dims.txt), read by the engine's loaders:
 *   dims.txt     "H L heads I vocab type_vocab max_pos eps pooling normalize"
 *                or "qwen3 H L heads kv_heads head_dim I vocab max_pos eps
 *                rope_theta pooling normalize causal"
 *   weights.bin  fp32, in eng_bert_weights / eng_qwen3_weights order (QKV
 *                stacked, Qwen3's gate|up stacked), see below.
 * seqs.bin: int32 n, lens[n], then the ids of all sequences back to back.
 */
#ifndef GPU_HARNESS_H
#define GPU_HARNESS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eng_internal.h"
#include "eng_cu_backend.h"
#include "eng_relpos.h"

typedef struct gh_seqs { int n; int32_t *lens, *off, *ids; } gh_seqs;

static inline void *gh_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(*len ? *len : 1);
    if (!p || fread(p, 1, *len, f) != *len) { fprintf(stderr, "read %s failed\n", path); exit(2); }
    fclose(f);
    return p;
}

/* Qwen3: fill e->cfg and e->qwen3 from the folder (dims f already open
 * past the leading "qwen3"). */
static inline void gh_load_qwen3(posy_engine *e, const char *dir, FILE *f) {
    char path[1200];
    posy_model_info *in = &e->cfg.info;
    double eps, theta;
    int pool, norm, causal;
    if (fscanf(f, "%d %d %d %d %d %d %d %d %lf %lf %d %d %d", &in->hidden, &in->layers, &in->heads,
               &in->kv_heads, &e->cfg.head_dim, &in->intermediate, &in->vocab, &in->max_positions, &eps,
               &theta, &pool, &norm, &causal) != 13) { fprintf(stderr, "bad qwen3 dims.txt in %s\n", dir); exit(2); }
    fclose(f);
    in->type_vocab = 0;
    in->max_seq_len = in->max_positions;
    in->pooling = (posy_pooling)pool;
    in->normalize = norm;
    in->dim = in->hidden;
    in->causal = causal;
    snprintf(in->arch, sizeof in->arch, "qwen3");
    snprintf(in->model_dir, sizeof in->model_dir, "%s", dir);
    e->cfg.max_position_embeddings = in->max_positions;
    e->cfg.ln_eps = eps;
    e->cfg.rope = eng_rope_plain(theta); /* the harness models have no rope scaling */
    e->cfg.act = ENG_ACT_SILU;
    size_t len;
    snprintf(path, sizeof path, "%s/weights.bin", dir);
    float *w = (float *)gh_read(path, &len);
    const size_t H = in->hidden, I = in->intermediate, d = e->cfg.head_dim;
    const size_t A = in->heads * d, QKV = (in->heads + 2 * in->kv_heads) * d;
    eng_qwen3_weights *q = &e->qwen3;
    q->owned = w;
    float *p = w;
    q->embed = p; p += (size_t)in->vocab * H;
    q->norm = p; p += H;
    q->n_layers = in->layers;
    q->layers = (eng_qwen3_layer *)calloc((size_t)in->layers, sizeof *q->layers);
    for (int l = 0; l < in->layers; l++) {
        eng_qwen3_layer *L = &q->layers[l];
        L->qkv_w = p; p += QKV * H;
        L->o_w = p; p += H * A;
        L->q_norm = p; p += d;
        L->k_norm = p; p += d;
        L->ln1 = p; p += H;
        L->ln2 = p; p += H;
        L->gu_w = p; p += 2 * I * H;
        L->down_w = p; p += H * I;
    }
    if ((size_t)(p - w) * 4 != len) {
        fprintf(stderr, "%s: %zu bytes, expected %zu\n", path, len, (size_t)(p - w) * 4);
        exit(2);
    }
    /* GH_NO_QK_NORM=1: the same model without the q/k norm -- the shape of
     * Qwen2 / Mistral / Llama's layer, for timing their path (bench_gpu) */
    const char *nq = getenv("GH_NO_QK_NORM");
    if (nq && !strcmp(nq, "1"))
        for (int l = 0; l < in->layers; l++) q->layers[l].q_norm = q->layers[l].k_norm = NULL;
}

/* A model folder as a user has it (config.json, safetensors, the
 * sentence-transformers files: tests/cuda/e2e_decoders.py writes such
 * folders): read by the engine's own loaders, as posy_engine_open does. */
static inline void gh_load_hf(posy_engine *e, const char *dir) {
    posy_err err;
    posy_err_clear(&err);
    if (eng_config_load(&e->cfg, dir, &err) || eng_st_open_dir(&e->st, dir, &err) ||
        (!strcmp(e->cfg.info.arch, "qwen3") ? eng_qwen3_weights_load(&e->qwen3, &e->cfg, &e->st, &err)
                                            : eng_bert_weights_load(&e->bert, &e->cfg, &e->st, &err)) ||
        eng_dense_load_splade(&e->splade, &e->cfg, dir, &err)) {   /* a SPLADE model's head (else nothing) */
        fprintf(stderr, "%s: %s\n", dir, err.msg);
        exit(2);
    }
}

/* Fill e->cfg and e->bert (or e->qwen3) from a harness model folder
 * (dims.txt + weights.bin), or else from a user's model folder. */
static inline void gh_load_model(posy_engine *e, const char *dir) {
    char path[1200];
    snprintf(path, sizeof path, "%s/dims.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        gh_load_hf(e, dir);
        return;
    }
    char tag[16] = "";
    if (fscanf(f, "%15s", tag) == 1 && !strcmp(tag, "qwen3")) { gh_load_qwen3(e, dir, f); return; }
    /* "mpnet" first: MPNet -- positions from 2 (the table has max_positions
     * + 2 rows), no token types, and the relative position bias
     * [32, heads] after the layers; "roberta": positions from 2 too */
    const int mpnet = !strcmp(tag, "mpnet"), roberta = !strcmp(tag, "roberta"), off2 = mpnet || roberta;
    if (!off2) rewind(f);
    posy_model_info *in = &e->cfg.info;
    double eps;
    int pool, norm;
    if (fscanf(f, "%d %d %d %d %d %d %d %lf %d %d", &in->hidden, &in->layers, &in->heads,
               &in->intermediate, &in->vocab, &in->type_vocab, &in->max_positions, &eps, &pool,
               &norm) != 10) { fprintf(stderr, "bad %s\n", path); exit(2); }
    fclose(f);
    in->kv_heads = in->heads;
    in->max_seq_len = in->max_positions;
    e->cfg.max_position_embeddings = in->max_positions + (off2 ? 2 : 0);
    e->cfg.position_offset = off2 ? 2 : 0;
    e->cfg.pad_token_id = off2 ? 1 : 0;
    e->cfg.rel_buckets = mpnet ? ENG_RELPOS_BUCKETS : 0;
    in->pooling = (posy_pooling)pool;
    in->normalize = norm;
    in->dim = in->hidden;
    snprintf(in->arch, sizeof in->arch, mpnet ? "mpnet" : roberta ? "roberta" : "bert");
    snprintf(in->model_dir, sizeof in->model_dir, "%s", dir);
    e->cfg.ln_eps = eps;
    e->cfg.act = ENG_ACT_GELU;
    e->cfg.head_dim = in->hidden / in->heads;
    size_t len;
    snprintf(path, sizeof path, "%s/weights.bin", dir);
    float *w = (float *)gh_read(path, &len);
    const size_t H = in->hidden, I = in->intermediate;
    eng_bert_weights *b = &e->bert;
    b->owned = w;
    float *p = w;
    b->word_emb = p; p += (size_t)in->vocab * H;
    b->pos_emb = p; p += (size_t)e->cfg.max_position_embeddings * H;
    b->type_emb = p; p += (size_t)in->type_vocab * H;
    b->emb_ln_g = p; p += H;
    b->emb_ln_b = p; p += H;
    b->n_layers = in->layers;
    b->layers = (eng_bert_layer *)calloc((size_t)in->layers, sizeof *b->layers);
    for (int l = 0; l < in->layers; l++) {
        eng_bert_layer *L = &b->layers[l];
        L->qkv_w = p; p += 3 * H * H;
        L->qkv_b = p; p += 3 * H;
        L->ao_w = p; p += H * H;
        L->ao_b = p; p += H;
        L->ln1_g = p; p += H;
        L->ln1_b = p; p += H;
        L->up_w = p; p += I * H;
        L->up_b = p; p += I;
        L->down_w = p; p += H * I;
        L->down_b = p; p += H;
        L->ln2_g = p; p += H;
        L->ln2_b = p; p += H;
    }
    if (mpnet) { b->rel_bias = p; p += (size_t)ENG_RELPOS_BUCKETS * in->heads; }
    if ((size_t)(p - w) * 4 != len) {
        fprintf(stderr, "%s: %zu bytes, expected %zu\n", path, len, (size_t)(p - w) * 4);
        exit(2);
    }
}

static inline gh_seqs gh_load_seqs(const char *path) {
    size_t len;
    int32_t *d = (int32_t *)gh_read(path, &len);
    gh_seqs s;
    s.n = d[0];
    s.lens = d + 1;
    s.ids = d + 1 + s.n;
    s.off = (int32_t *)calloc((size_t)s.n + 1, 4);
    for (int i = 0; i < s.n; i++) s.off[i + 1] = s.off[i] + s.lens[i];
    return s;
}

#ifdef POSY_HAVE_CUDA
/* Open the CUDA backend on a harness model. */
static inline posy_engine *gh_open(const char *dir, int max_tokens, int max_seqs, posy_err *err) {
    posy_engine *e = (posy_engine *)calloc(1, sizeof *e);
    gh_load_model(e, dir);
    e->opts.device = POSY_DEVICE_CUDA;
    e->opts.max_batch_tokens = max_tokens;
    e->opts.max_batch_seqs = max_seqs;
    e->ops = &eng_cuda_backend;
    if (e->ops->open(e, err)) return NULL;
    return e;
}
#endif

/* A batch of sequences idx[0..k) of s, packed. */
typedef struct gh_batch { posy_batch b; int32_t *ids, *cu; float *out; int *idx; } gh_batch;

static inline void gh_batch_make(gh_batch *g, const gh_seqs *s, const int *idx, int k, int H, uint64_t tag) {
    int T = 0;
    for (int i = 0; i < k; i++) T += s->lens[idx[i]];
    g->ids = (int32_t *)malloc((size_t)T * 4);
    g->cu = (int32_t *)malloc(((size_t)k + 1) * 4);
    g->out = (float *)malloc((size_t)k * H * 4);
    g->idx = (int *)malloc((size_t)k * sizeof(int));
    memcpy(g->idx, idx, (size_t)k * sizeof(int));
    g->cu[0] = 0;
    for (int i = 0; i < k; i++) {
        memcpy(g->ids + g->cu[i], s->ids + s->off[idx[i]], (size_t)s->lens[idx[i]] * 4);
        g->cu[i + 1] = g->cu[i] + s->lens[idx[i]];
    }
    memset(&g->b, 0, sizeof g->b);
    g->b.tag = tag;
    g->b.n_seqs = k;
    g->b.n_tokens = T;
    g->b.ids = g->ids;
    g->b.cu_seqlens = g->cu;
    g->b.out = g->out;
}

static inline void gh_batch_free(gh_batch *g) { free(g->ids); free(g->cu); free(g->out); free(g->idx); }

/* Submit and wait for this one batch; returns its status. */
static inline int gh_run_sync(posy_engine *e, gh_batch *g) {
    posy_err err;
    if (e->ops->submit(e, &g->b, &err)) { fprintf(stderr, "submit: %s\n", err.msg); return -1; }
    posy_result r;
    int st = 0, got = 0;
    while (e->ops->inflight(e) > 0) {
        int n = e->ops->poll(e, &r, 1, 1);
        if (n == 1) { got++; if (r.status) st = r.status; }
    }
    return got == 1 ? st : -1;
}

static inline double gh_cos(const float *a, const float *b, int n) {
    double ab = 0, aa = 0, bb = 0;
    for (int i = 0; i < n; i++) { ab += (double)a[i] * b[i]; aa += (double)a[i] * a[i]; bb += (double)b[i] * b[i]; }
    return ab / (sqrt(aa * bb) + 1e-30);
}

#endif

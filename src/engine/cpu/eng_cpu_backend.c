/* eng_cpu_backend: the fp32 CPU backend (eng_backend_ops "cpu").
 *
 * One activation arena is reserved at open for the largest batch the engine
 * accepts (opts.max_batch_tokens), so a step never allocates:
 *   x      [T, H]   hidden states, updated in place layer after layer
 *   qkv    [T, 3H]  fused Q|K|V; once attention has read it, its first T*H
 *                   floats hold the attention-output and FFN-down GEMM
 *                   results before they are added back into x
 *   ctx    [T, H]   attention output (heads side by side)
 *   inter  [T, F]   FFN intermediate
 *   scratch         attention score tiles, one slice per thread
 * The forward pass is the BERT post-LN encoder (DeBERTa's with its
 * disentangled attention, eng_cpu_attention_deberta.c): embeddings + LN, then per
 * layer fused-QKV GEMM, varlen attention, output GEMM + residual + LN, up
 * GEMM + GELU, down GEMM + residual + LN; then pooling and L2 normalisation
 * written straight into the caller's batch->out.
 *
 * A batch finishes inside submit(); its result waits in a small ring until
 * poll() hands it back, which keeps the step() contract identical to the
 * asynchronous CUDA backend.  Threads: OpenBLAS and OpenMP both use
 * n_threads (opts.n_threads, 0 = every core).
 *
 * The linears run on eng_cpu_gemm_packed's kernel over weights packed at
 * open (the pages of the loaded copies are given back then, so the packed
 * copy does not double the weights held), which saves
 * OpenBLAS's per-call repacking (1.4x on one sentence) and makes a vector
 * independent of the batch it rode in; POSY_CPU_SMALL_GEMM=0 packs nothing
 * and keeps OpenBLAS.  The decoder-built models (eng_cpu_qwen3.c) pack their
 * own the same way.
 */
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>
#include "eng_cpu_gemm_packed.h"
#include "eng_cpu_kernels.h"
#include "eng_cpu_qwen3.h"
#include "eng_internal.h"
#include "eng_splade.h"
#include "posy_log.h"

#define CPU_DONE_CAP 64

/* A layer's four linear weights packed for eng_cpu_linear_packed. */
typedef struct cpu_layer_pack {
    eng_cpu_pack qkv, ao, up, down;
} cpu_layer_pack;

typedef struct cpu_backend {
    float *arena;
    float *x, *qkv, *ctx, *inter, *scratch;
    float *rel_tab;                 /* MPNet: the expanded relative position bias (eng_relpos.h) */
    eng_relpos rel;
    size_t scratch_floats;
    int n_threads;
    eng_cpu_isa isa;                  /* packed kernel, NONE: OpenBLAS only */
    cpu_layer_pack *packs;            /* [n_layers] when isa is not NONE */
    eng_cpu_qwen3 *qwen3;             /* arch qwen3: its forward and arena (eng_cpu_qwen3.c) */
    float *splade_buf;                /* a SPLADE model: eng_splade_pool's scratch */
    int *deb_idx;                     /* DeBERTa: the relative index of every distance (eng_deberta.h) */
    float *deb_kr, *deb_qr;           /* and each layer's projections of its relative table [L][rows, H] */
    posy_result done[CPU_DONE_CAP];   /* ring of finished, not yet collected */
    int done_head, n_done;
} cpu_backend;

static int cpu_open_qwen3(posy_engine *e, posy_err *err) {
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return posy_err_set(err, POSY_E_NOMEM, "CPU backend: out of memory");
    c->n_threads = e->opts.n_threads > 0 ? e->opts.n_threads : omp_get_num_procs();
    if (!(c->qwen3 = eng_cpu_qwen3_open(e, c->n_threads, err))) { free(c); return -1; }
    openblas_set_num_threads(c->n_threads);
    e->backend = c;
    return 0;
}

static void cpu_free_packs(cpu_backend *c, int n_layers) {
    if (!c->packs) return;
    for (int l = 0; l < n_layers; l++) {
        cpu_layer_pack *p = &c->packs[l];
        eng_cpu_pack_free(&p->qkv);
        eng_cpu_pack_free(&p->ao);
        eng_cpu_pack_free(&p->up);
        eng_cpu_pack_free(&p->down);
    }
    free(c->packs);
    c->packs = NULL;
}

/* Everything a backend holds (any of it NULL: not made yet). */
static void cpu_free(cpu_backend *c, int n_layers) {
    eng_cpu_qwen3_close(c->qwen3);
    cpu_free_packs(c, n_layers);
    free(c->rel_tab);
    free(c->deb_idx);
    free(c->deb_kr);
    free(c->deb_qr);
    free(c->splade_buf);
    free(c->arena);
    free(c);
}

/* Packs every layer's linear weights for the packed kernel; once all are
 * packed, the loaded copies' pages are given back (eng_st_release: those
 * the loader converted or stacked -- the fused Q|K|V always, every linear
 * of an F16/BF16 checkpoint -- with their pointers cleared; F32 tensors
 * used in place from the file mapping, which a read would fault back in).
 * Until then both copies exist, so a failure can fall back to the loaded
 * ones.
 * Not packing is never an error: without the memory, on a CPU without
 * AVX2+FMA, or with POSY_CPU_SMALL_GEMM=0, every linear stays on OpenBLAS. */
static void cpu_pack_layers(posy_engine *e, cpu_backend *c) {
    const eng_bert_weights *w = &e->bert;
    int H = e->cfg.info.hidden, F = e->cfg.info.intermediate, ok = 1;
    c->isa = eng_cpu_gemm_choice();
    if (c->isa == ENG_CPU_ISA_NONE) return;
    c->packs = calloc((size_t)w->n_layers, sizeof *c->packs);
    for (int l = 0; c->packs && ok && l < w->n_layers; l++) {
        const eng_bert_layer *L = &w->layers[l];
        cpu_layer_pack *p = &c->packs[l];
        ok = eng_cpu_pack_init(&p->qkv, L->qkv_w, 3 * H, H) == 0 &&
             eng_cpu_pack_init(&p->ao, L->ao_w, H, H) == 0 &&
             eng_cpu_pack_init(&p->up, L->up_w, F, H) == 0 &&
             eng_cpu_pack_init(&p->down, L->down_w, H, F) == 0;
    }
    if (!c->packs || !ok) {
        cpu_free_packs(c, w->n_layers);
        c->isa = ENG_CPU_ISA_NONE;
        POSY_WARN("engine cpu: no memory for the packed linear weights; OpenBLAS for all");
        return;
    }
    size_t bytes = (size_t)w->n_layers * (eng_cpu_pack_bytes(3 * H, H) + eng_cpu_pack_bytes(H, H) +
                                          eng_cpu_pack_bytes(F, H) + eng_cpu_pack_bytes(H, F));
    size_t given_back = 0;
    for (int l = 0; l < w->n_layers; l++) {
        eng_bert_layer *L = &e->bert.layers[l];
        const float **ws[4] = {&L->qkv_w, &L->ao_w, &L->up_w, &L->down_w};
        const size_t n[4] = {(size_t)3 * H * H, (size_t)H * H, (size_t)F * H, (size_t)H * F};
        for (int i = 0; i < 4; i++) given_back += eng_st_release(&e->st, w->owned, w->owned_floats, ws[i], n[i]);
    }
    POSY_DEBUG("engine cpu: packed linear kernel %s, packed weights %zu MiB, %zu MiB of loaded weights given back",
               c->isa == ENG_CPU_ISA_AVX512 ? "avx512" : "avx2", bytes >> 20, given_back >> 20);
}

/* DeBERTa: the relative index of every distance, and each layer's key and
 * query projections of the (LayerNormed) relative table -- constants of the
 * weights, made once here so a forward pass only gathers from them.  Must
 * run before cpu_pack_layers gives the loaded Q|K|V back. */
static int cpu_deberta_prep(posy_engine *e, cpu_backend *c) {
    const eng_deberta_cfg *d = &e->cfg.deb;
    const eng_bert_weights *w = &e->bert;
    const int H = e->cfg.info.hidden, rows = 2 * d->span, max_len = e->cfg.info.max_positions;
    const size_t tab = (size_t)rows * H;
    if (!(c->deb_idx = malloc(sizeof(int) * (2 * (size_t)max_len - 1)))) return -1;
    eng_deberta_index_table(d, max_len, c->deb_idx);
    if (!d->rel || (!d->c2p && !d->p2c)) return 0;
    float *rel = malloc(sizeof(float) * tab);
    if (!rel) return -1;
    memcpy(rel, w->rel_emb, sizeof(float) * tab);
    if (d->rel_ln) eng_cpu_add_layernorm(rel, NULL, w->rel_ln_g, w->rel_ln_b, (float)e->cfg.ln_eps, rows, H);
    if ((d->c2p && !(c->deb_kr = malloc(sizeof(float) * tab * w->n_layers))) ||
        (d->p2c && !(c->deb_qr = malloc(sizeof(float) * tab * w->n_layers)))) {
        free(rel);
        return -1;
    }
    for (int l = 0; l < w->n_layers; l++) {
        const eng_bert_layer *L = &w->layers[l];
        if (d->c2p)   /* the key projection: Q|K|V's middle third when shared */
            eng_cpu_linear(c->deb_kr + l * tab, rel, d->share_key ? L->qkv_w + (size_t)H * H : L->pk_w,
                           d->share_key ? L->qkv_b + H : L->pk_b, rows, H, H);
        if (d->p2c)
            eng_cpu_linear(c->deb_qr + l * tab, rel, d->share_key ? L->qkv_w : L->pq_w,
                           d->share_key ? L->qkv_b : L->pq_b, rows, H, H);
    }
    free(rel);
    return 0;
}

/* A static embedding model: no arena, no weights to pack. */
static int cpu_open_static(posy_engine *e, posy_err *err) {
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return posy_err_set(err, POSY_E_NOMEM, "CPU backend: out of memory");
    c->n_threads = e->opts.n_threads > 0 ? e->opts.n_threads : omp_get_num_procs();
    e->backend = c;
    return 0;
}

static int cpu_open(posy_engine *e, posy_err *err) {
    const posy_model_info *mi = &e->cfg.info;
    if (e->cfg.static_emb) return cpu_open_static(e, err);
    if (!strcmp(mi->arch, "qwen3")) return cpu_open_qwen3(e, err);
    if (e->cfg.act != ENG_ACT_GELU && e->cfg.act != ENG_ACT_GELU_TANH)
        return posy_err_set(err, POSY_E_UNSUPPORTED,
                            "%s/config.json: hidden_act of model_type '%s' is not supported by the "
                            "CPU engine (gelu and gelu_tanh are)", mi->model_dir, e->cfg.model_type);
    cpu_backend *c = calloc(1, sizeof *c);
    if (!c) return posy_err_set(err, POSY_E_NOMEM, "CPU backend: out of memory");
    c->n_threads = e->opts.n_threads > 0 ? e->opts.n_threads : omp_get_num_procs();
    size_t T = (size_t)e->opts.max_batch_tokens, H = (size_t)mi->hidden, F = (size_t)mi->intermediate;
    int longest = mi->max_positions < e->opts.max_batch_tokens ? mi->max_positions
                                                               : e->opts.max_batch_tokens;
    c->scratch_floats = e->cfg.deberta ? eng_cpu_attention_deberta_scratch_floats(longest, 2 * e->cfg.deb.span,
                                                                                  c->n_threads)
                                       : eng_cpu_attention_scratch_floats(longest, c->n_threads);
    size_t floats = T * (H + 3 * H + H + F) + c->scratch_floats;
    c->arena = aligned_alloc(64, ((floats * sizeof(float)) + 63) / 64 * 64);
    if (!c->arena) {
        free(c);
        return posy_err_set(err, POSY_E_NOMEM,
                            "CPU activation arena of %zu MiB for --max-batch-tokens %d: out of memory "
                            "(lower --max-batch-tokens)", floats * sizeof(float) >> 20,
                            e->opts.max_batch_tokens);
    }
    c->x = c->arena;
    c->qkv = c->x + T * H;
    c->ctx = c->qkv + T * 3 * H;
    c->inter = c->ctx + T * H;
    c->scratch = c->inter + T * F;
    if (e->cfg.splade && !(c->splade_buf = malloc(sizeof(float) * eng_splade_scratch_floats(&e->splade)))) {
        cpu_free(c, 0);
        return posy_err_set(err, POSY_E_NOMEM, "CPU backend: out of memory for the SPLADE head's scratch");
    }
    if (e->bert.rel_bias) {
        c->rel.max_len = mi->max_positions;
        c->rel_tab = malloc(sizeof(float) * (size_t)mi->heads * eng_relpos_span(mi->max_positions));
        if (!c->rel_tab) {
            cpu_free(c, 0);
            return posy_err_set(err, POSY_E_NOMEM, "CPU backend: out of memory for the relative position table");
        }
        eng_relpos_expand(c->rel_tab, e->bert.rel_bias, mi->heads, mi->max_positions, 1.0f);
        c->rel.tab = c->rel_tab;
    }
    if (e->cfg.deberta && cpu_deberta_prep(e, c) != 0) {
        cpu_free(c, 0);
        return posy_err_set(err, POSY_E_NOMEM, "CPU backend: out of memory for DeBERTa's relative position tables");
    }
    openblas_set_num_threads(c->n_threads);
    POSY_DEBUG("engine cpu: %d threads, activation arena %zu MiB", c->n_threads,
               floats * sizeof(float) >> 20);
    e->backend = c;
    cpu_pack_layers(e, c);
    if (e->cfg.splade) {   /* the masked-LM head too: OpenBLAS would repack its vocabulary-wide weight every chunk */
        const size_t b = eng_dense_pack(&e->splade);
        POSY_DEBUG("engine cpu: SPLADE head on %s (%zu MiB packed)", b ? "the packed kernel" : "OpenBLAS", b >> 20);
    }
    return 0;
}

static void cpu_close(posy_engine *e) {
    cpu_backend *c = e->backend;
    if (!c) return;
    cpu_free(c, e->bert.n_layers);
    e->backend = NULL;
}

/* One encoder layer over the packed batch, x updated in place. */
static int cpu_layer(posy_engine *e, cpu_backend *c, int l, const posy_batch *b) {
    const posy_model_info *mi = &e->cfg.info;
    const eng_bert_layer *L = &e->bert.layers[l];
    const cpu_layer_pack *P = c->packs ? &c->packs[l] : NULL;
    int T = b->n_tokens, H = mi->hidden, F = mi->intermediate;
    float eps = (float)e->cfg.ln_eps, *tmp = c->qkv;
    eng_cpu_linear_pk(c->isa, c->qkv, c->x, L->qkv_w, P ? &P->qkv : NULL, L->qkv_b, T, 3 * H, H);
    if (c->deb_idx) {
        const size_t tab = (size_t)2 * e->cfg.deb.span * H;
        const eng_cpu_deb_att a = {.kr = c->deb_kr ? c->deb_kr + l * tab : NULL,
                                   .qr = c->deb_qr ? c->deb_qr + l * tab : NULL,
                                   .idx = c->deb_idx, .max_len = mi->max_positions, .rows = 2 * e->cfg.deb.span,
                                   .scale_factor = eng_deberta_scale_factor(&e->cfg.deb)};
        if (eng_cpu_attention_deberta(c->ctx, c->qkv, b->cu_seqlens, b->n_seqs, mi->heads, e->cfg.head_dim, &a,
                                      c->scratch, c->scratch_floats) != 0)
            return -1;
    } else if (eng_cpu_attention(c->ctx, c->qkv, b->cu_seqlens, b->n_seqs, mi->heads, e->cfg.head_dim,
                                 mi->causal, c->rel_tab ? &c->rel : NULL, c->scratch, c->scratch_floats) != 0) {
        return -1;
    }
    eng_cpu_linear_pk(c->isa, tmp, c->ctx, L->ao_w, P ? &P->ao : NULL, L->ao_b, T, H, H);
    eng_cpu_add_layernorm(c->x, tmp, L->ln1_g, L->ln1_b, eps, T, H);
    eng_cpu_linear_pk(c->isa, c->inter, c->x, L->up_w, P ? &P->up : NULL, L->up_b, T, F, H);
    if (e->cfg.act == ENG_ACT_GELU_TANH) eng_cpu_gelu_tanh(c->inter, (size_t)T * F);
    else eng_cpu_gelu(c->inter, (size_t)T * F);
    eng_cpu_linear_pk(c->isa, tmp, c->inter, L->down_w, P ? &P->down : NULL, L->down_b, T, H, F);
    eng_cpu_add_layernorm(c->x, tmp, L->ln2_g, L->ln2_b, eps, T, H);
    return 0;
}

static int cpu_forward(posy_engine *e, cpu_backend *c, const posy_batch *b, posy_err *err) {
    const posy_model_info *mi = &e->cfg.info;
    const eng_bert_weights *w = &e->bert;
    if (c->qwen3) return eng_cpu_qwen3_forward(c->qwen3, e, b, err);
    omp_set_num_threads(c->n_threads);
    if (e->cfg.static_emb) {
        eng_cpu_static_mean(b->out, e->stat.emb, mi->hidden, b->ids, b->cu_seqlens, b->pool_skip, b->n_seqs);
        if (eng_config_pool_normalize(&e->cfg)) eng_cpu_l2_normalize(b->out, b->n_seqs, mi->hidden);
        return 0;
    }
    /* pos_emb is the whole stored table; RoBERTa-style models (a position
     * offset) place pad tokens by Hugging Face's rule. */
    eng_cpu_emb m = {.word = w->word_emb, .pos = w->pos_emb, .type = w->type_emb,
                     .ln_g = w->emb_ln_g, .ln_b = w->emb_ln_b, .hidden = mi->hidden,
                     .position_offset = e->cfg.position_offset,
                     .pad_id = e->cfg.position_offset > 0 ? e->cfg.pad_token_id : -1,
                     .eps = (float)e->cfg.ln_eps};
    eng_cpu_embed(&m, b->ids, b->type_ids, b->cu_seqlens, b->n_seqs, c->x);
    for (int l = 0; l < w->n_layers; l++)
        if (cpu_layer(e, c, l, b) != 0)
            return posy_err_set(err, POSY_E_INTERNAL,
                                "CPU attention scratch too small for this batch (a sequence longer "
                                "than max_positions %d passed validation?)", mi->max_positions);
    if (e->cfg.splade) {
        eng_splade_pool(&e->splade, e->cfg.splade_sum, e->cfg.splade_log2, c->x, b->cu_seqlens, b->n_seqs, b->out,
                        c->splade_buf);
        return 0;
    }
    if (b->tok_out) eng_cpu_copy_tokens(b->tok_out, c->x, b->cu_seqlens, b->n_seqs, mi->hidden);
    eng_cpu_pool(b->out, c->x, b->cu_seqlens, b->pool_skip, b->n_seqs, mi->hidden, mi->pooling);
    if (eng_config_pool_normalize(&e->cfg)) eng_cpu_l2_normalize(b->out, b->n_seqs, mi->hidden); /* Dense: the front does */
    return 0;
}

static int cpu_submit(posy_engine *e, const posy_batch *b, posy_err *err) {
    cpu_backend *c = e->backend;
    if (c->n_done == CPU_DONE_CAP)
        return posy_err_set(err, POSY_E_BUSY, "CPU engine: %d finished batches not collected yet",
                            CPU_DONE_CAP);
    posy_err ferr;
    posy_err_clear(&ferr);
    int status = cpu_forward(e, c, b, &ferr) == 0 ? POSY_OK : (int)ferr.code;
    if (status != POSY_OK && err) *err = ferr;
    posy_result *r = &c->done[(c->done_head + c->n_done) % CPU_DONE_CAP];
    r->tag = b->tag;
    r->status = status;
    c->n_done++;
    return 0;
}

static int cpu_poll(posy_engine *e, posy_result *done, int max_done, int block) {
    cpu_backend *c = e->backend;
    int n = 0;
    while (n < max_done && c->n_done > 0) {
        done[n++] = c->done[c->done_head];
        c->done_head = (c->done_head + 1) % CPU_DONE_CAP;
        c->n_done--;
    }
    return n;
}

static int cpu_inflight(const posy_engine *e) {
    const cpu_backend *c = e->backend;
    return c ? c->n_done : 0;
}

const eng_backend_ops eng_cpu_backend = {
    .name = "cpu",
    .open = cpu_open,
    .close = cpu_close,
    .submit = cpu_submit,
    .poll = cpu_poll,
    .inflight = cpu_inflight,
};

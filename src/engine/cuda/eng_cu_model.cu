/* eng_cu_model: weights upload, arena, and the encoder forward pass; the
 * open/forward entry points dispatch Qwen3 models to eng_cu_model_qwen3.cu.
 * See eng_cu_model.h for the contract.
 *
 * Weights: the host holds fp32 (the front's eng_bert_weights); here each
 * matrix and bias becomes bf16 and each norm parameter stays fp32, laid out
 * in one image by a bump allocator: one device allocation, filled 256 MiB
 * at a time through one host buffer (each pass places everything and
 * writes what falls in its window, eng_cu_window.h).  The same bump
 * allocator, run with nothing to write, sizes the image first, so sizing
 * and placing cannot disagree.
 *
 * Forward, per layer: qkv = X Wqkv^T + b; ctx = attention(qkv); y = ctx
 * Wo^T + b + X; X = LN(y); inter = gelu(X Wup^T + b); y = inter Wdown^T
 * + b + X; X = LN(y).  The residual adds ride in the GEMM epilogues
 * (beta = 1), so each LayerNorm reads one tensor.  Seven launches a layer,
 * plus embedding and pooling.  Buckets of at most 64 tokens run them as
 * the one-query chain (m->chain_max): the GEMMs through eng_cu_gemm_chain instead of
 * cuBLASLt, every kernel with programmatic dependent launch, so each
 * kernel's weights stream while its predecessor runs; in encoder buckets
 * of at most 32 (m->chain_ln) the two LayerNorms of a layer are folded
 * into the next QKV / up GEMMs as well (four launches a layer).  The persistent
 * kernel of eng_cu_mega.cu (opt-in) takes buckets of at most 64 instead.
 * Larger buckets of encoders with hidden size 256 or 384 on sm_90 (m->rowln)
 * may run the O and down projections with their LayerNorm as one kernel
 * each (eng_cu_gemm_wg_rowln), where that won the bucket's race (gemm_ln).
 */
#include "eng_cu_model.h"
#include "eng_cu_race.h"
#include "eng_relpos.h"
#include "eng_cu_window.h"
extern "C" {
#include "posy_log.h"
}
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bump { char *base; size_t off; } bump;

static void *take(bump *b, size_t bytes) {
    b->off = (b->off + 255) & ~(size_t)255;
    void *p = b->base ? b->base + b->off : NULL;
    b->off += bytes;
    return p;
}

eng_cu_in_layout eng_cu_in_layout_for(int tokens, int seqs) {
    eng_cu_in_layout l;
    l.tokens = tokens;
    l.seqs = seqs;
    l.max_tiles = eng_cu_attn_max_tiles(tokens, seqs);
    size_t o = 0;
    l.meta = o; o += ENG_CU_META_N;
    l.cu = o; o += (size_t)seqs + 1;
    l.skip = o; o += (size_t)seqs;
    o = (o + 3) & ~(size_t)3;
    l.tiles = o; o += 2 * (size_t)l.max_tiles;
    l.ids = o; o += (size_t)tokens;
    l.pos = o; o += (size_t)tokens;
    l.type = o; o += (size_t)tokens;
    l.total = o;
    return l;
}

/* ---- weights ---------------------------------------------------------------- */

typedef struct wplan {
    bump dev;        /* device base (NULL while sizing) and the image offset */
    char *buf;       /* NULL: plan only; else the image's bytes [lo, hi) (eng_cu_window.h) */
    size_t lo, hi;
    const float *zero;   /* zeros for a SPLADE projection's padding rows (NULL while sizing) */
} wplan;

/* The elements of n values placed at image offset `at` that fall in the
 * window, into buf as bf16 (or fp32 if f32). */
static void fill_at(wplan *p, const float *src, size_t n, int f32, size_t at) {
    const size_t es = f32 ? 4 : 2;
    size_t i0, i1;
    if (p->buf && src && eng_cu_window_span(p->lo, p->hi, at, n, es, &i0, &i1)) {
        char *h = p->buf + (at + i0 * es - p->lo);
        if (f32) memcpy(h, src + i0, (i1 - i0) * 4);
        else
            for (size_t i = i0; i < i1; i++) ((uint16_t *)(void *)h)[i - i0] = eng_cu_f2bf_bits(src[i]);
    }
}

/* Place n values at the next 256-byte boundary. */
static void *put(wplan *p, const float *src, size_t n, int f32) {
    const size_t es = f32 ? 4 : 2;
    void *d = take(&p->dev, n * es);
    fill_at(p, src, n, f32, p->dev.off - n * es);
    return d;
}

/* put without the 256-byte alignment: n more values right after the last
 * tensor placed (a zero padding that must continue it). */
static void put_contig(wplan *p, const float *src, size_t n, int f32) {
    const size_t at = p->dev.off;
    p->dev.off += n * (f32 ? 4 : 2);
    fill_at(p, src, n, f32, at);
}

/* Does anything placed from the next aligned offset on, `bytes` long (plus
 * alignment), touch the window?  Lets a fold skip its work outside it. */
static int in_window(const wplan *p, size_t bytes) {
    const size_t at = (p->dev.off + 255) & ~(size_t)255;
    return p->buf && at < p->hi && at + bytes > p->lo;
}

/* ln_rows: W (n x k, fp32) with the LayerNorm (g, beta) before it folded:
 * W' = W diag(g) placed as bf16, b' = b + W beta as bf16, and the column
 * sums of W' -- of its bf16 values, what the GEMM multiplies -- as fp32.
 * scratch: n * k floats (NULL while sizing). */
static void put_folded(wplan *p, const float *W, const float *b, const float *g, const float *beta, size_t n,
                       size_t k, float *scratch, bf16 **wf, bf16 **bf, float **cs) {
    float *bs = scratch ? scratch + n * k : NULL, *c = scratch ? bs + n : NULL;
    const int fill = scratch && W && in_window(p, n * k * 2 + n * 2 + n * 4 + 3 * 256);
    if (fill) {
        for (size_t r = 0; r < n; r++) {
            double bb = b ? b[r] : 0.0, sum = 0.0;
            for (size_t j = 0; j < k; j++) {
                const float v = W[r * k + j] * g[j];
                scratch[r * k + j] = v;
                sum += eng_cu_bf_bits2f(eng_cu_f2bf_bits(v));
                bb += (double)W[r * k + j] * beta[j];
            }
            bs[r] = (float)bb;
            c[r] = (float)sum;
        }
    }
    *wf = (bf16 *)put(p, fill ? scratch : NULL, n * k, 0);
    *bf = (bf16 *)put(p, fill ? bs : NULL, n, 0);
    *cs = (float *)put(p, fill ? c : NULL, n, 1);
}

static void plan_weights(eng_cu_model *m, wplan *p, const eng_bert_weights *w, float *scratch) {
    const size_t H = m->H, I = m->I;
    m->word = (bf16 *)put(p, w->word_emb, (size_t)m->vocab * H, 0);
    /* DeBERTa v3 has no position table: zeros under the same embedding kernel */
    m->pos = (bf16 *)put(p, w->pos_emb ? w->pos_emb : p->zero, (size_t)m->pos_rows * H, 0);
    m->type = m->type_vocab && w->type_emb ? (bf16 *)put(p, w->type_emb, (size_t)m->type_vocab * H, 0)
                                           : NULL;
    m->emb_g = (float *)put(p, w->emb_ln_g, H, 1);
    m->emb_b = (float *)put(p, w->emb_ln_b, H, 1);
    if (w->rel_bias) {
        /* MPNet: the relative position bias per head and distance, divided
         * by the softmax scale as the attention kernel adds it (eng_cu_attn_args.rel) */
        const size_t n = (size_t)m->heads * eng_relpos_span(m->max_pos);
        float *tab = in_window(p, n * sizeof(float)) ? (float *)malloc(n * sizeof(float)) : NULL;
        if (tab) eng_relpos_expand(tab, w->rel_bias, m->heads, m->max_pos, sqrtf((float)m->head_dim));
        m->rel = (float *)put(p, tab, n, 1);
        free(tab);
    }
    if (m->deb_rows) {   /* DeBERTa's relative table and its LayerNorm, fp32 (the tables are made at open) */
        m->deb_rel = (float *)put(p, w->rel_emb, (size_t)m->deb_rows * H, 1);
        if (m->deb_ln) {
            m->deb_rel_g = (float *)put(p, w->rel_ln_g, H, 1);
            m->deb_rel_b = (float *)put(p, w->rel_ln_b, H, 1);
        }
    }
    for (int l = 0; l < m->L; l++) {
        const eng_bert_layer *s = &w->layers[l];
        eng_cu_layer *d = &m->layers[l];
        if (m->deb_rows && !m->deb_share) {   /* DeBERTa's own position projections */
            if (m->deb_c2p) {
                d->pk_w = (bf16 *)put(p, s->pk_w, H * H, 0);
                d->pk_b = (bf16 *)put(p, s->pk_b, H, 0);
            }
            if (m->deb_p2c) {
                d->pq_w = (bf16 *)put(p, s->pq_w, H * H, 0);
                d->pq_b = (bf16 *)put(p, s->pq_b, H, 0);
            }
        }
        d->qkv_w = (bf16 *)put(p, s->qkv_w, 3 * H * H, 0);
        d->qkv_b = (bf16 *)put(p, s->qkv_b, 3 * H, 0);
        d->ao_w = (bf16 *)put(p, s->ao_w, H * H, 0);
        d->ao_b = (bf16 *)put(p, s->ao_b, H, 0);
        d->ln1_g = (float *)put(p, s->ln1_g, H, 1);
        d->ln1_b = (float *)put(p, s->ln1_b, H, 1);
        d->up_w = (bf16 *)put(p, s->up_w, I * H, 0);
        d->up_b = (bf16 *)put(p, s->up_b, I, 0);
        d->down_w = (bf16 *)put(p, s->down_w, H * I, 0);
        d->down_b = (bf16 *)put(p, s->down_b, H, 0);
        d->ln2_g = (float *)put(p, s->ln2_g, H, 1);
        d->ln2_b = (float *)put(p, s->ln2_b, H, 1);
        if (m->ln_rows || m->chain_ln) {
            put_folded(p, s->up_w, s->up_b, s->ln1_g, s->ln1_b, I, H, scratch, &d->upf_w, &d->upf_b, &d->upf_c);
            if (l) {
                const eng_bert_layer *pv = &w->layers[l - 1];
                put_folded(p, s->qkv_w, s->qkv_b, pv->ln2_g, pv->ln2_b, 3 * H, H, scratch, &d->qkvf_w, &d->qkvf_b,
                           &d->qkvf_c);
            }
        }
    }
    if (m->splade) {   /* the masked-LM head; the projection's rows past the vocabulary zero (p->zero) */
        const eng_dense_layer *t = m->sp_src ? &m->sp_src->layers[0] : NULL, *d = m->sp_src ? &m->sp_src->layers[1] : NULL;
        const size_t V = m->vocab, pad = (size_t)(m->vpad - m->vocab);
        m->sp_w1 = (bf16 *)put(p, t ? t->w : NULL, H * H, 0);
        m->sp_b1 = (bf16 *)put(p, t ? t->b : NULL, H, 0);
        m->sp_g = (float *)put(p, t ? t->ln_g : NULL, H, 1);
        m->sp_beta = (float *)put(p, t ? t->ln_b : NULL, H, 1);
        m->sp_w2 = (bf16 *)put(p, d ? d->w : NULL, V * H, 0);
        if (pad) put_contig(p, p->zero, pad * H, 0);
        m->sp_b2 = (bf16 *)put(p, d ? d->b : NULL, V, 0);
        if (pad) put_contig(p, p->zero, pad, 0);
    }
}

static int check_shape(eng_cu_model *m, const eng_config *cfg, posy_err *err) {
    const posy_model_info *in = &cfg->info;
    /* DistilBERT and MPNet: BERT's layer layout without token types
     * (the weights loader maps their names; MPNet adds its relative bias) */
    if (strcmp(in->arch, "bert") && strcmp(in->arch, "roberta") && strcmp(in->arch, "xlm-roberta") &&
        strcmp(in->arch, "distilbert") && strcmp(in->arch, "mpnet") && !cfg->deberta)
        return posy_err_set(err, POSY_E_UNSUPPORTED,
                            "cuda backend: architecture '%s' is not supported (bert, roberta, "
                            "xlm-roberta, distilbert, mpnet, deberta, qwen3)",
                            in->arch);
    if (cfg->deberta) {   /* BERT's layer; the attention and its tables: eng_cu_model_deberta.cu */
        /* on by default: against transformers' fp32 its logits are within
         * 1.8-2.6% of the largest logit (run 117), no worse than
         * transformers' own bf16 run of the same models (2.35-3.12%);
         * POSY_CUDA_DEBERTA=0 keeps DeBERTa on the CPU */
        const char *on = getenv("POSY_CUDA_DEBERTA");
        if (on && !strcmp(on, "0"))
            return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: DeBERTa kept on the CPU (POSY_CUDA_DEBERTA=0)");
        const eng_deberta_cfg *d = &cfg->deb;
        m->deb = 1;
        m->deb_cfg = *d;
        m->deb_rows = d->rel && (d->c2p || d->p2c) ? 2 * d->span : 0;
        m->deb_ln = d->rel_ln;
        m->deb_share = d->share_key;
        m->deb_c2p = d->rel && d->c2p;
        m->deb_p2c = d->rel && d->p2c;
        m->deb_sf = eng_deberta_scale_factor(d);
    }
    m->arch = ENG_CU_ARCH_BERT;
    m->H = in->hidden; m->I = in->intermediate; m->L = in->layers; m->heads = in->heads;
    m->vocab = in->vocab; m->type_vocab = in->type_vocab; m->max_pos = in->max_positions;
    m->pos_off = cfg->position_offset;
    /* the stored table: position i of a sequence reads row i + offset */
    m->pos_rows = cfg->max_position_embeddings ? cfg->max_position_embeddings
                                               : m->max_pos + m->pos_off;
    m->eps = (float)cfg->ln_eps;
    m->normalize = eng_config_pool_normalize(cfg); /* with Dense modules the engine front normalises after them */
    m->pool_mode = in->pooling == POSY_POOL_CLS ? ENG_CU_POOL_CLS
                   : in->pooling == POSY_POOL_LAST ? ENG_CU_POOL_LAST : ENG_CU_POOL_MEAN;
    if (m->heads <= 0 || m->H % m->heads)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: hidden %d not divisible by %d heads",
                            m->H, m->heads);
    m->head_dim = m->H / m->heads;
    m->kv_heads = m->heads;
    m->attn_n = m->H;
    m->qkv_n = 3 * m->H;
    if (m->head_dim != 32 && m->head_dim != 64 && m->head_dim != 128)
        return posy_err_set(err, POSY_E_UNSUPPORTED,
                            "cuda backend: head dim %d unsupported (32, 64 or 128)", m->head_dim);
    if (m->H % 8 || m->I % 8 || m->H > 4096)
        return posy_err_set(err, POSY_E_UNSUPPORTED,
                            "cuda backend: hidden %d / intermediate %d must be multiples of 8, hidden <= 4096",
                            m->H, m->I);
    if (cfg->act != ENG_ACT_GELU && cfg->act != ENG_ACT_GELU_TANH)
        return posy_err_set(err, POSY_E_UNSUPPORTED,
                            "cuda backend: only GELU activations are supported in BERT models");
    m->epi_up = ENG_CU_EPI_BIAS_GELU;
    m->gelu_tanh = cfg->act == ENG_ACT_GELU_TANH;
    m->out_dim = m->H;
    if (cfg->splade) {
        m->splade = 1;
        m->splade_sum = cfg->splade_sum;
        m->splade_log2 = cfg->splade_log2;
        m->vpad = (m->vocab + 63) & ~63;
        m->out_dim = m->vocab;
    }
    return 0;
}

int eng_cu_model_fail(posy_err *err, const char *what, cudaError_t ce) {
    return posy_err_set(err, ce == cudaErrorMemoryAllocation ? POSY_E_NOMEM : POSY_E_INTERNAL,
                        "cuda backend: %s: %s", what, cudaGetErrorString(ce));
}

static int upload_weights(eng_cu_model *m, const eng_bert_weights *w, posy_err *err) {
    wplan p = {{NULL, 0}, NULL, 0, 0, NULL};
    plan_weights(m, &p, w, NULL);
    m->wbytes = p.dev.off;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaError_t ce = cudaMalloc(&m->wmem, m->wbytes);
    if (ce != cudaSuccess) {
        m->wmem = NULL;
        return posy_err_set(err, POSY_E_NOMEM,
                            "cuda backend: weights need %.1f MiB of GPU memory, %.1f MiB free: %s",
                            m->wbytes / 1048576.0, free_b / 1048576.0, cudaGetErrorString(ce));
    }
    /* a window of the image at a time through one buffer, not the whole image on the host */
    const size_t win = m->wbytes < eng_cu_upload_window() ? m->wbytes : eng_cu_upload_window();
    char *buf = (char *)malloc(win);
    /* ln_rows / chain_ln: the folding's fp32 scratch, the largest matrix folded (up or QKV) and its two vectors */
    const size_t big = (size_t)(m->I > 3 * m->H ? m->I : 3 * m->H);
    const int folds = m->ln_rows || m->chain_ln;
    float *scratch = folds ? (float *)malloc((big * m->H + 2 * big) * sizeof(float)) : NULL;
    /* zeros: a SPLADE projection's padding rows, DeBERTa v3's missing position table */
    size_t nz = m->splade ? (size_t)(m->vpad - m->vocab + 1) * m->H : 0;
    if (!w->pos_emb && (size_t)m->pos_rows * m->H > nz) nz = (size_t)m->pos_rows * m->H;
    float *zero = nz ? (float *)calloc(nz, sizeof(float)) : NULL;
    if (!buf || (folds && !scratch) || (nz && !zero)) {
        free(buf);
        free(scratch);
        free(zero);
        return posy_err_set(err, POSY_E_NOMEM, "cuda backend: upload buffer of %zu bytes", win);
    }
    p.zero = zero;
    for (size_t lo = 0; lo < m->wbytes && ce == cudaSuccess; lo += win) {
        p.dev.base = (char *)m->wmem; p.dev.off = 0;
        p.buf = buf; p.lo = lo; p.hi = lo + win < m->wbytes ? lo + win : m->wbytes;
        plan_weights(m, &p, w, scratch);
        ce = cudaMemcpy((char *)m->wmem + lo, buf, p.hi - lo, cudaMemcpyHostToDevice);
    }
    free(buf);
    free(scratch);
    free(zero);
    return ce == cudaSuccess ? 0 : eng_cu_model_fail(err, "weights upload", ce);
}

static void plan_arena(eng_cu_model *m, bump *b) {
    const size_t T = m->max_tokens, H = m->H, I = m->I;
    const int q3 = m->arch == ENG_CU_ARCH_QWEN3;
    m->x = (bf16 *)take(b, T * H * 2);
    m->qkv = (bf16 *)take(b, T * (size_t)m->qkv_n * 2);
    m->ctx = (bf16 *)take(b, T * (size_t)m->attn_n * 2);
    m->y = (bf16 *)take(b, T * H * 2);
    m->inter = (bf16 *)take(b, T * (q3 ? 2 * I : I) * 2);
    m->h = q3 ? (bf16 *)take(b, T * H * 2) : NULL;
    m->act = q3 ? (bf16 *)take(b, T * I * 2) : NULL;
    m->rs = q3 ? (float *)take(b, T * 4) : NULL;
    m->ln_part = m->ln_rows ? (float2 *)take(b, T * (H / 64) * sizeof(float2)) : NULL;
    m->ln_s1 = m->ln_rows || m->chain_ln ? (float2 *)take(b, T * sizeof(float2)) : NULL;
    m->ln_s2 = m->ln_rows || m->chain_ln ? (float2 *)take(b, T * sizeof(float2)) : NULL;
    m->pooled = (float *)take(b, (size_t)m->max_seqs * (m->out_dim ? m->out_dim : H) * 4);
    m->sp_logits = m->splade ? (bf16 *)take(b, (size_t)ENG_CU_SPLADE_CHUNK * m->vpad * 2) : NULL;
    m->d_in = (int32_t *)take(b, eng_cu_in_layout_for(m->max_tokens, m->max_seqs).total * 4);
    m->attn_work = (int *)take(b, 2 * sizeof(int));
    m->att_cnt = (unsigned *)take(b, (size_t)m->kv_heads * sizeof(unsigned));
}

static int reserve_arena(eng_cu_model *m, posy_err *err) {
    bump b = {NULL, 0};
    plan_arena(m, &b);
    m->abytes = b.off;
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaError_t ce = cudaMalloc(&m->amem, m->abytes);
    if (ce != cudaSuccess) {
        m->amem = NULL;
        return posy_err_set(err, POSY_E_NOMEM,
                            "cuda backend: --max-batch-tokens %d needs %.1f MiB of GPU memory for "
                            "activations, %.1f MiB free; lower --max-batch-tokens",
                            m->max_tokens, m->abytes / 1048576.0, free_b / 1048576.0);
    }
    b.base = (char *)m->amem;
    b.off = 0;
    plan_arena(m, &b);
    /* finite, deterministic contents in rows no batch has written yet */
    ce = cudaMemset(m->amem, 0, m->abytes);
    return ce == cudaSuccess ? 0 : eng_cu_model_fail(err, "arena clear", ce);
}

int eng_cu_model_open(eng_cu_model *m, const eng_config *cfg, const eng_bert_weights *bert,
                      const eng_qwen3_weights *q3, int max_tokens, int max_seqs, posy_err *err,
                      const eng_dense *splade) {
    memset(m, 0, sizeof *m);
    m->sp_src = splade;
    if (cfg->splade && (!splade || splade->n != 2))
        return posy_err_set(err, POSY_E_INTERNAL, "cuda backend: a SPLADE model's head was not loaded");
    const int is_q3 = !strcmp(cfg->info.arch, "qwen3");
    if (is_q3 ? eng_cu_qwen3_shape(m, cfg, err) : check_shape(m, cfg, err)) return -1;
    if (!m->out_dim) m->out_dim = m->H;   /* the decoders' shape leaves it: pooled vectors of H */
    const int n_layers = is_q3 ? (q3 ? q3->n_layers : -1) : (bert ? bert->n_layers : -1);
    if (n_layers != m->L)
        return posy_err_set(err, POSY_E_INVALID, "cuda backend: weights have %d layers, config %d",
                            n_layers, m->L);
    m->max_tokens = (max_tokens + 15) & ~15;
    m->max_seqs = max_seqs < m->max_tokens ? max_seqs : m->max_tokens;
    m->layers = (eng_cu_layer *)calloc((size_t)m->L, sizeof *m->layers);
    if (!m->layers) return posy_err_set(err, POSY_E_NOMEM, "cuda backend: layer table");
    char msg[256];
    m->gemm = eng_cu_gemm_create((size_t)32 << 20, msg, sizeof msg);
    if (!m->gemm) {
        posy_err_set(err, POSY_E_INTERNAL, "cuda backend: %s", msg);
        eng_cu_model_close(m);
        return -1;
    }
    eng_cu_gemm_set_tuning(m->gemm, getenv("POSY_CUDA_NO_TUNE") == NULL);
    /* PDL for every bucket: measured on the H200 (bench/results/
     * h200-latency-modes-pdl-*) no latency gain while cuBLASLt's kernels sit
     * between ours, throughput 2-3% lower in that run -- opt-in only */
    m->pdl_env = getenv("POSY_CUDA_PDL") != NULL;
    {
        /* the one-query chain: on for buckets of up to 64 tokens for
         * encoders and 32 for decoders, where it was faster on the H200
         * (MiniLM, BERT-base up to 64; Qwen3-0.6B up to 32, slower at 64:
         * docs/BENCHMARKS.md, "One query"); Gemma 3 / ModernBERT up to 64
         * (run 106, an H100: 0.59-0.62x the graph path's time at 16
         * tokens, 0.84-0.86x at 64) */
        const char *c = getenv("POSY_CUDA_CHAIN");
        m->chain_max = c ? atoi(c) : is_q3 && !m->glu ? 32 : 64; /* 0 (or not a number): off */
        if (m->chain_max < 0) m->chain_max = 0;
        if (m->chain_max > 64) m->chain_max = 64; /* the chain kernel's row limit */
        const char *cn = getenv("POSY_CUDA_CHAIN_NORM");
        m->chain_norm = cn && !strcmp(cn, "1");
        const char *fn = getenv("POSY_CUDA_FOLD_NORM");
        m->fold_norm = is_q3 && !m->glu && !(fn && !strcmp(fn, "0")); /* RMSNorms only, before the GEMM */
        const char *cq = getenv("POSY_CUDA_CHAIN_QK");
        m->chain_qk = !(cq && !strcmp(cq, "0"));
        const char *cr = getenv("POSY_CUDA_CHAIN_ROPE");
        /* buckets of <= 16 tokens by default (Qwen3-0.6B's shape without
         * the norm, an H100, run 93: 16 tokens 665.6 -> 646.5 us; 32 tokens
         * 845.2 -> 849.8, so that bucket keeps the node) */
        m->chain_rope = cr ? (!strcmp(cr, "0") ? 0 : !strcmp(cr, "1") ? 64 : 16) : 16;
        const char *cs = getenv("POSY_CUDA_CHAIN_SWIGLU");
        m->chain_swiglu = !(cs && !strcmp(cs, "0"));
        const char *cl = getenv("POSY_CUDA_CHAIN_L2");
        m->chain_l2 = cl ? atoi(cl) : 0; /* GEMMs ahead; 0 (or not a number): off */
        if (m->chain_l2 < 0 || m->chain_l2 > 8) m->chain_l2 = 0;
        const char *ca = getenv("POSY_CUDA_CHAIN_ATTN");
        m->chain_attn = !ca ? 1 : !strcmp(ca, "0") ? 0 : !strcmp(ca, "1") ? 2 : 1; /* else: auto */
        const char *cw = getenv("POSY_CUDA_CHAIN_ATTN_WH");
        eng_cu_chain_attn_wh = !(cw && !strcmp(cw, "0")); /* one head a warp in attention + O: eng_cu.h */
        const char *ct = getenv("POSY_CUDA_CHAIN_TRIGGER");
        m->chain_trigger = ct ? atoi(ct) & 15 : -1; /* -1: the default, chain_late_mask */
        const char *cpw = getenv("POSY_CUDA_CHAIN_PADW"); /* padded chain weights: eng_cu_model.h */
        m->chain_padw = !cpw ? (is_q3 ? 15 : 0) : !strcmp(cpw, "1") ? 15 : !strcmp(cpw, "0") ? 0 : is_q3 ? 15 : 0;
        const char *cpr = getenv("POSY_CUDA_CHAIN_PADW_ROLES"); /* an experiment's mask: 1 QKV, 2 O, 4 up, 8 down */
        if (cpr && m->chain_padw) m->chain_padw = atoi(cpr) & 15;
        const char *cb = getenv("POSY_CUDA_CHAIN_BULK");
        eng_cu_chain_bulk = !(cb && !strcmp(cb, "0"));
        const char *cqa = getenv("POSY_CUDA_CHAIN_QKV_ATT"); /* attention in the QKV GEMM: eng_cu_model.h */
        m->chain_qkv_att = is_q3 && cqa && !strcmp(cqa, "1");
        const char *cff = getenv("POSY_CUDA_CHAIN_FFN"); /* the MLP as one launch: eng_cu_model.h */
        m->chain_ffn = cff && !strcmp(cff, "1");
        const char *cab = getenv("POSY_CUDA_CHAIN_AB"); /* an encoder's attention block as one launch */
        m->chain_ab = !is_q3 && cab && !strcmp(cab, "1");
        const char *cao = getenv("POSY_CUDA_CHAIN_AO"); /* attention + O as one launch: eng_cu_model.h */
        m->chain_ao = is_q3 && cao && !strcmp(cao, "1");
        const char *cqs = getenv("POSY_CUDA_QSTREAM"); /* the layers as one persistent kernel: eng_cu_model.h */
        m->qs_on = is_q3 && cqs && !strcmp(cqs, "1");
        const char *cdf = getenv("POSY_CUDA_CHAIN_DOWN_FLOOR"); /* an experiment: eng_cu.h */
        eng_cu_chain_down_floor = cdf && !strcmp(cdf, "1");
        const char *cnc = getenv("POSY_CUDA_CHAIN_NC"); /* columns a chain GEMM block: eng_cu.h */
        eng_cu_chain_nc = !cnc ? 0 : !strcmp(cnc, "16") ? 16 : !strcmp(cnc, "32") ? 32 : 0;
        /* encoders: the chain's LayerNorms folded into the QKV and up
         * GEMMs (eng_cu_gemm_chain's LayerNorm fold, the O / down residual
         * normalised in their epilogues), two nodes fewer a layer, for
         * chain buckets of at most chain_ln tokens (POSY_CUDA_CHAIN_LN=N).
         * Alone it gained nothing on the H200 (runs 2 and 9 of 2026-12-03:
         * the removed nodes' 14 us came back as slower nodes); the late
         * trigger (chain_late_mask) is what makes it pay: 16 tokens MiniLM
         * 74.1 -> 70.0 us, BERT-base 220 -> 200.5; 32 tokens 89.4 -> 88.3,
         * 261 -> 254 (run 10); at 64 tokens it still loses (BERT-base 362
         * -> 455), so 32 is the bound to use.  Default 32 since run 12
         * (2026-12-03), which timed the build with the trigger as a template
         * parameter: 16 tokens MiniLM 74.2 -> 69.5 us, BERT-base 218.8 ->
         * 200.3; 32 tokens 89.2 -> 89.0, 260.8 -> 252.7 (run 10 had the
         * trigger as a runtime branch, which slowed other kernels:
         * dev/cuda/NOTES.md).  POSY_CUDA_CHAIN_LN=0 turns it off.  The
         * folded copies of the QKV and up weights cost one more copy of
         * those matrices in device memory (BERT-base ~100 MB) */
        const char *cln = getenv("POSY_CUDA_CHAIN_LN");
        m->chain_ln = is_q3 || m->chain_norm ? 0 : !cln ? 32 : atoi(cln);
        if (m->chain_ln < 0) m->chain_ln = 0;
        if (m->chain_ln > m->chain_max) m->chain_ln = m->chain_max;
        if (m->chain_ln && !(eng_cu_gemm_chain_ok(m->chain_ln, 3 * m->H, m->H, 3) &&
                             eng_cu_gemm_chain_ok(m->chain_ln, m->I, m->H, 3)))
            m->chain_ln = 0; /* a shape the fold is not built for: the chain keeps its norm kernels */
        if (m->deb) /* DeBERTa: the graph path's plain layers (eng_cu_model_deberta.cu), no chain */
            m->chain_max = m->chain_ln = m->chain_ab = 0;
        if (!is_q3 && bert && bert->rel_bias) {
            /* MPNet: of the chain's fused attention forms only attention
             * inside O adds the relative bias; the attention block as one
             * launch (opt-in) does not, so it is off */
            m->chain_ab = 0;
        }
    }
    {
        /* the attention tile list heaviest first (POSY_CUDA_ATTN_ORDER=0:
         * sequence order, as before 2026-12-03): eng_cu_attn_tiles_heavy_first
         * says why */
        const char *ao = getenv("POSY_CUDA_ATTN_ORDER");
        m->attn_order = !(ao && !strcmp(ao, "0"));
    }
    {
        /* our Hopper GEMM, on by default where the device has it (sm_90):
         * it races cuBLASLt at every large product, and for Qwen3 also
         * runs the gate|up + SwiGLU as one kernel where that wins its
         * race.  H200 saturated steps with it against without, runs of
         * 2026-12-02 (docs/BENCHMARKS.md, "Our own Hopper GEMM in the
         * engine"): Qwen3-0.6B 1.051 / 1.052x, MiniLM 1.010 / 1.003x,
         * BERT-base 1.004 / 1.003x (equal 128 / random 16-512).
         * POSY_CUDA_WGMMA=0 turns it off */
        const char *wg = getenv("POSY_CUDA_WGMMA"), *wv = getenv("POSY_CUDA_WG_VERSION");
        const int want = !(wg && !strcmp(wg, "0"));
        /* the versions raced: 3 and 4 (each wins somewhere) and 6 (W
         * resident: short K only, eng_cu_gemm_wres.cu), or those
         * POSY_CUDA_WG_VERSION names (digits 1..6, e.g. "5" or "3,4,5": for
         * experiments; racing 5 beside 3 and 4 moved the saturated steps
         * by 0.999-1.005x on the H200, 2026-12-02 run 16) */
        int v = 0;
        for (const char *c = wv; c && *c; c++)
            if (*c >= '1' && *c <= '6') v |= 1 << (*c - '0');
        m->wg_versions = want && eng_cu_gemm_wg_available() ? (v ? v : 1 << 3 | 1 << 4 | 1 << 6) : 0;
        eng_cu_gemm_set_own(m->gemm, m->wg_versions);
        /* Qwen3's QKV + q/k norm + rotary in our GEMM, raced per bucket
         * (POSY_CUDA_QKV_FUSE=0 off), and with it the norms before the
         * fused QKV / SwiGLU as row statistics (POSY_CUDA_RMS_ROWS=0 off).
         * H200, 2026-12-02 run 16, saturated Qwen3-0.6B steps against the
         * defaults before them: 1.024 / 1.026x with the fused QKV, 1.038 /
         * 1.037x with both (equal 128 / random 16-512); e2e_qwen3 passes
         * with each (lab_wgmma checks both against fp64) */
        const char *qf = getenv("POSY_CUDA_QKV_FUSE");
        m->qkv_fuse = !(qf && !strcmp(qf, "0"));
        const char *rr = getenv("POSY_CUDA_RMS_ROWS");
        m->rms_rows = !(rr && !strcmp(rr, "0"));
        /* ... computed by the fused GEMM itself (POSY_CUDA_RMS_SELF=1, an
         * experiment): correct, but 1.49-1.71x the time of eng_cu_rms_rows
         * + the product in the lab and 0.80x the saturated Qwen3 step on
         * the H200 (2026-12-02) -- the statistics' shared-memory loads
         * beside the wgmma cost far more than their bytes */
        const char *rself = getenv("POSY_CUDA_RMS_SELF");
        m->rms_self = rself && !strcmp(rself, "1");
        /* the encoders' LayerNorms as row statistics in our GEMMs'
         * epilogues (POSY_CUDA_LN_ROWS=1: an experiment, off).  Correct
         * (lab_wgmma's ln checks, e2e_vs_transformers MiniLM 0.999964,
         * BERT-base 0.999933) but slower on the H200 (2026-12-02 runs 22,
         * 23): saturated steps 0.986-0.999x (MiniLM), 0.970-0.976x
         * (BERT-base) -- forcing our GEMM in versions 3 / 4 on every
         * product and the LNA epilogue's extra loads (QKV 1.13x) cost
         * more than the two add_ln passes a layer; fusing only the first
         * norm of a layer was slower still (0.965-0.980x, run 23) */
        const char *lr = getenv("POSY_CUDA_LN_ROWS");
        m->ln_rows = !is_q3 && m->wg_versions && m->H % 64 == 0 && m->epi_up == ENG_CU_EPI_BIAS_GELU && lr &&
                     !strcmp(lr, "1");
        /* the O and down projections with the LayerNorm after them in one
         * kernel (tiles of whole rows: hidden size 256 or 384), raced per
         * bucket against the product + add_ln (POSY_CUDA_ROWLN=0 off) */
        const char *rl = getenv("POSY_CUDA_ROWLN");
        m->rowln = !is_q3 && m->wg_versions && eng_cu_gemm_wg_rowln_ok(1, m->H, m->H) &&
                   eng_cu_gemm_wg_rowln_ok(1, m->H, m->I) && !(rl && !strcmp(rl, "0"));
        if (m->deb) m->ln_rows = m->rowln = 0;
    }
    {
        /* the graph path's kernels in serpentine order (eng_cu_order.c;
         * POSY_CUDA_SERP=0 off) */
        const char *sp = getenv("POSY_CUDA_SERP");
        m->serp = !(sp && !strcmp(sp, "0"));
    }
    {
        const char *sk = getenv("POSY_CUDA_SKINNY");
        eng_cu_skinny_version = sk && !strcmp(sk, "2") ? 2 : 1;
    }
    if ((is_q3 ? eng_cu_qwen3_upload(m, cfg, q3, err) : upload_weights(m, bert, err)) ||
        reserve_arena(m, err) || (m->deb ? eng_cu_deberta_prepare(m, err) : eng_cu_mega_prepare(m, err))) {
        eng_cu_model_close(m);
        return -1;
    }
    m->sp_src = NULL;   /* the host head may go now (drop_host_weights) */
    return 0;
}

void eng_cu_model_close(eng_cu_model *m) {
    cudaFree(m->deb_mem);
    for (int i = 0; i < m->n_wps; i++) cudaFree(m->chain_wps[i].p);
    free(m->chain_wps);
    if (m->ffn_img)
        for (int l = 0; l < m->L; l++) cudaFree(m->ffn_img[l]);
    free(m->ffn_img);
    if (m->ffn_part) cudaFree(m->ffn_part);
    if (m->ffn_bar) cudaFree(m->ffn_bar);
    if (m->ao_img)
        for (int l = 0; l < m->L; l++) cudaFree(m->ao_img[l]);
    free(m->ao_img);
    if (m->ao_part) cudaFree(m->ao_part);
    if (m->ao_bar) cudaFree(m->ao_bar);
    if (m->ab_img)
        for (int l = 0; l < m->L; l++) cudaFree(m->ab_img[l]);
    free(m->ab_img);
    if (m->ab_part) cudaFree(m->ab_part);
    if (m->ab_bar) cudaFree(m->ab_bar);
    if (m->qs_img) cudaFree(m->qs_img);
    if (m->qs_norms) cudaFree(m->qs_norms);
    if (m->qs_bar) cudaFree(m->qs_bar);
    if (m->gemm) eng_cu_gemm_destroy(m->gemm);
    if (m->wmem) cudaFree(m->wmem);
    if (m->amem) cudaFree(m->amem);
    cudaFree(m->tok);
    if (m->mega_mem) cudaFree(m->mega_mem);
    free(m->layers);
    memset(m, 0, sizeof *m);
}

/* ---- forward ------------------------------------------------------------------ */

#define CK(what, call)                                                        \
    do {                                                                      \
        cudaError_t ce_ = (call);                                             \
        if (ce_ != cudaSuccess) return eng_cu_model_fail(err, what, ce_);             \
    } while (0)

/* Every GEMM of the architecture's layer as the chain kernel, with the
 * norm prologue or the RMS fold where the chain forward uses one (the
 * fold is built for up to 32 rows: with it, Qwen3's larger buckets take
 * the graph path even if POSY_CUDA_CHAIN asks for more). */
static int chain_fits(const eng_cu_model *m, int T) {
    const int H = m->H, I = m->I, nrm = m->chain_norm;
    if (m->arch == ENG_CU_ARCH_QWEN3) {
        const int q = nrm ? 1 : m->fold_norm ? 2 : 0; /* the prologue, or the RMS fold */
        return eng_cu_gemm_chain_ok(T, m->qkv_n, H, q) && eng_cu_gemm_chain_ok(T, H, m->attn_n, 0) &&
               eng_cu_gemm_chain_ok(T, 2 * I, H, q) && eng_cu_gemm_chain_ok(T, H, I, 0);
    }
    const int q = nrm ? 1 : T <= m->chain_ln ? 3 : 0; /* the prologue, or the LayerNorm fold */
    return eng_cu_gemm_chain_ok(T, 3 * H, H, q) && eng_cu_gemm_chain_ok(T, H, H, 0) &&
           eng_cu_gemm_chain_ok(T, I, H, q) && eng_cu_gemm_chain_ok(T, H, I, 0);
}

int eng_cu_model_chain_begin(const eng_cu_model *m, int T) {
    const int chain = T <= m->chain_max && chain_fits(m, T);
    eng_cu_pdl_on = chain || m->pdl_env;
    eng_cu_order_begin(!chain && m->serp);
    return chain;
}

/* The weights the forward multiplies by `ahead` GEMMs after W, in the
 * order qkv -> o -> up -> down -> the next layer's qkv, and their bytes,
 * for the chain's L2 prefetch; NULL past the last layer's down projection
 * or for a W not in the table. */
/* Where W sits in the forward's order of products: 4 l + 0 (QKV), 1 (O),
 * 2 (up or gate/up), 3 (down) of layer l; with `folded`, the LayerNorm
 * fold's copies of QKV and up count as theirs; -1 for a W not in the table. */
static int weight_slot(const eng_cu_model *m, const bf16 *W, int folded) {
    for (int l = 0; l < m->L; l++) {
        const eng_cu_layer *w = &m->layers[l];
        if (W == w->qkv_w || (folded && w->qkvf_w && W == w->qkvf_w)) return 4 * l;
        if (W == w->ao_w) return 4 * l + 1;
        if (W == w->up_w || (folded && w->upf_w && W == w->upf_w)) return 4 * l + 2;
        if (W == w->down_w) return 4 * l + 3;
    }
    return -1;
}

static const bf16 *weights_ahead(const eng_cu_model *m, const bf16 *W, int ahead, size_t *bytes) {
    const size_t H = m->H, I = m->I, up_n = m->arch == ENG_CU_ARCH_QWEN3 ? 2 * I : I;
    const int at = weight_slot(m, W, 0);
    if (at < 0 || at + ahead >= 4 * m->L) return NULL;
    const eng_cu_layer *w = &m->layers[(at + ahead) / 4];
    switch ((at + ahead) % 4) {
    case 0: *bytes = (size_t)m->qkv_n * H * 2; return w->qkv_w;
    case 1: *bytes = H * m->attn_n * 2; return w->ao_w;
    case 2: *bytes = up_n * H * 2; return w->up_w;
    default: *bytes = H * I * 2; return w->down_w;
    }
}

/* The chain kernels that trigger their dependents after their own wait,
 * a bit per role (chain_trigger; weight_slot % 4): as
 * POSY_CUDA_CHAIN_TRIGGER says, else all four in the encoders' chain
 * buckets: in the folded ones (T <= chain_ln) with the norm kernels gone
 * nothing else keeps the chain from launching every kernel at once, and
 * ~20 kernels' blocks waiting ahead made each node slower (the one-query
 * trace, dev/cuda/NOTES.md 2026-12-03); in the unfolded 33-64-token
 * buckets it was a little faster in both H200 runs that timed it (64
 * tokens, BERT-base 362.6 -> 360.8 and 367.0 -> 363.3 us, MiniLM 120.7 ->
 * 120.4 and 121.4 -> 120.4: runs 10 and 17), so it is the default there
 * too since run 17; in Qwen3's 16-token bucket QKV and
 * gate/up (5), which took its query 2.6-14 us faster in three H200 runs
 * (751 -> 737, 696 -> 688, and 699 -> 697 us with the carveout
 * experiment on in both; at 32 tokens +1, +6, 0, so not there then); in
 * Qwen3's 32-token bucket QKV, O and gate/up (7) since the 16-token
 * bucket reads padded weights (chain_padw): 822.3 against 836.7 and 824.3
 * against 838.5 us in two H200 runs (2026-12-04 runs 65-66; the 16-token
 * bucket keeps 5: 621.1 with 7). */
static int chain_late_mask(const eng_cu_model *m, int T) {
    if (m->chain_trigger >= 0) return m->chain_trigger;
    if (m->arch == ENG_CU_ARCH_QWEN3) return T <= 16 ? 5 : 7;
    return 15;
}

/* Whether the chain GEMM by W triggers late: its role's bit (weight_slot
 * % 4) in the mask; the table is searched only when some bit is set. */
static int gemm_late(const eng_cu_model *m, const bf16 *W, int T) {
    const int mask = chain_late_mask(m, T), at = mask ? weight_slot(m, W, 1) : -1;
    return at >= 0 && ((mask >> (at % 4)) & 1);
}

/* W's padded copy for a chain GEMM of T <= 16 rows (chain_padw in
 * eng_cu_model.h), made here on the first launch that needs it -- always
 * an eager one, since a bucket's first run is eager.  A launch that finds
 * none while a graph is being captured runs on W, as does every launch
 * after an allocation failed (chain_padw then goes off, with a warning):
 * the copies are a speed-up, never a condition.  The copies made before
 * a failure stay until close: a graph captured earlier may read them. */
static const bf16 *chain_wp(eng_cu_model *m, cudaStream_t s, const bf16 *W, int T, int N, int K) {
    const int pad = eng_cu_chain_wpad(K);
    if (!m->chain_padw || T > 16 || !pad) return NULL;
    const int at = weight_slot(m, W, 1); /* the role (weight_slot % 4): chain_padw's bits */
    if (at < 0 || !((m->chain_padw >> (at % 4)) & 1)) return NULL;
    for (int i = 0; i < m->n_wps; i++)
        if (m->chain_wps[i].w == W) return m->chain_wps[i].p;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return NULL;
    bf16 *p = NULL;
    const size_t ld = (size_t)(K + pad) * sizeof(bf16);
    cudaError_t e = cudaSuccess;
    if (m->n_wps == m->cap_wps) {
        const int cap = m->cap_wps ? 2 * m->cap_wps : 64;
        eng_cu_wp *t = (eng_cu_wp *)realloc(m->chain_wps, (size_t)cap * sizeof *t);
        if (!t) e = cudaErrorMemoryAllocation;
        else {
            m->chain_wps = t;
            m->cap_wps = cap;
        }
    }
    if (e == cudaSuccess) e = cudaMalloc((void **)&p, (size_t)N * ld);
    if (e == cudaSuccess) e = cudaMemset2DAsync((char *)p + (size_t)K * sizeof(bf16), ld, 0, (size_t)pad * sizeof(bf16),
                                                (size_t)N, s);
    if (e == cudaSuccess)
        e = cudaMemcpy2DAsync(p, ld, W, (size_t)K * sizeof(bf16), (size_t)K * sizeof(bf16), (size_t)N,
                              cudaMemcpyDeviceToDevice, s);
    if (e != cudaSuccess) {
        if (p) cudaFree(p);
        (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        POSY_WARN("cuda: the chain's padded weight copies could not be made (%s): queries of <= 16 tokens read the "
                  "weights as they are (POSY_CUDA_CHAIN_PADW=0 skips the copies)", cudaGetErrorString(e));
        m->chain_padw = 0;
        return NULL;
    }
    if (!m->n_wps)
        POSY_INFO("cuda: queries of <= 16 tokens read padded copies of the weights (one more copy of each matrix "
                  "the one-query chain reads; POSY_CUDA_CHAIN_PADW=0 skips them)");
    m->chain_wps[m->n_wps].w = W;
    m->chain_wps[m->n_wps].p = p;
    m->n_wps++;
    return p;
}

/* One chain GEMM launch with the model's settings for W's role: the L2
 * prefetch, the trigger's place, the padded copy. */
static cudaError_t chain_gemm(eng_cu_model *m, cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *B,
                              const bf16 *R, bf16 *Y, int T, int N, int K, int epi, const eng_cu_chain_norm *nm,
                              const eng_cu_chain_res *res) {
    size_t pfb = 0;
    const bf16 *pf = m->chain_l2 ? weights_ahead(m, W, m->chain_l2, &pfb) : NULL;
    eng_cu_chain_late = gemm_late(m, W, T);
    const bf16 *wp = chain_wp(m, s, W, T, N, K);
    const cudaError_t ce = eng_cu_gemm_chain(s, X, W, B, R, Y, T, N, K, epi, nm, pf, pfb, res, wp);
    eng_cu_chain_late = 0;
    return ce;
}

int eng_cu_model_gemm(eng_cu_model *m, cudaStream_t s, int chain, const bf16 *X, const bf16 *W, const bf16 *B,
                      const bf16 *R, bf16 *Y, int T, int N, int K, int epi, const eng_cu_chain_norm *nm,
                      posy_err *err, const eng_cu_chain_res *res) {
    if (eng_cu_ablate("gemm")) return 0;
    if (chain) {
        CK("chain gemm", chain_gemm(m, s, X, W, B, R, Y, T, N, K, epi, nm, res));
        return 0;
    }
    if (res) return posy_err_set(err, POSY_E_INTERNAL, "cuda backend: a normalised residual off the chain");
    char msg[256];
    if (eng_cu_gemm(m->gemm, s, X, W, B, R, Y, T, N, K, epi, msg, sizeof msg))
        return posy_err_set(err, POSY_E_INTERNAL, "cuda backend: %s", msg);
    return 0;
}

int eng_cu_model_qkv_att(eng_cu_model *m, cudaStream_t s, const eng_cu_chain_att *att, const bf16 *X, const bf16 *W,
                         const bf16 *B, bf16 *Y, int T, int N, int K, const eng_cu_chain_norm *nm, posy_err *err) {
    if (eng_cu_ablate("gemm")) return 1;
    eng_cu_chain_att_next = att;
    const cudaError_t ce =
        chain_gemm(m, s, X, W, B, NULL, Y, T, N, K, B ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE, nm, NULL);
    eng_cu_chain_att_next = NULL;
    if (ce == cudaErrorNotSupported) return 0;
    CK("qkv + attention (chain)", ce);
    return 1;
}

/* Layer l's weight image for a split launch (the one-launch MLP,
 * chain_ffn, or attention + O, chain_ao), made on the first eager launch
 * that needs it, as chain_wp makes the padded copies, with the launches'
 * fp32 partials and barrier counter beside the first; NULL while a graph
 * is being captured without one, or after an allocation failed (the
 * caller's switch then goes off, with a warning, and the unsplit kernels
 * run).  Images made before a failure stay until close: a graph captured
 * earlier may read them. */
enum { SPLIT_AO = 0, SPLIT_FFN_GLU = 1, SPLIT_FFN_LN = 2, SPLIT_AB = 3 }; /* which image split_image packs */
typedef struct split_slot {
    bf16 ***img;
    float **part;
    unsigned long long **bar;
    int *on;
    size_t img_bytes, part_bytes;
    const char *what, *env;
    int kind;
} split_slot;

static const bf16 *split_image(eng_cu_model *m, cudaStream_t s, int l, const split_slot *k, const bf16 *W1,
                               const bf16 *W2) {
    if (*k->img && (*k->img)[l]) return (*k->img)[l];
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return NULL;
    cudaError_t e = cudaSuccess;
    if (!*k->img) {
        *k->img = (bf16 **)calloc((size_t)m->L, sizeof **k->img);
        if (!*k->img) e = cudaErrorMemoryAllocation;
    }
    if (e == cudaSuccess && !*k->part) e = cudaMalloc((void **)k->part, k->part_bytes);
    if (e == cudaSuccess && !*k->bar) {
        e = cudaMalloc((void **)k->bar, sizeof **k->bar);
        if (e == cudaSuccess) e = cudaMemsetAsync(*k->bar, 0, sizeof **k->bar, s);
    }
    bf16 *p = NULL;
    if (e == cudaSuccess) e = cudaMalloc((void **)&p, k->img_bytes);
    if (e == cudaSuccess)
        e = k->kind == SPLIT_AO   ? eng_cu_chain_ao_pack(s, W1, p, m->H, m->heads)
            : k->kind == SPLIT_AB ? eng_cu_chain_ab_pack(s, W1, W2, p)
                                  : eng_cu_chain_ffn_pack(s, W1, W2, p, m->H, m->I, k->kind == SPLIT_FFN_GLU);
    if (e != cudaSuccess) {
        if (p) cudaFree(p);
        (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        POSY_WARN("cuda: the %s's weight images could not be made (%s): queries of <= 16 tokens run it unsplit "
                  "(%s=0 skips the images)", k->what, cudaGetErrorString(e), k->env);
        *k->on = 0;
        return NULL;
    }
    if (l == 0)
        POSY_INFO("cuda: queries of <= 16 tokens run each layer's %s as one split launch (a %.1f MB weight image "
                  "a layer; %s=0 turns it off)", k->what, k->img_bytes / 1e6, k->env);
    (*k->img)[l] = p;
    return p;
}

int eng_cu_model_ffn(eng_cu_model *m, cudaStream_t s, int l, const eng_cu_layer *w, const bf16 *X, bf16 *Y, int T,
                     const int *n_tok, posy_err *err) {
    /* Qwen3: gate | up without biases; encoders: the LayerNorm-folded up
     * weights (chain_ln), GELU, both biases */
    const int glu = m->epi_up != ENG_CU_EPI_BIAS_GELU;
    if (!m->chain_ffn || T > 16 || !eng_cu_chain_ffn_ok(T, m->H, m->I, glu)) return 0;
    if (glu ? (w->up_b || w->down_b) : (!w->upf_w || !w->upf_b || !w->upf_c || !w->down_b || T > m->chain_ln))
        return 0;
    const split_slot k = {&m->ffn_img, &m->ffn_part, &m->ffn_bar, &m->chain_ffn,
                          eng_cu_chain_ffn_img_bytes(m->H, m->I, glu), eng_cu_chain_ffn_part_bytes(m->H, m->I), "MLP",
                          "POSY_CUDA_CHAIN_FFN", glu ? SPLIT_FFN_GLU : SPLIT_FFN_LN};
    const bf16 *img = split_image(m, s, l, &k, glu ? w->up_w : w->upf_w, w->down_w);
    if (!img) return 0;
    const eng_cu_ffn_ln ln = {w->upf_c, w->upf_b, w->down_b, w->ln1_g, w->ln1_b};
    const cudaError_t ce = eng_cu_chain_ffn(s, X, img, Y, m->ffn_part, m->ffn_bar, T, m->H, m->I, n_tok, m->eps,
                                            (chain_late_mask(m, T) >> 2) & 1, glu ? NULL : &ln);
    if (ce == cudaErrorNotSupported) return 0;
    CK("mlp (one launch)", ce);
    return 1;
}

int eng_cu_model_ab(eng_cu_model *m, cudaStream_t s, int l, const eng_cu_attn_args *a, const int *n_tok,
                    const int *n_seq, const bf16 *X, bf16 *Y, int T, posy_err *err) {
    if (!m->chain_ab || T > 16 || T > m->chain_ln || !eng_cu_chain_ab_ok(T, m->H, m->heads, m->head_dim)) return 0;
    const eng_cu_layer *w = eng_cu_layer_at(m, l), *pv = l ? eng_cu_layer_at(m, l - 1) : NULL;
    if (!w->qkv_b || !w->ao_b || (l && (!w->qkvf_w || !w->qkvf_b || !w->qkvf_c))) return 0;
    /* the image is made per layer (the layer's own QKV weights, folded or not) */
    const split_slot k = {&m->ab_img, &m->ab_part, &m->ab_bar, &m->chain_ab, eng_cu_chain_ab_img_bytes(),
                          eng_cu_chain_ab_part_bytes(), "attention block", "POSY_CUDA_CHAIN_AB", SPLIT_AB};
    const bf16 *img = split_image(m, s, l, &k, l ? w->qkvf_w : w->qkv_w, w->ao_w);
    if (!img) return 0;
    eng_cu_ab_args ab;
    memset(&ab, 0, sizeof ab);
    ab.X = X;
    ab.img = img;
    ab.qkv_b = l ? w->qkvf_b : w->qkv_b;
    ab.bo = w->ao_b;
    ab.colsum = l ? w->qkvf_c : NULL;
    ab.gamma = l ? pv->ln2_g : NULL;
    ab.beta = l ? pv->ln2_b : NULL;
    ab.Y = Y;
    ab.part = m->ab_part;
    ab.bar = m->ab_bar;
    ab.n_rows_dev = n_tok;
    ab.n_seqs_dev = n_seq;
    ab.cu_seqlens = a->cu_seqlens;
    ab.scale = a->scale;
    ab.eps = m->eps;
    ab.M = T;
    ab.H = m->H;
    ab.n_heads = m->heads;
    ab.head_dim = m->head_dim;
    ab.late = chain_late_mask(m, T) & 1;
    const cudaError_t ce = eng_cu_chain_ab(s, &ab);
    if (ce == cudaErrorNotSupported) return 0;
    CK("attention block (one launch)", ce);
    return 1;
}

static eng_cu_qs_args qs_args(const eng_cu_model *m, bf16 *x, int T, const int *n_tok, const int *n_seq,
                              const int *cu) {
    eng_cu_qs_args p;
    memset(&p, 0, sizeof p);
    p.x = x; p.qkv = m->qkv; p.ctx = m->ctx; p.act = m->act;
    p.norms = m->qs_norms; p.rope = m->rope; p.rope_rows = m->rope_rows;
    p.n_rows_dev = n_tok; p.n_seqs_dev = n_seq; p.cu_seqlens = cu;
    p.bar = m->qs_bar;
    p.M = T; p.H = m->H; p.I = m->I; p.L = m->L; p.heads = m->heads; p.kv_heads = m->kv_heads;
    p.causal = m->causal; p.eps = m->eps; p.scale = 1.f / sqrtf((float)m->head_dim);
    return p;
}

/* the image, the norms side by side and the counter, made once outside a
 * capture (the bucket's first run is eager); 0 when they cannot be */
static int qs_make(eng_cu_model *m, cudaStream_t s, eng_cu_qs_args *p, size_t bytes) {
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &cs) != cudaSuccess || cs != cudaStreamCaptureStatusNone) return 0;
    const int qkn = m->layers[0].q_norm != NULL;
    const size_t nb = (size_t)m->L * 2 * m->head_dim * sizeof(float);
    cudaError_t e = cudaMalloc((void **)&m->qs_img, bytes);
    if (e == cudaSuccess && qkn) e = cudaMalloc((void **)&m->qs_norms, nb);
    if (e == cudaSuccess) e = cudaMalloc((void **)&m->qs_bar, 256);
    if (e == cudaSuccess) e = cudaMemsetAsync(m->qs_bar, 0, 256, s);
    p->img = m->qs_img;
    p->norms = m->qs_norms;
    p->bar = m->qs_bar;
    for (int l = 0; l < m->L && e == cudaSuccess; l++) {
        const eng_cu_layer *w = eng_cu_layer_at(m, l);
        const size_t d = (size_t)m->head_dim * sizeof(float);
        if (qkn) e = cudaMemcpyAsync(m->qs_norms + (size_t)l * 2 * m->head_dim, w->q_norm, d, cudaMemcpyDeviceToDevice, s);
        if (e == cudaSuccess && qkn)
            e = cudaMemcpyAsync(m->qs_norms + (size_t)(l * 2 + 1) * m->head_dim, w->k_norm, d, cudaMemcpyDeviceToDevice, s);
        if (e == cudaSuccess) e = eng_cu_qs_pack(s, p, m->qs_img, l, w->qkv_w, w->ao_w, w->up_w, w->down_w);
    }
    if (e != cudaSuccess) {
        (void)cudaGetLastError(); /* an allocation failure is not sticky: clear it */
        cudaFree(m->qs_img); cudaFree(m->qs_norms); cudaFree(m->qs_bar);
        m->qs_img = NULL; m->qs_norms = NULL; m->qs_bar = NULL;
        m->qs_on = 0;
        POSY_WARN("cuda: the persistent layers' weight image (%.1f MB) could not be made (%s): queries of <= 16 "
                  "tokens run the chain", bytes / 1e6, cudaGetErrorString(e));
        return 0;
    }
    POSY_INFO("cuda: queries of <= 16 tokens run all %d layers as one persistent kernel (a %.1f MB weight image; "
              "POSY_CUDA_QSTREAM=0 turns it off)", m->L, bytes / 1e6);
    return 1;
}

int eng_cu_model_qstream(eng_cu_model *m, cudaStream_t s, bf16 *x, int T, const int *n_tok, const int *n_seq,
                         const int *cu, posy_err *err) {
    if (!m->qs_on || T > 16 || !m->fold_norm || m->head_dim != 128 ||
        !eng_cu_qs_ok(T, m->H, m->I, m->heads, m->kv_heads, m->head_dim))
        return 0;
    for (int l = 0; l < m->L; l++) { /* Qwen3 and the rope-only decoders without biases */
        const eng_cu_layer *w = eng_cu_layer_at(m, l);
        if (w->qkv_b || w->ao_b || w->up_b || w->down_b || !w->q_norm != !m->layers[0].q_norm) return 0;
    }
    eng_cu_qs_args p = qs_args(m, x, T, n_tok, n_seq, cu);
    const size_t bytes = eng_cu_qs_setup(&p);
    if (!bytes) return 0;
    if (!m->qs_img && !qs_make(m, s, &p, bytes)) return 0;
    p.img = m->qs_img;
    const cudaError_t ce = eng_cu_qs_run(s, &p);
    if (ce == cudaErrorNotSupported) return 0;
    CK("the layers (one persistent kernel)", ce);
    return 1;
}

int eng_cu_model_ao(eng_cu_model *m, cudaStream_t s, int l, const eng_cu_layer *w, const eng_cu_attn_args *a,
                    const int *n_tok, const int *n_seq, const bf16 *R, bf16 *Y, int T, posy_err *err) {
    if (!m->chain_ao || T > 16 || w->ao_b || !eng_cu_chain_ao_ok(a, T, m->H) || a->n_heads * a->head_dim != m->attn_n)
        return 0;
    const split_slot k = {&m->ao_img, &m->ao_part, &m->ao_bar, &m->chain_ao,
                          eng_cu_chain_ao_img_bytes(m->H, m->heads), eng_cu_chain_ao_part_bytes(m->H, m->heads),
                          "attention + O projection", "POSY_CUDA_CHAIN_AO", SPLIT_AO};
    const bf16 *img = split_image(m, s, l, &k, w->ao_w, NULL);
    if (!img) return 0;
    const cudaError_t ce =
        eng_cu_chain_ao(s, a, n_tok, n_seq, img, R, Y, m->ao_part, m->ao_bar, T, m->H, (chain_late_mask(m, T) >> 1) & 1);
    if (ce == cudaErrorNotSupported) return 0;
    CK("attention + O (one launch)", ce);
    return 1;
}

int eng_cu_model_attn_o(eng_cu_model *m, cudaStream_t s, int chain, const eng_cu_attn_args *a, const int *n_tok,
                        const int *n_seq, const bf16 *Wo, const bf16 *bo, const bf16 *R, bf16 *Y, int T, int K,
                        posy_err *err, const eng_cu_chain_res *res) {
    if (chain &&
        (m->chain_attn == 2 || (m->chain_attn == 1 && (a->head_dim == 32 || eng_cu_chain_attn_o_one_head(a)))) &&
        eng_cu_chain_attn_o_ok(a, T, m->H)) {
        if (eng_cu_ablate("attn") && eng_cu_ablate("gemm")) return 0;
        eng_cu_chain_late = (chain_late_mask(m, T) >> 1) & 1;
        const cudaError_t ce = eng_cu_chain_attn_o(s, a, n_tok, n_seq, Wo, bo, R, Y, T, m->H, res);
        eng_cu_chain_late = 0;
        CK("attention + O projection", ce);
        return 0;
    }
    eng_cu_attn_args b = *a;
    if (chain && !b.version) b.version = eng_cu_attn_version(b.head_dim, 1);
    if (!eng_cu_ablate("attn")) CK("attention", eng_cu_attention(s, &b));
    return eng_cu_model_gemm(m, s, chain, m->ctx, Wo, bo, R, Y, T, m->H, K, bo ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE,
                             NULL, err, res);
}

/* Y = LN(X W^T + B + R) on the graph path: the product (eng_cu_gemm's
 * race) then add_ln in place, or (fused) eng_cu_gemm_wg_rowln. */
static int gemm_ln_run(eng_cu_model *m, cudaStream_t s, int fused, const bf16 *X, const bf16 *W, const bf16 *B,
                       const bf16 *R, const float *g, const float *be, bf16 *Y, int T, int K, const int *n_tok,
                       posy_err *err) {
    if (fused) {
        if (!eng_cu_ablate("gemm"))
            CK("gemm + layernorm", eng_cu_gemm_wg_rowln(s, X, W, B, R, g, be, m->eps, Y, T, m->H, K));
        return 0;
    }
    if (eng_cu_model_gemm(m, s, 0, X, W, B, R, Y, T, m->H, K, B ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE, NULL, err, NULL))
        return -1;
    if (!eng_cu_ablate("norm")) CK("layernorm", eng_cu_add_ln(s, Y, NULL, g, be, Y, T, n_tok, m->H, m->eps));
    return 0;
}

/* ... with the choice made once per bucket and role (0 O, 1 down): on
 * its first eager run both are timed on the real operands (neither
 * writes X or R, so the order does not matter), the winner runs last and
 * is kept; under capture an unraced bucket takes the fused kernel.  On
 * the H200 (2026-12-03 runs 21-22) the fused kernel won the O projection
 * at every bucket (65536 tokens: 82 against 89 us) and lost the down
 * projection at most (184 against 160 us: whole-row tiles read W once
 * per 64 rows, 1.4x the operand bytes of the product's tiles).  Since
 * 2026-12-04 the O projection's fused kernel keeps W in shared memory
 * (eng_cu_gemm_rowln_res.cu): 63 against 91 us at 65536 tokens, and
 * ~10 against 15-25 us at buckets of 96-4096 (runs 44-45). */
static int gemm_ln(eng_cu_model *m, cudaStream_t s, int role, const bf16 *X, const bf16 *W, const bf16 *B,
                   const bf16 *R, const float *g, const float *be, bf16 *Y, int T, int K, const int *n_tok,
                   posy_err *err) {
    int fused = 0;
    if (B && eng_cu_gemm_wg_rowln_ok(T, m->H, K)) {
        fused = picks_find(&m->rowln_picks[role], T);
        if (fused < 0 && under_capture(s)) fused = 1;
        if (fused < 0) {
            float us[2];
            for (int f = 0; f < 2; f++)
                us[f] = race_us(s, [&] { return gemm_ln_run(m, s, f, X, W, B, R, g, be, Y, T, K, n_tok, err); });
            fused = us[1] >= 0.f && (us[0] < 0.f || us[1] < us[0]);
            if (getenv("POSY_CUDA_TUNE_LOG"))
                fprintf(stderr, "%s + layernorm T=%d: %s (product + add_ln %.2f us, fused %.2f us)\n",
                        role ? "down" : "o", T, fused ? "fused" : "product + add_ln", us[0], us[1]);
            picks_put(&m->rowln_picks[role], T, fused);
        }
    }
    return gemm_ln_run(m, s, fused, X, W, B, R, g, be, Y, T, K, n_tok, err);
}

#define GEMM(X, W, B, R, Y, N, K, EPI)                                                             \
    do {                                                                                           \
        if (eng_cu_model_gemm(m, s, chain, X, W, B, R, Y, T, N, K, EPI, NULL, err, NULL)) return -1; \
    } while (0)

int eng_cu_model_norm_pool(eng_cu_model *m, cudaStream_t s, const bf16 *x, const float *gamma, const float *beta,
                           bf16 *scratch, int T, int S, const int32_t *in, const eng_cu_in_layout &lay,
                           posy_err *err) {
    const int H = m->H;
    const int *n_tok = in + lay.meta + ENG_CU_META_TOKENS, *n_seq = in + lay.meta + ENG_CU_META_SEQS;
    const bf16 *pool_in = x;
    if (m->splade) {   /* the head needs every token's normalised state */
        CK("layernorm", eng_cu_add_ln(s, x, NULL, gamma, beta, scratch, T, n_tok, H, m->eps));
        return eng_cu_splade_head(m, s, scratch, T, S, in, lay, err);
    }
    if (m->want_tok) scratch = m->tok;   /* the normed rows are the answer: kept, pooled from */
    if (!eng_cu_ablate("norm")) {
        if (eng_cu_ln_pool_usable(H) && !m->want_tok) {
            CK("layernorm + pooling", eng_cu_ln_pool(s, x, gamma, beta, in + lay.cu, in + lay.skip, n_seq, S, H, H,
                                                    m->pool_mode, m->normalize, m->eps, m->pooled));
            return 0;
        }
        if (beta)
            CK("layernorm", eng_cu_add_ln(s, x, NULL, gamma, beta, scratch, T, n_tok, H, m->eps));
        else
            CK("rmsnorm", eng_cu_add_rmsnorm(s, x, NULL, gamma, scratch, T, n_tok, H, m->eps));
        pool_in = scratch;
    } else if (m->want_tok)
        CK("token states", cudaMemcpyAsync(m->tok, x, (size_t)T * H * sizeof(bf16), cudaMemcpyDeviceToDevice, s));
    CK("pooling", eng_cu_pool(s, pool_in, in + lay.cu, in + lay.skip, n_seq, S, H, H, m->pool_mode, m->normalize,
                              m->pooled));
    return 0;
}

int eng_cu_model_forward(eng_cu_model *m, cudaStream_t s, int T, int S, posy_err *err) {
    if (m->arch == ENG_CU_ARCH_QWEN3) return eng_cu_qwen3_forward(m, s, T, S, err);
    if (m->deb) return eng_cu_deberta_forward(m, s, T, S, err);
    const int chain = eng_cu_model_chain_begin(m, T);
    if (eng_cu_mega_usable(m, T)) {
        CK("small-batch kernel", eng_cu_mega_forward(m, s, T, S));
        return 0;
    }
    const eng_cu_in_layout lay = eng_cu_in_layout_for(T, S);
    const int32_t *in = m->d_in;
    const int *n_tok = in + lay.meta + ENG_CU_META_TOKENS, *n_seq = in + lay.meta + ENG_CU_META_SEQS;
    const int H = m->H;
    CK("embedding", eng_cu_embed_ln(s, in + lay.ids, in + lay.pos, in + lay.type, m->word, m->pos,
                                    m->type, m->emb_g, m->emb_b, m->x, T, n_tok, H, m->eps));
    eng_cu_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = m->qkv; a.k = m->qkv + H; a.v = m->qkv + 2 * H;
    a.ldq = a.ldk = a.ldv = 3 * H;
    a.o = m->ctx; a.ldo = H;
    a.n_heads = a.n_kv_heads = m->heads;
    a.head_dim = m->head_dim;
    a.cu_seqlens = in + lay.cu;
    a.tiles = in + lay.tiles;
    a.n_tiles_dev = in + lay.meta + ENG_CU_META_TILES;
    a.max_tiles = lay.max_tiles;
    a.scale = 1.f / sqrtf((float)m->head_dim);
    a.causal = 0;
    a.work = m->attn_work;
    a.rel = m->rel; /* MPNet: NULL for the others */
    a.rel_max = m->max_pos;
    const bf16 *pool_in = m->x; /* the last LayerNorm's output (rowln) */
    if (chain && T <= m->chain_ln) {
        /* the LayerNorms folded (four kernels a layer): x holds the layer's
         * input raw (layer 0: the embedding's LayerNorm output), y the
         * attention block's output raw; the QKV GEMM (layer > 0) applies
         * the previous layer's LN2 to x through its folded weights and
         * stores the rows' (mu, rs) in ln_s2, which the O projection uses
         * to add LN2(x) as its residual; the up GEMM does the same with
         * LN1 of y (ln_s1) for the down projection's residual.  At <= 16
         * tokens the split launches may take two kernels' work each
         * (chain_ab: QKV + attention + O; chain_ffn: up + down), computing
         * the rows' statistics themselves */
        for (int l = 0; l < m->L; l++) {
            const eng_cu_layer *w = eng_cu_layer_at(m, l), *pv = l ? eng_cu_layer_at(m, l - 1) : NULL;
            const eng_cu_chain_res r2 = {m->ln_s2, pv ? pv->ln2_g : NULL, pv ? pv->ln2_b : NULL, n_tok};
            /* the attention block as one split launch where it is on (chain_ab), else QKV and attention + O */
            const int ab = eng_cu_model_ab(m, s, l, &a, n_tok, n_seq, m->x, m->y, T, err);
            if (ab < 0) return -1;
            if (!ab) {
                if (l) {
                    const eng_cu_chain_norm f = {NULL, NULL, m->eps, n_tok, NULL, 2, w->qkvf_c, m->ln_s2};
                    if (eng_cu_model_gemm(m, s, 1, m->x, w->qkvf_w, w->qkvf_b, NULL, m->qkv, T, 3 * H, H,
                                          ENG_CU_EPI_BIAS, &f, err, NULL))
                        return -1;
                } else
                    GEMM(m->x, w->qkv_w, w->qkv_b, NULL, m->qkv, 3 * H, H, ENG_CU_EPI_BIAS);
                if (eng_cu_model_attn_o(m, s, 1, &a, n_tok, n_seq, w->ao_w, w->ao_b, m->x, m->y, T, H, err,
                                        l ? &r2 : NULL))
                    return -1;
            }
            /* the MLP as one split launch where it is on (chain_ffn), else up and down */
            const int ffn = eng_cu_model_ffn(m, s, l, w, m->y, m->x, T, n_tok, err);
            if (ffn < 0) return -1;
            if (ffn) continue;
            const eng_cu_chain_norm f1 = {NULL, NULL, m->eps, n_tok, NULL, 2, w->upf_c, m->ln_s1};
            if (eng_cu_model_gemm(m, s, 1, m->y, w->upf_w, w->upf_b, NULL, m->inter, T, m->I, H, m->epi_up, &f1, err,
                                  NULL))
                return -1;
            const eng_cu_chain_res r1 = {m->ln_s1, w->ln1_g, w->ln1_b, n_tok};
            if (eng_cu_model_gemm(m, s, 1, m->inter, w->down_w, w->down_b, m->y, m->x, T, H, m->I, ENG_CU_EPI_BIAS,
                                  NULL, err, &r1))
                return -1;
        }
        const eng_cu_layer *last = eng_cu_layer_at(m, m->L - 1);
        return eng_cu_model_norm_pool(m, s, m->x, last->ln2_g, last->ln2_b, m->y, T, S, in, lay, err);
    } else if (chain && m->chain_norm) { /* norms fused into the next GEMM's prologue: five kernels a layer */
        eng_cu_chain_norm nm = {NULL, NULL, m->eps, n_tok, m->x, 0, NULL, NULL};
        for (int l = 0; l < m->L; l++) {
            const eng_cu_layer *w = eng_cu_layer_at(m, l);
            /* x = LN2(y) of the layer before (layer 0: the embedding output in x) */
            nm.gamma = l ? m->layers[l - 1].ln2_g : NULL;
            nm.beta = l ? m->layers[l - 1].ln2_b : NULL;
            if (eng_cu_model_gemm(m, s, 1, l ? m->y : m->x, w->qkv_w, w->qkv_b, NULL, m->qkv, T, 3 * H, H,
                                  ENG_CU_EPI_BIAS, l ? &nm : NULL, err))
                return -1;
            if (eng_cu_model_attn_o(m, s, 1, &a, n_tok, n_seq, w->ao_w, w->ao_b, m->x, m->y, T, H, err)) return -1;
            nm.gamma = w->ln1_g;
            nm.beta = w->ln1_b;
            if (eng_cu_model_gemm(m, s, 1, m->y, w->up_w, w->up_b, NULL, m->inter, T, m->I, H, m->epi_up, &nm, err))
                return -1;
            GEMM(m->inter, w->down_w, w->down_b, m->x, m->y, H, m->I, ENG_CU_EPI_BIAS);
        }
        const eng_cu_layer *last = &m->layers[m->L - 1];
        return eng_cu_model_norm_pool(m, s, m->y, last->ln2_g, last->ln2_b, m->x, T, S, in, lay, err);
    } else if (m->ln_rows && !chain) {
        /* the LayerNorms as row statistics (POSY_CUDA_LN_ROWS=1): the O
         * projection writes y1 = ctx Wo^T + b + (layer 0: x; else
         * LN2(y2), applied to the raw y2 in its epilogue) raw, with its
         * rows' partial sums; eng_cu_ln_stats makes them (mu, rs); the up
         * GEMM applies LN1 to y1 through its folded weights (LNA), the
         * down GEMM adds LN1(y1) as its residual (LNR) and writes y2 raw
         * with its sums -- no LayerNorm output is ever stored but the
         * last, which the pooling reads.  y1 lives in y, y2 in x. */
        const int nch = H / 64;
        eng_cu_attn_args b = a;
        eng_cu_ln_epi ln;
        for (int l = 0; l < m->L; l++) {
            const eng_cu_layer *w = eng_cu_layer_at(m, l), *pv = l ? eng_cu_layer_at(m, l - 1) : NULL;
            if (l) {
                memset(&ln, 0, sizeof ln);
                ln.a_stats = m->ln_s2;
                ln.a_colsum = w->qkvf_c;
                CK("qkv (ln rows)", eng_cu_gemm_wg_ln(3, s, m->x, w->qkvf_w, w->qkvf_b, NULL, m->qkv, T, 3 * H, H,
                                                      ENG_CU_EPI_BIAS, &ln));
            } else
                GEMM(m->x, w->qkv_w, w->qkv_b, NULL, m->qkv, 3 * H, H, ENG_CU_EPI_BIAS);
            if (!eng_cu_ablate("attn")) CK("attention", eng_cu_attention(s, &b));
            memset(&ln, 0, sizeof ln);
            ln.o_stats = m->ln_part;
            if (l) {
                ln.r_stats = m->ln_s2;
                ln.r_gamma = pv->ln2_g;
                ln.r_beta = pv->ln2_b;
            }
            CK("o (ln rows)", eng_cu_gemm_wg_ln(3, s, m->ctx, w->ao_w, w->ao_b, m->x, m->y, T, H, H, ENG_CU_EPI_BIAS,
                                                &ln));
            CK("ln stats", eng_cu_ln_stats(s, m->ln_part, nch, m->ln_s1, T, n_tok, H, m->eps));
            memset(&ln, 0, sizeof ln);
            ln.a_stats = m->ln_s1;
            ln.a_colsum = w->upf_c;
            CK("up (ln rows)", eng_cu_gemm_wg_ln(4, s, m->y, w->upf_w, w->upf_b, NULL, m->inter, T, m->I, H,
                                                 m->epi_up, &ln));
            memset(&ln, 0, sizeof ln);
            ln.o_stats = m->ln_part;
            ln.r_stats = m->ln_s1;
            ln.r_gamma = w->ln1_g;
            ln.r_beta = w->ln1_b;
            CK("down (ln rows)", eng_cu_gemm_wg_ln(4, s, m->inter, w->down_w, w->down_b, m->y, m->x, T, H, m->I,
                                                   ENG_CU_EPI_BIAS, &ln));
            if (l + 1 < m->L) CK("ln stats", eng_cu_ln_stats(s, m->ln_part, nch, m->ln_s2, T, n_tok, H, m->eps));
        }
        const eng_cu_layer *last = &m->layers[m->L - 1];
        return eng_cu_model_norm_pool(m, s, m->x, last->ln2_g, last->ln2_b, m->y, T, S, in, lay, err);
    } else if (m->rowln && !chain) {
        /* the O and down projections each with their LayerNorm (gemm_ln):
         * y = LN1(ctx Wo^T + b + x), x = LN2(inter Wd^T + b + y) -- the
         * products write beside their residual, not over it, so a race
         * can run both forms on the same operands */
        for (int l = 0; l < m->L; l++) {
            const eng_cu_layer *w = eng_cu_layer_at(m, l);
            GEMM(m->x, w->qkv_w, w->qkv_b, NULL, m->qkv, 3 * H, H, ENG_CU_EPI_BIAS);
            eng_cu_attn_args b = a;
            if (!eng_cu_ablate("attn")) CK("attention", eng_cu_attention(s, &b));
            if (gemm_ln(m, s, 0, m->ctx, w->ao_w, w->ao_b, m->x, w->ln1_g, w->ln1_b, m->y, T, H, n_tok, err))
                return -1;
            GEMM(m->y, w->up_w, w->up_b, NULL, m->inter, m->I, H, m->epi_up);
            if (gemm_ln(m, s, 1, m->inter, w->down_w, w->down_b, m->y, w->ln2_g, w->ln2_b, m->x, T, m->I, n_tok, err))
                return -1;
        }
    } else {
        for (int l = 0; l < m->L; l++) {
            const eng_cu_layer *w = eng_cu_layer_at(m, l);
            GEMM(m->x, w->qkv_w, w->qkv_b, NULL, m->qkv, 3 * H, H, ENG_CU_EPI_BIAS);
            /* y = ctx Wo^T + b + x (residual in the epilogue), x = LN(y) */
            if (eng_cu_model_attn_o(m, s, chain, &a, n_tok, n_seq, w->ao_w, w->ao_b, m->x, m->y, T, H, err))
                return -1;
            if (!eng_cu_ablate("norm"))
                CK("layernorm", eng_cu_add_ln(s, m->y, NULL, w->ln1_g, w->ln1_b, m->x, T, n_tok, H, m->eps));
            GEMM(m->x, w->up_w, w->up_b, NULL, m->inter, m->I, H, m->epi_up);
            GEMM(m->inter, w->down_w, w->down_b, m->x, m->y, H, m->I, ENG_CU_EPI_BIAS);
            if (l + 1 < m->L && !eng_cu_ablate("norm"))
                CK("layernorm", eng_cu_add_ln(s, m->y, NULL, w->ln2_g, w->ln2_b, m->x, T, n_tok, H, m->eps));
        }
        const eng_cu_layer *last = &m->layers[m->L - 1];
        return eng_cu_model_norm_pool(m, s, m->y, last->ln2_g, last->ln2_b, m->x, T, S, in, lay, err);
    }
    if (m->splade) return eng_cu_splade_head(m, s, pool_in, T, S, in, lay, err);
    if (m->want_tok)
        CK("token states", cudaMemcpyAsync(m->tok, pool_in, (size_t)T * H * sizeof(bf16), cudaMemcpyDeviceToDevice, s));
    CK("pooling", eng_cu_pool(s, pool_in, in + lay.cu, in + lay.skip, in + lay.meta + ENG_CU_META_SEQS, S, H, H,
                              m->pool_mode, m->normalize, m->pooled));
    return 0;
}

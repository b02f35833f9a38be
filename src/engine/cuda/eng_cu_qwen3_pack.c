/* eng_cu_qwen3_pack: plan and fill the host image of a Qwen3 model's GPU
 * weights (see eng_cu_qwen3_pack.h for the layout and why it is plain C).
 *
 * One walk (q3_walk) both plans and fills: with host == NULL it only
 * advances the offsets, with a buffer it also writes, so the two passes
 * cannot disagree -- the same pattern as the BERT upload in eng_cu_model.cu.
 * A fill writes only the image bytes of its window [lo, hi) (host holds
 * those bytes): each placement converts just the elements that fall in
 * it, so the upload can go through a small buffer a window at a time.
 */
#include "eng_cu_qwen3_pack.h"
#include "eng_cu_bf16.h"
#include "eng_cu_window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The attention kernel's head sizes (eng_cu_attn.cu; 256 only in
 * eng_cu_attn_win.cu, which the Gemma 3 / ModernBERT forward calls). */
static int q3_head_dim_ok(const eng_config *cfg) {
    const int d = cfg->head_dim;
    return d == 32 || d == 64 || d == 128 || (d == 256 && (cfg->gemma || cfg->modernbert));
}

int eng_cu_q3_check(const eng_config *cfg, posy_err *err) {
    const posy_model_info *in = &cfg->info;
    const char *gate = getenv("POSY_CUDA_QWEN3");
    if (strcmp(in->arch, "qwen3"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: '%s' is not a decoder of the qwen3 family",
                            in->arch);
    if (gate && !strcmp(gate, "0"))
        return posy_err_set(err, POSY_E_UNSUPPORTED,
                            "cuda backend: qwen3 on the GPU is turned off by POSY_CUDA_QWEN3=0; use --device cpu "
                            "or unset it");
    if (cfg->alibi) /* ALiBi through the GLU forward's attention: no GPU path yet */
        return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: JinaBERT (ALiBi) runs on the CPU engine only "
                            "(--device cpu, or auto)");
    if (cfg->t5) /* relative position bias, no rotary, an MLP without a gate: no GPU path yet */
        return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: t5 encoders run on the CPU engine only "
                            "(--device cpu, or auto)");
    if (!q3_head_dim_ok(cfg))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: %s head_dim %d unsupported (32, 64 or 128%s)",
                            cfg->model_type, cfg->head_dim, cfg->gemma || cfg->modernbert ? ", or 256" : "");
    if (in->heads <= 0 || in->kv_heads <= 0 || in->heads % in->kv_heads)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: %d heads not a multiple of %d kv heads",
                            in->heads, in->kv_heads);
    if (in->layers < 1)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: a %s model of %d layers", cfg->model_type,
                            in->layers);
    if (in->hidden % 8 || in->intermediate % 8 || in->hidden > 4096 || in->hidden <= 0 || in->intermediate <= 0)
        return posy_err_set(err, POSY_E_UNSUPPORTED,
                            "cuda backend: hidden %d / intermediate %d must be positive multiples of 8, hidden <= 4096",
                            in->hidden, in->intermediate);
    if (cfg->gte) { /* compiled, checked on the CPU (test_cu_qwen3_pack), not yet run on a GPU */
        const char *g = getenv("POSY_CUDA_GTE");
        if (!g || strcmp(g, "1"))
            return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: %s (GTE) has not been verified on a GPU yet: "
                                "it runs on the CPU engine (--device cpu, or auto); POSY_CUDA_GTE=1 tries the GPU "
                                "path", cfg->model_type);
    }
    if (cfg->gemma || cfg->modernbert || cfg->post_ln) { /* their gated MLPs: eng_cu_glu_act */
        const char *glu = getenv("POSY_CUDA_GLU"); /* their GPU path's off switch (verified: H200 run 100) */
        if (glu && !strcmp(glu, "0"))
            return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: %s (%s) on the GPU is turned off by "
                                "POSY_CUDA_GLU=0; use --device cpu or unset it", cfg->model_type,
                                cfg->gemma ? "Gemma 3, EmbeddingGemma" : cfg->nomic ? "NomicBERT" : cfg->gte ? "GTE" : "ModernBERT");
        if (cfg->act != ENG_ACT_GELU_TANH && cfg->act != ENG_ACT_GELU && cfg->act != ENG_ACT_SILU)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: %s needs a gelu, gelu_pytorch_tanh or "
                                "silu activation", cfg->model_type);
        if (cfg->sliding_window < 0)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: sliding window %d", cfg->sliding_window);
        return 0;
    }
    if (cfg->act != ENG_ACT_SILU)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "cuda backend: %s needs hidden_act silu", cfg->model_type);
    return 0;
}

typedef struct q3_walker {
    char *host;      /* NULL: plan only; else image bytes [lo, hi) */
    size_t off;
    size_t lo, hi;   /* the window written (multiples of 256, as every placement's offset) */
} q3_walker;

/* Elements [*i0, *i1) of n elements of es bytes placed at `at` that lie in
 * the window; 0 when none (or when only planning). */
static int q3_span(const q3_walker *w, size_t at, size_t n, size_t es, size_t *i0, size_t *i1) {
    return w->host && eng_cu_window_span(w->lo, w->hi, at, n, es, i0, i1);
}

/* Where element i of the placement at `at` goes in the window's buffer. */
static void *q3_dst(const q3_walker *w, size_t at, size_t i, size_t es) { return w->host + (at + i * es - w->lo); }

static size_t q3_take(q3_walker *w, size_t bytes) {
    w->off = (w->off + 255) & ~(size_t)255;
    size_t at = w->off;
    w->off += bytes;
    return at;
}

/* Place n values from src: as bf16 bits, or as fp32 when f32. */
static size_t q3_put(q3_walker *w, const float *src, size_t n, int f32) {
    size_t at = q3_take(w, n * (f32 ? 4 : 2)), i0, i1;
    if (src && q3_span(w, at, n, f32 ? 4 : 2, &i0, &i1)) {
        if (f32) {
            memcpy(q3_dst(w, at, i0, 4), src + i0, (i1 - i0) * 4);
        } else {
            uint16_t *d = (uint16_t *)q3_dst(w, at, i0, 2);
            for (size_t i = i0; i < i1; i++) d[i - i0] = eng_cu_f2bf_bits(src[i]);
        }
    }
    return at;
}

/* Place a [rows, cols] matrix as bf16 with the row vector v added to every
 * row first (one rounding of the fp32 sum): NomicBERT's token type row 0
 * folded into its word embeddings. */
static size_t q3_put_plus_row(q3_walker *w, const float *src, size_t rows, size_t cols, const float *v) {
    size_t at = q3_take(w, rows * cols * 2), i0, i1;
    if (src && q3_span(w, at, rows * cols, 2, &i0, &i1)) {
        uint16_t *d = (uint16_t *)q3_dst(w, at, i0, 2);
        for (size_t i = i0; i < i1; i++) d[i - i0] = eng_cu_f2bf_bits(src[i] + v[i % cols]);
    }
    return at;
}

/* Place a [rows, cols] matrix as bf16 with column k scaled by g[k] first
 * (one rounding of the fp32 product): an RMSNorm's weights folded in. */
static size_t q3_put_scaled(q3_walker *w, const float *src, size_t rows, size_t cols, const float *g) {
    size_t at = q3_take(w, rows * cols * 2), i0, i1;
    if (src && q3_span(w, at, rows * cols, 2, &i0, &i1)) {
        uint16_t *d = (uint16_t *)q3_dst(w, at, i0, 2);
        for (size_t i = i0; i < i1; i++) d[i - i0] = eng_cu_f2bf_bits(src[i] * g[i % cols]);
    }
    return at;
}

/* Place n fp32 ones: the norm weights once they are folded into W. */
static size_t q3_put_ones(q3_walker *w, size_t n) {
    size_t at = q3_take(w, n * 4), i0, i1;
    if (q3_span(w, at, n, 4, &i0, &i1)) {
        float *d = (float *)q3_dst(w, at, i0, 4);
        for (size_t i = i0; i < i1; i++) d[i - i0] = 1.0f;
    }
    return at;
}

/* A rotary table of the image's rows, the window's elements only: element
 * i = (p * head_dim/2 + f) * 2 + c is cos (c 0) or sin (c 1) of frequency
 * f at position p, the same expressions as eng_cu_q3_rope_table. */
static size_t q3_put_rope(q3_walker *w, const eng_cu_q3_image *im, const eng_rope *rope) {
    const size_t d = (size_t)im->head_dim, n = (size_t)im->rope_rows * d;
    size_t at = q3_take(w, n * 4), i0, i1;
    float inv[512];
    if (rope && d / 2 <= 512 && q3_span(w, at, n, 4, &i0, &i1)) {
        eng_rope_inv_freq(inv, im->head_dim, rope);
        float *o = (float *)q3_dst(w, at, i0, 4);
        for (size_t i = i0; i < i1; i++) {
            const float a = inv[(i % d) / 2] * (float)(i / d);
            o[i - i0] = (i & 1) ? (float)sin((double)a) : (float)cos((double)a);
        }
    }
    return at;
}

/* An optional fp32 vector: placed when present, else ENG_CU_Q3_NONE. */
static size_t q3_put_opt(q3_walker *w, const float *src, size_t n) {
    return src ? q3_put(w, src, n, 1) : ENG_CU_Q3_NONE;
}

static void q3_walk(eng_cu_q3_image *im, const eng_qwen3_weights *wt, const eng_rope *rope,
                    const eng_rope *rope_local, q3_walker *w) {
    const size_t H = (size_t)im->H, I = (size_t)im->I, d = (size_t)im->head_dim;
    const size_t QKV = (size_t)im->qkv_n, A = (size_t)im->attn_n;
    /* NomicBERT, GTE: the GPU forward embeds type 0 only (the backend refuses
     * another type id: eng_cu_model.type_vocab 0), its row in the table */
    im->embed = wt->type_emb ? q3_put_plus_row(w, wt->embed, (size_t)im->vocab, H, wt->type_emb)
                             : q3_put(w, wt->embed, (size_t)im->vocab * H, 0);
    im->norm = q3_put(w, wt->norm, H, 1);
    im->norm_b = q3_put_opt(w, wt->norm_b, H);
    im->emb_norm = q3_put_opt(w, wt->emb_norm, H);
    im->emb_norm_b = q3_put_opt(w, wt->emb_norm_b, H);
    im->rope = q3_put_rope(w, im, rope);
    im->rope_local = im->local_rope ? q3_put_rope(w, im, rope_local) : ENG_CU_Q3_NONE;
    for (int l = 0; l < im->L; l++) {
        const eng_qwen3_layer *s = &wt->layers[l];
        eng_cu_q3_layer_off *o = &im->layers[l];
        const int fold = im->fold_norms && s->ln1 && s->ln2;
        o->qkv_w = fold ? q3_put_scaled(w, s->qkv_w, QKV, H, s->ln1) : q3_put(w, s->qkv_w, QKV * H, 0);
        o->qkv_b = s->qkv_b ? q3_put(w, s->qkv_b, QKV, 0) : ENG_CU_Q3_NONE;
        o->o_w = q3_put(w, s->o_w, H * A, 0);
        o->o_b = s->o_b ? q3_put(w, s->o_b, H, 0) : ENG_CU_Q3_NONE;
        o->q_norm = s->q_norm ? q3_put(w, s->q_norm, d, 1) : ENG_CU_Q3_NONE; /* Qwen3 only */
        o->k_norm = s->k_norm ? q3_put(w, s->k_norm, d, 1) : ENG_CU_Q3_NONE;
        o->ln1 = fold ? q3_put_ones(w, H) : q3_put_opt(w, s->ln1, H); /* ModernBERT layer 0: none */
        o->ln2 = fold ? q3_put_ones(w, H) : q3_put(w, s->ln2, H, 1);
        o->gu_w = fold ? q3_put_scaled(w, s->gu_w, 2 * I, H, s->ln2) : q3_put(w, s->gu_w, 2 * I * H, 0);
        o->down_w = q3_put(w, s->down_w, H * I, 0);
        o->down_b = s->down_b ? q3_put(w, s->down_b, H, 0) : ENG_CU_Q3_NONE; /* GTE */
        o->post_attn = q3_put_opt(w, s->post_attn, H); /* Gemma 3 */
        o->post_mlp = q3_put_opt(w, s->post_mlp, H);
        o->ln1_b = q3_put_opt(w, s->ln1_b, H); /* ModernBERT */
        o->ln2_b = q3_put_opt(w, s->ln2_b, H);
    }
    im->bytes = (w->off + 255) & ~(size_t)255;
}

int eng_cu_q3_plan(eng_cu_q3_image *im, const eng_config *cfg, const eng_qwen3_weights *w,
                   int rope_rows, posy_err *err) {
    const posy_model_info *in = &cfg->info;
    memset(im, 0, sizeof *im);
    if (w->n_layers != in->layers || !w->layers || !w->embed || (!w->norm && !cfg->post_ln)) /* NomicBERT, GTE: no final norm */
        return posy_err_set(err, POSY_E_INVALID, "cuda backend: qwen3 weights have %d layers, config %d",
                            w->n_layers, in->layers);
    if (rope_rows < 1 || cfg->head_dim < 2)
        return posy_err_set(err, POSY_E_INVALID, "cuda backend: rotary table of %d rows, head_dim %d", rope_rows,
                            cfg->head_dim);
    im->H = in->hidden; im->I = in->intermediate; im->L = in->layers;
    im->heads = in->heads; im->kv_heads = in->kv_heads; im->head_dim = cfg->head_dim;
    im->vocab = in->vocab; im->rope_rows = rope_rows;
    im->qkv_n = (in->heads + 2 * in->kv_heads) * cfg->head_dim;
    im->attn_n = in->heads * cfg->head_dim;
    im->layers = (eng_cu_q3_layer_off *)calloc((size_t)im->L ? (size_t)im->L : 1, sizeof *im->layers);
    if (!im->layers) return posy_err_set(err, POSY_E_NOMEM, "cuda backend: qwen3 layer table");
    im->local_rope = cfg->gemma || cfg->modernbert; /* the sliding layers' own rotary */
    q3_walker wk = {NULL, 0, 0, 0};
    q3_walk(im, w, NULL, NULL, &wk); /* no host: nothing written, the rotary not read */
    return 0;
}

void eng_cu_q3_fill(eng_cu_q3_image *im, const eng_qwen3_weights *w, const eng_rope *rope,
                    const eng_rope *rope_local, void *host) {
    eng_cu_q3_fill_window(im, w, rope, rope_local, host, 0, im->bytes);
}

void eng_cu_q3_fill_window(eng_cu_q3_image *im, const eng_qwen3_weights *w, const eng_rope *rope,
                           const eng_rope *rope_local, void *dst, size_t lo, size_t hi) {
    q3_walker wk = {(char *)dst, 0, lo, hi};
    q3_walk(im, w, rope, rope_local, &wk); /* recomputes the planned offsets, and writes the window's bytes */
}

void eng_cu_q3_image_free(eng_cu_q3_image *im) {
    free(im->layers);
    memset(im, 0, sizeof *im);
}

void eng_cu_q3_rope_table(float *out, int rows, int head_dim, const eng_rope *rope) {
    const int half = head_dim / 2;
    float inv[512];
    if (half > 512) return; /* refused long before: eng_qwen3_weights_load and eng_cu_q3_check */
    eng_rope_inv_freq(inv, head_dim, rope); /* the CPU engine's frequencies, scaling included */
    for (int p = 0; p < rows; p++)
        for (int i = 0; i < half; i++) {
            float a = inv[i] * (float)p;
            out[((size_t)p * half + i) * 2] = (float)cos((double)a);
            out[((size_t)p * half + i) * 2 + 1] = (float)sin((double)a);
        }
}

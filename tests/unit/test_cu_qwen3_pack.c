/* test_cu_qwen3_pack: the host side of the CUDA backend's Qwen3 weights
 * (src/engine/cuda/eng_cu_qwen3_pack.c), on the CPU -- no GPU needed.
 *
 * - the image of both fixture models (fp32 without prefix; bf16 under
 *   "model.") holds, at 256-aligned non-overlapping offsets, every tensor
 *   read back independently from the safetensors file by its own name:
 *   Q, K, V rows stacked in that order, gate rows then up rows, bf16 =
 *   round-to-nearest-even of the fp32 value, norms fp32 bit-exact;
 * - with fold_norms, qkv and gate|up rows are bf16(W * ln1 / ln2) and the
 *   two norms ones, the rest of the image unchanged;
 * - the rotary table equals what the CPU reference rotation
 *   (eng_cpu_rope_ref) does to unit pairs, bit for bit, at positions up to
 *   299 and two head sizes / thetas;
 * - the bf16 rounding of known values (ties to even, NaN, inf, -0);
 * - the off switch: the backend refuses qwen3 when POSY_CUDA_QWEN3=0 (and
 *   says so), takes it otherwise, and refuses shapes its kernels lack;
 * - the image filled a window at a time (as the upload does) equals the
 *   whole fill byte for byte, at window sizes that split every tensor;
 * - Gemma 3 / ModernBERT (tests/fixtures/decoders/): their extra norms,
 *   biases and the sliding layers' rotary table in the image, and which
 *   of their shapes the check takes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/eng_cpu_decoder.h"
#include "cuda/eng_cu_bf16.h"
#include "cuda/eng_cu_qwen3_pack.h"
#include "eng_internal.h"
#include "posy_test.h"

#define FIX "tests/fixtures/qwen3"

typedef struct loaded { eng_config cfg; eng_st_file st; eng_qwen3_weights w; int ok; } loaded;

static void load(loaded *m, const char *name) {
    char dir[256];
    posy_err err;
    posy_err_clear(&err);
    memset(m, 0, sizeof *m);
    const int before = posy_test_failures;
    snprintf(dir, sizeof dir, "%s/%s", strchr(name, '/') ? "tests/fixtures" : FIX, name);
    CHECK_MSG(eng_config_load(&m->cfg, dir, &err) == 0, "%s", err.msg);
    CHECK_MSG(eng_st_open_dir(&m->st, dir, &err) == 0, "%s", err.msg);
    CHECK_MSG(eng_qwen3_weights_load(&m->w, &m->cfg, &m->st, &err) == 0, "%s", err.msg);
    m->ok = posy_test_failures == before;
}

static void unload(loaded *m) {
    eng_qwen3_weights_free(&m->w);
    eng_st_close(&m->st);
    eng_config_free(&m->cfg);
}

/* The tensor `name` (under the file's prefix) as fp32, freshly allocated. */
static float *tensor(const loaded *m, const char *name, size_t *n) {
    char full[256];
    const char *prefix = eng_st_find(&m->st, "embed_tokens.weight") ? "" : "model.";
    snprintf(full, sizeof full, "%s%s", prefix, name);
    const eng_st_tensor *t = eng_st_find(&m->st, full);
    CHECK_MSG(t != NULL, "tensor %s", full);
    if (!t) return NULL;
    float *v = malloc((size_t)t->numel * sizeof(float));
    eng_st_tensor_to_f32(t, v);
    *n = (size_t)t->numel;
    return v;
}

/* Compare n bf16 values of the image at off with bf16(src). */
static int same_bf16(const char *img, size_t off, const float *src, size_t n) {
    const uint16_t *d = (const uint16_t *)(const void *)(img + off);
    for (size_t i = 0; i < n; i++)
        if (d[i] != eng_cu_f2bf_bits(src[i])) {
            fprintf(stderr, "  bf16 mismatch at %zu: %04x vs %04x\n", i, d[i], eng_cu_f2bf_bits(src[i]));
            return 0;
        }
    return 1;
}

static int same_f32(const char *img, size_t off, const float *src, size_t n) {
    return memcmp(img + off, src, n * sizeof(float)) == 0;
}

/* Image segment [off, off+len) must follow the previous one, 256-aligned. */
static size_t seg_end;
static void seg(size_t off, size_t len, size_t total) {
    CHECK_MSG(off % 256 == 0, "offset %zu not 256-aligned", off);
    CHECK_MSG(off >= seg_end, "segment at %zu overlaps the previous one (ends %zu)", off, seg_end);
    CHECK_MSG(off + len <= total, "segment at %zu + %zu past the image (%zu)", off, len, total);
    seg_end = off + len;
}

/* Rows of the stacked matrix at off: the listed tensors, in order. */
static void check_stack(const loaded *m, const char *img, size_t off, int layer, const char *const *names, int k) {
    for (int i = 0; i < k; i++) {
        char name[128];
        size_t n = 0;
        snprintf(name, sizeof name, "layers.%d.%s.weight", layer, names[i]);
        float *v = tensor(m, name, &n);
        if (!v) return;
        CHECK_MSG(same_bf16(img, off, v, n), "layer %d %s rows in the stack", layer, names[i]);
        off += n * 2;
        free(v);
    }
}

static void check_layer(const loaded *m, const eng_cu_q3_image *im, const char *img, int l) {
    static const char *const qkv[3] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};
    static const char *const gu[2] = {"mlp.gate_proj", "mlp.up_proj"};
    const eng_cu_q3_layer_off *o = &im->layers[l];
    const size_t H = (size_t)im->H, I = (size_t)im->I, d = (size_t)im->head_dim;
    seg(o->qkv_w, (size_t)im->qkv_n * H * 2, im->bytes);
    CHECK(o->qkv_b == ENG_CU_Q3_NONE && o->o_b == ENG_CU_Q3_NONE); /* the fixtures have no attention bias */
    seg(o->o_w, H * (size_t)im->attn_n * 2, im->bytes);
    seg(o->q_norm, d * 4, im->bytes);
    seg(o->k_norm, d * 4, im->bytes);
    seg(o->ln1, H * 4, im->bytes);
    seg(o->ln2, H * 4, im->bytes);
    seg(o->gu_w, 2 * I * H * 2, im->bytes);
    seg(o->down_w, H * I * 2, im->bytes);
    check_stack(m, img, o->qkv_w, l, qkv, 3);
    check_stack(m, img, o->gu_w, l, gu, 2);
    static const char *const b16[2] = {"self_attn.o_proj", "mlp.down_proj"};
    check_stack(m, img, o->o_w, l, b16, 1);
    check_stack(m, img, o->down_w, l, b16 + 1, 1);
    static const char *const f32[4] = {"self_attn.q_norm", "self_attn.k_norm", "input_layernorm",
                                       "post_attention_layernorm"};
    const size_t at[4] = {o->q_norm, o->k_norm, o->ln1, o->ln2};
    for (int i = 0; i < 4; i++) {
        char name[128];
        size_t n = 0;
        snprintf(name, sizeof name, "layers.%d.%s.weight", l, f32[i]);
        float *v = tensor(m, name, &n);
        if (v) CHECK_MSG(same_f32(img, at[i], v, n), "layer %d %s", l, f32[i]);
        free(v);
    }
}

/* Plan and fill the image of m (a rotary table of `rows` positions; the
 * sliding layers' table too where the model has one) into fresh memory
 * pre-filled with 0xab, so an unwritten byte shows. */
static char *plan_fill(const loaded *m, eng_cu_q3_image *im, int rows) {
    posy_err err;
    posy_err_clear(&err);
    CHECK_MSG(eng_cu_q3_plan(im, &m->cfg, &m->w, rows, &err) == 0, "%s", err.msg);
    char *img = malloc(im->bytes);
    memset(img, 0xab, im->bytes);
    eng_cu_q3_fill(im, &m->w, &m->cfg.rope, &m->cfg.rope_local, img);
    return img;
}

static void check_image(const char *name) {
    loaded m;
    load(&m, name);
    if (!m.ok) return;
    eng_cu_q3_image im;
    const int rope_rows = 300;
    char *img = plan_fill(&m, &im, rope_rows);
    const posy_model_info *in = &m.cfg.info;
    CHECK_EQ_INT(im.qkv_n, (in->heads + 2 * in->kv_heads) * m.cfg.head_dim);
    CHECK_EQ_INT(im.attn_n, in->heads * m.cfg.head_dim);
    seg_end = 0;
    seg(im.embed, (size_t)im.vocab * im.H * 2, im.bytes);
    seg(im.norm, (size_t)im.H * 4, im.bytes);
    seg(im.rope, (size_t)rope_rows * im.head_dim * 4, im.bytes);
    size_t n = 0;
    float *v = tensor(&m, "embed_tokens.weight", &n);
    if (v) CHECK_MSG(same_bf16(img, im.embed, v, n), "%s: embedding", name);
    free(v);
    v = tensor(&m, "norm.weight", &n);
    if (v) CHECK_MSG(same_f32(img, im.norm, v, n), "%s: final norm", name);
    free(v);
    for (int l = 0; l < im.L; l++) check_layer(&m, &im, img, l);
    printf("  %s: image %zu bytes, %d layers checked\n", name, im.bytes, im.L);
    free(img);
    eng_cu_q3_image_free(&im);
    unload(&m);
}

static void test_image_causal(void) { check_image("causal"); }
static void test_image_bidir(void) { check_image("bidir"); }

/* Rotating (1, .., 1 | 0, .., 0) at position p gives (cos | sin) of every
 * frequency: the CPU reference's rotation must equal the table exactly. */
static void check_rope(int d, eng_rope rope, int rows) {
    const double theta = rope.theta;
    float *table = malloc(sizeof(float) * (size_t)rows * d);
    float *x = calloc((size_t)rows * d, sizeof(float));
    eng_cu_q3_rope_table(table, rows, d, &rope);
    for (int p = 0; p < rows; p++)
        for (int i = 0; i < d / 2; i++) x[(size_t)p * d + i] = 1.0f;
    int32_t cu[3] = {0, rows / 3, rows}; /* two sequences: positions restart at the second */
    eng_cpu_rope_ref(x, cu, 2, 1, 0, d, &rope);
    int bad = 0;
    for (int t = 0; t < rows; t++) {
        const int p = t < cu[1] ? t : t - cu[1];
        for (int i = 0; i < d / 2; i++) {
            bad += x[(size_t)t * d + i] != table[((size_t)p * (d / 2) + i) * 2];
            bad += x[(size_t)t * d + d / 2 + i] != table[((size_t)p * (d / 2) + i) * 2 + 1];
        }
    }
    CHECK_MSG(bad == 0, "rope table d=%d theta=%g: %d values differ from eng_cpu_rope_ref", d, theta, bad);
    /* and it is a rotation table: cos^2 + sin^2 = 1, position 0 is the identity */
    CHECK(table[0] == 1.0f && table[1] == 0.0f);
    const float c = table[((size_t)(rows - 1) * (d / 2) + 1) * 2], s = table[((size_t)(rows - 1) * (d / 2) + 1) * 2 + 1];
    CHECK(fabsf(c * c + s * s - 1.0f) < 1e-6f);
    free(table);
    free(x);
}

static void test_rope_table(void) {
    check_rope(128, eng_rope_plain(1000000.0), 300);
    check_rope(32, eng_rope_plain(10000.0), 300);
    /* Llama 3.x's scaled frequencies (every band: kept, smoothed, divided)
     * and the linear scaling go through the same table */
    eng_rope l3 = {500000.0, ENG_ROPE_LLAMA3, 32.0, 1.0, 4.0, 64, 0.0};
    check_rope(64, l3, 300);
    eng_rope lin = {10000.0, ENG_ROPE_LINEAR, 4.0, 1.0, 4.0, 0, 0.0};
    check_rope(32, lin, 300);
}

/* The fold (im.fold_norms): qkv rows = bf16(W[n][k] * ln1[k]) from the
 * fp32 tensors, gate|up rows = bf16(W[n][k] * ln2[k]), ln1 and ln2 stored
 * as ones; the layout and every other tensor exactly as without it. */
static void check_fold_stack(const loaded *m, const char *img, size_t off, int l, const char *const *names, int k,
                             const char *norm) {
    char name[128];
    size_t ng = 0;
    snprintf(name, sizeof name, "layers.%d.%s.weight", l, norm);
    float *g = tensor(m, name, &ng);
    if (!g) return;
    for (int i = 0; i < k; i++) {
        size_t n = 0;
        snprintf(name, sizeof name, "layers.%d.%s.weight", l, names[i]);
        float *v = tensor(m, name, &n);
        if (!v) break;
        for (size_t j = 0; j < n; j++) v[j] *= g[j % ng];
        CHECK_MSG(same_bf16(img, off, v, n), "layer %d %s rows times %s", l, names[i], norm);
        off += n * 2;
        free(v);
    }
    free(g);
}

static void test_image_fold(void) {
    loaded m;
    load(&m, "causal");
    if (!m.ok) return;
    eng_cu_q3_image plain, fold;
    posy_err err;
    posy_err_clear(&err);
    CHECK_MSG(eng_cu_q3_plan(&plain, &m.cfg, &m.w, 64, &err) == 0, "%s", err.msg);
    CHECK_MSG(eng_cu_q3_plan(&fold, &m.cfg, &m.w, 64, &err) == 0, "%s", err.msg);
    fold.fold_norms = 1;
    char *a = calloc(1, plain.bytes), *b = calloc(1, fold.bytes);
    eng_cu_q3_fill(&plain, &m.w, &m.cfg.rope, NULL, a);
    eng_cu_q3_fill(&fold, &m.w, &m.cfg.rope, NULL, b);
    CHECK_EQ_INT((int)fold.bytes, (int)plain.bytes);
    static const char *const qkv[3] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"};
    static const char *const gu[2] = {"mlp.gate_proj", "mlp.up_proj"};
    const size_t H = (size_t)fold.H;
    float *ones = malloc(H * sizeof(float));
    for (size_t i = 0; i < H; i++) ones[i] = 1.0f;
    for (int l = 0; l < fold.L; l++) {
        const eng_cu_q3_layer_off *o = &fold.layers[l], *p = &plain.layers[l];
        CHECK(o->qkv_w == p->qkv_w && o->gu_w == p->gu_w && o->ln1 == p->ln1 && o->down_w == p->down_w);
        check_fold_stack(&m, b, o->qkv_w, l, qkv, 3, "input_layernorm");
        check_fold_stack(&m, b, o->gu_w, l, gu, 2, "post_attention_layernorm");
        CHECK_MSG(same_f32(b, o->ln1, ones, H) && same_f32(b, o->ln2, ones, H), "layer %d norms as ones", l);
        /* the rest is untouched */
        CHECK(!memcmp(a + o->o_w, b + o->o_w, H * (size_t)fold.attn_n * 2));
        CHECK(!memcmp(a + o->down_w, b + o->down_w, H * (size_t)fold.I * 2));
        CHECK(!memcmp(a + o->q_norm, b + o->q_norm, (size_t)fold.head_dim * 4));
    }
    CHECK(!memcmp(a + fold.embed, b + fold.embed, (size_t)fold.vocab * H * 2));
    CHECK(!memcmp(a + fold.norm, b + fold.norm, H * 4)); /* the final norm stays a norm */
    free(ones);
    free(a);
    free(b);
    eng_cu_q3_image_free(&plain);
    eng_cu_q3_image_free(&fold);
    unload(&m);
}

/* Gemma 3 and ModernBERT (tests/fixtures/decoders/): the image's extra
 * parts -- Gemma's post-attention / post-MLP norms and the (1 + w) norms
 * as the loader made them, ModernBERT's LayerNorm biases, its embedding
 * LayerNorm and final bias, no norm before layer 0's attention -- and the
 * sliding layers' own rotary table, each where the offsets say, fp32 bit
 * for bit; the check takes Gemma 3 and ModernBERT at supported head sizes. */
static void check_glu_image(const char *name, int gemma) {
    loaded m;
    load(&m, name);
    if (!m.ok) return;
    eng_cu_q3_image im;
    const int rows = 120;
    char *img = plan_fill(&m, &im, rows);
    CHECK(im.local_rope == 1);
    const size_t H = (size_t)im.H, d = (size_t)im.head_dim, tab = (size_t)rows * d;
    float *want = malloc(tab * sizeof(float));
    eng_cu_q3_rope_table(want, rows, im.head_dim, &m.cfg.rope);
    CHECK_MSG(same_f32(img, im.rope, want, tab), "%s: global rotary table", name);
    CHECK(im.rope_local != ENG_CU_Q3_NONE);
    eng_cu_q3_rope_table(want, rows, im.head_dim, &m.cfg.rope_local);
    if (im.rope_local != ENG_CU_Q3_NONE) {
        CHECK_MSG(same_f32(img, im.rope_local, want, tab), "%s: sliding layers' rotary table", name);
        CHECK_MSG(memcmp(img + im.rope, img + im.rope_local, tab * 4) != 0, "%s: the two tables differ", name);
    }
    free(want);
    CHECK(same_f32(img, im.norm, m.w.norm, H));
    if (gemma) {
        CHECK(im.emb_norm == ENG_CU_Q3_NONE && im.emb_norm_b == ENG_CU_Q3_NONE && im.norm_b == ENG_CU_Q3_NONE);
    } else {
        CHECK(im.emb_norm != ENG_CU_Q3_NONE && im.emb_norm_b != ENG_CU_Q3_NONE && im.norm_b != ENG_CU_Q3_NONE);
        if (im.emb_norm != ENG_CU_Q3_NONE && im.emb_norm_b != ENG_CU_Q3_NONE && im.norm_b != ENG_CU_Q3_NONE)
            CHECK(same_f32(img, im.emb_norm, m.w.emb_norm, H) && same_f32(img, im.emb_norm_b, m.w.emb_norm_b, H) &&
                  same_f32(img, im.norm_b, m.w.norm_b, H));
    }
    for (int l = 0; l < im.L; l++) {
        const eng_cu_q3_layer_off *o = &im.layers[l];
        const eng_qwen3_layer *w = &m.w.layers[l];
        CHECK_MSG(same_f32(img, o->ln2, w->ln2, H), "%s layer %d ln2", name, l);
        if (gemma) {
            CHECK(o->ln1 != ENG_CU_Q3_NONE && o->post_attn != ENG_CU_Q3_NONE && o->post_mlp != ENG_CU_Q3_NONE);
            CHECK(o->ln1_b == ENG_CU_Q3_NONE && o->ln2_b == ENG_CU_Q3_NONE);
            if (o->ln1 != ENG_CU_Q3_NONE && o->post_attn != ENG_CU_Q3_NONE && o->post_mlp != ENG_CU_Q3_NONE)
                CHECK_MSG(same_f32(img, o->ln1, w->ln1, H) && same_f32(img, o->post_attn, w->post_attn, H) &&
                              same_f32(img, o->post_mlp, w->post_mlp, H) && same_f32(img, o->q_norm, w->q_norm, d),
                          "%s layer %d: the (1 + w) norms", name, l);
        } else {
            CHECK(o->post_attn == ENG_CU_Q3_NONE && o->post_mlp == ENG_CU_Q3_NONE && o->q_norm == ENG_CU_Q3_NONE);
            CHECK_MSG((o->ln1 == ENG_CU_Q3_NONE) == (l == 0), "%s layer %d: a norm before attention iff l > 0", name,
                      l);
            if (l && o->ln1 != ENG_CU_Q3_NONE) CHECK(same_f32(img, o->ln1, w->ln1, H));
            CHECK(o->ln1_b != ENG_CU_Q3_NONE && o->ln2_b != ENG_CU_Q3_NONE);
            if (o->ln2_b != ENG_CU_Q3_NONE) CHECK(same_f32(img, o->ln2_b, w->ln2_b, H));
        }
    }
    CHECK((size_t)(im.layers[im.L - 1].down_w) < im.bytes);
    printf("  %s: image %zu bytes, %d layers checked\n", name, im.bytes, im.L);
    free(img);
    eng_cu_q3_image_free(&im);
    unload(&m);
}

static void test_image_glu(void) {
    check_glu_image("decoders/gemma3", 1);
    check_glu_image("decoders/modernbert", 0);
    /* the check: Gemma 3's fixture (head size 32) runs; ModernBERT's (16)
     * is refused by its head size, at 64 taken; 256 only for these two */
    loaded g, mb;
    load(&g, "decoders/gemma3");
    load(&mb, "decoders/modernbert");
    posy_err err;
    posy_err_clear(&err);
    setenv("POSY_CUDA_GLU", "0", 1);
    if (g.ok) { /* the off switch */
        CHECK(eng_cu_q3_check(&g.cfg, &err) != 0);
        CHECK_STR_CONTAINS(err.msg, "POSY_CUDA_GLU=0");
    }
    unsetenv("POSY_CUDA_GLU");
    posy_err_clear(&err);
    if (g.ok) {
        CHECK_MSG(eng_cu_q3_check(&g.cfg, &err) == 0, "%s", err.msg);
        eng_config c = g.cfg;
        c.head_dim = 256;
        CHECK_MSG(eng_cu_q3_check(&c, &err) == 0, "%s", err.msg);
        c.gemma = 0;
        CHECK(eng_cu_q3_check(&c, &err) != 0); /* a Qwen3 of head size 256: not in the tuned kernels */
        CHECK_STR_CONTAINS(err.msg, "head_dim 256");
        c = g.cfg;
        c.act = ENG_ACT_RELU;
        CHECK(eng_cu_q3_check(&c, &err) != 0);
    }
    if (mb.ok) {
        CHECK(eng_cu_q3_check(&mb.cfg, &err) != 0);
        CHECK_STR_CONTAINS(err.msg, "head_dim 16");
        eng_config c = mb.cfg;
        c.head_dim = 64;
        posy_err_clear(&err);
        CHECK_MSG(eng_cu_q3_check(&c, &err) == 0, "%s", err.msg);
    }
    unsetenv("POSY_CUDA_GLU");
    if (g.ok) unload(&g);
    if (mb.ok) unload(&mb);
}

/* NomicBERT (decoders/nomic): the word table with token type row 0 added
 * before the one bf16 rounding, the embedding LayerNorm, both post-norms
 * and their biases as placed, the products unfolded (bf16 of the source:
 * a post-norm must not be folded into the next product), Wqkv as is and
 * fc12 (the gate) before fc11 in the stack; one rotary.  The check: its
 * head size 16 is refused, 64 runs; POSY_CUDA_GLU=0 names NomicBERT. */
static void test_image_nomic(void) {
    loaded m;
    load(&m, "decoders/nomic");
    if (!m.ok) return;
    eng_cu_q3_image im;
    char *img = plan_fill(&m, &im, 64);
    const size_t H = (size_t)im.H, I = (size_t)im.I, V = (size_t)im.vocab;
    CHECK(im.local_rope == 0 && im.rope_local == ENG_CU_Q3_NONE);
    CHECK(m.w.type_emb != NULL && m.w.norm == NULL);
    float *row = malloc(V * H * sizeof(float));
    for (size_t i = 0; i < V * H; i++) row[i] = m.w.embed[i] + m.w.type_emb[i % H];
    CHECK_MSG(same_bf16(img, im.embed, row, V * H), "the word table plus type row 0");
    free(row);
    CHECK(im.emb_norm != ENG_CU_Q3_NONE && im.emb_norm_b != ENG_CU_Q3_NONE);
    if (im.emb_norm != ENG_CU_Q3_NONE && im.emb_norm_b != ENG_CU_Q3_NONE)
        CHECK(same_f32(img, im.emb_norm, m.w.emb_norm, H) && same_f32(img, im.emb_norm_b, m.w.emb_norm_b, H));
    for (int l = 0; l < im.L; l++) {
        const eng_cu_q3_layer_off *o = &im.layers[l];
        const eng_qwen3_layer *w = &m.w.layers[l];
        CHECK(o->ln1 != ENG_CU_Q3_NONE && o->ln1_b != ENG_CU_Q3_NONE && o->ln2_b != ENG_CU_Q3_NONE);
        CHECK(o->post_attn == ENG_CU_Q3_NONE && o->q_norm == ENG_CU_Q3_NONE && o->qkv_b == ENG_CU_Q3_NONE);
        if (o->ln1 == ENG_CU_Q3_NONE || o->ln1_b == ENG_CU_Q3_NONE || o->ln2_b == ENG_CU_Q3_NONE) continue;
        CHECK_MSG(same_f32(img, o->ln1, w->ln1, H) && same_f32(img, o->ln1_b, w->ln1_b, H) &&
                      same_f32(img, o->ln2, w->ln2, H) && same_f32(img, o->ln2_b, w->ln2_b, H),
                  "layer %d: the post-norms", l);
        CHECK_MSG(same_bf16(img, o->qkv_w, w->qkv_w, 3 * H * H) && same_bf16(img, o->o_w, w->o_w, H * H) &&
                      same_bf16(img, o->gu_w, w->gu_w, 2 * I * H) && same_bf16(img, o->down_w, w->down_w, H * I),
                  "layer %d: the products, unfolded", l);
        char name[96];
        snprintf(name, sizeof name, "encoder.layers.%d.mlp.fc12.weight", l);
        const eng_st_tensor *t = eng_st_find(&m.st, name);
        CHECK(t != NULL && (size_t)t->numel == I * H);
        if (t) {
            float *g = malloc(I * H * sizeof(float));
            eng_st_tensor_to_f32(t, g);
            CHECK_MSG(same_bf16(img, o->gu_w, g, I * H), "layer %d: fc12 (the gate) first", l);
            free(g);
        }
    }
    free(img);
    eng_cu_q3_image_free(&im);
    posy_err err;
    posy_err_clear(&err);
    CHECK(eng_cu_q3_check(&m.cfg, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "head_dim 16");
    eng_config c = m.cfg;
    c.head_dim = 64;
    posy_err_clear(&err);
    CHECK_MSG(eng_cu_q3_check(&c, &err) == 0, "%s", err.msg);
    setenv("POSY_CUDA_GLU", "0", 1);
    CHECK(eng_cu_q3_check(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "NomicBERT");
    unsetenv("POSY_CUDA_GLU");
    unload(&m);
}

/* GTE (decoders/gte and gte_mixed, new-impl's NewModel): the biases on
 * Q|K|V, O and down placed as bf16 (down's: the slot only GTE fills), type
 * row 0 folded into the word table where the model has token types (gte)
 * and not where it has none (gte_mixed), the gate (up_gate_proj's second
 * half) first in gate|up, the NTK rotary's table; the GPU path refused
 * until POSY_CUDA_GTE=1 (not yet run on a GPU), then the head size and
 * POSY_CUDA_GLU=0 as NomicBERT's. */
static void check_image_gte(const char *name, const char *prefix, int types) {
    loaded m;
    load(&m, name);
    if (!m.ok) return;
    eng_cu_q3_image im;
    char *img = plan_fill(&m, &im, 64);
    const size_t H = (size_t)im.H, I = (size_t)im.I, V = (size_t)im.vocab;
    CHECK(m.cfg.gte == 1 && m.cfg.rope.type == ENG_ROPE_NTK && im.local_rope == 0);
    CHECK((m.w.type_emb != NULL) == types && m.w.norm == NULL);
    float *row = malloc(V * H * sizeof(float));
    for (size_t i = 0; i < V * H; i++) row[i] = m.w.embed[i] + (types ? m.w.type_emb[i % H] : 0.0f);
    CHECK_MSG(same_bf16(img, im.embed, row, V * H), "%s: the word table (plus type row 0)", name);
    free(row);
    float *tab = malloc((size_t)64 * (size_t)m.cfg.head_dim * sizeof(float));
    eng_cu_q3_rope_table(tab, 64, m.cfg.head_dim, &m.cfg.rope);
    CHECK_MSG(same_f32(img, im.rope, tab, (size_t)64 * (size_t)m.cfg.head_dim), "%s: the NTK rotary table", name);
    free(tab);
    for (int l = 0; l < im.L; l++) {
        const eng_cu_q3_layer_off *o = &im.layers[l];
        const eng_qwen3_layer *w = &m.w.layers[l];
        CHECK(o->qkv_b != ENG_CU_Q3_NONE && o->o_b != ENG_CU_Q3_NONE && o->down_b != ENG_CU_Q3_NONE);
        CHECK(w->qkv_b && w->o_b && w->down_b);
        if (o->qkv_b == ENG_CU_Q3_NONE || o->o_b == ENG_CU_Q3_NONE || o->down_b == ENG_CU_Q3_NONE || !w->down_b)
            continue;
        CHECK_MSG(same_bf16(img, o->qkv_b, w->qkv_b, 3 * H) && same_bf16(img, o->o_b, w->o_b, H) &&
                      same_bf16(img, o->down_b, w->down_b, H),
                  "%s layer %d: the biases", name, l);
        CHECK_MSG(same_f32(img, o->ln1, w->ln1, H) && same_f32(img, o->ln1_b, w->ln1_b, H) &&
                      same_f32(img, o->ln2, w->ln2, H) && same_f32(img, o->ln2_b, w->ln2_b, H),
                  "%s layer %d: the post-norms", name, l);
        char tn[128];
        snprintf(tn, sizeof tn, "%sencoder.layer.%d.mlp.up_gate_proj.weight", prefix, l);
        const eng_st_tensor *t = eng_st_find(&m.st, tn);
        CHECK(t != NULL && (size_t)t->numel == 2 * I * H);
        if (t) {
            float *ug = malloc(2 * I * H * sizeof(float));
            eng_st_tensor_to_f32(t, ug);
            CHECK_MSG(same_bf16(img, o->gu_w, ug + I * H, I * H) &&
                          same_bf16(img, o->gu_w + I * H * 2, ug, I * H),
                      "%s layer %d: the gate (up_gate's second half) first, then up", name, l);
            free(ug);
        }
    }
    free(img);
    eng_cu_q3_image_free(&im);
    posy_err err;
    eng_config c = m.cfg;
    c.head_dim = 64;
    posy_err_clear(&err);
    unsetenv("POSY_CUDA_GTE");
    CHECK(eng_cu_q3_check(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "POSY_CUDA_GTE=1");
    setenv("POSY_CUDA_GTE", "1", 1);
    posy_err_clear(&err);
    CHECK_MSG(eng_cu_q3_check(&c, &err) == 0, "%s", err.msg);
    posy_err_clear(&err);
    CHECK(eng_cu_q3_check(&m.cfg, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "head_dim 16");
    setenv("POSY_CUDA_GLU", "0", 1);
    CHECK(eng_cu_q3_check(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "GTE");
    unsetenv("POSY_CUDA_GLU");
    unsetenv("POSY_CUDA_GTE");
    unload(&m);
}

static void test_image_gte(void) {
    check_image_gte("decoders/gte", "", 1);
    check_image_gte("decoders/gte_mixed", "new.", 0);
}

/* The image filled a window at a time, as the upload does (each window
 * into its own buffer, then placed), is the whole fill byte for byte --
 * windows of 256 bytes (splitting every tensor and rotary table), odd
 * multiples of it, and one larger than the image; folded norms and the
 * sliding layers' rotary too. */
static void check_windows(const char *name, int fold) {
    loaded m;
    load(&m, name);
    if (!m.ok) return;
    eng_cu_q3_image im;
    posy_err err;
    posy_err_clear(&err);
    CHECK_MSG(eng_cu_q3_plan(&im, &m.cfg, &m.w, 77, &err) == 0, "%s", err.msg);
    im.fold_norms = fold;
    char *whole = malloc(im.bytes), *win = malloc(im.bytes), *buf = malloc(im.bytes);
    memset(whole, 0xab, im.bytes);
    eng_cu_q3_fill(&im, &m.w, &m.cfg.rope, &m.cfg.rope_local, whole);
    static const size_t sizes[] = {256, 768, 256 * 37, 1 << 16};
    for (size_t k = 0; k <= sizeof sizes / sizeof sizes[0]; k++) {
        const size_t step = k < sizeof sizes / sizeof sizes[0] ? sizes[k] : im.bytes + 256;
        memset(win, 0xab, im.bytes);
        for (size_t lo = 0; lo < im.bytes; lo += step) {
            const size_t hi = lo + step < im.bytes ? lo + step : im.bytes;
            memset(buf, 0xab, hi - lo);
            eng_cu_q3_fill_window(&im, &m.w, &m.cfg.rope, &m.cfg.rope_local, buf, lo, hi);
            memcpy(win + lo, buf, hi - lo);
        }
        CHECK_MSG(memcmp(whole, win, im.bytes) == 0, "%s fold %d: windows of %zu bytes differ from the whole fill",
                  name, fold, step);
    }
    free(whole);
    free(win);
    free(buf);
    eng_cu_q3_image_free(&im);
    unload(&m);
}

static void test_image_windows(void) {
    check_windows("causal", 0);
    check_windows("causal", 1);
    check_windows("bidir", 0);
    check_windows("decoders/gemma3", 1);
    check_windows("decoders/modernbert", 0);
}

static void test_bf16_rounding(void) {
    CHECK_EQ_INT(eng_cu_f2bf_bits(1.0f), 0x3f80);
    CHECK_EQ_INT(eng_cu_f2bf_bits(1.0f + 1.0f / 256), 0x3f80);     /* tie: to even (down) */
    CHECK_EQ_INT(eng_cu_f2bf_bits(1.0f + 3.0f / 256), 0x3f82);     /* tie: to even (up) */
    CHECK_EQ_INT(eng_cu_f2bf_bits(1.0f + 1.0f / 128 + 1.0f / 4096), 0x3f81); /* just above half: nearest */
    CHECK_EQ_INT(eng_cu_f2bf_bits(-0.0f), 0x8000);
    CHECK_EQ_INT(eng_cu_f2bf_bits(INFINITY), 0x7f80);
    CHECK_EQ_INT(eng_cu_f2bf_bits(NAN) & 0x7fc0, 0x7fc0);
    CHECK(eng_cu_bf_bits2f(0x3f82) == 1.015625f);
}

static void test_gate_and_shapes(void) {
    loaded m;
    load(&m, "causal");
    if (!m.ok) return;
    posy_err err;
    posy_err_clear(&err);
    setenv("POSY_CUDA_QWEN3", "0", 1);
    CHECK(eng_cu_q3_check(&m.cfg, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "POSY_CUDA_QWEN3=0");
    unsetenv("POSY_CUDA_QWEN3");
    posy_err_clear(&err);
    CHECK_MSG(eng_cu_q3_check(&m.cfg, &err) == 0, "%s", err.msg);
    setenv("POSY_CUDA_QWEN3", "1", 1);
    posy_err_clear(&err);
    CHECK_MSG(eng_cu_q3_check(&m.cfg, &err) == 0, "%s", err.msg);
    eng_config c = m.cfg;
    c.head_dim = 48;
    CHECK(eng_cu_q3_check(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "head_dim 48");
    c = m.cfg;
    c.info.hidden = 8200;
    CHECK(eng_cu_q3_check(&c, &err) != 0);
    c = m.cfg;
    snprintf(c.info.arch, sizeof c.info.arch, "bert");
    CHECK(eng_cu_q3_check(&c, &err) != 0);
    unsetenv("POSY_CUDA_QWEN3");
    /* a layer count the weights do not have */
    c = m.cfg;
    c.info.layers = m.cfg.info.layers + 1;
    eng_cu_q3_image im;
    CHECK(eng_cu_q3_plan(&im, &c, &m.w, 16, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "layers");
    unload(&m);
}

TEST_MAIN(TEST(test_bf16_rounding), TEST(test_image_causal), TEST(test_image_bidir), TEST(test_image_fold),
          TEST(test_rope_table), TEST(test_gate_and_shapes), TEST(test_image_glu), TEST(test_image_nomic), TEST(test_image_gte),
          TEST(test_image_windows))

/* test_bert_weights: the BERT-family weights loader.
 *
 * Tiny synthetic checkpoints (F32, F16, BF16; with prefixes; RoBERTa
 * offsets; DistilBERT names; legacy gamma/beta; misaligned data) are built
 * in memory with values exactly representable in every dtype, so the
 * loaded fp32 view must equal the generator exactly.  Broken checkpoints
 * (missing tensor, wrong shape, integer dtype) must give errors naming the
 * file and the tensor.  With the real all-MiniLM-L6-v2 present, pointers
 * must go into the mapping (zero copy), Q|K|V must be stacked in order,
 * and a BF16 copy built here must load within bf16 rounding of the fp32.
 */
#include <jansson.h>
#include <stdint.h>
#include <unistd.h>

#include "eng_internal.h"
#include "posy_test.h"

#define MINILM_DIR "models/all-MiniLM-L6-v2"

/* ---- an in-memory safetensors writer ------------------------------------ */

typedef struct {
    json_t *hdr;
    unsigned char *data;
    size_t len, cap;
} stb;

static void stb_init(stb *b) {
    b->hdr = json_object();
    b->data = NULL;
    b->len = b->cap = 0;
}

static void stb_bytes(stb *b, const void *p, size_t n) {
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->data = realloc(b->data, b->cap);
    }
    if (p) memcpy(b->data + b->len, p, n);
    else memset(b->data + b->len, 0, n);
    b->len += n;
}

static void stb_add(stb *b, const char *name, const char *dtype, int ndim, const int64_t *dims, const void *p,
                    size_t n) {
    json_t *t = json_object(), *shape = json_array(), *offs = json_array();
    for (int i = 0; i < ndim; i++) json_array_append_new(shape, json_integer(dims[i]));
    json_array_append_new(offs, json_integer((json_int_t)b->len));
    json_array_append_new(offs, json_integer((json_int_t)(b->len + n)));
    json_object_set_new(t, "dtype", json_string(dtype));
    json_object_set_new(t, "shape", shape);
    json_object_set_new(t, "data_offsets", offs);
    json_object_set_new(b->hdr, name, t);
    stb_bytes(b, p, n);
}

/* Header padded with spaces to a multiple of 8, as the reference writer does. */
static unsigned char *stb_finish(stb *b, size_t *size) {
    char *h = json_dumps(b->hdr, JSON_COMPACT);
    size_t hl = strlen(h), padded = (hl + 7) / 8 * 8;
    *size = 8 + padded + b->len;
    unsigned char *out = malloc(*size);
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(out + 8, h, hl);
    memset(out + 8 + hl, ' ', padded - hl);
    if (b->len) memcpy(out + 8 + padded, b->data, b->len);
    free(h);
    free(b->data);
    json_decref(b->hdr);
    return out;
}

/* ---- tiny synthetic models ----------------------------------------------- */

enum { H = 8, I = 16, V = 11, T = 2, L = 2 };

/* Multiples of 1/16 in [-2, 2): exact in F16 and BF16. */
static float gen(const char *name, size_t j) {
    unsigned h = 5381;
    for (const char *p = name; *p; p++) h = h * 33u + (unsigned char)*p;
    return (float)((int)((h + j * 7u) % 64u) - 32) / 16.0f;
}

static uint16_t f32_to_f16_exact(float x) {   /* only for values gen() makes */
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) == 0) return (uint16_t)(u >> 16);
    uint32_t sign = (u >> 16) & 0x8000u, exp = (u >> 23) & 0xffu, man = u & 0x7fffffu;
    return (uint16_t)(sign | ((exp - 112u) << 10) | (man >> 13));
}

typedef struct {
    const char *dtype;     /* "F32", "F16", "BF16" */
    const char *prefix;
    int distil;            /* DistilBERT names, no token types */
    int gamma;             /* legacy LayerNorm gamma/beta names */
    int misalign;          /* every tensor at offset 2 mod 4 */
    int pos_rows;
    const char *omit;      /* name (without prefix) left out */
    const char *bad_shape; /* name given one extra row */
    const char *as_i64;    /* name stored as I64 */
} tiny_opts;

static void tiny_add(stb *b, const tiny_opts *o, const char *name, int ndim, int64_t d0, int64_t d1) {
    if (o->omit && !strcmp(name, o->omit)) return;
    char full[256];
    snprintf(full, sizeof full, "%s%s", o->prefix, name);
    int64_t dims[2] = {d0, d1};
    if (o->bad_shape && !strcmp(name, o->bad_shape)) dims[0]++;
    size_t n = (size_t)dims[0] * (ndim == 2 ? (size_t)dims[1] : 1);
    while (o->misalign && b->len % 4 != 2) stb_bytes(b, NULL, 1);
    if (o->as_i64 && !strcmp(name, o->as_i64)) {
        stb_add(b, full, "I64", ndim, dims, NULL, n * 8);
        return;
    }
    int es = strcmp(o->dtype, "F32") ? 2 : 4;
    unsigned char *buf = malloc(n * (size_t)es);
    for (size_t j = 0; j < n; j++) {
        float x = gen(name, j);
        uint32_t u;
        memcpy(&u, &x, 4);
        uint16_t h16 = !strcmp(o->dtype, "F16") ? f32_to_f16_exact(x) : (uint16_t)(u >> 16);
        if (es == 4) memcpy(buf + 4 * j, &x, 4);
        else memcpy(buf + 2 * j, &h16, 2);
    }
    stb_add(b, full, o->dtype, ndim, dims, buf, n * (size_t)es);
    free(buf);
}

static void tiny_layer_names(const tiny_opts *o, int l, char names[16][96], int *kinds) {
    static const char *bert[] = {"attention.self.query", "attention.self.key", "attention.self.value",
                                 "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
                                 "output.dense", "output.LayerNorm"};
    static const char *dist[] = {"attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
                                 "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"};
    for (int i = 0; i < 8; i++) {
        snprintf(names[i], 96, o->distil ? "transformer.layer.%d.%s" : "encoder.layer.%d.%s", l,
                 o->distil ? dist[i] : bert[i]);
        kinds[i] = i;
    }
}

static unsigned char *tiny_model(const tiny_opts *o, size_t *size) {
    stb b;
    stb_init(&b);
    const char *g = o->gamma ? "gamma" : "weight", *be = o->gamma ? "beta" : "bias";
    char n[256];
    int64_t one = 1;
    stb_add(&b, "embeddings.position_ids", "I64", 1, &one, "\0\0\0\0\0\0\0\0", 8);
    tiny_add(&b, o, "embeddings.word_embeddings.weight", 2, V, H);
    tiny_add(&b, o, "embeddings.position_embeddings.weight", 2, o->pos_rows, H);
    if (!o->distil) tiny_add(&b, o, "embeddings.token_type_embeddings.weight", 2, T, H);
    snprintf(n, sizeof n, "embeddings.LayerNorm.%s", g);
    tiny_add(&b, o, n, 1, H, 0);
    snprintf(n, sizeof n, "embeddings.LayerNorm.%s", be);
    tiny_add(&b, o, n, 1, H, 0);
    for (int l = 0; l < L; l++) {
        char ln[16][96];
        int k[16];
        tiny_layer_names(o, l, ln, k);
        static const int64_t out[8] = {H, H, H, H, H, I, H, H}, in[8] = {H, H, H, H, 0, H, I, 0};
        for (int i = 0; i < 8; i++) {
            int is_ln = in[i] == 0;
            snprintf(n, sizeof n, "%.96s.%s", ln[i], is_ln ? g : "weight");
            tiny_add(&b, o, n, is_ln ? 1 : 2, out[i], in[i]);
            snprintf(n, sizeof n, "%.96s.%s", ln[i], is_ln ? be : "bias");
            tiny_add(&b, o, n, 1, out[i], 0);
        }
    }
    return stb_finish(&b, size);
}

static int g_unset_rows; /* leave max_position_embeddings 0, as a hand-built config would */

static eng_config tiny_cfg(const char *arch, int offset, int distil) {
    eng_config c;
    memset(&c, 0, sizeof c);
    snprintf(c.info.arch, sizeof c.info.arch, "%s", arch);
    snprintf(c.model_type, sizeof c.model_type, "%s", arch);
    c.info.hidden = H;
    c.info.layers = L;
    c.info.heads = 2;
    c.info.intermediate = I;
    c.info.vocab = V;
    c.info.type_vocab = distil ? 0 : T;
    c.position_offset = offset;
    c.max_position_embeddings = g_unset_rows ? 0 : 10 + offset;
    c.info.max_positions = 10;
    return c;
}

static int same(const float *got, const char *name, size_t n, size_t skip) {
    for (size_t j = 0; j < n; j++)
        if (got[j] != gen(name, j + skip)) {
            fprintf(stderr, "  %s[%zu]: got %g want %g\n", name, j + skip, (double)got[j], (double)gen(name, j + skip));
            return 0;
        }
    return 1;
}

/* Every loaded value equals the generator (names without prefix). */
static void check_tiny_values(const eng_bert_weights *w, const tiny_opts *o, int offset) {
    const char *g = o->gamma ? "gamma" : "weight", *be = o->gamma ? "beta" : "bias";
    char n[256];
    CHECK(same(w->word_emb, "embeddings.word_embeddings.weight", V * H, 0));
    /* the whole stored table, row 0 first (backends add the offset) */
    CHECK(same(w->pos_emb, "embeddings.position_embeddings.weight", (size_t)(10 + offset) * H, 0));
    if (o->distil) CHECK(w->type_emb == NULL);
    else CHECK(w->type_emb && same(w->type_emb, "embeddings.token_type_embeddings.weight", T * H, 0));
    snprintf(n, sizeof n, "embeddings.LayerNorm.%s", g);
    CHECK(same(w->emb_ln_g, n, H, 0));
    snprintf(n, sizeof n, "embeddings.LayerNorm.%s", be);
    CHECK(same(w->emb_ln_b, n, H, 0));
    CHECK_EQ_INT(w->n_layers, L);
    for (int l = 0; l < L; l++) {
        char ln[16][96];
        int k[16];
        tiny_layer_names(o, l, ln, k);
        const eng_bert_layer *y = &w->layers[l];
        for (int q = 0; q < 3; q++) {   /* Q, K, V stacked in that order */
            snprintf(n, sizeof n, "%.96s.weight", ln[q]);
            CHECK_MSG(same(y->qkv_w + (size_t)q * H * H, n, H * H, 0), "layer %d part %d", l, q);
            snprintf(n, sizeof n, "%.96s.bias", ln[q]);
            CHECK(same(y->qkv_b + (size_t)q * H, n, H, 0));
        }
        const float *ptrs[10] = {y->ao_w, y->ao_b, y->ln1_g, y->ln1_b, y->up_w, y->up_b, y->down_w, y->down_b,
                                 y->ln2_g, y->ln2_b};
        const int which[5] = {3, 4, 5, 6, 7};
        const size_t sizes[10] = {H * H, H, H, H, I * H, I, H * I, H, H, H};
        for (int i = 0; i < 5; i++) {
            int is_ln = which[i] == 4 || which[i] == 7;
            snprintf(n, sizeof n, "%.96s.%s", ln[which[i]], is_ln ? g : "weight");
            CHECK_MSG(same(ptrs[2 * i], n, sizes[2 * i], 0), "%s", n);
            snprintf(n, sizeof n, "%.96s.%s", ln[which[i]], is_ln ? be : "bias");
            CHECK_MSG(same(ptrs[2 * i + 1], n, sizes[2 * i + 1], 0), "%s", n);
        }
    }
}

static int in_owned(const eng_bert_weights *w, const float *p) {
    return p >= w->owned && p < w->owned + w->owned_floats;
}

static void run_tiny(const tiny_opts *o, const char *arch, int offset) {
    size_t size;
    tiny_opts oo = *o;
    oo.pos_rows = 10 + offset;
    unsigned char *buf = tiny_model(&oo, &size);
    eng_st_file st;
    posy_err err = {0};
    eng_config cfg = tiny_cfg(arch, offset, o->distil);
    eng_bert_weights w;
    CHECK_EQ_INT(eng_st_parse(&st, buf, size, "tiny.safetensors", &err), 0);
    int rc = eng_bert_weights_load(&w, &cfg, &st, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (!rc) {
        check_tiny_values(&w, &oo, offset);
        size_t stacks = (size_t)L * (3 * H * H + 3 * H);
        if (!strcmp(o->dtype, "F32") && !o->misalign) {
            CHECK_EQ_INT(w.owned_floats, stacks);   /* only Q|K|V copied */
            char n[256];
            snprintf(n, sizeof n, "%sembeddings.word_embeddings.weight", o->prefix);
            CHECK(w.word_emb == (const float *)eng_st_find(&st, n)->data);
            CHECK(!in_owned(&w, w.layers[1].up_w));
        } else {
            CHECK(in_owned(&w, w.word_emb) && in_owned(&w, w.layers[1].ln2_b) && in_owned(&w, w.pos_emb));
            CHECK(w.owned_floats > stacks);
        }
        CHECK(in_owned(&w, w.layers[0].qkv_w) && in_owned(&w, w.layers[1].qkv_b));
        eng_bert_weights_free(&w);
        CHECK(w.owned == NULL && w.layers == NULL);
    }
    eng_st_close(&st);
    free(buf);
}

static void test_tiny_dtypes(void) {
    static const char *dts[] = {"F32", "F16", "BF16"};
    for (int i = 0; i < 3; i++) {
        tiny_opts o = {.dtype = dts[i], .prefix = ""};
        run_tiny(&o, "bert", 0);
        o.prefix = "bert.";
        run_tiny(&o, "bert", 0);
    }
}

static void test_tiny_variants(void) {
    tiny_opts o = {.dtype = "F32", .prefix = "roberta."};
    run_tiny(&o, "roberta", 2);                        /* 12-row table, 10 positions */
    o = (tiny_opts){.dtype = "F16", .prefix = "roberta."};
    g_unset_rows = 1;                                  /* rows = max_positions + offset */
    run_tiny(&o, "roberta", 2);
    g_unset_rows = 0;
    o = (tiny_opts){.dtype = "F32", .prefix = "", .misalign = 1};
    run_tiny(&o, "bert", 0);                           /* unaligned F32 copied */
    o = (tiny_opts){.dtype = "BF16", .prefix = "distilbert.", .distil = 1};
    run_tiny(&o, "distilbert", 0);
    o = (tiny_opts){.dtype = "F32", .prefix = "model.", .gamma = 1};
    run_tiny(&o, "bert", 0);
}

static void expect_load_error(tiny_opts o, const char *arch, const char *n1, const char *n2) {
    size_t size;
    o.pos_rows = 10;
    unsigned char *buf = tiny_model(&o, &size);
    eng_st_file st;
    posy_err err = {0};
    eng_config cfg = tiny_cfg(arch, 0, o.distil);
    eng_bert_weights w;
    CHECK_EQ_INT(eng_st_parse(&st, buf, size, "tiny.safetensors", &err), 0);
    int rc = eng_bert_weights_load(&w, &cfg, &st, &err);
    CHECK_MSG(rc != 0, "loaded, wanted an error about %s", n1);
    if (rc) {
        CHECK_STR_CONTAINS(err.msg, "tiny.safetensors");
        CHECK_STR_CONTAINS(err.msg, n1);
        if (n2) CHECK_STR_CONTAINS(err.msg, n2);
        CHECK(w.owned == NULL && w.layers == NULL);
    } else {
        eng_bert_weights_free(&w);
    }
    eng_st_close(&st);
    free(buf);
}

static void test_tiny_errors(void) {
    tiny_opts o = {.dtype = "F32", .prefix = "bert.", .omit = "encoder.layer.1.intermediate.dense.bias"};
    expect_load_error(o, "bert", "tensor bert.encoder.layer.1.intermediate.dense.bias not found", NULL);
    o = (tiny_opts){.dtype = "F32", .prefix = "", .omit = "encoder.layer.0.attention.self.value.weight"};
    expect_load_error(o, "bert", "encoder.layer.0.attention.self.value.weight not found", NULL);
    o = (tiny_opts){.dtype = "F32", .prefix = "", .omit = "embeddings.token_type_embeddings.weight"};
    expect_load_error(o, "bert", "embeddings.token_type_embeddings.weight not found", NULL);
    o = (tiny_opts){.dtype = "BF16", .prefix = "", .bad_shape = "encoder.layer.1.intermediate.dense.weight"};
    expect_load_error(o, "bert", "encoder.layer.1.intermediate.dense.weight has shape [17, 8]", "implies [16, 8]");
    o = (tiny_opts){.dtype = "F32", .prefix = "", .as_i64 = "encoder.layer.0.output.LayerNorm.bias"};
    expect_load_error(o, "bert", "encoder.layer.0.output.LayerNorm.bias has dtype I64", NULL);
    o = (tiny_opts){.dtype = "F32", .prefix = "weird.", .omit = NULL};
    expect_load_error(o, "bert", "embeddings.word_embeddings.weight not found", NULL);
    o = (tiny_opts){.dtype = "F32", .prefix = ""};
    expect_load_error(o, "distilbert", "transformer.layer.0.attention.q_lin.weight not found", NULL);
    expect_load_error(o, "qwen3", "not a BERT-family encoder", NULL);
}

/* ---- the real model ------------------------------------------------------- */

static int minilm_open(eng_config *cfg, eng_st_file *st) {
    if (access(MINILM_DIR "/model.safetensors", R_OK) != 0) {
        printf("  (skipped: %s not present)\n", MINILM_DIR);
        return 0;
    }
    posy_err err = {0};
    CHECK_EQ_INT(eng_config_load(cfg, MINILM_DIR, &err), 0);
    CHECK_EQ_INT(eng_st_open_dir(st, MINILM_DIR, &err), 0);
    return 1;
}

static const float *tdata(const eng_st_file *st, const char *fmt, int l) {
    char n[256];
    snprintf(n, sizeof n, fmt, l);
    const eng_st_tensor *t = eng_st_find(st, n);
    return t ? (const float *)t->data : NULL;
}

static void test_minilm_zero_copy(void) {
    eng_config cfg;
    eng_st_file st;
    if (!minilm_open(&cfg, &st)) return;
    eng_bert_weights w;
    posy_err err = {0};
    CHECK_EQ_INT(eng_bert_weights_load(&w, &cfg, &st, &err), 0);
    const size_t Hm = 384;
    CHECK_EQ_INT(w.n_layers, 6);
    CHECK_EQ_INT(w.owned_floats, 6 * (3 * Hm * Hm + 3 * Hm));
    CHECK(w.word_emb == tdata(&st, "embeddings.word_embeddings.weight", 0));
    CHECK(w.pos_emb == tdata(&st, "embeddings.position_embeddings.weight", 0));
    CHECK(w.type_emb == tdata(&st, "embeddings.token_type_embeddings.weight", 0));
    CHECK(w.emb_ln_g == tdata(&st, "embeddings.LayerNorm.weight", 0));
    for (int l = 0; l < 6; l++) {
        const eng_bert_layer *y = &w.layers[l];
        static const char *qkv[3] = {"query", "key", "value"};
        for (int q = 0; q < 3; q++) {
            char fw[128], fb[128];
            snprintf(fw, sizeof fw, "encoder.layer.%%d.attention.self.%s.weight", qkv[q]);
            snprintf(fb, sizeof fb, "encoder.layer.%%d.attention.self.%s.bias", qkv[q]);
            CHECK(!memcmp(y->qkv_w + q * Hm * Hm, tdata(&st, fw, l), Hm * Hm * 4));
            CHECK(!memcmp(y->qkv_b + q * Hm, tdata(&st, fb, l), Hm * 4));
        }
        CHECK(y->ao_w == tdata(&st, "encoder.layer.%d.attention.output.dense.weight", l));
        CHECK(y->ln1_b == tdata(&st, "encoder.layer.%d.attention.output.LayerNorm.bias", l));
        CHECK(y->up_w == tdata(&st, "encoder.layer.%d.intermediate.dense.weight", l));
        CHECK(y->down_b == tdata(&st, "encoder.layer.%d.output.dense.bias", l));
        CHECK(y->ln2_g == tdata(&st, "encoder.layer.%d.output.LayerNorm.weight", l));
    }
    eng_bert_weights_free(&w);
    eng_st_close(&st);
    eng_config_free(&cfg);
}

static uint16_t f32_to_bf16_rne(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* All F32 tensors of MiniLM re-encoded as BF16 (round to nearest even). */
static unsigned char *minilm_bf16(const eng_st_file *st, size_t *size) {
    stb b;
    stb_init(&b);
    for (int i = 0; i < st->n_tensors; i++) {
        const eng_st_tensor *t = &st->tensors[i];
        if (t->dtype != ENG_DT_F32) {
            stb_add(&b, t->name, t->dtype_name, t->ndim, t->shape, t->data, t->nbytes);
            continue;
        }
        uint16_t *h = malloc((size_t)t->numel * 2 + 2);
        const float *f = t->data;
        for (int64_t j = 0; j < t->numel; j++) h[j] = f32_to_bf16_rne(f[j]);
        stb_add(&b, t->name, "BF16", t->ndim, t->shape, h, (size_t)t->numel * 2);
        free(h);
    }
    return stb_finish(&b, size);
}

static void test_minilm_bf16(void) {
    eng_config cfg;
    eng_st_file st;
    if (!minilm_open(&cfg, &st)) return;
    size_t size;
    unsigned char *buf = minilm_bf16(&st, &size);
    eng_st_file sb;
    posy_err err = {0};
    eng_bert_weights w, ref;
    CHECK_EQ_INT(eng_st_parse(&sb, buf, size, "minilm-bf16", &err), 0);
    CHECK_EQ_INT(sb.n_tensors, st.n_tensors);
    CHECK_EQ_INT(eng_bert_weights_load(&w, &cfg, &sb, &err), 0);
    CHECK_EQ_INT(eng_bert_weights_load(&ref, &cfg, &st, &err), 0);
    const size_t Hm = 384, Im = 1536;
    /* bf16 stores 7 mantissa bits: round-to-nearest error <= half an ulp <= 2^-8 relative */
    const float rt = 1.0f / 256.0f;
    CHECK(in_owned(&w, w.word_emb));
    CHECK(posy_test_close(w.word_emb, ref.word_emb, 30522 * Hm, 0, rt));
    CHECK(posy_test_close(w.pos_emb, ref.pos_emb, 512 * Hm, 0, rt));
    CHECK(posy_test_close(w.type_emb, ref.type_emb, 2 * Hm, 0, rt));
    CHECK(posy_test_close(w.emb_ln_b, ref.emb_ln_b, Hm, 0, rt));
    for (int l = 0; l < 6; l++) {
        const eng_bert_layer *a = &w.layers[l], *r = &ref.layers[l];
        CHECK(posy_test_close(a->qkv_w, r->qkv_w, 3 * Hm * Hm, 0, rt));
        CHECK(posy_test_close(a->qkv_b, r->qkv_b, 3 * Hm, 0, rt));
        CHECK(posy_test_close(a->up_w, r->up_w, Im * Hm, 0, rt));
        CHECK(posy_test_close(a->down_w, r->down_w, Hm * Im, 0, rt));
        CHECK(posy_test_close(a->ln2_g, r->ln2_g, Hm, 0, rt));
        /* and not a no-op: some values must actually have been rounded */
        int rounded = 0;
        for (size_t j = 0; j < Hm * Im && !rounded; j++) rounded = a->up_w[j] != r->up_w[j];
        CHECK(rounded);
    }
    eng_bert_weights_free(&w);
    eng_bert_weights_free(&ref);
    eng_st_close(&sb);
    free(buf);
    eng_st_close(&st);
    eng_config_free(&cfg);
}

TEST_MAIN(TEST(test_tiny_dtypes), TEST(test_tiny_variants), TEST(test_tiny_errors), TEST(test_minilm_zero_copy),
          TEST(test_minilm_bf16))

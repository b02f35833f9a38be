/* test_static: sentence-transformers StaticEmbedding models, from the
 * directory to the vector, on directories written here byte by byte: the
 * config (sizes from the weights' header, the tokenizer's file and
 * truncation, special tokens off), the engine (the mean of rows, model2vec's
 * mapping and weights folded, Normalize), and every refusal of a broken
 * directory, whose message must say what is wrong.  The same models saved
 * by sentence-transformers itself are checked against its vectors in
 * tests/python/test_static.py. */
#define _XOPEN_SOURCE 700
#include <math.h>
#include <stdint.h>

#include "eng_config.h"
#include "posy_engine.h"
#include "posy_test.h"
#include "test_tmpdir.h"

/* A safetensors file: the header JSON (padded with spaces to 8 bytes) and
 * the data. */
static void put_st(const char *rel, const char *header, const void *data, size_t n) {
    size_t hl = (strlen(header) + 7) / 8 * 8;
    unsigned char *buf = calloc(1, 8 + hl + n);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memset(buf + 8, ' ', hl);
    memcpy(buf + 8, header, strlen(header));
    memcpy(buf + 8 + hl, data, n);
    put_bytes(rel, buf, 8 + hl + n);
    free(buf);
}

static const char *MODS_ROOT =
    "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":"
    "\"sentence_transformers.sentence_transformer.modules.static_embedding.StaticEmbedding\"},"
    "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Normalize\",\"type\":\"sentence_transformers.base.modules.normalize.Normalize\"}]";
static const char *MODS_OLD =
    "[{\"idx\":0,\"name\":\"0\",\"path\":\"0_StaticEmbedding\",\"type\":\"sentence_transformers.models.StaticEmbedding\"}]";
static const char *TOK_PLAIN = "{\"version\":\"1.0\",\"truncation\":null,\"model\":{}}";

/* embedding.weight [5, 3]: row i = (i, 2i, -1) */
static const float TABLE[15] = {0, 0, -1, 1, 2, -1, 2, 4, -1, 3, 6, -1, 4, 8, -1};
static const char *TABLE_HDR = "{\"embedding.weight\":{\"dtype\":\"F32\",\"shape\":[5,3],\"data_offsets\":[0,60]}}";

static void expect_cfg_fail(const char *needle1, const char *needle2) {
    eng_config c;
    posy_err err = {0};
    int rc = eng_config_load(&c, g_dir, &err);
    CHECK_MSG(rc != 0, "loaded, wanted an error about %s", needle1);
    if (!rc) { eng_config_free(&c); return; }
    CHECK_STR_CONTAINS(err.msg, needle1);
    if (needle2) CHECK_STR_CONTAINS(err.msg, needle2);
}

/* Open the engine on g_dir and embed the given sequences; 0 or -1. */
static int embed(const int32_t *ids, const int32_t *cu, int n_seqs, float *out, int dim, char *msg, size_t msg_cap) {
    posy_engine_opts o = {.device = POSY_DEVICE_CPU, .n_threads = 1};
    posy_err err = {0};
    posy_engine *e = posy_engine_open(g_dir, &o, &err);
    if (!e) {
        snprintf(msg, msg_cap, "%s", err.msg);
        return -1;
    }
    CHECK_EQ_INT(posy_engine_info(e)->dim, dim);
    posy_batch b = {.tag = 7, .n_seqs = n_seqs, .n_tokens = cu[n_seqs], .ids = ids, .cu_seqlens = cu, .out = out};
    posy_result r[2];
    int n = posy_engine_step(e, &b, r, 2, &err);
    if (n == 0) n = posy_engine_wait(e, r, 2);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(r[0].status, 0);
    posy_engine_close(e);
    return 0;
}

static void test_config_root_layout(void) {
    fresh_dir();
    put("modules.json", MODS_ROOT);
    put("1_Normalize/config.json", "{}");
    put("tokenizer.json", "{\"version\":\"1.0\",\"truncation\":{\"direction\":\"Right\",\"max_length\":7,"
                          "\"strategy\":\"LongestFirst\",\"stride\":0},\"model\":{}}");
    put_st("model.safetensors", TABLE_HDR, TABLE, sizeof TABLE);
    eng_config c;
    posy_err err = {0};
    int rc = eng_config_load(&c, g_dir, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (rc) return;
    CHECK_EQ_INT(c.static_emb, 1);
    CHECK_EQ_INT(c.add_special, 0);
    CHECK(!strcmp(c.info.arch, "static"));
    CHECK(!strcmp(c.model_type, "static_embedding"));
    CHECK_EQ_INT(c.info.hidden, 3);
    CHECK_EQ_INT(c.info.dim, 3);
    CHECK_EQ_INT(c.info.vocab, 5);
    CHECK_EQ_INT(c.info.normalize, 1);
    CHECK_EQ_INT(c.info.pooling, POSY_POOL_MEAN);
    CHECK_EQ_INT(c.info.max_seq_len, 7);   /* the tokenizer's own truncation */
    eng_config_free(&c);
    char tp[1024], want[1024];
    int special = 1;
    CHECK_EQ_INT(eng_model_tokenizer_file(g_dir, tp, sizeof tp, &special), 0);
    snprintf(want, sizeof want, "%s/tokenizer.json", g_dir);
    CHECK(!strcmp(tp, want));
    CHECK_EQ_INT(special, 0);
    put("tokenizer.json", TOK_PLAIN);   /* no truncation: the CPU's default batch is the limit */
    rc = eng_config_load(&c, g_dir, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (!rc) {
        CHECK_EQ_INT(c.info.max_seq_len, 16384);
        eng_config_free(&c);
    }
    /* a BERT-style directory: its tokenizer at the root, special tokens on */
    fresh_dir();
    CHECK_EQ_INT(eng_model_tokenizer_file(g_dir, tp, sizeof tp, &special), 0);
    snprintf(want, sizeof want, "%s/tokenizer.json", g_dir);
    CHECK(!strcmp(tp, want));
    CHECK_EQ_INT(special, 1);
}

static void test_engine_mean_and_normalize(void) {
    fresh_dir();
    put("modules.json", MODS_ROOT);
    put("1_Normalize/config.json", "{}");
    put("tokenizer.json", TOK_PLAIN);
    put_st("model.safetensors", TABLE_HDR, TABLE, sizeof TABLE);
    const int32_t ids[] = {1, 3, 4, 4, 0};   /* (1,3,4): mean (8/3, 16/3, -1); (4, 0): (2, 4, -1) */
    const int32_t cu[] = {0, 3, 5};
    float out[6];
    char msg[512];
    if (embed(ids, cu, 2, out, 3, msg, sizeof msg)) { CHECK_MSG(0, "%s", msg); return; }
    const double m0[3] = {8.0 / 3, 16.0 / 3, -1}, m1[3] = {2, 4, -1};
    const double n0 = sqrt(m0[0] * m0[0] + m0[1] * m0[1] + 1), n1 = sqrt(4 + 16 + 1);
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(fabs(out[i] - m0[i] / n0) < 1e-6, "seq 0 [%d]: %g, want %g", i, out[i], m0[i] / n0);
        CHECK_MSG(fabs(out[3 + i] - m1[i] / n1) < 1e-6, "seq 1 [%d]: %g, want %g", i, out[3 + i], m1[i] / n1);
    }
    /* a sequence of no tokens (an empty text): torch's empty bag, zeros (Normalize keeps them zero) */
    const int32_t ecu[] = {0, 0, 3};
    if (embed(ids, ecu, 2, out, 3, msg, sizeof msg)) { CHECK_MSG(0, "%s", msg); return; }
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(out[i] == 0.0f, "empty [%d]: %g, want 0", i, out[i]);
        CHECK_MSG(fabs(out[3 + i] - m0[i] / n0) < 1e-6, "after empty [%d]: %g, want %g", i, out[3 + i], m0[i] / n0);
    }
    /* the old layout, its folder named in modules.json, no Normalize: the plain mean */
    fresh_dir();
    put("modules.json", MODS_OLD);
    put("0_StaticEmbedding/tokenizer.json", TOK_PLAIN);
    put_st("0_StaticEmbedding/model.safetensors", TABLE_HDR, TABLE, sizeof TABLE);
    if (embed(ids, cu, 2, out, 3, msg, sizeof msg)) { CHECK_MSG(0, "%s", msg); return; }
    for (int i = 0; i < 3; i++) {
        CHECK_MSG(fabs(out[i] - m0[i]) < 1e-6, "seq 0 [%d]: %g, want %g", i, out[i], m0[i]);
        CHECK_MSG(fabs(out[3 + i] - m1[i]) < 1e-6, "seq 1 [%d]: %g, want %g", i, out[3 + i], m1[i]);
    }
    char tp[1024], want[1024];
    CHECK_EQ_INT(eng_model_tokenizer_file(g_dir, tp, sizeof tp, NULL), 0);
    snprintf(want, sizeof want, "%s/0_StaticEmbedding/tokenizer.json", g_dir);
    CHECK(!strcmp(tp, want));
    /* a token id past the table is refused by the engine, not read */
    posy_engine_opts o = {.device = POSY_DEVICE_CPU, .n_threads = 1};
    posy_err err = {0};
    posy_engine *e = posy_engine_open(g_dir, &o, &err);
    CHECK_MSG(e != NULL, "%s", err.msg);
    if (e) {
        const int32_t bad[] = {5};
        const int32_t bcu[] = {0, 1};
        posy_batch b = {.n_seqs = 1, .n_tokens = 1, .ids = bad, .cu_seqlens = bcu, .out = out};
        posy_result r[1];
        CHECK_EQ_INT(posy_engine_step(e, &b, r, 1, &err), -1);
        CHECK_STR_CONTAINS(err.msg, "outside the vocabulary");
        posy_engine_close(e);
    }
}

/* model2vec: row i = embeddings[mapping[i]] * weights[i] (F64 weights, I64
 * mapping, F16 rows here, as model2vec and quantised potion models write). */
static void test_engine_model2vec_fold(void) {
    fresh_dir();
    put("modules.json", "[{\"idx\":0,\"name\":\"0\",\"path\":\".\",\"type\":\"sentence_transformers.models.StaticEmbedding\"}]");
    put("config.json", "{\"model_type\":\"model2vec\",\"normalize\":true}");   /* model2vec's own: not read */
    put("tokenizer.json", TOK_PLAIN);
    /* embeddings F16 [2, 2] = (1, 2), (0.5, -4); mapping I64 [3] = 1, 0, 1; weights F64 [3] = 2, 3, 0.25 */
    unsigned char data[8 + 24 + 24];
    const uint16_t h[4] = {0x3c00, 0x4000, 0x3800, 0xc400};
    const int64_t map[3] = {1, 0, 1};
    const double w[3] = {2, 3, 0.25};
    memcpy(data, h, 8);
    memcpy(data + 8, map, 24);
    memcpy(data + 32, w, 24);
    put_st("model.safetensors",
           "{\"embeddings\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
           "\"mapping\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[8,32]},"
           "\"weights\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[32,56]}}", data, sizeof data);
    eng_config c;
    posy_err err = {0};
    int rc = eng_config_load(&c, g_dir, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    if (!rc) {
        CHECK_EQ_INT(c.info.vocab, 3);   /* token ids, not rows */
        CHECK_EQ_INT(c.info.hidden, 2);
        CHECK_EQ_INT(c.info.normalize, 0);
        eng_config_free(&c);
    }
    /* rows: id 0 = (1, -8), id 1 = (3, 6), id 2 = (0.125, -1) */
    const int32_t ids[] = {0, 1, 2, 2};
    const int32_t cu[] = {0, 2, 3, 4};
    float out[6];
    char msg[512];
    if (embed(ids, cu, 3, out, 2, msg, sizeof msg)) { CHECK_MSG(0, "%s", msg); return; }
    const float want[6] = {2, -1, 0.125f, -1, 0.125f, -1};
    for (int i = 0; i < 6; i++) CHECK_MSG(fabsf(out[i] - want[i]) < 1e-6f, "[%d]: %g, want %g", i, out[i], want[i]);
    /* a mapping entry past the rows is refused at open, with the entry named */
    const int64_t bad[3] = {1, 2, 0};
    memcpy(data + 8, bad, 24);
    put_st("model.safetensors",
           "{\"embeddings\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
           "\"mapping\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[8,32]},"
           "\"weights\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[32,56]}}", data, sizeof data);
    CHECK_EQ_INT(embed(ids, cu, 3, out, 2, msg, sizeof msg), -1);
    CHECK_STR_CONTAINS(msg, "mapping[1] is 2, outside the 2 rows");
    /* weights of the wrong length */
    memcpy(data + 8, map, 24);
    put_st("model.safetensors",
           "{\"embeddings\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
           "\"mapping\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[8,32]},"
           "\"weights\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[32,48]}}", data, 48);
    CHECK_EQ_INT(embed(ids, cu, 3, out, 2, msg, sizeof msg), -1);
    CHECK_STR_CONTAINS(msg, "weights must be 3");
    /* a mapping that is not integers */
    put_st("model.safetensors",
           "{\"embeddings\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
           "\"mapping\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[8,14]}}", data, 14);
    CHECK_EQ_INT(embed(ids, cu, 3, out, 2, msg, sizeof msg), -1);
    CHECK_STR_CONTAINS(msg, "mapping has dtype F16");
}

static void test_refusals(void) {
    fresh_dir();
    put("modules.json", MODS_OLD);
    put("0_StaticEmbedding/tokenizer.json", TOK_PLAIN);
    expect_cfg_fail("0_StaticEmbedding/model.safetensors", "weights are missing");
    put_st("0_StaticEmbedding/model.safetensors", "{\"other\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           TABLE, 4);
    expect_cfg_fail("neither embedding.weight nor model2vec's embeddings", NULL);
    put_st("0_StaticEmbedding/model.safetensors",
           "{\"embedding.weight\":{\"dtype\":\"F32\",\"shape\":[5,3,1],\"data_offsets\":[0,60]}}", TABLE, 60);
    expect_cfg_fail("embedding.weight has shape of 3 dims", NULL);
    put_st("0_StaticEmbedding/model.safetensors", TABLE_HDR, TABLE, sizeof TABLE);
    put("modules.json", "[{\"type\":\"sentence_transformers.models.StaticEmbedding\",\"path\":\"../x\"}]");
    expect_cfg_fail("StaticEmbedding path '../x' leaves the model directory", NULL);
    char tp[1024];
    CHECK_EQ_INT(eng_model_tokenizer_file(g_dir, tp, sizeof tp, NULL), -1);   /* nor is its tokenizer read */
    put("modules.json", "[{\"type\":\"sentence_transformers.models.StaticEmbedding\",\"path\":\"/etc\"}]");
    expect_cfg_fail("StaticEmbedding path '/etc' leaves the model directory", NULL);
    CHECK_EQ_INT(eng_model_tokenizer_file(g_dir, tp, sizeof tp, NULL), -1);
    put("modules.json", "[{\"type\":\"sentence_transformers.models.StaticEmbedding\",\"path\":\"0_StaticEmbedding\"},"
                        "{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"}]");
    put("1_Pooling/config.json", "{\"pooling_mode_mean_tokens\":true}");
    expect_cfg_fail("more than one Pooling module", NULL);
    put("modules.json", "[{\"type\":\"sentence_transformers.models.StaticEmbedding\",\"path\":\"0_StaticEmbedding\"},"
                        "{\"type\":\"sentence_transformers.models.StaticEmbedding\",\"path\":\"0_StaticEmbedding\"}]");
    expect_cfg_fail("StaticEmbedding module is supported as the first module only", NULL);
    /* a StaticEmbedding after a Transformer is not a static model: the transformer's config is asked for */
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Transformer\",\"path\":\"\"},"
                        "{\"type\":\"sentence_transformers.models.StaticEmbedding\",\"path\":\"0_StaticEmbedding\"}]");
    expect_cfg_fail("config.json", NULL);
    /* --device cuda is refused with the reason, whatever the build */
    put("modules.json", MODS_OLD);
    posy_engine_opts o = {.device = POSY_DEVICE_CUDA};
    posy_err err = {0};
    posy_engine *e = posy_engine_open(g_dir, &o, &err);
    CHECK(e == NULL);
    if (e) posy_engine_close(e);
    else CHECK_STR_CONTAINS(err.msg, "runs on the CPU only");
}

TEST_MAIN(TEST(test_config_root_layout), TEST(test_engine_mean_and_normalize), TEST(test_engine_model2vec_fold),
          TEST(test_refusals), TEST(test_cleanup))

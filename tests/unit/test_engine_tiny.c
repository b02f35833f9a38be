/* test_engine_tiny: the CPU engine on tiny random-weight BERT and RoBERTa
 * models (tests/fixtures, made with tests/gen/gen_tiny_models.py) against
 * Hugging Face transformers on the same token ids.
 *
 * Covers what the default model does not: RoBERTa position offset, tanh
 * GELU, token type ids, CLS pooling, no normalisation, odd sizes
 * (intermediate 37, head_dim 8) and a sequence of exactly max_positions.
 * tiny-mpnet (tests/gen/gen_tiny_mpnet.py) adds MPNet's relative position
 * bias, with a sequence of 200 tokens so that every bucket is used.
 * All sequences go in one packed batch; each embedding must match the
 * transformers output for that sequence alone within 1e-5 + 1e-5*|ref|
 * (fp32 both sides; the weights are large, std 0.2, so errors would show).
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "posy_engine.h"
#include "posy_test.h"

#define MAX_TOK 256

typedef struct {
    int n_seqs, n_tokens, has_types;
    int32_t ids[MAX_TOK], types[MAX_TOK], cu[16];
    float want[16 * 32];
} tiny_case;

static int load_case(json_t *m, tiny_case *c) {
    json_t *ids = json_object_get(m, "ids"), *types = json_object_get(m, "type_ids");
    json_t *emb = json_object_get(m, "embeddings");
    if (!json_is_array(ids) || !json_is_array(emb)) return -1;
    c->n_seqs = (int)json_array_size(ids);
    c->has_types = json_is_array(types);
    c->cu[0] = 0;
    if (c->n_seqs > 15) return -1;
    for (int s = 0; s < c->n_seqs; s++) {
        json_t *seq = json_array_get(ids, s), *e = json_array_get(emb, s);
        int len = (int)json_array_size(seq);
        if (c->cu[s] + len > MAX_TOK || json_array_size(e) != 32) return -1;
        for (int i = 0; i < len; i++) {
            c->ids[c->cu[s] + i] = (int32_t)json_integer_value(json_array_get(seq, i));
            c->types[c->cu[s] + i] =
                c->has_types ? (int32_t)json_integer_value(json_array_get(json_array_get(types, s), i)) : 0;
        }
        for (int i = 0; i < 32; i++) c->want[s * 32 + i] = (float)json_real_value(json_array_get(e, i));
        c->cu[s + 1] = c->cu[s] + len;
    }
    c->n_tokens = c->cu[c->n_seqs];
    return 0;
}

static void check_model_in(const char *file, const char *name, posy_pooling pooling, int normalize,
                           int max_positions) {
    json_error_t jerr;
    json_t *root = json_load_file(file, 0, &jerr);
    CHECK_MSG(root != NULL, "%s: %s", file, jerr.text);
    if (!root) return;
    tiny_case c;
    json_t *m = json_object_get(root, name);
    CHECK_EQ_INT(load_case(m ? m : root, &c), 0);
    json_decref(root);

    char dir[256];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    posy_engine_opts o = {.device = POSY_DEVICE_CPU, .max_batch_tokens = MAX_TOK, .max_batch_seqs = 8};
    posy_err err;
    posy_engine *e = posy_engine_open(dir, &o, &err);
    CHECK_MSG(e != NULL, "open %s: %s", dir, err.msg);
    if (!e) return;
    const posy_model_info *mi = posy_engine_info(e);
    CHECK_EQ_INT(mi->hidden, 32);
    CHECK_EQ_INT(mi->pooling, pooling);
    CHECK_EQ_INT(mi->normalize, normalize);
    CHECK_EQ_INT(mi->max_positions, max_positions); /* RoBERTa, MPNet: the rows - (pad 1 + 1) */

    float out[16 * 32];
    posy_batch b = {1, c.n_seqs, c.n_tokens, c.ids, c.has_types ? c.types : NULL, c.cu, out, NULL, NULL};
    posy_result r[1];
    CHECK_EQ_INT(posy_engine_step(e, &b, r, 1, &err), 1);
    CHECK_EQ_INT(r[0].status, 0);
    for (int s = 0; s < c.n_seqs; s++)
        CHECK_MSG(posy_test_close(out + s * 32, c.want + s * 32, 32, 1e-5f, 1e-5f), "%s seq %d (len %d)",
                  name, s, c.cu[s + 1] - c.cu[s]);
    /* Token states (TEI's /embed_all): every other sequence asks; the
     * pooled vectors stay the same, and pooling the states as the model
     * says gives them back. */
    CHECK_EQ_INT(mi->tok_dim, 32);
    static float tok[MAX_TOK * 32];
    float *tp[16], out_t[16 * 32];
    for (int s = 0; s < c.n_seqs; s++) tp[s] = s % 2 == 0 ? tok + (size_t)c.cu[s] * 32 : NULL;
    for (int i = 0; i < MAX_TOK * 32; i++) tok[i] = -999.0f;
    posy_batch bt = b;
    bt.out = out_t;
    bt.tok_out = tp;
    CHECK_EQ_INT(posy_engine_step(e, &bt, r, 1, &err), 1);
    CHECK_EQ_INT(r[0].status, 0);
    CHECK(memcmp(out, out_t, sizeof(float) * (size_t)c.n_seqs * 32) == 0);
    for (int s = 0; s < c.n_seqs; s++) {
        const int len = c.cu[s + 1] - c.cu[s];
        const float *rows = tok + (size_t)c.cu[s] * 32;
        if (!tp[s]) {   /* untouched where no pointer asked */
            CHECK(rows[0] == -999.0f && rows[(size_t)len * 32 - 1] == -999.0f);
            continue;
        }
        float pooled[32];
        double ss = 0;
        for (int i = 0; i < 32; i++) {
            double v = 0;
            if (pooling == POSY_POOL_CLS) v = rows[i];
            else {
                for (int t = 0; t < len; t++) v += rows[(size_t)t * 32 + i];
                v /= len;
            }
            pooled[i] = (float)v;
            ss += v * v;
        }
        for (int i = 0; normalize && i < 32; i++) pooled[i] = (float)(pooled[i] / sqrt(ss));
        CHECK_MSG(posy_test_close(pooled, out + s * 32, 32, 1e-5f, 1e-5f), "%s seq %d: pooled token states", name, s);
    }
    if (c.has_types) {
        /* Token types must matter: all-zero types give another embedding. */
        posy_batch z = b;
        z.type_ids = NULL;
        float out0[16 * 32];
        z.out = out0;
        CHECK_EQ_INT(posy_engine_step(e, &z, r, 1, &err), 1);
        int differ = 0;
        for (int i = 0; i < 32; i++) differ |= out0[i] != out[i];
        CHECK(differ);
    }
    posy_engine_close(e);
}

static void check_model(const char *name, posy_pooling pooling, int normalize) {
    check_model_in("tests/fixtures/tiny_expected.json", name, pooling, normalize, 40);
}

static void test_tiny_bert(void) { check_model("tiny-bert", POSY_POOL_CLS, 0); }
static void test_tiny_roberta(void) { check_model("tiny-roberta", POSY_POOL_MEAN, 1); }
static void test_tiny_mpnet(void) {
    check_model_in("tests/fixtures/tiny_mpnet_expected.json", "tiny-mpnet", POSY_POOL_MEAN, 1, 200);
}

TEST_MAIN(TEST(test_tiny_bert), TEST(test_tiny_roberta), TEST(test_tiny_mpnet))

/* test_hf_models: the loader on checkpoints written by Hugging Face
 * transformers itself (tests/gen/gen_eng_fixtures.py): sharded safetensors
 * with an index, RoBERTa position offsets, an XLM-R saved in bf16,
 * DistilBERT names, a BertForMaskedLM with a "bert." prefix and an extra
 * head.  expected.json holds statistics of every weight computed from the
 * PyTorch state_dict, so what the C loader exposes (after prefix search,
 * offset, QKV stacking and conversion) is checked against the reference,
 * not against itself.  First/last elements must match exactly; sums to a
 * relative 1e-6 (summation order differs). */
#include <jansson.h>

#include "eng_internal.h"
#include "posy_test.h"

#define FIX "tests/fixtures/eng_models"

static void check_stats(const char *model, const char *what, int layer, const float *p, json_t *e) {
    CHECK_MSG(p != NULL, "%s %s[%d] is NULL", model, what, layer);
    if (!p || !e) return;
    size_t n = (size_t)json_integer_value(json_object_get(e, "n"));
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; i++) { sum += p[i]; sq += (double)p[i] * p[i]; }
    double want_sum = json_number_value(json_object_get(e, "sum"));
    double want_sq = json_number_value(json_object_get(e, "sumsq"));
    CHECK_MSG(p[0] == (float)json_number_value(json_object_get(e, "first")), "%s %s[%d] first", model, what, layer);
    CHECK_MSG(p[n - 1] == (float)json_number_value(json_object_get(e, "last")), "%s %s[%d] last", model, what, layer);
    CHECK_MSG(fabs(sum - want_sum) <= 1e-6 * (fabs(want_sum) + 1e-3), "%s %s[%d] sum %g want %g", model, what, layer,
              sum, want_sum);
    CHECK_MSG(fabs(sq - want_sq) <= 1e-6 * want_sq, "%s %s[%d] sumsq %g want %g", model, what, layer, sq, want_sq);
}

static void check_layer(const char *m, int l, const eng_bert_layer *y, json_t *e, int H) {
    const struct { const char *k; const float *p; } f[] = {
        {"qkv_w", y->qkv_w}, {"qkv_b", y->qkv_b}, {"ao_w", y->ao_w}, {"ao_b", y->ao_b}, {"ln1_g", y->ln1_g},
        {"ln1_b", y->ln1_b}, {"up_w", y->up_w}, {"up_b", y->up_b}, {"down_w", y->down_w}, {"down_b", y->down_b},
        {"ln2_g", y->ln2_g}, {"ln2_b", y->ln2_b},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) check_stats(m, f[i].k, l, f[i].p, json_object_get(e, f[i].k));
    json_t *parts = json_object_get(e, "qkv_part_first");
    for (int q = 0; q < 3; q++)   /* Q, K, V in that order */
        CHECK_MSG(y->qkv_w[(size_t)q * H * H] == (float)json_number_value(json_array_get(parts, (size_t)q)),
                  "%s layer %d qkv part %d", m, l, q);
}

static void check_model(const char *name, json_t *exp) {
    char dir[256];
    snprintf(dir, sizeof dir, FIX "/%s", name);
    eng_config cfg;
    eng_st_file st;
    eng_bert_weights w;
    posy_err err = {0};
    if (eng_config_load(&cfg, dir, &err)) { CHECK_MSG(0, "%s", err.msg); return; }
    int H = (int)json_integer_value(json_object_get(exp, "hidden"));
    CHECK_EQ_INT(cfg.info.hidden, H);
    CHECK_EQ_INT(cfg.position_offset, json_integer_value(json_object_get(exp, "position_offset")));
    CHECK_EQ_INT(cfg.info.max_positions, json_integer_value(json_object_get(exp, "max_positions")));
    if (eng_st_open_dir(&st, dir, &err)) { CHECK_MSG(0, "%s", err.msg); eng_config_free(&cfg); return; }
    CHECK_EQ_INT(st.n_shards, json_integer_value(json_object_get(exp, "shards")));
    int rc = eng_bert_weights_load(&w, &cfg, &st, &err);
    CHECK_MSG(rc == 0, "%s: %s", name, err.msg);
    if (!rc) {
        json_t *e = json_object_get(exp, "weights");
        check_stats(name, "word_emb", -1, w.word_emb, json_object_get(e, "word_emb"));
        /* expected.json has rows [offset:]; pos_emb is the whole table */
        check_stats(name, "pos_emb", -1, w.pos_emb + (size_t)cfg.position_offset * H, json_object_get(e, "pos_emb"));
        check_stats(name, "emb_ln_g", -1, w.emb_ln_g, json_object_get(e, "emb_ln_g"));
        check_stats(name, "emb_ln_b", -1, w.emb_ln_b, json_object_get(e, "emb_ln_b"));
        if (json_object_get(e, "type_emb")) check_stats(name, "type_emb", -1, w.type_emb, json_object_get(e, "type_emb"));
        else CHECK(w.type_emb == NULL);
        json_t *layers = json_object_get(e, "layers");
        CHECK_EQ_INT(w.n_layers, json_array_size(layers));
        for (int l = 0; l < w.n_layers && l < (int)json_array_size(layers); l++)
            check_layer(name, l, &w.layers[l], json_array_get(layers, (size_t)l), H);
        eng_bert_weights_free(&w);
    }
    eng_st_close(&st);
    eng_config_free(&cfg);
}

static json_t *load_expected(void) {
    json_error_t je;
    json_t *e = json_load_file(FIX "/expected.json", 0, &je);
    CHECK_MSG(e != NULL, "cannot read " FIX "/expected.json: %s", je.text);
    return e;
}

static void test_roberta(void) { json_t *e = load_expected(); check_model("roberta", json_object_get(e, "roberta")); json_decref(e); }
static void test_xlmr_bf16(void) { json_t *e = load_expected(); check_model("xlmr_bf16", json_object_get(e, "xlmr_bf16")); json_decref(e); }
static void test_distilbert(void) { json_t *e = load_expected(); check_model("distilbert", json_object_get(e, "distilbert")); json_decref(e); }
static void test_bert_mlm(void) { json_t *e = load_expected(); check_model("bert_mlm", json_object_get(e, "bert_mlm")); json_decref(e); }

TEST_MAIN(TEST(test_roberta), TEST(test_xlmr_bf16), TEST(test_distilbert), TEST(test_bert_mlm))

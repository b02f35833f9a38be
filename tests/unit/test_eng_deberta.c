/* test_eng_deberta: DeBERTa's relative position index and disentangled
 * attention on the CPU.
 *
 * The log buckets against transformers' own make_log_bucket_position
 * (tests/fixtures/deberta_buckets.json, written by
 * tests/gen/gen_classify_fixtures.py: distances -2047..2047 under six
 * settings), the index's shift and clamp, and the fast attention against
 * its double-precision reference at several lengths (one token, a tile
 * and one more, a sequence longer than the relative table) with each
 * position term on and off -- and that the terms change the result.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "cpu/eng_cpu_kernels.h"
#include "eng_deberta.h"
#include "posy_test.h"

static void test_buckets_match_transformers(void) {
    json_error_t jerr;
    json_t *root = json_load_file("tests/fixtures/deberta_buckets.json", 0, &jerr);
    CHECK_MSG(root != NULL, "deberta_buckets.json: %s", jerr.text);
    if (!root) return;
    const int first = (int)json_integer_value(json_object_get(root, "first"));
    json_t *sets = json_object_get(root, "settings"), *s;
    size_t k;
    CHECK(json_array_size(sets) >= 6);
    json_array_foreach(sets, k, s) {
        const int b = (int)json_integer_value(json_object_get(s, "buckets"));
        const int m = (int)json_integer_value(json_object_get(s, "max"));
        json_t *vals = json_object_get(s, "values");
        CHECK_EQ_INT((int)json_array_size(vals), 4095);
        int bad = 0;
        for (size_t i = 0; i < json_array_size(vals); i++) {
            const int rel = first + (int)i, want = (int)json_integer_value(json_array_get(vals, i));
            const int got = eng_deberta_log_bucket(rel, b, m);
            if (got != want && bad++ < 5)
                CHECK_MSG(0, "buckets %d max %d distance %d: %d, transformers %d", b, m, rel, got, want);
        }
        CHECK_EQ_INT(bad, 0);
    }
    json_decref(root);
}

static void test_index(void) {
    eng_deberta_cfg c = {.rel = 1, .c2p = 1, .p2c = 1, .buckets = 0, .max_rel = 32, .span = 32};
    CHECK_EQ_INT(eng_deberta_index(&c, 0), 32);        /* distance 0 is the table's middle row */
    CHECK_EQ_INT(eng_deberta_index(&c, -5), 27);
    CHECK_EQ_INT(eng_deberta_index(&c, 31), 63);
    CHECK_EQ_INT(eng_deberta_index(&c, 32), 63);       /* clamped to the last row */
    CHECK_EQ_INT(eng_deberta_index(&c, -32), 0);
    CHECK_EQ_INT(eng_deberta_index(&c, -500), 0);
    c = (eng_deberta_cfg){.rel = 1, .buckets = 256, .max_rel = 512, .span = 256};
    CHECK_EQ_INT(eng_deberta_index(&c, 128), 256 + 128);   /* up to half the buckets: the distance itself */
    CHECK(eng_deberta_index(&c, 129) > 256 + 128);
    CHECK(eng_deberta_index(&c, 511) <= 511);
    int tab[2 * 40 - 1];
    eng_deberta_index_table(&c, 40, tab);
    CHECK_EQ_INT(tab[0], eng_deberta_index(&c, -39));
    CHECK_EQ_INT(tab[39], 256);
    CHECK_EQ_INT(tab[78], eng_deberta_index(&c, 39));
    eng_deberta_cfg none = {.c2p = 1};
    CHECK_EQ_INT(eng_deberta_scale_factor(&none), 2);
    /* v2 counts the terms it computes; v1 every name pos_att_type lists ("p2c|c2p|p2p": 1 + 3) */
    eng_deberta_cfg v2 = {.c2p = 1, .p2c = 1, .n_types = 3}, v1 = {.c2p = 1, .p2c = 1, .v1 = 1, .n_types = 3};
    CHECK_EQ_INT(eng_deberta_scale_factor(&v2), 3);
    CHECK_EQ_INT(eng_deberta_scale_factor(&v1), 4);
}

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(float lo, float hi) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}
static float *rand_vec(size_t n, float lo, float hi) {
    float *v = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) v[i] = frand(lo, hi);
    return v;
}

/* one batch of the given lengths under the given settings: fast == ref */
static void attention_case(const int *lens, int n_seqs, int nh, int d, const eng_deberta_cfg *cfg, int c2p, int p2c) {
    int32_t cu[8] = {0};
    for (int s = 0; s < n_seqs; s++) cu[s + 1] = cu[s] + lens[s];
    const int T = cu[n_seqs], H = nh * d, rows = 2 * cfg->span, max_len = 300;
    float *qkv = rand_vec((size_t)T * 3 * H, -2, 2);
    float *kr = rand_vec((size_t)rows * H, -2, 2), *qr = rand_vec((size_t)rows * H, -2, 2);
    float *a = rand_vec((size_t)T * H, 9, 10), *r = rand_vec((size_t)T * H, 9, 10), *p = rand_vec((size_t)T * H, 9, 10);
    int *idx = malloc(sizeof(int) * (2 * max_len - 1));
    eng_deberta_index_table(cfg, max_len, idx);
    eng_cpu_deb_att att = {.kr = c2p ? kr : NULL, .qr = p2c ? qr : NULL, .idx = idx, .max_len = max_len,
                           .rows = rows, .scale_factor = 1 + c2p + p2c};
    const size_t sf = eng_cpu_attention_deberta_scratch_floats(max_len, rows, 3);
    float *scratch = malloc(sizeof(float) * sf);
    CHECK_EQ_INT(eng_cpu_attention_deberta(a, qkv, cu, n_seqs, nh, d, &att, scratch, sf), 0);
    eng_cpu_attention_deberta_ref(r, qkv, cu, n_seqs, nh, d, &att);
    CHECK_MSG(posy_test_close(a, r, (size_t)T * H, 1e-5f, 1e-5f), "fast vs ref T=%d span=%d buckets=%d c2p=%d p2c=%d", T,
              cfg->span, cfg->buckets, c2p, p2c);
    if ((c2p || p2c) && T > n_seqs) {   /* the position terms move the result */
        eng_cpu_deb_att plain = att;
        plain.kr = plain.qr = NULL;
        eng_cpu_attention_deberta_ref(p, qkv, cu, n_seqs, nh, d, &plain);
        int moved = 0;
        for (size_t i = 0; i < (size_t)T * H && !moved; i++) moved = fabsf(p[i] - r[i]) > 1e-3f;
        CHECK_MSG(moved, "position terms changed nothing T=%d", T);
    }
    /* a sequence past the index table: refused, not overrun */
    eng_cpu_deb_att short_tab = att;
    short_tab.max_len = lens[0] - 1;
    if (lens[0] > 1) CHECK_EQ_INT(eng_cpu_attention_deberta(a, qkv, cu, n_seqs, nh, d, &short_tab, scratch, sf), -1);
    free(qkv); free(kr); free(qr); free(a); free(r); free(p); free(idx); free(scratch);
}

static void test_attention(void) {
    const eng_deberta_cfg v3 = {.rel = 1, .c2p = 1, .p2c = 1, .buckets = 16, .max_rel = 256, .span = 16};
    const eng_deberta_cfg v2 = {.rel = 1, .c2p = 1, .p2c = 1, .buckets = 0, .max_rel = 24, .span = 24};
    const int one[] = {1}, mixed[] = {5, 64, 65, 17}, longer[] = {130, 3};
    for (int c2p = 0; c2p <= 1; c2p++)
        for (int p2c = 0; p2c <= 1; p2c++) {
            attention_case(one, 1, 2, 8, &v3, c2p, p2c);
            attention_case(mixed, 4, 3, 16, &v3, c2p, p2c);
            attention_case(mixed, 4, 2, 32, &v2, c2p, p2c);
            attention_case(longer, 2, 2, 16, &v2, c2p, p2c);   /* distances past the table clamp */
            attention_case(longer, 2, 2, 16, &v3, c2p, p2c);
        }
}

TEST_MAIN(TEST(test_buckets_match_transformers), TEST(test_index), TEST(test_attention))

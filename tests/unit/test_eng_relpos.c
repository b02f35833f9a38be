/* test_eng_relpos: MPNet's relative position buckets against transformers'
 * own MPNetEncoder.relative_position_bucket (its values for distances
 * -600..600 are in tests/fixtures/tiny_mpnet_expected.json, written by
 * tests/gen/gen_tiny_mpnet.py), and the expanded table's layout.
 *
 * The integer formula must agree with torch's float32 logarithm at every
 * distance, the powers of two (16, 32, 64) where the float result is an
 * integer included.
 */
#include <jansson.h>
#include <stdlib.h>
#include "eng_relpos.h"
#include "posy_test.h"

static void test_buckets_match_transformers(void) {
    json_error_t jerr;
    json_t *root = json_load_file("tests/fixtures/tiny_mpnet_expected.json", 0, &jerr);
    CHECK_MSG(root != NULL, "tiny_mpnet_expected.json: %s", jerr.text);
    if (!root) return;
    json_t *b = json_object_get(root, "buckets"), *vals = json_object_get(b, "values");
    int first = (int)json_integer_value(json_object_get(b, "first"));
    CHECK_EQ_INT((int)json_array_size(vals), 1201);
    int bad = 0;
    for (size_t i = 0; i < json_array_size(vals); i++) {
        int rel = first + (int)i, want = (int)json_integer_value(json_array_get(vals, i));
        int got = eng_relpos_bucket(rel);
        if (got != want && bad++ < 5) CHECK_MSG(0, "distance %d: bucket %d, transformers %d", rel, got, want);
    }
    CHECK_EQ_INT(bad, 0);
    json_decref(root);
}

static void test_bucket_edges(void) {
    /* key after query (rel > 0) is the upper half; far distances clamp */
    CHECK_EQ_INT(eng_relpos_bucket(0), 0);
    CHECK_EQ_INT(eng_relpos_bucket(-7), 7);
    CHECK_EQ_INT(eng_relpos_bucket(7), 23);
    CHECK_EQ_INT(eng_relpos_bucket(-16), 10);
    CHECK_EQ_INT(eng_relpos_bucket(-15), 9);
    CHECK_EQ_INT(eng_relpos_bucket(-1000000), 15);
    CHECK_EQ_INT(eng_relpos_bucket(1000000), 31);
    CHECK_EQ_INT(eng_relpos_bucket(-2147483647), 15);
}

static void test_expand(void) {
    enum { HEADS = 3, MAXLEN = 150 };
    float w[ENG_RELPOS_BUCKETS * HEADS];
    for (int i = 0; i < ENG_RELPOS_BUCKETS * HEADS; i++) w[i] = (float)i;
    float *tab = malloc(sizeof(float) * HEADS * eng_relpos_span(MAXLEN));
    eng_relpos_expand(tab, w, HEADS, MAXLEN, 0.5f);
    eng_relpos r = {tab, MAXLEN};
    for (int h = 0; h < HEADS; h++) {
        const float *row = eng_relpos_row(&r, h);
        for (int d = -(MAXLEN - 1); d <= MAXLEN - 1; d++)
            if (row[d] != 0.5f * w[eng_relpos_bucket(d) * HEADS + h]) {
                CHECK_MSG(0, "head %d distance %d", h, d);
                break;
            }
    }
    free(tab);
}

TEST_MAIN(TEST(test_buckets_match_transformers), TEST(test_bucket_edges), TEST(test_expand))

/* test_chunk: chunked processing of over-long inputs (posy_chunk.h):
 * special-token detection, window counts and contents (specials repeated
 * in every window, content split in order, last window shorter), buffer
 * and size refusals, and the token-weighted combination with and without
 * normalisation, against values worked out by hand.  Also checks the
 * defining property end to end on the CPU engine: an input that fits is
 * one window whose combined embedding is the plain embedding. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "posy_chunk.h"
#include "posy_engine.h"
#include "posy_test.h"

static void test_specials(void) {
    static const uint8_t m1[] = {1, 0, 0, 0, 1}, m2[] = {1, 1, 0, 1}, m3[] = {1, 1, 1}, m4[] = {0, 0};
    int p, s;
    posy_chunk_specials(m1, 5, &p, &s); CHECK(p == 1 && s == 1);
    posy_chunk_specials(m2, 4, &p, &s); CHECK(p == 2 && s == 1);
    posy_chunk_specials(m3, 3, &p, &s); CHECK(p == 3 && s == 0);
    posy_chunk_specials(m4, 2, &p, &s); CHECK(p == 0 && s == 0);
    posy_chunk_specials(NULL, 9, &p, &s); CHECK(p == 0 && s == 0);
}

static void test_count(void) {
    CHECK_EQ_INT(posy_chunk_count(10, 1, 1, 4), 4);    /* 8 content tokens, 2 per window */
    CHECK_EQ_INT(posy_chunk_count(10, 1, 1, 10), 1);   /* fits */
    CHECK_EQ_INT(posy_chunk_count(11, 1, 1, 10), 2);
    CHECK_EQ_INT(posy_chunk_count(2, 1, 1, 10), 1);    /* specials only */
    CHECK_EQ_INT(posy_chunk_count(10, 0, 1, 3), 5);    /* decoder: <|endoftext|> only at the end */
    CHECK_EQ_INT(posy_chunk_count(10, 1, 1, 2), -1);   /* no room for content */
    CHECK_EQ_INT(posy_chunk_count(1, 1, 1, 8), -1);    /* fewer tokens than specials */
    CHECK_EQ_INT(posy_chunk_total_tokens(10, 1, 1, 4), 16);
    CHECK_EQ_INT(posy_chunk_total_tokens(10, 1, 1, 2), 0);
}

static void test_split(void) {
    int32_t ids[] = {101, 1, 2, 3, 4, 5, 6, 7, 102};   /* [CLS] 7 content [SEP] */
    int32_t out[32], cu[8];
    int k = posy_chunk_split(ids, 9, 1, 1, 5, out, 32, cu, 8);  /* W = 3: 3 + 3 + 1 */
    CHECK_EQ_INT(k, 3);
    static const int32_t want[] = {101, 1, 2, 3, 102, 101, 4, 5, 6, 102, 101, 7, 102};
    static const int32_t want_cu[] = {0, 5, 10, 13};
    CHECK(!memcmp(out, want, sizeof want));
    CHECK(!memcmp(cu, want_cu, sizeof want_cu));
    /* exactly full windows */
    int32_t d[] = {1, 2, 3, 4, 5, 6, 99};
    k = posy_chunk_split(d, 7, 0, 1, 4, out, 32, cu, 8);
    static const int32_t want2[] = {1, 2, 3, 99, 4, 5, 6, 99};
    CHECK_EQ_INT(k, 2);
    CHECK(!memcmp(out, want2, sizeof want2));
    CHECK_EQ_INT(cu[2], 8);
    /* fits: one window, identical */
    k = posy_chunk_split(ids, 9, 1, 1, 512, out, 32, cu, 8);
    CHECK_EQ_INT(k, 1);
    CHECK(!memcmp(out, ids, sizeof ids) && cu[1] == 9);
    /* refusals: small buffers, no room */
    CHECK_EQ_INT(posy_chunk_split(ids, 9, 1, 1, 5, out, 12, cu, 8), -1);
    CHECK_EQ_INT(posy_chunk_split(ids, 9, 1, 1, 5, out, 32, cu, 3), -1);
    CHECK_EQ_INT(posy_chunk_split(ids, 9, 1, 1, 2, out, 32, cu, 8), -1);
}

static void test_combine(void) {
    static const float emb[] = {1, 0, 0, 1};
    static const int32_t cu[] = {0, 4, 6};
    float out[2];
    posy_chunk_combine(emb, cu, 2, 2, 0, out);
    CHECK(fabsf(out[0] - 4.0f / 6) < 1e-7f && fabsf(out[1] - 2.0f / 6) < 1e-7f);
    posy_chunk_combine(emb, cu, 2, 2, 1, out);
    CHECK(fabsf(out[0] - 2.0f / sqrtf(5)) < 1e-7f && fabsf(out[1] - 1.0f / sqrtf(5)) < 1e-7f);
    static const float one[] = {0.6f, -0.8f};
    static const int32_t cu1[] = {0, 17};
    posy_chunk_combine(one, cu1, 1, 2, 1, out);
    CHECK(out[0] == 0.6f && out[1] == -0.8f);
    static const float opp[] = {1, 0, -1, 0};
    static const int32_t cu2[] = {0, 3, 6};
    posy_chunk_combine(opp, cu2, 2, 2, 1, out);
    CHECK(out[0] == 0.0f && out[1] == 0.0f);   /* all-zero mean stays zero */
}

/* On the engine: a fitting input is its own single window. */
static void test_engine_single_window(void) {
    posy_engine_opts o = {0};
    o.device = POSY_DEVICE_CPU;
    o.n_threads = 1;
    o.max_batch_tokens = 64;
    o.max_batch_seqs = 8;
    posy_err err;
    posy_err_clear(&err);
    posy_engine *e = posy_engine_open("tests/fixtures/qwen3/bidir", &o, &err);
    CHECK_MSG(e != NULL, "%s", err.msg);
    if (!e) return;
    int32_t ids[12] = {5, 9, 11, 300, 42, 7, 8, 1, 2, 3, 4, 443}, win[64], cu[9];
    int k = posy_chunk_split(ids, 12, 0, 1, 32, win, 64, cu, 9);
    CHECK_EQ_INT(k, 1);
    float plain[64], wins[8 * 64], comb[64];   /* up to 8 windows (cu holds 9 bounds) */
    int32_t cu0[2] = {0, 12};
    posy_batch b1 = {1, 1, 12, ids, NULL, cu0, plain, NULL, NULL}, b2 = {2, k, cu[k], win, NULL, cu, wins, NULL, NULL};
    posy_result r[2];
    CHECK_EQ_INT(posy_engine_step(e, &b1, r, 2, &err), 1);
    CHECK_EQ_INT(posy_engine_step(e, &b2, r, 2, &err), 1);
    posy_chunk_combine(wins, cu, k, 64, 1, comb);
    CHECK(posy_test_close(comb, plain, 64, 1e-6f, 1e-6f));
    /* and a split input (windows of 5) differs from the plain embedding but stays close in direction */
    k = posy_chunk_split(ids, 12, 0, 1, 5, win, 64, cu, 9);
    CHECK_EQ_INT(k, 3);
    posy_batch b3 = {3, k, cu[k], win, NULL, cu, wins, NULL, NULL};
    CHECK_EQ_INT(posy_engine_step(e, &b3, r, 2, &err), 1);
    posy_chunk_combine(wins, cu, k, 64, 1, comb);
    double dot = 0;
    for (int i = 0; i < 64; i++) dot += (double)comb[i] * plain[i];
    printf("  cos(chunked in 3 windows, plain) = %.4f\n", dot);
    CHECK(dot < 0.99999 && dot > 0.0);
    posy_engine_close(e);
}

TEST_MAIN(TEST(test_specials), TEST(test_count), TEST(test_split), TEST(test_combine), TEST(test_engine_single_window))

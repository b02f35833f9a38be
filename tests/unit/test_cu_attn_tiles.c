/* test_cu_attn_tiles: the attention tile list the CUDA backend packs for
 * every step (src/engine/cuda/eng_cu_attn_tiles.c), on the CPU -- no GPU
 * needed.
 *
 * - sequence order: ceil(len / 64) tiles a sequence, (sequence, first row)
 *   in order, the count within eng_cu_attn_max_tiles;
 * - heaviest first: the same tiles (a permutation), costs never rising
 *   (bidirectional: the sequence's key tiles; causal: q0 / 64 + 1), ties
 *   in sequence order; equal bidirectional lengths keep sequence order;
 *   sequences past the top cost class (32768 tokens) still give every
 *   tile once; an empty batch gives none.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cuda/eng_cu_attn_tiles.h"
#include "posy_test.h"

static int cost(int len, int q0, int causal) {
    const int c = causal ? q0 / ENG_CU_ATTN_BM + 1 : (len + ENG_CU_ATTN_BM - 1) / ENG_CU_ATTN_BM;
    return c < 512 ? c : 512;
}

static int cmp_pair(const void *a, const void *b) {
    const int32_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] < y[1] ? -1 : x[1] > y[1];
}

/* checks both lists for lens[0..n) */
static void check_batch(const int *lens, int n, int causal) {
    int32_t *cu = malloc(sizeof *cu * (size_t)(n + 1));
    cu[0] = 0;
    int want = 0;
    for (int s = 0; s < n; s++) {
        cu[s + 1] = cu[s] + lens[s];
        want += (lens[s] + ENG_CU_ATTN_BM - 1) / ENG_CU_ATTN_BM;
    }
    const int mt = eng_cu_attn_max_tiles(cu[n] > 0 ? cu[n] : 1, n > 0 ? n : 1);
    int32_t *a = malloc(sizeof *a * 2 * (size_t)mt), *b = malloc(sizeof *b * 2 * (size_t)mt);
    const int na = eng_cu_attn_tiles(cu, n, a), nb = eng_cu_attn_tiles_heavy_first(cu, n, causal, b);
    CHECK_EQ_INT(na, want);
    CHECK_EQ_INT(nb, want);
    CHECK_MSG(want <= mt, "%d tiles over the bound %d", want, mt);
    /* sequence order, exactly */
    int k = 0, seq_ok = 1;
    for (int s = 0; s < n; s++)
        for (int q0 = 0; q0 < lens[s]; q0 += ENG_CU_ATTN_BM, k++) seq_ok &= a[2 * k] == s && a[2 * k + 1] == q0;
    CHECK_MSG(seq_ok, "sequence-order list wrong (%d sequences, causal %d)", n, causal);
    /* heaviest first: costs never rise, ties in sequence order */
    int order_ok = 1;
    for (int i = 1; i < nb; i++) {
        const int c0 = cost(lens[b[2 * i - 2]], b[2 * i - 1], causal), c1 = cost(lens[b[2 * i]], b[2 * i + 1], causal);
        order_ok &= c1 < c0 || (c1 == c0 && cmp_pair(b + 2 * i - 2, b + 2 * i) < 0);
    }
    CHECK_MSG(order_ok, "heaviest-first list out of order (%d sequences, causal %d)", n, causal);
    /* the same tiles */
    qsort(b, (size_t)nb, 2 * sizeof *b, cmp_pair);
    CHECK_MSG(nb == na && !memcmp(a, b, sizeof *a * 2 * (size_t)na), "heaviest first is not a permutation (causal %d)",
              causal);
    free(cu);
    free(a);
    free(b);
}

static void test_mixed_lengths(void) {
    const int mix[] = {1, 17, 64, 65, 2, 200, 63, 512, 5, 128, 129};
    for (int causal = 0; causal < 2; causal++) check_batch(mix, (int)(sizeof mix / sizeof mix[0]), causal);
    uint32_t x = 7;
    int lens[300];
    for (int i = 0; i < 300; i++) {
        x = x * 1664525u + 1013904223u;
        lens[i] = 1 + (int)((x >> 8) % 700u);
    }
    for (int causal = 0; causal < 2; causal++) check_batch(lens, 300, causal);
}

static void test_equal_bidirectional_keeps_order(void) {
    int lens[8], cu[9] = {0};
    int32_t a[2 * 64], b[2 * 64];
    for (int i = 0; i < 8; i++) {
        lens[i] = 128;
        cu[i + 1] = cu[i] + 128;
    }
    const int na = eng_cu_attn_tiles(cu, 8, a), nb = eng_cu_attn_tiles_heavy_first(cu, 8, 0, b);
    CHECK_EQ_INT(na, 16);
    CHECK(na == nb && !memcmp(a, b, sizeof a[0] * 2 * (size_t)na));
    /* causal: every sequence's second tile (two key tiles) comes first */
    eng_cu_attn_tiles_heavy_first(cu, 8, 1, b);
    CHECK(b[0] == 0 && b[1] == 64 && b[14] == 7 && b[15] == 64 && b[16] == 0 && b[17] == 0);
    check_batch(lens, 8, 1);
}

static void test_long_and_empty(void) {
    const int lens[] = {40000, 3, 33000};
    for (int causal = 0; causal < 2; causal++) check_batch(lens, 3, causal);
    int32_t cu[1] = {0}, t[2];
    CHECK_EQ_INT(eng_cu_attn_tiles_heavy_first(cu, 0, 1, t), 0);
    CHECK_EQ_INT(eng_cu_attn_tiles(cu, 0, t), 0);
}

TEST_MAIN(TEST(test_mixed_lengths), TEST(test_equal_bidirectional_keeps_order), TEST(test_long_and_empty))

/* test_cu_order: the serpentine launch order's state (src/engine/cuda/eng_cu_order.c),
 * which every launcher of the CUDA engine's saturated step asks -- on the
 * CPU, no GPU needed.
 *
 * - off (the one-query chain, labs): every launch walks forwards;
 * - on: reversible launches alternate backwards / forwards, starting
 *   backwards after eng_cu_order_begin (the embedding walked forwards);
 *   a launch that cannot walk backwards (cuBLASLt) counts as forwards, so
 *   the reversible launch after it walks backwards;
 * - begin resets the alternation, so every forward (eager run, capture)
 *   makes the same choices; the state is per thread.
 */
#include <pthread.h>
#include "cuda/eng_cu_order.h"
#include "posy_test.h"

static void test_off_walks_forwards(void) {
    eng_cu_order_begin(0);
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(eng_cu_order_take(1), 0);
    CHECK_EQ_INT(eng_cu_order_take(0), 0);
}

static void test_on_alternates(void) {
    eng_cu_order_begin(1);
    CHECK_EQ_INT(eng_cu_order_take(1), 1); /* after the embedding: backwards */
    CHECK_EQ_INT(eng_cu_order_take(1), 0);
    CHECK_EQ_INT(eng_cu_order_take(1), 1);
    CHECK_EQ_INT(eng_cu_order_take(0), 0); /* cuBLASLt: forwards ... */
    CHECK_EQ_INT(eng_cu_order_take(1), 1); /* ... so the next walks backwards */
    CHECK_EQ_INT(eng_cu_order_take(0), 0);
    CHECK_EQ_INT(eng_cu_order_take(0), 0);
    CHECK_EQ_INT(eng_cu_order_take(1), 1);
    eng_cu_order_begin(0);
}

/* a layer-like mix of launches, twice from begin: the same choices, each
 * reversible launch the opposite of the launch before it */
static void test_begin_repeats(void) {
    const int kinds[] = {0, 1, 1, 1, 0, 1, 0, 1, 1, 1, 0, 1};
    int first[12];
    eng_cu_order_begin(1);
    for (int i = 0; i < 12; i++) first[i] = eng_cu_order_take(kinds[i]);
    eng_cu_order_begin(1);
    for (int i = 0; i < 12; i++) CHECK_EQ_INT(eng_cu_order_take(kinds[i]), first[i]);
    for (int i = 0; i < 12; i++) CHECK_EQ_INT(first[i], kinds[i] ? (i == 0 || !first[i - 1]) : 0);
    eng_cu_order_begin(0);
}

static void *other_thread(void *arg) {
    int *got = arg; /* a new thread starts off: forwards whatever the main thread set */
    for (int i = 0; i < 3; i++) got[i] = eng_cu_order_take(1);
    return NULL;
}

static void test_per_thread(void) {
    eng_cu_order_begin(1);
    int got[3] = {-1, -1, -1};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, got) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(got[0] == 0 && got[1] == 0 && got[2] == 0);
    CHECK_EQ_INT(eng_cu_order_take(1), 1); /* this thread's state untouched */
    eng_cu_order_begin(0);
}

TEST_MAIN(TEST(test_off_walks_forwards), TEST(test_on_alternates), TEST(test_begin_repeats), TEST(test_per_thread))

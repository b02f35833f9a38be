/* test_gw_pool: the worker pool runs every task pushed, exactly once and
 * without waiting for the close, with and without busy-polling --
 * including tasks pushed while a worker spins, which wake nobody -- and
 * refuses pushes after closing.  (A push that never wakes a sleeping
 * worker leaves its task queued until the close: the check before the
 * close fails then.  Whether the unsignaled count also hands such tasks
 * on to other workers is parallelism, not checked here.)
 */
#include <stdatomic.h>
#include <time.h>

#include "gw_pool.h"
#include "posy_test.h"

#define N_PUSHERS 4
#define PER_PUSHER 5000

typedef struct job {
    gw_task task;
    atomic_int runs;
} job;

static job jobs[N_PUSHERS * PER_PUSHER];
static gw_pool *pool;

static void run_job(gw_task *t) {
    job *j = (job *)t;
    atomic_fetch_add(&j->runs, 1);
}

/* Bursts of 1..8 pushes with short gaps, so pushes land both on a busy
 * pool and on one whose only awake worker is spinning. */
static void *pusher(void *arg) {
    int base = (int)(long)arg * PER_PUSHER;
    for (int i = 0; i < PER_PUSHER; i++) {
        jobs[base + i].task.fn = run_job;
        if (gw_pool_push(pool, &jobs[base + i].task) != 0) return (void *)1;
        if (i % 8 == 7) {
            struct timespec ts = {0, 20000 * (i % 3)};   /* 0, 20 or 40 us */
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

static void run_case(int threads, int spin_us) {
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) atomic_store(&jobs[i].runs, 0);
    pool = gw_pool_open(threads, NULL);
    CHECK(pool != NULL);
    if (!pool) return;
    gw_pool_set_spin(pool, spin_us);
    pthread_t th[N_PUSHERS];
    for (long i = 0; i < N_PUSHERS; i++) pthread_create(&th[i], NULL, pusher, (void *)i);
    int refused = 0;
    for (int i = 0; i < N_PUSHERS; i++) {
        void *rv;
        pthread_join(th[i], &rv);
        refused += rv != NULL;
    }
    CHECK_EQ_INT(refused, 0);
    /* every task runs without the close's flush: a push that woke nobody
     * and was not handed on would sit in the queue with all workers asleep
     * (a liveness check with a generous deadline, not a speed one) */
    int ran = 0;
    for (int w = 0; w < 10000 && ran < N_PUSHERS * PER_PUSHER; w++) {
        ran = 0;
        for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) ran += atomic_load(&jobs[i].runs) > 0;
        if (ran < N_PUSHERS * PER_PUSHER) {
            struct timespec ts = {0, 1000000};
            nanosleep(&ts, NULL);
        }
    }
    CHECK_MSG(ran == N_PUSHERS * PER_PUSHER, "%d of %d tasks still queued 10 s after the last push (threads %d, "
              "spin %d us): a wake-up was lost", N_PUSHERS * PER_PUSHER - ran, N_PUSHERS * PER_PUSHER, threads, spin_us);
    gw_pool_close(pool);   /* runs what is queued, then joins */
    int bad = 0;
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) bad += atomic_load(&jobs[i].runs) != 1;
    CHECK_MSG(bad == 0, "%d of %d tasks did not run exactly once (threads %d, spin %d us)", bad,
              (int)(sizeof jobs / sizeof jobs[0]), threads, spin_us);
    static job late = {.task.fn = run_job};
    CHECK_EQ_INT(gw_pool_push(pool, &late.task), -1);
    gw_pool_free(pool);
}

static void test_sleeping(void) {
    run_case(1, 0);
    run_case(3, 0);
}

static void test_busy_polling(void) {
    run_case(1, 200);
    run_case(3, 200);
    run_case(3, 5);   /* windows that end mid-burst: the spinner gives up while pushes arrive */
}

TEST_MAIN(TEST(test_sleeping), TEST(test_busy_polling))

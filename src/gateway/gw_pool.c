/* gw_pool: see gw_pool.h. */
#include "gw_pool.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "posy_clock.h"

struct gw_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gw_task *head, *tail;
    atomic_int queued;           /* tasks in the list: what a spinner polls outside the lock */
    atomic_uint_fast64_t spin_ns;
    int spinning;                /* a worker is polling (then pushes need not signal) */
    int unsignaled;              /* queued tasks pushed without waking anyone */
    int closing;
    int live;                    /* threads not exited; 0: pushes are refused */
    int n;
    void (*on_exit)(void);
    pthread_t threads[];
};

/* With the lock held and the queue empty: become the spinner (if none)
 * and poll for up to spin_ns with the lock released.  Returns with the
 * lock held; the caller re-checks the queue. */
static void spin_for_task(gw_pool *p) {
    uint64_t ns = atomic_load_explicit(&p->spin_ns, memory_order_relaxed);
    if (!ns || p->spinning || p->closing) return;
    p->spinning = 1;
    pthread_mutex_unlock(&p->mu);
    uint64_t until = posy_now_ns() + ns;
    while (!atomic_load_explicit(&p->queued, memory_order_acquire) && posy_now_ns() < until) posy_spin_pause();
    pthread_mutex_lock(&p->mu);
    p->spinning = 0;
}

static void *pool_main(void *arg) {
    gw_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        if (!p->head) spin_for_task(p);
        while (!p->head && !p->closing) pthread_cond_wait(&p->cv, &p->mu);
        gw_task *t = p->head;
        if (!t) {
            p->live--;
            pthread_mutex_unlock(&p->mu);
            if (p->on_exit) p->on_exit();
            return NULL;
        }
        p->head = t->next;
        if (!p->head) p->tail = NULL;
        atomic_fetch_sub_explicit(&p->queued, 1, memory_order_relaxed);
        /* tasks pushed while a worker spun woke nobody: this one takes one,
         * and wakes another while such tasks are left */
        if (p->unsignaled > 0) p->unsignaled--;
        if (p->unsignaled > 0 && p->head) {
            p->unsignaled--;
            pthread_cond_signal(&p->cv);
        }
        pthread_mutex_unlock(&p->mu);
        t->next = NULL;
        t->fn(t);
    }
}

void gw_pool_set_spin(gw_pool *p, int us) {
    atomic_store_explicit(&p->spin_ns, us > 0 ? (uint64_t)us * 1000u : 0, memory_order_relaxed);
}

gw_pool *gw_pool_open(int n_threads, void (*on_exit)(void)) {
    if (n_threads < 1) n_threads = 1;
    gw_pool *p = calloc(1, sizeof *p + (size_t)n_threads * sizeof(pthread_t));
    if (!p) return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->on_exit = on_exit;
    pthread_mutex_lock(&p->mu);   /* the threads wait here until live is set */
    for (int i = 0; i < n_threads; i++) {
        if (pthread_create(&p->threads[i], NULL, pool_main, p) != 0) break;
        p->n++;
    }
    p->live = p->n;
    pthread_mutex_unlock(&p->mu);
    if (p->n == 0) {
        free(p);
        return NULL;
    }
    return p;
}

void gw_pool_close(gw_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    int was = p->closing;
    p->closing = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    if (was) return;
    for (int i = 0; i < p->n; i++) pthread_join(p->threads[i], NULL);
}

void gw_pool_free(gw_pool *p) {
    if (!p) return;
    gw_pool_close(p);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

int gw_pool_push(gw_pool *p, gw_task *t) {
    t->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->live == 0) {   /* closed: no thread would ever run it */
        pthread_mutex_unlock(&p->mu);
        return -1;
    }
    if (p->tail) p->tail->next = t; else p->head = t;
    p->tail = t;
    atomic_fetch_add_explicit(&p->queued, 1, memory_order_release);
    if (p->spinning) p->unsignaled++;   /* the spinner sees it without a wake-up */
    else pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

/* gw_pool: see gw_pool.h. */
#include "gw_pool.h"

#include <stdlib.h>

struct gw_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gw_task *head, *tail;
    int closing;
    int live;                    /* threads not exited; 0: pushes are refused */
    int n;
    void (*on_exit)(void);
    pthread_t threads[];
};

static void *pool_main(void *arg) {
    gw_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
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
        pthread_mutex_unlock(&p->mu);
        t->next = NULL;
        t->fn(t);
    }
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
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

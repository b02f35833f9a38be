/* gw_pool: the worker threads that parse JSON, tokenize and serialize, so
 * that event-loop threads only move bytes.  A plain FIFO of tasks under one
 * mutex: tasks are coarse (a whole request's parsing or serialization), so
 * the lock is not contended enough to matter.  Tasks are intrusive (the
 * caller embeds gw_task in its own struct): pushing never allocates.
 */
#ifndef GW_POOL_H
#define GW_POOL_H

#include <pthread.h>

typedef struct gw_task {
    void (*fn)(struct gw_task *t);
    struct gw_task *next;
} gw_task;

typedef struct gw_pool gw_pool;

/* `on_exit` (may be NULL) runs on each worker thread as it ends, to free
 * per-thread state. */
gw_pool *gw_pool_open(int n_threads, void (*on_exit)(void));
/* Runs every queued task, then joins the threads.  The pool stays
 * allocated (pushes after this are refused) until gw_pool_free. */
void gw_pool_close(gw_pool *p);
void gw_pool_free(gw_pool *p);
/* 0, or -1 once the pool is closed (the task will never run). */
int gw_pool_push(gw_pool *p, gw_task *t);
/* Busy-polling (0: off, the default): a worker that runs out of tasks
 * polls the queue for up to `us` microseconds before sleeping, one worker
 * at a time, so the next task does not wait for a sleeping thread to be
 * woken (futex wake, and the CPU's exit from an idle state: tens of
 * microseconds on an idle host, against a ~60 us GPU forward).  Costs one
 * busy core while requests keep coming. */
void gw_pool_set_spin(gw_pool *p, int us);

#endif

/* rpc_pool_int: state shared by the request side (rpc_pool.c) and the
 * membership/health side (rpc_pool_members.c) of rpc_pool.  One mutex
 * guards the worker list and all counters; everything done under it is a
 * few comparisons, never I/O. */
#ifndef RPC_POOL_INT_H
#define RPC_POOL_INT_H

#include "rpc_client.h"
#include "rpc_pool.h"

typedef enum {
    PW_NEW = 0,       /* not verified yet (or returning after a failure) */
    PW_OK = 1,        /* verified and healthy: takes chunks */
    PW_DOWN = 2,      /* failed a call or a check; re-verified before reuse */
    PW_BAD = 3,       /* serves another model: never used */
} pool_wstate;

typedef struct pool_worker {
    char addr[256];
    rpc_client *cl;
    pool_wstate state;
    int removed;                 /* gone from DNS; freed when idle */
    int from_dns;
    int seen;                    /* present in the latest DNS answer */
    int probing;                 /* a health or Info call in flight */
    int slow_probes;             /* health checks in a row that timed out */
    int calls;                   /* calls in flight (chunks + probes) */
    int64_t outstanding;         /* tokens sent and not answered */
    uint64_t chunks_ok, chunks_failed;
    int tok_dim;                 /* its InfoResponse.token_dim: 0 takes no token-state chunks */
    struct pool_worker *next;
} pool_worker;

struct rpc_pool {
    rpc_pool_opts o;             /* chunk_tokens/chunk_seqs may shrink to the workers' limits (under mu) */
    char fingerprint[64];
    char dns[256];
    rpc_loop loop;
    pthread_mutex_t mu;
    pthread_cond_t cv;           /* signalled when calls drain or a probe round ends */
    pool_worker *workers;
    struct pool_job *jobs;       /* requests in flight, for rpc_pool_cancel */
    int calls;                   /* all calls in flight */
    int stop;
    pthread_t health_thread;
    uint64_t retries, no_worker;
};

/* Membership: start the health thread; add a worker by address. */
int pool_members_start(rpc_pool *p, posy_err *err);
void pool_members_stop(rpc_pool *p);
pool_worker *pool_worker_add_locked(rpc_pool *p, const char *addr, int from_dns);
/* Mark a worker down after a failed call (under mu). */
void pool_worker_failed_locked(rpc_pool *p, pool_worker *w, const char *why);

#endif

/* rpc_internal: plumbing shared by the rpc server and client files.
 *
 * Completion-queue tags are always an rpc_op whose first member is the
 * function to run on completion, so one loop serves every kind of call and
 * each call object keeps its own state machine.  A call with several batches
 * in flight at once (a bidirectional stream sends while it receives) embeds
 * one rpc_op per batch.
 */
#ifndef RPC_INTERNAL_H
#define RPC_INTERNAL_H

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rpc_op rpc_op;
struct rpc_op {
    void (*fn)(rpc_op *op, int ok);
};

#define RPC_CONTAINER(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))

/* A completion queue and the thread that drains it. */
typedef struct rpc_loop {
    grpc_completion_queue *cq;
    pthread_t thread;
    int started;
} rpc_loop;

int rpc_loop_start(rpc_loop *l);
/* Shut the queue down once nothing more will be queued, drain, join. */
void rpc_loop_stop(rpc_loop *l);

/* grpc_init() once per process, never torn down (gRPC's own advice for
 * servers that live as long as the process). */
void rpc_grpc_init(void);

/* Flatten a received message into a malloc'd buffer (caller frees).
 * Returns 0, or -1 on allocation failure. */
int rpc_bb_read(grpc_byte_buffer *bb, uint8_t **out, size_t *len);
/* A byte buffer holding a copy of p[0..n). */
grpc_byte_buffer *rpc_bb_copy(const void *p, size_t n);

/* Message-size ceiling both sides agree on: big chunks of big vectors
 * exceed gRPC's default 4 MiB. */
#define RPC_MAX_MESSAGE (64 * 1024 * 1024)

static inline gpr_timespec rpc_deadline_ms(int64_t ms) {
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

#define RPC_METHOD_EMBED "/posy.v1.Embedder/Embed"
#define RPC_METHOD_STREAM "/posy.v1.Embedder/EmbedStream"
#define RPC_METHOD_INFO "/posy.v1.Embedder/Info"
#define RPC_METHOD_HEALTH "/grpc.health.v1.Health/Check"
#define RPC_METHOD_WATCH "/grpc.health.v1.Health/Watch"

#endif

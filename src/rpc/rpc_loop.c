/* rpc_loop: one thread draining one gRPC completion queue.
 *
 * Every tag is an rpc_op (rpc_internal.h); the loop only calls op->fn, so
 * it needs no knowledge of what kind of call completed.  Handlers run on
 * this thread and must not block: they decode, hand work to the backend or
 * start the next batch, and return.
 */
#include <grpc/byte_buffer_reader.h>
#include <stdlib.h>
#include <string.h>

#include "rpc.h"
#include "rpc_internal.h"

static pthread_once_t rpc_once = PTHREAD_ONCE_INIT;
static void rpc_init_once(void) { grpc_init(); }
void rpc_grpc_init(void) { pthread_once(&rpc_once, rpc_init_once); }

static void *rpc_loop_main(void *arg) {
    rpc_loop *l = arg;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(l->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) break;
        if (ev.type != GRPC_OP_COMPLETE) continue;
        rpc_op *op = ev.tag;
        op->fn(op, ev.success);
    }
    return NULL;
}

int rpc_loop_start(rpc_loop *l) {
    rpc_grpc_init();
    l->cq = grpc_completion_queue_create_for_next(NULL);
    if (!l->cq) return -1;
    if (pthread_create(&l->thread, NULL, rpc_loop_main, l) != 0) {
        grpc_completion_queue_destroy(l->cq);
        l->cq = NULL;
        return -1;
    }
    l->started = 1;
    return 0;
}

void rpc_loop_stop(rpc_loop *l) {
    if (!l->started) return;
    grpc_completion_queue_shutdown(l->cq);
    pthread_join(l->thread, NULL);
    grpc_completion_queue_destroy(l->cq);
    l->cq = NULL;
    l->started = 0;
}

int rpc_bb_read(grpc_byte_buffer *bb, uint8_t **out, size_t *len) {
    grpc_byte_buffer_reader r;
    *out = NULL;
    *len = 0;
    if (!grpc_byte_buffer_reader_init(&r, bb)) return -1;
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    size_t n = GRPC_SLICE_LENGTH(s);
    uint8_t *p = malloc(n ? n : 1);
    if (p) memcpy(p, GRPC_SLICE_START_PTR(s), n);
    grpc_slice_unref(s);
    if (!p) return -1;
    *out = p;
    *len = n;
    return 0;
}

grpc_byte_buffer *rpc_bb_copy(const void *p, size_t n) {
    grpc_slice s = grpc_slice_from_copied_buffer(p, n);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

int rpc_status_to_grpc(int st) {
    switch (st) {
    case POSY_OK: return GRPC_STATUS_OK;
    case POSY_E_INVALID:
    case POSY_E_TOO_LONG:
    case POSY_E_UNSUPPORTED: return GRPC_STATUS_INVALID_ARGUMENT;
    case POSY_E_BUSY:
    case POSY_E_NOMEM: return GRPC_STATUS_RESOURCE_EXHAUSTED;
    default: return GRPC_STATUS_INTERNAL;
    }
}

int rpc_status_from_grpc(int code) {
    switch (code) {
    case GRPC_STATUS_OK: return POSY_OK;
    case GRPC_STATUS_INVALID_ARGUMENT:
    case GRPC_STATUS_OUT_OF_RANGE: return POSY_E_INVALID;
    case GRPC_STATUS_RESOURCE_EXHAUSTED: return POSY_E_BUSY;
    case GRPC_STATUS_UNAVAILABLE:
    case GRPC_STATUS_DEADLINE_EXCEEDED:
    case GRPC_STATUS_CANCELLED: return POSY_E_IO;
    default: return POSY_E_INTERNAL;
    }
}

int rpc_max_vectors(int dim) {
    const long long room = RPC_MAX_MESSAGE - (1 << 20);   /* 1 MiB for the framing and the other fields */
    const long long n = room / ((long long)(dim > 0 ? dim : 1) * (long long)sizeof(float));
    return n < 1 ? 1 : n > INT32_MAX ? INT32_MAX : (int)n;
}

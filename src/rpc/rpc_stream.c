/* rpc_stream: EmbedStream, the bidirectional call.
 *
 * A client sends many EmbedRequests on one stream; each is validated and
 * submitted to the backend as soon as it arrives, and answered as soon as
 * the backend finishes it, so responses may overtake each other (they carry
 * request_id).  gRPC allows one batch of each kind in flight per call, so
 * the stream has its own rpc_op per direction: a receive loop, a send queue
 * drained one message at a time, and a final batch (status + close).
 *
 * The first invalid message ends the stream with INVALID_ARGUMENT (or
 * RESOURCE_EXHAUSTED when admission control refuses one) after the chunks
 * already accepted are answered.  `refs` counts batches in flight and
 * backend jobs; the stream is freed when the final batch is done, refs is
 * zero and the close op (below) has completed.  All state is under `mu`,
 * which is never held across a backend call (a backend may answer inline).
 *
 * Cancellation: a {receive close} op is posted when the stream begins, as
 * for unary calls (rpc_server.c), and completes early when the client
 * cancels the stream or its deadline passes.  Every message's backend job
 * handle is kept on the stream's list until the message is answered
 * (then released plainly); on cancellation the handles still held are
 * released with cancel set, so the scheduler drops the stream's queued
 * sequences instead of computing them for a client that is gone.  A job
 * whose submit is still returning when the cancellation comes is released
 * with cancel by the submit path (cancel_seen).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posy_log.h"
#include "rpc_server_int.h"

typedef struct sq_item {
    grpc_byte_buffer *bb;
    struct sq_item *next;
} sq_item;

struct stream_job;

typedef struct srv_stream {
    rpc_op op_md, op_recv, op_send, op_final, op_close;
    rpc_server *srv;
    grpc_call *call;
    pthread_mutex_t mu;
    int refs;
    grpc_byte_buffer *recv;
    sq_item *q_head, *q_tail;
    grpc_byte_buffer *sending;       /* message in flight, or NULL */
    int send_failed;
    int reading_done;
    int final_started, final_done;
    int cancelled;                   /* set by the close op: the client cancelled or timed out */
    int cancel_seen;                 /* the close op saw cancelled: handles are released with cancel */
    int closed;                      /* the close op is done with the stream */
    struct stream_job *jobs;         /* submitted and not yet answered */
    grpc_status_code code;
    char msg[256];
    grpc_slice status_msg;
} srv_stream;

typedef struct stream_job {
    srv_stream *st;
    rpc_req req;
    void *handle;                    /* the backend's handle, until released */
    int submitting;                  /* submit() has not returned yet: the submit path frees the job */
    int done;                        /* the backend answered */
    struct stream_job *prev, *next;  /* on st->jobs while not answered */
} stream_job;

static void st_unlink_locked(srv_stream *st, stream_job *j) {
    if (j->prev) j->prev->next = j->next;
    else if (st->jobs == j) st->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    j->prev = j->next = NULL;
}

static void st_free(srv_stream *st) {
    while (st->q_head) {
        sq_item *it = st->q_head;
        st->q_head = it->next;
        grpc_byte_buffer_destroy(it->bb);
        free(it);
    }
    if (st->final_started) grpc_slice_unref(st->status_msg);
    grpc_call_unref(st->call);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

/* Whether nothing refers to the stream any more (under mu). */
static int st_dead_locked(const srv_stream *st) {
    return st->refs == 0 && st->final_done && st->closed;
}

/* Let go of mu, freeing the stream if nothing refers to it any more (the
 * caller must not touch it afterwards). */
static void st_unlock(srv_stream *st) {
    const int dead = st_dead_locked(st);
    pthread_mutex_unlock(&st->mu);
    if (dead) st_free(st);
}

/* Drop one reference under mu; returns 1 when the caller must free. */
static int st_unref_locked(srv_stream *st) {
    --st->refs;
    return st_dead_locked(st);
}

static void st_batch_locked(srv_stream *st, grpc_op *ops, size_t n, rpc_op *op) {
    st->refs++;
    if (grpc_call_start_batch(st->call, ops, n, op, NULL) != GRPC_CALL_OK) {
        POSY_ERROR("rpc: stream batch refused by gRPC");
        st->refs--;
    }
}

/* Start the next send or, when everything is answered, the final status. */
static void st_kick_locked(srv_stream *st) {
    if (st->sending) return;
    if (st->q_head && !st->send_failed) {
        sq_item *it = st->q_head;
        st->q_head = it->next;
        if (!st->q_head) st->q_tail = NULL;
        st->sending = it->bb;
        free(it);
        grpc_op op;
        memset(&op, 0, sizeof op);
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = st->sending;
        st_batch_locked(st, &op, 1, &st->op_send);
        return;
    }
    if (!st->reading_done || st->refs > 0 || st->final_started) return;
    st->final_started = 1;
    st->status_msg = grpc_slice_from_copied_string(st->msg);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    op.data.send_status_from_server.status = st->code;
    op.data.send_status_from_server.status_details = &st->status_msg;
    st->refs++;
    if (grpc_call_start_batch(st->call, &op, 1, &st->op_final, NULL) != GRPC_CALL_OK) {
        st->refs--;
        st->final_done = 1;
    }
}

static void st_fail_locked(srv_stream *st, int posy_status, const char *msg) {
    if (st->code == GRPC_STATUS_OK) {
        st->code = (grpc_status_code)rpc_status_to_grpc(posy_status);
        snprintf(st->msg, sizeof st->msg, "%s", msg);
    }
    st->reading_done = 1;
}

static void st_job_done(void *arg, int status, const char *msg, const float *v, int n, int dim,
                        const float *tok, int tok_dim, uint64_t queue_us, uint64_t infer_us) {
    stream_job *j = arg;
    srv_stream *st = j->st;
    rpc_server *srv = st->srv;       /* outlives the stream, which may be freed once mu is let go */
    grpc_byte_buffer *bb = NULL;
    if (!status) {
        rpc_server_count(st->srv, &j->req.chunk);
        bb = rpc_resp_encode_tok(j->req.id, v, n, dim, j->req.chunk.token_states ? tok : NULL, j->req.chunk.n_tokens,
                                 tok_dim, queue_us, infer_us);
    }
    rpc_req_free(&j->req);
    sq_item *it = bb ? calloc(1, sizeof *it) : NULL;
    pthread_mutex_lock(&st->mu);
    j->done = 1;
    st_unlink_locked(st, j);
    void *handle = j->handle;        /* answered: the handle goes back plainly */
    j->handle = NULL;
    const int free_job = !j->submitting;
    if (status) st_fail_locked(st, status, msg ? msg : "engine failure");
    if (it) {
        it->bb = bb;
        if (st->q_tail) st->q_tail->next = it;
        else st->q_head = it;
        st->q_tail = it;
    } else if (bb) {
        grpc_byte_buffer_destroy(bb);
    }
    st->refs--;                      /* the job's reference */
    st_kick_locked(st);
    st_unlock(st);
    if (handle) srv->be.release(srv->be.ctx, handle, 0);
    if (free_job) free(j);
}

static void st_start_recv_locked(srv_stream *st) {
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &st->recv;
    st_batch_locked(st, &op, 1, &st->op_recv);
}

/* Decode, validate and submit one message; returns 0 to keep reading. */
static int st_submit(srv_stream *st, grpc_byte_buffer *bb) {
    posy_err err;
    posy_err_clear(&err);
    uint8_t *buf;
    size_t len;
    int rc = rpc_bb_read(bb, &buf, &len);
    grpc_byte_buffer_destroy(bb);
    stream_job *j = rc ? NULL : calloc(1, sizeof *j);
    if (!j) {
        free(buf);
        pthread_mutex_lock(&st->mu);
        st_fail_locked(st, POSY_E_NOMEM, "out of memory");
        pthread_mutex_unlock(&st->mu);
        return -1;
    }
    j->st = st;
    rc = rpc_req_decode(buf, len, &st->srv->info, &j->req, &err);
    free(buf);
    if (!rc) {
        pthread_mutex_lock(&st->mu);
        st->refs++;                  /* held by the job until st_job_done */
        j->submitting = 1;
        j->next = st->jobs;
        if (st->jobs) st->jobs->prev = j;
        st->jobs = j;
        pthread_mutex_unlock(&st->mu);
        void *handle = NULL;
        rc = st->srv->be.submit(st->srv->be.ctx, &j->req.chunk, st_job_done, j,
                                st->srv->be.release ? &handle : NULL, &err);
        if (!rc) {
            /* the backend may already have answered (then the job is ours to
             * free), or the client may already have cancelled the stream */
            pthread_mutex_lock(&st->mu);
            j->submitting = 0;
            const int done = j->done, cancel = st->cancel_seen;
            if (handle && !done && !cancel) {
                j->handle = handle;
                handle = NULL;
            }
            pthread_mutex_unlock(&st->mu);
            if (handle) st->srv->be.release(st->srv->be.ctx, handle, cancel && !done);
            if (done) free(j);
            return 0;
        }
        pthread_mutex_lock(&st->mu);
        st_unlink_locked(st, j);
        st->refs--;
        pthread_mutex_unlock(&st->mu);
    }
    rpc_req_free(&j->req);
    free(j);
    pthread_mutex_lock(&st->mu);
    st_fail_locked(st, err.code ? err.code : POSY_E_INTERNAL, err.msg[0] ? err.msg : "backend refused the chunk");
    pthread_mutex_unlock(&st->mu);
    return -1;
}

static void st_on_recv(rpc_op *op, int ok) {
    srv_stream *st = RPC_CONTAINER(op, srv_stream, op_recv);
    grpc_byte_buffer *bb = st->recv;
    st->recv = NULL;
    int more = ok && bb && st_submit(st, bb) == 0;
    if (!(ok && bb) && bb) grpc_byte_buffer_destroy(bb);
    pthread_mutex_lock(&st->mu);
    if (more && !st->reading_done) st_start_recv_locked(st);
    else st->reading_done = 1;
    int dead = st_unref_locked(st);
    if (!dead) st_kick_locked(st);
    dead = st_dead_locked(st);
    pthread_mutex_unlock(&st->mu);
    if (dead) st_free(st);
}

static void st_on_send(rpc_op *op, int ok) {
    srv_stream *st = RPC_CONTAINER(op, srv_stream, op_send);
    pthread_mutex_lock(&st->mu);
    grpc_byte_buffer_destroy(st->sending);
    st->sending = NULL;
    if (!ok) st->send_failed = 1;
    st->refs--;
    st_kick_locked(st);
    st_unlock(st);
}

static void st_on_md(rpc_op *op, int ok) {
    (void)ok;
    srv_stream *st = RPC_CONTAINER(op, srv_stream, op_md);
    pthread_mutex_lock(&st->mu);
    st->refs--;
    st_kick_locked(st);
    st_unlock(st);
}

static void st_on_final(rpc_op *op, int ok) {
    (void)ok;
    srv_stream *st = RPC_CONTAINER(op, srv_stream, op_final);
    pthread_mutex_lock(&st->mu);
    st->final_done = 1;
    st->refs--;
    st_unlock(st);
}

/* The call is over for gRPC: the status went out, or the client cancelled
 * or let its deadline pass.  On a cancellation the messages still waiting
 * for the backend are released with cancel, one at a time (a release may
 * answer inline, which unlinks and may free that job).  `closed` is set
 * last, so the stream cannot be freed while this runs. */
static void st_on_close(rpc_op *op, int ok) {
    (void)ok;
    srv_stream *st = RPC_CONTAINER(op, srv_stream, op_close);
    pthread_mutex_lock(&st->mu);
    const int cancel = st->cancel_seen = st->cancelled != 0;
    pthread_mutex_unlock(&st->mu);
    for (;;) {
        void *handle = NULL;
        pthread_mutex_lock(&st->mu);
        for (stream_job *j = cancel ? st->jobs : NULL; j && !handle; j = j->next) {
            handle = j->handle;
            j->handle = NULL;
        }
        pthread_mutex_unlock(&st->mu);
        if (!handle) break;
        st->srv->be.release(st->srv->be.ctx, handle, 1);
    }
    pthread_mutex_lock(&st->mu);
    st->closed = 1;
    st_unlock(st);
}

void rpc_stream_begin(rpc_server *s, grpc_call *call) {
    srv_stream *st = calloc(1, sizeof *st);
    if (!st) {
        grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL);
        grpc_call_unref(call);
        return;
    }
    st->srv = s;
    st->call = call;
    st->code = GRPC_STATUS_OK;
    st->op_md.fn = st_on_md;
    st->op_recv.fn = st_on_recv;
    st->op_send.fn = st_on_send;
    st->op_final.fn = st_on_final;
    st->op_close.fn = st_on_close;
    pthread_mutex_init(&st->mu, NULL);
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    pthread_mutex_lock(&st->mu);
    st_batch_locked(st, &op, 1, &st->op_md);
    st_start_recv_locked(st);
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &st->cancelled;
    if (grpc_call_start_batch(st->call, &op, 1, &st->op_close, NULL) != GRPC_CALL_OK) {
        POSY_ERROR("rpc: stream close op refused by gRPC");
        st->closed = 1;              /* no cancellation signal for this stream */
    }
    pthread_mutex_unlock(&st->mu);
}

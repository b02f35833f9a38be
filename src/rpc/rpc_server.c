/* rpc_server: the worker's gRPC server on the gRPC core C API.
 *
 * One completion queue and one thread (rpc_loop).  Calls are accepted with
 * grpc_server_request_call (generic, dispatch on the method name) with a
 * few requests always posted, so new calls never wait for a re-arm.  A
 * unary call is a three-step state machine on one rpc_op:
 *   accepted -> {send initial metadata, receive message}
 *            -> decode + validate -> backend submit (or an error status)
 *            -> {send message, send status} -> freed.
 * A second op, {receive close}, is posted at accept so the server learns
 * of a cancelled call (client cancel, deadline) while its chunk is still
 * queued and hands the backend's job back with cancel set: the scheduler
 * drops the queued sequences instead of computing them.  The call is
 * freed when both ops have completed (refs).
 * The backend answers from its own thread (the scheduler's step loop);
 * grpc_call_start_batch is safe from any thread, so the answer is sent
 * from there without a hop back to the loop.
 * Nothing on this path trusts the peer: every message is validated by
 * rpc_codec before the backend sees it, and every failure becomes a status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health.pb-c.h"
#include "posy_clock.h"
#include "posy_log.h"
#include "rpc_server_int.h"

#define RPC_POSTED_ACCEPTS 8

typedef struct srv_call {
    rpc_op op;
    rpc_server *srv;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_byte_buffer *recv;
    grpc_byte_buffer *send;
    grpc_slice status_msg;
    int has_status_msg;
    int cancelled;
    rpc_req req;
    rpc_op close_op;             /* {receive close}, posted at accept */
    int refs;                    /* ops outstanding: the unary flow + close_op (srv->mu) */
    int closed;                  /* close_op completed (srv->mu) */
    void *job;                   /* the backend's handle until released (srv->mu) */
} srv_call;

static void srv_accept(rpc_server *s);

static void srv_call_free(srv_call *c) {
    if (c->recv) grpc_byte_buffer_destroy(c->recv);
    if (c->send) grpc_byte_buffer_destroy(c->send);
    if (c->has_status_msg) grpc_slice_unref(c->status_msg);
    rpc_req_free(&c->req);
    if (c->call) grpc_call_unref(c->call);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->md);
    free(c);
}

static int srv_method_is(const srv_call *c, const char *name) {
    return !grpc_slice_str_cmp(c->details.method, name);
}

static void srv_call_unref(srv_call *c) {
    pthread_mutex_lock(&c->srv->mu);
    int last = --c->refs == 0;
    pthread_mutex_unlock(&c->srv->mu);
    if (last) srv_call_free(c);
}

static void srv_on_final(rpc_op *op, int ok) {
    (void)ok;
    srv_call_unref(RPC_CONTAINER(op, srv_call, op));
}

/* The call ended (answered, cancelled or past its deadline): give the
 * backend its job back, cancelled if the client is gone. */
static void srv_on_close(rpc_op *op, int ok) {
    (void)ok;
    srv_call *c = RPC_CONTAINER(op, srv_call, close_op);
    rpc_server *s = c->srv;
    pthread_mutex_lock(&s->mu);
    c->closed = 1;
    void *job = c->job;
    c->job = NULL;
    if (c->cancelled && srv_method_is(c, RPC_METHOD_EMBED)) s->info.cancelled++;
    pthread_mutex_unlock(&s->mu);
    if (job) s->be.release(s->be.ctx, job, c->cancelled);
    srv_call_unref(c);
}

/* Finish a unary call: optional message, then the status.  Takes `bb`. */
static void srv_respond(srv_call *c, grpc_status_code code, const char *msg, grpc_byte_buffer *bb) {
    grpc_op ops[3];
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    c->send = bb;
    if (bb) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = bb;
    }
    if (msg && *msg) {
        c->status_msg = grpc_slice_from_copied_string(msg);
        c->has_status_msg = 1;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n++].data.send_status_from_server.status_details = c->has_status_msg ? &c->status_msg : NULL;
    c->op.fn = srv_on_final;
    grpc_call_error e = grpc_call_start_batch(c->call, ops, n, &c->op, NULL);
    if (e != GRPC_CALL_OK) {
        POSY_ERROR("rpc: could not send a response (grpc_call_error %d)", (int)e);
        grpc_call_cancel(c->call, NULL);
        srv_call_unref(c);
    }
}

static void srv_respond_err(srv_call *c, int posy_status, const char *msg) {
    srv_respond(c, (grpc_status_code)rpc_status_to_grpc(posy_status), msg, NULL);
}

/* The backend's answer to a unary Embed. */
static void srv_embed_done(void *arg, int status, const char *msg, const float *v, int n, int dim,
                           const float *tok, int tok_dim, uint64_t queue_us, uint64_t infer_us) {
    srv_call *c = arg;
    rpc_server *s = c->srv;
    if (status) {
        srv_respond_err(c, status, msg ? msg : "engine failure");
    } else if (n != c->req.chunk.n_seqs || (c->req.chunk.token_states && !tok)) {
        srv_respond_err(c, POSY_E_INTERNAL, "backend answered the wrong number of vectors");
    } else {
        rpc_server_count(s, &c->req.chunk);
        grpc_byte_buffer *bb = rpc_resp_encode_tok(c->req.id, v, n, dim, c->req.chunk.token_states ? tok : NULL,
                                                   c->req.chunk.n_tokens, tok_dim, queue_us, infer_us);
        rpc_req_free(&c->req);
        srv_respond(c, GRPC_STATUS_OK, NULL, bb);
    }
    /* A cancelled call is over for gRPC before its chunk's running batch
     * returns; rpc_server_stop waits for this count so that the answer's
     * ops never start on a completion queue already shut down. */
    pthread_mutex_lock(&s->mu);
    if (--s->embeds_active == 0) pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void srv_embed(srv_call *c, const uint8_t *buf, size_t len) {
    posy_err err;
    posy_err_clear(&err);
    rpc_server *s = c->srv;
    if (rpc_req_decode(buf, len, &s->info, &c->req, &err) != 0) {
        srv_respond_err(c, err.code, err.msg);
        return;
    }
    void *job = NULL;
    pthread_mutex_lock(&s->mu);
    s->embeds_active++;
    pthread_mutex_unlock(&s->mu);
    if (s->be.submit(s->be.ctx, &c->req.chunk, srv_embed_done, c, s->be.release ? &job : NULL, &err) != 0) {
        pthread_mutex_lock(&s->mu);
        s->embeds_active--;
        pthread_mutex_unlock(&s->mu);
        srv_respond_err(c, err.code ? err.code : POSY_E_INTERNAL, err.msg[0] ? err.msg : "backend refused the chunk");
        return;
    }
    if (!job) return;
    /* close_op runs on this thread too, so c is alive here; if it already
     * ran (the client gave up before the chunk was queued), release now. */
    pthread_mutex_lock(&s->mu);
    int closed = c->closed, cancelled = c->cancelled;
    if (!closed) c->job = job;
    pthread_mutex_unlock(&s->mu);
    if (closed) s->be.release(s->be.ctx, job, cancelled);
}

static void srv_health(srv_call *c, const uint8_t *buf, size_t len) {
    Grpc__Health__V1__HealthCheckRequest *m = grpc__health__v1__health_check_request__unpack(NULL, len, buf);
    if (!m) {
        srv_respond(c, GRPC_STATUS_INVALID_ARGUMENT, "malformed HealthCheckRequest", NULL);
        return;
    }
    int known = !m->service[0] || !strcmp(m->service, "posy.v1.Embedder");
    grpc__health__v1__health_check_request__free_unpacked(m, NULL);
    if (!known) {
        srv_respond(c, GRPC_STATUS_NOT_FOUND, "unknown service", NULL);
        return;
    }
    pthread_mutex_lock(&c->srv->mu);
    int serving = c->srv->serving;
    pthread_mutex_unlock(&c->srv->mu);
    srv_respond(c, GRPC_STATUS_OK, NULL, rpc_health_encode(serving));
}

static void srv_info(srv_call *c) {
    uint64_t run = 0, dropped = 0;
    if (c->srv->be.counters) c->srv->be.counters(c->srv->be.ctx, &run, &dropped);
    pthread_mutex_lock(&c->srv->mu);
    c->srv->info.seqs_run = run;
    c->srv->info.seqs_dropped = dropped;
    grpc_byte_buffer *bb = rpc_info_encode(&c->srv->info);
    pthread_mutex_unlock(&c->srv->mu);
    srv_respond(c, GRPC_STATUS_OK, NULL, bb);
}


static void srv_on_recv(rpc_op *op, int ok) {
    srv_call *c = RPC_CONTAINER(op, srv_call, op);
    if (!ok || !c->recv) {
        srv_respond(c, GRPC_STATUS_INVALID_ARGUMENT, "no request message", NULL);
        return;
    }
    uint8_t *buf;
    size_t len;
    int rc = rpc_bb_read(c->recv, &buf, &len);
    grpc_byte_buffer_destroy(c->recv);
    c->recv = NULL;
    if (rc) {
        srv_respond(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory reading the request", NULL);
        return;
    }
    if (srv_method_is(c, RPC_METHOD_EMBED)) srv_embed(c, buf, len);
    else if (srv_method_is(c, RPC_METHOD_HEALTH)) srv_health(c, buf, len);
    else if (srv_method_is(c, RPC_METHOD_INFO)) srv_info(c);
    else if (srv_method_is(c, RPC_METHOD_WATCH))
        srv_respond(c, GRPC_STATUS_UNIMPLEMENTED, "Health/Watch is not implemented; use Check", NULL);
    else srv_respond(c, GRPC_STATUS_UNIMPLEMENTED, "unknown method", NULL);
    free(buf);
}

static void srv_on_accept(rpc_op *op, int ok) {
    srv_call *c = RPC_CONTAINER(op, srv_call, op);
    rpc_server *s = c->srv;
    if (!ok) {                       /* server shutting down */
        srv_call_free(c);
        return;
    }
    srv_accept(s);
    if (srv_method_is(c, RPC_METHOD_STREAM)) {
        rpc_stream_begin(s, c->call);
        c->call = NULL;
        srv_call_free(c);
        return;
    }
    grpc_op close;
    memset(&close, 0, sizeof close);
    close.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    close.data.recv_close_on_server.cancelled = &c->cancelled;
    c->close_op.fn = srv_on_close;
    if (grpc_call_start_batch(c->call, &close, 1, &c->close_op, NULL) != GRPC_CALL_OK) {
        srv_call_free(c);
        return;
    }
    c->refs = 2;
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &c->recv;
    c->op.fn = srv_on_recv;
    if (grpc_call_start_batch(c->call, ops, 2, &c->op, NULL) != GRPC_CALL_OK) {
        grpc_call_cancel(c->call, NULL);
        srv_call_unref(c);
    }
}

static void srv_accept(rpc_server *s) {
    pthread_mutex_lock(&s->mu);
    int stop = s->shutting_down;
    pthread_mutex_unlock(&s->mu);
    if (stop) return;
    srv_call *c = calloc(1, sizeof *c);
    if (!c) {
        POSY_ERROR("rpc: out of memory accepting a call");
        return;
    }
    c->srv = s;
    c->op.fn = srv_on_accept;
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->md);
    if (grpc_server_request_call(s->server, &c->call, &c->details, &c->md, s->loop.cq, s->loop.cq, &c->op) !=
        GRPC_CALL_OK)
        srv_call_free(c);
}

void rpc_server_count(rpc_server *s, const rpc_chunk *c) {
    pthread_mutex_lock(&s->mu);
    s->info.requests++;
    s->info.sequences += (uint64_t)c->n_seqs;
    s->info.tokens += (uint64_t)c->n_tokens;
    pthread_mutex_unlock(&s->mu);
}

static void srv_on_shutdown(rpc_op *op, int ok) {
    (void)ok;
    rpc_server *s = RPC_CONTAINER(op, rpc_server, shutdown_op);
    pthread_mutex_lock(&s->mu);
    s->shutdown_done = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

rpc_server *rpc_server_start(const char *listen, const rpc_info *info, const rpc_backend *be, posy_err *err) {
    rpc_server *s = calloc(1, sizeof *s);
    if (!s) {
        posy_err_set(err, POSY_E_NOMEM, "out of memory");
        return NULL;
    }
    s->info = *info;
    s->be = *be;
    s->serving = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (rpc_loop_start(&s->loop) != 0) {
        posy_err_set(err, POSY_E_INTERNAL, "cannot start the gRPC completion queue thread");
        free(s);
        return NULL;
    }
    grpc_arg args[2] = {
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, .value.integer = RPC_MAX_MESSAGE},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, .value.integer = RPC_MAX_MESSAGE},
    };
    grpc_channel_args cargs = {.num_args = 2, .args = args};
    s->server = grpc_server_create(&cargs, NULL);
    grpc_server_register_completion_queue(s->server, s->loop.cq, NULL);
    grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
    s->port = grpc_server_add_http2_port(s->server, listen, creds);
    grpc_server_credentials_release(creds);
    if (s->port <= 0) {
        posy_err_set(err, POSY_E_IO, "--listen %s: cannot bind (address in use or not host:port?)", listen);
        grpc_server_destroy(s->server);
        rpc_loop_stop(&s->loop);
        free(s);
        return NULL;
    }
    grpc_server_start(s->server);
    for (int i = 0; i < RPC_POSTED_ACCEPTS; i++) srv_accept(s);
    return s;
}

int rpc_server_port(const rpc_server *s) { return s->port; }

void rpc_server_set_serving(rpc_server *s, int serving) {
    pthread_mutex_lock(&s->mu);
    s->serving = serving;
    pthread_mutex_unlock(&s->mu);
}

static int srv_wait_shutdown(rpc_server *s, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    while (!s->shutdown_done)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0) break;
    int done = s->shutdown_done;
    pthread_mutex_unlock(&s->mu);
    return done;
}

void rpc_server_stop(rpc_server *s, int grace_ms) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->shutting_down = 1;
    s->serving = 0;
    pthread_mutex_unlock(&s->mu);
    s->shutdown_op.fn = srv_on_shutdown;
    grpc_server_shutdown_and_notify(s->server, s->loop.cq, &s->shutdown_op);
    if (!srv_wait_shutdown(s, grace_ms)) {
        POSY_WARN("rpc: calls still running after %d ms; cancelling them", grace_ms);
        grpc_server_cancel_all_calls(s->server);
        while (!srv_wait_shutdown(s, 1000)) {}
    }
    pthread_mutex_lock(&s->mu);
    while (s->embeds_active > 0) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    grpc_server_destroy(s->server);
    rpc_loop_stop(&s->loop);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* rpc_client: see rpc_client.h.  A unary call is one batch of six ops (send
 * metadata, message, half-close; receive metadata, message, status) and one
 * completion, after which the callback runs on the loop thread. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_client.h"

struct rpc_client {
    grpc_channel *ch;
    rpc_loop *loop;
    char target[256];
};

typedef struct cli_call {
    rpc_op op;
    grpc_call *call;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array md_initial, md_trailing;
    grpc_status_code status;
    grpc_slice details;
    rpc_unary_cb cb;
    void *arg;
} cli_call;

rpc_client *rpc_client_open(const char *target, rpc_loop *loop) {
    rpc_client *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    snprintf(c->target, sizeof c->target, "%s", target);
    c->loop = loop;
    grpc_arg args[] = {
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, .value.integer = RPC_MAX_MESSAGE},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, .value.integer = RPC_MAX_MESSAGE},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, .value.integer = 100},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, .value.integer = 100},
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, .value.integer = 1000},
        /* Each worker address gets its own channel and its own connection. */
        {.type = GRPC_ARG_INTEGER, .key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, .value.integer = 1},
    };
    grpc_channel_args cargs = {.num_args = sizeof args / sizeof args[0], .args = args};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    c->ch = grpc_channel_create(target, creds, &cargs);
    grpc_channel_credentials_release(creds);
    if (!c->ch) {
        free(c);
        return NULL;
    }
    return c;
}

void rpc_client_close(rpc_client *c) {
    if (!c) return;
    grpc_channel_destroy(c->ch);
    free(c);
}

const char *rpc_client_target(const rpc_client *c) { return c->target; }

static void cli_call_free(cli_call *k) {
    if (k->send) grpc_byte_buffer_destroy(k->send);
    if (k->recv) grpc_byte_buffer_destroy(k->recv);
    grpc_metadata_array_destroy(&k->md_initial);
    grpc_metadata_array_destroy(&k->md_trailing);
    grpc_slice_unref(k->details);
    if (k->call) grpc_call_unref(k->call);
    free(k);
}

static void cli_on_done(rpc_op *op, int ok) {
    cli_call *k = RPC_CONTAINER(op, cli_call, op);
    char details[512];
    size_t dl = GRPC_SLICE_LENGTH(k->details);
    if (dl >= sizeof details) dl = sizeof details - 1;
    memcpy(details, GRPC_SLICE_START_PTR(k->details), dl);
    details[dl] = '\0';
    int code = ok ? (int)k->status : GRPC_STATUS_UNAVAILABLE;
    uint8_t *buf = NULL;
    size_t len = 0;
    if (code == GRPC_STATUS_OK) {
        if (!k->recv) {
            code = GRPC_STATUS_INTERNAL;
            snprintf(details, sizeof details, "worker answered OK without a message");
        } else if (rpc_bb_read(k->recv, &buf, &len) != 0) {
            code = GRPC_STATUS_RESOURCE_EXHAUSTED;
            snprintf(details, sizeof details, "out of memory reading the response");
        }
    }
    k->cb(k->arg, code, details, buf, len);
    free(buf);
    cli_call_free(k);
}

int rpc_client_call(rpc_client *c, const char *method, grpc_byte_buffer *req, int timeout_ms, rpc_unary_cb cb,
                    void *arg, grpc_call **call_out) {
    cli_call *k = calloc(1, sizeof *k);
    if (!k) {
        grpc_byte_buffer_destroy(req);
        return -1;
    }
    k->op.fn = cli_on_done;
    k->send = req;
    k->cb = cb;
    k->arg = arg;
    k->details = grpc_empty_slice();
    grpc_metadata_array_init(&k->md_initial);
    grpc_metadata_array_init(&k->md_trailing);
    grpc_slice m = grpc_slice_from_static_string(method);
    k->call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->loop->cq, m, NULL,
                                       rpc_deadline_ms(timeout_ms), NULL);
    if (!k->call) {
        cli_call_free(k);
        return -1;
    }
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = k->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &k->md_initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &k->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &k->md_trailing;
    ops[5].data.recv_status_on_client.status = &k->status;
    ops[5].data.recv_status_on_client.status_details = &k->details;
    grpc_call *call = k->call;
    if (call_out) grpc_call_ref(call);      /* k may be freed once the batch starts */
    if (grpc_call_start_batch(k->call, ops, 6, &k->op, NULL) != GRPC_CALL_OK) {
        if (call_out) grpc_call_unref(call);
        cli_call_free(k);
        return -1;
    }
    if (call_out) *call_out = call;
    return 0;
}

/* rpc_server_int: the server state shared by the unary handlers
 * (rpc_server.c) and the bidirectional stream (rpc_stream.c). */
#ifndef RPC_SERVER_INT_H
#define RPC_SERVER_INT_H

#include "rpc.h"
#include "rpc_codec.h"
#include "rpc_internal.h"

struct rpc_server {
    grpc_server *server;
    rpc_loop loop;
    rpc_backend be;
    pthread_mutex_t mu;          /* guards info counters, serving, shutdown */
    pthread_cond_t cv;
    rpc_info info;
    int serving;
    int port;
    int shutting_down;
    int shutdown_done;
    int embeds_active;           /* unary chunks submitted and not yet answered by the backend */
    rpc_op shutdown_op;
};

/* Count one answered chunk in the Info counters. */
void rpc_server_count(rpc_server *s, const rpc_chunk *c);

/* Take over an accepted EmbedStream call (the stream owns `call` now). */
void rpc_stream_begin(rpc_server *s, grpc_call *call);

#endif

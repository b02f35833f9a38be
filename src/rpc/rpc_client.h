/* rpc_client: asynchronous unary calls to one worker.
 *
 * One gRPC channel per worker address; calls complete on a shared
 * rpc_loop thread and report through a callback with the gRPC status and
 * the flattened response bytes.  Channels reconnect on their own; the
 * reconnect backoff is capped at one second so that a restarted worker is
 * found again quickly (gRPC's default cap is two minutes).
 */
#ifndef RPC_CLIENT_H
#define RPC_CLIENT_H

#include "rpc_internal.h"

typedef struct rpc_client rpc_client;

/* grpc_code is a grpc_status_code; buf/len is the response message (NULL
 * when the call failed), valid during the callback. */
typedef void (*rpc_unary_cb)(void *arg, int grpc_code, const char *details, const uint8_t *buf, size_t len);

rpc_client *rpc_client_open(const char *target, rpc_loop *loop);
void rpc_client_close(rpc_client *c);
const char *rpc_client_target(const rpc_client *c);

/* Start a call of `method` with request `req` (taken).  Returns 0 and calls
 * cb exactly once later, or -1 (cb never called).  With call_out non-NULL,
 * *call_out gets a reference to the call (for grpc_call_cancel; the caller
 * drops it with grpc_call_unref). */
int rpc_client_call(rpc_client *c, const char *method, grpc_byte_buffer *req, int timeout_ms, rpc_unary_cb cb,
                    void *arg, grpc_call **call_out);

#endif

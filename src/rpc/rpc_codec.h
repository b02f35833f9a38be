/* rpc_codec: protobuf-c messages <-> posy's structs, with validation.
 *
 * Everything that arrives off the wire passes through here before anyone
 * else sees it: a decoded EmbedRequest is checked for shape (lengths sum to
 * the ids, no empty sequence, type ids absent or one per id, pool skips
 * absent or one per sequence within [0, length)) and against
 * the model's limits (ids in vocabulary, sequences within max_seq_len,
 * chunk within the worker's chunk limits).  Failures are POSY_E_INVALID /
 * POSY_E_TOO_LONG with a message naming the field, which the server answers
 * as INVALID_ARGUMENT.
 */
#ifndef RPC_CODEC_H
#define RPC_CODEC_H

#include <grpc/grpc.h>
#include <stddef.h>
#include <stdint.h>

#include "posy.pb-c.h"
#include "rpc.h"

/* A decoded, validated request; `chunk` points into `msg`. */
typedef struct rpc_req {
    Posy__V1__EmbedRequest *msg;
    uint64_t id;
    rpc_chunk chunk;
} rpc_req;

int rpc_req_decode(const uint8_t *buf, size_t len, const rpc_info *lim, rpc_req *out, posy_err *err);
void rpc_req_free(rpc_req *r);
grpc_byte_buffer *rpc_req_encode(const rpc_chunk *c, uint64_t id);

grpc_byte_buffer *rpc_resp_encode(uint64_t id, const float *v, int n, int dim, uint64_t queue_us,
                                  uint64_t infer_us);
/* The same with token states (tok: n_tok * tok_dim floats; NULL: none). */
grpc_byte_buffer *rpc_resp_encode_tok(uint64_t id, const float *v, int n, int dim, const float *tok, int n_tok,
                                      int tok_dim, uint64_t queue_us, uint64_t infer_us);
/* Decode a response expected to hold n vectors of dim floats into out. */
int rpc_resp_decode(const uint8_t *buf, size_t len, int n, int dim, float *out, uint64_t *queue_us,
                    uint64_t *infer_us, posy_err *err);
/* The same, and when tok_out is not NULL, n_tok token states of tok_dim
 * floats into it (a response without them, or of another size, fails). */
int rpc_resp_decode_tok(const uint8_t *buf, size_t len, int n, int dim, float *out, int n_tok, int tok_dim,
                        float *tok_out, uint64_t *queue_us, uint64_t *infer_us, posy_err *err);

grpc_byte_buffer *rpc_info_encode(const rpc_info *info);
int rpc_info_decode(const uint8_t *buf, size_t len, rpc_info *out, posy_err *err);

grpc_byte_buffer *rpc_health_encode(int serving);
/* Returns 1 SERVING, 0 anything else, -1 undecodable. */
int rpc_health_decode(const uint8_t *buf, size_t len);

#endif

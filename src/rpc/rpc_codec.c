/* rpc_codec: see rpc_codec.h.  Vectors travel as little-endian float32
 * bytes; posy only builds on little-endian hosts (checked below), so the
 * bytes are the floats and are copied without conversion. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "health.pb-c.h"
#include "rpc_codec.h"
#include "rpc_internal.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "posy's wire format assumes a little-endian host");

int rpc_answer_fits(int n, int dim, long long n_tokens, int tok_dim) {
    const long long room = RPC_MAX_MESSAGE - (1 << 20);   /* as rpc_max_vectors: 1 MiB for the framing */
    return ((long long)n * dim + n_tokens * tok_dim) * (long long)sizeof(float) <= room;
}

static int rpc_req_check(const Posy__V1__EmbedRequest *m, const rpc_info *lim, posy_err *err) {
    if (m->n_lengths == 0) return posy_err_set(err, POSY_E_INVALID, "empty chunk: no sequences (lengths is empty)");
    if (m->n_type_ids != 0 && m->n_type_ids != m->n_ids)
        return posy_err_set(err, POSY_E_INVALID, "type_ids has %zu entries, expected 0 or %zu (one per id)",
                            m->n_type_ids, m->n_ids);
    if (m->n_pool_skip != 0 && m->n_pool_skip != m->n_lengths)
        return posy_err_set(err, POSY_E_INVALID, "pool_skip has %zu entries, expected 0 or %zu (one per sequence)",
                            m->n_pool_skip, m->n_lengths);
    if (lim->max_chunk_seqs > 0 && m->n_lengths > (size_t)lim->max_chunk_seqs)
        return posy_err_set(err, POSY_E_TOO_LONG, "chunk has %zu sequences, this worker accepts at most %d",
                            m->n_lengths, lim->max_chunk_seqs);
    if (lim->max_chunk_tokens > 0 && m->n_ids > (size_t)lim->max_chunk_tokens)
        return posy_err_set(err, POSY_E_TOO_LONG, "chunk has %zu tokens, this worker accepts at most %d",
                            m->n_ids, lim->max_chunk_tokens);
    uint64_t sum = 0;
    for (size_t i = 0; i < m->n_lengths; i++) {
        int32_t l = m->lengths[i];
        /* a static embedding model embeds an empty text (zeros): its sequences may have no tokens */
        if (l < 0 || (l == 0 && strcmp(lim->arch, "static")))
            return posy_err_set(err, POSY_E_INVALID, "lengths[%zu] = %d: every sequence needs at least one token", i, l);
        if (lim->max_seq_len > 0 && l > lim->max_seq_len)
            return posy_err_set(err, POSY_E_TOO_LONG, "lengths[%zu] = %d exceeds the model's max_seq_len %d", i, l,
                                lim->max_seq_len);
        if (m->n_pool_skip && (m->pool_skip[i] < 0 || m->pool_skip[i] >= (l > 0 ? l : 1)))
            return posy_err_set(err, POSY_E_INVALID, "pool_skip[%zu] = %d is outside [0, %d): a sequence must keep "
                                "at least one token to pool", i, m->pool_skip[i], l);
        sum += (uint64_t)l;
    }
    if (sum != m->n_ids)
        return posy_err_set(err, POSY_E_INVALID, "lengths sum to %llu but ids has %zu entries",
                            (unsigned long long)sum, m->n_ids);
    if (m->token_states && !lim->tok_dim)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "token_states: this worker's model gives no token states (a "
                            "static embedding, SPLADE, classifier or reranker model)");
    if (m->token_states && !rpc_answer_fits((int)m->n_lengths, lim->dim, (long long)m->n_ids, lim->tok_dim))
        return posy_err_set(err, POSY_E_TOO_LONG, "token_states: %zu tokens of %d floats each do not fit in one "
                            "answer; send smaller chunks", m->n_ids, lim->tok_dim);
    for (size_t i = 0; i < m->n_ids; i++)
        if (m->ids[i] < 0 || (lim->vocab > 0 && m->ids[i] >= lim->vocab))
            return posy_err_set(err, POSY_E_INVALID, "ids[%zu] = %d is out of the vocabulary [0, %d)", i, m->ids[i],
                                lim->vocab);
    int ntypes = lim->type_vocab > 0 ? lim->type_vocab : 1;
    for (size_t i = 0; i < m->n_type_ids; i++)
        if (m->type_ids[i] < 0 || m->type_ids[i] >= ntypes)
            return posy_err_set(err, POSY_E_INVALID, "type_ids[%zu] = %d is out of range [0, %d)", i, m->type_ids[i],
                                ntypes);
    return 0;
}

int rpc_req_decode(const uint8_t *buf, size_t len, const rpc_info *lim, rpc_req *out, posy_err *err) {
    memset(out, 0, sizeof *out);
    Posy__V1__EmbedRequest *m = posy__v1__embed_request__unpack(NULL, len, buf);
    if (!m) return posy_err_set(err, POSY_E_INVALID, "malformed EmbedRequest (%zu bytes are not a valid posy.v1.EmbedRequest)", len);
    int rc = rpc_req_check(m, lim, err);
    if (rc) {
        posy__v1__embed_request__free_unpacked(m, NULL);
        return rc;
    }
    out->msg = m;
    out->id = m->request_id;
    out->chunk.n_seqs = (int)m->n_lengths;
    out->chunk.n_tokens = (int)m->n_ids;
    out->chunk.ids = m->ids;
    out->chunk.lengths = m->lengths;
    out->chunk.type_ids = m->n_type_ids ? m->type_ids : NULL;
    out->chunk.pool_skip = m->n_pool_skip ? m->pool_skip : NULL;
    out->chunk.token_states = m->token_states;
    return 0;
}

void rpc_req_free(rpc_req *r) {
    if (r->msg) posy__v1__embed_request__free_unpacked(r->msg, NULL);
    r->msg = NULL;
}

/* Pack a message straight into a gRPC slice (one copy). */
static grpc_byte_buffer *rpc_pack(const ProtobufCMessage *m) {
    size_t n = protobuf_c_message_get_packed_size(m);
    grpc_slice s = grpc_slice_malloc(n);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

grpc_byte_buffer *rpc_req_encode(const rpc_chunk *c, uint64_t id) {
    Posy__V1__EmbedRequest m = POSY__V1__EMBED_REQUEST__INIT;
    m.request_id = id;
    m.n_ids = (size_t)c->n_tokens;
    m.ids = (int32_t *)c->ids;
    m.n_lengths = (size_t)c->n_seqs;
    m.lengths = (int32_t *)c->lengths;
    if (c->type_ids) {
        m.n_type_ids = (size_t)c->n_tokens;
        m.type_ids = (int32_t *)c->type_ids;
    }
    for (int i = 0; c->pool_skip && i < c->n_seqs; i++)
        if (c->pool_skip[i]) {   /* all zeros travel as no field */
            m.n_pool_skip = (size_t)c->n_seqs;
            m.pool_skip = (int32_t *)c->pool_skip;
            break;
        }
    m.token_states = c->token_states != 0;
    return rpc_pack(&m.base);
}

grpc_byte_buffer *rpc_resp_encode(uint64_t id, const float *v, int n, int dim, uint64_t queue_us,
                                  uint64_t infer_us) {
    return rpc_resp_encode_tok(id, v, n, dim, NULL, 0, 0, queue_us, infer_us);
}

grpc_byte_buffer *rpc_resp_encode_tok(uint64_t id, const float *v, int n, int dim, const float *tok, int n_tok,
                                      int tok_dim, uint64_t queue_us, uint64_t infer_us) {
    Posy__V1__EmbedResponse m = POSY__V1__EMBED_RESPONSE__INIT;
    if (tok) {
        m.token_dim = (uint32_t)tok_dim;
        m.token_states.len = (size_t)n_tok * (size_t)tok_dim * sizeof(float);
        m.token_states.data = (uint8_t *)tok;
    }
    m.request_id = id;
    m.dim = (uint32_t)dim;
    m.count = (uint32_t)n;
    m.vectors.len = (size_t)n * (size_t)dim * sizeof(float);
    m.vectors.data = (uint8_t *)v;
    m.queue_time_us = queue_us;
    m.inference_time_us = infer_us;
    return rpc_pack(&m.base);
}

int rpc_resp_decode(const uint8_t *buf, size_t len, int n, int dim, float *out, uint64_t *queue_us,
                    uint64_t *infer_us, posy_err *err) {
    return rpc_resp_decode_tok(buf, len, n, dim, out, 0, 0, NULL, queue_us, infer_us, err);
}

int rpc_resp_decode_tok(const uint8_t *buf, size_t len, int n, int dim, float *out, int n_tok, int tok_dim,
                        float *tok_out, uint64_t *queue_us, uint64_t *infer_us, posy_err *err) {
    Posy__V1__EmbedResponse *m = posy__v1__embed_response__unpack(NULL, len, buf);
    if (!m) return posy_err_set(err, POSY_E_INTERNAL, "worker sent a malformed EmbedResponse");
    int rc = 0;
    size_t want = (size_t)n * (size_t)dim * sizeof(float);
    if (m->count != (uint32_t)n || m->dim != (uint32_t)dim || m->vectors.len != want)
        rc = posy_err_set(err, POSY_E_INTERNAL, "worker answered %u vectors of dim %u (%zu bytes), expected %d of dim %d",
                          m->count, m->dim, m->vectors.len, n, dim);
    else if (tok_out && (m->token_dim != (uint32_t)tok_dim ||
                         m->token_states.len != (size_t)n_tok * (size_t)tok_dim * sizeof(float)))
        rc = posy_err_set(err, POSY_E_INTERNAL, "worker answered %zu bytes of token states of dim %u, expected %d "
                          "tokens of dim %d (a worker that predates token_states answers none)",
                          m->token_states.len, m->token_dim, n_tok, tok_dim);
    else {
        memcpy(out, m->vectors.data, want);
        if (tok_out) memcpy(tok_out, m->token_states.data, m->token_states.len);
    }
    if (queue_us) *queue_us = m->queue_time_us;
    if (infer_us) *infer_us = m->inference_time_us;
    posy__v1__embed_response__free_unpacked(m, NULL);
    return rc;
}

grpc_byte_buffer *rpc_info_encode(const rpc_info *i) {
    Posy__V1__InfoResponse m = POSY__V1__INFO_RESPONSE__INIT;
    m.model = (char *)i->model;
    m.arch = (char *)i->arch;
    m.dim = (uint32_t)i->dim;
    m.max_seq_len = (uint32_t)i->max_seq_len;
    m.vocab_size = (uint32_t)i->vocab;
    m.type_vocab_size = (uint32_t)(i->type_vocab > 0 ? i->type_vocab : 1);
    m.max_batch_tokens = (uint32_t)i->max_batch_tokens;
    m.max_chunk_tokens = (uint32_t)i->max_chunk_tokens;
    m.max_chunk_seqs = (uint32_t)i->max_chunk_seqs;
    m.device = (char *)i->device;
    m.dtype = (char *)i->dtype;
    m.normalize = i->normalize != 0;
    m.pool_skip = i->pool_skip != 0;
    m.token_dim = (uint32_t)(i->tok_dim > 0 ? i->tok_dim : 0);
    m.pooling = (char *)i->pooling;
    m.fingerprint = (char *)i->fingerprint;
    m.requests = i->requests;
    m.sequences = i->sequences;
    m.tokens = i->tokens;
    m.cancelled = i->cancelled;
    m.sequences_run = i->seqs_run;
    m.sequences_dropped = i->seqs_dropped;
    return rpc_pack(&m.base);
}

#define RPC_COPY_STR(dst, src) snprintf((dst), sizeof(dst), "%s", (src) ? (src) : "")

/* A u32 field as an int, saturated: a worker cannot hand the gateway a
 * negative size by sending a value past INT_MAX. */
static int rpc_u32_int(uint32_t v) { return v > INT_MAX ? INT_MAX : (int)v; }

int rpc_info_decode(const uint8_t *buf, size_t len, rpc_info *o, posy_err *err) {
    Posy__V1__InfoResponse *m = posy__v1__info_response__unpack(NULL, len, buf);
    if (!m) return posy_err_set(err, POSY_E_INTERNAL, "worker sent a malformed InfoResponse");
    memset(o, 0, sizeof *o);
    RPC_COPY_STR(o->model, m->model);
    RPC_COPY_STR(o->arch, m->arch);
    RPC_COPY_STR(o->device, m->device);
    RPC_COPY_STR(o->dtype, m->dtype);
    RPC_COPY_STR(o->pooling, m->pooling);
    RPC_COPY_STR(o->fingerprint, m->fingerprint);
    o->dim = rpc_u32_int(m->dim);
    o->max_seq_len = rpc_u32_int(m->max_seq_len);
    o->vocab = rpc_u32_int(m->vocab_size);
    o->type_vocab = m->type_vocab_size > 0 && m->type_vocab_size < 65536 ? (int)m->type_vocab_size : 1;
    o->max_batch_tokens = rpc_u32_int(m->max_batch_tokens);
    o->max_chunk_tokens = rpc_u32_int(m->max_chunk_tokens);
    o->max_chunk_seqs = rpc_u32_int(m->max_chunk_seqs);
    o->normalize = m->normalize;
    o->pool_skip = m->pool_skip;
    o->tok_dim = m->token_dim < 1048576 ? (int)m->token_dim : 0;
    o->requests = m->requests;
    o->sequences = m->sequences;
    o->tokens = m->tokens;
    o->cancelled = m->cancelled;
    o->seqs_run = m->sequences_run;
    o->seqs_dropped = m->sequences_dropped;
    posy__v1__info_response__free_unpacked(m, NULL);
    return 0;
}

grpc_byte_buffer *rpc_health_encode(int serving) {
    Grpc__Health__V1__HealthCheckResponse m = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    m.status = serving ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                       : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    return rpc_pack(&m.base);
}

int rpc_health_decode(const uint8_t *buf, size_t len) {
    Grpc__Health__V1__HealthCheckResponse *m = grpc__health__v1__health_check_response__unpack(NULL, len, buf);
    if (!m) return -1;
    int s = m->status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    grpc__health__v1__health_check_response__free_unpacked(m, NULL);
    return s;
}

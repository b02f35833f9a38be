/* fuzz_rpc: libFuzzer target for the gRPC message decoders of rpc_codec.h,
 * the first code to touch bytes that came off the network: EmbedRequest
 * on a worker, EmbedResponse, InfoResponse and HealthCheckResponse on a
 * gateway.
 *
 * The first input byte picks the decoder (bits 0-1: request, response,
 * info, health) and its context (bits 2-3): the worker limits a request is
 * checked against, or the vector count and width a gateway expects.  The
 * rest is the message.  Beyond "no crash, no leak, no UB" it checks the
 * contracts the callers rely on: an accepted request has the shape
 * rpc_codec.h promises (lengths >= 1 summing to the ids, ids and type ids
 * in range, skips inside their sequence) and survives encode + decode
 * unchanged; an accepted response copied exactly the message's vector
 * bytes; a decoded info has terminated strings and survives encode +
 * decode; every refusal comes with a message.  Seeds are encoded by the
 * real encoders, plus hand-made wire forms (tests/fuzz/make_rpc_seeds.c).
 * Build and run: tests/fuzz/run_fuzz.sh rpc [seconds].
 */
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_codec.h"

/* A worker's limits: a small model, a BERT-base-like one, none at all. */
static const rpc_info fuzz_lims[4] = {
    {.vocab = 1000, .type_vocab = 1, .max_seq_len = 16, .max_chunk_tokens = 64, .max_chunk_seqs = 8},
    {.vocab = 30522, .type_vocab = 2, .max_seq_len = 512, .max_chunk_tokens = 65536, .max_chunk_seqs = 8192,
     .dim = 384, .tok_dim = 384},   /* gives token states */
    {.vocab = 0},
    {.vocab = 5, .type_vocab = 3, .max_seq_len = 4, .max_chunk_tokens = 8, .max_chunk_seqs = 3},
};
/* What a gateway expects back: {vectors, dim}; context 3 token states too (FUZZ_TOK_N x FUZZ_TOK_DIM). */
static const int fuzz_shapes[4][2] = {{1, 4}, {3, 4}, {2, 384}, {1, 1}};
#define FUZZ_TOK_N 2
#define FUZZ_TOK_DIM 3

/* The bytes of an encoder's output (malloc'd), as the transport delivers them. */
static uint8_t *fuzz_bb_bytes(grpc_byte_buffer *bb, size_t *len) {
    grpc_byte_buffer_reader r;
    if (!bb || !grpc_byte_buffer_reader_init(&r, bb)) abort();
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    grpc_byte_buffer_destroy(bb);
    *len = GRPC_SLICE_LENGTH(s);
    uint8_t *p = malloc(*len + 1);
    if (!p) abort();
    memcpy(p, GRPC_SLICE_START_PTR(s), *len);
    grpc_slice_unref(s);
    return p;
}

static void fuzz_check_err(int rc, const posy_err *err) {
    if (rc == 0 || err->code == POSY_OK || !err->msg[0]) abort();
}

static void fuzz_check_chunk(const rpc_chunk *c, const rpc_info *lim) {
    if (c->n_seqs < 1 || c->n_tokens < 1 || !c->ids || !c->lengths) abort();
    if (lim->max_chunk_seqs > 0 && c->n_seqs > lim->max_chunk_seqs) abort();
    if (lim->max_chunk_tokens > 0 && c->n_tokens > lim->max_chunk_tokens) abort();
    long long sum = 0;
    for (int i = 0; i < c->n_seqs; i++) {
        int l = c->lengths[i];
        if (l < 1 || (lim->max_seq_len > 0 && l > lim->max_seq_len)) abort();
        if (c->pool_skip && (c->pool_skip[i] < 0 || c->pool_skip[i] >= l)) abort();
        sum += l;
    }
    if (sum != c->n_tokens) abort();
    int ntypes = lim->type_vocab > 0 ? lim->type_vocab : 1;
    for (int i = 0; i < c->n_tokens; i++) {
        if (c->ids[i] < 0 || (lim->vocab > 0 && c->ids[i] >= lim->vocab)) abort();
        if (c->type_ids && (c->type_ids[i] < 0 || c->type_ids[i] >= ntypes)) abort();
    }
}

static int fuzz_same_array(const int32_t *a, const int32_t *b, int n) {
    if (!a || !b) return a == b;
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static int fuzz_all_zero(const int32_t *a, int n) {
    for (int i = 0; a && i < n; i++)
        if (a[i]) return 0;
    return 1;
}

static void fuzz_req(const uint8_t *buf, size_t len, const rpc_info *lim) {
    rpc_req r;
    posy_err err = {0};
    int rc = rpc_req_decode(buf, len, lim, &r, &err);
    if (rc) {
        fuzz_check_err(rc, &err);
        if (r.msg) abort();
        return;
    }
    fuzz_check_chunk(&r.chunk, lim);
    size_t n2;
    uint8_t *b2 = fuzz_bb_bytes(rpc_req_encode(&r.chunk, r.id), &n2);
    rpc_req r2;
    if (rpc_req_decode(b2, n2, lim, &r2, &err) != 0) abort();
    const rpc_chunk *a = &r.chunk, *b = &r2.chunk;
    if (r2.id != r.id || a->n_seqs != b->n_seqs || a->n_tokens != b->n_tokens || a->token_states != b->token_states)
        abort();
    if (a->token_states && !rpc_answer_fits(a->n_seqs, lim->dim, a->n_tokens, lim->tok_dim)) abort();
    if (!fuzz_same_array(a->ids, b->ids, a->n_tokens) || !fuzz_same_array(a->lengths, b->lengths, a->n_seqs) ||
        !fuzz_same_array(a->type_ids, b->type_ids, a->n_tokens))
        abort();
    /* all-zero skips travel as no field */
    if (fuzz_all_zero(a->pool_skip, a->n_seqs) ? b->pool_skip != NULL : !fuzz_same_array(a->pool_skip, b->pool_skip, a->n_seqs))
        abort();
    rpc_req_free(&r2);
    free(b2);
    rpc_req_free(&r);
    if (r.msg) abort();
}

static void fuzz_resp(const uint8_t *buf, size_t len, int n, int dim, int tok) {
    size_t nf = (size_t)n * (size_t)dim;
    float *out = malloc(nf * sizeof *out), tout[FUZZ_TOK_N * FUZZ_TOK_DIM];
    if (!out) abort();
    memset(out, 0xA5, nf * sizeof *out);
    uint64_t q = 0, inf = 0;
    posy_err err = {0};
    int rc = rpc_resp_decode_tok(buf, len, n, dim, out, FUZZ_TOK_N, FUZZ_TOK_DIM, tok ? tout : NULL, &q, &inf, &err);
    if (rc) {
        fuzz_check_err(rc, &err);
    } else {   /* out holds exactly the message's vector bytes, and they encode back the same */
        Posy__V1__EmbedResponse *m = posy__v1__embed_response__unpack(NULL, len, buf);
        if (!m || m->vectors.len != nf * sizeof *out || memcmp(out, m->vectors.data, m->vectors.len) != 0) abort();
        if (tok && (m->token_dim != FUZZ_TOK_DIM || m->token_states.len != sizeof tout ||
                    memcmp(tout, m->token_states.data, sizeof tout) != 0))
            abort();
        if (q != m->queue_time_us || inf != m->inference_time_us) abort();
        posy__v1__embed_response__free_unpacked(m, NULL);
        size_t n2;
        uint8_t *b2 = fuzz_bb_bytes(rpc_resp_encode(7, out, n, dim, q, inf), &n2);
        float *back = malloc(nf * sizeof *back);
        if (!back) abort();
        uint64_t q2, inf2;
        if (rpc_resp_decode(b2, n2, n, dim, back, &q2, &inf2, &err) != 0) abort();
        if (memcmp(out, back, nf * sizeof *out) != 0 || q2 != q || inf2 != inf) abort();
        free(back);
        free(b2);
    }
    free(out);
}

static void fuzz_check_str(const char *s, size_t cap) {
    if (!memchr(s, 0, cap)) abort();
}

static void fuzz_info(const uint8_t *buf, size_t len) {
    rpc_info o;
    posy_err err = {0};
    int rc = rpc_info_decode(buf, len, &o, &err);
    if (rc) {
        fuzz_check_err(rc, &err);
        return;
    }
    fuzz_check_str(o.model, sizeof o.model);
    fuzz_check_str(o.arch, sizeof o.arch);
    fuzz_check_str(o.device, sizeof o.device);
    fuzz_check_str(o.dtype, sizeof o.dtype);
    fuzz_check_str(o.pooling, sizeof o.pooling);
    fuzz_check_str(o.fingerprint, sizeof o.fingerprint);
    if (o.type_vocab < 1) abort();
    size_t n2;
    uint8_t *b2 = fuzz_bb_bytes(rpc_info_encode(&o), &n2);
    rpc_info o2;
    if (rpc_info_decode(b2, n2, &o2, &err) != 0) abort();
    if (memcmp(&o, &o2, sizeof o) != 0) abort();
    free(b2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const uint8_t *buf = data + 1;
    size_t len = size - 1;
    int ctx = (data[0] >> 2) & 3;
    switch (data[0] & 3) {
    case 0: fuzz_req(buf, len, &fuzz_lims[ctx]); break;
    case 1: fuzz_resp(buf, len, fuzz_shapes[ctx][0], fuzz_shapes[ctx][1], ctx == 3); break;
    case 2: fuzz_info(buf, len); break;
    default: {
        int s = rpc_health_decode(buf, len);
        if (s < -1 || s > 1) abort();
    }
    }
    return 0;
}

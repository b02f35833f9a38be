/* make_rpc_seeds: writes the seed corpus of fuzz_rpc into the directory
 * given, one file per message, each the selector byte fuzz_rpc.c reads
 * (decoder in bits 0-1, context in bits 2-3) followed by the bytes the
 * real encoders of rpc_codec.c produce.  Encoding with the product's own
 * encoders keeps the seeds in step with proto/posy.proto.  Built and run by
 * tests/fuzz/run_fuzz.sh rpc; usage: make_rpc_seeds DIR.
 */
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_codec.h"

static const char *g_dir;
static int g_bad;

static void put(const char *name, int sel, grpc_byte_buffer *bb) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    grpc_byte_buffer_reader r;
    FILE *f = fopen(path, "wb");
    if (!f || !bb || !grpc_byte_buffer_reader_init(&r, bb)) {
        fprintf(stderr, "make_rpc_seeds: cannot write %s\n", path);
        g_bad = 1;
        if (f) fclose(f);
        if (bb) grpc_byte_buffer_destroy(bb);
        return;
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    fputc(sel, f);
    fwrite(GRPC_SLICE_START_PTR(s), 1, GRPC_SLICE_LENGTH(s), f);
    if (fclose(f)) g_bad = 1;
    grpc_slice_unref(s);
    grpc_byte_buffer_destroy(bb);
}

/* Hand-made wire bytes: forms the encoders never produce. */
static void put_raw(const char *name, int sel, const void *p, size_t n) {
    grpc_slice sl = grpc_slice_from_copied_buffer(p, n);
    put(name, sel, grpc_raw_byte_buffer_create(&sl, 1));
    grpc_slice_unref(sl);
}

static void hand_made(void) {
    /* ids 1, 2 and length 2 as unpacked repeated fields (legal protobuf) */
    put_raw("req_unpacked", 0, "\x10\x01\x10\x02\x18\x02", 6);
    /* field 2 (ids) as a string of the wrong shape */
    put_raw("req_ids_wrongtype", 0, "\x12\x03" "abc", 5);
    /* lengths = -1 (ten-byte varint), ids = [1] */
    put_raw("req_neg_length", 2 << 2, "\x12\x01\x01\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 14);
    /* an unknown field 15 after a valid request, then a truncated varint */
    put_raw("req_unknown_field", 0, "\x12\x01\x01\x1a\x01\x01\x78\x05", 8);
    put_raw("req_truncated_varint", 0, "\x08\xff\xff", 3);
    /* one pool skip for two sequences */
    Posy__V1__EmbedRequest m = POSY__V1__EMBED_REQUEST__INIT;
    int32_t ids[] = {1, 2, 3}, lens[] = {1, 2}, skip[] = {0};
    m.n_ids = 3; m.ids = ids; m.n_lengths = 2; m.lengths = lens; m.n_pool_skip = 1; m.pool_skip = skip;
    uint8_t wire[64];
    put_raw("req_skip_count", 0, wire, posy__v1__embed_request__pack(&m, wire));
    /* a response whose vectors field is shorter than count * dim floats */
    put_raw("resp_short_vectors", 1, "\x10\x04\x18\x01\x22\x04\x00\x00\x80\x3f", 10);
    put_raw("health_unknown_status", 3, "\x08\x07", 2);
}

static void requests(void) {
    /* fits every limit set of fuzz_rpc.c (ctx 3: vocab 5, 3 types, 4 per sequence, 8 per chunk, 3 sequences) */
    int32_t ids[] = {1, 2, 3, 4, 0, 1, 2}, lens[] = {3, 1, 3}, types[] = {0, 0, 1, 1, 0, 2, 2}, skip[] = {1, 0, 2};
    rpc_chunk c = {.n_seqs = 3, .n_tokens = 7, .ids = ids, .lengths = lens};
    put("req_plain_ctx0", 0 << 2 | 0, rpc_req_encode(&c, 1));
    put("req_plain_ctx2", 2 << 2 | 0, rpc_req_encode(&c, 0xffffffffffffull));
    c.pool_skip = skip;
    put("req_skip_ctx1", 1 << 2 | 0, rpc_req_encode(&c, 42));
    c.type_ids = types;
    put("req_types_skip_ctx3", 3 << 2 | 0, rpc_req_encode(&c, 9));
    /* a bigger chunk for the BERT-like limits: 40 sequences of 1..12 tokens */
    int32_t bid[400], blen[40], btype[400];
    int t = 0;
    for (int s = 0; s < 40; s++) {
        blen[s] = 1 + s % 12;
        for (int k = 0; k < blen[s]; k++, t++) {
            bid[t] = (s * 977 + k * 131) % 30522;
            btype[t] = k >= blen[s] / 2;
        }
    }
    rpc_chunk b = {.n_seqs = 40, .n_tokens = t, .ids = bid, .lengths = blen, .type_ids = btype};
    put("req_big_ctx1", 1 << 2 | 0, rpc_req_encode(&b, 123456));
    b.token_states = 1;   /* /embed_all's chunks: context 1 gives token states */
    put("req_tokens_ctx1", 1 << 2 | 0, rpc_req_encode(&b, 123457));
    c.token_states = 1;   /* context 0 gives none: refused */
    put("req_tokens_ctx0", 0 << 2 | 0, rpc_req_encode(&c, 2));
}

static void responses(void) {
    static const int shapes[4][2] = {{1, 4}, {3, 4}, {2, 384}, {1, 1}};
    float v[2 * 384];
    for (int i = 0; i < 2 * 384; i++) v[i] = (float)(i % 17 - 8) / 8.0f;
    for (int k = 0; k < 4; k++) {
        char name[32];
        snprintf(name, sizeof name, "resp_ctx%d", k);
        put(name, k << 2 | 1, rpc_resp_encode((uint64_t)k + 1, v, shapes[k][0], shapes[k][1], 120, 3400));
    }
    put("resp_wrong_count", 1 << 2 | 1, rpc_resp_encode(5, v, 2, 4, 1, 2));
    /* context 3 expects 2 token states of 3 floats beside its vector; one answer short of them */
    put("resp_tokens_ctx3", 3 << 2 | 1, rpc_resp_encode_tok(6, v, 1, 1, v + 1, 2, 3, 1, 2));
    put("resp_tokens_short_ctx3", 3 << 2 | 1, rpc_resp_encode_tok(6, v, 1, 1, v + 1, 1, 3, 1, 2));
}

static void infos(void) {
    rpc_info i;
    memset(&i, 0, sizeof i);
    snprintf(i.model, sizeof i.model, "all-MiniLM-L6-v2");
    snprintf(i.arch, sizeof i.arch, "bert");
    snprintf(i.device, sizeof i.device, "cuda:0");
    snprintf(i.dtype, sizeof i.dtype, "fp16");
    snprintf(i.pooling, sizeof i.pooling, "mean");
    snprintf(i.fingerprint, sizeof i.fingerprint, "3f9a0c41d2e87b65");
    i.dim = 384;
    i.max_seq_len = 256;
    i.vocab = 30522;
    i.type_vocab = 2;
    i.max_batch_tokens = 16384;
    i.max_chunk_tokens = 65536;
    i.max_chunk_seqs = 8192;
    i.normalize = 1;
    i.pool_skip = 1;
    i.requests = 1000;
    i.sequences = 25000;
    i.tokens = 1u << 20;
    i.cancelled = 3;
    i.seqs_run = 24990;
    i.seqs_dropped = 10;
    put("info_full", 2, rpc_info_encode(&i));
    memset(&i, 0, sizeof i);
    put("info_empty", 2, rpc_info_encode(&i));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: make_rpc_seeds DIR\n");
        return 2;
    }
    g_dir = argv[1];
    grpc_init();
    requests();
    responses();
    infos();
    put("health_serving", 3, rpc_health_encode(1));
    put("health_not_serving", 3, rpc_health_encode(0));
    hand_made();
    grpc_shutdown();
    return g_bad;
}

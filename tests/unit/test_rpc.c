/* test_rpc: the gRPC transport and the gateway's worker pool on loopback,
 * with a stand-in backend whose vectors are a known function of the ids
 * (so correctness, ordering and routing are checkable without a model).
 * The real engine behind `posy worker` is tested end to end in
 * tests/python/test_grpc*.py. */
#include <grpc/grpc.h>
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

#include "health.pb-c.h"
#include "posy_test.h"
#include "rpc.h"
#include "rpc_client.h"
#include "rpc_codec.h"
#include "rpc_pool.h"

#define DIM 4

static int fake_busy = 0;
/* microseconds each fake worker waits before it answers a chunk: where a
 * test checks how chunks spread, so that no answer (which lowers the
 * worker's outstanding tokens back to a tie) can arrive while the pool is
 * still handing out the request's chunks -- with instant answers, a
 * descheduled sender under a loaded ctest -j2 once saw one worker get none */
static int fake_delay_us = 0;

/* v[k] = first id * 10 + length + k + 100000 * pool skip: distinct per
 * sequence, order-checkable, and showing the skip it was given. */
static void fake_vec(const int32_t *ids, int len, int skip, float *v) {
    for (int k = 0; k < DIM; k++) v[k] = (float)(ids[0] * 10 + len + k + 100000 * skip);
}

/* a token's state: TD floats from its id and its place in the chunk */
#define TD 3
static float fake_tok(int32_t id, int k) { return (float)id * 10.0f + (float)k + 0.5f; }

static int fake_submit(void *ctx, const rpc_chunk *c, rpc_reply_fn done, void *arg, void **job, posy_err *err) {
    (void)ctx;
    (void)job;
    if (fake_busy) return posy_err_set(err, POSY_E_BUSY, "queue full");
    if (fake_delay_us) usleep((useconds_t)fake_delay_us);
    float *v = malloc((size_t)c->n_seqs * DIM * sizeof(float));
    int t = 0;
    for (int s = 0; s < c->n_seqs; s++) {
        fake_vec(c->ids + t, c->lengths[s], c->pool_skip ? c->pool_skip[s] : 0, v + s * DIM);
        t += c->lengths[s];
    }
    float *tok = c->token_states ? malloc((size_t)c->n_tokens * TD * sizeof(float)) : NULL;
    for (int i = 0; tok && i < c->n_tokens; i++)
        for (int k = 0; k < TD; k++) tok[i * TD + k] = fake_tok(c->ids[i], k);
    done(arg, 0, NULL, v, c->n_seqs, DIM, tok, tok ? TD : 0, 1, 2);
    free(v);
    free(tok);
    return 0;
}

static rpc_info fake_info(void) {
    rpc_info i;
    memset(&i, 0, sizeof i);
    snprintf(i.model, sizeof i.model, "fake");
    snprintf(i.device, sizeof i.device, "cpu");
    snprintf(i.fingerprint, sizeof i.fingerprint, "fp-1");
    i.dim = DIM;
    i.max_seq_len = 16;
    i.vocab = 1000;
    i.max_chunk_tokens = 4096;
    i.max_chunk_seqs = 1024;
    i.tok_dim = TD;
    return i;
}

static rpc_server *fake_server(const char *fp) {
    rpc_info i = fake_info();
    if (fp) snprintf(i.fingerprint, sizeof i.fingerprint, "%s", fp);
    rpc_backend be = {.ctx = NULL, .submit = fake_submit};
    posy_err err;
    rpc_server *s = rpc_server_start("127.0.0.1:0", &i, &be, &err);
    if (!s) fprintf(stderr, "server: %s\n", err.msg);
    return s;
}

/* ---- a synchronous unary call -------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, code;
    uint8_t *buf;
    size_t len;
    char details[512];
} sync_call;

static void sync_cb(void *arg, int code, const char *details, const uint8_t *buf, size_t len) {
    sync_call *s = arg;
    pthread_mutex_lock(&s->mu);
    s->code = code;
    snprintf(s->details, sizeof s->details, "%s", details);
    if (buf) {
        s->buf = malloc(len + 1);
        memcpy(s->buf, buf, len);
        s->len = len;
    }
    s->done = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static rpc_loop loop;

static int call(int port, const char *method, grpc_byte_buffer *req, sync_call *s) {
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    rpc_client *c = rpc_client_open(target, &loop);
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (rpc_client_call(c, method, req, 5000, sync_cb, s, NULL) != 0) return -1;
    pthread_mutex_lock(&s->mu);
    while (!s->done) pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    rpc_client_close(c);
    return s->code;
}

static int embed_code(int port, const rpc_chunk *c) {
    sync_call s;
    int code = call(port, "/posy.v1.Embedder/Embed", rpc_req_encode(c, 7), &s);
    free(s.buf);
    return code;
}

static void test_embed_roundtrip(void) {
    rpc_server *srv = fake_server(NULL);
    CHECK(srv != NULL);
    if (!srv) return;
    int32_t ids[] = {5, 6, 7, 9, 1, 2, 3, 4};
    int32_t lens[] = {3, 1, 4};
    rpc_chunk c = {.n_seqs = 3, .n_tokens = 8, .ids = ids, .lengths = lens};
    sync_call s;
    CHECK_EQ_INT(call(rpc_server_port(srv), "/posy.v1.Embedder/Embed", rpc_req_encode(&c, 7), &s), GRPC_STATUS_OK);
    float got[3 * DIM], want[3 * DIM];
    uint64_t q = 0, inf = 0;
    posy_err err;
    CHECK_EQ_INT(rpc_resp_decode(s.buf, s.len, 3, DIM, got, &q, &inf, &err), 0);
    fake_vec(ids, 3, 0, want);
    fake_vec(ids + 3, 1, 0, want + DIM);
    fake_vec(ids + 4, 4, 0, want + 2 * DIM);
    CHECK(memcmp(got, want, sizeof got) == 0);
    CHECK_EQ_INT(q, 1);
    CHECK_EQ_INT(inf, 2);
    free(s.buf);
    /* pool skips reach the backend, one per sequence */
    int32_t skips[] = {2, 0, 3};
    c.pool_skip = skips;
    CHECK_EQ_INT(call(rpc_server_port(srv), "/posy.v1.Embedder/Embed", rpc_req_encode(&c, 8), &s), GRPC_STATUS_OK);
    CHECK_EQ_INT(rpc_resp_decode(s.buf, s.len, 3, DIM, got, &q, &inf, &err), 0);
    fake_vec(ids, 3, 2, want);
    fake_vec(ids + 4, 4, 3, want + 2 * DIM);
    CHECK(memcmp(got, want, sizeof got) == 0);
    free(s.buf);
    rpc_server_stop(srv, 1000);
}

static void test_info_and_health(void) {
    rpc_server *srv = fake_server(NULL);
    if (!srv) { CHECK(0); return; }
    int port = rpc_server_port(srv);
    int32_t ids[] = {1, 2};
    int32_t lens[] = {2};
    rpc_chunk c = {.n_seqs = 1, .n_tokens = 2, .ids = ids, .lengths = lens};
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_OK);
    sync_call s;
    CHECK_EQ_INT(call(port, "/posy.v1.Embedder/Info", rpc_bb_copy("", 0), &s), GRPC_STATUS_OK);
    rpc_info info;
    posy_err err;
    CHECK_EQ_INT(rpc_info_decode(s.buf, s.len, &info, &err), 0);
    CHECK(!strcmp(info.fingerprint, "fp-1"));
    CHECK_EQ_INT(info.dim, DIM);
    CHECK_EQ_INT(info.tok_dim, TD);
    CHECK_EQ_INT(info.requests, 1);
    CHECK_EQ_INT(info.tokens, 2);
    free(s.buf);
    CHECK_EQ_INT(call(port, "/grpc.health.v1.Health/Check", rpc_bb_copy("", 0), &s), GRPC_STATUS_OK);
    CHECK_EQ_INT(rpc_health_decode(s.buf, s.len), 1);
    free(s.buf);
    rpc_server_set_serving(srv, 0);
    CHECK_EQ_INT(call(port, "/grpc.health.v1.Health/Check", rpc_bb_copy("", 0), &s), GRPC_STATUS_OK);
    CHECK_EQ_INT(rpc_health_decode(s.buf, s.len), 0);
    free(s.buf);
    CHECK_EQ_INT(call(port, "/grpc.health.v1.Health/Watch", rpc_bb_copy("", 0), &s), GRPC_STATUS_UNIMPLEMENTED);
    CHECK_EQ_INT(call(port, "/posy.v1.Embedder/Nope", rpc_bb_copy("", 0), &s), GRPC_STATUS_UNIMPLEMENTED);
    rpc_server_stop(srv, 1000);
}

/* A worker's sizes are u32 on the wire; past INT_MAX they saturate instead
 * of turning negative in the gateway's ints. */
static void test_info_sizes_saturate(void) {
    Posy__V1__InfoResponse m = POSY__V1__INFO_RESPONSE__INIT;
    m.model = "m";
    m.dim = 0xFFFFFFFFu;
    m.max_seq_len = 0x80000000u;
    m.max_chunk_tokens = 512;
    m.max_batch_tokens = 0x90000000u;
    uint8_t buf[256];
    size_t n = posy__v1__info_response__pack(&m, buf);
    rpc_info info;
    posy_err err;
    CHECK_EQ_INT(rpc_info_decode(buf, n, &info, &err), 0);
    CHECK_EQ_INT(info.dim, INT_MAX);
    CHECK_EQ_INT(info.max_seq_len, INT_MAX);
    CHECK_EQ_INT(info.max_batch_tokens, INT_MAX);
    CHECK_EQ_INT(info.max_chunk_tokens, 512);
    CHECK(!strcmp(info.model, "m"));
}

static void test_bad_input(void) {
    rpc_server *srv = fake_server(NULL);
    if (!srv) { CHECK(0); return; }
    int port = rpc_server_port(srv);
    sync_call s;
    const char garbage[] = "\xff\xff\xff\xff\x0f garbage";
    CHECK_EQ_INT(call(port, "/posy.v1.Embedder/Embed", rpc_bb_copy(garbage, sizeof garbage), &s),
                 GRPC_STATUS_INVALID_ARGUMENT);
    /* field 2 (ids) sent as a length-delimited string of the wrong shape */
    const char wrongtype[] = "\x12\x03" "abc";
    CHECK_EQ_INT(call(port, "/posy.v1.Embedder/Embed", rpc_bb_copy(wrongtype, 5), &s), GRPC_STATUS_INVALID_ARGUMENT);
    CHECK_EQ_INT(call(port, "/posy.v1.Embedder/Embed", rpc_bb_copy("", 0), &s), GRPC_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(s.details, "empty chunk");
    int32_t ids[] = {1, 2000, 3};
    int32_t lens[] = {3};
    rpc_chunk c = {.n_seqs = 1, .n_tokens = 3, .ids = ids, .lengths = lens};
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_INVALID_ARGUMENT);   /* out of vocabulary */
    ids[1] = -1;
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_INVALID_ARGUMENT);
    ids[1] = 2;
    int32_t bad_lens[] = {2};
    c.lengths = bad_lens;                                                  /* sum != ids */
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_INVALID_ARGUMENT);
    int32_t zero_lens[] = {0, 3};
    rpc_chunk z = {.n_seqs = 2, .n_tokens = 3, .ids = ids, .lengths = zero_lens};
    CHECK_EQ_INT(embed_code(port, &z), GRPC_STATUS_INVALID_ARGUMENT);
    int32_t long_ids[20] = {0};
    int32_t long_len[] = {20};
    rpc_chunk l = {.n_seqs = 1, .n_tokens = 20, .ids = long_ids, .lengths = long_len};
    CHECK_EQ_INT(embed_code(port, &l), GRPC_STATUS_INVALID_ARGUMENT);     /* over max_seq_len 16 */
    int32_t types[] = {0, 5, 0};
    c.lengths = lens;
    c.type_ids = types;
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_INVALID_ARGUMENT);
    c.type_ids = NULL;
    int32_t skip_len[] = {3}, skip_neg[] = {-1}, skip_ok[] = {2};
    c.pool_skip = skip_len;                                                /* skip == length */
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_INVALID_ARGUMENT);
    c.pool_skip = skip_neg;
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_INVALID_ARGUMENT);
    c.pool_skip = skip_ok;
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_OK);
    c.pool_skip = NULL;
    /* one skip for two sequences (the encoder cannot produce it: hand-made) */
    Posy__V1__EmbedRequest m = POSY__V1__EMBED_REQUEST__INIT;
    int32_t two_lens[] = {1, 2}, one_skip[] = {0};
    m.n_ids = 3; m.ids = ids; m.n_lengths = 2; m.lengths = two_lens; m.n_pool_skip = 1; m.pool_skip = one_skip;
    uint8_t wire[64];
    size_t wn = posy__v1__embed_request__pack(&m, wire);
    CHECK_EQ_INT(call(port, "/posy.v1.Embedder/Embed", rpc_bb_copy((const char *)wire, wn), &s),
                 GRPC_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(s.details, "pool_skip");
    fake_busy = 1;
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_RESOURCE_EXHAUSTED);
    fake_busy = 0;
    CHECK_EQ_INT(embed_code(port, &c), GRPC_STATUS_OK);                   /* still serving */
    rpc_server_stop(srv, 1000);
}

/* ---- the pool --------------------------------------------------------------- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, status;
} pool_wait;

static void pool_cb(void *arg, int status, const char *msg, uint64_t q, uint64_t inf) {
    (void)msg; (void)q; (void)inf;
    pool_wait *w = arg;
    pthread_mutex_lock(&w->mu);
    w->status = status;
    w->done = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* One request through the pool, waited for; tok: its token states too. */
static int pool_run_tok(rpc_pool *p, const rpc_chunk *req, float *out, float *tok) {
    pool_wait w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    posy_err err;
    int rc = rpc_pool_embed_tok(p, req, out, tok, pool_cb, &w, &w, &err);
    if (rc) return rc;
    pthread_mutex_lock(&w.mu);
    while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    return w.status;
}

static int pool_run(rpc_pool *p, const rpc_chunk *req, float *out) { return pool_run_tok(p, req, out, NULL); }

static uint64_t server_requests(int port) {
    sync_call s;
    if (call(port, "/posy.v1.Embedder/Info", rpc_bb_copy("", 0), &s) != 0) return 0;
    rpc_info info;
    posy_err err;
    rpc_info_decode(s.buf, s.len, &info, &err);
    free(s.buf);
    return info.requests;
}

#define NSEQ 300

static void make_request(int32_t *ids, int32_t *lens, rpc_chunk *req) {
    int t = 0;
    for (int s = 0; s < NSEQ; s++) {
        lens[s] = 1 + s % 7;
        for (int k = 0; k < lens[s]; k++) ids[t++] = (s * 3 + k) % 1000;
    }
    *req = (rpc_chunk){.n_seqs = NSEQ, .n_tokens = t, .ids = ids, .lengths = lens};
}

static int check_vectors(const rpc_chunk *req, const float *out) {
    int t = 0, bad = 0;
    for (int s = 0; s < req->n_seqs; s++) {
        float want[DIM];
        fake_vec(req->ids + t, req->lengths[s], req->pool_skip ? req->pool_skip[s] : 0, want);
        bad += memcmp(want, out + s * DIM, sizeof want) != 0;
        t += req->lengths[s];
    }
    return bad;
}

static void test_pool_spread_and_failover(void) {
    rpc_server *srv[3];
    char addr[3][64];
    const char *backends[3];
    for (int i = 0; i < 3; i++) {
        srv[i] = fake_server(NULL);
        if (!srv[i]) { CHECK(0); return; }
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", rpc_server_port(srv[i]));
        backends[i] = addr[i];
    }
    rpc_pool_opts o = {.backends = backends, .n_backends = 3, .fingerprint = "fp-1", .dim = DIM,
                       .chunk_tokens = 64, .timeout_ms = 5000, .health_ms = 100};
    posy_err err;
    rpc_pool *p = rpc_pool_open(&o, &err);
    CHECK(p != NULL);
    if (!p) return;
    CHECK_EQ_INT(rpc_pool_healthy(p), 3);
    static int32_t ids[NSEQ * 8], lens[NSEQ];
    static float out[NSEQ * DIM];
    rpc_chunk req;
    make_request(ids, lens, &req);
    fake_delay_us = 50000;
    CHECK_EQ_INT(pool_run(p, &req, out), 0);
    fake_delay_us = 0;
    CHECK_EQ_INT(check_vectors(&req, out), 0);
    int ports[3];
    for (int i = 0; i < 3; i++) {
        ports[i] = rpc_server_port(srv[i]);
        CHECK_MSG(server_requests(ports[i]) > 0, "worker %d got no chunk", i);
    }
    /* one worker gone: the pool must still answer everything */
    rpc_server_stop(srv[1], 100);
    srv[1] = NULL;
    memset(out, 0, sizeof out);
    CHECK_EQ_INT(pool_run(p, &req, out), 0);
    CHECK_EQ_INT(check_vectors(&req, out), 0);
    CHECK(rpc_pool_healthy(p) <= 2);
    char metrics[4096];
    rpc_pool_metrics(p, metrics, sizeof metrics);
    CHECK_STR_CONTAINS(metrics, "posy_gateway_worker_up");
    /* all gone: a request fails (503 upstream) instead of hanging */
    rpc_server_stop(srv[0], 100);
    rpc_server_stop(srv[2], 100);
    int st = pool_run(p, &req, out);
    CHECK(st != 0);
    rpc_pool_close(p);
}

/* Skips follow their sequences into chunks (the request is split at
 * sequence boundaries into many chunks over two workers). */
static void test_pool_skips_follow_chunks(void) {
    rpc_server *srv[2];
    char addr[2][64];
    const char *backends[2];
    for (int i = 0; i < 2; i++) {
        srv[i] = fake_server(NULL);
        if (!srv[i]) { CHECK(0); return; }
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", rpc_server_port(srv[i]));
        backends[i] = addr[i];
    }
    rpc_pool_opts o = {.backends = backends, .n_backends = 2, .fingerprint = "fp-1", .dim = DIM,
                       .chunk_tokens = 40, .timeout_ms = 5000, .health_ms = 100};
    posy_err err;
    rpc_pool *p = rpc_pool_open(&o, &err);
    CHECK(p != NULL);
    if (p) {
        static int32_t ids[NSEQ * 8], lens[NSEQ], skips[NSEQ];
        static float out[NSEQ * DIM];
        rpc_chunk req;
        make_request(ids, lens, &req);
        for (int s = 0; s < NSEQ; s++) skips[s] = (s * 5) % lens[s];
        req.pool_skip = skips;
        CHECK_EQ_INT(pool_run(p, &req, out), 0);
        CHECK_EQ_INT(check_vectors(&req, out), 0);
        rpc_pool_close(p);
    }
    for (int i = 0; i < 2; i++) rpc_server_stop(srv[i], 100);
}

/* Token states (/embed_all) come back in token order across chunks and
 * workers; a worker that gives none refuses them, and a pool whose only
 * worker gives none fails a token request but still serves plain ones. */
static void test_pool_token_states(void) {
    rpc_info info = fake_info();
    rpc_backend be = {.ctx = NULL, .submit = fake_submit};
    posy_err err;
    rpc_server *srv[2];
    char addr[2][64];
    const char *backends[2];
    for (int i = 0; i < 2; i++) {
        srv[i] = rpc_server_start("127.0.0.1:0", &info, &be, &err);
        if (!srv[i]) { CHECK(0); return; }
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", rpc_server_port(srv[i]));
        backends[i] = addr[i];
    }
    rpc_pool_opts o = {.backends = backends, .n_backends = 2, .fingerprint = "fp-1", .dim = DIM,
                       .chunk_tokens = 40, .timeout_ms = 5000, .health_ms = 100, .tok_dim = TD};
    rpc_pool *p = rpc_pool_open(&o, &err);
    CHECK(p != NULL);
    static int32_t ids[NSEQ * 8], lens[NSEQ];
    static float out[NSEQ * DIM], tok[NSEQ * 8 * TD];
    rpc_chunk req;
    make_request(ids, lens, &req);
    if (p) {
        CHECK_EQ_INT(pool_run_tok(p, &req, out, tok), 0);
        CHECK_EQ_INT(check_vectors(&req, out), 0);
        int bad = 0;
        for (int t = 0; t < req.n_tokens; t++)
            for (int k = 0; k < TD; k++) bad += tok[t * TD + k] != fake_tok(ids[t], k);
        CHECK_EQ_INT(bad, 0);
        CHECK(server_requests(rpc_server_port(srv[0])) > 0 && server_requests(rpc_server_port(srv[1])) > 0);
        rpc_pool_close(p);
    }
    for (int i = 0; i < 2; i++) rpc_server_stop(srv[i], 100);
    /* a worker whose model gives no token states */
    info.tok_dim = 0;
    rpc_server *none = rpc_server_start("127.0.0.1:0", &info, &be, &err);
    if (!none) { CHECK(0); return; }
    int32_t ids1[] = {5, 6, 7}, lens1[] = {3};
    rpc_chunk c = {.n_seqs = 1, .n_tokens = 3, .ids = ids1, .lengths = lens1, .token_states = 1};
    sync_call s;
    CHECK_EQ_INT(call(rpc_server_port(none), "/posy.v1.Embedder/Embed", rpc_req_encode(&c, 9), &s),
                 GRPC_STATUS_INVALID_ARGUMENT);
    CHECK_STR_CONTAINS(s.details, "token_states");
    free(s.buf);
    char a_none[64];
    snprintf(a_none, sizeof a_none, "127.0.0.1:%d", rpc_server_port(none));
    const char *b_none[] = {a_none};
    o.backends = b_none;
    o.n_backends = 1;
    p = rpc_pool_open(&o, &err);
    CHECK(p != NULL);
    if (p) {
        CHECK_EQ_INT(pool_run_tok(p, &req, out, tok), POSY_E_IO);
        memset(out, 0, sizeof out);
        CHECK_EQ_INT(pool_run(p, &req, out), 0);
        CHECK_EQ_INT(check_vectors(&req, out), 0);
        rpc_pool_close(p);
    }
    rpc_server_stop(none, 100);
}

/* A model that needs pool skips is never sent to a worker that does not
 * apply them (an older worker would pool the prompt); one that does is used. */
static void test_pool_needs_pool_skip(void) {
    rpc_info i = fake_info();
    rpc_backend be = {.ctx = NULL, .submit = fake_submit};
    posy_err err;
    rpc_server *old = rpc_server_start("127.0.0.1:0", &i, &be, &err);
    i.pool_skip = 1;
    rpc_server *cur = rpc_server_start("127.0.0.1:0", &i, &be, &err);
    if (!old || !cur) { CHECK(0); return; }
    char a_old[64], a_cur[64];
    snprintf(a_old, sizeof a_old, "127.0.0.1:%d", rpc_server_port(old));
    snprintf(a_cur, sizeof a_cur, "127.0.0.1:%d", rpc_server_port(cur));
    const char *b_old[] = {a_old}, *b_cur[] = {a_cur};
    rpc_pool_opts o = {.backends = b_old, .n_backends = 1, .fingerprint = "fp-1", .dim = DIM, .need_pool_skip = 1};
    posy_err_clear(&err);
    rpc_pool *p = rpc_pool_open(&o, &err);
    CHECK(p == NULL);
    CHECK_STR_CONTAINS(err.msg, "pool skips");
    o.need_pool_skip = 0;                     /* a model without include_prompt false can use it */
    p = rpc_pool_open(&o, &err);
    CHECK(p != NULL);
    if (p) rpc_pool_close(p);
    o.backends = b_cur;
    o.need_pool_skip = 1;
    p = rpc_pool_open(&o, &err);
    CHECK(p != NULL);
    if (p) {
        CHECK_EQ_INT(rpc_pool_healthy(p), 1);
        rpc_pool_close(p);
    }
    rpc_server_stop(old, 100);
    rpc_server_stop(cur, 100);
}

static void test_pool_refuses_other_model(void) {
    rpc_server *srv = fake_server("another-model");
    if (!srv) { CHECK(0); return; }
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", rpc_server_port(srv));
    const char *backends[] = {addr};
    rpc_pool_opts o = {.backends = backends, .n_backends = 1, .fingerprint = "fp-1", .dim = DIM};
    posy_err err;
    posy_err_clear(&err);
    rpc_pool *p = rpc_pool_open(&o, &err);
    CHECK(p == NULL);
    CHECK_STR_CONTAINS(err.msg, "another model");
    rpc_server_stop(srv, 100);
}

static void test_fingerprint(void) {
    char a[64], b[64];
    posy_err err;
    CHECK_EQ_INT(rpc_fingerprint("models/all-MiniLM-L6-v2", a, sizeof a, &err), 0);
    CHECK_EQ_INT(rpc_fingerprint("models/all-MiniLM-L6-v2/", b, sizeof b, &err), 0);
    CHECK(!strcmp(a, b));
    CHECK_EQ_INT(strlen(a), 32);
    CHECK(rpc_fingerprint("/nonexistent-model-dir", a, sizeof a, &err) != 0);
}

static void setup(void) { rpc_loop_start(&loop); }


TEST_MAIN(TEST(setup), TEST(test_embed_roundtrip), TEST(test_info_and_health), TEST(test_info_sizes_saturate), TEST(test_bad_input),
          TEST(test_pool_spread_and_failover), TEST(test_pool_skips_follow_chunks), TEST(test_pool_token_states), TEST(test_pool_needs_pool_skip),
          TEST(test_pool_refuses_other_model), TEST(test_fingerprint))

/* test_gw_server: the HTTP front's lifecycle over real sockets, without a
 * model: 503 on every model route (and /health) until gw_server_set_ready,
 * 200 afterwards; 404/405 with JSON bodies; after gw_server_drain, requests
 * on a connection that was already open get 503 "shutting_down" and new
 * connections are refused; with an API key, 401 without the right bearer
 * token on every route but /health and /metrics; with CORS origins, the
 * preflight and the Access-Control headers.  (Embedding routes with a model are covered end
 * to end by tests/python/test_serve*.py.)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw_auth.h"
#include "gw_cors.h"
#include "gw_server.h"
#include "posy_test.h"

/* LeakSanitizer's excuses for libh2o's per-thread recycle lists live with
 * the code that runs h2o (src/gateway/gw_loop.c). */

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    return fd;
}

/* Send one request on `fd` (keep-alive) and read one response into buf
 * (headers + body, using Content-Length).  Returns the status or -1. */
static int http_h(int fd, const char *method, const char *path, const char *hdrs, const char *body, char *buf,
                  size_t cap) {
    char req[4096];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: t\r\n%sContent-Length: %zu\r\n\r\n%s", method, path,
                     hdrs, body ? strlen(body) : 0, body ? body : "");
    if (write(fd, req, (size_t)n) != n) return -1;
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r <= 0) return -1;
        len += (size_t)r;
        buf[len] = 0;
        char *hdr_end = strstr(buf, "\r\n\r\n");
        char *cl = strcasestr(buf, "content-length:");
        if (hdr_end && cl && len >= (size_t)(hdr_end + 4 - buf) + (size_t)atoi(cl + 15)) break;
    }
    return atoi(buf + 9);
}

static int http(int fd, const char *method, const char *path, const char *body, char *buf, size_t cap) {
    return http_h(fd, method, path, "", body, buf, cap);
}

/* A started server, ready with a model of no tokenizer and a backend of
 * no functions: enough for every route that answers before the backend. */
static gw_server *start_ready(const gw_opts *o) {
    static const gw_model m = {.name = "test-model", .dim = 8, .max_input_tokens = 16, .device = "cpu", .dtype = "fp32"};
    static const gw_backend be = {0};
    posy_err err;
    gw_server *s = gw_server_start(o, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    if (s) gw_server_set_ready(s, &m, &be);
    return s;
}

static void test_lifecycle(void) {
    gw_opts o = {.host = "127.0.0.1", .port = 0, .n_loops = 2, .n_workers = 1, .max_body_bytes = 1000,
                 .max_client_batch = 8, .max_concurrent = 4, .request_timeout_ms = 2000};
    posy_err err;
    gw_server *s = gw_server_start(&o, &err);
    CHECK_MSG(s != NULL, "%s", err.msg);
    if (!s) return;
    int port = gw_server_port(s);
    CHECK(port > 0);
    char buf[8192];
    int fd = connect_to(port);
    CHECK(fd >= 0);
    CHECK_EQ_INT(http(fd, "GET", "/health", NULL, buf, sizeof buf), 503);
    CHECK_EQ_INT(http(fd, "POST", "/embed", "{\"inputs\":\"a\"}", buf, sizeof buf), 503);
    CHECK_STR_CONTAINS(buf, "\"error_type\":\"Unhealthy\"");
    CHECK_EQ_INT(http(fd, "POST", "/v1/embeddings", "{\"input\":\"a\"}", buf, sizeof buf), 503);
    CHECK_STR_CONTAINS(buf, "\"code\":\"model_loading\"");
    CHECK_EQ_INT(http(fd, "GET", "/metrics", NULL, buf, sizeof buf), 200);
    CHECK_STR_CONTAINS(buf, "posy_request_failures_total{reason=\"not_ready\"} 2");

    gw_model m = {.name = "test-model", .dim = 8, .max_input_tokens = 16, .device = "cpu", .dtype = "fp32"};
    gw_backend be = {0};
    gw_server_set_ready(s, &m, &be);
    CHECK_EQ_INT(http(fd, "GET", "/health", NULL, buf, sizeof buf), 200);
    CHECK_EQ_INT(http(fd, "GET", "/info", NULL, buf, sizeof buf), 200);
    CHECK_STR_CONTAINS(buf, "\"model_id\":\"test-model\"");
    CHECK_STR_CONTAINS(buf, "\"max_client_batch_size\":8");
    CHECK_EQ_INT(http(fd, "GET", "/v1/models", NULL, buf, sizeof buf), 200);
    CHECK_STR_CONTAINS(buf, "\"id\":\"test-model\"");
    CHECK_EQ_INT(http(fd, "GET", "/nope", NULL, buf, sizeof buf), 404);
    CHECK_EQ_INT(http(fd, "GET", "/embed", NULL, buf, sizeof buf), 405);
    CHECK_STR_CONTAINS(buf, "\"error_type\"");
    char big[1100];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK_EQ_INT(http(fd, "POST", "/v1/embeddings", big, buf, sizeof buf), 413);
    CHECK_STR_CONTAINS(buf, "\"code\":\"body_too_large\"");

    CHECK_EQ_INT(gw_server_drain(s, 5), 0);
    CHECK_EQ_INT(http(fd, "POST", "/embed", "{\"inputs\":\"a\"}", buf, sizeof buf), 503);
    CHECK_STR_CONTAINS(buf, "shutting down");
    CHECK_EQ_INT(http(fd, "GET", "/health", NULL, buf, sizeof buf), 503);
    close(fd);
    CHECK(connect_to(port) < 0);   /* listeners are closed */
    usleep(200000);                /* let the loops see the client's close */
    gw_server_stop(s);
    gw_server_free(s);
}

/* gw_server_stop closes connections clients left open (idle keep-alive, a
 * half-sent request) and gw_server_free releases everything (LeakSanitizer
 * checks that in the ASan build); each client then reads end-of-file. */
static void test_stop_closes_open_connections(void) {
    gw_opts o = {.host = "127.0.0.1", .port = 0, .n_loops = 2, .n_workers = 1, .max_body_bytes = 1000,
                 .max_client_batch = 8, .max_concurrent = 4, .request_timeout_ms = 5000};
    gw_server *s = start_ready(&o);
    if (!s) return;
    int port = gw_server_port(s);
    char buf[8192];
    int fds[6];
    for (int i = 0; i < 6; i++) {
        fds[i] = connect_to(port);
        CHECK(fds[i] >= 0);
        if (i < 4) CHECK_EQ_INT(http(fds[i], "GET", "/health", NULL, buf, sizeof buf), 200);
    }
    const char *partial = "POST /embed HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{\"inp";
    CHECK(write(fds[4], partial, strlen(partial)) == (ssize_t)strlen(partial));
    usleep(100000);   /* let the loops accept all six */
    CHECK_EQ_INT(gw_server_drain(s, 5), 0);
    gw_server_stop(s);
    gw_server_free(s);
    for (int i = 0; i < 6; i++) {
        if (fds[i] < 0) continue;
        ssize_t n = read(fds[i], buf, sizeof buf);
        CHECK_MSG(n == 0 || (n < 0 && errno == ECONNRESET), "connection %d: read returned %zd", i, n);
        close(fds[i]);
    }
}

static void drain_and_free(gw_server *s, int fd) {
    CHECK_EQ_INT(gw_server_drain(s, 5), 0);
    close(fd);
    usleep(100000);   /* let the loop see the client's close */
    gw_server_stop(s);
    gw_server_free(s);
}

/* The bearer check on plain strings (gw_auth.c). */
static void test_auth_bearer(void) {
    const char *k = "s3cr-et_KEY.9";
#define OK(h) gw_auth_bearer_ok(k, (h), strlen(h))
    CHECK(OK("Bearer s3cr-et_KEY.9"));
    CHECK(OK("bearer s3cr-et_KEY.9"));          /* the scheme is case-insensitive (RFC 9110) */
    CHECK(OK("BEARER   s3cr-et_KEY.9 \t"));     /* spaces after the scheme, trailing whitespace */
    CHECK(!OK("Bearer s3cr-et_KEY.8"));         /* last byte differs */
    CHECK(!OK("Bearer S3cr-et_KEY.9"));         /* the key itself is case-sensitive */
    CHECK(!OK("Bearer s3cr-et_KEY."));          /* a prefix of the key */
    CHECK(!OK("Bearer s3cr-et_KEY.99"));        /* the key as a prefix */
    CHECK(!OK("Bearer "));
    CHECK(!OK("Bearer"));
    CHECK(!OK("Basic s3cr-et_KEY.9"));
    CHECK(!OK("s3cr-et_KEY.9"));                /* no scheme */
    CHECK(!OK("Bearers3cr-et_KEY.9"));
    CHECK(!OK(""));
#undef OK
    CHECK(!gw_auth_bearer_ok(k, NULL, 0));
    CHECK(gw_auth_bearer_ok(k, "Bearer s3cr-et_KEY.9 and more", 20));   /* only len bytes count */
    CHECK(gw_auth_key_problem(k) == NULL);
    CHECK(gw_auth_key_problem("") != NULL);
    CHECK(gw_auth_key_problem(NULL) != NULL);
    CHECK(gw_auth_key_problem("two words") != NULL);
    CHECK(gw_auth_key_problem("tab\there") != NULL);
    CHECK(gw_auth_key_problem("caf\xc3\xa9") != NULL);
    char long_key[4098];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = 0;
    CHECK(gw_auth_key_problem(long_key) != NULL);
    long_key[4096] = 0;
    CHECK(gw_auth_key_problem(long_key) == NULL);
}

/* --api-key over sockets: 401 in the route's dialect with WWW-Authenticate,
 * counted; the right token passes (a POST then reaches the parser: 400 on
 * a bad body); /health and /metrics stay open; a bad key is refused at start. */
static void test_api_key(void) {
    gw_opts o = {.host = "127.0.0.1", .port = 0, .n_loops = 1, .n_workers = 1, .max_body_bytes = 1000,
                 .max_client_batch = 8, .max_concurrent = 4, .request_timeout_ms = 2000, .api_key = "two words"};
    posy_err err;
    posy_err_clear(&err);
    CHECK(gw_server_start(&o, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "--api-key");
    char key[] = "k-123";
    o.api_key = key;
    gw_server *s = start_ready(&o);
    if (!s) return;
    key[0] = 'x';   /* the server keeps its own copy */
    char buf[8192];
    int fd = connect_to(gw_server_port(s));
    CHECK(fd >= 0);
    const char *good = "Authorization: Bearer k-123\r\n", *bad = "Authorization: Bearer k-124\r\n";
    CHECK_EQ_INT(http(fd, "POST", "/v1/embeddings", "{\"input\":\"a\"}", buf, sizeof buf), 401);
    CHECK_STR_CONTAINS(buf, "\"code\":\"invalid_api_key\"");
    CHECK_STR_CONTAINS(buf, "an API key is required");
    CHECK(strcasestr(buf, "www-authenticate: Bearer") != NULL);
    CHECK_EQ_INT(http_h(fd, "POST", "/embed", bad, "{\"inputs\":\"a\"}", buf, sizeof buf), 401);
    CHECK_STR_CONTAINS(buf, "\"error_type\":\"Unauthorized\"");
    CHECK_STR_CONTAINS(buf, "the API key is wrong");
    CHECK_EQ_INT(http(fd, "GET", "/info", NULL, buf, sizeof buf), 401);
    CHECK_EQ_INT(http(fd, "GET", "/v1/models", NULL, buf, sizeof buf), 401);
    CHECK_EQ_INT(http_h(fd, "POST", "/tokenize", "Authorization: k-123\r\n", "{}", buf, sizeof buf), 401);
    CHECK_EQ_INT(http_h(fd, "GET", "/info", good, NULL, buf, sizeof buf), 200);
    CHECK_STR_CONTAINS(buf, "\"model_id\":\"test-model\"");
    CHECK_EQ_INT(http_h(fd, "GET", "/v1/models", "authorization: bearer k-123\r\n", NULL, buf, sizeof buf), 200);
    CHECK_EQ_INT(http_h(fd, "POST", "/v1/embeddings", good, "{", buf, sizeof buf), 400);   /* past the key */
    CHECK_STR_CONTAINS(buf, "\"code\":\"invalid_json\"");
    CHECK_EQ_INT(http(fd, "GET", "/health", NULL, buf, sizeof buf), 200);
    CHECK_EQ_INT(http(fd, "GET", "/metrics", NULL, buf, sizeof buf), 200);
    CHECK_STR_CONTAINS(buf, "posy_request_failures_total{reason=\"unauthorized\"} 5");
    CHECK_STR_CONTAINS(buf, "posy_requests_total{route=\"/v1/embeddings\",status=\"401\"} 1");
    CHECK_STR_CONTAINS(buf, "posy_requests_total{route=\"/info\",status=\"401\"} 1");
    drain_and_free(s, fd);
}

/* --cors-allow-origin's parsing and matching (gw_cors.c). */
static void test_cors_parse(void) {
    posy_err err;
    gw_cors *c = gw_cors_parse(" https://a.example.com , http://localhost:3000", &err);
    CHECK_MSG(c != NULL, "%s", err.msg);
#define ALLOW(o) gw_cors_allow(c, (o), strlen(o))
    CHECK(ALLOW("https://a.example.com") && !strcmp(ALLOW("https://a.example.com"), "https://a.example.com"));
    CHECK(ALLOW("HTTPS://A.example.COM") != NULL);          /* ASCII case does not matter */
    CHECK(!strcmp(ALLOW("http://localhost:3000"), "http://localhost:3000"));
    CHECK(ALLOW("http://localhost:3001") == NULL);
    CHECK(ALLOW("https://a.example.com.evil.net") == NULL);
    CHECK(ALLOW("https://a.example.co") == NULL);
    CHECK(ALLOW("null") == NULL);
    CHECK(gw_cors_allow(c, NULL, 0) == NULL);
    CHECK(!gw_cors_any(c));                                  /* a list: answers vary by Origin */
    gw_cors_free(c);
    c = gw_cors_parse(" * ", &err);
    CHECK(c && gw_cors_any(c));                              /* the wildcard, spaces around it or not */
    CHECK(c && !strcmp(ALLOW("https://anything.example"), "*"));
    CHECK(c && ALLOW("") == NULL);                           /* no Origin: not a cross-origin request */
#undef ALLOW
    gw_cors_free(c);
    const char *bad[] = {"", ",", "https://a.example.com,", "*,https://a.example.com", "a.example.com",
                         "https://a.example.com/", "https://a.example.com/app", "ftp://a.example.com", "https://",
                         "https://a b.com"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        posy_err_clear(&err);
        c = gw_cors_parse(bad[i], &err);
        CHECK_MSG(c == NULL, "'%s' accepted", bad[i]);
        CHECK_STR_CONTAINS(err.msg, "--cors-allow-origin");
        gw_cors_free(c);
    }
}

/* CORS over sockets, with an API key: the preflight answers 204 without
 * the key; allowed origins get Access-Control-Allow-Origin on every
 * answer (401 included, so the page can read the error), others none. */
static void test_cors_server(void) {
    gw_opts o = {.host = "127.0.0.1", .port = 0, .n_loops = 1, .n_workers = 1, .max_body_bytes = 1000,
                 .max_client_batch = 8, .max_concurrent = 4, .request_timeout_ms = 2000, .api_key = "k",
                 .cors = "https://app.example.com"};
    gw_server *s = start_ready(&o);
    if (!s) return;
    char buf[8192];
    int fd = connect_to(gw_server_port(s));
    CHECK(fd >= 0);
    const char *pre = "Origin: https://app.example.com\r\nAccess-Control-Request-Method: POST\r\n"
                      "Access-Control-Request-Headers: authorization, content-type\r\n";
    CHECK_EQ_INT(http_h(fd, "OPTIONS", "/v1/embeddings", pre, NULL, buf, sizeof buf), 204);
    CHECK(strcasestr(buf, "access-control-allow-origin: https://app.example.com\r\n") != NULL);
    CHECK(strcasestr(buf, "access-control-allow-methods: POST, OPTIONS") != NULL);
    CHECK(strcasestr(buf, "access-control-allow-headers: Content-Type, Authorization") != NULL);
    CHECK(strcasestr(buf, "vary: Origin") != NULL);
    CHECK_EQ_INT(http_h(fd, "OPTIONS", "/info", "Origin: https://app.example.com\r\n", NULL, buf, sizeof buf), 204);
    CHECK(strcasestr(buf, "access-control-allow-methods: GET, OPTIONS") != NULL);
    CHECK_EQ_INT(http_h(fd, "POST", "/embed", "Origin: https://app.example.com\r\n", "{}", buf, sizeof buf), 401);
    CHECK(strcasestr(buf, "access-control-allow-origin: https://app.example.com\r\n") != NULL);
    CHECK(strcasestr(buf, "access-control-expose-headers: x-tokenization-time") != NULL);
    CHECK_EQ_INT(http_h(fd, "GET", "/info", "Origin: https://app.example.com\r\nAuthorization: Bearer k\r\n", NULL,
                        buf, sizeof buf), 200);
    CHECK(strcasestr(buf, "access-control-allow-origin: https://app.example.com\r\n") != NULL);
    CHECK_EQ_INT(http_h(fd, "OPTIONS", "/v1/embeddings", "Origin: https://evil.example.com\r\n", NULL, buf,
                        sizeof buf), 204);
    CHECK(strcasestr(buf, "access-control-allow-origin") == NULL);
    CHECK_EQ_INT(http(fd, "GET", "/health", NULL, buf, sizeof buf), 200);
    CHECK(strcasestr(buf, "access-control-allow-origin") == NULL);   /* no Origin: not a browser's cross-origin call */
    CHECK_EQ_INT(http(fd, "GET", "/metrics", NULL, buf, sizeof buf), 200);
    CHECK_STR_CONTAINS(buf, "posy_requests_total{route=\"/v1/embeddings\",status=\"204\"} 2");
    drain_and_free(s, fd);
    o.cors = "https://a.example.com/path";
    posy_err err;
    posy_err_clear(&err);
    CHECK(gw_server_start(&o, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "--cors-allow-origin");
}

TEST_MAIN(TEST(test_lifecycle), TEST(test_stop_closes_open_connections), TEST(test_auth_bearer), TEST(test_api_key),
          TEST(test_cors_parse), TEST(test_cors_server))

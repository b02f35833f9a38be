/* gw_server: listeners, routing on the loop thread, the call lifecycle and
 * draining (see gw_server.h and gw_internal.h; the loop threads themselves,
 * and why all their h2o state lives on them, are in gw_loop.c).
 *
 * Only cheap work happens here: matching the route, admission (429), the
 * readiness and body-size checks, copying the body into a gw_call and
 * pushing it to the worker pool; answering small GET routes; writing
 * finished responses.  Each loop owns an SO_REUSEPORT listener so accepts
 * spread over loops without a shared accept thread.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gw_auth.h"
#include "gw_cors.h"
#include "gw_internal.h"
#include "posy_clock.h"
#include "posy_log.h"

typedef struct gw_handler {
    h2o_handler_t super;
    gw_server *srv;
} gw_handler;

static const char *reason_phrase(int status) {
    switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 499: return "Client Closed Request";
    default: return "Error";
    }
}

/* ---- routing ---------------------------------------------------------- */

typedef struct route_def {
    const char *path;
    gw_route route;
    int post;     /* 1: POST, handled on the pool; 0: GET, answered here */
    int openai;   /* error dialect */
} route_def;

static const route_def routes[] = {
    {"/v1/embeddings", GW_R_EMBEDDINGS, 1, 1}, {"/embeddings", GW_R_EMBEDDINGS, 1, 1},
    {"/embed", GW_R_EMBED, 1, 0},              {"/", GW_R_EMBED, 1, 0},
    {"/tokenize", GW_R_TOKENIZE, 1, 0},        {"/decode", GW_R_DECODE, 1, 0},
    {"/similarity", GW_R_SIMILARITY, 1, 0},     {"/rerank", GW_R_RERANK, 1, 0},
    {"/v1/rerank", GW_R_V1_RERANK, 1, 1},       {"/v2/rerank", GW_R_V1_RERANK, 1, 1},
    {"/predict", GW_R_PREDICT, 1, 0},          {"/classify", GW_R_CLASSIFY, 1, 1},
    {"/embed_sparse", GW_R_EMBED_SPARSE, 1, 0},   {"/score", GW_R_SCORE, 1, 1},
    {"/v1/score", GW_R_SCORE, 1, 1},            {"/embed_all", GW_R_EMBED_ALL, 1, 0},
    {"/health", GW_R_HEALTH, 0, 0},            {"/info", GW_R_INFO, 0, 0},
    {"/v1/models", GW_R_MODELS, 0, 1},         {"/metrics", GW_R_METRICS, 0, 0},
};

static const route_def *find_route(h2o_iovec_t path) {
    for (size_t i = 0; i < sizeof routes / sizeof routes[0]; i++)
        if (h2o_memis(path.base, path.len, routes[i].path, strlen(routes[i].path))) return &routes[i];
    return NULL;
}

/* Answer now, from the loop thread (h2o copies the body). */
static void respond_now(gw_server *s, h2o_req_t *req, gw_route r, int status, const char *ctype,
                        const char *body, size_t len) {
    req->res.status = status;
    req->res.reason = reason_phrase(status);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, ctype, strlen(ctype));
    req->res.content_length = len;
    h2o_send_inline(req, body, len);
    gw_metrics_request(&s->metrics, r, status);
}

static void respond_error_now(gw_server *s, h2o_req_t *req, const route_def *rd, int status, gw_fail why,
                              const char *code, const char *msg) {
    gw_buf b = {0};
    gw_error_body(&b, rd ? rd->openai : 0, status, code, msg);
    gw_metrics_fail(&s->metrics, why);
    respond_now(s, req, rd ? rd->route : GW_R_OTHER, status, "application/json", b.oom ? "{}" : b.p,
                b.oom ? 2 : b.len);
    gw_buf_free(&b);
}

/* The loop thread saw traffic (a request, a finished call): with busy
 * polling on, it polls its sockets and queue without sleeping for a while
 * (gw_loop.c), so the next event is not a wake-up away. */
static void loop_touch(gw_server *s, gw_loop *l) {
    uint64_t ns = atomic_load_explicit(&s->busy_poll_ns, memory_order_relaxed);
    if (ns) l->spin_until = posy_now_ns() + ns;
}

/* ---- the call lifecycle ------------------------------------------------- */

static void call_free(gw_call *c) {
    if (c->json) json_decref(c->json);
    free(c->body);
    free(c->ids);
    free(c->types);
    free(c->cu);
    free(c->skip);
    free(c->n_windows);
    free(c->out);
    free(c->tok);
    gw_buf_free(&c->resp);
    /* A worker may still be inside submit() holding mu while the job has
     * already completed and been answered: wait for it to let go. */
    pthread_mutex_lock(&c->mu);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_destroy(&c->mu);
    c->loop->n_calls--;
    atomic_fetch_sub(&c->srv->active, 1);
    free(c);
}

static void pending_add(gw_loop *l, gw_call *c) {
    c->pprev = NULL;
    c->pnext = l->pending;
    if (l->pending) l->pending->pprev = c;
    l->pending = c;
    c->watched = 1;
}

static void pending_remove(gw_loop *l, gw_call *c) {
    if (!c->watched) return;
    if (c->pprev) c->pprev->pnext = c->pnext; else l->pending = c->pnext;
    if (c->pnext) c->pnext->pprev = c->pprev;
    c->pnext = c->pprev = NULL;
    c->watched = 0;
}

/* The client is gone: stop the work.  Drops the job's queued sequences (a
 * no-op if it already completed); the call is answered or freed when its
 * final message arrives, as always. */
static void call_mark_gone(gw_call *c) {
    pthread_mutex_lock(&c->mu);
    int already = c->gone, submitted = c->submitted;
    c->gone = 1;
    pthread_mutex_unlock(&c->mu);
    if (!already && submitted) c->srv->backend.cancel(c->srv->backend.ctx, &c->job);
}

/* h2o frees the request: the response was written, or the connection died. */
static void on_req_dispose(void *p) {
    gw_call *c = *(gw_call **)p;
    if (c->sent) {
        call_free(c);
        return;
    }
    pending_remove(c->loop, c);
    c->req = NULL;
    call_mark_gone(c);
}

/* h2o's HTTP/1 connection does not read while a request is being handled,
 * so it notices a client that hung up only when the response is written.
 * To drop abandoned work early, each loop peeks at the sockets of its
 * pending calls every 20 ms: end-of-file or a reset means the client left.
 * (A client that half-closes after sending its request is treated as gone;
 * HTTP clients do not do that.) */
void gw_watch_disconnects(gw_loop *l) {
    uint64_t now = posy_now_ns();
    if (now - l->last_watch_ns < 20000000ull) return;
    l->last_watch_ns = now;
    for (gw_call *c = l->pending, *next; c; c = next) {
        next = c->pnext;
        h2o_socket_t *sock = c->req->conn->callbacks->get_socket ? c->req->conn->callbacks->get_socket(c->req->conn) : NULL;
        if (!sock) continue;
        char b;
        ssize_t n = recv(h2o_socket_get_fd(sock), &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            pending_remove(l, c);
            call_mark_gone(c);
        }
    }
}

void gw_call_finish(gw_call *c) { h2o_multithread_send_message(&c->loop->receiver, &c->msg); }

static void send_call_response(gw_call *c) {
    static h2o_generator_t generator = {NULL, NULL};
    h2o_req_t *req = c->req;
    gw_server *s = c->srv;
    if (c->resp.oom) {
        c->resp.len = 0;
        c->resp.oom = 0;
        gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory while building the response");
    }
    if (c->gone) {   /* the watch saw the client leave: answer into the void so h2o closes */
        c->status = 499;
        c->resp.len = 0;
        gw_metrics_fail(&s->metrics, GW_F_CLIENT_GONE);
    }
    req->res.status = c->status;
    req->res.reason = reason_phrase(c->status);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, c->ctype, strlen(c->ctype));
    uint64_t total = posy_now_ns() - c->t_start;
    snprintf(c->hdr_timing[3], sizeof c->hdr_timing[3], "%.3f", (double)total * 1e-6);
    static const char *names[4] = {"x-tokenization-time", "x-queue-time", "x-inference-time", "x-total-time"};
    for (int i = 0; i < 4; i++)
        if (c->hdr_timing[i][0])
            h2o_add_header_by_str(&req->pool, &req->res.headers, names[i], strlen(names[i]), 0, NULL,
                                  c->hdr_timing[i], strlen(c->hdr_timing[i]));
    gw_metrics_request(&s->metrics, c->route, c->status);
    if (c->status == 200) gw_hist_add(&s->metrics.hist[GW_H_REQUEST], total);
    c->sent = 1;
    req->res.content_length = c->resp.len;
    h2o_iovec_t body = h2o_iovec_init(c->resp.p, c->resp.len);
    h2o_start_response(req, &generator);
    h2o_send(req, &body, 1, H2O_SEND_STATE_FINAL);
}

/* Finished calls arriving on their loop thread. */
void gw_on_messages(h2o_multithread_receiver_t *rcv, h2o_linklist_t *messages) {
    while (!h2o_linklist_is_empty(messages)) {
        h2o_multithread_message_t *m = H2O_STRUCT_FROM_MEMBER(h2o_multithread_message_t, link, messages->next);
        h2o_linklist_unlink(&m->link);
        gw_call *c = H2O_STRUCT_FROM_MEMBER(gw_call, msg, m);
        pending_remove(c->loop, c);
        loop_touch(c->srv, c->loop);
        if (!c->req) {   /* the client left; nobody to answer */
            gw_metrics_request(&c->srv->metrics, c->route, 499);
            gw_metrics_fail(&c->srv->metrics, GW_F_CLIENT_GONE);
            call_free(c);
        } else {
            send_call_response(c);
        }
    }
}

static int start_call(gw_server *s, gw_loop *l, h2o_req_t *req, const route_def *rd) {
    gw_call *c = calloc(1, sizeof *c);
    char *body = c ? malloc(req->entity.len + 1) : NULL;
    if (!body) {
        free(c);
        respond_error_now(s, req, rd, 503, GW_F_OVERLOADED, "out_of_memory", "out of memory");
        return 0;
    }
    if (req->entity.len) memcpy(body, req->entity.base, req->entity.len);
    body[req->entity.len] = '\0';
    atomic_fetch_add(&s->active, 1);
    l->n_calls++;
    c->srv = s;
    c->loop = l;
    c->req = req;
    c->route = rd->route;
    c->openai = rd->openai;
    c->body = body;
    c->body_len = req->entity.len;
    c->t_start = posy_now_ns();
    c->status = 500;
    c->ctype = "application/json";
    pthread_mutex_init(&c->mu, NULL);
    gw_call **slot = h2o_mem_alloc_shared(&req->pool, sizeof *slot, on_req_dispose);
    *slot = c;
    pending_add(l, c);
    c->task.fn = gw_stage_parse;
    if (gw_pool_push(s->pool, &c->task)) {   /* the server is stopping */
        pending_remove(l, c);
        gw_call_fail(c, 503, GW_F_SHUTTING_DOWN, "shutting_down", "the server is shutting down");
        send_call_response(c);
    }
    return 0;
}

/* --cors-allow-origin: the CORS headers every answer to an allowed origin
 * carries (added now, sent with whatever response follows). */
static void cors_headers(gw_server *s, h2o_req_t *req) {
    static const char expose[] = "x-tokenization-time, x-queue-time, x-inference-time, x-total-time";
    ssize_t oi = h2o_find_header_by_str(&req->headers, H2O_STRLIT("origin"), -1);
    const char *allow = oi >= 0 ? gw_cors_allow(s->cors, req->headers.entries[oi].value.base,
                                                req->headers.entries[oi].value.len) : NULL;
    if (!gw_cors_any(s->cors))   /* the answer depends on Origin: caches must know */
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_VARY, NULL, H2O_STRLIT("Origin"));
    if (!allow) return;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ACCESS_CONTROL_ALLOW_ORIGIN, NULL, allow, strlen(allow));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-expose-headers"), 0, NULL,
                          expose, sizeof expose - 1);
}

/* The preflight a browser sends before a cross-origin POST or a request
 * with Authorization: 204, the route's method, the headers posy reads. */
static void respond_preflight(gw_server *s, h2o_req_t *req, const route_def *rd) {
    const char *methods = rd->post ? "POST, OPTIONS" : "GET, OPTIONS";
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-methods"), 0, NULL,
                          methods, strlen(methods));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-headers"), 0, NULL,
                          H2O_STRLIT("Content-Type, Authorization"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-max-age"), 0, NULL,
                          H2O_STRLIT("86400"));
    req->res.status = 204;
    req->res.reason = reason_phrase(204);
    req->res.content_length = 0;
    h2o_send_inline(req, "", 0);
    gw_metrics_request(&s->metrics, rd->route, 204);
}

static int on_req(h2o_handler_t *self, h2o_req_t *req) {
    gw_server *s = ((gw_handler *)self)->srv;
    gw_loop *l = (gw_loop *)req->conn->ctx;
    const route_def *rd = find_route(req->path_normalized);
    int is_post = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST"));
    int is_get = h2o_memis(req->method.base, req->method.len, H2O_STRLIT("GET"));
    loop_touch(s, l);
    if (s->cors) cors_headers(s, req);
    if (!rd) {
        respond_error_now(s, req, NULL, 404, GW_F_NOT_FOUND, "not_found", "no such route");
        return 0;
    }
    if (s->cors && h2o_memis(req->method.base, req->method.len, H2O_STRLIT("OPTIONS"))) {   /* never needs the key */
        respond_preflight(s, req, rd);
        return 0;
    }
    if ((rd->post && !is_post) || (!rd->post && !is_get)) {
        respond_error_now(s, req, rd, 405, GW_F_NOT_FOUND, "method_not_allowed",
                          rd->post ? "this route takes POST" : "this route takes GET");
        return 0;
    }
    if (s->opts.api_key && rd->route != GW_R_HEALTH && rd->route != GW_R_METRICS) {
        ssize_t hi = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, -1);
        const h2o_iovec_t *hv = hi >= 0 ? &req->headers.entries[hi].value : NULL;
        if (!gw_auth_bearer_ok(s->opts.api_key, hv ? hv->base : NULL, hv ? hv->len : 0)) {
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_WWW_AUTHENTICATE, NULL, H2O_STRLIT("Bearer"));
            respond_error_now(s, req, rd, 401, GW_F_UNAUTHORIZED, "invalid_api_key",
                              hv ? "the API key is wrong (send 'Authorization: Bearer <key>' with the server's --api-key)"
                                 : "an API key is required: send 'Authorization: Bearer <key>' (the server's --api-key)");
            return 0;
        }
    }
    if (!rd->post) {
        gw_buf b = {0};
        int status = 200;
        const char *ctype = gw_get_route(s, rd->route, &b, &status) ? "text/plain; version=0.0.4" : "application/json";
        respond_now(s, req, rd->route, status, ctype, b.p ? b.p : "", b.len);
        gw_buf_free(&b);
        return 0;
    }
    if (atomic_load(&s->draining)) {
        respond_error_now(s, req, rd, 503, GW_F_SHUTTING_DOWN, "shutting_down", "the server is shutting down");
        return 0;
    }
    if (!atomic_load(&s->ready)) {
        respond_error_now(s, req, rd, 503, GW_F_NOT_READY, "model_loading", "the model is still loading");
        return 0;
    }
    if (req->entity.len > s->opts.max_body_bytes) {
        char msg[128];
        snprintf(msg, sizeof msg, "the request body has %zu bytes, more than the limit of %zu", req->entity.len,
                 s->opts.max_body_bytes);
        respond_error_now(s, req, rd, 413, GW_F_TOO_LARGE, "body_too_large", msg);
        return 0;
    }
    if (atomic_load(&s->active) >= s->opts.max_concurrent) {
        respond_error_now(s, req, rd, 429, GW_F_OVERLOADED, "overloaded",
                          "too many concurrent requests; retry later");
        return 0;
    }
    return start_call(s, l, req, rd);
}

/* ---- listeners and loop threads -------------------------------------- */

static int open_listener(const char *host, int port, int *bound_port, posy_err *err) {
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc) {
        posy_err_set(err, POSY_E_INVALID, "--host %s: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) || bind(fd, ai->ai_addr, ai->ai_addrlen) ||
        listen(fd, 4096)) {
        posy_err_set(err, POSY_E_IO, "cannot listen on %s:%d: %s (is another server using the port? try --port)",
                     host, port, strerror(errno));
        if (fd >= 0) close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

gw_server *gw_server_start(const gw_opts *opts, posy_err *err) {
    gw_server *s = calloc(1, sizeof *s);
    if (!s) {
        posy_err_set(err, POSY_E_NOMEM, "out of memory");
        return NULL;
    }
    s->opts = *opts;
    if (opts->api_key) {
        const char *why = gw_auth_key_problem(opts->api_key);
        s->opts.api_key = why ? NULL : strdup(opts->api_key);
        if (why || !s->opts.api_key) {
            posy_err_set(err, POSY_E_INVALID, "--api-key: %s", why ? why : "out of memory");
            free(s);
            return NULL;
        }
    }
    if (opts->cors) {
        s->cors = gw_cors_parse(opts->cors, err);
        s->opts.cors = NULL; /* the parsed list is what is used (the caller's string need not outlive this) */
        if (!s->cors) {
            free((char *)s->opts.api_key);
            free(s);
            return NULL;
        }
    }
    pthread_mutex_init(&s->start_mu, NULL);
    pthread_cond_init(&s->start_cv, NULL);
    gw_metrics_init(&s->metrics);
    h2o_config_init(&s->config);
    /* h2o refuses bodies over this itself, before reading them (gw_h2oerr.c makes
     * that answer JSON too); up to it posy reads the body and answers 413 itself. */
    s->config.max_request_entity_size = opts->max_body_bytes * 2 + 65536;
    if (opts->request_timeout_ms > 0) s->config.http1.req_timeout = (uint64_t)opts->request_timeout_ms;
    h2o_hostconf_t *host = h2o_config_register_host(&s->config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    gw_json_h2o_errors(s, host);
    gw_handler *h = (gw_handler *)h2o_create_handler(path, sizeof *h);
    h->super.on_req = on_req;
    h->srv = s;
    s->pool = gw_pool_open(opts->n_workers, gw_worker_exit);
    s->loops = calloc((size_t)opts->n_loops, sizeof *s->loops);
    if (!s->pool || !s->loops) {
        posy_err_set(err, POSY_E_NOMEM, "cannot start %d worker threads", opts->n_workers);
        return NULL;
    }
    int port = opts->port;
    for (int i = 0; i < opts->n_loops; i++) {
        gw_loop *l = &s->loops[i];
        l->srv = s;
        l->idx = i;
        l->listen_fd = open_listener(opts->host, port, &port, err);
        if (l->listen_fd < 0) return NULL;   /* start-up failure: the process exits */
    }
    s->opts.port = port;
    if (gw_loops_start(s, err)) return NULL;
    return s;
}

int gw_server_port(const gw_server *s) { return s->opts.port; }

void gw_server_set_busy_poll(gw_server *s, int us) {
    gw_pool_set_spin(s->pool, us);
    /* The event loops poll too only with POSY_GW_LOOP_POLL=1: on an H100
     * host (run 83, docs/BENCHMARKS.md) it took one connection's p50 from
     * 116 to 108 us but cost two more polling cores and a little p99 at
     * 64 connections; on the 2-core development VM, polling loops beside
     * the polling step thread and worker starved everything. */
    const char *e = getenv("POSY_GW_LOOP_POLL");
    int loops = e && !strcmp(e, "1");
    atomic_store(&s->busy_poll_ns, us > 0 && loops ? (uint64_t)us * 1000u : 0);
}

void gw_server_set_ready(gw_server *s, const gw_model *model, const gw_backend *backend) {
    s->model = *model;
    s->backend = *backend;
    atomic_store(&s->ready, 1);
}

gw_metrics *gw_server_metrics(gw_server *s) { return &s->metrics; }

int gw_server_drain(gw_server *s, double timeout_s) {
    atomic_store(&s->draining, 1);
    double t_end = posy_now_s() + timeout_s;
    while (atomic_load(&s->active) > 0 && posy_now_s() < t_end) usleep(5000);
    usleep(100000);   /* let loops flush the last responses to their sockets */
    return atomic_load(&s->active);
}

void gw_server_stop(gw_server *s) {
    /* Workers first: they finish their queued stages and post the results
     * to loops that still run.  Backend completions arriving later (only
     * after a drain timeout) are refused by the closed pool. */
    gw_pool_close(s->pool);
    gw_loops_stop(s);
}

void gw_server_free(gw_server *s) {
    for (int i = 0; i < s->n_loops; i++)
        if (!s->loops[i].clean) return;   /* a call is still in flight: leave everything (gw_loop.c) */
    h2o_config_dispose(&s->config);
    gw_pool_free(s->pool);
    pthread_mutex_destroy(&s->start_mu);
    pthread_cond_destroy(&s->start_cv);
    free(s->loops);
    free((char *)s->opts.api_key);
    gw_cors_free(s->cors);
    free(s);
}

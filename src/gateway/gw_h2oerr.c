/* gw_h2oerr: h2o's own error answers in posy's JSON error shape.
 *
 * h2o refuses some requests before any handler runs: bodies over
 * max_request_entity_size (413; posy sets that limit to twice
 * --max-body-bytes and answers 413 itself below it, see gw_server.c),
 * broken chunked encoding or content-length (400).  It writes those with
 * h2o_send_error_generic as text/plain, after binding the request to the
 * host's fallback path.  A response filter on that fallback path replaces
 * such a text/plain error by {"error":{...}} on the OpenAI routes and
 * {"error","error_type"} elsewhere, like every other posy error.  Requests
 * that reach posy's handler are bound to the "/" path and never pass here.
 */
#include <stdio.h>

#include "gw_internal.h"

typedef struct {
    h2o_filter_t super;
    gw_server *srv;
} err_filter;

typedef struct {
    h2o_ostream_t super;
    h2o_iovec_t body;
} err_ostream;

static void err_send(h2o_ostream_t *self, h2o_req_t *req, h2o_iovec_t *bufs, size_t n, h2o_send_state_t state) {
    err_ostream *o = (err_ostream *)self;
    (void)bufs;
    /* h2o_send_inline sends the whole text in one final call; HEAD sends none */
    h2o_ostream_send_next(self, req, n ? &o->body : NULL, n ? 1 : 0, state);
}

static int is_openai_path(h2o_iovec_t p) {
    return (p.len >= 4 && !memcmp(p.base, "/v1/", 4)) || (p.len >= 11 && !memcmp(p.base, "/embeddings", 11));
}

static void on_setup_ostream(h2o_filter_t *self, h2o_req_t *req, h2o_ostream_t **slot) {
    err_filter *f = (err_filter *)self;
    int st = req->res.status;
    if (st == 400 || st == 413) {
        char msg[200];
        const char *code = st == 413 ? "body_too_large" : "invalid_request";
        if (st == 413)
            snprintf(msg, sizeof msg, "the request body is larger than the limit of %zu bytes",
                     f->srv->opts.max_body_bytes);
        else
            snprintf(msg, sizeof msg, "malformed HTTP request: %s", req->res.reason ? req->res.reason : "bad request");
        gw_buf b = {0};
        gw_error_body(&b, is_openai_path(req->input.path), st, code, msg);
        if (!b.oom) {
            err_ostream *o = (err_ostream *)h2o_add_ostream(req, sizeof *o, slot);
            o->super.do_send = err_send;
            o->body = h2o_strdup(&req->pool, b.p, b.len);
            req->res.content_length = b.len;
            memset(&req->res.headers, 0, sizeof req->res.headers);
            h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/json"));
            slot = &o->super.next;
            gw_metrics_fail(&f->srv->metrics, st == 413 ? GW_F_TOO_LARGE : GW_F_MALFORMED);
        }
        gw_buf_free(&b);
    }
    h2o_setup_next_ostream(req, slot);
}

void gw_json_h2o_errors(gw_server *s, h2o_hostconf_t *host) {
    err_filter *f = (err_filter *)h2o_create_filter(&host->fallback_path, sizeof *f);
    f->super.on_setup_ostream = on_setup_ostream;
    f->srv = s;
}

/* gw_errors: error responses in the two dialects.
 *
 * OpenAI routes:  {"error":{"message":"...","type":"invalid_request_error","code":"..."}}
 * TEI routes:     {"error":"...","error_type":"Validation"}
 * The status code carries the class (400 malformed, 401 no or wrong API
 * key, 413 too large, 422 invalid value, 429 overloaded, 503 not ready);
 * `code` names the exact problem for programs ("invalid_json", "input_too_long", ...).
 */
#include <stdarg.h>
#include <stdio.h>

#include "gw_internal.h"

static const char *openai_type(int status) {
    switch (status) {
    case 429: return "rate_limit_error";
    case 503: return "service_unavailable_error";
    case 500: return "server_error";
    case 404: return "not_found_error";
    case 501: return "not_implemented_error";
    default: return "invalid_request_error";
    }
}

static const char *tei_type(int status) {
    switch (status) {
    case 401: return "Unauthorized";
    case 429: return "Overloaded";
    case 503: return "Unhealthy";
    case 500: return "Backend";
    default: return "Validation";
    }
}

void gw_error_body(gw_buf *b, int openai, int status, const char *code, const char *msg) {
    size_t n = strlen(msg);
    if (openai) {
        gw_buf_puts(b, "{\"error\":{\"message\":");
        gw_buf_json_str(b, msg, n);
        gw_buf_puts(b, ",\"type\":\"");
        gw_buf_puts(b, openai_type(status));
        gw_buf_puts(b, "\",\"code\":");
        gw_buf_json_str(b, code, strlen(code));
        gw_buf_puts(b, "}}");
    } else {
        gw_buf_puts(b, "{\"error\":");
        gw_buf_json_str(b, msg, n);
        gw_buf_puts(b, ",\"error_type\":\"");
        gw_buf_puts(b, tei_type(status));
        gw_buf_puts(b, "\"}");
    }
}

void gw_call_fail(gw_call *c, int status, gw_fail reason, const char *code, const char *fmt, ...) {
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->resp.len = 0;
    gw_error_body(&c->resp, c->openai, status, code, msg);
    c->status = status;
    c->ctype = "application/json";
    gw_metrics_fail(&c->srv->metrics, reason);
}

/* gw_buf: see gw_buf.h. */
#include "gw_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

char *gw_buf_reserve(gw_buf *b, size_t n) {
    if (b->oom) return NULL;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return NULL;
        }
        b->p = p;
        b->cap = cap;
    }
    return b->p + b->len;
}

void gw_buf_free(gw_buf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

void gw_buf_printf(gw_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        gw_buf_put(b, tmp, (size_t)n);
        return;
    }
    char *w = gw_buf_reserve(b, (size_t)n + 1);
    if (!w) return;
    va_start(ap, fmt);
    vsnprintf(w, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void gw_buf_json_str(gw_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    char *w = gw_buf_reserve(b, n * 6 + 2);
    if (!w) return;
    char *p = w;
    *p++ = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else if (c < 0x20) {
            *p++ = '\\';
            switch (c) {
            case '\n': *p++ = 'n'; break;
            case '\r': *p++ = 'r'; break;
            case '\t': *p++ = 't'; break;
            default:
                *p++ = 'u'; *p++ = '0'; *p++ = '0';
                *p++ = hex[c >> 4]; *p++ = hex[c & 15];
            }
        } else {
            *p++ = (char)c;
        }
    }
    *p++ = '"';
    b->len += (size_t)(p - w);
}

/* gw_buf: a growable byte buffer for building responses.
 *
 * Serializers reserve the worst case for a run of output once (e.g. 16 bytes
 * per float) and then write with plain pointer stores, so the inner loops
 * carry no bounds checks.  A failed allocation sets `oom` and later appends
 * become no-ops; the caller checks once at the end and answers 500.
 */
#ifndef GW_BUF_H
#define GW_BUF_H

#include <stddef.h>
#include <string.h>

typedef struct gw_buf {
    char *p;
    size_t len, cap;
    int oom;
} gw_buf;

/* Make room for `n` more bytes; returns the write position or NULL (oom). */
char *gw_buf_reserve(gw_buf *b, size_t n);
void gw_buf_free(gw_buf *b);

static inline void gw_buf_put(gw_buf *b, const char *s, size_t n) {
    char *w = gw_buf_reserve(b, n);
    if (!w) return;
    memcpy(w, s, n);
    b->len += n;
}
static inline void gw_buf_puts(gw_buf *b, const char *s) { gw_buf_put(b, s, strlen(s)); }
static inline void gw_buf_putc(gw_buf *b, char c) { gw_buf_put(b, &c, 1); }
void gw_buf_printf(gw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal (quotes included) with the escapes JSON requires. */
void gw_buf_json_str(gw_buf *b, const char *s, size_t n);

#endif

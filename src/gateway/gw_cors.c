/* gw_cors: see gw_cors.h. */
#include "gw_cors.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define GW_CORS_MAX 64

struct gw_cors {
    int any;                       /* "*" */
    int n;
    char *origins[GW_CORS_MAX];    /* exact origins, as given */
};

void gw_cors_free(gw_cors *c) {
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->origins[i]);
    free(c);
}

/* scheme://host[:port], nothing after: what a browser sends as Origin */
static int origin_ok(const char *o, size_t n) {
    size_t p = n >= 7 && !strncasecmp(o, "http://", 7) ? 7 : n >= 8 && !strncasecmp(o, "https://", 8) ? 8 : 0;
    if (!p || p == n) return 0;
    for (size_t i = p; i < n; i++)
        if (o[i] <= 0x20 || o[i] >= 0x7f || o[i] == '/' || o[i] == '?' || o[i] == '#' || o[i] == ',') return 0;
    return 1;
}

gw_cors *gw_cors_parse(const char *spec, posy_err *err) {
    gw_cors *c = calloc(1, sizeof *c);
    if (!c) {
        posy_err_set(err, POSY_E_NOMEM, "out of memory");
        return NULL;
    }
    const char *s = spec ? spec : "";
    for (;;) {
        const char *e = strchr(s, ',');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        while (n && (*s == ' ' || *s == '\t')) s++, n--;
        while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
        if (n == 1 && *s == '*') {
            c->any = 1;
        } else if (!n) {
            posy_err_set(err, POSY_E_INVALID, "--cors-allow-origin: an empty entry in '%s' (give * or a comma-separated list of origins)", spec ? spec : "");
            goto bad;
        } else if (!origin_ok(s, n)) {
            posy_err_set(err, POSY_E_INVALID, "--cors-allow-origin: '%.*s' is not an origin like https://example.com or http://localhost:3000 (scheme, host, optional port; no path)", (int)(n > 200 ? 200 : n), s);
            goto bad;
        } else if (c->n == GW_CORS_MAX) {
            posy_err_set(err, POSY_E_INVALID, "--cors-allow-origin: more than %d origins", GW_CORS_MAX);
            goto bad;
        } else if (!(c->origins[c->n] = strndup(s, n))) {
            posy_err_set(err, POSY_E_NOMEM, "out of memory");
            goto bad;
        } else {
            c->n++;
        }
        if (!e) break;
        s = e + 1;
    }
    if (c->any && c->n) {
        posy_err_set(err, POSY_E_INVALID, "--cors-allow-origin: '*' allows every origin; give it alone, not beside a list");
        goto bad;
    }
    return c;
bad:
    gw_cors_free(c);
    return NULL;
}

int gw_cors_any(const gw_cors *c) { return c && c->any; }

const char *gw_cors_allow(const gw_cors *c, const char *origin, size_t len) {
    if (!c || !origin || !len) return NULL;
    if (c->any) return "*";
    for (int i = 0; i < c->n; i++)
        if (strlen(c->origins[i]) == len && !strncasecmp(c->origins[i], origin, len)) return c->origins[i];
    return NULL;
}

/* gw_cors: cross-origin requests from browsers (--cors-allow-origin).
 *
 * A web page that calls posy directly (a search box, a RAG demo) is
 * refused by the browser unless the server names the page's origin in
 * Access-Control-Allow-Origin and answers the OPTIONS preflight that
 * precedes a JSON POST or a request with an Authorization header.  The
 * allowed origins are `*` (any) or a comma-separated list of exact
 * origins (scheme://host[:port]); the matching is here, apart from the
 * loop, so it is unit-tested on plain strings.
 */
#ifndef GW_CORS_H
#define GW_CORS_H

#include <stddef.h>
#include "posy_err.h"

typedef struct gw_cors gw_cors;

/* Parse the flag's value; NULL with err set when it is malformed (empty
 * entries, an entry that is not http(s)://host[:port] without a path, or
 * `*` beside other entries). */
gw_cors *gw_cors_parse(const char *spec, posy_err *err);
void gw_cors_free(gw_cors *c);

/* The Access-Control-Allow-Origin value for a request whose Origin header
 * is origin[0..len) ("*" with the wildcard, else the configured origin
 * that equals it, ignoring ASCII case), or NULL: no CORS headers. */
const char *gw_cors_allow(const gw_cors *c, const char *origin, size_t len);
/* Whether every origin is allowed (`*`): then the answer does not depend on
 * the request's Origin (no Vary header). */
int gw_cors_any(const gw_cors *c);

#endif

/* gw_auth: the optional API key of the HTTP front (--api-key).
 *
 * An embedding server on a shared network should not embed for anyone who
 * finds the port: with a key set, every route but /health (load balancers'
 * probes) and /metrics (scrapers) wants `Authorization: Bearer <key>`, as
 * OpenAI clients send it (their `api_key`).  The check lives here, apart
 * from the loop's routing, so its parsing is unit-tested on plain strings.
 */
#ifndef GW_AUTH_H
#define GW_AUTH_H

#include <stddef.h>

/* NULL when `key` is usable as an API key, else why not (a static string):
 * it must be 1..4096 visible ASCII characters (no spaces or controls), so
 * that it fits one header token. */
const char *gw_auth_key_problem(const char *key);

/* 1 when the Authorization header value hv[0..len) carries `key` as a
 * bearer token: the scheme "Bearer" in any case, one or more spaces, the
 * key, optional trailing spaces or tabs.  Compares in time independent of
 * where the token differs from the key.  hv may be NULL (no header). */
int gw_auth_bearer_ok(const char *key, const char *hv, size_t len);

#endif

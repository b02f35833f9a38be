/* gw_float: float32 -> JSON text and float32 -> base64, the hot path of
 * every embeddings response.
 *
 * gw_float_fmt writes a float with 9 significant digits (trailing zeros
 * dropped), which is enough to round-trip any float32 exactly, using one
 * double multiply by a tabulated power of ten and integer digit writing: no
 * printf, no locale.  See gw_float.c for why the double arithmetic cannot
 * break the round trip.  NaN and infinities (which a model should never
 * produce) become JSON `null` so the document stays valid.
 */
#ifndef GW_FLOAT_H
#define GW_FLOAT_H

#include <stddef.h>
#include "gw_buf.h"

#define GW_FLOAT_MAX 16   /* longest output: "-1.23456789e-38" is 15 bytes */

/* Write `f` at `out` (room for GW_FLOAT_MAX bytes, no NUL); returns the length. */
int gw_float_fmt(float f, char *out);

/* Append `[v0,v1,...]`.  On x86-64 CPUs with AVX2 the common case runs
 * eight floats at a time; the text is identical either way. */
void gw_json_floats(gw_buf *b, const float *v, size_t n);
/* Tests: 1 = use only the scalar path, 0 = back to automatic. */
void gw_float_force_scalar(int on);

/* Standard base64 (RFC 4648, '+/' alphabet, '=' padding) of n bytes into dst
 * (room for 4*ceil(n/3) bytes); returns the length.  Embeddings go out as the
 * little-endian float32 bytes, as OpenAI sends them. */
size_t gw_base64(const void *src, size_t n, char *dst);
/* Append a JSON string holding the base64 of n floats (little-endian). */
void gw_json_base64_floats(gw_buf *b, const float *v, size_t n);

#endif

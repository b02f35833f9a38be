/* posy_vecenc: how an embedding leaves posy: Matryoshka truncation, then
 * one of the output types (float32, int8, uint8, binary, ubinary), as JSON
 * numbers or as base64 of the raw bytes.  docs/ENCODINGS.md states every
 * formula so a client can reproduce the bytes; this module is the one
 * implementation the gateway and the CLI call.
 *
 * Pure functions over caller buffers: no allocation, no global state, no
 * dependency on the rest of posy, so tests can pin exact bytes.
 *
 *   float32  the values; base64 = their IEEE-754 little-endian bytes
 *   int8     symmetric per-vector scale s = 127 / max|x|,
 *            q = clamp(round_half_away(x * s), -127, 127) (computed in double)
 *   uint8    q + 128 (1..255) with the same s
 *   ubinary  bit = x > 0, packed 8 per byte, most significant bit first,
 *            last byte zero-padded (numpy.packbits; sentence-transformers'
 *            quantize_embeddings "ubinary")
 *   binary   ubinary byte - 128 as int8 (sentence-transformers "binary")
 * NaN counts as 0 everywhere (never a set bit, never part of max|x|).
 */
#ifndef POSY_VECENC_H
#define POSY_VECENC_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    POSY_VEC_FLOAT32 = 0,
    POSY_VEC_INT8 = 1,
    POSY_VEC_UINT8 = 2,
    POSY_VEC_BINARY = 3,
    POSY_VEC_UBINARY = 4,
} posy_vec_dtype;

typedef struct posy_vecenc {
    posy_vec_dtype dtype;
    int base64;               /* 1: one base64 string of the raw bytes; 0: a JSON array of numbers */
} posy_vecenc;

/* Read a request's choice.  encoding_format: NULL/"float" (JSON), "base64",
 * or a dtype name as shorthand for that dtype in JSON ("int8", "uint8",
 * "binary", "ubinary").  output_dtype (a posy extension, Voyage's name):
 * NULL/"float"/"float32", "int8", "uint8", "binary", "ubinary"; combined
 * with encoding_format "base64" it gives base64 of that dtype's bytes.
 * Returns 0, or -1 with a message for the client in msg[cap]. */
int posy_vecenc_parse(const char *encoding_format, const char *output_dtype, posy_vecenc *out, char *msg,
                      size_t cap);
const char *posy_vecenc_dtype_name(posy_vec_dtype t);

/* Matryoshka: keep v[0..dims) of a dim-long vector and, if renormalize,
 * scale it to unit L2 norm (sum of squares in double; an all-zero prefix
 * stays zero).  dims <= 0 or >= dim keeps the vector as is (no renormalising
 * then: a normalised model output already has unit norm).  Returns the
 * length kept. */
int posy_vecenc_dims(float *v, int dim, int dims, int renormalize);

/* Bytes of one encoded vector of n values. */
size_t posy_vecenc_nbytes(posy_vec_dtype t, int n);

/* Encode n values into out (posy_vecenc_nbytes bytes).  float32: the
 * little-endian bytes.  Returns the int8/uint8 scale s (0 when the vector
 * is all zero or NaN; q is then all 0 / 128), 1 for the other types. */
float posy_vecenc_encode(posy_vec_dtype t, const float *v, int n, void *out);

/* Just the int8 step: q[0..n) and the returned scale, as above. */
float posy_vecenc_int8(const float *v, int n, int8_t *q);
/* Sign bits, MSB first (ubinary). */
void posy_vecenc_ubinary(const float *v, int n, uint8_t *out);

/* Standard base64 (RFC 4648, '+/' alphabet, '=' padding) of n bytes into
 * dst (room for posy_vecenc_base64_len(n) bytes, no NUL written); returns
 * the length. */
size_t posy_vecenc_base64_len(size_t n);
size_t posy_vecenc_base64(const void *src, size_t n, char *dst);

#endif

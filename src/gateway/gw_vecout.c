/* gw_vecout: an embedding in one of the quantized output types (int8,
 * uint8, binary, ubinary) as a JSON array of integers or a JSON string of
 * base64, appended to a response.  The encoding itself is posy_vecenc's
 * (docs/ENCODINGS.md); this file only frames it as JSON.  float32 stays on
 * gw_float.c's fast paths.
 */
#include <stdint.h>
#include <stdio.h>
#include "gw_vecout.h"

float gw_json_vec_quant(gw_buf *b, const float *v, int n, posy_vecenc enc) {
    uint8_t stack[4096], *raw = stack;
    size_t nb = posy_vecenc_nbytes(enc.dtype, n);
    if (nb > sizeof stack && !(raw = malloc(nb))) { b->oom = 1; return 0.0f; }
    float s = posy_vecenc_encode(enc.dtype, v, n, raw);
    if (enc.base64) {
        char *w = gw_buf_reserve(b, posy_vecenc_base64_len(nb) + 2);
        if (w) {
            w[0] = '"';
            size_t len = posy_vecenc_base64(raw, nb, w + 1);
            w[len + 1] = '"';
            b->len += len + 2;
        }
    } else {
        int is_signed = enc.dtype == POSY_VEC_INT8 || enc.dtype == POSY_VEC_BINARY;
        char *w = gw_buf_reserve(b, nb * 5 + 2);
        if (w) {
            char *p = w;
            *p++ = '[';
            for (size_t i = 0; i < nb; i++) {
                int x = is_signed ? (int)(int8_t)raw[i] : (int)raw[i];
                if (i) *p++ = ',';
                p += snprintf(p, 5, "%d", x);
            }
            *p++ = ']';
            b->len += (size_t)(p - w);
        }
    }
    if (raw != stack) free(raw);
    return s;
}

/* gw_vecout: quantized embeddings into a JSON response (gw_vecout.c). */
#ifndef GW_VECOUT_H
#define GW_VECOUT_H

#include <stdlib.h>
#include "gw_buf.h"
#include "posy_vecenc.h"

/* Append v[0..n) encoded as enc (a non-float dtype): `[q0,q1,...]` or
 * `"base64"`.  Returns the int8/uint8 scale (1 for binary types). */
float gw_json_vec_quant(gw_buf *b, const float *v, int n, posy_vecenc enc);

#endif

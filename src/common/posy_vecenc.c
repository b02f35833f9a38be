/* posy_vecenc: output encodings of embeddings (posy_vecenc.h, and the
 * exact definitions in docs/ENCODINGS.md).
 *
 * int8 is symmetric per vector rather than calibrated per dimension (as
 * sentence-transformers' quantize_embeddings does) because a server sees
 * one vector at a time and has no calibration set; the scale is returned so
 * a client can de-quantize, and cosine similarity needs no scale at all.
 * The product x * s is taken in double and rounded half away from zero
 * (C round()), which a client reproduces with numpy in float64.  Binary
 * packing follows numpy.packbits (MSB first), which is what
 * sentence-transformers uses, so its "binary"/"ubinary" bytes match ours.
 */
#include "posy_vecenc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const struct { const char *name; posy_vec_dtype t; } vec_names[] = {
    {"float", POSY_VEC_FLOAT32}, {"float32", POSY_VEC_FLOAT32}, {"int8", POSY_VEC_INT8},
    {"uint8", POSY_VEC_UINT8},   {"binary", POSY_VEC_BINARY},   {"ubinary", POSY_VEC_UBINARY},
};

static int vec_lookup(const char *s, posy_vec_dtype *t) {
    for (size_t i = 0; i < sizeof vec_names / sizeof vec_names[0]; i++)
        if (!strcmp(s, vec_names[i].name)) { *t = vec_names[i].t; return 0; }
    return -1;
}

int posy_vecenc_parse(const char *encoding_format, const char *output_dtype, posy_vecenc *out, char *msg,
                      size_t cap) {
    out->dtype = POSY_VEC_FLOAT32;
    out->base64 = 0;
    posy_vec_dtype t = POSY_VEC_FLOAT32;
    if (output_dtype && vec_lookup(output_dtype, &t)) {
        snprintf(msg, cap, "'output_dtype' must be \"float\", \"int8\", \"uint8\", \"binary\" or \"ubinary\", not \"%.40s\"",
                 output_dtype);
        return -1;
    }
    out->dtype = t;
    if (!encoding_format || !strcmp(encoding_format, "float")) return 0;
    if (!strcmp(encoding_format, "base64")) { out->base64 = 1; return 0; }
    posy_vec_dtype ft;
    if (vec_lookup(encoding_format, &ft) || ft == POSY_VEC_FLOAT32) {
        snprintf(msg, cap, "'encoding_format' must be \"float\", \"base64\", \"int8\", \"uint8\", \"binary\" or "
                 "\"ubinary\", not \"%.40s\"", encoding_format);
        return -1;
    }
    if (output_dtype && t != ft && t != POSY_VEC_FLOAT32) {
        snprintf(msg, cap, "'encoding_format' \"%s\" contradicts 'output_dtype' \"%s\"", encoding_format, output_dtype);
        return -1;
    }
    out->dtype = ft;
    return 0;
}

const char *posy_vecenc_dtype_name(posy_vec_dtype t) {
    static const char *const n[] = {"float", "int8", "uint8", "binary", "ubinary"};
    return (unsigned)t < 5 ? n[t] : "?";
}

int posy_vecenc_dims(float *v, int dim, int dims, int renormalize) {
    if (dims <= 0 || dims >= dim) return dim;
    if (renormalize) {
        double ss = 0;
        for (int i = 0; i < dims; i++) ss += (double)v[i] * v[i];
        if (ss > 0) {
            double inv = 1.0 / sqrt(ss);
            for (int i = 0; i < dims; i++) v[i] = (float)(v[i] * inv);
        }
    }
    return dims;
}

size_t posy_vecenc_nbytes(posy_vec_dtype t, int n) {
    size_t u = n > 0 ? (size_t)n : 0;
    switch (t) {
    case POSY_VEC_FLOAT32: return 4 * u;
    case POSY_VEC_INT8:
    case POSY_VEC_UINT8: return u;
    default: return (u + 7) / 8;
    }
}

float posy_vecenc_int8(const float *v, int n, int8_t *q) {
    double m = 0;
    for (int i = 0; i < n; i++) {
        double a = fabs((double)v[i]);
        if (a > m && !isnan(a)) m = a;   /* NaN compares false anyway; said for the reader */
    }
    if (!(m > 0) || isinf(m)) {
        memset(q, 0, (size_t)(n > 0 ? n : 0));
        return 0.0f;
    }
    double s = 127.0 / m;
    for (int i = 0; i < n; i++) {
        double y = isnan(v[i]) ? 0.0 : round((double)v[i] * s);
        q[i] = (int8_t)(y > 127 ? 127 : y < -127 ? -127 : y);
    }
    return (float)s;
}

void posy_vecenc_ubinary(const float *v, int n, uint8_t *out) {
    for (int k = 0; k < (n + 7) / 8; k++) {
        unsigned byte = 0;
        for (int j = 0; j < 8; j++) {
            int i = 8 * k + j;
            byte = (byte << 1) | (unsigned)(i < n && v[i] > 0.0f);
        }
        out[k] = (uint8_t)byte;
    }
}

float posy_vecenc_encode(posy_vec_dtype t, const float *v, int n, void *out) {
    uint8_t *o = out;
    float s = 1.0f;
    switch (t) {
    case POSY_VEC_FLOAT32:
        for (int i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, &v[i], 4);
            o[4 * i] = (uint8_t)b; o[4 * i + 1] = (uint8_t)(b >> 8);
            o[4 * i + 2] = (uint8_t)(b >> 16); o[4 * i + 3] = (uint8_t)(b >> 24);
        }
        break;
    case POSY_VEC_INT8:
        s = posy_vecenc_int8(v, n, out);
        break;
    case POSY_VEC_UINT8:
        s = posy_vecenc_int8(v, n, out);
        for (int i = 0; i < n; i++) o[i] = (uint8_t)((int)(int8_t)o[i] + 128);
        break;
    case POSY_VEC_UBINARY:
        posy_vecenc_ubinary(v, n, o);
        break;
    case POSY_VEC_BINARY:
        posy_vecenc_ubinary(v, n, o);
        for (int k = 0; k < (n + 7) / 8; k++) o[k] ^= 0x80;   /* byte - 128 in two's complement */
        break;
    }
    return s;
}

size_t posy_vecenc_base64_len(size_t n) { return (n + 2) / 3 * 4; }

size_t posy_vecenc_base64(const void *src, size_t n, char *dst) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const uint8_t *s = src;
    size_t o = 0, i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t w = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        dst[o++] = tab[w >> 18]; dst[o++] = tab[(w >> 12) & 63]; dst[o++] = tab[(w >> 6) & 63]; dst[o++] = tab[w & 63];
    }
    if (i < n) {
        uint32_t w = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        dst[o++] = tab[w >> 18];
        dst[o++] = tab[(w >> 12) & 63];
        dst[o++] = i + 1 < n ? tab[(w >> 6) & 63] : '=';
        dst[o++] = '=';
    }
    return o;
}

/* cli_vecout: where `posy embed` writes its vectors.
 *
 * JSON lines: one array per text, each float in the shortest decimal form
 * that reads back as the same float32 (tried from 6 significant digits
 * down, then up to 9, which always suffices for float32), so a consumer
 * that parses into float32 gets posy's exact bits and the file stays small.
 *
 * .npy: NumPy format v1.0, '<f4', C order, shape (rows, dim).  The header
 * is padded with spaces to a 64-byte boundary as numpy itself writes it.
 * The row count is known before the first row (the input is read whole),
 * so rows stream straight to the file.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_embed.h"

static int fmt_prec(float v, int prec, char *buf) {
    int n = snprintf(buf, 32, "%.*g", prec, (double)v);
    return strtof(buf, NULL) == v ? n : -n;
}

int cli_fmt_float(float v, char *buf) {
    if (!isfinite(v)) {
        memcpy(buf, "null", 5);
        return 4;
    }
    if (v == 0.0f) return snprintf(buf, 32, "%s", signbit(v) ? "-0.0" : "0.0");
    int p = 6, n = fmt_prec(v, p, buf);
    if (n > 0) {
        /* Fits in 6 digits: look for fewer. */
        char tmp[32];
        while (p > 1) {
            int m = fmt_prec(v, p - 1, tmp);
            if (m < 0) break;
            p--;
            n = m;
            memcpy(buf, tmp, (size_t)m + 1);
        }
        return n;
    }
    for (p = 7; p <= 9; p++)
        if ((n = fmt_prec(v, p, buf)) > 0) return n;
    return snprintf(buf, 32, "%.9g", (double)v);
}

int cli_npy_header(FILE *f, size_t rows, size_t cols) {
    char dict[128];
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }",
                     rows, cols);
    if (n < 0 || (size_t)n >= sizeof dict) return -1;
    /* 6 magic + 2 version + 2 length + dict + padding + '\n' = multiple of 64 */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    if (fwrite(pre, 1, 10, f) != 10 || fwrite(dict, 1, (size_t)n, f) != (size_t)n) return -1;
    for (size_t i = 0; i < pad; i++)
        if (fputc(' ', f) == EOF) return -1;
    return fputc('\n', f) == EOF ? -1 : 0;
}

static int has_ext(const char *path, const char *ext) {
    size_t n = strlen(path), m = strlen(ext);
    return n >= m && strcmp(path + n - m, ext) == 0;
}

int cli_vecout_open(cli_vecout *o, const char *path, cli_out_format fmt, size_t rows, int dim,
                    posy_err *err) {
    memset(o, 0, sizeof *o);
    int use_stdout = !path || strcmp(path, "-") == 0;
    o->path = use_stdout ? "<stdout>" : path;
    if (fmt == CLI_OUT_AUTO) fmt = (!use_stdout && has_ext(path, ".npy")) ? CLI_OUT_NPY : CLI_OUT_JSONL;
    o->fmt = fmt;
    o->rows_expected = rows;
    o->dim = dim;
    o->f = use_stdout ? stdout : fopen(path, "wb");
    if (!o->f) return posy_err_set(err, POSY_E_IO, "cannot create output %s: %s", path, strerror(errno));
    o->own = !use_stdout;
    o->line_cap = (size_t)dim * 32 + 8;
    o->line = malloc(o->line_cap);
    if (!o->line) return posy_err_set(err, POSY_E_NOMEM, "out of memory for the output buffer");
    if (fmt == CLI_OUT_NPY && cli_npy_header(o->f, rows, (size_t)dim) != 0)
        return posy_err_set(err, POSY_E_IO, "writing %s: %s", o->path, strerror(errno));
    return 0;
}

static int write_npy_row(cli_vecout *o, const float *v) {
    /* Little-endian on disk whatever the host: build the bytes explicitly. */
    unsigned char *b = (unsigned char *)o->line;
    for (int i = 0; i < o->dim; i++) {
        uint32_t u;
        memcpy(&u, &v[i], 4);
        b[4 * i] = (unsigned char)u;
        b[4 * i + 1] = (unsigned char)(u >> 8);
        b[4 * i + 2] = (unsigned char)(u >> 16);
        b[4 * i + 3] = (unsigned char)(u >> 24);
    }
    size_t n = (size_t)o->dim * 4;
    return fwrite(b, 1, n, o->f) == n ? 0 : -1;
}

int cli_vecout_set_sparse(cli_vecout *o, posy_err *err) {
    const size_t cap = (size_t)o->dim * 56 + 8;   /* {"index":N,"value":F}, every entry non-zero at worst */
    char *line = realloc(o->line, cap);
    if (!line) return posy_err_set(err, POSY_E_NOMEM, "out of memory for the output buffer");
    o->line = line;
    o->line_cap = cap;
    o->sparse = 1;
    return 0;
}

static int write_sparse_row(cli_vecout *o, const float *v) {
    char *p = o->line;
    *p++ = '[';
    for (int i = 0, first = 1; i < o->dim; i++) {
        if (v[i] == 0.0f) continue;
        p += sprintf(p, "%s{\"index\":%d,\"value\":", first ? "" : ",", i);
        p += cli_fmt_float(v[i], p);
        *p++ = '}';
        first = 0;
    }
    *p++ = ']';
    *p++ = '\n';
    size_t n = (size_t)(p - o->line);
    return fwrite(o->line, 1, n, o->f) == n ? 0 : -1;
}

static int write_json_row(cli_vecout *o, const float *v) {
    if (o->sparse) return write_sparse_row(o, v);
    char *p = o->line;
    *p++ = '[';
    for (int i = 0; i < o->dim; i++) {
        if (i) *p++ = ',';
        p += cli_fmt_float(v[i], p);
    }
    *p++ = ']';
    *p++ = '\n';
    size_t n = (size_t)(p - o->line);
    return fwrite(o->line, 1, n, o->f) == n ? 0 : -1;
}

int cli_vecout_write(cli_vecout *o, const float *v, posy_err *err) {
    if (o->rows_written >= o->rows_expected)
        return posy_err_set(err, POSY_E_INTERNAL, "more vectors than inputs for %s", o->path);
    int rc = o->fmt == CLI_OUT_NPY ? write_npy_row(o, v) : write_json_row(o, v);
    if (rc != 0) return posy_err_set(err, POSY_E_IO, "writing %s: %s", o->path, strerror(errno));
    o->rows_written++;
    return 0;
}

int cli_vecout_close(cli_vecout *o, posy_err *err) {
    int rc = 0;
    if (o->f) {
        if (fflush(o->f) != 0)
            rc = posy_err_set(err, POSY_E_IO, "writing %s: %s", o->path, strerror(errno));
        if (o->own && fclose(o->f) != 0 && rc == 0)
            rc = posy_err_set(err, POSY_E_IO, "closing %s: %s", o->path, strerror(errno));
    }
    if (rc == 0 && o->f && o->rows_written != o->rows_expected)
        rc = posy_err_set(err, POSY_E_INTERNAL, "%s: wrote %zu of %zu vectors", o->path,
                          o->rows_written, o->rows_expected);
    free(o->line);
    memset(o, 0, sizeof *o);
    return rc;
}

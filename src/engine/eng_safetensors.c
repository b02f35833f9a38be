/* eng_safetensors: parsing and validation of one safetensors file.
 *
 * The header is untrusted input: every number in it is checked before it
 * is used to form a pointer, and every size product is overflow-checked,
 * so a corrupt or hostile file yields an error naming the file (and the
 * tensor), never an out-of-bounds read.  Tensors are kept in one array
 * sorted by name (eng_st_find is a binary search); their data pointers go
 * into the caller's buffer or the file mapping, nothing is copied.
 *
 * Holes between tensors are tolerated (they cost nothing); overlaps are
 * not, because two weights sharing bytes means the file is corrupt.
 * Little-endian hosts only, like the format itself (checked below).
 */
#include "eng_safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "posy reads safetensors data in place and needs a little-endian host"
#endif

typedef struct {
    const char *name;
    eng_dtype dt;
    int size;
} st_dtype_info;

/* Every dtype of the safetensors spec with a whole-byte element size.
 * Only the first three are computed with; the rest load as ENG_DT_OTHER. */
static const st_dtype_info st_dtypes[] = {
    {"F32", ENG_DT_F32, 4},       {"F16", ENG_DT_F16, 2},         {"BF16", ENG_DT_BF16, 2},
    {"F64", ENG_DT_OTHER, 8},     {"I64", ENG_DT_OTHER, 8},       {"U64", ENG_DT_OTHER, 8},
    {"I32", ENG_DT_OTHER, 4},     {"U32", ENG_DT_OTHER, 4},       {"I16", ENG_DT_OTHER, 2},
    {"U16", ENG_DT_OTHER, 2},     {"I8", ENG_DT_OTHER, 1},        {"U8", ENG_DT_OTHER, 1},
    {"BOOL", ENG_DT_OTHER, 1},    {"F8_E4M3", ENG_DT_OTHER, 1},   {"F8_E5M2", ENG_DT_OTHER, 1},
    {"F8_E8M0", ENG_DT_OTHER, 1}, {"C64", ENG_DT_OTHER, 8},
};

static const st_dtype_info *st_dtype_lookup(const char *s) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (strcmp(s, st_dtypes[i].name) == 0) return &st_dtypes[i];
    return NULL;
}

static int st_cmp_name(const void *a, const void *b) {
    return strcmp(((const eng_st_tensor *)a)->name, ((const eng_st_tensor *)b)->name);
}

/* Shape: an array of at most ENG_ST_MAX_DIMS non-negative integers whose
 * product (numel) does not overflow int64. */
static int st_parse_shape(eng_st_tensor *t, json_t *shape, const char *label, posy_err *err) {
    if (!json_is_array(shape))
        return posy_err_set(err, POSY_E_INVALID, "%s: tensor '%s': shape is not an array", label, t->name);
    size_t n = json_array_size(shape);
    if (n > ENG_ST_MAX_DIMS)
        return posy_err_set(err, POSY_E_INVALID, "%s: tensor '%s': %zu dimensions (at most %d)", label,
                            t->name, n, ENG_ST_MAX_DIMS);
    t->ndim = (int)n;
    t->numel = 1;
    for (size_t i = 0; i < n; i++) {
        json_t *d = json_array_get(shape, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return posy_err_set(err, POSY_E_INVALID,
                                "%s: tensor '%s': shape[%zu] is not a non-negative integer", label, t->name, i);
        t->shape[i] = (int64_t)json_integer_value(d);
        if (__builtin_mul_overflow(t->numel, t->shape[i], &t->numel))
            return posy_err_set(err, POSY_E_INVALID, "%s: tensor '%s': element count overflows", label,
                                t->name);
    }
    return 0;
}

/* data_offsets: [begin, end], 0 <= begin <= end <= data_size, and end-begin
 * equal to numel * element size. */
static int st_parse_offsets(eng_st_tensor *t, json_t *offs, int elem_size, const unsigned char *data,
                            size_t data_size, const char *label, posy_err *err) {
    if (!json_is_array(offs) || json_array_size(offs) != 2 || !json_is_integer(json_array_get(offs, 0)) ||
        !json_is_integer(json_array_get(offs, 1)))
        return posy_err_set(err, POSY_E_INVALID, "%s: tensor '%s': data_offsets is not [begin, end]", label,
                            t->name);
    json_int_t b = json_integer_value(json_array_get(offs, 0));
    json_int_t e = json_integer_value(json_array_get(offs, 1));
    if (b < 0 || e < b || (unsigned long long)e > data_size)
        return posy_err_set(err, POSY_E_INVALID,
                            "%s: tensor '%s': data_offsets [%lld, %lld] outside the data area (%zu bytes): "
                            "truncated or corrupt file",
                            label, t->name, (long long)b, (long long)e, data_size);
    int64_t want;
    if (__builtin_mul_overflow(t->numel, (int64_t)elem_size, &want) || want != (int64_t)(e - b))
        return posy_err_set(err, POSY_E_INVALID,
                            "%s: tensor '%s': %lld bytes of data, but dtype %s and its shape need %lld", label,
                            t->name, (long long)(e - b), t->dtype_name,
                            (long long)(t->numel > INT64_MAX / 8 ? -1 : t->numel * elem_size));
    t->data = data + b;
    t->nbytes = (size_t)(e - b);
    return 0;
}

static int st_parse_tensor(eng_st_tensor *t, json_t *v, const unsigned char *data, size_t data_size,
                           const char *label, posy_err *err) {
    if (!json_is_object(v))
        return posy_err_set(err, POSY_E_INVALID, "%s: tensor '%s': entry is not an object", label, t->name);
    json_t *dt = json_object_get(v, "dtype");
    if (!json_is_string(dt))
        return posy_err_set(err, POSY_E_INVALID, "%s: tensor '%s': dtype missing or not a string", label,
                            t->name);
    const st_dtype_info *di = st_dtype_lookup(json_string_value(dt));
    if (!di)
        return posy_err_set(err, POSY_E_INVALID, "%s: tensor '%s': unknown dtype '%.16s'", label, t->name,
                            json_string_value(dt));
    t->dtype = di->dt;
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", di->name);
    int rc = st_parse_shape(t, json_object_get(v, "shape"), label, err);
    if (rc) return rc;
    return st_parse_offsets(t, json_object_get(v, "data_offsets"), di->size, data, data_size, label, err);
}

static int st_cmp_ptr(const void *a, const void *b) {
    const eng_st_tensor *x = *(const eng_st_tensor *const *)a, *y = *(const eng_st_tensor *const *)b;
    const char *px = x->data, *py = y->data;
    return px < py ? -1 : px > py ? 1 : 0;
}

/* No two tensors may share bytes (empty tensors overlap nothing). */
static int st_check_overlaps(eng_st_file *f, const char *label, posy_err *err) {
    if (f->n_tensors < 2) return 0;
    const eng_st_tensor **by = malloc(sizeof *by * (size_t)f->n_tensors);
    if (!by) return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory", label);
    int m = 0;
    for (int i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].nbytes) by[m++] = &f->tensors[i];
    qsort(by, (size_t)m, sizeof *by, st_cmp_ptr);
    int rc = 0;
    for (int i = 1; i < m && !rc; i++) {
        const char *prev_end = (const char *)by[i - 1]->data + by[i - 1]->nbytes;
        if ((const char *)by[i]->data < prev_end)
            rc = posy_err_set(err, POSY_E_INVALID, "%s: tensors '%s' and '%s' overlap in the data area", label,
                              by[i - 1]->name, by[i]->name);
    }
    free(by);
    return rc;
}

static int st_parse_header(eng_st_file *f, json_t *root, const unsigned char *data, size_t data_size,
                           const char *label, posy_err *err) {
    if (!json_is_object(root))
        return posy_err_set(err, POSY_E_INVALID, "%s: header is not a JSON object", label);
    size_t cap = json_object_size(root);
    f->tensors = calloc(cap ? cap : 1, sizeof *f->tensors);
    if (!f->tensors) return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory for %zu tensors", label, cap);
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(v))
                return posy_err_set(err, POSY_E_INVALID, "%s: __metadata__ is not an object", label);
            continue;
        }
        eng_st_tensor *t = &f->tensors[f->n_tensors];
        t->name = strdup(key);
        if (!t->name) return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory", label);
        f->n_tensors++;
        int rc = st_parse_tensor(t, v, data, data_size, label, err);
        if (rc) return rc;
    }
    qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, st_cmp_name);
    return st_check_overlaps(f, label, err);
}

int eng_st_parse(eng_st_file *f, const void *buf, size_t size, const char *label, posy_err *err) {
    memset(f, 0, sizeof *f);
    snprintf(f->path, sizeof f->path, "%s", label);
    const unsigned char *p = buf;
    if (size < 8 || !p)
        return posy_err_set(err, POSY_E_INVALID,
                            "%s: %zu bytes, too short for a safetensors file (8-byte header length first)",
                            label, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | p[i];
    if (n > size - 8)
        return posy_err_set(err, POSY_E_INVALID,
                            "%s: header length %llu exceeds the file (%zu bytes): truncated or not a "
                            "safetensors file",
                            label, (unsigned long long)n, size);
    if (n > ENG_ST_MAX_HEADER)
        return posy_err_set(err, POSY_E_INVALID, "%s: header length %llu is over the %llu-byte limit", label,
                            (unsigned long long)n, ENG_ST_MAX_HEADER);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)p + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return posy_err_set(err, POSY_E_INVALID, "%s: header is not valid JSON: %s (line %d, column %d)",
                            label, jerr.text, jerr.line, jerr.column);
    int rc = st_parse_header(f, root, p + 8 + n, size - 8 - (size_t)n, label, err);
    json_decref(root);
    if (rc) eng_st_close(f);
    return rc;
}

int eng_st_open(eng_st_file *f, const char *path, posy_err *err) {
    posy_map m;
    memset(f, 0, sizeof *f);
    int rc = posy_map_open(&m, path, err);
    if (rc) return rc;
    rc = eng_st_parse(f, m.data, m.size, path, err);
    if (rc) {
        posy_map_close(&m);
        return rc;
    }
    f->map = m;
    f->owns_map = 1;
    return 0;
}

void eng_st_close(eng_st_file *f) {
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    if (f->owns_map) posy_map_close(&f->map);
    for (int i = 0; i < f->n_shards; i++) {
        if (f->shard_maps) posy_map_close(&f->shard_maps[i]);
        if (f->shard_paths) free(f->shard_paths[i]);
    }
    free(f->shard_maps);
    free(f->shard_paths);
    memset(f, 0, sizeof *f);
}

const eng_st_tensor *eng_st_find(const eng_st_file *f, const char *name) {
    if (!f->tensors || !name) return NULL;
    eng_st_tensor key;
    key.name = (char *)name;
    return bsearch(&key, f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, st_cmp_name);
}

const char *eng_st_tensor_file(const eng_st_file *f, const eng_st_tensor *t) {
    if (f->shard_paths && t && t->shard >= 0 && t->shard < f->n_shards) return f->shard_paths[t->shard];
    return f->path;
}

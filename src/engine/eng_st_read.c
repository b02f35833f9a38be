/* eng_st_read: fp32 views of safetensors tensors (shape checks, the
 * F16/BF16 -> F32 conversions, and eng_st_view, the two-pass builder the
 * weight loaders share).
 *
 * The mapping is read bytewise (memcpy / byte assembly), never through a
 * float* cast, so a tensor whose data offset is not 4-byte aligned in a
 * hostile or odd file is still read correctly and UBSan-clean.  The
 * conversions are exact (every half and bfloat16 value is a float).
 */
#include "eng_safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

float eng_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

float eng_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);            /* inf / nan */
    } else if (exp != 0) {
        u = sign | ((exp + 112u) << 23) | (man << 13);   /* normal: rebias 15 -> 127 */
    } else if (man == 0) {
        u = sign;                                        /* signed zero */
    } else {                                             /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400u));
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

int eng_st_tensor_to_f32(const eng_st_tensor *t, float *dst) {
    return eng_st_tensor_range_to_f32(t, 0, (size_t)t->numel, dst);
}

int eng_st_tensor_range_to_f32(const eng_st_tensor *t, size_t first, size_t n, float *dst) {
    if (first > (size_t)t->numel || n > (size_t)t->numel - first) return -1;
    switch (t->dtype) {
    case ENG_DT_F32:
        if (n) memcpy(dst, (const unsigned char *)t->data + first * sizeof(float), n * sizeof(float));
        return 0;
    case ENG_DT_F16: {
        const unsigned char *p = (const unsigned char *)t->data + 2 * first;
        for (size_t i = 0; i < n; i++) dst[i] = eng_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    }
    case ENG_DT_BF16: {
        const unsigned char *p = (const unsigned char *)t->data + 2 * first;
        for (size_t i = 0; i < n; i++) dst[i] = eng_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    }
    default:
        return -1;
    }
}

static void st_fmt_shape(char *buf, size_t cap, int ndim, const int64_t *dims) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)dims[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

int eng_st_check(const eng_st_file *f, const eng_st_tensor *t, int ndim, const int64_t *dims,
                 posy_err *err) {
    const char *file = eng_st_tensor_file(f, t);
    if (t->dtype == ENG_DT_OTHER)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: tensor %s has dtype %s; posy needs F32, F16 or BF16",
                            file, t->name, t->dtype_name);
    int same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == dims[i];
    if (same) return 0;
    char have[128], want[128];
    st_fmt_shape(have, sizeof have, t->ndim, t->shape);
    st_fmt_shape(want, sizeof want, ndim, dims);
    return posy_err_set(err, POSY_E_INVALID, "%s: tensor %s has shape %s, config.json implies %s", file,
                        t->name, have, want);
}

int eng_st_read_f32(const eng_st_file *f, const char *name, int ndim, const int64_t *dims, float *dst,
                    posy_err *err) {
    const eng_st_tensor *t = eng_st_find(f, name);
    if (!t) return posy_err_set(err, POSY_E_INVALID, "%s: tensor %s not found", f->path, name);
    int rc = eng_st_check(f, t, ndim, dims, err);
    if (rc) return rc;
    eng_st_tensor_to_f32(t, dst);
    return 0;
}

static size_t st_give_back(uintptr_t a, uintptr_t b);
static int st_in_own_map(const eng_st_file *f, uintptr_t a, uintptr_t b);

/* The file's mapped pages of t, once its fp32 copy is in owned: nothing
 * reads them again, and a bf16 checkpoint's pages need not stay resident
 * beside their copies (the mapping is private and read-only: a later read
 * would fault them back in).  A buffer given to eng_st_parse is left alone. */
static void st_drop_source(const eng_st_file *f, const eng_st_tensor *t) {
    const uintptr_t a = (uintptr_t)t->data, b = a + t->nbytes;
    if (st_in_own_map(f, a, b)) st_give_back(a, b);
}

void eng_st_view_append_range(eng_st_view *v, const eng_st_tensor *t, size_t first, size_t n) {
    if (v->fill) eng_st_tensor_range_to_f32(t, first, n, v->owned + v->used);
    v->used += n;
}

void eng_st_view_release(eng_st_view *v, const eng_st_tensor *t) {
    if (v->fill) st_drop_source(v->st, t);
}

void eng_st_view_append(eng_st_view *v, const eng_st_tensor *t) {
    eng_st_view_append_range(v, t, 0, (size_t)t->numel);
    eng_st_view_release(v, t);
}

void eng_st_view_append_zeros(eng_st_view *v, size_t n) {
    if (v->fill && n) memset(v->owned + v->used, 0, n * sizeof(float));
    v->used += n;
}

void eng_st_view_take(eng_st_view *v, const eng_st_tensor *t, const float **dst) {
    if (t->dtype == ENG_DT_F32 && ((uintptr_t)t->data & (sizeof(float) - 1)) == 0) {
        if (v->fill) *dst = (const float *)t->data;
        return;
    }
    if (v->fill) *dst = v->owned + v->used;
    eng_st_view_append(v, t);
}

int eng_st_view_build(eng_st_view *v, eng_st_walk_fn walk, void *arg, float **owned, size_t *owned_floats) {
    v->fill = 0;
    v->used = 0;
    int rc = walk(v, arg);
    if (!rc && v->used) {
        *owned_floats = v->used;
        *owned = malloc(v->used * sizeof(float));
        if (!*owned)
            rc = posy_err_set(v->err, POSY_E_NOMEM, "%s: out of memory for %zu converted floats", v->st->path, v->used);
    }
    if (!rc) {
        v->fill = 1;
        v->owned = *owned;
        v->used = 0;
        rc = walk(v, arg);
    }
    return rc;
}

/* madvise(MADV_DONTNEED) over the whole pages inside [a, b): on private
 * anonymous memory they are freed and would read back as zeros; on a
 * private read-only file mapping a later read faults the file back in.
 * A failure only means the memory stays used. */
static size_t st_give_back(uintptr_t a, uintptr_t b) {
    const long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || b <= a) return 0;
    const uintptr_t first = (a + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg, last = b / (uintptr_t)pg * (uintptr_t)pg;
    if (last <= first) return 0;
    return madvise((void *)first, last - first, MADV_DONTNEED) == 0 ? (size_t)(last - first) : 0;
}

static int st_inside(const void *base, size_t size, uintptr_t a, uintptr_t b) {
    const uintptr_t lo = (uintptr_t)base;
    return base && a >= lo && b <= lo + size && b >= a;
}

/* Whether [a, b) lies in one of the mappings eng_st_open / _open_dir made
 * (not a buffer given to eng_st_parse). */
static int st_in_own_map(const eng_st_file *f, uintptr_t a, uintptr_t b) {
    if (f->owns_map && st_inside(f->map.data, f->map.size, a, b)) return 1;
    for (int i = 0; f->shard_maps && i < f->n_shards; i++)
        if (st_inside(f->shard_maps[i].data, f->shard_maps[i].size, a, b)) return 1;
    return 0;
}

size_t eng_st_release(const eng_st_file *f, float *owned, size_t owned_floats, const float **p, size_t n) {
    if (!*p) return 0;
    const uintptr_t a = (uintptr_t)*p, b = a + n * sizeof(float);
    if (owned && a >= (uintptr_t)owned && a < (uintptr_t)owned + owned_floats * sizeof(float)) {
        *p = NULL; /* its pages are zeros now (or will be): nothing may read them */
        return st_inside(owned, owned_floats * sizeof(float), a, b) ? st_give_back(a, b) : 0;
    }
    return f && st_in_own_map(f, a, b) ? st_give_back(a, b) : 0;
}


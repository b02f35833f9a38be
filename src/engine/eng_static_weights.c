/* eng_static_weights: the table of a StaticEmbedding model, one fp32 row
 * per token id (eng_config_static.c says what such a model is).
 *
 * "embedding.weight" [vocab, dim] is used as stored (in place when it is
 * aligned F32, else converted).  model2vec's layout is folded at load the
 * way sentence-transformers folds it: row i = embeddings[mapping[i]] *
 * weights[i], with either part optional, so the forward pass is the same
 * mean for both.  Every mapping entry is checked against the table before
 * it is used: a model file is outside input.
 */
#include <stdlib.h>
#include <string.h>
#include "eng_internal.h"

typedef struct sw_walk {
    const eng_st_tensor *table;
    const float *rows;
} sw_walk;

static int sw_take(eng_st_view *v, void *arg) {
    sw_walk *w = arg;
    eng_st_view_take(v, w->table, &w->rows);
    return 0;
}

/* mapping[i] as an integer: model2vec writes int64, int32 is accepted too. */
static int sw_index(const eng_st_tensor *m, int64_t i, int64_t *out) {
    const unsigned char *p = m->data;
    if (!strcmp(m->dtype_name, "I64")) {
        uint64_t u = 0;
        for (int b = 7; b >= 0; b--) u = u << 8 | p[8 * i + b];
        *out = (int64_t)u;
        return 0;
    }
    if (!strcmp(m->dtype_name, "I32")) {
        uint32_t u = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                     (uint32_t)p[4 * i + 3] << 24;
        *out = (int32_t)u;
        return 0;
    }
    return -1;
}

/* model2vec's per-token weights: numpy's float64 as it saves them, or any
 * float type posy reads. */
static int sw_scales(const eng_st_tensor *t, float *dst) {
    if (strcmp(t->dtype_name, "F64")) return eng_st_tensor_to_f32(t, dst);
    const unsigned char *p = t->data;
    for (int64_t i = 0; i < t->numel; i++) {
        uint64_t u = 0;
        double d;
        for (int b = 7; b >= 0; b--) u = u << 8 | p[8 * i + b];
        memcpy(&d, &u, sizeof d);
        dst[i] = (float)d;
    }
    return 0;
}

/* model2vec: one row per token id from the mapping and the weights. */
static int sw_fold(eng_static_weights *s, const eng_st_file *st, const eng_st_tensor *m, const eng_st_tensor *wt,
                   const float *rows, int64_t n_rows, int V, int D, posy_err *err) {
    float *scale = NULL;
    if (wt) {
        if (wt->ndim != 1 || wt->shape[0] != V || !(scale = malloc(sizeof(float) * (size_t)V)) ||
            sw_scales(wt, scale) != 0) {
            free(scale);
            return posy_err_set(err, POSY_E_INVALID, "%s: weights must be %d F64/F32/F16/BF16 values, one per token "
                                "id", st->path, V);
        }
    }
    if (m && strcmp(m->dtype_name, "I64") && strcmp(m->dtype_name, "I32")) {
        free(scale);
        return posy_err_set(err, POSY_E_INVALID, "%s: mapping has dtype %s, need I64 or I32", st->path, m->dtype_name);
    }
    float *out = malloc(sizeof(float) * (size_t)V * (size_t)D);
    if (!out) {
        free(scale);
        return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory for the %d x %d table", st->path, V, D);
    }
    for (int i = 0; i < V; i++) {
        int64_t r = i;
        if (m) sw_index(m, i, &r);
        if (r < 0 || r >= n_rows) {
            free(out);
            free(scale);
            return posy_err_set(err, POSY_E_INVALID, "%s: mapping[%d] is %lld, outside the %lld rows of embeddings",
                                st->path, i, (long long)r, (long long)n_rows);
        }
        const float *src = rows + (size_t)r * (size_t)D;
        float *dst = out + (size_t)i * (size_t)D, k = scale ? scale[i] : 1.0f;
        for (int j = 0; j < D; j++) dst[j] = src[j] * k;
    }
    free(scale);
    free(s->owned);
    s->owned = out;
    s->owned_floats = (size_t)V * (size_t)D;
    s->emb = out;
    return 0;
}

int eng_static_weights_load(eng_static_weights *s, const eng_config *cfg, const eng_st_file *st, posy_err *err) {
    memset(s, 0, sizeof *s);
    const int V = cfg->info.vocab, D = cfg->info.hidden;
    const eng_st_tensor *t = eng_st_find(st, "embedding.weight");
    const eng_st_tensor *m = t ? NULL : eng_st_find(st, "mapping");
    const eng_st_tensor *wt = t ? NULL : eng_st_find(st, "weights");
    if (!t) t = eng_st_find(st, "embeddings");
    if (!t) return posy_err_set(err, POSY_E_INVALID, "%s: neither embedding.weight nor embeddings is in it", st->path);
    /* the config read the sizes from this header; a file changed since is refused */
    const int64_t n_rows = t->ndim == 2 ? t->shape[0] : -1;
    const int64_t dims[2] = {m ? n_rows : V, D};
    if (eng_st_check(st, t, 2, dims, err)) return -1;
    if (m && (m->ndim != 1 || m->shape[0] != V))
        return posy_err_set(err, POSY_E_INVALID, "%s: mapping must hold %d token ids", st->path, V);
    sw_walk w = {.table = t};
    eng_st_view v = {.st = st, .prefix = "", .err = err};
    if (eng_st_view_build(&v, sw_take, &w, &s->owned, &s->owned_floats)) {
        eng_static_weights_free(s);
        return -1;
    }
    s->emb = w.rows;
    if ((m || wt) && sw_fold(s, st, m, wt, w.rows, n_rows, V, D, err)) {
        eng_static_weights_free(s);
        return -1;
    }
    return 0;
}

void eng_static_weights_free(eng_static_weights *s) {
    free(s->owned);
    memset(s, 0, sizeof *s);
}

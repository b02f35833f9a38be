/* eng_dense: sentence-transformers' Dense modules on pooled vectors
 * (eng_dense.h says why the engine front runs them). */
#include "eng_dense.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/eng_cpu_kernels.h"
#include "eng_internal.h"
#include "eng_safetensors.h"
#include "posy_file.h"

void eng_dense_free(eng_dense *d) {
    for (int i = 0; i < d->n; i++) {
        eng_cpu_pack_free(&d->layers[i].pk);
        free(d->layers[i].w);
        free(d->layers[i].b);
        free(d->layers[i].ln_g);
        free(d->layers[i].ln_b);
    }
    memset(d, 0, sizeof *d);
}

/* One vector of a reranker's head from the model's own checkpoint into a
 * new allocation; name "" leaves *dst NULL; alt ("" none) is read when
 * name is absent. */
static int head_vec(const eng_st_file *st, const char *name, const char *alt, int n, float **dst, const char *dir,
                    posy_err *err) {
    const int64_t d[1] = {n};
    if (!name[0]) return 0;
    if (!eng_st_find(st, name) && alt[0] && eng_st_find(st, alt)) name = alt;
    if (!eng_st_find(st, name))
        return posy_err_set(err, POSY_E_INVALID, "%s: the model head's %s is not in the checkpoint", dir, name);
    if (!(*dst = malloc(sizeof(float) * (size_t)n)))
        return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory for the classification head", dir);
    return eng_st_read_f32(st, name, 1, d, *dst, err);
}

/* classifier_from_token: rows of the LM head t ([vocab, in]) as the
 * head's weights, or their difference (one row). */
static int head_rows(eng_dense_layer *L, const eng_dense_cfg *c, const eng_st_tensor *t, const char *dir,
                     posy_err *err) {
    if (t->ndim != 2 || t->shape[1] != c->in || t->dtype == ENG_DT_OTHER)
        return posy_err_set(err, POSY_E_INVALID, "%s: %s is not a [vocab, %d] weight of floats", dir, t->name, c->in);
    const size_t rowb = (size_t)c->in * (t->dtype == ENG_DT_F32 ? 4 : 2);
    for (int r = 0; r < c->n_rows; r++) {
        if (c->rows[r] < 0 || c->rows[r] >= t->shape[0])
            return posy_err_set(err, POSY_E_INVALID, "%s: token id %d is outside %s's %lld rows", dir, c->rows[r],
                                t->name, (long long)t->shape[0]);
        const unsigned char *row = (const unsigned char *)t->data + (size_t)c->rows[r] * rowb;
        float *dst = L->w + (size_t)(c->rows_diff ? 0 : r) * c->in;
        for (int k = 0; k < c->in; k++) {
            float v;
            if (t->dtype == ENG_DT_F32) memcpy(&v, row + 4 * (size_t)k, 4);
            else {
                uint16_t h;
                memcpy(&h, row + 2 * (size_t)k, 2);
                v = t->dtype == ENG_DT_BF16 ? eng_bf16_to_f32(h) : eng_f16_to_f32(h);
            }
            dst[k] = !c->rows_diff ? v : r == 0 ? -v : dst[k] + v;   /* diff: row[1] - row[0] */
        }
    }
    return 0;
}

/* A reranker's head: its tensors from the model's own checkpoint. */
static int dense_load_head(eng_dense_layer *L, const eng_dense_cfg *c, const char *model_dir, posy_err *err) {
    eng_st_file st;
    if (eng_st_open_dir(&st, model_dir, err)) return -1;
    L->in = c->in;
    L->out = c->out;
    L->act = c->act;
    L->ln_eps = (float)c->ln_eps;
    if (c->n_rows) {   /* the LM head's rows (classifier_from_token) */
        const eng_st_tensor *t = eng_st_find(&st, c->wname);
        if (!t && c->walt[0]) t = eng_st_find(&st, c->walt);
        if (!t) t = eng_st_find(&st, "embed_tokens.weight");   /* a bare decoder's, tied */
        int rc = !t ? posy_err_set(err, POSY_E_INVALID, "%s: classifier_from_token needs the LM head (%s, or a tied %s) "
                                   "in the checkpoint", model_dir, c->wname, c->walt)
                 : !(L->w = malloc(sizeof(float) * (size_t)c->out * (size_t)c->in))
                     ? posy_err_set(err, POSY_E_NOMEM, "%s: out of memory for the classification head", model_dir)
                     : head_rows(L, c, t, model_dir, err);
        eng_st_close(&st);
        return rc ? -1 : 0;
    }
    const int64_t wd[2] = {c->out, c->in};
    const char *wname = !eng_st_find(&st, c->wname) && c->walt[0] && eng_st_find(&st, c->walt) ? c->walt : c->wname;
    int rc = 0;
    if (!eng_st_find(&st, wname))
        rc = posy_err_set(err, POSY_E_INVALID, "%s: the model head's %s is not in the checkpoint", model_dir,
                          c->wname);
    else if (!(L->w = malloc(sizeof(float) * (size_t)c->out * (size_t)c->in)))
        rc = posy_err_set(err, POSY_E_NOMEM, "%s: out of memory for the classification head", model_dir);
    if (!rc) rc = eng_st_read_f32(&st, wname, 2, wd, L->w, err);
    if (!rc) rc = head_vec(&st, c->bname, c->balt, c->out, &L->b, model_dir, err);
    if (!rc) rc = head_vec(&st, c->lnw, "", c->out, &L->ln_g, model_dir, err);
    if (!rc) rc = head_vec(&st, c->lnb, "", c->out, &L->ln_b, model_dir, err);
    if (!rc && L->ln_g && !L->ln_b && !(L->ln_b = calloc((size_t)c->out, sizeof(float))))   /* no bias: zeros */
        rc = posy_err_set(err, POSY_E_NOMEM, "%s: out of memory for the classification head", model_dir);
    eng_st_close(&st);
    return rc ? -1 : 0;
}


static int dense_load_one(eng_dense_layer *L, const eng_dense_cfg *c, const char *model_dir, posy_err *err) {
    char dir[1024], path[1024];
    if (c->wname[0]) return dense_load_head(L, c, model_dir, err);
    if (posy_path_join(dir, sizeof dir, model_dir, c->path) || posy_path_join(path, sizeof path, dir, "model.safetensors"))
        return posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", model_dir, c->path);
    if (!posy_file_exists(path)) {
        char bin[1024];
        if (!posy_path_join(bin, sizeof bin, dir, "pytorch_model.bin") && posy_file_exists(bin))
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: only pytorch_model.bin, which posy does not read (a "
                                "pickle); convert it once with safetensors: python3 -c \"import torch, safetensors.torch "
                                "as s; s.save_file(torch.load('%s'), '%s')\"", dir, bin, path);
        return posy_err_set(err, POSY_E_INVALID, "%s: the Dense module's weights are missing", path);
    }
    eng_st_file st;
    if (eng_st_open(&st, path, err)) return -1;
    L->in = c->in;
    L->out = c->out;
    L->act = c->act;
    const int64_t wd[2] = {c->out, c->in}, bd[1] = {c->out};
    int rc = 0;
    if (!(L->w = malloc(sizeof(float) * (size_t)c->out * (size_t)c->in)) ||
        (c->bias && !(L->b = malloc(sizeof(float) * (size_t)c->out))))
        rc = posy_err_set(err, POSY_E_NOMEM, "%s: out of memory for the Dense weights", path);
    if (!rc) rc = eng_st_read_f32(&st, "linear.weight", 2, wd, L->w, err);
    if (!rc && c->bias) rc = eng_st_read_f32(&st, "linear.bias", 1, bd, L->b, err);
    if (!rc && !c->bias && eng_st_find(&st, "linear.bias"))
        rc = posy_err_set(err, POSY_E_INVALID, "%s: linear.bias present but config.json says bias false", path);
    eng_st_close(&st);
    return rc ? -1 : 0;
}

int eng_dense_load_splade(eng_dense *d, const eng_config *cfg, const char *model_dir, posy_err *err) {
    memset(d, 0, sizeof *d);
    if (!cfg->splade) return 0;
    d->widest = cfg->info.vocab > cfg->info.hidden ? cfg->info.vocab : cfg->info.hidden;
    for (int i = 0; i < 2; i++) {
        d->n = i + 1;
        if (dense_load_head(&d->layers[i], &cfg->splade_head[i], model_dir, err)) {
            eng_dense_free(d);
            return -1;
        }
    }
    return 0;
}

int eng_dense_load(eng_dense *d, const eng_config *cfg, const char *model_dir, posy_err *err) {
    memset(d, 0, sizeof *d);
    d->normalize = cfg->info.normalize;
    d->widest = cfg->info.hidden;
    for (int i = 0; i < cfg->n_dense; i++) {
        d->n = i + 1; /* so that eng_dense_free frees what was allocated */
        if (dense_load_one(&d->layers[i], &cfg->dense[i], model_dir, err)) {
            eng_dense_free(d);
            return -1;
        }
        if (cfg->dense[i].out > d->widest) d->widest = cfg->dense[i].out;
    }
    return 0;
}

static void dense_act(float *v, size_t n, eng_dense_act act) {
    switch (act) {
    case ENG_DENSE_IDENTITY: return;
    case ENG_DENSE_TANH: for (size_t i = 0; i < n; i++) v[i] = tanhf(v[i]); return;
    case ENG_DENSE_RELU: for (size_t i = 0; i < n; i++) v[i] = v[i] > 0.f ? v[i] : 0.f; return;
    case ENG_DENSE_SIGMOID: for (size_t i = 0; i < n; i++) v[i] = 1.f / (1.f + expf(-v[i])); return;
    case ENG_DENSE_GELU:
        for (size_t i = 0; i < n; i++) v[i] = 0.5f * v[i] * (1.f + erff(v[i] * 0.70710678118654752f));
        return;
    }
}

size_t eng_dense_pack(eng_dense *d) {
    const eng_cpu_isa isa = eng_cpu_gemm_choice();
    size_t bytes = 0;
    if (isa == ENG_CPU_ISA_NONE || d->isa != ENG_CPU_ISA_NONE) return 0;
    for (int i = 0; i < d->n; i++) {
        eng_dense_layer *L = &d->layers[i];
        if (eng_cpu_pack_init(&L->pk, L->w, L->out, L->in) != 0) {   /* all or none: free what was packed */
            for (int j = 0; j <= i; j++) eng_cpu_pack_free(&d->layers[j].pk);
            return 0;
        }
        bytes += eng_cpu_pack_bytes(L->out, L->in);
    }
    for (int i = 0; i < d->n; i++) {   /* the packs replace the loaded copies */
        free(d->layers[i].w);
        d->layers[i].w = NULL;
    }
    d->isa = (int)isa;
    return bytes;
}

void eng_dense_apply(const eng_dense *d, int n, const float *x, float *y, float *scratch) {
    const float *src = x;
    float *bufs[2] = {scratch, scratch + (size_t)n * d->widest};
    for (int i = 0; i < d->n; i++) {
        const eng_dense_layer *L = &d->layers[i];
        float *dst = i + 1 == d->n ? y : bufs[i & 1];
        eng_cpu_linear_pk((eng_cpu_isa)d->isa, dst, src, L->w, &L->pk, L->b, n, L->out, L->in);
        dense_act(dst, (size_t)n * (size_t)L->out, L->act);
        if (L->ln_g) eng_cpu_add_layernorm(dst, NULL, L->ln_g, L->ln_b, L->ln_eps, n, L->out);
        src = dst;
    }
    if (d->normalize && d->n) eng_cpu_l2_normalize(y, n, d->layers[d->n - 1].out);
}

/* ---- batches in flight (the front's step / wait) -------------------------
 * Each batch of a model with Dense modules goes to the backend as a copy
 * whose `out` is a buffer of n_seqs * hidden pooled values; when the
 * backend hands it back, the modules write the caller's n_seqs * dim.
 * Backends finish batches in submission order, so a result is matched to
 * the oldest pending entry with its tag (equal tags stay correct). */
struct eng_dense_pending {
    struct eng_dense_pending *next;
    posy_batch shadow;           /* what the backend was given (it may keep the pointer) */
    float *out;                  /* the caller's */
    float *pooled, *scratch;     /* in this same allocation */
};

int eng_dense_submit(posy_engine *e, const posy_batch *b, posy_err *err) {
    const size_t n = (size_t)b->n_seqs;
    const size_t floats = n * (size_t)e->cfg.info.hidden + 2 * n * (size_t)e->dense.widest;
    eng_dense_pending *p = malloc(sizeof *p + floats * sizeof(float));
    if (!p) return posy_err_set(err, POSY_E_NOMEM, "engine: out of memory for a batch's Dense buffers");
    p->next = NULL;
    p->shadow = *b;
    p->out = b->out;
    p->pooled = (float *)(p + 1);
    p->scratch = p->pooled + n * (size_t)e->cfg.info.hidden;
    p->shadow.out = p->pooled;
    if (e->ops->submit(e, &p->shadow, err) != 0) {
        free(p);
        return -1;
    }
    eng_dense_pending **tail = &e->dense_pending;
    while (*tail) tail = &(*tail)->next;
    *tail = p;
    return 0;
}

void eng_dense_finish(posy_engine *e, const posy_result *done, int n_done) {
    for (int i = 0; i < n_done; i++) {
        eng_dense_pending **pp = &e->dense_pending;
        while (*pp && (*pp)->shadow.tag != done[i].tag) pp = &(*pp)->next;
        eng_dense_pending *p = *pp;
        if (!p) continue; /* not ours: cannot happen while every submit goes through eng_dense_submit */
        *pp = p->next;
        if (done[i].status == 0) eng_dense_apply(&e->dense, p->shadow.n_seqs, p->pooled, p->out, p->scratch);
        free(p);
    }
}

void eng_dense_drop_pending(posy_engine *e) {
    while (e->dense_pending) {
        eng_dense_pending *p = e->dense_pending;
        e->dense_pending = p->next;
        free(p);
    }
}

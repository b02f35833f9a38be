/* eng_config_st: the sentence-transformers files of a model directory.
 *
 * modules.json lists the pipeline after the transformer: Pooling (its
 * config.json picks CLS, mean or last-token), Dense (a linear layer and an
 * activation on the pooled vector, eng_dense.c; up to ENG_MAX_DENSE),
 * Normalize (L2, last), and modules posy does not run, which are refused
 * by name rather than skipped, because skipping one would return vectors
 * that silently differ from the reference.  Absent files mean what
 * sentence-transformers itself does for a plain Hugging Face model: mean
 * pooling, no normalization, max_seq_len = the tokenizer's
 * model_max_length capped by the model's positions, no prompts.
 */
#include "eng_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eng_cfgjson.h"
#include "posy_file.h"

/* A module path must stay inside the model directory. */
static int st_rel_path_ok(const char *s) {
    return s[0] != '/' && !strstr(s, "..") && strlen(s) < 256;
}

static int st_pooling(eng_config *c, const char *dir, const char *rel, posy_err *err) {
    static const struct { const char *key; int mode; } modes[] = {
        {"pooling_mode_cls_token", POSY_POOL_CLS}, {"pooling_mode_mean_tokens", POSY_POOL_MEAN},
        {"pooling_mode_lasttoken", POSY_POOL_LAST}, {"pooling_mode_max_tokens", -1},
        {"pooling_mode_mean_sqrt_len_tokens", -1}, {"pooling_mode_weightedmean_tokens", -1},
    };
    char sub[1024], path[1024];
    json_t *r;
    if (posy_path_join(sub, sizeof sub, dir, rel))
        return posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", dir, rel);
    int rc = eng_cfgjson_load(sub, "config.json", 1, 1, &r, path, err);
    if (rc) return rc;
    int n_on = 0, mode = -1, dim = 0;
    const char *on = NULL;
    for (size_t i = 0; !rc && i < sizeof modes / sizeof modes[0]; i++) {
        int b = 0;
        rc = eng_cfgjson_bool(r, modes[i].key, path, 0, &b, err);
        if (b) { n_on++; mode = modes[i].mode; on = modes[i].key; }
    }
    /* sentence-transformers >= 6 writes "pooling_mode": "mean" (or a list
     * of modes, concatenated) and "embedding_dimension" instead */
    static const struct { const char *name; int mode; } named[] = {
        {"cls", POSY_POOL_CLS}, {"mean", POSY_POOL_MEAN}, {"lasttoken", POSY_POOL_LAST}, {"max", -1},
        {"mean_sqrt_len_tokens", -1}, {"weightedmean", -1},
    };
    json_t *pm = rc ? NULL : json_object_get(r, "pooling_mode");
    if (pm) { /* as sentence-transformers 6 loads it: "pooling_mode" wins, the old keys are dropped */
        n_on = 0;
        mode = -1;
    }
    char onbuf[64];
    for (size_t k = 0; pm && k < (json_is_array(pm) ? json_array_size(pm) : 1); k++) {
        const char *nm = json_string_value(json_is_array(pm) ? json_array_get(pm, k) : pm);
        if (!nm) {
            rc = posy_err_set(err, POSY_E_INVALID, "%s: pooling_mode must be a string or a list of strings", path);
            break;
        }
        size_t i = 0;
        while (i < sizeof named / sizeof named[0] && strcmp(nm, named[i].name)) i++;
        if (i == sizeof named / sizeof named[0]) {
            rc = posy_err_set(err, POSY_E_INVALID, "%s: pooling_mode '%.40s' is not one of sentence-transformers' "
                              "(cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken)", path, nm);
            break;
        }
        n_on++;
        mode = named[i].mode;
        snprintf(onbuf, sizeof onbuf, "pooling_mode %s", named[i].name);
        on = onbuf;
    }
    if (!rc) rc = eng_cfgjson_bool(r, "include_prompt", path, 1, &c->pool_include_prompt, err);
    if (!rc) rc = eng_cfgjson_int(r, "word_embedding_dimension", path, 0, c->info.hidden, 1, 1 << 20, &dim, err);
    if (!rc && json_object_get(r, "embedding_dimension"))
        rc = eng_cfgjson_int(r, "embedding_dimension", path, 0, c->info.hidden, 1, 1 << 20, &dim, err);
    json_decref(r);
    if (rc) return rc;
    if (n_on == 0 && !pm) { /* no mode set at all: sentence-transformers 6's default, mean */
        n_on = 1;
        mode = POSY_POOL_MEAN;
    }
    if (n_on == 0) return posy_err_set(err, POSY_E_INVALID, "%s: pooling_mode lists no mode", path);
    if (n_on > 1)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: several pooling modes at once are not supported", path);
    if (mode < 0)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: %s is not supported (cls, mean or lasttoken only)", path, on);
    if (dim != c->info.hidden)
        return posy_err_set(err, POSY_E_INVALID, "%s: the embedding dimension %d differs from hidden size %d", path,
                            dim, c->info.hidden);
    c->info.pooling = (posy_pooling)mode;
    return 0;
}

/* A Dense module's config.json: sizes chained to what comes before (the
 * pooled hidden size, or the previous Dense's out_features), bias, and an
 * activation posy computes (the torch class name sentence-transformers
 * writes). */
static int st_dense(eng_config *c, const char *dir, const char *rel, posy_err *err) {
    static const struct { const char *cls; eng_dense_act act; } acts[] = {
        {"torch.nn.modules.linear.Identity", ENG_DENSE_IDENTITY}, {"torch.nn.modules.activation.Tanh", ENG_DENSE_TANH},
        {"torch.nn.modules.activation.ReLU", ENG_DENSE_RELU}, {"torch.nn.modules.activation.Sigmoid", ENG_DENSE_SIGMOID},
        {"torch.nn.modules.activation.GELU", ENG_DENSE_GELU},
    };
    char sub[1024], path[1024], act[128];
    json_t *r;
    if (c->n_dense == ENG_MAX_DENSE)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s/modules.json: more than %d Dense modules", dir, ENG_MAX_DENSE);
    eng_dense_cfg *d = &c->dense[c->n_dense];
    if (posy_path_join(sub, sizeof sub, dir, rel))
        return posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", dir, rel);
    int rc = eng_cfgjson_load(sub, "config.json", 1, 1, &r, path, err);
    if (rc) return rc;
    rc = eng_cfgjson_int(r, "in_features", path, 1, 0, 1, 1 << 20, &d->in, err);
    if (!rc) rc = eng_cfgjson_int(r, "out_features", path, 1, 0, 1, 1 << 20, &d->out, err);
    if (!rc) rc = eng_cfgjson_bool(r, "bias", path, 1, &d->bias, err);
    if (!rc)
        rc = eng_cfgjson_str(r, "activation_function", path, 0, "torch.nn.modules.activation.Tanh", act, sizeof act, err);
    json_decref(r);
    if (rc) return rc;
    size_t i = 0;
    while (i < sizeof acts / sizeof acts[0] && strcmp(act, acts[i].cls)) i++;
    if (i == sizeof acts / sizeof acts[0])
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: activation_function %s is not supported (Identity, Tanh, "
                            "ReLU, Sigmoid, GELU)", path, act);
    d->act = acts[i].act;
    const int want = c->n_dense ? c->dense[c->n_dense - 1].out : c->info.hidden;
    if (d->in != want)
        return posy_err_set(err, POSY_E_INVALID, "%s: in_features %d, but the vector before it has %d values", path,
                            d->in, want);
    snprintf(d->path, sizeof d->path, "%s", rel);
    c->n_dense++;
    return 0;
}

/* One modules.json entry; *seen_pool set when it was the Pooling module. */
static int st_module(eng_config *c, const char *dir, json_t *m, size_t idx, const char *path, int *seen_pool,
                     posy_err *err) {
    char type[128], rel[256];
    int rc;
    if (!json_is_object(m)) return posy_err_set(err, POSY_E_INVALID, "%s: each module must be an object", path);
    if ((rc = eng_cfgjson_str(m, "type", path, 1, NULL, type, sizeof type, err)) ||
        (rc = eng_cfgjson_str(m, "path", path, 0, "", rel, sizeof rel, err)))
        return rc;
    const char *dot = strrchr(type, '.');
    const char *kind = dot ? dot + 1 : type;
    if (!strcmp(kind, "Transformer") || !strcmp(kind, "MLMTransformer")) return 0;
    if (!strcmp(kind, "SpladePooling")) {   /* a sparse encoder (eng_config_splade.c) */
        if (*seen_pool) return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: more than one Pooling module", path);
        if (!st_rel_path_ok(rel))
            return posy_err_set(err, POSY_E_INVALID, "%s: SpladePooling path '%s' leaves the model directory", path,
                                rel);
        *seen_pool = 1;
        return eng_config_splade_pool(c, dir, rel, err);
    }
    if (!strcmp(kind, "StaticEmbedding")) { /* its own pooling: the mean of its rows (eng_config_static.c) */
        if (idx != 0 || !c->static_emb)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a StaticEmbedding module is supported as the first "
                                "module only", path);
        *seen_pool = 1;
        return 0;
    }
    if (c->info.normalize) /* sentence-transformers runs them in order: a module after Normalize would undo it */
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: module %s after Normalize is not supported", path, type);
    if (!strcmp(kind, "Normalize")) {
        c->info.normalize = 1;
        return 0;
    }
    if (!strcmp(kind, "Dense")) {
        if (!*seen_pool)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a Dense module before Pooling is not supported", path);
        if (!st_rel_path_ok(rel))
            return posy_err_set(err, POSY_E_INVALID, "%s: Dense path '%s' leaves the model directory", path, rel);
        return st_dense(c, dir, rel, err);
    }
    if (!strcmp(kind, "Pooling")) {
        if (*seen_pool) return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: more than one Pooling module", path);
        if (!st_rel_path_ok(rel))
            return posy_err_set(err, POSY_E_INVALID, "%s: Pooling path '%s' leaves the model directory", path, rel);
        *seen_pool = 1;
        return st_pooling(c, dir, rel, err);
    }
    return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: module type %s is not supported (Transformer, StaticEmbedding, "
                        "Pooling, Dense, Normalize, MLMTransformer with SpladePooling)", path, type);
}

static int st_modules_in(eng_config *c, const char *dir, json_t *r, const char *path, posy_err *err) {
    int rc = 0;
    int seen_pool = 0;
    if (!json_is_array(r)) rc = posy_err_set(err, POSY_E_INVALID, "%s: expected a JSON array of modules", path);
    for (size_t i = 0; !rc && i < json_array_size(r); i++)
        rc = st_module(c, dir, json_array_get(r, i), i, path, &seen_pool, err);
    if (!rc && !seen_pool)
        rc = posy_err_set(err, POSY_E_UNSUPPORTED, "%s: no Pooling module (token embeddings are not served)", path);
    if (!rc && c->splade) rc = eng_config_splade_head(c, path, err);
    return rc;
}

static int st_modules(eng_config *c, const char *dir, posy_err *err) {
    char path[1024];
    json_t *r = NULL;
    c->info.pooling = POSY_POOL_MEAN;
    c->info.normalize = 0;
    c->n_dense = 0;
    int rc = eng_cfgjson_load(dir, "modules.json", 0, 0, &r, path, err);
    if (!rc && r) rc = st_modules_in(c, dir, r, path, err);
    json_decref(r);
    c->info.dim = c->splade ? c->info.vocab : c->n_dense ? c->dense[c->n_dense - 1].out : c->info.hidden;
    return rc;
}

/* Without a max_seq_length, sentence-transformers truncates at the
 * tokenizer's model_max_length capped by the positions.  That field is
 * often 1e30-ish (written as a huge integer), hence INT_AS_REAL; the file
 * belongs to the tokenizer, so a broken one is left for it to report. */
static int st_tokenizer_max_len(const char *dir, int max_positions) {
    char path[1024];
    if (posy_path_join(path, sizeof path, dir, "tokenizer_config.json") || !posy_file_exists(path))
        return max_positions;
    char *text = posy_file_read(path, 16u << 20, NULL, NULL);
    json_t *r = text ? json_loads(text, JSON_DECODE_INT_AS_REAL, NULL) : NULL;
    json_t *v = json_object_get(r, "model_max_length");
    double m = json_is_number(v) ? json_number_value(v) : 0;
    json_decref(r);
    free(text);
    return m >= 1 && m < max_positions ? (int)m : max_positions;
}

static int st_bert_config(eng_config *c, const char *dir, posy_err *err) {
    char path[1024];
    json_t *r;
    if (c->static_emb) return 0; /* sentence-transformers reads no such file for them: eng_config_static.c */
    int msl = st_tokenizer_max_len(dir, c->info.max_positions);
    c->info.max_seq_len = msl;
    int rc = eng_cfgjson_load(dir, "sentence_bert_config.json", 0, 1, &r, path, err);
    if (rc || !r) return rc;
    rc = eng_cfgjson_int(r, "max_seq_length", path, 0, msl, 1, 1 << 22, &msl, err);
    if (!rc) rc = eng_cfgjson_bool(r, "do_lower_case", path, 0, &c->do_lower_case, err);
    json_decref(r);
    if (rc) return rc;
    c->info.max_seq_len = msl < c->info.max_positions ? msl : c->info.max_positions;
    return 0;
}

static int st_prompts(eng_config *c, const char *dir, posy_err *err) {
    char path[1024];
    json_t *r;
    int rc = eng_cfgjson_load(dir, "config_sentence_transformers.json", 0, 1, &r, path, err);
    if (rc || !r) return rc;
    json_t *p = json_object_get(r, "prompts");
    const char *key;
    json_t *v;
    if (p && !json_is_null(p) && !json_is_object(p))
        rc = posy_err_set(err, POSY_E_INVALID, "%s: prompts must be an object of strings", path);
    if (!rc && json_is_object(p)) {
        json_object_foreach(p, key, v) {
            if (!json_is_string(v) || strlen(key) >= sizeof c->prompts[0].name || c->n_prompts == ENG_MAX_PROMPTS) {
                rc = posy_err_set(err, POSY_E_INVALID, "%s: prompt '%.64s' is not a string, its name is over 63 bytes, "
                                  "or there are more than %d prompts", path, key, ENG_MAX_PROMPTS);
                break;
            }
            eng_prompt *e = &c->prompts[c->n_prompts];
            snprintf(e->name, sizeof e->name, "%s", key);
            if (!(e->text = strdup(json_string_value(v)))) { rc = posy_err_set(err, POSY_E_NOMEM, "out of memory"); break; }
            c->n_prompts++;
        }
    }
    if (!rc) rc = eng_cfgjson_str(r, "default_prompt_name", path, 0, "", c->default_prompt_name,
                                  sizeof c->default_prompt_name, err);
    if (!rc && c->default_prompt_name[0] && !eng_config_prompt(c, c->default_prompt_name))
        rc = posy_err_set(err, POSY_E_INVALID, "%s: default_prompt_name '%s' is not one of the prompts", path,
                          c->default_prompt_name);
    json_decref(r);
    return rc;
}

int eng_config_load_st_router(eng_config *c, const char *dir, posy_err *err) {
    char tdir[1024], path[1024];
    c->info.pooling = POSY_POOL_MEAN;   /* unused: SpladePooling folds the tokens */
    c->info.normalize = 0;
    c->n_dense = 0;
    if (posy_path_join(tdir, sizeof tdir, dir, c->rt.tdir) || posy_path_join(path, sizeof path, dir, "router_config.json"))
        return posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", dir, c->rt.tdir);
    int rc = eng_config_splade_pool(c, dir, c->rt.pool, err);
    if (!rc) rc = eng_config_splade_head(c, path, err);
    c->info.dim = c->info.vocab;
    if (!rc) rc = st_bert_config(c, tdir, err);
    if (!rc) rc = st_prompts(c, dir, err);
    return rc;
}

int eng_config_load_st(eng_config *c, const char *model_dir, posy_err *err) {
    int rc = st_modules(c, model_dir, err);
    if (!rc) rc = st_bert_config(c, model_dir, err);
    if (!rc) rc = st_prompts(c, model_dir, err);
    return rc;
}

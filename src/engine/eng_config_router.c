/* eng_config_router: sentence-transformers' Router module, as inference-
 * free SPLADE models use it (opensearch-neural-sparse-encoding-doc-v2/v3,
 * saved by SparseEncoder with Router.for_query_document).
 *
 * modules.json names one Router; router_config.json maps each route to
 * module folders.  The "document" route is MLMTransformer + SpladePooling,
 * which the engine already runs: its transformer folder is read as the
 * model (config.json, weights, tokenizer), its pooling folder as
 * SpladePooling's.  The "query" route is one SparseStaticEmbedding: a
 * weight per token id, looked up for the query's tokens (without special
 * tokens; present or not, never counted) -- no transformer at query time,
 * so the gateway answers it from the weights alone (eng_router_query).
 * Any other shape (more routes, other modules, route_mappings, a Router
 * beside other modules) is refused by name: running part of it would
 * return vectors that silently differ from the reference.
 */
#include "eng_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eng_cfgjson.h"
#include "eng_safetensors.h"
#include "posy_file.h"

/* "...sparse_encoder.modules.sparse_static_embedding.SparseStaticEmbedding" -> the class name */
static const char *rt_kind(const char *type) {
    const char *dot = strrchr(type, '.');
    return dot ? dot + 1 : type;
}

static int rt_folder(json_t *types, json_t *names, size_t i, const char *want, const char *route, const char *path,
                     char *out, size_t cap, posy_err *err) {
    const char *name = json_string_value(json_array_get(names, i));
    const char *type = name ? json_string_value(json_object_get(types, name)) : NULL;
    if (!name || !type)
        return posy_err_set(err, POSY_E_INVALID, "%s: route '%s' module %zu has no name or no entry in \"types\"", path,
                            route, i);
    if (strcmp(rt_kind(type), want))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: route '%s' module %zu is %s, posy serves a Router of a query "
                            "route [SparseStaticEmbedding] and a document route [MLMTransformer, SpladePooling] "
                            "(inference-free SPLADE) only", path, route, i, type);
    if (name[0] == '/' || strstr(name, "..") || strlen(name) >= cap)
        return posy_err_set(err, POSY_E_INVALID, "%s: module folder '%.80s' leaves the model directory", path, name);
    snprintf(out, cap, "%s", name);
    return 0;
}

int eng_config_router_probe(const char *dir, eng_router *rt, posy_err *err) {
    char path[1024];
    json_t *m = NULL, *r = NULL;
    memset(rt, 0, sizeof *rt);
    posy_err quiet;
    posy_err_clear(&quiet);
    if (eng_cfgjson_load(dir, "modules.json", 0, 0, &m, path, &quiet) || !json_is_array(m)) {
        json_decref(m);
        return 0;   /* st_modules reports a broken modules.json */
    }
    int routers = 0;
    for (size_t i = 0; i < json_array_size(m); i++) {
        const char *type = json_string_value(json_object_get(json_array_get(m, i), "type"));
        routers += type && !strcmp(rt_kind(type), "Router");
    }
    const size_t n_mod = json_array_size(m);
    json_decref(m);
    if (!routers) return 0;
    if (routers != 1 || n_mod != 1)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a Router is supported as the only module", path), -1;
    int rc = eng_cfgjson_load(dir, "router_config.json", 1, 1, &r, path, err);
    if (rc) return -1;
    json_t *types = json_object_get(r, "types"), *st = json_object_get(r, "structure");
    json_t *par = json_object_get(r, "parameters");
    json_t *q = json_object_get(st, "query"), *d = json_object_get(st, "document");
    json_t *maps = json_object_get(par, "route_mappings"), *def = json_object_get(par, "default_route");
    if (!json_is_object(types) || !json_is_object(st))
        rc = posy_err_set(err, POSY_E_INVALID, "%s: needs the objects \"types\" and \"structure\"", path);
    else if (json_object_size(st) != 2 || !json_is_array(q) || !json_is_array(d) || json_array_size(q) != 1 ||
             json_array_size(d) != 2)
        rc = posy_err_set(err, POSY_E_UNSUPPORTED, "%s: posy serves a Router of exactly two routes, \"query\" [one "
                          "SparseStaticEmbedding] and \"document\" [MLMTransformer, SpladePooling] (inference-free "
                          "SPLADE)", path);
    else if (maps && !json_is_null(maps) && (!json_is_object(maps) || json_object_size(maps)))
        rc = posy_err_set(err, POSY_E_UNSUPPORTED, "%s: route_mappings are not supported (the request's \"task\" "
                          "names the route: query or document)", path);
    else if (def && !json_is_null(def) && (!json_is_string(def) || (strcmp(json_string_value(def), "query") &&
                                                                     strcmp(json_string_value(def), "document"))))
        rc = posy_err_set(err, POSY_E_INVALID, "%s: default_route must be \"query\", \"document\" or null", path);
    if (!rc) rc = rt_folder(types, q, 0, "SparseStaticEmbedding", "query", path, rt->qdir, sizeof rt->qdir, err);
    if (!rc) rc = rt_folder(types, d, 0, "MLMTransformer", "document", path, rt->tdir, sizeof rt->tdir, err);
    if (!rc) rc = rt_folder(types, d, 1, "SpladePooling", "document", path, rt->pool, sizeof rt->pool, err);
    if (!rc && json_is_string(def)) snprintf(rt->def, sizeof rt->def, "%s", json_string_value(def));
    json_decref(r);
    return rc ? -1 : 1;
}

int eng_router_query_load(const char *dir, const eng_config *c, eng_router_query *out, posy_err *err) {
    char qdir[1024], path[1024], tpath[1024];
    memset(out, 0, sizeof *out);
    if (posy_path_join(qdir, sizeof qdir, dir, c->rt.qdir) || posy_path_join(path, sizeof path, qdir, "model.safetensors"))
        return posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", dir, c->rt.qdir);
    /* one tokenizer serves both routes: the query's must be the document's */
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int rc = 0;
    if (posy_path_join(tpath, sizeof tpath, qdir, "tokenizer.json") || !(a = posy_file_read(tpath, 1u << 30, &na, err)))
        rc = err->code ? err->code : POSY_E_IO;
    char ddir[1024];
    if (!rc && (posy_path_join(ddir, sizeof ddir, dir, c->rt.tdir) || posy_path_join(tpath, sizeof tpath, ddir, "tokenizer.json") ||
                !(b = posy_file_read(tpath, 1u << 30, &nb, err))))
        rc = err->code ? err->code : POSY_E_IO;
    if (!rc && (na != nb || memcmp(a, b, na)))
        rc = posy_err_set(err, POSY_E_UNSUPPORTED, "%s: the query route's tokenizer.json differs from the document "
                          "route's (%s); posy serves a Router whose routes share one tokenizer", qdir, c->rt.tdir);
    free(a);
    free(b);
    if (rc) return rc;
    eng_st_file f;
    if (eng_st_open(&f, path, err)) return err->code ? err->code : POSY_E_IO;
    const int64_t dims[1] = {c->info.vocab};
    out->weight = malloc((size_t)c->info.vocab * sizeof(float));
    if (!out->weight) rc = posy_err_set(err, POSY_E_NOMEM, "out of memory for the query weights");
    else if (eng_st_read_f32(&f, "weight", 1, dims, out->weight, err))
        rc = err->code ? err->code : POSY_E_INVALID;
    eng_st_close(&f);
    for (int i = 0; !rc && i < c->info.vocab; i++)
        if (!(out->weight[i] == out->weight[i]) || out->weight[i] > 3.0e38f || out->weight[i] < -3.0e38f)
            rc = posy_err_set(err, POSY_E_INVALID, "%s: weight[%d] is not a finite number", path, i);
    if (rc) {
        free(out->weight);
        out->weight = NULL;
        return rc;
    }
    out->n = c->info.vocab;
    /* SparseStaticEmbedding tokenizes with truncation at the tokenizer's model_max_length */
    out->max_len = 0;
    if (!posy_path_join(tpath, sizeof tpath, qdir, "tokenizer_config.json") && posy_file_exists(tpath)) {
        char *text = posy_file_read(tpath, 16u << 20, NULL, NULL);
        json_t *r = text ? json_loads(text, JSON_DECODE_INT_AS_REAL, NULL) : NULL;
        json_t *v = json_object_get(r, "model_max_length");
        const double ml = json_is_number(v) ? json_number_value(v) : 0;
        out->max_len = ml >= 1 && ml < (1 << 24) ? (int)ml : 0;
        json_decref(r);
        free(text);
    }
    return 0;
}

void eng_router_query_vec(const eng_router_query *q, const int32_t *ids, int n, float *out) {
    memset(out, 0, (size_t)q->n * sizeof *out);
    for (int k = 0; k < n; k++)
        if (ids[k] >= 0 && ids[k] < q->n) out[ids[k]] = q->weight[ids[k]];   /* presence, not counts */
}

const char *eng_config_task_prompt(const eng_config *c, const char *task) {
    static const char *const doc_names[] = {"document", "passage", "corpus"};
    if (!strcmp(task, "query")) return eng_config_prompt(c, "query") ? "query" : NULL;
    for (size_t i = 0; i < sizeof doc_names / sizeof doc_names[0]; i++)
        if (eng_config_prompt(c, doc_names[i])) return doc_names[i];
    return NULL;
}

void eng_router_query_free(eng_router_query *q) {
    free(q->weight);
    memset(q, 0, sizeof *q);
}

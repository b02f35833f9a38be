/* eng_config_static: sentence-transformers' StaticEmbedding models
 * (static-retrieval-mrl-*, static-similarity-mrl-*, model2vec's potion-*
 * saved for sentence-transformers).
 *
 * Such a model has no transformer: its first module is a StaticEmbedding,
 * an EmbeddingBag that averages one learned row per token id, and there is
 * no config.json to say so (or one of model2vec's own that is not a
 * transformers config), so modules.json is read first.  The module's
 * folder ("0_StaticEmbedding" up to sentence-transformers 5, "" at the root
 * from 6 on) holds model.safetensors and tokenizer.json.  Its sizes come
 * from the weights' header: "embedding.weight" [vocab, dim], or model2vec's
 * "embeddings" with optional "mapping" (token id -> row) and "weights"
 * (a scale per token id), which sentence-transformers folds into one row
 * per token id at load (eng_static_weights.c does the same).
 *
 * What sentence-transformers does with the text, posy does too: the
 * tokenizer runs without special tokens, and the tokenizer.json's own
 * "truncation", if it has one, is the limit (sentence-transformers leaves
 * it on).  Without one sentence-transformers has no limit at all; posy's
 * max_seq_len is then STATIC_SEQ_LEN, the CPU's default batch, so that a
 * longer text is refused, truncated or split into windows (--chunked) as
 * for any model.  The engine itself takes any length a batch holds.
 */
#include "eng_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eng_cfgjson.h"
#include "eng_safetensors.h"
#include "posy_file.h"

#define STATIC_MAX_LEN (1 << 22)   /* the engine's limit: its largest batch */
#define STATIC_SEQ_LEN 16384       /* max_seq_len without the tokenizer's truncation */

/* 1 when `type` names sentence-transformers' StaticEmbedding in any of its
 * module paths (sentence_transformers.models.StaticEmbedding, ...). */
static int static_type(const char *type) {
    const char *dot = strrchr(type, '.');
    return !strcmp(dot ? dot + 1 : type, "StaticEmbedding");
}

int eng_config_static_probe(const char *dir, char *rel, size_t cap) {
    char path[1024];
    json_t *r = NULL;
    posy_err err;
    posy_err_clear(&err);
    int found = 0;
    if (eng_cfgjson_load(dir, "modules.json", 0, 0, &r, path, &err) == 0 && json_is_array(r)) {
        json_t *m = json_array_get(r, 0);
        const char *type = json_string_value(json_object_get(m, "type"));
        const char *p = json_string_value(json_object_get(m, "path"));
        if (type && static_type(type)) {
            /* a folder inside the model directory: no absolute path, no "..", one that fits */
            found = !p || (p[0] != '/' && !strstr(p, "..") && strlen(p) < cap) ? 1 : -1;
            snprintf(rel, cap, "%s", p ? p : "");
        }
    }
    json_decref(r);
    return found;
}

int eng_model_tokenizer_file(const char *dir, char *out, size_t cap, int *add_special) {
    char rel[256], sub[1024];
    int st = eng_config_static_probe(dir, rel, sizeof rel);
    if (add_special) *add_special = !st;
    if (st < 0) return -1;
    eng_router rt;
    posy_err quiet;
    posy_err_clear(&quiet);
    if (!st && eng_config_router_probe(dir, &rt, &quiet) == 1)   /* the document route's transformer folder */
        return posy_path_join(sub, sizeof sub, dir, rt.tdir) || posy_path_join(out, cap, sub, "tokenizer.json");
    if (!st) return posy_path_join(out, cap, dir, "tokenizer.json");
    return posy_path_join(sub, sizeof sub, dir, rel) || posy_path_join(out, cap, sub, "tokenizer.json");
}

/* The tokenizer's own "truncation" (sentence-transformers keeps it: it
 * turns padding off and nothing else).  0: none; -1: unreadable (the
 * tokenizer loader reports that). */
static int static_tokenizer_truncation(const char *moddir) {
    char path[1024];
    if (posy_path_join(path, sizeof path, moddir, "tokenizer.json")) return -1;
    char *text = posy_file_read(path, 1u << 30, NULL, NULL);
    json_t *r = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    json_t *t = json_object_get(r, "truncation");
    json_int_t n = json_integer_value(json_object_get(t, "max_length"));
    int out = !r ? -1 : n >= 1 && n < STATIC_MAX_LEN ? (int)n : 0;
    json_decref(r);
    return out;
}

/* Sizes from the weights' header: [vocab, dim] of the table the engine
 * will average over (after model2vec's mapping, one row per token id). */
static int static_sizes(eng_config *c, const char *moddir, posy_err *err) {
    char path[1024];
    if (posy_path_join(path, sizeof path, moddir, "model.safetensors"))
        return posy_err_set(err, POSY_E_INVALID, "%s: path too long", moddir);
    if (!posy_file_exists(path))
        return posy_err_set(err, POSY_E_INVALID, "%s: the StaticEmbedding module's weights are missing (posy reads "
                            "model.safetensors only)", path);
    eng_st_file st;
    if (eng_st_open(&st, path, err)) return -1;
    const eng_st_tensor *w = eng_st_find(&st, "embedding.weight");
    const eng_st_tensor *m = w ? NULL : eng_st_find(&st, "mapping");
    if (!w) w = eng_st_find(&st, "embeddings");
    int rc = 0;
    if (!w)
        rc = posy_err_set(err, POSY_E_INVALID, "%s: neither embedding.weight nor model2vec's embeddings is in it", path);
    else if (w->ndim != 2 || w->shape[0] < 1 || w->shape[1] < 1 || w->shape[0] > (1 << 26) || w->shape[1] > (1 << 16))
        rc = posy_err_set(err, POSY_E_INVALID, "%s: %s has shape of %d dims, need [vocab <= 2^26, dim <= 65536]", path,
                          w->name, w->ndim);
    else if (m && (m->ndim != 1 || m->shape[0] < 1 || m->shape[0] > (1 << 26)))
        rc = posy_err_set(err, POSY_E_INVALID, "%s: mapping must be one list of row numbers", path);
    if (!rc) {
        c->info.vocab = (int)(m ? m->shape[0] : w->shape[0]);
        c->info.hidden = (int)w->shape[1];
    }
    eng_st_close(&st);
    return rc;
}

int eng_config_load_static(eng_config *c, const char *dir, const char *rel, int rel_ok, posy_err *err) {
    char moddir[1024];
    if (!rel_ok || strlen(rel) >= sizeof c->static_dir)
        return posy_err_set(err, POSY_E_INVALID, "%s/modules.json: StaticEmbedding path '%.200s' leaves the model "
                            "directory or is over 255 bytes", dir, rel);
    if (posy_path_join(moddir, sizeof moddir, dir, rel))
        return posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", dir, rel);
    snprintf(c->static_dir, sizeof c->static_dir, "%s", rel);
    c->static_emb = 1;
    c->add_special = 0;
    snprintf(c->model_type, sizeof c->model_type, "static_embedding");
    snprintf(c->info.arch, sizeof c->info.arch, "static");
    int rc = static_sizes(c, moddir, err);
    if (rc) return rc;
    int trunc = static_tokenizer_truncation(moddir);
    c->info.max_positions = STATIC_MAX_LEN;
    c->max_position_embeddings = STATIC_MAX_LEN;
    c->info.max_seq_len = trunc > 0 ? trunc : STATIC_SEQ_LEN;
    c->info.pooling = POSY_POOL_MEAN;
    return 0;
}

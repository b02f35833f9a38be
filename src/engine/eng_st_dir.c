/* eng_st_dir: the weights of a model directory, single-file or sharded.
 *
 * Large checkpoints come as model-0000N-of-0000M.safetensors plus
 * model.safetensors.index.json, whose "weight_map" says which shard holds
 * each tensor.  Every shard is mapped and parsed by eng_safetensors.c and
 * its tensors are merged into one sorted table, so the rest of the engine
 * sees one eng_st_file whatever the layout (each tensor remembers its
 * shard for error messages).  The index is checked against the shards:
 * a shard name must be a plain file name in the directory (no paths), a
 * tensor the index promises must be in that shard, and no tensor may be
 * in two shards.
 */
#include "eng_safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ST_MAX_SHARDS 4096
#define ST_MAX_INDEX_BYTES (64u << 20)

static int st_cmp_name(const void *a, const void *b) {
    return strcmp(((const eng_st_tensor *)a)->name, ((const eng_st_tensor *)b)->name);
}

static int st_shard_name_ok(const char *s) {
    return s[0] && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') && strlen(s) < 256;
}

/* Distinct shard names of the weight map, in first-seen order. */
static int st_collect_shards(json_t *wm, const char ***names_out, int *n_out, const char *ipath, posy_err *err) {
    size_t cap = json_object_size(wm);
    const char **names = calloc(cap ? cap : 1, sizeof *names);
    if (!names) return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory", ipath);
    int n = 0;
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v) {
        if (!json_is_string(v) || !st_shard_name_ok(json_string_value(v))) {
            free(names);
            return posy_err_set(err, POSY_E_INVALID, "%s: weight_map[\"%s\"] is not a file name in the model directory",
                                ipath, key);
        }
        const char *s = json_string_value(v);
        int seen = 0;
        for (int i = 0; i < n && !seen; i++) seen = strcmp(names[i], s) == 0;
        if (seen) continue;
        if (n == ST_MAX_SHARDS) {
            free(names);
            return posy_err_set(err, POSY_E_INVALID, "%s: more than %d shards", ipath, ST_MAX_SHARDS);
        }
        names[n++] = s;
    }
    *names_out = names;
    *n_out = n;
    return 0;
}

/* Move the tensors and mapping of shard `si` (parsed into `s`) into `f`. */
static int st_absorb_shard(eng_st_file *f, eng_st_file *s, int si, const char *path, posy_err *err) {
    eng_st_tensor *nt = realloc(f->tensors, sizeof *nt * ((size_t)f->n_tensors + (size_t)s->n_tensors + 1));
    char *p = strdup(path);
    if (!nt || !p) {
        if (nt) f->tensors = nt;
        free(p);
        return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory", path);
    }
    f->tensors = nt;
    for (int i = 0; i < s->n_tensors; i++) {
        s->tensors[i].shard = si;
        f->tensors[f->n_tensors++] = s->tensors[i];
    }
    free(s->tensors);
    s->tensors = NULL;
    s->n_tensors = 0;
    f->shard_maps[si] = s->map;
    f->shard_paths[si] = p;
    s->owns_map = 0;
    f->n_shards = si + 1;
    return 0;
}

static int st_open_shards(eng_st_file *f, const char *dir, const char **names, int n, posy_err *err) {
    f->shard_maps = calloc((size_t)n, sizeof *f->shard_maps);
    f->shard_paths = calloc((size_t)n, sizeof *f->shard_paths);
    if (!f->shard_maps || !f->shard_paths) return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        char path[1024];
        eng_st_file s;
        if (posy_path_join(path, sizeof path, dir, names[i]))
            return posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", dir, names[i]);
        int rc = eng_st_open(&s, path, err);
        if (rc) return rc;
        rc = st_absorb_shard(f, &s, i, path, err);
        eng_st_close(&s);
        if (rc) return rc;
    }
    return 0;
}

/* Sorted merged table: no duplicates, and every weight_map entry present
 * in the shard the index names. */
static int st_check_merged(eng_st_file *f, json_t *wm, const char *ipath, posy_err *err) {
    if (f->n_tensors) qsort(f->tensors, (size_t)f->n_tensors, sizeof *f->tensors, st_cmp_name);
    for (int i = 1; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i - 1].name, f->tensors[i].name) == 0)
            return posy_err_set(err, POSY_E_INVALID, "tensor %s is in both %s and %s", f->tensors[i].name,
                                f->shard_paths[f->tensors[i - 1].shard], f->shard_paths[f->tensors[i].shard]);
    const char *key;
    json_t *v;
    json_object_foreach(wm, key, v) {
        const eng_st_tensor *t = eng_st_find(f, key);
        const char *want = json_string_value(v);
        const char *have = t ? strrchr(f->shard_paths[t->shard], '/') : NULL;
        if (!t || strcmp(have ? have + 1 : f->shard_paths[t->shard], want) != 0)
            return posy_err_set(err, POSY_E_INVALID, "%s: tensor %s should be in %s but is not there", ipath,
                                key, want);
    }
    return 0;
}

static int st_open_index(eng_st_file *f, const char *dir, const char *ipath, posy_err *err) {
    json_error_t jerr;
    char *text = posy_file_read(ipath, ST_MAX_INDEX_BYTES, NULL, err);
    if (!text) return err ? (int)err->code : POSY_E_IO;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!root)
        return posy_err_set(err, POSY_E_INVALID, "%s: not valid JSON: %s (line %d)", ipath, jerr.text, jerr.line);
    json_t *wm = json_object_get(root, "weight_map");
    const char **names = NULL;
    int n = 0, rc;
    if (!json_is_object(root) || !json_is_object(wm) || json_object_size(wm) == 0)
        rc = posy_err_set(err, POSY_E_INVALID, "%s: no \"weight_map\" object", ipath);
    else
        rc = st_collect_shards(wm, &names, &n, ipath, err);
    if (!rc) rc = st_open_shards(f, dir, names, n, err);
    if (!rc) rc = st_check_merged(f, wm, ipath, err);
    free(names);
    json_decref(root);
    return rc;
}

int eng_st_open_dir(eng_st_file *f, const char *model_dir, posy_err *err) {
    char path[1024];
    memset(f, 0, sizeof *f);
    if (posy_path_join(path, sizeof path, model_dir, "model.safetensors"))
        return posy_err_set(err, POSY_E_INVALID, "model directory path too long: %s", model_dir);
    if (posy_file_exists(path)) return eng_st_open(f, path, err);
    if (posy_path_join(path, sizeof path, model_dir, "model.safetensors.index.json"))
        return posy_err_set(err, POSY_E_INVALID, "model directory path too long: %s", model_dir);
    if (!posy_file_exists(path))
        return posy_err_set(err, POSY_E_IO,
                            "%s: no model.safetensors or model.safetensors.index.json (posy reads safetensors "
                            "only; convert pytorch_model.bin with the `safetensors` Python package)",
                            model_dir);
    snprintf(f->path, sizeof f->path, "%s", path);
    int rc = st_open_index(f, model_dir, path, err);
    if (rc) eng_st_close(f);
    return rc;
}

/* eng_cfgjson: see eng_cfgjson.h. */
#include "eng_cfgjson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "posy_file.h"

#define CFG_MAX_FILE (16u << 20)

int eng_cfgjson_load(const char *dir, const char *name, int required, int want_object, json_t **out,
                     char *path_out, posy_err *err) {
    *out = NULL;
    if (posy_path_join(path_out, 1024, dir, name))
        return posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", dir, name);
    if (!posy_file_exists(path_out)) {
        if (!required) return 0;
        return posy_err_set(err, POSY_E_IO, "%s: missing (not a Hugging Face model directory?)", path_out);
    }
    char *text = posy_file_read(path_out, CFG_MAX_FILE, NULL, err);
    if (!text) return err ? (int)err->code : POSY_E_IO;
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    free(text);
    if (!root)
        return posy_err_set(err, POSY_E_INVALID, "%s: not valid JSON: %s (line %d, column %d)", path_out,
                            jerr.text, jerr.line, jerr.column);
    if (want_object && !json_is_object(root)) {
        json_decref(root);
        return posy_err_set(err, POSY_E_INVALID, "%s: expected a JSON object at the top level", path_out);
    }
    *out = root;
    return 0;
}

/* The field, or NULL when absent or null; NULL with an error when required. */
static json_t *cfg_field(json_t *o, const char *key, const char *path, int required, int *rc, posy_err *err) {
    json_t *v = json_object_get(o, key);
    *rc = 0;
    if (v && !json_is_null(v)) return v;
    if (required) *rc = posy_err_set(err, POSY_E_INVALID, "%s: required field %s is missing", path, key);
    return NULL;
}

int eng_cfgjson_int(json_t *o, const char *key, const char *path, int required, long long def, long long lo,
                    long long hi, int *out, posy_err *err) {
    int rc;
    json_t *v = cfg_field(o, key, path, required, &rc, err);
    if (rc) return rc;
    long long x = def;
    if (v) {
        if (!json_is_integer(v))
            return posy_err_set(err, POSY_E_INVALID, "%s: field %s must be an integer", path, key);
        x = json_integer_value(v);
    }
    if (x < lo || x > hi)
        return posy_err_set(err, POSY_E_INVALID, "%s: field %s = %lld is outside [%lld, %lld]", path, key, x, lo,
                            hi);
    *out = (int)x;
    return 0;
}

int eng_cfgjson_num(json_t *o, const char *key, const char *path, int required, double def, double lo,
                    double hi, double *out, posy_err *err) {
    int rc;
    json_t *v = cfg_field(o, key, path, required, &rc, err);
    if (rc) return rc;
    double x = def;
    if (v) {
        if (!json_is_number(v))
            return posy_err_set(err, POSY_E_INVALID, "%s: field %s must be a number", path, key);
        x = json_number_value(v);
    }
    if (!(x >= lo && x <= hi))
        return posy_err_set(err, POSY_E_INVALID, "%s: field %s = %g is outside [%g, %g]", path, key, x, lo, hi);
    *out = x;
    return 0;
}

int eng_cfgjson_bool(json_t *o, const char *key, const char *path, int def, int *out, posy_err *err) {
    int rc;
    json_t *v = cfg_field(o, key, path, 0, &rc, err);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return posy_err_set(err, POSY_E_INVALID, "%s: field %s must be true or false", path, key);
    *out = json_is_true(v);
    return 0;
}

int eng_cfgjson_str(json_t *o, const char *key, const char *path, int required, const char *def, char *out,
                    size_t cap, posy_err *err) {
    int rc;
    json_t *v = cfg_field(o, key, path, required, &rc, err);
    if (rc) return rc;
    if (v && !json_is_string(v))
        return posy_err_set(err, POSY_E_INVALID, "%s: field %s must be a string", path, key);
    const char *s = v ? json_string_value(v) : def;
    if (strlen(s) >= cap)
        return posy_err_set(err, POSY_E_INVALID, "%s: field %s is too long (%zu bytes, at most %zu)", path, key,
                            strlen(s), cap - 1);
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

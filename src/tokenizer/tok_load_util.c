/* tok_load_util: typed access to tokenizer.json fields with errors that
 * name the field. */
#include <stdlib.h>
#include <string.h>

#include "tok_load_util.h"
#include "tok_regex.h"

int tok_j_bool(json_t *o, const char *key, int def, int *out, const char *path, posy_err *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) { *out = def; return 0; }
    if (!json_is_boolean(v))
        return posy_err_set(err, POSY_E_INVALID, "%s.%s: expected true or false", path, key);
    *out = json_is_true(v);
    return 0;
}

int tok_j_str(json_t *o, const char *key, int req, const char **out, size_t *len, const char *path,
              posy_err *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = NULL;
        if (len) *len = 0;
        return req ? posy_err_set(err, POSY_E_INVALID, "%s.%s: missing", path, key) : 0;
    }
    if (!json_is_string(v)) return posy_err_set(err, POSY_E_INVALID, "%s.%s: expected a string", path, key);
    *out = json_string_value(v);
    if (len) *len = json_string_length(v);
    return 0;
}

int tok_j_int(json_t *o, const char *key, int req, long long def, long long *out, const char *path,
              posy_err *err) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return req ? posy_err_set(err, POSY_E_INVALID, "%s.%s: missing", path, key) : 0;
    }
    if (!json_is_integer(v)) return posy_err_set(err, POSY_E_INVALID, "%s.%s: expected an integer", path, key);
    *out = json_integer_value(v);
    return 0;
}

char *tok_strndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

int tok_j_pattern(json_t *o, const char *path, char **lit, size_t *lit_len, void **regex, posy_err *err) {
    json_t *p = json_object_get(o, "pattern");
    if (!json_is_object(p))
        return posy_err_set(err, POSY_E_INVALID, "%s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", path);
    json_t *s = json_object_get(p, "String"), *r = json_object_get(p, "Regex");
    if (json_is_string(s)) {
        if (json_string_length(s) == 0)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s.pattern.String: empty pattern", path);
        *lit_len = json_string_length(s);
        *lit = tok_strndup(json_string_value(s), *lit_len);
        return *lit ? 0 : posy_err_set(err, POSY_E_NOMEM, "out of memory");
    }
    if (json_is_string(r)) {
        char field[256];
        snprintf(field, sizeof field, "%s.pattern.Regex", path);
        *regex = tok_regex_compile(json_string_value(r), json_string_length(r), field, err);
        return *regex ? 0 : (int)err->code;
    }
    return posy_err_set(err, POSY_E_INVALID, "%s.pattern: expected {\"String\": ...} or {\"Regex\": ...}", path);
}

/* eng_cfgjson: typed reads of small JSON model files with messages that
 * name the file and the field ("config.json: hidden_size must be an
 * integer in [1, 65536]").  Used by eng_config*.c only.
 *
 * A field that is absent or JSON null takes the caller's default (or is an
 * error when required); a field of the wrong type is always an error, so a
 * typo in a config never silently becomes a default.
 */
#ifndef ENG_CFGJSON_H
#define ENG_CFGJSON_H

#include <jansson.h>
#include "posy_err.h"

/* Load `dir`/`name`.  Missing file: *out = NULL and 0 when !required, else
 * an error.  Present but not a JSON object (when want_object) or not JSON:
 * an error.  `path_out` (1024 bytes) receives the full path for messages. */
int eng_cfgjson_load(const char *dir, const char *name, int required, int want_object, json_t **out,
                     char *path_out, posy_err *err);

int eng_cfgjson_int(json_t *o, const char *key, const char *path, int required, long long def, long long lo,
                    long long hi, int *out, posy_err *err);
int eng_cfgjson_num(json_t *o, const char *key, const char *path, int required, double def, double lo,
                    double hi, double *out, posy_err *err);
int eng_cfgjson_bool(json_t *o, const char *key, const char *path, int def, int *out, posy_err *err);
/* String field copied into out[cap]; too long is an error. */
int eng_cfgjson_str(json_t *o, const char *key, const char *path, int required, const char *def, char *out,
                    size_t cap, posy_err *err);

#endif

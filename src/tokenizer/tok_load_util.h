/* tok_load_util: JSON helpers shared by the loader files.  Every getter
 * names the field path in its error, so a bad file says exactly where. */
#ifndef TOK_LOAD_UTIL_H
#define TOK_LOAD_UTIL_H

#include <jansson.h>
#include "tok_internal.h"

#define TOK_MAX_DEPTH 16

/* Optional boolean field: `def` when absent or null; error if not a bool. */
int tok_j_bool(json_t *o, const char *key, int def, int *out, const char *path, posy_err *err);
/* Required (req=1) or optional string; *out borrowed from the JSON. */
int tok_j_str(json_t *o, const char *key, int req, const char **out, size_t *len, const char *path,
              posy_err *err);
int tok_j_int(json_t *o, const char *key, int req, long long def, long long *out, const char *path,
              posy_err *err);
char *tok_strndup(const char *s, size_t n);
/* {"String": s} or {"Regex": r} into a literal or a compiled regex. */
int tok_j_pattern(json_t *o, const char *path, char **lit, size_t *lit_len, void **regex, posy_err *err);

int tok_load_normalizer(json_t *j, tok_normalizer *n, const char *path, int depth, posy_err *err);
int tok_load_pretok(json_t *j, tok_pretok *p, const char *path, int depth, posy_err *err);
int tok_load_post(json_t *j, const tok_tokenizer *t, tok_post *p, const char *path, int depth,
                  posy_err *err);
int tok_load_model(json_t *j, tok_model *m, posy_err *err);
/* {"token": id, ...} into a fresh vocab (errors name model.vocab). */
int tok_load_vocab_object(json_t *v, tok_vocab *voc, posy_err *err);
int tok_load_decoder(json_t *j, tok_tokenizer *t, posy_err *err);

#endif

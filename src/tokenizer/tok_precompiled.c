/* tok_precompiled: the sentencepiece "Precompiled" normalizer (charsmap).
 * Not implemented yet: the loader refuses it with a clear error. */
#include "tok_internal.h"
#include "tok_norm_impl.h"

int tok_precompiled_apply(const void *charsmap, tok_buf *b, tok_norm_scratch *s) {
    (void)charsmap; (void)b; (void)s;
    return POSY_E_UNSUPPORTED;
}

void tok_precompiled_free(void *charsmap) { (void)charsmap; }

void *tok_precompiled_load(const char *b64, size_t len, const char *path, posy_err *err);
void *tok_precompiled_load(const char *b64, size_t len, const char *path, posy_err *err) {
    (void)b64; (void)len;
    posy_err_set(err, POSY_E_UNSUPPORTED, "%s: the Precompiled normalizer is not supported yet", path);
    return NULL;
}

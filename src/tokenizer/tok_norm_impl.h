/* tok_norm_impl: entry points shared between the normalizer files. */
#ifndef TOK_NORM_IMPL_H
#define TOK_NORM_IMPL_H

#include "tok_internal.h"

#define TOK_MAX_DECOMP 20

int tok_unorm_apply(tok_norm_type form, tok_buf *b, tok_norm_scratch *s);
/* Canonical combining class as the reference sees it. */
uint8_t tok_ccc(uint32_t cp);
int tok_replace_apply(const tok_normalizer *n, tok_buf *b, tok_norm_scratch *s);
int tok_precompiled_apply(const void *charsmap, tok_buf *b, tok_norm_scratch *s);
void tok_precompiled_free(void *charsmap);
void tok_regex_free(void *re);

#endif

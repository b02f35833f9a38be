/* tok_regex: the PCRE2 wrapper used by Split and Replace. */
#ifndef TOK_REGEX_H
#define TOK_REGEX_H

#include <stddef.h>
#include <stdint.h>
#include "posy_err.h"

/* Compile `pat` (UTF, Unicode properties, JIT when available).  NULL on error
 * with err naming `field`. */
void *tok_regex_compile(const char *pat, size_t len, const char *field, posy_err *err);
void tok_regex_free(void *re);
/* Rust regex's \w: single_word boundaries of added tokens. */
int tok_is_word_char(uint32_t cp);
/* The Whitespace pre-tokenizer's pattern with Rust regex's \w and \s. */
void *tok_regex_compile_whitespace(const char *field, posy_err *err);
/* Find the next match in s[0..len) at or after `from`.  Returns 1 and sets
 * [*ms, *me), 0 when none, or a negative posy_status.  *md is a per-caller
 * match-data cache (free with tok_regex_md_free). */
int tok_regex_next(const void *re, const char *s, size_t len, size_t from, size_t *ms, size_t *me,
                   void **md);
void tok_regex_md_free(void *md);

#endif

/* tok_pretok_impl: shared between the pre-tokenizer files. */
#ifndef TOK_PRETOK_IMPL_H
#define TOK_PRETOK_IMPL_H

#include "tok_internal.h"

/* ByteLevel and Metaspace: stages that rewrite the buffer. */
int tok_pre_transform(const tok_pretok *p, tok_pre_state *st, int first, tok_pre_scratch *ps);
/* GPT-2's split pattern, used by ByteLevel with use_regex. */
extern const char tok_gpt2_pattern[];
/* byte -> code point of the printable alphabet ByteLevel maps bytes to */
uint32_t tok_byte_char(uint8_t b);
/* inverse: code point -> byte, or -1 */
int tok_char_byte(uint32_t cp);

#endif

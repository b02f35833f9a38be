/* tok_lowercase: sentence-transformers' do_lower_case as a text pre-pass.
 *
 * sentence-transformers 6 applies do_lower_case by putting a tokenizers
 * Lowercase normalizer in front of the tokenizer's own one (older releases
 * ran Python's str.lower() on the text).  Both lowercase every character
 * with no context, except that str.lower() turns a word-final capital sigma
 * into 'ς' where Lowercase (Rust char::to_lowercase) gives 'σ'; posy follows
 * the installed release, so Σ -> σ always.  The per-character mapping is
 * tok_lower, the table the BertNormalizer's lowercase already uses, so
 * 'İ' -> "i̇" (two code points) matches too.  Done on the text rather than
 * inside the normalizer so the tokenizer file stays what it says; the one
 * visible difference is that a special token typed in the text ("[CLS]")
 * is lowercased before added tokens are matched.  Bytes past the first
 * invalid UTF-8 sequence are copied unchanged: tok_encode rejects them.
 */
#include <stdlib.h>
#include <string.h>

#include "tok.h"
#include "tok_internal.h"

int tok_lowercase_text(const char *s, size_t len, char **out, size_t *out_len, posy_err *err) {
    /* one code point of up to 4 bytes becomes at most 3 code points */
    if (len > ((size_t)-1 - 1) / 3)
        return posy_err_set(err, POSY_E_TOO_LONG, "text of %zu bytes is too long to lowercase", len);
    char *buf = malloc(len * 3 + 1);
    if (!buf) return posy_err_set(err, POSY_E_NOMEM, "out of memory lowercasing the text");
    size_t ok = tok_utf8_valid_prefix(s, len), i = 0, o = 0;
    while (i < ok) {
        uint32_t cp, l[3];
        i += (size_t)tok_utf8_next(s + i, &cp);
        int nl = tok_lower(cp, l);
        for (int k = 0; k < nl; k++) o += (size_t)tok_utf8_encode(l[k], buf + o);
    }
    memcpy(buf + o, s + ok, len - ok);
    o += len - ok;
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
    return 0;
}

/* tok_lowercase_text: the do_lower_case pre-pass.  Expected strings are the
 * tokenizers package's Lowercase().normalize_str output (the pytest
 * tests/python/test_lower_case.py checks more strings against it live);
 * here the byte-level edges: growth, 4-byte chars, invalid UTF-8 tails. */
#include <stdlib.h>
#include <string.h>

#include "posy_test.h"
#include "tok.h"

static void check(const char *in, size_t len, const char *want, size_t want_len) {
    char *out = NULL;
    size_t n = 0;
    posy_err err;
    posy_err_clear(&err);
    CHECK_EQ_INT(tok_lowercase_text(in, len, &out, &n, &err), 0);
    CHECK_EQ_INT(n, want_len);
    CHECK_MSG(out && memcmp(out, want, want_len) == 0 && out[n] == '\0', "lowercase of '%s'", in);
    free(out);
}

#define CHK(in, want) check(in, sizeof(in) - 1, want, sizeof(want) - 1)

static void test_lowercase(void) {
    CHK("", "");
    CHK("Hello WORLD 123!", "hello world 123!");
    CHK("\xC4\xB0stanbul", "i\xCC\x87stanbul");                 /* İ -> i + U+0307: grows */
    CHK("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3", "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x83");   /* ΟΔΟΣ -> οδοσ */
    CHK("\xE2\x84\xAA", "k");                                   /* Kelvin sign */
    CHK("\xC7\x85", "\xC7\x86");                                /* ǅ -> ǆ */
    CHK("\xF0\x90\x90\x80", "\xF0\x90\x90\xA8");                /* Deseret 𐐀 -> 𐐨 */
}

static void test_invalid_tail_copied(void) {
    CHK("AB\xFF" "CD", "ab\xFF" "CD");     /* after the first bad byte: unchanged */
    CHK("A\xC4", "a\xC4");                 /* truncated sequence */
}

TEST_MAIN(TEST(test_lowercase), TEST(test_invalid_tail_copied))

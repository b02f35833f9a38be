/* tok_regex: PCRE2 with JIT for the Oniguruma patterns of tokenizer.json.
 *
 * Patterns compile with PCRE2_UTF | PCRE2_UCP so \s, \d, \w and \p{..}
 * are Unicode-aware as in Oniguruma.  Subjects are validated UTF-8 before
 * they get here, so matching skips PCRE2's UTF check.  Match data is
 * cached by the caller (one per encoding), keeping tok_regex_next free of
 * allocation and the compiled pattern shareable between threads.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "tok_regex.h"

void *tok_regex_compile(const char *pat, size_t len, const char *field, posy_err *err) {
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | PCRE2_UCP, &ec, &eo, NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        posy_err_set(err, POSY_E_UNSUPPORTED, "%s: regex not supported at offset %zu: %s", field,
                     (size_t)eo, (const char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* falls back to the interpreter if unavailable */
    return re;
}

void tok_regex_free(void *re) {
    if (re) pcre2_code_free((pcre2_code *)re);
}

void tok_regex_md_free(void *md) {
    if (md) pcre2_match_data_free((pcre2_match_data *)md);
}

int tok_regex_next(const void *re, const char *s, size_t len, size_t from, size_t *ms, size_t *me,
                   void **md) {
    if (!*md) {
        *md = pcre2_match_data_create(1, NULL);
        if (!*md) return -POSY_E_NOMEM;
    }
    int rc = pcre2_match((const pcre2_code *)re, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK,
                         (pcre2_match_data *)*md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) return 0;
    if (rc < 0) return -POSY_E_TOO_LONG; /* match or depth limit on hostile input */
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer((pcre2_match_data *)*md);
    *ms = ov[0];
    *me = ov[1];
    return 1;
}

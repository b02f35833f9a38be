/* tok_prompt: how many leading tokens a prompt contributes to an encoding,
 * as sentence-transformers counts them for Pooling include_prompt false.
 *
 * sentence-transformers tokenizes the prompt alone (with the text's
 * lowercasing, special tokens added) and takes its length less one: the
 * trailing [SEP] / EOS that the prompt alone ends with but prompt + text
 * does not have at that position.  A leading [CLS] stays counted, so it is
 * left out of pooling too.  posy drops the last token only when it is
 * special, so a tokenizer that adds no trailing special loses no prompt
 * token.  One function for `posy embed` and the gateway, so the CLI and
 * the server skip exactly the same tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "tok.h"

int tok_prompt_length(const tok_tokenizer *t, const char *prompt, size_t len, int lower, tok_encoding *scratch,
                      int *n, posy_err *err) {
    char *lowered = NULL;
    *n = 0;
    if (lower) {
        int rc = tok_lowercase_text(prompt, len, &lowered, &len, err);
        if (rc) return rc;
        prompt = lowered;
    }
    tok_opts o = {.add_special = 1, .max_len = 0};
    int rc = tok_encode(t, prompt, len, &o, scratch, err);
    free(lowered);
    if (rc) return rc;
    *n = scratch->n;
    if (*n > 0 && scratch->special_mask && scratch->special_mask[*n - 1]) (*n)--;
    return 0;
}

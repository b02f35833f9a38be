/* cli_attention: parse --attention model|causal|bidirectional into the
 * engine option (posy_engine_opts.attention).  Decoder embedders differ
 * only in this (Qwen3-Embedding causal, pplx-embed bidirectional); the
 * flag overrides what the model's config.json says. */
#include <stdio.h>
#include <string.h>
#include "cli_attention.h"

int cli_parse_attention(const char *cmd, const char *s, posy_attention *out) {
    if (!strcmp(s, "model")) *out = POSY_ATTN_MODEL;
    else if (!strcmp(s, "causal")) *out = POSY_ATTN_CAUSAL;
    else if (!strcmp(s, "bidirectional")) *out = POSY_ATTN_BIDIRECTIONAL;
    else {
        fprintf(stderr, "%s: --attention must be model, causal or bidirectional, got '%s'\n", cmd, s);
        return -1;
    }
    return 0;
}

/* cli_attention: the --attention flag shared by posy embed and posy serve. */
#ifndef CLI_ATTENTION_H
#define CLI_ATTENTION_H

#include "posy_engine.h"

/* "model" (as config.json says), "causal" or "bidirectional".  Returns 0,
 * or -1 after printing a message naming `cmd` to stderr. */
int cli_parse_attention(const char *cmd, const char *s, posy_attention *out);

#endif

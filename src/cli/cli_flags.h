/* cli_flags: table-driven flags for the long-running commands (`posy
 * serve`, `posy worker`, `posy gateway`): `--name value` or `--name=value`,
 * each with an environment variable (POSY_<NAME>) so a container can be
 * configured without a command line; a flag wins over its variable.
 * Repeatable flags (--backend) collect into a list; a switch (serve's
 * --auto-truncate) may stand alone for 1.  Errors name the flag (or, where
 * the command asks, the variable a bad value came from) and return -1; the
 * caller exits 2.
 */
#ifndef CLI_FLAGS_H
#define CLI_FLAGS_H

#include <stddef.h>
#include <stdio.h>

/* CLI_F_SWITCH: a CLI_F_INT that reads as 1 when given without a value ('--x', '--x=0', '--x 0'
 * and '--x 1' all work; only 0 or 1 is taken as a separate word). */
typedef enum { CLI_F_STR = 0, CLI_F_INT = 1, CLI_F_LIST = 2, CLI_F_SWITCH = 3 } cli_flag_kind;

#define CLI_LIST_MAX 64
typedef struct cli_list {
    const char *v[CLI_LIST_MAX];
    int n;
} cli_list;

typedef struct cli_flag {
    const char *name, *env, *help;
    cli_flag_kind kind;
    long lo, hi;                 /* CLI_F_INT / CLI_F_SWITCH range */
    size_t off;                  /* offset of a const char *, long or cli_list in the options struct */
} cli_flag;

/* One command's flags and the text --help prints around them. */
typedef struct cli_cmd {
    const char *name, *summary;  /* "serve"; the paragraph under the usage line */
    const cli_flag *flags;
    size_t n;
    int help_width;              /* width of the flag-name column in --help */
    int env_err_names_var;       /* a bad variable's error names POSY_X rather than the flag */
} cli_cmd;

/* Fill `opts` from the environment, then argv.  Returns 0, 1 for --help
 * (usage printed to stdout), -1 on error (message on stderr). */
int cli_flags_parse(const cli_cmd *cmd, int argc, char **argv, void *opts);
void cli_flags_usage(FILE *f, const cli_cmd *cmd);

/* --hf-overrides (serve, worker, gateway; posy embed parses its own): vLLM's
 * flag, a JSON object over config.json's top level (eng_config_set_overrides) */
#define CLI_HF_OVERRIDES_FLAG(OFF)                                                                                 \
    {"--hf-overrides", "POSY_HF_OVERRIDES",                                                                        \
     "JSON object whose keys replace config.json's (vLLM's flag), e.g. for the original Qwen3-Reranker "            \
     "'{\"classifier_from_token\": [\"no\", \"yes\"], \"is_original_qwen3_reranker\": true}'; gateway and "       \
     "workers need the same", CLI_F_STR, 0, 0, OFF(hf_overrides)}

#endif

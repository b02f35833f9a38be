/* cli_flags: table-driven flags for the long-running commands (`posy
 * worker`, `posy gateway`): `--name value` or `--name=value`, each with an
 * environment variable (POSY_<NAME>) so a container can be configured
 * without a command line; a flag wins over its variable.  Repeatable flags
 * (--backend) collect into a list.  Errors name the flag and return -1; the
 * caller exits 2.
 */
#ifndef CLI_FLAGS_H
#define CLI_FLAGS_H

#include <stddef.h>
#include <stdio.h>

typedef enum { CLI_F_STR = 0, CLI_F_INT = 1, CLI_F_LIST = 2 } cli_flag_kind;

#define CLI_LIST_MAX 64
typedef struct cli_list {
    const char *v[CLI_LIST_MAX];
    int n;
} cli_list;

typedef struct cli_flag {
    const char *name, *env, *help;
    cli_flag_kind kind;
    long lo, hi;                 /* CLI_F_INT range */
    size_t off;                  /* offset of a const char *, long or cli_list in the options struct */
} cli_flag;

/* Fill `opts` from the environment, then argv.  Returns 0, 1 for --help
 * (usage printed to stdout), -1 on error (message on stderr). */
int cli_flags_parse(const char *cmd, const char *summary, const cli_flag *flags, size_t n, int argc, char **argv,
                    void *opts);
void cli_flags_usage(FILE *f, const char *cmd, const char *summary, const cli_flag *flags, size_t n);

#endif

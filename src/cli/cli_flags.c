/* cli_flags: see cli_flags.h. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_flags.h"

void cli_flags_usage(FILE *f, const cli_cmd *cmd) {
    int w = cmd->help_width;
    fprintf(f, "usage: posy %s [flags]\n\n%s\n\n", cmd->name, cmd->summary);
    for (size_t i = 0; i < cmd->n; i++)
        fprintf(f, "  %-*s %s [env %s]\n", w, cmd->flags[i].name, cmd->flags[i].help, cmd->flags[i].env);
    fprintf(f, "  %-*s %s\n", w, "--help", "this text");
}

static int cli_flag_set(const cli_cmd *cmd, const cli_flag *d, const char *v, void *opts, int from_env) {
    char *p = (char *)opts + d->off;
    const char *from = from_env && cmd->env_err_names_var ? d->env : d->name;
    switch (d->kind) {
    case CLI_F_STR: *(const char **)p = v; return 0;
    case CLI_F_INT:
    case CLI_F_SWITCH: return cli_parse_int(from, v, d->lo, d->hi, (long *)p);
    case CLI_F_LIST: {
        cli_list *l = (cli_list *)p;
        if (from_env) {              /* the variable holds a comma-separated list */
            char *copy = strdup(v), *save = NULL;
            if (!copy) return -1;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (l->n == CLI_LIST_MAX) break;
                l->v[l->n++] = t;    /* kept for the life of the process */
            }
            return 0;
        }
        if (l->n == CLI_LIST_MAX) {
            fprintf(stderr, "posy %s: %s given more than %d times\n", cmd->name, d->name, CLI_LIST_MAX);
            return -1;
        }
        l->v[l->n++] = v;
        return 0;
    }
    }
    return -1;
}

int cli_flags_parse(const cli_cmd *cmd, int argc, char **argv, void *opts) {
    const cli_flag *flags = cmd->flags;
    size_t n = cmd->n;
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(flags[i].env);
        if (v && *v && cli_flag_set(cmd, &flags[i], v, opts, 1)) return -1;
    }
    int cleared[64] = {0};           /* a list given on the command line replaces the variable's */
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
            cli_flags_usage(stdout, cmd);
            return 1;
        }
        const cli_flag *d = NULL;
        size_t di = 0;
        for (size_t i = 0; i < n && !d; i++) {
            size_t k = strlen(flags[i].name);
            if (!strncmp(argv[a], flags[i].name, k) && (argv[a][k] == 0 || argv[a][k] == '=')) {
                d = &flags[i];
                di = i;
            }
        }
        if (!d) {
            fprintf(stderr, "posy %s: unknown flag '%s' (see posy %s --help)\n", cmd->name, argv[a], cmd->name);
            return -1;
        }
        const char *eq = strchr(argv[a], '='), *val;
        if (eq) val = eq + 1;
        else if (d->kind == CLI_F_SWITCH) {
            /* bare means on; "--warmup 1" / "--auto-truncate 0", as --help's "0 | 1" reads, take the
             * next word too: these commands take no positional words, so a lone 0 or 1 after a
             * switch can only be its value */
            const char *nx = a + 1 < argc ? argv[a + 1] : NULL;
            val = nx && (!strcmp(nx, "0") || !strcmp(nx, "1")) ? argv[++a] : "1";
        }
        else if (a + 1 < argc) val = argv[++a];
        else {
            fprintf(stderr, "posy %s: %s needs a value\n", cmd->name, d->name);
            return -1;
        }
        if (d->kind == CLI_F_LIST && di < 64 && !cleared[di]) {
            ((cli_list *)((char *)opts + d->off))->n = 0;
            cleared[di] = 1;
        }
        if (cli_flag_set(cmd, d, val, opts, 0)) return -1;
    }
    return 0;
}

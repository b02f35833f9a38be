/* cli_flags: see cli_flags.h. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_flags.h"

void cli_flags_usage(FILE *f, const char *cmd, const char *summary, const cli_flag *flags, size_t n) {
    fprintf(f, "usage: posy %s [flags]\n\n%s\n\n", cmd, summary);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "  %-22s %s [env %s]\n", flags[i].name, flags[i].help, flags[i].env);
    fprintf(f, "  %-22s %s\n", "--help", "this text");
}

static int cli_flag_set(const char *cmd, const cli_flag *d, const char *v, void *opts, int from_env) {
    char *p = (char *)opts + d->off;
    switch (d->kind) {
    case CLI_F_STR: *(const char **)p = v; return 0;
    case CLI_F_INT: return cli_parse_int(d->name, v, d->lo, d->hi, (long *)p);
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
            fprintf(stderr, "posy %s: %s given more than %d times\n", cmd, d->name, CLI_LIST_MAX);
            return -1;
        }
        l->v[l->n++] = v;
        return 0;
    }
    }
    return -1;
}

int cli_flags_parse(const char *cmd, const char *summary, const cli_flag *flags, size_t n, int argc, char **argv,
                    void *opts) {
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(flags[i].env);
        if (v && *v && cli_flag_set(cmd, &flags[i], v, opts, 1)) return -1;
    }
    int cleared[64] = {0};           /* a list given on the command line replaces the variable's */
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--help") || !strcmp(argv[a], "-h")) {
            cli_flags_usage(stdout, cmd, summary, flags, n);
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
            fprintf(stderr, "posy %s: unknown flag '%s' (see posy %s --help)\n", cmd, argv[a], cmd);
            return -1;
        }
        const char *eq = strchr(argv[a], '='), *val;
        if (eq) val = eq + 1;
        else if (a + 1 < argc) val = argv[++a];
        else {
            fprintf(stderr, "posy %s: %s needs a value\n", cmd, d->name);
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

/* posy: one binary, several process shapes (ARCHITECTURE.md).  This file
 * only dispatches; each subcommand lives in cli_<name>.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define POSY_VERSION "0.1.0"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} cli_entry;

/* Weak defaults so the binary links while a subcommand is not built yet. */
__attribute__((weak)) int cli_cmd_serve(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "posy serve: not available in this build\n");
    return 1;
}
__attribute__((weak)) int cli_cmd_worker(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "posy worker: not available in this build\n");
    return 1;
}
__attribute__((weak)) int cli_cmd_gateway(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "posy gateway: not available in this build\n");
    return 1;
}
__attribute__((weak)) int cli_cmd_tokenize(int argc, char **argv) {
    (void)argc; (void)argv;
    fprintf(stderr, "posy tokenize: not available in this build\n");
    return 1;
}

static const cli_entry commands[] = {
    {"serve", cli_cmd_serve, "HTTP server (OpenAI /v1/embeddings, TEI /embed, /rerank) with the engine in-process"},
    {"embed", cli_cmd_embed, "embed texts from arguments, stdin or a file"},
    {"tokenize", cli_cmd_tokenize, "print token ids, tokens and offsets as JSON lines"},
    {"worker", cli_cmd_worker, "gRPC worker: scheduler + engine for one device"},
    {"gateway", cli_cmd_gateway, "HTTP gateway that spreads work over gRPC workers"},
};

static void usage(FILE *f) {
    fprintf(f, "posy %s - embedding inference server\n\nusage: posy <command> [flags]\n\ncommands:\n", POSY_VERSION);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'posy <command> --help' describes each command's flags.\n");
}

int cli_parse_int(const char *flag, const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "posy: %s expects a whole number from %ld to %ld, got '%s'\n", flag, lo, hi,
                s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("posy %s\n", POSY_VERSION);
        return 0;
    }
    /* the commands that run the CPU engine: its attention is OpenBLAS's */
    if (!strcmp(cmd, "serve") || !strcmp(cmd, "embed") || !strcmp(cmd, "worker")) cli_blas_core_check(argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "posy: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}

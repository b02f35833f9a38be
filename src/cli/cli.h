/* cli: the `posy` command line.  main.c dispatches on the first word to one
 * cli_cmd_* function per subcommand, each in its own file with its own
 * --help.  Subcommands return a process exit code: 0 ok, 1 runtime failure,
 * 2 usage error (unknown flag, bad value), as most Unix tools do.
 */
#ifndef CLI_H
#define CLI_H

int cli_cmd_embed(int argc, char **argv);
int cli_cmd_tokenize(int argc, char **argv);
int cli_cmd_serve(int argc, char **argv);
int cli_cmd_worker(int argc, char **argv);
int cli_cmd_gateway(int argc, char **argv);

/* Parse a whole decimal integer in [lo, hi] for flag `flag`; prints a usage
 * error and returns -1 on failure. */
int cli_parse_int(const char *flag, const char *s, long lo, long hi, long *out);

/* cli_blas.c: re-execute once with OPENBLAS_CORETYPE set when OpenBLAS took an AVX2 / AVX-512 CPU for an
 * old one (its constructor read the CPU before main); argv: main's.  Returns when nothing is to be done. */
void cli_blas_core_check(char **argv);

#endif

/* cli_busy_poll: the --busy-poll-us value of `posy serve` and `posy
 * worker`: "auto" (the default) or microseconds.
 *
 * Auto is 1000 us when the engine runs on a GPU and the machine has at
 * least CLI_BUSY_POLL_MIN_CORES cores, and 0 (sleep) otherwise.
 * On a GPU host a sleeping step or tokenization thread is woken late at
 * every hand-off of a request, which a ~60-200 us forward cannot hide:
 * on an H100 host (2026-12-06, runs 81-82, docs/BENCHMARKS.md) 1000 us
 * took the one-connection p50 of one-sentence requests from 228-273 to
 * 131-135 us (all-MiniLM-L6) and from 375-432 to 280-282 us (BERT-base),
 * and 64 connections gained 2-14% (MiniLM) or nothing; 200 us was as
 * good for MiniLM but too short for BERT-base's forward.  The CPU engine
 * needs every core for its own threads, so it never spins by default; nor
 * does a small machine, where two polling threads take a large share of
 * the cores the HTTP loops and tokenization need (on the 2-core
 * development VM they halved the no-op engine's 16-connection throughput).
 */
#ifndef CLI_BUSY_POLL_H
#define CLI_BUSY_POLL_H

#define CLI_BUSY_POLL_GPU_US 1000
#define CLI_BUSY_POLL_MIN_CORES 8

/* "auto" (or NULL) -> -1, or 0..1000000 microseconds.  0, or -1 after
 * printing "posy CMD: --busy-poll-us ..." to stderr. */
int cli_busy_poll_parse(const char *cmd, const char *v, long *us);

/* The microseconds in effect: `us` itself unless auto (-1). */
int cli_busy_poll_resolve(long us, int engine_on_gpu);

#endif

/* cli_worker: `posy worker`, one scheduler + engine behind gRPC
 * (ARCHITECTURE.md: "one per GPU, or per CPU host").
 *
 *   posy worker --model DIR --listen HOST:PORT [--device cuda:N|cpu|auto]
 *
 * Start-up loads the engine (fail fast, naming the flag or file), starts
 * the same scheduler `posy serve` uses, then binds the gRPC port; health
 * says SERVING from then on.  SIGTERM/SIGINT drain: health turns
 * NOT_SERVING (Kubernetes stops routing), calls in flight finish within
 * --drain-ms, then the scheduler and engine close and the process exits 0.
 * `--engine noop` swaps the model math for a fixed vector (as in `posy
 * serve`), to measure the gateway and transport alone.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_busy_poll.h"
#include "cli_flags.h"
#include "cli_worker.h"
#include "eng_config.h"
#include "posy_log.h"

typedef struct wk_opts {
    const char *model, *listen, *device, *engine, *busy_poll;
    long threads, max_batch_tokens, max_batch_seqs, max_concurrent, max_chunk_tokens, max_chunk_seqs, drain_ms, noop_delay_us, warmup, busy_poll_us /* parsed from busy_poll */;
    const char *hf_overrides;
} wk_opts;

#define WO(f) offsetof(wk_opts, f)
static const cli_flag wk_flags[] = {
    {"--model", "POSY_MODEL", "model directory (default models/all-MiniLM-L6-v2)", CLI_F_STR, 0, 0, WO(model)},
    {"--listen", "POSY_LISTEN", "gRPC address HOST:PORT (default 0.0.0.0:50051; port 0 picks one)", CLI_F_STR, 0, 0, WO(listen)},
    {"--device", "POSY_DEVICE", "auto | cpu | cuda | cuda:N (default auto)", CLI_F_STR, 0, 0, WO(device)},
    {"--engine", "POSY_ENGINE", "model | noop (noop: benchmarking only, skips the model math)", CLI_F_STR, 0, 0, WO(engine)},
    CLI_HF_OVERRIDES_FLAG(WO),
    {"--threads", "POSY_THREADS", "CPU engine threads (default 0 = all cores)", CLI_F_INT, 0, 4096, WO(threads)},
    {"--max-batch-tokens", "POSY_MAX_BATCH_TOKENS", "tokens per engine batch (default: 16384; on a GPU 65536 for models as small as all-MiniLM-L6)", CLI_F_INT, 1, 1 << 24, WO(max_batch_tokens)},
    {"--max-batch-seqs", "POSY_MAX_BATCH_SEQS", "sequences per engine batch (default 512)", CLI_F_INT, 1, 1 << 20, WO(max_batch_seqs)},
    {"--busy-poll-us", "POSY_BUSY_POLL_US", "auto | N: after each batch the step thread polls N us instead of sleeping, a CPU core for lower latency (default auto: 1000 on a GPU with 8+ cores, else 0)", CLI_F_STR, 0, 0, WO(busy_poll)},
    {"--warmup", "POSY_WARMUP", "0 | 1: on a GPU, run every token bucket (eager, then captured) before serving, so no request waits for a first run (default 0: lazily)", CLI_F_SWITCH, 0, 1, WO(warmup)},
    {"--max-concurrent", "POSY_MAX_CONCURRENT", "chunks queued or running before RESOURCE_EXHAUSTED (default 512)", CLI_F_INT, 1, 1 << 24, WO(max_concurrent)},
    {"--max-chunk-tokens", "POSY_MAX_CHUNK_TOKENS", "largest chunk one Embed accepts (default 65536)", CLI_F_INT, 1, 1 << 24, WO(max_chunk_tokens)},
    {"--max-chunk-seqs", "POSY_MAX_CHUNK_SEQS", "most sequences in one chunk (default 8192)", CLI_F_INT, 1, 1 << 22, WO(max_chunk_seqs)},
    {"--noop-delay-us", "POSY_NOOP_DELAY_US", "with --engine noop: microseconds each batch pretends to take (tests)", CLI_F_INT, 0, 60000000, WO(noop_delay_us)},
    {"--drain-ms", "POSY_DRAIN_MS", "on SIGTERM, time for calls in flight to finish (default 30000)", CLI_F_INT, 0, 3600000, WO(drain_ms)},
};
#define WK_SUMMARY "gRPC worker: posy.v1.Embedder (Embed, EmbedStream, Info) and grpc.health.v1.Health\n" \
    "(proto/posy.proto) in front of the same scheduler and engine as posy serve.\n" \
    "SIGTERM/SIGINT: health turns NOT_SERVING, calls in flight finish, exit 0."
static const cli_cmd wk_cmd = {"worker", WK_SUMMARY, wk_flags, sizeof wk_flags / sizeof wk_flags[0], 22, 0};

static int wk_device(const char *s, posy_engine_opts *eo) {
    if (!strcmp(s, "auto")) eo->device = POSY_DEVICE_AUTO;
    else if (!strcmp(s, "cpu")) eo->device = POSY_DEVICE_CPU;
    else if (!strcmp(s, "cuda")) eo->device = POSY_DEVICE_CUDA;
    else if (!strncmp(s, "cuda:", 5)) {
        long n;
        if (cli_parse_int("--device cuda:N", s + 5, 0, 1023, &n)) return -1;
        eo->device = POSY_DEVICE_CUDA;
        eo->device_index = (int)n;
    } else {
        fprintf(stderr, "posy worker: --device expects auto, cpu, cuda or cuda:N, got '%s'\n", s);
        return -1;
    }
    return 0;
}

static int wk_parse(int argc, char **argv, wk_opts *o) {
    *o = (wk_opts){"models/all-MiniLM-L6-v2", "0.0.0.0:50051", "auto", "model", NULL, 0, 0 /* the engine's default */, 512, 512, 65536, 8192, 30000, 0, 0, 0, NULL};
    int rc = cli_flags_parse(&wk_cmd, argc, argv, o);
    if (rc) return rc;
    posy_engine_opts probe = {0};
    if (wk_device(o->device, &probe)) return -1;
    if (cli_busy_poll_parse("worker", o->busy_poll, &o->busy_poll_us)) return -1;
    posy_err oerr;
    if (eng_config_set_overrides(o->hf_overrides, &oerr)) {
        fprintf(stderr, "posy worker: %s\n", oerr.msg);
        return -1;
    }
    if (strcmp(o->engine, "model") && strcmp(o->engine, "noop")) {
        fprintf(stderr, "posy worker: --engine must be 'model' or 'noop', got '%s'\n", o->engine);
        return -1;
    }
    return 0;
}

/* mi->max_batch_tokens: the budget in effect (the flag, or the engine's default for its device) */
static void wk_info(rpc_info *ri, const posy_model_info *mi, const wk_opts *o, int cuda_index) {
    static const char *pool[] = {"mean", "cls", "last"};
    memset(ri, 0, sizeof *ri);
    snprintf(ri->model, sizeof ri->model, "%s", mi->name);
    snprintf(ri->arch, sizeof ri->arch, "%s", mi->arch);
    if (mi->device == POSY_DEVICE_CUDA) snprintf(ri->device, sizeof ri->device, "cuda:%d", cuda_index);
    else snprintf(ri->device, sizeof ri->device, "cpu");
    snprintf(ri->dtype, sizeof ri->dtype, "%s", mi->dtype[0] ? mi->dtype : "fp32");
    snprintf(ri->pooling, sizeof ri->pooling, "%s", pool[mi->pooling < 3 ? mi->pooling : 0]);
    ri->dim = mi->dim;
    ri->max_seq_len = mi->max_seq_len;
    ri->vocab = mi->vocab;
    ri->type_vocab = mi->type_vocab > 1 ? mi->type_vocab : 1;
    ri->max_batch_tokens = mi->max_batch_tokens;
    ri->max_chunk_tokens = (int)o->max_chunk_tokens;
    ri->max_chunk_seqs = (int)o->max_chunk_seqs;
    if (ri->max_chunk_seqs > rpc_max_vectors(mi->dim)) ri->max_chunk_seqs = rpc_max_vectors(mi->dim);   /* wide (sparse) vectors */
    ri->normalize = mi->normalize;
    ri->pool_skip = 1;   /* cli_worker_sched forwards rpc_chunk.pool_skip to the scheduler */
    ri->tok_dim = mi->tok_dim;
    if (ri->max_seq_len > ri->max_batch_tokens) ri->max_seq_len = ri->max_batch_tokens;
}

/* Load the engine (or the no-op stand-in) and describe it. */
static int wk_engine(const wk_opts *o, posy_engine **eng, sched_engine *se, rpc_info *ri, posy_err *err) {
    posy_engine_opts eo = {0};
    wk_device(o->device, &eo);          /* checked by wk_parse */
    eo.n_threads = (int)o->threads;
    eo.max_batch_tokens = (int)o->max_batch_tokens;
    eo.max_batch_seqs = (int)o->max_batch_seqs;
    eo.warmup = (int)o->warmup;
    if (!strcmp(o->engine, "noop")) {
        eng_config cfg;
        if (eng_config_load(&cfg, o->model, err)) return err->code ? err->code : POSY_E_IO;
        cfg.info.device = POSY_DEVICE_CPU;
        cfg.info.max_batch_tokens = o->max_batch_tokens ? (int)o->max_batch_tokens
                                                        : posy_engine_default_batch_tokens(&cfg.info, POSY_DEVICE_CPU);
        wk_info(ri, &cfg.info, o, 0);
        snprintf(ri->dtype, sizeof ri->dtype, "noop");
        eng_config_free(&cfg);
        return sched_engine_noop(se, ri->dim, (int)o->noop_delay_us, err);
    }
    *eng = posy_engine_open(o->model, &eo, err);
    if (!*eng) return err->code ? err->code : POSY_E_IO;
    sched_engine_posy(se, *eng);
    wk_info(ri, posy_engine_info(*eng), o, eo.device_index);
    return 0;
}

int cli_cmd_worker(int argc, char **argv) {
    wk_opts o;
    int prc = wk_parse(argc, argv, &o);
    if (prc) return prc > 0 ? 0 : 2;
    /* Block the stop signals before any thread starts, so only sigwait sees them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    posy_err err;
    posy_err_clear(&err);
    posy_engine *eng = NULL;
    sched_engine se = {0};
    rpc_info ri;
    if (wk_engine(&o, &eng, &se, &ri, &err)) {
        fprintf(stderr, "posy worker: %s\n", err.msg[0] ? err.msg : "cannot load the model");
        return 1;
    }
    if (rpc_fingerprint_with(o.model, eng_config_overrides(), ri.fingerprint, sizeof ri.fingerprint, &err)) {
        fprintf(stderr, "posy worker: %s\n", err.msg);
        return 1;
    }
    int busy_poll_us = cli_busy_poll_resolve(o.busy_poll_us, eng && posy_engine_info(eng)->device == POSY_DEVICE_CUDA);
    sched_opts so = {.spin_us = busy_poll_us, .max_batch_tokens = ri.max_batch_tokens, .max_batch_seqs = (int)o.max_batch_seqs,
                     .max_concurrent = (int)o.max_concurrent};
    sched *s = sched_open(&se, &so, &err);
    if (!s) {
        fprintf(stderr, "posy worker: %s\n", err.msg);
        return 1;
    }
    cli_worker_backend wb;
    cli_worker_backend_init(&wb, s);
    rpc_server *srv = rpc_server_start(o.listen, &ri, &wb.be, &err);
    if (!srv) {
        fprintf(stderr, "posy worker: %s\n", err.msg);
        sched_close(s);
        return 1;
    }
    POSY_INFO("posy worker: model %s (%s, dim %d, max_seq_len %d) on %s, gRPC on port %d, max_batch_tokens %d, "
              "max_concurrent %ld, fingerprint %s",
              ri.model, ri.dtype, ri.dim, ri.max_seq_len, ri.device, rpc_server_port(srv), ri.max_batch_tokens,
              o.max_concurrent, ri.fingerprint);
    if (busy_poll_us) POSY_INFO("posy worker: the step thread busy-polls %d us after each batch (--busy-poll-us)", busy_poll_us);
    int sig = 0;
    sigwait(&stop, &sig);
    POSY_INFO("posy worker: %s, draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    rpc_server_set_serving(srv, 0);
    rpc_server_stop(srv, (int)o.drain_ms);
    sched_close(s);
    if (eng) posy_engine_close(eng);
    else sched_engine_noop_free(&se);
    POSY_INFO("posy worker: stopped");
    return 0;
}

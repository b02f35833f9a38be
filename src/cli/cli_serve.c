/* cli_serve: `posy serve`, the one-process server: HTTP front, scheduler and
 * engine (ARCHITECTURE.md, "Process shapes").
 *
 * Start-up order: read the model's configuration (fail fast on a bad
 * directory), bind the port and start serving (503 on model routes), load
 * the tokenizer and the engine, start the scheduler, mark ready and log one
 * line.  SIGTERM/SIGINT drain: stop accepting, finish every accepted
 * request, exit 0.  Flags are a cli_flags table: each has an environment
 * variable (POSY_<FLAG>) so containers can be configured without a command
 * line; a flag wins over its variable.
 */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_attention.h"
#include "cli_busy_poll.h"
#include "cli_flags.h"
#include "cli_http_flags.h"
#include "eng_config.h"
#include "gw_server.h"
#include "posy_log.h"
#include "sched_core.h"
#include "tok.h"

typedef struct serve_flags {
    const char *model, *host, *device, *engine, *attention, *api_key, *served_name, *cors, *busy_poll, *hf_overrides;
    long port, threads, http_threads, workers, max_batch_tokens, max_batch_seqs, max_concurrent, max_client_batch,
        max_body_bytes, request_timeout, drain_timeout, auto_truncate, noop_delay_us, warmup, busy_poll_us /* parsed from busy_poll */;
} serve_flags;

#define FS(f) offsetof(serve_flags, f)
static const cli_flag flag_defs[] = {
    {"--model", "POSY_MODEL", "model directory (default models/all-MiniLM-L6-v2)", CLI_F_STR, 0, 0, FS(model)},
    CLI_HTTP_FRONT_FLAGS(FS),
    {"--device", "POSY_DEVICE", "auto | cpu | cuda | cuda:N (default auto: CUDA when a GPU is present)", CLI_F_STR, 0, 0, FS(device)},
    {"--attention", "POSY_ATTENTION", "model | causal | bidirectional: decoder attention (default model: as config.json says)", CLI_F_STR, 0, 0, FS(attention)},
    CLI_HF_OVERRIDES_FLAG(FS),
    {"--engine", "POSY_ENGINE", "model | noop (noop: benchmarking only, skips the model math, returns a fixed vector)", CLI_F_STR, 0, 0, FS(engine)},
    {"--threads", "POSY_THREADS", "CPU engine threads (default 0 = all cores)", CLI_F_INT, 0, 4096, FS(threads)},
    {"--max-batch-tokens", "POSY_MAX_BATCH_TOKENS", "tokens per engine batch (default: 16384; on a GPU 65536 for models as small as all-MiniLM-L6)", CLI_F_INT, 1, 1 << 24, FS(max_batch_tokens)},
    {"--max-batch-seqs", "POSY_MAX_BATCH_SEQS", "sequences per engine batch (default 512)", CLI_F_INT, 1, 1 << 20, FS(max_batch_seqs)},
    {"--warmup", "POSY_WARMUP", "0 | 1: on a GPU, run every token bucket (eager, then captured) before serving, so no request waits for a first run (default 0: lazily)", CLI_F_SWITCH, 0, 1, FS(warmup)},
    {"--busy-poll-us", "POSY_BUSY_POLL_US", "auto | N: after each request the step thread and one tokenization worker poll N us instead of sleeping, a CPU core for lower latency (default auto: 1000 on a GPU with 8+ cores, else 0)", CLI_F_STR, 0, 0, FS(busy_poll)},
    {"--noop-delay-us", "POSY_NOOP_DELAY_US", "with --engine noop: microseconds each batch pretends to take (tests)", CLI_F_INT, 0, 60000000, FS(noop_delay_us)},
};
#define SERVE_SUMMARY "HTTP server: OpenAI POST /v1/embeddings, TEI POST /embed and /, /embed_all, /similarity, /tokenize,\n" \
    "/decode, /rerank and /v1/rerank (a reranker model), /predict and /classify (a classifier), /embed_sparse (a\n" \
    "SPLADE model), vLLM /score, GET /health /info /v1/models /metrics.  SIGTERM/SIGINT drain and exit 0."
/* A bad POSY_* value's error names the variable, not the flag. */
static const cli_cmd serve_cmd = {"serve", SERVE_SUMMARY, flag_defs, sizeof flag_defs / sizeof flag_defs[0], 24, 1};

/* Defaults, the environment, then the command line.  Returns 0, 1 (--help, printed) or -1. */
static int parse_flags(int argc, char **argv, serve_flags *fl) {
    *fl = (serve_flags){.model = "models/all-MiniLM-L6-v2", .host = "0.0.0.0", .device = "auto", .engine = "model", .attention = "model",
                        .port = 8080, .http_threads = 2, .workers = sysconf(_SC_NPROCESSORS_ONLN),
                        .max_batch_tokens = 0 /* the engine's default for its device */, .max_batch_seqs = 512, .max_concurrent = 512,
                        .max_client_batch = 2048, .max_body_bytes = 4194304, .request_timeout = 10,
                        .drain_timeout = 30};
    int rc = cli_flags_parse(&serve_cmd, argc, argv, fl);
    if (rc) return rc;
    if (fl->served_name && !fl->served_name[0]) {
        fprintf(stderr, "posy serve: --served-model-name is empty\n");
        return -1;
    }
    if (cli_busy_poll_parse("serve", fl->busy_poll, &fl->busy_poll_us)) return -1;
    if (strcmp(fl->engine, "model") && strcmp(fl->engine, "noop")) {
        fprintf(stderr, "posy serve: --engine must be 'model' or 'noop', got '%s'\n", fl->engine);
        return -1;
    }
    return 0;
}

static int parse_device(const char *s, posy_engine_opts *o) {
    if (!strcmp(s, "auto")) o->device = POSY_DEVICE_AUTO;
    else if (!strcmp(s, "cpu")) o->device = POSY_DEVICE_CPU;
    else if (!strcmp(s, "cuda")) o->device = POSY_DEVICE_CUDA;
    else if (!strncmp(s, "cuda:", 5)) {
        long n;
        if (cli_parse_int("--device cuda:N", s + 5, 0, 1024, &n)) return -1;
        o->device = POSY_DEVICE_CUDA;
        o->device_index = (int)n;
    } else {
        fprintf(stderr, "posy serve: --device must be auto, cpu, cuda or cuda:N, got '%s'\n", s);
        return -1;
    }
    return 0;
}

static void on_batch(void *user, int n_seqs, int n_tokens, uint64_t infer_ns) {
    gw_metrics *m = user;
    gw_hist_add(&m->hist[GW_H_BATCH_SEQS], (uint64_t)n_seqs);
    gw_hist_add(&m->hist[GW_H_BATCH_TOKENS], (uint64_t)n_tokens);
}

typedef struct serve_state {
    eng_config cfg;
    tok_tokenizer *tok;
    posy_engine *eng;
    sched_engine se;
    sched *sch;
    int noop;
    char device[32];
    int max_batch_tokens; /* in effect: the flag, or the engine's default for its device */
    int busy_poll_us;     /* in effect: the flag, or auto for the engine's device */
    eng_router_query sq;  /* an inference-free SPLADE model's query route (cfg.router) */
} serve_state;

/* Load the tokenizer and the engine, start the scheduler.  0 or -1 (logged). */
static int load_model(serve_state *st, const serve_flags *fl, gw_server *srv, posy_err *err) {
    char path[2048];
    if (eng_model_tokenizer_file(fl->model, path, sizeof path, NULL))
        return posy_err_set(err, POSY_E_INVALID, "model path too long: %s", fl->model), -1;
    st->tok = tok_load_file(path, err);
    if (!st->tok) return -1;
    if (st->cfg.router) {
        if (eng_router_query_load(fl->model, &st->cfg, &st->sq, err)) return -1;
        POSY_INFO("posy serve: an inference-free SPLADE model: /embed_sparse with \"task\": \"query\" looks up %d token "
                  "weights (%s, no transformer), \"document\" runs the engine; no task: %s", st->sq.n, st->cfg.rt.qdir,
                  st->cfg.rt.def[0] ? st->cfg.rt.def : "refused (no default_route)");
    }
    if (st->noop) {
        if (sched_engine_noop(&st->se, st->cfg.info.dim, (int)fl->noop_delay_us, err)) return -1;
        snprintf(st->device, sizeof st->device, "noop");
        st->max_batch_tokens = fl->max_batch_tokens ? (int)fl->max_batch_tokens
                                                    : posy_engine_default_batch_tokens(&st->cfg.info, POSY_DEVICE_CPU);
    } else {
        posy_engine_opts eo = {.n_threads = (int)fl->threads, .max_batch_tokens = (int)fl->max_batch_tokens,
                               .max_batch_seqs = (int)fl->max_batch_seqs, .warmup = (int)fl->warmup};
        parse_device(fl->device, &eo);
        cli_parse_attention("posy serve", fl->attention, &eo.attention);
        st->eng = posy_engine_open(fl->model, &eo, err);
        if (!st->eng) return -1;
        const posy_model_info *mi = posy_engine_info(st->eng);
        if (mi->device == POSY_DEVICE_CUDA) snprintf(st->device, sizeof st->device, "cuda:%d", eo.device_index);
        else snprintf(st->device, sizeof st->device, "cpu");
        st->max_batch_tokens = mi->max_batch_tokens;
        sched_engine_posy(&st->se, st->eng);
    }
    st->busy_poll_us = cli_busy_poll_resolve(fl->busy_poll_us, !st->noop && posy_engine_info(st->eng)->device == POSY_DEVICE_CUDA);
    sched_opts so = {.spin_us = st->busy_poll_us, .max_batch_tokens = st->max_batch_tokens, .max_batch_seqs = (int)fl->max_batch_seqs,
                     .max_concurrent = (int)fl->max_concurrent,
                     .hook = {.on_batch = on_batch, .user = gw_server_metrics(srv)}};
    st->sch = sched_open(&st->se, &so, err);
    return st->sch ? 0 : -1;
}

static void unload_model(serve_state *st) {
    sched_close(st->sch);
    if (st->noop) sched_engine_noop_free(&st->se);
    posy_engine_close(st->eng);
    tok_free(st->tok);
    eng_router_query_free(&st->sq);
    eng_config_free(&st->cfg);
}

int cli_cmd_serve(int argc, char **argv) {
    serve_flags fl;
    int rc = parse_flags(argc, argv, &fl);
    if (rc) return rc > 0 ? 0 : 2;
    posy_engine_opts dev_check = {0};
    if (parse_device(fl.device, &dev_check) || cli_parse_attention("posy serve", fl.attention, &dev_check.attention))
        return 2;
    static serve_state st;
    st.noop = !strcmp(fl.engine, "noop");
    posy_err err;
    posy_err_clear(&err);
    if (eng_config_set_overrides(fl.hf_overrides, &err)) {
        POSY_ERROR("posy serve: %s", err.msg);
        return 2;
    }
    if (eng_config_load(&st.cfg, fl.model, &err)) {
        POSY_ERROR("posy serve: cannot read the model in '%s': %s (fetch it with scripts/fetch-model.sh or pass --model DIR)",
                   fl.model, err.msg);
        return 1;
    }
    /* Signals: blocked in every thread (they inherit the mask) and taken by sigwait below. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    gw_opts go = {.host = fl.host, .port = (int)fl.port, .n_loops = (int)fl.http_threads, .n_workers = (int)fl.workers,
                  .max_body_bytes = (size_t)fl.max_body_bytes, .max_client_batch = (int)fl.max_client_batch,
                  .max_concurrent = (int)fl.max_concurrent, .auto_truncate = (int)fl.auto_truncate,
                  .max_batch_tokens = (int)fl.max_batch_tokens, .max_batch_seqs = (int)fl.max_batch_seqs,
                  .request_timeout_ms = (int)fl.request_timeout * 1000, .api_key = fl.api_key, .cors = fl.cors};
    gw_server *srv = gw_server_start(&go, &err);
    if (!srv) {
        POSY_ERROR("posy serve: %s", err.msg);
        return 1;
    }
    if (load_model(&st, &fl, srv, &err)) {
        POSY_ERROR("posy serve: loading the model in '%s': %s", fl.model, err.msg);
        return 1;
    }
    int max_in = st.cfg.info.max_seq_len > 0 ? st.cfg.info.max_seq_len : st.cfg.info.max_positions;
    if (max_in > st.max_batch_tokens) {
        POSY_WARN("posy serve: inputs are limited to --max-batch-tokens %d tokens (the model takes %d)",
                  st.max_batch_tokens, max_in);
        max_in = st.max_batch_tokens;
    }
    gw_backend be;
    gw_backend_local(&be, st.sch);
    gw_model gm = {.tok = st.tok, .cfg = &st.cfg, .name = fl.served_name ? fl.served_name : st.cfg.info.name, .dim = st.cfg.info.dim,
                   .tok_dim = st.eng ? posy_engine_info(st.eng)->tok_dim : 0, .sq = st.cfg.router ? &st.sq : NULL,
                   .max_input_tokens = max_in, .max_batch_tokens = st.max_batch_tokens, .device = st.device, .dtype = st.eng ? posy_engine_info(st.eng)->dtype : "fp32"};
    gw_server_set_busy_poll(srv, st.busy_poll_us);
    gw_server_set_ready(srv, &gm, &be);
    POSY_INFO("posy serve: model %s (%s, %d dims, max %d tokens) on %s, listening on %s:%d; max_batch_tokens %d, "
              "max_batch_seqs %ld, max_concurrent %ld, max_client_batch %ld, max_body_bytes %ld, %ld http threads, "
              "%ld tokenization workers",
              gm.name, st.cfg.model_type, gm.dim, max_in, st.device, fl.host, gw_server_port(srv), st.max_batch_tokens,
              fl.max_batch_seqs, fl.max_concurrent, fl.max_client_batch, fl.max_body_bytes, fl.http_threads, fl.workers);
    if (st.busy_poll_us) POSY_INFO("posy serve: the step thread and one tokenization worker busy-poll %d us after each request (--busy-poll-us)", st.busy_poll_us);
    if (fl.api_key) POSY_INFO("posy serve: an API key is required on every route but /health and /metrics");
    int sig = 0;
    sigwait(&sigs, &sig);
    POSY_INFO("posy serve: %s received, draining (finishing accepted requests, up to %ld s)",
              sig == SIGTERM ? "SIGTERM" : "SIGINT", fl.drain_timeout);
    int left = gw_server_drain(srv, (double)fl.drain_timeout);
    gw_server_stop(srv);
    unload_model(&st);
    gw_server_free(srv);   /* after the scheduler: its last callbacks may still reach the server */
    if (left) {
        POSY_WARN("posy serve: %d requests were still in flight after %ld s", left, fl.drain_timeout);
        return 1;
    }
    POSY_INFO("posy serve: stopped cleanly");
    return 0;
}

/* cli_gateway: `posy gateway`, the HTTP front of `posy serve` in front of
 * remote workers (ARCHITECTURE.md, "Process shapes").
 *
 *   posy gateway --model DIR --backend HOST:PORT ... | --backend-dns NAME:PORT
 *
 * It reads only the model's configuration and tokenizer from DIR (no
 * weights): the same gw_server front as `posy serve` parses, validates and
 * tokenizes, and the gw_backend it is given is an rpc_pool instead of the
 * in-process scheduler (cli_gateway_backend.c).  Start-up checks every
 * reachable worker's Info against the gateway's model fingerprint and
 * refuses to start on a mismatch; workers that appear later are checked
 * the same way before they get work.  SIGTERM/SIGINT drain like serve.
 */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_flags.h"
#include "cli_gateway.h"
#include "cli_http_flags.h"
#include "eng_config.h"
#include "gw_server.h"
#include "posy_log.h"
#include "tok.h"

typedef struct gwc_opts {
    const char *model, *host, *dns, *api_key, *served_name, *cors, *hf_overrides;
    cli_list backends;
    long port, chunk_tokens, chunk_seqs, chunk_timeout_ms, health_ms, dns_ms, http_threads, workers, max_concurrent,
        max_client_batch, max_body_bytes, request_timeout, drain_timeout, auto_truncate;
} gwc_opts;

#define GO(f) offsetof(gwc_opts, f)
static const cli_flag gwc_flags[] = {
    {"--model", "POSY_MODEL", "model directory: config, tokenizer, sentence-transformers files (default models/all-MiniLM-L6-v2)", CLI_F_STR, 0, 0, GO(model)},
    CLI_HTTP_FRONT_FLAGS(GO),
    CLI_HF_OVERRIDES_FLAG(GO),
    {"--backend", "POSY_BACKEND", "worker HOST:PORT; repeat for more (env: comma-separated)", CLI_F_LIST, 0, 0, GO(backends)},
    {"--backend-dns", "POSY_BACKEND_DNS", "NAME:PORT resolved to every worker, re-resolved every --dns-ms", CLI_F_STR, 0, 0, GO(dns)},
    {"--chunk-tokens", "POSY_CHUNK_TOKENS", "most tokens per chunk sent to one worker (default 2048)", CLI_F_INT, 1, 1 << 24, GO(chunk_tokens)},
    {"--chunk-seqs", "POSY_CHUNK_SEQS", "most inputs per chunk (default 512)", CLI_F_INT, 1, 1 << 22, GO(chunk_seqs)},
    {"--chunk-timeout-ms", "POSY_CHUNK_TIMEOUT_MS", "a chunk not answered by then is retried on another worker (default 30000)", CLI_F_INT, 1, 3600000, GO(chunk_timeout_ms)},
    {"--health-ms", "POSY_HEALTH_MS", "worker health-check period (default 500)", CLI_F_INT, 10, 3600000, GO(health_ms)},
    {"--dns-ms", "POSY_DNS_MS", "--backend-dns re-resolution period (default 5000)", CLI_F_INT, 100, 3600000, GO(dns_ms)},
};
#define GWC_N (sizeof gwc_flags / sizeof gwc_flags[0])
#define GWC_SUMMARY "HTTP gateway (the posy serve front: OpenAI /v1/embeddings, TEI /embed) that tokenizes,\n" \
    "splits requests into chunks and spreads them over gRPC workers (posy worker).\n" \
    "SIGTERM/SIGINT drain and exit 0."
static const cli_cmd gwc_cmd = {"gateway", GWC_SUMMARY, gwc_flags, GWC_N, 22, 0};

static int gwc_parse(int argc, char **argv, gwc_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "models/all-MiniLM-L6-v2";
    o->host = "0.0.0.0";
    o->port = 8080;
    o->chunk_tokens = 2048;
    o->chunk_seqs = 512;
    o->chunk_timeout_ms = 30000;
    o->health_ms = 500;
    o->dns_ms = 5000;
    o->http_threads = 2;
    o->workers = sysconf(_SC_NPROCESSORS_ONLN);
    o->max_concurrent = 512;
    o->max_client_batch = 2048;
    o->max_body_bytes = 4194304;
    o->request_timeout = 10;
    o->drain_timeout = 30;
    int rc = cli_flags_parse(&gwc_cmd, argc, argv, o);
    if (rc) return rc;
    if (o->served_name && !o->served_name[0]) {
        fprintf(stderr, "posy gateway: --served-model-name is empty\n");
        return -1;
    }
    if (o->backends.n == 0 && !(o->dns && *o->dns)) {
        fprintf(stderr, "posy gateway: no workers: give --backend HOST:PORT (repeatable) or --backend-dns NAME:PORT\n");
        return -1;
    }
    if (o->dns && *o->dns && !strrchr(o->dns, ':')) {
        fprintf(stderr, "posy gateway: --backend-dns expects NAME:PORT, got '%s'\n", o->dns);
        return -1;
    }
    return 0;
}

typedef struct gwc_state {
    eng_config cfg;
    tok_tokenizer *tok;
    rpc_pool *pool;
    cli_gateway_backend be;
    char fingerprint[64];
    eng_router_query sq;   /* an inference-free SPLADE model's query route: answered here, not by workers */
} gwc_state;

/* Model files (no weights), then the worker pool.  0, or -1 with err set. */
static int gwc_load(gwc_state *st, const gwc_opts *o, posy_err *err) {
    if (eng_config_set_overrides(o->hf_overrides, err) || eng_config_load(&st->cfg, o->model, err)) return -1;
    char path[2048];
    if (eng_model_tokenizer_file(o->model, path, sizeof path, NULL))
        return posy_err_set(err, POSY_E_INVALID, "model path too long: %s", o->model), -1;
    if (!(st->tok = tok_load_file(path, err))) return -1;
    if (st->cfg.router) {   /* the query route is a lookup: answered here, never sent to a worker */
        if (eng_router_query_load(o->model, &st->cfg, &st->sq, err)) return -1;
        POSY_INFO("posy gateway: an inference-free SPLADE model: \"task\": \"query\" is answered here from %d token "
                  "weights (%s), documents by the workers", st->sq.n, st->cfg.rt.qdir);
    }
    if (rpc_fingerprint_with(o->model, eng_config_overrides(), st->fingerprint, sizeof st->fingerprint, err)) return -1;
    rpc_pool_opts po = {.backends = o->backends.v, .n_backends = o->backends.n,
                        .dns = o->dns && *o->dns ? o->dns : NULL, .fingerprint = st->fingerprint,
                        .dim = st->cfg.info.dim, .chunk_tokens = (int)o->chunk_tokens,
                        .chunk_seqs = (int)o->chunk_seqs, .timeout_ms = (int)o->chunk_timeout_ms,
                        .health_ms = (int)o->health_ms, .dns_ms = (int)o->dns_ms,
                        .need_pool_skip = !st->cfg.pool_include_prompt, .tok_dim = eng_config_tok_dim(&st->cfg)};
    if (!(st->pool = rpc_pool_open(&po, err))) return -1;
    cli_gateway_backend_init(&st->be, st->pool);
    return 0;
}

int cli_cmd_gateway(int argc, char **argv) {
    gwc_opts o;
    int rc = gwc_parse(argc, argv, &o);
    if (rc) return rc > 0 ? 0 : 2;
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    static gwc_state st;
    posy_err err;
    posy_err_clear(&err);
    if (gwc_load(&st, &o, &err)) {
        POSY_ERROR("posy gateway: %s", err.msg);
        return 1;
    }
    int max_in = st.cfg.info.max_seq_len > 0 ? st.cfg.info.max_seq_len : st.cfg.info.max_positions;
    gw_opts go = {.host = o.host, .port = (int)o.port, .n_loops = (int)o.http_threads, .n_workers = (int)o.workers,
                  .max_body_bytes = (size_t)o.max_body_bytes, .max_client_batch = (int)o.max_client_batch,
                  .max_concurrent = (int)o.max_concurrent, .auto_truncate = (int)o.auto_truncate,
                  .max_batch_tokens = (int)o.chunk_tokens, .max_batch_seqs = (int)o.chunk_seqs,
                  .request_timeout_ms = (int)o.request_timeout * 1000, .api_key = o.api_key, .cors = o.cors};
    gw_server *srv = gw_server_start(&go, &err);
    if (!srv) {
        POSY_ERROR("posy gateway: %s", err.msg);
        rpc_pool_close(st.pool);
        return 1;
    }
    gw_model gm = {.tok = st.tok, .cfg = &st.cfg, .name = o.served_name ? o.served_name : st.cfg.info.name, .dim = st.cfg.info.dim,
                   .tok_dim = eng_config_tok_dim(&st.cfg), .sq = st.cfg.router ? &st.sq : NULL, .max_input_tokens = max_in, .device = "workers", .dtype = "remote"};
    gw_server_set_ready(srv, &gm, &st.be.be);
    POSY_INFO("posy gateway: model %s (%d dims, max %d tokens, fingerprint %s), listening on %s:%d; %d worker "
              "address(es)%s%s, %d healthy; chunks of <= %ld tokens / %ld inputs",
              gm.name, gm.dim, max_in, st.fingerprint, o.host, gw_server_port(srv), o.backends.n,
              o.dns ? " + DNS " : "", o.dns ? o.dns : "", rpc_pool_healthy(st.pool), o.chunk_tokens, o.chunk_seqs);
    if (o.api_key) POSY_INFO("posy gateway: an API key is required on every route but /health and /metrics");
    int sig = 0;
    sigwait(&sigs, &sig);
    POSY_INFO("posy gateway: %s received, draining (up to %ld s)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
              o.drain_timeout);
    int left = gw_server_drain(srv, (double)o.drain_timeout);
    gw_server_stop(srv);
    rpc_pool_close(st.pool);
    gw_server_free(srv);   /* after the pool: its last callbacks may still reach the server */
    tok_free(st.tok);
    eng_router_query_free(&st.sq);
    eng_config_free(&st.cfg);
    if (left) {
        POSY_WARN("posy gateway: %d requests were still in flight after %ld s", left, o.drain_timeout);
        return 1;
    }
    POSY_INFO("posy gateway: stopped cleanly");
    return 0;
}

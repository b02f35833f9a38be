/* gw_metrics: see gw_metrics.h. */
#include "gw_metrics.h"

#include <string.h>

static const int status_codes[GW_STATUS_SLOTS] = {200, 204, 400, 401, 404, 405, 413, 422, 429, 499, 500, 501, 503, 0};
static const char *route_names[GW_R_COUNT] = {"/v1/embeddings", "/embed", "/tokenize", "/decode", "/similarity",
                                              "/rerank", "/v1/rerank", "/predict", "/classify", "/embed_sparse", "/score", "/embed_all", "/health", "/info", "/v1/models", "/metrics", "other"};
static const char *fail_names[GW_F_COUNT] = {"malformed_json", "validation", "body_too_large", "overloaded",
                                             "not_ready", "shutting_down", "client_disconnected", "backend",
                                             "not_found", "unsupported", "unauthorized"};

const char *gw_route_name(gw_route r) { return route_names[r]; }

static void hist_init(gw_hist *h, const char *name, const char *help, double scale, const double *b, int nb) {
    h->name = name;
    h->help = help;
    h->scale = scale;
    h->nb = nb;
    memcpy(h->bounds, b, (size_t)nb * sizeof(double));
}

void gw_metrics_init(gw_metrics *m) {
    memset(m, 0, sizeof *m);
    static const double secs[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                  0.1, 0.25, 0.5, 1, 2.5, 5, 10};
    static const double seqs[] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048};
    static const double toks[] = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536};
    hist_init(&m->hist[GW_H_TOKENIZE], "posy_tokenization_seconds", "Time to parse and tokenize a request", 1e9, secs, 16);
    hist_init(&m->hist[GW_H_QUEUE], "posy_queue_seconds", "Time from submission to the request's first batch", 1e9, secs, 16);
    hist_init(&m->hist[GW_H_INFER], "posy_inference_seconds", "Time from a request's first batch to its last result", 1e9, secs, 16);
    hist_init(&m->hist[GW_H_REQUEST], "posy_request_seconds", "Time from request arrival to response", 1e9, secs, 16);
    hist_init(&m->hist[GW_H_BATCH_SEQS], "posy_batch_size", "Sequences per engine batch", 1, seqs, 12);
    hist_init(&m->hist[GW_H_BATCH_TOKENS], "posy_batch_tokens", "Tokens per engine batch", 1, toks, 13);
}

void gw_metrics_request(gw_metrics *m, gw_route r, int status) {
    int i = 0;
    while (status_codes[i] && status_codes[i] != status) i++;
    atomic_fetch_add_explicit(&m->requests[r][i], 1, memory_order_relaxed);
}

void gw_metrics_fail(gw_metrics *m, gw_fail f) {
    atomic_fetch_add_explicit(&m->failures[f], 1, memory_order_relaxed);
}

void gw_hist_add(gw_hist *h, uint64_t v) {
    double x = (double)v / h->scale;
    int i = 0;
    while (i < h->nb && x > h->bounds[i]) i++;
    atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum, v, memory_order_relaxed);
}

static void render_hist(gw_hist *h, gw_buf *b) {
    gw_buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
    unsigned long long cum = 0;
    for (int i = 0; i <= h->nb; i++) {
        cum += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
        if (i < h->nb) gw_buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", h->name, h->bounds[i], cum);
        else gw_buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n", h->name, cum);
    }
    gw_buf_printf(b, "%s_sum %.9g\n%s_count %llu\n", h->name,
                  (double)atomic_load_explicit(&h->sum, memory_order_relaxed) / h->scale, h->name, cum);
}

void gw_metrics_render(gw_metrics *m, gw_buf *b) {
    gw_buf_puts(b, "# HELP posy_requests_total HTTP requests by route and status\n# TYPE posy_requests_total counter\n");
    for (int r = 0; r < GW_R_COUNT; r++)
        for (int i = 0; i < GW_STATUS_SLOTS; i++) {
            unsigned long long n = atomic_load_explicit(&m->requests[r][i], memory_order_relaxed);
            if (n) gw_buf_printf(b, "posy_requests_total{route=\"%s\",status=\"%d\"} %llu\n", route_names[r],
                                 status_codes[i], n);
        }
    gw_buf_puts(b, "# HELP posy_request_failures_total Failed requests by reason\n# TYPE posy_request_failures_total counter\n");
    for (int f = 0; f < GW_F_COUNT; f++)
        gw_buf_printf(b, "posy_request_failures_total{reason=\"%s\"} %llu\n", fail_names[f],
                      atomic_load_explicit(&m->failures[f], memory_order_relaxed));
    gw_buf_printf(b, "# HELP posy_tokens_total Tokens sent to the model\n# TYPE posy_tokens_total counter\nposy_tokens_total %llu\n",
                  atomic_load_explicit(&m->tokens, memory_order_relaxed));
    gw_buf_printf(b, "# HELP posy_inputs_total Inputs (sequences) embedded\n# TYPE posy_inputs_total counter\nposy_inputs_total %llu\n",
                  atomic_load_explicit(&m->inputs, memory_order_relaxed));
    for (int h = 0; h < GW_H_COUNT; h++) render_hist(&m->hist[h], b);
}

static void counter_u(gw_buf *b, const char *name, const char *help, uint64_t v) {
    gw_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name, (unsigned long long)v);
}

static void counter_f(gw_buf *b, const char *name, const char *help, double v) {
    gw_buf_printf(b, "# HELP %s %s\n# TYPE %s counter\n%s %.9g\n", name, help, name, name, v);
}

void gw_metrics_render_engine(const posy_engine_stats *st, gw_buf *b) {
    counter_u(b, "posy_engine_graph_captures_total", "CUDA graphs captured, one per token bucket at most (0 on the CPU)",
              st->graph_captures);
    counter_f(b, "posy_engine_graph_capture_seconds_total", "Host time spent capturing and instantiating CUDA graphs",
              st->graph_capture_seconds);
    counter_f(b, "posy_engine_first_run_seconds_total",
              "Host time of token buckets' first (eager) GPU runs: kernel loading and GEMM choice, which stall "
              "the batches queued behind them (--warmup pays it at start-up)",
              st->first_run_seconds);
    counter_u(b, "posy_engine_graph_replays_total", "Forward passes launched as a captured CUDA graph",
              st->graph_replays);
    counter_u(b, "posy_engine_eager_runs_total", "GPU forward passes run without a graph (a bucket's first batch)",
              st->eager_runs);
    gw_buf_printf(b, "# HELP posy_engine_buckets_seen Token buckets that have run at least once\n"
                     "# TYPE posy_engine_buckets_seen gauge\nposy_engine_buckets_seen %llu\n",
                  (unsigned long long)st->buckets_seen);
    counter_u(b, "posy_engine_batches_total", "Batches finished by the GPU engine", st->batches);
    counter_u(b, "posy_engine_padded_tokens_total", "Tokens run on the GPU after rounding batches up to their bucket",
              st->padded_tokens);
    counter_f(b, "posy_engine_device_seconds_total", "GPU time of the forward passes (CUDA events)",
              st->device_seconds);
}

/* gw_metrics: counters and histograms for GET /metrics (Prometheus text
 * format 0.0.4).  Everything is a relaxed atomic, updated from loop, worker
 * and step threads without locks; a scrape reads them while they move
 * (each number is exact, the set is not a snapshot, as in every Prometheus
 * client).  Routes, statuses and failure reasons are small fixed enums so
 * the tables are plain arrays.  The engine's counters (graph captures,
 * replays ...) are not kept here: the scheduler copies them under its lock
 * after each step and a scrape renders that copy (gw_metrics_render_engine).
 */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stdatomic.h>
#include <stdint.h>
#include "gw_buf.h"
#include "posy_engine.h"

typedef enum {
    GW_R_EMBEDDINGS, GW_R_EMBED, GW_R_TOKENIZE, GW_R_DECODE, GW_R_SIMILARITY, GW_R_RERANK, GW_R_V1_RERANK, GW_R_PREDICT, GW_R_CLASSIFY, GW_R_EMBED_SPARSE, GW_R_SCORE,
    GW_R_EMBED_ALL,
    GW_R_HEALTH, GW_R_INFO,
    GW_R_MODELS, GW_R_METRICS, GW_R_OTHER, GW_R_COUNT
} gw_route;

typedef enum {
    GW_F_MALFORMED, GW_F_VALIDATION, GW_F_TOO_LARGE, GW_F_OVERLOADED, GW_F_NOT_READY, GW_F_SHUTTING_DOWN,
    GW_F_CLIENT_GONE, GW_F_BACKEND, GW_F_NOT_FOUND, GW_F_UNSUPPORTED, GW_F_UNAUTHORIZED, GW_F_COUNT
} gw_fail;

/* HTTP statuses counted per route: the known ones and a last slot for any other */
#define GW_STATUS_SLOTS 14

#define GW_HIST_MAX 16
typedef struct gw_hist {
    const char *name, *help;
    int nb;
    double bounds[GW_HIST_MAX];      /* upper bounds, in the metric's unit */
    double scale;                    /* recorded integer units per metric unit (1e9 for ns -> s) */
    atomic_ullong counts[GW_HIST_MAX + 1];
    atomic_ullong sum;               /* in recorded units */
} gw_hist;

enum { GW_H_TOKENIZE, GW_H_QUEUE, GW_H_INFER, GW_H_REQUEST, GW_H_BATCH_SEQS, GW_H_BATCH_TOKENS, GW_H_COUNT };

typedef struct gw_metrics {
    atomic_ullong requests[GW_R_COUNT][GW_STATUS_SLOTS];
    atomic_ullong failures[GW_F_COUNT];
    atomic_ullong tokens;            /* tokens sent to the model */
    atomic_ullong inputs;            /* sequences embedded */
    gw_hist hist[GW_H_COUNT];
} gw_metrics;

void gw_metrics_init(gw_metrics *m);
const char *gw_route_name(gw_route r);
void gw_metrics_request(gw_metrics *m, gw_route r, int status);
void gw_metrics_fail(gw_metrics *m, gw_fail f);
void gw_hist_add(gw_hist *h, uint64_t v);
/* Append the text exposition; `extra` lines (gauges owned by the caller) go last. */
void gw_metrics_render(gw_metrics *m, gw_buf *b);
/* Append the engine's counters (posy_engine_*: graph captures, replays ...). */
void gw_metrics_render_engine(const posy_engine_stats *st, gw_buf *b);

#endif

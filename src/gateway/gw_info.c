/* gw_info: the GET routes, small enough to answer on the loop thread:
 * /health (200 once the model is ready and until draining starts, else 503), /info (TEI's fields),
 * /v1/models (OpenAI's list), /metrics (Prometheus text). */
#include "gw_internal.h"

#define POSY_GW_VERSION "0.1.0"

static const char *pooling_name(posy_pooling p) {
    return p == POSY_POOL_CLS ? "cls" : p == POSY_POOL_LAST ? "last_token" : "mean";
}

/* Returns 1 when the body is Prometheus text, 0 for JSON. */
/* {"reranker" | "classifier": {"id2label": {"0": name, ...}, "label2id": {name: 0, ...}}} */
static void info_labels(gw_buf *b, const eng_config *c) {
    gw_buf_printf(b, "{\"%s\":{\"id2label\":{", c->n_labels == 1 ? "reranker" : "classifier");
    for (int i = 0; i < c->n_labels; i++) {
        gw_buf_printf(b, "%s\"%d\":", i ? "," : "", i);
        gw_buf_json_str(b, c->labels[i], strlen(c->labels[i]));
    }
    gw_buf_puts(b, "},\"label2id\":{");
    for (int i = 0; i < c->n_labels; i++) {
        if (i) gw_buf_putc(b, ',');
        gw_buf_json_str(b, c->labels[i], strlen(c->labels[i]));
        gw_buf_printf(b, ":%d", i);
    }
    gw_buf_puts(b, "}}}");
}

int gw_get_route(gw_server *s, gw_route r, gw_buf *b, int *status) {
    int ready = atomic_load(&s->ready);
    const gw_model *m = &s->model;
    if (r == GW_R_METRICS) {
        gw_metrics_render(&s->metrics, b);
        sched_depth d = {0};
        if (ready && s->backend.depth) s->backend.depth(s->backend.ctx, &d);
        gw_buf_printf(b, "# HELP posy_queue_requests Requests accepted and not finished by the scheduler\n"
                         "# TYPE posy_queue_requests gauge\nposy_queue_requests %d\n"
                         "# HELP posy_queue_sequences Sequences waiting for a batch\n"
                         "# TYPE posy_queue_sequences gauge\nposy_queue_sequences %d\n"
                         "# HELP posy_queue_tokens Tokens waiting for a batch\n"
                         "# TYPE posy_queue_tokens gauge\nposy_queue_tokens %d\n"
                         "# HELP posy_http_active Requests being processed by the HTTP front\n"
                         "# TYPE posy_http_active gauge\nposy_http_active %d\n",
                      d.requests, d.queued_seqs, d.queued_tokens, atomic_load(&s->active));
        if (ready && s->backend.metrics) s->backend.metrics(s->backend.ctx, b);
        posy_engine_stats es;
        if (ready && s->backend.engine_stats && s->backend.engine_stats(s->backend.ctx, &es) == 0)
            gw_metrics_render_engine(&es, b);
        return 1;
    }
    if (!ready) {
        *status = 503;
        gw_error_body(b, r == GW_R_MODELS, 503, "model_loading", "the model is still loading");
        return 0;
    }
    if (r == GW_R_HEALTH && atomic_load(&s->draining)) {   /* load balancers: stop sending */
        *status = 503;
        gw_error_body(b, 0, 503, "shutting_down", "the server is shutting down");
    } else if (r == GW_R_HEALTH && s->backend.healthy && !s->backend.healthy(s->backend.ctx)) {
        *status = 503;
        gw_error_body(b, 0, 503, "backend_unavailable", "no healthy worker");
    } else if (r == GW_R_HEALTH) {
        gw_buf_puts(b, "{\"status\":\"ok\"}");
    } else if (r == GW_R_MODELS) {
        gw_buf_puts(b, "{\"object\":\"list\",\"data\":[{\"id\":");
        gw_buf_json_str(b, m->name, strlen(m->name));
        gw_buf_puts(b, ",\"object\":\"model\",\"created\":0,\"owned_by\":\"posy\"}]}");
    } else {   /* GW_R_INFO */
        gw_buf_puts(b, "{\"model_id\":");
        gw_buf_json_str(b, m->name, strlen(m->name));
        gw_buf_printf(b, ",\"model_dtype\":\"%s\",\"model_type\":", m->dtype);
        if (m->cfg && m->cfg->rerank)   /* TEI's shape: a reranker (one label) or a classifier */
            info_labels(b, m->cfg);
        else
            gw_buf_printf(b, "{\"embedding\":{\"pooling\":\"%s\"}}",
                          !m->cfg ? "mean" : m->cfg->splade ? "splade" : pooling_name(m->cfg->info.pooling));
        gw_buf_printf(b, ",\"dimensions\":%d,\"device\":\"%s\",\"max_concurrent_requests\":%d,"
                         "\"max_input_length\":%d,\"max_batch_tokens\":%d,\"max_batch_requests\":%d,"
                         "\"max_client_batch_size\":%d,\"tokenization_workers\":%d,\"auto_truncate\":%s,"
                         "\"version\":\"%s\"}",
                      m->dim, m->device,
                      s->opts.max_concurrent, m->max_input_tokens,
                      m->max_batch_tokens > 0 ? m->max_batch_tokens : s->opts.max_batch_tokens, s->opts.max_batch_seqs,
                      s->opts.max_client_batch, s->opts.n_workers, s->opts.auto_truncate ? "true" : "false",
                      POSY_GW_VERSION);
    }
    return 0;
}

/* gw_sparse: POST /embed_sparse (TEI's) for a SPLADE model.
 *
 * The engine hands back each input's vector at the vocabulary's full size
 * (eng_config_splade.c: values >= 0, most of them 0); the answer is TEI's
 * sparse form, one list an input of its non-zero entries in index order:
 * [[{"index": token id, "value": v}, ...], ...].
 */
#include "gw_internal.h"

int gw_sparse_write(gw_call *c) {
    const int V = c->srv->model.dim;
    gw_buf *b = &c->resp;
    gw_buf_putc(b, '[');
    for (int i = 0; i < c->n_seqs; i++) {
        const float *v = c->out + (size_t)i * V;
        int first = 1;
        gw_buf_puts(b, i ? ",[" : "[");
        for (int k = 0; k < V; k++) {
            if (v[k] == 0.0f) continue;
            gw_buf_printf(b, "%s{\"index\":%d,\"value\":%.9g}", first ? "" : ",", k, (double)v[k]);
            first = 0;
        }
        gw_buf_putc(b, ']');
    }
    gw_buf_putc(b, ']');
    return b->oom ? -1 : 0;
}

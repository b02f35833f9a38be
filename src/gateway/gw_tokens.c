/* gw_tokens: POST /embed_all (TEI's): every token's last hidden state.
 *
 * The engine writes each input's token states (after the model's final
 * norm, before pooling, Dense modules and normalization: sentence-
 * transformers' "token_embeddings") into the call's tok buffer, inputs back
 * to back as the batch packs them; the answer is TEI's, one list an input
 * of one vector a token, special tokens included:
 * [[[f, ...], ...], ...].
 */
#include "gw_float.h"
#include "gw_internal.h"

int gw_tokens_write(gw_call *c) {
    const int D = c->srv->model.tok_dim;
    gw_buf *b = &c->resp;
    gw_buf_reserve(b, (size_t)c->cu[c->n_seqs] * ((size_t)D * (GW_FLOAT_MAX + 1) + 4) + (size_t)c->n_seqs * 4 + 16);
    gw_buf_putc(b, '[');
    for (int i = 0; i < c->n_seqs; i++) {
        gw_buf_puts(b, i ? ",[" : "[");
        for (int t = c->cu[i]; t < c->cu[i + 1]; t++) {
            if (t > c->cu[i]) gw_buf_putc(b, ',');
            gw_json_floats(b, c->tok + (size_t)t * D, (size_t)D);
        }
        gw_buf_putc(b, ']');
    }
    gw_buf_putc(b, ']');
    return b->oom ? -1 : 0;
}

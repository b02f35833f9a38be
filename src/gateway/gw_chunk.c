/* gw_chunk: the "chunked": true request option (a posy extension): an
 * input longer than the model's max_seq_length is neither truncated nor
 * refused but split into windows that each keep the encoding's leading and
 * trailing special tokens; the windows run as ordinary sequences of the
 * call's job and their embeddings are combined into one vector per input by
 * a token-count weighted mean, re-normalised when the model normalises.
 * The window and combination rules are posy_chunk's (src/common/posy_chunk.h,
 * docs/DECODERS.md); this file only keeps the call's bookkeeping:
 * n_windows[i] = sequences of input i, so the combination can walk the
 * job's outputs in order and compact them to one vector per input.
 *
 * Pooling include_prompt false: the prompt is the front of the text, so it
 * lands in the first window only, and only that window leaves it out of
 * pooling (its pool skip; the other windows pool all their tokens, as an
 * input without a prompt would).  A prompt that does not fit in the first
 * window with at least one text token is refused.  The first window then
 * weighs in the combination with the tokens it pooled (its length less the
 * skip), so the weights stay "tokens pooled" for every window.
 */
#include <stdlib.h>
#include "gw_internal.h"
#include "posy_chunk.h"

int gw_chunk_push(gw_call *c, int idx, const int32_t *ids, const int32_t *types, int n, const uint8_t *special,
                  int max_len, int skip) {
    int p, s;
    posy_chunk_specials(special, n, &p, &s);
    int k = posy_chunk_count(n, p, s, max_len);
    if (k < 1) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "input_too_long", "input %d: %d special tokens leave no room for "
                     "text in windows of %d tokens", idx, p + s, max_len);
        return -1;
    }
    if (skip + s >= max_len) {   /* the first window is max_len long: no text token would be left in it */
        gw_call_fail(c, 422, GW_F_VALIDATION, "input_too_long", "input %d: the %d prompt tokens left out of "
                     "pooling fill the first window of %d tokens", idx, skip, max_len);
        return -1;
    }
    size_t total = posy_chunk_total_tokens(n, p, s, max_len);
    /* the type ids are windowed like the ids (the same positions kept) */
    int32_t *win = malloc(total * sizeof *win), *cu = malloc(((size_t)k + 1) * sizeof *cu);
    int32_t *twin = types ? malloc(total * sizeof *twin) : NULL;
    int rc = win && cu && (!types || twin) && posy_chunk_split(ids, n, p, s, max_len, win, total, cu, k + 1) == k &&
                     (!types || posy_chunk_split(types, n, p, s, max_len, twin, total, cu, k + 1) == k)
                 ? 0
                 : -1;
    for (int w = 0; !rc && w < k; w++)
        rc = gw_push_seq(c, win + cu[w], twin ? twin + cu[w] : NULL, cu[w + 1] - cu[w], w ? 0 : skip);
    free(win);
    free(twin);
    free(cu);
    if (rc) {
        c->status = 500;   /* tokenize_all turns it into out_of_memory */
        return -1;
    }
    c->n_windows[idx] = k;
    return 0;
}

void gw_chunk_combine(gw_call *c, int normalize) {
    int dim = c->srv->model.dim, seq = 0;
    for (int i = 0; i < c->n_inputs; i++) {
        int k = c->n_windows[i] > 0 ? c->n_windows[i] : 1;
        /* weights are cu differences: moving the first window's start by
         * its skip weighs it by the tokens it pooled.  cu is not read again
         * after the job, and later inputs start at or after cu[seq + k]. */
        if (c->skip && k > 1) c->cu[seq] += c->skip[seq];
        /* out[i] never overlaps the windows of a later input, and only
         * aliases element-wise the first window of its own (seq >= i). */
        posy_chunk_combine(c->out + (size_t)seq * dim, c->cu + seq, k, dim, normalize && k > 1, c->out + (size_t)i * dim);
        seq += k;
    }
    c->n_seqs = c->n_inputs;
}

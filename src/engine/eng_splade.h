/* eng_splade: SPLADE's sparse vectors from an encoder's final token
 * states (eng_config_splade.c says what they are), on the CPU: the
 * masked-LM head runs on `chunk` tokens at a time (a vocabulary's width of
 * logits a token is too much to hold for a whole batch), and each token's
 * log1p(relu(logit)) folds into its sequence's vector by max or sum.
 */
#ifndef ENG_SPLADE_H
#define ENG_SPLADE_H

#include <stddef.h>
#include <stdint.h>
#include "eng_dense.h"

#define ENG_SPLADE_CHUNK 64

/* Floats of scratch eng_splade_pool needs with head `h`. */
size_t eng_splade_scratch_floats(const eng_dense *h);
/* out[n_seqs][V] (V the head's last out) from x[cu[n_seqs]][H]. */
void eng_splade_pool(const eng_dense *h, int sum, int log2, const float *x, const int32_t *cu, int n_seqs,
                     float *out, float *scratch);

#endif

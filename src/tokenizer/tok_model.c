/* tok_model: model lifetime shared by the three kinds. */
#include <stdlib.h>

#include "tok_internal.h"

void tok_bpe_free(void *bpe);
void tok_uni_free(void *uni);

void tok_model_free(tok_model *m) {
    tok_vocab_free(&m->vocab);
    free(m->prefix);
    tok_bpe_free(m->bpe);
    tok_uni_free(m->uni);
}

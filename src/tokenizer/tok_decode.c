/* tok_decode: decoders (not implemented yet). */
#include "tok_load_util.h"

int tok_load_decoder(json_t *j, tok_tokenizer *t, posy_err *err) {
    (void)j; (void)t; (void)err;
    return 0;
}
void tok_decoder_free(void *d) { (void)d; }

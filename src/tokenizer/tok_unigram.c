/* tok_unigram: Unigram (not implemented yet; refused at load). */
#include "tok_load_util.h"

int tok_load_unigram(json_t *j, tok_model *m, posy_err *err) {
    (void)j; (void)m;
    return posy_err_set(err, POSY_E_UNSUPPORTED, "model.type: Unigram is not supported yet");
}
int tok_unigram_encode(const tok_model *m, const tok_buf *b, uint32_t off, uint32_t len, tok_toks *out,
                       tok_model_scratch *ms) {
    (void)m; (void)b; (void)off; (void)len; (void)out; (void)ms;
    return POSY_E_UNSUPPORTED;
}
void tok_uni_free(void *uni) { (void)uni; }

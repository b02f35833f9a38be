/* fuzz_safetensors: libFuzzer target for the safetensors reader and the
 * BERT weights loader on top of it.
 *
 * Any input must either be rejected with an error or yield a table whose
 * every tensor lies inside the input, is findable by name, and converts to
 * fp32 without touching memory outside its bytes (ASan and UBSan watch).
 * Files that parse are also handed to eng_bert_weights_load with a tiny
 * fixed BERT config (H=8, 1 layer), and to one of MPNet (its names, the
 * relative bias), so the seeds that describe such a model drive the
 * loader's lookup, shape checks and conversions too.
 * Build and run: tests/fuzz/run_fuzz.sh [seconds].
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eng_internal.h"

static void fuzz_check_tensors(const eng_st_file *f, const uint8_t *data, size_t size) {
    for (int i = 0; i < f->n_tensors; i++) {
        const eng_st_tensor *t = &f->tensors[i];
        const uint8_t *p = t->data;
        if (t->nbytes && (p < data || p + t->nbytes > data + size)) abort();
        if (eng_st_find(f, t->name) != t) abort();
        if (t->dtype == ENG_DT_OTHER || t->numel > (1 << 16)) continue;
        float *dst = malloc((size_t)t->numel * sizeof(float) + 1);
        if (!dst) continue;
        if (eng_st_check(f, t, t->ndim, t->shape, NULL) != 0) abort();
        if (eng_st_tensor_to_f32(t, dst) != 0) abort();
        free(dst);
    }
}

volatile float fuzz_sink; /* keeps the reads of loaded weights alive */

/* mpnet: MPNet's names, no token types, the relative bias [32, 2] */
static void fuzz_weights(const eng_st_file *f, int mpnet) {
    eng_config c;
    memset(&c, 0, sizeof c);
    strcpy(c.info.arch, mpnet ? "mpnet" : "bert");
    strcpy(c.model_type, mpnet ? "mpnet" : "bert");
    c.info.hidden = 8;
    c.info.layers = 1;
    c.info.heads = 2;
    c.info.intermediate = 16;
    c.info.vocab = 4;
    c.info.type_vocab = mpnet ? 0 : 2;
    c.rel_buckets = mpnet ? 32 : 0;
    c.max_position_embeddings = 4;
    c.info.max_positions = 4;
    eng_bert_weights w;
    posy_err err;
    if (eng_bert_weights_load(&w, &c, f, &err) == 0) {
        float s = 0;
        for (int j = 0; j < 3 * 8 * 8; j++) s += w.layers[0].qkv_w[j];
        for (int j = 0; j < 4 * 8; j++) s += w.word_emb[j] + w.pos_emb[j];
        if (mpnet) {
            if (!w.rel_bias) abort(); /* loaded means the bias is there */
            for (int j = 0; j < 32 * 2; j++) s += w.rel_bias[j];
        }
        fuzz_sink = s;
        eng_bert_weights_free(&w);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    eng_st_file f;
    posy_err err;
    if (eng_st_parse(&f, data, size, "fuzz", &err) != 0) {
        if (f.tensors || f.n_tensors) abort();   /* errors leave nothing open */
        return 0;
    }
    fuzz_check_tensors(&f, data, size);
    fuzz_weights(&f, 0);
    fuzz_weights(&f, 1);
    eng_st_close(&f);
    return 0;
}

/* eng_config_splade: SPLADE models (sentence-transformers' SparseEncoder:
 * naver/splade-v3, splade-cocondenser-*, opensearch-neural-sparse-*), read
 * from modules.json's MLMTransformer + SpladePooling.
 *
 * What the sparse vector is (sentence-transformers' SpladePooling): the
 * model's masked-LM logits for every token, log1p(relu(logit)) (and log1p
 * once more for "log1p_relu", opensearch's variant), pooled by max (or sum)
 * over all the sequence's tokens, special ones included.  The head is the
 * transformers MLM head, two of the engine's Dense layers per token:
 *   BERT        cls.predictions.transform.dense, hidden_act, .LayerNorm;
 *               cls.predictions.decoder (tied: bert.embeddings.word_embeddings)
 *               + cls.predictions.bias
 *   DistilBERT  vocab_transform, activation, vocab_layer_norm;
 *               vocab_projector (tied: distilbert.embeddings.word_embeddings) + its bias
 *   RoBERTa / XLM-R  lm_head.dense, GELU, lm_head.layer_norm;
 *               lm_head.decoder (tied: roberta.embeddings.word_embeddings) + lm_head.bias
 * The vector has the vocabulary's size; a Dense or Normalize module after
 * the pooling is refused (sentence-transformers has none there).
 */
#include "eng_config.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "eng_cfgjson.h"
#include "posy_file.h"

int eng_config_splade_pool(eng_config *c, const char *dir, const char *rel, posy_err *err) {
    char sub[1024], path[1024], strat[16], act[16];
    json_t *r;
    if (posy_path_join(sub, sizeof sub, dir, rel))
        return posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", dir, rel);
    int rc = eng_cfgjson_load(sub, "config.json", 1, 1, &r, path, err);
    if (rc) return rc;
    int dim = 0;
    if (!(rc = eng_cfgjson_str(r, "pooling_strategy", path, 0, "max", strat, sizeof strat, err)) &&
        !(rc = eng_cfgjson_str(r, "activation_function", path, 0, "relu", act, sizeof act, err)))
        rc = eng_cfgjson_int(r, "embedding_dimension", path, 0, 0, 0, 1 << 24, &dim, err);
    if (!rc && !dim) rc = eng_cfgjson_int(r, "word_embedding_dimension", path, 0, 0, 0, 1 << 24, &dim, err);
    json_decref(r);
    if (rc) return rc;
    if (strcmp(strat, "max") && strcmp(strat, "sum"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: pooling_strategy '%s' is not supported (max, sum)", path, strat);
    if (strcmp(act, "relu") && strcmp(act, "log1p_relu"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: activation_function '%s' is not supported (relu, log1p_relu)",
                            path, act);
    if (dim && dim != c->info.vocab)
        return posy_err_set(err, POSY_E_INVALID, "%s: the embedding dimension %d differs from the vocabulary's %d",
                            path, dim, c->info.vocab);
    c->splade = 1;
    c->splade_sum = !strcmp(strat, "sum");
    c->splade_log2 = !strcmp(act, "log1p_relu");
    return 0;
}

int eng_config_splade_head(eng_config *c, const char *path, posy_err *err) {
    const char *arch = c->info.arch;
    const int H = c->info.hidden, V = c->info.vocab;
    if (c->n_dense || c->info.normalize)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a Dense or Normalize module after SpladePooling is not "
                            "supported", path);
    if (c->act != ENG_ACT_GELU && strcmp(arch, "roberta") && strcmp(arch, "xlm-roberta"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a SPLADE head with an activation other than gelu is not "
                            "supported", path);
    eng_dense_cfg *t = &c->splade_head[0], *d = &c->splade_head[1];
    if (!strcmp(arch, "bert")) {
        eng_dense_cfg_named(t, H, H, ENG_DENSE_GELU, "cls.predictions.transform.dense.weight", "",
                 "cls.predictions.transform.dense.bias", "");
        snprintf(t->lnw, sizeof t->lnw, "cls.predictions.transform.LayerNorm.weight");
        snprintf(t->lnb, sizeof t->lnb, "cls.predictions.transform.LayerNorm.bias");
        eng_dense_cfg_named(d, H, V, ENG_DENSE_IDENTITY, "cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight",
                 "cls.predictions.bias", "cls.predictions.decoder.bias");
    } else if (!strcmp(arch, "distilbert")) {
        eng_dense_cfg_named(t, H, H, ENG_DENSE_GELU, "vocab_transform.weight", "", "vocab_transform.bias", "");
        snprintf(t->lnw, sizeof t->lnw, "vocab_layer_norm.weight");
        snprintf(t->lnb, sizeof t->lnb, "vocab_layer_norm.bias");
        eng_dense_cfg_named(d, H, V, ENG_DENSE_IDENTITY, "vocab_projector.weight", "distilbert.embeddings.word_embeddings.weight",
                 "vocab_projector.bias", "");
    } else if (!strcmp(arch, "roberta") || !strcmp(arch, "xlm-roberta")) {   /* RobertaLMHead: always erf GELU */
        eng_dense_cfg_named(t, H, H, ENG_DENSE_GELU, "lm_head.dense.weight", "", "lm_head.dense.bias", "");
        snprintf(t->lnw, sizeof t->lnw, "lm_head.layer_norm.weight");
        snprintf(t->lnb, sizeof t->lnb, "lm_head.layer_norm.bias");
        eng_dense_cfg_named(d, H, V, ENG_DENSE_IDENTITY, "lm_head.decoder.weight", "roberta.embeddings.word_embeddings.weight",
                 "lm_head.bias", "lm_head.decoder.bias");
    } else {
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: SPLADE on model_type '%s' is not supported (bert, distilbert, "
                            "roberta, xlm-roberta)", path, c->model_type);
    }
    t->ln_eps = c->ln_eps;
    c->info.dim = V;
    c->info.normalize = 0;
    return 0;
}

/* eng_config_rerank: cross-encoder rerankers (ms-marco-MiniLM-L-6-v2,
 * bge-reranker-base / -large, gte-reranker-modernbert-base, ...): an encoder with a
 * sequence-classification head of one label, whose logit scores how well a
 * text answers a query (TEI's /rerank).
 *
 * The head is two linear layers on the pooled final state (the first
 * token's but for a ModernBERT one that says mean), so it runs as two of
 * the engine front's Dense layers (eng_dense.c) after the backend's
 * pooling, on every device:
 *   BERT        tanh(pooler.dense)       -> classifier            (bert.pooler.*, classifier.*)
 *   RoBERTa/XLM-R tanh(classifier.dense) -> classifier.out_proj
 *   DistilBERT  relu(pre_classifier)     -> classifier
 *   DeBERTa v2/v3 act(pooler.dense)      -> classifier (pooler_hidden_act, GELU by default)
 *   ModernBERT  LayerNorm(act(head.dense)) -> classifier, after CLS or
 *               mean pooling (classifier_pooling), the dense's bias as
 *               classifier_bias says, the norm's as norm_bias
 *   decoders    score (no bias) on the last token's state: Qwen3 / Qwen2 /
 *               Mistral / Llama / Gemma 3 ...ForSequenceClassification
 *               (Qwen3-Reranker's sequence-classification conversions)
 * and the vector served is the head's logits, one a label.  One label is a
 * reranker (/rerank: one score a text); more are a classifier (/predict,
 * /classify), its labels' names from id2label.  How scores come from the
 * logits (score_fn) is transformers' pipeline rule: regression none,
 * multi-label or one label sigmoid, else softmax.
 */
#include "eng_config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eng_cfgjson.h"

static int rr_is_classifier(json_t *root) {
    const char *a = json_string_value(json_array_get(json_object_get(root, "architectures"), 0));
    const char *suffix = "ForSequenceClassification";
    size_t n = a ? strlen(a) : 0, k = strlen(suffix);
    return n > k && !strcmp(a + n - k, suffix);
}

int eng_dense_act_named(const char *name, eng_dense_act *act) {
    static const struct { const char *name; eng_dense_act act; } acts[] = {
        {"gelu", ENG_DENSE_GELU}, {"relu", ENG_DENSE_RELU}, {"tanh", ENG_DENSE_TANH}, {"sigmoid", ENG_DENSE_SIGMOID},
        {"linear", ENG_DENSE_IDENTITY},
    };
    for (size_t i = 0; i < sizeof acts / sizeof acts[0]; i++)
        if (!strcmp(name, acts[i].name)) {
            *act = acts[i].act;
            return 0;
        }
    return -1;
}

/* ModernBERT's head settings (transformers' defaults: cls, gelu, no bias). */
static int rr_modernbert(eng_config *c, json_t *root, const char *path, posy_err *err) {
    char pool[16], act[32];
    int rc;
    if ((rc = eng_cfgjson_str(root, "classifier_pooling", path, 0, "cls", pool, sizeof pool, err)) ||
        (rc = eng_cfgjson_str(root, "classifier_activation", path, 0, "gelu", act, sizeof act, err)) ||
        (rc = eng_cfgjson_bool(root, "classifier_bias", path, 0, &c->rerank_head_bias, err)))
        return rc;
    if (strcmp(pool, "cls") && strcmp(pool, "mean"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: classifier_pooling '%s' is not supported (cls, mean)", path,
                            pool);
    c->rerank_mean = !strcmp(pool, "mean");
    if (eng_dense_act_named(act, &c->rerank_act) == 0) return 0;
    return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: classifier_activation '%s' is not supported (gelu, relu, tanh, "
                        "sigmoid, linear)", path, act);
}

/* The labels' names in order: id2label's (keys "0" .. "n-1", each once),
 * or transformers' "LABEL_<i>" when the config has none. */
static int rr_labels(eng_config *c, json_t *id2label, long long n, const char *path, posy_err *err) {
    if (n < 1 || n > ENG_MAX_LABELS)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a classifier of %lld labels; posy runs 1 to %d", path, n,
                            ENG_MAX_LABELS);
    if (!(c->labels = calloc((size_t)n, sizeof *c->labels)))
        return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory for %lld labels", path, n);
    c->n_labels = (int)n;
    const char *key;
    json_t *v;
    if (json_is_object(id2label))
        json_object_foreach(id2label, key, v) {
            char *end;
            long i = strtol(key, &end, 10);
            if (!*key || *end || i < 0 || i >= n || c->labels[i])
                return posy_err_set(err, POSY_E_INVALID, "%s: id2label key '%s' is not a label id 0..%lld given once",
                                    path, key, n - 1);
            if (!json_is_string(v))
                return posy_err_set(err, POSY_E_INVALID, "%s: id2label[\"%s\"] is not a string", path, key);
            if (!(c->labels[i] = strdup(json_string_value(v))))
                return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory", path);
        }
    for (long long i = 0; i < n; i++)
        if (!c->labels[i]) {
            char name[32];
            snprintf(name, sizeof name, "LABEL_%lld", i);
            if (!(c->labels[i] = strdup(name))) return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory", path);
        }
    return 0;
}

int eng_config_rerank_check(eng_config *c, json_t *root, const char *path, posy_err *err) {
    if (!rr_is_classifier(root)) return 0;
    const char *arch = c->info.arch;
    const int decoder = !strcmp(arch, "qwen3") && !c->modernbert && !c->t5;
    if (strcmp(arch, "bert") && strcmp(arch, "roberta") && strcmp(arch, "xlm-roberta") && strcmp(arch, "distilbert") &&
        !c->modernbert && !c->deberta && !decoder)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a sequence-classification head on model_type '%s' is not "
                            "supported (classifiers and rerankers: bert, roberta, xlm-roberta, camembert, distilbert, "
                            "modernbert, deberta-v2, qwen3, qwen2, mistral, llama, gemma3_text)", path, c->model_type);
    if (decoder) {
        json_t *pad = json_object_get(root, "pad_token_id");
        c->rerank_decoder = 1;
        c->cls_pad_id = json_is_integer(pad) && json_integer_value(pad) >= 0 && json_integer_value(pad) < (1 << 24)
                            ? (int)json_integer_value(pad) : -1;
    }
    /* transformers: num_labels = len(id2label), 2 when neither is given */
    json_t *labels = json_object_get(root, "id2label"), *nl = json_object_get(root, "num_labels");
    if (labels && !json_is_object(labels) && !json_is_null(labels))
        return posy_err_set(err, POSY_E_INVALID, "%s: id2label is not an object", path);
    if (nl && !json_is_integer(nl) && !json_is_null(nl))
        return posy_err_set(err, POSY_E_INVALID, "%s: num_labels is not an integer", path);
    long long n = json_is_object(labels) ? (long long)json_object_size(labels)
                  : json_is_integer(nl)   ? (long long)json_integer_value(nl)
                                          : 2;
    int rc = rr_labels(c, labels, n, path, err);
    if (rc) return rc;
    char problem[64];
    if ((rc = eng_cfgjson_str(root, "problem_type", path, 0, "", problem, sizeof problem, err))) return rc;
    if (*problem && strcmp(problem, "regression") && strcmp(problem, "single_label_classification") &&
        strcmp(problem, "multi_label_classification"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: problem_type '%s' is not supported (regression, "
                            "single_label_classification, multi_label_classification)", path, problem);
    c->score_fn = !strcmp(problem, "regression")                              ? ENG_SCORE_NONE
                  : !strcmp(problem, "multi_label_classification") || n == 1 ? ENG_SCORE_SIGMOID
                                                                              : ENG_SCORE_SOFTMAX;
    c->rerank = 1;
    return c->modernbert ? rr_modernbert(c, root, path, err) : 0;
}

void eng_dense_cfg_named(eng_dense_cfg *d, int in, int out, eng_dense_act act, const char *w, const char *walt,
                         const char *b, const char *balt) {
    memset(d, 0, sizeof *d);
    d->in = in;
    d->out = out;
    d->bias = 1;
    d->act = act;
    snprintf(d->wname, sizeof d->wname, "%s", w);
    snprintf(d->walt, sizeof d->walt, "%s", walt);
    snprintf(d->bname, sizeof d->bname, "%s", b);
    snprintf(d->balt, sizeof d->balt, "%s", balt);
}

static void rr_dense(eng_dense_cfg *d, int in, int out, eng_dense_act act, const char *w, const char *b) {
    eng_dense_cfg_named(d, in, out, act, w, "", b, "");
}

void eng_config_rerank_head(eng_config *c) {
    const int H = c->info.hidden;
    const char *arch = c->info.arch;
    c->info.pooling = c->rerank_mean ? POSY_POOL_MEAN : POSY_POOL_CLS;
    c->info.normalize = 0;
    if (c->rerank_decoder) {   /* transformers' GenericForSequenceClassification: score, no bias, last token */
        c->info.pooling = POSY_POOL_LAST;
        rr_dense(&c->dense[0], H, c->n_labels, ENG_DENSE_IDENTITY, "score.weight", "");
        c->dense[0].bias = 0;
        c->n_dense = 1;
        c->info.dim = c->n_labels;
        return;
    }
    if (c->modernbert) {
        rr_dense(&c->dense[0], H, H, c->rerank_act, "head.dense.weight", c->rerank_head_bias ? "head.dense.bias" : "");
        c->dense[0].bias = c->rerank_head_bias;
        snprintf(c->dense[0].lnw, sizeof c->dense[0].lnw, "head.norm.weight");
        snprintf(c->dense[0].lnb, sizeof c->dense[0].lnb, "%s", c->norm_bias ? "head.norm.bias" : "");
        c->dense[0].ln_eps = c->ln_eps;
        rr_dense(&c->dense[1], H, c->n_labels, ENG_DENSE_IDENTITY, "classifier.weight", "classifier.bias");
    } else if (!strcmp(arch, "bert")) {
        rr_dense(&c->dense[0], H, H, ENG_DENSE_TANH, "bert.pooler.dense.weight", "bert.pooler.dense.bias");
        rr_dense(&c->dense[1], H, c->n_labels, ENG_DENSE_IDENTITY, "classifier.weight", "classifier.bias");
    } else if (c->deberta) {   /* ContextPooler: dense and pooler_hidden_act on the first token */
        rr_dense(&c->dense[0], H, H, c->pooler_act, "pooler.dense.weight", "pooler.dense.bias");
        rr_dense(&c->dense[1], H, c->n_labels, ENG_DENSE_IDENTITY, "classifier.weight", "classifier.bias");
    } else if (!strcmp(arch, "distilbert")) {
        rr_dense(&c->dense[0], H, H, ENG_DENSE_RELU, "pre_classifier.weight", "pre_classifier.bias");
        rr_dense(&c->dense[1], H, c->n_labels, ENG_DENSE_IDENTITY, "classifier.weight", "classifier.bias");
    } else {
        rr_dense(&c->dense[0], H, H, ENG_DENSE_TANH, "classifier.dense.weight", "classifier.dense.bias");
        rr_dense(&c->dense[1], H, c->n_labels, ENG_DENSE_IDENTITY, "classifier.out_proj.weight", "classifier.out_proj.bias");
    }
    c->n_dense = 2;
    c->info.dim = c->n_labels;
}

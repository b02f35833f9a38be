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

static int rr_ends(const char *a, const char *suffix) {
    size_t n = a ? strlen(a) : 0, k = strlen(suffix);
    return n > k && !strcmp(a + n - k, suffix);
}

/* ...ForSequenceClassification; or, with classifier_from_token, the
 * ...ForCausalLM checkpoint itself (as vLLM reads Qwen3-Reranker) */
static int rr_is_classifier(json_t *root) {
    const char *a = json_string_value(json_array_get(json_object_get(root, "architectures"), 0));
    return rr_ends(a, "ForSequenceClassification") ||
           (rr_ends(a, "ForCausalLM") && json_object_get(root, "classifier_from_token"));
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

/* A token's id in the model's tokenizer.json: added_tokens first, then the
 * model's vocabulary (an object for BPE / WordPiece, a [piece, score] list
 * for Unigram).  -1 when absent. */
static int rr_token_id(json_t *tok, const char *s) {
    json_t *added = json_object_get(tok, "added_tokens"), *v;
    size_t i;
    json_array_foreach(added, i, v) {
        const char *content = json_string_value(json_object_get(v, "content"));
        json_t *id = json_object_get(v, "id");
        if (content && !strcmp(content, s) && json_is_integer(id)) return (int)json_integer_value(id);
    }
    json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
    if (json_is_object(vocab)) {
        json_t *id = json_object_get(vocab, s);
        return json_is_integer(id) && json_integer_value(id) >= 0 && json_integer_value(id) < (1 << 30)
                   ? (int)json_integer_value(id) : -1;
    }
    json_array_foreach(vocab, i, v)
        if (json_is_string(json_array_get(v, 0)) && !strcmp(json_string_value(json_array_get(v, 0)), s)) return (int)i;
    return -1;
}

/* vLLM's classifier_from_token: the head from the LM head's rows of these
 * tokens (their ids from the tokenizer.json beside config.json). */
static int rr_from_tokens(eng_config *c, json_t *root, json_t *list, const char *path, posy_err *err) {
    const size_t n = json_array_size(list);
    if (!json_is_array(list) || n < 1 || n > ENG_MAX_TOK_ROWS)
        return posy_err_set(err, POSY_E_INVALID, "%s: classifier_from_token must be a list of 1 to %d token strings",
                            path, ENG_MAX_TOK_ROWS);
    char method[32];
    int orig = 0, rc = eng_cfgjson_str(root, "method", path, 0, "", method, sizeof method, err);
    if (!rc) rc = eng_cfgjson_bool(root, "is_original_qwen3_reranker", path, 0, &orig, err);
    if (rc) return rc;
    if (*method && strcmp(method, "from_2_way_softmax") && strcmp(method, "no_post_processing"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: method '%s' is not supported (from_2_way_softmax, "
                            "no_post_processing)", path, method);
    c->from_tok_diff = orig || !strcmp(method, "from_2_way_softmax");
    if (c->from_tok_diff && n != 2)
        return posy_err_set(err, POSY_E_INVALID, "%s: a 2-way softmax needs two classifier_from_token entries (the "
                            "false and the true token, e.g. [\"no\", \"yes\"]), not %zu", path, n);
    char dir[1024], tpath[1100];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    snprintf(tpath, sizeof tpath, "%s/tokenizer.json", dir);
    json_error_t je;
    json_t *tok = json_load_file(tpath, 0, &je);
    if (!tok)
        return posy_err_set(err, POSY_E_INVALID, "%s: classifier_from_token needs the model's tokenizer.json (%s: %s)",
                            path, tpath, je.text);
    for (size_t i = 0; i < n && !rc; i++) {
        const char *s = json_string_value(json_array_get(list, i));
        const int id = s ? rr_token_id(tok, s) : -1;
        if (id < 0 || id >= c->info.vocab)
            rc = posy_err_set(err, POSY_E_INVALID, "%s: classifier_from_token[%zu] '%.40s' is not a token of %s%s", path,
                              i, s ? s : "(not a string)", tpath, id >= c->info.vocab ? " within the model's vocabulary" : "");
        else
            c->from_tok[i] = id;
    }
    json_decref(tok);
    if (rc) return rc;
    c->n_from_tok = (int)n;
    return 0;
}

int eng_config_rerank_check(eng_config *c, json_t *root, const char *path, posy_err *err) {
    if (!rr_is_classifier(root)) return 0;
    const char *arch = c->info.arch;
    const int decoder = !strcmp(arch, "qwen3") && !c->modernbert && !c->t5 && !c->post_ln;
    if (c->jina)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a sequence-classification head on JinaBERT "
                            "(position_embedding_type alibi: jina-reranker-v1-*) is not supported", path);
    if (strcmp(arch, "bert") && strcmp(arch, "roberta") && strcmp(arch, "xlm-roberta") && strcmp(arch, "distilbert") &&
        !c->modernbert && !c->deberta && !c->gte && !decoder)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a sequence-classification head on model_type '%s' is not "
                            "supported (classifiers and rerankers: bert, roberta, xlm-roberta, camembert, distilbert, "
                            "modernbert, deberta-v2, deberta, new (GTE), qwen3, qwen2, mistral, llama, gemma3_text)",
                            path, c->model_type);
    json_t *from = json_object_get(root, "classifier_from_token");
    if (from && !decoder)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: classifier_from_token applies to decoders (a Qwen3, Qwen2, "
                            "Mistral, Llama or Gemma 3 LM head), not to model_type '%s'", path, c->model_type);
    if (decoder) {
        json_t *pad = json_object_get(root, "pad_token_id");
        c->rerank_decoder = 1;
        c->cls_pad_id = json_is_integer(pad) && json_integer_value(pad) >= 0 && json_integer_value(pad) < (1 << 24)
                            ? (int)json_integer_value(pad) : -1;
    }
    if (from) {   /* one logit (2-way), or one a token named by the token: id2label / num_labels do not apply */
        int rc = rr_from_tokens(c, root, from, path, err);
        if (!rc) rc = rr_labels(c, NULL, c->from_tok_diff ? 1 : c->n_from_tok, path, err);
        for (int i = 0; !rc && !c->from_tok_diff && i < c->n_from_tok; i++) {
            free(c->labels[i]);
            if (!(c->labels[i] = strdup(json_string_value(json_array_get(from, (size_t)i)))))
                rc = posy_err_set(err, POSY_E_NOMEM, "%s: out of memory", path);
        }
        if (rc) return rc;
        c->score_fn = c->n_labels == 1 ? ENG_SCORE_SIGMOID : ENG_SCORE_SOFTMAX;
        c->rerank = 1;
        return 0;
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
        if (c->n_from_tok) {   /* the LM head's rows (tied: the embedding's) */
            eng_dense_cfg_named(&c->dense[0], H, c->n_labels, ENG_DENSE_IDENTITY, "lm_head.weight",
                                "model.embed_tokens.weight", "", "");
            c->dense[0].bias = 0;
            c->dense[0].n_rows = c->n_from_tok;
            c->dense[0].rows_diff = c->from_tok_diff;
            memcpy(c->dense[0].rows, c->from_tok, sizeof c->from_tok);
        }
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
    } else if (c->gte) {   /* NewForSequenceClassification: NewPooler (dense + tanh on the first token) */
        rr_dense(&c->dense[0], H, H, ENG_DENSE_TANH, "new.pooler.dense.weight", "new.pooler.dense.bias");
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

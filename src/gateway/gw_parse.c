/* gw_parse: see gw_parse.h. */
#include "gw_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int perr(gw_perr *pe, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int perr(gw_perr *pe, int status, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pe->msg, sizeof pe->msg, fmt, ap);
    va_end(ap);
    pe->status = status;
    pe->code = code;
    return -1;
}

/* The body as a JSON object, kept in *doc (even when it is not an object,
 * for the caller to free); NULL with pe set when it is not one. */
static json_t *load_object(const char *body, size_t len, json_t **doc, gw_perr *pe) {
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_DECODE_ANY, &je);
    *doc = o;
    if (!o) {
        perr(pe, 400, "invalid_json", "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        return NULL;
    }
    if (!json_is_object(o)) {
        perr(pe, 400, "invalid_type", "the body must be a JSON object");
        return NULL;
    }
    return o;
}

/* One element that must be a list of token ids. */
static int check_ids(json_t *a, int idx, gw_perr *pe) {
    size_t n = json_array_size(a);
    if (n == 0) return perr(pe, 422, "empty_input", "input %d is an empty list of token ids", idx);
    for (size_t i = 0; i < n; i++)
        if (!json_is_integer(json_array_get(a, i)))
            return perr(pe, 400, "invalid_type", "input %d: token ids must all be integers", idx);
    return 0;
}

/* string | [string] | [int] | [[int]] */
static int read_inputs(json_t *in, const char *field, int max_inputs, gw_embed_req *r, gw_perr *pe) {
    if (!in || json_is_null(in)) return perr(pe, 422, "missing_input", "'%s' is required", field);
    if (json_is_string(in)) {
        r->inputs = calloc(1, sizeof *r->inputs);
        if (!r->inputs) return perr(pe, 422, "out_of_memory", "out of memory");
        r->inputs[0].text = json_string_value(in);
        r->inputs[0].len = json_string_length(in);
        r->n = 1;
        return 0;
    }
    if (!json_is_array(in))
        return perr(pe, 400, "invalid_type", "'%s' must be a string, an array of strings, an array of token ids "
                    "or an array of arrays of token ids", field);
    size_t n = json_array_size(in);
    if (n == 0) return perr(pe, 422, "empty_input", "'%s' is an empty array", field);
    json_t *first = json_array_get(in, 0);
    if (json_is_integer(first)) {   /* one input given as token ids */
        if (check_ids(in, 0, pe)) return -1;
        r->inputs = calloc(1, sizeof *r->inputs);
        if (!r->inputs) return perr(pe, 422, "out_of_memory", "out of memory");
        r->inputs[0].ids = in;
        r->n = 1;
        return 0;
    }
    if (n > (size_t)max_inputs)
        return perr(pe, 422, "too_many_inputs", "'%s' has %zu inputs, more than the limit of %d (--max-client-batch)",
                    field, n, max_inputs);
    r->inputs = calloc(n, sizeof *r->inputs);
    if (!r->inputs) return perr(pe, 422, "out_of_memory", "out of memory");
    r->n = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(in, i);
        if (json_is_string(e) && json_is_string(first)) {
            r->inputs[i].text = json_string_value(e);
            r->inputs[i].len = json_string_length(e);
        } else if (json_is_array(e) && json_is_array(first)) {
            if (check_ids(e, (int)i, pe)) return -1;
            r->inputs[i].ids = e;
        } else {
            return perr(pe, 400, "invalid_type", "'%s'[%zu]: every element must be a string, or every element an "
                        "array of token ids", field, i);
        }
    }
    return 0;
}

/* TEI's sentence similarity: {"source_sentence": str, "sentences": [str, ...]}
 * as inputs[0] and inputs[1..n]. */
static int read_similarity(json_t *in, int max_inputs, gw_embed_req *r, gw_perr *pe) {
    json_t *src = json_object_get(in, "source_sentence"), *sents = json_object_get(in, "sentences");
    if (!src || json_is_null(src)) return perr(pe, 422, "missing_input", "'inputs.source_sentence' is required");
    if (!json_is_string(src)) return perr(pe, 400, "invalid_type", "'inputs.source_sentence' must be a string");
    if (!sents || json_is_null(sents)) return perr(pe, 422, "missing_input", "'inputs.sentences' is required");
    if (!json_is_array(sents))
        return perr(pe, 400, "invalid_type", "'inputs.sentences' must be an array of strings");
    size_t n = json_array_size(sents);
    if (n == 0) return perr(pe, 422, "empty_input", "'inputs.sentences' is an empty array");
    if (n + 1 > (size_t)max_inputs)
        return perr(pe, 422, "too_many_inputs", "'inputs.sentences' has %zu sentences; with the source that is more "
                    "than the limit of %d inputs (--max-client-batch)", n, max_inputs);
    r->inputs = calloc(n + 1, sizeof *r->inputs);
    if (!r->inputs) return perr(pe, 422, "out_of_memory", "out of memory");
    r->n = (int)n + 1;
    r->similarity = 1;
    r->inputs[0].text = json_string_value(src);
    r->inputs[0].len = json_string_length(src);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(sents, i);
        if (!json_is_string(e)) return perr(pe, 400, "invalid_type", "'inputs.sentences'[%zu] must be a string", i);
        r->inputs[i + 1].text = json_string_value(e);
        r->inputs[i + 1].len = json_string_length(e);
    }
    return 0;
}

static int read_bool(json_t *o, const char *k, int *out, gw_perr *pe) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return perr(pe, 400, "invalid_type", "'%s' must be true or false", k);
    *out = json_is_true(v);
    return 0;
}

static int read_string(json_t *o, const char *k, const char **out, gw_perr *pe) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_string(v)) return perr(pe, 400, "invalid_type", "'%s' must be a string", k);
    *out = json_string_value(v);
    return 0;
}

static int read_options(json_t *o, int openai, gw_embed_req *r, gw_perr *pe) {
    const char *fmt = NULL, *odt = NULL, *dir = NULL, *model = NULL, *user = NULL;
    char emsg[200];
    if (read_string(o, "encoding_format", &fmt, pe) || read_string(o, "output_dtype", &odt, pe) || read_string(o, "truncation_direction", &dir, pe) ||
        read_string(o, "model", &model, pe) || read_string(o, "user", &user, pe) ||
        read_string(o, "prompt_name", &r->prompt_name, pe) || read_string(o, "task", &r->task, pe) ||
        read_bool(o, "normalize", &r->normalize, pe) ||
        read_bool(o, "truncate", &r->truncate, pe) || read_bool(o, "chunked", &r->chunked, pe) || read_bool(o, "add_special_tokens", &r->add_special, pe))
        return -1;
    if (posy_vecenc_parse(fmt, odt, &r->enc, emsg, sizeof emsg))
        return perr(pe, 422, "invalid_encoding_format", "%s", emsg);
    r->base64 = r->enc.base64 && r->enc.dtype == POSY_VEC_FLOAT32;
    if (dir && strcasecmp(dir, "left") && strcasecmp(dir, "right"))
        return perr(pe, 422, "invalid_truncation_direction", "'truncation_direction' must be \"left\" or \"right\"");
    r->dir = dir && !strcasecmp(dir, "left") ? TOK_TRUNC_LEFT : TOK_TRUNC_RIGHT;
    json_t *d = json_object_get(o, "dimensions");
    if (d && !json_is_null(d)) {
        if (!json_is_integer(d)) return perr(pe, 400, "invalid_type", "'dimensions' must be an integer");
        json_int_t v = json_integer_value(d);
        if (v < 1 || v > 1 << 30)
            return perr(pe, 422, "invalid_dimensions", "'dimensions' is %lld; it must be in [1, %d]", (long long)v,
                        1 << 30);
        r->dims = (int)v;
    }
    (void)openai;
    return 0;
}

int gw_parse_body(const char *body, size_t len, int openai, int route_tokenize, int max_inputs,
                  int default_truncate, json_t **doc, gw_embed_req *r, gw_perr *pe) {
    memset(r, 0, sizeof *r);
    r->normalize = 1;
    r->add_special = -1;
    r->truncate = default_truncate;
    json_t *o = load_object(body, len, doc, pe);
    if (!o) return -1;
    const char *field = openai ? "input" : "inputs";
    json_t *in = json_object_get(o, field);
    if (!openai && !route_tokenize && json_is_object(in)) {   /* TEI /similarity: options under "parameters" */
        json_t *params = json_object_get(o, "parameters");
        if (params && !json_is_null(params) && !json_is_object(params))
            return perr(pe, 400, "invalid_type", "'parameters' must be an object");
        if (read_options(params && json_is_object(params) ? params : o, openai, r, pe)) return -1;
        return read_similarity(in, max_inputs, r, pe);
    }
    if (read_options(o, openai, r, pe)) return -1;
    return read_inputs(in, field, max_inputs, r, pe);
}

const char *gw_rerank_text(json_t *texts, int i, size_t *len) {
    json_t *t = json_array_get(texts, (size_t)i);
    if (json_is_object(t)) t = json_object_get(t, "text");
    *len = json_string_length(t);
    return json_string_value(t);
}

int gw_parse_rerank(const char *body, size_t len, int cohere, int max_inputs, int default_truncate, json_t **doc,
                    gw_rerank_req *r, gw_perr *pe) {
    memset(r, 0, sizeof *r);
    r->truncate = default_truncate;
    r->return_text = cohere;   /* Cohere / Jina / vLLM return the documents unless told not to */
    json_t *o = load_object(body, len, doc, pe);
    if (!o) return -1;
    const char *dir = NULL;
    const char *model = NULL, *field = cohere ? "documents" : "texts";
    if (read_string(o, "query", &r->query, pe) || read_string(o, "truncation_direction", &dir, pe) ||
        read_string(o, "model", &model, pe) ||
        (!cohere && read_bool(o, "raw_scores", &r->raw_scores, pe)) ||
        read_bool(o, cohere ? "return_documents" : "return_text", &r->return_text, pe) ||
        read_bool(o, "truncate", &r->truncate, pe))
        return -1;
    if (!r->query) return perr(pe, 422, "missing_input", "'query' is required (a string)");
    r->query_len = json_string_length(json_object_get(o, "query"));
    if (dir && strcasecmp(dir, "left") && strcasecmp(dir, "right"))
        return perr(pe, 422, "invalid_truncation_direction", "'truncation_direction' must be \"left\" or \"right\"");
    r->dir = dir && !strcasecmp(dir, "left") ? TOK_TRUNC_LEFT : TOK_TRUNC_RIGHT;
    r->texts = json_object_get(o, field);
    if (!r->texts || json_is_null(r->texts)) return perr(pe, 422, "missing_input", "'%s' is required (a list of strings)", field);
    if (!json_is_array(r->texts)) return perr(pe, 400, "invalid_type", "'%s' must be an array of strings", field);
    size_t n = json_array_size(r->texts);
    if (n == 0) return perr(pe, 422, "empty_input", "'%s' is an empty array", field);
    if (n > (size_t)max_inputs)
        return perr(pe, 422, "too_many_inputs", "'%s' has %zu texts, more than the limit of %d (--max-client-batch)",
                    field, n, max_inputs);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(r->texts, i);
        if (cohere && json_is_object(t)) t = json_object_get(t, "text");
        if (!json_is_string(t))
            return perr(pe, 400, "invalid_type", cohere ? "documents[%zu] is neither a string nor {\"text\": string}"
                                                        : "texts[%zu] is not a string", i);
    }
    r->n = (int)n;
    r->top_n = r->n;
    json_t *tn = cohere ? json_object_get(o, "top_n") : NULL;
    if (tn && !json_is_null(tn)) {
        if (!json_is_integer(tn)) return perr(pe, 400, "invalid_type", "'top_n' must be an integer");
        if (json_integer_value(tn) < 1) return perr(pe, 422, "invalid_top_n", "'top_n' must be at least 1");
        if (json_integer_value(tn) < r->n) r->top_n = (int)json_integer_value(tn);
    }
    return 0;
}

/* A /predict input: a string or [string, string]. */
static int predict_is_pair(json_t *t) {
    return json_is_array(t) && json_array_size(t) == 2 && json_is_string(json_array_get(t, 0)) &&
           json_is_string(json_array_get(t, 1));
}

void gw_predict_input(const gw_predict_req *r, int i, const char **a, size_t *alen, const char **b, size_t *blen) {
    json_t *t = r->batch ? json_array_get(r->inputs, (size_t)i) : r->inputs;
    json_t *ta = json_is_array(t) ? json_array_get(t, 0) : t, *tb = json_is_array(t) ? json_array_get(t, 1) : NULL;
    *a = json_string_value(ta);
    *alen = json_string_length(ta);
    *b = tb ? json_string_value(tb) : NULL;
    *blen = tb ? json_string_length(tb) : 0;
}

int gw_parse_predict(const char *body, size_t len, int vllm, int max_inputs, int default_truncate, json_t **doc,
                     gw_predict_req *r, gw_perr *pe) {
    memset(r, 0, sizeof *r);
    r->truncate = default_truncate;
    json_t *o = load_object(body, len, doc, pe);
    if (!o) return -1;
    const char *dir = NULL, *model = NULL, *field = vllm ? "input" : "inputs";
    if (read_string(o, "truncation_direction", &dir, pe) || read_string(o, "model", &model, pe) ||
        (!vllm && read_bool(o, "raw_scores", &r->raw_scores, pe)) || read_bool(o, "truncate", &r->truncate, pe))
        return -1;
    if (dir && strcasecmp(dir, "left") && strcasecmp(dir, "right"))
        return perr(pe, 422, "invalid_truncation_direction", "'truncation_direction' must be \"left\" or \"right\"");
    r->dir = dir && !strcasecmp(dir, "left") ? TOK_TRUNC_LEFT : TOK_TRUNC_RIGHT;
    json_t *in = json_object_get(o, field);
    if (!in || json_is_null(in)) return perr(pe, 422, "missing_input", "'%s' is required", field);
    r->inputs = in;
    if (json_is_string(in) || (!vllm && predict_is_pair(in))) {
        r->n = 1;
        return 0;
    }
    const char *want = vllm ? "a string or a list of strings" : "a text, a pair [text, text], or a list of them";
    if (!json_is_array(in)) return perr(pe, 400, "invalid_type", "'%s' must be %s", field, want);
    size_t n = json_array_size(in);
    if (n == 0) return perr(pe, 422, "empty_input", "'%s' is an empty array", field);
    if (n > (size_t)max_inputs)
        return perr(pe, 422, "too_many_inputs", "'%s' has %zu inputs, more than the limit of %d (--max-client-batch)",
                    field, n, max_inputs);
    for (size_t i = 0; i < n; i++) {
        json_t *t = json_array_get(in, i);
        if (!json_is_string(t) && (vllm || !predict_is_pair(t)))
            return perr(pe, 400, "invalid_type", "%s[%zu] is not %s", field, i,
                        vllm ? "a string" : "a text or a pair [text, text]");
    }
    r->n = (int)n;
    r->batch = 1;
    return 0;
}

const char *gw_score_text(const gw_score_req *r, int which, int i, size_t *len) {
    json_t *f = which ? r->text_2 : r->text_1;
    json_t *t = json_is_array(f) ? json_array_get(f, (size_t)i) : f;
    *len = json_string_length(t);
    return json_string_value(t);
}

/* text_1 / text_2: a string or a non-empty list of strings; its count. */
static int score_field(json_t *o, const char *k, json_t **out, int *n, gw_perr *pe) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return perr(pe, 422, "missing_input", "'%s' is required (a string or a list of strings)", k);
    *out = v;
    if (json_is_string(v)) {
        *n = 1;
        return 0;
    }
    if (!json_is_array(v)) return perr(pe, 400, "invalid_type", "'%s' must be a string or a list of strings", k);
    if (json_array_size(v) == 0) return perr(pe, 422, "empty_input", "'%s' is an empty array", k);
    if (json_array_size(v) > (size_t)1 << 30) return perr(pe, 422, "too_many_inputs", "'%s' is too long", k);
    for (size_t i = 0; i < json_array_size(v); i++)
        if (!json_is_string(json_array_get(v, i))) return perr(pe, 400, "invalid_type", "%s[%zu] is not a string", k, i);
    *n = (int)json_array_size(v);
    return 0;
}

int gw_parse_score(const char *body, size_t len, int max_inputs, int default_truncate, json_t **doc, gw_score_req *r,
                   gw_perr *pe) {
    memset(r, 0, sizeof *r);
    r->truncate = default_truncate;
    json_t *o = load_object(body, len, doc, pe);
    if (!o) return -1;
    const char *dir = NULL, *model = NULL;
    int n2 = 0;
    if (read_string(o, "truncation_direction", &dir, pe) || read_string(o, "model", &model, pe) ||
        read_bool(o, "truncate", &r->truncate, pe) || score_field(o, "text_1", &r->text_1, &r->n1, pe) ||
        score_field(o, "text_2", &r->text_2, &n2, pe))
        return -1;
    if (dir && strcasecmp(dir, "left") && strcasecmp(dir, "right"))
        return perr(pe, 422, "invalid_truncation_direction", "'truncation_direction' must be \"left\" or \"right\"");
    r->dir = dir && !strcasecmp(dir, "left") ? TOK_TRUNC_LEFT : TOK_TRUNC_RIGHT;
    if (r->n1 != 1 && r->n1 != n2)
        return perr(pe, 422, "invalid_input", "'text_1' has %d texts and 'text_2' %d: give one text_1, or as many as "
                    "text_2", r->n1, n2);
    if (n2 > max_inputs)
        return perr(pe, 422, "too_many_inputs", "%d pairs, more than the limit of %d (--max-client-batch)", n2,
                    max_inputs);
    r->n = n2;
    return 0;
}

void gw_embed_req_free(gw_embed_req *r) {
    free(r->inputs);
    r->inputs = NULL;
}

/* One list of /decode ids: integers inside the vocabulary. */
static int check_decode_ids(json_t *a, size_t idx, int vocab, gw_perr *pe) {
    if (!json_is_array(a))
        return perr(pe, 400, "invalid_type", "'ids' must be an array of token ids or an array of arrays of token ids");
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v)) return perr(pe, 400, "invalid_type", "ids[%zu]: token ids must all be integers", idx);
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= vocab)
            return perr(pe, 422, "token_out_of_vocabulary", "ids[%zu]: token id %lld is outside the vocabulary [0, %d)",
                        idx, (long long)id, vocab);
    }
    return 0;
}

int gw_parse_decode(const char *body, size_t len, int max_inputs, int vocab, json_t **doc, gw_decode_req *r,
                    gw_perr *pe) {
    memset(r, 0, sizeof *r);
    json_t *o = load_object(body, len, doc, pe);
    if (!o) return -1;
    json_t *sk = json_object_get(o, "skip_special_tokens");
    if (sk && !json_is_null(sk) && !json_is_boolean(sk))
        return perr(pe, 400, "invalid_type", "'skip_special_tokens' must be true or false");
    r->skip_special = !sk || json_is_null(sk) || json_is_true(sk);
    r->ids = json_object_get(o, "ids");
    if (!r->ids || json_is_null(r->ids)) return perr(pe, 422, "missing_input", "'ids' is required");
    if (!json_is_array(r->ids))
        return perr(pe, 400, "invalid_type", "'ids' must be an array of token ids or an array of arrays of token ids");
    if (json_array_size(r->ids) == 0) return perr(pe, 422, "empty_input", "'ids' is an empty array");
    r->batch = json_is_array(json_array_get(r->ids, 0));
    r->n = r->batch ? json_array_size(r->ids) : 1;
    if (r->n > (size_t)max_inputs)
        return perr(pe, 422, "too_many_inputs", "'ids' has %zu inputs, more than the limit of %d (--max-client-batch)",
                    r->n, max_inputs);
    for (size_t i = 0; i < r->n; i++)
        if (check_decode_ids(gw_decode_list(r, i), i, vocab, pe)) return -1;
    return 0;
}

json_t *gw_decode_list(const gw_decode_req *r, size_t i) { return r->batch ? json_array_get(r->ids, i) : r->ids; }

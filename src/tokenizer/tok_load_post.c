/* tok_load_post: the "post_processor" section, every kind turned into a
 * template (tok_post.c emits templates only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_load_util.h"

static int set_special(tok_tpl_item *it, int32_t id, int type_id) {
    it->seq = 0;
    it->type_id = type_id;
    it->ids = malloc(sizeof *it->ids);
    if (!it->ids) return -1;
    it->ids[0] = id;
    it->n_ids = 1;
    return 0;
}

/* "sep": ["[SEP]", 102] */
static int pair_id(json_t *j, const char *key, int32_t *id, const char *path, posy_err *err) {
    json_t *v = json_object_get(j, key);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(json_array_get(v, 1)))
        return posy_err_set(err, POSY_E_INVALID, "%s.%s: expected [token, id]", path, key);
    long long x = json_integer_value(json_array_get(v, 1));
    if (x < 0 || x > INT32_MAX) return posy_err_set(err, POSY_E_INVALID, "%s.%s: id out of range", path, key);
    *id = (int32_t)x;
    return 0;
}

/* Bert: [CLS] A [SEP] / [CLS] A [SEP] B [SEP] with B's part type 1.
 * Roberta: <s> A </s> / <s> A </s> </s> B </s> with B's part type 1. */
static int load_cls_sep(json_t *j, tok_post *p, int roberta, const char *path, posy_err *err) {
    int32_t cls, sep;
    if (pair_id(j, "cls", &cls, path, err) || pair_id(j, "sep", &sep, path, err)) return err->code;
    p->single = calloc(3, sizeof *p->single);
    p->pair = calloc(6, sizeof *p->pair);
    if (!p->single || !p->pair) return posy_err_set(err, POSY_E_NOMEM, "oom");
    p->n_single = 3;
    if (set_special(&p->single[0], cls, 0) || set_special(&p->single[2], sep, 0)) return posy_err_set(err, POSY_E_NOMEM, "oom");
    p->single[1].seq = 1;
    int k = 0, bt = roberta ? 0 : 1;
    if (set_special(&p->pair[k++], cls, 0)) return posy_err_set(err, POSY_E_NOMEM, "oom");
    p->pair[k].seq = 1; p->pair[k++].type_id = 0;
    if (set_special(&p->pair[k++], sep, 0)) return posy_err_set(err, POSY_E_NOMEM, "oom");
    if (roberta && set_special(&p->pair[k++], sep, bt)) return posy_err_set(err, POSY_E_NOMEM, "oom");
    p->pair[k].seq = 2; p->pair[k++].type_id = bt;
    if (set_special(&p->pair[k++], sep, bt)) return posy_err_set(err, POSY_E_NOMEM, "oom");
    p->n_pair = k;
    if (roberta) {
        if (tok_j_bool(j, "trim_offsets", 1, &p->trim_offsets, path, err)) return err->code;
        if (tok_j_bool(j, "add_prefix_space", 1, &p->add_prefix_space, path, err)) return err->code;
    }
    return 0;
}

static int load_tpl_items(json_t *arr, json_t *specials, tok_tpl_item **out, int *n, const char *path,
                          posy_err *err) {
    if (!json_is_array(arr)) return posy_err_set(err, POSY_E_INVALID, "%s: expected an array", path);
    *n = (int)json_array_size(arr);
    *out = calloc((size_t)*n + 1, sizeof **out);
    if (!*out) return posy_err_set(err, POSY_E_NOMEM, "oom");
    for (int i = 0; i < *n; i++) {
        json_t *e = json_array_get(arr, (size_t)i), *sp = json_object_get(e, "SpecialToken"),
               *sq = json_object_get(e, "Sequence");
        json_t *body = sp ? sp : sq;
        long long ty;
        const char *id;
        char sub[256];
        snprintf(sub, sizeof sub, "%s[%d]", path, i);
        if (!json_is_object(body))
            return posy_err_set(err, POSY_E_INVALID, "%s: expected {\"SpecialToken\": ...} or {\"Sequence\": ...}", sub);
        if (tok_j_str(body, "id", 1, &id, NULL, sub, err) || tok_j_int(body, "type_id", 0, 0, &ty, sub, err))
            return err->code;
        if (ty < 0 || ty > 255) return posy_err_set(err, POSY_E_INVALID, "%s.type_id: out of range", sub);
        (*out)[i].type_id = (int)ty;
        if (sq) {
            if (!strcmp(id, "A")) (*out)[i].seq = 1;
            else if (!strcmp(id, "B")) (*out)[i].seq = 2;
            else return posy_err_set(err, POSY_E_INVALID, "%s.id: expected \"A\" or \"B\"", sub);
            continue;
        }
        json_t *st = json_object_get(specials, id), *ids = json_object_get(st, "ids");
        if (!json_is_array(ids))
            return posy_err_set(err, POSY_E_INVALID, "%s: special token '%.40s' missing from special_tokens", sub, id);
        size_t m = json_array_size(ids);
        (*out)[i].ids = calloc(m + 1, sizeof *(*out)[i].ids);
        if (!(*out)[i].ids) return posy_err_set(err, POSY_E_NOMEM, "oom");
        for (size_t k = 0; k < m; k++) {
            json_t *x = json_array_get(ids, k);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
                return posy_err_set(err, POSY_E_INVALID, "%s: special_tokens['%.40s'].ids[%zu] is not a valid id", sub, id, k);
            (*out)[i].ids[k] = (int32_t)json_integer_value(x);
        }
        (*out)[i].n_ids = (int)m;
    }
    return 0;
}

int tok_load_post(json_t *j, const tok_tokenizer *t, tok_post *p, const char *path, int depth, posy_err *err) {
    (void)t;
    memset(p, 0, sizeof *p);
    if (!j || json_is_null(j)) return 0;
    if (depth > TOK_MAX_DEPTH) return posy_err_set(err, POSY_E_INVALID, "%s: nested too deeply", path);
    if (!json_is_object(j)) return posy_err_set(err, POSY_E_INVALID, "%s: expected an object", path);
    const char *type;
    if (tok_j_str(j, "type", 1, &type, NULL, path, err)) return err->code;
    char sub[256];
    if (!strcmp(type, "TemplateProcessing")) {
        p->type = TOK_POST_TEMPLATE;
        json_t *sp = json_object_get(j, "special_tokens");
        snprintf(sub, sizeof sub, "%s.single", path);
        if (load_tpl_items(json_object_get(j, "single"), sp, &p->single, &p->n_single, sub, err)) return err->code;
        snprintf(sub, sizeof sub, "%s.pair", path);
        return load_tpl_items(json_object_get(j, "pair"), sp, &p->pair, &p->n_pair, sub, err);
    }
    if (!strcmp(type, "BertProcessing")) { p->type = TOK_POST_BERT; return load_cls_sep(j, p, 0, path, err); }
    if (!strcmp(type, "RobertaProcessing")) { p->type = TOK_POST_ROBERTA; return load_cls_sep(j, p, 1, path, err); }
    if (!strcmp(type, "ByteLevel")) {
        p->type = TOK_POST_BYTELEVEL;
        if (tok_j_bool(j, "add_prefix_space", 1, &p->add_prefix_space, path, err)) return err->code;
        return tok_j_bool(j, "trim_offsets", 1, &p->trim_offsets, path, err);
    }
    if (!strcmp(type, "Sequence")) {
        p->type = TOK_POST_SEQUENCE;
        json_t *arr = json_object_get(j, "processors");
        if (!json_is_array(arr)) return posy_err_set(err, POSY_E_INVALID, "%s.processors: expected an array", path);
        p->n_items = (int)json_array_size(arr);
        p->items = calloc((size_t)p->n_items + 1, sizeof *p->items);
        if (!p->items) return posy_err_set(err, POSY_E_NOMEM, "oom");
        for (int i = 0; i < p->n_items; i++) {
            snprintf(sub, sizeof sub, "%s.processors[%d]", path, i);
            if (tok_load_post(json_array_get(arr, (size_t)i), t, &p->items[i], sub, depth + 1, err)) return err->code;
        }
        return 0;
    }
    return posy_err_set(err, POSY_E_UNSUPPORTED, "%s.type: post-processor '%s' is not supported", path, type);
}

/* tok_load: tokenizer.json -> tok_tokenizer, and the small vocabulary API.
 *
 * Start-up regime: any problem is an error naming the field; nothing here
 * may crash on a hostile file (sizes and ids are checked before use, and
 * nesting depth is bounded).  The loaded tokenizer is never written again.
 */
#include <stdlib.h>
#include <string.h>

#include "posy_file.h"
#include "tok_load_util.h"

#define TOK_MAX_FILE (512u << 20)

static int load_added(json_t *arr, tok_tokenizer *t, posy_err *err) {
    if (!arr || json_is_null(arr)) return 0;
    if (!json_is_array(arr)) return posy_err_set(err, POSY_E_INVALID, "added_tokens: expected an array");
    size_t n = json_array_size(arr);
    tok_added_set *sets[2] = {&t->added, &t->added_norm};
    for (int s = 0; s < 2; s++) {
        sets[s]->tok = calloc(n + 1, sizeof *sets[s]->tok);
        if (!sets[s]->tok) return posy_err_set(err, POSY_E_NOMEM, "added_tokens: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!json_is_object(o)) return posy_err_set(err, POSY_E_INVALID, "%s: expected an object", path);
        tok_added_token a = {0};
        long long id;
        const char *c;
        if (tok_j_int(o, "id", 1, 0, &id, path, err) || tok_j_str(o, "content", 1, &c, &a.len, path, err) ||
            tok_j_bool(o, "special", 0, &a.special, path, err) ||
            tok_j_bool(o, "normalized", !a.special, &a.normalized, path, err) ||
            tok_j_bool(o, "lstrip", 0, &a.lstrip, path, err) || tok_j_bool(o, "rstrip", 0, &a.rstrip, path, err) ||
            tok_j_bool(o, "single_word", 0, &a.single_word, path, err))
            return err->code;
        if (id < 0 || id >= INT32_MAX / 2) return posy_err_set(err, POSY_E_INVALID, "%s.id: out of range", path);
        a.id = (int32_t)id;
        a.content = tok_strndup(c, a.len);
        a.orig = tok_strndup(c, a.len);
        a.orig_len = a.len;
        if (!a.content || !a.orig) { free(a.content); free(a.orig); return posy_err_set(err, POSY_E_NOMEM, "oom"); }
        tok_added_set *set = a.normalized && t->normalizer ? &t->added_norm : &t->added;
        set->tok[set->n++] = a;
    }
    return 0;
}

/* Normalized added tokens are matched in normalized text, so their
 * content is normalized with the tokenizer's normalizer first. */
static int normalize_added(tok_tokenizer *t, posy_err *err) {
    tok_buf b = {0};
    tok_norm_scratch ns = {0};
    int rc = 0;
    for (int i = 0; i < t->added_norm.n && !rc; i++) {
        tok_added_token *a = &t->added_norm.tok[i];
        if (tok_utf8_valid_prefix(a->content, a->len) != a->len) {
            rc = posy_err_set(err, POSY_E_INVALID, "added_tokens: content of id %d is not UTF-8", a->id);
            break;
        }
        b.len = 0;
        if (tok_buf_reserve(&b, a->len + 1)) { rc = POSY_E_NOMEM; break; }
        memcpy(b.b, a->content, a->len);
        for (size_t k = 0; k < a->len; k++) b.al[k] = (tok_span){0, 0};
        b.len = a->len;
        rc = tok_norm_apply(t->normalizer, &b, &ns);
        if (rc) { posy_err_set(err, rc, "added_tokens: normalizing id %d failed", a->id); break; }
        char *c = tok_strndup(b.b, b.len);
        if (!c) { rc = posy_err_set(err, POSY_E_NOMEM, "oom"); break; }
        free(a->content);
        a->content = c;
        a->len = b.len;
    }
    tok_buf_free(&b);
    tok_buf_free(&ns.tmp);
    free(ns.cps.p);
    return rc;
}

/* id -> token over model and added tokens (added first, as HF looks up). */
static int build_all(tok_tokenizer *t, posy_err *err) {
    int32_t n = t->model.vocab.n_ids;
    tok_added_set *sets[2] = {&t->added, &t->added_norm};
    size_t count = (size_t)t->model.vocab.count;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < sets[s]->n; i++) {
            if (sets[s]->tok[i].id >= n) n = sets[s]->tok[i].id + 1;
            count++;
        }
    if (n > (int32_t)count * 4 + 4096) return posy_err_set(err, POSY_E_INVALID, "added_tokens: ids out of range");
    if (tok_vocab_init(&t->all, n, count)) return posy_err_set(err, POSY_E_NOMEM, "oom");
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < sets[s]->n; i++) {
            const tok_added_token *a = &sets[s]->tok[i];
            /* HF reports a normalized added token by its normalized content */
            if (tok_vocab_add(&t->all, a->id, a->content, a->len) < 0) return posy_err_set(err, POSY_E_NOMEM, "oom");
        }
    for (int32_t id = 0; id < t->model.vocab.n_ids; id++) {
        uint32_t l;
        const char *s = tok_vocab_str(&t->model.vocab, id, &l);
        if (s && t->all.str_off[id] == UINT32_MAX && tok_vocab_add(&t->all, id, s, l) < 0)
            return posy_err_set(err, POSY_E_NOMEM, "oom");
    }
    return 0;
}

static int load_root(json_t *root, tok_tokenizer *t, posy_err *err) {
    if (!json_is_object(root)) return posy_err_set(err, POSY_E_INVALID, "top level: expected a JSON object");
    if (tok_load_model(json_object_get(root, "model"), &t->model, err)) return err->code;
    json_t *n = json_object_get(root, "normalizer");
    if (n && !json_is_null(n)) {
        t->normalizer = calloc(1, sizeof *t->normalizer);
        if (!t->normalizer) return posy_err_set(err, POSY_E_NOMEM, "oom");
        if (tok_load_normalizer(n, t->normalizer, "normalizer", 0, err)) return err->code;
    }
    json_t *p = json_object_get(root, "pre_tokenizer");
    if (p && !json_is_null(p)) {
        t->pretok = calloc(1, sizeof *t->pretok);
        if (!t->pretok) return posy_err_set(err, POSY_E_NOMEM, "oom");
        if (tok_load_pretok(p, t->pretok, "pre_tokenizer", 0, err)) return err->code;
    }
    if (tok_load_post(json_object_get(root, "post_processor"), t, &t->post, "post_processor", 0, err)) return err->code;
    if (load_added(json_object_get(root, "added_tokens"), t, err)) return err->code;
    if (t->normalizer && normalize_added(t, err)) return err->code;
    if (tok_added_build(&t->added, err) || tok_added_build(&t->added_norm, err)) return err->code;
    if (build_all(t, err)) return err->code;
    return tok_load_decoder(json_object_get(root, "decoder"), t, err);
}

/* jansson refuses "\u0000" inside object keys, and a trained vocab can
 * hold the NUL token.  Such files are parsed again with every \u0000
 * escape replaced by \uFDD0 (a noncharacter), which tok_load_vocab_object
 * maps back in vocab keys. */
static json_t *load_with_nul_keys(const char *json, size_t len, json_error_t *je) {
    char *copy = malloc(len + 1);
    if (!copy) return NULL;
    memcpy(copy, json, len);
    copy[len] = '\0';
    for (size_t i = 0; i + 6 <= len; i++) {
        if (copy[i] != '\\') continue;
        if (!memcmp(copy + i, "\\u0000", 6)) memcpy(copy + i + 2, "FDD0", 4);
        i++; /* skip the escaped char, so "\\\\u0000" stays as it is */
    }
    json_t *root = json_loadb(copy, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, je);
    free(copy);
    return root;
}

tok_tokenizer *tok_load_json(const char *json, size_t len, posy_err *err) {
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!root && strstr(je.text, "NUL byte in object key")) root = load_with_nul_keys(json, len, &je);
    if (!root) {
        posy_err_set(err, POSY_E_INVALID, "not valid JSON at line %d column %d: %s", je.line, je.column, je.text);
        return NULL;
    }
    tok_tokenizer *t = calloc(1, sizeof *t);
    int rc = t ? load_root(root, t, err) : posy_err_set(err, POSY_E_NOMEM, "out of memory");
    json_decref(root);
    if (rc) {
        tok_free(t);
        return NULL;
    }
    return t;
}

tok_tokenizer *tok_load_file(const char *path, posy_err *err) {
    size_t size;
    char *data = posy_file_read(path, TOK_MAX_FILE, &size, err);
    if (!data) return NULL;
    tok_tokenizer *t = tok_load_json(data, size, err);
    free(data);
    if (!t) posy_err_wrap(err, "%s", path);
    return t;
}

void tok_model_free(tok_model *m);
void tok_decoder_free(void *d);

void tok_free(tok_tokenizer *t) {
    if (!t) return;
    tok_model_free(&t->model);
    if (t->normalizer) { tok_norm_free(t->normalizer); free(t->normalizer); }
    if (t->pretok) { tok_pre_free(t->pretok); free(t->pretok); }
    tok_post_free(&t->post);
    tok_added_free(&t->added);
    tok_added_free(&t->added_norm);
    tok_vocab_free(&t->all);
    tok_decoder_free(t->decoder);
    free(t);
}

int tok_vocab_size(const tok_tokenizer *t) { return t->all.n_ids; }

const char *tok_id_to_token(const tok_tokenizer *t, int32_t id) { return tok_vocab_str(&t->all, id, NULL); }

int32_t tok_token_to_id(const tok_tokenizer *t, const char *token) {
    return tok_vocab_find(&t->all, token, strlen(token));
}

int tok_num_special_single(const tok_tokenizer *t) { return tok_post_added(&t->post, 0); }

const char *tok_model_type(const tok_tokenizer *t) {
    switch (t->model.kind) {
    case TOK_M_WORDPIECE: return "WordPiece";
    case TOK_M_BPE: return "BPE";
    case TOK_M_UNIGRAM: return "Unigram";
    case TOK_M_WORDLEVEL: return "WordLevel";
    }
    return "?";
}

/* tok_load_norm: tokenizer.json "normalizer" and "pre_tokenizer" sections. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_load_util.h"
#include "tok_norm_impl.h"
#include "tok_pretok_impl.h"
#include "tok_regex.h"

void *tok_precompiled_load(const char *b64, size_t len, const char *path, posy_err *err);

static int load_norm_seq(json_t *j, tok_normalizer *n, const char *path, int depth, posy_err *err) {
    json_t *arr = json_object_get(j, "normalizers");
    if (!json_is_array(arr)) return posy_err_set(err, POSY_E_INVALID, "%s.normalizers: expected an array", path);
    n->n_items = (int)json_array_size(arr);
    n->items = calloc((size_t)n->n_items + 1, sizeof *n->items);
    if (!n->items) return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    for (int i = 0; i < n->n_items; i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s.normalizers[%d]", path, i);
        int rc = tok_load_normalizer(json_array_get(arr, (size_t)i), &n->items[i], sub, depth + 1, err);
        if (rc) return rc;
    }
    return 0;
}

int tok_load_normalizer(json_t *j, tok_normalizer *n, const char *path, int depth, posy_err *err) {
    memset(n, 0, sizeof *n);
    if (depth > TOK_MAX_DEPTH) return posy_err_set(err, POSY_E_INVALID, "%s: nested too deeply", path);
    const char *type;
    if (!json_is_object(j)) return posy_err_set(err, POSY_E_INVALID, "%s: expected an object", path);
    if (tok_j_str(j, "type", 1, &type, NULL, path, err)) return err->code;
    int rc = 0;
    if (!strcmp(type, "BertNormalizer")) {
        n->type = TOK_N_BERT;
        int sa_null = !json_object_get(j, "strip_accents") || json_is_null(json_object_get(j, "strip_accents"));
        rc = tok_j_bool(j, "clean_text", 1, &n->clean_text, path, err);
        if (!rc) rc = tok_j_bool(j, "handle_chinese_chars", 1, &n->chinese, path, err);
        if (!rc) rc = tok_j_bool(j, "lowercase", 1, &n->lowercase, path, err);
        if (!rc) rc = tok_j_bool(j, "strip_accents", 0, &n->strip_accents, path, err);
        if (!rc && sa_null) n->strip_accents = n->lowercase;
    } else if (!strcmp(type, "NFD")) n->type = TOK_N_NFD;
    else if (!strcmp(type, "NFKD")) n->type = TOK_N_NFKD;
    else if (!strcmp(type, "NFC")) n->type = TOK_N_NFC;
    else if (!strcmp(type, "NFKC")) n->type = TOK_N_NFKC;
    else if (!strcmp(type, "Lowercase")) n->type = TOK_N_LOWERCASE;
    else if (!strcmp(type, "StripAccents")) n->type = TOK_N_STRIP_ACCENTS;
    else if (!strcmp(type, "Strip")) {
        n->type = TOK_N_STRIP;
        rc = tok_j_bool(j, "strip_left", 1, &n->left, path, err);
        if (!rc) rc = tok_j_bool(j, "strip_right", 1, &n->right, path, err);
    } else if (!strcmp(type, "Replace")) {
        n->type = TOK_N_REPLACE;
        const char *c;
        rc = tok_j_pattern(j, path, &n->pattern, &n->pattern_len, &n->regex, err);
        if (!rc) rc = tok_j_str(j, "content", 1, &c, &n->content_len, path, err);
        if (!rc && !(n->content = tok_strndup(c, n->content_len))) rc = posy_err_set(err, POSY_E_NOMEM, "oom");
    } else if (!strcmp(type, "Prepend")) {
        n->type = TOK_N_PREPEND;
        const char *c;
        rc = tok_j_str(j, "prepend", 1, &c, &n->content_len, path, err);
        if (!rc && !(n->content = tok_strndup(c, n->content_len))) rc = posy_err_set(err, POSY_E_NOMEM, "oom");
    } else if (!strcmp(type, "Precompiled")) {
        n->type = TOK_N_PRECOMPILED;
        const char *c;
        size_t cl;
        rc = tok_j_str(j, "precompiled_charsmap", 0, &c, &cl, path, err);
        if (!rc && c && cl) {
            n->charsmap = tok_precompiled_load(c, cl, path, err);
            if (!n->charsmap) rc = err->code;
        }
    } else if (!strcmp(type, "Sequence")) {
        n->type = TOK_N_SEQUENCE;
        rc = load_norm_seq(j, n, path, depth, err);
    } else {
        rc = posy_err_set(err, POSY_E_UNSUPPORTED, "%s.type: normalizer '%s' is not supported", path, type);
    }
    return rc;
}

static int behavior_of(json_t *j, const char *path, tok_split_behavior def, tok_split_behavior *out,
                       posy_err *err) {
    const char *b;
    if (tok_j_str(j, "behavior", 0, &b, NULL, path, err)) return err->code;
    *out = def;
    if (!b) return 0;
    if (!strcmp(b, "Removed")) *out = TOK_SPLIT_REMOVED;
    else if (!strcmp(b, "Isolated")) *out = TOK_SPLIT_ISOLATED;
    else if (!strcmp(b, "MergedWithPrevious")) *out = TOK_SPLIT_MERGED_PREV;
    else if (!strcmp(b, "MergedWithNext")) *out = TOK_SPLIT_MERGED_NEXT;
    else if (!strcmp(b, "Contiguous")) *out = TOK_SPLIT_CONTIGUOUS;
    else return posy_err_set(err, POSY_E_INVALID, "%s.behavior: unknown value '%s'", path, b);
    return 0;
}

static int load_metaspace(json_t *j, tok_pretok *p, const char *path, posy_err *err) {
    const char *rep, *scheme;
    size_t rl;
    p->type = TOK_P_METASPACE;
    if (tok_j_str(j, "replacement", 1, &rep, &rl, path, err)) return err->code;
    uint32_t cp;
    if (rl == 0 || tok_utf8_decode((const uint8_t *)rep, rl, &cp) != (int)rl)
        return posy_err_set(err, POSY_E_INVALID, "%s.replacement: expected one character", path);
    p->replacement = cp;
    if (tok_j_str(j, "prepend_scheme", 0, &scheme, NULL, path, err)) return err->code;
    int aps;
    if (tok_j_bool(j, "add_prefix_space", 1, &aps, path, err)) return err->code;
    p->prepend_scheme = aps ? 0 : 2;
    if (scheme) {
        if (!strcmp(scheme, "always")) p->prepend_scheme = 0;
        else if (!strcmp(scheme, "first")) p->prepend_scheme = 1;
        else if (!strcmp(scheme, "never")) p->prepend_scheme = 2;
        else return posy_err_set(err, POSY_E_INVALID, "%s.prepend_scheme: unknown value '%s'", path, scheme);
    }
    return tok_j_bool(j, "split", 1, &p->split, path, err);
}

static int load_pre_seq(json_t *j, tok_pretok *p, const char *path, int depth, posy_err *err) {
    json_t *arr = json_object_get(j, "pretokenizers");
    if (!json_is_array(arr)) return posy_err_set(err, POSY_E_INVALID, "%s.pretokenizers: expected an array", path);
    p->n_items = (int)json_array_size(arr);
    p->items = calloc((size_t)p->n_items + 1, sizeof *p->items);
    if (!p->items) return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    for (int i = 0; i < p->n_items; i++) {
        char sub[256];
        snprintf(sub, sizeof sub, "%s.pretokenizers[%d]", path, i);
        int rc = tok_load_pretok(json_array_get(arr, (size_t)i), &p->items[i], sub, depth + 1, err);
        if (rc) return rc;
    }
    return 0;
}

int tok_load_pretok(json_t *j, tok_pretok *p, const char *path, int depth, posy_err *err) {
    memset(p, 0, sizeof *p);
    if (depth > TOK_MAX_DEPTH) return posy_err_set(err, POSY_E_INVALID, "%s: nested too deeply", path);
    const char *type;
    if (!json_is_object(j)) return posy_err_set(err, POSY_E_INVALID, "%s: expected an object", path);
    if (tok_j_str(j, "type", 1, &type, NULL, path, err)) return err->code;
    int rc = 0;
    if (!strcmp(type, "BertPreTokenizer")) p->type = TOK_P_BERT;
    else if (!strcmp(type, "WhitespaceSplit")) p->type = TOK_P_WHITESPACE_SPLIT;
    else if (!strcmp(type, "Whitespace")) {
        p->type = TOK_P_WHITESPACE;
        p->regex = tok_regex_compile_whitespace(path, err);
        if (!p->regex) rc = err->code;
    } else if (!strcmp(type, "Punctuation")) {
        p->type = TOK_P_PUNCTUATION;
        rc = behavior_of(j, path, TOK_SPLIT_ISOLATED, &p->behavior, err);
    } else if (!strcmp(type, "Digits")) {
        p->type = TOK_P_DIGITS;
        rc = tok_j_bool(j, "individual_digits", 0, &p->individual_digits, path, err);
    } else if (!strcmp(type, "Split")) {
        p->type = TOK_P_SPLIT;
        rc = tok_j_pattern(j, path, &p->pattern, &p->pattern_len, &p->regex, err);
        if (!rc) rc = behavior_of(j, path, TOK_SPLIT_ISOLATED, &p->behavior, err);
        if (!rc) rc = tok_j_bool(j, "invert", 0, &p->invert, path, err);
    } else if (!strcmp(type, "CharDelimiterSplit")) {
        const char *d;
        size_t dl;
        p->type = TOK_P_SPLIT;
        p->behavior = TOK_SPLIT_REMOVED;
        rc = tok_j_str(j, "delimiter", 1, &d, &dl, path, err);
        if (!rc && !(p->pattern = tok_strndup(d, dl))) rc = posy_err_set(err, POSY_E_NOMEM, "oom");
        p->pattern_len = dl;
    } else if (!strcmp(type, "ByteLevel")) {
        p->type = TOK_P_BYTELEVEL;
        rc = tok_j_bool(j, "add_prefix_space", 1, &p->add_prefix_space, path, err);
        if (!rc) rc = tok_j_bool(j, "use_regex", 1, &p->use_regex, path, err);
        if (!rc) rc = tok_j_bool(j, "trim_offsets", 1, &p->trim_offsets, path, err);
        if (!rc && p->use_regex) {
            p->regex = tok_regex_compile(tok_gpt2_pattern, strlen(tok_gpt2_pattern), path, err);
            if (!p->regex) rc = err->code;
        }
    } else if (!strcmp(type, "Metaspace")) {
        rc = load_metaspace(j, p, path, err);
    } else if (!strcmp(type, "Sequence")) {
        p->type = TOK_P_SEQUENCE;
        rc = load_pre_seq(j, p, path, depth, err);
    } else {
        rc = posy_err_set(err, POSY_E_UNSUPPORTED, "%s.type: pre-tokenizer '%s' is not supported", path, type);
    }
    return rc;
}

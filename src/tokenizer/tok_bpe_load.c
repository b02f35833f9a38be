/* tok_bpe_load: the BPE "model" section: vocab, merges (either "a b"
 * strings or [a, b] arrays; rank = position) and options.  A merge naming a
 * token missing from the vocab is an error, as in HF. */
#include <stdlib.h>
#include <string.h>

#include "tok_bpe_impl.h"
#include "tok_load_util.h"

static int opt_str(json_t *j, const char *key, char **out, size_t *len, posy_err *err) {
    const char *s;
    if (tok_j_str(j, key, 0, &s, len, "model", err)) return err->code;
    if (!s || !*len) { *len = 0; return 0; }
    if (*len > 64) return posy_err_set(err, POSY_E_UNSUPPORTED, "model.%s: longer than 64 bytes", key);
    *out = tok_strndup(s, *len);
    return *out ? 0 : posy_err_set(err, POSY_E_NOMEM, "oom");
}

/* Split merge i into its two tokens. */
static int merge_parts(json_t *e, size_t i, const char **a, size_t *al, const char **b, size_t *bl, posy_err *err) {
    if (json_is_string(e)) {
        const char *s = json_string_value(e), *sp = strchr(s, ' ');
        if (!sp || strchr(sp + 1, ' '))
            return posy_err_set(err, POSY_E_INVALID, "model.merges[%zu]: expected \"left right\"", i);
        *a = s; *al = (size_t)(sp - s); *b = sp + 1; *bl = strlen(sp + 1);
        return 0;
    }
    if (json_is_array(e) && json_array_size(e) == 2 && json_is_string(json_array_get(e, 0)) &&
        json_is_string(json_array_get(e, 1))) {
        *a = json_string_value(json_array_get(e, 0)); *al = json_string_length(json_array_get(e, 0));
        *b = json_string_value(json_array_get(e, 1)); *bl = json_string_length(json_array_get(e, 1));
        return 0;
    }
    return posy_err_set(err, POSY_E_INVALID, "model.merges[%zu]: expected \"left right\" or [left, right]", i);
}

static int load_merges(json_t *arr, tok_model *m, tok_bpe_model *bm, posy_err *err) {
    size_t n = json_array_size(arr), cap = 16;
    while (cap < n * 2 + 2) cap <<= 1;
    bm->mask = (uint32_t)(cap - 1);
    bm->slots = malloc(cap * sizeof *bm->slots);
    if (!bm->slots) return posy_err_set(err, POSY_E_NOMEM, "model.merges: out of memory");
    for (size_t i = 0; i < cap; i++) bm->slots[i].key = UINT64_MAX;
    char *buf = NULL;
    size_t bufcap = 0;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const char *a = NULL, *b = NULL;
        size_t al = 0, bl = 0;
        if ((rc = merge_parts(json_array_get(arr, i), i, &a, &al, &b, &bl, err))) break;
        int32_t ia = tok_vocab_find(&m->vocab, a, al), ib = tok_vocab_find(&m->vocab, b, bl);
        size_t skip = bm->prefix_len && bl >= bm->prefix_len && !memcmp(b, bm->prefix, bm->prefix_len) ? bm->prefix_len : 0;
        if (!buf || al + bl > bufcap) {
            bufcap = (al + bl) * 2 + 16;
            char *nb = realloc(buf, bufcap);
            if (!nb) { rc = posy_err_set(err, POSY_E_NOMEM, "oom"); break; }
            buf = nb;
        }
        memcpy(buf, a, al);
        memcpy(buf + al, b + skip, bl - skip);
        int32_t in = tok_vocab_find(&m->vocab, buf, al + bl - skip);
        if (ia < 0 || ib < 0 || in < 0)
            rc = posy_err_set(err, POSY_E_INVALID, "model.merges[%zu]: token '%.*s' is not in model.vocab", i,
                              (int)(ia < 0 ? (al > 60 ? 60 : al) : ib < 0 ? (bl > 60 ? 60 : bl) : 60),
                              ia < 0 ? a : ib < 0 ? b : "(merged token)");
        else tok_bpe_merge_add(bm, ia, ib, (int32_t)i, in);
    }
    free(buf);
    return rc;
}

int tok_load_bpe(json_t *j, tok_model *m, posy_err *err) {
    m->kind = TOK_M_BPE;
    tok_bpe_model *bm = calloc(1, sizeof *bm);
    if (!bm) return posy_err_set(err, POSY_E_NOMEM, "oom");
    m->bpe = bm;
    json_t *v = json_object_get(j, "vocab"), *mg = json_object_get(j, "merges"), *dr = json_object_get(j, "dropout");
    if (!json_is_object(v)) return posy_err_set(err, POSY_E_INVALID, "model.vocab: expected an object of token -> id");
    if (mg && !json_is_array(mg)) return posy_err_set(err, POSY_E_INVALID, "model.merges: expected an array");
    if (dr && !json_is_null(dr) && !(json_is_number(dr) && json_number_value(dr) == 0.0))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "model.dropout: BPE dropout is not supported (random at encode time)");
    if (tok_load_vocab_object(v, &m->vocab, err)) return err->code;
    const char *unk;
    if (tok_j_str(j, "unk_token", 0, &unk, NULL, "model", err)) return err->code;
    if (unk) {
        m->unk_id = tok_vocab_find(&m->vocab, unk, strlen(unk));
        if (m->unk_id < 0) return posy_err_set(err, POSY_E_INVALID, "model.unk_token: '%.40s' is not in model.vocab", unk);
    }
    if (opt_str(j, "continuing_subword_prefix", &bm->prefix, &bm->prefix_len, err) ||
        opt_str(j, "end_of_word_suffix", &bm->suffix, &bm->suffix_len, err) ||
        tok_j_bool(j, "fuse_unk", 0, &bm->fuse_unk, "model", err) ||
        tok_j_bool(j, "byte_fallback", 0, &bm->byte_fallback, "model", err) ||
        tok_j_bool(j, "ignore_merges", 0, &bm->ignore_merges, "model", err))
        return err->code;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        bm->byte_ids[b] = tok_vocab_find(&m->vocab, name, 6);
    }
    for (uint32_t cp = 0; cp < 512; cp++) {
        char u[4];
        int l = tok_utf8_encode(cp, u);
        bm->small_ids[cp] = tok_vocab_find(&m->vocab, u, (size_t)l);
    }
    return load_merges(mg, m, bm, err);
}

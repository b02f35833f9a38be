/* tok_load_model: the "model" section of tokenizer.json. */
#include <stdlib.h>
#include <string.h>

#include "tok_load_util.h"

/* Ids must be dense-ish: a hostile file with id 2e9 must not make us
 * allocate gigabytes. */
static int check_id(long long id, size_t count, const char *path, const char *tok, posy_err *err) {
    if (id < 0 || id > (long long)count * 4 + 4096 || id >= INT32_MAX / 2)
        return posy_err_set(err, POSY_E_INVALID, "%s: id %lld of token '%.40s' is out of range for a vocab of %zu",
                            path, id, tok, count);
    return 0;
}

/* {"token": id, ...} */
int tok_load_vocab_object(json_t *v, tok_vocab *voc, posy_err *err) {
    size_t count = json_object_size(v);
    long long max_id = -1;
    const char *k;
    json_t *val;
    json_object_foreach(v, k, val) {
        if (!json_is_integer(val))
            return posy_err_set(err, POSY_E_INVALID, "model.vocab['%.40s']: expected an integer id", k);
        long long id = json_integer_value(val);
        if (check_id(id, count, "model.vocab", k, err)) return err->code;
        if (id > max_id) max_id = id;
    }
    if (tok_vocab_init(voc, (int32_t)(max_id + 1), count)) return posy_err_set(err, POSY_E_NOMEM, "model.vocab: out of memory");
    size_t klen;
    void *iter = json_object_iter(v);
    for (; iter; iter = json_object_iter_next(v, iter)) {
        k = json_object_iter_key(iter);
        klen = json_object_iter_key_len(iter);
        char tmp[256];
        if (klen < sizeof tmp && memmem(k, klen, "\xEF\xB7\x90", 3)) { /* U+FDD0 stands for NUL (tok_load.c) */
            size_t w = 0;
            for (size_t i = 0; i < klen; i++) {
                if (i + 3 <= klen && !memcmp(k + i, "\xEF\xB7\x90", 3)) { tmp[w++] = '\0'; i += 2; }
                else tmp[w++] = k[i];
            }
            k = tmp;
            klen = w;
        }
        if (tok_vocab_add(voc, (int32_t)json_integer_value(json_object_iter_value(iter)), k, klen) < 0)
            return posy_err_set(err, POSY_E_NOMEM, "model.vocab: out of memory");
    }
    return 0;
}

static int load_wordpiece(json_t *j, tok_model *m, posy_err *err) {
    const char *unk, *pre;
    size_t pl;
    long long mic;
    m->kind = TOK_M_WORDPIECE;
    json_t *v = json_object_get(j, "vocab");
    if (!json_is_object(v)) return posy_err_set(err, POSY_E_INVALID, "model.vocab: expected an object of token -> id");
    if (tok_load_vocab_object(v, &m->vocab, err)) return err->code;
    if (tok_j_str(j, "unk_token", 1, &unk, NULL, "model", err)) return err->code;
    if (tok_j_str(j, "continuing_subword_prefix", 0, &pre, &pl, "model", err)) return err->code;
    if (!pre) { pre = "##"; pl = 2; }
    if (tok_j_int(j, "max_input_chars_per_word", 0, 100, &mic, "model", err)) return err->code;
    if (mic < 0 || mic > INT32_MAX) return posy_err_set(err, POSY_E_INVALID, "model.max_input_chars_per_word: out of range");
    m->max_input_chars = (int)mic;
    m->prefix = tok_strndup(pre, pl);
    m->prefix_len = pl;
    m->unk_id = tok_vocab_find(&m->vocab, unk, strlen(unk));
    if (m->unk_id < 0)
        return posy_err_set(err, POSY_E_INVALID, "model.unk_token: '%.40s' is not in model.vocab", unk);
    return m->prefix ? 0 : posy_err_set(err, POSY_E_NOMEM, "out of memory");
}

static int load_wordlevel(json_t *j, tok_model *m, posy_err *err) {
    const char *unk;
    m->kind = TOK_M_WORDLEVEL;
    json_t *v = json_object_get(j, "vocab");
    if (!json_is_object(v)) return posy_err_set(err, POSY_E_INVALID, "model.vocab: expected an object of token -> id");
    if (tok_load_vocab_object(v, &m->vocab, err)) return err->code;
    if (tok_j_str(j, "unk_token", 0, &unk, NULL, "model", err)) return err->code;
    m->unk_id = unk ? tok_vocab_find(&m->vocab, unk, strlen(unk)) : -1;
    return 0;
}

int tok_load_bpe(json_t *j, tok_model *m, posy_err *err);
int tok_load_unigram(json_t *j, tok_model *m, posy_err *err);

int tok_load_model(json_t *j, tok_model *m, posy_err *err) {
    memset(m, 0, sizeof *m);
    m->unk_id = -1;
    if (!json_is_object(j)) return posy_err_set(err, POSY_E_INVALID, "model: missing or not an object");
    const char *type;
    if (tok_j_str(j, "type", 0, &type, NULL, "model", err)) return err->code;
    if (!type) { /* older files: infer from the fields present */
        if (json_object_get(j, "merges")) type = "BPE";
        else if (json_is_array(json_object_get(j, "vocab"))) type = "Unigram";
        else type = "WordPiece";
    }
    if (!strcmp(type, "WordPiece")) return load_wordpiece(j, m, err);
    if (!strcmp(type, "BPE")) return tok_load_bpe(j, m, err);
    if (!strcmp(type, "Unigram")) return tok_load_unigram(j, m, err);
    if (!strcmp(type, "WordLevel")) return load_wordlevel(j, m, err);
    return posy_err_set(err, POSY_E_UNSUPPORTED, "model.type: '%s' is not supported (WordPiece, BPE, Unigram, WordLevel are)",
                        type);
}

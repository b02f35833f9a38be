/* eng_config_deberta: config.json of a DeBERTa v2 / v3 model (model_type
 * deberta-v2), read as transformers' DebertaV2Config does, or of a DeBERTa
 * v1 (model_type deberta: DebertaConfig, the same keys less v2's
 * position_buckets, share_att_key, norm_rel_ebd and conv_kernel_size,
 * which v1 ignores; its talking_head is refused).
 *
 * Sizes as BERT's; the disentangled attention's settings into c->deb
 * (eng_deberta.h) with transformers' defaults where a key is absent:
 * relative_attention false, position_buckets and max_relative_positions
 * -1, pos_att_type none, norm_rel_ebd "none", share_att_key false,
 * position_biased_input true, type_vocab_size 0.  pos_att_type is a list
 * or a "c2p|p2c" string; transformers computes only c2p and p2c, so other
 * names change nothing there and are ignored here too.  What posy does not
 * run is refused by name: an embedding_size other than hidden_size (the
 * embed_proj), the convolution layer of deberta-v2-xlarge / -xxlarge
 * (conv_kernel_size), an attention_head_size other than hidden / heads, a
 * pooler of another size.
 */
#include "eng_config.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include "eng_cfgjson.h"

/* pos_att_type: null, a list of names, or names joined by '|'; n_types
 * counts the names (v1 scales by it) */
static int deb_pos_types(eng_deberta_cfg *d, json_t *v, const char *path, posy_err *err) {
    char buf[128];
    if (!v || json_is_null(v)) return 0;
    if (json_is_string(v)) {   /* transformers: lowercased, split at '|', each name stripped */
        snprintf(buf, sizeof buf, "%s", json_string_value(v));
        d->n_types = 1;
        for (const char *s = json_string_value(v); *s; s++) d->n_types += *s == '|';
        for (char *s = buf; *s; s++) *s = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
        for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
            while (*t == ' ' || *t == '\t') t++;
            size_t n = strlen(t);
            while (n && (t[n - 1] == ' ' || t[n - 1] == '\t')) t[--n] = '\0';
            d->c2p |= !strcmp(t, "c2p");
            d->p2c |= !strcmp(t, "p2c");
        }
        return 0;
    }
    if (!json_is_array(v)) return posy_err_set(err, POSY_E_INVALID, "%s: pos_att_type is not a list or a string", path);
    d->n_types = (int)json_array_size(v);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e))
            return posy_err_set(err, POSY_E_INVALID, "%s: pos_att_type[%zu] is not a string", path, i);
        d->c2p |= !strcmp(json_string_value(e), "c2p");
        d->p2c |= !strcmp(json_string_value(e), "p2c");
    }
    return 0;
}

/* an optional integer key that must equal `want` when present */
static int deb_must_equal(json_t *r, const char *key, int want, const char *what, const char *path, posy_err *err) {
    json_t *v = json_object_get(r, key);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v)) return posy_err_set(err, POSY_E_INVALID, "%s: %s is not an integer", path, key);
    if (json_integer_value(v) != want)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: %s %lld is not supported (%s)", path, key,
                            (long long)json_integer_value(v), what);
    return 0;
}

static int deb_pooler_act(eng_config *c, json_t *r, const char *path, posy_err *err) {
    char a[32];
    int rc = eng_cfgjson_str(r, "pooler_hidden_act", path, 0, "gelu", a, sizeof a, err);
    if (rc || eng_dense_act_named(a, &c->pooler_act) == 0) return rc;
    return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: pooler_hidden_act '%s' is not supported (gelu, tanh, relu, "
                        "sigmoid, linear)", path, a);
}

int eng_config_deberta(eng_config *c, json_t *r, const char *p, posy_err *err) {
    posy_model_info *in = &c->info;
    eng_deberta_cfg *d = &c->deb;
    char norm[64];
    int rc, conv = 0, talking = 0;
    c->deberta = 1;
    d->v1 = !strcmp(c->model_type, "deberta");
    if ((rc = eng_cfgjson_int(r, "hidden_size", p, 1, 0, 1, 65536, &in->hidden, err)) ||
        (rc = eng_cfgjson_int(r, "num_hidden_layers", p, 1, 0, 1, 1024, &in->layers, err)) ||
        (rc = eng_cfgjson_int(r, "num_attention_heads", p, 1, 0, 1, 1024, &in->heads, err)) ||
        (rc = eng_cfgjson_int(r, "intermediate_size", p, 1, 0, 1, 1 << 20, &in->intermediate, err)) ||
        (rc = eng_cfgjson_int(r, "vocab_size", p, 1, 0, 1, 1 << 24, &in->vocab, err)) ||
        (rc = eng_cfgjson_int(r, "type_vocab_size", p, 0, 0, 0, 1024, &in->type_vocab, err)) ||
        (rc = eng_cfgjson_int(r, "max_position_embeddings", p, 0, 512, 1, 1 << 16, &c->max_position_embeddings, err)) ||
        (rc = eng_cfgjson_int(r, "pad_token_id", p, 0, 0, 0, 1 << 24, &c->pad_token_id, err)) ||
        (rc = eng_cfgjson_num(r, "layer_norm_eps", p, 0, 1e-7, 0, 1, &c->ln_eps, err)) ||
        (rc = eng_config_activation(c, r, "hidden_act", "gelu", p, err)) ||
        (rc = eng_cfgjson_bool(r, "relative_attention", p, 0, &d->rel, err)) ||
        (rc = eng_cfgjson_int(r, "max_relative_positions", p, 0, -1, -1, 1 << 16, &d->max_rel, err)) ||
        (rc = eng_cfgjson_bool(r, "position_biased_input", p, 1, &d->pos_input, err)) ||
        (rc = deb_pos_types(d, json_object_get(r, "pos_att_type"), p, err)) ||
        (rc = deb_pooler_act(c, r, p, err)))
        return rc;
    if (d->v1) {   /* DeBERTa v1 reads none of v2's keys (no buckets, own projections, a plain table), so a
                    * value of theirs is not checked either; its own talking_head is refused */
        d->buckets = -1;
        d->share_key = 0;
        snprintf(norm, sizeof norm, "none");
        if ((rc = eng_cfgjson_bool(r, "talking_head", p, 0, &talking, err))) return rc;
        if (talking)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: talking_head (mixing the attention heads' scores) "
                                "is not supported", p);
    } else if ((rc = eng_cfgjson_int(r, "position_buckets", p, 0, -1, -1, 1 << 16, &d->buckets, err)) ||
               (rc = eng_cfgjson_bool(r, "share_att_key", p, 0, &d->share_key, err)) ||
               (rc = eng_cfgjson_str(r, "norm_rel_ebd", p, 0, "none", norm, sizeof norm, err)) ||
               (rc = eng_cfgjson_int(r, "conv_kernel_size", p, 0, 0, 0, 1 << 10, &conv, err)))
        return rc;
    if (conv > 0)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a DeBERTa with a convolution layer (conv_kernel_size %d, "
                            "deberta-v2-xlarge's form) is not supported", p, conv);
    if (in->heads < 1 || in->hidden % in->heads)
        return posy_err_set(err, POSY_E_INVALID, "%s: hidden size %d is not a multiple of %d attention heads", p,
                            in->hidden, in->heads);
    if ((rc = deb_must_equal(r, "embedding_size", in->hidden, "an embedding projection; posy runs embedding_size "
                             "= hidden_size", p, err)) ||
        (rc = deb_must_equal(r, "attention_head_size", in->hidden / in->heads, "posy runs hidden_size / "
                             "num_attention_heads", p, err)) ||
        (rc = deb_must_equal(r, "pooler_hidden_size", in->hidden, "posy runs pooler_hidden_size = hidden_size", p,
                             err)))
        return rc;
    for (char *s = norm; *s; s++) *s = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
    d->rel_ln = strstr(norm, "layer_norm") != NULL;
    if (d->max_rel < 1) d->max_rel = c->max_position_embeddings;
    /* the log bucket divides by log((max_relative_positions - 1) / (buckets / 2)): it must be > 0 */
    if (d->buckets > 0 && (d->buckets < 2 || d->max_rel - 1 <= d->buckets / 2))
        return posy_err_set(err, POSY_E_INVALID, "%s: position_buckets %d needs max_relative_positions (or "
                            "max_position_embeddings) above %d, not %d", p, d->buckets, d->buckets / 2 + 1,
                            d->max_rel);
    d->span = d->buckets > 0 ? d->buckets : d->max_rel;
    c->position_offset = 0;
    in->causal = 0;
    return eng_config_finish_sizes(c, p, err);
}

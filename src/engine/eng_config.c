/* eng_config: config.json (architecture and sizes) and the load entry.
 *
 * One reader per family, because the families name the same things
 * differently (DistilBERT's dim/n_layers vs BERT's hidden_size/...).  The
 * result is normalised: info.max_positions is the usable sequence length,
 * after RoBERTa's position offset (positions start at pad_token_id + 1, so
 * a 514-row table serves 512 tokens), and max_position_embeddings keeps the
 * stored table size for the weights loader's shape checks.  Sizes are
 * bounded so that a hostile config cannot make later size products
 * overflow or ask for absurd allocations.
 */
#include "eng_config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "eng_cfgjson.h"
#include "posy_file.h"
#include "eng_relpos.h"

typedef enum {
    FAM_BERT, FAM_ROBERTA, FAM_DISTILBERT, FAM_QWEN3, FAM_MPNET, FAM_QWEN2, FAM_MISTRAL, FAM_LLAMA, FAM_GEMMA3,
    FAM_MODERNBERT, FAM_T5, FAM_DEBERTA, FAM_NOMIC, FAM_GTE
} cfg_family;

static const struct {
    const char *model_type, *arch;
    cfg_family fam;
} cfg_types[] = {
    {"bert", "bert", FAM_BERT},          {"roberta", "roberta", FAM_ROBERTA},
    {"xlm-roberta", "xlm-roberta", FAM_ROBERTA}, {"camembert", "roberta", FAM_ROBERTA},
    {"distilbert", "distilbert", FAM_DISTILBERT}, {"qwen3", "qwen3", FAM_QWEN3},
    {"mpnet", "mpnet", FAM_MPNET},
    /* the decoders without Qwen3's q/k norm run on its engine ("qwen3"
     * family): e5-mistral, SFR-Embedding-Mistral, gte-Qwen2, ... */
    {"qwen2", "qwen3", FAM_QWEN2},       {"mistral", "qwen3", FAM_MISTRAL},
    {"llama", "qwen3", FAM_LLAMA},       {"gemma3_text", "qwen3", FAM_GEMMA3},
    /* an encoder, but its layer is this engine's with LayerNorms */
    {"modernbert", "qwen3", FAM_MODERNBERT},
    /* T5's encoder (sentence-t5, gtr-t5, instructor): pre-RMSNorm layers
     * with a relative position bias, also this engine's */
    {"t5", "qwen3", FAM_T5},
    /* NomicBERT (nomic-embed-text): BERT's post-norm layer with rotary
     * positions and SwiGLU, also this engine's */
    {"nomic_bert", "qwen3", FAM_NOMIC},
    /* GTE v1.5 / mGTE (Alibaba-NLP/new-impl's remote code: gte-*-en-v1.5,
     * gte-multilingual-base; Snowflake's copy names it "gte": arctic-embed
     * m / l v2.0): the same post-norm layer with biases and a GeGLU */
    {"new", "qwen3", FAM_GTE},
    {"gte", "qwen3", FAM_GTE},
    /* BERT's layer with disentangled attention (eng_deberta.h) */
    {"deberta-v2", "deberta", FAM_DEBERTA},
    /* DeBERTa v1: the same attention, its weights read into v2's form */
    {"deberta", "deberta", FAM_DEBERTA},
};

#define CFG_SUPPORTED "bert, roberta, xlm-roberta, camembert, distilbert, mpnet, modernbert, nomic_bert, new (gte), t5, deberta-v2, deberta, qwen3, qwen2, mistral, llama, gemma3_text"

int eng_config_activation(eng_config *c, json_t *root, const char *key, const char *def, const char *path,
                          posy_err *err) {
    char a[32];
    int rc = eng_cfgjson_str(root, key, path, 0, def, a, sizeof a, err);
    if (rc) return rc;
    if (!strcmp(a, "gelu")) c->act = ENG_ACT_GELU;
    else if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh") || !strcmp(a, "gelu_fast"))
        c->act = ENG_ACT_GELU_TANH;
    else if (!strcmp(a, "relu")) c->act = ENG_ACT_RELU;
    else if (!strcmp(a, "silu") || !strcmp(a, "swish")) c->act = ENG_ACT_SILU;
    else
        return posy_err_set(err, POSY_E_UNSUPPORTED,
                            "%s: %s '%s' is not supported (gelu, gelu_new, gelu_pytorch_tanh, relu, silu)", path,
                            key, a);
    return 0;
}

/* Shared checks once sizes are read: heads divide hidden, positions usable. */
int eng_config_finish_sizes(eng_config *c, const char *path, posy_err *err) {
    posy_model_info *in = &c->info;
    if (in->hidden % in->heads)
        return posy_err_set(err, POSY_E_INVALID, "%s: hidden size %d is not a multiple of %d attention heads",
                            path, in->hidden, in->heads);
    if (!c->head_dim) c->head_dim = in->hidden / in->heads;
    if (!in->kv_heads) in->kv_heads = in->heads;
    if (in->heads % in->kv_heads)
        return posy_err_set(err, POSY_E_INVALID, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                            path, in->heads, in->kv_heads);
    in->max_positions = c->max_position_embeddings - c->position_offset;
    if (in->max_positions < 1)
        return posy_err_set(err, POSY_E_INVALID,
                            "%s: max_position_embeddings %d leaves no positions after the offset %d", path,
                            c->max_position_embeddings, c->position_offset);
    return 0;
}

/* MPNet: a BERT layer layout with T5-style relative position buckets
 * added to the attention scores (eng_relpos.h).  transformers computes the
 * buckets with 32 of them whatever relative_attention_num_buckets says, so
 * any other count is refused rather than run differently; the embedding's
 * padding index is fixed at 1 in MPNetEmbeddings (positions start at 2)
 * whatever pad_token_id says; no token type embeddings. */
static int cfg_mpnet(eng_config *c, json_t *r, const char *p, posy_err *err) {
    int rc = eng_cfgjson_int(r, "relative_attention_num_buckets", p, 0, ENG_RELPOS_BUCKETS, 1, 1 << 16,
                             &c->rel_buckets, err);
    if (rc) return rc;
    if (c->rel_buckets != ENG_RELPOS_BUCKETS)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: relative_attention_num_buckets %d is not supported (MPNet "
                            "runs with %d, as transformers does)", p, c->rel_buckets, ENG_RELPOS_BUCKETS);
    if (c->info.type_vocab)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: type_vocab_size %d: MPNet has no token type embeddings", p,
                            c->info.type_vocab);
    c->pad_token_id = 1;
    return 0;
}

static int cfg_jina(eng_config *c, json_t *r, const char *p, posy_err *err);

static int cfg_bert(eng_config *c, json_t *r, const char *p, cfg_family fam, posy_err *err) {
    posy_model_info *in = &c->info;
    char pet[32];
    int rc;
    /* JinaBERT v2 (jina-embeddings-v2-*) says model_type "bert" with ALiBi */
    json_t *pj = json_object_get(r, "position_embedding_type");
    if (fam == FAM_BERT && json_is_string(pj) && !strcmp(json_string_value(pj), "alibi")) return cfg_jina(c, r, p, err);
    if ((rc = eng_cfgjson_int(r, "hidden_size", p, 1, 0, 1, 65536, &in->hidden, err)) ||
        (rc = eng_cfgjson_int(r, "num_hidden_layers", p, 1, 0, 1, 1024, &in->layers, err)) ||
        (rc = eng_cfgjson_int(r, "num_attention_heads", p, 1, 0, 1, 1024, &in->heads, err)) ||
        (rc = eng_cfgjson_int(r, "intermediate_size", p, 1, 0, 1, 1 << 20, &in->intermediate, err)) ||
        (rc = eng_cfgjson_int(r, "vocab_size", p, 1, 0, 1, 1 << 24, &in->vocab, err)) ||
        (rc = eng_cfgjson_int(r, "type_vocab_size", p, 0, fam == FAM_MPNET ? 0 : 2, 0, 1024, &in->type_vocab, err)) ||
        (rc = eng_cfgjson_int(r, "max_position_embeddings", p, 0, 512, 1, 1 << 22, &c->max_position_embeddings, err)) ||
        (rc = eng_cfgjson_int(r, "pad_token_id", p, 0, fam == FAM_ROBERTA ? 1 : 0, 0, 1 << 24, &c->pad_token_id, err)) ||
        (rc = eng_cfgjson_num(r, "layer_norm_eps", p, 0, 1e-12, 0, 1, &c->ln_eps, err)) ||
        (rc = eng_cfgjson_str(r, "position_embedding_type", p, 0, "absolute", pet, sizeof pet, err)) ||
        (rc = eng_config_activation(c, r, "hidden_act", "gelu", p, err)))
        return rc;
    if (strcmp(pet, "absolute"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: position_embedding_type '%s' is not supported (absolute only)",
                            p, pet);
    if (fam == FAM_MPNET && (rc = cfg_mpnet(c, r, p, err))) return rc;
    c->position_offset = fam == FAM_ROBERTA || fam == FAM_MPNET ? c->pad_token_id + 1 : 0;
    return eng_config_finish_sizes(c, p, err);
}

static int cfg_distilbert(eng_config *c, json_t *r, const char *p, posy_err *err) {
    posy_model_info *in = &c->info;
    int rc;
    if ((rc = eng_cfgjson_int(r, "dim", p, 1, 0, 1, 65536, &in->hidden, err)) ||
        (rc = eng_cfgjson_int(r, "n_layers", p, 1, 0, 1, 1024, &in->layers, err)) ||
        (rc = eng_cfgjson_int(r, "n_heads", p, 1, 0, 1, 1024, &in->heads, err)) ||
        (rc = eng_cfgjson_int(r, "hidden_dim", p, 1, 0, 1, 1 << 20, &in->intermediate, err)) ||
        (rc = eng_cfgjson_int(r, "vocab_size", p, 1, 0, 1, 1 << 24, &in->vocab, err)) ||
        (rc = eng_cfgjson_int(r, "max_position_embeddings", p, 0, 512, 1, 1 << 22, &c->max_position_embeddings, err)) ||
        (rc = eng_cfgjson_int(r, "pad_token_id", p, 0, 0, 0, 1 << 24, &c->pad_token_id, err)) ||
        (rc = eng_config_activation(c, r, "activation", "gelu", p, err)))
        return rc;
    in->type_vocab = 0;
    c->ln_eps = 1e-12; /* fixed in DistilBERT's modeling code */
    return eng_config_finish_sizes(c, p, err);
}

/* The scaling named by sc's "rope_type" (or "type") into *out (theta
 * already set); q names sc in errors. */
static int cfg_rope_type(json_t *sc, const char *q, eng_rope *out, posy_err *err) {
    char type[32];
    int rc;
    const char *tkey = json_object_get(sc, "rope_type") ? "rope_type" : "type";
    if ((rc = eng_cfgjson_str(sc, tkey, q, 0, "default", type, sizeof type, err))) return rc;
    if (!strcmp(type, "default")) return 0;
    if (!strcmp(type, "linear")) {
        out->type = ENG_ROPE_LINEAR;
        return eng_cfgjson_num(sc, "factor", q, 1, 1.0, 1e-6, 1e6, &out->factor, err);
    }
    if (!strcmp(type, "llama3")) {
        out->type = ENG_ROPE_LLAMA3;
        if ((rc = eng_cfgjson_num(sc, "factor", q, 1, 1.0, 1e-6, 1e6, &out->factor, err)) ||
            (rc = eng_cfgjson_num(sc, "low_freq_factor", q, 1, 1.0, 1e-6, 1e6, &out->low_freq_factor, err)) ||
            (rc = eng_cfgjson_num(sc, "high_freq_factor", q, 1, 4.0, 1e-6, 1e6, &out->high_freq_factor, err)) ||
            (rc = eng_cfgjson_int(sc, "original_max_position_embeddings", q, 1, 0, 1, 1 << 22,
                                  &out->original_max, err)))
            return rc;
        if (!(out->high_freq_factor > out->low_freq_factor))
            return posy_err_set(err, POSY_E_INVALID, "%s: high_freq_factor %g must exceed low_freq_factor %g", q,
                                out->high_freq_factor, out->low_freq_factor);
        return 0;
    }
    return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: rope type '%s' is not supported (default, linear, llama3)", q,
                        type);
}

/* The rotary's parameters.  rope_theta sits at the top level (transformers
 * < 5) or inside "rope_parameters" (>= 5; the top level wins when both
 * say).  Scaling comes as "rope_scaling" (< 5; absent or null: none) or
 * as rope_parameters' own rope_type ("type" in some older files).  Types
 * default, linear and llama3 run (eng_rope.h says how); the others
 * (dynamic, yarn, longrope, ...) are refused by name, since ignoring one
 * would give vectors that silently differ from the reference.  theta:
 * the family's default base when neither place gives one. */
static int cfg_rope(eng_config *c, json_t *r, const char *p, double theta, posy_err *err) {
    json_t *rp = json_object_get(r, "rope_parameters"), *rs = json_object_get(r, "rope_scaling");
    int rc;
    if (rp && !json_is_null(rp) && !json_is_object(rp))
        return posy_err_set(err, POSY_E_INVALID, "%s: rope_parameters must be an object", p);
    if (rs && !json_is_null(rs) && !json_is_object(rs))
        return posy_err_set(err, POSY_E_INVALID, "%s: rope_scaling must be an object or null", p);
    if (!json_is_object(rp)) rp = NULL;
    if (!json_is_object(rs)) rs = NULL;
    c->rope = eng_rope_plain(theta);
    if ((rc = eng_cfgjson_num(r, "rope_theta", p, 0, theta, 1, 1e12, &c->rope.theta, err))) return rc;
    if (rp && !json_object_get(r, "rope_theta") &&
        (rc = eng_cfgjson_num(rp, "rope_theta", p, 0, theta, 1, 1e12, &c->rope.theta, err)))
        return rc;
    /* a rotary over part of the head (Phi, GPT-NeoX style) is not this engine's */
    double partial = 1.0;
    if ((rc = eng_cfgjson_num(r, "partial_rotary_factor", p, 0, 1.0, 0, 1, &partial, err)) ||
        (rp && (rc = eng_cfgjson_num(rp, "partial_rotary_factor", p, 0, partial, 0, 1, &partial, err))))
        return rc;
    if (partial != 1.0)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: partial_rotary_factor %g is not supported (1 only)", p,
                            partial);
    json_t *sc = rs ? rs : rp;
    if (!sc) return 0;
    char q[1100];
    snprintf(q, sizeof q, "%s: %s", p, rs ? "rope_scaling" : "rope_parameters");
    return cfg_rope_type(sc, q, &c->rope, err);
}

/* Gemma 3's two rotaries: the global layers' and the sliding-window
 * layers' -- as "rope_parameters": {"full_attention": {...},
 * "sliding_attention": {...}} (transformers >= 5), or as rope_theta +
 * rope_scaling (global) and rope_local_base_freq (local) (< 5, as
 * EmbeddingGemma's config.json writes them).  Defaults: 1e6 and 1e4. */
static int cfg_rope_gemma(eng_config *c, json_t *r, const char *p, posy_err *err) {
    json_t *rp = json_object_get(r, "rope_parameters");
    json_t *full = json_is_object(rp) ? json_object_get(rp, "full_attention") : NULL;
    json_t *loc = json_is_object(rp) ? json_object_get(rp, "sliding_attention") : NULL;
    char q[1100];
    int rc;
    c->rope_local = eng_rope_plain(10000.0);
    if (full || loc) {
        if (!json_is_object(full) || !json_is_object(loc))
            return posy_err_set(err, POSY_E_INVALID, "%s: rope_parameters needs full_attention and sliding_attention "
                                "objects", p);
        c->rope = eng_rope_plain(1000000.0);
        snprintf(q, sizeof q, "%s: rope_parameters.full_attention", p);
        if ((rc = eng_cfgjson_num(full, "rope_theta", q, 0, 1000000.0, 1, 1e12, &c->rope.theta, err)) ||
            (rc = cfg_rope_type(full, q, &c->rope, err)))
            return rc;
        snprintf(q, sizeof q, "%s: rope_parameters.sliding_attention", p);
        if ((rc = eng_cfgjson_num(loc, "rope_theta", q, 0, 10000.0, 1, 1e12, &c->rope_local.theta, err)) ||
            (rc = cfg_rope_type(loc, q, &c->rope_local, err)))
            return rc;
        return 0;
    }
    if ((rc = cfg_rope(c, r, p, 1000000.0, err))) return rc;
    return eng_cfgjson_num(r, "rope_local_base_freq", p, 0, 10000.0, 1, 1e12, &c->rope_local.theta, err);
}

/* Gemma 3's and ModernBERT's layer kinds into layer_local (a bit a
 * sliding-window layer): "layer_types" (one "sliding_attention" /
 * "full_attention" a layer) or, without it, Gemma's every
 * sliding_window_pattern-th layer global (layers 5, 11, ... of the default
 * 6) / ModernBERT's every global_attn_every_n_layers-th (layers 0, 3, ...
 * of the default 3); *any_local set when some layer slides. */
static int cfg_layer_kinds(eng_config *c, json_t *r, const char *p, int *any_local, posy_err *err) {
    const int L = c->info.layers;
    json_t *lt = json_object_get(r, "layer_types");
    *any_local = 0;
    memset(c->layer_local, 0, sizeof c->layer_local);
    if (L > (int)sizeof c->layer_local * 8)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: %d layers (at most %d for %s)", p, L,
                            (int)sizeof c->layer_local * 8, c->model_type);
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || (int)json_array_size(lt) != L)
            return posy_err_set(err, POSY_E_INVALID, "%s: layer_types must be an array of %d strings", p, L);
        for (int l = 0; l < L; l++) {
            const char *v = json_string_value(json_array_get(lt, (size_t)l));
            if (!v || (strcmp(v, "sliding_attention") && strcmp(v, "full_attention")))
                return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: layer_types[%d] must be \"sliding_attention\" or "
                                    "\"full_attention\"", p, l);
            if (!strcmp(v, "sliding_attention")) c->layer_local[l / 8] |= (unsigned char)(1u << (l % 8));
        }
    } else if (c->modernbert) {
        int every = 3, rc;
        if ((rc = eng_cfgjson_int(r, "global_attn_every_n_layers", p, 0, 3, 1, 1 << 20, &every, err))) return rc;
        for (int l = 0; l < L; l++)
            if (l % every) c->layer_local[l / 8] |= (unsigned char)(1u << (l % 8));
    } else {
        int pat = 6, rc;
        if ((rc = eng_cfgjson_int(r, "sliding_window_pattern", p, 0, 6, 1, 1 << 20, &pat, err))) return rc;
        for (int l = 0; l < L; l++)
            if ((l + 1) % pat) c->layer_local[l / 8] |= (unsigned char)(1u << (l % 8));
    }
    for (int l = 0; l < L; l++) *any_local |= (c->layer_local[l / 8] >> (l % 8)) & 1;
    return 0;
}

/* The attention direction: causal unless the config says "is_causal":
 * false or "use_bidirectional_attention": true (pplx-embed style); the
 * engine option --attention can still override it. */
static int cfg_qwen3_extra(eng_config *c, json_t *r, const char *p, int gemma, posy_err *err) {
    int rc, causal = 1, bidir = 0, sliding = 0;
    if ((rc = gemma ? cfg_rope_gemma(c, r, p, err) : cfg_rope(c, r, p, 10000.0, err))) return rc;
    if ((rc = eng_cfgjson_bool(r, "is_causal", p, 1, &causal, err)) ||
        (rc = eng_cfgjson_bool(r, "use_bidirectional_attention", p, 0, &bidir, err)) ||
        (rc = eng_cfgjson_bool(r, "use_sliding_window", p, 0, &sliding, err)))
        return rc;
    if (sliding)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: use_sliding_window true is not supported", p);
    c->info.causal = causal && !bidir;
    return 0;
}

/* What differs between the decoders this family runs, all as
 * transformers computes them (pre-norm RMSNorm layers, rotary, GQA,
 * SwiGLU):
 *   qwen3    q/k RMSNorm per head; head_dim set apart from hidden/heads
 *            (128 when absent); optional bias on q, k, v and o
 *   qwen2    no q/k norm; bias on q, k, v (never o); head_dim = hidden/heads
 *   mistral  no q/k norm, no bias; head_dim when given (null: hidden/heads);
 *            sliding_window W: a query sees the W - 1 keys before it, so
 *            sequences are capped at W tokens, where it changes nothing
 *   llama    no q/k norm; attention_bias puts a bias on q, k, v and o;
 *            mlp_bias is refused
 *   gemma3_text (EmbeddingGemma)  q/k norm; (1 + w) norms, one after
 *            attention and one after the MLP; gelu_tanh(gate) * up;
 *            embeddings x sqrt(hidden); query_pre_attn_scalar; two rotaries
 *            (global / sliding layers, cfg_rope_gemma); the sliding layers'
 *            window masked by the engine (eng_config.sliding_window);
 *            attn_logit_softcapping refused
 * Which biases a checkpoint has is read from its tensors (the weights
 * loader); the rotary's scaling by cfg_rope. */
static int cfg_qwen3(eng_config *c, json_t *r, const char *p, cfg_family fam, posy_err *err) {
    posy_model_info *in = &c->info;
    const int gemma = fam == FAM_GEMMA3;
    int rc, mlp_bias = 0, window = 0, any_local = 0;
    double qpas = 0;
    if ((rc = eng_cfgjson_int(r, "hidden_size", p, 1, 0, 1, 65536, &in->hidden, err)) ||
        (rc = eng_cfgjson_int(r, "num_hidden_layers", p, 1, 0, 1, 1024, &in->layers, err)) ||
        (rc = eng_cfgjson_int(r, "num_attention_heads", p, 1, 0, 1, 1024, &in->heads, err)) ||
        (rc = eng_cfgjson_int(r, "num_key_value_heads", p, 0, 0, 0, 1024, &in->kv_heads, err)) ||
        (rc = eng_cfgjson_int(r, "head_dim", p, 0, fam == FAM_QWEN3 ? 128 : gemma ? 256 : 0,
                              fam == FAM_QWEN3 || gemma, 4096, &c->head_dim, err)) || /* 0 (absent or null): derived below */
        (rc = eng_cfgjson_int(r, "intermediate_size", p, 1, 0, 1, 1 << 20, &in->intermediate, err)) ||
        (rc = eng_cfgjson_int(r, "vocab_size", p, 1, 0, 1, 1 << 24, &in->vocab, err)) ||
        (rc = eng_cfgjson_int(r, "max_position_embeddings", p, 0, gemma ? 131072 : 32768, 1, 1 << 22,
                              &c->max_position_embeddings, err)) ||
        (rc = eng_cfgjson_int(r, "pad_token_id", p, 0, 0, 0, 1 << 24, &c->pad_token_id, err)) ||
        (rc = eng_cfgjson_num(r, "rms_norm_eps", p, 0, 1e-6, 0, 1, &c->ln_eps, err)) ||
        (rc = eng_cfgjson_bool(r, "tie_word_embeddings", p, 0, &c->tie_word_embeddings, err)) ||
        (rc = eng_cfgjson_bool(r, "mlp_bias", p, 0, &mlp_bias, err)) ||
        ((fam == FAM_MISTRAL || gemma) &&
         (rc = eng_cfgjson_int(r, "sliding_window", p, 0, gemma ? 4096 : 0, 0, 1 << 22, &window, err))) ||
        (gemma && (rc = eng_cfgjson_num(r, "query_pre_attn_scalar", p, 0, 256.0, 1e-6, 1e9, &qpas, err))) ||
        (rc = gemma ? eng_config_activation(c, r, "hidden_activation", "gelu_pytorch_tanh", p, err)
                    : eng_config_activation(c, r, "hidden_act", "silu", p, err)))
        return rc;
    if (mlp_bias) return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: mlp_bias true is not supported", p);
    if ((rc = cfg_qwen3_extra(c, r, p, gemma, err))) return rc;
    in->type_vocab = 0;
    c->qk_norm = fam == FAM_QWEN3 || gemma;
    c->q_scale = 1.0;
    if (gemma) {
        json_t *cap = json_object_get(r, "attn_logit_softcapping");
        if (cap && !json_is_null(cap))
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: attn_logit_softcapping is not supported (null only: "
                                "Gemma 3; Gemma 2 caps its scores)", p);
        if (c->act != ENG_ACT_GELU_TANH)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: gemma3_text with hidden_activation other than "
                                "gelu_pytorch_tanh is not supported", p);
        /* transformers then builds the sliding layers' mask another way
         * (|query - key| <= W / 2 + 1, inclusive): not followed here */
        json_t *ic = json_object_get(r, "is_causal");
        if (json_is_false(ic))
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: gemma3_text with \"is_causal\": false is not supported "
                                "(a bidirectional Gemma 3 says \"use_bidirectional_attention\": true)", p);
        if ((rc = cfg_layer_kinds(c, r, p, &any_local, err))) return rc;
        c->gemma = 1;
        c->q_scale = sqrt((double)c->head_dim / qpas);
        /* the bound the sliding layers' keys keep, |query - key| < it, in
         * either attention mode: transformers turns a bidirectional
         * config's window W into W / 2 + 1 when it loads it */
        c->sliding_window = !any_local || window <= 0 ? 0 : c->info.causal ? window : window / 2 + 1;
        window = 0; /* the engine masks it: no length cap */
    }
    /* Qwen3 sets head_dim independently of hidden/heads; only the GQA
     * grouping must divide.  Absent, it is 128 as in transformers'
     * Qwen3Config, not hidden / heads (which once gave 0 for hidden_size 2
     * with 6 heads: tests/fuzz/fuzz_config.c); the weights loader then
     * checks the projections' shapes against it.  The others derive it
     * from hidden / heads when the config does not say (Gemma 3: 256). */
    if (!c->head_dim) {
        if (in->hidden % in->heads)
            return posy_err_set(err, POSY_E_INVALID, "%s: hidden size %d is not a multiple of %d attention heads "
                                "(and no head_dim)", p, in->hidden, in->heads);
        c->head_dim = in->hidden / in->heads;
    }
    if (!in->kv_heads) in->kv_heads = in->heads;
    if (in->heads % in->kv_heads)
        return posy_err_set(err, POSY_E_INVALID, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d",
                            p, in->heads, in->kv_heads);
    in->max_positions = c->max_position_embeddings;
    /* Mistral's sliding window W (a query sees the W - 1 keys before it):
     * sequences are capped at W tokens, where it changes nothing */
    if (window > 0 && window < in->max_positions) in->max_positions = window;
    return 0;
}

/* ModernBERT: an encoder whose layer is the decoders' with LayerNorms
 * (transformers' ModernBertModel): sizes, norm_eps / norm_bias, GELU-family
 * GLU, the global and sliding rotaries ("rope_parameters" per layer kind,
 * or global_rope_theta 160000 / local_rope_theta 10000), layer kinds, and
 * the sliding layers' window: a key is seen when |query - key| <=
 * local_attention / 2.  Always bidirectional; attention and MLP biases
 * refused (no released checkpoint has them). */
static int cfg_modernbert(eng_config *c, json_t *r, const char *p, posy_err *err) {
    posy_model_info *in = &c->info;
    int rc, attn_bias = 0, mlp_bias = 0, local = 128, any_local = 0;
    c->modernbert = 1;
    if ((rc = eng_cfgjson_int(r, "hidden_size", p, 1, 0, 1, 65536, &in->hidden, err)) ||
        (rc = eng_cfgjson_int(r, "num_hidden_layers", p, 1, 0, 1, 1024, &in->layers, err)) ||
        (rc = eng_cfgjson_int(r, "num_attention_heads", p, 1, 0, 1, 1024, &in->heads, err)) ||
        (rc = eng_cfgjson_int(r, "intermediate_size", p, 1, 0, 1, 1 << 20, &in->intermediate, err)) ||
        (rc = eng_cfgjson_int(r, "vocab_size", p, 1, 0, 1, 1 << 24, &in->vocab, err)) ||
        (rc = eng_cfgjson_int(r, "max_position_embeddings", p, 0, 8192, 1, 1 << 22, &c->max_position_embeddings,
                              err)) ||
        (rc = eng_cfgjson_int(r, "pad_token_id", p, 0, 0, 0, 1 << 24, &c->pad_token_id, err)) ||
        (rc = eng_cfgjson_num(r, "norm_eps", p, 0, 1e-5, 0, 1, &c->ln_eps, err)) ||
        (rc = eng_cfgjson_bool(r, "norm_bias", p, 0, &c->norm_bias, err)) ||
        (rc = eng_cfgjson_bool(r, "attention_bias", p, 0, &attn_bias, err)) ||
        (rc = eng_cfgjson_bool(r, "mlp_bias", p, 0, &mlp_bias, err)) ||
        (rc = eng_cfgjson_int(r, "local_attention", p, 0, 128, 2, 1 << 22, &local, err)) ||
        (rc = eng_config_activation(c, r, "hidden_activation", "gelu", p, err)))
        return rc;
    if (attn_bias || mlp_bias)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: modernbert with attention_bias or mlp_bias true is not "
                            "supported", p);
    if (c->act == ENG_ACT_RELU)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: modernbert with hidden_activation relu is not supported", p);
    if (in->hidden % in->heads)
        return posy_err_set(err, POSY_E_INVALID, "%s: hidden size %d is not a multiple of %d attention heads", p,
                            in->hidden, in->heads);
    c->head_dim = in->hidden / in->heads;
    in->kv_heads = in->heads;
    in->type_vocab = 0;
    c->q_scale = 1.0;
    /* the rotaries: Gemma's reader takes the per-kind rope_parameters; the
     * older keys are ModernBERT's own */
    json_t *rp = json_object_get(r, "rope_parameters");
    if (json_is_object(rp) && (json_object_get(rp, "full_attention") || json_object_get(rp, "sliding_attention"))) {
        if ((rc = cfg_rope_gemma(c, r, p, err))) return rc;
        if (!json_object_get(json_object_get(rp, "full_attention"), "rope_theta")) c->rope.theta = 160000.0;
    } else {
        c->rope = eng_rope_plain(160000.0);
        c->rope_local = eng_rope_plain(10000.0);
        if ((rc = eng_cfgjson_num(r, "global_rope_theta", p, 0, 160000.0, 1, 1e12, &c->rope.theta, err)) ||
            (rc = eng_cfgjson_num(r, "local_rope_theta", p, 0, 10000.0, 1, 1e12, &c->rope_local.theta, err)))
            return rc;
    }
    if ((rc = cfg_layer_kinds(c, r, p, &any_local, err))) return rc;
    c->sliding_window = any_local ? local / 2 + 1 : 0;
    in->causal = 0;
    in->max_positions = c->max_position_embeddings;
    return 0;
}

/* T5's encoder (transformers' T5EncoderModel; sentence-t5, gtr-t5 and
 * instructor are T5 v1.0 encoders: "feed_forward_proj" relu, an MLP
 * without a gate; T5 v1.1's "gated-gelu" is gelu_new(wi_0) * wi_1): d_model,
 * d_kv (the head size, apart from d_model / num_heads), d_ff, num_heads,
 * num_layers, layer_norm_epsilon.  Attention is bidirectional, unscaled
 * (the loader folds sqrt(d_kv) into Wq, the engine's attention divides it
 * out again), with layer 0's relative position bias in every layer: T5's
 * buckets are MPNet's (eng_relpos.h), so only 32 buckets and distance 128
 * are accepted.  No position table: sequences are capped at n_positions
 * (512 when absent; sentence_bert_config.json's max_seq_length usually
 * lower). */
static int cfg_t5(eng_config *c, json_t *r, const char *p, posy_err *err) {
    posy_model_info *in = &c->info;
    int rc, buckets = 32, dist = 128, is_dec = 0;
    char ffp[32];
    c->t5 = 1;
    if ((rc = eng_cfgjson_int(r, "d_model", p, 1, 0, 1, 65536, &in->hidden, err)) ||
        (rc = eng_cfgjson_int(r, "num_layers", p, 1, 0, 1, 1024, &in->layers, err)) ||
        (rc = eng_cfgjson_int(r, "num_heads", p, 1, 0, 1, 1024, &in->heads, err)) ||
        (rc = eng_cfgjson_int(r, "d_kv", p, 1, 0, 2, 1024, &c->head_dim, err)) ||
        (rc = eng_cfgjson_int(r, "d_ff", p, 1, 0, 1, 1 << 20, &in->intermediate, err)) ||
        (rc = eng_cfgjson_int(r, "vocab_size", p, 1, 0, 1, 1 << 24, &in->vocab, err)) ||
        (rc = eng_cfgjson_int(r, "n_positions", p, 0, 512, 1, 1 << 20, &c->max_position_embeddings, err)) ||
        (rc = eng_cfgjson_int(r, "pad_token_id", p, 0, 0, 0, 1 << 24, &c->pad_token_id, err)) ||
        (rc = eng_cfgjson_num(r, "layer_norm_epsilon", p, 0, 1e-6, 0, 1, &c->ln_eps, err)) ||
        (rc = eng_cfgjson_int(r, "relative_attention_num_buckets", p, 0, 32, 1, 1 << 20, &buckets, err)) ||
        (rc = eng_cfgjson_int(r, "relative_attention_max_distance", p, 0, 128, 1, 1 << 20, &dist, err)) ||
        (rc = eng_cfgjson_bool(r, "is_decoder", p, 0, &is_dec, err)) ||
        (rc = eng_cfgjson_str(r, "feed_forward_proj", p, 0, "relu", ffp, sizeof ffp, err)))
        return rc;
    if (buckets != ENG_RELPOS_BUCKETS || dist != 128)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: t5 with relative_attention_num_buckets %d / "
                            "relative_attention_max_distance %d is not supported (32 / 128 only)", p, buckets, dist);
    if (is_dec)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: a t5 decoder (\"is_decoder\": true) is not supported: posy "
                            "runs T5's encoder", p);
    if (!strcmp(ffp, "relu")) {
        c->act = ENG_ACT_RELU;
        c->mlp_plain = 1;
    } else if (!strcmp(ffp, "gated-gelu")) {
        c->act = ENG_ACT_GELU_TANH; /* transformers maps it to gelu_new */
    } else {
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: t5 with feed_forward_proj '%s' is not supported (relu, "
                            "gated-gelu)", p, ffp);
    }
    in->kv_heads = in->heads;
    in->type_vocab = 0;
    in->causal = 0;
    c->rel_buckets = ENG_RELPOS_BUCKETS;
    c->q_scale = 1.0;
    in->max_positions = c->max_position_embeddings;
    return 0;
}

/* One of two keys naming the same integer: Nomic's own (`own`, as the
 * hub's checkpoints write config.json for Nomic's modeling code) or
 * transformers' (`hf`, as its NomicBertConfig saves it); `def` when
 * neither is there and `req` is 0. */
static int cfg_int2(json_t *r, const char *own, const char *hf, const char *p, int req, int def, int lo, int hi,
                    int *out, posy_err *err) {
    const char *k = json_object_get(r, own) && !json_is_null(json_object_get(r, own)) ? own : hf;
    return eng_cfgjson_int(r, k, p, req, def, lo, hi, out, err);
}

/* The post-norm encoders' common end (NomicBERT, GTE): no GQA,
 * bidirectional, LayerNorms with biases, no extra query scale. */
static int cfg_post_ln_finish(eng_config *c) {
    posy_model_info *in = &c->info;
    c->post_ln = 1;
    in->kv_heads = in->heads;
    in->causal = 0;
    c->norm_bias = 1;
    c->q_scale = 1.0;
    in->max_positions = c->max_position_embeddings;
    return 0;
}

/* A switch of the model's own code that must hold `want` (absent or null:
 * it does): what posy's layer does not compute is refused by name, with
 * the family `fam` named, rather than run differently from the reference. */
static int cfg_want_flag(json_t *r, const char *key, int want, const char *fam, const char *p, posy_err *err) {
    int v = want, rc = eng_cfgjson_bool(r, key, p, want, &v, err);
    if (rc) return rc;
    if (v != want)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: %s with %s %s is not supported", p, fam, key,
                            v ? "true" : "false");
    return 0;
}

static int cfg_nomic_flag(json_t *r, const char *key, int want, const char *p, posy_err *err) {
    return cfg_want_flag(r, key, want, "nomic_bert", p, err);
}

/* NomicBERT (nomic-embed-text-v1 / v1.5): sizes under Nomic's keys
 * (n_embd, n_layer, n_head, n_inner, n_positions, layer_norm_epsilon,
 * rotary_emb_base, activation_function "swiglu") or transformers' (hidden_size,
 * ..., rope_parameters.rope_theta, hidden_act "silu"); the default rotary
 * base is 1000, as both write it.  What the checkpoints released with this
 * layout use is supported; the switches of Nomic's code that would change
 * the computation (pre-norm, biases, a partial or interleaved or scaled
 * rotary, RMSNorm, parallel blocks, mixture-of-experts layers, causal
 * attention, unscaled scores) are refused by name. */
static int cfg_nomic(eng_config *c, json_t *r, const char *p, posy_err *err) {
    posy_model_info *in = &c->info;
    int rc;
    double frac = 1.0;
    char act[32];
    c->nomic = 1;
    const int own = json_object_get(r, "n_embd") != NULL; /* Nomic's keys, else transformers' */
    if ((rc = cfg_int2(r, "n_embd", "hidden_size", p, 1, 0, 1, 65536, &in->hidden, err)) ||
        (rc = cfg_int2(r, "n_layer", "num_hidden_layers", p, 1, 0, 1, 1024, &in->layers, err)) ||
        (rc = cfg_int2(r, "n_head", "num_attention_heads", p, 1, 0, 1, 1024, &in->heads, err)) ||
        (rc = eng_cfgjson_int(r, "vocab_size", p, 1, 0, 1, 1 << 24, &in->vocab, err)) ||
        (rc = eng_cfgjson_int(r, "type_vocab_size", p, 0, 2, 0, 1024, &in->type_vocab, err)) ||
        (rc = cfg_int2(r, "n_positions", "max_position_embeddings", p, 0, 2048, 1, 1 << 22,
                       &c->max_position_embeddings, err)) ||
        (rc = eng_cfgjson_int(r, "pad_token_id", p, 0, 0, 0, 1 << 24, &c->pad_token_id, err)) ||
        (rc = eng_cfgjson_num(r, own ? "layer_norm_epsilon" : "layer_norm_eps", p, 0, 1e-12, 0, 1, &c->ln_eps, err)))
        return rc;
    /* n_inner absent or null: 4 x n_embd, as Nomic's code sizes the MLP */
    if ((rc = cfg_int2(r, "n_inner", "intermediate_size", p, 0, 4 * in->hidden, 1, 1 << 20, &in->intermediate, err)))
        return rc;
    if (own) {
        if ((rc = eng_cfgjson_str(r, "activation_function", p, 0, "swiglu", act, sizeof act, err))) return rc;
        if (strcmp(act, "swiglu"))
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: nomic_bert with activation_function '%s' is not "
                                "supported (swiglu only: nomic-embed-text-v1 / v1.5)", p, act);
        c->act = ENG_ACT_SILU;
        c->rope = eng_rope_plain(1000.0);
        if ((rc = eng_cfgjson_num(r, "rotary_emb_base", p, 0, 1000.0, 1, 1e12, &c->rope.theta, err)) ||
            (rc = eng_cfgjson_num(r, "rotary_emb_fraction", p, 0, 1.0, 0, 1, &frac, err)) ||
            (rc = cfg_nomic_flag(r, "prenorm", 0, p, err)) || (rc = cfg_nomic_flag(r, "qkv_proj_bias", 0, p, err)) ||
            (rc = cfg_nomic_flag(r, "mlp_fc1_bias", 0, p, err)) || (rc = cfg_nomic_flag(r, "mlp_fc2_bias", 0, p, err)) ||
            (rc = cfg_nomic_flag(r, "rotary_emb_interleaved", 0, p, err)) ||
            (rc = cfg_nomic_flag(r, "use_rms_norm", 0, p, err)) || (rc = cfg_nomic_flag(r, "parallel_block", 0, p, err)) ||
            (rc = cfg_nomic_flag(r, "causal", 0, p, err)) || (rc = cfg_nomic_flag(r, "scale_attn_weights", 1, p, err)) ||
            (rc = cfg_nomic_flag(r, "scale_attn_by_inverse_layer_idx", 0, p, err)))
            return rc;
        if (frac != 1.0)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: nomic_bert with rotary_emb_fraction %g is not supported "
                                "(1 only)", p, frac);
        static const char *const scaled[] = {"rotary_scaling_factor", "rotary_emb_scale_base"};
        for (int i = 0; i < 2; i++) {
            json_t *v = json_object_get(r, scaled[i]);
            if (v && !json_is_null(v))
                return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: nomic_bert with %s set is not supported (null only: "
                                    "a plain rotary)", p, scaled[i]);
        }
        json_t *moe = json_object_get(r, "moe_every_n_layers");
        if (json_is_integer(moe) && json_integer_value(moe) > 0)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: nomic_bert with mixture-of-experts layers "
                                "(moe_every_n_layers %lld, nomic-embed-text-v2-moe) is not supported", p,
                                (long long)json_integer_value(moe));
    } else {
        /* transformers' NomicBertConfig: base 1000 unless rope_parameters says */
        if ((rc = eng_config_activation(c, r, "hidden_act", "silu", p, err)) || (rc = cfg_rope(c, r, p, 1000.0, err)))
            return rc;
        if (c->act != ENG_ACT_SILU)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: nomic_bert with hidden_act other than silu is not "
                                "supported", p);
        if (c->rope.type != ENG_ROPE_DEFAULT)
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: nomic_bert with a scaled rotary is not supported", p);
    }
    if (in->hidden % in->heads)
        return posy_err_set(err, POSY_E_INVALID, "%s: hidden size %d is not a multiple of %d attention heads", p,
                            in->hidden, in->heads);
    c->head_dim = in->hidden / in->heads;
    int hd = 0; /* transformers' config writes head_dim: it must be the split */
    if ((rc = eng_cfgjson_int(r, "head_dim", p, 0, 0, 0, 65536, &hd, err))) return rc;
    if (hd && hd != c->head_dim)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: nomic_bert with head_dim %d apart from hidden / heads %d is "
                            "not supported", p, hd, c->head_dim);
    return cfg_post_ln_finish(c);
}

/* GTE v1.5 / mGTE (model_type "new", or "gte" in Snowflake's copy of the
 * code), as Alibaba-NLP/new-impl's NewModel computes it: BERT's post-norm
 * layer -- x = LN(x + o(attn(qkv(x)))), x = LN(x + down(act(gate) * up)) --
 * with rotary positions, biases on qkv / o / down (none on up_gate, whose
 * rows are up then gate), token type rows (type_vocab_size; 0: none) added
 * before the embedding LayerNorm, no final norm, always bidirectional.
 * Sizes and switches default as NewConfig does (hidden 768, 12 layers,
 * gelu, rope_theta 10000, type_vocab_size 1, layer_norm_eps 1e-12,
 * max_position_embeddings 2048).  The rotary's "ntk" scaling (fixed or
 * mixed, eng_rope.h) runs; what that code offers beside it is refused by
 * name: absolute positions, RMSNorm layers, the log-n attention scale,
 * other scalings. */
static int cfg_gte(eng_config *c, json_t *r, const char *p, posy_err *err) {
    posy_model_info *in = &c->info;
    char pos[32], lnt[32];
    int rc;
    c->gte = 1;
    if ((rc = eng_cfgjson_int(r, "hidden_size", p, 0, 768, 1, 65536, &in->hidden, err)) ||
        (rc = eng_cfgjson_int(r, "num_hidden_layers", p, 0, 12, 1, 1024, &in->layers, err)) ||
        (rc = eng_cfgjson_int(r, "num_attention_heads", p, 0, 12, 1, 1024, &in->heads, err)) ||
        (rc = eng_cfgjson_int(r, "intermediate_size", p, 0, 3072, 1, 1 << 20, &in->intermediate, err)) ||
        (rc = eng_cfgjson_int(r, "vocab_size", p, 0, 30528, 1, 1 << 24, &in->vocab, err)) ||
        (rc = eng_cfgjson_int(r, "type_vocab_size", p, 0, 1, 0, 1024, &in->type_vocab, err)) ||
        (rc = eng_cfgjson_int(r, "max_position_embeddings", p, 0, 2048, 1, 1 << 22, &c->max_position_embeddings,
                              err)) ||
        (rc = eng_cfgjson_int(r, "pad_token_id", p, 0, 0, 0, 1 << 24, &c->pad_token_id, err)) ||
        (rc = eng_cfgjson_num(r, "layer_norm_eps", p, 0, 1e-12, 0, 1, &c->ln_eps, err)) ||
        (rc = eng_config_activation(c, r, "hidden_act", "gelu", p, err)) ||
        (rc = eng_cfgjson_str(r, "position_embedding_type", p, 0, "rope", pos, sizeof pos, err)) ||
        (rc = eng_cfgjson_str(r, "layer_norm_type", p, 0, "layer_norm", lnt, sizeof lnt, err)) ||
        (rc = cfg_want_flag(r, "logn_attention_scale", 0, "new (GTE)", p, err)))
        return rc;
    if (strcmp(pos, "rope"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: new (GTE) with position_embedding_type '%s' is not "
                            "supported (rope only: every released GTE v1.5 / mGTE checkpoint)", p, pos);
    if (strcmp(lnt, "layer_norm"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: new (GTE) with layer_norm_type '%s' is not supported "
                            "(layer_norm only)", p, lnt);
    if (c->act == ENG_ACT_RELU)
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: new (GTE) with hidden_act relu is not supported (gelu, "
                            "gelu_new, silu)", p);
    if (in->hidden % in->heads)
        return posy_err_set(err, POSY_E_INVALID, "%s: hidden size %d is not a multiple of %d attention heads", p,
                            in->hidden, in->heads);
    c->head_dim = in->hidden / in->heads;
    /* the rotary: rope_theta, and "rope_scaling": null or {"type": "ntk",
     * "factor": f, "mixed_b": b (optional)} -- the only scaling that code
     * builds (any other type raises there) */
    c->rope = eng_rope_plain(10000.0);
    if ((rc = eng_cfgjson_num(r, "rope_theta", p, 0, 10000.0, 1, 1e12, &c->rope.theta, err))) return rc;
    json_t *sc = json_object_get(r, "rope_scaling");
    if (sc && !json_is_null(sc)) {
        char q[1100], type[32];
        double mb = 0;
        snprintf(q, sizeof q, "%s: rope_scaling", p);
        if (!json_is_object(sc)) return posy_err_set(err, POSY_E_INVALID, "%s must be an object or null", q);
        if ((rc = eng_cfgjson_str(sc, "type", q, 1, "", type, sizeof type, err))) return rc;
        if (strcmp(type, "ntk"))
            return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: type '%s' is not supported (ntk: the only scaling "
                                "GTE's code builds)", q, type);
        if ((rc = eng_cfgjson_num(sc, "factor", q, 1, 1.0, 1e-6, 1e6, &c->rope.factor, err))) return rc;
        json_t *b = json_object_get(sc, "mixed_b");
        if (b && !json_is_null(b) && (rc = eng_cfgjson_num(sc, "mixed_b", q, 1, 0, 1e-6, 1e3, &mb, err))) return rc;
        /* factor <= 1: that code's cache never outgrows the original
         * context, so its frequencies stay the plain ones */
        if (c->rope.factor > 1.0) {
            c->rope.type = ENG_ROPE_NTK;
            c->rope.mixed_b = mb;
        } else {
            c->rope.factor = 1.0;
        }
    }
    return cfg_post_ln_finish(c);
}

/* JinaBERT v2 (jina-embeddings-v2-base-en / small-en / -de / -es / -zh:
 * model_type "bert" with "position_embedding_type": "alibi", remote code
 * jinaai/jina-bert-implementation; MosaicBERT's layer): BERT's post-norm
 * layer without a position table -- ALiBi's symmetric bias -slope_h |i - j|
 * on the scaled scores instead --, biases on Q / K / V, the output dense
 * and wo, the MLP act(gated_layers' first half) * second half ("geglu":
 * GELU; none on gated_layers), token type rows before the embedding
 * LayerNorm, no final norm.  It runs on this engine's post-norm path
 * (post_ln) with the ALiBi table as a relative position bias (alibi), so
 * info.arch becomes "qwen3".  "reglu" and the plain ("original") MLP are
 * refused by name. */
static int cfg_jina(eng_config *c, json_t *r, const char *p, posy_err *err) {
    posy_model_info *in = &c->info;
    char ff[32];
    int rc;
    c->jina = c->alibi = 1;
    snprintf(in->arch, sizeof in->arch, "qwen3");
    if ((rc = eng_cfgjson_int(r, "hidden_size", p, 0, 768, 1, 65536, &in->hidden, err)) ||
        (rc = eng_cfgjson_int(r, "num_hidden_layers", p, 0, 12, 1, 1024, &in->layers, err)) ||
        (rc = eng_cfgjson_int(r, "num_attention_heads", p, 0, 12, 1, 1024, &in->heads, err)) ||
        (rc = eng_cfgjson_int(r, "intermediate_size", p, 0, 3072, 1, 1 << 20, &in->intermediate, err)) ||
        (rc = eng_cfgjson_int(r, "vocab_size", p, 0, 30522, 1, 1 << 24, &in->vocab, err)) ||
        (rc = eng_cfgjson_int(r, "type_vocab_size", p, 0, 2, 1, 1024, &in->type_vocab, err)) ||
        (rc = eng_cfgjson_int(r, "max_position_embeddings", p, 0, 512, 1, 1 << 16, &c->max_position_embeddings,
                              err)) ||
        (rc = eng_cfgjson_int(r, "pad_token_id", p, 0, 0, 0, 1 << 24, &c->pad_token_id, err)) ||
        (rc = eng_cfgjson_num(r, "layer_norm_eps", p, 0, 1e-12, 0, 1, &c->ln_eps, err)) ||
        (rc = eng_cfgjson_str(r, "feed_forward_type", p, 0, "original", ff, sizeof ff, err)))
        return rc;
    if (strcmp(ff, "geglu"))
        return posy_err_set(err, POSY_E_UNSUPPORTED, "%s: JinaBERT (position_embedding_type alibi) with "
                            "feed_forward_type '%s' is not supported (geglu only: jina-embeddings-v2)", p, ff);
    c->act = ENG_ACT_GELU; /* geglu's nn.GELU(), whatever hidden_act says */
    if (in->hidden % in->heads)
        return posy_err_set(err, POSY_E_INVALID, "%s: hidden size %d is not a multiple of %d attention heads", p,
                            in->hidden, in->heads);
    c->head_dim = in->hidden / in->heads;
    c->rope = eng_rope_plain(10000.0); /* unused: no rotary */
    return cfg_post_ln_finish(c);
}

/* info.name: the directory's base name as given ("models/bge-small/" ->
 * "bge-small"); "." and the like resolve through realpath. */
static void cfg_set_name(posy_model_info *in, const char *dir) {
    char buf[1024], *rp = NULL;
    snprintf(buf, sizeof buf, "%s", dir);
    size_t n = strlen(buf);
    while (n > 1 && buf[n - 1] == '/') buf[--n] = '\0';
    const char *b = strrchr(buf, '/');
    b = b ? b + 1 : buf;
    if (!*b || !strcmp(b, ".") || !strcmp(b, "..")) {
        rp = realpath(dir, NULL);
        const char *rb = rp ? strrchr(rp, '/') : NULL;
        b = rb && rb[1] ? rb + 1 : "model";
    }
    size_t bl = strlen(b);
    if (bl >= sizeof in->name) bl = sizeof in->name - 1;
    memcpy(in->name, b, bl);
    in->name[bl] = '\0';
    free(rp);
}

/* Configs written before transformers 3 have no model_type; their
 * "architectures" class name says it ("BertModel" -> "bert"). */
static const char *cfg_type_from_arch(json_t *root) {
    static const struct { const char *cls, *type; } map[] = {
        {"XLMRoberta", "xlm-roberta"}, {"Roberta", "roberta"}, {"Camembert", "camembert"},
        {"DistilBert", "distilbert"}, {"Bert", "bert"}, {"Qwen3", "qwen3"}, {"MPNet", "mpnet"},
        {"Qwen2", "qwen2"}, {"Mistral", "mistral"}, {"Llama", "llama"}, {"Gemma3Text", "gemma3_text"},
        {"Gemma3ForCausalLM", "gemma3_text"}, {"ModernBert", "modernbert"}, {"T5", "t5"},
        {"NomicBert", "nomic_bert"},
        {"DebertaV2", "deberta-v2"}, {"Deberta", "deberta"},   /* DebertaV2 first: Deberta is its prefix */
    };
    const char *a = json_string_value(json_array_get(json_object_get(root, "architectures"), 0));
    for (size_t i = 0; a && i < sizeof map / sizeof map[0]; i++)
        if (!strncmp(a, map[i].cls, strlen(map[i].cls))) return map[i].type;
    return NULL;
}

static json_t *cfg_overrides;   /* eng_config_set_overrides: set once at start, before any load */
static char *cfg_overrides_text;

int eng_config_set_overrides(const char *json, posy_err *err) {
    json_decref(cfg_overrides);
    free(cfg_overrides_text);
    cfg_overrides = NULL;
    cfg_overrides_text = NULL;
    if (!json || !*json) return 0;
    json_error_t je;
    json_t *o = json_loads(json, 0, &je);
    if (!json_is_object(o)) {
        json_decref(o);
        return posy_err_set(err, POSY_E_INVALID, "--hf-overrides must be a JSON object%s%s", o ? "" : ": ",
                            o ? "" : je.text);
    }
    if (!(cfg_overrides_text = strdup(json))) {
        json_decref(o);
        return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    }
    cfg_overrides = o;
    return 0;
}

const char *eng_config_overrides(void) { return cfg_overrides_text ? cfg_overrides_text : ""; }

static int cfg_load_main(eng_config *c, const char *dir, posy_err *err) {
    char path[1024], mt[32];
    json_t *root;
    int rc = eng_cfgjson_load(dir, "config.json", 1, 1, &root, path, err);
    if (rc) return rc;
    if (cfg_overrides && json_object_update(root, cfg_overrides)) {
        json_decref(root);
        return posy_err_set(err, POSY_E_NOMEM, "%s: out of memory applying --hf-overrides", path);
    }
    const char *guess = json_object_get(root, "model_type") ? NULL : cfg_type_from_arch(root);
    rc = eng_cfgjson_str(root, "model_type", path, !guess, guess, mt, sizeof mt, err);
    int k = -1;
    for (size_t i = 0; !rc && k < 0 && i < sizeof cfg_types / sizeof cfg_types[0]; i++)
        if (!strcmp(mt, cfg_types[i].model_type)) k = (int)i;
    if (!rc && k < 0)
        rc = posy_err_set(err, POSY_E_UNSUPPORTED, "%s: model_type '%s' is not supported (posy runs " CFG_SUPPORTED ")",
                          path, mt);
    if (!rc) {
        snprintf(c->model_type, sizeof c->model_type, "%s", mt);
        snprintf(c->info.arch, sizeof c->info.arch, "%s", cfg_types[k].arch);
        cfg_family fam = cfg_types[k].fam;
        rc = fam == FAM_QWEN3 || fam == FAM_QWEN2 || fam == FAM_MISTRAL || fam == FAM_LLAMA || fam == FAM_GEMMA3
                 ? cfg_qwen3(c, root, path, fam, err)
           : fam == FAM_MODERNBERT ? cfg_modernbert(c, root, path, err)
           : fam == FAM_T5         ? cfg_t5(c, root, path, err)
           : fam == FAM_NOMIC      ? cfg_nomic(c, root, path, err)
           : fam == FAM_GTE        ? cfg_gte(c, root, path, err)
           : fam == FAM_DEBERTA    ? eng_config_deberta(c, root, path, err)
           : fam == FAM_DISTILBERT ? cfg_distilbert(c, root, path, err)
           : cfg_bert(c, root, path, fam, err);
    }
    if (!rc) rc = eng_config_rerank_check(c, root, path, err);
    json_decref(root);
    return rc;
}

int eng_config_load(eng_config *c, const char *model_dir, posy_err *err) {
    memset(c, 0, sizeof *c);
    snprintf(c->info.model_dir, sizeof c->info.model_dir, "%s", model_dir);
    cfg_set_name(&c->info, model_dir);
    c->pool_include_prompt = 1;
    c->add_special = 1;
    char rel[256];
    const int st = eng_config_static_probe(model_dir, rel, sizeof rel);
    const int ro = st ? 0 : eng_config_router_probe(model_dir, &c->rt, err);
    int rc;
    char tdir[1024];
    if (ro < 0) {
        rc = err->code ? err->code : POSY_E_INVALID;
    } else if (ro) {   /* inference-free SPLADE: the document route's transformer is the model */
        c->router = 1;
        rc = posy_path_join(tdir, sizeof tdir, model_dir, c->rt.tdir)
                 ? posy_err_set(err, POSY_E_INVALID, "%s/%s: path too long", model_dir, c->rt.tdir)
                 : cfg_load_main(c, tdir, err);
        if (!rc) rc = eng_config_load_st_router(c, model_dir, err);
    } else {
        rc = st ? eng_config_load_static(c, model_dir, rel, st > 0, err) : cfg_load_main(c, model_dir, err);
        if (!rc) rc = eng_config_load_st(c, model_dir, err);
    }
    if (!rc && c->rerank && c->splade)   /* SpladePooling reads a masked-LM head's logits, not a classifier's */
        rc = posy_err_set(err, POSY_E_UNSUPPORTED, "%s: modules.json names SpladePooling but config.json a sequence-"
                          "classification head: a SPLADE model is a masked-LM (...ForMaskedLM)", model_dir);
    if (!rc && c->rerank) eng_config_rerank_head(c);
    if (rc) eng_config_free(c);
    return rc;
}

void eng_config_free(eng_config *c) {
    for (int i = 0; i < c->n_prompts; i++) free(c->prompts[i].text);
    c->n_prompts = 0;
    for (int i = 0; c->labels && i < c->n_labels; i++) free(c->labels[i]);
    free(c->labels);
    c->labels = NULL;
    c->n_labels = 0;
}

const char *eng_config_prompt(const eng_config *c, const char *name) {
    for (int i = 0; name && i < c->n_prompts; i++)
        if (!strcmp(c->prompts[i].name, name)) return c->prompts[i].text;
    return NULL;
}

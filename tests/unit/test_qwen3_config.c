/* test_qwen3_config: what eng_config reads for Qwen3 beyond the sizes
 * (test_config.c covers those and the prompts): rope_theta where
 * transformers >= 5 writes it (rope_parameters), the attention direction
 * flags of bidirectional variants (is_causal, use_bidirectional_attention),
 * rope scaling (llama3, linear; the other types refused), the refusals
 * (sliding windows, flags
 * of the wrong JSON type), and the families run on the same engine without
 * the q/k norm (qwen2, mistral, llama).  Each case writes a config into a temp dir. */
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "eng_config.h"
#include "posy_test.h"

static char g_dir[64];

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

/* A fresh directory holding config.json = `body` (an object's fields). */
static void write_body(const char *body) {
    if (g_dir[0]) nftw(g_dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    snprintf(g_dir, sizeof g_dir, "/tmp/posy_q3cfg_XXXXXX");
    if (!mkdtemp(g_dir)) { CHECK_MSG(0, "mkdtemp failed"); return; }
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", g_dir);
    FILE *f = fopen(p, "wb");
    if (!f) { CHECK_MSG(0, "cannot write %s", p); return; }
    fprintf(f, "{%s}", body);
    fclose(f);
}

#define SIZES "\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"num_key_value_heads\":2," \
              "\"intermediate_size\":128,\"vocab_size\":512"

/* config.json of model_type `type` (NULL: none) = base sizes + `extra`. */
static void write_typed(const char *type, const char *extra) {
    char body[1024];
    snprintf(body, sizeof body, "%s%s%s" SIZES "%s%s", type ? "\"model_type\":\"" : "", type ? type : "",
             type ? "\"," : "", extra[0] ? "," : "", extra);
    write_body(body);
}

/* Qwen3 with head_dim 32 + `extra` fields. */
static void write_config(const char *extra) {
    char e[768];
    snprintf(e, sizeof e, "\"head_dim\":32%s%s", extra[0] ? "," : "", extra);
    write_typed("qwen3", e);
}

static int load(eng_config *c, posy_err *err) {
    posy_err_clear(err);
    return eng_config_load(c, g_dir, err);
}

static void test_rope_theta_places(void) {
    eng_config c;
    posy_err err;
    write_config("\"rope_parameters\":{\"rope_theta\":500000.0,\"rope_type\":\"default\"}");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.rope.theta == 500000.0);
    eng_config_free(&c);
    write_config("\"rope_theta\":1000000,\"rope_parameters\":{\"rope_theta\":3.0}");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.rope.theta == 1000000.0);   /* top level wins */
    eng_config_free(&c);
    write_config("");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.rope.theta == 10000.0);     /* transformers' default */
    eng_config_free(&c);
    write_config("\"rope_parameters\":{\"rope_theta\":1e6,\"rope_type\":\"yarn\",\"factor\":4}");
    CHECK(load(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "rope type 'yarn' is not supported");
}

/* Rope scaling: llama3 and linear from either place transformers writes
 * them, the rest refused by name, and incomplete parameters named. */
static void test_rope_scaling(void) {
    eng_config c;
    posy_err err;
    write_typed("llama", "\"rope_theta\":500000.0,\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":32.0,"
                         "\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    if (!err.code) {
        CHECK(c.rope.type == ENG_ROPE_LLAMA3 && c.rope.theta == 500000.0 && c.rope.factor == 32.0 &&
              c.rope.low_freq_factor == 1.0 && c.rope.high_freq_factor == 4.0 && c.rope.original_max == 8192);
        eng_config_free(&c);
    }
    /* transformers >= 5: the same inside rope_parameters, with the theta */
    write_typed("llama", "\"rope_parameters\":{\"rope_type\":\"llama3\",\"rope_theta\":500000.0,\"factor\":8,"
                         "\"low_freq_factor\":2,\"high_freq_factor\":3,\"original_max_position_embeddings\":64}");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    if (!err.code) {
        CHECK(c.rope.type == ENG_ROPE_LLAMA3 && c.rope.theta == 500000.0 && c.rope.factor == 8.0 &&
              c.rope.low_freq_factor == 2.0 && c.rope.high_freq_factor == 3.0 && c.rope.original_max == 64);
        eng_config_free(&c);
    }
    write_typed("qwen2", "\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}"); /* the older key */
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    if (!err.code) {
        CHECK(c.rope.type == ENG_ROPE_LINEAR && c.rope.factor == 2.0 && c.rope.theta == 10000.0);
        eng_config_free(&c);
    }
    write_typed("mistral", "\"rope_scaling\":null");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    if (!err.code) {
        CHECK(c.rope.type == ENG_ROPE_DEFAULT);
        eng_config_free(&c);
    }
    static const struct { const char *extra, *msg; } bad[] = {
        {"\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":2.0}", "rope type 'dynamic' is not supported"},
        {"\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":1,\"high_freq_factor\":4}",
         "original_max_position_embeddings"},
        {"\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":4,\"high_freq_factor\":4,"
         "\"original_max_position_embeddings\":8192}", "must exceed low_freq_factor"},
        {"\"rope_scaling\":{\"rope_type\":\"linear\"}", "factor"},
        {"\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":0}", "factor"},
        {"\"rope_scaling\":8", "rope_scaling must be an object"},
        {"\"rope_parameters\":[1]", "rope_parameters must be an object"},
        {"\"partial_rotary_factor\":0.5", "partial_rotary_factor 0.5 is not supported"},
        {"\"rope_parameters\":{\"rope_type\":\"default\",\"partial_rotary_factor\":0.25}", "partial_rotary_factor"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_typed("llama", bad[i].extra);
        int rc = load(&c, &err);
        CHECK_MSG(rc != 0, "%s: loaded", bad[i].extra);
        if (rc) CHECK_STR_CONTAINS(err.msg, bad[i].msg);
        else eng_config_free(&c);
    }
}

static void test_attention_direction(void) {
    static const struct { const char *extra; int causal; } cases[] = {
        {"", 1},
        {"\"is_causal\":true", 1},
        {"\"is_causal\":false", 0},
        {"\"use_bidirectional_attention\":true", 0},
        {"\"use_bidirectional_attention\":false", 1},
        {"\"is_causal\":true,\"use_bidirectional_attention\":true", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eng_config c;
        posy_err err;
        write_config(cases[i].extra);
        if (load(&c, &err) != 0) { CHECK_MSG(0, "%s: %s", cases[i].extra, err.msg); continue; }
        CHECK_MSG(c.info.causal == cases[i].causal, "%s: causal %d", cases[i].extra, c.info.causal);
        eng_config_free(&c);
    }
}

static void test_refusals(void) {
    eng_config c;
    posy_err err;
    write_config("\"use_sliding_window\":true,\"sliding_window\":4096");
    CHECK(load(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "use_sliding_window");
    write_config("\"is_causal\":\"no\"");
    CHECK(load(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "is_causal");
    write_config("\"use_sliding_window\":false");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    if (!err.code) eng_config_free(&c);
}

/* The decoders without Qwen3's q/k norm: which norm, which head_dim, the
 * Mistral window as a length cap, and what is refused. */
static void test_families(void) {
    static const struct {
        const char *type, *extra;
        int ok, qk_norm, head_dim, max_positions;
        const char *arch;
    } cases[] = {
        {"qwen3", "", 1, 1, 128, 32768, "qwen3"},                        /* Qwen3Config's head_dim default */
        {"qwen2", "", 1, 0, 16, 32768, "qwen3"},                         /* hidden / heads */
        {"qwen2", "\"use_sliding_window\":false,\"sliding_window\":4096", 1, 0, 16, 32768, "qwen3"},
        {"mistral", "\"head_dim\":null,\"sliding_window\":null,\"max_position_embeddings\":4096", 1, 0, 16, 4096,
         "qwen3"},
        {"mistral", "\"head_dim\":32,\"sliding_window\":64,\"max_position_embeddings\":256", 1, 0, 32, 64, "qwen3"},
        {"mistral", "\"sliding_window\":8192,\"max_position_embeddings\":4096", 1, 0, 16, 4096, "qwen3"},
        {"llama", "\"head_dim\":32,\"attention_bias\":true,\"mlp_bias\":false", 1, 0, 32, 32768, "qwen3"},
        {NULL, "\"architectures\":[\"MistralModel\"]", 1, 0, 16, 32768, "qwen3"}, /* before model_type existed */
        {"llama", "\"mlp_bias\":true", 0, 0, 0, 0, "mlp_bias"},
        /* llama3 without its other parameters (test_rope_scaling has the rest) */
        {"llama", "\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8.0}", 0, 0, 0, 0, "rope_scaling"},
        {"qwen2", "\"use_sliding_window\":true", 0, 0, 0, 0, "use_sliding_window"},
        {"mistral", "\"sliding_window\":-1", 0, 0, 0, 0, "sliding_window"},
        {"llama", "\"hidden_act\":\"gelu\"", 1, 0, 16, 32768, "qwen3"},     /* refused by the weights loader */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        eng_config c;
        posy_err err;
        write_typed(cases[i].type, cases[i].extra);
        int rc = load(&c, &err);
        if (!cases[i].ok) {
            CHECK_MSG(rc != 0, "%s %s: loaded", cases[i].type, cases[i].extra);
            if (rc) CHECK_STR_CONTAINS(err.msg, cases[i].arch);
            else eng_config_free(&c);
            continue;
        }
        if (rc) { CHECK_MSG(0, "%s %s: %s", cases[i].type, cases[i].extra, err.msg); continue; }
        CHECK_MSG(c.qk_norm == cases[i].qk_norm && c.head_dim == cases[i].head_dim &&
                      c.info.max_positions == cases[i].max_positions && !strcmp(c.info.arch, cases[i].arch),
                  "%s %s: qk_norm %d head_dim %d max_positions %d arch %s", cases[i].type, cases[i].extra, c.qk_norm,
                  c.head_dim, c.info.max_positions, c.info.arch);
        eng_config_free(&c);
    }
    /* no head_dim and heads not dividing hidden: a clear error, not 0 */
    write_body("\"model_type\":\"mistral\",\"hidden_size\":66,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
               "\"intermediate_size\":128,\"vocab_size\":512");
    eng_config c;
    posy_err err;
    CHECK(load(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "not a multiple of 4 attention heads");
}

/* Gemma 3 (gemma3_text): its two rotaries in both key layouts, the layer
 * kinds from layer_types or sliding_window_pattern, the sliding window as
 * transformers loads it (bidirectional: W / 2 + 1), the attention scale,
 * and what is refused. */
static int is_local(const eng_config *c, int l) { return (c->layer_local[l / 8] >> (l % 8)) & 1; }

/* each extra field on a config of `type` refused, the message naming want */
typedef struct bad_field {
    const char *extra, *want;
} bad_field;

static void refused(const char *type, const bad_field *bad, size_t n) {
    eng_config c;
    posy_err err;
    for (size_t i = 0; i < n; i++) {
        write_typed(type, bad[i].extra);
        CHECK_MSG(load(&c, &err) != 0, "%s accepted %s", type, bad[i].extra);
        CHECK_STR_CONTAINS(err.msg, bad[i].want);
    }
}

/* The same, on config.json = base (a whole field list) + extra */
static void refused_body(const char *base, const bad_field *bad, size_t n) {
    eng_config c;
    posy_err err;
    for (size_t i = 0; i < n; i++) {
        char body[1024];
        snprintf(body, sizeof body, "%s%s", base, bad[i].extra);
        write_body(body);
        CHECK_MSG(load(&c, &err) != 0, "accepted %s", bad[i].extra);
        CHECK_STR_CONTAINS(err.msg, bad[i].want);
    }
}

static void test_gemma3(void) {
    eng_config c;
    posy_err err;
    /* transformers < 5's keys, as EmbeddingGemma's config.json; 4 layers, every 2nd global */
    write_body("\"model_type\":\"gemma3_text\",\"hidden_size\":64,\"num_hidden_layers\":4,\"num_attention_heads\":4,"
               "\"num_key_value_heads\":1,\"head_dim\":64,\"intermediate_size\":96,\"vocab_size\":512,"
               "\"rope_theta\":1000000.0,\"rope_local_base_freq\":10000.0,\"rope_scaling\":null,"
               "\"sliding_window\":512,\"sliding_window_pattern\":2,\"query_pre_attn_scalar\":256,"
               "\"use_bidirectional_attention\":true,\"hidden_activation\":\"gelu_pytorch_tanh\","
               "\"attn_logit_softcapping\":null,\"final_logit_softcapping\":null");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.gemma == 1 && c.qk_norm == 1);
    CHECK(c.rope.theta == 1000000.0 && c.rope_local.theta == 10000.0);
    CHECK(is_local(&c, 0) && !is_local(&c, 1) && is_local(&c, 2) && !is_local(&c, 3));
    CHECK_EQ_INT(c.sliding_window, 257); /* bidirectional: 512 / 2 + 1 */
    CHECK(fabs(c.q_scale - 0.5) < 1e-12);   /* sqrt(64 / 256) */
    CHECK_EQ_INT(c.info.causal, 0);
    CHECK_EQ_INT(c.info.max_positions, 131072); /* the window is masked, not a cap */
    eng_config_free(&c);
    /* transformers >= 5: rope_parameters per layer kind, layer_types, causal, defaults elsewhere */
    write_body("\"model_type\":\"gemma3_text\"," SIZES ",\"layer_types\":[\"full_attention\",\"sliding_attention\"],"
               "\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"linear\",\"factor\":8.0,\"rope_theta\":"
               "1000000.0},\"sliding_attention\":{\"rope_type\":\"default\",\"rope_theta\":5000.0}},\"sliding_window\":64");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(!is_local(&c, 0) && is_local(&c, 1));
    CHECK(c.rope.type == ENG_ROPE_LINEAR && c.rope.factor == 8.0 && c.rope_local.theta == 5000.0);
    CHECK_EQ_INT(c.head_dim, 256);         /* Gemma's default */
    CHECK(fabs(c.q_scale - 1.0) < 1e-12);  /* query_pre_attn_scalar 256 = head_dim */
    CHECK_EQ_INT(c.sliding_window, 64);    /* causal: as written */
    CHECK_EQ_INT(c.info.causal, 1);
    eng_config_free(&c);
    /* no sliding layer: no window */
    write_body("\"model_type\":\"gemma3_text\"," SIZES ",\"layer_types\":[\"full_attention\",\"full_attention\"]");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK_EQ_INT(c.sliding_window, 0);
    eng_config_free(&c);
    static const bad_field bad[] = {
        {"\"attn_logit_softcapping\":50.0", "attn_logit_softcapping"},
        {"\"is_causal\":false", "is_causal"},
        {"\"hidden_activation\":\"silu\"", "gelu_pytorch_tanh"},
        {"\"layer_types\":[\"full_attention\"]", "layer_types"},
        {"\"layer_types\":[\"full_attention\",\"chunked_attention\"]", "layer_types[1]"},
        {"\"rope_parameters\":{\"full_attention\":{\"rope_theta\":10000.0}}", "sliding_attention"},
        {"\"rope_parameters\":{\"full_attention\":{},\"sliding_attention\":{\"rope_type\":\"yarn\"}}", "yarn"},
    };
    refused("gemma3_text", bad, sizeof bad / sizeof bad[0]);
    /* the class name alone says it */
    write_body("\"architectures\":[\"Gemma3TextModel\"]," SIZES);
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.gemma == 1);
    eng_config_free(&c);
}

/* ModernBERT: the older keys (global / local rope theta,
 * global_attn_every_n_layers), the window bound, LayerNorm flags, refusals */
static void test_modernbert(void) {
    eng_config c;
    posy_err err;
    write_body("\"model_type\":\"modernbert\",\"hidden_size\":64,\"num_hidden_layers\":4,\"num_attention_heads\":4,"
               "\"intermediate_size\":96,\"vocab_size\":512,\"global_rope_theta\":160000.0,\"local_rope_theta\":"
               "10000.0,\"global_attn_every_n_layers\":2,\"local_attention\":128,\"norm_bias\":true,"
               "\"norm_eps\":1e-5,\"hidden_activation\":\"gelu\"");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.modernbert == 1 && c.gemma == 0 && c.qk_norm == 0 && c.norm_bias == 1);
    CHECK(c.rope.theta == 160000.0 && c.rope_local.theta == 10000.0);
    CHECK(!is_local(&c, 0) && is_local(&c, 1) && !is_local(&c, 2) && is_local(&c, 3));
    CHECK_EQ_INT(c.sliding_window, 65); /* |q - k| <= 64 */
    CHECK_EQ_INT(c.head_dim, 16);
    CHECK_EQ_INT(c.info.causal, 0);
    CHECK(c.act == ENG_ACT_GELU && c.ln_eps == 1e-5);
    CHECK_EQ_INT(c.info.max_positions, 8192);
    eng_config_free(&c);
    /* defaults: every 3rd layer global, 160000 / 10000 */
    write_typed("modernbert", "");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(!is_local(&c, 0) && is_local(&c, 1));
    CHECK(c.rope.theta == 160000.0 && c.rope_local.theta == 10000.0 && c.norm_bias == 0);
    eng_config_free(&c);
    static const bad_field bad[] = {
        {"\"attention_bias\":true", "attention_bias"},
        {"\"mlp_bias\":true", "mlp_bias"},
        {"\"hidden_activation\":\"relu\"", "relu"},
        {"\"layer_types\":[\"full_attention\"]", "layer_types"},
    };
    refused("modernbert", bad, sizeof bad / sizeof bad[0]);
}

/* T5's encoder: its own keys; relu = an MLP without a gate, gated-gelu =
 * gelu_new's GeGLU; buckets / distance other than T5's own 32 / 128, a
 * decoder and other MLPs refused. */
#define T5_SIZES "\"model_type\":\"t5\",\"d_model\":64,\"d_kv\":16,\"d_ff\":96,\"num_layers\":2,\"num_heads\":4," \
                 "\"vocab_size\":512"
static void test_t5(void) {
    eng_config c;
    posy_err err;
    write_body(T5_SIZES ",\"feed_forward_proj\":\"relu\",\"layer_norm_epsilon\":1e-6");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.t5 == 1 && c.mlp_plain == 1 && c.act == ENG_ACT_RELU && c.rel_buckets == 32 && c.qk_norm == 0);
    CHECK(c.info.hidden == 64 && c.head_dim == 16 && c.info.heads == 4 && c.info.kv_heads == 4);
    CHECK(c.info.intermediate == 96 && c.info.layers == 2 && c.info.causal == 0);
    CHECK_EQ_INT(c.info.max_positions, 512); /* n_positions absent: T5's 512 */
    CHECK(!strcmp(c.info.arch, "qwen3"));
    eng_config_free(&c);
    write_body(T5_SIZES ",\"feed_forward_proj\":\"gated-gelu\",\"n_positions\":1024");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.t5 == 1 && c.mlp_plain == 0 && c.act == ENG_ACT_GELU_TANH);
    CHECK_EQ_INT(c.info.max_positions, 1024);
    eng_config_free(&c);
    static const bad_field bad[] = {
        {",\"relative_attention_num_buckets\":64", "relative_attention_num_buckets"},
        {",\"relative_attention_max_distance\":256", "relative_attention_num_buckets"},
        {",\"is_decoder\":true", "decoder"},
        {",\"feed_forward_proj\":\"gated-silu\"", "gated-silu"},
        {",\"d_kv\":\"sixteen\"", "d_kv"},
    };
    refused_body(T5_SIZES, bad, sizeof bad / sizeof bad[0]);
}

/* NomicBERT: Nomic's own keys (as nomic-embed-text-v1.5's config.json)
 * and transformers' read alike; n_inner absent is 4 x n_embd; the
 * switches posy's layer does not compute refused by name. */
#define NOMIC_OWN "\"model_type\":\"nomic_bert\",\"n_embd\":64,\"n_layer\":2,\"n_head\":4,\"vocab_size\":512," \
                  "\"n_positions\":8192,\"rotary_emb_base\":1000,\"activation_function\":\"swiglu\"," \
                  "\"layer_norm_epsilon\":1e-12,\"type_vocab_size\":2,\"prenorm\":false,\"qkv_proj_bias\":false," \
                  "\"rotary_scaling_factor\":null,\"rotary_emb_fraction\":1.0,\"causal\":false"
static void test_nomic(void) {
    eng_config c;
    posy_err err;
    write_body(NOMIC_OWN);
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.nomic == 1 && c.modernbert == 0 && c.t5 == 0 && c.qk_norm == 0 && c.norm_bias == 1);
    CHECK(c.info.hidden == 64 && c.info.layers == 2 && c.info.heads == 4 && c.info.kv_heads == 4 && c.head_dim == 16);
    CHECK_EQ_INT(c.info.intermediate, 256); /* no n_inner: 4 x n_embd */
    CHECK_EQ_INT(c.info.max_positions, 8192);
    CHECK_EQ_INT(c.info.type_vocab, 2);
    CHECK(c.rope.theta == 1000.0 && c.rope.type == ENG_ROPE_DEFAULT && c.act == ENG_ACT_SILU && c.ln_eps == 1e-12);
    CHECK(c.info.causal == 0 && !strcmp(c.info.arch, "qwen3"));
    eng_config_free(&c);
    write_body("\"model_type\":\"nomic_bert\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
               "\"intermediate_size\":96,\"vocab_size\":512,\"max_position_embeddings\":2048,\"hidden_act\":\"silu\","
               "\"layer_norm_eps\":1e-5,\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":5000.0}");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.nomic == 1 && c.info.intermediate == 96 && c.info.max_positions == 2048 && c.ln_eps == 1e-5);
    CHECK(c.rope.theta == 5000.0 && c.info.type_vocab == 2);
    eng_config_free(&c);
    /* transformers' defaults: theta 1000 without rope_parameters; an architecture
     * name alone (no model_type) is enough */
    write_body("\"architectures\":[\"NomicBertModel\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
               "\"num_attention_heads\":4,\"vocab_size\":512");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.nomic == 1 && c.rope.theta == 1000.0 && c.info.intermediate == 256);
    eng_config_free(&c);
    static const bad_field bad[] = {
        {",\"prenorm\":true", "prenorm"},
        {",\"qkv_proj_bias\":true", "qkv_proj_bias"},
        {",\"mlp_fc1_bias\":true", "mlp_fc1_bias"},
        {",\"rotary_emb_interleaved\":true", "rotary_emb_interleaved"},
        {",\"use_rms_norm\":true", "use_rms_norm"},
        {",\"causal\":true", "causal"},
        {",\"scale_attn_weights\":false", "scale_attn_weights"},
        {",\"rotary_emb_fraction\":0.5", "rotary_emb_fraction"},
        {",\"rotary_scaling_factor\":2.0", "rotary_scaling_factor"},
        {",\"moe_every_n_layers\":2", "mixture-of-experts"},
        {",\"activation_function\":\"gelu\"", "gelu"},
        {",\"n_embd\":65", "multiple"},
    };
    refused_body(NOMIC_OWN, bad, sizeof bad / sizeof bad[0]);
    write_body("\"model_type\":\"nomic_bert\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
               "\"vocab_size\":512,\"head_dim\":32");
    CHECK(load(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "head_dim");
}

/* GTE v1.5 / mGTE (model_type "new", or Snowflake's "gte"): the hub's
 * config.json (gte-base-en-v1.5's keys), NewConfig's defaults for absent
 * keys, the NTK rotary (fixed, mixed, and a factor <= 1 that leaves it
 * plain, as that code does), and its other switches refused by name. */
#define GTE_HUB "\"model_type\":\"new\",\"architectures\":[\"NewModel\"],\"hidden_size\":64," \
                "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"intermediate_size\":96,\"vocab_size\":512," \
                "\"max_position_embeddings\":8192,\"type_vocab_size\":0,\"hidden_act\":\"gelu\"," \
                "\"layer_norm_eps\":1e-12,\"layer_norm_type\":\"layer_norm\",\"position_embedding_type\":\"rope\"," \
                "\"rope_theta\":500000,\"rope_scaling\":{\"factor\":2.0,\"type\":\"ntk\"},\"pack_qkv\":true," \
                "\"logn_attention_scale\":false,\"logn_attention_clip1\":false,\"unpad_inputs\":false," \
                "\"use_memory_efficient_attention\":false"
static void test_gte(void) {
    eng_config c;
    posy_err err;
    write_body(GTE_HUB);
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.gte == 1 && c.post_ln == 1 && c.nomic == 0 && c.modernbert == 0 && c.qk_norm == 0 && c.norm_bias == 1);
    CHECK(c.info.hidden == 64 && c.info.layers == 2 && c.info.heads == 4 && c.info.kv_heads == 4 && c.head_dim == 16);
    CHECK(c.info.intermediate == 96 && c.info.max_positions == 8192 && c.info.type_vocab == 0);
    CHECK(c.rope.type == ENG_ROPE_NTK && c.rope.theta == 500000.0 && c.rope.factor == 2.0 && c.rope.mixed_b == 0.0);
    CHECK(c.act == ENG_ACT_GELU && c.ln_eps == 1e-12 && c.info.causal == 0 && !strcmp(c.info.arch, "qwen3"));
    eng_config_free(&c);
    /* NewConfig's defaults; Snowflake's "gte"; mixed NTK */
    write_body("\"model_type\":\"gte\",\"rope_scaling\":{\"type\":\"ntk\",\"factor\":4,\"mixed_b\":1.5}");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.gte == 1 && c.info.hidden == 768 && c.info.layers == 12 && c.info.heads == 12 && c.info.intermediate == 3072);
    CHECK(c.info.vocab == 30528 && c.info.type_vocab == 1 && c.info.max_positions == 2048 && c.rope.theta == 10000.0);
    CHECK(c.rope.type == ENG_ROPE_NTK && c.rope.factor == 4.0 && c.rope.mixed_b == 1.5 && c.act == ENG_ACT_GELU);
    eng_config_free(&c);
    /* no scaling, or a factor <= 1 (that code's cache then never outgrows the context): the plain rotary */
    write_body("\"model_type\":\"new\",\"rope_theta\":160000,\"rope_scaling\":null");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.rope.type == ENG_ROPE_DEFAULT && c.rope.theta == 160000.0);
    eng_config_free(&c);
    write_body("\"model_type\":\"new\",\"rope_scaling\":{\"type\":\"ntk\",\"factor\":0.5}");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.rope.type == ENG_ROPE_DEFAULT);
    eng_config_free(&c);
    static const bad_field bad[] = {
        {",\"position_embedding_type\":\"absolute\"", "position_embedding_type"},
        {",\"layer_norm_type\":\"rms_norm\"", "layer_norm_type"},
        {",\"logn_attention_scale\":true", "logn_attention_scale"},
        {",\"hidden_act\":\"relu\"", "relu"},
        {",\"hidden_act\":\"mish\"", "mish"},
        {",\"num_attention_heads\":5", "multiple"},
        {",\"rope_theta\":\"big\"", "rope_theta"},
    };
    refused_body(GTE_HUB, bad, sizeof bad / sizeof bad[0]);
    static const char *const scal[][2] = {
        {"\"rope_scaling\":{\"type\":\"linear\",\"factor\":2}", "ntk"},
        {"\"rope_scaling\":{\"factor\":2}", "type"},
        {"\"rope_scaling\":{\"type\":\"ntk\"}", "factor"},
        {"\"rope_scaling\":{\"type\":\"ntk\",\"factor\":2,\"mixed_b\":-1}", "mixed_b"},
        {"\"rope_scaling\":[2]", "rope_scaling"},
    };
    for (size_t i = 0; i < sizeof scal / sizeof scal[0]; i++) {
        char body[512];
        snprintf(body, sizeof body, "\"model_type\":\"new\",%s", scal[i][0]);
        write_body(body);
        CHECK_MSG(load(&c, &err) != 0, "accepted %s", scal[i][0]);
        CHECK_STR_CONTAINS(err.msg, scal[i][1]);
    }
}

/* JinaBERT v2: model_type "bert" with ALiBi goes to the post-norm path
 * (arch qwen3), its defaults as JinaBertConfig's, GeGLU with GELU whatever
 * hidden_act says; reglu and the plain MLP refused by name; a bert with
 * another position type stays BERT (absolute) or is refused. */
#define JINA_HUB "\"model_type\":\"bert\",\"architectures\":[\"JinaBertForMaskedLM\"],\"hidden_size\":96," \
                 "\"num_hidden_layers\":2,\"num_attention_heads\":6,\"intermediate_size\":128,\"vocab_size\":512," \
                 "\"max_position_embeddings\":8192,\"type_vocab_size\":2,\"position_embedding_type\":\"alibi\"," \
                 "\"feed_forward_type\":\"geglu\",\"hidden_act\":\"gelu_new\",\"emb_pooler\":\"mean\"," \
                 "\"attn_implementation\":\"torch\""
static void test_jina(void) {
    eng_config c;
    posy_err err;
    write_body(JINA_HUB);
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.jina == 1 && c.alibi == 1 && c.post_ln == 1 && c.gte == 0 && c.nomic == 0 && !strcmp(c.info.arch, "qwen3"));
    CHECK(c.info.hidden == 96 && c.info.heads == 6 && c.info.kv_heads == 6 && c.head_dim == 16 && c.info.layers == 2);
    CHECK(c.info.intermediate == 128 && c.info.type_vocab == 2 && c.info.max_positions == 8192 && c.info.causal == 0);
    CHECK(c.act == ENG_ACT_GELU && c.norm_bias == 1 && c.ln_eps == 1e-12);
    eng_config_free(&c);
    write_body("\"model_type\":\"bert\",\"position_embedding_type\":\"alibi\",\"feed_forward_type\":\"geglu\"");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.jina == 1 && c.info.hidden == 768 && c.info.layers == 12 && c.info.intermediate == 3072 &&
          c.info.vocab == 30522 && c.info.max_positions == 512 && c.info.type_vocab == 2);
    eng_config_free(&c);
    static const bad_field bad[] = {
        {",\"feed_forward_type\":\"reglu\"", "reglu"},
        {",\"feed_forward_type\":\"original\"", "original"},
        {",\"num_attention_heads\":5", "multiple"},
        {",\"type_vocab_size\":0", "type_vocab_size"},
        {",\"max_position_embeddings\":100000", "max_position_embeddings"},
    };
    refused_body(JINA_HUB, bad, sizeof bad / sizeof bad[0]);
    write_body("\"model_type\":\"bert\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
               "\"intermediate_size\":96,\"vocab_size\":512,\"position_embedding_type\":\"relative_key\"");
    CHECK(load(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "relative_key");
}

static void test_cleanup(void) {
    if (g_dir[0]) nftw(g_dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

TEST_MAIN(TEST(test_rope_theta_places), TEST(test_rope_scaling), TEST(test_attention_direction), TEST(test_refusals), TEST(test_families), TEST(test_gemma3), TEST(test_modernbert),
          TEST(test_t5), TEST(test_nomic), TEST(test_gte), TEST(test_jina), TEST(test_cleanup))

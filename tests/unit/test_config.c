/* test_config: eng_config_load on the real all-MiniLM-L6-v2 directory and
 * on temporary directories written here with odd, broken or missing
 * files.  Each error case checks that the message names the file and the
 * field at fault. */
#define _XOPEN_SOURCE 700
#include "eng_config.h"
#include "posy_test.h"
#include "test_tmpdir.h"

#define MINILM_DIR "models/all-MiniLM-L6-v2"

static const char *BERT_CFG =
    "{\"model_type\":\"bert\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
    "\"intermediate_size\":128,\"vocab_size\":100,\"max_position_embeddings\":128,\"type_vocab_size\":2,"
    "\"layer_norm_eps\":1e-12,\"hidden_act\":\"gelu\",\"pad_token_id\":0}";

static const char *MODULES_PN =
    "[{\"idx\":0,\"name\":\"0\",\"path\":\"\",\"type\":\"sentence_transformers.models.Transformer\"},"
    "{\"idx\":1,\"name\":\"1\",\"path\":\"1_Pooling\",\"type\":\"sentence_transformers.models.Pooling\"},"
    "{\"idx\":2,\"name\":\"2\",\"path\":\"2_Normalize\",\"type\":\"sentence_transformers.models.Normalize\"}]";

/* Load g_dir and expect failure mentioning every needle given. */
static void expect_fail(const char *needle1, const char *needle2) {
    eng_config c;
    posy_err err = {0};
    int rc = eng_config_load(&c, g_dir, &err);
    CHECK_MSG(rc != 0, "loaded, wanted an error about %s", needle1);
    if (!rc) { eng_config_free(&c); return; }
    CHECK_STR_CONTAINS(err.msg, needle1);
    if (needle2) CHECK_STR_CONTAINS(err.msg, needle2);
}

static int load_ok(eng_config *c) {
    posy_err err = {0};
    int rc = eng_config_load(c, g_dir, &err);
    CHECK_MSG(rc == 0, "%s", err.msg);
    return rc == 0;
}

static void test_minilm(void) {
    if (access(MINILM_DIR "/config.json", R_OK) != 0) { printf("  (skipped: no %s)\n", MINILM_DIR); return; }
    eng_config c;
    posy_err err = {0};
    CHECK_EQ_INT(eng_config_load(&c, MINILM_DIR "/", &err), 0);
    const posy_model_info *in = &c.info;
    CHECK(!strcmp(in->arch, "bert") && !strcmp(c.model_type, "bert"));
    CHECK(!strcmp(in->name, "all-MiniLM-L6-v2"));
    CHECK_EQ_INT(in->hidden, 384);
    CHECK_EQ_INT(in->layers, 6);
    CHECK_EQ_INT(in->heads, 12);
    CHECK_EQ_INT(in->kv_heads, 12);
    CHECK_EQ_INT(c.head_dim, 32);
    CHECK_EQ_INT(in->intermediate, 1536);
    CHECK_EQ_INT(in->vocab, 30522);
    CHECK_EQ_INT(in->type_vocab, 2);
    CHECK_EQ_INT(in->max_positions, 512);
    CHECK_EQ_INT(in->max_seq_len, 256);
    CHECK_EQ_INT(in->pooling, POSY_POOL_MEAN);
    CHECK_EQ_INT(in->normalize, 1);
    CHECK_EQ_INT(in->causal, 0);
    CHECK_EQ_INT(c.act, ENG_ACT_GELU);
    CHECK(c.ln_eps == 1e-12);
    CHECK_EQ_INT(c.position_offset, 0);
    CHECK_EQ_INT(c.max_position_embeddings, 512);
    CHECK_EQ_INT(c.n_prompts, 0);
    eng_config_free(&c);
}

/* config.json alone: sentence-transformers' defaults. */
static void test_defaults(void) {
    fresh_dir();
    put("config.json", "{\"model_type\":\"bert\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100}");
    eng_config c;
    if (!load_ok(&c)) return;
    CHECK_EQ_INT(c.info.pooling, POSY_POOL_MEAN);
    CHECK_EQ_INT(c.info.normalize, 0);
    CHECK_EQ_INT(c.info.max_positions, 512);
    CHECK_EQ_INT(c.info.max_seq_len, 512);
    CHECK_EQ_INT(c.info.type_vocab, 2);
    CHECK_EQ_INT(c.act, ENG_ACT_GELU);
    CHECK(!strcmp(c.info.name, g_dir + 5));
    eng_config_free(&c);
    /* the tokenizer's model_max_length caps it (a huge integer means "none") */
    put("tokenizer_config.json", "{\"model_max_length\":128}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.info.max_seq_len, 128); eng_config_free(&c); }
    put("tokenizer_config.json", "{\"model_max_length\":1000000000000000019884624838656}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.info.max_seq_len, 512); eng_config_free(&c); }
    put("sentence_bert_config.json", "{\"max_seq_length\":300}");
    put("tokenizer_config.json", "{\"model_max_length\":128}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.info.max_seq_len, 300); eng_config_free(&c); }
}

static void test_pooling_modes(void) {
    fresh_dir();
    put("config.json", BERT_CFG);
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Transformer\",\"path\":\"\"},"
                        "{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"}]");
    put("1_Pooling/config.json", "{\"word_embedding_dimension\":64,\"pooling_mode_cls_token\":true,"
                                 "\"pooling_mode_mean_tokens\":false}");
    eng_config c;
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.info.pooling, POSY_POOL_CLS);
        CHECK_EQ_INT(c.info.normalize, 0);
        eng_config_free(&c);
    }
    put("1_Pooling/config.json", "{\"pooling_mode_lasttoken\":true,\"include_prompt\":true}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.info.pooling, POSY_POOL_LAST); eng_config_free(&c); }
    put("1_Pooling/config.json", "{\"pooling_mode_max_tokens\":true}");
    expect_fail("1_Pooling/config.json", "pooling_mode_max_tokens is not supported");
    put("1_Pooling/config.json", "{\"pooling_mode_mean_sqrt_len_tokens\":true}");
    expect_fail("pooling_mode_mean_sqrt_len_tokens", NULL);
    put("1_Pooling/config.json", "{\"pooling_mode_cls_token\":true,\"pooling_mode_mean_tokens\":true}");
    expect_fail("several pooling modes", NULL);
    /* no mode set: mean, as sentence-transformers 6 loads it */
    put("1_Pooling/config.json", "{\"pooling_mode_cls_token\":false}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.info.pooling, POSY_POOL_MEAN); eng_config_free(&c); }
    put("1_Pooling/config.json", "{\"word_embedding_dimension\":64}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.info.pooling, POSY_POOL_MEAN); eng_config_free(&c); }
    put("1_Pooling/config.json", "{\"pooling_mode_cls_token\":\"yes\"}");
    expect_fail("pooling_mode_cls_token must be true or false", NULL);
    put("1_Pooling/config.json", "{\"pooling_mode_cls_token\":true,\"word_embedding_dimension\":32}");
    expect_fail("embedding dimension 32", NULL);
    /* sentence-transformers >= 6: "pooling_mode" (a name or a list) and
     * "embedding_dimension", as its Pooling.save writes them */
    put("1_Pooling/config.json", "{\"embedding_dimension\":64,\"pooling_mode\":\"cls\",\"include_prompt\":false}");
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.info.pooling, POSY_POOL_CLS);
        CHECK_EQ_INT(c.pool_include_prompt, 0);
        eng_config_free(&c);
    }
    put("1_Pooling/config.json", "{\"embedding_dimension\":64,\"pooling_mode\":[\"lasttoken\"]}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.info.pooling, POSY_POOL_LAST); eng_config_free(&c); }
    put("1_Pooling/config.json", "{\"pooling_mode\":\"mean\"}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.info.pooling, POSY_POOL_MEAN); eng_config_free(&c); }
    put("1_Pooling/config.json", "{\"pooling_mode\":\"max\"}");
    expect_fail("pooling_mode max is not supported", NULL);
    put("1_Pooling/config.json", "{\"pooling_mode\":[\"mean\",\"max\"]}");
    expect_fail("several pooling modes", NULL);
    put("1_Pooling/config.json", "{\"pooling_mode\":\"median\"}");
    expect_fail("pooling_mode 'median' is not one of", NULL);
    put("1_Pooling/config.json", "{\"pooling_mode\":7}");
    expect_fail("pooling_mode must be a string", NULL);
    put("1_Pooling/config.json", "{\"pooling_mode\":[]}");
    expect_fail("pooling_mode lists no mode", NULL);
    /* "pooling_mode" wins over the old keys, which are dropped (as sentence-transformers 6 does) */
    put("1_Pooling/config.json", "{\"pooling_mode\":\"cls\",\"pooling_mode_mean_tokens\":true}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.info.pooling, POSY_POOL_CLS); eng_config_free(&c); }
    put("1_Pooling/config.json", "{\"pooling_mode\":\"mean\",\"embedding_dimension\":32}");
    expect_fail("embedding dimension 32", NULL);
    put("1_Pooling/config.json", "{\"pooling_mode_cls_token\":true");
    expect_fail("1_Pooling/config.json: not valid JSON", NULL);
}

static void test_modules_errors(void) {
    fresh_dir();
    put("config.json", BERT_CFG);
    put("modules.json", MODULES_PN);
    expect_fail("1_Pooling/config.json: missing", NULL);   /* named but absent */
    put("1_Pooling/config.json", "{\"pooling_mode_mean_tokens\":true}");
    eng_config c;
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.info.normalize, 1);
        CHECK_EQ_INT(c.info.pooling, POSY_POOL_MEAN);
        eng_config_free(&c);
    }
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"},"
                        "{\"type\":\"sentence_transformers.models.Dense\",\"path\":\"2_Dense\"}]");
    expect_fail("2_Dense/config.json: missing", NULL);   /* Dense runs (test_dense_modules); named but absent */
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"},"
                        "{\"type\":\"sentence_transformers.models.LayerNorm\",\"path\":\"2_LayerNorm\"}]");
    expect_fail("modules.json", "sentence_transformers.models.LayerNorm is not supported");
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"../1_Pooling\"}]");
    expect_fail("leaves the model directory", NULL);
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Transformer\"}]");
    expect_fail("no Pooling module", NULL);
    put("modules.json", "{\"type\":\"x\"}");
    expect_fail("modules.json: expected a JSON array", NULL);
    put("modules.json", "[{\"path\":\"1_Pooling\"}]");
    expect_fail("modules.json: required field type", NULL);
    put("modules.json", "[7]");
    expect_fail("each module must be an object", NULL);
}

/* Dense modules after pooling: the chain of sizes, the activation, the
 * dimension served, who normalises; and what is refused. */
static void test_dense_modules(void) {
    static const char *mods =
        "[{\"type\":\"sentence_transformers.models.Transformer\",\"path\":\"\"},"
        "{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"},"
        "{\"type\":\"sentence_transformers.base.modules.dense.Dense\",\"path\":\"2_Dense\"},"
        "{\"type\":\"sentence_transformers.models.Dense\",\"path\":\"3_Dense\"},"
        "{\"type\":\"sentence_transformers.models.Normalize\",\"path\":\"4_Normalize\"}]";
    fresh_dir();
    put("config.json", BERT_CFG);
    put("1_Pooling/config.json", "{\"pooling_mode_mean_tokens\":true}");
    put("2_Dense/config.json", "{\"in_features\":64,\"out_features\":48,\"bias\":true,"
                               "\"activation_function\":\"torch.nn.modules.activation.Tanh\"}");
    put("3_Dense/config.json", "{\"in_features\":48,\"out_features\":16,\"bias\":false,"
                               "\"activation_function\":\"torch.nn.modules.linear.Identity\"}");
    put("modules.json", mods);
    eng_config c;
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.n_dense, 2);
        CHECK_EQ_INT(c.info.dim, 16);
        CHECK_EQ_INT(c.info.hidden, 64);
        CHECK(c.info.normalize == 1 && eng_config_pool_normalize(&c) == 0); /* the front normalises after the Dense modules */
        CHECK(c.dense[0].in == 64 && c.dense[0].out == 48 && c.dense[0].bias && c.dense[0].act == ENG_DENSE_TANH);
        CHECK(c.dense[1].bias == 0 && c.dense[1].act == ENG_DENSE_IDENTITY && !strcmp(c.dense[1].path, "3_Dense"));
        eng_config_free(&c);
    }
    put("modules.json", MODULES_PN); /* no Dense: the backends normalise, dim is hidden */
    if (load_ok(&c)) {
        CHECK(c.n_dense == 0 && c.info.dim == 64 && eng_config_pool_normalize(&c) == 1);
        eng_config_free(&c);
    }
    put("modules.json", mods);
    put("3_Dense/config.json", "{\"in_features\":40,\"out_features\":16,\"bias\":false}");
    expect_fail("3_Dense/config.json: in_features 40, but the vector before it has 48 values", NULL);
    put("3_Dense/config.json", "{\"in_features\":48,\"out_features\":16,\"bias\":false,"
                               "\"activation_function\":\"torch.nn.modules.activation.Softmax\"}");
    expect_fail("activation_function torch.nn.modules.activation.Softmax is not supported", NULL);
    put("3_Dense/config.json", "{\"in_features\":48,\"bias\":false}");
    expect_fail("3_Dense/config.json: required field out_features", NULL);
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Dense\",\"path\":\"2_Dense\"},"
                        "{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"}]");
    expect_fail("a Dense module before Pooling", NULL);
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"},"
                        "{\"type\":\"sentence_transformers.models.Normalize\",\"path\":\"n\"},"
                        "{\"type\":\"sentence_transformers.models.Dense\",\"path\":\"2_Dense\"}]");
    expect_fail("after Normalize is not supported", NULL);
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"},"
                        "{\"type\":\"sentence_transformers.models.Dense\",\"path\":\"../2_Dense\"}]");
    expect_fail("leaves the model directory", NULL);
    put("4_Dense/config.json", "{\"in_features\":64,\"out_features\":64,\"bias\":true}"); /* Tanh by default */
    put("modules.json", "[{\"type\":\"sentence_transformers.models.Pooling\",\"path\":\"1_Pooling\"},"
                        "{\"type\":\"Dense\",\"path\":\"4_Dense\"},{\"type\":\"Dense\",\"path\":\"4_Dense\"},"
                        "{\"type\":\"Dense\",\"path\":\"4_Dense\"},{\"type\":\"Dense\",\"path\":\"4_Dense\"},"
                        "{\"type\":\"Dense\",\"path\":\"4_Dense\"}]");
    expect_fail("more than 4 Dense modules", NULL);
}

static void test_config_errors(void) {
    fresh_dir();
    expect_fail("config.json: missing", NULL);
    put("config.json", "{\"model_type\":\"bert\",");
    expect_fail("config.json: not valid JSON", NULL);
    put("config.json", "[1]");
    expect_fail("config.json: expected a JSON object", NULL);
    put("config.json", "{\"hidden_size\":64}");
    expect_fail("config.json: required field model_type", NULL);
    put("config.json", "{\"architectures\":[\"Gemma2Model\"],\"hidden_size\":64}");
    expect_fail("config.json: required field model_type", NULL);
    /* pre-transformers-3 config: the class name stands in for model_type */
    put("config.json", "{\"architectures\":[\"RobertaModel\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100,"
                       "\"max_position_embeddings\":66}");
    eng_config c;
    if (load_ok(&c)) {
        CHECK(!strcmp(c.model_type, "roberta"));
        CHECK_EQ_INT(c.info.max_positions, 64);
        eng_config_free(&c);
    }
    put("config.json", "{\"model_type\":\"gemma2\",\"hidden_size\":64}");
    expect_fail("config.json: model_type 'gemma2' is not supported", NULL);
    /* MPNet: positions from 2 whatever pad_token_id says, no token types,
     * 32 relative buckets only (transformers computes 32 regardless) */
    put("config.json", "{\"model_type\":\"mpnet\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100,"
                       "\"max_position_embeddings\":514,\"pad_token_id\":0}");
    if (load_ok(&c)) {
        CHECK(!strcmp(c.info.arch, "mpnet"));
        CHECK_EQ_INT(c.info.max_positions, 512);
        CHECK_EQ_INT(c.position_offset, 2);
        CHECK_EQ_INT(c.pad_token_id, 1);
        CHECK_EQ_INT(c.info.type_vocab, 0);
        CHECK_EQ_INT(c.rel_buckets, 32);
        eng_config_free(&c);
    }
    put("config.json", "{\"architectures\":[\"MPNetForMaskedLM\"],\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100}");
    if (load_ok(&c)) {
        CHECK(!strcmp(c.model_type, "mpnet"));
        eng_config_free(&c);
    }
    put("config.json", "{\"model_type\":\"mpnet\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100,"
                       "\"relative_attention_num_buckets\":64}");
    expect_fail("config.json: relative_attention_num_buckets 64 is not supported", NULL);
    put("config.json", "{\"model_type\":\"mpnet\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100,"
                       "\"type_vocab_size\":2}");
    expect_fail("config.json: type_vocab_size 2: MPNet has no token type embeddings", NULL);
    put("config.json", "{\"model_type\":\"bert\",\"hidden_size\":\"384\",\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100}");
    expect_fail("config.json: field hidden_size must be an integer", NULL);
    put("config.json", "{\"model_type\":\"bert\",\"hidden_size\":64.5,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100}");
    expect_fail("hidden_size must be an integer", NULL);
    put("config.json", "{\"model_type\":\"bert\",\"hidden_size\":-64,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100}");
    expect_fail("hidden_size = -64 is outside", NULL);
    put("config.json", "{\"model_type\":\"bert\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":4,\"vocab_size\":100}");
    expect_fail("required field intermediate_size is missing", NULL);
    put("config.json", "{\"model_type\":\"bert\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":5,\"intermediate_size\":128,\"vocab_size\":100}");
    expect_fail("not a multiple of 5 attention heads", NULL);
    put("config.json", "{\"model_type\":\"bert\",\"hidden_size\":64,\"num_hidden_layers\":2,\"hidden_act\":\"quick_gelu\","
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100}");
    expect_fail("hidden_act 'quick_gelu' is not supported", NULL);
    put("config.json", "{\"model_type\":\"bert\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"position_embedding_type\":\"relative_key\","
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100}");
    expect_fail("position_embedding_type 'relative_key'", NULL);
    put("config.json", "{\"model_type\":\"bert\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                       "\"layer_norm_eps\":\"small\","
                       "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100}");
    expect_fail("layer_norm_eps must be a number", NULL);
    put("config.json", "{\"model_type\":7}");
    expect_fail("model_type must be a string", NULL);
}

static void test_roberta_family(void) {
    static const char *types[] = {"roberta", "xlm-roberta", "camembert"};
    for (int i = 0; i < 3; i++) {
        fresh_dir();
        char cfg[512];
        snprintf(cfg, sizeof cfg, "{\"model_type\":\"%s\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                 "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":250002,"
                 "\"max_position_embeddings\":514,\"type_vocab_size\":1,\"pad_token_id\":1,"
                 "\"layer_norm_eps\":1e-05}", types[i]);
        put("config.json", cfg);
        put("sentence_bert_config.json", "{\"max_seq_length\":8192,\"do_lower_case\":false}");
        eng_config c;
        if (!load_ok(&c)) continue;
        CHECK_EQ_INT(c.position_offset, 2);
        CHECK_EQ_INT(c.info.max_positions, 512);
        CHECK_EQ_INT(c.max_position_embeddings, 514);
        CHECK_EQ_INT(c.info.max_seq_len, 512); /* clamped */
        CHECK_EQ_INT(c.info.type_vocab, 1);
        CHECK(c.ln_eps == 1e-5);
        CHECK(!strcmp(c.info.arch, i == 1 ? "xlm-roberta" : "roberta"));
        CHECK(!strcmp(c.model_type, types[i]));
        eng_config_free(&c);
    }
    put("sentence_bert_config.json", "{\"max_seq_length\":\"long\"}");
    expect_fail("sentence_bert_config.json: field max_seq_length must be an integer", NULL);
    put("sentence_bert_config.json", "{\"max_seq_length\":100,\"do_lower_case\":true}");
    eng_config c;
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.info.max_seq_len, 100);
        CHECK_EQ_INT(c.do_lower_case, 1);
        eng_config_free(&c);
    }
}

static void test_distilbert(void) {
    fresh_dir();
    put("config.json", "{\"model_type\":\"distilbert\",\"dim\":768,\"n_layers\":6,\"n_heads\":12,"
                       "\"hidden_dim\":3072,\"vocab_size\":30522,\"max_position_embeddings\":512,"
                       "\"activation\":\"gelu\",\"pad_token_id\":0}");
    eng_config c;
    if (!load_ok(&c)) return;
    CHECK(!strcmp(c.info.arch, "distilbert"));
    CHECK_EQ_INT(c.info.hidden, 768);
    CHECK_EQ_INT(c.info.intermediate, 3072);
    CHECK_EQ_INT(c.info.type_vocab, 0);
    CHECK_EQ_INT(c.head_dim, 64);
    eng_config_free(&c);
}

static void test_qwen3_prompts(void) {
    fresh_dir();
    put("config.json", "{\"model_type\":\"qwen3\",\"hidden_size\":1024,\"num_hidden_layers\":28,"
                       "\"num_attention_heads\":16,\"num_key_value_heads\":8,\"head_dim\":128,"
                       "\"intermediate_size\":3072,\"vocab_size\":151669,\"max_position_embeddings\":32768,"
                       "\"rms_norm_eps\":1e-06,\"rope_theta\":1000000,\"hidden_act\":\"silu\","
                       "\"tie_word_embeddings\":true,\"rope_scaling\":null}");
    put("modules.json", MODULES_PN);
    put("1_Pooling/config.json", "{\"word_embedding_dimension\":1024,\"pooling_mode_lasttoken\":true,"
                                 "\"include_prompt\":true}");
    put("sentence_bert_config.json", "{\"max_seq_length\":8192}");
    put("config_sentence_transformers.json",
        "{\"prompts\":{\"query\":\"Instruct: Given a web search query\\nQuery:\",\"document\":\"\"},"
        "\"default_prompt_name\":null,\"similarity_fn_name\":\"cosine\"}");
    eng_config c;
    if (!load_ok(&c)) return;
    CHECK(!strcmp(c.info.arch, "qwen3"));
    CHECK_EQ_INT(c.info.kv_heads, 8);
    CHECK_EQ_INT(c.head_dim, 128);
    CHECK_EQ_INT(c.info.causal, 1);
    CHECK_EQ_INT(c.info.type_vocab, 0);
    CHECK_EQ_INT(c.info.max_positions, 32768);
    CHECK_EQ_INT(c.info.max_seq_len, 8192);
    CHECK_EQ_INT(c.info.pooling, POSY_POOL_LAST);
    CHECK_EQ_INT(c.info.normalize, 1);
    CHECK_EQ_INT(c.act, ENG_ACT_SILU);
    CHECK(c.rope.theta == 1e6 && c.ln_eps == 1e-6 && c.tie_word_embeddings == 1);
    CHECK_EQ_INT(c.n_prompts, 2);
    const char *q = eng_config_prompt(&c, "query");
    CHECK(q && !strcmp(q, "Instruct: Given a web search query\nQuery:"));
    CHECK(eng_config_prompt(&c, "document") && !eng_config_prompt(&c, "document")[0]);
    CHECK(eng_config_prompt(&c, "nope") == NULL);
    CHECK(c.default_prompt_name[0] == 0);
    eng_config_free(&c);

    put("config_sentence_transformers.json", "{\"prompts\":{\"query\":\"q: \"},\"default_prompt_name\":\"query\"}");
    if (load_ok(&c)) { CHECK(!strcmp(c.default_prompt_name, "query")); eng_config_free(&c); }
    put("config_sentence_transformers.json", "{\"prompts\":{\"query\":\"q: \"},\"default_prompt_name\":\"passage\"}");
    expect_fail("default_prompt_name 'passage' is not one of the prompts", NULL);
    put("config_sentence_transformers.json", "{\"prompts\":{\"query\":5}}");
    expect_fail("config_sentence_transformers.json: prompt 'query'", NULL);
    put("config_sentence_transformers.json", "{\"prompts\":[\"q\"]}");
    expect_fail("prompts must be an object", NULL);
    put("config_sentence_transformers.json", "{}");
    put("config.json", "{\"model_type\":\"qwen3\",\"hidden_size\":1024,\"num_hidden_layers\":28,"
                       "\"num_attention_heads\":16,\"num_key_value_heads\":5,\"intermediate_size\":3072,"
                       "\"vocab_size\":151669}");
    expect_fail("not a multiple of num_key_value_heads 5", NULL);
    put("config.json", "{\"model_type\":\"qwen3\",\"hidden_size\":1024,\"num_hidden_layers\":28,"
                       "\"num_attention_heads\":16,\"intermediate_size\":3072,\"vocab_size\":151669,"
                       "\"rope_scaling\":{\"type\":\"yarn\"}}");
    expect_fail("rope_scaling", NULL);
}

/* Found by tests/fuzz/fuzz_config.c: without head_dim, posy took
 * hidden / heads, which came to 0 for hidden_size 2 with 6 heads.
 * transformers' Qwen3Config defaults head_dim to 128 whatever the sizes, so
 * posy does too; an explicit 0 is refused. */
static void test_qwen3_head_dim_default(void) {
    eng_config c;
    fresh_dir();
    put("config.json", "{\"architectures\":[\"Qwen3\"],\"hidden_size\":2,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":6,\"intermediate_size\":2,\"vocab_size\":1}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.head_dim, 128); eng_config_free(&c); }
    put("config.json", "{\"model_type\":\"qwen3\",\"hidden_size\":2560,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":32,\"intermediate_size\":64,\"vocab_size\":10}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.head_dim, 128); eng_config_free(&c); }   /* not 2560 / 32 = 80 */
    put("config.json", "{\"model_type\":\"qwen3\",\"hidden_size\":2,\"num_hidden_layers\":2,\"head_dim\":64,"
                       "\"num_attention_heads\":6,\"intermediate_size\":2,\"vocab_size\":1}");
    if (load_ok(&c)) { CHECK_EQ_INT(c.head_dim, 64); eng_config_free(&c); }
    put("config.json", "{\"model_type\":\"qwen3\",\"hidden_size\":64,\"num_hidden_layers\":2,\"head_dim\":0,"
                       "\"num_attention_heads\":4,\"intermediate_size\":2,\"vocab_size\":1}");
    expect_fail("field head_dim = 0 is outside [1, 4096]", NULL);
}

/* A cross-encoder reranker: ...ForSequenceClassification with one label
 * gets CLS pooling and its head as two Dense layers named in the
 * checkpoint; several labels make a classifier (names from id2label, the
 * scores' rule from problem_type); broken labels, or a head on a family
 * posy has none for, are refused by name. */
static void test_rerank_config(void) {
    static const char *BERT_HEAD = "\"model_type\":\"bert\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                                   "\"num_attention_heads\":4,\"intermediate_size\":128,\"vocab_size\":100";
    char cfg[512];
    fresh_dir();
    snprintf(cfg, sizeof cfg, "{%s,\"architectures\":[\"BertForSequenceClassification\"],\"id2label\":{\"0\":\"LABEL_0\"}}",
             BERT_HEAD);
    put("config.json", cfg);
    eng_config c;
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.rerank, 1);
        CHECK_EQ_INT(c.info.pooling, POSY_POOL_CLS);
        CHECK_EQ_INT(c.info.normalize, 0);
        CHECK_EQ_INT(c.info.dim, 1);
        CHECK_EQ_INT(c.n_dense, 2);
        CHECK(!strcmp(c.dense[0].wname, "bert.pooler.dense.weight") && c.dense[0].act == ENG_DENSE_TANH);
        CHECK(!strcmp(c.dense[1].wname, "classifier.weight") && c.dense[1].out == 1);
        eng_config_free(&c);
    }
    snprintf(cfg, sizeof cfg, "{%s,\"architectures\":[\"BertForSequenceClassification\"],\"num_labels\":1}", BERT_HEAD);
    put("config.json", cfg);
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.rerank, 1);
        eng_config_free(&c);
    }
    snprintf(cfg, sizeof cfg, "{%s,\"architectures\":[\"BertForSequenceClassification\"],"
             "\"id2label\":{\"1\":\"pos\",\"0\":\"neg\",\"2\":\"mixed\"}}", BERT_HEAD);
    put("config.json", cfg);   /* a classifier: id2label's names in id order, softmax scores */
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.rerank, 1);
        CHECK_EQ_INT(c.n_labels, 3);
        CHECK_EQ_INT(c.info.dim, 3);
        CHECK_EQ_INT(c.dense[1].out, 3);
        CHECK(!strcmp(c.labels[0], "neg") && !strcmp(c.labels[1], "pos") && !strcmp(c.labels[2], "mixed"));
        CHECK_EQ_INT(c.score_fn, ENG_SCORE_SOFTMAX);
        eng_config_free(&c);
        CHECK(c.labels == NULL && c.n_labels == 0);
    }
    snprintf(cfg, sizeof cfg, "{%s,\"architectures\":[\"BertForSequenceClassification\"]}", BERT_HEAD);
    put("config.json", cfg);   /* transformers' default: two labels, LABEL_<i> */
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.n_labels, 2);
        CHECK(!strcmp(c.labels[0], "LABEL_0") && !strcmp(c.labels[1], "LABEL_1"));
        eng_config_free(&c);
    }
    /* transformers' pipeline rule for the scores */
    static const struct { const char *extra; eng_score_fn fn; } rules[] = {
        {"\"num_labels\":4,\"problem_type\":\"multi_label_classification\"", ENG_SCORE_SIGMOID},
        {"\"num_labels\":1,\"problem_type\":\"regression\"", ENG_SCORE_NONE},
        {"\"num_labels\":1", ENG_SCORE_SIGMOID},
        {"\"num_labels\":5,\"problem_type\":\"single_label_classification\"", ENG_SCORE_SOFTMAX},
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        snprintf(cfg, sizeof cfg, "{%s,\"architectures\":[\"BertForSequenceClassification\"],%s}", BERT_HEAD,
                 rules[i].extra);
        put("config.json", cfg);
        if (load_ok(&c)) {
            CHECK_EQ_INT(c.score_fn, rules[i].fn);
            eng_config_free(&c);
        }
    }
    static const struct { const char *extra, *want; } bad[] = {
        {"\"id2label\":{\"0\":\"a\",\"0x\":\"b\"}", "id2label key '0x' is not a label id 0..1"},
        {"\"id2label\":{\"0\":\"a\",\"-1\":\"b\"}", "id2label key '-1'"},
        {"\"id2label\":{\"1\":null,\"0\":\"a\"}", "id2label[\"1\"] is not a string"},
        {"\"id2label\":[\"a\"]", "id2label is not an object"},
        {"\"id2label\":{}", "a classifier of 0 labels"},
        {"\"num_labels\":100000", "a classifier of 100000 labels; posy runs 1 to 16384"},
        {"\"num_labels\":\"3\"", "num_labels is not an integer"},
        {"\"num_labels\":2,\"problem_type\":\"ranking\"", "problem_type 'ranking' is not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cfg, sizeof cfg, "{%s,\"architectures\":[\"BertForSequenceClassification\"],%s}", BERT_HEAD,
                 bad[i].extra);
        put("config.json", cfg);
        expect_fail(bad[i].want, NULL);
    }
    /* a decoder's classifier: transformers' score head on the last token, the pad id kept for the gateway */
    static const char *QW = "\"model_type\":\"qwen3\",\"hidden_size\":64,\"num_hidden_layers\":2,"
                            "\"num_attention_heads\":4,\"num_key_value_heads\":2,\"head_dim\":16,"
                            "\"intermediate_size\":128,\"vocab_size\":100,"
                            "\"architectures\":[\"Qwen3ForSequenceClassification\"],\"num_labels\":1";
    snprintf(cfg, sizeof cfg, "{%s,\"pad_token_id\":7}", QW);
    put("config.json", cfg);
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.rerank_decoder, 1);
        CHECK_EQ_INT(c.cls_pad_id, 7);
        CHECK_EQ_INT(c.info.pooling, POSY_POOL_LAST);
        CHECK_EQ_INT(c.info.causal, 1);
        CHECK_EQ_INT(c.n_dense, 1);
        CHECK(!strcmp(c.dense[0].wname, "score.weight") && c.dense[0].bias == 0 && c.dense[0].out == 1);
        CHECK_EQ_INT(c.info.dim, 1);
        eng_config_free(&c);
    }
    snprintf(cfg, sizeof cfg, "{%s,\"pad_token_id\":null}", QW);
    put("config.json", cfg);   /* no pad token: transformers pools the very last token */
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.cls_pad_id, -1);
        eng_config_free(&c);
    }
    put("config.json", "{\"model_type\":\"t5\",\"d_model\":64,\"d_kv\":16,\"d_ff\":96,\"num_layers\":2,"
                       "\"num_heads\":4,\"vocab_size\":100,\"architectures\":[\"T5ForSequenceClassification\"],"
                       "\"num_labels\":1}");
    expect_fail("a sequence-classification head on model_type 't5' is not supported", NULL);
    snprintf(cfg, sizeof cfg, "{%s,\"architectures\":[\"BertModel\"]}", BERT_HEAD);
    put("config.json", cfg);
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.rerank, 0);
        CHECK_EQ_INT(c.info.dim, 64);
        eng_config_free(&c);
    }
    put("config.json", "{\"model_type\":\"mpnet\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                       "\"intermediate_size\":128,\"vocab_size\":100,\"architectures\":[\"MPNetForSequenceClassification\"],"
                       "\"num_labels\":1}");
    expect_fail("a sequence-classification head on model_type 'mpnet' is not supported", NULL);
    /* ModernBERT's head: its pooling, activation and biases from the config */
    static const char *MB = "\"model_type\":\"modernbert\",\"hidden_size\":64,\"num_hidden_layers\":3,"
                            "\"num_attention_heads\":4,\"intermediate_size\":96,\"vocab_size\":512,"
                            "\"architectures\":[\"ModernBertForSequenceClassification\"],\"num_labels\":1";
    snprintf(cfg, sizeof cfg, "{%s,\"classifier_pooling\":\"mean\",\"classifier_bias\":true,\"norm_bias\":true}", MB);
    put("config.json", cfg);
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.info.pooling, POSY_POOL_MEAN);
        CHECK(c.dense[0].act == ENG_DENSE_GELU && c.dense[0].bias == 1);
        CHECK(!strcmp(c.dense[0].lnw, "head.norm.weight") && !strcmp(c.dense[0].lnb, "head.norm.bias"));
        CHECK(!strcmp(c.dense[1].wname, "classifier.weight"));
        eng_config_free(&c);
    }
    snprintf(cfg, sizeof cfg, "{%s}", MB);   /* transformers' defaults: cls, gelu, no biases */
    put("config.json", cfg);
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.info.pooling, POSY_POOL_CLS);
        CHECK(c.dense[0].bias == 0 && !c.dense[0].bname[0] && !c.dense[0].lnb[0]);
        eng_config_free(&c);
    }
    snprintf(cfg, sizeof cfg, "{%s,\"classifier_pooling\":\"max\"}", MB);
    put("config.json", cfg);
    expect_fail("classifier_pooling 'max' is not supported", NULL);
    snprintf(cfg, sizeof cfg, "{%s,\"classifier_activation\":\"swish\"}", MB);
    put("config.json", cfg);
    expect_fail("classifier_activation 'swish' is not supported", NULL);
}

/* A SPLADE model: MLMTransformer + SpladePooling gives the vocabulary-wide
 * vector and the masked-LM head's names for the family (the decoder tied
 * to the word embeddings when the checkpoint has none); what sentence-
 * transformers would not run is refused by name. */
static void test_splade_config(void) {
    static const char *mods = "[{\"type\":\"sentence_transformers.sparse_encoder.modules.mlm_transformer.MLMTransformer\","
                              "\"path\":\"\"},{\"type\":\"sentence_transformers.sparse_encoder.modules.splade_pooling."
                              "SpladePooling\",\"path\":\"1_SpladePooling\"}]";
    fresh_dir();
    put("config.json", BERT_CFG);
    put("modules.json", mods);
    put("1_SpladePooling/config.json", "{\"pooling_strategy\":\"sum\",\"activation_function\":\"log1p_relu\","
                                       "\"embedding_dimension\":null}");
    eng_config c;
    if (load_ok(&c)) {
        CHECK_EQ_INT(c.splade, 1);
        CHECK(c.splade_sum == 1 && c.splade_log2 == 1);
        CHECK_EQ_INT(c.info.dim, c.info.vocab);
        CHECK_EQ_INT(c.info.normalize, 0);
        CHECK(!strcmp(c.splade_head[0].wname, "cls.predictions.transform.dense.weight") && c.splade_head[0].lnw[0]);
        CHECK(c.splade_head[1].out == c.info.vocab && !strcmp(c.splade_head[1].walt, "bert.embeddings.word_embeddings.weight"));
        eng_config_free(&c);
    }
    put("1_SpladePooling/config.json", "{}");   /* sentence-transformers' defaults: max, relu */
    if (load_ok(&c)) {
        CHECK(c.splade == 1 && c.splade_sum == 0 && c.splade_log2 == 0);
        eng_config_free(&c);
    }
    static const struct { const char *pool, *mods_tail, *want; } bad[] = {
        {"{\"pooling_strategy\":\"mean\"}", NULL, "pooling_strategy 'mean' is not supported"},
        {"{\"activation_function\":\"gelu\"}", NULL, "activation_function 'gelu' is not supported"},
        {"{\"embedding_dimension\":7}", NULL, "the embedding dimension 7 differs from the vocabulary's"},
        {"{}", ",{\"type\":\"sentence_transformers.models.Normalize\",\"path\":\"2_Normalize\"}",
         "a Dense or Normalize module after SpladePooling is not supported"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char m[1024];
        snprintf(m, sizeof m, "%.*s%s]", (int)strlen(mods) - 1, mods, bad[i].mods_tail ? bad[i].mods_tail : "");
        put("modules.json", m);
        put("1_SpladePooling/config.json", bad[i].pool);
        expect_fail(bad[i].want, NULL);
    }
    put("modules.json", mods);
    put("1_SpladePooling/config.json", "{}");
    put("config.json", "{\"model_type\":\"mpnet\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
                       "\"intermediate_size\":128,\"vocab_size\":100}");
    expect_fail("SPLADE on model_type 'mpnet' is not supported", NULL);
}

TEST_MAIN(TEST(test_minilm), TEST(test_defaults), TEST(test_pooling_modes), TEST(test_modules_errors), TEST(test_dense_modules),
          TEST(test_config_errors), TEST(test_roberta_family), TEST(test_distilbert), TEST(test_qwen3_prompts),
          TEST(test_qwen3_head_dim_default), TEST(test_rerank_config), TEST(test_splade_config),
          TEST(test_cleanup))

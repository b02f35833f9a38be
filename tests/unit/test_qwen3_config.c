/* test_qwen3_config: what eng_config reads for Qwen3 beyond the sizes
 * (test_config.c covers those and the prompts): rope_theta where
 * transformers >= 5 writes it (rope_parameters), the attention direction
 * flags of bidirectional variants (is_causal, use_bidirectional_attention),
 * and the refusals (a rope_type other than default, sliding windows, flags
 * of the wrong JSON type).  Each case writes a config into a temp dir. */
#include <ftw.h>
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

/* A fresh directory holding config.json = base sizes + `extra` fields. */
static void write_config(const char *extra) {
    if (g_dir[0]) nftw(g_dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
    snprintf(g_dir, sizeof g_dir, "/tmp/posy_q3cfg_XXXXXX");
    if (!mkdtemp(g_dir)) { CHECK_MSG(0, "mkdtemp failed"); return; }
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", g_dir);
    FILE *f = fopen(p, "wb");
    if (!f) { CHECK_MSG(0, "cannot write %s", p); return; }
    fprintf(f, "{\"model_type\":\"qwen3\",\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
               "\"num_key_value_heads\":2,\"head_dim\":32,\"intermediate_size\":128,\"vocab_size\":512%s%s}",
            extra[0] ? "," : "", extra);
    fclose(f);
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
    CHECK(c.rope_theta == 500000.0);
    eng_config_free(&c);
    write_config("\"rope_theta\":1000000,\"rope_parameters\":{\"rope_theta\":3.0}");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.rope_theta == 1000000.0);   /* top level wins */
    eng_config_free(&c);
    write_config("");
    CHECK_MSG(load(&c, &err) == 0, "%s", err.msg);
    CHECK(c.rope_theta == 10000.0);     /* transformers' default */
    eng_config_free(&c);
    write_config("\"rope_parameters\":{\"rope_theta\":1e6,\"rope_type\":\"yarn\",\"factor\":4}");
    CHECK(load(&c, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "rope_type 'yarn'");
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

static void test_cleanup(void) {
    if (g_dir[0]) nftw(g_dir, rm_cb, 8, FTW_DEPTH | FTW_PHYS);
}

TEST_MAIN(TEST(test_rope_theta_places), TEST(test_attention_direction), TEST(test_refusals), TEST(test_cleanup))

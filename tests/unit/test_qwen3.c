/* test_qwen3: the Qwen3-family decoders on the CPU engine against
 * transformers.
 *
 * tests/fixtures/qwen3/ holds two tiny random-weight Qwen3 embedding models
 * saved by transformers (tests/gen/gen_qwen3_fixtures.py) and
 * reference.json, the embeddings transformers computes for fixed token-id
 * sequences, each run alone, in both attention modes:
 *   causal/  fp32, no tensor prefix, last-token pooling, config causal
 *   bidir/   bf16, "model." prefix + lm_head, mean pooling, config
 *            "is_causal": false
 * For each model and each mode (the config's own, and the other one forced
 * through posy_engine_opts.attention) every sequence of one packed batch
 * must reach cosine >= 0.99999 with the reference, and the packed batch
 * must equal each sequence run alone (|diff| <= 1e-5).  The wrong mode must
 * miss the reference, so the check can fail.
 *
 * tests/fixtures/decoders/ (tests/gen/gen_decoder_fixtures.py) holds the
 * decoders without Qwen3's q/k norm, same checks, same reference layout:
 *   qwen2/    bias on q, k, v (not o), GQA, last-token pooling, causal
 *   mistral/  head_dim apart from hidden/heads, sliding_window 64 (posy's
 *             length cap: max_positions 64), last-token pooling, causal
 *   llama/    attention_bias (q, k, v and o), mean pooling, "is_causal":
 *             false
 *   modernbert/ ModernBERT (an encoder on this engine): LayerNorms, GELU GLU,
 *             two rotaries, a window binding from 18 tokens
 *   gemma3/   Gemma 3 (EmbeddingGemma): (1 + w) norms, post-attention and
 *             post-MLP norms, GeGLU, scaled embeddings, two rotaries and a
 *             sliding window that binds on the longer sequences
 *   llama3/   Llama 3.x's rope scaling (top-level "rope_scaling", an
 *             original context of 16 so that every band moves: the same
 *             weights without it give cosine 0.30), GQA, causal, last token
 *   t5/, t5g/ T5's encoder (an encoder on this engine): relative position
 *             bias, unscaled attention, relu MLP / T5 v1.1's gated-gelu
 *   gte/, gte_mixed/  GTE v1.5 / mGTE (model_type "new", remote code: the
 *             reference is new-impl's own NewModel): post-LayerNorm layers
 *             with biases, GELU(gate) * up, fixed / mixed NTK rotary, CLS /
 *             mean pooling, packed / separate Q K V, "new." prefix
 *   jina/     JinaBERT v2 (model_type "bert" with ALiBi; remote code): the
 *             post-norm layer, ALiBi's bias for 6 heads, GeGLU, token types
 *   nomic/    NomicBERT (nomic-embed-text; an encoder on this engine):
 *             post-LayerNorm layers, rotary, SwiGLU, token type row 0
 *             added before the embedding LayerNorm; config.json in the
 *             hub's own keys (n_embd, rotary_emb_base, ...), and the same
 *             weights under transformers' config (config_transformers.json)
 *             must give the same vectors
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cpu/eng_cpu_gemm_packed.h" /* eng_cpu_gemm_choice: whether the linears run packed */
#include "posy_engine.h"
#include "posy_test.h"

#define FIX "tests/fixtures/qwen3"
#define FIX_DEC "tests/fixtures/decoders"
#define MAXS 16
#define MAXT 4096

static json_t *ref_root;
static int32_t ids[MAXT], cu[MAXS + 1];
static int n_seqs;
static const char *g_root; /* the fixture folder being checked */

/* POSY_QWEN3_FIXTURES=DIR runs the same checks on a fixture made with
 * gen_qwen3_fixtures.py --full DIR (real Qwen3-0.6B sizes, long sequences). */
static const char *fix_dir(void) {
    const char *d = getenv("POSY_QWEN3_FIXTURES");
    return d && *d ? d : FIX;
}

static void load_ref(const char *root) {
    json_error_t je;
    char path[512];
    g_root = root;
    if (ref_root) json_decref(ref_root);
    snprintf(path, sizeof path, "%s/reference.json", root);
    ref_root = json_load_file(path, 0, &je);
    CHECK_MSG(ref_root != NULL, "%s", je.text);
    json_t *seqs = json_object_get(ref_root, "sequences");
    n_seqs = (int)json_array_size(seqs);
    cu[0] = 0;
    CHECK(n_seqs <= MAXS);
    for (int s = 0; s < n_seqs && s < MAXS; s++) {
        json_t *q = json_array_get(seqs, s);
        if (cu[s] + (int)json_array_size(q) > MAXT) { n_seqs = s; CHECK(!"sequences over MAXT tokens"); break; }
        cu[s + 1] = cu[s] + (int)json_array_size(q);
        for (size_t i = 0; i < json_array_size(q); i++) ids[cu[s] + i] = (int32_t)json_integer_value(json_array_get(q, i));
    }
}

/* name: a folder of g_root, or an absolute path */
static posy_engine *open_model(const char *name, posy_attention att) {
    char dir[1024];
    if (name[0] == '/') snprintf(dir, sizeof dir, "%s", name);
    else snprintf(dir, sizeof dir, "%s/%s", g_root, name);
    posy_engine_opts o = {0};
    o.device = POSY_DEVICE_CPU;
    o.n_threads = 2;
    o.max_batch_tokens = MAXT;
    o.max_batch_seqs = 16;
    o.attention = att;
    posy_err err;
    posy_err_clear(&err);
    posy_engine *e = posy_engine_open(dir, &o, &err);
    CHECK_MSG(e != NULL, "%s: %s", dir, err.msg);
    return e;
}

static int run(posy_engine *e, const int32_t *tok, const int32_t *c, int n, float *out) {
    posy_batch b = {7, n, c[n], tok, NULL, c, out, NULL, NULL};
    posy_result r[4];
    posy_err err;
    posy_err_clear(&err);
    int k = posy_engine_step(e, &b, r, 4, &err);
    if (k == 0) k = posy_engine_wait(e, r, 4);
    CHECK_MSG(k == 1 && r[0].status == 0, "step: %d %s", k, err.msg);
    return k == 1 && r[0].status == 0 ? 0 : -1;
}

/* min over sequences of cosine(out[s], reference[s]); *at = its index */
static int worst_at;
static double min_cos(const float *out, int H, json_t *refs) {
    double worst = 2;
    for (int s = 0; s < n_seqs; s++) {
        json_t *r = json_array_get(refs, s);
        double dot = 0, na = 0, nb = 0;
        for (int i = 0; i < H; i++) {
            double a = out[(size_t)s * H + i], b = json_real_value(json_array_get(r, i));
            dot += a * b; na += a * a; nb += b * b;
        }
        double c = dot / sqrt(na * nb);
        if (c < worst) { worst = c; worst_at = s; }
    }
    return worst;
}

/* every attention mode (last_mode POSY_ATTN_BIDIRECTIONAL), or the model's
 * own only (POSY_ATTN_MODEL: an encoder, which refuses --attention) */
static void check_dir_modes(const char *name, const char *dir, int config_causal, int last_mode) {
    json_t *m = json_object_get(json_object_get(ref_root, "models"), name);
    CHECK(m != NULL);
    if (!m) return;
    const char *pool = json_string_value(json_object_get(m, "pooling"));
    const int want_pool = !strcmp(pool, "last") ? POSY_POOL_LAST : !strcmp(pool, "cls") ? POSY_POOL_CLS : POSY_POOL_MEAN;
    for (int mode = POSY_ATTN_MODEL; mode <= last_mode; mode++) {
        posy_engine *e = open_model(dir, (posy_attention)mode);
        if (!e) continue;
        const posy_model_info *mi = posy_engine_info(e);
        int causal = mode == POSY_ATTN_MODEL ? config_causal : mode == POSY_ATTN_CAUSAL;
        CHECK_EQ_INT(mi->causal, causal);
        CHECK_EQ_INT(mi->pooling, want_pool);
        int H = mi->hidden;
        float *packed = calloc((size_t)n_seqs * H, sizeof(float)), *one = calloc((size_t)H, sizeof(float));
        if (run(e, ids, cu, n_seqs, packed) == 0) {
            double good = min_cos(packed, H, json_object_get(m, causal ? "causal" : "bidirectional"));
            int at = worst_at;
            double wrong = min_cos(packed, H, json_object_get(m, causal ? "bidirectional" : "causal"));
            printf("  %s mode %d: min cos %.9f at sequence %d of %d tokens (other mode's reference %.6f)\n", name, mode,
                   good, at, cu[at + 1] - cu[at], wrong);
            CHECK_MSG(good >= 0.99999, "%s mode %d: min cosine %.9f", name, mode, good);
            CHECK_MSG(wrong < 0.9999, "%s mode %d: the other mode's reference also matches (%.9f)", name, mode, wrong);
            /* alone as in the batch: bit for bit where the linears run on the
             * packed kernel (a row's sums do not depend on the batch around
             * it; OpenBLAS's may, hence 1e-5 without it) */
            const float tol = eng_cpu_gemm_choice() != ENG_CPU_ISA_NONE ? 0.f : 1e-5f;
            for (int s = 0; s < n_seqs; s++) {
                int32_t c1[2] = {0, cu[s + 1] - cu[s]};
                if (run(e, ids + cu[s], c1, 1, one) == 0)
                    CHECK_MSG(posy_test_close(one, packed + (size_t)s * H, (size_t)H, tol, 0), "%s seq %d alone", name, s);
            }
        }
        free(packed);
        free(one);
        posy_engine_close(e);
    }
}

/* NomicBERT: the hub's config.json (Nomic's keys), then the same folder
 * with transformers' config (config_transformers.json as config.json, in a
 * temporary folder of links); --attention refused (*o asks for causal). */
static void check_nomic(const posy_engine_opts *o) {
    check_dir_modes("nomic", "nomic", 0, POSY_ATTN_MODEL);
    posy_err err;
    posy_err_clear(&err);
    CHECK(posy_engine_open(FIX_DEC "/nomic", o, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "encoder");
    char tmpl[] = "/tmp/posy_nomic_XXXXXX", src[2048], dst[2048], cwd[1024];
    const char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL && getcwd(cwd, sizeof cwd) != NULL);
    if (!dir) return;
    static const char *const files[][2] = {{"config_transformers.json", "config.json"},
                                           {"model.safetensors", "model.safetensors"},
                                           {"tokenizer.json", "tokenizer.json"}, {"modules.json", "modules.json"},
                                           {"1_Pooling", "1_Pooling"}};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(src, sizeof src, "%s/" FIX_DEC "/nomic/%s", cwd, files[i][0]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i][1]);
        CHECK_MSG(symlink(src, dst) == 0, "symlink %s", dst);
    }
    check_dir_modes("nomic", dir, 0, POSY_ATTN_MODEL);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i][1]);
        unlink(dst);
    }
    rmdir(dir);
}

static void check_model_modes(const char *name, int config_causal, int last_mode) {
    check_dir_modes(name, name, config_causal, last_mode);
}

static void check_model(const char *name, int config_causal) {
    check_model_modes(name, config_causal, POSY_ATTN_BIDIRECTIONAL);
}

static void test_qwen3_causal(void) { check_model("causal", 1); }
static void test_qwen3_bidir(void) { check_model("bidir", 0); }

/* The decoders without the q/k norm: the same checks, and the length cap
 * Mistral's sliding window sets. */
static void test_decoders(void) {
    load_ref(FIX_DEC);
    CHECK(n_seqs >= 6);
    check_model("qwen2", 1);
    check_model("mistral", 1);
    check_model("llama", 0);
    check_model("llama3", 1);
    check_model("gemma3", 0); /* EmbeddingGemma's layer; its window binds at 40 and 64 tokens */
    posy_engine *e = open_model("mistral", POSY_ATTN_MODEL);
    if (e) {
        CHECK_EQ_INT(posy_engine_info(e)->max_positions, 64);
        posy_engine_close(e);
    }
    e = open_model("gemma3", POSY_ATTN_MODEL); /* Gemma's window is masked, not a length cap */
    if (e) {
        CHECK_EQ_INT(posy_engine_info(e)->max_positions, 256);
        posy_engine_close(e);
    }
    /* ModernBERT: an encoder on this engine (its own mode only; --attention refused) */
    check_model_modes("modernbert", 0, POSY_ATTN_MODEL);
    posy_engine_opts o = {0};
    o.device = POSY_DEVICE_CPU;
    o.attention = POSY_ATTN_CAUSAL;
    posy_err err;
    posy_err_clear(&err);
    CHECK(posy_engine_open(FIX_DEC "/modernbert", &o, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "encoder");
    /* T5's encoder (relu MLP; T5 v1.1's gated-gelu with d_kv apart from
     * d_model / heads): the same, --attention refused too */
    check_model_modes("t5", 0, POSY_ATTN_MODEL);
    check_model_modes("t5g", 0, POSY_ATTN_MODEL);
    /* only layer 0 packed, layer 1 on OpenBLAS with its loaded weights (what
     * running out of memory at layer 1 leaves): still the reference */
    if (eng_cpu_gemm_choice() != ENG_CPU_ISA_NONE) {
        setenv("POSY_CPU_PACK_LAYERS", "1", 1);
        json_t *m = json_object_get(json_object_get(ref_root, "models"), "qwen2");
        posy_engine *pe = open_model("qwen2", POSY_ATTN_MODEL);
        if (pe && m) {
            const int H = posy_engine_info(pe)->hidden;
            float *out = calloc((size_t)n_seqs * H, sizeof(float));
            if (run(pe, ids, cu, n_seqs, out) == 0) {
                double good = min_cos(out, H, json_object_get(m, "causal"));
                CHECK_MSG(good >= 0.99999, "qwen2 with one layer packed: min cosine %.9f", good);
            }
            free(out);
        }
        if (pe) posy_engine_close(pe);
        unsetenv("POSY_CPU_PACK_LAYERS");
    }
    posy_err_clear(&err);
    CHECK(posy_engine_open(FIX_DEC "/t5", &o, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "encoder");
    check_nomic(&o);
    /* GTE v1.5 / mGTE (new-impl's NewModel): NomicBERT's layer with biases,
     * a GeGLU from up_gate, NTK-scaled rotary; both fixtures against that
     * code's own output, --attention refused */
    check_model_modes("gte", 0, POSY_ATTN_MODEL);
    check_model_modes("gte_mixed", 0, POSY_ATTN_MODEL);
    /* JinaBERT v2 (model_type bert, ALiBi; its reference a port of the remote
     * code, tests/gen/gen_decoder_fixtures.py): 6 heads, the slopes between
     * powers of two */
    check_model_modes("jina", 0, POSY_ATTN_MODEL);
    posy_err_clear(&err);
    CHECK(posy_engine_open(FIX_DEC "/gte", &o, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "encoder");
    json_decref(ref_root);
    ref_root = NULL;
}

static void test_qwen3_bad_attention_opt(void) {
    posy_engine_opts o = {0};
    o.device = POSY_DEVICE_CPU;
    o.attention = (posy_attention)7;
    posy_err err;
    posy_err_clear(&err);
    CHECK(posy_engine_open(FIX "/causal", &o, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "--attention");
}

/* --attention is for decoders: an encoder refuses it instead of running a
 * causal BERT nobody trained. */
static void test_attention_opt_encoder_refused(void) {
    posy_engine_opts o = {0};
    o.device = POSY_DEVICE_CPU;
    o.attention = POSY_ATTN_CAUSAL;
    posy_err err;
    posy_err_clear(&err);
    CHECK(posy_engine_open("tests/fixtures/eng_models/roberta", &o, &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "decoder");
}

static void test_qwen3_setup(void) { load_ref(fix_dir()); CHECK(n_seqs >= 4); }

TEST_MAIN(TEST(test_qwen3_setup), TEST(test_qwen3_causal), TEST(test_qwen3_bidir), TEST(test_qwen3_bad_attention_opt),
          TEST(test_attention_opt_encoder_refused), TEST(test_decoders))

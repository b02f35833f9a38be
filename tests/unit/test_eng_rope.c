/* test_eng_rope: the rotary's inverse frequencies (eng_rope.h) against
 * transformers' own, bit for bit: tests/fixtures/rope_inv_freq.json holds
 * the float32 bit patterns that transformers' rope functions returned for
 * real Llama 3.x parameters, a small original context (every llama3 band:
 * kept, smoothed, divided), linear scaling and the default
 * (tests/gen/gen_rope_fixture.py wrote it), with the unscaled frequencies
 * beside them.  The scaling applied to torch's unscaled frequency must give
 * transformers' bits exactly; posy's unscaled frequency (pow in double,
 * rounded) may differ from torch's vectorized powf by an ulp, so the
 * whole chain is allowed two.
 */
#include <jansson.h>
#include <stdint.h>
#include <string.h>
#include "eng_rope.h"
#include "posy_test.h"

static double num(json_t *o, const char *k, double def) {
    json_t *v = json_object_get(o, k);
    return v ? json_number_value(v) : def;
}

static void test_matches_transformers(void) {
    json_error_t jerr;
    json_t *root = json_load_file("tests/fixtures/rope_inv_freq.json", 0, &jerr);
    CHECK_MSG(root != NULL, "rope_inv_freq.json: %s", jerr.text);
    if (!root) return;
    json_t *cases = json_object_get(root, "cases");
    CHECK(json_array_size(cases) >= 5);
    int seen_llama3 = 0, seen_linear = 0;
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *k = json_array_get(cases, c), *rp = json_object_get(k, "rope"), *bits = json_object_get(k, "inv_freq_bits");
        const char *name = json_string_value(json_object_get(k, "name"));
        const char *type = json_string_value(json_object_get(rp, "rope_type"));
        int d = (int)json_integer_value(json_object_get(k, "head_dim"));
        eng_rope r = eng_rope_plain(num(rp, "rope_theta", 10000.0));
        if (!strcmp(type, "llama3")) {
            r.type = ENG_ROPE_LLAMA3;
            seen_llama3++;
        } else if (!strcmp(type, "linear")) {
            r.type = ENG_ROPE_LINEAR;
            seen_linear++;
        }
        r.factor = num(rp, "factor", 1.0);
        r.low_freq_factor = num(rp, "low_freq_factor", 1.0);
        r.high_freq_factor = num(rp, "high_freq_factor", 4.0);
        r.original_max = (int)num(rp, "original_max_position_embeddings", 0);
        CHECK_EQ_INT((int)json_array_size(bits), d / 2);
        if ((int)json_array_size(bits) != d / 2 || d > 512) continue;
        json_t *base = json_object_get(k, "base_bits");
        CHECK_EQ_INT((int)json_array_size(base), d / 2);
        if ((int)json_array_size(base) != d / 2) continue;
        float inv[256];
        eng_rope_inv_freq(inv, d, &r);
        int bad = 0, off = 0;
        for (int i = 0; i < d / 2; i++) {
            uint32_t b_want = (uint32_t)json_integer_value(json_array_get(base, (size_t)i));
            uint32_t want = (uint32_t)json_integer_value(json_array_get(bits, (size_t)i));
            float tb, w;
            memcpy(&tb, &b_want, 4);
            memcpy(&w, &want, 4);
            /* the scaling of torch's own unscaled frequency: exact */
            const float scaled = eng_rope_scale(tb, &r);
            uint32_t got;
            memcpy(&got, &scaled, 4);
            if (got != want && bad++ < 4)
                CHECK_MSG(0, "%s: scale(inv_freq[%d] = %.9g) = %.9g, transformers %.9g", name, i, tb, scaled, w);
            /* posy's whole computation: within an ulp of torch's powf, and
             * the scaling at most doubles that */
            uint32_t mine;
            memcpy(&mine, &inv[i], 4);
            const int64_t ulp = (int64_t)mine - (int64_t)want;
            if ((ulp > 2 || ulp < -2) && off++ < 4)
                CHECK_MSG(0, "%s: inv_freq[%d] = %.9g, transformers %.9g (%lld ulp)", name, i, inv[i], w, (long long)ulp);
        }
        CHECK_MSG(off == 0, "%s: %d of %d frequencies more than 2 ulp off", name, off, d / 2);
        CHECK_MSG(bad == 0, "%s: %d of %d frequencies differ", name, bad, d / 2);
    }
    CHECK(seen_llama3 >= 3 && seen_linear >= 1);
    json_decref(root);
}

/* The scalings do what their names say, whatever transformers does: linear
 * divides every frequency, llama3 keeps the highest and divides the lowest. */
static void test_shapes(void) {
    float plain[64], lin[64], l3[64];
    eng_rope p = eng_rope_plain(500000.0), li = p, ll = p;
    li.type = ENG_ROPE_LINEAR;
    li.factor = 4.0;
    ll.type = ENG_ROPE_LLAMA3;
    ll.factor = 32.0;
    ll.low_freq_factor = 1.0;
    ll.high_freq_factor = 4.0;
    ll.original_max = 8192;
    eng_rope_inv_freq(plain, 128, &p);
    eng_rope_inv_freq(lin, 128, &li);
    eng_rope_inv_freq(l3, 128, &ll);
    CHECK(plain[0] == 1.0f);
    int lin_ok = 1;
    for (int i = 0; i < 64; i++) lin_ok &= lin[i] == plain[i] / 4.0f;
    CHECK(lin_ok);
    CHECK(l3[0] == plain[0] && l3[1] == plain[1]);           /* wavelength < 2048: kept */
    CHECK(l3[63] == plain[63] / 32.0f);                      /* wavelength > 8192: divided */
    int mid = 0;
    for (int i = 0; i < 64; i++) mid += l3[i] < plain[i] && l3[i] > plain[i] / 32.0f;
    CHECK(mid > 0);                                          /* the band in between, smoothed */
}

/* GTE's NTK scaling against its own remote code (new-impl's
 * NTKScalingRotaryEmbedding; tests/fixtures/rope_ntk.json, written by
 * tests/gen/gen_rope_ntk_fixture.py): fixed and mixed, the released
 * checkpoints' shapes; a factor <= 1 is the plain rotary there (the config
 * loader keeps ENG_ROPE_DEFAULT for it, as test_qwen3_config checks).
 * posy's pow / exp are not torch's vectorized ones: a few ulp allowed. */
static void test_ntk_matches_gte(void) {
    json_error_t jerr;
    json_t *root = json_load_file("tests/fixtures/rope_ntk.json", 0, &jerr);
    CHECK_MSG(root != NULL, "rope_ntk.json: %s", jerr.text);
    if (!root) return;
    json_t *cases = json_object_get(root, "cases");
    CHECK(json_array_size(cases) >= 6);
    int mixed = 0, plain = 0;
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *k = json_array_get(cases, c), *bits = json_object_get(k, "inv_freq_bits");
        const char *name = json_string_value(json_object_get(k, "name"));
        const int d = (int)json_integer_value(json_object_get(k, "head_dim"));
        eng_rope r = eng_rope_plain(num(k, "rope_theta", 10000.0));
        const double f = num(k, "factor", 1.0);
        json_t *b = json_object_get(k, "mixed_b");
        if (f > 1.0) {
            r.type = ENG_ROPE_NTK;
            r.factor = f;
            r.mixed_b = json_is_number(b) ? json_number_value(b) : 0.0;
            mixed += r.mixed_b > 0;
        } else {
            plain++;
        }
        CHECK_EQ_INT((int)json_array_size(bits), d / 2);
        if ((int)json_array_size(bits) != d / 2 || d > 512) continue;
        float inv[256], plain_inv[256];
        eng_rope p0 = eng_rope_plain(r.theta);
        eng_rope_inv_freq(inv, d, &r);
        eng_rope_inv_freq(plain_inv, d, &p0);
        int off = 0, moved = 0;
        for (int i = 0; i < d / 2; i++) {
            uint32_t want = (uint32_t)json_integer_value(json_array_get(bits, (size_t)i)), mine;
            float w;
            memcpy(&w, &want, 4);
            memcpy(&mine, &inv[i], 4);
            const int64_t ulp = (int64_t)mine - (int64_t)want;
            if ((ulp > 4 || ulp < -4) && off++ < 4)
                CHECK_MSG(0, "%s: inv_freq[%d] = %.9g, GTE's code %.9g (%lld ulp)", name, i, inv[i], w, (long long)ulp);
            moved += inv[i] != plain_inv[i];
        }
        CHECK_MSG(off == 0, "%s: %d of %d frequencies more than 4 ulp off", name, off, d / 2);
        /* the check can fail: a scaled case moves every frequency but the first (fixed NTK's i = 0 too) */
        if (r.type == ENG_ROPE_NTK) CHECK_MSG(moved >= d / 2 - 1, "%s: only %d frequencies scaled", name, moved);
    }
    CHECK(mixed >= 2 && plain >= 1);
    json_decref(root);
}

TEST_MAIN(TEST(test_matches_transformers), TEST(test_shapes), TEST(test_ntk_matches_gte))

/* test_cpu_decoder: the decoder kernels (eng_cpu_decoder.h), each fast
 * kernel against its reference at several sizes including a single token,
 * plus checks that do not trust the references:
 *   - GQA reference with kv_heads == heads equals the encoder's attention
 *     reference (same layout then), and with kv_heads < heads equals the
 *     encoder reference on K/V heads repeated per group (HF's repeat_kv);
 *   - rotary: position 0 is the identity, and q.k after rotation depends
 *     only on the distance between positions (what RoPE is for);
 *   - RMSNorm with unit weight leaves rows of mean square 1.
 * Tolerances |fast - ref| <= atol + rtol*|ref|:
 *   RMSNorm, head norms   1e-5 + 1e-5 (float vs double sum of squares)
 *   rotary                1e-6 + 1e-6 (same angles, float products)
 *   attention             1e-5 + 1e-5 (fast exp 1.24 ulp, float sums)
 *   SwiGLU                1e-6 + 1e-5 (expf vs exp)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/eng_cpu_decoder.h"
#include "cpu/eng_cpu_kernels.h"
#include "posy_test.h"

static uint64_t rs = 0x243f6a8885a308d3ull;
static float frand(float lo, float hi) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rs >> 40) & 0xffffff) / 16777216.0f;
}
static float *rvec(size_t n, float lo, float hi) {
    float *v = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) v[i] = frand(lo, hi);
    return v;
}
static float *dup(const float *v, size_t n) {
    float *c = malloc(sizeof(float) * (n ? n : 1));
    memcpy(c, v, sizeof(float) * n);
    return c;
}

static void test_rmsnorm(void) {
    static const int hs[] = {1, 7, 64, 1024};
    static const int rows[] = {1, 3, 40};
    for (int hi = 0; hi < 4; hi++)
        for (int ri = 0; ri < 3; ri++) {
            int H = hs[hi], R = rows[ri];
            float *x = rvec((size_t)R * H, -3, 3), *g = rvec(H, 0.5f, 1.5f);
            float *a = malloc(sizeof(float) * R * H), *b = malloc(sizeof(float) * R * H);
            eng_cpu_rmsnorm_ref(a, x, g, 1e-6f, R, H);
            eng_cpu_rmsnorm(b, x, g, 1e-6f, R, H);
            CHECK_MSG(posy_test_close(b, a, (size_t)R * H, 1e-5f, 1e-5f), "H=%d rows=%d", H, R);
            float *inplace = dup(x, (size_t)R * H);
            eng_cpu_rmsnorm(inplace, inplace, g, 1e-6f, R, H);
            CHECK(posy_test_close(inplace, b, (size_t)R * H, 0, 0));
            free(x); free(g); free(a); free(b); free(inplace);
        }
    /* unit weight: every row has mean square 1 (eps negligible here) */
    int H = 96;
    float *x = rvec(5 * H, -2, 2), *one = malloc(sizeof(float) * H), *y = malloc(sizeof(float) * 5 * H);
    for (int i = 0; i < H; i++) one[i] = 1.0f;
    eng_cpu_rmsnorm_ref(y, x, one, 1e-12f, 5, H);
    for (int r = 0; r < 5; r++) {
        double ss = 0;
        for (int i = 0; i < H; i++) ss += (double)y[r * H + i] * y[r * H + i];
        CHECK_MSG(fabs(ss / H - 1.0) < 1e-5, "row %d mean square %g", r, ss / H);
    }
    free(x); free(one); free(y);
}

static void test_rmsnorm_heads(void) {
    int T = 9, nh = 4, nkv = 2, d = 32;
    size_t ld = (size_t)(nh + 2 * nkv) * d;
    float *x = rvec(T * ld, -2, 2), *g = rvec(d, 0.5f, 1.5f);
    float *a = dup(x, T * ld), *b = dup(x, T * ld);
    eng_cpu_rmsnorm_heads_ref(a, ld, (size_t)nh * d, T, nkv, d, g, 1e-6f);
    eng_cpu_rmsnorm_heads(b, ld, (size_t)nh * d, T, nkv, d, g, 1e-6f);
    CHECK(posy_test_close(b, a, T * ld, 1e-5f, 1e-5f));
    /* only the K heads changed; each equals a plain RMSNorm of that head */
    int untouched = 1, match = 1;
    for (int t = 0; t < T; t++)
        for (size_t c = 0; c < ld; c++) {
            int in_k = c >= (size_t)nh * d && c < (size_t)(nh + nkv) * d;
            if (!in_k && a[t * ld + c] != x[t * ld + c]) untouched = 0;
        }
    float y[32];
    eng_cpu_rmsnorm_ref(y, x + 3 * ld + (size_t)(nh + 1) * d, g, 1e-6f, 1, d);
    for (int i = 0; i < d; i++) if (y[i] != a[3 * ld + (size_t)(nh + 1) * d + i]) match = 0;
    CHECK(untouched);
    CHECK(match);
    free(x); free(g); free(a); free(b);
}

static double dotf(const float *a, const float *b, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

static void test_rope(void) {
    static const int32_t cu[] = {0, 1, 6, 70};
    int nh = 4, nkv = 2, d = 32, T = 70;
    size_t ld = (size_t)(nh + 2 * nkv) * d;
    float *x = rvec(T * ld, -1, 1);
    float *a = dup(x, T * ld), *b = dup(x, T * ld);
    const eng_rope r6 = eng_rope_plain(1e6), r4 = eng_rope_plain(10000.0);
    eng_cpu_rope_ref(a, cu, 3, nh, nkv, d, &r6);
    eng_cpu_rope(b, cu, 3, nh, nkv, d, &r6);
    CHECK(posy_test_close(b, a, T * ld, 1e-6f, 1e-6f));
    /* position 0 of every sequence is unchanged; V columns are never touched */
    CHECK(posy_test_close(a, x, ld, 0, 0));
    CHECK(posy_test_close(a + 6 * ld, x + 6 * ld, ld, 0, 0));
    int v_same = 1;
    for (int t = 0; t < T; t++)
        for (size_t c = (size_t)(nh + nkv) * d; c < ld; c++) if (a[t * ld + c] != x[t * ld + c]) v_same = 0;
    CHECK(v_same);
    /* relative positions: same q at p and k at p-3 give the same dot for any p */
    float *y = malloc(sizeof(float) * T * ld);
    for (int t = 0; t < T; t++) memcpy(y + t * ld, x, sizeof(float) * ld); /* one row repeated */
    static const int32_t one[] = {0, 70};
    eng_cpu_rope(y, one, 1, nh, nkv, d, &r4);
    double d1 = dotf(y + 10 * ld, y + 7 * ld + nh * d, d);
    double d2 = dotf(y + 50 * ld, y + 47 * ld + nh * d, d);
    double d0 = dotf(y + 10 * ld, y + 10 * ld + nh * d, d), d3 = dotf(y + 50 * ld, y + 50 * ld + nh * d, d);
    CHECK_MSG(fabs(d1 - d2) < 1e-4, "%g vs %g", d1, d2);
    CHECK_MSG(fabs(d0 - d3) < 1e-4, "%g vs %g", d0, d3);
    CHECK_MSG(fabs(d1 - d0) > 1e-3, "rotation had no effect: %g vs %g", d1, d0);
    free(x); free(a); free(b); free(y);
}

/* K and V heads of a GQA layout repeated per group into an MHA layout. */
static float *expand_kv(const float *qkv, int T, int nh, int nkv, int d) {
    size_t ld = (size_t)(nh + 2 * nkv) * d, ld2 = (size_t)3 * nh * d;
    float *m = malloc(sizeof(float) * T * ld2);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < nh; h++) {
            int g = h / (nh / nkv);
            memcpy(m + t * ld2 + (size_t)h * d, qkv + t * ld + (size_t)h * d, sizeof(float) * d);
            memcpy(m + t * ld2 + (size_t)(nh + h) * d, qkv + t * ld + (size_t)(nh + g) * d, sizeof(float) * d);
            memcpy(m + t * ld2 + (size_t)(2 * nh + h) * d, qkv + t * ld + (size_t)(nh + nkv + g) * d,
                   sizeof(float) * d);
        }
    return m;
}

static void check_gqa(const int32_t *cu, int n_seqs, int nh, int nkv, int d, int causal) {
    int T = cu[n_seqs];
    size_t ld = (size_t)(nh + 2 * nkv) * d, no = (size_t)T * nh * d;
    float *qkv = rvec(T * ld, -1.5f, 1.5f);
    float *ref = malloc(sizeof(float) * no), *fast = malloc(sizeof(float) * no), *mha = malloc(sizeof(float) * no);
    eng_cpu_attention_gqa_ref(ref, qkv, cu, n_seqs, nh, nkv, d, causal);
    float *ex = expand_kv(qkv, T, nh, nkv, d);
    eng_cpu_attention_ref(mha, ex, cu, n_seqs, nh, d, causal, NULL);
    CHECK_MSG(posy_test_close(ref, mha, no, 1e-5f, 1e-5f), "ref vs repeat_kv T=%d nh=%d nkv=%d causal=%d", T, nh,
              nkv, causal);
    int longest = 0;
    for (int s = 0; s < n_seqs; s++) if (cu[s + 1] - cu[s] > longest) longest = cu[s + 1] - cu[s];
    size_t sf = eng_cpu_attention_scratch_floats(longest, 4);
    float *scratch = malloc(sizeof(float) * sf);
    CHECK_EQ_INT(eng_cpu_attention_gqa(fast, qkv, cu, n_seqs, nh, nkv, d, causal, 0, scratch, sf), 0);
    CHECK_MSG(posy_test_close(fast, ref, no, 1e-5f, 1e-5f), "fast T=%d nh=%d nkv=%d causal=%d", T, nh, nkv, causal);
    /* scratch for 5 query rows of one thread: smaller tiles, same result */
    memset(fast, 0, sizeof(float) * no);
    CHECK_EQ_INT(eng_cpu_attention_gqa(fast, qkv, cu, n_seqs, nh, nkv, d, causal, 0, scratch, (size_t)longest * 5), 0);
    CHECK_MSG(posy_test_close(fast, ref, no, 1e-5f, 1e-5f), "5-row tiles T=%d causal=%d", T, causal);
    free(qkv); free(ref); free(fast); free(mha); free(ex); free(scratch);
}

static void test_gqa(void) {
    static const int32_t c1[] = {0, 1}, c2[] = {0, 5, 6, 19}, c3[] = {0, 3, 70, 71, 200};
    for (int causal = 0; causal < 2; causal++) {
        check_gqa(c1, 1, 4, 2, 32, causal);
        check_gqa(c2, 3, 4, 2, 32, causal);
        check_gqa(c2, 3, 4, 4, 16, causal);
        check_gqa(c3, 4, 8, 2, 32, causal);
        check_gqa(c3, 4, 16, 8, 128, causal);
    }
    /* causal and bidirectional must differ (except at a sequence's last row) */
    static const int32_t cu[] = {0, 12};
    float *qkv = rvec(12 * 256, -1, 1), a[12 * 128], b[12 * 128];
    eng_cpu_attention_gqa_ref(a, qkv, cu, 1, 4, 2, 32, 1);
    eng_cpu_attention_gqa_ref(b, qkv, cu, 1, 4, 2, 32, 0);
    CHECK(fabsf(a[0] - b[0]) > 1e-4f);
    CHECK(posy_test_close(a + 11 * 128, b + 11 * 128, 128, 1e-6f, 1e-6f));
    float tiny[4];
    CHECK_EQ_INT(eng_cpu_attention_gqa(a, qkv, cu, 1, 4, 2, 32, 1, 0, tiny, 4), -1);
    free(qkv);
}

/* Gemma 3's sliding layers: keys at |query - key| >= window masked, fast
 * against the reference, several windows, causal and not; a window as
 * long as the sequence changes nothing, a window of 1 leaves each query
 * its own value (softmax over one key) */
static void test_gqa_window(void) {
    static const int32_t cu[] = {0, 9, 10, 47};
    const int nh = 4, nkv = 2, d = 32, T = 47;
    size_t ld = (size_t)(nh + 2 * nkv) * d, no = (size_t)T * nh * d;
    float *qkv = rvec(T * ld, -1.5f, 1.5f), *ref = malloc(sizeof(float) * no), *fast = malloc(sizeof(float) * no);
    float *none = malloc(sizeof(float) * no);
    size_t sf = eng_cpu_attention_scratch_floats(37, 4);
    float *scratch = malloc(sizeof(float) * sf);
    static const int windows[] = {1, 2, 5, 17, 37};
    for (int causal = 0; causal < 2; causal++) {
        eng_cpu_attention_gqa_ref(none, qkv, cu, 3, nh, nkv, d, causal);
        for (int w = 0; w < 5; w++) {
            eng_cpu_attention_gqa_window_ref(ref, qkv, cu, 3, nh, nkv, d, causal, windows[w]);
            CHECK_EQ_INT(eng_cpu_attention_gqa(fast, qkv, cu, 3, nh, nkv, d, causal, windows[w], scratch, sf), 0);
            CHECK_MSG(posy_test_close(fast, ref, no, 1e-5f, 1e-5f), "window %d causal %d", windows[w], causal);
            /* tiles of 5 rows: a window across tile edges */
            CHECK_EQ_INT(eng_cpu_attention_gqa(fast, qkv, cu, 3, nh, nkv, d, causal, windows[w], scratch, 37 * 5), 0);
            CHECK_MSG(posy_test_close(fast, ref, no, 1e-5f, 1e-5f), "5-row tiles, window %d", windows[w]);
        }
        eng_cpu_attention_gqa_window_ref(ref, qkv, cu, 3, nh, nkv, d, causal, 37);
        CHECK_MSG(posy_test_close(ref, none, no, 1e-6f, 1e-6f), "window = longest sequence changes nothing");
        eng_cpu_attention_gqa_window_ref(ref, qkv, cu, 3, nh, nkv, d, causal, 5);
        CHECK_MSG(!posy_test_close(ref, none, no, 1e-4f, 1e-4f), "window 5 changes the 37-token sequence");
        eng_cpu_attention_gqa_window_ref(ref, qkv, cu, 3, nh, nkv, d, causal, 1);
        for (int t = 0; t < T; t++) /* head 0 reads KV head 0: V of its own token */
            CHECK(posy_test_close(ref + (size_t)t * nh * d, qkv + (size_t)t * ld + (size_t)(nh + nkv) * d, d, 1e-6f,
                                  1e-6f));
    }
    free(qkv); free(ref); free(fast); free(none); free(scratch);
}

/* A GELU-gated MLP's act(gate) * up (gate and up side by side, as the
 * gate|up GEMM leaves them) against act in double, over [-8, 8]. */
static void check_gate(void (*gate)(float *, const float *, int, int), double (*act)(double), int R, int I,
                       const char *what) {
    float *gu = rvec((size_t)R * 2 * I, -8, 8), *o = malloc(sizeof(float) * R * I);
    gate(o, gu, R, I);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < I; j++) {
            double x = gu[(size_t)r * 2 * I + j], u = gu[(size_t)r * 2 * I + I + j], want = act(x) * u;
            CHECK_MSG(fabs(o[(size_t)r * I + j] - want) <= 1e-5 * (1 + fabs(want)), "%s r %d j %d: %g vs %g", what,
                      r, j, o[(size_t)r * I + j], want);
        }
    free(gu); free(o);
}
static double gelu_tanh_d(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
}
static double gelu_erf_d(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }

/* Gemma 3's MLP (tanh GELU) and ModernBERT's (exact erf GELU) */
static void test_geglu_tanh(void) { check_gate(eng_cpu_geglu_tanh, gelu_tanh_d, 7, 129, "tanh"); }
static void test_geglu_erf(void) { check_gate(eng_cpu_geglu_erf, gelu_erf_d, 5, 131, "erf"); }

static void test_swiglu(void) {
    static const int rows[] = {1, 5, 70};
    for (int i = 0; i < 3; i++) {
        int R = rows[i], I = 257;
        float *gu = rvec((size_t)R * 2 * I, -12, 12), *a = malloc(sizeof(float) * R * I), *b = malloc(sizeof(float) * R * I);
        eng_cpu_swiglu_ref(a, gu, R, I);
        eng_cpu_swiglu(b, gu, R, I);
        CHECK_MSG(posy_test_close(b, a, (size_t)R * I, 1e-6f, 1e-5f), "rows=%d", R);
        /* silu(0) = 0, silu(x) ~ x for large x */
        gu[0] = 0.0f; gu[I] = 3.0f; gu[1] = 30.0f; gu[I + 1] = 2.0f;
        eng_cpu_swiglu_ref(a, gu, 1, I);
        CHECK(a[0] == 0.0f);
        CHECK(fabsf(a[1] - 60.0f) < 1e-4f);
        free(gu); free(a); free(b);
    }
}

static void test_add(void) {
    float x[100], y[100];
    for (int i = 0; i < 100; i++) { x[i] = (float)i; y[i] = 0.5f * (float)i; }
    eng_cpu_add(x, y, 100);
    int ok = 1;
    for (int i = 0; i < 100; i++) if (x[i] != 1.5f * (float)i) ok = 0;
    CHECK(ok);
}

TEST_MAIN(TEST(test_rmsnorm), TEST(test_rmsnorm_heads), TEST(test_rope), TEST(test_gqa), TEST(test_gqa_window),
          TEST(test_geglu_tanh), TEST(test_geglu_erf), TEST(test_swiglu),
          TEST(test_add))

/* test_cpu_kernels: every fast CPU kernel against its reference
 * (eng_cpu_kernels.h), at several sizes including odd ones and a single
 * token.  Attention is additionally held to an independent naive
 * implementation that pads every sequence to the longest and masks, as a
 * framework would, so a shared mistake in the packed reference and the fast
 * kernel (e.g. a score crossing a sequence boundary) cannot pass unseen.
 *
 * Tolerances, |fast - ref| <= atol + rtol*|ref|:
 *   embedding / LayerNorm      1e-5 + 1e-5   (float vs double statistics)
 *   linear (K inputs)          2e-6*sqrt(K)*8 + 1e-5 (sgemm float sums of K terms)
 *   GELU (erf, tanh)           1e-6 + 1e-5 (fast erf: rational, |err| <= 3.9e-7,
 *                              tests/gen/fit_erf.py)
 *   softmax                    2e-6 relative; 5e-7 for 101 terms (fast exp: 1.24 ulp)
 *   e^x, sigmoid, erf, SiLU,   ~2x each one's worst error against double libm
 *   GELU-tanh (eng_cpu_vmath)  (test_vmath)
 *   attention                  1e-5 + 1e-5
 *   pooling, L2 normalise      1e-6 + 1e-5
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "cpu/eng_cpu_kernels.h"
#include "cpu/eng_cpu_vmath.h"
#include "posy_test.h"

/* 1 if some element differs by more than tol (negative checks: quiet,
 * unlike posy_test_close which reports its worst mismatch). */
static int differs(const float *a, const float *b, size_t n, float tol) {
    for (size_t i = 0; i < n; i++)
        if (fabsf(a[i] - b[i]) > tol) return 1;
    return 0;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(float lo, float hi) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((rng_state >> 40) & 0xffffff) / 16777216.0f;
}
static float *rand_vec(size_t n, float lo, float hi) {
    float *v = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) v[i] = frand(lo, hi);
    return v;
}
static float *copy_vec(const float *v, size_t n) {
    float *c = malloc(sizeof(float) * (n ? n : 1));
    memcpy(c, v, sizeof(float) * n);
    return c;
}

static void test_embed(void) {
    static const int32_t cus[][5] = {{0, 1}, {0, 5, 6, 19}, {0, 3, 4, 64, 65}};
    static const int nseq[] = {1, 3, 4};
    static const int hs[] = {7, 32, 384};
    for (int hi = 0; hi < 3; hi++)
        for (int c = 0; c < 3; c++)
            for (int variant = 0; variant < 3; variant++) {
                int H = hs[hi], V = 50, P = 70, TV = 2, T = cus[c][nseq[c]];
                float *word = rand_vec((size_t)V * H, -1, 1), *pos = rand_vec((size_t)P * H, -1, 1);
                float *type = rand_vec((size_t)TV * H, -1, 1);
                float *g = rand_vec(H, 0.5f, 1.5f), *b = rand_vec(H, -0.5f, 0.5f);
                int32_t ids[65], tids[65];
                for (int t = 0; t < T; t++) { ids[t] = (t * 7 + 3) % V; tids[t] = t % TV; }
                if (variant == 1 && T > 4) ids[T - 3] = ids[1] = 1;
                /* variant 0: BERT with types; 1: RoBERTa-like offset 2, pad id 1
                 * (ids hit it, so pads inside sequences are exercised); 2: no
                 * type table. */
                eng_cpu_emb m = {.word = word, .pos = pos, .type = variant == 2 ? NULL : type,
                                 .ln_g = g, .ln_b = b, .hidden = H,
                                 .position_offset = variant == 1 ? 2 : 0,
                                 .pad_id = variant == 1 ? 1 : -1, .eps = 1e-12f};
                float *a = rand_vec((size_t)T * H, 0, 1), *r = rand_vec((size_t)T * H, 0, 1);
                const int32_t *ty = variant == 0 ? tids : NULL;
                eng_cpu_embed(&m, ids, ty, cus[c], nseq[c], a);
                eng_cpu_embed_ref(&m, ids, ty, cus[c], nseq[c], r);
                CHECK_MSG(posy_test_close(a, r, (size_t)T * H, 1e-5f, 1e-5f), "H=%d case=%d v=%d", H, c,
                          variant);
                free(word); free(pos); free(type); free(g); free(b); free(a); free(r);
            }
    /* The position offset must matter: without it row 0 would differ. */
    int H = 8;
    float *word = rand_vec(4 * H, -1, 1), *pos = rand_vec(6 * H, -1, 1);
    float *g = rand_vec(H, 1, 1), *b = rand_vec(H, 0, 0);
    int32_t ids[2] = {1, 2}, cu[2] = {0, 2};
    float a[16], r[16];
    eng_cpu_emb m0 = {.word = word, .pos = pos, .ln_g = g, .ln_b = b, .hidden = H, .pad_id = -1,
                      .eps = 1e-12f}, m2 = m0;
    m2.position_offset = 2;
    eng_cpu_embed(&m0, ids, NULL, cu, 1, a);
    eng_cpu_embed(&m2, ids, NULL, cu, 1, r);
    CHECK(differs(a, r, 16, 1e-5f));
    /* RoBERTa pad rule: in [5, pad, 2] (pad id 1, offset 2) the pad token
     * sits at position 1 and the last token at 3, as after [5, 2]. */
    int32_t pids[3] = {3, 1, 2}, pcu[2] = {0, 3}, qids[2] = {3, 2}, qcu[2] = {0, 2};
    float pa[24], qa[16];
    m2.pad_id = 1;
    eng_cpu_embed(&m2, pids, NULL, pcu, 1, pa);
    eng_cpu_embed(&m2, qids, NULL, qcu, 1, qa);
    CHECK(posy_test_close(pa + 16, qa + 8, 8, 0, 0));
    eng_cpu_embed_ref(&m2, pids, NULL, pcu, 1, pa);
    CHECK(posy_test_close(pa + 16, qa + 8, 8, 1e-5f, 1e-5f));
    free(word); free(pos); free(g); free(b);
}

static void test_linear(void) {
    static const int shapes[][3] = {{1, 1, 1}, {1, 7, 5}, {3, 384, 384}, {17, 1152, 384},
                                    {33, 64, 1536}, {130, 13, 31}};
    for (int i = 0; i < 6; i++)
        for (int bias = 0; bias < 2; bias++) {
            int M = shapes[i][0], N = shapes[i][1], K = shapes[i][2];
            float *x = rand_vec((size_t)M * K, -1, 1), *W = rand_vec((size_t)N * K, -0.2f, 0.2f);
            float *b = bias ? rand_vec(N, -1, 1) : NULL;
            float *y = rand_vec((size_t)M * N, 5, 6), *r = rand_vec((size_t)M * N, 5, 6);
            eng_cpu_linear(y, x, W, b, M, N, K);
            eng_cpu_linear_ref(r, x, W, b, M, N, K);
            float atol = 1.6e-5f * sqrtf((float)K) + 1e-6f;
            CHECK_MSG(posy_test_close(y, r, (size_t)M * N, atol, 1e-5f), "M=%d N=%d K=%d bias=%d", M, N,
                      K, bias);
            free(x); free(W); free(b); free(y); free(r);
        }
}

static void test_gelu(void) {
    static const size_t ns[] = {1, 7, 10001, 100000};
    for (int i = 0; i < 4; i++)
        for (int tanh_v = 0; tanh_v < 2; tanh_v++) {
            size_t n = ns[i];
            float *x = rand_vec(n, -8, 8);
            x[0] = i == 0 ? 0.0f : x[0];
            float *r = copy_vec(x, n);
            if (tanh_v) { eng_cpu_gelu_tanh(x, n); eng_cpu_gelu_tanh_ref(r, n); }
            else { eng_cpu_gelu(x, n); eng_cpu_gelu_ref(r, n); }
            CHECK_MSG(posy_test_close(x, r, n, 1e-6f, 1e-5f), "n=%zu tanh=%d", n, tanh_v);
            free(x); free(r);
        }
    /* Known values: GELU(1) = 0.8413447, tanh variant 0.8411920. */
    float a = 1.0f, t = 1.0f;
    eng_cpu_gelu(&a, 1);
    eng_cpu_gelu_tanh(&t, 1);
    CHECK(fabsf(a - 0.8413447f) < 1e-6f);
    CHECK(fabsf(t - 0.8411920f) < 1e-6f);
}

/* eng_cpu_vmath.h against double libm, densely over each function's range:
 * e^x relative (1.24 ulp bound, so 2e-7), clamped at the ends; the sigmoid
 * and SiLU relative to their double form, GELU-tanh (as x sigmoid(2u))
 * relative per unit of its argument;
 * erf absolute (3.9e-7 bound). */
static void test_vmath(void) {
    double worst_exp = 0, worst_sig = 0, worst_erf = 0, worst_gt = 0, worst_silu = 0;
    for (int i = 0; i <= 350000; i++) {
        const float x = -87.0f + 175.0f * (float)i / 350000.0f; /* [-87, 88] */
        const double e = exp((double)x);
        worst_exp = fmax(worst_exp, fabs(eng_vexp(x) - e) / e);
        const double sg = 1.0 / (1.0 + exp(-(double)x));
        worst_sig = fmax(worst_sig, fabs(eng_vsigmoid(x) - sg) / sg);
        worst_silu = fmax(worst_silu, fabs(eng_vsilu(x) - x * sg) / (fabs(x * sg) + 1e-30));
        const float z = x / 16.0f; /* erf over [-5.4, 5.5]: past its clamp at 4 */
        worst_erf = fmax(worst_erf, fabs(eng_verf(z) - erf((double)z)));
        const float g = x / 8.0f; /* GELU-tanh over [-10.9, 11] */
        /* 0.5 g (1 + tanh u) in double as g / (1 + e^-2u), the same function
         * without the cancellation that makes the tanh form 0 for u < -19 */
        const double gd = g, u = sqrt(2 / 3.14159265358979323846) * (gd + 0.044715 * gd * gd * gd);
        const double gt = gd / (1 + exp(-2 * u));
        /* relative, but absolute below 1e-30 (far left the true value, ~1e-47,
         * underflows where e^x is clamped, ~1e-38), and per unit of |2u|: the
         * float argument 2u carries ~1e-7 |2u| of rounding into e^-2u, as
         * any fp32 GELU's does */
        worst_gt = fmax(worst_gt, fabs(eng_vgelu_tanh(g) - gt) / (fabs(gt) + 1e-30) / (1 + fabs(2 * u)));
    }
    CHECK_MSG(worst_exp <= 2e-7, "e^x worst relative error %g", worst_exp);
    CHECK_MSG(worst_sig <= 4e-7, "sigmoid worst relative error %g", worst_sig);
    CHECK_MSG(worst_silu <= 4e-7, "silu worst relative error %g", worst_silu);
    CHECK_MSG(worst_erf <= 4e-7, "erf worst absolute error %g", worst_erf);
    CHECK_MSG(worst_gt <= 4e-7, "gelu_tanh worst relative error per unit of |2u| %g", worst_gt);
    /* the clamps: finite at both ends, the limits of the sigmoid */
    CHECK(isfinite(eng_vexp(1000.0f)) && eng_vexp(1000.0f) > 1e38f);
    CHECK(eng_vexp(-1000.0f) > 0.0f && eng_vexp(-1000.0f) < 2e-38f);
    CHECK(eng_vsigmoid(200.0f) == 1.0f && eng_vsigmoid(-200.0f) < 1e-37f && eng_vsigmoid(0.0f) == 0.5f);
    CHECK(eng_verf(100.0f) == 1.0f && eng_verf(-100.0f) == -1.0f && eng_verf(0.0f) == 0.0f);
}

static void test_add_layernorm(void) {
    static const int rows[] = {1, 5, 300};
    static const int hs[] = {7, 384, 1024};
    for (int ri = 0; ri < 3; ri++)
        for (int hi = 0; hi < 3; hi++)
            for (int with_res = 0; with_res < 2; with_res++) {
                int R = rows[ri], H = hs[hi];
                size_t n = (size_t)R * H;
                float *x = rand_vec(n, -3, 5), *res = with_res ? rand_vec(n, -2, 2) : NULL;
                float *g = rand_vec(H, 0.5f, 1.5f), *b = rand_vec(H, -0.5f, 0.5f);
                float *r = copy_vec(x, n);
                eng_cpu_add_layernorm(x, res, g, b, 1e-12f, R, H);
                eng_cpu_add_layernorm_ref(r, res, g, b, 1e-12f, R, H);
                CHECK_MSG(posy_test_close(x, r, n, 1e-5f, 1e-5f), "R=%d H=%d res=%d", R, H, with_res);
                free(x); free(res); free(g); free(b); free(r);
            }
}

static void test_softmax(void) {
    static const int ns[] = {1, 2, 7, 64, 1000, 4097};
    for (int i = 0; i < 6; i++) {
        int n = ns[i];
        /* Scores spread over [-90, 10]: exp() is exercised over its whole
         * non-positive range after the max is subtracted. */
        float *x = rand_vec((size_t)n, -90, 10), *r = copy_vec(x, (size_t)n);
        eng_cpu_softmax(x, n);
        eng_cpu_softmax_ref(r, n);
        /* 2e-6: a float sum of n terms (the normaliser) is not exact. */
        CHECK_MSG(posy_test_close(x, r, (size_t)n, 1e-30f, 2e-6f), "n=%d", n);
        free(x); free(r);
    }
    /* Small differences: relative accuracy where every term matters. */
    float x[101], r[101];
    for (int i = 0; i < 101; i++) x[i] = r[i] = -0.87f * (float)i;
    eng_cpu_softmax(x, 101);
    eng_cpu_softmax_ref(r, 101);
    CHECK(posy_test_close(x, r, 101, 1e-38f, 5e-7f));
    float big[3] = {1e4f, 1e4f, -1e4f};
    eng_cpu_softmax(big, 3);
    CHECK(big[0] == 0.5f && big[1] == 0.5f && big[2] < 1e-37f);
}

/* Independent oracle: pad every sequence to the longest, mask, softmax in
 * double; the way a framework without varlen support computes it. */
static void attention_padded(float *out, const float *qkv, const int32_t *cu, int n_seqs, int nh,
                             int d, int causal, const float *rel_weight) {
    int H = nh * d, Lmax = 0;
    for (int s = 0; s < n_seqs; s++)
        if (cu[s + 1] - cu[s] > Lmax) Lmax = cu[s + 1] - cu[s];
    size_t pn = (size_t)n_seqs * Lmax * H;
    float *Q = calloc(pn, 4), *K = calloc(pn, 4), *V = calloc(pn, 4);
    double *sc = malloc(sizeof(double) * Lmax);
    for (int s = 0; s < n_seqs; s++)
        for (int i = 0; i < cu[s + 1] - cu[s]; i++)
            for (int c = 0; c < H; c++) {
                size_t src = (size_t)(cu[s] + i) * 3 * H + c, dst = ((size_t)s * Lmax + i) * H + c;
                Q[dst] = qkv[src]; K[dst] = qkv[src + H]; V[dst] = qkv[src + 2 * H];
            }
    for (int s = 0; s < n_seqs; s++) {
        int len = cu[s + 1] - cu[s];
        for (int h = 0; h < nh; h++)
            for (int i = 0; i < Lmax; i++) {
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < Lmax; j++) {
                    int masked = j >= len || (causal && j > i);
                    double acc = 0;
                    for (int c = 0; c < d; c++)
                        acc += (double)Q[((size_t)s * Lmax + i) * H + h * d + c] *
                               K[((size_t)s * Lmax + j) * H + h * d + c];
                    double bias = rel_weight ? rel_weight[eng_relpos_bucket(j - i) * nh + h] : 0.0;
                    sc[j] = masked ? -INFINITY : acc / sqrt((double)d) + bias;
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int j = 0; j < Lmax; j++) { sc[j] = exp(sc[j] - mx); sum += sc[j]; }
                if (i >= len) continue; /* padded query rows are thrown away */
                for (int c = 0; c < d; c++) {
                    double acc = 0;
                    for (int j = 0; j < Lmax; j++) acc += sc[j] * V[((size_t)s * Lmax + j) * H + h * d + c];
                    out[(size_t)(cu[s] + i) * H + h * d + c] = (float)(acc / sum);
                }
            }
    }
    free(Q); free(K); free(V); free(sc);
}

/* rel: with MPNet's relative position bias (weights in [-3, 3], so it
 * moves the softmax; the table sized past the longest sequence, as the
 * engine sizes it by max_positions) */
static void attention_case_rel(const int32_t *cu, int n_seqs, int nh, int d, int causal, int rel) {
    int H = nh * d, T = cu[n_seqs], Lmax = 0;
    for (int s = 0; s < n_seqs; s++)
        if (cu[s + 1] - cu[s] > Lmax) Lmax = cu[s + 1] - cu[s];
    float *qkv = rand_vec((size_t)T * 3 * H, -2, 2);
    float *a = rand_vec((size_t)T * H, 9, 10), *r = rand_vec((size_t)T * H, 9, 10);
    float *p = rand_vec((size_t)T * H, 9, 10);
    float *rw = rel ? rand_vec((size_t)ENG_RELPOS_BUCKETS * nh, -3, 3) : NULL;
    eng_relpos rp = {NULL, Lmax + 7};
    float *tab = rel ? malloc(sizeof(float) * (size_t)nh * eng_relpos_span(rp.max_len)) : NULL;
    if (tab) eng_relpos_expand(tab, rw, nh, rp.max_len, 1.0f);
    rp.tab = tab;
    size_t sf = eng_cpu_attention_scratch_floats(Lmax, 4);
    float *scratch = malloc(sizeof(float) * sf);
    CHECK_EQ_INT(eng_cpu_attention(a, qkv, cu, n_seqs, nh, d, causal, rel ? &rp : NULL, scratch, sf), 0);
    eng_cpu_attention_ref(r, qkv, cu, n_seqs, nh, d, causal, rw);
    attention_padded(p, qkv, cu, n_seqs, nh, d, causal, rw);
    CHECK_MSG(posy_test_close(r, p, (size_t)T * H, 1e-5f, 1e-5f), "ref vs padded T=%d nh=%d d=%d causal=%d rel=%d",
              T, nh, d, causal, rel);
    CHECK_MSG(posy_test_close(a, r, (size_t)T * H, 1e-5f, 1e-5f), "fast vs ref T=%d nh=%d d=%d causal=%d rel=%d",
              T, nh, d, causal, rel);
    if (rel && T > 1) { /* the bias is not a no-op */
        eng_cpu_attention_ref(p, qkv, cu, n_seqs, nh, d, causal, NULL);
        CHECK_MSG(differs(p, r, (size_t)T * H, 1e-3f), "rel bias changed nothing T=%d", T);
    }
    if (rel) { /* a sequence longer than the table: refused, not overrun */
        eng_relpos small = {tab, Lmax - 1};
        if (Lmax > 1) CHECK_EQ_INT(eng_cpu_attention(a, qkv, cu, n_seqs, nh, d, causal, &small, scratch, sf), -1);
    }
    free(qkv); free(a); free(r); free(p); free(scratch); free(rw); free(tab);
}

static void attention_case(const int32_t *cu, int n_seqs, int nh, int d, int causal) {
    attention_case_rel(cu, n_seqs, nh, d, causal, 0);
}

static void test_attention(void) {
    static const int32_t one[] = {0, 1};
    static const int32_t mixed[] = {0, 3, 4, 68, 133, 150};  /* 3, 1, 64, 65, 17 */
    static const int32_t longs[] = {0, 130, 331};            /* sgemm path, odd tails */
    for (int causal = 0; causal < 2; causal++) {
        attention_case(one, 1, 1, 8, causal);
        attention_case(one, 1, 4, 32, causal);
        attention_case(mixed, 5, 3, 8, causal);
        attention_case(mixed, 5, 2, 32, causal);
        attention_case(longs, 2, 2, 16, causal);
        attention_case_rel(one, 1, 2, 8, causal, 1);
        attention_case_rel(mixed, 5, 3, 8, causal, 1);
        attention_case_rel(longs, 2, 2, 16, causal, 1); /* distances past 128: the last buckets */
    }
    /* Causal must differ from bidirectional except for the last token. */
    int32_t cu[2] = {0, 5};
    float *qkv = rand_vec(5 * 3 * 8, -2, 2), a[40], b[40];
    eng_cpu_attention_ref(a, qkv, cu, 1, 1, 8, 0, NULL);
    eng_cpu_attention_ref(b, qkv, cu, 1, 1, 8, 1, NULL);
    CHECK(differs(a, b, 32, 1e-5f));
    CHECK(posy_test_close(a + 32, b + 32, 8, 1e-5f, 1e-5f));
    /* Scratch too small for one thread's tile: refused, not overrun. */
    float tiny[4];
    CHECK_EQ_INT(eng_cpu_attention(a, qkv, cu, 1, 1, 8, 0, NULL, tiny, 4), -1);
    free(qkv);
}

/* pool_skip: against the reference, and against pooling the tail alone. */
static void test_pool_skip(void) {
    static const int32_t cu[] = {0, 1, 4, 11, 211}, skip[] = {0, 2, 6, 100};
    const int H = 7, T = cu[4];
    float *x = rand_vec((size_t)T * H, -1, 1);
    for (int mode = 0; mode < 3; mode++) {
        float a[4 * 7], r[4 * 7], tail[7], full[4 * 7];
        eng_cpu_pool(a, x, cu, skip, 4, H, (posy_pooling)mode);
        eng_cpu_pool_ref(r, x, cu, skip, 4, H, (posy_pooling)mode);
        CHECK_MSG(posy_test_close(a, r, (size_t)4 * H, 1e-6f, 1e-5f), "skip mode=%d", mode);
        int32_t cu_tail[2] = {0, cu[4] - cu[3] - skip[3]};
        eng_cpu_pool_ref(tail, x + (size_t)(cu[3] + skip[3]) * H, cu_tail, NULL, 1, H, (posy_pooling)mode);
        CHECK_MSG(posy_test_close(a + 3 * H, tail, (size_t)H, 1e-6f, 1e-5f), "tail mode=%d", mode);
        eng_cpu_pool(full, x, cu, NULL, 4, H, (posy_pooling)mode);
        CHECK(posy_test_close(a, full, (size_t)H, 0, 0));              /* skip 0: unchanged */
        if (mode != POSY_POOL_LAST) CHECK(differs(a + 3 * H, full + 3 * H, H, 1e-5f));
        else CHECK(posy_test_close(a + 3 * H, full + 3 * H, (size_t)H, 0, 0));
    }
    free(x);
}

static void test_pool_and_normalize(void) {
    static const int32_t cu[] = {0, 1, 4, 11, 211};
    static const int hs[] = {5, 384};
    for (int hi = 0; hi < 2; hi++)
        for (int mode = 0; mode < 3; mode++) {
            int H = hs[hi], T = cu[4];
            float *x = rand_vec((size_t)T * H, -1, 1);
            float a[4 * 384], r[4 * 384];
            eng_cpu_pool(a, x, cu, NULL, 4, H, (posy_pooling)mode);
            eng_cpu_pool_ref(r, x, cu, NULL, 4, H, (posy_pooling)mode);
            CHECK_MSG(posy_test_close(a, r, (size_t)4 * H, 1e-6f, 1e-5f), "H=%d mode=%d", H, mode);
            if (mode == POSY_POOL_CLS) CHECK(a[H] == x[(size_t)1 * H]);
            if (mode == POSY_POOL_LAST) CHECK(a[H] == x[(size_t)3 * H]);
            eng_cpu_l2_normalize(a, 4, H);
            eng_cpu_l2_normalize_ref(r, 4, H);
            CHECK_MSG(posy_test_close(a, r, (size_t)4 * H, 1e-6f, 1e-5f), "norm H=%d mode=%d", H, mode);
            double ss = 0;
            for (int i = 0; i < H; i++) ss += (double)a[i] * a[i];
            CHECK(fabs(ss - 1.0) < 1e-5);
            free(x);
        }
    float z[3] = {0, 0, 0};
    eng_cpu_l2_normalize(z, 1, 3);
    CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0);
}

TEST_MAIN(TEST(test_embed), TEST(test_linear), TEST(test_gelu), TEST(test_vmath), TEST(test_add_layernorm),
          TEST(test_softmax), TEST(test_attention), TEST(test_pool_skip), TEST(test_pool_and_normalize))

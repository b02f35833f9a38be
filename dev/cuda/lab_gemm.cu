/* lab_gemm: the cuBLASLt GEMM wrapper (eng_cu_gemm.cu) -- correctness of
 * the layout (Y = X W^T + b, nn.Linear), of the bias and bias+GELU
 * epilogues, at M = 1, 16, 33 (odd and single rows); then a timing table
 * over M = 16 .. 65536 for the encoder's shapes, cuBLASLt's first heuristic
 * choice (what the engine uses) against the best of its candidates (what
 * timing them once per bucket would buy).
 *
 * Reference: fp64 on the bf16-rounded inputs; GELU exact (erf), while
 * cuBLASLt's epilogue is the tanh form -- the difference (< 1e-3) is under
 * the bf16 output rounding, and the tolerance (atol 3e-2, rtol 1e-2 on
 * values of magnitude ~ sqrt(K)/3) covers both.
 */
#include "lab.h"

static int use_small = 0; /* check(): 1 runs eng_cu_gemm_small, 3 eng_cu_gemm_chain, instead of cuBLASLt */

/* the chain kernel's columns a block in the last launch, for a check's name */
static const char *nc_tag(void) { return eng_cu_chain_last_nc == 32 ? " nc32" : ""; }

/* lab_padw: the chain checks pass W's padded copy too (eng_cu_gemm_chain's
 * wp), made as the engine makes it (eng_cu_chain_wpad elements after each
 * row) but with NaN in the padding, so a kernel that read it would fail;
 * where the engine must use the copy (<= 16 rows, bulk copies) W itself
 * is then overwritten with NaN, so a launch that read W instead would
 * fail too.  lab_wp returns NULL where it does not apply; wp_tag names
 * the checks that ran on the copy. */
static int lab_padw = 0;
static bf16 *lab_wp(bf16 *dw, int M, int N, int K) {
    const int pad = eng_cu_chain_wpad(K);
    if (!lab_padw || !pad || M > 16) return NULL;
    bf16 *p = NULL;
    const size_t ld = (size_t)(K + pad) * 2;
    CUCHECK(cudaMalloc(&p, (size_t)N * ld));
    lab_poison(p, (size_t)N * ld);
    CUCHECK(cudaMemcpy2D(p, ld, dw, (size_t)K * 2, (size_t)K * 2, N, cudaMemcpyDeviceToDevice));
    if (eng_cu_chain_bulk) lab_poison(dw, (size_t)N * K * 2);
    return p;
}
static const char *wp_tag(const bf16 *wp) { return wp && eng_cu_chain_bulk ? " padw" : ""; }

/* fp64 reference of Y = epi(X W^T + b) (+ R): GELU exact (erf) */
static void ref_linear(const float *x, const float *w, const float *b, const float *r, float *y, int M, int N, int K,
                       int epi) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)x[(size_t)m * K + k] * w[(size_t)n * K + k];
            if (epi) s += b[n];
            if (epi == ENG_CU_EPI_BIAS_GELU) s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
            if (r) s += r[(size_t)m * N + n];
            y[(size_t)m * N + n] = (float)s;
        }
}

/* The chain kernel's SwiGLU epilogue: y[m][j] = silu(y[m][j]) * y[m][N/2 + j]
 * of the full product, in place, into [M, N/2]. */
static size_t ref_swiglu(float *y, int M, int N) {
    const int h = N / 2;
    for (int m = 0; m < M; m++)
        for (int j = 0; j < h; j++) {
            const double gv = y[(size_t)m * N + j], uv = y[(size_t)m * N + h + j];
            y[(size_t)m * h + j] = (float)(gv / (1.0 + exp(-gv)) * uv);
        }
    return (size_t)M * h;
}

static void check(eng_cu_gemm_ctx *g, int M, int N, int K, int epi, int with_r = 0) {
    std::vector<float> xf, wf, bfv, rf;
    std::vector<uint16_t> xb, wb, bb, rb;
    lab_rand_bf16(xf, xb, (size_t)M * K, 1.f);
    lab_rand_bf16(wf, wb, (size_t)N * K, 1.f);
    lab_rand_bf16(bfv, bb, (size_t)N, 1.f);
    lab_rand_bf16(rf, rb, (size_t)M * N, 4.f);
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *db = (bf16 *)lab_upload(bb), *dy;
    bf16 *dr = (bf16 *)lab_upload(rb);
    CUCHECK(cudaMalloc(&dy, (size_t)M * N * 2));
    lab_poison(dy, (size_t)M * N * 2);
    char err[256];
    /* SwiGLU's bias is optional: odd M have one */
    const bool sw_nob = epi == ENG_CU_EPI_SWIGLU && !(M & 1);
    if (sw_nob) std::fill(bfv.begin(), bfv.end(), 0.f);
    bf16 *wp = use_small == 3 ? lab_wp(dw, M, N, K) : NULL;
    if (use_small == 3) {
        CUCHECK(eng_cu_gemm_chain(0, dx, dw, epi && !sw_nob ? db : NULL, with_r ? dr : NULL, dy, M, N, K, epi, NULL,
                                  NULL, 0, NULL, wp));
    } else if (use_small) {
        CUCHECK(eng_cu_gemm_small(0, dx, dw, epi ? db : NULL, with_r ? dr : NULL, dy, M, N, K, epi));
    } else if (eng_cu_gemm(g, 0, dx, dw, epi ? db : NULL, with_r ? dr : NULL, dy, M, N, K, epi, err, sizeof err)) {
        printf("  FAIL gemm %dx%dx%d: %s\n", M, N, K, err);
        lab_failures++;
        return;
    }
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> ref((size_t)M * N);
    ref_linear(xf.data(), wf.data(), bfv.data(), with_r ? rf.data() : NULL, ref.data(), M, N, K, epi);
    if (epi == ENG_CU_EPI_SWIGLU) ref.resize(ref_swiglu(ref.data(), M, N));
    std::vector<float> got = lab_download_bf16(dy, ref.size());
    char name[96];
    snprintf(name, sizeof name, "gemm%s M=%d N=%d K=%d epi=%d%s%s%s", !use_small ? "" : use_small == 3 ? "-chain" : eng_cu_skinny_version == 2 ? "-skinny2" : "-skinny", M, N, K,
             epi, with_r ? " +residual" : "", use_small == 3 ? nc_tag() : "", wp_tag(wp));
    lab_check(name, got.data(), ref.data(), got.size(), 3e-2f, 1e-2f);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy); cudaFree(dr); cudaFree(wp);
}

/* The operands of a norm-then-product check: X [M, K] (scale 2), W
 * [N, K], bias [N], gamma [K] around 1, beta [K]. */
static void rand_norm_operands(int M, int N, int K, std::vector<float> &xf, std::vector<uint16_t> &xb,
                               std::vector<float> &wf, std::vector<uint16_t> &wb, std::vector<float> &bfv,
                               std::vector<uint16_t> &bb, std::vector<float> &gf, std::vector<float> &bef) {
    std::vector<uint16_t> tmp;
    lab_rand_bf16(xf, xb, (size_t)M * K, 2.f);
    lab_rand_bf16(wf, wb, (size_t)N * K, 1.f);
    lab_rand_bf16(bfv, bb, (size_t)N, 1.f);
    lab_rand_bf16(gf, tmp, (size_t)K, 1.f);
    lab_rand_bf16(bef, tmp, (size_t)K, 0.5f);
    for (float &v : gf) v += 1.f;
}

/* The chain kernel's norm prologue: Y = epi(norm(X) W^T + b), LayerNorm
 * (rms = 0) or RMSNorm, against fp64 on the same bf16 inputs, the
 * normalised rows rounded to bf16 as the kernel feeds them to the
 * products; rows at or past n_real must come out as zero-input rows, and
 * the stored normalised rows (out) must match the norm itself. */
static void check_norm(int M, int n_real, int N, int K, int epi, int rms) {
    std::vector<float> xf, wf, bfv, gf, bef;
    std::vector<uint16_t> xb, wb, bb;
    rand_norm_operands(M, N, K, xf, xb, wf, wb, bfv, bb, gf, bef);
    for (int k = 0; k < K; k++) xf[k] += 3.f, xb[k] = eng_cu_f2bf_bits(xf[k]), xf[k] = eng_cu_bf_bits2f(xb[k]);
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *db = (bf16 *)lab_upload(bb), *dy, *dn;
    float *dg = lab_upload(gf), *dbe = lab_upload(bef);
    int *dnr = lab_upload(std::vector<int>{n_real});
    CUCHECK(cudaMalloc(&dy, (size_t)M * N * 2));
    CUCHECK(cudaMalloc(&dn, (size_t)M * K * 2));
    lab_poison(dy, (size_t)M * N * 2);
    lab_poison(dn, (size_t)M * K * 2);
    const eng_cu_chain_norm nm = {dg, rms ? NULL : dbe, 1e-6f, dnr, dn, 0, NULL, NULL};
    bf16 *wp = lab_wp(dw, M, N, K);
    CUCHECK(eng_cu_gemm_chain(0, dx, dw, epi ? db : NULL, NULL, dy, M, N, K, epi, &nm, NULL, 0, NULL, wp));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> xn((size_t)M * K, 0.f), ref((size_t)M * N);
    for (int m = 0; m < M && m < n_real; m++) {
        double mu = 0, var = 0;
        for (int k = 0; k < K; k++) mu += xf[(size_t)m * K + k];
        mu = rms ? 0 : mu / K;
        for (int k = 0; k < K; k++) var += (xf[(size_t)m * K + k] - mu) * (xf[(size_t)m * K + k] - mu);
        const double rs = 1.0 / sqrt(var / K + 1e-6);
        for (int k = 0; k < K; k++)
            xn[(size_t)m * K + k] = bfr((float)((xf[(size_t)m * K + k] - mu) * rs * gf[k] + (rms ? 0 : bef[k])));
    }
    ref_linear(xn.data(), wf.data(), bfv.data(), NULL, ref.data(), M, N, K, epi);
    if (epi == ENG_CU_EPI_SWIGLU) ref.resize(ref_swiglu(ref.data(), M, N));
    char name[96];
    std::vector<float> got = lab_download_bf16(dy, ref.size()), gotn = lab_download_bf16(dn, (size_t)M * K);
    snprintf(name, sizeof name, "gemm-chain %s M=%d (real %d) N=%d K=%d epi=%d%s", rms ? "rmsnorm" : "layernorm", M,
             n_real, N, K, epi, wp_tag(wp));
    lab_check(name, got.data(), ref.data(), got.size(), 3e-2f, 1e-2f);
    snprintf(name, sizeof name, "  its normalised rows (out)");
    lab_check(name, gotn.data(), xn.data(), gotn.size(), 1e-2f, 1e-2f);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy); cudaFree(dn); cudaFree(dg); cudaFree(dbe); cudaFree(dnr);
    cudaFree(wp);
}

/* The chain kernel's RMS fold: X raw in the products, each output row
 * scaled by rsqrt(mean(x^2) + eps) before the bias (the norm's weights
 * are already in W), rows at or past n_real as zero rows; the reference
 * scales the rows in fp64 (unrounded, as the kernel scales its fp32
 * sums).  The row sums of squares come from the tensor cores. */
static void check_fold(int M, int n_real, int N, int K, int epi) {
    std::vector<float> xf, wf, bfv;
    std::vector<uint16_t> xb, wb, bb;
    lab_rand_bf16(xf, xb, (size_t)M * K, 2.f);
    lab_rand_bf16(wf, wb, (size_t)N * K, 1.f);
    lab_rand_bf16(bfv, bb, (size_t)N, 1.f);
    for (int k = 0; k < K; k++) xf[k] += 3.f, xb[k] = eng_cu_f2bf_bits(xf[k]), xf[k] = eng_cu_bf_bits2f(xb[k]);
    const bool with_b = epi != ENG_CU_EPI_NONE && !(epi == ENG_CU_EPI_SWIGLU && !(M & 1));
    if (!with_b) std::fill(bfv.begin(), bfv.end(), 0.f);
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *db = (bf16 *)lab_upload(bb), *dy;
    int *dnr = lab_upload(std::vector<int>{n_real});
    const size_t ny = epi == ENG_CU_EPI_SWIGLU ? (size_t)M * N / 2 : (size_t)M * N;
    CUCHECK(cudaMalloc(&dy, ny * 2));
    lab_poison(dy, ny * 2);
    const eng_cu_chain_norm nm = {NULL, NULL, 1e-6f, dnr, NULL, 1, NULL, NULL};
    bf16 *wp = lab_wp(dw, M, N, K);
    CUCHECK(eng_cu_gemm_chain(0, dx, dw, with_b ? db : NULL, NULL, dy, M, N, K, epi, &nm, NULL, 0, NULL, wp));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> xs((size_t)M * K, 0.f), ref((size_t)M * N);
    for (int m = 0; m < M && m < n_real; m++) {
        double ss = 0;
        for (int k = 0; k < K; k++) ss += (double)xf[(size_t)m * K + k] * xf[(size_t)m * K + k];
        const double rs = 1.0 / sqrt(ss / K + 1e-6);
        for (int k = 0; k < K; k++) xs[(size_t)m * K + k] = (float)(xf[(size_t)m * K + k] * rs);
    }
    ref_linear(xs.data(), wf.data(), bfv.data(), NULL, ref.data(), M, N, K, epi);
    if (epi == ENG_CU_EPI_SWIGLU) ref.resize(ref_swiglu(ref.data(), M, N));
    std::vector<float> got = lab_download_bf16(dy, ref.size());
    char name[96];
    snprintf(name, sizeof name, "gemm-chain rms-fold M=%d (real %d) N=%d K=%d epi=%d%s%s%s", M, n_real, N, K, epi,
             with_b ? " +bias" : "", nc_tag(), wp_tag(wp));
    lab_check(name, got.data(), ref.data(), got.size(), 3e-2f, 1e-2f);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy); cudaFree(dnr); cudaFree(wp);
}

/* Row statistics in fp64: (mean, 1 / sqrt(var + eps)) of each of M rows
 * of K values, rows at or past n_real as (0, 0) (what the fold stores). */
static std::vector<float2> ref_row_stats(const std::vector<float> &x, int M, int n_real, int K, double eps) {
    std::vector<float2> st((size_t)M, make_float2(0.f, 0.f));
    for (int m = 0; m < M && m < n_real; m++) {
        double mu = 0, var = 0;
        for (int k = 0; k < K; k++) mu += x[(size_t)m * K + k];
        mu /= K;
        for (int k = 0; k < K; k++) var += (x[(size_t)m * K + k] - mu) * (x[(size_t)m * K + k] - mu);
        st[m] = make_float2((float)mu, (float)(1.0 / sqrt(var / K + eps)));
    }
    return st;
}

/* The chain kernel's LayerNorm fold (the encoders' norms in the chain): X
 * raw in the products; the lab folds gamma into W (W' = bf16 of W gamma),
 * W beta into the bias (b', bf16) and takes W''s column sums, as the
 * engine does at load.  The kernel's contract is epi(xhat W'^T + b') with
 * xhat = (x - mu) rs, rows at or past n_real as xhat = 0 (so epi(b')):
 * the reference is that in fp64 on the same bf16 W' and b' (the first GPU
 * run compared against LN(x) W^T + b instead, and the fold's roundings of
 * W' and b' -- ~0.05 on these unit-scale random weights -- failed it; the
 * fold's accuracy on a real model is e2e_vs_transformers' to check).  Block
 * 0 must store every row's (mu, rs).  The rows get a large common offset
 * and an outlier column so the mean matters. */
static void check_lnfold(int M, int n_real, int N, int K, int epi) {
    std::vector<float> xf, wf, bfv, gf, bef;
    std::vector<uint16_t> xb, wb, bb;
    rand_norm_operands(M, N, K, xf, xb, wf, wb, bfv, bb, gf, bef);
    for (int m = 0; m < M; m++) /* row means of about 2 + m / 4, and an outlier column */
        for (int k = 0; k < K; k++) {
            float &v = xf[(size_t)m * K + k];
            v += 2.f + 0.25f * m + (k == 7 ? 9.f : 0.f);
            xb[(size_t)m * K + k] = eng_cu_f2bf_bits(v);
            v = eng_cu_bf_bits2f(xb[(size_t)m * K + k]);
        }
    /* the fold, as the engine's put_folded */
    std::vector<uint16_t> wfb((size_t)N * K), bfb((size_t)N);
    std::vector<float> cs((size_t)N);
    for (int n = 0; n < N; n++) {
        double bsum = bfv[n], csum = 0;
        for (int k = 0; k < K; k++) {
            wfb[(size_t)n * K + k] = eng_cu_f2bf_bits(wf[(size_t)n * K + k] * gf[k]);
            csum += eng_cu_bf_bits2f(wfb[(size_t)n * K + k]);
            bsum += (double)wf[(size_t)n * K + k] * bef[k];
        }
        bfb[n] = eng_cu_f2bf_bits((float)bsum);
        cs[n] = (float)csum;
    }
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wfb), *db = (bf16 *)lab_upload(bfb), *dy;
    float *dcs = lab_upload(cs);
    float2 *dst = NULL;
    int *dnr = lab_upload(std::vector<int>{n_real});
    CUCHECK(cudaMalloc(&dy, (size_t)M * N * 2));
    CUCHECK(cudaMalloc(&dst, (size_t)M * sizeof(float2)));
    lab_poison(dy, (size_t)M * N * 2);
    lab_poison(dst, (size_t)M * sizeof(float2));
    const eng_cu_chain_norm nm = {NULL, NULL, 1e-6f, dnr, NULL, 2, dcs, dst};
    char name[112];
    snprintf(name, sizeof name, "gemm-chain ln-fold M=%d (real %d) N=%d K=%d epi=%d", M, n_real, N, K, epi);
    if (!eng_cu_gemm_chain_ok(M, N, K, 3)) {
        printf("  %-44s FAIL (not accepted)\n", name);
        lab_failures++;
    } else {
        bf16 *wp = lab_wp(dw, M, N, K);
        CUCHECK(eng_cu_gemm_chain(0, dx, dw, db, NULL, dy, M, N, K, epi, &nm, NULL, 0, NULL, wp));
        CUCHECK(cudaDeviceSynchronize());
        snprintf(name + strlen(name), sizeof name - strlen(name), "%s%s", nc_tag(), wp_tag(wp));
        cudaFree(wp);
        const std::vector<float2> st = ref_row_stats(xf, M, n_real, K, 1e-6);
        std::vector<float> xn((size_t)M * K, 0.f), ref((size_t)M * N), w1((size_t)N * K), b1((size_t)N);
        for (int m = 0; m < n_real && m < M; m++)
            for (int k = 0; k < K; k++)
                xn[(size_t)m * K + k] = (float)(((double)xf[(size_t)m * K + k] - st[m].x) * st[m].y);
        for (size_t i = 0; i < w1.size(); i++) w1[i] = eng_cu_bf_bits2f(wfb[i]);
        for (int n = 0; n < N; n++) b1[n] = eng_cu_bf_bits2f(bfb[n]);
        ref_linear(xn.data(), w1.data(), b1.data(), NULL, ref.data(), M, N, K, epi);
        std::vector<float> got = lab_download_bf16(dy, ref.size());
        lab_check(name, got.data(), ref.data(), got.size(), 3e-2f, 1e-2f);
        std::vector<float2> gst((size_t)M);
        CUCHECK(cudaMemcpy(gst.data(), dst, (size_t)M * sizeof(float2), cudaMemcpyDeviceToHost));
        std::vector<float> g2((size_t)2 * M), r2((size_t)2 * M);
        for (int m = 0; m < M; m++) g2[2 * m] = gst[m].x, g2[2 * m + 1] = gst[m].y, r2[2 * m] = st[m].x,
                                    r2[2 * m + 1] = st[m].y;
        lab_check("  its rows' (mu, rs)", g2.data(), r2.data(), g2.size(), 1e-4f, 1e-4f);
    }
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy); cudaFree(dcs); cudaFree(dst); cudaFree(dnr);
}

/* The LayerNorm residual (eng_cu_chain_res): Y = X W^T + b + LN(R), R's
 * rows raw, their (mu, rs) given as a fold stored them; rows at or past
 * n_real add nothing.  fp64 reference. */
static void check_lnres(int M, int n_real, int N, int K) {
    std::vector<float> xf, wf, bfv, rf, gf, bef;
    std::vector<uint16_t> xb, wb, bb, rb, tmp;
    lab_rand_bf16(xf, xb, (size_t)M * K, 1.f);
    lab_rand_bf16(wf, wb, (size_t)N * K, 1.f);
    lab_rand_bf16(bfv, bb, (size_t)N, 1.f);
    lab_rand_bf16(rf, rb, (size_t)M * N, 3.f);
    lab_rand_bf16(gf, tmp, (size_t)N, 1.f);
    lab_rand_bf16(bef, tmp, (size_t)N, 0.5f);
    for (float &v : gf) v += 1.f;
    for (size_t i = 0; i < rf.size(); i++) rb[i] = eng_cu_f2bf_bits(rf[i] + 1.5f), rf[i] = eng_cu_bf_bits2f(rb[i]);
    const std::vector<float2> st = ref_row_stats(rf, M, n_real, N, 1e-12);
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *db = (bf16 *)lab_upload(bb),
         *dr = (bf16 *)lab_upload(rb), *dy;
    float *dg = lab_upload(gf), *dbe = lab_upload(bef);
    float2 *dst = lab_upload(st);
    int *dnr = lab_upload(std::vector<int>{n_real});
    CUCHECK(cudaMalloc(&dy, (size_t)M * N * 2));
    lab_poison(dy, (size_t)M * N * 2);
    const eng_cu_chain_res res = {dst, dg, dbe, dnr};
    bf16 *wp = lab_wp(dw, M, N, K);
    CUCHECK(eng_cu_gemm_chain(0, dx, dw, db, dr, dy, M, N, K, ENG_CU_EPI_BIAS, NULL, NULL, 0, &res, wp));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> rn((size_t)M * N, 0.f), ref((size_t)M * N);
    for (int m = 0; m < n_real && m < M; m++)
        for (int n = 0; n < N; n++)
            rn[(size_t)m * N + n] = (float)(((double)rf[(size_t)m * N + n] - st[m].x) * st[m].y * gf[n] + bef[n]);
    ref_linear(xf.data(), wf.data(), bfv.data(), rn.data(), ref.data(), M, N, K, ENG_CU_EPI_BIAS);
    std::vector<float> got = lab_download_bf16(dy, ref.size());
    char name[112];
    snprintf(name, sizeof name, "gemm-chain ln-residual M=%d (real %d) N=%d K=%d%s", M, n_real, N, K, wp_tag(wp));
    lab_check(name, got.data(), ref.data(), got.size(), 3e-2f, 1e-2f);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dr); cudaFree(dy); cudaFree(dg); cudaFree(dbe); cudaFree(wp);
    cudaFree(dst); cudaFree(dnr);
}

static void bench(eng_cu_gemm_ctx *g, const char *what, int N, int K, int epi) {
    const int Ms[] = {16, 64, 256, 1024, 4096, 16384, 65536};
    bf16 *x, *w, *b, *y;
    CUCHECK(cudaMalloc(&x, (size_t)65536 * K * 2));
    CUCHECK(cudaMalloc(&w, (size_t)N * K * 2));
    CUCHECK(cudaMalloc(&b, (size_t)N * 2));
    CUCHECK(cudaMalloc(&y, (size_t)65536 * N * 2));
    /* random-ish bits, not zeros (zeros run faster than real data) */
    std::vector<float> f;
    std::vector<uint16_t> hb;
    lab_rand_bf16(f, hb, (size_t)N * K, 1.f);
    CUCHECK(cudaMemcpy(w, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    for (size_t off = 0; off < (size_t)65536 * K; off += hb.size())
        CUCHECK(cudaMemcpy(x + off, hb.data(), std::min(hb.size(), (size_t)65536 * K - off) * 2, cudaMemcpyHostToDevice));
    CUCHECK(cudaMemcpy(b, hb.data(), (size_t)N * 2, cudaMemcpyHostToDevice));
    for (int M : Ms) {
        char err[256];
        const float ms = lab_time_ms([&] {
            if (eng_cu_gemm(g, 0, x, w, b, NULL, y, M, N, K, epi, err, sizeof err)) { printf("%s\n", err); exit(2); }
        }, 20);
        float best = ms;
        int best_i = 0;
        for (int i = 1; i < 8; i++) {
            if (eng_cu_gemm_candidate(g, 0, x, w, b, y, M, N, K, epi, i)) break;
            const float t = lab_time_ms([&] { eng_cu_gemm_candidate(g, 0, x, w, b, y, M, N, K, epi, i); }, 10);
            if (t < best) { best = t; best_i = i; }
        }
        const double fl = 2.0 * M * N * K;
        printf("  bench gemm %-10s M=%-6d N=%-5d K=%-5d heuristic %8.2f us %6.1f TFLOP/s | best cand %d %8.2f us %6.1f TFLOP/s\n",
               what, M, N, K, ms * 1e3, fl / (ms * 1e-3) / 1e12, best_i, best * 1e3,
               fl / (best * 1e-3) / 1e12);
    }
    cudaFree(x); cudaFree(w); cudaFree(b); cudaFree(y);
}

/* Few rows: 20 back-to-back launches (launch cost included, as in a graph
 * of many small nodes), cuBLASLt's heuristic choice against the skinny
 * kernel v1 and v2.  Each of the 20 launches reads its own copy of the
 * weights (a 256 MB pool), so weights come from HBM as in a real forward,
 * not from L2; GB/s counts the weight bytes. */
static void bench_small(eng_cu_gemm_ctx *g) {
    const int shapes[][2] = {{1152, 384}, {384, 384}, {1536, 384}, {384, 1536},
                             {2304, 768}, {768, 768}, {3072, 768}, {768, 3072},
                             /* Qwen3-0.6B: qkv, o, gate|up, down */
                             {4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}};
    const size_t pool = (size_t)256 << 20;
    bf16 *x, *w, *b, *y;
    CUCHECK(cudaMalloc(&x, (size_t)64 * 3072 * 2));
    CUCHECK(cudaMalloc(&w, pool));
    CUCHECK(cudaMalloc(&b, (size_t)6144 * 2));
    CUCHECK(cudaMalloc(&y, (size_t)64 * 6144 * 2));
    CUCHECK(cudaMemset(x, 0x3c, (size_t)64 * 3072 * 2));
    CUCHECK(cudaMemset(w, 0x3b, pool));
    CUCHECK(cudaMemset(b, 0x3a, (size_t)6144 * 2));
    cudaStream_t st; /* blocking: lab_time_ms's events on the legacy stream bracket it */
    CUCHECK(cudaStreamCreate(&st));
    /* the norm prologue's parameters (LayerNorm) and real row count */
    float *gam;
    int *nrows;
    CUCHECK(cudaMalloc(&gam, 2 * 3072 * 4));
    CUCHECK(cudaMemset(gam, 0, 2 * 3072 * 4));
    CUCHECK(cudaMalloc(&nrows, 4));
    eng_cu_chain_norm nm = {gam, gam + 3072, 1e-6f, nrows, NULL, 0, NULL, NULL};
    char err[256];
    for (auto &sh : shapes)
        for (int M : {16, 64}) {
            const int N = sh[0], K = sh[1];
            const size_t wn = (size_t)N * K;
            CUCHECK(cudaMemcpy(nrows, &M, 4, cudaMemcpyHostToDevice));
            const int copies = (int)(pool / (wn * 2)) < 20 ? (int)(pool / (wn * 2)) : 20;
            const float tl = lab_time_ms([&] {
                for (int i = 0; i < 20; i++)
                    if (eng_cu_gemm(g, 0, x, w + (i % copies) * wn, b, NULL, y, M, N, K, ENG_CU_EPI_BIAS, err,
                                    sizeof err)) exit(2);
            }, 10) / 20;
            float ts[2];
            for (int v = 1; v <= 2; v++) {
                eng_cu_skinny_version = v;
                ts[v - 1] = lab_time_ms([&] {
                    for (int i = 0; i < 20; i++)
                        CUCHECK(eng_cu_gemm_small(0, x, w + (i % copies) * wn, b, NULL, y, M, N, K, ENG_CU_EPI_BIAS));
                }, 10) / 20;
            }
            eng_cu_skinny_version = 1;
            /* v3 back to back as in the chain: PDL on, so each launch's
             * weight requests overlap the previous one; launched from the
             * host, then as a captured graph (what the chain runs), plain
             * and with the norm prologue */
            float t3 = 0.f, tg = 0.f, tgc = 0.f, tgn = 0.f, tgp = 0.f, tg32 = 0.f;
            auto v3 = [&](const eng_cu_chain_norm *nm, int pf = 0) {
                for (int i = 0; i < 20; i++)
                    CUCHECK(eng_cu_gemm_chain(st, x, w + (i % copies) * wn, b, NULL, y, M, N, K, ENG_CU_EPI_BIAS, nm,
                                              pf ? w + ((i + 1) % copies) * wn : NULL, wn * 2));
            };
            if (eng_cu_gemm_chain_ok(M, N, K, 0)) {
                eng_cu_chain_nc = 16; /* blocks of 16 columns, then (tg32) of 32 where built */
                eng_cu_pdl_on = 1;
                t3 = lab_time_ms([&] { v3(NULL); }, 10) / 20;
                eng_cu_pdl_on = 0;
                tg = lab_graph_ms(st, [&] { v3(NULL); }, 10) / 20;
                eng_cu_chain_nc = 32;
                v3(NULL); /* outside the capture: the first call sets the kernel's shared-memory cap */
                CUCHECK(cudaStreamSynchronize(st));
                if (eng_cu_chain_last_nc == 32) tg32 = lab_graph_ms(st, [&] { v3(NULL); }, 10) / 20;
                eng_cu_chain_nc = 16;
                tgp = lab_graph_ms(st, [&] { v3(NULL, 1); }, 10) / 20; /* each one prefetches the next one's weights */
                eng_cu_chain_bulk = 0;
                tgc = lab_graph_ms(st, [&] { v3(NULL); }, 10) / 20;
                eng_cu_chain_bulk = 1;
                eng_cu_chain_nc = 0;
            }
            if (eng_cu_gemm_chain_ok(M, N, K, 1)) {
                v3(&nm); /* outside the capture: the first call sets the kernel's shared-memory cap */
                CUCHECK(cudaStreamSynchronize(st));
                tgn = lab_graph_ms(st, [&] { v3(&nm); }, 10) / 20;
            }
            const double gbs = (double)wn * 2 / 1e9 / 1e-3;
            printf("  bench small-M M=%-3d N=%-5d K=%-5d cuBLASLt %6.2f us (%4.0f GB/s)  skinny v1 %6.2f us  "
                   "v2 %6.2f us (%4.0f GB/s)  v3+PDL %6.2f us (%4.0f GB/s)  graph: v3 %5.2f us (%4.0f GB/s)  "
                   "+L2 prefetch %5.2f us  cp.async %5.2f us  +norm %5.2f us  32 columns a block %5.2f us\n",
                   M, N, K, tl * 1e3, gbs / tl, ts[0] * 1e3, ts[1] * 1e3, gbs / ts[1], t3 * 1e3, t3 > 0 ? gbs / t3 : 0.,
                   tg * 1e3, tg > 0 ? gbs / tg : 0., tgp * 1e3, tgc * 1e3, tgn * 1e3, tg32 * 1e3);
        }
    cudaFree(x); cudaFree(w); cudaFree(b); cudaFree(y); cudaFree(gam); cudaFree(nrows);
    CUCHECK(cudaStreamDestroy(st));
}

int main(void) {
    char err[256];
    eng_cu_gemm_ctx *g = eng_cu_gemm_create((size_t)32 << 20, err, sizeof err);
    if (!g) { printf("FAIL: %s\n", err); return 1; }
    for (int M : {1, 16, 33})
        for (int epi : {ENG_CU_EPI_NONE, ENG_CU_EPI_BIAS, ENG_CU_EPI_BIAS_GELU}) {
            check(g, M, 1152, 384, epi);
            check(g, M, 768, 3072, epi);
        }
    check(g, 200, 1536, 384, ENG_CU_EPI_BIAS_GELU);
    check(g, 17, 768, 3072, ENG_CU_EPI_BIAS, 1);
    check(g, 1, 384, 1536, ENG_CU_EPI_BIAS, 1);
    /* with tuning: the chosen (fastest) candidate must compute the same */
    eng_cu_gemm_ctx *gt = eng_cu_gemm_create((size_t)32 << 20, err, sizeof err);
    eng_cu_gemm_set_tuning(gt, 1);
    for (int M : {1, 16, 300, 1024}) {
        check(gt, M, 1152, 384, ENG_CU_EPI_BIAS);
        check(gt, M, 1536, 384, ENG_CU_EPI_BIAS_GELU);
        check(gt, M, 384, 1536, ENG_CU_EPI_BIAS, 1);
    }
    eng_cu_gemm_destroy(gt);
    /* the skinny kernel on its own, every M tile count and both warp counts */
    use_small = 1;
    for (int M : {1, 16, 17, 33, 64}) {
        check(g, M, 1152, 384, ENG_CU_EPI_BIAS);
        check(g, M, 1536, 384, ENG_CU_EPI_BIAS_GELU);
        check(g, M, 384, 1536, ENG_CU_EPI_BIAS, 1);
        check(g, M, 3072, 768, ENG_CU_EPI_BIAS_GELU);
        check(g, M, 768, 3072, ENG_CU_EPI_BIAS, 1);
    }
    check(g, 48, 2304, 768, ENG_CU_EPI_NONE);
    /* v2: every M tile count and warp count (16 warps: K >= 2048, N <= 2048, M <= 32) */
    eng_cu_skinny_version = 2;
    for (int M : {1, 16, 17, 33, 64}) {
        check(g, M, 1152, 384, ENG_CU_EPI_BIAS);
        check(g, M, 3072, 768, ENG_CU_EPI_BIAS_GELU);
        check(g, M, 768, 3072, ENG_CU_EPI_BIAS, 1);
        check(g, M, 1024, 2048, ENG_CU_EPI_NONE, 1);
        check(g, M, 4096, 1024, ENG_CU_EPI_NONE);
    }
    check(g, 16, 1024, 3072, ENG_CU_EPI_NONE, 1);
    eng_cu_skinny_version = 1;
    /* v3 (the chain kernel): every K split (warps x groups) it is built
     * for, every M tile count (X in one chunk or several); all of it with
     * blocks of 16 columns, then again with 32 wherever they are built
     * (eng_cu_chain_nc) */
    use_small = 3;
    for (int nc : {16, 32}) {
        eng_cu_chain_nc = nc;
        printf("  -- chain kernel, eng_cu_chain_nc = %d\n", nc);
        {
            /* the blocks really are of the size asked for: Qwen3's QKV and
             * gate|up, BERT-base's QKV (two m tiles), with 32 */
            const int want[][4] = {{16, 4096, 1024, 0}, {16, 6144, 1024, 0}, {32, 2304, 768, 0}, {64, 2304, 768, 1}};
            for (auto &c : want) {
                check(g, c[0], c[1], c[2], c[1] == 6144 ? ENG_CU_EPI_SWIGLU : ENG_CU_EPI_BIAS);
                const int expect = nc == 32 && !c[3] ? 32 : 16; /* 64 rows (four m tiles) keep 16 */
                if (eng_cu_chain_last_nc != expect) {
                    printf("  FAIL chain M=%d N=%d K=%d ran with %d columns a block, not %d\n", c[0], c[1], c[2],
                           eng_cu_chain_last_nc, expect);
                    lab_failures++;
                }
            }
        }
        const int shapes[][3] = {{1152, 384, ENG_CU_EPI_BIAS}, {3072, 768, ENG_CU_EPI_BIAS_GELU},
                                 {384, 1536, ENG_CU_EPI_BIAS}, {768, 3072, ENG_CU_EPI_BIAS},
                                 {4096, 1024, ENG_CU_EPI_NONE}, {1024, 2048, ENG_CU_EPI_NONE}};
        for (int bulk : {1, 0})
        for (int M : {1, 16, 17, 33, 64})
            for (auto &sh : shapes) {
                eng_cu_chain_bulk = bulk; /* the weight slice by bulk copies, then by cp.async */
                if (!eng_cu_gemm_chain_ok(M, sh[0], sh[1], 0)) {
                    printf("  FAIL chain_ok(%d, %d, %d) = 0: every shape here should run\n", M, sh[0], sh[1]);
                    lab_failures++;
                    continue;
                }
                check(g, M, sh[0], sh[1], sh[2], M % 2);
            }
        eng_cu_chain_bulk = 1;
        /* the norm prologue: K = 384 (6 warps x 1 group), 768 (6 x 2),
         * 1024 (8 x 2); padded rows; 1, 2 and 4 m tiles */
        check_norm(1, 1, 1152, 384, ENG_CU_EPI_BIAS, 0);
        check_norm(16, 11, 1536, 384, ENG_CU_EPI_BIAS_GELU, 0);
        check_norm(16, 16, 2304, 768, ENG_CU_EPI_BIAS, 0);
        check_norm(32, 29, 3072, 768, ENG_CU_EPI_BIAS_GELU, 0);
        check_norm(64, 50, 1536, 384, ENG_CU_EPI_BIAS_GELU, 0);
        check_norm(16, 13, 4096, 1024, ENG_CU_EPI_NONE, 1);
        check_norm(32, 32, 6144, 1024, ENG_CU_EPI_NONE, 1);
        /* the SwiGLU epilogue (Qwen3's gate|up): 8 gate and 8 up columns a
         * block; with bias (odd M) and without, with the RMSNorm prologue */
        for (int M : {1, 16, 29, 64}) check(g, M, 6144, 1024, ENG_CU_EPI_SWIGLU);
        check(g, 16, 3072, 768, ENG_CU_EPI_SWIGLU);
        check_norm(16, 13, 6144, 1024, ENG_CU_EPI_SWIGLU, 1);
        /* refused: a residual with SwiGLU; SwiGLU anywhere but the chain */
        if (eng_cu_gemm_chain(0, NULL, NULL, NULL, (const bf16 *)16, (bf16 *)16, 16, 6144, 1024, ENG_CU_EPI_SWIGLU,
                              NULL) != cudaErrorInvalidValue ||
            eng_cu_gemm_small(0, NULL, NULL, NULL, NULL, NULL, 16, 6144, 1024, ENG_CU_EPI_SWIGLU) !=
                cudaErrorInvalidValue) {
            printf("  FAIL a SwiGLU call that must be refused was accepted\n");
            lab_failures++;
        }
        if (eng_cu_gemm_chain_ok(64, 2304, 768, 1) || eng_cu_gemm_chain_ok(17, 768, 3072, 1)) {
            printf("  FAIL chain_ok with a norm where X would not stay in registers\n");
            lab_failures++;
        }
        /* the RMS fold (Qwen3's norms in the chain): K = 1024 (8 warps x
         * 2 groups: whole-sector X) and 384 (6 x 1: the other layout); 1
         * and 2 m tiles; padded rows; every epilogue Qwen3 uses, plus bias */
        check_fold(1, 1, 4096, 1024, ENG_CU_EPI_NONE);
        check_fold(16, 13, 4096, 1024, ENG_CU_EPI_NONE);
        check_fold(16, 16, 4096, 1024, ENG_CU_EPI_BIAS);
        check_fold(16, 11, 1152, 384, ENG_CU_EPI_BIAS_GELU);
        check_fold(16, 16, 6144, 1024, ENG_CU_EPI_SWIGLU);
        check_fold(29, 23, 6144, 1024, ENG_CU_EPI_SWIGLU);
        check_fold(32, 32, 4096, 1024, ENG_CU_EPI_NONE);
        check_fold(24, 24, 2304, 768, ENG_CU_EPI_BIAS);
        /* the LayerNorm fold (the encoders' norms in the chain): K = 384
         * (6 warps x 1 group), 768 (6 x 2), 1024 (8 x 2); 1, 2 and 4 m
         * tiles; padded rows; bias, bias + GELU */
        check_lnfold(1, 1, 1152, 384, ENG_CU_EPI_BIAS);
        check_lnfold(16, 13, 1152, 384, ENG_CU_EPI_BIAS);
        check_lnfold(16, 16, 1536, 384, ENG_CU_EPI_BIAS_GELU);
        check_lnfold(16, 11, 2304, 768, ENG_CU_EPI_BIAS);
        check_lnfold(16, 16, 3072, 768, ENG_CU_EPI_BIAS_GELU);
        check_lnfold(29, 23, 3072, 768, ENG_CU_EPI_BIAS_GELU);
        check_lnfold(64, 50, 1536, 384, ENG_CU_EPI_BIAS_GELU);
        check_lnfold(64, 64, 2304, 768, ENG_CU_EPI_BIAS);
        check_lnfold(32, 30, 4096, 1024, ENG_CU_EPI_BIAS);
        /* the LayerNorm residual: O (K = N = H) and down (K = I) */
        check_lnres(1, 1, 384, 384);
        check_lnres(16, 13, 384, 1536);
        check_lnres(16, 16, 768, 768);
        check_lnres(33, 30, 768, 3072);
        check_lnres(64, 61, 384, 1536);
        {
            /* refused: the LayerNorm fold with SwiGLU, without column sums,
             * with K past 1024; a LayerNorm residual without R */
            const eng_cu_chain_norm lnf = {NULL, NULL, 1e-6f, (const int *)16, NULL, 2, (const float *)16, NULL},
                                    nocs = {NULL, NULL, 1e-6f, (const int *)16, NULL, 2, NULL, NULL};
            const eng_cu_chain_res r = {(const float2 *)16, (const float *)16, (const float *)16, (const int *)16};
            const bf16 *p16 = (const bf16 *)16;
            if (eng_cu_gemm_chain(0, p16, p16, p16, NULL, (bf16 *)16, 16, 6144, 1024, ENG_CU_EPI_SWIGLU, &lnf) !=
                    cudaErrorInvalidValue ||
                eng_cu_gemm_chain(0, p16, p16, p16, NULL, (bf16 *)16, 16, 1152, 384, ENG_CU_EPI_BIAS, &nocs) !=
                    cudaErrorInvalidValue ||
                eng_cu_gemm_chain_ok(16, 768, 1536, 3) ||
                eng_cu_gemm_chain(0, p16, p16, p16, NULL, (bf16 *)16, 16, 384, 384, ENG_CU_EPI_BIAS, NULL, NULL, 0,
                                  &r) != cudaErrorInvalidValue) {
                printf("  FAIL a LayerNorm fold / residual call that must be refused was accepted\n");
                lab_failures++;
            }
        }
        {
            const eng_cu_chain_norm bad = {(const float *)16, NULL, 1e-6f, (const int *)16, NULL, 1, NULL, NULL};
            if (eng_cu_gemm_chain_ok(33, 4096, 1024, 2) ||
                eng_cu_gemm_chain(0, (const bf16 *)16, (const bf16 *)16, NULL, NULL, (bf16 *)16, 16, 4096, 1024,
                                  ENG_CU_EPI_NONE, &bad) != cudaErrorInvalidValue) {
                printf("  FAIL the fold past 32 rows, or with norm weights, was accepted\n");
                lab_failures++;
            }
        }
    }
    {
        /* the padded weights (lab_padw): every form the engine runs at <= 16
         * rows, blocks of 16 and of 32 columns; then with cp.async, which
         * must ignore the copy.  The padding is what the kernel's shared
         * memory rows carry at one m tile: 8 elements for one group of 64 k
         * a warp, 32 for more */
        if (eng_cu_chain_wpad(384) != 8 || eng_cu_chain_wpad(1024) != 32 || eng_cu_chain_wpad(3072) != 32 ||
            eng_cu_chain_wpad(100) != 0) {
            printf("  FAIL eng_cu_chain_wpad: %d %d %d %d\n", eng_cu_chain_wpad(384), eng_cu_chain_wpad(1024),
                   eng_cu_chain_wpad(3072), eng_cu_chain_wpad(100));
            lab_failures++;
        }
        lab_padw = 1;
        for (int nc : {16, 32}) {
            eng_cu_chain_nc = nc;
            printf("  -- chain kernel on padded weights, eng_cu_chain_nc = %d\n", nc);
            for (int M : {1, 16}) {
                check(g, M, 1152, 384, ENG_CU_EPI_BIAS, M % 2);
                check(g, M, 3072, 768, ENG_CU_EPI_BIAS_GELU);
                check(g, M, 384, 1536, ENG_CU_EPI_BIAS, 1);
                check(g, M, 768, 3072, ENG_CU_EPI_BIAS, 1);
                check(g, M, 4096, 1024, ENG_CU_EPI_NONE);
                check(g, M, 1024, 2048, ENG_CU_EPI_NONE, 1);
                check(g, M, 6144, 1024, ENG_CU_EPI_SWIGLU);
                check(g, M, 3072, 768, ENG_CU_EPI_SWIGLU);
            }
            check_norm(16, 11, 1536, 384, ENG_CU_EPI_BIAS_GELU, 0);
            check_norm(16, 13, 6144, 1024, ENG_CU_EPI_SWIGLU, 1);
            check_fold(1, 1, 4096, 1024, ENG_CU_EPI_NONE);
            check_fold(16, 13, 4096, 1024, ENG_CU_EPI_NONE);
            check_fold(16, 16, 6144, 1024, ENG_CU_EPI_SWIGLU);
            check_fold(16, 11, 1152, 384, ENG_CU_EPI_BIAS_GELU);
            check_lnfold(16, 13, 1152, 384, ENG_CU_EPI_BIAS);
            check_lnfold(16, 16, 3072, 768, ENG_CU_EPI_BIAS_GELU);
            check_lnfold(1, 1, 1152, 384, ENG_CU_EPI_BIAS);
            check_lnres(16, 13, 384, 1536);
            check_lnres(16, 16, 768, 768);
            check_lnres(1, 1, 1024, 3072);
        }
        eng_cu_chain_nc = 0;
        eng_cu_chain_bulk = 0;
        check(g, 16, 4096, 1024, ENG_CU_EPI_NONE);
        check(g, 16, 6144, 1024, ENG_CU_EPI_SWIGLU);
        eng_cu_chain_bulk = 1;
        lab_padw = 0;
    }
    {
        /* the default (auto): 32 for Qwen3's 16-token gate|up (192 blocks,
         * several an SM); at 29 rows what it picked (one wave or not
         * depends on the kernel's registers), printed */
        eng_cu_chain_nc = 0;
        check(g, 16, 6144, 1024, ENG_CU_EPI_SWIGLU);
        if (eng_cu_chain_last_nc != 32) {
            printf("  FAIL auto: 16 x 6144 x 1024 ran with %d columns a block, not 32\n", eng_cu_chain_last_nc);
            lab_failures++;
        }
        check(g, 29, 6144, 1024, ENG_CU_EPI_SWIGLU);
        printf("  auto at 29 x 6144 x 1024: %d columns a block\n", eng_cu_chain_last_nc);
        check(g, 16, 1152, 384, ENG_CU_EPI_BIAS);
        if (eng_cu_chain_last_nc != 16) {
            printf("  FAIL auto: 16 x 1152 x 384 ran with %d columns a block, not 16\n", eng_cu_chain_last_nc);
            lab_failures++;
        }
    }
    eng_cu_chain_nc = 0;
    use_small = 0;
    if (!getenv("LAB_QUICK")) bench_small(g);
    if (getenv("LAB_SMALL_ONLY")) { eng_cu_gemm_destroy(g); return lab_finish("lab_gemm"); }
    if (getenv("LAB_QUICK")) { eng_cu_gemm_destroy(g); return lab_finish("lab_gemm"); }
    bench(g, "minilm-qkv", 1152, 384, ENG_CU_EPI_BIAS);
    bench(g, "minilm-up", 1536, 384, ENG_CU_EPI_BIAS_GELU);
    bench(g, "minilm-down", 384, 1536, ENG_CU_EPI_BIAS);
    bench(g, "bert-qkv", 2304, 768, ENG_CU_EPI_BIAS);
    bench(g, "bert-ao", 768, 768, ENG_CU_EPI_BIAS);
    bench(g, "bert-up", 3072, 768, ENG_CU_EPI_BIAS_GELU);
    bench(g, "bert-down", 768, 3072, ENG_CU_EPI_BIAS);
    eng_cu_gemm_destroy(g);
    return lab_finish("lab_gemm");
}

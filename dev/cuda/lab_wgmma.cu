/* lab_wgmma: our Hopper GEMM (src/engine/cuda/eng_cu_wgmma.cu) against an
 * fp64 reference, and timed beside cuBLASLt (eng_cu_gemm, tuned as the
 * engine tunes it) at the saturated step's shapes of the three models.
 *
 * Checks (every version): every epilogue (none, bias, bias + GELU, residual, SwiGLU with
 * and without bias), M of 1, 127, 129 and 1000 (tails of the 128-row
 * tile), K from 64 (one slice) to 3072 (the ring wrapping many times).
 * Rows are sampled for the large M (every 7th) so the reference stays
 * fast; the sampled rows include the first and last.  Unwritten outputs
 * stay NaN (poisoned) and fail.  Tolerance: |a - b| <= 2e-2 + 1e-2 |ref|
 * on outputs of O(1) -- bf16 rounding of the output plus fp32 sums.
 *
 * LAB_WG_ROWLN=1 (or =quick: checks only; =bench: timing only) instead
 * checks the product with the whole row's LayerNorm in its epilogue
 * (eng_cu_gemm_rowln.cu, and with W resident in CTA pairs,
 * eng_cu_gemm_rowln_res.cu) against fp64 and times
 * it against the product + add_ln at MiniLM's O and down shapes; its
 * checks also run among the default ones.
 * LAB_WG_PROF="N K epi ..." instead prints where the time of versions 3
 * and 4 goes (its clock64 counters: waiting for data, for the tensor cores,
 * storing), the same without its epilogue (the products alone), and how
 * many CTAs ran.
 * Timing (LAB_QUICK=1 skips it): every version and cuBLASLt in turn, three
 * rounds, the best median of 10 launches each (so clock drift hits all
 * alike), TFLOP/s and the ratio to cuBLASLt; the same
 * shape through cuBLASLt with the engine's tuning (fastest of 8
 * candidates), and for SwiGLU cuBLASLt's gate|up product plus the
 * engine's SwiGLU kernel -- what the graph path runs today; and Qwen3's
 * QKV product with the q/k norm + rotary in our epilogue (checked against
 * fp64 too) beside cuBLASLt's product + the q/k kernel.
 */
#include "lab.h"

static double gelu_ref(double v) { return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))); }

/* a launch's outcome: false (and a FAIL line) if it or the kernel failed */
static bool launched(const char *name, cudaError_t e) {
    if (e == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess) return true;
    printf("  %-56s FAIL  launch: %s\n", name, cudaGetErrorString(e != cudaSuccess ? e : cudaGetLastError()));
    lab_failures++;
    return false;
}

/* the rows the reference computes: all of them up to 256, else every
 * step-th and the last */
static std::vector<int> sample_rows(int M, int step) {
    std::vector<int> r;
    if (M <= 256) step = 1;
    for (int i = 0; i < M; i += step) r.push_back(i);
    if (r.back() != M - 1) r.push_back(M - 1);
    return r;
}

/* a check's random operands: X [M, K], W [N, K] (scaled by 1/sqrt(K)), a
 * bias [N] and a residual of nr values (scale rscale), as floats and bf16 */
static void rand_operands(std::vector<float> &xf, std::vector<uint16_t> &xb, std::vector<float> &wf,
                          std::vector<uint16_t> &wb, std::vector<float> &bf, std::vector<uint16_t> &bb,
                          std::vector<float> &rf, std::vector<uint16_t> &rb, int M, int N, int K, size_t nr,
                          float rscale) {
    lab_rand_bf16(xf, xb, (size_t)M * K, 1.f);
    lab_rand_bf16(wf, wb, (size_t)N * K, 1.f / sqrtf((float)K));
    lab_rand_bf16(bf, bb, (size_t)N, 0.5f);
    lab_rand_bf16(rf, rb, nr, rscale);
}

/* g_rev: the checks' launches walk their tiles last to first (serpentine
 * order, eng_cu_order.c: the launch after eng_cu_order_begin(1)) */
static int g_rev = 0;

static void check(int M, int N, int K, int epi, int with_bias, int with_r) {
    std::vector<float> xf, wf, bf, rf;
    std::vector<uint16_t> xb, wb, bb, rb;
    const int No = ENG_CU_EPI_GATED(epi) ? N / 2 : N;
    rand_operands(xf, xb, wf, wb, bf, bb, rf, rb, M, N, K, (size_t)M * No, 1.f);
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *db = (bf16 *)lab_upload(bb);
    bf16 *dr = (bf16 *)lab_upload(rb), *dy;
    CUCHECK(cudaMalloc(&dy, (size_t)M * No * 2));
    lab_poison(dy, (size_t)M * No * 2);
    eng_cu_order_begin(g_rev);
    const cudaError_t e = eng_cu_gemm_wg(0, dx, dw, with_bias ? db : NULL, with_r ? dr : NULL, dy, M, N, K, epi);
    eng_cu_order_begin(0);
    char name[128];
    snprintf(name, sizeof name, "wgmma v%d M=%d N=%d K=%d epi=%d%s%s%s", eng_cu_wg_version, M, N, K, epi,
             with_bias ? " +b" : "", with_r ? " +R" : "", g_rev ? " rev" : "");
    if (!launched(name, e)) return;
    const std::vector<float> y = lab_download_bf16(dy, (size_t)M * No);
    std::vector<float> got, ref;
    for (int r : sample_rows(M, 7)) {
        std::vector<double> acc(N);
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)xf[(size_t)r * K + k] * wf[(size_t)n * K + k];
            acc[n] = s;
        }
        for (int n = 0; n < No; n++) {
            double v;
            if (ENG_CU_EPI_GATED(epi)) {
                double g = acc[n], u = acc[N / 2 + n];
                if (with_bias) { g += bf[n]; u += bf[N / 2 + n]; }
                v = epi == ENG_CU_EPI_GEGLU_TANH  ? gelu_ref(g) * u
                    : epi == ENG_CU_EPI_GEGLU_ERF ? 0.5 * g * (1.0 + erf(g / sqrt(2.0))) * u
                                                  : g / (1.0 + exp(-g)) * u;
            } else {
                v = acc[n];
                if (epi != ENG_CU_EPI_NONE) v += bf[n];
                if (epi == ENG_CU_EPI_BIAS_GELU) v = gelu_ref(v);
                if (with_r) v += rf[(size_t)r * No + n];
            }
            ref.push_back((float)v);
            got.push_back(y[(size_t)r * No + n]);
        }
    }
    lab_check(name, got.data(), ref.data(), got.size(), 2e-2f, 1e-2f);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dr); cudaFree(dy);
}

/* Qwen3's QKV product with the q/k RMSNorm + rotary in the epilogue
 * (eng_cu_gemm_wg_qk) against fp64: X W^T per row, then per Q and K head
 * of 128 x / rms(x) * w and the rotate-half rotation by the row's
 * position in its sequence (lens: the sequences, padded to M with zero
 * rows); V heads plain.  The rotary table is the engine's layout
 * ([rows][64][cos, sin], theta 1e6). */
static std::vector<float> qk_rope_table(int rows) {
    std::vector<float> t((size_t)rows * 128);
    for (int p = 0; p < rows; p++)
        for (int c = 0; c < 64; c++) {
            const double f = pow(1e6, -2.0 * c / 128.0);
            t[(size_t)p * 128 + 2 * c] = (float)cos(p * f);
            t[(size_t)p * 128 + 2 * c + 1] = (float)sin(p * f);
        }
    return t;
}

static void check_qk(int M, const std::vector<int> &lens, int nh, int nkv, int K, int with_rs = 0, int v = 3) {
    const int N = (nh + 2 * nkv) * 128, rope_rows = 2048;
    std::vector<float> xf, wf, qn(128), kn(128);
    std::vector<uint16_t> xb, wb;
    lab_rand_bf16(xf, xb, (size_t)M * K, 1.f);
    lab_rand_bf16(wf, wb, (size_t)N * K, 1.f / sqrtf((float)K));
    for (int c = 0; c < 128; c++) qn[c] = 1.f + 0.5f * lab_uniform(), kn[c] = 1.f + 0.5f * lab_uniform();
    std::vector<int32_t> cu(1, 0);
    for (int l : lens) cu.push_back(cu.back() + l);
    const int real = cu.back();
    for (size_t i = (size_t)real * K; i < (size_t)M * K; i++) xf[i] = 0.f, xb[i] = 0; /* padding rows */
    const std::vector<float> rope = qk_rope_table(rope_rows);
    /* with_rs 1: a row scale in [0.5, 1.5), 0 on padding rows (as
     * eng_cu_rms_rows leaves them); 2: the kernel's own RMS row scale
     * (eng_cu_row_norm), the reference's in fp64 */
    std::vector<float> rsh(M, 0.f);
    for (int r = 0; r < real; r++) {
        if (with_rs == 2) {
            double q = 0;
            for (int k = 0; k < K; k++) q += (double)xf[(size_t)r * K + k] * xf[(size_t)r * K + k];
            rsh[r] = (float)(1.0 / sqrt(q / K + 1e-6));
        } else
            rsh[r] = 1.f + 0.5f * lab_uniform();
    }
    float *drs = lab_upload(rsh);
    std::vector<int> nreal(1, real);
    int *dreal = lab_upload(nreal);
    const eng_cu_row_norm rn = {dreal, 1e-6f};
    std::vector<int> ns(1, (int)lens.size());
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *dy;
    float *dqn = lab_upload(qn), *dkn = lab_upload(kn), *drope = lab_upload(rope);
    int32_t *dcu = lab_upload(cu);
    int *dns = lab_upload(ns);
    CUCHECK(cudaMalloc(&dy, (size_t)M * N * 2));
    lab_poison(dy, (size_t)M * N * 2);
    eng_cu_qk_args qk;
    memset(&qk, 0, sizeof qk);
    qk.ld = N; qk.n_heads = nh; qk.n_kv_heads = nkv; qk.head_dim = 128;
    qk.q_norm = dqn; qk.k_norm = dkn; qk.eps = 1e-6f; qk.rope = drope; qk.rope_rows = rope_rows;
    qk.cu_seqlens = dcu; qk.n_seqs_dev = dns;
    char name[128];
    snprintf(name, sizeof name, "wgmma v%d qkv + q/k norm + rotary M=%d (%d real) N=%d K=%d%s", v, M, real, N, K,
             with_rs == 2 ? " + own RMS row scale" : with_rs ? " + row scale" : "");
    const cudaError_t e =
        eng_cu_gemm_wg_qk(v, 0, dx, dw, dy, M, N, K, &qk, with_rs == 1 ? drs : NULL, with_rs == 2 ? &rn : NULL);
    if (!launched(name, e)) return;
    const std::vector<float> y = lab_download_bf16(dy, (size_t)M * N);
    std::vector<float> got, ref;
    for (int r : sample_rows(M, 5)) {
        int sq = 0;
        while (sq + 1 < (int)lens.size() && cu[sq + 1] <= r) sq++;
        const int pos = r < real ? r - cu[sq] : 0;
        std::vector<double> acc(N);
        for (int n = 0; n < N; n++) {
            double sum = 0;
            for (int k = 0; k < K; k++) sum += (double)xf[(size_t)r * K + k] * wf[(size_t)n * K + k];
            acc[n] = with_rs ? sum * rsh[r] : sum;
        }
        for (int h = 0; h < nh + 2 * nkv; h++) {
            double *x = &acc[(size_t)h * 128];
            if (h < nh + nkv) {
                const float *g = h < nh ? qn.data() : kn.data();
                double ss = 0;
                for (int c = 0; c < 128; c++) ss += x[c] * x[c];
                const double inv = 1.0 / sqrt(ss / 128 + 1e-6);
                double v[128];
                for (int c = 0; c < 128; c++) v[c] = x[c] * inv * g[c];
                for (int c = 0; c < 64; c++) {
                    const double co = rope[(size_t)pos * 128 + 2 * c], si = rope[(size_t)pos * 128 + 2 * c + 1];
                    x[c] = v[c] * co - v[c + 64] * si;
                    x[c + 64] = v[c + 64] * co + v[c] * si;
                }
            }
        }
        for (int n = 0; n < N; n++) {
            ref.push_back((float)acc[n]);
            got.push_back(y[(size_t)r * N + n]);
        }
    }
    lab_check(name, got.data(), ref.data(), got.size(), 2e-2f, 1e-2f);
    cudaFree(dx); cudaFree(dw); cudaFree(dy); cudaFree(dqn); cudaFree(dkn); cudaFree(drope); cudaFree(dcu); cudaFree(dns);
    cudaFree(drs); cudaFree(dreal);
}

/* The SwiGLU product with a row scale (eng_cu_gemm_wg_rows): silu(s g + bg)
 * (s u + bu) against fp64, s in [0.5, 1.5) and 0 on the last rows; own:
 * s the kernel's own RMS row scale (eng_cu_row_norm: the last three rows
 * past the real count), the reference's in fp64, X scaled by row so the
 * scales differ. */
static void check_rows(int v, int M, int N, int K, int with_bias, int own = 0) {
    std::vector<float> xf, wf, bf;
    std::vector<uint16_t> xb, wb, bb;
    lab_rand_bf16(xf, xb, (size_t)M * K, 1.f);
    lab_rand_bf16(wf, wb, (size_t)N * K, 1.f / sqrtf((float)K));
    lab_rand_bf16(bf, bb, (size_t)N, 0.5f);
    const int real = M > 3 ? M - 3 : M;
    std::vector<float> rsh(M);
    for (int r = 0; r < M; r++) {
        if (own) {
            const float f = 0.25f + (float)(r % 7); /* rows of different sizes, exact in bf16 times x */
            double q = 0;
            for (int k = 0; k < K; k++) {
                const float xv = bfr(xf[(size_t)r * K + k] * f);
                xf[(size_t)r * K + k] = xv;
                xb[(size_t)r * K + k] = eng_cu_f2bf_bits(xv);
                q += (double)xv * xv;
            }
            rsh[r] = r < real ? (float)(1.0 / sqrt(q / K + 1e-6)) : 0.f;
        } else
            rsh[r] = r >= real ? 0.f : 1.f + 0.5f * lab_uniform();
    }
    const int No = N / 2;
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *db = (bf16 *)lab_upload(bb), *dy;
    float *drs = lab_upload(rsh);
    std::vector<int> nreal(1, real);
    int *dreal = lab_upload(nreal);
    const eng_cu_row_norm rn = {dreal, 1e-6f};
    CUCHECK(cudaMalloc(&dy, (size_t)M * No * 2));
    lab_poison(dy, (size_t)M * No * 2);
    char name[128];
    snprintf(name, sizeof name, "wgmma v%d swiglu + %srow scale M=%d N=%d K=%d%s%s", v, own ? "own RMS " : "", M, N,
             K, with_bias ? " +b" : "", g_rev ? " rev" : "");
    eng_cu_order_begin(g_rev);
    const cudaError_t e = eng_cu_gemm_wg_rows(v, 0, dx, dw, with_bias ? db : NULL, dy, M, N, K, ENG_CU_EPI_SWIGLU,
                                              own ? NULL : drs, own ? &rn : NULL);
    eng_cu_order_begin(0);
    if (!launched(name, e)) return;
    const std::vector<float> y = lab_download_bf16(dy, (size_t)M * No);
    std::vector<float> got, ref;
    for (int r : sample_rows(M, 7)) {
        for (int n = 0; n < No; n++) {
            double g = 0, u = 0;
            for (int k = 0; k < K; k++) {
                g += (double)xf[(size_t)r * K + k] * wf[(size_t)n * K + k];
                u += (double)xf[(size_t)r * K + k] * wf[(size_t)(No + n) * K + k];
            }
            g = g * rsh[r] + (with_bias ? bf[n] : 0.0);
            u = u * rsh[r] + (with_bias ? bf[No + n] : 0.0);
            ref.push_back((float)(g / (1.0 + exp(-g)) * u));
            got.push_back(y[(size_t)r * No + n]);
        }
    }
    lab_check(name, got.data(), ref.data(), got.size(), 2e-2f, 1e-2f);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dy); cudaFree(drs); cudaFree(dreal);
}

#define WG_VERSIONS 6

/* The timing runs' operands on the device: X [M, K], W [N, K], a bias
 * [N], Y [M, N] -- random values, not zeros (zeros run faster than real
 * data), X repeating W's bits. */
struct operands {
    bf16 *x, *w, *b, *y;
};
static operands operands_make(int M, int N, int K) {
    operands o;
    CUCHECK(cudaMalloc(&o.x, (size_t)M * K * 2));
    CUCHECK(cudaMalloc(&o.w, (size_t)N * K * 2));
    CUCHECK(cudaMalloc(&o.b, (size_t)N * 2));
    CUCHECK(cudaMalloc(&o.y, (size_t)M * N * 2));
    std::vector<float> f;
    std::vector<uint16_t> hb;
    lab_rand_bf16(f, hb, (size_t)N * K, 1.f / sqrtf((float)K));
    CUCHECK(cudaMemcpy(o.w, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
    for (size_t off = 0; off < (size_t)M * K; off += hb.size())
        CUCHECK(cudaMemcpy(o.x + off, hb.data(), std::min(hb.size(), (size_t)M * K - off) * 2, cudaMemcpyHostToDevice));
    CUCHECK(cudaMemcpy(o.b, hb.data(), (size_t)N * 2, cudaMemcpyHostToDevice));
    return o;
}
static void operands_free(operands &o) { cudaFree(o.x); cudaFree(o.w); cudaFree(o.b); cudaFree(o.y); }

/* The LayerNorm-by-statistics epilogues (eng_cu_gemm_wg_ln) against
 * fp64.  mode 0: LNA -- out = rs (X W^T - mu colsum) + b, GELU when gelu;
 * mode 1: OST with a plain residual; mode 2: OST with LNR, the residual
 * (R - mu) rs g + beta.  The statistics are random (rs and mu 0 on the
 * last rows, as eng_cu_ln_stats leaves padded rows), the column sums too
 * (the epilogue does not care where they came from); the OST sums are
 * checked against the host's sums of the kernel's own stored outputs. */
static void check_ln(int v, int M, int N, int K, int mode, int gelu) {
    std::vector<float> xf, wf, bf, rf;
    std::vector<uint16_t> xb, wb, bb, rb;
    rand_operands(xf, xb, wf, wb, bf, bb, rf, rb, M, N, K, (size_t)M * N, 2.f);
    const int real = M > 3 ? M - 3 : M;
    std::vector<float2> st(M);
    for (int r = 0; r < M; r++)
        st[r] = r < real ? make_float2(0.5f * lab_uniform(), 1.f + 0.5f * lab_uniform()) : make_float2(0.f, 0.f);
    std::vector<float> cs(N), g(N), be(N);
    for (int n = 0; n < N; n++) cs[n] = lab_uniform(), g[n] = 1.f + 0.5f * lab_uniform(), be[n] = 0.5f * lab_uniform();
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *db = (bf16 *)lab_upload(bb);
    bf16 *dr = (bf16 *)lab_upload(rb), *dy;
    float2 *dst = lab_upload(st), *dpart;
    float *dcs = lab_upload(cs), *dg = lab_upload(g), *dbe = lab_upload(be);
    CUCHECK(cudaMalloc(&dy, (size_t)M * N * 2));
    CUCHECK(cudaMalloc(&dpart, (size_t)M * (N / 64) * sizeof(float2)));
    lab_poison(dy, (size_t)M * N * 2);
    lab_poison(dpart, (size_t)M * (N / 64) * sizeof(float2));
    eng_cu_ln_epi ln;
    memset(&ln, 0, sizeof ln);
    if (mode == 0) {
        ln.a_stats = dst;
        ln.a_colsum = dcs;
    } else {
        ln.o_stats = dpart;
        if (mode == 2) {
            ln.r_stats = dst;
            ln.r_gamma = dg;
            ln.r_beta = dbe;
        }
    }
    const int epi = gelu ? ENG_CU_EPI_BIAS_GELU : ENG_CU_EPI_BIAS;
    char name[160];
    snprintf(name, sizeof name, "wgmma v%d ln epilogue %s M=%d N=%d K=%d%s", v,
             mode == 0 ? "LNA" : mode == 1 ? "OST + R" : "OST + LNR", M, N, K, gelu ? " +gelu" : "");
    const cudaError_t e = eng_cu_gemm_wg_ln(v, 0, dx, dw, db, mode ? dr : NULL, dy, M, N, K, epi, &ln);
    if (!launched(name, e)) return;
    const std::vector<float> y = lab_download_bf16(dy, (size_t)M * N);
    std::vector<float2> part((size_t)M * (N / 64));
    if (mode) CUCHECK(cudaMemcpy(part.data(), dpart, part.size() * sizeof(float2), cudaMemcpyDeviceToHost));
    std::vector<float> got, ref, pgot, pref;
    for (int r : sample_rows(M, 7)) {
        for (int n = 0; n < N; n++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)xf[(size_t)r * K + k] * wf[(size_t)n * K + k];
            double o = mode == 0 ? st[r].y * (acc - (double)st[r].x * cs[n]) + bf[n] : acc + bf[n];
            if (gelu) o = 0.5 * o * (1.0 + tanh(0.7978845608028654 * (o + 0.044715 * o * o * o)));
            if (mode) {
                const double x = rf[(size_t)r * N + n];
                o += mode == 2 ? (x - st[r].x) * st[r].y * g[n] + be[n] : x;
            }
            ref.push_back((float)o);
            got.push_back(y[(size_t)r * N + n]);
        }
        if (mode)
            for (int c = 0; c < N / 64; c++) {
                double su = 0, sq = 0;
                for (int n = 64 * c; n < 64 * c + 64; n++) su += y[(size_t)r * N + n], sq += (double)y[(size_t)r * N + n] * y[(size_t)r * N + n];
                pref.push_back((float)su), pref.push_back((float)sq);
                pgot.push_back(part[(size_t)r * (N / 64) + c].x), pgot.push_back(part[(size_t)r * (N / 64) + c].y);
            }
    }
    lab_check(name, got.data(), ref.data(), got.size(), 2e-2f, 1e-2f);
    if (mode) {
        char pn[200];
        snprintf(pn, sizeof pn, "%s: the output rows' sums", name);
        lab_check(pn, pgot.data(), pref.data(), pgot.size(), 1e-3f, 1e-4f);
    }
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dr); cudaFree(dy); cudaFree(dst); cudaFree(dpart);
    cudaFree(dcs); cudaFree(dg); cudaFree(dbe);
}

/* eng_cu_ln_stats against fp64: random partial sums of rows of H values
 * (as OST leaves them), the last rows past the real count. */
static void check_ln_stats(int rows, int H) {
    const int np = H / 64, real = rows > 5 ? rows - 5 : rows;
    std::vector<float2> part((size_t)rows * np);
    for (auto &p : part) {
        const float mu = 0.3f * lab_uniform(), var = 1.f + 0.5f * lab_uniform(); /* a chunk like 64 values of that */
        p = make_float2(64.f * mu, 64.f * (var + mu * mu));
    }
    std::vector<int> nr(1, real);
    float2 *dp = lab_upload(part), *ds;
    int *dn = lab_upload(nr);
    CUCHECK(cudaMalloc(&ds, rows * sizeof(float2)));
    lab_poison(ds, rows * sizeof(float2));
    char name[96];
    snprintf(name, sizeof name, "ln_stats rows=%d H=%d (%d real)", rows, H, real);
    if (!launched(name, eng_cu_ln_stats(0, dp, np, ds, rows, dn, H, 1e-12f))) return;
    std::vector<float2> st(rows);
    CUCHECK(cudaMemcpy(st.data(), ds, rows * sizeof(float2), cudaMemcpyDeviceToHost));
    std::vector<float> got, ref;
    for (int r = 0; r < rows; r++) {
        double su = 0, sq = 0;
        for (int c = 0; c < np; c++) su += part[(size_t)r * np + c].x, sq += part[(size_t)r * np + c].y;
        const double mu = su / H, var = sq / H - mu * mu;
        ref.push_back(r < real ? (float)mu : 0.f), ref.push_back(r < real ? (float)(1.0 / sqrt(var + 1e-12)) : 0.f);
        got.push_back(st[r].x), got.push_back(st[r].y);
    }
    lab_check(name, got.data(), ref.data(), got.size(), 1e-5f, 1e-4f);
    cudaFree(dp); cudaFree(dn); cudaFree(ds);
}

/* The encoders' step with the LayerNorms as row statistics against the
 * products plus eng_cu_add_ln, at M = 65536 (MiniLM / BERT-base shapes):
 * O (+ its sums + ln_stats) and down (+ LNR, sums, ln_stats) against
 * cuBLASLt's product + add_ln; QKV and up (LNA) against the plain
 * product. */
static void bench_ln(eng_cu_gemm_ctx *g, const char *what, int H, int I) {
    const int M = 65536;
    operands o = operands_make(M, I > 3 * H ? I : 3 * H, I);
    float2 *part, *st;
    float *cs, *gm;
    int *nt;
    bf16 *r2;
    CUCHECK(cudaMalloc(&part, (size_t)M * (H / 64) * sizeof(float2)));
    CUCHECK(cudaMalloc(&st, (size_t)M * sizeof(float2)));
    CUCHECK(cudaMalloc(&cs, (size_t)(I > 3 * H ? I : 3 * H) * 4));
    CUCHECK(cudaMalloc(&gm, (size_t)H * 4));
    CUCHECK(cudaMalloc(&r2, (size_t)M * H * 2));
    CUCHECK(cudaMemset(cs, 0, (size_t)(I > 3 * H ? I : 3 * H) * 4));
    CUCHECK(cudaMemset(gm, 0, (size_t)H * 4));
    CUCHECK(cudaMemset(st, 0, (size_t)M * sizeof(float2)));
    CUCHECK(cudaMalloc(&nt, sizeof(int)));
    CUCHECK(cudaMemcpy(nt, &M, sizeof(int), cudaMemcpyHostToDevice));
    char err[256];
    auto gemm = [&](const bf16 *x, const bf16 *R, bf16 *y, int N, int K, int epi) {
        if (eng_cu_gemm(g, 0, x, o.w, o.b, R, y, M, N, K, epi, err, sizeof err)) {
            printf("%s\n", err);
            exit(2);
        }
    };
    /* 0: O + add_ln; 1: O (OST, v3) + ln_stats; 2: down + add_ln; 3: down (OST + LNR, v4) + ln_stats;
     * 4: QKV; 5: QKV (LNA, v3); 6: up + GELU; 7: up (LNA, v4) */
    auto run = [&](int what_) {
        eng_cu_ln_epi ln;
        memset(&ln, 0, sizeof ln);
        switch (what_) {
        case 0: gemm(o.x, r2, o.y, H, H, ENG_CU_EPI_BIAS); CUCHECK(eng_cu_add_ln(0, o.y, NULL, gm, gm, r2, M, nt, H, 1e-12f)); break;
        case 1: ln.o_stats = part; CUCHECK(eng_cu_gemm_wg_ln(3, 0, o.x, o.w, o.b, r2, o.y, M, H, H, ENG_CU_EPI_BIAS, &ln));
                CUCHECK(eng_cu_ln_stats(0, part, H / 64, st, M, nt, H, 1e-12f)); break;
        case 2: gemm(o.x, r2, o.y, H, I, ENG_CU_EPI_BIAS); CUCHECK(eng_cu_add_ln(0, o.y, NULL, gm, gm, r2, M, nt, H, 1e-12f)); break;
        case 3: ln.o_stats = part; ln.r_stats = st; ln.r_gamma = gm; ln.r_beta = gm;
                CUCHECK(eng_cu_gemm_wg_ln(4, 0, o.x, o.w, o.b, r2, o.y, M, H, I, ENG_CU_EPI_BIAS, &ln));
                CUCHECK(eng_cu_ln_stats(0, part, H / 64, st, M, nt, H, 1e-12f)); break;
        case 4: gemm(o.x, NULL, o.y, 3 * H, H, ENG_CU_EPI_BIAS); break;
        case 5: ln.a_stats = st; ln.a_colsum = cs;
                CUCHECK(eng_cu_gemm_wg_ln(3, 0, o.x, o.w, o.b, NULL, o.y, M, 3 * H, H, ENG_CU_EPI_BIAS, &ln)); break;
        case 6: gemm(o.x, NULL, o.y, I, H, ENG_CU_EPI_BIAS_GELU); break;
        default: ln.a_stats = st; ln.a_colsum = cs;
                CUCHECK(eng_cu_gemm_wg_ln(4, 0, o.x, o.w, o.b, NULL, o.y, M, I, H, ENG_CU_EPI_BIAS_GELU, &ln));
        }
    };
    float t[8];
    for (int i = 0; i < 8; i++) t[i] = 1e30f, run(i); /* cuBLASLt's tuning */
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 8; i++) t[i] = std::min(t[i], lab_time_ms([&] { run(i); }, 10));
    printf("  bench %s ln rows M=%d: o+add_ln %6.1f / ln %6.1f us (%.3f) | down+add_ln %6.1f / ln %6.1f (%.3f) | "
           "qkv %6.1f / ln %6.1f (%.3f) | up+gelu %6.1f / ln %6.1f (%.3f) | sum %7.1f / %7.1f (%.3f)\n",
           what, M, t[0] * 1e3, t[1] * 1e3, t[1] / t[0], t[2] * 1e3, t[3] * 1e3, t[3] / t[2], t[4] * 1e3, t[5] * 1e3,
           t[5] / t[4], t[6] * 1e3, t[7] * 1e3, t[7] / t[6], (t[0] + t[2] + t[4] + t[6]) * 1e3,
           (t[1] + t[3] + t[5] + t[7]) * 1e3, (t[1] + t[3] + t[5] + t[7]) / (t[0] + t[2] + t[4] + t[6]));
    operands_free(o);
    cudaFree(part); cudaFree(st); cudaFree(cs); cudaFree(gm); cudaFree(r2); cudaFree(nt);
}

/* eng_cu_gemm_wg_rowln (the product, bias, residual and the whole row's
 * LayerNorm in one kernel) against fp64: LN(X W^T + b (+ R)) with random
 * gamma / beta, the reference's mean and variance in double.  Every row
 * of every M is compared (all of a row's N outputs depend on its stats);
 * the output is poisoned first, so unwritten rows fail. */
static void check_rowln(int M, int N, int K, int with_r) {
    std::vector<float> xf, wf, bf, rf;
    std::vector<uint16_t> xb, wb, bb, rb;
    rand_operands(xf, xb, wf, wb, bf, bb, rf, rb, M, N, K, with_r ? (size_t)M * N : 1, 2.f);
    std::vector<float> g(N), be(N);
    for (int n = 0; n < N; n++) g[n] = 1.f + 0.5f * lab_uniform(), be[n] = 0.5f * lab_uniform();
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *db = (bf16 *)lab_upload(bb);
    bf16 *dr = (bf16 *)lab_upload(rb), *dy;
    float *dg = lab_upload(g), *dbe = lab_upload(be);
    CUCHECK(cudaMalloc(&dy, (size_t)M * N * 2));
    lab_poison(dy, (size_t)M * N * 2);
    char name[160];
    snprintf(name, sizeof name, "gemm + row layernorm M=%d N=%d K=%d%s%s%s", M, N, K, with_r ? " +R" : "",
             g_rev ? " rev" : "", eng_cu_gemm_wg_rowln_res_ok(M, N, K) ? " (W resident, pairs)" : "");
    eng_cu_order_begin(g_rev);
    const cudaError_t e = eng_cu_gemm_wg_rowln(0, dx, dw, db, with_r ? dr : NULL, dg, dbe, 1e-12f, dy, M, N, K);
    eng_cu_order_begin(0);
    if (!launched(name, e)) return;
    const std::vector<float> y = lab_download_bf16(dy, (size_t)M * N);
    std::vector<float> got, ref;
    std::vector<double> v(N);
    for (int r : sample_rows(M, M > 10000 ? 37 : 3)) {
        double mu = 0, var = 0;
        for (int n = 0; n < N; n++) {
            double acc = bf[n];
            for (int k = 0; k < K; k++) acc += (double)xf[(size_t)r * K + k] * wf[(size_t)n * K + k];
            if (with_r) acc += rf[(size_t)r * N + n];
            v[n] = acc;
            mu += acc;
        }
        mu /= N;
        for (int n = 0; n < N; n++) var += (v[n] - mu) * (v[n] - mu);
        const double rs = 1.0 / sqrt(var / N + 1e-12);
        for (int n = 0; n < N; n++) {
            ref.push_back((float)((v[n] - mu) * rs * g[n] + be[n]));
            got.push_back(y[(size_t)r * N + n]);
        }
    }
    lab_check(name, got.data(), ref.data(), got.size(), 2e-2f, 1e-2f);
    cudaFree(dx); cudaFree(dw); cudaFree(db); cudaFree(dr); cudaFree(dy); cudaFree(dg); cudaFree(dbe);
}

/* Version 6 (W resident, eng_cu_gemm_wres.cu) against fp64: the shapes it
 * takes (K <= 384 with blocks of 192, <= 640 with 128), every epilogue
 * it has, 1 to 40000 rows (every CTA many tiles), both walk directions. */
static void check_wres() {
    const int keep = eng_cu_wg_version;
    eng_cu_wg_version = 6;
    for (int M : {1, 63, 129, 1000, 40000}) {
        check(M, 1152, 384, ENG_CU_EPI_BIAS, 1, 0);      /* MiniLM's QKV: six groups of 192 */
        check(M, 1536, 384, ENG_CU_EPI_BIAS_GELU, 1, 0); /* its up + GELU: twelve groups of 128 */
    }
    check(5000, 384, 384, ENG_CU_EPI_NONE, 0, 0);
    check(3000, 256, 640, ENG_CU_EPI_BIAS, 1, 0);  /* ten k-slices, a ring of three */
    check(777, 768, 128, ENG_CU_EPI_BIAS_GELU, 1, 0);
    g_rev = 1;
    check(40000, 1152, 384, ENG_CU_EPI_BIAS, 1, 0);
    check(1000, 1536, 384, ENG_CU_EPI_BIAS_GELU, 1, 0);
    g_rev = 0;
    eng_cu_wg_version = keep;
}

/* The O and down projections with their LayerNorm at M = 65536 (MiniLM's
 * shapes): cuBLASLt's product (the engine's tuning) + add_ln in place,
 * ours (versions 3, 4) + add_ln, and the one kernel -- what the engine's
 * per-bucket race chooses between. */
static void bench_rowln(eng_cu_gemm_ctx *g, const char *what, int H, int I) {
    const int M = 65536;
    operands o = operands_make(M, H, I);
    bf16 *r2;
    float *gm;
    int *nt;
    CUCHECK(cudaMalloc(&r2, (size_t)M * H * 2));
    CUCHECK(cudaMemset(r2, 0, (size_t)M * H * 2));
    CUCHECK(cudaMalloc(&gm, (size_t)H * 4));
    CUCHECK(cudaMemset(gm, 0, (size_t)H * 4));
    CUCHECK(cudaMalloc(&nt, sizeof(int)));
    CUCHECK(cudaMemcpy(nt, &M, sizeof(int), cudaMemcpyHostToDevice));
    char err[256];
    for (int K : {H, I}) {
        /* 0: cuBLASLt (tuned) + add_ln; 1, 2: ours v3 / v4 + add_ln; 3: the fused kernel (W resident in
         * pairs where it fits); 4: the fused kernel's streaming tiles */
        auto run = [&](int i) {
            if (i == 4) {
                eng_cu_rl_res_on = 0;
                CUCHECK(eng_cu_gemm_wg_rowln(0, o.x, o.w, o.b, r2, gm, gm, 1e-12f, o.y, M, H, K));
                eng_cu_rl_res_on = -1;
                return;
            }
            if (i == 0) {
                if (eng_cu_gemm(g, 0, o.x, o.w, o.b, r2, o.y, M, H, K, ENG_CU_EPI_BIAS, err, sizeof err)) {
                    printf("%s\n", err);
                    exit(2);
                }
            } else if (i < 3)
                CUCHECK(eng_cu_gemm_wg_v(i + 2, 0, o.x, o.w, o.b, r2, o.y, M, H, K, ENG_CU_EPI_BIAS));
            else {
                CUCHECK(eng_cu_gemm_wg_rowln(0, o.x, o.w, o.b, r2, gm, gm, 1e-12f, o.y, M, H, K));
                return;
            }
            CUCHECK(eng_cu_add_ln(0, o.y, NULL, gm, gm, o.y, M, nt, H, 1e-12f));
        };
        float t[5];
        for (int i = 0; i < 5; i++) t[i] = 1e30f, run(i); /* cuBLASLt's tuning */
        for (int round = 0; round < 3; round++)
            for (int i = 0; i < 5; i++) t[i] = std::min(t[i], lab_time_ms([&] { run(i); }, 10));
        printf("  bench %s rowln M=%d N=%d K=%d: cublaslt+add_ln %6.1f us | v3+add_ln %6.1f | v4+add_ln %6.1f | "
               "fused %6.1f%s (%.3f of the best pair) | fused streaming %6.1f\n",
               what, M, H, K, t[0] * 1e3, t[1] * 1e3, t[2] * 1e3, t[3] * 1e3,
               eng_cu_gemm_wg_rowln_res_ok(M, H, K) ? " resident" : "", t[3] / std::min(t[0], std::min(t[1], t[2])),
               t[4] * 1e3);
    }
    operands_free(o);
    cudaFree(r2); cudaFree(gm); cudaFree(nt);
}

static void bench(eng_cu_gemm_ctx *g, const char *what, int M, int N, int K, int epi, int once = 0) {
    operands o = operands_make(M, N, K);
    bf16 *x = o.x, *w = o.w, *b = o.b, *y = o.y, *inter;
    CUCHECK(cudaMalloc(&inter, (size_t)M * N * 2));
    int *nt;
    CUCHECK(cudaMalloc(&nt, sizeof(int)));
    CUCHECK(cudaMemcpy(nt, &M, sizeof(int), cudaMemcpyHostToDevice));
    const bf16 *bias = epi == ENG_CU_EPI_SWIGLU || epi == ENG_CU_EPI_NONE ? NULL : b;
    char err[256];
    /* variant 0: cuBLASLt as the graph path runs it (SwiGLU: the gate|up
     * product, then the SwiGLU kernel); 1..3: our versions */
    auto run = [&](int v) {
        if (v) {
            if (v == 6 && !eng_cu_gemm_wres_ok(M, N, K, epi)) return; /* W resident: short K only */
            eng_cu_wg_version = v;
            CUCHECK(eng_cu_gemm_wg(0, x, w, bias, NULL, y, M, N, K, epi));
        } else if (epi == ENG_CU_EPI_SWIGLU) {
            if (eng_cu_gemm(g, 0, x, w, NULL, NULL, inter, M, N, K, ENG_CU_EPI_NONE, err, sizeof err)) {
                printf("%s\n", err);
                exit(2);
            }
            CUCHECK(eng_cu_swiglu(0, inter, y, M, nt, N / 2));
        } else if (eng_cu_gemm(g, 0, x, w, bias, NULL, y, M, N, K, epi, err, sizeof err)) {
            printf("%s\n", err);
            exit(2);
        }
    };
    if (once) { /* one launch of each, for a profiler */
        for (int v = 0; v <= WG_VERSIONS; v++) run(v);
        CUCHECK(cudaDeviceSynchronize());
    } else {
        /* rounds in turn, the best median of each: the clocks of a long run
         * drift, and this way every variant sees the same drift */
        float t[WG_VERSIONS + 1];
        for (int v = 0; v <= WG_VERSIONS; v++) t[v] = 1e30f;
        run(0); /* cuBLASLt's tuning */
        for (int round = 0; round < 3; round++)
            for (int v = 0; v <= WG_VERSIONS; v++)
                if (v != 6 || eng_cu_gemm_wres_ok(M, N, K, epi)) t[v] = std::min(t[v], lab_time_ms([&] { run(v); }, 10));
        const double fl = 2.0 * M * N * K;
        printf("  bench %-20s M=%-6d N=%-5d K=%-5d cuBLASLt%s %7.1f us %5.1f TF |", what, M, N, K,
               epi == ENG_CU_EPI_SWIGLU ? "+swiglu" : "", t[0] * 1e3, fl / (t[0] * 1e-3) / 1e12);
        for (int v = 1; v <= WG_VERSIONS; v++)
            if (t[v] < 1e29f) /* (version 6 takes short K only) */
                printf(" v%d %7.1f us %5.1f TF (%.3f)", v, t[v] * 1e3, fl / (t[v] * 1e-3) / 1e12, t[v] / t[0]);
        printf("\n");
    }
    operands_free(o);
    cudaFree(inter);
    cudaFree(nt);
}

/* Qwen3's row-scaled products at M = 65536 (the fused QKV, version 3;
 * gate|up + SwiGLU, versions 3 and 4): eng_cu_rms_rows' pass over X and
 * the product scaling by its rs, against the product computing the
 * scales itself (eng_cu_row_norm). */
static void bench_self(int nh, int nkv, int H, int I) {
    const int M = 65536, Nq = (nh + 2 * nkv) * 128, S = 512, rope_rows = 2048;
    operands o = operands_make(M, 2 * I > Nq ? 2 * I : Nq, H);
    std::vector<float> qn(128, 1.f), rope = qk_rope_table(rope_rows);
    std::vector<int32_t> cu(S + 1);
    for (int i = 0; i <= S; i++) cu[i] = i * (M / S);
    std::vector<int> ns(1, S), nr(1, M);
    float *dqn = lab_upload(qn), *drope = lab_upload(rope), *rs;
    int32_t *dcu = lab_upload(cu);
    int *dns = lab_upload(ns), *dnr = lab_upload(nr);
    CUCHECK(cudaMalloc(&rs, (size_t)M * 4));
    eng_cu_qk_args qk;
    memset(&qk, 0, sizeof qk);
    qk.qkv = o.y; qk.ld = Nq; qk.n_heads = nh; qk.n_kv_heads = nkv; qk.head_dim = 128;
    qk.q_norm = qk.k_norm = dqn; qk.eps = 1e-6f; qk.rope = drope; qk.rope_rows = rope_rows;
    qk.cu_seqlens = dcu; qk.n_seqs_dev = dns; qk.rows = M; qk.n_rows_dev = dnr;
    const eng_cu_row_norm rn = {dnr, 1e-6f};
    /* what / 3: the fused QKV (v3), the SwiGLU in v3, in v4; what % 3: with
     * rms_rows' rs, with its own scales, its own without their loads
     * (eng_cu_wg_lab_flags 0x200: timing only) */
    auto run = [&](int what) {
        const int kind = what / 3, mode = what % 3;
        eng_cu_wg_lab_flags = mode == 2 ? 0x200 : 0;
        if (!mode) CUCHECK(eng_cu_rms_rows(0, o.x, rs, M, dnr, H, 1e-6f));
        if (!kind)
            CUCHECK(eng_cu_gemm_wg_qk(3, 0, o.x, o.w, o.y, M, Nq, H, &qk, mode ? NULL : rs, mode ? &rn : NULL));
        else
            CUCHECK(eng_cu_gemm_wg_rows(kind == 1 ? 3 : 4, 0, o.x, o.w, NULL, o.y, M, 2 * I, H, ENG_CU_EPI_SWIGLU,
                                        mode ? NULL : rs, mode ? &rn : NULL));
        eng_cu_wg_lab_flags = 0;
    };
    float t[9];
    for (int i = 0; i < 9; i++) t[i] = 1e30f;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < 9; i++) t[i] = std::min(t[i], lab_time_ms([&] { run(i); }, 10));
    static const char *kinds[3] = {"qkv v3", "swiglu v3", "swiglu v4"};
    for (int k = 0; k < 3; k++)
        printf("  bench qwen3 own row scales M=%d H=%d %-9s: rms_rows + rs %7.1f us, own %7.1f us (%.3f), "
               "own without its loads %7.1f us (%.3f)\n",
               M, H, kinds[k], t[3 * k] * 1e3, t[3 * k + 1] * 1e3, t[3 * k + 1] / t[3 * k], t[3 * k + 2] * 1e3,
               t[3 * k + 2] / t[3 * k]);
    operands_free(o);
    cudaFree(dqn); cudaFree(drope); cudaFree(dcu); cudaFree(dns); cudaFree(dnr); cudaFree(rs);
}

/* Qwen3's QKV product + q/k norm + rotary at M = 65536 (512 sequences of
 * 128): our fused kernel against what the graph path runs otherwise,
 * cuBLASLt's tuned GEMM and then eng_cu_qk_norm_rope. */
static void bench_qk(eng_cu_gemm_ctx *g, int nh, int nkv, int K) {
    const int M = 65536, N = (nh + 2 * nkv) * 128, S = 512, rope_rows = 2048;
    operands o = operands_make(M, N, K);
    std::vector<float> qn(128, 1.f), rope = qk_rope_table(rope_rows);
    std::vector<int32_t> cu(S + 1);
    for (int i = 0; i <= S; i++) cu[i] = i * (M / S);
    std::vector<int> ns(1, S), nr(1, M);
    float *dqn = lab_upload(qn), *drope = lab_upload(rope);
    int32_t *dcu = lab_upload(cu);
    int *dns = lab_upload(ns), *dnr = lab_upload(nr);
    eng_cu_qk_args qk;
    memset(&qk, 0, sizeof qk);
    qk.qkv = o.y; qk.ld = N; qk.n_heads = nh; qk.n_kv_heads = nkv; qk.head_dim = 128;
    qk.q_norm = qk.k_norm = dqn; qk.eps = 1e-6f; qk.rope = drope; qk.rope_rows = rope_rows;
    qk.cu_seqlens = dcu; qk.n_seqs_dev = dns; qk.rows = M; qk.n_rows_dev = dnr;
    char err[256];
    auto run = [&](int fused) { /* 0: cuBLASLt + the q/k kernel; else our version */
        if (fused) {
            CUCHECK(eng_cu_gemm_wg_qk(fused, 0, o.x, o.w, o.y, M, N, K, &qk, NULL, NULL));
            return;
        }
        if (eng_cu_gemm(g, 0, o.x, o.w, NULL, NULL, o.y, M, N, K, ENG_CU_EPI_NONE, err, sizeof err)) {
            printf("%s\n", err);
            exit(2);
        }
        CUCHECK(eng_cu_qk_norm_rope(0, &qk));
    };
    const int vs[3] = {0, 3, 5};
    float t[3] = {1e30f, 1e30f, 1e30f};
    run(0);
    for (int round = 0; round < 3; round++)
        for (int f = 0; f < 3; f++) t[f] = std::min(t[f], lab_time_ms([&] { run(vs[f]); }, 10));
    printf("  bench qwen3 qkv+q/k rope  M=%-6d N=%-5d K=%-5d cuBLASLt+q/k kernel %7.1f us | fused v3 %7.1f us (%.3f) "
           "v5 %7.1f us (%.3f)\n",
           M, N, K, t[0] * 1e3, t[1] * 1e3, t[1] / t[0], t[2] * 1e3, t[2] / t[0]);
    operands_free(o);
    cudaFree(dqn); cudaFree(drope); cudaFree(dcu); cudaFree(dns); cudaFree(dnr);
}

/* LAB_WG_PROF="N K epi": versions 3 and 4 once at M = 65536 with their clock64
 * counters; per CTA, where the time of each consumer warpgroup and of
 * the producer went (averages over the CTAs, as fractions of each one's
 * own total) -- waiting for data says the loads are behind, waiting for
 * the wgmma group says the tensor cores are, the epilogue is what the
 * consumers spend storing. */
static void profile(int N, int K, int epi, int no_epilogue = 0) {
    const int M = 65536;
    operands o = operands_make(M, N, K);
    bf16 *x = o.x, *w = o.w, *b = o.b, *y = o.y;
    unsigned long long *prof;
    CUCHECK(cudaMalloc(&prof, 1024 * ENG_CU_WG_PROF_SLOTS * sizeof *prof));
    const bf16 *bias = epi == ENG_CU_EPI_SWIGLU || epi == ENG_CU_EPI_NONE ? NULL : b;
    int ctas = 0;
    for (int r = 0; r < 3; r++)
        CUCHECK(eng_cu_gemm_wg_profile(0, x, w, bias, NULL, y, M, N, K, epi, no_epilogue, prof, &ctas));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<unsigned long long> h((size_t)ctas * ENG_CU_WG_PROF_SLOTS);
    CUCHECK(cudaMemcpy(h.data(), prof, h.size() * sizeof h[0], cudaMemcpyDeviceToHost));
    /* per consumer warpgroup: data, wgmma, epilogue, (total), epilogue
     * waits, image writes -- fractions of its own total */
    double fr[3][5] = {{0}}, cyc = 0;
    const int k_slot[5] = {0, 1, 2, 4, 5};
    for (int c = 0; c < ctas; c++) {
        const unsigned long long *p = &h[(size_t)c * ENG_CU_WG_PROF_SLOTS];
        for (int g = 0; g < 2; g++)
            for (int k = 0; k < 5; k++) fr[g][k] += (double)p[6 * g + k_slot[k]] / (double)p[6 * g + 3] / ctas;
        fr[2][0] += (double)p[12] / (double)p[13] / ctas;
        cyc += (double)p[3] / ctas;
    }
    printf("  profile v%d%s N=%d K=%d epi=%d, %d CTAs, %.0f cycles a CTA\n", eng_cu_wg_version, no_epilogue ? " (no epilogue)" : "",
           N, K, epi, ctas, cyc);
    for (int g = 0; g < 2; g++)
        printf("    consumer warpgroup %d: waiting for data %5.1f%%, for its wgmma group %5.1f%%, epilogue %5.1f%% "
               "(waits %4.1f%%, image writes %4.1f%%), the rest (wgmma issue, barriers) %5.1f%%\n",
               g, 100 * fr[g][0], 100 * fr[g][1], 100 * fr[g][2], 100 * fr[g][3], 100 * fr[g][4],
               100 * (1 - fr[g][0] - fr[g][1] - fr[g][2]));
    printf("    producer: waiting for a free slot %5.1f%%\n", 100 * fr[2][0]);
    operands_free(o);
    cudaFree(prof);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines survive a timeout's kill */
    if (!eng_cu_gemm_wg_available()) {
        printf("lab_wgmma: no sm_90 device (or no tensor-map encoder): nothing to check\n");
        return 1;
    }
    /* versions 2 and 3 pick their tile width from N: 128 (N = 128, 640), 192 (384,
     * 1152), 256 (768, 1536; SwiGLU 256, 768, 6144) -- all three are checked
     * (LAB_WG_ONE="N K epi" skips to one launch of each at M = 65536, for ncu) */
    const char *pr = getenv("LAB_WG_PROF"); /* "N K epi [N K epi ...]": version 3's counters, then stop */
    if (pr) {
        int n, k, e, used = 0;
        while (sscanf(pr, "%d %d %d%n", &n, &k, &e, &used) == 3) {
            for (int v = 3; v <= 4; v++) { /* the whole image, and version 4's two buffers */
                eng_cu_wg_version = v;
                profile(n, k, e);
                profile(n, k, e, 1); /* the products alone: what the epilogue costs */
            }
            pr += used;
        }
        eng_cu_wg_version = 3;
        return lab_finish("lab_wgmma");
    }
    const char *one = getenv("LAB_WG_ONE"); /* "N K epi": that shape only, one launch a variant */
    int n1, k1, e1;
    if (one && sscanf(one, "%d %d %d", &n1, &k1, &e1) == 3) {
        char err[256];
        eng_cu_gemm_ctx *g = eng_cu_gemm_create((size_t)32 << 20, err, sizeof err);
        if (!g) { printf("FAIL: %s\n", err); return 1; }
        bench(g, "one", 65536, n1, k1, e1, 1);
        eng_cu_gemm_destroy(g);
        return lab_finish("lab_wgmma");
    }
    if (getenv("LAB_WG_LN")) { /* the LayerNorm-by-statistics checks and timing alone */
        for (int v = 3; v <= 4; v++)
            for (int mode = 0; mode < 3; mode++)
                for (int M : {1, 129, 1000}) {
                    check_ln(v, M, 384, 384, mode, 0);
                    check_ln(v, M, 768, 256, mode, 0);
                }
        check_ln(3, 300, 1536, 384, 0, 1);
        check_ln(4, 300, 1536, 384, 0, 1);
        check_ln(4, 5000, 768, 512, 2, 0);
        check_ln(3, 5000, 1152, 384, 0, 0);
        check_ln_stats(1, 384);
        check_ln_stats(1000, 768);
        if (!getenv("LAB_QUICK")) {
            char err[256];
            eng_cu_gemm_ctx *g = eng_cu_gemm_create((size_t)32 << 20, err, sizeof err);
            if (!g) { printf("FAIL: %s\n", err); return 1; }
            eng_cu_gemm_set_tuning(g, 1);
            bench_ln(g, "minilm", 384, 1536);
            bench_ln(g, "bert", 768, 3072);
            eng_cu_gemm_destroy(g);
        }
        return lab_finish("lab_wgmma");
    }
    const char *rl = getenv("LAB_WG_ROWLN"); /* the product + whole-row LayerNorm alone: checks, then timing */
    if (rl) {
        /* W resident in pairs of CTAs where it fits, then the streaming tiles
         * only (=bench: timing alone, for ncu) */
        for (int res = 1; res >= 0 && strcmp(rl, "bench"); res--) {
            eng_cu_rl_res_on = res;
            for (int N : {384, 256})
                for (int M : {1, 63, 65, 127, 129, 1000})
                    for (int r = 0; r < 2; r++) check_rowln(M, N, N, r);
            check_rowln(5000, 384, 1536, 1);  /* many tiles a CTA, the ring wrapping */
            check_rowln(40000, 384, 1536, 1); /* every CTA several tiles */
            check_rowln(300, 256, 64, 1);     /* one k-slice */
            check_rowln(40000, 384, 384, 1);  /* resident: each warpgroup many tiles, the ring wrapping */
            check_rowln(8511, 384, 384, 0);   /* a last tile of 63 rows, odd tile counts per pair */
            check_rowln(3000, 256, 512, 1);   /* resident at N = 256, eight k-slices */
            check_rowln(2000, 256, 640, 1);   /* resident: ten k-slices, a ring of three */
            g_rev = 1;
            check_rowln(40000, 384, 384, 1);
            check_rowln(1000, 256, 256, 1);
            g_rev = 0;
        }
        eng_cu_rl_res_on = -1;
        if (strcmp(rl, "quick")) {
            char err[256];
            eng_cu_gemm_ctx *g = eng_cu_gemm_create((size_t)32 << 20, err, sizeof err);
            if (!g) { printf("FAIL: %s\n", err); return 1; }
            eng_cu_gemm_set_tuning(g, 1);
            bench_rowln(g, "minilm", 384, 1536);
            eng_cu_gemm_destroy(g);
        }
        return lab_finish("lab_wgmma");
    }
    const char *wr = getenv("LAB_WG_WRES"); /* version 6 (W resident) alone: checks, then timing */
    if (wr) {
        check_wres();
        if (strcmp(wr, "quick")) {
            char err[256];
            eng_cu_gemm_ctx *g = eng_cu_gemm_create((size_t)32 << 20, err, sizeof err);
            if (!g) { printf("FAIL: %s\n", err); return 1; }
            eng_cu_gemm_set_tuning(g, 1);
            bench(g, "minilm qkv", 65536, 1152, 384, ENG_CU_EPI_BIAS);
            bench(g, "minilm up+gelu", 65536, 1536, 384, ENG_CU_EPI_BIAS_GELU);
            bench(g, "minilm o", 65536, 384, 384, ENG_CU_EPI_BIAS);
            bench(g, "minilm qkv 8192", 8192, 1152, 384, ENG_CU_EPI_BIAS);
            bench(g, "minilm up 8192", 8192, 1536, 384, ENG_CU_EPI_BIAS_GELU);
            eng_cu_gemm_destroy(g);
        }
        eng_cu_wg_version = 3;
        return lab_finish("lab_wgmma");
    }
    if (getenv("LAB_WG_SELF")) { /* the own-row-scale checks and timing alone */
        for (int v = 3; v <= 4; v++) {
            check_rows(v, 129, 256, 1024, 1, 1);
            check_rows(v, 5000, 768, 512, 0, 1);
        }
        check_qk(1024, {1, 300, 129, 570}, 4, 2, 256, 2);
        bench_self(16, 8, 1024, 3072);
        return lab_finish("lab_wgmma");
    }
    /* first the fused QKV (version 3's kernel), so a hang of a newer
     * version below cannot hide it */
    check_qk(1, {1}, 4, 2, 256);
    check_qk(129, {129}, 2, 2, 128);
    check_qk(1024, {1, 300, 129, 570}, 4, 2, 256); /* 24 padding rows */
    check_qk(600, {17, 583}, 16, 8, 1024);         /* Qwen3-0.6B's heads */
    check_qk(1024, {1, 300, 129, 570}, 4, 2, 256, 1); /* with the RMS row scale */
    /* version 5 (one head a 128-wide tile, several tiles a warpgroup at
     * 5000 rows): odd head counts too */
    check_qk(1, {1}, 4, 2, 256, 0, 5);
    check_qk(1024, {1, 300, 129, 570}, 3, 1, 256, 0, 5);
    check_qk(5000, {17, 583, 2000, 2000, 400}, 16, 8, 1024, 0, 5); /* lengths within the 2048-row rotary table */
    check_qk(1024, {1, 300, 129, 570}, 4, 2, 256, 1, 5);
    for (int v = 3; v <= 4; v++) {
        check_rows(v, 1000, 768, 512, 0);
        check_rows(v, 129, 256, 1024, 1);
        /* the kernel's own RMS row scales: one tile, odd rows, several
         * tiles a CTA (5000 rows: both scale buffers in turn), long K */
        check_rows(v, 1, 256, 128, 0, 1);
        check_rows(v, 129, 256, 1024, 1, 1);
        check_rows(v, 5000, 768, 512, 0, 1);
        check_rows(v, 300, 6144, 1024, 0, 1);
    }
    check_qk(1024, {1, 300, 129, 570}, 4, 2, 256, 2); /* the fused QKV with its own RMS row scales */
    check_qk(5000, {17, 583, 2000, 2000, 400}, 16, 8, 1024, 2);
    for (int v = 1; v <= 5; v++) { /* version 6 takes fewer shapes: check_wres below */
        eng_cu_wg_version = v;
        for (int M : {1, 127, 129, 1000}) {
            check(M, 128, 64, ENG_CU_EPI_NONE, 0, 0);
            check(M, 384, 384, ENG_CU_EPI_BIAS, 1, 0);
            check(M, 1536, 384, ENG_CU_EPI_BIAS_GELU, 1, 0);
            check(M, 768, 3072, ENG_CU_EPI_BIAS, 1, 1);
            check(M, 256, 1024, ENG_CU_EPI_SWIGLU, 0, 0);
            check(M, 768, 512, ENG_CU_EPI_SWIGLU, 1, 0);
            check(M, 384, 256, ENG_CU_EPI_SWIGLU, 1, 0); /* N/2 = 192: tiles of 192, or 128 in v3 */
        }
        check(4096, 1152, 384, ENG_CU_EPI_BIAS, 1, 0);
        check(999, 640, 128, ENG_CU_EPI_BIAS, 1, 1);
        check(2048, 6144, 1024, ENG_CU_EPI_SWIGLU, 0, 0);
        check(300, 1024, 2048, ENG_CU_EPI_NONE, 0, 1);
        check(129, 768, 256, ENG_CU_EPI_BIAS_GELU, 1, 1); /* every compiled epilogue of version 3 */
        check(5000, 1024, 512, ENG_CU_EPI_BIAS, 1, 1);    /* 320 tiles: version 5's warpgroups take several each */
        /* the GELU gates (Gemma 3's tanh form, ModernBERT's erf form):
         * versions 3 and 4 only, the others refuse them (launched() fails
         * on any error, so only the versions that run are asked) */
        if (v == 3 || v == 4)
            for (int epi : {ENG_CU_EPI_GEGLU_TANH, ENG_CU_EPI_GEGLU_ERF}) {
                for (int M : {1, 129, 1000}) check(M, 2304, 768, epi, 0, 0); /* ModernBERT-base's / Gemma's gate|up */
                check(5000, 768, 512, epi, 1, 0);
                check(300, 384, 256, epi, 0, 0); /* N/2 = 192: tiles of 128 in v3 */
            }
    }
    /* the others refuse the GELU gates: a clear error, nothing launched */
    const int keep_v = eng_cu_wg_version;
    for (int v : {1, 2, 5, 6}) {
        eng_cu_wg_version = v;
        const cudaError_t e = eng_cu_gemm_wg_v(v, 0, NULL, NULL, NULL, NULL, NULL, 1000, 2304, 768, ENG_CU_EPI_GEGLU_TANH);
        if (e != cudaErrorInvalidValue || eng_cu_gemm_wg_ok(1000, 2304, 768, ENG_CU_EPI_GEGLU_ERF)) {
            printf("  FAIL: version %d takes a GELU-gated epilogue (%s)\n", v, cudaGetErrorString(e));
            lab_failures++;
        } else
            printf("  version %d refuses the GELU gates ok\n", v);
    }
    eng_cu_wg_version = keep_v;
    check_rows(5, 1000, 768, 512, 0); /* version 5's row-scaled SwiGLU, after its plain checks */
    check_wres();                     /* version 6 (W resident) */
    for (int r = 0; r < 2; r++) { /* the product + whole-row LayerNorm (eng_cu_gemm_rowln.cu, _res.cu) */
        check_rowln(129, 384, 384, r);
        check_rowln(1000, 256, 512, r);
    }
    check_rowln(5000, 384, 1536, 1);
    check_rowln(40000, 384, 384, 1); /* W resident: each warpgroup many tiles */
    eng_cu_rl_res_on = 0;            /* the streaming tiles where W would fit */
    check_rowln(129, 384, 384, 1);
    check_rowln(1000, 256, 512, 0);
    eng_cu_rl_res_on = -1;
    g_rev = 1; /* the serpentine order's backward walk: versions 3, 4 and the whole-row tile */
    for (int v : {3, 4}) {
        eng_cu_wg_version = v;
        check(1000, 1152, 384, ENG_CU_EPI_BIAS, 1, 0);
        check(777, 384, 1536, ENG_CU_EPI_BIAS, 1, 1);
        check(300, 1536, 384, ENG_CU_EPI_BIAS_GELU, 1, 0);
    }
    eng_cu_wg_version = 3;
    check_rowln(129, 384, 384, 1);
    check_rowln(1000, 256, 512, 0);
    check_rowln(5000, 384, 1536, 1);
    check_rows(3, 5000, 768, 512, 0, 1); /* the kernel's own RMS row scales, whose warps walk the tiles too */
    check_rows(4, 129, 256, 1024, 1);
    g_rev = 0;
    const char *q = getenv("LAB_QUICK");
    if (!(q && *q == '1')) {
        char err[256];
        eng_cu_gemm_ctx *g = eng_cu_gemm_create((size_t)32 << 20, err, sizeof err);
        if (!g) { printf("FAIL: %s\n", err); return 1; }
        eng_cu_gemm_set_tuning(g, 1);
        const int M = 65536;
        bench(g, "minilm qkv", M, 1152, 384, ENG_CU_EPI_BIAS);
        bench(g, "minilm o", M, 384, 384, ENG_CU_EPI_BIAS);
        bench(g, "minilm up+gelu", M, 1536, 384, ENG_CU_EPI_BIAS_GELU);
        bench(g, "minilm down", M, 384, 1536, ENG_CU_EPI_BIAS);
        bench(g, "bert qkv", M, 2304, 768, ENG_CU_EPI_BIAS);
        bench(g, "bert o", M, 768, 768, ENG_CU_EPI_BIAS);
        bench(g, "bert up+gelu", M, 3072, 768, ENG_CU_EPI_BIAS_GELU);
        bench(g, "bert down", M, 768, 3072, ENG_CU_EPI_BIAS);
        bench(g, "qwen3 qkv", M, 4096, 1024, ENG_CU_EPI_NONE);
        bench(g, "qwen3 o", M, 1024, 2048, ENG_CU_EPI_NONE);
        bench(g, "qwen3 gate|up+swiglu", M, 6144, 1024, ENG_CU_EPI_SWIGLU);
        bench(g, "qwen3 down", M, 1024, 3072, ENG_CU_EPI_NONE);
        bench_qk(g, 16, 8, 1024);
        bench_self(16, 8, 1024, 3072);
        eng_cu_gemm_destroy(g);
    }
    eng_cu_wg_version = 3;
    return lab_finish("lab_wgmma");
}

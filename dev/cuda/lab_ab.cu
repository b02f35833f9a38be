/* lab_ab: the encoders' attention block as one launch (eng_cu_chain_ab:
 * QKV with the LayerNorm fold, attention, O, bias, residual; all-MiniLM-L6's
 * shape) against an fp64 reference, then timed as 6 dependent layers.
 *
 * Why: the launch replaces two chain nodes (the QKV GEMM and the
 * attention + O kernel); its heads' partials meet behind a grid barrier
 * (eng_cu_chain_ab.cu says why).  The reference takes X raw, applies the
 * previous layer's LayerNorm (gamma, beta) -- or nothing, layer 0's form
 * --, QKV + bias rounded to bf16 as the kernel stores them, each head's
 * softmax over its sequence's keys (P rounded to bf16 for P V, the row sum
 * unrounded, as eng_chain_head), ctx rounded to bf16, then ctx Wo^T + bo +
 * the residual (LN(X), or X); the kernel gets the folded weights as the
 * model makes them (gamma into W, W beta into the bias, the folded bf16
 * W's column sums).  Cases: one token, one sequence of 16, three
 * sequences, 11 real rows in a bucket of 16 (the rest must come out zero),
 * both forms; three replays of a graph give the same bits.  Timing (not
 * with LAB_QUICK=1): 6 layers fused, for the record (the model's A/B is
 * the latency benchmark).
 */
#include "lab.h"

static const int AH = 384, AHEADS = 12, AD = 32;

static void ab_ref(const std::vector<float> &x, int M, int n_real, const std::vector<int> &cu, bool fold,
                   const std::vector<float> &ga, const std::vector<float> &be, const std::vector<float> &w,
                   const std::vector<float> &b, const std::vector<float> &wo, const std::vector<float> &bo, float eps,
                   std::vector<float> &y) {
    const int N3 = 3 * AH;
    std::vector<double> ln((size_t)M * AH, 0.0);
    std::vector<float> qkv((size_t)M * N3, 0.f), ctx((size_t)M * AH, 0.f);
    for (int r = 0; r < n_real; r++) {
        const float *xr = &x[(size_t)r * AH];
        double s1 = 0, s2 = 0;
        for (int k = 0; k < AH; k++) s1 += xr[k];
        const double mu = s1 / AH;
        for (int k = 0; k < AH; k++) s2 += (xr[k] - mu) * (xr[k] - mu);
        const double rs = 1.0 / sqrt(s2 / AH + eps);
        for (int k = 0; k < AH; k++) ln[(size_t)r * AH + k] = fold ? (xr[k] - mu) * rs * ga[k] + be[k] : xr[k];
        for (int n = 0; n < N3; n++) {
            double v = b[n];
            for (int k = 0; k < AH; k++) v += (double)w[(size_t)n * AH + k] * ln[(size_t)r * AH + k];
            qkv[(size_t)r * N3 + n] = bfr((float)v);
        }
    }
    const double scale = 1.0 / sqrt((double)AD);
    for (size_t sq = 0; sq + 1 < cu.size(); sq++)
        for (int r = cu[sq]; r < cu[sq + 1]; r++)
            for (int h = 0; h < AHEADS; h++) {
                std::vector<double> p(cu[sq + 1] - cu[sq]);
                double mx = -1e300, l = 0;
                for (int j = cu[sq]; j < cu[sq + 1]; j++) {
                    double s = 0;
                    for (int d = 0; d < AD; d++)
                        s += (double)qkv[(size_t)r * N3 + h * AD + d] * qkv[(size_t)j * N3 + AH + h * AD + d];
                    p[j - cu[sq]] = s * scale;
                    mx = std::max(mx, s * scale);
                }
                for (double &v : p) {
                    v = exp(v - mx);
                    l += v;
                }
                for (int d = 0; d < AD; d++) {
                    double o = 0;
                    for (int j = cu[sq]; j < cu[sq + 1]; j++)
                        o += (double)bfr((float)p[j - cu[sq]]) * qkv[(size_t)j * N3 + 2 * AH + h * AD + d];
                    ctx[(size_t)r * AH + h * AD + d] = bfr((float)(o / l));
                }
            }
    y.assign((size_t)M * AH, 0.f);
    for (int r = 0; r < n_real; r++)
        for (int n = 0; n < AH; n++) {
            double v = bo[n] + ln[(size_t)r * AH + n];
            for (int k = 0; k < AH; k++) v += (double)wo[(size_t)n * AH + k] * ctx[(size_t)r * AH + k];
            y[(size_t)r * AH + n] = bfr((float)v);
        }
}

int main() {
    const float eps = 1e-12f;
    cudaStream_t st;
    CUCHECK(cudaStreamCreate(&st));
    const int N3 = 3 * AH;
    std::vector<float> w, b, wo, bo, ga(AH), be(AH);
    std::vector<uint16_t> hw, hb, hwo, hbo;
    lab_rand_bf16(w, hw, (size_t)N3 * AH, 0.08f);
    lab_rand_bf16(b, hb, N3, 0.1f);
    lab_rand_bf16(wo, hwo, (size_t)AH * AH, 0.06f);
    lab_rand_bf16(bo, hbo, AH, 0.1f);
    for (int k = 0; k < AH; k++) {
        ga[k] = 1.f + 0.2f * lab_uniform();
        be[k] = 0.1f * lab_uniform();
    }
    /* the fold as the model makes it */
    std::vector<uint16_t> wf, bf;
    std::vector<float> cs;
    lab_fold_ln(w, b, ga, be, AH, N3, wf, bf, cs);
    bf16 *dw = (bf16 *)lab_upload(hw), *db = (bf16 *)lab_upload(hb), *dwf = (bf16 *)lab_upload(wf),
         *dbf = (bf16 *)lab_upload(bf), *dwo = (bf16 *)lab_upload(hwo), *dbo = (bf16 *)lab_upload(hbo);
    float *dcs = lab_upload(cs), *dga = lab_upload(ga), *dbe = lab_upload(be);
    bf16 *img0 = NULL, *img1 = NULL, *xb = NULL, *yb = NULL;
    float *part = NULL;
    unsigned long long *bar = NULL;
    int *nrow = NULL, *nseq = NULL, *dcu = NULL;
    CUCHECK(cudaMalloc(&img0, eng_cu_chain_ab_img_bytes()));
    CUCHECK(cudaMalloc(&img1, eng_cu_chain_ab_img_bytes()));
    CUCHECK(eng_cu_chain_ab_pack(st, dw, dwo, img0));
    CUCHECK(eng_cu_chain_ab_pack(st, dwf, dwo, img1));
    CUCHECK(cudaMalloc(&part, eng_cu_chain_ab_part_bytes()));
    CUCHECK(cudaMalloc(&bar, 8));
    CUCHECK(cudaMemset(bar, 0, 8));
    CUCHECK(cudaMalloc(&nrow, 4));
    CUCHECK(cudaMalloc(&nseq, 4));
    CUCHECK(cudaMalloc(&dcu, 17 * 4));
    CUCHECK(cudaMalloc(&xb, 16 * AH * 2));
    CUCHECK(cudaMalloc(&yb, 16 * AH * 2));
    CUCHECK(cudaStreamSynchronize(st));
    printf("lab_ab: H %d, %d heads of %d; image %.2f MB a layer\n", AH, AHEADS, AD,
           eng_cu_chain_ab_img_bytes() / 1e6);

    /* the launch's arguments: the folded form or layer 0's */
    auto args = [&](bool fold, bf16 *X, bf16 *Y, int M, int late) {
        eng_cu_ab_args a;
        memset(&a, 0, sizeof a);
        a.X = X;
        a.Y = Y;
        a.img = fold ? img1 : img0;
        a.qkv_b = fold ? dbf : db;
        a.bo = dbo;
        a.colsum = fold ? dcs : NULL;
        a.gamma = fold ? dga : NULL;
        a.beta = fold ? dbe : NULL;
        a.part = part;
        a.bar = bar;
        a.n_rows_dev = nrow;
        a.n_seqs_dev = nseq;
        a.cu_seqlens = dcu;
        a.scale = 1.f / sqrtf((float)AD);
        a.eps = eps;
        a.M = M;
        a.H = AH;
        a.n_heads = AHEADS;
        a.head_dim = AD;
        a.late = late;
        return a;
    };
    struct abcase {
        int M;
        std::vector<int> lens;
    };
    const abcase cases[] = {{1, {1}}, {16, {16}}, {16, {5, 7, 4}}, {16, {6, 5}}, {7, {3, 4}}};
    for (const abcase &c : cases)
        for (int fold = 0; fold < 2; fold++) {
            std::vector<int> cu(1, 0);
            for (int L : c.lens) cu.push_back(cu.back() + L);
            const int n_real = cu.back(), ns = (int)c.lens.size();
            std::vector<float> x;
            std::vector<uint16_t> hx;
            lab_rand_bf16(x, hx, (size_t)c.M * AH, 1.f);
            for (size_t i = 0; i < (size_t)n_real * AH; i++) { /* a raw sum: an offset and a spread */
                x[i] = fold ? bfr(x[i] * 2.f + 0.5f) : x[i];
                hx[i] = eng_cu_f2bf_bits(x[i]);
            }
            for (size_t i = (size_t)n_real * AH; i < x.size(); i++) { /* rows past the real count: garbage */
                x[i] = 0.f;
                hx[i] = 0x4049;
            }
            CUCHECK(cudaMemcpy(xb, hx.data(), hx.size() * 2, cudaMemcpyHostToDevice));
            CUCHECK(cudaMemcpy(nrow, &n_real, 4, cudaMemcpyHostToDevice));
            CUCHECK(cudaMemcpy(nseq, &ns, 4, cudaMemcpyHostToDevice));
            CUCHECK(cudaMemcpy(dcu, cu.data(), cu.size() * 4, cudaMemcpyHostToDevice));
            std::vector<float> ref;
            ab_ref(x, c.M, n_real, cu, fold, ga, be, w, b, wo, bo, eps, ref);
            eng_cu_ab_args a = args(fold, xb, yb, c.M, 0);
            char what[128];
            snprintf(what, sizeof what, "ab M=%d seqs=%d real=%d %s vs fp64", c.M, ns, n_real,
                     fold ? "folded" : "layer 0");
            lab_poison(yb, 16 * AH * 2);
            const cudaError_t e = eng_cu_chain_ab(st, &a);
            if (e != cudaSuccess) {
                printf("  %s: launch refused (%s)\n", what, cudaGetErrorString(e));
                lab_failures++;
                continue;
            }
            CUCHECK(cudaStreamSynchronize(st));
            std::vector<float> got = lab_download_bf16(yb, (size_t)c.M * AH);
            lab_check(what, got.data(), ref.data(), got.size(), 3e-2f, 1e-2f);
            snprintf(what, sizeof what, "ab M=%d seqs=%d real=%d %s replays bit-identical", c.M, ns, n_real,
                     fold ? "folded" : "layer 0");
            a.late = 1;
            lab_check_replays(st, [&] { CUCHECK(eng_cu_chain_ab(st, &a)); }, yb, 16 * AH * 2, got, what);
        }

    /* 6 dependent layers (the folded form, one weight set), 16 rows */
    if (!getenv("LAB_QUICK")) {
        const int M = 16, one = 1;
        const int cu[2] = {0, 16};
        CUCHECK(cudaMemcpy(nrow, &M, 4, cudaMemcpyHostToDevice));
        CUCHECK(cudaMemcpy(nseq, &one, 4, cudaMemcpyHostToDevice));
        CUCHECK(cudaMemcpy(dcu, cu, 8, cudaMemcpyHostToDevice));
        for (int late = 0; late < 2; late++) {
            const float ms = lab_graph_ms(
                st,
                [&] {
                    for (int l = 0; l < 6; l++) {
                        const eng_cu_ab_args a = args(true, l & 1 ? yb : xb, l & 1 ? xb : yb, M, late);
                        CUCHECK(eng_cu_chain_ab(st, &a));
                    }
                },
                20);
            printf("  6 layers, 16 rows, %s trigger: %.1f us (%.2f a layer)\n", late ? "late " : "early", ms * 1e3f,
                   ms * 1e3f / 6);
        }
    }
    return lab_finish("lab_ab");
}

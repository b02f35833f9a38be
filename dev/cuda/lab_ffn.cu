/* lab_ffn: the one-launch decoder MLP (eng_cu_chain_ffn) against an fp64
 * reference and against the chain's two GEMMs, then both timed as 28
 * dependent layers in a PDL graph.
 *
 * Why: the fused MLP replaces two chain nodes (gate | up + SwiGLU, down +
 * residual) by one launch whose blocks add split-K partials through a
 * reduce-scatter behind a grid barrier (eng_cu_chain_ffn.cu says why).
 * Checks, Qwen3-0.6B's shape (H = 1024, I = 3072): 1, 7 and 16 rows, and
 * 16 rows of which 11 are real (the rest must come out zero); the fp64
 * reference rounds the SwiGLU output to bf16 as both kernels do; the
 * result equals the two-GEMM chain's within bf16 rounding; three replays
 * of a graph give the same bits.  Timing: 28 layers with distinct weights
 * (from HBM, as in a forward), each layer's output the next one's input,
 * the fused launch against the two GEMMs (with their padded weight copies,
 * as the model runs them at <= 16 rows); LAB_QUICK=1 skips the timing.
 */
#include "lab.h"

static const int FH = 1024, FI = 3072, FL = 28;

/* y = bf16(x + Wd bf16(silu(rs g) rs u)) for the real rows, 0 past them */
static void ffn_ref(const std::vector<float> &x, const std::vector<float> &wgu, const std::vector<float> &wd, int M,
                    int n_real, float eps, std::vector<float> &y) {
    y.assign((size_t)M * FH, 0.f);
    std::vector<double> act(FI);
    for (int r = 0; r < n_real; r++) {
        const float *xr = &x[(size_t)r * FH];
        double s2 = 0;
        for (int k = 0; k < FH; k++) s2 += (double)xr[k] * xr[k];
        const double rs = 1.0 / sqrt(s2 / FH + eps);
        for (int j = 0; j < FI; j++) {
            double g = 0, u = 0;
            const float *wg = &wgu[(size_t)j * FH], *wu = &wgu[(size_t)(FI + j) * FH];
            for (int k = 0; k < FH; k++) {
                g += (double)wg[k] * xr[k];
                u += (double)wu[k] * xr[k];
            }
            g *= rs;
            u *= rs;
            act[j] = bfr((float)(g / (1.0 + exp(-g)) * u));
        }
        for (int n = 0; n < FH; n++) {
            double s = xr[n];
            const float *w = &wd[(size_t)n * FI];
            for (int j = 0; j < FI; j++) s += (double)w[j] * act[j];
            y[(size_t)r * FH + n] = bfr((float)s);
        }
    }
}

int main() {
    const float eps = 1e-6f;
    cudaStream_t st;
    CUCHECK(cudaStreamCreate(&st));
    /* weights: FL layers, each a random gate | up and down */
    std::vector<float> wgu0, wd0;
    std::vector<uint16_t> hb;
    std::vector<bf16 *> dgu(FL), dd(FL), img(FL), pgu(FL), pd(FL);
    const size_t imgb = eng_cu_chain_ffn_img_bytes(FH, FI);
    const int padgu = eng_cu_chain_wpad(FH), padd = eng_cu_chain_wpad(FI);
    for (int l = 0; l < FL; l++) {
        std::vector<float> f;
        lab_rand_bf16(f, hb, (size_t)2 * FI * FH, 0.05f);
        if (l == 0) wgu0 = f;
        dgu[l] = (bf16 *)lab_upload(hb);
        lab_rand_bf16(f, hb, (size_t)FH * FI, 0.02f);
        if (l == 0) wd0 = f;
        dd[l] = (bf16 *)lab_upload(hb);
        CUCHECK(cudaMalloc(&img[l], imgb));
        CUCHECK(eng_cu_chain_ffn_pack(st, dgu[l], dd[l], img[l], FH, FI));
        /* the two GEMMs' padded copies (rows K + pad), as the model makes them */
        CUCHECK(cudaMalloc(&pgu[l], (size_t)2 * FI * (FH + padgu) * 2));
        CUCHECK(cudaMemcpy2DAsync(pgu[l], (FH + padgu) * 2, dgu[l], FH * 2, FH * 2, 2 * FI, cudaMemcpyDeviceToDevice,
                                  st));
        CUCHECK(cudaMalloc(&pd[l], (size_t)FH * (FI + padd) * 2));
        CUCHECK(cudaMemcpy2DAsync(pd[l], (FI + padd) * 2, dd[l], FI * 2, FI * 2, FH, cudaMemcpyDeviceToDevice, st));
    }
    CUCHECK(cudaStreamSynchronize(st));
    float *part = NULL;
    unsigned long long *bar = NULL;
    int *nrow = NULL;
    bf16 *xb = NULL, *yb = NULL, *act = NULL, *y2 = NULL;
    CUCHECK(cudaMalloc(&part, eng_cu_chain_ffn_part_bytes(FH, FI)));
    CUCHECK(cudaMalloc(&bar, 8));
    CUCHECK(cudaMemset(bar, 0, 8));
    CUCHECK(cudaMalloc(&nrow, 4));
    CUCHECK(cudaMalloc(&xb, 16 * FH * 2));
    CUCHECK(cudaMalloc(&yb, 16 * FH * 2));
    CUCHECK(cudaMalloc(&y2, 16 * FH * 2));
    CUCHECK(cudaMalloc(&act, 16 * FI * 2));
    printf("lab_ffn: H %d, I %d; image %.1f MB a layer\n", FH, FI, imgb / 1e6);

    const int cases[][2] = {{1, 1}, {7, 7}, {16, 16}, {16, 11}};
    for (const auto &cs : cases) {
        const int M = cs[0], n_real = cs[1];
        std::vector<float> x;
        lab_rand_bf16(x, hb, (size_t)M * FH, 1.f);
        for (size_t i = (size_t)n_real * FH; i < x.size(); i++) { /* rows past the real count: garbage */
            x[i] = 0.f;
            hb[i] = 0x4049; /* 3.14 */
        }
        CUCHECK(cudaMemcpy(xb, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
        CUCHECK(cudaMemcpy(nrow, &n_real, 4, cudaMemcpyHostToDevice));
        lab_poison(yb, 16 * FH * 2);
        std::vector<float> ref;
        ffn_ref(x, wgu0, wd0, M, n_real, eps, ref);
        const cudaError_t e = eng_cu_chain_ffn(st, xb, img[0], yb, part, bar, M, FH, FI, nrow, eps, 0);
        if (e != cudaSuccess) {
            printf("  ffn M=%d: launch refused (%s)\n", M, cudaGetErrorString(e));
            lab_failures++;
            continue;
        }
        CUCHECK(cudaStreamSynchronize(st));
        std::vector<float> got = lab_download_bf16(yb, (size_t)M * FH);
        char what[96];
        snprintf(what, sizeof what, "ffn M=%d real=%d vs fp64", M, n_real);
        lab_check(what, got.data(), ref.data(), got.size(), 2e-3f, 1.6e-2f);
        /* the chain's two GEMMs on the same operands */
        eng_cu_chain_norm nm = {NULL, NULL, eps, nrow, NULL, 1, NULL, NULL};
        lab_poison(y2, 16 * FH * 2);
        CUCHECK(eng_cu_gemm_chain(st, xb, dgu[0], NULL, NULL, act, M, 2 * FI, FH, ENG_CU_EPI_SWIGLU, &nm));
        CUCHECK(eng_cu_gemm_chain(st, act, dd[0], NULL, xb, y2, M, FH, FI, ENG_CU_EPI_NONE, NULL));
        CUCHECK(cudaStreamSynchronize(st));
        std::vector<float> two = lab_download_bf16(y2, (size_t)n_real * FH);
        snprintf(what, sizeof what, "ffn M=%d real=%d vs the two chain GEMMs", M, n_real);
        lab_check(what, got.data(), two.data(), two.size(), 2e-3f, 1.6e-2f);
        /* same bits: three replays of a captured launch */
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CUCHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        eng_cu_pdl_on = 1;
        CUCHECK(eng_cu_chain_ffn(st, xb, img[0], yb, part, bar, M, FH, FI, nrow, eps, 0));
        eng_cu_pdl_on = 0;
        CUCHECK(cudaStreamEndCapture(st, &g));
        CUCHECK(cudaGraphInstantiate(&ge, g, 0));
        int same = 1;
        for (int rep = 0; rep < 3; rep++) {
            lab_poison(yb, 16 * FH * 2);
            CUCHECK(cudaGraphLaunch(ge, st));
            CUCHECK(cudaStreamSynchronize(st));
            std::vector<float> again = lab_download_bf16(yb, (size_t)M * FH);
            same &= !memcmp(again.data(), got.data(), again.size() * sizeof(float));
        }
        snprintf(what, sizeof what, "ffn M=%d real=%d replays bit-identical", M, n_real);
        const float one = same ? 1.f : 0.f, want = 1.f;
        lab_check(what, &one, &want, 1, 0.f, 0.f);
        CUCHECK(cudaGraphExecDestroy(ge));
        CUCHECK(cudaGraphDestroy(g));
    }

    /* 28 dependent layers: fused against the two GEMMs (LAB_QUICK: skipped) */
    for (int M = 16; M >= 1 && !getenv("LAB_QUICK"); M -= 15) {
        std::vector<float> x;
        lab_rand_bf16(x, hb, (size_t)M * FH, 1.f);
        CUCHECK(cudaMemcpy(xb, hb.data(), hb.size() * 2, cudaMemcpyHostToDevice));
        CUCHECK(cudaMemcpy(nrow, &M, 4, cudaMemcpyHostToDevice));
        eng_cu_chain_norm nm = {NULL, NULL, eps, nrow, NULL, 1, NULL, NULL};
        for (int late = 0; late < 2; late++) {
            const float fused = lab_graph_ms(
                st,
                [&] {
                    for (int l = 0; l < FL; l++)
                        CUCHECK(eng_cu_chain_ffn(st, l & 1 ? yb : xb, img[l], l & 1 ? xb : yb, part, bar, M, FH, FI,
                                                 nrow, eps, late));
                },
                20);
            const float two = lab_graph_ms(
                st,
                [&] {
                    for (int l = 0; l < FL; l++) {
                        eng_cu_chain_late = late;
                        CUCHECK(eng_cu_gemm_chain(st, l & 1 ? yb : xb, dgu[l], NULL, NULL, act, M, 2 * FI, FH,
                                                  ENG_CU_EPI_SWIGLU, &nm, NULL, 0, NULL, pgu[l]));
                        eng_cu_chain_late = 0;
                        CUCHECK(eng_cu_gemm_chain(st, act, dd[l], NULL, l & 1 ? yb : xb, l & 1 ? xb : yb, M, FH, FI,
                                                  ENG_CU_EPI_NONE, NULL, NULL, 0, NULL, pd[l]));
                    }
                },
                20);
            printf("  %d layers, %2d rows, %s trigger: fused %7.1f us (%5.2f a layer), two GEMMs %7.1f us (%5.2f): "
                   "%.3fx\n",
                   FL, M, late ? "late " : "early", fused * 1e3f, fused * 1e3f / FL, two * 1e3f, two * 1e3f / FL,
                   two / fused);
        }
    }
    return lab_finish("lab_ffn");
}

/* lab_pool: pooling + L2 normalisation (eng_cu_pool.cu) against an fp64
 * CPU reference: mean, CLS and last-token, normalised or not, full width
 * and Matryoshka-truncated (dims < H), for lengths 1 .. 512 packed into one
 * batch, launched over more sequence blocks than the real count (bucket
 * padding).  Pool skips (include_prompt false: leading prompt tokens left
 * out) as the CPU's eng_cpu_pool defines them -- mean and CLS start after
 * the skip, last-token is unaffected -- with no skip array (NULL), all
 * zeros, skip = len - 1 everywhere, and mixed odd skips.  Output is fp32
 * from bf16 inputs: atol 1e-5, rtol 1e-4.
 *
 * Then the last norm fused with the pooling (eng_cu_ln_pool.cu): LayerNorm
 * (and RMSNorm, beta NULL) of the pooled rows, in fp64 here, pooled and
 * normalised, at every width it takes, each mode, with skips, Matryoshka
 * dims, over a padded grid, sequences walked both ways; and its time
 * against the two kernels it replaces (add_ln in place, then pool) at a
 * saturated step's sizes and at one 16-token query.
 */
#include "lab.h"

enum { SKIP_NULL = 0, SKIP_ZERO = 1, SKIP_LAST = 2, SKIP_MIXED = 3 };

static int skip_for(int kind, int s, int len) {
    if (kind == SKIP_LAST) return len - 1;
    if (kind != SKIP_MIXED || s % 3 == 2) return 0;
    int k = (len * 2 / 3) | 1;   /* odd, inside the sequence */
    return k < len ? k : len - 1;
}

/* a sequence's reference from the sums v of its n pooled rows: the mean
 * over the first dims values, L2-normalised as torch's F.normalize */
static void ref_finish(std::vector<double> &v, int n, int dims, int normalize, float *out) {
    double nrm = 0;
    for (int c = 0; c < dims; c++) {
        v[c] /= n;
        nrm += v[c] * v[c];
    }
    nrm = sqrt(nrm);
    for (int c = 0; c < dims; c++) out[c] = (float)(normalize ? v[c] / (nrm > 1e-12 ? nrm : 1e-12) : v[c]);
}

static void run(int H, int dims, int mode, int normalize, int skip_kind) {
    const std::vector<int> lens = {1, 2, 7, 64, 65, 128, 511, 512, 3};
    std::vector<int> cu(1, 0), skip;
    for (int l : lens) cu.push_back(cu.back() + l);
    const int T = cu.back(), S = (int)lens.size();
    for (int s = 0; s < S; s++) skip.push_back(skip_for(skip_kind, s, lens[s]));
    std::vector<float> xf;
    std::vector<uint16_t> xb;
    lab_rand_bf16(xf, xb, (size_t)T * H, 2.f);
    std::vector<float> ref((size_t)S * dims);
    for (int s = 0; s < S; s++) {
        int r0 = cu[s] + skip[s], r1 = cu[s + 1];
        if (mode == ENG_CU_POOL_CLS) r1 = r0 + 1;
        if (mode == ENG_CU_POOL_LAST) r0 = r1 - 1;
        std::vector<double> v(dims, 0);
        for (int c = 0; c < dims; c++)
            for (int r = r0; r < r1; r++) v[c] += xf[(size_t)r * H + c];
        ref_finish(v, r1 - r0, dims, normalize, &ref[(size_t)s * dims]);
    }
    bf16 *dx = (bf16 *)lab_upload(xb);
    int32_t *dcu = lab_upload(cu);
    int32_t *dskip = skip_kind == SKIP_NULL ? NULL : lab_upload(skip);
    int *dn = lab_upload(std::vector<int>(1, S));
    float *dout;
    CUCHECK(cudaMalloc(&dout, (size_t)(S + 4) * dims * 4));
    lab_poison(dout, (size_t)(S + 4) * dims * 4);
    CUCHECK(eng_cu_pool(0, dx, dcu, dskip, dn, S + 4, H, dims, mode, normalize, dout));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> got((size_t)S * dims);
    CUCHECK(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
    char name[128];
    snprintf(name, sizeof name, "pool H=%d dims=%d mode=%d normalize=%d skip=%s", H, dims, mode, normalize,
             skip_kind == SKIP_NULL ? "none" : skip_kind == SKIP_ZERO ? "zeros" : skip_kind == SKIP_LAST ? "len-1" : "mixed");
    lab_check(name, got.data(), ref.data(), got.size(), 1e-5f, 1e-4f);
    cudaFree(dx); cudaFree(dcu); cudaFree(dskip); cudaFree(dn); cudaFree(dout);
}

/* ln_pool against fp64: rows LayerNorm'd (rms: RMSNorm, no beta) with
 * random gamma / beta, then as run() */
static void run_lnp(int H, int dims, int mode, int normalize, int skip_kind, bool rms, int rev) {
    const std::vector<int> lens = {1, 2, 7, 64, 65, 128, 511, 512, 3, 33};
    std::vector<int> cu(1, 0), skip;
    for (int l : lens) cu.push_back(cu.back() + l);
    const int T = cu.back(), S = (int)lens.size();
    const float eps = rms ? 1e-6f : 1e-12f;
    for (int s = 0; s < S; s++) skip.push_back(skip_for(skip_kind, s, lens[s]));
    std::vector<float> xf, gf(H), bfv(H);
    std::vector<uint16_t> xb;
    lab_rand_bf16(xf, xb, (size_t)T * H, 2.f);
    for (int c = 0; c < H; c++) {
        gf[c] = 1.f + 0.5f * lab_uniform();
        bfv[c] = 0.3f * lab_uniform();
    }
    std::vector<float> ref((size_t)S * dims);
    for (int s = 0; s < S; s++) {
        int r0 = cu[s] + skip[s], r1 = cu[s + 1];
        if (mode == ENG_CU_POOL_CLS) r1 = r0 + 1;
        if (mode == ENG_CU_POOL_LAST) r0 = r1 - 1;
        std::vector<double> v(H, 0);
        for (int r = r0; r < r1; r++) {
            const float *x = &xf[(size_t)r * H];
            double mu = 0, var = 0;
            if (!rms) {
                for (int c = 0; c < H; c++) mu += x[c];
                mu /= H;
            }
            for (int c = 0; c < H; c++) var += (x[c] - mu) * (x[c] - mu);
            const double rs = 1.0 / sqrt(var / H + eps);
            for (int c = 0; c < H; c++) v[c] += (x[c] - mu) * rs * gf[c] + (rms ? 0.0 : bfv[c]);
        }
        ref_finish(v, r1 - r0, dims, normalize, &ref[(size_t)s * dims]);
    }
    bf16 *dx = (bf16 *)lab_upload(xb);
    int32_t *dcu = lab_upload(cu);
    int32_t *dskip = skip_kind == SKIP_NULL ? NULL : lab_upload(skip);
    int *dn = lab_upload(std::vector<int>(1, S));
    float *dg = lab_upload(gf), *db = lab_upload(bfv);
    float *dout;
    CUCHECK(cudaMalloc(&dout, (size_t)(S + 4) * dims * 4));
    lab_poison(dout, (size_t)(S + 4) * dims * 4);
    eng_cu_order_begin(rev); /* rev: this launch walks sequences last to first */
    CUCHECK(eng_cu_ln_pool(0, dx, dg, rms ? NULL : db, dcu, dskip, dn, S + 4, H, dims, mode, normalize, eps, dout));
    eng_cu_order_begin(0);
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> got((size_t)(S + 4) * dims);
    CUCHECK(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
    char name[160];
    snprintf(name, sizeof name, "ln_pool %s H=%d dims=%d mode=%d normalize=%d skip=%s%s", rms ? "rms" : "ln", H, dims,
             mode, normalize,
             skip_kind == SKIP_NULL ? "none" : skip_kind == SKIP_ZERO ? "zeros" : skip_kind == SKIP_LAST ? "len-1" : "mixed",
             rev ? " backwards" : "");
    lab_check(name, got.data(), ref.data(), (size_t)S * dims, 2e-5f, 2e-4f);
    /* the padded grid's blocks past the real count write nothing */
    size_t touched = 0;
    const uint32_t *gw = (const uint32_t *)got.data();
    for (size_t i = (size_t)S * dims; i < got.size(); i++) touched += gw[i] != 0xffffffffu;
    char pad[200];
    snprintf(pad, sizeof pad, "%s: padding untouched", name);
    const float tz = (float)touched, zero = 0.f;
    lab_check(pad, &tz, &zero, 1, 0.f, 0.f);
    cudaFree(dx); cudaFree(dcu); cudaFree(dskip); cudaFree(dn); cudaFree(dg); cudaFree(db); cudaFree(dout);
}

/* ln_pool against add_ln (in place, as the engine's last norm) + pool:
 * S sequences of L rows, best of three rounds each; and the pair captured
 * as a graph with PDL (as the one-query chain runs them) */
static void bench_lnp(int S, int L, int H) {
    const int T = S * L;
    std::vector<int> cu(S + 1);
    for (int s = 0; s <= S; s++) cu[s] = s * L;
    bf16 *x;
    float *g, *o;
    CUCHECK(cudaMalloc(&x, (size_t)T * H * 2));
    CUCHECK(cudaMalloc(&g, (size_t)H * 4));
    CUCHECK(cudaMalloc(&o, (size_t)S * H * 4));
    CUCHECK(cudaMemset(x, 0x3f, (size_t)T * H * 2));
    CUCHECK(cudaMemset(g, 0, (size_t)H * 4));
    int32_t *dcu = lab_upload(cu);
    int *dt = lab_upload(std::vector<int>(1, T)), *ds = lab_upload(std::vector<int>(1, S));
    auto two = [&] {
        CUCHECK(eng_cu_add_ln(0, x, NULL, g, g, x, T, dt, H, 1e-12f));
        CUCHECK(eng_cu_pool(0, x, dcu, NULL, ds, S, H, H, ENG_CU_POOL_MEAN, 1, o));
    };
    auto one = [&] { CUCHECK(eng_cu_ln_pool(0, x, g, g, dcu, NULL, ds, S, H, H, ENG_CU_POOL_MEAN, 1, 1e-12f, o)); };
    float t[2] = {1e30f, 1e30f};
    for (int round = 0; round < 3; round++) {
        t[0] = std::min(t[0], lab_time_ms(two, 50));
        t[1] = std::min(t[1], lab_time_ms(one, 50));
    }
    cudaStream_t st;
    CUCHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    auto two_s = [&] {
        CUCHECK(eng_cu_add_ln(st, x, NULL, g, g, x, T, dt, H, 1e-12f));
        CUCHECK(eng_cu_pool(st, x, dcu, NULL, ds, S, H, H, ENG_CU_POOL_MEAN, 1, o));
    };
    auto one_s = [&] { CUCHECK(eng_cu_ln_pool(st, x, g, g, dcu, NULL, ds, S, H, H, ENG_CU_POOL_MEAN, 1, 1e-12f, o)); };
    const float g2 = lab_graph_ms(st, two_s, 50), g1 = lab_graph_ms(st, one_s, 50);
    CUCHECK(cudaStreamDestroy(st));
    printf("  bench ln_pool %d x %d rows H=%d: add_ln + pool %.2f us | ln_pool %.2f us (%.3f), %.0f GB/s read; "
           "graph %.2f | %.2f us\n",
           S, L, H, t[0] * 1e3, t[1] * 1e3, t[1] / t[0], (double)T * H * 2 / 1e9 / (t[1] * 1e-3), g2 * 1e3,
           g1 * 1e3);
    cudaFree(x); cudaFree(g); cudaFree(o); cudaFree(dcu); cudaFree(dt); cudaFree(ds);
}

int main(void) {
    for (int H : {384, 768, 1024})
        for (int mode : {ENG_CU_POOL_MEAN, ENG_CU_POOL_CLS, ENG_CU_POOL_LAST})
            for (int norm : {0, 1}) run(H, H, mode, norm, SKIP_NULL);
    for (int mode : {ENG_CU_POOL_MEAN, ENG_CU_POOL_CLS, ENG_CU_POOL_LAST})
        for (int kind : {SKIP_ZERO, SKIP_LAST, SKIP_MIXED}) {
            run(384, 384, mode, 1, kind);
            run(1024, 1024, mode, 0, kind);
        }
    run(768, 256, ENG_CU_POOL_MEAN, 1, SKIP_NULL);
    run(768, 256, ENG_CU_POOL_MEAN, 1, SKIP_MIXED);
    run(1024, 130, ENG_CU_POOL_LAST, 1, SKIP_NULL);
    run(1024, 130, ENG_CU_POOL_CLS, 1, SKIP_MIXED);
    for (int H : {256, 384, 512, 768, 1024})
        for (int mode : {ENG_CU_POOL_MEAN, ENG_CU_POOL_CLS, ENG_CU_POOL_LAST})
            for (int rms = 0; rms < 2; rms++) run_lnp(H, H, mode, 1, SKIP_NULL, rms, 0);
    for (int mode : {ENG_CU_POOL_MEAN, ENG_CU_POOL_CLS, ENG_CU_POOL_LAST}) {
        run_lnp(384, 384, mode, 0, SKIP_MIXED, false, 1);
        run_lnp(768, 768, mode, 1, SKIP_LAST, false, 0);
        run_lnp(1024, 1024, mode, 1, SKIP_MIXED, true, 1);
    }
    run_lnp(768, 256, ENG_CU_POOL_MEAN, 1, SKIP_ZERO, false, 1);
    run_lnp(1024, 130, ENG_CU_POOL_LAST, 1, SKIP_NULL, true, 0);
    run_lnp(384, 384, ENG_CU_POOL_MEAN, 1, SKIP_NULL, false, 1);
    /* a width it does not take says so */
    {
        float *dg = lab_upload(std::vector<float>(320, 1.f));
        const cudaError_t e = eng_cu_ln_pool(0, NULL, dg, dg, NULL, NULL, NULL, 1, 320, 320, 0, 1, 1e-12f, NULL);
        cudaFree(dg);
        printf("  ln_pool H=320 -> %s\n", cudaGetErrorName(e));
        const float got = e == cudaErrorNotSupported ? 0.f : 1.f, want = 0.f;
        lab_check("ln_pool H=320 not supported", &got, &want, 1, 0.f, 0.f);
    }
    if (getenv("LAB_QUICK")) return lab_finish("lab_pool");
    bench_lnp(512, 128, 384);  /* a saturated MiniLM step */
    bench_lnp(128, 512, 384);
    bench_lnp(512, 128, 768);  /* BERT-base */
    bench_lnp(1, 16, 384);     /* one query */
    bench_lnp(1, 16, 768);
    return lab_finish("lab_pool");
}

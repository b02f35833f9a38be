/* lab_pool: pooling + L2 normalisation (eng_cu_pool.cu) against an fp64
 * CPU reference: mean, CLS and last-token, normalised or not, full width
 * and Matryoshka-truncated (dims < H), for lengths 1 .. 512 packed into one
 * batch, launched over more sequence blocks than the real count (bucket
 * padding).  Pool skips (include_prompt false: leading prompt tokens left
 * out) as the CPU's eng_cpu_pool defines them -- mean and CLS start after
 * the skip, last-token is unaffected -- with no skip array (NULL), all
 * zeros, skip = len - 1 everywhere, and mixed odd skips.  Output is fp32
 * from bf16 inputs: atol 1e-5, rtol 1e-4.
 */
#include "lab.h"

enum { SKIP_NULL = 0, SKIP_ZERO = 1, SKIP_LAST = 2, SKIP_MIXED = 3 };

static int skip_for(int kind, int s, int len) {
    if (kind == SKIP_LAST) return len - 1;
    if (kind != SKIP_MIXED || s % 3 == 2) return 0;
    int k = (len * 2 / 3) | 1;   /* odd, inside the sequence */
    return k < len ? k : len - 1;
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
        double nrm = 0;
        std::vector<double> v(dims, 0);
        for (int c = 0; c < dims; c++) {
            for (int r = r0; r < r1; r++) v[c] += xf[(size_t)r * H + c];
            v[c] /= (r1 - r0);
            nrm += v[c] * v[c];
        }
        nrm = sqrt(nrm);
        for (int c = 0; c < dims; c++)
            ref[(size_t)s * dims + c] = (float)(normalize ? v[c] / (nrm > 1e-12 ? nrm : 1e-12) : v[c]);
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
    return lab_finish("lab_pool");
}

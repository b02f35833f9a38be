/* lab_pool: pooling + L2 normalisation (eng_cu_pool.cu) against an fp64
 * CPU reference: mean, CLS and last-token, normalised or not, full width
 * and Matryoshka-truncated (dims < H), for lengths 1 .. 512 packed into one
 * batch, launched over more sequence blocks than the real count (bucket
 * padding).  Output is fp32 from bf16 inputs: atol 1e-5, rtol 1e-4.
 */
#include "lab.h"

static void run(int H, int dims, int mode, int normalize) {
    const std::vector<int> lens = {1, 2, 7, 64, 65, 128, 511, 512, 3};
    std::vector<int> cu(1, 0);
    for (int l : lens) cu.push_back(cu.back() + l);
    const int T = cu.back(), S = (int)lens.size();
    std::vector<float> xf;
    std::vector<uint16_t> xb;
    lab_rand_bf16(xf, xb, (size_t)T * H, 2.f);
    std::vector<float> ref((size_t)S * dims);
    for (int s = 0; s < S; s++) {
        int r0 = cu[s], r1 = cu[s + 1];
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
    int *dn = lab_upload(std::vector<int>(1, S));
    float *dout;
    CUCHECK(cudaMalloc(&dout, (size_t)(S + 4) * dims * 4));
    lab_poison(dout, (size_t)(S + 4) * dims * 4);
    CUCHECK(eng_cu_pool(0, dx, dcu, dn, S + 4, H, dims, mode, normalize, dout));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> got((size_t)S * dims);
    CUCHECK(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
    char name[96];
    snprintf(name, sizeof name, "pool H=%d dims=%d mode=%d normalize=%d", H, dims, mode, normalize);
    lab_check(name, got.data(), ref.data(), got.size(), 1e-5f, 1e-4f);
    cudaFree(dx); cudaFree(dcu); cudaFree(dn); cudaFree(dout);
}

int main(void) {
    for (int H : {384, 768, 1024})
        for (int mode : {ENG_CU_POOL_MEAN, ENG_CU_POOL_CLS, ENG_CU_POOL_LAST})
            for (int norm : {0, 1}) run(H, H, mode, norm);
    run(768, 256, ENG_CU_POOL_MEAN, 1);
    run(1024, 130, ENG_CU_POOL_LAST, 1);
    return lab_finish("lab_pool");
}

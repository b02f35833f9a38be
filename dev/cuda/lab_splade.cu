/* lab_splade: SPLADE's fold (eng_cu_splade.cu) against an fp64 CPU
 * reference: chunks of logits folded one after another into the pooled
 * vectors, by max and by sum, with log1p_relu (log1p twice) and without,
 * sequences of 1 to 300 tokens that cross chunk boundaries, a vocabulary
 * that is not a multiple of the threads (2500, 30522), and a real token
 * count below the bucket's (padding rows must not count).  fp32 output
 * from bf16 logits: atol 1e-5, rtol 1e-5.  Then its time for a chunk of
 * 256 tokens x 30522 (GB/s of logits read).
 */
#include "lab.h"

static void run(int V, int chunk, int sum, int log2, const std::vector<int> &lens, int pad_rows) {
    std::vector<int> cu(1, 0);
    for (int l : lens) cu.push_back(cu.back() + l);
    const int nt = cu.back(), S = (int)lens.size(), T = nt + pad_rows, ld = (V + 63) & ~63;
    std::vector<float> xf;
    std::vector<uint16_t> xb;
    lab_rand_bf16(xf, xb, (size_t)T * ld, 3.f);
    std::vector<double> ref((size_t)S * V, 0.0);
    for (int s = 0; s < S; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++)
            for (int v = 0; v < V; v++) {
                const double x = xf[(size_t)t * ld + v];
                double y = x > 0 ? log1p(x) : 0.0;
                if (log2) y = log1p(y);
                double &r = ref[(size_t)s * V + v];
                r = sum ? r + y : (y > r ? y : r);
            }
    bf16 *dx = (bf16 *)lab_upload(xb);
    std::vector<int> meta = {nt, S};
    int *dmeta = lab_upload(meta), *dcu = lab_upload(cu);
    float *dout;
    CUCHECK(cudaMalloc((void **)&dout, (size_t)S * V * 4));
    CUCHECK(cudaMemset(dout, 0, (size_t)S * V * 4));
    for (int c0 = 0; c0 < T; c0 += chunk) {
        const int rows = T - c0 < chunk ? T - c0 : chunk;
        CUCHECK(eng_cu_splade_fold(0, dx + (size_t)c0 * ld, ld, rows, c0, dmeta, dcu, dmeta + 1, V, dout, sum, log2));
    }
    std::vector<float> got((size_t)S * V);
    CUCHECK(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) {
        const double d = fabs(got[i] - ref[i]);
        worst = d > worst ? d : worst;
        if (!(d <= 1e-5 + 1e-5 * fabs(ref[i]))) bad++;
    }
    printf("fold V=%d chunk=%d %s%s seqs=%d tokens=%d (+%d padding): max |err| %.2e %s\n", V, chunk,
           sum ? "sum" : "max", log2 ? " log1p_relu" : "", S, nt, pad_rows, worst, bad ? "FAIL" : "ok");
    lab_failures += bad != 0;
    cudaFree(dx); cudaFree(dmeta); cudaFree(dcu); cudaFree(dout);
}

int main() {
    const std::vector<int> mixed = {1, 300, 7, 256, 255, 2, 64, 129};
    for (int V : {2500, 30522})
        for (int sum = 0; sum < 2; sum++)
            for (int log2 = 0; log2 < 2; log2++) run(V, 256, sum, log2, mixed, 13);
    run(2500, 7, 0, 0, mixed, 0);            /* chunks smaller than most sequences */
    run(2500, 256, 1, 0, {1}, 15);           /* one token */
    run(30522, 256, 0, 0, {600}, 0);         /* one sequence over three chunks */
    /* time: one chunk of 256 tokens x 30522 in 16 sequences */
    {
        const int V = 30522, ld = 30528, rows = 256;
        std::vector<float> xf;
        std::vector<uint16_t> xb;
        lab_rand_bf16(xf, xb, (size_t)rows * ld, 3.f);
        std::vector<int> cu, meta = {rows, 16};
        for (int s = 0; s <= 16; s++) cu.push_back(s * 16);
        bf16 *dx = (bf16 *)lab_upload(xb);
        int *dmeta = lab_upload(meta), *dcu = lab_upload(cu);
        float *dout;
        CUCHECK(cudaMalloc((void **)&dout, (size_t)16 * V * 4));
        CUCHECK(cudaMemset(dout, 0, (size_t)16 * V * 4));
        cudaEvent_t a, b;
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        const int reps = 50;
        cudaEventRecord(a);
        for (int i = 0; i < reps; i++)
            CUCHECK(eng_cu_splade_fold(0, dx, ld, rows, 0, dmeta, dcu, dmeta + 1, V, dout, 0, 0));
        cudaEventRecord(b);
        CUCHECK(cudaEventSynchronize(b));
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        const double us = ms * 1000.0 / reps;
        printf("fold 256 x 30522, 16 sequences: %.1f us, %.0f GB/s of logits\n", us, rows * (double)ld * 2 / us / 1e3);
        cudaFree(dx); cudaFree(dmeta); cudaFree(dcu); cudaFree(dout);
    }
    printf("lab_splade: %s (%d failing checks)\n", lab_failures ? "FAIL" : "PASS", lab_failures);
    return lab_failures ? 1 : 0;
}

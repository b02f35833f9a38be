/* lab_attn: variable-length attention (eng_cu_attn.cu) against an fp64 CPU
 * reference on the same bf16-rounded inputs.
 *
 * Cases: head_dim 32 / 64 / 128; bidirectional and causal; grouped-query
 * (4 q heads per kv head); packed batches mixing lengths 1, 2, 17, 63, 64,
 * 65, 200 and 512 (tile edges on both sides), Q/K/V read with the stride of
 * a fused QKV buffer as the engine does.  Output is bf16, P is rounded to
 * bf16 before P.V (as in FlashAttention), so the tolerance is atol 1e-2,
 * rtol 2e-2 on outputs of magnitude <= 1.  Timing: 64 x 512 and 256 x 128
 * tokens, TFLOP/s counting 4*L^2*D per head per sequence (halved if
 * causal).
 */
#include "lab.h"

typedef struct acase { int d, heads, kv_heads, causal; std::vector<int> lens; } acase;

static void ref_attn(const std::vector<float> &qkv, int ld, int H, const acase &c,
                     const std::vector<int> &cu, std::vector<float> &out, int ldo, size_t n_seqs) {
    const int D = c.d, grp = c.heads / c.kv_heads;
    const double scale = 1.0 / sqrt((double)D);
    std::vector<double> p;
    for (size_t s = 0; s + 1 < cu.size() && s < n_seqs; s++) {
        const int a = cu[s], len = cu[s + 1] - cu[s];
        for (int h = 0; h < c.heads; h++) {
            const int kh = h / grp;
            for (int i = 0; i < len; i++) {
                const float *q = &qkv[(size_t)(a + i) * ld + h * D];
                const int kend = c.causal ? i + 1 : len;
                p.assign(kend, 0);
                double mx = -1e300, sum = 0;
                for (int j = 0; j < kend; j++) {
                    const float *k = &qkv[(size_t)(a + j) * ld + H + kh * D];
                    double s_ = 0;
                    for (int e = 0; e < D; e++) s_ += (double)q[e] * k[e];
                    p[j] = s_ * scale;
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j < kend; j++) { p[j] = exp(p[j] - mx); sum += p[j]; }
                for (int e = 0; e < D; e++) {
                    double o = 0;
                    for (int j = 0; j < kend; j++)
                        o += p[j] * qkv[(size_t)(a + j) * ld + 2 * H + kh * D + e];
                    out[(size_t)(a + i) * ldo + h * D + e] = (float)(o / sum);
                }
            }
        }
    }
}

/* Layout as in the engine: row = [Q (heads*D) | K (kv*D) | V (kv*D)]. */
static void run_case(const acase &c, int time_it) {
    const int D = c.d, Hq = c.heads * D, Hkv = c.kv_heads * D, ld = Hq + 2 * Hkv;
    std::vector<int> cu(1, 0);
    for (int l : c.lens) cu.push_back(cu.back() + l);
    const int T = cu.back(), S = (int)c.lens.size();
    std::vector<float> f;
    std::vector<uint16_t> b;
    lab_rand_bf16(f, b, (size_t)T * ld, 1.f);
    /* the reference sees K at column Hq, V at Hq+Hkv: adapt ref's indexing */
    std::vector<float> fr((size_t)T * (Hq + 2 * Hq));
    for (int t = 0; t < T; t++)
        for (int i = 0; i < ld; i++) {
            int col = i < Hq ? i : i < Hq + Hkv ? Hq + (i - Hq) : 2 * Hq + (i - Hq - Hkv);
            fr[(size_t)t * 3 * Hq + col] = f[(size_t)t * ld + i];
        }
    std::vector<float> ref((size_t)T * Hq);
    /* timing cases check their first two sequences only (the fp64
     * reference of a 32k-token batch would take minutes) */
    const int ref_seqs = time_it ? 2 : S;
    ref_attn(fr, 3 * Hq, Hq, c, cu, ref, Hq, ref_seqs);

    const int max_tiles = eng_cu_attn_max_tiles(T + 5, S + 2); /* a bucket bigger than the batch */
    std::vector<int32_t> tiles(2 * max_tiles);
    const int nt = eng_cu_attn_tiles(cu.data(), S, tiles.data());
    bf16 *dqkv = (bf16 *)lab_upload(b), *dout;
    int32_t *dcu = lab_upload(cu), *dtiles = lab_upload(tiles);
    int *dnt = lab_upload(std::vector<int>(1, nt));
    CUCHECK(cudaMalloc(&dout, (size_t)T * Hq * 2));
    lab_poison(dout, (size_t)T * Hq * 2);
    eng_cu_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = dqkv; a.k = dqkv + Hq; a.v = dqkv + Hq + Hkv;
    a.ldq = a.ldk = a.ldv = ld;
    a.o = dout; a.ldo = Hq;
    a.n_heads = c.heads; a.n_kv_heads = c.kv_heads; a.head_dim = D;
    a.cu_seqlens = dcu; a.tiles = dtiles; a.n_tiles_dev = dnt; a.max_tiles = max_tiles;
    a.scale = 1.f / sqrtf((float)D);
    a.causal = c.causal;
    for (int version : {0, 1}) { /* 0: shipped (v2), 1: first version */
        a.version = version;
        lab_poison(dout, (size_t)T * Hq * 2);
        CUCHECK(eng_cu_attention(0, &a));
        CUCHECK(cudaDeviceSynchronize());
        std::vector<float> got = lab_download_bf16(dout, (size_t)T * Hq);
        char name[128];
        snprintf(name, sizeof name, "attn v%d d=%d h=%d kv=%d %s seqs=%d tokens=%d",
                 version ? 1 : 2, D, c.heads, c.kv_heads, c.causal ? "causal" : "bidir", S, T);
        lab_check(name, got.data(), ref.data(), (size_t)cu[ref_seqs] * Hq, 1e-2f, 2e-2f);
        if (time_it) {
            double fl = 0;
            for (int l : c.lens) fl += 4.0 * l * l * D * c.heads * (c.causal ? 0.5 : 1.0);
            const float ms = lab_time_ms([&] { CUCHECK(eng_cu_attention(0, &a)); }, 20);
            printf("  bench %s: %.1f us, %.1f TFLOP/s\n", name, ms * 1e3, fl / (ms * 1e-3) / 1e12);
        }
    }
    cudaFree(dqkv); cudaFree(dcu); cudaFree(dtiles); cudaFree(dnt); cudaFree(dout);
}

int main(void) {
    const std::vector<int> mix = {1, 17, 64, 65, 2, 200, 63, 512, 5};
    for (int d : {32, 64, 128})
        for (int causal : {0, 1}) {
            run_case({d, d == 128 ? 8 : 4, d == 128 ? 2 : 4, causal, mix}, 0);
            run_case({d, 2, 2, causal, {1}}, 0);
            run_case({d, 2, 2, causal, {129}}, 0);
        }
    if (getenv("LAB_QUICK")) return lab_finish("lab_attn");
    run_case({64, 12, 12, 0, std::vector<int>(64, 512)}, 1);
    run_case({64, 12, 12, 0, std::vector<int>(256, 128)}, 1);
    run_case({32, 12, 12, 0, std::vector<int>(64, 512)}, 1);
    run_case({128, 16, 8, 1, std::vector<int>(16, 1024)}, 1);
    run_case({64, 12, 12, 0, std::vector<int>(2048, 16)}, 1);
    return lab_finish("lab_attn");
}

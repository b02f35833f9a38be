/* lab_qwen3: the kernels the Qwen3 decoder adds (eng_cu_decoder.cu,
 * eng_cu_norm.cu's embed_rmsnorm) and the attention kernel on Qwen3's
 * fused QKV layout, each against the CPU engine's own reference
 * (src/engine/cpu/eng_cpu_decoder_ref.c, linked in: one source for both),
 * on the same bf16-rounded inputs.  Then bandwidth at 16384 rows.
 *
 * Sections:
 *   embed_rmsnorm   x = word[ids] exactly; h = eng_cpu_rmsnorm_ref(x);
 *                   padded rows of x and h zeroed
 *   qk_norm_rope    eng_cpu_rmsnorm_heads_ref (Q, K) + eng_cpu_rope_ref on
 *                   packed sequences (positions restart per sequence, up
 *                   to 1999); V columns and padded rows untouched (bits);
 *                   also without the norm (NULL weights: the rotary alone,
 *                   as Qwen2 / Mistral / Llama run it)
 *   swiglu          eng_cpu_swiglu_ref; padded rows untouched
 *   attention       eng_cpu_attention_gqa_ref on the fused [T, (nh+2kv)d]
 *                   rows, causal and bidirectional, GQA 16/8 d=128, 4/2 d=32
 *
 * Tolerances: outputs are bf16 (relative rounding 2^-9); values after the
 * norms are O(1-3): atol 2e-2, rtol 1e-2; attention as lab_attn (P is
 * rounded to bf16 before P.V): atol 1e-2, rtol 2e-2.
 * First H200 run 2026-11-29: 41 checks ok, 0 FAIL, compute-sanitizer clean
 * (bench/results/h200-qwen3-lab.log).
 */
#include "lab.h"
extern "C" {
#include "cpu/eng_cpu_decoder.h"
}
#include "eng_cu_qwen3_pack.h"

static std::vector<float> rand_range(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto &x : v) x = lo + (hi - lo) * 0.5f * (lab_uniform() + 1.f);
    return v;
}

static std::vector<uint16_t> download_bits(const bf16 *d, size_t n) {
    std::vector<uint16_t> b(n);
    CUCHECK(cudaMemcpy(b.data(), d, n * 2, cudaMemcpyDeviceToHost));
    return b;
}

/* ---- embedding gather + RMSNorm -------------------------------------------- */

static void check_embed(int rows, int H) {
    const int bucket = rows + 3, vocab = 97;
    const float eps = 1e-6f;
    std::vector<float> wf;
    std::vector<uint16_t> wb;
    lab_rand_bf16(wf, wb, (size_t)vocab * H, 1.f);
    std::vector<float> g = rand_range(H, 0.5f, 1.5f);
    std::vector<int32_t> ids(bucket);
    for (int r = 0; r < bucket; r++) ids[r] = (r * 31 + 7) % vocab;
    bf16 *dw = (bf16 *)lab_upload(wb), *dx, *dh;
    float *dg = lab_upload(g);
    int32_t *dids = lab_upload(ids);
    int *dn = lab_upload(std::vector<int>(1, rows));
    CUCHECK(cudaMalloc(&dx, (size_t)bucket * H * 2));
    CUCHECK(cudaMalloc(&dh, (size_t)bucket * H * 2));
    lab_poison(dx, (size_t)bucket * H * 2);
    lab_poison(dh, (size_t)bucket * H * 2);
    CUCHECK(eng_cu_embed_rmsnorm(0, dids, dw, dg, dx, dh, bucket, dn, H, eps));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> x((size_t)rows * H), ref((size_t)rows * H);
    for (int r = 0; r < rows; r++)
        memcpy(&x[(size_t)r * H], &wf[(size_t)ids[r] * H], (size_t)H * 4);
    eng_cpu_rmsnorm_ref(ref.data(), x.data(), g.data(), eps, rows, H);
    std::vector<float> gx = lab_download_bf16(dx, (size_t)bucket * H), gh = lab_download_bf16(dh, (size_t)bucket * H);
    char name[96];
    snprintf(name, sizeof name, "embed_rmsnorm x rows=%d H=%d", rows, H);
    lab_check(name, gx.data(), x.data(), (size_t)rows * H, 0.f, 0.f);
    snprintf(name, sizeof name, "embed_rmsnorm h rows=%d H=%d", rows, H);
    lab_check(name, gh.data(), ref.data(), (size_t)rows * H, 2e-2f, 1e-2f);
    int zero = 1;
    for (size_t i = (size_t)rows * H; i < (size_t)bucket * H; i++) zero &= gx[i] == 0.f && gh[i] == 0.f;
    if (!zero) { printf("  FAIL: embed_rmsnorm left padded rows non-zero\n"); lab_failures++; }
    cudaFree(dw); cudaFree(dx); cudaFree(dh); cudaFree(dg); cudaFree(dids); cudaFree(dn);
}

/* ---- q/k RMSNorm + rotary ---------------------------------------------------- */

/* norm 0: no q/k norm (Qwen2, Mistral, Llama) -- the kernel's rotary alone */
typedef struct qcase { int nh, nkv, d; std::vector<int> lens; double theta; int norm = 1; } qcase;

static void check_qk(const qcase &c, int time_it) {
    const int d = c.d, ld = (c.nh + 2 * c.nkv) * d;
    std::vector<int32_t> cu(1, 0);
    int longest = 1;
    for (int l : c.lens) { cu.push_back(cu.back() + l); longest = std::max(longest, l); }
    const int T = cu.back(), S = (int)c.lens.size(), bucket = T + 5;
    const float eps = 1e-6f;
    std::vector<float> f;
    std::vector<uint16_t> b;
    lab_rand_bf16(f, b, (size_t)bucket * ld, 2.f);
    std::vector<float> qn = rand_range(d, 0.5f, 1.5f), kn = rand_range(d, 0.5f, 1.5f);
    /* reference: the CPU engine's kernels, in its order (norm, then rotate) */
    std::vector<float> ref(f.begin(), f.begin() + (size_t)T * ld);
    if (c.norm) {
        eng_cpu_rmsnorm_heads_ref(ref.data(), (size_t)ld, 0, T, c.nh, d, qn.data(), eps);
        eng_cpu_rmsnorm_heads_ref(ref.data(), (size_t)ld, (size_t)c.nh * d, T, c.nkv, d, kn.data(), eps);
    }
    const eng_rope rope = eng_rope_plain(c.theta);
    eng_cpu_rope_ref(ref.data(), cu.data(), S, c.nh, c.nkv, d, &rope);
    std::vector<float> table((size_t)longest * d);
    eng_cu_q3_rope_table(table.data(), longest, d, &rope); /* the shipped table maker */
    bf16 *dqkv = (bf16 *)lab_upload(b);
    float *dqn = lab_upload(qn), *dkn = lab_upload(kn), *drope = lab_upload(table);
    int32_t *dcu = lab_upload(cu);
    int *dn = lab_upload(std::vector<int>(1, T)), *ds = lab_upload(std::vector<int>(1, S));
    eng_cu_qk_args a;
    memset(&a, 0, sizeof a);
    a.qkv = dqkv; a.ld = ld; a.n_heads = c.nh; a.n_kv_heads = c.nkv; a.head_dim = d;
    a.q_norm = c.norm ? dqn : NULL; a.k_norm = c.norm ? dkn : NULL; a.eps = eps; a.rope = drope; a.rope_rows = longest;
    a.cu_seqlens = dcu; a.n_seqs_dev = ds; a.rows = bucket; a.n_rows_dev = dn;
    CUCHECK(eng_cu_qk_norm_rope(0, &a));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> bits = download_bits(dqkv, (size_t)bucket * ld);
    const int qk = (c.nh + c.nkv) * d;
    std::vector<float> got((size_t)T * qk), want((size_t)T * qk);
    int v_same = 1, pad_same = 1;
    for (int t = 0; t < bucket; t++)
        for (int i = 0; i < ld; i++) {
            const size_t k = (size_t)t * ld + i;
            if (t >= T) pad_same &= bits[k] == b[k];
            else if (i >= qk) v_same &= bits[k] == b[k];
            else {
                got[(size_t)t * qk + i] = eng_cu_bf_bits2f(bits[k]);
                want[(size_t)t * qk + i] = ref[k];
            }
        }
    char name[128];
    snprintf(name, sizeof name, "qk_%s nh=%d kv=%d d=%d seqs=%d tokens=%d", c.norm ? "norm_rope" : "rope (no norm)",
             c.nh, c.nkv, d, S, T);
    lab_check(name, got.data(), want.data(), got.size(), 2e-2f, 1e-2f);
    if (!v_same) { printf("  FAIL: qk_norm_rope changed V columns\n"); lab_failures++; }
    if (!pad_same) { printf("  FAIL: qk_norm_rope changed padded rows\n"); lab_failures++; }
    if (time_it) {
        const float ms = lab_time_ms([&] { CUCHECK(eng_cu_qk_norm_rope(0, &a)); }, 50);
        const double gb = 2.0 * T * qk * 2 / 1e9;
        printf("  bench %s: %.2f us, %.0f GB/s (Q and K read + written)\n", name, ms * 1e3, gb / (ms * 1e-3));
    }
    cudaFree(dqkv); cudaFree(dqn); cudaFree(dkn); cudaFree(drope); cudaFree(dcu); cudaFree(dn); cudaFree(ds);
}

/* ---- SwiGLU ------------------------------------------------------------------- */

static void check_swiglu(int rows, int I, int time_it) {
    const int bucket = rows + 2;
    std::vector<float> f;
    std::vector<uint16_t> b;
    lab_rand_bf16(f, b, (size_t)bucket * 2 * I, 4.f);
    std::vector<float> ref((size_t)rows * I);
    eng_cpu_swiglu_ref(ref.data(), f.data(), rows, I);
    bf16 *dgu = (bf16 *)lab_upload(b), *dout;
    int *dn = lab_upload(std::vector<int>(1, rows));
    CUCHECK(cudaMalloc(&dout, (size_t)bucket * I * 2));
    lab_poison(dout, (size_t)bucket * I * 2);
    CUCHECK(eng_cu_swiglu(0, dgu, dout, bucket, dn, I));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> got = lab_download_bf16(dout, (size_t)bucket * I);
    char name[96];
    snprintf(name, sizeof name, "swiglu rows=%d I=%d", rows, I);
    lab_check(name, got.data(), ref.data(), (size_t)rows * I, 2e-2f, 1e-2f);
    int untouched = 1;
    for (size_t i = (size_t)rows * I; i < (size_t)bucket * I; i++) untouched &= !(got[i] == got[i]);
    if (!untouched) { printf("  FAIL: swiglu wrote padded rows\n"); lab_failures++; }
    if (time_it) {
        const float ms = lab_time_ms([&] { CUCHECK(eng_cu_swiglu(0, dgu, dout, rows, dn, I)); }, 50);
        const double gb = 3.0 * rows * I * 2 / 1e9;
        printf("  bench %s: %.2f us, %.0f GB/s\n", name, ms * 1e3, gb / (ms * 1e-3));
    }
    cudaFree(dgu); cudaFree(dout); cudaFree(dn);
}

/* ---- attention on the fused Qwen3 layout -------------------------------------------- */

static void check_attention(int nh, int nkv, int d, int causal, const std::vector<int> &lens) {
    const int ld = (nh + 2 * nkv) * d, A = nh * d;
    std::vector<int32_t> cu(1, 0);
    for (int l : lens) cu.push_back(cu.back() + l);
    const int T = cu.back(), S = (int)lens.size();
    std::vector<float> f;
    std::vector<uint16_t> b;
    lab_rand_bf16(f, b, (size_t)T * ld, 1.f);
    std::vector<float> ref((size_t)T * A);
    eng_cpu_attention_gqa_ref(ref.data(), f.data(), cu.data(), S, nh, nkv, d, causal);
    const int max_tiles = eng_cu_attn_max_tiles(T + 5, S + 2);
    std::vector<int32_t> tiles(2 * max_tiles);
    const int nt = eng_cu_attn_tiles(cu.data(), S, tiles.data());
    bf16 *dqkv = (bf16 *)lab_upload(b), *dout;
    int32_t *dcu = lab_upload(cu), *dtiles = lab_upload(tiles);
    int *dnt = lab_upload(std::vector<int>(1, nt));
    CUCHECK(cudaMalloc(&dout, (size_t)T * A * 2));
    lab_poison(dout, (size_t)T * A * 2);
    eng_cu_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = dqkv; a.k = dqkv + A; a.v = dqkv + A + nkv * d;
    a.ldq = a.ldk = a.ldv = ld;
    a.o = dout; a.ldo = A;
    a.n_heads = nh; a.n_kv_heads = nkv; a.head_dim = d;
    a.cu_seqlens = dcu; a.tiles = dtiles; a.n_tiles_dev = dnt; a.max_tiles = max_tiles;
    a.scale = 1.f / sqrtf((float)d);
    a.causal = causal;
    CUCHECK(eng_cu_attention(0, &a));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> got = lab_download_bf16(dout, (size_t)T * A);
    char name[128];
    snprintf(name, sizeof name, "attention (CPU gqa ref) nh=%d kv=%d d=%d %s tokens=%d", nh, nkv, d,
             causal ? "causal" : "bidir", T);
    lab_check(name, got.data(), ref.data(), (size_t)T * A, 1e-2f, 2e-2f);
    cudaFree(dqkv); cudaFree(dcu); cudaFree(dtiles); cudaFree(dnt); cudaFree(dout);
}

int main(void) {
    for (int H : {64, 1024, 4096})
        for (int r : {1, 7, 64, 1000}) check_embed(r, H);
    const std::vector<int> mix = {1, 5, 17, 64, 300, 2};
    check_qk({16, 8, 128, {1}, 1e6}, 0);
    check_qk({16, 8, 128, mix, 1e6}, 0);
    check_qk({16, 8, 128, {2000}, 1e6}, 0);
    check_qk({4, 2, 32, mix, 1e6}, 0);
    check_qk({8, 8, 64, mix, 1e4}, 0);
    check_qk({12, 2, 128, mix, 1e6, 0}, 0);  /* gte-Qwen2-1.5B's heads, no q/k norm */
    check_qk({32, 8, 128, {1}, 1e4, 0}, 0);  /* e5-mistral's */
    check_qk({32, 8, 64, mix, 5e5, 0}, 0);
    for (int I : {128, 3072})
        for (int r : {1, 7, 1000}) check_swiglu(r, I, 0);
    for (int causal : {0, 1}) {
        check_attention(16, 8, 128, causal, {1, 17, 64, 65, 200});
        check_attention(4, 2, 32, causal, {1, 17, 64, 65, 200});
    }
    if (getenv("LAB_QUICK")) return lab_finish("lab_qwen3");
    check_qk({16, 8, 128, std::vector<int>(128, 128), 1e6}, 1);
    check_swiglu(16384, 3072, 1);
    {
        /* embed_rmsnorm at 16384 x 1024: one gather + one norm pass */
        const int rows = 16384, H = 1024, vocab = 4096;
        std::vector<float> wf;
        std::vector<uint16_t> wb;
        lab_rand_bf16(wf, wb, (size_t)vocab * H, 1.f);
        std::vector<int32_t> ids(rows);
        for (int r = 0; r < rows; r++) ids[r] = (r * 131) % vocab;
        bf16 *dw = (bf16 *)lab_upload(wb), *dx, *dh;
        float *dg = lab_upload(std::vector<float>(H, 1.f));
        int32_t *dids = lab_upload(ids);
        int *dn = lab_upload(std::vector<int>(1, rows));
        CUCHECK(cudaMalloc(&dx, (size_t)rows * H * 2));
        CUCHECK(cudaMalloc(&dh, (size_t)rows * H * 2));
        const float ms = lab_time_ms([&] { CUCHECK(eng_cu_embed_rmsnorm(0, dids, dw, dg, dx, dh, rows, dn, H, 1e-6f)); }, 50);
        printf("  bench embed_rmsnorm rows=%d H=%d: %.2f us, %.0f GB/s\n", rows, H, ms * 1e3,
               3.0 * rows * H * 2 / 1e9 / (ms * 1e-3));
        cudaFree(dw); cudaFree(dx); cudaFree(dh); cudaFree(dg); cudaFree(dids); cudaFree(dn);
    }
    return lab_finish("lab_qwen3");
}

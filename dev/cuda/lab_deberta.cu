/* lab_deberta: DeBERTa's disentangled attention (eng_cu_deberta.cu)
 * against an fp64 CPU reference written out from eng_deberta.h's formula:
 * softmax(scale (q.k + q.kr[c] + k.qr[c])) v, c the index of the distance
 * (eng_deberta_index_table: the same host code the engine uses).  Head
 * sizes 32, 64, 128; v3's form (position buckets: 16 so the log buckets
 * start at distance 9, and 256) and v2's (32 relative positions, longer
 * distances clamped); c2p and p2c each on and off; sequences of 1 to 300
 * tokens packed together (tiles that end mid-sequence, key tiles past a
 * table's reach); the tile list and counts read from device memory with
 * a grid larger than the real tile count.  V is drawn around 1 so the
 * outputs are ~1; bf16 in and out: atol 1e-2, rtol 1e-2 (the inputs'
 * bf16 rounding is in the reference too; the output's own is 2^-8).  The
 * tables are fp32 values off the bf16 grid, and at head size 64 both forms
 * run: CUDA cores on the fp32 tables, tensor cores on their bf16 hi / lo
 * pairs (eng_cu_deberta_split).  Then the table
 * GEMM (eng_cu_deberta_gemm_f32_bf16) and the row LayerNorm against fp64,
 * and the attention's time on 64 sequences of 256 tokens, 12 heads of 64,
 * in both forms.
 */
#include "lab.h"
#include "eng_cu_attn_tiles.h"
extern "C" {
#include "eng_deberta.h"
}

/* the kernel's arguments for a packed qkv [T, 3H], output [T, H] and the device tables */
static eng_cu_deb_args args_for(bf16 *qkv, bf16 *out, int D, int heads, const int *cu, const int *tiles,
                                const int *nt, int max_tiles, const float *kr, const float *qr, const int *idx,
                                int max_len, float scale_log2) {
    const int H = heads * D;
    eng_cu_deb_args a;
    memset(&a, 0, sizeof a);
    a.q = qkv; a.k = qkv + H; a.v = qkv + 2 * H;
    a.ldq = a.ldk = a.ldv = 3 * H;
    a.o = out; a.ldo = H;
    a.n_heads = heads; a.head_dim = D; a.H = H;
    a.cu_seqlens = cu; a.tiles = tiles; a.n_tiles = nt; a.max_tiles = max_tiles;
    a.kr = kr; a.qr = qr;
    a.idx = idx; a.max_len = max_len;
    a.scale_log2 = scale_log2;
    return a;
}

static void run(int D, int heads, const eng_deberta_cfg &cfg, int c2p, int p2c, const std::vector<int> &lens) {
    const int H = heads * D, rows = 2 * cfg.span, max_len = 320;
    std::vector<int> cu(1, 0);
    for (int l : lens) cu.push_back(cu.back() + l);
    const int T = cu.back(), S = (int)lens.size();
    std::vector<float> qkvf, krf, qrf;
    std::vector<uint16_t> qkvb, unusedb;
    lab_rand_bf16(qkvf, qkvb, (size_t)T * 3 * H, 1.5f);
    for (int t = 0; t < T; t++)   /* V around 1 (not 0), so outputs are ~1 and the tolerance bites */
        for (int c = 2 * H; c < 3 * H; c++) {
            const size_t e = (size_t)t * 3 * H + c;
            qkvb[e] = eng_cu_f2bf_bits(1.f + 0.5f * qkvf[e]);
            qkvf[e] = eng_cu_bf_bits2f(qkvb[e]);
        }
    lab_rand_bf16(krf, unusedb, (size_t)rows * H, 1.5f);   /* the tables are fp32 on the device, and not */
    lab_rand_bf16(qrf, unusedb, (size_t)rows * H, 1.5f);   /* bf16 values: the tensor-core form's lo halves count */
    for (auto &x : krf) x += 0.01f * lab_uniform();
    for (auto &x : qrf) x += 0.01f * lab_uniform();
    std::vector<int> idx(2 * max_len - 1);
    eng_deberta_index_table(&cfg, max_len, idx.data());
    const double scale = 1.0 / sqrt((double)D * (1 + c2p + p2c));
    std::vector<float> ref((size_t)T * H);
    std::vector<double> p(max_len);
    for (int s = 0; s < S; s++)
        for (int h = 0; h < heads; h++)
            for (int i = 0; i < lens[s]; i++) {
                const float *q = &qkvf[(size_t)(cu[s] + i) * 3 * H + h * D];
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j < lens[s]; j++) {
                    const float *k = &qkvf[(size_t)(cu[s] + j) * 3 * H + H + h * D];
                    const int c = idx[max_len - 1 + i - j];
                    double acc = 0;
                    for (int x = 0; x < D; x++) {
                        acc += (double)q[x] * k[x];
                        if (c2p) acc += (double)q[x] * krf[(size_t)c * H + h * D + x];
                        if (p2c) acc += (double)k[x] * qrf[(size_t)c * H + h * D + x];
                    }
                    p[j] = acc * scale;
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j < lens[s]; j++) sum += (p[j] = exp(p[j] - mx));
                for (int x = 0; x < D; x++) {
                    double acc = 0;
                    for (int j = 0; j < lens[s]; j++) acc += p[j] * qkvf[(size_t)(cu[s] + j) * 3 * H + 2 * H + h * D + x];
                    ref[(size_t)(cu[s] + i) * H + h * D + x] = (float)(acc / sum);
                }
            }
    const int max_tiles = eng_cu_attn_max_tiles(T, S) + 3;
    std::vector<int32_t> tiles(2 * (size_t)max_tiles, 0);
    const int nt = eng_cu_attn_tiles(cu.data(), S, tiles.data());
    std::vector<int> ntv = {nt};
    bf16 *dqkv = (bf16 *)lab_upload(qkvb);
    float *dkr = lab_upload(krf), *dqr = lab_upload(qrf);
    int *didx = lab_upload(idx), *dcu = lab_upload(cu), *dtiles = lab_upload(tiles), *dnt = lab_upload(ntv);
    bf16 *dout;
    CUCHECK(cudaMalloc((void **)&dout, (size_t)T * H * 2));
    lab_poison(dout, (size_t)T * H * 2);
    eng_cu_deb_args a = args_for(dqkv, dout, D, heads, dcu, dtiles, dnt, max_tiles, c2p ? dkr : NULL,
                                 p2c ? dqr : NULL, didx, max_len, (float)(1.4426950408889634 * scale));
    /* both forms at head size 64: CUDA cores on the fp32 tables, then tensor cores on their hi / lo pairs */
    bf16 *pairs = NULL;
    for (int tc = 0; tc < 1 + (D == 64); tc++) {
        if (tc) {
            const size_t n = (size_t)rows * H;
            CUCHECK(cudaMalloc((void **)&pairs, 4 * n * 2));
            CUCHECK(eng_cu_deberta_split(0, dkr, pairs, pairs + n, n));
            CUCHECK(eng_cu_deberta_split(0, dqr, pairs + 2 * n, pairs + 3 * n, n));
            if (c2p) a.krh = pairs, a.krl = pairs + n;
            if (p2c) a.qrh = pairs + 2 * n, a.qrl = pairs + 3 * n;
            lab_poison(dout, (size_t)T * H * 2);
        }
        CUCHECK(eng_cu_deberta_attention(0, &a));
        CUCHECK(cudaDeviceSynchronize());
        const std::vector<float> got = lab_download_bf16(dout, (size_t)T * H);
        char what[180];
        snprintf(what, sizeof what, "attention%s d=%d heads=%d span=%d buckets=%d c2p=%d p2c=%d seqs=%d tokens=%d",
                 tc ? " (tensor cores)" : "", D, heads, cfg.span, cfg.buckets, c2p, p2c, S, T);
        lab_check(what, got.data(), ref.data(), got.size(), 1e-2f, 1e-2f);
    }
    cudaFree(pairs);
    cudaFree(dqkv); cudaFree(dkr); cudaFree(dqr); cudaFree(didx); cudaFree(dcu); cudaFree(dtiles); cudaFree(dnt);
    cudaFree(dout);
}

/* the tables' GEMM (fp32 A, bf16 B, bias) and the row LayerNorm */
static void run_tables(int R, int H) {
    std::vector<float> af((size_t)R * H), wf, bfv;
    std::vector<uint16_t> wb, bb;
    for (auto &x : af) x = lab_uniform() * 2.f;
    lab_rand_bf16(wf, wb, (size_t)H * H, 0.1f);
    lab_rand_bf16(bfv, bb, (size_t)H, 0.5f);
    std::vector<float> g(H), be(H);
    for (int i = 0; i < H; i++) g[i] = 1.f + 0.1f * lab_uniform(), be[i] = 0.1f * lab_uniform();
    std::vector<float> ln(af);
    for (int r = 0; r < R; r++) {
        double mu = 0, var = 0;
        for (int i = 0; i < H; i++) mu += af[(size_t)r * H + i];
        mu /= H;
        for (int i = 0; i < H; i++) var += (af[(size_t)r * H + i] - mu) * (af[(size_t)r * H + i] - mu);
        const double rs = 1.0 / sqrt(var / H + 1e-7);
        for (int i = 0; i < H; i++) ln[(size_t)r * H + i] = (float)((af[(size_t)r * H + i] - mu) * rs * g[i] + be[i]);
    }
    std::vector<float> ref((size_t)R * H);
    for (int r = 0; r < R; r++)
        for (int n = 0; n < H; n++) {
            double acc = bfv[n];
            for (int k = 0; k < H; k++) acc += (double)ln[(size_t)r * H + k] * wf[(size_t)n * H + k];
            ref[(size_t)r * H + n] = (float)acc;
        }
    float *da = lab_upload(af), *dg = lab_upload(g), *db = lab_upload(be), *dc;
    bf16 *dw = (bf16 *)lab_upload(wb), *dbias = (bf16 *)lab_upload(bb);
    CUCHECK(cudaMalloc((void **)&dc, (size_t)R * H * 4));
    CUCHECK(eng_cu_deberta_ln_rows(0, da, dg, db, R, H, 1e-7f));
    CUCHECK(eng_cu_deberta_gemm_f32_bf16(0, da, H, dw, H, dbias, dc, H, R, H, H));
    std::vector<float> lnd((size_t)R * H), got((size_t)R * H);
    CUCHECK(cudaMemcpy(lnd.data(), da, lnd.size() * 4, cudaMemcpyDeviceToHost));
    CUCHECK(cudaMemcpy(got.data(), dc, got.size() * 4, cudaMemcpyDeviceToHost));
    char what[96];
    snprintf(what, sizeof what, "table layernorm %d x %d", R, H);
    lab_check(what, lnd.data(), ln.data(), lnd.size(), 1e-4f, 1e-4f);
    snprintf(what, sizeof what, "table gemm %d x %d x %d", R, H, H);
    lab_check(what, got.data(), ref.data(), got.size(), 1e-3f, 1e-3f);
    cudaFree(da); cudaFree(dg); cudaFree(db); cudaFree(dc); cudaFree(dw); cudaFree(dbias);
}

static void time_it(void) {
    const int D = 64, heads = 12, H = D * heads, S = 64, L = 256, T = S * L;
    const eng_deberta_cfg cfg = {1, 1, 1, 256, 512, 256, 1, 1, 0, 0, 0};
    std::vector<float> f;
    std::vector<uint16_t> b;
    lab_rand_bf16(f, b, (size_t)T * 3 * H, 1.f);
    std::vector<float> tab((size_t)512 * H);
    for (auto &x : tab) x = lab_uniform();
    std::vector<int> cu(1, 0), idx(2 * 512 - 1);
    for (int s = 0; s < S; s++) cu.push_back(cu.back() + L);
    eng_deberta_index_table(&cfg, 512, idx.data());
    const int max_tiles = eng_cu_attn_max_tiles(T, S);
    std::vector<int32_t> tiles(2 * (size_t)max_tiles);
    std::vector<int> ntv = {eng_cu_attn_tiles(cu.data(), S, tiles.data())};
    bf16 *dqkv = (bf16 *)lab_upload(b), *dout;
    float *dtab = lab_upload(tab);
    int *didx = lab_upload(idx), *dcu = lab_upload(cu), *dtiles = lab_upload(tiles), *dnt = lab_upload(ntv);
    CUCHECK(cudaMalloc((void **)&dout, (size_t)T * H * 2));
    eng_cu_deb_args a = args_for(dqkv, dout, D, heads, dcu, dtiles, dnt, max_tiles, dtab, dtab, didx, 512, 0.1f);
    const size_t n = (size_t)512 * H;
    bf16 *pairs;
    CUCHECK(cudaMalloc((void **)&pairs, 2 * n * 2));
    CUCHECK(eng_cu_deberta_split(0, dtab, pairs, pairs + n, n));
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    for (int tc = 0; tc < 2; tc++) {
        if (tc) a.krh = a.qrh = pairs, a.krl = a.qrl = pairs + n;
        CUCHECK(eng_cu_deberta_attention(0, &a));
        const int reps = 10;
        cudaEventRecord(e0);
        for (int i = 0; i < reps; i++) CUCHECK(eng_cu_deberta_attention(0, &a));
        cudaEventRecord(e1);
        CUCHECK(cudaEventSynchronize(e1));
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        const double us = ms * 1000.0 / reps, fma = (double)S * L * L * heads * D * 4;   /* three dots and P V */
        printf("attention 64 x 256 tokens, 12 heads of 64, c2p + p2c, %s: %.1f us (%.2f T score-FMA/s)\n",
               tc ? "tensor cores" : "CUDA cores", us, fma / us / 1e6);
    }
    cudaFree(pairs);
    cudaFree(dqkv); cudaFree(dout); cudaFree(dtab); cudaFree(didx); cudaFree(dcu); cudaFree(dtiles); cudaFree(dnt);
}

int main() {
    const eng_deberta_cfg v3 = {1, 1, 1, 16, 256, 16, 1, 1, 0, 0, 0};    /* log buckets from distance 9 */
    const eng_deberta_cfg v3b = {1, 1, 1, 256, 512, 256, 1, 1, 0, 0, 0};   /* deberta-v3-base's */
    const eng_deberta_cfg v2 = {1, 1, 1, 0, 32, 32, 0, 0, 1, 0, 0};      /* 32 relative positions, clamped */
    const std::vector<int> mixed = {1, 300, 7, 64, 65, 129, 2};
    for (int D : {32, 64, 128})
        for (int c2p = 0; c2p < 2; c2p++)
            for (int p2c = 0; p2c < 2; p2c++) run(D, 2, v3, c2p, p2c, mixed);
    run(64, 3, v3b, 1, 1, mixed);
    run(64, 2, v2, 1, 1, mixed);
    run(128, 1, v2, 1, 0, {300});
    run(32, 4, v3, 1, 1, {1});
    run_tables(512, 384);
    run_tables(64, 768);
    if (!getenv("LAB_QUICK")) time_it();
    printf("lab_deberta: %s (%d failing checks)\n", lab_failures ? "FAIL" : "PASS", lab_failures);
    return lab_failures ? 1 : 0;
}

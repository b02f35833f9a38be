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
 *                   rows, causal and bidirectional, GQA 16/8 d=128, 4/2 d=32;
 *                   with sliding windows (eng_cpu_attention_gqa_window_ref)
 *                   and at head size 256: eng_cu_attn_win.cu (Gemma 3,
 *                   ModernBERT)
 *   glu_act         Gemma 3's gelu_tanh and ModernBERT's erf GELU gates
 *                   (the CPU engine's formulas); padded rows untouched
 *   glu_norm        eng_cu_glu_norm's four forms against an fp64 row norm:
 *                   Gemma's post-norm + residual + RMSNorm, ModernBERT's
 *                   residual + LayerNorm, the embedding's LayerNorm, the
 *                   residual alone; padded rows zeroed
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

/* ---- the gated MLP's activation: SwiGLU, and Gemma 3's / ModernBERT's GELU gates ---------- */

/* The CPU engine's GELU formulas (eng_cpu_geglu_tanh / _erf in eng_cpu_decoder.c) */
static float ref_gelu(float v, int act) {
    return act == ENG_CU_GLU_GELU_TANH ? 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))
                                       : 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
}

static void check_swiglu(int rows, int I, int time_it, int act = ENG_CU_GLU_SILU) {
    const int bucket = rows + 2;
    std::vector<float> f;
    std::vector<uint16_t> b;
    lab_rand_bf16(f, b, (size_t)bucket * 2 * I, 4.f);
    std::vector<float> ref((size_t)rows * I);
    if (act == ENG_CU_GLU_SILU)
        eng_cpu_swiglu_ref(ref.data(), f.data(), rows, I);
    else
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < I; j++)
                ref[(size_t)r * I + j] = ref_gelu(f[(size_t)r * 2 * I + j], act) * f[(size_t)r * 2 * I + I + j];
    bf16 *dgu = (bf16 *)lab_upload(b), *dout;
    int *dn = lab_upload(std::vector<int>(1, rows));
    CUCHECK(cudaMalloc(&dout, (size_t)bucket * I * 2));
    lab_poison(dout, (size_t)bucket * I * 2);
    CUCHECK(eng_cu_glu_act(0, dgu, dout, bucket, dn, I, act));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> got = lab_download_bf16(dout, (size_t)bucket * I);
    static const char *acts[] = {"swiglu", "geglu (tanh)", "geglu (erf)"};
    char name[96];
    snprintf(name, sizeof name, "%s rows=%d I=%d", acts[act], rows, I);
    lab_check(name, got.data(), ref.data(), (size_t)rows * I, 2e-2f, 1e-2f);
    int untouched = 1;
    for (size_t i = (size_t)rows * I; i < (size_t)bucket * I; i++) untouched &= !(got[i] == got[i]);
    if (!untouched) { printf("  FAIL: %s wrote padded rows\n", acts[act]); lab_failures++; }
    if (time_it) {
        const float ms = lab_time_ms([&] { CUCHECK(eng_cu_glu_act(0, dgu, dout, rows, dn, I, act)); }, 50);
        const double gb = 3.0 * rows * I * 2 / 1e9;
        printf("  bench %s: %.2f us, %.0f GB/s\n", name, ms * 1e3, gb / (ms * 1e-3));
    }
    cudaFree(dgu); cudaFree(dout); cudaFree(dn);
}

/* ---- attention on the fused Qwen3 layout -------------------------------------------- */

/* The fused [T, (nh + 2 nkv) d] rows b, the sequences cu and their tile
 * list on the device, an output, and the attention arguments over them. */
struct attn_dev {
    eng_cu_attn_args a;
    bf16 *qkv, *out;
    int32_t *cu, *tiles;
    int *nt, *work;
};

static attn_dev attn_upload(int nh, int nkv, int d, const std::vector<int32_t> &cu, const std::vector<uint16_t> &b) {
    const int ld = (nh + 2 * nkv) * d, A = nh * d, S = (int)cu.size() - 1, T = cu.back();
    const int max_tiles = eng_cu_attn_max_tiles(T + 5, S + 2);
    std::vector<int32_t> tiles(2 * max_tiles);
    const int nt = eng_cu_attn_tiles(cu.data(), S, tiles.data());
    attn_dev x;
    x.qkv = (bf16 *)lab_upload(b);
    x.cu = lab_upload(cu);
    x.tiles = lab_upload(tiles);
    x.nt = lab_upload(std::vector<int>(1, nt));
    x.work = lab_upload(std::vector<int>(2, 0));
    CUCHECK(cudaMalloc(&x.out, (size_t)T * A * 2));
    lab_poison(x.out, (size_t)T * A * 2);
    eng_cu_attn_args &a = x.a;
    memset(&a, 0, sizeof a);
    a.q = x.qkv; a.k = x.qkv + A; a.v = x.qkv + A + nkv * d;
    a.ldq = a.ldk = a.ldv = ld;
    a.o = x.out; a.ldo = A;
    a.n_heads = nh; a.n_kv_heads = nkv; a.head_dim = d;
    a.cu_seqlens = x.cu; a.tiles = x.tiles; a.n_tiles_dev = x.nt; a.max_tiles = max_tiles;
    a.scale = 1.f / sqrtf((float)d);
    a.work = x.work;
    return x;
}

static void attn_free(attn_dev &x) {
    cudaFree(x.qkv); cudaFree(x.cu); cudaFree(x.tiles); cudaFree(x.nt); cudaFree(x.work); cudaFree(x.out);
}

static void check_attention(int nh, int nkv, int d, int causal, const std::vector<int> &lens, int window = 0) {
    const int ld = (nh + 2 * nkv) * d, A = nh * d;
    std::vector<int32_t> cu(1, 0);
    for (int l : lens) cu.push_back(cu.back() + l);
    const int T = cu.back(), S = (int)lens.size();
    std::vector<float> f;
    std::vector<uint16_t> b;
    lab_rand_bf16(f, b, (size_t)T * ld, 1.f);
    std::vector<float> ref((size_t)T * A);
    if (window) eng_cpu_attention_gqa_window_ref(ref.data(), f.data(), cu.data(), S, nh, nkv, d, causal, window);
    else eng_cpu_attention_gqa_ref(ref.data(), f.data(), cu.data(), S, nh, nkv, d, causal);
    attn_dev x = attn_upload(nh, nkv, d, cu, b);
    x.a.causal = causal;
    x.a.window = window;
    CUCHECK(eng_cu_attention(0, &x.a));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> got = lab_download_bf16(x.out, (size_t)T * A);
    char name[128];
    snprintf(name, sizeof name, "attention (CPU gqa ref) nh=%d kv=%d d=%d %s window=%d tokens=%d", nh, nkv, d,
             causal ? "causal" : "bidir", window, T);
    lab_check(name, got.data(), ref.data(), (size_t)T * A, 1e-2f, 2e-2f);
    attn_free(x);
}

/* The windowed / head-256 kernel's speed (eng_cu_attn_win.cu) at a
 * saturated step's shape (n sequences of len tokens), with and without its
 * window, beside the tuned kernel (eng_cu_attention's default) where that
 * takes the head size: what the sliding layers cost and what the plain
 * form gives up.  TFLOP/s counts the keys each query sees. */
static void time_attention(int nh, int nkv, int d, int len, int n, int window) {
    const int ld = (nh + 2 * nkv) * d;
    std::vector<int32_t> cu(1, 0);
    for (int i = 0; i < n; i++) cu.push_back(cu.back() + len);
    std::vector<float> f;
    std::vector<uint16_t> b;
    lab_rand_bf16(f, b, (size_t)cu.back() * ld, 1.f);
    attn_dev x = attn_upload(nh, nkv, d, cu, b);
    eng_cu_attn_args &a = x.a;
    double seen = 0; /* keys seen, summed over queries */
    for (int q = 0; q < len; q++) {
        const int lo = window ? std::max(0, q - window + 1) : 0, hi = window ? std::min(len, q + window) : len;
        seen += hi - lo;
    }
    const double flop_w = 4.0 * seen * n * d * nh, flop_full = 4.0 * (double)len * len * n * d * nh;
    a.window = window;
    const float ms_w = lab_time_ms([&] { CUCHECK(eng_cu_attention_win(0, &a)); }, 20);
    a.window = 0;
    const float ms_0 = lab_time_ms([&] { CUCHECK(eng_cu_attention_win(0, &a)); }, 20);
    printf("  bench attention (windowed kernel) nh=%d kv=%d d=%d %d x %d tokens: window %d %.1f us (%.0f TFLOP/s), "
           "none %.1f us (%.0f TFLOP/s)", nh, nkv, d, n, len, window, ms_w * 1e3, flop_w / (ms_w * 1e9),
           ms_0 * 1e3, flop_full / (ms_0 * 1e9));
    if (d <= 128) {
        const float ms_t = lab_time_ms([&] { CUCHECK(eng_cu_attention(0, &a)); }, 20);
        printf("; tuned kernel (version %d) %.1f us (%.0f TFLOP/s)", eng_cu_attn_version(d, 0), ms_t * 1e3,
               flop_full / (ms_t * 1e9));
    }
    printf("\n");
    attn_free(x);
}

/* ---- Gemma 3 / ModernBERT: residual + norm (eng_cu_glu_norm) ----------------------------- */

/* y = norm(x) * g (+ b) over one row: RMSNorm, or LayerNorm when ln */
static void ref_norm_row(float *y, const float *x, const float *g, const float *b, int ln, float eps, int H) {
    double mu = 0.0, ss = 0.0;
    if (ln) {
        for (int j = 0; j < H; j++) mu += x[j];
        mu /= H;
    }
    for (int j = 0; j < H; j++) ss += ((double)x[j] - mu) * ((double)x[j] - mu);
    const double rs = 1.0 / sqrt(ss / H + eps);
    for (int j = 0; j < H; j++) y[j] = (float)(((double)x[j] - mu) * rs * g[j] + (b ? b[j] : 0.f));
}

/* form 0: Gemma's x += RMSNorm(y) * post, h = RMSNorm(x) * g; 1: ModernBERT's
 * x += y, h = LayerNorm(x) * g + b; 2: the embedding's x = h = LayerNorm(x)
 * (norm_x); 3: x += y alone (the last layer, no h) */
static void check_glu_norm(int rows, int H, int form) {
    const int bucket = rows + 3;
    const float eps = 1e-6f;
    std::vector<float> xf, yf;
    std::vector<uint16_t> xb, yb;
    lab_rand_bf16(xf, xb, (size_t)bucket * H, 3.f);
    lab_rand_bf16(yf, yb, (size_t)bucket * H, 2.f);
    std::vector<float> post = rand_range(H, 0.5f, 2.f), g = rand_range(H, 0.5f, 1.5f), bb = rand_range(H, -0.3f, 0.3f);
    const int ln = form == 1 || form == 2;
    std::vector<float> rx((size_t)rows * H), rh((size_t)rows * H), t(H);
    for (int r = 0; r < rows; r++) {
        float *x = &rx[(size_t)r * H];
        const float *y = &yf[(size_t)r * H];
        for (int j = 0; j < H; j++) t[j] = y[j];
        if (form == 0) ref_norm_row(t.data(), y, post.data(), NULL, 0, eps, H);
        for (int j = 0; j < H; j++) x[j] = xf[(size_t)r * H + j] + (form == 2 ? 0.f : t[j]);
        if (form != 3) ref_norm_row(&rh[(size_t)r * H], x, g.data(), ln ? bb.data() : NULL, ln, eps, H);
        if (form == 2) memcpy(x, &rh[(size_t)r * H], sizeof(float) * H);
    }
    bf16 *dx = (bf16 *)lab_upload(xb), *dy = (bf16 *)lab_upload(yb), *dh;
    float *dpost = lab_upload(post), *dg = lab_upload(g), *db = lab_upload(bb);
    int *dn = lab_upload(std::vector<int>(1, rows));
    CUCHECK(cudaMalloc(&dh, (size_t)bucket * H * 2));
    lab_poison(dh, (size_t)bucket * H * 2);
    eng_cu_glu_norm_args a;
    memset(&a, 0, sizeof a);
    a.x = dx; a.y = form == 2 ? NULL : dy; a.post = form == 0 ? dpost : NULL;
    a.h = form == 3 ? NULL : dh; a.g = form == 3 ? NULL : dg; a.b = ln ? db : NULL;
    a.ln = ln; a.write_x = 1; a.norm_x = form == 2; a.eps = eps; a.rows = bucket; a.H = H; a.n_rows_dev = dn;
    CUCHECK(eng_cu_glu_norm(0, &a));
    CUCHECK(cudaDeviceSynchronize());
    std::vector<float> gx = lab_download_bf16(dx, (size_t)bucket * H), gh = lab_download_bf16(dh, (size_t)bucket * H);
    static const char *forms[] = {"gemma post-norm + residual + rms", "modernbert residual + layernorm",
                                  "embedding layernorm (x = h)", "residual alone"};
    char name[128];
    snprintf(name, sizeof name, "glu_norm %s rows=%d H=%d: x", forms[form], rows, H);
    lab_check(name, gx.data(), rx.data(), (size_t)rows * H, 3e-2f, 1e-2f);
    if (form != 3) {
        snprintf(name, sizeof name, "glu_norm %s rows=%d H=%d: h", forms[form], rows, H);
        lab_check(name, gh.data(), rh.data(), (size_t)rows * H, 3e-2f, 1e-2f);
    }
    int zeros = 1;
    for (size_t i = (size_t)rows * H; i < (size_t)bucket * H; i++) zeros &= gx[i] == 0.f && (form == 3 || gh[i] == 0.f);
    if (!zeros) { printf("  FAIL: glu_norm left padded rows non-zero\n"); lab_failures++; }
    cudaFree(dx); cudaFree(dy); cudaFree(dh); cudaFree(dpost); cudaFree(dg); cudaFree(db); cudaFree(dn);
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
    /* Gemma 3 / ModernBERT: head size 256 (EmbeddingGemma: 3 heads, 1 KV
     * head), the sliding windows (|q - k| < 257 and < 65, and windows that
     * bind inside one key tile), the GELU gates, the norm kernel's forms */
    check_qk({3, 1, 256, mix, 1e4}, 0);
    check_qk({3, 1, 256, {700}, 1e6}, 0);
    check_qk({12, 12, 64, mix, 1.6e5, 0}, 0);
    const std::vector<int> longmix = {1, 5, 64, 65, 130, 300, 700};
    for (int causal : {0, 1}) {
        check_attention(3, 1, 256, causal, longmix);
        check_attention(3, 1, 256, causal, longmix, 257);
        check_attention(4, 2, 256, causal, {1, 40, 100}, 9);
        check_attention(12, 12, 64, causal, longmix, 65);
        check_attention(4, 2, 64, causal, {1, 17, 200}, 3);
        check_attention(4, 2, 128, causal, {1, 17, 200}, 33);
        check_attention(4, 2, 32, causal, {1, 17, 200}, 1);
    }
    for (int act : {ENG_CU_GLU_GELU_TANH, ENG_CU_GLU_GELU_ERF})
        for (int r : {1, 7, 300}) check_swiglu(r, 1152, 0, act);
    for (int form = 0; form < 4; form++)
        for (int H : {64, 768, 1000}) check_glu_norm(form == 3 ? 5 : 7, H, form);
    check_glu_norm(1, 768, 0);
    if (getenv("LAB_QUICK")) return lab_finish("lab_qwen3");
    check_qk({16, 8, 128, std::vector<int>(128, 128), 1e6}, 1);
    /* EmbeddingGemma's attention (3 heads / 1 KV of 256, window 257) and
     * ModernBERT-base's (12 of 64, window 65), saturated-step shapes */
    time_attention(3, 1, 256, 128, 512, 257);
    time_attention(3, 1, 256, 512, 128, 257);
    time_attention(12, 12, 64, 128, 512, 65);
    time_attention(12, 12, 64, 512, 128, 65);
    time_attention(16, 8, 128, 512, 128, 257);
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

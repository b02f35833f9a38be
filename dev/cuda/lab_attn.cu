/* lab_attn: variable-length attention (eng_cu_attn.cu: v1, v2;
 * eng_cu_attn_v3.cu: v3, persistent, optionally with Qwen3's q/k norm +
 * rotary fused) against an fp64 CPU reference on the same bf16-rounded
 * inputs.
 *
 * Versions 4-9 are variants of v2 (4-7) and of its one-pass cousin v8 (8, 9);
 * eng_cu_attn.cu's header says what each changes and how it measured.
 * Cases: head_dim 32 / 64 / 128; bidirectional and causal; grouped-query
 * (4 q heads per kv head); packed batches mixing lengths 1, 2, 17, 63, 64,
 * 65, 200 and 512 (tile edges on both sides), Q/K/V read with the stride of
 * a fused QKV buffer as the engine does.  Output is bf16, P is rounded to
 * bf16 before P.V (as in FlashAttention), so the tolerance is atol 1e-2,
 * rtol 2e-2 on outputs of magnitude <= 1.  Timing: 64 x 512 and 256 x 128
 * tokens (LAB_ATTN_ONLY10=1: version 10 alone), TFLOP/s counting 4*L^2*D per head per sequence (halved if
 * causal).  The fused q/k cases (qkn: v2, as the one-query chain runs it,
 * and v3) give the reference Q/K after the same per-head RMSNorm + rotary
 * as eng_cu_qk_norm_rope (fp32, one bf16 rounding), and also time
 * "qk_norm_rope kernel + v3" against "v3 fused" on the same data.  The
 * rope cases (qkn 2: rope_only, Qwen2 / Mistral / Llama) do the same with
 * the rotary alone, in attention and in the chain's attention + O.
 * Also the one-query chain's attention + O projection kernel
 * (eng_cu_chain_attn.cu, check_attn_o) and the QKV GEMM's attention tail
 * (eng_cu_chain_gemm.cu, check_qkv_att).  The rel cases add MPNet's
 * relative position bias (v2; eng_relpos.h's buckets in the reference).
 */
#include "lab.h"
#include "eng_relpos.h"

/* qkn: 1 Qwen3's q/k norm + rotary fused, 2 the rotary alone fused
 * (rope_only: Qwen2, Mistral, Llama) */
typedef struct acase { int d, heads, kv_heads, causal; std::vector<int> lens; int qkn; } acase;

/* run_case with MPNet's relative position bias (eng_cu_attn_args.rel),
 * weights in [-3, 3] so that a wrong bucket or a missing bias fails the
 * check */
static int g_rel = 0;

/* the relative bias's table length: longer than any case's sequence, as
 * the engine's (max_positions) */
#define REL_MAX 600

/* Random bias weights [32, heads] in [-3, 3] (a fixed generator from
 * seed) for the reference, and the table the kernels read (weights /
 * scale, eng_relpos_expand) */
static void rel_tables(int heads, int D, uint32_t seed, std::vector<float> &relw, std::vector<float> &reltab) {
    uint32_t x = seed;
    relw.resize((size_t)ENG_RELPOS_BUCKETS * heads);
    for (float &w : relw) {
        x = x * 1664525u + 1013904223u;
        w = -3.f + 6.f * (float)(x >> 8) / 16777216.f;
    }
    reltab.resize((size_t)heads * eng_relpos_span(REL_MAX));
    eng_relpos_expand(reltab.data(), relw.data(), heads, REL_MAX, sqrtf((float)D));
}

/* the tile list run_case builds: 0 sequence order (eng_cu_attn_tiles), 1
 * heaviest first (eng_cu_attn_tiles_heavy_first, the engine's default) */
static int g_heavy = 0;

/* lengths uniform in lo..hi (a fixed generator) until `tokens` are filled,
 * the last one cut to fit -- the bench's random16-512 pattern */
static std::vector<int> random_lens(int tokens, int lo, int hi) {
    std::vector<int> v;
    uint32_t x = 12345u;
    for (int t = 0; t < tokens;) {
        x = x * 1664525u + 1013904223u;
        int l = lo + (int)((x >> 8) % (uint32_t)(hi - lo + 1));
        if (l > tokens - t) l = tokens - t;
        v.push_back(l);
        t += l;
    }
    return v;
}

/* CPU mirror of eng_cu_qk_norm_rope on one head of one row (D values, in
 * place, bf16-rounded results): RMSNorm * w, then rotate_half by (c, s);
 * w NULL: the rotary alone. */
static void ref_qk_head(float *x, int D, const float *w, const float *cs, float eps) {
    const int half = D / 2;
    float ss = 0.f;
    for (int j = 0; j < D; j++) ss += x[j] * x[j];
    const float r = w ? 1.f / sqrtf(ss / (float)D + eps) : 1.f;
    for (int j = 0; j < half; j++) {
        const float v1 = x[j] * r * (w ? w[j] : 1.f), v2 = x[j + half] * r * (w ? w[j + half] : 1.f);
        const float c = cs[2 * j], sn = cs[2 * j + 1];
        x[j] = bfr(v1 * c - v2 * sn);
        x[j + half] = bfr(v2 * c + v1 * sn);
    }
}


/* round_p: P rounded to bf16 before P.V (the normaliser from the unrounded
 * values), as the kernels compute it -- for check_attn_o, whose projection
 * over K up to 2048 columns magnifies that rounding past its tolerance */
static void ref_attn(const std::vector<float> &qkv, int ld, int H, const acase &c,
                     const std::vector<int> &cu, std::vector<float> &out, int ldo, size_t n_seqs,
                     bool round_p = false, const float *relw = nullptr) {
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
                    p[j] = s_ * scale + (relw ? (double)relw[eng_relpos_bucket(j - i) * c.heads + h] : 0.0);
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j < kend; j++) {
                    p[j] = exp(p[j] - mx);
                    sum += p[j];
                    if (round_p) p[j] = bfr((float)p[j]);
                }
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

/* Q and K of f transformed in place by the q/k norm (weights qw, kw) and
 * the rotary table rope, as eng_cu_qk_norm_rope does (ref_qk_head) */
static void ref_qkn_apply(const acase &c, const std::vector<int> &cu, std::vector<float> &f, int ld, float qk_eps,
                          const std::vector<float> &qw, const std::vector<float> &kw, const std::vector<float> &rope) {
    const int D = c.d, Hq = c.heads * D, S = (int)cu.size() - 1;
    for (int s_ = 0; s_ < S; s_++)
        for (int t = cu[s_]; t < cu[s_ + 1]; t++) {
            const float *cs = &rope[(size_t)(t - cu[s_]) * D];
            const bool nrm = c.qkn != 2;
            for (int h = 0; h < c.heads; h++)
                ref_qk_head(&f[(size_t)t * ld + h * D], D, nrm ? qw.data() : nullptr, cs, qk_eps);
            for (int h = 0; h < c.kv_heads; h++)
                ref_qk_head(&f[(size_t)t * ld + Hq + h * D], D, nrm ? kw.data() : nullptr, cs, qk_eps);
        }
}

/* q/k fusion cases: weights near 1 (qw, kw) and a rotary table of the
 * real formula (rope, rope_rows positions) */
static void ref_qkn_tables(int D, int rope_rows, std::vector<float> &qw, std::vector<float> &kw,
                           std::vector<float> &rope) {
    for (int j = 0; j < D; j++) { qw[j] = 1.f + 0.5f * lab_uniform(); kw[j] = 1.f + 0.5f * lab_uniform(); }
    for (int p = 0; p < rope_rows; p++)
        for (int j = 0; j < D / 2; j++) {
            const double th = p * pow(1e6, -2.0 * j / D);
            rope[(size_t)p * D + 2 * j] = (float)cos(th);
            rope[(size_t)p * D + 2 * j + 1] = (float)sin(th);
        }
}

/* the tables, then f's Q and K columns transformed in place: the
 * reference attends over the transformed Q/K (the GPU gets the raw values) */
static void ref_qkn_setup(const acase &c, const std::vector<int> &cu, std::vector<float> &f, int ld, int rope_rows,
                          float qk_eps, std::vector<float> &qw, std::vector<float> &kw, std::vector<float> &rope) {
    ref_qkn_tables(c.d, rope_rows, qw, kw, rope);
    ref_qkn_apply(c, cu, f, ld, qk_eps, qw, kw, rope);
}

/* The engine's row [Q (heads*D) | K (kv*D) | V (kv*D)] as ref_attn reads
 * it: K at column Hq, V at 2*Hq. */
static std::vector<float> ref_layout(const std::vector<float> &f, int T, int ld, int Hq, int Hkv) {
    std::vector<float> fr((size_t)T * 3 * Hq, 0.f);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < ld; i++) {
            const int col = i < Hq ? i : i < Hq + Hkv ? Hq + (i - Hq) : 2 * Hq + (i - Hq - Hkv);
            fr[(size_t)t * 3 * Hq + col] = f[(size_t)t * ld + i];
        }
    return fr;
}

/* The attention arguments of a case over a QKV buffer laid out as the
 * engine's (row stride ld), cu_seqlens on the device; tiles and the
 * output are the caller's. */
static eng_cu_attn_args lab_attn_args(const acase &c, bf16 *dqkv, int ld, const int32_t *dcu) {
    const int D = c.d, Hq = c.heads * D, Hkv = c.kv_heads * D;
    eng_cu_attn_args a;
    memset(&a, 0, sizeof a);
    a.q = dqkv; a.k = dqkv + Hq; a.v = dqkv + Hq + Hkv;
    a.ldq = a.ldk = a.ldv = ld;
    a.n_heads = c.heads; a.n_kv_heads = c.kv_heads; a.head_dim = D;
    a.cu_seqlens = dcu;
    a.scale = 1.f / sqrtf((float)D);
    a.causal = c.causal;
    return a;
}

/* The q/k norm weights and rotary table uploaded and named in a (the
 * caller frees *dq, *dk, *dr); rope_only: the norm weights uploaded but
 * not named, a.rope_only set (the rotary alone). */
static void lab_attn_qkn(eng_cu_attn_args &a, const std::vector<float> &qw, const std::vector<float> &kw,
                         const std::vector<float> &rope, int rope_rows, float qk_eps, float **dq, float **dk,
                         float **dr, bool rope_only = false) {
    *dq = lab_upload(qw); *dk = lab_upload(kw); *dr = lab_upload(rope);
    a.q_norm = rope_only ? NULL : *dq; a.k_norm = rope_only ? NULL : *dk;
    a.rope = *dr; a.rope_rows = rope_rows; a.qk_eps = qk_eps; a.rope_only = rope_only;
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
    /* q/k fusion: weights near 1, a rotary table of the real formula; the
     * reference attends over the transformed Q/K (f), the GPU gets raw b */
    const float qk_eps = 1e-6f;
    const int rope_rows = 1024;
    std::vector<float> qw(D), kw(D), rope((size_t)rope_rows * D);
    if (c.qkn) ref_qkn_setup(c, cu, f, ld, rope_rows, qk_eps, qw, kw, rope);
    const std::vector<float> fr = ref_layout(f, T, ld, Hq, Hkv);
    std::vector<float> ref((size_t)T * Hq);
    /* timing cases check their first two sequences only (the fp64
     * reference of a 32k-token batch would take minutes) */
    const int ref_seqs = time_it ? 2 : S;
    std::vector<float> relw, reltab;
    if (g_rel) rel_tables(c.heads, D, 777u, relw, reltab);
    ref_attn(fr, 3 * Hq, Hq, c, cu, ref, Hq, ref_seqs, false, g_rel ? relw.data() : nullptr);

    const int max_tiles = eng_cu_attn_max_tiles(T + 5, S + 2); /* a bucket bigger than the batch */
    std::vector<int32_t> tiles(2 * max_tiles);
    const int nt = g_heavy ? eng_cu_attn_tiles_heavy_first(cu.data(), S, c.causal, tiles.data())
                           : eng_cu_attn_tiles(cu.data(), S, tiles.data());
    bf16 *dqkv = (bf16 *)lab_upload(b), *dout;
    int32_t *dcu = lab_upload(cu), *dtiles = lab_upload(tiles);
    int *dnt = lab_upload(std::vector<int>(1, nt));
    CUCHECK(cudaMalloc(&dout, (size_t)T * Hq * 2));
    lab_poison(dout, (size_t)T * Hq * 2);
    eng_cu_attn_args a = lab_attn_args(c, dqkv, ld, dcu);
    a.o = dout; a.ldo = Hq;
    a.tiles = dtiles; a.n_tiles_dev = dnt; a.max_tiles = max_tiles;
    int *dwork = lab_upload(std::vector<int>(2, 0));
    a.work = dwork; /* used where eng_cu_attn_wg_dyn = 1 only */
    float *dqw = NULL, *dkw = NULL, *drope = NULL, *drel = NULL;
    if (c.qkn) lab_attn_qkn(a, qw, kw, rope, rope_rows, qk_eps, &dqw, &dkw, &drope, c.qkn == 2);
    if (g_rel) {
        drel = lab_upload(reltab);
        a.rel = drel;
        a.rel_max = REL_MAX;
    }
    /* 4, 5: v2 with more resident blocks (key tiles of 32 / 64) below
     * d = 128; at d = 128 v7 with three blocks an SM (5: Q read from
     * shared memory); 6: one-dimensional grid, head fastest; 7: 6 with
     * two K/V stages at d = 128 (below 128 it is 6); 8: key tiles of 128,
     * split at the softmax; 9: Q read from shared memory, more blocks an
     * SM (v7's tiles at d = 128, v2's below); 10 (where wgmma runs,
     * the default there): both products as wgmma (eng_cu_attn_wg.cu;
     * sm_90) in each form of eng_cu_attn_wg_stages (one or two K / V
     * stages, persistent), each checked and timed; a launch error or a
     * failed check is reported without ending the lab */
    std::vector<int> versions = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    if (eng_cu_gemm_wg_available()) versions.push_back(10);
    if (c.qkn) versions = {2, 3, 6, 7, 10}; /* v2's: the one-query chain's (Qwen3); 10 falls back to v2 */
    if (g_rel) { /* v2 and v10 add the bias; any other version asked for runs v2 */
        versions = {2, 9};
        if (eng_cu_gemm_wg_available()) versions.push_back(10);
    }
    if (time_it && !c.qkn && getenv("LAB_ATTN_ONLY10") && eng_cu_gemm_wg_available())
        versions = {10}; /* quicker timing runs */
    std::vector<float> got3;
    for (int version : versions) {
        a.version = version;
        char name[128];
        snprintf(name, sizeof name, "attn v%d%s d=%d h=%d kv=%d %s seqs=%d tokens=%d%s", version,
                 c.qkn == 2 ? " rope" : c.qkn ? " qkn" : g_rel ? " rel" : "", D, c.heads, c.kv_heads, c.causal ? "causal" : "bidir", S, T,
                 g_heavy ? " heavy" : "");
        lab_poison(dout, (size_t)T * Hq * 2);
        if (version == 10 && !c.qkn) { /* in each form; a failure must not end the lab */
            /* forms: st = 1 / 2 K-V stages, 3 persistent (eng_cu_attn_wgp.cu);
             * waves: the grid cap (0: a block a tile of the bound); maxx /
             * maxb: the grid capped at 2 query tiles / 3 persistent blocks,
             * so every block walks many items (checked, not timed); wide:
             * the bound of the bench's 65536-token step bucket (seqs =
             * tokens / 32), most of whose blocks find no tile -- what the
             * cap is for (timed only where time_it) */
            /* dyn: the dynamic schedule (items from a counter; with maxx,
             * two blocks take them all), its counter checked back at 0;
             * rev: the tile list walked last to first (serpentine order,
             * eng_cu_order.c: the launch after eng_cu_order_begin(1)),
             * checked, not timed; hf: the static head-fastest walk
             * (eng_cu_attn_wg_hf) */
            struct wg_form { int st, waves, maxx, maxb, wide, dyn, rev, hf; };
            static const wg_form forms[] = {
                {1, 0, 0, 0, 0, 0, 0, 0}, {2, 0, 0, 0, 0, 0, 0, 0}, {3, 0, 0, 0, 0, 0, 0, 0}, {3, 0, 0, 3, 0, 0, 0, 0}, {1, 0, 2, 0, 0, 0, 0, 0},
                {2, 0, 2, 0, 0, 0, 0, 0}, {1, 1, 0, 0, 0, 0, 0, 0}, {2, 2, 0, 0, 0, 0, 0, 0},
                {1, 0, 0, 0, 0, 1, 0, 0}, {2, 0, 0, 0, 0, 1, 0, 0}, {1, 0, 2, 0, 0, 1, 0, 0}, {2, 0, 2, 0, 0, 1, 0, 0},
                {1, 0, 0, 0, 0, 0, 1, 0}, {2, 0, 0, 0, 0, 0, 1, 0}, {2, 2, 0, 0, 0, 0, 1, 0}, {1, 0, 2, 0, 0, 0, 1, 0},
                {2, 0, 0, 0, 0, 1, 1, 0}, {1, 0, 2, 0, 0, 1, 1, 0},
                {2, 0, 0, 0, 0, 0, 0, 1}, {1, 2, 0, 0, 0, 0, 0, 1}, {2, 0, 2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 0, 1, 1},
                {1, 0, 2, 0, 0, 0, 1, 1},
                {1, 0, 0, 0, 1, 0, 0, 0}, {1, 1, 0, 0, 1, 0, 0, 0}, {1, 2, 0, 0, 1, 0, 0, 0}, {1, 4, 0, 0, 1, 0, 0, 0},
                {2, 0, 0, 0, 1, 0, 0, 0}, {2, 1, 0, 0, 1, 0, 0, 0}, {2, 2, 0, 0, 1, 0, 0, 0}, {2, 4, 0, 0, 1, 0, 0, 0}, {3, 0, 0, 0, 1, 0, 0, 0},
                {1, 0, 0, 0, 1, 1, 0, 0}, {2, 0, 0, 0, 1, 1, 0, 0}, {1, 2, 0, 0, 1, 1, 0, 0}, {2, 2, 0, 0, 1, 1, 0, 0},
                {2, 4, 0, 0, 1, 0, 0, 1}, {1, 4, 0, 0, 1, 0, 0, 1},
            };
            const int wide_tiles = eng_cu_attn_max_tiles(T, T / 32 > S + 2 ? T / 32 : S + 2);
            for (const wg_form &fm : forms) {
                if (fm.wide && !time_it) continue;
                eng_cu_attn_wg_stages = fm.st;
                eng_cu_attn_wg_waves = fm.waves;
                eng_cu_attn_wg_max_x = fm.maxx;
                eng_cu_attn_wgp_max_blocks = fm.maxb;
                eng_cu_attn_wg_dyn = fm.dyn;
                eng_cu_attn_wg_hf = fm.hf;
                a.max_tiles = fm.wide ? wide_tiles : max_tiles;
                char nm[200], cap[32] = "";
                if (fm.maxb) snprintf(cap, sizeof cap, " grid %d", fm.maxb);
                else if (fm.maxx) snprintf(cap, sizeof cap, fm.dyn ? " grid %d" : " x %d", fm.maxx);
                snprintf(nm, sizeof nm, "%s st%d%s%s%s%s%s%s", name, fm.st,
                         fm.waves ? (fm.waves == 1 ? " waves 1" : fm.waves == 2 ? " waves 2" : " waves 4") : "",
                         cap, fm.wide ? " wide" : "",
                         fm.dyn ? " dyn" : "", fm.rev ? " rev" : "", fm.hf ? " hf" : "");
                lab_poison(dout, (size_t)T * Hq * 2);
                eng_cu_order_begin(fm.rev);
                cudaError_t e = eng_cu_attention(0, &a);
                eng_cu_order_begin(fm.rev);
                if (e == cudaSuccess && fm.dyn) e = eng_cu_attention(0, &a); /* the counter must be back at 0 */
                eng_cu_order_begin(0);
                const cudaError_t e2 = e == cudaSuccess ? cudaDeviceSynchronize() : e;
                if (fm.dyn && e2 == cudaSuccess) {
                    std::vector<int> w(2, -1);
                    CUCHECK(cudaMemcpy(w.data(), dwork, 2 * sizeof(int), cudaMemcpyDeviceToHost));
                    if (w[0] || w[1]) {
                        printf("FAIL: %s: work counter left at %d, %d\n", nm, w[0], w[1]);
                        lab_failures++;
                    }
                }
                eng_cu_attn_wgp_max_blocks = 0;
                eng_cu_attn_wg_max_x = 0;
                if (e2 != cudaSuccess) {
                    printf("FAIL: %s: %s\n", nm, cudaGetErrorString(e2));
                    lab_failures++;
                    if (e2 != cudaErrorInvalidValue) exit(3); /* a fault leaves the context unusable */
                    continue;
                }
                std::vector<float> g10 = lab_download_bf16(dout, (size_t)T * Hq);
                if (lab_check(nm, g10.data(), ref.data(), (size_t)cu[ref_seqs] * Hq, 1e-2f, 2e-2f) || fm.maxx ||
                    fm.maxb || fm.rev)
                    continue;
                if (time_it) {
                    double fl = 0;
                    for (int l : c.lens) fl += 4.0 * l * l * D * c.heads * (c.causal ? 0.5 : 1.0);
                    const float ms = lab_time_ms([&] { CUCHECK(eng_cu_attention(0, &a)); }, 20);
                    printf("  bench %s: %.1f us, %.1f TFLOP/s\n", nm, ms * 1e3, fl / (ms * 1e-3) / 1e12);
                }
            }
            a.max_tiles = max_tiles;
            eng_cu_attn_wg_dyn = -1;
            eng_cu_attn_wg_hf = -1;
            eng_cu_attn_wg_waves = -1;
            eng_cu_attn_wg_stages = 0;
            continue;
        }
        CUCHECK(eng_cu_attention(0, &a));
        CUCHECK(cudaDeviceSynchronize());
        std::vector<float> got = lab_download_bf16(dout, (size_t)T * Hq);
        if (version == 3) got3 = got;
        lab_check(name, got.data(), ref.data(), (size_t)cu[ref_seqs] * Hq, 1e-2f, 2e-2f);
        if (time_it) {
            double fl = 0;
            for (int l : c.lens) fl += 4.0 * l * l * D * c.heads * (c.causal ? 0.5 : 1.0);
            const float ms = lab_time_ms([&] { CUCHECK(eng_cu_attention(0, &a)); }, 20);
            printf("  bench %s: %.1f us, %.1f TFLOP/s\n", name, ms * 1e3, fl / (ms * 1e-3) / 1e12);
        }
    }
    if (c.qkn) { /* the unfused pair on a copy: qk_norm_rope in place, then v3 */
        bf16 *dcopy;
        CUCHECK(cudaMalloc(&dcopy, (size_t)T * ld * 2));
        eng_cu_qk_args q;
        memset(&q, 0, sizeof q);
        q.qkv = dcopy; q.ld = ld; q.n_heads = c.heads; q.n_kv_heads = c.kv_heads; q.head_dim = D;
        q.q_norm = c.qkn == 2 ? NULL : dqw; q.k_norm = c.qkn == 2 ? NULL : dkw; /* 2: rotary alone */
        q.eps = qk_eps; q.rope = drope; q.rope_rows = rope_rows;
        q.cu_seqlens = dcu; q.n_seqs_dev = lab_upload(std::vector<int>(1, S));
        q.rows = T; q.n_rows_dev = lab_upload(std::vector<int>(1, T));
        eng_cu_attn_args u = a;
        u.q = dcopy; u.k = dcopy + Hq; u.v = dcopy + Hq + Hkv;
        u.q_norm = u.k_norm = u.rope = NULL;
        u.rope_only = 0;
        CUCHECK(cudaMemcpy(dcopy, dqkv, (size_t)T * ld * 2, cudaMemcpyDeviceToDevice));
        lab_poison(dout, (size_t)T * Hq * 2);
        CUCHECK(eng_cu_qk_norm_rope(0, &q));
        CUCHECK(eng_cu_attention(0, &u));
        CUCHECK(cudaDeviceSynchronize());
        std::vector<float> got = lab_download_bf16(dout, (size_t)T * Hq);
        size_t differ = 0;
        for (size_t i = 0; i < (size_t)cu[ref_seqs] * Hq; i++) differ += got[i] != got3[i];
        printf("  %s d=%d %s tokens=%d: fused vs qk_norm_rope + v3: %zu of %zu outputs differ in bits\n",
               c.qkn == 2 ? "rope" : "qkn", D, c.causal ? "causal" : "bidir", T, differ, (size_t)cu[ref_seqs] * Hq);
        if (time_it) {
            const float ms_u = lab_time_ms([&] {
                CUCHECK(eng_cu_qk_norm_rope(0, &q));
                CUCHECK(eng_cu_attention(0, &u));
            }, 20);
            const float ms_f = lab_time_ms([&] { CUCHECK(eng_cu_attention(0, &a)); }, 20);
            printf("  bench qkn d=%d h=%d kv=%d %s tokens=%d: qk_norm_rope + v3 %.1f us, fused %.1f us\n", D,
                   c.heads, c.kv_heads, c.causal ? "causal" : "bidir", T, ms_u * 1e3, ms_f * 1e3);
        }
        cudaFree(dcopy); cudaFree((void *)q.n_seqs_dev); cudaFree((void *)q.n_rows_dev);
    }
    cudaFree(dqw); cudaFree(dkw); cudaFree(drope); cudaFree(drel);
    cudaFree(dqkv); cudaFree(dcu); cudaFree(dtiles); cudaFree(dnt); cudaFree(dout); cudaFree(dwork);
}

/* The chain's attention + O projection in one kernel
 * (eng_cu_chain_attn.cu): Y = attention(qkv) Wo^T + b + R for a bucket of
 * M <= 16 rows holding the sequences `lens` (their total may be below M),
 * against ref_attn (q/k norm + rotary applied to the reference's Q/K when
 * c.qkn; P rounded to bf16 as the kernel rounds it: with the reference's
 * exact P the first GPU run saw errors of 0.02-0.06 at K = 2048, the
 * attention's own 2^-9 rounding magnified by the projection) with the
 * attention output rounded to bf16, as the kernel feeds it
 * to the projection, and an fp64 projection.  Rows past the real count
 * hold NaN in the QKV buffer: the kernel must zero-fill, not read, them
 * (their outputs are bias + residual).  Tolerance as lab_gemm's: atol
 * 3e-2, rtol 1e-2.  lnres: the residual as the LayerNorm of its raw rows
 * (eng_cu_chain_res, the encoders' folded chain), whose (mu, rs) the
 * lab gives in fp32; padding rows then add no residual. */
static void check_attn_o(const acase &c, int M, int N, int lnres = 0) {
    const int D = c.d, Hq = c.heads * D, Hkv = c.kv_heads * D, ld = Hq + 2 * Hkv;
    std::vector<int> cu(1, 0);
    for (int l : c.lens) cu.push_back(cu.back() + l);
    const int T = cu.back(), S = (int)c.lens.size();
    std::vector<float> f, wf, bfv, rf;
    std::vector<uint16_t> b, wb, bb, rb;
    lab_rand_bf16(f, b, (size_t)M * ld, 1.f);
    lab_rand_bf16(wf, wb, (size_t)N * Hq, 1.f);
    lab_rand_bf16(bfv, bb, (size_t)N, 1.f);
    lab_rand_bf16(rf, rb, (size_t)M * N, 1.f);
    for (size_t i = (size_t)T * ld; i < (size_t)M * ld; i++) b[i] = 0x7fc0; /* NaN: padding rows */
    std::vector<float> rg, rbe;
    std::vector<uint16_t> tmp;
    std::vector<float2> rst((size_t)M, make_float2(0.f, 0.f));
    if (lnres) {
        lab_rand_bf16(rg, tmp, (size_t)N, 1.f);
        lab_rand_bf16(rbe, tmp, (size_t)N, 0.5f);
        for (float &v : rg) v += 1.f;
        for (int m = 0; m < T; m++) {
            double mu = 0, var = 0;
            for (int n = 0; n < N; n++) mu += rf[(size_t)m * N + n];
            mu /= N;
            for (int n = 0; n < N; n++) var += (rf[(size_t)m * N + n] - mu) * (rf[(size_t)m * N + n] - mu);
            rst[m] = make_float2((float)mu, (float)(1.0 / sqrt(var / N + 1e-12)));
        }
    }
    const float qk_eps = 1e-6f;
    const int rope_rows = 64;
    std::vector<float> qw(D), kw(D), rope((size_t)rope_rows * D);
    if (c.qkn) ref_qkn_setup(c, cu, f, ld, rope_rows, qk_eps, qw, kw, rope);
    const std::vector<float> fr = ref_layout(f, T, ld, Hq, Hkv);
    std::vector<float> ctx((size_t)M * Hq, 0.f);
    /* g_rel: MPNet's relative bias in the attention (table as run_case's) */
    std::vector<float> relw, reltab;
    if (g_rel) rel_tables(c.heads, D, 4242u, relw, reltab);
    ref_attn(fr, 3 * Hq, Hq, c, cu, ctx, Hq, S, true, g_rel ? relw.data() : nullptr);
    for (float &v : ctx) v = bfr(v);
    std::vector<float> ref((size_t)M * N);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            const double r = (double)rf[(size_t)m * N + n];
            double acc = bfv[n] + (!lnres ? r : m < T ? (r - rst[m].x) * rst[m].y * rg[n] + rbe[n] : 0.0);
            for (int k = 0; k < Hq; k++) acc += (double)ctx[(size_t)m * Hq + k] * wf[(size_t)n * Hq + k];
            ref[(size_t)m * N + n] = (float)acc;
        }
    bf16 *dqkv = (bf16 *)lab_upload(b), *dw = (bf16 *)lab_upload(wb), *db = (bf16 *)lab_upload(bb),
         *dr = (bf16 *)lab_upload(rb), *dy;
    int32_t *dcu = lab_upload(cu);
    int *dnr = lab_upload(std::vector<int>{T}), *dns = lab_upload(std::vector<int>{S});
    CUCHECK(cudaMalloc(&dy, (size_t)M * N * 2));
    lab_poison(dy, (size_t)M * N * 2);
    eng_cu_attn_args a = lab_attn_args(c, dqkv, ld, dcu);
    float *dqw = NULL, *dkw = NULL, *drope = NULL, *drel = NULL;
    if (c.qkn) lab_attn_qkn(a, qw, kw, rope, rope_rows, qk_eps, &dqw, &dkw, &drope, c.qkn == 2);
    if (g_rel) {
        drel = lab_upload(reltab);
        a.rel = drel;
        a.rel_max = REL_MAX;
    }
    char name[128];
    snprintf(name, sizeof name, "attn+O d=%d heads %d/%d %s%s M=%d (%d seqs, %d real) N=%d%s%s", D, c.heads,
             c.kv_heads, c.causal ? "causal" : "bidir", c.qkn == 2 ? " rope" : c.qkn ? " qkn" : g_rel ? " rel" : "", M, S, T, N, lnres ? " ln-res" : "",
             eng_cu_chain_attn_o_one_head(&a) ? " 1 head/warp" : "");
    float *drg = lnres ? lab_upload(rg) : NULL, *drb = lnres ? lab_upload(rbe) : NULL;
    float2 *drst = lnres ? lab_upload(rst) : NULL;
    const eng_cu_chain_res res = {drst, drg, drb, dnr};
    if (!eng_cu_chain_attn_o_ok(&a, M, N)) {
        printf("  %-60s FAIL (not accepted)\n", name);
        lab_failures++;
    } else {
        CUCHECK(eng_cu_chain_attn_o(0, &a, dnr, dns, dw, db, dr, dy, M, N, lnres ? &res : NULL));
        CUCHECK(cudaDeviceSynchronize());
        std::vector<float> got = lab_download_bf16(dy, ref.size());
        lab_check(name, got.data(), ref.data(), got.size(), 3e-2f, 1e-2f);
    }
    /* the split launch (eng_cu_chain_ao: Qwen3's shapes, no bias, the
     * plain residual): the same reference less the bias, rows past the
     * real count exactly zero, and the same bits over three launches */
    if (!lnres && !g_rel && eng_cu_chain_ao_ok(&a, M, N)) {
        bf16 *img = NULL, *dy2 = NULL;
        float *part = NULL;
        unsigned long long *bar = NULL;
        CUCHECK(cudaMalloc(&img, eng_cu_chain_ao_img_bytes(N, c.heads)));
        CUCHECK(cudaMalloc(&part, eng_cu_chain_ao_part_bytes(N, c.heads)));
        CUCHECK(cudaMalloc(&bar, 8));
        CUCHECK(cudaMemset(bar, 0, 8));
        CUCHECK(cudaMalloc(&dy2, (size_t)M * N * 2));
        CUCHECK(eng_cu_chain_ao_pack(0, dw, img, N, c.heads));
        std::vector<float> ref2(ref);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                float &v = ref2[(size_t)m * N + n];
                v = m < T ? v - bfv[n] : 0.f;
            }
        std::vector<float> first;
        int same = 1;
        for (int rep = 0; rep < 3; rep++) {
            lab_poison(dy2, (size_t)M * N * 2);
            CUCHECK(eng_cu_chain_ao(0, &a, dnr, dns, img, dr, dy2, part, bar, M, N, rep == 2));
            CUCHECK(cudaDeviceSynchronize());
            std::vector<float> got = lab_download_bf16(dy2, ref2.size());
            if (rep == 0) first = got;
            else same &= !memcmp(got.data(), first.data(), got.size() * sizeof(float));
        }
        char nm2[160];
        snprintf(nm2, sizeof nm2, "%s split by head", name);
        lab_check(nm2, first.data(), ref2.data(), first.size(), 3e-2f, 1e-2f);
        size_t nz = 0;
        for (size_t i = (size_t)T * N; i < first.size(); i++) nz += first[i] != 0.f;
        snprintf(nm2, sizeof nm2, "  split: padding rows zero, 3 launches same bits");
        const float okv = !nz && same ? 1.f : 0.f, want = 1.f;
        lab_check(nm2, &okv, &want, 1, 0.f, 0.f);
        cudaFree(img); cudaFree(part); cudaFree(bar); cudaFree(dy2);
    }
    cudaFree(dqkv); cudaFree(dw); cudaFree(db); cudaFree(dr); cudaFree(dy); cudaFree(dcu); cudaFree(dnr);
    cudaFree(dns); cudaFree(dqw); cudaFree(dkw); cudaFree(drope); cudaFree(drg); cudaFree(drb); cudaFree(drst);
    cudaFree(drel);
}

/* The QKV chain GEMM with the attention tail (eng_cu_chain_att,
 * eng_cu_chain_gemm.cu): X raw [M][1024], W [N][1024] with the RMS fold
 * (each output row scaled by rsqrt(mean(x^2) + eps)), Y = Q|K|V, and the
 * tail's attention(Y) in ctx.  Y against an fp64 product (lab_gemm's
 * tolerance); ctx against ref_qkn_setup + ref_attn (P rounded) run on the
 * Y the GPU stored, so the check isolates the tail, with run_case's
 * tolerance; ctx rows past the real count must be exactly zero.  Three
 * launches -- plain, the late trigger, the padded weight copy (NaN in its
 * padding, W itself then NaN) -- ctx poisoned before each, and the
 * group counters must be back at zero after each (the next launch relies
 * on it). */
static void check_qkv_att(const acase &c, int M) {
    const int D = c.d, Hq = c.heads * D, Hkv = c.kv_heads * D, N = Hq + 2 * Hkv, K = 1024;
    const float eps = 1e-6f, qk_eps = 1e-6f;
    std::vector<int> cu(1, 0);
    for (int l : c.lens) cu.push_back(cu.back() + l);
    const int T = cu.back(), S = (int)c.lens.size();
    std::vector<float> xf, wf;
    std::vector<uint16_t> xb, wb;
    lab_rand_bf16(xf, xb, (size_t)M * K, 1.f);
    lab_rand_bf16(wf, wb, (size_t)N * K, 0.05f);
    std::vector<float> yref((size_t)M * N, 0.f);
    for (int m = 0; m < T; m++) {
        double ss = 0;
        for (int k = 0; k < K; k++) ss += (double)xf[(size_t)m * K + k] * xf[(size_t)m * K + k];
        const double rs = 1.0 / sqrt(ss / K + eps);
        for (int n = 0; n < N; n++) {
            double acc = 0;
            for (int k = 0; k < K; k++) acc += (double)xf[(size_t)m * K + k] * wf[(size_t)n * K + k];
            yref[(size_t)m * N + n] = (float)(acc * rs);
        }
    }
    const int rope_rows = 64;
    std::vector<float> qw(D), kw(D), rope((size_t)rope_rows * D);
    bf16 *dx = (bf16 *)lab_upload(xb), *dw = (bf16 *)lab_upload(wb), *dy, *dctx, *dwp = NULL;
    int32_t *dcu = lab_upload(cu);
    int *dnr = lab_upload(std::vector<int>{T}), *dns = lab_upload(std::vector<int>{S});
    unsigned *dcnt;
    CUCHECK(cudaMalloc(&dy, (size_t)M * N * 2));
    CUCHECK(cudaMalloc(&dctx, (size_t)M * Hq * 2));
    CUCHECK(cudaMalloc(&dcnt, (size_t)c.kv_heads * sizeof(unsigned)));
    CUCHECK(cudaMemset(dcnt, 0, (size_t)c.kv_heads * sizeof(unsigned)));
    eng_cu_chain_att at;
    memset(&at, 0, sizeof at);
    at.a = lab_attn_args(c, dy, N, dcu);
    at.a.o = dctx; at.a.ldo = Hq;
    at.n_seqs_dev = dns;
    at.counters = dcnt;
    float *dqw = NULL, *dkw = NULL, *drope = NULL;
    ref_qkn_tables(D, rope_rows, qw, kw, rope); /* Q/K transformed later, on the GPU's Y (ref_qkn_apply) */
    lab_attn_qkn(at.a, qw, kw, rope, rope_rows, qk_eps, &dqw, &dkw, &drope);
    const eng_cu_chain_norm nm = {NULL, NULL, eps, dnr, NULL, 1, NULL, NULL};
    for (int run = 0; run < 3; run++) {
        char name[160];
        snprintf(name, sizeof name, "qkv+att d=%d heads %d/%d %s M=%d (%d seqs, %d real)%s", D, c.heads, c.kv_heads,
                 c.causal ? "causal" : "bidir", M, S, T, run == 0 ? "" : run == 1 ? " late" : " padw");
        if (!eng_cu_chain_att_ok(&at.a, M, N, K)) {
            printf("  %-60s FAIL (not accepted)\n", name);
            lab_failures++;
            break;
        }
        if (run == 2) { /* the padded copy, as lab_gemm's lab_wp makes it; W itself NaN from here */
            const int pad = eng_cu_chain_wpad(K);
            const size_t ld = (size_t)(K + pad) * 2;
            CUCHECK(cudaMalloc(&dwp, (size_t)N * ld));
            lab_poison(dwp, (size_t)N * ld);
            CUCHECK(cudaMemcpy2D(dwp, ld, dw, (size_t)K * 2, (size_t)K * 2, N, cudaMemcpyDeviceToDevice));
            lab_poison(dw, (size_t)N * K * 2);
        }
        lab_poison(dy, (size_t)M * N * 2);
        lab_poison(dctx, (size_t)M * Hq * 2);
        eng_cu_chain_att_next = &at;
        eng_cu_chain_late = run == 1;
        const cudaError_t ce = eng_cu_gemm_chain(0, dx, dw, NULL, NULL, dy, M, N, K, ENG_CU_EPI_NONE, &nm, NULL, 0,
                                                 NULL, dwp);
        eng_cu_chain_att_next = NULL;
        eng_cu_chain_late = 0;
        CUCHECK(ce);
        CUCHECK(cudaDeviceSynchronize());
        std::vector<float> y = lab_download_bf16(dy, (size_t)M * N);
        char yname[180];
        snprintf(yname, sizeof yname, "%s: Y", name);
        lab_check(yname, y.data(), yref.data(), y.size(), 3e-2f, 1e-2f);
        std::vector<float> f = y;
        ref_qkn_apply(c, cu, f, N, qk_eps, qw, kw, rope); /* Q/K of f in place, with the GPU's tables */
        const std::vector<float> fr = ref_layout(f, T, N, Hq, Hkv);
        std::vector<float> ctx((size_t)M * Hq, 0.f);
        ref_attn(fr, 3 * Hq, Hq, c, cu, ctx, Hq, S, true);
        std::vector<float> got = lab_download_bf16(dctx, ctx.size());
        snprintf(yname, sizeof yname, "%s: attention", name);
        lab_check(yname, got.data(), ctx.data(), got.size(), 1e-2f, 2e-2f);
        size_t nz = 0;
        for (size_t i = (size_t)T * Hq; i < got.size(); i++) nz += got[i] != 0.f;
        std::vector<unsigned> cnt((size_t)c.kv_heads);
        CUCHECK(cudaMemcpy(cnt.data(), dcnt, cnt.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
        size_t left = 0;
        for (unsigned v : cnt) left += v != 0;
        const int pass = nz == 0 && left == 0;
        printf("  %-60s %s (%zu padding values not 0, %zu counters not 0)\n", "  padding rows zero, counters reset",
               pass ? "ok" : "FAIL", nz, left);
        if (!pass) lab_failures++;
    }
    cudaFree(dx); cudaFree(dw); cudaFree(dwp); cudaFree(dy); cudaFree(dctx); cudaFree(dcu); cudaFree(dnr);
    cudaFree(dns); cudaFree(dcnt); cudaFree(dqw); cudaFree(dkw); cudaFree(drope);
}

/* What the attention tail refuses (the forward then runs the attention
 * node): more than 16 rows, head size 64, a K other than 1024, a
 * launch without the RMS fold -- eng_cu_gemm_chain then returns
 * cudaErrorNotSupported and writes nothing. */
static void check_qkv_att_refusals(void) {
    const acase c = {128, 16, 8, 1, {16}, 1};
    const int D = 128, Hq = 16 * D, N = Hq + 2 * 8 * D;
    bf16 *dy, *dctx, *dx, *dw;
    float *dtab;
    unsigned *dcnt;
    int *dn;
    CUCHECK(cudaMalloc(&dy, (size_t)16 * N * 2));
    CUCHECK(cudaMalloc(&dx, (size_t)16 * 1024 * 2));
    CUCHECK(cudaMalloc(&dw, (size_t)N * 1024 * 2));
    CUCHECK(cudaMemset(dx, 0, (size_t)16 * 1024 * 2));
    CUCHECK(cudaMemset(dw, 0, (size_t)N * 1024 * 2));
    CUCHECK(cudaMalloc(&dctx, (size_t)16 * Hq * 2));
    CUCHECK(cudaMalloc(&dtab, (size_t)64 * D * 4));
    CUCHECK(cudaMalloc(&dcnt, 64));
    CUCHECK(cudaMalloc(&dn, 64));
    CUCHECK(cudaMemset(dn, 0, 64));
    eng_cu_chain_att at;
    memset(&at, 0, sizeof at);
    at.a = lab_attn_args(c, dy, N, (const int32_t *)dn);
    at.a.o = dctx; at.a.ldo = Hq;
    at.a.q_norm = at.a.k_norm = at.a.rope = dtab; at.a.rope_rows = 64; at.a.qk_eps = 1e-6f;
    at.n_seqs_dev = dn;
    at.counters = dcnt;
    const int ok = eng_cu_chain_att_ok(&at.a, 16, N, 1024), no17 = !eng_cu_chain_att_ok(&at.a, 17, N, 1024),
              nok = !eng_cu_chain_att_ok(&at.a, 16, N, 2048), non = !eng_cu_chain_att_ok(&at.a, 16, N + 32, 1024);
    eng_cu_attn_args b = at.a;
    b.head_dim = 64; b.n_heads = 32; b.n_kv_heads = 16;
    const int no64 = !eng_cu_chain_att_ok(&b, 16, N, 1024);
    b = at.a;
    b.q_norm = NULL;
    const int noqn = !eng_cu_chain_att_ok(&b, 16, N, 1024);
    /* a launch without the fold: refused before anything runs */
    lab_poison(dy, (size_t)16 * N * 2);
    eng_cu_chain_att_next = &at;
    const cudaError_t ce = eng_cu_gemm_chain(0, dx, dw, NULL, NULL, dy, 16, N, 1024, ENG_CU_EPI_NONE, NULL);
    eng_cu_chain_att_next = NULL;
    CUCHECK(cudaDeviceSynchronize());
    std::vector<uint16_t> h((size_t)16 * N);
    CUCHECK(cudaMemcpy(h.data(), dy, h.size() * 2, cudaMemcpyDeviceToHost));
    size_t touched = 0;
    for (uint16_t v : h) touched += v != 0xffff;
    const int pass = ok && no17 && nok && non && no64 && noqn && ce == cudaErrorNotSupported && touched == 0;
    printf("  %-60s %s\n", "qkv+att refuses what it is not built for", pass ? "ok" : "FAIL");
    if (!pass) lab_failures++;
    cudaFree(dy); cudaFree(dx); cudaFree(dw); cudaFree(dctx); cudaFree(dtab); cudaFree(dcnt); cudaFree(dn);
}

/* What eng_cu_chain_attn_o refuses (the forward then runs attention and
 * the GEMM apart): more than 16 rows, a head size or K it is not built
 * for, N not a multiple of 16. */
static void check_attn_o_refusals(void) {
    eng_cu_attn_args a;
    memset(&a, 0, sizeof a);
    static bf16 dummy[64] __attribute__((aligned(16)));
    a.q = a.k = a.v = dummy; a.ldq = a.ldk = a.ldv = 3 * 384;
    a.n_heads = a.n_kv_heads = 12; a.head_dim = 32;
    const int ok = eng_cu_chain_attn_o_ok(&a, 16, 384), no17 = !eng_cu_chain_attn_o_ok(&a, 17, 384),
              non16 = !eng_cu_chain_attn_o_ok(&a, 16, 392);
    a.n_heads = a.n_kv_heads = 10; /* K = 320: no split */
    const int nok = !eng_cu_chain_attn_o_ok(&a, 16, 384);
    a.n_heads = 12; a.n_kv_heads = 5;
    const int badgrp = !eng_cu_chain_attn_o_ok(&a, 16, 384);
    /* MPNet's relative bias: bidirectional only */
    static float rel_dummy[4];
    a.n_heads = a.n_kv_heads = 12;
    a.rel = rel_dummy; a.rel_max = 1;
    const int rel_ok = eng_cu_chain_attn_o_ok(&a, 16, 384);
    a.causal = 1;
    const int rel_causal = !eng_cu_chain_attn_o_ok(&a, 16, 384);
    const int pass = ok && no17 && non16 && nok && badgrp && rel_ok && rel_causal;
    printf("  %-60s %s\n", "attn+O refuses what it is not built for", pass ? "ok" : "FAIL");
    if (!pass) lab_failures++;
}

/* Which shapes take one head a warp (eng_cu_chain_attn_o_one_head): the
 * 12-head encoders at head size 32 and 64 while eng_cu_chain_attn_wh is
 * set; not 16 heads of 64 (no such kernel: two heads a warp), not GQA, not
 * with the switch off. */
static void check_attn_o_split(void) {
    eng_cu_attn_args a;
    memset(&a, 0, sizeof a);
    const int saved = eng_cu_chain_attn_wh;
    eng_cu_chain_attn_wh = 1;
    a.n_heads = a.n_kv_heads = 12; a.head_dim = 32;
    const int minilm = eng_cu_chain_attn_o_one_head(&a);
    a.head_dim = 64;
    const int bert = eng_cu_chain_attn_o_one_head(&a);
    a.n_heads = a.n_kv_heads = 16;
    const int large = !eng_cu_chain_attn_o_one_head(&a);
    a.n_heads = 16; a.n_kv_heads = 8; a.head_dim = 128;
    const int gqa = !eng_cu_chain_attn_o_one_head(&a);
    eng_cu_chain_attn_wh = 0;
    a.n_heads = a.n_kv_heads = 12; a.head_dim = 32;
    const int off = !eng_cu_chain_attn_o_one_head(&a);
    eng_cu_chain_attn_wh = saved;
    const int pass = minilm && bert && large && gqa && off;
    printf("  %-60s %s\n", "attn+O one head a warp exactly where built", pass ? "ok" : "FAIL");
    if (!pass) lab_failures++;
}

int main(void) {
    if (getenv("LAB_ATTN_AO_ONLY")) { /* the split attention + O's checks alone (memcheck runs) */
        check_attn_o({128, 16, 8, 1, {16}, 1}, 16, 1024);
        check_attn_o({128, 16, 8, 1, {7, 9}, 1}, 16, 1024);
        check_attn_o({128, 16, 8, 1, {3}, 1}, 3, 1024);
        check_attn_o({128, 16, 8, 0, {6, 8}, 1}, 16, 1024);
        check_attn_o({128, 16, 8, 1, {1}, 1}, 1, 1024);
        return lab_finish("lab_attn");
    }
    if (getenv("LAB_ATTN_QKV_ONLY")) { /* the QKV attention tail's checks alone (memcheck runs) */
        check_qkv_att({128, 16, 8, 1, {7, 5}, 1}, 16);
        check_qkv_att({128, 16, 8, 0, {6, 1, 8}, 1}, 16);
        check_qkv_att_refusals();
        return lab_finish("lab_attn");
    }
    const std::vector<int> mix = {1, 17, 64, 65, 2, 200, 63, 512, 5};
    for (int d : {32, 64, 128})
        for (int causal : {0, 1}) {
            run_case({d, d == 128 ? 8 : 4, d == 128 ? 2 : 4, causal, mix, 0}, 0);
            run_case({d, 2, 2, causal, {1}, 0}, 0);
            run_case({d, 2, 2, causal, {129}, 0}, 0);
            run_case({d, 4, 2, causal, mix, 1}, 0);
            run_case({d, 16, 8, causal, {16}, 1}, 0); /* a one-query chain's shape */
            run_case({d, 16, 8, causal, {7, 40}, 1}, 0);
            /* the rotary alone (Qwen2, Mistral, Llama: rope_only) */
            run_case({d, 4, 2, causal, mix, 2}, 0);
            run_case({d, 16, 8, causal, {16}, 2}, 0);
            run_case({d, 16, 8, causal, {7, 40}, 2}, 0);
            g_rel = 1; /* MPNet's relative bias (512 tokens: every bucket) */
            run_case({d, 4, 4, causal, mix, 0}, 0);
            run_case({d, 2, 2, causal, {1}, 0}, 0);
            g_rel = 0;
        }
    /* the chain's attention + O projection: all-MiniLM, BERT-base,
     * BERT-large-like and Qwen3-0.6B shapes; one sequence filling the
     * bucket, several with padding rows, a single token -- first with two
     * heads a warp, then the encoders' shapes again with one head a warp
     * (eng_cu_chain_attn_wh, the default) */
    eng_cu_chain_attn_wh = 0;
    check_attn_o({32, 12, 12, 0, {16}, 0}, 16, 384);
    check_attn_o({32, 12, 12, 0, {5, 1, 7}, 0}, 16, 384);
    check_attn_o({32, 12, 12, 0, {1}, 0}, 1, 384);
    check_attn_o({32, 12, 12, 1, {9, 4}, 0}, 16, 384);
    check_attn_o({64, 12, 12, 0, {16}, 0}, 16, 768);
    check_attn_o({64, 12, 12, 0, {3, 9}, 0}, 16, 768);
    check_attn_o({64, 12, 12, 0, {1}, 0}, 16, 768);
    check_attn_o({64, 16, 16, 0, {11}, 0}, 16, 1024);
    check_attn_o({128, 16, 8, 1, {16}, 1}, 16, 1024);
    check_attn_o({128, 16, 8, 1, {7, 9}, 1}, 16, 1024);
    check_attn_o({128, 16, 8, 1, {4}, 1}, 16, 1024);
    check_attn_o({128, 16, 8, 0, {6, 8}, 1}, 16, 1024);
    check_attn_o({128, 16, 8, 1, {13}, 0}, 16, 1024);
    check_attn_o({128, 16, 8, 1, {3}, 1}, 3, 1024);
    check_attn_o({128, 16, 8, 1, {1}, 1}, 1, 1024);
    check_attn_o({128, 16, 8, 1, {16}, 2}, 16, 1024); /* the rotary alone (rope_only) */
    check_attn_o({128, 16, 8, 1, {7, 9}, 2}, 16, 1024);
    check_attn_o({128, 16, 8, 0, {6, 8}, 2}, 16, 1024);
    /* with the LayerNorm residual (MiniLM's folded chain) */
    check_attn_o({32, 12, 12, 0, {16}, 0}, 16, 384, 1);
    check_attn_o({32, 12, 12, 0, {5, 1, 7}, 0}, 16, 384, 1);
    check_attn_o({32, 12, 12, 0, {1}, 0}, 1, 384, 1);
    check_attn_o({64, 12, 12, 0, {3, 9}, 0}, 16, 768, 1);
    eng_cu_chain_attn_wh = 1;
    check_attn_o({32, 12, 12, 0, {16}, 0}, 16, 384);
    check_attn_o({32, 12, 12, 1, {9, 4}, 0}, 16, 384);
    check_attn_o({32, 12, 12, 0, {5, 1, 7}, 0}, 16, 384, 1);
    check_attn_o({32, 12, 12, 0, {1}, 0}, 1, 384, 1);
    check_attn_o({64, 12, 12, 0, {16}, 0}, 16, 768);
    check_attn_o({64, 12, 12, 0, {3, 9}, 0}, 16, 768, 1);
    check_attn_o({64, 12, 12, 1, {1}, 0}, 16, 768, 1);
    /* with MPNet's relative bias (BERT-base-like and MiniLM-like shapes,
     * the folded chain's LayerNorm residual too) */
    g_rel = 1;
    check_attn_o({64, 12, 12, 0, {16}, 0}, 16, 768);
    check_attn_o({64, 12, 12, 0, {3, 9}, 0}, 16, 768, 1);
    check_attn_o({64, 12, 12, 0, {1}, 0}, 16, 768, 1);
    check_attn_o({32, 12, 12, 0, {5, 1, 7}, 0}, 16, 384, 1);
    g_rel = 0;
    check_attn_o_refusals();
    check_attn_o_split();
    /* the QKV GEMM's attention tail (Qwen3-0.6B's shape): one sequence
     * filling the bucket, several with padding rows, one token,
     * bidirectional */
    check_qkv_att({128, 16, 8, 1, {16}, 1}, 16);
    check_qkv_att({128, 16, 8, 1, {7, 5}, 1}, 16);
    check_qkv_att({128, 16, 8, 1, {1}, 1}, 16);
    check_qkv_att({128, 16, 8, 1, {3}, 1}, 3);
    check_qkv_att({128, 16, 8, 0, {6, 1, 8}, 1}, 16);
    check_qkv_att_refusals();
    /* every version on the heaviest-first tile list (the list itself:
     * tests/unit/test_cu_attn_tiles.c) */
    g_heavy = 1;
    for (int d : {32, 64, 128})
        for (int causal : {0, 1}) run_case({d, d == 128 ? 8 : 4, d == 128 ? 2 : 4, causal, mix, 0}, 0);
    g_heavy = 0;
    if (getenv("LAB_QUICK")) return lab_finish("lab_attn");
    run_case({64, 12, 12, 0, std::vector<int>(64, 512), 0}, 1);
    run_case({64, 12, 12, 0, std::vector<int>(256, 128), 0}, 1);
    run_case({32, 12, 12, 0, std::vector<int>(64, 512), 0}, 1);
    run_case({128, 16, 8, 1, std::vector<int>(16, 1024), 0}, 1);
    run_case({64, 12, 12, 0, std::vector<int>(2048, 16), 0}, 1);
    g_rel = 1; /* MPNet-base: the bias's cost against v2 above */
    run_case({64, 12, 12, 0, std::vector<int>(64, 512), 0}, 1);
    g_rel = 0;
    /* the saturated step of bench/profile_gpu.sh: 65536 tokens of 128 */
    run_case({32, 12, 12, 0, std::vector<int>(512, 128), 0}, 1);
    run_case({64, 12, 12, 0, std::vector<int>(512, 128), 0}, 1);
    run_case({128, 16, 8, 1, std::vector<int>(512, 128), 0}, 1);
    run_case({128, 16, 8, 1, std::vector<int>(512, 128), 1}, 1);
    /* unequal tiles (long causal sequences, the bench's random 16..512),
     * in sequence order and heaviest first */
    for (int heavy : {0, 1}) {
        g_heavy = heavy;
        run_case({128, 16, 8, 1, std::vector<int>(16, 1024), 0}, 1);
        run_case({128, 16, 8, 1, std::vector<int>(512, 128), 0}, 1);
        run_case({128, 16, 8, 1, random_lens(65536, 16, 512), 0}, 1);
        run_case({64, 12, 12, 0, random_lens(65536, 16, 512), 0}, 1);
        run_case({32, 12, 12, 0, random_lens(65536, 16, 512), 0}, 1);
    }
    g_heavy = 0;
    return lab_finish("lab_attn");
}

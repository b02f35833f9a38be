/* lab_mega: the persistent small-batch kernel (src/engine/cuda/eng_cu_mega.cu)
 * on a harness model, against the graph of kernels on the same device
 * weights and inputs, and its time, stage by stage.
 *
 *   POSY_CUDA_MEGA=1 lab_mega HARNESS_DIR [NAME]   (POSY_CUDA_MEGA_PROFILE=1 for stages)
 *
 * The graph of kernels is the reference here (itself checked against CPU
 * references kernel by kernel in the other labs and against transformers
 * end to end); both paths run the same model object, so the only
 * difference is the forward.  For several batches of <= 64 tokens (one
 * sequence of 1 / 16 / 64 tokens, three sequences of mixed lengths; every
 * second sequence with a pool skip of (len - 1) / 2, include_prompt false):
 *   - min cosine per sequence >= 0.9999 and the max abs difference;
 *   - the kernel run three times gives identical bits;
 *   - time per forward: back-to-back launches, and graph replays, from
 *     CUDA events (mean of 200);
 *   - with the profile on: per stage kind (QKV, ATT, O, UP, DOWN), the
 *     slowest block's work and the barrier's own latency, mean over layers.
 * Exit 0 only if every check passes.
 */
#include "lab.h"
#include "eng_cu_model.h"
#include "gpu_harness.h"


static void fill_input(const eng_cu_model &m, int T, int S, const int *lens, int ns, uint64_t seed,
                       std::vector<int32_t> &in, int *n_tok) {
    const eng_cu_in_layout L = eng_cu_in_layout_for(T, S);
    in.assign(L.total, 0);
    int32_t *cu = in.data() + L.cu;
    cu[0] = 0;
    for (int s = 0; s < ns; s++) cu[s + 1] = cu[s] + lens[s];
    for (int s = 0; s < ns; s++) in[L.skip + s] = s % 2 ? (lens[s] - 1) / 2 : 0;   /* pool skips, both paths */
    const int n = cu[ns];
    in[L.meta + ENG_CU_META_TOKENS] = n;
    in[L.meta + ENG_CU_META_SEQS] = ns;
    in[L.meta + ENG_CU_META_TILES] = eng_cu_attn_tiles(cu, ns, in.data() + L.tiles);
    for (int s = 0; s < ns; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            in[L.ids + t] = (int)((seed >> 33) % (uint64_t)m.vocab);
            in[L.pos + t] = t - cu[s] + m.pos_off;
            in[L.type + t] = m.type_vocab > 1 ? (int)((seed >> 20) & 1) : 0;
        }
    *n_tok = n;
}

static void run(eng_cu_model &m, cudaStream_t st, int T, int S, int mega, std::vector<float> &out, int ns) {
    posy_err err;
    cudaError_t ce;
    if (mega) ce = eng_cu_mega_forward(&m, st, T, S);
    else {
        const int keep = m.mega_ok;
        m.mega_ok = 0;
        ce = eng_cu_model_forward(&m, st, T, S, &err) ? cudaErrorUnknown : cudaSuccess;
        m.mega_ok = keep;
    }
    CUCHECK(ce);
    CUCHECK(cudaStreamSynchronize(st));
    out.resize((size_t)ns * m.H);
    CUCHECK(cudaMemcpy(out.data(), m.pooled, out.size() * 4, cudaMemcpyDeviceToHost));
}

static double time_us(eng_cu_model &m, cudaStream_t st, int T, int S, int mega, int graph) {
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    const int N = 200;
    posy_err err;
    auto fwd = [&]() {
        if (mega) CUCHECK(eng_cu_mega_forward(&m, st, T, S));
        else {
            const int keep = m.mega_ok;
            m.mega_ok = 0;
            if (eng_cu_model_forward(&m, st, T, S, &err)) { printf("FAIL: forward: %s\n", err.msg); exit(1); }
            m.mega_ok = keep;
        }
    };
    cudaGraphExec_t ge = NULL;
    if (graph) {
        cudaGraph_t g;
        CUCHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
        fwd();
        CUCHECK(cudaStreamEndCapture(st, &g));
        CUCHECK(cudaGraphInstantiate(&ge, g, 0));
        cudaGraphDestroy(g);
    }
    for (int i = 0; i < 5; i++) { if (graph) CUCHECK(cudaGraphLaunch(ge, st)); else fwd(); }
    cudaEventRecord(a, st);
    for (int i = 0; i < N; i++) { if (graph) CUCHECK(cudaGraphLaunch(ge, st)); else fwd(); }
    cudaEventRecord(b, st);
    CUCHECK(cudaEventSynchronize(b));
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    if (ge) cudaGraphExecDestroy(ge);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms * 1e3 / N;
}

static void profile(eng_cu_model &m, cudaStream_t st, int T, int S, const char *label) {
    if (!m.mega_prof) return;
    const int PS = 6, NBAR = 5 * m.L, NP = 2 + PS * NBAR;
    /* per stage kind: slowest block's work (last arrival - previous last
     * departure), barrier (last departure - last arrival), departure skew
     * (last - block 0), block 0's GEMM phases */
    double work[5] = {0}, bar[5] = {0}, skew[5] = {0}, ph_w[5] = {0}, ph_m[5] = {0}, ph_e[5] = {0}, total = 0;
    const int R = 20;
    std::vector<unsigned long long> p(NP);
    for (int r = 0; r < R; r++) {
        CUCHECK(cudaMemset(m.mega_prof, 0, NP * 8));
        CUCHECK(eng_cu_mega_forward(&m, st, T, S));
        CUCHECK(cudaStreamSynchronize(st));
        CUCHECK(cudaMemcpy(p.data(), m.mega_prof, NP * 8, cudaMemcpyDeviceToHost));
        unsigned long long prev = p[0], prev0 = p[0];
        for (int b = 0; b < NBAR; b++) {
            const unsigned long long *q = &p[2 + PS * b];
            const double k = 1.0 / m.L / R;
            work[b % 5] += (double)(q[0] - prev) * k;
            bar[b % 5] += (double)(q[2] - q[0]) * k;
            skew[b % 5] += (double)(q[2] - q[1]) * k;
            if (q[3]) {
                ph_w[b % 5] += (double)(q[3] - prev0) * k;
                if (q[4]) ph_m[b % 5] += (double)(q[4] - q[3]) * k;
                if (q[5]) ph_e[b % 5] += (double)(q[5] - q[4]) * k;
            }
            prev = q[2];
            prev0 = q[1];
        }
        total += (double)(p[1] - p[0]) / R;
    }
    const char *names[5] = {"LN+QKV", "ATT", "O+res", "LN+UP", "DOWN+res"};
    printf("  profile %s: kernel body %.1f us (start to last block's end); per layer, us:\n", label, total / 1e3);
    for (int k = 0; k < 5; k++)
        printf("    %-9s work %.2f  barrier %.2f (departure skew %.2f) | block 0: to weights-ready %.2f, "
               "products %.2f, epilogue %.2f\n",
               names[k], work[k] / 1e3, bar[k] / 1e3, skew[k] / 1e3, ph_w[k] / 1e3, ph_m[k] / 1e3, ph_e[k] / 1e3);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s HARNESS_DIR [NAME]\n", argv[0]); return 2; }
    const char *name = argc > 2 ? argv[2] : argv[1];
    posy_engine e;
    memset(&e, 0, sizeof e);
    gh_load_model(&e, argv[1]);
    eng_cu_model m;
    posy_err err;
    if (eng_cu_model_open(&m, &e.cfg, &e.bert, NULL, 4096, 256, &err)) { printf("FAIL: open: %s\n", err.msg); return 1; }
    if (!m.mega_ok) { printf("FAIL: %s: the small-batch kernel does not take this model\n", name); return 1; }
    printf("lab_mega %s: H %d, I %d, %d layers, %d heads; grid %d blocks (%s), %zu B shared memory, %d tiles/block "
           "max, <= %d tokens, %d weight buffer(s)\n",
           name, m.H, m.I, m.L, m.heads, m.mega_grid, m.mega_cluster ? "one cluster" : "cooperative", m.mega_smem,
           m.mega_nt, m.mega_maxt, m.mega_nbuf);
    cudaStream_t st;
    CUCHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    struct { const char *label; int lens[4]; int ns; } cases[] = {
        {"1 x 1", {1}, 1}, {"1 x 16", {16}, 1}, {"1 x 64", {64}, 1}, {"3 seqs 7+23+30", {7, 23, 30}, 3},
        {"4 x 16", {16, 16, 16, 16}, 4}, {"1 x 9", {9}, 1}, {"3 seqs 3+5+8", {3, 5, 8}, 3}};
    for (auto &c : cases) {
        std::vector<int32_t> in;
        int n = 0;
        int T = 0;
        for (int s = 0; s < c.ns; s++) T += c.lens[s];
        T = (T + 15) & ~15;
        if (!eng_cu_mega_usable(&m, T)) { /* one cluster takes <= 16 tokens */
            printf("skip %-16s bucket %2d: more tokens than this form of the kernel takes (%d)\n", c.label, T,
                   m.mega_maxt);
            continue;
        }
        fill_input(m, T, T, c.lens, c.ns, 77 + T, in, &n);
        CUCHECK(cudaMemcpy(m.d_in, in.data(), in.size() * 4, cudaMemcpyHostToDevice));
        std::vector<float> ref, got, again;
        run(m, st, T, T, 0, ref, c.ns);
        run(m, st, T, T, 1, got, c.ns);
        double minc = 1, maxd = 0;
        for (int s = 0; s < c.ns; s++) {
            double dot = 0, na = 0, nb = 0;
            for (int j = 0; j < m.H; j++) {
                const double x = got[(size_t)s * m.H + j], y = ref[(size_t)s * m.H + j];
                dot += x * y; na += x * x; nb += y * y;
                maxd = fmax(maxd, fabs(x - y));
            }
            minc = fmin(minc, dot / sqrt(na * nb + 1e-30));
        }
        int same = 1;
        for (int r = 0; r < 2; r++) {
            run(m, st, T, T, 1, again, c.ns);
            same &= !memcmp(again.data(), got.data(), got.size() * 4);
        }
        const int ok = minc >= 0.9999 && same;
        if (!ok) lab_failures++;
        const double t_mega = time_us(m, st, T, T, 1, 1), t_graph = time_us(m, st, T, T, 0, 1);
        const double t_mega_ll = time_us(m, st, T, T, 1, 0);
        printf("%s %-16s bucket %2d: vs graph of kernels min cosine %.6f, max abs %.2e, repeat %s; "
               "%s | small kernel %.1f us (graph replay), %.1f us (plain launches) | graph of kernels %.1f us\n",
               ok ? "ok  " : "FAIL", c.label, T, minc, maxd, same ? "bit-identical" : "DIFFERS",
               name, t_mega, t_mega_ll, t_graph);
        profile(m, st, T, T, c.label);
    }
    eng_cu_model_close(&m);
    printf("lab_mega %s: %s\n", name, lab_failures ? "FAIL" : "PASS");
    return lab_failures ? 1 : 0;
}

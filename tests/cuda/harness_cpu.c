/* harness_cpu: the CPU engine (fp32) on a GPU-harness model folder
 * (tests/cuda/gpu_harness.h), every sequence of SEQS_BIN run alone.
 *
 *   harness_cpu MODEL_DIR SEQS_BIN OUT_BIN
 *
 * OUT_BIN gets n x hidden float32.  It lets the harness path -- the folder
 * a Python script writes, the C reader, the mode flags in dims.txt -- be
 * checked without a GPU against transformers (tests/cuda/e2e_qwen3.py
 * --cpu-check), so that a GPU run has only the kernels left to prove.
 */
#include "gpu_harness.h"

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s MODEL_DIR SEQS_BIN OUT_BIN\n", argv[0]); return 2; }
    posy_engine *e = (posy_engine *)calloc(1, sizeof *e);
    gh_load_model(e, argv[1]);
    gh_seqs s = gh_load_seqs(argv[2]);
    int longest = 1;
    for (int i = 0; i < s.n; i++) longest = s.lens[i] > longest ? s.lens[i] : longest;
    e->opts.device = POSY_DEVICE_CPU;
    e->opts.max_batch_tokens = longest;
    e->opts.max_batch_seqs = 1;
    e->ops = &eng_cpu_backend;
    posy_err err;
    posy_err_clear(&err);
    if (e->ops->open(e, &err)) { fprintf(stderr, "open: %s\n", err.msg); return 1; }
    const int H = e->cfg.info.hidden;
    float *out = (float *)malloc((size_t)s.n * H * sizeof(float));
    int failed = 0;
    for (int i = 0; i < s.n; i++) {
        gh_batch b;
        gh_batch_make(&b, &s, &i, 1, H, (uint64_t)i);
        if (gh_run_sync(e, &b) != 0) failed++;
        memcpy(out + (size_t)i * H, b.out, (size_t)H * sizeof(float));
        gh_batch_free(&b);
    }
    FILE *f = fopen(argv[3], "wb");
    if (!f || fwrite(out, sizeof(float), (size_t)s.n * H, f) != (size_t)s.n * H) {
        fprintf(stderr, "write %s failed\n", argv[3]);
        return 2;
    }
    fclose(f);
    printf("harness_cpu: %d sequences, %d failed\n", s.n, failed);
    e->ops->close(e);
    return failed ? 1 : 0;
}

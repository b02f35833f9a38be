/* eng_batch_budget: the token budget of one batch when --max-batch-tokens
 * is not given, per device and model.
 *
 * Why it depends on both: on the CPU a batch of 16384 tokens already keeps
 * every core busy, and bigger ones only add latency.  On the GPU a small
 * model is far from saturated at 16384 tokens: all-MiniLM-L6 ran 8-12%
 * fewer tokens/s there than at 65536 on the H200 in every sweep of
 * 2026-11-29 to 12-02 (the jsonl files in bench/results), while a 65536-token step
 * still takes only ~4 ms.  Bigger models saturate earlier (BERT-base, Qwen3-0.6B: 90% of
 * their peak at 8192 tokens) and a 65536-token step of theirs takes 23 /
 * 110 ms, which a short query queued behind it would wait for.  So the
 * GPU gets the largest of 65536 and 32768 whose step stays within about
 * 2 TFLOP of matrix products (a few ms: MiniLM's GEMMs ran ~520 TFLOP/s
 * in the 2026-12-02 step profile, smaller shapes less), else 16384.
 */
#include <string.h>
#include "eng_internal.h"

#define BUDGET_CPU 16384
#define BUDGET_FLOP_CAP 2e12

/* GEMM FLOPs a token costs: per layer the attention projections (about 4
 * H^2; wider for grouped-query decoders, which changes nothing here) and
 * the MLP (2 H I, 3 H I when gated as in Qwen3). */
static double flops_per_token(const posy_model_info *mi) {
    const double H = mi->hidden, I = mi->intermediate, gated = strcmp(mi->arch, "qwen3") ? 2.0 : 3.0;
    return 2.0 * mi->layers * (4.0 * H * H + gated * H * I);
}

int posy_engine_default_batch_tokens(const posy_model_info *mi, posy_device_kind device) {
    if (device != POSY_DEVICE_CUDA || !mi || mi->layers <= 0 || mi->hidden <= 0) return BUDGET_CPU;
    const double f = flops_per_token(mi);
    for (int t = 65536; t > BUDGET_CPU; t /= 2)
        if (t * f <= BUDGET_FLOP_CAP) return t;
    return BUDGET_CPU;
}

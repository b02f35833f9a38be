/* eng_cu_order: which way each kernel of a saturated step walks its rows.
 *
 * A kernel of the saturated step reads what the one before it wrote, 50-200
 * MB at 65536 tokens against 50 MB of L2.  Walking rows first to last, as
 * every kernel did, it starts with the rows its predecessor wrote first --
 * long evicted -- so everything comes from HBM: ncu on the H200
 * (2026-12-03, all-MiniLM-L6, caches not flushed between kernels) found
 * the attention reading all 151 MB of the QKV product it follows and the
 * O projection all 50 MB of the attention's output.  In serpentine order
 * a kernel that can walk either way walks last to first when its
 * predecessor walked first to last, and so starts on the rows still in L2.
 *
 * Plain C (no CUDA), so tests/unit/test_cu_order.c checks it on any machine.
 * The launchers ask eng_cu_order_take(reversible) at each launch: a kernel
 * that can walk backwards (ours: the Hopper GEMM, the GEMM + whole-row
 * LayerNorm, attention v10's tile list, add_ln, add_rmsnorm, rms_rows)
 * gets 1 when the launch before walked forwards; one that cannot (cuBLASLt,
 * the small-batch GEMM, the other attention forms) asks with 0 and counts
 * as forwards; kernels that do not ask (the embedding, pooling) leave the
 * alternation alone.  Off unless eng_cu_order_begin(1) -- the graph path's forward
 * (eng_cu_model_chain_begin; POSY_CUDA_SERP=0 turns it off) -- so labs and
 * the one-query chain walk forwards.  The order changes which block does
 * which rows, never what a row's result is.
 *
 * Measured on the H200 (2026-12-03, runs 25-26; docs/BENCHMARKS.md): the
 * MiniLM step's HBM reads 4.25 -> 3.89 GB, 8-27 MB saved at each kernel
 * that follows a GEMM or a norm -- not at the attention, whose static grid
 * walks heads in the outer dimension.  Saturated steps, on / off: MiniLM
 * 1.008 / 1.008 at equal 128 (two runs), 1.001-1.005 elsewhere; BERT-base
 * 0.998-1.003; Qwen3-0.6B 1.000-1.004 -- against a noise of about 0.5%.
 * Correct: lab checks of every backward walk, e2e_vs_transformers and
 * e2e_qwen3 pass with it on (graph == eager bit for bit).  So it is the
 * default: a small gain for MiniLM, no loss elsewhere. */
#include "eng_cu_order.h"

/* per thread: each forward runs on one thread (as eng_cu_pdl_on) */
static _Thread_local int order_on = 0;
static _Thread_local int order_last = 0; /* the last launch walked backwards */

void eng_cu_order_begin(int on) {
    order_on = on != 0;
    order_last = 0;
}

int eng_cu_order_take(int reversible) {
    order_last = order_on && reversible && !order_last;
    return order_last;
}

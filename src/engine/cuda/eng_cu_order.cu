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
 * The launchers ask eng_cu_order_take(reversible) at each launch: a kernel
 * that can walk backwards (ours: the Hopper GEMM, the GEMM + whole-row
 * LayerNorm, attention's tile list, add_ln) gets 1 when the launch before
 * walked forwards, and one that cannot (cuBLASLt, the embedding) resets
 * the state.  Off unless eng_cu_order_begin(1) -- the graph path's forward
 * with POSY_CUDA_SERP=1 (eng_cu_model_chain_begin) -- so labs and the
 * one-query chain walk forwards.  The order changes which block does which
 * rows, never what a row's result is. */
#include "eng_cu.h"

thread_local int eng_cu_order_on = 0;
static thread_local int order_last = 0; /* the last launch walked backwards */

void eng_cu_order_begin(int on) {
    eng_cu_order_on = on;
    order_last = 0;
}

int eng_cu_order_take(int reversible) {
    order_last = eng_cu_order_on && reversible && !order_last;
    return order_last;
}

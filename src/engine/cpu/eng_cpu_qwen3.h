/* eng_cpu_qwen3: the Qwen3 decoder forward pass on the CPU (fp32), which
 * the CPU backend (eng_cpu_backend.c) dispatches to when the model's
 * architecture is "qwen3".  It owns its own activation arena; the backend
 * keeps the step()/poll() bookkeeping. */
#ifndef ENG_CPU_QWEN3_H
#define ENG_CPU_QWEN3_H

#include "eng_internal.h"

typedef struct eng_cpu_qwen3 eng_cpu_qwen3;

/* Reserve the arena for opts.max_batch_tokens tokens on n_threads threads
 * and pack the layers' linears; e is not const because the loaded copies
 * of the packed linears are given back (their pointers in e->qwen3 then
 * NULL: nothing else reads them once the CPU backend is open). */
eng_cpu_qwen3 *eng_cpu_qwen3_open(posy_engine *e, int n_threads, posy_err *err);
/* One forward pass over a validated batch: pooled (and, if the model says
 * so, L2-normalised) embeddings into b->out.  0, or -1 with err set. */
int eng_cpu_qwen3_forward(eng_cpu_qwen3 *q, const posy_engine *e, const posy_batch *b, posy_err *err);
void eng_cpu_qwen3_close(eng_cpu_qwen3 *q);

#endif

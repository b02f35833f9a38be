/* eng_cu_backend: the CUDA backend's step machinery -- token buckets,
 * lazily captured whole-forward CUDA graphs, and staging slots that let the
 * CPU pack batch n+1 while the GPU runs batch n (ARCHITECTURE.md, "Overlap
 * of CPU and GPU").
 *
 * Buckets are 16, 24, 32, 48, 64, 96 ... (powers of two and 1.5x between,
 * at most 33% padding) up to max_batch_tokens.  A bucket's first batch runs
 * eagerly (cuBLASLt picks and caches its algorithms), its second is
 * captured into a graph of the whole forward (embedding .. pooling) and
 * launched, later ones replay it.  All graphs share the model's one arena
 * and one device input block; they read the real counts and cu_seqlens
 * from that block, so one graph serves any mix of sequences.
 *
 * Every slot owns pinned host memory for its input block and its pooled
 * output, and an event.  submit(): pack into a free slot, then on the one
 * stream: copy in, run (eager / capture / replay), copy out, record the
 * event -- no host wait.  Because everything is on one stream, one device
 * input block and one arena suffice: the next copy-in runs after the
 * previous forward.  poll(): hand back slots in submission order whose
 * event has completed (cudaEventQuery; cudaEventSynchronize only when the
 * caller asked to block).  Only when every slot is in flight does submit()
 * wait for the oldest, and its result is queued for the next poll.
 *
 * A batch that asks for token states (posy_batch.tok_out: TEI's
 * /embed_all) runs eagerly, never captured: the graphs stay the pooled
 * forward the hot path replays, and such batches are rare.  Its rows come
 * back as bf16 into the slot's own pinned buffer (made at the slot's first
 * such batch) and are widened into the caller's floats at completion.
 */
#include "eng_cu_model.h"
#include "eng_cu_backend.h"
extern "C" {
#include "posy_log.h"
#include "posy_clock.h"
}
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SLOTS 4
#define MAX_BUCKETS 64
#define DONE_Q 64

typedef struct cu_bucket {
    int tokens, seqs;
    int runs;                    /* batches run so far in this bucket */
    cudaGraphExec_t exec;        /* after the second run */
    double capture_ms;
} cu_bucket;

typedef struct cu_slot {
    int busy;
    uint64_t seqno;
    posy_batch b;                /* the caller's batch (pointers stay valid) */
    int32_t *h_in;               /* pinned input block */
    float *h_out;                /* pinned pooled output */
    uint16_t *h_tok;             /* pinned token states (bf16 bits), [max_tokens, H]; NULL until needed */
    int tok;                     /* this batch's token states are in h_tok */
    cudaEvent_t done, t0, t1;    /* completion; forward start/end for timing */
    int failed;
} cu_slot;

typedef struct cu_state {
    int device;
    cudaStream_t stream;
    eng_cu_model m;
    cu_bucket buckets[MAX_BUCKETS];
    int n_buckets;
    cu_slot slots[N_SLOTS];
    uint64_t next_seqno;
    posy_result doneq[DONE_Q];
    int n_doneq;
    eng_cu_stats stats;
    int sticky_error;            /* a device fault: every later batch fails */
} cu_state;

static int cuda_err(posy_err *err, const char *what, cudaError_t ce) {
    return posy_err_set(err, ce == cudaErrorMemoryAllocation ? POSY_E_NOMEM : POSY_E_INTERNAL,
                        "cuda backend: %s: %s", what, cudaGetErrorString(ce));
}

extern "C" int eng_cuda_available(int device_index, posy_err *err) {
    int n = 0;
    cudaError_t ce = cudaGetDeviceCount(&n);
    if (ce != cudaSuccess || n == 0) {
        posy_err_set(err, POSY_E_UNSUPPORTED, "no CUDA GPU found (%s)",
                     ce == cudaSuccess ? "0 devices" : cudaGetErrorString(ce));
        return 0;
    }
    if (device_index < 0 || device_index >= n) {
        posy_err_set(err, POSY_E_INVALID, "cuda:%d requested, but only %d CUDA device(s) present",
                     device_index, n);
        return 0;
    }
    cudaDeviceProp p;
    ce = cudaGetDeviceProperties(&p, device_index);
    if (ce != cudaSuccess) {
        posy_err_set(err, POSY_E_INTERNAL, "cudaGetDeviceProperties(%d): %s", device_index,
                     cudaGetErrorString(ce));
        return 0;
    }
    if (p.major < 9) {
        posy_err_set(err, POSY_E_UNSUPPORTED,
                     "GPU %d (%s) has compute capability %d.%d; posy's CUDA kernels need 9.0 "
                     "(Hopper) or newer -- use --device cpu",
                     device_index, p.name, p.major, p.minor);
        return 0;
    }
    return 1;
}

static void make_buckets(cu_state *st) {
    const int maxT = st->m.max_tokens;
    int n = 0;
    for (int b = 16; n < MAX_BUCKETS - 1; b *= 2) {
        int c[2] = {b, b + b / 2};
        for (int i = 0; i < 2 && n < MAX_BUCKETS - 1; i++) {
            if (c[i] >= maxT) goto last;
            st->buckets[n].tokens = c[i];
            n++;
        }
    }
last:
    st->buckets[n].tokens = maxT;
    n++;
    st->n_buckets = n;
    for (int i = 0; i < n; i++) {
        int s = st->buckets[i].tokens;
        st->buckets[i].seqs = s < st->m.max_seqs ? s : st->m.max_seqs;
    }
}

/* The CUDA runtime's current device is per thread: open() sets it on the
 * thread that opens the engine, but the scheduler steps the engine from
 * its own thread, where it would be device 0 -- wrong for --device cuda:N
 * with N > 0 (launches into another device's stream fail).  Every entry
 * point that touches the device binds the calling thread first. */
static void cu_bind(const cu_state *st) { cudaSetDevice(st->device); }   /* a thread-local write once initialised */

static void cu_close(posy_engine *e) {
    cu_state *st = (cu_state *)e->backend;
    if (!st) return;
    cu_bind(st);
    if (st->stream) cudaStreamSynchronize(st->stream);
    for (int i = 0; i < st->n_buckets; i++)
        if (st->buckets[i].exec) cudaGraphExecDestroy(st->buckets[i].exec);
    for (int i = 0; i < N_SLOTS; i++) {
        cu_slot *sl = &st->slots[i];
        if (sl->h_in) cudaFreeHost(sl->h_in);
        if (sl->h_out) cudaFreeHost(sl->h_out);
        if (sl->h_tok) cudaFreeHost(sl->h_tok);
        if (sl->done) cudaEventDestroy(sl->done);
        if (sl->t0) cudaEventDestroy(sl->t0);
        if (sl->t1) cudaEventDestroy(sl->t1);
    }
    eng_cu_model_close(&st->m);
    if (st->stream) cudaStreamDestroy(st->stream);
    free(st);
    e->backend = NULL;
}

static int cu_open(posy_engine *e, posy_err *err) {
    if (!eng_cuda_available(e->opts.device_index, err)) return -1;
    cu_state *st = (cu_state *)calloc(1, sizeof *st);
    if (!st) return posy_err_set(err, POSY_E_NOMEM, "cuda backend: state");
    e->backend = st;
    st->device = e->opts.device_index;
    cudaError_t ce = cudaSetDevice(st->device);
    if (ce == cudaSuccess) ce = cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking);
    if (ce != cudaSuccess) { cuda_err(err, "stream", ce); cu_close(e); return -1; }
    const int maxT = e->opts.max_batch_tokens > 0 ? e->opts.max_batch_tokens : 16384;
    const int maxS = e->opts.max_batch_seqs > 0 ? e->opts.max_batch_seqs : 1024;
    if (eng_cu_model_open(&st->m, &e->cfg, &e->bert, &e->qwen3, maxT, maxS, err, &e->splade)) {
        cu_close(e);
        return -1;
    }
    make_buckets(st);
    const eng_cu_in_layout big = eng_cu_in_layout_for(st->m.max_tokens, st->m.max_seqs);
    for (int i = 0; i < N_SLOTS && ce == cudaSuccess; i++) {
        cu_slot *sl = &st->slots[i];
        ce = cudaMallocHost((void **)&sl->h_in, big.total * 4);
        if (ce == cudaSuccess)
            ce = cudaMallocHost((void **)&sl->h_out, (size_t)st->m.max_seqs * st->m.out_dim * 4);
        if (ce == cudaSuccess) ce = cudaEventCreateWithFlags(&sl->done, cudaEventDisableTiming);
        if (ce == cudaSuccess) ce = cudaEventCreate(&sl->t0);
        if (ce == cudaSuccess) ce = cudaEventCreate(&sl->t1);
    }
    if (ce != cudaSuccess) { cuda_err(err, "staging slots", ce); cu_close(e); return -1; }
    snprintf(e->cfg.info.dtype, sizeof e->cfg.info.dtype, "bf16");
    char chain[80] = "off", lnf[40] = "", small[48] = "off";
    if (st->m.mega_ok) snprintf(small, sizeof small, "on (<= %d tokens)", st->m.mega_maxt);
    if (st->m.chain_ln) snprintf(lnf, sizeof lnf, ", norms folded <= %d tokens", st->m.chain_ln);
    if (st->m.chain_max)
        snprintf(chain, sizeof chain, "<= %d tokens%s", st->m.chain_max,
                 st->m.chain_norm ? ", norms fused" : st->m.fold_norm ? ", norms folded" : lnf);
    POSY_INFO("cuda backend: device %d, weights %.1f MiB, arena %.1f MiB for %d tokens / %d "
                  "sequences, %d buckets, %d staging slots; small-batch kernel %s; one-query chain %s; own "
                  "wgmma GEMM %s",
                  st->device, st->m.wbytes / 1048576.0, st->m.abytes / 1048576.0,
                  st->m.max_tokens, st->m.max_seqs, st->n_buckets, N_SLOTS,
                  small, chain, st->m.wg_versions ? "on" : "off");
    return 0;
}

static cu_bucket *bucket_for(cu_state *st, int tokens, int seqs) {
    for (int i = 0; i < st->n_buckets; i++)
        if (st->buckets[i].tokens >= tokens && st->buckets[i].seqs >= seqs) return &st->buckets[i];
    return NULL;
}

/* Fill the slot's pinned input block for bucket `bk`. */
/* Positions: t - start + pos_off; with pad_id >= 0 (RoBERTa, MPNet: an
 * offset) Hugging Face's rule instead, as the CPU engine's embedding: a pad
 * id inside a sequence sits at position pad_id and is not counted. */
static int pack(cu_state *st, cu_slot *sl, const cu_bucket *bk, const posy_batch *b, int pos_off, int pad_id,
                posy_err *err) {
    const eng_cu_in_layout L = eng_cu_in_layout_for(bk->tokens, bk->seqs);
    int32_t *in = sl->h_in;
    const eng_cu_model *m = &st->m;
    memcpy(in + L.cu, b->cu_seqlens, ((size_t)b->n_seqs + 1) * 4);
    if (b->pool_skip) memcpy(in + L.skip, b->pool_skip, (size_t)b->n_seqs * 4);
    else memset(in + L.skip, 0, (size_t)b->n_seqs * 4);
    const int n_tiles = m->attn_order ? eng_cu_attn_tiles_heavy_first(b->cu_seqlens, b->n_seqs, m->causal, in + L.tiles)
                                      : eng_cu_attn_tiles(b->cu_seqlens, b->n_seqs, in + L.tiles);
    in[L.meta + ENG_CU_META_TOKENS] = b->n_tokens;
    in[L.meta + ENG_CU_META_SEQS] = b->n_seqs;
    in[L.meta + ENG_CU_META_TILES] = n_tiles;
    in[L.meta + 3] = 0;
    for (int s = 0; s < b->n_seqs; s++) {
        const int a = b->cu_seqlens[s], z = b->cu_seqlens[s + 1];
        if (z - a > m->max_pos)
            return posy_err_set(err, POSY_E_TOO_LONG, "sequence %d has %d tokens, model max %d", s,
                                z - a, m->max_pos);
        if (pad_id < 0)
            for (int t = a; t < z; t++) in[L.pos + t] = t - a + pos_off;
        else
            for (int t = a, n = 0; t < z; t++) in[L.pos + t] = b->ids[t] == pad_id ? pad_id : pad_id + ++n;
    }
    for (int t = 0; t < b->n_tokens; t++) {
        const int id = b->ids[t], ty = b->type_ids ? b->type_ids[t] : 0;
        if (id < 0 || id >= m->vocab)
            return posy_err_set(err, POSY_E_INVALID, "token id %d out of vocabulary (%d)", id, m->vocab);
        if (ty < 0 || (ty > 0 && ty >= m->type_vocab))
            return posy_err_set(err, POSY_E_INVALID, "token type %d out of range", ty);
        in[L.ids + t] = id;
        in[L.type + t] = ty;
    }
    return 0;
}

static int run_bucket(cu_state *st, cu_bucket *bk, posy_err *err) {
    cudaStream_t s = st->stream;
    if (bk->runs == 0) {
        /* A bucket's first run loads its kernels' modules and races the
         * GEMM candidates: the step thread stalls for it, and so does every
         * request queued behind it.  Timed from an idle stream to the end of
         * the forward (two waits, once a bucket) so logs and /metrics say
         * what a cold bucket costs; --warmup pays it at start-up instead. */
        cudaError_t ce = cudaStreamSynchronize(s);
        if (ce != cudaSuccess) return cuda_err(err, "first run", ce);
        const double t0 = posy_now_ns() * 1e-6;
        if (eng_cu_model_forward(&st->m, s, bk->tokens, bk->seqs, err)) return -1;
        ce = cudaStreamSynchronize(s);
        if (ce != cudaSuccess) return cuda_err(err, "first run", ce);
        const double ms = posy_now_ns() * 1e-6 - t0;
        st->stats.eager_runs++;
        st->stats.first_run_ms += ms;
        POSY_INFO("cuda backend: first run of bucket %d tokens / %d seqs took %.2f ms (kernels loaded, GEMMs "
                  "chosen; eager)", bk->tokens, bk->seqs, ms);
    } else if (getenv("POSY_CUDA_NO_GRAPH")) {
        if (eng_cu_model_forward(&st->m, s, bk->tokens, bk->seqs, err)) return -1;
        st->stats.eager_runs++;
    } else {
        if (!bk->exec) {
            const double t0 = (posy_now_ns() * 1e-6);
            cudaGraph_t g = NULL;
            cudaError_t ce = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
            if (ce != cudaSuccess) return cuda_err(err, "begin capture", ce);
            int rc = eng_cu_model_forward(&st->m, s, bk->tokens, bk->seqs, err);
            ce = cudaStreamEndCapture(s, &g);
            if (rc) { if (g) cudaGraphDestroy(g); return -1; }
            if (ce != cudaSuccess) return cuda_err(err, "end capture", ce);
            ce = cudaGraphInstantiate(&bk->exec, g, 0);
            cudaGraphDestroy(g);
            if (ce != cudaSuccess) { bk->exec = NULL; return cuda_err(err, "graph instantiate", ce); }
            bk->capture_ms = (posy_now_ns() * 1e-6) - t0;
            st->stats.captures++;
            st->stats.capture_ms += bk->capture_ms;
            POSY_INFO("cuda backend: captured graph for bucket %d tokens / %d seqs in %.2f ms",
                          bk->tokens, bk->seqs, bk->capture_ms);
        }
        cudaError_t ce = cudaGraphLaunch(bk->exec, s);
        if (ce != cudaSuccess) return cuda_err(err, "graph launch", ce);
        st->stats.replays++;
    }
    bk->runs++;
    return 0;
}

/* Each sequence's bf16 rows into the caller's floats (bf16 is the top
 * half of a float32). */
static void widen_tokens(const posy_batch *b, const uint16_t *h, int H) {
    for (int s = 0; s < b->n_seqs; s++) {
        float *dst = b->tok_out[s];
        if (!dst) continue;
        const size_t a = (size_t)b->cu_seqlens[s] * H, n = (size_t)(b->cu_seqlens[s + 1] - b->cu_seqlens[s]) * H;
        for (size_t i = 0; i < n; i++) {
            const uint32_t bits = (uint32_t)h[a + i] << 16;
            memcpy(dst + i, &bits, sizeof bits);
        }
    }
}

static int wants_tokens(const posy_batch *b) {
    for (int s = 0; b->tok_out && s < b->n_seqs; s++)
        if (b->tok_out[s]) return 1;
    return 0;
}

/* The device rows and this slot's pinned buffer for token states, made
 * at their first use (max_tokens x H bf16 each). */
static int tokens_ready(cu_state *st, cu_slot *sl, posy_err *err) {
    const size_t bytes = (size_t)st->m.max_tokens * st->m.H * sizeof(uint16_t);
    cudaError_t ce = cudaSuccess;
    if (!st->m.tok) ce = cudaMalloc((void **)&st->m.tok, bytes);
    if (ce == cudaSuccess && !sl->h_tok) ce = cudaMallocHost((void **)&sl->h_tok, bytes);
    if (ce != cudaSuccess) {
        cudaGetLastError();
        return posy_err_set(err, POSY_E_NOMEM, "cuda backend: no memory for token states (%.1f MiB for %d tokens "
                            "of %d; a smaller --max-batch-tokens needs less): %s", bytes / 1048576.0,
                            st->m.max_tokens, st->m.H, cudaGetErrorString(ce));
    }
    return 0;
}

static void finish_slot(cu_state *st, cu_slot *sl, cudaError_t ce) {
    posy_result r;
    r.tag = sl->b.tag;
    r.status = POSY_OK;
    if (ce != cudaSuccess || sl->failed) {
        r.status = POSY_E_INTERNAL;
        st->sticky_error = 1;
        POSY_ERROR("cuda backend: batch %llu failed: %s", (unsigned long long)sl->b.tag,
                       cudaGetErrorString(ce));
    } else {
        memcpy(sl->b.out, sl->h_out, (size_t)sl->b.n_seqs * st->m.out_dim * sizeof(float));
        if (sl->tok) widen_tokens(&sl->b, sl->h_tok, st->m.H);
        float ms = 0.f;
        if (cudaEventElapsedTime(&ms, sl->t0, sl->t1) == cudaSuccess) {
            st->stats.last_gpu_ms = ms;
            st->stats.gpu_ms += ms;
        }
        st->stats.batches++;
    }
    sl->busy = 0;
    if (st->n_doneq < DONE_Q) st->doneq[st->n_doneq++] = r;
}

static cu_slot *oldest_busy(cu_state *st) {
    cu_slot *o = NULL;
    for (int i = 0; i < N_SLOTS; i++)
        if (st->slots[i].busy && (!o || st->slots[i].seqno < o->seqno)) o = &st->slots[i];
    return o;
}

static int cu_submit(posy_engine *e, const posy_batch *b, posy_err *err) {
    cu_state *st = (cu_state *)e->backend;
    cu_bind(st);
    if (st->sticky_error)
        return posy_err_set(err, POSY_E_INTERNAL, "cuda backend: an earlier device error");
    if (b->n_tokens <= 0 || b->n_seqs <= 0)
        return posy_err_set(err, POSY_E_INVALID, "empty batch");
    cu_bucket *bk = bucket_for(st, b->n_tokens, b->n_seqs);
    if (!bk)
        return posy_err_set(err, POSY_E_TOO_LONG, "batch of %d tokens / %d sequences exceeds the "
                            "engine's max-batch-tokens %d / max-batch-seqs %d", b->n_tokens,
                            b->n_seqs, st->m.max_tokens, st->m.max_seqs);
    cu_slot *sl = NULL;
    for (int i = 0; i < N_SLOTS && !sl; i++)
        if (!st->slots[i].busy) sl = &st->slots[i];
    if (!sl && st->n_doneq == DONE_Q)
        return posy_err_set(err, POSY_E_BUSY, "cuda backend: %d results wait to be polled", DONE_Q);
    if (!sl) { /* every slot in flight: wait for the oldest, queue its result */
        sl = oldest_busy(st);
        finish_slot(st, sl, cudaEventSynchronize(sl->done));
    }
    const int tok = wants_tokens(b);
    if (tok && tokens_ready(st, sl, err)) return -1;
    if (pack(st, sl, bk, b, e->cfg.position_offset, e->cfg.position_offset > 0 ? e->cfg.pad_token_id : -1, err))
        return -1;
    const eng_cu_in_layout L = eng_cu_in_layout_for(bk->tokens, bk->seqs);
    cudaStream_t s = st->stream;
    cudaError_t ce = cudaMemcpyAsync(st->m.d_in, sl->h_in, L.total * 4, cudaMemcpyHostToDevice, s);
    if (ce == cudaSuccess) ce = cudaEventRecord(sl->t0, s);
    if (ce != cudaSuccess) return cuda_err(err, "copy in", ce);
    if (tok) {   /* eager: the graphs stay the pooled forward */
        st->m.want_tok = 1;
        const int rc = eng_cu_model_forward(&st->m, s, bk->tokens, bk->seqs, err);
        st->m.want_tok = 0;
        if (rc) { st->sticky_error = 1; return -1; }
        st->stats.eager_runs++;
    } else if (run_bucket(st, bk, err)) { st->sticky_error = 1; return -1; }
    ce = cudaEventRecord(sl->t1, s);
    if (ce == cudaSuccess)
        ce = cudaMemcpyAsync(sl->h_out, st->m.pooled, (size_t)b->n_seqs * st->m.out_dim * 4,
                             cudaMemcpyDeviceToHost, s);
    if (ce == cudaSuccess && tok)
        ce = cudaMemcpyAsync(sl->h_tok, st->m.tok, (size_t)b->n_tokens * st->m.H * sizeof(uint16_t),
                             cudaMemcpyDeviceToHost, s);
    if (ce == cudaSuccess) ce = cudaEventRecord(sl->done, s);
    if (ce != cudaSuccess) { st->sticky_error = 1; return cuda_err(err, "copy out", ce); }
    sl->b = *b;
    sl->tok = tok;
    sl->busy = 1;
    sl->failed = 0;
    sl->seqno = st->next_seqno++;
    st->stats.tokens += b->n_tokens;
    st->stats.padded_tokens += bk->tokens;
    if (!tok && eng_cu_mega_usable(&st->m, bk->tokens)) st->stats.small_batches++;   /* token batches skip it */
    return 0;
}

static int cu_poll(posy_engine *e, posy_result *done, int max_done, int block) {
    cu_state *st = (cu_state *)e->backend;
    cu_bind(st);
    int n = 0;
    while (n < max_done && st->n_doneq > 0) {
        done[n++] = st->doneq[0];
        memmove(st->doneq, st->doneq + 1, (size_t)(--st->n_doneq) * sizeof *st->doneq);
    }
    while (n < max_done) {
        cu_slot *sl = oldest_busy(st);
        if (!sl) break;
        cudaError_t ce = cudaEventQuery(sl->done);
        if (ce == cudaErrorNotReady) {
            if (!(block && n == 0)) break;
            ce = cudaEventSynchronize(sl->done);
        }
        finish_slot(st, sl, ce);
        done[n++] = st->doneq[--st->n_doneq];
    }
    return n;
}

static int cu_inflight(const posy_engine *e) {
    const cu_state *st = (const cu_state *)e->backend;
    int n = st->n_doneq;
    for (int i = 0; i < N_SLOTS; i++) n += st->slots[i].busy;
    return n;
}

extern "C" int eng_cuda_stats(const posy_engine *e, eng_cu_stats *out) {
    if (!e || !e->ops || strcmp(e->ops->name, "cuda") || !e->backend) return -1;
    const cu_state *st = (const cu_state *)e->backend;
    *out = st->stats;
    out->buckets_seen = 0;
    for (int i = 0; i < st->n_buckets; i++) out->buckets_seen += st->buckets[i].runs > 0;
    return 0;
}

extern "C" int eng_cuda_buckets(const posy_engine *e, int *tokens, int max) {
    if (!e || !e->ops || strcmp(e->ops->name, "cuda") || !e->backend) return -1;
    const cu_state *st = (const cu_state *)e->backend;
    int n = 0;
    for (int i = 0; i < st->n_buckets && n < max; i++) tokens[n++] = st->buckets[i].tokens;
    return n;
}

extern "C" const eng_backend_ops eng_cuda_backend = {
    "cuda", cu_open, cu_close, cu_submit, cu_poll, cu_inflight,
};

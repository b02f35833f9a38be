/* eng_cu_mega: the whole forward of a small batch (at most 64 tokens) as
 * ONE persistent kernel -- the "small batches are a different regime" part
 * of the CUDA engine.
 *
 * Status: OPT-IN (POSY_CUDA_MEGA=1).  Correct on the H200 (lab_mega,
 * gpu_backend_e2e, e2e_vs_transformers), but slower than the graph of
 * kernels (2.2-2.7x for all-MiniLM-L6 at 1-16 tokens since the one-query
 * chain, run 77): each stage costs 2-6 us on top of a ~0.85 us barrier
 * (lab_mega's profile), see docs/BENCHMARKS.md.
 *
 * POSY_CUDA_MEGA_CLUSTER=C runs it as ONE thread-block cluster of C blocks
 * (barrier.cluster between stages, <= 16 tokens, weights two stages ahead
 * when two buffers fit).  Also correct, and 3.6x slower than the graph of
 * kernels for all-MiniLM-L6 (run 77): the cluster barrier after global
 * stores costs 0.4-1.2 us, not the bare 0.25, and 16 SMs ingest the
 * weights at ~15 KB/us a block (docs/BENCHMARKS.md, "The whole one-query
 * forward in one thread-block cluster").
 *
 * Why: a 16-token query is memory- and latency-bound like LLM decode.  As a
 * graph of ordinary kernels it costs ~3-4 us a node (44 nodes for
 * all-MiniLM-L6, 98 for BERT-base) no matter how little each node does.
 * Here one cooperative grid (one block per SM) walks the layers in stages
 * separated by grid barriers, so the per-stage cost is a barrier (~1 us)
 * plus the stage's own memory traffic, and every weight is read once.
 *
 * Stages per layer (BERT family, post-LayerNorm):
 *   QKV   each block LayerNorms the layer input rows into shared memory
 *         (layer 0: gathers word+position+type embeddings first) -- block 0
 *         also stores them as the residual -- then computes its slice of
 *         the QKV columns (bias in the epilogue);
 *   ATT   one warp per (head, query row): softmax over the row's sequence
 *         (at most 64 keys), fp32;
 *   O     ctx Wo^T + b + residual;
 *   UP    LayerNorm (block 0 stores the residual) + gelu(x Wup^T + b);
 *   DOWN  inter Wdown^T + b + residual;
 * and after the last layer POOL: LayerNorm, mean / CLS / last, L2.
 *
 * GEMM slices: N is cut into tiles of 8 columns, spread evenly over the
 * blocks; inside a block the 8 warps split the (tile, 64-wide k chunk)
 * units, each warp streaming its weight rows with 16-byte loads (4 chunks
 * in flight) into mma.sync m16n8k16 (bf16, fp32 accumulate); the warps'
 * partial tiles meet in shared memory and are added in a fixed order, so
 * results are bitwise reproducible (graph replay equals eager).
 * The k order inside a chunk is permuted identically for A and W (a lane
 * loads 16 consecutive values of its row and feeds them to 4 mma steps),
 * which is legal because the sum does not care about order.
 *
 * The kernel reads the real token and sequence counts from device memory,
 * like every kernel here, so one captured graph serves any batch of its
 * bucket.  Activations written by other blocks are read with ld.global.cg
 * (L2, never a stale L1 line); the grid barrier is a generation counter
 * with release / acquire fences.  Its reference is the whole forward: the
 * CPU engine and transformers (tests/cuda/e2e_vs_transformers.py, lengths
 * 1..64 and small mixed batches take this kernel) and the graph path
 * (tests/cuda/gpu_backend_e2e.c compares the two on the same batches).
 */
#include "eng_cu_model.h"
extern "C" {
#include "posy_log.h"
}
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MG_THREADS 256
#define MG_WARPS 8
#define MG_MAXT 64
#define MG_BARRIERS_PER_LAYER 5
/* profile: start, end, then per barrier MG_PS slots: last arrival over the
 * blocks, block 0's departure, last departure, and block 0's GEMM phases
 * before it (weights landed, products done, epilogue done) */
#define MG_PS 6
#define MG_PROF_N (2 + MG_PS * MG_BARRIERS_PER_LAYER * 64)

typedef struct mega_args {
    const eng_cu_layer *layers;
    int L, H, I, heads, d, gelu_tanh, pool_mode, normalize;
    float eps, scale;
    const bf16 *word, *pos, *type;
    const float *emb_g, *emb_b;
    const int32_t *meta, *cu, *skip, *ids, *pos_ids, *type_ids;   /* skip: per sequence, rows not pooled */
    bf16 *x, *qkv, *ctx, *y, *inter;
    float *pooled;
    unsigned long long *bar, *prof; /* arrival counter; profile (NULL: off) */
    unsigned long long span;        /* arrivals a launch adds: barriers x blocks */
    int ntmax; /* most 8-column tiles a block owns in any stage */
    int maxt;  /* rows the shared buffers hold (MG_MAXT, or 16 in cluster mode) */
    int nbuf;  /* weight buffers: a stage's weights are requested nbuf GEMM stages ahead */
    int cluster; /* 1: the grid is one thread-block cluster, barriers are barrier.cluster */
    size_t wsz;  /* bf16 elements a weight buffer */
} mega_args;

/* ---- small device helpers -------------------------------------------------- */

static __device__ __forceinline__ uint4 mg_ldcg4(const bf16 *p) { return __ldcg((const uint4 *)p); }

static __device__ __forceinline__ void mg_unpack8(uint4 u, float *f) {
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int t = 0; t < 4; t++) {
        const float2 x = __bfloat1622float2(h[t]);
        f[2 * t] = x.x;
        f[2 * t + 1] = x.y;
    }
}

static __device__ __forceinline__ void mg_mma(float *c, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                              unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* Grid barrier on a 64-bit arrival counter that only grows: each block
 * adds 1 with release semantics and waits (acquire) until the count
 * reaches its target.  A launch crosses `span` = barriers x blocks
 * arrivals, so a block's base is the count it sees at the start rounded
 * down to a multiple of span (no other block can pass the first barrier
 * before it arrives); nothing is reset, so nothing races with a reset.
 * prof (POSY_CUDA_MEGA_PROFILE): per barrier, the latest arrival over all
 * blocks and block 0's departure, in globaltimer ns, for lab_mega. */
static __device__ __forceinline__ unsigned long long mg_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    return t;
}

static __device__ __forceinline__ void mg_grid_sync(unsigned long long *ctr, unsigned long long *target,
                                                    unsigned long long *prof, int *nb, int cluster) {
    if (cluster) {
        /* one cluster: the hardware barrier (it includes every thread of
         * every CTA, so it is a block barrier too); release / acquire at
         * cluster scope order the activations' global stores before the
         * other CTAs' ld.global.cg loads */
        __syncthreads();
        if (prof && threadIdx.x == 0) atomicMax(prof + 2 + MG_PS * *nb, mg_now());
        asm volatile("barrier.cluster.arrive.release.aligned;\n"
                     "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
        if (prof && threadIdx.x == 0) {
            const unsigned long long t = mg_now();
            if (blockIdx.x == 0) prof[3 + MG_PS * *nb] = t;
            atomicMax(prof + 4 + MG_PS * *nb, t);
        }
        (*nb)++;
        __syncthreads();
        return;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        if (prof) atomicMax(prof + 2 + MG_PS * *nb, mg_now());
        asm volatile("red.release.gpu.global.add.u64 [%0], 1;\n" ::"l"(ctr) : "memory");
        *target += gridDim.x;
        unsigned long long v;
        do {
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(ctr) : "memory");
        } while (v < *target);
        if (prof) {
            const unsigned long long t = mg_now();
            if (blockIdx.x == 0) prof[3 + MG_PS * *nb] = t;
            atomicMax(prof + 4 + MG_PS * *nb, t);
        }
    }
    (*nb)++;
    __syncthreads();
}

static __device__ __forceinline__ float mg_gelu(float v, int tanh_form) {
    if (tanh_form) return 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    return 0.5f * v * (1.f + erff(v * 0.7071067811865476f));
}

/* Layer 0's prologue: word + position + type embeddings, LayerNorm, into
 * shared A (zeros past the real rows); block 0 also stores the rows as the
 * residual x.  Once per forward, so one row at a time per warp. */
static __device__ void mg_embed_prologue(const mega_args &a, int n, int rows_pad, bf16 *As, int lda) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, H = a.H, nc = H >> 3;
    for (int r = warp; r < rows_pad; r += MG_WARPS) {
        bf16 *dst = As + (size_t)r * lda;
        if (r >= n) {
            for (int c = lane; c < nc; c += 32) *(uint4 *)(dst + c * 8) = make_uint4(0, 0, 0, 0);
            continue;
        }
        float v[4][8];
        const bf16 *w = a.word + (size_t)a.ids[r] * H, *p = a.pos + (size_t)a.pos_ids[r] * H;
        const bf16 *t = a.type ? a.type + (size_t)a.type_ids[r] * H : NULL;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int c = lane + 32 * i;
            if (c < nc) {
                float p8[8], t8[8];
                eng_cu_load8(w + c * 8, v[i]);
                eng_cu_load8(p + c * 8, p8);
                if (t) eng_cu_load8(t + c * 8, t8);
#pragma unroll
                for (int j = 0; j < 8; j++) v[i][j] += p8[j] + (t ? t8[j] : 0.f);
            }
        }
        eng_cu_ln_finish<4>(v, H, a.emb_g, a.emb_b, dst, a.eps, blockIdx.x == 0 ? a.x + (size_t)r * H : NULL);
    }
}

/* LayerNorm (g, b) of the rows of y into shared A, zeros past the real
 * rows; block 0 also stores them as the residual x.  A warp's rows
 * (warp + 8 i) are all loaded before any is reduced: one L2 round trip for
 * the prologue, not one per row.  MAXC = 16-byte chunks of a row per lane. */
/* LayerNorm (g, b) of the rows of y into shared A, zeros past the real
 * rows; block 0 also stores them as the residual x.  A warp's rows
 * (warp + 8 i) are all loaded before any is reduced: one L2 round trip for
 * the prologue, not one per row.  MAXC = 16-byte chunks of a row per lane. */
template <int MAXC>
static __device__ void mg_ln_rows(const mega_args &a, const float *g, const float *b, int n, int rows_pad,
                                  bf16 *As, int lda) {
    constexpr int RPW = MG_MAXT / MG_WARPS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, H = a.H, nc = H >> 3;
    uint4 raw[RPW][MAXC];
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        const int r = warp + MG_WARPS * i;
#pragma unroll
        for (int c = 0; c < MAXC; c++) {
            raw[i][c] = make_uint4(0, 0, 0, 0);
            if (r < n && lane + 32 * c < nc) raw[i][c] = mg_ldcg4(a.y + (size_t)r * H + (lane + 32 * c) * 8);
        }
    }
#pragma unroll
    for (int i = 0; i < RPW; i++) {
        const int r = warp + MG_WARPS * i;
        if (r >= rows_pad) break;
        bf16 *dst = As + (size_t)r * lda;
        if (r >= n) {
            for (int c = lane; c < nc; c += 32) *(uint4 *)(dst + c * 8) = make_uint4(0, 0, 0, 0);
            continue;
        }
        float v[MAXC][8];
#pragma unroll
        for (int c = 0; c < MAXC; c++) {
            const __nv_bfloat162 *h2 = (const __nv_bfloat162 *)&raw[i][c];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const float2 f = __bfloat1622float2(h2[j]);
                v[c][2 * j] = f.x;
                v[c][2 * j + 1] = f.y;
            }
        }
        eng_cu_ln_finish<MAXC>(v, H, g, b, dst, a.eps, blockIdx.x == 0 ? a.x + (size_t)r * H : NULL);
    }
}

static __device__ void mg_ln_prologue(const mega_args &a, const float *g, const float *b, int n, int rows_pad,
                                      bf16 *As, int lda) {
    const int nc = a.H >> 3;
    if (nc <= 32) mg_ln_rows<1>(a, g, b, n, rows_pad, As, lda);
    else if (nc <= 64) mg_ln_rows<2>(a, g, b, n, rows_pad, As, lda);
    else if (nc <= 96) mg_ln_rows<3>(a, g, b, n, rows_pad, As, lda);
    else mg_ln_rows<4>(a, g, b, n, rows_pad, As, lda);
}

/* ---- the GEMM slice ------------------------------------------------------ */

/* part[w][r][c] = sum over warp w's k chunks of A[r][k] W[(t0*8 + c)][k],
 * for the (tile, 64-wide k chunk) units of warp w, MT m-tiles, row stride
 * ldacc, warp slot stride MT*16*ldacc.  A from shared memory (AS = 1) or
 * global memory via L2 (AS = 0).  K % 64 == 0.  Only the tiles a warp
 * touches are written; mg_units_hit says which (warp, tile) pairs those
 * are, so the epilogue adds the partials in a fixed order (bitwise
 * reproducible: graph replay must equal eager). */
static __device__ __forceinline__ int mg_units_hit(int w, int tile, int nk, int U) {
    const int lo = w * U / MG_WARPS, hi = (w + 1) * U / MG_WARPS;
    return lo < hi && lo < (tile + 1) * nk && hi > tile * nk;
}

template <int AS, int MT>
static __device__ void mg_gemm_mt(const bf16 *A, int lda, const bf16 *Ws, int K, int nt, float *part,
                                  int ldacc) {
    /* chunks whose A fragments are loaded together (registers: CG*MT*4 uint4) */
    constexpr int CG = MT == 1 ? 4 : MT == 2 ? 2 : 1;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const int nk = K >> 6, U = nt * nk;
    int u = warp * U / MG_WARPS;
    const int u_end = (warp + 1) * U / MG_WARPS;
    float *mine = part + (size_t)warp * MT * 16 * ldacc;
    while (u < u_end) {
        const int tile = u / nk, kc0 = u % nk;
        const int kc1 = min(nk, kc0 + (u_end - u));
        float c[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; mt++) c[mt][0] = c[mt][1] = c[mt][2] = c[mt][3] = 0.f;
        const bf16 *wrow = Ws + (size_t)(tile * 8 + g) * (K + 8) + 16 * t4;
        const bf16 *arow = A + (size_t)g * lda + 16 * t4;
        for (int kc = kc0; kc < kc1; kc += 4) {
            uint4 wv[4][2];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                wv[j][0] = wv[j][1] = make_uint4(0, 0, 0, 0);
                if (kc + j < kc1) {
                    const uint4 *p = (const uint4 *)(wrow + (size_t)(kc + j) * 64);
                    wv[j][0] = p[0];
                    wv[j][1] = p[1];
                }
            }
#pragma unroll
            for (int j0 = 0; j0 < 4; j0 += CG) {
                uint4 av[CG][MT][4]; /* rows g (0, 1) and g+8 (2, 3); k..k+7 and k+8..k+15 */
#pragma unroll
                for (int j = 0; j < CG; j++)
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        av[j][mt][0] = av[j][mt][1] = av[j][mt][2] = av[j][mt][3] = make_uint4(0, 0, 0, 0);
                        if (kc + j0 + j < kc1) {
                            const bf16 *r0 = arow + (size_t)mt * 16 * lda + (size_t)(kc + j0 + j) * 64;
                            const bf16 *r1 = r0 + (size_t)8 * lda;
                            if (AS) {
                                av[j][mt][0] = *(const uint4 *)r0; av[j][mt][1] = *(const uint4 *)(r0 + 8);
                                av[j][mt][2] = *(const uint4 *)r1; av[j][mt][3] = *(const uint4 *)(r1 + 8);
                            } else {
                                av[j][mt][0] = mg_ldcg4(r0); av[j][mt][1] = mg_ldcg4(r0 + 8);
                                av[j][mt][2] = mg_ldcg4(r1); av[j][mt][3] = mg_ldcg4(r1 + 8);
                            }
                        }
                    }
#pragma unroll
                for (int j = 0; j < CG; j++) {
                    if (kc + j0 + j >= kc1) continue;
                    const uint4 w0 = wv[j0 + j][0], w1 = wv[j0 + j][1];
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        const uint4 x0 = av[j][mt][0], x1 = av[j][mt][1], y0 = av[j][mt][2], y1 = av[j][mt][3];
                        mg_mma(c[mt], x0.x, y0.x, x0.y, y0.y, w0.x, w0.y);
                        mg_mma(c[mt], x0.z, y0.z, x0.w, y0.w, w0.z, w0.w);
                        mg_mma(c[mt], x1.x, y1.x, x1.y, y1.y, w1.x, w1.y);
                        mg_mma(c[mt], x1.z, y1.z, x1.w, y1.w, w1.z, w1.w);
                    }
                }
            }
        }
#pragma unroll
        for (int mt = 0; mt < MT; mt++) {
            float *o0 = mine + (size_t)(mt * 16 + g) * ldacc + tile * 8 + 2 * t4, *o1 = o0 + (size_t)8 * ldacc;
            *(float2 *)o0 = make_float2(c[mt][0], c[mt][1]);
            *(float2 *)o1 = make_float2(c[mt][2], c[mt][3]);
        }
        u += kc1 - kc0;
    }
}

template <int AS>
static __device__ void mg_gemm(const bf16 *A, int lda, int MT, const bf16 *Ws, int K, int nt, float *part,
                               int ldacc) {
    switch (MT) {
    case 1: mg_gemm_mt<AS, 1>(A, lda, Ws, K, nt, part, ldacc); break;
    case 2: mg_gemm_mt<AS, 2>(A, lda, Ws, K, nt, part, ldacc); break;
    case 3: mg_gemm_mt<AS, 3>(A, lda, Ws, K, nt, part, ldacc); break;
    default: mg_gemm_mt<AS, 4>(A, lda, Ws, K, nt, part, ldacc); break;
    }
}

/* The block's 8-column tiles of an N-column GEMM: [t0, t0 + nt). */
static __device__ __forceinline__ void mg_tiles(int N, int *t0, int *nt) {
    const int ntiles = N >> 3;
    *t0 = (int)((long)blockIdx.x * ntiles / gridDim.x);
    *nt = (int)((long)(blockIdx.x + 1) * ntiles / gridDim.x) - *t0;
}

/* Copy the block's weight rows of the next GEMM stage into shared memory
 * (row stride K + 8: the mma loads hit distinct banks) with cp.async, so
 * the copy runs while the grid barrier and the next stage's activations
 * are awaited -- weights do not depend on activations.  The slice is
 * contiguous in global memory.  mg_stage_gemm waits for it. */
static __device__ void mg_prefetch_w(const bf16 *W, int N, int K, bf16 *Ws) {
    int t0, nt;
    mg_tiles(N, &t0, &nt);
    const int cpr = K >> 3, total = nt * 8 * cpr;
    const bf16 *src = W + (size_t)t0 * 8 * K;
    for (int i = threadIdx.x; i < total; i += MG_THREADS) {
        const int r = i / cpr, c = i - r * cpr;
        const unsigned dst = (unsigned)__cvta_generic_to_shared(Ws + (size_t)r * (K + 8) + c * 8);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src + (size_t)r * K + c * 8)
                     : "memory");
    }
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/* Request the weights of GEMM stage j (layer j / 4: QKV, O, UP, DOWN) into
 * buffer j % nbuf, as one cp.async group; past the last stage an empty
 * group, so that before stage j exactly nbuf - 1 newer groups exist and
 * cp.async.wait_group(nbuf - 1) means "stage j's weights have landed". */
static __device__ void mg_prefetch_stage(const mega_args &a, int j, bf16 *Ws0) {
    if (j >= 4 * a.L) {
        asm volatile("cp.async.commit_group;\n" ::: "memory");
        return;
    }
    const eng_cu_layer *w = &a.layers[j >> 2];
    bf16 *dst = Ws0 + (size_t)(j % a.nbuf) * a.wsz;
    switch (j & 3) {
    case 0: mg_prefetch_w(w->qkv_w, 3 * a.H, a.H, dst); break;
    case 1: mg_prefetch_w(w->ao_w, a.H, a.H, dst); break;
    case 2: mg_prefetch_w(w->up_w, a.I, a.H, dst); break;
    default: mg_prefetch_w(w->down_w, a.H, a.I, dst); break;
    }
}

enum { MG_EPI_BIAS = 0, MG_EPI_GELU = 1, MG_EPI_RES = 2 };

/* The block's share of one GEMM stage: out[r][n] = epi(A W^T + b) for its
 * tiles, rows < n_rows. */
template <int AS>
static __device__ void mg_stage_gemm(const mega_args &a, const bf16 *A, int lda, int n_rows, const bf16 *Ws,
                                     const bf16 *bias, int N, int K, int epi, const bf16 *res, bf16 *out,
                                     float *acc, unsigned long long *ph) {
    int t0, nt;
    mg_tiles(N, &t0, &nt);
    if (a.nbuf > 1) asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    else asm volatile("cp.async.wait_all;\n" ::: "memory");
    __syncthreads();
    if (ph && threadIdx.x == 0) ph[0] = mg_now();
    if (nt <= 0) return;
    const int MT = (n_rows + 15) >> 4, ldacc = nt * 8, nk = K >> 6, U = nt * nk;
    const size_t slot = (size_t)MT * 16 * ldacc;
    mg_gemm<AS>(A, lda, MT, Ws, K, nt, acc, ldacc);
    __syncthreads();
    if (ph && threadIdx.x == 0) ph[1] = mg_now();
    const int half = ldacc >> 1;
    for (int i = threadIdx.x; i < n_rows * half; i += MG_THREADS) {
        const int r = i / half, c = 2 * (i % half), n = t0 * 8 + c, tile = c >> 3;
        float v0 = 0.f, v1 = 0.f;
        for (int w = 0; w < MG_WARPS; w++)
            if (mg_units_hit(w, tile, nk, U)) {
                const float2 p = *(const float2 *)(acc + w * slot + (size_t)r * ldacc + c);
                v0 += p.x;
                v1 += p.y;
            }
        const float2 bb = __bfloat1622float2(*(const __nv_bfloat162 *)(bias + n));
        v0 += bb.x;
        v1 += bb.y;
        if (epi == MG_EPI_GELU) {
            v0 = mg_gelu(v0, a.gelu_tanh);
            v1 = mg_gelu(v1, a.gelu_tanh);
        } else if (epi == MG_EPI_RES) {
            unsigned ru = __ldcg((const unsigned *)(res + (size_t)r * N + n));
            const float2 rr = __bfloat1622float2(*(const __nv_bfloat162 *)&ru);
            v0 += rr.x;
            v1 += rr.y;
        }
        *(__nv_bfloat162 *)(out + (size_t)r * N + n) = __floats2bfloat162_rn(v0, v1);
    }
    __syncthreads();
    if (ph && threadIdx.x == 0) ph[2] = mg_now();
}

/* ---- attention: one warp per (head, query row) ---------------------------- */

/* Lane l holds v[0..31] (32 output dims, its own partial); afterwards lane
 * l's v[0] is the sum over all lanes of dim l.  Recursive halving: each
 * step keeps one half of the dims and swaps the other with the partner,
 * 31 shuffles in all. */
template <int W>
static __device__ __forceinline__ void mg_rs_step(float *v, int lane) {
    const bool upper = (lane & W) != 0;
#pragma unroll
    for (int k = 0; k < W; k++) {
        const float send = upper ? v[k] : v[k + W];
        const float keep = upper ? v[k + W] : v[k];
        v[k] = keep + __shfl_xor_sync(0xffffffffu, send, W);
    }
}

/* (the steps are separate instantiations so every index is a constant and
 * v stays in registers) */
static __device__ __forceinline__ void mg_reduce_scatter32(float *v) {
    const int lane = threadIdx.x & 31;
    mg_rs_step<16>(v, lane);
    mg_rs_step<8>(v, lane);
    mg_rs_step<4>(v, lane);
    mg_rs_step<2>(v, lane);
    mg_rs_step<1>(v, lane);
}


/* Sequences here have at most 64 tokens, so lane l owns keys l and l + 32:
 * one round trip loads q and both key rows, a second both value rows (in
 * groups of 32 dims); scores and softmax in fp32, P.V summed across lanes
 * by mg_reduce_scatter32. */
template <int D>
static __device__ void mg_attention_d(const mega_args &a, int n) {
    const int lane = threadIdx.x & 31, H = a.H, ld = 3 * H;
    const int gw = blockIdx.x * MG_WARPS + (threadIdx.x >> 5), nw = gridDim.x * MG_WARPS;
    const int n_seqs = a.meta[ENG_CU_META_SEQS];
    constexpr int DH = D < 64 ? D : 64; /* dims of q.k per round trip */
    for (int it = gw; it < a.heads * n; it += nw) {
        const int h = it % a.heads, r = it / a.heads;
        int s = 0;
        while (s + 1 < n_seqs && a.cu[s + 1] <= r) s++;
        const int k0 = a.cu[s], len = a.cu[s + 1] - k0;
        const bool has0 = lane < len, has1 = lane + 32 < len;
        const bf16 *q = a.qkv + (size_t)r * ld + h * D;
        const bf16 *kr0 = a.qkv + (size_t)(k0 + lane) * ld + H + h * D, *kr1 = kr0 + (size_t)32 * ld;
        float d0 = 0.f, d1 = 0.f;
#pragma unroll
        for (int e0 = 0; e0 < D; e0 += DH) {
            uint4 qu[DH / 8], ku0[DH / 8], ku1[DH / 8];
#pragma unroll
            for (int e = 0; e < DH / 8; e++) {
                qu[e] = mg_ldcg4(q + e0 + 8 * e);
                ku0[e] = has0 ? mg_ldcg4(kr0 + e0 + 8 * e) : make_uint4(0, 0, 0, 0);
                ku1[e] = has1 ? mg_ldcg4(kr1 + e0 + 8 * e) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int e = 0; e < DH / 8; e++) {
                float fq[8], f0[8], f1[8];
                mg_unpack8(qu[e], fq);
                mg_unpack8(ku0[e], f0);
                mg_unpack8(ku1[e], f1);
#pragma unroll
                for (int t = 0; t < 8; t++) {
                    d0 += fq[t] * f0[t];
                    d1 += fq[t] * f1[t];
                }
            }
        }
        const float sc0 = has0 ? d0 * a.scale : -INFINITY, sc1 = has1 ? d1 * a.scale : -INFINITY;
        float mx = fmaxf(sc0, sc1);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        const float p0 = has0 ? __expf(sc0 - mx) : 0.f;
        const float p1 = has1 ? __expf(sc1 - mx) : 0.f;
        const float inv = 1.f / eng_cu_warp_sum(p0 + p1);
        const bf16 *vr0 = kr0 + H, *vr1 = kr1 + H;
        bf16 *dst = a.ctx + (size_t)r * H + h * D;
#pragma unroll
        for (int g32 = 0; g32 < D / 32; g32++) {
            uint4 vu0[4], vu1[4];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                vu0[e] = has0 ? mg_ldcg4(vr0 + 32 * g32 + 8 * e) : make_uint4(0, 0, 0, 0);
                vu1[e] = has1 ? mg_ldcg4(vr1 + 32 * g32 + 8 * e) : make_uint4(0, 0, 0, 0);
            }
            float v[32];
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float f0[8], f1[8];
                mg_unpack8(vu0[e], f0);
                mg_unpack8(vu1[e], f1);
#pragma unroll
                for (int t = 0; t < 8; t++) v[8 * e + t] = p0 * f0[t] + p1 * f1[t];
            }
            mg_reduce_scatter32(v);
            dst[32 * g32 + lane] = __float2bfloat16(v[0] * inv);
        }
    }
}

static __device__ void mg_stage_attention(const mega_args &a, int n) {
    if (a.d == 32) mg_attention_d<32>(a, n);
    else if (a.d == 64) mg_attention_d<64>(a, n);
    else mg_attention_d<128>(a, n);
}

/* ---- pooling: a block per sequence --------------------------------------- */

static __device__ void mg_stage_pool(const mega_args &a, bf16 *rows_s, float *red) {
    const int warp = threadIdx.x >> 5, H = a.H;
    const int n_seqs = a.meta[ENG_CU_META_SEQS];
    const eng_cu_layer *lw = &a.layers[a.L - 1];
    for (int s = blockIdx.x; s < n_seqs; s += gridDim.x) {
        int r0 = a.cu[s] + a.skip[s], r1 = a.cu[s + 1];   /* as eng_cu_pool: skip moves mean / CLS */
        if (a.pool_mode == ENG_CU_POOL_CLS) r1 = r0 + 1;
        if (a.pool_mode == ENG_CU_POOL_LAST) r0 = r1 - 1;
        /* LayerNorm the pooled rows into shared memory (bf16, as the graph
         * path stores them) */
        for (int r = r0 + warp; r < r1; r += MG_WARPS) {
            float v[4][8];
            const int lane = threadIdx.x & 31, nc = H >> 3;
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int c = lane + 32 * i;
                if (c < nc) {
                    uint4 u = mg_ldcg4(a.y + (size_t)r * H + c * 8);
                    const __nv_bfloat162 *h2 = (const __nv_bfloat162 *)&u;
#pragma unroll
                    for (int j = 0; j < 4; j++) {
                        const float2 f = __bfloat1622float2(h2[j]);
                        v[i][2 * j] = f.x;
                        v[i][2 * j + 1] = f.y;
                    }
                }
            }
            eng_cu_ln_finish<4>(v, H, lw->ln2_g, lw->ln2_b, rows_s + (size_t)(r - r0) * H, a.eps, NULL);
        }
        __syncthreads();
        const float inv = 1.f / (float)(r1 - r0);
        float ss = 0.f;
        for (int c = threadIdx.x; c < H; c += MG_THREADS) {
            float v = 0.f;
            for (int r = 0; r < r1 - r0; r++) v += __bfloat162float(rows_s[(size_t)r * H + c]);
            v *= inv;
            red[32 + c] = v;
            ss += v * v;
        }
        ss = eng_cu_warp_sum(ss);
        if ((threadIdx.x & 31) == 0) red[warp] = ss;
        __syncthreads();
        float tot = 0.f;
        for (int w = 0; w < MG_WARPS; w++) tot += red[w];
        const float sc = a.normalize ? 1.f / fmaxf(sqrtf(tot), 1e-12f) : 1.f;
        for (int c = threadIdx.x; c < H; c += MG_THREADS) a.pooled[(size_t)s * H + c] = red[32 + c] * sc;
        __syncthreads();
    }
}

/* ---- the kernel ------------------------------------------------------------ */

__global__ void __launch_bounds__(MG_THREADS, 1) mega_bert_kernel(mega_args a) {
    extern __shared__ __align__(16) unsigned char mg_smem[];
    const int H = a.H, lda = H + 8;
    bf16 *As = (bf16 *)mg_smem;                                        /* [maxt][H+8] */
    float *acc = (float *)(mg_smem + (size_t)a.maxt * lda * 2);         /* [8 warps][maxt][ntmax*8] */
    bf16 *Ws = (bf16 *)(acc + (size_t)MG_WARPS * a.maxt * a.ntmax * 8);  /* nbuf buffers of the GEMMs' weight rows */
    const int n = min(a.meta[ENG_CU_META_TOKENS], a.maxt);
    const int rows_pad = (n + 15) & ~15;
    unsigned long long target = 0; /* thread 0's: arrivals the next barrier waits for */
    int nb = 0;
    if (threadIdx.x == 0) {
        if (!a.cluster) {
            unsigned long long c;
            asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(c) : "l"(a.bar) : "memory");
            target = c - c % a.span;
        }
        if (a.prof && blockIdx.x == 0) a.prof[0] = mg_now();
    }
    for (int j = 0; j < a.nbuf; j++) mg_prefetch_stage(a, j, Ws);
#define PH (a.prof && blockIdx.x == 0 ? a.prof + 2 + MG_PS * nb + 3 : NULL)
#define WS(j) (Ws + (size_t)((j) % a.nbuf) * a.wsz)
#define SYNC() mg_grid_sync(a.bar, &target, a.prof, &nb, a.cluster)
    for (int l = 0; l < a.L; l++) {
        const eng_cu_layer *w = &a.layers[l];
        const int j = 4 * l;
        if (l == 0) mg_embed_prologue(a, n, rows_pad, As, lda);
        else mg_ln_prologue(a, a.layers[l - 1].ln2_g, a.layers[l - 1].ln2_b, n, rows_pad, As, lda);
        mg_stage_gemm<1>(a, As, lda, n, WS(j), w->qkv_b, 3 * H, H, MG_EPI_BIAS, NULL, a.qkv, acc, PH);
        mg_prefetch_stage(a, j + a.nbuf, Ws);
        SYNC();
        mg_stage_attention(a, n);
        SYNC();
        mg_stage_gemm<0>(a, a.ctx, H, n, WS(j + 1), w->ao_b, H, H, MG_EPI_RES, a.x, a.y, acc, PH);
        mg_prefetch_stage(a, j + 1 + a.nbuf, Ws);
        SYNC();
        mg_ln_prologue(a, w->ln1_g, w->ln1_b, n, rows_pad, As, lda);
        mg_stage_gemm<1>(a, As, lda, n, WS(j + 2), w->up_b, a.I, H, MG_EPI_GELU, NULL, a.inter, acc, PH);
        mg_prefetch_stage(a, j + 2 + a.nbuf, Ws);
        SYNC();
        mg_stage_gemm<0>(a, a.inter, a.I, n, WS(j + 3), w->down_b, H, a.I, MG_EPI_RES, a.x, a.y, acc, PH);
        mg_prefetch_stage(a, j + 3 + a.nbuf, Ws);
        SYNC();
    }
#undef SYNC
#undef WS
#undef PH
    asm volatile("cp.async.wait_all;\n" ::: "memory"); /* (only empty groups are left) */
    mg_stage_pool(a, As, acc);
    if (a.prof) {
        __syncthreads();
        if (threadIdx.x == 0) atomicMax(a.prof + 1, mg_now());
    }
}

/* ---- host side ------------------------------------------------------------ */

static int mg_tiles_per_block(int N, int G) { return (N / 8 + G - 1) / G; }

int eng_cu_mega_usable(const eng_cu_model *m, int tokens) {
    return m->mega_ok && tokens <= m->mega_maxt && !m->want_tok;
}

/* Shared memory for a grid of G blocks, rows of maxt, nbuf weight buffers;
 * *nt and *wsz (bf16 elements a buffer) returned. */
static size_t mg_smem_for(const eng_cu_model *m, int G, int maxt, int nbuf, int *nt, size_t *wsz) {
    const int Ns[4] = {3 * m->H, m->H, m->I, m->H}, Ks[4] = {m->H, m->H, m->H, m->I};
    *nt = 0;
    *wsz = 0;
    for (int i = 0; i < 4; i++) {
        const int t = mg_tiles_per_block(Ns[i], G);
        if (t > *nt) *nt = t;
        const size_t e = (size_t)t * 8 * (Ks[i] + 8);
        if (e > *wsz) *wsz = e;
    }
    return (size_t)maxt * (m->H + 8) * 2 + (size_t)MG_WARPS * maxt * *nt * 8 * 4 + (size_t)nbuf * *wsz * 2;
}

/* POSY_CUDA_MEGA_CLUSTER=C (2..16): the whole forward in ONE cluster of C
 * blocks, stages separated by barrier.cluster instead of the grid barrier
 * through L2 (~0.25 us against ~0.8: lab_cluster), buckets of at most 16
 * tokens, weights requested two GEMM stages ahead when two buffers fit.
 * Returns 1 when set up, 0 when the model or device does not take it (a
 * log line says why). */
static int mg_prepare_cluster(eng_cu_model *m, int C, int smem_max) {
    const int maxt = 16;
    const char *nb = getenv("POSY_CUDA_MEGA_NBUF"); /* "1": one weight buffer even where two fit (A/B) */
    int nt = 0, nbuf = nb && !strcmp(nb, "1") ? 1 : 2;
    size_t wsz = 0, smem = mg_smem_for(m, C, maxt, nbuf, &nt, &wsz);
    if (smem > (size_t)smem_max) {
        nbuf = 1;
        smem = mg_smem_for(m, C, maxt, nbuf, &nt, &wsz);
    }
    if (smem > (size_t)smem_max || (size_t)(32 + m->H) * 4 > (size_t)MG_WARPS * maxt * nt * 8 * 4) {
        POSY_WARN("cuda: small-batch kernel in one cluster of %d blocks needs %zu B of shared memory a block "
                  "(%d available): not used", C, smem, smem_max);
        return 0;
    }
    cudaError_t ce = cudaFuncSetAttribute(mega_bert_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (ce == cudaSuccess && C > 8)
        ce = cudaFuncSetAttribute(mega_bert_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    int nclusters = 0;
    if (ce == cudaSuccess) {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = (unsigned)C;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3((unsigned)C);
        cfg.blockDim = dim3(MG_THREADS);
        cfg.dynamicSmemBytes = smem;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        ce = cudaOccupancyMaxActiveClusters(&nclusters, mega_bert_kernel, &cfg);
    }
    if (ce != cudaSuccess || nclusters < 1) {
        cudaGetLastError();
        POSY_WARN("cuda: small-batch kernel: a cluster of %d blocks with %zu B of shared memory cannot run on "
                  "this device (%s): not used", C, smem, ce != cudaSuccess ? cudaGetErrorString(ce) : "0 clusters fit");
        return 0;
    }
    m->mega_cluster = C;
    m->mega_grid = C;
    m->mega_maxt = maxt;
    m->mega_nbuf = nbuf;
    m->mega_wsz = wsz;
    m->mega_smem = smem;
    m->mega_nt = nt;
    POSY_INFO("cuda: small-batch kernel in one cluster of %d blocks, <= %d tokens, %zu B shared memory, %d weight "
              "buffer(s)", C, maxt, smem, nbuf);
    return 1;
}

int eng_cu_mega_prepare(eng_cu_model *m, posy_err *err) {
    m->mega_ok = 0;
    /* opt-in: measured on the H200 it is not yet faster than the graph of
     * kernels at 16 or 64 tokens (docs/BENCHMARKS.md, "small-batch kernel") */
    const char *on = getenv("POSY_CUDA_MEGA");
    if (!on || strcmp(on, "1")) return 0;
    if (m->arch != ENG_CU_ARCH_BERT || m->rel || m->splade || m->H % 64 || m->I % 64 || m->H > 1024 || m->H < 64 ||
        (m->head_dim != 32 && m->head_dim != 64 && m->head_dim != 128) || m->L > 64)
        return 0; /* not this kernel's shape: the graph path serves it */
    int dev = 0, sms = 0, coop = 0, smem_max = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
    cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, dev);
    cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (!coop || sms <= 0) return 0;
    m->mega_cluster = 0;
    const char *cl = getenv("POSY_CUDA_MEGA_CLUSTER");
    if (cl && *cl) {
        char *end = NULL;
        const long C = strtol(cl, &end, 10);
        if (*end || C < 2 || C > 16) {
            POSY_WARN("cuda: POSY_CUDA_MEGA_CLUSTER=%s is not a cluster size 2..16: ignored", cl);
        } else if (!mg_prepare_cluster(m, (int)C, smem_max)) {
            return 0;
        }
    }
    if (!m->mega_cluster) {
        /* tiles a block owns per stage (QKV, O, UP, DOWN) and its weight rows */
        int nt = 0;
        size_t wsz = 0;
        const size_t smem = mg_smem_for(m, sms, MG_MAXT, 1, &nt, &wsz);
        const size_t pool_need = (size_t)(32 + m->H) * 4;
        if (smem > (size_t)smem_max || pool_need > (size_t)MG_MAXT * nt * 8 * 4) return 0;
        cudaError_t ce =
            cudaFuncSetAttribute(mega_bert_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (ce != cudaSuccess) return eng_cu_model_fail(err, "mega kernel shared memory", ce);
        int per_sm = 0;
        ce = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, mega_bert_kernel, MG_THREADS, smem);
        if (ce != cudaSuccess || per_sm < 1) return 0;
        m->mega_grid = sms;
        m->mega_maxt = MG_MAXT;
        m->mega_nbuf = 1;
        m->mega_wsz = wsz;
        m->mega_smem = smem;
        m->mega_nt = nt;
    }
    const size_t tab = ((size_t)m->L * sizeof(eng_cu_layer) + 255) & ~(size_t)255;
    cudaError_t ce = cudaMalloc(&m->mega_mem, tab + 256 + (size_t)MG_PROF_N * 8);
    if (ce != cudaSuccess) return eng_cu_model_fail(err, "mega kernel tables", ce);
    ce = cudaMemcpy(m->mega_mem, m->layers, (size_t)m->L * sizeof(eng_cu_layer), cudaMemcpyHostToDevice);
    if (ce == cudaSuccess) ce = cudaMemset((char *)m->mega_mem + tab, 0, 256 + (size_t)MG_PROF_N * 8);
    if (ce != cudaSuccess) return eng_cu_model_fail(err, "mega kernel tables", ce);
    m->mega_bar = (unsigned long long *)((char *)m->mega_mem + tab);
    m->mega_prof = getenv("POSY_CUDA_MEGA_PROFILE") ? (unsigned long long *)((char *)m->mega_mem + tab + 256) : NULL;
    m->mega_ok = 1;
    return 0;
}

cudaError_t eng_cu_mega_forward(eng_cu_model *m, cudaStream_t s, int T, int S) {
    const eng_cu_in_layout lay = eng_cu_in_layout_for(T, S);
    const int32_t *in = m->d_in;
    mega_args a;
    memset(&a, 0, sizeof a);
    a.layers = (const eng_cu_layer *)m->mega_mem;
    a.L = m->L; a.H = m->H; a.I = m->I; a.heads = m->heads; a.d = m->head_dim;
    a.gelu_tanh = m->gelu_tanh; a.pool_mode = m->pool_mode; a.normalize = m->normalize;
    a.eps = m->eps;
    a.scale = 1.f / sqrtf((float)m->head_dim);
    a.word = m->word; a.pos = m->pos; a.type = m->type;
    a.emb_g = m->emb_g; a.emb_b = m->emb_b;
    a.meta = in + lay.meta; a.cu = in + lay.cu; a.skip = in + lay.skip; a.ids = in + lay.ids; a.pos_ids = in + lay.pos;
    a.type_ids = in + lay.type;
    a.x = m->x; a.qkv = m->qkv; a.ctx = m->ctx; a.y = m->y; a.inter = m->inter;
    a.pooled = m->pooled;
    a.bar = m->mega_bar;
    a.prof = m->mega_prof;
    a.span = (unsigned long long)MG_BARRIERS_PER_LAYER * m->L * m->mega_grid;
    a.ntmax = m->mega_nt;
    a.maxt = m->mega_maxt;
    a.nbuf = m->mega_nbuf;
    a.wsz = m->mega_wsz;
    a.cluster = m->mega_cluster > 0;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(m->mega_grid);
    cfg.blockDim = dim3(MG_THREADS);
    cfg.dynamicSmemBytes = m->mega_smem;
    cfg.stream = s;
    cudaLaunchAttribute at[1];
    if (a.cluster) {
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = (unsigned)m->mega_cluster;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
    } else {
        at[0].id = cudaLaunchAttributeCooperative;
        at[0].val.cooperative = 1;
    }
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cudaError_t e = cudaLaunchKernelEx(&cfg, mega_bert_kernel, a);
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* eng_cu_qstream: a Qwen3 decoder's layers for one short query (<= 16
 * rows) as ONE persistent kernel whose weights stream into shared memory
 * without waiting on the layers' data dependencies.
 *
 * Why: the one-query chain (five PDL nodes a layer) requests a node's
 * weights only once that node's blocks are resident, i.e. about one node
 * ahead, and a node's blocks cannot sit beside a wide predecessor's: a
 * Qwen3-0.6B layer takes ~21.5 us on the H200 for 31.5 MB of weights that
 * HBM moves in ~8 us (dev/cuda/NOTES.md, runs 54-75).  Every attempt at
 * cheaper or fewer nodes lost; what was never tried for the decoders is
 * the weight stream decoupled from the activations -- weights do not
 * depend on anything, so they can run as far ahead as shared memory
 * holds.  (The small-batch kernel of the encoders, eng_cu_mega.cu, lost
 * to the chain because their weights are small: their time is the
 * hand-overs.  For Qwen3 the weights are the time.)
 *
 * How: one block an SM, all resident at once (the launcher checks), 8
 * consumer warps and 1 producer warp.
 * - The producer walks the block's weight stream -- every piece of every
 *   GEMM unit the block owns, layer after layer, in the order the
 *   consumers use them, laid out once per model by eng_cu_qs_pack so that
 *   each piece is ONE bulk copy -- into a ring of NS slots (an mbarrier
 *   full / empty pair a slot).  It waits only for a free slot.
 * - The consumers run five stages a layer separated by grid barriers
 *   (a growing 64-bit counter as eng_split_barrier's): QKV (the RMSNorm
 *   folded: ln1 is in W, each row scaled by rsqrt(mean(x^2) + eps)),
 *   attention (one block a head: q/k RMSNorm + rotary on its tiles, one
 *   key tile, eng_chain_head), O (+ the residual, in place), gate|up (the
 *   RMS fold, SwiGLU), down (+ the residual, in place).  Stores are bf16
 *   at the same points as the chain's.
 * - A GEMM unit is NC output columns times all of K; warp w takes the
 *   w-th eighth of K (its piece).  A fragments come straight from L2 in
 *   16-byte loads: within each 32-wide block of k, lane (g, t) holds
 *   k = 8t..8t+7 of rows g and g + 8, i.e. two mma k-steps whose k order
 *   is permuted -- the weights are packed in the same order (a piece is
 *   [k block][n tile][lane][8 bf16], each tile of 8 rows x 32 k
 *   row-major), so the sums are the same.  The warps' partials are added
 *   in a fixed order in shared memory: the same bits on every run.
 *
 * Units (Qwen3-0.6B, 132 SMs): QKV 128 of 32 columns (64 KB), O 128 of 8
 * (32 KB), gate|up 128 of 24 + 24 (96 KB), down 128 of 8 (48 KB); a block
 * owning more than one unit of a stage does them in turn.  Attention on
 * 16 blocks spread over the grid, the others stream meanwhile.
 *
 * Measured (H100, 2026-12-06; dev/cuda/NOTES.md, twenty-third session):
 * correct (lab_qstream min cosine >= 0.99999 against the reference;
 * e2e_qwen3 with it on: graph == eager, batches, min cosine 0.999762
 * against transformers at 28 layers) and SLOWER than the chain: a 16-token
 * Qwen3-0.6B query 841.2 against 651.6 us (bench_gpu, same harness, 3
 * rounds, run 97); 869 us for the 28 layers alone (lab, run 98).  The
 * stamps (p.prof) say why: the weights are issued 10-16 us ahead and have
 * landed when a stage starts, but each of the five stages a layer costs
 * 4-8 us of serial work -- every block reading the whole activation from
 * L2 (1-2 us, more for down's 96 KB), the partials' sum and stores, the
 * release + atomic of the grid barrier (1-2 us) and the wait for the
 * slowest block (~1 us); ~30 us a layer against the chain's ~23.  The
 * weights were never the critical path; the per-stage hand-over is, and
 * a grid barrier is no cheaper than a PDL hand-over.  Off by default
 * (POSY_CUDA_QSTREAM=1 turns it on).
 *
 * Tested by dev/cuda/lab_qstream.cu (memcheck clean, run 99; an fp32 reference rounding where the
 * kernel stores, several row counts, several sequences, causal and not,
 * same bits over replays) and end to end by tests/cuda/e2e_qwen3.py with
 * POSY_CUDA_QSTREAM=1.
 */
#include "eng_cu_chain_head.h"
#include "eng_cu_split.h"

#define QS_CW 8 /* consumer warps */
#define QS_CT (QS_CW * 32)
#define QS_THREADS (QS_CT + 32)
#define QS_MAX_SLOTS 32
#define QS_NT_MAX 8 /* n tiles a unit: gate|up with 32 + 32 columns */
#define QS_KB 12 /* k blocks of 32 a warp holds at once: 96 registers of A */
#define QS_D 128
#define QS_LD (QS_D + 8)
/* shared memory: mbarriers [2][32], row ranges [48] (+ pad), the warps'
 * row sums of squares [8][16], partials [8][NT_MAX][32] float4 (attention
 * tiles there too), then the ring */
#define QS_OFF_ROWS 512
#define QS_OFF_SS (QS_OFF_ROWS + 256)
#define QS_OFF_RED (QS_OFF_SS + QS_CW * 16 * 4)
#define QS_RED_BYTES (QS_CW * QS_NT_MAX * 32 * 16)
#define QS_OFF_RING (QS_OFF_RED + QS_RED_BYTES)
#define QS_SMEM_MAX (227 * 1024)

/* stage s of a layer: units, n tiles a unit, K */
struct qs_stage {
    int nu, nt, K;
};

static __host__ __device__ void qs_stages(const eng_cu_qs_args &p, qs_stage st[4]) {
    const int qkv_n = (p.heads + 2 * p.kv_heads) * QS_D;
    st[0] = {qkv_n / 32, 4, p.H};
    st[1] = {p.H / 8, 1, p.heads * QS_D};
    st[2] = {p.I / p.ci, 2 * (p.ci / 8), p.H};
    st[3] = {p.H / 8, 1, p.I};
}

static __host__ __device__ size_t qs_unit_bytes(const qs_stage &s) { return (size_t)s.K * s.nt * 16; }

/* units of stage s that block b owns: b, b + nb, ... */
static __host__ __device__ int qs_units_of(const qs_stage &s, int b, int nb) {
    return b < s.nu ? (s.nu - b + nb - 1) / nb : 0;
}

/* bytes of block b's stream a layer, and where stage s starts in it */
static __host__ __device__ size_t qs_layer_bytes(const qs_stage st[4], int b, int nb, int upto = 4) {
    size_t n = 0;
    for (int s = 0; s < upto; s++) n += qs_units_of(st[s], b, nb) * qs_unit_bytes(st[s]);
    return n;
}

/* ---- mbarriers and bulk copies ------------------------------------------ */

static __device__ __forceinline__ uint32_t qs_sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

static __device__ __forceinline__ void qs_mbar_wait(uint64_t *bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(qs_sa(bar)), "r"(parity)
                     : "memory");
}

static __device__ __forceinline__ void qs_mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(qs_sa(bar)) : "memory");
}

static __device__ __forceinline__ void qs_bulk(uint64_t *bar, void *dst, const void *src, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(qs_sa(bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     qs_sa(dst)),
                 "l"(src), "r"(bytes), "r"(qs_sa(bar))
                 : "memory");
}

static __device__ __forceinline__ unsigned long long qs_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* a diagnostic stamp (p.prof set: eng_cu.h says the layout) */
#define QS_STAMP(p, l, s, k)                                                                                      \
    do {                                                                                                         \
        if ((p).prof && threadIdx.x == 0)                                                                        \
            (p).prof[(((size_t)blockIdx.x * (p).L + (l)) * 5 + (s)) * 8 + (k)] = qs_now();                       \
    } while (0)

/* the consumers' own barrier (the producer warp never joins) */
static __device__ __forceinline__ void qs_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(QS_CT) : "memory"); }

/* every block's earlier stores visible to every block.  bar[0] counts
 * arrivals and only grows (so a launch starts at a multiple of the grid,
 * as eng_split_barrier's); each block polls it until its generation is
 * complete.  The alternative: the last block to arrive at a barrier -- its
 * acq_rel add sees every other block's release -- publishes the count of
 * barriers passed in bar[16] (its own 128-byte line), which the others
 * poll, so their loads never contend with the arrivals' atomics -- used
 * only with p.opt bit 0: measured SLOWER than every block polling the
 * counter (869.4 against 952.7 us for 28 layers, lab_qstream, run 98 on
 * an H100), which stays the default.  The two forms mix safely: a waiter
 * waits for its own generation, and a stale bar[16] is only smaller. */
static __device__ __forceinline__ void qs_grid_sync(unsigned long long *bar, int flag,
                                                    unsigned long long *stamp = nullptr, bool skip = false) {
    qs_sync();
    if (skip) return; /* an experiment (p.opt bit 2): no barrier, wrong results, the stream's own pace */
    if (threadIdx.x == 0) {
        const unsigned long long nb = gridDim.x;
        unsigned long long old, v;
        if (flag) { /* the last arriver publishes the generation */
            asm volatile("atom.add.acq_rel.gpu.global.u64 %0, [%1], 1;\n" : "=l"(old) : "l"(bar) : "memory");
            if (stamp) *stamp = qs_now();
            const unsigned long long gen = old / nb + 1;
            if (old % nb == nb - 1)
                asm volatile("st.release.gpu.global.u64 [%0], %1;\n" ::"l"(bar + 16), "l"(gen) : "memory");
            else
                do asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(bar + 16) : "memory");
                while (v < gen);
        } else { /* every block polls the counter itself (eng_split_barrier's form) */
            asm volatile("atom.add.release.gpu.global.u64 %0, [%1], 1;\n" : "=l"(old) : "l"(bar) : "memory");
            if (stamp) *stamp = qs_now();
            const unsigned long long target = (old / nb + 1) * nb;
            do asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(bar) : "memory");
            while (v < target);
        }
    }
    qs_sync();
}

struct qs_smem {
    uint64_t *full, *empty;
    int *arow;
    float *ss;
    float4 *red;
    unsigned char *ring;
};

/* ---- one GEMM unit ------------------------------------------------------- */

/* The calling warp's piece: acc[nt] += A(rows 0-15, its k range) x piece;
 * ss[h] += the squares of row g + 8h over its k range (SS).  Rows at or
 * past n_real read as zeros. */
template <int NT, bool SS>
static __device__ __forceinline__ void qs_piece(float (*acc)[4], float ss[2], const bf16 *X, int ldx, int kw0,
                                                int KB, int n_real, const unsigned char *slot, uint64_t *full,
                                                uint32_t parity, unsigned long long *wstamp, bool noload) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const bf16 *x0 = X + (size_t)g * ldx + kw0 + 8 * t, *x1 = x0 + (size_t)8 * ldx;
    const bool r0 = g < n_real && !noload, r1 = g + 8 < n_real && !noload; /* noload: an experiment, zeros */
    bool waited = false;
    for (int kb0 = 0; kb0 < KB; kb0 += QS_KB) {
        uint4 a0[QS_KB], a1[QS_KB];
#pragma unroll
        for (int i = 0; i < QS_KB; i++) {
            a0[i] = a1[i] = make_uint4(0u, 0u, 0u, 0u);
            if (kb0 + i < KB) {
                if (r0) a0[i] = __ldcg((const uint4 *)(x0 + (kb0 + i) * 32));
                if (r1) a1[i] = __ldcg((const uint4 *)(x1 + (kb0 + i) * 32));
            }
        }
        if (!waited) {
            qs_mbar_wait(full, parity);
            waited = true;
            if (wstamp && threadIdx.x == 0) *wstamp = qs_now();
        }
#pragma unroll
        for (int i = 0; i < QS_KB; i++) {
            if (kb0 + i >= KB) break;
            const uint4 *w = (const uint4 *)slot + (size_t)(kb0 + i) * NT * 32 + lane;
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const uint4 b = w[nt * 32];
                const uint32_t f0[4] = {a0[i].x, a1[i].x, a0[i].y, a1[i].y};
                const uint32_t f1[4] = {a0[i].z, a1[i].z, a0[i].w, a1[i].w};
                eng_mma16816(acc[nt], f0, b.x, b.y);
                eng_mma16816(acc[nt], f1, b.z, b.w);
            }
            if (SS) {
                const uint32_t v0[4] = {a0[i].x, a0[i].y, a0[i].z, a0[i].w};
                const uint32_t v1[4] = {a1[i].x, a1[i].y, a1[i].z, a1[i].w};
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float2 p0 = __bfloat1622float2(*(const __nv_bfloat162 *)&v0[e]);
                    const float2 p1 = __bfloat1622float2(*(const __nv_bfloat162 *)&v1[e]);
                    ss[0] = fmaf(p0.x, p0.x, fmaf(p0.y, p0.y, ss[0]));
                    ss[1] = fmaf(p1.x, p1.x, fmaf(p1.y, p1.y, ss[1]));
                }
            }
        }
    }
}

enum { QS_EPI_QKV = 0, QS_EPI_RES = 1, QS_EPI_GLU = 2 };

/* One stage's units for this block: each warp its piece, then the
 * partials summed over the warps in order and stored.  useq counts the
 * block's units so far (piece j = 8 useq + warp, slot j mod NS). */
template <int NT, int EPI>
static __device__ void qs_stage_run(const eng_cu_qs_args &p, const qs_smem &sm, const qs_stage &st, const bf16 *X,
                                    bf16 *Y, int ldy, int n_real, int &useq, int l, int si) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nb = gridDim.x, b = blockIdx.x;
    const int KB = st.K / (32 * QS_CW), kw0 = warp * (st.K / QS_CW);
    constexpr bool SS = EPI != QS_EPI_RES;
    for (int u = b; u < st.nu; u += nb, useq++) {
        const int j = useq * QS_CW + warp, slot = j % p.slots;
        float acc[NT][4];
#pragma unroll
        for (int nt = 0; nt < NT; nt++) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
        float ss[2] = {0.f, 0.f};
        qs_piece<NT, SS>(acc, ss, X, st.K, kw0, KB, n_real, sm.ring + (size_t)slot * p.slot_bytes, sm.full + slot,
                         (uint32_t)(j / p.slots) & 1u,
                         p.prof && u == b ? p.prof + (((size_t)b * p.L + l) * 5 + si) * 8 + 1 : nullptr,
                         (p.opt & 2) != 0);
        __syncwarp();
        if (lane == 0) qs_mbar_arrive(sm.empty + slot); /* the slot is free for the producer */
#pragma unroll
        for (int nt = 0; nt < NT; nt++)
            sm.red[(warp * QS_NT_MAX + nt) * 32 + lane] = make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
        if (SS) {
            ss[0] += __shfl_xor_sync(0xffffffffu, ss[0], 1);
            ss[0] += __shfl_xor_sync(0xffffffffu, ss[0], 2);
            ss[1] += __shfl_xor_sync(0xffffffffu, ss[1], 1);
            ss[1] += __shfl_xor_sync(0xffffffffu, ss[1], 2);
            if ((lane & 3) == 0) {
                sm.ss[warp * 16 + (lane >> 2)] = ss[0];
                sm.ss[warp * 16 + 8 + (lane >> 2)] = ss[1];
            }
        }
        qs_sync();
        constexpr int NE = EPI == QS_EPI_GLU ? NT / 2 : NT; /* epilogue items: n tiles (gate tiles for GLU) */
        const int i = threadIdx.x;
        if (i < NE * 32) {
            const int nt = i >> 5, L = i & 31, g = L >> 2, t = L & 3;
            float4 c = sm.red[nt * 32 + L];
            for (int w = 1; w < QS_CW; w++) {
                const float4 v = sm.red[(w * QS_NT_MAX + nt) * 32 + L];
                c.x += v.x; c.y += v.y; c.z += v.z; c.w += v.w;
            }
            float rs[2] = {1.f, 1.f};
            if (SS)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    float s = 0.f;
#pragma unroll
                    for (int w = 0; w < QS_CW; w++) s += sm.ss[w * 16 + g + 8 * h];
                    rs[h] = rsqrtf(s / (float)st.K + p.eps);
                }
            const float v[2][2] = {{c.x, c.y}, {c.z, c.w}};
            if (EPI == QS_EPI_QKV) {
                const int col = u * (NT * 8) + nt * 8 + 2 * t;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = g + 8 * h;
                    if (r < p.M) *(uint32_t *)(Y + (size_t)r * ldy + col) = eng_pack_bf16(v[h][0] * rs[h], v[h][1] * rs[h]);
                }
            } else if (EPI == QS_EPI_RES) {
                const int col = u * 8 + 2 * t;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = g + 8 * h;
                    if (r >= p.M) continue;
                    uint32_t o = 0u;
                    if (r < n_real) {
                        const uint32_t rr = __ldcg((const unsigned int *)(Y + (size_t)r * ldy + col));
                        const float2 rv = __bfloat1622float2(*(const __nv_bfloat162 *)&rr);
                        o = eng_pack_bf16(v[h][0] + rv.x, v[h][1] + rv.y);
                    }
                    *(uint32_t *)(Y + (size_t)r * ldy + col) = o;
                }
            } else { /* GLU: gate tile nt, up tile nt + NT / 2 */
                float4 d = sm.red[(nt + NE) * 32 + L];
                for (int w = 1; w < QS_CW; w++) {
                    const float4 e = sm.red[(w * QS_NT_MAX + nt + NE) * 32 + L];
                    d.x += e.x; d.y += e.y; d.z += e.z; d.w += e.w;
                }
                const float up[2][2] = {{d.x, d.y}, {d.z, d.w}};
                const int col = u * (NE * 8) + nt * 8 + 2 * t;
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int r = g + 8 * h;
                    if (r >= p.M) continue;
                    float o[2];
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const float gv = v[h][e] * rs[h], uv = up[h][e] * rs[h];
                        o[e] = gv / (1.f + __expf(-gv)) * uv;
                    }
                    *(uint32_t *)(Y + (size_t)r * ldy + col) = eng_pack_bf16(o[0], o[1]);
                }
            }
        }
        qs_sync(); /* red and ss are the next unit's */
    }
}

/* ---- attention: one head a block ------------------------------------------ */

static __device__ void qs_attention(const eng_cu_qs_args &p, const qs_smem &sm, int l, int h, int n_real) {
    constexpr int D = QS_D, LD = QS_LD, TILE = 16 * LD;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int qkv_n = (p.heads + 2 * p.kv_heads) * D, attn_n = p.heads * D, kv = h / (p.heads / p.kv_heads);
    bf16 *Qs = (bf16 *)sm.red, *Ks = Qs + TILE, *Vs = Ks + TILE;
    eng_async_rows<16, D, QS_CT>(Qs, p.qkv + h * D, qkv_n, n_real);
    eng_async_rows<16, D, QS_CT>(Ks, p.qkv + attn_n + kv * D, qkv_n, n_real);
    eng_async_rows<16, D, QS_CT>(Vs, p.qkv + attn_n + (p.kv_heads + kv) * D, qkv_n, n_real);
    eng_async_commit();
    eng_async_wait<0>();
    qs_sync();
    if (threadIdx.x < 128) {
        const float *nw = p.norms ? p.norms + ((size_t)l * 2 + (threadIdx.x >> 6)) * D : nullptr;
        eng_attn_qk_rows<D, 64>(threadIdx.x < 64 ? Qs : Ks, n_real, 0, nw, p.qk, (int)threadIdx.x & 63, sm.arow + 32);
    }
    qs_sync();
    constexpr int DC = D / QS_CW;
    const int lo[2] = {sm.arow[g], sm.arow[g + 8]}, hi[2] = {sm.arow[16 + g], sm.arow[16 + g + 8]};
    float o[DC / 8][4], ls[2];
    eng_chain_head<D, LD, DC>(Qs, Ks, Vs, lo, hi, p.scale * 1.4426950408889634f, o, ls, warp * DC);
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int r = g + 8 * hh;
        if (r >= p.M) continue;
        const float sc = r < n_real ? ls[hh] : 0.f;
#pragma unroll
        for (int dn = 0; dn < DC / 8; dn++)
            *(uint32_t *)(p.ctx + (size_t)r * attn_n + h * D + warp * DC + dn * 8 + 2 * t) =
                eng_pack_bf16(o[dn][2 * hh] * sc, o[dn][2 * hh + 1] * sc);
    }
    qs_sync(); /* the tiles live where the next unit's partials go */
}

/* The end of stage si of layer l: its stamps (stores done, barrier
 * arrived and passed, the next stage's start) around the grid barrier. */
static __device__ __forceinline__ void qs_stage_end(const eng_cu_qs_args &p, int l, int si, unsigned long long *pr) {
    QS_STAMP(p, l, si, 2);
    qs_grid_sync(p.bar, p.opt & 1, pr ? pr + si * 8 + 3 : nullptr, (p.opt & 4) != 0);
    QS_STAMP(p, l, si, 4);
    if (si < 4) QS_STAMP(p, l, si + 1, 0);
}

/* ---- the kernel ------------------------------------------------------------ */

template <int CI8>
__global__ void __launch_bounds__(QS_THREADS, 1) qs_kernel(const __grid_constant__ eng_cu_qs_args p) {
    extern __shared__ __align__(128) unsigned char qs_sm[];
    qs_smem sm;
    sm.full = (uint64_t *)qs_sm;
    sm.empty = sm.full + QS_MAX_SLOTS;
    sm.arow = (int *)(qs_sm + QS_OFF_ROWS);
    sm.ss = (float *)(qs_sm + QS_OFF_SS);
    sm.red = (float4 *)(qs_sm + QS_OFF_RED);
    sm.ring = qs_sm + QS_OFF_RING;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, b = blockIdx.x, nb = gridDim.x;
    qs_stage st[4];
    qs_stages(p, st);
    if (threadIdx.x == 0) {
        for (int i = 0; i < p.slots; i++) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(qs_sa(sm.full + i)) : "memory");
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(qs_sa(sm.empty + i)) : "memory");
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (warp == QS_CW) { /* the producer: the block's stream, piece by piece, as slots free */
        if (lane == 0) {
            const unsigned char *src = p.img + (size_t)b * p.block_bytes;
            int j = 0;
            for (int l = 0; l < p.L; l++)
                for (int s = 0; s < 4; s++) {
                    const uint32_t pb = (uint32_t)(qs_unit_bytes(st[s]) / QS_CW);
                    const int si = s ? s + 1 : 0; /* the stamps' stage index: attention is 1 */
                    for (int u = b; u < st[s].nu; u += nb)
                        for (int w = 0; w < QS_CW; w++, j++, src += pb) {
                            const int slot = j % p.slots;
                            if (j >= p.slots) qs_mbar_wait(sm.empty + slot, (uint32_t)(j / p.slots - 1) & 1u);
                            qs_bulk(sm.full + slot, sm.ring + (size_t)slot * p.slot_bytes, src, pb);
                            if (p.prof && u == b && (w == 0 || w == QS_CW - 1))
                                p.prof[(((size_t)b * p.L + l) * 5 + si) * 8 + (w ? 6 : 5)] = qs_now();
                        }
                }
        }
        return;
    }
    /* the consumers: the input block is never written by the forward, so
     * its rows are read before the wait; x after it */
    const int n_real = min(p.M, *p.n_rows_dev);
    if (threadIdx.x < 16) eng_chain_rows(sm.arow, n_real, p.cu_seqlens, *p.n_seqs_dev, p.causal);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    qs_sync();
    const int qkv_n = (p.heads + 2 * p.kv_heads) * QS_D;
    /* the attention heads' blocks, spread over the grid */
    const int hstride = max(1, nb / p.heads);
    const int head = (b % hstride == 0 && b / hstride < p.heads) ? b / hstride : -1;
    int useq = 0;
    for (int l = 0; l < p.L; l++) {
        if (l == p.L - 1) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
        unsigned long long *pr = p.prof ? p.prof + ((size_t)b * p.L + l) * 40 : nullptr; /* this layer's stamps */
        QS_STAMP(p, l, 0, 0);
        qs_stage_run<4, QS_EPI_QKV>(p, sm, st[0], p.x, p.qkv, qkv_n, n_real, useq, l, 0);
        qs_stage_end(p, l, 0, pr);
        if (head >= 0) qs_attention(p, sm, l, head, n_real);
        qs_stage_end(p, l, 1, pr);
        qs_stage_run<1, QS_EPI_RES>(p, sm, st[1], p.ctx, p.x, p.H, n_real, useq, l, 2);
        qs_stage_end(p, l, 2, pr);
        qs_stage_run<2 * CI8, QS_EPI_GLU>(p, sm, st[2], p.x, p.act, p.I, n_real, useq, l, 3);
        qs_stage_end(p, l, 3, pr);
        qs_stage_run<1, QS_EPI_RES>(p, sm, st[3], p.act, p.x, p.H, n_real, useq, l, 4);
        qs_stage_end(p, l, 4, pr);
    }
}

/* ---- the image ---------------------------------------------------------- */

/* Layer l, stage s of every block's stream from W (row-major [rows][K]):
 * one 16-byte chunk a thread. */
__global__ void qs_pack_kernel(eng_cu_qs_args p, const bf16 *W, unsigned char *img, int l, int s, int nb) {
    qs_stage st[4];
    qs_stages(p, st);
    const qs_stage &g = st[s];
    const size_t ub = qs_unit_bytes(g), per = ub / 16, total = per * (size_t)g.nu;
    const int kw = g.K / QS_CW, pc = (int)(per / QS_CW); /* chunks a piece */
    for (size_t c = blockIdx.x * (size_t)blockDim.x + threadIdx.x; c < total; c += (size_t)gridDim.x * blockDim.x) {
        const int u = (int)(c / per), r = (int)(c % per), b = u % nb, jj = u / nb;
        const int w = r / pc, rr = r % pc, kb = rr / (g.nt * 32), nt = (rr / 32) % g.nt, lane = rr % 32;
        const int gi = lane >> 2, t = lane & 3;
        int row;
        if (s == 2) {
            const int half = g.nt / 2;
            row = nt < half ? u * p.ci + nt * 8 + gi : p.I + u * p.ci + (nt - half) * 8 + gi;
        } else
            row = u * (g.nt * 8) + nt * 8 + gi;
        const int k = w * kw + kb * 32 + 8 * t;
        unsigned char *dst = img + (size_t)b * p.block_bytes + (size_t)l * qs_layer_bytes(st, b, nb) +
                             qs_layer_bytes(st, b, nb, s) + (size_t)jj * ub + (size_t)r * 16;
        *(uint4 *)dst = *(const uint4 *)(W + (size_t)row * g.K + k);
    }
}

/* ---- host side ------------------------------------------------------------ */

static int qs_grid(void) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev))
        return 0;
    return sms;
}

int eng_cu_qs_ok(int M, int H, int I, int heads, int kv_heads, int head_dim) {
    const int nb = qs_grid();
    return M >= 1 && M <= 16 && head_dim == QS_D && heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0 &&
           heads <= nb && H % 256 == 0 && I % 256 == 0 && (heads * QS_D) % 256 == 0 && (I % 24 == 0 || I % 16 == 0);
}

static int eng_cu_qs_ci(int I) { return I % 24 == 0 ? 24 : 16; }

size_t eng_cu_qs_setup(eng_cu_qs_args *p) {
    const int nb = qs_grid();
    if (nb < 1) return 0;
    p->ci = eng_cu_qs_ci(p->I);
    memset(&p->qk, 0, sizeof p->qk); /* what attention's q/k norm + rotary reads */
    p->qk.rope = p->rope;
    p->qk.rope_rows = p->rope_rows;
    p->qk.qk_eps = p->eps;
    qs_stage st[4];
    qs_stages(*p, st);
    p->block_bytes = (size_t)p->L * qs_layer_bytes(st, 0, nb); /* block 0 owns the most units */
    size_t piece = 0;
    for (int s = 0; s < 4; s++) piece = piece > qs_unit_bytes(st[s]) / QS_CW ? piece : qs_unit_bytes(st[s]) / QS_CW;
    p->slot_bytes = (int)((piece + 127) / 128 * 128);
    p->slots = (int)((QS_SMEM_MAX - QS_OFF_RING) / p->slot_bytes);
    if (p->slots > QS_MAX_SLOTS) p->slots = QS_MAX_SLOTS;
    if (p->slots < 2) return 0;
    return p->block_bytes * nb;
}

cudaError_t eng_cu_qs_pack(cudaStream_t s, const eng_cu_qs_args *p, unsigned char *img, int l, const bf16 *Wqkv,
                           const bf16 *Wo, const bf16 *Wgu, const bf16 *Wd) {
    const int nb = qs_grid();
    const bf16 *W[4] = {Wqkv, Wo, Wgu, Wd};
    for (int st = 0; st < 4; st++) {
        qs_pack_kernel<<<1024, 256, 0, s>>>(*p, W[st], img, l, st, nb);
        const cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

cudaError_t eng_cu_qs_run(cudaStream_t s, const eng_cu_qs_args *p) {
    const int nb = qs_grid();
    if (!p->img || !p->block_bytes || p->slots < 2 || nb < p->heads ||
        !eng_cu_qs_ok(p->M, p->H, p->I, p->heads, p->kv_heads, QS_D) || p->ci != eng_cu_qs_ci(p->I) ||
        ((uintptr_t)p->img & 15) || (p->block_bytes & 15))
        return cudaErrorNotSupported;
    void (*k)(const eng_cu_qs_args) = p->ci == 24 ? qs_kernel<3> : qs_kernel<2>;
    const size_t smem = QS_OFF_RING + (size_t)p->slots * p->slot_bytes;
    static int attr_done[2] = {0, 0};
    const int ki = p->ci == 24;
    if (!attr_done[ki]) {
        cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, QS_SMEM_MAX);
        if (e != cudaSuccess) return e;
        int per = 0;
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, QS_THREADS, smem);
        if (e != cudaSuccess) return e;
        if (per < 1) return cudaErrorNotSupported;
        attr_done[ki] = 1;
    }
    return eng_cu_launch(k, dim3(nb), dim3(QS_THREADS), smem, s, *p);
}

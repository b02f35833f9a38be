/* eng_cu_chain_gemm: the GEMM of the one-query chain (skinny v3), which
 * the engine runs for buckets of <= 64 tokens (Qwen3: 32; eng_cu_model.cu).
 *
 * In the chain every kernel of the forward is ours and launched with
 * programmatic dependent launch, so this one can start while its
 * predecessor still runs.  Before griddepcontrol.wait -- i.e. overlapping
 * the predecessor -- it lets its own dependents launch and requests its
 * whole weight slice (16 columns x K) into shared memory -- one bulk copy
 * (TMA) a row, landing on an mbarrier (POSY_CUDA_CHAIN_BULK=0: 16-byte
 * cp.async by every thread; the bulk copies took Qwen3-0.6B's 16-token
 * query from 864 to 786 us on the H200).  At one m tile the launcher may
 * pass a copy of W whose rows carry the shared-memory padding (wp, PW):
 * a block's rows are then one contiguous run and one bulk copy (two with
 * SwiGLU), which lab_stream measured landing 8-15% sooner and issued in
 * 0.26 instead of 0.8-1.6 us (Qwen3-0.6B's 16-token query 622.5 -> 601.1
 * us, 2026-12-04 run 63; the model decides where: eng_cu_model.h,
 * chain_padw);
 * after the wait only X (tiny, in L2) remains to be read, a warp's share
 * in one burst of 16-byte loads into registers (a few bursts for 17-64
 * rows and long K, at most 64 registers of X at a time).  The bias comes
 * into shared memory with the weights, the residual rows right after the
 * wait, beside X -- so the epilogue waits on no load of its own.  With
 * ENG_CU_EPI_SWIGLU a block takes 8 gate rows of W and the matching 8 up
 * rows and writes silu(gate) * up (Qwen3's MLP: one kernel fewer).
 * With nm.fold (Qwen3's RMSNorms, their weights folded into W at load) X
 * is used raw and each output row is scaled by rsqrt(mean(x^2) + eps): the
 * row sums of squares come from two extra mma a k-step of the X fragments
 * against themselves (the diagonal of X X^T), so the norm costs no pass
 * over X (the norm prologue, NORM, executed 3.2x the instructions of a
 * plain GEMM on the H200; the fold took Qwen3's 16-token query from 739 to
 * 694 us).
 * With nm.fold == 2 (the encoders' LayerNorms, gamma folded into W and W
 * beta into the bias at load) the same X raw gives each row's sum too --
 * one more mma a k-step, X against a B of ones -- and the epilogue makes
 * rs (acc - mu colsum) + b' from the row's mean and variance and the
 * folded W's column sums; block 0 stores the rows' (mu, rs), from which a
 * later O / down projection adds the post-norm residual (res, a
 * compile-time variant of the plain kernel: (R - mu) rs gamma + beta).
 * That removes both LayerNorm kernels of a layer; alone it was no faster
 * on the H200 (16 tokens: MiniLM 74.0 against 73.8 us, BERT-base 220.2
 * against 221.2), because with no norm kernel left every kernel of the
 * chain launched at once.  With LATE (each kernel lets its dependents
 * launch after its own wait) it pays, and is the default in encoder
 * buckets of at most 32 tokens (eng_cu_model.cu, chain_ln and
 * chain_late_mask; 16 tokens MiniLM 74.2 -> 69.5 us, BERT-base 218.8 ->
 * 200.3 on the H200; POSY_CUDA_CHAIN_LN=0 turns it off).
 * Optionally (pf, POSY_CUDA_CHAIN_L2=d) each block also asks L2, before
 * its wait, for its share of the weights of the GEMM d GEMMs later, so HBM
 * keeps streaming through the nodes that read none.  lab_chain measured the floor of such
 * a step at ~1.5 us (2.1 us as a plain graph node); on the H200 the chain
 * takes a 16-token MiniLM query from 132 to 75 us (docs/BENCHMARKS.md,
 * "One query").
 *
 * With ATT (eng_cu_chain_att; Qwen3-0.6B's QKV at <= 16 rows) the launch
 * also does the layer's attention: the blocks of each K/V group count
 * themselves as they finish, and the group's lead block computes its
 * attention from the Q|K|V the others stored (sk3_att_tail) -- the
 * attention node between QKV and O, and its dependency, gone.  The other
 * instantiations are untouched by it (their SASS compared equal with
 * cuobjdump, all 504).
 *
 * A block owns 16 output columns, or 32 (NC) where N >= 2048 and its
 * launch is built for it (chain_nc): each block reads all of X, so at 16
 * rows the N / 16 copies of X a launch reads from L2 weigh as much as its
 * weights, and blocks of 32 halve them.  On the H200 (2026-12-04 runs
 * 49-50) that took Qwen3-0.6B's 16-token query from 687.5 to 623.6 us and
 * BERT-base's from 184.0 to 179.1 (32 tokens 250.9 -> 246.6);
 * all-MiniLM-L6's GEMMs (N <= 1536) lose with it (36-48 blocks: 16
 * tokens 63.5 -> 65.0 us) and keep 16.  POSY_CUDA_CHAIN_NC=16 turns it off.
 *
 * A warp owns G groups of 64 k (K = 64 * G * WARPS).  Inside a group a
 * lane loads 8 values of its X row and of its weight row at 8t and 8 more
 * at 32 + 8t (t = lane % 4; where sk3_half says so) and feeds them to 4
 * mma steps: the k order inside the group is permuted identically for A
 * and B, which the sum does not see.  So each 16-byte load instruction of
 * X reads whole 32-byte sectors -- 16 consecutive values a lane used half
 * of each sector an instruction (ncu on the H200); the change took a
 * 16-token BERT-base query from 252 to 220 us.  The warps'
 * partial tiles meet in shared memory in a fixed order (skinny_finish),
 * so results are reproducible bit for bit.  Tested by dev/cuda/lab_gemm.cu
 * (v3 checks against fp64: bulk and cp.async, with and without the norm
 * prologue, the SwiGLU epilogue).
 */
#include "eng_cu_chain_head.h"
#include "eng_cu_skinny.h"
#include "eng_cu_trace.h"

int eng_cu_chain_bulk = 1;
thread_local int eng_cu_chain_late = 0;
thread_local const eng_cu_chain_att *eng_cu_chain_att_next = NULL;
ENG_CU_TRACE_UNIT("chain_gemm")

/* Where a lane's second 8 values of a 64-value group start: 32 (whole
 * sectors a load instruction) for one m tile and K >= 768 (G > 1), 8 (16
 * consecutive values a lane) otherwise, where the first layout measured
 * 1-5% slower on the H200 (same-run A/B: 32 and 64 tokens, and MiniLM's
 * K = 384) -- and the padding after each weight
 * row in shared memory that keeps the 8 lanes of a 16-byte load phase on
 * distinct banks with that layout (rows 64 bytes apart mod 128 for the
 * first, 16 for the second). */
static __host__ __device__ constexpr int sk3_half(int MT, int G) { return MT == 1 && G > 1 ? 32 : 8; }
static __host__ __device__ constexpr int sk3_pad(int MT, int G) { return sk3_half(MT, G); }

/* groups of X a lane holds at once: the largest divisor of G with at most
 * ENG_CU_SK3_XCHUNK (default 8) uint4 pairs (64 registers) for the MT m
 * tiles.  An experiment's build may lower the cap (-DENG_CU_SK3_XCHUNK=4:
 * BERT-base's down projection, G = 6, then holds X in two chunks with ~88
 * registers a thread instead of 130, so more of its blocks could sit
 * beside the up GEMM's); on the H200 that made BERT-base's 16-token query
 * 263 us against 220 (2026-12-03 run 9), so the default stays 8.  Whether
 * the second round of X loads is the cost is not known: run 10 saw the
 * same +40 us from an unrelated runtime branch in this kernel, so its
 * scheduling may be what moved. */
#ifndef ENG_CU_SK3_XCHUNK
#define ENG_CU_SK3_XCHUNK 8
#endif
static __host__ __device__ constexpr int skinny3_chunk(int MT, int G) {
    int c = G;
    while (c > 1 && (G % c || MT * c > ENG_CU_SK3_XCHUNK)) c--;
    return c;
}

/* The norm prologue (NORM): X's rows are normalised in registers before
 * the products -- LayerNorm (mean and variance in two exact passes, as
 * eng_cu_ln_finish) or, with no beta, RMSNorm -- with the row statistics
 * summed over the lanes and warps that hold the row; rows at or past the
 * real count read as zero, as the norm kernels write them.  Block 0 also
 * stores the normalised rows (out) when the forward needs them again as a
 * residual.  Needs a warp's whole share of X in registers (one chunk). */
template <int MT, int G, int WARPS>
static __device__ __forceinline__ void sk3_norm(uint4 (*xa)[2][G][2], const eng_cu_chain_norm &nm, const float *gs,
                                                const float *bs, float (*red)[MT * 16], int M, int K, int kw) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
    const int n_real = min(M, *nm.n_rows_dev);
    const bool rms = nm.beta == NULL;
    float mean[MT][2], rstd[MT][2];
    for (int pass = rms ? 1 : 0; pass < 2; pass++) {
        float sum[MT][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float a = 0.f;
                const float mu = pass ? (rms ? 0.f : mean[mt][h]) : 0.f;
#pragma unroll
                for (int q = 0; q < G; q++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const __nv_bfloat162 *b2 = (const __nv_bfloat162 *)&xa[mt][h][q][e];
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            const float2 f = __bfloat1622float2(b2[i]);
                            if (pass) a += (f.x - mu) * (f.x - mu) + (f.y - mu) * (f.y - mu);
                            else a += f.x + f.y;
                        }
                    }
                a += __shfl_xor_sync(0xffffffffu, a, 1);
                a += __shfl_xor_sync(0xffffffffu, a, 2);
                sum[mt][h] = a;
            }
        if ((lane & 3) == 0)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int h = 0; h < 2; h++) red[warp][mt * 16 + 8 * h + g] = sum[mt][h];
        __syncthreads();
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                float a = 0.f;
                for (int w = 0; w < WARPS; w++) a += red[w][mt * 16 + 8 * h + g];
                if (pass) rstd[mt][h] = rsqrtf(a / (float)K + nm.eps);
                else mean[mt][h] = a / (float)K;
            }
        __syncthreads(); /* red is reused by the next pass */
    }
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = mt * 16 + 8 * h + g;
            const float mu = rms ? 0.f : mean[mt][h], rs = rstd[mt][h];
#pragma unroll
            for (int q = 0; q < G; q++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int k = kw + 64 * q + sk3_half(MT, G) * e;
                    __nv_bfloat162 *b2 = (__nv_bfloat162 *)&xa[mt][h][q][e];
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        const float2 f = __bfloat1622float2(b2[i]);
                        float y0 = (f.x - mu) * rs * gs[k + 2 * i], y1 = (f.y - mu) * rs * gs[k + 2 * i + 1];
                        if (!rms) { y0 += bs[k + 2 * i]; y1 += bs[k + 2 * i + 1]; }
                        b2[i] = r < n_real ? __floats2bfloat162_rn(y0, y1) : __floats2bfloat162_rn(0.f, 0.f);
                    }
                    if (nm.out && blockIdx.x == 0 && r < M) *(uint4 *)(nm.out + (size_t)r * K + k) = xa[mt][h][q][e];
                }
        }
}

/* what a launch does with X before its products: nothing, the norm
 * prologue (sk3_norm), the RMS fold (rows raw, each output scaled by its
 * row's rsqrt(mean(x^2) + eps), the norm's weights folded into W), or the
 * LayerNorm fold (rows raw, each output rs (sum - mu colsum), the row's
 * mean from X against ones and its sum of squares as for the RMS fold) */
enum { SK3_PLAIN = 0, SK3_NORM = 1, SK3_FOLD = 2, SK3_LNFOLD = 3 };

/* Shared memory past the residual rows, for the LayerNorm fold and the
 * LayerNorm residual (ext): the block's NC column sums, gamma and beta
 * (fp32), the residual rows' (mu, rs), the fold's rows' (mu, rs), and the
 * warps' shares of the row sums [WARPS][MT * 16]. */
static __host__ __device__ constexpr size_t sk3_ext_bytes(int MT, int WARPS, int NC) {
    return 3 * (size_t)NC * 4 + 2 * (size_t)MT * 16 * 8 + (size_t)WARPS * MT * 16 * 4;
}

/* The kernel's shared memory (the layout at the top of skinny3_kernel):
 * weights, the norm prologue's gamma and beta, the warps' partial tiles,
 * bias, residual rows and the ext part. */
static __host__ __device__ constexpr size_t sk3_core_bytes(int MT, int K, int WARPS, bool norm, bool ext, int NC) {
    return (size_t)NC * (K + sk3_pad(MT, K / 64 / WARPS)) * 2 + (norm ? (size_t)8 * K : 0) +
           (size_t)WARPS * MT * 16 * (NC + 1) * 4 + (size_t)NC * 2 + (size_t)MT * 16 * NC * 2 +
           (ext ? sk3_ext_bytes(MT, WARPS, NC) : 0);
}

/* The attention tail (ATT, eng_cu_chain_att): head size 128 only, its
 * shared memory past the core part (16-byte aligned): the rotary rows of
 * positions 0-15 [16][D] and the q / k norm weights [D] each (fp32, copied
 * before the wait), then each query row's key range and position
 * (rlo, rhi, rpos [16] each) and 16 bytes spare. */
#define SK3_ATT_D 128
static __host__ __device__ constexpr size_t sk3_att_off(size_t core) { return (core + 15) / 16 * 16; }
static __host__ __device__ constexpr size_t sk3_att_bytes() { return (size_t)18 * SK3_ATT_D * 4 + 64 * 4; }

/* The attention tail of the QKV launch (eng_cu_chain_att).  Each K/V
 * group has a lead block, its first Q block (sk3_att_lead); the group's
 * other blocks, once their Q, K or V columns are stored, count themselves
 * on the group's counter (bar.sync, then thread 0's release add, which
 * returns nothing: they leave at once) and the lead, after its own
 * columns, polls the counter with acquire loads until all have come,
 * sets it back to 0, and brings the group's Q, K and V rows into shared
 * tiles where the weights were (loads that bypass L1), applies the q/k
 * norm + rotary (two warps a tile, the rotary rows and norm weights
 * already in shared memory), then computes the attention with the
 * head's columns split over warps (eng_chain_head, 32 columns a warp,
 * each computing S again) and stores O / l as bf16 -- rows at or past
 * the real count as zeros.  The lead may wait on blocks of its launch
 * only: every block has started before any waits (the launch fits the GPU
 * in one wave, launch3 checks; and the polls come after griddepcontrol.wait).
 * First version: the group's last block, found by an acquire-release add
 * every block waited on, did the attention (two warps) -- 674 us a
 * 16-token Qwen3-0.6B query with __threadfence, 646.5 with the acq_rel add,
 * against 604.0 with the attention node (H200, runs 69-70); the trace
 * (run 71) had every block 1.4 us later at its end and the tail 3.5 us.
 * This form: 643.7 against 603.7 (run 72) -- still a loss, so the tail is
 * an experiment, off by default (eng_cu_model.h, chain_qkv_att). */
static __device__ __forceinline__ bool sk3_att_lead(const eng_cu_attn_args &a, int NC) {
    const int c0 = NC * blockIdx.x, g = SK3_ATT_D * (a.n_heads / a.n_kv_heads);
    return c0 < a.n_heads * SK3_ATT_D && c0 % g == 0;
}

template <int WARPS, int NC>
static __device__ __forceinline__ void sk3_att_tail(const eng_cu_chain_att &at, bf16 *tiles, const float *rope_s,
                                                    int *arow, int n_real, int M) {
    constexpr int D = SK3_ATT_D, LD = D + 8, TILE = 16 * LD, DC = 32;
    const eng_cu_attn_args &a = at.a;
    const int hpg = a.n_heads / a.n_kv_heads, Hq = a.n_heads * D, Hk = a.n_kv_heads * D;
    const int c0 = NC * blockIdx.x;
    const int grp = c0 < Hq ? c0 / (D * hpg) : c0 < Hq + Hk ? (c0 - Hq) / D : (c0 - Hq - Hk) / D;
    unsigned *cnt = at.counters + grp;
    __syncthreads(); /* every thread's stores of Y issued */
    if (!sk3_att_lead(a, NC)) {
        if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(cnt) : "memory");
        return;
    }
    if (threadIdx.x == 0) {
        const unsigned others = (unsigned)((hpg + 2) * D / NC) - 1;
        unsigned v;
        do asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(cnt) : "memory");
        while (v != others);
        asm volatile("st.relaxed.gpu.global.u32 [%0], 0;\n" ::"l"(cnt) : "memory"); /* ready for the next launch */
    }
    __syncthreads(); /* the other threads' loads come after thread 0's acquire */
    /* hpg Q tiles, then K, then V; rows at or past the real count as zeros */
    for (int ti = 0; ti < hpg; ti++)
        eng_async_rows<16, D, WARPS * 32>(tiles + ti * TILE, a.q + (grp * hpg + ti) * D, a.ldq, n_real);
    eng_async_rows<16, D, WARPS * 32>(tiles + hpg * TILE, a.k + grp * D, a.ldk, n_real);
    eng_async_rows<16, D, WARPS * 32>(tiles + (hpg + 1) * TILE, a.v + grp * D, a.ldv, n_real);
    eng_async_commit();
    eng_async_wait<0>();
    __syncthreads();
    /* q/k norm + rotary: two warps a tile; the rotary rows come from shared
     * memory (positions within a 16-row bucket are < 16) */
    eng_cu_attn_args an = a;
    an.rope = rope_s;
    an.rope_rows = min(16, a.rope_rows);
    const float *qn = rope_s + 16 * D, *kn = qn + D;
    for (int j = (int)threadIdx.x >> 6; j <= hpg; j += WARPS / 2)
        eng_attn_qk_rows<D, 64>(tiles + j * TILE, n_real, 0, j < hpg ? qn : kn, an, (int)threadIdx.x & 63,
                                arow + 32);
    __syncthreads();
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int lo[2] = {arow[g], arow[g + 8]}, hi[2] = {arow[16 + g], arow[16 + g + 8]};
    const float sl2 = a.scale * 1.4426950408889634f;
    for (int it = warp; it < hpg * (D / DC); it += WARPS) { /* (head, 32 columns) a warp */
        const int j = it / (D / DC), cs = (it % (D / DC)) * DC;
        float o[DC / 8][4], l[2];
        eng_chain_head<D, LD, DC>(tiles + j * TILE, tiles + hpg * TILE, tiles + (hpg + 1) * TILE, lo, hi, sl2, o, l,
                                  cs);
        bf16 *dst = a.o + (grp * hpg + j) * D + cs + 2 * t;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = g + 8 * h;
            const float sc = r < n_real ? l[h] : 0.f;
            if (r < M)
#pragma unroll
                for (int dn = 0; dn < DC / 8; dn++)
                    *(uint32_t *)(dst + (size_t)r * a.ldo + dn * 8) =
                        eng_pack_bf16(o[dn][2 * h] * sc, o[dn][2 * h + 1] * sc);
        }
    }
}

template <int MT, int WARPS, int G, int MODE, bool LNR, bool LATE, int NC, bool PW, bool ATT>
__global__ void __launch_bounds__(WARPS * 32)
skinny3_kernel(const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R, bf16 *Y, int M,
               int N, int K, int epi, eng_cu_chain_norm nm, int bulk, const char *pf, unsigned pf_slice,
               eng_cu_chain_res res, eng_cu_chain_att att) {
    constexpr bool NORM = MODE == SK3_NORM, FOLD = MODE == SK3_FOLD || MODE == SK3_LNFOLD,
                   LNF = MODE == SK3_LNFOLD;
    constexpr int NT = NC / 8, HALF = NC / 2; /* n tiles of 8; the columns at n_lo, then at n_hi */
    extern __shared__ __align__(16) unsigned char sk3_smem[];
    __shared__ uint64_t wbar; /* bulk: the weight slice's arrival */
    bf16 *Ws = (bf16 *)sk3_smem; /* [NC][K + sk3_pad(MT, G)] */
    float *gs = (float *)(sk3_smem + (size_t)NC * (K + sk3_pad(MT, G)) * 2), *bs = gs + K; /* NORM: gamma, beta [K] */
    float(*part)[MT * 16][NC + 1] = (float(*)[MT * 16][NC + 1])(NORM ? bs + K : gs);
    bf16 *bsm = (bf16 *)(part + WARPS), *Rs = bsm + NC; /* the block's bias [NC], residual [MT * 16][NC] */
    float *csm = (float *)(Rs + MT * 16 * NC), *rgs = csm + NC, *rbs = rgs + NC; /* ext: sk3_ext_bytes */
    float2 *rst = (float2 *)(rbs + NC), *lnst = rst + MT * 16;
    float *rsm = (float *)(lnst + MT * 16);
    /* ATT: the tail's part (sk3_att_bytes) */
    float *rope_s = (float *)(sk3_smem + sk3_att_off(sk3_core_bytes(MT, K, WARPS, NORM, LNF || LNR, NC)));
    int *arow = (int *)(rope_s + 18 * SK3_ATT_D);
    ENG_CU_TRACE_BEGIN(); /* -DENG_CU_TRACE only: eng_cu_trace.h */
    /* LATE (eng_cu_chain_late): the dependents launch after the wait */
    if (!LATE) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    /* the block's NC weight rows: columns n_lo.. and n_hi.., HALF each
     * (SwiGLU: HALF gate columns and the same HALF of the up half) */
    const bool swiglu = epi == ENG_CU_EPI_SWIGLU, has_b = bias && epi != ENG_CU_EPI_NONE;
    const int n_lo = swiglu ? HALF * blockIdx.x : NC * blockIdx.x, n_hi = swiglu ? (N >> 1) + n_lo : n_lo + HALF;
    const int ldw = K + sk3_pad(MT, G), cpr = K / 8;
    /* PW: W is the padded copy (rows ldw apart, the shared-memory layout),
     * so the block's rows are one contiguous run -- two with SwiGLU, the
     * HALF gate rows and the HALF up rows -- and one bulk copy each */
    const int ldg = PW ? ldw : K;
    if (bulk) {
        if (threadIdx.x == 0) {
            sk3_bulk_init(&wbar);
            if constexpr (PW) {
                sk3_bulk_arm(&wbar, NC * ldw * 2);
                if (swiglu) {
                    sk3_bulk_row(&wbar, Ws, W + (size_t)n_lo * ldw, HALF * ldw * 2);
                    sk3_bulk_row(&wbar, Ws + HALF * ldw, W + (size_t)n_hi * ldw, HALF * ldw * 2);
                } else
                    sk3_bulk_row(&wbar, Ws, W + (size_t)n_lo * ldw, NC * ldw * 2);
            } else {
                sk3_bulk_arm(&wbar, NC * K * 2);
                for (int r = 0; r < NC; r++)
                    sk3_bulk_row(&wbar, Ws + r * ldw, W + (size_t)(r < HALF ? n_lo + r : n_hi + r - HALF) * K, K * 2);
            }
        }
    } else
        for (int c = threadIdx.x; c < NC * cpr; c += WARPS * 32) {
            const int r = c / cpr, cc = (c - r * cpr) * 8;
            sk3_cp16(Ws + r * ldw + cc, W + (size_t)(r < HALF ? n_lo + r : n_hi + r - HALF) * ldg + cc);
        }
    if constexpr (NORM)
        for (int c = threadIdx.x; c < K / 4; c += WARPS * 32) {
            sk3_cp16(gs + 4 * c, nm.gamma + 4 * c);
            if (nm.beta) sk3_cp16(bs + 4 * c, nm.beta + 4 * c);
        }
    if (has_b && threadIdx.x < NT) /* (NC = 16 spelled as before: the same code as before blocks of 32) */
        sk3_cp16(bsm + 8 * threadIdx.x,
                 bias + (NC == 16 ? (threadIdx.x ? n_hi : n_lo)
                                  : (int)threadIdx.x < NT / 2 ? n_lo + 8 * (int)threadIdx.x
                                                              : n_hi + 8 * ((int)threadIdx.x - NT / 2)));
    /* the LayerNorm fold's column sums, the LayerNorm residual's gamma and
     * beta: the block's NC columns (contiguous: no SwiGLU with either) */
    if (LNF && threadIdx.x >= 32 && threadIdx.x < 32 + NC / 4)
        sk3_cp16(csm + 4 * (threadIdx.x - 32), nm.colsum + n_lo + 4 * (threadIdx.x - 32));
    if (LNR && threadIdx.x >= 64 && threadIdx.x < 64 + NC / 2) {
        constexpr int Q = NC / 4; /* 16-byte pieces of each */
        const int i = threadIdx.x - 64;
        sk3_cp16(i < Q ? rgs + 4 * i : rbs + 4 * (i - Q), (i < Q ? res.gamma : res.beta) + n_lo + 4 * (i & (Q - 1)));
    }
    if constexpr (ATT) /* the lead: the rotary rows of positions 0-15, then the q and k norm weights */
    if (sk3_att_lead(att.a, NC)) {
        constexpr int D4 = SK3_ATT_D / 4;
        const int rr = min(16, att.a.rope_rows);
        for (int c = threadIdx.x; c < (rr + 2) * D4; c += WARPS * 32) {
            const int r = c / D4;
            const float *src = r < rr ? att.a.rope + 4 * c : (r == rr ? att.a.q_norm : att.a.k_norm) + 4 * (c - r * D4);
            sk3_cp16(rope_s + 4 * (r < rr ? c : c + (16 - rr) * D4), src);
        }
    }
    eng_async_commit();
    /* FOLD: the real row count comes from the input block, which no kernel
     * of the forward writes (eng_cu.h): read before the wait */
    const int n_real = FOLD ? min(M, *nm.n_rows_dev) : M;
    const int r_real = LNR ? min(M, *res.n_rows_dev) : M;
    if constexpr (ATT) { /* the lead: each query row's key range and position, from cu_seqlens (input block) */
        const int r = (int)threadIdx.x - (WARPS - 1) * 32;
        if (r >= 0 && r < 16 && sk3_att_lead(att.a, NC)) {
            const int ns = *att.n_seqs_dev;
            int lo = 0, hi = 0, pos = 0;
            if (r < n_real)
                for (int q = 0; q < ns; q++) {
                    const int b = att.a.cu_seqlens[q], e = att.a.cu_seqlens[q + 1];
                    if (r >= b && r < e) {
                        lo = b;
                        hi = att.a.causal ? r + 1 : e;
                        pos = r - b;
                        break;
                    }
                }
            arow[r] = lo;
            arow[16 + r] = hi;
            arow[32 + r] = pos;
        }
    }
    /* a later GEMM's weights into L2, this block's share, while the
     * predecessor still runs (weights are never written by the forward) */
    if (pf && threadIdx.x == 32)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(pf + (size_t)blockIdx.x * pf_slice),
                     "r"(pf_slice)
                     : "memory");
    ENG_CU_TRACE_AT(1);
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (LATE) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    ENG_CU_TRACE_AT(2);
    /* the residual (written two kernels back) lands with X, not after the
     * products */
    if (R) {
        constexpr int LP = NC == 32 ? 2 : 1; /* log2 of a row's 16-byte pieces */
        for (int i = threadIdx.x; i < (M << LP); i += WARPS * 32)
            sk3_cp16(Rs + 8 * i, R + (size_t)(i >> LP) * N + n_lo + 8 * (i & ((1 << LP) - 1)));
        eng_async_commit();
    }
    /* the residual rows' (mu, rs), which an earlier fold stored: from L2
     * (not L1, which may hold an older forward's), into shared memory
     * beside X's first loads */
    float2 rst_v = make_float2(0.f, 0.f);
    if (LNR && threadIdx.x < M) rst_v = __ldcg(res.stats + threadIdx.x);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int kw = warp * G * 64 + (sk3_half(MT, G) == 32 ? 8 : 16) * t; /* this lane's first k */
    float acc[MT][NT][4], ssq[FOLD ? MT : 1][2][4]; /* FOLD: X X^T of the row tile, whose diagonal is wanted */
    float rsum[LNF ? MT : 1][4];                   /* LNF: X against ones, each column the row sums */
    skinny_zero<MT, NT>(acc);
    if constexpr (FOLD) skinny_zero<MT>(ssq);
#pragma unroll
    for (int i = 0; i < (LNF ? MT : 1); i++) rsum[i][0] = rsum[i][1] = rsum[i][2] = rsum[i][3] = 0.f;
    constexpr int GC = skinny3_chunk(MT, G);
#pragma unroll
    for (int c = 0; c < G / GC; c++) {
        /* X: rows g + 8h of every m tile, GC groups of 16 values, all in
         * flight at once (the first chunk also while the weights land) */
        uint4 xa[MT][2][GC][2];
#pragma unroll
        for (int mt = 0; mt < MT; mt++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int r = mt * 16 + 8 * h + g;
#pragma unroll
                for (int q = 0; q < GC; q++) {
                    const uint4 *src = (const uint4 *)(X + (size_t)r * K + kw + 64 * (c * GC + q));
                    const bool live = r < (LNF ? n_real : M); /* LNF: padding rows as zeros, as the norm writes them */
                    xa[mt][h][q][0] = live ? __ldcg(src) : make_uint4(0, 0, 0, 0);
                    xa[mt][h][q][1] = live ? __ldcg(src + sk3_half(MT, G) / 8) : make_uint4(0, 0, 0, 0);
                }
            }
        if (c == 0) {
            eng_async_wait<0>();
            if (LNR && threadIdx.x < M) rst[threadIdx.x] = rst_v;
            __syncthreads(); /* also orders the barrier's init before the polls */
            if (bulk) sk3_bulk_wait(&wbar);
            ENG_CU_TRACE_AT(3);
        }
        if constexpr (NORM) {
            static_assert(!NORM || GC == G, "the norm needs the whole row share in registers");
            sk3_norm<MT, G, WARPS>(xa, nm, gs, bs, (float(*)[MT * 16])part, M, K, kw);
        }
#pragma unroll
        for (int q = 0; q < GC; q++) {
            uint32_t wb[NT][8];
#pragma unroll
            for (int nt = 0; nt < NT; nt++) {
                const uint4 *ws = (const uint4 *)(Ws + (nt * 8 + g) * ldw + kw + 64 * (c * GC + q));
                *(uint4 *)&wb[nt][0] = ws[0];
                *(uint4 *)&wb[nt][4] = ws[sk3_half(MT, G) / 8];
            }
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int mt = 0; mt < MT; mt++) {
                    const uint32_t *lo = (const uint32_t *)&xa[mt][0][q][0], *hi = (const uint32_t *)&xa[mt][1][q][0];
                    const uint32_t a[4] = {lo[2 * j], hi[2 * j], lo[2 * j + 1], hi[2 * j + 1]};
#pragma unroll
                    for (int nt = 0; nt < NT; nt++) eng_mma16816(acc[mt][nt], a, wb[nt][2 * j], wb[nt][2 * j + 1]);
                    if constexpr (FOLD) { /* the same fragments as B: rows 0-7, then 8-15 of the tile */
                        eng_mma16816(ssq[mt][0], a, lo[2 * j], lo[2 * j + 1]);
                        eng_mma16816(ssq[mt][1], a, hi[2 * j], hi[2 * j + 1]);
                    }
                    if constexpr (LNF) eng_mma16816(rsum[mt], a, 0x3f803f80u, 0x3f803f80u); /* B = ones (bf16) */
                }
        }
    }
    skinny_fold fold = {0, 0.f, M};
    if constexpr (FOLD) {
        /* the diagonal of X X^T -- this warp's share of each row's sum of
         * squares -- sits in lanes with t == g / 2: element g % 2 of the
         * first n tile (row g), 2 + g % 2 of the second (row g + 8); it goes
         * to the partial tile's spare column NC, summed over the warps in
         * skinny_finish */
        if (t == g >> 1)
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                part[warp][mt * 16 + g][NC] = g & 1 ? ssq[mt][0][1] : ssq[mt][0][0];
                part[warp][mt * 16 + g + 8][NC] = g & 1 ? ssq[mt][1][3] : ssq[mt][1][2];
            }
        fold.K = K;
        fold.eps = nm.eps;
        fold.n_real = n_real;
    }
    if constexpr (LNF) {
        /* row g's sum sits in element 0 of every lane's tile, row g + 8's
         * in element 2; the lanes with t == 0 hand them over */
        if (t == 0)
#pragma unroll
            for (int mt = 0; mt < MT; mt++) {
                rsm[warp * MT * 16 + mt * 16 + g] = rsum[mt][0];
                rsm[warp * MT * 16 + mt * 16 + g + 8] = rsum[mt][2];
            }
        fold.rsum = rsm;
        fold.colsum = csm;
        fold.rowst = lnst;
        fold.stats_out = blockIdx.x == 0 ? nm.stats_out : NULL;
    }
    const skinny_res sres = {LNR ? rst : NULL, rgs, rbs, r_real};
    skinny_finish<MT, WARPS, NC>(acc, part, has_b ? bsm : NULL, R ? Rs : NULL, NC, Y + n_lo, swiglu ? N >> 1 : N, M,
                                 epi, fold, sres);
    if constexpr (ATT) sk3_att_tail<WARPS, NC>(att, Ws, rope_s, arow, n_real, M);
    ENG_CU_TRACE_END();
}

/* m tiles a launch is built for: 1, 2 or 4 (33..64 rows take 4) */
static int skinny3_mt(int M) { return M <= 16 ? 1 : M <= 32 ? 2 : 4; }

static size_t skinny3_smem(int M, int K, int warps, int norm, int ext, int nc) {
    return sk3_core_bytes(skinny3_mt(M), K, warps, norm != 0, ext != 0, nc);
}

int eng_cu_gemm_chain_ok(int M, int N, int K, int norm) {
    int w, gq;
    eng_cu_chain_split(K, &w, &gq);
    const int mt = skinny3_mt(M);
    /* the norm prologue needs X in one chunk (see skinny3_chunk), and its
     * statistics spill registers beyond 4 uint4 pairs of X a lane; the
     * RMS fold is built for up to two m tiles, the LayerNorm fold for K <=
     * 1024 (at most 2 groups a warp) */
    return M >= 1 && M <= 64 && N % 16 == 0 && w > 0 && (norm != 1 || mt * gq <= 4) && (norm != 2 || mt <= 2) &&
           (norm != 3 || gq <= 2) && skinny3_smem(M, K, w, norm == 1, 1, 16) <= 200 * 1024;
}

/* Blocks of 32 columns (NC = 32): each block reads X once for twice the
 * columns, so a launch moves N / 32 instead of N / 16 copies of X from L2
 * -- at 16 rows as many bytes as the weights themselves (dev/cuda/NOTES.md:
 * a chain GEMM's time fits 1.6 us + (W + X copies) / ~6 TB/s).  Built for
 * one or two m tiles, at most 2 groups a warp (K <= 1024: a 64 KB weight
 * slice), no norm prologue and no LayerNorm residual.  Blocks of 64 were
 * faster still in the lab (Qwen3's QKV 4.20 against 4.64 us) but not in
 * the chain (H200, 2026-12-04 run 50: Qwen3-0.6B's 16-token query 623.2
 * against 623.6 us, BERT-base 182.2 against 179.1), so they are not
 * built. */
int eng_cu_chain_nc = 0;
int eng_cu_chain_down_floor = 0;
thread_local int eng_cu_chain_last_nc = 0;

static int chain_nc(int M, int N, int K, int mode, bool lnr) {
    int w, gq;
    eng_cu_chain_split(K, &w, &gq);
    const bool can = eng_cu_chain_nc != 16 && skinny3_mt(M) <= 2 && N % 32 == 0 && gq <= 2 && mode != 1 && !lnr &&
                     skinny3_smem(M, K, w, 0, mode == 3, 32) <= 200 * 1024;
    if (!can) return 16;
    /* 0 (auto): where N / 32 blocks still cover most of the SMs (and, in
     * launch3, fit in one wave) */
    return eng_cu_chain_nc == 32 || N >= 2048 ? 32 : 16;
}

template <int MT, int WARPS, int G, int MODE, bool LNR, int NC>
static cudaError_t launch3(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                           bf16 *Y, int M, int N, int K, int epi, const eng_cu_chain_norm &nm, const char *pf,
                           unsigned pf_slice, const eng_cu_chain_res &res, const bf16 *wp) {
    /* the LayerNorm residual is built for the plain products only (O and
     * down of the encoders' folded chain); blocks of 32 as chain_nc says */
    if constexpr ((MODE == SK3_NORM && MT * G > 4) || (MODE == SK3_FOLD && MT > 2) || (MODE == SK3_LNFOLD && G > 2) ||
                  (LNR && MODE != SK3_PLAIN) || (NC == 32 && (MT > 2 || G > 2 || MODE == SK3_NORM || LNR))) {
        return cudaErrorInvalidValue;
    } else {
        const size_t smem0 = skinny3_smem(M, K, WARPS, MODE == SK3_NORM, MODE == SK3_LNFOLD || LNR, NC);
        /* eng_cu_chain_down_floor (experiment, not yet run on a GPU): the
         * down projections' launches (six groups of 64 k a warp: K = 3072
         * at 8 warps) ask for 116 KB, so one block sits on an SM whatever
         * their register count (130 gives one, 128 two: dev/cuda/NOTES.md,
         * runs 57 and 62) */
        size_t smem = eng_cu_chain_down_floor && G == 6 && smem0 < 116 * 1024 ? 116 * 1024 : smem0;
        /* the attention tail (eng_cu_chain_att): built for Qwen3-0.6B's QKV
         * only (one m tile, K = 1024 at 8 warps, the RMS fold, blocks of 32);
         * eng_cu_gemm_chain checked the rest */
        constexpr bool CAN_ATT = MT == 1 && WARPS == 8 && G == 2 && MODE == SK3_FOLD && !LNR && NC == 32;
        const eng_cu_chain_att *att = eng_cu_chain_att_next;
        if (att && !CAN_ATT) return cudaErrorNotSupported;
        if (att) smem = sk3_att_off(smem0) + sk3_att_bytes();
        /* the trigger's place is a template parameter, not a runtime
         * branch: a branch there moved the scheduling of BERT-base's and
         * Qwen3's K = 3072 kernel enough to cost 40 / 58 us a query (H200,
         * 2026-12-03 run 10), so the default kernel stays as it was */
        auto *k = eng_cu_chain_late ? skinny3_kernel<MT, WARPS, G, MODE, LNR, true, NC, false, false>
                                    : skinny3_kernel<MT, WARPS, G, MODE, LNR, false, NC, false, false>;
        /* the padded weights' form: built for one m tile only (the
         * launcher passes wp for at most 16 rows) */
        if constexpr (MT == 1)
            if (wp) k = eng_cu_chain_late ? skinny3_kernel<MT, WARPS, G, MODE, LNR, true, NC, true, false>
                                          : skinny3_kernel<MT, WARPS, G, MODE, LNR, false, NC, true, false>;
        if constexpr (CAN_ATT)
            if (att) {
                if (wp) k = eng_cu_chain_late ? skinny3_kernel<MT, WARPS, G, MODE, LNR, true, NC, true, true>
                                              : skinny3_kernel<MT, WARPS, G, MODE, LNR, false, NC, true, true>;
                else k = eng_cu_chain_late ? skinny3_kernel<MT, WARPS, G, MODE, LNR, true, NC, false, true>
                                           : skinny3_kernel<MT, WARPS, G, MODE, LNR, false, NC, false, true>;
            }
        const int var = (eng_cu_chain_late ? 1 : 0) + (wp ? 2 : 0) + (att ? 4 : 0);
        static int attr_done[8] = {0, 0, 0, 0, 0, 0, 0, 0}; /* per instantiation: raise the shared-memory cap once */
        if (!attr_done[var]) {
            cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
            if (e != cudaSuccess) return e;
            attr_done[var] = 1;
        }
        if constexpr (NC == 32) {
            /* auto: blocks of 32 only where the N / 32 blocks run in one
             * wave -- Qwen3-0.6B's gate|up at 32 rows (192 blocks of 132
             * registers a thread, one an SM) was slower than 384 blocks of
             * 16 (H200, 2026-12-04 run 49: 848 against 840 us) */
            static int waves_ok[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
            int &ok = waves_ok[var];
            if (ok < 0) {
                int per_sm = 0, dev = 0, sms = 0;
                cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, WARPS * 32, smem);
                if (e == cudaSuccess) e = cudaGetDevice(&dev);
                if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
                if (e != cudaSuccess) return e;
                ok = per_sm * sms; /* blocks in one wave (>= 0 from here on) */
            }
            /* the tail's lead blocks wait on the other blocks of their
             * launch: all must be on the GPU at once, whatever
             * POSY_CUDA_CHAIN_NC asks (and it is built for blocks of 32 only) */
            if (att && N / 32 > ok) return cudaErrorNotSupported;
            if (!eng_cu_chain_nc && N / 32 > ok) {
                return launch3<MT, WARPS, G, MODE, LNR, 16>(s, X, W, bias, R, Y, M, N, K, epi, nm, pf,
                                                            pf_slice / 32 * 16, res, wp); /* 16-byte slices */
            }
        }
        eng_cu_chain_last_nc = NC;
        const eng_cu_chain_att none = {};
        return eng_cu_launch(k, dim3(N / NC), dim3(WARPS * 32), smem, s, X, wp ? wp : W, bias, R, Y, M, N, K, epi, nm,
                             eng_cu_chain_bulk, pf, pf_slice, res, att ? *att : none);
    }
}

template <int MT, int NC>
static cudaError_t launch3_mt(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                              bf16 *Y, int M, int N, int K, int epi, const eng_cu_chain_norm *nm, const char *pf,
                              unsigned pf_slice, const eng_cu_chain_res &res, const bf16 *wp) {
    int w, gq;
    eng_cu_chain_split(K, &w, &gq);
    const eng_cu_chain_norm none = {NULL, NULL, 0.f, NULL, NULL, 0, NULL, NULL};
#define SK3(WW, GG)                                                                                             \
    if (w == WW && gq == GG)                                                                                    \
        return !nm ? (res.stats ? launch3<MT, WW, GG, SK3_PLAIN, true, NC>(s, X, W, bias, R, Y, M, N, K, epi, none, \
                                                                           pf, pf_slice, res, wp)               \
                                : launch3<MT, WW, GG, SK3_PLAIN, false, NC>(s, X, W, bias, R, Y, M, N, K, epi, none, \
                                                                            pf, pf_slice, res, wp))             \
               : res.stats ? cudaErrorInvalidValue                                                              \
               : nm->fold == 2 ? launch3<MT, WW, GG, SK3_LNFOLD, false, NC>(s, X, W, bias, R, Y, M, N, K, epi, *nm, \
                                                                            pf, pf_slice, res, wp)              \
               : nm->fold ? launch3<MT, WW, GG, SK3_FOLD, false, NC>(s, X, W, bias, R, Y, M, N, K, epi, *nm, pf, \
                                                                     pf_slice, res, wp)                         \
                          : launch3<MT, WW, GG, SK3_NORM, false, NC>(s, X, W, bias, R, Y, M, N, K, epi, *nm, pf, \
                                                                     pf_slice, res, wp)
    SK3(8, 1); SK3(8, 2); SK3(8, 3); SK3(8, 4); SK3(8, 6);
    SK3(6, 1); SK3(6, 2); SK3(6, 3); SK3(6, 4); SK3(6, 6);
    SK3(4, 1); SK3(4, 2); SK3(4, 3);
#undef SK3
    return cudaErrorInvalidValue;
}

cudaError_t eng_cu_gemm_chain(cudaStream_t s, const bf16 *X, const bf16 *W, const bf16 *bias, const bf16 *R,
                              bf16 *Y, int M, int N, int K, int epi, const eng_cu_chain_norm *nm, const void *pf,
                              size_t pf_bytes, const eng_cu_chain_res *res, const bf16 *wp) {
    const int mode = !nm ? 0 : nm->fold == 2 ? 3 : nm->fold ? 2 : 1;
    const eng_cu_chain_res nores = {NULL, NULL, NULL, NULL};
    if (!res) res = &nores;
    if (!eng_cu_gemm_chain_ok(M, N, K, mode) || (nm && !nm->n_rows_dev) || (mode == 1 && !nm->gamma) ||
        (mode >= 2 && (nm->gamma || nm->beta || nm->out)) || (nm && nm->fold != 0 && nm->fold != 1 && nm->fold != 2) ||
        (mode == 3 && (!nm->colsum || epi == ENG_CU_EPI_SWIGLU || ((uintptr_t)nm->colsum & 15))) ||
        (res->stats && (!R || !res->gamma || !res->beta || !res->n_rows_dev ||
                        (((uintptr_t)res->gamma | (uintptr_t)res->beta) & 15) || ((uintptr_t)res->stats & 7))) ||
        (epi == ENG_CU_EPI_SWIGLU && R) || (epi != ENG_CU_EPI_NONE && epi != ENG_CU_EPI_SWIGLU && !bias) ||
        epi == ENG_CU_EPI_GEGLU_TANH || epi == ENG_CU_EPI_GEGLU_ERF || epi < 0 || epi > ENG_CU_EPI_GEGLU_ERF ||
        (((uintptr_t)X | (uintptr_t)W | (uintptr_t)wp | (uintptr_t)bias | (uintptr_t)R |
          (uintptr_t)(nm ? nm->out : NULL)) & 15))
        return cudaErrorInvalidValue; /* 16-byte accesses to X, W, bias, R, the normalised rows, column sums,
                                         gamma and beta */
    const int nc = chain_nc(M, N, K, mode, res->stats != NULL);
    /* the attention tail: only where its launch is built (eng_cu_chain_att_ok), else nothing is launched */
    if (eng_cu_chain_att_next && (mode != 2 || nc != 32 || epi == ENG_CU_EPI_SWIGLU || R ||
                                  !eng_cu_chain_att_ok(&eng_cu_chain_att_next->a, M, N, K) ||
                                  !eng_cu_chain_att_next->counters || !eng_cu_chain_att_next->n_seqs_dev))
        return cudaErrorNotSupported;
    /* each block prefetches an equal 16-byte-multiple slice; the few bytes
     * past the last whole slice are left to the next GEMM's own loads */
    const unsigned slice = pf && ((uintptr_t)pf & 15) == 0 ? (unsigned)(pf_bytes / (N / nc) / 16 * 16) : 0;
    const char *p = slice ? (const char *)pf : NULL;
    /* the padded copy: one m tile and bulk copies only (its layout is the
     * one-m-tile padding, eng_cu_chain_wpad) */
    if (skinny3_mt(M) != 1 || !eng_cu_chain_bulk) wp = NULL;
    if (nc == 32) switch (skinny3_mt(M)) {
        case 1: return launch3_mt<1, 32>(s, X, W, bias, R, Y, M, N, K, epi, nm, p, slice, *res, wp);
        default: return launch3_mt<2, 32>(s, X, W, bias, R, Y, M, N, K, epi, nm, p, slice, *res, NULL);
        }
    switch (skinny3_mt(M)) {
    case 1: return launch3_mt<1, 16>(s, X, W, bias, R, Y, M, N, K, epi, nm, p, slice, *res, wp);
    case 2: return launch3_mt<2, 16>(s, X, W, bias, R, Y, M, N, K, epi, nm, p, slice, *res, NULL);
    default: return launch3_mt<4, 16>(s, X, W, bias, R, Y, M, N, K, epi, nm, p, slice, *res, NULL);
    }
}

int eng_cu_chain_wpad(int K) {
    int w, gq;
    eng_cu_chain_split(K, &w, &gq);
    return w > 0 ? sk3_pad(1, gq) : 0;
}

int eng_cu_chain_att_ok(const eng_cu_attn_args *a, int M, int N, int K) {
    int w, gq;
    eng_cu_chain_split(K, &w, &gq);
    const int D = a->head_dim;
    if (M < 1 || M > 16 || D != SK3_ATT_D || w != 8 || gq != 2 || a->n_kv_heads < 1 || a->n_heads % a->n_kv_heads)
        return 0;
    const int hpg = a->n_heads / a->n_kv_heads;
    /* Y is [Q | K | V] (so each block of 32 columns lies in one head), the
     * group's tiles fit where the weights were, 16-byte accesses */
    return N == (a->n_heads + 2 * a->n_kv_heads) * D && a->q_norm && a->k_norm && a->rope && a->rope_rows >= 1 &&
           a->o && a->cu_seqlens && chain_nc(M, N, K, 2, false) == 32 &&
           (size_t)(hpg + 2) * 16 * (D + 8) * 2 <= (size_t)32 * (K + sk3_pad(1, gq)) * 2 &&
           (a->ldq | a->ldk | a->ldv | a->ldo) % 8 == 0 &&
           (((uintptr_t)a->q | (uintptr_t)a->k | (uintptr_t)a->v | (uintptr_t)a->o | (uintptr_t)a->q_norm |
             (uintptr_t)a->k_norm | (uintptr_t)a->rope) & 15) == 0 &&
           sk3_att_off(skinny3_smem(M, K, w, 0, 0, 32)) + sk3_att_bytes() <= 200 * 1024;
}

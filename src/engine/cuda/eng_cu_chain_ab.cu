/* eng_cu_chain_ab: an encoder layer's whole attention block -- the
 * LayerNorm before it (folded into the QKV weights), QKV, attention, the O
 * projection, its bias and the post-LN residual -- as ONE launch of the
 * one-query chain, split by head: all-MiniLM-L6's shape (H 384, 12 heads
 * of 32) at <= 16 rows.
 *
 * Why: the encoders' folded chain runs a layer as four nodes (QKV, the
 * attention + O kernel, up, down), and every node costs a hand-over plus
 * the time its weights take to land; no attempt to make a node cheaper
 * paid (dev/cuda/NOTES.md).  With eng_cu_chain_ffn (the MLP as one launch)
 * and this, a layer is two launches.  Block (head h, column group c) loads
 * the head's 96 QKV rows of W (73 KB, the same image region for the head's
 * 8 blocks, so HBM is read once and L2 serves the rest) and its 48 x 32
 * slice of Wo, both before griddepcontrol.wait -- the weights depend on no
 * kernel, so they land while the previous launch runs.  After the wait:
 * X (16 rows, raw) into shared memory, each row's mean and rstd, the
 * head's Q | K | V (16 x 96, the LayerNorm fold rs (acc - mu colsum) + b'
 * as the chain's QKV GEMM makes it; layer 0, whose input is already
 * normalised, plain + b), the head's attention (eng_chain_head, one warp),
 * then ctx (16 x 32) times the Wo slice: a 16 x 48 partial of the output.
 * The heads' partials meet as in eng_cu_chain_ffn.cu -- stored fp32 to
 * L2, one grid barrier, a reduce-scatter of units of 8 columns x 8 rows
 * summed over the heads in a fixed order (same bits every run) -- plus the
 * O bias and the residual (LN(X) with the previous layer's LayerNorm, or
 * X at layer 0), stored bf16 raw: what the chain's attention + O kernel
 * writes, so the MLP after it does not change.
 *
 * The grid barrier needs all 96 blocks resident at once: the launcher
 * refuses (cudaErrorNotSupported: the caller runs QKV and attention + O)
 * unless the occupancy calculator says they fit.
 *
 * Measured on the H200 (2026-12-05, runs 74-75): correct, and slower --
 * all-MiniLM-L6's 16-token query 73.6 against 63.8 us (lab: 7.1 us a
 * layer with the weights in L2, against ~5 for the two nodes it replaces;
 * docs/BENCHMARKS.md, "Split launches").  An experiment, off by default
 * (POSY_CUDA_CHAIN_AB).
 *
 * Tested by dev/cuda/lab_ab.cu against an fp64 reference (one and several
 * sequences, a single row, padding rows zero, layer 0's form, same bits
 * over replays; 20 checks, all passing in run 74) and, in the model, by
 * e2e_vs_transformers with POSY_CUDA_CHAIN_AB=1 (tests/cuda/run_split_gpu.sh).
 */
#include "eng_cu_chain_head.h"
#include "eng_cu_skinny.h"
#include "eng_cu_split.h"

#define AB_WARPS 6
#define AB_THREADS (AB_WARPS * 32)
#define AB_H 384
#define AB_HEADS 12
#define AB_D 32
#define AB_NCG 8                 /* column groups a head */
#define AB_NO (AB_H / AB_NCG)    /* output columns a block: 48, a warp's n tile each */
#define AB_LDX (AB_H + 8)        /* X and the QKV rows in shared memory */
#define AB_LDT (AB_D + 8)        /* Q, K, V, ctx tiles and the Wo slice */
#define AB_NQ (3 * AB_D)         /* the head's QKV rows */

static __host__ __device__ constexpr size_t ab_q_bytes() { return (size_t)AB_NQ * AB_LDX * 2; }
static __host__ __device__ constexpr size_t ab_o_bytes() { return (size_t)AB_NO * AB_LDT * 2; }
/* shared memory: the head's QKV rows [96][392] (after the products, the
 * reduce's [12][16] float4 over them), the Wo slice [48][40], X [16][392],
 * Q | K | V | ctx tiles [4][16][40], the QKV bias and column sums [96]
 * each (fp32), rows' (mu, rs) [16], key ranges [48] */
static __host__ __device__ constexpr size_t ab_smem() {
    return ab_q_bytes() + ab_o_bytes() + (size_t)16 * AB_LDX * 2 + (size_t)4 * 16 * AB_LDT * 2 + 2 * AB_NQ * 4 +
           16 * 8 + 48 * 4;
}

struct ab_args {
    const bf16 *X, *img, *qkv_b, *bo;
    const float *colsum, *gamma, *beta; /* the fold and the residual's LayerNorm; NULL at layer 0 */
    bf16 *Y;
    float *part;
    unsigned long long *bar;
    const int *n_rows_dev, *n_seqs_dev, *cu_seqlens;
    float scale, eps;
    int M, late;
};

__global__ void __launch_bounds__(AB_THREADS) ab_kernel(ab_args p) {
    constexpr int LDX = AB_LDX, LDT = AB_LDT, TILE = 16 * LDT;
    extern __shared__ __align__(16) unsigned char ab_sm[];
    __shared__ uint64_t wbar;
    bf16 *Wq = (bf16 *)ab_sm, *Wo = (bf16 *)(ab_sm + ab_q_bytes());
    bf16 *Xs = (bf16 *)(ab_sm + ab_q_bytes() + ab_o_bytes()), *tiles = Xs + 16 * LDX, *ctx = tiles + 3 * TILE;
    float *bq = (float *)(ctx + TILE), *cq = bq + AB_NQ;
    float2 *st = (float2 *)(cq + AB_NQ);
    int *arow = (int *)(st + 16);
    const int nb = gridDim.x, b = blockIdx.x, h = b / AB_NCG, c = b % AB_NCG;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const bool fold = p.colsum != NULL;
    if (!p.late) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    if (threadIdx.x == 0) {
        sk3_bulk_init(&wbar);
        sk3_bulk_arm(&wbar, (int)(ab_q_bytes() + ab_o_bytes()));
        sk3_bulk_row(&wbar, Wq, p.img + (size_t)h * (ab_q_bytes() / 2), (int)ab_q_bytes());
        sk3_bulk_row(&wbar, Wo, p.img + AB_HEADS * (ab_q_bytes() / 2) + (size_t)b * (ab_o_bytes() / 2),
                     (int)ab_o_bytes());
    }
    if (threadIdx.x < AB_NQ) { /* the head's bias and column sums: weights, before the wait */
        const int j = threadIdx.x, n = (j / AB_D) * AB_H + h * AB_D + j % AB_D;
        bq[j] = __bfloat162float(p.qkv_b[n]);
        cq[j] = fold ? __ldg(p.colsum + n) : 0.f;
    }
    const int n_real = min(p.M, *p.n_rows_dev); /* the input block: no kernel of the forward writes it */
    if (threadIdx.x < 16) eng_chain_rows(arow, n_real, p.cu_seqlens, *p.n_seqs_dev, 0);
    __syncthreads(); /* the mbarrier's init before anyone waits on it */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (p.late) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    eng_async_rows<16, AB_H, AB_THREADS>(Xs, p.X, AB_H, n_real);
    eng_async_commit();
    eng_async_wait<0>();
    __syncthreads();
    /* each row's (mu, rs): a warp a row in turn, 12 values a lane; layer 0
     * (no fold) (0, 1); rows past the real count (0, 0) */
    for (int r = warp; r < 16; r += AB_WARPS) {
        float s1 = 0.f, s2 = 0.f;
#pragma unroll
        for (int i = 0; i < AB_H / 64; i++) {
            const float2 f = __bfloat1622float2(*(const __nv_bfloat162 *)(Xs + r * LDX + 64 * i + 2 * lane));
            s1 += f.x + f.y;
            s2 += f.x * f.x + f.y * f.y;
        }
#pragma unroll
        for (int o = 16; o; o >>= 1) {
            s1 += __shfl_xor_sync(0xffffffffu, s1, o);
            s2 += __shfl_xor_sync(0xffffffffu, s2, o);
        }
        if (lane == 0) {
            const float mu = s1 / (float)AB_H, var = fmaxf(s2 / (float)AB_H - mu * mu, 0.f);
            st[r] = r >= n_real ? make_float2(0.f, 0.f)
                    : fold      ? make_float2(mu, rsqrtf(var + p.eps))
                                : make_float2(0.f, 1.f);
        }
    }
    sk3_bulk_wait(&wbar);
    __syncthreads();
    { /* Q | K | V of the head: warp w owns n tiles 2w and 2w + 1 (of 12), all of K */
        float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll 4
        for (int kk = 0; kk < AB_H / 16; kk++) {
            const bf16 *x = Xs + kk * 16 + 2 * t;
            const uint32_t af[4] = {eng_ld32(x + g * LDX), eng_ld32(x + (g + 8) * LDX), eng_ld32(x + g * LDX + 8),
                                    eng_ld32(x + (g + 8) * LDX + 8)};
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const bf16 *w = Wq + (size_t)((2 * warp + j) * 8 + g) * LDX + kk * 16 + 2 * t;
                eng_mma16816(acc[j], af, eng_ld32(w), eng_ld32(w + 8));
            }
        }
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = g + 8 * (e >> 1), n = (2 * warp + j) * 8 + 2 * t + (e & 1);
                const float2 s = st[r];
                const float v = r < n_real ? (acc[j][e] - s.x * cq[n]) * s.y + bq[n] : 0.f;
                tiles[(n / AB_D) * TILE + r * LDT + n % AB_D] = __float2bfloat16(v);
            }
    }
    __syncthreads();
    if (warp == 0) { /* the head's attention (one key tile), ctx = O / l */
        const int lo[2] = {arow[g], arow[g + 8]}, hi[2] = {arow[16 + g], arow[16 + g + 8]};
        float o[AB_D / 8][4], l[2];
        eng_chain_head<AB_D, LDT>(tiles, tiles + TILE, tiles + 2 * TILE, lo, hi, p.scale * 1.4426950408889634f, o, l);
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int r = g + 8 * hh;
            const float sc = r < n_real ? l[hh] : 0.f;
#pragma unroll
            for (int dn = 0; dn < AB_D / 8; dn++)
                *(uint32_t *)(ctx + r * LDT + dn * 8 + 2 * t) =
                    eng_pack_bf16(o[dn][2 * hh] * sc, o[dn][2 * hh + 1] * sc);
        }
    }
    __syncthreads();
    { /* the partial: ctx [16][32] x Wo slice [48][32]^T, warp w the n tile w */
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < AB_D / 16; kk++) {
            const bf16 *q = ctx + kk * 16 + 2 * t, *w = Wo + (size_t)(warp * 8 + g) * LDT + kk * 16 + 2 * t;
            const uint32_t af[4] = {eng_ld32(q + g * LDT), eng_ld32(q + (g + 8) * LDT), eng_ld32(q + g * LDT + 8),
                                    eng_ld32(q + (g + 8) * LDT + 8)};
            eng_mma16816(acc, af, eng_ld32(w), eng_ld32(w + 8));
        }
        /* part: [H / 8 column slices][heads][16 rows][8] */
        const int cs = c * (AB_NO / 8) + warp;
        float *pp = p.part + ((size_t)cs * AB_HEADS + h) * 128;
        __stcg((float2 *)(pp + g * 8 + 2 * t), make_float2(acc[0], acc[1]));
        __stcg((float2 *)(pp + (g + 8) * 8 + 2 * t), make_float2(acc[2], acc[3]));
    }
    eng_split_barrier(p.bar);
    /* reduce-scatter: units of 8 columns x 8 rows, unit u to block u mod
     * nb; thread (head hd, q) loads one float4 of head hd's partial, then 16
     * threads add the heads in order */
    float4 *sumv = (float4 *)Wq; /* [12][16], over the QKV rows */
    const int q = threadIdx.x & 15, hd = threadIdx.x >> 4;
    for (int u = b; u < AB_H / 4; u += nb) {
        const int cs = u >> 1, rh = u & 1;
        sumv[hd * 16 + q] = __ldcg((const float4 *)(p.part + ((size_t)cs * AB_HEADS + hd) * 128 + rh * 64) + q);
        __syncthreads();
        if (threadIdx.x < 16) {
            const float4 s = eng_split_sum(sumv + threadIdx.x, AB_HEADS, 16);
            const int r = rh * 8 + (threadIdx.x >> 1), col = cs * 8 + (threadIdx.x & 1) * 4;
            if (r < p.M) eng_split_store4_res(s, p.X, p.Y, AB_H, r, col, n_real, p.bo, st[r], p.gamma, p.beta);
        }
        __syncthreads(); /* sumv is reused by the next unit */
    }
}

/* The image: the heads' QKV rows first -- head h's Q, K and V rows
 * (32 each, W rows h*32.., H + h*32.., 2H + h*32..) padded to AB_LDX --
 * then per block (h, c) Wo's rows 48c.. (output columns) restricted to the
 * head's input columns 32h.., padded to AB_LDT (padding zero). */
__global__ void ab_pack_kernel(const bf16 *Wqkv, const bf16 *Wo, bf16 *img) {
    const size_t qn = ab_q_bytes() / 2, on = ab_o_bytes() / 2;
    const size_t total = AB_HEADS * qn + (size_t)AB_HEADS * AB_NCG * on;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        bf16 v = __float2bfloat16(0.f);
        if (i < AB_HEADS * qn) {
            const int h = (int)(i / qn), o = (int)(i % qn), j = o / AB_LDX, k = o % AB_LDX;
            if (k < AB_H) v = Wqkv[(size_t)((j / AB_D) * AB_H + h * AB_D + j % AB_D) * AB_H + k];
        } else {
            const size_t d = i - AB_HEADS * qn;
            const int b = (int)(d / on), o = (int)(d % on), h = b / AB_NCG, c = b % AB_NCG;
            const int row = o / AB_LDT, k = o % AB_LDT;
            if (k < AB_D) v = Wo[(size_t)(c * AB_NO + row) * AB_H + h * AB_D + k];
        }
        img[i] = v;
    }
}

int eng_cu_chain_ab_ok(int M, int H, int n_heads, int head_dim) {
    return M >= 1 && M <= 16 && H == AB_H && n_heads == AB_HEADS && head_dim == AB_D;
}

size_t eng_cu_chain_ab_img_bytes(void) { return AB_HEADS * ab_q_bytes() + (size_t)AB_HEADS * AB_NCG * ab_o_bytes(); }

size_t eng_cu_chain_ab_part_bytes(void) { return (size_t)AB_H * 16 * AB_HEADS * 4; }

cudaError_t eng_cu_chain_ab_pack(cudaStream_t s, const bf16 *Wqkv, const bf16 *Wo, bf16 *img) {
    ab_pack_kernel<<<256, 256, 0, s>>>(Wqkv, Wo, img);
    return cudaGetLastError();
}

cudaError_t eng_cu_chain_ab(cudaStream_t s, const eng_cu_ab_args *a) {
    if (!a || !eng_cu_chain_ab_ok(a->M, a->H, a->n_heads, a->head_dim) || !a->qkv_b || !a->bo || !a->cu_seqlens ||
        ((uintptr_t)a->X & 15) || ((uintptr_t)a->Y & 15) || ((uintptr_t)a->img & 15) || ((uintptr_t)a->part & 15) ||
        ((uintptr_t)a->bo & 7) || (a->colsum && (!a->gamma || !a->beta)) || (!a->colsum && (a->gamma || a->beta)) ||
        ((uintptr_t)a->gamma & 15) || ((uintptr_t)a->beta & 15))
        return cudaErrorNotSupported;
    const int nb = AB_HEADS * AB_NCG;
    static int attr_done = 0, fits = -1;
    if (!attr_done) {
        const cudaError_t e = cudaFuncSetAttribute(ab_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ab_smem());
        if (e != cudaSuccess) return e;
        int dev = 0, sms = 0, per = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, ab_kernel, AB_THREADS, ab_smem()) != cudaSuccess)
            return cudaErrorUnknown;
        fits = per * sms;
        attr_done = 1;
    }
    if (nb > fits) return cudaErrorNotSupported; /* the grid barrier needs every block resident */
    ab_args p;
    p.X = a->X;
    p.img = a->img;
    p.qkv_b = a->qkv_b;
    p.bo = a->bo;
    p.colsum = a->colsum;
    p.gamma = a->gamma;
    p.beta = a->beta;
    p.Y = a->Y;
    p.part = a->part;
    p.bar = a->bar;
    p.n_rows_dev = a->n_rows_dev;
    p.n_seqs_dev = a->n_seqs_dev;
    p.cu_seqlens = a->cu_seqlens;
    p.scale = a->scale;
    p.eps = a->eps;
    p.M = a->M;
    p.late = a->late;
    return eng_cu_launch(ab_kernel, dim3(nb), dim3(AB_THREADS), ab_smem(), s, p);
}

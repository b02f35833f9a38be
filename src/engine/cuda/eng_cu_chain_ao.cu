/* eng_cu_chain_ao: a decoder layer's attention and O projection as ONE
 * launch of the one-query chain, split by head -- Qwen3 at <= 16 rows.
 *
 * Why: in Qwen3's chain, attention is a node of its own between the QKV
 * and O GEMMs (~6.5 us of a ~21.5 us layer on the H200, traced), and the
 * earlier ways of removing it lost: attention inside every O block
 * (eng_cu_chain_attn.cu: each of 64 blocks computing all 16 heads) and
 * attention at the end of the QKV GEMM (a lead block a group, polling
 * its group's counter: a serial tail).  Here the O projection is split by
 * head instead (split-K): block (h, c) computes head h's attention
 * itself -- its Q, K and V rows from L2, the q/k RMSNorm + rotary, one key
 * tile (eng_chain_head, 16 columns a warp) -- and multiplies the head's
 * 16 x 128 output by its slice of Wo (output columns 128c.., the head's
 * 128 input columns), a T x 128 partial.  The 16 heads' partials meet as
 * in eng_cu_chain_ffn.cu: stored fp32 to L2, one grid barrier, then each
 * block sums units of 8 columns x 8 rows over the heads in a fixed order,
 * adds the residual and stores bf16 -- the same bits on every run, and an
 * ordinary activation for the next kernel.  Every head's attention is
 * computed by H / 128 blocks at once (8 for Qwen3-0.6B), which costs only
 * the tiles' L2 reads.  Wo's slices come as a per-block image
 * (eng_cu_chain_ao_pack, rows padded for conflict-free fragment loads),
 * one bulk copy requested before griddepcontrol.wait.
 *
 * The grid barrier needs every block resident at once: the launcher
 * refuses (cudaErrorNotSupported, the caller runs the attention node and
 * the O GEMM) unless the occupancy calculator says the grid fits; a later
 * kernel's blocks launch only after all of this launch's blocks have run
 * launch_dependents, so none can take the room first.
 *
 * Measured on the H200 (2026-12-05, run 75): correct, and slower --
 * Qwen3-0.6B's 16-token query 663.0 against 600.3 us with the attention
 * node and the O GEMM (docs/BENCHMARKS.md, "Split launches").  An
 * experiment, off by default (POSY_CUDA_CHAIN_AO).
 *
 * Tested by dev/cuda/lab_attn.cu (check_attn_o's split-by-head part,
 * LAB_ATTN_AO_ONLY=1 runs only those cases) against its reference: one and
 * several sequences, causal and not, a single token, padding rows zero,
 * same bits over replays.
 */
#include "eng_cu_chain_head.h"
#include "eng_cu_skinny.h"
#include "eng_cu_split.h"

#define AO_THREADS 256
#define AO_WARPS 8
#define AO_D 128  /* head size */
#define AO_NC 128 /* output columns a block */
#define AO_LD (AO_D + 8)

static __host__ __device__ constexpr size_t ao_w_bytes() { return (size_t)AO_NC * AO_LD * 2; }
/* shared memory: Wo image [128][136], Q | K | V tiles [3][16][136], ctx
 * [16][136], rope rows of positions 0-15 [16][128] and the q / k norm
 * weights [2][128] (fp32), rows' lo / hi / pos [48] */
static __host__ __device__ constexpr size_t ao_smem() {
    return ao_w_bytes() + (size_t)4 * 16 * AO_LD * 2 + (size_t)18 * AO_D * 4 + 48 * 4;
}

struct ao_args {
    eng_cu_attn_args a; /* q, k, v, ldq.., n_heads, n_kv_heads, cu_seqlens, scale, causal, q_norm, k_norm, rope.. */
    const int *n_rows_dev, *n_seqs_dev;
    const bf16 *img, *R;
    bf16 *Y;
    float *part;
    unsigned long long *bar;
    int M, H, late;
};

__global__ void __launch_bounds__(AO_THREADS) ao_kernel(ao_args p) {
    constexpr int D = AO_D, LD = AO_LD, TILE = 16 * LD;
    extern __shared__ __align__(16) unsigned char ao_sm[];
    __shared__ uint64_t wbar;
    const eng_cu_attn_args &a = p.a;
    bf16 *Ws = (bf16 *)ao_sm, *tiles = (bf16 *)(ao_sm + ao_w_bytes()), *ctx = tiles + 3 * TILE;
    float *rope_s = (float *)(ctx + TILE), *qn = rope_s + 16 * D, *kn = qn + D;
    int *arow = (int *)(kn + D);
    const int nq = p.H / AO_NC, nb = gridDim.x, b = blockIdx.x, h = b / nq, c = b % nq;
    const int hpg = a.n_heads / a.n_kv_heads, kv = h / hpg;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (!p.late) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    if (threadIdx.x == 0) {
        sk3_bulk_init(&wbar);
        sk3_bulk_arm(&wbar, (int)ao_w_bytes());
        sk3_bulk_row(&wbar, Ws, p.img + (size_t)b * (ao_w_bytes() / 2), (int)ao_w_bytes());
    }
    { /* the rotary rows of positions 0-15, then the q and k norm weights */
        constexpr int D4 = D / 4;
        const int rr = min(16, a.rope_rows);
        for (int i = threadIdx.x; i < (rr + 2) * D4; i += AO_THREADS) {
            const int r = i / D4;
            const float *src = r < rr ? a.rope + 4 * i : (r == rr ? a.q_norm : a.k_norm) + 4 * (i - r * D4);
            sk3_cp16(rope_s + 4 * (r < rr ? i : i + (16 - rr) * D4), src);
        }
        eng_async_commit();
    }
    /* the input block (no kernel of the forward writes it): real rows, and
     * each row's key range and position from cu_seqlens */
    const int n_real = min(p.M, *p.n_rows_dev);
    if (threadIdx.x < 16) eng_chain_rows(arow, n_real, a.cu_seqlens, *p.n_seqs_dev, a.causal);
    __syncthreads(); /* the mbarrier's init before anyone waits on it */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (p.late) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    /* the head's Q rows, its group's K and V rows; zero past the real rows */
    eng_async_rows<16, D, AO_THREADS>(tiles, a.q + h * D, a.ldq, n_real);
    eng_async_rows<16, D, AO_THREADS>(tiles + TILE, a.k + kv * D, a.ldk, n_real);
    eng_async_rows<16, D, AO_THREADS>(tiles + 2 * TILE, a.v + kv * D, a.ldv, n_real);
    eng_async_commit();
    eng_async_wait<0>();
    __syncthreads();
    { /* q/k RMSNorm + rotary: Q by threads 0-63, K by 64-127 */
        eng_cu_attn_args an = a;
        an.rope = rope_s;
        an.rope_rows = min(16, a.rope_rows);
        if (threadIdx.x < 128)
            eng_attn_qk_rows<D, 64>(tiles + (threadIdx.x >> 6) * TILE, n_real, 0, threadIdx.x < 64 ? qn : kn, an,
                                    (int)threadIdx.x & 63, arow + 32);
    }
    __syncthreads();
    { /* attention: 16 of the head's columns a warp (each warp computes S again) */
        constexpr int DC = D / AO_WARPS;
        const int lo[2] = {arow[g], arow[g + 8]}, hi[2] = {arow[16 + g], arow[16 + g + 8]};
        const float sl2 = a.scale * 1.4426950408889634f;
        float o[DC / 8][4], l[2];
        eng_chain_head<D, LD, DC>(tiles, tiles + TILE, tiles + 2 * TILE, lo, hi, sl2, o, l, warp * DC);
#pragma unroll
        for (int hh = 0; hh < 2; hh++) {
            const int r = g + 8 * hh;
            const float sc = r < n_real ? l[hh] : 0.f;
#pragma unroll
            for (int dn = 0; dn < DC / 8; dn++)
                *(uint32_t *)(ctx + r * LD + warp * DC + dn * 8 + 2 * t) =
                    eng_pack_bf16(o[dn][2 * hh] * sc, o[dn][2 * hh + 1] * sc);
        }
    }
    sk3_bulk_wait(&wbar);
    __syncthreads();
    /* the partial: ctx [16][128] x Ws [128 columns][128]^T, two n tiles a warp */
    {
        float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            const bf16 *q = ctx + kk * 16 + 2 * t;
            const uint32_t af[4] = {eng_ld32(q + g * LD), eng_ld32(q + (g + 8) * LD), eng_ld32(q + g * LD + 8),
                                    eng_ld32(q + (g + 8) * LD + 8)};
#pragma unroll
            for (int j = 0; j < 2; j++) {
                const bf16 *w = Ws + (size_t)((2 * warp + j) * 8 + g) * LD + kk * 16 + 2 * t;
                eng_mma16816(acc[j], af, eng_ld32(w), eng_ld32(w + 8));
            }
        }
        /* part: [H / 8 column slices][n_heads][16 rows][8] */
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int cs = c * (AO_NC / 8) + 2 * warp + j;
            float *pp = p.part + ((size_t)cs * a.n_heads + h) * 128;
            __stcg((float2 *)(pp + g * 8 + 2 * t), make_float2(acc[j][0], acc[j][1]));
            __stcg((float2 *)(pp + (g + 8) * 8 + 2 * t), make_float2(acc[j][2], acc[j][3]));
        }
    }
    /* the grid barrier (eng_cu_chain_ffn.cu's) */
    eng_split_barrier(p.bar);
    /* reduce-scatter: units of 8 columns x 8 rows, unit u to block u mod nb;
     * a thread loads one float4 of one head, then 16 threads add the
     * heads in order */
    float4 *sumv = (float4 *)tiles; /* [n_heads <= 16][16] float4 */
    const int q = threadIdx.x & 15, hd = threadIdx.x >> 4;
    for (int u = b; u < p.H / 4; u += nb) {
        const int cs = u >> 1, rh = u & 1;
        if (hd < a.n_heads)
            sumv[hd * 16 + q] = __ldcg((const float4 *)(p.part + ((size_t)cs * a.n_heads + hd) * 128 + rh * 64) + q);
        __syncthreads();
        if (threadIdx.x < 16) {
            const float4 s = eng_split_sum(sumv + threadIdx.x, a.n_heads, 16);
            const int r = rh * 8 + (threadIdx.x >> 1), col = cs * 8 + (threadIdx.x & 1) * 4;
            if (r < p.M) eng_split_store4(s, p.R, p.Y, p.H, r, col, n_real);
        }
        __syncthreads(); /* sumv is reused by the next unit */
    }
}

/* The image: per block (head h, column group c), Wo's rows 128c.. (output
 * columns) restricted to the head's input columns 128h.., rows padded to
 * AO_LD (padding zero). */
__global__ void ao_pack_kernel(const bf16 *Wo, bf16 *img, int H, int K, int n_heads) {
    const int nq = H / AO_NC;
    const size_t per = ao_w_bytes() / 2, total = per * (size_t)(n_heads * nq);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(i / per), h = b / nq, c = b % nq;
        const int o = (int)(i - (size_t)b * per), row = o / AO_LD, k = o % AO_LD;
        img[i] = k < AO_D ? Wo[(size_t)(c * AO_NC + row) * K + h * AO_D + k] : __float2bfloat16(0.f);
    }
}

int eng_cu_chain_ao_ok(const eng_cu_attn_args *a, int M, int H) {
    return a && M >= 1 && M <= 16 && a->head_dim == AO_D && a->q_norm && a->k_norm && a->rope && a->n_heads <= 16 &&
           a->n_kv_heads >= 1 && a->n_heads % a->n_kv_heads == 0 && H % AO_NC == 0 && H >= 256 && H <= 4096;
}

size_t eng_cu_chain_ao_img_bytes(int H, int n_heads) { return ao_w_bytes() * (size_t)(n_heads * (H / AO_NC)); }

size_t eng_cu_chain_ao_part_bytes(int H, int n_heads) { return (size_t)H * 16 * n_heads * 4; }

cudaError_t eng_cu_chain_ao_pack(cudaStream_t s, const bf16 *Wo, bf16 *img, int H, int n_heads) {
    if (H % AO_NC || n_heads < 1 || n_heads > 16) return cudaErrorNotSupported;
    ao_pack_kernel<<<512, 256, 0, s>>>(Wo, img, H, n_heads * AO_D, n_heads);
    return cudaGetLastError();
}

cudaError_t eng_cu_chain_ao(cudaStream_t s, const eng_cu_attn_args *a, const int *n_rows_dev, const int *n_seqs_dev,
                            const bf16 *img, const bf16 *R, bf16 *Y, float *part, unsigned long long *bar, int M,
                            int H, int late) {
    if (!eng_cu_chain_ao_ok(a, M, H) || ((uintptr_t)R & 15) || ((uintptr_t)Y & 15) || ((uintptr_t)img & 15) ||
        ((uintptr_t)part & 15) || (a->ldq | a->ldk | a->ldv) % 8)
        return cudaErrorNotSupported;
    const int nb = a->n_heads * (H / AO_NC);
    static int attr_done = 0, fits = -1;
    if (!attr_done) {
        const cudaError_t e = cudaFuncSetAttribute(ao_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)ao_smem());
        if (e != cudaSuccess) return e;
        int dev = 0, sms = 0, per = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, ao_kernel, AO_THREADS, ao_smem()) != cudaSuccess)
            return cudaErrorUnknown;
        fits = per * sms;
        attr_done = 1;
    }
    if (nb > fits) return cudaErrorNotSupported;
    ao_args p;
    p.a = *a;
    p.n_rows_dev = n_rows_dev;
    p.n_seqs_dev = n_seqs_dev;
    p.img = img;
    p.R = R;
    p.Y = Y;
    p.part = part;
    p.bar = bar;
    p.M = M;
    p.H = H;
    p.late = late;
    return eng_cu_launch(ao_kernel, dim3(nb), dim3(AO_THREADS), ao_smem(), s, p);
}

/* eng_cu_deberta: DeBERTa v2 / v3 on the GPU -- the disentangled attention
 * (eng_deberta.h says what it computes) and the layer loop around it.
 *
 * A first, plain form, written for correctness and for running the
 * model on the GPU at all rather than its CPU: the layers are BERT's
 * graph-path layers (our GEMMs, add_ln, the pooling; no one-query chain,
 * no fused LayerNorms), and the attention is one kernel on CUDA cores.
 * Its block takes a tile of 64 query rows of one sequence and one head
 * (the attention tile list, eng_cu_attn_tiles.h) and walks the sequence's
 * keys 32 at a time: Q, the key and value tile (bf16) and the rows of
 * the layer's relative tables the tile's distances reach (at most 64 + 32
 * - 1 of them: the index is monotone in the distance; fp32) in shared
 * memory, each
 * score q.k + q.kr[c] + k.qr[c] as three dot products, an online softmax,
 * P V.  Two threads a query row, each 16 keys of a tile and half of the
 * output.  The key / query projections of the relative table (kr, qr:
 * [L][2 span][H] fp32) are constants of the weights, made once at open by
 * a small tiled GEMM from the uploaded bf16 weights, as is the index of
 * every distance.  Every kernel reads the real token and tile counts from
 * the input block, so one graph serves every batch of its bucket.
 * lab_deberta checks the attention against a double-precision reference;
 * tests/cuda/e2e_rerank.py the whole model against transformers.
 */
#include "eng_cu.h"
#include "eng_cu_frag.h"
#include "eng_cu_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace {

constexpr int DEB_BM = 64, DEB_BN = 32, DEB_RMAX = DEB_BM + DEB_BN - 1;

__device__ __forceinline__ float deb_f(float x) { return x; }
__device__ __forceinline__ float deb_f(bf16 x) { return __bfloat162float(x); }

/* C[r][n] = sum_k A[r][k] B[n][k] (+ bias[n]) for r < M: the tables at
 * open (A fp32, B the bf16 weights).  Tiles of 32 x 32, 256 threads, four
 * outputs a thread. */
template <typename TA, typename TB>
__global__ void __launch_bounds__(256) deb_gemm_kernel(const TA *A, int lda, const TB *B, int ldb, const bf16 *bias,
                                                       float *C, int ldc, int M, int N, int K) {
    __shared__ float tA[32][33], tB[32][33];
    const int rows = M, m0 = blockIdx.y * 32, n0 = blockIdx.x * 32;
    if (m0 >= rows) return;
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k0 = 0; k0 < K; k0 += 32) {
        for (int i = ty; i < 32; i += 8) {
            const int r = m0 + i, n = n0 + i, k = k0 + tx;
            tA[i][tx] = r < rows && k < K ? deb_f(A[(size_t)r * lda + k]) : 0.f;
            tB[i][tx] = n < N && k < K ? deb_f(B[(size_t)n * ldb + k]) : 0.f;
        }
        __syncthreads();
#pragma unroll 8
        for (int k = 0; k < 32; k++) {
            const float b = tB[tx][k];
#pragma unroll
            for (int j = 0; j < 4; j++) acc[j] += tA[ty + 8 * j][k] * b;
        }
        __syncthreads();
    }
    for (int j = 0; j < 4; j++) {
        const int r = m0 + ty + 8 * j, n = n0 + tx;
        if (r < rows && n < N) C[(size_t)r * ldc + n] = acc[j] + (bias ? __bfloat162float(bias[n]) : 0.f);
    }
}

/* rows of H fp32 LayerNormed (biased variance, eps inside the root), in
 * place; one block a row */
__global__ void deb_ln_rows_kernel(float *x, const float *g, const float *b, int H, float eps) {
    float *row = x + (size_t)blockIdx.x * H;
    __shared__ float red[2][32];
    float s = 0.f, q = 0.f;
    for (int i = threadIdx.x; i < H; i += blockDim.x) s += row[i];
    for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) red[0][threadIdx.x >> 5] = s;
    __syncthreads();
    s = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) s += red[0][w];
    const float mu = s / H;
    for (int i = threadIdx.x; i < H; i += blockDim.x) q += (row[i] - mu) * (row[i] - mu);
    for (int o = 16; o; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
    if ((threadIdx.x & 31) == 0) red[1][threadIdx.x >> 5] = q;
    __syncthreads();
    q = 0.f;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) q += red[1][w];
    const float rs = rsqrtf(q / H + eps);
    for (int i = threadIdx.x; i < H; i += blockDim.x) row[i] = (row[i] - mu) * rs * g[i] + b[i];
}

/* dot of n bf16 pairs (n even, 4-byte aligned rows) */
__device__ __forceinline__ float deb_dot(const bf16 *a, const bf16 *b, int n) {
    float acc = 0.f;
    for (int x = 0; x < n; x += 2) {
        const float2 u = __bfloat1622float2(*(const __nv_bfloat162 *)(a + x));
        const float2 v = __bfloat1622float2(*(const __nv_bfloat162 *)(b + x));
        acc = fmaf(u.x, v.x, acc);
        acc = fmaf(u.y, v.y, acc);
    }
    return acc;
}

/* `rows` rows of D bf16 from src (row stride ld, first row r0) into dst
 * (stride D + 8), zeros past `valid` rows; 8 elements a thread at a time */
template <int D>
__device__ __forceinline__ void deb_rows(bf16 *dst, const bf16 *src, size_t ld, int rows, int valid) {
    constexpr int LD = D + 8, C8 = D / 8;
    for (int e = threadIdx.x; e < rows * C8; e += blockDim.x) {
        const int r = e / C8, c = (e - r * C8) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < valid) v = *(const uint4 *)(src + (size_t)r * ld + c);
        *(uint4 *)(dst + r * LD + c) = v;
    }
}

/* rows of an fp32 table (rows of ld floats) into dst (stride D + 4), kept
 * fp32: the table's own rounding would add to the scores' bf16 error */
template <int D>
__device__ __forceinline__ void deb_rows_f(float *dst, const float *src, size_t ld, int rows) {
    constexpr int LDF = D + 4, C4 = D / 4;
    for (int e = threadIdx.x; e < rows * C4; e += blockDim.x) {
        const int r = e / C4, c = (e - r * C4) * 4;
        *(float4 *)(dst + r * LDF + c) = *(const float4 *)(src + (size_t)r * ld + c);
    }
}

/* dot of a bf16 row and an fp32 row of n (even) */
__device__ __forceinline__ float deb_dot_f(const bf16 *a, const float *b, int n) {
    float acc = 0.f;
    for (int x = 0; x < n; x += 2) {
        const float2 u = __bfloat1622float2(*(const __nv_bfloat162 *)(a + x));
        acc = fmaf(u.x, b[x], acc);
        acc = fmaf(u.y, b[x + 1], acc);
    }
    return acc;
}

template <int D>
__global__ void __launch_bounds__(128) deb_attn_kernel(eng_cu_deb_args a) {
    constexpr int LD = D + 8, HD = D / 2, LDF = D + 4;
    extern __shared__ __align__(16) unsigned char deb_smem[];
    bf16 *sQ = (bf16 *)deb_smem, *sK = sQ + DEB_BM * LD, *sV = sK + DEB_BN * LD;
    float *sKr = (float *)(sV + DEB_BN * LD), *sQr = sKr + DEB_RMAX * LDF, *sP = sQr + DEB_RMAX * LDF;
    const int tile = blockIdx.x, h = blockIdx.y;
    if (tile >= *a.n_tiles) return;
    const int seq = a.tiles[2 * tile], q0 = a.tiles[2 * tile + 1];
    const int start = a.cu_seqlens[seq], len = a.cu_seqlens[seq + 1] - start;
    const int qrows = min(DEB_BM, len - q0);
    const int tid = threadIdx.x, i = tid >> 1, half = tid & 1;
    const bool live = i < qrows;
    const int *idx = a.idx + (a.max_len - 1);   /* idx[query - key] */
    deb_rows<D>(sQ, a.q + (size_t)(start + q0) * a.ldq + h * D, a.ldq, DEB_BM, qrows);
    float o[HD];
#pragma unroll
    for (int x = 0; x < HD; x++) o[x] = 0.f;
    float m = -INFINITY, l = 0.f;
    for (int k0 = 0; k0 < len; k0 += DEB_BN) {
        const int kvalid = min(DEB_BN, len - k0);
        __syncthreads();   /* the previous tile's reads are done */
        deb_rows<D>(sK, a.k + (size_t)(start + k0) * a.ldk + h * D, a.ldk, DEB_BN, kvalid);
        deb_rows<D>(sV, a.v + (size_t)(start + k0) * a.ldv + h * D, a.ldv, DEB_BN, kvalid);
        /* the table rows this tile's distances reach: q0 - last key .. last query - k0 */
        const int c_lo = idx[q0 - (k0 + kvalid - 1)], c_hi = idx[q0 + qrows - 1 - k0];
        if (a.kr) deb_rows_f<D>(sKr, a.kr + (size_t)c_lo * a.H + h * D, a.H, c_hi - c_lo + 1);
        if (a.qr) deb_rows_f<D>(sQr, a.qr + (size_t)c_lo * a.H + h * D, a.H, c_hi - c_lo + 1);
        __syncthreads();
        float s[DEB_BN / 2];
        float mx = -INFINITY;
#pragma unroll
        for (int jj = 0; jj < DEB_BN / 2; jj++) {
            const int j = half * (DEB_BN / 2) + jj;
            float v = -INFINITY;
            if (live && j < kvalid) {
                const bf16 *qi = sQ + i * LD, *kj = sK + j * LD;
                float acc = deb_dot(qi, kj, D);
                const int c = idx[q0 + i - (k0 + j)] - c_lo;
                if (a.kr) acc += deb_dot_f(qi, sKr + c * LDF, D);
                if (a.qr) acc += deb_dot_f(kj, sQr + c * LDF, D);
                v = acc * a.scale_log2;
            }
            s[jj] = v;
            mx = fmaxf(mx, v);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        const float mn = fmaxf(m, mx);
        const float corr = mn == -INFINITY ? 1.f : exp2f(m - mn);
        float ls = 0.f;
#pragma unroll
        for (int jj = 0; jj < DEB_BN / 2; jj++) {
            const float p = mn == -INFINITY ? 0.f : exp2f(s[jj] - mn);
            sP[i * (DEB_BN + 1) + half * (DEB_BN / 2) + jj] = p;
            ls += p;
        }
        ls += __shfl_xor_sync(0xffffffffu, ls, 1);
        l = l * corr + ls;
        m = mn;
#pragma unroll
        for (int x = 0; x < HD; x++) o[x] *= corr;
        __syncwarp();   /* the row's other thread wrote its half of P */
        for (int j = 0; j < kvalid; j++) {
            const float p = sP[i * (DEB_BN + 1) + j];
            const bf16 *vj = sV + j * LD + half * HD;
#pragma unroll
            for (int x = 0; x < HD; x += 2) {
                const float2 v = __bfloat1622float2(*(const __nv_bfloat162 *)(vj + x));
                o[x] = fmaf(p, v.x, o[x]);
                o[x + 1] = fmaf(p, v.y, o[x + 1]);
            }
        }
    }
    if (!live) return;
    const float inv = 1.f / l;
    bf16 *dst = a.o + (size_t)(start + q0 + i) * a.ldo + h * D + half * HD;
#pragma unroll
    for (int x = 0; x < HD; x += 2)
        *(__nv_bfloat162 *)(dst + x) = __floats2bfloat162_rn(o[x] * inv, o[x + 1] * inv);
}

/* ---- the tensor-core form (head size 64) ----------------------------------
 * A block of 4 warps takes 64 query rows of one sequence and one head, as
 * above, and walks the keys 32 at a time.  Every product is an mma.sync
 * (bf16 in, fp32 accumulate):
 *   S   = Q K^T                      (eng_attn_qk, the warp's 16 rows)
 *   C2P = Q Kr^T over the table rows the tile reaches (at most 64 + 32 - 1:
 *         the index is monotone in the distance), each warp its own rows
 *   P2C = K Qr^T over the same rows, the 32 keys split over the warps by
 *         table columns
 * with Kr, Qr as hi + lo bf16 pairs, so the table terms keep the fp32
 * tables' precision (one bf16 rounding of the tables took the model's
 * error past transformers' own bf16 error: run 116).  C2P and P2C go to
 * shared memory (fp32); each score then gathers its two terms at its
 * distance's index, and the online softmax and P V are attention v2's
 * (eng_cu_frag.h).  K, V and the table rows are staged by cp.async. */
constexpr int TC_BM = 64, TC_BN = 32, TC_R = 96, TC_RS = TC_R + 4;

template <int D>
constexpr size_t deb_tc_smem_bytes() {
    return (size_t)(TC_BM + 2 * TC_BN + 4 * TC_R) * (D + 8) * 2 + (size_t)(TC_BM + TC_BN) * TC_RS * 4;
}

/* acc[2 n-tiles][4] += A (the fragments af) x B rows n0..n0+15 of a [rows][D+8] table (hi and lo) */
template <int D>
__device__ __forceinline__ void deb_tc_pair(float (*acc)[4], const uint32_t (*af)[4], const bf16 *bh, const bf16 *bl,
                                            int n0) {
    constexpr int LD = D + 8;
    const int lane = threadIdx.x & 31, mi = lane >> 3, mr = lane & 7;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const int off = (n0 + (mi >> 1) * 8 + mr) * LD + kk * 16 + (mi & 1) * 8;
        uint32_t b[4];
        eng_ldmatrix_x4(b, bh + off);
        eng_mma16816(acc[0], af[kk], b[0], b[1]);
        eng_mma16816(acc[1], af[kk], b[2], b[3]);
        eng_ldmatrix_x4(b, bl + off);
        eng_mma16816(acc[0], af[kk], b[0], b[1]);
        eng_mma16816(acc[1], af[kk], b[2], b[3]);
    }
}

/* two n-tiles of an accumulator (rows r0 + g, r0 + g + 8; columns n0 + 8 nt + 2 t) into an fp32 block */
__device__ __forceinline__ void deb_tc_put(float *dst, int r0, int n0, const float (*acc)[4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int nt = 0; nt < 2; nt++) {
        const int c = n0 + nt * 8 + 2 * t;
        *(float2 *)(dst + (r0 + g) * TC_RS + c) = make_float2(acc[nt][0], acc[nt][1]);
        *(float2 *)(dst + (r0 + g + 8) * TC_RS + c) = make_float2(acc[nt][2], acc[nt][3]);
    }
}

template <int D>
__global__ void __launch_bounds__(128, 2) deb_attn_tc_kernel(eng_cu_deb_args a) {
    constexpr int LD = D + 8;
    extern __shared__ __align__(16) unsigned char deb_smem[];
    bf16 *sQ = (bf16 *)deb_smem, *sK = sQ + TC_BM * LD, *sV = sK + TC_BN * LD;
    bf16 *sKh = sV + TC_BN * LD, *sKl = sKh + TC_R * LD, *sQh = sKl + TC_R * LD, *sQl = sQh + TC_R * LD;
    float *sC = (float *)(sQl + TC_R * LD), *sP = sC + TC_BM * TC_RS;
    const int tile = blockIdx.x, h = blockIdx.y;
    if (tile >= *a.n_tiles) return;
    const int seq = a.tiles[2 * tile], q0 = a.tiles[2 * tile + 1];
    const int start = a.cu_seqlens[seq], len = a.cu_seqlens[seq + 1] - start;
    const int qrows = min(TC_BM, len - q0);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int mi = lane >> 3, mr = lane & 7;
    const int *idx = a.idx + (a.max_len - 1);   /* idx[query - key] */
    const bool c2p = a.krh != nullptr, p2c = a.qrh != nullptr;
    const int wrow0 = q0 + warp * 16;
    eng_async_rows<TC_BM, D, 128>(sQ, a.q + (size_t)(start + q0) * a.ldq + h * D, a.ldq, qrows);
    eng_async_commit();
    uint32_t qf[D / 16][4];
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    for (int k0 = 0; k0 < len; k0 += TC_BN) {
        const int kvalid = min(TC_BN, len - k0);
        const int c_lo = idx[q0 - (k0 + kvalid - 1)], c_hi = idx[q0 + qrows - 1 - k0];
        const int nrow = c_hi - c_lo + 1;
        __syncthreads();   /* the previous tile's reads of every buffer are done */
        eng_async_rows<TC_BN, D, 128>(sK, a.k + (size_t)(start + k0) * a.ldk + h * D, a.ldk, kvalid);
        eng_async_rows<TC_BN, D, 128>(sV, a.v + (size_t)(start + k0) * a.ldv + h * D, a.ldv, kvalid);
        const size_t toff = (size_t)c_lo * a.H + h * D;
        if (c2p) {
            eng_async_rows<TC_R, D, 128>(sKh, a.krh + toff, a.H, nrow);
            eng_async_rows<TC_R, D, 128>(sKl, a.krl + toff, a.H, nrow);
        }
        if (p2c) {
            eng_async_rows<TC_R, D, 128>(sQh, a.qrh + toff, a.H, nrow);
            eng_async_rows<TC_R, D, 128>(sQl, a.qrl + toff, a.H, nrow);
        }
        eng_async_commit();
        eng_async_wait<0>();
        __syncthreads();
        if (k0 == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++)
                eng_ldmatrix_x4(qf[kk], sQ + (warp * 16 + (mi & 1) * 8 + mr) * LD + kk * 16 + (mi >> 1) * 8);
        }
        /* C2P: this warp's 16 query rows against every table row of the tile */
        if (c2p)
#pragma unroll 1
            for (int n0 = 0; n0 < nrow; n0 += 16) {
                float acc[2][4] = {};
                deb_tc_pair<D>(acc, qf, sKh, sKl, n0);
                deb_tc_put(sC, warp * 16, n0, acc);
            }
        /* P2C: the tile's 32 keys (two m-tiles) against the table rows, the 16-row column blocks split over the warps */
        if (p2c)
#pragma unroll 1
            for (int n0 = warp * 16; n0 < nrow; n0 += 64)
#pragma unroll
                for (int mt = 0; mt < TC_BN / 16; mt++) {
                    uint32_t kf[D / 16][4];
#pragma unroll
                    for (int kk = 0; kk < D / 16; kk++)
                        eng_ldmatrix_x4(kf[kk], sK + (mt * 16 + (mi & 1) * 8 + mr) * LD + kk * 16 + (mi >> 1) * 8);
                    float acc[2][4] = {};
                    deb_tc_pair<D>(acc, kf, sQh, sQl, n0);
                    deb_tc_put(sP, mt * 16, n0, acc);
                }
        float sc[TC_BN / 8][4];
        eng_attn_qk<D, TC_BN, false>(qf, sK, sc, nullptr);
        __syncthreads();   /* every warp's C2P rows and P2C columns are in */
#pragma unroll
        for (int nt = 0; nt < TC_BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int kc = nt * 8 + 2 * t + (e & 1), r = warp * 16 + g + 8 * (e >> 1);
                const int key = k0 + kc, q = q0 + r;
                if (key < len && q < len) {
                    const int c = idx[q - key] - c_lo;
                    float add = 0.f;
                    if (c2p) add += sC[r * TC_RS + c];
                    if (p2c) add += sP[kc * TC_RS + c];
                    sc[nt][e] += add;
                }
            }
        eng_attn_softmax<D, TC_BN, false>(sc, k0, len, wrow0, a.scale_log2, o, m, l);   /* scale * log2 e */
        eng_attn_pv<D, TC_BN>(sc, sV, o);
    }
    eng_attn_store<D>(o, l, qrows, a.o + (size_t)(start + q0) * a.ldo + h * D, a.ldo);
}

__global__ void deb_split_kernel(const float *x, bf16 *hi, bf16 *lo, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const bf16 hv = __float2bfloat16(x[i]);
        hi[i] = hv;
        lo[i] = __float2bfloat16(x[i] - __bfloat162float(hv));
    }
}

constexpr size_t deb_smem_bytes(int D) {
    return (size_t)(DEB_BM + 2 * DEB_BN) * (D + 8) * 2 + (size_t)2 * DEB_RMAX * (D + 4) * 4 +
           (size_t)DEB_BM * (DEB_BN + 1) * 4;
}

template <int D>
cudaError_t deb_launch(cudaStream_t s, const eng_cu_deb_args *a) {
    constexpr size_t smem = deb_smem_bytes(D);
    static bool optin = false;   /* set on the first, eager, launch; never inside a capture */
    if (smem > 48 * 1024 && !optin) {
        const cudaError_t e = cudaFuncSetAttribute(deb_attn_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   (int)smem);
        if (e != cudaSuccess) return e;
        optin = true;
    }
    deb_attn_kernel<D><<<dim3(a->max_tiles, a->n_heads), 128, smem, s>>>(*a);
    return cudaGetLastError();
}

}  // namespace

cudaError_t eng_cu_deberta_attention(cudaStream_t s, const eng_cu_deb_args *a) {
    if (a->max_tiles <= 0 || a->n_heads <= 0 || a->max_len <= 0 || !a->idx) return cudaErrorInvalidValue;
    if (a->head_dim == 64 && (a->krh || a->qrh) && (!a->kr || a->krh) && (!a->qr || a->qrh)) {
        constexpr size_t smem = deb_tc_smem_bytes<64>();
        static bool optin = false;   /* set on the first, eager, launch; never inside a capture */
        if (!optin) {
            const cudaError_t e = cudaFuncSetAttribute(deb_attn_tc_kernel<64>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       (int)smem);
            if (e != cudaSuccess) return e;
            optin = true;
        }
        deb_attn_tc_kernel<64><<<dim3(a->max_tiles, a->n_heads), 128, smem, s>>>(*a);
        return cudaGetLastError();
    }
    switch (a->head_dim) {
    case 32: return deb_launch<32>(s, a);
    case 64: return deb_launch<64>(s, a);
    case 128: return deb_launch<128>(s, a);
    default: return cudaErrorInvalidValue;
    }
}

cudaError_t eng_cu_deberta_gemm_f32_bf16(cudaStream_t s, const float *A, int lda, const bf16 *B, int ldb,
                                         const bf16 *bias, float *C, int ldc, int M, int N, int K) {
    const dim3 grid((unsigned)((N + 31) / 32), (unsigned)((M + 31) / 32), 1);
    deb_gemm_kernel<float, bf16><<<grid, 256, 0, s>>>(A, lda, B, ldb, bias, C, ldc, M, N, K);
    return cudaGetLastError();
}

cudaError_t eng_cu_deberta_split(cudaStream_t s, const float *x, bf16 *hi, bf16 *lo, size_t n) {
    deb_split_kernel<<<256, 256, 0, s>>>(x, hi, lo, n);
    return cudaGetLastError();
}

cudaError_t eng_cu_deberta_ln_rows(cudaStream_t s, float *x, const float *g, const float *b, int rows, int H,
                                   float eps) {
    deb_ln_rows_kernel<<<rows, 256, 0, s>>>(x, g, b, H, eps);
    return cudaGetLastError();
}

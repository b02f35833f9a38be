/* eng_cu_attn: variable-length attention over packed sequences, on tensor
 * cores (mma.sync m16n8k16 bf16 -> fp32), FlashAttention-style.
 *
 * Work unit: one query tile of BM=64 rows of one sequence, for one head
 * (grid = max_tiles x heads).  The host writes the tile list (sequence,
 * first row) next to cu_seqlens; blocks past the real tile count exit, so a
 * graph captured for a bucket serves any mix of sequences.  Nothing is
 * padded: key rows past a sequence's end are zero-filled in shared memory
 * and masked to -inf, query rows past it are never stored.
 *
 * Each of the 4 warps owns 16 query rows.  Per key tile (BN rows):
 * S = Q K^T in registers, scaled into the log2 domain, masked (length,
 * and key > query when causal), online softmax (running max and sum per
 * row, rescale of the output accumulator), then P is repacked from the S
 * accumulator layout straight into mma A-fragments (the two layouts agree)
 * and O += P V, with V's B-fragments read by ldmatrix.trans.  Q and K
 * fragments are 32-bit shared-memory loads; rows are padded by 16 bytes so
 * those loads and ldmatrix are bank-conflict free.  Softmax and the
 * accumulators are fp32; O is written as bf16.
 *
 * Causal attention only visits key tiles up to the last query row of the
 * tile: it is the prefill kernel the decoder models reuse.  Grouped-query
 * attention maps q head h to kv head h / (n_heads / n_kv_heads).
 */
#include "eng_cu.h"
#include <math.h>

static __device__ __forceinline__ uint32_t ld32(const bf16 *p) { return *(const uint32_t *)p; }

static __device__ __forceinline__ void mma16816(float *c, const uint32_t *a, uint32_t b0,
                                                uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

static __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t *r, const bf16 *p) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

static __device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&h;
}

/* Copy `rows_valid` rows of D bf16 (stride ld in global) into a [R][D+8]
 * shared tile, zero-filling rows past rows_valid. */
template <int R, int D>
static __device__ __forceinline__ void load_tile(bf16 *dst, const bf16 *src, int ld,
                                                 int rows_valid) {
    constexpr int LD = D + 8, CPR = D / 8;
    for (int c = threadIdx.x; c < R * CPR; c += blockDim.x) {
        const int r = c / CPR, cc = (c % CPR) * 8;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (r < rows_valid) v = *(const uint4 *)(src + (size_t)r * ld + cc);
        *(uint4 *)(dst + r * LD + cc) = v;
    }
}

/* Version 1: synchronous K/V tile loads, mask and scale on every tile,
 * accurate exp2f.  Kept for the lab's comparison (args.version = 1). */
template <int D, bool CAUSAL>
__global__ void __launch_bounds__(128) attn_kernel_v1(eng_cu_attn_args a) {
    ENG_CU_PDL_WAIT();
    constexpr int BM = ENG_CU_ATTN_BM, BN = D >= 128 ? 32 : 64, LD = D + 8;
    __shared__ __align__(16) bf16 sQ[BM * LD];
    __shared__ __align__(16) bf16 sK[BN * LD];
    __shared__ __align__(16) bf16 sV[BN * LD];

    if ((int)blockIdx.x >= *a.n_tiles_dev) return;
    const int seq = a.tiles[2 * blockIdx.x], q0 = a.tiles[2 * blockIdx.x + 1];
    const int h = blockIdx.y, kvh = h / (a.n_heads / a.n_kv_heads);
    const int start = a.cu_seqlens[seq], len = a.cu_seqlens[seq + 1] - start;
    const int qrows = min(BM, len - q0);

    load_tile<BM, D>(sQ, a.q + (size_t)(start + q0) * a.ldq + h * D, a.ldq, qrows);
    __syncthreads();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    uint32_t qf[D / 16][4];
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        const bf16 *b = sQ + (warp * 16) * LD + kk * 16 + 2 * t;
        qf[kk][0] = ld32(b + g * LD);
        qf[kk][1] = ld32(b + (g + 8) * LD);
        qf[kk][2] = ld32(b + g * LD + 8);
        qf[kk][3] = ld32(b + (g + 8) * LD + 8);
    }

    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float sl2 = a.scale * 1.4426950408889634f;
    const int qi[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const int kend = CAUSAL ? min(len, q0 + BM) : len;

    const bf16 *kbase = a.k + (size_t)start * a.ldk + kvh * D;
    const bf16 *vbase = a.v + (size_t)start * a.ldv + kvh * D;
    for (int k0 = 0; k0 < kend; k0 += BN) {
        __syncthreads(); /* the previous tile's K/V are no longer read */
        load_tile<BN, D>(sK, kbase + (size_t)k0 * a.ldk, a.ldk, len - k0);
        load_tile<BN, D>(sV, vbase + (size_t)k0 * a.ldv, a.ldv, len - k0);
        __syncthreads();

        float sc[BN / 8][4];
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++) {
            sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                const bf16 *b = sK + (nt * 8 + g) * LD + kk * 16 + 2 * t;
                mma16816(sc[nt], qf[kk], ld32(b), ld32(b + 8));
            }
        }
        /* mask, scale into log2 domain, running max */
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int key = k0 + nt * 8 + 2 * t + (e & 1), r = e >> 1;
                const bool ok = key < len && (!CAUSAL || key <= qi[r]);
                sc[nt][e] = ok ? sc[nt][e] * sl2 : -INFINITY;
                mx[r] = fmaxf(mx[r], sc[nt][e]);
            }
        float alpha[2], mu[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            mu[r] = mx[r] == -INFINITY ? 0.f : mx[r]; /* a row with no valid key yet */
            alpha[r] = exp2f(m[r] - mu[r]);
            m[r] = mx[r];
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            o[i][0] *= alpha[0]; o[i][1] *= alpha[0];
            o[i][2] *= alpha[1]; o[i][3] *= alpha[1];
        }
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                sc[nt][e] = exp2f(sc[nt][e] - mu[e >> 1]);
                l[e >> 1] += sc[nt][e];
            }
        /* O += P V: P's accumulator layout is the A-fragment layout */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t pa[4];
            pa[0] = pack_bf16(sc[2 * kk][0], sc[2 * kk][1]);
            pa[1] = pack_bf16(sc[2 * kk][2], sc[2 * kk][3]);
            pa[2] = pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
            pa[3] = pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
            for (int dn = 0; dn < D / 8; dn += 2) {
                const int mi = lane >> 3, r = lane & 7;
                uint32_t vb[4];
                ldmatrix_x4_trans(vb, sV + (kk * 16 + (mi & 1) * 8 + r) * LD + (dn + (mi >> 1)) * 8);
                mma16816(o[dn], pa, vb[0], vb[1]);
                mma16816(o[dn + 1], pa, vb[2], vb[3]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        l[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = warp * 16 + g + 8 * r;
        if (row >= qrows) continue;
        bf16 *dst = a.o + (size_t)(start + q0 + row) * a.ldo + h * D + 2 * t;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++)
            *(uint32_t *)(dst + dn * 8) = pack_bf16(o[dn][2 * r] * l[r], o[dn][2 * r + 1] * l[r]);
    }
}


static __device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

static __device__ __forceinline__ void ldmatrix_x4(uint32_t *r, const bf16 *p) {
    const uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* cp.async of a [R][D] tile into [R][D+8] shared rows; rows >= rows_valid
 * are zero-filled by the copy engine (src-size 0). */
template <int R, int D>
static __device__ __forceinline__ void async_tile(bf16 *dst, const bf16 *src, int ld,
                                                  int rows_valid) {
    constexpr int LD = D + 8, CPR = D / 8;
#pragma unroll
    for (int c = threadIdx.x; c < R * CPR; c += 128) {
        const int r = c / CPR, cc = (c % CPR) * 8;
        const bool ok = r < rows_valid;
        const bf16 *g = ok ? src + (size_t)r * ld + cc : src;
        const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst + r * LD + cc);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(g),
                     "r"(ok ? 16 : 0));
    }
    asm volatile("cp.async.commit_group;\n" ::);
}

template <int N>
static __device__ __forceinline__ void async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Version 2 (shipped): K/V tiles double-buffered with cp.async so the next
 * tile streams in while this one is computed; K fragments by ldmatrix;
 * the mask is applied only on tiles that cross the sequence end or the
 * causal diagonal; softmax on raw scores with one FFMA + ex2.approx per
 * element (scale folded into the exponent), as FlashAttention-2 does.
 * D=128 keeps one stage (two would pass the 48 KB static shared limit). */
template <int D, bool CAUSAL>
__global__ void __launch_bounds__(128, D >= 128 ? 2 : 4) attn_kernel_v2(eng_cu_attn_args a) {
    ENG_CU_PDL_WAIT();
    constexpr int BM = ENG_CU_ATTN_BM, BN = D >= 128 ? 32 : 64, LD = D + 8;
    constexpr int ST = D >= 128 ? 1 : 2;
    __shared__ __align__(16) bf16 sQ[BM * LD];
    __shared__ __align__(16) bf16 sK[ST][BN * LD];
    __shared__ __align__(16) bf16 sV[ST][BN * LD];

    if ((int)blockIdx.x >= *a.n_tiles_dev) return;
    const int seq = a.tiles[2 * blockIdx.x], q0 = a.tiles[2 * blockIdx.x + 1];
    const int h = blockIdx.y, kvh = h / (a.n_heads / a.n_kv_heads);
    const int start = a.cu_seqlens[seq], len = a.cu_seqlens[seq + 1] - start;
    const int qrows = min(BM, len - q0);
    const int kend = CAUSAL ? min(len, q0 + BM) : len;
    const int ntiles = (kend + BN - 1) / BN;
    const bf16 *kbase = a.k + (size_t)start * a.ldk + kvh * D;
    const bf16 *vbase = a.v + (size_t)start * a.ldv + kvh * D;

    async_tile<BM, D>(sQ, a.q + (size_t)(start + q0) * a.ldq + h * D, a.ldq, qrows);
    async_tile<BN, D>(sK[0], kbase, a.ldk, len);
    async_tile<BN, D>(sV[0], vbase, a.ldv, len);

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int mi = lane >> 3, mr = lane & 7;
    uint32_t qf[D / 16][4];
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float sl2 = a.scale * 1.4426950408889634f;
    const int qi[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
    const int wrow0 = q0 + warp * 16; /* this warp's first query row */

    for (int j = 0; j < ntiles; j++) {
        const int k0 = j * BN, buf = ST == 2 ? (j & 1) : 0;
        if (ST == 2 && j + 1 < ntiles) {
            async_tile<BN, D>(sK[(j + 1) & 1], kbase + (size_t)(k0 + BN) * a.ldk, a.ldk, len - k0 - BN);
            async_tile<BN, D>(sV[(j + 1) & 1], vbase + (size_t)(k0 + BN) * a.ldv, a.ldv, len - k0 - BN);
            async_wait<2>();
        } else {
            async_wait<0>();
        }
        __syncthreads();
        if (j == 0) {
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++)
                ldmatrix_x4(qf[kk], sQ + (warp * 16 + (mi & 1) * 8 + mr) * LD + kk * 16 + (mi >> 1) * 8);
        }
        const bf16 *K = sK[buf], *V = sV[buf];
        float sc[BN / 8][4];
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt += 2) {
            sc[nt][0] = sc[nt][1] = sc[nt][2] = sc[nt][3] = 0.f;
            sc[nt + 1][0] = sc[nt + 1][1] = sc[nt + 1][2] = sc[nt + 1][3] = 0.f;
#pragma unroll
            for (int kk = 0; kk < D / 16; kk++) {
                uint32_t kb[4];
                ldmatrix_x4(kb, K + (nt * 8 + (mi >> 1) * 8 + mr) * LD + kk * 16 + (mi & 1) * 8);
                mma16816(sc[nt], qf[kk], kb[0], kb[1]);
                mma16816(sc[nt + 1], qf[kk], kb[2], kb[3]);
            }
        }
        const bool need_mask = k0 + BN > len || (CAUSAL && k0 + BN - 1 > wrow0);
        if (need_mask) {
#pragma unroll
            for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = k0 + nt * 8 + 2 * t + (e & 1);
                    if (key >= len || (CAUSAL && key > qi[e >> 1])) sc[nt][e] = -INFINITY;
                }
        }
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++) {
            mx[0] = fmaxf(mx[0], fmaxf(sc[nt][0], sc[nt][1]));
            mx[1] = fmaxf(mx[1], fmaxf(sc[nt][2], sc[nt][3]));
        }
        float alpha[2], nms[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float mu = mx[r] == -INFINITY ? 0.f : mx[r];
            nms[r] = -mu * sl2;
            alpha[r] = fast_exp2(fmaf(m[r], sl2, nms[r]));
            m[r] = mx[r];
            l[r] *= alpha[r];
        }
#pragma unroll
        for (int i = 0; i < D / 8; i++) {
            o[i][0] *= alpha[0]; o[i][1] *= alpha[0];
            o[i][2] *= alpha[1]; o[i][3] *= alpha[1];
        }
#pragma unroll
        for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                sc[nt][e] = fast_exp2(fmaf(sc[nt][e], sl2, nms[e >> 1]));
                l[e >> 1] += sc[nt][e];
            }
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t pa[4];
            pa[0] = pack_bf16(sc[2 * kk][0], sc[2 * kk][1]);
            pa[1] = pack_bf16(sc[2 * kk][2], sc[2 * kk][3]);
            pa[2] = pack_bf16(sc[2 * kk + 1][0], sc[2 * kk + 1][1]);
            pa[3] = pack_bf16(sc[2 * kk + 1][2], sc[2 * kk + 1][3]);
#pragma unroll
            for (int dn = 0; dn < D / 8; dn += 2) {
                uint32_t vb[4];
                ldmatrix_x4_trans(vb, V + (kk * 16 + (mi & 1) * 8 + mr) * LD + (dn + (mi >> 1)) * 8);
                mma16816(o[dn], pa, vb[0], vb[1]);
                mma16816(o[dn + 1], pa, vb[2], vb[3]);
            }
        }
        __syncthreads(); /* buffer `buf` is refilled by the next iteration's prefetch */
        if (ST == 1 && j + 1 < ntiles) {
            async_tile<BN, D>(sK[0], kbase + (size_t)(k0 + BN) * a.ldk, a.ldk, len - k0 - BN);
            async_tile<BN, D>(sV[0], vbase + (size_t)(k0 + BN) * a.ldv, a.ldv, len - k0 - BN);
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        l[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = warp * 16 + g + 8 * r;
        if (row >= qrows) continue;
        bf16 *dst = a.o + (size_t)(start + q0 + row) * a.ldo + h * D + 2 * t;
#pragma unroll
        for (int dn = 0; dn < D / 8; dn++)
            *(uint32_t *)(dst + dn * 8) = pack_bf16(o[dn][2 * r] * l[r], o[dn][2 * r + 1] * l[r]);
    }
}

int eng_cu_attn_tiles(const int32_t *cu, int n_seqs, int32_t *tiles) {
    int n = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int q0 = 0; q0 < cu[s + 1] - cu[s]; q0 += ENG_CU_ATTN_BM) {
            tiles[2 * n] = s;
            tiles[2 * n + 1] = q0;
            n++;
        }
    return n;
}

int eng_cu_attn_max_tiles(int tokens, int seqs) {
    /* sum over sequences of ceil(len/BM) <= tokens/BM + seqs */
    if (seqs > tokens) seqs = tokens;
    return tokens / ENG_CU_ATTN_BM + seqs;
}

template <int D>
static cudaError_t launch_d(cudaStream_t s, const eng_cu_attn_args *a) {
    dim3 grid(a->max_tiles, a->n_heads);
    if (a->version == 1) {
        if (a->causal)
            attn_kernel_v1<D, true><<<grid, 128, 0, s>>>(*a);
        else
            attn_kernel_v1<D, false><<<grid, 128, 0, s>>>(*a);
    } else {
        cudaError_t e = a->causal ? eng_cu_launch(attn_kernel_v2<D, true>, grid, dim3(128), 0, s, *a)
                                  : eng_cu_launch(attn_kernel_v2<D, false>, grid, dim3(128), 0, s, *a);
        if (e != cudaSuccess) return e;
    }
    return cudaGetLastError();
}

cudaError_t eng_cu_attention(cudaStream_t s, const eng_cu_attn_args *a) {
    if (a->max_tiles <= 0 || a->n_heads <= 0 || a->n_kv_heads <= 0 ||
        a->n_heads % a->n_kv_heads)
        return cudaErrorInvalidValue;
    switch (a->head_dim) {
    case 32: return launch_d<32>(s, a);
    case 64: return launch_d<64>(s, a);
    case 128: return launch_d<128>(s, a);
    default: return cudaErrorInvalidValue;
    }
}

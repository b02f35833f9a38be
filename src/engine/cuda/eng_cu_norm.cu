/* eng_cu_norm: the row-wise kernels of the encoder -- embedding gather +
 * LayerNorm, residual add + LayerNorm -- and of decoders: residual add +
 * RMSNorm, its statistics alone (for GEMMs that scale their rows), and
 * embedding gather + RMSNorm (the residual stream keeps the table row, the
 * first layer reads its norm).
 *
 * One warp owns one row: H <= 4096 values live in registers as chunks of 8
 * bf16 (16-byte loads), so a row is read once and written once, and the
 * statistics are a register reduction plus warp shuffles -- no shared
 * memory, no block barrier.  Mean and variance are taken in two passes over
 * the registers (exact, no E[x^2]-E[x]^2 cancellation).  All arithmetic is
 * fp32; only storage is bf16.  MAXC (chunks per lane) is a template
 * parameter so the register array is indexed by constants only.
 *
 * The encoders' two LayerNorm kernels also come as row walkers (the
 * default where H = 8 x CPL x LPR: 256, 384, 512, 768, 1024): a row in LPR
 * lanes (16 or 32) with no lane idle, one wave of blocks whose warps walk
 * many rows, gamma / beta in shared memory once a block, the next row's
 * input in flight under this row's statistics.  On the H200 (2026-12-03
 * runs 29-32) they made add_ln 0.78-0.83x and embed_ln 0.46-0.49x the
 * one-row kernels' time at 65536 rows, saturated MiniLM steps 1.025x and
 * BERT-base 1.014x (docs/BENCHMARKS.md, "The residual add + LayerNorm
 * walking rows").
 */
#include "eng_cu.h"
#include <stdlib.h>
#include <string.h>

#define ROWS_PER_BLOCK 4

thread_local int eng_cu_pdl_on = 0;


/* add_ln's short-row path: parameters held in registers from the start. */
template <int MAXC>
static __device__ __forceinline__ void load_params(const float *gamma, const float *beta, int H,
                                                   float (*g)[8], float (*b)[8]) {
    const int lane = threadIdx.x & 31, nc = H >> 3;
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = lane + 32 * i;
        if (c < nc) {
            const float4 *gp = (const float4 *)(gamma + c * 8), *bp = (const float4 *)(beta + c * 8);
            float4 g0 = gp[0], g1 = gp[1], b0 = bp[0], b1 = bp[1];
            g[i][0] = g0.x; g[i][1] = g0.y; g[i][2] = g0.z; g[i][3] = g0.w;
            g[i][4] = g1.x; g[i][5] = g1.y; g[i][6] = g1.z; g[i][7] = g1.w;
            b[i][0] = b0.x; b[i][1] = b0.y; b[i][2] = b0.z; b[i][3] = b0.w;
            b[i][4] = b1.x; b[i][5] = b1.y; b[i][6] = b1.z; b[i][7] = b1.w;
        }
    }
}

template <int MAXC>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
embed_ln_kernel(const int32_t *ids, const int32_t *pos_ids, const int32_t *type_ids,
                const bf16 *word, const bf16 *pos, const bf16 *type, const float *gamma,
                const float *beta, bf16 *out, int rows, const int *n_rows_dev, int H, float eps) {
    ENG_CU_PDL_WAIT();
    const int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int n = n_rows_dev ? min(*n_rows_dev, rows) : rows;
    if (row >= n) return;
    const int lane = threadIdx.x & 31, nc = H >> 3;
    const bf16 *w = word + (size_t)ids[row] * H;
    const bf16 *p = pos + (size_t)pos_ids[row] * H;
    const bf16 *t = type ? type + (size_t)(type_ids ? type_ids[row] : 0) * H : NULL;
    float v[MAXC][8];
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = lane + 32 * i;
        if (c < nc) {
            float a[8], b[8];
            eng_cu_load8(w + c * 8, v[i]);
            eng_cu_load8(p + c * 8, a);
            if (t) eng_cu_load8(t + c * 8, b);
#pragma unroll
            for (int j = 0; j < 8; j++) v[i][j] += a[j] + (t ? b[j] : 0.f);
        }
    }
    eng_cu_ln_finish<MAXC>(v, H, gamma, beta, out + (size_t)row * H, eps);
}

template <int MAXC>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
add_ln_kernel(const bf16 *x, const bf16 *res, const float *gamma, const float *beta, bf16 *out,
              int rows, const int *n_rows_dev, int H, float eps, int rev) {
    /* rev: the blocks take the rows last to first (eng_cu_order.c) */
    const int row = (rev ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int lane = threadIdx.x & 31, nc = H >> 3;
    if (MAXC <= 4) {
        /* the parameters and the real row count (input block) before the
         * wait: after it, one round trip (the row) */
        float v[MAXC][8], g[MAXC][8], b[MAXC][8];
        const bool live = row < rows && !(n_rows_dev && row >= *n_rows_dev);
        if (live) load_params<MAXC>(gamma, beta, H, g, b);
        ENG_CU_PDL_WAIT();
        if (!live) return;
#pragma unroll
        for (int i = 0; i < MAXC; i++) {
            const int c = lane + 32 * i;
            if (c < nc) {
                eng_cu_load8(x + (size_t)row * H + c * 8, v[i]);
                if (res) {
                    float a[8];
                    eng_cu_load8(res + (size_t)row * H + c * 8, a);
#pragma unroll
                    for (int j = 0; j < 8; j++) v[i][j] += a[j];
                }
            }
        }
        float mean, rstd;
        eng_cu_ln_stats<MAXC>(v, H, eps, mean, rstd);
#pragma unroll
        for (int i = 0; i < MAXC; i++) {
            const int c = lane + 32 * i;
            if (c < nc) {
                float y[8];
#pragma unroll
                for (int j = 0; j < 8; j++) y[j] = (v[i][j] - mean) * rstd * g[i][j] + b[i][j];
                eng_cu_store8(out + (size_t)row * H + c * 8, y);
            }
        }
        return;
    }
    const int n = n_rows_dev ? min(*n_rows_dev, rows) : rows;
    ENG_CU_PDL_WAIT();
    if (row >= n) return;
    float v[MAXC][8];
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = lane + 32 * i;
        if (c < nc) {
            eng_cu_load8(x + (size_t)row * H + c * 8, v[i]);
            if (res) {
                float a[8];
                eng_cu_load8(res + (size_t)row * H + c * 8, a);
#pragma unroll
                for (int j = 0; j < 8; j++) v[i][j] += a[j];
            }
        }
    }
    eng_cu_ln_finish<MAXC>(v, H, gamma, beta, out + (size_t)row * H, eps);
}

/* add_ln for long buckets: a grid of one wave at most, whose warps walk
 * rows, with gamma and beta in shared memory (loaded once a block, before
 * the wait) and the next rows' input loaded before this row's statistics.
 * A row is LPR lanes' (16 or 32), each CPL chunks of 8 values (H = 8 CPL
 * LPR exactly: 384 = 16 x 3, 768 = 32 x 3, ...), so no lane idles, and a
 * warp holds 32 / LPR rows at once; its row groups g = warp-wide index,
 * g + warps, ... take rows g (32 / LPR) + lane / LPR.  Why: add_ln over
 * 65536 x 384 took 32.5 us in a saturated MiniLM step (ncu, 2026-12-03
 * run 24), ~3.1 TB/s for its 100 MB, with one row a warp (48 chunks over
 * 32 lanes), 16384 blocks of four rows, and each chunk fetching 64 bytes
 * of gamma / beta beside its 16 of data.  Rows: i, or n - 1 - i walked
 * backwards (rev, eng_cu_order.c).  The loop's trip count is the warp's
 * (every lane shuffles), a row past n computes on stale data and is not
 * stored. */
/* The row-walking kernels' shared pieces: gamma / beta into shared memory
 * (before the PDL wait: they are weights), 8 bf16 values converted and
 * added into v, and a row's LayerNorm from v, stored by its LPR lanes
 * (statistics by every lane, stores only where the row is live). */
static __device__ __forceinline__ void rows_params(float *sg, float *sb, const float *gamma, const float *beta,
                                                   int H) {
    for (int i = threadIdx.x; i < H; i += 32 * ROWS_PER_BLOCK) {
        sg[i] = gamma[i];
        sb[i] = beta[i];
    }
    __syncthreads();
}
static __device__ __forceinline__ void rows_add8(float *v, const uint4 &u) {
    const __nv_bfloat162 *h = (const __nv_bfloat162 *)&u;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float2 a = __bfloat1622float2(h[j]);
        v[2 * j] += a.x;
        v[2 * j + 1] += a.y;
    }
}
/* gamma / beta loaded, the predecessor waited for, and the walk's
 * numbers: the real row count, this lane's place in its row (sl) and its
 * row's place in the warp (sub), the warps of the grid (step) */
struct rows_ctx {
    int n, sl, sub, step;
};
template <int LPR>
static __device__ __forceinline__ rows_ctx rows_begin(float *sg, float *sb, const float *gamma, const float *beta,
                                                      int H, int rows, const int *n_rows_dev) {
    rows_params(sg, sb, gamma, beta, H);
    ENG_CU_PDL_WAIT();
    rows_ctx c;
    c.n = n_rows_dev ? min(*n_rows_dev, rows) : rows;
    c.sl = threadIdx.x & (LPR - 1);
    c.sub = (threadIdx.x & 31) / LPR;
    c.step = gridDim.x * ROWS_PER_BLOCK;
    return c;
}
template <int CPL, int LPR>
static __device__ __forceinline__ void rows_finish(float (*v)[8], int H, float eps, const float *sg, const float *sb,
                                                   bf16 *out_row, bool live) {
    float mean, rstd;
    eng_cu_ln_stats<CPL, LPR>(v, H, eps, mean, rstd);
    if (!live) return;
    const int sl = threadIdx.x & (LPR - 1);
#pragma unroll
    for (int k = 0; k < CPL; k++) {
        const int c = sl + LPR * k;
        const float4 g0 = *(const float4 *)&sg[c * 8], g1 = *(const float4 *)&sg[c * 8 + 4];
        const float4 b0 = *(const float4 *)&sb[c * 8], b1 = *(const float4 *)&sb[c * 8 + 4];
        const float gg[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
        const float bb[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
        float y[8];
#pragma unroll
        for (int j = 0; j < 8; j++) y[j] = (v[k][j] - mean) * rstd * gg[j] + bb[j];
        eng_cu_store8(out_row + c * 8, y);
    }
}

template <int CPL, int LPR>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
add_ln_rows_kernel(const bf16 *x, const bf16 *res, const float *gamma, const float *beta, bf16 *out, int rows,
                   const int *n_rows_dev, int H, float eps, int rev) {
    static_assert(LPR == 16 || LPR == 32, "a row is a half or a whole warp");
    constexpr int RPW = 32 / LPR; /* rows a warp at once */
    __shared__ __align__(16) float sg[CPL * LPR * 8], sb[CPL * LPR * 8];
    const rows_ctx rc = rows_begin<LPR>(sg, sb, gamma, beta, H, rows, n_rows_dev);
    const int n = rc.n, sl = rc.sl, sub = rc.sub, step = rc.step;
    uint4 nx[CPL], nr[CPL];
    auto fetch = [&](int i) { /* row i's chunks, if it exists */
        if (i >= n) return;
        const size_t base = (size_t)(rev ? n - 1 - i : i) * H;
#pragma unroll
        for (int k = 0; k < CPL; k++) {
            nx[k] = *(const uint4 *)(x + base + (sl + LPR * k) * 8);
            if (res) nr[k] = *(const uint4 *)(res + base + (sl + LPR * k) * 8);
        }
    };
    int g = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    fetch(g * RPW + sub);
    for (; g * RPW < n; g += step) {
        const int i = g * RPW + sub;
        float v[CPL][8] = {};
#pragma unroll
        for (int k = 0; k < CPL; k++) {
            rows_add8(v[k], nx[k]);
            if (res) rows_add8(v[k], nr[k]);
        }
        fetch(i + step * RPW); /* in flight under this row's statistics and stores */
        rows_finish<CPL, LPR>(v, H, eps, sg, sb, out + (size_t)(rev ? n - 1 - i : i) * H, i < n);
    }
}

/* embed_ln the same way (H = 8 CPL LPR): word[ids] + pos[pos_ids] (+
 * type[type_ids]), the next row's table rows loaded under this row's
 * statistics and the row after's three ids under those loads, so neither
 * round trip sits on a warp's path.  Why: the one-row-a-warp embed_ln took
 * 68.5 us of a saturated MiniLM step (ncu, 2026-12-03 run 25) for 50 MB
 * written -- more than an add_ln over the same rows. */
template <int CPL, int LPR>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
embed_ln_rows_kernel(const int32_t *ids, const int32_t *pos_ids, const int32_t *type_ids, const bf16 *word,
                     const bf16 *pos, const bf16 *type, const float *gamma, const float *beta, bf16 *out, int rows,
                     const int *n_rows_dev, int H, float eps) {
    static_assert(LPR == 16 || LPR == 32, "a row is a half or a whole warp");
    constexpr int RPW = 32 / LPR;
    __shared__ __align__(16) float sg[CPL * LPR * 8], sb[CPL * LPR * 8];
    const rows_ctx rc = rows_begin<LPR>(sg, sb, gamma, beta, H, rows, n_rows_dev);
    const int n = rc.n, sl = rc.sl, sub = rc.sub, step = rc.step;
    uint4 nw[CPL], np[CPL], nt[CPL];
    int id[3] = {0, 0, 0}; /* the ids of the row to fetch next */
    auto ids_of = [&](int i) {
        if (i >= n) return;
        id[0] = ids[i];
        id[1] = pos_ids[i];
        id[2] = type ? (type_ids ? type_ids[i] : 0) : 0;
    };
    auto fetch = [&](int i) { /* row i's table rows by the ids in id[] */
        if (i >= n) return;
        const bf16 *w = word + (size_t)id[0] * H, *p = pos + (size_t)id[1] * H;
        const bf16 *t = type ? type + (size_t)id[2] * H : nullptr;
#pragma unroll
        for (int k = 0; k < CPL; k++) {
            const int c = (sl + LPR * k) * 8;
            nw[k] = *(const uint4 *)(w + c);
            np[k] = *(const uint4 *)(p + c);
            if (t) nt[k] = *(const uint4 *)(t + c);
        }
    };
    int g = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    ids_of(g * RPW + sub);
    fetch(g * RPW + sub);
    ids_of(g * RPW + sub + step * RPW);
    for (; g * RPW < n; g += step) {
        const int i = g * RPW + sub;
        float v[CPL][8] = {};
#pragma unroll
        for (int k = 0; k < CPL; k++) {
            rows_add8(v[k], nw[k]);
            rows_add8(v[k], np[k]);
            if (type) rows_add8(v[k], nt[k]);
        }
        fetch(i + step * RPW);
        ids_of(i + 2 * step * RPW);
        rows_finish<CPL, LPR>(v, H, eps, sg, sb, out + (size_t)i * H, i < n);
    }
}

template <int MAXC>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
add_rmsnorm_kernel(const bf16 *x, bf16 *res, const float *gamma, bf16 *out, int rows,
                   const int *n_rows_dev, int H, float eps, int rev) {
    const int row = (rev ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int n = n_rows_dev ? min(*n_rows_dev, rows) : rows;
    const int lane = threadIdx.x & 31, nc = H >> 3;
    /* before the wait: the real row count (input block) and, for short
     * rows, gamma in registers -- after it, one round trip (the row) */
    constexpr int GP = MAXC <= 4 ? MAXC : 1;
    float g[GP][8];
    if (MAXC <= 4 && row < n)
#pragma unroll
        for (int i = 0; i < GP; i++)
            if (lane + 32 * i < nc)
#pragma unroll
                for (int j = 0; j < 8; j++) g[i][j] = gamma[(lane + 32 * i) * 8 + j];
    ENG_CU_PDL_WAIT();
    if (row >= n) return;
    float v[MAXC][8];
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = lane + 32 * i;
        if (c < nc) {
            eng_cu_load8(x + (size_t)row * H + c * 8, v[i]);
            if (res) {
                float a[8];
                eng_cu_load8(res + (size_t)row * H + c * 8, a);
#pragma unroll
                for (int j = 0; j < 8; j++) v[i][j] += a[j];
                /* the residual stream is stored rounded; normalise what is stored */
                eng_cu_store8(res + (size_t)row * H + c * 8, v[i]);
                eng_cu_load8(res + (size_t)row * H + c * 8, v[i]);
            }
#pragma unroll
            for (int j = 0; j < 8; j++) q += v[i][j] * v[i][j];
        }
    }
    const float r = rsqrtf(eng_cu_warp_sum(q) / (float)H + eps);
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = lane + 32 * i;
        if (c < nc) {
            float y[8];
#pragma unroll
            for (int j = 0; j < 8; j++) {
                if constexpr (MAXC <= 4) y[j] = v[i][j] * r * g[i][j];
                else y[j] = v[i][j] * r * gamma[c * 8 + j];
            }
            eng_cu_store8(out + (size_t)row * H + c * 8, y);
        }
    }
}

/* The RMS statistics alone: rs[r] = rsqrt(mean(x[r]^2) + eps), summed in
 * add_rmsnorm_kernel's order (so the same value), 0 for the bucket's rows
 * past the real count -- for GEMMs that take x raw and scale their output
 * rows (the norm weights folded into the matrix). */
template <int MAXC>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
rms_rows_kernel(const bf16 *x, float *rs, int rows, const int *n_rows_dev, int H, float eps, int rev) {
    const int row = (rev ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    const int n = n_rows_dev ? min(*n_rows_dev, rows) : rows;
    const int lane = threadIdx.x & 31, nc = H >> 3;
    ENG_CU_PDL_WAIT();
    if (row >= rows) return;
    if (row >= n) {
        if (lane == 0) rs[row] = 0.f;
        return;
    }
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = lane + 32 * i;
        if (c < nc) {
            float v[8];
            eng_cu_load8(x + (size_t)row * H + c * 8, v);
#pragma unroll
            for (int j = 0; j < 8; j++) q += v[j] * v[j];
        }
    }
    const float r = rsqrtf(eng_cu_warp_sum(q) / (float)H + eps);
    if (lane == 0) rs[row] = r;
}

/* The LayerNorm statistics from the GEMM epilogue's partial sums
 * (eng_cu_ln_epi's OST): a thread a row adds its nparts (sum, sum of
 * squares) in order -- deterministic -- and takes var = E[y^2] - mu^2 (the
 * partials come in fp32 from bf16 values; the one cancellation left is
 * mu^2 against var, harmless for the rows a residual stream holds, and
 * clamped at 0). */
__global__ void __launch_bounds__(256)
ln_stats_kernel(const float2 *parts, int nparts, float2 *stats, int rows, const int *n_rows_dev, int H, float eps) {
    const int row = blockIdx.x * 256 + threadIdx.x;
    const int n = n_rows_dev ? min(*n_rows_dev, rows) : rows;
    ENG_CU_PDL_WAIT();
    if (row >= rows) return;
    if (row >= n) {
        stats[row] = make_float2(0.f, 0.f);
        return;
    }
    float su = 0.f, sq = 0.f;
    const float2 *p = parts + (size_t)row * nparts;
    for (int i = 0; i < nparts; i++) {
        const float2 v = p[i];
        su += v.x;
        sq += v.y;
    }
    const float mu = su / (float)H, var = fmaxf(sq / (float)H - mu * mu, 0.f);
    stats[row] = make_float2(mu, rsqrtf(var + eps));
}

/* Decoder embedding: gather the row, keep it as the residual stream x,
 * and write its RMSNorm for the first layer.  Padded rows are zeroed. */
template <int MAXC>
__global__ void __launch_bounds__(32 * ROWS_PER_BLOCK)
embed_rmsnorm_kernel(const int32_t *ids, const bf16 *word, const float *gamma, bf16 *x, bf16 *out,
                     int rows, const int *n_rows_dev, int H, float eps) {
    ENG_CU_PDL_WAIT();
    const int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (row >= rows) return;
    const int lane = threadIdx.x & 31, nc = H >> 3;
    bf16 *xr = x + (size_t)row * H, *orow = out + (size_t)row * H;
    if (row >= *n_rows_dev) {
        const uint4 z = make_uint4(0, 0, 0, 0);
        for (int c = lane; c < nc; c += 32) {
            *(uint4 *)(xr + c * 8) = z;
            *(uint4 *)(orow + c * 8) = z;
        }
        return;
    }
    const bf16 *w = word + (size_t)ids[row] * H;
    float v[MAXC][8];
    float q = 0.f;
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = lane + 32 * i;
        if (c < nc) {
            const uint4 u = *(const uint4 *)(w + c * 8);
            *(uint4 *)(xr + c * 8) = u; /* the residual stream: an exact copy */
            eng_cu_load8(w + c * 8, v[i]);
#pragma unroll
            for (int j = 0; j < 8; j++) q += v[i][j] * v[i][j];
        }
    }
    const float r = rsqrtf(eng_cu_warp_sum(q) / (float)H + eps);
#pragma unroll
    for (int i = 0; i < MAXC; i++) {
        const int c = lane + 32 * i;
        if (c < nc) {
            float y[8];
#pragma unroll
            for (int j = 0; j < 8; j++) y[j] = v[i][j] * r * gamma[c * 8 + j];
            eng_cu_store8(orow + c * 8, y);
        }
    }
}

/* Chunks per lane for a row of H values (H % 8 == 0, H <= 4096). */
static int maxc_for(int H) {
    const int per_lane = (H / 8 + 31) / 32;
    if (per_lane <= 2) return 2;
    if (per_lane <= 4) return 4;
    if (per_lane <= 8) return 8;
    return per_lane <= 16 ? 16 : 0;
}

#define DISPATCH_MAXC(H, CALL)                                  \
    switch (maxc_for(H)) {                                      \
    case 2: { constexpr int MC = 2; CALL; } break;              \
    case 4: { constexpr int MC = 4; CALL; } break;              \
    case 8: { constexpr int MC = 8; CALL; } break;              \
    case 16: { constexpr int MC = 16; CALL; } break;            \
    default: return cudaErrorInvalidValue;                      \
    }

/* The row walkers take buckets of at least this many rows.  Below, the
 * one-row kernels' more, shorter blocks win: with the walkers on every
 * bucket, one query of 64 tokens took 128.1 against 121.5 us (MiniLM) and
 * 367.1 against 361.6 (BERT-base) on the H200 (2026-12-03 run 33); from
 * 2048 rows, a BERT-base step of 4096 tokens ran 0.971x the old kernels'
 * tokens/s (run 34), while lab_norm found the walkers faster at 16384 and
 * 65536 rows and the saturated steps gain (65536 tokens: MiniLM 1.009,
 * BERT-base 1.016 in run 34).  Run 35 placed the floor step by step
 * (equal-128 steps, walkers at every size against none, tokens/s):
 * 4096 tokens MiniLM 0.978, BERT-base 0.973; 8192: 1.008, 1.012; 16384:
 * 1.014, 1.017; 65536: 1.019, 1.013. */
#define ROWS_WALK_MIN 8192

/* The smallest bucket the walkers take: ROWS_WALK_MIN, or
 * POSY_CUDA_ROWS_WALK_MIN when it holds a whole number of rows from 0 up
 * (a tuning knob, for measuring where the walkers start to pay; anything
 * else keeps the default).  Read once. */
static int rows_walk_min() {
    static int min = -1;
    if (min < 0) {
        const char *e = getenv("POSY_CUDA_ROWS_WALK_MIN");
        char *end = nullptr;
        long v = e && *e ? strtol(e, &end, 10) : -1;
        min = v >= 0 && v <= (1L << 30) && end && !*end ? (int)v : ROWS_WALK_MIN;
    }
    return min;
}

/* Whether a row-walking kernel takes a bucket of `rows`: the lab's
 * variable when set (1 on at any size, 0 off), else from
 * rows_walk_min() rows unless the environment variable is "0" (read once
 * into the caller's `env`). */
static bool rows_switch(int lab, const char *var, int &env, int rows) {
    if (env < 0) {
        const char *e = getenv(var);
        env = !(e && !strcmp(e, "0"));
    }
    return lab >= 0 ? lab > 0 : env > 0 && rows >= rows_walk_min();
}


int eng_cu_add_ln_loop = -1;

/* Whether the row-walking add_ln runs (H = 8 x CPL x LPR, below): eng_cu_add_ln_loop
 * (labs: 1 on, 0 off), else on unless POSY_CUDA_ADDLN_LOOP=0.  H200,
 * 2026-12-03 run 29 (one row a warp, CPL = 3 at H = 768 or 2 slots at
 * 384): lab_norm 65536 x 768 in place 84.3 -> 68.8 us, with a residual
 * 119.6 -> 82.0; x 384 0.93-0.99x the one-row-a-warp kernel; saturated
 * BERT-base 1.013 / 1.008 / 1.013 (equal 128 / random / equal 512),
 * MiniLM 1.004 / 1.002 / 0.995 (the noise).  Half-warp rows at H = 384:
 * run 30. */
static bool add_ln_loop_on(int rows) {
    static int env = -1;
    return rows_switch(eng_cu_add_ln_loop, "POSY_CUDA_ADDLN_LOOP", env, rows);
}

/* A row-walking kernel's launch: one wave at most -- the blocks resident
 * at once (SMs x what the occupancy query allows, found once per
 * instantiation into its `cap`), fewer when the bucket has fewer rows. */
template <int LPR, bool PLAIN = false, typename Kern, typename... Args>
static cudaError_t rows_launch(Kern k, int &cap, cudaStream_t s, int rows, Args... args) {
    if (!cap) {
        int dev = 0, sms = 0, per = 0;
        cudaError_t e;
        if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
            (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
            (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 32 * ROWS_PER_BLOCK, 0)) != cudaSuccess)
            return e;
        if (per < 1 || sms < 1) return cudaErrorInvalidConfiguration;
        cap = sms * per;
    }
    const int rows_a_block = ROWS_PER_BLOCK * 32 / LPR, need = (rows + rows_a_block - 1) / rows_a_block;
    const dim3 grid(need < cap ? need : cap), block(32 * ROWS_PER_BLOCK);
    if constexpr (PLAIN) { /* the first node after the copy-in */
        k<<<grid, block, 0, s>>>(args...);
        return cudaGetLastError();
    }
    return eng_cu_launch(k, grid, block, 0, s, args...);
}

/* The row-walking kernels' shapes (H = 8 x CPL x LPR): CALL(CPL, LPR)
 * for H's, cudaErrorNotSupported for other widths */
#define ROWS_SHAPES(H, CALL)                     \
    switch (H) {                                 \
    case 256: return CALL(2, 16);                \
    case 384: return CALL(3, 16);                \
    case 512: return CALL(2, 32);                \
    case 768: return CALL(3, 32);                \
    case 1024: return CALL(4, 32);               \
    default: return cudaErrorNotSupported;       \
    }

template <int CPL, int LPR>
static cudaError_t add_ln_rows_launch(cudaStream_t s, const bf16 *x, const bf16 *res, const float *gamma,
                                      const float *beta, bf16 *out, int rows, const int *n_rows_dev, int H,
                                      float eps, int rev) {
    static int cap = 0;
    return rows_launch<LPR>(add_ln_rows_kernel<CPL, LPR>, cap, s, rows, x, res, gamma, beta, out, rows, n_rows_dev,
                            H, eps, rev);
}
static cudaError_t add_ln_rows(cudaStream_t s, const bf16 *x, const bf16 *res, const float *gamma,
                               const float *beta, bf16 *out, int rows, const int *n_rows_dev, int H, float eps,
                               int rev) {
#define ADDLN_ROWS(C, L) add_ln_rows_launch<C, L>(s, x, res, gamma, beta, out, rows, n_rows_dev, H, eps, rev)
    ROWS_SHAPES(H, ADDLN_ROWS)
#undef ADDLN_ROWS
}

template <int CPL, int LPR>
static cudaError_t embed_ln_rows_launch(cudaStream_t s, const int32_t *ids, const int32_t *pos_ids,
                                        const int32_t *type_ids, const bf16 *word, const bf16 *pos,
                                        const bf16 *type, const float *gamma, const float *beta, bf16 *out,
                                        int rows, const int *n_rows_dev, int H, float eps) {
    static int cap = 0;
    return rows_launch<LPR, true>(embed_ln_rows_kernel<CPL, LPR>, cap, s, rows, ids, pos_ids, type_ids, word, pos,
                                  type, gamma, beta, out, rows, n_rows_dev, H, eps);
}
static cudaError_t embed_ln_rows(cudaStream_t s, const int32_t *ids, const int32_t *pos_ids, const int32_t *type_ids,
                                 const bf16 *word, const bf16 *pos, const bf16 *type, const float *gamma,
                                 const float *beta, bf16 *out, int rows, const int *n_rows_dev, int H, float eps) {
#define EMBLN_ROWS(C, L)                                                                                   \
    embed_ln_rows_launch<C, L>(s, ids, pos_ids, type_ids, word, pos, type, gamma, beta, out, rows, n_rows_dev, H, \
                               eps)
    ROWS_SHAPES(H, EMBLN_ROWS)
#undef EMBLN_ROWS
}

int eng_cu_embed_ln_rows = -1;

/* Whether embed_ln walks rows: eng_cu_embed_ln_rows (labs: 1 on, 0 off),
 * else on unless POSY_CUDA_EMBLN_ROWS=0.  H200, 2026-12-03 run 31:
 * lab_norm 65536 x 384 71.5 -> 35.0 us, x 768 135.8 -> 61.8; saturated
 * MiniLM 1.012 / 1.003 / 1.007 (equal 128 / random / equal 512), BERT-base
 * 1.001 / 1.002 / 1.000. */
static bool embed_ln_rows_on(int rows) {
    static int env = -1;
    return rows_switch(eng_cu_embed_ln_rows, "POSY_CUDA_EMBLN_ROWS", env, rows);
}

cudaError_t eng_cu_embed_ln(cudaStream_t s, const int32_t *ids, const int32_t *pos_ids,
                            const int32_t *type_ids, const bf16 *word, const bf16 *pos,
                            const bf16 *type, const float *gamma, const float *beta, bf16 *out,
                            int rows, const int *n_rows_dev, int H, float eps) {
    if (H % 8 || rows <= 0) return cudaErrorInvalidValue;
    cudaError_t e;
    if (embed_ln_rows_on(rows) &&
        (e = embed_ln_rows(s, ids, pos_ids, type_ids, word, pos, type, gamma, beta, out, rows, n_rows_dev, H, eps)) !=
            cudaErrorNotSupported)
        return e;
    const int grid = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    DISPATCH_MAXC(H, (embed_ln_kernel<MC><<<grid, 32 * ROWS_PER_BLOCK, 0, s>>>(
                         ids, pos_ids, type_ids, word, pos, type, gamma, beta, out, rows,
                         n_rows_dev, H, eps)));
    return cudaGetLastError(); /* first node after the copy-in: a plain launch */
}

cudaError_t eng_cu_add_ln(cudaStream_t s, const bf16 *x, const bf16 *res, const float *gamma,
                          const float *beta, bf16 *out, int rows, const int *n_rows_dev, int H,
                          float eps) {
    if (H % 8 || rows <= 0) return cudaErrorInvalidValue;
    const int grid = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    cudaError_t e = cudaSuccess;
    const int rev = eng_cu_order_take(1); /* rows last to first (eng_cu_order.c) */
    if (add_ln_loop_on(rows) &&
        (e = add_ln_rows(s, x, res, gamma, beta, out, rows, n_rows_dev, H, eps, rev)) != cudaErrorNotSupported)
        return e != cudaSuccess ? e : cudaGetLastError();
    DISPATCH_MAXC(H, (e = eng_cu_launch(add_ln_kernel<MC>, dim3(grid), dim3(32 * ROWS_PER_BLOCK), 0, s,
                                        x, res, gamma, beta, out, rows, n_rows_dev, H, eps, rev)));
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t eng_cu_add_rmsnorm(cudaStream_t s, const bf16 *x, bf16 *res, const float *gamma,
                               bf16 *out, int rows, const int *n_rows_dev, int H, float eps) {
    if (H % 8 || rows <= 0) return cudaErrorInvalidValue;
    const int grid = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    cudaError_t e = cudaSuccess;
    const int rev = eng_cu_order_take(1); /* rows last to first (eng_cu_order.c) */
    DISPATCH_MAXC(H, (e = eng_cu_launch(add_rmsnorm_kernel<MC>, dim3(grid), dim3(32 * ROWS_PER_BLOCK), 0,
                                        s, x, res, gamma, out, rows, n_rows_dev, H, eps, rev)));
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t eng_cu_rms_rows(cudaStream_t s, const bf16 *x, float *rs, int rows, const int *n_rows_dev, int H,
                            float eps) {
    if (H % 8 || rows <= 0) return cudaErrorInvalidValue;
    const int grid = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    cudaError_t e = cudaSuccess;
    const int rev = eng_cu_order_take(1); /* rows last to first (eng_cu_order.c) */
    DISPATCH_MAXC(H, (e = eng_cu_launch(rms_rows_kernel<MC>, dim3(grid), dim3(32 * ROWS_PER_BLOCK), 0, s, x, rs,
                                        rows, n_rows_dev, H, eps, rev)));
    return e != cudaSuccess ? e : cudaGetLastError();
}

cudaError_t eng_cu_ln_stats(cudaStream_t s, const float2 *parts, int nparts, float2 *stats, int rows,
                            const int *n_rows_dev, int H, float eps) {
    if (rows <= 0 || nparts <= 0 || H <= 0) return cudaErrorInvalidValue;
    return eng_cu_launch(ln_stats_kernel, dim3((rows + 255) / 256), dim3(256), 0, s, parts, nparts, stats, rows,
                         n_rows_dev, H, eps);
}

cudaError_t eng_cu_embed_rmsnorm(cudaStream_t s, const int32_t *ids, const bf16 *word,
                                 const float *gamma, bf16 *x, bf16 *out, int rows,
                                 const int *n_rows_dev, int H, float eps) {
    if (H % 8 || rows <= 0 || !n_rows_dev) return cudaErrorInvalidValue;
    const int grid = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    DISPATCH_MAXC(H, (embed_rmsnorm_kernel<MC><<<grid, 32 * ROWS_PER_BLOCK, 0, s>>>(
                         ids, word, gamma, x, out, rows, n_rows_dev, H, eps)));
    return cudaGetLastError(); /* first node after the copy-in: a plain launch */
}

/* eng_cu_chain_ffn: a layer's whole MLP -- the norm before it (folded
 * into the weights), up (gate | up), the activation, down and the
 * residual -- as ONE launch of the one-query chain, at <= 16 rows: Qwen3
 * (RMS fold, SwiGLU, plain residual) and the encoders' LayerNorm-folded
 * chain (LayerNorm fold, GELU, down bias, post-LN residual).
 *
 * Why: in the chain every dependent step costs a hand-over (~0.7-1 us)
 * plus the time the next kernel's weights take to land, and no attempt to
 * make a step cheaper paid (dev/cuda/NOTES.md).  Fewer steps is the other
 * lever.  The MLP's two GEMMs are dependent through the whole
 * intermediate row, which is why they were two nodes: here each block owns
 * 16 intermediate columns instead, computes them (gate and up rows of W,
 * K = H), and multiplies them at once by the matching 16 columns of
 * W_down -- a T x H PARTIAL of the output (split-K across the grid).  The
 * partials meet by a reduce-scatter inside the same launch: every block
 * stores its partial (fp32, in L2), crosses one grid barrier, then sums a
 * slice of 8 columns x 8 rows over all partials in a fixed order, adds the
 * residual and stores bf16.  Fixed order means the same bits on every run
 * (graph replay equals eager); the output is an ordinary bf16 activation,
 * so the kernels around it do not change.  Both weight slices (the
 * layer's whole MLP, ~19 MB for Qwen3-0.6B) are requested before
 * griddepcontrol.wait, as the chain GEMMs do.
 *
 * The encoders' form reads the attention block's raw sum X, as the
 * chain's folded up GEMM does: every block computes each row's mean and
 * rstd from X itself (sums over its own loads), the up columns are
 * rs (X Wf - mu colsum) + b' (gamma folded into Wf, beta into b'), GELU's
 * tanh form as the chain's epilogue, and the reduce adds the down bias
 * and LN(X) = (X - mu) rs gamma + beta -- the layer's raw output, what the
 * next QKV GEMM folds.  all-MiniLM-L6: 96 blocks of 6 warps; BERT-base:
 * 192 of 8.
 *
 * The grid barrier needs every block resident at once: the launcher
 * refuses (cudaErrorNotSupported, the caller falls back to the two GEMMs)
 * unless the occupancy calculator says the whole grid fits.  A later
 * kernel of the chain cannot take the room first: its blocks launch only
 * once all of this launch's blocks have run griddepcontrol.launch_dependents.
 * The barrier is a 64-bit counter that only grows (each launch adds its
 * grid size; a block's target is the next multiple of it above what its
 * own add returned), so nothing is reset between launches.
 *
 * Weights come as a per-block image made once per layer
 * (eng_cu_chain_ffn_pack): the block's 16 up rows (and 16 gate rows) with
 * the shared-memory padding (one bulk copy), and its 16 columns of W_down
 * in mma fragment order (one bulk copy).  A k group of 32 is permuted the
 * same way for X and W (a lane's 8 consecutive values feed two mma
 * steps), which the sum does not see.
 *
 * Measured on the H200 (2026-12-05, runs 74-75; docs/BENCHMARKS.md,
 * "Split launches"): correct in every form and SLOWER everywhere -- one
 * query of 16 tokens: Qwen3-0.6B 758.7 against 600.3 us, BERT-base 226.9
 * against 181.3, all-MiniLM-L6 69.3 against 63.8.  What it saves (a
 * hand-over, the second node's weight wait) its own serial path spends
 * again: weights landing, both products, the partial store, the barrier,
 * the reduce's loads.  An experiment, off by default (POSY_CUDA_CHAIN_FFN).
 *
 * Tested by dev/cuda/lab_ffn.cu against an fp64 reference (odd row
 * counts, a single row, padding rows zero, same bits over replays).
 */
#include "eng_cu_frag.h"
#include "eng_cu_skinny.h"
#include "eng_cu_split.h"

#define FFN_NC 16 /* intermediate columns a block */

/* the up (gate | up) image's row stride in bf16: 64 bytes of padding keep
 * the 8 lanes of a 16-byte load phase on distinct banks (H + 32 is 64
 * bytes off a multiple of 128 for H = 384, 768 and 1024) */
static __host__ __device__ constexpr int ffn_ldw(int H) { return H + 32; }
/* glu: gate and up rows (16 each); else the 16 up rows only */
static __host__ __device__ constexpr size_t ffn_gu_bytes(int H, bool glu) {
    return (size_t)(glu ? 2 : 1) * FFN_NC * ffn_ldw(H) * 2;
}
static __host__ __device__ constexpr size_t ffn_d_bytes(int H) { return (size_t)H * FFN_NC * 2; }
static __host__ __device__ constexpr size_t ffn_max(size_t a, size_t b) { return a > b ? a : b; }
/* shared memory: region A (the up image; after the products the warps'
 * tiles [W][16][33] fp32, then the reduce's [2W][16] float4 over it), the
 * down image, act [16][24] bf16, the rows' sums of squares and sums
 * [W][16] each, the rows' (mu, rs) [16] (the RMS fold: rs only), the
 * block's column sums and folded bias [16] each (fp32) */
static __host__ __device__ constexpr size_t ffn_a_bytes(int H, int W, bool glu) {
    return (ffn_max(ffn_max(ffn_gu_bytes(H, glu), (size_t)W * 16 * 33 * 4), (size_t)2 * W * 16 * 16) + 127) / 128 *
           128;
}
static __host__ __device__ constexpr size_t ffn_smem(int H, int W, bool glu) {
    return ffn_a_bytes(H, W, glu) + ffn_d_bytes(H) + 16 * 24 * 2 + 2 * (size_t)W * 16 * 4 + 16 * 8 + 2 * 16 * 4;
}

/* the warps a block for H: each warp owns KP = H / 32 / W groups of 32 k
 * and H / 8 / W n tiles of the down partial (an even number) */
static __host__ __device__ constexpr int ffn_warps(int H) { return H == 384 ? 6 : 8; }

/* LN false: Qwen3 (RMS fold, gate | up, SwiGLU, plain residual); LN true:
 * the encoders (LayerNorm fold, up, GELU, down bias, post-LN residual) */
template <int H, int W, bool LN>
__global__ void __launch_bounds__(W * 32, 2)
ffn_kernel(const bf16 *X, const bf16 *img, bf16 *Y, float *part, unsigned long long *bar, int M,
           const int *n_rows_dev, float eps, int late, eng_cu_ffn_ln ln) {
    constexpr bool GLU = !LN;
    constexpr int NT = GLU ? 4 : 2; /* n tiles of 8 up (gate | up) rows */
    constexpr int LDW = ffn_ldw(H), KP = H / 32 / W, NTD = H / 8 / W, NTH = W * 32;
    static_assert(H % (32 * W) == 0 && NTD % 2 == 0 && H % 8 == 0, "H: whole k groups and n tile pairs a warp");
    constexpr size_t GU = ffn_gu_bytes(H, GLU), AB = ffn_a_bytes(H, W, GLU), DB = ffn_d_bytes(H);
    extern __shared__ __align__(16) unsigned char ffn_sm[];
    __shared__ uint64_t wbar;
    bf16 *gu = (bf16 *)ffn_sm;                          /* [16 NT / 2][LDW] */
    uint4 *dimg = (uint4 *)(ffn_sm + AB);               /* [H / 16][32 lanes] */
    bf16 *act = (bf16 *)(ffn_sm + AB + DB);             /* [16][24] */
    float *ss = (float *)(act + 16 * 24), *s1 = ss + W * 16; /* [W][16] each */
    float2 *st = (float2 *)(s1 + W * 16);               /* [16] (mu, rs) */
    float *csm = (float *)(st + 16), *bsm = csm + 16;   /* [16] each */
    float(*red)[16][33] = (float(*)[16][33])ffn_sm;    /* after the products: over the up image */
    const int nb = gridDim.x, b = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (!late) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    const bf16 *src = img + (size_t)b * ((GU + DB) / 2);
    if (threadIdx.x == 0) {
        sk3_bulk_init(&wbar);
        sk3_bulk_arm(&wbar, (int)(GU + DB));
        sk3_bulk_row(&wbar, gu, src, (int)GU);
        sk3_bulk_row(&wbar, (bf16 *)dimg, src + GU / 2, (int)DB);
    }
    if (LN && threadIdx.x < 16) { /* the block's column sums and folded bias: weights, before the wait */
        csm[threadIdx.x] = __ldg(ln.colsum + FFN_NC * b + threadIdx.x);
        bsm[threadIdx.x] = __bfloat162float(ln.b_up[FFN_NC * b + threadIdx.x]);
    }
    const int n_real = min(M, *n_rows_dev); /* the input block: no kernel of the forward writes it */
    __syncthreads();                        /* the mbarrier's init before anyone waits on it */
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    if (late) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

    /* X: the warp's k range, rows g and g + 8, 8 values a lane a group of 32 */
    uint4 xa[KP][2];
#pragma unroll
    for (int p = 0; p < KP; p++) {
        const int k = (warp * KP + p) * 32 + 8 * t;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = g + 8 * h;
            xa[p][h] = r < n_real ? __ldcg((const uint4 *)(X + (size_t)r * H + k)) : make_uint4(0, 0, 0, 0);
        }
    }
    /* each row's sum of squares (and, for the LayerNorm, sum) over the
     * warps, lanes t */
    {
        float q2[2] = {0.f, 0.f}, q1[2] = {0.f, 0.f};
#pragma unroll
        for (int p = 0; p < KP; p++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const __nv_bfloat162 *x2 = (const __nv_bfloat162 *)&xa[p][h];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float2 f = __bfloat1622float2(x2[i]);
                    q2[h] += f.x * f.x + f.y * f.y;
                    if (LN) q1[h] += f.x + f.y;
                }
            }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            q2[h] += __shfl_xor_sync(0xffffffffu, q2[h], 1);
            q2[h] += __shfl_xor_sync(0xffffffffu, q2[h], 2);
            if (LN) {
                q1[h] += __shfl_xor_sync(0xffffffffu, q1[h], 1);
                q1[h] += __shfl_xor_sync(0xffffffffu, q1[h], 2);
            }
        }
        if (t == 0) {
            ss[warp * 16 + g] = q2[0];
            ss[warp * 16 + g + 8] = q2[1];
            if (LN) {
                s1[warp * 16 + g] = q1[0];
                s1[warp * 16 + g + 8] = q1[1];
            }
        }
    }
    sk3_bulk_wait(&wbar);
    /* the up products: NT n tiles (Qwen3: gate rows 0-7, 8-15, up rows 0-7, 8-15) */
    float acc[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
    for (int p = 0; p < KP; p++) {
        const int k = (warp * KP + p) * 32 + 8 * t;
        const uint32_t *x0 = (const uint32_t *)&xa[p][0], *x1 = (const uint32_t *)&xa[p][1];
        const uint32_t a0[4] = {x0[0], x1[0], x0[1], x1[1]}, a1[4] = {x0[2], x1[2], x0[3], x1[3]};
#pragma unroll
        for (int j = 0; j < NT; j++) {
            const uint4 w = *(const uint4 *)(gu + (size_t)(8 * j + g) * LDW + k);
            eng_mma16816(acc[j], a0, w.x, w.y);
            eng_mma16816(acc[j], a1, w.z, w.w);
        }
    }
    __syncthreads(); /* every warp done with the up image: red goes over it */
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) red[warp][g + (e >> 1) * 8][8 * j + 2 * t + (e & 1)] = acc[j][e];
    if (threadIdx.x < 16) { /* the rows' statistics, the warps added in order */
        const int r = threadIdx.x;
        float q2 = 0.f, q1 = 0.f;
        for (int w = 0; w < W; w++) {
            q2 += ss[w * 16 + r];
            if (LN) q1 += s1[w * 16 + r];
        }
        if (LN) {
            const float mu = q1 / (float)H, var = fmaxf(q2 / (float)H - mu * mu, 0.f);
            st[r] = r < n_real ? make_float2(mu, rsqrtf(var + eps)) : make_float2(0.f, 0.f);
        } else
            st[r] = make_float2(0.f, r < n_real ? rsqrtf(q2 / (float)H + eps) : 0.f);
    }
    __syncthreads();
    /* the activation, the warps' tiles added in a fixed order: 16 rows x 16 columns */
    for (int i = threadIdx.x; i < 256; i += NTH) {
        const int r = i >> 4, c = i & 15;
        const float2 rst = st[r];
        float v;
        if constexpr (GLU) {
            float gv = 0.f, uv = 0.f;
#pragma unroll
            for (int w = 0; w < W; w++) {
                gv += red[w][r][c];
                uv += red[w][r][16 + c];
            }
            gv *= rst.y;
            uv *= rst.y;
            v = gv / (1.f + expf(-gv)) * uv;
        } else {
            float u = 0.f;
#pragma unroll
            for (int w = 0; w < W; w++) u += red[w][r][c];
            u = (u - rst.x * csm[c]) * rst.y + bsm[c];
            v = r < n_real ? 0.5f * u * (1.f + tanhf(0.7978845608028654f * (u + 0.044715f * u * u * u))) : 0.f;
        }
        act[r * 24 + c] = __float2bfloat16(v);
    }
    __syncthreads();
    /* down: the block's T x H partial, the warp's NTD n tiles of 8 */
    {
        const uint32_t a[4] = {eng_ld32(act + g * 24 + 2 * t), eng_ld32(act + (g + 8) * 24 + 2 * t),
                               eng_ld32(act + g * 24 + 2 * t + 8), eng_ld32(act + (g + 8) * 24 + 2 * t + 8)};
#pragma unroll
        for (int q = 0; q < NTD / 2; q++) {
            const int jn = warp * NTD + 2 * q;
            const uint4 w = dimg[(jn / 2) * 32 + lane];
            float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
            eng_mma16816(c0, a, w.x, w.y);
            eng_mma16816(c1, a, w.z, w.w);
            /* part: [H / 8 column slices][nb][16 rows][8] */
            float *p0 = part + ((size_t)jn * nb + b) * 128, *p1 = part + ((size_t)(jn + 1) * nb + b) * 128;
            __stcg((float2 *)(p0 + g * 8 + 2 * t), make_float2(c0[0], c0[1]));
            __stcg((float2 *)(p0 + (g + 8) * 8 + 2 * t), make_float2(c0[2], c0[3]));
            __stcg((float2 *)(p1 + g * 8 + 2 * t), make_float2(c1[0], c1[1]));
            __stcg((float2 *)(p1 + (g + 8) * 8 + 2 * t), make_float2(c1[2], c1[3]));
        }
    }
    /* the grid barrier: every partial stored before any block sums */
    eng_split_barrier(bar);
    /* reduce-scatter: units of 8 columns x 8 rows (H / 4 of them), unit u
     * to block u mod nb; a thread sums one float4 over every (2W)th
     * partial, then the 2W groups are added in order */
    constexpr int NG = 2 * W;
    float4 *sumv = (float4 *)ffn_sm; /* [NG groups][16 float4], over region A again */
    const int q = threadIdx.x & 15, grp = threadIdx.x >> 4;
    for (int u = b; u < H / 4; u += nb) {
        const int c = u >> 1, rh = u & 1; /* column slice, row half */
        const float4 *base = (const float4 *)(part + (size_t)c * nb * 128 + rh * 64) + q;
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
        for (int pb = grp; pb < nb; pb += NG) {
            const float4 v = __ldcg(base + (size_t)pb * 32);
            s.x += v.x;
            s.y += v.y;
            s.z += v.z;
            s.w += v.w;
        }
        sumv[grp * 16 + q] = s;
        __syncthreads();
        if (threadIdx.x < 16) {
            const float4 a = eng_split_sum(sumv + threadIdx.x, NG, 16);
            const int r = rh * 8 + (threadIdx.x >> 1), col = c * 8 + (threadIdx.x & 1) * 4;
            if (r < M) {
                if constexpr (LN)
                    eng_split_store4_res(a, X, Y, H, r, col, n_real, ln.b_down, st[r], ln.gamma, ln.beta);
                else
                    eng_split_store4(a, X, Y, H, r, col, n_real);
            }
        }
        __syncthreads(); /* sumv is reused by the next unit */
    }
}

/* The images: per block, [16 or 32][ffn_ldw(H)] up rows (glu: 16 gate
 * rows, then the 16 matching up rows; padding zero), then H / 16 uint4
 * groups of 32 lanes: n tiles 2q and 2q + 1 of W_down's rows, each lane's
 * {b0, b1} for its column g and k 2t, 2t + 8 of the block's 16 columns. */
__global__ void ffn_pack_kernel(const bf16 *Wu, const bf16 *Wd, bf16 *img, int H, int I, int glu) {
    const size_t gun = ffn_gu_bytes(H, glu != 0) / 2, per = gun + ffn_d_bytes(H) / 2;
    const size_t total = per * (size_t)(I / FFN_NC);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(i / per);
        const size_t o = i - (size_t)b * per;
        bf16 v = __float2bfloat16(0.f);
        if (o < gun) {
            const int row = (int)(o / ffn_ldw(H)), k = (int)(o % ffn_ldw(H));
            const int n = (row / FFN_NC) * I + FFN_NC * b + row % FFN_NC; /* gate rows, then up rows */
            if (k < H) v = Wu[(size_t)n * H + k];
        } else {
            const size_t d = o - gun; /* [H / 16][32][8 bf16] */
            const int q = (int)(d / 256), lane = (int)(d / 8 % 32), e = (int)(d % 8);
            const int jn = 2 * q + (e >> 2), which = (e >> 1) & 1, lo = e & 1;
            const int n = 8 * jn + (lane >> 2), k = FFN_NC * b + 2 * (lane & 3) + 8 * which + lo;
            v = Wd[(size_t)n * I + k];
        }
        img[i] = v;
    }
}

int eng_cu_chain_ffn_ok(int M, int H, int I, int glu) {
    return M >= 1 && M <= 16 && (glu ? H == 1024 : H == 384 || H == 768) && I % FFN_NC == 0 && I >= 256;
}

size_t eng_cu_chain_ffn_img_bytes(int H, int I, int glu) {
    return (ffn_gu_bytes(H, glu != 0) + ffn_d_bytes(H)) * (size_t)(I / FFN_NC);
}

size_t eng_cu_chain_ffn_part_bytes(int H, int I) { return (size_t)(I / FFN_NC) * 16 * H * 4; }

cudaError_t eng_cu_chain_ffn_pack(cudaStream_t s, const bf16 *Wu, const bf16 *Wd, bf16 *img, int H, int I, int glu) {
    if (!eng_cu_chain_ffn_ok(1, H, I, glu)) return cudaErrorNotSupported;
    ffn_pack_kernel<<<1024, 256, 0, s>>>(Wu, Wd, img, H, I, glu);
    return cudaGetLastError();
}

/* one shape's launch: the shared-memory attribute and how many blocks fit
 * at once, found on first use (per instantiation) */
template <int H, bool LN>
static cudaError_t ffn_launch(cudaStream_t s, const bf16 *X, const bf16 *img, bf16 *Y, float *part,
                              unsigned long long *bar, int M, int nb, const int *n_rows_dev, float eps, int late,
                              const eng_cu_ffn_ln &ln) {
    constexpr int W = ffn_warps(H);
    const size_t smem = ffn_smem(H, W, !LN);
    static int attr_done = 0, fits = -1;
    if (!attr_done) {
        const cudaError_t e =
            cudaFuncSetAttribute(ffn_kernel<H, W, LN>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        int dev = 0, sms = 0, per = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, ffn_kernel<H, W, LN>, W * 32, smem) != cudaSuccess)
            return cudaErrorUnknown;
        fits = per * sms;
        attr_done = 1;
    }
    if (nb > fits) return cudaErrorNotSupported; /* the grid barrier needs every block resident */
    return eng_cu_launch(ffn_kernel<H, W, LN>, dim3(nb), dim3(W * 32), smem, s, X, img, Y, part, bar, M, n_rows_dev,
                         eps, late, ln);
}

cudaError_t eng_cu_chain_ffn(cudaStream_t s, const bf16 *X, const bf16 *img, bf16 *Y, float *part,
                             unsigned long long *bar, int M, int H, int I, const int *n_rows_dev, float eps, int late,
                             const eng_cu_ffn_ln *ln) {
    if (!eng_cu_chain_ffn_ok(M, H, I, !ln) || ((uintptr_t)X & 15) || ((uintptr_t)Y & 15) || ((uintptr_t)img & 15) ||
        ((uintptr_t)part & 15))
        return cudaErrorNotSupported;
    if (ln && (!ln->colsum || !ln->b_up || !ln->b_down || !ln->gamma || !ln->beta || ((uintptr_t)ln->b_down & 7) ||
               ((uintptr_t)ln->gamma & 15) || ((uintptr_t)ln->beta & 15)))
        return cudaErrorNotSupported;
    const int nb = I / FFN_NC;
    const eng_cu_ffn_ln none = {NULL, NULL, NULL, NULL, NULL};
    if (!ln) return ffn_launch<1024, false>(s, X, img, Y, part, bar, M, nb, n_rows_dev, eps, late, none);
    return H == 384 ? ffn_launch<384, true>(s, X, img, Y, part, bar, M, nb, n_rows_dev, eps, late, *ln)
                    : ffn_launch<768, true>(s, X, img, Y, part, bar, M, nb, n_rows_dev, eps, late, *ln);
}

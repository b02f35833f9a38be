/* eng_cu_chain_ffn: a decoder layer's whole MLP -- RMSNorm (folded into
 * the weights), gate | up, SwiGLU, down and the residual add -- as ONE
 * launch of the one-query chain, for Qwen3 at <= 16 rows.
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
 * (eng_cu_chain_ffn_pack): the block's 16 gate and 16 up rows with the
 * shared-memory padding (one bulk copy), and its 16 columns of W_down in
 * mma fragment order (one bulk copy).  A k group of 32 is permuted the
 * same way for X and W (a lane's 8 consecutive values feed two mma
 * steps), which the sum does not see.
 *
 * Tested by dev/cuda/lab_ffn.cu against an fp64 reference (odd row
 * counts, a single row, padding rows zero, same bits over replays).
 */
#include "eng_cu_frag.h"
#include "eng_cu_skinny.h"
#include "eng_cu_split.h"

#define FFN_THREADS 256
#define FFN_WARPS 8
#define FFN_NC 16 /* intermediate columns a block */

/* the gate | up image's row stride in bf16: 64 bytes of padding keep the
 * 8 lanes of a 16-byte load phase on distinct banks */
static __host__ __device__ constexpr int ffn_ldw(int H) { return H + 32; }
static __host__ __device__ constexpr size_t ffn_gu_bytes(int H) { return (size_t)2 * FFN_NC * ffn_ldw(H) * 2; }
static __host__ __device__ constexpr size_t ffn_d_bytes(int H) { return (size_t)H * FFN_NC * 2; }
/* shared memory: gate | up image, down image, act [16][24] bf16, the
 * rows' sums of squares [8][16] and scales [16] */
static __host__ __device__ constexpr size_t ffn_smem(int H) {
    return ffn_gu_bytes(H) + ffn_d_bytes(H) + 16 * 24 * 2 + FFN_WARPS * 16 * 4 + 16 * 4;
}

template <int H>
__global__ void __launch_bounds__(FFN_THREADS, 2)
ffn_kernel(const bf16 *X, const bf16 *img, bf16 *Y, float *part, unsigned long long *bar, int M,
           const int *n_rows_dev, float eps, int late) {
    constexpr int LDW = ffn_ldw(H), KP = H / 32 / FFN_WARPS, NTD = H / 8 / FFN_WARPS;
    static_assert(H % 256 == 0 && NTD % 2 == 0, "H a multiple of 256");
    extern __shared__ __align__(16) unsigned char ffn_sm[];
    __shared__ uint64_t wbar;
    bf16 *gu = (bf16 *)ffn_sm;                                   /* [32][LDW] */
    uint4 *dimg = (uint4 *)(ffn_sm + ffn_gu_bytes(H));           /* [H / 16][32 lanes] */
    bf16 *act = (bf16 *)(ffn_sm + ffn_gu_bytes(H) + ffn_d_bytes(H)); /* [16][24] */
    float *ss = (float *)(act + 16 * 24), *rs = ss + FFN_WARPS * 16;
    float(*red)[16][33] = (float(*)[16][33])ffn_sm; /* after the products: over the gate | up image */
    const int nb = gridDim.x, b = blockIdx.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    if (!late) asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
    const bf16 *src = img + (size_t)b * ((ffn_gu_bytes(H) + ffn_d_bytes(H)) / 2);
    if (threadIdx.x == 0) {
        sk3_bulk_init(&wbar);
        sk3_bulk_arm(&wbar, (int)(ffn_gu_bytes(H) + ffn_d_bytes(H)));
        sk3_bulk_row(&wbar, gu, src, (int)ffn_gu_bytes(H));
        sk3_bulk_row(&wbar, (bf16 *)dimg, src + ffn_gu_bytes(H) / 2, (int)ffn_d_bytes(H));
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
    /* the RMS fold: each row's sum of squares over the warps, lanes t */
    {
        float s2[2] = {0.f, 0.f};
#pragma unroll
        for (int p = 0; p < KP; p++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const __nv_bfloat162 *x2 = (const __nv_bfloat162 *)&xa[p][h];
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float2 f = __bfloat1622float2(x2[i]);
                    s2[h] += f.x * f.x + f.y * f.y;
                }
            }
#pragma unroll
        for (int h = 0; h < 2; h++) {
            s2[h] += __shfl_xor_sync(0xffffffffu, s2[h], 1);
            s2[h] += __shfl_xor_sync(0xffffffffu, s2[h], 2);
        }
        if (t == 0) {
            ss[warp * 16 + g] = s2[0];
            ss[warp * 16 + g + 8] = s2[1];
        }
    }
    sk3_bulk_wait(&wbar);
    /* gate | up: 4 n tiles (gate rows 0-7, 8-15, up rows 0-7, 8-15) */
    float acc[4][4];
#pragma unroll
    for (int j = 0; j < 4; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
    for (int p = 0; p < KP; p++) {
        const int k = (warp * KP + p) * 32 + 8 * t;
        const uint32_t *x0 = (const uint32_t *)&xa[p][0], *x1 = (const uint32_t *)&xa[p][1];
        const uint32_t a0[4] = {x0[0], x1[0], x0[1], x1[1]}, a1[4] = {x0[2], x1[2], x0[3], x1[3]};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const uint4 w = *(const uint4 *)(gu + (size_t)(8 * j + g) * LDW + k);
            eng_mma16816(acc[j], a0, w.x, w.y);
            eng_mma16816(acc[j], a1, w.z, w.w);
        }
    }
    __syncthreads(); /* every warp done with the gate | up image: red goes over it */
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) red[warp][g + (e >> 1) * 8][8 * j + 2 * t + (e & 1)] = acc[j][e];
    if (threadIdx.x < 16) {
        float s = 0.f;
        for (int w = 0; w < FFN_WARPS; w++) s += ss[w * 16 + threadIdx.x];
        rs[threadIdx.x] = (int)threadIdx.x < n_real ? rsqrtf(s / (float)H + eps) : 0.f;
    }
    __syncthreads();
    { /* SwiGLU, the warps' tiles added in a fixed order: 16 rows x 16 columns, one a thread */
        const int r = threadIdx.x >> 4, c = threadIdx.x & 15;
        float gv = 0.f, uv = 0.f;
#pragma unroll
        for (int w = 0; w < FFN_WARPS; w++) {
            gv += red[w][r][c];
            uv += red[w][r][16 + c];
        }
        gv *= rs[r];
        uv *= rs[r];
        act[r * 24 + c] = __float2bfloat16(gv / (1.f + expf(-gv)) * uv);
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
     * to block u mod nb; a thread sums one float4 over every 16th partial,
     * then the 16 groups are added in order */
    float4 *sumv = (float4 *)ffn_sm; /* [16 groups][16 float4], over the image again */
    const int q = threadIdx.x & 15, grp = threadIdx.x >> 4;
    for (int u = b; u < H / 4; u += nb) {
        const int c = u >> 1, rh = u & 1; /* column slice, row half */
        const float4 *base = (const float4 *)(part + (size_t)c * nb * 128 + rh * 64) + q;
        float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int pb = grp; pb < nb; pb += 16) {
            const float4 v = __ldcg(base + (size_t)pb * 32);
            s.x += v.x;
            s.y += v.y;
            s.z += v.z;
            s.w += v.w;
        }
        sumv[grp * 16 + q] = s;
        __syncthreads();
        if (threadIdx.x < 16) {
            const float4 a = eng_split_sum(sumv + threadIdx.x, 16, 16);
            const int r = rh * 8 + (threadIdx.x >> 1), col = c * 8 + (threadIdx.x & 1) * 4;
            if (r < M) eng_split_store4(a, X, Y, H, r, col, n_real);
        }
        __syncthreads(); /* sumv is reused by the next unit */
    }
}

/* The images: per block, [32][ffn_ldw(H)] gate | up rows (padding zero),
 * then H / 16 uint4 groups of 32 lanes: n tiles 2q and 2q + 1 of W_down's
 * rows, each lane's {b0, b1} for its column g and k 2t, 2t + 8 of the
 * block's 16 columns. */
__global__ void ffn_pack_kernel(const bf16 *Wgu, const bf16 *Wd, bf16 *img, int H, int I) {
    const size_t per = (ffn_gu_bytes(H) + ffn_d_bytes(H)) / 2, gun = ffn_gu_bytes(H) / 2;
    const size_t total = per * (size_t)(I / FFN_NC);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int b = (int)(i / per);
        const size_t o = i - (size_t)b * per;
        bf16 v = __float2bfloat16(0.f);
        if (o < gun) {
            const int row = (int)(o / ffn_ldw(H)), k = (int)(o % ffn_ldw(H));
            const int n = row < FFN_NC ? FFN_NC * b + row : I + FFN_NC * b + row - FFN_NC;
            if (k < H) v = Wgu[(size_t)n * H + k];
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

int eng_cu_chain_ffn_ok(int M, int H, int I) {
    return M >= 1 && M <= 16 && H == 1024 && I % FFN_NC == 0 && I >= 256;
}

size_t eng_cu_chain_ffn_img_bytes(int H, int I) {
    return (ffn_gu_bytes(H) + ffn_d_bytes(H)) * (size_t)(I / FFN_NC);
}

size_t eng_cu_chain_ffn_part_bytes(int H, int I) { return (size_t)(I / FFN_NC) * 16 * H * 4; }

cudaError_t eng_cu_chain_ffn_pack(cudaStream_t s, const bf16 *Wgu, const bf16 *Wd, bf16 *img, int H, int I) {
    if (!eng_cu_chain_ffn_ok(1, H, I)) return cudaErrorNotSupported;
    ffn_pack_kernel<<<1024, 256, 0, s>>>(Wgu, Wd, img, H, I);
    return cudaGetLastError();
}

cudaError_t eng_cu_chain_ffn(cudaStream_t s, const bf16 *X, const bf16 *img, bf16 *Y, float *part,
                             unsigned long long *bar, int M, int H, int I, const int *n_rows_dev, float eps,
                             int late) {
    if (!eng_cu_chain_ffn_ok(M, H, I) || ((uintptr_t)X & 15) || ((uintptr_t)Y & 15) || ((uintptr_t)img & 15) ||
        ((uintptr_t)part & 15))
        return cudaErrorNotSupported;
    const int nb = I / FFN_NC;
    const size_t smem = ffn_smem(1024);
    static int attr_done = 0, fits = -1;
    if (!attr_done) {
        const cudaError_t e =
            cudaFuncSetAttribute(ffn_kernel<1024>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return e;
        int dev = 0, sms = 0, per = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
            cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, ffn_kernel<1024>, FFN_THREADS, smem) != cudaSuccess)
            return cudaErrorUnknown;
        fits = per * sms;
        attr_done = 1;
    }
    if (nb > fits) return cudaErrorNotSupported; /* the grid barrier needs every block resident */
    return eng_cu_launch(ffn_kernel<1024>, dim3(nb), dim3(FFN_THREADS), smem, s, X, (const bf16 *)img, Y, part, bar,
                         M, n_rows_dev, eps, late);
}


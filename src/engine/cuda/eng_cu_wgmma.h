/* eng_cu_wgmma.h: the device pieces of our Hopper GEMM (eng_cu_wgmma.cu)
 * -- mbarriers, TMA tensor copies, wgmma's shared-memory descriptors, the
 * wgmma instruction for the tile widths used (128, 192, 256 columns), and
 * the epilogue that turns one warpgroup's accumulators into outputs.
 * sm_90a only: everything here sits under __CUDA_ARCH_FEAT_SM90_ALL (the
 * host side never launches these kernels elsewhere).
 *
 * Accumulator layout of wgmma m64nNk16 (fp32): thread `lane` of warp w
 * (0..3 in its warpgroup) holds d[4j + 2i + e] = row 16w + lane/4 + 8i,
 * column 8j + 2(lane%4) + e, for j < N/8 -- the mma.sync C layout repeated
 * over the N/8 column groups.
 */
#ifndef POSY_ENG_CU_WGMMA_H
#define POSY_ENG_CU_WGMMA_H

#include "eng_cu.h"
#include <cuda.h>

/* the parts of eng_cu_ln_epi an epilogue applies (wg_epilogue_img's LN) */
enum { WG_LNA = 1, WG_LNR = 2, WG_OST = 4 };

/* Host side, for the other kernels built on these pieces
 * (eng_cu_gemm_rowln.cu): a tensor map of rows x K bf16, row-major, boxes
 * of box_rows x 64 with the 128-byte swizzle (0, or -1 when the driver
 * refuses it), and the device's SM count (after
 * eng_cu_gemm_wg_available). */
int eng_cu_wg_map(CUtensorMap *m, const bf16 *p, int rows, int K, int box_rows);
int eng_cu_wg_sm_count(void);

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
static __device__ __forceinline__ uint32_t wg_smem(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

static __device__ __forceinline__ void wg_bar_init(uint64_t *b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(wg_smem(b)), "r"(count) : "memory");
}
static __device__ __forceinline__ void wg_bar_arm(uint64_t *b, int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(wg_smem(b)), "r"(bytes) : "memory");
}
/* arrive / wait by the barrier's 32-bit shared address (the register-poor
 * warps of eng_cu_wgmma.cu's row statistics keep no 64-bit pointers) or
 * by pointer */
static __device__ __forceinline__ void wg_bar_arrive32(uint32_t b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(b) : "memory");
}
static __device__ __forceinline__ void wg_bar_arrive(uint64_t *b) { wg_bar_arrive32(wg_smem(b)); }
/* until the phase of the given parity has completed */
static __device__ __forceinline__ void wg_bar_wait32(uint32_t b, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done)
                     : "r"(b), "r"(parity)
                     : "memory");
}
static __device__ __forceinline__ void wg_bar_wait(uint64_t *b, uint32_t parity) { wg_bar_wait32(wg_smem(b), parity); }
/* one TMA box (inner coordinate c0 = k, outer c1 = row) into shared memory */
static __device__ __forceinline__ void wg_tma(const CUtensorMap *map, void *dst, uint64_t *bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
                 ::"r"(wg_smem(dst)), "l"((uint64_t)map), "r"(wg_smem(bar)), "r"(c0), "r"(c1)
                 : "memory");
}

/* a kernel parameter's tensor map fetched ahead of its first copy */
static __device__ __forceinline__ void wg_map_prefetch(const CUtensorMap *map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)map) : "memory");
}

/* wgmma's shared-memory matrix descriptor for a K-major tile with the
 * 128-byte swizzle: rows of 128 bytes (64 values), 8-row groups 1024 bytes
 * apart (the stride byte offset); the leading offset is unused in this
 * layout.  A k-step of 16 inside the 64-wide slice is +32 bytes on the
 * start address (the hardware applies the swizzle to the address).  The
 * tile must start 1024-byte aligned. */
static __device__ __forceinline__ uint64_t wg_desc(const void *tile) {
    const uint32_t a = wg_smem(tile);
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) |
           ((uint64_t)1 << 62);
}

/* TMA store of one box from shared memory (the bulk-group kind), its
 * commit, and the waits: until the stores have read shared memory (the
 * buffer may be rewritten), or have completed. */
static __device__ __forceinline__ void wg_tma_store(const CUtensorMap *map, const void *src, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
                 ::"l"((uint64_t)map), "r"(wg_smem(src)), "r"(c0), "r"(c1)
                 : "memory");
}
static __device__ __forceinline__ void wg_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N = 0>
static __device__ __forceinline__ void wg_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
static __device__ __forceinline__ void wg_store_wait() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
/* ordinary shared-memory writes made visible to the TMA (async proxy) */
static __device__ __forceinline__ void wg_fence_async_smem() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
/* a barrier for one consumer warpgroup's 128 threads (named barriers 2
 * and 3), so each warpgroup stores its half of a tile on its own */
static __device__ __forceinline__ void wg_group_sync(int wgp) {
    asm volatile("bar.sync %0, 128;\n" ::"r"(2 + wgp) : "memory");
}

static __device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
static __device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
static __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }

/* keeps the compiler from moving accumulator uses across the async wgmma */
template <int NR>
static __device__ __forceinline__ void wg_fence_regs(float *d) {
#pragma unroll
    for (int i = 0; i < NR; i++) asm volatile("" : "+f"(d[i])::"memory");
}

/* D[64 x BN] (+)= A[64 x 16] B[BN x 16]^T, both from shared memory
 * (descriptors), accumulate = 0 for the first k-step of a tile */
template <int BN>
__device__ __forceinline__ void wg_mma(float *d, uint64_t da, uint64_t db, int accumulate);

template <>
__device__ __forceinline__ void wg_mma<128>(float *d, uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %66, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,"
                 "%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,"
                 "%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
                 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                   "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
                   "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
                   "+f"(d[63])
                 : "l"(da), "l"(db), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wg_mma<192>(float *d, uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %98, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,"
                 "%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,"
                 "%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,"
                 "%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
                 "}, %96, %97, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                   "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
                   "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
                   "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
                   "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
                   "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
                   "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
                   "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
                 : "l"(da), "l"(db), "r"(accumulate));
}

template <>
__device__ __forceinline__ void wg_mma<256>(float *d, uint64_t da, uint64_t db, int accumulate) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %130, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,"
                 "%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,"
                 "%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,"
                 "%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,"
                 "%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,"
                 "%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
                 "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
                   "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                   "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
                   "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
                   "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
                   "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
                   "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
                   "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
                   "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
                   "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
                   "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
                   "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
                   "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
                   "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
                   "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),
                   "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),
                   "+f"(d[126]), "+f"(d[127])
                 : "l"(da), "l"(db), "r"(accumulate));
}

/* tanh by the SFU (one instruction, relative error ~2^-11, below the
 * bf16 output's 2^-8): tanhf and an exact division made the GELU and
 * SwiGLU epilogues the slowest part of their tiles (lab profile, H200) */
static __device__ __forceinline__ float wg_tanh(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}
static __device__ __forceinline__ float wg_gelu(float v) {
    return 0.5f * v * (1.f + wg_tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}
/* silu(g) u = g sigmoid(g) u, sigmoid(g) = (1 + tanh(g / 2)) / 2 */
static __device__ __forceinline__ float wg_swiglu(float g, float u) { return 0.5f * g * (1.f + wg_tanh(0.5f * g)) * u; }
/* a gated epilogue's act(g) u (ENG_CU_EPI_GATED): SiLU, GELU's tanh form
 * (Gemma 3), GELU's erf form (ModernBERT: erff, as the SwiGLU kernel's
 * GELU_ERF and the CPU engine compute it) */
template <int EPI>
static __device__ __forceinline__ float wg_gated(float g, float u) {
    if constexpr (EPI == ENG_CU_EPI_GEGLU_TANH) return wg_gelu(g) * u;
    else if constexpr (EPI == ENG_CU_EPI_GEGLU_ERF) return 0.5f * g * (1.f + erff(g * 0.70710678118654752f)) * u;
    else return wg_swiglu(g, u);
}

/* One warpgroup's 64 x BN accumulators to Y: row0 is the warpgroup's first
 * row, n0 the tile's first column (SwiGLU: of the gate|up tile, whose first
 * BN/2 columns are gate rows n0/2.. of W and the rest the matching up
 * rows; Y is [M, N/2] there).  Bias, GELU (cuBLASLt's tanh form), the
 * residual R, or SwiGLU; rows at or past M are not stored. */
template <int BN>
static __device__ __forceinline__ void wg_epilogue(const float *d, int row0, int n0, int M, int N, int epi,
                                                   const bf16 *__restrict__ bias, const bf16 *__restrict__ R,
                                                   bf16 *__restrict__ Y) {
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, t2 = 2 * (lane & 3);
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int row = row0 + warp * 16 + (lane >> 2) + 8 * i;
        if (row >= M) continue;
        if (epi == ENG_CU_EPI_SWIGLU) {
            const int No = N >> 1, c0 = (n0 >> 1) + t2;
            bf16 *y = Y + (size_t)row * No + c0;
#pragma unroll
            for (int j = 0; j < BN / 16; j++) {
                float g0 = d[4 * j + 2 * i], g1 = d[4 * j + 2 * i + 1];
                float u0 = d[4 * (j + BN / 16) + 2 * i], u1 = d[4 * (j + BN / 16) + 2 * i + 1];
                if (bias) {
                    const __nv_bfloat162 bg = *(const __nv_bfloat162 *)(bias + c0 + 8 * j);
                    const __nv_bfloat162 bu = *(const __nv_bfloat162 *)(bias + No + c0 + 8 * j);
                    g0 += __low2float(bg); g1 += __high2float(bg);
                    u0 += __low2float(bu); u1 += __high2float(bu);
                }
                *(__nv_bfloat162 *)(y + 8 * j) =
                    __floats2bfloat162_rn(wg_swiglu(g0, u0), wg_swiglu(g1, u1));
            }
            continue;
        }
        const int c0 = n0 + t2;
        bf16 *y = Y + (size_t)row * N + c0;
        const bf16 *r = R ? R + (size_t)row * N + c0 : NULL;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            float v0 = d[4 * j + 2 * i], v1 = d[4 * j + 2 * i + 1];
            if (epi != ENG_CU_EPI_NONE) {
                const __nv_bfloat162 bb = *(const __nv_bfloat162 *)(bias + c0 + 8 * j);
                v0 += __low2float(bb);
                v1 += __high2float(bb);
                if (epi == ENG_CU_EPI_BIAS_GELU) {
                    v0 = wg_gelu(v0);
                    v1 = wg_gelu(v1);
                }
            }
            if (r) {
                const __nv_bfloat162 rr = *(const __nv_bfloat162 *)(r + 8 * j);
                v0 += __low2float(rr);
                v1 += __high2float(rr);
            }
            *(__nv_bfloat162 *)(y + 8 * j) = __floats2bfloat162_rn(v0, v1);
        }
    }
}
/* a 4-byte store to shared memory by its 32-bit address (a generic store
 * through a pointer the compiler cannot place costs more) */
static __device__ __forceinline__ void wg_sts32(uint32_t a, uint32_t v) {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(v));
}
static __device__ __forceinline__ uint32_t wg_pack(float v0, float v1) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(v0, v1);
    return *(const uint32_t *)&h;
}

/* The whole-row LayerNorm epilogues' pieces (eng_cu_gemm_rowln.cu,
 * eng_cu_gemm_rowln_res.cu), on a thread's column pair of its two rows
 * (dj: wgmma's accumulators d[4j .. 4j + 3]): bias bb and the rows'
 * residuals x0, x1 added in place and the results summed into s0 / s1;
 * the squared deviations from the rows' means into q0 / q1; a sum over
 * the 4 lanes that hold a row. */
static __device__ __forceinline__ void wg_ln_add2(float *dj, float2 bb, float2 x0, float2 x1, float &s0, float &s1) {
    dj[0] += bb.x + x0.x;
    dj[1] += bb.y + x0.y;
    dj[2] += bb.x + x1.x;
    dj[3] += bb.y + x1.y;
    s0 += dj[0] + dj[1];
    s1 += dj[2] + dj[3];
}
static __device__ __forceinline__ void wg_ln_dev2(const float *dj, float m0, float m1, float &q0, float &q1) {
    const float e0 = dj[0] - m0, e1 = dj[1] - m0, e2 = dj[2] - m1, e3 = dj[3] - m1;
    q0 += e0 * e0 + e1 * e1;
    q1 += e2 * e2 + e3 * e3;
}
static __device__ __forceinline__ float wg_quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

/* Two rows' LayerNorm outputs into an output image: a thread's columns
 * (c, c + 1) of its rows r0 (at address at) and r0 + 8 (at + 1024, eight
 * 128-byte lines on) from their sums dj[0..3] (wgmma's accumulator order),
 * each row's mean and 1/stddev, gamma and beta of the two columns
 * (eng_cu_gemm_rowln.cu, eng_cu_gemm_rowln_res.cu). */
static __device__ __forceinline__ void wg_ln_put2(uint32_t at, const float *dj, float mu0, float rs0, float mu1,
                                                  float rs1, float2 g, float2 be) {
    wg_sts32(at, wg_pack((dj[0] - mu0) * rs0 * g.x + be.x, (dj[1] - mu0) * rs0 * g.y + be.y));
    wg_sts32(at + 1024, wg_pack((dj[2] - mu1) * rs1 * g.x + be.x, (dj[3] - mu1) * rs1 * g.y + be.y));
}

/* The epilogue into a shared-memory image of the output tile for TMA
 * stores (versions 3 and 4), EPI and the residual (HASR) fixed at compile
 * time: output columns 8 J0 .. 8 (J0 + JN) of the tile's BN (SwiGLU: BN/2)
 * -- all of them by default; version 4 writes one 64-column sub-tile at a
 * time -- as sub-tiles of 128 rows x 64 columns, 16 KB each, from C (a
 * shared-memory address), in the 128-byte
 * swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)), so a warp's
 * writes -- 8 rows x 16 bytes -- fall on distinct banks.  Rows at or past
 * M are written too (the TMA store clips them) but read no residual.
 * SwiGLU's bias is optional (checked at run time), the others' required. */
/* LN (eng_cu_gemm_wg_ln, not with SwiGLU): WG_LNA, WG_LNR, WG_OST of
 * eng_cu_ln_epi (ln), J0 and JN then whole 64-column chunks. */
template <int BN, int EPI, bool HASR, int J0 = 0, int JN = (ENG_CU_EPI_GATED(EPI) ? BN / 16 : BN / 8), int LN = 0>
static __device__ __forceinline__ void wg_epilogue_img(const float *d, int wrow, int row0, int n0, int M, int N,
                                                       const bf16 *__restrict__ bias, const bf16 *__restrict__ R,
                                                       uint32_t C, const float *__restrict__ rs = nullptr,
                                                       int rs0 = 0, const eng_cu_ln_epi *ln = nullptr) {
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, t2 = 2 * (lane & 3);
    /* the thread's two rows (i = 0, 1: 8 apart): their line in the image and
     * swizzle key (r0 + 8 has the same); columns 8j + t2 land in sub-tile
     * j / 8, chunk (j % 8) ^ key, byte 2 t2 */
    const int r0 = wrow + warp * 16 + (lane >> 2), key = r0 & 7;
    const uint32_t line = C + r0 * 128 + 2 * t2;
    auto put = [&](int i, int j, uint32_t v) {
        wg_sts32(line + i * 1024 + ((j - J0) >> 3) * 16384 + (((j & 7) ^ key) << 4), v);
    };
    if constexpr (ENG_CU_EPI_GATED(EPI)) {
        /* rs (may be NULL): a scale per output row on both products, before
         * the bias -- X's RMSNorm with its weights folded into W; row r's
         * at rs[r - rs0] (rs0: the first row rs holds) */
        const int row = row0 + r0;
        const float sc0 = !rs ? 1.f : row < M ? rs[row - rs0] : 0.f;
        const float sc1 = !rs ? 1.f : row + 8 < M ? rs[row + 8 - rs0] : 0.f;
        const int No = N >> 1, c0 = (n0 >> 1) + t2;
#pragma unroll
        for (int j = J0; j < J0 + JN; j++) {
            float bg0 = 0.f, bg1 = 0.f, bu0 = 0.f, bu1 = 0.f;
            if (bias) {
                const __nv_bfloat162 bg = *(const __nv_bfloat162 *)(bias + c0 + 8 * j);
                const __nv_bfloat162 bu = *(const __nv_bfloat162 *)(bias + No + c0 + 8 * j);
                bg0 = __low2float(bg); bg1 = __high2float(bg);
                bu0 = __low2float(bu); bu1 = __high2float(bu);
            }
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const float sc = i ? sc1 : sc0;
                const float g0 = d[4 * j + 2 * i] * sc + bg0, g1 = d[4 * j + 2 * i + 1] * sc + bg1;
                const float u0 = d[4 * (j + BN / 16) + 2 * i] * sc + bu0, u1 = d[4 * (j + BN / 16) + 2 * i + 1] * sc + bu1;
                put(i, j, wg_pack(wg_gated<EPI>(g0, u0), wg_gated<EPI>(g1, u1)));
            }
        }
    } else {
        static_assert(!LN || (J0 % 8 == 0 && JN % 8 == 0), "the ln epilogue takes whole 64-column chunks");
        const int c0 = n0 + t2, row = row0 + r0;
        const bf16 *rr0 = HASR && row < M ? R + (size_t)row * N + c0 : NULL;
        const bf16 *rr1 = HASR && row + 8 < M ? R + (size_t)(row + 8) * N + c0 : NULL;
        /* the two rows' statistics: of X (LNA), of R (LNR) */
        float2 as[2] = {}, rsn[2] = {};
#pragma unroll
        for (int i = 0; i < 2; i++) {
            if constexpr ((LN & WG_LNA) != 0) as[i] = row + 8 * i < M ? ln->a_stats[row + 8 * i] : make_float2(0.f, 0.f);
            if constexpr ((LN & WG_LNR) != 0) rsn[i] = row + 8 * i < M ? ln->r_stats[row + 8 * i] : make_float2(0.f, 0.f);
        }
        float su[2] = {0.f, 0.f}, sq[2] = {0.f, 0.f}; /* OST: this chunk's sums, per row */
#pragma unroll
        for (int j = J0; j < J0 + JN; j++) {
            float b0 = 0.f, b1 = 0.f;
            if constexpr (EPI != ENG_CU_EPI_NONE) {
                const __nv_bfloat162 bb = *(const __nv_bfloat162 *)(bias + c0 + 8 * j);
                b0 = __low2float(bb);
                b1 = __high2float(bb);
            }
            float2 cs = {}, gm = {}, bt = {};
            if constexpr ((LN & WG_LNA) != 0) cs = *(const float2 *)(ln->a_colsum + c0 + 8 * j);
            if constexpr ((LN & WG_LNR) != 0) {
                gm = *(const float2 *)(ln->r_gamma + c0 + 8 * j);
                bt = *(const float2 *)(ln->r_beta + c0 + 8 * j);
            }
#pragma unroll
            for (int i = 0; i < 2; i++) {
                float v0 = d[4 * j + 2 * i], v1 = d[4 * j + 2 * i + 1];
                if constexpr ((LN & WG_LNA) != 0) { /* rs (x W'^T - mu colsum W') */
                    v0 = as[i].y * (v0 - as[i].x * cs.x);
                    v1 = as[i].y * (v1 - as[i].x * cs.y);
                }
                if constexpr (EPI != ENG_CU_EPI_NONE) { /* (+ 0.f is not free: -0 + 0 = +0) */
                    v0 += b0;
                    v1 += b1;
                }
                if constexpr (EPI == ENG_CU_EPI_BIAS_GELU) {
                    v0 = wg_gelu(v0);
                    v1 = wg_gelu(v1);
                }
                if constexpr (HASR) {
                    const bf16 *rr = i ? rr1 : rr0;
                    if (rr) {
                        const __nv_bfloat162 x = *(const __nv_bfloat162 *)(rr + 8 * j);
                        float x0 = __low2float(x), x1 = __high2float(x);
                        if constexpr ((LN & WG_LNR) != 0) { /* the residual's normed value */
                            x0 = (x0 - rsn[i].x) * rsn[i].y * gm.x + bt.x;
                            x1 = (x1 - rsn[i].x) * rsn[i].y * gm.y + bt.y;
                        }
                        v0 += x0;
                        v1 += x1;
                    }
                }
                const uint32_t pk = wg_pack(v0, v1);
                put(i, j, pk);
                if constexpr ((LN & WG_OST) != 0) { /* the stored values' sums */
                    const float2 f = __bfloat1622float2(*(const __nv_bfloat162 *)&pk);
                    su[i] += f.x + f.y;
                    sq[i] += f.x * f.x + f.y * f.y;
                }
            }
            if constexpr ((LN & WG_OST) != 0) {
                if ((j & 7) == 7) { /* a 64-column chunk done: the 4 lanes of each row meet */
#pragma unroll
                    for (int i = 0; i < 2; i++) {
                        su[i] += __shfl_xor_sync(0xffffffffu, su[i], 1);
                        su[i] += __shfl_xor_sync(0xffffffffu, su[i], 2);
                        sq[i] += __shfl_xor_sync(0xffffffffu, sq[i], 1);
                        sq[i] += __shfl_xor_sync(0xffffffffu, sq[i], 2);
                        if ((lane & 3) == 0 && row + 8 * i < M)
                            ln->o_stats[(size_t)(row + 8 * i) * (N >> 6) + ((n0 >> 6) + (j >> 3))] =
                                make_float2(su[i], sq[i]);
                        su[i] = sq[i] = 0.f;
                    }
                }
            }
        }
    }
}

/* Qwen3's QKV product with the per-head q/k RMSNorm and rotary
 * embedding in the epilogue (WG_EPI_QK; eng_cu_qk_norm_rope's arithmetic,
 * eng_cu.h, on the fp32 sums instead of their bf16 rounding), into the
 * version 3 / 5 image like wg_epilogue_img: a 256-wide tile holds two
 * whole heads of 128 (version 3: the Q | K and K | V boundaries are
 * multiples of 256, eng_cu_gemm_wg_qk_ok), a 128-wide one (version 5) one
 * head, all Q, all K or all V (copied as they are).  A
 * thread's columns of a head row are 8j + t2 + {0, 1}, j < 16, so the
 * rotation's partner of column c < 64, c + 64, is its own value j + 8,
 * and the head's sum of squares is its 32 values plus two shuffles across
 * the 4 lanes holding that row.  Positions come from cu_seqlens (rows
 * past the real count have zero inputs and come out 0). */
template <int BN>
static __device__ __forceinline__ void wg_epilogue_img_qk(const float *d, int wrow, int row0, int n0, int M,
                                                          const eng_cu_qk_args &qk, uint32_t C,
                                                          const float *__restrict__ rs, int rs0 = 0) {
    static_assert(BN == 128 || BN == 256, "whole heads of 128 a tile");
    const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, t2 = 2 * (lane & 3);
    const int r0 = wrow + warp * 16 + (lane >> 2), key = r0 & 7;
    const uint32_t line = C + r0 * 128 + 2 * t2;
    auto put = [&](int i, int j, uint32_t v) { wg_sts32(line + i * 1024 + (j >> 3) * 16384 + (((j & 7) ^ key) << 4), v); };
    const int qcols = qk.n_heads * 128, kcols = (qk.n_heads + qk.n_kv_heads) * 128;
    /* rs (may be NULL): a scale per row first, X's RMSNorm with its weights
     * folded into W (as in wg_epilogue_img's SwiGLU; row r's at rs[r - rs0]) */
    const int row = row0 + r0;
    const float sc0 = !rs ? 1.f : row < M ? rs[row - rs0] : 0.f;
    const float sc1 = !rs ? 1.f : row + 8 < M ? rs[row + 8 - rs0] : 0.f;
    if (n0 >= kcols) { /* V heads */
#pragma unroll
        for (int j = 0; j < BN / 8; j++)
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const float sc = i ? sc1 : sc0;
                put(i, j, wg_pack(d[4 * j + 2 * i] * sc, d[4 * j + 2 * i + 1] * sc));
            }
        return;
    }
    const float *w = n0 < qcols ? qk.q_norm : qk.k_norm;
    const int n_seqs = *qk.n_seqs_dev;
    /* the two rows' positions: their (cos, sin) of columns c, c + 1 are one float4 */
    const int p0 = min(max(eng_cu_pos_in_seq(qk.cu_seqlens, n_seqs, row0 + r0), 0), qk.rope_rows - 1);
    const int p1 = min(max(eng_cu_pos_in_seq(qk.cu_seqlens, n_seqs, row0 + r0 + 8), 0), qk.rope_rows - 1);
#pragma unroll
    for (int h = 0; h < BN / 128; h++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            float ss = 0.f;
#pragma unroll
            for (int j = 16 * h; j < 16 * h + 16; j++)
                ss += d[4 * j + 2 * i] * d[4 * j + 2 * i] + d[4 * j + 2 * i + 1] * d[4 * j + 2 * i + 1];
            ss += __shfl_xor_sync(0xffffffffu, ss, 1);
            ss += __shfl_xor_sync(0xffffffffu, ss, 2);
            /* x = sc d: the head row's rsqrt(mean(x^2) + eps), times the sc each x carries */
            const float sc = i ? sc1 : sc0;
            const float r = rsqrtf(sc * sc * ss * (1.f / 128.f) + qk.eps) * sc;
#pragma unroll
            for (int jj = 0; jj < 8; jj++) {
                const int c = 8 * jj + t2, j = 16 * h + jj;
                const float4 t = ((const float4 *)(qk.rope + (size_t)(i ? p1 : p0) * 128))[c >> 1];
                const float2 wa = *(const float2 *)(w + c), wb = *(const float2 *)(w + 64 + c);
                const float a0 = d[4 * j + 2 * i] * r * wa.x, a1 = d[4 * j + 2 * i + 1] * r * wa.y;
                const float b0 = d[4 * (j + 8) + 2 * i] * r * wb.x, b1 = d[4 * (j + 8) + 2 * i + 1] * r * wb.y;
                put(i, j, wg_pack(a0 * t.x - b0 * t.y, a1 * t.z - b1 * t.w));
                put(i, j + 8, wg_pack(b0 * t.x + a0 * t.y, b1 * t.z + a1 * t.w));
            }
        }
}
#endif

#endif

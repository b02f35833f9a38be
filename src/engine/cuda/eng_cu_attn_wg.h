/* eng_cu_attn_wg.h: the pieces attention version 10's kernels share
 * (eng_cu_attn_wg.cu: one or two K / V stages a block; eng_cu_attn_wgp.cu:
 * persistent blocks that prefetch their next work item): the wgmma forms of
 * S = Q K^T and O += P V, the swizzled tile copies and descriptors, and
 * one key tile's two products as whole steps.  Layouts and measurements:
 * eng_cu_attn_wg.cu's header.
 */
#pragma once
#include "eng_cu_frag.h"
#include "eng_cu_wgmma.h"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* S (+)= Q K^T, one k-step (m64n64k16, both operands by descriptor).
 * The first step writes S without reading it ("=f", scale-d false), so S
 * needs no zero-fill; ptxas's register counts came out the same. */
template <bool ACC>
static __device__ __forceinline__ void awg_mma_ss64(float *d, uint64_t da, uint64_t db) {
    if constexpr (ACC)
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, 1, 0;\n"
                     " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(da), "l"(db));
    else
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, 0, 0;\n"
                     " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
                     : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
                     : "l"(da), "l"(db));
}

/* O += P V, one k-step of 16 keys: P from registers (4 packed bf16 pairs
 * a thread, the mma.sync A layout), V by an MN-major descriptor
 * (imm-trans-b = 1) */
static __device__ __forceinline__ void awg_mma_rs32(float *d, const uint32_t *a, uint64_t db) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %21, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

static __device__ __forceinline__ void awg_mma_rs64(float *d, const uint32_t *a, uint64_t db) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %37, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

static __device__ __forceinline__ void awg_mma_rs128(float *d, const uint32_t *a, uint64_t db) {
    asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %69, 0;\n"
                 " wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

template <int D>
static __device__ __forceinline__ void awg_mma_pv(float *d, const uint32_t *a, uint64_t db) {
    if constexpr (D == 32) awg_mma_rs32(d, a, db);
    else if constexpr (D == 64) awg_mma_rs64(d, a, db);
    else awg_mma_rs128(d, a, db);
}

/* A tile's layout: rows of RB bytes (128, or 64 at D = 32), at D = 128 in
 * two slices of 64 values, each slice R rows; SW the descriptor's swizzle
 * mode (1: 128 bytes, 2: 64). */
template <int D>
struct awg_layout {
    static constexpr int RB = D >= 64 ? 128 : 64, SW = D >= 64 ? 1 : 2;
};

/* cp.async of R rows of D values (global row stride ld) into the swizzled
 * tile at dst (1024-byte aligned), rows >= valid zero-filled; by the CTA's
 * 128 threads, not committed */
template <int D, int R>
static __device__ __forceinline__ void awg_load(uint32_t dst, const bf16 *src, int ld, int valid) {
    constexpr int CPR = D / 8; /* 16-byte chunks a row */
#pragma unroll
    for (int c = threadIdx.x; c < R * CPR; c += 128) {
        const int r = c / CPR, cc = c % CPR;
        const uint32_t off = D >= 64 ? (cc >> 3) * (R * 128) + r * 128 + (((cc & 7) ^ (r & 7)) << 4)
                                     : r * 64 + ((cc ^ ((r >> 1) & 3)) << 4);
        const bool ok = r < valid;
        const bf16 *g = ok ? src + (size_t)r * ld + cc * 8 : src;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst + off), "l"(g), "r"(ok ? 16 : 0));
    }
}

/* K-major descriptor (Q, K): k-step kk of 16 values at slice kk / 4 (D >=
 * 64, +32 bytes a step inside the slice) or +32 bytes (D = 32); 8-row
 * groups RB * 8 bytes apart */
template <int D, int R>
static __device__ __forceinline__ uint64_t awg_desc_k(uint32_t tile, int kk) {
    using L = awg_layout<D>;
    const uint32_t a = D >= 64 ? tile + (kk >> 2) * (R * 128) + (kk & 3) * 32 : tile + kk * 32;
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)((L::RB * 8) >> 4) << 32) |
           ((uint64_t)L::SW << 62);
}

/* MN-major descriptor (V as the B operand of P V): keys 16 s .. 16 s + 15,
 * the head's 64-value column blocks (D = 128) R * 128 bytes apart (the
 * leading offset) and 8-key core-matrix groups RB * 8 bytes apart (the
 * stride offset); checked on the H200 2026-12-02 (run 26) */
template <int D, int R>
static __device__ __forceinline__ uint64_t awg_desc_v(uint32_t tile, int s) {
    using L = awg_layout<D>;
    const uint32_t a = tile + s * 16 * L::RB, lbo = R * 128, sbo = L::RB * 8;
    return (uint64_t)((a & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | ((uint64_t)L::SW << 62);
}

/* S = Q K^T for one key tile (K at shared address K), issued, waited for
 * and fenced: D / 16 k-steps, the first write-only */
template <int D>
static __device__ __forceinline__ void awg_scores(float (*sc)[4], uint32_t sQ, uint32_t K) {
    wg_fence();
    awg_mma_ss64<false>(&sc[0][0], awg_desc_k<D, ENG_CU_ATTN_BM>(sQ, 0), awg_desc_k<D, 64>(K, 0));
#pragma unroll
    for (int kk = 1; kk < D / 16; kk++)
        awg_mma_ss64<true>(&sc[0][0], awg_desc_k<D, ENG_CU_ATTN_BM>(sQ, kk), awg_desc_k<D, 64>(K, kk));
    wg_commit();
    wg_wait<0>();
    wg_fence_regs<32>(&sc[0][0]);
}

/* P (the softmaxed S, fp32) packed to bf16 in the register A layout of
 * P V -- before the wait for V, so the packing hides under that copy */
static __device__ __forceinline__ void awg_pack_p(uint32_t (*pa)[4], float (*sc)[4]) {
#pragma unroll
    for (int s = 0; s < 4; s++) {
        pa[s][0] = eng_pack_bf16(sc[2 * s][0], sc[2 * s][1]);
        pa[s][1] = eng_pack_bf16(sc[2 * s][2], sc[2 * s][3]);
        pa[s][2] = eng_pack_bf16(sc[2 * s + 1][0], sc[2 * s + 1][1]);
        pa[s][3] = eng_pack_bf16(sc[2 * s + 1][2], sc[2 * s + 1][3]);
    }
}

/* O += P V for one key tile, V at shared address V; issued, waited, fenced */
template <int D>
static __device__ __forceinline__ void awg_pv(float (*o)[4], uint32_t (*pa)[4], uint32_t V) {
    wg_fence();
#pragma unroll
    for (int s = 0; s < 4; s++) awg_mma_pv<D>(&o[0][0], pa[s], awg_desc_v<D, 64>(V, s));
    wg_commit();
    wg_wait<0>();
    wg_fence_regs<D / 2>(&o[0][0]);
}

/* this thread's finished cp.async copies, made visible to the async proxy
 * for every thread of the block */
static __device__ __forceinline__ void awg_copies_visible() {
    wg_fence_async_smem();
    __syncthreads();
}
#endif

/* shared memory: Q, ST stages of K and V, and the 1024-byte alignment fix-up */
template <int D, int ST>
static constexpr size_t awg_smem() {
    return (size_t)(64 + ST * 2 * 64) * D * 2 + 1024;
}

/* blocks an SM the launch bounds ask for: the register cap that lets
 * shared memory, not registers, bound residency (ST = 1 at D = 128: 49 KB,
 * four blocks at 128 registers, as v9 has).  Below 128, five (d = 64, 96
 * registers) and six (d = 32, 80) blocks, no spills; run 27 measured four
 * and five (105 / 90 registers uncapped) */
template <int D, int ST>
static constexpr int awg_minb() {
    return D == 128 ? (ST == 1 ? 4 : 2) : D == 64 ? 5 : 6;
}

/* The blocks of kernel k (128 threads, smem bytes of shared memory) that
 * fit the GPU at once, SMs x blocks an SM; found on the first call (after
 * the shared-memory opt-in) into the caller's `resident`, one per kernel
 * instantiation. */
template <typename Kern>
static cudaError_t awg_resident(Kern k, size_t smem, int &resident) {
    if (resident) return cudaSuccess;
    int dev = 0, sms = 0, per = 0;
    cudaError_t e;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess ||
        (e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, 128, smem)) != cudaSuccess)
        return e;
    if (per < 1) return cudaErrorInvalidConfiguration;
    resident = sms * per;
    return cudaSuccess;
}

/* the persistent form (eng_cu_attn_wgp.cu), eng_cu_attn_wg_stages = 3 */
cudaError_t eng_cu_attention_wgp(cudaStream_t s, const eng_cu_attn_args *a);

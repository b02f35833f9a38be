/* eng_cu_split.h: what the chain's split launches share (eng_cu_chain_ffn.cu,
 * eng_cu_chain_ao.cu) -- launches whose blocks each add a T x H partial
 * (split-K across the grid) and meet behind one grid barrier.
 *
 * Why a header: both kernels cross the same barrier and finish a unit of
 * 8 columns the same way; one copy keeps them equal.
 *
 * eng_split_barrier: every block's earlier stores visible to every block
 * after it.  A 64-bit counter that only grows: each block adds 1 with
 * release semantics (after bar.sync, so the whole block's stores come
 * first), then waits with acquire loads until the count reaches the next
 * multiple of the grid size above what its own add returned.  Launches
 * sharing a counter must have the same grid size and run one after the
 * other (the chain's griddepcontrol.wait orders them), so the counter is
 * a multiple of the grid size whenever a launch begins and is never reset.
 * Needs every block of the grid resident at once (the launchers check).
 *
 * eng_split_sum: v[0] + v[stride] + ... + v[(n - 1) stride], in that order.
 *
 * eng_split_store4: four summed columns of row r plus the residual, stored
 * as bf16; rows at or past the real count get zeros.
 *
 * eng_split_store4_res: the same with the encoders' epilogue: + the bias
 * (bf16, 8-byte aligned) + the residual, post-LayerNorm where gamma is
 * set -- (R - mu) rs gamma + beta with st = (mu, rs) of row r (gamma,
 * beta fp32, 16-byte aligned) -- else R as it is. */
#ifndef ENG_CU_SPLIT_H
#define ENG_CU_SPLIT_H

#include "eng_cu_frag.h"

static __device__ __forceinline__ void eng_split_barrier(unsigned long long *bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned long long nb = gridDim.x;
        unsigned long long old, v;
        asm volatile("atom.add.release.gpu.global.u64 %0, [%1], 1;\n" : "=l"(old) : "l"(bar) : "memory");
        const unsigned long long target = (old / nb + 1) * nb;
        do asm volatile("ld.acquire.gpu.global.u64 %0, [%1];\n" : "=l"(v) : "l"(bar) : "memory");
        while (v < target);
    }
    __syncthreads();
}

static __device__ __forceinline__ float4 eng_split_sum(const float4 *v, int n, int stride) {
    float4 s = v[0];
    for (int j = 1; j < n; j++) {
        const float4 u = v[j * stride];
        s.x += u.x;
        s.y += u.y;
        s.z += u.z;
        s.w += u.w;
    }
    return s;
}

static __device__ __forceinline__ void eng_split_store4(float4 s, const bf16 *R, bf16 *Y, int ld, int r, int col,
                                                        int n_real) {
    uint2 o = make_uint2(0u, 0u);
    if (r < n_real) {
        const uint2 rr = __ldcg((const uint2 *)(R + (size_t)r * ld + col));
        const float2 r0 = __bfloat1622float2(*(const __nv_bfloat162 *)&rr.x),
                     r1 = __bfloat1622float2(*(const __nv_bfloat162 *)&rr.y);
        o.x = eng_pack_bf16(s.x + r0.x, s.y + r0.y);
        o.y = eng_pack_bf16(s.z + r1.x, s.w + r1.y);
    }
    *(uint2 *)(Y + (size_t)r * ld + col) = o;
}

static __device__ __forceinline__ void eng_split_store4_res(float4 s, const bf16 *R, bf16 *Y, int ld, int r, int col,
                                                            int n_real, const bf16 *bias, float2 st,
                                                            const float *gamma, const float *beta) {
    uint2 o = make_uint2(0u, 0u);
    if (r < n_real) {
        const uint2 rr = __ldcg((const uint2 *)(R + (size_t)r * ld + col));
        const uint2 bb = __ldg((const uint2 *)(bias + col));
        float rv[4], bv[4];
        *(float2 *)&rv[0] = __bfloat1622float2(*(const __nv_bfloat162 *)&rr.x);
        *(float2 *)&rv[2] = __bfloat1622float2(*(const __nv_bfloat162 *)&rr.y);
        *(float2 *)&bv[0] = __bfloat1622float2(*(const __nv_bfloat162 *)&bb.x);
        *(float2 *)&bv[2] = __bfloat1622float2(*(const __nv_bfloat162 *)&bb.y);
        if (gamma) {
            const float4 ga = __ldg((const float4 *)(gamma + col)), be = __ldg((const float4 *)(beta + col));
            rv[0] = (rv[0] - st.x) * st.y * ga.x + be.x;
            rv[1] = (rv[1] - st.x) * st.y * ga.y + be.y;
            rv[2] = (rv[2] - st.x) * st.y * ga.z + be.z;
            rv[3] = (rv[3] - st.x) * st.y * ga.w + be.w;
        }
        o.x = eng_pack_bf16(s.x + bv[0] + rv[0], s.y + bv[1] + rv[1]);
        o.y = eng_pack_bf16(s.z + bv[2] + rv[2], s.w + bv[3] + rv[3]);
    }
    *(uint2 *)(Y + (size_t)r * ld + col) = o;
}

#endif

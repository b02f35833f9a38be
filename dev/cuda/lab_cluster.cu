/* lab_cluster: what a dependent step costs inside ONE thread-block
 * cluster -- the floor under a one-query forward run as a single cluster
 * kernel (all of all-MiniLM-L6's layers in 16 CTAs, activations exchanged
 * through distributed shared memory).
 *
 * Why: the shipped one-query chain pays ~1.7 us a kernel node (44 nodes
 * for MiniLM: 75 us against the 50 us target), and the grid-barrier
 * persistent kernel was slower (lab_chain: 2.0-2.2 us a step; eng_cu_mega:
 * stages of 2-6 us, mostly L2 round trips).  A cluster has a hardware
 * barrier and its CTAs can store into each other's shared memory, so a
 * step need not touch L2 at all.  Whether ~30 dependent phases (5 a
 * layer) fit well under 50 us depends on what one such step costs; this
 * measures it before any of the forward is written (dev/cuda/NOTES.md,
 * "2026-12-02 (15:05-16:05 UTC)", lead 2, has the estimate it tests).
 * Measured on the H200 (run 35): 2.24 us a step at 16 CTAs with 44 KB of
 * weights a CTA (barrier alone 0.245 us), no better than the chain's
 * nodes, so the forward was not written.
 *
 * A step, for cluster sizes 2..16 (16 needs the non-portable size):
 *   bar       the cluster barrier alone (arrive.release, wait.acquire);
 *   reduce    every CTA reads the whole activation (3072 words, MiniLM's
 *             16 x 384 bf16 in bytes) from its own shared memory, reduces
 *             it over the block and writes its slice locally, then the
 *             barrier;
 *   exchange  the same, its slice stored into every CTA's copy of the
 *             next activation (st.shared::cluster), then the barrier;
 *   +w N KB   exchange while each CTA streams N KB of weights a step from
 *             global memory (cp.async, the next step's requested before
 *             the barrier, as the forward would prefetch; distinct per
 *             step and CTA; 44 KB is a MiniLM layer's ~221 KB a CTA over
 *             its 5 phases).
 * The activation is integers (next[i] = cur[i] * 3 + sum(cur) + step, mod
 * 2^32), so the CPU reference is exact and a missing barrier or a stale
 * remote store changes the result.
 *
 * Added 2026-12-07 (session 33), because run 35's "exchange" (1.45 us a
 * step against the bare barrier's 0.25) pushed every word with its own
 * 32-bit remote store and streamed the weights one step ahead by 16-byte
 * cp.async -- neither is the form a forward would use:
 *   push4     the exchange with 16-byte remote stores (st.shared::cluster.v4);
 *   pull      each CTA writes its slice locally, the barrier, then every
 *             CTA reads the other slices from their owners with 16-byte
 *             remote loads (ld.shared::cluster.v4): the barrier releases
 *             only local stores, and the loads are all in flight at once
 *             (a last barrier before exit, so no CTA leaves while read);
 *   +tma N KB R  the weights by bulk copy (TMA: thread 0, 16 KB pieces, an
 *             mbarrier a slot) into a ring of R slots, R - 1 steps ahead,
 *             from a footprint of 30 steps x 16 CTAs (all-MiniLM-L6's 21 MB
 *             at 44 KB: its 6 layers x 5 steps), so they come from L2 as
 *             MiniLM's would between queries.
 * Reading: if "pull +tma 44 KB" at 16 CTAs costs <= ~1 us a step, one
 * cluster could run MiniLM's 16-token forward in ~30 x 1 us plus the
 * products (target 50 us; the chain of kernels 63-66); at >= ~1.5 us the
 * lead stays closed.  Measured on an H100 (run 123): pull 2.10 us, push4
 * 1.43, exchange 1.62, barrier 0.84; with 44 KB by TMA pull 2.76, push4
 * 2.18, barrier alone 1.61 -- one SM ingests only ~27-36 KB/us from L2
 * even by bulk copy, so MiniLM's weights alone take ~44 us on 16 SMs:
 * closed (docs/BENCHMARKS.md, "A dependent step inside one thread-block
 * cluster").
 */
#include "lab.h"
#include "eng_cu_skinny.h" /* sk3_cp16, sk3_bulk_row */
#include "eng_cu_wgmma.h"  /* the mbarrier helpers (sm_90a) */
#include <stdlib.h>

#define CL_THREADS 256

#if defined(__CUDA_ARCH_FEAT_SM90_ALL) /* the kernel runs as sm_90a code (the PTX build traps) */
static __device__ __forceinline__ unsigned cl_rank() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
static __device__ __forceinline__ unsigned cl_size() {
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
    return r;
}
static __device__ __forceinline__ void cl_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/* a 32-bit store into CTA `rank`'s shared memory at this CTA's address a */
static __device__ __forceinline__ void cl_store_remote(uint32_t a, unsigned rank, uint32_t v) {
    uint32_t ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(a), "r"(rank));
    asm volatile("st.shared::cluster.u32 [%0], %1;\n" ::"r"(ra), "r"(v) : "memory");
}

/* 16 bytes from / to CTA `rank`'s shared memory at this CTA's address a */
static __device__ __forceinline__ uint4 cl_load_remote4(uint32_t a, unsigned rank) {
    uint32_t ra;
    uint4 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(ra)
                 : "memory");
    return v;
}
static __device__ __forceinline__ void cl_store_remote4(uint32_t a, unsigned rank, uint4 v) {
    uint32_t ra;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(ra) : "r"(a), "r"(rank));
    asm volatile("st.shared::cluster.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"r"(ra), "r"(v.x), "r"(v.y), "r"(v.z),
                 "r"(v.w)
                 : "memory");
}

/* thread 0: `bytes` from src into dst (shared), in bulk copies of 16 KB
 * completing on bar (armed with the bytes to expect: the mbarrier helpers
 * of eng_cu_wgmma.h, the bulk row copy of eng_cu_skinny.h) */
static __device__ __forceinline__ void cl_bulk(uint64_t *bar, void *dst, const void *src, int bytes) {
    wg_bar_arm(bar, bytes);
    for (int o = 0; o < bytes; o += 16384)
        sk3_bulk_row(bar, (bf16 *)((char *)dst + o), (const bf16 *)((const char *)src + o), min(16384, bytes - o));
}
#endif

#define CL_TMA_STEPS 30 /* the +tma footprint: 30 steps x 16 CTAs, then it wraps */
#define CL_RING_MAX 8

enum { CL_BAR = 0, CL_REDUCE = 1, CL_EXCHANGE = 2, CL_PUSH4 = 3, CL_PULL = 4 };

/* one cluster (gridDim.x CTAs); dynamic shared memory: the activation
 * twice (2 n words), then two weight buffers of wper 16-byte chunks a
 * thread */
/* ring > 0: the weights by bulk copy into `ring` slots of wper x 256 16-byte
 * chunks (the +tma variants; w then holds CL_TMA_STEPS x C slices), else by
 * cp.async into two buffers (run 35's form) */
__global__ void __launch_bounds__(CL_THREADS) cl_kernel(const uint32_t *x0, uint32_t *out, int n, const uint4 *w,
                                                        int wper, int steps, int mode, int ring) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint4 cl_dyn[];
    __shared__ uint32_t red[CL_THREADS / 32];
    __shared__ __align__(8) uint64_t wbar[CL_RING_MAX];
    uint32_t *act = (uint32_t *)cl_dyn;
    uint4 *wb[2] = {cl_dyn + n / 2, cl_dyn + n / 2 + (size_t)wper * CL_THREADS};
    const unsigned rank = cl_rank(), C = cl_size();
    const int per = (n + (int)C - 1) / (int)C, lo = (int)rank * per, hi = min(n, lo + per);
    const int slot = wper * CL_THREADS; /* 16-byte chunks a weight slice */
    auto tma_issue = [&](int s) {       /* thread 0: step s's slice into slot s % ring */
        const uint4 *src = w + ((size_t)(s % CL_TMA_STEPS) * C + rank) * slot;
        cl_bulk(&wbar[s % ring], cl_dyn + n / 2 + (size_t)(s % ring) * slot, src, slot * 16);
    };
    if (ring && threadIdx.x == 0) {
        for (int j = 0; j < ring; j++) wg_bar_init(&wbar[j], 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        for (int s = 0; s < ring - 1 && s < steps; s++) tma_issue(s);
    }
    auto issue = [&](int s) {
        const uint4 *src = w + ((size_t)s * C + rank) * CL_THREADS * wper;
        for (int i = 0; i < wper; i++)
            sk3_cp16(wb[s & 1] + i * CL_THREADS + threadIdx.x, src + i * CL_THREADS + threadIdx.x);
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    };
    for (int i = threadIdx.x; i < n; i += CL_THREADS) act[i] = x0[i];
    if (wper && steps && !ring) issue(0);
    cl_sync(); /* every CTA of the cluster runs (and holds its copy) before any remote store */
    for (int s = 0; s < steps; s++) {
        const uint32_t *cur = act + (s & 1) * n;
        uint32_t *nxt = act + ((s + 1) & 1) * n;
        uint32_t wx = 0;
        if (wper && ring) { /* step s + ring - 1's weights requested (its slot held step s - 1's, all read
                             * before the last barrier), then this step's awaited and read */
            if (threadIdx.x == 0 && s + ring - 1 < steps) tma_issue(s + ring - 1);
            wg_bar_wait(&wbar[s % ring], (uint32_t)(s / ring) & 1u);
            const uint4 *sl = cl_dyn + n / 2 + (size_t)(s % ring) * slot;
            for (int i = 0; i < wper; i++) {
                const uint4 v = sl[i * CL_THREADS + threadIdx.x];
                wx ^= v.x ^ v.y ^ v.z ^ v.w;
            }
        } else if (wper) { /* this step's weights, then the next step's requested */
            asm volatile("cp.async.wait_all;\n" ::: "memory");
            for (int i = 0; i < wper; i++) {
                const uint4 v = wb[s & 1][i * CL_THREADS + threadIdx.x];
                wx ^= v.x ^ v.y ^ v.z ^ v.w;
            }
            if (s + 1 < steps) issue(s + 1);
        }
        if (mode != CL_BAR) {
            uint32_t sum = 0;
            for (int i = threadIdx.x; i < n; i += CL_THREADS) sum += cur[i];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = sum;
            __syncthreads();
            uint32_t tot = 0;
            for (int i = 0; i < CL_THREADS / 32; i++) tot += red[i];
            __syncthreads();
            /* the weights are zeros: they only keep their loads live */
            const uint32_t add = tot + (uint32_t)s + (wx == 0xdeadbeefu ? 1u : 0u);
            if (mode == CL_PUSH4) {
                for (int i = lo + 4 * threadIdx.x; i < hi; i += 4 * CL_THREADS) {
                    const uint4 v = make_uint4(cur[i] * 3u + add, cur[i + 1] * 3u + add, cur[i + 2] * 3u + add,
                                               cur[i + 3] * 3u + add);
                    const uint32_t a = (uint32_t)__cvta_generic_to_shared(nxt + i);
                    for (unsigned r = 0; r < C; r++) cl_store_remote4(a, r, v);
                }
            } else {
                for (int i = lo + threadIdx.x; i < hi; i += CL_THREADS) {
                    const uint32_t v = cur[i] * 3u + add;
                    if (mode == CL_REDUCE || mode == CL_PULL) {
                        nxt[i] = v;
                    } else {
                        const uint32_t a = (uint32_t)__cvta_generic_to_shared(nxt + i);
                        for (unsigned r = 0; r < C; r++) cl_store_remote(a, r, v);
                    }
                }
            }
        }
        cl_sync();
        if (mode == CL_PULL) {
            /* the other slices from their owners (their nxt is not written again before the next
             * barrier but one, which this CTA reaches only after these loads) */
            const uint32_t base = (uint32_t)__cvta_generic_to_shared(nxt);
            for (int q = threadIdx.x; q < n / 4; q += CL_THREADS) {
                const unsigned r = (unsigned)(4 * q / per);
                if (r != rank) *(uint4 *)(nxt + 4 * q) = cl_load_remote4(base + 16u * (uint32_t)q, r);
            }
            __syncthreads();
        }
    }
    if (mode == CL_PULL) cl_sync(); /* no CTA exits while another may still read its slice */
    /* CTA 0 holds the whole result (exchange); reduce: each CTA its slice */
    const uint32_t *fin = act + (mode == CL_BAR ? 0 : (steps & 1) * n); /* bar: x0, never changed */
    if (mode == CL_REDUCE) {
        for (int i = lo + threadIdx.x; i < hi; i += CL_THREADS) out[i] = fin[i];
    } else if (rank == 0) {
        for (int i = threadIdx.x; i < n; i += CL_THREADS) out[i] = fin[i];
    }
#else
    __trap();
#endif
}

/* the reference: the same recurrence on the CPU (reduce: the slices are
 * the same values, every CTA having the whole activation only in
 * exchange mode, so reduce is checked at steps <= 1) */
static std::vector<uint32_t> cl_ref(const std::vector<uint32_t> &x0, int steps, int mode) {
    std::vector<uint32_t> cur = x0, nxt(x0.size());
    if (mode == CL_BAR) return cur;
    for (int s = 0; s < steps; s++) {
        uint32_t sum = 0;
        for (uint32_t v : cur) sum += v;
        for (size_t i = 0; i < cur.size(); i++) nxt[i] = cur[i] * 3u + sum + (uint32_t)s;
        cur.swap(nxt);
    }
    return cur;
}

int main() {
    int dev = 0, cc = 0;
    CUCHECK(cudaGetDevice(&dev));
    CUCHECK(cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, dev));
    if (cc < 9) {
        printf("lab_cluster: needs thread-block clusters (sm_90 or newer): nothing to measure\n");
        return 1;
    }
    const int n = 3072, steps = 60;
    const int wkbs[] = {44, 88};
    const int max_wper = 88 * 1024 / 16 / CL_THREADS;
    /* the largest: two 88 KB buffers, or the +tma rings (4 x 44, 6 x 24, 2 x 72 KB) */
    const size_t smem_max = (size_t)n * 2 * 4 + 2 * (size_t)max_wper * CL_THREADS * 16;
    const size_t tma_chunks = (size_t)CL_TMA_STEPS * 16 * CL_THREADS * (72 * 1024 / 16 / CL_THREADS);
    uint4 *wt = NULL; /* the +tma weights: zeros too, 30 steps x 16 CTAs of the largest slice */
    CUCHECK(cudaMalloc(&wt, tma_chunks * sizeof(uint4)));
    CUCHECK(cudaMemset(wt, 0, tma_chunks * sizeof(uint4)));
    /* weights: distinct per (step, CTA), zeros */
    const size_t wchunks = (size_t)steps * 16 * CL_THREADS * max_wper;
    uint4 *w = NULL;
    CUCHECK(cudaMalloc(&w, wchunks * sizeof(uint4)));
    CUCHECK(cudaMemset(w, 0, wchunks * sizeof(uint4)));
    std::vector<uint32_t> x0(n);
    for (int i = 0; i < n; i++) x0[i] = (uint32_t)(i * 2654435761u) ^ 0x9e3779b9u;
    uint32_t *dx = NULL, *dout = NULL;
    CUCHECK(cudaMalloc(&dx, n * 4));
    CUCHECK(cudaMalloc(&dout, n * 4));
    CUCHECK(cudaMemcpy(dx, x0.data(), n * 4, cudaMemcpyHostToDevice));
    CUCHECK(cudaFuncSetAttribute(cl_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_max));
    CUCHECK(cudaFuncSetAttribute(cl_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    printf("lab_cluster: one cluster, %d threads a CTA, activation %d words, %d steps a launch\n", CL_THREADS, n,
           steps);
    struct variant { const char *name; int mode, wkb, ring; };
    const variant vs[] = {{"bar", CL_BAR, 0, 0},
                          {"reduce", CL_REDUCE, 0, 0},
                          {"exchange", CL_EXCHANGE, 0, 0},
                          {"exchange +w", CL_EXCHANGE, wkbs[0], 0},
                          {"exchange +w", CL_EXCHANGE, wkbs[1], 0},
                          {"push4", CL_PUSH4, 0, 0},
                          {"pull", CL_PULL, 0, 0},
                          {"bar +tma", CL_BAR, 44, 4},
                          {"exchange +tma", CL_EXCHANGE, 44, 4},
                          {"push4 +tma", CL_PUSH4, 44, 4},
                          {"pull +tma", CL_PULL, 44, 4},
                          {"pull +tma", CL_PULL, 24, 6},
                          {"pull +tma", CL_PULL, 72, 2}};
    for (int C : {2, 4, 8, 16}) {
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = C;
        at[0].val.clusterDim.y = 1;
        at[0].val.clusterDim.z = 1;
        cfg.gridDim = dim3(C);
        cfg.blockDim = dim3(CL_THREADS);
        cfg.dynamicSmemBytes = smem_max;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        int nclusters = 0;
        if (cudaOccupancyMaxActiveClusters(&nclusters, cl_kernel, &cfg) != cudaSuccess || nclusters < 1) {
            cudaGetLastError();
            printf("  cluster of %2d: not launchable here, skipped\n", C);
            continue;
        }
        if ((n / C) % 4) { /* push4 / pull move 16-byte pieces of the slices */
            printf("  cluster of %2d: slices of %d words are not whole 16-byte pieces, skipped\n", C, n / C);
            continue;
        }
        for (const variant &v : vs) {
            const int wper = v.wkb * 1024 / 16 / CL_THREADS;
            auto go = [&](int st) {
                CUCHECK(cudaLaunchKernelEx(&cfg, cl_kernel, (const uint32_t *)dx, dout, n,
                                           (const uint4 *)(v.ring ? wt : w), wper, st, v.mode, v.ring));
            };
            /* correctness: the reference after a launch of `steps` (reduce:
             * one step, the only one whose slices are all right) */
            const int cs = v.mode == CL_REDUCE ? 1 : steps;
            CUCHECK(cudaMemset(dout, 0xff, n * 4));
            go(cs);
            CUCHECK(cudaDeviceSynchronize());
            std::vector<uint32_t> got(n);
            CUCHECK(cudaMemcpy(got.data(), dout, n * 4, cudaMemcpyDeviceToHost));
            const std::vector<uint32_t> ref = cl_ref(x0, cs, v.mode);
            int bad = 0;
            for (int i = 0; i < n; i++) bad += got[i] != ref[i];
            printf("  cluster of %2d %-13s w=%2d KB R=%d: %d steps %s (%d of %d words differ)\n", C, v.name, v.wkb,
                   v.ring, cs, bad ? "FAIL" : "ok", bad, n);
            if (bad) lab_failures++;
            if (getenv("LAB_QUICK")) continue; /* the checks alone (compute-sanitizer) */
            /* a step's cost: (time of `steps` steps - time of none) / steps */
            const float t0 = lab_time_ms([&] { go(0); }, 30), t1 = lab_time_ms([&] { go(steps); }, 30);
            printf("  cluster of %2d %-13s w=%2d KB R=%d: %6.3f us a step (launch + set-up %6.2f us)\n", C, v.name,
                   v.wkb, v.ring, (t1 - t0) * 1e3f / steps, t0 * 1e3f);
        }
    }
    cudaFree(w); cudaFree(wt); cudaFree(dx); cudaFree(dout);
    return lab_finish("lab_cluster");
}

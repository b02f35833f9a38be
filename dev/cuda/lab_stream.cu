/* lab_stream: how fast a grid of blocks can pull weight slices from HBM
 * into shared memory, by the ways the one-query chain could ask for them.
 *
 * Why: a traced Qwen3-0.6B query (dev/cuda/NOTES.md, 2026-12-04) moves a
 * layer's 31.5 MB of weights in ~22 us, ~1.4 TB/s, and its down
 * projection's 96 KB slices land ~9 us after their blocks start, while
 * thread 0 of a block needs 1-3 us just to issue its 16-32 row copies.
 * Whether that is the chain's dependencies or the way the slices are
 * requested decides what to change, so this measures the requests alone,
 * with nothing to wait for: B blocks, each asking for S bytes of a fresh
 * (never cached) region, in rows of R bytes as the chain GEMM lays them
 * out (one row a weight column, 16 bytes of padding after each), by
 *   rows     one bulk copy (TMA) a row, all issued by thread 0 -- the
 *            chain GEMM's way (eng_cu_chain_gemm.cu);
 *   rows32   the same copies issued by warp 0's 32 lanes side by side;
 *   whole    the slice as one contiguous bulk copy (which W laid out in
 *            global memory as in shared memory, padding included,
 *            allows: eng_cu_gemm_chain's wp, the result of this lab);
 *   chunk16  the slice in bulk copies of 16 KB, from thread 0;
 *   cpasync  16-byte cp.async by every thread (POSY_CUDA_CHAIN_BULK=0).
 * Then a probe: 16 blocks re-reading 16 KB tiles from L2, quiet and beside
 * a stream launch -- how much the weight streams delay a small dependent
 * read (the traced attention node took ~3 us to bring in its tiles).
 * Each block stamps %globaltimer at its start, when its requests are all
 * issued and when its bytes have landed; a launch's rate is its bytes over
 * (last landing - first start).  The slices are folded into a checksum
 * that must agree across the ways (the check: every way lands every byte).
 *
 *     build-gpu/lab_stream          (LAB_QUICK=1: fewer repetitions)
 */
#include "lab.h"
#include "eng_cu_skinny.h" /* the chain kernel's bulk-copy helpers (sk3_bulk_*) */

#define ST_THREADS 256

enum { ST_ROWS = 0, ST_ROWS32, ST_WHOLE, ST_CHUNK16, ST_CPASYNC, ST_MODES };
static const char *st_names[ST_MODES] = {"rows", "rows32", "whole", "chunk16", "cpasync"};

static __device__ __forceinline__ unsigned long long st_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __device__ __forceinline__ void st_bulk(uint64_t *bar, void *dst, const void *src, int bytes) {
    sk3_bulk_row(bar, (bf16 *)dst, (const bf16 *)src, bytes);
}

/* One block: S bytes from src + blockIdx.x * S into shared memory, as
 * rows of R bytes (padded by 16 in shared memory) or contiguous (whole,
 * chunk16); stamps[3 * block + 0..2] = start, issued, landed; sink[block]
 * = the xor of every 16-byte word that landed. */
__global__ void __launch_bounds__(ST_THREADS) st_kernel(const unsigned char *src, int S, int R, int mode,
                                                        unsigned long long *stamps, unsigned *sink) {
    extern __shared__ __align__(128) unsigned char st_smem[];
    __shared__ uint64_t bar;
    __shared__ unsigned red[ST_THREADS / 32];
    const unsigned long long t0 = st_now();
    const unsigned char *g = src + (size_t)blockIdx.x * S;
    const bool padded = mode == ST_ROWS || mode == ST_ROWS32 || mode == ST_CPASYNC;
    const int rows = S / R, ld = padded ? R + 16 : R;
    if (mode != ST_CPASYNC) {
        if (threadIdx.x == 0) {
            sk3_bulk_init(&bar);
            sk3_bulk_arm(&bar, S);
        }
        if (mode == ST_ROWS32) __syncthreads(); /* the barrier armed before any lane's copy completes on it */
        if (mode == ST_ROWS && threadIdx.x == 0)
            for (int r = 0; r < rows; r++) st_bulk(&bar, st_smem + (size_t)r * ld, g + (size_t)r * R, R);
        else if (mode == ST_ROWS32 && threadIdx.x < 32)
            for (int r = threadIdx.x; r < rows; r += 32) st_bulk(&bar, st_smem + (size_t)r * ld, g + (size_t)r * R, R);
        else if (mode == ST_WHOLE && threadIdx.x == 0)
            st_bulk(&bar, st_smem, g, S);
        else if (mode == ST_CHUNK16 && threadIdx.x == 0)
            for (int o = 0; o < S; o += 16384) st_bulk(&bar, st_smem + o, g + o, min(16384, S - o));
    } else {
        const int cpr = R / 16;
        for (int c = threadIdx.x; c < rows * cpr; c += ST_THREADS) {
            const int r = c / cpr, cc = (c - r * cpr) * 16;
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(
                             (uint32_t)__cvta_generic_to_shared(st_smem + (size_t)r * ld + cc)),
                         "l"(g + (size_t)r * R + cc)
                         : "memory");
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");
    }
    const unsigned long long t1 = st_now();
    if (mode == ST_CPASYNC) {
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncthreads();
    } else {
        __syncthreads(); /* the barrier's init before anyone polls it */
        sk3_bulk_wait(&bar);
    }
    const unsigned long long t2 = st_now();
    unsigned x = 0;
    for (int c = threadIdx.x; c < S / 16; c += ST_THREADS) {
        const int r = c / (R / 16), cc = (c - r * (R / 16)) * 16;
        const uint4 v = *(const uint4 *)(st_smem + (size_t)r * ld + cc);
        x ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    for (int o = 16; o; o >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < ST_THREADS / 32; w++) x ^= red[w];
        sink[blockIdx.x] = x;
        stamps[3 * blockIdx.x] = t0;
        stamps[3 * blockIdx.x + 1] = t1; /* thread 0's last request issued */
        stamps[3 * blockIdx.x + 2] = t2;
    }
}


/* The probe: 16 blocks (the attention node's count) that each read a
 * 16 KB tile (an L2-resident buffer, as the attention node's Q / K / V
 * tiles are) again and again for `span` ns, stamping each read's start and
 * end: how long a small dependent read takes while a stream launch runs
 * beside it, against the same read on a quiet GPU. */
#define ST_PROBE_MAX 256
__global__ void __launch_bounds__(ST_THREADS) st_probe(const uint4 *tile, unsigned long long span,
                                                       unsigned long long *rec, unsigned *sink) {
    __shared__ unsigned red[ST_THREADS / 32];
    const uint4 *t = tile + (size_t)blockIdx.x * 1024; /* 16 KB a block */
    const unsigned long long t_end = st_now() + span;
    unsigned x = 0;
    for (int i = 0; i < ST_PROBE_MAX; i++) {
        __syncthreads();
        const unsigned long long a = st_now();
        if (a > t_end) {
            if (threadIdx.x == 0) rec[2 * (blockIdx.x * ST_PROBE_MAX + i)] = 0;
            break;
        }
        uint4 v[4];
#pragma unroll
        for (int j = 0; j < 4; j++) v[j] = __ldcg(t + j * ST_THREADS + threadIdx.x);
#pragma unroll
        for (int j = 0; j < 4; j++) x ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
        for (int o = 16; o; o >>= 1) x ^= __shfl_xor_sync(0xffffffffu, x, o);
        if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
        __syncthreads(); /* every warp's loads are back */
        if (threadIdx.x == 0) {
            rec[2 * (blockIdx.x * ST_PROBE_MAX + i)] = a;
            rec[2 * (blockIdx.x * ST_PROBE_MAX + i) + 1] = st_now();
            x ^= red[1];
        }
    }
    if (threadIdx.x == 0) sink[blockIdx.x] = x;
}

struct st_case {
    const char *what;
    int blocks, S, R;
};

static double st_median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

int main() {
    const bool quick = getenv("LAB_QUICK") != NULL;
    const int reps = quick ? 5 : 15;
    int dev = 0, sms = 0;
    CUCHECK(cudaGetDevice(&dev));
    CUCHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    /* the chain's Qwen3-0.6B / BERT-base slices at 16 tokens (blocks, bytes
     * a block, bytes a row), then one block an SM and two an SM */
    const st_case cases[] = {
        {"qwen3 qkv  (128 x 32 rows of 2 KB)", 128, 65536, 2048},
        {"qwen3 o    (64 x 16 rows of 4 KB)", 64, 65536, 4096},
        {"qwen3 g|u  (192 x 32 rows of 2 KB)", 192, 65536, 2048},
        {"qwen3 down (64 x 16 rows of 6 KB)", 64, 98304, 6144},
        {"bert down  (48 x 16 rows of 6 KB)", 48, 98304, 6144},
        {"1/SM x 192 KB, rows of 2 KB", sms, 196608, 2048},
        {"2/SM x 64 KB, rows of 2 KB", 2 * sms, 65536, 2048},
    };
    const int n_cases = (int)(sizeof cases / sizeof cases[0]);
    /* a region well past L2 (60 MB on the H200), walked so no launch reads
     * bytes an earlier one brought into L2 */
    const size_t region = (size_t)1 << 30;
    unsigned char *W = NULL;
    CUCHECK(cudaMalloc((void **)&W, region));
    {
        std::vector<uint32_t> h(region / 4);
        for (size_t i = 0; i < h.size(); i++) h[i] = (uint32_t)(i * 2654435761u) ^ 0x5bd1e995u;
        CUCHECK(cudaMemcpy(W, h.data(), region, cudaMemcpyHostToDevice));
    }
    unsigned long long *d_st = NULL;
    unsigned *d_sink = NULL;
    CUCHECK(cudaMalloc((void **)&d_st, 3 * 4 * (size_t)sms * sizeof(unsigned long long)));
    CUCHECK(cudaMalloc((void **)&d_sink, 4 * (size_t)sms * sizeof(unsigned)));
    CUCHECK(cudaFuncSetAttribute(st_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 210 * 1024));
    size_t off = 0;
    printf("lab_stream: %d SMs; per launch: GB/s = bytes / (last landing - first start); block medians in us\n", sms);
    printf("  %-38s %-8s %8s %8s %9s %9s %9s\n", "case", "way", "MB", "GB/s", "issue", "land", "last");
    for (int ci = 0; ci < n_cases; ci++) {
        const st_case &c = cases[ci];
        const size_t bytes = (size_t)c.blocks * c.S;
        std::vector<unsigned> ref;
        for (int mode = 0; mode < ST_MODES; mode++) {
            const bool padded = mode == ST_ROWS || mode == ST_ROWS32 || mode == ST_CPASYNC;
            const size_t smem = padded ? (size_t)(c.S / c.R) * (c.R + 16) : (size_t)c.S;
            std::vector<double> rate, issue, land, last;
            std::vector<unsigned> sink(c.blocks);
            for (int r = 0; r < reps; r++) {
                if (off + bytes > region) off = 0;
                /* the checksum's reference: the first repetition of each
                 * way reads the same bytes (offset 0 of a fresh walk) */
                const size_t o = r == 0 ? 0 : off;
                st_kernel<<<c.blocks, ST_THREADS, smem>>>(W + o, c.S, c.R, mode, d_st, d_sink);
                CUCHECK(cudaGetLastError());
                CUCHECK(cudaDeviceSynchronize());
                if (r) off += (bytes + 4095) / 4096 * 4096;
                std::vector<unsigned long long> h(3 * (size_t)c.blocks);
                CUCHECK(cudaMemcpy(h.data(), d_st, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost));
                if (r == 0) {
                    CUCHECK(cudaMemcpy(sink.data(), d_sink, sink.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
                    if (ref.empty()) ref = sink;
                    else if (sink != ref) {
                        printf("  FAIL: %s way %s landed other bytes than way rows\n", c.what, st_names[mode]);
                        lab_failures++;
                    }
                    continue; /* its bytes may sit in L2 from the previous way: not timed */
                }
                unsigned long long t0 = ~0ull, t2 = 0;
                std::vector<double> is, ld;
                for (int b = 0; b < c.blocks; b++) {
                    t0 = std::min(t0, h[3 * b]);
                    t2 = std::max(t2, h[3 * b + 2]);
                    is.push_back((h[3 * b + 1] - h[3 * b]) / 1e3);
                    ld.push_back((h[3 * b + 2] - h[3 * b]) / 1e3);
                }
                rate.push_back(bytes / (double)(t2 - t0)); /* bytes per ns = GB/s */
                issue.push_back(st_median(is));
                land.push_back(st_median(ld));
                last.push_back((t2 - t0) / 1e3);
            }
            printf("  %-38s %-8s %8.2f %8.0f %9.2f %9.2f %9.2f\n", c.what, st_names[mode], bytes / 1e6,
                   st_median(rate), st_median(issue), st_median(land), st_median(last));
        }
    }
    /* the probe: 16 blocks reading 16 KB tiles from L2, alone and beside
     * a stream launch of O + gate|up's size (256 blocks of 64 KB) */
    {
        uint4 *tile = NULL;
        unsigned long long *rec = NULL;
        unsigned *psink = NULL;
        const int PB = 16;
        CUCHECK(cudaMalloc((void **)&tile, (size_t)PB * 16384));
        CUCHECK(cudaMemset(tile, 1, (size_t)PB * 16384));
        CUCHECK(cudaMalloc((void **)&rec, 2 * sizeof(unsigned long long) * PB * ST_PROBE_MAX));
        CUCHECK(cudaMalloc((void **)&psink, PB * sizeof(unsigned)));
        cudaStream_t sa, sb;
        CUCHECK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
        CUCHECK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
        const int SB = 2 * sms - 2 * PB, SS = 65536, SR = 2048; /* leave the probe's SMs a slot */
        const size_t sbytes = (size_t)SB * SS;
        for (int with = 0; with < 2; with++) {
            std::vector<double> quiet, busy;
            for (int r = 0; r < reps; r++) {
                CUCHECK(cudaMemset(rec, 0, 2 * sizeof(unsigned long long) * PB * ST_PROBE_MAX));
                st_probe<<<PB, ST_THREADS, 0, sb>>>(tile, 40000ull, rec, psink);
                CUCHECK(cudaGetLastError());
                if (with) {
                    if (off + sbytes > region) off = 0;
                    st_kernel<<<SB, ST_THREADS, (SS / SR) * (SR + 16), sa>>>(W + off, SS, SR, ST_ROWS, d_st, d_sink);
                    CUCHECK(cudaGetLastError());
                    off += (sbytes + 4095) / 4096 * 4096;
                }
                CUCHECK(cudaDeviceSynchronize());
                std::vector<unsigned long long> h(2 * (size_t)PB * ST_PROBE_MAX), hs(3 * (size_t)SB);
                CUCHECK(cudaMemcpy(h.data(), rec, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost));
                unsigned long long s0 = ~0ull, s2 = 0;
                if (with) {
                    CUCHECK(cudaMemcpy(hs.data(), d_st, hs.size() * sizeof(hs[0]), cudaMemcpyDeviceToHost));
                    for (int b = 0; b < SB; b++) {
                        s0 = std::min(s0, hs[3 * b]);
                        s2 = std::max(s2, hs[3 * b + 2]);
                    }
                }
                for (int b = 0; b < PB; b++)
                    for (int i = 1; i < ST_PROBE_MAX; i++) { /* the first read of a block warms nothing: skipped */
                        const unsigned long long a = h[2 * (b * ST_PROBE_MAX + i)], e = h[2 * (b * ST_PROBE_MAX + i) + 1];
                        if (!a || !e) break;
                        const double us = (e - a) / 1e3;
                        if (with && a >= s0 && a <= s2) busy.push_back(us);
                        else if (!with) quiet.push_back(us);
                    }
            }
            if (!with)
                printf("  probe: 16 KB from L2 by 16 blocks, quiet GPU: median %.2f us (%zu reads)\n", st_median(quiet),
                       quiet.size());
            else
                printf("  probe: the same during a %d x 64 KB stream launch (rows): median %.2f us, p90 %.2f (%zu reads)\n",
                       SB, st_median(busy),
                       busy.empty() ? 0.0 : [&] { std::sort(busy.begin(), busy.end()); return busy[busy.size() * 9 / 10]; }(),
                       busy.size());
            if (with && busy.empty()) {
                printf("  FAIL: no probe read overlapped the stream launch\n");
                lab_failures++;
            }
        }
        CUCHECK(cudaStreamDestroy(sa));
        CUCHECK(cudaStreamDestroy(sb));
        CUCHECK(cudaFree(tile));
        CUCHECK(cudaFree(rec));
        CUCHECK(cudaFree(psink));
    }
    CUCHECK(cudaFree(W));
    CUCHECK(cudaFree(d_st));
    CUCHECK(cudaFree(d_sink));
    printf("lab_stream: %s (%d failures)\n", lab_failures ? "FAIL" : "ok", lab_failures);
    return lab_failures ? 1 : 0;
}

/* eng_cu_attn_win: variable-length attention with a sliding window, and at
 * head size 256 -- what Gemma 3 (EmbeddingGemma: d = 256, sliding layers of
 * |q - k| < 257) and ModernBERT (d = 64, local layers of |q - k| <= 64)
 * need beyond the tuned kernels of eng_cu_attn.cu / eng_cu_attn_wg.cu,
 * which know neither.  eng_cu_attention sends a call here when
 * a->window > 0 or head_dim == 256.
 *
 * Why a kernel of its own instead of a window argument in the tuned ones:
 * those share their softmax and tile loop with the one-query chain, whose
 * register counts decide its speed (dev/cuda/NOTES.md: a branch alone has
 * moved them); this one is written for correctness first, in the same
 * FlashAttention form: one block a (query tile of 64 rows, head), 4 warps
 * of 16 rows, key tiles of BN rows -- S = Q K^T by mma.sync with Q's
 * fragments read from shared memory at each k-step (at d = 256 they would
 * take 64 registers beside the 128 of the output accumulator), the window
 * masked on every element of a windowed tile, then the shared online
 * softmax (sequence end, causal diagonal) and O += P V of eng_cu_frag.h.
 * K/V tiles are double-buffered with cp.async.
 *
 * The window: a query q sees key k iff |q - k| < window (positions within
 * the sequence; the CPU engine's eng_cpu_attention_gqa convention).  A
 * tile walks only the keys some of its rows can see: from q0 - window + 1
 * to q_last + window - 1 (and the causal diagonal), so a long sequence
 * costs O(len x window), not O(len^2).
 *
 * Checked against the CPU engine's eng_cpu_attention_gqa_window_ref by
 * dev/cuda/lab_qwen3.cu (head sizes 32 to 256, windows that bind and that
 * do not, causal and not, GQA, 1..700 tokens).
 */
#include "eng_cu_attn_tiles.h"
#include "eng_cu_frag.h"

#define WIN_THREADS 128

template <int D>
struct win_shape {
    static constexpr int BN = D >= 256 ? 32 : 64; /* key rows a tile */
    static constexpr int LD = D + 8;
    static constexpr size_t smem = ((size_t)ENG_CU_ATTN_BM + 4 * (size_t)BN) * LD * sizeof(bf16);
};

template <int D, bool CAUSAL>
__global__ void __launch_bounds__(WIN_THREADS) attn_win_kernel(eng_cu_attn_args a) {
    constexpr int BM = ENG_CU_ATTN_BM, BN = win_shape<D>::BN, LD = win_shape<D>::LD;
    extern __shared__ __align__(16) unsigned char win_smem[];
    bf16 *const sQ = (bf16 *)win_smem, *const sK = sQ + BM * LD, *const sV = sK + 2 * BN * LD;

    const int tile = blockIdx.x, h = blockIdx.y;
    const bool live = tile < *a.n_tiles_dev;
    int seq = 0, q0 = 0;
    if (live) seq = a.tiles[2 * tile], q0 = a.tiles[2 * tile + 1];
    ENG_CU_PDL_WAIT();
    if (!live) return;
    const int start = a.cu_seqlens[seq], len = a.cu_seqlens[seq + 1] - start;
    const int qrows = min(BM, len - q0), qlast = q0 + qrows - 1;
    const int W = a.window;
    int klo = 0, khi = CAUSAL ? qlast + 1 : len;
    if (W > 0) {
        klo = max(0, q0 - W + 1);
        khi = min(khi, qlast + W);
    }
    const int ntiles = (khi - klo + BN - 1) / BN;
    const int kvh = h / (a.n_heads / a.n_kv_heads);
    const bf16 *kbase = a.k + (size_t)start * a.ldk + kvh * D;
    const bf16 *vbase = a.v + (size_t)start * a.ldv + kvh * D;

    eng_async_rows<BM, D, WIN_THREADS>(sQ, a.q + (size_t)(start + q0) * a.ldq + h * D, a.ldq, qrows);
    eng_async_rows<BN, D, WIN_THREADS>(sK, kbase + (size_t)klo * a.ldk, a.ldk, len - klo);
    eng_async_rows<BN, D, WIN_THREADS>(sV, vbase + (size_t)klo * a.ldv, a.ldv, len - klo);
    eng_async_commit();

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int mi = lane >> 3, mr = lane & 7;
    const bf16 *Qs = sQ + (warp * 16 + (mi & 1) * 8 + mr) * LD + (mi >> 1) * 8;
    const int wrow0 = q0 + warp * 16; /* this warp's first query row */
    float o[D / 8][4];
#pragma unroll
    for (int i = 0; i < D / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
    const float sl2 = a.scale * 1.4426950408889634f;

    for (int j = 0; j < ntiles; j++) {
        const int k0 = klo + j * BN, buf = j & 1;
        if (j + 1 < ntiles) { /* the next tile streams in while this one is computed */
            const int k1 = k0 + BN, nb = buf ^ 1;
            eng_async_rows<BN, D, WIN_THREADS>(sK + nb * BN * LD, kbase + (size_t)k1 * a.ldk, a.ldk, len - k1);
            eng_async_rows<BN, D, WIN_THREADS>(sV + nb * BN * LD, vbase + (size_t)k1 * a.ldv, a.ldv, len - k1);
            eng_async_commit();
            eng_async_wait<1>();
        } else {
            eng_async_wait<0>();
        }
        __syncthreads();
        const bf16 *K = sK + buf * BN * LD, *V = sV + buf * BN * LD;
        float sc[BN / 8][4];
        eng_attn_qk<D, BN, true>(nullptr, K, sc, Qs);
        if (W > 0) /* the window; the sequence end and the causal diagonal are the softmax's */
#pragma unroll
            for (int nt = 0; nt < BN / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int key = k0 + nt * 8 + 2 * t + (e & 1), q = wrow0 + g + 8 * (e >> 1);
                    if ((key > q ? key - q : q - key) >= W) sc[nt][e] = -INFINITY;
                }
        eng_attn_softmax<D, BN, CAUSAL>(sc, k0, len, wrow0, sl2, o, m, l);
        eng_attn_pv<D, BN>(sc, V, o);
        __syncthreads(); /* buffer `buf` is refilled two tiles on */
    }
    eng_attn_store<D>(o, l, qrows, a.o + (size_t)(start + q0) * a.ldo + h * D, a.ldo);
}

template <int D, bool CAUSAL>
static cudaError_t win_launch(cudaStream_t s, const eng_cu_attn_args *a) {
    static bool set = false;
    constexpr size_t smem = win_shape<D>::smem;
    cudaError_t e = attn_smem_optin<smem>(attn_win_kernel<D, CAUSAL>, set);
    if (e != cudaSuccess) return e;
    e = eng_cu_launch(attn_win_kernel<D, CAUSAL>, dim3((unsigned)a->max_tiles, (unsigned)a->n_heads),
                      dim3(WIN_THREADS), smem, s, *a);
    return e != cudaSuccess ? e : cudaGetLastError();
}

template <int D>
static cudaError_t win_launch_d(cudaStream_t s, const eng_cu_attn_args *a) {
    return a->causal ? win_launch<D, true>(s, a) : win_launch<D, false>(s, a);
}

cudaError_t eng_cu_attention_win(cudaStream_t s, const eng_cu_attn_args *a) {
    if (a->max_tiles <= 0 || a->n_heads <= 0 || a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads ||
        a->window < 0 || a->q_norm || a->k_norm || a->rope_only || a->rel)
        return cudaErrorInvalidValue; /* the q/k norm, the rotary and MPNet's bias are not fused here */
    switch (a->head_dim) {
    case 32: return win_launch_d<32>(s, a);
    case 64: return win_launch_d<64>(s, a);
    case 128: return win_launch_d<128>(s, a);
    case 256: return win_launch_d<256>(s, a);
    default: return cudaErrorInvalidValue;
    }
}

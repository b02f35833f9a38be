/* eng_cu_attn_tiles.h: the attention tile list (eng_cu_attn_tiles.c),
 * C-callable, no CUDA types. */
#ifndef ENG_CU_ATTN_TILES_H
#define ENG_CU_ATTN_TILES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Query tiles of ENG_CU_ATTN_BM rows: a tile is (sequence, first row). */
#define ENG_CU_ATTN_BM 64

/* Write the tile list for cu_seqlens[0..n_seqs] into tiles (pairs), in
 * sequence order; returns the tile count.  tiles must hold
 * 2 * eng_cu_attn_max_tiles(..). */
int eng_cu_attn_tiles(const int32_t *cu_seqlens, int n_seqs, int32_t *tiles);
/* The same list ordered by cost, heaviest first (the key tiles each walks;
 * causal: tiles late in a sequence cost more), for the attention kernels
 * that walk a capped grid or take work from a counter: the engine's
 * default unless POSY_CUDA_ATTN_ORDER=0.  Stable within one cost. */
int eng_cu_attn_tiles_heavy_first(const int32_t *cu_seqlens, int n_seqs, int causal, int32_t *tiles);
/* Upper bound of the tile count for any batch of <= tokens, <= seqs. */
int eng_cu_attn_max_tiles(int tokens, int seqs);

#ifdef __cplusplus
}
#endif
#endif

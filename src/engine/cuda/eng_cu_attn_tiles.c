/* eng_cu_attn_tiles: the list of query tiles a step's attention walks,
 * built on the host while the GPU runs the previous step, in plain C (no
 * CUDA types) so that every build unit-tests it
 * (tests/unit/test_cu_attn_tiles.c).
 *
 * A tile is ENG_CU_ATTN_BM query rows of one sequence: the pair (sequence,
 * first row).  Every attention kernel takes the tiles in any order: each
 * writes only its own rows.
 */
#include "eng_cu_attn_tiles.h"

int eng_cu_attn_tiles(const int32_t *cu, int n_seqs, int32_t *tiles) {
    int n = 0;
    for (int s = 0; s < n_seqs; s++)
        for (int q0 = 0; q0 < cu[s + 1] - cu[s]; q0 += ENG_CU_ATTN_BM) {
            tiles[2 * n] = s;
            tiles[2 * n + 1] = q0;
            n++;
        }
    return n;
}

/* The same tiles, heaviest first: a tile's cost is the key tiles it walks
 * (bidirectional: ceil(len / 64) for every tile of a sequence; causal:
 * q0 / 64 + 1).  Blocks are dispatched about in grid order, and a capped
 * grid walks tiles x, x + gridDim.x, ...; either way the tiles started
 * last are then the cheapest, so no SM is left with a heavy tile after
 * the others have run dry (longest processing time first).  A counting
 * sort, stable within one cost: O(tiles), no allocation; costs above
 * ATTN_COST_MAX (sequences past 32768 tokens) share the top class.
 * H200, 2026-12-03 runs 4-5 (lab_attn, the bench's bound): random 16..512
 * at d = 64 with the capped grid 348.9 -> 333.0 us, and the dynamic
 * schedule needs it (eng_cu_attn_wg.cu); but the uncapped one-stage grid
 * at d = 128 lost on causal 128-token sequences, 378 -> 417 us -- a guess:
 * a sequence's two tiles, which read the same K / V, no longer run side by
 * side.  That grid is no longer the default there. */
#define ATTN_COST_MAX 512
static int attn_tile_cost(int len, int q0, int causal) {
    const int c = causal ? q0 / ENG_CU_ATTN_BM + 1 : (len + ENG_CU_ATTN_BM - 1) / ENG_CU_ATTN_BM;
    return c < ATTN_COST_MAX ? c : ATTN_COST_MAX;
}

int eng_cu_attn_tiles_heavy_first(const int32_t *cu, int n_seqs, int causal, int32_t *tiles) {
    int at[ATTN_COST_MAX + 1] = {0}; /* tiles of each cost, then where the next one goes */
    for (int s = 0; s < n_seqs; s++)
        for (int q0 = 0, len = cu[s + 1] - cu[s]; q0 < len; q0 += ENG_CU_ATTN_BM) at[attn_tile_cost(len, q0, causal)]++;
    int n = 0;
    for (int c = ATTN_COST_MAX; c >= 1; c--) {
        const int k = at[c];
        at[c] = n;
        n += k;
    }
    for (int s = 0; s < n_seqs; s++)
        for (int q0 = 0, len = cu[s + 1] - cu[s]; q0 < len; q0 += ENG_CU_ATTN_BM) {
            const int i = at[attn_tile_cost(len, q0, causal)]++;
            tiles[2 * i] = s;
            tiles[2 * i + 1] = q0;
        }
    return n;
}

int eng_cu_attn_max_tiles(int tokens, int seqs) {
    /* sum over sequences of ceil(len/BM) <= tokens/BM + seqs */
    if (seqs > tokens) seqs = tokens;
    return tokens / ENG_CU_ATTN_BM + seqs;
}

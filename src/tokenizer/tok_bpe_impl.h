/* tok_bpe_impl: the BPE model's data, shared by tok_bpe.c (encoding) and
 * tok_bpe_load.c (reading vocab and merges). */
#ifndef TOK_BPE_IMPL_H
#define TOK_BPE_IMPL_H

#include "tok_internal.h"

/* One merge: key (left id << 32 | right id, UINT64_MAX when empty), rank
 * and merged id side by side, so a probe touches one cache line. */
typedef struct { uint64_t key; int32_t rank, newid; } tok_bpe_slot;

typedef struct tok_bpe_model {
    tok_bpe_slot *slots;
    uint32_t mask;
    char *prefix; size_t prefix_len;   /* continuing_subword_prefix */
    char *suffix; size_t suffix_len;   /* end_of_word_suffix */
    int fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_ids[256];   /* id of "<0xXX>" or -1 */
    int32_t small_ids[512];  /* id of the one-char token U+0000..U+01FF (ByteLevel's alphabet), or -1 */
} tok_bpe_model;

int tok_bpe_merge_find(const tok_bpe_model *bm, int32_t a, int32_t b, int32_t *rank, int32_t *id);
int tok_bpe_merge_add(tok_bpe_model *bm, int32_t a, int32_t b, int32_t rank, int32_t id);

#endif

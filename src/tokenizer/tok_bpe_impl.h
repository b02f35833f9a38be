/* tok_bpe_impl: the BPE model's data, shared by tok_bpe.c (encoding) and
 * tok_bpe_load.c (reading vocab and merges). */
#ifndef TOK_BPE_IMPL_H
#define TOK_BPE_IMPL_H

#include "tok_internal.h"

typedef struct tok_bpe_model {
    uint64_t *keys;          /* (left id << 32 | right id), UINT64_MAX empty */
    int32_t *rank, *newid;
    uint32_t mask;
    char *prefix; size_t prefix_len;   /* continuing_subword_prefix */
    char *suffix; size_t suffix_len;   /* end_of_word_suffix */
    int fuse_unk, byte_fallback, ignore_merges;
    int32_t byte_ids[256];   /* id of "<0xXX>" or -1 */
} tok_bpe_model;

int tok_bpe_merge_find(const tok_bpe_model *bm, int32_t a, int32_t b, int32_t *rank, int32_t *id);
int tok_bpe_merge_add(tok_bpe_model *bm, int32_t a, int32_t b, int32_t rank, int32_t id);

#endif

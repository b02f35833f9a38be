/* posy_chunk: opt-in chunked processing of over-long inputs (what vLLM
 * calls chunked processing): instead of truncating a sequence longer than
 * the model's max_seq_len, split it into windows that fit, embed each
 * window as its own sequence, and combine the window embeddings into one.
 *
 * Windows keep the encoding's special tokens: an input encoded as
 *   P (n_prefix leading specials, e.g. [CLS]) + content + S (n_suffix
 *   trailing specials, e.g. [SEP] or <|endoftext|>)
 * becomes k windows P + content[i*W : (i+1)*W] + S with W = max_len -
 * n_prefix - n_suffix, so each window looks like an ordinary input to the
 * model.  The combined embedding is the mean of the window embeddings
 * weighted by each window's token count (specials included), then
 * L2-normalised when the model normalises:
 *   e = sum_w len_w * e_w / sum_w len_w ;  e /= ||e||  (if normalize)
 * The window embeddings are whatever the engine returns (already
 * normalised if the model has a Normalize module).  An input that fits
 * gives one window equal to itself, so the result equals the plain
 * embedding.  Pure functions over caller buffers, no engine dependency:
 * the CLI and the gateway call them around their engine batches.
 */
#ifndef POSY_CHUNK_H
#define POSY_CHUNK_H

#include <stddef.h>
#include <stdint.h>

/* Leading and trailing special tokens of one encoding (special_mask[i] !=
 * 0 marks a special token; NULL means none).  A mask that is all special
 * counts every token as prefix. */
void posy_chunk_specials(const uint8_t *special_mask, int n, int *n_prefix, int *n_suffix);

/* Windows needed for n tokens; -1 if max_len cannot hold the specials and
 * at least one content token (max_len <= n_prefix + n_suffix) or n <
 * n_prefix + n_suffix. */
int posy_chunk_count(int n, int n_prefix, int n_suffix, int max_len);

/* Write the windows' ids back to back into out_ids (room for out_cap ids)
 * and their boundaries into cu[0..k] (cu[0] = 0, room for cu_cap entries),
 * packed-batch style.  Returns k, or -1 (bad sizes, or a buffer too small;
 * posy_chunk_total_tokens says how many ids are needed). */
int posy_chunk_split(const int32_t *ids, int n, int n_prefix, int n_suffix, int max_len, int32_t *out_ids,
                     size_t out_cap, int32_t *cu, int cu_cap);
/* Ids the k windows hold in all: n + (k - 1) * (n_prefix + n_suffix). */
size_t posy_chunk_total_tokens(int n, int n_prefix, int n_suffix, int max_len);

/* out[0..dim) = token-count weighted mean of the k window embeddings
 * emb[w*dim ..] (window w has cu[w+1] - cu[w] tokens), L2-normalised if
 * normalize (sum of squares in double; an all-zero mean stays zero). */
void posy_chunk_combine(const float *emb, const int32_t *cu, int k, int dim, int normalize, float *out);

#endif

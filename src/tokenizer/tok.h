/* tok: the public tokenizer API.  Reads a Hugging Face tokenizer.json and
 * reproduces the Python `tokenizers` library to the id.
 *
 * A tok_tokenizer is immutable after tok_load_*: any number of threads may
 * call tok_encode on the same one at once; all per-call state lives in the
 * caller's tok_encoding (and stack/scratch owned by it).
 *
 * The pipeline mirrors tokenizers': added/special tokens are split out
 * first, then normalizer -> pre-tokenizer -> model (WordPiece today; BPE
 * and Unigram slot in as further models) -> post-processor (special tokens,
 * type ids) -> truncation.  Offsets are byte spans into the caller's
 * original text, so every stage keeps an alignment to the input.
 */
#ifndef TOK_H
#define TOK_H

#include <stddef.h>
#include <stdint.h>
#include "posy_err.h"

typedef struct tok_tokenizer tok_tokenizer;

typedef struct tok_encoding {
    int32_t *ids;
    int32_t *type_ids;
    uint8_t *special_mask;   /* 1 for tokens added by the post-processor or special added tokens */
    int32_t *offsets;        /* 2 per token: [start, end) byte offsets into the input text */
    int n;                   /* number of tokens */
    int cap;                 /* allocated capacity (tokens) */
    int b_start;             /* pairs: index of the first token of sequence B (n if none) */
    void *scratch;           /* reusable per-encoding work buffers, owned */
} tok_encoding;

typedef enum { TOK_TRUNC_RIGHT = 0, TOK_TRUNC_LEFT = 1 } tok_trunc_dir;

typedef struct tok_opts {
    int add_special;         /* apply the post-processor ([CLS] ... [SEP]) */
    int max_len;             /* truncate to this many tokens incl. specials; 0 = no limit */
    tok_trunc_dir trunc_dir;
} tok_opts;

/* Load from a file or from JSON text.  NULL on error, with `err` naming the
 * file and the field at fault. */
tok_tokenizer *tok_load_file(const char *path, posy_err *err);
tok_tokenizer *tok_load_json(const char *json, size_t len, posy_err *err);
void tok_free(tok_tokenizer *t);

/* Encode `len` bytes of UTF-8.  Invalid UTF-8 is an error (POSY_E_INVALID),
 * never a crash.  Returns 0 or a posy_status.  `out` may be reused across
 * calls (initialise with {0}); free with tok_encoding_free. */
int tok_encode(const tok_tokenizer *t, const char *text, size_t len, const tok_opts *opts,
               tok_encoding *out, posy_err *err);
void tok_encoding_free(tok_encoding *e);

/* sentence-transformers' do_lower_case: the text lowercased character by
 * character as its Lowercase normalizer does (tok_lowercase.c says where
 * that differs from Python's str.lower()).  *out is malloc'd and
 * NUL-terminated; returns 0 or a posy_status. */
int tok_lowercase_text(const char *s, size_t len, char **out, size_t *out_len, posy_err *err);

/* The number of leading tokens `prompt` contributes to prompt + text, as
 * sentence-transformers' prompt_length (tok_prompt.c): the prompt encoded
 * alone (lowercased first when `lower`), less a trailing special token.
 * `scratch` is overwritten.  Returns 0 or a posy_status. */
int tok_prompt_length(const tok_tokenizer *t, const char *prompt, size_t len, int lower, tok_encoding *scratch,
                      int *n, posy_err *err);

/* Encode a pair (e.g. query, passage for a reranker): both sequences go
 * through the pipeline, then the post-processor's pair template and
 * LongestFirst truncation.  b == NULL encodes a single sequence. */
int tok_encode_pair(const tok_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                    const tok_opts *opts, tok_encoding *out, posy_err *err);

/* Encode texts[0..n) (and pairs with texts_b[i] when texts_b != NULL) into
 * out[0..n) on up to n_threads threads (0: one per online core).  Small
 * batches run on the calling thread.  Each out[i] is reused like tok_encode's
 * (initialise with {0}).  Returns 0 when every text encoded; otherwise the
 * first failing text's status, with its index in *failed (if not NULL) and
 * its message in err; the other texts are still encoded. */
int tok_encode_batch(const tok_tokenizer *t, const char *const *texts, const size_t *lens,
                     const char *const *texts_b, const size_t *lens_b, int n, const tok_opts *opts,
                     tok_encoding *out, int n_threads, int *failed, posy_err *err);

/* Convert the byte offsets of `e` into character (code point) offsets into
 * `text`, exactly as the Python tokenizers package reports them.  `text`
 * must be the string that was encoded (valid UTF-8).  For pairs, call with
 * the matching text for each token range ([from, to) tokens).  Returns 0
 * or POSY_E_NOMEM. */
int tok_offsets_to_chars(const char *text, size_t len, tok_encoding *e, int from, int to);

/* Decode ids back to text through the file's decoder (HF's
 * Tokenizer.decode): unknown ids are dropped, special tokens too when
 * skip_special.  *text is malloc'd and NUL-terminated (free() it); *len
 * (if not NULL) gets its length. */
int tok_decode(const tok_tokenizer *t, const int32_t *ids, int n, int skip_special, char **text, size_t *len,
               posy_err *err);

/* Vocabulary. */
int tok_vocab_size(const tok_tokenizer *t);
/* Token string for an id (NULL if out of range).  Valid while t lives. */
const char *tok_id_to_token(const tok_tokenizer *t, int32_t id);
/* Id for a token string, or -1. */
int32_t tok_token_to_id(const tok_tokenizer *t, const char *token);
/* Number of special tokens the post-processor adds to a single sequence
 * (2 for BERT: [CLS] and [SEP]). */
int tok_num_special_single(const tok_tokenizer *t);
/* The model type as named in tokenizer.json: "WordPiece", "BPE", "Unigram". */
const char *tok_model_type(const tok_tokenizer *t);

#endif

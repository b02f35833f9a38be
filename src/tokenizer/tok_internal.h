/* tok_internal: the tokenizer's internal types, shared by its files.
 *
 * The pipeline works on "aligned buffers" (tok_buf): UTF-8 bytes plus, for
 * every byte, the span [s, e) of the ORIGINAL input bytes it came from.
 * This is the same bookkeeping as Hugging Face's NormalizedString (one
 * alignment per normalized byte, every byte of a char carrying the char's
 * span), kept absolute to the caller's text so that a token's offsets are
 * simply (al[first].s, al[last].e) however many stages transformed it.
 *
 * Stages never allocate per token: every buffer is a growable array owned
 * by the caller's tok_encoding scratch and reused across calls.  The
 * tokenizer itself (tok_tokenizer) is immutable after loading, which is
 * what makes concurrent tok_encode calls safe.
 */
#ifndef TOK_INTERNAL_H
#define TOK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include "tok.h"

/* ---- unicode (tok_unicode.c) -------------------------------------------- */
typedef struct { uint32_t lo, hi; } tok_range;
typedef struct { uint32_t cp; const char *s; } tok_cpmap;

/* Decode one UTF-8 char from s[0..len); returns its length (1-4) or 0 if the
 * bytes are not valid UTF-8 (overlong, surrogate, > U+10FFFF, truncated). */
int tok_utf8_decode(const uint8_t *s, size_t len, uint32_t *cp);
int tok_utf8_encode(uint32_t cp, char out[4]);
/* Length of the valid UTF-8 prefix; == len when all is valid. */
size_t tok_utf8_valid_prefix(const char *s, size_t len);
/* Decode a char known to be valid (inside an already validated buffer). */
static inline int tok_utf8_next(const char *s, uint32_t *cp) {
    const uint8_t *u = (const uint8_t *)s;
    if (u[0] < 0x80) { *cp = u[0]; return 1; }
    if (u[0] < 0xE0) { *cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3F); return 2; }
    if (u[0] < 0xF0) { *cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3F); return 3; }
    *cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) | ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3F);
    return 4;
}
static inline int tok_utf8_len(uint8_t lead) {
    return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}
int tok_is_bert_punct(uint32_t cp);   /* ASCII punctuation or Unicode P* (HF tables) */
int tok_is_whitespace(uint32_t cp);   /* Rust char::is_whitespace */
int tok_is_bert_control(uint32_t cp); /* removed by BertNormalizer clean_text */
int tok_is_nonspacing_mark(uint32_t cp); /* BertNormalizer strip_accents */
int tok_is_combining_mark(uint32_t cp);   /* the StripAccents normalizer (any mark) */
int tok_is_new_mark(uint32_t cp);
int tok_is_numeric(uint32_t cp);          /* Rust char::is_numeric (Digits pre-tokenizer) */         /* a mark newer than utf8proc's Unicode */
int tok_is_chinese(uint32_t cp);
int tok_is_alnum(uint32_t cp);
/* utf8proc gives a combining class but the reference treats it as 0 */
int tok_is_ccc_zero(uint32_t cp);        /* Rust char::is_alphanumeric (approx. L* N*) */
/* Full lowercase of cp into out (up to 3 code points); returns the count. */
int tok_lower(uint32_t cp, uint32_t out[3]);
/* Canonical (compat = 0) or compatibility decomposition; returns the count
 * written (<= cap, at most 18 for any code point). */
int tok_decompose(uint32_t cp, int compat, uint32_t *out, int cap);

/* ---- growable arrays ---------------------------------------------------- */
typedef struct { uint32_t s, e; } tok_span;

/* UTF-8 bytes with one original span per byte. */
typedef struct { char *b; tok_span *al; size_t len, cap; } tok_buf;
/* A piece of a tok_buf: [off, off+len). */
typedef struct { uint32_t off, len; } tok_piece;
typedef struct { tok_piece *p; size_t n, cap; } tok_pieces;
/* A token produced by a model or an added-token match. */
typedef struct {
    int32_t id; uint32_t s, e;
    /* added tokens only: whitespace chars at the ends of the matched text
     * (HF's token value includes what lstrip/rstrip absorbed); trim_offsets
     * reads these instead of the vocab string. 0xFFFF: a model token */
    uint16_t lead, trail;
} tok_tok;
typedef struct { tok_tok *t; size_t n, cap; } tok_toks;

int tok_buf_reserve(tok_buf *b, size_t n);
void tok_buf_free(tok_buf *b);

/* A growable NUL-terminated string (decoder output, regex rewriting):
 * appends never fail loudly -- an allocation failure sets oom and later
 * appends do nothing, so a caller checks once at the end.  Zero-init. */
typedef struct { char *p; size_t n, cap; int oom; } tok_sbuf;
void tok_sbuf_put(tok_sbuf *b, const char *s, size_t n);
void tok_sbuf_puts(tok_sbuf *b, const char *s);
/* Append the UTF-8 of cp with span sp on every byte.  Caller reserved room. */
static inline void tok_buf_put(tok_buf *b, uint32_t cp, tok_span sp) {
    char tmp[4];
    int n = tok_utf8_encode(cp, tmp);
    for (int i = 0; i < n; i++) { b->b[b->len] = tmp[i]; b->al[b->len++] = sp; }
}
int tok_pieces_push(tok_pieces *p, uint32_t off, uint32_t len);
int tok_toks_push(tok_toks *t, int32_t id, uint32_t s, uint32_t e);
/* Push an added token whose matched text is m[0..n). */
int tok_toks_push_added(tok_toks *t, int32_t id, uint32_t s, uint32_t e, const char *m, size_t n);
/* Generic growable scratch bytes (model work areas). */
typedef struct { void *p; size_t cap; } tok_mem;
void *tok_mem_get(tok_mem *m, size_t bytes);

/* ---- vocabulary (tok_vocab.c) ------------------------------------------- */
typedef struct {
    char *pool;            /* all token strings, NUL-terminated, back to back */
    size_t pool_len, pool_cap;
    uint32_t *str_off;     /* per id: offset into pool, UINT32_MAX if no token */
    uint32_t *str_len;
    int32_t n_ids;         /* ids are 0..n_ids-1 */
    int32_t *slots;        /* open addressing, -1 empty */
    uint32_t *slot_hash;
    uint32_t mask;
    uint32_t max_len;      /* longest token in bytes */
    uint32_t count;        /* entries in the map */
    int last_wins;         /* a repeated string maps to its last id (HF Unigram) */
} tok_vocab;

int tok_vocab_init(tok_vocab *v, int32_t n_ids, size_t n_tokens);
void tok_vocab_free(tok_vocab *v);
/* Set id -> token and token -> id.  Returns 0, or -1 (no memory / id out of
 * range), or 1 if the token string was already present (first id kept). */
int tok_vocab_add(tok_vocab *v, int32_t id, const char *s, size_t len);
/* Look up the concatenation a+b (a may be NULL). */
int32_t tok_vocab_find2(const tok_vocab *v, const char *a, size_t alen, const char *b, size_t blen);
static inline int32_t tok_vocab_find(const tok_vocab *v, const char *s, size_t len) {
    return tok_vocab_find2(v, NULL, 0, s, len);
}
static inline const char *tok_vocab_str(const tok_vocab *v, int32_t id, uint32_t *len) {
    if (id < 0 || id >= v->n_ids || v->str_off[id] == UINT32_MAX) return NULL;
    if (len) *len = v->str_len[id];
    return v->pool + v->str_off[id];
}

/* ---- normalizers (tok_normalizer.c) ------------------------------------- */
typedef enum {
    TOK_N_BERT, TOK_N_NFD, TOK_N_NFKD, TOK_N_NFC, TOK_N_NFKC, TOK_N_LOWERCASE,
    TOK_N_STRIP, TOK_N_STRIP_ACCENTS, TOK_N_REPLACE, TOK_N_PREPEND, TOK_N_PRECOMPILED,
    TOK_N_SEQUENCE,
} tok_norm_type;

typedef struct tok_normalizer {
    tok_norm_type type;
    /* Bert */
    int clean_text, chinese, strip_accents, lowercase;
    /* Strip */
    int left, right;
    /* Replace (string pattern or regex), Prepend */
    char *pattern; size_t pattern_len; void *regex; /* pcre2_code* when regex */
    char *content; size_t content_len;
    /* Precompiled */
    void *charsmap;
    /* Sequence */
    struct tok_normalizer *items; int n_items;
} tok_normalizer;

/* Scratch for normalizers: a second buffer to write into. */
typedef struct { tok_buf tmp; tok_mem cps; tok_mem match; } tok_norm_scratch;
int tok_norm_apply(const tok_normalizer *n, tok_buf *b, tok_norm_scratch *s);
void tok_norm_free(tok_normalizer *n);

/* ---- pre-tokenizers (tok_pretok.c) -------------------------------------- */
typedef enum {
    TOK_P_BERT, TOK_P_WHITESPACE, TOK_P_WHITESPACE_SPLIT, TOK_P_METASPACE, TOK_P_BYTELEVEL,
    TOK_P_SPLIT, TOK_P_PUNCTUATION, TOK_P_DIGITS, TOK_P_SEQUENCE,
} tok_pre_type;

typedef enum {
    TOK_SPLIT_REMOVED, TOK_SPLIT_ISOLATED, TOK_SPLIT_MERGED_PREV, TOK_SPLIT_MERGED_NEXT,
    TOK_SPLIT_CONTIGUOUS,
} tok_split_behavior;

typedef struct tok_pretok {
    tok_pre_type type;
    tok_split_behavior behavior;
    int invert;
    void *regex;            /* pcre2_code*, JIT-compiled */
    char *pattern; size_t pattern_len; /* literal pattern when not a regex */
    int add_prefix_space, use_regex, trim_offsets;
    uint32_t replacement;   /* Metaspace */
    int prepend_scheme;     /* 0 always, 1 first, 2 never */
    int split;              /* Metaspace split */
    int individual_digits;
    struct tok_pretok *items; int n_items;
} tok_pretok;

typedef struct {
    tok_buf buf[3];
    tok_pieces pcs[2];
    tok_mem match;          /* pcre2 match data, per encoding */
    tok_mem marks;
} tok_pre_scratch;

/* The current pieces and the buffer they point into. */
typedef struct { const tok_buf *buf; tok_pieces *pcs; uint32_t seg_start; } tok_pre_state;
/* Run pre-tokenizer p over st (initially the whole normalized segment as one
 * piece in ps->pcs[0]).  `first`: the segment starts the input (Metaspace
 * prepend_scheme "first"). */
int tok_pre_stage(const tok_pretok *p, tok_pre_state *st, int first, tok_pre_scratch *ps);
void tok_pre_free(tok_pretok *p);

/* ---- models ------------------------------------------------------------- */
typedef enum { TOK_M_WORDPIECE, TOK_M_BPE, TOK_M_UNIGRAM, TOK_M_WORDLEVEL } tok_model_kind;

typedef struct tok_model {
    tok_model_kind kind;
    tok_vocab vocab;
    int32_t unk_id;         /* -1 when none */
    /* WordPiece */
    char *prefix; size_t prefix_len;       /* continuing_subword_prefix */
    int max_input_chars;
    /* BPE */
    void *bpe;              /* tok_bpe_model* */
    /* Unigram */
    void *uni;              /* tok_uni_model* */
} tok_model;

typedef struct tok_cache tok_cache;
typedef struct { tok_mem a, b, c, d; tok_cache *cache; } tok_model_scratch;

/* Tokenize one pre-token (bytes b->b[off..off+len)) appending to `out`
 * with offsets RELATIVE to the piece's bytes; the caller maps them to the
 * original text (and caches the result, see tok_cache.c). */
int tok_wordpiece_encode(const tok_model *m, const tok_buf *b, uint32_t off, uint32_t len,
                         tok_toks *out, tok_model_scratch *ms);

int tok_wordlevel_encode(const tok_model *m, const tok_buf *b, uint32_t off, uint32_t len,
                         tok_toks *out, tok_model_scratch *ms);
int tok_bpe_encode(const tok_model *m, const tok_buf *b, uint32_t off, uint32_t len,
                   tok_toks *out, tok_model_scratch *ms);
int tok_unigram_encode(const tok_model *m, const tok_buf *b, uint32_t off, uint32_t len,
                       tok_toks *out, tok_model_scratch *ms);

int tok_cache_get(tok_model_scratch *ms, const char *p, uint32_t n, tok_toks *out, uint32_t *hash);
void tok_cache_put(tok_model_scratch *ms, const char *p, uint32_t n, uint32_t hash, const tok_toks *out,
                   size_t first);
void tok_cache_free(tok_cache *c);

/* ---- added tokens (tok_added.c) ----------------------------------------- */
typedef struct {
    char *content; size_t len;      /* matched, and reported (normalized for added_norm, as HF) */
    char *orig; size_t orig_len;    /* as written in the file */
    int32_t id;
    int special, normalized, lstrip, rstrip, single_word;
} tok_added_token;

typedef struct {
    tok_added_token *tok; int n;
    /* per first byte: indices into tok sorted by length, longest first */
    int32_t *by_byte; int32_t byte_start[257];
    int any;
} tok_added_set;

typedef struct { int32_t id; uint32_t s, e; } tok_seg;   /* id -1: text */
typedef struct { tok_seg *s; size_t n, cap; } tok_segs;

/* Split text[0..len) at the matches of the set into segments. */
int tok_added_split(const tok_added_set *set, const char *text, size_t len, tok_segs *out);
int tok_added_build(tok_added_set *set, posy_err *err);
void tok_added_free(tok_added_set *set);

/* ---- post-processing (tok_post.c) --------------------------------------- */
typedef enum { TOK_POST_NONE, TOK_POST_TEMPLATE, TOK_POST_BERT, TOK_POST_ROBERTA,
               TOK_POST_BYTELEVEL, TOK_POST_SEQUENCE } tok_post_type;

typedef struct {
    int seq;                /* 0 special, 1 sequence A, 2 sequence B */
    int type_id;
    int32_t *ids; int n_ids; /* special token ids */
} tok_tpl_item;

typedef struct tok_post {
    tok_post_type type;
    tok_tpl_item *single; int n_single;
    tok_tpl_item *pair; int n_pair;
    int trim_offsets, add_prefix_space;
    struct tok_post *items; int n_items;
} tok_post;

int tok_post_added(const tok_post *p, int pair);
/* ByteLevel / RobertaProcessing trim_offsets over the model tokens. */
int tok_post_trim_offsets(const struct tok_tokenizer *t, tok_toks *a, tok_toks *b, const char *ta, size_t la,
                          const char *tb, size_t lb);
void tok_post_free(tok_post *p);

/* ---- the tokenizer ------------------------------------------------------ */
struct tok_tokenizer {
    tok_model model;
    tok_normalizer *normalizer;     /* NULL: none */
    tok_pretok *pretok;             /* NULL: none */
    tok_post post;
    tok_added_set added;            /* matched on the raw input */
    tok_added_set added_norm;       /* matched on normalized text */
    tok_vocab all;                  /* id -> token incl. added tokens, for tok_id_to_token */
    void *decoder;
    int decoder_unsupported;        /* the file's decoder is not implemented */
};

typedef struct tok_scratch {
    tok_segs segs, segs2;
    tok_buf nbuf;
    tok_norm_scratch ns;
    tok_pre_scratch ps;
    tok_model_scratch ms;
    tok_toks seq[2];
} tok_scratch;

/* tok_encode_pair with an explicit scratch (the batch API's per-thread one). */
int tok_encode_with(const tok_tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                    const tok_opts *opts, tok_encoding *out, tok_scratch *sc, posy_err *err);
void tok_scratch_free(tok_scratch *sc);

/* Encode one sequence (no post-processing) into `out`. */
int tok_encode_seq(const tok_tokenizer *t, const char *text, size_t len, tok_scratch *sc,
                   tok_toks *out, posy_err *err);
/* Post-process and truncate seq a (and b when not NULL) into enc. */
int tok_post_process(const tok_tokenizer *t, tok_toks *a, tok_toks *b, const tok_opts *o,
                     tok_encoding *enc, const char *ta, size_t la, const char *tb, size_t lb, posy_err *err);

#endif

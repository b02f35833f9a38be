/* gw_parse: reading the JSON bodies of the POST routes into plain structs,
 * with the status a client should get for each problem: 400 for malformed
 * JSON or a wrong type, 422 for a well-typed but unacceptable value.  Texts
 * and token lists point into the jansson document, which the call keeps
 * until tokenization is done.
 */
#ifndef GW_PARSE_H
#define GW_PARSE_H

#include <jansson.h>
#include <stddef.h>
#include "posy_vecenc.h"
#include "tok.h"

typedef struct gw_input {
    const char *text;     /* NULL for a token-id input */
    size_t len;
    json_t *ids;          /* array of integers, or NULL */
} gw_input;

typedef struct gw_embed_req {
    gw_input *inputs;     /* malloc'd */
    int n;
    int base64;           /* float32 as base64 (enc.dtype float, enc.base64) */
    posy_vecenc enc;      /* encoding_format / output_dtype (docs/ENCODINGS.md) */
    int dims;             /* 0 = the model's */
    int normalize;
    int truncate;
    int chunked;          /* posy extension: split over-long inputs into windows (gw_chunk.c) */
    tok_trunc_dir dir;
    const char *prompt_name;   /* NULL = the model's default prompt */
    const char *task;          /* posy extension, sentence-transformers' encode_query / encode_document:
                                  "query" / "document" pick a Router model's route and the prompt of that
                                  name (gw_sparse.c); NULL: the model's default route */
    int add_special;      /* /tokenize: 1 / 0 as the request says, -1 when it does not (the model's way) */
    int similarity;       /* TEI /similarity: inputs[0] is the source sentence, the answer its cosine
                             with each of inputs[1..n) ("inputs" an object; options under "parameters") */
} gw_embed_req;

typedef struct gw_perr {
    int status;           /* 400 or 422 */
    const char *code;
    char msg[300];
} gw_perr;

/* Parse a body; `openai` picks the field names ("input" vs "inputs").
 * `route_tokenize` reads /tokenize's fields.  Returns 0, or -1 with `pe`. */
int gw_parse_body(const char *body, size_t len, int openai, int route_tokenize, int max_inputs,
                  int default_truncate, json_t **doc, gw_embed_req *r, gw_perr *pe);
void gw_embed_req_free(gw_embed_req *r);

/* POST /rerank (TEI): {"query": str, "texts": [str, ...], "raw_scores":
 * bool = false, "return_text": bool = false, "truncate": bool (the
 * server's default), "truncation_direction": "right" | "left"}.
 * POST /v1/rerank (`cohere`: the Cohere / Jina form vLLM and Infinity
 * serve): {"query": str, "documents": [str | {"text": str}, ...],
 * "top_n": int >= 1, "return_documents": bool = true, "model": any string,
 * and posy's "truncate" / "truncation_direction"}.  At least one text and
 * at most max_inputs; the strings point into *doc (gw_rerank_text). */
typedef struct gw_rerank_req {
    const char *query;
    size_t query_len;
    json_t *texts;        /* the document's "texts" / "documents" array */
    int n;
    int raw_scores, return_text, truncate;
    int top_n;            /* /v1/rerank: the best top_n only (n when not given) */
    tok_trunc_dir dir;
} gw_rerank_req;
int gw_parse_rerank(const char *body, size_t len, int cohere, int max_inputs, int default_truncate, json_t **doc,
                    gw_rerank_req *r, gw_perr *pe);
/* Text i of a parsed rerank request (a string, or a document's "text"). */
const char *gw_rerank_text(json_t *texts, int i, size_t *len);

/* POST /predict (TEI): {"inputs": I | [I, ...], "raw_scores": bool =
 * false, "truncate": bool (the server's default), "truncation_direction":
 * "right" | "left"}, where an input I is a text or a pair [text, text]
 * (TEI's reading: a list of exactly two strings is one pair, not two
 * texts; [[a, b]] is a batch of one pair).  POST /classify (`vllm`: vLLM's
 * form): {"input": text | [text, ...], "model": any string, and posy's
 * "truncate" / "truncation_direction"}, texts only.  At least one input
 * and at most max_inputs; the strings point into *doc (gw_predict_input). */
typedef struct gw_predict_req {
    json_t *inputs;       /* the one input (batch 0) or the list of them */
    int n;
    int batch;            /* answer a list, one entry an input */
    int raw_scores, truncate;
    tok_trunc_dir dir;
} gw_predict_req;
int gw_parse_predict(const char *body, size_t len, int vllm, int max_inputs, int default_truncate, json_t **doc,
                     gw_predict_req *r, gw_perr *pe);
/* Input i of a parsed predict request: its text (a), and for a pair the
 * second text (b), else b NULL. */
void gw_predict_input(const gw_predict_req *r, int i, const char **a, size_t *alen, const char **b, size_t *blen);

/* POST /score and /v1/score (vLLM's): {"text_1": str | [str, ...],
 * "text_2": str | [str, ...], "model": any string, and posy's "truncate" /
 * "truncation_direction"}.  A single text_1 (a string, or a list of one)
 * goes with every text_2; else both lists have the same length and pair
 * up in order.  At least one pair, at most max_inputs; the strings point
 * into *doc (gw_score_texts). */
typedef struct gw_score_req {
    json_t *text_1, *text_2;
    int n1, n;            /* text_1's count (1, or n), and the pairs' */
    int truncate;
    tok_trunc_dir dir;
} gw_score_req;
int gw_parse_score(const char *body, size_t len, int max_inputs, int default_truncate, json_t **doc, gw_score_req *r,
                   gw_perr *pe);
/* Text i of text_1 (which 0) or text_2 (which 1). */
const char *gw_score_text(const gw_score_req *r, int which, int i, size_t *len);

/* POST /decode (TEI): {"ids": [int, ...] | [[int, ...], ...],
 * "skip_special_tokens": bool = true}.  Every id must lie in [0, vocab)
 * (422 otherwise: the tokenizer would drop unknown ids silently), at most
 * max_inputs lists.  An empty inner list is allowed (it decodes to ""). */
typedef struct gw_decode_req {
    json_t *ids;          /* the document's "ids" array */
    int batch;            /* ids holds lists of ids */
    size_t n;             /* lists to decode: 1 unless batch */
    int skip_special;
} gw_decode_req;
int gw_parse_decode(const char *body, size_t len, int max_inputs, int vocab, json_t **doc, gw_decode_req *r,
                    gw_perr *pe);
/* List i (0 <= i < r->n) of a parsed /decode request. */
json_t *gw_decode_list(const gw_decode_req *r, size_t i);

#endif

/* fuzz_gw_parse: libFuzzer target for gw_parse_body, the reader of every
 * JSON body the HTTP front takes (/v1/embeddings, /embed, /tokenize ...).
 *
 * The first input byte picks the route's flags, so one corpus covers all
 * of them: bit 0 openai ("input" vs "inputs"), bit 1 /tokenize, bits 2-3
 * --max-client-batch (1, 2, 8, 2048), bit 4 --auto-truncate.  The rest is
 * the body, handed over at its exact size so that ASan sees any read past
 * it.  Afterwards the target does what gw_stage_parse does: read every
 * text and token id (tokenization), gw_embed_req_free, json_decref.
 * Bit 5 sends the body to /decode's reader instead (gw_parse_decode; bit
 * 6 then picks a 5-id vocabulary instead of 30522), whose successes must
 * hold only in-vocabulary integer lists, the document's own.  Bit 7 sends
 * it to /rerank's reader (gw_parse_rerank; bit 1 then picks /v1/rerank's
 * form), whose successes must hold the document's own query string and
 * 1..max_inputs texts, strings (or {"text": string} documents), and
 * 1 <= top_n <= their number.  Bits 7 and 6 together send it to /predict's
 * reader (gw_parse_predict; bit 1 then picks /classify's form), bits 7
 * and 5 to /score's (gw_parse_score).
 *
 * Beyond "no crash, no leak, no UB" it checks the parser's contract:
 * an error carries a 400 or 422 status, a code and a message; a success
 * yields 1..max_inputs inputs (one list of ids counts as one) whose texts
 * and id lists are the very values of the document's "input(s)" field
 * (for TEI's /similarity form, an object: the source sentence, then the
 * sentences).
 * Build and run: tests/fuzz/run_fuzz.sh gw_parse [seconds].
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gw_parse.h"

static const int fuzz_max_inputs[4] = {1, 2, 8, 2048};

volatile uint64_t fuzz_sink; /* keeps the reads of texts and ids alive */

static void fuzz_check_error(const gw_perr *pe, const json_t *doc) {
    if (pe->status != 400 && pe->status != 422) abort();
    if (!pe->code || !pe->code[0] || !pe->msg[0]) abort();
    if (!memchr(pe->msg, 0, sizeof pe->msg)) abort();
    if (!doc && strcmp(pe->code, "invalid_json") != 0) abort();   /* only bad JSON leaves no document */
}

/* The end of a reader's run: an error must be well-formed, a status other
 * than 0 / -1 is a bug; then the document goes. */
static void fuzz_end(int rc, const gw_perr *pe, json_t *doc) {
    if (rc == -1) fuzz_check_error(pe, doc);
    else if (rc != 0) abort();
    json_decref(doc);
}

/* Element i of the request must be the document's own value (texts and ids
 * point into it), and read like tokenization reads it. */
static void fuzz_check_input(const gw_input *in, json_t *want) {
    uint64_t h = 0;
    if (in->text) {
        if (in->ids || !json_is_string(want) || in->text != json_string_value(want)) abort();
        if (in->len != json_string_length(want)) abort();
        for (size_t k = 0; k < in->len; k++) h = h * 31 + (uint8_t)in->text[k];
    } else {
        if (in->ids != want || !json_is_array(want) || json_array_size(want) == 0) abort();
        for (size_t k = 0; k < json_array_size(want); k++) {
            json_t *v = json_array_get(want, k);
            if (!json_is_integer(v)) abort();
            h = h * 31 + (uint64_t)json_integer_value(v);
        }
    }
    fuzz_sink += h;
}

static void fuzz_check_ok(const gw_embed_req *r, json_t *doc, int openai, int max_inputs) {
    if (!json_is_object(doc) || r->n < 1 || !r->inputs) abort();
    json_t *field = json_object_get(doc, openai ? "input" : "inputs");
    if (!field) abort();
    if (r->similarity != (!openai && json_is_object(field))) abort();
    if (r->similarity) {   /* /similarity: the source sentence, then the sentences */
        json_t *sents = json_object_get(field, "sentences");
        if (r->n < 2 || r->n > max_inputs || (size_t)r->n != json_array_size(sents) + 1) abort();
        fuzz_check_input(&r->inputs[0], json_object_get(field, "source_sentence"));
        for (int i = 1; i < r->n; i++) fuzz_check_input(&r->inputs[i], json_array_get(sents, (size_t)i - 1));
    } else if (json_is_string(field) || json_is_integer(json_array_get(field, 0))) {   /* one input */
        if (r->n != 1) abort();
        fuzz_check_input(&r->inputs[0], field);
    } else {
        if (r->n > max_inputs || (size_t)r->n != json_array_size(field)) abort();
        for (int i = 0; i < r->n; i++) fuzz_check_input(&r->inputs[i], json_array_get(field, (size_t)i));
    }
    if (r->dims < 0 || r->dims > 1 << 30) abort();
    if ((unsigned)r->enc.dtype > POSY_VEC_UBINARY) abort();
    if (r->dir != TOK_TRUNC_LEFT && r->dir != TOK_TRUNC_RIGHT) abort();
    if ((r->normalize | r->truncate | r->chunked | r->base64 | r->similarity) & ~1) abort();
    if (r->add_special < -1 || r->add_special > 1) abort();
    if (r->prompt_name) fuzz_sink += strlen(r->prompt_name);
}

/* A /decode request that parsed: every list holds in-vocabulary integers,
 * and the lists are the document's own. */
static void fuzz_check_decode(const gw_decode_req *r, json_t *doc, int max_inputs, int vocab) {
    json_t *ids = json_object_get(doc, "ids");
    if (!json_is_array(ids) || r->ids != ids || r->n < 1 || r->n > (size_t)max_inputs) abort();
    if (r->n != (r->batch ? json_array_size(ids) : 1)) abort();
    json_t *sk = json_object_get(doc, "skip_special_tokens");
    if (r->skip_special != (json_is_false(sk) ? 0 : 1)) abort();
    for (size_t i = 0; i < r->n; i++) {
        json_t *a = gw_decode_list(r, i);
        if (!json_is_array(a) || a != (r->batch ? json_array_get(ids, i) : ids)) abort();
        for (size_t k = 0; k < json_array_size(a); k++) {
            json_t *v = json_array_get(a, k);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= vocab) abort();
            fuzz_sink += (uint64_t)json_integer_value(v);
        }
    }
}

/* Bit 5 of the first byte: /decode (gw_parse_decode) with a vocabulary of
 * 30522 ids, or of 5 when bit 6 is set too (most ids then fall outside). */
static int fuzz_decode(const uint8_t *data, size_t size) {
    int max_inputs = fuzz_max_inputs[(data[0] >> 2) & 3], vocab = (data[0] >> 6) & 1 ? 5 : 30522;
    json_t *doc = (json_t *)1;
    gw_decode_req r;
    gw_perr pe;
    memset(&pe, 0, sizeof pe);
    int rc = gw_parse_decode((const char *)data + 1, size - 1, max_inputs, vocab, &doc, &r, &pe);
    if (doc == (json_t *)1) abort();
    if (rc == 0) fuzz_check_decode(&r, doc, max_inputs, vocab);
    fuzz_end(rc, &pe, doc);
    return 0;
}

/* Bit 7: /rerank (gw_parse_rerank). */
static int fuzz_rerank(const uint8_t *data, size_t size) {
    int max_inputs = fuzz_max_inputs[(data[0] >> 2) & 3], truncate = (data[0] >> 4) & 1;
    json_t *doc = (json_t *)1;
    gw_rerank_req r;
    gw_perr pe;
    memset(&pe, 0, sizeof pe);
    const int cohere = (data[0] >> 1) & 1;
    int rc = gw_parse_rerank((const char *)data + 1, size - 1, cohere, max_inputs, truncate, &doc, &r, &pe);
    if (doc == (json_t *)1) abort();
    if (rc == 0) {
        json_t *q = json_object_get(doc, "query");
        if (!json_is_string(q) || r.query != json_string_value(q) || r.query_len != json_string_length(q)) abort();
        if (r.texts != json_object_get(doc, cohere ? "documents" : "texts") || r.n < 1 || r.n > max_inputs ||
            (size_t)r.n != json_array_size(r.texts) || r.top_n < 1 || r.top_n > r.n)
            abort();
        for (int i = 0; i < r.n; i++) {   /* what gw_rerank_tokenize reads */
            size_t n, sum = 0;
            const char *s = gw_rerank_text(r.texts, i, &n);
            if (!s) abort();
            for (size_t k = 0; k < n; k++) sum += (unsigned char)s[k];
            if (sum == (size_t)-1) abort();
        }
        if ((r.raw_scores | r.return_text | r.truncate) & ~1 || (unsigned)r.dir > TOK_TRUNC_LEFT) abort();
    }
    fuzz_end(rc, &pe, doc);
    return 0;
}

/* Bits 7 and 6: /predict (gw_parse_predict; bit 1 then picks /classify's
 * form).  A success holds 1..max_inputs inputs, each the document's own
 * string or [string, string] pair (a single input when not batch). */
static int fuzz_predict(const uint8_t *data, size_t size) {
    int max_inputs = fuzz_max_inputs[(data[0] >> 2) & 3], truncate = (data[0] >> 4) & 1;
    json_t *doc = (json_t *)1;
    gw_predict_req r;
    gw_perr pe;
    memset(&pe, 0, sizeof pe);
    const int vllm = (data[0] >> 1) & 1;
    int rc = gw_parse_predict((const char *)data + 1, size - 1, vllm, max_inputs, truncate, &doc, &r, &pe);
    if (doc == (json_t *)1) abort();
    if (rc == 0) {
        json_t *field = json_object_get(doc, vllm ? "input" : "inputs");
        if (r.inputs != field || r.n < 1 || r.n > max_inputs) abort();
        if (r.batch ? (size_t)r.n != json_array_size(field) : r.n != 1) abort();
        for (int i = 0; i < r.n; i++) {   /* what gw_predict_tokenize reads */
            const char *a, *b;
            size_t alen, blen, sum = 0;
            gw_predict_input(&r, i, &a, &alen, &b, &blen);
            json_t *t = r.batch ? json_array_get(field, (size_t)i) : field;
            json_t *ta = json_is_array(t) ? json_array_get(t, 0) : t;
            if (!a || a != json_string_value(ta) || alen != json_string_length(ta)) abort();
            if ((b != NULL) != json_is_array(t) || (vllm && b)) abort();
            for (size_t k = 0; k < alen; k++) sum += (unsigned char)a[k];
            for (size_t k = 0; b && k < blen; k++) sum += (unsigned char)b[k];
            fuzz_sink += sum;
        }
        if ((r.raw_scores | r.truncate | r.batch) & ~1 || (unsigned)r.dir > TOK_TRUNC_LEFT) abort();
    }
    fuzz_end(rc, &pe, doc);
    return 0;
}

/* Bits 7 and 5 (not 6): /score (gw_parse_score).  A success holds 1..max_inputs
 * pairs, text_1 one text or as many as text_2, every text the document's own. */
static int fuzz_score(const uint8_t *data, size_t size) {
    int max_inputs = fuzz_max_inputs[(data[0] >> 2) & 3], truncate = (data[0] >> 4) & 1;
    json_t *doc = (json_t *)1;
    gw_score_req r;
    gw_perr pe;
    memset(&pe, 0, sizeof pe);
    int rc = gw_parse_score((const char *)data + 1, size - 1, max_inputs, truncate, &doc, &r, &pe);
    if (doc == (json_t *)1) abort();
    if (rc == 0) {
        if (r.text_1 != json_object_get(doc, "text_1") || r.text_2 != json_object_get(doc, "text_2")) abort();
        if (r.n < 1 || r.n > max_inputs || (r.n1 != 1 && r.n1 != r.n)) abort();
        for (int w = 0; w < 2; w++)
            for (int i = 0; i < (w ? r.n : r.n1); i++) {   /* what the tokenizing side reads */
                json_t *f = w ? r.text_2 : r.text_1, *t = json_is_array(f) ? json_array_get(f, (size_t)i) : f;
                size_t n, sum = 0;
                const char *s = gw_score_text(&r, w, i, &n);
                if (!s || s != json_string_value(t) || n != json_string_length(t)) abort();
                for (size_t k = 0; k < n; k++) sum += (unsigned char)s[k];
                fuzz_sink += sum;
            }
        if ((r.truncate & ~1) || (unsigned)r.dir > TOK_TRUNC_LEFT) abort();
    }
    fuzz_end(rc, &pe, doc);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if ((data[0] >> 7) & 1 && (data[0] >> 6) & 1) return fuzz_predict(data, size);
    if ((data[0] >> 7) & 1 && (data[0] >> 5) & 1) return fuzz_score(data, size);
    if ((data[0] >> 7) & 1) return fuzz_rerank(data, size);
    if ((data[0] >> 5) & 1) return fuzz_decode(data, size);
    int openai = data[0] & 1, tokenize = (data[0] >> 1) & 1;
    int max_inputs = fuzz_max_inputs[(data[0] >> 2) & 3], truncate = (data[0] >> 4) & 1;
    json_t *doc = (json_t *)1;   /* must be overwritten on every path */
    gw_embed_req r;
    gw_perr pe;
    memset(&pe, 0, sizeof pe);
    int rc = gw_parse_body((const char *)data + 1, size - 1, openai, tokenize, max_inputs, truncate, &doc, &r, &pe);
    if (doc == (json_t *)1) abort();
    if (rc == 0) fuzz_check_ok(&r, doc, openai, max_inputs);
    gw_embed_req_free(&r);
    fuzz_end(rc, &pe, doc);
    return 0;
}

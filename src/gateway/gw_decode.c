/* gw_decode: POST /decode, TEI's shape.
 *
 *   {"ids": [int, ...] | [[int, ...], ...], "skip_special_tokens": bool = true}
 *   -> ["text", ...]
 *
 * TEI answers a list of strings for both forms (one string for a single id
 * list), and so does posy.  Ids are checked against the vocabulary before
 * decoding: the tokenizer would silently drop unknown ids as HF does, but
 * the server's contract is 422 for ids outside [0, vocab), as on the
 * embedding routes.  The body is read by gw_parse_decode (gw_parse.c,
 * covered by fuzz_gw_parse).  Runs on a pool thread, like the other POST
 * routes.
 */
#include <stdlib.h>

#include "gw_internal.h"
#include "gw_parse.h"

/* Decode one list of ids into the response as a JSON string. */
static int decode_one(gw_call *c, json_t *a, int skip_special) {
    size_t n = json_array_size(a);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) {
        gw_call_fail(c, 500, GW_F_BACKEND, "out_of_memory", "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(a, i));
    char *text = NULL;
    size_t len = 0;
    posy_err err;
    posy_err_clear(&err);
    int rc = tok_decode(c->srv->model.tok, ids, (int)n, skip_special, &text, &len, &err);
    free(ids);
    if (rc) {
        if (rc == POSY_E_UNSUPPORTED) gw_call_fail(c, 501, GW_F_UNSUPPORTED, "not_implemented", "%s", err.msg);
        else gw_call_fail(c, 500, GW_F_BACKEND, "decode_failed", "%s", err.msg);
        return -1;
    }
    gw_buf_json_str(&c->resp, text, len);
    free(text);
    return 0;
}

void gw_decode_response(gw_call *c) {
    gw_decode_req r;
    gw_perr pe;
    json_t *doc = NULL;
    if (gw_parse_decode(c->body, c->body_len, c->srv->opts.max_client_batch, tok_vocab_size(c->srv->model.tok), &doc,
                        &r, &pe)) {
        gw_call_fail(c, pe.status, pe.status == 400 ? GW_F_MALFORMED : GW_F_VALIDATION, pe.code, "%s", pe.msg);
        goto out;
    }
    gw_buf_putc(&c->resp, '[');
    for (size_t i = 0; i < r.n; i++) {
        if (i) gw_buf_putc(&c->resp, ',');
        if (decode_one(c, gw_decode_list(&r, i), r.skip_special)) goto out;
    }
    gw_buf_putc(&c->resp, ']');
    c->status = 200;
out:
    json_decref(doc);
}

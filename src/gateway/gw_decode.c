/* gw_decode: POST /decode, TEI's shape.
 *
 *   {"ids": [int, ...] | [[int, ...], ...], "skip_special_tokens": bool = true}
 *   -> ["text", ...]
 *
 * TEI answers a list of strings for both forms (one string for a single id
 * list), and so does posy.  Ids are checked against the vocabulary before
 * decoding: the tokenizer would silently drop unknown ids as HF does, but
 * the server's contract is 422 for ids outside [0, vocab), as on the
 * embedding routes.  Runs on a pool thread, like the other POST routes.
 */
#include <stdlib.h>

#include "gw_internal.h"

/* 0 when `a` is an array of in-vocabulary integers; else fails the call. */
static int check_ids(gw_call *c, json_t *a, size_t idx, int vocab) {
    if (!json_is_array(a)) {
        gw_call_fail(c, 400, GW_F_MALFORMED, "invalid_type",
                     "'ids' must be an array of token ids or an array of arrays of token ids");
        return -1;
    }
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v)) {
            gw_call_fail(c, 400, GW_F_MALFORMED, "invalid_type", "ids[%zu]: token ids must all be integers", idx);
            return -1;
        }
        json_int_t id = json_integer_value(v);
        if (id < 0 || id >= vocab) {
            gw_call_fail(c, 422, GW_F_VALIDATION, "token_out_of_vocabulary",
                         "ids[%zu]: token id %lld is outside the vocabulary [0, %d)", idx, (long long)id, vocab);
            return -1;
        }
    }
    return 0;
}

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

static int read_request(gw_call *c, json_t *o, json_t **ids, int *skip_special) {
    if (!json_is_object(o)) {
        gw_call_fail(c, 400, GW_F_MALFORMED, "invalid_type", "the body must be a JSON object");
        return -1;
    }
    json_t *sk = json_object_get(o, "skip_special_tokens");
    if (sk && !json_is_null(sk) && !json_is_boolean(sk)) {
        gw_call_fail(c, 400, GW_F_MALFORMED, "invalid_type", "'skip_special_tokens' must be true or false");
        return -1;
    }
    *skip_special = !sk || json_is_null(sk) || json_is_true(sk);
    *ids = json_object_get(o, "ids");
    if (!*ids || json_is_null(*ids)) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "missing_input", "'ids' is required");
        return -1;
    }
    if (!json_is_array(*ids)) {
        gw_call_fail(c, 400, GW_F_MALFORMED, "invalid_type",
                     "'ids' must be an array of token ids or an array of arrays of token ids");
        return -1;
    }
    if (json_array_size(*ids) == 0) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "empty_input", "'ids' is an empty array");
        return -1;
    }
    return 0;
}

void gw_decode_response(gw_call *c) {
    json_error_t je;
    json_t *o = json_loadb(c->body, c->body_len, JSON_DECODE_ANY, &je), *ids;
    int skip_special, vocab = tok_vocab_size(c->srv->model.tok);
    if (!o) {
        gw_call_fail(c, 400, GW_F_MALFORMED, "invalid_json", "the body is not valid JSON: %s (line %d, column %d)",
                     je.text, je.line, je.column);
        return;
    }
    if (read_request(c, o, &ids, &skip_special)) goto out;
    int batch = json_is_array(json_array_get(ids, 0));
    size_t n = batch ? json_array_size(ids) : 1;
    if (n > (size_t)c->srv->opts.max_client_batch) {
        gw_call_fail(c, 422, GW_F_VALIDATION, "too_many_inputs",
                     "'ids' has %zu inputs, more than the limit of %d (--max-client-batch)", n,
                     c->srv->opts.max_client_batch);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (check_ids(c, batch ? json_array_get(ids, i) : ids, i, vocab)) goto out;
    gw_buf_putc(&c->resp, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) gw_buf_putc(&c->resp, ',');
        if (decode_one(c, batch ? json_array_get(ids, i) : ids, skip_special)) goto out;
    }
    gw_buf_putc(&c->resp, ']');
    c->status = 200;
out:
    json_decref(o);
}

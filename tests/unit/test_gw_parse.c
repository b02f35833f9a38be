/* test_gw_parse: gw_parse_body on request bodies, without a server: the
 * status (400 malformed / wrong type, 422 unacceptable value), the code and
 * a message naming the field for each refusal, and what a good body parses
 * to.  tests/fuzz/fuzz_gw_parse.c drives the same function with arbitrary
 * bytes; the cases here pin the exact answers.  (The HTTP side of these
 * errors is covered by tests/python/test_serve_errors.py with a model.)
 */
#include "gw_parse.h"
#include "posy_test.h"

typedef struct {
    json_t *doc;
    gw_embed_req r;
    gw_perr pe;
    int rc;
} parsed;

static parsed parse(const char *body, int openai, int max_inputs) {
    parsed p;
    memset(&p.pe, 0, sizeof p.pe);
    p.rc = gw_parse_body(body, strlen(body), openai, 0, max_inputs, 0, &p.doc, &p.r, &p.pe);
    return p;
}

static void done(parsed *p) {
    gw_embed_req_free(&p->r);
    json_decref(p->doc);
}

/* Refused with `status` and `code`, the message containing `needle`. */
static void expect_err(const char *body, int openai, int status, const char *code, const char *needle) {
    parsed p = parse(body, openai, 8);
    CHECK_MSG(p.rc == -1, "accepted %s", body);
    if (p.rc == -1) {
        CHECK_MSG(p.pe.status == status, "%s: status %d, wanted %d", body, p.pe.status, status);
        CHECK_MSG(p.pe.code && !strcmp(p.pe.code, code), "%s: code %s, wanted %s", body, p.pe.code, code);
        CHECK_STR_CONTAINS(p.pe.msg, needle);
    }
    done(&p);
}

static void test_good_bodies(void) {
    parsed p = parse("{\"input\":[\"a\",\"bc\"],\"encoding_format\":\"base64\",\"dimensions\":64}", 1, 8);
    CHECK_EQ_INT(p.rc, 0);
    if (p.rc == 0) {
        CHECK_EQ_INT(p.r.n, 2);
        CHECK(p.r.inputs[1].text && p.r.inputs[1].len == 2 && !memcmp(p.r.inputs[1].text, "bc", 2));
        CHECK_EQ_INT(p.r.base64, 1);
        CHECK_EQ_INT(p.r.dims, 64);
    }
    done(&p);
    p = parse("{\"inputs\":[[101,7592,102],[101,102]],\"truncation_direction\":\"left\",\"truncate\":true}", 0, 8);
    CHECK_EQ_INT(p.rc, 0);
    if (p.rc == 0) {
        CHECK_EQ_INT(p.r.n, 2);
        CHECK(p.r.inputs[0].text == NULL && json_array_size(p.r.inputs[0].ids) == 3);
        CHECK_EQ_INT(p.r.dir, TOK_TRUNC_LEFT);
        CHECK_EQ_INT(p.r.truncate, 1);
    }
    done(&p);
    /* one list of ids is one input, whatever the batch limit */
    p = parse("{\"inputs\":[1,2,3]}", 0, 1);
    CHECK_EQ_INT(p.rc, 0);
    if (p.rc == 0) CHECK_EQ_INT(p.r.n, 1);
    done(&p);
}

static void test_refusals(void) {
    expect_err("{\"input\":", 1, 400, "invalid_json", "not valid JSON");
    expect_err("[1]", 1, 400, "invalid_type", "JSON object");
    expect_err("{}", 1, 422, "missing_input", "'input' is required");
    expect_err("{\"inputs\":[]}", 0, 422, "empty_input", "'inputs' is an empty array");
    expect_err("{\"inputs\":[[]]}", 0, 422, "empty_input", "input 0 is an empty list");
    expect_err("{\"inputs\":[1,\"2\"]}", 0, 400, "invalid_type", "token ids must all be integers");
    expect_err("{\"input\":[\"a\",[1]]}", 1, 400, "invalid_type", "'input'[1]");
    expect_err("{\"input\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]}", 1, 422, "too_many_inputs",
               "limit of 8");
    expect_err("{\"input\":\"a\",\"normalize\":\"yes\"}", 1, 400, "invalid_type", "'normalize' must be true or false");
    expect_err("{\"input\":\"a\",\"truncation_direction\":\"up\"}", 1, 422, "invalid_truncation_direction", "left");
    expect_err("{\"input\":\"a\",\"encoding_format\":\"hex\"}", 1, 422, "invalid_encoding_format", "hex");
    expect_err("{\"input\":\"a\",\"dimensions\":1.5}", 1, 400, "invalid_type", "'dimensions' must be an integer");
    expect_err("{\"input\":\"a\",\"dimensions\":0}", 1, 422, "invalid_dimensions", "'dimensions' is 0");
}

/* A value over the bound used to be refused as "must be at least 1",
 * which is not what was wrong with it. */
static void test_dimensions_too_big_says_so(void) {
    expect_err("{\"input\":\"a\",\"dimensions\":100000000000}", 1, 422, "invalid_dimensions",
               "'dimensions' is 100000000000; it must be in [1, 1073741824]");
}

/* TEI's /similarity body: the source sentence first, then the sentences;
 * options under "parameters" (or at the top when there is none). */
static void test_similarity(void) {
    parsed p = parse("{\"inputs\":{\"source_sentence\":\"a cat\",\"sentences\":[\"a dog\",\"cars\"]},"
                     "\"parameters\":{\"truncate\":true,\"truncation_direction\":\"left\"}}", 0, 8);
    CHECK_EQ_INT(p.rc, 0);
    if (p.rc == 0) {
        CHECK_EQ_INT(p.r.similarity, 1);
        CHECK_EQ_INT(p.r.n, 3);
        CHECK(p.r.inputs[0].len == 5 && !memcmp(p.r.inputs[0].text, "a cat", 5));
        CHECK(p.r.inputs[2].len == 4 && !memcmp(p.r.inputs[2].text, "cars", 4));
        CHECK_EQ_INT(p.r.truncate, 1);
        CHECK_EQ_INT(p.r.dir, TOK_TRUNC_LEFT);
    }
    done(&p);
    p = parse("{\"inputs\":{\"source_sentence\":\"s\",\"sentences\":[\"t\"]},\"truncate\":true}", 0, 8);
    CHECK(p.rc == 0 && p.r.similarity && p.r.truncate);
    done(&p);
    p = parse("{\"inputs\":[\"a\",\"b\"]}", 0, 8);
    CHECK(p.rc == 0 && !p.r.similarity);
    done(&p);
    expect_err("{\"inputs\":{\"sentences\":[\"t\"]}}", 0, 422, "missing_input", "inputs.source_sentence");
    expect_err("{\"inputs\":{\"source_sentence\":\"s\"}}", 0, 422, "missing_input", "inputs.sentences");
    expect_err("{\"inputs\":{\"source_sentence\":\"s\",\"sentences\":[]}}", 0, 422, "empty_input",
               "inputs.sentences");
    expect_err("{\"inputs\":{\"source_sentence\":5,\"sentences\":[\"t\"]}}", 0, 400, "invalid_type",
               "source_sentence");
    expect_err("{\"inputs\":{\"source_sentence\":\"s\",\"sentences\":[\"t\",7]}}", 0, 400, "invalid_type",
               "'inputs.sentences'[1]");
    expect_err("{\"inputs\":{\"source_sentence\":\"s\",\"sentences\":\"t\"}}", 0, 400, "invalid_type",
               "array of strings");
    expect_err("{\"inputs\":{\"source_sentence\":\"s\",\"sentences\":[\"t\"]},\"parameters\":3}", 0, 400,
               "invalid_type", "'parameters'");
    /* 8 sentences and the source are 9 inputs, over a limit of 8 */
    expect_err("{\"inputs\":{\"source_sentence\":\"s\",\"sentences\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\","
               "\"7\",\"8\"]}}", 0, 422, "too_many_inputs", "limit of 8");
    /* the OpenAI route has no such form */
    expect_err("{\"input\":{\"source_sentence\":\"s\",\"sentences\":[\"t\"]}}", 1, 400, "invalid_type", "'input'");
}

TEST_MAIN(TEST(test_good_bodies), TEST(test_refusals), TEST(test_dimensions_too_big_says_so), TEST(test_similarity))

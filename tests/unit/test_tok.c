/* test_tok: unit tests of the tokenizer pieces (vocab map, UTF-8, Bert
 * normalizer, pre-tokenizers, WordPiece) and of the loader's errors on
 * corrupt and hostile tokenizer.json.  Whole-pipeline exactness against HF
 * is the Python differential tests' job (tests/python/test_tokenizer_*). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "posy_test.h"
#include "tok.h"
#include "tok_internal.h"
#include "tok_norm_impl.h"

static void test_vocab_map(void) {
    tok_vocab v;
    CHECK(tok_vocab_init(&v, 5, 5) == 0);
    CHECK(tok_vocab_add(&v, 0, "hello", 5) == 0);
    CHECK(tok_vocab_add(&v, 1, "##lo", 4) == 0);
    CHECK(tok_vocab_add(&v, 2, "", 0) == 0);
    CHECK(tok_vocab_add(&v, 3, "hello", 5) == 1); /* duplicate string keeps the first id */
    CHECK(tok_vocab_add(&v, 7, "x", 1) == -1);    /* id out of range */
    CHECK_EQ_INT(tok_vocab_find(&v, "hello", 5), 0);
    CHECK_EQ_INT(tok_vocab_find2(&v, "##", 2, "lo", 2), 1);
    CHECK_EQ_INT(tok_vocab_find2(&v, "#", 1, "#lo", 3), 1);
    CHECK_EQ_INT(tok_vocab_find(&v, "hell", 4), -1);
    CHECK_EQ_INT(tok_vocab_find(&v, "", 0), 2);
    uint32_t l;
    CHECK(tok_vocab_str(&v, 1, &l) && l == 4 && !memcmp(tok_vocab_str(&v, 1, NULL), "##lo", 4));
    CHECK(tok_vocab_str(&v, 4, NULL) == NULL);
    CHECK(tok_vocab_str(&v, -1, NULL) == NULL);
    tok_vocab_free(&v);
    /* a map filled to its limit refuses instead of looping forever */
    CHECK(tok_vocab_init(&v, 100, 2) == 0);
    int refused = 0;
    char s[8];
    for (int i = 0; i < 100; i++) {
        snprintf(s, sizeof s, "t%d", i);
        if (tok_vocab_add(&v, i, s, strlen(s)) < 0) refused = 1;
    }
    CHECK(refused);
    tok_vocab_free(&v);
}

static void test_utf8(void) {
    uint32_t cp;
    CHECK_EQ_INT(tok_utf8_decode((const uint8_t *)"\xC3\xA9", 2, &cp), 2);
    CHECK_EQ_INT(cp, 0xE9);
    CHECK_EQ_INT(tok_utf8_decode((const uint8_t *)"\xF0\x9F\x98\x80", 4, &cp), 4);
    CHECK_EQ_INT(cp, 0x1F600);
    CHECK_EQ_INT(tok_utf8_decode((const uint8_t *)"\xC0\xAF", 2, &cp), 0);     /* overlong */
    CHECK_EQ_INT(tok_utf8_decode((const uint8_t *)"\xED\xA0\x80", 3, &cp), 0); /* surrogate */
    CHECK_EQ_INT(tok_utf8_decode((const uint8_t *)"\xF4\x90\x80\x80", 4, &cp), 0); /* > U+10FFFF */
    CHECK_EQ_INT(tok_utf8_decode((const uint8_t *)"\xE2\x82", 2, &cp), 0);     /* truncated */
    CHECK_EQ_INT(tok_utf8_valid_prefix("ab\xFF", 3), 2);
    char out[4];
    CHECK_EQ_INT(tok_utf8_encode(0x10FFFF, out), 4);
    CHECK(tok_utf8_decode((const uint8_t *)out, 4, &cp) == 4 && cp == 0x10FFFF);
}

static void test_classes(void) {
    CHECK(tok_is_bert_punct('!') && tok_is_bert_punct('$') && tok_is_bert_punct('~'));
    CHECK(tok_is_bert_punct(0x3001) && tok_is_bert_punct(0x2014)); /* 、 — */
    CHECK(!tok_is_bert_punct('a') && !tok_is_bert_punct(0x4E2D));
    CHECK(tok_is_whitespace(' ') && tok_is_whitespace(0x3000) && tok_is_whitespace(0xA0));
    CHECK(!tok_is_whitespace(0x200B));
    CHECK(tok_is_bert_control(0x200B) && tok_is_bert_control(0x7F) && !tok_is_bert_control('\n'));
    CHECK(tok_is_chinese(0x4E2D) && !tok_is_chinese(0x3042));
    uint32_t l[3];
    CHECK(tok_lower('A', l) == 1 && l[0] == 'a');
    CHECK(tok_lower(0x130, l) == 2 && l[0] == 'i' && l[1] == 0x307); /* İ -> i + dot above */
    CHECK(tok_lower(0x3A3, l) == 1 && l[0] == 0x3C3);                /* Σ -> σ, no final sigma */
    uint32_t d[20];
    CHECK(tok_decompose(0xE9, 0, d, 20) == 2 && d[0] == 'e' && d[1] == 0x301);
    CHECK(tok_decompose(0xFB01, 1, d, 20) == 2 && d[0] == 'f' && d[1] == 'i');
    CHECK(tok_decompose(0xFB01, 0, d, 20) == 1 && d[0] == 0xFB01);
}

static void load_buf(tok_buf *b, const char *s) {
    b->len = 0;
    size_t n = strlen(s);
    tok_buf_reserve(b, n);
    memcpy(b->b, s, n);
    for (size_t i = 0; i < n;) {
        uint32_t l = (uint32_t)tok_utf8_len((uint8_t)s[i]);
        for (uint32_t k = 0; k < l; k++) b->al[i + k] = (tok_span){(uint32_t)i, (uint32_t)(i + l)};
        i += l;
    }
    b->len = n;
}

static void test_bert_normalizer(void) {
    tok_normalizer n = {0};
    n.type = TOK_N_BERT;
    n.clean_text = n.chinese = n.strip_accents = n.lowercase = 1;
    tok_buf b = {0};
    tok_norm_scratch s = {0};
    load_buf(&b, "H\xC3\xA9llo\t\xE4\xB8\xAD\x01!"); /* "Héllo\t中\x01!" */
    CHECK(tok_norm_apply(&n, &b, &s) == 0);
    CHECK_EQ_INT(b.len, strlen("hello  \xE4\xB8\xAD !"));
    CHECK(!memcmp(b.b, "hello  \xE4\xB8\xAD !", b.len));
    /* the e came from é: its span is é's two bytes [1, 3) */
    CHECK_EQ_INT(b.al[1].s, 1);
    CHECK_EQ_INT(b.al[1].e, 3);
    /* the spaces around 中 carry 中's span [7, 10) */
    CHECK_EQ_INT(b.al[6].s, 7);
    CHECK_EQ_INT(b.al[10].e, 10);
    /* \x01 was removed: '!' keeps its own span */
    CHECK_EQ_INT(b.al[b.len - 1].s, 11);
    /* no lowercase: accents stay (strip_accents follows lowercase when null) */
    n.lowercase = n.strip_accents = 0;
    load_buf(&b, "\xC3\x89T\xC3\xA9");
    CHECK(tok_norm_apply(&n, &b, &s) == 0);
    CHECK(b.len == 5 && !memcmp(b.b, "\xC3\x89T\xC3\xA9", 5));
    tok_buf_free(&b);
    tok_buf_free(&s.tmp);
    free(s.cps.p);
}

static void test_nfc_nfd(void) {
    tok_buf b = {0};
    tok_norm_scratch s = {0};
    load_buf(&b, "e\xCC\x81"); /* e + combining acute */
    CHECK(tok_unorm_apply(TOK_N_NFC, &b, &s) == 0);
    CHECK(b.len == 2 && !memcmp(b.b, "\xC3\xA9", 2));
    CHECK_EQ_INT(b.al[0].s, 0);
    load_buf(&b, "\xC3\xA9");
    CHECK(tok_unorm_apply(TOK_N_NFD, &b, &s) == 0);
    CHECK(b.len == 3 && !memcmp(b.b, "e\xCC\x81", 3));
    CHECK(b.al[2].s == 0 && b.al[2].e == 2);
    /* canonical reordering: dot below (220) before acute (230) */
    load_buf(&b, "a\xCC\x81\xCC\xA3");
    CHECK(tok_unorm_apply(TOK_N_NFD, &b, &s) == 0);
    CHECK(b.len == 5 && !memcmp(b.b, "a\xCC\xA3\xCC\x81", 5));
    CHECK(b.al[1].s == 1 && b.al[3].s == 3); /* spans stay in place (HF) */
    tok_buf_free(&b);
    tok_buf_free(&s.tmp);
    free(s.cps.p);
}

static void test_bert_pretokenizer(void) {
    tok_pretok p = {0};
    p.type = TOK_P_BERT;
    tok_buf b = {0};
    tok_pre_scratch ps = {0};
    load_buf(&b, "  hi,there!! x\xE3\x80\x81y ");
    tok_pieces_push(&ps.pcs[0], 0, (uint32_t)b.len);
    tok_pre_state st = {&b, &ps.pcs[0], 0};
    CHECK(tok_pre_stage(&p, &st, 1, &ps) == 0);
    const char *want[] = {"hi", ",", "there", "!", "!", "x", "\xE3\x80\x81", "y"};
    CHECK_EQ_INT(st.pcs->n, 8);
    for (size_t i = 0; i < st.pcs->n && i < 8; i++)
        CHECK(st.pcs->p[i].len == strlen(want[i]) && !memcmp(st.buf->b + st.pcs->p[i].off, want[i], strlen(want[i])));
    tok_buf_free(&b);
    free(ps.pcs[0].p); free(ps.pcs[1].p); free(ps.marks.p);
}

static tok_tokenizer *tiny(const char *extra_model) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"added_tokens\":[{\"id\":0,\"content\":\"[UNK]\",\"special\":true},"
             "{\"id\":1,\"content\":\"[CLS]\",\"special\":true},{\"id\":2,\"content\":\"[SEP]\",\"special\":true}],"
             "\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":true},"
             "\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
             "\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"[SEP]\",2],\"cls\":[\"[CLS]\",1]},"
             "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",%s\"vocab\":{\"[UNK]\":0,\"[CLS]\":1,"
             "\"[SEP]\":2,\"un\":3,\"##aff\":4,\"##able\":5,\"aff\":6,\"!\":7,\"a\":8,\"##a\":9}}}",
             extra_model);
    posy_err err = {0};
    tok_tokenizer *t = tok_load_json(json, strlen(json), &err);
    CHECK_MSG(t != NULL, "%s", err.msg);
    return t;
}

static void test_wordpiece(void) {
    tok_tokenizer *t = tiny("\"max_input_chars_per_word\":9,");
    if (!t) return;
    tok_encoding e = {0};
    tok_opts o = {1, 0, TOK_TRUNC_RIGHT};
    posy_err err = {0};
    CHECK(tok_encode(t, "Unaffable! unx aaaaa aaaaaaaaaa", 31, &o, &e, &err) == 0);
    int32_t want[] = {1, 3, 4, 5, 7, 0, 8, 9, 9, 9, 9, 0, 2};
    CHECK_EQ_INT(e.n, 13);
    for (int i = 0; i < 13 && i < e.n; i++) CHECK_EQ_INT(e.ids[i], want[i]);
    CHECK(e.offsets[2] == 0 && e.offsets[3] == 2);     /* un */
    CHECK(e.offsets[10] == 11 && e.offsets[11] == 14); /* unx -> [UNK] spans the word */
    CHECK(e.special_mask[0] == 1 && e.special_mask[1] == 0 && e.special_mask[12] == 1);
    /* truncation keeps the specials */
    o.max_len = 4;
    CHECK(tok_encode(t, "Unaffable! unx", 14, &o, &e, &err) == 0);
    CHECK(e.n == 4 && e.ids[0] == 1 && e.ids[1] == 3 && e.ids[2] == 4 && e.ids[3] == 2);
    o.trunc_dir = TOK_TRUNC_LEFT;
    CHECK(tok_encode(t, "Unaffable! unx", 14, &o, &e, &err) == 0);
    CHECK(e.n == 4 && e.ids[1] == 7 && e.ids[2] == 0);
    o.max_len = 1;
    CHECK_EQ_INT(tok_encode(t, "a", 1, &o, &e, &err), POSY_E_INVALID);
    /* special token in the text */
    o.max_len = 0;
    CHECK(tok_encode(t, "a [SEP]a", 8, &o, &e, &err) == 0);
    CHECK(e.n == 5 && e.ids[2] == 2 && e.offsets[4] == 2 && e.offsets[5] == 7 && e.special_mask[2] == 0);
    /* invalid UTF-8 is an error, not a crash */
    CHECK_EQ_INT(tok_encode(t, "a\xFFz", 3, &o, &e, &err), POSY_E_INVALID);
    CHECK_STR_CONTAINS(err.msg, "UTF-8");
    CHECK_EQ_INT(tok_num_special_single(t), 2);
    CHECK_EQ_INT(tok_token_to_id(t, "##able"), 5);
    CHECK(!strcmp(tok_id_to_token(t, 4), "##aff"));
    CHECK(!strcmp(tok_model_type(t), "WordPiece"));
    tok_encoding_free(&e);
    tok_free(t);
}

typedef struct { const tok_tokenizer *t; int ok; } thr_arg;
static void *thr(void *p) {
    thr_arg *a = p;
    tok_encoding e = {0};
    tok_opts o = {1, 0, TOK_TRUNC_RIGHT};
    a->ok = 1;
    for (int i = 0; i < 2000; i++) {
        if (tok_encode(a->t, "Unaffable! un aff a", 19, &o, &e, NULL) || e.n != 9 || e.ids[3] != 5) a->ok = 0;
    }
    tok_encoding_free(&e);
    return NULL;
}

static void test_threads(void) {
    tok_tokenizer *t = tiny("");
    if (!t) return;
    pthread_t th[4];
    thr_arg a[4];
    for (int i = 0; i < 4; i++) { a[i].t = t; pthread_create(&th[i], NULL, thr, &a[i]); }
    for (int i = 0; i < 4; i++) { pthread_join(th[i], NULL); CHECK(a[i].ok); }
    tok_free(t);
}

/* The batch API gives, text by text, what tok_encode gives, on any thread
 * count, and reports the first failing text. */
static void test_batch(void) {
    posy_err err = {0};
    tok_tokenizer *t = tok_load_file("tests/fixtures/tokenizers/bpe_qwen2.json", &err);
    CHECK_MSG(t != NULL, "%s", err.msg);
    if (!t) return;
    enum { N = 3000 };
    static char buf[N][64];
    const char *texts[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        snprintf(buf[i], sizeof buf[i], "text %d: Hello wörld %d, it's <|im_end|> x%dy", i, i * 7919 % 1000, i);
        texts[i] = buf[i];
        lens[i] = strlen(buf[i]);
    }
    tok_encoding *b = calloc(N, sizeof *b), one = {0};
    tok_opts o = {1, 0, TOK_TRUNC_RIGHT};
    for (int threads = 1; threads <= 4; threads += 3) {
        int failed = 7;
        CHECK_EQ_INT(tok_encode_batch(t, texts, lens, NULL, NULL, N, &o, b, threads, &failed, &err), 0);
        CHECK_EQ_INT(failed, -1);
        int same = 1;
        for (int i = 0; i < N; i++) {
            tok_encode(t, texts[i], lens[i], &o, &one, &err);
            same &= one.n == b[i].n && !memcmp(one.ids, b[i].ids, (size_t)one.n * 4) &&
                    !memcmp(one.offsets, b[i].offsets, (size_t)one.n * 8);
        }
        CHECK_MSG(same, "threads=%d", threads);
    }
    lens[2500] = 3;
    buf[2500][1] = (char)0xFF; /* invalid UTF-8 */
    int failed = -1;
    CHECK_EQ_INT(tok_encode_batch(t, texts, lens, NULL, NULL, N, &o, b, 4, &failed, &err), POSY_E_INVALID);
    CHECK_EQ_INT(failed, 2500);
    for (int i = 0; i < N; i++) tok_encoding_free(&b[i]);
    free(b);
    tok_encoding_free(&one);
    tok_free(t);
}

static void expect_load_error(const char *json, const char *needle) {
    posy_err err = {0};
    tok_tokenizer *t = tok_load_json(json, strlen(json), &err);
    CHECK_MSG(t == NULL, "loaded: %s", json);
    tok_free(t);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "error '%s' lacks '%s'", err.msg, needle);
}

static void test_loader_errors(void) {
    expect_load_error("", "not valid JSON");
    expect_load_error("{\"model\":", "not valid JSON");
    expect_load_error("[]", "top level");
    expect_load_error("{}", "model");
    expect_load_error("{\"model\":{\"type\":\"WordPiece\",\"vocab\":[]}}", "model.vocab");
    expect_load_error("{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"a\":\"x\"}}}", "model.vocab['a']");
    expect_load_error("{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"a\":2000000000}}}", "out of range");
    expect_load_error("{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"a\":-1}}}", "out of range");
    expect_load_error("{\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"[UNK]\",\"vocab\":{\"a\":0}}}", "model.unk_token");
    expect_load_error("{\"model\":{\"type\":\"Magic\"}}", "model.type");
    const char *ok_model = "\"model\":{\"type\":\"WordPiece\",\"unk_token\":\"a\",\"vocab\":{\"a\":0}}";
    char j[1024];
    snprintf(j, sizeof j, "{%s,\"normalizer\":{\"type\":\"Nope\"}}", ok_model);
    expect_load_error(j, "normalizer.type");
    snprintf(j, sizeof j, "{%s,\"normalizer\":{\"type\":\"BertNormalizer\",\"lowercase\":\"yes\"}}", ok_model);
    expect_load_error(j, "normalizer.lowercase");
    snprintf(j, sizeof j, "{%s,\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}", ok_model);
    expect_load_error(j, "pre_tokenizer.pattern.Regex");
    snprintf(j, sizeof j, "{%s,\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":1}]}}", ok_model);
    expect_load_error(j, "pre_tokenizer.pretokenizers[0].type");
    snprintf(j, sizeof j, "{%s,\"post_processor\":{\"type\":\"BertProcessing\",\"sep\":[\"x\"],\"cls\":[\"y\",1]}}", ok_model);
    expect_load_error(j, "post_processor.sep");
    snprintf(j, sizeof j, "{%s,\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"[X]\"}}],\"pair\":[],\"special_tokens\":{}}}", ok_model);
    expect_load_error(j, "[X]");
    snprintf(j, sizeof j, "{%s,\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"!!!\"}}", ok_model);
    expect_load_error(j, "not valid base64");
    snprintf(j, sizeof j, "{%s,\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"/////wAAAAA=\"}}", ok_model);
    expect_load_error(j, "corrupt");
    snprintf(j, sizeof j, "{%s,\"added_tokens\":[{\"id\":0}]}", ok_model);
    expect_load_error(j, "added_tokens[0].content");
    /* hostile nesting is bounded */
    char deep[4096];
    size_t k = (size_t)snprintf(deep, sizeof deep, "{%s,\"normalizer\":", ok_model);
    for (int i = 0; i < 40; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "{\"type\":\"Sequence\",\"normalizers\":[");
    k += (size_t)snprintf(deep + k, sizeof deep - k, "{\"type\":\"NFC\"}");
    for (int i = 0; i < 40; i++) k += (size_t)snprintf(deep + k, sizeof deep - k, "]}");
    snprintf(deep + k, sizeof deep - k, "}");
    expect_load_error(deep, "nested too deeply");
    posy_err err = {0};
    CHECK(tok_load_file("/nonexistent/tokenizer.json", &err) == NULL);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/tokenizer.json");
}

static void test_minilm_file(void) {
    posy_err err = {0};
    tok_tokenizer *t = tok_load_file("models/all-MiniLM-L6-v2/tokenizer.json", &err);
    if (!t) { printf("  (skipped: %s)\n", err.msg); return; }
    tok_encoding e = {0};
    tok_opts o = {1, 0, TOK_TRUNC_RIGHT};
    CHECK(tok_encode(t, "hi [SEP] there", 14, &o, &e, &err) == 0);
    int32_t want[] = {101, 7632, 102, 2045, 102};
    CHECK_EQ_INT(e.n, 5);
    for (int i = 0; i < 5 && i < e.n; i++) CHECK_EQ_INT(e.ids[i], want[i]);
    CHECK_EQ_INT(tok_vocab_size(t), 30522);
    tok_encoding_free(&e);
    tok_free(t);
}

TEST_MAIN(TEST(test_vocab_map), TEST(test_utf8), TEST(test_classes), TEST(test_bert_normalizer),
          TEST(test_nfc_nfd), TEST(test_bert_pretokenizer), TEST(test_wordpiece), TEST(test_threads), TEST(test_batch),
          TEST(test_loader_errors), TEST(test_minilm_file))

/* test_cli_io: the input and output formats of `posy embed`, without a model.
 *
 * The CLI's files live in the posy executable, not in a library, so this
 * test compiles the two it checks (cli_texts.c, cli_vecout.c) into itself.
 * Floats: every JSON number must read back (strtof) as the same float32 and
 * be the shortest such decimal, checked against a brute-force search over
 * precisions on random bit patterns.  .npy: the header is what NumPy v1.0
 * expects (magic, version, 64-byte alignment, shape) and rows are
 * little-endian float32.  Texts: line endings, empty lines, JSONL strings
 * and objects, and errors that name the file and line.
 */
#include <stdint.h>
#include <unistd.h>

#include "cli/cli_texts.c"
#include "cli/cli_vecout.c"
#include "posy_file.h"
#include "posy_test.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rng_u32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* Fewest %g digits that round-trip, by trying every precision. */
static int shortest_prec(float v) {
    char b[64];
    for (int p = 1; p <= 9; p++) {
        snprintf(b, sizeof b, "%.*g", p, (double)v);
        if (strtof(b, NULL) == v) return p;
    }
    return 99;
}

static int sig_digits(const char *s) {
    int n = 0, started = 0;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9') continue;
        if (*s != '0') started = 1;
        if (started) n++;
    }
    return n;
}

static void test_float_roundtrip_and_shortest(void) {
    char buf[32];
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = rng_u32();
        if (i % 2) u = (u & 0x807fffffu) | ((uint32_t)(100 + rng_u32() % 40) << 23); /* |v| ~ 1e-8..1e4 */
        float v;
        memcpy(&v, &u, 4);
        if (!isfinite(v) || v == 0.0f) continue;
        int n = cli_fmt_float(v, buf);
        CHECK_EQ_INT(n, (int)strlen(buf));
        if (strtof(buf, NULL) != v || sig_digits(buf) > shortest_prec(v)) {
            if (bad++ < 5) fprintf(stderr, "  %a printed as %s (shortest %d digits)\n", (double)v, buf,
                                   shortest_prec(v));
        }
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_float_specials(void) {
    char buf[32];
    cli_fmt_float(0.0f, buf);
    CHECK(strcmp(buf, "0.0") == 0);
    cli_fmt_float(-0.0f, buf);
    CHECK(strcmp(buf, "-0.0") == 0);
    cli_fmt_float(NAN, buf);
    CHECK(strcmp(buf, "null") == 0);
    cli_fmt_float(-INFINITY, buf);
    CHECK(strcmp(buf, "null") == 0);
    cli_fmt_float(1.0f, buf);
    CHECK(strcmp(buf, "1") == 0);
    cli_fmt_float(0.1f, buf);
    CHECK(strcmp(buf, "0.1") == 0);
    cli_fmt_float(-0.0123456789f, buf);
    CHECK(strtof(buf, NULL) == -0.0123456789f);
    cli_fmt_float(1e-45f, buf);                 /* smallest subnormal */
    CHECK(strtof(buf, NULL) == 1e-45f);
    cli_fmt_float(3.4028235e38f, buf);
    CHECK(strtof(buf, NULL) == 3.4028235e38f);
}

static void test_npy_layout(void) {
    char path[] = "/tmp/posy_test_npy_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    cli_vecout o;
    posy_err err;
    CHECK_EQ_INT(cli_vecout_open(&o, path, CLI_OUT_AUTO, 2, 3, &err), 0);  /* AUTO, no .npy suffix */
    CHECK_EQ_INT(o.fmt, CLI_OUT_JSONL);
    cli_vecout_close(&o, &err);
    CHECK_EQ_INT(cli_vecout_open(&o, path, CLI_OUT_NPY, 2, 3, &err), 0);
    float rows[2][3] = {{1.0f, -2.5f, 0.125f}, {3.0f, 4.0f, -0.0f}};
    CHECK_EQ_INT(cli_vecout_write(&o, rows[0], &err), 0);
    CHECK_EQ_INT(cli_vecout_write(&o, rows[1], &err), 0);
    CHECK(cli_vecout_write(&o, rows[1], &err) != 0);      /* more rows than announced */
    CHECK_EQ_INT(cli_vecout_close(&o, &err), 0);

    size_t size = 0;
    char *d = posy_file_read(path, 1 << 20, &size, &err);
    CHECK(d != NULL);
    if (!d) return;
    CHECK(memcmp(d, "\x93NUMPY\x01\x00", 8) == 0);
    size_t hlen = (unsigned char)d[8] | ((size_t)(unsigned char)d[9] << 8);
    CHECK_EQ_INT((10 + hlen) % 64, 0);
    CHECK_EQ_INT(size, 10 + hlen + 24);
    CHECK_EQ_INT(d[10 + hlen - 1], '\n');
    char header[256] = {0};
    memcpy(header, d + 10, hlen < 255 ? hlen : 255);
    CHECK_STR_CONTAINS(header, "'descr': '<f4'");
    CHECK_STR_CONTAINS(header, "'fortran_order': False");
    CHECK_STR_CONTAINS(header, "'shape': (2, 3)");
    const unsigned char *p = (const unsigned char *)d + 10 + hlen + 4;   /* rows[0][1] = -2.5 */
    uint32_t u = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float v;
    memcpy(&v, &u, 4);
    CHECK(v == -2.5f);
    free(d);
    unlink(path);
}

static void test_jsonl_rows(void) {
    char path[] = "/tmp/posy_test_jsonl_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    cli_vecout o;
    posy_err err;
    CHECK_EQ_INT(cli_vecout_open(&o, path, CLI_OUT_JSONL, 2, 2, &err), 0);
    float a[2] = {0.5f, -1e-7f}, b[2] = {123456.0f, 0.3333333f};
    cli_vecout_write(&o, a, &err);
    CHECK(cli_vecout_close(&o, &err) != 0);    /* one row missing: reported */
    size_t size;
    char *d = posy_file_read(path, 1 << 20, &size, &err);
    CHECK(d && strcmp(d, "[0.5,-1e-07]\n") == 0);
    free(d);
    CHECK_EQ_INT(cli_vecout_open(&o, path, CLI_OUT_JSONL, 1, 2, &err), 0);
    cli_vecout_write(&o, b, &err);
    CHECK_EQ_INT(cli_vecout_close(&o, &err), 0);
    d = posy_file_read(path, 1 << 20, &size, &err);
    CHECK(d && strcmp(d, "[123456,0.3333333]\n") == 0);
    free(d);
    unlink(path);
}

static char *write_tmp(const char *suffix, const char *content) {
    static char path[64];
    snprintf(path, sizeof path, "/tmp/posy_test_texts_XXXXXX%s", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd < 0) return NULL;
    ssize_t n = write(fd, content, strlen(content));
    close(fd);
    return n == (ssize_t)strlen(content) ? path : NULL;
}

static void test_texts_plain(void) {
    char *p = write_tmp(".txt", "first\n\ncrlf\r\n  spaced  \nlast-no-newline");
    cli_texts t = {0};
    posy_err err;
    CHECK_EQ_INT(cli_texts_read(&t, p, CLI_IN_AUTO, &err), 0);
    CHECK_EQ_INT(t.n, 5);
    if (t.n == 5) {
        CHECK(strcmp(t.s[0], "first") == 0);
        CHECK(t.len[1] == 0 && t.s[1][0] == '\0');
        CHECK(strcmp(t.s[2], "crlf") == 0);
        CHECK(strcmp(t.s[3], "  spaced  ") == 0);
        CHECK(strcmp(t.s[4], "last-no-newline") == 0);
    }
    cli_texts_free(&t);
    unlink(p);
}

static void test_texts_jsonl(void) {
    char *p = write_tmp(".jsonl", "\"a\\nb\"\n{\"text\": \"caf\\u00e9\", \"id\": 7}\n\"\"\n");
    cli_texts t = {0};
    posy_err err;
    CHECK_EQ_INT(cli_texts_read(&t, p, CLI_IN_AUTO, &err), 0);
    CHECK_EQ_INT(t.n, 3);
    if (t.n == 3) {
        CHECK(strcmp(t.s[0], "a\nb") == 0);
        CHECK(strcmp(t.s[1], "caf\xc3\xa9") == 0);
        CHECK_EQ_INT(t.len[2], 0);
    }
    cli_texts_free(&t);
    unlink(p);
}

static void test_texts_json_array(void) {
    char *p = write_tmp(".json", "  [\"one\", {\"text\": \"two\"},\n \"\"]\n");
    cli_texts t = {0};
    posy_err err;
    CHECK_EQ_INT(cli_texts_read(&t, p, CLI_IN_AUTO, &err), 0);
    CHECK_EQ_INT(t.n, 3);
    if (t.n == 3) CHECK(strcmp(t.s[0], "one") == 0 && strcmp(t.s[1], "two") == 0 && t.len[2] == 0);
    cli_texts_free(&t);
    unlink(p);
    p = write_tmp(".json", "[\"one\", 2]");
    posy_err_clear(&err);
    CHECK(cli_texts_read(&t, p, CLI_IN_AUTO, &err) != 0);
    char want[80];
    snprintf(want, sizeof want, "%s[1]", p);
    CHECK_STR_CONTAINS(err.msg, want);
    cli_texts_free(&t);
    unlink(p);
    /* One JSON string per line in a .json file is still JSONL. */
    p = write_tmp(".json", "\"a\"\n\"b\"\n");
    CHECK_EQ_INT(cli_texts_read(&t, p, CLI_IN_AUTO, &err), 0);
    CHECK_EQ_INT(t.n, 2);
    cli_texts_free(&t);
    unlink(p);
}

static void test_texts_errors(void) {
    const char *bad[] = {"\"ok\"\n{\"text\": 3}\n", "\"ok\"\n[1,2]\n", "\"ok\"\nnot json\n",
                         "\"ok\"\n\n\"after blank\"\n", "\"ok\"\n{\"id\": 1}\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *p = write_tmp(".jsonl", bad[i]);
        cli_texts t = {0};
        posy_err err;
        posy_err_clear(&err);
        CHECK(cli_texts_read(&t, p, CLI_IN_AUTO, &err) != 0);
        char want[80];
        snprintf(want, sizeof want, "%s:2:", p);
        CHECK_STR_CONTAINS(err.msg, want);
        cli_texts_free(&t);
        unlink(p);
    }
    cli_texts t = {0};
    posy_err err;
    CHECK(cli_texts_read(&t, "/nonexistent/posy/in.txt", CLI_IN_AUTO, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/posy/in.txt");
    /* A forced format overrides the extension. */
    char *p = write_tmp(".txt", "\"quoted\"\n");
    CHECK_EQ_INT(cli_texts_read(&t, p, CLI_IN_JSONL, &err), 0);
    CHECK(t.n == 1 && strcmp(t.s[0], "quoted") == 0);
    cli_texts_free(&t);
    unlink(p);
}

TEST_MAIN(TEST(test_float_roundtrip_and_shortest), TEST(test_float_specials), TEST(test_npy_layout),
          TEST(test_jsonl_rows), TEST(test_texts_plain), TEST(test_texts_jsonl), TEST(test_texts_json_array),
          TEST(test_texts_errors))

/* test_gw_float: the JSON float formatter and base64 encoder.
 *
 * Round trip: every formatted float parses back (strtof) to the same bits,
 * over 3 million random bit patterns, every power of two (normal and
 * subnormal), the subnormal/normal boundaries, zeros of both signs and
 * values near powers of ten.  The text must be a JSON number and use at
 * most 9 significant digits.  base64 is checked against RFC 4648 vectors
 * and a bit-by-bit reference encoder.
 */
#include <float.h>
#include <stdint.h>

#include "gw_float.h"
#include "posy_test.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* JSON number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_json_number(const char *s) {
    if (*s == '-') s++;
    if (*s == '0') s++;
    else if (*s >= '1' && *s <= '9') while (*s >= '0' && *s <= '9') s++;
    else return 0;
    if (*s == '.') {
        s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!(*s >= '0' && *s <= '9')) return 0;
        while (*s >= '0' && *s <= '9') s++;
    }
    return *s == '\0';
}

/* Digits from the first to the last nonzero digit of the mantissa. */
static int sig_digits(const char *s) {
    int n = 0, started = 0, last = 0;
    for (; *s && *s != 'e'; s++) {
        if (*s < '0' || *s > '9') continue;
        if (*s != '0') started = 1;
        if (started) n++;
        if (*s != '0') last = n;
    }
    return last;
}

static int bad = 0;
static void check_one(uint32_t bits) {
    float f;
    memcpy(&f, &bits, 4);
    if ((bits & 0x7f800000u) == 0x7f800000u) return;   /* NaN/Inf: test_text_form */
    char buf[GW_FLOAT_MAX + 1];
    int n = gw_float_fmt(f, buf);
    buf[n] = '\0';
    float g = strtof(buf, NULL);
    uint32_t gb;
    memcpy(&gb, &g, 4);
    if (gb != bits || n > GW_FLOAT_MAX) {
        if (bad++ < 10) fprintf(stderr, "  %08x (%.9g) -> '%s' -> %08x\n", bits, (double)f, buf, gb);
    }
}

static void test_round_trip_random(void) {
    bad = 0;
    for (int i = 0; i < 3000000; i++) {
        uint32_t b = next_u32();
        if ((b & 0x7f800000u) == 0x7f800000u) continue;   /* NaN/Inf: separate test */
        check_one(b);
    }
    /* Embedding-like values: uniform in (-1, 1). */
    for (int i = 0; i < 1000000; i++) {
        float f = (float)((double)next_u32() / 4294967296.0 * 2 - 1);
        uint32_t b;
        memcpy(&b, &f, 4);
        check_one(b);
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_round_trip_edges(void) {
    bad = 0;
    for (uint32_t e = 0; e < 255; e++)            /* every power of two and its neighbours */
        for (uint32_t s = 0; s < 2; s++) {
            uint32_t b = s << 31 | e << 23;
            check_one(b);
            check_one(b + 1);
            if (b & 0x7fffffffu) check_one(b - 1);
            check_one(b | 0x7fffffu);
        }
    for (uint32_t m = 1; m < 4096; m++) {          /* smallest subnormals */
        check_one(m);
        check_one(0x80000000u | m);
        check_one(0x00800000u - m);                /* largest subnormals */
    }
    float specials[] = {0.1f, 0.2f, 0.3f, 1.0f, 10.0f, 100.0f, 1e9f, 1e10f, 123456789.0f, 1e-5f, 1e-4f,
                        9.99999e-5f, 0.001f, FLT_MAX, FLT_MIN, FLT_TRUE_MIN, 3.4e38f, 1e-45f, 16777216.0f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
        uint32_t b;
        memcpy(&b, &specials[i], 4);
        check_one(b);
        check_one(b + 1);
        check_one(b - 1);
    }
    for (int e = -45; e <= 38; e++) {               /* near every power of ten */
        char t[16];
        snprintf(t, sizeof t, "1e%d", e);
        float f = strtof(t, NULL);
        uint32_t b;
        memcpy(&b, &f, 4);
        for (int d = -3; d <= 3; d++) check_one(b + (uint32_t)d);
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_text_form(void) {
    char buf[GW_FLOAT_MAX + 1];
    struct { float f; const char *want; } cases[] = {
        {0.0f, "0.0"}, {-0.0f, "-0.0"}, {1.0f, "1.0"}, {0.5f, "0.5"}, {-0.25f, "-0.25"},
        {100.0f, "100.0"}, {1e-5f, "9.99999975e-06"}, {0.0001f, "9.99999975e-05"},
        {0.001f, "0.00100000005"}, {123.5f, "123.5"}, {1e10f, "1e+10"}, {FLT_TRUE_MIN, "1.40129846e-45"},
        {3.0e38f, "3.00000001e+38"}, {0.0625f, "0.0625"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int n = gw_float_fmt(cases[i].f, buf);
        buf[n] = 0;
        CHECK_MSG(strcmp(buf, cases[i].want) == 0, "%.9g -> '%s', want '%s'", (double)cases[i].f, buf, cases[i].want);
    }
    int nonjson = 0, long9 = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t b = next_u32();
        if ((b & 0x7f800000u) == 0x7f800000u) continue;
        float f;
        memcpy(&f, &b, 4);
        int n = gw_float_fmt(f, buf);
        buf[n] = 0;
        nonjson += !is_json_number(buf);
        long9 += sig_digits(buf) > 9;
    }
    CHECK_EQ_INT(nonjson, 0);
    CHECK_EQ_INT(long9, 0);
    /* NaN and infinities keep the document valid. */
    float inf = (float)HUGE_VAL, nan = (float)NAN;
    int n = gw_float_fmt(inf, buf); buf[n] = 0; CHECK(strcmp(buf, "null") == 0);
    n = gw_float_fmt(-inf, buf); buf[n] = 0; CHECK(strcmp(buf, "null") == 0);
    n = gw_float_fmt(nan, buf); buf[n] = 0; CHECK(strcmp(buf, "null") == 0);
}

static void test_json_array(void) {
    gw_buf b = {0};
    float v[] = {0.5f, -1.0f, 0.1f};
    gw_json_floats(&b, v, 3);
    gw_buf_putc(&b, 0);
    CHECK(strcmp(b.p, "[0.5,-1.0,0.100000001]") == 0);
    b.len = 0;
    gw_json_floats(&b, v, 0);
    gw_buf_putc(&b, 0);
    CHECK(strcmp(b.p, "[]") == 0);
    gw_buf_free(&b);
}

/* gw_json_floats has an inlined fast path for 1e-4 <= |f| < 1 and, on AVX2
 * CPUs, an 8-wide path for groups of such floats; its text must be exactly
 * gw_float_fmt's (which round-trips), float for float, on both paths. */
static void array_matches(void) {
    enum { N = 1000 };
    static float v[N];
    gw_buf b = {0}, want = {0};
    int mismatches = 0;
    for (int round = 0; round < 2000; round++) {
        for (int i = 0; i < N; i++) {
            uint32_t r = next_u32();
            if (round % 4 == 3) {   /* any bit pattern, NaN/Inf included */
                memcpy(&v[i], &r, 4);
            } else {                /* embedding-like, and the fast path's edges */
                v[i] = (float)((double)r / 4294967296.0 * 2 - 1) * (round % 4 == 1 ? 1e-3f : 1.0f);
                if (i % 97 == 0) {
                    static const uint32_t edges[] = {0x38d1b717u, 0x38d1b718u, 0x3a83126eu, 0x3a83126fu, 0x3c23d70au,
                                                     0x3c23d70bu, 0x3dcccccdu, 0x3dccccccu, 0x3f7fffffu, 0x3f800000u};
                    uint32_t e = edges[(i / 97) % 10] | (r & 0x80000000u);
                    memcpy(&v[i], &e, 4);
                }
            }
        }
        int len = N - round % 8;   /* tails of every length after the 8-wide groups */
        b.len = want.len = 0;
        gw_json_floats(&b, v, (size_t)len);
        gw_buf_putc(&want, '[');
        for (int i = 0; i < len; i++) {
            char t[GW_FLOAT_MAX];
            if (i) gw_buf_putc(&want, ',');
            gw_buf_put(&want, t, (size_t)gw_float_fmt(v[i], t));
        }
        gw_buf_putc(&want, ']');
        if (b.len != want.len || memcmp(b.p, want.p, b.len)) mismatches++;
    }
    CHECK_EQ_INT(mismatches, 0);
    gw_buf_free(&b);
    gw_buf_free(&want);
}

static void test_array_fast_path_matches(void) {
    array_matches();            /* automatic: AVX2 where the CPU has it */
    gw_float_force_scalar(1);
    array_matches();
    gw_float_force_scalar(0);
}

/* Reference: one output character at a time from the bit stream. */
static size_t b64_ref(const unsigned char *s, size_t n, char *out) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t bitsn = n * 8, o = 0;
    for (size_t bit = 0; bit < bitsn; bit += 6) {
        int v = 0;
        for (int j = 0; j < 6; j++) {
            size_t q = bit + (size_t)j;
            int x = q < bitsn ? (s[q / 8] >> (7 - q % 8)) & 1 : 0;
            v = v << 1 | x;
        }
        out[o++] = a[v];
    }
    while (o % 4) out[o++] = '=';
    return o;
}

static void test_base64(void) {
    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    char out[64];
    for (int i = 0; i < 7; i++) {
        size_t n = gw_base64(in[i], strlen(in[i]), out);
        out[n] = 0;
        CHECK_MSG(strcmp(out, want[i]) == 0, "'%s' -> '%s'", in[i], out);
    }
    unsigned char buf[1030];
    char o1[1400], o2[1400];
    for (int len = 0; len < 1030; len += 7) {
        for (int i = 0; i < len; i++) buf[i] = (unsigned char)next_u32();
        size_t n1 = gw_base64(buf, (size_t)len, o1), n2 = b64_ref(buf, (size_t)len, o2);
        CHECK(n1 == n2 && memcmp(o1, o2, n1) == 0);
    }
    gw_buf b = {0};
    float v[2] = {1.0f, -2.0f};   /* 00 00 80 3f 00 00 00 c0 */
    gw_json_base64_floats(&b, v, 2);
    gw_buf_putc(&b, 0);
    CHECK(strcmp(b.p, "\"AACAPwAAAMA=\"") == 0);
    gw_buf_free(&b);
}

TEST_MAIN(TEST(test_round_trip_random), TEST(test_round_trip_edges), TEST(test_text_form), TEST(test_json_array), TEST(test_array_fast_path_matches),
          TEST(test_base64))

/* test_safetensors: the safetensors reader against valid, corrupt,
 * truncated and hostile files built in memory, sharded directories built
 * in a temporary folder, and the real all-MiniLM-L6-v2 weights when they
 * are present.  Every rejection must come back as an error that names the
 * file (the label) and leaves the eng_st_file empty. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_safetensors.h"
#include "posy_test.h"

#define MINILM "models/all-MiniLM-L6-v2/model.safetensors"

/* 8-byte little-endian `hlen`, then `hdr` (strlen), then `data`. */
static unsigned char *mk_raw(uint64_t hlen, const char *hdr, const void *data, size_t dlen, size_t *size) {
    size_t hl = strlen(hdr);
    *size = 8 + hl + dlen;
    unsigned char *b = malloc(*size ? *size : 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(b + 8, hdr, hl);
    if (dlen) memcpy(b + 8 + hl, data, dlen);
    return b;
}

static unsigned char *mk(const char *hdr, const void *data, size_t dlen, size_t *size) {
    return mk_raw(strlen(hdr), hdr, data, dlen, size);
}

/* Parse `hdr` + `dlen` zero bytes; expect failure whose message has `needle`. */
static void expect_bad(const char *hdr, size_t dlen, const char *needle) {
    unsigned char zeros[256] = {0};
    size_t n;
    unsigned char *b = mk(hdr, zeros, dlen, &n);
    eng_st_file f;
    posy_err err = {0};
    int rc = eng_st_parse(&f, b, n, "hostile.safetensors", &err);
    CHECK_MSG(rc != 0, "accepted: %s", hdr);
    if (rc) {
        CHECK_STR_CONTAINS(err.msg, "hostile.safetensors");
        CHECK_STR_CONTAINS(err.msg, needle);
        CHECK(f.tensors == NULL && f.n_tensors == 0);
    } else {
        eng_st_close(&f);
    }
    free(b);
}

/* The valid file used by several cases: F32 [2,2], F16 [3], BF16 [2], I64 [1], empty F32 [0,5]. */
static unsigned char *mk_valid(size_t *n) {
    static const char *hdr =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
        "\"h\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[16,22]},"
        "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[22,26]},"
        "\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[26,34]},"
        "\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[34,34]}}";
    unsigned char d[34];
    float w[4] = {1.0f, -2.5f, 3.25f, 1e-3f};
    memcpy(d, w, 16);
    const uint16_t h[3] = {0x3C00, 0xC000, 0x3800};   /* 1, -2, 0.5 */
    const uint16_t bf[2] = {0x3FC0, 0xC040};          /* 1.5, -3 */
    memcpy(d + 16, h, 6);
    memcpy(d + 22, bf, 4);
    int64_t id = 7;
    memcpy(d + 26, &id, 8);
    return mk(hdr, d, sizeof d, n);
}

static void test_valid(void) {
    size_t n;
    unsigned char *b = mk_valid(&n);
    eng_st_file f;
    posy_err err = {0};
    CHECK_EQ_INT(eng_st_parse(&f, b, n, "valid", &err), 0);
    CHECK_EQ_INT(f.n_tensors, 5);
    for (int i = 1; i < f.n_tensors; i++) CHECK(strcmp(f.tensors[i - 1].name, f.tensors[i].name) < 0);
    const eng_st_tensor *t = eng_st_find(&f, "w");
    CHECK(t && t->dtype == ENG_DT_F32 && t->ndim == 2 && t->shape[1] == 2 && t->numel == 4 && t->nbytes == 16);
    CHECK(t && (const unsigned char *)t->data == b + n - 34);
    t = eng_st_find(&f, "ids");
    CHECK(t && t->dtype == ENG_DT_OTHER && !strcmp(t->dtype_name, "I64"));
    t = eng_st_find(&f, "e");
    CHECK(t && t->numel == 0 && t->nbytes == 0);
    CHECK(eng_st_find(&f, "missing") == NULL);
    CHECK(eng_st_find(&f, "__metadata__") == NULL);

    float out[4];
    int64_t d22[2] = {2, 2}, d3[1] = {3}, d2[1] = {2}, d1[1] = {1};
    CHECK_EQ_INT(eng_st_read_f32(&f, "w", 2, d22, out, &err), 0);
    CHECK(out[0] == 1.0f && out[1] == -2.5f && out[2] == 3.25f && out[3] == 1e-3f);
    CHECK_EQ_INT(eng_st_read_f32(&f, "h", 1, d3, out, &err), 0);
    CHECK(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0.5f);
    CHECK_EQ_INT(eng_st_read_f32(&f, "b", 1, d2, out, &err), 0);
    CHECK(out[0] == 1.5f && out[1] == -3.0f);
    /* wrong shape, non-float dtype, missing tensor: errors naming file and tensor */
    CHECK(eng_st_read_f32(&f, "w", 1, d3, out, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "valid: tensor w has shape [2, 2]");
    CHECK_STR_CONTAINS(err.msg, "[3]");
    CHECK(eng_st_read_f32(&f, "ids", 1, d1, out, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "ids has dtype I64");
    CHECK(eng_st_read_f32(&f, "nope", 1, d1, out, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "valid: tensor nope not found");
    eng_st_close(&f);
    CHECK(f.tensors == NULL && f.n_tensors == 0);
    free(b);
}

/* A float tensor at an odd address is read bytewise (UBSan would flag a cast). */
static void test_unaligned(void) {
    const char *hdr = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}}";
    unsigned char d[9] = {0};
    float v[2] = {0.75f, -8.0f};
    memcpy(d + 1, v, 8);
    size_t n;
    unsigned char *b = mk(hdr, d, sizeof d, &n);
    eng_st_file f;
    posy_err err = {0};
    CHECK_EQ_INT(eng_st_parse(&f, b, n, "odd", &err), 0);
    float out[2] = {0};
    int64_t d2[1] = {2};
    CHECK_EQ_INT(eng_st_read_f32(&f, "x", 1, d2, out, &err), 0);
    CHECK(out[0] == 0.75f && out[1] == -8.0f);
    eng_st_close(&f);
    free(b);
}

/* A slice of a tensor (DeBERTa v1's per-head rows of its fused in_proj): F32 at an odd address and BF16,
 * converted from the slice's first element; a slice past the end, or an integer tensor, is -1. */
static void test_range(void) {
    const char *hdr = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[1,17]},"
                      "\"h\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[17,25]},"
                      "\"i\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[25,29]}}";
    unsigned char d[29] = {0};
    float v[4] = {0.75f, -8.0f, 3.0f, 0.5f};
    memcpy(d + 1, v, 16);
    const uint16_t hb[4] = {0x3F80, 0xC2F7, 0x4000, 0xBF00};   /* 1, -123.5, 2, -0.5 */
    for (int k = 0; k < 4; k++) {
        d[17 + 2 * k] = (unsigned char)(hb[k] & 0xff);
        d[18 + 2 * k] = (unsigned char)(hb[k] >> 8);
    }
    size_t n;
    unsigned char *b = mk(hdr, d, sizeof d, &n);
    eng_st_file f;
    posy_err err = {0};
    CHECK_EQ_INT(eng_st_parse(&f, b, n, "range", &err), 0);
    const eng_st_tensor *x = eng_st_find(&f, "x"), *h = eng_st_find(&f, "h"), *i = eng_st_find(&f, "i");
    CHECK(x && h && i);
    if (x && h && i) {
        float out[3] = {0};
        CHECK_EQ_INT(eng_st_tensor_range_to_f32(x, 1, 3, out), 0);
        CHECK(out[0] == -8.0f && out[1] == 3.0f && out[2] == 0.5f);
        CHECK_EQ_INT(eng_st_tensor_range_to_f32(h, 2, 2, out), 0);
        CHECK(out[0] == 2.0f && out[1] == -0.5f);
        CHECK_EQ_INT(eng_st_tensor_range_to_f32(h, 1, 1, out), 0);
        CHECK(out[0] == -123.5f);
        CHECK_EQ_INT(eng_st_tensor_range_to_f32(x, 4, 0, out), 0);   /* empty, at the end */
        CHECK_EQ_INT(eng_st_tensor_range_to_f32(x, 3, 2, out), -1);
        CHECK_EQ_INT(eng_st_tensor_range_to_f32(x, 5, 0, out), -1);
        CHECK_EQ_INT(eng_st_tensor_range_to_f32(i, 0, 1, out), -1);
    }
    eng_st_close(&f);
    free(b);
}

static void test_truncated_and_lengths(void) {
    size_t n;
    unsigned char *b = mk_valid(&n);
    eng_st_file f;
    posy_err err = {0};
    /* every strict prefix is rejected */
    for (size_t cut = 0; cut < n; cut++) {
        int rc = eng_st_parse(&f, b, cut, "cut", &err);
        CHECK_MSG(rc != 0, "prefix of %zu bytes accepted", cut);
        if (!rc) eng_st_close(&f);
    }
    CHECK(eng_st_parse(&f, b, n - 1, "cut", &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "outside the data area");
    CHECK(eng_st_parse(&f, b, 10, "cut", &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "exceeds the file");
    CHECK(eng_st_parse(&f, b, 0, "empty", &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "too short");
    CHECK(eng_st_parse(&f, NULL, 0, "null", &err) != 0);
    free(b);

    const char *h = "{}";
    uint64_t bad[] = {3, 1000, 1ull << 63, UINT64_MAX};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        b = mk_raw(bad[i], h, NULL, 0, &n);
        CHECK(eng_st_parse(&f, b, n, "len", &err) != 0);
        CHECK_STR_CONTAINS(err.msg, "exceeds the file");
        free(b);
    }
    /* header length 0: no JSON at all */
    b = mk_raw(0, "", NULL, 0, &n);
    CHECK(eng_st_parse(&f, b, n, "zero", &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "not valid JSON");
    free(b);
    /* an empty header object is a valid file with no tensors */
    b = mk(h, NULL, 0, &n);
    CHECK_EQ_INT(eng_st_parse(&f, b, n, "none", &err), 0);
    CHECK_EQ_INT(f.n_tensors, 0);
    CHECK(eng_st_find(&f, "x") == NULL);
    eng_st_close(&f);
    free(b);
}

static void test_bad_json(void) {
    expect_bad("{abc", 0, "not valid JSON");
    expect_bad("{\"a\":1", 0, "not valid JSON");
    expect_bad("[1,2]", 0, "not a JSON object");
    expect_bad("\"str\"", 0, "not valid JSON");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "not valid JSON");
    expect_bad("{\"__metadata__\":[1]}", 0, "__metadata__");
    expect_bad("{\"a\":5}", 0, "not an object");
    /* a NUL inside the header */
    size_t n;
    unsigned char *b = mk("{\"a\":\"x y\"}", NULL, 0, &n);
    b[8 + 7] = 0;
    eng_st_file f;
    posy_err err = {0};
    CHECK(eng_st_parse(&f, b, n, "nul", &err) != 0);
    free(b);
    /* deep nesting is refused by the JSON parser, not by a stack overflow */
    char deep[20010];
    memset(deep, '[', 20000);
    deep[20000] = 0;
    expect_bad(deep, 0, "not valid JSON");
}

static void test_bad_fields(void) {
    expect_bad("{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "unknown dtype 'Q4'");
    expect_bad("{\"a\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype missing");
    expect_bad("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype missing");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape[0]");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8, "shape[0]");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,\"2\"],\"data_offsets\":[0,8]}}", 8, "shape[1]");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":3,\"data_offsets\":[0,12]}}", 12, "not an array");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,12]}}", 12, "not an array");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
               "9 dimensions");
    expect_bad("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,4]}}", 4,
               "overflows");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}", 4,
               "need");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}", 4,
               "not valid JSON");
}

static void test_bad_offsets(void) {
    const char *f32 = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":";
    char h[256];
    snprintf(h, sizeof h, "%s[0,1000]}}", f32);
    expect_bad(h, 8, "outside the data area");
    snprintf(h, sizeof h, "%s[8,0]}}", f32);
    expect_bad(h, 8, "outside the data area");
    snprintf(h, sizeof h, "%s[-8,0]}}", f32);
    expect_bad(h, 8, "outside the data area");
    snprintf(h, sizeof h, "%s[0,4]}}", f32);
    expect_bad(h, 8, "need 8");
    snprintf(h, sizeof h, "%s[0,12]}}", f32);
    expect_bad(h, 12, "need 8");
    snprintf(h, sizeof h, "%s[0]}}", f32);
    expect_bad(h, 8, "data_offsets");
    snprintf(h, sizeof h, "%s[0,8,9]}}", f32);
    expect_bad(h, 8, "data_offsets");
    snprintf(h, sizeof h, "%s[0.0,8]}}", f32);
    expect_bad(h, 8, "data_offsets");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap");
    expect_bad("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8, "overlap");
    /* a hole between tensors is tolerated */
    unsigned char zeros[16] = {0};
    size_t n;
    unsigned char *b = mk("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", zeros, 16, &n);
    eng_st_file f;
    posy_err err = {0};
    CHECK_EQ_INT(eng_st_parse(&f, b, n, "holes", &err), 0);
    eng_st_close(&f);
    free(b);
}

static void test_half_conversions(void) {
    CHECK(eng_f16_to_f32(0x3C00) == 1.0f);
    CHECK(eng_f16_to_f32(0xC000) == -2.0f);
    CHECK(eng_f16_to_f32(0x7BFF) == 65504.0f);
    CHECK(eng_f16_to_f32(0x0400) == ldexpf(1.0f, -14));   /* smallest normal */
    CHECK(eng_f16_to_f32(0x0001) == ldexpf(1.0f, -24));   /* smallest subnormal */
    CHECK(eng_f16_to_f32(0x03FF) == ldexpf(1023.0f, -24)); /* largest subnormal */
    CHECK(eng_f16_to_f32(0x8000) == 0.0f && signbit(eng_f16_to_f32(0x8000)));
    CHECK(isinf(eng_f16_to_f32(0x7C00)) && eng_f16_to_f32(0xFC00) < 0);
    CHECK(isnan(eng_f16_to_f32(0x7E00)));
    CHECK(eng_f16_to_f32(0x3555) == 0.25f * (1.0f + 0x155 / 1024.0f));
    CHECK(eng_bf16_to_f32(0x3F80) == 1.0f);
    CHECK(eng_bf16_to_f32(0xC2F7) == -123.5f);
    CHECK(isinf(eng_bf16_to_f32(0x7F80)));
}

static int write_file(const char *path, const void *b, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp) return -1;
    size_t w = fwrite(b, 1, n, fp);
    return fclose(fp) == 0 && w == n ? 0 : -1;
}

static void test_open_files(void) {
    eng_st_file f;
    posy_err err = {0};
    CHECK(eng_st_open(&f, "/nonexistent/model.safetensors", &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent/model.safetensors");
    char dir[] = "/tmp/posy_st_XXXXXX", p[256];
    if (!mkdtemp(dir)) { CHECK(0); return; }
    snprintf(p, sizeof p, "%s/empty.safetensors", dir);
    CHECK_EQ_INT(write_file(p, "", 0), 0);
    CHECK(eng_st_open(&f, p, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "empty.safetensors");
    unlink(p);
    /* no weights at all in a directory */
    CHECK(eng_st_open_dir(&f, dir, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, "no model.safetensors");
    rmdir(dir);
}

/* Two shards + index; then broken indexes. */
static void write_shards(const char *dir) {
    char p[256];
    size_t n;
    float v[3] = {1, 2, 3};
    unsigned char *b = mk("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", v, 12, &n);
    snprintf(p, sizeof p, "%s/model-00001-of-00002.safetensors", dir);
    write_file(p, b, n);
    free(b);
    b = mk("{\"c\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", v, 12, &n);
    snprintf(p, sizeof p, "%s/model-00002-of-00002.safetensors", dir);
    write_file(p, b, n);
    free(b);
}

static int write_index(const char *dir, const char *json) {
    char p[256];
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    return write_file(p, json, strlen(json));
}

static void expect_bad_index(const char *dir, const char *json, const char *needle) {
    eng_st_file f;
    posy_err err = {0};
    write_index(dir, json);
    int rc = eng_st_open_dir(&f, dir, &err);
    CHECK_MSG(rc != 0, "index accepted: %s", json);
    if (rc) CHECK_STR_CONTAINS(err.msg, needle);
    else eng_st_close(&f);
}

static void test_sharded(void) {
    char dir[] = "/tmp/posy_sh_XXXXXX", p[256];
    if (!mkdtemp(dir)) { CHECK(0); return; }
    write_shards(dir);
    const char *s1 = "model-00001-of-00002.safetensors", *s2 = "model-00002-of-00002.safetensors";
    char idx[1024];
    snprintf(idx, sizeof idx, "{\"metadata\":{\"total_size\":24},\"weight_map\":{\"a\":\"%s\",\"b\":\"%s\",\"c\":\"%s\"}}",
             s1, s1, s2);
    CHECK_EQ_INT(write_index(dir, idx), 0);
    eng_st_file f;
    posy_err err = {0};
    CHECK_EQ_INT(eng_st_open_dir(&f, dir, &err), 0);
    CHECK_EQ_INT(f.n_tensors, 3);
    CHECK_EQ_INT(f.n_shards, 2);
    const eng_st_tensor *t = eng_st_find(&f, "c");
    CHECK(t && strstr(eng_st_tensor_file(&f, t), s2));
    float out[3];
    int64_t d3[1] = {3}, d1[1] = {1};
    CHECK_EQ_INT(eng_st_read_f32(&f, "c", 1, d3, out, &err), 0);
    CHECK(out[0] == 1 && out[1] == 2 && out[2] == 3);
    CHECK(eng_st_read_f32(&f, "b", 1, d1, out, &err) == 0 && out[0] == 3);
    CHECK(eng_st_read_f32(&f, "c", 1, d1, out, &err) != 0);
    CHECK_STR_CONTAINS(err.msg, s2);
    eng_st_close(&f);

    snprintf(idx, sizeof idx, "{\"weight_map\":{\"a\":\"%s\",\"c\":\"%s\"}}", s2, s2);
    expect_bad_index(dir, idx, "tensor a should be in");
    snprintf(idx, sizeof idx, "{\"weight_map\":{\"a\":\"%s\",\"zz\":\"%s\"}}", s1, s2);
    expect_bad_index(dir, idx, "tensor zz should be in");
    expect_bad_index(dir, "{\"weight_map\":{\"a\":\"../etc/passwd\"}}", "not a file name");
    expect_bad_index(dir, "{\"weight_map\":{\"a\":\"missing.safetensors\"}}", "missing.safetensors");
    expect_bad_index(dir, "{\"weight_map\":{\"a\":3}}", "not a file name");
    expect_bad_index(dir, "{\"weight_map\":[]}", "weight_map");
    expect_bad_index(dir, "{\"weight_map\":", "not valid JSON");
    expect_bad_index(dir, "[]", "weight_map");
    /* the same tensor in two shards */
    snprintf(p, sizeof p, "%s/dup.safetensors", dir);
    float v[3] = {1, 2, 3};
    size_t n;
    unsigned char *b = mk("{\"c\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}", v, 12, &n);
    write_file(p, b, n);
    free(b);
    snprintf(idx, sizeof idx, "{\"weight_map\":{\"c\":\"%s\",\"d\":\"dup.safetensors\"}}", s2);
    expect_bad_index(dir, idx, "in both");
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", dir, s1); unlink(p);
    snprintf(p, sizeof p, "%s/%s", dir, s2); unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir); unlink(p);
    rmdir(dir);
}

static void test_real_minilm(void) {
    if (access(MINILM, R_OK) != 0) {
        printf("  (skipped: %s not present)\n", MINILM);
        return;
    }
    eng_st_file f;
    posy_err err = {0};
    CHECK_EQ_INT(eng_st_open_dir(&f, "models/all-MiniLM-L6-v2", &err), 0);
    CHECK_EQ_INT(f.n_tensors, 104); /* 105 header keys, one of them __metadata__ */
    CHECK(f.owns_map && f.map.size > 90000000);
    const eng_st_tensor *t = eng_st_find(&f, "embeddings.position_ids");
    CHECK(t && t->dtype == ENG_DT_OTHER && !strcmp(t->dtype_name, "I64"));
    t = eng_st_find(&f, "embeddings.word_embeddings.weight");
    CHECK(t && t->dtype == ENG_DT_F32 && t->ndim == 2 && t->shape[0] == 30522 && t->shape[1] == 384);
    t = eng_st_find(&f, "encoder.layer.5.output.LayerNorm.bias");
    CHECK(t && t->ndim == 1 && t->shape[0] == 384);
    CHECK(t && (const char *)t->data + t->nbytes <= (const char *)f.map.data + f.map.size);
    eng_st_close(&f);
}

/* eng_st_release on the loader's owned block gives back exactly the whole
 * pages inside the range: those read as zeros afterwards (what
 * MADV_DONTNEED does to private anonymous pages: the check that they were
 * given back), the partial pages at both ends keep their values, the
 * pointer becomes NULL.  On a tensor used in place from a mapped file the
 * pointer stays and the values read back from the file; a buffer that is
 * neither is left alone. */
static void test_release(void) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), fpp = pg / sizeof(float);
    const size_t nf = 16 * fpp;
    float *owned = NULL;
    CHECK(posix_memalign((void **)&owned, pg, nf * sizeof(float)) == 0 && owned);
    if (!owned) return;
    for (size_t i = 0; i < nf; i++) owned[i] = (float)(i + 1);
    /* floats [fpp + 7, 9 fpp + 3): whole pages 2..8 (7 pages); pages 1 and 9 partly */
    const size_t a = fpp + 7, n = 8 * fpp - 4;
    const float *w = owned + a;
    CHECK(eng_st_release(NULL, owned, nf, &w, n) == 7 * pg);
    CHECK(w == NULL);
    int kept = 1, zeroed = 1;
    for (size_t i = 0; i < nf; i++) {
        if (i >= 2 * fpp && i < 9 * fpp) zeroed &= owned[i] == 0.0f;
        else kept &= owned[i] == (float)(i + 1);
    }
    CHECK_MSG(zeroed, "the whole pages inside the range were not given back");
    CHECK_MSG(kept, "a value outside the whole pages changed");
    /* less than a page: nothing given back, still NULL (the backend owns a copy) */
    const float *small = owned + 10 * fpp + 1;
    CHECK(eng_st_release(NULL, owned, nf, &small, 8) == 0 && small == NULL);
    CHECK(owned[10 * fpp + 1] == (float)(10 * fpp + 2));
    /* a range running past owned's end: the pointer cleared, nothing given back */
    const float *tail = owned + nf - fpp;
    CHECK(eng_st_release(NULL, owned, nf, &tail, 2 * fpp) == 0 && tail == NULL);
    CHECK(owned[nf - 1] == (float)nf);
    /* neither owned nor a mapping of f: untouched */
    const float *o = owned + 12 * fpp;
    CHECK(eng_st_release(NULL, NULL, 0, &o, 2 * fpp) == 0 && o == owned + 12 * fpp);
    CHECK(owned[12 * fpp + fpp] == (float)(13 * fpp + 1));

    /* an F32 tensor of 8 pages in a mapped file: given back, still readable */
    char dir[] = "/tmp/posy_rel_XXXXXX", path[256];
    if (!mkdtemp(dir)) { CHECK(0); free(owned); return; }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    char hdr[160];
    snprintf(hdr, sizeof hdr, "{\"w\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}", 8 * fpp,
             8 * pg);
    size_t hl = strlen(hdr), pad = (8 - (8 + hl) % 8) % 8, size;
    char hdr2[192];
    snprintf(hdr2, sizeof hdr2, "%s%*s", hdr, (int)pad, ""); /* data 4-byte aligned in the file */
    unsigned char *raw = mk(hdr2, owned, 8 * pg, &size); /* any bytes; rewritten below */
    float *vals = (float *)(raw + 8 + strlen(hdr2));
    for (size_t i = 0; i < 8 * fpp; i++) { float v = (float)i * 0.5f; memcpy(&vals[i], &v, 4); }
    CHECK(write_file(path, raw, size) == 0);
    eng_st_file f;
    posy_err err = {0};
    CHECK_EQ_INT(eng_st_open(&f, path, &err), 0);
    const eng_st_tensor *t = eng_st_find(&f, "w");
    CHECK(t && t->dtype == ENG_DT_F32);
    if (t) {
        const float *m = (const float *)t->data, *keep = m;
        CHECK(eng_st_release(&f, owned, nf, &m, 8 * fpp) >= 6 * pg); /* 7 or 8 whole pages in the mapping */
        CHECK(m == keep);
        int same = 1;
        for (size_t i = 0; i < 8 * fpp; i++) same &= m[i] == (float)i * 0.5f;
        CHECK_MSG(same, "a file-mapped tensor read back wrong after its pages were given back");
    }
    eng_st_close(&f);
    free(raw);
    unlink(path);
    rmdir(dir);
    free(owned);
}

/* Resident kB of the mapping holding addr (/proc/self/smaps), -1 if not found */
static long smaps_rss_kb(const void *addr) {
    FILE *fp = fopen("/proc/self/smaps", "r");
    if (!fp) return -1;
    char line[512];
    int in = 0;
    long kb = -1;
    while (fgets(line, sizeof line, fp)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            continue;
        }
        if (in && sscanf(line, "Rss: %ld kB", &kb) == 1) break;
    }
    fclose(fp);
    return kb;
}

static int walk_append_b(eng_st_view *v, void *arg) {
    const eng_st_tensor *t = eng_st_find(v->st, "b");
    if (!t) return -1;
    if (v->fill) *(const float **)arg = v->owned + v->used;
    eng_st_view_append(v, t);
    return 0;
}

/* The same tensor as slices (DeBERTa v1's in_proj): its second half, then its first, then released. */
static int walk_ranges_b(eng_st_view *v, void *arg) {
    const eng_st_tensor *t = eng_st_find(v->st, "b");
    if (!t) return -1;
    const size_t half = (size_t)t->numel / 2;
    if (v->fill) *(const float **)arg = v->owned + v->used;
    eng_st_view_append_range(v, t, half, (size_t)t->numel - half);
    eng_st_view_append_range(v, t, 0, half);
    eng_st_view_release(v, t);
    return 0;
}

/* A view over a mapped BF16 tensor of 8 pages: the fp32 copy in owned is
 * exact, the mapping's resident pages drop from all of them (read once
 * before) to the partial ones at the ends (smaps' Rss), and reading the
 * tensor again from the mapping still gives the file's values; the same
 * when it is appended as two slices and then released (`slices`). */
static void view_drops_source(int slices) {
    const size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = 4 * pg; /* 8 pages of bf16 */
    char dir[] = "/tmp/posy_view_XXXXXX", path[256], hdr[160];
    if (!mkdtemp(dir)) { CHECK(0); return; }
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(hdr, sizeof hdr, "{\"b\":{\"dtype\":\"BF16\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}", n, 2 * n);
    uint16_t *bits = malloc(2 * n);
    for (size_t i = 0; i < n; i++) bits[i] = (uint16_t)(0x3f80 + (i % 97)); /* 1.0 .. 1.0 + 96 ulp */
    size_t size;
    unsigned char *raw = mk(hdr, bits, 2 * n, &size);
    CHECK(write_file(path, raw, size) == 0);
    eng_st_file f;
    posy_err err = {0};
    CHECK_EQ_INT(eng_st_open(&f, path, &err), 0);
    eng_st_view v = {&f, "", 0, NULL, 0, &err};
    float *owned = NULL;
    size_t owned_floats = 0;
    const float *copy = NULL;
    float *again = malloc(n * sizeof(float));
    const eng_st_tensor *t = eng_st_find(&f, "b");
    if (t) CHECK(eng_st_tensor_to_f32(t, again) == 0); /* every page resident */
    const long before = t ? smaps_rss_kb(t->data) : -1;
    CHECK_EQ_INT(eng_st_view_build(&v, slices ? walk_ranges_b : walk_append_b, &copy, &owned, &owned_floats), 0);
    const long after = t ? smaps_rss_kb(t->data) : -1;
    CHECK_MSG(before >= (long)(8 * pg / 1024) && after >= 0 && after <= (long)(2 * pg / 1024),
              "mapping resident %ld kB before the view, %ld kB after", before, after);
    CHECK(owned_floats == n && copy == owned);
    int exact = copy != NULL, same = t != NULL;
    for (size_t i = 0; exact && i < n; i++) exact &= copy[i] == eng_bf16_to_f32(bits[slices ? (i + n / 2) % n : i]);
    if (t) CHECK(eng_st_tensor_to_f32(t, again) == 0);
    for (size_t i = 0; same && i < n; i++) same &= again[i] == eng_bf16_to_f32(bits[i]);
    CHECK_MSG(exact, "the fp32 copy of the BF16 tensor is wrong");
    CHECK_MSG(same, "the BF16 tensor read back wrong from the file after its pages were given back");
    free(again);
    free(owned);
    eng_st_close(&f);
    free(raw);
    free(bits);
    unlink(path);
    rmdir(dir);
}

static void test_view_drops_source(void) {
    view_drops_source(0);
    view_drops_source(1);
}

TEST_MAIN(TEST(test_valid), TEST(test_unaligned), TEST(test_range), TEST(test_truncated_and_lengths), TEST(test_bad_json),
          TEST(test_bad_fields), TEST(test_bad_offsets), TEST(test_half_conversions), TEST(test_open_files),
          TEST(test_sharded), TEST(test_real_minilm), TEST(test_release), TEST(test_view_drops_source))

/* fuzz_tok: libFuzzer target for the tokenizer (clang -fsanitize=fuzzer,
 * address,undefined; built and run by tests/fuzz/run_tok_fuzz.sh).
 *
 * The first input byte picks what is attacked:
 *   even: the rest is a tokenizer.json; if it loads, a few texts are
 *         encoded (single, pair, truncated) and their ids decoded;
 *   odd:  the rest is text (arbitrary bytes) encoded with every tokenizer
 *         preloaded from tests/fixtures/tokenizers and the default model,
 *         with and without specials and truncation, then decoded; the same
 *         bytes are also read as ids for tok_decode.
 * Any crash, leak or sanitizer report fails the run.  The fuzzer must be
 * started from the repository root (fixture paths are relative).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok.h"

#define MAX_TOK 16
static tok_tokenizer *g_tok[MAX_TOK];
static int g_n;

static void load_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && g_n < MAX_TOK) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        posy_err err = {0};
        tok_tokenizer *t = tok_load_file(path, &err);
        if (t) g_tok[g_n++] = t;
    }
    closedir(d);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    load_dir("tests/fixtures/tokenizers");
    posy_err err = {0};
    tok_tokenizer *t = tok_load_file("models/all-MiniLM-L6-v2/tokenizer.json", &err);
    if (t && g_n < MAX_TOK) g_tok[g_n++] = t;
    else tok_free(t);
    return 0;
}

static void exercise(const tok_tokenizer *t, const char *s, size_t n, tok_encoding *e) {
    tok_opts o = {1, 0, TOK_TRUNC_RIGHT};
    posy_err err;
    if (tok_encode(t, s, n, &o, e, &err) == 0) {
        char *text = NULL;
        if (tok_decode(t, e->ids, e->n, n & 1, &text, NULL, &err) == 0) free(text);
        tok_offsets_to_chars(s, n, e, 0, e->n);
    }
    o.add_special = 0;
    o.max_len = 5;
    o.trunc_dir = TOK_TRUNC_LEFT;
    tok_encode(t, s, n, &o, e, &err);
    o.add_special = 1;
    o.max_len = 7;
    size_t half = n / 2;
    tok_encode_pair(t, s, half, s + half, n - half, &o, e, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    tok_encoding e = {0};
    if ((data[0] & 1) == 0) {
        posy_err err;
        tok_tokenizer *t = tok_load_json(s, n, &err);
        if (t) {
            static const char *texts[] = {"Hello, world! It's 3.14", "héllo [SEP] 中文 \xF0\x9F\x98\x80", "", "  a  "};
            for (int i = 0; i < 4; i++) exercise(t, texts[i], strlen(texts[i]), &e);
            int32_t ids[8];
            for (int i = 0; i < 8; i++) ids[i] = (int32_t)(i * 37 + (int)n) % (tok_vocab_size(t) + 3);
            char *text = NULL;
            if (tok_decode(t, ids, 8, 0, &text, NULL, &err) == 0) free(text);
            tok_free(t);
        }
    } else {
        for (int i = 0; i < g_n; i++) exercise(g_tok[i], s, n, &e);
        if (g_n > 0) {
            int32_t ids[64];
            int k = 0;
            for (size_t i = 0; i + 1 < n && k < 64; i += 2) ids[k++] = (int32_t)(((uint32_t)(uint8_t)s[i] << 8 | (uint8_t)s[i + 1]) % 4000);
            char *text = NULL;
            posy_err err;
            if (tok_decode(g_tok[data[0] % g_n], ids, k, 0, &text, NULL, &err) == 0) free(text);
        }
    }
    tok_encoding_free(&e);
    return 0;
}

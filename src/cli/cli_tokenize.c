/* cli_tokenize: `posy tokenize`, the tokenizer from the shell.
 *
 * One JSON object per input text with ids, tokens, type ids, special-token
 * mask and offsets in characters, the same numbers the Python tokenizers
 * package reports, so the two can be diffed line by line.  Texts come from
 * the arguments, else from stdin lines; with --json-input each stdin line
 * is a JSON string (so a text can hold newlines and control characters).
 * A bad line prints {"error": ...} and the run continues (exit status 1).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "eng_config.h"
#include "posy_clock.h"
#include "posy_file.h"
#include "tok.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: posy tokenize --model DIR|tokenizer.json [--no-special] [--max-len N]\n"
            "                     [--truncate-left] [--json-input] [--pair] [TEXT ...]\n\n"
            "Prints one JSON object per text: ids, tokens, type_ids, special_tokens_mask,\n"
            "offsets (character spans, as Hugging Face tokenizers reports them).\n\n"
            "  --model PATH      model directory holding tokenizer.json (a static embedding\n"
            "                    model: its module's), or the file itself\n"
            "  --no-special      do not add the post-processor's special tokens (a static\n"
            "                    embedding model's directory: never added, as it embeds)\n"
            "  --max-len N       truncate to N tokens including special tokens\n"
            "  --truncate-left   truncate from the left instead of the right\n"
            "  --json-input      each stdin line is a JSON string (or with --pair, an array of two)\n"
            "  --pair            encode pairs: stdin lines as [a, b] JSON arrays, or TEXT args two by two\n"
            "  --decode          the reverse: each stdin line is a JSON array of ids; prints the\n"
            "                    decoded text as a JSON string per line\n"
            "  --skip-special    with --decode: drop special tokens\n"
            "  --bench R         read all texts, encode them R times with the batch API and print\n"
            "                    throughput as one JSON object instead of the tokens\n"
            "  --threads N       threads for --bench (default 1; 0 = all cores)\n"
            "  -h, --help        this help\n");
}

static void put_json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') { fputc('\\', f); fputc(c, f); }
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

typedef struct {
    const tok_tokenizer *t;
    tok_opts opts;
    tok_encoding enc;
    int pair;
} tk_ctx;

static void print_enc(tk_ctx *c) {
    tok_encoding *e = &c->enc;
    FILE *f = stdout;
    fputs("{\"ids\":[", f);
    for (int i = 0; i < e->n; i++) fprintf(f, i ? ",%d" : "%d", e->ids[i]);
    fputs("],\"tokens\":[", f);
    for (int i = 0; i < e->n; i++) {
        const char *s = tok_id_to_token(c->t, e->ids[i]);
        if (i) fputc(',', f);
        put_json_str(f, s ? s : "", s ? strlen(s) : 0);
    }
    fputs("],\"type_ids\":[", f);
    for (int i = 0; i < e->n; i++) fprintf(f, i ? ",%d" : "%d", e->type_ids[i]);
    fputs("],\"special_tokens_mask\":[", f);
    for (int i = 0; i < e->n; i++) fprintf(f, i ? ",%d" : "%d", e->special_mask[i]);
    fputs("],\"offsets\":[", f);
    for (int i = 0; i < e->n; i++) fprintf(f, i ? ",[%d,%d]" : "[%d,%d]", e->offsets[2 * i], e->offsets[2 * i + 1]);
    fputs("]}\n", f);
}

static void print_error(const char *msg) {
    fputs("{\"error\":", stdout);
    put_json_str(stdout, msg, strlen(msg));
    fputs("}\n", stdout);
}

/* Encode one text (or pair) and print it; returns 0 or 1. */
static int do_one(tk_ctx *c, const char *a, size_t al, const char *b, size_t bl) {
    posy_err err = {0};
    if (tok_encode_pair(c->t, a, al, b, b ? bl : 0, &c->opts, &c->enc, &err)) {
        print_error(err.msg);
        return 1;
    }
    /* convert each sequence's token range with its own text */
    int n = c->enc.n, split = b ? c->enc.b_start : n;
    if (tok_offsets_to_chars(a, al, &c->enc, 0, split) ||
        (b && tok_offsets_to_chars(b, bl, &c->enc, split, n))) {
        print_error("out of memory");
        return 1;
    }
    print_enc(c);
    return 0;
}

static int do_json_line(tk_ctx *c, const char *line, size_t len) {
    json_error_t je;
    json_t *v = json_loadb(line, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    int rc = 1;
    if (!v) {
        char msg[300];
        snprintf(msg, sizeof msg, "line is not valid JSON: %s", je.text);
        print_error(msg);
    } else if (!c->pair && json_is_string(v)) {
        rc = do_one(c, json_string_value(v), json_string_length(v), NULL, 0);
    } else if (c->pair && json_is_array(v) && json_array_size(v) == 2 && json_is_string(json_array_get(v, 0)) &&
               json_is_string(json_array_get(v, 1))) {
        json_t *x = json_array_get(v, 0), *y = json_array_get(v, 1);
        rc = do_one(c, json_string_value(x), json_string_length(x), json_string_value(y), json_string_length(y));
    } else {
        print_error(c->pair ? "expected a JSON array of two strings" : "expected a JSON string");
    }
    json_decref(v);
    return rc;
}

/* Texts read whole for --bench. */
typedef struct { char **s; size_t *len; int n, cap; } text_list;

static int text_add(text_list *l, const char *s, size_t n) {
    if (l->n == l->cap) {
        int nc = l->cap ? l->cap * 2 : 1024;
        char **ns = realloc(l->s, (size_t)nc * sizeof *ns);
        size_t *nl = realloc(l->len, (size_t)nc * sizeof *nl);
        if (ns) l->s = ns;
        if (nl) l->len = nl;
        if (!ns || !nl) return -1;
        l->cap = nc;
    }
    l->s[l->n] = malloc(n + 1);
    if (!l->s[l->n]) return -1;
    memcpy(l->s[l->n], s, n);
    l->s[l->n][n] = '\0';
    l->len[l->n++] = n;
    return 0;
}

/* --bench: best of R timed passes of tok_encode_batch over all texts. */
static int run_bench(tk_ctx *c, int json_input, int repeat, int threads) {
    text_list l = {0};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    while (!rc && (n = getline(&line, &cap, stdin)) >= 0) {
        if (n > 0 && line[n - 1] == '\n') n--;
        if (!json_input) { rc = text_add(&l, line, (size_t)n); continue; }
        json_t *v = json_loadb(line, (size_t)n, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        if (json_is_string(v)) rc = text_add(&l, json_string_value(v), json_string_length(v));
        json_decref(v);
    }
    free(line);
    tok_encoding *enc = calloc((size_t)l.n + 1, sizeof *enc);
    double best = 1e30;
    long long tokens = 0;
    posy_err err = {0};
    for (int r = 0; !rc && enc && r < repeat; r++) {
        double t0 = posy_now_s();
        int failed;
        rc = tok_encode_batch(c->t, (const char *const *)l.s, l.len, NULL, NULL, l.n, &c->opts, enc, threads, &failed, &err);
        double dt = posy_now_s() - t0;
        if (dt < best) best = dt;
    }
    for (int i = 0; enc && i < l.n; i++) tokens += enc[i].n;
    if (rc || !enc) fprintf(stderr, "posy tokenize --bench: %s\n", enc ? err.msg : "out of memory");
    else printf("{\"texts\":%d,\"tokens\":%lld,\"seconds\":%.6f,\"texts_per_s\":%.1f,\"tokens_per_s\":%.1f,\"threads\":%d}\n",
                l.n, tokens, best, l.n / best, (double)tokens / best, threads);
    for (int i = 0; i < l.n; i++) { free(l.s[i]); if (enc) tok_encoding_free(&enc[i]); }
    free(l.s); free(l.len); free(enc);
    return rc || !enc ? 1 : 0;
}

/* --decode: one JSON array of ids per stdin line -> one JSON string. */
static int run_decode(const tok_tokenizer *t, int skip_special) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int bad = 0;
    int32_t *ids = NULL;
    while ((n = getline(&line, &cap, stdin)) >= 0) {
        json_error_t je;
        json_t *v = json_loadb(line, (size_t)n, JSON_DECODE_ANY, &je);
        size_t m = json_is_array(v) ? json_array_size(v) : 0;
        int32_t *ni = realloc(ids, (m + 1) * sizeof *ids);
        int ok = json_is_array(v) && ni;
        if (ni) ids = ni;
        for (size_t i = 0; ok && i < m; i++) {
            json_t *x = json_array_get(v, i);
            ok = json_is_integer(x) && json_integer_value(x) >= 0 && json_integer_value(x) <= INT32_MAX;
            if (ok) ids[i] = (int32_t)json_integer_value(x);
        }
        json_decref(v);
        if (!ok) { print_error("expected a JSON array of token ids"); bad = 1; continue; }
        char *text;
        size_t len;
        posy_err err = {0};
        if (tok_decode(t, ids, (int)m, skip_special, &text, &len, &err)) { print_error(err.msg); bad = 1; continue; }
        put_json_str(stdout, text, len);
        fputc('\n', stdout);
        free(text);
    }
    free(ids);
    free(line);
    return bad;
}

/* A model directory's tokenizer (a static embedding model's is in its
 * module's folder, and runs without special tokens: *special 0), or a
 * tokenizer.json. */
static tok_tokenizer *open_model(const char *path, int *special) {
    struct stat st;
    char file[4096];
    *special = 1;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        if (eng_model_tokenizer_file(path, file, sizeof file, special)) {
            fprintf(stderr, "posy tokenize: %s: the path is too long, or modules.json's StaticEmbedding folder "
                    "leaves the model directory\n", path);
            return NULL;
        }
        path = file;
    }
    posy_err err = {0};
    tok_tokenizer *t = tok_load_file(path, &err);
    if (!t) fprintf(stderr, "posy tokenize: %s\n", err.msg);
    return t;
}

int cli_cmd_tokenize(int argc, char **argv) {
    const char *model = NULL;
    tk_ctx c = {0};
    c.opts.add_special = 1;
    int json_input = 0, first_text = argc, bench = 0, threads = 1, decode = 0, skip_special = 0, no_special = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!strcmp(a, "--model")) {
            if (++i >= argc) { fprintf(stderr, "posy tokenize: --model needs a path\n"); return 2; }
            model = argv[i];
        } else if (!strcmp(a, "--max-len")) {
            long v;
            if (++i >= argc) { fprintf(stderr, "posy tokenize: --max-len needs a number\n"); return 2; }
            if (cli_parse_int("--max-len", argv[i], 1, 1 << 24, &v)) return 2;
            c.opts.max_len = (int)v;
        } else if (!strcmp(a, "--bench") || !strcmp(a, "--threads")) {
            long v;
            if (++i >= argc) { fprintf(stderr, "posy tokenize: %s needs a number\n", a); return 2; }
            if (cli_parse_int(a, argv[i], a[2] == 'b' ? 1 : 0, a[2] == 'b' ? 1000000 : 256, &v)) return 2;
            if (a[2] == 'b') bench = (int)v;
            else threads = (int)v;
        } else if (!strcmp(a, "--no-special")) no_special = 1;
        else if (!strcmp(a, "--decode")) decode = 1;
        else if (!strcmp(a, "--skip-special")) skip_special = 1;
        else if (!strcmp(a, "--truncate-left")) c.opts.trunc_dir = TOK_TRUNC_LEFT;
        else if (!strcmp(a, "--json-input")) json_input = 1;
        else if (!strcmp(a, "--pair")) c.pair = 1;
        else if (!strcmp(a, "--")) { first_text = i + 1; break; }
        else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "posy tokenize: unknown flag '%s' (see posy tokenize --help)\n", a);
            return 2;
        } else { first_text = i; break; }
    }
    if (!model) { fprintf(stderr, "posy tokenize: --model is required (see --help)\n"); return 2; }
    int model_special;
    tok_tokenizer *t = open_model(model, &model_special);
    if (!t) return 1;
    c.opts.add_special = model_special && !no_special;
    if (!model_special && !no_special)
        fprintf(stderr, "posy tokenize: a static embedding model: no special tokens added, as the model embeds text\n");
    c.t = t;
    if (decode) {
        int drc = run_decode(t, skip_special);
        fflush(stdout);
        tok_free(t);
        return drc;
    }
    if (bench) {
        int brc = run_bench(&c, json_input, bench, threads);
        tok_free(t);
        return brc;
    }
    int bad = 0;
    if (first_text < argc) {
        int step = c.pair ? 2 : 1;
        if (c.pair && (argc - first_text) % 2) {
            fprintf(stderr, "posy tokenize: --pair needs an even number of texts\n");
            tok_free(t);
            return 2;
        }
        for (int i = first_text; i < argc; i += step)
            bad |= do_one(&c, argv[i], strlen(argv[i]), c.pair ? argv[i + 1] : NULL, c.pair ? strlen(argv[i + 1]) : 0);
    } else {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, stdin)) >= 0) {
            if (n > 0 && line[n - 1] == '\n') n--;
            if (n > 0 && line[n - 1] == '\r' && json_input) n--;
            if (json_input) bad |= do_json_line(&c, line, (size_t)n);
            else if (c.pair) {
                char *tab = memchr(line, '\t', (size_t)n);
                if (!tab) { print_error("--pair without --json-input expects TAB-separated lines"); bad = 1; }
                else bad |= do_one(&c, line, (size_t)(tab - line), tab + 1, (size_t)(n - (tab - line) - 1));
            } else bad |= do_one(&c, line, (size_t)n, NULL, 0);
        }
        free(line);
    }
    fflush(stdout);
    tok_encoding_free(&c.enc);
    tok_free(t);
    return bad ? 1 : 0;
}

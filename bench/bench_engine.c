/* bench_engine: times posy's engine in-process, for bench/bench_cpu.py.
 *
 *   posy_bench_engine --model DIR --input FILE [--device cpu] [--threads N]
 *                     [--batches 1,32,256] [--seconds S] [--latency-runs N]
 *
 * FILE holds one sentence per line.  For each batch size B the sentences
 * are cut into packed batches of B and run through posy_engine_step() for
 * at least S seconds, twice: once on pre-tokenized batches (engine only)
 * and once tokenizing each batch inside the timed loop (what `posy embed`
 * does).  Single-sentence latency is the time of one tokenize + step, and
 * of the step alone, over --latency-runs sentences.  Results are printed
 * as one JSON object on stdout; nothing here asserts a speed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "posy_clock.h"
#include "posy_engine.h"
#include "posy_file.h"
#include "tok.h"

#define MAX_BATCHES 8

typedef struct bench {
    posy_engine *e;
    tok_tokenizer *tok;
    const posy_model_info *info;
    char **text;
    size_t *len;
    int n;
    tok_encoding *enc;        /* pre-tokenized, one per sentence */
    int32_t *ids, *cu;
    float *out;
    int cap_tokens, cap_seqs;
    double min_seconds;
} bench;

static void die(const char *what, const posy_err *err) {
    fprintf(stderr, "posy_bench_engine: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}

static void read_sentences(bench *b, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) die(path, NULL);
    char *line = NULL;
    size_t cap = 0, room = 0;
    ssize_t got;
    while ((got = getline(&line, &cap, f)) >= 0) {
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        if ((size_t)b->n == room) {
            room = room ? room * 2 : 1024;
            b->text = realloc(b->text, room * sizeof *b->text);
            b->len = realloc(b->len, room * sizeof *b->len);
            if (!b->text || !b->len) die("out of memory", NULL);
        }
        b->text[b->n] = strdup(line);
        b->len[b->n++] = (size_t)got;
    }
    free(line);
    fclose(f);
    if (b->n == 0) die("no sentences in the input", NULL);
}

static void encode(bench *b, int i, tok_encoding *enc) {
    posy_err err;
    tok_opts o = {.add_special = 1, .max_len = b->info->max_seq_len, .trunc_dir = TOK_TRUNC_RIGHT};
    if (tok_encode(b->tok, b->text[i], b->len[i], &o, enc, &err) != 0) die("tokenize", &err);
}

/* Run sentences [first, first+k) (wrapping around) as one packed batch. */
static void run_batch(bench *b, int first, int k, int tokenize, tok_encoding *scratch) {
    int nt = 0;
    b->cu[0] = 0;
    for (int s = 0; s < k; s++) {
        int i = (first + s) % b->n;
        const tok_encoding *enc = &b->enc[i];
        if (tokenize) {
            encode(b, i, scratch);
            enc = scratch;
        }
        memcpy(b->ids + nt, enc->ids, sizeof(int32_t) * (size_t)enc->n);
        nt += enc->n;
        b->cu[s + 1] = nt;
    }
    posy_batch batch = {.tag = 1, .n_seqs = k, .n_tokens = nt, .ids = b->ids, .type_ids = NULL,
                        .cu_seqlens = b->cu, .out = b->out};
    posy_result res[4];
    posy_err err;
    int got = posy_engine_step(b->e, &batch, res, 4, &err);
    if (got < 0) die("step", &err);
    while (got == 0) got = posy_engine_wait(b->e, res, 4);
    if (res[0].status != 0) die("engine status", NULL);
}

/* Sentences per second at batch size k. */
static double throughput(bench *b, int k, int tokenize) {
    tok_encoding scratch = {0};
    run_batch(b, 0, k, tokenize, &scratch);   /* warm-up */
    long done = 0;
    int first = 0;
    double t0 = posy_now_s(), dt = 0;
    while (dt < b->min_seconds || done < 2L * k) {
        run_batch(b, first, k, tokenize, &scratch);
        first = (first + k) % b->n;
        done += k;
        dt = posy_now_s() - t0;
    }
    tok_encoding_free(&scratch);
    return (double)done / dt;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void latency(bench *b, int runs) {
    double *full = malloc(sizeof(double) * (size_t)runs), *eng = malloc(sizeof(double) * (size_t)runs);
    tok_encoding scratch = {0};
    run_batch(b, 0, 1, 1, &scratch);
    for (int r = 0; r < runs; r++) {
        double t0 = posy_now_s();
        run_batch(b, r % b->n, 1, 1, &scratch);
        double t1 = posy_now_s();
        run_batch(b, r % b->n, 1, 0, &scratch);
        full[r] = (t1 - t0) * 1e3;
        eng[r] = (posy_now_s() - t1) * 1e3;
    }
    qsort(full, (size_t)runs, sizeof(double), cmp_double);
    qsort(eng, (size_t)runs, sizeof(double), cmp_double);
    printf("  \"latency_ms\": {\"runs\": %d, \"p50\": %.4f, \"p90\": %.4f, \"engine_p50\": %.4f, "
           "\"engine_p90\": %.4f}\n", runs, full[runs / 2], full[runs * 9 / 10], eng[runs / 2],
           eng[runs * 9 / 10]);
    tok_encoding_free(&scratch);
    free(full);
    free(eng);
}

static int parse_batches(const char *s, int *out) {
    int n = 0;
    while (*s && n < MAX_BATCHES) {
        out[n++] = (int)strtol(s, (char **)&s, 10);
        if (out[n - 1] <= 0) return 0;
        if (*s == ',') s++;
    }
    return n;
}

static void open_all(bench *b, const char *model, posy_device_kind dev, int threads, int max_b) {
    posy_err err;
    char path[2048];
    if (posy_path_join(path, sizeof path, model, "tokenizer.json")) die("model path too long", NULL);
    if (!(b->tok = tok_load_file(path, &err))) die("tokenizer", &err);
    b->cap_seqs = max_b;
    b->cap_tokens = max_b * 512;
    posy_engine_opts o = {.device = dev, .n_threads = threads, .max_batch_tokens = b->cap_tokens,
                          .max_batch_seqs = b->cap_seqs};
    if (!(b->e = posy_engine_open(model, &o, &err))) die("engine", &err);
    b->info = posy_engine_info(b->e);
    b->ids = malloc(sizeof(int32_t) * (size_t)b->cap_tokens);
    b->cu = malloc(sizeof(int32_t) * ((size_t)b->cap_seqs + 1));
    b->out = malloc(sizeof(float) * (size_t)b->cap_seqs * (size_t)b->info->dim);
    if (!b->ids || !b->cu || !b->out) die("out of memory", NULL);
}

/* Pre-tokenize every sentence; prints the tokenizer's own rate. */
static void pretokenize(bench *b) {
    b->enc = calloc((size_t)b->n, sizeof *b->enc);
    if (!b->enc) die("out of memory", NULL);
    long tokens = 0;
    double t0 = posy_now_s();
    for (int i = 0; i < b->n; i++) {
        encode(b, i, &b->enc[i]);
        tokens += b->enc[i].n;
    }
    double dt = posy_now_s() - t0;
    printf("  \"n_sentences\": %d,\n  \"mean_tokens\": %.2f,\n  \"tokenize_sentences_per_s\": %.1f,\n",
           b->n, (double)tokens / b->n, b->n / dt);
}

int main(int argc, char **argv) {
    cli_blas_core_check(argv);   /* OpenBLAS's kernels as `posy embed` gets them (src/cli/cli_blas.c) */
    const char *model = NULL, *input = NULL, *batches_s = "1,32,256";
    int threads = 0, lat_runs = 50;
    posy_device_kind dev = POSY_DEVICE_CPU;
    bench b;
    memset(&b, 0, sizeof b);
    b.min_seconds = 3.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--model")) model = v;
        else if (!strcmp(k, "--input")) input = v;
        else if (!strcmp(k, "--threads")) threads = atoi(v);
        else if (!strcmp(k, "--batches")) batches_s = v;
        else if (!strcmp(k, "--seconds")) b.min_seconds = atof(v);
        else if (!strcmp(k, "--latency-runs")) lat_runs = atoi(v);
        else if (!strcmp(k, "--device")) dev = !strcmp(v, "cuda") ? POSY_DEVICE_CUDA : POSY_DEVICE_CPU;
        else { fprintf(stderr, "posy_bench_engine: unknown flag %s\n", k); return 2; }
    }
    int batches[MAX_BATCHES], nb = parse_batches(batches_s, batches);
    if (!model || !input || nb == 0 || lat_runs <= 0) {
        fprintf(stderr, "usage: posy_bench_engine --model DIR --input FILE [--threads N] "
                        "[--batches 1,32,256] [--seconds S] [--latency-runs N] [--device cpu|cuda]\n");
        return 2;
    }
    int max_b = 1;
    for (int i = 0; i < nb; i++) max_b = batches[i] > max_b ? batches[i] : max_b;
    read_sentences(&b, input);
    open_all(&b, model, dev, threads, max_b);
    printf("{\n  \"model\": \"%s\",\n  \"device\": \"%s\",\n  \"threads\": %d,\n", b.info->name,
           b.info->device == POSY_DEVICE_CUDA ? "cuda" : "cpu", threads);
    pretokenize(&b);
    printf("  \"throughput\": [\n");
    for (int i = 0; i < nb; i++) {
        double eng = throughput(&b, batches[i], 0), e2e = throughput(&b, batches[i], 1);
        printf("    {\"batch\": %d, \"engine_sentences_per_s\": %.2f, \"e2e_sentences_per_s\": %.2f}%s\n",
               batches[i], eng, e2e, i + 1 < nb ? "," : "");
        fflush(stdout);
    }
    printf("  ],\n");
    latency(&b, lat_runs);
    printf("}\n");
    for (int i = 0; i < b.n; i++) {
        tok_encoding_free(&b.enc[i]);
        free(b.text[i]);
    }
    free(b.enc); free(b.text); free(b.len); free(b.ids); free(b.cu); free(b.out);
    posy_engine_close(b.e);
    tok_free(b.tok);
    return 0;
}

/* cli_embed: the pieces of `posy embed`, shared by its files.
 *
 *   cli_texts.c      reading the texts (arguments, stdin, a file; plain lines or JSONL)
 *   cli_vecout.c     writing the vectors (JSON lines with round-trip floats, or .npy)
 *   cli_progress.c   a progress bar on stderr when it is a terminal
 *   cli_embed_run.c  tokenize, pack by token budget, drive the engine, write in order
 *   cli_embed.c      flags, --help, and the order of start-up steps
 *
 * The whole input is read before embedding starts: the .npy header and the
 * progress bar need the count, and a corpus of texts is small next to the
 * model.  Vectors are written as soon as their batch and all earlier ones
 * are done, so memory for outputs stays at a few batches.
 */
#ifndef CLI_EMBED_H
#define CLI_EMBED_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "posy_engine.h"
#include "posy_err.h"
#include "tok.h"

/* ---- input ------------------------------------------------------------ */

typedef enum { CLI_IN_AUTO = 0, CLI_IN_TEXT = 1, CLI_IN_JSONL = 2 } cli_in_format;

typedef struct cli_texts {
    char **s;        /* NUL-terminated copies (a text may hold no NUL) */
    size_t *len;
    size_t n, cap;
} cli_texts;

int cli_texts_add(cli_texts *t, const char *s, size_t len, posy_err *err);
/* Read texts from `path` ("-" or NULL: stdin).  Plain text: one text per
 * line, the line ending (\n or \r\n) removed, an empty line is the empty
 * text.  JSONL: each line a JSON string or an object with a "text" string.
 * AUTO picks JSONL for names ending in .jsonl or .json, else plain text.
 * Errors name the file and line. */
int cli_texts_read(cli_texts *t, const char *path, cli_in_format fmt, posy_err *err);
void cli_texts_free(cli_texts *t);

/* ---- output ----------------------------------------------------------- */

typedef enum { CLI_OUT_AUTO = 0, CLI_OUT_JSONL = 1, CLI_OUT_NPY = 2 } cli_out_format;

typedef struct cli_vecout {
    FILE *f;
    int own;                 /* fclose on close */
    cli_out_format fmt;
    const char *path;        /* for messages */
    char *line;              /* JSON line buffer */
    size_t line_cap;
    size_t rows_expected, rows_written;
    int dim;
    int sparse;              /* JSON lines as the non-zero entries, [{"index": i, "value": v}, ...] (SPLADE) */
} cli_vecout;

/* Open `path` (NULL or "-": stdout) for `rows` vectors of `dim` floats.
 * AUTO picks .npy by extension, else JSON lines. */
int cli_vecout_open(cli_vecout *o, const char *path, cli_out_format fmt, size_t rows, int dim,
                    posy_err *err);
/* A SPLADE model's vectors: JSON lines hold only the non-zero entries, as
 * /embed_sparse answers them (.npy stays dense).  0, or -1 out of memory. */
int cli_vecout_set_sparse(cli_vecout *o, posy_err *err);
int cli_vecout_write(cli_vecout *o, const float *v, posy_err *err);
/* Flush and close; fails if fewer rows than announced were written. */
int cli_vecout_close(cli_vecout *o, posy_err *err);

/* Shortest decimal text that reads back (strtof) as exactly `v`; "null" for
 * NaN and infinities, which JSON cannot hold.  `buf` needs 32 bytes.
 * Returns the length. */
int cli_fmt_float(float v, char *buf);
/* Write the NumPy v1.0 header for a little-endian float32 [rows, cols] array. */
int cli_npy_header(FILE *f, size_t rows, size_t cols);

/* ---- progress --------------------------------------------------------- */

typedef struct cli_progress {
    int on;
    size_t total, done;
    double t0, last;
} cli_progress;

void cli_progress_start(cli_progress *p, size_t total);   /* on only when stderr is a TTY */
void cli_progress_update(cli_progress *p, size_t done);
void cli_progress_finish(cli_progress *p);

/* ---- the run ---------------------------------------------------------- */

typedef struct cli_embed_job {
    posy_engine *engine;
    const tok_tokenizer *tok;
    const cli_texts *texts;
    const char *prompt;       /* prepended to every text, or NULL */
    int lower;                /* do_lower_case: lowercase prompt + text before tokenizing */
    int add_special;          /* the tokenizer's special tokens (0: a static embedding model) */
    int exclude_prompt;       /* Pooling include_prompt false: prompt tokens are not pooled */
    int max_seq_len;          /* truncation, tokens incl. specials */
    int max_batch_tokens;
    int max_batch_seqs;
    int force_normalize;      /* L2-normalise even if the model does not */
    int chunked;              /* split over-long texts into windows and combine them (posy_chunk.h) */
    int model_normalize;      /* the model L2-normalises: so does the windows' combination */
    cli_vecout *out;
    cli_progress *progress;
} cli_embed_job;

int cli_embed_run(const cli_embed_job *job, posy_err *err);

/* ---- an inference-free SPLADE model's query route (cli_embed_query.c) --- */

struct eng_config;
/* Every text's query vector (vocabulary-wide) to `out`, without the
 * engine.  0, or -1 with err set. */
int cli_embed_query_run(const char *model, const struct eng_config *cfg, const tok_tokenizer *tok,
                        const cli_texts *texts, const char *prompt, cli_vecout *out, posy_err *err);

#endif

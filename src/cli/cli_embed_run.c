/* cli_embed_run: from texts to written vectors through the engine.
 *
 * Texts are tokenized in input order (the prompt, if any, prepended as
 * sentence-transformers does, then truncated to the model's max_seq_len)
 * and packed back to back into a batch until the next one would pass the
 * token budget or the sequence cap.  Batches go through posy_engine_step();
 * there are CLI_SLOTS batch buffers so that, on a device that overlaps,
 * the next batch is tokenized while the previous one runs.  Vectors are
 * written strictly in input order: a finished batch waits for the ones
 * submitted before it.
 *
 * With --chunked, a text longer than max_seq_len is not truncated but split
 * into windows (posy_chunk.h, the rules of the server's "chunked": true):
 * its windows go into one batch as consecutive sequences, and when the
 * batch is written they are combined into the text's one vector.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli_embed.h"
#include "posy_chunk.h"

#define CLI_SLOTS 3

typedef struct embed_slot {
    int32_t *ids, *type_ids, *cu, *skip;
    int32_t *nwin;            /* windows (sequences) of each text in the batch */
    int n_texts;
    float *out;
    posy_batch b;
    int busy, done;
} embed_slot;

typedef struct embed_state {
    const cli_embed_job *job;
    embed_slot slots[CLI_SLOTS];
    int head, count;          /* ring of submitted batches, oldest at head */
    size_t next_text;         /* next text to tokenize */
    size_t written;           /* texts written */
    int have_pending;         /* `enc` holds next_text's tokens already */
    tok_encoding enc;
    char *joined;             /* prompt + text scratch */
    size_t joined_cap;
    int dim;
    int prompt_skip;          /* tokens left out of pooling (include_prompt false), or 0 */
    int32_t *wcu;             /* one text's window boundaries (--chunked) */
} embed_state;

static int slots_alloc(embed_state *st, posy_err *err) {
    const cli_embed_job *j = st->job;
    for (int i = 0; i < CLI_SLOTS; i++) {
        embed_slot *s = &st->slots[i];
        s->ids = malloc(sizeof(int32_t) * (size_t)j->max_batch_tokens);
        s->type_ids = malloc(sizeof(int32_t) * (size_t)j->max_batch_tokens);
        s->cu = malloc(sizeof(int32_t) * ((size_t)j->max_batch_seqs + 1));
        s->skip = malloc(sizeof(int32_t) * (size_t)j->max_batch_seqs);
        s->nwin = malloc(sizeof(int32_t) * (size_t)j->max_batch_seqs);
        s->out = malloc(sizeof(float) * (size_t)j->max_batch_seqs * (size_t)st->dim);
        if (!s->ids || !s->type_ids || !s->cu || !s->skip || !s->nwin || !s->out)
            return posy_err_set(err, POSY_E_NOMEM, "out of memory for batch buffers");
    }
    st->wcu = malloc(sizeof(int32_t) * ((size_t)j->max_batch_seqs + 1));
    if (!st->wcu) return posy_err_set(err, POSY_E_NOMEM, "out of memory for batch buffers");
    return 0;
}

static void state_free(embed_state *st) {
    for (int i = 0; i < CLI_SLOTS; i++) {
        free(st->slots[i].ids);
        free(st->slots[i].type_ids);
        free(st->slots[i].cu);
        free(st->slots[i].skip);
        free(st->slots[i].nwin);
        free(st->slots[i].out);
    }
    free(st->wcu);
    tok_encoding_free(&st->enc);
    free(st->joined);
}

/* Tokenize text `i` into st->enc, with the prompt in front. */
static int encode_text(embed_state *st, size_t i, posy_err *err) {
    const cli_embed_job *j = st->job;
    const char *s = j->texts->s[i];
    size_t n = j->texts->len[i];
    if (j->prompt && *j->prompt) {
        size_t pl = strlen(j->prompt);
        if (pl + n + 1 > st->joined_cap) {
            char *nj = realloc(st->joined, pl + n + 1);
            if (!nj) return posy_err_set(err, POSY_E_NOMEM, "out of memory joining the prompt");
            st->joined = nj;
            st->joined_cap = pl + n + 1;
        }
        memcpy(st->joined, j->prompt, pl);
        memcpy(st->joined + pl, s, n + 1);
        s = st->joined;
        n += pl;
    }
    char *lowered = NULL;
    if (j->lower) {   /* sentence-transformers lowercases prompt and text alike */
        if (tok_lowercase_text(s, n, &lowered, &n, err) != 0) {
            posy_err_wrap(err, "input text %zu", i + 1);
            return -1;
        }
        s = lowered;
    }
    tok_opts o = {.add_special = j->add_special, .max_len = j->chunked ? 0 : j->max_seq_len, .trunc_dir = TOK_TRUNC_RIGHT};
    int rc = tok_encode(j->tok, s, n, &o, &st->enc, err);
    free(lowered);
    if (rc != 0) {
        posy_err_wrap(err, "input text %zu", i + 1);
        return -1;
    }
    if (st->enc.n <= 0 && j->add_special)   /* a static embedding model (no specials) embeds it as zeros */
        return posy_err_set(err, POSY_E_INVALID, "input text %zu: tokenizes to no tokens", i + 1);
    return 0;
}

/* The windows of the encoded text (--chunked, longer than max_seq_len):
 * their count in *k and tokens in *total, or -1 with err. */
static int window_plan(embed_state *st, int *p, int *sfx, int *k, size_t *total, posy_err *err) {
    const cli_embed_job *j = st->job;
    posy_chunk_specials(st->enc.special_mask, st->enc.n, p, sfx);
    *k = posy_chunk_count(st->enc.n, *p, *sfx, j->max_seq_len);
    if (*k < 1)
        return posy_err_set(err, POSY_E_TOO_LONG, "input text %zu: %d special tokens leave no room for text in "
                            "windows of %d tokens", st->next_text + 1, *p + *sfx, j->max_seq_len);
    if (st->prompt_skip + *sfx >= j->max_seq_len)
        return posy_err_set(err, POSY_E_TOO_LONG, "input text %zu: the %d prompt tokens left out of pooling fill "
                            "the first window of %d tokens", st->next_text + 1, st->prompt_skip, j->max_seq_len);
    *total = posy_chunk_total_tokens(st->enc.n, *p, *sfx, j->max_seq_len);
    return 0;
}

/* Pack texts from next_text into slot `s` until the budget is reached; a
 * chunked text's windows all go into the same batch. */
static int slot_fill(embed_state *st, embed_slot *s, posy_err *err) {
    const cli_embed_job *j = st->job;
    int ns = 0, nt = 0;
    s->cu[0] = 0;
    s->n_texts = 0;
    while (st->next_text < j->texts->n && ns < j->max_batch_seqs) {
        if (!st->have_pending && encode_text(st, st->next_text, err) != 0) return -1;
        st->have_pending = 1;
        int n = st->enc.n, k = 1, p = 0, sfx = 0;
        size_t total = (size_t)n;
        if (j->chunked && n > j->max_seq_len && window_plan(st, &p, &sfx, &k, &total, err) != 0) return -1;
        if ((size_t)nt + total > (size_t)j->max_batch_tokens || ns + k > j->max_batch_seqs) {
            if (ns > 0) break;
            if (k > 1)
                return posy_err_set(err, POSY_E_TOO_LONG, "input text %zu needs %d windows of %zu tokens in all, over "
                                    "--max-batch-tokens %d (or %d sequences a batch)", st->next_text + 1, k, total,
                                    j->max_batch_tokens, j->max_batch_seqs);
            return posy_err_set(err, POSY_E_TOO_LONG,
                                "input text %zu has %d tokens, over --max-batch-tokens %d",
                                st->next_text + 1, n, j->max_batch_tokens);
        }
        if (st->prompt_skip && st->prompt_skip >= n)
            return posy_err_set(err, POSY_E_TOO_LONG, "input text %zu: %d tokens after truncation, not more than "
                                "the %d prompt tokens left out of pooling", st->next_text + 1, n, st->prompt_skip);
        if (k == 1) {
            if (n) {   /* a static model's empty text has none (and maybe no buffers yet) */
                memcpy(s->ids + nt, st->enc.ids, sizeof(int32_t) * (size_t)n);
                memcpy(s->type_ids + nt, st->enc.type_ids, sizeof(int32_t) * (size_t)n);
            }
            st->wcu[0] = 0;
            st->wcu[1] = n;
        } else {   /* the type ids are windowed like the ids (the same positions kept) */
            size_t cap = (size_t)(j->max_batch_tokens - nt);
            if (posy_chunk_split(st->enc.ids, n, p, sfx, j->max_seq_len, s->ids + nt, cap, st->wcu, k + 1) != k ||
                posy_chunk_split(st->enc.type_ids, n, p, sfx, j->max_seq_len, s->type_ids + nt, cap, st->wcu, k + 1) != k)
                return posy_err_set(err, POSY_E_INTERNAL, "input text %zu: splitting into windows failed",
                                    st->next_text + 1);
        }
        for (int w = 0; w < k; w++) {   /* the prompt lies in the first window only */
            s->skip[ns] = w ? 0 : st->prompt_skip;
            s->cu[++ns] = nt + st->wcu[w + 1];
        }
        nt += (int)total;
        s->nwin[s->n_texts++] = k;
        st->next_text++;
        st->have_pending = 0;
    }
    /* type ids only for a model with token type embeddings (BERT family):
     * a decoder takes none, as transformers passes it none */
    const int typed = posy_engine_info(j->engine)->type_vocab > 1;
    s->b = (posy_batch){.tag = (uint64_t)(s - st->slots), .n_seqs = ns, .n_tokens = nt,
                        .ids = s->ids, .type_ids = typed ? s->type_ids : NULL, .cu_seqlens = s->cu,
                        .pool_skip = st->prompt_skip ? s->skip : NULL, .out = s->out};
    s->busy = 1;
    s->done = 0;
    return 0;
}

static void l2_normalize(float *v, int dim) {
    double ss = 0.0;
    for (int i = 0; i < dim; i++) ss += (double)v[i] * v[i];
    double nrm = sqrt(ss);
    if (nrm < 1e-12) nrm = 1e-12;   /* torch.nn.functional.normalize's eps */
    for (int i = 0; i < dim; i++) v[i] = (float)(v[i] / nrm);
}

/* Write finished batches at the head of the ring, oldest first. */
static int flush_done(embed_state *st, posy_err *err) {
    const cli_embed_job *j = st->job;
    while (st->count > 0 && st->slots[st->head].done) {
        embed_slot *s = &st->slots[st->head];
        for (int t = 0, q = 0; t < s->n_texts; q += s->nwin[t++]) {
            float *v = s->out + (size_t)q * (size_t)st->dim;
            if (s->nwin[t] > 1) {
                /* weights are cu differences: moving the first window's start
                 * by its skip weighs it by the tokens it pooled; the mean is
                 * written over the first window's vector (element-wise safe) */
                s->cu[q] += s->skip[q];
                posy_chunk_combine(v, s->cu + q, s->nwin[t], st->dim, j->model_normalize, v);
            }
            if (j->force_normalize) l2_normalize(v, st->dim);
            if (cli_vecout_write(j->out, v, err) != 0) return -1;
        }
        st->written += (size_t)s->n_texts;
        s->busy = s->done = 0;
        st->head = (st->head + 1) % CLI_SLOTS;
        st->count--;
        cli_progress_update(j->progress, st->written);
    }
    return 0;
}

static int mark_done(embed_state *st, const posy_result *r, int n, posy_err *err) {
    for (int i = 0; i < n; i++) {
        if (r[i].tag >= CLI_SLOTS || !st->slots[r[i].tag].busy)
            return posy_err_set(err, POSY_E_INTERNAL, "engine returned an unknown batch");
        if (r[i].status != 0)
            return posy_err_set(err, (posy_status)r[i].status, "the engine failed on a batch (status %d)",
                                r[i].status);
        st->slots[r[i].tag].done = 1;
    }
    return flush_done(st, err);
}

static int run_loop(embed_state *st, posy_err *err) {
    const cli_embed_job *j = st->job;
    posy_result res[CLI_SLOTS];
    while (st->next_text < j->texts->n || st->count > 0) {
        int n;
        if (st->next_text < j->texts->n && st->count < CLI_SLOTS) {
            embed_slot *s = &st->slots[(st->head + st->count) % CLI_SLOTS];
            if (slot_fill(st, s, err) != 0) return -1;
            st->count++;
            n = posy_engine_step(j->engine, &s->b, res, CLI_SLOTS, err);
            if (n < 0) {
                posy_err_wrap(err, "engine rejected a batch");
                return -1;
            }
        } else {
            n = posy_engine_wait(j->engine, res, CLI_SLOTS);
            if (n <= 0)
                return posy_err_set(err, POSY_E_INTERNAL, "engine lost %d in-flight batches", st->count);
        }
        if (mark_done(st, res, n, err) != 0) return -1;
    }
    return 0;
}

/* sentence-transformers' prompt_length (tok_prompt_length, shared with the
 * gateway so that `posy embed` and `posy serve` skip the same tokens). */
static int prompt_tokens(embed_state *st, int *n, posy_err *err) {
    const cli_embed_job *j = st->job;
    int rc = tok_prompt_length(j->tok, j->prompt, strlen(j->prompt), j->lower, &st->enc, n, err);
    if (rc) posy_err_wrap(err, "prompt");
    return rc ? -1 : 0;
}

int cli_embed_run(const cli_embed_job *job, posy_err *err) {
    embed_state st;
    memset(&st, 0, sizeof st);
    st.job = job;
    st.dim = job->out->dim;
    int rc = 0;
    if (job->exclude_prompt && job->prompt && *job->prompt) rc = prompt_tokens(&st, &st.prompt_skip, err);
    if (rc == 0) rc = slots_alloc(&st, err);
    if (rc == 0) {
        cli_progress_start(job->progress, job->texts->n);
        rc = run_loop(&st, err);
        cli_progress_finish(job->progress);
    }
    /* Do not free buffers the engine may still read. */
    while (posy_engine_inflight(job->engine) > 0) {
        posy_result res[CLI_SLOTS];
        if (posy_engine_wait(job->engine, res, CLI_SLOTS) <= 0) break;
    }
    state_free(&st);
    return rc;
}

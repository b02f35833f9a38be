/* tok_batch: multi-threaded batch encoding, so a large request tokenizes on
 * several cores.
 *
 * Threads take texts from a shared atomic counter in small chunks (texts
 * vary a lot in length, so static slicing would leave cores idle) and each
 * thread has its own scratch, so out[i] only receives the result arrays.
 * Threads are created per call: the cost (tens of microseconds) is noise
 * next to a batch worth spreading, and small batches never spawn any.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tok_internal.h"

#define TOK_BATCH_CHUNK 16
#define TOK_BATCH_MIN_BYTES (32u << 10) /* below this, one thread is faster */

typedef struct {
    const tok_tokenizer *t;
    const char *const *a, *const *b;
    const size_t *al, *bl;
    int n;
    const tok_opts *opts;
    tok_encoding *out;
    atomic_int next;
    pthread_mutex_t mu;
    int failed, status;
    posy_err err;
} batch_job;

static void run_range(batch_job *j, tok_scratch *sc) {
    for (;;) {
        int start = atomic_fetch_add(&j->next, TOK_BATCH_CHUNK);
        if (start >= j->n) return;
        int end = start + TOK_BATCH_CHUNK < j->n ? start + TOK_BATCH_CHUNK : j->n;
        for (int i = start; i < end; i++) {
            posy_err e = {0};
            int rc = tok_encode_with(j->t, j->a[i], j->al[i], j->b ? j->b[i] : NULL, j->b ? j->bl[i] : 0, j->opts,
                                     &j->out[i], sc, &e);
            if (rc) {
                pthread_mutex_lock(&j->mu);
                if (j->failed < 0 || i < j->failed) { j->failed = i; j->status = rc; j->err = e; }
                pthread_mutex_unlock(&j->mu);
            }
        }
    }
}

static void *worker(void *p) {
    batch_job *j = p;
    tok_scratch *sc = calloc(1, sizeof *sc);
    if (!sc) return NULL; /* the other threads (and the caller) pick up the work */
    run_range(j, sc);
    tok_scratch_free(sc);
    return NULL;
}

int tok_encode_batch(const tok_tokenizer *t, const char *const *texts, const size_t *lens,
                     const char *const *texts_b, const size_t *lens_b, int n, const tok_opts *opts,
                     tok_encoding *out, int n_threads, int *failed, posy_err *err) {
    if (failed) *failed = -1;
    if (n <= 0) return 0;
    batch_job j = {.t = t, .a = texts, .b = texts_b, .al = lens, .bl = lens_b, .n = n, .opts = opts, .out = out,
                   .failed = -1};
    atomic_init(&j.next, 0);
    pthread_mutex_init(&j.mu, NULL);
    size_t bytes = 0;
    for (int i = 0; i < n && bytes < TOK_BATCH_MIN_BYTES; i++) bytes += lens[i] + (texts_b ? lens_b[i] : 0);
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    int max_useful = (n + TOK_BATCH_CHUNK - 1) / TOK_BATCH_CHUNK;
    if (n_threads > max_useful) n_threads = max_useful;
    if (bytes < TOK_BATCH_MIN_BYTES) n_threads = 1;
    pthread_t th[256];
    int spawned = 0;
    for (int i = 1; i < n_threads && i < 256; i++)
        if (pthread_create(&th[spawned], NULL, worker, &j) == 0) spawned++;
    tok_scratch *sc = calloc(1, sizeof *sc);
    if (sc) run_range(&j, sc);
    for (int i = 0; i < spawned; i++) pthread_join(th[i], NULL);
    tok_scratch_free(sc);
    pthread_mutex_destroy(&j.mu);
    if (!sc && atomic_load(&j.next) < n) return posy_err_set(err, POSY_E_NOMEM, "out of memory");
    if (j.failed >= 0) {
        if (failed) *failed = j.failed;
        if (err) *err = j.err;
        return j.status;
    }
    return 0;
}

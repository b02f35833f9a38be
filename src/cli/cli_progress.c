/* cli_progress: a one-line progress bar on stderr for `posy embed`.
 *
 * Drawn only when stderr is a terminal, so logs, pipes and CI output never
 * receive carriage returns.  Redrawn at most ten times a second: a corpus of
 * short texts finishes thousands of batches a second and the bar must not
 * cost more than the work it reports.
 */
#include <stdio.h>
#include <unistd.h>

#include "cli_embed.h"
#include "posy_clock.h"

#define BAR_WIDTH 30

static void draw(cli_progress *p, double now) {
    size_t filled = p->total ? (p->done * BAR_WIDTH) / p->total : BAR_WIDTH;
    char bar[BAR_WIDTH + 1];
    for (size_t i = 0; i < BAR_WIDTH; i++) bar[i] = i < filled ? '#' : '.';
    bar[BAR_WIDTH] = '\0';
    double dt = now - p->t0;
    double rate = dt > 0 ? (double)p->done / dt : 0.0;
    fprintf(stderr, "\r[%s] %zu/%zu texts  %.1f texts/s ", bar, p->done, p->total, rate);
    fflush(stderr);
}

void cli_progress_start(cli_progress *p, size_t total) {
    p->on = isatty(STDERR_FILENO);
    p->total = total;
    p->done = 0;
    p->t0 = p->last = posy_now_s();
    if (p->on) draw(p, p->t0);
}

void cli_progress_update(cli_progress *p, size_t done) {
    p->done = done;
    if (!p->on) return;
    double now = posy_now_s();
    if (now - p->last < 0.1 && done < p->total) return;
    p->last = now;
    draw(p, now);
}

void cli_progress_finish(cli_progress *p) {
    if (!p->on) return;
    draw(p, posy_now_s());
    fputc('\n', stderr);
    p->on = 0;
}

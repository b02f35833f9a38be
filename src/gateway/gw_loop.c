/* gw_loop: gw_server's event-loop threads -- each one's h2o state, listener
 * and connections, from creation to teardown.
 *
 * Every h2o object of a loop is created, run and destroyed on that loop's
 * own thread, never on the thread that calls gw_server_start.  The reason
 * is h2o 2.2's memory recycling: socket input buffers come from a
 * thread-local, unlocked free list (h2o_socket_buffer_prototype is
 * __thread), and a socket keeps using the list of the thread that created
 * it.  The main thread used to create every loop's message-queue pipe
 * socket (and the context's own queue pipe and the listener); then each
 * posted response made a loop thread pop and push the *main thread's* list
 * with no lock, two loops raced on it, the same 8 KiB buffer went to two
 * sockets, and read() wrote into a buffer the other loop had already
 * recycled: the heap-use-after-free in h2o's socket read under ASan, and
 * corrupted lists (aborts) in release builds.  So loop_main builds the
 * evloop, the context, our queue and the listener socket itself, and
 * gw_loops_start waits for all loops to report before returning.
 *
 * Teardown: h2o 2.2 cannot dispose a context with open connections and has
 * no call that closes them, so each loop keeps its own list of accepted
 * sockets (through the socket's on_close hook, which h2o itself uses only
 * for client-side sockets).  When told to stop, a loop shuts those fds down
 * (h2o then sees end-of-file or a write error and frees each connection
 * the normal way) and runs until none is left, then disposes the context,
 * the queue and the evloop.  A loop with a call still in flight (the drain
 * timed out) keeps its h2o state: freeing it would turn the call's late
 * completion into a use-after-free, and the process is about to exit.
 */
#include <stdlib.h>
#include <sys/socket.h>

#include "gw_internal.h"
#include "posy_clock.h"
#include "posy_log.h"

/* What h2o 2.2 keeps for the life of the process on purpose: freed pool
 * chunks and socket buffers wait in thread-local recycle lists (no API
 * empties them), which LeakSanitizer reports when a loop thread ends.  Only
 * those are excused; everything posy allocates stays checked.  (The
 * sanitizer runtime calls this; a build without it never does.) */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:h2o_mem_alloc_recycle\n"; }

struct gw_conn {
    h2o_socket_t *sock;
    gw_loop *loop;
    gw_conn *prev, *next;
};

/* h2o disposed the socket (its connection is gone). */
static void conn_on_close(void *p) {
    gw_conn *k = p;
    if (k->prev) k->prev->next = k->next; else k->loop->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    free(k);
}

static void on_accept(h2o_socket_t *listener, const char *err) {
    gw_loop *l = listener->data;
    if (err) return;
    for (int i = 0; i < 16; i++) {
        h2o_socket_t *sock = h2o_evloop_socket_accept(listener);
        if (!sock) break;
        gw_conn *k = malloc(sizeof *k);
        if (!k) {   /* cannot track it, so cannot close it at stop: refuse it */
            h2o_socket_close(sock);
            continue;
        }
        *k = (gw_conn){.sock = sock, .loop = l, .next = l->conns};
        if (l->conns) l->conns->prev = k;
        l->conns = k;
        sock->on_close.cb = conn_on_close;
        sock->on_close.data = k;
        h2o_accept(&l->accept, sock);
    }
}

static void close_listener(gw_loop *l) {
    if (!l->listener) return;
    h2o_socket_read_stop(l->listener);
    h2o_socket_close(l->listener);   /* closes the fd: no new connections */
    l->listener = NULL;
}

/* On the loop thread: the evloop, the context, the response queue, the listener. */
static void loop_build(gw_loop *l) {
    gw_server *s = l->srv;
    h2o_context_init(&l->ctx, h2o_evloop_create(), &s->config);
    l->accept.ctx = &l->ctx;
    l->accept.hosts = s->config.hosts;
    l->queue = h2o_multithread_create_queue(l->ctx.loop);
    h2o_multithread_register_receiver(l->queue, &l->receiver, gw_on_messages);
    l->listener = h2o_evloop_socket_create(l->ctx.loop, l->listen_fd, H2O_SOCKET_FLAG_DONT_READ);
    l->listen_fd = -1;   /* the socket owns it now */
    l->listener->data = l;
    h2o_socket_read_start(l->listener, on_accept);
}

/* h2o 2.2's h2o_multithread_destroy_queue closes the pipe but forgets to
 * free the queue (fixed upstream in 2.3); free it here on 2.2 only. */
static void queue_destroy(h2o_multithread_queue_t *q) {
    h2o_multithread_destroy_queue(q);
#if H2O_VERSION_MAJOR == 2 && H2O_VERSION_MINOR <= 2
    free(q);
#endif
}

/* On the loop thread, after it stopped serving.  Returns 1 if torn down. */
static int loop_teardown(gw_loop *l) {
    close_listener(l);
    for (gw_conn *k = l->conns; k; k = k->next) shutdown(h2o_socket_get_fd(k->sock), SHUT_RDWR);
    uint64_t t_end = posy_now_ns() + 2000000000ull;
    while ((l->conns || l->n_calls) && posy_now_ns() < t_end) {
        h2o_evloop_run(l->ctx.loop, 10);
        gw_watch_disconnects(l);
    }
    if (l->conns || l->n_calls) {
        POSY_DEBUG("gw: loop %d keeps its state: %d calls still in flight", l->idx, l->n_calls);
        return 0;
    }
    h2o_multithread_unregister_receiver(l->queue, &l->receiver);
    queue_destroy(l->queue);
    l->queue = NULL;
    h2o_multithread_queue_t *ctx_queue = l->ctx.queue;
    h2o_context_dispose(&l->ctx);
#if H2O_VERSION_MAJOR == 2 && H2O_VERSION_MINOR <= 2
    free(ctx_queue);   /* destroyed (not freed) by h2o_context_dispose, as above */
#else
    (void)ctx_queue;
#endif
    h2o_evloop_destroy(l->ctx.loop);   /* frees the sockets closed above */
    return 1;
}

static void report_started(gw_loop *l, int v) {
    pthread_mutex_lock(&l->srv->start_mu);
    l->started = v;
    pthread_cond_broadcast(&l->srv->start_cv);
    pthread_mutex_unlock(&l->srv->start_mu);
}

static void *loop_main(void *arg) {
    gw_loop *l = arg;
    gw_server *s = l->srv;
    loop_build(l);
    report_started(l, 1);
    while (!atomic_load(&s->stop)) {
        /* busy polling (gw_server_set_busy_poll): while a call of this loop
         * is in flight, and for a while after any traffic, look without
         * sleeping, so a finished call or the client's next request is
         * handled at once rather than after a wake-up */
        int poll = atomic_load_explicit(&s->busy_poll_ns, memory_order_relaxed) &&
                   (l->n_calls > 0 || posy_now_ns() < l->spin_until);
        h2o_evloop_run(l->ctx.loop, poll ? 0 : 20);
        gw_watch_disconnects(l);
        if (atomic_load(&s->draining)) close_listener(l);
    }
    l->clean = loop_teardown(l);
    return NULL;
}

int gw_loops_start(gw_server *s, posy_err *err) {
    for (int i = 0; i < s->opts.n_loops; i++) {
        gw_loop *l = &s->loops[i];
        if (pthread_create(&l->thread, NULL, loop_main, l) != 0) {
            posy_err_set(err, POSY_E_INTERNAL, "cannot start event-loop thread %d", i);
            return -1;   /* start-up failure: the process exits */
        }
        s->n_loops++;
    }
    pthread_mutex_lock(&s->start_mu);
    for (int i = 0; i < s->n_loops; i++)
        while (!s->loops[i].started) pthread_cond_wait(&s->start_cv, &s->start_mu);
    pthread_mutex_unlock(&s->start_mu);
    return 0;
}

void gw_loops_stop(gw_server *s) {
    atomic_store(&s->stop, 1);
    for (int i = 0; i < s->n_loops; i++) pthread_join(s->loops[i].thread, NULL);
}

/* rpc_pool_members: which workers exist and which may take chunks.
 *
 * One background thread, every health_ms: re-resolves the DNS name when
 * due (adding new addresses, retiring vanished ones once idle), then probes
 * each worker without a probe in flight: a healthy one with
 * grpc.health.v1 Check, any other with Info, which re-verifies the model
 * fingerprint and dimension before the worker is trusted again (a
 * restarted pod may run another image).  Chunk failures mark a worker down
 * at once (rpc_pool.c); only a successful Info brings it back.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "posy_clock.h"
#include "posy_log.h"
#include "rpc_codec.h"
#include "rpc_pool_int.h"

#define PROBE_TIMEOUT_MS 1000
#define PROBE_SLOW_MAX 3

typedef struct pool_probe {
    rpc_pool *p;
    pool_worker *w;
    int info;                    /* 1: Info, 0: health Check */
} pool_probe;

pool_worker *pool_worker_add_locked(rpc_pool *p, const char *addr, int from_dns) {
    pool_worker *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    snprintf(w->addr, sizeof w->addr, "%s", addr);
    w->cl = rpc_client_open(addr, &p->loop);
    if (!w->cl) {
        free(w);
        return NULL;
    }
    w->from_dns = from_dns;
    w->seen = 1;
    w->next = p->workers;
    p->workers = w;
    return w;
}

void pool_worker_failed_locked(rpc_pool *p, pool_worker *w, const char *why) {
    (void)p;
    if (w->state == PW_OK) POSY_WARN("gateway: worker %s is down: %s", w->addr, why ? why : "");
    if (w->state != PW_BAD) w->state = PW_DOWN;
}

static void pool_on_probe(void *arg, int code, const char *details, const uint8_t *buf, size_t len) {
    pool_probe *pr = arg;
    rpc_pool *p = pr->p;
    pool_worker *w = pr->w;
    rpc_info info;
    posy_err err;
    int decoded = code == GRPC_STATUS_OK && pr->info && rpc_info_decode(buf, len, &info, &err) == 0;
    pthread_mutex_lock(&p->mu);
    if (!pr->info) {
        /* A refused connection or NOT_SERVING takes a worker out at once; a
         * slow answer only after PROBE_SLOW_MAX in a row (a busy host may
         * answer late yet be fine: chunks still complete). */
        if (code == GRPC_STATUS_OK && rpc_health_decode(buf, len) == 1) w->slow_probes = 0;
        else if (code == GRPC_STATUS_DEADLINE_EXCEEDED && ++w->slow_probes < PROBE_SLOW_MAX) {}
        else pool_worker_failed_locked(p, w, code == GRPC_STATUS_OK ? "health: NOT_SERVING" : details);
    } else if (decoded) {
        if (strcmp(info.fingerprint, p->fingerprint) != 0 || info.dim != p->o.dim) {
            if (w->state != PW_BAD)
                POSY_ERROR("gateway: worker %s serves model '%s' (fingerprint %s, dim %d), not this gateway's "
                           "(fingerprint %s, dim %d); it will not be used",
                           w->addr, info.model, info.fingerprint, info.dim, p->fingerprint, p->o.dim);
            w->state = PW_BAD;
        } else if (p->o.need_pool_skip && !info.pool_skip) {
            if (w->state != PW_BAD)
                POSY_ERROR("gateway: worker %s does not apply pool skips (an older posy worker), which this model "
                           "needs (include_prompt false); it will not be used", w->addr);
            w->state = PW_BAD;
        } else {
            if (w->state != PW_OK) POSY_INFO("gateway: worker %s ready (%s on %s)", w->addr, info.model, info.device);
            w->state = PW_OK;
            w->slow_probes = 0;
            w->tok_dim = info.tok_dim == p->o.tok_dim ? info.tok_dim : 0;
            /* Never send a chunk bigger than a worker accepts. */
            if (info.max_chunk_tokens > 0 && info.max_chunk_tokens < p->o.chunk_tokens) {
                POSY_WARN("gateway: worker %s accepts chunks of <= %d tokens; lowering --chunk-tokens", w->addr,
                          info.max_chunk_tokens);
                p->o.chunk_tokens = info.max_chunk_tokens;
            }
            if (info.max_chunk_seqs > 0 && info.max_chunk_seqs < p->o.chunk_seqs) p->o.chunk_seqs = info.max_chunk_seqs;
        }
    }
    w->probing = 0;
    w->calls--;
    p->calls--;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    free(pr);
}

/* Start a probe of every idle worker; returns how many were started. */
static int pool_probe_round(rpc_pool *p) {
    int started = 0;
    pthread_mutex_lock(&p->mu);
    for (pool_worker *w = p->workers; w; w = w->next) {
        if (w->removed || w->probing) continue;
        pool_probe *pr = calloc(1, sizeof *pr);
        if (!pr) break;
        pr->p = p;
        pr->w = w;
        pr->info = w->state != PW_OK;
        grpc_byte_buffer *bb = rpc_bb_copy("", 0); /* InfoRequest and HealthCheckRequest{""} are both empty */
        w->probing = 1;
        w->calls++;
        p->calls++;
        if (rpc_client_call(w->cl, pr->info ? RPC_METHOD_INFO : RPC_METHOD_HEALTH, bb, PROBE_TIMEOUT_MS,
                            pool_on_probe, pr, NULL) != 0) {
            w->probing = 0;
            w->calls--;
            p->calls--;
            free(pr);
            continue;
        }
        started++;
    }
    pthread_mutex_unlock(&p->mu);
    return started;
}

/* Resolve "name:port" and reconcile the DNS-born workers with the answer. */
static void pool_dns_refresh(rpc_pool *p) {
    char host[256];
    snprintf(host, sizeof host, "%s", p->dns);
    char *colon = strrchr(host, ':');
    if (!colon) return;
    *colon = '\0';
    const char *port = colon + 1;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        POSY_WARN("gateway: resolving %s: %s (keeping the current workers)", p->dns, gai_strerror(rc));
        return;
    }
    pthread_mutex_lock(&p->mu);
    for (pool_worker *w = p->workers; w; w = w->next)
        if (w->from_dns) w->seen = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        char ip[INET6_ADDRSTRLEN], addr[300];
        if (a->ai_family == AF_INET) {
            inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, ip, sizeof ip);
            snprintf(addr, sizeof addr, "%s:%s", ip, port);
        } else if (a->ai_family == AF_INET6) {
            inet_ntop(AF_INET6, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, ip, sizeof ip);
            snprintf(addr, sizeof addr, "[%s]:%s", ip, port);
        } else {
            continue;
        }
        pool_worker *w = p->workers;
        while (w && (w->removed || strcmp(w->addr, addr) != 0)) w = w->next;
        if (w) w->seen = 1;
        else if (pool_worker_add_locked(p, addr, 1)) POSY_INFO("gateway: discovered worker %s via %s", addr, p->dns);
    }
    for (pool_worker *w = p->workers; w; w = w->next)
        if (w->from_dns && !w->seen && !w->removed) {
            POSY_INFO("gateway: worker %s left %s", w->addr, p->dns);
            w->removed = 1;
        }
    pthread_mutex_unlock(&p->mu);
    freeaddrinfo(res);
}

/* Unlink and free retired workers with nothing in flight. */
static void pool_reap(rpc_pool *p) {
    pool_worker *dead = NULL;
    pthread_mutex_lock(&p->mu);
    for (pool_worker **pw = &p->workers; *pw;) {
        pool_worker *w = *pw;
        if (w->removed && w->calls == 0) {
            *pw = w->next;
            w->next = dead;
            dead = w;
        } else {
            pw = &w->next;
        }
    }
    pthread_mutex_unlock(&p->mu);
    while (dead) {
        pool_worker *n = dead->next;
        rpc_client_close(dead->cl);
        free(dead);
        dead = n;
    }
}

static void *pool_health_main(void *arg) {
    rpc_pool *p = arg;
    uint64_t next_dns = posy_now_ns() + (uint64_t)p->o.dns_ms * 1000000ull;
    for (;;) {
        uint64_t wake = posy_now_ns() + (uint64_t)p->o.health_ms * 1000000ull;
        pthread_mutex_lock(&p->mu);
        while (!p->stop && posy_now_ns() < wake) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 20 * 1000000L;     /* re-check every 20 ms; cv also fires on replies */
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        }
        int stop = p->stop;
        pthread_mutex_unlock(&p->mu);
        if (stop) break;
        if (p->dns[0] && posy_now_ns() >= next_dns) {
            pool_dns_refresh(p);
            next_dns = posy_now_ns() + (uint64_t)p->o.dns_ms * 1000000ull;
        }
        pool_probe_round(p);
        pool_reap(p);
    }
    return NULL;
}

/* First round at open: probe everything and wait for the answers. */
static int pool_first_round(rpc_pool *p, posy_err *err) {
    if (p->dns[0]) pool_dns_refresh(p);
    pool_probe_round(p);
    uint64_t until = posy_now_ns() + (uint64_t)p->o.start_wait_ms * 1000000ull;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        int probing = 0;
        for (pool_worker *w = p->workers; w; w = w->next) probing += w->probing;
        if (!probing || posy_now_ns() >= until) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    int rc = 0;
    for (pool_worker *w = p->workers; w && !rc; w = w->next)
        if (w->state == PW_BAD)
            rc = posy_err_set(err, POSY_E_INVALID,
                              "worker %s serves another model than --model (fingerprint or dimension differ) "
                              "or cannot apply its pooling (pool skips)", w->addr);
    int ok = 0, n = 0;
    for (pool_worker *w = p->workers; w; w = w->next, n++) ok += w->state == PW_OK;
    pthread_mutex_unlock(&p->mu);
    if (!rc) POSY_INFO("gateway: %d of %d workers ready", ok, n);
    return rc;
}

int pool_members_start(rpc_pool *p, posy_err *err) {
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->o.n_backends; i++)
        if (!pool_worker_add_locked(p, p->o.backends[i], 0)) {
            pthread_mutex_unlock(&p->mu);
            return posy_err_set(err, POSY_E_INVALID, "--backend %s: cannot create a channel", p->o.backends[i]);
        }
    pthread_mutex_unlock(&p->mu);
    int rc = pool_first_round(p, err);
    if (rc) return rc;
    if (pthread_create(&p->health_thread, NULL, pool_health_main, p) != 0)
        return posy_err_set(err, POSY_E_INTERNAL, "cannot start the health-check thread");
    return 0;
}

void pool_members_stop(rpc_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->health_thread, NULL);
}

static int pool_default(int v, int d) { return v > 0 ? v : d; }

rpc_pool *rpc_pool_open(const rpc_pool_opts *o, posy_err *err) {
    if (o->n_backends <= 0 && !o->dns) {
        posy_err_set(err, POSY_E_INVALID, "no workers: give --backend HOST:PORT or --backend-dns NAME:PORT");
        return NULL;
    }
    rpc_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->o = *o;
    p->o.chunk_tokens = pool_default(o->chunk_tokens, 2048);
    p->o.chunk_seqs = pool_default(o->chunk_seqs, 512);
    p->o.timeout_ms = pool_default(o->timeout_ms, 30000);
    p->o.health_ms = pool_default(o->health_ms, 500);
    p->o.dns_ms = pool_default(o->dns_ms, 5000);
    p->o.max_attempts = pool_default(o->max_attempts, 4);
    p->o.start_wait_ms = pool_default(o->start_wait_ms, 3000);
    snprintf(p->fingerprint, sizeof p->fingerprint, "%s", o->fingerprint ? o->fingerprint : "");
    if (o->dns) snprintf(p->dns, sizeof p->dns, "%s", o->dns);
    if (o->dns && !strrchr(o->dns, ':')) {
        posy_err_set(err, POSY_E_INVALID, "--backend-dns %s: expected NAME:PORT", o->dns);
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (rpc_loop_start(&p->loop) != 0) {
        posy_err_set(err, POSY_E_INTERNAL, "cannot start the gRPC client thread");
        free(p);
        return NULL;
    }
    if (pool_members_start(p, err) != 0) {
        p->health_thread = 0;
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_mutex_unlock(&p->mu);
        rpc_pool_close(p);
        return NULL;
    }
    return p;
}

void rpc_pool_close(rpc_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    int had_thread = !p->stop;
    pthread_mutex_unlock(&p->mu);
    if (had_thread) pool_members_stop(p);
    pthread_mutex_lock(&p->mu);
    while (p->calls > 0) pthread_cond_wait(&p->cv, &p->mu);
    pool_worker *w = p->workers;
    p->workers = NULL;
    pthread_mutex_unlock(&p->mu);
    while (w) {
        pool_worker *n = w->next;
        rpc_client_close(w->cl);
        free(w);
        w = n;
    }
    rpc_loop_stop(&p->loop);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

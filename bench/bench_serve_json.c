/* bench_serve_json: time to serialize one 1024-float embedding as JSON
 * (posy's gw_json_floats) beside the printf("%.9g") peer, and as base64.
 * Built and run by bench/bench_serve.sh; prints microseconds per vector and
 * the ratio.  Values: a normalised random vector, like a real embedding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gw_float.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int n = 1024, iters = argc > 1 ? atoi(argv[1]) : 20000;
    float v[1024];
    double ss = 0;
    srand(7);
    for (int i = 0; i < n; i++) {
        v[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        ss += (double)v[i] * v[i];
    }
    for (int i = 0; i < n; i++) v[i] = (float)(v[i] / sqrt(ss));
    gw_buf b = {0};
    size_t sink = 0;
    double t0 = now_s();
    for (int it = 0; it < iters; it++) {
        b.len = 0;
        gw_json_floats(&b, v, (size_t)n);
        sink += b.len;
    }
    double t_posy = (now_s() - t0) / iters * 1e6;
    size_t json_len = b.len;
    t0 = now_s();
    for (int it = 0; it < iters; it++) {
        b.len = 0;
        gw_json_base64_floats(&b, v, (size_t)n);
        sink += b.len;
    }
    double t_b64 = (now_s() - t0) / iters * 1e6;
    char tmp[32];
    int piters = iters / 10 > 0 ? iters / 10 : 1;
    t0 = now_s();
    for (int it = 0; it < piters; it++) {
        b.len = 0;
        gw_buf_putc(&b, '[');
        for (int i = 0; i < n; i++) {
            int k = snprintf(tmp, sizeof tmp, "%.9g,", (double)v[i]);
            gw_buf_put(&b, tmp, (size_t)k);
        }
        b.p[b.len - 1] = ']';
        sink += b.len;
    }
    double t_printf = (now_s() - t0) / piters * 1e6;
    printf("json_1024_floats_us %.2f (%zu bytes)\n", t_posy, json_len);
    printf("base64_1024_floats_us %.2f\n", t_b64);
    printf("printf_%%.9g_1024_floats_us %.2f\n", t_printf);
    printf("speedup_vs_printf %.1fx\n", t_printf / t_posy);
    gw_buf_free(&b);
    return sink == 0;
}

/* lab_host: what the host-side CUDA calls on the engine's step path cost,
 * so a change that adds one (fc0fb70: cudaSetDevice at the top of every
 * submit and poll, because the scheduler's thread is not the thread that
 * opened the engine) can be judged against the calls already there.
 *
 * Why: a one-query step is ~60 us of GPU time; host work per step that
 * grows by a microsecond would show in a served query's latency, and the
 * runtime's per-thread device state is not documented as free.  Timed on
 * a second thread (as the scheduler's), median of 7 rounds of N calls:
 *   setdev_same   cudaSetDevice(d) when d is already current;
 *   getdev        cudaGetDevice;
 *   event_done    cudaEventQuery on a completed event (poll's every call);
 *   stream_idle   cudaStreamQuery on an idle stream;
 *   setdev_fresh  the first cudaSetDevice on a fresh thread (one call a
 *                 thread, so the thread's creation is outside the timing).
 * Checks: the calls succeed and cudaGetDevice reports the device set.
 *
 *     build-gpu/lab_host        (LAB_QUICK=1: fewer calls)
 */
#include "lab.h"
#include <chrono>
#include <thread>

static double lh_now_ns(void) {
    return (double)std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* median over 7 rounds of n calls of fn, in ns a call */
template <typename F>
static double lh_per_call_ns(F fn, int n) {
    std::vector<double> r;
    for (int round = 0; round < 7; round++) {
        const double t0 = lh_now_ns();
        for (int i = 0; i < n; i++) fn();
        r.push_back((lh_now_ns() - t0) / n);
    }
    std::sort(r.begin(), r.end());
    return r[3];
}

int main(void) {
    const int n = getenv("LAB_QUICK") ? 20000 : 200000;
    int ndev = 0;
    CUCHECK(cudaGetDeviceCount(&ndev));
    const int dev = ndev - 1; /* the highest device: not the default 0 where there are several */
    CUCHECK(cudaSetDevice(dev));
    cudaStream_t st;
    cudaEvent_t ev;
    CUCHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CUCHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CUCHECK(cudaEventRecord(ev, st));
    CUCHECK(cudaEventSynchronize(ev));
    printf("lab_host: %d device(s), timing on device %d from a second thread, %d calls a round\n", ndev, dev, n);

    std::thread worker([&] {
        CUCHECK(cudaSetDevice(dev));
        int bad = 0;
        const double set_ns = lh_per_call_ns([&] { bad |= cudaSetDevice(dev) != cudaSuccess; }, n);
        int got = -1;
        const double get_ns = lh_per_call_ns([&] { bad |= cudaGetDevice(&got) != cudaSuccess; }, n);
        const double ev_ns = lh_per_call_ns([&] { bad |= cudaEventQuery(ev) != cudaSuccess; }, n);
        const double sq_ns = lh_per_call_ns([&] { bad |= cudaStreamQuery(st) != cudaSuccess; }, n);
        printf("  %-14s %8.1f ns a call\n  %-14s %8.1f ns a call\n  %-14s %8.1f ns a call\n  %-14s %8.1f ns a call\n",
               "setdev_same", set_ns, "getdev", get_ns, "event_done", ev_ns, "stream_idle", sq_ns);
        printf("  %-44s %s  (calls succeed, current device %d, want %d)\n", "host calls", bad || got != dev ? "FAIL" : "ok  ",
               got, dev);
        if (bad || got != dev) lab_failures++;
    });
    worker.join();

    std::vector<double> fresh;
    for (int i = 0; i < 21; i++) {
        double t = 0;
        std::thread th([&] {
            const double t0 = lh_now_ns();
            CUCHECK(cudaSetDevice(dev));
            t = lh_now_ns() - t0;
        });
        th.join();
        fresh.push_back(t);
    }
    std::sort(fresh.begin(), fresh.end());
    printf("  %-14s %8.1f ns (median of 21 threads, max %.1f)\n", "setdev_fresh", fresh[10], fresh[20]);

    CUCHECK(cudaEventDestroy(ev));
    CUCHECK(cudaStreamDestroy(st));
    printf("lab_host: %s\n", lab_failures ? "FAIL" : "ok");
    return lab_failures ? 1 : 0;
}

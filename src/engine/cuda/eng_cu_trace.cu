/* eng_cu_trace: the registry of the traced units (eng_cu_trace.h) and the
 * dump that bench_gpu writes after one traced query (BENCH_TRACE).  In a
 * build without -DENG_CU_TRACE no unit registers and the dump says so. */
#include <stdio.h>
#include <stdlib.h>
#include "eng_cu_backend.h"
#include "eng_cu_trace.h"

#define TRACE_UNITS 16
static eng_cu_trace_reader trace_readers[TRACE_UNITS]; /* zero before any unit's initialiser runs */
static int trace_n_readers;

int eng_cu_trace_register(eng_cu_trace_reader r) {
    if (trace_n_readers < TRACE_UNITS) trace_readers[trace_n_readers++] = r;
    return trace_n_readers;
}

extern "C" int eng_cuda_trace_dump(const char *path, int reset) {
    if (!trace_n_readers) return -1;
    FILE *f = path ? fopen(path, "w") : NULL;
    if (path && !f) return -1;
    eng_cu_trace_rec *recs = (eng_cu_trace_rec *)malloc(sizeof *recs * ENG_CU_TRACE_MAX);
    if (!recs) {
        if (f) fclose(f);
        return -1;
    }
    int total = 0;
    if (f) fprintf(f, "# unit grid block smid start wait_reached wait_returned weights_landed end (globaltimer ns)\n");
    for (int u = 0; u < trace_n_readers && total >= 0; u++) {
        const char *unit = "?";
        const int n = trace_readers[u](recs, ENG_CU_TRACE_MAX, reset, &unit);
        if (n < 0) {
            total = -1;
            break;
        }
        for (int i = 0; f && i < n; i++)
            fprintf(f, "%s %llu %u %u %llu %llu %llu %llu %llu\n", unit, recs[i].grid, recs[i].block, recs[i].smid,
                    recs[i].t[0], recs[i].t[1], recs[i].t[2], recs[i].t[3], recs[i].t[4]);
        total += n;
    }
    free(recs);
    if (f) fclose(f);
    return total;
}

/* eng_cu_window: which elements of a placement in a weight image fall in
 * a window of it.  Both weight uploads (the encoders' in eng_cu_model.cu,
 * the decoders' in eng_cu_qwen3_pack.c) fill the image a window of bytes
 * at a time through a small host buffer rather than building the whole
 * image on the host; each placement then converts only its elements
 * inside the window.  Plain C, so that the CPU-only build tests it.
 */
#ifndef ENG_CU_WINDOW_H
#define ENG_CU_WINDOW_H

#include <stddef.h>
#include <stdlib.h>

/* The window: 256 MiB, or POSY_CUDA_UPLOAD_WINDOW_KIB (a test knob: small
 * windows on small models exercise the same seams as a 7B model's). */
static inline size_t eng_cu_upload_window(void) {
    const char *s = getenv("POSY_CUDA_UPLOAD_WINDOW_KIB");
    long k = s ? strtol(s, NULL, 10) : 0;
    return k >= 1 && k <= (1L << 22) ? (size_t)k << 10 : (size_t)256 << 20;
}

/* Elements [*i0, *i1) of n elements of es bytes placed at byte `at` lie in
 * the window [lo, hi); 0 when none.  lo, hi and `at` multiples of es. */
static inline int eng_cu_window_span(size_t lo, size_t hi, size_t at, size_t n, size_t es, size_t *i0, size_t *i1) {
    if (at >= hi || at + n * es <= lo) return 0;
    *i0 = at >= lo ? 0 : (lo - at) / es;
    *i1 = at + n * es <= hi ? n : (hi - at) / es;
    return *i1 > *i0;
}

#endif

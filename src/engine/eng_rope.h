/* eng_rope: the rotary embedding's inverse frequencies, the one place the
 * CPU engine (eng_cpu_decoder*.c), the CUDA backend's cos/sin table
 * (eng_cu_qwen3_pack.c) and the config (eng_config.c) agree on.
 *
 * Why a header of its own: Llama 3.x checkpoints (and any decoder whose
 * config.json has "rope_scaling" / "rope_parameters" of type "llama3" or
 * "linear") rescale the frequencies, and an engine that ignored it would
 * return vectors that silently differ from transformers'.  Header-only,
 * because the GPU harness build compiles the CUDA backend without the
 * engine's C sources.
 *
 * Every step is float32, as transformers computes it on float32 tensors
 * (modeling_rope_utils: _compute_default_rope_parameters, then
 * _compute_linear_scaling_rope_parameters / _compute_llama3_parameters):
 *   default  inv[i] = 1 / theta^(2i/d)
 *   linear   inv[i] / factor
 *   llama3   with wl = 2 pi / inv[i], lo = orig / low_freq_factor,
 *            hi = orig / high_freq_factor:
 *              wl < hi          inv[i]                 (high frequencies kept)
 *              wl > lo          inv[i] / factor        (low frequencies scaled)
 *              otherwise        (1 - s) inv[i] / factor + s inv[i],
 *                               s = (orig / wl - low_freq_factor) /
 *                                   (high_freq_factor - low_freq_factor)
 * Neither type changes the attention scaling (transformers' attention
 * factor is 1 for both).  Other types (dynamic, yarn, longrope) are
 * refused by the config loader.
 *
 * GTE's remote code (Alibaba-NLP/new-impl, "rope_scaling": {"type": "ntk",
 * "factor": f[, "mixed_b": b]}: gte-*-en-v1.5, gte-multilingual-base)
 * computes its own, fixed at load for every length (its cache is built for
 * max_position_embeddings x f, which exceeds the original context whenever
 * f > 1; the config loader keeps the plain rotary for f <= 1, as that code
 * then does):
 *   ntk       1 / (theta f)^(2i/d) / f^(2/d)
 *   ntk + b   (1 / theta^(2i/d)) / exp(a (i + 1)^b),  a = ln f / (d/2)^b
 */
#ifndef ENG_ROPE_H
#define ENG_ROPE_H

#include <math.h>

typedef enum { ENG_ROPE_DEFAULT = 0, ENG_ROPE_LINEAR = 1, ENG_ROPE_LLAMA3 = 2, ENG_ROPE_NTK = 3 } eng_rope_type;

typedef struct eng_rope {
    double theta;              /* rope_theta */
    eng_rope_type type;
    double factor;             /* linear, llama3, ntk (> 1) */
    double low_freq_factor;    /* llama3 */
    double high_freq_factor;   /* llama3; > low_freq_factor */
    int original_max;          /* llama3: original_max_position_embeddings */
    double mixed_b;            /* ntk: mixed NTK's b; 0: fixed NTK */
} eng_rope;

/* The plain rotary of base theta (what a zeroed struct with theta set means). */
static inline eng_rope eng_rope_plain(double theta) {
    eng_rope r = {theta, ENG_ROPE_DEFAULT, 1.0, 1.0, 4.0, 0, 0.0};
    return r;
}

/* inv[0 .. head_dim/2): the float32 inverse frequencies. */
/* The operation order is torch's on float32 tensors with Python scalars:
 * a scalar over a tensor is the tensor's reciprocal times the scalar
 * (Tensor.__rtruediv__), scalars enter as float32, and the Python-side
 * arithmetic (orig / low_freq_factor, high - low) is double rounded once. */
/* One unscaled frequency v scaled.  The unscaled ones come from pow
 * taken in double and rounded (torch's vectorized powf is not correctly
 * rounded: the two differ by an ulp at a few i), the scaling itself is
 * exactly transformers' (tests/unit/test_eng_rope.c checks both). */
static inline float eng_rope_scale(float v, const eng_rope *r) {
    const float f = (float)r->factor;
    if (r->type == ENG_ROPE_LINEAR) return v / f;
    if (r->type != ENG_ROPE_LLAMA3) return v;
    const float lf = (float)r->low_freq_factor, orig = (float)r->original_max;
    const float span = (float)(r->high_freq_factor - r->low_freq_factor);
    const float lo_wl = (float)((double)r->original_max / r->low_freq_factor);
    const float hi_wl = (float)((double)r->original_max / r->high_freq_factor);
    const float wl = (1.0f / v) * (float)6.283185307179586 /* 2 pi */;
    if (wl > lo_wl) return v / f;
    if (wl < hi_wl) return v;
    const float s = ((1.0f / wl) * orig - lf) / span;
    return (1.0f - s) * v / f + s * v;
}

/* GTE's NTK scaling: the base itself changes (fixed NTK), so it is not a
 * scaling of the plain frequency; float32 steps as that code's torch
 * expressions take them (a Python scalar enters a float32 op as float). */
static inline void eng_rope_inv_freq_ntk(float *inv, int head_dim, const eng_rope *r) {
    const int mixed = r->mixed_b > 0;
    const float base = (float)(r->theta * (mixed ? 1.0 : r->factor));
    const float div = (float)pow(r->factor, 2.0 / head_dim);
    for (int i = 0; i < head_dim / 2; i++) {
        float e = (float)(2 * i) / (float)head_dim;
        const float v = 1.0f / (float)pow((double)base, (double)e);
        /* a (i + 1)^b taken as ln f ((i + 1) / (d/2))^b: the same number,
         * in double, finite for any b (the float form overflows at large b) */
        inv[i] = mixed ? v / (float)exp(log(r->factor) * pow((i + 1) / (head_dim / 2.0), r->mixed_b)) : v / div;
    }
}

static inline void eng_rope_inv_freq(float *inv, int head_dim, const eng_rope *r) {
    if (r->type == ENG_ROPE_NTK) {
        eng_rope_inv_freq_ntk(inv, head_dim, r);
        return;
    }
    for (int i = 0; i < head_dim / 2; i++) {
        float e = (float)(2 * i) / (float)head_dim;
        inv[i] = eng_rope_scale(1.0f / (float)pow((double)(float)r->theta, (double)e), r);
    }
}

#endif

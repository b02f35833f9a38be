/* eng_cpu_decoder: the fast decoder kernels the engine runs (RMSNorm, q/k
 * head norms, rotary embeddings, SwiGLU, Gemma's GeGLU, residual add); GQA attention lives
 * in eng_cpu_attention_gqa.c.
 *
 * Row-wise ops split rows over OpenMP threads when there is enough work to
 * pay for a parallel region (a one-token query stays on one thread), and
 * vectorise inside a row with omp simd.  Rotary embedding computes each
 * (token, frequency) cos/sin pair once and applies it to every Q and K head
 * of the token; the angle is formed in fp32 exactly as the reference does
 * (eng_cpu_decoder.h), so fast and reference differ only in the rounding
 * of the final products.  Nothing allocates except rope's small per-call
 * table of inverse frequencies on the stack.
 */
#include <math.h>
#include "eng_cpu_decoder.h"
#include "eng_cpu_kernels.h"
#include "eng_cpu_vmath.h" /* the gates without libm calls, so their loops vectorise */

#define DEC_PAR_MIN 8192
#define DEC_MAX_HEAD_DIM 1024

ENG_CPU_CLONES static void rms_row(float *y, const float *x, const float *g, float eps, int H) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < H; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)H + eps);
#pragma omp simd
    for (int i = 0; i < H; i++) y[i] = x[i] * inv * g[i];
}

void eng_cpu_rmsnorm(float *y, const float *x, const float *g, float eps, int n_rows, int H) {
#pragma omp parallel for schedule(static) if ((long)n_rows * H >= DEC_PAR_MIN)
    for (int r = 0; r < n_rows; r++) rms_row(y + (size_t)r * H, x + (size_t)r * H, g, eps, H);
}

void eng_cpu_rmsnorm_heads(float *x, size_t ld, size_t col, int n_rows, int n_heads, int head_dim,
                           const float *g, float eps) {
#pragma omp parallel for schedule(static) if ((long)n_rows * n_heads * head_dim >= DEC_PAR_MIN)
    for (int r = 0; r < n_rows; r++)
        for (int h = 0; h < n_heads; h++) {
            float *v = x + (size_t)r * ld + col + (size_t)h * head_dim;
            rms_row(v, v, g, eps, head_dim);
        }
}

/* Rotate every Q and K head of one token row by the angles of position p. */
static void rope_row(float *row, const float *inv, int p, int n_rot_heads, int d) {
    int half = d / 2;
    float c[DEC_MAX_HEAD_DIM / 2], s[DEC_MAX_HEAD_DIM / 2];
    for (int i = 0; i < half; i++) {
        float a = inv[i] * (float)p;
        c[i] = (float)cos((double)a);
        s[i] = (float)sin((double)a);
    }
    for (int h = 0; h < n_rot_heads; h++) {
        float *x = row + (size_t)h * d;
#pragma omp simd
        for (int i = 0; i < half; i++) {
            float x1 = x[i], x2 = x[i + half];
            x[i] = x1 * c[i] - x2 * s[i];
            x[i + half] = x2 * c[i] + x1 * s[i];
        }
    }
}

void eng_cpu_rope(float *qkv, const int32_t *cu_seqlens, int n_seqs, int n_heads, int n_kv_heads,
                  int head_dim, const eng_rope *rope) {
    if (head_dim > DEC_MAX_HEAD_DIM || head_dim < 2) return; /* refused at load (eng_qwen3_weights) */
    size_t ld = (size_t)(n_heads + 2 * n_kv_heads) * head_dim;
    float inv[DEC_MAX_HEAD_DIM / 2];
    eng_rope_inv_freq(inv, head_dim, rope);
    int T = cu_seqlens[n_seqs];
#pragma omp parallel for schedule(static) if ((long)T * ld >= DEC_PAR_MIN)
    for (int t = 0; t < T; t++) {
        int lo = 0, hi = n_seqs - 1;   /* the sequence holding t: last s with cu[s] <= t */
        while (lo < hi) {
            int mid = (lo + hi + 1) / 2;
            if (cu_seqlens[mid] <= t) lo = mid; else hi = mid - 1;
        }
        rope_row(qkv + (size_t)t * ld, inv, t - cu_seqlens[lo], n_heads + n_kv_heads, head_dim);
    }
}

ENG_CPU_CLONES static void swiglu_row(float *o, const float *g, const float *u, int NI) {
#pragma omp simd
    for (int j = 0; j < NI; j++) o[j] = eng_vsilu(g[j]) * u[j];
}

void eng_cpu_swiglu(float *out, const float *gu, int n_rows, int NI) {
#pragma omp parallel for schedule(static) if ((long)n_rows * NI >= DEC_PAR_MIN)
    for (int r = 0; r < n_rows; r++)
        swiglu_row(out + (size_t)r * NI, gu + (size_t)r * 2 * NI, gu + (size_t)r * 2 * NI + NI, NI);
}

/* Gemma's MLP: gelu(gate) * up with the tanh form of GELU, as
 * transformers' gelu_pytorch_tanh (torch's approximate="tanh") */
ENG_CPU_CLONES static void geglu_row(float *o, const float *g, const float *u, int NI) {
#pragma omp simd
    for (int j = 0; j < NI; j++) o[j] = eng_vgelu_tanh(g[j]) * u[j];
}

void eng_cpu_geglu_tanh(float *out, const float *gu, int n_rows, int NI) {
#pragma omp parallel for schedule(static) if ((long)n_rows * NI >= DEC_PAR_MIN)
    for (int r = 0; r < n_rows; r++)
        geglu_row(out + (size_t)r * NI, gu + (size_t)r * 2 * NI, gu + (size_t)r * 2 * NI + NI, NI);
}

/* ModernBERT's MLP: gelu(input) * gate with the exact (erf) GELU */
ENG_CPU_CLONES static void geglu_erf_row(float *o, const float *g, const float *u, int NI) {
#pragma omp simd
    for (int j = 0; j < NI; j++) o[j] = eng_vgelu(g[j]) * u[j];
}

void eng_cpu_geglu_erf(float *out, const float *gu, int n_rows, int NI) {
#pragma omp parallel for schedule(static) if ((long)n_rows * NI >= DEC_PAR_MIN)
    for (int r = 0; r < n_rows; r++)
        geglu_erf_row(out + (size_t)r * NI, gu + (size_t)r * 2 * NI, gu + (size_t)r * 2 * NI + NI, NI);
}

void eng_cpu_add(float *x, const float *y, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= DEC_PAR_MIN * 8)
    for (size_t i = 0; i < n; i++) x[i] += y[i];
}

/* eng_cpu_attention_deberta: DeBERTa v2 / v3's disentangled attention on
 * the CPU (eng_deberta.h says what it computes).
 *
 * The work splits over OpenMP threads by (sequence, head) as the plain
 * attention's does, with its tile steps (eng_cpu_att_tiles.h).  The
 * position terms need, for a query i and key j, q_i . kr[c] and k_j . qr[c]
 * with c = idx(i - j).  Over one sequence c only spans idx(-(len - 1)) ..
 * idx(len - 1), R rows of the table (at most 2 * len - 1), so each term is
 * one sgemm into a [rows, R] block and a gather: the p2c block [len, R]
 * once a (sequence, head), the c2p block [tq, R] once a query tile.  The
 * scale 1 / sqrt(d * scale_factor) is folded into every product.
 */
#include <math.h>
#include <omp.h>
#include <cblas.h>
#include "eng_cpu_att_tiles.h"
#include "eng_cpu_kernels.h"

static size_t deb_r_max(int max_len, int rows) {
    size_t two = 2 * (size_t)(max_len > 0 ? max_len : 1) - 1;
    return rows > 0 && (size_t)rows < two ? (size_t)rows : two;
}

size_t eng_cpu_attention_deberta_scratch_floats(int max_len, int rows, int n_threads) {
    size_t L = (size_t)(max_len > 0 ? max_len : 1), R = deb_r_max(max_len, rows);
    return (ATT_TQ * L + ATT_TQ * R + L * R) * (size_t)(n_threads > 0 ? n_threads : 1);
}

static void deb_head(float *out, const float *qkv, int first, int len, int h, int n_heads, int d,
                     const eng_cpu_deb_att *a, float *S) {
    const int H = n_heads * d, use_blas = len >= ATT_BLAS_MIN;
    const size_t ld = 3 * (size_t)H;
    const float scale = 1.0f / sqrtf((float)d * (float)a->scale_factor);
    const int *idx = a->idx + (a->max_len - 1);   /* idx[i - j] */
    const int cl = idx[-(len - 1)], R = idx[len - 1] - cl + 1;
    const float *Q0 = qkv + (size_t)first * ld + (size_t)h * d, *K = Q0 + H, *V = Q0 + 2 * (size_t)H;
    float *C = S + (size_t)ATT_TQ * len, *P2 = C + (size_t)ATT_TQ * R;
    if (a->qr)   /* P2[j, r] = scale * k_j . qr[cl + r] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, R, d, scale, K, (int)ld,
                    a->qr + (size_t)cl * H + (size_t)h * d, H, 0.0f, P2, R);
    for (int q0 = 0; q0 < len; q0 += ATT_TQ) {
        const int tq = len - q0 < ATT_TQ ? len - q0 : ATT_TQ;
        const float *Q = Q0 + (size_t)q0 * ld;
        eng_cpu_att_scores(S, Q, K, ld, tq, len, d, scale, use_blas);
        if (a->kr)   /* C[i, r] = scale * q_i . kr[cl + r] */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tq, R, d, scale, Q, (int)ld,
                        a->kr + (size_t)cl * H + (size_t)h * d, H, 0.0f, C, R);
        for (int i = 0; i < tq; i++) {
            float *s = S + (size_t)i * len;
            const int *row = idx + q0 + i;   /* row[-j] = idx(q0 + i - j) */
            const float *c = C + (size_t)i * R;
            for (int j = 0; j < len; j++) {
                const int k = row[-j] - cl;
                s[j] += (a->kr ? c[k] : 0.0f) + (a->qr ? P2[(size_t)j * R + k] : 0.0f);
            }
        }
        eng_cpu_att_softmax(S, tq, len, q0, 0);
        eng_cpu_att_pv(out + (size_t)(first + q0) * H + (size_t)h * d, (size_t)H, S, V, ld, tq, len, d, use_blas);
    }
}

int eng_cpu_attention_deberta(float *out, const float *qkv, const int32_t *cu_seqlens, int n_seqs, int n_heads,
                              int head_dim, const eng_cpu_deb_att *a, float *scratch, size_t scratch_floats) {
    int longest = 0;
    for (int s = 0; s < n_seqs; s++) {
        int len = cu_seqlens[s + 1] - cu_seqlens[s];
        if (len > longest) longest = len;
    }
    const size_t per_thread = eng_cpu_attention_deberta_scratch_floats(longest, a->rows, 1);
    if (per_thread > scratch_floats || longest > a->max_len) return -1;
    int nt = omp_get_max_threads();
    if ((size_t)nt * per_thread > scratch_floats) nt = (int)(scratch_floats / per_thread);
    const int blas_threads = openblas_get_num_threads();
    if (blas_threads > 1) openblas_set_num_threads(1);   /* the sgemms run inside the parallel region */
    const int items = n_seqs * n_heads;
    const long work = (long)cu_seqlens[n_seqs] * n_heads * head_dim;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) if (items > 1 && work >= 8192)
    for (int w = 0; w < items; w++) {
        const int s = w / n_heads, h = w % n_heads;
        deb_head(out, qkv, cu_seqlens[s], cu_seqlens[s + 1] - cu_seqlens[s], h, n_heads, head_dim, a,
                 scratch + (size_t)omp_get_thread_num() * per_thread);
    }
    if (blas_threads > 1) openblas_set_num_threads(blas_threads);
    return 0;
}

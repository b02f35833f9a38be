/* eng_cpu_att_tiles: the tile steps of the CPU attention (eng_cpu_attention.c),
 * shared with DeBERTa's disentangled attention (eng_cpu_attention_deberta.c),
 * which adds its position terms between the scores and the softmax.
 *
 * A tile is tq query rows against n_keys keys; Q, K and V are read where the
 * fused QKV GEMM left them (row stride ld = 3H).  use_blas picks one sgemm
 * per product (sequences of ATT_BLAS_MIN tokens or more) over plain loops.
 */
#ifndef ENG_CPU_ATT_TILES_H
#define ENG_CPU_ATT_TILES_H

#include <stddef.h>

#define ATT_TQ 64
#define ATT_BLAS_MIN 16

/* S[i, j] = scale * q_i . k_j, S row-major [tq, n_keys] */
void eng_cpu_att_scores(float *S, const float *Q, const float *K, size_t ld, int tq, int n_keys, int d, float scale,
                        int use_blas);
/* each row's softmax in place; causal: row i sees keys up to q0 + i */
void eng_cpu_att_softmax(float *S, int tq, int n_keys, int q0, int causal);
/* O[i] = sum_j P[i, j] v_j, output row stride ldo */
void eng_cpu_att_pv(float *O, size_t ldo, const float *P, const float *V, size_t ld, int tq, int n_keys, int d,
                    int use_blas);

#endif

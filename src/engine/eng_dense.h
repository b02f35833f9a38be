/* eng_dense: sentence-transformers' Dense modules, run by the engine front
 * on the pooled vectors whatever the backend.
 *
 * Why in the front: a Dense layer works on one vector a sequence (a few
 * hundred thousand multiply-adds), so it does not need the GPU, and
 * applying it after the backend hands a batch back keeps the CUDA graphs,
 * the pooling kernels and the CPU engine unchanged: the backends pool
 * (without normalising when Dense follows: eng_config_pool_normalize),
 * then each module computes y = act(W x + b) in fp32 (OpenBLAS through
 * eng_cpu_linear, or posy's packed kernel once eng_dense_pack has run: the
 * CPU engine's SPLADE head, the same code on its vocabulary-wide
 * projection), and the L2 normalisation of a Normalize module comes
 * last, as sentence-transformers runs them.  Activations as torch
 * computes them: tanh, relu, sigmoid 1 / (1 + e^-x), GELU with erf.
 */
#ifndef ENG_DENSE_H
#define ENG_DENSE_H

#include "cpu/eng_cpu_gemm_packed.h"
#include "eng_config.h"
#include "posy_err.h"

typedef struct eng_dense_layer {
    float *w;                    /* [out, in], fp32 (owned) */
    float *b;                    /* [out] or NULL */
    int in, out;
    eng_dense_act act;
    float *ln_g, *ln_b;          /* a LayerNorm after the activation (a reranker's head), or NULL (ln_b zeros
                                    when the checkpoint has no bias) */
    float ln_eps;
    eng_cpu_pack pk;             /* w packed for the CPU's own kernel (eng_dense_pack), or empty */
} eng_dense_layer;

typedef struct eng_dense {
    eng_dense_layer layers[ENG_MAX_DENSE];
    int n;
    int widest;                  /* the largest in / out, for scratch */
    int normalize;               /* a Normalize module after them */
    int isa;                     /* eng_cpu_isa the packs are for; NONE (0): eng_cpu_linear (OpenBLAS) on w */
} eng_dense;

/* Load the weights of cfg->dense[] from <model_dir>/<path>/model.safetensors
 * ("linear.weight" [out, in], "linear.bias" [out] when bias).  A module
 * folder with only pytorch_model.bin gets an error saying how to convert
 * it.  0, or -1 with err set (nothing left allocated). */
int eng_dense_load(eng_dense *d, const eng_config *cfg, const char *model_dir, posy_err *err);
/* Packs every layer's weight for the CPU's own linear kernel
 * (eng_cpu_gemm_packed.h) and frees the loaded copy: for a SPLADE model's
 * masked-LM head, whose 30522 x 768 projection OpenBLAS would repack on
 * every 64-token chunk (18% of a distilbert-base SPLADE forward in
 * sgemm_incopy).  Returns the bytes packed; 0 when nothing was (no AVX2 +
 * FMA, POSY_CPU_SMALL_GEMM=0, no memory): then OpenBLAS on the loaded copy,
 * as before.  Only for a model whose layers nothing else reads (the CPU
 * engine's SPLADE head, not one the GPU uploads). */
size_t eng_dense_pack(eng_dense *d);

void eng_dense_free(eng_dense *d);
/* A SPLADE model's masked-LM head (cfg->splade_head: the transform, then
 * the vocabulary projection) as two layers from the model's own
 * checkpoint, applied per token by eng_splade.c; nothing when not SPLADE. */
int eng_dense_load_splade(eng_dense *d, const eng_config *cfg, const char *model_dir, posy_err *err);

/* y[n][last out] from x[n][first in] through every layer, then the L2
 * normalisation when d->normalize.  scratch holds 2 * n * widest floats.
 * x and y may be the same buffer only when no layer widens the vector. */
void eng_dense_apply(const eng_dense *d, int n, const float *x, float *y, float *scratch);

/* The front's side (posy_engine.c), for a model with Dense modules: submit
 * a validated batch to the backend with a pooled-vector buffer of its own,
 * and, for the results the backend hands back, run the modules into each
 * batch's own `out`.  drop_pending frees what never came back (close). */
typedef struct eng_dense_pending eng_dense_pending;
int eng_dense_submit(posy_engine *e, const posy_batch *b, posy_err *err);
void eng_dense_finish(posy_engine *e, const posy_result *done, int n_done);
void eng_dense_drop_pending(posy_engine *e);

#endif

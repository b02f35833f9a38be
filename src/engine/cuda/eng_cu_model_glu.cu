/* eng_cu_model_glu: the forward pass of Gemma 3 (EmbeddingGemma) and
 * ModernBERT on the GPU.  Both load as the decoders' weights
 * (eng_qwen3_weights: Q|K|V and gate|up stacked, the image of
 * eng_cu_qwen3_pack.c, uploaded by eng_cu_qwen3_upload) and differ from
 * Qwen3 where the CPU engine (eng_cpu_qwen3.c) says:
 *   Gemma 3     embeddings x sqrt(hidden); (1 + w) RMSNorms (the +1 added at
 *               load); a norm after attention and after the MLP, before each
 *               residual add; gelu_tanh(gate) * up; q/k norm (query scale
 *               folded into q_norm); head size 256; sliding layers with their
 *               own rotary and a window
 *   ModernBERT  a LayerNorm after the embedding gather, none before layer 0's
 *               attention; LayerNorms (bias or zeros); GELU(input) * gate;
 *               rotary alone; sliding layers with their own rotary and window;
 *               always bidirectional
 *   NomicBERT   BERT's post-norm layer (nomic-embed-text): x = LN(x + attn),
 *               x = LN(x + mlp), each product reading x itself; token type
 *               row 0 folded into the word table at upload, then the
 *               embedding LayerNorm; SwiGLU; one rotary; no final norm --
 *               the last layer's post-MLP LayerNorm goes with the pooling,
 *               as BERT's does; always bidirectional
 *   GTE         (v1.5 / mGTE) NomicBERT's layer with biases on Q|K|V, O and
 *               down, GELU(gate) * up (the loader stacks up_gate's halves
 *               gate first), the rotary's NTK frequencies in the table;
 *               compiled, not yet run on a GPU (eng_cu_q3_check asks for
 *               POSY_CUDA_GTE=1)
 *
 * Why a forward of its own: the Qwen3 forward is tuned around RMSNorms
 * folded into the GEMMs and residual adds in their epilogues (and the
 * one-query chain built on both); a norm between the product and the
 * residual (Gemma) or a LayerNorm with a bias (ModernBERT) fits neither.
 * This one takes the plain path -- cuBLASLt products (eng_cu_model_gemm off
 * the chain), eng_cu_qk_norm_rope per layer with that layer's rotary table,
 * eng_cu_attention (a window or head size 256 runs eng_cu_attn_win.cu), and
 * eng_cu_glu.cu's kernels -- nine launches a layer (eight with the fused gate):
 *   qkv = h Wqkv^T; q/k norm + rotary; ctx = attention;
 *   y = ctx Wo^T; x += [RMSNorm(y) * post_attn | y], h = norm(x) * ln2 (+ b);
 *   gu = h Wgu^T; act = act(gate) * up  (on the graph path our GEMM with
 *     the gate in its epilogue where it wins the bucket's race: one launch;
 *     POSY_CUDA_GLU_FUSE=0 keeps cuBLASLt + the gate kernel);
 *   y = act Wd^T; x += [RMSNorm(y) * post_mlp | y], h = norm(x) * next ln1
 * then the final norm and the pooling (eng_cu_model_norm_pool).  Buckets
 * get whole-model graphs like every model.  Buckets of the one-query chain
 * (up to 64 tokens, m->chain_max: POSY_CUDA_CHAIN=N sets it, 0 turns it
 * off; eng_cu_model_chain_begin) run the same launches with the four
 * products as chain GEMMs (eng_cu_gemm_chain on plain rows: the weights
 * requested before the wait, no cuBLASLt) and every launch with
 * programmatic dependent launch; the norms stay kernels (the chain's RMS
 * fold carries neither Gemma's post-norms nor a LayerNorm's bias).
 * Run 106 (an H100, docs/BENCHMARKS.md): one 16-token query 579 / 503 us
 * against the graph path's 941 / 859 (EmbeddingGemma / ModernBERT-base);
 * the fused gate 1.02-1.06x a 16k-64k-token step.
 *
 * Verified on an H200 (runs 100-101, docs/BENCHMARKS.md) by
 * tests/cuda/e2e_decoders.py (gemma3, modernbert: the published
 * configurations of EmbeddingGemma-300m and ModernBERT-base, all layers,
 * random weights, against transformers fp32: min cosine 0.999866 /
 * 0.999901), gpu_backend_e2e on the same folders (graph == eager bit for
 * bit, batches in flight), the kernels by dev/cuda/lab_qwen3.cu.
 * POSY_CUDA_GLU=0 turns the path off (eng_cu_q3_check).
 */
#include "eng_cu_model.h"
#include "eng_cu_order.h"
#include <math.h>
#include <string.h>

#define CK(what, call)                                                        \
    do {                                                                      \
        cudaError_t ce_ = (call);                                             \
        if (ce_ != cudaSuccess) return eng_cu_model_fail(err, what, ce_);     \
    } while (0)

int eng_cu_glu_forward(eng_cu_model *m, cudaStream_t s, int T, int S, posy_err *err) {
    const eng_cu_in_layout lay = eng_cu_in_layout_for(T, S);
    const int32_t *in = m->d_in;
    const int *n_tok = in + lay.meta + ENG_CU_META_TOKENS;
    const int H = m->H, I = m->I;
    const int gemma = m->glu == ENG_CU_GLU_GEMMA, post = m->glu == ENG_CU_GLU_POSTLN;
    const int ln = m->glu == ENG_CU_GLU_MODERNBERT || post;
    /* the one-query chain: every product through eng_cu_gemm_chain (plain
     * rows: no norm fold here) and every launch with PDL */
    const int chain = eng_cu_model_chain_begin(m, T);
    eng_cu_order_begin(0);
    bf16 *x = m->x, *y = m->y, *h = m->h;

    eng_cu_glu_norm_args nr;
    memset(&nr, 0, sizeof nr);
    nr.x = x; nr.ln = ln; nr.eps = m->eps; nr.rows = T; nr.H = H; nr.n_rows_dev = n_tok;
    /* x = embed[ids] (x sqrt(H)); Gemma: h = RMSNorm(x) * ln1[0]; ModernBERT:
     * x = h = LayerNorm(x) (the loader leaves layer 0 without a norm before
     * attention); NomicBERT: x = LayerNorm(x), the products read x */
    CK("embedding", eng_cu_glu_embed(s, in + lay.ids, m->word, m->embed_scale, x, T, n_tok, H));
    eng_cu_glu_norm_args e = nr;
    e.h = post ? NULL : h;
    e.g = ln ? m->emb_norm : m->layers[0].ln1_g;
    e.b = m->emb_norm_b;        /* NULL for Gemma */
    e.write_x = e.norm_x = ln;
    CK("embedding norm", eng_cu_glu_norm(s, &e));

    eng_cu_qk_args q;
    eng_cu_attn_args a;
    eng_cu_dec_args(m, T, lay, &q, &a);

    bf16 *in_x = post ? x : h; /* what the products read: the normed rows */
    for (int l = 0; l < m->L; l++) {
        const eng_cu_layer *w = eng_cu_layer_at(m, l);
        if (eng_cu_model_gemm(m, s, chain, in_x, w->qkv_w, w->qkv_b, NULL, m->qkv, T, m->qkv_n, H,
                              w->qkv_b ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE, NULL, err))
            return -1;
        q.q_norm = w->q_norm; q.k_norm = w->k_norm;
        q.rope = w->local && m->rope_local ? m->rope_local : m->rope;
        CK("q/k norm + rotary", eng_cu_qk_norm_rope(s, &q));
        a.window = w->local ? m->window : 0;
        CK("attention", eng_cu_attention(s, &a));
        if (eng_cu_model_gemm(m, s, chain, m->ctx, w->ao_w, w->ao_b, NULL, y, T, H, m->attn_n,
                              w->ao_b ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE, NULL, err))
            return -1;
        eng_cu_glu_norm_args r = nr;
        r.y = y; r.post = gemma ? w->post_attn : NULL;
        r.write_x = 1; r.h = h; r.g = w->ln2_g; r.b = w->ln2_b; /* LayerNorm biases: ModernBERT's only */
        if (post) { /* x = LN1(x + y): ln1 is NomicBERT's norm after attention */
            r.h = NULL; r.norm_x = 1; r.g = w->ln1_g; r.b = w->ln1_b;
        }
        CK("residual + norm", eng_cu_glu_norm(s, &r));
        if (eng_cu_dec_mlp_up(m, s, chain, in_x, w, T, n_tok, err)) return -1;
        if (eng_cu_model_gemm(m, s, chain, m->act, w->down_w, w->down_b, NULL, y, T, H, I,
                              w->down_b ? ENG_CU_EPI_BIAS : ENG_CU_EPI_NONE, NULL, err)) /* GTE's bias */
            return -1;
        r.post = gemma ? w->post_mlp : NULL;
        if (post) { /* x = LN2(x + y); after the last layer x + y alone, LN2 goes with the pooling */
            r.norm_x = l + 1 < m->L;
            r.g = r.norm_x ? w->ln2_g : NULL; r.b = r.norm_x ? w->ln2_b : NULL;
        } else if (l + 1 < m->L) { /* the next layer's input norm; after the last, the final norm goes with the pooling */
            const eng_cu_layer *nx = eng_cu_layer_at(m, l + 1);
            r.g = nx->ln1_g; r.b = nx->ln1_b;
        } else {
            r.h = NULL; r.g = NULL; r.b = NULL;
        }
        CK("residual + norm", eng_cu_glu_norm(s, &r));
    }
    if (post) {
        const eng_cu_layer *last = eng_cu_layer_at(m, m->L - 1);
        return eng_cu_model_norm_pool(m, s, x, last->ln2_g, last->ln2_b, m->h, T, S, in, lay, err);
    }
    return eng_cu_model_norm_pool(m, s, x, m->emb_g, ln ? m->norm_b : NULL, m->h, T, S, in, lay, err);
}

/* eng_cu_model: a model resident on one GPU -- a BERT-family encoder, or a
 * Qwen3 decoder used as an embedder (eng_cu_model_qwen3.cu) -- its bf16
 * weights (one allocation, uploaded once), its activation arena (one
 * allocation sized for the largest bucket) and the forward pass as a
 * sequence of launches on a stream, which the backend either runs eagerly
 * or records into a CUDA graph.
 *
 * The forward reads its inputs from a device block whose layout depends on
 * the bucket alone (eng_cu_in_layout): real token and sequence counts,
 * cu_seqlens, pool skips, attention tiles, ids, positions, token types.  The backend
 * fills the same layout in pinned memory and copies it in before each run.
 */
#ifndef ENG_CU_MODEL_H
#define ENG_CU_MODEL_H

#include "eng_cu.h"
extern "C" {
#include "eng_internal.h"
}

/* One layer's device weights.  Qwen3 reuses the fields: qkv_w Q|K|V
 * stacked, ao_w o_proj, up_w gate|up stacked [2I, H], down_w, ln1_g / ln2_g
 * the input / post-attention RMSNorm weights; the biases are NULL unless
 * attention_bias; q_norm / k_norm are the per-head RMSNorm weights. */
typedef struct eng_cu_layer {
    bf16 *qkv_w, *qkv_b, *ao_w, *ao_b, *up_w, *up_b, *down_w, *down_b;
    float *ln1_g, *ln1_b, *ln2_g, *ln2_b;
    float *q_norm, *k_norm;
    /* Gemma 3 / ModernBERT (glu): Gemma's post-attention / post-MLP RMSNorm
     * weights (NULL otherwise); local: a sliding-window layer (its own
     * rotary table and the model's window) */
    float *post_attn, *post_mlp;
    int local;
    /* ln_rows (encoders): the LayerNorm before a GEMM folded into its
     * weights -- W diag(g), b + W beta and the folded matrix's column sums
     * -- for QKV (the previous layer's ln2; NULL in layer 0) and up (ln1);
     * also the chain's LayerNorm fold's (chain_ln) */
    bf16 *qkvf_w, *qkvf_b, *upf_w, *upf_b;
    float *qkvf_c, *upf_c;
    /* DeBERTa without share_att_key: pos_key_proj / pos_query_proj (NULL otherwise) */
    bf16 *pk_w, *pk_b, *pq_w, *pq_b;
} eng_cu_layer;

enum { ENG_CU_ARCH_BERT = 0, ENG_CU_ARCH_QWEN3 = 1 };
enum { ENG_CU_GLU_GEMMA = 1, ENG_CU_GLU_MODERNBERT = 2, ENG_CU_GLU_POSTLN = 3 };

/* Offsets (in int32 units) of the input block for a bucket. */
typedef struct eng_cu_in_layout {
    int tokens, seqs, max_tiles;        /* the bucket's bounds */
    size_t meta, cu, skip, tiles, ids, pos, type, total;   /* skip: per sequence, leading tokens not pooled */
} eng_cu_in_layout;

enum { ENG_CU_META_TOKENS = 0, ENG_CU_META_SEQS = 1, ENG_CU_META_TILES = 2, ENG_CU_META_N = 4 };

/* What a per-bucket race chose (token count T -> choice), for the first
 * ENG_CU_BUCKET_PICKS buckets run; a bucket past them races every time
 * it is run eagerly. */
#define ENG_CU_BUCKET_PICKS 64
typedef struct eng_cu_bucket_picks {
    int T[ENG_CU_BUCKET_PICKS], pick[ENG_CU_BUCKET_PICKS], n;
} eng_cu_bucket_picks;

/* a weight matrix and its padded copy (chain_padw below) */
typedef struct eng_cu_wp {
    const bf16 *w;
    bf16 *p;
} eng_cu_wp;

typedef struct eng_cu_model {
    /* shape */
    int arch;                           /* ENG_CU_ARCH_* */
    int H, I, L, heads, head_dim, vocab, type_vocab, max_pos, pos_off, pos_rows, pool_mode, normalize, epi_up;
    int kv_heads, qkv_n, attn_n;        /* attn_n = heads*head_dim (= H for BERT), qkv_n = attn_n + 2*kv_heads*head_dim */
    int causal, rope_rows;              /* decoders */
    int attn_order;                     /* the step's tile list: 1 heaviest first, 0 sequence order */
    int gelu_tanh;                      /* BERT: the tanh form of GELU (else erf) */
    float eps;
    /* weights: one device allocation */
    void *wmem;
    size_t wbytes;
    bf16 *word, *pos, *type;
    float *emb_g, *emb_b;               /* Qwen3: emb_g is the final RMSNorm */
    float *rope;                        /* Qwen3: [rope_rows][head_dim/2][2] cos, sin */
    float *rel;                         /* MPNet: relative position bias (eng_cu_attn_args.rel, rel_max =
                                           max_pos), else NULL */
    /* Gemma 3 and ModernBERT on the decoders' weights (eng_cu_model_glu.cu):
     * glu ENG_CU_GLU_GEMMA / _MODERNBERT / _POSTLN (NomicBERT's and GTE's post-norm
     * layers, the same kernels; 0: none of them), act the MLP's
     * ENG_CU_GLU_* activation, window the sliding layers' |q - k| bound,
     * rope_local their rotary table, embed_scale Gemma's sqrt(hidden);
     * ModernBERT's LayerNorms: emb_norm (+ emb_norm_b) after the gather, the
     * final norm's bias norm_b (emb_g is the final norm's weight, as for
     * Qwen3); every LayerNorm bias is a zeros vector without norm_bias.
     * glu_fuse: the GELU gate in our GEMM's epilogue raced per bucket
     * (on; POSY_CUDA_GLU_FUSE=0 turns it off; eng_cu_model_qwen3.cu).
     * Their one-query chain (chain_max) covers buckets of up to 64 tokens,
     * as the encoders' (POSY_CUDA_CHAIN=N sets it); both measured in run
     * 106 (an H100, docs/BENCHMARKS.md) */
    int glu, glu_act, window, glu_fuse;
    float embed_scale;
    float *rope_local, *emb_norm, *emb_norm_b, *norm_b;
    eng_cu_layer *layers;
    /* activations: one device allocation for max_tokens / max_seqs */
    int max_tokens, max_seqs;
    void *amem;
    size_t abytes;
    bf16 *x, *qkv, *ctx, *y, *inter;   /* inter: Qwen3's gate|up [T, 2I] */
    bf16 *h, *act;                      /* Qwen3 only: normed layer input, SwiGLU output */
    float *rs;                          /* Qwen3 only: rsqrt(mean(x^2) + eps) per row (rms_rows) */
    float2 *ln_part, *ln_s1, *ln_s2;    /* ln_rows: OST partial sums [T][H/64]; ln_rows, chain_ln: (mu, rs) of y1, y2 [T] */
    float *pooled;                      /* [max_seqs, H] */
    /* token states (posy_batch.tok_out, TEI's /embed_all): a forward with
     * want_tok set writes every token's final normed row to tok [T, H]
     * (allocated at the first such batch) and pools from it; the mega
     * kernel is skipped then.  The backend runs such batches eagerly. */
    bf16 *tok;
    int want_tok;
    int32_t *d_in;                      /* input block, eng_cu_in_layout(max) ints */
    int *attn_work;                     /* attention's work counter pair (eng_cu_attn_args.work), zeroed at open */
    unsigned *att_cnt;                  /* the QKV attention tail's counters [kv_heads] (eng_cu_chain_att), zeroed at open */
    eng_cu_gemm_ctx *gemm;
    /* the one-query chain: buckets of at most chain_max tokens run every
     * kernel with programmatic dependent launch and the GEMMs through
     * eng_cu_gemm_chain (default 64, Qwen3 32; POSY_CUDA_CHAIN=N sets it,
     * 0: off);
     * chain_norm: the norms fused into the next GEMM's prologue
     * (POSY_CUDA_CHAIN_NORM=1; slower on the H200 so far); chain_swiglu:
     * Qwen3's SwiGLU in the gate|up GEMM's epilogue (default on,
     * POSY_CUDA_CHAIN_SWIGLU=0: its own kernel); chain_qk: Qwen3's q/k
     * norm + rotary inside attention (default on, POSY_CUDA_CHAIN_QK=0:
     * its own kernel); chain_rope: the same for the rotary alone of the
     * decoders without the q/k norm (Qwen2, Mistral, Llama): the largest
     * bucket that does it (16 by default; POSY_CUDA_CHAIN_ROPE=1: every
     * chain bucket, =0: none, eng_cu_qk_norm_rope's node); chain_l2: each chain GEMM
     * prefetches into L2 the weights of the GEMM chain_l2 GEMMs later
     * (POSY_CUDA_CHAIN_L2=1..8, 0 off); pdl_env: POSY_CUDA_PDL=1 (PDL for
     * the other buckets too) */
    int chain_max, chain_norm, chain_swiglu, chain_qk, chain_rope, chain_l2, pdl_env;
    /* chain_padw: chain GEMMs of buckets of at most 16 tokens read a copy
     * of their weights with padded rows (eng_cu_gemm_chain's wp: one bulk
     * copy a block's slice instead of one a row).  On the H200 (2026-12-04
     * runs 61-62) Qwen3-0.6B's 16-token query went 622.4 -> 602.6 us; not
     * at 32 tokens, where the copies of X outweigh the weights (833.5 ->
     * 846.4 with it there), so it is not used past 16 rows; and the
     * encoders gained nothing (all-MiniLM-L6 63.4 / 63.1 us, BERT-base
     * 180.9 / 181.5 in run 61) or lost (BERT-base 192.9 / 182.1 in run
     * 62: its down projection's padded form has 128 registers, not 130,
     * so two of its blocks share an SM).  So the default is on for Qwen3
     * only; POSY_CUDA_CHAIN_PADW=1 turns it on for every model, =0 off.
     * A bit per GEMM role (weight_slot % 4: 1 QKV, 2 O, 4 up, 8 down), 15
     * when on; POSY_CUDA_CHAIN_PADW_ROLES=mask picks roles, an experiment:
     * no role alone gains and QKV or gate|up alone lose 23 us (run 64),
     * only all four together gain.
     * The copies (chain_wps, n_wps of them, one a weight matrix: about
     * the layers' weight bytes again: 28 x 31.5 MB, ~0.9 GB for Qwen3-0.6B,
     * counted, not measured) are made
     * on the first eager launch that needs each and freed at close */
    int chain_padw, n_wps, cap_wps;
    eng_cu_wp *chain_wps;
    /* the chain's attention inside the O projection's kernel for buckets
     * of <= 16 tokens (eng_cu_chain_attn.cu): 1 (default) for head size 32
     * and for shapes with one head a warp (eng_cu_chain_attn_wh: BERT-base,
     * 16 tokens 201.3 -> 188.8 us on the H200, 2026-12-03 run 19) -- with two
     * heads a warp it took all-MiniLM's 16-token query from 76.6 to 73.7 us
     * but BERT-base's from 220 to 251 and Qwen3-0.6B's from 698 to 899
     * (docs/BENCHMARKS.md); 2 for every shape it is built for
     * (POSY_CUDA_CHAIN_ATTN=1); 0 off (=0) */
    int chain_attn;
    /* Qwen3: attention at the end of the QKV GEMM (eng_cu_chain_att: a
     * lead block of each K/V group computes the group's attention) in
     * buckets of at most 16 tokens, instead of an attention kernel between
     * QKV and O -- one node fewer a layer.  POSY_CUDA_CHAIN_QKV_ATT=1 on;
     * an experiment, off by default: slower than the node on the H200
     * (643.7 against 603.7 us a 16-token query, docs/BENCHMARKS.md) */
    int chain_qkv_att;
    /* The layer's whole MLP as one launch (eng_cu_chain_ffn: split-K
     * partials met by a reduce-scatter behind a grid barrier) in buckets of
     * at most 16 tokens, instead of the up (gate | up) and down GEMMs -- one
     * node fewer a layer: Qwen3 (RMS fold, SwiGLU), and the encoders in the
     * LayerNorm-folded chain (chain_ln; GELU, post-LN residual).
     * POSY_CUDA_CHAIN_FFN=1 on; an experiment, off by default: slower on
     * the H200 (16 tokens: Qwen3-0.6B 758.7 against 600.3 us, all-MiniLM-L6
     * 69.3 against 63.8, BERT-base 226.9 against 181.3; docs/BENCHMARKS.md,
     * "Split launches").  Its per-block weight images
     * (ffn_img, one a layer: ~19 MB each for Qwen3-0.6B, 2.4 MB for
     * all-MiniLM-L6, 9.6 MB for BERT-base; for Qwen3 they replace the
     * padded copies of gate | up and down, which are then never made) are
     * made on a bucket's first, eager run, like the padded copies;
     * ffn_part (fp32 partials) and ffn_bar (the grid barrier's counter)
     * with the first image. */
    int chain_ffn;
    bf16 **ffn_img;
    float *ffn_part;
    unsigned long long *ffn_bar;
    /* Qwen3: attention and the O projection as one launch split by head
     * (eng_cu_chain_ao, the same reduce-scatter) in buckets of at most 16
     * tokens, instead of the attention node and the O GEMM -- one node
     * fewer a layer.  POSY_CUDA_CHAIN_AO=1 on; an experiment, off by
     * default: 663.0 against 600.3 us a 16-token query on the H200.  Images (ao_img,
     * one a layer: Wo's per-block slices, ~4.5 MB for Qwen3-0.6B), ao_part
     * and ao_bar made like ffn_img's. */
    int chain_ao;
    bf16 **ao_img;
    float *ao_part;
    unsigned long long *ao_bar;
    /* all-MiniLM-L6 (eng_cu_chain_ab_ok's shape): the layer's attention
     * block -- QKV with the LayerNorm fold, attention, O, bias, residual
     * -- as one launch split by head, in the LayerNorm-folded chain's
     * buckets of at most 16 tokens, instead of the QKV GEMM and the
     * attention + O kernel.  POSY_CUDA_CHAIN_AB=1 on; an experiment, off
     * by default: 73.6 against 63.8 us a 16-token query on the H200.  Images (ab_img, one
     * a layer, ~1.3 MB), ab_part and ab_bar made like ffn_img's. */
    int chain_ab;
    bf16 **ab_img;
    float *ab_part;
    unsigned long long *ab_bar;
    /* Qwen3-style decoders (q/k norm or none, no biases, the norms folded):
     * all the layers of a bucket of at most 16 tokens as ONE persistent
     * kernel whose weights stream ahead of the layers' dependencies
     * (eng_cu_qstream.cu), instead of the chain's five launches a layer.
     * POSY_CUDA_QSTREAM=1 on; an experiment, off by default: correct and
     * slower than the chain (841.2 against 651.6 us a 16-token Qwen3-0.6B
     * query on an H100, dev/cuda/NOTES.md).  Its image
     * (qs_img: every layer's weights again, laid out per block of the grid,
     * ~0.9 GB for Qwen3-0.6B), the q/k norm weights side by side (qs_norms)
     * and the grid barrier's counter (qs_bar) are made on the bucket's
     * first, eager run; qs_on drops to 0 when they cannot be. */
    int qs_on;
    unsigned char *qs_img;
    float *qs_norms;
    unsigned long long *qs_bar;
    /* which chain kernels let their dependents launch only after their own
     * wait (eng_cu_chain_late), a bit per role: 1 QKV, 2 attention + O / O,
     * 4 up, 8 down (POSY_CUDA_CHAIN_TRIGGER=mask, every chain bucket); -1
     * (default): all four in every encoder chain bucket (since run 17 of
     * 2026-12-03; before, only in the folded ones), QKV and gate/up in
     * Qwen3's 16-token bucket, QKV, O and gate/up in Qwen3's 32 (since
     * 2026-12-04 run 66; none before; chain_late_mask in eng_cu_model.cu) */
    int chain_trigger;
    /* encoders: for chain buckets of at most chain_ln tokens (0: none),
     * the LayerNorms folded into the QKV and up GEMMs (the LayerNorm fold
     * of eng_cu_gemm_chain; O and down add the normalised residual from the
     * fold's row statistics), four kernels a layer instead of six
     * (POSY_CUDA_CHAIN_LN=N, default 32, the bound the H200 runs support,
     * 0 off: eng_cu_model.cu).  Uses the
     * ln_rows folded weights and ln_s1 / ln_s2 */
    int chain_ln;
    /* Qwen3: RMSNorm weights folded into the next matrices at load, the
     * chain's norms applied as a GEMM row scale (default; POSY_CUDA_FOLD_NORM=0
     * off; eng_cu_model_qwen3.cu) */
    int fold_norm;
    /* our Hopper GEMM (eng_cu_wgmma.cu) on the graph path: Qwen3's gate|up
     * product with SwiGLU in its epilogue against cuBLASLt + the SwiGLU
     * kernel, and a contender in every large GEMM's tuning race (on by
     * default where the device has it; POSY_CUDA_WGMMA=0 off).
     * wg_versions: the versions raced, bit 1 << v; 0 when it is off.
     * swiglu_picks: per bucket (token count), which gate|up path won when
     * the bucket was first run (0 cuBLASLt + the SwiGLU kernel, else the
     * version of ours that won), timed on its real operands */
    int wg_versions;
    eng_cu_bucket_picks swiglu_picks;
    /* Qwen3's QKV product with the q/k norm + rotary in our GEMM's
     * epilogue (eng_cu_gemm_wg_qk) on the graph path, where wg_versions
     * and qkv_fuse (on by default, POSY_CUDA_QKV_FUSE=0 off) and it won its race
     * against cuBLASLt + the q/k kernel for the bucket: qkv_picks as
     * swiglu_picks, 1 fused, 0 not */
    int qkv_fuse;
    eng_cu_bucket_picks qkv_picks;
    /* Qwen3's graph path with the norms folded: the RMSNorm before a fused
     * QKV / SwiGLU as row statistics only (eng_cu_rms_rows), the GEMM
     * taking x raw and scaling its rows (on by default, POSY_CUDA_RMS_ROWS=0
     * off) */
    int rms_rows;
    /* ... and those row statistics computed by the fused GEMM itself from
     * the X slices in its shared memory (versions 3 and 4,
     * eng_cu_row_norm), no pass of their own over x (an experiment, off:
     * POSY_CUDA_RMS_SELF=1 on; slower, eng_cu_model.cu says by how much) */
    int rms_self;
    /* encoders on sm_90 (POSY_CUDA_LN_ROWS=1, an experiment): the graph
     * path's LayerNorms never written out -- the O and down GEMMs emit
     * their outputs' row sums (eng_cu_ln_epi OST), eng_cu_ln_stats makes
     * them (mu, rs), and the next GEMMs apply the norm in their epilogues
     * (LNA on the folded weights, LNR on the residual) */
    int ln_rows;
    /* encoders of hidden size 256 or 384 on sm_90 (on by default,
     * POSY_CUDA_ROWLN=0 off): the graph path's O and down projections
     * with their LayerNorm in the same kernel (eng_cu_gemm_wg_rowln), where
     * that beat the product + add_ln in the bucket's race; rowln_picks[0]
     * the O projection's choice per bucket, [1] the down projection's (1
     * fused, 0 not) */
    int rowln;
    eng_cu_bucket_picks rowln_picks[2];
    /* the graph path's kernels in serpentine order (eng_cu_order.c; on
     * unless POSY_CUDA_SERP=0) */
    int serp;
    /* the small-batch persistent kernel (eng_cu_mega.cu), when it fits */
    int mega_ok, mega_grid, mega_nt;
    int mega_maxt;    /* largest bucket it takes (64; 16 in one cluster) */
    int mega_cluster; /* 0: cooperative grid of one block an SM; C: one cluster of C blocks */
    int mega_nbuf;    /* weight buffers (stages requested ahead) */
    size_t mega_wsz;  /* bf16 elements a weight buffer */
    size_t mega_smem;
    void *mega_mem;                     /* device layer table, barrier counter, profile */
    unsigned long long *mega_bar, *mega_prof; /* in mega_mem; prof NULL unless POSY_CUDA_MEGA_PROFILE */
    /* what pooled holds a sequence: H floats, or a SPLADE model's vocab */
    int out_dim;
    /* SPLADE (eng_config_splade.c; eng_cu_splade.cu): the masked-LM head
     * on the normalised token states -- sp_w1 [H, H] + sp_b1 with GELU,
     * a LayerNorm (sp_g, sp_beta), the vocabulary projection sp_w2
     * [vpad, H] + sp_b2 (rows past vocab zero, so every GEMM shape is a
     * multiple of 64) -- a chunk of ENG_CU_SPLADE_CHUNK tokens at a time
     * into sp_logits, each folded into pooled [max_seqs, vocab] by max
     * (or sum) of log1p(relu(logit)); sp_src the host head while opening */
    int splade, splade_sum, splade_log2, vpad;
    bf16 *sp_w1, *sp_b1, *sp_w2, *sp_b2, *sp_logits;
    float *sp_g, *sp_beta;
    const eng_dense *sp_src;
    /* DeBERTa v2 / v3 (eng_cu_model_deberta.cu): deb set; the relative
     * table (deb_rel [deb_rows][H] fp32, LayerNormed at open when deb_ln
     * with deb_rel_g / _b) as uploaded; made at open in deb_mem: the index
     * of every distance (deb_idx [2 max_pos - 1]) and each layer's key and
     * query projections of the table (deb_kr, deb_qr [L][deb_rows][H],
     * NULL for a term the model does not use); deb_share: the layer's own
     * key / query weights project it, else pk / pq; deb_sf the score
     * scale's factor */
    int deb, deb_rows, deb_ln, deb_share, deb_c2p, deb_p2c, deb_sf;
    eng_deberta_cfg deb_cfg;
    float *deb_rel, *deb_rel_g, *deb_rel_b;
    void *deb_mem;
    int *deb_idx;
    float *deb_kr, *deb_qr;
    bf16 *deb_krh, *deb_krl, *deb_qrh, *deb_qrl;   /* their bf16 hi / lo pairs (head size 64: the tensor-core attention) */
} eng_cu_model;

/* DeBERTa (eng_cu_model_deberta.cu): its tables at open, after the weights
 * are on the device (outside any capture); its forward (capturable). */
int eng_cu_deberta_prepare(eng_cu_model *m, posy_err *err);
int eng_cu_deberta_forward(eng_cu_model *m, cudaStream_t s, int T, int S, posy_err *err);

#define ENG_CU_SPLADE_CHUNK 256

/* The SPLADE head on xn (the normalised final token states, T rows) into
 * m->pooled: two GEMMs, a LayerNorm and the per-chunk fold.  Capturable. */
int eng_cu_splade_head(eng_cu_model *m, cudaStream_t s, const bf16 *xn, int T, int S, const int32_t *in,
                       const eng_cu_in_layout &lay, posy_err *err);

eng_cu_in_layout eng_cu_in_layout_for(int tokens, int seqs);

/* Check the architecture, upload weights (bert for the BERT family, q3
 * for qwen3) and reserve the arena.  Errors say what is unsupported, or how
 * much memory was asked for and is free. */
int eng_cu_model_open(eng_cu_model *m, const eng_config *cfg, const eng_bert_weights *bert,
                      const eng_qwen3_weights *q3, int max_tokens, int max_seqs, posy_err *err,
                      const eng_dense *splade = NULL);
void eng_cu_model_close(eng_cu_model *m);

/* Enqueue the whole forward for a bucket (tokens, seqs bounds) on s:
 * embeddings .. pooling into m->pooled.  Capturable. */
int eng_cu_model_forward(eng_cu_model *m, cudaStream_t s, int tokens, int seqs, posy_err *err);

/* The small-batch path (eng_cu_mega.cu): one persistent cooperative kernel
 * for a whole forward of at most 64 tokens.  prepare (at open, outside any
 * capture) decides whether the model fits it and sets it up -- a model that
 * does not fit is not an error, the graph path serves it; usable says
 * whether a bucket of `tokens` takes it (opt-in: POSY_CUDA_MEGA=1);
 * forward enqueues it (capturable). */
int eng_cu_mega_prepare(eng_cu_model *m, posy_err *err);
int eng_cu_mega_usable(const eng_cu_model *m, int tokens);   /* 0 while want_tok */
cudaError_t eng_cu_mega_forward(eng_cu_model *m, cudaStream_t s, int tokens, int seqs);

/* Shared by the architectures' files: a cudaError_t as a posy_err. */
int eng_cu_model_fail(posy_err *err, const char *what, cudaError_t ce);
/* Whether a bucket of T tokens runs as the one-query chain; sets this
 * thread's PDL flag for the forward that follows. */
int eng_cu_model_chain_begin(const eng_cu_model *m, int T);
/* Timing experiments only: built with -DENG_CU_ABLATE, the forward skips
 * the launches of the kinds named in POSY_CUDA_ABLATE ("gemm", "attn",
 * "qk", "norm", "swiglu"), so a same-run difference shows what a kind
 * costs inside the chain (the results are then wrong).  In every other
 * build it is the constant 0. */
#ifdef ENG_CU_ABLATE
#include <stdlib.h>
#include <string.h>
static inline int eng_cu_ablate(const char *kind) {
    const char *a = getenv("POSY_CUDA_ABLATE");
    return a && strstr(a, kind);
}
#else
#define eng_cu_ablate(kind) 0
#endif
/* Layer l's weights; POSY_CUDA_ABLATE=wshare (ablation builds only) gives
 * every layer layer 0's, so the weights a forward reads fit in L2: the
 * difference is what streaming them from HBM costs. */
#define eng_cu_layer_at(m, l) (&(m)->layers[eng_cu_ablate("wshare") ? 0 : (l)])

/* One GEMM of a forward (Y = epi(X W^T + b) + R, M = T rows): the chain
 * kernel (with the norm prologue nm, optional) when `chain` -- which
 * chain_begin granted only if every GEMM of the layer fits it -- else
 * cuBLASLt (nm must be NULL then). */
/* Attention then the O projection, Y = attn(a) Wo^T (+ bo) + R (Wo: [H,
 * K], K = heads x head_dim): one kernel (eng_cu_chain_attn_o) when
 * `chain`, m->chain_attn and the bucket fits it, else the attention kernel
 * into m->ctx and eng_cu_model_gemm.  n_tok / n_seq: the input block's
 * real counts. */
/* res (the chain only): R as the LayerNorm of its raw rows (eng_cu_chain_res). */
int eng_cu_model_attn_o(eng_cu_model *m, cudaStream_t s, int chain, const eng_cu_attn_args *a, const int *n_tok,
                        const int *n_seq, const bf16 *Wo, const bf16 *bo, const bf16 *R, bf16 *Y, int T, int K,
                        posy_err *err, const eng_cu_chain_res *res = NULL);
/* Qwen3's QKV with the attention tail (eng_cu_chain_att): Y = X W^T as
 * eng_cu_model_gemm's chain path, and attention(Y) into att->a.o.
 * Returns 1 when launched, 0 when this launch cannot carry the tail
 * (nothing launched: run attention as its own kernel), -1 on error. */
int eng_cu_model_qkv_att(eng_cu_model *m, cudaStream_t s, const eng_cu_chain_att *att, const bf16 *X, const bf16 *W,
                         const bf16 *B, bf16 *Y, int T, int N, int K, const eng_cu_chain_norm *nm, posy_err *err);
/* The encoders' attention block as one launch (chain_ab, eng_cu_chain_ab)
 * for layer l of the LayerNorm-folded chain: Y = O(attention(QKV(LN(X))))
 * + LN(X) with the previous layer's LN2 (layer 0: X as it is), raw.
 * Returns 1 when launched, 0 when off or not possible (nothing launched:
 * run the QKV GEMM and attention + O), -1 on error. */
int eng_cu_model_ab(eng_cu_model *m, cudaStream_t s, int l, const eng_cu_attn_args *a, const int *n_tok,
                    const int *n_seq, const bf16 *X, bf16 *Y, int T, posy_err *err);
/* The MLP as one launch (chain_ffn, eng_cu_chain_ffn) for layer l: Qwen3
 * Y = X + MLP(RMSNorm(X)); encoders (the LayerNorm-folded chain, X raw)
 * Y = LN1(X) + MLP(LN1(X)), raw.  Returns 1 when launched, 0 when it is off
 * or this launch cannot be made (nothing launched: run the two GEMMs),
 * -1 on error. */
int eng_cu_model_ffn(eng_cu_model *m, cudaStream_t s, int l, const eng_cu_layer *w, const bf16 *X, bf16 *Y, int T,
                     const int *n_tok, posy_err *err);
/* Qwen3's attention + O projection as one launch (chain_ao,
 * eng_cu_chain_ao): Y = R + attention(a) Wo^T for layer l (a's q_norm and
 * k_norm set to the layer's).  Returns 1 when launched, 0 when off or not
 * possible (nothing launched: run the attention node and the O GEMM), -1
 * on error. */
/* The layers as one persistent kernel (qs_on, eng_cu_qstream) on x in
 * place: 1 when it ran, 0 when the shape or its image cannot (the caller
 * runs the chain), -1 on a CUDA error (err set). */
int eng_cu_model_qstream(eng_cu_model *m, cudaStream_t s, bf16 *x, int T, const int *n_tok, const int *n_seq,
                         const int *cu, posy_err *err);
int eng_cu_model_ao(eng_cu_model *m, cudaStream_t s, int l, const eng_cu_layer *w, const eng_cu_attn_args *a,
                    const int *n_tok, const int *n_seq, const bf16 *R, bf16 *Y, int T, posy_err *err);
int eng_cu_model_gemm(eng_cu_model *m, cudaStream_t s, int chain, const bf16 *X, const bf16 *W, const bf16 *B,
                      const bf16 *R, bf16 *Y, int T, int N, int K, int epi, const eng_cu_chain_norm *nm,
                      posy_err *err, const eng_cu_chain_res *res = NULL);

/* The forward's end: the last norm of x (LayerNorm with gamma / beta, or
 * RMSNorm when beta is NULL) and the pooling into m->pooled -- one kernel
 * (eng_cu_ln_pool) where it takes H and is on, else the norm into
 * `scratch` (T rows) and eng_cu_pool over it.  in / lay: the forward's
 * input block (its cu_seqlens, skips and real counts). */
int eng_cu_model_norm_pool(eng_cu_model *m, cudaStream_t s, const bf16 *x, const float *gamma, const float *beta,
                           bf16 *scratch, int T, int S, const int32_t *in, const eng_cu_in_layout &lay,
                           posy_err *err);

/* Qwen3 (eng_cu_model_qwen3.cu): the shape check (which also holds the
 * POSY_CUDA_QWEN3=0 off switch), the weights upload, and the forward. */
int eng_cu_qwen3_shape(eng_cu_model *m, const eng_config *cfg, posy_err *err);
int eng_cu_qwen3_upload(eng_cu_model *m, const eng_config *cfg, const eng_qwen3_weights *w, posy_err *err);
int eng_cu_qwen3_forward(eng_cu_model *m, cudaStream_t s, int tokens, int seqs, posy_err *err);
/* The decoders' q/k norm + rotary and attention arguments for a bucket of
 * T tokens (its input block's layout): rope the global table, no window,
 * no fused norm (eng_cu_model_qwen3.cu; both forwards). */
void eng_cu_dec_args(const eng_cu_model *m, int T, const eng_cu_in_layout &lay, eng_cu_qk_args *q,
                     eng_cu_attn_args *a);
/* act = gated(X Wgu^T) for layer w (the model's gate: SiLU or a GELU): in
 * the chain the product into inter and the activation kernel (SiLU: the
 * chain GEMM's SwiGLU epilogue); on the graph path our GEMM with the gate
 * in its epilogue where it takes the shape and won this bucket's race,
 * else cuBLASLt into inter and the activation kernel
 * (eng_cu_model_qwen3.cu). */
int eng_cu_dec_mlp_up(eng_cu_model *m, cudaStream_t s, int chain, const bf16 *X, const eng_cu_layer *w, int T,
                      const int *n_tok, posy_err *err);
/* Gemma 3 / ModernBERT's forward (eng_cu_model_glu.cu): the graph path's
 * kernels, and in the one-query chain's buckets the chain GEMMs. */
int eng_cu_glu_forward(eng_cu_model *m, cudaStream_t s, int tokens, int seqs, posy_err *err);

#endif

/* eng_cu_model_deberta: DeBERTa v2 / v3 as a model on the GPU -- the
 * tables its attention reads, made once at open, and the forward.
 *
 * The layer is BERT's post-LN layer run as the graph path's plain form:
 * QKV GEMM, DeBERTa's attention (eng_cu_deberta.cu), O GEMM with the
 * residual, add_ln, up GEMM with GELU, down GEMM with the residual,
 * add_ln; the last LayerNorm inside the pooling, the classifier head in
 * the engine front as for every encoder.  No one-query chain: its fused
 * attention kernels have no position terms.
 *
 * At open, from the weights already on the device: the relative table
 * LayerNormed (norm_rel_ebd layer_norm), then each layer's key and query
 * projections of it -- through the layer's own K / Q weights with
 * share_att_key, else its pos_key_proj / pos_query_proj -- as fp32 tables
 * [2 span][H] (eng_cu_deberta_gemm_f32_bf16 on the bf16 weights), and the
 * index of every distance (eng_deberta_index_table on the host).
 */
#include "eng_cu.h"
#include "eng_cu_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CKD(what, call)                                                        \
    do {                                                                       \
        cudaError_t ce_ = (call);                                              \
        if (ce_ != cudaSuccess) return eng_cu_model_fail(err, what, ce_);      \
    } while (0)

static size_t deb_align(size_t b) { return (b + 255) & ~(size_t)255; }

int eng_cu_deberta_prepare(eng_cu_model *m, posy_err *err) {
    const int H = m->H, R = m->deb_rows, L = m->L, maxl = m->max_pos;
    const size_t nidx = 2 * (size_t)maxl - 1, ntab = (size_t)R * H;
    const size_t b_idx = deb_align(nidx * sizeof(int)), b_tabs = (size_t)L * ntab * sizeof(float);
    /* the tensor-core attention's bf16 hi / lo pairs of each table (head size 64; the default since run 121,
     * where its mean error against transformers fp32 on DeBERTa v3 was 1.05-1.14x transformers' own bf16 run's
     * against the CUDA-core form's 1.08-1.10x, on v1 0.57-0.59x against 0.63-0.65x, at 1.47x the pairs/s);
     * POSY_CUDA_DEBERTA_TC=0 keeps the CUDA-core attention */
    const char *tc_env = getenv("POSY_CUDA_DEBERTA_TC");
    const int tc = m->head_dim == 64 && !(tc_env && !strcmp(tc_env, "0"));
    const size_t b_pair = tc ? deb_align((size_t)L * ntab * sizeof(bf16)) * 2 : 0;
    const size_t bytes = b_idx + (m->deb_c2p ? b_tabs + b_pair : 0) + (m->deb_p2c ? b_tabs + b_pair : 0) +
                         ntab * sizeof(float);
    cudaError_t ce = cudaMalloc(&m->deb_mem, bytes);
    if (ce != cudaSuccess) {
        m->deb_mem = NULL;
        return posy_err_set(err, POSY_E_NOMEM, "cuda backend: DeBERTa's relative position tables need %.1f MiB of "
                            "GPU memory: %s", bytes / 1048576.0, cudaGetErrorString(ce));
    }
    char *p = (char *)m->deb_mem;
    m->deb_idx = (int *)p;
    p += b_idx;
    if (m->deb_c2p) {
        m->deb_kr = (float *)p;
        p += b_tabs;
    }
    if (m->deb_p2c) {
        m->deb_qr = (float *)p;
        p += b_tabs;
    }
    m->deb_krh = m->deb_krl = m->deb_qrh = m->deb_qrl = NULL;
    if (tc && m->deb_c2p) {
        m->deb_krh = (bf16 *)p;
        m->deb_krl = (bf16 *)(p + b_pair / 2);
        p += b_pair;
    }
    if (tc && m->deb_p2c) {
        m->deb_qrh = (bf16 *)p;
        m->deb_qrl = (bf16 *)(p + b_pair / 2);
        p += b_pair;
    }
    float *rel = (float *)p;   /* the LayerNormed table, kept for nothing after open but cheap */
    int *h_idx = (int *)malloc(nidx * sizeof(int));
    if (!h_idx) return posy_err_set(err, POSY_E_NOMEM, "cuda backend: DeBERTa's index table");
    eng_deberta_index_table(&m->deb_cfg, maxl, h_idx);
    ce = cudaMemcpy(m->deb_idx, h_idx, nidx * sizeof(int), cudaMemcpyHostToDevice);
    free(h_idx);
    CKD("DeBERTa index upload", ce);
    if (!R) return 0;
    CKD("DeBERTa table copy", cudaMemcpy(rel, m->deb_rel, ntab * sizeof(float), cudaMemcpyDeviceToDevice));
    if (m->deb_ln) CKD("DeBERTa table norm", eng_cu_deberta_ln_rows(0, rel, m->deb_rel_g, m->deb_rel_b, R, H, m->eps));
    const size_t HH = (size_t)H * H;
    for (int l = 0; l < L; l++) {
        const eng_cu_layer *w = &m->layers[l];
        if (m->deb_c2p)   /* keys: Q|K|V's middle third when shared */
            CKD("DeBERTa key table", eng_cu_deberta_gemm_f32_bf16(0, rel, H, m->deb_share ? w->qkv_w + HH : w->pk_w, H,
                                                                  m->deb_share ? w->qkv_b + H : w->pk_b,
                                                                  m->deb_kr + l * ntab, H, R, H, H));
        if (m->deb_p2c)
            CKD("DeBERTa query table", eng_cu_deberta_gemm_f32_bf16(0, rel, H, m->deb_share ? w->qkv_w : w->pq_w, H,
                                                                    m->deb_share ? w->qkv_b : w->pq_b,
                                                                    m->deb_qr + l * ntab, H, R, H, H));
    }
    const size_t nall = (size_t)L * ntab;
    if (m->deb_krh) CKD("DeBERTa key table pairs", eng_cu_deberta_split(0, m->deb_kr, m->deb_krh, m->deb_krl, nall));
    if (m->deb_qrh) CKD("DeBERTa query table pairs", eng_cu_deberta_split(0, m->deb_qr, m->deb_qrh, m->deb_qrl, nall));
    CKD("DeBERTa tables", cudaDeviceSynchronize());
    return 0;
}

int eng_cu_deberta_forward(eng_cu_model *m, cudaStream_t s, int T, int S, posy_err *err) {
    (void)eng_cu_model_chain_begin(m, T);   /* never a chain (chain_max 0): sets the launch flags */
    const eng_cu_in_layout lay = eng_cu_in_layout_for(T, S);
    const int32_t *in = m->d_in;
    const int *n_tok = in + lay.meta + ENG_CU_META_TOKENS;
    const int H = m->H;
    const size_t ntab = (size_t)m->deb_rows * H;
    CKD("embedding", eng_cu_embed_ln(s, in + lay.ids, in + lay.pos, in + lay.type, m->word, m->pos, m->type, m->emb_g,
                                     m->emb_b, m->x, T, n_tok, H, m->eps));
    eng_cu_deb_args a;
    memset(&a, 0, sizeof a);
    a.q = m->qkv;
    a.k = m->qkv + H;
    a.v = m->qkv + 2 * H;
    a.ldq = a.ldk = a.ldv = 3 * H;
    a.o = m->ctx;
    a.ldo = H;
    a.n_heads = m->heads;
    a.head_dim = m->head_dim;
    a.H = H;
    a.cu_seqlens = in + lay.cu;
    a.tiles = in + lay.tiles;
    a.n_tiles = in + lay.meta + ENG_CU_META_TILES;
    a.max_tiles = lay.max_tiles;
    a.idx = m->deb_idx;
    a.max_len = m->max_pos;
    a.scale_log2 = 1.4426950408889634f / sqrtf((float)m->head_dim * (float)m->deb_sf);
    for (int l = 0; l < m->L; l++) {
        const eng_cu_layer *w = &m->layers[l];
        if (eng_cu_model_gemm(m, s, 0, m->x, w->qkv_w, w->qkv_b, NULL, m->qkv, T, 3 * H, H, ENG_CU_EPI_BIAS, NULL,
                              err, NULL))
            return -1;
        a.kr = m->deb_kr ? m->deb_kr + l * ntab : NULL;
        a.qr = m->deb_qr ? m->deb_qr + l * ntab : NULL;
        a.krh = m->deb_krh ? m->deb_krh + l * ntab : NULL;
        a.krl = m->deb_krl ? m->deb_krl + l * ntab : NULL;
        a.qrh = m->deb_qrh ? m->deb_qrh + l * ntab : NULL;
        a.qrl = m->deb_qrl ? m->deb_qrl + l * ntab : NULL;
        CKD("DeBERTa attention", eng_cu_deberta_attention(s, &a));
        /* y = ctx Wo^T + b + x, x = LN1(y), y = GELU(x Wu^T + bu) Wd^T + bd + x, x = LN2(y) */
        if (eng_cu_model_gemm(m, s, 0, m->ctx, w->ao_w, w->ao_b, m->x, m->y, T, H, H, ENG_CU_EPI_BIAS, NULL, err,
                              NULL))
            return -1;
        CKD("layernorm", eng_cu_add_ln(s, m->y, NULL, w->ln1_g, w->ln1_b, m->x, T, n_tok, H, m->eps));
        if (eng_cu_model_gemm(m, s, 0, m->x, w->up_w, w->up_b, NULL, m->inter, T, m->I, H, m->epi_up, NULL, err,
                              NULL) ||
            eng_cu_model_gemm(m, s, 0, m->inter, w->down_w, w->down_b, m->x, m->y, T, H, m->I, ENG_CU_EPI_BIAS, NULL,
                              err, NULL))
            return -1;
        if (l + 1 < m->L) CKD("layernorm", eng_cu_add_ln(s, m->y, NULL, w->ln2_g, w->ln2_b, m->x, T, n_tok, H, m->eps));
    }
    const eng_cu_layer *last = &m->layers[m->L - 1];
    return eng_cu_model_norm_pool(m, s, m->y, last->ln2_g, last->ln2_b, m->x, T, S, in, lay, err);
}

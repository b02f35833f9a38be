/* fuzz_config: libFuzzer target for eng_config_load, the reader of a model
 * directory's JSON files (config.json, modules.json, the Pooling module's
 * config.json, sentence_bert_config.json, config_sentence_transformers.json,
 * tokenizer_config.json, a Dense module's config.json at 2_Dense/, a
 * Router's router_config.json with its d/ and p/ module folders; and for
 * a StaticEmbedding model at the root, model.safetensors, whose header
 * gives its sizes, and tokenizer.json, whose truncation is its limit).  A
 * model directory is outside input too: a downloaded model, or a volume
 * mounted into a worker.
 *
 * The readers take a directory, not a buffer, so the input is written out
 * as one: it is split at NUL bytes into up to nine pieces, piece i becoming
 * fuzz_files[i] in a scratch directory (under /dev/shm when there is one,
 * for speed); files past the last piece are absent, as optional files may
 * be.  The model.safetensors piece is its JSON header only (a file's length
 * prefix holds NUL bytes): the file written is the prefix, that header and
 * FUZZ_ST_DATA zero bytes of tensor data.  Beyond "no crash, no leak, no UB" it checks what the engine and the
 * gateway rely on after a successful load (sizes in range, heads dividing
 * as the family requires, 1 <= max_seq_len <= max_positions, the default
 * prompt findable, the Dense modules' sizes chained to the dimension
 * served) and that every refusal names the file at fault.
 * Build and run: tests/fuzz/run_fuzz.sh config [seconds].
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_config.h"
#include "eng_relpos.h"

static const char *const fuzz_files[] = {
    "config.json", "modules.json", "1_Pooling/config.json", "sentence_bert_config.json",
    "config_sentence_transformers.json", "tokenizer_config.json", "2_Dense/config.json",
    "model.safetensors", "tokenizer.json", "router_config.json", "d/config.json", "p/config.json",
};
static const char *const fuzz_dirs[] = {"1_Pooling", "2_Dense", "d", "p"};
#define FUZZ_NFILES (int)(sizeof fuzz_files / sizeof fuzz_files[0])

static char g_dir[256];

static void fuzz_cleanup(void) {
    char path[512];
    for (int i = 0; i < FUZZ_NFILES; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, fuzz_files[i]);
        unlink(path);
    }
    for (size_t i = 0; i < sizeof fuzz_dirs / sizeof fuzz_dirs[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, fuzz_dirs[i]);
        rmdir(path);
    }
    rmdir(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc; (void)argv;
    struct stat st;
    const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(g_dir, sizeof g_dir, "%s/posy_fuzz_cfg_XXXXXX", base);
    if (!mkdtemp(g_dir)) abort();
    char sub[300];
    for (size_t i = 0; i < sizeof fuzz_dirs / sizeof fuzz_dirs[0]; i++) {
        snprintf(sub, sizeof sub, "%s/%s", g_dir, fuzz_dirs[i]);
        if (mkdir(sub, 0700)) abort();
    }
    atexit(fuzz_cleanup);
    return 0;
}

#define FUZZ_ST_PIECE 7
#define FUZZ_ST_DATA 4096

static void fuzz_write(int i, const uint8_t *p, size_t n) {
    char path[512];
    static const uint8_t zeros[FUZZ_ST_DATA];
    snprintf(path, sizeof path, "%s/%s", g_dir, fuzz_files[i]);
    if (!p) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    uint8_t len[8];
    for (int b = 0; b < 8; b++) len[b] = (uint8_t)((uint64_t)n >> (8 * b));
    if (i == FUZZ_ST_PIECE && fwrite(len, 1, 8, f) != 8) abort();
    if (n && fwrite(p, 1, n, f) != n) abort();
    if (i == FUZZ_ST_PIECE && fwrite(zeros, 1, sizeof zeros, f) != sizeof zeros) abort();
    if (fclose(f)) abort();
}

static int fuzz_has_file_name(const char *msg) {
    for (int i = 0; i < FUZZ_NFILES; i++)
        if (strstr(msg, fuzz_files[i])) return 1;
    return 0;
}

/* A StaticEmbedding model: sizes from the weights' header, no layers,
 * mean pooling, no special tokens, no transformer field set. */
/* The dimension served: the last Dense module's, the vocabulary's for
 * SPLADE (through its two-layer masked-LM head, nothing after it), one
 * logit a named label for a classifier, else the hidden size. */
static void fuzz_check_dim(const eng_config *c) {
    const posy_model_info *in = &c->info;
    if (in->dim != (c->splade ? in->vocab : c->n_dense ? c->dense[c->n_dense - 1].out : in->hidden)) abort();
    /* SPLADE: the vocabulary-wide vector through the two-layer masked-LM head, nothing after it */
    if (c->splade && (c->n_dense || in->normalize || c->rerank || c->splade_head[0].out != in->hidden ||
                      c->splade_head[1].in != in->hidden || c->splade_head[1].out != in->vocab))
        abort();
    /* a classifier: its labels named, one logit a label */
    if (c->rerank && (c->n_labels < 1 || c->n_labels > ENG_MAX_LABELS || !c->labels || in->dim != c->n_labels))
        abort();
    for (int i = 0; c->rerank && i < c->n_labels; i++)
        if (!c->labels[i]) abort();
    /* classifier_from_token: a decoder's reranker or classifier, token ids inside the vocabulary */
    if (c->n_from_tok && (!c->rerank || !c->rerank_decoder || c->n_from_tok > ENG_MAX_TOK_ROWS ||
                          c->n_labels != (c->from_tok_diff ? 1 : c->n_from_tok) || (c->from_tok_diff && c->n_from_tok != 2)))
        abort();
    for (int i = 0; i < c->n_from_tok; i++)
        if (c->from_tok[i] < 0 || c->from_tok[i] >= in->vocab) abort();
}

static void fuzz_check_static(const eng_config *c) {
    const posy_model_info *in = &c->info;
    if (in->hidden < 1 || in->vocab < 1 || in->layers || in->heads || strcmp(in->arch, "static") || c->add_special)
        abort();
    if (in->pooling != POSY_POOL_MEAN || c->t5 || c->gemma || c->modernbert || c->qk_norm || c->do_lower_case) abort();
    if (in->max_seq_len < 1 || in->max_seq_len > in->max_positions || strstr(c->static_dir, "..") || c->static_dir[0] == '/') abort();
    for (int i = 0; i < c->n_dense; i++)
        if (c->dense[i].in != (i ? c->dense[i - 1].out : in->hidden) || c->dense[i].out < 1) abort();
    fuzz_check_dim(c);
}

static void fuzz_check_ok(const eng_config *c) {
    const posy_model_info *in = &c->info;
    if (c->static_emb) {
        fuzz_check_static(c);
        return;
    }
    if (!c->add_special) abort();
    if (in->hidden < 1 || in->heads < 1 || in->layers < 1 || in->vocab < 1 || in->intermediate < 1) abort();
    if (in->kv_heads < 1 || in->heads % in->kv_heads || c->head_dim < 1) abort();
    /* the encoders' head_dim is hidden / heads; the decoders' (qwen3 family: qwen3, qwen2, mistral,
     * llama, gemma3_text) may be set apart, and only qwen3 and gemma3_text have the q/k norm */
    if (strcmp(in->arch, "qwen3") && (in->hidden % in->heads || c->head_dim * in->heads != in->hidden)) abort();
    const int gemma = !strcmp(c->model_type, "gemma3_text");
    if (c->qk_norm != (!strcmp(c->model_type, "qwen3") || gemma) || c->gemma != gemma) abort();
    /* Gemma 3: a window only with a sliding layer, an attention scale > 0, a layer-kind bit per layer at most */
    const int mb = !strcmp(c->model_type, "modernbert");
    if (c->modernbert != mb || (mb && (c->info.causal || c->head_dim * in->heads != in->hidden))) abort();
    if (c->sliding_window < 0 || (!gemma && !mb && c->sliding_window) || (!gemma && !(c->q_scale == 1.0 || c->q_scale == 0.0)))
        abort();
    if (gemma && !(c->q_scale > 0 && isfinite(c->q_scale))) abort();
    for (int l = in->layers; l < (int)sizeof c->layer_local * 8; l++)
        if ((c->layer_local[l / 8] >> (l % 8)) & 1) abort();
    /* DeBERTa: a relative table of 2 * span rows, span the buckets or the relative positions, both bounded */
    const eng_deberta_cfg *d = &c->deb;
    const int v1 = !strcmp(c->model_type, "deberta");
    if (c->deberta != (v1 || !strcmp(c->model_type, "deberta-v2")) || (c->deberta && strcmp(in->arch, "deberta")) ||
        d->v1 != v1)
        abort();
    /* v1: no buckets, own projections, a plain table; its scale counts the names listed */
    if (v1 && (d->buckets > 0 || d->share_key || d->rel_ln || d->n_types < d->c2p + d->p2c)) abort();
    if (c->deberta && (d->max_rel < 1 || d->max_rel > (1 << 16) || d->span != (d->buckets > 0 ? d->buckets : d->max_rel) ||
                       (d->buckets > 0 && d->max_rel - 1 <= d->buckets / 2) ||
                       (d->c2p & ~1) || (d->p2c & ~1) || c->position_offset || in->causal))
        abort();
    if (in->max_positions < 1 || in->max_positions > c->max_position_embeddings) abort();
    if (in->max_seq_len < 1 || in->max_seq_len > in->max_positions) abort();
    if ((unsigned)in->pooling > POSY_POOL_LAST || (in->normalize & ~1) || (c->do_lower_case & ~1)) abort();
    if (c->n_prompts < 0 || c->n_prompts > ENG_MAX_PROMPTS) abort();
    for (int i = 0; i < c->n_prompts; i++) {
        if (!c->prompts[i].text || !memchr(c->prompts[i].name, 0, sizeof c->prompts[i].name)) abort();
        if (eng_config_prompt(c, c->prompts[i].name) == NULL) abort();
    }
    if (c->default_prompt_name[0] && !eng_config_prompt(c, c->default_prompt_name)) abort();
    if (!(c->ln_eps >= 0 && c->ln_eps <= 1)) abort();
    /* Dense modules: sizes chained from the hidden size to the dimension served */
    if (c->n_dense < 0 || c->n_dense > ENG_MAX_DENSE) abort();
    for (int i = 0; i < c->n_dense; i++) {
        if (c->dense[i].in != (i ? c->dense[i - 1].out : in->hidden) || c->dense[i].out < 1) abort();
        if ((unsigned)c->dense[i].act > ENG_DENSE_GELU || (c->dense[i].bias & ~1)) abort();
    }
    fuzz_check_dim(c);
    /* a Router: SPLADE's document route, module folders inside the directory, a known default route */
    const eng_router *rt = &c->rt;
    if (c->router && (!c->splade || !rt->tdir[0] || !rt->pool[0] || !rt->qdir[0] || strstr(rt->tdir, "..") ||
                      strstr(rt->pool, "..") || strstr(rt->qdir, "..") || rt->tdir[0] == '/' || rt->pool[0] == '/' ||
                      rt->qdir[0] == '/' || (rt->def[0] && strcmp(rt->def, "query") && strcmp(rt->def, "document"))))
        abort();
    /* the decoders' rotary: a known type, and finite frequencies whatever
     * the scaling parameters (eng_rope.h divides by them) */
    /* T5's encoder: no rotary; T5's own buckets; bidirectional; the MLP
     * without a gate only with relu */
    if (c->t5 && (c->rel_buckets != ENG_RELPOS_BUCKETS || in->causal || c->sliding_window || c->gemma ||
                  c->modernbert || c->qk_norm || (c->mlp_plain && c->act != ENG_ACT_RELU)))
        abort();
    if (c->mlp_plain && !c->t5) abort();
    /* NomicBERT: the decoder family's engine with post-norms: bidirectional, head_dim the split, LayerNorms with
     * biases, SwiGLU, one rotary without scaling, none of the other flags */
    const int nb = !strcmp(c->model_type, "nomic_bert");
    if (c->nomic != nb || (nb && (in->causal || c->head_dim * in->heads != in->hidden || !c->norm_bias ||
                                  c->act != ENG_ACT_SILU || c->rope.type != ENG_ROPE_DEFAULT || c->gemma ||
                                  c->modernbert || c->t5 || c->qk_norm || c->sliding_window || c->mlp_plain)))
        abort();
    /* GTE (new / gte): the same post-norm layer, bidirectional, head_dim the split, LayerNorms with biases, a
     * gated MLP (no relu), its rotary plain or NTK-scaled (factor > 1: a factor <= 1 is plain there); NTK
     * scaling nowhere else */
    const int gt = !strcmp(c->model_type, "new") || !strcmp(c->model_type, "gte");
    /* JinaBERT v2 (bert + alibi): the same post-norm layer on this engine, ALiBi for a rotary, GeGLU */
    if (c->alibi != c->jina || (c->jina && (strcmp(c->model_type, "bert") || strcmp(in->arch, "qwen3") || in->causal ||
                                            c->head_dim * in->heads != in->hidden || c->act != ENG_ACT_GELU ||
                                            in->type_vocab < 1 || c->gte || c->nomic || c->t5 || c->gemma ||
                                            c->modernbert || c->qk_norm || c->mlp_plain || c->rerank)))
        abort();
    if (c->gte != gt || c->post_ln != (nb || gt || c->jina) ||
        (gt && (in->causal || c->head_dim * in->heads != in->hidden || !c->norm_bias || c->act == ENG_ACT_RELU ||
                (c->rope.type != ENG_ROPE_DEFAULT && c->rope.type != ENG_ROPE_NTK) || c->gemma || c->modernbert ||
                c->t5 || c->qk_norm || c->sliding_window || c->mlp_plain)) ||
        (c->rope.type == ENG_ROPE_NTK && (!gt || !(c->rope.factor > 1) || !(c->rope.mixed_b >= 0))))
        abort();
    if (!strcmp(in->arch, "qwen3") && !c->t5) {
        for (int k = 0; k < 1 + (c->gemma || c->modernbert); k++) { /* Gemma 3, ModernBERT: the sliding layers' too */
            const eng_rope *r = k ? &c->rope_local : &c->rope;
            if (!(r->theta >= 1 && r->theta <= 1e12) || (unsigned)r->type > ENG_ROPE_NTK) abort();
            if (r->type != ENG_ROPE_DEFAULT && !(r->factor > 0)) abort();
            if (r->type == ENG_ROPE_LLAMA3 && (!(r->high_freq_factor > r->low_freq_factor) || r->original_max < 1 ||
                                               !(r->low_freq_factor > 0)))
                abort();
            static float inv[2048];
            if (c->head_dim <= 4096) {
                eng_rope_inv_freq(inv, c->head_dim, r);
                for (int i = 0; i < c->head_dim / 2; i++)
                    if (!isfinite(inv[i])) abort();
            }
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    for (int i = 0; i < FUZZ_NFILES; i++) {
        if (!p) {
            fuzz_write(i, NULL, 0);
            continue;
        }
        const uint8_t *nul = memchr(p, 0, (size_t)(end - p));
        fuzz_write(i, p, (size_t)((nul ? nul : end) - p));
        p = nul ? nul + 1 : NULL;
    }
    eng_config c;
    posy_err err = {0};
    int rc = eng_config_load(&c, g_dir, &err);
    if (rc == 0) {
        fuzz_check_ok(&c);
        eng_config_free(&c);
    } else if (err.code == POSY_OK || !err.msg[0] || !fuzz_has_file_name(err.msg) || c.n_prompts) {
        fprintf(stderr, "fuzz_config: refusal without the file's name: %s\n", err.msg);
        abort();
    }
    return 0;
}

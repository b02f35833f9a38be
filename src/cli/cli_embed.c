/* cli_embed: `posy embed`, one-shot and file-to-file embedding.
 *
 * This file owns the flags and the order of start-up: parse flags (usage
 * errors exit 2 before anything is loaded), then the model's config, its
 * tokenizer and the engine (errors there name the file and exit 1), then
 * the texts, then the run (cli_embed_run.c).  The model is loaded before
 * stdin is read so that a bad --model is reported at once rather than
 * after the user has typed or piped a corpus.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_attention.h"
#include "cli_embed.h"
#include "eng_config.h"
#include "posy_file.h"

#define EMBED_DEFAULT_BATCH_TOKENS 16384
#define EMBED_MAX_BATCH_SEQS 1024

typedef struct embed_flags {
    const char *model, *input, *output, *prompt, *prompt_name, *task, *hf_overrides;
    cli_in_format in_fmt;
    cli_out_format out_fmt;
    posy_device_kind device;
    posy_attention attention;
    long threads, max_batch_tokens;
    int normalize, chunked;
    char **texts;
    int n_texts;
} embed_flags;

static void embed_usage(FILE *f) {
    fputs("usage: posy embed --model DIR [flags] [TEXT ...]\n"
          "\n"
          "Embed each TEXT, or each line of stdin when no TEXT is given, and write one\n"
          "JSON array of floats per line, in input order.\n"
          "\n"
          "flags:\n"
          "  --model DIR             model directory (config.json, model.safetensors, tokenizer.json;\n"
          "                          or a sentence-transformers StaticEmbedding model's)\n"
          "  --input FILE            read texts from FILE ('-' = stdin) instead of arguments\n"
          "  --input-format FMT      text (one text per line) or jsonl (a JSON string or an\n"
          "                          object with a \"text\" field per line); default: jsonl for\n"
          "                          names ending in .jsonl/.json, else text; a .json file\n"
          "                          may instead hold one JSON array of such values\n"
          "  --output FILE           write to FILE ('-' = stdout, the default)\n"
          "  --output-format FMT     jsonl or npy (float32 [n, dim]); default: npy for names\n"
          "                          ending in .npy, else jsonl (a SPLADE model's lines: its\n"
          "                          non-zero entries, [{\"index\": i, \"value\": v}, ...])\n"
          "  --device DEV            cpu, cuda or auto (default auto: CUDA when a GPU is usable)\n"
          "  --threads N             CPU threads (default 0 = all cores)\n"
          "  --max-batch-tokens N    token budget of one packed batch (default 16384)\n"
          "  --prompt TEXT           prepend TEXT to every input (as sentence-transformers does);\n"
          "                          --prompt '' turns off the model's default prompt\n"
          "  --prompt-name NAME      prepend the model's prompt NAME (config_sentence_transformers.json;\n"
          "                          without either flag, its default_prompt_name applies)\n"
          "  --task TASK             query or document, as sentence-transformers' encode_query /\n"
          "                          encode_document: the model's prompt of that name (unless\n"
          "                          --prompt or --prompt-name), and an inference-free SPLADE\n"
          "                          model's route (default: its default_route)\n"
          "  --hf-overrides JSON     a JSON object whose keys replace config.json's (vLLM's flag)\n"
          "  --attention MODE        model, causal or bidirectional: override the decoder's\n"
          "                          attention direction (default model: as config.json says)\n"
          "  --normalize             L2-normalise the vectors even if the model does not\n"
          "  --chunked               split texts longer than max_seq_length into windows and\n"
          "                          average their vectors (weighted by tokens) instead of\n"
          "                          truncating them (as the server's \"chunked\": true)\n"
          "  -h, --help              show this help\n"
          "  --                      every later word is a TEXT, even if it starts with '-'\n"
          "\n"
          "Inputs longer than the model's max_seq_length are truncated, as in\n"
          "sentence-transformers, unless --chunked.  A progress bar is drawn on stderr when it is a terminal.\n",
          f);
}

static int bad_usage(const char *fmt, const char *arg) {
    fputs("posy embed: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (see 'posy embed --help')\n", stderr);
    return 2;
}

/* Flag value: "--flag=value" or "--flag value".  NULL if missing. */
static const char *flag_value(int argc, char **argv, int *i, const char *eq) {
    if (eq) return eq + 1;
    if (*i + 1 >= argc) return NULL;
    return argv[++*i];
}

static int parse_enum(const char *flag, const char *v, const char *const *names, int n, int *out) {
    for (int k = 0; k < n; k++)
        if (strcmp(v, names[k]) == 0) {
            *out = k;
            return 0;
        }
    fprintf(stderr, "posy embed: %s does not accept '%s' (expected", flag, v);
    for (int k = 0; k < n; k++) fprintf(stderr, "%s%s", k ? ", " : " ", names[k]);
    fputs(")\n", stderr);
    return -1;
}

/* One flag with a value; returns 0, or 2 on a usage error. */
static int set_flag(embed_flags *f, const char *name, const char *v) {
    static const char *const in_names[] = {"text", "jsonl"};
    static const char *const out_names[] = {"jsonl", "npy"};
    static const char *const dev_names[] = {"cpu", "cuda", "auto"};
    int k = 0;
    if (!strcmp(name, "--model")) f->model = v;
    else if (!strcmp(name, "--input")) f->input = v;
    else if (!strcmp(name, "--output")) f->output = v;
    else if (!strcmp(name, "--prompt")) f->prompt = v;
    else if (!strcmp(name, "--prompt-name")) f->prompt_name = v;
    else if (!strcmp(name, "--hf-overrides")) f->hf_overrides = v;
    else if (!strcmp(name, "--task")) {
        if (strcmp(v, "query") && strcmp(v, "document")) return bad_usage("--task is query or document, not '%s'", v);
        f->task = v;
    }
    else if (!strcmp(name, "--attention")) { if (cli_parse_attention("posy embed", v, &f->attention)) return 2; }
    else if (!strcmp(name, "--input-format")) {
        if (parse_enum(name, v, in_names, 2, &k)) return 2;
        f->in_fmt = k == 0 ? CLI_IN_TEXT : CLI_IN_JSONL;
    } else if (!strcmp(name, "--output-format")) {
        if (parse_enum(name, v, out_names, 2, &k)) return 2;
        f->out_fmt = k == 0 ? CLI_OUT_JSONL : CLI_OUT_NPY;
    } else if (!strcmp(name, "--device")) {
        if (parse_enum(name, v, dev_names, 3, &k)) return 2;
        f->device = k == 0 ? POSY_DEVICE_CPU : k == 1 ? POSY_DEVICE_CUDA : POSY_DEVICE_AUTO;
    } else if (!strcmp(name, "--threads")) {
        if (cli_parse_int(name, v, 0, 4096, &f->threads)) return 2;
    } else if (!strcmp(name, "--max-batch-tokens")) {
        if (cli_parse_int(name, v, 1, 1 << 24, &f->max_batch_tokens)) return 2;
    } else {
        return bad_usage("unknown flag '%s'", name);
    }
    return 0;
}

/* One flag at argv[*i] (advancing *i past its value).  Returns -1 to go
 * on, else an exit code (0 after --help). */
static int parse_one(embed_flags *f, int argc, char **argv, int *i) {
    static const char *const valued[] = {"--model", "--input", "--output", "--prompt", "--prompt-name",
                                         "--input-format", "--output-format", "--device", "--threads",
                                         "--max-batch-tokens", "--attention", "--task", "--hf-overrides"};
    const char *a = argv[*i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) { embed_usage(stdout); return 0; }
    if (!strcmp(a, "--normalize")) { f->normalize = 1; return -1; }
    if (!strcmp(a, "--chunked")) { f->chunked = 1; return -1; }
    char name[64];
    const char *eq = strchr(a, '=');
    size_t nl = eq ? (size_t)(eq - a) : strlen(a);
    if (nl >= sizeof name) return bad_usage("unknown flag '%s'", a);
    memcpy(name, a, nl);
    name[nl] = '\0';
    int known = 0;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++) known |= !strcmp(name, valued[k]);
    if (!known) return bad_usage("unknown flag '%s'", name);
    const char *v = flag_value(argc, argv, i, eq);
    if (!v) return bad_usage("%s needs a value", name);
    int rc = set_flag(f, name, v);
    return rc ? rc : -1;
}

/* Flags and texts may be interleaved; "--" makes every later word a text,
 * and a lone "-" is a text.  Texts are gathered at the front of argv (as
 * GNU getopt permutes it).  Returns -1 to continue, else the exit code. */
static int parse_flags(embed_flags *f, int argc, char **argv) {
    int nt = 0, dashdash = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (dashdash || a[0] != '-' || a[1] == '\0') {
            argv[nt++] = argv[i];
            continue;
        }
        if (!strcmp(a, "--")) {
            dashdash = 1;
            continue;
        }
        int rc = parse_one(f, argc, argv, &i);
        if (rc >= 0) return rc;
    }
    f->texts = argv;
    f->n_texts = nt;
    if (!f->model) return bad_usage("%s", "--model DIR is required");
    if (f->n_texts > 0 && f->input) return bad_usage("%s", "give TEXT arguments or --input, not both");
    return -1;
}

static int fail(const posy_err *err) {
    fprintf(stderr, "posy embed: %s\n", err->msg);
    return 1;
}

/* The prompt to prepend: --prompt, else --prompt-name, else the model's
 * default_prompt_name (what sentence-transformers uses when none is given).
 * Returns 0, or 2 for an unknown prompt name. */
static int pick_prompt(const embed_flags *f, const eng_config *cfg, const char **prompt) {
    *prompt = NULL;
    if (f->prompt) {
        *prompt = f->prompt;
        return 0;
    }
    const char *task_name = f->task && !f->prompt_name ? eng_config_task_prompt(cfg, f->task) : NULL;
    const char *name = f->prompt_name ? f->prompt_name : task_name ? task_name
                       : cfg->default_prompt_name[0] ? cfg->default_prompt_name : NULL;
    if (!name) return 0;
    *prompt = eng_config_prompt(cfg, name);
    if (*prompt) return 0;
    fprintf(stderr, "posy embed: the model has no prompt named '%s' (it has:", name);
    for (int i = 0; i < cfg->n_prompts; i++) fprintf(stderr, " '%s'", cfg->prompts[i].name);
    fprintf(stderr, "%s)\n", cfg->n_prompts ? "" : " none");
    return 2;
}

static int check_model_dir(const char *dir, posy_err *err) {
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return posy_err_set(err, POSY_E_IO, "model directory %s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return posy_err_set(err, POSY_E_INVALID, "model directory %s: not a directory", dir);
    return 0;
}

static int load_texts(const embed_flags *f, cli_texts *texts, posy_err *err) {
    if (f->n_texts == 0 && (!f->input || !strcmp(f->input, "-")) && isatty(STDIN_FILENO))
        fputs("posy embed: reading texts from stdin, one per line (end with Ctrl-D)\n", stderr);
    if (f->n_texts == 0) return cli_texts_read(texts, f->input, f->in_fmt, err);
    for (int i = 0; i < f->n_texts; i++)
        if (cli_texts_add(texts, f->texts[i], strlen(f->texts[i]), err) != 0) return -1;
    return 0;
}

/* Everything after the flags; resources are released by the caller. */
typedef struct embed_res {
    eng_config cfg;
    int have_cfg;
    tok_tokenizer *tok;
    posy_engine *engine;
    cli_texts texts;
    cli_vecout out;
} embed_res;

static int embed_main(const embed_flags *f, embed_res *r) {
    posy_err err;
    posy_err_clear(&err);
    if (check_model_dir(f->model, &err) != 0) return fail(&err);
    if (eng_config_set_overrides(f->hf_overrides, &err) != 0) return fail(&err);
    if (eng_config_load(&r->cfg, f->model, &err) != 0) return fail(&err);
    r->have_cfg = 1;
    if (r->cfg.rerank && r->cfg.n_labels == 1) {
        fprintf(stderr, "posy embed: %s is a reranker (a cross-encoder): it scores (query, text) pairs and makes no "
                "embeddings; serve it (posy serve) and POST /rerank\n", f->model);
        return 2;
    }
    if (r->cfg.rerank) {
        fprintf(stderr, "posy embed: %s is a classifier of %d labels and makes no embeddings; serve it (posy serve) "
                "and POST /predict or /classify\n", f->model, r->cfg.n_labels);
        return 2;
    }
    const char *prompt = NULL;
    int rc = pick_prompt(f, &r->cfg, &prompt);
    if (rc) return rc;

    char tok_path[2048];
    if (eng_model_tokenizer_file(f->model, tok_path, sizeof tok_path, NULL) != 0)
        return bad_usage("model path too long: '%s'", f->model);
    if (!(r->tok = tok_load_file(tok_path, &err))) return fail(&err);
    const char *route = !r->cfg.router ? "document" : f->task ? f->task : r->cfg.rt.def;
    if (!*route) {
        fprintf(stderr, "posy embed: %s encodes queries and documents by different routes and has no "
                "default_route: pass --task query or --task document\n", f->model);
        return 2;
    }
    if (!strcmp(route, "query")) {   /* no transformer on this route: no engine */
        if (load_texts(f, &r->texts, &err) != 0 ||
            cli_vecout_open(&r->out, f->output, f->out_fmt, r->texts.n, r->cfg.info.dim, &err) != 0 ||
            cli_vecout_set_sparse(&r->out, &err) != 0 ||
            cli_embed_query_run(f->model, &r->cfg, r->tok, &r->texts, prompt, &r->out, &err) != 0 ||
            cli_vecout_close(&r->out, &err) != 0)
            return fail(&err);
        return 0;
    }

    int max_seqs = f->max_batch_tokens < EMBED_MAX_BATCH_SEQS ? (int)f->max_batch_tokens
                                                              : EMBED_MAX_BATCH_SEQS;
    posy_engine_opts eo = {.device = f->device, .n_threads = (int)f->threads,
                           .max_batch_tokens = (int)f->max_batch_tokens, .max_batch_seqs = max_seqs,
                           .attention = f->attention};
    if (!(r->engine = posy_engine_open(f->model, &eo, &err))) return fail(&err);
    const posy_model_info *info = posy_engine_info(r->engine);
    if (f->max_batch_tokens < info->max_seq_len) {
        fprintf(stderr, "posy embed: --max-batch-tokens %ld is below the model's max_seq_length %d\n",
                f->max_batch_tokens, info->max_seq_len);
        return 2;
    }

    if (load_texts(f, &r->texts, &err) != 0) return fail(&err);
    if (cli_vecout_open(&r->out, f->output, f->out_fmt, r->texts.n, info->dim, &err) != 0 ||
        (r->cfg.splade && cli_vecout_set_sparse(&r->out, &err) != 0))
        return fail(&err);
    cli_progress progress;
    cli_embed_job job = {.engine = r->engine, .tok = r->tok, .texts = &r->texts, .prompt = prompt,
                         .lower = r->cfg.do_lower_case, .add_special = r->cfg.add_special, .exclude_prompt = !r->cfg.pool_include_prompt,
                         .max_seq_len = info->max_seq_len, .max_batch_tokens = (int)f->max_batch_tokens,
                         .max_batch_seqs = max_seqs,
                         .force_normalize = f->normalize && !info->normalize, .chunked = f->chunked,
                         .model_normalize = info->normalize, .out = &r->out,
                         .progress = &progress};
    if (cli_embed_run(&job, &err) != 0) return fail(&err);
    if (cli_vecout_close(&r->out, &err) != 0) return fail(&err);
    return 0;
}

int cli_cmd_embed(int argc, char **argv) {
    embed_flags f = {.device = POSY_DEVICE_AUTO, .max_batch_tokens = EMBED_DEFAULT_BATCH_TOKENS};
    int rc = parse_flags(&f, argc, argv);
    if (rc >= 0) return rc;
    embed_res r;
    memset(&r, 0, sizeof r);
    rc = embed_main(&f, &r);
    if (r.out.f) {
        /* A failed run leaves no half-written output file behind. */
        const char *path = r.out.own ? f.output : NULL;
        posy_err ignored;
        cli_vecout_close(&r.out, &ignored);
        if (path) unlink(path);
    }
    cli_texts_free(&r.texts);
    if (r.engine) posy_engine_close(r.engine);
    if (r.tok) tok_free(r.tok);
    if (r.have_cfg) eng_config_free(&r.cfg);
    return rc;
}

/* cli_embed_query: `posy embed --task query` on an inference-free SPLADE
 * model (a Router, eng_config_router.c): the query route has no
 * transformer, so no engine is opened -- each text (the prompt in front)
 * is tokenized without special tokens, truncated at the query tokenizer's
 * model_max_length, and its vector is the query weight of each distinct
 * token, as sentence-transformers' encode_query computes it and as the
 * server's /embed_sparse answers "task": "query".
 */
#include <stdlib.h>
#include <string.h>

#include "cli_embed.h"
#include "eng_config.h"

int cli_embed_query_run(const char *model, const eng_config *cfg, const tok_tokenizer *tok, const cli_texts *texts,
                        const char *prompt, cli_vecout *out, posy_err *err) {
    eng_router_query q;
    if (eng_router_query_load(model, cfg, &q, err)) return -1;
    float *v = malloc((size_t)q.n * sizeof *v);
    char *joined = NULL;
    size_t cap = 0;
    tok_encoding enc = {0};
    int rc = v ? 0 : posy_err_set(err, POSY_E_NOMEM, "out of memory for a query vector");
    const size_t pl = prompt ? strlen(prompt) : 0;
    for (size_t i = 0; !rc && i < texts->n; i++) {
        const char *s = texts->s[i];
        size_t n = texts->len[i];
        if (pl) {   /* sentence-transformers prepends the prompt text */
            if (pl + n + 1 > cap) {
                char *nj = realloc(joined, pl + n + 1);
                if (!nj) { rc = posy_err_set(err, POSY_E_NOMEM, "out of memory joining the prompt"); break; }
                joined = nj;
                cap = pl + n + 1;
            }
            memcpy(joined, prompt, pl);
            memcpy(joined + pl, s, n);
            s = joined;
            n += pl;
        }
        tok_opts o = {.add_special = 0, .max_len = q.max_len, .trunc_dir = TOK_TRUNC_RIGHT};
        if (tok_encode(tok, s, n, &o, &enc, err)) {
            posy_err_wrap(err, "input text");
            rc = -1;
            break;
        }
        eng_router_query_vec(&q, enc.ids, enc.n, v);
        if (cli_vecout_write(out, v, err)) rc = -1;
    }
    tok_encoding_free(&enc);
    free(joined);
    free(v);
    eng_router_query_free(&q);
    return rc ? -1 : 0;
}

/* rpc_fingerprint: does this worker serve the same model as the gateway?
 *
 * The gateway has the model directory without weights (tokenizer and
 * sentence-transformers settings), so the fingerprint covers exactly the
 * files both sides hold: config.json, tokenizer.json (a static embedding
 * model's too) and the files that set pooling, normalization, prompts and
 * the sequence limit.  Each present
 * file contributes its name, length and bytes to a 64-bit FNV-1a hash, run
 * twice with different offsets for 128 bits.  It guards against operator
 * mistakes (a worker started on another model), not against adversaries,
 * so a non-cryptographic hash is enough.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "posy_file.h"
#include "rpc.h"

static const char *const rpc_fp_files[] = {
    "config.json", "tokenizer.json", "modules.json", "1_Pooling/config.json",
    "sentence_bert_config.json", "config_sentence_transformers.json",
    "0_StaticEmbedding/tokenizer.json", /* a static embedding model's, up to sentence-transformers 5 (6: at the root) */
    /* an inference-free SPLADE model's Router, as sentence-transformers names its folders */
    "router_config.json", "document_0_MLMTransformer/config.json", "document_0_MLMTransformer/tokenizer.json",
    "document_1_SpladePooling/config.json", "document_0_MLMTransformer/sentence_bert_config.json",
};

static void rpc_fnv(uint64_t h[2], const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h[0] = (h[0] ^ b[i]) * 0x100000001b3ull;
        h[1] = (h[1] ^ b[i]) * 0x100000001b3ull;
    }
}

int rpc_fingerprint(const char *dir, char *out, size_t out_size, posy_err *err) {
    return rpc_fingerprint_with(dir, NULL, out, out_size, err);
}

int rpc_fingerprint_with(const char *dir, const char *extra, char *out, size_t out_size, posy_err *err) {
    uint64_t h[2] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
    int found = 0;
    for (size_t i = 0; i < sizeof rpc_fp_files / sizeof rpc_fp_files[0]; i++) {
        char path[2048];
        if (posy_path_join(path, sizeof path, dir, rpc_fp_files[i]) != 0)
            return posy_err_set(err, POSY_E_INVALID, "model path too long: %s", dir);
        if (!posy_file_exists(path)) continue;
        size_t n = 0;
        char *data = posy_file_read(path, (size_t)1 << 30, &n, err);
        if (!data) return err ? err->code : POSY_E_IO;
        uint64_t len = n;
        rpc_fnv(h, rpc_fp_files[i], strlen(rpc_fp_files[i]) + 1);
        rpc_fnv(h, &len, sizeof len);
        rpc_fnv(h, data, n);
        free(data);
        found++;
    }
    if (!found)
        return posy_err_set(err, POSY_E_IO, "%s: no config.json or tokenizer.json to fingerprint", dir);
    if (extra && *extra) {   /* --hf-overrides change the model as much as its files do */
        static const char tag[] = "--hf-overrides";
        rpc_fnv(h, tag, sizeof tag);
        rpc_fnv(h, extra, strlen(extra));
    }
    snprintf(out, out_size, "%016llx%016llx", (unsigned long long)h[0], (unsigned long long)h[1]);
    return 0;
}

/* eng_splade: see eng_splade.h. */
#include "eng_splade.h"

#include <math.h>
#include <string.h>

size_t eng_splade_scratch_floats(const eng_dense *h) {
    return (size_t)ENG_SPLADE_CHUNK * (size_t)h->widest * 3;   /* the chunk's logits + eng_dense_apply's two */
}

void eng_splade_pool(const eng_dense *h, int sum, int log2, const float *x, const int32_t *cu, int n_seqs,
                     float *out, float *scratch) {
    const int H = h->layers[0].in, V = h->layers[h->n - 1].out, T = cu[n_seqs];
    float *logits = scratch, *tmp = scratch + (size_t)ENG_SPLADE_CHUNK * h->widest;
    memset(out, 0, sizeof(float) * (size_t)n_seqs * (size_t)V);   /* every value is >= 0: max starts at 0 */
    int s = 0;
    for (int t0 = 0; t0 < T; t0 += ENG_SPLADE_CHUNK) {
        const int n = T - t0 < ENG_SPLADE_CHUNK ? T - t0 : ENG_SPLADE_CHUNK;
        eng_dense_apply(h, n, x + (size_t)t0 * H, logits, tmp);
        for (int i = 0; i < n; i++) {
            while (cu[s + 1] <= t0 + i) s++;   /* the token's sequence (no empty ones) */
            const float *l = logits + (size_t)i * V;
            float *o = out + (size_t)s * V;
            for (int v = 0; v < V; v++) {
                float y = l[v] > 0.f ? log1pf(l[v]) : 0.f;
                if (log2) y = log1pf(y);
                if (sum) o[v] += y;
                else if (y > o[v]) o[v] = y;
            }
        }
    }
}

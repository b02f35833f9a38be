/* eng_relpos: MPNet's relative position buckets and the per-head table
 * (see eng_relpos.h for why the bucket is computed in integers). */
#include "eng_relpos.h"

int eng_relpos_bucket(int rel) {
    long long n = -(long long)rel;
    int ret = 0;
    if (n < 0) {
        ret = ENG_RELPOS_BUCKETS / 2;
        n = -n;
    }
    if (n < 8) return ret + (int)n;
    /* 8 + floor(8 * log(n / 8) / log(16)) = 8 + floor(log2(n^2 / 64)),
     * capped at the direction's last bucket (15) */
    const long long sq = n * n;
    int k = 0;
    while (k < 7 && (64LL << (k + 1)) <= sq) k++;
    return ret + 8 + k;
}

void eng_relpos_expand(float *out, const float *weight, int heads, int max_len, float mul) {
    const size_t span = eng_relpos_span(max_len);
    for (int h = 0; h < heads; h++)
        for (int r = -(max_len - 1); r <= max_len - 1; r++)
            out[(size_t)h * span + (size_t)(r + max_len - 1)] = weight[(size_t)eng_relpos_bucket(r) * heads + h] * mul;
}

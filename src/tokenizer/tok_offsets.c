/* tok_offsets: byte offsets -> character offsets, as the Python binding of
 * HF tokenizers reports them (its BytesToCharOffsetConverter).  Every byte
 * maps to the index of the char holding it; (s, e) becomes (map[s],
 * map[e]) when both are inside the text, (map[s], map[e-1] + 1) when e is
 * the end.  HF converts before trim_offsets runs, so a start trimmed up to
 * the end of the text becomes the char count; on an empty text offsets
 * stay (0, 0) as in HF. */
#include <stdlib.h>

#include "tok_internal.h"

int tok_offsets_to_chars(const char *text, size_t len, tok_encoding *e, int from, int to) {
    if (len == 0 || from >= to) return 0;
    int32_t *map = malloc(len * sizeof *map);
    if (!map) return POSY_E_NOMEM;
    int32_t c = -1;
    for (size_t i = 0; i < len; i++) {
        if (((uint8_t)text[i] & 0xC0) != 0x80) c++;
        map[i] = c;
    }
    for (int k = from; k < to; k++) {
        int32_t *o = &e->offsets[2 * k];
        if (o[0] < 0 || (size_t)o[0] > len) continue;
        int32_t s = (size_t)o[0] < len ? map[o[0]] : map[len - 1] + 1;
        if ((size_t)o[1] < len) o[1] = map[o[1]];
        else o[1] = map[len - 1] + 1;
        o[0] = s;
    }
    free(map);
    return 0;
}

/* tok_replace: the Replace normalizer (string or regex pattern).
 *
 * HF semantics for offsets: the replacement's chars are all "inserted"
 * after removing the matched chars, so each takes the span of the last
 * byte of the match.  An empty match inserts with the previous byte's span.
 */
#include <string.h>

#include "tok_internal.h"
#include "tok_norm_impl.h"
#include "tok_regex.h"

static int next_match(const tok_normalizer *n, const tok_buf *b, size_t from, size_t *ms, size_t *me,
                      tok_norm_scratch *s) {
    if (n->regex) {
        void *md = s->match.p;
        int rc = tok_regex_next(n->regex, b->b, b->len, from, ms, me, &md);
        s->match.p = md;
        return rc;
    }
    if (n->pattern_len == 0 || from > b->len) return 0;
    const char *p = memmem(b->b + from, b->len - from, n->pattern, n->pattern_len);
    if (!p) return 0;
    *ms = (size_t)(p - b->b);
    *me = *ms + n->pattern_len;
    return 1;
}

/* Append b[from, to) to o (room reserved); empty ranges touch nothing. */
static void copy_range(tok_buf *o, const tok_buf *b, size_t from, size_t to) {
    if (to <= from) return;
    memcpy(o->b + o->len, b->b + from, to - from);
    memcpy(o->al + o->len, b->al + from, (to - from) * sizeof *b->al);
    o->len += to - from;
}

int tok_replace_apply(const tok_normalizer *n, tok_buf *b, tok_norm_scratch *s) {
    tok_buf *o = &s->tmp;
    o->len = 0;
    size_t pos = 0, from = 0, ms, me;
    for (;;) {
        int rc = next_match(n, b, from, &ms, &me, s);
        if (rc < 0) return -rc;
        if (rc == 0) break;
        if (tok_buf_reserve(o, ms - pos + n->content_len)) return POSY_E_NOMEM;
        copy_range(o, b, pos, ms);
        tok_span sp = me > 0 ? b->al[me - 1] : (tok_span){0, 0};
        for (size_t i = 0; i < n->content_len; i++) { o->b[o->len] = n->content[i]; o->al[o->len++] = sp; }
        pos = me;
        from = me;
        if (me == ms) { /* empty match: step over one char */
            if (me >= b->len) break;
            from = me + (size_t)tok_utf8_len((uint8_t)b->b[me]);
        }
    }
    if (tok_buf_reserve(o, b->len - pos)) return POSY_E_NOMEM;
    copy_range(o, b, pos, b->len);
    tok_buf t = *b;
    *b = *o;
    *o = t;
    return 0;
}

/* tok_pretok: pre-tokenizers, splitting a normalized buffer into pieces.
 *
 * A stage maps (buffer, pieces) to (buffer', pieces').  Splitting stages
 * (Bert, Whitespace, Punctuation, Digits, Split) only cut pieces and keep
 * pointing into the same buffer; transforming stages (ByteLevel, Metaspace)
 * write a new buffer.  Each split is computed exactly as HF's
 * NormalizedString::split: a list of (range, is_match) segments, reshaped
 * by the delimiter behaviour, with empty pieces dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "tok_pretok_impl.h"
#include "tok_regex.h"

/* ---- segments and behaviours ------------------------------------------- */
typedef struct { uint32_t s, e; int m; } seg;

static int seg_push(tok_mem *mem, size_t *n, uint32_t s, uint32_t e, int m) {
    seg *v = tok_mem_get(mem, (*n + 1) * sizeof *v);
    if (!v) return -1;
    v[*n].s = s; v[*n].e = e; v[*n].m = m;
    (*n)++;
    return 0;
}

/* Reshape segs by behaviour and push the non-empty pieces. */
static int emit_segs(seg *v, size_t n, tok_split_behavior beh, tok_pieces *op) {
    size_t w = 0;
    int prev = 0;
    switch (beh) {
    case TOK_SPLIT_REMOVED:
        for (size_t i = 0; i < n; i++) if (!v[i].m) v[w++] = v[i];
        break;
    case TOK_SPLIT_ISOLATED: w = n; break;
    case TOK_SPLIT_MERGED_PREV:
        for (size_t i = 0; i < n; i++) {
            if (v[i].m && !prev && w > 0) v[w - 1].e = v[i].e;
            else v[w++] = v[i];
            prev = v[i].m;
        }
        break;
    case TOK_SPLIT_MERGED_NEXT: {
        /* walk backwards, merging a match into the following piece */
        size_t k = n;
        for (size_t i = n; i-- > 0;) {
            if (v[i].m && !prev && k < n) v[k].s = v[i].s;
            else v[--k] = v[i];
            prev = v[i].m;
        }
        if (n > k) memmove(v, v + k, (n - k) * sizeof *v);
        w = n - k;
        break;
    }
    case TOK_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            if (w > 0 && v[i].m == prev) v[w - 1].e = v[i].e;
            else v[w++] = v[i];
            prev = v[i].m;
        }
        break;
    }
    for (size_t i = 0; i < w; i++)
        if (v[i].e > v[i].s && tok_pieces_push(op, v[i].s, v[i].e - v[i].s)) return POSY_E_NOMEM;
    return 0;
}

typedef int (*char_pred)(uint32_t cp);

/* Each char matching pred is its own match (HF's Pattern for Fn(char)). */
static int split_pred(const tok_buf *b, tok_piece pc, char_pred pred, int invert, tok_split_behavior beh,
                      tok_mem *mem, tok_pieces *op) {
    size_t n = 0;
    uint32_t last = pc.off, end = pc.off + pc.len;
    for (uint32_t i = pc.off; i < end;) {
        uint32_t cp;
        int l = tok_utf8_next(b->b + i, &cp);
        if ((pred(cp) != 0) != (invert != 0)) {
            if (last < i && seg_push(mem, &n, last, i, 0)) return POSY_E_NOMEM;
            if (seg_push(mem, &n, i, i + (uint32_t)l, 1)) return POSY_E_NOMEM;
            last = i + (uint32_t)l;
        }
        i += (uint32_t)l;
    }
    if (last < end && seg_push(mem, &n, last, end, 0)) return POSY_E_NOMEM;
    return emit_segs(mem->p, n, beh, op);
}

/* Regex or literal matches as segments (HF's Pattern for Regex / &str). */
static int split_matches(const tok_pretok *p, const tok_buf *b, tok_piece pc, tok_split_behavior beh,
                         int invert, tok_pre_scratch *ps, tok_pieces *op) {
    size_t n = 0, from = 0, prev = 0, ms, me;
    const char *s = b->b + pc.off;
    for (;;) {
        int rc;
        if (p->regex) {
            void *md = ps->match.p;
            rc = tok_regex_next(p->regex, s, pc.len, from, &ms, &me, &md);
            ps->match.p = md;
            if (rc < 0) return -rc;
        } else {
            const char *f = p->pattern_len && from <= pc.len
                                ? memmem(s + from, pc.len - from, p->pattern, p->pattern_len) : NULL;
            rc = f != NULL;
            if (f) { ms = (size_t)(f - s); me = ms + p->pattern_len; }
        }
        if (!rc) break;
        if (prev != ms && seg_push(&ps->marks, &n, pc.off + prev, pc.off + ms, invert)) return POSY_E_NOMEM;
        if (seg_push(&ps->marks, &n, pc.off + ms, pc.off + me, !invert)) return POSY_E_NOMEM;
        prev = me;
        from = me;
        if (me == ms) {
            if (me >= pc.len) break;
            from = me + (size_t)tok_utf8_len((uint8_t)s[me]);
        }
    }
    if (prev != pc.len && seg_push(&ps->marks, &n, pc.off + prev, pc.off + pc.len, invert)) return POSY_E_NOMEM;
    return emit_segs(ps->marks.p, n, beh, op);
}

static int is_ws(uint32_t cp) { return tok_is_whitespace(cp); }
static int is_numeric(uint32_t cp) { return tok_is_numeric(cp); }

/* One splitting stage over every piece of ip. */
static int stage_split(const tok_pretok *p, const tok_buf *b, const tok_pieces *ip, tok_pieces *op,
                       tok_pre_scratch *ps) {
    op->n = 0;
    for (size_t i = 0; i < ip->n; i++) {
        tok_piece pc = ip->p[i];
        int rc = 0;
        switch (p->type) {
        case TOK_P_BERT: {
            size_t before = op->n;
            rc = split_pred(b, pc, is_ws, 0, TOK_SPLIT_REMOVED, &ps->marks, op);
            if (rc) return rc;
            /* second pass over the pieces just produced: isolate punctuation */
            size_t after = op->n;
            for (size_t k = before; k < after && !rc; k++)
                rc = split_pred(b, op->p[k], tok_is_bert_punct, 0, TOK_SPLIT_ISOLATED, &ps->marks, op);
            if (rc) return rc;
            if (op->n > after) memmove(op->p + before, op->p + after, (op->n - after) * sizeof *op->p);
            op->n -= after - before;
            break;
        }
        case TOK_P_WHITESPACE_SPLIT:
            rc = split_pred(b, pc, is_ws, 0, TOK_SPLIT_REMOVED, &ps->marks, op);
            break;
        case TOK_P_PUNCTUATION:
            rc = split_pred(b, pc, tok_is_bert_punct, 0, p->behavior, &ps->marks, op);
            break;
        case TOK_P_DIGITS:
            rc = split_pred(b, pc, is_numeric, 0,
                            p->individual_digits ? TOK_SPLIT_ISOLATED : TOK_SPLIT_CONTIGUOUS, &ps->marks, op);
            break;
        case TOK_P_WHITESPACE:
            rc = split_matches(p, b, pc, TOK_SPLIT_REMOVED, 1, ps, op);
            break;
        case TOK_P_SPLIT:
            rc = split_matches(p, b, pc, p->behavior, p->invert, ps, op);
            break;
        default:
            return POSY_E_INTERNAL;
        }
        if (rc) return rc;
    }
    return 0;
}

int tok_pre_stage(const tok_pretok *p, tok_pre_state *st, int first, tok_pre_scratch *ps) {
    if (p->type == TOK_P_SEQUENCE) {
        for (int i = 0; i < p->n_items; i++) {
            int rc = tok_pre_stage(&p->items[i], st, first, ps);
            if (rc) return rc;
        }
        return 0;
    }
    if (p->type == TOK_P_BYTELEVEL || p->type == TOK_P_METASPACE)
        return tok_pre_transform(p, st, first, ps);
    tok_pieces *op = st->pcs == &ps->pcs[0] ? &ps->pcs[1] : &ps->pcs[0];
    int rc = stage_split(p, st->buf, st->pcs, op, ps);
    st->pcs = op;
    return rc;
}

void tok_pre_free(tok_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n_items; i++) tok_pre_free(&p->items[i]);
    free(p->items);
    free(p->pattern);
    tok_regex_free(p->regex);
    memset(p, 0, sizeof *p);
}

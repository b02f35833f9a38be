/* tok_trim: trim_offsets of the ByteLevel and RobertaProcessing
 * post-processors (HF's process_offsets): a token's offsets lose its
 * leading and trailing spaces ('Ġ', U+0120, or any whitespace char),
 * except the single prefix space ByteLevel added to the first token when
 * add_prefix_space is on.  Runs after truncation, before specials.
 * HF trims char offsets by a number of chars; posy steps its byte offsets
 * over the same number of chars of the text, which converts to the same. */
#include <string.h>

#include "tok_internal.h"

static int is_space_char(uint32_t cp) { return cp == 0x120 || tok_is_whitespace(cp); }

/* Count the leading / trailing space chars of a vocab token string. */
static void count_spaces(const char *str, uint32_t len, uint32_t *lead, uint32_t *trail) {
    uint32_t pos = 0, cp;
    *lead = *trail = 0;
    while (pos < len) {
        int l = tok_utf8_next(str + pos, &cp);
        if (!is_space_char(cp)) break;
        (*lead)++;
        pos += (uint32_t)l;
    }
    uint32_t end = len;
    while (end > 0) {
        uint32_t p = end - 1;
        while (p > 0 && ((uint8_t)str[p] & 0xC0) == 0x80) p--;
        tok_utf8_next(str + p, &cp);
        if (!is_space_char(cp)) break;
        (*trail)++;
        end = p;
    }
}

/* HF moves char offsets by char counts; posy's offsets are bytes into the
 * text, so it steps over the same number of chars of the text. */
static uint32_t chars_forward(const char *text, size_t len, uint32_t pos, uint32_t n, uint32_t limit) {
    while (n-- > 0 && pos < limit && pos < len) pos += (uint32_t)tok_utf8_len((uint8_t)text[pos]);
    return pos < limit ? pos : limit;
}

/* pos moved back n chars, or UINT32_MAX when fewer than n chars precede it. */
static uint32_t chars_back(const char *text, uint32_t pos, uint32_t n) {
    while (n-- > 0) {
        if (pos == 0) return UINT32_MAX;
        pos--;
        while (pos > 0 && ((uint8_t)text[pos] & 0xC0) == 0x80) pos--;
    }
    return pos;
}

static void trim_one(const tok_tokenizer *t, tok_toks *s, int add_prefix_space, const char *text, size_t tlen) {
    for (size_t i = 0; i < s->n; i++) {
        tok_tok *k = &s->t[i];
        uint32_t lead, trail;
        if (k->lead != 0xFFFF) {
            lead = k->lead;
            trail = k->trail;
        } else {
            uint32_t len;
            const char *str = tok_vocab_str(&t->all, k->id, &len);
            if (!str) continue;
            count_spaces(str, len, &lead, &trail);
        }
        if (lead > 0) {
            int is_first = i == 0 || k->s == 0;
            if (is_first && add_prefix_space && lead == 1) lead = 0;
            k->s = chars_forward(text, tlen, k->s, lead, k->e);
        }
        if (trail > 0) {
            uint32_t e = chars_back(text, k->e, trail);
            if (e != UINT32_MAX) k->e = e > k->s ? e : k->s;
        }
    }
}

static void trim_post(const tok_tokenizer *t, const tok_post *p, tok_toks *a, tok_toks *b, const char *ta,
                      size_t la, const char *tb, size_t lb) {
    if (p->type == TOK_POST_SEQUENCE) {
        for (int i = 0; i < p->n_items; i++) trim_post(t, &p->items[i], a, b, ta, la, tb, lb);
        return;
    }
    if ((p->type != TOK_POST_BYTELEVEL && p->type != TOK_POST_ROBERTA) || !p->trim_offsets) return;
    trim_one(t, a, p->add_prefix_space, ta, la);
    if (b) trim_one(t, b, p->add_prefix_space, tb, lb);
}

int tok_post_trim_offsets(const tok_tokenizer *t, tok_toks *a, tok_toks *b, const char *ta, size_t la,
                          const char *tb, size_t lb) {
    trim_post(t, &t->post, a, b, ta, la, tb, lb);
    return 0;
}

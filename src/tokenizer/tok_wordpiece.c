/* tok_wordpiece: the WordPiece model (BERT): greedy longest-match-first,
 * and the trivial WordLevel model (one piece, one token).
 *
 * For each position the longest vocabulary entry that matches is taken,
 * with continuing_subword_prefix ("##") before non-initial pieces; if some
 * position has no match, or the word is longer than max_input_chars_per_word
 * chars, the whole word becomes the unknown token.  Lookups hash prefix +
 * piece in place (tok_vocab_find2), and the candidate end starts at most
 * max-token-length bytes out, so a word costs O(len * maxlen) bytes hashed
 * and allocates nothing.
 */
#include "tok_internal.h"

int tok_wordpiece_encode(const tok_model *m, const tok_buf *b, uint32_t off, uint32_t len,
                         tok_toks *out, tok_model_scratch *ms) {
    (void)ms;
    const char *w = b->b + off;
    size_t first_tok = out->n;
    uint32_t nchars = 0;
    for (uint32_t i = 0; i < len; i++) nchars += ((uint8_t)w[i] & 0xC0) != 0x80;
    int bad = nchars > (uint32_t)m->max_input_chars;
    uint32_t start = 0;
    while (!bad && start < len) {
        size_t plen = start > 0 ? m->prefix_len : 0;
        uint32_t end = len;
        uint32_t lim = m->vocab.max_len > plen ? m->vocab.max_len - (uint32_t)plen : 0;
        if (end - start > lim) {
            end = start + lim;
            while (end > start && ((uint8_t)w[end] & 0xC0) == 0x80) end--;
        }
        int32_t id = -1;
        while (end > start) {
            id = tok_vocab_find2(&m->vocab, start > 0 ? m->prefix : NULL, plen, w + start, end - start);
            if (id >= 0) break;
            end--;
            while (end > start && ((uint8_t)w[end] & 0xC0) == 0x80) end--;
        }
        if (id < 0) { bad = 1; break; }
        if (tok_toks_push(out, id, start, end)) return POSY_E_NOMEM;
        start = end;
    }
    if (bad) {
        out->n = first_tok;
        if (m->unk_id < 0) return POSY_E_INVALID;
        if (tok_toks_push(out, m->unk_id, 0, len)) return POSY_E_NOMEM;
    }
    return 0;
}

/* WordLevel: the whole piece is a token or the unknown token (HF errors
 * when the model has none; so does posy). */
int tok_wordlevel_encode(const tok_model *m, const tok_buf *b, uint32_t off, uint32_t len,
                         tok_toks *out, tok_model_scratch *ms) {
    (void)ms;
    int32_t id = tok_vocab_find(&m->vocab, b->b + off, len);
    if (id < 0) id = m->unk_id;
    if (id < 0) return POSY_E_INVALID;
    return tok_toks_push(out, id, 0, len) ? POSY_E_NOMEM : 0;
}

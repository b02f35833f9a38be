"""Seeded generator of hostile-but-valid text for the tokenizer differential
tests (tests/python/test_tokenizer_*.py).

Every string is valid Unicode without surrogates (what can reach posy as
UTF-8).  The mix covers what the issues ask for: accents and combining
marks, CJK and many other scripts, emoji with skin-tone modifiers, ZWJ
sequences, flags and variation selectors, control characters, odd
whitespace, very long words, long runs of spaces and digits, special-token
strings and random code points from the whole range (unassigned ones
included).  Same seed, same corpus.
"""
import random

SCRIPTS = [
    (0x0041, 0x007A), (0x00C0, 0x024F), (0x0370, 0x03FF), (0x0400, 0x04FF), (0x0530, 0x058F),
    (0x0590, 0x05FF), (0x0600, 0x06FF), (0x0900, 0x097F), (0x0980, 0x09FF), (0x0B80, 0x0BFF),
    (0x0E00, 0x0E7F), (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1E00, 0x1EFF), (0x3040, 0x30FF),
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xF900, 0xFAFF), (0xFF00, 0xFFEF),
    (0x20000, 0x2A6DF), (0x1D400, 0x1D7FF), (0x2000, 0x206F), (0x2100, 0x214F), (0x2E00, 0x2E7F),
    (0x1F300, 0x1FAFF), (0x0300, 0x036F), (0x1AB0, 0x1AFF), (0x0E80, 0x0EFF), (0x1780, 0x17FF),
]
COMBINING = [chr(c) for c in range(0x0300, 0x0370)] + ["\u0488", "\u20DD", "\u1AB0", "\u0F71", "\u093C"]
EMOJI = ["\U0001F600", "\U0001F44D", "\U0001F469\u200D\U0001F4BB", "\U0001F468\u200D\U0001F469\u200D\U0001F467",
         "\U0001F44B\U0001F3FD", "\u2764\uFE0F", "\U0001F1EB\U0001F1F7", "\U0001F3F3\uFE0F\u200D\U0001F308",
         "\U0001F9D1\U0001F3FF\u200D\U0001F9B0", "#\uFE0F\u20E3", "\u263A", "\U0001FAE0", "\U0001F926\U0001F3FB\u200D\u2642\uFE0F"]
CONTROLS = [chr(c) for c in list(range(0, 32)) + [127, 0x85, 0x200B, 0x200C, 0x200D, 0xFEFF, 0x2028, 0x2029,
                                                  0xFFFD, 0xE000, 0xF8FF, 0x061C, 0x00AD, 0x2060]]
SPACES = [" ", "  ", "\t", "\n", "\r\n", "\u00A0", "\u3000", "\u2003", "\u2009", "\u1680", "\u202F", "\x0b", "\x0c"]
WORDS = ["the", "Hello", "world", "naïve", "café", "Straße", "İstanbul", "ΣΊΣΥΦΟΣ", "don't", "U.S.A.",
         "e-mail", "foo_bar", "x86-64", "3.14159", "1,000,000", "東京", "日本語", "한국어", "ไทย", "עברית",
         "العربية", "हिन्दी", "Привет", "ǅemal", "ﬁne", "Å", "Ⅻ", "①", "ｆｕｌｌ", "𝐁𝐨𝐥𝐝", "tokenization",
         "unbelievably", "antidisestablishmentarianism", "<s>", "</s>", "<unk>", "<pad>", "<mask>",
         "<|endoftext|>", "<|im_start|>", "<|im_end|>", "▁", "Ġ", "##ing"]


def rand_cp(r, lo=0x20, hi=0x10FFFF):
    while True:
        c = r.randint(lo, hi)
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


def script_run(r):
    lo, hi = r.choice(SCRIPTS)
    return "".join(rand_cp(r, lo, hi) for _ in range(r.randint(1, 8)))


def piece(r, specials):
    k = r.random()
    if k < 0.30:
        w = r.choice(WORDS)
        return w.upper() if r.random() < 0.1 else w
    if k < 0.45:
        return script_run(r)
    if k < 0.52:
        return r.choice(EMOJI) * r.randint(1, 2)
    if k < 0.58:
        return r.choice("aeiouAEIOUnc") + "".join(r.choice(COMBINING) for _ in range(r.randint(1, 3)))
    if k < 0.63:
        return r.choice(CONTROLS)
    if k < 0.68:
        return r.choice(specials)
    if k < 0.71:
        return "".join(r.choice("abcdefghij") for _ in range(r.randint(90, 130)))
    if k < 0.74:
        return "".join(r.choice("0123456789") for _ in range(r.randint(5, 60)))
    if k < 0.76:
        return " " * r.randint(2, 40)
    if k < 0.82:
        return "".join(r.choice("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¿¡«»“”‘’—–…·•") for _ in range(r.randint(1, 4)))
    if k < 0.90:
        return "".join(rand_cp(r) for _ in range(r.randint(1, 4)))
    return "".join(rand_cp(r, 0x20, 0x2FFF) for _ in range(r.randint(1, 6)))


def line(r, specials, max_pieces=24):
    n = r.randint(0, max_pieces)
    out = []
    for _ in range(n):
        out.append(piece(r, specials))
        if r.random() < 0.7:
            out.append(" " if r.random() < 0.8 else r.choice(SPACES))
    return "".join(out)


def corpus(seed, n, specials=("[CLS]", "[SEP]", "[MASK]", "[UNK]", "[PAD]", "[SEP", "[sep]", "[ CLS]"),
           max_pieces=24):
    r = random.Random(seed)
    fixed = ["", " ", "  \t\n ", "hi [SEP] there", "[CLS][SEP][MASK]", "a" * 101, "a" * 100, "é" * 101,
             "\u0000\u0001\u0002", "\ufeffBOM", "x\u200dy", "中文字符", "ǅ", "İ", "ẞ", "ﬃ", "\u00a0\u00a0",
             "\U0001F469\u200D\U0001F4BB", "9" * 300, " " * 300, "Hello, World! It's 3.14."] + list(specials)
    out = fixed[:n]
    while len(out) < n:
        out.append(line(r, list(specials), max_pieces))
    return out

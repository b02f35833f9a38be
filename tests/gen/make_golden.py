#!/usr/bin/env python3
"""Generate the golden-embedding fixture for all-MiniLM-L6-v2.

Writes tests/fixtures/golden_minilm/sentences.jsonl (one JSON string per
line) and embeddings.npy (float32 [n, 384]) computed by the reference
implementation, sentence-transformers on CPU in fp32.  posy's output is
compared against these in tests/python/test_golden.py.

The sentence set is built from fixed pools with a seeded random generator,
so two runs write the same sentences.  It covers what breaks tokenizers and
engines: short and long (past the 256-token limit, so truncation matters),
many scripts, accents, emoji (incl. ZWJ sequences and flags), code, numbers,
whitespace-only and empty strings, punctuation only, control and zero-width
characters, and words longer than WordPiece's 100-character limit.

CI does not run this (no torch there); it is committed so the fixture can
be regenerated:  python3 tests/gen/make_golden.py [--model DIR]
"""
import argparse
import json
import os
import random
import sys

SEED = 20261129
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT_DIR = os.path.join(ROOT, "tests", "fixtures", "golden_minilm")

WORDS = (
    "the quick brown fox jumps over lazy dog embedding vector search retrieval "
    "model server batch token sentence meaning semantic similarity cluster "
    "index query document passage answer question river mountain city music "
    "history science engine kernel memory latency throughput garden coffee "
    "window bridge ocean planet language library network protocol weather"
).split()

SHORT = [
    "Hello world", "hi", "A", "ok", "Yes.", "No!", "Why?", "cat", "Dogs bark.",
    "This is a test.", "Embeddings map text to vectors.",
    "The weather is lovely today.", "I love pizza", "GPU vs CPU",
    "What is the capital of France?", "Paris is the capital of France.",
    "How do I reset my password?", "Click 'Forgot password' on the login page.",
    "UPPER CASE SENTENCE", "MiXeD CaSe WoRdS", "don't can't won't it's",
    "e-mail, co-operate, state-of-the-art", "U.S.A. and U.K.", "Mr. Smith Jr.",
    "semantic search with sentence transformers", "rust vs go vs c",
]

NON_ENGLISH = [
    "Le café est très bon à Paris.", "Ça va? Où est la gare?",
    "Straße, Größe, Übermäßig, Fußgänger", "El niño comió piñata en España.",
    "São Paulo é a maior cidade do Brasil.", "Zażółć gęślą jaźń",
    "Příliš žluťoučký kůň úpěl ďábelské ódy", "Árvíztűrő tükörfúrógép",
    "Привет, как дела? Москва — столица России.", "Съешь же ещё этих мягких французских булок",
    "Γειά σου κόσμε! Η Αθήνα είναι όμορφη.", "مرحبا بالعالم، كيف حالك اليوم؟",
    "שלום עולם, מה שלומך?", "नमस्ते दुनिया, आप कैसे हैं?", "আমি বাংলায় গান গাই",
    "வணக்கம் உலகம்", "สวัสดีชาวโลก วันนี้อากาศดี", "Xin chào thế giới, tôi là người Việt.",
    "你好，世界！今天天气很好。", "我爱北京天安门", "機械学習と自然言語処理",
    "東京は日本の首都です。ひらがなとカタカナ", "안녕하세요 세계, 반갑습니다", "한국어 문장 임베딩 테스트",
    "ქართული ენა", "Բարեւ աշխարհ", "ሰላም ለዓለም", "Merhaba dünya, İstanbul'da ığdır",
    "Tere maailm, jõgi ja öö", "Hyvää huomenta, äiti!", "Ελληνικά με τόνους: άέήίόύώ ΐΰ",
    "naïve café résumé coöperate façade jalapeño", "ﬁ ﬂ ligatures and ｆｕｌｌｗｉｄｔｈ ＡＢＣ",
    "Ångström Øresund Æble", "日本語とEnglishのmixed文章です", "中文English混合123测试",
]

EMOJI = [
    "I love this 😍😍😍", "🚀 launch day 🎉", "👍", "🙂🙃😉", "👨‍👩‍👧‍👦 family",
    "🇫🇷 🇯🇵 🇺🇸 flags", "Skin tones 👋🏻👋🏿", "❤️ heart with VS16", "🤖 + 🧠 = AI?",
    "weather: ☀️🌧️❄️", "emoji only 🍕🍔🍟🌭", "kaomoji (╯°□°）╯︵ ┻━┻",
]

CODE = [
    "def add(a, b):\n    return a + b",
    "for (int i = 0; i < n; i++) { sum += x[i]; }",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name;",
    "<div class=\"main\"><p>Hello</p></div>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "git commit -m \"fix: handle empty input\" && git push origin main",
    "x = lambda y: y ** 2 if y > 0 else -y",
    "#include <stdio.h>\nint main(void) { printf(\"hi\\n\"); return 0; }",
    "https://example.com/path?query=1&other=two#frag",
    "user.name+tag@example.co.uk", "C:\\Users\\posy\\Documents\\file.txt",
    "$ cmake -S . -B build && cmake --build build -j2",
    "a_very_long_snake_case_identifier_name_for_testing_purposes = 42",
    "camelCaseIdentifierWithManyWordsInside()",
]

NUMBERS = [
    "123", "3.14159265358979", "1,000,000", "-42", "1e-10", "0x1F 0b1010 0o777",
    "Call 555-123-4567 or +1 (800) 555-0199", "2026-11-29T17:00:00Z",
    "Version 1.2.3-beta.4", "The year 1999 had 365 days.", "50% off, $19.99, €5, ¥1000, £3",
    "½ ¾ ⅓ ² ³ ١٢٣ ４５６", "IPv4 192.168.0.1 and IPv6 ::1",
]

ODD = [
    "", " ", "   ", "\t", "\t \t", "  leading and trailing spaces  ",
    "multiple     spaces   between", "tabs\tbetween\twords", "line\nbreak",
    "crlf\r\nline", "\u00a0non-breaking\u00a0space", "zero\u200bwidth\u200bspace",
    "soft\u00adhyphen", "bell\u0007char", "form\u000cfeed", "escape\u001b[31mred",
    "combining e\u0301 and a\u0300", "\ufeffBOM at start", "right-to-left \u202emark",
    "...", "!!!", "?!?!", "---", "***", "()[]{}", "@#$%^&*", ".,;:'\"`~", "— – … « » “ ” ‘ ’",
    "a" * 150, "x" * 99 + " y", "supercalifragilisticexpialidocious" * 4,
    "ab" * 60 + " short word after", "ThisIsAVeryLongWordWithoutAnySpacesThatGoesOnAndOnAndOnForeverAndEverAndEverAndNeverStopsAtAll",
]


def long_text(rng, n_words):
    """A run-on text of `n_words` words with punctuation, well past 256 tokens when n_words > 220."""
    out = []
    for i in range(n_words):
        w = rng.choice(WORDS)
        if i % 11 == 0:
            w = w.capitalize()
        out.append(w)
        if i % 13 == 12:
            out[-1] += rng.choice([",", ".", ";", "!"])
    return " ".join(out)


def random_sentence(rng):
    n = rng.randint(4, 30)
    s = " ".join(rng.choice(WORDS) for _ in range(n))
    return s[0].upper() + s[1:] + rng.choice([".", "?", "!", ""])


def mixed(rng):
    pools = [NON_ENGLISH, EMOJI, NUMBERS, SHORT]
    return " ".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(2, 5)))


def build_sentences():
    rng = random.Random(SEED)
    s = list(SHORT) + list(NON_ENGLISH) + list(EMOJI) + list(CODE) + list(NUMBERS) + list(ODD)
    s += [random_sentence(rng) for _ in range(40)]
    s += [mixed(rng) for _ in range(25)]
    # Long inputs: some just under, some just over, some far over the limit.
    for n in (150, 200, 240, 260, 300, 400, 600, 900):
        s.append(long_text(rng, n))
    s.append(" ".join(NON_ENGLISH) * 2)                     # long multilingual
    s.append("🙂 " * 400)                                   # long emoji
    s.append(("你好世界" * 150))                             # long CJK, no spaces
    s.append(" ".join(CODE) * 3)                            # long code
    s.append(" ".join(str(i) for i in range(400)))          # long numbers
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "all-MiniLM-L6-v2"))
    ap.add_argument("--out", default=OUT_DIR)
    args = ap.parse_args()

    sentences = build_sentences()
    assert len(sentences) >= 200, len(sentences)

    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    model = SentenceTransformer(args.model, device="cpu")
    model = model.float().eval()
    emb = model.encode(sentences, batch_size=16, convert_to_numpy=True, show_progress_bar=False)
    emb = np.ascontiguousarray(emb, dtype="<f4")

    tok = model.tokenizer
    n_trunc = sum(1 for t in sentences if len(tok(t)["input_ids"]) > model.max_seq_length)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "sentences.jsonl"), "w", encoding="utf-8") as f:
        for t in sentences:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    np.save(os.path.join(args.out, "embeddings.npy"), emb)
    print(f"{len(sentences)} sentences ({n_trunc} over max_seq_length={model.max_seq_length}), "
          f"embeddings {emb.shape} -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()

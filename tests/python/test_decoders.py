"""The decoders without Qwen3's q/k norm (Qwen2, Mistral, Llama, Llama 3.x's
rope scaling), text to vector, against Hugging Face transformers and tokenizers.

tests/fixtures/decoders/ holds tiny random-weight models made by
tests/gen/gen_decoder_fixtures.py with transformers' own Qwen2Model,
MistralModel and LlamaModel, and in reference.json for fixed texts the
token ids `tokenizers` gives (Qwen's byte-level BPE; the SentencePiece-style
BPE with byte fallback of Llama / Mistral, "<s> ... </s>") and the
embeddings transformers computes from them in each model's own attention
mode.  posy must give the same ids (`posy tokenize`, /tokenize) and the
same vectors (cosine >= 0.99999, the CPU bar) from `posy embed`, /embed and
/v1/embeddings.  The engine on fixed ids, both attention modes, is checked
in tests/unit/test_qwen3.c.
"""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import FIXTURES
from serve_util import Server, post_json as post

ROOT = os.path.join(FIXTURES, "decoders")
REF = json.load(open(os.path.join(ROOT, "reference.json")))
MODELS = sorted(REF["texts"])


def min_cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def case(name):
    t = REF["texts"][name]
    return os.path.join(ROOT, name), [x["text"] for x in t], [x["ids"] for x in t], [x["embedding"] for x in t]


def test_fixture_covers_byte_fallback():
    """The Llama-style tokenizer must fall back to <0xXX> bytes on some text, or the id check proves less."""
    _, _, ids, _ = case("mistral")
    assert any(3 <= i <= 258 for seq in ids for i in seq)


@pytest.mark.parametrize("name", MODELS)
def test_decoder_token_ids(posy_bin, name):
    model, texts, ids, _ = case(name)
    lines = "".join(json.dumps(t) + "\n" for t in texts)
    r = subprocess.run([posy_bin, "tokenize", "--model", model, "--json-input"], input=lines.encode(),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    assert [json.loads(line)["ids"] for line in r.stdout.decode().splitlines()] == ids


@pytest.mark.parametrize("name", MODELS)
def test_decoder_embed_cli(posy, name):
    model, texts, _, want = case(name)
    v = posy.embed_jsonl("--", *texts, model=model)
    assert min_cos(v, want) >= 0.99999


@pytest.fixture(scope="module")
def mistral(posy_bin):
    s = Server(posy_bin, os.path.join(ROOT, "mistral"), "--device", "cpu", "--threads", "2")
    yield s.url
    assert s.stop() == 0


def test_mistral_server(mistral):
    _, texts, ids, want = case("mistral")
    st, tei = post(mistral, "/embed", {"inputs": texts})
    assert st == 200, tei
    assert min_cos(tei, want) >= 0.99999
    st, oa = post(mistral, "/v1/embeddings", {"input": texts, "model": "mistral"})
    assert st == 200, oa
    assert min_cos([d["embedding"] for d in oa["data"]], want) >= 0.99999
    st, tok = post(mistral, "/tokenize", {"inputs": texts, "add_special_tokens": True})
    assert st == 200, tok
    assert [[t["id"] for t in seq] for seq in tok] == ids


def test_mistral_window_caps_length(mistral):
    """sliding_window 64: inputs over 64 tokens are refused by default and truncated on request."""
    long = "The quick brown fox jumps over the lazy dog. " * 12
    st, r = post(mistral, "/embed", {"inputs": [long]})
    assert st == 422 and "limit of 64" in r["error"], r
    st, r = post(mistral, "/embed", {"inputs": [long], "truncate": True})
    assert st == 200 and len(r[0]) == 64, r  # hidden size 64


@pytest.mark.parametrize("name", ["nomic", "gte", "gte_mixed", "jina"])
def test_post_ln_server(posy_bin, name):
    """The post-norm encoders through the HTTP front -- NomicBERT
    (nomic-embed-text's layout: its token type rows reach the engine,
    type_vocab_size 2, the gateway sends the ids) and GTE v1.5 / mGTE
    (model_type "new", new-impl's remote code; CLS pooling in gte, mean in
    gte_mixed) and JinaBERT v2 (ALiBi): /embed and /v1/embeddings give the reference's vectors,
    /tokenize the ids `tokenizers` gives."""
    _, texts, ids, want = case(name)
    s = Server(posy_bin, os.path.join(ROOT, name), "--device", "cpu", "--threads", "2")
    try:
        st, tei = post(s.url, "/embed", {"inputs": texts})
        assert st == 200, tei
        assert min_cos(tei, want) >= 0.99999
        st, oa = post(s.url, "/v1/embeddings", {"input": texts, "model": name})
        assert st == 200, oa
        assert min_cos([d["embedding"] for d in oa["data"]], want) >= 0.99999
        st, tok = post(s.url, "/tokenize", {"inputs": texts, "add_special_tokens": True})
        assert st == 200, tok
        assert [[t["id"] for t in seq] for seq in tok] == ids
    finally:
        assert s.stop() == 0


def _nomic_copy(tmp_path, rename=None, config=None, name="nomic"):
    """The nomic (or `name`) fixture in tmp_path, one tensor's name changed
    in the safetensors header (same length, so offsets stay) and
    config.json fields replaced, as a damaged download would be."""
    import shutil
    d = tmp_path / name
    shutil.copytree(os.path.join(ROOT, name), d)
    if rename:
        p = d / "model.safetensors"
        b = bytearray(p.read_bytes())
        n = int.from_bytes(b[:8], "little")
        head = b[8:8 + n].decode()
        assert rename[0] in head and len(rename[0]) == len(rename[1])
        b[8:8 + n] = head.replace(rename[0], rename[1]).encode()
        p.write_bytes(bytes(b))
    if config:
        c = json.load(open(d / "config.json"))
        c.update(config)
        json.dump(c, open(d / "config.json", "w"))
    return str(d)


@pytest.mark.parametrize("rename,config,want", [
    (("encoder.layers.1.norm2.bias", "encoder.layers.1.normX.bias"), None, "encoder.layers.1.norm2.bias not found"),
    (("emb_ln.weight", "emb_lX.weight"), None, "emb_ln.weight not found"),
    (None, {"n_inner": 128}, "fc12.weight has shape [96, 64], config.json implies [128, 64]"),
    (None, {"prenorm": True}, "prenorm true is not supported"),
    (None, {"rotary_scaling_factor": 2.0}, "rotary_scaling_factor set is not supported"),
])
def test_nomic_damaged_refused(posy, tmp_path, rename, config, want):
    """A NomicBERT folder whose weights or config do not match is refused at
    load with the file and tensor or field named, never run."""
    d = _nomic_copy(tmp_path, rename, config)
    r = posy.run("embed", "--model", d, "--device", "cpu", "--", "hello")
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and r.returncode < 128, err
    assert want in err, err


@pytest.mark.parametrize("rename,config,want", [
    (("encoder.layer.1.mlp.down_proj.bias", "encoder.layer.1.mlp.down_proj.bixs"), None,
     "encoder.layer.1.mlp.down_proj.bias not found"),
    (("encoder.layer.0.attention.qkv_proj.weight", "encoder.layer.0.attention.qkv_projXweight"), None,
     "encoder.layer.0.attention.qkv_proj.weight not found"),
    (None, {"intermediate_size": 128}, "up_gate_proj.weight has shape [192, 64], config.json implies [256, 64]"),
    (None, {"position_embedding_type": "absolute"}, "position_embedding_type 'absolute' is not supported"),
    (None, {"rope_scaling": {"type": "dynamic", "factor": 2.0}}, "type 'dynamic' is not supported"),
    (None, {"logn_attention_scale": True}, "logn_attention_scale true is not supported"),
    (None, {"type_vocab_size": 3}, "token_type_embeddings.weight has shape [1, 64], config.json implies [3, 64]"),
])
def test_gte_damaged_refused(posy, tmp_path, rename, config, want):
    """A GTE folder whose weights or config do not match is refused at load
    with the file and tensor or field named, never run."""
    d = _nomic_copy(tmp_path, rename, config, name="gte")
    r = posy.run("embed", "--model", d, "--device", "cpu", "--", "hello")
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and r.returncode < 128, err
    assert want in err, err


def _rewrite_safetensors(path, edit):
    """Rewrite a safetensors file's header through edit(header dict, data
    bytes) -> (header, data): renamed or added tensors, as another save of
    the same weights would have them (offsets are relative to the data)."""
    b = open(path, "rb").read()
    n = int.from_bytes(b[:8], "little")
    head, data = edit(json.loads(b[8:8 + n]), b[8 + n:])
    h = json.dumps(head).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(len(h).to_bytes(8, "little") + h + data)


def test_jina_prefix_and_variant(posy, tmp_path):
    """JinaBERT's tensors under "bert." (a JinaBertFor... class's save) give
    the same vectors; the q/k post-norm variant (layer_norm_q tensors:
    jina-embeddings-v2-base-code's code) is refused by name, not run."""
    import shutil
    _, texts, _, want = case("jina")
    d = tmp_path / "jina"
    shutil.copytree(os.path.join(ROOT, "jina"), d)
    _rewrite_safetensors(d / "model.safetensors",
                         lambda h, data: ({(k if k == "__metadata__" else "bert." + k): v for k, v in h.items()}, data))
    v = posy.embed_jsonl("--", *texts, model=str(d))
    assert min_cos(v, want) >= 0.99999

    def add_qk_norm(h, data):
        h["bert.encoder.layer.0.attention.self.layer_norm_q.weight"] = {
            "dtype": "F32", "shape": [96], "data_offsets": [len(data), len(data) + 384]}
        return h, data + bytes(384)
    _rewrite_safetensors(d / "model.safetensors", add_qk_norm)
    r = posy.run("embed", "--model", str(d), "--device", "cpu", "--", "hello")
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and r.returncode < 128, err
    assert "q/k post-norm variant" in err and "layer_norm_q" in err, err


@pytest.mark.parametrize("config,want", [
    ({"feed_forward_type": "reglu"}, "feed_forward_type 'reglu' is not supported"),
    ({"feed_forward_type": "original"}, "feed_forward_type 'original' is not supported"),
    ({"architectures": ["JinaBertForSequenceClassification"], "num_labels": 1},
     "sequence-classification head on JinaBERT"),
    ({"intermediate_size": 64}, "gated_layers.weight has shape [256, 96], config.json implies [128, 96]"),
])
def test_jina_refused(posy, tmp_path, config, want):
    """JinaBERT switches posy does not compute, a classifier head on it and
    a config that does not match the weights: refused at load, named."""
    d = _nomic_copy(tmp_path, None, config, name="jina")
    r = posy.run("embed", "--model", d, "--device", "cpu", "--", "hello")
    err = r.stderr.decode(errors="replace")
    assert r.returncode != 0 and r.returncode < 128, err
    assert want in err, err

#!/usr/bin/env python3
"""Write tests/fixtures/decoders/: tiny random-weight Qwen2, Mistral and
Llama embedding models built by Hugging Face transformers -- the decoders
without Qwen3's q/k norm that posy runs on its Qwen3 engine -- and the
embeddings transformers computes for fixed token-id sequences
(reference.json, the layout of tests/fixtures/qwen3/reference.json).

Each keeps what sets its family apart, shrunk to CI size (2 layers,
hidden 64, vocabulary <= 512, bf16 weights, so the fp32 reference sees
the stored values):

  qwen2/    Qwen2Model (gte-Qwen2 style): bias on q, k and v but not o,
            head_dim = hidden / heads (32), 2 query heads per KV head,
            last-token pooling, a byte-level BPE tokenizer (Qwen's split
            regex) appending <|endoftext|>.
  mistral/  MistralModel (e5-mistral style): no bias, head_dim 32 set
            apart from hidden / heads (16), sliding_window 64 (so posy caps
            sequences at 64 tokens, where the window changes nothing),
            last-token pooling, e5-mistral's query prompt, and a
            SentencePiece-style BPE tokenizer (Prepend + Replace "▁"
            normalizer, byte fallback <0x00>..<0xFF>, "<s> $A </s>").
  llama/    LlamaModel with attention_bias (bias on q, k, v and o), 4
            heads of 16 without GQA, rope_theta 500000, mean pooling, config
            "is_causal": false (bidirectional, as an LLM2Vec-style model).
  llama3/   LlamaModel with Llama 3.x's rope scaling, written as Llama 3.2's
            config.json writes it (top-level rope_theta + "rope_scaling":
            {"rope_type": "llama3", ...}), with original_max_position_embeddings
            16 so that sequences of a few tokens already see every band of
            frequencies (kept, smoothed, divided); GQA, causal, last token.
  gemma3/   Gemma3TextModel (EmbeddingGemma style): bidirectional
            (use_bidirectional_attention), mean pooling, (1 + w) norms with
            the post-attention and post-MLP norms, gelu_tanh GeGLU,
            embeddings x sqrt(hidden), query_pre_attn_scalar 24 (not
            head_dim 32), one sliding layer (rope_theta 1e4) and one global
            (1e6), sliding_window 64 (bidirectional: |query - key| < 33, so
            the 40- and 64-token sequences see the window), the
            SentencePiece-style tokenizer.  Its own seed, so
            `--only gemma3` rewrites it alone with the same weights.
  modernbert/ ModernBertModel (gte-modernbert / modernbert-embed style; an
            encoder run on the same engine): LayerNorms without bias, layer
            0 without its attention norm, GELU GLU, 3 layers (layer 0 global
            with rope 160000, layers 1-2 sliding with 10000),
            local_attention 32 (|query - key| <= 16, binding from 18 tokens
            on), mean pooling, the byte-level tokenizer.  Its own seed.
  nomic/    NomicBertModel (nomic-embed-text-v1 / v1.5; an encoder on the
            same engine): BERT's post-LayerNorm layer with rotary positions
            (theta 1000) instead of a position table, SwiGLU, no linear
            biases, token type row 0 added before the embedding LayerNorm,
            mean pooling, a BERT WordPiece tokenizer.  config.json is then
            rewritten as the hub's checkpoints write it (Nomic's own keys:
            n_embd, rotary_emb_base, ...; transformers' is kept as
            config_transformers.json).  Its own seed; the WordPiece
            trainer orders equally frequent pieces differently from run to
            run, so a rerun rewrites tokenizer.json and the texts' ids (the
            weights, config and fixed-id references stay the same).
  gte/      GTE v1.5 / mGTE (model_type "new": Alibaba-NLP/new-impl's
            NewModel, remote code that transformers does not ship): the
            post-LayerNorm layer with biases on qkv_proj, o_proj and
            down_proj, GELU(gate) * up from one up_gate_proj (up rows
            first), rotary positions with fixed NTK scaling (factor 2 over
            128 positions: the frequencies change at every length),
            type_vocab_size 1, CLS pooling, the WordPiece tokenizer.
  gte_mixed/ the same code's other switches: pack_qkv false (q / k / v
            projections), mixed NTK (mixed_b 1.5), no token types, the
            "new." prefix a NewFor... class saves, mean pooling.
            Both need the reference code, which the hub holds: point
            POSY_GTE_REF at a folder with new-impl's modeling.py and
            configuration.py (`--only gte` / `--only gte_mixed`; a full run
            skips them without it and keeps their committed entries).
  jina/     JinaBERT v2 (jina-embeddings-v2-*: model_type "bert" with
            position_embedding_type "alibi", remote code jinaai/
            jina-bert-implementation): the post-LayerNorm layer with
            ALiBi's symmetric bias instead of positions, biases on q / k /
            v / output dense / wo, GELU(first half) * second half of
            gated_layers, token types; 6 heads (slopes between powers of
            two), hidden 96, mean pooling, the WordPiece tokenizer.
            POSY_JINA_REF names the folder with that code's
            modeling_bert.py and configuration_bert.py (`--only jina`).
  t5/       T5EncoderModel (sentence-t5 / gtr-t5 style, T5 v1.0): relu MLP
            without a gate, d_kv 16 (4 heads x 16 = d_model 64), the
            relative position bias of block 0 in both layers, unscaled
            attention, mean pooling, a T5-style Unigram tokenizer
            (Metaspace, "$A </s>").  Its own seed.
  t5g/      T5 v1.1's shape: "gated-gelu" (gelu_new(wi_0) * wi_1), d_kv 32
            (4 x 32 = 128 apart from d_model 64), embeddings not tied.
            Its own seed.

reference.json: "sequences" (token ids), and per model its pooling and,
for each attention mode ("causal", "bidirectional"), the pooled + L2
normalised embedding of every sequence run alone in fp32 eager attention
with an explicit additive 4-D mask; "texts" per model: a few texts with
the ids `tokenizers` gives them and the embedding of those ids in the
model's own mode (for the text-to-vector tests).

Needs torch + transformers + tokenizers (not in CI); the fixtures are
committed.  Run from the repository root:
  python3 tests/gen/gen_decoder_fixtures.py [--only NAME]
(--only: that model's folder and reference entries alone, the others kept.)
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import transformers as T
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from gen_qwen3_fixtures import st_files  # modules.json, pooling (hidden 64), prompts: the same files

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
from e2e_common import (GTE_HUB, JINA_HUB, RemoteRef, gte_new_model, jina_new_model,  # noqa: E402
                        nomic_hub_keys, remote_module)  # (shared with the GPU check)

OUT = os.path.join("tests", "fixtures", "decoders")
SEQS = [[7], [11, 300, 5, 9, 42], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17],
        [(i * 37 + 5) % 300 for i in range(40)], [100, 100, 100, 100, 100, 100], [(i * 11 + 3) % 290 for i in range(64)]]
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CORPUS = ["The quick brown fox jumps over the lazy dog.", "What is the capital of China?",
          "Explain gravity", "The capital of China is Beijing.",
          "Gravity is a force that attracts two bodies towards each other.",
          "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: ",
          "Embedding models turn text into vectors for retrieval, clustering and deduplication."] * 4
TEXTS = ["What is the capital of China?", "Gravity is a force", "  spaces   and\ttabs\n",
         "café, naïve, 日本語 ☃ — bytes fall back", "The quick brown fox jumps over the lazy dog. " * 3]
E5_QUERY = "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: "


def bytelevel_tokenizer():
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=[], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(["<|endoftext|>", "<|im_start|>", "<|im_end|>"])
    eos = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>",
                                                       pair="$A <|endoftext|> $B:1 <|endoftext|>:1",
                                                       special_tokens=[("<|endoftext|>", eos)])
    return tok, None, eos


def sentencepiece_tokenizer():
    """Llama / Mistral's tokenizer.json shape: <unk> <s> </s>, the 256 byte
    tokens, then merged pieces; no pre-tokenizer."""
    norm = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    t0 = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    t0.normalizer = norm
    t0.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=180, special_tokens=["<unk>", "<s>", "</s>"],
                                                       show_progress=False))
    j = json.loads(t0.to_str())
    trained = sorted(j["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = len(vocab)
    for piece, _ in trained:
        if piece not in vocab:
            vocab[piece] = len(vocab)
    j["model"]["vocab"] = vocab
    j["added_tokens"] = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for c, i in (("<unk>", 0), ("<s>", 1), ("</s>", 2))]
    tok = Tokenizer.from_str(json.dumps(j))
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> <s> $B:1 </s>:1",
                                                       special_tokens=[("<s>", 1), ("</s>", 2)])
    assert tok.get_vocab_size() <= 512, tok.get_vocab_size()
    return tok, 1, 2


def wordpiece_tokenizer():
    """BERT's tokenizer.json shape (nomic-embed-text's): [PAD] [UNK] [CLS]
    [SEP] [MASK] first, lowercase + accent stripping, "[CLS] $A [SEP]"."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True, strip_accents=None,
                                                lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(CORPUS, trainers.WordPieceTrainer(
        vocab_size=300, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], show_progress=False))
    tok.decoder = decoders.WordPiece(prefix="##")
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    assert tok.get_vocab_size() <= 512, tok.get_vocab_size()
    return tok, None, sep


def nomic_hub_config(d):
    """config.json as nomic-embed-text-v1.5 ships it: the keys of Nomic's
    own modeling code (n_embd, n_head, rotary_emb_base, ...), written after
    the reference (transformers reads its own keys); posy reads both."""
    c = json.load(open(os.path.join(d, "config.json")))
    hub = nomic_hub_keys(c)
    json.dump(c, open(os.path.join(d, "config_transformers.json"), "w"), indent=2)
    json.dump(hub, open(os.path.join(d, "config.json"), "w"), indent=2)


def unigram_tokenizer():
    """T5's tokenizer.json shape: a SentencePiece Unigram model, <pad> </s>
    <unk> first, Metaspace pre-tokenizer, "$A </s>" (no BOS)."""
    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.Replace(Regex(" {2,}"), " ")
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(CORPUS, trainers.UnigramTrainer(vocab_size=300, special_tokens=["<pad>", "</s>", "<unk>"],
                                                            unk_token="<unk>", show_progress=False))
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    eos = tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B:1 </s>:1",
                                                       special_tokens=[("</s>", eos)])
    assert tok.get_vocab_size() <= 512, tok.get_vocab_size()
    return tok, None, eos


# the remote-code families: (environment variable, modeling module, hub config, model constructor)
REMOTE = {"gte": ("POSY_GTE_REF", "modeling", GTE_HUB, gte_new_model),
          "jina": ("POSY_JINA_REF", "modeling_bert", JINA_HUB, jina_new_model)}


def remote_of(sp):
    return remote_module(*REMOTE[sp["remote"]][:2])


def gen_remote(name, sp, ref):
    """A fixture of a remote-code model (GTE, JinaBERT): config.json as the
    hub writes it, weights saved with safetensors (bf16), the reference run
    by that code's own model class."""
    from safetensors.torch import load_file, save_file
    _, _, hub, new_model = REMOTE[sp["remote"]]
    mod = remote_of(sp)
    torch.manual_seed(sp["seed"])
    tok, _, _ = sp["tok"]()
    c = dict(hub, **sp["cfg"])
    model = new_model(mod, c).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            p.normal_(0.0, 0.15 if p.dim() > 1 else 0.3)
            if p.dim() == 1 and ("LayerNorm" in n or "_ln." in n or "layernorm" in n) and n.endswith("weight"):
                p.add_(1.0)
            p.copy_(p.to(torch.bfloat16).float())
    d = os.path.join(OUT, name)
    os.makedirs(d)
    pre = sp.get("prefix", "")
    save_file({pre + k: v.to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()},
              os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)
    st_files(d, sp["pooling"], {})
    pc = json.load(open(os.path.join(d, "1_Pooling", "config.json")))
    pc["word_embedding_dimension"] = c["hidden_size"]
    json.dump(pc, open(os.path.join(d, "1_Pooling", "config.json"), "w"), indent=2)
    tok.save(os.path.join(d, "tokenizer.json"))
    json.dump({"model_max_length": 8192, "tokenizer_class": "BertTokenizer"},
              open(os.path.join(d, "tokenizer_config.json"), "w"), indent=2)
    # the reference: a fresh fp32 model with the saved tensors, as a user's load
    m = new_model(mod, c)
    sd = {k[len(pre):]: v.float() for k, v in load_file(os.path.join(d, "model.safetensors")).items()}
    m.load_state_dict(sd)
    m = RemoteRef(m.eval())
    pool = sp["pooling"]
    ref["models"][name] = {"pooling": pool, "causal_config": False,
                           "causal": [embed(m, q, False, pool) for q in SEQS],
                           "bidirectional": [embed(m, q, True, pool) for q in SEQS]}
    ref["texts"][name] = [{"text": t, "ids": tok.encode(t).ids,
                           "embedding": embed(m, tok.encode(t).ids, True, pool)} for t in TEXTS]
    print(name, "files:", sorted(os.listdir(d)))


@torch.no_grad()
def embed(model, ids, bidirectional, pooling):
    n = len(ids)
    mask = torch.zeros(1, 1, n, n)
    if not bidirectional:
        mask = torch.triu(torch.full((1, 1, n, n), float("-inf")), diagonal=1)
    if isinstance(model, T.Gemma3TextModel):  # one mask per layer kind: the sliding layers' window on top
        w = model.config.sliding_window  # bidirectional: already W // 2 + 1 (the config's conversion)
        i = torch.arange(n)
        far = (i[:, None] - i[None, :]).abs() >= w
        mask = {"full_attention": mask, "sliding_attention": mask.masked_fill(far, float("-inf"))}
    if isinstance(model, T.ModernBertModel):  # its window is inclusive: |q - k| <= local_attention // 2
        i = torch.arange(n)
        far = (i[:, None] - i[None, :]).abs() > model.config.sliding_window
        mask = {"full_attention": mask, "sliding_attention": mask.masked_fill(far, float("-inf"))}
    h = model(input_ids=torch.tensor([ids]), attention_mask=mask).last_hidden_state[0].double()
    v = h[-1] if pooling == "last" else h[0] if pooling == "cls" else h.mean(0)
    return (v / v.norm()).tolist()


def t5_config(eos, d_kv, d_ff, ffp, tied):
    """A 2-layer T5 encoder of d_model 64, 4 heads, T5's own 32 buckets / distance 128."""
    return T.T5Config(vocab_size=512, d_model=64, d_kv=d_kv, d_ff=d_ff, num_layers=2, num_heads=4,
                      feed_forward_proj=ffp, relative_attention_num_buckets=32, relative_attention_max_distance=128,
                      layer_norm_epsilon=1e-6, is_encoder_decoder=False, use_cache=False, pad_token_id=0,
                      eos_token_id=eos, decoder_start_token_id=0, tie_word_embeddings=tied)


SPECS = {
    "qwen2": dict(cls=T.Qwen2Model, tok=bytelevel_tokenizer, pooling="last", causal=True, prompts={"query": E5_QUERY},
                  cfg=lambda bos, eos: T.Qwen2Config(
                      vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                      rope_theta=1000000.0, rms_norm_eps=1e-6, hidden_act="silu", use_sliding_window=False,
                      tie_word_embeddings=True, bos_token_id=bos, eos_token_id=eos, pad_token_id=eos)),
    "mistral": dict(cls=T.MistralModel, tok=sentencepiece_tokenizer, pooling="last", causal=True,
                    prompts={"web_search_query": E5_QUERY},
                    cfg=lambda bos, eos: T.MistralConfig(
                        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
                        sliding_window=64, rope_theta=10000.0, rms_norm_eps=1e-5, hidden_act="silu",
                        tie_word_embeddings=False, bos_token_id=bos, eos_token_id=eos, pad_token_id=None)),
    "llama": dict(cls=T.LlamaModel, tok=sentencepiece_tokenizer, pooling="mean", causal=False, prompts={},
                  cfg=lambda bos, eos: T.LlamaConfig(
                      vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                      rope_theta=500000.0, rms_norm_eps=1e-5, hidden_act="silu", attention_bias=True,
                      mlp_bias=False, tie_word_embeddings=False, bos_token_id=bos, eos_token_id=eos)),
    "llama3": dict(cls=T.LlamaModel, tok=sentencepiece_tokenizer, pooling="last", causal=True, prompts={},
                   old_rope=True,
                   cfg=lambda bos, eos: T.LlamaConfig(
                       vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                       rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                        "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                        "original_max_position_embeddings": 16},
                       rms_norm_eps=1e-5, hidden_act="silu", attention_bias=False, mlp_bias=False,
                       tie_word_embeddings=True, bos_token_id=bos, eos_token_id=eos)),
    "gemma3": dict(cls=T.Gemma3TextModel, tok=sentencepiece_tokenizer, pooling="mean", causal=False, prompts={},
                   seed=777,
                   cfg=lambda bos, eos: T.Gemma3TextConfig(
                       vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
                       sliding_window=64, layer_types=["sliding_attention", "full_attention"],
                       rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
                       query_pre_attn_scalar=24, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
                       use_bidirectional_attention=True, attn_logit_softcapping=None,
                       final_logit_softcapping=None, tie_word_embeddings=True, bos_token_id=bos,
                       eos_token_id=eos, pad_token_id=0)),
    "modernbert": dict(cls=T.ModernBertModel, tok=bytelevel_tokenizer, pooling="mean", causal=False, prompts={},
                       seed=991,
                       cfg=lambda bos, eos: T.ModernBertConfig(
                           vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
                           num_attention_heads=4, max_position_embeddings=256, hidden_activation="gelu",
                           norm_eps=1e-5, norm_bias=False, attention_bias=False, mlp_bias=False,
                           local_attention=32, global_attn_every_n_layers=3, global_rope_theta=160000.0,
                           local_rope_theta=10000.0, pad_token_id=0, bos_token_id=eos, eos_token_id=eos,
                           cls_token_id=eos, sep_token_id=eos, tie_word_embeddings=True)),
    "nomic": dict(cls=T.NomicBertModel, tok=wordpiece_tokenizer, pooling="mean", causal=False, prompts={},
                  seed=2024, post=nomic_hub_config,
                  cfg=lambda bos, eos: T.NomicBertConfig(
                      vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, max_position_embeddings=256, type_vocab_size=2,
                      layer_norm_eps=1e-12, rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
                      pad_token_id=0)),
    "gte": dict(remote="gte", tok=wordpiece_tokenizer, pooling="cls", seed=1505,
                cfg=dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=128, type_vocab_size=1, hidden_act="gelu",
                         layer_norm_eps=1e-12, rope_theta=10000.0, rope_scaling={"factor": 2.0, "type": "ntk"},
                         pack_qkv=True, pad_token_id=0)),
    "gte_mixed": dict(remote="gte", tok=wordpiece_tokenizer, pooling="mean", seed=1506, prefix="new.",
                      cfg=dict(vocab_size=512, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                               num_attention_heads=4, max_position_embeddings=128, type_vocab_size=0,
                               hidden_act="gelu", layer_norm_eps=1e-12, rope_theta=160000.0,
                               rope_scaling={"factor": 4.0, "type": "ntk", "mixed_b": 1.5}, pack_qkv=False,
                               pad_token_id=0)),
    # JinaBERT v2: 6 heads (ALiBi's slopes between powers of two), hidden 96
    "jina": dict(remote="jina", tok=wordpiece_tokenizer, pooling="mean", seed=2048,
                 cfg=dict(vocab_size=512, hidden_size=96, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=6, max_position_embeddings=8192, model_max_length=8192,
                          type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0)),
    "t5": dict(cls=T.T5EncoderModel, tok=unigram_tokenizer, pooling="mean", causal=False, prompts={}, seed=1234,
               cfg=lambda bos, eos: t5_config(eos, d_kv=16, d_ff=128, ffp="relu", tied=True)),
    "t5g": dict(cls=T.T5EncoderModel, tok=unigram_tokenizer, pooling="mean", causal=False, prompts={}, seed=4321,
                cfg=lambda bos, eos: t5_config(eos, d_kv=32, d_ff=96, ffp="gated-gelu", tied=False)),
}


def main():
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    assert only is None or only in SPECS, only
    torch.manual_seed(4321)
    have = {n: remote_of(sp) is not None for n, sp in SPECS.items() if sp.get("remote")}
    if only and SPECS[only].get("remote") and not have[only]:
        sys.exit(only + ": set %s to a folder holding the model's remote code (%s.py and its configuration)"
                 % REMOTE[SPECS[only]["remote"]][:2])
    old = json.load(open(os.path.join(OUT, "reference.json"))) if os.path.exists(os.path.join(OUT, "reference.json")) else None
    if only:
        ref = old
        shutil.rmtree(os.path.join(OUT, only), ignore_errors=True)
    else:
        keep = {n: os.path.join(OUT, n) for n, ok in have.items() if not ok and old and n in old["models"]}
        tmp = tempfile.mkdtemp()
        for n, src in keep.items():  # the remote-code folders survive a run without their reference code
            shutil.move(src, os.path.join(tmp, n))
        shutil.rmtree(OUT, ignore_errors=True)
        os.makedirs(OUT)
        ref = {"sequences": SEQS, "models": {}, "texts": {}}
        for n in keep:
            shutil.move(os.path.join(tmp, n), os.path.join(OUT, n))
            ref["models"][n], ref["texts"][n] = old["models"][n], old["texts"][n]
    for name, sp in SPECS.items():
        if only and name != only:
            continue
        if sp.get("remote"):
            if have[name]:
                gen_remote(name, sp, ref)
            continue
        if sp.get("seed"):
            torch.manual_seed(sp["seed"])
        tok, bos, eos = sp["tok"]()
        cfg = sp["cfg"](bos, eos)
        model = sp["cls"](cfg).eval()
        with torch.no_grad():  # random init is tiny; widen so layers matter, then bf16-representable
            for n, p in model.named_parameters():
                p.normal_(0.0, 0.15 if p.dim() > 1 else 0.3)
                if p.dim() == 1 and "norm" in n:
                    p.add_(1.0)
                p.copy_(p.to(torch.bfloat16).float())
        d = os.path.join(OUT, name)
        model.to(torch.bfloat16).save_pretrained(d, safe_serialization=True)
        c = json.load(open(os.path.join(d, "config.json")))
        if not sp["causal"] and name not in ("gemma3", "modernbert", "nomic", "t5", "t5g"):  # theirs say it their own way
            c["is_causal"] = False
        if sp.get("old_rope"):  # as Llama 3.2's own config.json: transformers < 5's keys
            rp = dict(c.pop("rope_parameters"))
            c["rope_theta"] = rp.pop("rope_theta")
            c["rope_scaling"] = rp
        json.dump(c, open(os.path.join(d, "config.json"), "w"), indent=2)
        if os.path.exists(os.path.join(d, "generation_config.json")):
            os.remove(os.path.join(d, "generation_config.json"))
        assert getattr(cfg, "hidden_size", getattr(cfg, "d_model", 0)) == 64  # st_files writes dimension 64
        st_files(d, sp["pooling"], sp["prompts"])
        tok.save(os.path.join(d, "tokenizer.json"))
        json.dump({"model_max_length": 4096, "tokenizer_class": "PreTrainedTokenizerFast"},
                  open(os.path.join(d, "tokenizer_config.json"), "w"), indent=2)
        # the reference reloads the saved checkpoint in fp32, as a user would
        m = sp["cls"].from_pretrained(d, dtype=torch.float32).eval()
        m.config._attn_implementation = "eager"
        pool = sp["pooling"]
        ref["models"][name] = {"pooling": pool, "causal_config": sp["causal"],
                               "causal": [embed(m, s, False, pool) for s in SEQS],
                               "bidirectional": [embed(m, s, True, pool) for s in SEQS]}
        # the explicit masks are what the model does by itself in its own mode
        with torch.no_grad():
            h = m(input_ids=torch.tensor([SEQS[3]])).last_hidden_state[0].double()
        h = h[-1] if pool == "last" else h.mean(0)
        h = (h / h.norm()).tolist()
        own = ref["models"][name]["causal" if sp["causal"] else "bidirectional"][3]
        assert max(abs(a - b) for a, b in zip(h, own)) < 1e-6, name
        texts = []
        for t in TEXTS:
            ids = tok.encode(t).ids
            texts.append({"text": t, "ids": ids, "embedding": embed(m, ids, not sp["causal"], pool)})
        ref["texts"][name] = texts
        a, b = ref["models"][name]["causal"][3], ref["models"][name]["bidirectional"][3]
        if sp.get("post"):
            sp["post"](d)
        print(name, "cos(causal, bidirectional) on seq 3:", sum(x * y for x, y in zip(a, b)),
              "files:", sorted(os.listdir(d)))
    json.dump(ref, open(os.path.join(OUT, "reference.json"), "w"))


if __name__ == "__main__":
    main()

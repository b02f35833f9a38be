#!/usr/bin/env python3
"""Write tests/fixtures/qwen3/: two tiny random-weight Qwen3 embedding
models built by Hugging Face transformers, and the embeddings transformers
computes for fixed token-id sequences (reference.json).

The configuration is Qwen3-Embedding-0.6B's (rope_theta 1e6, rms_norm_eps
1e-6, SiLU, q/k RMSNorm, no attention bias, GQA with 2 query heads per KV
head, head_dim set independently of hidden/heads) shrunk to CI size:
2 layers, hidden 64, 4 heads, 2 KV heads, head_dim 32 (so heads*head_dim =
128 != hidden, as in the real model: 16*128 = 2048 != 1024), intermediate
128, vocab 512.

  causal/   Qwen3Model saved as is (tensor names without prefix, fp32,
            tie_word_embeddings true): last-token pooling + Normalize, as
            Qwen3-Embedding ships, with its prompts.
  bidir/    Qwen3ForCausalLM with untied embeddings saved in bf16 (names
            under "model.", an lm_head to ignore), config.json saying
            "is_causal": false (pplx-embed style): mean pooling + Normalize.

Both carry a small byte-level BPE tokenizer.json trained here with Qwen2's
pre-tokenizer regex and Qwen3-Embedding's post-processor (appends
<|endoftext|>), so the prompt tests can tokenise text without the 11 MB
Qwen vocabulary.

reference.json: for each model, for each attention mode ("causal",
"bidirectional"), the pooled + L2-normalised embedding of each sequence,
each sequence run alone (batch 1, no padding) in fp32 eager attention,
with an explicit additive 4-D mask (all zeros: bidirectional; -inf above
the diagonal: causal) that replaces the model's own in every layer.  The
bidir model is reloaded from its files for this; transformers itself reads
its "is_causal": false (checked: without a mask it equals the explicit
bidirectional reference).

Needs torch + transformers + tokenizers (not in CI); the fixtures are
committed.  Run from the repository root:
  python3 tests/gen/gen_qwen3_fixtures.py

--full OUT writes the same layout with Qwen3-Embedding-0.6B's real sizes
(hidden 1024, 16 heads, 8 KV heads, head_dim 128, intermediate 3072) but 4
layers and a 4096-token vocabulary, weights scaled 1/sqrt(fan_in), and
sequences up to 700 tokens (rotary angles at large positions); not
committed (about 250 MB).  Check posy on it with
  POSY_QWEN3_FIXTURES=OUT build/test_qwen3
"""
import sys
import json
import os
import shutil

import torch
import transformers as T
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

OUT = os.path.join("tests", "fixtures", "qwen3")
FULL = "--full" in sys.argv
if FULL:
    OUT = sys.argv[sys.argv.index("--full") + 1]
SEQS = [[7], [11, 300, 5, 9, 42], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17],
        [(i * 37 + 5) % 500 for i in range(40)], [100, 100, 100, 100, 100, 100]]
PROMPTS = {"query": "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:",
           "document": ""}
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CORPUS = ["The quick brown fox jumps over the lazy dog.", "What is the capital of China?",
          "Explain gravity", "The capital of China is Beijing.",
          "Gravity is a force that attracts two bodies towards each other.",
          "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:",
          "Embedding models turn text into vectors for retrieval, clustering and deduplication."] * 4


def config(eos):
    size = (dict(vocab_size=4096, hidden_size=1024, intermediate_size=3072, num_hidden_layers=4, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, max_position_embeddings=32768) if FULL else
            dict(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, max_position_embeddings=256))
    return T.Qwen3Config(**size, rope_theta=1000000.0, rms_norm_eps=1e-6, hidden_act="silu",
                         attention_bias=False, attention_dropout=0.0, use_sliding_window=False,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=eos, pad_token_id=eos)


def tokenizer():
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(vocab_size=509, special_tokens=[], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(special)
    eos = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", pair="$A <|endoftext|> $B:1 <|endoftext|>:1",
                                                       special_tokens=[("<|endoftext|>", eos)])
    assert tok.get_vocab_size() <= 512, tok.get_vocab_size()
    return tok, eos


def st_files(d, pooling, prompts):
    json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
              open(os.path.join(d, "modules.json"), "w"), indent=2)
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(d, "2_Normalize"), exist_ok=True)
    pool = {"word_embedding_dimension": 1024 if FULL else 64, "pooling_mode_cls_token": pooling == "cls",
            "pooling_mode_mean_tokens": pooling == "mean",
            "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": pooling == "last", "include_prompt": True}
    json.dump(pool, open(os.path.join(d, "1_Pooling", "config.json"), "w"), indent=2)
    json.dump({"max_seq_length": 128, "do_lower_case": False}, open(os.path.join(d, "sentence_bert_config.json"), "w"))
    json.dump({"prompts": prompts, "default_prompt_name": None, "similarity_fn_name": "cosine"},
              open(os.path.join(d, "config_sentence_transformers.json"), "w"), indent=2)


def save_tokenizer(d, tok):
    tok.save(os.path.join(d, "tokenizer.json"))
    json.dump({"model_max_length": 131072, "eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
               "padding_side": "left", "tokenizer_class": "PreTrainedTokenizerFast"},
              open(os.path.join(d, "tokenizer_config.json"), "w"), indent=2)


@torch.no_grad()
def embed(model, ids, bidirectional, pooling):
    x = torch.tensor([ids])
    n = len(ids)
    mask = torch.zeros(1, 1, n, n)
    if not bidirectional:
        mask = torch.triu(torch.full((1, 1, n, n), float("-inf")), diagonal=1)
    kw = {"attention_mask": {"full_attention": mask}}
    h = model(input_ids=x, **kw).last_hidden_state[0].double()
    v = h[-1] if pooling == "last" else h.mean(0)
    return (v / v.norm()).tolist()


def main():
    torch.manual_seed(1234)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    tok, eos = tokenizer()
    seqs = SEQS + ([[(i * 7919 + 13) % 4000 for i in range(n)] for n in (300, 700)] if FULL else [])
    ref = {"sequences": seqs, "models": {}}

    cfg = config(eos)
    base = T.Qwen3Model(cfg).eval()
    with torch.no_grad():  # random init is tiny; widen so layers matter
        for n, p in base.named_parameters():
            std = (1.0 if "embed" in n else p.shape[-1] ** -0.5) if FULL else 0.15
            p.normal_(0.0, std if p.dim() > 1 else 0.3)
            if p.dim() == 1:
                p.add_(1.0)
    d = os.path.join(OUT, "causal")
    base.save_pretrained(d, safe_serialization=True)
    st_files(d, "last", PROMPTS)
    save_tokenizer(d, tok)

    cfg2 = config(eos)
    cfg2.tie_word_embeddings = False
    lm = T.Qwen3ForCausalLM(cfg2).eval()
    lm.model.load_state_dict(base.state_dict())
    with torch.no_grad():
        lm.lm_head.weight.normal_(0.0, 0.1)
        for p in lm.model.parameters():  # bf16-representable, so the fp32 reference sees the stored values
            p.copy_(p.to(torch.bfloat16).float())
    d2 = os.path.join(OUT, "bidir")
    lm.to(torch.bfloat16).save_pretrained(d2, safe_serialization=True)
    c = json.load(open(os.path.join(d2, "config.json")))
    c["is_causal"] = False
    json.dump(c, open(os.path.join(d2, "config.json"), "w"), indent=2)
    os.remove(os.path.join(d2, "generation_config.json"))
    st_files(d2, "mean", {"query": "query: ", "document": "document: "})
    save_tokenizer(d2, tok)
    # The reference reloads the saved checkpoint in fp32 as a user would:
    # lm.to(bfloat16) also rounded the rotary inv_freq buffer, which a fresh
    # fp32 model computes in fp32.
    bid = T.Qwen3Model.from_pretrained(d2, dtype=torch.float32).eval()
    assert bid.rotary_emb.inv_freq.dtype == torch.float32

    for name, model, pooling in (("causal", base, "last"), ("bidir", bid, "mean")):
        model.config._attn_implementation = "eager"
        ref["models"][name] = {"pooling": pooling,
                               "causal": [embed(model, s, False, pooling) for s in seqs],
                               "bidirectional": [embed(model, s, True, pooling) for s in seqs]}
    # transformers itself reads "is_causal": false: the reloaded bidir model
    # without any mask must equal the explicit bidirectional reference.
    with torch.no_grad():
        h = bid(input_ids=torch.tensor([seqs[3]])).last_hidden_state[0].double().mean(0)
    h = (h / h.norm()).tolist()
    assert max(abs(a - b) for a, b in zip(h, ref["models"]["bidir"]["bidirectional"][3])) < 1e-6
    json.dump(ref, open(os.path.join(OUT, "reference.json"), "w"))
    a, b = ref["models"]["causal"]["causal"][3], ref["models"]["causal"]["bidirectional"][3]
    print("cos(causal, bidirectional) on seq 3:", sum(x * y for x, y in zip(a, b)))
    print("eos id", eos)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Generate the tiny random-weight MPNet fixture: tests/fixtures/tiny-mpnet
(config.json, model.safetensors, tokenizer.json, sentence-transformers
modules.json / 1_Pooling / sentence_bert_config.json) and
tests/fixtures/tiny_mpnet_expected.json.

MPNet (sentence-transformers/all-mpnet-base-v2 and its kin) is BERT's layer
layout plus a relative position bias: 32 T5-style buckets of (key - query)
distance, one learned value per head, added to every attention score.  The
fixture makes that bias large (std 1) so a wrong bucket shows, and has a
sequence of 200 tokens (the maximum) so distances past 128 reach the last
buckets.  Positions start at 2 (padding index 1), pad ids inside a
sequence keep position 1, as in RoBERTa.

expected.json holds, computed with Hugging Face transformers in fp32:
  "ids"/"embeddings": fixed token ids, each sequence run alone, mean
      pooled and L2-normalised (what sentence-transformers does with
      this model's modules);
  "texts": strings, the ids transformers' MPNetTokenizer gives them, and
      their embeddings -- for the HTTP tests (tokenizer + engine);
  "buckets": MPNetEncoder.relative_position_bucket for distances -600..600.

Run from the repository root: python3 tests/gen/gen_tiny_mpnet.py
Needs torch, transformers (not needed by CI: the outputs are committed).
"""
import json
import os

import torch
from transformers import MPNetConfig, MPNetModel, MPNetTokenizer
from transformers.models.mpnet.modeling_mpnet import MPNetEncoder

OUT = "tests/fixtures"
NAME = "tiny-mpnet"

VOCAB = (["<s>", "<pad>", "</s>", "<unk>", "[UNK]", "<mask>"] + list("abcdefghijklmnopqrstuvwxyz0123456789.,!?'-")
         + ["##" + c for c in "abcdefghijklmnopqrstuvwxyz"]
         + ["the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "hello", "world", "search", "query",
            "##ing", "##ed", "##s", "embed", "text", "vector"])


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            std = 1.0 if "relative_attention_bias" in name else 0.2
            noise = torch.randn(p.shape, generator=g) * std
            p.copy_(1.0 + noise if "LayerNorm.weight" in name else noise)


def embed(model, ids):
    t = torch.tensor([ids])
    with torch.no_grad():
        h = model(input_ids=t, attention_mask=torch.ones_like(t)).last_hidden_state[0]
    return [float(x) for x in torch.nn.functional.normalize(h.mean(0), dim=0)]


def main():
    path = os.path.join(OUT, NAME)
    os.makedirs(path, exist_ok=True)
    cfg = MPNetConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=37, max_position_embeddings=202, layer_norm_eps=1e-5,
                      relative_attention_num_buckets=32, attention_probs_dropout_prob=0.0, hidden_dropout_prob=0.0)
    model = MPNetModel(cfg, add_pooling_layer=False).eval()
    randomise(model, 3)
    model.save_pretrained(path, safe_serialization=True)

    tok = MPNetTokenizer(vocab={t: i for i, t in enumerate(VOCAB)})
    tok.model_max_length = 200
    tok.save_pretrained(path)

    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
               {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]
    with open(os.path.join(path, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    os.makedirs(os.path.join(path, "1_Pooling"), exist_ok=True)
    with open(os.path.join(path, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 32, "pooling_mode_cls_token": False,
                   "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
                   "pooling_mode_mean_sqrt_len_tokens": False}, f, indent=2)
    with open(os.path.join(path, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 200, "do_lower_case": False}, f, indent=2)

    V = len(VOCAB)
    seqs = [[0, 50, 51, 2], [7], [0] + [(5 + 13 * i) % V if (5 + 13 * i) % V != 1 else 3 for i in range(198)] + [2],
            [0, 5, 1, 9, 1, 33, 2], [0, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 2]]
    texts = ["Hello, world!", "The quick brown fox jumps over the lazy dog.", "search query: embed text",
             "a", "UPPER case and digits 0123 - it's fine?", "unknown ünïcode and 𝔣𝔬𝔵 words"]
    text_ids = [tok(t)["input_ids"] for t in texts]
    r = torch.arange(-600, 601)
    expected = {
        "ids": seqs,
        "embeddings": [embed(model, s) for s in seqs],
        "texts": [{"text": t, "ids": i, "embedding": embed(model, i)} for t, i in zip(texts, text_ids)],
        "buckets": {"first": -600, "values": MPNetEncoder.relative_position_bucket(r).tolist()},
    }
    with open(os.path.join(OUT, "tiny_mpnet_expected.json"), "w") as f:
        json.dump(expected, f)
    print("wrote", path, "and tiny_mpnet_expected.json")


if __name__ == "__main__":
    main()

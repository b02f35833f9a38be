#!/usr/bin/env python3
"""Generate the tiny random-weight encoder fixtures for tests/unit/test_engine_tiny.c.

Writes tests/fixtures/tiny-bert and tests/fixtures/tiny-roberta (config.json,
model.safetensors, sentence-transformers modules.json / 1_Pooling) and
tests/fixtures/tiny_expected.json: for fixed token ids (and token types for
BERT), the pooled (and for RoBERTa L2-normalised) embeddings computed with
Hugging Face transformers in fp32, each sequence run alone (no padding).

What the fixtures exercise that all-MiniLM-L6-v2 does not: RoBERTa's
position offset (positions start at pad_token_id + 1, pad ids inside a sequence), the tanh GELU
(gelu_new), token type ids, CLS pooling, odd sizes (intermediate 37,
head_dim 8), and a sequence of exactly the maximum length.  Weights are
random with a large spread (std 0.2, LayerNorm gains 1 +- 0.2, non-zero
biases) so that a wrong position, type or activation shows in the output.

Run from the repository root: python3 tests/gen/gen_tiny_models.py
Needs torch, transformers (not needed by CI: the outputs are committed).
"""
import json
import os

import torch
from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

OUT = "tests/fixtures"


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g) * 0.2
            p.copy_(1.0 + noise if "LayerNorm.weight" in name else noise)


def write_st_files(path, pooling, normalize):
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    with open(os.path.join(path, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    os.makedirs(os.path.join(path, "1_Pooling"), exist_ok=True)
    with open(os.path.join(path, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 32, "pooling_mode_cls_token": pooling == "cls",
                   "pooling_mode_mean_tokens": pooling == "mean", "pooling_mode_max_tokens": False,
                   "pooling_mode_mean_sqrt_len_tokens": False}, f, indent=2)


def embed(model, seqs, types, pooling, normalize):
    out = []
    for i, s in enumerate(seqs):
        ids = torch.tensor([s])
        kw = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        if types is not None:
            kw["token_type_ids"] = torch.tensor([types[i]])
        with torch.no_grad():
            h = model(**kw).last_hidden_state[0]
        v = h[0] if pooling == "cls" else h.mean(0)
        if normalize:
            v = torch.nn.functional.normalize(v, dim=0)
        out.append([float(x) for x in v])
    return out


def main():
    torch.manual_seed(0)
    common = dict(vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=37, layer_norm_eps=1e-12, attention_probs_dropout_prob=0.0,
                  hidden_dropout_prob=0.0)
    bert = BertModel(BertConfig(max_position_embeddings=40, type_vocab_size=2, hidden_act="gelu",
                                **common), add_pooling_layer=False).eval()
    roberta = RobertaModel(RobertaConfig(max_position_embeddings=42, type_vocab_size=1, pad_token_id=1,
                                         hidden_act="gelu_new", **common), add_pooling_layer=False).eval()
    randomise(bert, 1)
    randomise(roberta, 2)

    seqs = [[2, 50, 51, 3], [7], [(5 + 13 * i) % 99 for i in range(40)], [4, 98, 0, 12, 33, 61, 77]]
    # RoBERTa: the BERT sequences without the pad id (1), plus one with pads
    # inside, which Hugging Face places at position pad_id without counting
    # them (create_position_ids_from_input_ids); posy must do the same.
    rseqs = [[x if x != 1 else 2 for x in s] for s in seqs] + [[0, 5, 1, 9, 1, 33, 2]]
    types = [[0, 0, 1, 1], [1], [i % 2 for i in range(40)], [0, 0, 0, 1, 1, 1, 1]]

    expected = {}
    for name, model, ids, typ, pooling, norm in [
            ("tiny-bert", bert, seqs, types, "cls", False),
            ("tiny-roberta", roberta, rseqs, None, "mean", True)]:
        path = os.path.join(OUT, name)
        model.save_pretrained(path, safe_serialization=True)
        write_st_files(path, pooling, norm)
        expected[name] = {"ids": ids, "type_ids": typ, "pooling": pooling, "normalize": norm,
                          "embeddings": embed(model, ids, typ, pooling, norm)}
    with open(os.path.join(OUT, "tiny_expected.json"), "w") as f:
        json.dump(expected, f)
    print("wrote", OUT)


if __name__ == "__main__":
    main()

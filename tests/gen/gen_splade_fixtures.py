#!/usr/bin/env python3
"""Write tests/fixtures/splade/: tiny SPLADE models (sentence-transformers
SparseEncoder: MLMTransformer + SpladePooling), random weights, each with a
tokenizer.json of tests/fixtures/tokenizers and expected.json: texts, their
token ids, and the sparse vectors sentence-transformers computes for them
(fp32, CPU) as [[index, value], ...] of the non-zero entries.
tests/python/test_splade.py checks posy's /embed_sparse against them.

  bert        BertForMaskedLM (naver/splade-v3's shape): max pooling, relu
  distil_sum  DistilBertForMaskedLM (opensearch-neural-sparse's shape):
              sum pooling, log1p_relu
  xlmr        XLMRobertaForMaskedLM: max pooling, relu, a multilingual
              Unigram vocabulary

The vocabulary bias is shifted down by 2 so that, as in a trained model,
most entries are zero.  Needs torch, transformers, tokenizers and
sentence-transformers >= 5 (not in CI; the fixtures are committed).  Run
from the repository root:
    python3 tests/gen/gen_splade_fixtures.py
"""
import json
import os
import shutil

import torch
import transformers as T
from tokenizers import Tokenizer
from sentence_transformers import SparseEncoder
from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

from gen_rerank_fixtures import spread, write_folder

OUT = os.path.join("tests", "fixtures", "splade")
TEXTS = ["What is the capital of China?", "The capital of China is Beijing.", "a",
         "Gravity is a force that attracts two bodies towards each other. " * 6, "café, naïve, 日本語 ☃"]

MODELS = {
    "bert": ("wordpiece_nfd.json", T.BertForMaskedLM, "max", "relu", "cls.predictions.bias",
             T.BertConfig(vocab_size=2500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=128, max_position_embeddings=256, type_vocab_size=2)),
    "distil_sum": ("wordpiece_nfd.json", T.DistilBertForMaskedLM, "sum", "log1p_relu", "vocab_projector.bias",
                   T.DistilBertConfig(vocab_size=2500, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                      max_position_embeddings=256)),
    "xlmr": ("unigram_xlmr.json", T.XLMRobertaForMaskedLM, "max", "relu", "lm_head.bias",
             T.XLMRobertaConfig(vocab_size=2002, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=128, max_position_embeddings=258, type_vocab_size=1,
                                pad_token_id=1, bos_token_id=0, eos_token_id=2)),
}


def main():
    torch.manual_seed(2468)
    shutil.rmtree(OUT, ignore_errors=True)
    for name, (tokf, cls, strategy, act, vbias, cfg) in MODELS.items():
        hf = os.path.join(OUT, name + "-hf")
        m = spread(cls(cfg).eval())
        with torch.no_grad():
            dict(m.named_parameters())[vbias].sub_(2.0)
        tok = write_folder(m, hf, tokf)
        enc = SparseEncoder(modules=[MLMTransformer(hf), SpladePooling(pooling_strategy=strategy,
                                                                      activation_function=act)], device="cpu")
        d = os.path.join(OUT, name)
        enc.save(d)
        shutil.rmtree(hf)
        for f in ("README.md",):
            if os.path.exists(os.path.join(d, f)):
                os.remove(os.path.join(d, f))
        with torch.no_grad():
            v = enc.encode(TEXTS, convert_to_tensor=True).to_dense()
        vecs = [[[int(i), float(x[i])] for i in torch.nonzero(x).flatten()] for x in v]
        # the ids as the saved folder's tokenizer gives them (transformers re-saves it with its own
        # normalizer settings, e.g. BERT's CJK splitting, which posy must read the same way)
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        json.dump({"texts": TEXTS, "ids": [tok.encode(t).ids for t in TEXTS], "vocab": cfg.vocab_size,
                   "vectors": vecs}, open(os.path.join(d, "expected.json"), "w"), indent=0)
        print(name, sorted(os.listdir(d)), [len(x) for x in vecs])


if __name__ == "__main__":
    main()

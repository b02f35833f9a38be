#!/usr/bin/env python3
"""Write tests/fixtures/classify/: tiny sequence classifiers of several
labels, random weights, saved by transformers, each with a tokenizer.json of
tests/fixtures/tokenizers and expected.json: texts and (text, text) pairs,
their token ids as the tokenizers package encodes them, and the logits
transformers computes for them (fp32, CPU).  tests/python/test_classify.py
checks posy's /predict and /classify against them.

  bert3      BertForSequenceClassification, three named labels (a sentiment
             model's shape: negative / neutral / positive)
  xlmr_multi XLMRobertaForSequenceClassification, four labels,
             problem_type multi_label_classification (scores are sigmoids)
  distil2    DistilBertForSequenceClassification with transformers' default
             of two labels, LABEL_0 / LABEL_1 (an NLI / toxicity model's shape)
  qwen3_rr   Qwen3ForSequenceClassification of one label (Qwen3-Reranker's
             sequence-classification conversion; a Qwen BPE without
             post-processing, so a pair is its two texts back to back)
  qwen2_cls  Qwen2ForSequenceClassification, three labels, a tokenizer that
             appends <|endoftext|>, which is also pad_token_id: transformers
             pools the token before it
  gemma3_cls Gemma3TextForSequenceClassification, causal, a 16-token
             sliding window on layer 0
  deberta3   DebertaV2ForSequenceClassification in DeBERTa v3's form (no
             absolute positions, shared keys, LayerNormed relative table,
             c2p and p2c) with 16 position buckets, so the log buckets start
             at distance 9; three NLI labels; DeBERTa v3's tokenizer form
             (unigram_deberta.json: [CLS] $A [SEP] $B [SEP])
  deberta2_rr DebertaV2ForSequenceClassification in v2's form: absolute
             positions too, its own pos_key / pos_query projections, no
             buckets and 32 relative positions (longer distances clamp),
             token types, a tanh pooler; one label (a reranker)
  deberta1   DebertaForSequenceClassification (DeBERTa v1, deberta-base's
             form: relative positions only, a 2 x 256 table, the fused
             in_proj with q_bias / v_bias), three NLI labels, GPT-2 BPE
             with [CLS] / [SEP] (bpe_deberta.json)
  deberta1_rr DeBERTa v1 with absolute positions, token types, 16 relative
             positions, a tanh pooler, pos_att_type "p2c|c2p|p2p" (v1 scales
             by 1 + 3 names); one label

Needs torch, transformers and tokenizers (not in CI; the fixtures are
committed).  Run from the repository root:
    python3 tests/gen/gen_classify_fixtures.py [NAME ...]
(names: only those folders are rewritten; each model has its own seed).
Also writes tests/fixtures/deberta_buckets.json: transformers' relative
position buckets of DeBERTa for several settings (test_eng_deberta).
"""
import json
import os
import shutil
import sys

import torch
import transformers as T
from gen_rerank_fixtures import logits_of, spread, write_folder

OUT = os.path.join("tests", "fixtures", "classify")
TEXTS = ["I loved this film, every minute of it.", "The service was slow and the food was cold.", "a",
         "It arrived on Tuesday. " * 12, "café, naïve, 日本語 ☃"]
PAIRS = [["A man is playing a guitar.", "Someone plays an instrument."],
         ["The cat sleeps on the sofa.", "A dog runs through the park at noon."]]

MODELS = {
    "bert3": ("wordpiece_nfd.json", T.BertForSequenceClassification,
              T.BertConfig(vocab_size=2500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, max_position_embeddings=256, type_vocab_size=2,
                           id2label={0: "negative", 1: "neutral", 2: "positive"},
                           label2id={"negative": 0, "neutral": 1, "positive": 2})),
    "xlmr_multi": ("unigram_xlmr.json", T.XLMRobertaForSequenceClassification,
                   T.XLMRobertaConfig(vocab_size=2002, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=128, max_position_embeddings=258, type_vocab_size=1,
                                      pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                      problem_type="multi_label_classification",
                                      id2label={0: "toxic", 1: "insult", 2: "threat", 3: "obscene"},
                                      label2id={"toxic": 0, "insult": 1, "threat": 2, "obscene": 3})),
    "distil2": ("wordpiece_nfd.json", T.DistilBertForSequenceClassification,
                T.DistilBertConfig(vocab_size=2500, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                   max_position_embeddings=256)),
    # decoders: transformers' score head on the rightmost non-pad token
    "qwen3_rr": ("bpe_qwen2.json", T.Qwen3ForSequenceClassification,
                 T.Qwen3Config(vocab_size=3000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                               num_key_value_heads=2, head_dim=16, intermediate_size=128,
                               max_position_embeddings=512, pad_token_id=0, tie_word_embeddings=True,
                               num_labels=1)),
    "qwen2_cls": ("../decoders/qwen2/tokenizer.json", T.Qwen2ForSequenceClassification,
                  T.Qwen2Config(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                                num_key_value_heads=1, intermediate_size=160, max_position_embeddings=256,
                                pad_token_id=400, eos_token_id=400, id2label={0: "a", 1: "b", 2: "c"},
                                label2id={"a": 0, "b": 1, "c": 2})),
    "gemma3_cls": ("../decoders/gemma3/tokenizer.json", T.Gemma3TextForSequenceClassification,
                   T.Gemma3TextConfig(vocab_size=512, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, head_dim=32, intermediate_size=128,
                                      max_position_embeddings=512, sliding_window=16,
                                      layer_types=["sliding_attention", "full_attention"], pad_token_id=0,
                                      bos_token_id=1, eos_token_id=2, query_pre_attn_scalar=32)),
    "deberta3": ("unigram_deberta.json", T.DebertaV2ForSequenceClassification,
                 T.DebertaV2Config(vocab_size=2000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=128, max_position_embeddings=256, type_vocab_size=0,
                                   pad_token_id=0, relative_attention=True, position_buckets=16,
                                   max_relative_positions=-1, pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm",
                                   share_att_key=True, position_biased_input=False,
                                   id2label={0: "entailment", 1: "neutral", 2: "contradiction"},
                                   label2id={"entailment": 0, "neutral": 1, "contradiction": 2})),
    "deberta2_rr": ("wordpiece_nfd.json", T.DebertaV2ForSequenceClassification,
                    T.DebertaV2Config(vocab_size=2500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=128, max_position_embeddings=256, type_vocab_size=2,
                                      relative_attention=True, max_relative_positions=32, pos_att_type="c2p|p2c",
                                      share_att_key=False, position_biased_input=True, pooler_hidden_act="tanh",
                                      num_labels=1)),
    # DeBERTa v1 (model_type deberta): deberta-base's form (relative positions only, max_relative_positions
    # -1 -> a 2 x 256 table), three NLI labels (deberta-base-mnli's shape), GPT-2 BPE with [CLS] / [SEP]
    "deberta1": ("bpe_deberta.json", T.DebertaForSequenceClassification,
                 T.DebertaConfig(vocab_size=2500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=128, max_position_embeddings=256, type_vocab_size=0,
                                 relative_attention=True, max_relative_positions=-1, pos_att_type="c2p|p2c",
                                 position_biased_input=False,
                                 id2label={0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"},
                                 label2id={"CONTRADICTION": 0, "NEUTRAL": 1, "ENTAILMENT": 2})),
    # v1 with absolute positions, token types, 16 relative positions (longer distances clamp), a tanh pooler,
    # and a third pos_att_type name that v1 computes nothing for but counts in its scale (1 + 3)
    "deberta1_rr": ("bpe_deberta.json", T.DebertaForSequenceClassification,
                    T.DebertaConfig(vocab_size=2500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=128, max_position_embeddings=256, type_vocab_size=2,
                                    relative_attention=True, max_relative_positions=16, pos_att_type="p2c|c2p|p2p",
                                    position_biased_input=True, pooler_hidden_act="tanh", num_labels=1)),
}
TYPED = ("bert3", "deberta2_rr", "deberta1_rr")   # models whose logits take the pairs' type ids


def deberta_buckets():
    """transformers' make_log_bucket_position for distances -2047..2047 under several (buckets, max)"""
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position
    rel = torch.arange(-2047, 2048)
    sets = [(256, 512), (16, 256), (16, 512), (64, 128), (32, 2048), (8, 100)]
    out = {"first": -2047, "settings": []}
    for b, m in sets:
        out["settings"].append({"buckets": b, "max": m,
                                "values": [int(x) for x in make_log_bucket_position(rel, b, m).tolist()]})
    json.dump(out, open(os.path.join("tests", "fixtures", "deberta_buckets.json"), "w"))


def main():
    names = sys.argv[1:] or list(MODELS)
    deberta_buckets()
    for k, (name, (tokf, cls, cfg)) in enumerate(MODELS.items()):
        if name not in names:
            continue
        torch.manual_seed(4321 + k)
        d = os.path.join(OUT, name)
        shutil.rmtree(d, ignore_errors=True)
        m = spread(cls(cfg).eval())
        tok = write_folder(m, d, tokf)
        encs = [tok.encode(t) for t in TEXTS] + [tok.encode(a, b) for a, b in PAIRS]
        logits = logits_of(m, encs, name in TYPED)
        labels = [m.config.id2label[i] for i in range(m.config.num_labels)]
        json.dump({"texts": TEXTS, "pairs": PAIRS, "ids": [e.ids for e in encs], "labels": labels,
                   "multi_label": m.config.problem_type == "multi_label_classification", "logits": logits},
                  open(os.path.join(d, "expected.json"), "w"), indent=1)
        print(name, sorted(os.listdir(d)), labels, [len(e.ids) for e in encs])


if __name__ == "__main__":
    main()

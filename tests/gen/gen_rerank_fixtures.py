#!/usr/bin/env python3
"""Write tests/fixtures/rerank/: tiny cross-encoder rerankers, random
weights, one label, saved by transformers, each with a tokenizer.json of
tests/fixtures/tokenizers and expected.json: a query, texts, the pairs'
token ids and type ids as the tokenizers package encodes (query, text), and
the logits transformers computes for them (fp32, CPU).
tests/python/test_rerank.py checks posy's /rerank against them.

  bert        BertForSequenceClassification (ms-marco-MiniLM style; WordPiece,
              token types 0 / 1 for query / text)
  xlmr        XLMRobertaForSequenceClassification (bge-reranker style;
              Unigram, <s> A </s></s> B </s>)
  distilbert  DistilBertForSequenceClassification (its ReLU pre-classifier)
  modernbert  ModernBertForSequenceClassification (gte-reranker-modernbert
              style: mean pooling, dense + GELU + LayerNorm head; the
              tokenizer of tests/fixtures/decoders/modernbert)
  gte         NewForSequenceClassification (gte-multilingual-reranker-base
              style: model_type "new", the hub's remote code Alibaba-NLP/
              new-impl -- not in transformers: POSY_GTE_REF names a folder
              with its modeling.py and configuration.py; without it the
              committed gte folder is kept -- NTK rotary, the NewPooler's
              dense + tanh on the first token, then the classifier; the
              XLM-R Unigram tokenizer, "new." tensor prefix)

Needs torch, transformers and tokenizers (not in CI; the fixtures are
committed).  Run from the repository root:
    python3 tests/gen/gen_rerank_fixtures.py [--only gte]
"""
import json
import os
import shutil
import sys
import tempfile

import torch
import transformers as T
from tokenizers import Tokenizer

TOK = os.path.join("tests", "fixtures", "tokenizers")
OUT = os.path.join("tests", "fixtures", "rerank")
QUERY = "What is the capital of China?"
TEXTS = ["The capital of China is Beijing.", "Gravity is a force that attracts two bodies towards each other.",
         "a", "Beijing, the capital, is a city of more than twenty million people; Shanghai is the largest. " * 2,
         "café, naïve, 日本語 ☃", "  spaces   and\ttabs\n"]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cuda"))
from e2e_common import GTE_HUB, gte_module  # noqa: E402

GTE = dict(GTE_HUB, architectures=["NewForSequenceClassification"], vocab_size=2002, hidden_size=64,
           num_hidden_layers=2, num_attention_heads=4, intermediate_size=96, max_position_embeddings=8192,
           type_vocab_size=1, hidden_act="gelu", layer_norm_eps=1e-12, rope_theta=160000.0,
           rope_scaling={"type": "ntk", "factor": 8.0}, pack_qkv=True, pad_token_id=1, num_labels=1,
           id2label={"0": "LABEL_0"}, label2id={"LABEL_0": 0})

MODELS = {
    "bert": ("wordpiece_nfd.json", T.BertForSequenceClassification,
             T.BertConfig(vocab_size=2500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=128, max_position_embeddings=256, type_vocab_size=2, num_labels=1)),
    "xlmr": ("unigram_xlmr.json", T.XLMRobertaForSequenceClassification,
             T.XLMRobertaConfig(vocab_size=2002, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=128, max_position_embeddings=258, type_vocab_size=1,
                                pad_token_id=1, bos_token_id=0, eos_token_id=2, num_labels=1)),
    "distilbert": ("wordpiece_nfd.json", T.DistilBertForSequenceClassification,
                   T.DistilBertConfig(vocab_size=2500, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                      max_position_embeddings=256, num_labels=1)),
    # gte-reranker-modernbert style: mean pooling, the head's dense with a bias, LayerNorm without one
    "modernbert": ("../decoders/modernbert/tokenizer.json", T.ModernBertForSequenceClassification,
                   T.ModernBertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                                      intermediate_size=96, max_position_embeddings=256, local_attention=32,
                                      global_attn_every_n_layers=3, pad_token_id=0, cls_token_id=400,
                                      sep_token_id=400, bos_token_id=400, eos_token_id=400, norm_bias=False,
                                      classifier_pooling="mean", classifier_bias=True, num_labels=1)),
}


def spread(m, wide=()):
    """Redraw m's weights wider than transformers' init, so that every part
    of a classification head matters: matrices N(0, 1/fan_in) (N(0, 1) for
    the names in `wide`), biases N(0, 0.1), norm scales N(1, 0.1).  Returns m."""
    with torch.no_grad():
        for n, p in m.named_parameters():
            if p.dim() > 1:
                p.normal_(0.0, 1.0 if n in wide else 1.0 / p.shape[1] ** 0.5)
            elif "bias" in n:
                p.normal_(0.0, 0.1)
            elif "norm" in n:
                p.normal_(1.0, 0.1)
    return m


def write_folder(m, d, tokf):
    """Save m as a Hugging Face folder d with tokenizer file tokf (under
    tests/fixtures/tokenizers) beside it; returns the tokenizer."""
    m.save_pretrained(d, safe_serialization=True)
    tok = Tokenizer.from_file(os.path.join(TOK, tokf))
    tok.save(os.path.join(d, "tokenizer.json"))
    return tok


def logits_of(m, encs, types):
    """transformers' logits (fp32, one list a label) for each encoding, with its type ids when `types`."""
    out = []
    with torch.no_grad():
        for e in encs:
            kw = {"input_ids": torch.tensor([e.ids])}
            if types:
                kw["token_type_ids"] = torch.tensor([e.type_ids])
            out.append([float(x) for x in m(**kw).logits[0]])
    return out


def gen_gte(mod, d):
    """The GTE reranker: built, saved (safetensors + the hub's config.json)
    and scored by new-impl's own NewForSequenceClassification."""
    from safetensors.torch import load_file, save_file
    torch.manual_seed(1505)
    kw = {k: v for k, v in GTE.items() if k not in ("architectures", "auto_map", "id2label", "label2id")}
    m = spread(mod.NewForSequenceClassification(mod.NewConfig(**kw)).eval())
    with torch.no_grad():  # its LayerNorms ("LayerNorm", "attn_ln", "mlp_ln") as spread() draws norms
        for n, p in m.named_parameters():
            if p.dim() == 1 and ("LayerNorm" in n or "_ln." in n) and n.endswith("weight"):
                p.normal_(1.0, 0.1)
    os.makedirs(d)
    save_file({k: v.contiguous() for k, v in m.state_dict().items()}, os.path.join(d, "model.safetensors"),
              metadata={"format": "pt"})
    json.dump(GTE, open(os.path.join(d, "config.json"), "w"), indent=2)
    tok = Tokenizer.from_file(os.path.join(TOK, "unigram_xlmr.json"))
    tok.save(os.path.join(d, "tokenizer.json"))
    r = mod.NewForSequenceClassification(mod.NewConfig(**kw)).eval()  # reloaded, as a user's load
    r.load_state_dict(load_file(os.path.join(d, "model.safetensors")))
    return r, tok


def write_gte(mod):
    d = os.path.join(OUT, "gte")
    shutil.rmtree(d, ignore_errors=True)
    m, tok = gen_gte(mod, d)
    encs = [tok.encode(QUERY, t) for t in TEXTS]
    logits = [x[0] for x in logits_of(m, encs, True)]
    json.dump({"query": QUERY, "texts": TEXTS, "ids": [e.ids for e in encs],
               "type_ids": [e.type_ids for e in encs], "logits": logits},
              open(os.path.join(d, "expected.json"), "w"), indent=1)
    print("gte", sorted(os.listdir(d)), [len(e.ids) for e in encs], [round(x, 4) for x in logits])


def main():
    mod = gte_module()
    if "--only" in sys.argv:  # --only gte: that folder alone, the others kept
        assert sys.argv[sys.argv.index("--only") + 1] == "gte"
        if mod is None:
            sys.exit("gte: set POSY_GTE_REF to a folder holding Alibaba-NLP/new-impl's modeling.py and configuration.py")
        write_gte(mod)
        return
    torch.manual_seed(1234)
    keep, tmp = os.path.join(OUT, "gte"), os.path.join(tempfile.mkdtemp(), "gte")
    if mod is None and os.path.isdir(keep):  # the committed GTE fixture survives a run without the reference
        shutil.move(keep, tmp)
    shutil.rmtree(OUT, ignore_errors=True)
    for name, (tokf, cls, cfg) in MODELS.items():
        d = os.path.join(OUT, name)
        m = spread(cls(cfg).eval())
        tok = write_folder(m, d, tokf)
        encs = [tok.encode(QUERY, t) for t in TEXTS]
        logits = [x[0] for x in logits_of(m, encs, name == "bert")]
        json.dump({"query": QUERY, "texts": TEXTS, "ids": [e.ids for e in encs],
                   "type_ids": [e.type_ids for e in encs], "logits": logits},
                  open(os.path.join(d, "expected.json"), "w"), indent=1)
        print(name, sorted(os.listdir(d)), [len(e.ids) for e in encs], [round(x, 4) for x in logits])
    if mod is not None:
        write_gte(mod)
    elif os.path.isdir(tmp):
        shutil.move(tmp, keep)

if __name__ == "__main__":
    main()

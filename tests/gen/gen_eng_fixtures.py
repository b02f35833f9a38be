#!/usr/bin/env python3
"""Write tests/fixtures/eng_models/: tiny random checkpoints saved by
Hugging Face transformers itself (sharded safetensors + index, as real
large models come), and expected.json with what the C weights loader must
see, computed from the PyTorch state_dict (not from the files), so the
C reader is checked against the reference writer.

Models: RobertaModel (position offset 2, fp32), XLMRobertaModel in bf16,
DistilBertModel (its own tensor names, no token types), BertForMaskedLM
(tensors under "bert." plus an MLM head to ignore).

Needs torch + transformers (not in CI); the fixtures are committed.
Run from the repository root: python3 tests/gen/gen_eng_fixtures.py
"""
import json
import os
import shutil

import torch
import transformers as T

OUT = os.path.join("tests", "fixtures", "eng_models")
H, I, V, P, L, HEADS = 16, 32, 20, 24, 2, 2


def models():
    rob = dict(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=HEADS, intermediate_size=I,
               max_position_embeddings=P + 2, type_vocab_size=1, pad_token_id=1)
    bert = dict(vocab_size=V, hidden_size=H, num_hidden_layers=L, num_attention_heads=HEADS, intermediate_size=I,
                max_position_embeddings=P)
    return [
        ("roberta", T.RobertaModel(T.RobertaConfig(**rob)), "", 2, torch.float32),
        ("xlmr_bf16", T.XLMRobertaModel(T.XLMRobertaConfig(**rob)), "", 2, torch.bfloat16),
        ("distilbert", T.DistilBertModel(T.DistilBertConfig(vocab_size=V, dim=H, n_layers=L, n_heads=HEADS,
                                                            hidden_dim=I, max_position_embeddings=P)),
         "", 0, torch.float32),
        ("bert_mlm", T.BertForMaskedLM(T.BertConfig(**bert)), "bert.", 0, torch.float32),
    ]


def stats(t):
    t = t.double().flatten()
    return {"first": t[0].item(), "last": t[-1].item(), "sum": t.sum().item(), "sumsq": (t * t).sum().item(),
            "n": t.numel()}


def expected(sd, prefix, offset, distil):
    g = lambda n: sd[prefix + n].float()
    lay = "transformer.layer.%d." if distil else "encoder.layer.%d."
    nm = (dict(q="attention.q_lin", k="attention.k_lin", v="attention.v_lin", ao="attention.out_lin",
               ln1="sa_layer_norm", up="ffn.lin1", down="ffn.lin2", ln2="output_layer_norm") if distil else
          dict(q="attention.self.query", k="attention.self.key", v="attention.self.value",
               ao="attention.output.dense", ln1="attention.output.LayerNorm", up="intermediate.dense",
               down="output.dense", ln2="output.LayerNorm"))
    e = {"word_emb": stats(g("embeddings.word_embeddings.weight")),
         "pos_emb": stats(g("embeddings.position_embeddings.weight")[offset:]),
         "emb_ln_g": stats(g("embeddings.LayerNorm.weight")), "emb_ln_b": stats(g("embeddings.LayerNorm.bias"))}
    if not distil:
        e["type_emb"] = stats(g("embeddings.token_type_embeddings.weight"))
    layers = []
    for l in range(L):
        p = lay % l
        w = lambda k, s: g(p + nm[k] + "." + s)
        layers.append({
            "qkv_w": stats(torch.cat([w("q", "weight"), w("k", "weight"), w("v", "weight")])),
            "qkv_b": stats(torch.cat([w("q", "bias"), w("k", "bias"), w("v", "bias")])),
            "qkv_part_first": [w(k, "weight")[0, 0].item() for k in "qkv"],
            "ao_w": stats(w("ao", "weight")), "ao_b": stats(w("ao", "bias")),
            "ln1_g": stats(w("ln1", "weight")), "ln1_b": stats(w("ln1", "bias")),
            "up_w": stats(w("up", "weight")), "up_b": stats(w("up", "bias")),
            "down_w": stats(w("down", "weight")), "down_b": stats(w("down", "bias")),
            "ln2_g": stats(w("ln2", "weight")), "ln2_b": stats(w("ln2", "bias")),
        })
    e["layers"] = layers
    return e


def main():
    torch.manual_seed(1234)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    allexp = {}
    for name, m, prefix, offset, dtype in models():
        m = m.to(dtype)
        d = os.path.join(OUT, name)
        m.save_pretrained(d, safe_serialization=True, max_shard_size="6KB")
        sd = m.state_dict()
        allexp[name] = {"position_offset": offset, "max_positions": P, "hidden": H, "layers": L,
                        "shards": len([f for f in os.listdir(d) if f.endswith(".safetensors")]),
                        "weights": expected(sd, prefix, offset, name == "distilbert")}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(allexp, f, indent=1)


if __name__ == "__main__":
    main()

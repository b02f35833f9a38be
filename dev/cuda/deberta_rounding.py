"""deberta_rounding: which roundings cost a DeBERTa v3 reranker its logits,
emulated on the CPU in transformers (no GPU needed).

Why: run 120 put the tensor-core DeBERTa attention at 1.10-1.16x
transformers' own bf16 error end to end (tests/cuda/e2e_rerank.py debv3),
against 0.96x for the CUDA-core form, and the suspect was P rounded to
bf16 for the P V product.  This rebuilds e2e_rerank's debv3 model and pairs
(same seeds) and runs it in fp32 with single roundings switched on: the
weights to bf16, the Q / K / V projections' outputs to bf16, and the
attention probabilities to bf16 or fp16 the way a flash kernel rounds them
(relative to the row's running maximum).  Each line prints the max and
mean |logit - fp32| over the 40 pairs.

usage: python3 dev/cuda/deberta_rounding.py      (about 4 minutes on 2 cores)
"""
import copy
import os
import sys

import numpy as np
import torch
import transformers as T
from tokenizers import Tokenizer

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "cuda"))
sys.path.insert(0, os.path.join(ROOT, "tests", "gen"))
import e2e_rerank as E  # noqa: E402
from gen_rerank_fixtures import spread  # noqa: E402

ATTN = T.models.deberta_v2.modeling_deberta_v2.DisentangledSelfAttention


class RoundP(torch.nn.Module):
    """Stands in for the attention's dropout, which sees the probabilities:
    rounds them as a flash kernel's P (exp(s - max) in [0, 1]) would be."""

    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, p):
        if self.dtype is None:
            return p
        mx = p.amax(-1, keepdim=True)
        return (p / mx).to(self.dtype).float() * mx


def logits(model, encs, qkv_bf16=False, p_dtype=None):
    model = copy.deepcopy(model)
    for mod in model.modules():
        if isinstance(mod, ATTN):
            mod.dropout = RoundP(p_dtype)
            if qkv_bf16:
                for lin in (mod.query_proj, mod.key_proj, mod.value_proj):
                    lin.register_forward_hook(lambda _m, _i, o: o.to(torch.bfloat16).float())
    with torch.no_grad():
        return np.array([model(input_ids=torch.tensor([e.ids])).logits[0].double().numpy() for e in encs]).reshape(-1)


def main():
    tokf, cls, cfg = E.MODELS["debv3"]
    rng = np.random.default_rng(7)   # e2e_rerank's seeds with debv3 alone: the same weights and pairs
    torch.manual_seed(7)
    m = spread(cls(cfg).eval(), wide=("classifier.weight", "classifier.out_proj.weight", "score.weight"))
    tok = Tokenizer.from_file(os.path.join(E.FIX, tokf))
    tok.enable_truncation(512)
    encs = [tok.encode(q, t) for q, t in E.pairs(rng)]
    ref = logits(m, encs)
    with torch.no_grad():
        m16 = copy.deepcopy(m).to(torch.bfloat16)
        r16 = np.array([m16(input_ids=torch.tensor([e.ids])).logits[0].float().double().numpy()
                        for e in encs]).reshape(-1)
    mw = copy.deepcopy(m)
    with torch.no_grad():
        for p in mw.parameters():
            p.copy_(p.to(torch.bfloat16).float())
    print(f"{len(encs)} pairs of {min(len(e.ids) for e in encs)}-{max(len(e.ids) for e in encs)} tokens, "
          f"logits in [{ref.min():.2f}, {ref.max():.2f}]")
    rows = [("transformers bf16 (CPU)", r16)]
    for label, model, kw in [("P bf16", m, dict(p_dtype=torch.bfloat16)), ("P fp16", m, dict(p_dtype=torch.float16)),
                             ("qkv bf16", m, dict(qkv_bf16=True)),
                             ("weights bf16", mw, {}),
                             ("weights + qkv bf16, P bf16", mw, dict(qkv_bf16=True, p_dtype=torch.bfloat16)),
                             ("weights + qkv bf16, P fp16", mw, dict(qkv_bf16=True, p_dtype=torch.float16))]:
        rows.append((label, logits(model, encs, **kw)))
    for label, got in rows:
        d = np.abs(got - ref)
        print(f"  {label:28s} max {d.max():.4f}  mean {d.mean():.4f}", flush=True)


if __name__ == "__main__":
    main()

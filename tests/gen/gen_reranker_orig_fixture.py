#!/usr/bin/env python3
"""Write tests/fixtures/classify/qwen3_orig: the original Qwen3-Reranker's
form -- a Qwen3ForCausalLM checkpoint (untied lm_head) that scores a
(query, document) text by its last token's LM logits of two tokens, as
vLLM serves it with hf_overrides {"classifier_from_token": [false, true],
"is_original_qwen3_reranker": true} -- with those keys written into
config.json (the architectures left as the checkpoint has them).  The
fixture's BPE (tests/fixtures/tokenizers/bpe_qwen2.json) has no "no" /
"yes" tokens, so "Ġno" and "Ġtrue" stand in for them: the mechanism is the
token strings, whatever they are.

expected.json: the (query, document) pairs (a client formats Qwen3-
Reranker's instruction template into them), their ids as a pair without a
template (each text's ids back to back, as posy's /rerank joins them for a
decoder), and transformers' fp32 LM
logits of the two tokens at each text's last position; the reranker's
logit is their difference (true - false), its score the sigmoid of it,
which is the softmax of the two.  tests/python/test_classify.py checks
posy's /rerank and /predict against them.

Needs torch, transformers and tokenizers (not in CI; the fixture is
committed).  Run from the repository root:
    python3 tests/gen/gen_reranker_orig_fixture.py
"""
import json
import os
import shutil

import torch
import transformers as T
from gen_rerank_fixtures import spread, write_folder

OUT = os.path.join("tests", "fixtures", "classify", "qwen3_orig")
TOKENS = ["Ġno", "Ġtrue"]   # [false, true], as Qwen3-Reranker's ["no", "yes"]
PAIRS = [["what is the capital of china?", "The capital of China is Beijing."],
         ["what is the capital of china?", "Gravity is a force that attracts two bodies."],
         ["a", "a"], ["how do plants grow", "Plants grow by photosynthesis, " * 10]]


def main():
    torch.manual_seed(97531)
    shutil.rmtree(OUT, ignore_errors=True)
    cfg = T.Qwen3Config(vocab_size=3000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, head_dim=16, intermediate_size=128, max_position_embeddings=512,
                        tie_word_embeddings=False)
    m = spread(T.Qwen3ForCausalLM(cfg).eval(), wide=("lm_head.weight",))
    tok = write_folder(m, OUT, "bpe_qwen2.json")
    c = json.load(open(os.path.join(OUT, "config.json")))
    c.update(classifier_from_token=TOKENS, is_original_qwen3_reranker=True)
    json.dump(c, open(os.path.join(OUT, "config.json"), "w"), indent=1)
    ids = [tok.token_to_id(t) for t in TOKENS]
    encs = [tok.encode(q, d) for q, d in PAIRS]   # a pair without a template: each text's ids, back to back
    logits = []
    with torch.no_grad():
        for e in encs:
            last = m(input_ids=torch.tensor([e.ids])).logits[0, -1]
            logits.append([float(last[i]) for i in ids])
    json.dump({"pairs": PAIRS, "tokens": TOKENS, "token_ids": ids, "ids": [e.ids for e in encs],
               "token_logits": logits}, open(os.path.join(OUT, "expected.json"), "w"), indent=1)
    print(sorted(os.listdir(OUT)), ids, [len(e.ids) for e in encs], logits)


if __name__ == "__main__":
    main()

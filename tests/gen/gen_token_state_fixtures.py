#!/usr/bin/env python3
"""Write tests/fixtures/token_states/NAME.npz: every token's last hidden
state as sentence-transformers gives it (encode(output_value=
"token_embeddings"), one text at a time so that no padding is trimmed),
for TEI's /embed_all.  tests/python/test_embed_all.py checks posy's
/embed_all against them.

  minilm     models/all-MiniLM-L6-v2 (scripts/fetch-model.sh): BERT, mean
             pooling, normalized (the states are not)
  deberta_st tests/fixtures/deberta_st: DeBERTa v3's disentangled attention
  t5_st      tests/fixtures/t5_st: a T5 encoder with a Dense module, which
             changes the sentence vector only, not the token states
  qwen3      tests/fixtures/qwen3/causal: a decoder, last-token pooling; the
             states are after the final RMSNorm
  modernbert tests/fixtures/decoders/modernbert: ModernBERT's GLU encoder
  nomic      tests/fixtures/decoders/nomic: NomicBERT's post-LayerNorm
             layers (loaded from a copy whose config.json is its
             config_transformers.json: transformers does not read Nomic's keys)

Each file: texts (str), ids (all texts' ids back to back), cu (offsets),
states (float32 [tokens, hidden]).
Needs torch + sentence-transformers (not in CI; the fixtures are committed).
Run from the repository root:  python3 tests/gen/gen_token_state_fixtures.py
"""
import os
import shutil
import tempfile

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

TEXTS = ["What is the capital of China?", "a", "Embedding models turn text into vectors, café ☃."]
MODELS = {"minilm": "models/all-MiniLM-L6-v2", "deberta_st": "tests/fixtures/deberta_st",
          "t5_st": "tests/fixtures/t5_st", "qwen3": "tests/fixtures/qwen3/causal",
          "modernbert": "tests/fixtures/decoders/modernbert", "nomic": "tests/fixtures/decoders/nomic"}


def loadable(path, tmp):
    """path, or for the nomic fixture a copy with transformers' config.json"""
    if not os.path.exists(os.path.join(path, "config_transformers.json")):
        return path
    d = os.path.join(tmp, os.path.basename(path))
    shutil.copytree(path, d)
    shutil.copy(os.path.join(path, "config_transformers.json"), os.path.join(d, "config.json"))
    return d


def main():
    torch.manual_seed(0)
    out = os.path.join("tests", "fixtures", "token_states")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    for name, path in MODELS.items():
        m = SentenceTransformer(loadable(path, tmp), device="cpu", model_kwargs={"dtype": torch.float32})
        m.eval()
        if m.tokenizer.pad_token is None:  # one text at a time: never padded, but the tokenizer insists
            m.tokenizer.pad_token = m.tokenizer.eos_token or m.tokenizer.sep_token or m.tokenizer.convert_ids_to_tokens(0)
        ids, cu, states = [], [0], []
        for t in TEXTS:
            prompt = m.prompts.get(m.default_prompt_name) if m.default_prompt_name else None
            feats = m.tokenize([(prompt or "") + t])
            ids.extend(int(i) for i in feats["input_ids"][0])
            cu.append(len(ids))
            with torch.no_grad():
                s = m.encode([t], output_value="token_embeddings", convert_to_numpy=False)[0]
            assert s.shape[0] == cu[-1] - cu[-2], (name, t, s.shape)
            states.append(s.float().numpy())
        np.savez_compressed(os.path.join(out, name + ".npz"), texts=np.array(TEXTS), ids=np.array(ids, np.int32),
                            cu=np.array(cu, np.int32), states=np.concatenate(states).astype(np.float32))
        print(name, len(ids), "tokens of", states[0].shape[1])
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Write tests/fixtures/prompts/prompts.json: what sentence-transformers
does with prompts, for tests/python/test_prompts.py to hold posy to.

For each model (the default all-MiniLM-L6-v2 with a
config_sentence_transformers.json written here into a temporary copy, and
the tiny Qwen3 fixture of tests/fixtures/qwen3/causal with its own
prompts, and its bidirectional mean-pooling sibling bidir/), for each case (no prompt_name: the model's default_prompt_name
applies; each named prompt) it records
  ids         the token ids sentence-transformers feeds the model
              (SentenceTransformer.preprocess(texts, prompt=...))
  embeddings  SentenceTransformer.encode(texts, prompt_name=...)
Needs sentence-transformers (not in CI); the fixture is committed.
Run from the repository root: python3 tests/gen/gen_prompt_fixtures.py
"""
import json
import os
import shutil
import tempfile

import torch

from sentence_transformers import SentenceTransformer

OUT = os.path.join("tests", "fixtures", "prompts")
TEXTS = ["What is the capital of China?", "  leading spaces and Trailing  ", "naïve café — ünïcode", "a"]
MINILM_ST = {"prompts": {"query": "query: ", "passage": "passage: ", "instruct": "Instruct: find documents\nQuery: ",
                         "empty": ""}, "default_prompt_name": "query", "similarity_fn_name": "cosine"}


def record(model_dir, names):
    # fp32 even for the bf16 checkpoint (sentence-transformers would follow its "dtype")
    m = SentenceTransformer(model_dir, device="cpu", model_kwargs={"dtype": torch.float32})
    cases = []
    for name in names:
        prompt = m.prompts[name] if name else m.prompts.get(m.default_prompt_name or "", "")
        ids = [m.preprocess([t], prompt=prompt)["input_ids"][0].tolist() for t in TEXTS]
        emb = [[float("%.8g" % x) for x in row] for row in m.encode(TEXTS, prompt_name=name, convert_to_numpy=True)]
        cases.append({"prompt_name": name, "prompt": prompt, "ids": ids, "embeddings": emb})
    return cases


def main():
    os.makedirs(OUT, exist_ok=True)
    res = {"texts": TEXTS, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join("models", "all-MiniLM-L6-v2")
        d = os.path.join(tmp, "minilm")
        shutil.copytree(src, d, symlinks=False)
        json.dump(MINILM_ST, open(os.path.join(d, "config_sentence_transformers.json"), "w"))
        res["models"]["minilm"] = {"st_config": MINILM_ST,
                                   "cases": record(d, [None, "query", "passage", "instruct", "empty"])}
    res["models"]["qwen3_causal"] = {"model_dir": "tests/fixtures/qwen3/causal",
                                     "cases": record("tests/fixtures/qwen3/causal", [None, "query", "document"])}
    # transformers reads the bidir model's "is_causal": false itself, so
    # sentence-transformers embeds it bidirectionally with mean pooling.
    res["models"]["qwen3_bidir"] = {"model_dir": "tests/fixtures/qwen3/bidir",
                                    "cases": record("tests/fixtures/qwen3/bidir", [None, "query", "document"])}
    json.dump(res, open(os.path.join(OUT, "prompts.json"), "w"))


if __name__ == "__main__":
    main()

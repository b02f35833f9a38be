"""Reference vectors for Pooling include_prompt false (tests/python/test_include_prompt.py).

Builds a temp copy of all-MiniLM-L6-v2 whose 1_Pooling/config.json sets
"include_prompt": false and whose config_sentence_transformers.json names
two prompts, encodes TEXTS with sentence-transformers for each prompt (and
without one), and writes tests/fixtures/include_prompt/expected.json with
the configs the test recreates.  Needs torch + sentence-transformers (not
CI); run from the repository root:
    python3 tests/gen/gen_include_prompt_fixtures.py [models/all-MiniLM-L6-v2]
"""
import json
import os
import shutil
import sys
import tempfile

from sentence_transformers import SentenceTransformer

TEXTS = ["The quick brown fox jumps over the lazy dog.", "a", "What is the capital of France?",
         "Embeddings map text to vectors; pooling averages the token states."]
PROMPTS = {"query": "query: ", "instruct": "Represent this sentence for searching relevant passages: "}
ST_CONFIG = {"prompts": PROMPTS, "default_prompt_name": None}


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "models/all-MiniLM-L6-v2"
    pooling = json.load(open(os.path.join(src, "1_Pooling", "config.json")))
    pooling["include_prompt"] = False
    out = {"texts": TEXTS, "st_config": ST_CONFIG, "pooling": pooling, "cases": []}
    with tempfile.TemporaryDirectory() as d:
        for name in os.listdir(src):
            if name not in ("1_Pooling", "config_sentence_transformers.json"):
                p = os.path.join(src, name)
                (shutil.copytree if os.path.isdir(p) else shutil.copy)(p, os.path.join(d, name))
        os.makedirs(os.path.join(d, "1_Pooling"))
        json.dump(pooling, open(os.path.join(d, "1_Pooling", "config.json"), "w"))
        json.dump(ST_CONFIG, open(os.path.join(d, "config_sentence_transformers.json"), "w"))
        m = SentenceTransformer(d, device="cpu")
        assert m[1].include_prompt is False
        for pname in (None, "query", "instruct"):
            emb = m.encode(TEXTS, prompt_name=pname, convert_to_numpy=True)
            # the same prompt with the prompt pooled, to show the test can tell them apart
            m[1].include_prompt = True
            pooled_prompt = m.encode(TEXTS, prompt_name=pname, convert_to_numpy=True)
            m[1].include_prompt = False
            out["cases"].append({"prompt_name": pname,
                                 "prompt_length": m[0]._get_prompt_length(PROMPTS[pname]) if pname else 0,
                                 "embeddings": emb.round(7).tolist(),
                                 "embeddings_prompt_pooled": pooled_prompt.round(7).tolist()})
    dst = os.path.join("tests", "fixtures", "include_prompt", "expected.json")
    with open(dst, "w") as f:
        json.dump(out, f)
    print("wrote", dst)


if __name__ == "__main__":
    main()

"""SPLADE sparse encoders on the GPU against sentence-transformers (run on
a GPU machine; the CI checks the same models' CPU path in
tests/python/test_splade.py).

Two random-weight SparseEncoders, GPU-sized, written as sentence-
transformers folders (MLMTransformer + SpladePooling):
  bert    BertForMaskedLM of all-MiniLM-L6's width (head size 32), max
          pooling, relu; the WordPiece fixture tokenizer (2500 tokens: the
          vocabulary projection padded to 2560 rows on the GPU)
  distil  DistilBertForMaskedLM of distilbert-base's width, sum pooling,
          log1p_relu (opensearch's variant)
The vocabulary bias is shifted down by 2 so that most entries are zero.
40 texts of 1 to ~500 tokens go through api_embed (the engine's public
API) on the device given, one at a time and packed into 4096-token
batches; passes when every vector's cosine with sentence-transformers'
fp32 one is >= 0.999 on the GPU (0.99999 with --device cpu) and the
non-zero sets agree on at least 95% of the reference's entries above
1% of its largest value.

usage: e2e_splade.py BUILD_DIR WORK_DIR [--device cuda|cpu]
"""
import os
import sys

import numpy as np
import torch
import transformers as T
from tokenizers import Tokenizer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gen"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import api_outputs, device_args, write_seqs  # noqa: E402
from gen_rerank_fixtures import spread, write_folder  # noqa: E402  (tests/gen: the fixtures' weight draw)

WORDS = ("capital city country river mountain people language history science music art war peace "
         "computer network model vector search query answer question document paris beijing").split()
MODELS = {
    "bert": (T.BertForMaskedLM, "max", "relu", "cls.predictions.bias",
             T.BertConfig(vocab_size=2500, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                          intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2)),
    "distil": (T.DistilBertForMaskedLM, "sum", "log1p_relu", "vocab_projector.bias",
               T.DistilBertConfig(vocab_size=2500, dim=768, n_layers=6, n_heads=12, hidden_dim=3072,
                                  max_position_embeddings=512)),
}


def main():
    build, work, device = device_args(sys.argv[1:])
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling
    rng = np.random.default_rng(11)
    torch.manual_seed(11)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 400 if i % 5 == 0 else 40)))) for i in range(40)]
    ok = True
    for name, (cls, strategy, act, vbias, cfg) in MODELS.items():
        hf, d = os.path.join(work, name + "-hf"), os.path.join(work, "splade-" + name)
        m = spread(cls(cfg).eval())
        with torch.no_grad():
            dict(m.named_parameters())[vbias].sub_(2.0)
        write_folder(m, hf, "wordpiece_nfd.json")
        enc = SparseEncoder(modules=[MLMTransformer(hf, max_seq_length=512),
                                     SpladePooling(pooling_strategy=strategy, activation_function=act)], device="cpu")
        enc.save(d)
        with torch.no_grad():
            ref = enc.encode(texts, convert_to_tensor=True).to_dense().double().numpy()
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
        tok.enable_truncation(512)
        ids = [tok.encode(t).ids for t in texts]
        sp = os.path.join(work, name + "-seqs.bin")
        write_seqs(sp, ids)
        for label, got in api_outputs(build, d, sp, work, name, device, ref.size):
            if got is None:
                ok = False
                continue
            got = got.reshape(ref.shape)
            cos = (got * ref).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(ref, axis=1)
            strong = ref > 0.01 * ref.max(axis=1, keepdims=True)
            kept = float((got[strong] > 0).mean())
            bar = 0.999 if device == "cuda" else 0.99999
            print(f"{name} {label} ({device}): min cosine vs sentence-transformers {cos.min():.6f} (bar {bar}), "
                  f"strong entries kept {kept:.4f}, non-zero {int((got > 0).sum())} / {int((ref > 0).sum())}, "
                  f"{len(ids)} texts of {min(map(len, ids))}-{max(map(len, ids))} tokens, {strategy} {act}")
            ok &= cos.min() >= bar and kept >= 0.95
    print("e2e_splade:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Cross-encoder rerankers and a classifier on the GPU against
transformers (run on a GPU machine; the CI checks the same heads on the
CPU in tests/python/test_rerank.py and test_classify.py).

Random-weight rerankers of one label and a classifier, GPU-sized (head size 32 / 64):
  bert   BertForSequenceClassification, all-MiniLM-L6's shape (the
         ms-marco-MiniLM-L-6-v2 family), WordPiece fixture tokenizer
  xlmr   XLMRobertaForSequenceClassification, xlm-roberta-base's shape
         with a small vocabulary (the bge-reranker-base family), Unigram
         fixture tokenizer
  bert5  BertForSequenceClassification of five labels, BERT-base's width,
         4 layers: a classifier, every label's logit checked
  qwen3rr Qwen3ForSequenceClassification of one label (Qwen3-Reranker's
         conversion), Qwen3-0.6B's width, 4 layers: the decoders' engine,
         last-token pooling, the score head
  modernbert  ModernBertForSequenceClassification, ModernBERT-base's width,
         6 layers, mean pooling, the dense + GELU + LayerNorm head
         (gte-reranker-modernbert-base), the ModernBERT fixture tokenizer
  debv3  DebertaV2ForSequenceClassification in DeBERTa v3's form at
         deberta-v3-base's width (mxbai-rerank-base-v1), 6 layers: 256
         position buckets, shared position keys, LayerNormed relative table,
         c2p and p2c, the ContextPooler head; DeBERTa v3's tokenizer form
  debv1  DebertaForSequenceClassification (DeBERTa v1: deberta-base's width
         and form, 6 layers, no absolute positions, a 2 x 512 relative
         table, the fused in_proj), GPT-2 BPE with [CLS] / [SEP]
  debv2  DebertaV2ForSequenceClassification in v2's form, three labels,
         head size 32: absolute positions too, its own position
         projections, 64 relative positions (longer distances clamp)
are written as Hugging Face folders; 40 (query, text) pairs of 5 to ~500
tokens go through the pair template (the tokenizers package), and
api_embed (the engine's public API: CLS pooling, then the head as the
front's two Dense layers) scores them on the device given.  Token type ids:
api_embed sends none, so the reference runs BERT with type ids 0 too.
The last projection is drawn wide so that the scores spread (logits of
about 5 to 15 in size); passes when every logit is within 2% of the
largest one's size of transformers' fp32 -- or, on the GPU, when its
error is of the order of transformers' own bf16 run of the same model:
the mean and the largest error each within 1.25x of that run's (DeBERTa's three-term
scores put torch's bf16 at 2.35-3.12% of the largest logit: a bar that
transformers itself fails in bf16 would measure the format, not posy) --
(1e-5 of it with --device cpu, fp32) and the two orders
agree (Spearman >= 0.95 on the GPU, 0.999 in fp32).

usage: e2e_rerank.py BUILD_DIR WORK_DIR [--device cuda|cpu] [MODEL ...]
environment: E2E_RERANK_PAIRS (default 40), E2E_RERANK_SEED (default 7),
E2E_RERANK_VARIANTS: engine settings to run against the same reference
(computed once), space-separated LABEL or LABEL:VAR=VALUE[,VAR=VALUE],
e.g. "tc cc:POSY_CUDA_DEBERTA_TC=0"; every variant is checked and printed
with its label (default: one run with this process's environment)
"""
import copy
import json
import os
import sys

import numpy as np
import torch
import transformers as T
from tokenizers import Tokenizer

FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "tokenizers")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "gen"))
from gen_rerank_fixtures import spread  # noqa: E402  (tests/gen: the fixtures' weight draw)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from e2e_common import api_outputs, device_args, write_seqs  # noqa: E402
WORDS = ("capital city country river mountain people language history science music art war peace "
         "computer network model vector search query answer question document paris beijing").split()
MODELS = {
    "bert": ("wordpiece_nfd.json", T.BertForSequenceClassification,
             T.BertConfig(vocab_size=2500, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                          intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2, num_labels=1)),
    "xlmr": ("unigram_xlmr.json", T.XLMRobertaForSequenceClassification,
             T.XLMRobertaConfig(vocab_size=2002, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                                intermediate_size=3072, max_position_embeddings=514, type_vocab_size=1,
                                pad_token_id=1, bos_token_id=0, eos_token_id=2, num_labels=1)),
    # a classifier: the same head with five labels (a sentiment / topic model's shape), all logits checked
    "bert5": ("wordpiece_nfd.json", T.BertForSequenceClassification,
              T.BertConfig(vocab_size=2500, hidden_size=768, num_hidden_layers=4, num_attention_heads=12,
                           intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2, num_labels=5)),
    # a decoder reranker: Qwen3-Reranker's sequence-classification conversion at Qwen3-0.6B's width, 4 layers
    # (score on the last token; the pair is the two texts back to back, the Qwen BPE having no template)
    "qwen3rr": ("bpe_qwen2.json", T.Qwen3ForSequenceClassification,
                T.Qwen3Config(vocab_size=3000, hidden_size=1024, num_hidden_layers=4, num_attention_heads=16,
                              num_key_value_heads=8, head_dim=128, intermediate_size=3072,
                              max_position_embeddings=1024, pad_token_id=0, tie_word_embeddings=True,
                              num_labels=1)),
    "modernbert": ("../decoders/modernbert/tokenizer.json", T.ModernBertForSequenceClassification,
                   T.ModernBertConfig(vocab_size=512, hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
                                      intermediate_size=1152, max_position_embeddings=1024, local_attention=128,
                                      global_attn_every_n_layers=3, pad_token_id=0, cls_token_id=400,
                                      sep_token_id=400, bos_token_id=400, eos_token_id=400, norm_bias=False,
                                      classifier_pooling="mean", classifier_bias=True, num_labels=1)),
    "debv3": ("unigram_deberta.json", T.DebertaV2ForSequenceClassification,
              T.DebertaV2Config(vocab_size=2000, hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
                                intermediate_size=3072, max_position_embeddings=512, type_vocab_size=0,
                                relative_attention=True, position_buckets=256, max_relative_positions=-1,
                                pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True,
                                position_biased_input=False, pad_token_id=0, num_labels=1)),
    "debv2": ("unigram_deberta.json", T.DebertaV2ForSequenceClassification,
              T.DebertaV2Config(vocab_size=2000, hidden_size=384, num_hidden_layers=4, num_attention_heads=12,
                                intermediate_size=1536, max_position_embeddings=512, type_vocab_size=0,
                                relative_attention=True, max_relative_positions=64, pos_att_type="c2p|p2c",
                                share_att_key=False, position_biased_input=True, pad_token_id=0,
                                pooler_hidden_act="tanh", num_labels=3)),
    # DeBERTa v1 (model_type deberta) at deberta-base's width, 6 layers: the fused in_proj read into v2's form
    "debv1": ("bpe_deberta.json", T.DebertaForSequenceClassification,
              T.DebertaConfig(vocab_size=2500, hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
                              intermediate_size=3072, max_position_embeddings=512, type_vocab_size=0,
                              relative_attention=True, max_relative_positions=-1, pos_att_type="c2p|p2c",
                              position_biased_input=False, num_labels=1)),
}


def pairs(rng, n=40):
    out = []
    for i in range(n):
        q = " ".join(rng.choice(WORDS, size=rng.integers(2, 12)))
        t = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 400 if i % 5 == 0 else 60))))
        out.append((q, t))
    return out


def variants(spec):
    """E2E_RERANK_VARIANTS -> [(label, {VAR: VALUE})]; empty spec: one unlabelled run."""
    out = []
    for item in spec.split():
        label, _, kv = item.partition(":")
        env = {}
        for pair in filter(None, kv.split(",")):
            k, eq, v = pair.partition("=")
            if not k or not eq:
                sys.exit(f"e2e_rerank: E2E_RERANK_VARIANTS item '{item}': expected LABEL:VAR=VALUE[,VAR=VALUE]")
            env[k] = v
        out.append((label, env))
    return out or [("", {})]


def main():
    args = sys.argv[1:]
    names = [a for a in args[2:] if a in MODELS] or list(MODELS)
    build, work, device = device_args([a for a in args if a not in MODELS])
    seed = int(os.environ.get("E2E_RERANK_SEED", "7"))   # another draw of weights and pairs
    n_pairs = int(os.environ.get("E2E_RERANK_PAIRS", "40"))   # more pairs: steadier mean / max / Spearman
    runs = variants(os.environ.get("E2E_RERANK_VARIANTS", ""))
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    ok = True
    for name, (tokf, cls, cfg) in MODELS.items():
        if name not in names:
            continue
        d = os.path.join(work, "rerank-" + name)
        # the last projection wider, so that the scores spread (std ~10)
        m = spread(cls(cfg).eval(), wide=("classifier.weight", "classifier.out_proj.weight", "score.weight"))
        m.save_pretrained(d, safe_serialization=True)
        tok = Tokenizer.from_file(os.path.join(FIX, tokf))
        tok.save(os.path.join(d, "tokenizer.json"))
        tok.enable_truncation(min(512, cfg.max_position_embeddings - (2 if name == "xlmr" else 0)))
        encs = [tok.encode(q, t) for q, t in pairs(rng, n_pairs)]
        ref, ref16 = [], []
        m16 = copy.deepcopy(m).to(torch.bfloat16) if device == "cuda" else None   # transformers' own bf16 error
        with torch.no_grad():
            for e in encs:
                ids = torch.tensor([e.ids])
                kw = {"token_type_ids": torch.zeros_like(ids)} if name.startswith("bert") else {}
                ref.append(m(input_ids=ids, **kw).logits[0].double().numpy())
                if m16 is not None:
                    ref16.append(m16(input_ids=ids, **kw).logits[0].float().double().numpy())
        ref = np.array(ref).reshape(-1)   # n pairs x num_labels logits, row-major as api_embed writes them
        err16 = float(np.abs(np.array(ref16).reshape(-1) - ref).max()) if ref16 else 0.0
        mean16 = float(np.abs(np.array(ref16).reshape(-1) - ref).mean()) if ref16 else 0.0
        sp = os.path.join(work, name + "-pairs.bin")
        write_seqs(sp, [e.ids for e in encs])
        rank = lambda v: np.argsort(np.argsort(v))
        sp16 = np.corrcoef(rank(np.array(ref16).reshape(-1)), rank(ref))[0, 1] if ref16 else 1.0
        x = (lambda a, b: f", x{a / b:.2f}" if b > 0 else "")   # the ratio to transformers' bf16 (GPU only)
        for vlabel, venv in runs:   # each engine setting against the same reference
            for label, got in api_outputs(build, d, sp, work, name, device, ref.size, env=venv):   # pairs x labels logits
                label = f"{vlabel} {label}" if vlabel else label
                if got is None:
                    ok = False
                    continue
                err = np.abs(got - ref).max()
                spearman = np.corrcoef(rank(got), rank(ref))[0, 1]
                mean = float(np.abs(got - ref).mean())
                bar = (0.02 if device == "cuda" else 1e-5) * max(1.0, np.abs(ref).max())
                # or of the order of transformers' own bf16 run's error (GPU only; err16 = mean16 = 0 on the CPU):
                # mean and max each within 1.25x of it.  Over 40 pairs both move by 5-8% between two batch mixes of
                # the same kernels (run 121: DeBERTa v3's mean 1.05x / 1.14x transformers' with the tensor-core
                # attention, 1.08x / 1.10x with the CUDA-core one), so a tighter bar would measure the draw
                near16 = err <= 1.25 * err16 and mean <= 1.25 * mean16
                print(f"{name} {label} ({device}): max |logit - transformers| {err:.2e} (bar {bar:g}; transformers "
                      f"bf16 {err16:.2e}{x(err, err16)}), mean {mean:.2e} (transformers bf16 {mean16:.2e}"
                      f"{x(mean, mean16)}), Spearman "
                      f"{spearman:.5f} (transformers bf16 {sp16:.5f}), logits in [{ref.min():.3f}, {ref.max():.3f}], {len(encs)} pairs x {cfg.num_labels} labels of "
                      f"{min(len(e.ids) for e in encs)}-{max(len(e.ids) for e in encs)} tokens")
                ok &= (err <= bar or near16) and spearman >= (0.95 if device == "cuda" else 0.999)
    print("e2e_rerank:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

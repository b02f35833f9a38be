"""What the GPU end-to-end scripts (e2e_*.py) share: their arguments
(BUILD_DIR WORK_DIR [--device cuda|cpu]), the sequence file api_embed and
gpu_backend_e2e read, the row-wise cosine, and the check of
gpu_backend_e2e's output files against the transformers reference -- one
line per file, in the format the run scripts grep ("<label> <suffix> vs
transformers fp32: min cosine ..."), and whether every file meets the
bar.  No torch import, so it can be tested anywhere."""
import os
import struct
import subprocess
import sys

import numpy as np


def device_args(argv):
    """BUILD_DIR WORK_DIR [--device cuda|cpu] -> (build, work, device); WORK_DIR is made."""
    args = list(argv)
    device = "cuda"
    if "--device" in args:
        i = args.index("--device")
        device = args[i + 1]
        del args[i:i + 2]
    os.makedirs(args[1], exist_ok=True)
    return args[0], args[1], device


def write_seqs(path, seqs):
    """The sequences file: int32 count, the lengths, then every sequence's ids (lists or arrays)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<i", len(seqs)))
        f.write(np.array([len(s) for s in seqs], dtype=np.int32).tobytes())
        for s in seqs:
            f.write(np.asarray(s, dtype=np.int32).tobytes())


def api_outputs(build, model, seqs_path, work, name, device, size, log=print, env=None):
    """api_embed on the sequences file, one sequence a batch ("single") and in 4096-token batches
    ("mix4096"): yields (label, the output as float64 of `size` values), or (label, None) after
    logging why there is none (api_embed failed, or wrote another size).  env: variables set for
    api_embed on top of this process's (an engine switch to compare against the same reference)."""
    run_env = dict(os.environ, **env) if env else None
    for label, budget in (("single", "1"), ("mix4096", "4096")):
        out = os.path.join(work, f"{name}-{label}.bin")
        r = subprocess.run([os.path.join(build, "api_embed"), model, seqs_path, out, device, budget], env=run_env)
        if r.returncode:
            log(f"{name} {label}: api_embed failed (exit {r.returncode})")
            yield label, None
            continue
        got = np.fromfile(out, dtype=np.float32).astype(np.float64)
        if got.size != size:
            log(f"{name} {label}: {got.size} values, expected {size}")
            yield label, None
            continue
        yield label, got


def api_embed_best(build, model, seqs, work, runs=3, budget="16384"):
    """The benches' posy side: api_embed on cuda over `seqs` (lists of ids), `runs` times, each a fresh
    process; returns (the best of its own "embedded in" seconds, the last output as float64), or None after
    printing api_embed's error."""
    import re
    sp, out = os.path.join(work, "seqs.bin"), os.path.join(work, "out.bin")
    write_seqs(sp, seqs)
    best = None
    for _ in range(runs):
        r = subprocess.run([os.path.join(build, "api_embed"), model, sp, out, "cuda", budget], capture_output=True,
                           text=True)
        if r.returncode:
            print(r.stderr[-2000:])
            return None
        dt = float(re.search(r"embedded in ([0-9.]+) s", r.stderr + r.stdout).group(1))
        best = dt if best is None or dt < best else best
    return best, np.fromfile(out, dtype=np.float32).astype(np.float64)


def cosines(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-30)


def check_outputs(label, prefix, suffixes, hidden, ref, seqs, bar=0.999, log=print):
    """Compare <prefix>.<suffix>.bin (float32 [n, hidden]) with ref for each
    suffix; a missing or short file fails.  Returns True when all pass."""
    ok = True
    for suf in suffixes:
        p = f"{prefix}.{suf}.bin"
        if not os.path.exists(p):
            log(f"{label} {suf}: missing output")
            ok = False
            continue
        got = np.fromfile(p, dtype=np.float32)
        if got.size != ref.size:
            log(f"{label} {suf}: {got.size} values, expected {ref.size}")
            ok = False
            continue
        got = got.reshape(-1, hidden)
        c = cosines(got, ref)
        worst = int(np.argmin(c))
        log(f"{label} {suf:9s} vs transformers fp32: min cosine {c.min():.6f} (len {len(seqs[worst])}), "
            f"mean {c.mean():.6f}, max abs err {np.abs(got - ref).max():.2e}")
        ok &= bool(c.min() >= bar)
    return ok


def nomic_hub_keys(c):
    """config.json as nomic-embed-text-v1.5 ships it for Nomic's own
    modeling code (n_embd, n_head, rotary_emb_base, ...), from the dict
    transformers' NomicBertConfig saves: what posy reads from a download.
    tests/gen/gen_decoder_fixtures.py (the CPU fixture) and e2e_decoders.py
    (the GPU check) both write it."""
    return {"activation_function": "swiglu", "architectures": ["NomicBertModel"], "attn_pdrop": 0.0,
            "auto_map": {"AutoConfig": "nomic-ai/nomic-bert-2048--configuration_hf_nomic_bert.NomicBertConfig",
                         "AutoModel": "nomic-ai/nomic-bert-2048--modeling_hf_nomic_bert.NomicBertModel"},
            "bos_token_id": None, "causal": False, "dense_seq_output": True, "embd_pdrop": 0.0,
            "eos_token_id": None, "fused_bias_fc": True, "fused_dropout_add_ln": True, "initializer_range": 0.02,
            "layer_norm_epsilon": c["layer_norm_eps"], "max_trained_positions": 2048, "mlp_fc1_bias": False,
            "mlp_fc2_bias": False, "model_type": "nomic_bert", "n_embd": c["hidden_size"],
            "n_head": c["num_attention_heads"], "n_inner": c["intermediate_size"], "n_layer": c["num_hidden_layers"],
            "n_positions": c["max_position_embeddings"], "pad_vocab_size_multiple": 64, "parallel_block": False,
            "parallel_block_tied_norm": False, "prenorm": False, "qkv_proj_bias": False,
            "reorder_and_upcast_attn": False, "resid_pdrop": 0.0,
            "rotary_emb_base": c["rope_parameters"]["rope_theta"], "rotary_emb_fraction": 1.0,
            "rotary_emb_interleaved": False, "rotary_emb_scale_base": None, "rotary_scaling_factor": None,
            "scale_attn_by_inverse_layer_idx": False, "scale_attn_weights": True, "summary_activation": None,
            "summary_first_dropout": 0.0, "summary_proj_to_labels": True, "summary_type": "cls_index",
            "summary_use_proj": True, "torch_dtype": "bfloat16", "transformers_version": "4.37.2",
            "type_vocab_size": c["type_vocab_size"], "use_cache": True, "use_flash_attn": True,
            "use_rms_norm": False, "use_xentropy": True, "vocab_size": c["vocab_size"]}


# GTE v1.5 / mGTE: transformers does not ship its modeling code (the hub's
# Alibaba-NLP/new-impl does), so the references run that code from the folder
# POSY_GTE_REF names (modeling.py + configuration.py, as a package).
GTE_HUB = {"architectures": ["NewModel"],
           "auto_map": {"AutoConfig": "Alibaba-NLP/new-impl--configuration.NewConfig",
                        "AutoModel": "Alibaba-NLP/new-impl--modeling.NewModel"},
           "attention_probs_dropout_prob": 0.0, "classifier_dropout": None, "hidden_dropout_prob": 0.1,
           "initializer_range": 0.02, "layer_norm_type": "layer_norm", "logn_attention_clip1": False,
           "logn_attention_scale": False, "model_type": "new", "position_embedding_type": "rope",
           "torch_dtype": "float32", "unpad_inputs": False, "use_memory_efficient_attention": False}


def remote_module(env, name):
    """Module `name` of the remote-code folder the environment variable
    `env` names, imported as a package (the hub's modeling files import
    their configuration relatively), or None without it."""
    import importlib
    d = os.environ.get(env)
    if not d:
        return None
    d = os.path.abspath(d)
    if os.path.dirname(d) not in sys.path:
        sys.path.insert(0, os.path.dirname(d))
    return importlib.import_module(os.path.basename(d) + "." + name)


def gte_module():
    """new-impl's modeling module from the folder POSY_GTE_REF names, or None."""
    return remote_module("POSY_GTE_REF", "modeling")


# JinaBERT v2 (jina-embeddings-v2-*): remote code too (jinaai/jina-bert-implementation's
# modeling_bert.py + configuration_bert.py), from the folder POSY_JINA_REF names.
JINA_HUB = {"architectures": ["JinaBertForMaskedLM"],
            "auto_map": {"AutoConfig": "jinaai/jina-bert-implementation--configuration_bert.JinaBertConfig",
                         "AutoModel": "jinaai/jina-bert-implementation--modeling_bert.JinaBertModel",
                         "AutoModelForMaskedLM": "jinaai/jina-bert-implementation--modeling_bert.JinaBertForMaskedLM"},
            "attention_probs_dropout_prob": 0.0, "attn_implementation": "torch", "classifier_dropout": None,
            "emb_pooler": "mean", "feed_forward_type": "geglu", "gradient_checkpointing": False, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "initializer_range": 0.02, "model_type": "bert",
            "position_embedding_type": "alibi", "torch_dtype": "float32", "use_cache": True}


def jina_new_model(mod, c):
    """A JinaBertModel of config dict c (the hub's config.json keys)."""
    return mod.JinaBertModel(mod.JinaBertConfig(**{k: v for k, v in c.items() if k not in ("architectures", "auto_map")}))


def gte_new_model(mod, c):
    """A NewModel of config dict c (the hub's config.json keys)."""
    return mod.NewModel(mod.NewConfig(**{k: v for k, v in c.items() if k not in ("architectures", "auto_map")}))


class RemoteRef:
    """A remote-code model (GTE's NewModel, JinaBertModel) called as a
    transformers model is by the references: an additive 4-D mask ([1, 1,
    n, n], 0 = seen) becomes the 0/1 [1, n, n] mask their forward takes;
    no mask: every token sees every other."""

    def __init__(self, model):
        self.model = model

    def __call__(self, input_ids, attention_mask=None):
        import torch
        n = input_ids.shape[1]
        dev = input_ids.device
        keep = torch.ones(1, n, n, device=dev) if attention_mask is None else (attention_mask[0, 0] == 0).float()[None]
        return self.model(input_ids=input_ids, attention_mask=keep)

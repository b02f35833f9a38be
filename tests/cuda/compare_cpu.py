"""GPU engine against the CPU fp32 engine on the same weights and inputs.

The GPU machine (tests/cuda/run_gpu_tests.sh) writes each model's single-
sequence embeddings (<model>-gpu.single.bin) into its output folder.  This
script, run anywhere the engine's C sources build (no GPU needed), rebuilds
the same random-weight models and sequences (numpy-seeded, so identical),
embeds them with the CPU engine through the public API (build/api_embed
... cpu), and requires min cosine >= 0.999 between the two; it also
reports the CPU engine against transformers fp32 on the same machine.

usage: compare_cpu.py BUILD_DIR WORK_DIR GPU_OUT_DIR [model ...]
"""
import os, subprocess, sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_vs_transformers as E


def main():
    build_dir, root, gpu_dir = sys.argv[1:4]
    names = sys.argv[4:] or list(E.CONFIGS)
    os.makedirs(root, exist_ok=True)
    ok = True
    for name in names:
        kw = E.CONFIGS[name]
        m, hf, _ = E.build(name, kw, root)
        seqs = E.sequences(kw["vocab_size"])
        sp = os.path.join(root, name + "-seqs.bin")
        E.write_seqs(sp, seqs)
        cpu_out = os.path.join(root, name + "-cpu.bin")
        r = subprocess.run([os.path.join(build_dir, "api_embed"), hf, sp, cpu_out, "cpu", "4096"])
        if r.returncode:
            print(f"{name}: api_embed failed"); ok = False; continue
        H = E.hidden_of(kw)
        cpu = np.fromfile(cpu_out, dtype=np.float32).reshape(-1, H)
        ref = E.reference(m, seqs)
        c = E.cosines(cpu, ref)
        print(f"{name} CPU engine fp32 vs transformers fp32: min cosine {c.min():.7f}, "
              f"max abs err {np.abs(cpu - ref).max():.2e}")
        ok &= bool(c.min() >= 0.99999)
        gp = os.path.join(gpu_dir, name + "-gpu.single.bin")
        if not os.path.exists(gp):
            print(f"{name}: no GPU output at {gp}"); ok = False; continue
        gpu = np.fromfile(gp, dtype=np.float32).reshape(-1, H)
        c = E.cosines(gpu, cpu)
        w = int(np.argmin(c))
        print(f"{name} CUDA engine bf16 vs CPU engine fp32: min cosine {c.min():.6f} (len {len(seqs[w])}), "
              f"mean {c.mean():.6f}, max abs err {np.abs(gpu - cpu).max():.2e}")
        ok &= bool(c.min() >= 0.999)
    print("compare_cpu:", "PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

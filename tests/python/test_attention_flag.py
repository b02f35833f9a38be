"""--attention on posy embed and posy serve: bad values are usage errors
(exit 2, message names the flag), and an encoder refuses an override (the
flag is for decoder embedders; tests/unit/test_qwen3.c checks its effect on
Qwen3 against transformers)."""
import subprocess


def run(posy_bin, *args):
    return subprocess.run([posy_bin, *args], capture_output=True, timeout=120)


def test_embed_bad_attention_value(posy_bin, posy_model):
    r = run(posy_bin, "embed", "--model", posy_model, "--device", "cpu", "--attention", "sideways", "hi")
    assert r.returncode == 2
    assert b"--attention must be model, causal or bidirectional" in r.stderr


def test_embed_attention_on_encoder_refused(posy_bin, posy_model):
    r = run(posy_bin, "embed", "--model", posy_model, "--device", "cpu", "--attention", "causal", "hi")
    assert r.returncode == 1
    assert b"applies to decoder models" in r.stderr


def test_embed_attention_model_is_default(posy_bin, posy_model):
    a = run(posy_bin, "embed", "--model", posy_model, "--device", "cpu", "hi")
    b = run(posy_bin, "embed", "--model", posy_model, "--device", "cpu", "--attention", "model", "hi")
    assert a.returncode == 0 and b.returncode == 0
    assert a.stdout == b.stdout


def test_serve_bad_attention_value(posy_bin, posy_model):
    r = run(posy_bin, "serve", "--model", posy_model, "--port", "0", "--attention", "foo")
    assert r.returncode == 2
    assert b"--attention must be" in r.stderr

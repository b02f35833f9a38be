"""`posy embed` as a user drives it: flags, input and output formats, and
the failures a user meets (bad flags, missing or damaged model files).

Errors must exit with 2 (usage) or 1 (runtime), print a message that names
the flag or file at fault, and never die of a signal.
"""
import json
import os

import numpy as np
import pytest

from conftest import assert_signal_free

TEXTS = ["The cat sits on the mat.", "Embeddings map text to vectors.", "", "   ",
         "Ça va? Привет 你好 🙂", "x" * 150, "def f(x): return x * 2"]
ARG_TEXTS = [t for t in TEXTS if t.strip()]   # texts that survive shell-like argument passing


def cosine(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_help_exits_0(posy):
    r = posy.run("embed", "--help")
    assert r.returncode == 0
    out = r.stdout.decode()
    assert "usage: posy embed" in out
    for flag in ("--model", "--input", "--output", "--device", "--threads", "--max-batch-tokens"):
        assert flag in out, f"--help does not mention {flag}"


def test_unknown_flag_exits_2_naming_it(posy):
    r = posy.run("embed", "--model", posy.model, "--frobnicate", "hello")
    assert_signal_free(r)
    assert r.returncode == 2
    assert b"--frobnicate" in r.stderr
    assert r.stdout == b""


@pytest.mark.parametrize("args,needle", [
    (["--threads", "many"], b"--threads"),
    (["--device", "tpu"], b"--device"),
    (["--output-format", "csv"], b"--output-format"),
    (["--max-batch-tokens"], b"--max-batch-tokens"),
])
def test_bad_flag_values_exit_2(posy, args, needle):
    r = posy.run("embed", "--model", posy.model, *args, "hello")
    assert_signal_free(r)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr


def test_missing_model_flag_exits_2(posy):
    r = posy.run("embed", "hello")
    assert r.returncode == 2
    assert b"--model" in r.stderr


def test_args_and_stdin_give_the_same_vectors(posy):
    from_args = posy.embed_jsonl(*ARG_TEXTS)
    from_stdin = posy.embed_jsonl(input="".join(t + "\n" for t in ARG_TEXTS))
    assert from_args.shape == (len(ARG_TEXTS), 384)
    np.testing.assert_allclose(from_args, from_stdin, rtol=0, atol=1e-6)
    # Different texts give different vectors (the comparison above can fail).
    assert cosine(from_args[0], from_args[1]) < 0.9


def test_vectors_are_unit_length_and_in_input_order(posy):
    both = posy.embed_jsonl(ARG_TEXTS[0], ARG_TEXTS[1])
    swapped = posy.embed_jsonl(ARG_TEXTS[1], ARG_TEXTS[0])
    np.testing.assert_allclose(both[::-1], swapped, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(both, axis=1), 1.0, atol=1e-5)


def test_jsonl_and_npy_outputs_agree(posy, tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in TEXTS), encoding="utf-8")
    posy.embed("--input", str(inp), "--output", str(tmp_path / "o.jsonl"))
    posy.embed("--input", str(inp), "--output", str(tmp_path / "o.npy"))
    with open(tmp_path / "o.jsonl") as f:
        lines = f.read().splitlines()
    js = np.array([json.loads(l) for l in lines], dtype=np.float32)
    npy = np.load(tmp_path / "o.npy")
    assert npy.dtype == np.float32 and npy.shape == (len(TEXTS), 384)
    # The JSON floats are written to read back as the same float32, so the
    # two files hold the same numbers, bit for bit.
    np.testing.assert_array_equal(js, npy)
    for tok in lines[0].strip("[]").split(","):
        assert len(tok.lstrip("-").replace(".", "").split("e")[0].lstrip("0")) <= 9, tok


def test_output_format_flag_and_stdout_npy(posy, tmp_path):
    r = posy.embed("--output-format", "npy", "hello", "world")
    p = tmp_path / "stdout.npy"
    p.write_bytes(r.stdout)
    got = np.load(p)
    assert got.shape == (2, 384) and got.dtype == np.float32
    np.testing.assert_allclose(got, posy.embed_jsonl("hello", "world"), rtol=0, atol=1e-6)


def test_plain_lines_empty_line_is_the_empty_string(posy):
    plain = posy.embed_jsonl(input="first\n\nthird\r\n")
    assert plain.shape == (3, 384)
    as_json = posy.embed_jsonl("--input-format", "jsonl", input='"first"\n""\n{"text": "third"}\n')
    np.testing.assert_allclose(plain, as_json, rtol=0, atol=1e-6)
    # The empty string is embedded (as sentence-transformers does), not dropped.
    assert cosine(plain[1], plain[0]) < 0.99


def test_empty_input_gives_empty_outputs(posy, tmp_path):
    r = posy.embed(input="")
    assert r.stdout == b""
    posy.embed("--input", "/dev/null", "--output", str(tmp_path / "e.npy"))
    assert np.load(tmp_path / "e.npy").shape == (0, 384)


def test_long_text_is_truncated_to_max_seq_length(posy):
    base = " ".join(["word"] * 300)          # ~300 tokens, past the 256 limit
    longer = base + " " + " ".join(["different"] * 200)
    v = posy.embed_jsonl(base, longer, "word word word")
    np.testing.assert_allclose(v[0], v[1], rtol=0, atol=1e-6)
    assert cosine(v[0], v[2]) < 0.99999


def test_prompt_is_prepended(posy):
    v = posy.embed_jsonl("--prompt", "query: ", "what is posy")
    w = posy.embed_jsonl("query: what is posy")
    u = posy.embed_jsonl("what is posy")
    np.testing.assert_allclose(v, w, rtol=0, atol=1e-6)
    assert cosine(v[0], u[0]) < 0.9999


def test_unknown_prompt_name_exits_2(posy):
    r = posy.run("embed", "--model", posy.model, "--prompt-name", "nope", "x")
    assert_signal_free(r)
    assert r.returncode == 2
    assert b"nope" in r.stderr


def test_bad_jsonl_line_names_file_and_line(posy, tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('"ok"\n{"text": 3}\n')
    r = posy.run("embed", "--model", posy.model, "--input", str(p))
    assert_signal_free(r)
    assert r.returncode == 1
    assert f"{p}:2".encode() in r.stderr


def test_missing_input_file(posy, tmp_path):
    r = posy.run("embed", "--model", posy.model, "--input", str(tmp_path / "nope.txt"))
    assert_signal_free(r)
    assert r.returncode == 1
    assert b"nope.txt" in r.stderr


# ---- damaged models ------------------------------------------------------

def variant(model, tmp_path, name, damaged, content=None):
    """A model directory whose files link to the real model's, except
    `damaged`, which is written from `content` (bytes) or left out (None)."""
    d = tmp_path / name
    d.mkdir()
    for entry in os.listdir(model):
        if entry != damaged:
            os.symlink(os.path.join(model, entry), d / entry)
    if content is not None:
        (d / damaged).write_bytes(content)
    return d


def expect_model_error(posy, model_dir, needle):
    r = posy.run("embed", "--model", str(model_dir), "--device", "cpu", "hello")
    assert_signal_free(r)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 1, f"exit {r.returncode}, stderr: {err}"
    assert needle in err, f"message does not name {needle!r}: {err}"
    assert r.stdout == b""


def weights(posy):
    with open(os.path.join(posy.model, "model.safetensors"), "rb") as f:
        return f.read()


def test_missing_model_dir(posy, tmp_path):
    expect_model_error(posy, tmp_path / "no-such-model", "no-such-model")


def test_truncated_safetensors(posy, tmp_path):
    w = weights(posy)
    d = variant(posy.model, tmp_path, "truncated", "model.safetensors", w[: len(w) // 2])
    expect_model_error(posy, d, "model.safetensors")


def test_safetensors_with_garbage_header(posy, tmp_path):
    w = bytearray(weights(posy))
    w[8:72] = b"{not json at all" * 4
    d = variant(posy.model, tmp_path, "garbage_header", "model.safetensors", bytes(w))
    expect_model_error(posy, d, "model.safetensors")


def test_safetensors_shorter_than_its_header_length(posy, tmp_path):
    d = variant(posy.model, tmp_path, "tiny", "model.safetensors", b"\xff\xff\xff\x7f")
    expect_model_error(posy, d, "model.safetensors")


def test_missing_safetensors(posy, tmp_path):
    d = variant(posy.model, tmp_path, "no_weights", "model.safetensors")
    expect_model_error(posy, d, "model.safetensors")


def test_garbage_config_json(posy, tmp_path):
    d = variant(posy.model, tmp_path, "garbage_config", "config.json", b"\x00\xffthis is { not json")
    expect_model_error(posy, d, "config.json")


def test_missing_tokenizer_json(posy, tmp_path):
    d = variant(posy.model, tmp_path, "no_tokenizer", "tokenizer.json")
    expect_model_error(posy, d, "tokenizer.json")


def test_garbage_tokenizer_json(posy, tmp_path):
    d = variant(posy.model, tmp_path, "bad_tokenizer", "tokenizer.json", b'{"model": 42}')
    expect_model_error(posy, d, "tokenizer.json")


def test_invalid_utf8_line_is_an_error_naming_the_text(posy):
    r = posy.run("embed", "--model", posy.model, "--device", "cpu", input=b"fine\nbad \xff\xfe bytes\n")
    assert_signal_free(r)
    assert r.returncode == 1
    assert b"input text 2" in r.stderr


def test_progress_bar_only_on_a_terminal(posy):
    import pty
    import subprocess
    texts = "".join(f"sentence number {i}\n" for i in range(40)).encode()
    # stderr a pipe: no bar, no carriage returns.
    r = posy.run("embed", "--model", posy.model, "--device", "cpu", input=texts)
    assert r.returncode == 0 and b"\r" not in r.stderr and b"texts/s" not in r.stderr
    # stderr a terminal: the bar is drawn and ends at 40/40.
    master, slave = pty.openpty()
    p = subprocess.Popen([posy.binary, "embed", "--model", posy.model, "--device", "cpu"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out, _ = p.communicate(texts, timeout=600)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    tty_err = b"".join(chunks)
    assert p.returncode == 0
    assert len(out.splitlines()) == 40
    assert b"40/40 texts" in tty_err, tty_err[-300:]


# ---- model variants: pooling config and prompts ------------------------------

def test_normalize_flag_on_a_model_without_normalize(posy, tmp_path):
    with open(os.path.join(posy.model, "modules.json")) as f:
        modules = [m for m in json.load(f) if not m["type"].endswith("Normalize")]
    d = variant(posy.model, tmp_path, "no_normalize", "modules.json", json.dumps(modules).encode())
    raw = posy.embed_jsonl("hello world", "a second text", model=str(d))
    norms = np.linalg.norm(raw, axis=1)
    assert (np.abs(norms - 1.0) > 1e-3).all(), f"model without Normalize gave unit vectors: {norms}"
    forced = posy.embed_jsonl("--normalize", "hello world", "a second text", model=str(d))
    np.testing.assert_allclose(forced, raw / norms[:, None], rtol=0, atol=1e-6)
    np.testing.assert_allclose(forced, posy.embed_jsonl("hello world", "a second text"), rtol=0, atol=1e-6)


def test_model_prompts_and_default_prompt(posy, tmp_path):
    cfg = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"}
    d = variant(posy.model, tmp_path, "prompts", "config_sentence_transformers.json",
                json.dumps(cfg).encode())
    plain = posy.embed_jsonl("query: what is posy", "passage: what is posy")
    default = posy.embed_jsonl("what is posy", model=str(d))
    np.testing.assert_allclose(default[0], plain[0], rtol=0, atol=1e-6)
    named = posy.embed_jsonl("--prompt-name", "passage", "what is posy", model=str(d))
    np.testing.assert_allclose(named[0], plain[1], rtol=0, atol=1e-6)
    explicit = posy.embed_jsonl("--prompt", "", "query: what is posy", model=str(d))
    np.testing.assert_allclose(explicit[0], plain[0], rtol=0, atol=1e-6)

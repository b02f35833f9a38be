"""The Hugging Face peer (../shared/bench/hf_peer.py) for the two encoder
models posy's GPU bench covers, MiniLM-L6 and BERT-base, without the
Qwen3 and GEMM-roofline parts (device time is scarce).  Same code path and
output rows as hf_peer.py; PYTHONPATH must hold its folder."""
import hf_peer

if __name__ == "__main__":
    hf_peer.emit(kind="env", torch=hf_peer.torch.__version__, gpu=hf_peer.torch.cuda.get_device_name())
    ms = hf_peer.models()
    for name in ("minilm-l6", "bert-base"):
        hf_peer.peer(name, ms[name])

"""The Hugging Face peer (../shared/bench/hf_peer.py) for the models named
on the command line (default: the two encoders posy's GPU bench covers,
minilm-l6 and bert-base; qwen3-0.6b for tests/cuda/run_qwen3_gpu.sh),
without the GEMM-roofline part (device time is scarce).  Same code path and
output rows as hf_peer.py; PYTHONPATH must hold its folder."""
import sys

import hf_peer

if __name__ == "__main__":
    hf_peer.emit(kind="env", torch=hf_peer.torch.__version__, gpu=hf_peer.torch.cuda.get_device_name())
    ms = hf_peer.models()
    for name in sys.argv[1:] or ("minilm-l6", "bert-base"):
        hf_peer.peer(name, ms[name])

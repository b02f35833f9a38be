"""OpenBLAS's kernels: when the OpenBLAS posy is linked with takes the CPU
for a pre-AVX2 core (a DYNAMIC_ARCH build meeting a CPU model it does not
know: this project's CI VMs get Prescott's SSE3 kernels), the engine-running
commands restart once with OPENBLAS_CORETYPE set to the CPU's real family
(SkylakeX with AVX-512 F/BW/DQ/VL, else Haswell) and say so; otherwise, or
when the user set OPENBLAS_CORETYPE, they do nothing of the kind.  What is
expected is worked out here from the same library (ctypes) and
/proc/cpuinfo, so the test holds on either kind of machine; the vectors are
the same with either set of kernels."""
import ctypes
import json
import os
import re
import subprocess

import pytest

OLD = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Katmai", "Coppermine", "Northwood", "Banias",
       "Sandybridge", "Opteron", "Barcelona", "Bobcat", "Bulldozer", "Piledriver", "Steamroller", "Excavator",
       "Unknown"}


def linked_openblas(posy_bin):
    out = subprocess.run(["ldd", posy_bin], capture_output=True, text=True, timeout=60).stdout
    m = re.search(r"libopenblas[^ ]* => (\S+)", out)
    return m.group(1) if m else None


def detected_core(lib):
    """What that OpenBLAS picks without OPENBLAS_CORETYPE (its constructor reads the environment at load: a
    child process with the variable removed)."""
    code = ("import ctypes, sys; f = ctypes.CDLL(sys.argv[1]).openblas_get_corename; "
            "f.restype = ctypes.c_char_p; print(f().decode())")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    return subprocess.run(["python3", "-c", code, lib], capture_output=True, text=True, env=env,
                          timeout=60, check=True).stdout.strip()


def cpu_flags():
    for line in open("/proc/cpuinfo"):
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def embed(posy_bin, posy_model, env):
    r = subprocess.run([posy_bin, "embed", "--model", posy_model, "--device", "cpu", "--threads", "1"],
                       input="the kernels OpenBLAS runs\nsecond line\n", capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()], r.stderr


def test_openblas_core(posy_bin, posy_model):
    lib = linked_openblas(posy_bin)
    if not lib or not hasattr(ctypes.CDLL(lib), "openblas_get_corename"):
        pytest.skip("posy is not linked with OpenBLAS here")
    core, flags = detected_core(lib), cpu_flags()
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    vecs, log = embed(posy_bin, posy_model, env)
    line = [x for x in log.splitlines() if "OpenBLAS took this CPU" in x]
    if core in OLD and {"avx2", "fma"} <= flags:
        want = "SkylakeX" if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags else "Haswell"
        assert len(line) == 1 and f"for {core};" in line[0] and f"running its {want} kernels" in line[0], log
    else:
        assert not line, log
    # the user's own choice stands, whatever it is; the vectors agree with the other kernels'
    env["OPENBLAS_CORETYPE"] = "Prescott"
    vecs2, log2 = embed(posy_bin, posy_model, env)
    assert "OpenBLAS took this CPU" not in log2, log2
    assert len(vecs) == len(vecs2) == 2
    for a, b in zip(vecs, vecs2):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-5

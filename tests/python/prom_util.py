"""A strict reader of Prometheus text exposition (format 0.0.4) for tests.

parse(text) checks what a scraper relies on and returns {sample: value}:
every sample belongs to a family announced by exactly one "# HELP" and one
"# TYPE" line before its samples; TYPE is a known kind; names and label sets
are well formed; values parse as floats; no sample appears twice; a
counter's samples end in _total; a histogram's buckets are cumulative and
end in le="+Inf" equal to _count.  Any breach raises AssertionError naming
the line.  Used by tests/python/test_metrics_engine.py and by
tests/cuda/run_serve_gpu.sh on the GPU machine.
"""
import math
import re

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
SAMPLE = re.compile(rf"^({NAME})(\{{[^}}]*\}})? (\S+)$")
LABEL = re.compile(r'^[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"$')
KINDS = {"counter", "gauge", "histogram", "summary", "untyped"}


def _family(name, types):
    if name in types:
        return name
    for suf in ("_bucket", "_sum", "_count"):
        if name.endswith(suf) and types.get(name[: -len(suf)]) in ("histogram", "summary"):
            return name[: -len(suf)]
    return None


def _labels(block, line):
    if not block:
        return ()
    inner = block[1:-1]
    parts = re.findall(r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*"', inner)
    assert ",".join(parts) == inner, f"malformed labels: {line!r}"
    for p in parts:
        assert LABEL.match(p), f"malformed label {p!r}: {line!r}"
    return tuple(parts)


def parse(text):
    assert text.endswith("\n"), "exposition must end with a newline"
    helps, types, samples = {}, {}, {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            parts = line.split(" ", 3)
            assert len(parts) == 4 and re.fullmatch(NAME, parts[2]), f"malformed comment: {line!r}"
            table = helps if parts[1] == "HELP" else types
            assert parts[2] not in table, f"second {parts[1]} for {parts[2]}: {line!r}"
            if parts[1] == "TYPE":
                assert parts[3] in KINDS, f"unknown type: {line!r}"
                assert not any(_family(s[0], {parts[2]: parts[3]}) for s in samples), \
                    f"TYPE after samples of {parts[2]}"
            table[parts[2]] = parts[3]
            continue
        assert not line.startswith("#"), f"stray comment: {line!r}"
        m = SAMPLE.match(line)
        assert m, f"malformed sample: {line!r}"
        name, block, value = m.groups()
        fam = _family(name, types)
        assert fam is not None, f"sample before its # TYPE: {line!r}"
        assert fam in helps, f"no # HELP for {fam}"
        if types[fam] == "counter":
            assert name.endswith("_total"), f"counter sample without _total: {line!r}"
        key = (name, _labels(block, line))
        assert key not in samples, f"duplicate sample: {line!r}"
        v = float(value)
        assert not math.isnan(v), f"NaN: {line!r}"
        if types[fam] in ("counter", "histogram"):
            assert v >= 0, f"negative {types[fam]}: {line!r}"
        samples[key] = v
    for fam, kind in types.items():
        if kind != "histogram":
            continue
        buckets = [(k[1], v) for k, v in samples.items() if k[0] == fam + "_bucket"]
        assert buckets, f"histogram {fam} has no buckets"
        vals = [v for _, v in buckets]
        assert vals == sorted(vals), f"histogram {fam} buckets not cumulative"
        assert 'le="+Inf"' in buckets[-1][0], f"histogram {fam} does not end in +Inf"
        assert samples.get((fam + "_count", ())) == vals[-1], f"histogram {fam}: +Inf bucket != _count"
    return {(n if not l else n + "{" + ",".join(l) + "}"): v for (n, l), v in samples.items()}, types

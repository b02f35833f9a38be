"""Vector checks the text-to-vector tests share: the smallest cosine
between two sets of rows, and one model's vectors through both embedding
routes (TEI's /embed and OpenAI's /v1/embeddings)."""
import numpy as np

from serve_util import post_json as post


def min_cos(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(((a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)).min())


def check_embed_routes(url, texts, want, name, bar=0.99999, cos=min_cos):
    """/embed and /v1/embeddings of texts (truncate on) both within `bar` of want by `cos` (a caller's own
    rule for rows a plain cosine cannot judge, e.g. zero rows); returns /embed's vectors."""
    st, tei = post(url, "/embed", {"inputs": texts, "truncate": True})
    assert st == 200, tei
    assert cos(tei, want) >= bar
    st, oa = post(url, "/v1/embeddings", {"input": texts, "model": name, "truncate": True})
    assert st == 200, oa
    assert cos([d["embedding"] for d in oa["data"]], want) >= bar
    return tei

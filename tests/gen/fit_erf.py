#!/usr/bin/env python3
"""Fit the rational erf used by the fast CPU GELU (src/engine/cpu/eng_cpu_kernels.c).

erf(z) ~ z * P(z^2) / Q(z^2) on 0 <= z <= 4 (|z| > 4 rounds to +-1 in fp32),
P of degree 6, Q of degree 5 with Q(0) = 1.  Sanathanan-Koerner iteration of
linearised least squares with a Lawson-style reweighting towards minimax.
Prints the coefficients and the max abs error of a float32 Horner
evaluation (about 4e-7; libm erff is about 1e-7).  Needs only numpy.
"""
from math import erf

import numpy as np

verf = np.vectorize(erf)
Z = 4.0
x = np.concatenate([Z * (1 - np.cos(np.linspace(0, np.pi, 4000))) / 2, np.linspace(0, Z, 4000)])
f = verf(x)
t = x * x


def fit(np_, nq, iters=30):
    w = np.ones_like(x)
    for _ in range(iters):
        a = np.concatenate([x[:, None] * t[:, None] ** np.arange(np_ + 1),
                            -(f[:, None] * t[:, None] ** np.arange(1, nq + 1))], axis=1)
        c, *_ = np.linalg.lstsq(a * w[:, None], f * w, rcond=None)
        p, q = c[:np_ + 1], np.concatenate([[1.0], c[np_ + 1:]])
        qv = np.polyval(q[::-1], t)
        err = x * np.polyval(p[::-1], t) / qv - f
        w = (1 / np.abs(qv)) * (1 + 50 * np.abs(err) / np.abs(err).max())
    return p, q


def eval32(p, q, z):
    z = z.astype(np.float32)
    tt = z * z
    pv = np.zeros_like(z)
    qv = np.zeros_like(z)
    for c in p[::-1]:
        pv = pv * tt + np.float32(c)
    for c in q[::-1]:
        qv = qv * tt + np.float32(c)
    return np.minimum(z * pv / qv, np.float32(1))


p, q = fit(6, 5)
print("P:", ", ".join("%.9ef" % c for c in p))
print("Q:", ", ".join("%.9ef" % c for c in q))
zz = np.linspace(0, Z, 400001)
print("float32 max abs error: %.3g" % np.abs(eval32(p, q, zz) - verf(zz)).max())

#!/usr/bin/env python3
"""fit-gelu.py: the polynomials of the CPU backend's float GELU (csrc/cpu/gemm_driver.h: kExpP,
kErfSmall, kErfcTail), fitted by least squares in relative error on dense grids, then checked
in float32 arithmetic (numpy; fma emulated through float64) against double-precision math.erfc
and math.exp. Prints the C++ constants and the errors.

    python3 scripts/fit-gelu.py        # needs numpy
"""
import math

import numpy as np

f32, f64 = np.float32, np.float64


def fma(a, b, c):
    return (np.asarray(a, f32).astype(f64) * np.asarray(b, f32).astype(f64) + np.asarray(c, f32).astype(f64)).astype(f32)


def fit(ys, deg, var):
    v = np.vander(var, deg + 1, increasing=True)
    w = 1 / np.abs(ys)
    c, *_ = np.linalg.lstsq(v * w[:, None], ys * w, rcond=None)
    return [f32(x) for x in c]


r = np.linspace(-math.log(2) / 2, math.log(2) / 2, 20001)
r = r[np.abs(r) > 1e-9]
EXP_P = fit((np.exp(r) - 1 - r) / r**2, 5, r)                 # e^r = 1 + r + r^2 P(r)
a = np.linspace(1e-6, 0.875, 20001)
ERF_SMALL = fit(np.array([math.erf(v) / v for v in a]), 7, a * a)  # erf(a) = a P(a^2)
a = np.linspace(0.875, 4.0, 20001)
ERFC_TAIL = fit(np.array([math.erfc(v) * math.exp(v * v) for v in a]), 7, 1 / (1 + 0.5 * a))


def horner(cs, v):
    p = np.full_like(v, cs[-1])
    for c in cs[-2::-1]:
        p = fma(p, v, np.full_like(v, c))
    return p


def exp_f(x):
    x = np.clip(x, f32(-87), f32(88)).astype(f32)
    n = ((x * f32(1.44269504) + f32(12582912)).astype(f32) - f32(12582912)).astype(f32)
    rr = fma(-n, np.full_like(x, f32(0.693145752)), x)
    rr = fma(-n, np.full_like(x, f32(1.42860677e-06)), rr)
    y = fma(horner(EXP_P, rr), (rr * rr).astype(f32), (rr + f32(1)).astype(f32))
    return (y * np.exp2(n).astype(f32)).astype(f32)


def normal_f(x):
    a = (x * f32(0.707106781)).astype(f32)
    aa = np.abs(a)
    hi = (a * a).astype(f32)
    lo = fma(a, a, -hi)
    e = np.where(aa < 10, (exp_f(-hi) * (f32(1) - lo)).astype(f32), f32(0))
    tail = (f32(0.5) * e * horner(ERFC_TAIL, (f32(1) / (f32(1) + f32(0.5) * aa)).astype(f32))).astype(f32)
    small = fma(f32(0.5) * a, horner(ERF_SMALL, hi), np.full_like(a, f32(0.5)))
    cdf = np.where(aa < f32(0.875), small, np.where(a > 0, (f32(1) - tail).astype(f32), tail))
    return cdf, (e * f32(0.398942280)).astype(f32)


def const(name, cs):
    return f"constexpr float {name}[] = {{{', '.join(f'{float(c):.9g}f' for c in cs)}}};"


print(const('kExpP', EXP_P))
print(const('kErfSmall', ERF_SMALL))
print(const('kErfcTail', ERFC_TAIL))
x = np.linspace(-87, 88, 1000001).astype(f32)
ref = np.exp(x.astype(f64))
print(f'e^x over [-87, 88]: max {(np.abs(exp_f(x) - ref) / np.spacing(ref.astype(f32)).astype(f64)).max():.2f} ulp')
x = np.linspace(-12, 12, 100001).astype(f32)
xd = x.astype(f64)
cdf, pdf = normal_f(x)
ref_cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in xd])
ref_gelu, ref_grad = xd * ref_cdf, ref_cdf + xd * np.exp(-xd * xd / 2) / math.sqrt(2 * math.pi)
gelu, grad = (x * cdf).astype(f32), fma(x, pdf, cdf)
for floor in (1e-6, 1e-3):
    eg = (np.abs(gelu - ref_gelu) / np.maximum(np.abs(ref_gelu), floor)).max()
    ed = (np.abs(grad - ref_grad) / np.maximum(np.abs(ref_grad), floor)).max()
    print(f'on [-12, 12], relative to max(|exact|, {floor}): gelu {eg:.2e}, gelu\' {ed:.2e}')

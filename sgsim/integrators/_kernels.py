"""Compiled step loops of SGLD and SGHMC (private; :func:`sgsim.sample` validates and calls them).

Each kernel advances ONE chain over steps ``k0 <= k < k1`` of a precomputed schedule, in
place, and returns the first step at which the state became non-finite (or -1). Chains
run in separate calls (on separate threads), each with its own generator, so a chain's
bits never depend on the others.

Noise
-----
The emulated stochastic gradient is ``grad U + zeta`` with ``zeta ~ N(0, V)``, and
``V = Q diag(lam) Q^T``. Because ``zeta`` is Gaussian, additive and independent of the
injected noise, the kernel draws their sum directly: in the eigenbasis of ``V`` the
per-step variance along direction ``i`` is ``noise_a[k] * lam[i] + noise_c[k]``, computed by
the caller from the step size, temperature and noise correction. This is identical in
law to drawing the two separately and halves the random numbers drawn.

``injected`` (shape ``(K, d)``), when non-empty, replaces the generator's standard normals
at step ``k`` by ``injected[k]``; the tests use it to compare with the NumPy reference
exactly.
"""

from __future__ import annotations

import math

import numpy as np

from .._jit import jit


@jit(inline=True)
def _noise(k, gen, injected, noise_a, noise_c, lam, rotate, basis, z, out):
    """Write the step-``k`` noise into ``out``; return False when its variance is zero."""
    d = out.shape[0]
    if noise_c[k] == 0.0 and noise_a[k] == 0.0:
        return False
    for i in range(d):
        sd = math.sqrt(noise_a[k] * lam[i] + noise_c[k])
        xi = injected[k, i] if injected.shape[0] > 0 else gen.standard_normal()
        z[i] = sd * xi
    if rotate:
        for i in range(d):
            acc = 0.0
            for j in range(d):
                acc += basis[i, j] * z[j]
            out[i] = acc
    else:
        for i in range(d):
            out[i] = z[i]
    return True


@jit(inline=True)
def _finite(x):
    for i in range(x.shape[0]):
        if not math.isfinite(x[i]):
            return False
    return True


@jit(cache=False)
def sgld_chain(
    theta, gen, grad_u, params, k0, k1, alpha, noise_a, noise_c, lam, rotate, basis, store, out, injected
):
    """SGLD ``theta_k = theta_{k-1} - alpha_k (grad U(theta_{k-1}) + zeta_k) + sqrt(2 alpha_k T_k) xi_k``."""
    d = theta.shape[0]
    g = np.empty(d)
    z = np.empty(d)
    e = np.empty(d)
    for k in range(k0, k1):
        grad_u(theta, params, g)
        a = alpha[k]
        if _noise(k, gen, injected, noise_a, noise_c, lam, rotate, basis, z, e):
            for i in range(d):
                theta[i] = theta[i] - a * g[i] + e[i]
        else:
            for i in range(d):
                theta[i] = theta[i] - a * g[i]
        if not _finite(theta):
            return k
        s = store[k]
        if s >= 0:
            for i in range(d):
                out[s, i] = theta[i]
    return -1


@jit(cache=False)
def sghmc_chain(
    theta,
    velocity,
    gen,
    grad_u,
    params,
    k0,
    k1,
    alpha,
    friction,
    noise_a,
    noise_c,
    lam,
    rotate,
    basis,
    store,
    out,
    injected,
):
    """SGHMC in [cSG] order: ``theta_k = theta_{k-1} + v_{k-1}``, then
    ``v_k = (1 - eta) v_{k-1} - alpha_k (grad U(theta_k) + zeta_k) + sqrt(2 (eta - gamma_hat) alpha_k T_k) xi_k``.
    """
    d = theta.shape[0]
    g = np.empty(d)
    z = np.empty(d)
    e = np.empty(d)
    keep = 1.0 - friction
    for k in range(k0, k1):
        for i in range(d):
            theta[i] += velocity[i]
        grad_u(theta, params, g)
        a = alpha[k]
        if _noise(k, gen, injected, noise_a, noise_c, lam, rotate, basis, z, e):
            for i in range(d):
                velocity[i] = keep * velocity[i] - a * g[i] + e[i]
        else:
            for i in range(d):
                velocity[i] = keep * velocity[i] - a * g[i]
        if not (_finite(theta) and _finite(velocity)):
            return k
        s = store[k]
        if s >= 0:
            for i in range(d):
                out[s, i] = theta[i]
    return -1

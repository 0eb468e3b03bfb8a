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

Gradients
---------
``grad_u(theta, params, out)`` is the target's exact gradient. ``stochastic_grad_u`` is
either None or the target's compiled ``stochastic_grad_u(theta, params, out, gen, work)``,
which draws its own randomness (minibatch indices) from the chain's generator and keeps
per-chain state in ``work`` (an int64 buffer owned by the chain, e.g. the permutation of
the data that sampling without replacement shuffles in place). numba compiles a kernel
once per argument type and prunes the ``is None`` branch at compile time, so the
exact-gradient path is the same machine code as a kernel without the option. In a step
the stochastic gradient is drawn before the step's Gaussian noise.

Speed
-----
The chain's state is copied into buffers the kernel allocates, and written back when it
returns, so the step loop never writes memory that another thread's chain may share a
cache line with. The helpers are inlined by numba and take few arrays: an earlier helper
that took ten arrays left three pairs of atomic reference-count updates in every step
(about 40 ns of a 180 ns step on the 25-Gaussian mixture).
"""

from __future__ import annotations

import math

import numpy as np

from .._jit import jit


@jit(inline=True)
def _draw(k, gen, injected, noise_a, noise_c, lam, z):
    """Write the step-``k`` noise, in the eigenbasis of ``V``, into ``z``; False when it is zero."""
    na = noise_a[k]
    nc = noise_c[k]
    if nc == 0.0 and na == 0.0:
        return False
    drawn = injected.shape[0] == 0
    for i in range(z.shape[0]):
        xi = gen.standard_normal() if drawn else injected[k, i]
        z[i] = math.sqrt(na * lam[i] + nc) * xi
    return True


@jit(inline=True)
def _rotated(basis, z, i):
    """Component ``i`` of ``basis @ z``: the noise back in the coordinates of ``theta``."""
    acc = 0.0
    for j in range(z.shape[0]):
        acc += basis[i, j] * z[j]
    return acc


@jit(inline=True)
def _copy(src, dst):
    # an explicit loop: a slice assignment here triples the compile time of a kernel
    for i in range(src.shape[0]):
        dst[i] = src[i]
    return dst


@jit(inline=True)
def _finite(x):
    # no early exit: a branch-free loop (15% faster SGHMC steps, which check two arrays)
    ok = True
    for i in range(x.shape[0]):
        ok = ok and math.isfinite(x[i])
    return ok


@jit(cache=False)
def sgld_chain(
    theta,
    gen,
    grad_u,
    stochastic_grad_u,
    params,
    work,
    k0,
    k1,
    alpha,
    noise_a,
    noise_c,
    lam,
    rotate,
    basis,
    store,
    out,
    injected,
):
    """SGLD ``theta_k = theta_{k-1} - alpha_k (grad U(theta_{k-1}) + zeta_k) + sqrt(2 alpha_k T_k) xi_k``."""
    d = theta.shape[0]
    x = _copy(theta, np.empty(d))
    g = np.empty(d)
    z = np.empty(d)
    for k in range(k0, k1):
        # pruned at compile time: one specialisation per gradient kind
        if stochastic_grad_u is None:
            grad_u(x, params, g)
        else:
            stochastic_grad_u(x, params, g, gen, work)
        a = alpha[k]
        if _draw(k, gen, injected, noise_a, noise_c, lam, z):
            for i in range(d):
                x[i] = x[i] - a * g[i] + (_rotated(basis, z, i) if rotate else z[i])
        else:
            for i in range(d):
                x[i] = x[i] - a * g[i]
        if not _finite(x):
            _copy(x, theta)
            return k
        s = store[k]
        if s >= 0:
            for i in range(d):
                out[s, i] = x[i]
    _copy(x, theta)
    return -1


@jit(cache=False)
def sghmc_chain(
    theta,
    velocity,
    gen,
    grad_u,
    stochastic_grad_u,
    params,
    work,
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
    x = _copy(theta, np.empty(d))
    v = _copy(velocity, np.empty(d))
    g = np.empty(d)
    z = np.empty(d)
    keep = 1.0 - friction
    for k in range(k0, k1):
        for i in range(d):
            x[i] += v[i]
        if stochastic_grad_u is None:
            grad_u(x, params, g)
        else:
            stochastic_grad_u(x, params, g, gen, work)
        a = alpha[k]
        if _draw(k, gen, injected, noise_a, noise_c, lam, z):
            for i in range(d):
                v[i] = keep * v[i] - a * g[i] + (_rotated(basis, z, i) if rotate else z[i])
        else:
            for i in range(d):
                v[i] = keep * v[i] - a * g[i]
        if not (_finite(x) and _finite(v)):
            _copy(x, theta)
            _copy(v, velocity)
            return k
        s = store[k]
        if s >= 0:
            for i in range(d):
                out[s, i] = x[i]
    _copy(x, theta)
    _copy(v, velocity)
    return -1

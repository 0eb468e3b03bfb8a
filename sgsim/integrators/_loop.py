"""The generic compiled loops, and the helpers every step function shares (private).

An algorithm provides one compiled ``step``; :func:`chain_loop` and :func:`ensemble_loop`
wrap it, once per step function and process, into the loop that advances a chunk of
replicas over a block of steps in place. The loop owns everything that is not the
algorithm: copying a replica's state into buffers of its own (so that two threads never
write the same cache line step after step), the finite check, storing draws or running
moments, and skipping replicas that diverged.

Step functions
--------------
Independent chains (``coupling = "independent"``)::

    step(x, g, z, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, work, rng, inj)

advances one chain by the ``j``-th step of the block: ``x`` is the chain's state, shape
``(n_state, d)`` (row 0 is ``theta``); ``g`` and ``z`` are ``(d,)`` buffers; ``alpha`` the
block's step sizes; ``consts`` the algorithm's constants (a tuple); ``noise`` the block's
noise factors ``(sd, basis, rotate)`` (:func:`draw_noise`); ``work`` and ``rng`` the chain's
minibatch buffer and stream state (:mod:`sgsim.rng`); ``inj`` standard normals that replace
the stream's (shape ``(nb, d)``, or empty).

Interacting ensembles (``coupling = "interacting"``)::

    step(X, G, B, P, W, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works, rngs, inj, stats)

advances one ensemble: ``X`` has shape ``(n_state, L, d)``; ``G`` and ``B`` are ``(L, d)``
buffers, ``P`` an ``(L, L)`` buffer for pair terms and ``W`` an ``(L * L,)`` one; ``works`` and
``rngs`` hold one row per particle; ``inj`` standard normals that replace the streams' (shape
``(nb, L, d)``, or empty); ``stats`` is a ``(n_stats,)`` buffer the step may fill with per-step
statistics (e.g. the bandwidth it used), stored with each kept draw.

Stores
------
``store[j]`` says what happens after step ``j`` of the block: ``s >= 0`` stores ``theta``
as draw ``s``, ``MOMENTS`` (-2) adds it to the replica's running mean and covariance
(Welford's update; for an ensemble, each particle's), ``NOTHING`` (-1) does neither.

Noise
-----
The Gaussian part of a step, whatever its covariance, is drawn as ``basis @ (sd[j] * xi)``
with ``xi`` standard normals: ``sd`` (shape ``(nb, d)``) holds the square roots of the
covariance's eigenvalues at each step and ``basis`` its eigenvectors, which
``rotate = False`` declares to be the identity (diagonal covariances). A step whose ``sd`` is
zero draws nothing, so a noise-free stage leaves the stream untouched.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._jit import jit
from ..rng import STATE_WORDS, standard_normal

NOTHING = -1
MOMENTS = -2


@jit(inline=True)
def gradient(x, g, grad_u, stochastic_grad_u, params, work, rng):
    """``g = grad U(x)``: the exact gradient, or the target's stochastic one when it has one."""
    # pruned at compile time: one specialisation per gradient kind, the exact path unchanged
    if stochastic_grad_u is None:
        grad_u(x, params, g)
    else:
        stochastic_grad_u(x, params, g, rng, work)


@jit(inline=True)
def draw_noise(z, j, rng, noise, inj):
    """Write step ``j``'s noise, in the noise's eigenbasis, into ``z``; False when it is zero."""
    sd = noise[0]
    drawn = inj.shape[0] == 0
    any_noise = False
    for i in range(z.shape[0]):
        any_noise = any_noise or sd[j, i] != 0.0
    if not any_noise:
        return False
    for i in range(z.shape[0]):
        xi = standard_normal(rng) if drawn else inj[j, i]
        z[i] = sd[j, i] * xi
    return True


@jit(inline=True)
def noise_component(noise, z, i):
    """Component ``i`` of the noise in the state's coordinates: ``(basis @ z)[i]``."""
    if not noise[2]:
        return z[i]
    basis = noise[1]
    acc = 0.0
    for m in range(z.shape[0]):
        acc += basis[i, m] * z[m]
    return acc


@jit(inline=True)
def copy_into(src, dst):
    # an explicit loop: a slice assignment here triples the compile time of a kernel
    for i in range(src.shape[0]):
        dst[i] = src[i]
    return dst


@jit(inline=True)
def all_finite(x):
    # no early exit: a branch-free loop is faster on short rows
    ok = True
    for i in range(x.shape[0]):
        ok = ok and math.isfinite(x[i])
    return ok


@jit(inline=True)
def welford_update(x, count, mean, m2, c, delta):
    """Add ``x`` (shape ``(d,)``) to replica ``c``'s running mean and co-moment matrix."""
    count[c] += 1
    n = count[c]
    d = x.shape[0]
    for i in range(d):
        delta[i] = x[i] - mean[c, i]
        mean[c, i] += delta[i] / n
    # M2 += (x - mean_old)(x - mean_new)^T, symmetric in exact arithmetic; computed as
    # delta_old[i] * (x[m] - mean_new[m]) for every (i, m)
    for i in range(d):
        for m in range(d):
            m2[c, i, m] += delta[i] * (x[m] - mean[c, m])


@functools.cache
def chain_loop(step):
    """The compiled loop of an independent-chain ``step`` (one per step function and process)."""

    @jit(cache=False)
    def loop(state, rngs, works, failed, grad_u, stochastic_grad_u, params, alpha, consts, noise, k0, store, out,
             count, mean, m2, injected):  # fmt: skip
        n_chains, n_state, d = state.shape
        nb = alpha.shape[0]
        x = np.empty((n_state, d))
        g = np.empty(d)
        z = np.empty(d)
        delta = np.empty(d)
        st = np.empty(STATE_WORDS, np.uint64)
        for c in range(n_chains):
            if failed[c] >= 0:
                continue
            for r in range(n_state):
                copy_into(state[c, r], x[r])
            copy_into(rngs[c], st)
            work = works[c]
            inj = injected[c]
            for j in range(nb):
                step(x, g, z, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, work, st, inj)
                ok = True
                for r in range(n_state):
                    ok = ok and all_finite(x[r])
                if not ok:
                    failed[c] = k0 + j
                    break
                s = store[j]
                if s >= 0:
                    copy_into(x[0], out[c, s])
                elif s == MOMENTS:
                    welford_update(x[0], count, mean, m2, c, delta)
            for r in range(n_state):
                copy_into(x[r], state[c, r])
            copy_into(st, rngs[c])

    return loop


@functools.cache
def ensemble_loop(step):
    """The compiled loop of an interacting-ensemble ``step`` (``step`` may itself run in parallel)."""

    @jit(cache=False)
    def loop(state, rngs, works, failed, grad_u, stochastic_grad_u, params, alpha, consts, noise, k0, store, out,
             count, mean, m2, injected, stats_out):  # fmt: skip
        n_rep, n_state, n_part, d = state.shape
        nb = alpha.shape[0]
        g = np.empty((n_part, d))
        b = np.empty((n_part, d))
        pairs = np.empty((n_part, n_part))
        w = np.empty(n_part * n_part)
        delta = np.empty(d)
        stats = np.zeros(stats_out.shape[2])
        for r in range(n_rep):
            if failed[r] >= 0:
                continue
            x = state[r]
            inj = injected[r]
            for j in range(nb):
                step(x, g, b, pairs, w, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works[r], rngs[r],
                     inj, stats)  # fmt: skip
                ok = True
                for s_ in range(n_state):
                    for p in range(n_part):
                        ok = ok and all_finite(x[s_, p])
                if not ok:
                    failed[r] = k0 + j
                    break
                s = store[j]
                if s >= 0:
                    for p in range(n_part):
                        copy_into(x[0, p], out[r, s, p])
                    for q in range(stats.shape[0]):
                        stats_out[r, s, q] = stats[q]
                elif s == MOMENTS:
                    for p in range(n_part):
                        welford_update(x[0, p], count, mean, m2, r * n_part + p, delta)

    return loop

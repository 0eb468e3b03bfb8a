r"""Hamiltonian SGLD with repulsive forces (SGHMC+R): SGLD+R with momenta, the kernel as a curl matrix.

"Stochastic Gradient MCMC with Repulsive Forces" (eq. 5) allows a curl matrix ``Q_K`` in the
interacting recipe and leaves the Hamiltonian variant open. Here it is, derived in the theory
page :ref:`theory-hamiltonian-repulsive`. On the positions ``Z`` and momenta ``P`` of ``L``
particles (rows), with ``H = sum_l U(z_l) + |P|^2 / 2`` (unit mass, target ``exp(-H / T)``),
the RBF kernel ``K_ij = exp(-|z_i - z_j|^2 / h)`` and ``c = 1/L`` (or 1), take

.. math::

    D = c \begin{pmatrix} 0 & 0 \\ 0 & C\,K \end{pmatrix}, \qquad
    Q = c \begin{pmatrix} 0 & -K \\ K & 0 \end{pmatrix} \quad (\otimes I_d).

The recipe's correction ``Gamma_i = sum_j d_j (D_ij + Q_ij)`` then lives on the momenta and is
SVGD's repulsion ``c Gamma_K``, ``Gamma_K = (2/h)(diag(K 1) Z - K Z)``, and the dynamics read

.. math::

    dZ = c\,K P\,dt, \qquad
    dP = c\big(-K\nabla U(Z) + T\,\Gamma_K - C\,K P\big)\,dt + \sqrt{2\,c\,C\,T\,K}\;dW:

SVGD's velocity field is the force on the momenta, the positions move with the
kernel-smoothed momenta, and the friction and the noise are correlated across particles by
``K``. With ``K = I`` (a bandwidth far below the particles' spacing) it is ``L`` independent
SGHMC chains; ``exp(-H / T)`` is stationary by construction (Ma, Chen and Fox's recipe).

Discretisation: the cyclical paper's SGHMC (its §2) in its units, ``alpha = epsilon^2`` for the
step, ``eta = epsilon C`` for the friction and ``v = epsilon p`` for the velocity (the state
``velocity``), with the position first and the gradient at the moved position:

.. math::

    Z_k = Z_{k-1} + c\,K(Z_{k-1})\,V_{k-1}, \qquad
    V_k = V_{k-1} - \eta\,c\,K_k V_{k-1} + \alpha_k\,c\,\big(-K_k G_k + T_k\Gamma_k\big)
          + \sqrt{2\,\eta\,\alpha_k\,c\,T_k}\; C_{K_k}\,\Xi_k,

with ``K_k``, ``Gamma_k`` and the gradients ``G_k`` at ``Z_k``, ``C_K C_K^T = K`` and ``Xi_k``
standard normals (``L x d``). Each half freezes the kernel at the start of its move: a
first-order splitting (weak order 1 in ``epsilon = sqrt(alpha)``, so a stationary bias of order
``epsilon``), as the cyclical paper's SGHMC is; neither half leaves ``exp(-H / T)`` invariant
alone, their sum does. ``v_0 = 0`` unless ``init_velocity`` is given.

Bandwidth, temperature, minibatches and the Cholesky factor are SGLD+R's
(:mod:`sgsim.integrators.sgld_repulsive`, whose compiled helpers this step calls): a fixed
``h`` or the median heuristic with its part of ``Gamma`` (``median_correction``); ``T_k``
multiplies ``Gamma`` as well as the noise, except at ``T = 0`` (the exploration stage of
``csghmc_repulsive``), where ``Gamma`` keeps full strength and the step is SVGD with momentum;
minibatch gradients from each particle's own stream before its normals; ``K + delta I``
with the smallest working jitter when ``K`` is numerically singular (recorded in
``sample_stats["jitter"]``). With two particles the median kernel is the constant
``[[1, 1/2], [1/2, 1]]``, ``Gamma`` vanishes, and the step is affine on a linear-Gaussian
target: its exact law follows from the usual recursions (the theory page).

``normalise=False`` drops ``c = 1/L``: time runs ``L`` times faster, and the friction per step,
``eta c lambda(K)``, can reach ``eta L``: keep ``eta <= 2 / L`` there. Emulated gradient noise
(a target's ``grad_noise_cov``) is not added to ensembles, so ``noise_correction`` is refused.

Stability. With the particles further apart than the bandwidth (``K = I``, no repulsion) each
particle runs SGHMC with the position step ``c v`` and the friction ``eta c``: on
``U = L x^2 / 2`` the companion matrix ``[[1, c], [-alpha c L, 1 - eta c - alpha c^2 L]]`` has
``det = 1 - eta c`` and ``tr = 2 - eta c - alpha c^2 L``, and by the Jury criterion it is stable
exactly while ``alpha c^2 L < 2 (2 - eta c)``. That limit is *necessary* (a spread ensemble is
unstable beyond it, and a run whose every step is beyond it is refused before any work, an
error naming ``step_size``); with the kernel's coupling the ensemble's own limit depends on
``K`` and is not checked (``step_check`` of :func:`sgsim.sample` overrides the check).

Cost per step: two kernel matrices (before and after the position move), SGLD+R's drift and
Cholesky factor, and the products ``K V``: ``O(L^3 / 3 + L^2 d)``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import prange

from .. import dynamics
from .._jit import jit
from .._validate import ParameterError
from ..rng import standard_normal
from ._base import (
    CONSTANT_OPTIONS,
    CYCLICAL_OPTIONS,
    INTERACTING,
    Algorithm,
    Method,
    Option,
    check_bool,
    check_unit_interval,
    constant_schedule,
    curvature_limit,
    cyclical_schedule,
)
from ._loop import gradient
from .sgld_repulsive import _median_correction, _report, cholesky_with_jitter, median_pairs
from .svgd import check_bandwidth, kernel_drift, kernel_from_sq_distances, median_sq_distance, pair_sq_distances

__all__ = ["SGHMC_REPULSIVE", "METHOD", "CYCLICAL", "Constants", "algorithm", "step_limit"]


class Constants(NamedTuple):
    """What the step reads: the fixed bandwidth (0: median heuristic), ``c = 1/L`` (or 1), the
    friction ``eta``, the factor of ``Gamma`` (1; 0 drops it, for checks only) and whether the
    median's derivative is part of ``Gamma`` (1.0) or not (0.0).
    """

    bandwidth: float
    scale: float
    friction: float
    gamma: float
    median_correction: float


@jit(inline=True)
def _kernel_times(P, V, B):
    """``B = K V`` (``P`` holds ``K``)."""
    n_part, d = V.shape
    for i in prange(n_part):
        for a in range(d):
            acc = 0.0
            for m in range(n_part):
                acc += P[i, m] * V[m, a]
            B[i, a] = acc


def _sghmcr_step(X, G, B, P, W, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works, rngs, inj, stats):
    Z = X[0]
    V = X[1]
    n_part, d = Z.shape
    fixed_h = consts.bandwidth
    scale = consts.scale  # c = 1 / L, or 1
    median = fixed_h <= 0.0
    correct = median and consts.median_correction > 0.0
    sd = noise[0]
    noisy = noise[3]
    temp = noise[4][j]
    # the position moves first, by the momenta smoothed with the kernel where it stands
    pair_sq_distances(Z, P)
    h = fixed_h if not median else median_sq_distance(P, W) / math.log(n_part)
    kernel_from_sq_distances(P, h)
    _kernel_times(P, V, B)
    for i in prange(n_part):
        for a in range(d):
            Z[i, a] = Z[i, a] + scale * B[i, a]
    for i in prange(n_part):
        gradient(Z[i], G[i], grad_u, stochastic_grad_u, params, works[i], rngs[i])
    pair_sq_distances(Z, P)
    h = fixed_h
    p_lo = q_lo = p_hi = q_hi = 0
    if median:
        med = median_sq_distance(P, W)
        h = med / math.log(n_part)
        if correct and noisy[j]:
            p_lo, q_lo, p_hi, q_hi = median_pairs(P, med)
    kernel_from_sq_distances(P, h)
    stats[0] = h
    # SVGD's velocity field, the force on the momenta: -K G + T Gamma (Gamma at full strength at T = 0)
    coef = consts.gamma * (temp if temp > 0.0 else 1.0)
    kernel_drift(Z, G, P, B, coef * (2.0 * (1.0 / h)))
    if correct and noisy[j]:
        _median_correction(Z, P, B, h, coef, p_lo, q_lo, p_hi, q_hi)
    # the friction's K V into G (the gradients are used), before the factorisation overwrites K
    _kernel_times(P, V, G)
    eps = alpha[j] * scale
    fric = consts.friction * scale
    for i in prange(n_part):
        for a in range(d):
            V[i, a] = V[i, a] - fric * G[i, a] + eps * B[i, a]
    if not noisy[j]:
        return
    C, delta = cholesky_with_jitter(P)
    if delta < 0.0:  # no jitter helps: the particles are not finite; the loop reports it
        for i in range(n_part):
            V[i, 0] = np.nan
        return
    stats[1] = max(stats[1], delta)
    # G takes the standard normals Xi, each particle's from its own stream
    if inj.shape[0] > 0:
        for i in range(n_part):
            for a in range(d):
                G[i, a] = inj[j, i, a]
    else:
        for i in prange(n_part):
            for a in range(d):
                G[i, a] = standard_normal(rngs[i])
    c = sd[j, 0] * math.sqrt(scale)  # sqrt(2 eta alpha T) * sqrt(c)
    for i in prange(n_part):
        for a in range(d):
            acc = 0.0
            for m in range(i + 1):
                acc += C[i, m] * G[m, a]
            V[i, a] = V[i, a] + c * acc


# compiled in memory, and per target into the loops cached on disk (see svgd.py)
step = jit(_sghmcr_step, cache=False)
parallel_step = jit(_sghmcr_step, cache=False, parallel=True)


def _noise(block, target, options):
    # 2 eta alpha_k T_k per coordinate of the velocity; the kernel's correlation is the step's
    d = target.dim
    return dynamics.sghmc_noise(block.step_size, block.temperature, np.zeros((d, d)), options["friction"])


def _check(options: dict, target) -> dict:
    if options["noise_correction"]:
        raise ParameterError(
            "noise_correction",
            "noise_correction must be False for an ensemble: no emulated gradient noise is added to its "
            "particles' gradients, so there is none to correct",
        )
    return options


def step_limit(target, options):
    """``2 (2 - eta c) / (c^2 L)``: a spread ensemble's SGHMC companion matrix (module docs); necessary."""
    c = 1.0 / options["n_particles"] if options["normalise"] else 1.0
    eta = options["friction"]
    return curvature_limit(
        target, 2.0 * (2.0 - eta * c) / (c * c), f"step_size * c^2 * L < 2 (2 - eta c), c = {c:g}, eta = {eta:g}"
    )


def algorithm(name: str, summary: str, gamma: float = 1.0) -> Algorithm:
    """The record of the step with ``Gamma`` multiplied by ``gamma`` (1: the sampler; 0 drops it, which
    is not a sampler, for the checks that must tell the difference).
    """
    return Algorithm(
        name=name,
        summary=summary,
        coupling=INTERACTING,
        state=("theta", "velocity"),
        options={
            "friction": Option(0.1, check_unit_interval, "eta in (0, 1]: the velocity keeps 1 - eta c K per step"),
            "bandwidth": Option(
                "median", check_bandwidth, "RBF bandwidth h > 0, or 'median' (median heuristic each step)"
            ),
            "normalise": Option(True, check_bool, "divide the kernel terms (Q and D) by the number of particles L"),
            "median_correction": Option(
                True, check_bool, "add the median bandwidth's derivative to Gamma (False: the uncorrected, biased step)"
            ),
        },
        units=(
            "cyclical paper's SGHMC: alpha = epsilon^2, eta = epsilon C, velocity epsilon p; theta += c K v, then "
            "v += -eta c K v + alpha c (-K grad U + T Gamma) + N(0, 2 eta alpha c T K) per coordinate, c = 1/L or 1"
        ),
        step=step,
        parallel_step=parallel_step,
        constants=lambda options: Constants(
            0.0 if options["bandwidth"] == "median" else float(options["bandwidth"]),
            1.0 / options["n_particles"] if options["normalise"] else 1.0,
            float(options["friction"]),
            float(gamma),
            1.0 if options["median_correction"] else 0.0,
        ),
        noise=_noise,
        check=_check,
        stats=("bandwidth", "jitter"),
        serial_blas=True,
        report=_report,
        step_limit=step_limit,
        asymptotically_exact=gamma == 1.0,
        references="[Rep] eq. 5 with a curl matrix Q_K (derived here); [cSG] §2 for the discretisation",
    )


SGHMC_REPULSIVE = algorithm(
    "sghmc_repulsive",
    "Hamiltonian SGLD+R: SVGD's velocity field as the force on momenta, friction and noise correlated by K",
)

METHOD = Method(
    "sghmc_repulsive",
    SGHMC_REPULSIVE,
    constant_schedule,
    CONSTANT_OPTIONS,
    "Hamiltonian SGLD with repulsive forces (SGHMC+R): an ensemble of n_particles with momenta, constant step",
    "[Rep] eq. 5 with Q_K = c [[0, -K], [K, 0]], D_K = c [[0, 0], [0, C K]]; [cSG] §2",
)

CYCLICAL = Method(
    "csghmc_repulsive",
    SGHMC_REPULSIVE,
    cyclical_schedule,
    CYCLICAL_OPTIONS,
    "cyclical SGHMC+R: cosine step sizes, SVGD with momentum at T=0, SGHMC+R sampling at T=1",
    "[cSG] eq. 2 and Algorithm 1 applied to [Rep] eq. 5 with a curl matrix",
    example={"step_size": 0.05, "n_cycles": 2},
)

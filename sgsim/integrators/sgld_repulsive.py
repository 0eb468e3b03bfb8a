r"""SGLD with repulsive forces (SGLD+R): SVGD's drift plus the noise that makes it a sampler.

An ensemble of ``L`` particles, the rows of ``Z``, moves together. With the RBF kernel
``K_ij = exp(-|z_i - z_j|^2 / h)``, ``G`` the gradients of ``U`` at the particles and a step
``epsilon_k`` at temperature ``T_k``:

.. math::

    Z \leftarrow Z + \frac{\epsilon_k}{L}\Big(-K G + T_k\,\Gamma\Big)
        + \sqrt{\frac{2 \epsilon_k T_k}{L}}\; C_K\, \Xi,
    \qquad \Gamma = \frac{2}{h}\big(\operatorname{diag}(K\mathbf 1) Z - K Z\big),
    \quad C_K C_K^\top = K,

with ``Xi`` an ``L x d`` matrix of independent standard normals, so that the noise has
covariance ``(2 epsilon_k T_k K / L) (x) I_d`` ("Stochastic Gradient MCMC with Repulsive
Forces", eqs. 5, 7 and 8). It is the Ma-Chen-Fox recipe with the state-dependent diffusion
``D = K / L`` (times ``I_d``): the drift ``-D grad U + Gamma(D)``, where
``Gamma_i = sum_j d D_ij / d z_j`` is exactly SVGD's repulsion, leaves the product of the
target over the particles stationary. The printed paper subtracts ``Gamma`` (eqs. 2 and 5-8);
with that sign the particles attract and collapse, and the Fokker-Planck residual of the
product target does not vanish. The sign here is the one the stationarity argument requires.
``sgld_repulsive_minus_gamma`` runs the printed sign: it is not a sampler, and exists to be
checked against.

Bandwidth: a fixed ``h``, or the median heuristic ``h = median_{i<j} |z_i - z_j|^2 / log L``
(the default). The median makes ``D`` depend on every particle through ``h``, and then
``Gamma`` has a second part, ``sum_j K_ij |z_i - z_j|^2 / h^2 * d h / d z_j``, nonzero only for
the particles of the median pair(s) (``d h / d z_p = 2 (z_p - z_q) / log L`` for the middle
pair ``(p, q)``, split between the two middle pairs when their count is even). The paper does
not say (its authors' code uses a fixed ``h``); without that part the step is biased: on
``N(0, I_2)`` with 10 particles the stationary variance comes out 2 to 2.5% low, and with two
particles, whose median kernel is the constant ``[[1, 1/2], [1/2, 1]]``, the correct ``Gamma``
vanishes while the uncorrected one repels as ``log 2 (z_1 - z_2) / |z_1 - z_2|^2`` and blows
up. ``median_correction=False`` runs the uncorrected step, for comparison. The median is not
differentiable where the middle pair changes, but it is continuous, so ``D`` is Lipschitz
and the Fokker-Planck argument holds with the derivative taken where it exists.

Stability: the drift is SVGD's with the noise added, so SVGD's limits hold
(:mod:`sgsim.integrators.svgd`): ``step_size * c * L < 2`` is necessary (``c = 1/L_p``, or 1 without
``normalise``; for random batches ``c`` is one over the largest batch), and a run whose every
step is beyond it is refused before any work. At ``T = 0`` the step is SVGD's.

Temperature: ``T_k`` multiplies the repulsion as well as the noise variance, which makes the
step a sampler of ``pi^(1/T)`` (the recipe applied to ``U / T``, time rescaled by ``T``). At
``T = 0`` (the exploration stage of ``csgld_repulsive``) the step is SVGD's instead, with the
repulsion at full strength and no noise: the tempered drift would drop the repulsion along with
the noise and let the particles collapse to one point per mode, leaving ``K`` singular for the
sampling stage that follows. Neither paper has the cyclical variant; it is the cosine
schedule and exploration stage of "Cyclical Stochastic Gradient MCMC for Bayesian Deep
Learning" applied to this step.

The noise factor: ``C_K`` is the Cholesky factor of ``K``, computed afresh at every noisy step
by LAPACK through numba, with BLAS held to one thread for the run (a threaded factorisation's
bits depend on its thread count; see ``Algorithm.serial_blas``).
``K`` is positive definite for distinct particles, but numerically singular when particles
nearly coincide or the bandwidth dwarfs their spread; then ``K + delta I`` is factored with
the smallest ``delta`` in ``1e-10, 1e-9, ..., 1e-4`` that works, which adds independent noise
of variance ``2 epsilon T delta / L`` per coordinate. The largest ``delta`` an ensemble has
needed so far is recorded with each kept draw (``sample_stats["jitter"]``) and at the end
(``constant_data["final_jitter"]``), and :func:`sgsim.sample` warns when it went beyond
``1e-8``. With the median bandwidth a few hundred particles in two dimensions already need
``1e-10``: an RBF kernel matrix of many nearby points has eigenvalues below the rounding
error of its largest. Since ``K`` is positive semidefinite in exact arithmetic, rounding alone
never calls for much more; a larger jitter means something else is wrong.
A kernel that no jitter up to ``1e-4`` makes factorable (non-finite particles) marks the
ensemble as diverged.

``normalise=False`` drops the ``1/L`` of drift and noise alike: time runs ``L`` times faster
(the authors' code runs this way). Minibatch gradients draw from each particle's own stream
before its normals, so an ensemble's bits do not depend on the number of threads.

Emulated gradient noise (a target's ``grad_noise_cov``) is not added to ensembles, as for
SVGD; real minibatch gradients (a target's stochastic gradient) are used when present.

Cost per noisy step: SVGD's ``O(L^2 d)`` plus the Cholesky factor, ``L^3 / 3`` multiply-adds,
and the product ``C_K Xi``, ``L^2 d / 2`` (measured on the 3x3 mixture: 0.17 ms at ``L = 100``,
20 ms at ``L = 1000``, with the factor computed at every step).

Large ensembles: ``sgld_repulsive_rb``. The paper leaves ``L >> 100`` open. Here, at every
step, the particles are shuffled (Fisher-Yates, from particle 0's stream) and cut into batches
of ``batch_size = p`` (the remainder joins the last batch), and each batch takes the SGLD+R
step of its own ``p`` particles: kernel, drift, ``Gamma`` and noise ``(2 epsilon T / p) K_B
(x) I_d`` with ``K_B`` the batch's kernel matrix, in the style of the random batch methods of
Jin, Li and Liu ("Random batch methods (RBM) for interacting particle systems", 2020). The
cost per step is ``O(L p d + L p^2)``. Each batch step is an exact SGLD+R step of that batch,
which leaves the product target of its particles (and so of all ``L``) stationary; a
composition of such steps does too. What changes is the dynamics (each particle feels ``p - 1``
random partners per step instead of all), not the stationary law. A fixed bandwidth is
required: the median of a few particles is noise.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import prange

from .. import dynamics
from .._jit import jit
from .._validate import ParameterError, integer
from ..rng import integers, standard_normal
from ._base import (
    CONSTANT_OPTIONS,
    CYCLICAL_OPTIONS,
    INTERACTING,
    Algorithm,
    Method,
    Option,
    check_bool,
    constant_schedule,
    curvature_limit,
    cyclical_schedule,
)
from ._loop import gradient
from .svgd import check_bandwidth, kernel_drift, kernel_from_sq_distances, median_sq_distance, pair_sq_distances
from .svgd import step_limit as _svgd_limit

__all__ = [
    "SGLD_REPULSIVE",
    "METHOD",
    "CYCLICAL",
    "MINUS_GAMMA",
    "JITTERS",
    "QUIET_JITTER",
    "cholesky_with_jitter",
    "median_pairs",
    "SGLD_REPULSIVE_RB",
    "RANDOM_BATCH",
    "Constants",
    "BatchConstants",
]

# the jitters tried in turn when K alone cannot be factored (K has a unit diagonal)
JITTERS = (1e-10, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4)


@jit
def cholesky_with_jitter(P):
    """``(C, delta)``: the lower Cholesky factor of ``P + delta I`` with the smallest ``delta`` of
    ``0, 1e-10, ..., 1e-4`` that works (``P`` gets the jitter on its diagonal); ``delta = -1`` and
    a zero ``C`` when none does.
    """
    delta = 0.0
    for attempt in range(len(JITTERS) + 1):
        if attempt > 0:
            step = JITTERS[attempt - 1] - delta
            delta = JITTERS[attempt - 1]
            for i in range(P.shape[0]):
                P[i, i] += step
        try:
            return np.linalg.cholesky(P), delta
        except Exception:  # noqa: S112 - not positive definite: try the next jitter
            continue
    return np.zeros_like(P), -1.0


@jit
def median_pairs(P, med):
    """The pairs whose squared distances are the two middle values of the upper triangle of ``P``.

    ``med`` is their median (``numpy.median``'s: the mean of the two middle values, or the
    middle value). Returns ``(p_lo, q_lo, p_hi, q_hi)``: the pair of the largest value
    ``<= med`` and of the smallest value ``>= med`` (the same pair when the count is odd).
    """
    n_part = P.shape[0]
    lo = -np.inf
    hi = np.inf
    p_lo = q_lo = p_hi = q_hi = 0
    for i in range(n_part):
        for m in range(i + 1, n_part):
            v = P[i, m]
            if med >= v > lo:
                lo = v
                p_lo = i
                q_lo = m
            if med <= v < hi:
                hi = v
                p_hi = i
                q_hi = m
    return p_lo, q_lo, p_hi, q_hi


@jit(inline=True)
def _median_correction(Z, P, B, h, coef, p_lo, q_lo, p_hi, q_hi):
    """Add ``coef`` times the part of ``Gamma`` that comes from the median bandwidth's dependence on ``Z``.

    With ``h = med / log L`` and ``med`` the mean of two middle squared distances
    ``|z_p - z_q|^2`` (one pair twice when their count is odd), ``d h / d z_p = (z_p - z_q) /
    log L`` per pair (and minus that for ``z_q``), and ``Gamma_i`` gains
    ``sum_j K_ij |z_i - z_j|^2 / h^2 * d h / d z_j``.
    """
    n_part, d = Z.shape
    scale = coef / (h * h * math.log(n_part))
    for i in prange(n_part):
        r_plo = 0.0
        r_qlo = 0.0
        r_phi = 0.0
        r_qhi = 0.0
        for a in range(d):
            r_plo += (Z[i, a] - Z[p_lo, a]) ** 2
            r_qlo += (Z[i, a] - Z[q_lo, a]) ** 2
            r_phi += (Z[i, a] - Z[p_hi, a]) ** 2
            r_qhi += (Z[i, a] - Z[q_hi, a]) ** 2
        # each pair carries half of the median: d med / d z_p = (1/2) 2 (z_p - z_q)
        w_lo = P[i, p_lo] * r_plo - P[i, q_lo] * r_qlo
        w_hi = P[i, p_hi] * r_phi - P[i, q_hi] * r_qhi
        for a in range(d):
            B[i, a] += scale * (w_lo * (Z[p_lo, a] - Z[q_lo, a]) + w_hi * (Z[p_hi, a] - Z[q_hi, a]))


class Constants(NamedTuple):
    """What the step reads: the fixed bandwidth (0: median heuristic), ``1 / L`` (or 1), the
    sign of Gamma (-1 only for the printed paper's sign) and whether the median's derivative
    is added (1.0) or not (0.0).
    """

    bandwidth: float
    scale: float
    sign: float
    median_correction: float


class BatchConstants(NamedTuple):
    """What the random-batch step reads: bandwidth, whether to normalise (1.0 / 0.0), sign, batch size."""

    bandwidth: float
    normalise: float
    sign: float
    batch_size: float


def _sgldr_step(X, G, B, P, W, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works, rngs, inj, stats):
    Z = X[0]
    n_part, d = Z.shape
    fixed_h = consts.bandwidth
    scale = consts.scale  # 1 / L, or 1
    sign = consts.sign  # +1; -1 for the printed paper's wrong sign
    median = fixed_h <= 0.0
    correct = median and consts.median_correction > 0.0
    sd = noise[0]
    noisy = noise[3]
    temp = noise[4][j]
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
    # T Gamma while sampling; at T = 0 the repulsion stays at full strength and the step is SVGD's
    coef = sign * (temp if temp > 0.0 else 1.0)
    kernel_drift(Z, G, P, B, coef * (2.0 * (1.0 / h)))
    eps = alpha[j] * scale
    if not noisy[j]:
        for i in prange(n_part):
            for a in range(d):
                Z[i, a] = Z[i, a] + eps * B[i, a]
        return
    if correct:
        _median_correction(Z, P, B, h, coef, p_lo, q_lo, p_hi, q_hi)
    C, delta = cholesky_with_jitter(P)
    if delta < 0.0:  # no jitter helps: the particles are not finite; the loop reports it
        for i in range(n_part):
            Z[i, 0] = np.nan
        return
    stats[1] = max(stats[1], delta)
    # G is free now: it takes the standard normals Xi, each particle's from its own stream
    if inj.shape[0] > 0:
        for i in range(n_part):
            for a in range(d):
                G[i, a] = inj[j, i, a]
    else:
        for i in prange(n_part):
            for a in range(d):
                G[i, a] = standard_normal(rngs[i])
    c = sd[j, 0] * math.sqrt(scale)  # sqrt(2 alpha T) * sqrt(1 / L)
    for i in prange(n_part):
        for a in range(d):
            acc = 0.0
            for m in range(i + 1):
                acc += C[i, m] * G[m, a]
            Z[i, a] = Z[i, a] + eps * B[i, a] + c * acc


# compiled in memory, and per target into the loops cached on disk (see svgd.py)
step = jit(_sgldr_step, cache=False)
parallel_step = jit(_sgldr_step, cache=False, parallel=True)


def _noise(block, target, options):
    # 2 alpha_k T_k I per coordinate; the kernel's correlation between particles is the step's
    d = target.dim
    return dynamics.sgld_noise(block.step_size, block.temperature, np.zeros((d, d)))


# a jitter up to this adds variance below any discretisation error of interest: recorded, not warned of
QUIET_JITTER = 1e-8


def _report(final: dict) -> str | None:
    jitter = final["jitter"]
    used = np.flatnonzero(jitter > QUIET_JITTER)
    if used.size == 0:
        return None
    names = used[:10].tolist()
    more = f" and {used.size - 10} more" if used.size > 10 else ""
    return (
        f"the kernel matrix of ensembles {names}{more} was numerically singular at some step: a jitter up to "
        f"{jitter.max():.0e} was added to its diagonal (extra independent noise of that relative size; "
        "see sample_stats['jitter']). A smaller bandwidth or fewer coinciding particles avoids it."
    )


def _algorithm(name: str, sign: float, summary: str) -> Algorithm:
    return Algorithm(
        name=name,
        summary=summary,
        coupling=INTERACTING,
        state=("theta",),
        options={
            "bandwidth": Option(
                "median", check_bandwidth, "RBF bandwidth h > 0, or 'median' (median heuristic each step)"
            ),
            "normalise": Option(True, check_bool, "divide drift and noise by the number of particles L"),
            "median_correction": Option(
                True, check_bool, "add the median bandwidth's derivative to Gamma (False: the uncorrected, biased step)"
            ),
        },
        units="drift step_size * (-K grad U + T Gamma) / L, noise covariance 2 * step_size * T * K / L per coordinate",
        step=step,
        parallel_step=parallel_step,
        constants=lambda options: Constants(
            0.0 if options["bandwidth"] == "median" else float(options["bandwidth"]),
            1.0 / options["n_particles"] if options["normalise"] else 1.0,
            sign,
            1.0 if options["median_correction"] else 0.0,
        ),
        noise=_noise,
        stats=("bandwidth", "jitter"),
        serial_blas=True,
        report=_report,
        step_limit=_svgd_limit,
        # the printed paper's -Gamma is a deliberately wrong sampler
        asymptotically_exact=sign > 0,
        references="[Rep] eqs. 5, 7, 8 (sign of Gamma and of the kernel term corrected); Ma, Chen and Fox (2015)",
    )


SGLD_REPULSIVE = _algorithm(
    "sgld_repulsive", 1.0, "SGLD with repulsive forces: SVGD's drift plus noise correlated through the kernel"
)

METHOD = Method(
    "sgld_repulsive",
    SGLD_REPULSIVE,
    constant_schedule,
    CONSTANT_OPTIONS,
    "SGLD with repulsive forces (SGLD+R): an ensemble of n_particles per chain, constant step size",
    "[Rep] §3.2, eqs. 5-8 with the sign of Gamma corrected",
)

CYCLICAL = Method(
    "csgld_repulsive",
    SGLD_REPULSIVE,
    cyclical_schedule,
    CYCLICAL_OPTIONS,
    "cyclical SGLD+R: cosine step sizes, SVGD exploration at T=0, SGLD+R sampling at T=1",
    "[cSG] eq. 2 and Algorithm 1 applied to [Rep] eqs. 5-8",
    example={"step_size": 0.05, "n_cycles": 2},
)

MINUS_GAMMA = Method(
    "sgld_repulsive_minus_gamma",
    _algorithm(
        "sgld_repulsive_minus_gamma",
        -1.0,
        "NOT A SAMPLER: SGLD+R with the printed paper's -Gamma, for Fokker-Planck checks",
    ),
    constant_schedule,
    CONSTANT_OPTIONS,
    "not a sampler: SGLD+R with the printed -Gamma (particles attract), kept for the Fokker-Planck checks",
    "[Rep] eqs. 2, 5-8 as printed",
)


# ----------------------------------------------------------------------------- random batches (large L)


@jit
def _batch_cholesky(K, C, n, jitter):
    """Lower Cholesky factor of ``K[:n, :n] + jitter I`` into ``C[:n, :n]``; False if not positive definite."""
    for i in range(n):
        for m in range(i + 1):
            acc = K[i, m] + (jitter if i == m else 0.0)
            for q in range(m):
                acc -= C[i, q] * C[m, q]
            if i == m:
                if not acc > 0.0:
                    return False
                C[i, i] = math.sqrt(acc)
            else:
                C[i, m] = acc / C[m, m]
    return True


def _rb_step(X, G, B, P, W, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works, rngs, inj, stats):
    Z = X[0]
    n_part, d = Z.shape
    h = consts.bandwidth
    normalise = consts.normalise > 0.0
    sign = consts.sign
    p = int(consts.batch_size)
    sd = noise[0]
    noisy = noise[3][j]
    temp = noise[4][j]
    for i in prange(n_part):
        gradient(Z[i], G[i], grad_u, stochastic_grad_u, params, works[i], rngs[i])
    # a fresh random partition: a Fisher-Yates shuffle from particle 0's stream, cut into
    # batches of p (the remainder joins the last batch)
    perm = np.arange(n_part)
    for m in range(n_part - 1):
        r = m + integers(rngs[0], 0, n_part - m)
        t = perm[m]
        perm[m] = perm[r]
        perm[r] = t
    n_batches = n_part // p
    inv_h = 1.0 / h
    coef = sign * (temp if temp > 0.0 else 1.0) * (2.0 * inv_h)
    stats[0] = h
    jitter = np.zeros(n_batches)  # per batch, reduced after the parallel loop
    for b in prange(n_batches):
        start = b * p
        size = p if b < n_batches - 1 else n_part - start
        K = P[start : start + size, :size]
        C = P[start : start + size, size : 2 * size]
        for m in range(size):
            K[m, m] = 1.0
            for q in range(m + 1, size):
                acc = 0.0
                for a in range(d):
                    diff = Z[perm[start + m], a] - Z[perm[start + q], a]
                    acc += diff * diff
                K[m, q] = math.exp(-acc * inv_h)
                K[q, m] = K[m, q]
        c_len = 1.0 / size if normalise else 1.0
        eps = alpha[j] * c_len
        # the batch's drift into B (rows in batch order)
        for m in range(size):
            zi = perm[start + m]
            for a in range(d):
                pull = 0.0
                push = 0.0
                for q in range(size):
                    zq = perm[start + q]
                    pull += K[m, q] * G[zq, a]
                    push += K[m, q] * (Z[zi, a] - Z[zq, a])
                B[start + m, a] = coef * push - pull
        if noisy:
            delta = 0.0
            ok = _batch_cholesky(K, C, size, 0.0)
            for attempt in range(len(JITTERS)):
                if ok:
                    break
                delta = JITTERS[attempt]
                ok = _batch_cholesky(K, C, size, delta)
            if not ok:  # no jitter helps: the particles are not finite; the loop reports it
                for m in range(size):
                    for a in range(d):
                        W[(start + m) * d + a] = np.nan
                continue
            jitter[b] = delta
            # each particle's normals from its own stream, into G's rows (gradients are used)
            for m in range(size):
                zi = perm[start + m]
                for a in range(d):
                    G[zi, a] = inj[j, zi, a] if inj.shape[0] > 0 else standard_normal(rngs[zi])
            c = sd[j, 0] * math.sqrt(c_len)
            for m in range(size):
                zi = perm[start + m]
                for a in range(d):
                    acc = 0.0
                    for q in range(m + 1):
                        acc += C[m, q] * G[perm[start + q], a]
                    W[(start + m) * d + a] = Z[zi, a] + eps * B[start + m, a] + c * acc
        else:
            for m in range(size):
                zi = perm[start + m]
                for a in range(d):
                    W[(start + m) * d + a] = Z[zi, a] + eps * B[start + m, a]
    stats[1] = max(stats[1], jitter.max())
    for m in prange(n_part):
        zi = perm[m]
        for a in range(d):
            Z[zi, a] = W[m * d + a]


# compiled in memory, and per target into the loops cached on disk (see svgd.py): the table of
# jitters it reads is a tuple of numbers, which the generated module can hold
rb_step = jit(_rb_step, cache=False)
rb_parallel_step = jit(_rb_step, cache=False, parallel=True)


def _check_batch_size(name: str, value):
    return integer(name, value, low=2)


def _rb_check(options: dict, target) -> dict:
    if options["bandwidth"] == "median":
        raise ParameterError(
            "bandwidth",
            "sgld_repulsive_rb needs a fixed bandwidth h > 0: the median of a batch of a few particles is noise",
        )
    if options["batch_size"] > options["n_particles"]:
        raise ParameterError(
            "batch_size", f"batch_size must be <= n_particles ({options['n_particles']}), got {options['batch_size']}"
        )
    return options


def _rb_limit(target, options):
    # the necessary limit of SVGD's drift with c = 1 / (the largest batch): the last batch takes
    # the remainder, n_particles mod batch_size, on top of its batch_size particles
    if not options["normalise"]:
        return curvature_limit(target, 2.0, "step_size * L < 2, particles further apart than h")
    p, n = options["batch_size"], options["n_particles"]
    largest = p + n % p
    return curvature_limit(target, 2.0 * largest, f"step_size * L / {largest} < 2, the largest batch of {largest}")


SGLD_REPULSIVE_RB = Algorithm(
    name="sgld_repulsive_rb",
    summary="SGLD+R in random batches: each step, every particle interacts with the p-1 others of its batch",
    coupling=INTERACTING,
    state=("theta",),
    options={
        "bandwidth": Option("median", check_bandwidth, "RBF bandwidth h > 0 (required: no median heuristic)"),
        "normalise": Option(True, check_bool, "divide a batch's drift and noise by its size"),
        "batch_size": Option(10, _check_batch_size, "particles per random batch p >= 2"),
    },
    units="per batch of p: drift step_size * (-K grad U + T Gamma) / p, noise 2 * step_size * T * K / p per coordinate",
    step=rb_step,
    parallel_step=rb_parallel_step,
    constants=lambda options: BatchConstants(
        float(options["bandwidth"]),
        1.0 if options["normalise"] else 0.0,
        1.0,
        float(options["batch_size"]),
    ),
    noise=_noise,
    check=_rb_check,
    stats=("bandwidth", "jitter"),
    report=_report,
    step_limit=_rb_limit,
    # K and C of each batch side by side, rows in batch order (the last batch up to 2p - 1 long)
    pair_shape=lambda n_particles, options: (n_particles, 4 * options["batch_size"]),
    references="[Rep] eqs. 5-8 in random batches (Jin, Li and Liu 2020, random batch methods)",
)

RANDOM_BATCH = Method(
    "sgld_repulsive_rb",
    SGLD_REPULSIVE_RB,
    constant_schedule,
    CONSTANT_OPTIONS,
    "SGLD+R with random batches of batch_size particles: cost per step grows like L * batch_size",
    "[Rep] eqs. 5-8; Jin, Li and Liu (2020)",
    example={"step_size": 0.05, "bandwidth": 1.0, "batch_size": 2},
)

r"""Stein variational gradient descent (SVGD) as an interacting-particle sampler.

An ensemble of ``L`` particles ``z_1 .. z_L`` moves together: with the RBF kernel
``k(z, z') = exp(-|z - z'|^2 / h)`` and ``K_ij = k(z_i, z_j)``,

.. math::

    z_i \leftarrow z_i + \frac{\epsilon_k}{L} \sum_{j=1}^L
        \Big[ -K_{ij} \nabla\tilde U(z_j) + \frac{2}{h} (z_i - z_j) K_{ij} \Big]

(Liu and Wang, 2016; "Stochastic Gradient MCMC with Repulsive Forces", eqs. 4 and 6, which
print the kernel term with the wrong sign: it must repel, as the authors' own code does).
The first term pulls each particle along the kernel-smoothed gradient, the second pushes
particles apart. ``normalise=False`` drops the ``1/L`` (a rescaling of time by ``L``). The
step size ``epsilon_k`` is the schedule's ``step_size``, in the cyclical paper's convention
for the drift (a lone particle does gradient descent with step ``epsilon``); SVGD has no
noise, so the temperature plays no part. The per-step formula is
:func:`sgsim.dynamics.svgd_velocity`.

Bandwidth: a fixed ``h > 0``, or ``"median"`` (the default): ``h = median_{i<j} |z_i - z_j|^2 /
log L`` recomputed at every step and recorded per kept draw (``sample_stats["bandwidth"]``).

Gradients: exact, or the target's stochastic gradient with one minibatch per particle, drawn
from the particle's own stream (``(seed, replica, particle)``), so an ensemble's bits do not
depend on the number of threads.

Why it is not an exact sampler at finite ``L``: SVGD is the deterministic flow
``dz/dt = -D grad H + Gamma`` with ``D = K / L``; the product density is not stationary for it
("Stochastic Gradient MCMC with Repulsive Forces", Proposition 3). Two particles on
``N(0, s^2)`` settle at ``+-a`` with ``a^2 = (h/4) log(1 + 4 s^2 / h) < s^2``: SVGD underestimates
the variance. Adding the noise ``N(0, 2 epsilon K / L)`` gives SGLD with repulsive forces.

Stability. On ``U = L x^2 / 2`` with the kernel frozen, one step maps the ensemble by
``Z <- (I - epsilon c L K + epsilon c (2 / h) (diag(K 1) - K)) Z`` (``c = 1/L_p`` with
``normalise``, ``L_p`` particles, else 1). Its Lipschitz constant, kernel term included, is at most
``epsilon c (L lambda_max(K) + (2 / h) lambda_max(diag(K 1) - K)) <= epsilon c L_p (L + 4 / h)``,
so ``epsilon c L_p (L + 4 / h) < 2`` is *sufficient* for a contraction of the frozen step (it depends
on ``h``, and on the ensemble through ``K``, so it is not checked). What is checked is a
*necessary* limit: an ensemble whose particles are further apart than the bandwidth has
``K = I`` and no repulsion, each particle steps ``z <- (1 - epsilon c L) z``, unstable once
``epsilon c L >= 2``. With ``L`` the target's :meth:`~sgsim.targets.Target.curvature_bound`, a run
whose every step is at or beyond ``2 / (c L)`` is refused before any work (an error naming
``step_size``); a schedule beyond it on at least half of its steps warns (``step_check`` of
:func:`sgsim.sample` overrides this).

Cost per step: ``L`` gradients, ``L (L - 1) / 2`` exponentials (each pair once), ``O(L^2 d)``
arithmetic, and with the median heuristic a selection over ``L (L - 1) / 2`` distances; the
particle loops run on numba's threads for large ensembles.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from numba import prange

from .._jit import jit
from .._validate import ParameterError, ParameterTypeError, positive_float
from ._base import INTERACTING, Algorithm, Method, Option, check_bool, constant_schedule, curvature_limit
from ._loop import gradient

__all__ = [
    "SVGD",
    "METHOD",
    "select",
    "median_sq_distance",
    "kernel_matrix",
    "kernel_drift",
    "check_bandwidth",
    "pair_sq_distances",
    "kernel_from_sq_distances",
    "Constants",
    "step_limit",
]


@jit(inline=True)
def _swap(a, i, j):
    t = a[i]
    a[i] = a[j]
    a[j] = t


@jit
def select(a, n, k):
    """Rearrange ``a[:n]`` so that ``a[k]`` is its ``k``-th smallest value and return it.

    Quickselect with a median-of-three pivot: ``a[:k] <= a[k] <= a[k+1:n]`` afterwards.
    Deterministic (no random pivots), so it gives the same bits on every run.
    """
    lo = 0
    hi = n - 1
    while hi > lo:
        mid = (lo + hi) // 2
        if a[mid] < a[lo]:
            _swap(a, mid, lo)
        if a[hi] < a[lo]:
            _swap(a, hi, lo)
        if a[hi] < a[mid]:
            _swap(a, hi, mid)
        pivot = a[mid]
        i = lo
        j = hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                _swap(a, i, j)
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            break
    return a[k]


@jit
def _middle(a, n):
    """The median of ``a[:n]`` (rearranging it), as ``numpy.median``: the mean of the two middle values."""
    k = n // 2
    upper = select(a, n, k)
    if n % 2:
        return upper
    lower = a[0]
    for i in range(1, k):
        lower = max(lower, a[i])
    return (lower + upper) / 2.0


@jit
def median_sq_distance(P, W):
    """Median of the strict upper triangle of ``P`` (``n = L (L-1) / 2`` values), as ``numpy.median``.

    ``W`` is a buffer of at least ``n + 2048`` values. For large ``n`` a deterministic sample
    of about 2048 values brackets the two middle ranks (7 standard deviations of a sample rank
    either side); one branch-free pass counts the values below the bracket and gathers those
    inside it, and the selection runs on those few. If the bracket misses (it cannot, short of
    adversarial data), the selection runs on all ``n`` values. The result is the exact median
    either way, and the same bits on every run.
    """
    n_part = P.shape[0]
    n = n_part * (n_part - 1) // 2
    if n >= 8192:
        stride = n // 2048
        ns = 0
        countdown = 1
        for i in range(n_part):
            for m in range(i + 1, n_part):
                countdown -= 1
                if countdown == 0:
                    W[ns] = P[i, m]
                    ns += 1
                    countdown = stride
        k_lo = (n - 1) // 2
        k_hi = n // 2
        spread = 3.5 * math.sqrt(ns)
        r_lo = max(0, int(k_lo / n * ns - spread))
        r_hi = min(ns - 1, int(k_hi / n * ns + spread) + 1)
        lo = select(W, ns, r_lo)
        hi = select(W, ns, r_hi)
        below = 0
        inside = 0
        for i in range(n_part):
            for m in range(i + 1, n_part):
                v = P[i, m]
                below += v < lo
                W[inside] = v
                inside += (v >= lo) & (v <= hi)
        if below <= k_lo and below + inside > k_hi:
            upper = select(W, inside, k_hi - below)
            if k_lo == k_hi:
                return upper
            lower = W[0]
            for i in range(1, k_hi - below):
                lower = max(lower, W[i])
            return (lower + upper) / 2.0
    n = 0
    for i in range(n_part):
        for m in range(i + 1, n_part):
            W[n] = P[i, m]
            n += 1
    return _middle(W, n)


@jit(inline=True)
def _distance_row(Z, P, i):
    for m in range(i + 1, Z.shape[0]):
        acc = 0.0
        for a in range(Z.shape[1]):
            diff = Z[i, a] - Z[m, a]
            acc += diff * diff
        P[i, m] = acc


_TILE = 64


@jit(inline=True)
def _kernel_tiles(P, bi, inv_h):
    """Kernel values of the tiles ``(bi, bm)``, ``bm >= bi``: upper triangle in place, then mirrored.

    Working tile by tile keeps the mirrored (column) writes within a few cache lines.
    """
    n_part = P.shape[0]
    i0 = bi * _TILE
    i1 = min(n_part, i0 + _TILE)
    for m0 in range(i0, n_part, _TILE):
        m1 = min(n_part, m0 + _TILE)
        for i in range(i0, i1):
            for m in range(max(m0, i + 1), m1):
                P[i, m] = math.exp(-P[i, m] * inv_h)
        for m in range(m0, m1):
            for i in range(i0, min(i1, m)):
                P[m, i] = P[i, m]
    for i in range(i0, i1):
        P[i, i] = 1.0


@jit(inline=True)
def pair_sq_distances(Z, P):
    """``P[i, m] = |z_i - z_m|^2`` for ``i < m`` (the upper triangle only).

    Each pair once; rows ``t`` and ``L-1-t`` together so that the threads of a parallel step
    get equal shares of the triangle.
    """
    n_part = Z.shape[0]
    half = (n_part + 1) // 2
    for t in prange(half):
        _distance_row(Z, P, t)
        if n_part - 1 - t != t:
            _distance_row(Z, P, n_part - 1 - t)


@jit(inline=True)
def kernel_from_sq_distances(P, h):
    """Turn the upper triangle of squared distances in ``P`` into the full RBF kernel matrix."""
    inv_h = 1.0 / h
    n_tiles = (P.shape[0] + _TILE - 1) // _TILE
    for t in prange((n_tiles + 1) // 2):
        _kernel_tiles(P, t, inv_h)
        if n_tiles - 1 - t != t:
            _kernel_tiles(P, n_tiles - 1 - t, inv_h)


@jit(inline=True)
def kernel_matrix(Z, P, W, fixed_h):
    """Fill ``P`` with the RBF kernel matrix of the particles ``Z`` and return the bandwidth used.

    ``fixed_h > 0`` is used as it is; ``0`` asks for the median heuristic (``W`` is its buffer).
    """
    pair_sq_distances(Z, P)
    h = fixed_h if fixed_h > 0.0 else median_sq_distance(P, W) / math.log(Z.shape[0])
    kernel_from_sq_distances(P, h)
    return h


@jit(inline=True)
def kernel_drift(Z, G, P, B, push_coef):
    """``B_i = push_coef sum_m K_im (z_i - z_m) - sum_m K_im g_m``: the smoothed ``-grad U`` plus a
    multiple of the repulsion (``P`` holds ``K``, ``G`` the gradients of ``U``).
    """
    n_part, d = Z.shape
    for i in prange(n_part):
        for a in range(d):
            pull = 0.0
            push = 0.0
            zi = Z[i, a]
            for m in range(n_part):
                k_im = P[i, m]
                pull += k_im * G[m, a]
                push += k_im * (zi - Z[m, a])
            B[i, a] = push_coef * push - pull


def _svgd_step(X, G, B, P, W, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works, rngs, inj, stats):
    Z = X[0]
    n_part, d = Z.shape
    fixed_h = consts.bandwidth
    scale = consts.scale  # 1 / L, or 1
    for i in prange(n_part):
        gradient(Z[i], G[i], grad_u, stochastic_grad_u, params, works[i], rngs[i])
    h = kernel_matrix(Z, P, W, fixed_h)
    stats[0] = h
    kernel_drift(Z, G, P, B, 2.0 * (1.0 / h))
    eps = alpha[j] * scale
    for i in prange(n_part):
        for a in range(d):
            Z[i, a] = Z[i, a] + eps * B[i, a]


# not cached on disk themselves: they take the target's gradient as an argument (and one Python
# function compiled two ways would share a cache entry); the loops cached per target compile
# their own copy of this step's source (sgsim.integrators._kernel_cache)
step = jit(_svgd_step, cache=False)
parallel_step = jit(_svgd_step, cache=False, parallel=True)


class Constants(NamedTuple):
    """What the step reads: the fixed bandwidth (0 for the median heuristic) and ``1 / L`` (or 1)."""

    bandwidth: float
    scale: float


def check_bandwidth(name: str, value):
    """The bandwidth option: ``'median'`` or a number > 0."""
    if isinstance(value, str):
        if value != "median":
            raise ParameterError(name, f"{name} must be 'median' or a number > 0, got {value!r}")
        return "median"
    if isinstance(value, bool):
        raise ParameterTypeError(name, f"{name} must be 'median' or a number > 0, got a bool")
    return positive_float(name, value)


def step_limit(target, options):
    """``2 / (c L)``, ``c = 1 / n_particles`` with ``normalise``: a necessary limit (module docs)."""
    c = 1.0 / options["n_particles"] if options["normalise"] else 1.0
    return curvature_limit(target, 2.0 / c, f"step_size * c * L < 2, c = {c:g}, particles further apart than h")


SVGD = Algorithm(
    name="svgd",
    summary="Stein variational gradient descent: L particles, kernel-smoothed gradient plus repulsion, no noise",
    coupling=INTERACTING,
    state=("theta",),
    options={
        "bandwidth": Option("median", check_bandwidth, "RBF bandwidth h > 0, or 'median' (median heuristic each step)"),
        "normalise": Option(True, check_bool, "divide the kernel sums by the number of particles L"),
    },
    units="drift step_size * phi(Z) (a lone particle: step_size * grad U); no injected noise",
    step=step,
    parallel_step=parallel_step,
    constants=lambda options: Constants(
        0.0 if options["bandwidth"] == "median" else float(options["bandwidth"]),
        1.0 / options["n_particles"] if options["normalise"] else 1.0,
    ),
    noise=lambda block, target, options: None,
    stats=("bandwidth",),
    step_limit=step_limit,
    references="Liu and Wang (2016); [Rep] eqs. 4 and 6 (sign of the kernel term corrected)",
)

METHOD = Method(
    "svgd",
    SVGD,
    constant_schedule,
    ("step_size",),
    "Stein variational gradient descent (an ensemble of n_particles per chain), constant step size",
    "Liu and Wang (2016); [Rep] §3",
)

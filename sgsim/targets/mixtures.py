"""Isotropic Gaussian mixtures: the 25-Gaussian grid ([cSG] §5.1) and the 3x3 grid ([Rep] §4.1).

The density is ``p(x) = sum_i w_i N(x | mu_i, s_i^2 I_d)``, so that
``U(x) = -logsumexp_i(e_i(x))`` with ``e_i = log w_i - (d/2) log(2 pi s_i^2) - |x - mu_i|^2 / (2 s_i^2)``
and ``grad U(x) = sum_i r_i(x) (x - mu_i) / s_i^2`` with ``r = softmax(e)``.

The gradient is computed stably around the largest exponent, and components whose
relative weight is below ``exp(-40)`` (about 4e-18, below double rounding of the sum) are
skipped: a step then costs one exponential per nearby component instead of one per
component. The exponents are evaluated in the expanded form
``const_j + lin_j . x - half_prec_j |x|^2`` (d multiply-adds each); this perturbs the
*weights* by a relative ``~ 1e-16 |x|^2 / s^2`` (1e-12 on the 25-Gaussian box) while the
gradient keeps the exact differences ``x - mu_j``. Two-dimensional mixtures get
:func:`mixture_grad_u_2d`, the same arithmetic in the same order written for ``d = 2``.

For a run that advances many chains together, :func:`mixture_grad_u_block` (and
:func:`mixture_grad_u_block_2d`) compute the gradient at ``W`` points at once, the points as
the inner loop: the same exponents and sums in the same order, each product that feeds a sum
fused with it (:func:`sgsim._vmath.fma`, one rounding instead of two, half the instructions),
every component summed (no skipping, so no branch), each exponential a branch-free one that
the compiler vectorises. The fused forms round an exponent differently from the per-point
form, by up to about ``eps`` times its terms' size; the per-point forms keep their unfused
arithmetic, so that runs on the PCG64 streams replay bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from .._jit import jit
from .._validate import ParameterError, finite_array, finite_values, interval
from .._vmath import exp_nonpositive as _vexp
from .._vmath import fma
from ._base import Target, _ship_block, _ship_lane, factory

# a component whose exponent lies more than 40 below the largest is skipped (weight 0): exp(-40) =
# 4.2e-18 of the largest weight, which is 1, so below a rounding unit of the weights' sum. Every form
# skips at this point (the per-point form by a branch, the block form by a select, the GPU kernel
# too; a component within rounding of it may fall on either side, as the forms round the exponents
# differently); only where the larger terms cancel do the skipped ones show (1.5e-9 of the terms'
# size midway between two modes of the 3x3 mixture, at distance 3 from a third)
_SKIP = -40.0
# the block form's floor on an exponent less the lane's largest: exp(-600) = 3e-261 changes no
# sum (exp(-40) already does not), and it keeps every weight, and every product of one with a
# coordinate, a normal double; a subnormal one costs about a hundred cycles an operation
_FLOOR = -600.0


@jit(inline=True)
def _exponent(j, x, sq, lin, const, half_prec):
    # log w_j - (d/2) log(2 pi s_j^2) - |x - mu_j|^2 / (2 s_j^2), expanded so that the
    # search for the largest one costs d multiply-adds per component
    e = const[j] - half_prec[j] * sq
    for i in range(x.shape[0]):
        e += lin[j, i] * x[i]
    return e


@jit(inline=True)
def _max_exponent(x, sq, lin, const, half_prec):
    best = -np.inf
    for j in range(const.shape[0]):
        e = _exponent(j, x, sq, lin, const, half_prec)
        if e > best:
            best = e
    return best


@jit(inline=True)
def _sq_norm(x):
    sq = 0.0
    for i in range(x.shape[0]):
        sq += x[i] * x[i]
    return sq


@jit
def mixture_grad_u(x, params, out):
    """Gradient of ``U = -log p`` for an isotropic Gaussian mixture (compiled)."""
    means, lin, const, half_prec = params
    d = x.shape[0]
    sq = _sq_norm(x)
    best = _max_exponent(x, sq, lin, const, half_prec)
    for i in range(d):
        out[i] = 0.0
    total = 0.0
    for j in range(means.shape[0]):
        e = _exponent(j, x, sq, lin, const, half_prec) - best
        if e > _SKIP:
            w = math.exp(e)
            total += w
            c = w * 2.0 * half_prec[j]
            for i in range(d):
                out[i] += c * (x[i] - means[j, i])
    for i in range(d):
        out[i] /= total


@jit(inline=True)
def _exponent_2d(j, x0, x1, sq, lin, const, half_prec):
    return const[j] - half_prec[j] * sq + lin[j, 0] * x0 + lin[j, 1] * x1


@jit
def mixture_grad_u_2d(x, params, out):
    """:func:`mixture_grad_u` for ``d = 2`` (every mixture of the papers), bit for bit.

    The same operations in the same order, with the coordinates, the running maxima and the
    gradient held in registers: about 40% faster. Two interleaved running maxima halve
    the dependency chain of the search for the largest exponent (a maximum does not
    depend on the order). A separate function rather than a branch on ``d`` inside
    :func:`mixture_grad_u`: numba then adds atomic reference counting on ``params`` to
    every call, which costs as much as the gain.
    """
    means, lin, const, half_prec = params
    x0 = x[0]
    x1 = x[1]
    sq = _sq_norm(x)
    n = const.shape[0]
    m = n - n % 2
    b0 = -np.inf
    b1 = -np.inf
    for j in range(0, m, 2):
        e0 = _exponent_2d(j, x0, x1, sq, lin, const, half_prec)
        e1 = _exponent_2d(j + 1, x0, x1, sq, lin, const, half_prec)
        b0 = e0 if e0 > b0 else b0
        b1 = e1 if e1 > b1 else b1
    if m < n:
        e0 = _exponent_2d(m, x0, x1, sq, lin, const, half_prec)
        b0 = e0 if e0 > b0 else b0
    best = b0 if b0 > b1 else b1
    g0 = 0.0
    g1 = 0.0
    total = 0.0
    for j in range(n):
        e = _exponent_2d(j, x0, x1, sq, lin, const, half_prec) - best
        if e > _SKIP:
            w = math.exp(e)
            total += w
            c = w * 2.0 * half_prec[j]
            g0 += c * (x0 - means[j, 0])
            g1 += c * (x1 - means[j, 1])
    out[0] = g0 / total
    out[1] = g1 / total


@jit
def mixture_grad_u_block(theta, params, out, scratch):
    """:func:`mixture_grad_u` for ``W`` points at once, the points as the inner loop (compiled).

    Parameters
    ----------
    theta : ndarray, shape (d, W)
        Column ``l`` is lane ``l``'s point (C-contiguous float64).
    params : tuple
        The mixture's ``(means, lin, const, half_prec)``, as for :func:`mixture_grad_u`.
    out : ndarray, shape (d, W)
        Receives ``grad U`` of each column; it holds the running sums meanwhile.
    scratch : ndarray, shape (8, W)
        Working rows (the first four are used).

    Notes
    -----
    The same stable form as the per-point gradient: each lane's exponents
    ``e_j = const_j + lin_j . x - half_prec_j |x|^2``, the same operations in the same order
    with each product fused into the sum it feeds (:func:`sgsim._vmath.fma`), less the lane's
    largest one, so that the largest weight is 1. A component more than 40 below the largest
    gets the weight 0, as in the per-point form, but by a select rather than a branch (both
    sides computed, so the loop still vectorises): ``exp(-40)`` is 4.2e-18 of the largest
    weight, below a rounding unit of their sum, and shows only where the larger terms cancel
    (1.5e-9 of the terms' size midway between two modes of the 3x3 mixture). The
    exponential's argument is raised to -600 where it is further
    down, which keeps the arithmetic free of subnormal numbers (they cost the processor
    about a hundred cycles an operation). The exponential is
    :func:`sgsim._vmath.exp`, written as branch-free arithmetic, so every loop over the lanes
    compiles to SIMD instructions.
    """
    means, lin, const, half_prec = params
    d = theta.shape[0]
    n = theta.shape[1]
    sq = scratch[0]
    best = scratch[1]
    e = scratch[2]
    total = scratch[3]
    for lane in range(n):
        sq[lane] = 0.0
    for i in range(d):
        for lane in range(n):
            sq[lane] = fma(theta[i, lane], theta[i, lane], sq[lane])
    for lane in range(n):
        best[lane] = -np.inf
    for j in range(const.shape[0]):
        c0 = const[j]
        h = half_prec[j]
        for lane in range(n):
            e[lane] = fma(-h, sq[lane], c0)
        for i in range(d):
            a = lin[j, i]
            for lane in range(n):
                e[lane] = fma(a, theta[i, lane], e[lane])
        for lane in range(n):
            best[lane] = e[lane] if e[lane] > best[lane] else best[lane]
    for lane in range(n):
        total[lane] = 0.0
    for i in range(d):
        for lane in range(n):
            out[i, lane] = 0.0
    for j in range(const.shape[0]):
        c0 = const[j]
        h = half_prec[j]
        h2 = 2.0 * h
        for lane in range(n):
            e[lane] = fma(-h, sq[lane], c0)
        for i in range(d):
            a = lin[j, i]
            for lane in range(n):
                e[lane] = fma(a, theta[i, lane], e[lane])
        for lane in range(n):
            t = e[lane] - best[lane]
            w = _vexp(max(t, _FLOOR)) if t > _SKIP else 0.0
            total[lane] += w
            e[lane] = w * h2
        for i in range(d):
            mu = means[j, i]
            for lane in range(n):
                out[i, lane] = fma(e[lane], theta[i, lane] - mu, out[i, lane])
    for i in range(d):
        for lane in range(n):
            out[i, lane] /= total[lane]


@jit
def mixture_grad_u_block_2d(theta, params, out, scratch):
    """:func:`mixture_grad_u_block` for ``d = 2``, the same arithmetic in the same order.

    Each loop over the lanes does a component's whole work (its exponent, and then its
    weight and both coordinates' terms), where the general form makes one pass over the
    lanes per coordinate: half the loads and stores, about twice as fast.

    A block of fewer than :data:`LANES_MIN` lanes cannot fill a vector register, so there
    the loops run over the components instead, lane by lane (when ``scratch`` has a row as
    long as the components: the samplers' loops give it 256): each component's exponent
    computed as in the lane form, and the weights and sums in the components' order over those
    the lane form does not set to zero (only their exponentials are computed). A weight the
    select makes 0 adds exactly nothing to a sum, so each lane gets the same bits either way
    (up to the sign of a zero coordinate), and a chain's draws do not depend on how many
    chains run beside it.
    """
    means, lin, const, half_prec = params
    n = theta.shape[1]
    if n < LANES_MIN and const.shape[0] <= scratch.shape[1]:
        _mixture_lanes_by_components(theta, means, lin, const, half_prec, out, scratch)
        return
    x0 = theta[0]
    x1 = theta[1]
    g0 = out[0]
    g1 = out[1]
    sq = scratch[0]
    best = scratch[1]
    total = scratch[3]
    for lane in range(n):
        sq[lane] = fma(x1[lane], x1[lane], x0[lane] * x0[lane])
        best[lane] = -np.inf
        total[lane] = 0.0
        g0[lane] = 0.0
        g1[lane] = 0.0
    for j in range(const.shape[0]):
        c0 = const[j]
        h = half_prec[j]
        a0 = lin[j, 0]
        a1 = lin[j, 1]
        for lane in range(n):
            e = fma(a1, x1[lane], fma(a0, x0[lane], fma(-h, sq[lane], c0)))
            best[lane] = e if e > best[lane] else best[lane]
    for j in range(const.shape[0]):
        c0 = const[j]
        h = half_prec[j]
        a0 = lin[j, 0]
        a1 = lin[j, 1]
        m0 = means[j, 0]
        m1 = means[j, 1]
        h2 = 2.0 * h
        for lane in range(n):
            t = fma(a1, x1[lane], fma(a0, x0[lane], fma(-h, sq[lane], c0))) - best[lane]
            w = _vexp(max(t, _FLOOR)) if t > _SKIP else 0.0
            total[lane] += w
            c = w * h2
            g0[lane] = fma(c, x0[lane] - m0, g0[lane])
            g1[lane] = fma(c, x1[lane] - m1, g1[lane])
    for lane in range(n):
        g0[lane] /= total[lane]
        g1[lane] /= total[lane]


#: blocks of fewer lanes than this run :func:`mixture_grad_u_block_2d` over the components instead
LANES_MIN = 8


@jit(inline=True)
def _mixture_lanes_by_components(theta, means, lin, const, half_prec, out, scratch):
    # mixture_grad_u_block_2d lane by lane (mixture_lane_2d on each)
    params = (means, lin, const, half_prec)
    ex = scratch[0]
    for lane in range(theta.shape[1]):
        mixture_lane_2d(theta[:, lane], params, out[:, lane], ex)


@jit(inline=True)
def mixture_lane_2d(x, params, out, ex):
    """:func:`mixture_grad_u_block_2d` for one point, bit for bit: its path for blocks of few lanes.

    ``x`` and ``out`` have shape ``(2,)``, ``ex`` is a working row of at least as many values as
    the mixture has components. The components' exponents are computed in a loop over the
    components (vectorised), their largest by four running maxima (a maximum does not depend on
    the order), then the weights and sums in the components' order over those above the skip,
    whose exponentials alone are computed: the lane form's zero weights add exactly nothing
    (up to the sign of a zero coordinate). A plain statement sequence, so that the loops that
    advance a few chains one at a time write it into their step (no call, no reference counts).
    """
    means, lin, const, half_prec = params
    n_comp = const.shape[0]
    m = n_comp - n_comp % 4
    x0 = x[0]
    x1 = x[1]
    sq = fma(x1, x1, x0 * x0)
    for j in range(n_comp):
        ex[j] = fma(lin[j, 1], x1, fma(lin[j, 0], x0, fma(-half_prec[j], sq, const[j])))
    b0 = -np.inf
    b1 = -np.inf
    b2 = -np.inf
    b3 = -np.inf
    for j in range(0, m, 4):
        e0 = ex[j]
        e1 = ex[j + 1]
        e2 = ex[j + 2]
        e3 = ex[j + 3]
        b0 = e0 if e0 > b0 else b0
        b1 = e1 if e1 > b1 else b1
        b2 = e2 if e2 > b2 else b2
        b3 = e3 if e3 > b3 else b3
    for j in range(m, n_comp):
        e0 = ex[j]
        b0 = e0 if e0 > b0 else b0
    b0 = b1 if b1 > b0 else b0
    b2 = b3 if b3 > b2 else b2
    best = b2 if b2 > b0 else b0
    total = 0.0
    g0 = 0.0
    g1 = 0.0
    for j in range(n_comp):
        t = ex[j] - best
        if t > _SKIP:
            # the largest component's weight is exp(0) = 1 exactly, as the exponential gives it:
            # near a mode, where it is the only one above the skip, no exponential is computed
            w = 1.0 if t == 0.0 else _vexp(t)
            total += w
            c = w * (2.0 * half_prec[j])
            g0 = fma(c, x0 - means[j, 0], g0)
            g1 = fma(c, x1 - means[j, 1], g1)
    out[0] = g0 / total
    out[1] = g1 / total


_ship_block(mixture_grad_u, mixture_grad_u_block)
_ship_block(mixture_grad_u_2d, mixture_grad_u_block_2d)
_ship_lane(mixture_grad_u_block_2d, mixture_lane_2d, lambda params: params[2].shape[0])


@jit
def mixture_log_density(x, params):
    """Normalised log density of an isotropic Gaussian mixture (compiled)."""
    _, lin, const, half_prec = params
    sq = _sq_norm(x)
    best = _max_exponent(x, sq, lin, const, half_prec)
    total = 0.0
    for j in range(const.shape[0]):
        total += math.exp(_exponent(j, x, sq, lin, const, half_prec) - best)
    return best + math.log(total)


@factory("gaussian_mixture")
def gaussian_mixture(means, variance, weights=None, *, name="gaussian_mixture", init_box=None) -> Target:
    """An isotropic Gaussian mixture ``sum_i w_i N(mu_i, s_i^2 I)``.

    Parameters
    ----------
    means : array_like, shape (n_components, d)
        Component centres ``mu_i``.
    variance : float or array_like, shape (n_components,)
        Component variances ``s_i^2`` (> 0), shared when scalar.
    weights : array_like, shape (n_components,), optional
        Positive weights, normalised here; equal when omitted.
    name : str
        Name recorded in results.
    init_box : (float, float), optional
        Bounds of the uniform box for default initial points; by default the means'
        bounding box widened by two grid widths.

    Returns
    -------
    Target
        With exact mean, second moment, mode centres and an exact sampler.
    """
    means = finite_array("means", means)
    if means.ndim != 2 or means.shape[0] < 1 or means.shape[1] < 1:
        raise ParameterError("means", f"means must have shape (n_components, d), got {means.shape}")
    k, d = means.shape
    var = finite_array("variance", variance)
    if var.shape not in ((), (k,)):
        raise ParameterError("variance", f"variance must be a number or have shape ({k},), got {var.shape}")
    var = np.broadcast_to(var, (k,))
    if np.any(var <= 0):
        raise ParameterError("variance", "variance must be > 0 for every component")
    if weights is None:
        w = np.full(k, 1.0 / k)
    else:
        w = finite_array("weights", weights, (k,))
        if np.any(w <= 0):
            raise ParameterError("weights", "weights must be > 0")
        w = w / w.sum()
    # extreme finite inputs overflow here: that is checked, not warned about
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        log_norm = np.log(w) - 0.5 * d * np.log(2 * np.pi * var)
        half_prec = 0.5 / var
        # e_j = const_j + lin_j . x - half_prec_j |x|^2: the weights' exponents, expanded; the
        # rounding this adds is relative 1e-12 near the modes and the gradient keeps x - mu_j
        lin = 2.0 * half_prec[:, None] * means
        const = log_norm - half_prec * np.einsum("ki,ki->k", means, means)
        params = (np.ascontiguousarray(means), np.ascontiguousarray(lin), const, half_prec)
        mean = w @ means
        second = np.einsum("k,ki,kj->ij", w, means, means) + np.eye(d) * float(w @ var)
    hint = ": keep variance and |means|^2 / variance well inside the floating-point range"
    finite_values("variance", log_norm, half_prec, hint=hint)
    finite_values("means", lin, const, second, hint=hint)
    if init_box is None:
        span = means.max(0) - means.min(0)
        lo, hi = means.min(0) - span, means.max(0) + span
        lo, hi = np.where(span > 0, lo, lo - 1), np.where(span > 0, hi, hi + 1)
    else:
        box = interval("init_box", init_box)
        lo, hi = np.full(d, box[0]), np.full(d, box[1])
    if init_box is None and not np.all(lo < hi):
        raise ParameterError("means", "means are too large for a unit of spread around them to be representable")
    sd = np.sqrt(var)

    def sampler(rng, n):
        comp = rng.choice(k, size=n, p=w)
        return means[comp] + sd[comp, None] * rng.standard_normal((n, d))

    return Target(
        name=name,
        dim=d,
        grad_u=mixture_grad_u_2d if d == 2 else mixture_grad_u,
        grad_u_block=mixture_grad_u_block_2d if d == 2 else mixture_grad_u_block,
        log_density_fn=mixture_log_density,
        params=params,
        grad_noise_cov=np.zeros((d, d)),
        init_low=lo,
        init_high=hi,
        mean=mean,
        second_moment=second,
        mode_centres=means.copy(),
        mode_sd=sd,
        exact_sampler=sampler,
        extras={"weights": w, "variance": var},
    )


def _grid(values) -> np.ndarray:
    return np.array([[a, b] for a in values for b in values], dtype=np.float64)


def _on_grid(values, variance, name: str, box: tuple[float, float]) -> Target:
    """The equal-weight mixture on the grid ``values^2``; its one parameter, ``variance``, named in every error."""
    try:
        return gaussian_mixture(_grid(values), variance, name=name, init_box=box)
    except ParameterError as exc:
        if exc.parameter != "means":
            raise
        # the centres are fixed: only the variance can make |mu|^2 / variance overflow
        raise ParameterError(
            "variance", f"variance {variance!r} makes |centre|^2 / variance overflow for the centres {values}"
        ) from exc


@factory("mixture_25")
def mixture_25(variance: float = 0.03) -> Target:
    """The 25-Gaussian mixture of [cSG] §5.1 / App. A.1.

    Equal weights, centres ``{-4, -2, 0, 2, 4}^2``, covariance ``0.03 I_2``; so
    ``E x = 0`` and ``E x x^T = 8.03 I``. Default initial points are uniform on
    ``[-10, 10]^2``, as in the reference MATLAB code.
    """
    return _on_grid((-4.0, -2.0, 0.0, 2.0, 4.0), variance, "mixture_25", (-10.0, 10.0))


@factory("mixture_3x3")
def mixture_3x3(variance: float = 0.1) -> Target:
    """The 3x3 mixture of [Rep] §4.1: centres ``{-2, 0, 2}^2``, covariance ``0.1 I_2``, equal weights.

    ``E x x^T = (0.1 + 8/3) I``. The paper says the components are "equally distributed",
    read here as equal weights (:ref:`theory-mixture-3x3`).
    """
    return _on_grid((-2.0, 0.0, 2.0), variance, "mixture_3x3", (-4.0, 4.0))

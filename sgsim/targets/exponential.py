"""Mixture of exponentials in log space ([Rep] §4.1; :ref:`theory-exponential-mixture`).

The density on ``z > 0`` is ``p(z) = sum_i pi_i lambda_i exp(-lambda_i z)``. Samplers work on
``y = log z`` (Jacobian ``dz/dy = e^y``), where

``log p_Y(y) = y + logsumexp_i(log pi_i + log lambda_i - lambda_i e^y)``,
``dU/dy = -(1 - e^y sum_i r_i(y) lambda_i)`` with ``r = softmax`` of the same exponents.

Both are evaluated through logsumexp: the naive form underflows for ``y`` above about 7.3.
Exactly known: ``E[z^n] = sum_i pi_i n! / lambda_i^n`` and, since ``log z`` of an exponential
has mean ``-gamma_E - log lambda`` and variance ``pi^2/6``, the moments of ``y``.
"""

from __future__ import annotations

import math

import numpy as np

from .._jit import jit
from .._validate import ParameterError, finite_array, finite_values
from .._vmath import exp as _vexp
from ._base import Target, _ship_block, factory

# the block form's floor on the arguments of exp (see exp_mixture_grad_u_block)
_FLOOR = -600.0


@jit
def _exp_mix_exponents_max(ey, log_coef, lam):
    best = -np.inf
    for j in range(lam.shape[0]):
        e = log_coef[j] - lam[j] * ey
        if e > best:
            best = e
    return best


@jit
def exp_mixture_grad_u(y, params, out):
    """Gradient in ``y = log z`` of ``U = -log p_Y`` (compiled)."""
    log_coef, lam = params
    ey = math.exp(y[0])
    best = _exp_mix_exponents_max(ey, log_coef, lam)
    total = 0.0
    acc = 0.0
    for j in range(lam.shape[0]):
        w = math.exp(log_coef[j] - lam[j] * ey - best)
        total += w
        acc += w * lam[j]
    out[0] = ey * acc / total - 1.0


@jit
def exp_mixture_grad_u_block(y, params, out, scratch):
    """:func:`exp_mixture_grad_u` for ``W`` points at once, the points as the inner loop (compiled).

    ``y`` and ``out`` have shape ``(1, W)``; ``scratch`` (shape ``(8, W)``) holds ``e^y``,
    each lane's largest exponent and the two running sums. The same stable form as the
    per-point gradient, with every exponential :func:`sgsim._vmath.exp` (branch-free, so
    every loop over the lanes compiles to SIMD instructions; within 1 ulp of ``math.exp``).
    Its arguments are raised to -600 where they are lower (``y`` itself, and each exponent
    less the lane's largest): ``exp(-600) = 3e-261`` changes no result at double precision
    (``e^y`` beside 1 in the gradient, a weight beside the largest one), and the arithmetic
    stays free of subnormal numbers, which cost about a hundred cycles an operation.
    """
    log_coef, lam = params
    n = y.shape[1]
    ey = scratch[0]
    best = scratch[1]
    total = scratch[2]
    acc = scratch[3]
    for lane in range(n):
        ey[lane] = _vexp(max(y[0, lane], _FLOOR))
        best[lane] = -np.inf
        total[lane] = 0.0
        acc[lane] = 0.0
    for j in range(lam.shape[0]):
        c = log_coef[j]
        r = lam[j]
        for lane in range(n):
            e = c - r * ey[lane]
            best[lane] = e if e > best[lane] else best[lane]
    for j in range(lam.shape[0]):
        c = log_coef[j]
        r = lam[j]
        for lane in range(n):
            w = _vexp(max(c - r * ey[lane] - best[lane], _FLOOR))
            total[lane] += w
            acc[lane] += w * r
    for lane in range(n):
        out[0, lane] = ey[lane] * acc[lane] / total[lane] - 1.0


_ship_block(exp_mixture_grad_u, exp_mixture_grad_u_block)


@jit
def exp_mixture_log_density(y, params):
    """``log p_Y(y)``, normalised (compiled)."""
    log_coef, lam = params
    ey = math.exp(y[0])
    best = _exp_mix_exponents_max(ey, log_coef, lam)
    total = 0.0
    for j in range(lam.shape[0]):
        total += math.exp(log_coef[j] - lam[j] * ey - best)
    return y[0] + best + math.log(total)


@factory("exponential_mixture")
def exponential_mixture(rates=(1.5, 0.5), weights=(1 / 3, 2 / 3)) -> Target:
    """The mixture of exponentials of [Rep] §4.1, as a 1-D target in ``y = log z``.

    Parameters
    ----------
    rates : array_like
        Rates ``lambda_i > 0``; the paper's ``(1.5, 0.5)`` by default.
    weights : array_like
        Weights ``pi_i > 0`` (normalised here); the paper's ``(1/3, 2/3)`` by default.

    Returns
    -------
    Target
        ``mean`` and ``second_moment`` are those of ``y``; ``extras["raw_moment_z"](n)``
        gives ``E[z^n]`` exactly (``E z = 14/9`` for the defaults).
    """
    lam = finite_array("rates", rates)
    pi = finite_array("weights", weights, lam.shape)
    if lam.ndim != 1 or lam.size == 0 or np.any(lam <= 0):
        raise ParameterError("rates", f"rates must be a 1-D array of at least one value > 0, got shape {lam.shape}")
    if np.any(pi <= 0):
        raise ParameterError("weights", "weights must be > 0")
    pi = pi / pi.sum()
    euler = 0.5772156649015329
    mu_i = -euler - np.log(lam)
    mean = np.array([pi @ mu_i])
    second = np.array([[pi @ (mu_i**2 + np.pi**2 / 6)]])
    finite_values("weights", pi)

    def raw_moment_z(n: int) -> float:
        return float(pi @ (math.factorial(int(n)) / lam ** int(n)))

    def sampler(rng, n):
        comp = rng.choice(lam.size, size=n, p=pi)
        return np.log(rng.exponential(1.0 / lam[comp]))[:, None]

    return Target(
        name="exponential_mixture",
        dim=1,
        grad_u=exp_mixture_grad_u,
        grad_u_block=exp_mixture_grad_u_block,
        log_density_fn=exp_mixture_log_density,
        params=(np.log(pi) + np.log(lam), lam),
        grad_noise_cov=np.zeros((1, 1)),
        init_low=np.array([-2.0]),
        init_high=np.array([2.0]),
        mean=mean,
        second_moment=second,
        exact_sampler=sampler,
        extras={"raw_moment_z": raw_moment_z, "rates": lam, "weights": pi},
    )

"""The variance of the harmonic-mean cycle weights of [cSG] §3.3, eq. 4 (:ref:`theory-cycle-weight-variance`).

Eq. 4 weights cycle ``m`` by ``w_hat_m = [ (1/K_m) sum_j Y_j ]^(-1)`` with ``Y = 1/p(D | theta)``
over the cycle's ``K_m`` draws (:func:`sgsim.diagnostics.cycle_weights`). By the delta method the
relative variance of ``w_hat_m`` is ``r / K_m`` with ``r = E[Y^2] / E[Y]^2 - 1`` under the
cycle's sub-posterior, and that is finite only when ``E[Y^2] < inf``. This module gives ``r``
in closed form for a conjugate Gaussian model, where its finiteness has a plain condition,
and estimates it, with a standard error, from draws. NumPy and SciPy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from .._validate import ParameterError, finite_array, finite_values, positive_float, real

_LOG_MAX = math.log(np.finfo(float).max)  # exp beyond it overflows (math.exp raises)

__all__ = ["HarmonicWeightMoments", "harmonic_weight_moments", "harmonic_weight_variance"]


@dataclass(frozen=True)
class HarmonicWeightMoments:
    """Moments of ``Y = 1/p(D|theta)`` under the posterior of a conjugate Gaussian model.

    Attributes
    ----------
    tail_index : float
        ``gamma``: ``P(Y > y)`` falls like ``y^(-gamma)``, so ``E[Y^p] < inf`` iff ``p < gamma``.
    mean : float
        ``E[Y] = 1 / p(D)`` (the whole line is the region, so its prior mass is 1).
    second_moment : float
        ``E[Y^2]``; ``inf`` when ``gamma <= 2``.
    relative_variance : float
        ``r = E[Y^2] / E[Y]^2 - 1``; ``inf`` when ``gamma <= 2``. The relative variance of a
        weight computed from ``K`` independent draws is ``r / K`` (delta method).
    """

    tail_index: float
    mean: float
    second_moment: float
    relative_variance: float


def harmonic_weight_moments(prior_var: float, lik_var: float, data: float = 0.0) -> HarmonicWeightMoments:
    """``E[Y]``, ``E[Y^2]`` and the tail index of ``Y = 1/p(D|theta)`` for a conjugate Gaussian model [derived here].

    Prior ``theta ~ N(0, tau^2)``, likelihood ``p(D|theta) = N(x | theta, sigma^2)``, posterior
    ``N(mu, v)`` with ``v = (1/tau^2 + 1/sigma^2)^(-1)``, ``mu = v x / sigma^2``. With
    ``delta = mu - x`` and ``theta - x ~ N(delta, v)``,
    ``Y = sqrt(2 pi sigma^2) exp((theta - x)^2 / (2 sigma^2))`` and the Gaussian integral gives

    ``E[Y^p] = (2 pi sigma^2)^(p/2) (1 - p v/sigma^2)^(-1/2) exp(p delta^2 / (2 sigma^2 (1 - p v/sigma^2)))``

    for ``p v < sigma^2``, and ``inf`` otherwise. So the tail index is
    ``gamma = sigma^2 / v = 1 + sigma^2 / tau^2``: ``E[Y]`` is always finite (``= 1/p(D)``), and
    ``E[Y^2]``, hence the variance of eq. 4's weights, is finite iff ``sigma^2 > tau^2``, i.e.
    iff the likelihood is *wider* than the prior. With ``N`` observations ``sigma^2`` is the
    one-observation variance over ``N``, so for any posterior that the data dominate the
    variance is infinite: the estimator converges (law of large numbers) but more slowly than
    ``K^(-1/2)`` (as ``K^(1/gamma - 1)``), and no standard error exists.

    Parameters
    ----------
    prior_var : float
        ``tau^2 > 0``.
    lik_var : float
        ``sigma^2 > 0``.
    data : float
        ``x``.

    Returns
    -------
    HarmonicWeightMoments
    """
    tau2 = positive_float("prior_var", prior_var)
    s2 = positive_float("lik_var", lik_var)
    x = real("data", data)
    # in terms of sigma^2 / tau^2 (v = sigma^2 / gamma), so that no reciprocal of a tiny variance overflows
    ratio = s2 / tau2
    finite_values("prior_var", ratio, what="the tail index 1 + lik_var / prior_var", hint=f" (prior_var = {tau2:g})")
    gamma = 1.0 + ratio
    delta = -x * (ratio / gamma)  # mu - x, with mu = v x / sigma^2 = x / gamma

    def log_moment(p: float) -> float:
        rest = 1.0 - p / gamma  # 1 - p v / sigma^2
        if rest <= 0:
            return math.inf
        return 0.5 * p * math.log(2.0 * math.pi * s2) - 0.5 * math.log(rest) + p * (delta / s2) * delta / (2.0 * rest)

    l1, l2 = log_moment(1.0), log_moment(2.0)
    # E[Y] = 1 / p(D) is finite in exact arithmetic; beyond the floats when x lies far in the
    # likelihood's tail (or sigma^2 is huge): refused, like a second moment that is finite but
    # beyond the floats (an infinite one, gamma <= 2, is returned as inf: it is the value)
    culprit = "data" if x else "lik_var"
    hint = " (E[Y] = 1 / p(D) and E[Y^2] must stay below 1.8e308)"
    mean = math.exp(l1) if l1 < _LOG_MAX else math.inf
    finite_values(culprit, mean, what="E[Y] = 1 / p(D)", hint=hint)
    second = math.exp(l2) if l2 < _LOG_MAX else math.inf
    rel = math.expm1(l2 - 2.0 * l1) if l2 - 2.0 * l1 < _LOG_MAX else math.inf
    if math.isfinite(l2):
        finite_values(culprit, second, rel, what="E[Y^2]", hint=hint)
    return HarmonicWeightMoments(tail_index=gamma, mean=mean, second_moment=second, relative_variance=rel)


def harmonic_weight_variance(log_likelihood) -> tuple[float, float]:
    """Estimate ``r = E[Y^2]/E[Y]^2 - 1``, ``Y = 1/p(D|theta)``, from one cycle's draws, with its standard error.

    ``r_hat = mean(Y^2) / mean(Y)^2 - 1``, computed on ``Y / mean(Y)`` (``r`` does not depend on
    the scale) so that ``exp(-log_likelihood)`` cannot overflow. The standard error is the delta
    method's: with ``g(m_1, m_2) = m_2 / m_1^2`` and ``S`` the sample covariance of
    ``(Y, Y^2)``, ``SE^2 = grad g^T S grad g / n``. The relative variance of the cycle's weight
    (eq. 4) is then ``r_hat / K_m``.

    Only meaningful where the moments exist: ``r`` needs ``E[Y^2] < inf`` (tail index > 2,
    :func:`harmonic_weight_moments`) and its standard error ``E[Y^4] < inf`` (tail index > 4).
    Where they do not, ``r_hat`` is finite for every sample and grows with it, and the standard
    error is meaningless; check the tail first (a Pareto tail fit of ``-log_likelihood``, whose
    shape ``k`` is ``1/gamma``: ``k < 1/4`` for a standard error, ``k < 1/2`` for a variance).

    Parameters
    ----------
    log_likelihood : array_like, shape (n,)
        ``log p(D | theta_j)`` of ``n >= 2`` draws of one cycle.

    Returns
    -------
    r_hat, se : float
    """
    ll = finite_array("log_likelihood", log_likelihood)
    if ll.ndim != 1 or ll.size < 2:
        raise ParameterError("log_likelihood", f"log_likelihood must be a vector of >= 2 draws, got shape {ll.shape}")
    y = np.exp(-ll - special.logsumexp(-ll) + math.log(ll.size))  # Y / mean(Y): mean 1
    m1, m2 = float(np.mean(y)), float(np.mean(y**2))
    cov = np.cov(np.stack([y, y**2]))
    grad = np.array([-2.0 * m2 / m1**3, 1.0 / m1**2])
    return m2 / m1**2 - 1.0, float(math.sqrt(max(grad @ cov @ grad, 0.0) / ll.size))

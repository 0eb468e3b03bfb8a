"""Combining samples across cycles ([cSG] §3.3, eq. 4), at any temperature: the estimator and its exact law.

Eq. 4 of Zhang et al., "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning" (an
appendix section of the ICLR 2020 version) combines the cycles' averages as
``f_hat = sum_m w_m f_hat_m``, ``f_hat_m = (1/K_m) sum_j f(theta_j^(m))``, with ``w_m`` the
posterior mass of the region ``Theta_m`` that cycle ``m`` explores, estimated by a harmonic
mean (:func:`sgsim.diagnostics.cycle_weights`). :func:`combine_cycles` is the estimator;
:func:`gaussian_regions_law` gives its exact mean and variance, and the exact limits of the
weights, on a target whose regions are Gaussian, at the sampling temperature ``T`` of
Algorithm 1 (:ref:`theory-cycle-combination`).

The model. The target is ``p(theta) ∝ sum_m pi_m N(theta; mu_m, s_m^2 I_d)`` with well
separated components, region ``m`` holding component ``m`` (the other components' mass in it
is neglected: a relative error of order ``exp(-D^2 / (8 s^2))`` for centres ``D`` apart), and,
as for sgsim's synthetic targets, the "likelihood" of eq. 4's harmonic mean is the density
itself under a flat prior. Cycle ``m`` samples ``p^(1/T)`` restricted to its region. Then
[derived here], with ``a = 1/T``:

- the draws of cycle ``m`` are ``N(mu_m, T s_m^2 I)``;
- the tempered posterior's region masses are ``w_m(T) ∝ pi_m^a s_m^(d (1 - a))`` (the
  posterior's ``pi_m`` at ``T = 1``);
- ``E[1 / p(theta)]`` over cycle ``m``'s draws is
  ``(2 pi s_m^2)^(d/2) / pi_m (a / (a - 1))^(d/2)`` for ``T < 1`` and infinite for
  ``T >= 1`` (an unbounded region has infinite flat-prior volume); so the normalised
  harmonic-mean weights tend to ``∝ pi_m / s_m^d``, the components' peak heights, whatever
  ``T < 1``: right only when every ``s_m`` is the same. ``Y = 1/p`` has tail index ``1/T``,
  so the weights' variance is finite only for ``T < 1/2`` (:ref:`theory-cycle-weight-variance`
  quantifies it for a conjugate model).

Hence what tempering does to eq. 4: the cycle averages estimate the *tempered* sub-posterior's
expectations (for ``f = ||theta||^2`` a bias ``(T - 1) d sum_m w_m s_m^2``), and no choice of
weights computed from the tempered draws alone recovers the posterior's masses. NumPy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validate import ParameterError, finite_array, finite_values, integer, integer_array, positive_float

__all__ = ["RegionsLaw", "combine_cycles", "gaussian_regions_law"]


def combine_cycles(values, cycle, weights) -> float | np.ndarray:
    """Eq. 4: ``f_hat = sum_m w_m f_hat_m`` with ``f_hat_m`` the mean of ``f`` over cycle ``m``'s draws.

    Parameters
    ----------
    values : array_like, shape (n,) or (n, ...)
        ``f(theta_j)`` of every draw (a trailing shape for a vector-valued ``f``).
    cycle : array_like of int, shape (n,)
        The cycle of each draw.
    weights : array_like, shape (M,)
        ``w_m >= 0`` of the ``M`` distinct cycles in increasing order (as
        :func:`sgsim.diagnostics.cycle_weights` returns them), summing to 1.

    Returns
    -------
    float or ndarray
        ``f_hat``, with the trailing shape of ``values``.
    """
    vals = finite_array("values", values)
    cyc = integer_array("cycle", cycle)  # a fractional or string label was taken as a cycle of its own
    if vals.ndim == 0 or cyc.shape != vals.shape[:1]:
        raise ParameterError("cycle", f"cycle must have one entry per draw ({vals.shape[:1]}), got shape {cyc.shape}")
    labels = np.unique(cyc)
    w = finite_array("weights", weights)
    if w.shape != labels.shape or np.any(w < 0) or not math.isclose(float(w.sum()), 1.0, rel_tol=1e-9):
        raise ParameterError(
            "weights", f"weights must be {labels.size} numbers >= 0 (one per cycle) summing to 1, got {w.tolist()}"
        )
    means = np.stack([vals[cyc == m].mean(axis=0) for m in labels])
    out = np.tensordot(w, means, axes=1)
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class RegionsLaw:
    """Exact quantities of eq. 4 on well-separated Gaussian regions at temperature ``T``.

    Attributes
    ----------
    posterior_weights : ndarray, shape (M,)
        ``pi_m``: the regions' masses under the target (what eq. 4 wants).
    tempered_weights : ndarray, shape (M,)
        ``∝ pi_m^(1/T) s_m^(d (1 - 1/T))``: the masses under ``p^(1/T)``.
    harmonic_weights : ndarray, shape (M,)
        The limit of the normalised harmonic-mean weights computed from the tempered draws,
        ``∝ pi_m / s_m^d``; NaN for ``T >= 1``, where ``E[1/p] = inf``.
    harmonic_tail_index : float
        ``1/T``: ``E[(1/p)^q] < inf`` iff ``q < 1/T``.
    region_mean : ndarray, shape (M,)
        ``E f`` over one draw of cycle ``m``.
    region_var : ndarray, shape (M,)
        ``Var f`` over one draw of cycle ``m``.
    truth : float
        ``E_p f``, the posterior expectation at ``T = 1``.
    """

    posterior_weights: np.ndarray
    tempered_weights: np.ndarray
    harmonic_weights: np.ndarray
    harmonic_tail_index: float
    region_mean: np.ndarray
    region_var: np.ndarray
    truth: float

    def estimator_moments(self, weights, n_draws, ess=None) -> tuple[float, float]:
        """Exact mean and variance of :func:`combine_cycles` with fixed ``weights``.

        ``E f_hat = sum_m w_m E_m f`` and ``Var f_hat = sum_m w_m^2 Var_m f / n_m`` for
        independent draws (``n_m = n_draws[m]``); with correlated draws pass their effective
        sample sizes as ``ess``. The bias is ``E f_hat - self.truth``. With weights estimated
        from the same draws (the harmonic mean) these are the limits as ``n_m -> inf``.

        Parameters
        ----------
        weights : array_like, shape (M,)
        n_draws : int or array_like, shape (M,)
            Draws per cycle, >= 1.
        ess : array_like, shape (M,), optional
            Effective sample sizes, > 0, used in place of ``n_draws`` in the variance.

        Returns
        -------
        mean, variance : float
        """
        m = self.posterior_weights.size
        w = finite_array("weights", weights, (m,))
        n = np.broadcast_to(finite_array("n_draws", n_draws), (m,))
        if np.any(n < 1):
            raise ParameterError("n_draws", f"n_draws must be >= 1, got {n.tolist()}")
        eff = n if ess is None else finite_array("ess", ess, (m,))
        if np.any(eff <= 0):
            raise ParameterError("ess", f"ess must be > 0, got {eff.tolist()}")
        return float(w @ self.region_mean), float(np.sum(w**2 * self.region_var / eff))


def gaussian_regions_law(
    weights, means, scales, temperature: float = 1.0, *, test_function: str = "theta"
) -> RegionsLaw:
    """The exact law of eq. 4's pieces on well-separated Gaussian regions at temperature ``T`` [derived here].

    The target ``p ∝ sum_m pi_m N(mu_m, s_m^2 I_d)`` and the tempered draws ``N(mu_m, T s_m^2 I)``
    of each cycle are described in the module docstring (:ref:`theory-cycle-combination`). For
    ``test_function="theta"`` the test function is the first coordinate ``theta_1``
    (``E_m = mu_m1``, ``Var_m = T s_m^2``); for ``"square"`` it is ``||theta||^2``
    (``E_m = ||mu_m||^2 + d T s_m^2``, ``Var_m = 2 d T^2 s_m^4 + 4 T s_m^2 ||mu_m||^2``).

    Parameters
    ----------
    weights : array_like, shape (M,)
        ``pi_m > 0`` (normalised here).
    means : array_like, shape (M,) or (M, d)
        ``mu_m``.
    scales : array_like, shape (M,)
        ``s_m > 0``, each component's standard deviation.
    temperature : float
        ``T > 0``.
    test_function : {"theta", "square"}

    Returns
    -------
    RegionsLaw
    """
    pi = finite_array("weights", weights)
    if pi.ndim != 1 or pi.size < 1 or np.any(pi <= 0):
        raise ParameterError("weights", f"weights must be a non-empty vector of numbers > 0, got {pi.tolist()}")
    m = pi.size
    mu = finite_array("means", means)
    mu = mu[:, None] if mu.ndim == 1 else mu
    if mu.ndim != 2 or mu.shape[0] != m:
        raise ParameterError("means", f"means must have shape ({m},) or ({m}, d), got {np.shape(means)}")
    d = integer("dim", mu.shape[1], low=1)
    s = finite_array("scales", scales, (m,))
    if np.any(s <= 0):
        raise ParameterError("scales", f"scales must be > 0, got {s.tolist()}")
    t = positive_float("temperature", temperature)
    if test_function not in ("theta", "square"):
        raise ParameterError("test_function", f"test_function must be 'theta' or 'square', got {test_function!r}")
    pi = pi / pi.sum()
    a = 1.0 / t
    finite_values("temperature", a, what="1 / temperature", hint=f" (temperature = {t:g})")
    # log weights up to a constant: a (log pi - d log s) + d log s, and pi / s^d, normalised from
    # their logarithms (s^d and its reciprocal overflow at extreme scales); a (x - max x) is
    # -inf or 0 where it leaves the floats, i.e. a weight of exactly 0 or the largest
    log_ratio = np.log(pi) - d * np.log(s)
    with np.errstate(over="ignore"):
        log_temp = a * (log_ratio - log_ratio.max()) + d * np.log(s)
    tempered = np.exp(log_temp - log_temp.max())
    tempered /= tempered.sum()
    if t < 1.0:
        hm = np.exp(log_ratio - log_ratio.max())
        hm = hm / hm.sum()
    else:
        hm = np.full(m, np.nan)
    finite_values("means", np.sum((0.5 * mu) ** 2, axis=1), what="|means|^2")
    sq = np.sum(mu**2, axis=1)
    if test_function == "theta":
        region_mean, region_var = mu[:, 0].copy(), t * s**2
        truth = float(pi @ mu[:, 0])
    else:
        region_mean = sq + d * t * s**2
        region_var = 2.0 * d * t**2 * s**4 + 4.0 * t * s**2 * sq
        truth = float(pi @ (sq + d * s**2))
    finite_values("temperature", region_mean, region_var, truth, what="the regions' moments")
    return RegionsLaw(
        posterior_weights=pi,
        tempered_weights=tempered,
        harmonic_weights=hm,
        harmonic_tail_index=a,
        region_mean=region_mean,
        region_var=region_var,
        truth=truth,
    )

"""Tempered (c)SGLD on a Gaussian target: the exact stationary and periodic laws at temperature ``T``.

Algorithm 1 of Zhang et al., "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning"
(§3.1; an appendix of the ICLR 2020 version tunes it for the deep-network experiments) samples
``p(theta) ∝ exp(-U(theta) / T)``: SGLD injects noise of variance ``2 alpha T``, ``T = 0`` in
the exploration stage and the sampling temperature ``T`` afterwards (``T < 1`` is the "cold
posterior" of the image-classification runs). On ``U = theta^T P theta / 2 - c^T theta`` with
additive gradient noise ``zeta ~ N(0, V)`` every iterate is Gaussian
(:ref:`theory-exact-sgld`), and [derived here] (:ref:`theory-tempering`):

- constant step ``alpha`` (:func:`tempered_sgld_stationary`): the mean is ``P^-1 c`` at every
  ``T``, and the covariance is

  ``Sigma = 2 T (P (2I - alpha P))^-1 + Sigma_V``,  ``Sigma_V = sum_k F^k (alpha^2 V) F^k``,
  ``F = I - alpha P``,

  i.e. the tempered target's ``T P^-1`` times the discretisation factor
  ``(I - alpha P / 2)^-1``, plus a gradient-noise part that does not scale with ``T``
  (``alpha V / 2`` per unit curvature when ``V`` commutes with ``P``). A cold posterior with
  stochastic gradients therefore has the effective temperature ``T + alpha v / 2`` along an
  eigendirection where ``V`` has the eigenvalue ``v``: the floor the gradient noise sets.
- the cyclical schedule (:func:`tempered_periodic_law`): the law at each phase of a cycle
  converges to a periodic one, the fixed point of the cycle's affine map; its mean is
  ``P^-1 c`` and its covariance is ``T`` times the ``T = 1`` covariance without gradient
  noise, plus the gradient-noise part (which the exploration steps, at ``T = 0``, still
  receive). The draws that cSGLD keeps (the sampling stage) are a mixture over phases of
  Gaussians with this common mean; ``PeriodicLaw.pooled_cov`` is their covariance.

Units: [cSG]'s (drift ``alpha grad U``, injected noise variance ``2 alpha T``), as in
:func:`sgsim.sample`. NumPy and SciPy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_discrete_lyapunov

from .._validate import ParameterError, finite_array, noise_covariance, positive_float, real, spd_matrix
from .exact_law import stationary_covariance

__all__ = ["TemperedLaw", "PeriodicLaw", "tempered_sgld_stationary", "tempered_periodic_law"]


@dataclass(frozen=True)
class TemperedLaw:
    """The stationary law of constant-step SGLD at temperature ``T`` on a Gaussian target.

    Attributes
    ----------
    mean : ndarray, shape (d,)
        ``P^-1 c``, whatever ``T`` and ``alpha``.
    cov : ndarray, shape (d, d)
        ``T cov_per_temperature + cov_noise``.
    cov_per_temperature : ndarray, shape (d, d)
        ``2 (P (2I - alpha P))^-1``: the part that scales with ``T``.
    cov_noise : ndarray, shape (d, d)
        The gradient noise's part, independent of ``T``.
    target_cov : ndarray, shape (d, d)
        ``T P^-1``, the tempered target's covariance (the ``alpha -> 0`` limit without noise).
    """

    mean: np.ndarray
    cov: np.ndarray
    cov_per_temperature: np.ndarray
    cov_noise: np.ndarray
    target_cov: np.ndarray


def _inputs(precision, shift, grad_noise_cov):
    p = np.atleast_2d(finite_array("precision", precision))
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ParameterError("precision", f"precision must be a square matrix, got shape {p.shape}")
    d = p.shape[0]
    p = spd_matrix("precision", p, d)
    c = np.zeros(d) if shift is None else finite_array("shift", shift, (d,))
    return p, c, noise_covariance("grad_noise_cov", grad_noise_cov, d), d


def tempered_sgld_stationary(
    precision, shift, step_size: float, temperature: float, grad_noise_cov=None
) -> TemperedLaw:
    """Exact stationary law of SGLD at temperature ``T`` with constant step ``alpha`` [derived here].

    ``theta' = (I - alpha P) theta + alpha c - alpha zeta + sqrt(2 alpha T) xi``: the fixed point
    of ``Sigma = F Sigma F + 2 alpha T I + alpha^2 V``, ``F = I - alpha P``. The ``T`` part is
    solved in ``P``'s eigenbasis, ``2 alpha T / (1 - (1 - alpha lambda)^2) = 2T / (lambda (2 - alpha lambda))``,
    the noise part by :func:`sgsim.theory.stationary_covariance` (:ref:`theory-tempering`).

    Parameters
    ----------
    precision : array_like, shape (d, d)
        ``P``, symmetric positive definite.
    shift : array_like, shape (d,), or None
        ``c`` (zero if None).
    step_size : float
        ``alpha`` with ``0 < alpha lambda_max(P) < 2`` (otherwise there is no stationary law).
    temperature : float
        ``T >= 0``.
    grad_noise_cov : float or array_like, shape (d, d), optional
        ``V`` (a number means ``V I``).

    Returns
    -------
    TemperedLaw
    """
    p, c, v, d = _inputs(precision, shift, grad_noise_cov)
    alpha = positive_float("step_size", step_size)
    t = real("temperature", temperature, 0.0)
    lam, u = np.linalg.eigh(p)
    if not alpha * lam[-1] < 2.0:
        raise ParameterError(
            "step_size", f"step_size must lie in (0, {2.0 / lam[-1]:.6g}) (2 / lambda_max(P)), got {alpha}"
        )
    if np.any(v) and not np.max(np.abs(1.0 - alpha * lam)) < 1.0:
        # I - alpha P rounds to I: the noise part's fixed point is beyond the floating-point range
        raise ParameterError(
            "step_size",
            f"step_size {alpha} is too small: 1 - step_size * lambda_min(P) rounds to 1 (no stationary law)",
        )
    per_t = (u * (2.0 / (lam * (2.0 - alpha * lam)))) @ u.T
    per_t = 0.5 * (per_t + per_t.T)
    noise = stationary_covariance(np.eye(d) - alpha * p, alpha**2 * v) if np.any(v) else np.zeros((d, d))
    inv = (u / lam) @ u.T
    return TemperedLaw(
        mean=np.linalg.solve(p, c),
        cov=t * per_t + noise,
        cov_per_temperature=per_t,
        cov_noise=noise,
        target_cov=t * 0.5 * (inv + inv.T),
    )


@dataclass(frozen=True)
class PeriodicLaw:
    """The periodic law of SGLD under a repeated schedule (one cycle) on a Gaussian target.

    Attributes
    ----------
    mean : ndarray, shape (d,)
        ``P^-1 c`` at every phase.
    cov_start : ndarray, shape (d, d)
        Covariance of ``theta`` at the start of a cycle (after the previous cycle's last step).
    cov : ndarray, shape (L, d, d)
        Covariance after each step ``1..L`` of the cycle.
    pooled_cov : ndarray, shape (d, d)
        The mean of ``cov`` over the collected steps: the covariance of a draw picked uniformly
        among those cSGLD keeps in one cycle.
    """

    mean: np.ndarray
    cov_start: np.ndarray
    cov: np.ndarray
    pooled_cov: np.ndarray


def tempered_periodic_law(precision, shift, step_sizes, temperatures, grad_noise_cov=None, collect=None) -> PeriodicLaw:
    """The periodic steady state of SGLD under one cycle's steps and temperatures, repeated [derived here].

    One cycle maps ``Sigma_start`` to ``Phi Sigma_start Phi^T + Q``, ``Phi = F_L ... F_1``,
    ``F_k = I - alpha_k P``, ``Q = sum_k (F_L .. F_{k+1}) (2 alpha_k T_k I + alpha_k^2 V) (..)^T``;
    the periodic law starts from the solution of ``Sigma = Phi Sigma Phi^T + Q``
    (:func:`scipy.linalg.solve_discrete_lyapunov`) and is propagated through the cycle. Every
    ``F_k`` leaves ``P^-1 c`` fixed, so that is the mean at every phase. Pass one cycle of
    :func:`sgsim.schedules.cyclical` (``step_size``, ``temperature``, ``collect``) for cSGLD at
    sampling temperature ``T`` (:ref:`theory-tempering`).

    Parameters
    ----------
    precision : array_like, shape (d, d)
        ``P``, symmetric positive definite.
    shift : array_like, shape (d,), or None
        ``c``.
    step_sizes : array_like, shape (L,)
        ``alpha_1..alpha_L > 0``; the cycle must contract (spectral radius of ``Phi`` < 1).
    temperatures : float or array_like, shape (L,)
        ``T_k >= 0``.
    grad_noise_cov : float or array_like, shape (d, d), optional
        ``V``.
    collect : array_like of bool, shape (L,), optional
        The steps whose draws are kept (all by default).

    Returns
    -------
    PeriodicLaw
    """
    p, c, v, d = _inputs(precision, shift, grad_noise_cov)
    alpha = finite_array("step_sizes", step_sizes)
    if alpha.ndim != 1 or alpha.size == 0 or np.any(alpha <= 0):
        raise ParameterError(
            "step_sizes", f"step_sizes must be a non-empty vector of steps > 0, got shape {alpha.shape}"
        )
    n = alpha.size
    temps = np.broadcast_to(finite_array("temperatures", temperatures), (n,))
    if np.any(temps < 0):
        raise ParameterError("temperatures", f"temperatures must be >= 0, got min {temps.min():.4g}")
    keep = np.ones(n, bool) if collect is None else np.asarray(collect, dtype=bool)
    if keep.shape != (n,) or not keep.any():
        raise ParameterError("collect", f"collect must be {n} booleans with at least one True, got shape {keep.shape}")
    eye = np.eye(d)
    phi, q = eye, np.zeros((d, d))
    for k in range(n):
        f = eye - alpha[k] * p
        phi = f @ phi
        q = f @ q @ f.T + 2.0 * alpha[k] * temps[k] * eye + alpha[k] ** 2 * v
    rho = float(np.max(np.abs(np.linalg.eigvals(phi))))
    if not rho < 1.0:
        raise ParameterError("step_sizes", f"one cycle must contract for a periodic law (spectral radius {rho:.6g})")
    start = solve_discrete_lyapunov(phi, q)
    start = 0.5 * (start + start.T)
    covs = np.empty((n, d, d))
    s = start
    for k in range(n):
        f = eye - alpha[k] * p
        s = f @ s @ f.T + 2.0 * alpha[k] * temps[k] * eye + alpha[k] ** 2 * v
        s = 0.5 * (s + s.T)
        covs[k] = s
    return PeriodicLaw(mean=np.linalg.solve(p, c), cov_start=start, cov=covs, pooled_cov=covs[keep].mean(axis=0))

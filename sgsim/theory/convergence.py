"""Convergence theory of cyclical SG-MCMC: the terms of the Wasserstein bound and of the weak-error rates.

Implements, as pure formulas, Theorem 1 of Zhang, Li, Zhang, Chen, Wilson, "Cyclical
Stochastic Gradient MCMC for Bayesian Deep Learning" (arXiv version, eqs. 5-6 and
Appendix C; Theorem 2 of the ICLR 2020 version) for cSGLD and for SGLD with ``h_k = h_0/k``
(:ref:`theory-wasserstein-bound`), the constants of its Assumption 2 (:ref:`theory-assumptions`,
:ref:`theory-constants`), the diffusion-time argument of its Section 4, and the weak-convergence
orders of the ICLR version's Theorem 1 (:ref:`theory-weak-convergence`, reconstructed).

The bound of Theorem 1 splits ``W2(mu_K, nu_inf)`` at the Langevin diffusion run for the
schedule's diffusion time ``S = sum_k alpha_k``::

    W2(mu_K, nu_inf) <= W2(mu_K, nu_S) + W2(nu_S, nu_inf)
    KL(mu_K || nu_S) <= C1 sum_k alpha_k^2 + sigma C0 sum_k alpha_k            (App. C.1, C.3)
    W2(mu_K, nu_S)   <= (c_p + f C2 S)^(1/2) [KL^(1/2) + (KL / 2)^(1/4)]       (Bolley-Villani)
    W2(nu_S, nu_inf) <= C3 exp(-S / C4)                                        (App. C.2, C.4)

The paper's printed forms replace the sums by ``K alpha_0 / 2`` and ``3 alpha_0^2 K / 8``
(cSGLD) and ``h_0^2 pi^2 / 6`` (SGLD); the exact sums are ``alpha_0 (K + M) / 2`` and
``alpha_0^2 (3K/8 + M/2)`` (:ref:`erratum-step-sums`), and ``h_0^2 sum_{k<=K} 1/k^2``. The functions
use the exact sums by default (:ref:`theory-bound-remarks`), so that "bound >= exact W2" is a fair test.

Step sizes follow the cyclical paper's convention (drift ``alpha grad U``, injected noise
variance ``2 alpha``, target ``exp(-U)``). Nothing here imports an integrator.

Errata carried here (:ref:`theory-errata`):

- The schedule sums (above; :ref:`erratum-step-sums`).
- The prefactor (:ref:`erratum-bound-prefactor`) is ``(6 + C2 K alpha_0 / 2)^(1/2)`` in the main text and
  ``(12 + C2 sum alpha)^(1/2)`` in Appendix C.1; Raginsky et al. carry a factor 8 on the time
  term. Both are parameters here: ``c_p`` (default 12, the appendix) and ``time_factor``
  (default 1, the paper's ``C2 t``; 8 for Raginsky et al.'s form). The form its sources
  support, ``(6/lambda + 4 kappa0 + 8 (b + d) t)^(1/2)``, is derived in :func:`derived_prefactor`.
- The step restriction ``alpha_k <= min(1, m_U / (4 L_U^2))`` is derived in :func:`step_limit`
  and checked by the bound functions (:ref:`theory-derived-constants`).
- The main text's SGLD bound (:ref:`erratum-sgld-bound`) lacks ``C2`` and prints ``pi^2 / 16`` where the appendix
  has ``pi^2 / 12 = (pi^2 / 6) / 2``; the appendix form is implemented (the main text's
  prefactor is ``c_p = 6, time_factor = 1 / C2``).
- Assumption 2 (:ref:`erratum-assumption2`) calls the noise constant both delta and sigma
  (``sigma`` here), writes ``M^2`` for ``L_U^2`` and puts ``1 ^ 1/m_U`` in ``C0``, which is
  too small for ``m_U < 1``; ``1 v 1/m_U`` is the default here; see :func:`assumption_constants`.
- At fixed ``alpha_0`` (:ref:`erratum-bound-grows`) the cSGLD discretisation term grows like ``K`` and the SGLD one
  like ``log K``: the theorem compares the two at equal K; it does not say that either
  bound tends to 0.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import special

from .._validate import (
    ParameterError,
    ParameterTypeError,
    boolean,
    choice,
    finite_array,
    finite_values,
    integer,
    positive_float,
    real,
    renamed,
    spd_matrix,
)
from .distances import gaussian_w2

__all__ = [
    "StepRestrictionWarning",
    "TheoremConstants",
    "Theorem1Terms",
    "WeakErrorTerms",
    "AverageError",
    "assumption_constants",
    "step_limit",
    "derived_prefactor",
    "kappa0_gaussian",
    "strongly_convex_c3_c4",
    "linear_gaussian_constants",
    "harmonic_number",
    "cyclical_sum",
    "cyclical_sum_squares",
    "theorem1_terms",
    "csgld_bound",
    "sgld_bound",
    "matched_h0",
    "discretisation_ratio",
    "weak_error_terms",
    "gaussian_average_error",
]

#: ``c_p`` of Appendix C.1 (the main text prints 6; docs: erratum-bound-prefactor).
DEFAULT_C_P = 12.0
STEP_CHECKS = ("warn", "raise", "ignore")


class StepRestrictionWarning(UserWarning):
    """A bound was evaluated at steps beyond the proof's restriction (:ref:`theory-derived-constants`)."""


@dataclass(frozen=True)
class TheoremConstants:
    """The constants of [cSG] Theorem 1 (:ref:`theory-constants`), validated on construction.

    Attributes
    ----------
    C0 : float
        Bound on ``max_j (L_U^2 E||theta_j||^2 + B^2)``, >= 0.
    C1 : float
        ``6 L_U^2 (C0 + d)``, >= 0 (any value >= 0 is accepted: the constants are
        user-supplied parameters, :ref:`theory-constants`).
    C2 : float
        ``kappa0 + 2 b + 2 d``, >= 0 (the exponential-moment growth rate of ``nu_t``).
    C3 : float
        Prefactor of ``W2(nu_t, nu_inf) <= C3 exp(-t / C4)``, >= 0.
    C4 : float
        Time constant of that decay, > 0.
    sigma : float
        Gradient-noise constant of Assumption 2 (iv), in [0, 1). 0 for exact gradients.
    step_limit : float
        The largest step size for which the proof holds with these constants, in (0, 1]: 1 (the
        proof's ``alpha_0 <= 1``) unless the constants come from Assumption 2, where ``C0``
        needs ``alpha_k <= min(1, m_U / (4 L_U^2))`` (:func:`step_limit`,
        :ref:`theory-derived-constants`). The bound functions check their steps against it.

    Raises
    ------
    ValueError
        Naming the constant that lies outside its domain.
    """

    C0: float
    C1: float
    C2: float
    C3: float
    C4: float
    sigma: float = 0.0
    step_limit: float = 1.0

    def __post_init__(self):
        for name in ("C0", "C1", "C2", "C3"):
            object.__setattr__(self, name, real(name, getattr(self, name), 0.0))
        object.__setattr__(self, "C4", positive_float("C4", self.C4))
        object.__setattr__(self, "sigma", real("sigma", self.sigma, 0.0, 1.0, high_open=True))
        object.__setattr__(self, "step_limit", real("step_limit", self.step_limit, 0.0, 1.0, low_open=True))


@dataclass(frozen=True)
class Theorem1Terms:
    """All terms of one evaluation of [cSG] Theorem 1 (eqs. 5-6, App. C).

    Attributes
    ----------
    diffusion_time : float
        ``S = sum_k alpha_k`` (or the printed approximation), the time of ``nu_S``.
    sum_squares : float
        ``sum_k alpha_k^2`` (or the printed approximation).
    kl : float
        Bound on ``KL(mu_K || nu_S)``: ``C1 sum alpha^2 + sigma C0 S``.
    prefactor : float
        ``(c_p + time_factor C2 S)^(1/2)``.
    w2_discretisation : float
        Bound on ``W2(mu_K, nu_S)``: ``prefactor [kl^(1/2) + (kl/2)^(1/4)]``.
    w2_exponential : float
        Bound on ``W2(nu_S, nu_inf)``: ``C3 exp(-S / C4)``.
    total : float
        Bound on ``W2(mu_K, nu_inf)``: the sum of the two W2 terms (eq. 5 or 6).
    max_step : float
        The largest step of the sequence (NaN when it was not given).
    within_hypotheses : bool
        ``max_step <= constants.step_limit`` (True when ``max_step`` was not given): only then
        is ``total`` a consequence of the proof (:ref:`theory-derived-constants`).
    """

    diffusion_time: float
    sum_squares: float
    kl: float
    prefactor: float
    w2_discretisation: float
    w2_exponential: float
    total: float
    max_step: float = math.nan
    within_hypotheses: bool = True


@dataclass(frozen=True)
class WeakErrorTerms:
    """Order terms of the bias and MSE of a sample average (:ref:`theory-weak-convergence`) [reconstructed].

    Each field is one term of the O(.) bound, without its unknown constant.

    Attributes
    ----------
    bias_transient : float
        Boundary term of the Poisson-equation argument (``1/S_L`` for step-weighted averages).
    bias_discretisation : float
        ``sum_l w_l h_l^order`` (``sum_l h_l^(order+1) / S_L`` for step-weighted averages).
    bias : float
        ``bias_transient + bias_discretisation``.
    mse_noise : float
        ``sum_l w_l^2 E||Delta V_l||^2`` (gradient noise).
    mse_martingale : float
        ``sum_l w_l^2 / h_l`` (``1/S_L`` for step-weighted averages).
    mse_transient : float
        ``bias_transient^2`` (omitted by Chen et al.: dominated by ``1/S_L`` once ``S_L >= 1``).
    mse_discretisation : float
        ``bias_discretisation^2``.
    mse : float
        Sum of the four MSE terms.
    """

    bias_transient: float
    bias_discretisation: float
    bias: float
    mse_noise: float
    mse_martingale: float
    mse_transient: float
    mse_discretisation: float
    mse: float


# ----------------------------------------------------------------------------------------------
# Constants (docs: theory-assumptions, theory-constants)


def assumption_constants(
    L_U: float,
    B: float,
    m_U: float,
    b_U: float,
    dim: int,
    kappa0: float,
    *,
    moment_factor: str = "max",
) -> tuple[float, float, float]:
    """``C0, C1, C2`` of [cSG] Theorem 1 from the constants of Assumption 2 (App. B, C.1).

    ``C0 = L_U^2 (kappa0 + 2 c_m (b_U + 2 B^2 + d)) + B^2``, ``C1 = 6 L_U^2 (C0 + d)``,
    ``C2 = kappa0 + 2 b_U + 2 d``, with ``c_m = max(1, 1/m_U)`` (``moment_factor="max"``, the
    default) or ``min(1, 1/m_U)`` as printed in [cSG] App. C.1 (``moment_factor="min"``, kept to
    evaluate the paper's own bound). The printed factor is wrong for ``m_U < 1``: ``C0`` must
    bound ``L_U^2 E||theta_j||^2 + B^2`` along the iterates, and on ``U = m theta^2 / 2`` with
    ``m < 1`` the Langevin law's second moment ``d / m`` exceeds ``kappa0 + 2 (b_U + 2 B^2 + d)``
    for small ``b_U`` (:ref:`erratum-assumption2`). ``max(1, 1/m_U)`` is the factor of the moment
    bound the proof borrows, and the two agree only at ``m_U = 1``.

    Parameters
    ----------
    L_U : float
        Lipschitz constant of ``grad U`` (Assumption 2 (ii)), >= 0.
    B : float
        Bound on ``||grad U(0)||`` (Assumption 2 (i)); with stochastic gradients, also the
        ``B`` of (iv). >= 0.
    m_U, b_U : float
        Dissipativity ``<w, grad U(w)> >= m_U ||w||^2 - b_U`` (iii), both > 0.
    dim : int
        Dimension ``d >= 1``.
    kappa0 : float
        ``log E_{mu_0} exp(||w||^2)`` (v), >= 0 (Jensen); see :func:`kappa0_gaussian`.
    moment_factor : {"max", "min", "derived"}
        ``1 v 1/m_U`` (default; the bound holds), ``1 ^ 1/m_U`` (as printed; it may not) or
        ``1/m_U``, the factor the moment bound actually delivers (:ref:`theory-derived-constants`:
        with every step ``<= min(1, m_U/(4 L_U^2))``, ``sup_k E||theta_k||^2 <= kappa0 +
        (2/m_U)(b_U + 2B^2 + d)``), never larger than ``1 v 1/m_U``.

    Returns
    -------
    C0, C1, C2 : float
    """
    L_U = real("L_U", L_U, 0.0)
    B = real("B", B, 0.0)
    m_U = positive_float("m_U", m_U)
    b_U = positive_float("b_U", b_U)
    d = integer("dim", dim, low=1)
    kappa0 = real("kappa0", kappa0, 0.0)
    if moment_factor == "min":
        c_m = min(1.0, 1.0 / m_U)
    elif moment_factor == "max":
        c_m = max(1.0, 1.0 / m_U)
    elif moment_factor == "derived":
        c_m = 1.0 / m_U
    else:
        raise ParameterError("moment_factor", f"moment_factor must be 'min', 'max' or 'derived', got {moment_factor!r}")
    # products, not powers: a float overflows to inf where ** raises; each overflow is refused by
    # the name of the constant that causes it (the bounds must stay below 1.8e308)
    finite_values("m_U", c_m, what="the moment factor 1 / m_U", hint=f" (m_U = {m_U:g})")
    finite_values("B", B * B, what="B^2", hint=f" (B = {B:g})")
    moment = kappa0 + 2.0 * c_m * (b_U + 2.0 * B * B + d)
    finite_values("b_U" if b_U >= B * B else "B", moment, what="the moment bound kappa0 + 2 c_m (b_U + 2 B^2 + d)")
    c0 = L_U * L_U * moment + B * B
    c1 = 6.0 * L_U * L_U * (c0 + d)
    finite_values("L_U", c0, c1, what="C0 = L_U^2 (...) + B^2 and C1 = 6 L_U^2 (C0 + d)", hint=f" (L_U = {L_U:g})")
    c2 = kappa0 + 2.0 * b_U + 2.0 * d
    finite_values("b_U" if b_U >= kappa0 else "kappa0", c2, what="C2 = kappa0 + 2 b_U + 2 d")
    return c0, c1, c2


def step_limit(L_U: float, m_U: float) -> float:
    """The largest step for which [cSG] Theorem 1's proof holds: ``min(1, m_U / (4 L_U^2))`` [derived here].

    The proof of [cSG] App. C.1 uses two facts about every step ``alpha_k``:

    1. ``alpha_k <= 1`` ("choosing alpha_0 <= 1"), to bound ``12 alpha^3 (..) + 6 alpha^2 d``
       by ``alpha^2 (12 (..) + 6 d)``;
    2. the second-moment bound behind ``C0`` (borrowed from Raginsky et al.'s Lemma 3.2). Derived
       here in the cyclical paper's units: with ``g = grad U(w) + zeta``, ``E zeta = 0`` and
       Assumption 2 (iv), ``||grad U(w)||^2 <= 2 (L_U^2 ||w||^2 + B^2)`` (smoothness and (i)) and
       ``E||zeta||^2 <= 2 sigma (L_U^2 ||w||^2 + B^2) <= 2 (L_U^2 ||w||^2 + B^2)``, so one step gives::

           E[||theta_{k+1}||^2 | theta_k = w]
               = ||w||^2 - 2 alpha <w, grad U(w)> + alpha^2 (||grad U(w)||^2 + E||zeta||^2) + 2 alpha d
              <= (1 - 2 alpha m_U + 4 alpha^2 L_U^2) ||w||^2 + 2 alpha (b_U + 2 alpha B^2 + d).

       With ``alpha <= m_U / (4 L_U^2)`` the factor is at most ``1 - alpha m_U`` (which lies in
       ``[3/4, 1)``, since dissipativity and smoothness force ``m_U <= L_U``), and with
       ``alpha <= 1`` the constant is at most ``2 alpha c``, ``c = b_U + 2B^2 + d``. Then
       ``x_{k+1} <= x_k - alpha_k (m_U x_k - 2c)``: ``R = max(x_0, 2c/m_U)`` is never exceeded,
       whatever the sequence of admissible steps, and ``x_0 = E||theta_0||^2 <= kappa0`` by
       Jensen. Hence ``sup_k E||theta_k||^2 <= kappa0 + (2/m_U)(b_U + 2B^2 + d)``: the factor is
       ``1/m_U`` (``moment_factor="derived"`` of :func:`assumption_constants`), below the
       default ``1 v 1/m_U`` and above the printed ``1 ^ 1/m_U`` when ``m_U < 1``.

    The factor 4 in ``m_U / (4 L_U^2)`` is the 2 of ``||grad U||^2 <= 2(..)`` times the 2 that
    covers the gradient noise. Without the restriction the moment bound fails: on
    ``U = theta^2 / 2`` from 0 with exact gradients the stationary ``E theta^2 = 2/(2 - alpha)``
    exceeds ``kappa0 + 2 d / m_U = 2`` for every ``alpha > 1``
    (``tests/test_theory_nonconvex.py``).

    Parameters
    ----------
    L_U : float
        Lipschitz constant of ``grad U``, > 0.
    m_U : float
        Dissipativity constant, > 0.

    Returns
    -------
    float
        In (0, 1].
    """
    L_U = positive_float("L_U", L_U)
    m_U = positive_float("m_U", m_U)
    # divided in turn: 4 L_U^2 would overflow for L_U = 1e300 and underflow to 0 for L_U = 1e-300
    limit = min(1.0, m_U / L_U / L_U / 4.0)
    if not limit > 0:
        raise ParameterError(
            "L_U", f"m_U / (4 L_U^2) underflows to 0 (L_U = {L_U:g}, m_U = {m_U:g}): no step is admissible in floats"
        )
    return limit


def derived_prefactor(kappa0: float, b_U: float, m_U: float, dim: int) -> dict[str, float]:
    """``c_p`` and ``time_factor`` that make Theorem 1's prefactor a consequence of its sources [derived here].

    Returns the keyword arguments ``{"c_p": ..., "time_factor": ...}`` of :func:`theorem1_terms`,
    :func:`csgld_bound` and :func:`sgld_bound` for which
    ``(c_p + time_factor C2 t)^(1/2) = (6/lambda + 4 kappa0 + 8 (b_U + d) t)^(1/2)``, with
    ``lambda = min(1, m_U / 2)`` and ``C2 = kappa0 + 2 b_U + 2 d``.

    Derivation (:ref:`theory-derived-constants`). Bolley and Villani's weighted Pinsker
    inequality, the one step [cSG] App. C.1 takes from outside [external], bounds
    ``W2(mu, nu) <= C_nu [KL^(1/2) + (KL/2)^(1/4)]`` with
    ``C_nu^2 = 4 inf_lambda (3/2 + log E_nu exp(lambda ||w||^2)) / lambda``. For the Langevin law
    ``nu_t`` and ``f = exp(lambda ||w||^2)``, the generator gives
    ``L f = f (-2 lambda <w, grad U> + 2 lambda d + 4 lambda^2 ||w||^2)
    <= f (2 lambda (b_U + d) - (2 lambda m_U - 4 lambda^2) ||w||^2)``, which is at most
    ``2 lambda (b_U + d) f`` when ``lambda <= m_U / 2``; hence
    ``log E_{nu_t} f <= log E_{mu_0} f + 2 lambda (b_U + d) t`` (the growth of Raginsky et al.'s
    Lemma 3.3, which at unit temperature needs ``m_U >= 2`` for ``lambda = 1``), and
    ``log E_{mu_0} f <= lambda kappa0`` for ``lambda <= 1`` by Jensen. So
    ``C_nu^2 <= 6/lambda + 4 kappa0 + 8 (b_U + d) t``.

    Consequences for the printed constants (:ref:`erratum-bound-prefactor`): the constant term is
    ``6/lambda + 4 kappa0``, 6 only for ``kappa0 = 0`` and ``m_U >= 2``, so neither the main
    text's 6 nor the appendix's 12 holds in general (12 covers ``kappa0 <= 3/2`` when
    ``m_U >= 2``); the time term is ``8 (b_U + d) t = 4 (2 b_U + 2 d) t <= 4 C2 t``, so the
    printed factor 1 on ``C2 t`` is too small whenever ``6 (b_U + d) > kappa0`` and a factor 8 on
    ``C2 t`` (Raginsky et al.'s form) is twice what is needed.

    Parameters
    ----------
    kappa0 : float
        ``log E_{mu_0} exp(||w||^2)``, >= 0.
    b_U, m_U : float
        Dissipativity constants, > 0.
    dim : int
        ``d >= 1``.

    Returns
    -------
    dict
        ``{"c_p": 6/lambda + 4 kappa0, "time_factor": 8 (b_U + d) / C2}``.
    """
    kappa0 = real("kappa0", kappa0, 0.0)
    b_U = positive_float("b_U", b_U)
    m_U = positive_float("m_U", m_U)
    d = integer("dim", dim, low=1)
    inv_lam = max(6.0, 12.0 / m_U)  # 6 / lambda, lambda = min(1, m_U / 2) (which underflows to 0 at m_U = 5e-324)
    c_p = inv_lam + 4.0 * kappa0
    finite_values("m_U" if inv_lam >= 4.0 * kappa0 else "kappa0", c_p, what="c_p = 6 / min(1, m_U / 2) + 4 kappa0")
    # 8 (b_U + d) / C2 with C2 = kappa0 + 2 (b_U + d), divided through by b_U + d so that C2 cannot overflow
    return {"c_p": c_p, "time_factor": 8.0 / (kappa0 / (b_U + d) + 2.0)}


def kappa0_gaussian(mean, cov) -> float:
    """``kappa0 = log E exp(||w||^2)`` for ``w ~ N(mean, cov)`` (:ref:`theory-assumptions`) [derived here].

    ``kappa0 = -1/2 log det(I - 2 cov) + mean^T (I - 2 cov)^(-1) mean``, finite only when
    ``cov < I/2``.

    Parameters
    ----------
    mean : array_like, shape (d,)
    cov : array_like, shape (d, d)
        Symmetric positive semidefinite (a point mass, ``cov = 0``, is allowed), with every
        eigenvalue < 1/2.

    Raises
    ------
    ValueError
        If ``cov`` has an eigenvalue >= 1/2 (``kappa0`` is infinite) or is not PSD.
    """
    mean = finite_array("mean", mean)
    if mean.ndim != 1 or mean.size == 0:
        raise ParameterError("mean", f"mean must be a non-empty vector, got shape {mean.shape}")
    d = mean.shape[0]
    cov = spd_matrix("cov", cov, d, allow_singular=True)
    a = np.eye(d) - 2.0 * cov
    lam = np.linalg.eigvalsh(a)
    if lam[0] <= 0:
        raise ParameterError(
            "cov", f"cov must satisfy cov < I/2 for kappa0 to be finite (largest eigenvalue {0.5 * (1 - lam[0]):.6g})"
        )
    return float(-0.5 * np.sum(np.log(lam)) + mean @ np.linalg.solve(a, mean))


def strongly_convex_c3_c4(m: float, w2_initial: float) -> tuple[float, float]:
    """``C3, C4`` for an ``m``-strongly convex potential (:ref:`theory-constants`) [external].

    By synchronous coupling, ``W2(nu_t, nu_inf) <= exp(-m t) W2(nu_0, nu_inf)``, i.e.
    ``C3 = W2(nu_0, nu_inf)`` and ``C4 = 1/m``.

    Parameters
    ----------
    m : float
        Strong-convexity constant of ``U`` (``lambda_min`` of the Hessian), > 0.
    w2_initial : float
        ``W2(nu_0, nu_inf)``, the distance of the initial law to the target, >= 0.

    Returns
    -------
    C3, C4 : float
    """
    m = positive_float("m", m)
    w2 = real("w2_initial", w2_initial, 0.0)
    finite_values("m", 1.0 / m, what="C4 = 1 / m", hint=f" (m = {m:g})")
    return w2, 1.0 / m


def linear_gaussian_constants(
    precision,
    shift,
    init_mean,
    init_cov,
    grad_noise_cov=None,
    *,
    sigma: float | None = None,
    moment_factor: str = "max",
    b_floor: float = 1e-12,
) -> TheoremConstants:
    """Computable constants of Theorem 1 for ``U = theta^T P theta / 2 - c^T theta`` (:ref:`theory-bound-remarks`).

    The target is ``N(P^-1 c, P^-1)`` and the initial law ``mu_0 = N(init_mean, init_cov)``.
    The recipe of :ref:`theory-bound-remarks`:

    - ``L_U = lambda_max(P)``; ``kappa0`` from :func:`kappa0_gaussian`;
    - dissipativity: ``m_U = lambda_min(P) / 2``, ``b_U = ||c||^2 / (2 lambda_min(P))`` (from
      ``<w, Pw - c> >= lambda_min ||w||^2 - ||c|| ||w||`` and Young's inequality); for
      ``c = 0``, ``m_U = lambda_min(P)`` and ``b_U = b_floor`` (Assumption 2 wants ``b > 0``);
    - ``C3 = W2(mu_0, N(P^-1 c, P^-1))``, ``C4 = 1 / lambda_min(P)`` (:func:`strongly_convex_c3_c4`);
    - ``step_limit = min(1, m_U / (4 L_U^2))`` (:func:`step_limit`), the steps for which ``C0``
      holds;
    - exact gradients: ``sigma = 0`` and ``B = ||c||``. With additive gradient noise of
      covariance ``V``, Assumption 2 (iv) ``E||noise||^2 = tr V <= 2 sigma (L_U^2 ||w||^2 + B^2)``
      holds for all ``w`` iff ``tr V <= 2 sigma B^2``, so ``B = max(||c||, (tr V / (2 sigma))^(1/2))``
      with ``sigma`` = 1/2 unless given.

    Parameters
    ----------
    precision : array_like, shape (d, d)
        ``P``, symmetric positive definite.
    shift : array_like, shape (d,)
        ``c`` (``grad U(theta) = P theta - c``).
    init_mean : array_like, shape (d,)
    init_cov : array_like, shape (d, d)
        PSD with eigenvalues < 1/2 (so that ``kappa0`` is finite).
    grad_noise_cov : array_like, shape (d, d), optional
        ``V``, the covariance of the additive gradient noise (cSG convention).
    sigma : float, optional
        Noise constant in (0, 1) when there is gradient noise; must be 0 or None without it.
    moment_factor : {"max", "min"}
        Passed to :func:`assumption_constants`.
    b_floor : float
        ``b_U`` used when ``c = 0``, > 0.

    Returns
    -------
    TheoremConstants
    """
    init_mean = finite_array("init_mean", init_mean)
    if init_mean.ndim != 1 or init_mean.size == 0:
        raise ParameterError("init_mean", f"init_mean must be a non-empty vector, got shape {init_mean.shape}")
    d = init_mean.shape[0]
    p = spd_matrix("precision", precision, d)
    c = finite_array("shift", shift, (d,))
    init_cov = spd_matrix("init_cov", init_cov, d, allow_singular=True)
    b_floor = positive_float("b_floor", b_floor)
    lam = np.linalg.eigvalsh(p)
    lam_min, lam_max = float(lam[0]), float(lam[-1])
    c_norm = float(np.linalg.norm(c))
    if c_norm > 0:
        m_u, b_u = lam_min / 2.0, c_norm**2 / (2.0 * lam_min)
    else:
        m_u, b_u = lam_min, b_floor
    noise_trace = 0.0
    if grad_noise_cov is not None:
        noise_trace = float(np.trace(spd_matrix("grad_noise_cov", grad_noise_cov, d, allow_singular=True)))
    if noise_trace > 0:
        s = 0.5 if sigma is None else real("sigma", sigma, 0.0, 1.0, low_open=True, high_open=True)
        big_b = max(c_norm, math.sqrt(noise_trace / (2.0 * s)))
    else:
        s = 0.0 if sigma is None else real("sigma", sigma, 0.0, 1.0, high_open=True)
        big_b = c_norm
    with renamed(mean="init_mean", cov="init_cov"):
        kappa0 = kappa0_gaussian(init_mean, init_cov)
    # the constants of Assumption 2 come from P (L_U, m_U), c (B, b_U), V (B) and mu_0 (kappa0)
    noise = "grad_noise_cov" if big_b > c_norm else "shift"
    with renamed(L_U="precision", m_U="precision", B=noise, b_U="shift", kappa0="init_cov"):
        c0, c1, c2 = assumption_constants(lam_max, big_b, m_u, b_u, d, kappa0, moment_factor=moment_factor)
        limit = step_limit(lam_max, m_u)
    cov_inf = np.linalg.inv(p)
    mode = cov_inf @ c
    finite_values("shift", mode, what="the target's mean P^-1 c")
    with renamed(m1="init_mean", S1="init_cov", m2="shift", S2="precision"):
        w2_0 = float(gaussian_w2(init_mean, init_cov, mode, cov_inf))
    with renamed(m="precision"):
        c3, c4 = strongly_convex_c3_c4(lam_min, w2_0)
    return TheoremConstants(C0=c0, C1=c1, C2=c2, C3=c3, C4=c4, sigma=s, step_limit=limit)


# ----------------------------------------------------------------------------------------------
# Theorem 1 (docs: theory-wasserstein-bound)


# ----------------------------------------------------------------------------- exact sums of the cosine schedule


def _full_cycles(n_steps, n_cycles) -> tuple[int, int, int]:
    n = integer("n_steps", n_steps, low=1)
    m = integer("n_cycles", n_cycles, low=1)
    if n % m:
        raise ParameterError("n_steps", f"the exact sums need n_steps to be a multiple of n_cycles, got K={n}, M={m}")
    return n, m, n // m


def cyclical_sum(step_size: float, n_cycles: int, n_steps: int) -> float:
    """Exact ``sum_k alpha_k`` of the cosine schedule: ``alpha_0 (K + M) / 2`` (:ref:`theory-schedules`).

    [cSG] App. C prints ``K alpha_0 / 2``, which drops ``alpha_0 M / 2`` (:ref:`erratum-step-sums`).
    Requires ``K = M L_c``. For ``L_c = 1`` the schedule is constant and the formula still
    holds.
    """
    alpha0 = positive_float("step_size", step_size)
    n, m, _ = _full_cycles(n_steps, n_cycles)
    s = alpha0 * (n + m) / 2.0
    finite_values("step_size", s, what="the sum of the steps", hint=f" (step_size = {alpha0:g}, n_steps = {n})")
    return s


def cyclical_sum_squares(step_size: float, n_cycles: int, n_steps: int) -> float:
    """Exact ``sum_k alpha_k^2``: ``alpha_0^2 (3K/8 + M/2)`` for ``L_c >= 2``, ``K alpha_0^2`` for ``L_c = 1``.

    [cSG] eq. 17 prints ``3 alpha_0^2 K / 8`` (:ref:`erratum-step-sums`).
    """
    alpha0 = positive_float("step_size", step_size)
    n, m, length = _full_cycles(n_steps, n_cycles)
    s2 = n * alpha0 * alpha0 if length == 1 else alpha0 * alpha0 * (3.0 * n / 8.0 + m / 2.0)
    hint = f" (step_size = {alpha0:g}, n_steps = {n})"
    finite_values("step_size", s2, what="the sum of the squared steps", hint=hint)
    return s2


def harmonic_number(n: int) -> float:
    """``H_n = sum_{k=1}^n 1/k``, exactly (``digamma(n + 1) + gamma_E``), for ``n >= 1``."""
    n = integer("n", n, low=1)
    return float(special.digamma(n + 1.0) + np.euler_gamma)


def _sum_inverse_squares(n: int) -> float:
    """``sum_{k=1}^n 1/k^2 = pi^2/6 - trigamma(n + 1)``."""
    return float(math.pi**2 / 6.0 - special.polygamma(1, n + 1.0))


def _options(c_p, time_factor) -> tuple[float, float]:
    return real("c_p", c_p, 0.0), real("time_factor", time_factor, 0.0)


def _check_step(constants, max_step, step_check: str) -> tuple[bool, float]:
    """``(within_hypotheses, max_step)``; warns or raises when a step exceeds the proof's limit."""
    step_check = choice("step_check", step_check, STEP_CHECKS)
    if max_step is None:
        return True, math.nan
    top = positive_float("max_step", max_step)
    if top <= constants.step_limit:
        return True, top
    message = (
        f"step_size {top:.6g} exceeds the proof's step restriction: Theorem 1 needs every step in "
        f"(0, {constants.step_limit:.6g}] (min(1, m_U / (4 L_U^2)) for constants from Assumption 2); "
        "the terms are the formula's value, not a bound the proof supports"
    )
    if step_check == "raise":
        raise ParameterError("step_size", message)
    if step_check == "warn":
        warnings.warn(message, StepRestrictionWarning, stacklevel=3)
    return False, top


def theorem1_terms(
    constants: TheoremConstants,
    diffusion_time: float,
    sum_squares: float,
    *,
    c_p: float = DEFAULT_C_P,
    time_factor: float = 1.0,
    max_step: float | None = None,
    step_check: str = "warn",
) -> Theorem1Terms:
    """The terms of [cSG] Theorem 1 for any step-size sequence, given its two sums (App. C).

    ``KL = C1 sum_squares + sigma C0 S``;
    ``W2(mu_K, nu_S) <= (c_p + time_factor C2 S)^(1/2) [KL^(1/2) + (KL/2)^(1/4)]``;
    ``W2(nu_S, nu_inf) <= C3 exp(-S / C4)``. The proof (App. C.1, C.3) bounds the KL by the
    sums themselves; the closed forms of :func:`csgld_bound` and :func:`sgld_bound` are the
    special cases. The proof needs every step ``<= constants.step_limit`` (:func:`step_limit`);
    given ``max_step``, the largest step, this function checks it (``step_check``).

    Parameters
    ----------
    constants : TheoremConstants
    diffusion_time : float
        ``S = sum_k alpha_k >= 0``.
    sum_squares : float
        ``sum_k alpha_k^2 >= 0``.
    c_p : float
        Constant of the prefactor: 12 in Appendix C.1 (default), 6 in the main text (:ref:`erratum-bound-prefactor`).
    time_factor : float
        Factor on ``C2 S`` in the prefactor: 1 as printed (default), 8 for Raginsky et al.'s
        ``(12 + 8 C2 t)^(1/2)`` (:ref:`erratum-bound-prefactor`); :func:`derived_prefactor`
        gives the ``c_p`` and factor that the proof's sources support.
    max_step : float, optional
        The largest step of the sequence, > 0. Not given: no check, ``within_hypotheses=True``.
    step_check : {"warn", "raise", "ignore"}
        What to do when ``max_step > constants.step_limit``: a :class:`StepRestrictionWarning`
        (default), a ``ParameterError`` naming ``step_size``, or nothing.
        In every case ``within_hypotheses`` is False and the terms are the formula's value,
        which the proof then does not support.

    Returns
    -------
    Theorem1Terms
    """
    if not isinstance(constants, TheoremConstants):
        raise ParameterTypeError("constants", f"constants must be a TheoremConstants, got {type(constants).__name__}")
    s = real("diffusion_time", diffusion_time, 0.0)
    s2 = real("sum_squares", sum_squares, 0.0)
    c_p, time_factor = _options(c_p, time_factor)
    within, top = _check_step(constants, max_step, step_check)
    kl = constants.C1 * s2 + constants.sigma * constants.C0 * s
    time_term = time_factor * constants.C2 * s
    finite_values("c_p" if c_p >= time_term else "time_factor", c_p + time_term, what="c_p + time_factor C2 S")
    prefactor = math.sqrt(c_p + time_term)
    w2_disc = prefactor * (math.sqrt(kl) + (kl / 2.0) ** 0.25)
    w2_exp = constants.C3 * math.exp(-s / constants.C4)
    return Theorem1Terms(
        diffusion_time=s,
        sum_squares=s2,
        kl=kl,
        prefactor=prefactor,
        w2_discretisation=w2_disc,
        w2_exponential=w2_exp,
        total=w2_disc + w2_exp,
        max_step=top,
        within_hypotheses=within,
    )


def csgld_bound(
    constants: TheoremConstants,
    step_size: float,
    n_cycles: int,
    n_steps: int,
    *,
    c_p: float = DEFAULT_C_P,
    time_factor: float = 1.0,
    exact_sums: bool = True,
    step_check: str = "warn",
) -> Theorem1Terms:
    """[cSG] Theorem 1, eq. 5: the bound on ``W2(mu_K, nu_inf)`` for cSGLD (no exploration stage).

    With the cosine schedule of eq. 2 (``K = M L_c``)::

        KL  <= C1 sum alpha^2 + sigma C0 S,     S = sum alpha
        W2  <= (c_p + f C2 S)^(1/2) [KL^(1/2) + (KL/2)^(1/4)] + C3 exp(-S / C4)

    ``exact_sums=True`` (default, :ref:`theory-bound-remarks`) uses ``S = alpha_0 (K + M) / 2`` and
    ``sum alpha^2 = alpha_0^2 (3K/8 + M/2)`` (``K alpha_0^2`` when ``L_c = 1``);
    ``exact_sums=False`` uses the paper's printed ``K alpha_0 / 2`` and ``3 alpha_0^2 K / 8``
    (eq. 17, :ref:`erratum-step-sums`), which are smaller and so not a bound of the proof. The main text's
    form is ``exact_sums=False, c_p=6``.

    Parameters
    ----------
    constants : TheoremConstants
    step_size : float
        ``alpha_0 > 0``, the largest step; the proof needs ``alpha_0 <= constants.step_limit``.
    n_cycles : int
        ``M >= 1``, dividing ``n_steps``.
    n_steps : int
        ``K``.
    c_p, time_factor : float
        See :func:`theorem1_terms` (defaults: Appendix C.1's ``12 + C2 S``).
    exact_sums : bool
        Exact schedule sums (default) or the printed approximations.
    step_check : {"warn", "raise", "ignore"}
        See :func:`theorem1_terms`: ``alpha_0`` against ``constants.step_limit``.

    Returns
    -------
    Theorem1Terms
    """
    if boolean("exact_sums", exact_sums):
        s = cyclical_sum(step_size, n_cycles, n_steps)
        s2 = cyclical_sum_squares(step_size, n_cycles, n_steps)
    else:
        alpha0 = positive_float("step_size", step_size)
        k = integer("n_steps", n_steps, low=1)
        m = integer("n_cycles", n_cycles, low=1)
        if k % m:
            raise ParameterError("n_cycles", f"Theorem 1 needs n_steps to be a multiple of n_cycles, got K={k}, M={m}")
        s = k * alpha0 / 2.0
        s2 = 3.0 * alpha0 * alpha0 * k / 8.0  # a float product: inf, not OverflowError, past the floats
    top = positive_float("step_size", step_size)
    _finite_sums(s, s2)
    return theorem1_terms(constants, s, s2, c_p=c_p, time_factor=time_factor, max_step=top, step_check=step_check)


def _finite_sums(s: float, s2: float) -> None:
    """Name ``step_size`` where the schedule's sums overflow (a step near the largest float)."""
    finite_values("step_size", s, s2, what="the schedule's sums (sum of steps, sum of squared steps)")


def sgld_bound(
    constants: TheoremConstants,
    step_size: float,
    n_steps: int,
    *,
    c_p: float = DEFAULT_C_P,
    time_factor: float = 1.0,
    exact_sums: bool = True,
    step_check: str = "warn",
) -> Theorem1Terms:
    """[cSG] Theorem 1, eq. 6: the bound on ``W2(mu~_K, nu_inf)`` for SGLD with ``h_k = h_0 / k``.

    ``S = h_0 H_K`` (exact in both forms) and ``sum h^2 = h_0^2 sum_{k<=K} 1/k^2``
    (``exact_sums=True``, default) or the paper's ``h_0^2 pi^2 / 6`` (App. C.3, an upper
    bound of the exact sum). The quarter-power term is ``(KL/2)^(1/4)``, i.e. Appendix C.3's
    ``pi^2 / 12``, not the main text's ``pi^2 / 16``, and the prefactor carries ``C2``
    (:ref:`erratum-sgld-bound`; the main text's ``(6 + h_0 H_K)^(1/2)`` is ``c_p=6, time_factor=1/C2``).

    Parameters
    ----------
    constants : TheoremConstants
    step_size : float
        ``h_0 > 0``, the largest step; the proof needs ``h_0 <= constants.step_limit``.
    n_steps : int
        ``K >= 1``.
    c_p, time_factor : float
        See :func:`theorem1_terms`.
    exact_sums : bool
        ``sum_{k<=K} 1/k^2`` (default) or ``pi^2 / 6``.
    step_check : {"warn", "raise", "ignore"}
        See :func:`theorem1_terms`: ``h_0`` against ``constants.step_limit``.

    Returns
    -------
    Theorem1Terms
    """
    h0 = positive_float("step_size", step_size)
    k = integer("n_steps", n_steps, low=1)
    exact_sums = boolean("exact_sums", exact_sums)
    s = h0 * harmonic_number(k)
    s2 = h0 * h0 * (_sum_inverse_squares(k) if exact_sums else math.pi**2 / 6.0)
    _finite_sums(s, s2)
    return theorem1_terms(constants, s, s2, c_p=c_p, time_factor=time_factor, max_step=h0, step_check=step_check)


# ----------------------------------------------------------------------------------------------
# Diffusion time ([cSG] Section 4; docs: theory-wasserstein-bound)


def matched_h0(step_size: float, n_steps: int, n_cycles: int | None = None) -> float:
    """The ``h_0`` for which SGLD with ``h_k = h_0/k`` has cSGLD's diffusion time ([cSG] §4).

    ``h_0 H_K = K alpha_0 / 2`` gives ``h_0 = K alpha_0 / (2 H_K) = O(alpha_0 K / log K)``. With
    ``n_cycles`` the exact diffusion time ``alpha_0 (K + M) / 2`` is matched instead (then
    ``K`` must be a multiple of ``M``). Either ``h_0`` is far above 1 for large ``K``, outside
    the proof's ``h_0 <= 1``.
    """
    alpha0 = positive_float("step_size", step_size)
    k = integer("n_steps", n_steps, low=1)
    s = k * alpha0 / 2.0 if n_cycles is None else cyclical_sum(alpha0, n_cycles, k)
    finite_values("step_size", s, what="the diffusion time", hint=f" (step_size = {alpha0:g}, n_steps = {k})")
    return s / harmonic_number(k)


def discretisation_ratio(n_steps: int) -> float:
    """``pi^2 K / (9 H_K^2)``: SGLD's over cSGLD's discretisation sum at matched diffusion time.

    With ``h_0 = K alpha_0 / (2 H_K)`` (:func:`matched_h0`), the printed sums compare as
    ``(pi^2/6) h_0^2 / (3 alpha_0^2 K / 8) = pi^2 K / (9 H_K^2)`` ([cSG] §4, :ref:`theory-wasserstein-bound`):
    19.6 at ``K = 10^3``, 422 at ``5 10^4``, 5294 at ``10^6``. The sigma terms are equal by
    construction.
    """
    k = integer("n_steps", n_steps, low=1)
    return math.pi**2 * k / (9.0 * harmonic_number(k) ** 2)


# ----------------------------------------------------------------------------------------------
# Weak convergence ([cSG-ICLR] Theorem 1; docs: theory-weak-convergence) [reconstructed]


def weak_error_terms(step_sizes, *, weighted: bool = True, order: int = 1, grad_noise_moment=0.0) -> WeakErrorTerms:
    """Bias and MSE order terms of a sample average of SG-MCMC (:ref:`theory-weak-convergence`) [reconstructed].

    [reconstructed] The extraction of "Cyclical Stochastic Gradient MCMC for Bayesian Deep
    Learning" (ICLR 2020) lost the formulas of its Theorem 1. :ref:`theory-weak-convergence` rebuilds them from the
    decreasing-step theorem of Chen, Ding & Carin (2015) [external]: for an integrator of
    order ``order`` (SGLD: 1), step sizes ``h_l``, ``S_L = sum_l h_l`` and the step-weighted
    average ``phi_hat = sum_l h_l phi(theta_l) / S_L``::

        |E phi_hat - phi_bar|   = O( 1/S_L + sum_l h_l^(order+1) / S_L )
        E (phi_hat - phi_bar)^2 = O( sum_l h_l^2 E||DV_l||^2 / S_L^2 + 1/S_L + (sum_l h_l^(order+1))^2 / S_L^2 )

    For the cyclical schedule (``S = K alpha_0 / 2``, ``sum alpha^2 = 3 K alpha_0^2 / 8``) this is
    ``Bias = O(1/(alpha_0 K) + alpha_0)``, ``MSE = O(1/(alpha_0 K) + alpha_0^2)`` (plus the
    noise term).

    Any normalised weights ``w_l`` go through the same Poisson-equation argument [derived
    here]: with ``r_l = w_l / h_l``, Abel summation of ``sum_l r_l (psi(theta_l) - psi(theta_{l-1}))``
    gives the transient term ``(r_1 + r_L)/2 + sum_l |r_{l+1} - r_l|`` (``1/S_L`` for
    ``w = h/S_L``, within a factor 2 of the bound), the discretisation term
    ``sum_l w_l h_l^order``, the martingale term ``sum_l w_l^2 / h_l`` and the noise term
    ``sum_l w_l^2 E||DV_l||^2``. ``weighted=False`` applies this to the unweighted average
    ``(1/L) sum_l phi(theta_l)`` that [cSG-ICLR] defines. For a cyclical schedule its transient
    term is of order ``L_c / alpha_0`` (the total variation of ``1/h`` over the small steps at
    the end of each cycle), so this argument does not give the ICLR rate for the unweighted
    average; it bounds, it does not estimate.

    Parameters
    ----------
    step_sizes : array_like, shape (L,)
        ``h_1..h_L``, each > 0.
    weighted : bool
        Step-weighted average (default, Chen et al.) or unweighted ([cSG-ICLR]).
    order : int
        Order of the integrator's local weak error, >= 1 (Euler/SGLD: 1).
    grad_noise_moment : float or array_like, shape (L,)
        ``E||Delta V_l||^2``, the size of the gradient-noise operator per step, >= 0.

    Returns
    -------
    WeakErrorTerms
    """
    h = finite_array("step_sizes", step_sizes)
    if h.ndim != 1 or h.size == 0:
        raise ParameterError("step_sizes", f"step_sizes must be a non-empty vector, got shape {h.shape}")
    if np.any(h <= 0):
        raise ParameterError("step_sizes", "step_sizes must all be > 0")
    order = integer("order", order, low=1)
    noise = finite_array("grad_noise_moment", grad_noise_moment)
    if noise.ndim > 1 or (noise.ndim == 1 and noise.shape != h.shape):
        raise ParameterError(
            "grad_noise_moment", f"grad_noise_moment must be a scalar or have shape {h.shape}, got {noise.shape}"
        )
    if np.any(noise < 0):
        raise ParameterError("grad_noise_moment", "grad_noise_moment must be >= 0")
    weighted = boolean("weighted", weighted)
    w = h / h.sum() if weighted else np.full(h.shape, 1.0 / h.size)
    r = w / h
    transient = float(0.5 * (r[0] + r[-1]) + np.abs(np.diff(r)).sum())
    disc = float(np.sum(w * h**order))
    mse_noise = float(np.sum(w**2 * noise))
    martingale = float(np.sum(w**2 / h))
    mse = mse_noise + martingale + transient**2 + disc**2
    return WeakErrorTerms(
        bias_transient=transient,
        bias_discretisation=disc,
        bias=transient + disc,
        mse_noise=mse_noise,
        mse_martingale=martingale,
        mse_transient=transient**2,
        mse_discretisation=disc**2,
        mse=mse,
    )


@dataclass(frozen=True)
class AverageError:
    """Exact error of a sample average of SGLD on a 1-D Gaussian target (:func:`gaussian_average_error`).

    Attributes
    ----------
    bias : float
        ``E phi_hat - E_pi theta``.
    variance : float
        ``Var phi_hat``.
    mse : float
        ``bias^2 + variance``.
    noise_variance : float
        The part of ``variance`` that the gradient noise adds: ``V sum_l G_l^2 h_l^2``.
    """

    bias: float
    variance: float
    mse: float
    noise_variance: float


def gaussian_average_error(
    precision: float,
    shift: float,
    step_sizes,
    *,
    grad_noise_var: float = 0.0,
    init_mean: float = 0.0,
    init_var: float = 0.0,
    weighted: bool = True,
    temperature: float = 1.0,
) -> AverageError:
    """Exact bias and MSE of SGLD's sample average of ``theta`` on ``U = a theta^2/2 - c theta`` [derived here].

    SGLD in the cyclical paper's units with additive gradient noise ``zeta_l ~ N(0, V)``::

        theta_l = (1 - a h_l) theta_{l-1} + h_l c - h_l zeta_l + sqrt(2 h_l T) xi_l

    and the average ``phi_hat = sum_{l=1}^L w_l theta_l`` (``w = h / S_L`` or ``1/L``). Every
    ``theta_l`` is Gaussian and the deviation of ``phi_hat`` is a linear form in the independent
    innovations: ``phi_hat - E phi_hat = G_0 (theta_0 - m_0) + sum_l G_l e_l`` with
    ``G_L = w_L``, ``G_l = w_l + (1 - a h_{l+1}) G_{l+1}``, ``G_0 = (1 - a h_1) G_1`` and
    ``Var e_l = 2 h_l T + h_l^2 V``. Hence ``Var phi_hat = G_0^2 v_0 + sum_l G_l^2 (2 h_l T + h_l^2 V)``,
    exactly, and the gradient noise adds ``V sum_l G_l^2 h_l^2``, linear in ``V``.

    This is the check of the weak-convergence theorem's noise term
    (:ref:`theory-weak-convergence`): for ``phi(theta) = theta`` the Poisson equation
    ``L psi = phi - E_pi phi`` has ``psi' = -1/a``, so ``E||Delta V_l psi||^2 = V / a^2``; and for
    steps that vary slowly on the relaxation time ``1/(a h)``, ``G_l ~ w_l / (a h_l)``, so the
    added variance tends to ``sum_l w_l^2 V / a^2``, the theorem's ``mse_noise`` of
    :func:`weak_error_terms` with constant 1 (up to ``O(a h)`` and the last ``1/(a S_L)`` of time).

    Parameters
    ----------
    precision : float
        ``a > 0``.
    shift : float
        ``c`` (the target is ``N(c/a, 1/(a T))``).
    step_sizes : array_like, shape (L,)
        ``h_1..h_L``, each > 0.
    grad_noise_var : float
        ``V >= 0``.
    init_mean, init_var : float
        Law of ``theta_0`` (``init_var >= 0``).
    weighted : bool
        Step-weighted (default) or unweighted average.
    temperature : float
        ``T > 0``.

    Returns
    -------
    AverageError
    """
    a = positive_float("precision", precision)
    c = real("shift", shift)
    h = finite_array("step_sizes", step_sizes)
    if h.ndim != 1 or h.size == 0 or np.any(h <= 0):
        raise ParameterError("step_sizes", f"step_sizes must be a non-empty vector of steps > 0, got shape {h.shape}")
    v = real("grad_noise_var", grad_noise_var, 0.0)
    m0 = real("init_mean", init_mean)
    v0 = real("init_var", init_var, 0.0)
    t = positive_float("temperature", temperature)
    weighted = boolean("weighted", weighted)
    target_mean = c / a
    finite_values("precision", target_mean, what="the target's mean shift / precision", hint=f" (precision = {a:g})")
    try:
        # an overflow here is refused, not returned: steps with |1 - a h| > 1 grow the recursion
        # geometrically, and a few huge ones take it beyond the floats
        with np.errstate(over="raise", invalid="raise"):
            w = h / h.sum() if weighted else np.full(h.shape, 1.0 / h.size)
            f = 1.0 - a * h
            means = np.empty(h.size)
            m = m0
            for i in range(h.size):
                m = f[i] * m + h[i] * c
                means[i] = m
            g = np.empty(h.size)
            acc = 0.0
            for i in range(h.size - 1, -1, -1):
                acc = w[i] + (f[i + 1] * acc if i + 1 < h.size else 0.0)
                g[i] = acc
            g0 = f[0] * g[0]
            noise = float(v * np.sum(g**2 * h**2))
            variance = float(g0**2 * v0 + np.sum(g**2 * 2.0 * h * t)) + noise
            bias = float(np.sum(w * means) - target_mean)
    except FloatingPointError:
        bias = variance = math.inf
    mse = bias * bias + variance
    finite_values(
        "step_sizes",
        bias,
        mse,
        what="the average's bias and variance",
        hint=" (steps with |1 - precision * step| > 1 grow them geometrically; with the initial law and the noise they"
        " must stay below 1.8e308)",
    )
    return AverageError(bias=bias, variance=variance, mse=mse, noise_variance=noise)

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
  ``(12 + C2 sum alpha)^(1/2)`` in Appendix C.1; Raginsky et al. (as recalled) carry a
  factor 8 on the time term. Both are parameters here: ``c_p`` (default 12, the appendix)
  and ``time_factor`` (default 1, the paper's ``C2 t``; 8 for Raginsky et al.'s form).
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
from dataclasses import dataclass

import numpy as np
from scipy import special

from .._validate import ParameterError, finite_array, integer, positive_float, real, spd_matrix
from .distances import gaussian_w2

__all__ = [
    "TheoremConstants",
    "Theorem1Terms",
    "WeakErrorTerms",
    "assumption_constants",
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
]

#: ``c_p`` of Appendix C.1 (the main text prints 6; docs: erratum-bound-prefactor).
DEFAULT_C_P = 12.0


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

    def __post_init__(self):
        for name in ("C0", "C1", "C2", "C3"):
            object.__setattr__(self, name, real(name, getattr(self, name), 0.0))
        object.__setattr__(self, "C4", positive_float("C4", self.C4))
        object.__setattr__(self, "sigma", real("sigma", self.sigma, 0.0, 1.0, high_open=True))


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
    """

    diffusion_time: float
    sum_squares: float
    kl: float
    prefactor: float
    w2_discretisation: float
    w2_exponential: float
    total: float


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
    moment_factor : {"max", "min"}
        ``1 v 1/m_U`` (default; the bound holds) or ``1 ^ 1/m_U`` (as printed; it may not).

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
    else:
        raise ValueError(f"moment_factor must be 'min' or 'max', got {moment_factor!r}")
    c0 = L_U**2 * (kappa0 + 2.0 * c_m * (b_U + 2.0 * B**2 + d)) + B**2
    c1 = 6.0 * L_U**2 * (c0 + d)
    c2 = kappa0 + 2.0 * b_U + 2.0 * d
    return c0, c1, c2


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
        raise ValueError(f"mean must be a non-empty vector, got shape {mean.shape}")
    d = mean.shape[0]
    cov = spd_matrix("cov", cov, d, allow_singular=True)
    a = np.eye(d) - 2.0 * cov
    lam = np.linalg.eigvalsh(a)
    if lam[0] <= 0:
        raise ValueError(
            f"cov must satisfy cov < I/2 for kappa0 to be finite (largest eigenvalue {0.5 * (1 - lam[0]):.6g})"
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
        raise ValueError(f"init_mean must be a non-empty vector, got shape {init_mean.shape}")
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
    kappa0 = kappa0_gaussian(init_mean, init_cov)
    c0, c1, c2 = assumption_constants(lam_max, big_b, m_u, b_u, d, kappa0, moment_factor=moment_factor)
    cov_inf = np.linalg.inv(p)
    w2_0 = float(gaussian_w2(init_mean, init_cov, cov_inf @ c, cov_inf))
    c3, c4 = strongly_convex_c3_c4(lam_min, w2_0)
    return TheoremConstants(C0=c0, C1=c1, C2=c2, C3=c3, C4=c4, sigma=s)


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
    return alpha0 * (n + m) / 2.0


def cyclical_sum_squares(step_size: float, n_cycles: int, n_steps: int) -> float:
    """Exact ``sum_k alpha_k^2``: ``alpha_0^2 (3K/8 + M/2)`` for ``L_c >= 2``, ``K alpha_0^2`` for ``L_c = 1``.

    [cSG] eq. 17 prints ``3 alpha_0^2 K / 8`` (:ref:`erratum-step-sums`).
    """
    alpha0 = positive_float("step_size", step_size)
    n, m, length = _full_cycles(n_steps, n_cycles)
    if length == 1:
        return n * alpha0**2
    return alpha0**2 * (3.0 * n / 8.0 + m / 2.0)


def harmonic_number(n: int) -> float:
    """``H_n = sum_{k=1}^n 1/k``, exactly (``digamma(n + 1) + gamma_E``), for ``n >= 1``."""
    n = integer("n", n, low=1)
    return float(special.digamma(n + 1.0) + np.euler_gamma)


def _sum_inverse_squares(n: int) -> float:
    """``sum_{k=1}^n 1/k^2 = pi^2/6 - trigamma(n + 1)``."""
    return float(math.pi**2 / 6.0 - special.polygamma(1, n + 1.0))


def _options(c_p, time_factor) -> tuple[float, float]:
    return real("c_p", c_p, 0.0), real("time_factor", time_factor, 0.0)


def theorem1_terms(
    constants: TheoremConstants,
    diffusion_time: float,
    sum_squares: float,
    *,
    c_p: float = DEFAULT_C_P,
    time_factor: float = 1.0,
) -> Theorem1Terms:
    """The terms of [cSG] Theorem 1 for any step-size sequence, given its two sums (App. C).

    ``KL = C1 sum_squares + sigma C0 S``;
    ``W2(mu_K, nu_S) <= (c_p + time_factor C2 S)^(1/2) [KL^(1/2) + (KL/2)^(1/4)]``;
    ``W2(nu_S, nu_inf) <= C3 exp(-S / C4)``. The proof (App. C.1, C.3) bounds the KL by the
    sums themselves; the closed forms of :func:`csgld_bound` and :func:`sgld_bound` are the
    special cases. It assumes every step size is <= 1 (and, through Raginsky et al.'s moment
    bound, small enough); this function evaluates the formula regardless.

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
        ``(12 + 8 C2 t)^(1/2)`` as recalled (:ref:`erratum-bound-prefactor`).

    Returns
    -------
    Theorem1Terms
    """
    if not isinstance(constants, TheoremConstants):
        raise TypeError(f"constants must be a TheoremConstants, got {type(constants).__name__}")
    s = real("diffusion_time", diffusion_time, 0.0)
    s2 = real("sum_squares", sum_squares, 0.0)
    c_p, time_factor = _options(c_p, time_factor)
    kl = constants.C1 * s2 + constants.sigma * constants.C0 * s
    prefactor = math.sqrt(c_p + time_factor * constants.C2 * s)
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
        ``alpha_0 > 0`` (the proof assumes ``alpha_0 <= 1``).
    n_cycles : int
        ``M >= 1``, dividing ``n_steps``.
    n_steps : int
        ``K``.
    c_p, time_factor : float
        See :func:`theorem1_terms` (defaults: Appendix C.1's ``12 + C2 S``).
    exact_sums : bool
        Exact schedule sums (default) or the printed approximations.

    Returns
    -------
    Theorem1Terms
    """
    if exact_sums:
        s = cyclical_sum(step_size, n_cycles, n_steps)
        s2 = cyclical_sum_squares(step_size, n_cycles, n_steps)
    else:
        alpha0 = positive_float("step_size", step_size)
        k = integer("n_steps", n_steps, low=1)
        m = integer("n_cycles", n_cycles, low=1)
        if k % m:
            raise ValueError(f"Theorem 1 needs n_steps to be a multiple of n_cycles, got K={k}, M={m}")
        s = k * alpha0 / 2.0
        s2 = 3.0 * alpha0**2 * k / 8.0
    return theorem1_terms(constants, s, s2, c_p=c_p, time_factor=time_factor)


def sgld_bound(
    constants: TheoremConstants,
    step_size: float,
    n_steps: int,
    *,
    c_p: float = DEFAULT_C_P,
    time_factor: float = 1.0,
    exact_sums: bool = True,
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
        ``h_0 > 0`` (the proof assumes ``h_0 <= 1``).
    n_steps : int
        ``K >= 1``.
    c_p, time_factor : float
        See :func:`theorem1_terms`.
    exact_sums : bool
        ``sum_{k<=K} 1/k^2`` (default) or ``pi^2 / 6``.

    Returns
    -------
    Theorem1Terms
    """
    h0 = positive_float("step_size", step_size)
    k = integer("n_steps", n_steps, low=1)
    s = h0 * harmonic_number(k)
    s2 = h0**2 * (_sum_inverse_squares(k) if exact_sums else math.pi**2 / 6.0)
    return theorem1_terms(constants, s, s2, c_p=c_p, time_factor=time_factor)


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
        raise ValueError(f"step_sizes must be a non-empty vector, got shape {h.shape}")
    if np.any(h <= 0):
        raise ValueError("step_sizes must all be > 0")
    order = integer("order", order, low=1)
    noise = finite_array("grad_noise_moment", grad_noise_moment)
    if noise.ndim > 1 or (noise.ndim == 1 and noise.shape != h.shape):
        raise ValueError(f"grad_noise_moment must be a scalar or have shape {h.shape}, got {noise.shape}")
    if np.any(noise < 0):
        raise ValueError("grad_noise_moment must be >= 0")
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

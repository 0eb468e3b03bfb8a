"""SGLD at decreasing steps in [cSG] Theorem 1: the appendix's bound, its proof's chain, the comparison.

Appendix C.3-C.4 of Zhang, Li, Zhang, Chen, Wilson, "Cyclical Stochastic Gradient MCMC for
Bayesian Deep Learning" (arXiv version; Section E of the ICLR 2020 version's appendix) bounds
``W2`` for SGLD with ``h_k = h_0 / k`` (eq. 6, :func:`sgsim.theory.sgld_bound`), and footnote 2
says that "similar results hold" for ``h_k = a (b + k)^(-gamma)``. This module gives:

- :func:`decaying_sgld_bound`: the bound for any ``h_k = a (b + k)^(-gamma)``, ``gamma`` in
  [0, 1], from the exact sums (:func:`decaying_step_sums`). The proof of App. C.3 uses the
  schedule only through ``sum h_k``, ``sum h_k^2`` and ``h_1 <= 1``, so the footnote holds with
  these sums; ``gamma = 0`` is constant-step SGLD (Raginsky et al.'s setting), ``gamma = 1,
  b = 0`` is eq. 6.
- :func:`sgld_kl_chain`: every link of the proof's chain for ``KL(mu_k || nu_{S_k})``,
  evaluated with the exact law of the iterates on a Gaussian target
  (:ref:`theory-decaying-sgld`).
- :func:`compare_bounds`: cSGLD's and SGLD's bounds side by side at equal ``K``, the
  comparison the appendix draws (cases i and ii of [cSG] §4).

Where the printed proof is wrong (each checked in ``tests/test_theory_appendix.py``;
:ref:`theory-decaying-sgld`): the KL identity is printed as ``-int dP_V log(dP_V/dP_theta)``
(the sign is a typo: the KL is ``+int``); the step restriction ``h_k <= m_U / (4 L_U^2)``
behind ``C0`` is not stated (:func:`sgsim.theory.step_limit`), the moment factor and the
prefactor are the errata of :ref:`erratum-assumption2` and :ref:`erratum-bound-prefactor`; and
[cSG-ICLR] Remark 1 (ii), "the same order of dependency on K as in standard SGLD", holds for
constant steps only: for ``h_k = h_0/k`` the SGLD bound grows like ``log K``, cSGLD's like
``K``. The other links hold, with room: on the Gaussian of the tests the Girsanov-Jensen step
alone loses a factor 2.1 or more, the proof's per-step line another 14 to 200, and ``C0`` in
place of the exact moments another 1.4 to 54.

Units: [cSG]'s (drift ``h grad U``, injected noise variance ``2 h``, target ``exp(-U)``).
NumPy and SciPy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._validate import ParameterError, finite_array, integer, positive_float, real, renamed
from .convergence import (
    DEFAULT_C_P,
    Theorem1Terms,
    TheoremConstants,
    csgld_bound,
    linear_gaussian_constants,
    theorem1_terms,
)
from .distances import gaussian_kl
from .exact_law import langevin_law, sgld_law

__all__ = ["KLChain", "BoundComparison", "decaying_step_sums", "decaying_sgld_bound", "sgld_kl_chain", "compare_bounds"]

#: Summed directly up to this many steps (the sums are O(K)).
MAX_STEPS = 10**8


def decaying_step_sums(
    step_size: float, gamma: float, n_steps: int, *, offset: float = 0.0
) -> tuple[float, float, float]:
    """``sum_k h_k``, ``sum_k h_k^2`` and ``h_1`` for ``h_k = a (b + k)^(-gamma)``, ``k = 1..K``.

    Summed exactly in floating point (pairwise, ``O(K)``), with ``a = step_size``,
    ``b = offset``. For ``gamma = 1, b = 0`` these are ``a H_K`` and ``a^2 sum_{k<=K} k^-2``
    (:func:`sgsim.theory.harmonic_number`); the schedule is :func:`sgsim.schedules.polynomial_decay`.

    Parameters
    ----------
    step_size : float
        ``a > 0``.
    gamma : float
        Decay exponent in [0, 1]; 0 is a constant step.
    n_steps : int
        ``K`` in [1, 10^8].
    offset : float
        ``b >= 0``.

    Returns
    -------
    diffusion_time, sum_squares, max_step : float
    """
    a = positive_float("step_size", step_size)
    g = real("gamma", gamma, 0.0, 1.0)
    k = integer("n_steps", n_steps, low=1, high=MAX_STEPS)
    b = real("offset", offset, 0.0)
    h = a * (b + np.arange(1, k + 1, dtype=np.float64)) ** (-g)
    if not h[0] > 0:  # a positive step that underflows is no step: the bound's max_step would be 0
        raise ParameterError("step_size", f"the first step a (b + 1)^(-gamma) underflows to 0 (step_size = {a:g})")
    return float(np.sum(h)), float(np.sum(h * h)), float(h[0])


def decaying_sgld_bound(
    constants: TheoremConstants,
    step_size: float,
    gamma: float,
    n_steps: int,
    *,
    offset: float = 0.0,
    c_p: float = DEFAULT_C_P,
    time_factor: float = 1.0,
    step_check: str = "warn",
) -> Theorem1Terms:
    """[cSG] Theorem 1 for SGLD with ``h_k = a (b + k)^(-gamma)`` (App. C.3-C.4 and footnote 2).

    ``KL(mu~_K || nu_S) <= C1 sum h^2 + sigma C0 S``, ``S = sum h``; then
    ``W2 <= (c_p + f C2 S)^(1/2) [KL^(1/2) + (KL/2)^(1/4)] + C3 exp(-S / C4)``, as for eq. 6
    (:func:`sgsim.theory.sgld_bound`, which is ``gamma = 1, offset = 0``). App. C.3 uses the
    schedule only through these two sums and ``h_1 <= 1``, so the bound holds for any
    ``gamma`` in [0, 1] with the exact sums of :func:`decaying_step_sums`: for ``gamma = 1`` the
    diffusion time grows like ``a log K``, for ``gamma < 1`` like ``a K^(1 - gamma)/(1 - gamma)``,
    and ``sum h^2`` stays bounded only for ``gamma > 1/2``. ``gamma = 0`` is constant-step SGLD,
    whose terms grow like ``K`` as cSGLD's do.

    Parameters
    ----------
    constants : TheoremConstants
    step_size : float
        ``a > 0``.
    gamma : float
        In [0, 1].
    n_steps : int
        ``K``.
    offset : float
        ``b >= 0``.
    c_p, time_factor, step_check :
        See :func:`sgsim.theory.theorem1_terms`; the largest step ``h_1 = a (b + 1)^(-gamma)``
        is checked against ``constants.step_limit``.

    Returns
    -------
    Theorem1Terms
    """
    s, s2, top = decaying_step_sums(step_size, gamma, n_steps, offset=offset)
    return theorem1_terms(constants, s, s2, c_p=c_p, time_factor=time_factor, max_step=top, step_check=step_check)


@dataclass(frozen=True)
class KLChain:
    """The links of [cSG] App. C.3's bound on ``KL(mu_k || nu_{S_k})``, after every step ``k = 1..K``.

    Each array has shape (K,). On a Gaussian target the proof's chain reads
    ``exact <= path <= stepwise <= printed`` at every ``k``.

    Attributes
    ----------
    exact : ndarray
        ``KL(mu_k || nu_{S_k})``, the exact law of the iterate against the Langevin law at the
        diffusion time ``S_k = h_1 + .. + h_k``.
    path : ndarray
        The Girsanov-Jensen bound with the exact moments:
        ``sum_j [ (1/2) int E||grad U(theta(s)) - grad U(theta_j)||^2 ds + (h/2) E||zeta_j||^2 ]``.
    stepwise : ndarray
        The proof's per-step line with the exact moments:
        ``sum_j [ (L_U^2/2)(12 h^3 (L_U^2 E||theta_j||^2 + B^2) + 6 h^2 d) + sigma h (L_U^2 E||theta_j||^2 + B^2) ]``.
    printed : ndarray
        ``C1 sum h^2 + sigma C0 sum h``, with the constants of Assumption 2.
    constants : TheoremConstants
        The constants used (:func:`sgsim.theory.linear_gaussian_constants`).
    """

    exact: np.ndarray
    path: np.ndarray
    stepwise: np.ndarray
    printed: np.ndarray
    constants: TheoremConstants


def sgld_kl_chain(
    precision, shift, step_sizes, init_mean, init_cov, grad_noise_cov=None, *, sigma: float | None = None
) -> KLChain:
    """Evaluate every link of App. C.3's KL bound on ``U = theta^T P theta / 2 - c^T theta`` [derived here].

    SGLD ``theta_{j+1} = theta_j - h (P theta_j - c + zeta_j) + sqrt(2 h) xi`` (additive gradient
    noise ``zeta ~ N(0, V)``) has a Gaussian law at every step (:func:`sgsim.theory.sgld_law`),
    and so has the Langevin diffusion (:func:`sgsim.theory.langevin_law`), so each link is
    exact. On the interpolation ``theta(t_j + u) - theta_j = -u (P theta_j - c + zeta_j) + sqrt(2) W_u``,
    ``E||P(theta(t_j + u) - theta_j)||^2 = u^2 (E||P (P theta_j - c)||^2 + tr(P V P)) + 2 u tr(P^2)``,
    which integrates over ``u`` in ``[0, h]`` to the path term's
    ``h^3/3 (..) + h^2 tr(P^2)``. The stepwise and printed terms use ``L_U = lambda_max(P)`` and
    the ``B``, ``sigma`` of :func:`~sgsim.theory.linear_gaussian_constants` (the same recipe,
    so that ``E||zeta||^2 = tr V <= 2 sigma B^2``). The printed term needs every step
    ``<= constants.step_limit`` (``C0``); the first three links need no step restriction.

    Parameters
    ----------
    precision : array_like, shape (d, d)
        ``P``, symmetric positive definite.
    shift : array_like, shape (d,)
        ``c``.
    step_sizes : array_like, shape (K,)
        ``h_1..h_K``, each > 0.
    init_mean : array_like, shape (d,)
    init_cov : array_like, shape (d, d)
        PSD with eigenvalues < 1/2 (so that ``kappa0`` is finite).
    grad_noise_cov : array_like, shape (d, d), optional
        ``V``.
    sigma : float, optional
        Passed to :func:`~sgsim.theory.linear_gaussian_constants`.

    Returns
    -------
    KLChain
    """
    h = finite_array("step_sizes", step_sizes)
    if h.ndim != 1 or h.size == 0 or np.any(h <= 0):
        raise ParameterError("step_sizes", f"step_sizes must be a non-empty vector of steps > 0, got shape {h.shape}")
    consts = linear_gaussian_constants(precision, shift, init_mean, init_cov, grad_noise_cov, sigma=sigma)
    p = np.asarray(precision, dtype=np.float64)
    c = np.asarray(shift, dtype=np.float64)
    m0 = np.asarray(init_mean, dtype=np.float64)
    s0 = np.asarray(init_cov, dtype=np.float64)
    d = m0.shape[0]
    v = np.zeros((d, d)) if grad_noise_cov is None else np.asarray(grad_noise_cov, dtype=np.float64)
    with renamed(step_size="step_sizes", t="step_sizes", S0="step_sizes", m1="step_sizes", S1="step_sizes"):
        law = sgld_law(p, c, h, grad_noise_cov=v, init_mean=m0, init_cov=s0)
        times = np.cumsum(h)
        nu_mean, nu_cov = langevin_law(p, c, times, m0, s0)
        exact = gaussian_kl(law.mean, law.cov, nu_mean, nu_cov)
    means = np.vstack([m0[None], law.mean[:-1]])  # law of theta_j before step j + 1
    covs = np.concatenate([s0[None], law.cov[:-1]])
    p2 = p @ p
    p4 = p2 @ p2
    e_pg = np.einsum("ij,kji->k", p4, covs) + np.sum((means @ p2 - p @ c) ** 2, axis=1) + np.trace(p @ v @ p)
    path = np.cumsum(0.5 * (h**3 / 3.0 * e_pg + h**2 * np.trace(p2)) + 0.5 * h * np.trace(v))
    lip = float(np.linalg.eigvalsh(p)[-1])
    noise_trace = float(np.trace(v))
    big_b2 = max(float(c @ c), noise_trace / (2.0 * consts.sigma) if noise_trace > 0 else 0.0)
    moment = lip**2 * (np.einsum("kii->k", covs) + np.sum(means**2, axis=1)) + big_b2
    stepwise = np.cumsum(0.5 * lip**2 * (12.0 * h**3 * moment + 6.0 * h**2 * d) + consts.sigma * h * moment)
    printed = consts.C1 * np.cumsum(h * h) + consts.sigma * consts.C0 * times
    return KLChain(exact=exact, path=path, stepwise=stepwise, printed=printed, constants=consts)


@dataclass(frozen=True)
class BoundComparison:
    """cSGLD's and SGLD's Theorem 1 bounds at equal ``K`` ([cSG] §4 and App. C).

    Attributes
    ----------
    csgld, sgld : Theorem1Terms
        Eq. 5 and the decaying-step bound (:func:`decaying_sgld_bound`).
    exponential_ratio : float
        SGLD's ``C3 exp(-S/C4)`` over cSGLD's: ``exp((S_cSGLD - S_SGLD) / C4)``.
    discretisation_ratio : float
        SGLD's ``W2(mu~_K, nu_S)`` term over cSGLD's.
    csgld_smaller : bool
        Whether cSGLD's total bound is the smaller: the appendix's conclusion, which the
        bound supports only where this is True.
    """

    csgld: Theorem1Terms
    sgld: Theorem1Terms
    exponential_ratio: float
    discretisation_ratio: float
    csgld_smaller: bool


def compare_bounds(
    constants: TheoremConstants,
    alpha0: float,
    n_cycles: int,
    h0: float,
    n_steps: int,
    *,
    gamma: float = 1.0,
    offset: float = 0.0,
    c_p: float = DEFAULT_C_P,
    time_factor: float = 1.0,
    step_check: str = "warn",
) -> BoundComparison:
    """Compare eq. 5 (cSGLD) with the SGLD bound at the same ``K``, as [cSG] §4 does.

    Case (i) of §4: with ``alpha_0 >= h_0`` cSGLD's diffusion time ``alpha_0 (K + M)/2`` is far
    beyond SGLD's ``h_0 H_K``, so its exponential term is smaller by ``exp((S_c - S_s)/C4)``;
    but its discretisation term grows like ``K`` against SGLD's ``log K`` (:ref:`erratum-bound-grows`),
    so for large ``K`` the total bound ranks SGLD first. Case (ii), ``h_0`` matched to cSGLD's
    diffusion time (:func:`sgsim.theory.matched_h0`), puts ``h_0`` above 1 for large ``K``,
    outside App. C.3's hypotheses (``step_check`` says so). Both bounds share ``constants``.

    Parameters
    ----------
    constants : TheoremConstants
    alpha0 : float
        cSGLD's ``alpha_0 > 0``.
    n_cycles : int
        ``M``, dividing ``n_steps``.
    h0 : float
        SGLD's ``a > 0`` in ``h_k = a (b + k)^(-gamma)``.
    n_steps : int
        ``K``.
    gamma, offset : float
        SGLD's decay (default ``h_0 / k``).
    c_p, time_factor, step_check :
        See :func:`sgsim.theory.theorem1_terms`.

    Returns
    -------
    BoundComparison
    """
    cyc = csgld_bound(constants, alpha0, n_cycles, n_steps, c_p=c_p, time_factor=time_factor, step_check=step_check)
    dec = decaying_sgld_bound(
        constants, h0, gamma, n_steps, offset=offset, c_p=c_p, time_factor=time_factor, step_check=step_check
    )
    exp_ratio = math.exp(min((cyc.diffusion_time - dec.diffusion_time) / constants.C4, 700.0))
    disc = dec.w2_discretisation / cyc.w2_discretisation if cyc.w2_discretisation > 0 else math.inf
    return BoundComparison(
        csgld=cyc, sgld=dec, exponential_ratio=exp_ratio, discretisation_ratio=disc, csgld_smaller=cyc.total < dec.total
    )

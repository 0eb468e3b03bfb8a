r"""[cSG] Theorem 1 on a target that is not log-concave: constants, the Langevin spectral gap, W2 decay.

On a multimodal target the constants ``C3, C4`` of ``W2(nu_t, nu_inf) <= C3 exp(-t / C4)`` cannot
come from strong convexity. This module takes them from a Poincare inequality
(:ref:`theory-nonconvex-constants`):

- :func:`muckenhoupt_poincare_1d`: an upper bound on the Poincare constant ``C_P`` of a 1-D
  density by Muckenhoupt's criterion, valid for any density, log-concave or not;
- :func:`poincare_c3_c4`: ``C3 = (4 E_pi||x||^4 chi^2(mu_0 || pi))^(1/4)``, ``C4 = 2 C_P``, derived
  there from the decay of the chi-square divergence along the Langevin diffusion;
- :func:`langevin_spectrum_1d`, :func:`langevin_density_1d`: the 1-D Fokker-Planck operator of the
  Langevin diffusion ``d theta = -U'(theta) dt + sqrt(2) dW``, discretised by the fluxes of
  :func:`sgsim.theory.fokker_planck.evolve`, symmetrised and diagonalised: its spectral gap
  (``1/C_P`` in the continuum) and the exact law ``nu_t`` at any time;
- :func:`grid_mixture_constants`: every constant of Theorem 1 for an equal-weight Gaussian
  mixture whose centres form a product grid (the 25-Gaussian mixture of [cSG] §5.1 is the
  product of two 1-D five-mode mixtures), as a :class:`MixtureConstants`.

Step sizes follow the cyclical paper's convention (drift ``alpha grad U``, noise variance
``2 alpha``). NumPy and SciPy only; nothing here imports an integrator.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import linalg, special

from .._validate import ParameterError, finite_array, finite_values, integer, positive_float, real
from .convergence import TheoremConstants, assumption_constants, kappa0_gaussian, step_limit

__all__ = [
    "MixtureConstants",
    "langevin_spectrum_1d",
    "spectral_gap_1d",
    "langevin_density_1d",
    "muckenhoupt_poincare_1d",
    "poincare_c3_c4",
    "mixture_potential_1d",
    "grid_mixture_constants",
]


def _grid_and_potential(x, potential) -> tuple[np.ndarray, np.ndarray, float]:
    x = finite_array("x", x)
    u = finite_array("potential", potential)
    if x.ndim != 1 or x.size < 3:
        raise ParameterError("x", f"x must be a vector of at least 3 nodes, got shape {x.shape}")
    if u.shape != x.shape:
        raise ParameterError("potential", f"potential must have the grid's shape {x.shape}, got {u.shape}")
    h = np.diff(x)
    if not (np.all(h > 0) and np.allclose(h, h[0], rtol=1e-9, atol=0.0)):
        raise ParameterError("x", "x must be increasing and equally spaced")
    return x, u - u.min(), float(h[0])


def _symmetric_generator(u: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
    """Diagonal and off-diagonal of ``-Pi^(-1/2) A Pi^(1/2)``, ``A`` the flux operator, ``Pi = diag(e^-u)``.

    The flux through the face between nodes ``m`` and ``m + 1`` is
    ``(q_{m+1} e^{du/2} - q_m e^{-du/2}) / h`` with ``du = u_{m+1} - u_m`` (zero through the ends),
    as in :func:`sgsim.theory.fokker_planck.evolve` with ``D = 1``; symmetrised, the off-diagonal
    is ``-1/h^2`` and the diagonal ``(e^{-du_right/2} + e^{du_left/2}) / h^2``.
    """
    du = np.diff(u)
    diag = np.zeros(u.size)
    diag[:-1] += np.exp(-0.5 * du)
    diag[1:] += np.exp(0.5 * du)
    return diag / h**2, np.full(u.size - 1, -1.0 / h**2)


def langevin_spectrum_1d(x, potential, n_eigen: int = 2) -> np.ndarray:
    """The smallest eigenvalues of ``-L``, ``L`` the 1-D Langevin Fokker-Planck operator on a grid.

    ``L q = (q' + q U')'`` for ``d theta = -U' dt + sqrt(2) dW``, with no flux through the ends of
    the grid, discretised by the face fluxes of :func:`sgsim.theory.fokker_planck.evolve`. That
    matrix is similar to a symmetric tridiagonal one (conjugation by ``e^{-U/2}``), so its
    eigenvalues are real: ``0`` (the stationary density ``e^{-U}``, exactly) and then the
    spectral gap ``lambda_1``, which converges to the continuum gap like ``h^2``. In the
    continuum ``1 / lambda_1`` is the Poincare constant of ``e^{-U}``.

    Parameters
    ----------
    x : array_like, shape (n,)
        Equally spaced nodes, n >= 3, wide enough that ``e^{-U}`` is negligible at the ends.
    potential : array_like, shape (n,)
        ``U`` at the nodes (any additive constant).
    n_eigen : int
        How many of the smallest eigenvalues, 1 to n.

    Returns
    -------
    ndarray, shape (n_eigen,)
        In increasing order; the first is 0 up to rounding.
    """
    _, u, h = _grid_and_potential(x, potential)
    k = integer("n_eigen", n_eigen, low=1, high=u.size)
    diag, off = _symmetric_generator(u, h)
    return linalg.eigh_tridiagonal(diag, off, eigvals_only=True, select="i", select_range=(0, k - 1))


def spectral_gap_1d(x, potential) -> float:
    """``lambda_1`` of :func:`langevin_spectrum_1d`: the numerical spectral gap, ``1/C_P`` in the continuum."""
    return float(langevin_spectrum_1d(x, potential, 2)[1])


def langevin_density_1d(x, potential, q0, times) -> np.ndarray:
    """The density of the 1-D Langevin diffusion at ``times``, from ``q0``, by diagonalising the generator.

    With ``-L = Pi^(1/2) V diag(lambda) V^T Pi^(-1/2)`` (see :func:`langevin_spectrum_1d`),
    ``q_t = Pi^(1/2) V exp(-lambda t) V^T Pi^(-1/2) q_0``: exact in time for the space
    discretisation of :func:`sgsim.theory.fokker_planck.evolve`, at any ``t`` and at one cost.

    Parameters
    ----------
    x, potential : array_like, shape (n,)
        As in :func:`langevin_spectrum_1d`.
    q0 : array_like, shape (n,)
        Initial density (nonnegative, positive mass; normalised here).
    times : array_like
        Times >= 0.

    Returns
    -------
    ndarray, shape (len(times), n)
        Each row a density (its sum times the spacing is 1).
    """
    x, u, h = _grid_and_potential(x, potential)
    q = finite_array("q0", q0)
    if q.shape != x.shape or np.any(q < 0) or not q.sum() > 0:
        raise ParameterError("q0", f"q0 must be a nonnegative density with positive mass on the grid {x.shape}")
    t = np.atleast_1d(finite_array("times", times))
    if t.ndim != 1 or np.any(t < 0):
        raise ParameterError("times", "times must be a vector of times >= 0")
    diag, off = _symmetric_generator(u, h)
    lam, vec = linalg.eigh_tridiagonal(diag, off)
    lam[0] = 0.0  # the stationary mode; rounding may leave it at +-1e-13
    half = np.exp(-0.5 * u)
    coef = vec.T @ (q / h / q.sum() / half)
    out = (half[None, :] * ((np.exp(-np.outer(t, lam)) * coef[None, :]) @ vec.T)).clip(min=0.0)
    return out / (out.sum(axis=1, keepdims=True) * h)


def muckenhoupt_poincare_1d(x, potential) -> float:
    """An upper bound on the Poincare constant of ``pi = e^{-U}`` on the line, by Muckenhoupt's criterion.

    With ``m`` the median of ``pi``,
    ``B_+ = sup_{y > m} pi([y, inf)) int_m^y e^{U}/Z``, ``B_-`` the same to the left, and
    ``B = max(B_+, B_-)``, Muckenhoupt's weighted Hardy inequality (Muckenhoupt 1972, "Hardy's
    inequality with weights") [external] gives ``int_m^inf (f - f(m))^2 d pi <= 4 B_+ int_m^inf f'^2 d pi``,
    and the same on the left. Since ``Var_pi f <= E_pi (f - f(m))^2``,

    ``Var_pi f <= C_P E_pi f'^2`` with ``C_P <= 4 B``.

    No convexity is needed, which is why it covers multimodal targets; the criterion is
    two-sided up to a constant factor, so it does not lose the barrier's exponential size
    either (on a double well it is within a factor 4 of the exact ``1/lambda_1``, :ref:`theory-nonconvex-constants`).

    Parameters
    ----------
    x : array_like, shape (n,)
        Equally spaced nodes covering the mass of ``pi`` and the maximum of the criterion
        (for tails lighter than exponential ``B_+(y)`` falls beyond the last mode).
    potential : array_like, shape (n,)
        ``U`` at the nodes.

    Returns
    -------
    float
        ``4 B``, the integrals by the trapezoidal rule (in log space).
    """
    x, u, h = _grid_and_potential(x, potential)
    logp = -u
    w = np.full(u.size, h)
    w[[0, -1]] *= 0.5
    logz = special.logsumexp(logp, b=w)
    logp = logp - logz  # normalised density
    cdf = np.cumsum(np.exp(logp) * w)
    m = int(np.searchsorted(cdf, 0.5))

    def side(lp: np.ndarray, ww: np.ndarray) -> float:
        # from the median outwards: tail mass beyond y times int_median^y 1/p
        log_tail = np.log(np.maximum(np.cumsum((np.exp(lp) * ww)[::-1])[::-1], 1e-300))
        log_inv = np.logaddexp.accumulate(-lp + np.log(ww))
        return float(np.exp(np.max(log_tail + log_inv)))

    b_plus = side(logp[m:], w[m:])
    b_minus = side(logp[: m + 1][::-1], w[: m + 1][::-1])
    return 4.0 * max(b_plus, b_minus)


def poincare_c3_c4(poincare: float, fourth_moment: float, chi2_initial: float) -> tuple[float, float]:
    """``C3, C4`` of ``W2(nu_t, nu_inf) <= C3 exp(-t/C4)`` from a Poincare constant [derived here].

    ``C3 = (4 E_pi||x - x_0||^4 chi^2(nu_0 || pi))^(1/4)`` and ``C4 = 2 C_P``, for any target with
    Poincare constant ``C_P`` (log-concave or not) and any fixed point ``x_0``:

    1. ``chi^2(nu_t || pi) <= exp(-2t / C_P) chi^2(nu_0 || pi)``: with ``f_t = d nu_t / d pi``,
       ``d/dt int (f_t - 1)^2 d pi = -2 int ||grad f_t||^2 d pi <= -(2/C_P) Var_pi f_t`` (the
       diffusion is reversible), and ``Var_pi f_t = chi^2``.
    2. ``W2(mu, nu)^2 <= 2 int ||x - x_0||^2 d|mu - nu|`` (keep the common part of the two laws in
       place, move the rest independently, and use ``||x - y||^2 <= 2||x - x_0||^2 + 2||y - x_0||^2``).
    3. Cauchy-Schwarz: ``int ||x - x_0||^2 |f - 1| d pi <= (E_pi||x - x_0||^4)^(1/2) chi(nu || pi)``.

    So ``W2(nu_t, pi)^2 <= 2 (E_pi||x - x_0||^4)^(1/2) chi(nu_0 || pi) exp(-t / C_P)``; take the
    square root. The rate is half the chi-square rate: ``C4 = 2 C_P``.

    Parameters
    ----------
    poincare : float
        ``C_P > 0`` (an upper bound, e.g. :func:`muckenhoupt_poincare_1d`).
    fourth_moment : float
        ``E_pi ||x - x_0||^4 >= 0``.
    chi2_initial : float
        ``chi^2(nu_0 || pi) >= 0``.

    Returns
    -------
    C3, C4 : float
    """
    cp = positive_float("poincare", poincare)
    m4 = real("fourth_moment", fourth_moment, 0.0)
    chi2 = real("chi2_initial", chi2_initial, 0.0)
    return float((4.0 * m4 * chi2) ** 0.25), 2.0 * cp


def mixture_potential_1d(x, centres, variance: float) -> tuple[np.ndarray, np.ndarray]:
    """``U`` and ``U'`` of the equal-weight mixture ``(1/n) sum_a N(a, s)`` on the line, up to a constant.

    ``U(y) = -logsumexp_a(-(y - a)^2 / (2 s)) + log n``, ``U'(y) = (y - E_r a) / s`` with ``r`` the
    responsibilities (the softmax of the exponents). The normalising ``log sqrt(2 pi s)`` is
    left out.
    """
    y = np.asarray(finite_array("x", x), float)
    a = finite_array("centres", centres)
    if a.ndim != 1 or a.size == 0:
        raise ParameterError("centres", f"centres must be a non-empty vector, got shape {a.shape}")
    s = positive_float("variance", variance)
    with np.errstate(over="ignore", invalid="ignore"):  # a tiny variance: refused just below, by name
        expo = -((y[..., None] - a) ** 2) / (2.0 * s)
        lse = special.logsumexp(expo, axis=-1)
        r = np.exp(expo - lse[..., None])
        u, grad = -lse + math.log(a.size), (y - r @ a) / s
    finite_values("variance", u, grad, what="U and U' (they grow as 1 / variance)", hint=f" (variance = {s:g})")
    return u, grad


@dataclass(frozen=True)
class MixtureConstants:
    """Theorem 1's constants for a product-grid Gaussian mixture, with their ingredients.

    Attributes
    ----------
    theorem : TheoremConstants
        ``C0..C4``, ``sigma`` and ``step_limit``, ready for :func:`sgsim.theory.csgld_bound`.
    L_U, B, m_U, b_U, kappa0 : float
        The constants of Assumption 2 (smoothness, ``||grad U(0)||``, dissipativity) and the
        initial exponential moment.
    poincare : float
        Muckenhoupt's upper bound on the Poincare constant (of one coordinate's factor, which
        is that of the product).
    spectral_gap : float
        The numerical gap ``lambda_1`` of one coordinate (:func:`spectral_gap_1d`), for
        comparison: ``poincare * spectral_gap >= 1`` is the bound's looseness.
    chi2_initial : float
        ``chi^2(mu_0 || pi)``.
    fourth_moment : float
        ``E_pi ||x||^4``.
    grid : ndarray
        The 1-D nodes used for the quadratures.
    """

    theorem: TheoremConstants
    L_U: float
    B: float
    m_U: float
    b_U: float
    kappa0: float
    poincare: float
    spectral_gap: float
    chi2_initial: float
    fourth_moment: float
    grid: np.ndarray


def grid_mixture_constants(
    centres,
    variance: float,
    dim: int,
    init_mean,
    init_var: float,
    *,
    grad_noise_var: float = 0.0,
    sigma: float | None = None,
    moment_factor: str = "max",
    n_grid: int | None = None,
) -> MixtureConstants:
    """Every constant of [cSG] Theorem 1 for ``pi = prod_i (1/n) sum_a N(x_i | a, s)`` [derived here].

    The target is the equal-weight Gaussian mixture with covariance ``s I`` and centres on the
    product grid ``centres^dim`` (the 25-Gaussian mixture of [cSG] §5.1: centres
    ``(-4, -2, 0, 2, 4)``, ``s = 0.03``, ``dim = 2``); it factorises over coordinates, and so do the
    Langevin diffusion and SGLD from a product initial law. The initial law is
    ``mu_0 = N(init_mean, init_var I)``. The recipe (:ref:`theory-nonconvex-constants`), with
    ``A = max |a|``, ``D = max a - min a``:

    - smoothness: ``U''(y) = 1/s - Var_r(a)/s^2`` per coordinate, and ``Var_r(a) <= D^2/4``
      (Popoviciu), so ``L_U = max(1/s, D^2/(4 s^2) - 1/s)``;
    - ``B = ||grad U(0)|| = sqrt(dim) |E_{r(0)} a| / s``; with additive gradient noise of variance
      ``V`` per coordinate, ``B = max(B, (dim V / (2 sigma))^(1/2))`` as in
      :func:`sgsim.theory.linear_gaussian_constants`;
    - dissipativity: ``y U'(y) = y^2/s - y E_r a / s >= y^2/(2s) - A^2/(2s)`` (Young), so
      ``m_U = 1/(2s)``, ``b_U = dim A^2 / (2s)``;
    - ``kappa0`` from :func:`sgsim.theory.kappa0_gaussian` (needs ``init_var < 1/2``);
    - ``C0, C1, C2`` from :func:`sgsim.theory.assumption_constants`; ``step_limit = min(1, m_U/(4 L_U^2))``;
    - ``C_P``: Muckenhoupt's bound on one coordinate (:func:`muckenhoupt_poincare_1d`); a product
      has the Poincare constant of its worst factor (``Var f <= sum_i E Var_i f``, the
      Efron-Stein tensorisation), here all equal;
    - ``C3, C4`` from :func:`poincare_c3_c4` with ``x_0 = 0``:
      ``E_pi||x||^4 = dim mu_4 + dim (dim - 1) mu_2^2`` with ``mu_2 = mean(a^2) + s``,
      ``mu_4 = mean(a^4 + 6 a^2 s + 3 s^2)``, and ``1 + chi^2 = prod_i (1 + chi^2_i)``, each
      ``chi^2_i = int N(y | m_i, v)^2 / pi_1(y) dy - 1`` by quadrature, finite only for ``v < 2s``
      (the target's tails are Gaussian of variance ``s``).

    Parameters
    ----------
    centres : array_like, shape (n,)
        The 1-D centres ``a``.
    variance : float
        ``s > 0``.
    dim : int
        Number of coordinates, >= 1.
    init_mean : array_like, shape (dim,)
    init_var : float
        ``v``, in ``(0, min(1/2, 2 s))``.
    grad_noise_var : float
        ``V >= 0`` per coordinate (additive, independent of ``theta``).
    sigma : float, optional
        Assumption 2 (iv)'s constant; 1/2 by default when ``V > 0``, 0 without noise.
    moment_factor : {"max", "min", "derived"}
        Passed to :func:`sgsim.theory.assumption_constants`.
    n_grid : int, optional
        Nodes of the 1-D quadrature grid (default: spacing ``sqrt(min(s, v)) / 25``).

    Returns
    -------
    MixtureConstants
    """
    a = finite_array("centres", centres)
    if a.ndim != 1 or a.size == 0:
        raise ParameterError("centres", f"centres must be a non-empty vector, got shape {a.shape}")
    s = positive_float("variance", variance)
    d = integer("dim", dim, low=1)
    m0 = finite_array("init_mean", init_mean, (d,))
    v0 = real("init_var", init_var, 0.0, min(0.5, 2.0 * s), low_open=True, high_open=True)
    vn = real("grad_noise_var", grad_noise_var, 0.0)
    big_a, span = float(np.max(np.abs(a))), float(np.ptp(a))
    l_u = max(1.0 / s, span**2 / (4.0 * s**2) - 1.0 / s)
    r0 = special.softmax(-(a**2) / (2.0 * s))
    big_b = math.sqrt(d) * abs(float(r0 @ a)) / s
    if vn > 0:
        sig = 0.5 if sigma is None else real("sigma", sigma, 0.0, 1.0, low_open=True, high_open=True)
        big_b = max(big_b, math.sqrt(d * vn / (2.0 * sig)))
    else:
        sig = 0.0 if sigma is None else real("sigma", sigma, 0.0, 1.0, high_open=True)
    m_u = 1.0 / (2.0 * s)
    b_u = d * big_a**2 / (2.0 * s)
    kappa0 = kappa0_gaussian(m0, v0 * np.eye(d))
    c0, c1, c2 = assumption_constants(l_u, big_b, m_u, b_u, d, kappa0, moment_factor=moment_factor)
    # quadrature grid: the target's mass and the initial law's, 12 standard deviations out
    sd = math.sqrt(max(s, v0))
    lo = min(float(a.min()), float(m0.min())) - 12.0 * sd
    hi = max(float(a.max()), float(m0.max())) + 12.0 * sd
    n = (
        integer("n_grid", n_grid, low=3)
        if n_grid is not None
        else int(math.ceil((hi - lo) * 25 / math.sqrt(min(s, v0))))
    )
    x = np.linspace(lo, hi, n)
    u, _ = mixture_potential_1d(x, a, s)
    cp = muckenhoupt_poincare_1d(x, u)
    gap = spectral_gap_1d(x, u)
    log_pi = -u - special.logsumexp(-u, b=np.gradient(x))
    chi2 = 1.0
    for mi in m0:
        log_nu = -((x - mi) ** 2) / (2.0 * v0) - 0.5 * math.log(2.0 * math.pi * v0)
        chi2 *= float(np.exp(special.logsumexp(2.0 * log_nu - log_pi, b=np.gradient(x))))
    chi2 -= 1.0
    mu2 = float(np.mean(a**2)) + s
    mu4 = float(np.mean(a**4 + 6.0 * a**2 * s + 3.0 * s**2))
    m4 = d * mu4 + d * (d - 1) * mu2**2
    c3, c4 = poincare_c3_c4(cp, m4, max(chi2, 0.0))
    theorem = TheoremConstants(C0=c0, C1=c1, C2=c2, C3=c3, C4=c4, sigma=sig, step_limit=step_limit(l_u, m_u))
    return MixtureConstants(
        theorem=theorem,
        L_U=l_u,
        B=big_b,
        m_U=m_u,
        b_U=b_u,
        kappa0=kappa0,
        poincare=cp,
        spectral_gap=gap,
        chi2_initial=chi2,
        fourth_moment=m4,
        grid=x,
    )

r"""BAOAB's configurational accuracy against SGLD's Euler-Maruyama bias (not a figure of the three papers).

What is measured
----------------
Every scheme here spends one gradient per step, and every step size is the cyclical paper's
``alpha`` ([cSG] §2: SGLD's drift ``alpha grad U``, noise variance ``2 alpha``). SGLD is the
Euler-Maruyama step of overdamped Langevin dynamics with time step ``alpha``; BAOAB and OBABO
(Leimkuhler and Matthews (2013), "Rational construction of stochastic numerical methods for
molecular sampling") split underdamped Langevin dynamics with time step
``h = sqrt(alpha)`` and friction ``gamma`` per unit time. Each scheme's error is compared in its
own time step (``alpha`` for SGLD, ``h`` for the splittings) and at equal cost (``alpha``).

*Gaussian* ``U = lambda theta^2 / 2`` (:func:`gaussian_errors`): the relative error of the
stationary variance of ``theta``, read deterministically off the compiled steps
(:func:`sgsim.algorithms.affine_steps` of a run's second step, since BAOAB's first step opens
with a half kick, and its Lyapunov equation). With ``a = alpha lambda`` the closed forms
(:func:`closed_form_error`) are

.. math::

    \text{SGLD: } \frac{a}{2 - a}, \qquad \text{BAOAB: } 0, \qquad
    \text{OBABO: } \frac{a}{4 - a}, \qquad \text{SGHMC: } \frac{a}{4 - 2\eta - a},

SGLD's from ``v = (1 - a)^2 v + 2 alpha``; OBABO's because its ``O`` parts keep ``p ~ N(0, 1)``
and its velocity-Verlet map keeps ``lambda (1 - a/4) theta^2 + p^2``; SGHMC's (the cyclical
paper's form, friction ``eta`` per step, here ``eta = gamma h`` so that its friction per unit
time is BAOAB's) from the stationary Lyapunov equation of ``theta' = theta + v``,
``v' = (1 - eta) v - alpha lambda theta' + sqrt(2 eta alpha) xi``, solved by hand: ``Cov(theta,
v) = -a Var(theta) / (2 - eta)``, ``Var(v) = -2 Cov(theta, v)``, whence
``lambda Var(theta) = 2(2 - eta) / (2(2 - eta) - a)``. SGLD's and OBABO's errors are
``O(alpha)``: first order in SGLD's own time step, second order in OBABO's ``h``.

*Non-Gaussian* (:data:`MIXTURE`, the two-component mixture ``(N(-1.2, 0.5) + N(1.2, 0.5)) / 2``,
``E theta^2 = 1.94``): the error of ``E theta^2`` under each scheme's stationary law, computed
two ways.

- Deterministically (:func:`grid_moment`): SGLD's chain on ``theta`` has the Gaussian kernel
  ``N(theta - alpha U'(theta), 2 alpha)``, whose stationary density on a fine grid solves one
  linear system (Nyström's method with the trapezoid rule); BAOAB's and OBABO's chains live on
  ``(theta, p)`` and their kernels are degenerate (one Gaussian per step in two dimensions), so
  their stationary density is the eigenvector of eigenvalue 1 of the step's operator on a
  periodic grid, applied part by part: each kick and drift is a shear, an exact shift of the
  trigonometric interpolant along one axis (FFT), and each ``O`` part a convolution in ``p``
  computed exactly on the same interpolant. The grid's own error is measured by refining it.
- By Monte Carlo (:func:`monte_carlo_moment`) with sgsim's compiled samplers: ``C`` independent
  chains started at exact draws of the target, each averaging ``theta^2`` over its kept steps
  (``storage="moments"``); the chains' averages are independent, so the standard error is their
  sample sd over ``sqrt(C)``. The grid's values are then the truth these runs are tested
  against, and the runs check that the grid describes sgsim's own steps.

The orders are read off as slopes of ``log |error|`` against ``log alpha`` (:func:`fit_power`):
weighted least squares with the Monte Carlo standard errors (delta method on the log), or the
local slope between the two smallest steps of the exact grid values. A slope ``s`` in ``alpha``
is ``s`` in SGLD's time step and ``2 s`` in the splittings' ``h``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from .. import schedules, targets
from .._validate import ParameterError
from ..algorithms import affine_steps
from ..sampling import sample

__all__ = [
    "Budget",
    "QUICK",
    "FULL",
    "MIXTURE",
    "GAUSSIAN_METHODS",
    "GRID_METHODS",
    "MC_METHODS",
    "FRICTION",
    "closed_form_error",
    "gaussian_errors",
    "grid_moment",
    "monte_carlo_moment",
    "PowerFit",
    "fit_power",
    "MonteCarlo",
    "Result",
    "run",
]

#: The Gaussian panel's schemes, the grid's and the Monte Carlo runs'.
GAUSSIAN_METHODS = ("sgld", "sghmc", "obabo", "baoab")
GRID_METHODS = ("sgld", "obabo", "baoab")
MC_METHODS = ("sgld", "baoab")
#: ``gamma`` per unit time of BAOAB and OBABO (SGHMC's ``eta = gamma sqrt(alpha)`` per step).
FRICTION = 1.0
#: The non-Gaussian target: centres, common variance.
MIXTURE = (np.array([[-1.2], [1.2]]), 0.5)


@dataclass(frozen=True)
class Budget:
    """How much each mode computes."""

    gaussian_steps: tuple[float, ...]  # alpha lambda on U = lambda theta^2 / 2
    grid_steps: tuple[float, ...]  # alpha on the mixture, exact grid values
    mc_steps: tuple[float, ...]  # alpha on the mixture, Monte Carlo runs
    n_chains: int
    n_steps: int
    burn_in: int


QUICK = Budget(
    gaussian_steps=tuple(np.geomspace(0.01, 1.6, 12).round(6)),
    grid_steps=(0.025, 0.05, 0.1, 0.2, 0.4, 0.8),
    mc_steps=(0.1, 0.4),
    n_chains=50_000,
    n_steps=600,
    burn_in=200,
)
FULL = Budget(
    gaussian_steps=tuple(np.geomspace(0.005, 1.8, 24).round(6)),
    grid_steps=(0.0125, 0.025, 0.05, 0.1, 0.2, 0.4, 0.8),
    mc_steps=(0.05, 0.1, 0.2, 0.4, 0.8),
    n_chains=1_000_000,
    n_steps=1200,
    burn_in=200,
)


def mixture():
    """The non-Gaussian target, :data:`MIXTURE`."""
    return targets.gaussian_mixture(*MIXTURE)


def _options(method: str, step_size: float, friction: float) -> dict:
    if method in ("baoab", "obabo"):
        return {"friction": friction}
    if method == "sghmc":
        return {"friction": friction * math.sqrt(step_size)}
    return {}


def closed_form_error(method: str, a, friction: float = FRICTION, step_size=None):
    """The exact relative error of the stationary variance on ``U = lambda theta^2 / 2``.

    ``a = alpha lambda``; SGHMC's per-step friction is ``eta = gamma sqrt(alpha)``, so it needs
    ``step_size = alpha`` too. NaN where the scheme has no stationary law: ``a >= 2`` for SGLD,
    ``a >= 4`` for the splittings, ``eta > 1`` or ``a >= 4 - 2 eta`` for SGHMC (the Schur-Cohn
    conditions on its transition matrix ``[[1, 1], [-a, 1 - eta - a]]``). See the module's docstring
    for the derivations.
    """
    a = np.asarray(a, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "sgld":
            return np.where(a < 2.0, a / (2.0 - a), np.nan)
        if method == "baoab":
            return np.where(a < 4.0, 0.0, np.nan)
        if method == "obabo":
            return np.where(a < 4.0, a / (4.0 - a), np.nan)
        if method == "sghmc":
            eta = friction * np.sqrt(np.asarray(step_size, float))
            return np.where((eta <= 1.0) & (a < 4.0 - 2.0 * eta), a / (4.0 - 2.0 * eta - a), np.nan)
    raise ParameterError("method", f"method must be one of {GAUSSIAN_METHODS}, got {method!r}")


def gaussian_errors(step_sizes, precision: float = 1.0, friction: float = FRICTION) -> dict[str, np.ndarray]:
    """Relative error of the stationary ``Var(theta)`` on ``N(0, 1 / precision)``, per method and step.

    Read off each method's compiled step (:func:`sgsim.algorithms.affine_steps` of the second step
    of a constant schedule) and its stationary Lyapunov equation: no sampling. NaN where
    :func:`closed_form_error` is (no stationary law, or SGHMC's ``eta = gamma sqrt(alpha)`` above 1).
    """
    target = targets.linear_gaussian(np.array([[float(precision)]]))
    out = {}
    for method in GAUSSIAN_METHODS:
        errs = []
        for step in step_sizes:
            if np.isnan(closed_form_error(method, step * precision, friction, step)):
                errs.append(np.nan)  # no stationary law (or SGHMC's eta = gamma h above 1)
                continue
            maps = affine_steps(method, target, schedule=schedules.constant(float(step), 2),
                                **_options(method, float(step), friction))  # fmt: skip
            _, cov = maps.stationary()
            errs.append(cov[0, 0] * precision - 1.0)
        out[method] = np.array(errs)
    return out


# --------------------------------------------------------------------------- exact grid laws


def _sgld_density(grad, step_size: float, n: int, half_width: float):
    # Nystrom: pi(x_j) = sum_i pi(x_i) k(x_i, x_j) dx with the trapezoid rule (spectrally accurate for
    # a smooth kernel on a density that vanishes at the ends); pi = pi K with sum(pi) = 1 solved directly
    from threadpoolctl import threadpool_limits

    x = np.linspace(-half_width, half_width, n)
    dx = x[1] - x[0]
    m = x - step_size * grad(x)
    kern = np.exp(-((x[None, :] - m[:, None]) ** 2) / (4.0 * step_size)) * (dx / math.sqrt(4.0 * math.pi * step_size))
    a = kern.T - np.eye(n)
    a[-1] = 1.0
    b = np.zeros(n)
    b[-1] = 1.0
    with threadpool_limits(limits=1, user_api="blas"):
        pi = np.linalg.solve(a, b)
    return x, pi


def _splitting_operator(method: str, grad, step_size: float, friction: float, n: int, half_width: float):
    """The step's action on a density on an ``n x n`` periodic grid of ``(theta, p)``, part by part.

    The state is the one sgsim stores (:mod:`sgsim.integrators.splitting`): BAOAB's step is
    ``B(h) A(h/2) O(c) A(h/2)``, OBABO's ``B(h/2) O(c^2) B(h/2) A(h)``. A kick or a drift shifts
    the density along one axis by an amount set by the other: an exact shift of its trigonometric
    interpolant. ``O`` (``p <- c p + s xi``) maps the characteristic function in ``p`` to
    ``phi(c k) exp(-s^2 k^2 / 2)``; on the interpolant this is one real ``n x n`` matrix.
    """
    h = math.sqrt(step_size)
    c = math.exp(-friction * h)
    if method == "obabo":
        c = c * c
    s2 = 1.0 - c * c
    x = -half_width + 2.0 * half_width * np.arange(n) / n
    dx = x[1] - x[0]
    k = 2.0 * math.pi * np.fft.rfftfreq(n, dx)
    kf = 2.0 * math.pi * np.fft.fftfreq(n, dx)
    w = np.exp(-0.5 * s2 * kf**2) / n
    # O[a, j] = (1/n) sum_m w_m exp(i k_m (c p_j - p_a)), real by the symmetry of the frequencies
    o = (np.cos(np.outer(x, kf)) * w) @ np.cos(np.outer(c * x, kf)).T
    o += (np.sin(np.outer(x, kf)) * w) @ np.sin(np.outer(c * x, kf)).T
    o_t = np.ascontiguousarray(o.T)
    g = grad(x)

    def kick(scale):  # p -= scale g(theta): row theta's density moves by -scale g(theta) in p
        return np.exp(1j * scale * np.outer(g, k))

    def drift(scale):  # theta += scale p: column p's density moves by scale p in theta
        return np.exp(-1j * scale * np.outer(k, x))

    def along_p(rho, phase):
        return np.fft.irfft(np.fft.rfft(rho, axis=1) * phase, n, axis=1)

    def along_theta(rho, phase):
        return np.fft.irfft(np.fft.rfft(rho, axis=0) * phase, n, axis=0)

    if method == "baoab":
        b_full, a_half = kick(h), drift(0.5 * h)

        def step(rho):
            rho = along_theta(along_p(rho, b_full), a_half)
            return along_theta(rho @ o_t, a_half)

    else:
        b_half, a_full = kick(0.5 * h), drift(h)

        def step(rho):
            rho = along_p(along_p(rho, b_half) @ o_t, b_half)
            return along_theta(rho, a_full)

    return x, step


def _splitting_density(method, grad, log_density, step_size, friction, n, half_width):
    from scipy.sparse.linalg import LinearOperator, eigs
    from threadpoolctl import threadpool_limits

    x, step = _splitting_operator(method, grad, step_size, friction, n, half_width)
    start = np.exp(log_density(x)[:, None] - 0.5 * x[None, :] ** 2)
    op = LinearOperator((n * n, n * n), matvec=lambda v: step(v.reshape(n, n)).ravel(), dtype=float)
    with threadpool_limits(limits=1, user_api="blas"):  # OpenBLAS's threads slow these small products 30x
        _, vecs = eigs(op, k=1, which="LM", v0=(start / start.sum()).ravel(), tol=1e-14)
        rho = vecs[:, 0].real.reshape(n, n)
        rho = rho / rho.sum()
        residual = float(np.abs(step(rho) - rho).sum())
    if residual > 1e-10:
        raise RuntimeError(f"{method} grid at step {step_size}: the eigenvector's residual is {residual:.1e}")
    return x, rho.sum(axis=1)


#: Grid sizes of :func:`grid_moment` (points, half width); the refined grid checks them.
SGLD_GRID = (900, 8.0)
SPLITTING_GRID = (192, 8.0)


def grid_moment(method: str, target, step_size: float, *, friction: float = FRICTION, refine: bool = False,
                f=np.square) -> float | tuple[float, float]:  # fmt: skip
    """``E f(theta)`` under the exact stationary law of ``method``'s chain on a 1-D ``target``.

    Parameters
    ----------
    method : {"sgld", "baoab", "obabo"}
    target : Target
        One-dimensional, with an exact gradient and log density (the splittings' grid starts from
        the target's law); its mass must lie well inside ``[-8, 8]``.
    step_size : float
        ``alpha``; the splittings' grid resolves their shears for ``alpha <= 0.8`` at unit
        curvature (the refined grid says how well).
    refine : bool
        Also compute on a finer and wider grid and return ``(value, |value - refined|)``.
    f : callable
        Vectorised function of ``theta``.
    """
    if method not in GRID_METHODS:
        raise ParameterError("method", f"method must be one of {GRID_METHODS}, got {method!r}")
    if target.dim != 1:
        raise ParameterError("target", f"the grid laws are one-dimensional; target has dimension {target.dim}")

    def grad(x):
        return target.gradient(x[:, None])[:, 0]

    def log_density(x):
        return target.log_density(x[:, None])

    def value(scale: float) -> float:
        if method == "sgld":
            n, half = SGLD_GRID
            x, pi = _sgld_density(grad, step_size, int(n * scale), half + (scale - 1.0) * 4.0)
        else:
            n, half = SPLITTING_GRID
            x, pi = _splitting_density(method, grad, log_density, step_size, friction, int(n * scale),
                                       half + (scale - 1.0) * 4.0)  # fmt: skip
        return float(pi @ f(x) / pi.sum())

    v = value(1.0)
    return (v, abs(value(1.25) - v)) if refine else v


# --------------------------------------------------------------------------- Monte Carlo


def monte_carlo_moment(method: str, target, step_size: float, n_chains: int, n_steps: int, burn_in: int,
                       seed: int, friction: float = FRICTION) -> tuple[float, float]:  # fmt: skip
    """``E theta_1^2`` under ``method``'s stationary law from independent chains, with its standard error.

    The chains start at exact draws of ``target``, run ``n_steps`` and average ``theta_1^2`` over
    the steps after ``burn_in``; the estimate is the mean of the chains' averages and its standard
    error their sample sd over ``sqrt(n_chains)`` (the chains are independent).
    """
    init = target.exact_draws(np.random.default_rng(seed), n_chains)
    result = sample(target, method, n_steps, n_chains=n_chains, seed=seed, step_size=step_size, init=init,
                    burn_in=burn_in, storage="moments", **_options(method, step_size, friction))  # fmt: skip
    mom = result["moments"]
    kept = n_steps - burn_in
    mean = mom["theta_mean"].values[:, 0]
    var = mom["theta_cov"].values[:, 0, 0] * (kept - 1) / kept  # the running covariance divides by n - 1
    per_chain = mean**2 + var
    return float(per_chain.mean()), float(per_chain.std(ddof=1) / math.sqrt(n_chains))


# --------------------------------------------------------------------------- slopes


@dataclass(frozen=True)
class PowerFit:
    """``|error| = coef * alpha^slope``, fitted on the log scale.

    ``slope_se`` is the slope's standard error from the points' standard errors (0 for exact
    values); ``chi2`` the weighted residual sum of squares (``n - 2`` degrees of freedom).
    """

    slope: float
    slope_se: float
    coef: float
    chi2: float
    n: int


def fit_power(x, y, se=None) -> PowerFit:
    """Fit ``log |y| = log coef + slope log x`` by weighted least squares.

    Parameters
    ----------
    x : array_like
        Positive step sizes.
    y : array_like
        Errors, all of one sign and nonzero.
    se : array_like, optional
        Standard errors of ``y``: the weights are ``(|y| / se)^2`` (the delta method's variance of
        ``log |y|``), and the slope's standard error follows from them alone (absolute
        weights). Without them the points are exact and equally weighted, and ``slope_se`` is 0.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ParameterError("x", f"x and y must be 1-D of one length >= 2, got {x.shape} and {y.shape}")
    if np.any(x <= 0):
        raise ParameterError("x", "x must be > 0")
    if not (np.all(y > 0) or np.all(y < 0)):
        raise ParameterError("y", "y must be nonzero and of one sign (a power law of |y|)")
    lx, ly = np.log(x), np.log(np.abs(y))
    if se is None:
        w = np.ones_like(lx)
    else:
        se = np.asarray(se, float)
        if se.shape != y.shape or np.any(se <= 0):
            raise ParameterError("se", "se must be > 0 and shaped like y")
        w = (np.abs(y) / se) ** 2
    design = np.stack([np.ones_like(lx), lx], axis=1)
    normal = design.T @ (w[:, None] * design)
    beta = np.linalg.solve(normal, design.T @ (w * ly))
    resid = ly - design @ beta
    slope_se = 0.0 if se is None else float(math.sqrt(np.linalg.inv(normal)[1, 1]))
    return PowerFit(float(beta[1]), slope_se, float(math.exp(beta[0])), float(np.sum(w * resid**2)), int(x.size))


# --------------------------------------------------------------------------- the experiment


@dataclass
class MonteCarlo:
    """One Monte Carlo run on the mixture, beside the grid's exact value."""

    method: str
    step_size: float
    error: float  # estimate - exact E theta^2
    se: float
    grid_error: float  # exact stationary value - exact E theta^2

    @property
    def z(self) -> float:
        """``(error - grid_error) / se``: the run against the grid's law."""
        return (self.error - self.grid_error) / self.se


@dataclass
class Result:
    """Both panels' numbers."""

    budget: Budget
    seed: int
    gaussian: dict  # method -> relative errors at budget.gaussian_steps (alpha lambda, lambda = 1)
    closed_form: dict
    exact_moment: float
    grid: dict  # method -> errors of E theta^2 at budget.grid_steps
    grid_error: dict  # method -> |value - refined value| at the largest grid step
    mc: list = field(default_factory=list)
    grid_fits: dict = field(default_factory=dict)  # local slopes at the two smallest steps
    mc_fits: dict = field(default_factory=dict)


def run(budget: Budget, seed: int, progress: bool = False) -> Result:
    """Compute both panels: the Gaussian's exact errors, the mixture's grid laws and Monte Carlo runs."""
    steps = np.array(budget.gaussian_steps)
    gaussian = gaussian_errors(steps)
    closed = {m: closed_form_error(m, steps, step_size=steps) for m in GAUSSIAN_METHODS}  # lambda = 1
    target = mixture()
    exact = float(target.second_moment[0, 0])
    grid, grid_err = {}, {}
    for method in GRID_METHODS:
        vals = [grid_moment(method, target, a) for a in budget.grid_steps[:-1]]
        last, err = cast("tuple[float, float]", grid_moment(method, target, budget.grid_steps[-1], refine=True))
        grid[method] = np.array(vals + [last]) - exact
        grid_err[method] = float(err)
    res = Result(budget, seed, gaussian, closed, exact, grid, grid_err)
    for method, errs in grid.items():
        res.grid_fits[method] = fit_power(budget.grid_steps[:2], errs[:2])
    for i, method in enumerate(MC_METHODS):
        for j, a in enumerate(budget.mc_steps):
            est, se = monte_carlo_moment(method, target, a, budget.n_chains, budget.n_steps, budget.burn_in,
                                         seed + 100 * i + j)  # fmt: skip
            want = cast(float, grid_moment(method, target, a)) - exact
            res.mc.append(MonteCarlo(method, a, est - exact, se, want))
            if progress:
                print(f"  {method} alpha={a:g}: {est - exact:+.5f} +- {se:.5f} (grid {want:+.5f})", flush=True)
        runs = [r for r in res.mc if r.method == method]
        res.mc_fits[method] = fit_power([r.step_size for r in runs], [r.error for r in runs],
                                        [r.se for r in runs])  # fmt: skip
    return res

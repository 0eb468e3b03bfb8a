r"""The samplers side by side, at equal gradient evaluations, on two mixtures and a logistic regression.

What runs
---------
Fourteen samplers (:data:`METHODS`, SGNHT with both friction steps) on three targets (:data:`TARGETS`): the 25-Gaussian
mixture and the 3x3 mixture with exact gradients, and Bayesian logistic regression on the
Australian credit data (690 examples, 14 standardised features and an intercept, prior
``N(0, 10^2 I)``) with minibatches of ``n = 69`` examples (a tenth) drawn without replacement from each
lane's stream.

Equal gradient evaluations. A *lane* is one sequence of gradients per step: a chain of an
independent-chain sampler, a particle of an interacting ensemble, or a replica of a
replica-exchange ladder (a ladder of ``L`` replicas counts ``L`` gradient evaluations per
step, though only its replica at ``T = 1`` samples the target). Every sampler runs the
budget's number of lanes: ``P`` chains, one ensemble of ``P`` particles (SVGD, SGLD+R,
SGHMC+R), or ``P / L`` ladders of ``L`` replicas (reSGLD). On the mixtures one gradient of
``U`` is one evaluation, and every sampler runs the same number of steps. On the
logistic regression the unit is the per-example gradient: a minibatch gradient costs ``n``;
SGLD-CV's estimate costs ``2 n`` per step (the minibatch at the chain and at the control
point) plus ``N`` once per run for the full gradient at the control point (Newton's search
for the mode, which sets the control point, is not counted, as the Hessian every sampler's
step rule reads is not); SVRG-LD's costs ``2 n`` per step plus ``N`` at each snapshot (one
every ``m = ceil(N / n)`` steps, from step 0). Each sampler runs the largest number of steps
its budget pays for (:func:`n_steps`), so the per-example budgets differ by less than one
step's cost. The reSGLD swap test reads exact full-data energies; those are not gradients
and are not counted (on the logistic regression it swaps once per pass, every ``m`` steps).

Step sizes. One rule for every sampler, fixed before any run and the same in both modes:
the step is the fraction :data:`STEP_FRACTION` of the sampler's own linear stability limit
at the target's stiffest curvature ``lambda_max`` (the mixtures: ``1 / sigma^2`` of a
component; the logistic regression: the largest eigenvalue of the Hessian of ``U`` at the
mode). In the cyclical paper's units (drift ``alpha grad U``, noise variance ``2 alpha``):

- SGLD, SGLD-CV, SVRG-LD, reSGLD (every rung at the same step), SVGD and SGLD+R:
  ``alpha < 2 / lambda_max`` (the kernel-averaged drift of an ensemble has the factor
  ``lambda(K) / L <= 1``);
- SGHMC and SGHMC+R (friction ``eta``): ``alpha < 2 (2 - eta) / lambda_max``, heavy-ball
  momentum ``1 - eta``;
- BAOAB and OBABO: ``alpha < 4 / lambda_max`` (``h omega < 2`` with ``alpha = h^2``);
- SGNHT with its thermostat at its set point ``xi = A``: ``h^2 lambda_max < 2 (2 - h A)``,
  the same heavy-ball bound with momentum ``1 - h A``;
- pSGLD (with or without Gamma): ``alpha < 2 / lambda_max(G^{1/2} H G^{1/2})`` with ``G`` the
  RMSprop preconditioner at stationarity in the Gaussian approximation,
  ``G_ii = 1 / (lambda + sqrt(v_i))``, ``v_i = H_ii + V_ii`` the mean squared gradient
  (``E[g g^T] = H`` under ``N(m, H^{-1})``, plus the minibatch noise covariance ``V`` at ``m``).

Every other option keeps its default (SGHMC ``eta = 0.1``; BAOAB and OBABO ``gamma = 1``;
SGNHT ``A = 1``; pSGLD ``beta = 0.99``, ``lambda = 1e-5``; kernels with the median
bandwidth; reSGLD a geometric ladder from 1 to 10 of :data:`REPLICAS` rungs).

What is measured (on the second half of every lane, the first half a burn-in)
-----------------------------------------------------------------------------
- mode coverage (mixtures): :func:`sgsim.diagnostics.mode_coverage`, modes with more than
  100 draws within 0.25 of the centre, all kept target draws pooled; beside it the
  coverage that as many exact independent draws would reach on average
  (:func:`sgsim.diagnostics.expected_mode_coverage`);
- KSD: :func:`sgsim.stein.imq_ksd` with the IMQ kernel ``(c^2 + r^2)^{-1/2}``, ``c =``
  :data:`KSD_C`, on ``M`` draws (the budget's ``ksd_draws``) taken evenly in time from
  each kept lane; its standard error is the U-statistic's for independent draws, which
  understates it for correlated ones;
- moment errors: :func:`sgsim.diagnostics.moment_errors`, the Euclidean norm of the mean's
  error and the largest entry of the second moment's, against the exact moments of the
  mixtures and, on the logistic regression, against a reference run: preconditioned MALA
  (:func:`~sgsim.experiments.reference_posteriors.mala`, exact gradients, Metropolis-adjusted,
  so without a step-size bias) from a dispersed start;
- ESS per gradient evaluation: the smallest bulk ESS over the coordinates
  (:func:`sgsim.diagnostics.ess`; the particles of an ensemble as its chains) over the run's
  gradient evaluations, burn-in included. SVGD is deterministic, its particles settle at fixed
  points, and an ESS means nothing for it;
- the exact-law prediction, where it exists: on the logistic regression, SGLD's and SGHMC's
  stationary law on the Gaussian fit ``N(m, S)`` of the reference draws at the run's step,
  with the minibatch noise covariance at ``m`` as gradient noise
  (:func:`sgsim.algorithms.affine_steps` on :func:`sgsim.targets.linear_gaussian`, then its
  ``stationary``), reported as the second-moment error it predicts,
  ``max_ij |S_pred - S|_ij``. The splittings refuse emulated gradient noise (a minibatch's
  noise enters their kicks), and the other samplers are not affine, so they have none.

A sampler that refuses a target is listed with the reason (SGLD-CV and SVRG-LD need a data
target's per-example gradients); a lane that diverges is marked and left out of every metric,
and the count is reported.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from .. import diagnostics, stein
from .._validate import ParameterError
from ..algorithms import affine_steps
from ..integrators import get_method
from ..integrators.resgld import cold_draws
from ..sampling import sample
from ..targets import linear_gaussian, logistic_regression, mixture_3x3, mixture_25
from ..targets.control_variates import find_mode, hessian
from ..targets.regression import minibatch_gradient_covariance

__all__ = [
    "METHODS",
    "VARIANTS",
    "registered",
    "ENSEMBLES",
    "TARGETS",
    "STEP_FRACTION",
    "REPLICAS",
    "KSD_C",
    "Budget",
    "QUICK",
    "FULL",
    "Problem",
    "Cell",
    "problem",
    "stability_limit",
    "n_steps",
    "gradient_evaluations",
    "layout",
    "predicted_cov",
    "run_cell",
    "run_target",
]

#: The samplers compared, in the report's order.
METHODS = (
    "sgld",
    "sghmc",
    "baoab",
    "obabo",
    "sgnht",
    "sgnht_exp",
    "psgld",
    "psgld_gamma",
    "sgld_cv",
    "svrg_ld",
    "resgld",
    "svgd",
    "sgld_repulsive",
    "sghmc_repulsive",
)
#: Rows that run a registered method with options of its own: ``row -> (method, options)``.
VARIANTS = {"sgnht_exp": ("sgnht", {"friction_step": "exponential"})}
#: The interacting samplers: their lanes are the particles of ensembles.
ENSEMBLES = frozenset({"resgld", "svgd", "sgld_repulsive", "sghmc_repulsive"})
#: The samplers whose gradient estimator needs per-example gradients.
DATA_ONLY = frozenset({"sgld_cv", "svrg_ld"})
#: The targets, by the names the report uses.
TARGETS = ("mixture_25", "mixture_3x3", "logistic_australian")
#: Every step is this fraction of its sampler's own stability limit.
STEP_FRACTION = 0.25
#: Rungs of one reSGLD ladder (its lanes per ensemble).
REPLICAS = 4
#: ``c`` of the IMQ kernel of the KSD.
KSD_C = 1.0
#: The metric's ball radius and draw threshold ([cSG] App. A.1).
RADIUS, THRESHOLD = 0.25, 100


@dataclass(frozen=True)
class Budget:
    """How much each mode runs.

    ``data_steps`` is the steps of a sampler that takes one minibatch per lane and step: the
    logistic regression's budget is ``data_lanes * data_steps * batch_size`` per-example
    gradients per sampler.
    """

    mixture_lanes: int
    mixture_steps: int
    data_lanes: int
    data_steps: int
    batch_size: int
    ksd_draws: int
    reference_chains: int
    reference_warmup: int
    reference_draws: int


QUICK = Budget(
    mixture_lanes=16,
    mixture_steps=4000,
    data_lanes=8,
    data_steps=3000,
    batch_size=69,
    ksd_draws=800,
    reference_chains=16,
    reference_warmup=1000,
    reference_draws=1500,
)
FULL = Budget(
    mixture_lanes=64,
    mixture_steps=50_000,
    data_lanes=16,
    data_steps=30_000,
    batch_size=69,
    ksd_draws=4000,
    reference_chains=32,
    reference_warmup=4000,
    reference_draws=10_000,
)


@dataclass
class Problem:
    """A target with what the step rule, the accounting and the metrics read."""

    name: str
    target: object
    curvature: np.ndarray  # H: U's Hessian where it is stiffest (the step rule's)
    grad_noise: np.ndarray  # V: the minibatch gradient's covariance at the mean (0 without data)
    lanes: int
    n_data: int  # 0: not a data target
    batch_size: int
    mean: np.ndarray
    second_moment: np.ndarray
    centres: np.ndarray | None = None
    mode_sd: float = 0.0
    fit_cov: np.ndarray | None = None  # the Gaussian fit's covariance (logistic: of the reference draws)
    reference_draws: np.ndarray | None = None  # (chain, draw, d): exact draws or the reference run's
    reference_note: str = ""

    @property
    def dim(self) -> int:
        """Dimension of the target."""
        return int(self.mean.shape[0])

    @property
    def lambda_max(self) -> float:
        """Largest eigenvalue of ``curvature``."""
        return float(np.linalg.eigvalsh(self.curvature)[-1])

    @property
    def data(self) -> bool:
        """Whether gradients are minibatches of a data set."""
        return self.n_data > 0

    @property
    def snapshot_every(self) -> int:
        """SVRG-LD's default snapshot period ``m = ceil(N / n)`` (one pass)."""
        return math.ceil(self.n_data / self.batch_size)


def _mixture_problem(name: str, budget: Budget, seed: int) -> Problem:
    target = mixture_25() if name == "mixture_25" else mixture_3x3()
    sd = float(np.max(target.mode_sd))
    d = target.dim
    n_ref = budget.mixture_lanes * (budget.mixture_steps - budget.mixture_steps // 2)
    exact = target.exact_draws(np.random.default_rng(seed), n_ref)
    return Problem(
        name=name,
        target=target,
        curvature=np.eye(d) / sd**2,
        grad_noise=np.zeros((d, d)),
        lanes=budget.mixture_lanes,
        n_data=0,
        batch_size=0,
        mean=np.asarray(target.mean, float),
        second_moment=np.asarray(target.second_moment, float),
        centres=np.asarray(target.mode_centres, float),
        mode_sd=sd,
        reference_draws=exact[None],
        reference_note=f"{n_ref:,} exact independent draws",
    )


def _logistic_problem(budget: Budget, seed: int) -> Problem:
    from .reference_posteriors import mala

    exact = logistic_regression(dataset="australian")
    target = logistic_regression(dataset="australian", batch_size=budget.batch_size)
    mode = find_mode(exact)
    h = hessian(exact, mode)
    h = 0.5 * (h + h.T)
    # the reference chains start dispersed: twice the Laplace approximation's spread
    rng = np.random.default_rng(seed)
    x0 = rng.multivariate_normal(mode, 4.0 * np.linalg.inv(h), size=budget.reference_chains)

    def logp_grad(x):
        return exact.log_density(x), -exact.gradient(x)

    ref = mala(logp_grad, x0, budget.reference_warmup, budget.reference_draws, seed)
    draws = np.asarray(ref.draws)  # (chain, draw, d)
    flat = draws.reshape(-1, draws.shape[-1])
    mean = flat.mean(0)
    second = flat.T @ flat / flat.shape[0]
    cov = second - np.outer(mean, mean)
    v = minibatch_gradient_covariance(target, mean)
    return Problem(
        name="logistic_australian",
        target=target,
        curvature=h,
        grad_noise=0.5 * (v + v.T),
        lanes=budget.data_lanes,
        n_data=int(target.extras["n_data"]),
        batch_size=budget.batch_size,
        mean=mean,
        second_moment=second,
        fit_cov=0.5 * (cov + cov.T),
        reference_draws=draws,
        reference_note=(
            f"MALA, {budget.reference_chains} chains x {budget.reference_draws:,} draws after "
            f"{budget.reference_warmup:,} adaptation steps, acceptance {float(ref.acceptance_rate):.2f}"
        ),
    )


def problem(name: str, budget: Budget, seed: int) -> Problem:
    """The target ``name`` of :data:`TARGETS` with its curvature, moments and reference draws."""
    if name in ("mixture_25", "mixture_3x3"):
        return _mixture_problem(name, budget, seed)
    if name == "logistic_australian":
        return _logistic_problem(budget, seed)
    raise ParameterError("target", f"target must be one of {', '.join(TARGETS)}, got {name!r}")


# ----------------------------------------------------------------------------- step rule and accounting


def registered(method: str) -> tuple[str, dict]:
    """The registered method a row of :data:`METHODS` runs, and the options it sets (:data:`VARIANTS`)."""
    return VARIANTS.get(method, (method, {}))


def _option(method: str, name: str) -> float:
    return float(get_method(registered(method)[0]).algorithm.options[name].default)


def stability_limit(method: str, prob: Problem) -> tuple[float, str]:
    """The largest stable ``step_size`` of ``method`` at ``prob``'s stiffest curvature, and its rule."""
    lam = prob.lambda_max
    if method in ("sgld", "sgld_cv", "svrg_ld", "resgld", "svgd", "sgld_repulsive"):
        return 2.0 / lam, "2 / λ"
    if method in ("sghmc", "sghmc_repulsive"):
        eta = _option(method, "friction")
        return 2.0 * (2.0 - eta) / lam, "2 (2 - η) / λ"
    if method in ("baoab", "obabo"):
        return 4.0 / lam, "4 / λ"
    if method == "sgnht":
        a = _option(method, "diffusion")
        h = (-a + math.sqrt(a * a + 4.0 * lam)) / lam  # the root of lam h^2 + 2 A h - 4 = 0
        return h * h, "h² λ = 2 (2 - h A)"
    if method == "sgnht_exp":
        # the momentum keeps c = exp(-h A) at the thermostat's mean: the linear recursion is stable
        # for h^2 lam < 2 (1 + c), whose root lies in (0, 2 / sqrt(lam)); bisection to rounding
        a = _option(method, "diffusion")
        lo, hi = 0.0, 2.0 / math.sqrt(lam)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if mid * mid * lam < 2.0 * (1.0 + math.exp(-mid * a)) else (lo, mid)
        return lo * lo, "h² λ = 2 (1 + exp(-h A))"
    if method in ("psgld", "psgld_gamma"):
        floor = _option(method, "floor")
        v = np.diag(prob.curvature) + np.diag(prob.grad_noise)
        g = 1.0 / (floor + np.sqrt(v))
        lam_g = float(np.linalg.eigvalsh(np.sqrt(g)[:, None] * prob.curvature * np.sqrt(g)[None, :])[-1])
        return 2.0 / lam_g, "2 / λ(G H)"
    raise ParameterError("method", f"method must be one of {', '.join(METHODS)}, got {method!r}")


def layout(method: str, prob: Problem) -> tuple[int, int | None]:
    """``(n_chains, n_particles)`` of ``method``'s run: ``prob.lanes`` lanes in all."""
    if method == "resgld":
        if prob.lanes % REPLICAS:
            raise ParameterError("lanes", f"lanes must be a multiple of {REPLICAS} (reSGLD's ladders)")
        return prob.lanes // REPLICAS, REPLICAS
    if method in ENSEMBLES:
        return 1, prob.lanes
    return prob.lanes, None


def gradient_evaluations(method: str, prob: Problem, steps: int) -> int:
    """Gradient evaluations of a whole run of ``steps`` steps (per-example ones on a data target)."""
    if not prob.data:
        return prob.lanes * steps
    n, big = prob.batch_size, prob.n_data
    if method == "sgld_cv":
        return prob.lanes * 2 * n * steps + big
    if method == "svrg_ld":
        return prob.lanes * (2 * n * steps + big * math.ceil(steps / prob.snapshot_every))
    return prob.lanes * n * steps


def budget_evaluations(prob: Problem, budget: Budget) -> int:
    """The gradient evaluations every sampler may spend on ``prob``."""
    if not prob.data:
        return prob.lanes * budget.mixture_steps
    return prob.lanes * budget.data_steps * prob.batch_size


def n_steps(method: str, prob: Problem, budget: Budget) -> int:
    """The most steps of ``method`` that the budget pays for."""
    total = budget_evaluations(prob, budget)
    if not prob.data:
        return budget.mixture_steps
    per = prob.lanes * prob.batch_size
    guess = total // per if method not in DATA_ONLY else total // (2 * per)
    while guess > 0 and gradient_evaluations(method, prob, guess) > total:
        guess -= 1
    return int(guess)


# ----------------------------------------------------------------------------- one run


@dataclass
class Cell:
    """One sampler on one target: its settings, its accounting and its metrics."""

    method: str
    target: str
    status: str  # "ok", "n/a" or "diverged"
    reason: str = ""
    step_size: float = float("nan")
    limit: float = float("nan")
    limit_rule: str = ""
    n_steps: int = 0
    n_chains: int = 0
    n_particles: int | None = None
    evaluations: int = 0
    n_draws: int = 0
    diverged: int = 0
    coverage: int | None = None
    coverage_iid: float | None = None
    ksd: float = float("nan")
    ksd_se: float = float("nan")
    mean_error: float = float("nan")
    second_moment_error: float = float("nan")
    ess_min: float = float("nan")
    predicted_second_moment_error: float | None = None
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def ess_per_evaluation(self) -> float:
        """Smallest bulk ESS over the coordinates per gradient evaluation of the run."""
        return self.ess_min / self.evaluations if self.evaluations else float("nan")


def _target_draws(method: str, result) -> tuple[np.ndarray, int]:
    """Draws of the target as ``(lane, draw, d)``, healthy lanes only, and the number of diverged lanes."""
    bad = np.asarray(result.constant_data["diverged_at"].values) > 0  # per chain (ensemble)
    if method == "resgld":
        # only the rung at T = 1 samples the target; a diverged ladder loses its REPLICAS lanes
        return cold_draws(result)[~bad], int(bad.sum()) * REPLICAS
    theta = np.asarray(result.posterior["theta"].values)
    if method in ENSEMBLES:  # (ensemble, draw, particle, d): each particle a lane
        x = theta[~bad].transpose(0, 2, 1, 3).reshape(-1, theta.shape[1], theta.shape[-1])
        return x, int(bad.sum()) * theta.shape[2]
    return theta[~bad], int(bad.sum())


def _thinned(x: np.ndarray, m: int) -> np.ndarray:
    """About ``m`` draws, evenly spaced in time on each lane, pooled."""
    per = max(1, m // x.shape[0])
    idx = np.unique(np.linspace(0, x.shape[1] - 1, per).round().astype(int))
    return x[:, idx].reshape(-1, x.shape[-1])


def predicted_cov(method: str, prob: Problem, step_size: float) -> np.ndarray | None:
    """The stationary covariance of ``method`` on the Gaussian fit with the minibatch noise, or None.

    The fit is ``N(m, S)`` with ``m``, ``S`` those of ``prob``'s reference draws; the gradient noise
    is the minibatch gradient's covariance at ``m``. Only SGLD and SGHMC have this law (the
    splittings refuse emulated gradient noise; the other samplers are not affine).
    """
    if prob.fit_cov is None or method not in ("sgld", "sghmc"):
        return None
    precision = np.linalg.inv(prob.fit_cov)
    precision = 0.5 * (precision + precision.T)
    fit = linear_gaussian(precision, shift=precision @ prob.mean, grad_noise_cov=prob.grad_noise)
    _, cov = affine_steps(method, fit, 1, step_size=step_size).stationary()
    d = prob.dim
    return cov[:d, :d]


def run_cell(method: str, prob: Problem, budget: Budget, seed: int) -> Cell:
    """Run ``method`` on ``prob`` at its step rule and budget, and measure it."""
    if method in DATA_ONLY and not prob.data:
        return Cell(method, prob.name, "n/a", "needs a data target (per-example gradients for its estimator)")
    limit, rule = stability_limit(method, prob)
    step = STEP_FRACTION * limit
    steps = n_steps(method, prob, budget)
    chains, particles = layout(method, prob)
    evaluations = gradient_evaluations(method, prob, steps)
    cell = Cell(method, prob.name, "ok", step_size=step, limit=limit, limit_rule=rule, n_steps=steps,
                n_chains=chains, n_particles=particles, evaluations=evaluations)  # fmt: skip
    options: dict = {"step_size": step}
    if particles is not None:
        options["n_particles"] = particles
    if method == "resgld" and prob.data:
        options["swap_every"] = prob.snapshot_every
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            # diverged lanes are counted in the cell, not announced one warning each
            warnings.simplefilter("ignore", RuntimeWarning)
            name, extra = registered(method)
            result = sample(prob.target, name, steps, n_chains=chains, seed=seed, burn_in=steps // 2,
                            on_divergence="mark", **options, **extra)  # fmt: skip
    except ParameterError as err:
        return Cell(method, prob.name, "n/a", str(err))
    cell.seconds = time.perf_counter() - t0
    x, cell.diverged = _target_draws(method, result)
    if x.shape[0] < 2:
        cell.status = "diverged"
        cell.reason = f"{cell.diverged} of {prob.lanes} lanes diverged"
        return cell
    cell.n_draws = int(x.shape[0] * x.shape[1])
    if prob.centres is not None:
        cell.coverage = diagnostics.mode_coverage(x, prob.centres, RADIUS, THRESHOLD)
        p = diagnostics.ball_probability(RADIUS, prob.mode_sd, prob.dim)
        cell.coverage_iid = diagnostics.expected_mode_coverage(cell.n_draws, len(prob.centres), p, THRESHOLD)[0]
    k = stein.imq_ksd(_thinned(x, budget.ksd_draws), prob.target, c=KSD_C)
    cell.ksd, cell.ksd_se = float(k.ksd), float(k.se)
    moments = diagnostics.moment_errors(x, _Moments(prob))
    cell.mean_error, cell.second_moment_error = moments["mean_error"], moments["second_moment_error"]
    if method != "svgd":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            cell.ess_min = float(np.nanmin(diagnostics.ess(x)))
    pred = predicted_cov(method, prob, step)
    if pred is not None:
        cell.predicted_second_moment_error = float(np.max(np.abs(pred - prob.fit_cov)))
    return cell


@dataclass(frozen=True)
class _Moments:
    """What :func:`sgsim.diagnostics.moment_errors` reads of a target: the exact or reference moments."""

    prob: Problem

    @property
    def name(self) -> str:
        return self.prob.name

    @property
    def mean(self) -> np.ndarray:
        return self.prob.mean

    @property
    def second_moment(self) -> np.ndarray:
        return self.prob.second_moment


def reference_cell(prob: Problem, budget: Budget) -> Cell:
    """The same metrics of the reference draws (exact draws, or the logistic regression's MALA run)."""
    x = prob.reference_draws
    if x is None:
        raise ValueError(f"problem {prob.name!r} has no reference draws")
    cell = Cell("reference", prob.name, "ok", prob.reference_note, n_draws=int(x.shape[0] * x.shape[1]))
    if prob.centres is not None:
        cell.coverage = diagnostics.mode_coverage(x, prob.centres, RADIUS, THRESHOLD)
        p = diagnostics.ball_probability(RADIUS, prob.mode_sd, prob.dim)
        cell.coverage_iid = diagnostics.expected_mode_coverage(cell.n_draws, len(prob.centres), p, THRESHOLD)[0]
    k = stein.imq_ksd(_thinned(x, budget.ksd_draws), prob.target, c=KSD_C)
    cell.ksd, cell.ksd_se = float(k.ksd), float(k.se)
    if prob.centres is not None:
        moments = diagnostics.moment_errors(x, _Moments(prob))
        cell.mean_error, cell.second_moment_error = moments["mean_error"], moments["second_moment_error"]
    else:
        # against itself the errors vanish; its Monte Carlo standard errors are the floor instead
        means = x.mean(axis=1)
        cell.mean_error = float(np.linalg.norm(means.std(0, ddof=1) / math.sqrt(x.shape[0])))
    return cell


def run_target(name: str, budget: Budget, seed: int, methods=METHODS) -> tuple[Problem, Cell, list[Cell]]:
    """Every sampler of ``methods`` on target ``name``; the reference draws' cell beside them."""
    prob = problem(name, budget, seed)
    cells = [run_cell(m, prob, budget, seed + 17 * (k + 1)) for k, m in enumerate(methods)]
    return prob, reference_cell(prob, budget), cells

r"""The bias of SG-MCMC on reference posteriors: SGLD, SGHMC and their cyclical versions.

What is measured
----------------
Each run samples one reference posterior (:mod:`sgsim.targets.posteriordb`) on Stan's
unconstrained scale ``u``, where the samplers move, with ``C`` chains started at ``C`` distinct
gold draws (mapped to ``u``): the chains start in the posterior, so what they show after a
burn-in is the sampler's own bias at that step size and minibatch size, not a transient
from a far start. The error of the pooled draws is reported per coordinate in units of the
gold standard deviation ``s_i`` of that coordinate,

.. math::

    e^{\text{mean}}_i = \frac{\hat m_i - m_i}{s_i}, \qquad
    e^{\text{sd}}_i = \frac{\hat s_i}{s_i} - 1,

with ``m_i``, ``s_i`` from the gold draws; each comes with its Monte Carlo standard error from
the spread of the chains' own averages (the chains are independent replicas, so the
variance of the pooled mean is that of the chain means over ``C``; the same holds for the
pooled second moment, and the delta method carries it to the standard deviation).

Step sizes are in units of the posterior's stiffest direction: ``step_size = c /
lambda_max(P)`` with ``P`` the inverse of the gold covariance of ``u`` ([cSG] units: drift
``step_size * grad U``, noise variance ``2 step_size``), so that ``c`` means the same on every
posterior (SGLD is stable for ``c < 2``). Minibatch sizes are given as fractions of ``N`` for
the posteriors whose likelihood is a sum over exchangeable examples; each step's gradient
then uses ``n`` examples drawn without replacement from the chain's stream, scaled by
``N / n``.

What the theory predicts
------------------------
Where the posterior is near Gaussian on ``u`` (every coordinate's gold skewness within 0.5
and excess kurtosis within 1), its Gaussian fit ``N(m, P^{-1})`` has an exact discrete-time
law under each sampler (:func:`sgsim.theory.sgld_law`, :func:`sgsim.theory.sghmc_law`): from
the chains' initial law ``N(m, P^{-1})``, with the run's schedule and the minibatch noise
covariance ``V`` at ``m`` (:func:`sgsim.targets.regression.minibatch_gradient_covariance`),
it gives the law of every iterate, and the pooled kept draws then have the mixture of those
laws. Its mean and standard deviation in the same units are the predicted errors: zero in the
mean, and in the standard deviation the step's inflation (``sqrt(2 / (2 - c))`` at the stiffest
direction of SGLD without minibatch noise, more with it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import theory
from ..integrators import get_method
from ..sampling import sample
from ..targets import posteriordb
from ..targets.regression import minibatch_gradient_covariance

__all__ = [
    "Budget",
    "QUICK",
    "FULL",
    "METHODS",
    "Reference",
    "BiasRun",
    "PortCheck",
    "reference",
    "bias_run",
    "predicted",
    "check_port",
    "batch_sizes",
    "run_posterior",
]

#: The samplers compared, and the cyclical presets' number of cycles.
METHODS = ("sgld", "sghmc", "csgld", "csghmc")
N_CYCLES = 4


@dataclass(frozen=True)
class Budget:
    """How much each mode runs."""

    posteriors: tuple[str, ...]
    step_factors: tuple[float, ...]  # c: step_size = c / lambda_max(P)
    batch_fractions: tuple[float, ...]  # n / N for data posteriors (1.0: every example)
    n_chains: int
    n_steps: int
    mala_chains: int
    mala_warmup: int
    mala_draws: int


QUICK = Budget(
    posteriors=(
        "mesquite-logmesquite_logvolume",
        "kidiq-kidscore_momiq",
        "eight_schools-eight_schools_noncentered",
        "arK-arK",
    ),
    step_factors=(0.1, 0.8),
    batch_fractions=(1.0, 0.1),
    n_chains=64,
    n_steps=2000,
    mala_chains=32,
    mala_warmup=1500,
    mala_draws=1500,
)
FULL = Budget(
    posteriors=posteriordb.POSTERIORS,
    step_factors=(0.02, 0.05, 0.1, 0.2, 0.4, 0.8),
    batch_fractions=(1.0, 0.3, 0.1, 0.03),
    n_chains=128,
    n_steps=10_000,
    mala_chains=64,
    mala_warmup=4000,
    mala_draws=4000,
)


@dataclass(frozen=True)
class Reference:
    """A posterior's gold draws on the sampler's scale, and its Gaussian fit."""

    name: str
    gold_u: np.ndarray  # (chains, draws, d)
    mean: np.ndarray
    sd: np.ndarray
    precision: np.ndarray
    lambda_max: float
    near_gaussian: bool
    skewness: float
    excess_kurtosis: float
    n_data: int  # examples of an exchangeable likelihood (0: none)

    @property
    def dim(self) -> int:
        """Dimension of the unconstrained vector."""
        return int(self.mean.shape[0])


def reference(name: str) -> Reference:
    """The gold draws of ``name`` on the unconstrained scale, their moments and Gaussian fit."""
    target = posteriordb.reference_posterior(name)
    gold = posteriordb.gold_parameters(name)
    u = np.asarray(target.parameters.unconstrain(gold))
    flat = u.reshape(-1, u.shape[-1])
    mean = flat.mean(0)
    cov = np.cov(flat.T).reshape(flat.shape[1], flat.shape[1])
    sd = np.sqrt(np.diag(cov))
    z = (flat - mean) / sd
    skew = float(np.max(np.abs(np.mean(z**3, axis=0))))
    kurt = float(np.max(np.abs(np.mean(z**4, axis=0) - 3.0)))
    precision = np.linalg.inv(cov)
    precision = 0.5 * (precision + precision.T)
    return Reference(
        name=name,
        gold_u=u,
        mean=mean,
        sd=sd,
        precision=precision,
        lambda_max=float(np.linalg.eigvalsh(precision)[-1]),
        near_gaussian=skew <= 0.5 and kurt <= 1.0,
        skewness=skew,
        excess_kurtosis=kurt,
        n_data=posteriordb.exchangeable_examples(name),
    )


@dataclass
class BiasRun:
    """One sampler's errors on one posterior at one step size and minibatch size."""

    name: str
    method: str
    step_factor: float
    batch_size: int | None  # None: every example (or no data likelihood)
    err_mean: np.ndarray  # (d,) in gold sd
    err_sd: np.ndarray
    se_mean: np.ndarray
    se_sd: np.ndarray
    diverged: int
    predicted_mean: np.ndarray | None = None
    predicted_sd: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    @property
    def worst_mean(self) -> float:
        """Largest ``|e_mean|`` over the coordinates."""
        return float(np.max(np.abs(self.err_mean)))

    @property
    def worst_sd(self) -> float:
        """Largest ``|e_sd|`` over the coordinates."""
        return float(np.max(np.abs(self.err_sd)))

    @property
    def rms_sd(self) -> float:
        """Root mean square of ``e_sd`` over the coordinates."""
        return float(np.sqrt(np.mean(self.err_sd**2)))


def _schedule_kwargs(method: str, step_size: float) -> dict:
    kw: dict = {"step_size": step_size}
    if method.startswith("c"):
        kw["n_cycles"] = N_CYCLES
    return kw


def bias_run(ref: Reference, method: str, step_factor: float, batch_size: int | None, budget: Budget,
             seed: int, target=None) -> BiasRun:  # fmt: skip
    """Run ``method`` on ``ref``'s posterior from gold draws; measure its errors (and predict them).

    ``target`` is the posterior at ``batch_size`` (built if not given; pass it to run many
    configurations on one build, whose gradient is compiled once).
    """
    if target is None:
        target = posteriordb.reference_posterior(ref.name, batch_size=batch_size)
    rng = np.random.default_rng(seed)
    flat = ref.gold_u.reshape(-1, ref.dim)
    init = flat[rng.choice(flat.shape[0], size=budget.n_chains, replace=False)]
    step_size = step_factor / ref.lambda_max
    burn_in = budget.n_steps // 2
    result = sample(
        target, method, budget.n_steps, n_chains=budget.n_chains, seed=seed, init=init, burn_in=burn_in,
        thin=5, on_divergence="mark", **_schedule_kwargs(method, step_size),
    )  # fmt: skip
    draws = result["unconstrained_posterior"]["theta"].values  # (C, n, d)
    diverged = np.asarray(result.constant_data["diverged_at"].values) > 0
    draws = draws[~diverged]
    c = draws.shape[0]
    if c < 2:
        nan = np.full(ref.dim, np.nan)
        return BiasRun(ref.name, method, step_factor, batch_size, nan, nan, nan, nan, int(diverged.sum()))
    pooled_mean = draws.mean(axis=(0, 1))
    chain_means = draws.mean(axis=1)
    chain_sq = ((draws - pooled_mean) ** 2).mean(axis=1)
    var = chain_sq.mean(0)
    sd = np.sqrt(var)
    se_m = chain_means.std(0, ddof=1) / math.sqrt(c)
    se_v = chain_sq.std(0, ddof=1) / math.sqrt(c)
    run = BiasRun(
        name=ref.name,
        method=method,
        step_factor=step_factor,
        batch_size=batch_size,
        err_mean=(pooled_mean - ref.mean) / ref.sd,
        err_sd=sd / ref.sd - 1.0,
        se_mean=se_m / ref.sd,
        se_sd=se_v / (2.0 * sd) / ref.sd,
        diverged=int(diverged.sum()),
    )
    if ref.near_gaussian:
        run.predicted_mean, run.predicted_sd = predicted(ref, target, method, step_size, batch_size, budget, result)
    return run


def predicted(ref: Reference, target, method: str, step_size: float, batch_size: int | None, budget: Budget,
              result) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The errors of the pooled kept draws under the exact law of the Gaussian fit.

    The law of every iterate from the chains' initial law ``N(m, P^{-1})``, with the run's own
    step sizes and temperatures and the minibatch noise covariance at ``m``; the kept draws'
    pooled law is the mixture of the kept iterates' laws.
    """
    d = ref.dim
    cov0 = np.linalg.inv(ref.precision)
    v = None
    if batch_size is not None:
        v = minibatch_gradient_covariance(target, ref.mean, batch_size, False)
    steps = result.sample_stats["step"].values[0] - 1  # kept steps, 0-based
    alpha, temp = _schedule_values(method, step_size, budget.n_steps)
    shift = ref.precision @ ref.mean
    if method in ("sgld", "csgld"):
        path = theory.sgld_law(ref.precision, shift, alpha, temp, v, init_mean=ref.mean, init_cov=cov0)
        means, covs = path.mean[steps], path.cov[steps]
    else:
        m0 = np.concatenate([ref.mean, np.zeros(d)])
        s0 = np.zeros((2 * d, 2 * d))
        s0[:d, :d] = cov0
        friction = get_method(method).algorithm.options["friction"].default
        path = theory.sghmc_law(ref.precision, shift, alpha, friction, temp, v, init_mean=m0, init_cov=s0)
        means, covs = path.mean[steps, :d], path.cov[steps, :d, :d]
    pooled_mean = means.mean(0)
    var = (np.diagonal(covs, axis1=1, axis2=2) + (means - pooled_mean) ** 2).mean(0)
    return (pooled_mean - ref.mean) / ref.sd, np.sqrt(var) / ref.sd - 1.0


def _schedule_values(method: str, step_size: float, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    # the run's own step sizes and temperatures, from the method's schedule as sample builds it
    block = get_method(method).schedule(n_steps, **_schedule_kwargs(method, step_size)).block(0, n_steps)
    return np.asarray(block.step_size), np.asarray(block.temperature)


@dataclass
class PortCheck:
    """An exact (Metropolis-adjusted) reference run of a port against the gold draws."""

    name: str
    comparison: posteriordb.Comparison
    acceptance: float
    n_chains: int
    n_draws: int
    seconds: float


def check_port(name: str, budget: Budget, seed: int) -> PortCheck:
    """MALA on the port of ``name`` from gold draws, its draws compared with the gold ones.

    The chains start at distinct gold draws (mapped to the unconstrained scale), adapt their
    step size and metric during the warm-up, and keep ``mala_draws`` draws each of an exact
    Metropolis-Hastings chain (:func:`~sgsim.experiments.reference_posteriors.mala`); the
    draws, by name on the constrained scale, are compared with the gold draws within 5
    combined Monte Carlo standard errors (:func:`sgsim.targets.posteriordb.compare`).
    """
    import time

    from .reference_posteriors import mala

    target = posteriordb.reference_posterior(name)
    gold = target.parameters.unconstrain(posteriordb.gold_parameters(name)).reshape(-1, target.dim)
    rng = np.random.default_rng(seed)
    x0 = gold[rng.choice(gold.shape[0], size=budget.mala_chains, replace=False)]

    def logp_grad(x):
        return target.log_density(x), -target.gradient(x)

    t0 = time.perf_counter()
    run = mala(logp_grad, x0, budget.mala_warmup, budget.mala_draws, seed)
    draws = target.named(run.draws)
    comparison = posteriordb.compare(draws, name)
    return PortCheck(name, comparison, float(run.acceptance_rate), budget.mala_chains, budget.mala_draws,
                     time.perf_counter() - t0)  # fmt: skip


def batch_sizes(ref: Reference, budget: Budget) -> list[int | None]:
    """The minibatch sizes a posterior is run at: None (every example), then the budget's fractions of ``N``."""
    sizes: list[int | None] = [None]
    if ref.n_data:
        sizes += sorted({max(1, round(f * ref.n_data)) for f in budget.batch_fractions if f < 1.0}, reverse=True)
    return sizes


def run_posterior(name: str, budget: Budget, seed: int) -> tuple[Reference, list[BiasRun]]:
    """Every method, step size and minibatch size of ``budget`` on posterior ``name``."""
    import warnings

    ref = reference(name)
    runs = []
    k = 0
    for batch in batch_sizes(ref, budget):
        target = posteriordb.reference_posterior(name, batch_size=batch)
        for method in METHODS:
            for c in budget.step_factors:
                with warnings.catch_warnings():
                    # diverged chains are counted in the run, not announced one warning each
                    warnings.simplefilter("ignore", RuntimeWarning)
                    runs.append(bias_run(ref, method, c, batch, budget, seed + k, target))
                k += 1
    return ref, runs

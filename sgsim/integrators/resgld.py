r"""Replica-exchange SGLD (reSGLD): SGLD chains at a ladder of temperatures that swap positions.

An ensemble is one ladder. Its ``L`` particles are the replicas, particle ``p`` at the
temperature ``T_k tau_p`` with ``1 = tau_0 < tau_1 < ... < tau_{L-1}`` (``T_k`` the schedule's
temperature, 1 by default), so that **particle 0 is the chain at the target's temperature**:
``result.posterior["theta"].sel(particle=0)``, or :func:`~sgsim.integrators.resgld.cold_draws`.
Swaps exchange positions, never temperatures, so a particle's index is its rung of the ladder at
every step. The other particles are kept too: they sample the tempered laws ``exp(-U / tau_p)``,
not the target.

Each step moves every replica by SGLD in the cyclical paper's convention, then, every
``swap_every`` steps, tests swaps between adjacent rungs:

.. math::

    \theta_p \leftarrow \theta_p - s_p \alpha_k \nabla\tilde U(\theta_p)
        + \sqrt{2\, s_p \alpha_k\, T_k \tau_p}\; \xi_p, \qquad \xi_p \sim N(0, I_d).

``s_p`` are the ``step_scales`` (1 for every rung by default; ``s_0 = 1``, so that
``step_size`` is the cold chain's). Deng, Feng, Gao, Liang and Lin (2020), "Non-convex learning
via replica exchange stochastic gradient MCMC", §2, write each replica as Langevin dynamics
``d beta = -grad U dt + sqrt(2 tau) dW`` discretised with a learning rate ``eta`` per replica:
``beta <- beta - eta grad U~ + sqrt(2 eta tau) xi``. That is this module's step with
``alpha = eta`` (drift ``alpha grad U``, noise variance ``2 alpha T``: the same units), and the
paper's larger learning rate of the high-temperature chain is ``s_p = eta_p / eta_0``. A step
scale changes how fast a replica moves, not the law it samples (``exp(-U / tau_p)`` as the
step goes to 0), so swaps stay correct whatever the scales.

The swap test (Deng et al. 2020, §3 and Algorithm 1: the swap rate of §2 made unbiased for
noisy energies, with the correction factor ``F``). For the adjacent pair ``(p, p + 1)``, with
``c = 1 / (T_k tau_p) - 1 / (T_k tau_{p+1}) > 0`` and energy estimates
``U~_q = U(theta_q) + sigma epsilon_q``, ``epsilon_q ~ N(0, 1)`` drawn afresh for each test,

.. math::

    \log S = c \Big( \tilde U_p - \tilde U_{p+1} - \frac{c\, \hat\sigma^2}{F} \Big),
    \qquad \text{swap } \theta_p \leftrightarrow \theta_{p+1} \text{ when } u < \min(1, S),
    \quad u \sim U[0, 1).

Why ``c sigma^2``: ``U~_p - U~_{p+1} ~ N(U_p - U_{p+1}, 2 sigma^2)``, so
``E exp(c (U~_p - U~_{p+1})) = exp(c (U_p - U_{p+1}) + c^2 sigma^2)``: the naive rate
``exp(c (U~_p - U~_{p+1}))`` overstates every swap by ``exp(c^2 sigma^2)``, which ``F = 1``
removes. With Gaussian energy noise of known variance, ``F = 1`` is exact: it is the penalty
method of Ceperley and Dewing (1999), "The penalty method for random walks with uncertain
energies" (the penalty is half the variance of ``c (U~_p - U~_{p+1})``), whose acceptance
satisfies detailed balance for the tempered product law. ``F > 1`` corrects less (more
swaps, a bias; the paper's trade-off between acceleration and accuracy); ``F = inf`` is the
naive, biased rule. Without energy noise (``sigma = 0``) the rule is the exact
replica-exchange test ``min(1, exp(c (U_p - U_{p+1})))`` of §2.

The variance ``sigma_hat^2``: the paper estimates it from each minibatch (the sample variance
of the ``N / n``-scaled per-example energies) and smooths it by stochastic approximation,
``sigma_hat^2_{k+1} = (1 - gamma_k) sigma_hat^2_k + gamma_k sigma~^2_{k+1}`` (Algorithm 1).
Here energies are the target's exact ``U = -log density`` (its compiled ``log_density_fn``,
over the whole data set for a data target, whose gradients may still be minibatches), plus
emulated Gaussian noise of the given variance ``energy_noise = sigma^2`` when asked for, the
analogue of a target's emulated gradient noise: its variance is known, so ``sigma_hat^2 =
sigma^2`` exactly and nothing is estimated. Minibatch energies (and the estimate of their
variance) would need a target to expose a compiled per-example log likelihood; none does yet.

Order of a swap event: the pairs ``(0, 1), (1, 2), ..., (L-2, L-1)`` in turn, each with fresh
energy noise (an accepted swap carries the exact energies along with the positions); each
test is a Metropolis-Hastings move of the pair that leaves the tempered product law
``prod_p exp(-U(theta_p) / (T tau_p))`` invariant, and so does their composition. Steps at
``T_k = 0`` test no swap.

Random numbers, for bits that do not depend on threads or on the number of ensembles: each
replica's minibatch and normals come from its own stream ``(seed, ensemble, particle)``; the
test of pair ``(p, p + 1)`` draws ``epsilon_p`` from stream ``p``, ``epsilon_{p+1}`` from stream
``p + 1`` (only when ``energy_noise > 0``), then ``u`` from stream ``p``.

Statistics per kept draw (``sample_stats``), counted from the start of the run:
``swap_attempts`` (tests of all pairs), ``swaps`` (accepted), ``cold_swaps`` (accepted swaps of
the pair ``(0, 1)``, which feed the cold chain; its tests number ``swap_attempts / (L - 1)``)
and ``steps`` (steps taken, which time the swap events);
:func:`~sgsim.integrators.resgld.swap_rates` gives the acceptance rates. Targets with emulated
gradient noise (``grad_noise_cov``) are refused: each replica would need its own gradient noise,
``s_p alpha_k`` times the target's, which this step does not draw.

Discretisation bias: the swap test takes each replica's law to be ``exp(-U / (T tau_p))``, while
SGLD's is wider (in a Gaussian mode of curvature ``lambda``, by ``1 / (1 - alpha lambda / 2)``),
so the cold chain's mode weights are off by ``O(alpha)`` even with exact energies. On the 5 x 5
grid of the 25-Gaussian mixture with weights ``2^(x_1 / 2)`` (4 replicas, ``ladder=30``) the
cold chain's ``E x_1`` is 0.12 low at ``step_size=0.01``, 0.05 low at 0.005 and within its Monte
Carlo error (0.03) at 0.0025 (every replica's step counts: at a cold step of 0.001 with hot
steps of 0.01 it is still 0.05 low).

Stability: each rung takes SGLD's step ``s_p alpha``, stable on ``U = L x^2 / 2`` exactly while
``s_p alpha L < 2``. Swaps move positions between rungs, so a rung beyond its limit does not
always blow the ladder up; when every rung is beyond it (``alpha L min_p s_p >= 2``, a
*necessary* limit) nothing contracts, and a run whose every step is beyond it is refused before
any work (an error naming ``step_size``; ``L`` the target's
:meth:`~sgsim.targets.Target.curvature_bound`). ``alpha L max_p s_p < 2`` is sufficient.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import dynamics
from .._jit import jit
from .._validate import ParameterError, ParameterTypeError, finite_array, integer, real
from ..rng import standard_normal, uniform
from ._base import CONSTANT_OPTIONS, INTERACTING, Algorithm, Method, Option, constant_schedule, curvature_limit
from ._loop import gradient

__all__ = [
    "RESGLD",
    "METHOD",
    "Constants",
    "temperature_ladder",
    "swap_log_ratio",
    "cold_draws",
    "swap_rates",
]


class Constants(NamedTuple):
    """What the step reads: the ladder ``tau``, the step scales ``s``, the swap period, ``1 / F``,
    and the energy noise's standard deviation and variance (``sigma``, ``sigma_hat^2``).
    """

    ladder: np.ndarray
    step_scales: np.ndarray
    swap_every: int
    inv_factor: float
    energy_sd: float
    energy_variance: float


@jit(inline=True)
def swap_log_ratio(u_low, u_high, c, variance, inv_factor):
    """``log S = c (U~_low - U~_high - c sigma_hat^2 / F)``, the log of the bias-corrected swap rate."""
    return c * (u_low - u_high - inv_factor * c * variance)


@jit
def _langevin(Z, G, j, a, base, ladder, scales, inj, rngs):
    # every replica's SGLD move, its normals from its own stream (or injected); called, not
    # inlined: one compiled copy of the generator, cached on disk, whatever the target
    n_rep, d = Z.shape
    for i in range(n_rep):
        ai = a * scales[i]
        c = base * math.sqrt(scales[i] * ladder[i])
        st = rngs[i]
        for m in range(d):
            xi = 0.0
            if base > 0.0:
                xi = inj[j, i, m] if inj.shape[0] > 0 else standard_normal(st)
            Z[i, m] = Z[i, m] - ai * G[i, m] + c * xi


@jit
def _swap_sweep(Z, energies, temp, ladder, energy_sd, energy_variance, inv_factor, rngs, stats):
    # the tests of the pairs (0, 1), (1, 2), ... in turn; an accepted swap exchanges the positions
    # and their exact energies
    n_rep, d = Z.shape
    for i in range(n_rep - 1):
        c = 1.0 / (temp * ladder[i]) - 1.0 / (temp * ladder[i + 1])
        u_low = energies[i]
        u_high = energies[i + 1]
        if energy_sd > 0.0:
            u_low += energy_sd * standard_normal(rngs[i])
            u_high += energy_sd * standard_normal(rngs[i + 1])
        log_s = swap_log_ratio(u_low, u_high, c, energy_variance, inv_factor)
        draw = uniform(rngs[i], 0.0, 1.0)
        stats[0] += 1.0
        # min(1, S) without overflow; a NaN energy never swaps
        if log_s >= 0.0 or draw < math.exp(log_s):
            for m in range(d):
                t = Z[i, m]
                Z[i, m] = Z[i + 1, m]
                Z[i + 1, m] = t
            t = energies[i]
            energies[i] = energies[i + 1]
            energies[i + 1] = t
            stats[1] += 1.0
            if i == 0:
                stats[2] += 1.0


def _resgld_step(X, G, B, P, W, j, alpha, consts, noise, grad_u, stochastic_grad_u, params, works, rngs, inj, stats,
                 log_density):  # fmt: skip
    Z = X[0]
    n_rep = Z.shape[0]
    temp = noise[4][j]
    base = noise[0][j, 0] if noise[3][j] else 0.0  # sqrt(2 alpha T), the same in every coordinate
    for i in range(n_rep):
        gradient(Z[i], G[i], grad_u, stochastic_grad_u, params, works[i], rngs[i])
    _langevin(Z, G, j, alpha[j], base, consts.ladder, consts.step_scales, inj, rngs)
    stats[3] += 1.0
    if temp <= 0.0 or int(stats[3]) % consts.swap_every != 0:
        return
    energies = W[:n_rep]
    for i in range(n_rep):
        energies[i] = -log_density(Z[i], params)
    _swap_sweep(Z, energies, temp, consts.ladder, consts.energy_sd, consts.energy_variance, consts.inv_factor, rngs,
                stats)  # fmt: skip


# compiled in memory: it takes the target's gradient and log density as arguments
step = jit(_resgld_step, cache=False)


def temperature_ladder(n_replicas: int, top: float) -> np.ndarray:
    """The geometric ladder ``tau_p = top^(p / (L - 1))``, ``p = 0 .. L - 1``: from 1 to ``top``.

    Equal ratios between adjacent rungs give roughly equal swap rates between them when the
    energy's heat capacity is constant (a Gaussian mode's, for instance).

    Examples
    --------
    >>> from sgsim.integrators.resgld import temperature_ladder
    >>> print(temperature_ladder(3, 4.0))
    [1. 2. 4.]
    """
    n = integer("n_replicas", n_replicas, low=2)
    top = real("top", top, 1.0, low_open=True)
    ladder = top ** (np.arange(n) / (n - 1))
    ladder[0], ladder[-1] = 1.0, top
    return ladder


def _check_ladder(name: str, value):
    if isinstance(value, bool):
        raise ParameterTypeError(name, f"{name} must be a number > 1 or a sequence of temperatures, got a bool")
    if np.ndim(value) == 0:
        return real(name, value, 1.0, low_open=True)
    ladder = finite_array(name, value)
    if ladder.ndim != 1 or ladder.size < 2:
        raise ParameterError(name, f"{name} must hold at least 2 temperatures (one per replica), got {value!r}")
    if ladder[0] != 1.0:
        raise ParameterError(
            name, f"{name} must start at 1 (the replica at the target's temperature), got {ladder[0]!r}"
        )
    if not np.all(np.diff(ladder) > 0):
        raise ParameterError(name, f"{name} must be strictly increasing, got {ladder.tolist()}")
    return ladder


def _check_step_scales(name: str, value):
    if value is None:
        return None
    scales = finite_array(name, value)
    if scales.ndim != 1 or np.any(scales <= 0):
        raise ParameterError(name, f"{name} must be a sequence of numbers > 0 (one per replica), got {value!r}")
    if scales[0] != 1.0:
        raise ParameterError(name, f"{name} must start at 1 (step_size is the cold chain's), got {scales[0]!r}")
    return scales


def _check_swap_every(name: str, value) -> int:
    return integer(name, value, low=1)


def _check_factor(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ParameterTypeError(name, f"{name} must be a real number in [1, inf], got {type(value).__name__}")
    if value == np.inf:
        return math.inf
    return real(name, value, 1.0)


def _check_energy_noise(name: str, value) -> float:
    return real(name, value, 0.0)


def _ladder(options: dict) -> np.ndarray:
    ladder = options["ladder"]
    if isinstance(ladder, np.ndarray):
        return ladder
    return temperature_ladder(options["n_particles"], ladder)


def _check(options: dict, target) -> dict:
    n = options["n_particles"]
    ladder = options["ladder"]
    if isinstance(ladder, np.ndarray) and ladder.size != n:
        raise ParameterError(
            "ladder", f"ladder holds {ladder.size} temperatures and n_particles = {n}: one temperature per replica"
        )
    scales = options["step_scales"]
    if scales is not None and scales.size != n:
        raise ParameterError(
            "step_scales", f"step_scales holds {scales.size} values and n_particles = {n}: one per replica"
        )
    if np.any(target.grad_noise_cov != 0):
        raise ParameterError(
            "target",
            f"target {target.name!r} emulates gradient noise (grad_noise_cov): resgld does not draw it for each "
            "replica; use the target without it, or one whose gradient draws minibatches",
        )
    return options


def _constants(options: dict) -> Constants:
    n = options["n_particles"]
    scales = options["step_scales"]
    factor = options["correction_factor"]
    sigma2 = options["energy_noise"]
    return Constants(
        np.ascontiguousarray(_ladder(options), dtype=np.float64),
        np.ones(n) if scales is None else np.ascontiguousarray(scales, dtype=np.float64),
        int(options["swap_every"]),
        0.0 if math.isinf(factor) else 1.0 / factor,
        math.sqrt(sigma2),
        sigma2,
    )


def _noise(block, target, options):
    # 2 alpha_k T_k per coordinate: the cold replica's; the step scales it by s_p tau_p for replica p
    d = target.dim
    return dynamics.sgld_noise(block.step_size, block.temperature, np.zeros((d, d)))


def cold_draws(idata) -> np.ndarray:
    """The draws of the chain at the target's temperature, shape ``(chain, draw, d)``: particle 0.

    ``chain`` runs over the ensembles (ladders) of the run.
    """
    theta = idata["posterior"]["theta"]
    if "particle" not in theta.dims:
        raise ParameterError("idata", "cold_draws reads a resgld result (its draws have a particle axis)")
    return np.asarray(theta.isel(particle=0).values)


def swap_rates(idata) -> dict[str, np.ndarray]:
    """Acceptance rates of the swaps over the run, per ensemble, from the last kept draw's statistics.

    Returns
    -------
    dict
        ``"all"``: accepted over tested swaps of every adjacent pair; ``"cold"``: the same for the
        pair ``(0, 1)`` (tested once per swap event, ``swap_attempts / (L - 1)`` times).
    """
    stats = idata["sample_stats"]
    attempts = np.asarray(stats["swap_attempts"].values[:, -1], dtype=float)
    n_pairs = idata["posterior"]["theta"].sizes["particle"] - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return {
            "all": np.asarray(stats["swaps"].values[:, -1]) / attempts,
            "cold": np.asarray(stats["cold_swaps"].values[:, -1]) / (attempts / n_pairs),
        }


def step_limit(target, options):
    """``2 / (L min_p s_p)``: beyond it every rung's SGLD step expands (module docs); necessary."""
    scales = options["step_scales"]
    low = 1.0 if scales is None else float(np.min(scales))
    return curvature_limit(target, 2.0 / low, f"step_size * min_p(s_p) * L < 2, min_p s_p = {low:g}")


RESGLD = Algorithm(
    name="resgld",
    summary="replica-exchange SGLD: one SGLD chain per temperature of a ladder, adjacent rungs swap positions",
    coupling=INTERACTING,
    state=("theta",),
    options={
        "ladder": Option(
            10.0,
            _check_ladder,
            "the temperatures tau_p, one per replica: strictly increasing from 1; or a number > 1, the top of a "
            "geometric ladder from 1",
        ),
        "step_scales": Option(
            None, _check_step_scales, "replica p's step is step_scales[p] * step_size (starting at 1; default all 1)"
        ),
        "swap_every": Option(1, _check_swap_every, "test swaps every swap_every steps (an int >= 1)"),
        "correction_factor": Option(
            1.0,
            _check_factor,
            "F in [1, inf]: the swap test subtracts c * energy variance / F (1: unbiased; inf: no correction)",
        ),
        "energy_noise": Option(
            0.0, _check_energy_noise, "variance >= 0 of the Gaussian noise emulated on each energy a swap test reads"
        ),
    },
    units="cyclical paper: replica p drifts s_p * step_size * grad U, noise variance 2 * s_p * step_size * T * tau_p",
    step=step,
    constants=_constants,
    noise=_noise,
    check=_check,
    stats=("swap_attempts", "swaps", "cold_swaps", "steps"),
    step_limit=step_limit,
    # the hottest rung's spread sets how far a healthy replica goes
    temperature_factor=lambda options: float(np.max(_ladder(options))),
    asymptotically_exact=True,
    references="Deng, Feng, Gao, Liang and Lin (2020), §2, §3 and Algorithm 1; Ceperley and Dewing (1999)",
    potential=True,
)

METHOD = Method(
    "resgld",
    RESGLD,
    constant_schedule,
    CONSTANT_OPTIONS,
    "replica-exchange SGLD: n_particles replicas at the temperatures of `ladder`; particle 0 is at T = 1",
    "Deng, Feng, Gao, Liang and Lin (2020), Non-convex learning via replica exchange stochastic gradient MCMC",
    example={"step_size": 0.05, "ladder": 4.0, "target": "standard_gaussian"},
)

"""Synthetic results of "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning".

Figure 1 (cyclical eq. 2 against decreasing eq. 1 step sizes), Figures 2 and 5 (SGLD and
cSGLD densities on the 25-Gaussian mixture, 4 parallel chains and a single chain, §5.1 and
App. A.1) and Table 4 (mode coverage over 10 runs, App. A.1). Every function returns data;
``paper_figures/`` draws and writes.

Two settings (:ref:`theory-mixture-25` has the table; :data:`SETTINGS` holds them):

``"paper"``
    As printed in §5.1: cSGLD with ``alpha_0 = 0.09``, ``M = 30``, ``beta = 1/4``; SGLD
    with ``alpha_k = 0.05 k^(-0.55)`` (the paper writes ``alpha_k ∝ 0.05 k^(-0.55)``; the
    constant of proportionality is taken as 1). The paper states neither the gradient
    noise nor the initialisation. We use the reference code's: exact gradient plus
    ``N(0, I)`` noise with the correction of :ref:`theory-sgld` (``noise_correction=True``), and
    initial points uniform on ``[-10, 10]^2``. The two settings then differ only in their
    schedules. With the correction the total noise of a sampling step is exactly
    ``2 alpha_k``, so sampling steps follow the same law as with exact gradients. Only the
    exploration (SGD) steps carry the extra ``alpha_k^2`` gradient noise.
``"reference"``
    The authors' MATLAB demo (ruqizhang/csgmcmc): cSGLD with ``alpha_0 = 0.07``, ``M = 30``,
    no exploration stage (``beta = 0``), draws kept after the first 50 steps of each cycle
    (``skip_per_cycle = 50``); SGLD with 0.043 for 500 steps, then ``0.043 (t-500)^(-0.55)``;
    gradient noise ``V = I`` with the correction; initial points ``U([-10, 10]^2)``.

Both use ``K = 50 000`` steps, so ``K mod M != 0``: ``L_c = ceil(K/M) = 1667`` and the 30th
cycle is cut to 1657 steps (:ref:`theory-schedules`, :ref:`erratum-mixture25-recipe`).

Mode coverage ([cSG] App. A.1): a mode is covered when more than ``n-bar = 100`` draws lie
within ``r = 0.25`` of its centre. The paper does not say which draws feed the metric. Here
it is every collected draw of every chain, pooled: every SGLD iterate, and every cSGLD
sampling-stage iterate (after the skipped steps in the reference setting). There is no
burn-in and no thinning.

Seeds: one experiment ``seed``. Run ``i`` with ``n_chains`` chains uses
``run_seeds(seed, n_runs, n_chains)[i]`` (a ``SeedSequence`` keyed by ``n_chains``). SGLD
and cSGLD share a run's seed, so within a run they start from the same points (a paired
comparison), and so do the two settings. Single-chain and parallel runs use different
seeds. Figures 2 and 5 show run 0 of Table 4's parallel and single-chain runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .. import schedules
from .._validate import integer
from ..diagnostics import ball_probability, expected_mode_coverage, mode_counts
from ..sampling import sample
from ..sweep import Cell, compute
from ..targets import Target, mixture_25
from ..theory.convergence import cyclical_sum, cyclical_sum_squares
from ._common import mean_sd_se, progress_bar

__all__ = [
    "PAPER",
    "N_STEPS",
    "N_RUNS",
    "N_PARALLEL",
    "RADIUS",
    "THRESHOLD",
    "ALGORITHMS",
    "PAPER_TABLE4",
    "DRAWS_USED",
    "Setting",
    "SETTINGS",
    "get_setting",
    "run_seeds",
    "ScheduleCurves",
    "schedule_curves",
    "MethodRun",
    "DensityComparison",
    "density_comparison",
    "CoverageResult",
    "CoverageTable",
    "mode_coverage_table",
]

PAPER = "Cyclical Stochastic Gradient MCMC for Bayesian Deep Learning"
N_STEPS = 50_000
N_RUNS = 10
N_PARALLEL = 4
RADIUS = 0.25
THRESHOLD = 100

#: Table 4's rows: (key, label, method, number of chains pooled).
ALGORITHMS = (
    ("sgld", "SGLD", "sgld", 1),
    ("csgld", "cSGLD", "csgld", 1),
    ("parallel_sgld", "Parallel SGLD", "sgld", N_PARALLEL),
    ("parallel_csgld", "Parallel cSGLD", "csgld", N_PARALLEL),
)

#: The published Table 4 (mean ± standard error over 10 runs), for comparison only.
PAPER_TABLE4 = {
    "sgld": (1.8, 0.13),
    "csgld": (6.7, 0.52),
    "parallel_sgld": (18.0, 0.47),
    "parallel_csgld": (24.4, 0.22),
}

DRAWS_USED = (
    "every collected draw of every chain, pooled: every SGLD iterate; every cSGLD "
    "sampling-stage iterate (after skip_per_cycle steps of each cycle where set); no burn-in, no thinning"
)


@dataclass(frozen=True)
class Setting:
    """One configuration of the 25-Gaussian experiment ([cSG] §5.1; :ref:`theory-mixture-25`).

    Attributes
    ----------
    name, title : str
        Short key and a one-line description.
    step_size, n_cycles, explore_fraction, skip_per_cycle
        cSGLD: ``alpha_0``, ``M``, ``beta`` and the sampling steps not collected at the
        start of each cycle ([cSG] eq. 2, Algorithm 1).
    sgld_scale, sgld_gamma, sgld_hold
        SGLD's decreasing schedule ``a (k - hold)^(-gamma)`` after ``hold`` steps at ``a``
        ([cSG] eq. 1 with ``b = 0``).
    grad_noise : float
        Variance ``s^2`` of the additive ``N(0, s^2 I)`` gradient noise (0: exact).
    noise_correction : bool
        Reduce the injected noise so the total is exactly ``2 alpha_k`` (:ref:`theory-sgld`).
    provenance : str
        Where the numbers come from.
    """

    name: str
    title: str
    step_size: float
    n_cycles: int
    explore_fraction: float
    skip_per_cycle: int
    sgld_scale: float
    sgld_gamma: float
    sgld_hold: int
    grad_noise: float
    noise_correction: bool
    provenance: str

    def target(self) -> Target:
        """The 25-Gaussian mixture, with this setting's gradient noise."""
        target = mixture_25()
        return target.with_gradient_noise(self.grad_noise) if self.grad_noise else target

    def csgld_schedule(self, n_steps: int) -> schedules.Schedule:
        """The cosine schedule of cSGLD ([cSG] eq. 2) with its exploration stage (Algorithm 1)."""
        return schedules.cyclical(
            self.step_size,
            n_steps,
            n_cycles=self.n_cycles,
            explore_fraction=self.explore_fraction,
            skip_per_cycle=self.skip_per_cycle,
        )

    def sgld_schedule(self, n_steps: int) -> schedules.Schedule:
        """SGLD's decreasing schedule ([cSG] eq. 1)."""
        return schedules.polynomial_decay(self.sgld_scale, self.sgld_gamma, n_steps, hold=self.sgld_hold)

    def schedule(self, method: str, n_steps: int) -> schedules.Schedule:
        """The schedule of ``method`` (``"sgld"`` or ``"csgld"``)."""
        if method == "csgld":
            return self.csgld_schedule(n_steps)
        if method == "sgld":
            return self.sgld_schedule(n_steps)
        raise ValueError(f"method must be 'sgld' or 'csgld', got {method!r}")

    def describe_sgld(self) -> str:
        """SGLD's schedule as a formula (``$...$`` maths: Markdown and matplotlib both typeset it)."""
        decay = f"${self.sgld_scale:g}\\,k^{{-{self.sgld_gamma:g}}}$"
        if self.sgld_hold:
            a, h = f"{self.sgld_scale:g}", self.sgld_hold
            decay = f"${a}$ for {h} steps, then ${a}\\,(k-{h})^{{-{self.sgld_gamma:g}}}$"
        return decay

    def describe_csgld(self) -> str:
        """The schedule of cSGLD in words (``$...$`` maths)."""
        text = f"$\\alpha_0 = {self.step_size:g}$, $M = {self.n_cycles}$, $\\beta = {self.explore_fraction:g}$"
        if self.skip_per_cycle:
            text += f", first {self.skip_per_cycle} steps of each cycle not collected"
        return text

    def describe_noise(self) -> str:
        """The gradient noise in words."""
        if not self.grad_noise:
            return "exact gradients"
        corr = " with the noise correction" if self.noise_correction else " (uncorrected)"
        cov = "I" if self.grad_noise == 1 else f"{self.grad_noise:g} I"
        return f"exact gradient + $N(0, {cov})$ noise{corr}"


SETTINGS: dict[str, Setting] = {
    "paper": Setting(
        name="paper",
        title=r"paper (§5.1): $\alpha_0 = 0.09$, $\beta = 1/4$; SGLD $0.05\,k^{-0.55}$",
        step_size=0.09,
        n_cycles=30,
        explore_fraction=0.25,
        skip_per_cycle=0,
        sgld_scale=0.05,
        sgld_gamma=0.55,
        sgld_hold=0,
        grad_noise=1.0,
        noise_correction=True,
        provenance=(
            "schedules as printed in [cSG] §5.1; gradient noise and initial box, which the paper does not state, "
            "taken from the reference code so that the two settings differ only in their schedules"
        ),
    ),
    "reference": Setting(
        name="reference",
        title=r"reference code: $\alpha_0 = 0.07$, no exploration, skip 50; SGLD $0.043$, hold 500",
        step_size=0.07,
        n_cycles=30,
        explore_fraction=0.0,
        skip_per_cycle=50,
        sgld_scale=0.043,
        sgld_gamma=0.55,
        sgld_hold=500,
        grad_noise=1.0,
        noise_correction=True,
        provenance="the authors' MATLAB 25-Gaussian demo (ruqizhang/csgmcmc)",
    ),
}


def get_setting(setting: str | Setting) -> Setting:
    """Return ``setting`` itself or the registered setting of that name."""
    if isinstance(setting, Setting):
        return setting
    try:
        return SETTINGS[setting]
    except (KeyError, TypeError):
        raise ValueError(f"unknown setting {setting!r}; known settings: {', '.join(SETTINGS)}") from None


def run_seeds(seed: int, n_runs: int, n_chains: int) -> np.ndarray:
    """Seeds of the runs of an experiment, derived deterministically from ``seed``.

    ``SeedSequence(seed, spawn_key=(n_chains,)).generate_state(n_runs)``: run ``i``'s seed
    does not depend on ``n_runs``, and runs with different numbers of chains get
    independent seeds.

    Returns
    -------
    ndarray of int64, shape (n_runs,)
    """
    seed = integer("seed", seed, low=0)
    n_runs = integer("n_runs", n_runs, low=1)
    n_chains = integer("n_chains", n_chains, low=1)
    state = np.random.SeedSequence(seed, spawn_key=(n_chains,)).generate_state(n_runs, dtype=np.uint32)
    return state.astype(np.int64)


# --------------------------------------------------------------------------- Figure 1


@dataclass
class ScheduleCurves:
    """Step sizes of Figure 1: the cyclical schedule (eq. 2) against a decreasing one (eq. 1).

    Attributes
    ----------
    step : ndarray
        Iterations ``k = 1..K``.
    cyclical, decreasing : ndarray
        ``alpha_k`` of cSGLD and of SGLD.
    exploration : ndarray of bool
        Whether step ``k`` of the cyclical schedule is in the exploration stage (Figure 1's
        dashed segments).
    cycle : ndarray of int
        0-based cycle of each step.
    n_steps, n_cycles, cycle_length, n_explore, n_sample, last_cycle_length : int
        ``K``, the cycles present, ``L_c = ceil(K/M)``, exploration and sampling steps of
        a full cycle, and the length of the last (possibly truncated) cycle.
    step_size, explore_fraction : float
        ``alpha_0`` and ``beta``.
    sum_cyclical, sum_decreasing, sum_sq_cyclical, sum_sq_decreasing : float
        ``sum_k alpha_k`` (the "diffusion time" of [cSG] §4) and ``sum_k alpha_k^2``.
    paper_sum_cyclical, paper_sum_sq_cyclical : float
        The paper's ``K alpha_0 / 2`` (§4) and ``3 alpha_0^2 K / 8`` (App. C, eq. 17).
    full_sum_cyclical, full_sum_sq_cyclical : float
        :ref:`theory-schedules`'s exact sums ``alpha_0 (K' + M)/2`` and ``alpha_0^2 (3K'/8 + M/2)`` for
        ``K' = M L_c``, the run without the truncation of the last cycle.
    sgld, csgld : str
        The schedules in words.
    """

    step: np.ndarray
    cyclical: np.ndarray
    decreasing: np.ndarray
    exploration: np.ndarray
    cycle: np.ndarray
    n_steps: int
    n_cycles: int
    cycle_length: int
    n_explore: int
    n_sample: int
    last_cycle_length: int
    step_size: float
    explore_fraction: float
    sum_cyclical: float
    sum_decreasing: float
    sum_sq_cyclical: float
    sum_sq_decreasing: float
    paper_sum_cyclical: float
    paper_sum_sq_cyclical: float
    full_sum_cyclical: float
    full_sum_sq_cyclical: float
    sgld: str
    csgld: str


def schedule_curves(setting: str | Setting = "paper", n_steps: int = N_STEPS) -> ScheduleCurves:
    """The two step-size schedules of [cSG] Figure 1, with the settings of §5.1.

    Figure 1 of the paper is an illustration without numbers. We draw it with the
    25-Gaussian settings: the cosine schedule of eq. 2 (``alpha_0``, ``M``, ``beta``) and
    SGLD's ``a k^(-gamma)`` of eq. 1.

    Parameters
    ----------
    setting : str or Setting
        ``"paper"`` (default) or ``"reference"``.
    n_steps : int
        ``K``.
    """
    s = get_setting(setting)
    cyc = s.csgld_schedule(n_steps)
    dec = s.sgld_schedule(n_steps)
    k = np.arange(1, cyc.n_steps + 1)
    length = schedules.cycle_length(cyc.n_steps, s.n_cycles)
    n_explore = schedules.exploration_steps(length, s.explore_fraction)
    full_k = s.n_cycles * length
    return ScheduleCurves(
        step=k,
        cyclical=np.array(cyc.step_size),
        decreasing=np.array(dec.step_size),
        exploration=np.array(cyc.stage == schedules.EXPLORATION),
        cycle=np.array(cyc.cycle),
        n_steps=cyc.n_steps,
        n_cycles=cyc.n_cycles,
        cycle_length=length,
        n_explore=n_explore,
        n_sample=length - n_explore,
        last_cycle_length=int(np.sum(cyc.cycle == cyc.cycle[-1])),
        step_size=s.step_size,
        explore_fraction=s.explore_fraction,
        sum_cyclical=float(np.sum(cyc.step_size)),
        sum_decreasing=float(np.sum(dec.step_size)),
        sum_sq_cyclical=float(np.sum(cyc.step_size**2)),
        sum_sq_decreasing=float(np.sum(dec.step_size**2)),
        paper_sum_cyclical=cyc.n_steps * s.step_size / 2.0,
        paper_sum_sq_cyclical=3.0 * s.step_size**2 * cyc.n_steps / 8.0,
        full_sum_cyclical=cyclical_sum(s.step_size, s.n_cycles, full_k),
        full_sum_sq_cyclical=cyclical_sum_squares(s.step_size, s.n_cycles, full_k),
        sgld=s.describe_sgld(),
        csgld=s.describe_csgld(),
    )


# --------------------------------------------------------------------------- Figures 2 and 5


@dataclass
class MethodRun:
    """One run of SGLD or cSGLD (``n_chains`` chains pooled) and its mode statistics.

    Attributes
    ----------
    method : str
        ``"sgld"`` or ``"csgld"``.
    n_chains, seed, n_draws : int
        Chains pooled, the seed given to :func:`sgsim.sample`, and the number of pooled
        draws that feed the histogram and the metric.
    counts : ndarray of int, shape (25,)
        Draws within ``radius`` of each mode centre.
    coverage : int
        Modes with more than ``threshold`` such draws ([cSG] App. A.1).
    visited : int
        Modes with at least one such draw.
    init, final : ndarray, shape (n_chains, 2)
        Initial and final positions of the chains.
    histogram : ndarray, shape (bins, bins)
        Density estimate on the common grid (draws per unit area over all draws; ``[x, y]``
        indexing as :func:`numpy.histogram2d`).
    outside : float
        Fraction of the draws outside the grid.
    sampling_time_s : float
        Sampling time reported by :func:`sgsim.sample` (compilation excluded).
    """

    method: str
    n_chains: int
    seed: int
    n_draws: int
    counts: np.ndarray
    coverage: int
    visited: int
    init: np.ndarray
    final: np.ndarray
    histogram: np.ndarray
    outside: float
    sampling_time_s: float


@dataclass
class DensityComparison:
    """Figures 2 and 5 of [cSG]: the target and the SGLD and cSGLD densities on one grid.

    Attributes
    ----------
    setting : Setting
    n_steps, n_chains, seed, run_seed : int
        Steps per chain, chains pooled, experiment seed and the run's seed.
    edges : ndarray, shape (bins + 1,)
        Bin edges, the same on both axes.
    target_density : ndarray, shape (bins, bins)
        The exact mixture density at the bin centres (``[x, y]`` indexing).
    centres : ndarray, shape (25, 2)
        Mode centres.
    radius, threshold : float, int
        The mode-coverage parameters.
    runs : dict
        ``"sgld"`` and ``"csgld"`` -> :class:`MethodRun`.
    oracle : dict
        Method -> ``(mean, sd)`` of the coverage of the same number of exact iid draws.
    """

    setting: Setting
    n_steps: int
    n_chains: int
    seed: int
    run_seed: int
    edges: np.ndarray
    target_density: np.ndarray
    centres: np.ndarray
    radius: float
    threshold: int
    runs: dict = field(default_factory=dict)
    oracle: dict = field(default_factory=dict)


def _run(s: Setting, target: Target, method: str, n_steps: int, n_chains: int, seed: int):
    return sample(
        target,
        method,
        schedule=s.schedule(method, n_steps),
        n_chains=n_chains,
        seed=int(seed),
        noise_correction=s.noise_correction,
    )


def density_comparison(
    setting: str | Setting = "paper",
    n_chains: int = N_PARALLEL,
    n_steps: int = N_STEPS,
    seed: int = 0,
    progress: bool = False,
    bins: int = 240,
    extent: float = 6.0,
    radius: float = RADIUS,
    threshold: int = THRESHOLD,
) -> DensityComparison:
    """Estimated densities of SGLD and cSGLD on the 25-Gaussian mixture ([cSG] Figures 2, 5).

    Figure 2 pools 4 parallel chains of 50k iterations each (the paper: SGLD "has only
    discovered 4 of the 25 modes", cSGLD "has fully explored the distribution"); Figure 5
    is a single chain (SGLD "only discovered one of the 25 modes"). The run is run 0 of
    :func:`mode_coverage_table` with the same ``seed`` and ``n_chains``.

    Parameters
    ----------
    setting : str or Setting
        ``"paper"`` or ``"reference"`` (see the module docstring).
    n_chains : int
        Chains per method, pooled (4 for Figure 2, 1 for Figure 5).
    n_steps : int
        Iterations per chain (50 000 in the paper).
    seed : int
        Experiment seed; the run's seed is ``run_seeds(seed, 1, n_chains)[0]``.
    progress : bool
        Show a progress bar over the two methods.
    bins, extent : int, float
        The histograms use ``bins x bins`` cells on ``[-extent, extent]^2``.
    radius, threshold : float, int
        Mode-coverage parameters ``r`` and ``n-bar``.
    """
    s = get_setting(setting)
    n_chains = integer("n_chains", n_chains, low=1)
    bins = integer("bins", bins, low=2)
    run_seed = int(run_seeds(seed, 1, n_chains)[0])
    target = s.target()
    edges = np.linspace(-extent, extent, bins + 1)
    mid = 0.5 * (edges[1:] + edges[:-1])
    gx, gy = np.meshgrid(mid, mid, indexing="ij")
    dens = np.exp(target.log_density(np.stack([gx.ravel(), gy.ravel()], axis=1))).reshape(bins, bins)
    area = (edges[1] - edges[0]) ** 2
    assert target.mode_centres is not None and target.mode_sd is not None  # a Gaussian mixture knows both
    p_ball = ball_probability(radius, float(target.mode_sd[0]))
    out = DensityComparison(
        setting=s,
        n_steps=int(n_steps),
        n_chains=n_chains,
        seed=int(seed),
        run_seed=run_seed,
        edges=edges,
        target_density=dens,
        centres=target.mode_centres.copy(),
        radius=float(radius),
        threshold=int(threshold),
    )
    with progress_bar(2, f"Figure {'2' if n_chains > 1 else '5'} ({s.name})", progress) as bar:
        for method in ("sgld", "csgld"):
            idata = _run(s, target, method, n_steps, n_chains, run_seed)
            x = idata.posterior["theta"].values.reshape(-1, 2)
            x = x[np.all(np.isfinite(x), axis=1)]
            hist, _, _ = np.histogram2d(x[:, 0], x[:, 1], bins=[edges, edges])
            counts = mode_counts(x, out.centres, radius)
            out.runs[method] = MethodRun(
                method=method,
                n_chains=n_chains,
                seed=run_seed,
                n_draws=int(x.shape[0]),
                counts=counts,
                coverage=int(np.sum(counts > threshold)),
                visited=int(np.sum(counts > 0)),
                init=np.array(idata.constant_data["init"].values),
                final=np.array(idata.constant_data["final_theta"].values),
                histogram=hist / (x.shape[0] * area),
                outside=float(1.0 - hist.sum() / x.shape[0]),
                sampling_time_s=float(idata.attrs["sampling_time_s"]),
            )
            out.oracle[method] = expected_mode_coverage(x.shape[0], len(out.centres), p_ball, threshold)
            bar.update(1)
    return out


# --------------------------------------------------------------------------- Table 4


@dataclass
class CoverageResult:
    """Mode coverage of one row of Table 4 over independent runs.

    Attributes
    ----------
    key, label, method : str
        Row key (``"parallel_csgld"``), the paper's label and the sampler.
    n_chains : int
        Chains pooled per run.
    seeds : ndarray of int
        The seed of each run.
    coverage : ndarray of int
        Covered modes in each run.
    n_draws : ndarray of int
        Pooled draws feeding the metric in each run.
    mean, sd, se : float
        Mean, sample standard deviation (ddof 1) and standard error ``sd / sqrt(n_runs)``.
    oracle_mean, oracle_sd : float
        Coverage of ``n_draws`` exact iid draws (binomial oracle, :ref:`theory-mixture-25`).
    elapsed_s : float
        Wall time of the table's sweep, divided among its rows (the runs may have run in
        parallel, on other machines: a cell holds results only, never timings, so that the
        same sweep gives the same bits wherever it runs).
    """

    key: str
    label: str
    method: str
    n_chains: int
    seeds: np.ndarray
    coverage: np.ndarray
    n_draws: np.ndarray
    mean: float
    sd: float
    se: float
    oracle_mean: float
    oracle_sd: float
    elapsed_s: float


@dataclass
class CoverageTable:
    """[cSG] Table 4 for one setting.

    Attributes
    ----------
    setting : Setting
    n_steps, n_runs, seed : int
        Iterations per chain, runs per row, experiment seed.
    radius, threshold : float, int
        ``r`` and ``n-bar``.
    ball_probability : float
        ``P(|x - mu_i| < r)`` under component ``i`` (0.64713 for r = 0.25).
    draws_used : str
        Which draws feed the metric.
    rows : dict
        Row key -> :class:`CoverageResult`, in the order of :data:`ALGORITHMS`.
    """

    setting: Setting
    n_steps: int
    n_runs: int
    seed: int
    radius: float
    threshold: int
    ball_probability: float
    draws_used: str
    rows: dict = field(default_factory=dict)


def coverage_run(
    setting: str, method: str, n_steps: int, n_chains: int, radius: float, threshold: int, seed: int
) -> dict[str, int]:
    """One run of a Table 4 row (a sweep cell): covered modes and the pooled draws feeding the metric."""
    s = get_setting(setting)
    target = s.target()
    idata = _run(s, target, method, n_steps, n_chains, seed)
    counts = mode_counts(idata, target.mode_centres, radius)
    x = idata.posterior["theta"].values
    return {
        "coverage": int(np.sum(counts > threshold)),
        "n_draws": int(np.sum(np.all(np.isfinite(x), axis=-1))),
    }


def mode_coverage_table(
    setting: str | Setting = "paper",
    n_runs: int = N_RUNS,
    n_steps: int = N_STEPS,
    seed: int = 0,
    progress: bool = False,
    radius: float = RADIUS,
    threshold: int = THRESHOLD,
    n_parallel: int = N_PARALLEL,
    executor: str | None = None,
    store=None,
    n_workers: int | None = None,
    scheduler: str | None = None,
) -> CoverageTable:
    """Mode coverage of SGLD, cSGLD and their parallel versions ([cSG] App. A.1, Table 4).

    Each row is ``n_runs`` independent runs. The paper reports mean ± standard error over
    10 runs of 50k iterations per chain, with 4 chains pooled in the parallel rows. The runs
    are the cells of a sweep (:func:`coverage_run`, :mod:`sgsim.sweep`): ``executor``,
    ``n_workers`` and ``scheduler`` say where they run (the table is the same bits wherever),
    and a ``store`` directory keeps finished runs so that an interrupted table resumes.

    Parameters
    ----------
    setting : str or Setting
        ``"paper"`` or ``"reference"`` (see the module docstring).
    n_runs : int
        Independent runs per row (10 in the paper).
    n_steps : int
        Iterations per chain (50 000).
    seed : int
        Experiment seed; run seeds come from :func:`run_seeds` and are recorded.
    progress : bool
        Show a progress bar over the runs.
    radius, threshold : float, int
        ``r`` (0.25) and ``n-bar`` (100).
    n_parallel : int
        Chains in the parallel rows (4).
    executor, store, n_workers, scheduler
        See :func:`sgsim.sweep.compute`: ``executor=None`` runs where the enclosing
        :func:`sgsim.sweep.executing` says (serially by default); ``store=None`` keeps
        nothing between calls.
    """
    s = get_setting(setting)
    n_runs = integer("n_runs", n_runs, low=1)
    n_parallel = integer("n_parallel", n_parallel, low=2)
    target = s.target()
    centres = target.mode_centres
    assert centres is not None and target.mode_sd is not None  # a Gaussian mixture knows both
    p_ball = ball_probability(radius, float(target.mode_sd[0]))
    table = CoverageTable(
        setting=s,
        n_steps=int(n_steps),
        n_runs=n_runs,
        seed=int(seed),
        radius=float(radius),
        threshold=int(threshold),
        ball_probability=p_ball,
        draws_used=DRAWS_USED,
    )
    rows = [(key, label, method, n_parallel if chains > 1 else 1) for key, label, method, chains in ALGORITHMS]
    if SETTINGS.get(s.name) is not s:
        raise ValueError(f"setting {s.name!r} is not registered in SETTINGS: the runs rebuild it by name")
    cells = [
        Cell(coverage_run, dict(setting=s.name, method=method, n_steps=int(n_steps), n_chains=chains,
                                radius=float(radius), threshold=int(threshold)), int(run_seed))
        for _, _, method, chains in rows
        for run_seed in run_seeds(seed, n_runs, chains)
    ]  # fmt: skip
    t0 = time.perf_counter()
    results = compute(cells, store, executor, n_workers=n_workers, scheduler=scheduler, progress=progress)
    elapsed = time.perf_counter() - t0
    for r, (key, label, method, chains) in enumerate(rows):
        part = results[r * n_runs : (r + 1) * n_runs]
        cov = np.array([int(x["coverage"]) for x in part], dtype=np.int64)
        draws = np.array([int(x["n_draws"]) for x in part], dtype=np.int64)
        mean, sd, se = mean_sd_se(cov)
        o_mean, o_sd = expected_mode_coverage(int(draws[0]), len(centres), p_ball, threshold)
        table.rows[key] = CoverageResult(
            key=key,
            label=label,
            method=method,
            n_chains=chains,
            seeds=run_seeds(seed, n_runs, chains),
            coverage=cov,
            n_draws=draws,
            mean=mean,
            sd=sd,
            se=se,
            oracle_mean=o_mean,
            oracle_sd=o_sd,
            elapsed_s=elapsed / len(rows),
        )
    return table

"""Tables 2 and 3 of "Stochastic Gradient MCMC with Repulsive Forces" (§4.1): SGLD with L parallel
chains against SGLD+R with L interacting particles on the mixture of exponentials (L = 10) and
the 3x3 mixture of Gaussians (L = 20).

The paper's protocol: 500 burn-in iterations, then 500 iterations keeping every 10th (50
snapshots of L particles); the error of ``E[X]`` and the effective sample size (ESS, ESS per
second). It gives no step size, bandwidth, initialisation or number of runs. Ours, fixed before
any result was seen and the same for both samplers:

- the same step ``epsilon`` for both, and no ``1/L`` in SGLD+R's kernel sums, so that the two
  differ only in the diffusion (``D = I`` for SGLD, ``D = K`` for SGLD+R: the paper's framing);
  ``epsilon = 0.01`` on the 3x3 mixture (stable for ``D = K`` with up to 20 particles in one
  mode: ``0.01 * 20 / 0.1 = 2``) and ``0.05`` on the exponential mixture;
- the median bandwidth (with its part of ``Gamma``), particles from the target's box;
- the exponential mixture is sampled in ``y = log z``; its ``E[X]`` is ``E z = 14/9``, estimated
  by the mean of ``exp(y)``. The 3x3 mixture's ``E[X] = 0``; its error is the Euclidean norm of
  the estimated mean.

ESS of an ensemble: the particles of one run are not independent chains, so ArviZ's
multi-chain ESS (particles as chains, 50 draws each) is reported as "pooled" with that caveat,
beside the mean over particles of each particle's single-chain ESS. Neither sees the
correlation between particles that the repulsion creates (it makes the pooled estimate better
than independent chains would); the replication ESS does: the target's variance divided by
the variance of the run's estimate over independent runs, ``Var(X) / Var(mean)``, the number
of independent draws that would give the same spread.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import targets
from .._validate import ParameterError
from ..sampling import sample
from ..sweep import Cell, compute

__all__ = [
    "PAPER_TABLE2",
    "PAPER_TABLE3",
    "SETTINGS",
    "SyntheticRuns",
    "run_synthetic",
    "synthetic_cell",
    "moments_cell",
]

#: [Rep] Table 2: (ESS SGLD, ESS SGLD+R, ESS/s SGLD, ESS/s SGLD+R)
PAPER_TABLE2 = {"MoE": (44.3, 59.1, 51.5, 61.0), "MoG": (151.3, 169.5, 36.3, 32.5)}
#: [Rep] Table 3: error of E[X] (SGLD, SGLD+R)
PAPER_TABLE3 = {"MoE": (0.39, 0.14), "MoG": (1.42, 1.19)}

#: name -> (target factory, particles, step size)
SETTINGS = {
    "MoE": (targets.exponential_mixture, 10, 0.05),
    "MoG": (targets.mixture_3x3, 20, 0.01),
}
BURN_IN, N_KEPT_STEPS, THIN = 500, 500, 10


@dataclass
class SyntheticRuns:
    """Per-run results of one sampler on one target.

    Attributes
    ----------
    name, method : str
    error : ndarray
        Error of ``E[X]`` per run.
    estimate : ndarray
        The run's estimate of ``E[X]`` (the first coordinate for the 3x3 mixture).
    ess_pooled, ess_particle : ndarray
        ArviZ bulk ESS per run: particles as chains (pooled), and the mean of each particle's own.
    seconds : ndarray
        Sampling time per run.
    target_var : float
        Variance of the quantity whose mean is estimated (``z``, or the first coordinate).
    """

    name: str
    method: str
    error: np.ndarray
    estimate: np.ndarray
    ess_pooled: np.ndarray
    ess_particle: np.ndarray
    seconds: np.ndarray
    target_var: float

    @property
    def ess_replication(self) -> float:
        """``Var(X) / Var(estimate)`` over the runs."""
        return float(self.target_var / np.var(self.estimate, ddof=1))


def _quantity(name: str, theta: np.ndarray) -> np.ndarray:
    """The draws whose mean estimates E[X]: ``exp(y)`` for the exponential mixture, x for the 3x3."""
    return np.exp(theta[..., 0]) if name == "MoE" else theta


def synthetic_cell(name: str, method: str, seed: int, normalise: bool = False) -> dict:
    """One run of Tables 2-3 (a sweep cell): the estimate of ``E[X]``, its error and the ESS.

    ``seconds`` (the run's sampling time, for ESS per second) is the one result that differs
    from machine to machine; every other value is the same bits wherever the cell runs.
    ``normalise=True`` keeps SGLD+R's ``1/L`` (drift and noise divided by ``L``, the
    paper's eq. 8 as written): at the same step the particles then move ``L`` times more slowly,
    which is what the tables' comparison depends on.
    """
    import xarray as xr

    from ..results import ess

    factory, n_part, step = SETTINGS[name]
    target = factory()
    n_steps = BURN_IN + N_KEPT_STEPS
    if name == "MoE":
        truth = np.array([target.extras["raw_moment_z"](1)])
    else:
        truth = np.zeros(2)
    common = dict(step_size=step, seed=seed, burn_in=BURN_IN, thin=THIN, progress=False)
    if method == "sgld":
        res = sample(target, "sgld", n_steps, n_chains=n_part, **common)
        theta = res.posterior["theta"].values  # (L, 50, d): chains are the particles
    else:
        res = sample(target, method, n_steps, n_particles=n_part, normalise=bool(normalise), **common)
        theta = np.moveaxis(res.posterior["theta"].values[0], 1, 0)  # (L, 50, d)
    q = _quantity(name, theta)
    est = q.reshape(-1, q.shape[-1]).mean(axis=0) if q.ndim == 3 else np.array([q.mean()])
    first = q[..., 0] if q.ndim == 3 else q  # (L, 50)
    return {
        "error": float(np.linalg.norm(est - truth)),
        "estimate": float(est[0]),
        "pooled": float(ess(xr.Dataset({"q": (("chain", "draw"), first)}), "q", "bulk")),
        "particle": float(
            np.mean([ess(xr.Dataset({"q": (("chain", "draw"), first[p][None])}), "q", "bulk") for p in range(n_part)])
        ),
        "seconds": float(res.attrs["sampling_time_s"]),
    }


def run_synthetic(name: str, method: str, n_runs: int, seed: int, normalise: bool = False) -> SyntheticRuns:
    """``n_runs`` independent runs (seeds ``seed + r``) of ``"sgld"`` or ``"sgld_repulsive"``, as sweep cells.

    ``normalise=True`` runs SGLD+R with its ``1/L`` (see :func:`synthetic_cell`); SGLD has none.
    """
    if normalise and method == "sgld":
        raise ParameterError("normalise", "normalise=True applies to sgld_repulsive only (SGLD has no 1/L)")
    target = SETTINGS[name][0]()
    if name == "MoE":
        ez = target.extras["raw_moment_z"](1)
        target_var = target.extras["raw_moment_z"](2) - ez**2
    else:
        target_var = float(target.second_moment[0, 0])
    params: dict = {"name": name, "method": method}
    if normalise:  # only then: the cells without it keep their descriptions (and stored results)
        params["normalise"] = True
    cells = [Cell(synthetic_cell, params, seed + r) for r in range(n_runs)]
    runs = compute(cells)
    return SyntheticRuns(
        name=name,
        method=method,
        error=np.array([r["error"] for r in runs], dtype=float),
        estimate=np.array([r["estimate"] for r in runs], dtype=float),
        ess_pooled=np.array([r["pooled"] for r in runs], dtype=float),
        ess_particle=np.array([r["particle"] for r in runs], dtype=float),
        seconds=np.array([r["seconds"] for r in runs], dtype=float),
        target_var=float(target_var),
    )


def _snapshots(name: str, method: str, n_part: int, n_steps: int, seed: int, thin: int) -> np.ndarray:
    """The states after steps ``thin, 2 thin, ..., n_steps`` of one run: shape (snapshots, L, d).

    The run keeps every state and the slice picks the snapshots: ``sample(..., thin=thin)``
    would keep the states after steps ``1, 1 + thin, ...`` instead, which for Figure 5
    (``thin = n_steps``) is the state after the first step.

    With more particles than the setting's, both samplers take the step times ``L_setting / L``:
    SGLD+R's ``epsilon lambda_max(K)`` can reach ``epsilon L``, which the setting keeps stable.
    """
    factory, base, step = SETTINGS[name]
    step = step * min(1.0, base / n_part)
    target = factory()
    if method == "sgld":
        res = sample(target, "sgld", n_steps, n_chains=n_part, step_size=step, seed=seed, progress=False)
        return np.moveaxis(res.posterior["theta"].values, 0, 1)[thin - 1 :: thin]
    res = sample(target, method, n_steps, n_particles=n_part, normalise=False, step_size=step, seed=seed,
                 progress=False)  # fmt: skip
    return res.posterior["theta"].values[0][thin - 1 :: thin]


def moments_cell(n_part: int, method: str, n_steps: int, thin: int, seed: int) -> dict:
    """One run of Figures 3-4 (a sweep cell): running means of ``z`` and ``z^2``, shape (2, snapshots)."""
    z = np.exp(_snapshots("MoE", method, n_part, n_steps, seed, thin)[..., 0])  # (snapshots, L)
    counts = np.arange(1, z.shape[0] + 1) * z.shape[1]
    return {"estimates": np.stack([np.cumsum(z.sum(1)) / counts, np.cumsum((z**2).sum(1)) / counts])}


def running_moments(n_part: int, method: str, n_runs: int, seed: int, n_steps: int = 1000, thin: int = 10):
    """Running estimates of ``E z`` and ``E z^2`` on the exponential mixture ([Rep] Figures 3 and 4).

    For each run (a sweep cell, seed ``seed + r``), the mean of ``z = exp(y)`` and of ``z^2``
    over all particles of every ``thin``-th snapshot up to each iteration (no burn-in: the
    figures show the approach). With 100 particles the step is a tenth of the 10-particle one
    (see ``_snapshots``). Returns ``(iterations, estimates)`` with ``estimates`` of shape
    ``(n_runs, 2, snapshots)``.
    """
    params = {"n_part": n_part, "method": method, "n_steps": n_steps, "thin": thin}
    runs = compute([Cell(moments_cell, params, seed + r) for r in range(n_runs)])
    return np.arange(thin, n_steps + 1, thin), np.array([r["estimates"] for r in runs])


def final_particles(method: str, seed: int, n_steps: int = 1000) -> np.ndarray:
    """The 20 particles (or chains) of one run on the 3x3 mixture after ``n_steps`` ([Rep] Figure 5)."""
    return _snapshots("MoG", method, SETTINGS["MoG"][1], n_steps, seed, n_steps)[-1]

"""Diagnostics: mode coverage, moment errors, ESS and R-hat (through ArviZ), nested R-hat, cycle
weights, and the fluctuation-dissipation ratio of constant SGD.

The kernel Stein discrepancy is in :mod:`sgsim.stein`.

Nothing here runs a sampler: every function takes draws (arrays, or a result of
:func:`sgsim.sample`: an InferenceData under ArviZ 0.x, an xarray DataTree under ArviZ 1.x).
The chains a result marks as diverged are left out of every figure, with a ``RuntimeWarning``
naming them (:func:`healthy_draws`).
"""

from __future__ import annotations

import json
import warnings
from typing import NamedTuple

import numpy as np
from scipy import special, stats

from . import results as _results
from ._validate import ParameterError, finite_array, integer, positive_float, real
from .results import groups_of, is_result

__all__ = [
    "mode_counts",
    "mode_coverage",
    "ball_probability",
    "expected_mode_coverage",
    "moment_errors",
    "ess",
    "rhat",
    "nested_rhat",
    "NESTED_RHAT_THRESHOLD",
    "cycle_weights",
    "FluctuationDissipation",
    "fluctuation_dissipation",
    "draws_array",
    "healthy_draws",
]


def _needs_draws(draws, what: str) -> None:
    if is_result(draws) and "posterior" not in groups_of(draws):
        kept = "running moments" if "moments" in groups_of(draws) else "no draws"
        raise ValueError(
            f"{what} needs draws, and this result holds {kept} (storage={draws.attrs.get('storage', '?')!r}); "
            "run with storage='draws' (or 'final' for the final states)"
        )


def draws_array(draws, var_name: str = "theta") -> np.ndarray:
    """Return draws as an array of shape ``(chain, draw, d)`` (``(chain, draw, particle, d)`` for ensembles).

    Accepts a result of :func:`sgsim.sample` (InferenceData or DataTree), or an array of shape
    ``(n, d)`` (taken as one chain) or ``(chain, draw, d)``. A result that kept only
    running moments (``storage="moments"``) has no draws: that raises, saying so.
    """
    _needs_draws(draws, "this diagnostic")
    if hasattr(draws, "posterior"):
        if var_name == "theta" and "unconstrained_posterior" in groups_of(draws):
            # a target with named parameters: the vector the sampler moved
            return np.asarray(draws["unconstrained_posterior"]["theta"].values, dtype=np.float64)
        return np.asarray(draws.posterior[var_name].values, dtype=np.float64)
    arr = np.asarray(draws, dtype=np.float64)
    if arr.ndim == 2:
        return arr[None]
    if arr.ndim != 3:
        raise ValueError(f"draws must have shape (n, d) or (chain, draw, d), got {arr.shape}")
    return arr


def diverged_chains(draws, n_chains: int) -> np.ndarray:
    """Which chains a result marks as diverged: a boolean array of length ``n_chains``.

    A result marks a chain through ``sample_stats["diverged"]`` (draws storage) or
    ``constant_data["diverged_at"] > 0`` (final and moments storage); plain arrays carry no
    marks, so none of their chains counts as diverged.
    """
    if hasattr(draws, "sample_stats") and "diverged" in draws.sample_stats:
        marks = np.asarray(draws.sample_stats["diverged"].values)
        return np.asarray(marks.reshape(marks.shape[0], -1).any(axis=1))
    if hasattr(draws, "constant_data") and "diverged_at" in draws.constant_data:
        return np.asarray(draws.constant_data["diverged_at"].values) > 0
    return np.zeros(n_chains, bool)


def _leave_out(bad: np.ndarray, what: str) -> None:
    if not bad.any():
        return
    chains = np.flatnonzero(bad).tolist()
    if bad.all():
        raise ValueError(f"every chain diverged ({chains}): there is nothing to compute {what} from")
    warnings.warn(
        f"{what}: chains {chains} diverged and are left out; the figure describes the other {int((~bad).sum())}",
        RuntimeWarning,
        stacklevel=3,
    )


def healthy_draws(draws, var_name: str = "theta", what: str = "this diagnostic") -> np.ndarray:
    """The draws of the chains that did not diverge, shape as :func:`draws_array`.

    A chain counts as diverged when the result marks it so (``sample_stats["diverged"]``,
    which :func:`sgsim.sample` sets with ``on_divergence="mark"``); plain arrays carry no
    marks. Leaving one out warns (``RuntimeWarning``) naming it; when every chain diverged
    there is nothing to describe, and that raises ``ValueError``.
    """
    arr = draws_array(draws, var_name)
    bad = diverged_chains(draws, arr.shape[0])
    _leave_out(bad, what)
    return arr[~bad]


def _pooled(draws, what: str) -> np.ndarray:
    # the healthy chains' draws, pooled; a non-finite draw of a plain array is dropped alone
    arr = healthy_draws(draws, what=what)
    arr = arr.reshape(-1, arr.shape[-1])
    return arr[np.all(np.isfinite(arr), axis=1)]


def mode_counts(draws, centres, radius: float = 0.25) -> np.ndarray:
    """Number of draws within ``radius`` of each centre (all chains pooled).

    Parameters
    ----------
    draws : InferenceData or array_like
        See :func:`draws_array`.
    centres : array_like, shape (n_modes, d)
        Mode centres.
    radius : float
        Ball radius ``r > 0``.
    """
    radius = positive_float("radius", radius)
    x = _pooled(draws, "mode counts")
    centres = np.asarray(centres, dtype=np.float64)
    if centres.ndim != 2 or centres.shape[1] != x.shape[1]:
        raise ValueError(f"centres must have shape (n_modes, {x.shape[1]}), got {centres.shape}")
    counts = np.zeros(centres.shape[0], dtype=np.int64)
    block = 200_000
    for start in range(0, x.shape[0], block):
        chunk = x[start : start + block]
        d2 = ((chunk[:, None, :] - centres[None, :, :]) ** 2).sum(-1)
        counts += (d2 < radius**2).sum(0)
    return counts


def mode_coverage(draws, centres, radius: float = 0.25, threshold: int = 100) -> int:
    """The mode-coverage metric of [cSG] App. A.1 (Table 4).

    A mode is covered when more than ``threshold`` draws (``n-bar``, 100 in the paper)
    lie within ``radius`` (``r``, 0.25) of its centre. Draws of all chains are pooled, as
    in the paper's parallel setting.

    Returns
    -------
    int
        The number of covered modes.

    Examples
    --------
    Exact draws from the 25-Gaussian mixture: 20000 of them cover every mode, 2000 none
    (about 52 per ball, fewer than ``threshold``; see :func:`expected_mode_coverage`):

    >>> import numpy as np
    >>> from sgsim import diagnostics, targets
    >>> target = targets.mixture_25()
    >>> draws = target.exact_draws(np.random.default_rng(0), 20_000)
    >>> diagnostics.mode_coverage(draws, target.mode_centres)
    25
    >>> diagnostics.mode_coverage(draws[:2000], target.mode_centres)
    0
    """
    threshold = integer("threshold", threshold, low=0)
    return int(np.sum(mode_counts(draws, centres, radius) > threshold))


def ball_probability(radius: float, sd: float, dim: int = 2) -> float:
    """``P(|x - mu| < r)`` for ``x ~ N(mu, sd^2 I_dim)``: the chi-square CDF at ``(r/sd)^2``.

    In 2-D this is ``1 - exp(-r^2 / (2 sd^2))``: 0.64713 for ``r = 0.25``, ``sd^2 = 0.03``
    (:ref:`theory-mixture-25`).
    """
    radius = positive_float("radius", radius)
    sd = positive_float("sd", sd)
    dim = integer("dim", dim, low=1)
    return float(stats.chi2.cdf((radius / sd) ** 2, dim))


def expected_mode_coverage(n_draws: int, n_modes: int, ball_prob: float, threshold: int = 100) -> tuple[float, float]:
    """Mean and standard deviation of the mode coverage of ``n_draws`` exact iid draws.

    For an equal-weight mixture with well separated modes each mode's count is
    ``Binomial(n, p/n_modes)`` with ``p`` the ball probability (:ref:`theory-mixture-25`); the counts
    are multinomial, and the standard deviation accounts for their negative correlation.
    On the 25-Gaussian mixture the mean is 0.00 at n = 2500, 24.90 at 5000, 25.00 at 50000.

    Returns
    -------
    mean, sd : float
    """
    n = integer("n_draws", n_draws, low=0)
    k = integer("n_modes", n_modes, low=1)
    t = integer("threshold", threshold, low=0)
    q = float(ball_prob) / k
    if not 0 <= q <= 1:
        raise ValueError(f"ball_prob must lie in [0, 1], got {ball_prob}")
    p_cov = float(stats.binom.sf(t, n, q))
    # P(both of two modes covered), by summing over one mode's count
    if k > 1:
        j = np.arange(t + 1, n + 1)
        pj = stats.binom.pmf(j, n, q)
        rest = np.maximum(n - j, 0)
        q2 = q / (1.0 - q) if q < 1 else 0.0
        p_both = float(np.sum(pj * stats.binom.sf(t, rest, q2)))
    else:
        p_both = p_cov
    mean = k * p_cov
    var = k * p_cov * (1 - p_cov) + k * (k - 1) * (p_both - p_cov**2)
    return mean, float(np.sqrt(max(var, 0.0)))


def moment_errors(draws, target) -> dict:
    """Errors of the pooled first and second moments against the target's exact ones.

    Works on draws, and on a result that kept only running moments (``storage="moments"``):
    the chains' means and covariances are pooled, weighted by their numbers of draws.

    Returns
    -------
    dict
        ``mean_error`` (Euclidean norm of ``mean_hat - E x``), ``second_moment_error``
        (max abs entry of ``E_hat[x x^T] - E[x x^T]``), and the estimates themselves.
    """
    if target.mean is None or target.second_moment is None:
        raise ValueError(f"target {target.name!r} has no exact moments")
    if is_result(draws) and "moments" in groups_of(draws):
        # pooled from the running moments of each chain (and particle) of storage="moments"
        m = draws["moments"]
        d = m["theta_mean"].shape[-1]
        mu = m["theta_mean"].values.reshape(-1, d)
        cov = m["theta_cov"].values.reshape(-1, d, d)
        lead = m["theta_mean"].shape[:-1]  # (chain,) or (chain, particle)
        counts = m["n_draws"].values.reshape((-1,) + (1,) * (len(lead) - 1))
        n = np.broadcast_to(counts, lead).reshape(-1).astype(float)
        bad = diverged_chains(draws, m["theta_mean"].shape[0])
        _leave_out(bad, "moment errors")
        chain_bad = np.broadcast_to(bad.reshape((-1,) + (1,) * (len(lead) - 1)), lead).reshape(-1)
        ok = np.all(np.isfinite(mu), axis=1) & (n > 0) & ~chain_bad
        mu, cov, n = mu[ok], cov[ok], n[ok]
        mean = n @ mu / n.sum()
        scatter = cov * ((n - 1) / n)[:, None, None] + np.einsum("ci,cj->cij", mu, mu)
        second = np.einsum("c,cij->ij", n, scatter) / n.sum()
    else:
        x = _pooled(draws, "moment errors")
        mean = x.mean(0)
        second = x.T @ x / x.shape[0]
    return {
        "mean": mean,
        "second_moment": second,
        "mean_error": float(np.linalg.norm(mean - target.mean)),
        "second_moment_error": float(np.max(np.abs(second - target.second_moment))),
    }


def _dataset(draws, var_name, what):
    # the (chain, draw, ...) Dataset of the healthy chains that ArviZ's ESS and R-hat take
    import xarray as xr

    _needs_draws(draws, "ESS and R-hat")
    arr = draws_array(draws, var_name)
    bad = diverged_chains(draws, arr.shape[0])
    _leave_out(bad, what)
    arr = arr[~bad]
    dims = ("chain", "draw", "particle", "dim") if arr.ndim == 4 else ("chain", "draw", "dim")
    return xr.Dataset({var_name: (dims, arr)})


def ess(draws, method: str = "bulk", var_name: str = "theta") -> np.ndarray:
    """Effective sample size per dimension, computed by ArviZ (:func:`sgsim.results.ess`).

    Parameters
    ----------
    draws : InferenceData or array_like
        A result of :func:`sgsim.sample`, or draws (see :func:`draws_array`). Chains the
        result marks as diverged are left out, with a warning.
    method : str
        ArviZ's ESS method: ``"bulk"`` (default), ``"tail"``, ``"mean"``, ...
    var_name : str
        The posterior variable.

    Returns
    -------
    ndarray, shape (d,)
        The ESS of each coordinate, all chains together.

    Examples
    --------
    >>> import numpy as np
    >>> import sgsim
    >>> from sgsim import diagnostics
    >>> result = sgsim.sample("standard_gaussian", "sgld", 2000, n_chains=4, step_size=0.05, burn_in=500, seed=1)
    >>> ess = diagnostics.ess(result)
    >>> ess.shape
    (2,)
    >>> bool(np.all((ess > 50) & (ess < 600)))  # correlated draws: far fewer than the 6000 kept
    True

    Independent draws have an ESS near their number:

    >>> iid = np.random.default_rng(0).standard_normal((4, 1000, 2))  # (chain, draw, dim)
    >>> bool(np.all(diagnostics.ess(iid) > 3000))
    True
    """
    return _results.ess(_dataset(draws, var_name, "ESS"), var_name, method)


def rhat(draws, var_name: str = "theta") -> np.ndarray:
    """Rank-normalised split R-hat per dimension, computed by ArviZ (:func:`sgsim.results.rhat`).

    ``draws`` and ``var_name`` as in :func:`ess`; returns an array of shape ``(d,)``.

    Examples
    --------
    Four chains that sample the same law give R-hat near 1; chains centred at 0, 1, 2 and 3
    do not mix, and R-hat says so:

    >>> import numpy as np
    >>> from sgsim import diagnostics
    >>> iid = np.random.default_rng(0).standard_normal((4, 1000, 2))  # (chain, draw, dim)
    >>> bool(np.all(np.abs(diagnostics.rhat(iid) - 1) < 0.01))
    True
    >>> print(diagnostics.rhat(iid + np.arange(4)[:, None, None]).round(1))
    [1.5 1.5]
    """
    return _results.rhat(_dataset(draws, var_name, "R-hat"), var_name)


def cycle_weights(log_likelihood, cycle, method: str = "harmonic") -> np.ndarray:
    """Weights ``w_m`` for combining cycles, [cSG] §3.3 eq. 4.

    ``harmonic``: ``w_m ∝ [ (1/K_m) sum_j 1/p(D|theta_j^(m)) ]^(-1)``, the harmonic mean of
    the likelihood over cycle ``m``'s draws, computed in log space as
    ``log K_m - logsumexp_j(-log p(D|theta_j))`` and normalised. ``equal``: ``1/M`` each,
    the paper's practice for deep networks.

    Caveat (:ref:`theory-cycle-weights`, derived there and checked numerically): for exact draws from the
    sub-posterior of a region ``Theta_m``, ``E[1/p(D|theta)] = Pi(Theta_m) / (w_m p(D))`` with
    ``Pi`` the *prior*; the normalised harmonic-mean weights therefore estimate
    ``w_m / Pi(Theta_m)`` (renormalised), not ``w_m``, and agree only when every region has
    the same prior mass. The estimator can also have infinite variance. For the synthetic
    targets there is no likelihood/prior split: pass the log density as the "likelihood"
    (a flat prior), and the weights are meaningful only for regions of equal volume.

    Parameters
    ----------
    log_likelihood : array_like
        ``log p(D|theta)`` of each draw (any shape; flattened together with ``cycle``).
    cycle : array_like of int
        Cycle index of each draw.
    method : {"harmonic", "equal"}

    Returns
    -------
    ndarray
        Normalised weights, one per distinct cycle in increasing order.
    """
    ll = np.asarray(log_likelihood, dtype=np.float64).ravel()
    cyc = np.asarray(cycle).ravel()
    if ll.shape != cyc.shape:
        raise ValueError("log_likelihood and cycle must have the same number of entries")
    labels = np.unique(cyc)
    if method == "equal":
        return np.full(labels.size, 1.0 / labels.size)
    if method != "harmonic":
        raise ValueError(f"method must be 'harmonic' or 'equal', got {method!r}")
    if not np.all(np.isfinite(ll)):
        raise ValueError("log_likelihood must be finite")
    logw = np.array([np.log(np.sum(cyc == m)) - special.logsumexp(-ll[cyc == m]) for m in labels])
    return np.exp(logw - special.logsumexp(logw))


# ----------------------------------------------------------------------------- nested R-hat

#: ``1 + delta`` with ``delta = 0.01``: nested R-hat below it passes (:ref:`theory-nested-rhat`).
NESTED_RHAT_THRESHOLD = 1.01


def _by_cycle(draws, var_name: str) -> np.ndarray:
    # (cycle, chain, draw, d): each cycle's kept draws of every healthy chain
    if not (hasattr(draws, "sample_stats") and "cycle" in draws.sample_stats):
        raise ParameterError("superchains", "superchains='cycle' needs a result of sgsim.sample with its cycles")
    arr = healthy_draws(draws, var_name, what="nested R-hat")
    cycle = np.asarray(draws.sample_stats["cycle"].values)
    cycle = cycle.reshape(-1, cycle.shape[-1])[0] if cycle.ndim > 1 else cycle
    labels = [m for m in np.unique(cycle) if m >= 0]  # -1: warm-up draws, in no cycle
    sizes = {int(m): int(np.sum(cycle == m)) for m in labels}
    if len(set(sizes.values())) > 1:
        raise ParameterError(
            "superchains",
            f"superchains='cycle' needs the same number of kept draws in every cycle, got {sizes} "
            "(draws per cycle by cycle index)",
        )
    return np.stack([arr[:, cycle == m] for m in labels])


def _by_labels(arr: np.ndarray, labels) -> np.ndarray:
    # (superchain, chain, draw, d) from one label per chain; equal group sizes required
    labels = np.asarray(labels)
    if labels.shape != (arr.shape[0],):
        raise ParameterError(
            "superchains", f"superchains must give one label per chain ({arr.shape[0]}), got shape {labels.shape}"
        )
    groups, counts = np.unique(labels, return_counts=True)
    if counts.min() != counts.max():
        raise ParameterError(
            "superchains",
            "every superchain must hold the same number of chains, got "
            f"{dict(zip(groups.tolist(), counts.tolist(), strict=True))} (chains by label)",
        )
    return np.stack([arr[labels == g] for g in groups])


def nested_rhat(draws, superchains, var_name: str = "theta") -> np.ndarray:
    """Nested R-hat per dimension, over superchains of chains.

    Margossian, Hoffman, Sountsov, Riou-Durand, Vehtari and Gelman (2024), Nested R-hat:
    assessing the convergence of Markov chain Monte Carlo when running many short chains,
    Definition 2.2 (eqs. 6-8). With ``K`` superchains of ``M`` chains of ``N`` draws,
    ``theta_nmk`` the ``n``-th draw of chain ``m`` of superchain ``k``, chain means
    ``theta_.mk``, superchain means ``theta_..k`` and their mean ``theta_...``:

    - ``B_nu = (1 / (K - 1)) sum_k (theta_..k - theta_...)^2`` (between superchains),
    - ``W_nu = (1 / K) sum_k (B~_k + W~_k)`` (within superchains), with
      ``B~_k = (1 / (M - 1)) sum_m (theta_.mk - theta_..k)^2`` (0 when ``M = 1``) and
      ``W~_k = (1 / M) sum_m (1 / (N - 1)) sum_n (theta_nmk - theta_.mk)^2`` (0 when ``N = 1``),
    - ``nR = sqrt(1 + B_nu / W_nu)``.

    Draws pass when ``nR < 1 + delta``; :data:`NESTED_RHAT_THRESHOLD` is ``1.01``. For
    stationary chains ``nR^2 - 1`` is about ``1 / (M N_eff)`` (``N_eff`` the effective size
    of one chain), so the threshold asks for ``M N_eff`` of about 50 or more per superchain
    (:ref:`theory-nested-rhat`).

    Parameters
    ----------
    draws : InferenceData or array_like
        A result of :func:`sgsim.sample` (chains marked as diverged are left out, with a
        warning, and so are their labels) or draws of shape ``(chain, draw, d)``.
    superchains : int, array_like or "cycle"
        How chains group into superchains:

        - an int ``K >= 2``: the chains in order, cut into ``K`` groups of ``n_chains / K``
          consecutive chains (``n_chains`` must be a multiple of ``K``);
        - one label per chain (any hashable values): chains with equal labels form a
          superchain, and every superchain must hold the same number of chains;
        - ``"cycle"`` (a cyclical run's result): each cycle is a superchain, and its chains are
          the run's chains cut to the draws kept in that cycle (so ``M = n_chains``, ``N`` the
          kept draws per cycle, which must be equal across cycles; warm-up draws, cycle -1,
          are left out). These chains do not share a starting point, as the paper's design
          has them do: nested R-hat then asks whether every cycle samples the same law, i.e.
          whether the run drifts from cycle to cycle.
    var_name : str
        The posterior variable of an InferenceData.

    Returns
    -------
    ndarray, shape (d,)
        Nested R-hat of each coordinate (``inf`` where ``W_nu = 0`` and ``B_nu > 0``).

    Examples
    --------
    Sixteen chains, four superchains of four: mixed chains pass, chains stuck in two modes do
    not:

    >>> import numpy as np
    >>> from sgsim import diagnostics
    >>> x = np.random.default_rng(0).standard_normal((16, 100, 1))  # (chain, draw, dim)
    >>> bool(diagnostics.nested_rhat(x, 4)[0] < diagnostics.NESTED_RHAT_THRESHOLD)
    True
    >>> stuck = x + np.repeat([-2.0, 2.0, -2.0, 2.0], 4)[:, None, None]
    >>> print(diagnostics.nested_rhat(stuck, 4).round(2))
    [2.57]
    """
    if isinstance(superchains, str):
        if superchains != "cycle":
            raise ParameterError("superchains", f"superchains must be an int, labels or 'cycle', got {superchains!r}")
        nested = _by_cycle(draws, var_name)
    else:
        _needs_draws(draws, "nested R-hat")
        arr = draws_array(draws, var_name) if hasattr(draws, "groups") else np.asarray(draws, dtype=np.float64)
        if arr.ndim != 3:
            raise ParameterError("draws", f"draws must have shape (chain, draw, d), got {arr.shape}")
        bad = diverged_chains(draws, arr.shape[0])
        if isinstance(superchains, (int, np.integer)) and not isinstance(superchains, bool):
            k = integer("superchains", superchains, low=2)
            if arr.shape[0] % k:
                raise ParameterError(
                    "superchains", f"{arr.shape[0]} chains do not split into {k} superchains of equal size"
                )
            labels = np.repeat(np.arange(k), arr.shape[0] // k)
        else:
            labels = np.asarray(superchains)
            if labels.shape != (arr.shape[0],):
                raise ParameterError(
                    "superchains",
                    f"superchains must give one label per chain ({arr.shape[0]}), got shape {labels.shape}",
                )
        _leave_out(bad, "nested R-hat")
        nested = _by_labels(arr[~bad], labels[~bad])
    k, m, n = nested.shape[:3]
    if k < 2:
        raise ParameterError("superchains", f"nested R-hat needs at least 2 superchains, got {k}")
    if n < 1 or m < 1:
        raise ParameterError("draws", "every chain needs at least one draw")
    if m == 1 and n == 1:
        raise ParameterError(
            "superchains", "with one chain of one draw per superchain there is no within-superchain variance"
        )
    nested = finite_array("draws", nested)
    chain_mean = nested.mean(axis=2)  # (K, M, d)
    super_mean = chain_mean.mean(axis=1)  # (K, d)
    between = super_mean.var(axis=0, ddof=1)
    b_k = chain_mean.var(axis=1, ddof=1) if m > 1 else np.zeros_like(super_mean)
    w_k = nested.var(axis=2, ddof=1).mean(axis=1) if n > 1 else np.zeros_like(super_mean)
    within = (b_k + w_k).mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt(1.0 + between / within)


# ----------------------------------------------------------------------------- fluctuation-dissipation


class FluctuationDissipation(NamedTuple):
    """The fluctuation-dissipation ratio of a constant-rate SGD run and its standard error.

    Attributes
    ----------
    ratio : float
        ``sum_k (theta_k - c) . g_k / sum_k (epsilon / 2) |g_k|^2`` over every chain and step
        (its momentum form for SGD with momentum): 1 in expectation at stationarity.
    se : float
        Its standard error, from the spread of the chains' sums (a ratio estimator over
        independent chains).
    z : float
        ``(ratio - 1) / se``; a large ``|z|`` says the run is not stationary.
    n_chains : int
    n_steps : int
        Steps per chain that entered the sums.
    """

    ratio: float
    se: float
    z: float
    n_chains: int
    n_steps: int


def _run_options(draws) -> tuple[float, np.ndarray]:
    # (damping, the run's kept steps) of an sgsim result of sgd or momentum_sgd
    method = draws.attrs.get("method")
    if method not in ("sgd", "momentum_sgd"):
        raise ParameterError(
            "draws", f"the fluctuation-dissipation ratio reads runs of 'sgd' or 'momentum_sgd', got {method!r}"
        )
    options = json.loads(draws.attrs["sgsim_config"]).get("options", {})
    damping = float(options.get("damping", 0.1)) if method == "momentum_sgd" else 1.0
    rates = np.asarray(draws.sample_stats["step_size"].values).ravel()
    if not np.all(rates == rates[0]):
        raise ParameterError("draws", "the fluctuation-dissipation ratio needs a constant step size")
    steps = np.asarray(draws.sample_stats["step"].values)
    steps = steps.reshape(-1, steps.shape[-1])[0] if steps.ndim > 1 else steps
    return damping, steps


def fluctuation_dissipation(
    draws, gradients=None, *, step_size=None, damping: float = 1.0, center=None, var_name: str = "theta"
) -> FluctuationDissipation:
    r"""Yaida's fluctuation-dissipation ratio of a constant-rate SGD run: 1 at stationarity.

    Constant SGD ``theta_{k+1} = theta_k - epsilon g_k`` (``g_k`` the minibatch gradient the
    step used) has, at stationarity and for any fixed point ``c``,

    ``E[(theta - c) . g] = (epsilon / 2) E[|g|^2]``

    exactly (Yaida (2018), Fluctuation-dissipation relations for stochastic gradient descent,
    the first relation of §2): expand ``|theta_{k+1} - c|^2`` and take expectations of both
    sides. With momentum, ``v_{k+1} = (1 - mu) v_k - epsilon g_k`` and
    ``theta_{k+1} = theta_k + v_{k+1}``, the same argument applied to ``|theta|^2``,
    ``theta . v`` and ``|v|^2`` gives ``E[(theta - c) . g] = ((2 - mu) / (2 epsilon)) E[|v|^2]``
    (:ref:`theory-fdr`). This function returns the ratio of the two sides' sums over every chain
    and step, ``sum (theta_k - c) . g_k / sum (epsilon / 2) |g_k|^2`` (the right side replaced
    by its momentum form when ``mu < 1``), and its standard error from the spread of the
    chains' sums.

    Units: only the move ``epsilon g`` enters. In the constant-SGD paper's units
    (:mod:`sgsim.integrators.constant_sgd`) ``epsilon`` is the learning rate on the averaged
    loss ``L = U / N`` and ``g`` the minibatch gradient of ``L``; sgsim's step ``alpha =
    epsilon / N`` on ``U`` with gradients of ``U`` gives the same ratio. Without
    ``gradients`` the move is read from consecutive iterates (``epsilon g_k = theta_k -
    theta_{k+1}``, or ``(1 - mu) v_k - v_{k+1}`` with ``v_{k+1} = theta_{k+1} - theta_k``), so
    neither ``epsilon`` nor ``N`` is needed; for preconditioned SGD ``theta <- theta - epsilon
    H g`` the ratio is then the one of ``H g``.

    Parameters
    ----------
    draws : InferenceData or array_like, shape (chain, draw, d)
        Iterates of at least 2 independent chains. A result of :func:`sgsim.sample` must be
        of ``sgd`` or ``momentum_sgd`` at a constant step size; without ``gradients`` it
        must keep every step (``thin=1``), and its damping ``mu`` is read from the run.
    gradients : array_like, shape like ``draws``, optional
        The minibatch gradient each step used at each kept iterate (plain SGD only); the
        iterates need not then be consecutive.
    step_size : float, optional
        ``epsilon`` (with ``gradients`` only): the rate that multiplies ``gradients``.
    damping : float
        ``mu`` in ``(0, 1]`` for an array of iterates of SGD with momentum (1: plain SGD).
    center : array_like, shape (d,), optional
        The fixed point ``c`` (the origin by default). Any fixed point gives an exact relation
        (at stationarity ``E g = 0``); one near the iterates' mean gives the smallest error.
    var_name : str
        The posterior variable of an InferenceData.

    Returns
    -------
    FluctuationDissipation
        ``ratio``, ``se``, ``z = (ratio - 1) / se``, ``n_chains`` and ``n_steps``.

    Notes
    -----
    Without ``gradients`` each chain's sum of ``(theta_k - c) . epsilon g_k - (epsilon^2 / 2)
    |g_k|^2`` telescopes to ``(|theta_first - c|^2 - |theta_last - c|^2) / 2``: the ratio
    tests whether ``E|theta - c|^2`` stays put over the run, and batch means within a chain
    would overstate its error. The chains' sums are independent, so their spread gives the
    error honestly (``C / (C - 1) sum_c (A_c - ratio B_c)^2 / (sum_c B_c)^2``, the variance of a
    ratio estimator over ``C`` independent chains); use ten chains or more for a useful ``se``.
    """
    mu = real("damping", damping, 0.0, 1.0, low_open=True)
    if hasattr(draws, "groups"):
        mu, steps = _run_options(draws)
        if gradients is None and (steps.size < 3 or not np.all(np.diff(steps) == 1)):
            raise ParameterError("draws", "reading the gradients from the iterates needs every step kept (thin=1)")
        theta = healthy_draws(draws, var_name, what="the fluctuation-dissipation ratio")
    else:
        theta = np.asarray(draws, dtype=np.float64)
    if theta.ndim != 3:
        raise ParameterError("draws", f"draws must have shape (chain, draw, d), got {theta.shape}")
    theta = finite_array("draws", theta)
    n_chains, n_draws, d = theta.shape
    if n_chains < 2:
        raise ParameterError("draws", f"the standard error needs at least 2 independent chains, got {n_chains}")
    c = np.zeros(d) if center is None else finite_array("center", center, (d,))
    x = theta - c
    if gradients is not None:
        if mu != 1.0:
            raise ParameterError("damping", "with gradients, only plain SGD (damping 1) is supported")
        if step_size is None:
            raise ParameterError("step_size", "step_size (> 0, the rate that multiplies gradients) goes with gradients")
        eps = positive_float("step_size", step_size)
        g = finite_array("gradients", gradients, theta.shape)
        a = eps * np.einsum("cki,cki->ck", x, g)  # (theta - c) . epsilon g
        b = 0.5 * eps**2 * np.einsum("cki,cki->ck", g, g)
    else:
        if step_size is not None:
            raise ParameterError("step_size", "step_size goes with gradients; the iterates alone need none")
        v = np.diff(theta, axis=1)  # v[:, k] = theta_{k+1} - theta_k
        if mu == 1.0:
            move, x, nxt = -v, x[:, :-1], v  # epsilon g_k = theta_k - theta_{k+1}
        else:
            move, x, nxt = (1.0 - mu) * v[:, :-1] - v[:, 1:], x[:, 1:-1], v[:, 1:]
        if move.shape[1] < 1:
            raise ParameterError("draws", f"too few iterates per chain ({n_draws}) to read a step")
        a = np.einsum("cki,cki->ck", x, move)
        b = 0.5 * (2.0 - mu) * np.einsum("cki,cki->ck", nxt, nxt)
    a_c, b_c = a.sum(axis=1), b.sum(axis=1)
    total = float(b_c.sum())
    if not total > 0:
        raise ParameterError("draws", "the iterates never move: the ratio is undefined")
    ratio = float(a_c.sum()) / total
    se = float(np.sqrt(n_chains / (n_chains - 1.0) * np.sum((a_c - ratio * b_c) ** 2)) / total)
    z = (ratio - 1.0) / se if se > 0 else (0.0 if ratio == 1.0 else float(np.sign(ratio - 1.0)) * np.inf)
    return FluctuationDissipation(ratio, se, z, n_chains, int(a.shape[1]))

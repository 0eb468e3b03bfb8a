"""Diagnostics: mode coverage, moment errors, ESS and R-hat (through ArviZ), cycle weights.

Nothing here runs a sampler: every function takes draws (arrays or InferenceData). The
chains a result marks as diverged are left out of every figure, with a ``RuntimeWarning``
naming them (:func:`healthy_draws`).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special, stats

from ._validate import integer, positive_float

__all__ = [
    "mode_counts",
    "mode_coverage",
    "ball_probability",
    "expected_mode_coverage",
    "moment_errors",
    "ess",
    "rhat",
    "cycle_weights",
    "draws_array",
    "healthy_draws",
]


def _needs_draws(draws, what: str) -> None:
    if hasattr(draws, "groups") and "posterior" not in draws.groups():
        kept = "running moments" if "moments" in draws.groups() else "no draws"
        raise ValueError(
            f"{what} needs draws, and this result holds {kept} (storage={draws.attrs.get('storage', '?')!r}); "
            "run with storage='draws' (or 'final' for the final states)"
        )


def draws_array(draws, var_name: str = "theta") -> np.ndarray:
    """Return draws as an array of shape ``(chain, draw, d)`` (``(chain, draw, particle, d)`` for ensembles).

    Accepts an InferenceData from :func:`sgsim.sample`, or an array of shape
    ``(n, d)`` (taken as one chain) or ``(chain, draw, d)``. A result that kept only
    running moments (``storage="moments"``) has no draws: that raises, saying so.
    """
    _needs_draws(draws, "this diagnostic")
    if hasattr(draws, "posterior"):
        if var_name == "theta" and "unconstrained_posterior" in draws.groups():
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
    if hasattr(draws, "groups") and "moments" in draws.groups():
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
    import arviz as az

    _needs_draws(draws, "ESS and R-hat")
    arr = draws_array(draws, var_name)
    bad = diverged_chains(draws, arr.shape[0])
    if hasattr(draws, "posterior") and not bad.any():
        return draws
    _leave_out(bad, what)
    arr = arr[~bad]
    with warnings.catch_warnings():
        # many short chains (replicas) are legitimate here; arviz warns about them
        warnings.filterwarnings("ignore", message="More chains", category=UserWarning)
        dims = ["particle", "dim"] if arr.ndim == 4 else ["dim"]
        return az.from_dict(posterior={var_name: arr}, dims={var_name: dims})


def ess(draws, method: str = "bulk", var_name: str = "theta") -> np.ndarray:
    """Effective sample size per dimension, computed by :func:`arviz.ess`.

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
    import arviz as az

    out = az.ess(_dataset(draws, var_name, "ESS"), var_names=[var_name], method=method)
    return np.asarray(out[var_name].values)


def rhat(draws, var_name: str = "theta") -> np.ndarray:
    """Rank-normalised split R-hat per dimension, computed by :func:`arviz.rhat`.

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
    import arviz as az

    out = az.rhat(_dataset(draws, var_name, "R-hat"), var_names=[var_name])
    return np.asarray(out[var_name].values)


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

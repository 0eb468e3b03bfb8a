"""The one statistical assertion used by every Monte Carlo test (docs: theory-tolerances).

``assert_within_se`` checks ``|estimate - truth| <= z * se + bias`` elementwise;
``check_gaussian_law`` applies it to the mean, variances and covariances of replicas. Each
statistical test states in a comment how its ``se`` was derived, and runs a negative
control: a wrong truth that the same call must reject.
"""

from __future__ import annotations

import numpy as np


def assert_within_se(estimate, truth, se, z=5.0, bias=0.0, what="estimate"):
    """Assert ``|estimate - truth| <= z * se + bias`` everywhere; return the z-scores.

    Parameters
    ----------
    estimate, truth, se : array_like
        Broadcast together; ``se`` must be > 0 (the standard error of ``estimate``).
    z : float
        Allowed number of standard errors (5: two-sided false alarm 6e-7 per entry).
    bias : float or array_like
        Known bound on the bias of ``estimate`` (0 against exact discrete-time truths).
    what : str
        Name of the quantity, for the failure message.

    Returns
    -------
    ndarray or float
        ``(estimate - truth) / se``.
    """
    est, tru, se, bias = np.broadcast_arrays(*(np.asarray(a, dtype=np.float64) for a in (estimate, truth, se, bias)))
    if not np.all(se > 0):
        raise ValueError(f"{what}: standard errors must be > 0, got {se}")
    if not np.all(np.isfinite(est)):
        raise AssertionError(f"{what}: non-finite estimate {est}")
    zscore = (est - tru) / se
    bad = np.abs(est - tru) > z * se + bias
    if np.any(bad):
        idx = [tuple(int(i) for i in ix) for ix in np.argwhere(bad)]
        raise AssertionError(
            f"{what}: |estimate - truth| > {z} * SE + {bias.max():g} at {idx}\n"
            f"  estimate = {est[bad]}\n  truth    = {tru[bad]}\n  SE       = {se[bad]}\n"
            f"  z-score  = {zscore[bad]}"
        )
    return zscore if zscore.ndim else float(zscore)


def check_gaussian_law(x, mean, cov, what, z=5.0):
    """Replica mean, variances and covariances of ``x`` (R, n) against an exact Gaussian law.

    Failure messages contain "mean", "variance" or "covariance", so that a negative control
    can say which moment it expects to be rejected.
    """
    n, d = x.shape
    var = np.diag(cov)
    # mean of R iid replicas: SE = sqrt(Sigma_ii / R)
    assert_within_se(x.mean(0), mean, np.sqrt(var / n), z=z, what=f"{what}: mean")
    c = np.atleast_2d(np.cov(x.T))
    # sample variance of R iid Gaussian draws: SE = Sigma_ii sqrt(2 / (R - 1))
    assert_within_se(np.diag(c), var, var * np.sqrt(2 / (n - 1)), z=z, what=f"{what}: variance")
    i, j = np.triu_indices(d, 1)
    # sample covariance: Var(S_ij) = (Sigma_ij^2 + Sigma_ii Sigma_jj) / R (docs: theory-tolerances)
    se = np.sqrt((cov[i, j] ** 2 + var[i] * var[j]) / n)
    assert_within_se(c[i, j], cov[i, j], se, z=z, what=f"{what}: covariance")

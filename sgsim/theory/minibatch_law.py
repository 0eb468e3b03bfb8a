r"""The exact mean and covariance of SGLD with minibatch gradients on a quadratic data potential.

The potential is a sum over ``N`` examples plus a Gaussian prior, each term quadratic,

.. math::

    U(\theta) = \sum_{i=1}^N \big(\tfrac12 \theta^\top H_i \theta - b_i^\top \theta\big)
        + \tfrac12 (\theta - m)^\top \Lambda (\theta - m),

(Bayesian linear regression with known noise precision ``tau``: ``H_i = tau x_i x_i^T``,
``b_i = tau y_i x_i``), so ``grad U(theta) = P theta - b`` with ``P = sum_i H_i + Lambda``,
``b = sum_i b_i + Lambda m``. Each step of SGLD ([cSG] units) takes an unbiased estimate
``grad U(theta) + zeta`` from a minibatch ``B`` of ``n`` indices,

.. math::

    \theta_{k+1} = \theta_k - \alpha_k (\nabla U(\theta_k) + \zeta_k) + \sqrt{2 \alpha_k T_k}\, \xi_k,
    \qquad \zeta_k = \frac{N}{n} \sum_{i \in B_k} a_i - \sum_{i=1}^N a_i,

where ``a_i`` is what the estimate sums per example, an affine function of the state:
``a_i = H_i theta - b_i`` (the plain minibatch gradient), ``a_i = H_i (theta - theta_hat)``
(a control variate around a fixed ``theta_hat``: Baker, Fearnhead, Fox and Nemeth (2019),
"Control variates for stochastic gradient MCMC") or ``a_i = H_i (theta - theta_tilde)``
(SVRG: ``theta_tilde`` the chain's snapshot, set to ``theta`` at steps ``0, m, 2m, ...``;
Dubey et al. (2016), "Variance reduction in stochastic gradient Langevin dynamics").

The noise ``zeta_k`` is multiplicative (it depends on the state), so ``theta_k`` is not
Gaussian, but its first two moments follow exactly. Write ``z = (theta, theta_ref, 1)`` and
``a_i = G_i z``. Given ``z``, ``zeta`` has mean 0 and covariance

.. math::

    E[\zeta \zeta^\top \mid z] = \frac{f}{n} \Big(N \sum_i a_i a_i^\top
        - \big(\textstyle\sum_i a_i\big)\big(\textstyle\sum_i a_i\big)^\top\Big),

``f = 1`` with replacement (``n`` iid uniform indices) and ``f = (N - n) / (N - 1)`` without (a
uniform ``n``-subset: the finite-population correction), since ``zeta`` is ``N`` times the
deviation of a sample mean of the ``a_i`` from their mean. The minibatch is drawn afresh at
each step, independently of the past, so with ``M_k = E[z_k z_k^T]`` and the deterministic
map ``z -> A_k z`` of the step,

.. math::

    M_{k+1} = A_k M_k A_k^\top + \alpha_k^2 \frac{f}{n} \Big(N \sum_i G_i M_k G_i^\top
        - G M_k G^\top\Big) \oplus 0 + 2 \alpha_k T_k I \oplus 0, \qquad G = \sum_i G_i,

(the cross terms vanish: ``E[zeta | z] = 0``), SVRG's snapshot being the copy
``theta_ref <- theta`` applied to ``M_k`` first on its snapshot steps. The mean and covariance of
``theta_k`` are read off ``M_k``. This module imports no sampler.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._validate import ParameterError, finite_array, integer, real
from .exact_law import _init, _nonnegative_seq, _positive_seq, _sequences

__all__ = ["ESTIMATORS", "Moments", "minibatch_sgld_moments", "linear_regression_examples"]

#: the gradient estimates :func:`minibatch_sgld_moments` knows
ESTIMATORS = ("plain", "control_variate", "svrg")


class Moments(NamedTuple):
    """Means and covariances of ``theta_1 .. theta_K`` (not a Gaussian law: the noise is multiplicative)."""

    mean: np.ndarray  # (K, d)
    cov: np.ndarray  # (K, d, d)


def linear_regression_examples(X, y, noise_precision: float) -> tuple[np.ndarray, np.ndarray]:
    """``H_i = tau x_i x_i^T`` and ``b_i = tau y_i x_i``: the quadratic terms of linear regression.

    ``-log N(y_i | x_i . theta, 1 / tau) = (1/2) theta^T H_i theta - b_i^T theta + const``.
    Returns arrays of shape ``(N, d, d)`` and ``(N, d)``.
    """
    X = finite_array("X", X)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ParameterError("X", f"X must have shape (N, d) with N, d >= 1, got {X.shape}")
    y = finite_array("y", y, (X.shape[0],))
    tau = real("noise_precision", noise_precision)
    if not tau > 0:
        raise ParameterError("noise_precision", f"noise_precision must be > 0, got {tau}")
    return tau * X[:, :, None] * X[:, None, :], tau * y[:, None] * X


def minibatch_sgld_moments(
    example_hessians,
    example_shifts,
    prior_precision,
    step_size,
    batch_size: int,
    *,
    replace: bool,
    estimator: str = "plain",
    control_point=None,
    snapshot_every: int | None = None,
    temperature=1.0,
    prior_mean=None,
    init_mean=None,
    init_cov=None,
    n_steps: int | None = None,
) -> Moments:
    """Exact mean and covariance of every SGLD iterate with minibatch gradients on a quadratic data potential.

    See the module's notes for the recursion; [cSG] units (drift ``alpha grad U``, injected
    noise variance ``2 alpha T``).

    Parameters
    ----------
    example_hessians : array_like, shape (N, d, d)
        ``H_i``, symmetric (:func:`linear_regression_examples`).
    example_shifts : array_like, shape (N, d)
        ``b_i``.
    prior_precision : array_like, shape (d,) or (d, d)
        ``Lambda`` (a vector: its diagonal).
    step_size, temperature : float or array_like, shape (K,)
        ``alpha_k > 0`` and ``T_k >= 0``.
    batch_size : int
        ``n`` (``n <= N`` without replacement).
    replace : bool
        Minibatches of iid uniform indices, or uniform ``n``-subsets.
    estimator : str
        ``"plain"``, ``"control_variate"`` (around ``control_point``) or ``"svrg"`` (snapshot
        every ``snapshot_every`` steps, the first at step 0).
    control_point : array_like, shape (d,), optional
        ``theta_hat``; required for ``"control_variate"``.
    snapshot_every : int, optional
        ``m >= 1``; required for ``"svrg"``.
    prior_mean : array_like, shape (d,), optional
        ``m`` (zero if omitted).
    init_mean, init_cov : array_like, optional
        Mean ``(d,)`` and covariance ``(d, d)`` of ``theta_0`` (a point at 0 by default).
    n_steps : int, optional
        ``K``; required when ``step_size`` and ``temperature`` are scalars.

    Returns
    -------
    Moments
        ``mean`` (K, d) and ``cov`` (K, d, d) of ``theta_1 .. theta_K``.

    Examples
    --------
    With the whole data set as the batch, drawn without replacement, there is no minibatch
    noise and the law is plain SGLD's (:func:`sgsim.theory.sgld_law`):

    >>> import numpy as np
    >>> from sgsim import theory
    >>> from sgsim.theory.minibatch_law import linear_regression_examples, minibatch_sgld_moments
    >>> X = np.array([[1.0, 0.5], [1.0, -1.0], [1.0, 2.0]])
    >>> h, b = linear_regression_examples(X, [0.3, -1.0, 2.0], 1.0)
    >>> full = minibatch_sgld_moments(h, b, [1.0, 1.0], 0.05, 3, replace=False, n_steps=20)
    >>> exact = theory.sgld_law(h.sum(0) + np.eye(2), b.sum(0), 0.05, n_steps=20)
    >>> bool(np.allclose(full.cov, exact.cov, rtol=1e-12, atol=1e-15))
    True
    """
    hess = finite_array("example_hessians", example_hessians)
    if hess.ndim != 3 or hess.shape[1] != hess.shape[2] or hess.shape[0] < 1:
        raise ParameterError("example_hessians", f"example_hessians must have shape (N, d, d), got {hess.shape}")
    n_data, d = hess.shape[0], hess.shape[1]
    if not np.allclose(hess, np.swapaxes(hess, 1, 2), rtol=1e-12, atol=0.0):
        raise ParameterError("example_hessians", "each example's Hessian must be symmetric")
    shifts = finite_array("example_shifts", example_shifts, (n_data, d))
    lam = finite_array("prior_precision", prior_precision)
    if lam.shape == (d,):
        lam = np.diag(lam)
    elif lam.shape != (d, d):
        raise ParameterError(
            "prior_precision", f"prior_precision must have shape ({d},) or ({d}, {d}), got {lam.shape}"
        )
    mean_prior = np.zeros(d) if prior_mean is None else finite_array("prior_mean", prior_mean, (d,))
    if estimator not in ESTIMATORS:
        raise ParameterError("estimator", f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    n = integer("batch_size", batch_size, low=1)
    if not replace and n > n_data:
        raise ParameterError("batch_size", f"batch_size ({n}) exceeds N ({n_data}) without replacement")
    f = 1.0 if replace else ((n_data - n) / (n_data - 1) if n_data > 1 else 0.0)
    ref0 = np.zeros(d)
    every = 0
    if estimator == "control_variate":
        if control_point is None:
            raise ParameterError("control_point", "the control-variate estimate needs control_point")
        ref0 = finite_array("control_point", control_point, (d,))
    elif estimator == "svrg":
        if snapshot_every is None:
            raise ParameterError("snapshot_every", "the SVRG estimate needs snapshot_every (m >= 1)")
        every = integer("snapshot_every", snapshot_every, low=1)
    seq, k_steps = _sequences({"step_size": step_size, "temperature": temperature}, n_steps, d)
    alpha, temp = seq["step_size"], seq["temperature"]
    if alpha.ndim != 1 or temp.ndim != 1:
        raise ParameterError("step_size", "step_size and temperature must be numbers or 1-D sequences")
    _positive_seq("step_size", alpha)
    _nonnegative_seq("temperature", temp)
    m0, s0 = _init(init_mean, init_cov, d, d)

    p = hess.sum(axis=0) + lam
    b = shifts.sum(axis=0) + lam @ mean_prior
    size = 2 * d + 1  # z = (theta, theta_ref, 1)
    th, rf = slice(0, d), slice(d, 2 * d)
    g = np.zeros((n_data, d, size))
    g[:, :, th] = hess
    if estimator == "plain":
        g[:, :, -1] = -shifts
    else:
        g[:, :, rf] = -hess
    g_sum = g.sum(axis=0)
    z0 = np.concatenate([m0, ref0, [1.0]])
    moment = np.outer(z0, z0)
    moment[th, th] += s0
    copy = np.eye(size)
    copy[rf, rf] = 0.0
    copy[rf, th] = np.eye(d)
    means = np.empty((k_steps, d))
    covs = np.empty((k_steps, d, d))
    for k in range(k_steps):
        if every and k % every == 0:
            moment = copy @ moment @ copy.T
        a = alpha[k]
        gm = g @ moment  # (N, d, size)
        noise = (f / n) * (n_data * np.einsum("iak,ibk->ab", gm, g) - g_sum @ moment @ g_sum.T)
        step = np.eye(size)
        step[th, th] -= a * p
        step[th, -1] = a * b
        moment = step @ moment @ step.T
        moment[th, th] += a * a * noise + 2.0 * a * temp[k] * np.eye(d)
        moment = 0.5 * (moment + moment.T)
        means[k] = moment[th, -1]
        covs[k] = moment[th, th] - np.outer(means[k], means[k])
    return Moments(means, covs)

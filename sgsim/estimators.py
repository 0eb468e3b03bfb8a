r"""Online estimation of the gradient-noise covariance ("Stochastic Gradient Descent as
Approximate Bayesian Inference", §4.2, eq. 21).

The KL-optimal learning rate and preconditioners of that paper (Theorems 1, 2 and 5;
:mod:`sgsim.theory.kl`) need ``C``, the covariance of one example's gradient of the averaged
loss. Eq. 21 estimates it along the way, from two gradients per step: the gradient
``g_1`` of the first example of the minibatch and the minibatch mean ``g_S``,

.. math::

    \hat C_t = (1 - \kappa_t) \hat C_{t-1} + \kappa_t (g_{1,t} - g_{S,t})(g_{1,t} - g_{S,t})^\top,
    \qquad \kappa_t = 1 / t .

With ``kappa_t = 1/t`` the estimate is the plain mean of the outer products. The paper treats
it as unbiased; it is not: ``g_1`` is part of ``g_S``, and

.. math::

    E[(g_1 - g_S)(g_1 - g_S)^\top] = (1 - 1/S)\, C \cdot f, \qquad
    f = 1 \text{ (with replacement)}, \quad f = N / (N - 1) \text{ (without)},

(derived: ``g_1 - g_S = (1 - 1/S) g_1 - (1/S) sum_{j>1} g_j``; with replacement the terms are
independent, without replacement each pair of distinct examples has covariance ``-C/(N-1)``).
``unbias=True`` divides by that factor, so the estimate's expectation is ``C`` exactly.

Units: the per-example gradients are those of ``log p(y_i | x_i, theta)``; the prior's share
of each ``ell_n`` is the same for every example and cancels in ``g_1 - g_S``. ``C`` is
therefore the paper's ``B B^T`` for the averaged loss ``L = U / N``, and the covariance of
sgsim's minibatch gradient of ``U`` is ``N^2 C f' / S`` (``f' = (N - S)/(N - 1)`` without
replacement; :func:`sgsim.targets.regression.minibatch_gradient_covariance`).
"""

from __future__ import annotations

import numpy as np

from ._validate import ParameterError, boolean, finite_array, integer
from .targets.regression import per_example_gradients

__all__ = ["OnlineNoiseCovariance", "bias_factor", "estimate_noise_covariance"]


def bias_factor(batch_size: int, n_data: int, replace: bool) -> float:
    """``E[C_hat] / C`` of eq. 21's estimator: ``(1 - 1/S)``, times ``N / (N - 1)`` without replacement."""
    s = integer("batch_size", batch_size, low=2)
    n = integer("n_data", n_data, low=2)
    if s > n and not replace:
        raise ParameterError("batch_size", f"batch_size must be <= n_data ({n}) without replacement, got {s}")
    return (1.0 - 1.0 / s) * (1.0 if replace else n / (n - 1.0))


class OnlineNoiseCovariance:
    """The running estimate of eq. 21 with ``kappa_t = 1 / t``.

    Parameters
    ----------
    dim : int
        Dimension of the gradients.
    batch_size, n_data : int
        ``S >= 2`` (with ``S = 1`` the two gradients coincide and nothing is learnt) and ``N``.
    replace : bool
        Whether minibatches are drawn with replacement (sets the bias factor).
    unbias : bool
        Divide by :func:`bias_factor`, so that the expectation is ``C`` (the paper's form, False,
        underestimates it by ``1 - 1/S``).
    """

    def __init__(self, dim: int, batch_size: int, n_data: int, *, replace: bool = True, unbias: bool = False):
        self.dim = integer("dim", dim, low=1)
        self.factor = bias_factor(batch_size, n_data, boolean("replace", replace))
        self.unbias = boolean("unbias", unbias)
        self.count = 0
        self._mean = np.zeros((self.dim, self.dim))

    def update(self, g_first, g_mean) -> None:
        """Add one step's pair: the first example's gradient and the minibatch mean."""
        dev = finite_array("g_first", g_first, (self.dim,)) - finite_array("g_mean", g_mean, (self.dim,))
        self.count += 1
        self._mean += (np.outer(dev, dev) - self._mean) / self.count

    @property
    def covariance(self) -> np.ndarray:
        """The current estimate of ``C`` (divided by the bias factor when ``unbias``)."""
        return self._mean / self.factor if self.unbias else self._mean.copy()


def estimate_noise_covariance(target, theta, n_steps: int, *, seed: int, unbias: bool = False) -> np.ndarray:
    """Eq. 21 at a fixed ``theta`` of a data target, over ``n_steps`` fresh minibatches.

    Minibatches have the target's ``batch_size`` and sampling mode (``replace``), drawn from
    ``numpy.random.default_rng(seed)``. Returns the estimate of ``C`` (see the module notes for
    its expectation).
    """
    n_steps = integer("n_steps", n_steps, low=1)
    g = per_example_gradients(target, theta)
    n, s, replace = g.shape[0], target.extras["batch_size"], bool(target.extras["replace"])
    est = OnlineNoiseCovariance(target.dim, s, n, replace=replace, unbias=unbias)
    rng = np.random.default_rng(integer("seed", seed))
    for _ in range(n_steps):
        idx = rng.integers(0, n, s) if replace else rng.choice(n, s, replace=False)
        est.update(g[idx[0]], g[idx].mean(axis=0))
    return est.covariance

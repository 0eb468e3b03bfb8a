r"""Estimators that run beside constant SGD ("Stochastic Gradient Descent as Approximate
Bayesian Inference", §4.2): the gradient-noise covariance of eq. 21, and the variational EM of
eq. 22 that learns a prior precision while constant SGD samples.

Eq. 21: the noise covariance
----------------------------

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
replacement; ``sgsim.targets.regression.minibatch_gradient_covariance``).

Eq. 22: variational EM with two SGDs
------------------------------------
With a Gaussian prior ``N(m, lambda^{-1} I_P)`` on the ``P`` parameters, the negative log joint
``L(theta, lambda) = -log p(y | x, theta) + (lambda / 2) |theta - m|^2 - (P / 2) log lambda``
(+ const; eq. 35 for softmax regression) is descended in ``theta`` by constant SGD, whose
stationary law ``q_lambda`` is the variational distribution, and in ``lambda`` by a
Robbins-Monro sequence ``rho_t``::

    theta_{t+1} = theta_t - (epsilon / N) grad_theta L~(theta_t, lambda_t)
    lambda_{t+1} = lambda_t - rho_t (|theta_t - m|^2 / 2 - P / (2 lambda_t))

(:func:`variational_em`). ``epsilon`` is the learning rate on the averaged loss (the
KL-optimal one of Theorem 1, :func:`sgsim.theory.kl.optimal_lr`, when ``C`` is known or
estimated); the ``lambda`` gradient is exact (it needs no data). Its fixed point solves
``E_{q_lambda} |theta - m|^2 = P / lambda``: the variational EM update of the prior precision
under ``q``. (With exact gradients ``q`` is a point mass at the MAP and the iteration is
drawn to the degenerate maximiser ``theta = m``, ``lambda = inf`` of eq. 35; the gradient
noise is what keeps ``E_q |theta - m|^2`` away from 0.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import rng as _rng
from ._jit import jit
from ._validate import ParameterError, ParameterTypeError, boolean, finite_array, integer, positive_float, real
from .targets.regression import per_example_gradients

__all__ = ["OnlineNoiseCovariance", "bias_factor", "estimate_noise_covariance", "VEMResult", "variational_em"]


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


# ----------------------------------------------------------------------------- eq. 22


@dataclass(frozen=True)
class VEMResult:
    """What :func:`variational_em` returns.

    Attributes
    ----------
    theta : ndarray, shape (d,)
        The last iterate.
    prior_precision : ndarray, shape (n_records,)
        ``lambda_t`` after every ``record_every``-th step.
    sq_norm : ndarray, shape (n_records,)
        ``|theta_t - m|^2`` at the same steps.
    steps : ndarray of int, shape (n_records,)
        The step counts ``t`` (1-based) of the records.
    n_params : int
        ``P``, the number of parameters under the prior.
    """

    theta: np.ndarray
    prior_precision: np.ndarray
    sq_norm: np.ndarray
    steps: np.ndarray
    n_params: int


@jit(cache=False)
def _vem_loop(theta, lam, stochastic_grad_u, params, st, work, scale, rho0, kappa, n_steps, every, lam_out, sq_out):
    # params = (X, y, lik, prior_mean, prior_precision, batch_size, replace) of a data target:
    # its minibatch gradient carries the target's own prior, replaced here by lambda's
    mean, prec = params[3], params[4]
    d = theta.shape[0]
    g = np.empty(d)
    p_half = 0.5 * d
    r = 0
    for t in range(n_steps):
        stochastic_grad_u(theta, params, g, st, work)
        sq = 0.0
        for j in range(d):
            dev = theta[j] - mean[j]
            g[j] += (lam - prec[j]) * dev
            sq += dev * dev
        new_lam = lam - rho0 * (t + 1.0) ** (-kappa) * (0.5 * sq - p_half / lam)
        for j in range(d):
            theta[j] -= scale * g[j]
        lam = new_lam
        if not (lam > 0.0 and math.isfinite(lam)):
            return t + 1, lam
        if (t + 1) % every == 0:
            lam_out[r] = lam
            sq_out[r] = sq
            r += 1
    return -1, lam


def variational_em(
    target, n_steps: int, *, lr: float, prior_precision: float, rho0: float, kappa: float = 0.6, seed: int,
    init=None, record_every: int = 1,
) -> VEMResult:  # fmt: skip
    """Eq. 22: constant SGD on ``theta`` and Robbins-Monro on the prior precision ``lambda``.

    Parameters
    ----------
    target : Target
        A data target with minibatch gradients (:mod:`sgsim.targets`); its own prior
        precision is replaced by ``lambda_t`` at every step, its prior mean ``m`` kept.
    n_steps : int
        Steps ``t = 1 .. n_steps``.
    lr : float
        ``epsilon``, the learning rate on the averaged loss (the step on ``U`` is ``epsilon / N``).
    prior_precision : float
        ``lambda_0 > 0``.
    rho0, kappa : float
        ``rho_t = rho0 t^{-kappa}`` with ``kappa`` in (1/2, 1] (Robbins-Monro).
    seed : int
        The minibatches come from the stream of chain 0 of ``seed`` (as ``sgsim.sample`` would
        draw them).
    init : array_like, optional
        ``theta_0``; the prior mean by default.
    record_every : int
        Keep ``lambda_t`` and ``|theta_t - m|^2`` every this many steps.

    Raises
    ------
    FloatingPointError
        If ``lambda`` leaves ``(0, inf)``: ``rho0`` is too large for this problem.
    """
    if target.stochastic_grad_u is None:
        raise ParameterTypeError(
            "target", f"target {target.name!r} has no minibatch gradient (a data target is needed)"
        )
    n_steps = integer("n_steps", n_steps, low=1)
    lr = positive_float("lr", lr)
    lam0 = positive_float("prior_precision", prior_precision)
    rho0 = positive_float("rho0", rho0)
    kappa = real("kappa", kappa, 0.5, 1.0, low_open=True)
    every = integer("record_every", record_every, low=1)
    seed = integer("seed", seed)
    n_data = target.extras["n_data"]
    mean = np.asarray(target.params[3], float)
    theta = mean.copy() if init is None else finite_array("init", init, (target.dim,)).copy()
    n_rec = n_steps // every
    lam_out, sq_out = np.empty(n_rec), np.empty(n_rec)
    st = _rng.chain_states(seed, 1)[0].copy()
    work = target.new_workspace()
    failed, lam = _vem_loop(
        theta, lam0, target.stochastic_grad_u, target.params, st, work, lr / n_data, rho0, kappa, n_steps, every,
        lam_out, sq_out,
    )  # fmt: skip
    if failed >= 0:
        raise FloatingPointError(
            f"the prior precision left (0, inf) at step {failed} (lambda = {lam:.4g}): reduce rho0 ({rho0:g}), "
            f"or lr ({lr:g}) if the weights diverge (|theta - m|^2 = {float(np.sum((theta - mean) ** 2)):.4g})"
        )
    steps = every * np.arange(1, n_rec + 1)
    return VEMResult(theta, lam_out, sq_out, steps, target.dim)

r"""Data-backed targets: Bayesian regression on arrays ``(X, y)`` with a Gaussian prior.

The potential is the negative log posterior, up to a constant,

.. math::

    U(\theta) = -\sum_{i=1}^N \log p(y_i \mid x_i, \theta)
                + \tfrac12 (\theta - m)^\top \operatorname{diag}(\lambda) (\theta - m),

and the minibatch gradient (THEORY section 0; [cSG] prints the factor as ``N'/N``, an
erratum, THEORY H1) is

.. math::

    \nabla\tilde U(\theta) = -\frac{N}{n} \sum_{i \in B} \nabla \log p(y_i \mid x_i, \theta)
                              + \operatorname{diag}(\lambda) (\theta - m),

unbiased for ``grad U`` whether the ``n`` indices of ``B`` are drawn with replacement (iid
uniform) or without (a uniform ``n``-subset). Its covariance is
``N^2 (C / n) f`` with ``C = (1/N) sum_i (g_i - g_bar)(g_i - g_bar)^T`` the per-example
covariance of ``g_i = grad log p(y_i | x_i, theta)`` and ``f = 1`` with replacement,
``f = (N - n) / (N - 1)`` without ([external], THEORY section 0):
:func:`minibatch_gradient_covariance`.

How it is built
---------------
A :class:`Likelihood` names two compiled per-example functions,

* ``log_lik(theta, X, i, y, lik) -> float``: ``log p(y[i] | X[i], theta)``;
* ``grad_log_lik(theta, X, i, y, lik, weight, out)``: adds
  ``weight * grad_theta log p(y[i] | X[i], theta)`` into ``out``,

where ``lik`` is a float64 array of the family's own constants (empty for the logistic
model; a noise precision for linear regression, the number of classes for softmax
regression). :func:`data_target` compiles, once per family and process, the exact
``grad_u``, the minibatch ``stochastic_grad_u`` and the log density around them, and
builds the :class:`~sgsim.targets.Target`. :func:`logistic_regression` is the first
family; linear and softmax regression need only their two per-example functions.

Minibatches
-----------
The indices are drawn from the chain's own stream (``sgsim.rng``: spawn key ``(c, 0)``),
at each step before its Gaussian noise, so a chain's bits depend only on ``(seed, c)``.
With replacement: ``n`` draws of ``integers(rng, 0, N)`` (NumPy's ``Generator.integers``,
bit for bit). Without replacement: a partial Fisher-Yates shuffle of the chain's permutation
buffer ``work`` (the target's ``workspace``, initially ``0..N-1``, kept from step to step):
for ``j < n`` swap ``work[j]`` with ``work[j + integers(rng, 0, N - j)]`` and use ``work[j]``. Whatever
permutation the buffer holds, this gives a uniform random ``n``-subset (in uniform random
order), and it allocates nothing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._jit import jit
from .._validate import ParameterError, ParameterTypeError, boolean, finite_array, integer, positive_float
from ..datasets import load, standardise_features
from ..rng import integers
from ._base import Target, TargetExtras, factory

__all__ = [
    "Likelihood",
    "LOGISTIC",
    "data_target",
    "logistic_regression",
    "noise_factor",
    "per_example_gradients",
    "minibatch_gradient_covariance",
]


@dataclass(frozen=True)
class Likelihood:
    """A per-example likelihood family ``p(y_i | x_i, theta)`` with compiled pieces.

    Attributes
    ----------
    name : str
        Family name (``"logistic"``).
    log_lik : numba-compiled function
        ``log_lik(theta, X, i, y, lik) -> float``.
    grad_log_lik : numba-compiled function
        ``grad_log_lik(theta, X, i, y, lik, weight, out)`` adds ``weight`` times the gradient
        of ``log_lik`` with respect to ``theta`` into ``out``.
    """

    name: str
    log_lik: Callable
    grad_log_lik: Callable


# ----------------------------------------------------------------------------- logistic


@jit(inline=True)
def _dot_row(theta, X, i):
    z = 0.0
    for j in range(theta.shape[0]):
        z += X[i, j] * theta[j]
    return z


@jit(inline=True)
def _logistic_log_lik(theta, X, i, y, lik):
    # y z - log(1 + e^z), with log(1 + e^z) = max(z, 0) + log1p(e^-|z|) (no overflow)
    z = _dot_row(theta, X, i)
    return y[i] * z - (max(z, 0.0) + math.log1p(math.exp(-abs(z))))


@jit(inline=True)
def _logistic_grad_log_lik(theta, X, i, y, lik, weight, out):
    # d/dtheta log p(y | x, theta) = (y - sigmoid(x . theta)) x
    z = _dot_row(theta, X, i)
    if z >= 0.0:
        p = 1.0 / (1.0 + math.exp(-z))
    else:
        e = math.exp(z)
        p = e / (1.0 + e)
    r = weight * (y[i] - p)
    for j in range(theta.shape[0]):
        out[j] += r * X[i, j]


#: Bernoulli likelihood with the logit link: ``p(y = 1 | x, theta) = sigmoid(x . theta)``.
LOGISTIC = Likelihood("logistic", _logistic_log_lik, _logistic_grad_log_lik)


# ----------------------------------------------------------------------------- compiled target functions


@dataclass(frozen=True)
class _Compiled:
    grad_u: Callable
    stochastic_grad_u: Callable
    log_density: Callable
    example_gradients: Callable


@functools.cache
def _compile(likelihood: Likelihood) -> _Compiled:
    """The target functions of one family (compiled on first call, once per process)."""
    log_lik = likelihood.log_lik
    grad_log_lik = likelihood.grad_log_lik

    # params = (X, y, lik, prior_mean, prior_precision, batch_size, replace); these closures
    # capture compiled functions, which numba cannot cache on disk

    @jit(cache=False)
    def grad_u(theta, params, out):
        """Exact ``grad U``: all ``N`` examples and the prior."""
        X, y, lik, mean, prec, _, _ = params
        for j in range(out.shape[0]):
            out[j] = 0.0
        for i in range(X.shape[0]):
            grad_log_lik(theta, X, i, y, lik, -1.0, out)
        for j in range(out.shape[0]):
            out[j] += prec[j] * (theta[j] - mean[j])

    @jit(cache=False)
    def stochastic_grad_u(theta, params, out, rng, work):
        """Minibatch ``grad U`` with the ``N/n`` factor; indices drawn from the stream ``rng``."""
        X, y, lik, mean, prec, n, replace = params
        N = X.shape[0]
        weight = -N / n
        for j in range(out.shape[0]):
            out[j] = 0.0
        if replace:
            for _ in range(n):
                grad_log_lik(theta, X, integers(rng, 0, N), y, lik, weight, out)
        else:
            for j in range(n):
                r = j + integers(rng, 0, N - j)  # partial Fisher-Yates on the chain's permutation
                i = work[r]
                work[r] = work[j]
                work[j] = i
                grad_log_lik(theta, X, i, y, lik, weight, out)
        for j in range(out.shape[0]):
            out[j] += prec[j] * (theta[j] - mean[j])

    @jit(cache=False)
    def log_density(theta, params):
        """``-U(theta)``: log likelihood plus the Gaussian prior's quadratic form (unnormalised)."""
        X, y, lik, mean, prec, _, _ = params
        acc = 0.0
        for i in range(X.shape[0]):
            acc += log_lik(theta, X, i, y, lik)
        for j in range(theta.shape[0]):
            acc -= 0.5 * prec[j] * (theta[j] - mean[j]) ** 2
        return acc

    @jit(cache=False)
    def example_gradients(theta, params, out):
        """Row ``i`` of ``out`` = ``grad log p(y_i | x_i, theta)`` (no prior)."""
        X, y, lik, _, _, _, _ = params
        for i in range(X.shape[0]):
            for j in range(out.shape[1]):
                out[i, j] = 0.0
            grad_log_lik(theta, X, i, y, lik, 1.0, out[i])

    return _Compiled(grad_u, stochastic_grad_u, log_density, example_gradients)


# ----------------------------------------------------------------------------- constructors


def noise_factor(n_data: int, batch_size: int, replace: bool) -> float:
    """Finite-population factor ``f`` of the minibatch covariance ``N^2 (C/n) f`` (THEORY 0).

    1 with replacement; ``(N - n) / (N - 1)`` without (0 when ``n = N``: the full batch).
    """
    n_data = integer("n_data", n_data, low=1)
    batch_size = integer("batch_size", batch_size, low=1)
    if replace:
        return 1.0
    if batch_size > n_data:
        raise ParameterError("batch_size", f"batch_size ({batch_size}) exceeds the number of data points ({n_data})")
    return (n_data - batch_size) / (n_data - 1) if n_data > 1 else 0.0


def data_target(
    likelihood: Likelihood,
    X,
    y,
    *,
    prior_precision,
    prior_mean=None,
    lik_params=None,
    batch_size: int | None = None,
    replace: bool = False,
    init_box: float = 1.0,
    name: str = "data_target",
    extras: TargetExtras | None = None,
) -> Target:
    """A Bayesian model on data arrays with a Gaussian prior, as a :class:`Target`.

    ``theta`` has one entry per column of ``X`` (families whose parameter has another shape,
    e.g. softmax regression's ``D x K`` matrix, will pass their own ``dim``-carrying layout
    through ``lik_params``).

    Parameters
    ----------
    likelihood : Likelihood
        The per-example family (e.g. :data:`LOGISTIC`).
    X : array_like, shape (N, d)
        Design matrix, used as given (see :func:`logistic_regression` for standardising and
        the intercept).
    y : array_like, shape (N,)
        Responses, as floats (class labels as 0., 1., ...).
    prior_precision : float or array_like, shape (d,)
        Diagonal precision ``lambda`` of the Gaussian prior (``1 / prior_scale^2``).
    prior_mean : array_like, shape (d,), optional
        ``m``; zero when omitted.
    lik_params : array_like, optional
        The family's constants, passed to its per-example functions as ``lik``.
    batch_size : int, optional
        Minibatch size ``n`` (``1 <= n``, ``n <= N`` without replacement). When omitted the
        target has the exact gradient only (full batch, no ``stochastic_grad_u``).
    replace : bool
        Draw the minibatch with replacement (iid indices) instead of without.
    init_box : float
        Default initial points are uniform on ``[-init_box, init_box]^d``.
    name : str
        Name recorded in results.
    extras : dict, optional
        More entries for ``Target.extras``.
    """
    X = np.ascontiguousarray(finite_array("X", X))
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ParameterError("X", f"X must have shape (N, d) with N, d >= 1, got {X.shape}")
    n_data, d = X.shape
    y = np.ascontiguousarray(finite_array("y", y, (n_data,)))
    prec = np.ascontiguousarray(np.broadcast_to(finite_array("prior_precision", prior_precision), (d,)), np.float64)
    if not np.all(prec > 0):
        raise ParameterError("prior_precision", "prior_precision must be > 0 (a proper Gaussian prior)")
    mean = np.zeros(d) if prior_mean is None else np.ascontiguousarray(finite_array("prior_mean", prior_mean, (d,)))
    lik = np.zeros(0) if lik_params is None else np.ascontiguousarray(finite_array("lik_params", lik_params).ravel())
    replace = boolean("replace", replace)
    init_box = positive_float("init_box", init_box)
    compiled = _compile(likelihood)
    if batch_size is None:
        n, factor, stochastic, workspace = n_data, 0.0, None, np.zeros(0, dtype=np.int64)
        description = f"exact gradient over all N = {n_data} examples"
    else:
        n = integer("batch_size", batch_size, low=1)
        factor = noise_factor(n_data, n, replace)
        stochastic = compiled.stochastic_grad_u
        # the permutation that sampling without replacement shuffles in place, one per chain
        workspace = np.zeros(0, dtype=np.int64) if replace else np.arange(n_data, dtype=np.int64)
        how = "with replacement (iid indices)" if replace else "without replacement (partial Fisher-Yates)"
        description = f"minibatch of n = {n} of N = {n_data} examples, {how}, scaled by N/n"
    info = TargetExtras(
        family=likelihood,
        likelihood=likelihood.name,
        X=X,
        y=y,
        n_data=n_data,
        batch_size=n,
        replace=replace,
        noise_factor=factor,
        prior_mean=mean,
        prior_precision=prec,
        lik_params=lik,
        stochastic_gradient=description,
    )
    info.update(extras or TargetExtras())
    return Target(
        name=name,
        dim=d,
        grad_u=compiled.grad_u,
        log_density_fn=compiled.log_density,
        params=(X, y, lik, mean, prec, np.int64(n), replace),
        grad_noise_cov=np.zeros((d, d)),
        init_low=np.full(d, -init_box),
        init_high=np.full(d, init_box),
        extras=info,
        stochastic_grad_u=stochastic,
        workspace=workspace,
    )


def _prior_precision(prior_scale: float) -> float:
    # 1 / s^2 in two divisions, so that an extreme scale gives 0 or inf instead of OverflowError
    prec = 1.0 / prior_scale / prior_scale
    if not (np.isfinite(prec) and prec > 0):
        raise ParameterError(
            "prior_scale", f"prior_scale = {prior_scale:g} gives a prior precision 1 / prior_scale^2 of {prec:g}"
        )
    return prec


@factory("logistic_regression")
def logistic_regression(
    X=None,
    y=None,
    *,
    dataset: str | None = None,
    prior_scale: float = 10.0,
    batch_size: int | None = None,
    replace: bool = False,
    standardise: bool = True,
    intercept: bool = True,
    init_box: float = 1.0,
    name: str = "logistic_regression",
) -> Target:
    """Bayesian logistic regression ``p(y_i = 1 | x_i, theta) = sigmoid(x_i . theta)``.

    Prior ``theta ~ N(0, prior_scale^2 I)`` on every coefficient, the intercept included.
    The data are either arrays ``(X, y)`` or a shipped data set named by ``dataset``; a run
    on the latter records only the name, and replays from it.

    Parameters
    ----------
    X : array_like, shape (N, p), optional
        Features, without an intercept column.
    y : array_like, shape (N,), optional
        Labels in {0, 1}.
    dataset : str, optional
        A key of :data:`sgsim.datasets.DATASETS` (``"australian"``, ``"german"``, ``"heart"``),
        loaded unstandardised, instead of ``X`` and ``y``.
    prior_scale : float
        Prior standard deviation (10 by default: variance 100, the usual choice for these
        data sets since Girolami and Calderhead, 2011).
    batch_size : int, optional
        Minibatch size ``n``; omitted: exact full-data gradient only.
    replace : bool
        Minibatches with replacement (default: without).
    standardise : bool
        Rescale each feature to mean 0 and sd 1 (:func:`standardise_features`) first; the
        means and scales are kept in ``extras``.
    intercept : bool
        Prepend a column of ones, so ``theta[0]`` is the intercept and ``dim = p + 1``.
    init_box : float
        Default initial points are uniform on ``[-init_box, init_box]^dim``.
    name : str
        Name recorded in results.
    """
    if dataset is not None:
        if X is not None or y is not None:
            raise ParameterError("dataset", "give either dataset or X and y, not both")
        X, y = load(dataset, standardise=False)
    elif X is None or y is None:
        raise ParameterError("X", "logistic_regression needs X and y, or a shipped dataset name")
    X = finite_array("X", X)
    if X.ndim != 2:
        raise ParameterError("X", f"X must have shape (N, p), got {X.shape}")
    y = finite_array("y", y, (X.shape[0],))
    if not np.all((y == 0) | (y == 1)):
        raise ParameterError("y", "y must contain only the labels 0 and 1")
    prior_scale = positive_float("prior_scale", prior_scale)
    extras = TargetExtras(standardised=bool(standardise), intercept=bool(intercept), prior_scale=prior_scale)
    if dataset is not None:
        extras["dataset"] = dataset
    if standardise:
        X, feature_mean, feature_scale = standardise_features(X)
        extras["feature_mean"] = feature_mean
        extras["feature_scale"] = feature_scale
    if intercept:
        X = np.hstack([np.ones((X.shape[0], 1)), X])
    return data_target(
        LOGISTIC,
        X,
        y,
        prior_precision=_prior_precision(prior_scale),
        batch_size=batch_size,
        replace=replace,
        init_box=init_box,
        name=name,
        extras=extras,
    )


# ----------------------------------------------------------------------------- exact noise law


def _family(target: Target) -> Likelihood:
    family = target.extras.get("family")
    if not isinstance(family, Likelihood):
        raise ParameterTypeError(
            "target", f"target {target.name!r} is not a data-backed target (sgsim.targets.regression)"
        )
    return family


def per_example_gradients(target: Target, theta) -> np.ndarray:
    """``grad_theta log p(y_i | x_i, theta)`` for every example, shape ``(N, d)`` (no prior)."""
    family = _family(target)
    theta = np.ascontiguousarray(finite_array("theta", theta, (target.dim,)))
    out = np.empty((target.extras["n_data"], target.dim))
    _compile(family).example_gradients(theta, target.params, out)
    return out


def minibatch_gradient_covariance(target: Target, theta, batch_size: int | None = None, replace=None) -> np.ndarray:
    """Covariance of the minibatch gradient at ``theta``: ``N^2 (C / n) f`` (THEORY section 0).

    ``C = (1/N) sum_i (g_i - g_bar)(g_i - g_bar)^T`` over the per-example gradients, and
    ``f`` is :func:`noise_factor` (1 with replacement, ``(N - n)/(N - 1)`` without).

    Parameters
    ----------
    target : Target
        A data-backed target.
    theta : array_like, shape (d,)
        The point.
    batch_size, replace : optional
        Override the target's own ``n`` and sampling mode (e.g. for a negative control).
    """
    g = per_example_gradients(target, theta)
    n_data = g.shape[0]
    n = target.extras["batch_size"] if batch_size is None else batch_size
    replace = target.extras["replace"] if replace is None else replace
    dev = g - g.mean(axis=0)
    c = dev.T @ dev / n_data
    return n_data**2 * c / n * noise_factor(n_data, n, bool(replace))

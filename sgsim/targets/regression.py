r"""Data-backed targets: Bayesian regression on arrays ``(X, y)`` with a Gaussian prior.

The potential is the negative log posterior, up to a constant,

.. math::

    U(\theta) = -\sum_{i=1}^N \log p(y_i \mid x_i, \theta)
                + \tfrac12 (\theta - m)^\top \operatorname{diag}(\lambda) (\theta - m),

and the minibatch gradient (:ref:`theory-conventions`; [cSG] prints the factor as ``N'/N``, an
erratum, :ref:`erratum-minibatch-factor`) is

.. math::

    \nabla\tilde U(\theta) = -\frac{N}{n} \sum_{i \in B} \nabla \log p(y_i \mid x_i, \theta)
                              + \operatorname{diag}(\lambda) (\theta - m),

unbiased for ``grad U`` whether the ``n`` indices of ``B`` are drawn with replacement (iid
uniform) or without (a uniform ``n``-subset). Its covariance is
``N^2 (C / n) f`` with ``C = (1/N) sum_i (g_i - g_bar)(g_i - g_bar)^T`` the per-example
covariance of ``g_i = grad log p(y_i | x_i, theta)`` and ``f = 1`` with replacement,
``f = (N - n) / (N - 1)`` without ([external], :ref:`theory-conventions`):
``minibatch_gradient_covariance``.

How it is built
---------------
A :class:`Likelihood` names two compiled per-example functions,

* ``log_lik(theta, X, i, y, lik) -> float``: ``log p(y[i] | X[i], theta)``;
* ``grad_log_lik(theta, X, i, y, lik, weight, out)``: adds
  ``weight * grad_theta log p(y[i] | X[i], theta)`` into ``out``,

where ``lik`` is a float64 array of the family's own constants (empty for the logistic
model; the noise precision ``tau`` for linear regression; the number of classes ``K`` for
softmax regression). Around them, each family has the exact ``grad_u``, the minibatch
``stochastic_grad_u`` and the log density, and :func:`~sgsim.targets.data_target` builds the
:class:`~sgsim.targets.Target` from them. The shipped families' are module-level functions,
kept in numba's disk cache with the sampling loops that call them, so a second process
starts sampling without compiling; a family of one's own is compiled once per process. The
shipped families:

* :func:`~sgsim.targets.logistic_regression`: ``p(y = 1 | x, theta) = sigmoid(x . theta)``;
* :func:`~sgsim.targets.linear_regression`: ``y ~ N(x . theta, 1 / tau)``, conjugate to the Gaussian prior,
  so its target also carries the exact posterior (mean, covariance, exact draws);
* :func:`~sgsim.targets.softmax_regression`: ``p(y = k | x, theta) = exp(x . theta_k) / sum_l exp(x .
  theta_l)``, the multinomial logistic model of "Stochastic Gradient Descent as Approximate
  Bayesian Inference" (eq. 35), ``theta`` the flattened ``p x K`` weight matrix.

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

import dataclasses
import functools
import math
import types
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .._jit import jit
from .._validate import (
    ParameterError,
    ParameterTypeError,
    boolean,
    finite_array,
    finite_values,
    fits_in_memory,
    integer,
    positive_float,
)
from ..datasets import DATASETS, load, standardise_features
from ..rng import integers
from ._base import Target, TargetExtras, factory

__all__ = [
    "Likelihood",
    "LOGISTIC",
    "LINEAR",
    "SOFTMAX",
    "data_target",
    "logistic_regression",
    "linear_regression",
    "softmax_regression",
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
        Family name (``"logistic"``, ``"linear"``, ``"softmax"``).
    log_lik : numba-compiled function
        ``log_lik(theta, X, i, y, lik) -> float``.
    grad_log_lik : numba-compiled function
        ``grad_log_lik(theta, X, i, y, lik, weight, out)`` adds ``weight`` times the gradient
        of ``log_lik`` with respect to ``theta`` into ``out``.
    n_params : callable, optional
        ``n_params(p, lik) -> int``, the length of ``theta`` for ``p`` columns of ``X``;
        ``p`` when omitted (one coefficient per column).
    check : callable, optional
        ``check(y, lik)`` raises a ``ParameterError`` naming ``y`` or
        ``lik_params`` if the responses or the constants do not suit the family (e.g. a class
        label that would index outside ``theta``); called by :func:`~sgsim.targets.data_target`.
    """

    name: str
    log_lik: Callable
    grad_log_lik: Callable
    n_params: Callable[[int, np.ndarray], int] | None = None
    check: Callable[[np.ndarray, np.ndarray], None] | None = None


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


# ----------------------------------------------------------------------------- linear


@jit(inline=True)
def _linear_log_lik(theta, X, i, y, lik):
    # log N(y | x . theta, 1 / tau), normalised, with tau = lik[0]
    tau = lik[0]
    r = y[i] - _dot_row(theta, X, i)
    return 0.5 * math.log(tau / (2.0 * math.pi)) - 0.5 * tau * r * r


@jit(inline=True)
def _linear_grad_log_lik(theta, X, i, y, lik, weight, out):
    # d/dtheta log p(y | x, theta) = tau (y - x . theta) x
    r = weight * lik[0] * (y[i] - _dot_row(theta, X, i))
    for j in range(theta.shape[0]):
        out[j] += r * X[i, j]


def _check_linear(y, lik) -> None:
    if lik.shape != (1,) or not lik[0] > 0:
        raise ParameterError("lik_params", f"linear regression takes lik_params = [tau] with tau > 0, got {lik}")


#: Gaussian likelihood with known noise precision ``tau = lik[0]``: ``y ~ N(x . theta, 1 / tau)``.
LINEAR = Likelihood("linear", _linear_log_lik, _linear_grad_log_lik, check=_check_linear)


# ----------------------------------------------------------------------------- softmax


@jit(inline=True)
def _class_logit(theta, X, i, k, n_classes):
    # x_i . theta_{.k}, with theta[j K + k] the weight of feature j for class k
    z = 0.0
    for j in range(X.shape[1]):
        z += X[i, j] * theta[j * n_classes + k]
    return z


@jit(inline=True)
def _log_sum_exp_logits(theta, X, i, n_classes):
    # log sum_k exp(z_k) in one pass: the sum is kept relative to the running maximum, rescaled
    # when the maximum grows, so no exponent is ever positive (no overflow) and no buffer is needed
    top = _class_logit(theta, X, i, 0, n_classes)
    acc = 1.0
    for k in range(1, n_classes):
        z = _class_logit(theta, X, i, k, n_classes)
        if z > top:
            acc = acc * math.exp(top - z) + 1.0
            top = z
        else:
            acc += math.exp(z - top)
    return top + math.log(acc)


@jit(inline=True)
def _softmax_log_lik(theta, X, i, y, lik):
    n_classes = int(lik[0])
    return _class_logit(theta, X, i, int(y[i]), n_classes) - _log_sum_exp_logits(theta, X, i, n_classes)


@jit(inline=True)
def _softmax_grad_log_lik(theta, X, i, y, lik, weight, out):
    # d/dtheta_{jk} log p(y | x, theta) = x_j (1[y = k] - softmax_k), softmax_k = exp(z_k - lse)
    n_classes = int(lik[0])
    lse = _log_sum_exp_logits(theta, X, i, n_classes)
    label = int(y[i])
    for k in range(n_classes):
        indicator = 1.0 if k == label else 0.0
        r = weight * (indicator - math.exp(_class_logit(theta, X, i, k, n_classes) - lse))
        for j in range(X.shape[1]):
            out[j * n_classes + k] += r * X[i, j]


def _softmax_n_params(p: int, lik: np.ndarray) -> int:
    return p * int(lik[0])


def _check_labels(y: np.ndarray, n_classes: int | None) -> None:
    # class labels index theta's columns without bounds checks: each must be an integer in 0..K-1
    top = np.inf if n_classes is None else n_classes
    bad = np.flatnonzero((y != np.round(y)) | (y < 0) | (y >= top))
    if bad.size:
        labels = "0, 1, 2, ..." if n_classes is None else f"0, ..., {n_classes - 1}"
        raise ParameterError(
            "y", f"y must hold class labels {labels} (integers, as floats); y[{bad[0]}] = {y[bad[0]]:g}"
        )


def _check_softmax(y, lik) -> None:
    if lik.shape != (1,) or not (lik[0] >= 2 and lik[0] == round(lik[0])):
        raise ParameterError("lik_params", f"softmax regression takes lik_params = [K], an integer K >= 2, got {lik}")
    _check_labels(y, int(lik[0]))


#: Multinomial logistic likelihood over ``K = lik[0]`` classes; ``theta`` is the ``p x K``
#: weight matrix flattened row by row (``theta[j * K + k]``: feature ``j``, class ``k``).
SOFTMAX = Likelihood(
    "softmax", _softmax_log_lik, _softmax_grad_log_lik, n_params=_softmax_n_params, check=_check_softmax
)


# ----------------------------------------------------------------------------- compiled target functions

# The four functions of a target are written once, below, as templates that call the
# placeholders ``_log_lik`` and ``_grad_log_lik``; :func:`_specialise` makes a family's copy, the
# same bytecode with the placeholders bound to the family's compiled per-example functions.
# The shipped families' copies are module-level functions compiled with the disk cache, so that
# numba keeps their machine code and the sampling loops that call them
# (:mod:`sgsim.integrators._kernel_cache` imports them by name) from one process to the next;
# closures over compiled functions, which these replace, were compiled again in every process.


def _log_lik(theta, X, i, y, lik):
    raise NotImplementedError("a template's placeholder: call a family's copy (see _specialise)")


def _grad_log_lik(theta, X, i, y, lik, weight, out):
    raise NotImplementedError("a template's placeholder: call a family's copy (see _specialise)")


# params = (X, y, lik, prior_mean, prior_precision, batch_size, replace)


def _grad_u(theta, params, out):
    """Exact ``grad U``: all ``N`` examples and the prior."""
    X, y, lik, mean, prec, _, _ = params
    for j in range(out.shape[0]):
        out[j] = 0.0
    for i in range(X.shape[0]):
        _grad_log_lik(theta, X, i, y, lik, -1.0, out)
    for j in range(out.shape[0]):
        out[j] += prec[j] * (theta[j] - mean[j])


def _stochastic_grad_u(theta, params, out, rng, work):
    """Minibatch ``grad U`` with the ``N/n`` factor; indices drawn from the stream ``rng``."""
    X, y, lik, mean, prec, n, replace = params
    N = X.shape[0]
    weight = -N / n
    for j in range(out.shape[0]):
        out[j] = 0.0
    if replace:
        for _ in range(n):
            _grad_log_lik(theta, X, integers(rng, 0, N), y, lik, weight, out)
    else:
        for j in range(n):
            r = j + integers(rng, 0, N - j)  # partial Fisher-Yates on the chain's permutation
            i = work[r]
            work[r] = work[j]
            work[j] = i
            _grad_log_lik(theta, X, i, y, lik, weight, out)
    for j in range(out.shape[0]):
        out[j] += prec[j] * (theta[j] - mean[j])


def _log_density(theta, params):
    """``-U(theta)``: log likelihood plus the Gaussian prior's quadratic form (unnormalised)."""
    X, y, lik, mean, prec, _, _ = params
    acc = 0.0
    for i in range(X.shape[0]):
        acc += _log_lik(theta, X, i, y, lik)
    for j in range(theta.shape[0]):
        acc -= 0.5 * prec[j] * (theta[j] - mean[j]) ** 2
    return acc


def _example_gradients(theta, params, out):
    """Row ``i`` of ``out`` = ``grad log p(y_i | x_i, theta)`` (no prior)."""
    X, y, lik, _, _, _, _ = params
    for i in range(X.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = 0.0
        _grad_log_lik(theta, X, i, y, lik, 1.0, out[i])


@dataclass(frozen=True)
class _Compiled:
    grad_u: Callable
    stochastic_grad_u: Callable
    log_density: Callable
    example_gradients: Callable


def _specialise(likelihood: Likelihood, *, cache: bool) -> _Compiled:
    """The four target functions of ``likelihood``: copies of the templates, compiled lazily.

    Each copy has the template's code and a namespace of its own in which the placeholders
    are the family's ``log_lik`` and ``grad_log_lik``, so its arithmetic is the template's,
    operation for operation. Its name, ``_<family>_<template>`` (e.g. ``_logistic_grad_u``),
    is the module attribute that the shipped families' copies are bound to: numba names its
    cache files after it, and the loop cache imports the copy under it.

    Parameters
    ----------
    likelihood : Likelihood
        The family.
    cache : bool
        Compile with numba's disk cache. Only for functions defined in this file: numba checks
        a cached function against its own source file, which would miss an edit of a user's
        family defined elsewhere.
    """
    namespace = {**globals(), "_log_lik": likelihood.log_lik, "_grad_log_lik": likelihood.grad_log_lik}
    copies = []
    for template in (_grad_u, _stochastic_grad_u, _log_density, _example_gradients):
        name = f"_{likelihood.name}{template.__name__}"
        func = types.FunctionType(template.__code__, namespace, name)
        func.__qualname__ = name
        func.__doc__ = template.__doc__
        copies.append(jit(func, cache=cache))
    return _Compiled(*copies)


_LOGISTIC = _specialise(LOGISTIC, cache=True)
_logistic_grad_u = _LOGISTIC.grad_u
_logistic_stochastic_grad_u = _LOGISTIC.stochastic_grad_u
_logistic_log_density = _LOGISTIC.log_density
_logistic_example_gradients = _LOGISTIC.example_gradients

_LINEAR = _specialise(LINEAR, cache=True)
_linear_grad_u = _LINEAR.grad_u
_linear_stochastic_grad_u = _LINEAR.stochastic_grad_u
_linear_log_density = _LINEAR.log_density
_linear_example_gradients = _LINEAR.example_gradients

_SOFTMAX = _specialise(SOFTMAX, cache=True)
_softmax_grad_u = _SOFTMAX.grad_u
_softmax_stochastic_grad_u = _SOFTMAX.stochastic_grad_u
_softmax_log_density = _SOFTMAX.log_density
_softmax_example_gradients = _SOFTMAX.example_gradients

_SHIPPED = {LOGISTIC: _LOGISTIC, LINEAR: _LINEAR, SOFTMAX: _SOFTMAX}


@functools.cache
def _compile(likelihood: Likelihood) -> _Compiled:
    """The target functions of one family: the shipped ones, or a user family's, compiled in memory.

    A user's family is compiled once per process (its functions are defined outside this
    file: see :func:`_specialise`), and its sampling loops with it.
    """
    shipped = _SHIPPED.get(likelihood)
    return shipped if shipped is not None else _specialise(likelihood, cache=False)


# ----------------------------------------------------------------------------- constructors


def noise_factor(n_data: int, batch_size: int, replace: bool) -> float:
    """Finite-population factor ``f`` of the minibatch covariance ``N^2 (C/n) f`` (:ref:`theory-conventions`).

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

    ``theta`` has one entry per column of ``X``, or ``likelihood.n_params(p, lik_params)``
    entries for a family whose parameter has another shape (softmax regression: the ``p x K``
    weight matrix, flattened row by row).

    Parameters
    ----------
    likelihood : Likelihood
        The per-example family (e.g. ``LOGISTIC``).
    X : array_like, shape (N, d)
        Design matrix, used as given (see :func:`~sgsim.targets.logistic_regression` for standardising and
        the intercept).
    y : array_like, shape (N,)
        Responses, as floats (class labels as 0., 1., ...).
    prior_precision : float or array_like, shape (dim,)
        Diagonal precision ``lambda`` of the Gaussian prior (``1 / prior_scale^2``).
    prior_mean : array_like, shape (dim,), optional
        ``m``; zero when omitted.
    lik_params : array_like, optional
        The family's constants, passed to its per-example functions as ``lik`` and checked
        with ``y`` by ``likelihood.check``.
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
    n_data, p = X.shape
    y = np.ascontiguousarray(finite_array("y", y, (n_data,)))
    lik = np.zeros(0) if lik_params is None else np.ascontiguousarray(finite_array("lik_params", lik_params).ravel())
    if likelihood.check is not None:
        likelihood.check(y, lik)
    d = p if likelihood.n_params is None else integer("dim", likelihood.n_params(p, lik), low=1)
    prior = finite_array("prior_precision", prior_precision)
    if prior.ndim > 1 or prior.size not in (1, d):
        raise ParameterError(
            "prior_precision", f"prior_precision must be a number or have shape ({d},), got {prior.shape}"
        )
    prec = np.ascontiguousarray(np.broadcast_to(prior, (d,)), np.float64)
    if not np.all(prec > 0):
        raise ParameterError("prior_precision", "prior_precision must be > 0 (a proper Gaussian prior)")
    mean = np.zeros(d) if prior_mean is None else np.ascontiguousarray(finite_array("prior_mean", prior_mean, (d,)))
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


def _data(caller: str, X, y, dataset: str | None, tasks: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """``X`` and ``y`` checked, or loaded (unstandardised) from a shipped data set suited to ``tasks``."""
    if dataset is not None:
        if X is not None or y is not None:
            raise ParameterError("dataset", "give either dataset or X and y, not both")
        info = DATASETS.get(dataset) if isinstance(dataset, str) else None
        suited = [name for name, i in DATASETS.items() if i.task in tasks]
        if info is None:
            raise ParameterError("dataset", f"unknown data set {dataset!r}; {caller} takes {', '.join(suited)}")
        if info.task not in tasks:
            raise ParameterError(
                "dataset", f"{dataset!r} is a {info.task} data set; {caller} takes {', '.join(suited)}"
            )
        X, y = load(dataset, standardise=False)
    elif X is None or y is None:
        raise ParameterError("X", f"{caller} needs X and y, or a shipped dataset name")
    X = finite_array("X", X)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:  # no columns: a design without any feature
        raise ParameterError("X", f"X must have shape (N, p) with N >= 1 and p >= 1, got {X.shape}")
    y = finite_array("y", y, (X.shape[0],), allow_bool=True)  # labels may be booleans
    return X, y


def _design(X: np.ndarray, dataset, standardise: bool, intercept: bool, prior_scale: float):
    """The design matrix as the model sees it (standardised, intercept first) and its extras."""
    extras = TargetExtras(standardised=standardise, intercept=intercept, prior_scale=prior_scale)
    if dataset is not None:
        extras["dataset"] = dataset
    if standardise:
        X, feature_mean, feature_scale = standardise_features(X)
        extras["feature_mean"] = feature_mean
        extras["feature_scale"] = feature_scale
    if intercept:
        X = np.hstack([np.ones((X.shape[0], 1)), X])
    return X, extras


def _options(prior_scale, batch_size, replace, standardise, intercept, init_box):
    """The scalar options shared by the regression factories, checked before any data is read."""
    prior_scale = positive_float("prior_scale", prior_scale)
    prior_precision = _prior_precision(prior_scale)
    if batch_size is not None:
        integer("batch_size", batch_size, low=1)
    boolean("replace", replace)
    positive_float("init_box", init_box)
    return prior_scale, prior_precision, boolean("standardise", standardise), boolean("intercept", intercept)


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
        A binary data set of :data:`sgsim.datasets.DATASETS` (``"australian"``, ``"german"``,
        ``"heart"``, ``"fertility"``), loaded unstandardised, instead of ``X`` and ``y``.
    prior_scale : float
        Prior standard deviation (10 by default: variance 100, the usual choice for these
        data sets since Girolami and Calderhead, 2011).
    batch_size : int, optional
        Minibatch size ``n``; omitted: exact full-data gradient only.
    replace : bool
        Minibatches with replacement (default: without).
    standardise : bool
        Rescale each feature to mean 0 and sd 1 (:func:`~sgsim.datasets.standardise_features`) first; the
        means and scales are kept in ``extras``.
    intercept : bool
        Prepend a column of ones, so ``theta[0]`` is the intercept and ``dim = p + 1``.
    init_box : float
        Default initial points are uniform on ``[-init_box, init_box]^dim``.
    name : str
        Name recorded in results.
    """
    prior_scale, prior_precision, standardise, intercept = _options(
        prior_scale, batch_size, replace, standardise, intercept, init_box
    )
    X, y = _data("logistic_regression", X, y, dataset, ("binary",))
    if not np.all((y == 0) | (y == 1)):
        raise ParameterError("y", "y must contain only the labels 0 and 1")
    X, extras = _design(X, dataset, standardise, intercept, prior_scale)
    return data_target(
        LOGISTIC,
        X,
        y,
        prior_precision=prior_precision,
        batch_size=batch_size,
        replace=replace,
        init_box=init_box,
        name=name,
        extras=extras,
    )


def _gaussian_posterior(X: np.ndarray, y: np.ndarray, tau: float, prior_precision: float):
    """``P = tau X^T X + lambda I``, ``b = tau X^T y``, ``P^{-1} b``, ``P^{-1}`` and ``F`` with ``F F^T = P^{-1}``."""
    d = X.shape[1]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        precision = tau * (X.T @ X) + prior_precision * np.eye(d)
        precision = 0.5 * (precision + precision.T)
        shift = tau * (X.T @ y)
        hint = ": tau X^T X and tau X^T y must stay finite (lower noise_precision, or rescale X and y)"
        finite_values("noise_precision", precision, shift, hint=hint)
        try:
            chol = np.linalg.cholesky(precision)
        except np.linalg.LinAlgError:
            chol = None
        # a pivot at rounding level (condition number beyond 1 / (d eps)) leaves the inverse meaningless
        if chol is not None and not np.min(np.diag(chol)) ** 2 > d * np.finfo(float).eps * np.max(np.diag(precision)):
            chol = None
        if chol is not None:
            # P = L L^T gives P^{-1} = F F^T with F = L^{-T}: symmetric by construction, and F is
            # the factor of the exact sampler
            factor = np.linalg.solve(chol, np.eye(d)).T
            cov = factor @ factor.T
            mean = cov @ shift
    if chol is None or not (np.all(np.isfinite(cov)) and np.all(np.isfinite(mean))):
        raise ParameterError(
            "X",
            "the posterior precision tau X^T X + prior precision is not numerically positive definite "
            "(nearly collinear columns of X with a nearly flat prior)",
        )
    return precision, shift, mean, cov, factor


@factory("linear_regression")
def linear_regression(
    X=None,
    y=None,
    *,
    dataset: str | None = None,
    noise_precision: float = 1.0,
    prior_scale: float = 1.0,
    batch_size: int | None = None,
    replace: bool = False,
    standardise: bool = True,
    intercept: bool = True,
    init_box: float = 1.0,
    name: str = "linear_regression",
) -> Target:
    r"""Bayesian linear regression ``y_i ~ N(x_i . theta, 1 / tau)`` with known noise precision ``tau``.

    Prior ``theta ~ N(0, prior_scale^2 I)`` on every coefficient, the intercept included. The
    model is conjugate: the posterior is Gaussian,

    .. math::

        \theta \mid y \sim N(P^{-1} b, P^{-1}), \qquad
        P = \tau X^\top X + \lambda I, \quad b = \tau X^\top y, \quad \lambda = 1 / s^2,

    and ``U`` is exactly the quadratic ``theta^T P theta / 2 - b^T theta`` (plus a constant)
    of :func:`sgsim.targets.linear_gaussian`. The target carries it: ``mean`` and
    ``second_moment``, ``extras["covariance"]`` (``P^{-1}``), ``extras["precision"]`` (``P``,
    the Hessian of ``U``), ``extras["shift"]`` (``b``), and :meth:`~sgsim.targets.Target.exact_draws`.
    This is the linear-regression model of "Stochastic Gradient Descent as Approximate
    Bayesian Inference" (§7.1), where the stationary law of constant SGD is compared with
    this posterior.

    Parameters
    ----------
    X : array_like, shape (N, p), optional
        Features, without an intercept column.
    y : array_like, shape (N,), optional
        Real responses (used as given, never standardised).
    dataset : str, optional
        A regression data set of :data:`sgsim.datasets.DATASETS` (``"fair"``, ``"diamonds"``),
        loaded unstandardised, instead of ``X`` and ``y``.
    noise_precision : float
        ``tau > 0``, the inverse variance of the observation noise (stored as the family's
        constant ``lik_params = [tau]``).
    prior_scale : float
        Prior standard deviation (1 by default: the unit quadratic regulariser of the paper's
        §7.1).
    batch_size : int, optional
        Minibatch size ``n``; omitted: exact full-data gradient only.
    replace : bool
        Minibatches with replacement (default: without).
    standardise : bool
        Rescale each feature to mean 0 and sd 1 (:func:`~sgsim.datasets.standardise_features`) first; the
        means and scales are kept in ``extras``.
    intercept : bool
        Prepend a column of ones, so ``theta[0]`` is the intercept and ``dim = p + 1``.
    init_box : float
        Default initial points are uniform on ``[-init_box, init_box]^dim``.
    name : str
        Name recorded in results.
    """
    prior_scale, prior_precision, standardise, intercept = _options(
        prior_scale, batch_size, replace, standardise, intercept, init_box
    )
    tau = positive_float("noise_precision", noise_precision)
    X, y = _data("linear_regression", X, y, dataset, ("regression",))
    X, extras = _design(X, dataset, standardise, intercept, prior_scale)
    precision, shift, mean, cov, factor = _gaussian_posterior(X, y, tau, prior_precision)
    d = X.shape[1]

    def sampler(rng, n):
        return mean + rng.standard_normal((n, d)) @ factor.T

    extras.update(noise_precision=tau, precision=precision, shift=shift, covariance=cov)
    target = data_target(
        LINEAR,
        X,
        y,
        prior_precision=prior_precision,
        lik_params=[tau],
        batch_size=batch_size,
        replace=replace,
        init_box=init_box,
        name=name,
        extras=extras,
    )
    return dataclasses.replace(target, mean=mean, second_moment=cov + np.outer(mean, mean), exact_sampler=sampler)


@factory("softmax_regression")
def softmax_regression(
    X=None,
    y=None,
    *,
    dataset: str | None = None,
    n_classes: int | None = None,
    prior_scale: float = 1.0,
    batch_size: int | None = None,
    replace: bool = False,
    standardise: bool = True,
    intercept: bool = True,
    init_box: float = 1.0,
    name: str = "softmax_regression",
) -> Target:
    r"""Bayesian softmax (multinomial logistic) regression over ``K`` classes.

    .. math::

        \log p(y_i = k \mid x_i, \theta) = x_i^\top \theta_{\cdot k}
            - \log \sum_{l=1}^K \exp(x_i^\top \theta_{\cdot l}),

    with the prior ``theta ~ N(0, prior_scale^2 I)`` on all ``p K`` weights: ``U`` is eq. 35
    of "Stochastic Gradient Descent as Approximate Bayesian Inference" at a fixed
    ``lambda = 1 / prior_scale^2`` (up to its constants). ``theta`` is the ``p x K`` weight
    matrix flattened row by row: ``theta[j * K + k]`` is the weight of feature ``j`` (the
    intercept is ``j = 0``) for class ``k``, so ``theta.reshape(p, K)`` recovers it. The
    log-sum-exp is taken relative to the largest logit, so that large logits cannot overflow.
    The likelihood alone is unchanged by adding one vector to every class's weights; the
    prior makes the posterior proper.

    Parameters
    ----------
    X : array_like, shape (N, p), optional
        Features, without an intercept column.
    y : array_like, shape (N,), optional
        Class labels ``0, ..., K - 1``, as integers or integer-valued floats.
    dataset : str, optional
        A multiclass or binary data set of :data:`sgsim.datasets.DATASETS` (``"optdigits"``,
        ...), loaded unstandardised, instead of ``X`` and ``y``.
    n_classes : int, optional
        ``K >= 2``; ``max(y) + 1`` when omitted.
    prior_scale : float
        Prior standard deviation of every weight (1 by default).
    batch_size : int, optional
        Minibatch size ``n``; omitted: exact full-data gradient only.
    replace : bool
        Minibatches with replacement (default: without).
    standardise : bool
        Rescale each feature to mean 0 and sd 1 (:func:`~sgsim.datasets.standardise_features`) first; the
        means and scales are kept in ``extras``.
    intercept : bool
        Prepend a column of ones, so ``theta[:K]`` holds the intercepts and ``dim = (p + 1) K``.
    init_box : float
        Default initial points are uniform on ``[-init_box, init_box]^dim``.
    name : str
        Name recorded in results.
    """
    prior_scale, prior_precision, standardise, intercept = _options(
        prior_scale, batch_size, replace, standardise, intercept, init_box
    )
    if n_classes is not None:
        n_classes = integer("n_classes", n_classes, low=2)
    X, y = _data("softmax_regression", X, y, dataset, ("multiclass", "binary"))
    if n_classes is None:
        _check_labels(y, None)
        if not np.max(y) < 2**31:
            raise ParameterError("y", f"class label {np.max(y):g} is too large (give labels 0, ..., K - 1)")
        n_classes = int(np.max(y)) + 1
        if n_classes < 2:
            raise ParameterError("y", "y holds only the label 0: give n_classes (K >= 2)")
    _check_labels(y, n_classes)
    # the target and a sampler hold a few vectors of the p K parameters: checked before building them
    fits_in_memory("n_classes", 64.0 * (X.shape[1] + intercept) * n_classes, f"{n_classes:,} classes' parameters")
    X, extras = _design(X, dataset, standardise, intercept, prior_scale)
    extras["n_classes"] = n_classes
    return data_target(
        SOFTMAX,
        X,
        y,
        prior_precision=prior_precision,
        lik_params=[float(n_classes)],
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
    """``grad_theta log p(y_i | x_i, theta)`` for every example, shape ``(N, d)`` (no prior).

    For a data-backed target of this module, or a model with a per-example log likelihood
    (:func:`sgsim.targets.model`), whose gradients are on the sampler's (unconstrained) scale.
    """
    if target.batched is not None and target.batched.example_gradients is not None:
        theta = np.ascontiguousarray(finite_array("theta", theta, (target.dim,)))
        return np.asarray(target.batched.example_gradients(theta), dtype=np.float64)
    family = _family(target)
    theta = np.ascontiguousarray(finite_array("theta", theta, (target.dim,)))
    out = np.empty((target.extras["n_data"], target.dim))
    _compile(family).example_gradients(theta, target.params, out)
    return out


def minibatch_gradient_covariance(target: Target, theta, batch_size: int | None = None, replace=None) -> np.ndarray:
    """Covariance of the minibatch gradient at ``theta``: ``N^2 (C / n) f`` (:ref:`theory-conventions`).

    ``C = (1/N) sum_i (g_i - g_bar)(g_i - g_bar)^T`` over the per-example gradients, and
    ``f`` is :func:`noise_factor` (1 with replacement, ``(N - n)/(N - 1)`` without).

    Parameters
    ----------
    target : Target
        A data-backed target, or a model with a per-example log likelihood.
    theta : array_like, shape (d,)
        The point.
    batch_size, replace : optional
        Override the target's own ``n`` and sampling mode (e.g. for a negative control).
    """
    g = per_example_gradients(target, theta)
    n_data = g.shape[0]
    own = target.batched
    if own is not None:
        n = own.batch_size if batch_size is None else batch_size
        replace = own.replace if replace is None else replace
    else:
        n = target.extras["batch_size"] if batch_size is None else batch_size
        replace = target.extras["replace"] if replace is None else replace
    dev = g - g.mean(axis=0)
    c = dev.T @ dev / n_data
    return n_data**2 * c / n * noise_factor(n_data, n, bool(replace))

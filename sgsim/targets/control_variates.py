r"""Variance-reduced minibatch gradients of the data targets: control variates and SVRG.

Both estimate ``grad U`` of a data target (:mod:`sgsim.targets.regression`) from the same
minibatch ``B`` of ``n`` of the ``N`` examples as the plain estimate, centred on a reference
point ``theta_ref`` at which the likelihood's full gradient is known:

.. math::

    \widehat{\nabla U}(\theta) = \nabla U_0(\theta) + \nabla L(\theta_\mathrm{ref})
        + \frac{N}{n} \sum_{i \in B} \big(\nabla \ell_i(\theta) - \nabla \ell_i(\theta_\mathrm{ref})\big),

with ``ell_i = -log p(y_i | x_i, theta)``, ``L = sum_i ell_i`` and ``U_0`` the Gaussian prior's
share of ``U`` (computed exactly). It is unbiased whatever ``theta_ref``, with replacement or
without, and its covariance is that of the plain estimate with the per-example gradients
replaced by their differences,

.. math::

    \operatorname{Cov} = \frac{N^2 f}{n} \operatorname{Cov}_i\big(\nabla \ell_i(\theta) -
        \nabla \ell_i(\theta_\mathrm{ref})\big) \approx \frac{N^2 f}{n}
        \operatorname{Cov}_i\big(H_i (\theta - \theta_\mathrm{ref})\big),

(``f = 1`` with replacement, ``(N - n) / (N - 1)`` without; ``H_i`` the Hessian of ``ell_i``), which
vanishes as ``theta`` approaches ``theta_ref`` instead of staying of order ``N^2 / n``.

* :func:`control_variate`: ``theta_ref`` is one fixed point, the mode (Baker, Fearnhead, Fox
  and Nemeth (2019), "Control variates for stochastic gradient MCMC", the SGLD-CV
  estimate), its full gradient computed once.
* :func:`svrg`: ``theta_ref`` is each chain's own snapshot, taken every ``m`` steps where the
  chain stands, with the full gradient there (Dubey, Reddi, Poczos, Smola, Xing and Williamson
  (2016), "Variance reduction in stochastic gradient Langevin dynamics", the SVRG-LD
  estimate).

Each returns a :class:`~sgsim.targets.Target` whose ``stochastic_grad_u`` is the estimator (its
exact gradient and log density are the data target's), so that any sampler of independent
chains runs on it; the methods ``sgld_cv`` and ``svrg_ld`` are SGLD on it. An SVRG chain keeps
its snapshot in its own ``work`` buffer (the step count, then the snapshot and its full
gradient as float64 bits), so that it depends only on the chain's stream.

The indices are drawn exactly as the data target draws them (:mod:`sgsim.targets.regression`):
the same stream gives the same minibatches to the plain and the variance-reduced estimate.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable

import numpy as np

from .._jit import jit
from .._validate import ParameterError, ParameterTypeError, finite_array, integer, positive_float
from ..rng import integers
from . import regression as _regression
from ._base import _TRUSTED, Target, TargetExtras

__all__ = [
    "STATIONARY_TOLERANCE",
    "check_data_target",
    "find_mode",
    "hessian",
    "newton_decrement",
    "check_control_point",
    "control_variate",
    "svrg",
    "control_variate_covariance",
]

#: the largest distance, in standard deviations of the Laplace approximation at ``T = 1``,
#: between a control point given by the caller and the mode: the Newton decrement
#: ``sqrt(g^T H^{-1} g)``, which equals that distance on a quadratic ``U``
STATIONARY_TOLERANCE = 0.1


# ----------------------------------------------------------------------------- compiled estimators


def _grad_log_lik(theta, X, i, y, lik, weight, out):
    raise NotImplementedError("a template's placeholder: call a family's copy (see _specialise)")


def _difference(theta, ref, full, X, y, lik, mean, prec, n, replace, out, rng, work):
    # out = grad U_0(theta) + full + (N / n) sum_B (grad ell_i(theta) - grad ell_i(ref)); the
    # indices drawn as the data target draws them; ell_i = -log p_i, hence the signs
    N = X.shape[0]
    weight = N / n
    for j in range(out.shape[0]):
        out[j] = full[j]
    if replace:
        for _ in range(n):
            i = integers(rng, 0, N)
            _grad_log_lik(theta, X, i, y, lik, -weight, out)
            _grad_log_lik(ref, X, i, y, lik, weight, out)
    else:
        for j in range(n):
            r = j + integers(rng, 0, N - j)  # partial Fisher-Yates on the chain's permutation
            i = work[r]
            work[r] = work[j]
            work[j] = i
            _grad_log_lik(theta, X, i, y, lik, -weight, out)
            _grad_log_lik(ref, X, i, y, lik, weight, out)
    for j in range(out.shape[0]):
        out[j] += prec[j] * (theta[j] - mean[j])


# params = (X, y, lik, prior_mean, prior_precision, batch_size, replace, every, slot, control, full): with
# every = 0 the fixed control point and its likelihood gradient (SGLD-CV); with every = m > 0 the
# chain's snapshot, kept in work after work[slot], the chain's count of calls (SVRG). One function
# serves both, so that both methods run the same compiled sampling loop


def _reduced_grad_u(theta, params, out, rng, work):
    """The control-variate estimate around a fixed point, or around the chain's snapshot (SVRG)."""
    X, y, lik, mean, prec, n, replace, every, slot, ref, full = params
    if every > 0:
        d = out.shape[0]
        ref = work[slot + 1 : slot + 1 + d].view(np.float64)
        full = work[slot + 1 + d : slot + 1 + 2 * d].view(np.float64)
        if work[slot] % every == 0:
            for j in range(d):
                ref[j] = theta[j]
                full[j] = 0.0
            for i in range(X.shape[0]):
                _grad_log_lik(ref, X, i, y, lik, -1.0, full)
        work[slot] += 1
    _difference_(theta, ref, full, X, y, lik, mean, prec, n, replace, out, rng, work)


def _difference_(theta, ref, full, X, y, lik, mean, prec, n, replace, out, rng, work):
    raise NotImplementedError("a template's placeholder: call a family's copy (see _specialise)")


def _specialise(likelihood: _regression.Likelihood, *, cache: bool) -> Callable:
    """The estimator of ``likelihood``: a copy of the templates bound to its ``grad_log_lik``.

    As ``sgsim.targets.regression._specialise`` does for the data target's own functions:
    the shipped families' copies are module attributes under their names
    (``_logistic_reduced_grad_u``), compiled with the disk cache, so that the sampling loops that
    call them are cached too.
    """
    namespace = {**globals(), "_grad_log_lik": likelihood.grad_log_lik}

    def copy(template, inline=False):
        name = f"_{likelihood.name}{template.__name__}"
        func = types.FunctionType(template.__code__, namespace, name)
        func.__qualname__ = name
        func.__doc__ = template.__doc__
        return jit(func, cache=cache, inline=inline)

    namespace["_difference_"] = copy(_difference, inline=True)
    return copy(_reduced_grad_u)


_logistic_reduced_grad_u = _specialise(_regression.LOGISTIC, cache=True)
_linear_reduced_grad_u = _specialise(_regression.LINEAR, cache=True)
_softmax_reduced_grad_u = _specialise(_regression.SOFTMAX, cache=True)
_SHIPPED = {
    _regression.LOGISTIC: _logistic_reduced_grad_u,
    _regression.LINEAR: _linear_reduced_grad_u,
    _regression.SOFTMAX: _softmax_reduced_grad_u,
}


@functools.cache
def _compile(likelihood: _regression.Likelihood) -> Callable:
    shipped = _SHIPPED.get(likelihood)
    return shipped if shipped is not None else _specialise(likelihood, cache=False)


# ----------------------------------------------------------------------------- checks and the mode


def check_data_target(target, what: str = "a variance-reduced gradient") -> _regression.Likelihood:
    """The likelihood family of ``target``, or a ParameterError naming ``target``.

    ``target`` must be a compiled data target of :mod:`sgsim.targets.regression` that draws
    minibatches (``batch_size`` given): the estimators need its per-example gradients, and
    with the exact gradient there is no minibatch noise to reduce.
    """
    if not isinstance(target, Target):
        raise ParameterTypeError("target", f"target must be a sgsim Target, got {type(target).__name__}")
    if target.batched is not None:
        raise ParameterError(
            "target",
            f"{what} needs a compiled data target (sgsim.targets.logistic_regression, linear_regression, "
            f"softmax_regression, data_target); {target.name!r} is a log density with automatic gradients "
            "(sgsim.model), which is not supported",
        )
    family = target.extras.get("family")
    if not isinstance(family, _regression.Likelihood):
        raise ParameterError(
            "target",
            f"{what} needs a data target (sgsim.targets.logistic_regression, linear_regression, softmax_regression, "
            f"data_target): {target.name!r} has no data, so no per-example gradients",
        )
    if target.stochastic_grad_u is None:
        raise ParameterError(
            "target",
            f"{what} needs minibatches: data target {target.name!r} has the exact gradient only (build it with "
            "batch_size=n)",
        )
    return family


def hessian(target: Target, theta) -> np.ndarray:
    """The Hessian of ``U`` at ``theta``: central differences of the exact gradient, symmetrised.

    Each column is ``(grad U(theta + h e_j) - grad U(theta - h e_j)) / (2 h)`` with
    ``h = 1e-4 max(1, |theta_j|)``: relative error of order ``h^2`` (truncation) plus
    ``eps / h`` (rounding), about 1e-8, which leaves Newton's method quadratically convergent
    to rounding level.
    """
    theta = np.array(finite_array("theta", theta, (target.dim,)), dtype=np.float64)
    d = target.dim
    out = np.empty((d, d))
    for j in range(d):
        h = 1e-4 * max(1.0, abs(theta[j]))
        up, down = theta.copy(), theta.copy()
        up[j] += h
        down[j] -= h
        out[:, j] = (target.gradient(up) - target.gradient(down)) / (2.0 * h)
    return 0.5 * (out + out.T)


def newton_decrement(target: Target, theta) -> float:
    """``sqrt(g^T H^{-1} g)`` at ``theta`` (``g = grad U``, ``H`` its :func:`hessian`).

    On a quadratic ``U`` it is the distance from ``theta`` to the mode in standard deviations
    of the law ``exp(-U)``; elsewhere, that of the local quadratic. ``inf`` where ``H`` is not
    positive definite (no minimum nearby).
    """
    g = target.gradient(np.asarray(theta, dtype=np.float64))
    try:
        chol = np.linalg.cholesky(hessian(target, theta))
    except np.linalg.LinAlgError:
        return float("inf")
    w = np.linalg.solve(chol, g)
    return float(np.sqrt(w @ w))


def find_mode(target: Target, *, tol: float = 1e-10, max_iter: int = 100) -> np.ndarray:
    """The mode of ``exp(-U)`` (the MAP of a data target), by damped Newton steps.

    From the prior mean (0 for targets without one), Newton steps on ``U`` with the
    :func:`hessian` of central differences, halved while ``U`` does not decrease enough
    (Armijo's rule; a step whose predicted decrease is below 1e-12 is taken whole, the
    differences of ``U`` being rounding there), until a step moves no coordinate by more than
    ``tol (1 + |theta|)``.

    Parameters
    ----------
    target : Target
        A compiled target with a strictly convex ``U`` near its mode (the data targets of
        :mod:`sgsim.targets.regression` with their Gaussian priors are convex everywhere).
    tol : float
        Relative size of the last step.
    max_iter : int
        Newton steps before giving up.

    Raises
    ------
    ParameterError
        Naming ``target`` if the Hessian is not positive definite or Newton does not converge.
    """
    if target.grad_u is None:
        raise ParameterError("target", f"find_mode needs a compiled gradient; {target.name!r} has none")
    tol = positive_float("tol", tol)
    max_iter = integer("max_iter", max_iter, low=1)
    theta = np.array(np.broadcast_to(target.extras.get("prior_mean", 0.0), (target.dim,)), dtype=np.float64)

    def u(x):
        return -float(target.log_density(x))

    for _ in range(max_iter):
        g = target.gradient(theta)
        try:
            chol = np.linalg.cholesky(hessian(target, theta))
        except np.linalg.LinAlgError:
            raise ParameterError(
                "target", f"the Hessian of U on {target.name!r} is not positive definite: no Newton step to a mode"
            ) from None
        step = np.linalg.solve(chol.T, np.linalg.solve(chol, g))
        decrease = float(g @ step)
        t = 1.0
        if decrease > 1e-12:
            u0 = u(theta)
            while u(theta - t * step) > u0 - 1e-4 * t * decrease and t > 1e-10:
                t *= 0.5
        theta = theta - t * step
        if np.max(np.abs(t * step)) <= tol * (1.0 + np.max(np.abs(theta))):
            return theta
    raise ParameterError("target", f"Newton's method did not find the mode of {target.name!r} in {max_iter} steps")


def check_control_point(target: Target, control) -> np.ndarray:
    """``control`` as a ``(d,)`` array, if it is a stationary point of ``U``; else a ParameterError.

    Stationary means: within :data:`STATIONARY_TOLERANCE` standard deviations of the mode of
    the local quadratic (the :func:`newton_decrement`, ``|grad U|`` measured in the metric of
    the Hessian), where the Hessian is positive definite.
    """
    control = np.ascontiguousarray(finite_array("control_point", control), dtype=np.float64)
    if control.shape != (target.dim,):
        raise ParameterError(
            "control_point", f"control_point must have shape ({target.dim},) (the target's dim), got {control.shape}"
        )
    dec = newton_decrement(target, control)
    if not dec <= STATIONARY_TOLERANCE:
        g = target.gradient(control)
        raise ParameterError(
            "control_point",
            f"control_point is not a stationary point of U on {target.name!r}: |grad U| = {np.linalg.norm(g):.3g}, "
            f"{dec:.3g} standard deviations of the Laplace approximation from the mode (allowed: "
            f"{STATIONARY_TOLERANCE}); give the mode, or none and sgsim finds it",
        )
    return control


# ----------------------------------------------------------------------------- the estimators as targets


def _estimated(target: Target, stochastic: Callable, params: tuple, workspace: np.ndarray, **extra) -> Target:
    extras = TargetExtras(**{**target.extras, **extra})  # type: ignore[typeddict-item]
    token = _TRUSTED.set(True)  # the functions are the shipped templates', tested by the suite
    try:
        # spec None: the estimator is not part of the data target's recipe, so a run on this
        # target cannot be rebuilt from its spec (the methods sgld_cv and svrg_ld can)
        return dataclasses.replace(
            target, stochastic_grad_u=stochastic, params=params, workspace=workspace, extras=extras, spec=None
        )
    finally:
        _TRUSTED.reset(token)


def control_variate(target: Target, control_point=None) -> Target:
    """``target`` with SGLD-CV's gradient estimate around a fixed control point.

    Baker et al. (2019), "Control variates for stochastic gradient MCMC", the SGLD-CV estimate:
    ``grad U_0(theta) + grad L(theta_hat) + (N / n) sum_{i in B} (grad ell_i(theta) - grad
    ell_i(theta_hat))``, the full likelihood gradient at ``theta_hat`` computed here once.

    Parameters
    ----------
    target : Target
        A data target that draws minibatches (:func:`check_data_target`); its batch size and
        sampling mode (with or without replacement) are the estimator's.
    control_point : array_like, shape (d,), optional
        ``theta_hat``, checked to be stationary (:func:`check_control_point`); the mode
        (:func:`find_mode`) when omitted.

    Returns
    -------
    Target
        The same target (exact gradient, log density, data) with the estimator as its
        ``stochastic_grad_u``; its ``extras["control_point"]`` is ``theta_hat``.
    """
    family = check_data_target(target, "a control variate")
    control = find_mode(target) if control_point is None else check_control_point(target, control_point)
    X, y, lik, mean, prec, n, replace = target.params
    full = target.gradient(control) - prec * (control - mean)
    stochastic = _compile(family)
    n_data = target.extras["n_data"]
    description = (
        f"control variate around a fixed point (SGLD-CV): full gradient there, plus N/n times the minibatch's "
        f"gradient differences; minibatch of n = {int(n)} of N = {n_data}, "
        f"{'with' if replace else 'without'} replacement"
    )
    params = (X, y, lik, mean, prec, n, replace, np.int64(0), np.int64(0), control, np.ascontiguousarray(full))
    return _estimated(
        target, stochastic, params, target.workspace, stochastic_gradient=description, control_point=control
    )


def svrg(target: Target, snapshot_every: int) -> Target:
    """``target`` with SVRG's gradient estimate around each chain's snapshot.

    Dubey et al. (2016), "Variance reduction in stochastic gradient Langevin dynamics",
    SVRG-LD: at the calls ``0, m, 2m, ...`` of a chain's gradient its snapshot becomes the
    point asked for and the full likelihood gradient is computed there (``N`` per-example
    gradients); every call returns the control-variate estimate around the snapshot.

    Parameters
    ----------
    target : Target
        A data target that draws minibatches (:func:`check_data_target`).
    snapshot_every : int
        ``m >= 1``, calls between snapshots (``m = 1``: the exact gradient at every call).
    """
    family = check_data_target(target, "SVRG")
    every = integer("snapshot_every", snapshot_every, low=1)
    X, y, lik, mean, prec, n, replace = target.params
    d = target.dim
    slot = target.workspace.shape[0]
    # the chain's buffer: the permutation (without replacement), the count, snapshot and full gradient
    workspace = np.concatenate([target.workspace, np.zeros(1 + 2 * d, np.int64)])
    description = (
        f"SVRG: each chain's snapshot every {every} steps with the full gradient there, plus N/n times the "
        f"minibatch's gradient differences; minibatch of n = {int(n)} of N = {target.extras['n_data']}, "
        f"{'with' if replace else 'without'} replacement"
    )
    # the fixed point's slots are unused (zeros of the right type)
    params = (X, y, lik, mean, prec, n, replace, np.int64(every), np.int64(slot), np.zeros(d), np.zeros(d))
    stochastic = _compile(family)
    return _estimated(target, stochastic, params, workspace, stochastic_gradient=description)


def control_variate_covariance(target: Target, theta, control_point, batch_size=None, replace=None) -> np.ndarray:
    """Covariance at ``theta`` of the control-variate estimate around ``control_point``.

    ``N^2 (C / n) f``, ``C`` the per-example covariance of the differences
    ``grad ell_i(theta) - grad ell_i(control_point)`` and ``f`` the finite-population factor
    (:func:`sgsim.targets.regression.noise_factor`): exact for the estimate of
    :func:`control_variate` (and for SVRG's with its snapshot there). The plain estimate's is
    :func:`sgsim.targets.regression.minibatch_gradient_covariance`.

    Parameters
    ----------
    target : Target
        A data target.
    theta, control_point : array_like, shape (d,)
    batch_size, replace : optional
        Override the target's own ``n`` and sampling mode.
    """
    diff = _regression.per_example_gradients(target, theta) - _regression.per_example_gradients(target, control_point)
    n_data = diff.shape[0]
    n = target.extras["batch_size"] if batch_size is None else batch_size
    replace = target.extras["replace"] if replace is None else replace
    dev = diff - diff.mean(axis=0)
    return n_data**2 * (dev.T @ dev / n_data) / n * _regression.noise_factor(n_data, n, bool(replace))

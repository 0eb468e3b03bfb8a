"""Linear-Gaussian oracles (:ref:`theory-linear-gaussian`) and the standard Gaussian.

``U(theta) = theta^T P theta / 2 - b^T theta``, so the target is ``N(P^{-1} b, P^{-1})``. With the
stochastic gradient ``P theta - b + zeta``, ``zeta ~ N(0, V)``, every iterate of SGLD, SGD and
SGHMC has a Gaussian law known in closed form (:ref:`theory-exact-laws`), which the tests use as
the exact discrete-time truth.
"""

from __future__ import annotations

import math

import numpy as np

from .._jit import jit
from .._validate import ParameterError, finite_array, finite_values, fits_in_memory, integer, renamed, spd_matrix
from ._base import Target, _ship_block, factory


@jit
def linear_gaussian_grad_u(theta, params, out):
    """``P theta - b`` (compiled).

    As axpy updates over the rows of ``P`` (symmetric, so row ``j`` is column ``j``): contiguous,
    so they vectorise, with each ``out[i]`` summed in the order of ``j``.
    """
    prec, shift, _, _ = params
    d = theta.shape[0]
    for i in range(d):
        out[i] = -shift[i]
    for j in range(d):
        tj = theta[j]
        for i in range(d):
            out[i] += prec[j, i] * tj


@jit
def linear_gaussian_grad_u_block(theta, params, out, scratch):
    """:func:`linear_gaussian_grad_u` for ``W`` points at once, the points as the inner loop (compiled).

    ``theta`` and ``out`` have shape ``(d, W)``, column ``l`` being lane ``l``'s point;
    ``scratch`` (shape ``(8, W)``) is not used. Each ``out[i, l]`` is summed in the order of
    ``j``, as in the per-point form, so the two agree bit for bit.
    """
    prec, shift, _, _ = params
    d = theta.shape[0]
    n = theta.shape[1]
    for i in range(d):
        b = shift[i]
        for lane in range(n):
            out[i, lane] = -b
    for j in range(d):
        for i in range(d):
            p = prec[j, i]
            for lane in range(n):
                out[i, lane] += p * theta[j, lane]


_ship_block(linear_gaussian_grad_u, linear_gaussian_grad_u_block)


@jit
def linear_gaussian_log_density(theta, params):
    """Normalised log density of ``N(P^{-1} b, P^{-1})`` (compiled)."""
    prec, _, mean, log_norm = params
    d = theta.shape[0]
    q = 0.0
    for i in range(d):
        for j in range(d):
            q += (theta[i] - mean[i]) * prec[i, j] * (theta[j] - mean[j])
    return log_norm - 0.5 * q


@factory("linear_gaussian")
def linear_gaussian(precision, shift=None, grad_noise_cov=None, *, name="linear_gaussian") -> Target:
    """The linear-Gaussian oracle of :ref:`theory-linear-gaussian`.

    Parameters
    ----------
    precision : array_like, shape (d, d)
        Symmetric positive definite ``P``.
    shift : array_like, shape (d,), optional
        ``b``; zero when omitted.
    grad_noise_cov : float or array_like, optional
        Covariance ``V`` of the additive gradient noise (scalar means ``V I``).
    name : str
        Name recorded in results.

    Examples
    --------
    >>> import numpy as np
    >>> from sgsim import targets
    >>> target = targets.linear_gaussian([[2.0, 0.0], [0.0, 0.5]], shift=[2.0, 1.0])
    >>> print(target.mean)  # P^-1 b
    [1. 2.]
    >>> print(target.gradient(np.array([[0.0, 0.0]])))  # grad U = P theta - b, one row per point
    [[-2. -1.]]

    With gradient noise ``V = 0.1 I``, which emulates a stochastic gradient in :func:`sgsim.sample`:

    >>> noisy = targets.linear_gaussian(np.eye(2), grad_noise_cov=0.1)
    >>> print(noisy.grad_noise_cov)
    [[0.1 0. ]
     [0.  0.1]]
    """
    prec = np.atleast_2d(finite_array("precision", precision))
    if prec.ndim != 2 or prec.shape[0] != prec.shape[1] or prec.shape[0] < 1:
        raise ParameterError("precision", f"precision must be a square matrix (or a number), got shape {prec.shape}")
    d = prec.shape[0]
    prec = spd_matrix("precision", prec, d)
    b = np.zeros(d) if shift is None else finite_array("shift", shift, (d,))
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        cov = np.linalg.inv(prec)
        cov = 0.5 * (cov + cov.T)
        mean = cov @ b
        _, logdet = np.linalg.slogdet(prec)
    log_norm = 0.5 * logdet - 0.5 * d * math.log(2 * math.pi)
    hint = ": keep its eigenvalues and their inverses well inside the floating-point range"
    finite_values("precision", cov, log_norm, hint=hint)
    finite_values("shift", mean)
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        msg = "precision is too ill-conditioned: its inverse is not positive definite"
        raise ParameterError("precision", msg) from None

    def sampler(rng, n):
        return mean + rng.standard_normal((n, d)) @ chol.T

    half = 3.0 * np.sqrt(np.diag(cov))
    target = Target(
        name=name,
        dim=d,
        grad_u=linear_gaussian_grad_u,
        grad_u_block=linear_gaussian_grad_u_block,
        log_density_fn=linear_gaussian_log_density,
        params=(np.ascontiguousarray(prec), b, mean, log_norm),
        grad_noise_cov=np.zeros((d, d)),
        init_low=mean - half,
        init_high=mean + half,
        mean=mean,
        second_moment=cov + np.outer(mean, mean),
        exact_sampler=sampler,
        extras={"precision": prec, "shift": b, "covariance": cov},
    )
    if grad_noise_cov is None:
        return target
    with renamed(cov="grad_noise_cov"):
        return target.with_gradient_noise(grad_noise_cov)


@factory("standard_gaussian")
def standard_gaussian(dim: int = 2) -> Target:
    """``N(0, I_d)``: the linear-Gaussian oracle with ``P = I``, ``b = 0``."""
    dim = integer("dim", dim, low=1)
    # the target holds a few (d, d) matrices (precision, covariance, their factors)
    fits_in_memory("dim", 32.0 * dim * dim, f"a {dim:,}-dimensional Gaussian's matrices")
    return linear_gaussian(np.eye(dim), name="standard_gaussian")


@factory("ou_quadratic")
def ou_quadratic(hessian, noise_cov, batch_size: int, n_data: int, *, name="ou_quadratic") -> Target:
    """The quadratic loss of "Stochastic Gradient Descent as Approximate Bayesian Inference" (§3).

    The averaged loss ``L(theta) = theta^T A theta / 2`` whose minibatch gradient over ``S`` of
    ``N`` examples is ``A theta + zeta``, ``zeta ~ N(0, C / S)`` exactly (Gaussian, independent
    of ``theta``). sgsim's samplers work on ``U = N L``, so the target is ``exp(-U) =
    N(0, (N A)^{-1})``, the posterior of that paper's §4, with gradient ``N A theta`` and
    emulated gradient noise ``V = N^2 C / S``.

    Units: a sampler's ``step_size`` ``alpha`` on ``U`` is the paper's learning rate
    ``epsilon = N alpha`` on ``L``. So constant SGD with rate ``epsilon`` is ``sgld`` at
    ``temperature=0`` with ``step_size = epsilon / N``, and SGD with momentum ``mu``
    (``v <- (1 - mu) v - epsilon g``, ``theta <- theta + v``) is ``sghmc`` at ``temperature=0``
    with ``friction = mu`` and the same step (sgsim's SGHMC velocity is the paper's one step
    later). :mod:`sgsim.theory.ou` gives their stationary covariances.

    Parameters
    ----------
    hessian : array_like, shape (d, d)
        ``A``, symmetric positive definite.
    noise_cov : array_like, shape (d, d)
        ``C``, the per-example gradient covariance, symmetric positive semidefinite.
    batch_size : int
        ``S``, with ``1 <= S <= N``.
    n_data : int
        ``N``.
    """
    import dataclasses

    from .._validate import integer

    a = np.atleast_2d(finite_array("hessian", hessian))
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ParameterError("hessian", f"hessian must be a square matrix, got shape {a.shape}")
    d = a.shape[0]
    a = spd_matrix("hessian", a, d)
    c = spd_matrix("noise_cov", np.atleast_2d(finite_array("noise_cov", noise_cov)), d, allow_singular=True)
    n = integer("n_data", n_data, low=1)
    s = integer("batch_size", batch_size, low=1)
    if s > n:
        raise ParameterError("batch_size", f"batch_size must be <= n_data ({n}), got {s}")
    base = linear_gaussian(n * a, grad_noise_cov=n**2 * c / s, name=name)
    extras = {**base.extras, "hessian": a, "noise_cov": c, "batch_size": s, "n_data": n}
    return dataclasses.replace(base, extras=extras)

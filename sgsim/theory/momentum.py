r"""Dynamics of constant SGD with momentum: autocovariances and autocorrelation times (§4.3).

"Stochastic Gradient Descent as Approximate Bayesian Inference" (Mandt, Hoffman and Blei), §4.3:
``v <- (1 - mu) v - epsilon g_S(theta)``, ``theta <- theta + v`` with damping ``mu`` in (0, 1],
on the quadratic averaged loss ``theta^T A theta / 2`` with minibatch noise of covariance
``C / S`` (paper's units). The paper makes two claims about it:

1. only ``epsilon / (mu S)`` sets the stationary covariance (eq. 25). In the OU model this holds
   exactly when ``A`` and ``C`` commute; otherwise a commutator term of order
   ``epsilon / mu^2`` breaks it (:func:`sgsim.theory.ou.momentum_cov`). For the recursion itself,
   along an eigen-direction ``(a, c)`` of commuting ``A`` and ``C``,
   ``Var theta = epsilon c (2 - mu) / (S a mu (2 (2 - mu) - epsilon a))``, which depends on
   ``epsilon`` and ``mu`` apart through the discretisation factor.
2. a smaller ``mu`` at fixed ``epsilon / mu`` raises the autocorrelation time. In the scalar
   case the ``theta`` chain is the AR(2) process
   ``theta_{t+1} = (2 - mu - epsilon a) theta_t - (1 - mu) theta_{t-1} + noise``: once
   underdamped its roots have modulus ``sqrt(1 - mu)``, so the exponential autocorrelation time
   ``-2 / log(1 - mu) ~ 2 / mu`` grows without bound as ``mu -> 0``, and so does the integrated
   autocorrelation time of ``theta^2``; the integrated time of ``theta`` itself, with its
   oscillating autocorrelation, stays near ``2 mu / (epsilon a)``.

The recursion's state is ``x = (theta, v)`` with ``x' = F x + xi`` (:func:`momentum_recursion`);
its OU limit, one step per time unit, is ``dx = -M x dt + Q^{1/2} dW`` with
``M = [[0, -I], [epsilon A, mu I]]`` (:func:`momentum_ou`). Both are exact Gaussian processes
given Gaussian noise, so every quantity here is a closed form.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.linalg import expm

from .. import dynamics
from .._validate import ParameterError, boolean, count, finite_array, positive_float, real, renamed
from .exact_law import _spd, stationary_covariance
from .ou import lyapunov

__all__ = [
    "momentum_recursion",
    "momentum_ou",
    "momentum_autocovariance",
    "AutocorrelationTimes",
    "momentum_autocorrelation_times",
]


def _inputs(A, C, lr, momentum, batch_size):
    a = _spd("A", A)
    c = _spd("C", C, a.shape[0], allow_singular=True)
    eps = positive_float("lr", lr)
    mu = real("momentum", momentum, 0.0, 1.0, low_open=True)
    s = float(count("batch_size", batch_size))
    return a, c, eps, mu, s


def momentum_recursion(A, C, lr, momentum, batch_size) -> tuple[np.ndarray, np.ndarray]:
    """``(F, Q)`` of the recursion ``x' = F x + xi`` for ``x = (theta, v)`` in [SGDVI] order (eq. 23).

    ``F = [[I - epsilon A, (1 - mu) I], [-epsilon A, (1 - mu) I]]``,
    ``Q = (epsilon^2 / S) [[C, C], [C, C]]`` (:func:`sgsim.dynamics.momentum_sgd_linear`).
    Stable iff the spectral radius of ``F`` is < 1; along an eigenvalue ``a`` of ``A`` that is
    ``0 < epsilon a < 2 (2 - mu)``.
    """
    a, c, eps, mu, s = _inputs(A, C, lr, momentum, batch_size)
    step = dynamics.momentum_sgd_linear(a, c, eps, mu, s)
    f = step.f0 + eps * step.f1
    q = eps**2 / s * np.block([[c, c], [c, c]])
    return f, q


def momentum_ou(A, C, lr, momentum, batch_size) -> tuple[np.ndarray, np.ndarray]:
    """``(M, Q)`` of the OU limit ``dx = -M x dt + Q^{1/2} dW``, one step per time unit (§4.3).

    ``d theta = v dt``, ``dv = -mu v dt - epsilon A theta dt + (epsilon / sqrt(S)) B dW``:
    ``M = [[0, -I], [epsilon A, mu I]]``, ``Q = [[0, 0], [0, epsilon^2 C / S]]``.
    """
    a, c, eps, mu, s = _inputs(A, C, lr, momentum, batch_size)
    d = a.shape[0]
    zero, eye = np.zeros((d, d)), np.eye(d)
    m = np.block([[zero, -eye], [eps * a, mu * eye]])
    q = np.block([[zero, zero], [zero, eps**2 / s * c]])
    return m, q


def _lags(lags) -> np.ndarray:
    arr = finite_array("lags", lags)
    if arr.ndim > 1 or not np.all(arr >= 0):
        raise ParameterError("lags", f"lags must be a number or a 1-d sequence of numbers >= 0, got {lags!r}")
    return np.atleast_1d(arr)


def momentum_autocovariance(A, C, lr, momentum, batch_size, lags, exact: bool = True) -> np.ndarray:
    """Stationary ``Cov(theta_{t+k}, theta_t)`` of SGD with momentum, for each lag ``k`` (in steps).

    ``exact=True``: the recursion's, ``[F^k P]_{theta theta}`` with ``P = F P F^T + Q``
    (integer lags). ``exact=False``: the OU limit's, ``[e^{-M k} P]_{theta theta}`` with
    ``M P + P M^T = Q`` (the commutator term of :func:`sgsim.theory.ou.momentum_cov` included).

    Returns
    -------
    ndarray, shape (len(lags), D, D)
    """
    k = _lags(lags)
    a = _spd("A", A)
    d = a.shape[0]
    if boolean("exact", exact):
        if not np.all(k == np.round(k)):
            raise ParameterError("lags", "the recursion's lags must be whole numbers of steps")
        f, q = momentum_recursion(A, C, lr, momentum, batch_size)
        p = stationary_covariance(f, q)
        return np.stack([(np.linalg.matrix_power(f, int(j)) @ p)[:d, :d] for j in k])
    m, q = momentum_ou(A, C, lr, momentum, batch_size)
    p = lyapunov(m, q)
    return np.stack([(expm(-m * j) @ p)[:d, :d] for j in k])


@dataclass(frozen=True)
class AutocorrelationTimes:
    """Autocorrelation times of stationary SGD with momentum, in steps, per coordinate of ``theta``.

    Attributes
    ----------
    theta : ndarray, shape (D,)
        Integrated autocorrelation time of ``theta_i``: ``1 + 2 sum_{k>=1} rho_k`` (recursion) or
        ``2 int_0^inf rho(t) dt`` (OU); the long-run variance of the time average is
        ``tau Var(theta_i) / n`` for ``n`` steps.
    theta_squared : ndarray, shape (D,)
        The same for ``theta_i^2``, whose autocorrelation is ``rho_k^2`` for a centred Gaussian
        process.
    exponential : float
        ``-1 / log rho(F)`` (recursion) or ``1 / min Re eig(M)`` (OU): the decay time of the
        slowest mode, the mixing time of every function of the state.
    variance : ndarray, shape (D,)
        ``Var(theta_i)``.
    """

    theta: np.ndarray
    theta_squared: np.ndarray
    exponential: float
    variance: np.ndarray


def momentum_autocorrelation_times(A, C, lr, momentum, batch_size, exact: bool = True) -> AutocorrelationTimes:
    r"""Integrated and exponential autocorrelation times of SGD with momentum (§4.3), in closed form.

    Recursion (``exact=True``), with ``P`` the stationary covariance of ``x = (theta, v)``:
    ``sum_{k>=1} F^k P = F (I - F)^{-1} P`` gives the integrated time of ``theta_i``, and
    ``sum_{k>=1} (e_i^T F^k P e_i)^2 = (e_i (x) e_i)^T (F (x) F)(I - F (x) F)^{-1} (p_i (x) p_i)``
    (``p_i = P e_i``) that of ``theta_i^2``. OU (``exact=False``): the same with
    ``int_0^inf e^{-M t} dt = M^{-1}`` and ``(M (+) M)^{-1}`` (Kronecker sum). The ``(2D)^2``
    Kronecker system limits this to moderate ``D``.

    Examples
    --------
    At a fixed ``epsilon / mu = 0.1`` on ``A = C = 1``, a ten times smaller damping multiplies
    the exponential time by about five, nearly triples the integrated time of ``theta^2`` and
    leaves that of ``theta`` near ``2 mu / epsilon = 20``:

    >>> from sgsim.theory import momentum
    >>> for mu in (0.5, 0.05):
    ...     t = momentum.momentum_autocorrelation_times([[1.0]], [[1.0]], 0.1 * mu, mu, 1)
    ...     print(round(t.exponential, 1), round(float(t.theta[0]), 2), round(float(t.theta_squared[0]), 1))
    8.2 19.67 11.2
    39.0 19.97 29.5
    """
    a = _spd("A", A)
    d = a.shape[0]
    n2 = 2 * d
    eye = np.eye(n2)
    if boolean("exact", exact):
        f, q = momentum_recursion(A, C, lr, momentum, batch_size)
        if 1.0 - float(momentum) == 1.0:
            # the velocity keeps 1 - momentum, which rounds to 1: F has an eigenvalue 1 in the floats
            raise ParameterError("momentum", f"momentum {float(momentum):g} is too small: 1 - momentum rounds to 1")
        with renamed(F="lr", Q="C"):  # F's spectral radius reaches 1 when lr is too large, or underflows
            p = stationary_covariance(f, q)
        tail = f @ np.linalg.solve(eye - f, p)  # sum_{k>=1} F^k P
        theta = 1.0 + 2.0 * np.diag(tail)[:d] / np.diag(p)[:d]
        ff = np.kron(f, f)
        kron_sum = ff @ np.linalg.inv(np.eye(n2 * n2) - ff)
        rho = float(np.max(np.abs(np.linalg.eigvals(f))))
        # rho = 0: F is nilpotent (lr A = I, momentum 1 on this A), the law is stationary after a few steps
        exponential = 0.0 if rho == 0.0 else -1.0 / np.log(rho)
        base = 1.0
    else:
        m, q = momentum_ou(A, C, lr, momentum, batch_size)
        with renamed(M="lr", Q="C"), warnings.catch_warnings():  # M = [[0, -I], [lr A, mu I]]
            # a tiny lr leaves M unstable to the floats; a tiny momentum puts eigenvalue pairs on the
            # imaginary axis (scipy perturbs the equation and warns): the variance is beyond the floats
            warnings.simplefilter("error", RuntimeWarning)
            try:
                p = lyapunov(m, q)
            except RuntimeWarning:
                raise ParameterError(
                    "momentum", f"momentum {float(momentum):g} is too small: the OU variance (~ 1 / momentum) is lost"
                ) from None
        theta = 2.0 * np.diag(np.linalg.solve(m, p))[:d] / np.diag(p)[:d]
        kron_sum = np.linalg.inv(np.kron(m, eye) + np.kron(eye, m))
        exponential = 1.0 / float(np.min(np.linalg.eigvals(m).real))
        base = 0.0
    var = np.diag(p)[:d]
    squared = np.empty(d)
    for i in range(d):
        e = np.zeros(n2)
        e[i] = 1.0
        pi = p[:, i]
        squared[i] = base + 2.0 * float(np.kron(e, e) @ kron_sum @ np.kron(pi, pi)) / var[i] ** 2
    return AutocorrelationTimes(theta, squared, float(exponential), var)

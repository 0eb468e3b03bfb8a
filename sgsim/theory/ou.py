r"""Stationary covariances of constant-rate stochastic-gradient algorithms on a quadratic loss.

The setting of "Stochastic Gradient Descent as Approximate Bayesian Inference" (Mandt, Hoffman
and Blei): near its optimum the *averaged* loss is ``L(theta) = theta^T A theta / 2`` (``A``
the Hessian, symmetric positive definite), a minibatch of ``S`` examples gives its gradient
with noise of covariance ``C / S`` (``C`` the per-example gradient covariance), and ``N`` is
the number of data points. Every function here uses that paper's units: learning rate
``epsilon`` on the averaged loss (SGD on the total loss ``U = N L`` with step ``alpha`` is
``epsilon = N alpha``).

Each algorithm has two stationary covariances:

- the **Ornstein-Uhlenbeck** one (``exact=False``), of the continuous-time limit the paper
  analyses (one step = time ``epsilon``), which solves a continuous Lyapunov equation, e.g.
  ``A Sigma + Sigma A = (epsilon / S) C`` for SGD (eq. 13);
- the **exact discrete** one (``exact=True``) of the recursion itself, on Gaussian gradient
  noise, which solves the discrete Lyapunov equation ``Sigma = F Sigma F^T + Q``; for SGD
  ``A Sigma + Sigma A - epsilon A Sigma A = (epsilon / S) C``. The two differ by a relative
  ``O(epsilon ||A||)``.

Solvers: :func:`lyapunov` uses the eigenbasis of a symmetric ``M`` (``Sigma~_ij =
Q~_ij / (lambda_i + lambda_j)``), which is exact and ``O(D^3)`` with a small constant, and
scipy's Bartels-Stewart solver otherwise. Every algorithm whose Lyapunov operator is diagonal
in ``A``'s eigenbasis (SGD, momentum, constant-rate SGLD, exactly or in the OU limit) is solved
there; preconditioned SGD and SGFS with a general ``H`` use the general solvers.

Iterate averaging (§6): the autocovariance ``e^{-A t} Sigma`` and the covariance of the mean
over a window of time ``tau`` (eq. 50) and its long-window limit ``A^{-1} C A^{-1} / (T S)``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from scipy.linalg import solve_continuous_lyapunov

from .._validate import ParameterError, boolean, count, finite_array, finite_values, positive_float, renamed
from .exact_law import _spd, _square, stationary_covariance

__all__ = [
    "lyapunov",
    "sgd_cov",
    "preconditioned_sgd_cov",
    "momentum_cov",
    "sgld_cov",
    "sgfs_cov",
    "autocovariance",
    "window_mean_cov",
    "long_window_mean_cov",
]


def _eig(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lam, u = np.linalg.eigh(a)
    return lam, u


def _in_basis(u: np.ndarray, q: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``U [ (U^T Q U)_ij / denominator_ij ] U^T``, symmetrised."""
    out = u @ ((u.T @ q @ u) / denominator) @ u.T
    return 0.5 * (out + out.T)


def lyapunov(M, Q) -> np.ndarray:
    """``Sigma`` with ``M Sigma + Sigma M^T = Q``: the stationary covariance of ``dx = -M x dt + Q^(1/2) dW``.

    ``M`` must be stable (every eigenvalue with a positive real part). A symmetric ``M`` is
    solved in its eigenbasis; any other with :func:`scipy.linalg.solve_continuous_lyapunov`.
    """
    m = _square("M", M)
    q = finite_array("Q", Q, m.shape)
    if np.allclose(m, m.T, rtol=0, atol=1e-14 * max(1.0, float(np.abs(m).max()))):
        lam, u = _eig(0.5 * (m + m.T))
        if not lam[0] > 0:
            raise ParameterError("M", f"M must be stable (eigenvalues > 0), smallest {lam[0]:.3g}")
        return _in_basis(u, q, lam[:, None] + lam[None, :])
    if not np.min(np.linalg.eigvals(m).real) > 0:
        raise ParameterError("M", "M must be stable: every eigenvalue needs a positive real part")
    out = solve_continuous_lyapunov(m, q)
    return 0.5 * (out + out.T)


def _stable_rate(a: np.ndarray, lr: float, limit: float, what: str) -> None:
    lam_max = float(np.linalg.eigvalsh(a)[-1])
    if not lr * lam_max < limit:
        raise ParameterError(
            "lr",
            f"{what} is unstable: lr * max eig(A) = {lr * lam_max:.4g} must be < {limit:.4g} (the stability limit)",
        )


def sgd_cov(A, C, lr, batch_size, exact: bool = False) -> np.ndarray:
    """Stationary covariance of constant SGD ``theta <- theta - epsilon g_S(theta)``.

    OU (eq. 13): ``A Sigma + Sigma A = (epsilon / S) C``. Exact discrete:
    ``A Sigma + Sigma A - epsilon A Sigma A = (epsilon / S) C``, stable for
    ``epsilon < 2 / lambda_max(A)`` (a larger rate raises an error). Both in ``A``'s eigenbasis.

    Examples
    --------
    With ``A`` and ``C`` diagonal, the OU covariance is ``epsilon C_kk / (2 S lambda_k)`` and
    the exact one ``epsilon C_kk / (S lambda_k (2 - epsilon lambda_k))``:

    >>> import numpy as np
    >>> from sgsim.theory import ou
    >>> A, C = np.diag([1.0, 4.0]), np.eye(2)
    >>> print(np.diag(ou.sgd_cov(A, C, lr=0.1, batch_size=10)).round(7))
    [0.005   0.00125]
    >>> print(np.diag(ou.sgd_cov(A, C, lr=0.1, batch_size=10, exact=True)).round(7))
    [0.0052632 0.0015625]
    """
    a = _spd("A", A)
    c = _spd("C", C, a.shape[0], allow_singular=True)
    eps, s = positive_float("lr", lr), float(count("batch_size", batch_size))
    lam, u = _eig(a)
    den = lam[:, None] + lam[None, :]
    if boolean("exact", exact):
        _stable_rate(a, eps, 2.0, "constant SGD")
        den = den - eps * lam[:, None] * lam[None, :]
    return _in_basis(u, (eps / s) * c, den)


def preconditioned_sgd_cov(A, C, H, batch_size, exact: bool = False) -> np.ndarray:
    """Stationary covariance of ``theta <- theta - H g_S(theta)`` (``H`` absorbs the rate; §4.1).

    OU (eq. 18): ``H A Sigma + Sigma A H = H C H / S``. Exact discrete:
    ``Sigma = (I - H A) Sigma (I - H A)^T + H C H / S``.
    """
    a = _spd("A", A)
    d = a.shape[0]
    c = _spd("C", C, d, allow_singular=True)
    h = _spd("H", H, d)
    s = float(count("batch_size", batch_size))
    q = h @ c @ h / s
    if boolean("exact", exact):
        with renamed(F="H", Q="C"):  # F = I - H A: H decides its stability
            return stationary_covariance(np.eye(d) - h @ a, q)
    return lyapunov(h @ a, q)


def momentum_cov(A, C, lr, momentum, batch_size, exact_ou: bool = True) -> np.ndarray:
    r"""Stationary covariance of ``theta`` under SGD with momentum (§4.3), OU limit.

    ``v <- (1 - mu) v - epsilon g_S``, ``theta <- theta + v``; its OU limit ``d theta = v dt``,
    ``dv = -mu v dt - epsilon A theta dt + (epsilon / sqrt(S)) B dW``. Its stationary moments
    satisfy ``A Sigma + Sigma A = (epsilon / (mu S)) C - (epsilon / (2 mu^2)) [A, [A, Sigma]]``,
    which in ``A``'s eigenbasis reads
    ``Sigma~_ij = (epsilon / (mu S)) C~_ij / (lambda_i + lambda_j + (epsilon / (2 mu^2)) (lambda_i - lambda_j)^2)``
    (``exact_ou=True``). The paper's eq. 25 drops the commutator term (``exact_ou=False``): it is
    exact only when ``[A, [A, Sigma]] = 0`` (for instance when ``A`` and ``C`` commute), and its
    appendix D's argument that the term vanishes is wrong (the term is symmetric, not zero).
    """
    a = _spd("A", A)
    c = _spd("C", C, a.shape[0], allow_singular=True)
    eps, s = positive_float("lr", lr), float(count("batch_size", batch_size))
    mu = positive_float("momentum", momentum)
    if mu > 1:
        raise ParameterError("momentum", f"momentum (the damping mu) must be in (0, 1], got {mu}")
    lam, u = _eig(a)
    den = lam[:, None] + lam[None, :]
    exact = boolean("exact_ou", exact_ou)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):  # a tiny mu: refused below, by name
        if exact:
            gap = (lam[:, None] - lam[None, :]) ** 2
            den = den + np.where(gap > 0, np.float64(eps) / (2 * mu) / mu * gap, 0.0)  # no inf * 0 on the diagonal
        out = _in_basis(u, np.float64(eps) / mu / s * c, den)
    finite_values("momentum", out, what="the covariance (it grows as lr / momentum)", hint=f" (momentum = {mu:g})")
    return out


def sgld_cov(A, C, lr, n_data, batch_size, exact: bool = False) -> np.ndarray:
    r"""Stationary covariance of constant-rate SGLD in Welling and Teh's form (§5.1).

    ``theta <- theta - (epsilon / 2) N g_S + sqrt(epsilon) xi``. OU:
    ``(N / 2)(A Sigma + Sigma A) = I + (epsilon N^2 / (4 S)) C``; exact discrete:
    ``(N / 2)(A Sigma + Sigma A) - (epsilon N^2 / 4) A Sigma A = I + (epsilon N^2 / (4 S)) C``,
    stable for ``epsilon N lambda_max(A) < 4``. The printed paper's noise factor (which reads
    ``epsilon N / (2S)`` in our copy) does not follow from the update; this one does, and as
    ``epsilon -> 0`` both give the posterior ``(N A)^{-1}``.
    """
    a = _spd("A", A)
    c = _spd("C", C, a.shape[0], allow_singular=True)
    eps, n, s = (
        positive_float("lr", lr),
        float(count("n_data", n_data)),
        float(count("batch_size", batch_size)),
    )
    lam, u = _eig(a)
    den = 0.5 * n * (lam[:, None] + lam[None, :])
    if boolean("exact", exact):
        _stable_rate(a, eps * n, 4.0, "constant-rate SGLD (lr * n_data)")
        den = den - 0.25 * eps * n**2 * lam[:, None] * lam[None, :]
    return _in_basis(u, np.eye(a.shape[0]) + eps * n**2 / (4 * s) * c, den)


def sgfs_cov(A, C, H, E, lr) -> np.ndarray:
    """Stationary covariance of SGFS (§5.2), OU: ``H A Sigma + Sigma A H = epsilon H (C + E E^T) H``.

    The update ``theta <- theta - epsilon H g + epsilon H E zeta`` with one example per step
    (``S = 1``; for a minibatch pass ``C / S``): the gradient noise and the injected noise
    ``E zeta`` enter at the same scale, the reading consistent with the paper's appendix E.
    """
    a = _spd("A", A)
    d = a.shape[0]
    c = _spd("C", C, d, allow_singular=True)
    h = _spd("H", H, d)
    e = finite_array("E", E, (d, d))
    eps = positive_float("lr", lr)
    with np.errstate(over="ignore", invalid="ignore"):  # refused just below, by name
        q = eps * h @ (c + e @ e.T) @ h
    finite_values("E", q, what="the noise covariance lr H (C + E E^T) H", hint=" (E E^T beyond the floats)")
    return lyapunov(h @ a, q)


def autocovariance(A, Sigma, lag) -> np.ndarray:
    """``E[theta(t + lag) theta(t)^T] = exp(-A lag) Sigma``, stationary OU process (eq. 48), ``lag >= 0`` in time."""
    a = _spd("A", A)
    sig = _spd("Sigma", Sigma, a.shape[0], allow_singular=True)
    t = float(lag) if isinstance(lag, numbers.Real) and not isinstance(lag, bool) else math.nan
    if not (math.isfinite(t) and t >= 0):
        raise ParameterError("lag", f"lag must be a finite time >= 0, got {lag!r}")
    lam, u = _eig(a)
    with np.errstate(over="ignore"):  # lag lambda beyond the floats: e^{-inf} = 0, the limit
        decay = np.exp(-(t * lam))
    return (u * decay) @ u.T @ sig  # e^{-A lag} in A's eigenbasis (A is symmetric)


def window_mean_cov(A, Sigma, tau) -> np.ndarray:
    r"""Covariance of the average of the stationary OU iterates over a window of time ``tau`` (eq. 50).

    ``D = (1/tau)(A^{-1} Sigma + Sigma A^{-1}) + (1/tau^2)(X Sigma + Sigma X)`` with
    ``X = U Lambda^{-2} (exp(-tau Lambda) - I) U^T`` (``A = U Lambda U^T``); exact for the OU
    process. A window of ``T`` SGD steps of rate ``epsilon`` is ``tau = epsilon T``.
    """
    a = _spd("A", A)
    sig = _spd("Sigma", Sigma, a.shape[0], allow_singular=True)
    t = positive_float("tau", tau)
    lam, u = _eig(a)
    # D = G Sigma + Sigma G with G = U g(tau Lambda) U^T, g(x) = (x - 1 + e^-x) / x^2, computed
    # without the cancellation of the two terms above (g -> 1/2 as x -> 0, so D -> Sigma) and
    # without overflow of 1 / tau^2 (g(x) ~ 1 / x as x -> inf)
    with np.errstate(over="ignore"):
        x = t * lam
    small = x < 1e-2  # Taylor series to x^4: truncation error x^5 / 5040 < 2e-14
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # masked by the series
        direct = (1.0 / x) * (1.0 + np.expm1(-x) / x)
    series = 0.5 + x * (-1.0 / 6 + x * (1.0 / 24 + x * (-1.0 / 120 + x / 720)))
    g = u @ np.diag(np.where(small, series, direct)) @ u.T
    out = g @ sig + sig @ g
    return 0.5 * (out + out.T)


def long_window_mean_cov(A, C, window, batch_size) -> np.ndarray:
    """The long-window limit of :func:`window_mean_cov` for SGD: ``A^{-1} C A^{-1} / (T S)`` (eqs. 30-31).

    The learning rate and any constant preconditioner cancel; in discrete time the limit
    ``T Cov(mean) -> M^{-1} Q M^{-T}`` of ``x' = (I - M) x + xi`` has no discretisation error.
    """
    a = _spd("A", A)
    c = _spd("C", C, a.shape[0], allow_singular=True)
    t, s = positive_float("window", window), float(count("batch_size", batch_size))
    a_inv = np.linalg.inv(a)
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):  # refused below, by name
        out = (a_inv @ c @ a_inv / s) / t
    finite_values("window", out, what="the covariance (it grows as 1 / window)", hint=f" (window = {t:g})")
    return 0.5 * (out + out.T)

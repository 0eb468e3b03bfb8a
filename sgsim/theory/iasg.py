r"""Iterate averaging as a posterior sampler: the accuracy and cost analysis of §6.2.

"Stochastic Gradient Descent as Approximate Bayesian Inference" (Mandt, Hoffman and Blei), §6.2:
constant SGD at rate ``epsilon`` with minibatches of ``S`` out of ``N`` examples, averaged over
windows of ``T = N / S`` steps (IASG, Algorithm 1). Under the OU model and Assumption 5
(``A = C``, the data drawn from the model) the window means have the covariance of eq. 34,

``D* = (1/N) U Lambda^{-1} [I + e(x)] U^T``,  ``e(x) = (e^{-x} - 1) / x``,  ``x = epsilon N lambda / S``,

per eigen-direction ``lambda`` of ``A = U Lambda U^T``: ``e`` is the relative deviation of the
window means' variance from the posterior's ``1 / (N lambda)``, always negative, largest in size
along ``lambda_min`` (``err_max``). Units are the paper's (rate on the averaged loss).

- :func:`relative_error`, :func:`window_errors`, :func:`err_max`: ``e(x)``, per direction and at
  ``lambda_min``;
- :func:`accuracy_constant`: the ``c`` with ``|e(c)| = tolerance``, so that
  ``epsilon / S > c / (N lambda_min)`` keeps ``|err_max|`` below the tolerance;
- :func:`feasibility`: that accuracy condition against the stability limit
  ``epsilon < 2 / lambda_max`` of the recursion; a rate satisfying both exists iff
  ``N / S > (c / 2) lambda_max / lambda_min``;
- :func:`posterior_samples_per_gradient`: the cost claim, "one independent posterior sample per
  ``N`` gradient evaluations", as a rate along each eigen-direction (exactly ``1 / N`` under
  ``A = C``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from .._validate import ParameterError, count, finite_array, finite_values, positive_float, real
from .exact_law import _spd

__all__ = [
    "relative_error",
    "window_errors",
    "err_max",
    "accuracy_constant",
    "Feasibility",
    "feasibility",
    "posterior_samples_per_gradient",
]


def relative_error(x) -> np.ndarray | float:
    """``e(x) = (e^{-x} - 1) / x`` (§6.2), the relative error of eq. 34 along one eigen-direction.

    ``x = epsilon N lambda / S > 0``. ``e`` increases from -1 (``x -> 0``) to 0 (``x -> inf``); it
    is computed with ``expm1`` so that small ``x`` keeps its accuracy.

    Examples
    --------
    >>> from sgsim.theory import iasg
    >>> print(round(iasg.relative_error(3.0), 4))  # the paper's IASG rate in Figure 4
    -0.3167
    """
    arr = finite_array("x", x)
    if not np.all(arr > 0):
        raise ParameterError("x", f"x = epsilon N lambda / S must be > 0, got {x!r}")
    out = np.expm1(-arr) / arr
    return float(out) if out.ndim == 0 else out


def _x(A, lr, n_data, batch_size) -> tuple[np.ndarray, np.ndarray]:
    a = _spd("A", A)
    eps, n, s = (
        positive_float("lr", lr),
        float(count("n_data", n_data)),
        float(count("batch_size", batch_size)),
    )
    lam = np.linalg.eigvalsh(a)
    with np.errstate(over="ignore"):  # x beyond the floats: e(x) ~ -1 / x is 0 to the floats, see _errors
        return lam, eps * (n / s) * lam


def _errors(x: np.ndarray) -> np.ndarray:
    # e(x) where x = epsilon N lambda / S underflowed to 0: the limit -1, which e(x) = -1 + x/2 - ...
    # rounds to for every x below 1e-16 (relative_error refuses x = 0 as an argument of its own);
    # where x overflowed to inf, |e(x)| < 1 / x < 6e-309: its limit 0 (a subnormal at most, lost)
    x = np.asarray(x)
    usable = (x > 0) & np.isfinite(x)
    return np.where(usable, relative_error(np.where(usable, x, 1.0)), np.where(x > 0, 0.0, -1.0))


def window_errors(A, lr, n_data, batch_size) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues ``lambda_k`` of ``A`` (ascending) and ``e(epsilon N lambda_k / S)`` (eq. 34, ``T = N / S``).

    Under ``A = C`` the window means' variance along eigenvector ``k`` is ``(1 + e_k) / (N lambda_k)``.
    """
    lam, x = _x(A, lr, n_data, batch_size)
    return lam, _errors(x)


def err_max(A, lr, n_data, batch_size) -> float:
    """§6.2's ``err_max = e(epsilon N lambda_min / S)``, the largest relative error of eq. 34 (negative)."""
    lam, x = _x(A, lr, n_data, batch_size)
    return float(_errors(x[0]))


def accuracy_constant(tolerance) -> float:
    """The ``c`` with ``|e(c)| = tolerance``: ``epsilon / S > c / (N lambda_min)`` gives ``|err_max| < tolerance``.

    ``|e(x)| = (1 - e^{-x}) / x`` decreases from 1 to 0, so ``c`` is unique for a tolerance in (0, 1);
    for a small tolerance ``c ~ 1 / tolerance``.
    """
    tol = real("tolerance", tolerance, 0.0, 1.0, low_open=True, high_open=True)
    if tol < 1e-20:  # c > 1e20: e^{-c} is far below the rounding of 1, so |e(c)| = 1 / c exactly
        if tol < 1.0 / np.finfo(float).max:
            msg = f"tolerance must be >= 5.6e-309 (c = 1 / tolerance is a float), got {tol}"
            raise ParameterError("tolerance", msg)
        return 1.0 / tol
    d = 1.0 - tol  # exact for tol > 1/2
    if d < 1e-8:  # |e(c)| = 1 - c/2 + c^2/6 - ...: c = 2 d (1 + 2 d / 3) + O(d^3), flat to the root solver
        return 2.0 * d * (1.0 + 2.0 * d / 3.0)
    hi = 2.0 / tol  # |e(2 / tol)| < tol / 2
    lo = min(1e-12, d)  # |e(c)| > 1 - c / 2: at c = 1 - tol above the tolerance (tol near 1)
    return float(brentq(lambda c: -np.expm1(-c) / c - tol, lo, hi, xtol=min(1e-14, 1e-3 * lo), rtol=1e-15))


@dataclass(frozen=True)
class Feasibility:
    """§6.2's accuracy and stability conditions for IASG with ``T = N / S``.

    Attributes
    ----------
    lambda_min, lambda_max : float
        Extreme eigenvalues of ``A``.
    n_data, batch_size : float
        ``N`` and ``S``.
    tolerance, c : float
        The tolerated ``|err_max|`` and its :func:`accuracy_constant`.
    min_lr : float
        ``c S / (N lambda_min)``: smaller rates leave ``|err_max|`` above the tolerance.
    max_lr : float
        ``2 / lambda_max``: the recursion ``theta' = (I - epsilon A) theta`` diverges beyond it.
    feasible : bool
        ``N / S > (c / 2) lambda_max / lambda_min``, i.e. ``min_lr < max_lr``.
    margin : float
        ``(N / S) / ((c / 2) lambda_max / lambda_min)`` (> 1 when feasible).
    lr, err_max : float or None
        The rate checked, if one was given, and ``e(epsilon N lambda_min / S)`` there.
    accurate, stable : bool or None
        ``lr > min_lr`` and ``lr < max_lr``.
    gradient_evaluations_per_sample : float
        ``S T = N``: one window, the cost of one effectively independent posterior draw (§6.2).
    """

    lambda_min: float
    lambda_max: float
    n_data: float
    batch_size: float
    tolerance: float
    c: float
    min_lr: float
    max_lr: float
    feasible: bool
    margin: float
    lr: float | None
    err_max: float | None
    accurate: bool | None
    stable: bool | None
    gradient_evaluations_per_sample: float


def feasibility(A, n_data, batch_size, lr=None, tolerance=0.1) -> Feasibility:
    """§6.2's check: is there a rate at which IASG is both accurate to ``tolerance`` and stable?

    Accuracy along the least constrained direction needs ``epsilon / S > c / (N lambda_min)``
    with ``c`` = :func:`accuracy_constant` ``(tolerance)``; stability of the recursion needs
    ``epsilon < 2 / lambda_max``. Both hold for some ``epsilon`` iff
    ``N / S > (c / 2) lambda_max / lambda_min``. With ``lr`` the record also says whether that
    rate meets each condition.

    Examples
    --------
    >>> import numpy as np
    >>> from sgsim.theory import iasg
    >>> f = iasg.feasibility(np.diag([1.0, 10.0]), n_data=10_000, batch_size=10, lr=0.05)
    >>> print(f.feasible, round(f.c, 3), round(f.min_lr, 5), f.max_lr, round(f.err_max, 4))
    True 10.0 0.01 0.2 -0.02
    """
    a = _spd("A", A)
    n, s = float(count("n_data", n_data)), float(count("batch_size", batch_size))
    tol = real("tolerance", tolerance, 0.0, 1.0, low_open=True, high_open=True)
    lam = np.linalg.eigvalsh(a)
    lo, hi = float(lam[0]), float(lam[-1])
    c = accuracy_constant(tol)
    with np.errstate(over="ignore"):  # refused just below, by name
        min_lr, max_lr = c * (s / n) / lo, 2.0 / hi
        margin = (n / s) / (0.5 * c * hi / lo)
    culprit = "tolerance" if c > 1e20 else "A"  # c = 1 / tolerance there, else lambda_min(A) is the small one
    finite_values(culprit, min_lr, max_lr, margin, what="the rate bounds c S / (N lambda_min)", hint=f" (c = {c:g})")
    eps = err = accurate = stable = None
    if lr is not None:
        eps = positive_float("lr", lr)
        err = float(_errors(np.asarray(eps * n * lo / s)))
        accurate, stable = eps > min_lr, eps < max_lr
    return Feasibility(lo, hi, n, s, tol, c, min_lr, max_lr, bool(margin > 1), margin, eps, err, accurate, stable, n)


def posterior_samples_per_gradient(A, C, n_data) -> tuple[np.ndarray, np.ndarray]:
    """Effectively independent posterior draws per gradient evaluation of long-run averaged SGD.

    The average of ``n`` stationary SGD steps (``n S`` per-example gradients) has covariance
    ``A^{-1} C A^{-1} / (n S)`` for long runs (eqs. 30-31, for any rate, window or constant
    preconditioner), so along a unit vector ``u`` it is as precise as the mean of
    ``n S r(u)`` independent posterior draws, with

    ``r(u) = u^T (N A)^{-1} u / (u^T A^{-1} C A^{-1} u)``.

    Under ``A = C`` (Assumption 5) ``r = 1 / N`` in every direction: one independent posterior
    sample per ``N`` gradient evaluations, one window of IASG (§6.2). A ``C`` describing
    minibatches drawn without replacement (``f C``) divides ``r`` by ``f``.

    Returns
    -------
    lam, rate : ndarray
        Eigenvalues of ``A`` (ascending) and ``r`` along the matching eigenvectors.
    """
    a = _spd("A", A)
    c = _spd("C", C, a.shape[0], allow_singular=True)
    n = float(count("n_data", n_data))
    lam, u = np.linalg.eigh(a)
    # along eigenvector u_k: u^T (NA)^{-1} u = 1 / (N lambda_k), u^T A^{-1} C A^{-1} u = c_kk / lambda_k^2
    ckk = np.einsum("ik,ij,jk->k", u, c, u)
    if not np.all(ckk > 0):
        raise ParameterError("C", "C must be positive along every eigenvector of A (no gradient noise there)")
    return lam, lam / (n * ckk)

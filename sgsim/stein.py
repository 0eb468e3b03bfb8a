r"""Kernel Stein discrepancy with the inverse multiquadric (IMQ) kernel.

For a target ``p ∝ exp(-U)`` with score ``s = grad log p = -grad U`` and a base kernel ``k``,
the Langevin Stein kernel is

.. math::

    k_p(x, y) = s(x) \cdot s(y)\, k(x, y) + s(x) \cdot \nabla_y k(x, y)
              + s(y) \cdot \nabla_x k(x, y) + \nabla_x \cdot \nabla_y k(x, y),

and the squared kernel Stein discrepancy of a law ``q`` is ``KSD^2 = E_{x, y ~ q} k_p(x, y)``:
zero when ``q = p`` (Stein's identity) and, for the IMQ kernel
``k(x, y) = (c^2 + |x - y|^2)^beta`` with ``c > 0`` and ``-1 < beta < 0``, a quantity that tends
to zero only if ``q`` converges weakly to ``p`` (Gorham and Mackey (2017), Measuring sample
quality with kernels, §3 and its IMQ theorem, Theorem 8). With ``r = x - y`` and
``u = c^2 + |r|^2`` the IMQ Stein kernel is

.. math::

    k_p(x, y) = s(x) \cdot s(y)\, u^\beta + 2\beta\, u^{\beta - 1}\, (s(y) - s(x)) \cdot r
              - 2\beta d\, u^{\beta - 1} - 4\beta(\beta - 1)\, |r|^2\, u^{\beta - 2}

(derived on the theory page :ref:`theory-ksd`). Two estimators of ``KSD^2`` from draws
``x_1 .. x_n``:

- the U-statistic ``(1 / (n (n - 1))) sum_{i != j} k_p(x_i, x_j)`` (unbiased; ``O(n^2 d)``,
  compiled, its rows computed on numba's threads, each row summed in a fixed order so the bits
  do not depend on the number of threads; practical up to about ``10^4`` draws), with the
  standard error of its Hoeffding decomposition
  ``Var = 4 (n - 2) zeta_1 / (n (n - 1)) + 2 zeta_2 / (n (n - 1))``;
- the linear-time statistic of Liu, Lee and Jordan (2016), A kernelized Stein discrepancy for
  goodness-of-fit tests, §4 (the mean of ``k_p`` over ``n / 2`` disjoint pairs), with the
  standard error of a mean of ``n / 2`` independent terms. The pairs are ``(x_i, x_{i + n/2})``:
  for independent draws any disjoint pairing is that statistic, and for the draws of a Markov
  chain this one keeps the two draws of a pair far apart.

Both standard errors treat the draws as independent: thin the draws of a chain to about one
per autocorrelation time first.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import prange

from ._jit import jit
from ._validate import ParameterError, ParameterTypeError, finite_array, real

__all__ = ["SteinDiscrepancy", "imq_ksd", "imq_stein_kernel", "EXACT_MAX_DRAWS"]

#: Above this many draws ``method="auto"`` uses the linear-time statistic.
EXACT_MAX_DRAWS = 10_000


class SteinDiscrepancy(NamedTuple):
    """An estimate of the kernel Stein discrepancy and what it takes to judge it.

    Attributes
    ----------
    ksd : float
        ``sqrt(max(ksd2, 0))``: the square root of the estimate, 0 when the estimate is negative.
    ksd2 : float
        The unbiased estimate of ``KSD^2`` (U-statistic or linear-time mean). It can be
        negative: an unbiased estimate of a quantity that is 0 for exact draws.
    se : float
        Standard error of ``ksd2`` (not of ``ksd``).
    n : int
        Number of draws used.
    method : str
        ``"u_statistic"`` or ``"linear"``.
    """

    ksd: float
    ksd2: float
    se: float
    n: int
    method: str


@jit(inline=True)
def _pair(x, s, i, j, c2, beta):
    # the IMQ Stein kernel k_p(x_i, x_j) (module docstring), one pow per pair
    d = x.shape[1]
    r2 = 0.0
    ss = 0.0
    sr = 0.0
    for m in range(d):
        r = x[i, m] - x[j, m]
        r2 += r * r
        ss += s[i, m] * s[j, m]
        sr += (s[j, m] - s[i, m]) * r
    u = c2 + r2
    kb = 1.0 / math.sqrt(u) if beta == -0.5 else u**beta
    k1 = kb / u
    return ss * kb + 2.0 * beta * k1 * sr - 2.0 * beta * d * k1 - 4.0 * beta * (beta - 1.0) * r2 * k1 / u


@jit(cache=True, parallel=True)
def _u_rows(x, s, c2, beta, rows, rows_sq):
    # row i: sum_{j != i} k_p(x_i, x_j) and the sum of its squares; rows are independent, each
    # summed in the order of j, so the result does not depend on the threads
    n = x.shape[0]
    for i in prange(n):
        acc = 0.0
        acc2 = 0.0
        for j in range(n):
            if j != i:
                h = _pair(x, s, i, j, c2, beta)
                acc += h
                acc2 += h * h
        rows[i] = acc
        rows_sq[i] = acc2


@jit(cache=True)
def _pair_terms(x, s, c2, beta, out):
    half = out.shape[0]
    for i in range(half):
        out[i] = _pair(x, s, i, i + half, c2, beta)


def imq_stein_kernel(x, y, score_x, score_y, c: float = 1.0, beta: float = -0.5) -> float:
    """The IMQ Stein kernel ``k_p(x, y)`` at one pair of points (module docstring).

    Parameters
    ----------
    x, y : array_like, shape (d,)
        The points.
    score_x, score_y : array_like, shape (d,)
        The target's score ``-grad U`` at ``x`` and at ``y``.
    c, beta : float
        The IMQ kernel's ``c > 0`` and ``beta`` in ``(-1, 0)``.
    """
    c, beta = _kernel_options(c, beta)
    pts = finite_array("x", [np.ravel(x), np.ravel(y)])
    d = pts.shape[1]
    scores = finite_array("score_x", [np.ravel(score_x), np.ravel(score_y)], (2, d))
    return float(_pair(pts, scores, 0, 1, c * c, beta))


def _kernel_options(c, beta) -> tuple[float, float]:
    c = real("c", c, 0.0, np.inf, low_open=True)
    beta = real("beta", beta, -1.0, 0.0, low_open=True, high_open=True)
    return c, beta


def _points(draws, var_name: str) -> np.ndarray:
    if hasattr(draws, "groups"):
        from .diagnostics import healthy_draws

        arr = healthy_draws(draws, var_name, what="the kernel Stein discrepancy")
    else:
        arr = finite_array("draws", draws)
    if arr.ndim == 4:
        raise ParameterError("draws", "draws of an ensemble (chain, draw, particle, d): pass one array (n, d) of them")
    if arr.ndim == 3:
        arr = arr.reshape(-1, arr.shape[-1])
    if arr.ndim != 2:
        raise ParameterError("draws", f"draws must have shape (n, d) or (chain, draw, d), got {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ParameterError("draws", "draws must be finite (a diverged chain? pass the result to leave it out)")
    return np.ascontiguousarray(arr, dtype=np.float64)


def imq_ksd(
    draws,
    target=None,
    *,
    scores=None,
    c: float = 1.0,
    beta: float = -0.5,
    method: str = "auto",
    var_name: str = "theta",
) -> SteinDiscrepancy:
    """Kernel Stein discrepancy of draws to a target, with the IMQ kernel ``(c^2 + |x - y|^2)^beta``.

    Gorham and Mackey (2017), Measuring sample quality with kernels (the IMQ kernel and its
    Stein discrepancy, §3, Theorem 8); the linear-time statistic of Liu, Lee and Jordan (2016),
    A kernelized Stein discrepancy for goodness-of-fit tests, §4. Formulas and the measured
    power: :ref:`theory-ksd`.

    Parameters
    ----------
    draws : InferenceData or array_like
        A result of :func:`sgsim.sample` (the chains it marks as diverged are left out, with a
        warning) or draws of shape ``(n, d)`` or ``(chain, draw, d)``; chains are pooled.
    target : Target, optional
        The target ``exp(-U)``; its score ``-grad U`` is evaluated at every draw
        (``target.gradient``, compiled or autodiff). Give this or ``scores``.
    scores : array_like, shape like ``draws``, optional
        The score ``-grad U`` at each draw, instead of ``target``.
    c : float
        ``c > 0`` (default 1).
    beta : float
        ``beta`` in ``(-1, 0)`` (default -1/2), the range in which the IMQ discrepancy detects
        non-convergence.
    method : {"auto", "u_statistic", "linear"}
        The exact ``O(n^2 d)`` U-statistic, the linear-time statistic, or (``"auto"``) the
        U-statistic up to :data:`EXACT_MAX_DRAWS` draws and the linear one beyond.
    var_name : str
        The posterior variable of an InferenceData.

    Returns
    -------
    SteinDiscrepancy
        ``ksd = sqrt(max(ksd2, 0))``, the unbiased estimate ``ksd2`` of ``KSD^2`` (negative
        values occur for good samples), its standard error ``se`` (Hoeffding decomposition of
        the U-statistic; sample standard deviation over pairs for the linear one; both for
        independent draws), ``n`` and ``method``.

    Examples
    --------
    Exact draws of a standard Gaussian against draws 10% too wide:

    >>> import numpy as np
    >>> from sgsim import stein, targets
    >>> target = targets.standard_gaussian()
    >>> x = np.random.default_rng(1).standard_normal((500, 2))
    >>> good, wide = stein.imq_ksd(x, target), stein.imq_ksd(1.1 * x, target)
    >>> bool(good.ksd2 < wide.ksd2), good.method
    (True, 'u_statistic')
    """
    c, beta = _kernel_options(c, beta)
    if method not in ("auto", "u_statistic", "linear"):
        raise ParameterError("method", f"method must be 'auto', 'u_statistic' or 'linear', got {method!r}")
    if (target is None) == (scores is None):
        raise ParameterError("target", "give exactly one of target and scores")
    x = _points(draws, var_name)
    n, d = x.shape
    if n < 2:
        raise ParameterError("draws", f"the discrepancy needs at least 2 draws, got {n}")
    if scores is None:
        if not hasattr(target, "gradient") or getattr(target, "dim", d) != d:
            raise ParameterTypeError("target", f"target must be an sgsim Target of dimension {d}")
        s = -np.asarray(target.gradient(x), dtype=np.float64)
        if not np.all(np.isfinite(s)):
            raise ParameterError("target", "the target's gradient is not finite at some draws")
    else:
        s = finite_array("scores", scores)
        s = s.reshape(-1, s.shape[-1]) if s.ndim == 3 else s
        if s.shape != (n, d):
            raise ParameterError("scores", f"scores must have the shape of the draws, ({n}, {d}), got {s.shape}")
    s = np.ascontiguousarray(s)
    if method == "auto":
        method = "u_statistic" if n <= EXACT_MAX_DRAWS else "linear"
    if method == "linear":
        if n < 4:
            raise ParameterError("draws", f"the linear-time statistic needs at least 4 draws, got {n}")
        terms = np.empty(n // 2)
        _pair_terms(x, s, c * c, beta, terms)
        est = float(terms.mean())
        se = float(terms.std(ddof=1) / math.sqrt(terms.size))
        return SteinDiscrepancy(math.sqrt(max(est, 0.0)), est, se, n, "linear")
    rows, rows_sq = np.empty(n), np.empty(n)
    _u_rows(x, s, c * c, beta, rows, rows_sq)
    pairs = n * (n - 1.0)
    est = float(rows.sum() / pairs)
    # Hoeffding: zeta_2 = Var h(X, Y), zeta_1 = Cov(h(X, Y), h(X, Z)) = E[h(X,Y) h(X,Z)] - KSD^4,
    # each estimated from the rows (distinct pairs, distinct triples); clipped at 0
    zeta2 = max(float(rows_sq.sum() / pairs) - est * est, 0.0)
    zeta1 = 0.0
    if n > 2:
        zeta1 = max(float(np.sum(rows * rows - rows_sq) / (pairs * (n - 2.0))) - est * est, 0.0)
    var = (4.0 * (n - 2.0) * zeta1 + 2.0 * zeta2) / pairs
    return SteinDiscrepancy(math.sqrt(max(est, 0.0)), est, math.sqrt(var), n, "u_statistic")

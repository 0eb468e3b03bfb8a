"""Closed-form distances between Gaussian laws (:ref:`theory-gaussian-distances`).

Matrix square roots come from a symmetric eigendecomposition with the eigenvalues clipped
at 0, never from a general matrix square root, so nearly singular covariances (as the
exact laws produce at a point start or with tiny step sizes) give finite, accurate
results. Every function broadcasts over leading axes: many laws (e.g. a whole
:class:`sgsim.theory.exact_law.GaussianPath`) are compared at once.
"""

from __future__ import annotations

import numpy as np

from .._validate import ParameterError, finite_array

__all__ = ["sqrtm_psd", "gaussian_w2", "gaussian_kl", "w2_optimal_map", "w2_1d"]

# relative tolerances: asymmetry of an input, and negative eigenvalues taken as rounding
_SYM_RTOL = 1e-10
_PSD_RTOL = 1e-10


def _matrices(name: str, value) -> np.ndarray:
    arr = finite_array(name, value)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2] or arr.shape[-1] == 0:
        raise ParameterError(name, f"{name} must be a (..., d, d) stack of square matrices, got shape {arr.shape}")
    scale = np.abs(arr).max(axis=(-2, -1))
    # halves first: the same bits as 0.5 (a + a^T), without the overflow of a + a^T near 1.8e308
    half, half_t = 0.5 * arr, 0.5 * np.swapaxes(arr, -1, -2)
    if np.any(np.abs(half - half_t).max(axis=(-2, -1)) > 0.5 * _SYM_RTOL * scale):
        raise ParameterError(name, f"{name} must be symmetric")
    return half + half_t


def _eigh(name: str, value, definite: bool) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues (clipped at 0) and eigenvectors of a symmetric PSD (or PD) stack."""
    lam, vec = np.linalg.eigh(_matrices(name, value))
    top = np.abs(lam).max(axis=-1)
    if definite:
        if np.any(lam[..., 0] <= 0):
            raise ParameterError(
                name, f"{name} must be positive definite (smallest eigenvalue {lam[..., 0].min():.3g})"
            )
    elif np.any(lam[..., 0] < -_PSD_RTOL * top):
        raise ParameterError(
            name, f"{name} must be positive semidefinite (smallest eigenvalue {lam[..., 0].min():.3g})"
        )
    return np.clip(lam, 0.0, None), vec


def _sym(x: np.ndarray) -> np.ndarray:
    return 0.5 * x + 0.5 * np.swapaxes(x, -1, -2)


def _scale4(*mats: np.ndarray) -> np.ndarray:
    """A power of 4 per matrix of the (broadcast) stacks that brings their largest entry near 1.

    Only where an entry lies beyond 2^(+-400) (products of square roots would overflow or
    underflow); elsewhere 1, so ordinary inputs keep their bits. A power of 4 has an exact
    square root, so rescaled results are exact rescalings.
    """
    top = np.zeros(())
    for m in mats:
        top = np.maximum(top, np.abs(m).max(axis=(-2, -1)))
    _, e = np.frexp(top)
    k = np.where((e > 400) | ((e < -400) & (top > 0)), (e - 1) // 2, 0)  # top / 4^k in [1, 4)
    return np.ldexp(1.0, 2 * k)


def _refuse_overflow(name: str, value, what: str):
    if not np.all(np.isfinite(value)):
        raise ParameterError(name, f"{name} makes {what} overflow beyond 1.8e308")
    return value


def _from_eig(lam: np.ndarray, vec: np.ndarray) -> np.ndarray:
    return _sym((vec * lam[..., None, :]) @ np.swapaxes(vec, -1, -2))


def _vectors(name: str, value, d: int) -> np.ndarray:
    arr = finite_array(name, value)
    if arr.ndim < 1 or arr.shape[-1] != d:
        raise ParameterError(
            name, f"{name} must have last axis {d} (the dimension of the covariances), got shape {arr.shape}"
        )
    return arr


def _scalar_or_array(x: np.ndarray):
    return float(x) if np.ndim(x) == 0 else x


def sqrtm_psd(S) -> np.ndarray:
    """Symmetric square root of a symmetric positive semidefinite matrix (or stack).

    ``U diag(sqrt(max(lam, 0))) U^T`` from ``S = U diag(lam) U^T``; the input is
    symmetrised, and negative eigenvalues of rounding size (relative 1e-10) are clipped.

    Parameters
    ----------
    S : array_like, shape (..., d, d)

    Raises
    ------
    ValueError
        If ``S`` is not symmetric or has a clearly negative eigenvalue.
    """
    lam, vec = _eigh("S", S, definite=False)
    return _from_eig(np.sqrt(lam), vec)


def gaussian_w2(m1, S1, m2, S2):
    """2-Wasserstein distance between ``N(m1, S1)`` and ``N(m2, S2)`` (:ref:`theory-gaussian-distances`).

    ``W2^2 = |m1 - m2|^2 + Tr(S1 + S2 - 2 (S2^{1/2} S1 S2^{1/2})^{1/2})``. The trace term is
    evaluated as the Procrustes residual ``min_R ||S1^{1/2} - S2^{1/2} R||_F^2`` over
    orthogonal ``R`` (attained at the polar factor of ``S1^{1/2} S2^{1/2}``): a sum of
    squares, so close laws do not lose their distance to cancellation.

    Parameters
    ----------
    m1, m2 : array_like, shape (..., d)
    S1, S2 : array_like, shape (..., d, d)
        Symmetric positive semidefinite (singular allowed). Leading axes broadcast.

    Returns
    -------
    float or ndarray
        ``W2`` (not squared), with the broadcast leading shape.
    """
    lam1, u1 = _eigh("S1", S1, definite=False)
    lam2, u2 = _eigh("S2", S2, definite=False)
    d = lam1.shape[-1]
    if lam2.shape[-1] != d:
        raise ParameterError("S1", f"S1 and S2 must have the same dimension, got {d} and {lam2.shape[-1]}")
    mu1, mu2 = _vectors("m1", m1, d), _vectors("m2", m2, d)
    # the covariances scaled by a common power of 4, c: the residual scales by sqrt(c), exactly
    c = _scale4(_matrices("S1", S1), _matrices("S2", S2))
    a = _from_eig(np.sqrt(lam1 / c[..., None]), u1)
    b = _from_eig(np.sqrt(lam2 / c[..., None]), u2)
    w, _, zt = np.linalg.svd(a @ b)
    rot = np.swapaxes(zt, -1, -2) @ np.swapaxes(w, -1, -2)
    resid = a - b @ rot
    cov_part = np.sqrt(np.sum(resid**2, axis=(-2, -1))) * np.sqrt(c)
    # the means' distance from halves and a power of 2, so that neither m1 - m2 nor its square overflows
    half = 0.5 * mu1 - 0.5 * mu2
    top = np.abs(half).max(axis=-1, keepdims=True)
    sm = np.where(top > 0, np.ldexp(1.0, np.frexp(top)[1] - 1), 1.0)
    mean_part = np.sqrt(np.sum((half / sm) ** 2, axis=-1)) * sm[..., 0]
    with np.errstate(over="ignore"):  # beyond the floats: refused just below, by name
        w2 = 2.0 * np.hypot(0.5 * cov_part, mean_part)
    return _scalar_or_array(_refuse_overflow("m1", w2, "the distance W2"))


def gaussian_kl(m0, S0, m1, S1):
    """Kullback-Leibler divergence ``KL(N(m0, S0) || N(m1, S1))`` (:ref:`theory-gaussian-distances`).

    ``KL = (1/2) [Tr(S1^{-1} S0) + (m1 - m0)^T S1^{-1} (m1 - m0) - d + log det S1 - log det S0]``,
    evaluated as ``(1/2) [sum_i (mu_i - 1 - log mu_i) + |W^T (m1 - m0)|^2]`` with ``mu_i`` the
    eigenvalues of ``W^T S0 W`` and ``W = U1 diag(lam1^{-1/2})`` whitening ``S1``: a sum of
    non-negative terms.

    Parameters
    ----------
    m0, m1 : array_like, shape (..., d)
    S0, S1 : array_like, shape (..., d, d)
        Symmetric positive definite. Leading axes broadcast.

    Returns
    -------
    float or ndarray
        ``KL >= 0``, in nats.
    """
    _eigh("S0", S0, definite=True)
    lam1, u1 = _eigh("S1", S1, definite=True)
    d = lam1.shape[-1]
    s0 = _matrices("S0", S0)
    if s0.shape[-1] != d:
        raise ParameterError("S0", f"S0 and S1 must have the same dimension, got {s0.shape[-1]} and {d}")
    mu0, mu1 = _vectors("m0", m0, d), _vectors("m1", m1, d)
    # both covariances scaled by a common power of 4, c (the covariance terms do not change), and
    # the means' difference by a power of 2: the mean term is |W^T (m1 - m0)|^2 f^2, f = 2 sm / sqrt(c)
    c = _scale4(s0, _matrices("S1", S1))
    lam1 = lam1 / c[..., None]
    if np.any(lam1 == 0):  # S1's smallest eigenvalue underflows beside S0's scale: KL ~ |S0| / lam_min(S1)
        raise ParameterError("S0", "S0 and S1 differ in scale beyond the floats: the divergence overflows 1.8e308")
    white = u1 / np.sqrt(lam1)[..., None, :]
    white_t = np.swapaxes(white, -1, -2)
    with np.errstate(over="ignore"):  # beyond the floats: refused just below, by name
        whitened = _sym(white_t @ (s0 / c[..., None, None]) @ white)
    mu = np.linalg.eigvalsh(_refuse_overflow("S0", whitened, "the covariance terms (S0 against S1)"))
    x = mu - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        # mu - 1 - log(mu): log1p(mu - 1) keeps the digits near mu = 1, but mu - 1 rounds to -1
        # (log1p(-1) = -inf) below mu = 1.1e-16, where log(mu) is exact
        log_mu = np.where(np.abs(x) < 0.5, np.log1p(x), np.log(mu))
        terms = np.where(mu > 0, x - log_mu, np.inf)
    _refuse_overflow("S0", terms, "the covariance terms (S0 against S1)")
    half = np.broadcast_to(0.5 * mu1 - 0.5 * mu0, np.broadcast_shapes(mu1.shape, mu0.shape))
    top = np.abs(half).max(axis=-1, keepdims=True)
    sm = np.where(top > 0, np.ldexp(1.0, np.frexp(top)[1] - 1), 1.0)
    z = (white_t @ (half / sm)[..., None])[..., 0]
    with np.errstate(over="ignore"):  # beyond the floats: refused just below, by name
        f = 2.0 * sm[..., 0] / np.sqrt(c)
        kl = 0.5 * (np.sum(terms, axis=-1) + np.sum(z**2, axis=-1) * f * f)
    return _scalar_or_array(np.maximum(_refuse_overflow("m1", kl, "the divergence"), 0.0))


def w2_optimal_map(S1, S2) -> np.ndarray:
    """The W2-optimal linear map from ``N(0, S1)`` to ``N(0, S2)`` (:ref:`theory-gaussian-distances`).

    ``T = S1^{-1/2} (S1^{1/2} S2 S1^{1/2})^{1/2} S1^{-1/2}``, symmetric positive
    semidefinite, with ``T S1 T = S2``; ``x -> m2 + T (x - m1)`` transports
    ``N(m1, S1)`` to ``N(m2, S2)`` at cost ``W2^2``. Computed in the eigenbasis of ``S1``.

    Parameters
    ----------
    S1 : array_like, shape (..., d, d)
        Symmetric positive definite.
    S2 : array_like, shape (..., d, d)
        Symmetric positive semidefinite.
    """
    lam1, u1 = _eigh("S1", S1, definite=True)
    lam2, _ = _eigh("S2", S2, definite=False)
    if lam2.shape[-1] != lam1.shape[-1]:
        raise ParameterError("S1", f"S1 and S2 must have the same dimension, got {lam1.shape[-1]} and {lam2.shape[-1]}")
    s2 = _matrices("S2", S2)
    # T(a S1, b S2) = (b / a)^(1/2) T(S1, S2): each matrix scaled by its own power of 4
    c1, c2 = _scale4(_matrices("S1", S1)), _scale4(s2)
    u1t = np.swapaxes(u1, -1, -2)
    r = np.sqrt(lam1 / c1[..., None])
    inner = r[..., :, None] * (u1t @ (s2 / c2[..., None, None]) @ u1) * r[..., None, :]
    lam, vec = np.linalg.eigh(_sym(inner))
    root = _from_eig(np.sqrt(np.clip(lam, 0.0, None)), vec)
    with np.errstate(over="ignore"):  # beyond the floats: refused just below, by name
        t = u1 @ (root / r[..., :, None] / r[..., None, :]) @ u1t * (np.sqrt(c2) / np.sqrt(c1))[..., None, None]
    return _sym(_refuse_overflow("S2", t, "the map T (about (S2 / S1)^(1/2))"))


def w2_1d(x, density, other) -> float:
    """``W2`` between a law on the line, given by its density on a grid, and a second law.

    In one dimension the optimal coupling is monotone:
    ``W2^2 = int_0^1 (F^{-1}(u) - G^{-1}(u))^2 du``. ``F`` is the piecewise-linear CDF of
    ``density`` on the nodes ``x`` (trapezoidal rule); ``other`` is either a second density on
    the same nodes or a 1-D array of draws (their empirical quantiles). The integral over ``u``
    uses 20 000 midpoints (or 20 per draw, if more), so the result carries the grid's error
    (``O(h)`` in the quantiles) and, for draws, the empirical law's own distance to the law they
    come from, which is positive and shrinks with the number of draws.

    Parameters
    ----------
    x : array_like, shape (n,)
        Increasing nodes.
    density : array_like, shape (n,)
        Nonnegative, positive mass (normalised here).
    other : array_like
        Of shape (n,): a second density on the same nodes; of any other 1-D length: draws.

    Returns
    -------
    float
    """
    x = finite_array("x", x)
    p = finite_array("density", density)
    q = finite_array("other", other)
    if x.ndim != 1 or x.size < 2 or np.any(np.diff(x) <= 0):
        raise ParameterError("x", "x must be an increasing vector of at least 2 nodes")
    if p.shape != x.shape or np.any(p < 0) or not p.sum() > 0:
        raise ParameterError("density", f"density must be nonnegative with positive mass on the grid's {x.shape} nodes")
    if q.ndim != 1 or q.size == 0:
        raise ParameterError("other", "other must be a density on the grid or a vector of draws")
    n_u = max(20_000, 20 * q.size)
    u = (np.arange(n_u) + 0.5) / n_u

    def quantiles(dens: np.ndarray) -> np.ndarray:
        cdf = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]) * np.diff(x))])
        cdf /= cdf[-1]
        keep = np.concatenate([[True], np.diff(cdf) > 0])  # strictly increasing for the inverse
        return np.interp(u, cdf[keep], x[keep])

    first = quantiles(p)
    if q.shape == x.shape:
        if np.any(q < 0) or not q.sum() > 0:
            raise ParameterError("other", "other, as a density, must be nonnegative with positive mass")
        second = quantiles(q)
    else:
        second = np.sort(q)[np.minimum((u * q.size).astype(np.int64), q.size - 1)]
    return float(np.sqrt(np.mean((first - second) ** 2)))

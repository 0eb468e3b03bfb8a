r"""How Gaussian is minibatch gradient noise? Assumption 1 measured from per-example gradients.

"Stochastic Gradient Descent as Approximate Bayesian Inference" (Mandt, Hoffman and Blei),
Assumption 1: the minibatch gradient ``g_S = (1/S) sum_{n in batch} g_n`` is Gaussian around the
full gradient, with covariance ``C / S``. For minibatches drawn with replacement the noise is the
mean of ``S`` independent draws of the per-example deviation ``d_n = g_n - g_bar``, so its
cumulants along a unit vector ``u`` follow from those of ``u^T d_n`` exactly:

``skewness = gamma_1 / sqrt(S)``,  ``excess kurtosis = gamma_2 / S``

(``gamma_1``, ``gamma_2`` the per-example skewness and excess kurtosis); the Gaussian has 0 for
both. :func:`gradient_noise_shape` computes them along the top eigenvector of ``C`` (the
direction that carries most of the noise), checks them by drawing minibatches, and reports how
concentrated ``Tr C`` is on a few examples: a heavy-tailed per-example distribution is what
makes the minibatch noise skewed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validate import ParameterError, finite_array, fits_in_memory, integer, real

__all__ = ["NoiseShape", "gradient_noise_shape"]


@dataclass(frozen=True)
class NoiseShape:
    """The shape of minibatch gradient noise against the Gaussian of Assumption 1.

    Attributes
    ----------
    n_data, dim, batch_size : int
        ``N``, ``D``, ``S``.
    direction : ndarray, shape (D,)
        Unit top eigenvector of ``C``, along which the moments are taken.
    example_skewness, example_excess_kurtosis : float
        ``gamma_1``, ``gamma_2`` of one example's gradient deviation along ``direction``.
    skewness, excess_kurtosis : float
        Of the minibatch noise (with replacement): ``gamma_1 / sqrt(S)``, ``gamma_2 / S``.
    max_coordinate_skewness : float
        ``max_i |gamma_1,i| / sqrt(S)`` over the coordinates with gradient noise.
    top_fraction, top_share : float
        The ``ceil(top_fraction N)`` examples of largest ``|d_n|^2`` carry ``top_share`` of ``Tr C``.
    n_minibatches : int
        Minibatches drawn to measure the moments (0: none).
    measured_skewness, measured_excess_kurtosis : float
        Their sample values along ``direction`` (NaN without draws).
    se_skewness, se_excess_kurtosis : float
        Standard errors of those, from the estimators' influence functions (valid whatever the
        noise's law, given finite eighth moments).
    gaussian_se_skewness, gaussian_se_excess_kurtosis : float
        ``sqrt(6 / R)`` and ``sqrt(24 / R)``: the spread of the same estimates for Gaussian noise.
    """

    n_data: int
    dim: int
    batch_size: int
    direction: np.ndarray
    example_skewness: float
    example_excess_kurtosis: float
    skewness: float
    excess_kurtosis: float
    max_coordinate_skewness: float
    top_fraction: float
    top_share: float
    n_minibatches: int
    measured_skewness: float
    measured_excess_kurtosis: float
    se_skewness: float
    se_excess_kurtosis: float
    gaussian_se_skewness: float
    gaussian_se_excess_kurtosis: float


def _standardised_moments(z: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Sample skewness and excess kurtosis of ``z`` (about its sample mean), and their influence values.

    The influence values ``psi_i`` give the standard errors ``std(psi) / sqrt(n)`` for any
    distribution with finite eighth moments; for a Gaussian their variances are 6 and 24.
    """
    x = z - z.mean()
    u = x / np.sqrt(np.mean(x**2))
    g1, k = float(np.mean(u**3)), float(np.mean(u**4))
    # influence functions of m3 / m2^{3/2} and m4 / m2^2 with an estimated mean
    inf1 = u**3 - g1 - 3.0 * u - 1.5 * g1 * (u**2 - 1.0)
    inf2 = u**4 - k - 4.0 * g1 * u - 2.0 * k * (u**2 - 1.0)
    return g1, k - 3.0, inf1, inf2


def gradient_noise_shape(
    example_gradients, batch_size, n_minibatches: int = 0, seed: int = 0, top_fraction: float = 0.01
) -> NoiseShape:
    """Skewness and kurtosis of minibatch gradient noise, exact and measured; the top examples' share of ``Tr C``.

    Parameters
    ----------
    example_gradients : array_like, shape (N, D)
        Per-example gradients at the point of interest (the optimum, for Assumption 2's ``C``).
    batch_size : int
        ``S``, between 1 and ``N``.
    n_minibatches : int
        ``R`` minibatches drawn with replacement to measure the moments (0: exact values only).
    seed : int
        Seed of those draws.
    top_fraction : float
        In (0, 1]: the share of examples whose part of ``Tr C`` is reported (1% by default).
    """
    g = finite_array("example_gradients", example_gradients)
    if g.ndim != 2 or g.shape[0] < 2:
        raise ParameterError("example_gradients", f"example_gradients must have shape (N >= 2, D), got {g.shape}")
    n, dim = g.shape
    s = integer("batch_size", batch_size, low=1, high=n)
    r = integer("n_minibatches", n_minibatches, low=0)
    seed = integer("seed", seed, low=0)
    # the minibatch means and their two influence arrays: four floats per minibatch
    fits_in_memory("n_minibatches", 32.0 * r, f"{r:,} minibatch means")
    if r == 1 or r == 2:
        raise ParameterError("n_minibatches", "n_minibatches must be 0 or >= 3 (a skewness needs draws)")
    frac = real("top_fraction", top_fraction, 0.0, 1.0, low_open=True)
    dev = g - g.mean(axis=0)
    c = dev.T @ dev / n
    lam, vec = np.linalg.eigh(c)
    if not lam[-1] > 0:
        raise ParameterError("example_gradients", "the per-example gradients are all equal: there is no noise")
    u = vec[:, -1]
    p = dev @ u
    g1, g2, _, _ = _standardised_moments(p)
    var = np.mean(dev**2, axis=0)
    noisy = var > 1e-12 * var.max()
    coord = np.mean(dev[:, noisy] ** 3, axis=0) / var[noisy] ** 1.5
    sq = np.sum(dev**2, axis=1)
    k = int(np.ceil(frac * n))
    share = float(np.sort(sq)[::-1][:k].sum() / sq.sum())
    m1 = m2 = se1 = se2 = float("nan")
    if r:
        rng = np.random.default_rng(seed)
        z = np.empty(r)
        rows = max(1, 2_000_000 // s)  # bound the index array in memory
        for start in range(0, r, rows):
            stop = min(r, start + rows)
            z[start:stop] = p[rng.integers(0, n, size=(stop - start, s))].mean(axis=1)
        m1, m2, inf1, inf2 = _standardised_moments(z)
        se1, se2 = float(np.std(inf1) / np.sqrt(r)), float(np.std(inf2) / np.sqrt(r))
    gauss1, gauss2 = (float(np.sqrt(6.0 / r)), float(np.sqrt(24.0 / r))) if r else (float("nan"), float("nan"))
    return NoiseShape(
        n, dim, s, u, g1, g2, g1 / np.sqrt(s), g2 / s, float(np.max(np.abs(coord))) / np.sqrt(s), frac, share, r,
        m1, m2, se1, se2, gauss1, gauss2,
    )  # fmt: skip

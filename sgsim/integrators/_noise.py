"""From a noise covariance (:class:`sgsim.dynamics.Noise`) to the factors a kernel draws with.

A step's noise covariance is ``sum_j q_jk Q_j`` (fixed matrices, per-step coefficients). When
the ``Q_j`` share an eigenbasis ``B`` (they are diagonal, or multiples of the identity beside
one other matrix, or commute), the noise is ``B diag(sqrt(sum_j q_jk lambda_j)) xi``: one basis
for the run (:func:`noise_basis`) and per-step square roots computed block by block
(:func:`noise_factors`). A diagonal covariance needs no rotation at all.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .._jit import jit
from .._validate import ParameterError
from ..dynamics import Noise


@dataclass(frozen=True)
class NoiseBasis:
    """The eigenbasis shared by a noise's matrices and each matrix's eigenvalues in it."""

    basis: np.ndarray
    rotate: bool
    diagonals: tuple[np.ndarray, ...]

    @functools.cached_property
    def rows(self) -> np.ndarray:
        """The eigenvectors as the rows of a contiguous array (``basis.T``), as the loops read them."""
        return np.ascontiguousarray(self.basis.T)


def _is_diagonal(m: np.ndarray) -> bool:
    return np.count_nonzero(m - np.diag(np.diag(m))) == 0


def _is_scaled_identity(m: np.ndarray) -> bool:
    return _is_diagonal(m) and bool(np.all(np.diag(m) == m[0, 0]))


def noise_basis(noise: Noise | None, dim: int) -> NoiseBasis:
    """The basis in which every matrix of ``noise`` is diagonal, with their eigenvalues.

    Raises
    ------
    ParameterError
        If the matrices share no eigenbasis (their products do not commute).
    """
    eye = np.eye(dim)
    if noise is None:
        return NoiseBasis(eye, False, ())
    mats = [np.asarray(m, float) for m in noise.mats]
    if all(_is_diagonal(m) for m in mats):
        return NoiseBasis(eye, False, tuple(np.diag(m).copy() for m in mats))
    general = [i for i, m in enumerate(mats) if not _is_scaled_identity(m)]
    # the eigenbasis of one matrix (exactly its eigenvalues), or of a fixed mix of several
    mix = mats[general[0]] if len(general) == 1 else sum((i + 1.0) * mats[i] for i in general)
    lam, basis = np.linalg.eigh(mix)
    diagonals = []
    for m in mats:
        if _is_scaled_identity(m):
            diagonals.append(np.full(dim, m[0, 0]))
        elif len(general) == 1:
            diagonals.append(np.clip(lam, 0.0, None))
        else:
            rotated = basis.T @ m @ basis
            off = rotated - np.diag(np.diag(rotated))
            if np.max(np.abs(off)) > 1e-10 * max(1.0, float(np.max(np.abs(m)))):
                raise ParameterError(
                    "grad_noise_cov",
                    "the noise covariance's matrices share no eigenbasis (they do not commute); "
                    "this sampler cannot draw their sum with one basis",
                )
            diagonals.append(np.clip(np.diag(rotated), 0.0, None))
    return NoiseBasis(basis, True, tuple(diagonals))


@jit
def _factor_rows(coefs, diags, isotropic, sd, noisy):
    # sd[k, i] = sqrt(sum_j coefs[j][k] diags[j, i]), summed in the order of the terms; when
    # every diagonal is constant across dimensions, one square root per step serves them all.
    # Each pass runs over the steps without branches, so that it vectorises.
    n_terms, dim = diags.shape
    n = sd.shape[0]
    var = np.empty(n)
    ok = True
    for i in range(1 if isotropic else dim):
        c0, d0 = coefs[0], diags[0, i]
        for k in range(n):
            var[k] = c0[k] * d0
        for j in range(1, n_terms):
            cj, dj = coefs[j], diags[j, i]
            for k in range(n):
                var[k] = var[k] + cj[k] * dj
        for k in range(n):
            ok = ok & (var[k] >= 0.0)
        if i == 0:
            for k in range(n):
                noisy[k] = var[k] != 0.0
        else:
            for k in range(n):
                noisy[k] = noisy[k] | (var[k] != 0.0)
        for k in range(n):
            var[k] = math.sqrt(max(var[k], 0.0))
        if isotropic:
            for k in range(n):
                for c in range(dim):
                    sd[k, c] = var[k]
        else:
            for k in range(n):
                sd[k, i] = var[k]
    return ok


def noise_factors(noise: Noise | None, basis: NoiseBasis, n_steps: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-step standard deviations in ``basis`` (shape ``(n_steps, dim)``) and whether each step has noise.

    ``sd[k, i] = sqrt(sum_j q_jk lambda_ji)``, summed in the order of the noise's terms.
    """
    sd = np.empty((n_steps, dim))
    noisy = np.empty(n_steps, bool)
    if noise is None:
        sd[...], noisy[...] = 0.0, False
        return sd, noisy
    coefs = tuple(np.ascontiguousarray(np.broadcast_to(np.asarray(c, float), (n_steps,))) for c in noise.coef)
    if not all(np.all(np.isfinite(c)) for c in coefs):
        raise ParameterError(
            "step_size", "the noise variance overflows at some step: step_size (or temperature) is too large"
        )
    diags = np.stack(basis.diagonals)
    if not _factor_rows(coefs, diags, bool(np.all(diags == diags[:, :1])), sd, noisy):
        raise ParameterError("grad_noise_cov", "the noise covariance is not positive semidefinite at some step")
    return sd, noisy

"""The target record shared by every target family."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from .._jit import is_compiled, jit
from .._validate import spd_matrix


@jit(cache=False)
def _log_density_rows(log_density, params, x, out):
    for n in range(x.shape[0]):
        out[n] = log_density(x[n], params)


@jit(cache=False)
def _grad_u_rows(grad_u, params, x, out):
    for n in range(x.shape[0]):
        grad_u(x[n], params, out[n])


@dataclass(frozen=True, eq=False)
class Target:
    """A target density ``p(theta) ∝ exp(-U(theta))`` with what is known about it exactly.

    Attributes
    ----------
    name : str
        Short name, as used by :func:`sgsim.targets.get`.
    dim : int
        Dimension ``d`` of ``theta``.
    grad_u : numba-compiled function
        ``grad_u(theta, params, out)`` writes the gradient of ``U`` at ``theta`` (shape
        ``(d,)``) into ``out``. It must not allocate.
    log_density_fn : numba-compiled function
        ``log_density_fn(theta, params) -> float``, the log density (normalised where the
        normaliser is known; ``-U`` up to a constant otherwise).
    params : tuple
        The arrays and numbers that ``grad_u`` and ``log_density_fn`` read.
    grad_noise_cov : ndarray, shape (d, d)
        Covariance ``V`` of the additive Gaussian noise that emulates a stochastic gradient,
        ``grad_u(theta) + zeta`` with ``zeta ~ N(0, V)``; zero for exact gradients.
    init_low, init_high : ndarray, shape (d,)
        Box from which initial points are drawn uniformly when none are given.
    mean, second_moment : ndarray or None
        Exact ``E[theta]`` and ``E[theta theta^T]`` where known.
    mode_centres : ndarray or None
        Centres of the modes, shape ``(n_modes, d)``, for mode-coverage metrics.
    mode_sd : ndarray or None
        Standard deviation of each mode (isotropic), shape ``(n_modes,)``.
    exact_sampler : callable or None
        ``exact_sampler(rng, n) -> ndarray (n, d)`` of exact iid draws.
    extras : dict
        Family-specific exact quantities (e.g. raw moments of ``z`` for the mixture of
        exponentials).
    """

    name: str
    dim: int
    grad_u: Callable
    log_density_fn: Callable
    params: tuple
    grad_noise_cov: np.ndarray
    init_low: np.ndarray
    init_high: np.ndarray
    mean: np.ndarray | None = None
    second_moment: np.ndarray | None = None
    mode_centres: np.ndarray | None = None
    mode_sd: np.ndarray | None = None
    exact_sampler: Callable | None = None
    extras: dict = field(default_factory=dict)

    def __post_init__(self):
        for attr in ("grad_u", "log_density_fn"):
            if not is_compiled(getattr(self, attr)):
                raise TypeError(
                    f"Target.{attr} must be a numba-compiled function (decorate it with "
                    f"sgsim._jit.jit or numba.njit); got a plain {type(getattr(self, attr)).__name__}"
                )

    def with_gradient_noise(self, cov) -> Target:
        """Return a copy whose stochastic gradient carries additive noise ``N(0, cov)``.

        Parameters
        ----------
        cov : float or array_like
            A non-negative scalar ``s2`` (meaning ``s2 * I``) or a symmetric positive
            semidefinite ``(d, d)`` matrix.
        """
        if np.ndim(cov) == 0:
            s2 = float(cov)
            if not (np.isfinite(s2) and s2 >= 0):
                raise ValueError(f"cov must be a finite scalar >= 0, got {cov}")
            cov = s2 * np.eye(self.dim)
        cov = spd_matrix("cov", cov, self.dim, allow_singular=True)
        return replace(self, grad_noise_cov=cov)

    def log_density(self, x) -> np.ndarray:
        """Log density at each row of ``x`` (shape ``(n, d)`` or ``(d,)``)."""
        x = np.asarray(x, dtype=np.float64)
        flat = np.ascontiguousarray(x.reshape(-1, self.dim))
        out = np.empty(flat.shape[0])
        _log_density_rows(self.log_density_fn, self.params, flat, out)
        return out.reshape(x.shape[:-1]) if x.ndim > 1 else out[0]

    def gradient(self, x) -> np.ndarray:
        """Exact gradient of ``U`` at each row of ``x`` (shape ``(n, d)`` or ``(d,)``)."""
        x = np.asarray(x, dtype=np.float64)
        flat = np.ascontiguousarray(x.reshape(-1, self.dim))
        out = np.empty_like(flat)
        _grad_u_rows(self.grad_u, self.params, flat, out)
        return out.reshape(x.shape)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Exact iid draws, shape ``(n, d)``; raises if no exact sampler is known."""
        if self.exact_sampler is None:
            raise NotImplementedError(f"target {self.name!r} has no exact sampler")
        return self.exact_sampler(rng, int(n))

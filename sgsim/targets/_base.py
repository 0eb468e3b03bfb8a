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


@jit(cache=False)
def _stochastic_grad_u_draws(stochastic_grad_u, params, theta, gen, work, out):
    for r in range(out.shape[0]):
        stochastic_grad_u(theta, params, out[r], gen, work)


_NO_WORKSPACE = np.zeros(0, dtype=np.int64)
_NO_WORKSPACE.flags.writeable = False


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
    stochastic_grad_u : numba-compiled function or None
        A genuinely stochastic gradient (e.g. a minibatch gradient),
        ``stochastic_grad_u(theta, params, out, gen, work)``: writes an unbiased estimate of
        ``grad U(theta)`` into ``out``, drawing its random numbers from ``gen`` (the chain's
        NumPy generator) and keeping per-chain state in ``work``. It must not allocate.
        When set, the samplers call it instead of ``grad_u`` at every step; ``grad_u`` stays
        the exact gradient. None (the default) for targets with exact gradients.
    workspace : ndarray of int64, shape (w,)
        Initial value of the per-chain buffer ``work`` (each chain gets its own copy, which
        persists from step to step, e.g. the permutation of the data shuffled in place by
        sampling without replacement). Empty for exact gradients.
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
    stochastic_grad_u: Callable | None = None
    workspace: np.ndarray = field(default_factory=lambda: _NO_WORKSPACE)

    def __post_init__(self):
        for attr in ("grad_u", "log_density_fn", "stochastic_grad_u"):
            value = getattr(self, attr)
            if attr == "stochastic_grad_u" and value is None:
                continue
            if not is_compiled(value):
                raise TypeError(
                    f"Target.{attr} must be a numba-compiled function (decorate it with "
                    f"sgsim._jit.jit or numba.njit); got a plain {type(value).__name__}"
                )
        work = self.workspace
        if not (isinstance(work, np.ndarray) and work.dtype == np.int64 and work.ndim == 1):
            raise TypeError(f"Target.workspace must be a 1-D int64 array, got {work!r:.60}")
        if work.flags.writeable:
            # the template is never run on: chains get copies (new_workspace)
            work = work.copy()
            work.flags.writeable = False
            object.__setattr__(self, "workspace", work)

    def new_workspace(self) -> np.ndarray:
        """A fresh copy of :attr:`workspace`: the per-chain buffer of ``stochastic_grad_u``."""
        return self.workspace.copy()

    def check_workspace(self, work) -> np.ndarray:
        """Return ``work`` if it can serve as this target's per-chain buffer; raise otherwise.

        The compiled gradient indexes it without bounds checks, so its type and shape are
        checked here, once per call from Python.
        """
        ok = (
            isinstance(work, np.ndarray)
            and work.dtype == np.int64
            and work.shape == self.workspace.shape
            and work.flags.c_contiguous
            and work.flags.writeable
        )
        if not ok:
            raise ValueError(
                f"work must be a writeable contiguous int64 array of shape {self.workspace.shape} "
                "(use Target.new_workspace())"
            )
        return work

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

    def stochastic_gradient(self, theta, rng: np.random.Generator, n_draws: int, work=None) -> np.ndarray:
        """``n_draws`` successive draws of ``stochastic_grad_u`` at one point ``theta``.

        Parameters
        ----------
        theta : array_like, shape (d,)
            The point.
        rng : numpy.random.Generator
            Drives the draws (advanced in place).
        n_draws : int
            Number of draws.
        work : ndarray, optional
            The per-chain buffer, updated in place; a fresh :meth:`new_workspace` if omitted.

        Returns
        -------
        ndarray, shape (n_draws, d)
            The draws, without the emulated additive noise of ``grad_noise_cov``.
        """
        if self.stochastic_grad_u is None:
            raise NotImplementedError(f"target {self.name!r} has an exact gradient only (no stochastic_grad_u)")
        theta = np.ascontiguousarray(theta, dtype=np.float64)
        if theta.shape != (self.dim,):
            raise ValueError(f"theta must have shape ({self.dim},), got {theta.shape}")
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        work = self.new_workspace() if work is None else self.check_workspace(work)
        out = np.empty((int(n_draws), self.dim))
        _stochastic_grad_u_draws(self.stochastic_grad_u, self.params, theta, rng, work, out)
        return out

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Exact iid draws, shape ``(n, d)``; raises if no exact sampler is known."""
        if self.exact_sampler is None:
            raise NotImplementedError(f"target {self.name!r} has no exact sampler")
        return self.exact_sampler(rng, int(n))

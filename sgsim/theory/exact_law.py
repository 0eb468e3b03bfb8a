"""Exact laws of the samplers on linear-Gaussian targets (:ref:`theory-exact-laws`).

On a quadratic potential with additive Gaussian gradient noise every sampler of sgsim is a
linear recursion ``x_k = F_k x_{k-1} + c_k + xi_k``, ``Cov xi_k = Q_k`` (:ref:`theory-conventions`), so
from a Gaussian (or point) start the law of every iterate is Gaussian with

``m_k = F_k m_{k-1} + c_k``,    ``S_k = F_k S_{k-1} F_k^T + Q_k``,

for any sequence of step sizes and temperatures: constant, decreasing, cyclical with
exploration stages at temperature 0. These laws are the deterministic, discrete-time truth
against which the integrators are tested (no discretisation bias).

Two unit systems, as in the papers (:ref:`theory-conventions`; do not mix them):

- the cyclical paper's ([cSG]) for :func:`sgld_law`, :func:`sgd_law`, :func:`sghmc_law`:
  ``U(theta) = theta^T P theta / 2 - b^T theta``, stochastic gradient ``P theta - b + zeta``,
  ``zeta ~ N(0, V)``; step ``alpha`` with drift ``alpha grad U`` and noise ``2 alpha T``;
- [SGDVI]'s for :func:`momentum_sgd_law`, :func:`preconditioned_sgd_law`, :func:`sgfs_law`:
  averaged loss ``L(theta) = theta^T A theta / 2`` (optimum at 0), minibatch gradient
  ``A theta + noise`` with noise covariance ``C / S`` (``C`` the per-example gradient
  covariance, ``S`` the batch size), learning rate ``epsilon``. SGD on ``U = N L`` with step
  ``alpha`` is SGD on ``L`` with ``epsilon = N alpha``.

Schedules (``step_size``, ``temperature``, ``lr``) are scalars or arrays whose last axis is
the step ``k = 1..K``; leading axes broadcast, so many schedules are propagated at once.
Nothing here imports an integrator.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_discrete_lyapunov

from .. import dynamics
from .._validate import (
    ParameterError,
    boolean,
    count,
    finite_array,
    finite_values,
    fits_in_memory,
    integer,
    noise_covariance,
    real,
    spd_matrix,
)
from ..dynamics import LinearStep

__all__ = [
    "GaussianPath",
    "sgld_law",
    "sgd_law",
    "sghmc_law",
    "momentum_sgd_law",
    "preconditioned_sgd_law",
    "sgfs_law",
    "stationary_covariance",
    "time_average_cov",
    "langevin_law",
    "affine_law",
]

# step-major blocks of F_k and Q_k are built vectorised; this bounds their size (floats)
_BLOCK_FLOATS = 1 << 19


class GaussianPath:
    """Gaussian laws of the iterates after steps ``1..K``.

    Attributes
    ----------
    mean : ndarray, shape (..., K, n)
        ``E x_k``; ``n = d``, or ``2d`` for the state ``(theta, v)``; leading axes are the
        batch of schedules.
    cov : ndarray, shape (..., K, n, n)
        ``Cov x_k`` (symmetric). A law propagated in an eigenbasis (see :func:`sgld_law`) holds
        its variances in that basis and builds ``cov`` on first access (``K n^3`` operations,
        ``K n^2`` floats); :attr:`variances` never needs it.
    """

    __slots__ = ("_mean", "_cov", "_basis", "_eig_var")

    def __init__(self, mean, cov=None, *, basis=None, eig_var=None):
        if cov is None and (basis is None or eig_var is None):
            raise ParameterError("cov", "a GaussianPath needs cov, or basis and eig_var")
        self._mean = mean
        self._cov = cov
        self._basis = basis
        self._eig_var = eig_var

    @property
    def mean(self) -> np.ndarray:
        """``E x_k``, shape (..., K, n)."""
        return self._mean

    @property
    def cov(self) -> np.ndarray:
        """``Cov x_k``, shape (..., K, n, n)."""
        if self._cov is None:
            u = self._basis
            cov = (u * self._eig_var[..., None, :]) @ u.T  # U diag(v_k) U^T, step by step
            self._cov = 0.5 * (cov + np.swapaxes(cov, -1, -2))
        return self._cov

    @property
    def variances(self) -> np.ndarray:
        """``Var x_k`` per component (the diagonal of :attr:`cov`), shape (..., K, n)."""
        if self._cov is not None:
            return np.diagonal(self._cov, axis1=-2, axis2=-1)
        return self._eig_var @ (self._basis**2).T

    @property
    def n_steps(self) -> int:
        """Number of steps ``K``."""
        return int(self.mean.shape[-2])

    def marginal(self, index) -> GaussianPath:
        """The law of the components ``index`` (a slice or integer sequence) of the state.

        ``path.marginal(slice(0, d))`` is the law of ``theta`` alone for a ``(theta, v)`` state.
        """
        idx = np.arange(self.mean.shape[-1])[index]
        idx = np.atleast_1d(idx)
        return GaussianPath(self.mean[..., idx], self.cov[..., idx[:, None], idx[None, :]])


# ----------------------------------------------------------------------------- input checks


def _square(name: str, value) -> np.ndarray:
    arr = finite_array(name, value)
    arr = np.atleast_2d(arr) if arr.ndim < 2 else arr
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1] or arr.shape[0] == 0:
        raise ParameterError(name, f"{name} must be a square (d, d) matrix, got shape {arr.shape}")
    return arr


def _spd(name: str, value, dim: int | None = None, allow_singular: bool = False) -> np.ndarray:
    arr = _square(name, value)
    if dim is not None and arr.shape != (dim, dim):
        raise ParameterError(name, f"{name} must have shape ({dim}, {dim}), got {arr.shape}")
    return spd_matrix(name, arr, arr.shape[0], allow_singular=allow_singular)


def _sequences(named: dict, n_steps, state_dim: int) -> tuple[dict, int]:
    """Check per-step sequences (last axis = step) against each other; return them as arrays.

    All get a last axis of the common length ``K``; leading axes must broadcast. The law of a
    ``state_dim``-dimensional state over ``K`` steps must fit in memory (checked before any
    allocation).
    """
    arrays = {name: finite_array(name, value) for name, value in named.items()}
    lengths = {name: a.shape[-1] for name, a in arrays.items() if a.ndim}
    if n_steps is not None:
        n_steps = integer("n_steps", n_steps, low=1)
    if lengths:
        first = next(iter(lengths))
        k = lengths[first]
        for name, n in lengths.items():
            if n != k:
                raise ParameterError(
                    name, f"{name} has {n} steps (last axis) but {first} has {k}: schedules of unequal length"
                )
        if n_steps is not None and n_steps != k:
            raise ParameterError(first, f"{first} has {k} steps (last axis) but n_steps = {n_steps}")
        if k == 0:
            raise ParameterError(first, f"{first} must have at least one step")
    elif n_steps is None:
        raise ParameterError("n_steps", f"n_steps is required when {' and '.join(named)} are scalars")
    else:
        k = n_steps
    try:
        batch = np.broadcast_shapes(*(a.shape[:-1] for a in arrays.values() if a.ndim))
    except ValueError:
        shapes = {name: a.shape for name, a in arrays.items()}
        raise ParameterError(
            next(iter(named)), f"the leading (batch) axes of the schedules do not broadcast: {shapes}"
        ) from None
    # the path's means and covariances, float64, for every schedule of the batch and every step
    laws = float(np.prod(batch, dtype=np.float64)) * k * (state_dim + state_dim**2)
    size_name = "n_steps" if not lengths else next(iter(lengths))
    fits_in_memory(size_name, 8.0 * laws, f"the law of {k:,} steps of a {state_dim}-dimensional state")
    return {name: (a if a.ndim else np.full(k, float(a))) for name, a in arrays.items()}, k


def _positive_seq(name: str, arr: np.ndarray) -> None:
    if not np.all(arr > 0):
        raise ParameterError(name, f"{name} must be > 0 at every step, got min {arr.min():.4g}")


def _nonnegative_seq(name: str, arr: np.ndarray) -> None:
    if not np.all(arr >= 0):
        raise ParameterError(name, f"{name} must be >= 0 at every step, got min {arr.min():.4g}")


def _init(init_mean, init_cov, n: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Initial law of an ``n``-dimensional state; for ``n = 2d`` a ``d``-dim one means ``v_0 = 0``."""
    if init_mean is None:
        m0 = np.zeros(n)
    else:
        m0 = finite_array("init_mean", init_mean)
        if m0.ndim == 0 or m0.shape[-1] not in (n, d):
            want = f"{n}" if n == d else f"{n} (theta, v) or {d} (theta, with v_0 = 0)"
            raise ParameterError("init_mean", f"init_mean must have last axis {want}, got shape {m0.shape}")
        if m0.shape[-1] != n:
            m0 = np.concatenate([m0, np.zeros(m0.shape[:-1] + (n - d,))], axis=-1)
    if init_cov is None:
        s0 = np.zeros((n, n))
    else:
        s0 = finite_array("init_cov", init_cov)
        if s0.ndim < 2 or s0.shape[-1] != s0.shape[-2] or s0.shape[-1] not in (n, d):
            want = f"({n}, {n})" if n == d else f"({n}, {n}) (theta, v) or ({d}, {d}) (theta, with v_0 = 0)"
            raise ParameterError("init_cov", f"init_cov must have trailing shape {want}, got {s0.shape}")
        scale = np.maximum(1.0, np.abs(s0).max(axis=(-2, -1)))
        if np.any(np.abs(s0 - np.swapaxes(s0, -1, -2)).max(axis=(-2, -1)) > 1e-12 * scale):
            raise ParameterError("init_cov", "init_cov must be symmetric")
        s0 = 0.5 * (s0 + np.swapaxes(s0, -1, -2))
        lam_min = np.linalg.eigvalsh(s0)[..., 0]
        if np.any(lam_min < -1e-12 * scale):
            raise ParameterError(
                "init_cov", f"init_cov must be positive semidefinite (smallest eigenvalue {lam_min.min():.3g})"
            )
        if s0.shape[-1] != n:
            pad = np.zeros(s0.shape[:-2] + (n, n))
            pad[..., :d, :d] = s0
            s0 = pad
    return m0, s0


# ----------------------------------------------------------------------------- the engine


@np.errstate(over="ignore", invalid="ignore")  # an unstable law overflows: checked block by block
def _shared_basis(mats: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]] | None:
    """An orthonormal basis ``u`` in which every (symmetric) matrix of ``mats`` is diagonal, and
    their diagonals there; None when there is none.

    The eigenvectors of a fixed generic combination of the matrices: when they commute, these
    diagonalise each (barring an accidental degeneracy of the combination, which the check
    catches: the caller then takes the general path).
    """
    if any(not np.allclose(m, m.T, rtol=0, atol=1e-13 * max(1.0, float(np.abs(m).max()))) for m in mats):
        return None
    weights = (1.0, 0.7548776662466927, 0.5698402909980532, 0.4301597090019468, 0.3247179572447460)
    cycle = weights * (len(mats) // len(weights) + 1)
    mix = sum(w * m / max(1.0, float(np.abs(m).max())) for w, m in zip(cycle[: len(mats)], mats, strict=True))
    _, u = np.linalg.eigh(mix)
    diagonals = []
    for m in mats:
        r = u.T @ (m @ u)
        d = np.diag(r).copy()
        np.fill_diagonal(r, 0.0)
        if np.abs(r).max() > 1e-12 * max(1.0, float(np.abs(m).max())):
            return None
        diagonals.append(d)
    return u, diagonals


@np.errstate(over="ignore", invalid="ignore")  # an unstable law is reported below, by name
def _propagate_diagonal(step: LinearStep, m0, s0, u: np.ndarray, diagonals: list, rate: str) -> GaussianPath:
    """:func:`_propagate` in the basis ``u`` that diagonalises every matrix: ``K n`` operations per schedule.

    ``diagonals`` are those of ``f0``, ``f1``, each noise matrix, then each initial covariance.
    """
    n_noise = len(step.noise.mats)
    f0, f1 = diagonals[0], diagonals[1]
    shift = None if step.shift is None else u.T @ step.shift
    noise = [(q, d) for q, d in zip(step.noise.coef, diagonals[2 : 2 + n_noise], strict=True)]
    v0 = np.reshape(np.array(diagonals[2 + n_noise :]), s0.shape[:-1])
    s = step.s
    k_steps = s.shape[-1]
    batch = np.broadcast_shapes(s.shape[:-1], *(q.shape[:-1] for q, _ in noise), m0.shape[:-1], s0.shape[:-2])
    m = np.broadcast_to(m0 @ u, batch + (u.shape[0],)).copy()
    v = np.broadcast_to(v0, batch + (u.shape[0],)).copy()
    s_b = np.broadcast_to(s, batch + (k_steps,))
    q_b = [(np.broadcast_to(q, batch + (k_steps,)), d) for q, d in noise]
    means = np.empty(batch + (k_steps, u.shape[0]))
    var = np.empty_like(means)
    for k in range(k_steps):
        sk = s_b[..., k, None]
        f = f0 + sk * f1
        m = f * m if shift is None else f * m + sk * shift
        v = f * f * v
        for q, d in q_b:
            v = v + q[..., k, None] * d
        means[..., k, :] = m
        var[..., k, :] = v
    if not (np.all(np.isfinite(var)) and np.all(np.isfinite(means))):
        ok = np.isfinite(var).all(axis=-1) & np.isfinite(means).all(axis=-1)
        bad = int(np.argmin(ok.reshape(-1, k_steps).all(axis=0)))
        raise ParameterError(
            rate,
            f"the law leaves the floating-point range at step {bad + 1}: the steps are unstable "
            f"(the iterates' covariance grows geometrically); reduce {rate}",
        )
    return GaussianPath(means @ u.T, basis=u, eig_var=var)


def _propagate(step: LinearStep, m0, s0, rate: str = "step_size") -> GaussianPath:
    """Laws of ``x_k = (f0 + s_k f1) x_{k-1} + s_k shift + xi_k``, ``Cov xi_k = sum_j q_jk Q_j``.

    ``step`` comes from :mod:`sgsim.dynamics`: ``s`` has shape (..., K), each noise coefficient
    ``q_j`` (..., K) and each ``Q_j`` (n, n); ``shift`` is an (n,) vector or None.

    When ``f0``, ``f1``, every ``Q_j`` and the initial covariances share an eigenbasis (SGLD
    and SGD when the gradient noise ``V`` commutes with ``P``, ``V = c I`` included, from a
    point or an isotropic start), the recursion runs on the variances in that basis, ``O(K n)``
    per schedule instead of ``O(K n^3)``, and the covariances are built only when asked for.
    """
    inits = [np.asarray(x) for x in np.reshape(s0, (-1,) + s0.shape[-2:])]
    shared = _shared_basis([step.f0, step.f1, *step.noise.mats, *inits])
    if shared is not None:
        return _propagate_diagonal(step, m0, s0, *shared, rate)
    return _propagate_general(step, m0, s0, rate)


def _propagate_general(step: LinearStep, m0, s0, rate: str = "step_size") -> GaussianPath:
    """:func:`_propagate` with dense matrices: ``O(K n^3)`` per schedule."""
    f0, f1, s, shift = step.f0, step.f1, step.s, step.shift
    noise = list(zip(step.noise.coef, step.noise.mats, strict=True))
    n = f0.shape[0]
    k_steps = s.shape[-1]
    batch = np.broadcast_shapes(s.shape[:-1], *(q.shape[:-1] for q, _ in noise), m0.shape[:-1], s0.shape[:-2])
    nb = len(batch)

    def step_major(x):
        # (..., K) -> (K, *batch), so that the step loop indexes the first axis
        return np.moveaxis(np.broadcast_to(x, batch + (k_steps,)), -1, 0)

    s_k = step_major(s)
    q_k = [(step_major(q), mat) for q, mat in noise]
    # means are kept as columns (..., n, 1) so that one product serves batched and single runs
    mean = np.empty((k_steps,) + batch + (n, 1))
    cov = np.empty((k_steps,) + batch + (n, n))
    m = np.array(np.broadcast_to(m0, batch + (n,)))[..., None]
    cur = np.array(np.broadcast_to(s0, batch + (n, n)))
    tmp = np.empty(batch + (n, n))
    # np.dot is the cheapest call for single matrices; matmul broadcasts over the batch
    mult = np.dot if not batch else np.matmul
    per_step = n * n * max(1, int(np.prod(batch, dtype=np.int64)))
    block = int(max(1, min(k_steps, _BLOCK_FLOATS // per_step)))
    for k0 in range(0, k_steps, block):
        k1 = min(k_steps, k0 + block)
        sb = s_k[k0:k1][..., None, None]
        f = f0 + sb * f1
        ft = np.ascontiguousarray(np.swapaxes(f, -1, -2))
        q = np.zeros(f.shape)
        for qk, mat in q_k:
            q += qk[k0:k1][..., None, None] * mat
        c = None if shift is None else sb * shift[:, None]
        for j in range(k1 - k0):
            k = k0 + j
            mult(f[j], m, out=mean[k])
            m = mean[k]
            if c is not None:
                m += c[j]
            mult(f[j], cur, out=tmp)
            cur = cov[k]
            mult(tmp, ft[j], out=cur)
            cur += q[j]
        # F S F^T is symmetric only up to rounding; symmetrise while the block is in cache
        blk = cov[k0:k1]
        blk += np.swapaxes(blk, -1, -2)
        blk *= 0.5
        if not (np.all(np.isfinite(blk)) and np.all(np.isfinite(mean[k0:k1]))):
            bad = k0 + int(np.argmin(np.isfinite(blk).reshape(k1 - k0, -1).all(axis=1)
                                     & np.isfinite(mean[k0:k1]).reshape(k1 - k0, -1).all(axis=1)))  # fmt: skip
            raise ParameterError(
                rate,
                f"the law leaves the floating-point range at step {bad + 1}: the steps are unstable "
                f"(the iterates' covariance grows geometrically); reduce {rate}",
            )
    return GaussianPath(np.moveaxis(mean[..., 0], 0, nb), np.moveaxis(cov, 0, nb))


# ----------------------------------------------------------------------------- [cSG] units


def sgld_law(
    precision,
    shift,
    step_size,
    temperature=1.0,
    grad_noise_cov=None,
    init_mean=None,
    init_cov=None,
    noise_correction=False,
    *,
    n_steps=None,
) -> GaussianPath:
    """Law of every SGLD iterate on a linear-Gaussian target ([cSG] units; :ref:`theory-exact-sgld`).

    ``theta_k = theta_{k-1} - alpha_k (P theta_{k-1} - b + zeta_k) + sqrt(2 alpha_k T_k) xi_k``,
    ``zeta_k ~ N(0, V)``, so ``F_k = I - alpha_k P``, ``c_k = alpha_k b``,
    ``Q_k = alpha_k^2 V + 2 alpha_k T_k I``. Exploration stages are steps with ``T_k = 0``.

    Parameters
    ----------
    precision : array_like, shape (d, d)
        ``P``, symmetric positive definite (Hessian of ``U``).
    shift : array_like, shape (d,), or None
        ``b`` (zero if None); the target is ``N(P^{-1} b, T P^{-1})``.
    step_size : float or array_like, shape (..., K)
        ``alpha_k > 0``; leading axes are a batch of schedules.
    temperature : float or array_like, shape (..., K)
        ``T_k >= 0``.
    grad_noise_cov : float or array_like, shape (d, d), optional
        ``V`` (a scalar means ``V I``); zero by default.
    init_mean, init_cov : array_like, optional
        Law of ``theta_0``, shapes (..., d) and (..., d, d); a point at 0 by default.
    noise_correction : bool
        As in :func:`sgsim.sample`: on steps with ``T_k > 0`` inject ``2 alpha_k T_k I -
        alpha_k^2 V``, so the total is ``2 alpha_k T_k I``; needs ``alpha_k V <= 2 T_k I``.
    n_steps : int, optional
        ``K``; required only when ``step_size`` and ``temperature`` are both scalars.

    Returns
    -------
    GaussianPath
        Means (..., K, d) and covariances (..., K, d, d) of ``theta_1 .. theta_K``.

    Examples
    --------
    SGLD with the constant step ``alpha = 0.1`` on ``N(0, 1)``, started at 0: its variance
    settles at ``2 / (2 - alpha)``, not 1 (the bias of a constant step):

    >>> import numpy as np
    >>> from sgsim import theory
    >>> path = theory.sgld_law(np.eye(1), None, step_size=0.1, n_steps=200)
    >>> path.mean.shape, path.cov.shape  # (K, d), (K, d, d)
    ((200, 1), (200, 1, 1))
    >>> print(path.variances[[0, -1], 0].round(4))
    [0.2    1.0526]

    A batch of schedules, here two constant step sizes of 2000 steps, propagates in one call:

    >>> alphas = np.repeat([[0.1], [0.01]], 2000, axis=1)  # (2, K)
    >>> print(theory.sgld_law(np.eye(1), None, alphas).variances[:, -1, 0].round(4))
    [1.0526 1.005 ]
    """
    p = _spd("precision", precision)
    d = p.shape[0]
    b = np.zeros(d) if shift is None else finite_array("shift", shift, (d,))
    v = noise_covariance("grad_noise_cov", grad_noise_cov, d)
    seq, _ = _sequences({"step_size": step_size, "temperature": temperature}, n_steps, d)
    alpha, temp = seq["step_size"], seq["temperature"]
    _positive_seq("step_size", alpha)
    _nonnegative_seq("temperature", temp)
    step = dynamics.sgld_linear(p, b, alpha, temp, v, boolean("noise_correction", noise_correction))
    m0, s0 = _init(init_mean, init_cov, d, d)
    return _propagate(step, m0, s0)


def sgd_law(
    precision, shift, step_size, grad_noise_cov=None, init_mean=None, init_cov=None, *, n_steps=None
) -> GaussianPath:
    """Law of every SGD iterate, i.e. SGLD at temperature 0 ([cSG] units; :ref:`theory-exact-sgld`).

    ``theta_k = theta_{k-1} - alpha_k (P theta_{k-1} - b + zeta_k)``, ``zeta_k ~ N(0, V)``:
    ``F_k = I - alpha_k P``, ``Q_k = alpha_k^2 V``. In [SGDVI] units this is
    :func:`preconditioned_sgd_law` with ``H = I``, ``A = P / N``, ``epsilon = N alpha`` and
    ``C / S = V / N^2``. Parameters as in :func:`sgld_law`.
    """
    return sgld_law(precision, shift, step_size, 0.0, grad_noise_cov, init_mean, init_cov, n_steps=n_steps)


def sghmc_law(
    precision,
    shift,
    step_size,
    friction,
    temperature=1.0,
    grad_noise_cov=None,
    init_mean=None,
    init_cov=None,
    gamma_hat=0.0,
    noise_correction=False,
    *,
    n_steps=None,
) -> GaussianPath:
    """Law of the SGHMC state ``(theta, v)`` in [cSG] order ([cSG] units; :ref:`theory-exact-sghmc`).

    ``theta_k = theta_{k-1} + v_{k-1}``, then
    ``v_k = (1 - eta) v_{k-1} - alpha_k (P theta_k - b + zeta_k) + sqrt(2 (eta - gamma_hat) alpha_k T_k) xi_k``:
    ``F_k = [[I, I], [-alpha_k P, (1 - eta) I - alpha_k P]]``, ``c_k = (0, alpha_k b)``,
    ``Q_k = blockdiag(0, alpha_k^2 V + 2 (eta - gamma_hat) alpha_k T_k I)``. At ``T_k = 0``
    (exploration) this is SGD with momentum ``1 - eta``.

    Parameters
    ----------
    precision, shift, step_size, temperature, grad_noise_cov :
        As in :func:`sgld_law`.
    friction : float
        ``eta`` in (0, 1].
    init_mean, init_cov : array_like, optional
        Law of ``(theta_0, v_0)``, shapes (..., 2d) and (..., 2d, 2d); or of ``theta_0``
        alone, shapes (..., d) and (..., d, d), with ``v_0 = 0``. A point at 0 by default.
    gamma_hat : float
        ``gamma_hat`` in [0, eta], the gradient-noise estimate subtracted from the friction.
    noise_correction : bool
        As in :func:`sgsim.sample`: on steps with ``T_k > 0`` the total velocity noise is
        ``2 eta alpha_k T_k I``; needs ``alpha_k V <= 2 eta T_k I`` and ``gamma_hat = 0``.
    n_steps : int, optional
        ``K``; required only when ``step_size`` and ``temperature`` are both scalars.

    Returns
    -------
    GaussianPath
        Means (..., K, 2d) and covariances (..., K, 2d, 2d) of ``(theta_k, v_k)``;
        ``path.marginal(slice(0, d))`` is the law of ``theta_k``.
    """
    p = _spd("precision", precision)
    d = p.shape[0]
    b = np.zeros(d) if shift is None else finite_array("shift", shift, (d,))
    v = noise_covariance("grad_noise_cov", grad_noise_cov, d)
    eta = real("friction", friction, 0.0, 1.0, low_open=True)
    gamma_hat = real("gamma_hat", gamma_hat, 0.0, eta)
    noise_correction = boolean("noise_correction", noise_correction)  # a list or "no" was read as True
    if noise_correction and gamma_hat > 0:
        raise ParameterError(
            "gamma_hat", f"gamma_hat must be 0 with noise_correction=True (the correction sets it), got {gamma_hat}"
        )
    seq, _ = _sequences({"step_size": step_size, "temperature": temperature}, n_steps, 2 * d)
    alpha, temp = seq["step_size"], seq["temperature"]
    _positive_seq("step_size", alpha)
    _nonnegative_seq("temperature", temp)
    step = dynamics.sghmc_linear(p, b, alpha, temp, v, eta, gamma_hat, noise_correction)
    m0, s0 = _init(init_mean, init_cov, 2 * d, d)
    return _propagate(step, m0, s0)


# ----------------------------------------------------------------------------- [SGDVI] units


def _sgdvi_inputs(a_mat, c_mat, lr, batch_size, n_steps, state_dim: int = 1):
    a = _spd("A", a_mat)
    d = a.shape[0]
    c = _spd("C", c_mat, d, allow_singular=True)
    s = float(count("batch_size", batch_size))
    seq, _ = _sequences({"lr": lr}, n_steps, state_dim * d)
    _positive_seq("lr", seq["lr"])
    return a, c, s, seq["lr"], d


def momentum_sgd_law(A, C, lr, momentum, batch_size, init_mean=None, init_cov=None, *, n_steps=None) -> GaussianPath:
    """Law of the state ``(theta, v)`` of SGD with momentum in [SGDVI] order (:ref:`theory-exact-sghmc`).

    ``v_t = (1 - mu) v_{t-1} - epsilon_t g_S(theta_{t-1})``, then ``theta_t = theta_{t-1} + v_t``,
    with ``g_S(theta) = A theta + noise``, ``Cov noise = C / S`` ([SGDVI] §4.3, eq. 23):
    ``F_t = [[I - epsilon_t A, (1 - mu) I], [-epsilon_t A, (1 - mu) I]]``,
    ``Q_t = (epsilon_t^2 / S) [[C, C], [C, C]]`` (the same noise enters ``v`` and ``theta``).
    Its ``theta`` recursion is [cSG] SGHMC's at ``T = 0`` with ``eta = mu`` (:ref:`theory-sghmc`); the
    velocity differs by the update order.

    Parameters
    ----------
    A : array_like, shape (d, d)
        Hessian of the averaged loss, symmetric positive definite.
    C : array_like, shape (d, d)
        Per-example gradient covariance, symmetric positive semidefinite.
    lr : float or array_like, shape (..., K)
        ``epsilon_t > 0``; leading axes are a batch of schedules.
    momentum : float
        The damping ``mu`` in (0, 1] (``mu = 1`` is plain SGD; the momentum coefficient is
        ``1 - mu``).
    batch_size : int
        ``S >= 1``.
    init_mean, init_cov : array_like, optional
        Law of ``(theta_0, v_0)`` (shapes (..., 2d), (..., 2d, 2d)) or of ``theta_0`` alone
        with ``v_0 = 0``; a point at 0 by default.
    n_steps : int, optional
        ``K``; required only when ``lr`` is a scalar.

    Returns
    -------
    GaussianPath
        Means (..., K, 2d) and covariances (..., K, 2d, 2d) of ``(theta_t, v_t)``.
    """
    a, c, s, eps, d = _sgdvi_inputs(A, C, lr, batch_size, n_steps, 2)
    mu = real("momentum", momentum, 0.0, 1.0, low_open=True)
    m0, s0 = _init(init_mean, init_cov, 2 * d, d)
    return _propagate(dynamics.momentum_sgd_linear(a, c, eps, mu, s), m0, s0, "lr")


def preconditioned_sgd_law(A, C, H, lr, batch_size, init_mean=None, init_cov=None, *, n_steps=None) -> GaussianPath:
    """Law of every iterate of preconditioned constant SGD ([SGDVI] units; :ref:`theory-exact-sgd`).

    ``theta_t = theta_{t-1} - epsilon_t H g_S(theta_{t-1})``, ``Cov g_S = C / S`` about
    ``A theta``: ``F_t = I - epsilon_t H A``, ``Q_t = epsilon_t^2 H C H / S``. The paper's
    form (H absorbs epsilon, §4.1 eqs. 18-19) is ``lr = 1``; ``H = I`` is plain constant SGD
    (eq. 5).

    Parameters
    ----------
    A, C : array_like, shape (d, d)
        Hessian of the averaged loss (SPD) and per-example gradient covariance (PSD).
    H : array_like, shape (d, d)
        Preconditioner, symmetric positive definite.
    lr : float or array_like, shape (..., K)
        ``epsilon_t > 0``.
    batch_size : int
        ``S >= 1``.
    init_mean, init_cov : array_like, optional
        Law of ``theta_0`` ((..., d), (..., d, d)); a point at 0 by default.
    n_steps : int, optional
        ``K``; required only when ``lr`` is a scalar.

    Returns
    -------
    GaussianPath
        Means (..., K, d) and covariances (..., K, d, d).
    """
    a, c, s, eps, d = _sgdvi_inputs(A, C, lr, batch_size, n_steps)
    h = _spd("H", H, d)
    m0, s0 = _init(init_mean, init_cov, d, d)
    return _propagate(dynamics.preconditioned_sgd_linear(a, c, h, eps, s), m0, s0, "lr")


def sgfs_law(A, C, H, E, lr, batch_size, init_mean=None, init_cov=None, *, n_steps=None) -> GaussianPath:
    """Law of every SGFS iterate ([SGDVI] units; :ref:`theory-exact-sgfs`).

    ``theta_t = theta_{t-1} - epsilon_t H g_S(theta_{t-1}) + epsilon_t H E zeta_t``,
    ``zeta_t ~ N(0, I)`` ([SGDVI] §5.2, eq. 26, with the injected noise on the gradient's
    scale epsilon, as reconstructed in :ref:`theory-sgdvi-samplers`): ``F_t = I - epsilon_t H A``,
    ``Q_t = epsilon_t^2 H (C / S + E E^T) H``. An implementation that injects
    ``sqrt(epsilon) H E zeta`` instead corresponds to ``E E^T / epsilon`` here.

    Parameters
    ----------
    A, C : array_like, shape (d, d)
        Hessian of the averaged loss (SPD) and per-example gradient covariance (PSD).
    H : array_like, shape (d, d)
        Preconditioner, symmetric positive definite (Theorem 5's optimum is
        ``2 (C + E E^T)^{-1} / (epsilon N)``).
    E : array_like, shape (d, d)
        Any square noise factor; ``E E^T`` is the injected covariance.
    lr : float or array_like, shape (..., K)
        ``epsilon_t > 0``.
    batch_size : int
        ``S >= 1`` (the paper has ``S = 1``).
    init_mean, init_cov : array_like, optional
        Law of ``theta_0``; a point at 0 by default.
    n_steps : int, optional
        ``K``; required only when ``lr`` is a scalar.

    Returns
    -------
    GaussianPath
        Means (..., K, d) and covariances (..., K, d, d).
    """
    a, c, s, eps, d = _sgdvi_inputs(A, C, lr, batch_size, n_steps)
    h = _spd("H", H, d)
    e = finite_array("E", E, (d, d))
    with np.errstate(over="ignore", invalid="ignore"):
        injected = e @ e.T
    finite_values("E", injected, what="the injected covariance E E^T")
    m0, s0 = _init(init_mean, init_cov, d, d)
    return _propagate(dynamics.sgfs_linear(a, c, h, e, eps, s), m0, s0, "lr")


def affine_law(transition, shift, noise_cov, init_mean=None, init_cov=None) -> GaussianPath:
    """Laws of ``x_k = F_k x_{k-1} + c_k + xi_k``, ``xi_k ~ N(0, Q_k)`` independent, for any per-step ``F, c, Q``.

    The general form of every step that is affine in its state and its Gaussian noise
    (:ref:`theory-exact-laws`): ``E x_k = F_k E x_{k-1} + c_k`` and
    ``Cov x_k = F_k Cov x_{k-1} F_k^T + Q_k``, propagated exactly (``O(K n^3)``). The maps of a
    sampler's step read off its compiled code (:func:`sgsim.algorithms.affine_steps`) give its
    exact law this way.

    Parameters
    ----------
    transition : array_like, shape (K, n, n)
        ``F_k``.
    shift : array_like, shape (K, n)
        ``c_k``.
    noise_cov : array_like, shape (K, n, n)
        ``Q_k``, symmetric positive semidefinite.
    init_mean : array_like, shape (n,), optional
        ``E x_0`` (default 0).
    init_cov : array_like, shape (n, n), optional
        ``Cov x_0`` (default 0: a fixed start).

    Returns
    -------
    GaussianPath
        Means (K, n) and covariances (K, n, n) of ``x_1 .. x_K``.

    Examples
    --------
    SGLD with ``alpha = 0.1`` on ``N(0, 1)``: ``F = 0.9``, ``Q = 0.2``:

    >>> import numpy as np
    >>> from sgsim import theory
    >>> k = 200
    >>> path = theory.affine_law(np.full((k, 1, 1), 0.9), np.zeros((k, 1)), np.full((k, 1, 1), 0.2))
    >>> print(path.variances[-1].round(4))
    [1.0526]
    """
    f = finite_array("transition", transition)
    if f.ndim != 3 or f.shape[1] != f.shape[2]:
        raise ParameterError("transition", f"transition must have shape (K, n, n), got {f.shape}")
    k_steps, n = f.shape[0], f.shape[1]
    c = finite_array("shift", shift, (k_steps, n))
    q = finite_array("noise_cov", noise_cov, (k_steps, n, n))
    m, s = _init(init_mean, init_cov, n, n)
    mean = np.empty((k_steps, n))
    cov = np.empty((k_steps, n, n))
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(k_steps):
            m = f[k] @ m + c[k]
            s = f[k] @ s @ f[k].T + q[k]
            s = 0.5 * (s + s.T)
            mean[k] = m
            cov[k] = s
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(cov))):
        raise ParameterError("transition", "the law overflows: the recursion is unstable at these steps")
    return GaussianPath(mean, cov)


# ----------------------------------------------------------------------------- stationary laws, averages


def _spectral_radius(f: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(f))))


def _stable(f: np.ndarray) -> None:
    rho = _spectral_radius(f)
    if not rho < 1:
        raise ParameterError("F", f"F must have spectral radius < 1 for a stationary law, got {rho:.6g}")


def stationary_covariance(F, Q) -> np.ndarray:
    """Stationary covariance of ``x' = F x + xi``, ``Cov xi = Q``: ``P = F P F^T + Q`` (:ref:`theory-conventions`).

    Solved with :func:`scipy.linalg.solve_discrete_lyapunov` (backward stable).

    Parameters
    ----------
    F : array_like, shape (n, n)
        Transition matrix with spectral radius < 1.
    Q : array_like, shape (n, n)
        Noise covariance, symmetric positive semidefinite.

    Raises
    ------
    ValueError
        If the spectral radius of ``F`` is >= 1 (no stationary law).

    Examples
    --------
    SGLD with step ``alpha = 0.1`` on ``N(0, 1)`` is ``x' = (1 - alpha) x + xi`` with
    ``Var xi = 2 alpha``; its stationary variance is ``2 alpha / (1 - (1 - alpha)^2)``:

    >>> from sgsim import theory
    >>> print(theory.stationary_covariance([[0.9]], [[0.2]]).round(4))
    [[1.0526]]
    """
    f = _square("F", F)
    n = f.shape[0]
    q = _spd("Q", Q, n, allow_singular=True)
    _stable(f)
    try:
        p = solve_discrete_lyapunov(f, q)
    except np.linalg.LinAlgError:
        # an eigenvalue within rounding of the unit circle: I - F (x) F is singular in the floats
        raise ParameterError(
            "F", "F has an eigenvalue within rounding of modulus 1: the stationary covariance is beyond the floats"
        ) from None
    return 0.5 * (p + p.T)


def time_average_cov(F, P, T) -> np.ndarray:
    """Covariance of the time average ``(1/T) sum_{t=1}^T x_t`` of a stationary VAR(1) (:ref:`theory-time-averages`).

    ``Cov = (1/T^2) [T P + sum_{k=1}^{T-1} (T - k) (F^k P + P F^{kT})]``, using
    ``Cov(x_{t+k}, x_t) = F^k P``. Evaluated in ``O(log T)`` matrix products by doubling the
    partial sums ``W_T = sum_{k<T} (T - k) F^k`` (every term is added, none subtracted, so
    ``F`` near ``I`` loses no accuracy), as ``(W_T P + P W_T^T - T P) / T^2``.

    Parameters
    ----------
    F : array_like, shape (n, n)
        Transition matrix of ``x_{t+1} = F x_t + xi_t``, spectral radius < 1.
    P : array_like, shape (n, n)
        Stationary covariance of ``x_t`` (see :func:`stationary_covariance`).
    T : int
        Window length, >= 1.
    """
    f = _square("F", F)
    n = f.shape[0]
    p = _spd("P", P, n, allow_singular=True)
    t = integer("T", T, low=1)
    _stable(f)  # P is a stationary covariance only for a stable F
    eye = np.eye(n)
    # (F^m, sum_{k<m} F^k, sum_{k<m} (m - k) F^k) for a block of m steps; blocks concatenate as
    # W_{m+l} = W_m + l S_m + F^m W_l, S_{m+l} = S_m + F^m S_l
    power, s_sum, w_sum, m = eye, np.zeros((n, n)), np.zeros((n, n)), 0
    for bit in bin(t)[2:]:
        power, s_sum, w_sum, m = power @ power, s_sum + power @ s_sum, w_sum + m * s_sum + power @ w_sum, 2 * m
        if bit == "1":
            power, s_sum, w_sum, m = power @ f, s_sum + power, w_sum + s_sum + power, m + 1
    cov = (w_sum @ p + p @ w_sum.T - t * p) / t**2
    return 0.5 * (cov + cov.T)


def langevin_law(precision, shift, t, init_mean=None, init_cov=None, *, temperature=1.0):
    """Law of the Langevin diffusion ``d theta = -(P theta - b) dt + sqrt(2 T) dW`` (:ref:`theory-langevin-law`).

    ``m_t = theta* + e^{-Pt} (m_0 - theta*)``,
    ``S_t = T P^{-1} + e^{-Pt} (S_0 - T P^{-1}) e^{-Pt}``, ``theta* = P^{-1} b``, computed in the
    eigenbasis of ``P`` (with ``expm1`` so that small ``t`` keeps its accuracy). It contracts in
    W2 at rate ``lambda_min(P)``: ``W2(nu_t, nu_inf) <= e^{-lambda_min t} W2(nu_0, nu_inf)``.
    One unit of time is ``sum_k alpha_k`` of [cSG] steps.

    Parameters
    ----------
    precision : array_like, shape (d, d)
        ``P``, symmetric positive definite.
    shift : array_like, shape (d,), or None
        ``b`` (zero if None).
    t : float or array_like
        Times >= 0, any shape.
    init_mean, init_cov : array_like, optional
        Law of ``theta_0``, shapes (d,), (d, d); a point at 0 by default.
    temperature : float
        ``T >= 0`` (1 in F7).

    Returns
    -------
    mean : ndarray, shape t.shape + (d,)
    cov : ndarray, shape t.shape + (d, d)
    """
    p = _spd("precision", precision)
    d = p.shape[0]
    b = np.zeros(d) if shift is None else finite_array("shift", shift, (d,))
    times = finite_array("t", t)
    if times.size == 0:
        raise ParameterError("t", "t must hold at least one time, got an empty array")
    if np.any(times < 0):
        raise ParameterError("t", f"t must be >= 0, got min {times.min():.4g}")
    temp = real("temperature", temperature, 0.0)
    m0 = np.zeros(d) if init_mean is None else finite_array("init_mean", init_mean, (d,))
    s0 = np.zeros((d, d)) if init_cov is None else _spd("init_cov", init_cov, d, allow_singular=True)
    lam, u = np.linalg.eigh(p)
    star = u.T @ b / lam
    e = np.exp(-times[..., None] * lam)  # (..., d)
    mean_e = star + e * (u.T @ m0 - star)
    s0_e = u.T @ s0 @ u
    # T/lam (1 - e^{-2 lam t}) on the diagonal, without cancellation at small t
    diag = -temp * np.expm1(-2.0 * times[..., None] * lam) / lam
    cov_e = e[..., :, None] * s0_e * e[..., None, :]
    cov_e[..., np.arange(d), np.arange(d)] += diag
    mean = mean_e @ u.T
    cov = u @ cov_e @ u.T
    return mean, 0.5 * (cov + np.swapaxes(cov, -1, -2))

r"""Constant-rate SGD and its relatives, in the units of "Stochastic Gradient Descent as
Approximate Bayesian Inference" (Mandt, Hoffman and Blei, 2017).

That paper works with the *averaged* loss ``L(theta) = U(theta) / N`` (``N`` data points,
``U`` the negative log posterior) and a learning rate ``epsilon`` on it; sgsim's targets
give the gradient of ``U``. The one conversion is :func:`averaged_loss_scale`: a step of
rate ``epsilon`` moves by ``epsilon / N`` times the gradient of ``U``. Every method here takes
the paper's ``epsilon`` as ``step_size`` and reads ``N`` from the target (its
``extras["n_data"]``: the data targets and :func:`sgsim.targets.ou_quadratic` know it).

The methods (``g = grad U~ / N``, the minibatch gradient of ``L``; ``H`` a symmetric positive
definite preconditioner, the identity unless given; a scalar, a diagonal given as a vector, or
a full matrix):

``sgd``
    Constant SGD (§3, eq. 5) and preconditioned SGD (§4.1):
    ``theta <- theta - epsilon H g``. The paper's preconditioned form ``theta <- theta - H g``
    is ``step_size=1``.
``momentum_sgd``
    SGD with momentum in the paper's order (§4.3, eq. 23): ``v <- (1 - mu) v - epsilon g``,
    then ``theta <- theta + v``, with damping ``mu`` in (0, 1] (``mu = 1`` is SGD). Unlike
    sgsim's SGHMC, the gradient is taken before the position moves.
``sgld_wt``
    SGLD at a constant rate in the Welling-Teh scale the paper uses in §5.1:
    ``theta <- theta - (epsilon / 2) grad U~ + sqrt(epsilon T) xi`` (the cyclical paper's SGLD
    with ``alpha = epsilon / 2``; ``N g = grad U~``).
``sgfs``
    Stochastic gradient Fisher scoring (§5.2, eq. 26): ``theta <- theta - epsilon H g +
    epsilon H E zeta``, ``zeta ~ N(0, I)``, with the injected covariance ``E E^T`` given as
    ``injected_cov``. The injected noise enters on the gradient's scale ``epsilon``, the one
    reading consistent with the paper's appendix E and eq. 27 (which treat ``B B^T / S`` and
    ``E E^T`` alike); the optimal ``H`` (Theorem 5, Corollary 6) is
    :func:`sgsim.theory.kl.sgfs_optimal_preconditioner`.
``iasg``
    The iterate-averaging sampler (§6.2, Algorithm 1): constant SGD whose draws are the means
    of ``theta`` over non-overlapping windows of ``window`` steps (``T = N / S`` in the paper),
    after ``warmup`` steps of SGD. The running mean is part of the state, updated at every
    step (``m <- m + (theta - m) / j`` at the ``j``-th step of a window), so nothing but the
    window means is stored. Its default schedule (:func:`sgsim.schedules.averaging_windows`)
    collects exactly the last step of each window.

Gradient noise. With a minibatch target (``target.stochastic_grad_u``) the noise is that of
the minibatch. With an emulated gradient-noise covariance ``V`` of ``grad U~`` (the OU
quadratic's ``V = N^2 C / S``) each step adds the noise the gradient would carry:
``(epsilon / N)^2 H V H`` (``sgd``, ``sgfs`` plus ``epsilon^2 H E E^T H``, ``iasg``),
``(epsilon / N)^2 V`` on the velocity (``momentum_sgd``), ``(epsilon / 2)^2 V`` beside the
injected ``epsilon T I`` (``sgld_wt``).

Stability. A rate beyond the stability limit of the recursion (``epsilon lambda_max(H A) / N < 2``
for SGD, SGFS and IASG; ``< 2 (2 - mu)`` for momentum; ``epsilon lambda_max(A) < 4`` for
``sgld_wt``, ``A`` the Hessian of ``U``) makes its iterates diverge wherever ``U``'s curvature
reaches ``lambda_max``. ``lambda_max`` is exact on a Gaussian target of known precision
(``ou_quadratic``, ``linear_gaussian``, ``linear_regression``) and the target's curvature bound
elsewhere (times ``lambda_max(H)`` under a preconditioner). A constant rate beyond it is refused
with a ``ParameterError`` naming ``step_size`` before any work, through the record's
``step_limit`` and the driver's one policy for every sampler (``sample``'s ``step_check``).
A diverging chain is also reported by the divergence check.

The exact discrete-time stationary covariances and laws of these recursions are in
:mod:`sgsim.theory.ou` and :mod:`sgsim.theory` (same units); the tests check every
method against them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import schedules
from .._jit import jit
from .._validate import ParameterError, ParameterTypeError, finite_array, integer, spd_matrix
from ..dynamics import Noise
from ..schedules import Schedule
from ._base import (
    CONSTANT_OPTIONS,
    INDEPENDENT,
    Algorithm,
    Method,
    Option,
    check_unit_interval,
    constant_schedule,
    curvature_limit,
    known_precision,
)
from ._loop import stay

__all__ = [
    "SGD",
    "MOMENTUM_SGD",
    "SGLD_WT",
    "SGFS",
    "IASG",
    "METHODS",
    "averaged_loss_scale",
    "preconditioner_matrix",
    "update",
    "momentum_update",
    "iasg_update",
    "SGDConstants",
    "MomentumConstants",
    "IASGConstants",
]

_SCALAR, _DIAGONAL, _FULL = 0, 1, 2


def averaged_loss_scale(n_data: int) -> float:
    """The one conversion between the two conventions: ``1 / N``.

    A learning rate ``epsilon`` on the averaged loss ``L = U / N`` moves ``theta`` by
    ``-epsilon grad L = -(epsilon / N) grad U``.
    """
    return 1.0 / n_data


# ----------------------------------------------------------------------------- compiled steps


@jit(inline=True)
def update(x, theta, g, z, noisy, a, k, consts):
    """``theta <- theta - a c H g + z``: ``consts`` is :class:`SGDConstants` ``(scale, kind, h_diag, h_full)``.

    ``c`` converts the gradient of ``U`` to the method's scale (``1 / N``, or ``1 / 2`` for
    ``sgld_wt``); ``H`` is a scalar (``h_diag[0]``), diagonal (``h_diag``) or full
    (``h_full``) as ``kind`` says.
    """
    s = a * consts.scale
    if consts.kind == 0:
        s = s * consts.h_diag[0]
        for i in range(theta.shape[0]):
            theta[i] = theta[i] - s * g[i]
    elif consts.kind == 1:
        hd = consts.h_diag
        for i in range(theta.shape[0]):
            theta[i] = theta[i] - s * hd[i] * g[i]
    else:
        hf = consts.h_full
        # axpy updates over the rows of the symmetric H: contiguous, so they vectorise
        for m in range(theta.shape[0]):
            sg = s * g[m]
            for i in range(theta.shape[0]):
                theta[i] = theta[i] - hf[m, i] * sg
    if noisy:
        for i in range(theta.shape[0]):
            theta[i] = theta[i] + z[i]


@jit(inline=True)
def momentum_update(x, theta, g, z, noisy, a, k, consts):
    """``v <- (1 - mu) v - a c g + z``, then ``theta <- theta + v``: ``consts = (scale, keep = 1 - mu)``."""
    s = a * consts.scale
    keep = consts.keep
    if noisy:
        for i in range(theta.shape[0]):
            x[1, i] = keep * x[1, i] - s * g[i] + z[i]
    else:
        for i in range(theta.shape[0]):
            x[1, i] = keep * x[1, i] - s * g[i]
    for i in range(theta.shape[0]):
        theta[i] = theta[i] + x[1, i]


@jit(inline=True)
def iasg_update(x, theta, g, z, noisy, a, k, consts):
    """An SGD step, then the running mean of the current window: ``consts = (scale, window, warmup)``.

    Step ``k`` (0-based) is position ``(k - warmup) mod window`` of its window; the mean
    restarts at position 0 and is the window's mean at position ``window - 1``.
    """
    s = a * consts.scale
    for i in range(theta.shape[0]):
        theta[i] = theta[i] - s * g[i]
    if noisy:
        for i in range(theta.shape[0]):
            theta[i] = theta[i] + z[i]
    pos = k - consts.warmup
    if pos >= 0:
        inv = 1.0 / (pos % consts.window + 1)
        for i in range(theta.shape[0]):
            x[1, i] = x[1, i] + (theta[i] - x[1, i]) * inv


# ----------------------------------------------------------------------------- options and checks


def _check_preconditioner(name: str, value):
    if value is None:
        return None
    arr = finite_array(name, value)
    if arr.ndim > 2:
        raise ParameterError(name, f"{name} must be a number, a vector (diagonal) or a matrix, got shape {arr.shape}")
    if arr.ndim < 2 and np.any(arr <= 0):
        raise ParameterError(name, f"{name} must be positive definite: its diagonal has entries <= 0")
    return arr


def _check_n_data(name: str, value):
    return None if value is None else integer(name, value, low=1)


def preconditioner_matrix(value, dim: int, name: str = "preconditioner") -> np.ndarray:
    """``H`` as a ``(dim, dim)`` matrix from None (identity), a number, a diagonal or a matrix.

    Raises
    ------
    ParameterError
        Naming ``name`` if the shape does not fit ``dim`` or ``H`` is not symmetric positive
        definite.
    """
    if value is None:
        return np.eye(dim)
    arr = np.asarray(value, float)
    if arr.ndim == 0:
        return float(arr) * np.eye(dim)
    if arr.ndim == 1:
        if arr.shape != (dim,):
            raise ParameterError(name, f"{name} as a diagonal must have shape ({dim},), got {arr.shape}")
        return np.diag(arr)
    return spd_matrix(name, arr, dim)


def _n_data(options: dict, target) -> dict:
    n = target.extras.get("n_data") if target.extras else None
    if n is None:
        raise ParameterTypeError(
            "target",
            f"target {target.name!r} does not say its number of data points N, which the averaged loss "
            "U / N of these methods needs: use a data target or ou_quadratic (or sgld at temperature 0 "
            "with step_size epsilon / N)",
        )
    given = options.get("n_data")
    if given is not None and given != n:
        raise ParameterError("n_data", f"n_data ({given}) differs from the target's N ({n})")
    options["n_data"] = int(n)
    return options


def _check_sgd(options: dict, target) -> dict:
    options = _n_data(options, target)
    preconditioner_matrix(options["preconditioner"], target.dim)
    return options


def _check_sgfs(options: dict, target) -> dict:
    options = _check_sgd(options, target)
    if options["preconditioner"] is None:
        raise ParameterTypeError(
            "preconditioner",
            "sgfs needs its preconditioner H (sgsim.theory.kl.sgfs_optimal_preconditioner gives Theorem 5's)",
        )
    cov = options["injected_cov"]
    if cov is not None:
        arr = np.asarray(cov, float)
        if arr.ndim < 2:
            if np.any(arr < 0):
                raise ParameterError("injected_cov", "injected_cov must be positive semidefinite: a diagonal entry < 0")
            if arr.ndim == 1 and arr.shape != (target.dim,):
                raise ParameterError(
                    "injected_cov", f"injected_cov as a diagonal must have shape ({target.dim},), got {arr.shape}"
                )
        else:
            spd_matrix("injected_cov", arr, target.dim, allow_singular=True)
    return options


def _check_iasg(options: dict, target) -> dict:
    options = _n_data(options, target)
    if options["window"] is None:
        raise ParameterTypeError("window", "iasg needs window, the steps averaged per draw (T = N / S in Algorithm 1)")
    return options


def _check_injected(name: str, value):
    return None if value is None else finite_array(name, value)


def _check_window(name: str, value):
    return None if value is None else integer(name, value, low=1)


def _kind(h) -> tuple[int, np.ndarray, np.ndarray]:
    # what the compiled update reads: a scalar and a diagonal need no matrix-vector product
    none = np.zeros((1, 1))
    if h is None:
        return _SCALAR, np.ones(1), none
    arr = np.asarray(h, float)
    if arr.ndim == 0:
        return _SCALAR, arr.reshape(1).copy(), none
    if arr.ndim == 1:
        return _DIAGONAL, np.ascontiguousarray(arr), none
    if np.count_nonzero(arr - np.diag(np.diag(arr))) == 0:
        return _DIAGONAL, np.ascontiguousarray(np.diag(arr)), none
    return _FULL, np.zeros(1), np.ascontiguousarray(0.5 * (arr + arr.T))  # exactly symmetric


class SGDConstants(NamedTuple):
    """What :func:`update` reads: the gradient's scale ``c`` and the preconditioner ``H``.

    ``kind`` says how ``H`` is held: 0 a scalar (``h_diag[0]``), 1 a diagonal (``h_diag``),
    2 a full matrix (``h_full``).
    """

    scale: float
    kind: int
    h_diag: np.ndarray
    h_full: np.ndarray


class MomentumConstants(NamedTuple):
    """What :func:`momentum_update` reads: the gradient's scale and ``keep = 1 - mu``."""

    scale: float
    keep: float


class IASGConstants(NamedTuple):
    """What :func:`iasg_update` reads: the gradient's scale, the window and the warm-up."""

    scale: float
    window: int
    warmup: int


def _sgd_constants(options: dict) -> SGDConstants:
    return SGDConstants(averaged_loss_scale(options["n_data"]), *_kind(options["preconditioner"]))


# ----------------------------------------------------------------------------- noise and stability


def _emulated(target) -> np.ndarray | None:
    v = target.grad_noise_cov
    return None if v is None or not np.any(v) else v


def _sgd_noise(block, target, options):
    v = _emulated(target)
    if v is None:
        return None
    h = preconditioner_matrix(options["preconditioner"], target.dim)
    c = averaged_loss_scale(options["n_data"])
    q = h @ v @ h
    return Noise(((c * block.step_size) ** 2,), (0.5 * (q + q.T),))


def _sgfs_noise(block, target, options):
    h = preconditioner_matrix(options["preconditioner"], target.dim)
    c = averaged_loss_scale(options["n_data"])
    v = _emulated(target)
    inner = np.zeros((target.dim, target.dim)) if v is None else c**2 * v
    cov = options["injected_cov"]
    if cov is not None:
        arr = np.asarray(cov, float)
        inner = inner + (np.diag(np.broadcast_to(arr, (target.dim,))) if arr.ndim < 2 else arr)
    if not np.any(inner):
        return None
    q = h @ inner @ h
    return Noise((block.step_size**2,), (0.5 * (q + q.T),))


def _momentum_noise(block, target, options):
    v = _emulated(target)
    if v is None:
        return None
    c = averaged_loss_scale(options["n_data"])
    return Noise(((c * block.step_size) ** 2,), (v,))


def _sgld_wt_noise(block, target, options):
    eye = np.eye(target.dim)
    v = _emulated(target)
    if v is None:
        return Noise((block.step_size * block.temperature,), (eye,))
    return Noise((block.step_size * block.temperature, (0.5 * block.step_size) ** 2), (eye, v))


def _sgd_limit(target, options):
    """``2 N / lambda_max(H A)``: the mean recursion ``I - (epsilon / N) H A`` contracts exactly below it.

    Without a preconditioner, ``lambda_max(A)`` is the target's curvature bound (exact on a
    Gaussian). With one, it is exact where the target states its precision; elsewhere the bound
    ``lambda_max(H) L`` serves (``H A`` is similar to ``H^(1/2) A H^(1/2)``).
    """
    factor = 2.0 / averaged_loss_scale(options["n_data"])
    if options["preconditioner"] is None:
        return curvature_limit(target, factor, "epsilon L / N < 2")
    h = preconditioner_matrix(options["preconditioner"], target.dim)
    p = known_precision(target)
    if p is not None:
        # eigenvalues of H A: real and positive (similar to A^(1/2) H A^(1/2))
        lam = float(np.max(np.linalg.eigvals(h @ p).real))
        return factor / lam, f"epsilon lambda_max(H A) / N < 2, lambda_max(H A) = {lam:.6g}"
    top = float(np.linalg.eigvalsh(h)[-1])
    return curvature_limit(target, factor / top, f"epsilon lambda_max(H) L / N < 2, lambda_max(H) = {top:.6g}")


def _momentum_limit(target, options):
    """``2 (2 - mu) N / L``: the heavy-ball recursion's exact limit on a quadratic of curvature ``L``."""
    factor = 2.0 * (2.0 - options["damping"]) / averaged_loss_scale(options["n_data"])
    return curvature_limit(target, factor, "epsilon L / N < 2 (2 - mu)")


def _sgld_wt_limit(target, options):
    """``4 / lambda_max(A)``: the drift ``(epsilon / 2) grad U`` halves SGLD's ``2 / L``'s step."""
    return curvature_limit(target, 4.0, "epsilon L < 4")


# ----------------------------------------------------------------------------- the algorithms

_N_DATA = Option(None, _check_n_data, "N of the averaged loss U / N; read from the target")
_PRECONDITIONER = Option(
    None, _check_preconditioner, "H: None (identity), a number, a diagonal (d,) or a (d, d) SPD matrix"
)
_UNITS = "averaged loss L = U / N: step_size is the learning rate epsilon on L (moves by epsilon / N grad U)"

SGD = Algorithm(
    name="sgd",
    summary="constant (preconditioned) SGD on the averaged loss",
    coupling=INDEPENDENT,
    state=("theta",),
    options={"preconditioner": _PRECONDITIONER, "n_data": _N_DATA},
    units=_UNITS,
    step=(stay, update),
    constants=_sgd_constants,
    noise=_sgd_noise,
    check=_check_sgd,
    step_limit=_sgd_limit,
    references="[SGDVI] eq. 5 and §4.1",
)

SGFS = Algorithm(
    name="sgfs",
    summary="stochastic gradient Fisher scoring: preconditioned SGD with injected noise",
    coupling=INDEPENDENT,
    state=("theta",),
    options={
        "preconditioner": _PRECONDITIONER,
        "injected_cov": Option(None, _check_injected, "E E^T: a number, a diagonal (d,) or a (d, d) PSD matrix"),
        "n_data": _N_DATA,
    },
    units=_UNITS + "; injected noise epsilon H E zeta",
    step=(stay, update),
    constants=_sgd_constants,
    noise=_sgfs_noise,
    check=_check_sgfs,
    step_limit=_sgd_limit,
    references="[SGDVI] §5.2, eq. 26; Ahn, Korattikara and Welling (2012)",
)

MOMENTUM_SGD = Algorithm(
    name="momentum_sgd",
    summary="SGD with momentum in the constant-SGD paper's order",
    coupling=INDEPENDENT,
    state=("theta", "velocity"),
    options={
        "damping": Option(0.1, check_unit_interval, "mu in (0, 1]: the velocity keeps 1 - mu per step"),
        "n_data": _N_DATA,
    },
    units=_UNITS + "; v <- (1 - mu) v - epsilon g, theta <- theta + v",
    step=(stay, momentum_update),
    constants=lambda options: MomentumConstants(averaged_loss_scale(options["n_data"]), 1.0 - options["damping"]),
    noise=_momentum_noise,
    check=_n_data,
    step_limit=_momentum_limit,
    references="[SGDVI] §4.3, eq. 23",
)

SGLD_WT = Algorithm(
    name="sgld_wt",
    summary="SGLD at a constant rate in the Welling-Teh scale",
    coupling=INDEPENDENT,
    state=("theta",),
    options={},
    units="Welling-Teh: drift (epsilon / 2) grad U, injected noise variance epsilon T",
    step=(stay, update),
    constants=lambda options: SGDConstants(0.5, *_kind(None)),
    noise=_sgld_wt_noise,
    step_limit=_sgld_wt_limit,
    asymptotically_exact=True,
    references="Welling and Teh (2011); [SGDVI] §5.1",
)

IASG = Algorithm(
    name="iasg",
    summary="iterate-averaging stochastic gradient sampler: window means of constant SGD",
    coupling=INDEPENDENT,
    state=("theta", "average"),
    options={
        "window": Option(None, _check_window, "T >= 1: steps averaged per draw (N / S in the paper)"),
        "warmup": Option(0, lambda name, value: integer(name, value, low=0), "SGD steps before the first window"),
        "n_data": _N_DATA,
    },
    units=_UNITS,
    step=(stay, iasg_update),
    constants=lambda options: IASGConstants(
        averaged_loss_scale(options["n_data"]), options["window"], options["warmup"]
    ),
    noise=lambda block, target, options: _sgd_noise(block, target, {**options, "preconditioner": None}),
    check=_check_iasg,
    outputs=("average",),
    step_limit=lambda target, options: _sgd_limit(target, {**options, "preconditioner": None}),
    references="[SGDVI] §6.2, Algorithm 1",
)


def iasg_schedule(n_steps, step_size, window, warmup=0) -> Schedule:
    """IASG's default schedule: constant rate, a draw at the last step of each window (``window`` is required)."""
    if window is None:
        raise ParameterTypeError("window", "iasg needs window, the steps averaged per draw (T = N / S in Algorithm 1)")
    return schedules.averaging_windows(step_size, n_steps, window=window, warmup=warmup)


def _sgd_schedule(n_steps, step_size, temperature=0.0) -> Schedule:
    return constant_schedule(n_steps, step_size, temperature)


def example_target():
    """A small quadratic loss with a known ``N`` (the family's options read it): the examples' target."""
    from ..targets import ou_quadratic

    return ou_quadratic([[1.0, 0.3], [0.3, 0.5]], [[1.5, -0.4], [-0.4, 0.8]], batch_size=4, n_data=100)


METHODS = (
    Method(
        "sgd",
        SGD,
        _sgd_schedule,
        ("step_size",),
        "constant (preconditioned) SGD, [SGDVI] units",
        "[SGDVI]",
        example={"target": example_target, "step_size": 0.5},
    ),
    Method(
        "momentum_sgd",
        MOMENTUM_SGD,
        _sgd_schedule,
        ("step_size",),
        "SGD with momentum, [SGDVI] order",
        "[SGDVI]",
        example={"target": example_target, "step_size": 0.3, "damping": 0.5},
    ),
    Method("sgld_wt", SGLD_WT, constant_schedule, CONSTANT_OPTIONS, "SGLD, Welling-Teh scale", "[SGDVI] §5.1"),
    Method(
        "sgfs",
        SGFS,
        _sgd_schedule,
        ("step_size",),
        "SGFS, [SGDVI] eq. 26",
        "[SGDVI] §5.2",
        example={"target": example_target, "step_size": 0.5, "preconditioner": [1.2, 0.8], "injected_cov": 0.3},
    ),
    Method(
        "iasg",
        IASG,
        iasg_schedule,
        ("step_size", "window", "warmup"),
        "iterate averaging, [SGDVI] Alg. 1",
        "[SGDVI]",
        example={"target": example_target, "step_size": 0.5, "window": 10},
    ),
)

r"""Samplers of one's own: the public record of an algorithm, its registration, and its exact law.

A sampler is one :class:`Algorithm` record, declared once: its state, its options (each with
its validation), its step-size convention, its compiled step and the covariance of the step's
Gaussian noise. A :class:`Method` pairs it with a default schedule and :func:`register` gives
it a name; from then on :func:`sgsim.sample`, the result files, :func:`sgsim.replay`, the
``sgsim run`` command and the conformance kit (:mod:`sgsim.testing`) treat it as they treat
sgsim's own samplers, which are written the same way.

The step of independent chains
------------------------------
A chain's step comes in two halves around the gradient, plain functions compiled by numba::

    move(x, theta, a, consts)                    # before the gradient (`stay` does nothing)
    update(x, theta, g, z, noisy, a, k, consts)  # after the gradient and the noise

``x`` is the chain's state (one row per name of ``state``; ``theta`` is row 0, also passed as
``theta``), ``g`` the gradient of the potential ``U = -log density`` at ``theta`` after
``move``, ``z`` the step's Gaussian noise, drawn with the covariance that ``noise`` declares
(``noisy`` is False, and ``z`` holds nothing, on steps whose covariance is zero), ``a`` the step
size, ``k`` the step's index in the run and ``consts`` the named tuple that ``constants``
returns. An update that needs the step's temperature (a thermostat's set point, a drift scaled
by ``T``) takes it as a ninth parameter ``t`` after ``a``:
``update(x, theta, g, z, noisy, a, t, k, consts)``. sgsim writes the halves' source into its
compiled loop, so they are defined in a file or a notebook cell, as plain statements (no
``return`` with a value, no inner functions).

For example SGLD with a diagonal preconditioner ``p`` (drift ``a p * grad U``, noise covariance
``2 a T diag(p)``)::

    class Constants(NamedTuple):
        p: np.ndarray

    @sgsim.jit(inline=True)
    def update(x, theta, g, z, noisy, a, k, consts):
        for i in range(theta.shape[0]):
            theta[i] = theta[i] - a * consts.p[i] * g[i] + (z[i] if noisy else 0.0)

    PSGLD = Algorithm(
        name="psgld_diag", summary="SGLD with a fixed diagonal preconditioner",
        coupling=INDEPENDENT, state=("theta",),
        options={"p": Option(None, check_positive_array, "the preconditioner's diagonal")},
        units="drift step_size * p * grad U, noise covariance 2 * step_size * T * diag(p)",
        step=(stay, update), constants=lambda o: Constants(o["p"]),
        noise=lambda block, target, o: Noise((2 * block.step_size * block.temperature,), (np.diag(o["p"]),)),
    )
    register(Method("psgld_diag", PSGLD, constant_schedule, CONSTANT_OPTIONS, "SGLD, diagonal preconditioner"))

Everything about the record that can be checked without a target is checked when it is built,
with a message naming the part at fault.

Exact laws for free
-------------------
On a linear-Gaussian target (``grad U(theta) = P theta - b``) every step of the usual samplers
is affine in the state and the noise, ``x_k = F_k x_{k-1} + c_k + R_k xi_k``. :func:`affine_steps`
reads ``F_k``, ``c_k`` and ``R_k`` off the compiled step itself, by running it from the zero
state, from each basis vector and with each basis vector as its noise, and checks at random
points that the step really is affine. :func:`exact_law` propagates them
(:func:`sgsim.theory.affine_law`): the exact discrete-time law of every iterate, for any
sampler, without writing it down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import dynamics
from ._validate import ParameterError, ParameterTypeError, finite_array, integer, positive_float
from .dynamics import Noise
from .integrators._base import (
    CONSTANT_OPTIONS,
    CYCLICAL_OPTIONS,
    INDEPENDENT,
    INTERACTING,
    METHODS,
    NO_CONSTANTS,
    ORIGINS,
    Algorithm,
    Method,
    NoConstants,
    Option,
    StepSizeWarning,
    check_bool,
    check_nonnegative,
    check_unit_interval,
    constant_schedule,
    curvature_limit,
    cyclical_schedule,
    get_method,
    register,
    unregister,
)
from .integrators._loop import stay
from .schedules import Schedule

if TYPE_CHECKING:
    from .theory.exact_law import GaussianPath

__all__ = [
    "Algorithm",
    "Option",
    "Method",
    "register",
    "unregister",
    "get_method",
    "METHODS",
    "ORIGINS",
    "INDEPENDENT",
    "INTERACTING",
    "NO_CONSTANTS",
    "NoConstants",
    "Noise",
    "stay",
    "constant_schedule",
    "cyclical_schedule",
    "CONSTANT_OPTIONS",
    "CYCLICAL_OPTIONS",
    "StepSizeWarning",
    "curvature_limit",
    "check_bool",
    "check_unit_interval",
    "check_nonnegative",
    "check_positive",
    "check_integer",
    "check_positive_array",
    "AffineSteps",
    "NotAffineError",
    "affine_steps",
    "exact_law",
    "dynamics",
    "Schedule",
    "ParameterError",
    "ParameterTypeError",
]


def check_positive(name: str, value) -> float:
    """Option check: a finite real number > 0."""
    return positive_float(name, value)


def check_positive_array(name: str, value) -> np.ndarray:
    """Option check: a number or a vector of finite numbers, each > 0 (returned as a 1-D float array)."""
    arr = np.atleast_1d(finite_array(name, value)).astype(float)
    if arr.ndim != 1 or arr.size == 0 or np.any(arr <= 0):
        raise ParameterError(name, f"{name} must be a number or a vector of numbers > 0, got {value!r}")
    return arr


def check_integer(name: str, value, low: int = 0) -> int:
    """Option check: an integer >= ``low`` (0 by default)."""
    return integer(name, value, low=low)


class NotAffineError(ValueError):
    """The step is not affine in the state and the noise (so it has no Gaussian exact law)."""


@dataclass(frozen=True)
class AffineSteps:
    """The maps of a sampler's steps, read off its compiled code: ``x_k = F_k x_{k-1} + c_k + R_k xi_k``.

    ``x`` is the whole state (the rows of ``state`` one after the other: ``n = len(state) * d``
    numbers) and ``xi_k`` the step's standard normals (``d`` of them), so that the step's noise
    has covariance ``R_k R_k^T`` in the state.

    Attributes
    ----------
    transition : ndarray, shape (K, n, n)
        ``F_k``.
    shift : ndarray, shape (K, n)
        ``c_k``.
    noise_factor : ndarray, shape (K, n, d)
        ``R_k`` (zero on steps without noise).
    initial : ndarray, shape (n, d)
        The initial state as a map of the initial position: ``x_0 = initial @ theta_0 + initial_shift``.
    initial_shift : ndarray, shape (n,)
    state : tuple of str
        The names of the state's rows.
    method : str
    """

    transition: np.ndarray
    shift: np.ndarray
    noise_factor: np.ndarray
    initial: np.ndarray
    initial_shift: np.ndarray
    state: tuple[str, ...]
    method: str

    @property
    def noise_cov(self) -> np.ndarray:
        """``Q_k = R_k R_k^T``, shape (K, n, n)."""
        r = self.noise_factor
        return r @ np.swapaxes(r, -1, -2)

    def law(self, init_mean=None, init_cov=None) -> GaussianPath:
        """The exact law of ``x_1 .. x_K`` from ``theta_0 ~ N(init_mean, init_cov)`` (default: at 0).

        ``init_mean`` and ``init_cov`` are those of ``theta_0`` (shape ``(d,)`` and ``(d, d)``),
        the other state rows following from it as the algorithm initialises them.
        """
        # the theory (and its SciPy) is imported when a law is asked for, not with sgsim
        from .theory.exact_law import affine_law

        d = self.initial.shape[1]
        m0 = np.zeros(d) if init_mean is None else finite_array("init_mean", init_mean, (d,))
        s0 = np.zeros((d, d)) if init_cov is None else finite_array("init_cov", init_cov, (d, d))
        mean = self.initial @ m0 + self.initial_shift
        cov = self.initial @ s0 @ self.initial.T
        return affine_law(self.transition, self.shift, self.noise_cov, mean, 0.5 * (cov + cov.T))

    def stationary(self, k: int = -1) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the stationary law of the step ``k`` repeated forever.

        Solves ``m = F m + c`` and ``S = F S F^T + Q`` (a discrete Lyapunov equation); raises a
        ParameterError when ``F`` has spectral radius >= 1 (no stationary law).
        """
        f, c = self.transition[k], self.shift[k]
        q = self.noise_cov[k]
        from .theory.exact_law import stationary_covariance

        cov = stationary_covariance(f, q)
        mean = np.linalg.solve(np.eye(f.shape[0]) - f, c)
        return mean, cov


def _prepared(method, target, n_steps, schedule, noise_correction, options):
    from .driver import prepare  # the run driver sits above this module

    if get_method(method).algorithm.coupling == INTERACTING:
        raise ParameterError(
            "method",
            f"{get_method(method).name!r} moves an ensemble of interacting particles: affine_steps reads the maps "
            "of independent-chain steps (a kernel-coupled step is not affine in the particles)",
        )
    run, _ = prepare(
        target,
        method,
        n_steps,
        schedule=schedule,
        noise_correction=noise_correction,
        storage="final",
        divergence_bound=None,
        **options,
    )
    if run.target.stochastic_grad_u is not None:
        raise ParameterError(
            "target",
            f"target {run.target.name!r} draws minibatches: reading a step's map needs an exact gradient (a "
            "linear-Gaussian target, whose emulated gradient noise is part of the declared noise)",
        )
    return run


def _initial_map(run) -> tuple[np.ndarray, np.ndarray]:
    """The algorithm's initial state as an affine map of ``theta_0`` (checked at a random point)."""
    alg, d = run.method.algorithm, run.target.dim
    n_state = len(alg.state)

    def init(theta0: np.ndarray) -> np.ndarray:
        rows = alg.initial_state(theta0[None], {}, run.options)
        return np.concatenate([np.asarray(r, float).reshape(-1) for r in rows])

    base = init(np.zeros(d))
    cols = np.stack([init(e) - base for e in np.eye(d)], axis=1)
    point = np.random.default_rng(1).standard_normal(d)
    if not np.allclose(init(point), cols @ point + base, rtol=1e-9, atol=1e-12):
        raise NotAffineError(f"{run.method.name!r}: the initial state is not an affine function of theta_0")
    return cols.reshape(n_state * d, d), base


def affine_steps(method, target, n_steps=None, *, schedule=None, noise_correction=False, **options) -> AffineSteps:
    """Read the affine map of every step of ``method`` on ``target`` off the compiled step itself.

    Each step ``k`` is run (through the same compiled loop :func:`sgsim.sample` uses) from the
    zero state, from each basis vector of the state, and from zero with each basis vector of
    the noise injected as its standard normals; the differences give ``F_k``, ``c_k`` and
    ``R_k``. Two more runs, from a random state with random normals, check that the step is
    affine (to 1e-9 relative): a step that is not (a nonlinear target, a kernel between
    particles, a clipped update) raises :class:`NotAffineError`.

    Parameters
    ----------
    method : str or Method
        A registered method (or its record).
    target : Target or str
        A target with an exact gradient; on a linear-Gaussian target
        (:func:`sgsim.targets.linear_gaussian`, :func:`sgsim.targets.ou_quadratic`) the usual
        samplers are affine, and the emulated gradient noise is part of their declared noise.
    n_steps, schedule, noise_correction, **options
        As for :func:`sgsim.sample`.

    Returns
    -------
    AffineSteps

    Raises
    ------
    NotAffineError
        If a step is not affine in the state and the noise.

    Examples
    --------
    SGLD at ``alpha = 0.1`` on ``N(0, 1)``: ``F = 1 - alpha``, ``R R^T = 2 alpha``:

    >>> import sgsim
    >>> from sgsim.algorithms import affine_steps
    >>> maps = affine_steps("sgld", sgsim.targets.standard_gaussian(1), 3, step_size=0.1)
    >>> print(maps.transition[0], maps.noise_cov[0].round(12))
    [[0.9]] [[0.2]]
    """
    run = _prepared(method, target, n_steps, schedule, noise_correction, options)
    from .driver import advance_probes

    alg, d = run.method.algorithm, run.target.dim
    n_state = len(alg.state)
    n = n_state * d
    k_steps = run.schedule.n_steps
    rng = np.random.default_rng(20260)
    # probes: 0, the n basis vectors, a random state; then 0 with each basis normal, random normals
    states = np.zeros((n + 2 + d + 1, n))
    states[1 : n + 1] = np.eye(n)
    states[n + 1] = rng.standard_normal(n)
    normals = np.zeros((states.shape[0], d))
    normals[n + 2 : n + 2 + d] = np.eye(d)
    normals[n + 2 + d] = rng.standard_normal(d)
    transition = np.empty((k_steps, n, n))
    shift = np.empty((k_steps, n))
    factor = np.empty((k_steps, n, d))
    shaped = np.ascontiguousarray(states.reshape(-1, n_state, d))
    for k in range(k_steps):
        after = advance_probes(run, shaped.copy(), normals, k).reshape(-1, n)
        if not np.all(np.isfinite(after)):
            # an affine map is finite everywhere: a step undefined at some states (a square root of a
            # negative running moment, say) is not affine
            raise NotAffineError(f"{run.method.name!r}: step {k} is not finite from every probe state")
        base = after[0]
        f = (after[1 : n + 1] - base).T
        r = (after[n + 2 : n + 2 + d] - base).T
        scale = 1.0 + np.abs(after).max()
        if not np.allclose(after[n + 1], f @ states[n + 1] + base, rtol=1e-9, atol=1e-9 * scale):
            raise NotAffineError(f"{run.method.name!r}: step {k} is not affine in the state on {run.target.name!r}")
        if not np.allclose(after[n + 2 + d], r @ normals[n + 2 + d] + base, rtol=1e-9, atol=1e-9 * scale):
            raise NotAffineError(f"{run.method.name!r}: step {k} is not affine in its noise")
        transition[k], shift[k], factor[k] = f, base, r
    initial, initial_shift = _initial_map(run)
    return AffineSteps(transition, shift, factor, initial, initial_shift, tuple(alg.state), run.method.name)


def exact_law(
    method,
    target,
    n_steps=None,
    *,
    schedule=None,
    init_mean=None,
    init_cov=None,
    noise_correction=False,
    **options,
) -> GaussianPath:
    """The exact law of every iterate of any affine sampler on ``target``, derived from its step.

    :func:`affine_steps`, then :func:`sgsim.theory.affine_law`: the state's mean and
    covariance after each step (the rows of ``state`` one after the other, ``theta`` first),
    from ``theta_0 ~ N(init_mean, init_cov)`` (default: the fixed point 0).

    Examples
    --------
    SGHMC on ``N(0, 1)`` at ``alpha = 0.01``, ``eta = 0.1``: the velocity's stationary variance
    is ``alpha / (1 - eta / 2)``, not ``alpha``:

    >>> import sgsim
    >>> from sgsim.algorithms import exact_law
    >>> law = exact_law("sghmc", sgsim.targets.standard_gaussian(1), 4000, step_size=0.01, friction=0.1)
    >>> print(round(float(law.cov[-1, 1, 1]) / 0.01 * (1 - 0.05), 3))
    1.0
    """
    maps = affine_steps(method, target, n_steps, schedule=schedule, noise_correction=noise_correction, **options)
    return maps.law(init_mean, init_cov)

"""Step-size, temperature and stage sequences ([cSG] eqs. 1-2, Algorithm 1; THEORY A3).

A :class:`Schedule` holds, for every step ``k = 1..K`` (stored 0-based), the step size
``alpha_k``, the temperature ``T_k``, the stage (0 = exploration, 1 = sampling) and the
cycle index, plus ``collect``: whether the draw after step ``k`` belongs to the sample
(before burn-in and thinning, which :func:`sgsim.sample` applies). All arrays are
precomputed, so the kernels never evaluate a schedule.

Step sizes follow the cyclical paper's convention: the drift is ``alpha_k grad U`` and the
injected noise variance ``2 alpha_k T_k`` (THEORY section 0).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from ._validate import integer, positive_float, real

__all__ = [
    "Schedule",
    "constant",
    "polynomial_decay",
    "cyclical",
    "cycle_length",
    "exploration_steps",
    "cyclical_sum",
    "cyclical_sum_squares",
    "EXPLORATION",
    "SAMPLING",
]

EXPLORATION = 0
SAMPLING = 1


@dataclass(frozen=True, eq=False)
class Schedule:
    """Per-step arrays of one run (length ``n_steps``).

    Attributes
    ----------
    step_size : ndarray of float64
    temperature : ndarray of float64
    stage : ndarray of int8
        ``EXPLORATION`` (0) or ``SAMPLING`` (1).
    cycle : ndarray of int32
        0-based cycle index (all zero for non-cyclical schedules).
    collect : ndarray of bool
        Whether the iterate after this step is a sample.
    description : dict
        The constructor and its arguments, recorded in results.
    """

    step_size: np.ndarray
    temperature: np.ndarray
    stage: np.ndarray
    cycle: np.ndarray
    collect: np.ndarray
    description: dict

    def __post_init__(self):
        n = self.step_size.shape[0]
        for name in ("temperature", "stage", "cycle", "collect"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"Schedule.{name} must have shape ({n},)")
        for arr in (self.step_size, self.temperature, self.stage, self.cycle, self.collect):
            arr.setflags(write=False)

    @property
    def n_steps(self) -> int:
        """Number of steps ``K``."""
        return int(self.step_size.shape[0])

    @property
    def n_cycles(self) -> int:
        """Number of (possibly truncated) cycles actually present."""
        return int(self.cycle[-1]) + 1 if self.n_steps else 0


def _steps(n_steps) -> int:
    return integer("n_steps", n_steps, low=1)


def _temperature(value) -> float:
    return real("temperature", value, 0.0)


def constant(step_size: float, n_steps: int, temperature: float = 1.0) -> Schedule:
    """Constant step size ``alpha`` at temperature ``T``; every step is a sampling step."""
    alpha = positive_float("step_size", step_size)
    n = _steps(n_steps)
    temp = _temperature(temperature)
    return Schedule(
        step_size=np.full(n, alpha),
        temperature=np.full(n, temp),
        stage=np.full(n, SAMPLING, np.int8),
        cycle=np.zeros(n, np.int32),
        collect=np.ones(n, bool),
        description={"schedule": "constant", "step_size": alpha, "n_steps": n, "temperature": temp},
    )


def polynomial_decay(
    a: float, gamma: float, n_steps: int, b: float = 0.0, hold: int = 0, temperature: float = 1.0
) -> Schedule:
    """Decreasing step sizes ``alpha_k = a (b + k)^(-gamma)`` ([cSG] eq. 1), after an optional hold.

    For ``k <= hold`` the step size is held at ``a (b + 1)^(-gamma)``; afterwards
    ``alpha_k = a (b + k - hold)^(-gamma)``. ``hold = 500, b = 0`` gives the 25-Gaussian
    reference code's baseline (0.043 for 500 steps, then ``0.043 (t - 500)^(-0.55)``);
    ``hold = 0`` gives the paper's ``0.05 k^(-0.55)``.

    Parameters
    ----------
    a : float
        Scale, > 0.
    gamma : float
        Decay exponent in [0, 1]. The Robbins-Monro conditions of [cSG] Assumption 1 hold
        for ``gamma`` in (0.5, 1]; other values are allowed (and not Robbins-Monro).
    n_steps : int
        Number of steps, >= 1.
    b : float
        Offset, >= 0.
    hold : int
        Number of initial steps at the first step size, >= 0.
    temperature : float
        Temperature of every step, >= 0.
    """
    a = positive_float("a", a)
    gamma = real("gamma", gamma, 0.0, 1.0)
    n = _steps(n_steps)
    b = real("b", b, 0.0)
    hold = integer("hold", hold, low=0)
    temp = _temperature(temperature)
    k = np.arange(1, n + 1, dtype=np.float64)
    alpha = a * (b + np.maximum(k - hold, 1.0)) ** (-gamma)
    return Schedule(
        step_size=alpha,
        temperature=np.full(n, temp),
        stage=np.full(n, SAMPLING, np.int8),
        cycle=np.zeros(n, np.int32),
        collect=np.ones(n, bool),
        description={
            "schedule": "polynomial_decay",
            "a": a,
            "gamma": gamma,
            "b": b,
            "hold": hold,
            "n_steps": n,
            "temperature": temp,
        },
    )


def cycle_length(n_steps: int, n_cycles: int) -> int:
    """``L_c = ceil(K / M)`` ([cSG] eq. 2), in integer arithmetic."""
    return -(-int(n_steps) // int(n_cycles))


def exploration_steps(length: int, explore_fraction: float) -> int:
    """Number of exploration steps at the start of a full cycle of ``length`` steps.

    Step ``j = (k-1) mod L_c`` explores when ``r(k) = j / L_c < beta``, i.e. when
    ``j < beta L_c``; so the count is ``ceil(beta L_c)``. ``beta L_c`` is computed in floating
    point (``0.55 * 100`` is 55.000000000000007), so a relative slack of 1e-9 is taken before
    the ceiling. This is the only place that decides the stage: the schedule, the
    integrators and the tests all call it (THEORY A3).
    """
    x = float(explore_fraction) * int(length)
    return int(math.ceil(x - 1e-9 * max(1.0, x)))


def cyclical(
    step_size: float,
    n_cycles: int,
    n_steps: int,
    explore_fraction: float = 0.0,
    temperature: float = 1.0,
    skip_per_cycle: int = 0,
) -> Schedule:
    """The cosine cyclical schedule of [cSG] eq. 2 with the stages of Algorithm 1.

    ``alpha_k = (alpha_0 / 2) (cos(pi r(k)) + 1)`` with ``r(k) = mod(k-1, L_c) / L_c`` and
    ``L_c = ceil(K/M)``. Steps with ``r(k) < beta`` explore at temperature 0 (plain SGD, or
    momentum SGD for SGHMC); the others sample at ``temperature``. The paper writes
    ``r(k) > beta`` for sampling; ``r(k) >= beta`` is used so that the stages partition each
    cycle (THEORY A3).

    Parameters
    ----------
    step_size : float
        ``alpha_0 > 0``, the first step size of each cycle.
    n_cycles : int
        ``M``, with ``1 <= M <= K``. If ``K`` is not a multiple of ``M`` the last cycle is
        truncated (as in the paper's 25-Gaussian run, K = 50000, M = 30); if
        ``ceil(K/M)`` leaves fewer than ``M`` cycles, a warning says so.
    n_steps : int
        ``K >= 1``.
    explore_fraction : float
        ``beta`` in [0, 1): the fraction of each cycle spent exploring.
    temperature : float
        Temperature of the sampling stage (1 samples ``exp(-U)``).
    skip_per_cycle : int
        Sampling-stage steps at the start of each cycle that are not collected (the
        reference MATLAB code runs with ``beta = 0`` and keeps samples only after the
        first 50 steps of each cycle).
    """
    alpha0 = positive_float("step_size", step_size)
    n = _steps(n_steps)
    m = integer("n_cycles", n_cycles, low=1)
    if m > n:
        raise ValueError(f"n_cycles must be <= n_steps ({n}), got {m}")
    beta = real("explore_fraction", explore_fraction, 0.0, 1.0, high_open=True)
    temp = _temperature(temperature)
    skip = integer("skip_per_cycle", skip_per_cycle, low=0)
    length = cycle_length(n, m)
    actual = -(-n // length)
    if actual < m:
        warnings.warn(
            f"ceil(n_steps / n_cycles) = {length} leaves {actual} cycles, not n_cycles = {m}",
            UserWarning,
            stacklevel=2,
        )
    k = np.arange(n)
    pos = k % length
    alpha = 0.5 * alpha0 * (np.cos(np.pi * pos / length) + 1.0)
    n_explore = exploration_steps(length, beta)
    stage = np.where(pos < n_explore, EXPLORATION, SAMPLING).astype(np.int8)
    return Schedule(
        step_size=alpha,
        temperature=np.where(stage == SAMPLING, temp, 0.0),
        stage=stage,
        cycle=(k // length).astype(np.int32),
        collect=(stage == SAMPLING) & (pos - n_explore >= skip),
        description={
            "schedule": "cyclical",
            "step_size": alpha0,
            "n_cycles": m,
            "n_steps": n,
            "explore_fraction": beta,
            "temperature": temp,
            "skip_per_cycle": skip,
            "cycle_length": length,
        },
    )


def _full_cycles(n_steps, n_cycles) -> tuple[int, int, int]:
    n = _steps(n_steps)
    m = integer("n_cycles", n_cycles, low=1)
    if n % m:
        raise ValueError(f"the exact sums need n_steps to be a multiple of n_cycles, got K={n}, M={m}")
    return n, m, n // m


def cyclical_sum(step_size: float, n_cycles: int, n_steps: int) -> float:
    """Exact ``sum_k alpha_k`` of the cosine schedule: ``alpha_0 (K + M) / 2`` (THEORY A3).

    [cSG] App. C prints ``K alpha_0 / 2``, which drops ``alpha_0 M / 2`` (erratum H2).
    Requires ``K = M L_c``. For ``L_c = 1`` the schedule is constant and the formula still
    holds.
    """
    alpha0 = positive_float("step_size", step_size)
    n, m, _ = _full_cycles(n_steps, n_cycles)
    return alpha0 * (n + m) / 2.0


def cyclical_sum_squares(step_size: float, n_cycles: int, n_steps: int) -> float:
    """Exact ``sum_k alpha_k^2``: ``alpha_0^2 (3K/8 + M/2)`` for ``L_c >= 2``, ``K alpha_0^2`` for ``L_c = 1``.

    [cSG] eq. 17 prints ``3 alpha_0^2 K / 8`` (erratum H2).
    """
    alpha0 = positive_float("step_size", step_size)
    n, m, length = _full_cycles(n_steps, n_cycles)
    if length == 1:
        return n * alpha0**2
    return alpha0**2 * (3.0 * n / 8.0 + m / 2.0)

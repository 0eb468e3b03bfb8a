"""Step-size, temperature and stage sequences ([cSG] eqs. 1-2, Algorithm 1; :ref:`theory-schedules`).

A :class:`Schedule` holds, for every step ``k = 1..K`` (stored 0-based), the step size
``alpha_k``, the temperature ``T_k``, the stage (0 = exploration, 1 = sampling) and the
cycle index, plus ``collect``: whether the draw after step ``k`` belongs to the sample
(before burn-in and thinning, which :func:`sgsim.sample` applies). All arrays are
precomputed, so the kernels never evaluate a schedule.

Step sizes follow the cyclical paper's convention: the drift is ``alpha_k grad U`` and the
injected noise variance ``2 alpha_k T_k`` (:ref:`theory-conventions`).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ._validate import ParameterError, ParameterTypeError, finite_array, integer, mask, positive_float, real

__all__ = [
    "Schedule",
    "ScheduleBlock",
    "from_description",
    "constant",
    "polynomial_decay",
    "cyclical",
    "averaging_windows",
    "cycle_length",
    "exploration_steps",
    "EXPLORATION",
    "SAMPLING",
]

EXPLORATION = 0
SAMPLING = 1


@dataclass(frozen=True)
class ScheduleBlock:
    """The per-step values of steps ``k0 .. k1 - 1`` (0-based) of a :class:`Schedule`.

    Attributes
    ----------
    k0 : int
        Index of the first step of the block.
    step_size, temperature : ndarray of float64
    stage : ndarray of int8
    cycle : ndarray of int64
    collect : ndarray of bool
    """

    k0: int
    step_size: np.ndarray
    temperature: np.ndarray
    stage: np.ndarray
    cycle: np.ndarray
    collect: np.ndarray

    @property
    def k1(self) -> int:
        """One past the index of the last step of the block."""
        return self.k0 + int(self.step_size.shape[0])


_FIELDS = ("step_size", "temperature", "stage", "cycle", "collect")
_DTYPES = {"step_size": np.float64, "temperature": np.float64, "stage": np.int8, "cycle": np.int64, "collect": bool}


class Schedule:
    """The per-step values of one run, computable block by block.

    For every step ``k = 1..K`` (stored 0-based): the step size ``alpha_k``, the temperature
    ``T_k``, the stage (0 = exploration, 1 = sampling), the cycle index, and ``collect``:
    whether the draw after step ``k`` belongs to the sample (before burn-in and thinning,
    which :func:`sgsim.sample` applies). The constructors (:func:`constant`,
    :func:`polynomial_decay`, :func:`cyclical`) compute any block of steps from their formula
    (:meth:`block`), so that a run of ``10^8`` steps never holds ``10^8`` values; the
    attributes ``step_size`` etc. give the whole sequences when asked for.

    ``Schedule(step_size, temperature, stage, cycle, collect, description)`` builds a schedule
    from arrays (lists are accepted), checked like the constructors' arguments: step sizes
    finite and > 0, temperatures finite and >= 0, stages 0 or 1, cycles >= 0. ``stage``,
    ``cycle`` and ``collect`` default to sampling, cycle 0 and every step collected.

    Attributes
    ----------
    n_steps : int
        ``K``.
    description : dict
        The constructor and its arguments, recorded in results (and enough to rebuild a
        formula schedule with :func:`from_description`).
    """

    def __init__(self, step_size, temperature, stage=None, cycle=None, collect=None, description=None):
        alpha = _sequence("step_size", step_size, np.float64)
        n = alpha.shape[0]
        if n < 1:
            raise ParameterError("step_size", "step_size must hold at least one step")
        if not np.all(alpha > 0):
            raise ParameterError("step_size", f"step_size must be > 0 at every step, got min {alpha.min():.4g}")
        temp = _sequence("temperature", temperature, np.float64, n)
        if not np.all(temp >= 0):
            raise ParameterError("temperature", f"temperature must be >= 0 at every step, got min {temp.min():.4g}")
        stage = np.full(n, SAMPLING, np.int8) if stage is None else _sequence("stage", stage, np.int8, n)
        if not np.all((stage == EXPLORATION) | (stage == SAMPLING)):
            raise ParameterError("stage", "stage must be 0 (exploration) or 1 (sampling) at every step")
        cycle = np.zeros(n, np.int64) if cycle is None else _sequence("cycle", cycle, np.int64, n)
        if not np.all(cycle >= 0):
            raise ParameterError("cycle", "cycle must be >= 0 at every step")
        collect = np.ones(n, bool) if collect is None else mask("collect", collect, n)
        if description is None:
            description = {"schedule": "arrays", "n_steps": n}
        elif not isinstance(description, dict):
            raise ParameterTypeError("description", f"description must be a dict, got {type(description).__name__}")
        self._arrays: dict[str, np.ndarray] | None = dict(
            step_size=alpha, temperature=temp, stage=stage, cycle=cycle, collect=collect
        )
        for arr in self._arrays.values():
            arr.setflags(write=False)
        self._values = None
        self.n_steps = int(n)
        self.description = dict(description)

    @classmethod
    def from_formula(cls, n_steps: int, values, description: dict) -> Schedule:
        """A schedule whose block ``[k0, k1)`` is ``values(k0, k1)``, a :class:`ScheduleBlock`."""
        self = cls.__new__(cls)
        self._arrays = None
        self._values = values
        self.n_steps = int(n_steps)
        self.description = dict(description)
        return self

    @property
    def is_formula(self) -> bool:
        """Whether the schedule is computed from a formula (else it holds arrays)."""
        return self._values is not None

    def block(self, k0: int, k1: int) -> ScheduleBlock:
        """The values of steps ``k0 .. k1 - 1`` (0-based, ``0 <= k0 < k1 <= n_steps``)."""
        if not 0 <= k0 < k1 <= self.n_steps:
            raise ValueError(f"block [{k0}, {k1}) is not within [0, {self.n_steps})")
        if self._values is not None:
            return self._values(k0, k1)
        assert self._arrays is not None
        return ScheduleBlock(k0, *(self._arrays[f][k0:k1] for f in _FIELDS))

    def arrays(self) -> dict[str, np.ndarray]:
        """All per-step values as read-only arrays (computed once for a formula schedule)."""
        if self._arrays is None:
            whole = self.block(0, self.n_steps)
            arrays = {f: np.asarray(getattr(whole, f)) for f in _FIELDS}
            for arr in arrays.values():
                arr.setflags(write=False)
            self._arrays = arrays
        return self._arrays

    @property
    def step_size(self) -> np.ndarray:
        """``alpha_k`` for every step (float64)."""
        return self.arrays()["step_size"]

    @property
    def temperature(self) -> np.ndarray:
        """``T_k`` for every step (float64)."""
        return self.arrays()["temperature"]

    @property
    def stage(self) -> np.ndarray:
        """``EXPLORATION`` (0) or ``SAMPLING`` (1) for every step (int8)."""
        return self.arrays()["stage"]

    @property
    def cycle(self) -> np.ndarray:
        """0-based cycle index of every step (int64; all zero for non-cyclical schedules)."""
        return self.arrays()["cycle"]

    @property
    def collect(self) -> np.ndarray:
        """Whether the iterate after each step is a sample (bool)."""
        return self.arrays()["collect"]

    @property
    def n_cycles(self) -> int:
        """Number of (possibly truncated) cycles actually present."""
        return int(self.block(self.n_steps - 1, self.n_steps).cycle[0]) + 1

    def kept_steps(self, burn_in: int = 0, thin: int = 1, block_size: int = 1 << 16) -> np.ndarray:
        """0-based indices of the steps whose draws are kept: collected, ``>= burn_in``, every ``thin``-th."""
        kept, seen = [], 0
        for k0 in range(burn_in, self.n_steps, block_size):
            k1 = min(self.n_steps, k0 + block_size)
            idx = np.flatnonzero(self.block(k0, k1).collect)
            take = idx[(seen + np.arange(idx.size)) % thin == 0] + k0
            seen += idx.size
            kept.append(take)
        return np.concatenate(kept) if kept else np.zeros(0, np.int64)


def _sequence(name, value, dtype, n=None) -> np.ndarray:
    arr = finite_array(name, value)  # strings, booleans and non-finite values refused by name
    if arr.ndim == 0 and n is not None:
        arr = np.full(n, arr)
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        want = f"({n},)" if n is not None else "(n_steps,)"
        raise ParameterError(name, f"{name} must have shape {want}, got {arr.shape}")
    if dtype is not np.float64:
        if not np.all(arr == np.round(arr)):
            raise ParameterError(name, f"{name} must hold integers")
        info = np.iinfo(dtype)
        if arr.size and not (info.min <= arr.min() and arr.max() <= info.max):
            raise ParameterError(name, f"{name} must lie in [{info.min}, {info.max}]")
    return np.ascontiguousarray(arr.astype(dtype))


def from_description(description: dict, arrays: dict | None = None) -> Schedule:
    """Rebuild a schedule from its ``description`` (and, for an array schedule, its arrays)."""
    kind = description.get("schedule")
    args = {k: v for k, v in description.items() if k not in ("schedule", "cycle_length")}
    if kind == "constant":
        return constant(**args)
    if kind == "polynomial_decay":
        return polynomial_decay(**args)
    if kind == "cyclical":
        return cyclical(**args)
    if kind == "averaging_windows":
        return averaging_windows(**args)
    if arrays is None:
        raise ValueError(f"schedule {kind!r} is not a formula: its per-step arrays are needed to rebuild it")
    return Schedule(**{f: arrays[f] for f in _FIELDS if f in arrays}, description=description)


def _steps(n_steps) -> int:
    return integer("n_steps", n_steps, low=1)


def _temperature(value) -> float:
    return real("temperature", value, 0.0)


def constant(step_size: float, n_steps: int, *, temperature: float = 1.0) -> Schedule:
    """Constant step size ``alpha`` at temperature ``T``; every step is a sampling step.

    Like every schedule constructor, the step size comes first and ``n_steps`` second; the
    other arguments are keywords.
    """
    alpha = positive_float("step_size", step_size)
    n = _steps(n_steps)
    temp = _temperature(temperature)

    def values(k0, k1):
        m = k1 - k0
        return ScheduleBlock(
            k0,
            np.full(m, alpha),
            np.full(m, temp),
            np.full(m, SAMPLING, np.int8),
            np.zeros(m, np.int64),
            np.ones(m, bool),
        )

    return Schedule.from_formula(
        n, values, {"schedule": "constant", "step_size": alpha, "n_steps": n, "temperature": temp}
    )


def polynomial_decay(
    a: float, gamma: float, n_steps: int, *, b: float = 0.0, hold: int = 0, temperature: float = 1.0
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

    def values(k0, k1):
        k = np.arange(k0 + 1, k1 + 1, dtype=np.float64)
        m = k1 - k0
        alpha = a * (b + np.maximum(k - hold, 1.0)) ** (-gamma)
        return ScheduleBlock(
            k0, alpha, np.full(m, temp), np.full(m, SAMPLING, np.int8), np.zeros(m, np.int64), np.ones(m, bool)
        )

    return Schedule.from_formula(
        n,
        values,
        {
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
    """``L_c = ceil(K / M)`` ([cSG] eq. 2), in integer arithmetic, for ``K >= 1`` and ``M >= 1``."""
    return -(-_steps(n_steps) // integer("n_cycles", n_cycles, low=1))


def exploration_steps(length: int, explore_fraction: float) -> int:
    """Number of exploration steps at the start of a full cycle of ``length`` steps.

    Step ``j = (k-1) mod L_c`` explores when ``r(k) = j / L_c < beta``, so the count is
    ``ceil(beta L_c)``, computed exactly (rational arithmetic, any ``L_c`` of the int64 range:
    ``beta = 0.25``, ``L_c = 4e14`` gives ``10^14``) for the fraction ``beta`` stands for: the
    float ``0.55`` is a little above 0.55 (``0.55 * 100`` rounds to 55.000000000000007), so
    ``beta`` is read as the fraction of denominator at most ``10^6`` that rounds to it (11/20,
    5/7, 1/3), or else as the shortest decimal that prints as it. This is the only place that
    decides the stage: the schedule, the integrators and the tests all call it
    (:ref:`theory-schedules`).
    """
    beta = real("explore_fraction", explore_fraction, 0.0, 1.0)
    n = integer("length", length, low=1)
    q = Fraction(beta).limit_denominator(10**6)  # the nearest such fraction: it rounds to beta if any does
    if float(q) != beta:
        q = Fraction(repr(beta))
    return math.ceil(q * n)


def cyclical(
    step_size: float,
    n_steps: int,
    *,
    n_cycles: int,
    explore_fraction: float = 0.0,
    temperature: float = 1.0,
    skip_per_cycle: int = 0,
) -> Schedule:
    """The cosine cyclical schedule of [cSG] eq. 2 with the stages of Algorithm 1.

    ``alpha_k = (alpha_0 / 2) (cos(pi r(k)) + 1)`` with ``r(k) = mod(k-1, L_c) / L_c`` and
    ``L_c = ceil(K/M)``. Steps with ``r(k) < beta`` explore at temperature 0 (plain SGD, or
    momentum SGD for SGHMC); the others sample at ``temperature``. The paper writes
    ``r(k) > beta`` for sampling; ``r(k) >= beta`` is used so that the stages partition each
    cycle (:ref:`theory-schedules`).

    The argument order is that of :func:`constant`: step size, ``n_steps``, then keywords
    (``cyclical(0.5, 50_000, n_cycles=30, explore_fraction=0.25)``).

    Parameters
    ----------
    step_size : float
        ``alpha_0 > 0``, the first step size of each cycle.
    n_steps : int
        ``K >= 1``.
    n_cycles : int
        ``M``, with ``1 <= M <= K`` (keyword only). If ``K`` is not a multiple of ``M`` the
        last cycle is truncated (as in the paper's 25-Gaussian run, K = 50000, M = 30); if
        ``ceil(K/M)`` leaves fewer than ``M`` cycles, a warning says so.
    explore_fraction : float
        ``beta`` in [0, 1): the fraction of each cycle spent exploring.
    temperature : float
        Temperature of the sampling stage (1 samples ``exp(-U)``).
    skip_per_cycle : int
        Sampling-stage steps at the start of each cycle that are not collected (the
        reference MATLAB code runs with ``beta = 0`` and keeps samples only after the
        first 50 steps of each cycle).

    Examples
    --------
    Two cycles of four steps, the first half of each exploring:

    >>> from sgsim import schedules
    >>> s = schedules.cyclical(0.1, 8, n_cycles=2, explore_fraction=0.5)
    >>> print(s.step_size.round(4))
    [0.1    0.0854 0.05   0.0146 0.1    0.0854 0.05   0.0146]
    >>> print(s.stage)  # 0 = exploration, 1 = sampling
    [0 0 1 1 0 0 1 1]
    >>> print(s.temperature)  # exploration steps run at temperature 0
    [0. 0. 1. 1. 0. 0. 1. 1.]
    >>> print(s.cycle, s.n_cycles)
    [0 0 0 0 1 1 1 1] 2

    The paper's 25-Gaussian run: ``K = 50000`` is not a multiple of ``M = 30``, so the cycles
    have ``ceil(K / M) = 1667`` steps and the last one is truncated:

    >>> s = schedules.cyclical(0.09, 50_000, n_cycles=30, explore_fraction=0.25)
    >>> print(s.description["cycle_length"], s.n_cycles)
    1667 30
    """
    alpha0 = positive_float("step_size", step_size)
    n = _steps(n_steps)
    m = integer("n_cycles", n_cycles, low=1)
    if m > n:
        raise ParameterError("n_cycles", f"n_cycles must be <= n_steps ({n}), got {m}")
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
    n_explore = exploration_steps(length, beta)

    def values(k0, k1):
        k = np.arange(k0, k1)
        pos = k % length
        alpha = 0.5 * alpha0 * (np.cos(np.pi * pos / length) + 1.0)
        stage = np.where(pos < n_explore, EXPLORATION, SAMPLING).astype(np.int8)
        return ScheduleBlock(
            k0,
            alpha,
            np.where(stage == SAMPLING, temp, 0.0),
            stage,
            k // length,
            (stage == SAMPLING) & (pos - n_explore >= skip),
        )

    return Schedule.from_formula(
        n,
        values,
        {
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


def averaging_windows(step_size: float, n_steps: int, *, window: int, warmup: int = 0) -> Schedule:
    """Constant rate with a draw at the last step of each averaging window (IASG, [SGDVI] Algorithm 1).

    Steps ``k < warmup`` explore (stage 0, cycle -1, nothing collected); from ``warmup`` on,
    step ``k`` belongs to window ``(k - warmup) // window`` (its cycle index) and is collected
    when it ends one, ``(k - warmup + 1) % window == 0``. The temperature is 0: these steps
    inject no noise of their own.
    """
    eps = positive_float("step_size", step_size)
    n = _steps(n_steps)
    t = integer("window", window, low=1)
    w = integer("warmup", warmup, low=0)
    if w + t > n:
        raise ParameterError("window", f"warmup + window must be <= n_steps ({n}), got {w} + {t}")

    def values(k0, k1):
        pos = np.arange(k0, k1) - w
        sampling = pos >= 0
        return ScheduleBlock(
            k0,
            np.full(k1 - k0, eps),
            np.zeros(k1 - k0),
            np.where(sampling, SAMPLING, EXPLORATION).astype(np.int8),
            np.where(sampling, pos // t, -1).astype(np.int64),
            sampling & ((pos + 1) % t == 0),
        )

    return Schedule.from_formula(
        n, values, {"schedule": "averaging_windows", "step_size": eps, "n_steps": n, "window": t, "warmup": w}
    )

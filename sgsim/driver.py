"""The run driver: replicas, blocks, threads and storage for a prepared run (CPU and GPU).

:func:`prepare` turns :func:`sgsim.sample`'s arguments into a :class:`Run`, the one record of
what a run does, before any replica exists. :func:`execute` advances every replica of a run
over its schedule, on the CPU (the compiled loops of :mod:`sgsim.integrators`, on a pool of
threads) or on the GPU path (:mod:`sgsim.gpu`), side by side behind the same record, the same
host buffers and the same storage index. :func:`sgsim.sample` (the public call: arguments,
validation, the result) is built on it.

Replicas
--------
A run advances ``n_chains`` replicas. For an algorithm with independent chains (SGLD,
SGHMC) a replica is one chain; for an interacting one (SVGD) it is an ensemble of
``n_particles`` particles that step together. Every replica draws from its own streams
(``sgsim.rng``: ``(seed, chain)`` for a chain, ``(seed, replica, particle)`` for a
particle), so its bits do not depend on how many replicas run, nor on how many threads.

How a run is executed
---------------------
The steps are processed in blocks (``_BLOCK_STEPS``): for each block the schedule's
values, the noise's per-step factors and the storage index are computed once in NumPy,
shared by every replica, so that memory follows the block and what is kept, never the
number of steps. Within a block the replicas are split into contiguous chunks, and each
chunk is advanced by one call of the algorithm's compiled loop (several chains per call, no
per-chain Python work) on a pool of threads (the loops release the GIL). Large ensembles
instead run one at a time with the particle loops of each step on numba's threads.
Blocking and chunking never change a bit of the result.

Storage
-------
``storage="draws"`` keeps every collected draw after ``burn_in`` (every ``thin``-th);
``"final"`` keeps only the final state; ``"moments"`` keeps, per chain (and particle), the
running mean and covariance of the draws that ``"draws"`` would keep (Welford's update), so
that 10^5-10^6 chains fit in memory and in a small file.

Every result records its run spec; :func:`sgsim.replay` reruns it.
"""

from __future__ import annotations

import functools
import inspect
import os
import threading
import time
import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field

import numba
import numpy as np

from . import rng as _rng
from . import targets as _targets
from ._jit import jit
from ._validate import (
    ParameterError,
    ParameterTypeError,
    boolean,
    choice,
    fits_in_memory,
    integer,
    positive_float,
)
from .integrators import INTERACTING, get_method
from .integrators._base import Method, StepSizeWarning, unknown_options
from .integrators._kernel_cache import cached_chain_loop, cached_ensemble_loop, cached_lane_loop, cached_vector_step
from .integrators._loop import (
    FEW_CHAINS,
    MOMENTS,
    NOTHING,
    chain_loop,
    draw_batch,
    ensemble_loop,
    lane_loop,
    stay,
    vector_step,
)
from .integrators._noise import NoiseBasis, noise_basis, noise_factors
from .results import STORAGE_MODES
from .schedules import Schedule, ScheduleBlock, exploration_steps
from .targets._base import lane_form

__all__ = ["Run", "prepare", "execute", "run_chain", "advance_probes", "PARALLEL_PARTICLES"]

_BLOCK_STEPS = 10_000
# values (steps times dimensions) of the noise factors checked at once before a run with a schedule
# given as arrays: each piece costs about 0.1 ms of Python besides its arithmetic (2 ns a step), so a
# 50,000-step schedule is one piece, not five; the pieces' arrays then hold about 7 MB at most
_CHECK_VALUES = 1 << 18
#: ensembles of at least this many particles run their particle loops on numba's threads
PARALLEL_PARTICLES = 128
# A block of steps runs in compiled code, where Python sees no signal: blocks are sized to take
# about this long (the first one step), so that Ctrl-C stops a run within about that time
_BLOCK_SECONDS = 0.2
# a block is at most this many times as long as the one before (a first block that compiled the
# loop, or a quicker machine, is followed by a few growing ones)
_BLOCK_GROWTH = 8
# seconds a replica-step took on one worker, by loop and the shapes of the target's arrays, as the
# last block of the last run measured it: a later run of the same loop and sizes starts with a block
# of _BLOCK_SECONDS at that rate, not with one step (a short run is then one block, not three)
_RATES: dict = {}
#: runs of independent chains with fewer replica-steps than this run on one thread: at 25 ns a
#: chain-step that is half a millisecond, less than handing each block to the pool's threads costs
THREAD_MIN_WORK = 20_000


@functools.lru_cache(maxsize=256)
def _required_parameters(fn) -> frozenset:
    """The parameters of ``fn`` that have no default (read once per function: a short run's set-up
    reads them).
    """
    params = inspect.signature(fn).parameters
    return frozenset(name for name, p in params.items() if p.default is inspect.Parameter.empty)


def _block_cap(n_rep: int, workers: int, d: int) -> int:
    """The most steps a block of ``n_rep`` replicas of dimension ``d`` on ``workers`` threads takes."""
    scale = 1 if n_rep >= 64 else (16 if workers > 1 else 4)
    return max(1, min(scale * _BLOCK_STEPS, (1 << 22) // max(1, d)))


#: Bytes per step of the blocks' inputs at their peak: two blocks' step sizes, noise scales and
#: kept-step marks alive at once (the one running and the next, prepared ahead; 25 each) and the
#: schedule's values of the one being prepared (26), measured
_BLOCK_INPUT_BYTES = 2 * 25 + 26


class _Blocks:
    """The blocks ``[k0, k1)`` of a range of steps, each sized from the time the last one took.

    The first block is ``first`` steps (one where no rate is known); each next one aims at
    ``_BLOCK_SECONDS`` at the rate of the last block timed (:meth:`took`), at most
    ``_BLOCK_GROWTH`` times the one before and ``cap`` steps. Where the blocks fall changes no bit
    of a run (the loops carry everything across them), only how soon a run sees Ctrl-C.
    """

    def __init__(self, k0: int, k1: int, cap: int, first: int = 1):
        self.k, self.stop, self.cap = int(k0), int(k1), max(1, int(cap))
        self.size = int(max(1, min(self.cap, first)))

    def next(self) -> tuple[int, int] | None:
        """The next block, or None when the range is done."""
        if self.k >= self.stop:
            return None
        k0 = self.k
        self.k = min(self.stop, k0 + self.size)
        return k0, self.k

    def took(self, steps: int, seconds: float) -> None:
        """A block of ``steps`` steps took ``seconds``: size the next ones."""
        want = steps * _BLOCK_SECONDS / max(seconds, 1e-9)
        self.size = int(max(1, min(self.cap, _BLOCK_GROWTH * self.size, want)))


@dataclass
class Run:
    """Everything :func:`sgsim.sample` prepared for one run, before any replica exists.

    Attributes
    ----------
    target : Target
    method : Method
    schedule : Schedule
    options : dict
        The algorithm's validated options, with ``noise_correction`` (and ``n_particles``
        for interacting methods).
    burn_in, thin : int
    storage : str
    n_draws : int
        Draws kept per chain (1 for ``"final"``; those averaged for ``"moments"``).
    n_particles : int or None
    basis : NoiseBasis
        The eigenbasis in which the noise is drawn.
    divergence_bound : float or None
        A replica whose ``max_i |theta_i|`` exceeds it has diverged (None: only non-finite
        states count).
    given_target : Target or None
        The target as the caller gave it, where the algorithm's ``gradient`` replaced it by
        ``target`` (its gradient estimator); results record this one.
    stream : str
        The random streams' scheme: ``"philox"`` (counter-based, :mod:`sgsim.philox`) or
        ``"pcg64"`` (``sgsim.rng``); see ``stream_scheme`` in this module.
    step_ratio : float or None
        The schedule's largest step over the method's stability limit on this target
        (the record's ``step_limit``); None where no limit is known.
    checked_noise : tuple or None
        The noise factors of every step ``(sd, noisy)`` (see :meth:`noise`), where the set-up's
        check computed them in one piece: the run takes its blocks' factors from them.
    """

    target: _targets.Target
    method: Method
    schedule: Schedule
    options: dict
    burn_in: int
    thin: int
    storage: str
    n_draws: int
    n_particles: int | None
    basis: NoiseBasis
    divergence_bound: float | None = None
    given_target: _targets.Target | None = None
    stream: str = "pcg64"
    step_ratio: float | None = None
    checked_noise: tuple | None = field(default=None, repr=False, compare=False)

    @property
    def interacting(self) -> bool:
        """Whether a replica is an ensemble of interacting particles."""
        return self.method.algorithm.coupling == INTERACTING

    def kernel_bound(self, precision: str = "float64") -> float:
        """The bound a compiled loop compares each ``|theta_i|`` with, in ``precision``.

        The divergence bound, or the largest float of ``precision`` when there is none (or
        the bound overflows it), so that the one comparison also fails for NaN and inf.
        """
        big = float(np.finfo(precision).max)
        return big if self.divergence_bound is None else min(float(self.divergence_bound), big)

    @property
    def member_shape(self) -> tuple[int, ...]:
        """Shape of one state array of one replica: ``(d,)`` or ``(L, d)``."""
        d = self.target.dim
        return (self.n_particles, d) if self.n_particles else (d,)

    def noise(self, block: ScheduleBlock) -> tuple:
        """The block's noise factors and temperatures ``(sd, basis.T, rotate, any_noise, temps)`` for
        the compiled loop (steps may scale more than the noise by the temperature: a thermostat's set
        point, an ensemble's repulsion).
        """
        alg = self.method.algorithm
        nb = block.step_size.shape[0]
        d = self.target.dim
        if self.checked_noise is not None:
            sd, noisy = (a[block.k0 : block.k0 + nb] for a in self.checked_noise)
        else:
            sd, noisy = noise_factors(alg.noise(block, self.target, self.options), self.basis, nb, d)
        return (sd, self.basis.rows, self.basis.rotate, noisy, np.ascontiguousarray(block.temperature))


def _check_storage(storage) -> str:
    if storage not in STORAGE_MODES:
        raise ParameterError("storage", f"storage must be one of {STORAGE_MODES}, got {storage!r}")
    return str(storage)


def _prepare(
    target,
    method,
    n_steps=None,
    *,
    schedule=None,
    burn_in=0,
    thin=1,
    noise_correction=False,
    storage="draws",
    n_particles=None,
    divergence_bound="auto",
    step_check="raise",
    **options,
) -> Run:
    """Validate a run's configuration; return the :class:`Run` (see :func:`prepare`).

    ``step_check`` (``"raise"``, ``"warn"`` or ``"ignore"``) says what a step beyond the
    sampler's stability limit on this target does (:func:`_check_step_limit`).

    Nothing per step is materialised: the kept steps are returned for ``storage="draws"``
    (``[n_steps - 1]`` for ``"final"``, empty for ``"moments"``, whose count is
    ``run.n_draws``).
    """
    target = _resolve_target(target)
    method = get_method(method)
    alg = method.algorithm
    burn_in = integer("burn_in", burn_in, low=0, high=_INT64_MAX)
    thin = integer("thin", thin, low=1, high=_INT64_MAX)
    storage = _check_storage(storage)
    noise_correction = boolean("noise_correction", noise_correction)
    step_check = choice("step_check", step_check, STEP_CHECKS)
    auto_bound = isinstance(divergence_bound, str) and divergence_bound == "auto"
    if auto_bound:
        divergence_bound = None  # the target's, once the schedule's temperatures are known
    elif divergence_bound is not None:
        if isinstance(divergence_bound, str):
            raise ParameterTypeError(
                "divergence_bound", f"divergence_bound must be 'auto', None or a number > 0, got {divergence_bound!r}"
            )
        divergence_bound = positive_float("divergence_bound", divergence_bound)
    # an option both the schedule and the dynamics take (IASG's window) goes to both; with an
    # explicit schedule, to the dynamics only
    shared = set(method.schedule_options) & set(alg.options)
    sched_kw = {k: options.pop(k) for k in list(options) if k in method.schedule_options}
    dyn_kw = {k: options.pop(k) for k in list(options) if k in alg.options}
    dyn_kw.update({k: v for k, v in sched_kw.items() if k in shared})
    if schedule is not None:
        sched_kw = {k: v for k, v in sched_kw.items() if k not in shared}
    if options:
        unknown_options(method, options)
    if alg.coupling == INTERACTING:
        if n_particles is None:
            raise ParameterTypeError("n_particles", f"method {method.name!r} moves ensembles: n_particles is required")
        n_particles = integer("n_particles", n_particles, low=2)
    elif n_particles is not None:
        raise ParameterTypeError("n_particles", f"method {method.name!r} runs independent chains: no n_particles")
    if schedule is not None:
        if not isinstance(schedule, Schedule):
            raise ParameterTypeError(
                "schedule", f"schedule must be a sgsim.schedules.Schedule, got {type(schedule).__name__}"
            )
        if sched_kw:
            raise ParameterTypeError(sorted(sched_kw)[0], f"give either schedule or {sorted(sched_kw)}, not both")
        if n_steps is not None and n_steps != schedule.n_steps:
            raise ParameterError(
                "n_steps", f"n_steps ({n_steps}) differs from the schedule's length ({schedule.n_steps})"
            )
    else:
        if n_steps is None:
            raise ParameterTypeError("n_steps", "n_steps is required when no schedule is given")
        if "step_size" not in sched_kw:
            raise ParameterTypeError("step_size", f"method {method.name!r} needs step_size (or an explicit schedule)")
        for name in method.schedule_options:
            if name not in sched_kw and name in _required_parameters(method.schedule):
                raise ParameterTypeError(name, f"method {method.name!r} needs {name} (or an explicit schedule)")
        schedule = method.schedule(n_steps, **sched_kw)
    common = {"noise_correction": noise_correction}
    if n_particles is not None:
        common["n_particles"] = n_particles
    if alg.potential and target.log_density_fn is None:
        raise ParameterError(
            "target",
            f"method {method.name!r} needs the target's energies, and target {target.name!r} has no compiled log "
            "density (log_density_fn): give a target with one (the compiled targets of sgsim.targets have it)",
        )
    opts = alg.validate(dyn_kw, target, **common)
    given_target = None
    if alg.gradient is not None:
        given_target, target = target, alg.gradient(target, opts)
    _check_n_steps(schedule.n_steps, target.dim)
    if burn_in >= schedule.n_steps:
        raise ParameterError("burn_in", f"burn_in must be < n_steps ({schedule.n_steps}), got {burn_in}")
    # the noise is checked (finite, positive semidefinite) before any work is done: on every
    # step with the correction or a schedule given as arrays, else on the first block, where
    # the formula schedules take their largest steps
    every_step = noise_correction or not schedule.is_formula
    piece = max(_BLOCK_STEPS, _CHECK_VALUES // target.dim) if every_step else _BLOCK_STEPS
    first = schedule.block(0, min(schedule.n_steps, piece))
    first_noise = alg.noise(first, target, opts)
    basis = noise_basis(first_noise, target.dim)
    largest = hottest = 0.0
    checked = None
    for k0 in range(0, schedule.n_steps if every_step else 1, piece):
        block = first if k0 == 0 else schedule.block(k0, min(schedule.n_steps, k0 + piece))
        noise = first_noise if k0 == 0 else alg.noise(block, target, opts)
        checked = noise_factors(noise, basis, block.step_size.shape[0], target.dim)
        largest = max(largest, float(np.max(block.step_size)))
        hottest = max(hottest, float(np.max(block.temperature)))
    known = target if given_target is None else given_target
    if alg.temperature_factor is not None:
        hottest *= float(alg.temperature_factor(opts))
    if auto_bound:
        # a method whose stationary law is not the target's (constant SGD: its spread is set by the
        # learning rate and the minibatch noise) gets NOT_TARGET_FACTOR times the target's bound
        divergence_bound = known.divergence_bound(hottest) * (1.0 if alg.asymptotically_exact else _NOT_TARGET_FACTOR)
    step_ratio = None
    limit = alg.step_limit(known, opts) if alg.step_limit is not None else None
    if limit is not None:
        step_ratio = largest / limit[0]
        if step_check != "ignore":
            _check_step_limit(method.name, schedule, largest, limit, step_check)
    # counted, not listed (prepare lists them where asked)
    n_draws = _count_kept(schedule, burn_in, thin)
    if n_draws == 0:
        raise ParameterError("burn_in", "no draw would be kept: check burn_in, thin and the schedule's sampling stages")
    if storage == "final":
        n_draws = 1
    run = Run(
        target, method, schedule, opts, burn_in, thin, storage, n_draws, n_particles, basis, divergence_bound,
        given_target,
    )  # fmt: skip
    run.step_ratio = step_ratio
    # the factors of every step, when one piece held them all: the run's blocks are slices of them
    run.checked_noise = checked if every_step and piece >= schedule.n_steps else None
    return run


def prepare(target, method, n_steps=None, **kwargs) -> tuple[Run, np.ndarray]:
    """Validate a run's configuration; return the :class:`Run` and the kept steps (0-based).

    The keywords are :func:`sgsim.sample`'s, less those of the replicas (``n_chains``,
    ``seed``, ``init``, threads, backend). Nothing per step is computed for a storage mode
    that keeps nothing per step: the kept steps are counted in closed form for sgsim's
    schedules, and listed only for ``storage="draws"``, once one chain's draws are known to
    fit in memory (``[n_steps - 1]`` for ``"final"``, empty for ``"moments"``, whose count
    is ``run.n_draws``).
    """
    run = _prepare(target, method, n_steps, **kwargs)
    if run.storage == "draws":
        _check_draws_fit(run.n_draws, int(np.prod(run.member_shape)))
        steps = run.schedule.kept_steps(run.burn_in, run.thin)
    elif run.storage == "final":
        steps = np.array([run.schedule.n_steps - 1])
    else:
        steps = np.zeros(0, np.int64)
    return run, steps


prepare.__signature__ = inspect.signature(_prepare).replace(return_annotation="tuple[Run, np.ndarray]")  # type: ignore[attr-defined]


#: what ``step_check`` may say
STEP_CHECKS = ("raise", "warn", "ignore")
_NOT_TARGET_FACTOR = 5.0
# a schedule longer than this many blocks has its steps beyond the limit counted on this many
# evenly spaced blocks (and the count scaled), so that the check costs no more than a block's work
_LIMIT_BLOCKS = 1000


def _steps_beyond(schedule: Schedule, limit: float) -> tuple[int, bool]:
    """How many steps of ``schedule`` are at or beyond ``limit``, and whether the count is exact."""
    n = schedule.n_steps
    n_blocks = -(-n // _BLOCK_STEPS)
    picked = np.unique(np.linspace(0, n_blocks - 1, min(n_blocks, _LIMIT_BLOCKS)).astype(np.int64))
    seen = beyond = 0
    for b in picked:
        k0 = int(b) * _BLOCK_STEPS
        steps = schedule.block(k0, min(n, k0 + _BLOCK_STEPS)).step_size
        seen += steps.shape[0]
        beyond += int(np.count_nonzero(steps >= limit))
    if seen == n:
        return beyond, True
    return round(beyond * n / seen), False


def _check_step_limit(method: str, schedule: Schedule, largest: float, limit: tuple, step_check: str) -> None:
    """The policy of the records' ``step_limit`` (see ``sample``'s ``step_check``).

    Every step at or beyond the limit (a constant step): refused, a ParameterError naming
    ``step_size``, or a warning under ``step_check="warn"``. At least half of the steps: a
    :class:`~sgsim.algorithms.StepSizeWarning`. Fewer (a cyclical schedule's first steps of
    each cycle, where the steps are large by design): nothing, the divergence check watches them.
    """
    value, rule = limit
    if largest < value:
        return
    beyond, exact = _steps_beyond(schedule, value)
    n = schedule.n_steps
    count = f"{beyond} of {n} steps" if exact else f"about {beyond} of {n} steps (counted on {_LIMIT_BLOCKS} blocks)"
    what = f"step_size {largest:.6g} is beyond {method}'s stability limit {value:.6g} ({rule}) on {count}"
    if beyond >= n and step_check == "raise":
        raise ParameterError(
            "step_size",
            f"{what}: the chains diverge wherever U's curvature reaches the bound (where the bound is a "
            f"worst case, e.g. a logistic regression's Hessian at 0, the chains may still be stable where they run). "
            f"Take a step below {value:.6g}, or pass step_check='warn' (or 'ignore') to run it anyway",
        )
    if 2 * beyond >= n:
        warnings.warn(
            f"{what}: the chains leave the target's stiffest region on those steps, and the divergence check "
            "watches them (step_check='ignore' silences this)",
            StepSizeWarning,
            stacklevel=_user_stacklevel(),
        )


def _user_stacklevel() -> int:
    """The ``stacklevel`` at which a warning issued by the caller points at the user's line.

    That is the first frame outside the package (the user's sgsim.sample, prepare or replay),
    however many of sgsim's own calls lie between.
    """
    package = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = inspect.currentframe(), 0  # this frame; the caller's is level 1
    while (
        frame is not None and frame.f_back is not None and os.path.abspath(frame.f_code.co_filename).startswith(package)
    ):
        frame, level = frame.f_back, level + 1
    return level


def _count_kept(schedule: Schedule, burn_in: int, thin: int) -> int:
    """How many draws ``burn_in`` and ``thin`` keep of ``schedule``'s collected steps (every ``thin``-th)."""
    return -(-_count_collected(schedule, burn_in) // thin)


def _count_collected(schedule: Schedule, k0: int) -> int:
    """How many of the steps ``k0 .. n_steps - 1`` of ``schedule`` are collected.

    In closed form for sgsim's formula schedules (their ``collect`` is periodic: every step;
    the end of a cycle's sampling stage past ``skip_per_cycle``; the last step of each
    averaging window), by counting the arrays of a schedule that holds them, and block by
    block only for a formula schedule of one's own.
    """
    n = schedule.n_steps
    values = getattr(schedule, "_values", None)
    kind = schedule.description.get("schedule")
    ours = values is not None and getattr(values, "__module__", None) == "sgsim.schedules"
    if ours and getattr(values, "__qualname__", "") == f"{kind}.<locals>.values":
        desc = schedule.description
        if kind in ("constant", "polynomial_decay"):
            return n - k0
        if kind == "cyclical":
            # step k is collected when its place in its cycle, k mod L, is >= n_explore + skip
            length = int(desc["cycle_length"])
            first = exploration_steps(length, desc["explore_fraction"]) + int(desc["skip_per_cycle"])

            def below(x):  # collected steps among 0 .. x - 1
                return (x // length) * max(0, length - first) + max(0, x % length - first)

            return below(n) - below(k0)
        if kind == "averaging_windows":
            # step k is collected when it ends a window: k = warmup + j window + window - 1, j >= 0
            window, warmup = int(desc["window"]), int(desc["warmup"])
            return max(0, (n - warmup) // window) - max(0, (k0 - warmup) // window)
    if not schedule.is_formula:
        return int(np.count_nonzero(schedule.collect[k0:]))
    seen = 0
    for b0 in range(k0, n, 1 << 16):
        seen += int(np.count_nonzero(schedule.block(b0, min(n, b0 + (1 << 16))).collect))
    return seen


_INT64_MAX = 2**63 - 1


def _check_n_steps(n_steps: int, dim: int) -> None:
    """Refuse a run longer than the loops can count: steps, and normal ``k d + i`` of a stream, are int64."""
    most = _INT64_MAX // max(1, dim)
    if n_steps > most:
        raise ParameterError(
            "n_steps",
            f"n_steps must be an int in [1, {most}] (the compiled loops count the steps, and the normals of a "
            f"{dim}-dimensional target, in 64-bit integers), got {n_steps}",
        )


def _check_draws_fit(n_draws: int, per_draw: int) -> None:
    """Refuse, before listing the kept steps, draws whose one chain alone would not fit in memory."""
    fits_in_memory(
        "thin",
        n_draws * (8.0 * per_draw + _DRAW_RECORD_BYTES),
        f"keeping {n_draws:,} draws of one chain",
        "keep fewer (thin, burn_in, n_steps), or use storage='final' or 'moments'",
    )


# A target named by a string is built once per process: building one validates its arrays, which
# costs as much as a short run. The entry keeps the constructor (a name registered anew is built
# anew) and the target's fingerprint (arrays changed in place are seen, and the target rebuilt).
_NAMED_TARGETS: dict = {}


def _resolve_target(target):
    if isinstance(target, str):
        factory = _targets.TARGETS.get(target)
        hit = _NAMED_TARGETS.get(target)
        if hit is not None and hit[0] is factory and hit[1].fingerprint() == hit[2]:
            return hit[1]
        built = _targets.get(target)
        if factory is not None:
            _NAMED_TARGETS[target] = (factory, built, built.fingerprint())
        return built
    if not isinstance(target, _targets.Target):
        raise ParameterTypeError(
            "target",
            f"target must be a sgsim Target or the name of one ({', '.join(sorted(_targets.TARGETS))}), "
            f"got {type(target).__name__}",
        )
    return target


# ----------------------------------------------------------------------------- storage index


class _Keeper:
    """Decides, block by block, which steps are kept (and in which slot); fills the per-draw stats."""

    def __init__(self, run: Run):
        self.run = run
        self.seen = 0  # collected steps at or after burn_in so far
        self.slot = 0  # next draw slot
        n = 0 if run.storage == "moments" else run.n_draws
        self.stats: dict[str, np.ndarray] = {
            "step_size": np.empty(n),
            "temperature": np.empty(n),
            "stage": np.empty(n, np.int8),
            "cycle": np.empty(n, np.int64),
            "step": np.empty(n, np.int64),
        }
        self.kept_steps = np.empty(n, np.int64)

    def store(self, block: ScheduleBlock) -> np.ndarray:
        run = self.run
        k0, nb = block.k0, block.step_size.shape[0]
        store = np.full(nb, NOTHING, np.int64)
        if run.storage == "final":
            if block.k1 == run.schedule.n_steps:
                self._record(block, np.array([nb - 1]), 0)
            return store
        mask = block.collect.copy()
        if run.burn_in > k0:
            mask[: run.burn_in - k0] = False
        idx = np.flatnonzero(mask)
        take = idx[(self.seen + np.arange(idx.size)) % run.thin == 0]
        self.seen += idx.size
        if run.storage == "moments":
            store[take] = MOMENTS
            return store
        slots = self.slot + np.arange(take.size)
        store[take] = slots
        self._record(block, take, self.slot)
        self.slot += take.size
        return store

    def _record(self, block: ScheduleBlock, idx: np.ndarray, first: int) -> None:
        sl = slice(first, first + idx.size)
        for name in ("step_size", "temperature", "stage", "cycle"):
            self.stats[name][sl] = getattr(block, name)[idx]
        self.stats["step"][sl] = block.k0 + idx + 1
        self.kept_steps[sl] = block.k0 + idx


# ----------------------------------------------------------------------------- execution


@dataclass
class _Buffers:
    state: np.ndarray  # (R, n_state) + member shape
    rngs: np.ndarray  # (R, STATE_WORDS) or (R, L, STATE_WORDS)
    works: np.ndarray  # (R, w) or (R, L, w)
    failed: np.ndarray  # (R,) 0-based failing step, -1 if none
    out: np.ndarray  # (R, n_draws) + member shape, or empty
    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    stats_out: np.ndarray  # (R, n_draws, n_stats) for ensembles
    stats_now: np.ndarray  # (R, n_stats): each ensemble's statistics as they stand, kept across blocks


_POOL: list = [None, 0]  # the executor and its size
_POOL_LOCK = threading.Lock()
# Forks. sgsim starts no process; it runs in processes others start. A forked child inherits
# no threads, but it does inherit locks a thread held at the fork and the OpenMP runtime of
# numba's "omp" layer, whose GNU implementation aborts the first parallel region of a child
# forked after the parent ran one ("fork() called from a process already using GNU OpenMP").
# So a child starts with a new pool and lock, and runs ensembles serially (same bits) when
# the parent had run them in parallel on that layer.
_FORK = {"openmp_used": False, "forked_after_openmp": False}


def _after_fork_in_child() -> None:
    global _POOL_LOCK
    _POOL_LOCK = threading.Lock()
    _POOL[:] = [None, 0]
    _FORK["forked_after_openmp"] = _FORK["openmp_used"]


os.register_at_fork(after_in_child=_after_fork_in_child)


def _openmp_layer() -> bool:
    try:
        return numba.threading_layer() == "omp"
    except ValueError:  # no parallel region has run yet
        return False


def _parallel_allowed() -> bool:
    """False, with a warning, in a process forked after its parent ran OpenMP parallel regions."""
    if not _FORK["forked_after_openmp"]:
        return True
    warnings.warn(
        "this process was forked from one that had run OpenMP threads, which cannot run again in a "
        "forked child: the ensemble runs on one thread (the result is the same). Start worker "
        "processes with the 'spawn' or 'forkserver' method to run ensembles in parallel.",
        RuntimeWarning,
        stacklevel=4,
    )
    return False


def _thread_pool(n: int) -> ThreadPoolExecutor:
    """A pool of at least ``n`` threads, kept between runs (a process's own: made anew after a fork)."""
    with _POOL_LOCK:
        pool, size = _POOL
        if pool is None or size < n:
            if pool is not None:
                pool.shutdown(wait=False)
            _POOL[:] = [ThreadPoolExecutor(max_workers=n, thread_name_prefix="sgsim"), n]
        return _POOL[0]


def _max_numba_threads() -> int:
    return int(getattr(numba.config, "NUMBA_NUM_THREADS", 1))


@contextmanager
def _blas_threads(serial: bool):
    """Hold BLAS (every loaded BLAS library) to one thread for the block, when ``serial``."""
    if not serial:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1, user_api="blas"):
        yield


@contextmanager
def _numba_threads(n: int):
    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(n, _max_numba_threads())))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _n_chunks(workers: int, n_rep: int) -> int:
    # several chunks per thread balance uneven chains; a handful of chains gets one chunk per thread
    return 1 if workers == 1 else (workers if n_rep <= 4 * workers else 4 * workers)


def _use_lanes(run: Run) -> bool:
    """Whether the chains run in the lane loop: Philox streams, and a target with a block gradient and
    no minibatch draws. Then every chain does, however many run: a block gradient gives each lane the
    same bits whatever the lanes beside it, so chain ``c``'s draws do not depend on the number of
    chains or threads. Where each thread has fewer than ``FEW_CHAINS`` chains and the block gradient
    has a one-point form (the shipped 2-D mixtures'), they run one at a time in the chain loop with
    that form written in: the same bits, without the lanes' overhead.
    """
    target = run.target
    return (
        run.stream == "philox"
        and not run.interacting
        and target.grad_u_block is not None
        and target.stochastic_grad_u is None
    )


def stream_scheme(run: Run, stream, backend: str = "cpu") -> str:
    """The streams a run draws from: ``stream`` checked against the run, or the default for it.

    ``"philox"`` (the default wherever it applies): counter-based Philox4x32-10 streams
    (:mod:`sgsim.philox`), the GPU path's, so that a CPU run and a GPU run of one seed draw the
    same normals chain by chain; it applies to independent chains whose target draws no random
    numbers of its own (no minibatches, no emulated gradient noise). ``"pcg64"``: the PCG64
    streams of ``sgsim.rng`` (every run before the counter-based streams; interacting
    ensembles and targets with stochastic gradients always).
    """
    target = run.target
    stochastic = target.stochastic_grad_u is not None or (target.batched is not None and target.batched.stochastic)
    philox_ok = not run.interacting and not stochastic
    if stream is None:
        return "philox" if philox_ok or backend != "cpu" else "pcg64"
    stream = choice("stream", stream, ("philox", "pcg64"))
    if backend != "cpu" and stream != "philox":
        raise ParameterError(
            "stream", f"backend {backend!r} draws from Philox streams: stream must be 'philox' or None"
        )
    if stream == "philox" and not philox_ok and backend == "cpu":
        why = (
            "moves interacting ensembles" if run.interacting else "has a stochastic gradient that draws from the stream"
        )
        raise ParameterError(
            "stream",
            f"stream='philox' applies to independent chains on targets that draw nothing; this run {why}: "
            "use stream='pcg64' or None",
        )
    return stream


def _execute(run: Run, buf: _Buffers, keeper: _Keeper, n_threads: int, progress, injected=None, k_range=None):
    """Advance every replica over the schedule (or ``k_range``) in place.

    ``injected`` (shape ``(n_rep, k1 - k0) + member``, its first step that of ``k_range``)
    replaces the streams' standard normals.
    """
    target, alg = run.target, run.method.algorithm
    if target.batched is not None:
        _execute_batched(run, buf, keeper, progress, injected, k_range)
        return
    n_rep = buf.state.shape[0]
    lanes = few = False
    k_start, k_stop = (0, run.schedule.n_steps) if k_range is None else k_range
    d = target.dim
    consts = alg.constants_for(run.options)
    cached = None
    if run.interacting:
        parallel = (run.n_particles or 0) >= PARALLEL_PARTICLES and n_threads > 1 and alg.parallel_step is not None
        parallel = parallel and _parallel_allowed()
        step = alg.parallel_step if parallel else alg.step
        # a step that takes the log density runs the loop compiled in memory, the density an argument
        cached = None
        if not alg.potential:
            cached = cached_ensemble_loop(step, target.grad_u, target.stochastic_grad_u, type(consts))
        loop = ensemble_loop(step, alg.potential) if cached is None else cached
        workers = 1 if parallel else min(n_threads, n_rep)
    else:
        parallel = False
        move, update = alg.step if isinstance(alg.step, tuple) else (None, alg.step)
        # from numba's disk cache where the gradient can be compiled in (a second process then
        # starts sampling at once), else compiled in memory with the gradient as an argument
        kept_row = alg.kept_row
        philox = run.stream == "philox"
        workers = min(n_threads, n_rep) if n_rep * (k_stop - k_start) >= THREAD_MIN_WORK else 1
        lanes = _use_lanes(run)
        lane = lane_form(target.grad_u_block) if lanes else None
        few = lane is not None and -(-n_rep // _n_chunks(workers, n_rep)) < FEW_CHAINS
        if few and lane is not None:
            # a chain at a time with the block gradient's one-point form: the lane loop's bits
            fn, sizes = lane[0], (lane[1](target.params), d, buf.state.shape[1])
            cached = cached_chain_loop(move or stay, update, None, None, kept_row, type(consts), True, fn, *sizes)
            loop = chain_loop(move, update, kept_row, True, fn, *sizes) if cached is None else cached
        elif lanes:
            shape = (d, buf.state.shape[1])
            cached = cached_lane_loop(move or stay, update, target.grad_u_block, kept_row, type(consts), *shape)
            loop = lane_loop(move or stay, update, kept_row, *shape) if cached is None else cached
        else:
            cached = cached_chain_loop(
                move or stay, update, target.grad_u, target.stochastic_grad_u, kept_row, type(consts), philox
            )
            loop = chain_loop(move, update, kept_row, philox) if cached is None else cached
    # the in-memory loops take the gradients as arguments; the cached ones have them compiled in
    if cached is not None or few:
        gradients: tuple = (None, None)
    elif not run.interacting and lanes:
        gradients = (target.grad_u, target.grad_u_block)
    else:
        gradients = (target.grad_u, target.stochastic_grad_u)
    n_chunks = _n_chunks(workers, n_rep)
    bounds = np.linspace(0, n_rep, n_chunks + 1).astype(int)
    chunks = [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]
    pair_shape = tuple(int(v) for v in alg.pair_shape(run.n_particles or 1, run.options)) if run.interacting else (0, 0)
    bound = run.kernel_bound()
    per_replica = run.n_particles if run.interacting else 1
    energies = (target.log_density_fn,) if alg.potential else ()
    no_inj = np.zeros((n_rep, 0) + run.member_shape)
    # this thread is one of the workers (see below): the pool holds the others
    pool = _thread_pool(workers - 1) if workers > 1 else None
    # a few replicas get longer blocks, so that the per-block work dwarfs the per-block overhead:
    # on threads much longer, for each block ends in a barrier that costs every thread a wake-up
    # (on a machine of few cores, as long as the block itself); the per-step arrays of a block
    # stay below some MB whatever d
    rate_key = (loop, tuple(getattr(p, "shape", type(p)) for p in target.params))
    rate = _RATES.get(rate_key)
    cap = _block_cap(n_rep, workers, d)
    first = 1 if rate is None else int(min(cap, _BLOCK_SECONDS * workers / max(rate * n_rep, 1e-300)))
    blocks = _Blocks(k_start, k_stop, cap, first)

    def took(steps, seconds):
        blocks.took(steps, seconds)
        if len(_RATES) >= 256:  # a bound on what a long sweep over many sizes keeps
            _RATES.clear()
        _RATES[rate_key] = seconds * workers / (steps * n_rep)

    def inputs(bounds):
        # the block's per-step values, shared by every replica
        if bounds is None:
            return None
        k0, k1 = bounds
        block = run.schedule.block(k0, k1)
        inj = no_inj if injected is None else injected[:, k0 - k_start : k1 - k_start]
        return k0, k1, np.ascontiguousarray(block.step_size), run.noise(block), keeper.store(block), inj

    def advance(c0, c1, k0, alpha, noise, store, inj):
        # running moments are kept per chain, or per particle of each ensemble
        m0, m1 = c0 * per_replica, c1 * per_replica
        args = (
            buf.state[c0:c1], buf.rngs[c0:c1], buf.works[c0:c1], buf.failed[c0:c1],
            *gradients, target.params, alpha, consts, noise, k0, bound, store,
            buf.out[c0:c1], buf.count[m0:m1], buf.mean[m0:m1], buf.m2[m0:m1], inj[c0:c1],
        )  # fmt: skip
        if run.interacting:
            loop(*args, buf.stats_out[c0:c1], buf.stats_now[c0:c1], pair_shape, *energies)
        else:
            loop(*args)

    def advance_queued(queue, k0, alpha, noise, store, inj):
        # the chunks of a block left in the queue, one at a time, until none is (popleft is atomic)
        while True:
            try:
                c0, c1 = queue.popleft()
            except IndexError:
                return
            advance(c0, c1, k0, alpha, noise, store, inj)

    futures: list = []
    queue: deque = deque()
    try:
        with _numba_threads(n_threads if parallel else numba.get_num_threads()), _blas_threads(alg.serial_blas):
            ahead = inputs(blocks.next())
            if pool is not None and ahead is not None:
                # compiled here, on no replica, before the threads start: a loop compiled on a worker
                # thread while this thread holds the import lock (a sampler run as a module is
                # imported) waits for that lock to save numba's cache index, and this thread for it
                advance(0, 0, *ahead[:1], *ahead[2:])
            while ahead is not None:
                k0, k1, alpha, noise, store, inj = ahead
                t0 = time.perf_counter()
                if pool is None:
                    for c0, c1 in chunks:
                        advance(c0, c1, k0, alpha, noise, store, inj)
                    took(k1 - k0, time.perf_counter() - t0)
                    ahead = inputs(blocks.next())
                else:
                    # this thread is one of the workers: it and workers - 1 of the pool take the
                    # block's chunks from one queue. With a thread more than workers (this one
                    # preparing the next block while the pool ran), the scheduler now and then woke
                    # two workers onto one processor for a whole block: 4 chains on 2 threads ran at
                    # 60 or at 110 ns a chain-step, by chance
                    queue = deque(chunks)
                    task = (queue, k0, alpha, noise, store, inj)
                    futures = [pool.submit(advance_queued, *task) for _ in range(min(workers, len(chunks)) - 1)]
                    advance_queued(*task)
                    # the next block is prepared while the others finish this one
                    ahead = inputs(blocks.next())
                    for future in futures:
                        future.result()
                    futures = []
                    took(k1 - k0, time.perf_counter() - t0)
                if progress is not None:
                    progress.update((k1 - k0) * n_rep)
    finally:
        if parallel:
            _FORK["openmp_used"] = _FORK["openmp_used"] or _openmp_layer()
        # on an error or an interrupt: the chunks not started are dropped, those running finish
        queue.clear()
        for future in futures:
            future.cancel()
        wait(futures)


@jit
def _buffered_gradient(theta, params, out, rng, work):
    # an ensemble step's gradient of particle work[-1], computed for all particles beforehand
    row = params[0][work[work.shape[0] - 1]]
    for i in range(out.shape[0]):
        out[i] = row[i]


@jit
def _draw_batches(rngs, works, n_data, replace, batch):
    # each member's minibatch of the step, from its own stream (the first draws of its step)
    for c in range(batch.shape[0]):
        draw_batch(rngs[c], works[c], n_data, replace, batch[c])


def _gradients(fns, points: np.ndarray, batch: np.ndarray | None) -> np.ndarray:
    grads = fns.grad_u(points, batch)
    # the loops only read the gradients: a backend's read-only buffer is taken as it is
    if type(grads) is np.ndarray and grads.dtype == np.float64 and grads.flags.c_contiguous:
        return grads
    return np.ascontiguousarray(grads, dtype=np.float64)


def _execute_batched(run: Run, buf: _Buffers, keeper: _Keeper, progress, injected=None, k_range=None):
    """Advance every replica of a run on a target whose gradient takes all members at once.

    Each step is one call of the target's gradient for every chain (or particle) and one call
    of a compiled loop that applies the step to every member; the members draw their noise
    and minibatches from their own streams in the same order as in the compiled loops, so a
    member's bits depend neither on how many run nor on blocks.
    """
    target, alg = run.target, run.method.algorithm
    fns = target.batched
    assert fns is not None
    n_rep = buf.state.shape[0]
    k_start, k_stop = (0, run.schedule.n_steps) if k_range is None else k_range
    d = target.dim
    consts = alg.constants_for(run.options)
    bound = run.kernel_bound()
    n = fns.batch_size
    block_steps = max(1, min(_BLOCK_STEPS, (1 << 22) // max(1, d * n_rep)))
    starts = list(range(k_start, k_stop, block_steps))
    ends = [*starts[1:], k_stop]

    def inputs(i):
        if i >= len(starts):
            return None
        k0, k1 = starts[i], ends[i]
        block = run.schedule.block(k0, k1)
        inj = None if injected is None else np.ascontiguousarray(injected[:, k0 - k_start : k1 - k_start])
        return k0, k1, np.ascontiguousarray(block.step_size), run.noise(block), keeper.store(block), inj

    if run.interacting:
        _execute_batched_ensembles(run, buf, inputs, len(starts), progress, consts, bound)
        return
    move, update = alg.step if isinstance(alg.step, tuple) else (None, alg.step)
    philox = run.stream == "philox"
    step = cached_vector_step(move or stay, update, alg.kept_row, type(consts), philox) or vector_step(
        move or stay, update, alg.kept_row, philox
    )
    points = np.empty((n_rep, d))
    batch = np.zeros((n_rep, n), np.int64)
    no_inj = np.zeros((n_rep, 0, d))
    # read by no chain before the first update; as read-only as the backend's own, so that the
    # loop is compiled for one kind of array
    grads = np.zeros((n_rep, d))
    probe = _gradients(fns, np.zeros((1, d)), None)
    grads.flags.writeable = probe.flags.writeable
    head = (buf.state, buf.rngs, buf.works, buf.failed)
    ahead = inputs(0)
    if ahead is None:
        return
    k0, _, alpha, noise, store, inj = ahead
    # the first step's move and minibatch
    step(*head, grads, points, batch, fns.n_data, fns.replace, alpha, consts, noise, k0, 0, alpha[0], bound,
         store, buf.out, buf.count, buf.mean, buf.m2, no_inj, False, True)  # fmt: skip
    n_data, replace, out, count, mean, m2 = fns.n_data, fns.replace, buf.out, buf.count, buf.mean, buf.m2
    state, rngs, works, failed = head
    minibatch = batch if n else None
    for i in range(len(starts)):
        k0, k1, alpha, noise, store, inj = ahead
        ahead = inputs(i + 1)
        inj = no_inj if inj is None else inj
        nb = alpha.shape[0]
        # the step size of each step's move: the next step's, the next block's first at the end
        a_next = np.empty(nb)
        a_next[:-1] = alpha[1:]
        a_next[-1] = ahead[2][0] if ahead is not None else 0.0
        last_move = ahead is not None
        for j in range(nb):
            grads = _gradients(fns, points, minibatch)
            step(state, rngs, works, failed, grads, points, batch, n_data, replace, alpha, consts, noise, k0, j,
                 a_next[j], bound, store, out, count, mean, m2, inj, True, j < nb - 1 or last_move)  # fmt: skip
        if progress is not None:
            progress.update((k1 - k0) * n_rep)


def _execute_batched_ensembles(run: Run, buf: _Buffers, inputs, n_blocks: int, progress, consts, bound):
    # the ensemble's own compiled step, one step per call, its gradient read from the values
    # computed for every particle of every ensemble in one call just before
    target, alg = run.target, run.method.algorithm
    fns = target.batched
    assert fns is not None
    n_rep = buf.state.shape[0]
    L, d = run.member_shape
    n = fns.batch_size
    cached = cached_ensemble_loop(alg.step, None, _buffered_gradient, type(consts))  # type: ignore[arg-type]
    loop = ensemble_loop(alg.step) if cached is None else cached
    gradients = (None, _buffered_gradient) if cached is None else (None, None)
    pair_shape = tuple(int(v) for v in alg.pair_shape(L, run.options))
    w = buf.works.shape[-1]
    # each particle's work row gets one more slot: its row in the gradients' buffer
    works = np.empty((n_rep, L, w + 1), np.int64)
    works[..., :w] = buf.works
    works[..., w] = np.arange(n_rep * L).reshape(n_rep, L)
    flat_rngs = buf.rngs.reshape(n_rep * L, -1)
    flat_works = works.reshape(n_rep * L, w + 1)
    batch = np.zeros((n_rep * L, n), np.int64)
    no_inj = np.zeros((n_rep, 0, L, d))
    for i in range(n_blocks):
        k0, k1, alpha, noise, store, inj = inputs(i)
        nb = alpha.shape[0]
        for j in range(nb):
            live = buf.failed < 0
            if not live.any():
                break
            if n:
                _draw_batches(flat_rngs, flat_works, fns.n_data, fns.replace, batch)
            grads = _gradients(fns, buf.state[:, 0].reshape(n_rep * L, d), batch if n else None)
            sl = slice(j, j + 1)
            sd, basis_rows, rotate, noisy, temperature = noise
            one_noise = (sd[sl], basis_rows, rotate, noisy[sl], temperature[sl])
            step_inj = no_inj if inj is None else np.ascontiguousarray(inj[:, sl])
            loop(buf.state, buf.rngs, works, buf.failed, *gradients, (grads,), alpha[sl], consts, one_noise, k0 + j,
                 bound, store[sl], buf.out, buf.count, buf.mean, buf.m2, step_inj, buf.stats_out, buf.stats_now,
                 pair_shape)  # fmt: skip
        if progress is not None:
            progress.update((k1 - k0) * n_rep)
    buf.works[...] = works[..., :w]


def execute(run: Run, buf: _Buffers, keeper: _Keeper, n_threads: int, progress, backend="cpu", executor=None,
            seed=None, precision="float64"):  # fmt: skip
    """Advance every replica of ``run`` over its schedule in place, on the CPU or on the GPU path.

    The two drivers take the same run record, host buffers (``_allocate``) and storage index
    (``_Keeper``): ``backend="cpu"`` runs the compiled loops on ``n_threads`` threads;
    ``"gpu"`` and ``"gpu-host"`` hand the run to ``sgsim.gpu.runner.execute`` with
    ``executor``, ``seed`` and ``precision``, and return the device's name (None on the CPU).
    """
    if backend == "cpu":
        _execute(run, buf, keeper, n_threads, progress)
        return None
    from .gpu import runner

    return runner.execute(run, buf, keeper, seed, precision, executor, progress)


# Bytes each kept draw costs whatever the number of chains: its step size, temperature, stage,
# cycle (int64) and step in sample_stats and its step's index (41), and the result's draw coordinate
# and index with their transient copies (measured: 16 kept, 48 at the peak)
_DRAW_RECORD_BYTES = 8 + 8 + 1 + 8 + 8 + 8 + 48


def _memory_parts(run: Run, n_chains: int, n_threads: int, log_density: bool = False) -> dict[str, float]:
    """The bytes a run would hold at its peak, by part: see :func:`_check_memory`."""
    alg = run.method.algorithm
    member = float(np.prod(run.member_shape))
    per_replica = float(run.n_particles or 1) if run.interacting else 1.0
    kept = run.n_draws if run.storage == "draws" else 0
    listed = 0 if run.storage == "moments" else run.n_draws
    d = run.target.dim
    parts = {
        # the kept values, and for log_density their masked copy and the densities
        "draws": 8.0 * n_chains * kept * member * (2 if log_density else 1)
        + (9.0 * n_chains * kept * per_replica if log_density else 0.0),
        # per draw: the record of its step; per chain and draw: the ensembles' statistics, the
        # divergence marks
        "sample_stats": _DRAW_RECORD_BYTES * float(listed)
        + 8.0 * n_chains * kept * len(alg.stats)
        + float(n_chains) * listed,
        # the count, mean and sum of squares (and the covariance made of it) per chain or particle
        "moments": (8.0 + 8.0 * d + 16.0 * d * d) * n_chains * per_replica if run.storage == "moments" else 0.0,
        # the initial, stacked and final states and the result's copy of the final one; each
        # replica's streams (the initial points' and the run's) and workspaces; its failing step
        "per-chain buffers": 8.0 * n_chains * member * (2 * len(alg.state) + 2)
        + 8.0 * n_chains * per_replica * (2 * _rng.STATE_WORDS + run.target.workspace.size)
        + 16.0 * n_chains,
    }
    # the blocks' per-step inputs, shared by the replicas (an ensemble's threads, at most)
    cap = _block_cap(n_chains, min(n_threads, n_chains), d)
    parts["block inputs"] = float(_BLOCK_INPUT_BYTES * min(run.schedule.n_steps, cap))
    if run.interacting:
        rows, cols = alg.pair_shape(run.n_particles or 1, run.options)
        # each thread's loop holds the pair buffer and a work buffer of its size
        parts["pair terms"] = 16.0 * rows * cols * min(n_threads, n_chains)
    return parts


def _check_memory(run: Run, n_chains: int, n_threads: int, log_density: bool = False) -> None:
    """Refuse, before any allocation, a run whose buffers and result would not fit in memory.

    Counted (:func:`_memory_parts`): the kept draws (and their copy for ``log_density``), the
    per-draw statistics and coordinates, the running moments, each replica's state, streams
    and workspace, the blocks' per-step inputs, and the pair terms each thread of an ensemble
    holds per step; against 80% of the physical memory. The error names the parameter of the largest share (``thin`` for
    the draws, ``n_particles`` for the pair terms, ``n_chains`` otherwise) and the bytes of
    each part.
    """
    parts = _memory_parts(run, n_chains, n_threads, log_density)
    need = sum(parts.values())
    # the parameter of the largest share: the draws' number, the particles' or the chains'
    shares = {
        "thin": parts["draws"] + parts["sample_stats"],
        "n_particles": parts.get("pair terms", 0.0),
        "n_chains": parts["moments"] + parts["per-chain buffers"],
    }
    name = max(shares, key=shares.__getitem__)
    advice = {
        "thin": "keep fewer draws (thin, burn_in, n_steps) or fewer chains, or use storage='final' or 'moments'",
        "n_particles": "use fewer particles, or a method whose cost grows like L (sgld_repulsive_rb)",
        "n_chains": "run fewer chains at once (several calls with seeds of their own)"
        + (", or use storage='final'" if run.storage == "moments" else ""),
    }[name]
    shape = f"n_chains = {n_chains:,} {'ensemble' if run.interacting else 'chain'}{'s' if n_chains != 1 else ''}"
    if run.storage != "final":
        shape += f" x {run.n_draws:,} draws"
    shape += f" of {int(np.prod(run.member_shape)):,} values"
    what = f"{shape} ({', '.join(f'{k} {_gib(v)}' for k, v in parts.items() if v)})"
    fits_in_memory(name, need, what, advice)


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:,.1f} GiB" if n_bytes >= 2**28 else f"{n_bytes / 2**20:,.1f} MiB"


def _allocate(run: Run, n_rep: int, state0: list[np.ndarray], rngs: np.ndarray) -> _Buffers:
    member = run.member_shape
    alg = run.method.algorithm
    # row by row into one array (np.stack along axis 1 took 0.5 s at 10^7 chains, this 0.13 s)
    state = np.empty((n_rep, len(state0)) + member)
    for i, s in enumerate(state0):
        state[:, i] = s
    w = run.target.workspace
    lead = (n_rep, run.n_particles or 1) if run.interacting else (n_rep,)
    works = np.empty(lead + w.shape, np.int64)
    works[...] = w
    d = run.target.dim
    draws = run.n_draws if run.storage == "draws" else 0
    out = np.empty((n_rep, draws) + member)
    n_mom = n_rep * (run.n_particles or 1) if run.storage == "moments" else 0
    count = np.zeros(n_mom, np.int64)
    mean = np.zeros((n_mom, d))
    m2 = np.zeros((n_mom, d, d))
    stats_out = np.zeros((n_rep, draws, len(alg.stats)))
    stats_now = np.zeros((n_rep, len(alg.stats)))
    return _Buffers(state, rngs, works, np.full(n_rep, -1, np.int64), out, count, mean, m2, stats_out, stats_now)


def run_chain(run: Run, state, gen, out, k0=0, k1=None, injected=None, work=None) -> int:
    """Advance one independent chain in place over steps ``[k0, k1)``; return the failing step or -1.

    A thin layer over the compiled loop, for tests and for callers that drive one chain
    themselves. ``state`` is a tuple of the chain's state arrays (``(theta,)`` or ``(theta,
    velocity)``), updated in place; ``gen`` a PCG64 :class:`numpy.random.Generator`, advanced
    exactly as the chain's stream would be; ``out`` the ``(n_draws, d)`` array of kept draws
    (draw slots as in a whole run). ``injected`` (shape ``(n_steps, d)``) replaces the stream's
    standard normals; ``gen`` may then be None unless the target's gradient is stochastic (it
    draws its minibatches from the stream). ``work`` is the chain's copy of
    ``target.workspace``, updated in place (a fresh copy if omitted).
    """
    if run.interacting:
        raise ParameterTypeError("run", "run_chain runs independent chains only")
    k1 = run.schedule.n_steps if k1 is None else k1
    tgt = run.target
    work = tgt.new_workspace() if work is None else tgt.check_workspace(work)
    if gen is None and tgt.stochastic_grad_u is not None:
        raise ParameterTypeError(
            "gen", f"target {tgt.name!r} draws minibatches from the chain's generator: gen must be given"
        )
    d = tgt.dim
    inj = None
    if injected is not None:
        injected = np.ascontiguousarray(injected, dtype=np.float64)
        if injected.shape != (run.schedule.n_steps, d):
            raise ParameterError("injected", f"injected must have shape ({run.schedule.n_steps}, {d})")
        inj = injected[None]
    st = _rng.state_of(gen) if gen is not None else np.zeros(_rng.STATE_WORDS, np.uint64)
    buf = _allocate(run, 1, [np.asarray(s)[None] for s in state], st[None].copy())
    buf.works[0] = work
    if run.storage == "draws":
        buf.out = np.asarray(out)[None] if out is not None else buf.out
    keeper = _Keeper(run)
    # the storage slots of a partial range are those of a whole run
    if k0 > 0:
        keeper_k = 0
        while keeper_k < k0:
            kb = min(k0, keeper_k + _BLOCK_STEPS)
            keeper.store(run.schedule.block(keeper_k, kb))
            keeper_k = kb
    _execute(run, buf, keeper, 1, None, None if inj is None else inj[:, k0:k1], (int(k0), int(k1)))
    for i, s in enumerate(state):
        s[...] = buf.state[0, i]
    work[...] = buf.works[0]
    if gen is not None:
        _rng.set_state(gen, buf.rngs[0])
    return int(buf.failed[0])


def advance_probes(run: Run, state: np.ndarray, injected: np.ndarray, k: int) -> np.ndarray:
    """Step ``k`` (0-based) of the compiled loop, from each of the given states, with the given normals.

    For reading a step's map off its code (:func:`sgsim.algorithms.affine_steps`): ``state``
    has shape ``(n_probes, n_state, d)``, ``injected`` ``(n_probes, d)`` standard normals used in
    place of the streams'; returns the states after the step (a probe that diverged holds NaN).
    Independent chains on a target with an exact gradient only.
    """
    n_probes = state.shape[0]
    st = np.zeros((n_probes, _rng.STATE_WORDS), np.uint64)
    buf = _allocate(run, n_probes, [state[:, i] for i in range(state.shape[1])], st)
    _execute(run, buf, _Keeper(run), 1, None, np.ascontiguousarray(injected[:, None]), (int(k), int(k) + 1))
    out = buf.state.copy()
    out[buf.failed >= 0] = np.nan
    return out

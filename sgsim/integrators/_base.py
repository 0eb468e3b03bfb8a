"""What every integrator module provides, and the registry of methods by name.

An integrator module defines one :class:`Algorithm` (its state, options, compiled step and
noise) and the :class:`Method` presets that pair it with a default schedule; cyclical
variants are presets of the same algorithm. Adding an integrator is one module, one
``register`` line in :mod:`sgsim.integrators`, one oracle in ``tests/reference.py`` and one
test file.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .. import schedules
from .._validate import ParameterError, ParameterTypeError, boolean, real
from ..schedules import Schedule
from ._splice import check_spliceable, function_def

__all__ = [
    "Option",
    "Algorithm",
    "Method",
    "register",
    "unregister",
    "get_method",
    "ORIGINS",
    "METHODS",
    "INDEPENDENT",
    "INTERACTING",
    "constant_schedule",
    "cyclical_schedule",
    "CONSTANT_OPTIONS",
    "CYCLICAL_OPTIONS",
    "StepSizeWarning",
    "curvature_limit",
]

INDEPENDENT = "independent"
INTERACTING = "interacting"


@dataclass(frozen=True)
class Option:
    """One option of an algorithm: its default, its check, and what it means.

    ``check(name, value)`` returns the value converted to its canonical type, or raises a
    ``ParameterError`` / ``ParameterTypeError`` naming ``name``.
    """

    default: Any
    check: Callable[[str, Any], Any]
    doc: str

    def __post_init__(self):
        if not callable(self.check):
            raise TypeError(
                f"Option.check must be a function check(name, value) that validates and returns the value, "
                f"got {self.check!r}: every option needs its validation"
            )
        if not isinstance(self.doc, str) or not self.doc.strip():
            raise TypeError("Option.doc must say what the option means, in a few words (it is the CLI flag's help)")


@dataclass(frozen=True)
class Algorithm:
    """One family of dynamics, independent of its schedule.

    Attributes
    ----------
    name : str
        Short name (``"sgld"``).
    summary : str
        One line for listings.
    coupling : str
        ``"independent"`` (each replica is one chain) or ``"interacting"`` (each replica is an
        ensemble of particles that step together).
    state : tuple of str
        Names of the state arrays, ``theta`` first (``("theta", "velocity")`` for SGHMC).
        Each is a ``(d,)`` vector per chain or an ``(L, d)`` array per ensemble.
    options : dict of str to Option
        The dynamics' options with their defaults.
    units : str
        The step-size convention, in words.
    step : compiled function or tuple
        The step (see ``sgsim.integrators._loop`` for the signatures): for independent
        chains the pair ``(move, update)`` around the gradient, for ensembles one function.
    constants : callable
        ``constants(options) -> NamedTuple``: the numbers the step reads from ``consts``, by
        name (``consts.keep``); a ``typing.NamedTuple`` class defined at module level, so
        that the compiled loop can be cached on disk. ``NO_CONSTANTS`` when there are none.
    noise : callable
        ``noise(block, target, options) -> sgsim.dynamics.Noise or None``: the covariance of
        the step's Gaussian noise over a :class:`~sgsim.schedules.ScheduleBlock`.
    check : callable
        ``check(options, target) -> options``: checks that involve several options or the
        target; runs after each option's own check.
    init : callable, optional
        ``init(theta0, given, options) -> tuple of arrays``: the initial state, one array per
        name of ``state``, from the initial positions ``theta0`` (leading axes: replicas,
        and particles) and the initial values the caller gave for other state arrays
        (``given``, e.g. ``{"velocity": v0}``). When omitted, the other arrays start at their
        given value or at zero (:meth:`initial_state`).
    parallel_step : compiled function, optional
        Interacting algorithms: the same step with its particle loops on numba's threads.
    stats : tuple of str
        Per-step statistics the step writes (stored with each kept draw of an ensemble).
    outputs : tuple of str
        The state array kept as draws: ``("theta",)``, or another of ``state`` (IASG keeps
        its running average); every state array's final value is kept. Independent chains only.
    pair_shape : callable
        ``pair_shape(n_particles, options) -> (rows, cols)``: the shape of the buffer an
        ensemble step gets for pair terms (``(L, L)`` by default).
    serial_blas : bool
        The step calls LAPACK (through numba): BLAS is held to one thread during the run, since
        a threaded factorisation's bits depend on how many threads BLAS has.
    step_limit : callable, optional
        ``step_limit(target, options) -> (limit, rule) or None``: the step size from which the
        recursion is unstable on this target (read from
        :meth:`~sgsim.targets.Target.curvature_bound`; :func:`~sgsim.algorithms.curvature_limit`), with the rule in
        words; None where no limit is known. The run driver checks the schedule against it
        before any work: a run whose every step is beyond it is refused (a ParameterError naming
        ``step_size``), one whose steps cross it on at least half of the steps warns
        (:class:`~sgsim.algorithms.StepSizeWarning`), one that crosses it on fewer steps (a cyclical schedule's
        first steps of each cycle) runs, watched by the divergence check; ``step_check`` of
        :func:`sgsim.sample` overrides this.
    temperature_factor : callable, optional
        ``temperature_factor(options) -> float``: the largest factor by which a member's
        temperature exceeds the schedule's (reSGLD's hottest rung); the default divergence bound
        is the target's at the schedule's hottest temperature times this factor, so that a hot
        member's wider spread is not taken for a divergence. 1 when not given.
    report : callable, optional
        ``report(final_stats) -> str or None``: given each statistic's final value per
        replica (a dict of arrays), a warning for the caller, or None.
    oracle : callable, optional
        The step in plain NumPy, ``oracle(x, grad_u, z, a, k, options) -> x_new``: the state
        ``x`` (shape ``(n_state, d)``), the target's gradient as a function of ``theta``, the
        step's noise ``z`` in the state's coordinates (None on a step without noise), the step
        size, the step's index and the validated options (and, last, the step's temperature ``t``
        for an update that reads it). The conformance kit checks that the
        compiled step equals it given the same normals. Independent chains only.
    asymptotically_exact : bool
        Its stationary law tends to ``exp(-U / T)`` as the step size goes to 0 (SGLD, SGHMC;
        not constant SGD, whose stationary law is the point of its study). The conformance kit
        (:mod:`sgsim.testing`) then checks it on a linear-Gaussian target, where a wrong noise
        scale shows at any step size.
    references : str
        Where the update comes from.
    gradient : callable, optional
        ``gradient(target, options) -> Target``: the target whose ``stochastic_grad_u`` the
        step takes, built from the given one and the validated options (a gradient estimator
        of its own: SGLD-CV's control variate, SVRG's snapshots; :mod:`sgsim.integrators.sgld_cv`).
        Called once per run, after ``check``. Results record the given target (a replay
        rebuilds it, and the estimator again from the recorded options). When omitted, the
        step takes the target's own gradient.
    potential : bool
        Interacting algorithms: the step takes one more parameter after ``stats``,
        ``log_density``, the target's compiled ``log_density_fn(theta, params) -> float``
        (``U = -log density`` up to a constant), for steps that need energies (replica exchange's
        swaps). A target without a compiled log density is refused before any work.
    """

    name: str
    summary: str
    coupling: str
    state: tuple[str, ...]
    options: dict[str, Option]
    units: str
    step: Callable | tuple
    constants: Callable[[dict], tuple]
    noise: Callable[..., Any]
    check: Callable[[dict, Any], dict] = field(default=lambda options, target: options)
    init: Callable[..., tuple] | None = None
    parallel_step: Callable | None = None
    stats: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ("theta",)
    pair_shape: Callable[[int, dict], tuple[int, int]] = field(
        default=lambda n_particles, options: (n_particles, n_particles)
    )
    serial_blas: bool = False
    step_limit: Callable[[Any, dict], tuple[float, str] | None] | None = None
    temperature_factor: Callable[[dict], float] | None = None
    report: Callable[[dict], str | None] | None = None
    oracle: Callable[..., np.ndarray] | None = None
    asymptotically_exact: bool = False
    references: str = ""
    gradient: Callable[[Any, dict], Any] | None = None
    potential: bool = False

    def __post_init__(self):
        _check_algorithm(self)

    def constants_for(self, options: dict) -> tuple:
        """The step's constants for ``options``: the named tuple ``constants`` returns, checked."""
        consts = self.constants(options)
        if not (isinstance(consts, tuple) and hasattr(consts, "_fields")):
            raise TypeError(
                f"algorithm {self.name!r}: constants(options) must return a typing.NamedTuple (the step reads "
                f"each constant by name), got {type(consts).__name__}"
            )
        return consts

    @property
    def kept_row(self) -> int:
        """Index in ``state`` of the array kept as draws (``outputs[0]``)."""
        return self.state.index(self.outputs[0])

    def initial_state(self, theta0: np.ndarray, given: dict, options: dict) -> tuple:
        """The initial state arrays (see ``init``)."""
        if self.init is not None:
            return tuple(self.init(theta0, given, options))
        rest = [given[n] if given.get(n) is not None else np.zeros_like(theta0) for n in self.state[1:]]
        return (theta0, *rest)

    def validate(self, given: dict, target, **common) -> dict:
        """Check ``given`` options, fill in defaults, add the sampler's ``common`` options
        (``noise_correction``), then run ``check``.
        """
        out = {}
        for name, opt in self.options.items():
            # a default goes through its check too, so that the step sees one canonical type; a
            # default of None whose check refuses None makes the option required
            if name in given or opt.default is not None:
                out[name] = opt.check(name, given[name] if name in given else opt.default)
                continue
            try:
                out[name] = opt.check(name, None)
            except (ValueError, TypeError):
                raise ParameterTypeError(name, f"{self.name} needs the option {name!r}: {opt.doc}") from None
        out.update(common)
        return self.check(out, target)


class NoConstants(NamedTuple):
    """The constants of a step that needs none (numba compiles an empty tuple poorly)."""

    unused: float = 0.0


#: ``constants`` of an algorithm whose step reads no constant
NO_CONSTANTS = NoConstants()

# the parameters of each kind of step, in order (see sgsim.integrators._loop)
MOVE_PARAMS = ("x", "theta", "a", "consts")
UPDATE_PARAMS = ("x", "theta", "g", "z", "noisy", "a", "k", "consts")
# the update that reads the step's temperature ``t`` (a thermostat's set point, a drift scaled by T)
UPDATE_T_PARAMS = ("x", "theta", "g", "z", "noisy", "a", "t", "k", "consts")
ENSEMBLE_PARAMS = (
    "X", "G", "B", "P", "W", "j", "alpha", "consts", "noise", "grad_u", "stochastic_grad_u", "params", "works",
    "rngs", "inj", "stats",
)  # fmt: skip
# an ensemble step that asks for the target's energies (``Algorithm.potential``) takes its log density last
ENSEMBLE_POTENTIAL_PARAMS = (*ENSEMBLE_PARAMS, "log_density")
# names sample() and the schedules take themselves: an option of that name could never reach the step
RESERVED_OPTIONS = frozenset(
    {
        "target", "method", "n_steps", "n_chains", "n_particles", "seed", "init", "init_velocity", "burn_in", "thin",
        "storage", "schedule", "noise_correction", "on_divergence", "divergence_bound", "log_density", "n_threads",
        "progress", "backend", "precision", "step_size", "temperature", "n_cycles", "explore_fraction",
        "skip_per_cycle", "step_check",
    }
)  # fmt: skip
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _bad(alg_name: str, part: str, message: str) -> TypeError:
    return TypeError(f"algorithm {alg_name!r}: {part}: {message}")


def _source_of(alg_name: str, part: str, func) -> ast.FunctionDef:
    """The AST of a step function, or a TypeError saying why its source cannot be read."""
    py = getattr(func, "py_func", func)
    if not callable(py) or not hasattr(py, "__code__"):
        raise _bad(alg_name, part, f"must be a plain Python function (compiled with numba or not), got {func!r}")
    try:
        node, _ = function_def(py)
    except (OSError, TypeError, SyntaxError, IndentationError) as exc:
        raise _bad(
            alg_name,
            part,
            f"the source of {py.__qualname__} cannot be read ({exc}). sgsim writes a chain step's source into its "
            "compiled loop, so define the step in a file or a notebook cell (not in `python -`, exec or eval) "
            "as a plain function",
        ) from None
    return node


def _check_params(alg_name: str, part: str, node: ast.FunctionDef, expected: tuple[str, ...]) -> None:
    args = node.args
    got = tuple(a.arg for a in args.args)
    extra = args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults
    if len(got) != len(expected) or extra:
        raise _bad(
            alg_name,
            part,
            f"{node.name} must take exactly {len(expected)} positional parameters {expected} "
            f"(any names, in this order and meaning), got {got}",
        )


def _check_algorithm(alg: Algorithm) -> None:
    """Everything about a record that can be checked without a target (see :class:`Algorithm`)."""
    name = alg.name
    if not isinstance(name, str) or not _NAME.match(name):
        raise TypeError(f"Algorithm.name must be lower case letters, digits and '_' (a letter first), got {name!r}")
    if alg.coupling not in (INDEPENDENT, INTERACTING):
        raise _bad(name, "coupling", f"must be {INDEPENDENT!r} or {INTERACTING!r}, got {alg.coupling!r}")
    state = alg.state
    if not isinstance(state, tuple) or not state or state[0] != "theta":
        raise _bad(name, "state", f"must be a tuple of names starting with 'theta', got {state!r}")
    if len(set(state)) != len(state) or not all(isinstance(s, str) and s.isidentifier() for s in state):
        raise _bad(name, "state", f"names must be distinct identifiers, got {state!r}")
    if not isinstance(alg.options, dict):
        raise _bad(name, "options", f"must be a dict of option name -> Option, got {type(alg.options).__name__}")
    for key, opt in alg.options.items():
        if not isinstance(opt, Option):
            raise _bad(name, f"option {key!r}", f"must be an sgsim.algorithms.Option(default, check, doc), got {opt!r}")
        if not isinstance(key, str) or not _NAME.match(key):
            raise _bad(name, f"option {key!r}", "names are lower case letters, digits and '_'")
        if key in RESERVED_OPTIONS:
            raise _bad(name, f"option {key!r}", "is a name sample() or the schedules take themselves; choose another")
        if opt.default is not None:
            try:
                opt.check(key, opt.default)
            except (ValueError, TypeError) as exc:
                raise _bad(name, f"option {key!r}", f"its default {opt.default!r} fails its own check: {exc}") from None
    if not isinstance(alg.units, str) or not alg.units.strip():
        raise _bad(name, "units", "say the step-size convention in words (drift and noise variance per step)")
    for part in ("constants", "noise", "check"):
        if not callable(getattr(alg, part)):
            raise _bad(name, part, f"must be callable, got {getattr(alg, part)!r}")
    if not (isinstance(alg.outputs, tuple) and len(alg.outputs) == 1 and alg.outputs[0] in state):
        raise _bad(name, "outputs", f"must name one state array of {state}, got {alg.outputs!r}")
    for part in ("step_limit", "temperature_factor"):
        if getattr(alg, part) is not None and not callable(getattr(alg, part)):
            raise _bad(name, part, f"must be callable or None, got {getattr(alg, part)!r}")
    if alg.gradient is not None and not callable(alg.gradient):
        raise _bad(name, "gradient", f"must be a function gradient(target, options) -> Target, got {alg.gradient!r}")
    if not isinstance(alg.potential, bool):
        raise _bad(name, "potential", f"must be a bool, got {alg.potential!r}")
    if alg.potential and alg.coupling != INTERACTING:
        raise _bad(name, "potential", "only an interacting ensemble's step takes the target's log density")
    if alg.coupling == INDEPENDENT:
        if not (isinstance(alg.step, tuple) and len(alg.step) == 2):
            raise _bad(name, "step", "chains take the pair (move, update); `stay` is the move that does nothing")
        move, update = alg.step
        node = _source_of(name, "step (move)", move)
        _check_params(name, "step (move)", node, MOVE_PARAMS)
        _check_splice(name, "step (move)", node)
        node = _source_of(name, "step (update)", update)
        n_params = len(node.args.args)
        _check_params(name, "step (update)", node, UPDATE_T_PARAMS if n_params == 9 else UPDATE_PARAMS)
        _check_splice(name, "step (update)", node)
        z = node.args.args[3].arg
        if not any(isinstance(n, ast.Name) and n.id == z for n in ast.walk(node)):
            raise _bad(
                name,
                "step (update)",
                f"{node.name} never reads its noise {z!r}: the noise the record declares would be drawn and thrown "
                "away (declare noise=lambda block, target, options: None for a noise-free step)",
            )
    else:
        if isinstance(alg.step, tuple):
            raise _bad(name, "step", "an interacting ensemble takes one step function, not a pair")
        for part in ("step", "parallel_step"):
            func = getattr(alg, part)
            if func is None and part == "parallel_step":
                continue
            node = _source_of(name, part, func)
            _check_params(name, part, node, ENSEMBLE_POTENTIAL_PARAMS if alg.potential else ENSEMBLE_PARAMS)
    for key in alg.stats:
        if not isinstance(key, str) or not key.isidentifier():
            raise _bad(name, "stats", f"names must be identifiers, got {alg.stats!r}")


def _check_splice(alg_name: str, part: str, node: ast.FunctionDef) -> None:
    try:
        check_spliceable(node)
    except TypeError as exc:
        raise _bad(alg_name, part, f"{exc} (a step half is copied into the loop: plain statements only)") from None


@dataclass(frozen=True)
class Method:
    """A name given to :func:`sgsim.sample`: an algorithm with its default schedule.

    Attributes
    ----------
    name : str
        The method's name (``"csgld"``).
    algorithm : Algorithm
        The dynamics.
    schedule : callable
        ``schedule(n_steps, **schedule_options) -> Schedule``, used when the caller gives no
        explicit schedule.
    schedule_options : tuple of str
        The options ``schedule`` takes.
    summary : str
        One line for listings.
    references : str
        Where the method comes from.
    example : dict
        Options for a small run (``step_size`` and whatever the method requires), and
        optionally ``"target"``: a target's name, or a function of no arguments that builds
        one. The conformance kit, ``sgsim run``'s tests and the docs use it; by default
        ``{"step_size": 0.05}`` on the kit's linear-Gaussian target.
    """

    name: str
    algorithm: Algorithm
    schedule: Callable[..., Schedule]
    schedule_options: tuple[str, ...]
    summary: str
    references: str = ""
    example: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise TypeError(
                f"Method.name must be lower case letters, digits and '_' (a letter first), got {self.name!r}"
            )
        if not isinstance(self.algorithm, Algorithm):
            raise TypeError(f"method {self.name!r}: algorithm must be an sgsim.algorithms.Algorithm")
        if not callable(self.schedule):
            raise TypeError(f"method {self.name!r}: schedule must be a function schedule(n_steps, **options)")
        params = inspect.signature(self.schedule).parameters
        missing = [o for o in self.schedule_options if o not in params]
        if missing or "step_size" not in self.schedule_options:
            raise TypeError(
                f"method {self.name!r}: schedule_options {self.schedule_options} must include 'step_size' and name "
                f"parameters of its schedule function {tuple(params)}"
            )
        unknown = set(self.example) - {"target"} - set(self.schedule_options) - set(self.algorithm.options)
        if unknown:
            raise TypeError(f"method {self.name!r}: example names options the method does not take: {sorted(unknown)}")

    @property
    def state_names(self) -> tuple[str, ...]:
        """The algorithm's state arrays."""
        return self.algorithm.state

    @property
    def dynamics_options(self) -> dict:
        """The algorithm's options with their defaults."""
        return {k: o.default for k, o in self.algorithm.options.items()}


METHODS: dict[str, Method] = {}
#: method name -> the module whose import registers it (recorded in results, for replay)
ORIGINS: dict[str, str] = {}


def register(method: Method, *, replace: bool = False, module: str | None = None) -> Method:
    """Add ``method`` to the registry under ``method.name``, and return it.

    Parameters
    ----------
    method : Method
        The method: an :class:`~sgsim.algorithms.Algorithm` with its default schedule.
    replace : bool
        Replace a method of the same name registered before (for a notebook cell run twice);
        otherwise a name already taken is an error.
    module : str, optional
        The module whose import registers the method: recorded in every result, so that
        :func:`sgsim.replay` can say what to import (and import it when allowed). Default: the
        module that calls ``register``.

    Raises
    ------
    TypeError
        If ``method`` is not a :class:`~sgsim.algorithms.Method`.
    ValueError
        If the name is taken and ``replace`` is False.
    """
    if not isinstance(method, Method):
        raise TypeError(f"register takes an sgsim.algorithms.Method, got {type(method).__name__}")
    if method.name in METHODS and not replace:
        raise ValueError(
            f"a method named {method.name!r} is already registered (by {ORIGINS.get(method.name)!r}); "
            "choose another name, or pass replace=True"
        )
    if module is None:
        module = sys._getframe(1).f_globals.get("__name__", "__main__")
    METHODS[method.name] = method
    ORIGINS[method.name] = str(module)
    return method


def unregister(name: str) -> Method:
    """Remove the method ``name`` from the registry and return it (built-in methods cannot be removed)."""
    method = get_method(name)
    if ORIGINS.get(method.name) == __name__.rsplit(".", 1)[0]:
        raise ValueError(f"{method.name!r} is one of sgsim's own methods and cannot be unregistered")
    del METHODS[method.name]
    ORIGINS.pop(method.name, None)
    return method


def get_method(name) -> Method:
    """The registered method ``name``, or a ParameterError listing the known ones."""
    if isinstance(name, Method):
        return name
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ParameterError(
            "method", f"unknown method {name!r}; known methods: {', '.join(sorted(METHODS))}"
        ) from None


# ----------------------------------------------------------------------------- shared pieces


def constant_schedule(n_steps, step_size, temperature=1.0) -> Schedule:
    """Default schedule of the non-cyclical methods: constant step size."""
    return schedules.constant(step_size, n_steps, temperature=temperature)


def cyclical_schedule(
    n_steps, step_size, n_cycles, explore_fraction=0.0, temperature=1.0, skip_per_cycle=0
) -> Schedule:
    """Default schedule of the cyclical methods ([cSG] eq. 2 and Algorithm 1)."""
    return schedules.cyclical(
        step_size,
        n_steps,
        n_cycles=n_cycles,
        explore_fraction=explore_fraction,
        temperature=temperature,
        skip_per_cycle=skip_per_cycle,
    )


CONSTANT_OPTIONS = ("step_size", "temperature")
CYCLICAL_OPTIONS = ("step_size", "n_cycles", "explore_fraction", "temperature", "skip_per_cycle")


def check_bool(name: str, value) -> bool:
    """Option check: a bool (``numpy.bool_`` accepted)."""
    return boolean(name, value)


def check_unit_interval(name: str, value) -> float:
    """Option check: a real number in (0, 1]."""
    return real(name, value, 0.0, 1.0, low_open=True)


def check_nonnegative(name: str, value) -> float:
    """Option check: a finite real number >= 0."""
    return real(name, value, 0.0)


def unknown_options(method: Method, given) -> None:
    """Raise a ParameterTypeError naming the first option ``method`` does not take."""
    known = sorted(set(method.schedule_options) | set(method.algorithm.options))
    bad = sorted(given)
    raise ParameterTypeError(bad[0], f"unknown option(s) for method {method.name!r}: {bad}; accepted: {known}")


def known_precision(target) -> np.ndarray | None:
    """The Hessian of ``U`` where the target is Gaussian and says so (``extras["precision"]``), else None."""
    return target.extras.get("precision") if target.extras else None


class StepSizeWarning(UserWarning):
    """A schedule whose steps cross the sampler's stability limit on this target on many of its steps."""


def curvature_limit(target, factor: float, rule: str) -> tuple[float, str] | None:
    """``(factor / L, rule)`` with ``L`` the target's :meth:`~sgsim.targets.Target.curvature_bound`, or None.

    For a ``step_limit`` whose recursion on ``U = L x^2 / 2`` is stable exactly while
    ``step_size * L < factor``; ``rule`` says it in words.
    """
    bound = target.curvature_bound()
    if bound is None or not bound > 0:
        return None
    return factor / bound, f"{rule}, with L = {bound:.6g} the target's curvature bound"


def refuse_emulated_noise(alg_name: str, target, why: str) -> None:
    """Raise a ParameterError naming ``target`` when it emulates gradient noise that ``alg_name`` cannot take."""
    v = target.grad_noise_cov
    if v is not None and np.any(v):
        raise ParameterError(
            "target",
            f"{alg_name} cannot take the emulated gradient noise of target {target.name!r} ({why}); give it a "
            "target with exact gradients or one that draws minibatches",
        )


def exact_kit_target():
    """The conformance kit's target without its emulated gradient noise, as a ``Method.example`` target
    for samplers that refuse emulated noise (a splitting's kicks, an adaptive preconditioner).
    """
    from ..testing import kit_target  # the kit sits above the integrators

    return kit_target(gradient_noise=False)

# ruff: noqa: E501  (the table of fuzzed functions reads best one function to a line group)
"""Fuzzing the schedules, the target constructors and the theory functions: refused by name, or finite.

Each public function is called with arguments drawn from a mix of plausible values and values
it must refuse. Every drawn value carries a flag, ``wrong``: a bool or a string where a number
is expected, a complex number, NaN or an infinity, a fraction where an integer is expected, a
number outside the documented range, a matrix of the wrong shape. The rules checked:

- a call with a wrong argument raises a ``ParameterError`` or ``ParameterTypeError`` (a
  ``ValueError`` or ``TypeError``) whose ``parameter`` names one of the call's arguments;
- a call with plausible arguments either raises such an error (an extreme but well-typed
  value may be refused: a step beyond the stability limit, a size beyond the memory) or
  returns finite numbers only, with no floating-point warning on the way.

Extreme but representable values (``1e-320``, ``1e308``, ``2**31 + 5``, ``2**62``) are drawn as
plausible: they must be handled or refused, never returned as ``inf`` or grown into a
memory error. The examples are derandomized (the same ones on every run). The number of
examples per function is ``FUZZ_EXAMPLES`` (environment variable, 12 by default, which keeps
the file near 10 s); ``FUZZ_EXAMPLES=400 pytest tests/test_fuzz_inputs.py`` explores more.
"""

from __future__ import annotations

import dataclasses
import math
import os
import warnings
from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from sgsim import schedules, targets
from sgsim._validate import ParameterError, ParameterTypeError
from sgsim.targets import Target
from sgsim.theory import (
    combination,
    convergence,
    cycle_weights,
    decaying,
    distances,
    exact_law,
    fokker_planck,
    gradient_noise,
    iasg,
    kl,
    minibatch_law,
    momentum,
    nonconvex,
    ou,
    stationary,
    tempering,
)

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
# failures are reported as drawn (the known ones below would otherwise be shrunk on every run);
# FUZZ_SHRINK=1 shrinks them to a minimal example
PHASES = tuple(Phase) if os.environ.get("FUZZ_SHRINK", "0") == "1" else (Phase.explicit, Phase.generate)
RUNS = {"calls": 0, "refused": 0}


# ----------------------------------------------------------------------------- argument strategies


def ok(strategy):
    """Values a function must handle (return finite numbers or refuse by name)."""
    return strategy.map(lambda v: (v, False))


def bad(strategy):
    """Values a function must refuse."""
    return strategy.map(lambda v: (v, True))


def mostly(valid, wrong):
    """About one argument in six wrong, so that whole calls are accepted often enough too."""
    return st.integers(0, 5).flatmap(lambda k: wrong if k == 0 else valid)


NOT_A_NUMBER = st.one_of(
    st.none(),
    st.booleans(),
    st.just(np.bool_(True)),
    st.sampled_from(["0.5", "1", "", "nan"]),
    st.complex_numbers(max_magnitude=10, allow_nan=False, allow_infinity=False),
    st.sampled_from([math.nan, math.inf, -math.inf]),
    st.lists(st.floats(-5, 5), min_size=1, max_size=3),
    st.just(object()),
)

# NOT_A_NUMBER less the lists, for an argument that may be an array
NOT_A_SCALAR = NOT_A_NUMBER.filter(lambda v: not isinstance(v, list))


def real(low=-1e3, high=1e3, *, low_open=False, high_open=False, extreme=True, optional=False, hard_high=None):
    """A real number in [low, high] (open ends if asked); wrong below it or not a number.

    Above ``high`` is wrong only where ``high`` is a documented limit (``hard_high``; by
    default where the interval is open there): elsewhere ``high`` only caps the plausible
    draws, and the function may take larger values (a temperature of 11, a window of 1001).
    """
    if hard_high is None:
        hard_high = high_open
    lo = math.nextafter(low, math.inf) if low_open else low
    hi = math.nextafter(high, -math.inf) if high_open else high
    plain = st.floats(max(lo, -1e3), min(hi, 1e3)) if max(lo, -1e3) <= min(hi, 1e3) else st.just(lo)
    ints = (math.ceil(max(lo, -50)), math.floor(min(hi, 50)))
    valid = st.one_of(plain, plain.map(np.float64), st.integers(*ints) if ints[0] <= ints[1] else st.nothing())
    edge = [v for v in (1e-320, 1e-300, 1e300, 1e308, -1e308, lo, hi) if lo <= v <= hi and math.isfinite(v)]
    if extreme and edge:
        valid = st.one_of(valid, st.sampled_from(edge))
    below = [low - 1, low - 1e-9 * max(1, abs(low)), *([low] if low_open else [])] if math.isfinite(low) else []
    above = [high + 1, *([high] if high_open else [])] if math.isfinite(high) and hard_high else []
    outside = [v for v in below + above if math.isfinite(v)]
    wrong = st.one_of(
        NOT_A_NUMBER.filter(lambda v: not (optional and v is None)), st.sampled_from(outside or [math.nan])
    )
    if optional:
        valid = st.one_of(valid, st.none())
    return mostly(ok(valid), bad(wrong))


def integer(low=0, high=50, *, huge=True, optional=False):
    """An int in [low, high]; the huge ones (``2**31 + 5``, ``2**62``) must be handled or refused."""
    valid = st.one_of(st.integers(low, high), st.integers(low, high).map(np.int64))
    if huge:
        valid = st.one_of(valid, st.sampled_from([2**31 + 5, 2**62]))
    if optional:
        valid = st.one_of(valid, st.none())
    wrong = st.one_of(
        NOT_A_NUMBER.filter(lambda v: not (optional and v is None)),
        st.sampled_from([low - 1, low + 0.5, -(2**63)]),
    )
    return mostly(ok(valid), bad(wrong))


def flag():
    return mostly(ok(st.booleans()), bad(st.one_of(st.sampled_from(["no", "yes", 0, 1, 1.0, None]), st.just([True]))))


def choice(*options):
    return mostly(ok(st.sampled_from(options)), bad(st.sampled_from(["nope", 1, None, True, ""])))


def fixed(value):
    return st.just((value, False))


SPD2 = [np.eye(2), np.diag([1.0, 3.0]), np.array([[2.0, 0.5], [0.5, 1.0]]), np.diag([1e-3, 1e3])]
BAD_MATRICES = [
    "1",
    [[True, False], [False, True]],
    [["1", "0"], ["0", "1"]],
    [[1.0, 2.0], [0.0, 1.0]],  # not symmetric
    [[-1.0, 0.0], [0.0, 1.0]],  # indefinite
    [[1.0, 0.0]],  # not square
    np.zeros((2, 0)),
    [[1.0, 0.0], [0.0]],  # ragged
    [[np.nan, 0.0], [0.0, 1.0]],
    [[1e308, 0.0], [0.0, 1e308]],
    [[1 + 1j, 0.0], [0.0, 1.0]],
]


HUGE = [[1e308, 0.0], [0.0, 1e308]]


def matrix(valid=SPD2, wrong=BAD_MATRICES, optional=False, huge=False):
    """A matrix of SPD2, or a wrong one; ``huge``: entries near 1.8e308 are valid (must be handled or refused)."""
    if huge:
        valid = [*valid, np.array(HUGE), np.diag([1e-308, 1e-308])]
        wrong = [w for w in wrong if not (isinstance(w, list) and w == HUGE)]
    v = st.sampled_from(valid)
    if optional:
        v = st.one_of(v, st.none())
    return mostly(ok(v), bad(st.sampled_from(wrong)))


FACTORS = [*SPD2, np.array([[1.0, 2.0], [0.0, 1.0]]), np.array([[-1.0, 0.0], [0.0, 1.0]]), np.zeros((2, 2))]


def factor():
    """A square factor ``E`` (of ``E E^T``): any real matrix of the shape, symmetric or not."""
    wrong = [
        w
        for w in BAD_MATRICES
        if not (isinstance(w, list) and w in ([[1.0, 2.0], [0.0, 1.0]], [[-1.0, 0.0], [0.0, 1.0]], HUGE))
    ]
    return mostly(ok(st.sampled_from([*FACTORS, np.array(HUGE)])), bad(st.sampled_from(wrong)))


def vector(dim=2, low=-10.0, high=10.0, optional=False, stacks=False):
    """A vector of ``dim`` numbers; a stack of vectors is wrong unless the function broadcasts (``stacks``)."""
    v = st.lists(st.floats(low, high), min_size=dim, max_size=dim)
    if stacks:
        v = st.one_of(v, st.just([[0.0] * dim] * 2), st.just([1e300] * dim))
    if optional:
        v = st.one_of(v, st.none())
    wrong = st.one_of(
        st.sampled_from(
            [["1", "2"][:dim], [math.nan] * dim, [0.0] * (dim + 1), *([] if stacks else [[[0.0] * dim] * 2]), True]
        ),
        NOT_A_NUMBER.filter(lambda x: not (optional and x is None) and not isinstance(x, list)),
    )
    return mostly(ok(v), bad(wrong))


def sequence(low=0.0, high=1.0, *, low_open=True, min_size=1, max_size=30):
    """A per-step sequence (or a scalar) of numbers in its range."""
    lo = math.nextafter(low, math.inf) if low_open else low
    seq = st.lists(st.floats(max(lo, 1e-6) if low_open else lo, high), min_size=min_size, max_size=max_size)
    valid = st.one_of(seq, st.floats(max(lo, 1e-6) if low_open else lo, high))
    wrong = st.one_of(
        NOT_A_NUMBER.filter(lambda v: v is not None and not isinstance(v, list)),
        st.sampled_from([[], ["0.5"], [True, True], [0.1, math.nan], [low - 1.0], [[0.1], [0.1, 0.2]]]),
    )
    return mostly(ok(valid), bad(wrong))


# ----------------------------------------------------------------------------- the checks


def _finite(value, where="result"):
    """Assert that every number in ``value`` (arrays, records, containers) is finite."""
    if (
        value is None
        or isinstance(value, (str, bool, np.bool_, int, np.integer, Callable))
        and not isinstance(value, (np.ndarray, Target))
    ):
        return
    if isinstance(value, Target):
        for p in (*value.params, value.grad_noise_cov, value.init_low, value.init_high, value.mean):
            if isinstance(p, np.ndarray | float):
                _finite(p, f"{where}.params")
        assert np.isfinite(value.divergence_bound()), where
        return
    if isinstance(value, schedules.Schedule):
        n = value.n_steps
        for k0, k1 in ((0, min(n, 1000)), (max(0, n - 1000), n)):
            block = value.block(k0, k1)
            _finite(block.step_size, f"{where}.step_size")
            _finite(block.temperature, f"{where}.temperature")
        return
    if sp.issparse(value):
        _finite(value.data, where)
        return
    if isinstance(value, float | np.floating):
        assert math.isfinite(value), f"{where} = {value}"
        return
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "fc":
            assert np.all(np.isfinite(value)), f"{where} has non-finite entries"
        return
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            _finite(getattr(value, f.name), f"{where}.{f.name}")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            _finite(v, f"{where}[{k!r}]")
        return
    if isinstance(value, tuple | list):
        for i, v in enumerate(value):
            _finite(v, f"{where}[{i}]")


def check(fn, drawn: dict, documented=None):
    """Call ``fn`` with the drawn values and apply the rules of the module docstring.

    ``documented`` (see ``DOCUMENTED_INFINITE``) checks the infinities a function documents as
    its value and returns the result without them, for the finiteness check of the rest.
    """
    kwargs = {k: v for k, (v, _) in drawn.items()}
    wrong = {k for k, (_, w) in drawn.items() if w}
    RUNS["calls"] += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # an overflow may not pass as a warning
            warnings.simplefilter("ignore", convergence.StepRestrictionWarning)
            warnings.simplefilter("ignore", UserWarning)
            out = fn(**kwargs)
    except (ParameterError, ParameterTypeError) as exc:
        RUNS["refused"] += 1
        assert exc.parameter in kwargs, f"{fn.__qualname__}({kwargs!r}) names {exc.parameter!r}: {exc}"
        return
    except Exception as exc:
        raise AssertionError(f"{fn.__qualname__}({kwargs!r}) raised {exc!r}, not a named ParameterError") from exc
    assert not wrong, f"{fn.__qualname__}({kwargs!r}) accepted {sorted(wrong)}"
    _finite(documented(out) if documented else out, fn.__qualname__)


# ----------------------------------------------------------------------------- the functions


def _grad_u_quadratic(x):
    return np.asarray(x, float)


GRID = fokker_planck.grid(-3.0, 3.0, 21)
TC = convergence.linear_gaussian_constants(np.eye(2), np.zeros(2), np.zeros(2), 0.1 * np.eye(2))

FUNCTIONS: dict[str, tuple[Callable, dict]] = {
    # schedules
    "constant": (schedules.constant, dict(step_size=real(0, math.inf, low_open=True), n_steps=integer(1),
                                         temperature=real(0, math.inf))),
    "polynomial_decay": (schedules.polynomial_decay, dict(a=real(0, 10, low_open=True), gamma=real(0, 1, hard_high=True),
                                                         n_steps=integer(1), b=real(0, math.inf), hold=integer(0),
                                                         temperature=real(0, math.inf))),
    "cyclical": (schedules.cyclical, dict(step_size=real(0, 1, low_open=True), n_steps=integer(1, 60, huge=False),
                                         n_cycles=integer(1, 5, huge=False), explore_fraction=real(0, 1, hard_high=True, high_open=True),
                                         temperature=real(0, 10), skip_per_cycle=integer(0, 5))),
    "averaging_windows": (schedules.averaging_windows, dict(step_size=real(0, 1, low_open=True),
                                                           n_steps=integer(1, 60), window=integer(1, 10),
                                                           warmup=integer(0, 10))),
    "Schedule": (schedules.Schedule, dict(step_size=sequence(0, 1), temperature=sequence(0, 2, low_open=False),
                                         collect=mostly(ok(st.one_of(st.none(), st.booleans())),
                                                        bad(st.sampled_from([["no"], "yes", [2], 1.5, [None]]))))),
    "cycle_length": (schedules.cycle_length, dict(n_steps=integer(1), n_cycles=integer(1))),
    "exploration_steps": (schedules.exploration_steps, dict(length=integer(1), explore_fraction=real(0, 1, hard_high=True))),
    # targets
    "gaussian_mixture": (targets.gaussian_mixture, dict(
        means=mostly(ok(st.sampled_from([[[0.0, 0.0]], [[1.0, 0.0], [-1.0, 2.0]], [[3.0]]])),
                     bad(st.sampled_from([[["1", "0"]], [], [[]], True, [[math.inf, 0.0]]]))),
        variance=real(0, 100, low_open=True).filter(lambda d: not isinstance(d[0], list)),  # one per component is valid
        weights=mostly(ok(st.none()), bad(st.sampled_from([[-1.0], "1", [True], [math.nan]]))),
        init_box=mostly(ok(st.sampled_from([None, (-2.0, 2.0)])),
                        bad(st.sampled_from([[[1, 2, 3]], (2.0, -2.0), "box", (math.nan, 1.0), [[1.0]], 3.0])))),
    ),
    "mixture_25": (targets.mixture_25, dict(variance=real(0, math.inf, low_open=True))),
    "mixture_3x3": (targets.mixture_3x3, dict(variance=real(0, math.inf, low_open=True))),
    "exponential_mixture": (targets.exponential_mixture, dict(
        rates=mostly(ok(st.lists(st.floats(1e-3, 1e3), min_size=2, max_size=2)),
                     bad(st.sampled_from([["1", "2"], [-1.0, 1.0], [True, False], [math.inf, 1.0]]))),
        weights=mostly(ok(st.just([0.5, 0.5])), bad(st.sampled_from([["0.5", "0.5"], [-1.0, 2.0], [math.nan, 1.0]]))),
    )),
    "linear_gaussian": (targets.linear_gaussian, dict(precision=matrix(), shift=vector(optional=True),
                                                      grad_noise_cov=matrix(optional=True))),
    "standard_gaussian": (targets.standard_gaussian, dict(dim=integer(1, 20))),
    "ou_quadratic": (targets.ou_quadratic, dict(hessian=matrix(), noise_cov=matrix(), batch_size=integer(1),
                                               n_data=integer(1, 1000))),
    "logistic_regression": (targets.logistic_regression, dict(
        X=mostly(ok(st.sampled_from([[[0.5, 1.0], [1.0, -2.0], [-1.0, 0.3]]])),
                 bad(st.sampled_from([[["0.5", "1"], ["1", "2"], ["3", "4"]], np.zeros((3, 0)), [[1.0], [2.0, 3.0]]]))),
        y=mostly(ok(st.sampled_from([[0.0, 1.0, 1.0], [0, 1, 0]])), bad(st.sampled_from([["0", "1", "1"], [0, 2, 1]]))),
        prior_scale=real(0, 1e3, low_open=True),
        batch_size=integer(1, 3, optional=True),
        init_box=real(0, 10, low_open=True),
    )),
    "linear_regression": (targets.linear_regression, dict(
        X=mostly(ok(st.sampled_from([[[0.5, 1.0], [1.0, -2.0], [-1.0, 0.3]]])),
                 bad(st.sampled_from([[["0.5", "1"], ["1", "2"], ["3", "4"]], np.zeros((3, 0))]))),
        y=mostly(ok(st.sampled_from([[0.0, 1.5, -1.0]])), bad(st.sampled_from([["0", "1", "1"], [0.0, math.nan, 1.0]]))),
        noise_precision=real(0, 1e3, low_open=True),
        prior_scale=real(0, 1e3, low_open=True),
    )),
    "softmax_regression": (targets.softmax_regression, dict(
        X=mostly(ok(st.sampled_from([[[0.5, 1.0], [1.0, -2.0], [-1.0, 0.3]]])),
                 bad(st.sampled_from([[["0.5", "1"], ["1", "2"], ["3", "4"]], np.zeros((3, 0))]))),
        y=mostly(ok(st.sampled_from([[0, 1, 2], [0, 1, 1]])), bad(st.sampled_from([["0", "1", "2"], [0.5, 1, 2]]))),
        n_classes=integer(3, 5, optional=True),
        prior_scale=real(0, 1e3, low_open=True),
    )),
    # theory: exact laws
    "sgld_law": (exact_law.sgld_law, dict(precision=matrix(), shift=vector(optional=True), step_size=sequence(0, 1),
                                          temperature=sequence(0, 2, low_open=False), grad_noise_cov=matrix(optional=True),
                                          noise_correction=flag(), n_steps=integer(1, 30, optional=True))),
    "sgd_law": (exact_law.sgd_law, dict(precision=matrix(), shift=vector(optional=True), step_size=sequence(0, 1),
                                        n_steps=integer(1, 30, optional=True))),
    "sghmc_law": (exact_law.sghmc_law, dict(precision=matrix(), shift=vector(), step_size=sequence(0, 0.5),
                                            friction=real(0, 1, hard_high=True, low_open=True), temperature=sequence(0, 2, low_open=False),
                                            gamma_hat=real(0, 1, hard_high=True), noise_correction=flag(),
                                            n_steps=integer(1, 30, optional=True))),
    "momentum_sgd_law": (exact_law.momentum_sgd_law, dict(A=matrix(), C=matrix(), lr=sequence(0, 0.5),
                                                          momentum=real(0, 1, hard_high=True, low_open=True), batch_size=integer(1),
                                                          n_steps=integer(1, 30, optional=True))),
    "preconditioned_sgd_law": (exact_law.preconditioned_sgd_law, dict(A=matrix(), C=matrix(), H=matrix(),
                                                                      lr=sequence(0, 0.5), batch_size=integer(1),
                                                                      n_steps=integer(1, 30, optional=True))),
    "sgfs_law": (exact_law.sgfs_law, dict(A=matrix(), C=matrix(), H=matrix(), E=factor(), lr=sequence(0, 0.5),
                                          batch_size=integer(1), n_steps=integer(1, 30, optional=True))),
    "stationary_covariance": (exact_law.stationary_covariance, dict(F=matrix([0.5 * np.eye(2)]), Q=matrix())),
    "time_average_cov": (exact_law.time_average_cov, dict(F=matrix([0.5 * np.eye(2)]), P=matrix(), T=integer(1))),
    "langevin_law": (exact_law.langevin_law, dict(precision=matrix(), shift=vector(optional=True),
                                                  t=sequence(0, 100, low_open=False), temperature=real(0, 10))),
    "affine_law": (exact_law.affine_law, dict(transition=matrix([0.5 * np.eye(2)]), shift=vector(),
                                              noise_cov=matrix())),
    "sgld_scalar_stationary": (stationary.sgld_scalar_stationary, dict(
        a=real(0, 10, low_open=True), step_size=real(0, 1, low_open=True), temperature=real(0, 10),
        grad_noise_var=real(0, math.inf), noise_correction=flag())),
    "sghmc_scalar_stationary": (stationary.sghmc_scalar_stationary, dict(
        a=real(0, 10, low_open=True), step_size=real(0, 1, low_open=True), friction=real(0, 1, hard_high=True, low_open=True),
        temperature=real(0, 10), grad_noise_var=real(0, math.inf), gamma_hat=real(0, 1, hard_high=True), noise_correction=flag())),
    # theory: OU and KL ([SGDVI])
    "ou.sgd_cov": (ou.sgd_cov, dict(A=matrix(), C=matrix(), lr=real(0, 1, low_open=True), batch_size=integer(1),
                                    exact=flag())),
    "ou.preconditioned_sgd_cov": (ou.preconditioned_sgd_cov, dict(A=matrix(), C=matrix(), H=matrix(),
                                                                  batch_size=integer(1), exact=flag())),
    "ou.momentum_cov": (ou.momentum_cov, dict(A=matrix(), C=matrix(), lr=real(0, 1, low_open=True),
                                              momentum=real(0, 1, hard_high=True, low_open=True), batch_size=integer(1),
                                              exact_ou=flag())),
    "ou.sgld_cov": (ou.sgld_cov, dict(A=matrix(), C=matrix(), lr=real(0, 1, low_open=True), n_data=integer(1),
                                      batch_size=integer(1), exact=flag())),
    "ou.sgfs_cov": (ou.sgfs_cov, dict(A=matrix(), C=matrix(), H=matrix(), E=factor(), lr=real(0, 1, low_open=True))),
    "ou.autocovariance": (ou.autocovariance, dict(A=matrix(), Sigma=matrix(), lag=real(0, math.inf))),
    "ou.window_mean_cov": (ou.window_mean_cov, dict(A=matrix(), Sigma=matrix(), tau=real(0, 100, low_open=True))),
    "ou.long_window_mean_cov": (ou.long_window_mean_cov, dict(A=matrix(), C=matrix(), window=real(0, 1e3, low_open=True),
                                                              batch_size=integer(1))),
    "kl.kl_to_posterior": (kl.kl_to_posterior, dict(Sigma=matrix(), A=matrix(), n_data=integer(1))),
    "kl.reverse_kl_to_posterior": (kl.reverse_kl_to_posterior, dict(Sigma=matrix(), A=matrix(), n_data=integer(1))),
    "kl.optimal_lr": (kl.optimal_lr, dict(C=matrix(), n_data=integer(1), batch_size=integer(1),
                                          A=matrix(optional=True))),
    "kl.optimal_preconditioner": (kl.optimal_preconditioner, dict(C=matrix(), n_data=integer(1),
                                                                  batch_size=integer(1), A=matrix(optional=True))),
    "kl.diagonal_preconditioner": (kl.diagonal_preconditioner, dict(C=matrix(), n_data=integer(1),
                                                                    batch_size=integer(1))),
    "kl.kl_optimal_diagonal_preconditioner": (kl.kl_optimal_diagonal_preconditioner, dict(
        A=matrix(), C=matrix(), n_data=integer(1), batch_size=integer(1))),
    "kl.sqrt_preconditioner_lr": (kl.sqrt_preconditioner_lr, dict(C=matrix(), n_data=integer(1),
                                                                  batch_size=integer(1), A=matrix(optional=True))),
    "kl.reverse_kl_optimal_lr": (kl.reverse_kl_optimal_lr, dict(C=matrix(), n_data=integer(1),
                                                                batch_size=integer(1), A=matrix(optional=True))),
    "kl.sgfs_optimal_preconditioner": (kl.sgfs_optimal_preconditioner, dict(
        C=matrix(), E=factor(), lr=real(0, 1, low_open=True), n_data=integer(1), kind=choice("full", "diagonal"))),
    "kl.sgfs_stability_noise": (kl.sgfs_stability_noise, dict(C=matrix(), lr=real(0, 1, low_open=True),
                                                              n_data=integer(1), h_max=real(0, 10, low_open=True))),
    "kl.stability_ratio": (kl.stability_ratio, dict(lr=real(0, math.inf, low_open=True), A=matrix(),
                                                    H=matrix(optional=True))),
    "kl.reverse_kl_minimiser": (kl.reverse_kl_minimiser, dict(A=matrix(), C=matrix(), n_data=integer(1),
                                                              batch_size=integer(1), exact=flag())),
    "kl.sgfs_kl": (kl.sgfs_kl, dict(A=matrix(), C=matrix(), H=matrix(), injected_cov=matrix(),
                                    lr=real(0, 1, low_open=True), n_data=integer(1))),
    "kl.sgfs_optimal_pair": (kl.sgfs_optimal_pair, dict(C=matrix(), lr=real(0, 1, low_open=True), n_data=integer(1),
                                                        h_max=real(0, math.inf, low_open=True, optional=True))),
    "momentum.momentum_recursion": (momentum.momentum_recursion, dict(
        A=matrix(), C=matrix(), lr=real(0, 1, low_open=True), momentum=real(0, 1, hard_high=True, low_open=True),
        batch_size=integer(1))),
    "momentum.momentum_autocorrelation_times": (momentum.momentum_autocorrelation_times, dict(
        A=matrix(), C=matrix(), lr=real(0, 1, low_open=True), momentum=real(0, 1, hard_high=True, low_open=True),
        batch_size=integer(1), exact=flag())),
    "iasg.err_max": (iasg.err_max, dict(A=matrix(), lr=real(0, math.inf, low_open=True), n_data=integer(1),
                                        batch_size=integer(1))),
    "iasg.accuracy_constant": (iasg.accuracy_constant, dict(tolerance=real(0, 1, hard_high=True, low_open=True))),
    "iasg.feasibility": (iasg.feasibility, dict(A=matrix(), n_data=integer(1), batch_size=integer(1),
                                                lr=real(0, math.inf, low_open=True, optional=True),
                                                tolerance=real(0, 1, hard_high=True, low_open=True))),
    "iasg.posterior_samples_per_gradient": (iasg.posterior_samples_per_gradient, dict(
        A=matrix(), C=matrix(), n_data=integer(1))),
    # theory: bounds
    "convergence.step_limit": (convergence.step_limit, dict(L_U=real(0, math.inf, low_open=True),
                                                            m_U=real(0, math.inf, low_open=True))),
    "convergence.harmonic_number": (convergence.harmonic_number, dict(n=integer(1))),
    "convergence.cyclical_sum": (convergence.cyclical_sum, dict(step_size=real(0, math.inf, low_open=True),
                                                                n_cycles=integer(1, 5), n_steps=integer(1, 100))),
    "convergence.cyclical_sum_squares": (convergence.cyclical_sum_squares, dict(
        step_size=real(0, math.inf, low_open=True), n_cycles=integer(1, 5), n_steps=integer(1, 100))),
    "convergence.matched_h0": (convergence.matched_h0, dict(step_size=real(0, math.inf, low_open=True),
                                                            n_steps=integer(1, 100),
                                                            n_cycles=integer(1, 5, optional=True))),
    "convergence.discretisation_ratio": (convergence.discretisation_ratio, dict(n_steps=integer(1))),
    "convergence.strongly_convex_c3_c4": (convergence.strongly_convex_c3_c4, dict(
        m=real(0, math.inf, low_open=True), w2_initial=real(0, math.inf))),
    "convergence.kappa0_gaussian": (convergence.kappa0_gaussian, dict(mean=vector(), cov=matrix())),
    "convergence.assumption_constants": (convergence.assumption_constants, dict(
        L_U=real(0, math.inf, low_open=True), B=real(0, math.inf), m_U=real(0, math.inf, low_open=True),
        b_U=real(0, math.inf, low_open=True), dim=integer(1, 10), kappa0=real(0, math.inf),
        moment_factor=choice("max", "min", "derived"))),
    "convergence.derived_prefactor": (convergence.derived_prefactor, dict(
        kappa0=real(0, math.inf), b_U=real(0, math.inf, low_open=True), m_U=real(0, math.inf, low_open=True),
        dim=integer(1, 10))),
    "convergence.linear_gaussian_constants": (convergence.linear_gaussian_constants, dict(
        precision=matrix(), shift=vector(), init_mean=vector(), init_cov=matrix(), grad_noise_cov=matrix(optional=True),
        sigma=real(0, 10, low_open=True, optional=True))),
    "convergence.sgld_bound": (convergence.sgld_bound, dict(constants=fixed(TC), step_size=real(0, math.inf, low_open=True),
                                                            n_steps=integer(1, 100), c_p=real(0, math.inf),
                                                            time_factor=real(0, math.inf), exact_sums=flag())),
    "convergence.csgld_bound": (convergence.csgld_bound, dict(constants=fixed(TC), step_size=real(0, math.inf, low_open=True),
                                                              n_cycles=integer(1, 4), n_steps=integer(1, 100))),
    "convergence.weak_error_terms": (convergence.weak_error_terms, dict(step_sizes=sequence(0, 1), weighted=flag(),
                                                                        order=integer(1, 2, huge=False),
                                                                        grad_noise_moment=real(0, math.inf))),
    "convergence.gaussian_average_error": (convergence.gaussian_average_error, dict(
        precision=real(0, math.inf, low_open=True), shift=real(-math.inf, math.inf), step_sizes=sequence(0, 0.5),
        grad_noise_var=real(0, math.inf), init_mean=real(-math.inf, math.inf), init_var=real(0, math.inf),
        weighted=flag(), temperature=real(0, math.inf, low_open=True))),
    "decaying.decaying_step_sums": (decaying.decaying_step_sums, dict(step_size=real(0, 1, low_open=True),
                                                                      gamma=real(0, 1, hard_high=True), n_steps=integer(1),
                                                                      offset=real(0, math.inf))),
    "decaying.decaying_sgld_bound": (decaying.decaying_sgld_bound, dict(
        constants=fixed(TC), step_size=real(0, 0.5, low_open=True), gamma=real(0, 1, hard_high=True), n_steps=integer(1, 100),
        offset=real(0, 100))),
    "decaying.sgld_kl_chain": (decaying.sgld_kl_chain, dict(precision=matrix(), shift=vector(),
                                                            step_sizes=sequence(0, 0.5), init_mean=vector(),
                                                            init_cov=matrix(), grad_noise_cov=matrix(optional=True))),
    "cycle_weights.harmonic_weight_moments": (cycle_weights.harmonic_weight_moments, dict(
        prior_var=real(0, math.inf, low_open=True), lik_var=real(0, math.inf, low_open=True),
        data=real(-math.inf, math.inf))),
    "cycle_weights.harmonic_weight_variance": (cycle_weights.harmonic_weight_variance, dict(
        log_likelihood=mostly(ok(st.lists(st.floats(-50, 50), min_size=2, max_size=20)),
                              bad(st.sampled_from([["1", "2"], [], [math.nan, 1.0], True]))))),
    "combination.combine_cycles": (combination.combine_cycles, dict(
        values=fixed([1.0, 2.0, 3.0]), cycle=mostly(ok(st.just([0, 0, 1])), bad(st.sampled_from([[0.5, 0, 1], ["0", "0", "1"]]))),
        weights=mostly(ok(st.sampled_from([[0.5, 0.5], [1.0, 3.0]])), bad(st.sampled_from([[-1.0, 2.0], ["1", "1"], [True, True]]))))),
    "combination.gaussian_regions_law": (combination.gaussian_regions_law, dict(
        weights=mostly(ok(st.just([0.5, 0.5])), bad(st.sampled_from([[-1.0, 2.0], ["1", "1"]]))),
        means=mostly(ok(st.just([-1.0, 1.0])), bad(st.sampled_from([["1", "2"], [math.inf, 1.0]]))),
        scales=mostly(ok(st.sampled_from([[0.5, 0.5], [1.0, 2.0]])), bad(st.sampled_from([[-1.0, 1.0], [0.0, 1.0]]))),
        temperature=real(0, 10, low_open=True))),
    "tempering.tempered_sgld_stationary": (tempering.tempered_sgld_stationary, dict(
        precision=matrix(), shift=vector(optional=True), step_size=real(0, 0.5, low_open=True), temperature=real(0, 10),
        grad_noise_cov=matrix(optional=True))),
    "tempering.tempered_periodic_law": (tempering.tempered_periodic_law, dict(
        precision=matrix(), shift=vector(optional=True), step_sizes=fixed([0.1, 0.2]),
        temperatures=mostly(ok(st.sampled_from([[1.0, 0.0], [0.5, 2.0]])), bad(st.sampled_from([[True, 1.0], ["1", "1"], [-1.0, 1.0]]))))),
    "distances.gaussian_w2": (distances.gaussian_w2, dict(m1=vector(stacks=True), S1=matrix(huge=True), m2=vector(stacks=True), S2=matrix(huge=True))),
    "distances.gaussian_kl": (distances.gaussian_kl, dict(m0=vector(stacks=True), S0=matrix(huge=True), m1=vector(stacks=True), S1=matrix(huge=True))),
    "distances.sqrtm_psd": (distances.sqrtm_psd, dict(S=matrix(huge=True))),
    "distances.w2_optimal_map": (distances.w2_optimal_map, dict(S1=matrix(huge=True), S2=matrix(huge=True))),
    "nonconvex.poincare_c3_c4": (nonconvex.poincare_c3_c4, dict(poincare=real(0, 100, low_open=True),
                                                                fourth_moment=real(0, 100), chi2_initial=real(0, 100))),
    "nonconvex.mixture_potential_1d": (nonconvex.mixture_potential_1d, dict(
        x=fixed(np.linspace(-3, 3, 31)), centres=mostly(ok(st.just([-1.0, 1.0])), bad(st.sampled_from([["1"], [], [math.nan]]))),
        variance=real(0, math.inf, low_open=True))),
    "gradient_noise.gradient_noise_shape": (gradient_noise.gradient_noise_shape, dict(
        example_gradients=fixed(np.random.default_rng(0).normal(size=(40, 2))), batch_size=integer(1, 40),
        n_minibatches=integer(0, 20), seed=integer(0, 2**40), top_fraction=real(0, 1, hard_high=True, low_open=True))),
    # the box's ends drawn apart (low < 0 < high), wrong only as non-numbers: a wrong low of 0 next to
    # a high of 5 is a valid box (as is a list, a box of as many dimensions), and the order
    # (low < high) is tested in test_fokker_planck
    "fokker_planck.grid": (fokker_planck.grid, dict(low=mostly(ok(st.floats(-10, -0.01)), bad(NOT_A_SCALAR)),
                                                    high=mostly(ok(st.floats(0.01, 10)), bad(NOT_A_SCALAR)),
                                                    n=integer(3, 40))),
    "fokker_planck.sgld_generator": (fokker_planck.sgld_generator, dict(g=fixed(GRID), grad_u=fixed(_grad_u_quadratic),
                                                                        temperature=real(0, math.inf))),
    "fokker_planck.svgd_two_particle_fixed_point": (fokker_planck.svgd_two_particle_fixed_point, dict(
        variance=real(0, math.inf, low_open=True), bandwidth=real(0, math.inf, low_open=True))),
    "fokker_planck.svgd_fixed_point": (fokker_planck.svgd_fixed_point, dict(
        n_particles=integer(2, 6), variance=real(0, 100, low_open=True, extreme=False),
        bandwidth=mostly(ok(st.one_of(st.just("median"), st.floats(0.1, 10))), bad(st.sampled_from(["mean", True, -1.0, math.nan]))))),
    "minibatch_law.linear_regression_examples": (minibatch_law.linear_regression_examples, dict(
        X=mostly(ok(st.just([[0.5, 1.0], [1.0, -2.0], [-1.0, 0.3]])), bad(st.sampled_from([[["1", "2"]], np.zeros((3, 0))]))),
        y=mostly(ok(st.just([0.0, 1.5, -1.0])), bad(st.sampled_from([["0", "1", "2"], [math.nan, 0.0, 1.0]]))),
        noise_precision=real(0, 100, low_open=True))),
}  # fmt: skip


def _harmonic_infinite(out):
    # E[Y^2] and the relative variance are infinite, as documented, exactly when the tail index is <= 2
    infinite = out.tail_index <= 2
    assert math.isinf(out.second_moment) == infinite and math.isinf(out.relative_variance) == infinite, out
    return dataclasses.replace(out, second_moment=0.0, relative_variance=0.0) if infinite else out


def _regions_nan(out):
    # the harmonic weights are NaN, as documented, exactly when E[1/p] is infinite (tail index 1/T <= 1)
    undefined = out.harmonic_tail_index <= 1
    assert bool(np.all(np.isnan(out.harmonic_weights))) == undefined, out
    return dataclasses.replace(out, harmonic_weights=np.zeros(0)) if undefined else out


_UNMEASURED = (
    "measured_skewness",
    "measured_excess_kurtosis",
    "se_skewness",
    "se_excess_kurtosis",
    "gaussian_se_skewness",
    "gaussian_se_excess_kurtosis",
)


def _unmeasured_nan(out):
    # the measured moments and their standard errors are NaN, as documented, exactly without draws
    none = out.n_minibatches == 0
    assert all(math.isnan(getattr(out, f)) == none for f in _UNMEASURED), out
    return dataclasses.replace(out, **dict.fromkeys(_UNMEASURED, 0.0)) if none else out


# infinities and NaNs that are a function's documented value (an infinite moment), not an overflow
DOCUMENTED_INFINITE = {
    "cycle_weights.harmonic_weight_moments": _harmonic_infinite,
    "combination.gaussian_regions_law": _regions_nan,
    "gradient_noise.gradient_noise_shape": _unmeasured_nan,
}


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_refused_by_name_or_finite(name, data):
    fn, strategies = FUNCTIONS[name]
    check(fn, data.draw(st.fixed_dictionaries(strategies)), DOCUMENTED_INFINITE.get(name))


# ----------------------------------------------------------------------------- the defects, one test each
# Each call below was accepted (or failed with a raw error) before the fix; the parameter named
# by the error is asserted, and a negative control shows the nearby valid input still works.


def _named(call, parameter, exc=(ParameterError, ParameterTypeError)):
    with pytest.raises(exc) as info:
        call()
    assert info.value.parameter == parameter, repr(info.value)


def test_collect_strings_are_not_truth_values():
    _named(lambda: schedules.Schedule([0.1, 0.1], [1.0, 1.0], collect=["no", "no"]), "collect")  # read as True
    _named(lambda: schedules.Schedule([0.1, 0.1], [1.0, 1.0], collect=[2, 0]), "collect")
    s = schedules.Schedule([0.1, 0.1], [1.0, 1.0], collect=[False, True])
    assert s.collect.tolist() == [False, True]
    assert schedules.Schedule([0.1, 0.1], [1.0, 1.0], collect=np.array([0, 1], np.int8)).collect.tolist() == [
        False,
        True,
    ]


def test_schedule_arrays_refuse_strings_and_booleans():
    _named(lambda: schedules.Schedule(["0.1", "0.1"], [1.0, 1.0]), "step_size")  # numeric strings were read
    _named(lambda: schedules.Schedule([0.1, 0.1], [True, True]), "temperature")


def test_cycle_length_needs_positive_counts():
    _named(lambda: schedules.cycle_length(-5, -2), "n_steps")  # returned 3
    _named(lambda: schedules.cycle_length(5, 0), "n_cycles")  # ZeroDivisionError
    _named(lambda: schedules.cycle_length(5.5, 2), "n_steps")
    assert schedules.cycle_length(50_000, 30) == 1667


def test_exploration_steps_checks_its_inputs():
    _named(lambda: schedules.exploration_steps(10, 1.5), "explore_fraction")
    _named(lambda: schedules.exploration_steps(-10, 0.5), "length")
    assert schedules.exploration_steps(100, 0.55) == 55


@pytest.mark.parametrize("step", [True, "0.5", np.bool_(True)])
def test_exact_laws_refuse_booleans_and_strings_as_steps(step):
    _named(lambda: exact_law.sgld_law([[1.0]], [0.0], step, n_steps=3), "step_size")
    _named(lambda: exact_law.sghmc_law([[1.0]], [0.0], step, 0.5, n_steps=3), "step_size")
    _named(lambda: exact_law.momentum_sgd_law([[1.0]], [[1.0]], step, 0.5, 1, n_steps=3), "lr")


def test_exact_laws_check_their_size_before_allocating():
    # 2^31 steps of a 1-d law: 32 GiB of means and covariances (it grew until the memory ran out)
    _named(lambda: exact_law.sgld_law([[1.0]], [0.0], 0.1, n_steps=2**31), "n_steps")
    _named(lambda: exact_law.sghmc_law([[1.0]], [0.0], 0.1, 0.5, n_steps=2**31), "n_steps")
    _named(lambda: exact_law.preconditioned_sgd_law([[1.0]], [[1.0]], [[1.0]], 0.1, 1, n_steps=2**40), "n_steps")
    assert exact_law.sgld_law([[1.0]], [0.0], 0.1, n_steps=3).mean.shape == (3, 1)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: ou.sgd_cov(np.eye(2), np.eye(2), 0.1, s),
        lambda s: ou.sgld_cov(np.eye(2), np.eye(2), 0.1, 100, s),
        lambda s: ou.momentum_cov(np.eye(2), np.eye(2), 0.1, 0.5, s),
        lambda s: ou.preconditioned_sgd_cov(np.eye(2), np.eye(2), np.eye(2), s),
        lambda s: ou.long_window_mean_cov(np.eye(2), np.eye(2), 10.0, s),
        lambda s: kl.optimal_lr(np.eye(2), 100, s),
        lambda s: kl.optimal_preconditioner(np.eye(2), 100, s),
        lambda s: kl.reverse_kl_optimal_lr(np.eye(2), 100, s),
        lambda s: exact_law.preconditioned_sgd_law(np.eye(2), np.eye(2), np.eye(2), 0.1, s, n_steps=2),
    ],
)
def test_batch_sizes_are_integers(call):
    _named(lambda: call(1.5), "batch_size")  # was taken as 1.5 examples
    _named(lambda: call(True), "batch_size")
    _finite(call(2), "the same call with batch_size = 2")


def test_svgd_two_particle_fixed_point_is_finite_at_extreme_bandwidths():
    # h / 4 log1p(4 s^2 / h) overflowed to inf at h = 1e-320 (the quotient), and gave 0 at h = 1e300
    a2 = fokker_planck.svgd_two_particle_fixed_point(1.0, 1e-320)
    assert a2 == pytest.approx(1e-320 / 4 * (math.log(4.0) - math.log(1e-320)), rel=1e-2)  # subnormal: ~3 digits
    # s^2 = 1e-300 << h: a^2 -> s^2 (1 - 2 s^2 / h), i.e. s^2 to rounding
    assert fokker_planck.svgd_two_particle_fixed_point(1e-300, 1e300) == pytest.approx(1e-300, rel=1e-15)
    h = 1.7
    assert fokker_planck.svgd_two_particle_fixed_point(1.0, h) == pytest.approx(h / 4 * math.log1p(4 / h), rel=1e-15)


def test_grid_and_fixed_points_check_their_size_before_allocating():
    _named(lambda: fokker_planck.grid(-1.0, 1.0, 2**31 + 5), "n")  # grew to 16 GB
    _named(lambda: fokker_planck.grid([-1.0, -1.0], [1.0, 1.0], [2**20, 2**20]), "n")
    _named(lambda: fokker_planck.svgd_fixed_point(2**31), "n_particles")
    assert fokker_planck.grid(-1.0, 1.0, 5).shape == (5,)


def test_strongly_convex_constants_do_not_overflow():
    _named(lambda: convergence.strongly_convex_c3_c4(1e-320, 1.0), "m")  # C4 = inf
    assert convergence.strongly_convex_c3_c4(0.5, 1.0) == (1.0, 2.0)


def test_gaussian_mixture_refuses_string_variances_and_bad_boxes():
    _named(lambda: targets.gaussian_mixture([[0.0, 0.0]], variance="0.5"), "variance")  # was read as 0.5
    _named(lambda: targets.gaussian_mixture([[0.0, 0.0]], 0.5, init_box=[[1, 2, 3]]), "init_box")  # raw IndexError
    _named(lambda: targets.gaussian_mixture([[0.0, 0.0]], 0.5, init_box=(2.0, -2.0)), "init_box")
    _named(lambda: targets.gaussian_mixture([[0.0, 0.0]], 0.5, init_box="ab"), "init_box")
    t = targets.gaussian_mixture([[0.0, 0.0]], 0.5, init_box=(-2.0, 2.0))
    assert t.init_low.tolist() == [-2.0, -2.0] and t.init_high.tolist() == [2.0, 2.0]


def test_regression_data_must_be_numbers_with_columns():
    X = [[0.5, 1.0], [1.0, -2.0], [-1.0, 0.3]]
    _named(lambda: targets.logistic_regression([["0.5", "1"], ["1", "2"], ["3", "4"]], [0, 1, 1]), "X")
    _named(lambda: targets.logistic_regression(X, ["0", "1", "1"]), "y")  # numeric strings were read
    _named(lambda: targets.softmax_regression(np.zeros((3, 0)), [0, 1, 2]), "X")  # a design with no columns
    _named(lambda: targets.linear_regression(np.zeros((3, 0)), [0.0, 1.0, 2.0]), "X")
    _named(lambda: minibatch_law.linear_regression_examples(np.zeros((3, 0)), [0.0, 1.0, 2.0], 1.0), "X")
    assert minibatch_law.linear_regression_examples(X, [0.0, 1.0, 2.0], 2.0)[0].shape == (3, 2, 2)
    _named(lambda: targets.softmax_regression(X, [0, 1, 1], n_classes=2**31), "n_classes")  # before allocating
    assert targets.logistic_regression(X, [False, True, True]).dim == 3  # boolean labels are labels
    assert targets.softmax_regression(X, [0, 1, 2]).dim == 9


def test_standard_gaussian_dimension_is_checked():
    _named(lambda: targets.standard_gaussian(2**31 + 5), "dim")  # a raw "array is too big"
    _named(lambda: targets.standard_gaussian(2.0), "dim")
    assert targets.standard_gaussian(np.int64(3)).dim == 3


def test_finite_array_refuses_what_numpy_would_convert():
    from sgsim._validate import finite_array

    for value in ("1.5", ["1", "2"], [None, 1.0], True, [True, False], np.array(["1"]), object()):
        _named(lambda v=value: finite_array("x", v), "x")
    assert finite_array("x", [True, False], allow_bool=True).tolist() == [1.0, 0.0]
    assert finite_array("x", [2**70, 1]).tolist() == [2.0**70, 1.0]  # big Python ints are numbers


# ----------------------------------------------------------------------------- schedules at large counts


def test_exploration_steps_is_exact_for_long_cycles():
    # a slack of 1e-9 x the count gave 10^14 - 10^5 exploration steps here
    assert schedules.exploration_steps(4 * 10**14, 0.25) == 10**14
    assert schedules.exploration_steps(2**62, 0.5) == 2**61
    assert schedules.exploration_steps(100, 0.55) == 55  # the binary 0.55 is above 0.55: not 56
    assert schedules.exploration_steps(7, 5 / 7) == 5
    assert schedules.exploration_steps(3, 1 - 2**-53) == 3 and schedules.exploration_steps(3, 5e-324) == 1
    # beta = p / d as the fraction it is written as: ceil(p L / d) in integers
    for d in range(1, 30):
        for p in range(d + 1):
            for length in (1, 7, 100, 12345, 10**15 + 3, 2**62 + 1):
                assert schedules.exploration_steps(length, p / d) == -(-p * length // d)


def test_cycle_index_is_int64_beyond_two_to_the_31_cycles():
    s = schedules.cyclical(0.1, 2**33, n_cycles=2**32)  # cycles of two steps
    last = s.block(2**33 - 2, 2**33)
    assert last.cycle.dtype == np.int64 and last.cycle.tolist() == [2**32 - 1] * 2  # int32 wrapped to -1
    assert s.n_cycles == 2**32
    w = schedules.averaging_windows(0.1, 2**32 + 2, window=1)
    assert w.block(2**32 + 1, 2**32 + 2).cycle.tolist() == [2**32 + 1]
    assert schedules.Schedule([0.1], [1.0], cycle=[2**40]).cycle.tolist() == [2**40]  # was refused as beyond int32


# ----------------------------------------------------------------------------- theory at extreme inputs


def test_scalar_stationary_laws_check_flags_and_underflow():
    _named(lambda: stationary.sgld_scalar_stationary(1.0, 0.1, noise_correction=[True]), "noise_correction")
    _named(lambda: stationary.sghmc_scalar_stationary(1.0, 0.1, 0.5, noise_correction="no"), "noise_correction")
    # step_size * a underflows to 0: ZeroDivisionError before
    _named(lambda: stationary.sgld_scalar_stationary(1e-320, 1e-320, 1e-320, 1e-320), "step_size")
    _named(lambda: stationary.sgld_scalar_stationary(1e-320, 0.5), "a")  # T / a = 1e320
    assert stationary.sgld_scalar_stationary(2.0, 0.1, 1.0, 0.5) == pytest.approx(
        (2 * 0.1 + 0.1**2 * 0.5) / (0.1 * 2.0 * (2 - 0.1 * 2.0)), rel=1e-15
    )
    var_theta, var_v = stationary.sghmc_scalar_stationary(2.0, 0.1, 0.3, 1.0, 0.5)
    q = 2 * 0.3 * 0.1 + 0.1**2 * 0.5
    want = (2 - 0.3) * q / (0.3 * 0.1 * 2.0 * (2 * (2 - 0.3) - 0.1 * 2.0))
    assert var_theta == pytest.approx(want, rel=1e-14)
    assert var_v == pytest.approx(2 * 0.1 * 2.0 * want / (2 - 0.3), rel=1e-14)


def test_bound_constants_refuse_overflow_by_name():
    assert convergence.step_limit(5e-324, 5e-324) == 1.0  # ZeroDivisionError: 4 L_U^2 underflowed
    _named(lambda: convergence.step_limit(1e300, 1e-300), "L_U")  # OverflowError from L_U ** 2
    assert convergence.step_limit(2.0, 1.0) == 1.0 / 16
    _named(lambda: convergence.assumption_constants(1e200, 1.0, 1.0, 1.0, 2, 0.0), "L_U")  # C0 = inf
    _named(lambda: convergence.assumption_constants(1.0, 1.0, 1e-320, 1.0, 2, 0.0), "m_U")  # 1 / m_U = inf
    _named(lambda: convergence.derived_prefactor(0.0, 1.0, 5e-324, 1), "m_U")  # m_U / 2 underflowed: 6 / 0
    _named(lambda: convergence.derived_prefactor(1e308, 1.0, 1.0, 1), "kappa0")  # c_p = inf
    assert convergence.derived_prefactor(0.5, 2.0, 1.0, 3) == pytest.approx(
        {"c_p": 12.0 + 2.0, "time_factor": 8 * 5 / (0.5 + 4 + 6)}, rel=1e-15
    )
    # the time factor divides through by b_U + d: C2 = 2 b_U overflowed and gave 0
    assert convergence.derived_prefactor(0.0, 1e308, 1.0, 1)["time_factor"] == 4.0


def test_linear_gaussian_constants_name_their_own_arguments():
    # kappa0_gaussian's 'cov' was reported, which is no argument of this call
    _named(lambda: convergence.linear_gaussian_constants(np.eye(2), np.zeros(2), np.zeros(2), np.eye(2)), "init_cov")
    _named(
        lambda: convergence.linear_gaussian_constants(1e-320 * np.eye(2), np.ones(2), np.zeros(2), 0.1 * np.eye(2)),
        "shift",
    )
    assert convergence.linear_gaussian_constants(np.eye(2), np.zeros(2), np.zeros(2), 0.1 * np.eye(2)) == TC


def test_average_errors_check_flags_and_overflow():
    _named(lambda: convergence.weak_error_terms([0.1, 0.2], weighted="no"), "weighted")  # read as True
    _named(lambda: convergence.gaussian_average_error(1.0, 0.0, [0.1], weighted=1), "weighted")
    _named(lambda: convergence.sgld_bound(TC, 0.1, 10, exact_sums=1), "exact_sums")
    _named(lambda: convergence.csgld_bound(TC, 0.1, 2, 10, exact_sums="no"), "exact_sums")
    _named(lambda: convergence.gaussian_average_error(1e-320, 10.0, [0.1, 0.2]), "precision")  # bias = -inf
    _named(lambda: convergence.gaussian_average_error(1.0, 1.0, [1e300, 1e300, 1e300]), "step_sizes")
    e = convergence.gaussian_average_error(2.0, 1.0, [0.1, 0.2], init_mean=1.0)
    # by hand: theta_1 = 0.8 + 0.1, theta_2 = 0.6 * 0.9 + 0.2; weights h / S
    assert e.bias == pytest.approx((0.1 * 0.9 + 0.2 * (0.6 * 0.9 + 0.2)) / 0.3 - 0.5, rel=1e-14)


def test_harmonic_weight_moments_at_extreme_variances():
    _named(lambda: cycle_weights.harmonic_weight_moments(1e-320, 100.0), "prior_var")  # ZeroDivisionError
    _named(lambda: cycle_weights.harmonic_weight_moments(1.0, 1e-300, 10.0), "data")  # E[Y] beyond the floats
    m = cycle_weights.harmonic_weight_moments(1.0, 3.0, 0.5)
    v = 1 / (1 / 1.0 + 1 / 3.0)
    assert m.tail_index == pytest.approx(3.0 / v, rel=1e-15)
    delta = v * 0.5 / 3.0 - 0.5
    want = math.sqrt(2 * math.pi * 3.0) / math.sqrt(1 - v / 3.0) * math.exp(delta**2 / (2 * 3.0 * (1 - v / 3.0)))
    assert m.mean == pytest.approx(want, rel=1e-14)
    assert math.isinf(cycle_weights.harmonic_weight_moments(1.0, 1.0).second_moment)  # tail index 2: documented inf


def test_gaussian_distances_at_entries_near_the_float_limit():
    huge, eye, z = 1e308 * np.eye(2), np.eye(2), np.zeros(2)
    # overflow in a + a^T and in the products of square roots (RuntimeWarning) before
    assert distances.gaussian_w2(z, huge, z, eye) == pytest.approx(math.sqrt(2) * (1e154 - 1), rel=1e-12)
    assert distances.sqrtm_psd(huge) == pytest.approx(1e154 * eye, rel=1e-15)
    assert distances.w2_optimal_map(huge, huge) == pytest.approx(eye, rel=1e-12)
    assert distances.gaussian_kl(z, huge, z, huge) == pytest.approx(0.0, abs=1e-12)
    _named(lambda: distances.gaussian_kl(z, eye, [1e300, 1e300], 1e-308 * eye), "m1")  # KL ~ 1e908
    _named(lambda: distances.gaussian_w2([1e308, 1e308], eye, [-1e308, -1e308], eye), "m1")
    # ordinary inputs keep their values (the scaling is a power of 4, applied only beyond 2^400)
    s1, s2 = np.array([[2.0, 0.5], [0.5, 1.0]]), np.diag([1.0, 3.0])
    t = distances.w2_optimal_map(s1, s2)
    np.testing.assert_allclose(t @ s1 @ t, s2, rtol=1e-12, atol=1e-14)


def test_combination_and_chains_name_their_arguments():
    _named(lambda: combination.combine_cycles([1.0, 2.0, 3.0], ["0", "0", "1"], [0.5, 0.5]), "cycle")  # was read
    _named(lambda: combination.combine_cycles([1.0, 2.0, 3.0], [0.5, 0, 1], [0.5, 0.5]), "cycle")
    assert combination.combine_cycles([1.0, 2.0, 3.0], [0, 0, 1], [0.5, 0.5]) == pytest.approx(0.5 * 1.5 + 0.5 * 3.0)
    _named(lambda: decaying.decaying_sgld_bound(TC, 5e-324, 0.5, 10, offset=15.0), "step_size")  # named 'max_step'
    _named(lambda: ou.preconditioned_sgd_cov(np.eye(2), np.eye(2), 3.0 * np.eye(2), 1, exact=True), "H")  # named 'F'
    _named(lambda: exact_law.sghmc_law([[1.0]], [0.0], 0.1, 0.5, noise_correction="no", n_steps=2), "noise_correction")
    law = combination.gaussian_regions_law([0.5, 0.5], [-1.0, 1.0], [1e-300, 1.0], 0.5)  # pi / s^d overflowed
    assert np.all(np.isfinite(law.harmonic_weights)) and law.harmonic_weights[0] == pytest.approx(1.0)
    assert iasg.err_max(np.eye(2), 5e-324, 1, 1) == -1.0  # x underflowed to 0 and was refused as 'x'


def test_ou_window_and_momentum_covariances_at_extreme_inputs():
    a, sig = np.array([[2.0, 0.5], [0.5, 1.0]]), np.diag([1.0, 3.0])
    # (1/tau) A^-1 and (1/tau^2) X overflowed at tau = 5e-324 (RuntimeWarning); the window mean -> Sigma
    np.testing.assert_allclose(ou.window_mean_cov(a, sig, 5e-324), sig, rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(ou.window_mean_cov(a, sig, 1e-9), sig, rtol=1e-8, atol=1e-8)
    # across the series/direct switch (tau * lambda = 1e-2) both branches agree with the long form
    for tau in (0.5e-2 / 2.2, 2e-2 / 2.2, 3.0):
        lam, u = np.linalg.eigh(a)
        x = u @ np.diag(np.expm1(-tau * lam) / lam**2) @ u.T
        a_inv = np.linalg.inv(a)
        want = (a_inv @ sig + sig @ a_inv) / tau + (x @ sig + sig @ x) / tau**2
        np.testing.assert_allclose(ou.window_mean_cov(a, sig, tau), want, rtol=1e-10)
    _named(lambda: ou.long_window_mean_cov(a, sig, 5e-324, 1), "window")  # overflowed with a RuntimeWarning
    np.testing.assert_allclose(ou.long_window_mean_cov(a, sig, 2.0, 3), np.linalg.inv(a) @ sig @ np.linalg.inv(a) / 6)
    _named(lambda: ou.momentum_cov(np.eye(2), np.eye(2), 1.0, 5e-324, 20), "momentum")  # 0 * inf = nan before
    # mu * S underflowed: ZeroDivisionError; lr / mu = 1 is finite
    np.testing.assert_allclose(ou.momentum_cov(np.eye(2), np.eye(2), 5e-324, 5e-324, 29), np.eye(2) / 58, rtol=1e-15)
    np.testing.assert_allclose(ou.momentum_cov(np.eye(2), np.eye(2), 0.1, 0.5, 2), 0.1 / (0.5 * 2) / 2 * np.eye(2))


def test_langevin_law_refuses_an_empty_t():
    _named(lambda: exact_law.langevin_law(np.eye(2), None, []), "t")  # returned arrays of shape (0, 2)
    assert exact_law.langevin_law(np.eye(2), None, [0.5])[0].shape == (1, 2)


def test_rates_beyond_the_floats_in_iasg_and_kl():
    # x = lr N lambda / S overflowed to inf and was refused as 'x', not an argument of err_max
    assert iasg.err_max(np.diag([1e3, 2e3]), 1e308, 9, 37) == 0.0  # |e(x)| < 1 / x: 0 to the floats
    assert iasg.err_max(np.eye(2), 2.0, 1, 1) == pytest.approx(math.expm1(-2.0) / 2.0, rel=1e-15)
    _named(lambda: kl.stability_ratio(1e308, np.diag([1e-3, 1e3])), "lr")  # RuntimeWarning, then inf
    assert kl.stability_ratio(0.5, np.diag([1.0, 3.0])) == pytest.approx(0.75, rel=1e-15)


def test_grid_corners_and_gradient_noise_are_named():
    _named(lambda: fokker_planck.grid(-10.0, -10.0 + 1e-15j, 30), "high")  # TypeError from float()
    _named(lambda: fokker_planck.grid("-1", 1.0, 5), "low")  # a string was read as a number
    # linear_gaussian named 'cov' (Target.with_gradient_noise's argument) and read "1" as 1.0
    _named(lambda: targets.linear_gaussian(np.eye(2), grad_noise_cov=[[1.0, 0.0]]), "grad_noise_cov")
    _named(lambda: targets.linear_gaussian(np.eye(2), grad_noise_cov="1"), "grad_noise_cov")
    _named(lambda: targets.linear_gaussian(np.eye(2), grad_noise_cov=True), "grad_noise_cov")
    np.testing.assert_array_equal(
        targets.linear_gaussian(np.eye(2), grad_noise_cov=0.1).grad_noise_cov, 0.1 * np.eye(2)
    )


def test_reverse_kl_at_a_concentrated_posterior():
    # an eigenvalue mu < 1.1e-16 of S1^-1 S0 made mu - 1 round to -1 and log1p(-1) = -inf: refused as 'S0'
    a, sig = np.array([[2.0, 0.5], [0.5, 1.0]]), np.diag([1e-3, 1e3])
    post = np.linalg.inv(float(2**62) * a)
    m = np.linalg.solve(sig, post)
    want = 0.5 * (np.trace(m) - 2 - np.linalg.slogdet(post)[1] + np.linalg.slogdet(sig)[1])
    assert kl.reverse_kl_to_posterior(sig, a, 2**62) == pytest.approx(want, rel=1e-12)
    assert distances.gaussian_kl(np.zeros(2), 1e-20 * np.eye(2), np.zeros(2), np.eye(2)) == pytest.approx(
        0.5 * (2e-20 - 2 + 2 * 20 * math.log(10)), rel=1e-14
    )


def test_sgfs_functions_at_extreme_rates():
    c = np.diag([1.0, 3.0])
    # 2 / (lr N) overflowed: non-finite preconditioners, a ZeroDivisionError, a RuntimeWarning
    _named(lambda: kl.sgfs_optimal_preconditioner(c, np.eye(2), 5e-324, 1), "lr")
    _named(lambda: kl.sgfs_stability_noise(np.eye(2), 1e-300, 43, 5e-324), "h_max")
    _named(lambda: kl.sgfs_optimal_pair(c, 5e-324, 1), "lr")
    _named(lambda: kl.sgfs_optimal_pair(c, 0.5, 2**31 + 5, 1e-320), "h_max")  # inf * 0 = nan before
    _named(lambda: ou.sgfs_cov(np.eye(2), c, np.eye(2), np.array(HUGE), 0.5), "E")  # overflow in matmul
    _named(lambda: kl.sgfs_kl(np.eye(2), c, np.eye(2), np.eye(2), 5e-324, 1), "lr")  # named 'Sigma' / 'S0'
    # a non-symmetric factor E is a valid factor of E E^T
    e = np.array([[1.0, 2.0], [0.0, 1.0]])
    np.testing.assert_allclose(kl.sgfs_optimal_preconditioner(c, e, 0.1, 10), 2.0 / 1.0 * np.linalg.inv(c + e @ e.T))
    # the capped pair: H = min(2 / (lr N c_k), h_max) in C's eigenbasis and M = (tau - c_k)_+, tau = 2 / (lr N h_max)
    h, m = kl.sgfs_optimal_pair(c, 0.1, 10, h_max=1.0)
    np.testing.assert_allclose(np.diag(h), [1.0, 2.0 / 3.0], rtol=1e-15)
    np.testing.assert_allclose(np.diag(m), [1.0, 0.0], rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(h, 2.0 * np.linalg.inv(c + m), rtol=1e-14)


def test_accuracy_constant_at_the_ends_of_its_range():
    # the root solver failed at both ends: 2 / tol overflowed (tol = 5e-324) or the root lay below its bracket
    _named(lambda: iasg.accuracy_constant(5e-324), "tolerance")
    assert iasg.accuracy_constant(1e-300) == pytest.approx(1e300, rel=1e-15)  # |e(c)| = 1 / c beyond c = 1e20
    d = 2.0**-40
    assert iasg.accuracy_constant(1.0 - d) == pytest.approx(2 * d * (1 + 2 * d / 3), rel=1e-15)
    assert iasg.accuracy_constant(1.0 - 2.0**-53) == pytest.approx(2.0**-52, rel=1e-15)
    c = iasg.accuracy_constant(0.5)
    assert -math.expm1(-c) / c == pytest.approx(0.5, rel=1e-14)


def test_feasibility_and_mixture_potential_at_extreme_inputs():
    # min_lr = c S / (N lambda_min) overflowed to inf and was returned
    _named(lambda: iasg.feasibility(np.diag([1e-3, 1e3]), 2**31 + 5, 43, tolerance=1e-320), "tolerance")
    f = iasg.feasibility(np.diag([1.0, 2.0]), 100, 1, tolerance=0.1)
    assert f.min_lr == pytest.approx(iasg.accuracy_constant(0.1) / 100, rel=1e-15) and f.max_lr == 1.0
    _named(lambda: nonconvex.mixture_potential_1d(np.linspace(-3, 3, 31), [-1.0, 1.0], 5e-324), "variance")  # overflow
    u, g = nonconvex.mixture_potential_1d([0.0], [-1.0, 1.0], 1e300)  # a wide variance: flat
    assert u[0] == pytest.approx(0.0, abs=1e-15) and g[0] == 0.0


def test_momentum_autocorrelation_times_name_lr_and_momentum():
    a, c = np.diag([1e-3, 1e3]), np.diag([1e-3, 1e3])
    # lyapunov's 'M' was named at a tiny lr; a tiny momentum passed scipy's RuntimeWarning
    _named(lambda: momentum.momentum_autocorrelation_times(a, np.diag([1.0, 3.0]), 1e-300, 1, 2**62, exact=False), "lr")
    _named(lambda: momentum.momentum_autocorrelation_times(a, c, 1, 1e-320, 29, exact=False), "momentum")
    t = momentum.momentum_autocorrelation_times(np.eye(2), np.eye(2), 0.1, 0.5, 1, exact=False)
    assert np.all(np.isfinite(t.theta)) and t.exponential > 0


def test_autocovariance_at_a_lag_beyond_the_floats():
    a, sig = np.diag([1e-3, 1e3]), np.diag([1.0, 3.0])
    # expm(-A lag) overflowed in its scaling (RuntimeWarning) at lag = 1e308; the limit is 0
    np.testing.assert_array_equal(ou.autocovariance(a, sig, 1e308), np.zeros((2, 2)))
    b = np.array([[2.0, 0.5], [0.5, 1.0]])
    from scipy.linalg import expm

    np.testing.assert_allclose(ou.autocovariance(b, sig, 0.7), expm(-0.7 * b) @ sig, rtol=1e-13)


def test_the_200_example_fuzz_findings_are_named():
    # found at FUZZ_EXAMPLES=200, each passing on main before: a fixed-grid mixture named 'means'
    # (not its argument) for a tiny variance; a bool inside a mixed list read as 1.0; a tiny
    # step named the internal 'F'; E E^T overflowing in a RuntimeWarning; a ragged noise
    # covariance as a raw NumPy ValueError
    for build in (targets.mixture_25, targets.mixture_3x3):
        _named(lambda build=build: build(variance=1.1e-308), "variance")
        assert build(variance=0.5).dim == 2  # the control: a plain variance builds
    _named(lambda: tempering.tempered_periodic_law(np.eye(2), None, [0.1, 0.2], [True, 1.0]), "temperatures")
    _named(lambda: tempering.tempered_sgld_stationary(np.eye(2), None, 5e-324, 1.0, np.eye(2)), "step_size")
    _named(lambda: tempering.tempered_sgld_stationary(np.eye(2), None, 0.1, 1.0, [[True, False], [False, True]]),
           "grad_noise_cov")  # fmt: skip
    law = tempering.tempered_sgld_stationary(np.eye(2), None, 0.1, 1.0, np.eye(2))
    assert np.all(np.isfinite(law.cov))
    huge = np.diag([1e308, 1e308])
    _named(lambda: exact_law.sgfs_law(np.eye(2), np.eye(2), np.eye(2), huge, [0.1], 10), "E")
    assert np.all(np.isfinite(exact_law.sgfs_law(np.eye(2), np.eye(2), np.eye(2), np.eye(2), [0.1], 10).cov))
    _named(lambda: exact_law.sgld_law(np.eye(2), None, [0.1], [1.0], [[1.0, 0.0], [0.0]]), "grad_noise_cov")


def test_the_600_example_fuzz_findings_are_named():
    # found at FUZZ_EXAMPLES=600: a step near the largest float named the internal 'sum_squares'
    # (or raised OverflowError); a list of noise precisions a raw TypeError; a ragged gradient
    # noise covariance a raw ValueError; a nilpotent momentum recursion warned in log(0)
    for bound in (lambda h: convergence.sgld_bound(TC, h, 20, exact_sums=False),
                  lambda h: convergence.csgld_bound(TC, h, 2, 20, exact_sums=False)):  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", convergence.StepRestrictionWarning)
            _named(lambda bound=bound: bound(1e300), "step_size")
            assert np.isfinite(bound(0.1).total)  # the control
    x = [[0.5, 1.0], [1.0, -2.0], [-1.0, 0.3]]
    _named(lambda: minibatch_law.linear_regression_examples(x, [0.0, 1.5, -1.0], [1.0, 2.0, 3.0]), "noise_precision")
    _named(lambda: targets.linear_gaussian(np.eye(2), None, grad_noise_cov=[[1.0, 0.0], [0.0]]), "grad_noise_cov")
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        t = momentum.momentum_autocorrelation_times(np.eye(2), np.eye(2), 1, 1, 2**31 + 5, exact=True)
    assert t.exponential == 0.0  # F is nilpotent: no memory beyond a few steps


def test_the_1500_example_fuzz_finding_is_named():
    # a momentum below rounding (1 - momentum == 1) reached scipy's Lyapunov solver as a raw
    # LinAlgError; the exact times at a momentum of 0.5 are the control
    a, c = np.eye(2), np.diag([1.0, 3.0])
    _named(lambda: momentum.momentum_autocorrelation_times(a, c, 0.03, 1e-320, 2**31 + 5, exact=True), "momentum")
    assert momentum.momentum_autocorrelation_times(a, c, 0.03, 0.5, 10, exact=True).exponential > 0
    # stationary_covariance itself names F where I - F (x) F is singular in the floats
    _named(lambda: exact_law.stationary_covariance(np.diag([1.0 - 1e-17, 0.5]), np.eye(2)), "F")
